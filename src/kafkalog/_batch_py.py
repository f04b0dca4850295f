"""Record batches, magic v2 (Kafka's DefaultRecordBatch / DefaultRecord), and the walk over a
buffer of log entries (MemoryRecords) - the pure-Python twin of ``_batch``.

Layout of a v2 batch (61-byte header, big-endian; see ``_format``)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2)
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    baseSequence int32 | recordsCount int32 | records (maybe compressed)

and of a record (varints zig-zag encoded)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value
    headersCount varint | [headerKeyLength varint | headerKey | headerValueLength varint | value]*

Nothing here copies the input buffer: batches and records are parsed from a memoryview.
Every length read from the input is checked against the bytes present before it is used; a
record's fields are read within the record's declared length.  Offsets and timestamps are
computed with Java's 64-bit wrap-around (``baseOffset + offsetDelta`` as a ``long``), so the
twins agree even on nonsense headers.
"""
from __future__ import annotations

import struct
import time
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from . import _records_common
from . import compression as _compression
from ._crc_py import crc32c as _crc32c
from ._format import (
    COMPRESSION_TYPES,
    CONTROL_FLAG_MASK,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    DELETE_HORIZON_FLAG_MASK,
    ENTRY_HEADER,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    LOG_ENTRY_HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPES,
    TRANSACTIONAL_FLAG_MASK,
    V2_HEADER,
    CompressionType,
    TimestampType,
)
from ._varint_py import (
    fault_message,
    scan_raw,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)
from .errors import CorruptRecordError, InvalidOffsetError, RecordTooLargeError

__all__ = [
    "Record",
    "RecordBatch",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "increment_sequence",
    "encode_record_body",
    "record_size",
    "record_size_upper_bound",
    "walk_frames",
]

_ENTRY = ENTRY_HEADER
_ENTRY_MAGIC = LOG_ENTRY_HEADER  # offset, size, magic (signed, as Kafka reads it)
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_NO_HEADERS: Tuple = ()
_M64 = 1 << 64
_M32 = 1 << 32

Header = Tuple[str, Optional[bytes]]


def _legacy():
    from . import _legacy_py

    return _legacy_py


def _wrap64(x: int) -> int:
    """``x`` as a Java ``long`` (two's-complement wrap-around)."""
    if INT64_MIN <= x <= INT64_MAX:
        return x
    return ((x - INT64_MIN) % _M64) + INT64_MIN


def _wrap32(x: int) -> int:
    if -(2**31) <= x <= INT32_MAX:
        return x
    return ((x + 2**31) % _M32) - 2**31


def _as_view(buffer) -> memoryview:
    """A flat unsigned-byte memoryview of ``buffer`` (no copy)."""
    buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if not buf.c_contiguous:
        raise TypeError(
            f"a C-contiguous buffer is required, not a non-contiguous {type(buffer).__name__}"
        )
    if buf.ndim != 1 or buf.format != "B":
        buf = buf.cast("B")
    return buf


class Record:
    """One record: ``offset``, ``timestamp`` (ms), ``key``, ``value`` (bytes or None) and
    ``headers`` (a tuple of ``(str, bytes | None)``)."""

    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: Optional[bytes],
        value: Optional[bytes],
        headers: Tuple[Header, ...] = _NO_HEADERS,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and tuple(self.headers) == tuple(other.headers)
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.key, self.value, self.headers))

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


_records_common.register_record_class(Record)


def _corrupt(msg: str, position: int, offset: Optional[int] = None) -> CorruptRecordError:
    return CorruptRecordError(msg, position, offset)


