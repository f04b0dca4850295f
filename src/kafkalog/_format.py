"""Wire-format constants shared by both twins (mirrors Kafka's Records, RecordBatch,
DefaultRecordBatch, LegacyRecord and ByteUtils).  The compiled twins repeat the numbers they
need as C constants; ``tests/test_format.py`` checks that both agree."""
from __future__ import annotations

import enum
import struct

# -- Records (framing common to every format) -----------------------------------------
OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH  # 8
SIZE_LENGTH = 4
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH  # 12
MAGIC_OFFSET = 16
MAGIC_LENGTH = 1
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH  # 17

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC_VALUE = MAGIC_VALUE_V2

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# -- DefaultRecordBatch (magic 2) ----------------------------------------------------------
BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH  # 8
LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH  # 12
PARTITION_LEADER_EPOCH_LENGTH = 4
V2_MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH  # 16
CRC_OFFSET = V2_MAGIC_OFFSET + MAGIC_LENGTH  # 17
CRC_LENGTH = 4
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH  # 21
ATTRIBUTE_LENGTH = 2
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTE_LENGTH  # 23
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH  # 27
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH  # 35
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH  # 43
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH  # 51
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH  # 53
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH  # 57
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH  # 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET  # 61

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# DefaultRecord: 5 (length varint) + 1 (attributes) + 10 (timestamp delta) + 5 (offset delta)
MAX_RECORD_OVERHEAD = 21

# -- LegacyRecord (magic 0 and 1) ----------------------------------------------------------
LEGACY_CRC_OFFSET = 0
LEGACY_CRC_LENGTH = 4
LEGACY_MAGIC_OFFSET = LEGACY_CRC_OFFSET + LEGACY_CRC_LENGTH  # 4
LEGACY_ATTRIBUTES_OFFSET = LEGACY_MAGIC_OFFSET + MAGIC_LENGTH  # 5
LEGACY_ATTRIBUTES_LENGTH = 1
LEGACY_TIMESTAMP_OFFSET = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH  # 6
LEGACY_TIMESTAMP_LENGTH = 8
KEY_SIZE_OFFSET_V0 = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH  # 6
KEY_SIZE_OFFSET_V1 = LEGACY_TIMESTAMP_OFFSET + LEGACY_TIMESTAMP_LENGTH  # 14
KEY_SIZE_LENGTH = 4
VALUE_SIZE_LENGTH = 4
RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH  # 14
RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH  # 22
LEGACY_TIMESTAMP_TYPE_MASK = 0x08

# -- Limits ----------------------------------------------------------------------------------
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
# Default ceiling on the decompressed size of one batch / wrapper: far above Kafka's
# max.message.bytes default (1 MiB, and brokers rarely allow more than ~100 MiB) yet far below
# memory.  Configurable per call (``max_decompressed_size``).
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

# -- Structs: every on-disk layout is declared here, once (big-endian, as Kafka) ------------
# The 12-byte log overhead every entry starts with: offset (v2: base offset), size.
ENTRY_HEADER = struct.Struct(">qi")
# The whole 61-byte v2 batch header: base offset, batch length, partition leader epoch, magic,
# crc, attributes, last offset delta, base timestamp, max timestamp, producer id, producer
# epoch, base sequence, records count.
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
# The v2 header up to and including maxTimestamp (what a segment's append and recovery read).
V2_HEADER_TO_MAX_TIMESTAMP = struct.Struct(">qiibIhiqq")
# offset, size and the magic byte at 16 (signed, as Kafka reads it): what a reader of mixed
# v0/v1/v2 entries needs to know of each before it takes one
LOG_ENTRY_HEADER = struct.Struct(">qi4xb")
# A legacy (v0/v1) message right after the log overhead: crc, magic, attributes.
LEGACY_MESSAGE_HEADER = struct.Struct(">IBB")
# A whole legacy entry's header: offset, size, crc, magic, attributes, (v1: timestamp,) keyLength.
V0_ENTRY_HEADER = struct.Struct(">qiIbbi")
V1_ENTRY_HEADER = struct.Struct(">qiIbbqi")
# The same from the message's crc on (an inner message of a wrapper has its own log overhead).
V0_MESSAGE_HEAD = struct.Struct(">Ibbi")
V1_MESSAGE_HEAD = struct.Struct(">Ibbqi")
# Index entries: OffsetIndex (relative offset, position), TimeIndex (timestamp, relative
# offset).  The TransactionIndex's entry is storage's alone (storage/txn_index.py): no reader
# outside storage parses it.
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
TIME_INDEX_ENTRY = struct.Struct(">qi")
assert ENTRY_HEADER.size == LOG_OVERHEAD
assert V2_HEADER.size == RECORD_BATCH_OVERHEAD
assert LEGACY_MESSAGE_HEADER.size + LOG_OVERHEAD == HEADER_SIZE_UP_TO_MAGIC + 1
assert V0_ENTRY_HEADER.size == LOG_OVERHEAD + RECORD_OVERHEAD_V0 - VALUE_SIZE_LENGTH
assert V1_ENTRY_HEADER.size == LOG_OVERHEAD + RECORD_OVERHEAD_V1 - VALUE_SIZE_LENGTH


class CompressionType(enum.IntEnum):
    """Kafka's codec ids (attribute bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The lower-case name Kafka prints (``none``, ``gzip``, ...)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: "int | str | CompressionType") -> "CompressionType":
        """Accept an id, a name (any case, ``producer`` excluded) or a member."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                names = ", ".join(m.kafka_name for m in cls)
                raise ValueError(
                    f"unknown compression type {value!r}: the types are {names}"
                ) from None
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                ids = ", ".join(f"{int(m)} ({m.kafka_name})" for m in cls)
                raise ValueError(
                    f"unknown compression type id {value}: the ids are {ids}"
                ) from None
        raise TypeError(f"compression_type must be an int or str, not {type(value).__name__}")


class TimestampType(enum.IntEnum):
    """Kafka's TimestampType: NO_TIMESTAMP_TYPE (magic 0), CREATE_TIME, LOG_APPEND_TIME."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (``CreateTime``, ``LogAppendTime``, ``NoTimestampType``)."""
        return _TS_NAMES[self]

    @classmethod
    def parse(cls, value: "int | str | TimestampType") -> "TimestampType":
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip().lower().replace("_", "").replace("-", "")
            for member, name in _TS_NAMES.items():
                if key in (name.lower(), member.name.lower().replace("_", "")):
                    return member
            raise ValueError(f"unknown timestamp type {value!r}")
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        raise TypeError(f"timestamp_type must be an int or str, not {type(value).__name__}")


_TS_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}

# Indexable by id, so compiled code can map an int to a member without an enum call.
COMPRESSION_TYPES = tuple(CompressionType(i) for i in range(5))
TIMESTAMP_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)
