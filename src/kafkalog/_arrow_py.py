"""Columnar decoding and encoding of Kafka log entries - the pure-Python twin of ``_arrow``.

This module knows nothing about pyarrow: it turns log entries into the raw *buffers* of Arrow
columns (fixed-width values, validity bitmaps, 32-bit offsets and data), and columns back into
v2 record batches.  ``kafkalog.arrow`` wraps the buffers into ``pyarrow`` arrays without copying
(``pa.Array.from_buffers``) and is the public API; use that.

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
* ``encode(n, offset, timestamp, timestamp_type, key, value, headers, **batch options)``:
  v2 batches (bytes), identical to what :class:`~kafkalog.MemoryRecordsBuilder` builds for
  the same records, split into batches by size/count.
* ``COL_*`` column bits and ``COLUMN_BITS`` (name -> bit).

The pure twin decodes with the record API (``_batch_py``/``_legacy_py``), so its tables are the
record-by-record decoder's by construction; the compiled twin must produce identical tables.
"""

from __future__ import annotations

import array
import bisect
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._format import (
    CONTROL_FLAG_MASK,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32_MAX,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from .errors import (
    CorruptRecordError,
    DecompressedSizeError,
    DecompressionError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaLogError,
    RecordTooLargeError,
    UnsupportedCompressionError,
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
    "encode",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "python"

# -- column bits (shared with the compiled twin, which repeats them as an enum) -------------
COL_OFFSET = 1 << 0
COL_TIMESTAMP = 1 << 1
COL_TIMESTAMP_TYPE = 1 << 2
COL_KEY = 1 << 3
COL_VALUE = 1 << 4
COL_HEADERS = 1 << 5
COL_PRODUCER_ID = 1 << 6
COL_PRODUCER_EPOCH = 1 << 7
COL_BASE_SEQUENCE = 1 << 8
COL_IS_TRANSACTIONAL = 1 << 9
COL_IS_CONTROL = 1 << 10
COL_LEADER_EPOCH = 1 << 11
COL_COMPRESSION = 1 << 12
COL_BATCH_OFFSET = 1 << 13
COL_POSITION = 1 << 14
COL_ALL = (1 << 15) - 1

# Column names are spark-sql-kafka's (key, value, offset, timestamp, timestampType, headers)
# plus the batch metadata names of kafkalog's Spark source.
COLUMN_BITS: Dict[str, int] = {
    "key": COL_KEY,
    "value": COL_VALUE,
    "offset": COL_OFFSET,
    "timestamp": COL_TIMESTAMP,
    "timestampType": COL_TIMESTAMP_TYPE,
    "headers": COL_HEADERS,
    "producerId": COL_PRODUCER_ID,
    "producerEpoch": COL_PRODUCER_EPOCH,
    "baseSequence": COL_BASE_SEQUENCE,
    "isTransactional": COL_IS_TRANSACTIONAL,
    "isControl": COL_IS_CONTROL,
    "leaderEpoch": COL_LEADER_EPOCH,
    "compression": COL_COMPRESSION,
    "batchOffset": COL_BATCH_OFFSET,
    "position": COL_POSITION,
}

# Largest data buffer of one binary/string column in one chunk (Arrow ``binary`` has int32
# offsets).  A chunk that would pass it ends before the entry that does.
MAX_CHUNK_DATA = INT32_MAX

_ENTRY = struct.Struct(">qi")
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


# -- errors shared by both twins ---------------------------------------------------------------
# The compiled twin reports (code, position, offset, a, b) and builds the exception with
# ``_error`` so that both twins raise the same class with the same message.
E_ENTRY_SIZE = 1
E_TOO_LARGE = 2
E_MAGIC = 3
E_BATCH_SIZE = 4
E_CRC = 5
E_COUNT_NEGATIVE = 6
E_CODEC = 7
E_COUNT_TOO_LARGE = 8
E_RECORD_SIZE = 9
E_EMPTY_BODY = 10
E_KEY = 11
E_VALUE = 12
E_HEADER_COUNT_NEGATIVE = 13
E_HEADER_COUNT_TOO_LARGE = 14
E_HEADER_KEY_NEGATIVE = 15
E_HEADER_KEY = 16
E_HEADER_VALUE = 17
E_RECORD_CONSUMED = 18
E_RECORDS_REMAINING = 19
E_VARINT_TRUNCATED = 20
E_VARINT_TOO_LONG = 21
E_VARLONG_TRUNCATED = 22
E_VARLONG_TOO_LONG = 23
E_DECOMPRESS = 24
E_DECOMPRESSED_SIZE = 25
E_CHUNK_TOO_LARGE = 26
E_NO_MEMORY = 27
E_PREMATURE_EOF = 28
E_LEGACY_V1_SIZE = 29
E_LEGACY_KEY = 30
E_LEGACY_VALUE = 31
E_WRAPPER_ZSTD = 32
E_WRAPPER_NULL = 33
E_INNER_SIZE = 34
E_INNER_MAGIC = 35
E_INNER_KEY = 36
E_INNER_VALUE = 37
E_INNER_COMPRESSED = 38
E_INNER_CRC = 39
E_INNER_EMPTY = 40
E_WRAPPER_OFFSET = 41
E_INNER_OVERFLOW = 42
E_BATCH_TRUNCATED = 43


def _error(
    code: int,
    position: int,
    offset: Optional[int],
    a: int = 0,
    b: int = 0,
    c: int = 0,
    detail: str = "",
) -> Exception:
    """The exception for an error code (messages follow ``_batch_py``'s and ``_legacy_py``'s,
    i.e. Kafka's)."""
    if code == E_ENTRY_SIZE:
        return CorruptRecordError(
            f"Record size {a} is smaller than the minimum record overhead ({RECORD_OVERHEAD_V0})",
            position,
            offset,
        )
    if code == E_TOO_LARGE:
        return RecordTooLargeError(
            f"Record size {a} exceeds the largest allowable message size ({b})", position, offset
        )
    if code == E_MAGIC:
        return CorruptRecordError(f"Invalid magic found in record: {a}", position, offset)
    if code == E_BATCH_SIZE:
        return CorruptRecordError(
            f"Record batch is corrupt (the size {a} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})",
            position,
            offset,
        )
    if code == E_CRC:
        return CorruptRecordError(
            f"Record is corrupt (stored crc = {a}, computed crc = {b})", position, offset
        )
    if code == E_COUNT_NEGATIVE:
        return CorruptRecordError(
            f"Found invalid record count {a} in magic v2 batch", position, offset
        )
    if code == E_CODEC:
        return CorruptRecordError(f"Unknown compression type id {a}", position, offset)
    if code == E_COUNT_TOO_LARGE:
        return CorruptRecordError(
            f"Found invalid record count {a} in magic v2 batch: more than the {b} bytes of records",
            position,
            offset,
        )
    if code == E_RECORD_SIZE:
        return CorruptRecordError(
            f"Invalid record size: expected {a} bytes in record payload, but instead the buffer has "
            f"only {b} remaining bytes",
            position,
            offset,
        )
    if code == E_EMPTY_BODY:
        return CorruptRecordError(
            "Found invalid record structure: empty record body", position, offset
        )
    if code == E_KEY:
        return CorruptRecordError(
            "Found invalid record structure: key runs past the record", position, offset
        )
    if code == E_VALUE:
        return CorruptRecordError(
            "Found invalid record structure: value runs past the record", position, offset
        )
    if code == E_HEADER_COUNT_NEGATIVE:
        return CorruptRecordError(f"Found invalid number of record headers {a}", position, offset)
    if code == E_HEADER_COUNT_TOO_LARGE:
        return CorruptRecordError(
            f"Found invalid number of record headers {a}: more than the {b} bytes left in the record",
            position,
            offset,
        )
    if code == E_HEADER_KEY_NEGATIVE:
        return CorruptRecordError(f"Invalid negative header key size {a}", position, offset)
    if code == E_HEADER_KEY:
        return CorruptRecordError(
            "Found invalid record structure: header key runs past the record", position, offset
        )
    if code == E_HEADER_VALUE:
        return CorruptRecordError(
            "Found invalid record structure: header value runs past the record", position, offset
        )
    if code == E_RECORD_CONSUMED:
        return CorruptRecordError(
            f"Invalid record size: expected to read {a} bytes in record payload, but instead read {b}",
            position,
            offset,
        )
    if code == E_RECORDS_REMAINING:
        return CorruptRecordError(
            "Incorrect declared batch size, records still remaining in file", position, offset
        )
    if code in (E_VARINT_TRUNCATED, E_VARLONG_TRUNCATED):
        what = "varint" if code == E_VARINT_TRUNCATED else "varlong"
        return CorruptRecordError(
            f"Found invalid record structure: {what} is truncated: the buffer ends inside it",
            position,
            offset,
        )
    if code in (E_VARINT_TOO_LONG, E_VARLONG_TOO_LONG):
        what, n = ("varint", 5) if code == E_VARINT_TOO_LONG else ("varlong", 10)
        return CorruptRecordError(
            f"Found invalid record structure: {what} is too long: the most significant bit of byte {n} is set",
            position,
            offset,
        )
    if code == E_DECOMPRESS:
        return DecompressionError(detail or "Failed to decompress the records", position, offset)
    if code == E_DECOMPRESSED_SIZE:
        return DecompressedSizeError(
            f"Decompressed records exceed the limit of {b} bytes (max_decompressed_size)",
            position,
            offset,
        )
    if code == E_CHUNK_TOO_LARGE:
        return RecordTooLargeError(
            f"Record batch holds more than {MAX_CHUNK_DATA} bytes of one binary column, too many for "
            f"an Arrow binary array",
            position,
            offset,
        )
    if code == E_LEGACY_V1_SIZE:
        return CorruptRecordError(
            f"Record size {a} is smaller than the minimum v1 record overhead (22)", position, offset
        )
    if code in (E_LEGACY_KEY, E_LEGACY_VALUE):
        what = "key" if code == E_LEGACY_KEY else "value"
        return CorruptRecordError(
            f"Found invalid message structure: {what} size {a} runs past the end of the {b}-byte message",
            position,
            offset,
        )
    if code == E_WRAPPER_ZSTD:
        return InvalidRecordError(
            f"Invalid wrapper compression type zstd (4) in a magic {a} message: zstd needs magic 2",
            position,
            offset,
        )
    if code == E_WRAPPER_NULL:
        return InvalidRecordError(
            f"Found invalid compressed record set with null value (magic = {a})", position, offset
        )
    if code == E_INNER_SIZE:
        return CorruptRecordError(
            f"Inner record size {a} is less than the minimum record overhead "
            f"({RECORD_OVERHEAD_V0})",
            position,
            offset,
        )
    if code == E_INNER_MAGIC:
        return CorruptRecordError(f"Invalid magic {a} in legacy inner message", position, offset)
    if code in (E_INNER_KEY, E_INNER_VALUE):
        what = "key" if code == E_INNER_KEY else "value"
        return CorruptRecordError(
            f"Found invalid inner message structure: {what} size {a} runs past the end of the "
            f"{b}-byte message",
            position,
            offset,
        )
    if code == E_INNER_COMPRESSED:
        return InvalidRecordError(
            "Inner messages must not be compressed (nested wrapper)", position, offset
        )
    if code == E_INNER_CRC:
        return CorruptRecordError(
            f"Inner record at offset {c} is corrupt (stored crc = {a}, computed crc = {b})",
            position,
            offset,
        )
    if code == E_INNER_EMPTY:
        return InvalidRecordError(
            "Found invalid compressed record set with no inner records", position, offset
        )
    if code == E_WRAPPER_OFFSET:
        return InvalidRecordError(
            f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{a}' is "
            f"less than the last inner message offset '{b}' and it is not zero.",
            position,
            offset,
        )
    if code == E_INNER_OVERFLOW:
        return InvalidRecordError(
            f"Inner message offset {a} overflows when rebased on {b & 0xFFFFFFFFFFFFFFFF}",
            position,
            offset,
        )
    if code == E_BATCH_TRUNCATED:  # (no offset: the header could not be read)
        return CorruptRecordError(
            f"Record batch is truncated: {a} bytes, less than the {RECORD_BATCH_OVERHEAD}-byte header",
            position,
        )
    if code == E_PREMATURE_EOF:
        return CorruptRecordError(
            "Incorrect declared batch size, premature EOF reached", position, offset
        )
    if code == E_NO_MEMORY:
        return MemoryError("out of memory while decoding to Arrow buffers")
    return KafkaLogError(f"unknown decoding error {code}", position, offset)


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


def normalize_aborted(aborted) -> Tuple[Tuple[int, int, int], ...]:
    """Sorted ``(producer_id, first_offset, last_offset)`` tuples from tuples or objects."""
    out = []
    for t in aborted or ():
        if isinstance(t, (tuple, list)):
            pid, first, last = int(t[0]), int(t[1]), int(t[2])
        else:
            pid, first, last = int(t.producer_id), int(t.first_offset), int(t.last_offset)
        out.append((pid, first, last))
    out.sort()
    return tuple(out)


def is_aborted(aborted: Sequence[Tuple[int, int, int]], producer_id: int, offset: int) -> bool:
    """Whether ``offset`` of ``producer_id`` lies in one of the (sorted) aborted ranges."""
    i = bisect.bisect_right(aborted, (producer_id, offset, 2**63)) - 1
    if i < 0:
        return False
    pid, first, last = aborted[i]
    return pid == producer_id and first <= offset <= last


class Chunk:
    """The buffers of one decoded chunk (see the module docstring)."""

    __slots__ = (
        "columns",
        "num_rows",
        "num_batches",
        "next_position",
        "done",
        "truncated",
        "offset",
        "timestamp",
        "timestamp_type",
        "key_validity",
        "key_offsets",
        "key_data",
        "key_null_count",
        "value_validity",
        "value_offsets",
        "value_data",
        "value_null_count",
        "headers_validity",
        "headers_offsets",
        "headers_null_count",
        "header_count",
        "header_key_offsets",
        "header_key_data",
        "header_key_invalid_utf8",
        "header_value_validity",
        "header_value_offsets",
        "header_value_data",
        "header_value_null_count",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
        "leader_epoch",
        "compression",
        "batch_offset",
        "position",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, None)

    def __repr__(self) -> str:
        return (
            f"Chunk(rows={self.num_rows}, batches={self.num_batches}, "
            f"next_position={self.next_position}, done={self.done}, truncated={self.truncated})"
        )


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
                raise _error(E_ENTRY_SIZE, pos, offset, size)
            if max_batch is not None and size > max_batch:
                raise _error(E_TOO_LARGE, pos, offset, size, max_batch)
            magic = buf[pos + 16]
            if magic > 2:
                raise _error(E_MAGIC, pos, offset, magic - 256 if magic > 127 else magic)
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
                    raise _error(E_CHUNK_TOO_LARGE, pos, offset)
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


# -- encoding -------------------------------------------------------------------------------------
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
    _check_encode_args(
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
                f"Illegal offset {off} following previous offset {prev} (Offsets must increase monotonically)."
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


def _check_encode_args(
    n,
    base_offset,
    compression,
    batch_bytes,
    batch_records,
    producer_id,
    producer_epoch,
    base_sequence,
    partition_leader_epoch,
) -> None:
    if n < 0:
        raise ValueError("n must be >= 0")
    if compression not in (0, 1, 2, 3, 4):
        raise UnsupportedCompressionError(f"Unknown compression type id {compression}")
    if batch_bytes < 1:
        raise ValueError(f"batch_bytes must be >= 1, not {batch_bytes}")
    if batch_records < 1:
        raise ValueError(f"batch_records must be >= 1, not {batch_records}")
    for name, v, lo, hi in (
        ("base_offset", base_offset, -(2**63), 2**63 - 1),
        ("producer_id", producer_id, -(2**63), 2**63 - 1),
        ("producer_epoch", producer_epoch, -(2**15), 2**15 - 1),
        ("base_sequence", base_sequence, -(2**31), 2**31 - 1),
        ("partition_leader_epoch", partition_leader_epoch, -(2**31), 2**31 - 1),
    ):
        if not lo <= v <= hi:
            raise ValueError(f"{name} out of range: {v!r}")
