"""kafkalog.storage.log.Log: append/validation, read, roll, flush, offsets for times, retention,
truncation, checkpoints and reopening."""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid

import pytest

from kafkalog import control
from kafkalog._crc_py import crc32c
from kafkalog.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    InvalidTimestampError,
    LogClosedError,
    LogLockedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kafkalog.records import MemoryRecords, MemoryRecordsBuilder
from kafkalog.storage import checkpoints, files
from kafkalog.storage.file_records import TimestampAndOffset
from kafkalog.storage.log import Log, LogConfig
from kafkalog.storage.txn_index import AbortedTxn

from .conftest import BASE_TS, FakeClock, all_records, make_batch, values_batch


def open_log(tmp_path, config=None, name="topic-0", **kw):
    return Log.open(tmp_path / name, config, **kw)


def append_values(log, start, count, per_batch=1, ts=None, size=0):
    infos = []
    for i in range(start, start + count, per_batch):
        infos.append(
            log.append(values_batch(i, min(per_batch, start + count - i), ts=ts, size=size))
        )
    return infos


def patch_crc(data: bytes) -> bytes:
    b = bytearray(data)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


# -- LogConfig -------------------------------------------------------------------------------------
def test_log_config_defaults_and_parsing():
    c = LogConfig()
    assert c.segment_bytes == 1073741824 and c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760 and c.index_interval_bytes == 4096
    assert c.flush_messages == 2**63 - 1 and c.flush_ms == 2**63 - 1
    assert c.retention_ms == 604800000 and c.retention_bytes == -1
    assert c.max_message_bytes == 1048588 and c.cleanup_policy == ("delete",)
    assert c.message_timestamp_type == "CreateTime" and c.compression_type == "producer"
    assert c.delete and not c.compact
    c2 = LogConfig(
        {"segment.bytes": "1024", "cleanup.policy": "compact,delete", "preallocate": "true"}
    )
    assert c2.segment_bytes == 1024 and c2.compact and c2.delete and c2.preallocate
    assert LogConfig(segment_ms=5).get("segment.ms") == 5
    assert c2.with_overrides(segment_bytes=2048).segment_bytes == 2048
    assert (
        LogConfig({"message.timestamp.type": "LogAppendTime"}).timestamp_type.name
        == "LOG_APPEND_TIME"
    )
    assert LogConfig({"message.timestamp.difference.max.ms": 10}).timestamp_before_max_ms == 10
    with pytest.raises(ValueError, match="Unknown topic config"):
        LogConfig({"segment.byte": 1})
    with pytest.raises(ValueError):
        LogConfig({"segment.bytes": 10})  # below Kafka's minimum of 14
    with pytest.raises(ValueError):
        LogConfig({"cleanup.policy": "archive"})
    with pytest.raises(AttributeError):
        c.segment_bytes = 5


