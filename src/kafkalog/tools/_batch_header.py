"""A batch's header as ``kafkalog dump`` reads and prints it (kafka-dump-log's batch line and
its JSON object; both formats, magic 0/1 and 2), the records of a batch, and the first-batch
lookups the index checks make.  Read straight from the bytes of a mapped segment."""

from __future__ import annotations

import struct
from typing import Any, Dict, Optional

from .._format import ENTRY_HEADER, INT32_MAX, LEGACY_MESSAGE_HEADER, V2_HEADER
from .._speedups import crc as _crc
from ..errors import KafkaLogError
from ..records import LegacyRecordBatch, RecordBatch

__all__ = [
    "BatchHeader",
    "DumpError",
    "batch_line",
    "batch_obj",
    "find_batch",
    "first_batch_last_offset",
    "increment_sequence",
    "jbool",
    "read_header",
    "records_of",
    "wrap64",
]

INT_MAX = INT32_MAX
_ENTRY = ENTRY_HEADER
_V2 = V2_HEADER  # 61-byte v2 header
_LEGACY = LEGACY_MESSAGE_HEADER  # crc, magic, attributes (after the 12-byte log overhead)
_I64 = struct.Struct(">q")  # a v1 message's timestamp
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_TS_TYPES = ("CreateTime", "LogAppendTime")


class DumpError(Exception):
    """Bad input that stops the dump (Kafka's tool throws in the same places)."""


def jbool(b: bool) -> bytes:
    return b"true" if b else b"false"


def increment_sequence(seq: int, inc: int) -> int:
    if seq > INT_MAX - inc:
        return inc - (INT_MAX - seq) - 1
    return seq + inc


def wrap64(x: int) -> int:
    if -(2**63) <= x < 2**63:
        return x
    return ((x + 2**63) % 2**64) - 2**63


class BatchHeader:
    """The fields kafka-dump-log prints for one batch, read straight from the bytes."""

    __slots__ = (
        "pos",
        "size",
        "magic",
        "base_offset",
        "last_offset",
        "count",
        "base_sequence",
        "last_sequence",
        "producer_id",
        "producer_epoch",
        "leader_epoch",
        "attributes",
        "max_timestamp",
        "base_timestamp",
        "crc",
        "valid",
        "ts_type",
        "codec",
    )


def read_header(buf, pos: int, size: int, magic: int, path: str) -> BatchHeader:
    """Header fields of the entry at ``pos`` (``size`` includes the log overhead)."""
    h = BatchHeader()
    h.pos = pos
    h.size = size
    h.magic = magic
    n = len(buf)
    if magic >= 2:
        if pos + 61 > n:
            raise DumpError(
                f"Failed to read `record batch header` from file channel `{path}`. Expected to "
                f"read 61 bytes, but reached end of file after reading {n - pos} bytes. Started "
                f"read from position {pos}."
            )
        (base, length, ple, _m, crc, attrs, lod, base_ts, max_ts, pid, epoch, base_seq, count) = (
            _V2.unpack_from(buf, pos)
        )
        h.base_offset = base
        h.last_offset = wrap64(base + lod)
        h.count = count
        h.base_sequence = base_seq
        h.last_sequence = -1 if base_seq == -1 else increment_sequence(base_seq, lod)
        h.producer_id = pid
        h.producer_epoch = epoch
        h.leader_epoch = ple
        h.attributes = attrs
        h.base_timestamp = base_ts
        h.max_timestamp = max_ts
        h.crc = crc
        h.valid = size >= 61 and crc == _crc.crc32c(buf[pos + 21 : pos + size])
        h.ts_type = _TS_TYPES[1 if attrs & 0x08 else 0]
        codec = attrs & 0x07
    else:
        offset = _ENTRY.unpack_from(buf, pos)[0]
        crc, _m, attrs = _LEGACY.unpack_from(buf, pos + 12)
        h.base_offset = None
        h.last_offset = offset
        h.count = None
        h.attributes = attrs
        h.crc = crc
        h.valid = crc == _crc.crc32(buf[pos + 16 : pos + size])
        if magic == 0:
            h.max_timestamp = -1
            h.ts_type = "NoTimestampType"
        else:
            h.max_timestamp = _I64.unpack_from(buf, pos + 18)[0]
            h.ts_type = _TS_TYPES[1 if attrs & 0x08 else 0]
        h.base_timestamp = h.max_timestamp
        h.base_sequence = h.last_sequence = h.producer_id = h.producer_epoch = h.leader_epoch = -1
        codec = attrs & 0x07
    if codec > 4:
        raise DumpError(f"Unknown compression type id: {codec}")
    h.codec = _CODECS[codec]
    return h


