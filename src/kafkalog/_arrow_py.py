"""Columnar decoding of Kafka log entries - the pure-Python twin of ``_arrow``.

This module knows nothing about pyarrow: it turns log entries into the raw *buffers* of Arrow
columns (fixed-width values, validity bitmaps, 32-bit offsets and data); ``_arrow_encode_py``
turns columns back into v2 record batches.  ``kafkalog.arrow`` wraps the buffers into
``pyarrow`` arrays without copying (``pa.Array.from_buffers``) and is the public API; use that.

Both twins export the same names:

* ``Decoder(columns, *, check_crcs, include_control, max_batch_size, max_decompressed_size,
  timestamp_scale, aborted)`` with ``decode(buffer, start=0, stop=None, max_rows=None,
  max_bytes=None) -> Chunk``: decodes every complete log entry that *starts* in
  ``[start, stop)`` (an entry may end after ``stop``; a partial entry at the end of the buffer
  ends decoding, as in Kafka), up to the soft limits ``max_rows`` / ``max_bytes`` (checked
  between entries; a chunk holds whole entries).
* ``Chunk``: ``num_rows``, ``num_batches``, ``next_position`` (where to resume), ``done``,
  ``truncated`` (stopped at a partial trailing entry) and one attribute per buffer (``None``
  for a column that was not requested, or for a validity bitmap without nulls).
* ``COL_*`` column bits and ``COLUMN_BITS`` (name -> bit).

Those, and the errors both raise, are defined once in ``_arrow_common``.  The pure twin
decodes with the record API (``_batch_py``/``_legacy_py``), so its tables are the
record-by-record decoder's by construction; the compiled twin must produce identical tables.
"""

from __future__ import annotations

import array
import bisect
from typing import Any, Optional, Sequence, Tuple

from ._arrow_common import (
    COL_ALL,
    COL_BASE_SEQUENCE,
    COL_BATCH_OFFSET,
    COL_COMPRESSION,
    COL_HEADERS,
    COL_IS_CONTROL,
    COL_IS_TRANSACTIONAL,
    COL_KEY,
    COL_LEADER_EPOCH,
    COL_OFFSET,
    COL_POSITION,
    COL_PRODUCER_EPOCH,
    COL_PRODUCER_ID,
    COL_TIMESTAMP,
    COL_TIMESTAMP_TYPE,
    COL_VALUE,
    COLUMN_BITS,
    E_CHUNK_TOO_LARGE,
    E_ENTRY_SIZE,
    E_MAGIC,
    E_TOO_LARGE,
    MAX_CHUNK_DATA,
    Chunk,
    decode_error,
    normalize_aborted,
)
from ._format import (
    CONTROL_FLAG_MASK,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    ENTRY_HEADER,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)

