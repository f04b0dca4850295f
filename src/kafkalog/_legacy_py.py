"""Legacy messages, magic v0 and v1 (Kafka's LegacyRecord / AbstractLegacyRecordBatch /
the legacy half of MemoryRecordsBuilder) - the pure-Python twin of ``_legacy``.

Layout of one log entry (big-endian; see ``_format``)::

    offset int64 | size int32 | crc uint32 (CRC-32 of magic..end) | magic int8 (0 or 1)
    attributes int8 | [timestamp int64, v1 only] | keyLength int32 | key | valueLength int32 | value

``size`` counts the bytes after the size field (the message).  Attributes bits 0-2 are the codec
(0 none, 1 gzip, 2 snappy, 3 lz4; zstd is illegal below magic 2), bit 3 the timestamp type
(v1 only: 0 CreateTime, 1 LogAppendTime).  A negative key or value length means null.

A compressed entry is a *wrapper*: its key is null and its value is the compressed bytes of a
sequence of ordinary, uncompressed log entries (the inner messages).  Inner offsets are absolute
for magic 0; for magic 1 they are relative and the wrapper carries the absolute offset of the
last inner message (``absolute = wrapper offset - last inner offset + inner offset``; a wrapper
offset of 0 means "use the inner offsets as they are", as Kafka does for some librdkafka
producers).  A LogAppendTime wrapper's timestamp overrides the inner messages' timestamps.

Nothing here copies the input buffer: entries are parsed from a memoryview.  Key and value
bytes are copied into each :class:`LegacyRecord`, which holds no reference to the buffer.
"""
from __future__ import annotations

import operator
import struct
import time
import zlib
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from . import _records_common
from ._format import (
    COMPRESSION_TYPES,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    ENTRY_HEADER,
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    LEGACY_TIMESTAMP_TYPE_MASK,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    V0_ENTRY_HEADER,
    V0_MESSAGE_HEAD,
    V1_ENTRY_HEADER,
    V1_MESSAGE_HEAD,
    CompressionType,
    TimestampType,
)
from .errors import CorruptRecordError, InvalidOffsetError, InvalidRecordError, KafkaLogError

__all__ = ["LegacyRecord", "LegacyRecordBatch", "LegacyRecordsBuilder", "record_size"]

_ENTRY = ENTRY_HEADER  # offset, size
_MSG = struct.Struct(">Ibb")  # crc, magic, attributes (body-relative offset 0)
_TS_KLEN = struct.Struct(">qi")  # a v1 message's timestamp and key length
_V1_MSG = V1_MESSAGE_HEAD  # a v1 message's crc, magic, attributes, timestamp, key length
_V0_MSG = V0_MESSAGE_HEAD  # a v0 message's crc, magic, attributes, key length
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_V0_HEADER = V0_ENTRY_HEADER  # offset, size, crc, magic, attributes, keyLength
_V1_HEADER = V1_ENTRY_HEADER  # ... timestamp, keyLength
_NO_HEADERS: Tuple = ()

_TS_TYPES = (
    TimestampType.NO_TIMESTAMP_TYPE,
    TimestampType.CREATE_TIME,
    TimestampType.LOG_APPEND_TIME,
)  # indexed by ts_type + 1

_compression = None


def _codecs():
    """``kafkalog.compression``, imported on first use (keeps uncompressed paths light)."""
    global _compression
    if _compression is None:
        from . import compression

        _compression = compression
    return _compression




def _as_bytes_or_none(x, what: str) -> Optional[bytes]:
    if x is None:
        return None
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, not {type(x).__name__}")


def _header_size(magic: int) -> int:
    return RECORD_OVERHEAD_V1 if magic else RECORD_OVERHEAD_V0


def _crc32(data, value: int = 0, software: bool = False) -> int:
    """CRC-32 (zlib's) of a contiguous buffer, chained from ``value`` (``software`` is accepted
    for parity with the compiled twin, which has a table path and a PCLMULQDQ path)."""
    return zlib.crc32(memoryview(data).cast("B"), value)