def batch_line(h: BatchHeader) -> bytes:
    if h.magic >= 2:
        attrs = h.attributes
        dh = b"OptionalLong[%d]" % h.base_timestamp if attrs & 0x40 else b"OptionalLong.empty"
        return (
            b"baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "
            b"producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s "
            b"isControl: %s deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d "
            b"compresscodec: %s crc: %d isvalid: %s\n"
            % (
                h.base_offset,
                h.last_offset,
                h.count,
                h.base_sequence,
                h.last_sequence,
                h.producer_id,
                h.producer_epoch,
                h.leader_epoch,
                jbool(attrs & 0x10),
                jbool(attrs & 0x20),
                dh,
                h.pos,
                h.ts_type.encode(),
                h.max_timestamp,
                h.size,
                h.magic,
                h.codec.encode(),
                h.crc,
                jbool(h.valid),
            )
        )
    return (
        b"offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s\n"
        % (
            h.last_offset,
            h.pos,
            h.ts_type.encode(),
            h.max_timestamp,
            h.size,
            h.magic,
            h.codec.encode(),
            h.crc,
            jbool(h.valid),
        )
    )


def batch_obj(h: BatchHeader, path: str, topic: Optional[str] = None,
              partition: Optional[int] = None) -> Dict[str, Any]:
    """The ``--json`` object of a batch line; ``topic``/``partition``: the partition directory's
    (None when the file is not in one)."""
    v2 = h.magic >= 2
    attrs = h.attributes
    return {
        "type": "batch",
        "file": path,
        "topic": topic,
        "partition": partition,
        "position": h.pos,
        "baseOffset": h.base_offset if v2 else None,
        "lastOffset": h.last_offset,
        "count": h.count if v2 else None,
        "baseSequence": h.base_sequence if v2 else None,
        "lastSequence": h.last_sequence if v2 else None,
        "producerId": h.producer_id if v2 else None,
        "producerEpoch": h.producer_epoch if v2 else None,
        "partitionLeaderEpoch": h.leader_epoch if v2 else None,
        "isTransactional": bool(v2 and attrs & 0x10),
        "isControl": bool(v2 and attrs & 0x20),
        "deleteHorizonMs": h.base_timestamp if v2 and attrs & 0x40 else None,
        "timestampType": h.ts_type,
        "maxTimestamp": h.max_timestamp,
        "size": h.size,
        "magic": h.magic,
        "compression": h.codec,
        "crc": h.crc,
        "isValid": h.valid,
    }


def records_of(buf, h: BatchHeader, path: str):
    """Decode the records of a batch (no CRC check, like Kafka's deep iteration)."""
    try:
        if h.magic >= 2:
            if h.magic != 2:  # Kafka reads any magic >= 2 as a v2 batch
                raw = bytearray(buf[h.pos : h.pos + h.size])
                raw[16] = 2
                return RecordBatch(bytes(raw), 0, check_crc=False).records()
            return RecordBatch(buf, h.pos, check_crc=False).records()
        return LegacyRecordBatch(buf, h.pos, check_crc=False).records()
    except KafkaLogError as e:
        raise DumpError(f"{e.message} in file {path} (batch at position {h.pos})") from None


def first_batch_last_offset(buf, pos: int, end: int, path: str) -> Optional[int]:
    """``slice(pos, ...).batches().iterator().next().lastOffset()``; None when no complete
    batch starts there."""
    if pos >= end - 17:
        return None
    offset, size = _ENTRY.unpack_from(buf, pos)
    if size < 14:
        raise DumpError(
            f"Found record size {size} smaller than minimum record overhead (14) in file {path}."
        )
    if pos > end - 12 - size:
        return None
    magic = struct.unpack_from(">b", buf, pos + 16)[0]
    if magic >= 2:
        if pos + 27 > len(buf):
            return None
        lod = struct.unpack_from(">i", buf, pos + 23)[0]
        return wrap64(offset + lod)
    return offset


def find_batch(buf, pos: int, end: int, offset: int, path: str) -> Optional[BatchHeader]:
    """The first batch from ``pos`` whose last offset is >= ``offset``."""
    while pos < end - 17:
        base, length = _ENTRY.unpack_from(buf, pos)
        if length < 14:
            raise DumpError(
                f"Found record size {length} smaller than minimum record overhead (14) in file "
                f"{path}."
            )
        if pos > end - 12 - length:
            return None
        magic = buf[pos + 16]
        if magic > 127:
            raise DumpError(f"Invalid magic {magic - 256} in the entry at position {pos} of {path}")
        if magic >= 2:
            last = wrap64(base + struct.unpack_from(">i", buf, pos + 23)[0])
        else:
            last = base
        if last >= offset:
            return read_header(buf, pos, length + 12, magic, path)
        pos += length + 12
    return None