__all__ = [
    "COL_OFFSET",
    "COL_TIMESTAMP",
    "COL_TIMESTAMP_TYPE",
    "COL_KEY",
    "COL_VALUE",
    "COL_HEADERS",
    "COL_PRODUCER_ID",
    "COL_PRODUCER_EPOCH",
    "COL_BASE_SEQUENCE",
    "COL_IS_TRANSACTIONAL",
    "COL_IS_CONTROL",
    "COL_LEADER_EPOCH",
    "COL_COMPRESSION",
    "COL_BATCH_OFFSET",
    "COL_POSITION",
    "COL_ALL",
    "COLUMN_BITS",
    "MAX_CHUNK_DATA",
    "Chunk",
    "Decoder",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "python"

_ENTRY = ENTRY_HEADER
_U64 = (1 << 64) - 1


def _wrap64(v: int) -> int:
    """Two's-complement int64 wrap (the compiled twin adds with uint64 arithmetic, as Java)."""
    v &= _U64
    return v - (1 << 64) if v >> 63 else v


def _batch_mod():
    from . import _batch_py

    return _batch_py


def _legacy_mod():
    from . import _legacy_py

    return _legacy_py


# -- helpers -------------------------------------------------------------------------------------
def _pack_bits(flags: bytearray) -> bytes:
    """Pack one 0/1 byte per row into an LSB-first bitmap, as Arrow lays them out."""
    n = len(flags)
    out = bytearray((n + 7) // 8)
    for i in range(0, n, 8):
        byte = 0
        for j, f in enumerate(flags[i : i + 8]):
            if f:
                byte |= 1 << j
        out[i >> 3] = byte
    return bytes(out)


def _valid_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_aborted(aborted: Sequence[Tuple[int, int, int]], producer_id: int, offset: int) -> bool:
    """Whether ``offset`` of ``producer_id`` lies in one of the (sorted) aborted ranges."""
    i = bisect.bisect_right(aborted, (producer_id, offset, 2**63)) - 1
    if i < 0:
        return False
    pid, first, last = aborted[i]
    return pid == producer_id and first <= offset <= last


class _Builder:
    """Growable column buffers for the pure twin (``array`` / ``bytearray``)."""

    def __init__(self, cols: int) -> None:
        self.cols = cols
        self.rows = 0
        self.batches = 0
        self.offset = array.array("q")
        self.timestamp = array.array("q")
        self.timestamp_type = array.array("i")
        self.key_valid = bytearray()
        self.key_offsets = array.array("i", [0])
        self.key_data = bytearray()
        self.value_valid = bytearray()
        self.value_offsets = array.array("i", [0])
        self.value_data = bytearray()
        self.h_valid = bytearray()
        self.h_offsets = array.array("i", [0])
        self.hk_offsets = array.array("i", [0])
        self.hk_data = bytearray()
        self.hk_bad = False
        self.hv_valid = bytearray()
        self.hv_offsets = array.array("i", [0])
        self.hv_data = bytearray()
        self.pid = array.array("q")
        self.epoch = array.array("h")
        self.seq = array.array("i")
        self.txn = bytearray()
        self.ctrl = bytearray()
        self.lepoch = array.array("i")
        self.codec = array.array("b")
        self.boff = array.array("q")
        self.pos = array.array("q")

    # Every growable sequence, for mark/rollback.
    _SEQS = (
        "offset",
        "timestamp",
        "timestamp_type",
        "key_valid",
        "key_offsets",
        "key_data",
        "value_valid",
        "value_offsets",
        "value_data",
        "h_valid",
        "h_offsets",
        "hk_offsets",
        "hk_data",
        "hv_valid",
        "hv_offsets",
        "hv_data",
        "pid",
        "epoch",
        "seq",
        "txn",
        "ctrl",
        "lepoch",
        "codec",
        "boff",
        "pos",
    )

    def data_bytes(self) -> int:
        return len(self.key_data) + len(self.value_data) + len(self.hk_data) + len(self.hv_data)

    def mark(self):
        return (self.rows, self.batches, self.hk_bad, [len(getattr(self, s)) for s in self._SEQS])

    def rollback(self, m) -> None:
        self.rows, self.batches, self.hk_bad, lens = m
        for s, n in zip(self._SEQS, lens):
            del getattr(self, s)[n:]

    def overflowed(self) -> bool:
        return (
            max(len(self.key_data), len(self.value_data), len(self.hk_data), len(self.hv_data))
            > MAX_CHUNK_DATA
        )

    def add(self, offset, timestamp, ts_type, key, value, headers, meta) -> None:
        cols = self.cols
        self.rows += 1
        if cols & COL_OFFSET:
            self.offset.append(_wrap64(offset))
        if cols & COL_TIMESTAMP:
            self.timestamp.append(timestamp)
        if cols & COL_TIMESTAMP_TYPE:
            self.timestamp_type.append(ts_type)
        if cols & COL_KEY:
            if key is None:
                self.key_valid.append(0)
            else:
                self.key_valid.append(1)
                self.key_data += key
            self.key_offsets.append(len(self.key_data))
        if cols & COL_VALUE:
            if value is None:
                self.value_valid.append(0)
            else:
                self.value_valid.append(1)
                self.value_data += value
            self.value_offsets.append(len(self.value_data))
        if cols & COL_HEADERS:
            if headers:
                self.h_valid.append(1)
                for hk, hv in headers:
                    kb = hk.encode("utf-8", "surrogateescape") if isinstance(hk, str) else bytes(hk)
                    if not self.hk_bad and not _valid_utf8(kb):
                        self.hk_bad = True
                    self.hk_data += kb
                    self.hk_offsets.append(len(self.hk_data))
                    if hv is None:
                        self.hv_valid.append(0)
                    else:
                        self.hv_valid.append(1)
                        self.hv_data += hv
                    self.hv_offsets.append(len(self.hv_data))
            else:
                self.h_valid.append(0)
            self.h_offsets.append(len(self.hk_offsets) - 1)
        if meta is not None:
            pid, epoch, seq, txn, ctrl, lepoch, codec, boff, pos = meta
            if cols & COL_PRODUCER_ID:
                self.pid.append(pid)
            if cols & COL_PRODUCER_EPOCH:
                self.epoch.append(epoch)
            if cols & COL_BASE_SEQUENCE:
                self.seq.append(seq)
            if cols & COL_IS_TRANSACTIONAL:
                self.txn.append(txn)
            if cols & COL_IS_CONTROL:
                self.ctrl.append(ctrl)
            if cols & COL_LEADER_EPOCH:
                self.lepoch.append(lepoch)
            if cols & COL_COMPRESSION:
                self.codec.append(codec)
            if cols & COL_BATCH_OFFSET:
                self.boff.append(boff)
            if cols & COL_POSITION:
                self.pos.append(pos)

    def finish(self, next_position: int, done: bool, truncated: bool) -> Chunk:
        c = Chunk()
        cols = self.cols
        c.columns = cols
        c.num_rows = self.rows
        c.num_batches = self.batches
        c.next_position = next_position
        c.done = done
        c.truncated = truncated
        if cols & COL_OFFSET:
            c.offset = self.offset
        if cols & COL_TIMESTAMP:
            c.timestamp = self.timestamp
        if cols & COL_TIMESTAMP_TYPE:
            c.timestamp_type = self.timestamp_type
        if cols & COL_KEY:
            nulls = self.rows - sum(self.key_valid)
            c.key_null_count = nulls
            c.key_validity = _pack_bits(self.key_valid) if nulls else None
            c.key_offsets = self.key_offsets
            c.key_data = self.key_data
        if cols & COL_VALUE:
            nulls = self.rows - sum(self.value_valid)
            c.value_null_count = nulls
            c.value_validity = _pack_bits(self.value_valid) if nulls else None
            c.value_offsets = self.value_offsets
            c.value_data = self.value_data
        if cols & COL_HEADERS:
            nulls = self.rows - sum(self.h_valid)
            c.headers_null_count = nulls
            c.headers_validity = _pack_bits(self.h_valid) if nulls else None
            c.headers_offsets = self.h_offsets
            c.header_count = len(self.hk_offsets) - 1
            c.header_key_offsets = self.hk_offsets
            c.header_key_data = self.hk_data
            c.header_key_invalid_utf8 = self.hk_bad
            hv_nulls = c.header_count - sum(self.hv_valid)
            c.header_value_null_count = hv_nulls
            c.header_value_validity = _pack_bits(self.hv_valid) if hv_nulls else None
            c.header_value_offsets = self.hv_offsets
            c.header_value_data = self.hv_data
        if cols & COL_PRODUCER_ID:
            c.producer_id = self.pid
        if cols & COL_PRODUCER_EPOCH:
            c.producer_epoch = self.epoch
        if cols & COL_BASE_SEQUENCE:
            c.base_sequence = self.seq
        if cols & COL_IS_TRANSACTIONAL:
            c.is_transactional = _pack_bits(self.txn)
        if cols & COL_IS_CONTROL:
            c.is_control = _pack_bits(self.ctrl)
        if cols & COL_LEADER_EPOCH:
            c.leader_epoch = self.lepoch
        if cols & COL_COMPRESSION:
            c.compression = self.codec
        if cols & COL_BATCH_OFFSET:
            c.batch_offset = self.boff
        if cols & COL_POSITION:
            c.position = self.pos
        return c


_META_COLS = (
    COL_PRODUCER_ID
    | COL_PRODUCER_EPOCH
    | COL_BASE_SEQUENCE
    | COL_IS_TRANSACTIONAL
    | COL_IS_CONTROL
    | COL_LEADER_EPOCH
    | COL_COMPRESSION
    | COL_BATCH_OFFSET
    | COL_POSITION
)


class Decoder:
    """Decode log entries into column buffers (see the module docstring).

    ``columns`` is a bit set of ``COL_*``; ``timestamp_scale`` multiplies every timestamp
    (1: milliseconds, 1000: microseconds); ``aborted`` is a sequence of
    ``(producer_id, first_offset, last_offset)`` aborted transactions whose transactional data
    batches are dropped (read_committed).
    """

    def __init__(
        self,
        columns: int = COL_ALL,
        *,
        check_crcs: bool = True,
        include_control: bool = False,
        max_batch_size: Optional[int] = None,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        timestamp_scale: int = 1,
        aborted: Optional[Sequence[Tuple[int, int, int]]] = None,
    ) -> None:
        if not isinstance(columns, int) or columns < 0 or columns > COL_ALL:
            raise ValueError(f"columns must be a bit set of COL_* values, not {columns!r}")
        if timestamp_scale not in (1, 1000):
            raise ValueError(f"timestamp_scale must be 1 or 1000, not {timestamp_scale!r}")
        if max_decompressed_size < 0:
            raise ValueError("max_decompressed_size must be >= 0")
        self.columns = columns
        self.check_crcs = bool(check_crcs)
        self.include_control = bool(include_control)
        self.max_batch_size = max_batch_size
        self.max_decompressed_size = max_decompressed_size
        self.timestamp_scale = timestamp_scale
        self.aborted = normalize_aborted(aborted)

    def decode(
        self,
        buffer: Any,
        start: int = 0,
        stop: Optional[int] = None,
        max_rows: Optional[int] = None,
        max_bytes: Optional[int] = None,
    ) -> Chunk:
        buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if buf.ndim != 1 or buf.itemsize != 1:
            buf = buf.cast("B")
        n = len(buf)
        if stop is None or stop > n:
            stop = n
        if start < 0 or start > n:
            raise ValueError(f"start {start} outside the buffer (0..{n})")
        max_rows = -1 if max_rows is None else max_rows
        max_bytes = -1 if max_bytes is None else max_bytes
        b = _Builder(self.columns)
        pos = start
        truncated = False
        done = False
        max_batch = self.max_batch_size
        while True:
            if pos >= stop:
                done = True
                break
            remaining = n - pos
            if remaining <= HEADER_SIZE_UP_TO_MAGIC:  # as MemoryRecords: no entry fits
                truncated = done = True
                break
            offset, size = _ENTRY.unpack_from(buf, pos)
            if size < RECORD_OVERHEAD_V0:
                raise decode_error(E_ENTRY_SIZE, pos, offset, size)
            if max_batch is not None and size > max_batch:
                raise decode_error(E_TOO_LARGE, pos, offset, size, max_batch)
            magic = buf[pos + 16]
            if magic > 2:
                raise decode_error(E_MAGIC, pos, offset, magic - 256 if magic > 127 else magic)
            if remaining < size + LOG_OVERHEAD:
                truncated = done = True
                break
            if b.rows > 0 and (
                (max_rows >= 0 and b.rows >= max_rows)
                or (max_bytes >= 0 and b.data_bytes() >= max_bytes)
            ):
                break
            m = b.mark()
            if magic == 2:
                self._v2(b, buf, pos)
            else:
                self._legacy(b, buf, pos)
            if b.overflowed():
                if m[0] == 0:
                    raise decode_error(E_CHUNK_TOO_LARGE, pos, offset)
                b.rollback(m)
                break
            pos += size + LOG_OVERHEAD
        return b.finish(pos, done, truncated)

    # -- one v2 batch ----------------------------------------------------------------------
    def _v2(self, b: _Builder, buf: memoryview, pos: int) -> None:
        batch = _batch_mod().RecordBatch(
            buf, pos, check_crc=self.check_crcs, max_decompressed_size=self.max_decompressed_size
        )
        attrs = batch.attributes
        control = attrs & CONTROL_FLAG_MASK
        if (control and not self.include_control) or (
            self.aborted
            and attrs & TRANSACTIONAL_FLAG_MASK
            and not control
            and is_aborted(self.aborted, batch.producer_id, batch.base_offset)
        ):
            if self.check_crcs:
                batch.ensure_valid()
            return
        records = batch.records()
        b.batches += 1
        ts_type = 1 if attrs & TIMESTAMP_TYPE_MASK else 0
        meta = None
        if self.columns & _META_COLS:
            meta = (
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                1 if attrs & TRANSACTIONAL_FLAG_MASK else 0,
                1 if control else 0,
                batch.partition_leader_epoch,
                attrs & 0x07,
                batch.base_offset,
                pos,
            )
        scale = self.timestamp_scale
        add = b.add
        for r in records:
            ts = _wrap64(r.timestamp)
            if scale != 1:
                ts = _wrap64(ts * scale)
            add(r.offset, ts, ts_type, r.key, r.value, r.headers, meta)

    # -- one v0/v1 entry (a message, or a compressed wrapper) -----------------------------
    def _legacy(self, b: _Builder, buf: memoryview, pos: int) -> None:
        batch = _legacy_mod().LegacyRecordBatch(
            buf, pos, check_crc=self.check_crcs, max_decompressed_size=self.max_decompressed_size
        )
        records = batch.records()
        b.batches += 1
        if not records:  # a wrapper of an empty message set
            return
        ts_type = int(batch.timestamp_type)
        meta = None
        if self.columns & _META_COLS:
            meta = (-1, -1, -1, 0, 0, -1, int(batch.compression_type), batch.base_offset, pos)
        scale = self.timestamp_scale
        for r in records:
            ts = r.timestamp
            if scale != 1:
                ts = _wrap64(ts * scale)
            b.add(r.offset, ts, ts_type, r.key, r.value, r.headers, meta)
