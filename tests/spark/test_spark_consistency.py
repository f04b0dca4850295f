"""Reads racing the writer's commits: a read sees each partition wholly as it was before or
wholly as it was after a concurrent overwrite/append commit, or fails with the retryable
``ConcurrentWriteError`` - never rows of two versions, never a raw OSError.

A writer thread commits jobs (``kafkalog.spark._write``, as ``df.write`` does) in a loop - one
overwrite or append at a time, every commit's rows tagged with its number, small segments so
a partition spans many files and several splits - and records every state the target passes
through.  The reading loop plans and reads (``read_split`` directly, both twins; once through
Spark) and checks each partition it returned against those states.  Bounded in time."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog.spark import _discovery, _errors, _options, _planning, _tasks  # noqa: E402
from kafkalog.spark import _write as w  # noqa: E402
from kafkalog.storage import logdir as _logdir  # noqa: E402

TOPIC = "t"
PARTS = (0, 1)


class Writer(threading.Thread):
    """Commits jobs until stopped; ``states[p]`` holds every value list partition ``p`` had."""

    def __init__(self, root: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.active = threading.Event()  # commits only while set
        self.active.set()
        self.lock = threading.Lock()  # held during a commit
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.current = {p: [] for p in PARTS}
        self.states = {p: {()} for p in PARTS}
        self.commits = 0
        self.error = None

    def commit(self) -> None:
        overwrite = self.rng.random() < 0.6 or not self.current[0]
        opts = w.WriteOptions.parse({"path": self.root, "topic": TOPIC, "segmentBytes": 1024})
        job = "job-" + uuid.uuid4().hex[:8]
        w.prepare_job(opts, job)
        tw = w.TaskWriter(opts, job, "task-0", overwrite)
        values, parts, new = [], [], {}
        for p in PARTS:
            n = self.rng.randrange(20, 120)
            new[p] = [b"c%d-p%d-%d" % (self.commits, p, i) for i in range(n)]
            values += new[p]
            parts += [p] * n
        tw.write_batch(pa.record_batch({"value": values, "partition": pa.array(parts, pa.int32())}))
        staged = tw.finish()
        for p in PARTS:  # every state a reader may see is known before it can be seen
            after = new[p] if overwrite else self.current[p] + new[p]
            self.states[p].add(tuple(after))
        w.commit_job(opts, job, staged, overwrite)
        for p in PARTS:
            self.current[p] = new[p] if overwrite else self.current[p] + new[p]
        self.commits += 1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if not self.active.wait(0.05):
                    continue
                with self.lock:
                    self.commit()
        except BaseException as e:  # pragma: no cover - reported by the test
            self.error = e


def _check(rows_by_part, writer: Writer) -> None:
    for p, rows in rows_by_part.items():
        rows.sort()
        offsets = [o for o, _ in rows]
        values = tuple(v for _, v in rows)
        assert offsets == list(range(len(rows))), f"partition {p}: offsets {offsets}"
        assert values in writer.states[p], f"partition {p}: a mix of versions: {values}"


def _race(root, read_once, seconds: float, min_reads: int = 20, quiet_every: int = 0):
    """Read in a loop while the writer commits; with ``quiet_every`` n, every n-th read runs
    while the writer waits (it must then see the current state)."""
    writer = Writer(str(root), 1)
    writer.commit()
    writer.start()
    consistent = retryable = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline or consistent + retryable < min_reads:
            quiet = quiet_every and (consistent + retryable) % quiet_every == 0
            if quiet:
                writer.active.clear()
                writer.lock.acquire()  # no commit in flight
            try:
                rows = read_once()
            except _errors.ConcurrentWriteError as e:
                assert not quiet, e
                assert e.retryable and "re-run the query" in str(e)
                retryable += 1
                continue
            finally:
                if quiet:
                    writer.lock.release()
                    writer.active.set()
            _check(rows, writer)
            if quiet:
                for p, r in rows.items():
                    assert tuple(v for _, v in sorted(r)) == tuple(writer.current[p])
            consistent += 1
            if time.monotonic() > deadline + 60:
                break
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.error is None, writer.error
    assert writer.commits > 3
    return consistent, retryable


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_read_split_never_mixes_versions(tmp_path, fail_on_data_loss):
    root = tmp_path / "logs"
    root.mkdir()
    opts = _options.ReadOptions.parse({
        "path": str(root),
        "maxPartitionBytes": "1500",
        "defaultParallelism": "4",
        "failOnDataLoss": fail_on_data_loss,
    })
    schema = pa.schema([pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
                        pa.field("value", pa.binary())])

    def read_once():
        out = {p: [] for p in PARTS}
        splits = _planning.plan(opts)
        for split in splits:
            time.sleep(0.001)  # let commits land between the splits of one read
            for rb in _tasks.read_split(split, opts, schema):
                for p, o, v in zip(*(rb.column(i).to_pylist() for i in range(3))):
                    out[p].append((o, v))
        return out

    consistent, retryable = _race(root, read_once, 3.0, quiet_every=10)
    assert consistent > 0


def test_generation_marker_is_new_in_every_commit(tmp_path):
    """The writer leaves a fresh marker in each directory it swaps in, an append included (a
    hard link to the previous directory's marker would make the two look the same)."""
    root = tmp_path / "logs"
    root.mkdir()
    writer = Writer(str(root), 2)
    seen = set()
    for _ in range(6):
        writer.commit()
        for p in PARTS:
            v = _logdir.dir_version(str(root / f"{TOPIC}-{p}"))
            if v is not None:
                assert v[2] is not None and v not in seen
                seen.add(v)


def test_spark_read_never_mixes_versions(spark, tmp_path):
    root = tmp_path / "logs"
    root.mkdir()

    def read_once():
        try:
            got = (
                spark.read.format("kafkalog")
                .load(str(root))
                .select("partition", "offset", "value")
                .collect()
            )
        except Exception as e:
            if "ConcurrentWriteError" in str(e):
                raise _errors.ConcurrentWriteError("re-run the query") from e
            raise
        out = {p: [] for p in PARTS}
        for r in got:
            out[r[0]].append((r[1], bytes(r[2])))
        return out

    # a Spark job takes longer than a commit: every other read runs while the writer waits
    consistent, retryable = _race(root, read_once, 0.0, min_reads=4, quiet_every=2)
    assert consistent > 0


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("how", ["unlink", "rename"])
def test_segment_deleted_after_planning_is_data_loss(tmp_path, isolation, how):
    """Retention deletes the oldest segment between planning and reading (a broker renames it
    to ``.deleted`` first): failOnDataLoss=true fails naming the segment and its offsets;
    false warns and reads every record that is still there."""
    from kafkalog.records import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    d = tmp_path / "logs" / "r-0"
    with Log.open(d, {"segment.bytes": 1024}) as log:
        for i in range(60):
            b = MemoryRecordsBuilder()
            b.append(1_700_000_000_000 + i, None, b"value-%03d" % i)
            log.append(b.build())
    schema = pa.schema([pa.field("offset", pa.int64())])

    def read(fail):
        opts = _options.ReadOptions.parse({
            "path": str(tmp_path / "logs"),
            "failOnDataLoss": fail,
            "kafka.isolation.level": isolation,
        })
        splits = _planning.plan(opts)
        (tp,) = _discovery.discover(opts)
        first = tp.segments[0]
        if how == "unlink":
            os.unlink(first.path)
        else:
            os.rename(first.path, first.path + ".deleted")
        out = []
        for split in splits:
            for rb in _tasks.read_split(split, opts, schema):
                out += rb.column(0).to_pylist()
        return first, tp.segments[1].base_offset, out

    with pytest.raises(_errors.DataLossError) as err:
        read("true")
    first = err.value.path
    assert first.endswith(".log") and "offset 0" in str(err.value)
    assert "failOnDataLoss=false" in str(err.value)
    with pytest.warns(UserWarning, match="deleted .*after this query was planned"):
        _seg, next_base, got = read("false")
    assert got == list(range(next_base, 60))


def test_a_split_of_many_segments_holds_few_files_open(tmp_path):
    """A split over more segments than are opened at once reads them all, later ones opened
    as it goes, with a bounded number of open files."""
    from kafkalog.records import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    d = tmp_path / "logs" / "many-0"
    with Log.open(d, {"segment.bytes": 1024}) as log:
        for i in range(2000):
            b = MemoryRecordsBuilder()
            b.append(1_700_000_000_000 + i, None, b"v%04d" % i)
            log.append(b.build())
    opts = _options.ReadOptions.parse({"path": str(tmp_path / "logs"), "minPartitions": "1"})
    (split,) = _planning.plan(opts)
    assert len({p.path for p in split.pieces}) > 2 * _tasks._SplitFiles.EAGER
    schema = pa.schema([pa.field("offset", pa.int64())])
    fd_dir = "/proc/self/fd"
    before = len(os.listdir(fd_dir)) if os.path.isdir(fd_dir) else None
    got, most = [], 0
    for rb in _tasks.read_split(split, opts, schema):
        got += rb.column(0).to_pylist()
        if before is not None:
            most = max(most, len(os.listdir(fd_dir)) - before)
    assert got == list(range(2000))
    assert most <= _tasks._SplitFiles.EAGER + 4
