"""The checks of an append, apart from the log that runs them (Kafka's ``LogValidator``, and
the batch analysis of ``UnifiedLog.analyzeAndValidateRecords`` for a follower's append).

A :class:`LogValidator` is given what it checks against: the partition's name (for the
messages), its :class:`~kafkalog.storage.config.LogConfig` and its producer state
(:class:`~kafkalog.storage.producer_state.ProducerStateManager`); it holds no log.  It reads the
records handed to it, raises InvalidRecordError, CorruptRecordError, RecordTooLargeError,
InvalidTimestampError or InvalidOffsetError for what Kafka rejects, and returns what the log
writes (:class:`~kafkalog.storage._log_common.Prepared`: the bytes, offsets and the facts the
producer state needs).  It writes nothing: the log appends what it returns.

The single-batch fast path of :meth:`Log.append <kafkalog.storage.log.Log.append>` checks a
client's v2 batch that needs no record-level check in line (header and CRC); anything it
does not take comes here, which also reports every error that path left.
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

from .._format import V2_HEADER_TO_MAX_TIMESTAMP, CompressionType, TimestampType
from .._speedups import crc as _crc
from ..errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from ..records import MemoryRecords, MemoryRecordsBuilder, RecordBatch
from ._log_common import LONG_MAX, BatchFacts, Prepared

__all__ = ["LogValidator", "FollowerBatches"]


class FollowerBatches(NamedTuple):
    """What :meth:`LogValidator.analyze_follower_append` found in a follower's append: its
    ``batches``, the ``valid_bytes`` they take, the ``first_offset`` (a v2 batch's base offset,
    a legacy entry's own offset) and whether it is exact (``first_is_exact``: v2), the
    ``last_offset``, the max timestamp and the offset of the batch holding it, the number of
    records (``records_count``: ``count`` would hide tuple.count) and the batches that carry a
    producer id (``producer_batches``)."""

    batches: List[Any]
    valid_bytes: int
    first_offset: int
    first_is_exact: bool
    last_offset: int
    max_timestamp: int
    shallow_offset: int
    records_count: int
    producer_batches: List[Any]


class LogValidator:
    """Kafka's ``LogValidator`` for one partition: ``tp_name`` (the name messages give it),
    ``config`` (its LogConfig), ``producer_state`` (its ProducerStateManager, checked for the
    batches with a producer id) and ``validate_records`` (decode every record even when no
    setting needs it: ``Log.open(validate_records=True)``)."""

    __slots__ = ("tp_name", "config", "producer_state", "validate_records")

    def __init__(self, tp_name: str, config: Any, producer_state: Any,
                 validate_records: bool = False) -> None:
        self.tp_name = tp_name
        self.config = config
        self.producer_state = producer_state
        self.validate_records = validate_records

    def validate_batch(self, batch, first_batch, origin: str) -> None:
        """Kafka's ``LogValidator.validateBatch``."""
        tp = self.tp_name
        if batch.magic != first_batch.magic:
            raise InvalidRecordError(
                f"Batch magic {batch.magic} is not the same as the first batch's magic byte "
                f"{first_batch.magic} in topic partition {tp}."
            )
        if origin == "client":
            if batch.magic >= 2:
                count_from_offsets = batch.last_offset - batch.base_offset + 1
                if count_from_offsets <= 0:
                    raise InvalidRecordError(
                        f"Batch has an invalid offset range: [{batch.base_offset}, "
                        f"{batch.last_offset}] in topic partition {tp}."
                    )
                count = batch.records_count
                if count <= 0:
                    raise InvalidRecordError(
                        f"Invalid reported count for record batch: {count} in topic partition {tp}."
                    )
                if count_from_offsets != count:
                    raise InvalidRecordError(
                        "Inconsistent batch offset range "
                        f"[{batch.base_offset}, {batch.last_offset}] "
                        f"and count of records {count} in topic partition {tp}."
                    )
            if batch.is_control_batch:
                raise InvalidRecordError(
                    f"Clients are not allowed to write control records in topic partition {tp}."
                )
            if batch.producer_id >= 0 and batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {batch.base_sequence} in record batch with "
                    f"producerId {batch.producer_id} in topic partition {tp}."
                )

    def validate_record(self, batch, record, now: int) -> None:
        """Kafka's ``validateRecord`` / ``validateKey`` / ``validateTimestamp``."""
        c = self.config
        if c.compact and record.key is None:
            raise InvalidRecordError(
                "Compacted topic cannot accept message without key in topic partition "
                f"{self.tp_name}."
            )
        ts = record.timestamp
        if c.timestamp_type == TimestampType.CREATE_TIME and ts != -1:
            before, after = c.timestamp_before_max_ms, c.timestamp_after_max_ms
            if (before != LONG_MAX and ts < now - before) or (
                after != LONG_MAX and ts > now + after
            ):
                lo = now - before if before != LONG_MAX else "-inf"
                hi = now + after if after != LONG_MAX else "+inf"
                raise InvalidTimestampError(
                    f"Timestamp {ts} of message with offset {record.offset} is out of range. The "
                    f"timestamp should be within [{lo}, {hi}]",
                    offset=record.offset,
                )
        elif batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
            raise InvalidTimestampError(
                f"Invalid timestamp type in message {record}. Producer should not set timestamp "
                f"type to LogAppendTime."
            )

    def validate_and_assign_offsets(
        self, mv: memoryview, first: int, leader_epoch: int, origin: str, now: int
    ) -> Optional[Prepared]:
        """Kafka's ``validateMessagesAndAssignOffsets`` for a leader's append of ``mv`` from
        ``origin`` at offset ``first`` (the log end offset): any magic, codec conversion,
        LogAppendTime, record-level checks.  None when ``mv`` holds no whole batch (or, rebuilt,
        no record)."""
        tp = self.tp_name
        c = self.config
        mr = MemoryRecords(mv)
        batches = list(mr)
        if not batches:
            return None
        source_codec = CompressionType.NONE
        for b in batches:
            if origin == "client" and b.magic >= 2 and b.base_offset != 0:
                raise InvalidRecordError(
                    f"The baseOffset of the record batch in the append to {tp} should be 0, but it "
                    f"is {b.base_offset}"
                )
            if b.size_in_bytes > c.max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {tp} is {b.size_in_bytes} bytes which "
                    f"exceeds the maximum configured value of {c.max_message_bytes}."
                )
            if not b.is_valid():
                raise CorruptRecordError(
                    f"Record is corrupt (stored crc = {b.crc}) in topic partition {tp}."
                )
            if b.attributes & 7 > 4:
                raise InvalidRecordError(
                    f"Unknown compression type id {b.attributes & 7} in the batch at offset "
                    f"{b.base_offset} in the append to {tp}."
                )
            if b.compression_type != CompressionType.NONE:
                source_codec = b.compression_type
        first_b = batches[0]
        if (first_b.magic >= 2 or source_codec != CompressionType.NONE) and len(batches) > 1:
            raise InvalidRecordError("Compressed outer record has more than one batch")
        for b in batches:
            self.validate_batch(b, first_b, origin)
        target = c.target_compression
        target_codec = source_codec if target is None else target
        lat = c.timestamp_type == TimestampType.LOG_APPEND_TIME
        in_place = first_b.magic == 2 and (
            target_codec == source_codec
            or (first_b.is_control_batch and source_codec == CompressionType.NONE)
        )
        if in_place:
            return self._in_place(first_b, mv, first, leader_epoch, now, lat)

        # Rebuild: codec or format conversion (Kafka's buildRecordsAndAssignOffsets).
        records = []
        for b in batches:
            for r in b:
                self.validate_record(b, r, now)
                records.append(r)
        if not records:
            return None
        v2 = first_b.magic >= 2
        builder = MemoryRecordsBuilder(
            magic=2,
            compression_type=target_codec,
            base_offset=first,
            timestamp_type=c.timestamp_type,
            producer_id=first_b.producer_id if v2 else -1,
            producer_epoch=first_b.producer_epoch if v2 else -1,
            base_sequence=first_b.base_sequence if v2 else -1,
            is_transactional=first_b.is_transactional if v2 else False,
            partition_leader_epoch=leader_epoch if leader_epoch >= 0 else -1,
            is_control_batch=first_b.is_control_batch if v2 else False,
            log_append_time=now if lat else None,
        )
        max_ts = -1
        for i, r in enumerate(records):
            ts = r.timestamp
            builder.append_with_offset(
                first + i, ts, r.key, r.value, tuple(getattr(r, "headers", ()) or ())
            )
            if ts > max_ts:
                max_ts = ts
        built = builder.build()
        if len(built) > c.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {tp} is {len(built)} bytes which "
                f"exceeds the maximum configured value of {c.max_message_bytes}."
            )
        last = first + len(records) - 1
        log_append_time = -1
        if lat:
            max_ts = now
            log_append_time = now
        facts: List[Any] = []
        if v2 and first_b.producer_id >= 0:
            facts.append(BatchFacts(RecordBatch(built, 0, check_crc=False), first, max_ts))
        return Prepared(
            memoryview(built), first, last, max_ts, last, None, None, facts, log_append_time,
            len(records), 2,
        )

    def _in_place(self, b, mv: memoryview, first: int, leader_epoch: int, now: int,
                  lat: bool) -> Prepared:
        """The v2 batch ``b`` kept as it is (Kafka's ``assignOffsetsNonCompressed`` /
        ``validateMessagesAndAssignOffsetsCompressed`` in place): its offsets and epoch are
        patched as it is written; its attributes and max timestamp here where they change."""
        c = self.config
        need_records = (
            self.validate_records
            or c.compact
            or c.timestamp_before_max_ms != LONG_MAX
            or c.timestamp_after_max_ms != LONG_MAX
            or bool(b.attributes & 0x08)
        )
        max_ts = b.max_timestamp
        if need_records:
            records = list(b)
            if len(records) != b.records_count:
                raise InvalidRecordError(
                    f"Record count {len(records)} does not match the batch header count "
                    f"{b.records_count} in topic partition {self.tp_name}."
                )
            rec_max = -1
            for r in records:
                self.validate_record(b, r, now)
                if r.timestamp > rec_max:
                    rec_max = r.timestamp
            max_ts = rec_max
        last = first + b.last_offset_delta
        data: Any = mv[: b.size_in_bytes]
        log_append_time = -1
        if lat:
            max_ts = now
            log_append_time = now
            new_attrs = b.attributes | 0x08
        else:
            new_attrs = b.attributes & ~0x08
        if new_attrs != b.attributes or max_ts != b.max_timestamp:
            buf = bytearray(data)
            head = V2_HEADER_TO_MAX_TIMESTAMP
            h = head.unpack_from(buf, 0)
            head.pack_into(buf, 0, *h[:5], new_attrs, h[6], h[7], max_ts)
            crc = _crc.crc32c(memoryview(buf)[21:])  # the CRC covers what follows it
            head.pack_into(buf, 0, *h[:4], crc, new_attrs, h[6], h[7], max_ts)
            data = buf
        facts: List[Any] = []
        if b.producer_id >= 0:
            facts.append(BatchFacts(b, first, max_ts))
        return Prepared(
            data, first, last, max_ts, last, first, leader_epoch, facts, log_append_time,
            b.records_count, 2,
        )

    def check_producer_state(self, prepared: Prepared, origin: str,
                             transaction_version: int) -> Any:
        """The producer state's verdict on a prepared leader append (Kafka's
        ``analyzeAndValidateProducerState``): the remembered duplicate of a client's retried
        batch (its original offsets are the append's answer), else None; an out-of-order
        sequence, a fenced epoch or a bad transaction state raises."""
        ps = self.producer_state
        if prepared.facts and ps.validation_enabled:
            return ps.check_append(
                prepared.facts[0], origin, transaction_version, prepared.first_offset
            )
        return None

    def analyze_follower_append(self, mv: memoryview, log_end_offset: int,
                                log_start_offset: int) -> Optional[FollowerBatches]:
        """Check the batches of a follower's append (offsets already assigned; Kafka's
        ``analyzeAndValidateRecords``): offsets that increase and start at or after
        ``log_end_offset``, sizes, CRCs and codec ids.  None when ``mv`` holds no whole
        batch."""
        tp = self.tp_name
        max_message_bytes = self.config.max_message_bytes
        mr = MemoryRecords(mv)
        batches = list(mr)
        if not batches:
            return None
        prev_last = -1
        max_ts = -1
        shallow = -1
        count = 0
        facts = []
        first_is_exact = batches[0].magic >= 2
        first = batches[0].base_offset if first_is_exact else batches[0].last_offset
        for b in batches:
            if b.last_offset <= prev_last or (b.magic >= 2 and b.base_offset <= prev_last):
                raise InvalidOffsetError(
                    f"Out of order offsets found in append to {tp}: "
                    f"{[x.last_offset for x in batches][:10]}"
                )
            prev_last = b.last_offset
            if prev_last > LONG_MAX - 1:  # the log end offset must stay a long
                raise InvalidOffsetError(
                    f"Offset {prev_last} in the append to {tp} is out of range: the "
                    f"last offset of a batch must be below {LONG_MAX}",
                    offset=prev_last,
                )
            if b.size_in_bytes > max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {tp} is "
                    f"{b.size_in_bytes} bytes which exceeds the maximum configured value "
                    f"of {max_message_bytes}."
                )
            if not b.is_valid():
                raise CorruptRecordError(
                    f"Record is corrupt (stored crc = {b.crc}) in topic partition {tp}."
                )
            if b.attributes & 7 > 4:
                raise InvalidRecordError(
                    f"Unknown compression type id {b.attributes & 7} in the batch at "
                    f"offset {b.base_offset} in the append to {tp}."
                )
            if b.max_timestamp > max_ts:
                max_ts = b.max_timestamp
                shallow = b.last_offset
            count += b.records_count if b.magic >= 2 else 1
            if b.magic >= 2 and b.producer_id >= 0:
                facts.append(b)
        if first < log_end_offset:
            raise InvalidOffsetError(
                f"Unexpected offset in append to {tp}. First offset {first} is less than "
                "the next "
                f"offset {log_end_offset}. First 10 offsets in append: "
                f"{[x.last_offset for x in batches][:10]}, last offset in append: "
                f"{prev_last}. "
                f"Log start offset = {log_start_offset}",
                offset=first,
            )
        return FollowerBatches(batches, mr.valid_bytes, first, first_is_exact, prev_last,
                               max_ts, shallow, count, facts)
