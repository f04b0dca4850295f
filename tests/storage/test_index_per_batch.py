"""Offset and time index entries are added per batch (Kafka 4.x, KAFKA-806), on every write path.

The expected entries come from a small model of the rule that reads nothing but the ``.log``
bytes: walk the batches of a segment from position 0 with a byte counter starting at 0; before
each batch, when the counter exceeds ``index.interval.bytes``, expect an offset entry (that
batch's last offset, its position) and a time entry (max timestamp so far, the last offset of the
batch that first reached it) when that timestamp grew, and reset the counter; then add the
batch's size.  A closed or recovered segment's time index ends with the segment's max timestamp.
The index files are parsed raw, so neither side borrows kafkalog's index code.
"""

from __future__ import annotations

import io
import shutil
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.storage.cleaner import Cleaner, CleanerConfig
from kafkalog.storage.log import Log, LogConfig

from .conftest import BASE_TS, make_batch

_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- the model -----------------------------------------------------------------------------------
def model(log_bytes: bytes, interval: int, final: bool = True, restarts=()):
    """(offset entries, time entries) the per-batch rule gives for one segment's bytes;
    ``restarts``: positions where a broker closed the segment (final time entry) and reopened
    it (counter back to 0)."""
    pos = since = 0
    max_ts, max_off = -1, None
    oidx, tidx = [], []
    n = len(log_bytes)
    while pos + 17 <= n:
        if pos in restarts:
            if ts_grew(tidx, max_ts):
                tidx.append((max_ts, max_off))
            since = 0
        offset, size = struct.unpack_from(">qi", log_bytes, pos)
        total = size + 12
        assert pos + total <= n
        magic = log_bytes[pos + 16]
        if magic == 2:
            last = offset + struct.unpack_from(">i", log_bytes, pos + 23)[0]
            ts = struct.unpack_from(">q", log_bytes, pos + 35)[0]
        elif magic == 1:
            last, ts = offset, struct.unpack_from(">q", log_bytes, pos + 18)[0]
        else:
            last, ts = offset, -1
        if ts > max_ts:
            max_ts, max_off = ts, last
        if since > interval:
            oidx.append((last, pos))
            if ts_grew(tidx, max_ts):
                tidx.append((max_ts, max_off))
            since = 0
        since += total
        pos += total
    if final and ts_grew(tidx, max_ts):
        tidx.append((max_ts, max_off))
    return oidx, tidx


def ts_grew(tidx, ts) -> bool:
    return ts > (tidx[-1][0] if tidx else -1)