def decode_records(
    data, count: int, base_offset: int, base_ts: int, append_ts: Optional[int], where: int
) -> List[Record]:
    """Decode exactly ``count`` records from ``data`` (the whole records section).

    Each field is read within its record's declared length.  Errors are raised with the
    batch's position and base offset.
    """
    out: List[Record] = []
    append = out.append
    end = len(data)
    pos = 0

    def fail(msg):
        return _corrupt(msg, where, base_offset)

    def varint(pos, lim):
        raw, nxt = scan_raw(data, pos, lim, 5)
        if nxt < 0:
            raise fail("Found invalid record structure: " + fault_message(nxt, "varint", 5))
        raw &= 0xFFFFFFFF
        return (raw >> 1) ^ -(raw & 1), nxt

    def varlong(pos, lim):
        raw, nxt = scan_raw(data, pos, lim, 10)
        if nxt < 0:
            raise fail("Found invalid record structure: " + fault_message(nxt, "varlong", 10))
        raw &= 0xFFFFFFFFFFFFFFFF
        return (raw >> 1) ^ -(raw & 1), nxt

    # Indexing and slicing bytes is cheaper than a memoryview (an int per index, one object per
    # slice), so the section is copied once.  Varints of one or two bytes - nearly every length,
    # delta and count - are decoded inline; longer ones, and every malformed one, go through
    # varint()/varlong(), which raise the exact error.
    if type(data) is not bytes:
        data = bytes(data)
    I64_MIN, I64_MAX = INT64_MIN, INT64_MAX
    for _ in range(count):
        if pos >= end:
            raise fail("Incorrect declared batch size, premature EOF reached")
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            length = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            length, pos = varint(pos, end)
        if length < 0 or length > end - pos:
            raise fail(
                f"Invalid record size: expected {length} bytes in record payload, "
                f"but instead the buffer has only {end - pos} remaining bytes"
            )
        if length < 1:
            raise fail("Found invalid record structure: empty record body")
        start = pos
        body_end = pos + length
        pos += 1  # attributes (unused)
        if pos < body_end and data[pos] < 0x80:
            b = data[pos]
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            ts_delta, pos = varlong(pos, body_end)
        if pos < body_end and data[pos] < 0x80:
            b = data[pos]
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < body_end and data[pos + 1] < 0x80:
            b = (data[pos] & 0x7F) | (data[pos + 1] << 7)
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            off_delta, pos = varint(pos, body_end)
        if pos < body_end and data[pos] < 0x80:
            b = data[pos]
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            klen, pos = varint(pos, body_end)
        if klen >= 0:
            if klen > body_end - pos:
                raise fail("Found invalid record structure: key runs past the record")
            key = data[pos : pos + klen]
            pos += klen
        else:
            key = None
        if pos < body_end and data[pos] < 0x80:
            b = data[pos]
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < body_end and data[pos + 1] < 0x80:
            b = (data[pos] & 0x7F) | (data[pos + 1] << 7)
            vlen = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            vlen, pos = varint(pos, body_end)
        if vlen >= 0:
            if vlen > body_end - pos:
                raise fail("Found invalid record structure: value runs past the record")
            value = data[pos : pos + vlen]
            pos += vlen
        else:
            value = None
        if pos < body_end and data[pos] < 0x80:
            b = data[pos]
            hcount = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            hcount, pos = varint(pos, body_end)
        if hcount < 0:
            raise fail(f"Found invalid number of record headers {hcount}")
        if hcount == 0:
            headers = _NO_HEADERS
        else:
            if hcount > body_end - pos:
                raise fail(
                    f"Found invalid number of record headers {hcount}: more than the "
                    f"{body_end - pos} bytes left in the record"
                )
            hl = []
            for _h in range(hcount):
                if pos < body_end and data[pos] < 0x80:
                    b = data[pos]
                    hklen = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    hklen, pos = varint(pos, body_end)
                if hklen < 0:
                    raise fail(f"Invalid negative header key size {hklen}")
                if hklen > body_end - pos:
                    raise fail("Found invalid record structure: header key runs past the record")
                hkey = data[pos : pos + hklen].decode("utf-8", "surrogateescape")
                pos += hklen
                if pos < body_end and data[pos] < 0x80:
                    b = data[pos]
                    hvlen = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    hvlen, pos = varint(pos, body_end)
                if hvlen >= 0:
                    if hvlen > body_end - pos:
                        raise fail(
                            "Found invalid record structure: header value runs past the record"
                        )
                    hval = data[pos : pos + hvlen]
                    pos += hvlen
                else:
                    hval = None
                hl.append((hkey, hval))
            headers = tuple(hl)
        if pos != body_end:
            raise fail(
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {pos - start}"
            )
        if append_ts is not None:
            ts = append_ts
        else:
            ts = base_ts + ts_delta
            if ts > I64_MAX or ts < I64_MIN:
                ts = _wrap64(ts)
        off = base_offset + off_delta
        if off > I64_MAX or off < I64_MIN:
            off = _wrap64(off)
        append(Record(off, ts, key, value, headers))
    if pos != end:
        raise fail("Incorrect declared batch size, records still remaining in file")
    return out


