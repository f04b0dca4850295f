"""Columnar encoding: Arrow buffers into v2 record batches - the pure-Python twin of
``_arrow_encode``.

``encode(n, offset, timestamp, timestamp_type, key, value, headers, **batch options)`` gives
v2 batches (bytes), identical to what :class:`~kafkalog.MemoryRecordsBuilder` builds for the
same records, split into batches by size/count; ``kafkalog.arrow.from_arrow`` is the public
API.  This twin builds each batch with the record API (``_batch_py``), so its bytes are the
builder's by construction; the compiled twin must produce identical bytes.
"""

from __future__ import annotations

from typing import List, Optional

from ._arrow_common import check_encode_args
from ._format import INT32_MAX, RECORD_BATCH_OVERHEAD
from .errors import InvalidOffsetError

__all__ = ["IMPLEMENTATION", "encode"]

IMPLEMENTATION = "python"


def _batch_mod():
    from . import _batch_py

    return _batch_py


class _Col:
    """Random access to one Arrow column given as raw buffers (pure twin)."""

    __slots__ = ("valid", "data", "offsets", "base", "fmt")

    def __init__(self, desc, fmt: Optional[str]) -> None:
        # desc: (validity, data, array_offset) for fixed width,
        #       (validity, offsets, data, array_offset) for binary
        if fmt is None:
            validity, offsets, data, base = desc
            self.offsets = memoryview(offsets).cast("B").cast("i")
            self.data = memoryview(data).cast("B") if data is not None else memoryview(b"")
        else:
            validity, data, base = desc
            self.offsets = None
            self.data = memoryview(data).cast("B").cast(fmt)
        self.valid = memoryview(validity).cast("B") if validity is not None else None
        self.base = base
        self.fmt = fmt

    def is_null(self, i: int) -> bool:
        if self.valid is None:
            return False
        j = self.base + i
        return not (self.valid[j >> 3] >> (j & 7)) & 1

    def value(self, i: int):
        return self.data[self.base + i]

    def binary(self, i: int) -> Optional[bytes]:
        if self.is_null(i):
            return None
        j = self.base + i
        return bytes(self.data[self.offsets[j] : self.offsets[j + 1]])


def _headers_reader(desc):
    """A function ``i -> tuple of (bytes key, bytes|None value)`` over a headers column."""
    (list_valid, list_offsets, list_base, struct_valid, struct_base, key_desc, value_desc) = desc
    lv = memoryview(list_valid).cast("B") if list_valid is not None else None
    lo = memoryview(list_offsets).cast("B").cast("i")
    sv = memoryview(struct_valid).cast("B") if struct_valid is not None else None
    kc = _Col(key_desc, None)
    vc = _Col(value_desc, None)

    def get(i: int):
        j = list_base + i
        if lv is not None and not (lv[j >> 3] >> (j & 7)) & 1:
            return ()
        out = []
        for e in range(lo[j], lo[j + 1]):
            s = struct_base + e
            if sv is not None and not (sv[s >> 3] >> (s & 7)) & 1:
                raise ValueError(f"row {i}: a header is null (Kafka headers need a key)")
            k = kc.binary(e)
            if k is None:
                raise ValueError(f"row {i}: a header key is null (Kafka rejects null header keys)")
            out.append((k, vc.binary(e)))
        return tuple(out)

    return get


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def encode(
    n: int,
    offset=None,
    timestamp=None,
    timestamp_type=None,
    key=None,
    value=None,
    headers=None,
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: Optional[int] = None,
    batch_bytes: int = 1048576,
    batch_records: int = INT32_MAX,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = 0,
) -> bytes:
    """Encode ``n`` rows given as Arrow buffers into v2 record batches (see ``kafkalog.arrow``).

    A batch holds at least one record, at most ``batch_records``, and is closed before a record
    that would take its uncompressed size (61-byte header included) past ``batch_bytes``; also
    where the timestamp type changes, where a LogAppendTime timestamp changes, and where an
    offset delta would overflow int32.  Each batch is exactly the bytes
    :class:`~kafkalog.MemoryRecordsBuilder` builds for its records.
    """
    check_encode_args(
        n,
        base_offset,
        compression,
        batch_bytes,
        batch_records,
        producer_id,
        producer_epoch,
        base_sequence,
        partition_leader_epoch,
    )
    bm = _batch_mod()
    Builder = bm.MemoryRecordsBuilder
    record_size = bm.record_size
    oc = _Col(offset, "q") if offset is not None else None
    tc = _Col(timestamp, "q") if timestamp is not None else None
    yc = _Col(timestamp_type, "i") if timestamp_type is not None else None
    kc = _Col(key, None) if key is not None else None
    vc = _Col(value, None) if value is not None else None
    hget = _headers_reader(headers) if headers is not None else None

    out: List[bytes] = []
    builder = None
    b_base = b_first_ts = b_type = b_size = b_count = 0
    prev = None
    rows_before = 0
    for i in range(n):
        if oc is not None:
            if oc.is_null(i):
                raise ValueError(f"row {i}: offset is null")
            off = oc.value(i)
        else:
            off = base_offset + i
        ts = -1 if tc is None or tc.is_null(i) else tc.value(i)
        if ts < 0 and ts != -1:
            raise ValueError(f"Invalid negative timestamp {ts}")
        ttype = 0 if yc is None or yc.is_null(i) else yc.value(i)
        ttype = 1 if ttype == 1 else 0
        k = kc.binary(i) if kc is not None else None
        v = vc.binary(i) if vc is not None else None
        h = hget(i) if hget is not None else ()
        if prev is not None and off <= prev:
            raise InvalidOffsetError(
                f"Illegal offset {off} following previous offset {prev} (Offsets must increase "
                f"monotonically)."
            )
        if off > 2**63 - 1 or off < -(2**63):
            raise ValueError(f"row {i}: offset {off} out of range")
        if builder is not None:
            new_batch = (
                b_count >= batch_records
                or off - b_base > INT32_MAX
                or ttype != b_type
                or (ttype == 1 and ts != b_first_ts)
            )
            if not new_batch:
                rs = record_size(off - b_base, ts - b_first_ts, k, v, h)
                new_batch = b_size + rs > batch_bytes
            if new_batch:
                out.append(builder.build())
                rows_before += b_count
                builder = None
        if builder is None:
            seq = -1 if base_sequence == -1 else _increment_sequence(base_sequence, rows_before)
            builder = Builder(
                2,
                compression,
                off,
                "log_append_time" if ttype == 1 else "create_time",
                producer_id,
                producer_epoch,
                seq,
                is_transactional,
                partition_leader_epoch,
                log_append_time=ts if ttype == 1 else None,
                compression_level=compression_level,
            )
            b_base, b_first_ts, b_type, b_count = off, ts, ttype, 0
            b_size = RECORD_BATCH_OVERHEAD + record_size(0, 0, k, v, h)
        else:
            b_size += record_size(off - b_base, ts - b_first_ts, k, v, h)
        builder.append_with_offset(off, ts, k, v, h)
        b_count += 1
        prev = off
    if builder is not None:
        out.append(builder.build())
    return b"".join(out)
