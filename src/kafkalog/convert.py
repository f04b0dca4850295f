"""Message-format conversion between record batches (magic 2) and legacy messages (magic 0/1).

* :func:`down_convert` - what a broker does for an old consumer (Kafka's
  ``LazyDownConversionRecords`` / ``RecordsUtil.downConvert``).
* :func:`up_convert` - what a broker's ``LogValidator`` does when it converts legacy input to
  magic 2.

Both take the bytes of a sequence of log entries (a segment, a fetch response) and return new
bytes; a partial trailing entry is ignored, as Kafka's readers ignore it.  They use only the
public classes (:class:`~kafkalog.MemoryRecords`, :class:`~kafkalog.MemoryRecordsBuilder`), so
they run on whichever twin is loaded.
"""
from __future__ import annotations

from typing import List, Optional, Union

from ._format import INT32_MAX, CompressionType, TimestampType
from .errors import UnsupportedCompressionError
from .records import MemoryRecords, MemoryRecordsBuilder

__all__ = ["down_convert", "up_convert"]

Codec = Union[int, str, CompressionType]


def _codec(compression_type: Optional[Codec]) -> Optional[CompressionType]:
    return None if compression_type is None else CompressionType.parse(compression_type)


def down_convert(
    records_bytes, to_magic: int, *, compression_type: Optional[Codec] = None
) -> bytes:
    """Convert the magic-2 batches of ``records_bytes`` to legacy messages of ``to_magic``
    (0 or 1), as Kafka's ``RecordsUtil.downConvert`` does for an old consumer.

    * Entries whose magic is already ``<= to_magic`` are copied unchanged (a v0 message stays v0
      when converting to v1).
    * Control batches (transaction markers, KRaft records) are dropped.
    * Each remaining batch becomes: one message per record (uncompressed batch) or one
      compressed wrapper holding all its records (compressed batch, same codec; inner offsets
      relative for magic 1, absolute for magic 0).  ``compression_type`` overrides the codec.
    * Offsets are kept (gaps left by compaction included); timestamps are kept for magic 1 (a
      LogAppendTime batch becomes a LogAppendTime wrapper/messages with the batch's max
      timestamp) and dropped for magic 0.
    * Lost: record headers, producer id/epoch and sequence numbers, the transactional flag, the
      partition leader epoch, and the batch boundaries of uncompressed batches.  A batch left
      with no records is dropped.

    Kafka refuses to down-convert zstd batches (old consumers cannot read zstd): a zstd batch
    raises :class:`~kafkalog.errors.UnsupportedCompressionError` unless ``compression_type``
    names a codec legal for ``to_magic``.
    """
    if isinstance(to_magic, bool) or to_magic not in (0, 1):
        raise ValueError(f"to_magic must be 0 or 1, not {to_magic!r}")
    override = _codec(compression_type)
    if override == CompressionType.ZSTD:
        raise ValueError(f"ZStandard compression is not supported for magic {to_magic}")
    out: List[bytes] = []
    for batch in MemoryRecords(records_bytes):
        if batch.magic <= to_magic:
            out.append(bytes(batch.view()))
            continue
        if batch.is_control_batch:
            continue
        codec = batch.compression_type if override is None else override
        if codec == CompressionType.ZSTD:
            raise UnsupportedCompressionError(
                "Down-conversion of zstandard-compressed batches is not supported",
                batch.position,
                batch.base_offset,
            )
        records = list(batch)
        if not records:
            continue
        ts_type = batch.timestamp_type
        log_append_time = batch.max_timestamp if ts_type == TimestampType.LOG_APPEND_TIME else None
        builder = MemoryRecordsBuilder(
            to_magic, codec, records[0].offset, ts_type, log_append_time=log_append_time
        )
        for r in records:
            builder.append_with_offset(r.offset, r.timestamp, r.key, r.value)
        out.append(builder.build())
    return b"".join(out)


def up_convert(
    records_bytes,
    *,
    compression_type: Optional[Codec] = None,
    max_batch_bytes: int = 1048576,
) -> bytes:
    """Convert the legacy messages (magic 0/1) of ``records_bytes`` to magic-2 batches, as a
    broker's ``LogValidator`` does when it converts legacy input.

    * Each compressed wrapper becomes one batch holding its inner messages (same codec, or
      ``compression_type``).
    * A run of consecutive uncompressed messages becomes one uncompressed batch (or one
      ``compression_type`` batch); a run ends at a wrapper or v2 batch, when the magic or the
      timestamp type changes, at a LogAppendTime message whose timestamp differs (a v2 batch has
      one append time), when offsets stop increasing, when the offsets span more than an int32,
      or when the batch would exceed ``max_batch_bytes`` (before compression; at least one record
      per batch).
    * Magic-2 batches are copied unchanged.
    * Kept: offsets (a converted batch's base offset is its first record's offset, gaps
      allowed), keys, values and timestamps: v1 CreateTime timestamps per record, v1
      LogAppendTime as a LogAppendTime batch whose max timestamp is the append time.
    * Assigned: magic-0 messages have no timestamps, so their records get -1 (NO_TIMESTAMP) in a
      CreateTime batch; producer id, epoch and base sequence -1 (no producer), not
      transactional, partition leader epoch -1 (unknown; a broker writes its current epoch).
    * Lost: the legacy per-message CRC-32s (v2 has one CRC-32C per batch) and, for LogAppendTime
      wrappers, the inner messages' original CreateTime values (Kafka reports the append time).
    """
    override = _codec(compression_type)
    out: List[bytes] = []
    run: Optional[MemoryRecordsBuilder] = None
    run_key = None
    run_last = -1  # the offset last appended to ``run`` (read only while ``run`` is open)

    def flush() -> None:
        nonlocal run, run_key
        if run is not None and run.records_count:
            out.append(run.build())
        run = None
        run_key = None

    def builder(codec, base_offset, ts_type, log_append_time) -> MemoryRecordsBuilder:
        return MemoryRecordsBuilder(
            2, codec, base_offset, ts_type, -1, -1, -1, False, -1,
            log_append_time=log_append_time, write_limit=max_batch_bytes,
        )

    for batch in MemoryRecords(records_bytes):
        if batch.magic == 2:
            flush()
            out.append(bytes(batch.view()))
            continue
        ts_type = batch.timestamp_type
        if ts_type == TimestampType.NO_TIMESTAMP_TYPE:
            ts_type = TimestampType.CREATE_TIME
        log_append = ts_type == TimestampType.LOG_APPEND_TIME
        if batch.compression_type != CompressionType.NONE:
            flush()
            records = list(batch)
            codec = batch.compression_type if override is None else override
            b = builder(
                codec, records[0].offset, ts_type, batch.max_timestamp if log_append else None
            )
            for r in records:
                b.append_with_offset(r.offset, r.timestamp, r.key, r.value)
            out.append(b.build())
            continue
        for r in batch:
            key = (batch.magic, ts_type, r.timestamp if log_append else None)
            if run is not None and (
                key != run_key
                or r.offset <= run_last
                or r.offset - run.base_offset > INT32_MAX
                or not run.has_room_for(r.timestamp, r.key, r.value)
            ):
                flush()
            if run is None:
                codec = CompressionType.NONE if override is None else override
                run = builder(codec, r.offset, ts_type, r.timestamp if log_append else None)
                run_key = key
            run.append_with_offset(r.offset, r.timestamp, r.key, r.value)
            run_last = r.offset
    flush()
    return b"".join(out)
