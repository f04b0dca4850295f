"""The sink's task writer and commit without Spark: pieces of one partition written by any
number of tasks commit to the log one writer would make (offsets numbered across tasks,
segments rolled at segmentBytes), and records without a timestamp get the write time."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from kafkalog import arrow as ka  # noqa: E402
from kafkalog.partitioner import default_partition, partition_of  # noqa: E402
from kafkalog.spark import _staging  # noqa: E402
from kafkalog.spark import _write as w  # noqa: E402

SEGMENT_BYTES = 2048


def _opts(root, **extra):
    o = {"path": root, "topic": "t", "segmentBytes": str(SEGMENT_BYTES), "batchBytes": "300",
         "fsync": "false"}
    o.update({k: str(v) for k, v in extra.items()})
    return w.WriteOptions.parse(o)


def _run_job(opts, tasks, overwrite=False):
    """tasks: [(task_index, [RecordBatch, ...]), ...] in the order their commit messages
    arrive; returns the commit summary."""
    job = "job-test"
    w.prepare_job(opts, job)
    staged = []
    for n, (idx, batches) in enumerate(tasks):
        tw = w.TaskWriter(opts, job, f"task-{n}", overwrite, task_index=idx)
        for rb in batches:
            tw.write_batch(rb)
        staged.extend(tw.finish())
    return w.commit_job(opts, job, staged, overwrite)


def _batch(values, partition, offsets=None, timestamps=None):
    cols = {
        "value": pa.array(values, pa.binary()),
        "partition": pa.array([partition] * len(values), pa.int32()),
    }
    if offsets is not None:
        cols["offset"] = pa.array(offsets, pa.int64())
    if timestamps is not None:
        cols["timestamp"] = pa.array(timestamps, pa.int64())
    return pa.record_batch(cols)


def _records(d):
    t = ka.to_arrow(d, columns=["offset", "value", "timestamp"])
    return list(zip(t.column("offset").to_pylist(), t.column("value").to_pylist()))


def _segments(d, from_offset=0):
    """Per segment from ``from_offset`` on (in offset order): the sizes of its batches."""
    out = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".log") or int(name[:-4]) < from_offset:
            continue
        sizes = []
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            size = struct.unpack_from(">i", data, pos + 8)[0] + 12
            sizes.append(size)
            pos += size
        out.append(sizes)
    return out


def _assert_rolled_at_segment_bytes(d, from_offset=0):
    """Every segment but the last is as full as segment.bytes allows: the next batch would
    not have fit (the greedy packing a single writer does).  An append starts a segment at
    the old log end (the old segments are kept as they are): ``from_offset``."""
    segs = [s for s in _segments(d, from_offset) if s]
    for cur, nxt in zip(segs, segs[1:]):
        assert sum(cur) <= SEGMENT_BYTES
        assert sum(cur) + nxt[0] > SEGMENT_BYTES, (d, [sum(s) for s in segs])
    return len(segs)


_VALUES = st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=120)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=_VALUES,
    cuts=st.lists(st.integers(0, 120), max_size=12),
    order=st.randoms(use_true_random=False),
    preserve=st.booleans(),
    first=st.integers(0, 5000),
    existing=st.integers(0, 30),
)
def test_pieces_of_many_tasks_make_one_writers_log(values, cuts, order, preserve, first, existing):
    root = tempfile.mkdtemp(prefix="kl-write-core-")
    try:
        opts = _opts(root)
        if existing:  # an existing partition to append to
            _run_job(opts, [(0, [_batch([b"old"] * existing, 0, timestamps=[1] * existing)])])
        base = existing if not preserve else existing + first
        bounds = sorted({c % (len(values) + 1) for c in cuts} | {0, len(values)})
        pieces = [values[a:b] for a, b in zip(bounds, bounds[1:])]
        tasks = []
        for idx, vals in enumerate(pieces):
            start = base + sum(len(p) for p in pieces[:idx])
            offs = list(range(start, start + len(vals))) if preserve else None
            # each task's rows arrive in a few Arrow batches (timestamps given, so that the
            # layouts compare byte for byte)
            half = len(vals) // 2
            ts = [1000 + len(v) for v in vals]
            tasks.append((idx, [_batch(vals[:half], 0, offs and offs[:half], ts[:half]),
                                _batch(vals[half:], 0, offs and offs[half:], ts[half:])]))
        order.shuffle(tasks)  # commit messages arrive in any order
        summary = _run_job(opts, tasks)
        d = os.path.join(root, "t-0")
        want = [(i, b"old") for i in range(existing)]
        want += [(base + i, v) for i, v in enumerate(values)]
        assert _records(d) == want
        assert summary["records"] == len(values)
        _assert_rolled_at_segment_bytes(d, existing)
        # one task writing the same rows gives the same records in the same segment layout,
        # up to where batches were cut between tasks
        one = tempfile.mkdtemp(prefix="kl-write-one-")
        try:
            o1 = _opts(one)
            if existing:
                _run_job(o1, [(0, [_batch([b"old"] * existing, 0, timestamps=[1] * existing)])])
            offs = list(range(base, base + len(values))) if preserve else None
            ts = [1000 + len(v) for v in values]
            _run_job(o1, [(0, [_batch(values, 0, offs, ts)])])
            assert _records(os.path.join(one, "t-0")) == want
            if len(pieces) == 1:
                assert _segments(os.path.join(one, "t-0")) == _segments(d)
        finally:
            shutil.rmtree(one, ignore_errors=True)
        from kafkalog.storage.log import Log

        with Log.open(d, read_only=True) as log:
            assert (log.log_start_offset, log.log_end_offset) == (
                0 if existing or not preserve else first,
                base + len(values),
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_overwrite_numbers_from_zero_and_appends_continue(tmp_path):
    opts = _opts(str(tmp_path))
    vals = [bytes([i]) * 50 for i in range(90)]
    _run_job(opts, [(i, [_batch(vals[i::3], 0)]) for i in range(3)])
    want = [(i, v) for i, v in enumerate(vals[0::3] + vals[1::3] + vals[2::3])]
    assert _records(str(tmp_path / "t-0")) == want
    _run_job(opts, [(1, [_batch([b"b"], 0)]), (0, [_batch([b"a"], 0)])])
    assert _records(str(tmp_path / "t-0"))[-2:] == [(90, b"a"), (91, b"b")]
    _run_job(opts, [(1, [_batch([b"y"], 0)]), (0, [_batch([b"x"], 0)])], overwrite=True)
    assert _records(str(tmp_path / "t-0")) == [(0, b"x"), (1, b"y")]
    assert _assert_rolled_at_segment_bytes(str(tmp_path / "t-0")) == 1


def test_overlapping_given_offsets_are_refused(tmp_path):
    opts = _opts(str(tmp_path))
    with pytest.raises(w.WriteError, match="overlapping offsets"):
        _run_job(opts, [(0, [_batch([b"a", b"b"], 0, [0, 1])]),
                        (1, [_batch([b"c"], 0, [1])])])
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []


def test_records_without_timestamp_get_the_write_time(tmp_path):
    opts = _opts(str(tmp_path))
    t0 = int(time.time() * 1000)
    _run_job(opts, [(0, [_batch([b"a", b"b"], 0)]),
                    (1, [_batch([b"c", b"d"], 1, timestamps=[None, 7])])])
    t1 = int(time.time() * 1000)
    t = ka.to_arrow(
        str(tmp_path / "t-0"), columns=["timestamp", "timestampType"], timestamp_unit=None
    )
    assert all(t0 <= x <= t1 for x in t.column("timestamp").to_pylist())
    assert set(t.column("timestampType").to_pylist()) == {0}  # CreateTime
    t = ka.to_arrow(str(tmp_path / "t-1"), columns=["timestamp"], timestamp_unit=None)
    first, second = t.column("timestamp").to_pylist()
    assert t0 <= first <= t1 and second == 7  # a given timestamp is kept


def test_stamp_keeps_given_timestamps_of_any_unit():
    now = 1_700_000_000_123
    us = pa.array([5_000, None], pa.timestamp("us", tz="UTC"))
    rb = _staging._stamp(pa.record_batch({"value": pa.array([b"a", b"b"]), "timestamp": us}), now)
    assert rb.column("timestamp").to_pylist() == [5, now]
    rb = _staging._stamp(pa.record_batch({"value": pa.array([b"a"])}), now)
    assert rb.column("timestamp").to_pylist() == [now]
    given_ts = pa.record_batch({"value": pa.array([b"a"]), "timestamp": pa.array([-1])})
    assert _staging._stamp(given_ts, now) is given_ts  # nothing missing: untouched


@pytest.mark.parametrize("mode", ["errorifexists", "ignore"])
def test_target_written_during_the_job(tmp_path, mode):
    """errorifexists and ignore test the target again at commit: data that appeared while the
    job ran is neither overwritten nor mixed with the job's."""
    root = str(tmp_path / "target")
    opts = _opts(root, saveMode=mode)
    assert w.effective_mode(opts, False) == mode
    assert w.check_save_mode(opts, mode)  # no target yet
    w.prepare_job(opts, "job-a")
    tw = w.TaskWriter(opts, "job-a", "task-0", False)
    tw.write_batch(_batch([b"new"], 0))
    staged = tw.finish()
    other = _opts(root)
    _run_job(other, [(0, [_batch([b"other"], 0)])])  # another writer gets there first
    if mode == "ignore":
        assert w.commit_job(opts, "job-a", staged, False, mode)["records"] == 0
    else:
        with pytest.raises(w.WriteError, match="already exists"):
            w.commit_job(opts, "job-a", staged, False, mode)
        w.abort_job(opts, "job-a")
    assert [v for _o, v in _records(os.path.join(root, "t-0"))] == [b"other"]
    assert not os.path.exists(os.path.join(root, w.STAGING_DIR))
    assert not w.check_save_mode(opts, "ignore")
    with pytest.raises(w.WriteError, match="already exists"):
        w.check_save_mode(opts, "errorifexists")
    with pytest.raises(w.WriteError, match="contradicts"):
        w.effective_mode(opts, True)


