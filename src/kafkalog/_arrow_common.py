"""What the columnar twins share: the column bits, the error codes and the exceptions they
stand for, the chunk of buffers a decode returns and the checks of the encoder's options.

Both the compiled twins (``_arrow``, ``_arrow_encode``) and the pure ones (``_arrow_py``,
``_arrow_encode_py``) import this module, so a decode error reads the same in each: the compiled
decoder reports (code, position, offset, a, b, c) from its GIL-free walk and ``decode_error``
turns that into the exception; the pure twin calls ``decode_error`` itself.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from ._format import INT32_MAX, RECORD_BATCH_OVERHEAD, RECORD_OVERHEAD_V0
from .errors import (
    CorruptRecordError,
    DecompressedSizeError,
    DecompressionError,
    InvalidRecordError,
    KafkaLogError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

# -- column bits (the compiled twins repeat them as a C enum) -------------------------------
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


# -- errors shared by both twins ---------------------------------------------------------------
# The compiled twin reports (code, position, offset, a, b) and builds the exception with
# ``decode_error`` so that both twins raise the same class with the same message.
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


def decode_error(
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
            f"Invalid record size: expected {a} bytes in record payload, but instead the buffer "
            f"has "
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
            f"Found invalid number of record headers {a}: more than the {b} bytes left in the "
            f"record",
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
            f"Invalid record size: expected to read {a} bytes in record payload, but instead "
            f"read {b}",
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
            f"Found invalid record structure: {what} is too long: the most significant bit of "
            f"byte {n} is set",
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
            f"Record batch holds more than {MAX_CHUNK_DATA} bytes of one binary column, too many "
            f"for "
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
            f"Found invalid message structure: {what} size {a} runs past the end of the "
            f"{b}-byte message",
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
            f"Record batch is truncated: {a} bytes, less than the {RECORD_BATCH_OVERHEAD}-byte "
            f"header",
            position,
        )
    if code == E_PREMATURE_EOF:
        return CorruptRecordError(
            "Incorrect declared batch size, premature EOF reached", position, offset
        )
    if code == E_NO_MEMORY:
        return MemoryError("out of memory while decoding to Arrow buffers")
    return KafkaLogError(f"unknown decoding error {code}", position, offset)


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


def check_encode_args(
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
    """The checks of the batch options that both encoders make first (same errors)."""
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