# -- basics ----------------------------------------------------------------------------------------
def test_new_log_layout(tmp_path):
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (0, 0, 1)
    d = tmp_path / "topic-0"
    assert (d / "00000000000000000000.log").exists()
    assert os.path.getsize(d / "00000000000000000000.index") == 10 * 1024 * 1024
    assert (d / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"
    log.close()
    names = sorted(os.listdir(d))
    assert names == [
        ".kafka_cleanshutdown",
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.snapshot",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]
    assert os.path.getsize(d / "00000000000000000000.index") == 0


def test_append_assigns_offsets_and_reads_back(tmp_path):
    log = open_log(tmp_path)
    info = log.append(make_batch([b"a", b"b", b"c"]))
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 2, 3)
    assert info.max_timestamp == BASE_TS + 2 and info.shallow_offset_of_max_timestamp == 2
    b = MemoryRecordsBuilder()
    b.append(BASE_TS + 10, b"k", b"d")
    info2 = log.append(b)  # a builder is accepted
    info3 = log.append(MemoryRecords(make_batch([b"e"])))
    assert (info2.first_offset, info3.first_offset, log.log_end_offset) == (3, 4, 5)
    assert all_records(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    batches = list(log.read(1, 10**6))
    assert [x.base_offset for x in batches] == [0, 3, 4]  # starts at the batch holding offset 1
    assert batches[0].partition_leader_epoch == 0
    assert log.read(5, 100).size_in_bytes == 0  # at the log end: empty
    with pytest.raises(OffsetOutOfRangeError, match="upto 5"):
        log.read(6, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()
    with pytest.raises(LogClosedError):
        log.append(make_batch([b"x"]))


def test_leader_epoch_stamped_and_checkpointed(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch([b"a"]), leader_epoch=3)
    log.append(make_batch([b"b"]), leader_epoch=3)
    log.append(make_batch([b"c"]), leader_epoch=5)
    assert [b.partition_leader_epoch for b in log.iter_batches()] == [3, 3, 5]
    assert log.leader_epoch_cache.entries == [(3, 0), (5, 2)]
    assert (tmp_path / "topic-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n3 0\n5 2\n"
    assert log.offset_for_timestamp(-1) == TimestampAndOffset(-1, 3, 5)
    assert log.offset_for_timestamp(-2) == TimestampAndOffset(-1, 0, 3)
    log.close()


# -- validation ------------------------------------------------------------------------------------
def test_rejections_leave_the_log_unchanged(tmp_path):
    log = open_log(tmp_path, {"max.message.bytes": 300})
    log.append(make_batch([b"ok"]))
    good = make_batch([b"x", b"y"])
    cases = []
    cases.append((make_batch([b"x"], base_offset=5), InvalidRecordError, "should be 0"))
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    cases.append((bytes(corrupt), CorruptRecordError, "Record is corrupt"))
    cases.append(
        (
            make_batch([b"z" * 400]),
            RecordTooLargeError,
            "exceeds the maximum configured value of 300",
        )
    )
    cases.append(
        (
            control.build_end_txn_marker(False, 1, 0, 0, timestamp=BASE_TS),
            InvalidRecordError,
            "not allowed to write control records",
        )
    )
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 3)
    cases.append((patch_crc(wrong_count), InvalidRecordError, "Inconsistent batch offset range"))
    cases.append(
        (
            make_batch([b"x"], producer_id=5, producer_epoch=0, base_sequence=-1),
            InvalidRecordError,
            "Invalid sequence number",
        )
    )
    cases.append((good + good, InvalidRecordError, "more than one batch"))
    for data, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            log.append(data)
        assert log.log_end_offset == 1
    assert all_records(log) == [(0, b"ok")]
    # a partial trailing batch is dropped, an input with no complete batch appends nothing
    assert log.append(good[:-5]).first_offset == -1
    info = log.append(good + good[:10])
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (1, 2, len(good))
    log.close()


def test_compacted_topic_requires_keys(tmp_path):
    log = open_log(tmp_path, {"cleanup.policy": "compact"})
    with pytest.raises(
        InvalidRecordError, match="Compacted topic cannot accept message without key"
    ):
        log.append(make_batch([b"v"], keys=[None]))
    log.append(make_batch([b"v"], keys=[b"k"]))
    assert log.log_end_offset == 1
    log.close()


def test_timestamp_bounds(tmp_path, clock):
    log = open_log(
        tmp_path,
        {"message.timestamp.before.max.ms": 1000, "message.timestamp.after.max.ms": 100},
        clock=clock,
    )
    with pytest.raises(InvalidTimestampError, match="out of range"):
        log.append(make_batch([b"a"], [clock.now - 1001]))
    with pytest.raises(InvalidTimestampError, match="out of range"):
        log.append(make_batch([b"a"], [clock.now + 101]))
    log.append(make_batch([b"a", b"b"], [clock.now - 1000, clock.now + 100]))
    log.append(make_batch([b"c"], [-1]))  # no timestamp: not checked
    assert log.log_end_offset == 3
    log.close()


def test_log_append_time_batches_rejected_without_timestamps(tmp_path):
    log = open_log(tmp_path)
    lat = bytearray(make_batch([b"a"], timestamp_type="log_append_time"))
    struct.pack_into(">q", lat, 35, -1)
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        log.append(patch_crc(lat))
    # with a real timestamp Kafka accepts it and rewrites it as CreateTime
    info = log.append(make_batch([b"a"], timestamp_type="log_append_time"))
    (batch,) = log.iter_batches()
    assert batch.timestamp_type.name == "CREATE_TIME" and batch.is_valid()
    assert info.max_timestamp == batch.max_timestamp
    log.close()


def test_log_append_time_topic(tmp_path, clock):
    log = open_log(tmp_path, {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    clock.now = BASE_TS + 5000
    info = log.append(make_batch([b"a", b"b"], [1, 2]))
    assert info.log_append_time == BASE_TS + 5000 and info.max_timestamp == BASE_TS + 5000
    (batch,) = log.iter_batches()
    assert batch.timestamp_type.name == "LOG_APPEND_TIME" and batch.is_valid()
    assert [r.timestamp for r in batch] == [BASE_TS + 5000] * 2
    log.close()


def test_compression_type_conversion(tmp_path):
    log = open_log(tmp_path, {"compression.type": "gzip"})
    info = log.append(make_batch([b"a" * 50, b"b" * 50]))
    (batch,) = log.iter_batches()
    assert batch.compression_type.name == "GZIP" and batch.base_offset == 0 and batch.is_valid()
    assert (info.first_offset, info.last_offset) == (0, 1)
    log.append(make_batch([b"c"], compression="gzip"))  # same codec: kept in place
    assert all_records(log) == [(0, b"a" * 50), (1, b"b" * 50), (2, b"c")]
    log.close()
    log = open_log(tmp_path, {"compression.type": "uncompressed"}, name="other-0")
    log.append(make_batch([b"x", b"y"], compression="gzip"))
    (batch,) = log.iter_batches()
    assert batch.compression_type.name == "NONE" and [r.value for r in batch] == [b"x", b"y"]
    log.close()


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_input_is_converted_to_v2(tmp_path, magic):
    log = open_log(tmp_path)
    log.append(make_batch([b"first"]))
    info = log.append(make_batch([b"a", b"b", b"c"], magic=magic))
    assert (info.first_offset, info.last_offset) == (1, 3)
    batches = list(log.iter_batches())
    assert [b.magic for b in batches] == [2, 2]
    assert all_records(log) == [(0, b"first"), (1, b"a"), (2, b"b"), (3, b"c")]
    if magic == 0:
        assert [r.timestamp for r in batches[1]] == [-1, -1, -1]
    log.close()


def test_transaction_markers_and_txn_index(tmp_path):
    log = open_log(tmp_path)
    log.append(
        make_batch(
            [b"t1", b"t2"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True
        )
    )
    log.append(make_batch([b"plain"]))
    log.append(
        make_batch([b"u1"], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    )
    abort = control.build_end_txn_marker(False, 7, 0, 3, timestamp=BASE_TS)
    info = log.append(abort, origin="coordinator")
    assert info.first_offset == 4
    commit = control.build_end_txn_marker(True, 8, 0, 3, timestamp=BASE_TS)
    log.append(commit, origin="coordinator")
    seg = log.active_segment
    assert seg.txn_index.all_aborted_txns() == [
        AbortedTxn(7, 0, 4, 3)
    ]  # LSO: producer 8 still open at 3
    assert log.collect_aborted_transactions(0, 10) == [AbortedTxn(7, 0, 4, 3)]
    assert log.collect_aborted_transactions(5, 10) == []
    assert log.producer_state.ongoing_txns == {}
    log.close()
    # state survives via the snapshot (the clock stays at the batches' time: a producer idle
    # for producer.id.expiration.ms would be dropped as the snapshot loads)
    log = open_log(tmp_path, clock=FakeClock(BASE_TS))
    assert log.producer_state.producers[7].coordinator_epoch == 3
    assert log.collect_aborted_transactions(0, 10) == [AbortedTxn(7, 0, 4, 3)]
    log.close()


def test_append_as_follower(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 10**6})
    data = make_batch([b"a", b"b"], base_offset=10, leader_epoch=4) + make_batch(
        [b"c"], base_offset=12, leader_epoch=6
    )
    log.truncate_fully_and_start_at(10)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (10, 12, 13)
    assert log.leader_epoch_cache.entries == [(4, 10), (6, 12)]
    with pytest.raises(InvalidOffsetError, match="less than the next offset"):
        log.append_as_follower(make_batch([b"x"], base_offset=12))
    with pytest.raises(InvalidOffsetError, match="Out of order"):
        log.append_as_follower(
            make_batch([b"x"], base_offset=20) + make_batch([b"y"], base_offset=15)
        )
    # a gap is fine (compacted data)
    log.append_as_follower(make_batch([b"z"], base_offset=30))
    assert all_records(log) == [(10, b"a"), (11, b"b"), (12, b"c"), (30, b"z")]
    assert log.read(20, 1000).buffer()[:8] == struct.pack(">q", 30)
    log.close()


# -- roll ------------------------------------------------------------------------------------------
def test_roll_on_size(tmp_path):
    one = len(values_batch(0, 1))
    log = open_log(tmp_path, {"segment.bytes": one * 3})
    append_values(log, 0, 10)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert all(s.size <= one * 3 for s in log.segments)
    # rolled segments are trimmed, flushed and snapshotted
    assert log.recovery_point == 9
    d = tmp_path / "topic-0"
    assert os.path.getsize(d / "00000000000000000003.index") == 0
    assert sorted(n for n in os.listdir(d) if n.endswith(".snapshot")) == [
        "00000000000000000003.snapshot",
        "00000000000000000006.snapshot",
        "00000000000000000009.snapshot",
    ]
    assert all_records(log) == [(i, b"v%d" % i) for i in range(10)]
    log.verify_indexes()
    log.close()


def test_roll_on_producer_time(tmp_path, clock):
    log = open_log(tmp_path, {"segment.ms": 1000}, clock=clock)
    log.append(make_batch([b"a"], [BASE_TS]))
    log.append(make_batch([b"b"], [BASE_TS + 1000]))  # exactly segment.ms: no roll
    clock.advance(10**7)  # wall-clock time does not matter when timestamps exist
    log.append(make_batch([b"c"], [BASE_TS + 500]))
    assert len(log.segments) == 1
    log.append(make_batch([b"d"], [BASE_TS + 1001]))
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.append(make_batch([b"e"], [BASE_TS - 10**9]))  # old timestamps never roll
    assert len(log.segments) == 2
    log.close()


def test_roll_on_wall_clock_without_timestamps(tmp_path, clock):
    log = open_log(tmp_path, {"segment.ms": 1000}, clock=clock)
    log.append(make_batch([b"a"], [-1]))
    clock.advance(1001)
    log.append(make_batch([b"b"], [-1]))
    assert len(log.segments) == 2
    log.close()


def test_roll_on_full_index(tmp_path):
    # 3 offset-index slots, 2 usable time-index slots (36 bytes: one reserved)
    log = open_log(tmp_path, {"segment.index.bytes": 36, "index.interval.bytes": 0})
    append_values(log, 0, 12)
    segs = log.segments
    assert len(segs) > 2
    assert all(s.time_index.entries <= 3 for s in segs)
    assert all_records(log) == [(i, b"v%d" % i) for i in range(12)]
    log.verify_indexes()
    log.close()


def test_roll_on_relative_offset_overflow(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(make_batch([b"a"], base_offset=0))
    far = 2**31 + 5
    log.append_as_follower(make_batch([b"b"], base_offset=far))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert all_records(log) == [(0, b"a"), (far, b"b")]
    log.close()


def test_explicit_roll(tmp_path):
    log = open_log(tmp_path)
    assert log.roll() is log.active_segment  # empty active segment: no-op
    append_values(log, 0, 3)
    new = log.roll()
    assert new.base_offset == 3 and [s.base_offset for s in log.segments] == [0, 3]
    assert log.segments[0].time_index.last_entry.timestamp == BASE_TS + 2  # final entry
    log.close()


# -- flush -----------------------------------------------------------------------------------------
def test_flush_messages(tmp_path):
    log = open_log(tmp_path, {"flush.messages": 3})
    append_values(log, 0, 2)
    assert log.recovery_point == 0
    append_values(log, 2, 1)
    assert log.recovery_point == 3
    log.append(values_batch(3, 5))
    assert log.recovery_point == 8
    log.close()


def test_explicit_flush(tmp_path):
    log = open_log(tmp_path)
    append_values(log, 0, 4)
    assert log.recovery_point == 0 and log.unflushed_messages == 4
    log.flush()
    assert log.recovery_point == 4 and log.unflushed_messages == 0
    assert os.path.getsize(tmp_path / "topic-0" / "00000000000000000000.log") == log.size
    log.close()


def test_flush_ms_background(tmp_path):
    log = open_log(tmp_path, {"flush.ms": 30})
    append_values(log, 0, 3)
    deadline = time.monotonic() + 10
    while log.recovery_point < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.recovery_point == 3
    log.close()


# -- offsets for times -----------------------------------------------------------------------------
def test_offset_for_timestamp_across_segments(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 400, "index.interval.bytes": 50})
    for i in range(30):
        log.append(make_batch([b"x", b"y"], [BASE_TS + 100 * i, BASE_TS + 100 * i + 50]))
    assert len(log.segments) > 2
    for target, expected in [
        (0, 0),
        (BASE_TS, 0),
        (BASE_TS + 1, 1),
        (BASE_TS + 51, 2),
        (BASE_TS + 1450, 29),
        (BASE_TS + 2950, 59),
    ]:
        got = log.offset_for_timestamp(target)
        assert got is not None and got.offset == expected, target
    assert log.offset_for_timestamp(BASE_TS + 2951) is None
    assert log.offset_for_timestamp(-3) == TimestampAndOffset(BASE_TS + 2950, 59, 0)
    log.increment_log_start_offset(11)
    assert log.offset_for_timestamp(BASE_TS).offset == 11
    log.close()


# -- retention -------------------------------------------------------------------------------------
def test_time_retention(tmp_path, clock):
    log = open_log(tmp_path, {"segment.bytes": 300, "retention.ms": 10_000}, clock=clock)
    for i in range(12):
        log.append(make_batch([b"r%d" % i], [BASE_TS + i * 1000]))
    n_before = len(log.segments)
    clock.now = BASE_TS + 5000 + 10_001  # segments whose max timestamp <= BASE_TS+5000 expire
    deleted = log.delete_retention()
    assert deleted > 0 and len(log.segments) == n_before - deleted
    first = log.segments[0]
    assert log.log_start_offset == first.base_offset
    assert all(s.largest_timestamp > BASE_TS + 5000 for s in log.segments[:1])
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert all_records(log)[0][0] == first.base_offset
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    # everything expired: the active segment is rolled and deleted too, one empty segment stays
    clock.now = BASE_TS + 10**9
    log.delete_retention()
    assert [s.base_offset for s in log.segments] == [12] and log.log_start_offset == 12
    assert log.log_end_offset == 12 and log.delete_retention() == 0
    log.append(make_batch([b"again"]))
    assert all_records(log) == [(12, b"again")]
    log.close()
    ckpt = checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert ckpt[files.TopicPartition("topic", 0)] == 13


def test_size_retention(tmp_path, clock):
    one = len(values_batch(0, 1))
    log = open_log(tmp_path, {"segment.bytes": one * 2, "retention.bytes": one * 5}, clock=clock)
    append_values(log, 0, 10)
    assert log.size == one * 10
    assert log.delete_retention() == 2  # 5 segments of 2: deleting 2 leaves 3 (6 batches >= 5)
    assert log.size == one * 6 and log.log_start_offset == 4
    assert log.delete_retention() == 0
    log.close()


def test_log_start_offset_retention_and_checkpoint(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 200, "cleanup.policy": "compact", "retention.ms": 1})
    for i in range(20):
        log.append(make_batch([b"v%d" % i], keys=[b"k%d" % i]))
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 1
    assert log.increment_log_start_offset(target)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    assert all_records(log)[0][0] == target
    assert list(log.read(target, 10**6))[0].last_offset == target
    assert log.delete_retention() == 2  # only the log-start pass runs for compact-only topics
    assert log.segments[0].base_offset == bases[2] and log.log_start_offset == target
    ckpt = checkpoints.read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint")
    assert ckpt == {files.TopicPartition("topic", 0): target}
    with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
        log.increment_log_start_offset(100)
    log.close()
    log = open_log(tmp_path, {"segment.bytes": 200})
    assert log.log_start_offset == target
    log.close()


# -- truncation ------------------------------------------------------------------------------------
def test_truncate_to(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300, "flush.messages": 1})
    for i in range(0, 30, 3):
        log.append(values_batch(i, 3), leader_epoch=i // 9)
    bases = [s.base_offset for s in log.segments]
    assert log.truncate_to(16)  # the batch [15, 17] goes entirely
    assert log.log_end_offset == 15 and log.recovery_point == 15
    assert all_records(log) == [(i, b"v%d" % i) for i in range(15)]
    assert all(s.base_offset <= 15 for s in log.segments)
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 9)]
    assert not log.truncate_to(100)
    log.append(values_batch(100, 2))
    assert all_records(log)[-2:] == [(15, b"v100"), (16, b"v101")]
    log.verify_indexes()
    log.close()
    ckpt = checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert ckpt[files.TopicPartition("topic", 0)] == 17
    log = open_log(tmp_path)
    assert log.log_end_offset == 17 and bases[0] == log.segments[0].base_offset
    assert log.truncate_to(0) and log.log_end_offset == 0 and len(log.segments) == 1
    log.close()


def test_truncate_fully(tmp_path):
    log = open_log(tmp_path)
    append_values(log, 0, 5)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    log.append(make_batch([b"x"]))
    assert all_records(log) == [(100, b"x")]
    log.close()
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (100, 101)
    log.close()


# -- open / close ----------------------------------------------------------------------------------
def test_reopen_after_clean_close(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 500})
    append_values(log, 0, 40, per_batch=2)
    n_segs = len(log.segments)
    log.close()
    d = tmp_path / "topic-0"
    assert checkpoints.read_clean_shutdown_file(d / ".kafka_cleanshutdown") == -1
    log = open_log(tmp_path, {"segment.bytes": 500})
    assert log.had_clean_shutdown and not (d / ".kafka_cleanshutdown").exists()
    assert log.log_end_offset == 40 and log.recovery_point == 40 and len(log.segments) == n_segs
    log.verify_indexes()
    append_values(log, 40, 2)
    assert all_records(log) == [(i, b"v%d" % i) for i in range(42)]
    log.close()


def test_directory_lock(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(LogLockedError):
        open_log(tmp_path)
    ro = open_log(tmp_path, read_only=True)  # readers do not lock
    ro.close()
    log.close()
    open_log(tmp_path).close()


def test_read_only_open_changes_nothing(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    append_values(log, 0, 10)
    log.flush()
    # crash image: copy the directory while the log is open
    import shutil

    shutil.copytree(tmp_path / "topic-0", tmp_path / "img-0")
    log.close()
    d = tmp_path / "img-0"
    last_log = sorted(n for n in os.listdir(d) if n.endswith(".log"))[-1]
    with open(d / last_log, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn tail
    snapshot = {n: (d / n).read_bytes() for n in os.listdir(d)}
    ro = Log.open(d, read_only=True)
    assert not ro.had_clean_shutdown
    assert ro.log_end_offset == 10 and all_records(ro) == [(i, b"v%d" % i) for i in range(10)]
    with pytest.raises(ValueError, match="read-only"):
        ro.append(make_batch([b"x"]))
    ro.verify_indexes()
    ro.close()
    assert {n: (d / n).read_bytes() for n in os.listdir(d)} == snapshot
    with pytest.raises(FileNotFoundError):
        Log.open(tmp_path / "absent-0", read_only=True)


def test_topic_id_and_partition_metadata(tmp_path):
    tid = uuid.uuid4()
    log = open_log(tmp_path, topic_id=tid)
    assert log.topic_id == tid
    log.close()
    assert (
        checkpoints.read_partition_metadata(tmp_path / "topic-0" / "partition.metadata").topic_id
        == tid
    )
    log = open_log(tmp_path)
    assert log.topic_id == tid
    log.close()
    with pytest.raises(ValueError, match="does not match"):
        open_log(tmp_path, topic_id=uuid.uuid4())


def test_non_partition_directory_name(tmp_path):
    log = Log.open(tmp_path / "plain-dir")
    append_values(log, 0, 3)
    log.close()
    assert sorted(os.listdir(tmp_path)) == ["plain-dir"]  # no root checkpoint files
    log = Log.open(tmp_path / "plain-dir")
    assert log.log_end_offset == 3 and log.topic_partition is None
    log.close()


def test_delete_log(tmp_path):
    log = open_log(tmp_path)
    append_values(log, 0, 3)
    log.close()
    log = open_log(tmp_path)
    log.delete()
    assert not (tmp_path / "topic-0").exists()
    assert checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {}


def test_max_offset_bounds_reads(tmp_path):
    log = open_log(tmp_path)
    for i in range(5):
        log.append(values_batch(i * 2, 2))
    r = log.read(0, 10**6, max_offset=6)
    assert [b.last_offset for b in r] == [1, 3, 5]
    assert log.read(6, 10**6, max_offset=6).size_in_bytes == 0
    assert log.read(7, 10**6, max_offset=6).size_in_bytes == 0
    log.close()


def test_concurrent_appends_and_reads(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 2000})
    errors = []

    def writer(tag):
        try:
            for i in range(100):
                log.append(make_batch([b"%s-%d" % (tag, i)]))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader():
        try:
            for _ in range(100):
                end = log.log_end_offset
                if end:
                    list(log.read(end - 1, 1000))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in (b"a", b"b")] + [
        threading.Thread(target=reader)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    recs = all_records(log)
    assert [o for o, _ in recs] == list(range(200))
    assert sorted(v for _, v in recs) == sorted(
        [b"a-%d" % i for i in range(100)] + [b"b-%d" % i for i in range(100)]
    )
    log.verify_indexes()
    log.close()


def test_fast_and_full_validation_paths_write_identical_bytes(tmp_path):
    fast = open_log(tmp_path, name="fast-0")
    full = open_log(tmp_path, name="full-0", validate_records=True)
    batches = [
        make_batch([b"a", b"b"]),
        make_batch([b"c"], compression="gzip"),
        make_batch([b"d"], producer_id=4, producer_epoch=1, base_sequence=0),
        make_batch([b"e", b"f", b"g"], [BASE_TS + 5, BASE_TS + 1, BASE_TS + 3]),
    ]
    for epoch, data in enumerate(batches):
        a = fast.append(bytearray(data), leader_epoch=epoch)
        b = full.append(memoryview(data), leader_epoch=epoch)
        assert a == b
    fast.close()
    full.close()
    for name in ("00000000000000000000.log", "00000000000000000000.timeindex"):
        assert (tmp_path / "fast-0" / name).read_bytes() == (
            tmp_path / "full-0" / name
        ).read_bytes()


def test_wrong_header_max_timestamp_is_fixed_by_full_validation(tmp_path):
    data = bytearray(make_batch([b"a", b"b"], [BASE_TS + 7, BASE_TS + 9]))
    struct.pack_into(">q", data, 35, 0)  # a producer that leaves maxTimestamp at 0 (sarama)
    data = patch_crc(data)
    trusting = open_log(tmp_path, name="trust-0")
    assert trusting.append(data).max_timestamp == 0  # the CRC-covered header is trusted
    trusting.close()
    checking = open_log(tmp_path, name="check-0", validate_records=True)
    info = checking.append(data)
    assert info.max_timestamp == BASE_TS + 9
    (batch,) = checking.iter_batches()
    assert batch.max_timestamp == BASE_TS + 9 and batch.is_valid()
    checking.close()


def test_preallocate(tmp_path):
    config = {"preallocate": True, "segment.bytes": 1 << 20}
    log = open_log(tmp_path, config)
    seg_path = tmp_path / "topic-0" / "00000000000000000000.log"
    assert os.path.getsize(seg_path) == 1 << 20
    append_values(log, 0, 5)
    log.flush()
    img = tmp_path / "img-0"
    import shutil

    shutil.copytree(tmp_path / "topic-0", img)  # crash image: preallocated zeros after the data
    log.close()
    assert os.path.getsize(seg_path) == log.segments[0].size  # trimmed on close
    rec = Log.open(img, config)
    assert rec.log_end_offset == 5 and all_records(rec) == [(i, b"v%d" % i) for i in range(5)]
    rec.close()


def test_close_handlers_then_recover(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 400})
    append_values(log, 0, 12)
    log.close_handlers()
    assert not (tmp_path / "topic-0" / files.CLEAN_SHUTDOWN_FILE).exists()
    log = open_log(tmp_path, {"segment.bytes": 400})
    assert not log.had_clean_shutdown and log.log_end_offset == 12
    log.verify_indexes()
    log.close()


def test_read_without_min_one_message_can_be_partial(tmp_path):
    log = open_log(tmp_path)
    log.append(values_batch(0, 3, size=100))
    r = log.read(0, 50, min_one_message=False)
    assert r.size_in_bytes == 50 and list(r) == [] and r.truncated_bytes == 50
    assert len(list(log.read(0, 50))) == 1
    log.close()


def test_segment_jitter(tmp_path, clock):
    log = open_log(tmp_path, {"segment.ms": 1000, "segment.jitter.ms": 900}, clock=clock)
    seg = log.active_segment
    assert 0 <= seg.roll_jitter_ms < 900
    log.append(make_batch([b"a"], [BASE_TS]))
    log.append(make_batch([b"b"], [BASE_TS + 1000 - seg.roll_jitter_ms + 1]))
    assert len(log.segments) == 2
    log.close()