_CRC32_HARDWARE = False


def record_size(magic: int, key, value) -> int:
    """Size of one message without the 12-byte log overhead (Kafka's LegacyRecord.recordSize)."""
    return (
        _header_size(magic)
        + (len(key) if key is not None else 0)
        + (len(value) if value is not None else 0)
    )


class LegacyRecord:
    """One legacy message (magic 0 or 1): ``offset``, ``timestamp`` (ms, -1 for magic 0),
    ``key``, ``value`` (bytes or None) and ``headers`` (always ``()``), plus the message's own
    ``magic``, ``attributes``, stored ``crc`` and ``timestamp_type``.

    Inner messages of a compressed wrapper report absolute offsets, the wrapper's timestamp
    type and, under LogAppendTime, the wrapper's timestamp; :meth:`is_valid` still checks the
    CRC of the bytes as stored.  ``size_in_bytes`` is the message size without the 12-byte log
    overhead (Kafka's ``LegacyRecord.sizeInBytes``).

    ``LegacyRecord(offset, timestamp, key, value, magic=1, attributes=0)`` builds one by
    hand; its CRC is computed from the fields.
    """

    __slots__ = (
        "offset",
        "timestamp",
        "key",
        "value",
        "magic",
        "attributes",
        "crc",
        "_ts_type",
        "_raw_ts",
        "_klen",
        "_vlen",
        "_trailing",
    )

    headers: Tuple = _NO_HEADERS

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: Optional[bytes],
        value: Optional[bytes],
        magic: int = 1,
        attributes: int = 0,
    ) -> None:
        if magic not in (0, 1):
            raise ValueError(f"magic must be 0 or 1, not {magic!r}")
        if not isinstance(offset, int) or not INT64_MIN <= offset <= INT64_MAX:
            raise ValueError(f"offset out of range: {offset!r}")
        if not isinstance(timestamp, int) or not INT64_MIN <= timestamp <= INT64_MAX:
            raise ValueError(f"timestamp out of range: {timestamp!r}")
        if not isinstance(attributes, int) or not -128 <= attributes <= 127:
            raise ValueError(f"attributes must be an int8, not {attributes!r}")
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        self.offset = int(offset)
        self.key = key
        self.value = value
        self.magic = magic
        self.attributes = attributes
        if magic == 0:
            self.timestamp = -1
            self._raw_ts = -1
            self._ts_type = -1
        else:
            self.timestamp = int(timestamp)
            self._raw_ts = timestamp
            self._ts_type = 1 if attributes & LEGACY_TIMESTAMP_TYPE_MASK else 0
        self._klen = -1 if key is None else len(key)
        self._vlen = -1 if value is None else len(value)
        self._trailing = None
        self.crc = self.compute_checksum()

    @property
    def timestamp_type(self) -> TimestampType:
        """NO_TIMESTAMP_TYPE for magic 0; for an inner message, its wrapper's type."""
        return _TS_TYPES[self._ts_type + 1]

    @property
    def compression_type(self) -> CompressionType:
        c = self.attributes & 0x07
        if c > 4:
            raise CorruptRecordError(f"Unknown compression type id {c}", None, self.offset)
        return COMPRESSION_TYPES[c]

    @property
    def is_compressed(self) -> bool:
        return (self.attributes & 0x07) != 0

    @property
    def size_in_bytes(self) -> int:
        n = _header_size(self.magic)
        if self._klen > 0:
            n += self._klen
        if self._vlen > 0:
            n += self._vlen
        if self._trailing is not None:
            n += len(self._trailing)
        return n

    def compute_checksum(self) -> int:
        """CRC-32 of the message as stored, from the magic byte to its end."""
        if self.magic:
            head = struct.pack(">bbqi", self.magic, self.attributes, self._raw_ts, self._klen)
        else:
            head = struct.pack(">bbi", self.magic, self.attributes, self._klen)
        crc = zlib.crc32(head)
        if self.key is not None:
            crc = zlib.crc32(self.key, crc)
        crc = zlib.crc32(_I32.pack(self._vlen), crc)
        if self.value is not None:
            crc = zlib.crc32(self.value, crc)
        if self._trailing is not None:
            crc = zlib.crc32(self._trailing, crc)
        return crc

    def is_valid(self) -> bool:
        return self.compute_checksum() == self.crc

    def ensure_valid(self) -> None:
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the bytes."""
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                None,
                self.offset,
            )

    def __eq__(self, other):
        if not isinstance(other, _records_common.EQ_CLASSES):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and tuple(other.headers) == ()
        )

    def __ne__(self, other):
        eq = self.__eq__(other)
        if eq is NotImplemented:
            return eq
        return not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"LegacyRecord(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, magic={self.magic}, attributes={self.attributes}, "
            f"crc={self.crc})"
        )


_records_common.register_record_class(LegacyRecord)


def _parse_message(
    buf, start: int, size: int, offset: int, where: int, where_offset: int, inner: bool,
    src=None,
):
    """Parse the message body ``buf[start:start+size]`` (from its CRC field) into a
    LegacyRecord with ``offset``.  Errors report ``where`` / ``where_offset``.  ``src``, when
    given, is a bytes object with the same content as ``buf``: keys and values are sliced from
    it directly."""
    end = start + size
    magic = buf[start + 4]
    if magic == 1 and size >= RECORD_OVERHEAD_V1:
        crc, magic, attrs, raw_ts, klen = _V1_MSG.unpack_from(buf, start)
        p = start + 18
    elif magic == 0:  # size >= RECORD_OVERHEAD_V0: every caller checked it
        crc, magic, attrs, klen = _V0_MSG.unpack_from(buf, start)
        raw_ts = -1
        p = start + 10
    else:
        what = "inner message" if inner else "message"
        if magic != 1:
            raise CorruptRecordError(
                f"Invalid magic {magic - 256 if magic > 127 else magic} in legacy {what}",
                where, where_offset)
        raise CorruptRecordError(
            f"Record size {size} is smaller than the minimum v1 record overhead "
            f"({RECORD_OVERHEAD_V1})",
            where,
            where_offset,
        )
    if klen >= 0:
        if klen > end - p - 4:
            what = "inner message" if inner else "message"
            raise CorruptRecordError(
                f"Found invalid {what} structure: key size {klen} runs past the end of the "
                f"{size}-byte message",
                where,
                where_offset,
            )
        key = src[p : p + klen] if src is not None else bytes(buf[p : p + klen])
        p += klen
    else:
        key = None
    vlen = _I32.unpack_from(buf, p)[0]
    p += 4
    if vlen >= 0:
        if vlen > end - p:
            what = "inner message" if inner else "message"
            raise CorruptRecordError(
                f"Found invalid {what} structure: value size {vlen} runs past the end of the "
                f"{size}-byte message",
                where,
                where_offset,
            )
        value = src[p : p + vlen] if src is not None else bytes(buf[p : p + vlen])
        p += vlen
    else:
        value = None
    rec = LegacyRecord.__new__(LegacyRecord)
    rec.offset = offset
    rec.timestamp = raw_ts
    rec.key = key
    rec.value = value
    rec.magic = magic
    rec.attributes = attrs
    rec.crc = crc
    rec._ts_type = (1 if attrs & LEGACY_TIMESTAMP_TYPE_MASK else 0) if magic else -1
    rec._raw_ts = raw_ts
    rec._klen = klen
    rec._vlen = vlen
    rec._trailing = None if p >= end else (
        src[p:end] if src is not None else bytes(buf[p:end]))
    return rec


class LegacyRecordBatch:
    """One legacy log entry (magic 0 or 1), read in place from a buffer: Kafka's
    AbstractLegacyRecordBatch, with the same attributes as the v2 :class:`RecordBatch`.

    An uncompressed entry holds one message; a compressed one is a wrapper whose value holds the
    inner messages.  ``base_offset``, ``last_offset_delta``, ``records_count`` and ``len()`` of
    a wrapper need the inner messages, so the first of them decompresses the wrapper (once;
    the result is cached).  Iterating (or :meth:`records`) yields :class:`LegacyRecord` objects
    with absolute offsets; with ``check_crc`` (the default) the CRC of the entry, and of every
    inner message, is verified first.  Errors carry the entry's ``position`` and ``offset``.
    """

    __slots__ = (
        "_buf",
        "position",
        "offset",
        "length",
        "crc",
        "magic",
        "attributes",
        "timestamp",
        "_check_crc",
        "_max_decompressed",
        "_inner",
        "_src",
    )

    def __init__(
        self,
        buffer,
        position: int = 0,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if buf.ndim != 1 or buf.itemsize != 1:
            buf = buf.cast("B")
        if type(position) is not int:
            position = operator.index(position)
        avail = len(buf) - position
        if position < 0 or avail < LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Legacy log entry is truncated: {max(avail, 0)} bytes, "
                f"less than the {LOG_OVERHEAD}-byte log overhead",
                position,
            )
        offset, size = _ENTRY.unpack_from(buf, position)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                position,
                offset,
            )
        if size > avail - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Legacy log entry is truncated: its size is {size + LOG_OVERHEAD} bytes but "
                f"only {avail} remain",
                position,
                offset,
            )
        crc, magic, attrs = _MSG.unpack_from(buf, position + LOG_OVERHEAD)
        if magic != 0 and magic != 1:
            raise CorruptRecordError(
                f"Invalid magic {magic} for a legacy (v0/v1) message", position, offset
            )
        if magic:
            if size < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(
                    f"Record size {size} is smaller than the minimum v1 record overhead "
                    f"({RECORD_OVERHEAD_V1})",
                    position,
                    offset,
                )
            self.timestamp = _I64.unpack_from(buf, position + 18)[0]
        else:
            self.timestamp = -1
        self._buf = buf
        self.position = position
        self.offset = offset
        self.length = size
        self.crc = crc
        self.magic = magic
        self.attributes = attrs
        self._check_crc = bool(check_crc)
        self._max_decompressed = max_decompressed_size
        self._inner = None
        self._src = buffer if type(buffer) is bytes else None

    @classmethod
    def _at_entry(cls, buf, position: int, offset: int, size: int, check_crc: bool,
                  max_decompressed_size, src=None) -> "LegacyRecordBatch":
        """The entry at ``position`` of the 1-D byte view ``buf``, whose header MemoryRecords
        has checked already (``offset``/``size`` read, size at least the v0 overhead, the entry
        complete, magic 0 or 1): the rest of ``__init__``'s checks, then the fields.  ``src``:
        the bytes object ``buf`` views, if it is one."""
        self = cls.__new__(cls)
        crc, magic, attrs = _MSG.unpack_from(buf, position + LOG_OVERHEAD)
        if magic:
            if size < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(
                    f"Record size {size} is smaller than the minimum v1 record overhead "
                    f"({RECORD_OVERHEAD_V1})",
                    position,
                    offset,
                )
            self.timestamp = _I64.unpack_from(buf, position + 18)[0]
        else:
            self.timestamp = -1
        self._buf = buf
        self.position = position
        self.offset = offset
        self.length = size
        self.crc = crc
        self.magic = magic
        self.attributes = attrs
        self._check_crc = check_crc
        self._max_decompressed = max_decompressed_size
        self._inner = None
        self._src = src
        return self

    # -- header facts (same names as the v2 RecordBatch) ------------------------------------------
    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    is_transactional = False
    is_control_batch = False
    has_producer_id = False
    has_delete_horizon = False
    delete_horizon_ms = None

    @property
    def size_in_bytes(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """The entry's offset: the (last) message's absolute offset."""
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """The first message's offset (decompresses a wrapper)."""
        if self.attributes & 0x07 == 0:
            return self.offset
        inner = self._load()
        if not inner:  # an empty compressed set (read leniently): the entry's own offset
            return self.offset
        return inner[0].offset

    @property
    def last_offset_delta(self) -> int:
        return self.offset - self.base_offset

    @property
    def base_timestamp(self) -> int:
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def records_count(self) -> int:
        if self.attributes & 0x07 == 0:
            return 1
        return len(self._load())

    @property
    def compression_type(self) -> CompressionType:
        c = self.attributes & 0x07
        if c > 4:
            raise CorruptRecordError(f"Unknown compression type id {c}", self.position, self.offset)
        return COMPRESSION_TYPES[c]

    @property
    def is_compressed(self) -> bool:
        return (self.attributes & 0x07) != 0

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType(1 if self.attributes & LEGACY_TIMESTAMP_TYPE_MASK else 0)

    @property
    def wrapper(self) -> LegacyRecord:
        """The entry's own message (for a wrapper: null key, compressed value)."""
        return _parse_message(
            self._buf, self.position + LOG_OVERHEAD, self.length, self.offset,
            self.position, self.offset, False, self._src,
        )

    # -- integrity ---------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        """CRC-32 of the message from the magic byte to the end of the entry."""
        start = self.position + LOG_OVERHEAD + 4
        return zlib.crc32(self._buf[start : self.position + LOG_OVERHEAD + self.length])

    def is_valid(self) -> bool:
        return self.compute_checksum() == self.crc

    def ensure_valid(self) -> None:
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the bytes."""
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                self.position,
                self.offset,
            )

    # -- records -----------------------------------------------------------------------------------
    def view(self) -> memoryview:
        """The entry's bytes, without copying."""
        return self._buf[self.position : self.position + LOG_OVERHEAD + self.length]

    def records_section(self):
        """The entry's message set: for a wrapper its value decompressed (the inner entries),
        otherwise the entry itself (a message set of one)."""
        codec = self.attributes & 0x07
        if codec == 0:
            return self.view()
        if codec > 4:
            raise CorruptRecordError(
                f"Unknown compression type id {codec}", self.position, self.offset
            )
        value = self.wrapper.value
        if value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self.magic})",
                self.position,
                self.offset,
            )
        try:
            return _codecs().decompress(
                codec, value, magic=self.magic, max_size=self._max_decompressed
            )
        except KafkaLogError as e:
            e.position = self.position
            e.offset = self.offset
            raise

    def _load(self) -> List[LegacyRecord]:
        """The inner messages of a wrapper (Kafka's DeepRecordsIterator), cached."""
        inner = self._inner
        if inner is not None:
            return inner
        where = self.position
        woff = self.offset
        codec = self.attributes & 0x07
        if codec > 4:
            raise CorruptRecordError(f"Unknown compression type id {codec}", where, woff)
        # zstd below magic 2 is refused by brokers on produce but written by some clients
        # (sarama): it is read leniently, as every other codec.
        if self._check_crc:
            self.ensure_valid()
        wrapper = self.wrapper
        if wrapper.value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self.magic})",
                where,
                woff,
            )
        try:
            data = _codecs().decompress(
                codec, wrapper.value, magic=self.magic, max_size=self._max_decompressed
            )
        except KafkaLogError as e:
            e.position = where
            e.offset = woff
            raise
        if not len(data):
            # A wrapper compressing an empty message set (written by some clients): no records.
            self._inner = []
            return self._inner
        inner = _parse_inner(
            data, self.magic, woff, self.timestamp,
            bool(self.attributes & LEGACY_TIMESTAMP_TYPE_MASK), self._check_crc, where,
        )
        self._inner = inner
        return inner

    def records(self) -> List[LegacyRecord]:
        """The messages of the entry as a list, with absolute offsets."""
        if self.attributes & 0x07 == 0:
            if self._check_crc:
                self.ensure_valid()
            return [self.wrapper]
        return list(self._load())

    def __iter__(self) -> Iterator[LegacyRecord]:
        if self.attributes & 0x07 == 0:  # one message: the entry's own
            if self._check_crc:
                self.ensure_valid()
            return iter((self.wrapper,))
        return iter(self._load())

    def __len__(self) -> int:
        return self.records_count

    def __repr__(self) -> str:
        c = self.attributes & 0x07
        codec = COMPRESSION_TYPES[c].kafka_name if c <= 4 else f"unknown({c})"
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.offset}, compression={codec}, "
            f"size={self.length + LOG_OVERHEAD}, position={self.position})"
        )