@pytest.mark.parametrize(
    "key,hint",
    [
        ("compresion", "did you mean 'compression'"),
        ("Compression.Level", "did you mean 'compressionLevel'"),
        ("segmentByte", "did you mean 'segmentBytes'"),
        ("preserveOffset", "did you mean 'preserveOffsets'"),
        ("kafka.compresion.type", "did you mean 'kafka.compression.type'"),
        ("colour", "unknown option 'colour' for the kafkalog sink"),
    ],
)
def test_unknown_write_option_is_an_error_with_a_suggestion(tmp_path, key, hint):
    """As for reads: a misspelled write option fails, naming the closest known one, instead of
    writing uncompressed (or unrolled, renumbered...) data."""
    with pytest.raises(w.WriteError, match=hint):
        w.WriteOptions.parse({"path": str(tmp_path), "topic": "t", key: "zstd"})
    with pytest.raises(w.WriteError, match=hint):
        w.check_option_keys({key: "1"})
    assert not os.listdir(tmp_path)


def test_producer_options_are_ignored_with_a_warning(tmp_path):
    ignored = r"ignoring option\(s\) kafka.acks, kafka.bootstrap.servers"
    with pytest.warns(UserWarning, match=ignored):
        o = w.WriteOptions.parse({"path": str(tmp_path), "kafka.bootstrap.servers": "b:9092",
                                  "kafka.acks": "all", "compression": "zstd",
                                  "storage.region": "x"})
    assert o.compression == "zstd"