class RecordBatch:
    """A magic v2 record batch, read in place from a buffer (Kafka's DefaultRecordBatch).

    ``RecordBatch(buffer, position=0)`` parses the batch that starts at ``position``.  Iterating
    it decodes the records (decompressing if needed); with ``check_crc`` (the default) the CRC
    is verified first, like a consumer with ``check.crcs=true``.
    """

    __slots__ = (
        "_buf",
        "position",
        "base_offset",
        "length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "_check_crc",
        "_max_decompressed",
    )

    def __init__(
        self,
        buffer,
        position: int = 0,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        buf = _as_view(buffer)
        if not isinstance(position, int):
            raise TypeError(f"position must be an int, not {type(position).__name__}")
        if position < 0:
            raise ValueError(f"position must be >= 0, not {position}")
        avail = len(buf) - position
        if avail < RECORD_BATCH_OVERHEAD:
            raise _corrupt(
                f"Record batch is truncated: {max(avail, 0)} bytes, less than the "
                f"{RECORD_BATCH_OVERHEAD}-byte header",
                position,
            )
        (
            self.base_offset,
            self.length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = V2_HEADER.unpack_from(buf, position)
        if self.magic != 2:
            raise _corrupt(
                f"Invalid magic {self.magic} for a v2 record batch", position, self.base_offset
            )
        size = self.length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD:
            raise _corrupt(
                f"Record batch is corrupt (the size {size} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})",
                position,
                self.base_offset,
            )
        if size > avail:
            raise _corrupt(
                f"Record batch is truncated: its size is {size} bytes but only {avail} remain",
                position,
                self.base_offset,
            )
        self._buf = buf
        self.position = position
        self._check_crc = check_crc
        self._max_decompressed = max_decompressed_size

    # -- derived header facts -------------------------------------------------------------
    @property
    def size_in_bytes(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return _wrap64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return _wrap64(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression_type(self) -> CompressionType:
        c = self.attributes & 0x07
        if c > 4:
            raise _corrupt(f"Unknown compression type id {c}", self.position, self.base_offset)
        return COMPRESSION_TYPES[c]

    @property
    def timestamp_type(self) -> TimestampType:
        return TIMESTAMP_TYPES[1 if self.attributes & TIMESTAMP_TYPE_MASK else 0]

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> Optional[int]:
        """The delete horizon set by the log cleaner, or None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > -1

    # -- integrity --------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        """CRC-32C of the batch from the attributes field to its end."""
        start = self.position + 21
        return _crc32c(self._buf[start : self.position + self.length + LOG_OVERHEAD])

    def is_valid(self) -> bool:
        return self.compute_checksum() == self.crc

    def ensure_valid(self) -> None:
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the bytes."""
        computed = self.compute_checksum()
        if computed != self.crc:
            raise _corrupt(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                self.position,
                self.base_offset,
            )

    # -- records ------------------------------------------------------------------------------
    def view(self) -> memoryview:
        """The batch's bytes, without copying."""
        return self._buf[self.position : self.position + self.length + LOG_OVERHEAD]

    def records_section(self):
        """The records section: a memoryview of the buffer, or the decompressed bytes."""
        raw = self._buf[
            self.position + RECORD_BATCH_OVERHEAD : self.position + self.length + LOG_OVERHEAD
        ]
        codec = self.attributes & 0x07
        if codec == 0:
            return raw
        if codec > 4:
            raise _corrupt(f"Unknown compression type id {codec}", self.position, self.base_offset)
        try:
            return _compression.decompress(codec, raw, magic=2, max_size=self._max_decompressed)
        except CorruptRecordError as e:
            e.position = self.position
            e.offset = self.base_offset
            raise

    def records(self) -> List[Record]:
        """Decode every record of the batch into a list."""
        if self._check_crc:
            self.ensure_valid()
        count = self.records_count
        if count < 0:
            raise _corrupt(
                f"Found invalid record count {count} in magic v2 batch",
                self.position,
                self.base_offset,
            )
        if count == 0:
            return []
        data = self.records_section()
        if count > len(data):
            raise _corrupt(
                f"Found invalid record count {count} in magic v2 batch: more than the "
                f"{len(data)} bytes of records",
                self.position,
                self.base_offset,
            )
        append_ts = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        return decode_records(
            data, count, self.base_offset, self.base_timestamp, append_ts, self.position
        )

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return max(self.records_count, 0)

    def __repr__(self) -> str:
        c = self.attributes & 0x07
        codec = COMPRESSION_TYPES[c].kafka_name if c <= 4 else str(c)
        return (
            f"RecordBatch(magic=2, base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, compression={codec}, "
            f"size={self.size_in_bytes}, position={self.position})"
        )


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: wrap past Int.MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class MemoryRecords:
    """A sequence of log entries in a buffer: what a segment file or a fetch response holds.

    ``MemoryRecords(buffer)`` accepts bytes, bytearray, memoryview or mmap without copying.
    Iterating (or :meth:`batches`) yields a :class:`RecordBatch` per v2 batch and a legacy batch
    per v0/v1 log entry, in order.  A short trailing partial entry ends iteration and is
    reported in :attr:`truncated_bytes`, as Kafka does; a malformed entry header raises
    :class:`CorruptRecordError`.
    """

    __slots__ = ("_buf", "_src", "_check_crcs", "_max_batch_size", "_max_decompressed",
                 "_valid_bytes")

    def __init__(
        self,
        buffer,
        *,
        check_crcs: bool = True,
        max_batch_size: Optional[int] = None,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._buf = _as_view(buffer)
        # A bytes input is sliced directly for legacy keys and values (one object per field
        # instead of a memoryview slice and its copy).
        self._src = buffer if type(buffer) is bytes else None
        if max_batch_size is not None and not isinstance(max_batch_size, int):
            raise TypeError(
                f"max_batch_size must be an int or None, not {type(max_batch_size).__name__}"
            )
        self._check_crcs = check_crcs
        self._max_batch_size = max_batch_size
        self._max_decompressed = max_decompressed_size
        self._valid_bytes = -1

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    def buffer(self) -> memoryview:
        return self._buf

    def _next_entry(self, pos: int) -> int:
        """Size of the complete entry at ``pos``, or -1 at a partial tail (raises if corrupt)."""
        buf = self._buf
        remaining = len(buf) - pos
        if remaining <= HEADER_SIZE_UP_TO_MAGIC:  # Kafka's FileLogInputStream: no entry fits
            return -1
        offset, size = _ENTRY.unpack_from(buf, pos)
        if size < RECORD_OVERHEAD_V0:
            raise _corrupt(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                pos,
                offset,
            )
        if self._max_batch_size is not None and size > self._max_batch_size:
            raise RecordTooLargeError(
                f"Record size {size} exceeds the largest allowable message size "
                f"({self._max_batch_size})",
                pos,
                offset,
            )
        magic = buf[pos + 16]
        if magic > 2:
            # Kafka reads the magic as a signed byte.
            raise _corrupt(
                f"Invalid magic found in record: {magic - 256 if magic > 127 else magic}",
                pos,
                offset,
            )
        if remaining < size + LOG_OVERHEAD:
            return -1
        return size + LOG_OVERHEAD

    def batches(self) -> Iterator[Union[RecordBatch, "object"]]:
        # _next_entry's checks, inline: one unpack per entry reads offset, size and magic.
        buf = self._buf
        src = self._src
        end = len(buf)
        pos = 0
        check_crc = bool(self._check_crcs)
        max_size = self._max_batch_size
        max_decompressed = self._max_decompressed
        legacy_at = None
        while end - pos > HEADER_SIZE_UP_TO_MAGIC:  # Kafka's FileLogInputStream: no entry fits
            offset, size, magic = _ENTRY_MAGIC.unpack_from(buf, pos)
            if size < RECORD_OVERHEAD_V0:
                raise _corrupt(
                    f"Record size {size} is smaller than the minimum record overhead "
                    f"({RECORD_OVERHEAD_V0})",
                    pos,
                    offset,
                )
            if max_size is not None and size > max_size:
                raise RecordTooLargeError(
                    f"Record size {size} exceeds the largest allowable message size "
                    f"({max_size})",
                    pos,
                    offset,
                )
            if magic > 2 or magic < 0:
                raise _corrupt(f"Invalid magic found in record: {magic}", pos, offset)
            if end - pos < size + LOG_OVERHEAD:
                break
            if magic == 2:
                yield RecordBatch(
                    buf,
                    pos,
                    check_crc=self._check_crcs,
                    max_decompressed_size=max_decompressed,
                )
            else:
                if legacy_at is None:
                    legacy_at = _legacy().LegacyRecordBatch._at_entry
                yield legacy_at(buf, pos, offset, size, check_crc, max_decompressed, src)
            pos += size + LOG_OVERHEAD
        self._valid_bytes = pos

    __iter__ = batches

    def records(self) -> Iterator[Record]:
        """Every record of every data batch (control batches are skipped), in order."""
        for batch in self.batches():
            if not batch.is_control_batch:
                yield from batch

    def validate(self) -> int:
        """Verify every complete entry (its header, then its CRC) and return how many there are.

        The same checks as iterating the batches and calling ``ensure_valid()`` on each, whatever
        ``check_crcs`` says; raises :class:`CorruptRecordError` at the first bad entry.  A partial
        tail ends the walk (see :attr:`truncated_bytes`).
        """
        n = 0
        for batch in self.batches():
            batch.ensure_valid()
            n += 1
        return n

    @property
    def valid_bytes(self) -> int:
        """Bytes taken by complete entries (walks the entry headers once)."""
        if self._valid_bytes < 0:
            pos = 0
            while True:
                n = self._next_entry(pos)
                if n < 0:
                    break
                pos += n
            self._valid_bytes = pos
        return self._valid_bytes

    @property
    def truncated_bytes(self) -> int:
        """Bytes of the partial entry at the end (0 when the buffer ends on an entry)."""
        return len(self._buf) - self.valid_bytes

    def __repr__(self) -> str:
        return f"MemoryRecords(size={len(self._buf)})"


def _as_bytes_or_none(x, what: str):
    if x is None:
        return None
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, not {type(x).__name__}")


def _byte_len(x, what: str) -> int:
    """Encoded length of a key/value (-1 for None) without copying it."""
    if x is None:
        return -1
    if isinstance(x, (bytes, bytearray)):
        return len(x)
    if isinstance(x, memoryview):
        return x.nbytes
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, not {type(x).__name__}")


def _encode_header_key(k) -> bytes:
    if isinstance(k, str):
        return str.encode(k, "utf-8", "surrogateescape")
    if isinstance(k, (bytes, bytearray, memoryview)):
        return bytes(k)
    raise TypeError(f"header key must be str or bytes, not {type(k).__name__}")


def _header_list(headers):
    if headers is None:
        return _NO_HEADERS
    if isinstance(headers, (tuple, list)):
        return headers
    return tuple(headers)


def encode_record_body(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    """One DefaultRecord (length prefix included)."""
    key = _as_bytes_or_none(key, "key")
    value = _as_bytes_or_none(value, "value")
    headers = _header_list(headers)
    parts = [b"\x00", write_varlong(timestamp_delta), write_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts.append(write_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(write_varint(len(value)))
        parts.append(value)
    parts.append(write_varint(len(headers)))
    for hk, hv in headers:
        kb = _encode_header_key(hk)
        hv = _as_bytes_or_none(hv, "header value")
        parts.append(write_varint(len(kb)))
        parts.append(kb)
        if hv is None:
            parts.append(b"\x01")
        else:
            parts.append(write_varint(len(hv)))
            parts.append(hv)
    body = b"".join(parts)
    return write_varint(len(body)) + body


def _check_timestamp(timestamp) -> None:
    if not isinstance(timestamp, int):
        raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
    if timestamp < 0 and timestamp != -1:
        raise ValueError(f"Invalid negative timestamp {timestamp}")
    if timestamp > INT64_MAX:
        raise ValueError(f"timestamp {timestamp} does not fit in a signed 64-bit integer")


class MemoryRecordsBuilder:
    """Build a record batch (magic 2), or legacy messages (magic 0/1), as Kafka's
    MemoryRecordsBuilder does; ``build()`` returns the bytes.

    ``append(timestamp, key, value, headers=())`` assigns the next offset and returns it.
    ``write_limit`` (bytes) makes :meth:`has_room_for` answer like Kafka's ``hasRoomFor``
    (the exact size of the next record against the uncompressed size so far).
    With ``timestamp_type="log_append_time"`` every record reports ``log_append_time``
    (default: the current time in ms when :meth:`build` runs).  An append that raises leaves
    the builder unchanged.
    """

    def __init__(
        self,
        magic: int = 2,
        compression_type: Union[int, str, CompressionType] = "none",
        base_offset: int = 0,
        timestamp_type: Union[int, str, TimestampType] = "create_time",
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = 0,
        *,
        is_control_batch: bool = False,
        write_limit: Optional[int] = None,
        log_append_time: Optional[int] = None,
        compression_level: Optional[int] = None,
        delete_horizon_ms: Optional[int] = None,
    ) -> None:
        codec = CompressionType.parse(compression_type)
        ts_type = TimestampType.parse(timestamp_type)
        if magic not in (0, 1, 2):
            raise ValueError(f"magic must be 0, 1 or 2, not {magic!r}")
        if write_limit is not None and not isinstance(write_limit, int):
            raise TypeError(f"write_limit must be an int or None, not {type(write_limit).__name__}")
        self.magic = magic
        self.compression_type = codec
        self.timestamp_type = ts_type
        self.base_offset = base_offset
        self._write_limit = write_limit
        if magic < 2:
            self._legacy = _legacy().LegacyRecordsBuilder(
                magic,
                codec,
                base_offset,
                ts_type,
                write_limit=write_limit,
                log_append_time=log_append_time,
                compression_level=compression_level,
            )
            if is_transactional or is_control_batch or producer_id != -1:
                raise ValueError(
                    f"transactional, control and idempotent batches need magic 2, not {magic}"
                )
            return
        self._legacy = None
        if ts_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("magic 2 batches need CreateTime or LogAppendTime")
        for name, v, lo, hi in (
            ("base_offset", base_offset, -(2**63), 2**63 - 1),
            ("producer_id", producer_id, -(2**63), 2**63 - 1),
            ("producer_epoch", producer_epoch, -(2**15), 2**15 - 1),
            ("base_sequence", base_sequence, -(2**31), 2**31 - 1),
            ("partition_leader_epoch", partition_leader_epoch, -(2**31), 2**31 - 1),
            (
                "log_append_time",
                -1 if log_append_time is None else log_append_time,
                -(2**63),
                2**63 - 1,
            ),
            (
                "delete_horizon_ms",
                -1 if delete_horizon_ms is None else delete_horizon_ms,
                -(2**63),
                2**63 - 1,
            ),
        ):
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} out of range: {v!r}")
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = bool(is_transactional)
        self.is_control_batch = bool(is_control_batch)
        self.partition_leader_epoch = partition_leader_epoch
        self._log_append_time = log_append_time
        self._level = compression_level
        self._delete_horizon = delete_horizon_ms
        self._parts: List[bytes] = []
        self._size = 0  # bytes of uncompressed records
        self._count = 0
        self._first_ts: Optional[int] = None
        self._max_ts = -1
        self._last_offset: Optional[int] = None
        self._busy = False

    # -- appending ----------------------------------------------------------------------------
    def append(self, timestamp: int, key, value, headers: Sequence[Header] = ()) -> int:
        """Append a record at the next offset; returns that offset."""
        if self._legacy is not None:
            return self._legacy.append(timestamp, key, value, headers)
        offset = self.base_offset if self._last_offset is None else self._last_offset + 1
        self.append_with_offset(offset, timestamp, key, value, headers)
        return offset

    def try_append(
        self, timestamp: int, key, value, headers: Sequence[Header] = ()
    ) -> Optional[int]:
        """:meth:`has_room_for` then :meth:`append` in one call: the new record's offset, or
        None (and nothing appended) when it does not fit under ``write_limit``."""
        if not self.has_room_for(timestamp, key, value, headers):
            return None
        return self.append(timestamp, key, value, headers)

    def append_with_offset(
        self, offset: int, timestamp: int, key, value, headers: Sequence[Header] = ()
    ) -> None:
        if self._legacy is not None:
            return self._legacy.append_with_offset(offset, timestamp, key, value, headers)
        if not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if self._last_offset is not None and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Illegal offset {offset} following previous offset {self._last_offset} "
                f"(Offsets must increase monotonically)."
            )
        if offset < self.base_offset or offset - self.base_offset > INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored relative to base offset {self.base_offset}"
            )
        _check_timestamp(timestamp)
        if self._busy:
            raise RuntimeError("MemoryRecordsBuilder.append re-entered while appending")
        self._busy = True  # header iteration may run user code: it must not append here
        try:
            key = _as_bytes_or_none(key, "key")
            value = _as_bytes_or_none(value, "value")
            headers = _header_list(headers)
            first = self._first_ts
            if first is None:
                first = self._delete_horizon if self._delete_horizon is not None else timestamp
            rec = encode_record_body(
                offset - self.base_offset, _wrap64(timestamp - first), key, value, headers
            )
        finally:
            self._busy = False
        self._first_ts = first
        self._parts.append(rec)
        self._size += len(rec)
        self._count += 1
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._last_offset = offset

    def estimated_size_in_bytes(self) -> int:
        """Bytes of the batch if built now, before compression."""
        if self._legacy is not None:
            return self._legacy.estimated_size_in_bytes()
        return RECORD_BATCH_OVERHEAD + self._size

    def has_room_for(self, timestamp: int, key, value, headers: Sequence[Header] = ()) -> bool:
        """Whether the next record fits under ``write_limit`` (always true for the first record)."""
        if self._legacy is not None:
            return self._legacy.has_room_for(timestamp, key, value, headers)
        if self._count == 0 or self._write_limit is None:
            return True
        _check_timestamp(timestamp)
        size = _record_size(
            _wrap32(self._last_offset + 1 - self.base_offset),
            _wrap64(timestamp - self._first_ts),
            _byte_len(key, "key"),
            _byte_len(value, "value"),
            _header_list(headers),
        )
        return RECORD_BATCH_OVERHEAD + self._size + size <= self._write_limit

    @property
    def records_count(self) -> int:
        if self._legacy is not None:
            return self._legacy.records_count
        return self._count

    def __len__(self) -> int:
        return self.records_count

    # -- building -----------------------------------------------------------------------------
    def build(self) -> bytes:
        """The batch bytes (b"" when no record was appended)."""
        if self._legacy is not None:
            return self._legacy.build()
        if self._count == 0:
            return b""
        records = b"".join(self._parts)
        codec = int(self.compression_type)
        if codec:
            records = _compression.compress(codec, records, magic=2, level=self._level)
        attributes = codec
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
            max_ts = (
                self._log_append_time
                if self._log_append_time is not None
                else int(time.time() * 1000)
            )
        else:
            max_ts = self._max_ts
        if self.is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.is_control_batch:
            attributes |= CONTROL_FLAG_MASK
        if self._delete_horizon is not None:
            attributes |= DELETE_HORIZON_FLAG_MASK
        size = RECORD_BATCH_OVERHEAD + len(records)
        if size - LOG_OVERHEAD > INT32_MAX:
            raise RecordTooLargeError(
                f"Record batch of {size} bytes is larger than the format allows "
                f"({INT32_MAX + LOG_OVERHEAD} bytes)"
            )
        header = bytearray(
            V2_HEADER.pack(
                self.base_offset,
                size - LOG_OVERHEAD,
                self.partition_leader_epoch,
                2,
                0,
                attributes,
                self._last_offset - self.base_offset,
                self._first_ts,
                max_ts,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                self._count,
            )
        )
        crc = _crc32c(memoryview(header)[21:])
        crc = _crc32c(records, crc)
        _U32.pack_into(header, 17, crc)
        return bytes(header) + records


def record_size_upper_bound(key, value, headers: Sequence[Header] = ()) -> int:
    """An upper bound on a record's encoded size (Kafka's estimateSizeInBytesUpperBound)."""
    size = 21  # MAX_RECORD_OVERHEAD
    size += 5 + max(_byte_len(key, "key"), 0)
    size += 5 + max(_byte_len(value, "value"), 0)
    size += 5
    for hk, hv in _header_list(headers):
        kb = _encode_header_key(hk)
        size += 5 + len(kb) + 5 + max(_byte_len(hv, "header value"), 0)
    return size


def _record_size(offset_delta: int, timestamp_delta: int, klen: int, vlen: int, headers) -> int:
    body = 1 + size_of_varlong(timestamp_delta) + size_of_varint(offset_delta)
    body += 1 if klen < 0 else size_of_varint(klen) + klen
    body += 1 if vlen < 0 else size_of_varint(vlen) + vlen
    body += size_of_varint(len(headers))
    for hk, hv in headers:
        kb = _encode_header_key(hk)
        hvlen = _byte_len(hv, "header value")
        body += size_of_varint(len(kb)) + len(kb)
        body += 1 if hvlen < 0 else size_of_varint(hvlen) + hvlen
    return size_of_varint(body) + body


def record_size(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> int:
    """Exact encoded size of a record, length prefix included (Kafka's sizeInBytes)."""
    return _record_size(
        offset_delta,
        timestamp_delta,
        _byte_len(key, "key"),
        _byte_len(value, "value"),
        _header_list(headers),
    )

# -- framing a run of log entries (the read model's scans) -------------------------------------
def walk_frames(buf, p: int, n: int, left: int, end: int, max_size: int,
                seen: int, stop_at_gaps: bool = False) -> Tuple[int, int]:
    """Walk the whole log entries of ``buf[p:n]`` that need no second look:
    ``(position of the first entry not walked, the offset after the last one walked)``, with
    ``seen`` returned unchanged when none is.  An entry stops the walk where fewer than 17 of
    its bytes are in ``buf``, where its framing is not sound (size below 14, magic above 2, a v2
    batch under 61 bytes, more bytes than the ``left`` the segment has from ``buf``'s start,
    a size above ``max_size``), where its offset is below ``seen`` (offsets go backwards: the
    caller judges the entry; ``seen`` is never negative), huge, or at or past ``end``
    (``end`` >= 0; -1: no end), with ``stop_at_gaps`` also where it is above ``seen`` (a gap
    in the offsets) and the entry after it is not in ``buf`` or goes on from below the jump
    (the caller judges it: ``storage.segment.gap_is_damage``), or where it is not wholly in
    ``buf``: the caller handles that entry.  The offset after an entry is its last offset + 1
    (a v2 batch's base offset + its last offset delta + 1; a legacy entry's offset + 1)."""
    if p < 0 or p > n or n > len(buf):
        raise ValueError(f"walk_frames: bad range [{p}, {n}) of {len(buf)} bytes")
    unpack = _ENTRY.unpack_from
    while n - p >= 17:
        off, length = unpack(buf, p)
        magic = buf[p + 16]
        total = length + 12
        if (length < 14 or magic > 2 or (magic == 2 and total < 61) or total > left - p
                or length > max_size):
            break
        if off < seen or off > 0x7FFFFFFF00000000 or (end >= 0 and off >= end):
            break
        if total > n - p:
            break
        if stop_at_gaps and off > seen:
            # a gap: the entry after it says whether it is one (the caller judges where that
            # entry's header is not here, or it goes on from below the jump)
            q = p + total
            if n - q < 17:
                break
            noff, nlen = unpack(buf, q)
            nmagic = buf[q + 16]
            if (nlen >= 14 and nmagic <= 2 and (nmagic != 2 or nlen >= 49)
                    and seen <= noff < off):
                break
        if magic == 2:
            seen = off + _I32.unpack_from(buf, p + 23)[0] + 1
        else:
            seen = off + 1
        p += total
    return p, seen