def _parse_inner(data, wrapper_magic: int, wrapper_offset: int, wrapper_ts: int,
                 log_append_time: bool, check_crc: bool, where: int) -> List[LegacyRecord]:
    """Kafka's DeepRecordsIterator over the decompressed value of a wrapper."""
    buf = memoryview(data)
    src = data if type(data) is bytes else None
    n = len(buf)
    pos = 0
    out: List[LegacyRecord] = []
    while n - pos >= LOG_OVERHEAD:
        offset, size = _ENTRY.unpack_from(buf, pos)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Inner record size {size} is less than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                where,
                wrapper_offset,
            )
        if size > n - pos - LOG_OVERHEAD:
            break  # a partial trailing inner entry ends the set (Kafka's DataLogInputStream)
        rec = _parse_message(buf, pos + LOG_OVERHEAD, size, offset, where, wrapper_offset, True,
                             src)
        if rec.attributes & 0x07:
            raise InvalidRecordError(
                "Inner messages must not be compressed (nested wrapper)", where, wrapper_offset
            )
        if check_crc:
            computed = zlib.crc32(buf[pos + LOG_OVERHEAD + 4 : pos + LOG_OVERHEAD + size])
            if computed != rec.crc:
                raise CorruptRecordError(
                    f"Inner record at offset {offset} is corrupt (stored crc = {rec.crc}, "
                    f"computed crc = {computed})",
                    where,
                    wrapper_offset,
                )
        if rec.magic:
            # An inner v1 message takes its wrapper's timestamp type (Kafka's LegacyRecord with a
            # wrapper timestamp type), and the wrapper's timestamp under LogAppendTime.
            if wrapper_magic == 0:
                rec._ts_type = -1
            elif log_append_time:
                rec._ts_type = 1
                rec.timestamp = wrapper_ts
            else:
                rec._ts_type = 0
        out.append(rec)
        pos += LOG_OVERHEAD + size
    if not out:
        raise InvalidRecordError(
            "Found invalid compressed record set with no inner records", where, wrapper_offset
        )
    if wrapper_magic == 1:
        if wrapper_offset == 0:
            base = 0  # produce data from some librdkafka versions: inner offsets as they are
        else:
            last_inner = out[-1].offset
            if wrapper_offset < last_inner:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper_offset}' is less than the last inner message offset "
                    f"'{last_inner}' and it is not zero.",
                    where,
                    wrapper_offset,
                )
            base = wrapper_offset - last_inner
        if base:
            for rec in out:
                o = rec.offset + base
                if o > INT64_MAX:
                    raise InvalidRecordError(
                        f"Inner message offset {rec.offset} overflows when rebased on {base}",
                        where,
                        wrapper_offset,
                    )
                rec.offset = o
    return out