def read_indexes(log_path: Path):
    base = int(log_path.name[:20])
    stem = str(log_path)[:-4]
    raw = Path(stem + ".index").read_bytes()
    oidx = [(base + r, p) for r, p in struct.iter_unpack(">ii", raw[: len(raw) // 8 * 8])]
    while oidx and oidx[-1] == (base, 0):  # untrimmed zero tail
        oidx.pop()
    raw = Path(stem + ".timeindex").read_bytes()
    tidx = [(t, base + r) for t, r in struct.iter_unpack(">qi", raw[: len(raw) // 12 * 12])]
    while tidx and tidx[-1] == (0, base):
        tidx.pop()
    return oidx, tidx


def check_dir(d: Path, interval: int) -> int:
    """Every segment of ``d`` holds exactly the model's entries; returns the entry count."""
    count = 0
    for log_path in sorted(d.glob("*.log")):
        want = model(log_path.read_bytes(), interval)
        got = read_indexes(log_path)
        assert got == want, log_path.name
        count += len(got[0])
    return count


def recover_and_check(d: Path, config: LogConfig, interval: int) -> None:
    """Delete the indexes, reopen (recovery rebuilds them), compare with the model."""
    for p in list(d.glob("*.index")) + list(d.glob("*.timeindex")):
        p.unlink()
    for p in d.glob("*.kafka_cleanshutdown"):
        p.unlink()
    Log.open(d, config).close()
    check_dir(d, interval)


def dump_reports_nothing(d: Path) -> None:
    """``kafkalog dump --verify-index-only`` prints only the file names (no mismatch)."""
    from kafkalog.tools.cli import main

    files = sorted(str(p) for p in list(d.glob("*.index")) + list(d.glob("*.timeindex")))
    bio = io.BytesIO()
    out = io.TextIOWrapper(bio, encoding="utf-8", write_through=True)
    err = io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        rc = main(["dump", "--verify-index-only", "--files", ",".join(files)])
        out.flush()
    finally:
        sys.stdout, sys.stderr = old
    lines = bio.getvalue().decode().splitlines()
    # kafka-dump-log takes a batch's timestamp from its records, so a time entry at an empty
    # batch (one the cleaner kept for its producer, header timestamp kept as Kafka does) reads
    # as "log timestamp: -1"; anything else is a real mismatch.
    empty_ts = set()
    for log_path in d.glob("*.log"):
        b = log_path.read_bytes()
        pos = 0
        while pos + 61 <= len(b):
            size = struct.unpack_from(">i", b, pos + 8)[0] + 12
            if b[pos + 16] == 2 and struct.unpack_from(">i", b, pos + 57)[0] == 0:
                empty_ts.add(struct.unpack_from(">q", b, pos + 35)[0])
            pos += size
    for line in err.getvalue().splitlines():
        if line.startswith("Found timestamp mismatch in :"):
            continue
        ts = line.strip().split(",")[0].split(": ")[-1]
        assert line.strip().startswith("Index timestamp: ") and line.endswith(
            "log timestamp: -1"
        ) and int(ts) in empty_ts, err.getvalue()
    assert rc == 0
    assert [x for x in lines if not x.startswith("Dumping ") and not x.endswith(" is empty.")] == []


# -- generated appends ---------------------------------------------------------------------------
_batch_st = st.tuples(
    st.integers(1, 40),  # records
    st.sampled_from([0, 10, 100, 700]),  # value size
    st.sampled_from(["none", "none", "gzip", "lz4"]),
    st.integers(-5, 40),  # timestamp step (may go backwards)
)
_appends_st = st.lists(st.lists(_batch_st, min_size=1, max_size=12), min_size=1, max_size=10)


def _build(appends, magic: int, leader: bool = False):
    """Appends (lists of batch bytes) with consecutive offsets from 0 and their timestamps."""
    out = []
    offset = 0
    ts = BASE_TS
    for append in appends:
        batches = []
        for count, vsize, codec, step in append:
            if magic == 0:
                tss = None
            else:
                tss = []
                for _ in range(count):
                    ts += step
                    tss.append(ts)
            vals = [(b"v%d" % (offset + i)).ljust(vsize, b".") for i in range(count)]
            batches.append(
                make_batch(vals, tss, keys=[b"k%d" % ((offset + i) % 7) for i in range(count)],
                           base_offset=0 if leader else offset, compression=codec, magic=magic)
            )
            offset += count
        out.append(b"".join(batches))
    return out


def _config(interval: int, segment_bytes: int, **extra) -> LogConfig:
    c = {"index.interval.bytes": interval, "segment.bytes": segment_bytes}
    c.update(extra)
    return LogConfig(c)


@_SETTINGS
@given(
    appends=_appends_st,
    magic=st.sampled_from([2, 2, 1, 0]),
    interval=st.sampled_from([0, 1, 100, 600, 4096]),
    segment_bytes=st.sampled_from([3000, 20000, 1 << 20]),
)
def test_follower_appends_index_per_batch(tmp_path_factory, appends, magic, interval,
                                          segment_bytes):
    d = tmp_path_factory.mktemp("f") / "t-0"
    config = _config(interval, segment_bytes)
    with Log.open(d, config) as log:
        for data in _build(appends, magic):
            if len(data) > segment_bytes:
                continue
            log.append_as_follower(data)
    check_dir(d, interval)
    dump_reports_nothing(d)
    recover_and_check(d, config, interval)


def test_follower_multi_batch_append_gets_an_entry_per_batch(tmp_path):
    """The case the old per-append rule got wrong: one append of 20 batches of ~200 bytes with
    index.interval.bytes=100 gets 19 entries, each keyed by its own batch's last offset."""
    d = tmp_path / "t-0"
    data = _build([[(3, 150, "none", 1)] * 20], 2)[0]
    with Log.open(d, _config(100, 1 << 20)) as log:
        log.append_as_follower(data[: len(data) // 20])  # first batch alone: counter > 0 after
        log.append_as_follower(data[len(data) // 20 :])
    oidx, _ = read_indexes(d / ("0" * 20 + ".log"))
    assert [o for o, _p in oidx] == [3 * i + 2 for i in range(1, 20)]
    check_dir(d, 100)


@_SETTINGS
@given(
    appends=_appends_st,
    interval=st.sampled_from([0, 100, 600, 4096]),
    segment_bytes=st.sampled_from([3000, 1 << 20]),
)
def test_leader_appends_index_per_batch(tmp_path_factory, appends, interval, segment_bytes):
    d = tmp_path_factory.mktemp("l") / "t-0"
    config = _config(interval, segment_bytes)
    with Log.open(d, config) as log:
        for data in _build([[b] for a in appends for b in a], 2, leader=True):
            if len(data) <= segment_bytes:
                log.append(data)
    check_dir(d, interval)
    dump_reports_nothing(d)
    recover_and_check(d, config, interval)


@_SETTINGS
@given(
    appends=_appends_st,
    interval=st.sampled_from([0, 100, 600]),
)
def test_cleaner_output_index_per_batch(tmp_path_factory, appends, interval):
    d = tmp_path_factory.mktemp("c") / "t-0"
    config = _config(
        interval, 4000, **{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0}
    )
    with Log.open(d, config) as log:
        for data in _build(appends, 2):
            if len(data) <= 4000:
                log.append_as_follower(data)
        log.roll()
        log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)), force=True)
    check_dir(d, interval)
    dump_reports_nothing(d)
    recover_and_check(d, config, interval)


@_SETTINGS
@given(
    rows=st.integers(1, 3000),
    vsize=st.sampled_from([0, 30, 500]),
    batch_records=st.sampled_from([1, 7, 100, 1000]),
    compression=st.sampled_from(["none", "gzip"]),
    interval=st.sampled_from([0, 100, 4096]),
)
def test_write_arrow_index_per_batch(
    tmp_path_factory, rows, vsize, batch_records, compression, interval
):
    pa = pytest.importorskip("pyarrow")
    from kafkalog.arrow import write_arrow

    d = tmp_path_factory.mktemp("a") / "t-0"
    table = pa.table(
        {
            "value": [(b"v%d" % i).ljust(vsize, b"x") for i in range(rows)],
            "timestamp": pa.array([BASE_TS + (i * 37) % 1000 for i in range(rows)], pa.int64()),
        }
    )
    config = _config(interval, 1 << 20)
    with Log.open(d, config) as log:
        write_arrow(log, table, compression=compression, batch_records=batch_records)
    check_dir(d, interval)
    dump_reports_nothing(d)
    recover_and_check(d, config, interval)


def test_rolling_base_timestamp_is_first_batch_max(tmp_path):
    """A new segment's time-based roll counts from its first batch's max timestamp, not from the
    max of the whole first append."""
    d = tmp_path / "t-0"
    first = make_batch([b"a"], [BASE_TS], base_offset=0)
    second = make_batch([b"b"], [BASE_TS + 10_000], base_offset=1)
    with Log.open(d, _config(4096, 1 << 20, **{"segment.ms": 5_000})) as log:
        log.append_as_follower(first + second)
        # 6 s after the first batch, 4 s before the second's timestamp: the first batch counts.
        log.append_as_follower(make_batch([b"c"], [BASE_TS + 6_000], base_offset=2))
        assert len(log.segments) == 2
    assert sorted(p.name for p in d.glob("*.log"))[-1] == "%020d.log" % 2


def test_broker_directory_reindexes_to_the_broker_entries(tmp_path, broker_files):
    """A broker-written partition (Kafka 3.x/4.x KRaft data dir, __consumer_offsets-6: a
    trimmed .index of 2 entries and .timeindex of 3) holds the entries the per-batch model
    computes from its .log, and recovery with the indexes deleted rebuilds exactly them."""
    src = broker_files / "LDI-POC@8030792" / "__consumer_offsets-6"
    d = tmp_path / "__consumer_offsets-6"
    shutil.copytree(src, d)
    log_path = d / ("0" * 20 + ".log")
    broker = read_indexes(log_path)
    assert len(broker[0]) == 2 and len(broker[1]) == 3
    assert model(log_path.read_bytes(), 4096) == broker
    recover_and_check(d, _config(4096, 1 << 30, **{"cleanup.policy": "compact"}), 4096)
    assert read_indexes(log_path) == broker


@pytest.mark.parametrize(
    "name, restarts",
    [
        # 2 offset entries (57 at 4154, 114 at 8258): no restart inside the segment
        ("kafka-tester@510714e", ()),
        # the broker was restarted after offset 80 (position 5938; producer snapshots at 81 and
        # 116): its close added the time entry (.., 80) and the reopened segment counted from
        # 0 again, so it holds 1 offset entry where a rebuild finds 2
        ("kafka-tester@e856b9a", (5938,)),
    ],
)
def test_broker_metadata_log_entries(tmp_path, broker_files, name, restarts):
    """KRaft metadata logs (the raft layer appends several batches at once): the broker's
    entries are the per-batch model's, given where the broker restarted; recovery rebuilds the
    model's entries without restarts."""
    src = broker_files / name / "__cluster_metadata-0"
    d = tmp_path / "__cluster_metadata-0"
    shutil.copytree(src, d)
    log_path = d / ("0" * 20 + ".log")
    broker = read_indexes(log_path)
    assert broker[0] and model(log_path.read_bytes(), 4096, restarts=restarts) == broker
    recover_and_check(d, _config(4096, 1 << 30), 4096)


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    tasks=st.lists(st.integers(1, 400), min_size=1, max_size=3),
    vsize=st.sampled_from([1, 40, 300]),
    batch_records=st.sampled_from([1, 7, 50]),
    interval=st.sampled_from([0, 100, 4096]),
    segment_bytes=st.sampled_from([4096, 1 << 20]),
)
def test_spark_writer_core_index_per_batch(
    tmp_path_factory, tasks, vsize, batch_records, interval, segment_bytes
):
    """The Spark writer's task and commit steps (called directly, no Spark session): staged
    pieces are written, combined into one partition log and committed; its indexes follow the
    per-batch rule."""
    pa = pytest.importorskip("pyarrow")
    from kafkalog.spark import _write as w

    root = tmp_path_factory.mktemp("s")
    opts = w.WriteOptions.parse({
        "path": str(root), "topic": "t", "indexIntervalBytes": interval,
        "batchRecords": batch_records, "segmentBytes": segment_bytes, "fsync": "false",
    })
    w.prepare_job(opts, "job")
    staged = []
    for i, rows in enumerate(tasks):
        tw = w.TaskWriter(opts, "job", "task%d" % i, False, i)
        tw.write_batch(pa.record_batch({
            "value": [(b"v%d" % r).ljust(vsize, b"x") for r in range(rows)],
            "partition": pa.array([0] * rows, pa.int32()),
        }))
        staged += tw.finish()
    w.commit_job(opts, "job", staged, False)
    d = root / "t-0"
    assert check_dir(d, interval) >= 0
    dump_reports_nothing(d)
    recover_and_check(d, LogConfig(opts.log_config()), interval)


@_SETTINGS
@given(appends=_appends_st, interval=st.sampled_from([0, 100, 600]))
def test_old_style_entries_still_read(tmp_path_factory, appends, interval):
    """Entries as brokers before 4.0 wrote them (one per append past the interval, keyed by the
    append's largest offset at its first batch's position): lookups find every offset,
    ``kafkalog verify`` accepts them, and ``dump --verify-index-only`` reports the entries whose
    batch ends below their key as kafka-dump-log does (``Index offset: K, log offset: L``)."""
    from kafkalog.tools.cli import main

    d = tmp_path_factory.mktemp("o") / "t-0"
    config = _config(interval, 1 << 20)
    datas = _build(appends, 2)
    # the pre-4.0 rule, computed from the appends
    old, mismatched, since, pos = [], [], 0, 0
    for data in datas:
        last_of_append = first_batch_last = None
        p = 0
        while p < len(data):
            base, size = struct.unpack_from(">qi", data, p)
            last = base + struct.unpack_from(">i", data, p + 23)[0]
            if p == 0:
                first_batch_last = last
            last_of_append = last
            p += size + 12
        if since > interval:
            old.append((last_of_append, pos))
            if last_of_append != first_batch_last:
                mismatched.append((last_of_append, first_batch_last))
            since = 0
        since += len(data)
        pos += len(data)
    with Log.open(d, config) as log:
        for data in datas:
            log.append_as_follower(data)
        end = log.log_end_offset
    (d / ("0" * 20 + ".index")).write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in old))
    with Log.open(d, config) as log:
        for o in range(0, end, max(1, end // 40)):
            assert next(iter(log.iter_records(o))).offset == o
    assert main(["verify", str(d)]) == 0
    err = io.StringIO()
    old_err, sys.stderr = sys.stderr, err
    old_out, sys.stdout = sys.stdout, io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    try:
        main(["dump", "--verify-index-only", "--files", str(d / ("0" * 20 + ".index"))])
    finally:
        sys.stderr, sys.stdout = old_err, old_out
    # (kafka-dump-log prepends each mismatch to its report, so the last comes first)
    want = [f"  Index offset: {a}, log offset: {b}" for a, b in reversed(mismatched)]
    got = [x for x in err.getvalue().splitlines() if x.startswith("  Index offset")]
    assert got == want