@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=6)),
                          st.one_of(st.none(), st.binary(max_size=6)),
                          st.one_of(st.none(), st.integers(0, 4))), max_size=40),
       st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_partition_column_is_the_helpers_partitioner(rows, n):
    """A plain write with numPartitions places each row where ``kafkalog.spark.write`` would:
    a given partition as it is, a keyed row by murmur2 of its key, an unkeyed one by murmur2 of
    its value; so the two writers agree and a retried task routes every row the same way,
    whatever batch it falls in."""
    keys = pa.array([k for k, _v, _p in rows], pa.binary())
    values = pa.array([v for _k, v, _p in rows], pa.binary())
    parts = pa.array([p for _k, _v, p in rows], pa.int32())
    want = [p if p is not None else default_partition(k if k is not None else (v or b""), n)
            for k, v, p in rows]
    assert _staging.partition_column(keys, values, parts, n).to_pylist() == want
    # one batch or one row at a time: the same places
    assert [_staging.partition_column(keys.slice(i, 1), values.slice(i, 1), parts.slice(i, 1),
                                      n)[0].as_py() for i in range(len(rows))] == want
    # the rule of kafkalog.spark.write's UDF: the same places
    assert [p if p is not None else partition_of(k, v, n) for k, v, p in rows] == want


def test_partition_of_hashes_text_as_utf8_and_a_missing_key_by_value():
    """A key or value given as text or a buffer hashes as its bytes; no key, the value; no
    key and no value, empty bytes."""
    for n in (1, 3, 7):
        assert partition_of("kéy", None, n) == default_partition("kéy".encode("utf-8"), n)
        assert partition_of(bytearray(b"k1"), b"v", n) == default_partition(b"k1", n)
        assert partition_of(None, memoryview(b"v1"), n) == default_partition(b"v1", n)
        assert partition_of(None, None, n) == default_partition(b"", n)
        assert partition_of(b"", b"v1", n) == default_partition(b"", n)  # an empty key is a key
    assert {partition_of(f"k{i}", None, 7) for i in range(50)} == set(range(7))