def _write_message(
    out: bytearray, offset: int, magic: int, attributes: int, timestamp: int, key, value
) -> None:
    """Append one log entry (offset, size, CRC-32, magic, attributes, [ts], key, value)."""
    start = len(out)
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    size = record_size(magic, key, value)
    if magic:
        out += _V1_HEADER.pack(offset, size, 0, magic, attributes, timestamp, klen)
    else:
        out += _V0_HEADER.pack(offset, size, 0, magic, attributes, klen)
    if key is not None:
        out += key
    out += _I32.pack(vlen)
    if value is not None:
        out += value
    crc = zlib.crc32(memoryview(out)[start + 16 :])
    _U32.pack_into(out, start + 12, crc)


class LegacyRecordsBuilder:
    """Write legacy messages (magic 0 or 1) as Kafka's MemoryRecordsBuilder does.

    Uncompressed: one log entry per message, carrying its absolute offset.  Compressed: one
    wrapper entry whose value is the compressed inner entries; for magic 1 the inner offsets are
    relative (offset - ``base_offset``) and the wrapper carries the last absolute offset, for
    magic 0 inner offsets are absolute.  The wrapper's timestamp is the largest inner timestamp
    (CreateTime) or the append time (LogAppendTime); under LogAppendTime every message (inner
    ones included) is written with the append time and the LogAppendTime attribute bit, as
    Kafka's builder writes them.  Magic 0 has no timestamps (they are accepted and dropped).

    ``log_append_time`` defaults to the current time in ms when :meth:`build` runs.  zstd is
    refused (``ValueError``), like Kafka ("ZStandard compression is not supported for magic
    0/1"), and so are record headers.
    """

    __slots__ = (
        "magic",
        "compression_type",
        "timestamp_type",
        "base_offset",
        "_write_limit",
        "_log_append_time",
        "_level",
        "_offsets",
        "_timestamps",
        "_keys",
        "_values",
        "_size",
        "_last_offset",
    )

    def __init__(
        self,
        magic: int,
        compression_type: Union[int, str, CompressionType],
        base_offset: int,
        timestamp_type: Union[int, str, TimestampType],
        *,
        write_limit: Optional[int] = None,
        log_append_time: Optional[int] = None,
        compression_level: Optional[int] = None,
    ) -> None:
        if isinstance(magic, bool) or magic not in (0, 1):
            raise ValueError(f"magic must be 0 or 1 for legacy messages, not {magic!r}")
        codec = CompressionType.parse(compression_type)
        if codec == CompressionType.ZSTD:
            raise ValueError(f"ZStandard compression is not supported for magic {magic}")
        ts_type = TimestampType.parse(timestamp_type)
        if magic == 1 and ts_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("TimestampType must be set for magic >= 1")
        if (
            isinstance(base_offset, bool)
            or not isinstance(base_offset, int)
            or not INT64_MIN <= base_offset <= INT64_MAX
        ):
            raise ValueError(f"base_offset out of range: {base_offset!r}")
        if log_append_time is not None and (
            isinstance(log_append_time, bool)
            or not isinstance(log_append_time, int)
            or not INT64_MIN <= log_append_time <= INT64_MAX
        ):
            raise ValueError(f"log_append_time out of range: {log_append_time!r}")
        self.magic = magic
        self.compression_type = codec
        self.timestamp_type = ts_type
        self.base_offset = base_offset
        self._write_limit = write_limit
        self._log_append_time = log_append_time
        self._level = compression_level
        self._offsets: List[int] = []
        self._timestamps: List[int] = []
        self._keys: List[Optional[bytes]] = []
        self._values: List[Optional[bytes]] = []
        self._size = 0  # bytes of (inner) log entries, uncompressed
        self._last_offset: Optional[int] = None

    # -- appending ---------------------------------------------------------------------------------
    def append(self, timestamp: int, key, value, headers: Sequence = ()) -> int:
        """Append a message at the next offset; returns that offset."""
        if self._last_offset is None:
            offset = self.base_offset
        else:  # a Java long: past Long.MAX_VALUE it wraps, and the monotonic check refuses it
            offset = ((self._last_offset + 1 + 2**63) & 0xFFFFFFFFFFFFFFFF) - 2**63
        self.append_with_offset(offset, timestamp, key, value, headers)
        return offset

    def append_with_offset(
        self, offset: int, timestamp: int, key, value, headers: Sequence = ()
    ) -> None:
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if self._last_offset is not None and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Illegal offset {offset} following previous offset {self._last_offset} "
                f"(Offsets must increase monotonically)."
            )
        if (
            offset < self.base_offset
            or offset > INT64_MAX
            or (self.compression_type and self.magic == 1 and offset - self.base_offset > INT64_MAX)
        ):
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored relative to base offset {self.base_offset}"
            )
        if not isinstance(timestamp, int):
            raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
        if timestamp < 0 and timestamp != -1:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        if timestamp > INT64_MAX:
            raise ValueError(f"timestamp out of range: {timestamp}")
        if headers:
            raise ValueError(f"Magic v{self.magic} does not support record headers")
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        if key is not None and len(key) > INT32_MAX:
            raise ValueError("key longer than 2147483647 bytes")
        if value is not None and len(value) > INT32_MAX:
            raise ValueError("value longer than 2147483647 bytes")
        self._offsets.append(offset)
        self._timestamps.append(timestamp)
        self._keys.append(key)
        self._values.append(value)
        self._size += LOG_OVERHEAD + record_size(self.magic, key, value)
        self._last_offset = offset

    def estimated_size_in_bytes(self) -> int:
        """Bytes of the entries if built now, before compression (a wrapper's header included)."""
        if self.compression_type != CompressionType.NONE and self._offsets:
            return LOG_OVERHEAD + _header_size(self.magic) + self._size
        return self._size

    def try_append(self, timestamp: int, key, value, headers: Sequence = ()) -> Optional[int]:
        """:meth:`has_room_for` then :meth:`append` in one call: the new message's offset, or
        None (and nothing appended) when it does not fit under ``write_limit``."""
        if not self.has_room_for(timestamp, key, value, headers):
            return None
        return self.append(timestamp, key, value, headers)

    def has_room_for(self, timestamp: int, key, value, headers: Sequence = ()) -> bool:
        """Whether a message fits under ``write_limit`` (always true for the first one)."""
        if not self._offsets or self._write_limit is None:
            return True
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        size = LOG_OVERHEAD + record_size(self.magic, key, value)
        return self.estimated_size_in_bytes() + size <= self._write_limit

    @property
    def records_count(self) -> int:
        return len(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)

    # -- building ----------------------------------------------------------------------------------
    def build(self) -> bytes:
        """The log entries as bytes (b"" when nothing was appended)."""
        if not self._offsets:
            return b""
        magic = self.magic
        log_append = magic == 1 and self.timestamp_type == TimestampType.LOG_APPEND_TIME
        if log_append:
            lat = self._log_append_time
            if lat is None:
                lat = int(time.time() * 1000)
            attrs = LEGACY_TIMESTAMP_TYPE_MASK
        else:
            lat = -1
            attrs = 0
        codec = int(self.compression_type)
        rel = self.base_offset if (codec and magic == 1) else 0
        out = bytearray()
        max_ts = -1
        for offset, ts, key, value in zip(
            self._offsets, self._timestamps, self._keys, self._values
        ):
            if magic == 0:
                ts = -1
            elif log_append:
                ts = lat
            if ts > max_ts:
                max_ts = ts
            _write_message(out, offset - rel, magic, attrs, ts, key, value)
        if not codec:
            return bytes(out)
        compressed = _codecs().compress(codec, out, magic=magic, level=self._level)
        wrapper = bytearray()
        _write_message(
            wrapper, self._last_offset, magic, codec | attrs,
            (lat if log_append else max_ts) if magic else -1, None, compressed,
        )
        return bytes(wrapper)

    def __repr__(self) -> str:
        return (
            f"LegacyRecordsBuilder(magic={self.magic}, "
            f"compression={self.compression_type.kafka_name}, "
            f"base_offset={self.base_offset}, count={len(self._offsets)})"
        )
