"""Concurrent writers of one partition (issue item 8): two append jobs committing to the same
partition at once, and a writable ``Log`` opened while a commit runs.  Every writer takes the
partition's lock (``kafkalog.storage.commit``) from the commit's check of the log end to its
directory swap, so the second waits and appends after the first, or fails naming the writer
that holds the partition; no writer's records are ever lost.

The commits are driven directly (``kafkalog.spark._write.commit_job``, no JVM), in threads and
in processes; a pause injected just before the first commit's swap makes the race certain."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog import MemoryRecordsBuilder  # noqa: E402
from kafkalog.errors import LogLockedError  # noqa: E402
from kafkalog.spark import _write as w  # noqa: E402
from kafkalog.storage import checkpoints, files  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

TOPIC = "t"


def _opts(root):
    return w.WriteOptions.parse({"path": str(root), "topic": TOPIC, "fsync": "false"})


def _stage(root, job, values):
    """A job staged as a Spark task does (offsets assigned: numbered at commit)."""
    opts = _opts(root)
    w.prepare_job(opts, job)
    tw = w.TaskWriter(opts, job, "task-0", False)
    tw.write_batch(pa.record_batch({"value": pa.array(values, pa.binary())}))
    return opts, tw.finish()


def _values(root):
    with Log.open(root / f"{TOPIC}-0", read_only=True) as log:
        return [(r.offset, r.value) for r in log.iter_records()]


def _existing(root, n=10):
    opts, staged = _stage(root, "job-0", [b"old-%d" % i for i in range(n)])
    w.commit_job(opts, "job-0", staged, False)


def _pause_before_swap(monkeypatch, thread_name, seconds, entered):
    """Make the commit running in ``thread_name`` stop for ``seconds`` just before it swaps
    the partition directory in (``entered`` is set when it gets there)."""
    real = files.exchange_paths

    def exchange(a, b):
        if threading.current_thread().name == thread_name:
            entered.set()
            time.sleep(seconds)
        return real(a, b)

    monkeypatch.setattr(files, "exchange_paths", exchange)


def test_two_append_commits_to_one_partition_keep_every_record(tmp_path, monkeypatch):
    """Two jobs staged on the same log end (10) commit at once: the second waits for the
    first's swap, then numbers its records after the first's (20 records, none lost)."""
    root = tmp_path / "root"
    _existing(root)
    opts_a, staged_a = _stage(root, "job-a", [b"a-%d" % i for i in range(5)])
    opts_b, staged_b = _stage(root, "job-b", [b"b-%d" % i for i in range(5)])
    entered = threading.Event()
    _pause_before_swap(monkeypatch, "commit-a", 1.0, entered)
    errors = []

    def commit(opts, job, staged):
        try:
            w.commit_job(opts, job, staged, False)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    a = threading.Thread(target=commit, args=(opts_a, "job-a", staged_a), name="commit-a")
    a.start()
    assert entered.wait(30)
    b = threading.Thread(target=commit, args=(opts_b, "job-b", staged_b), name="commit-b")
    b.start()
    a.join(60)
    b.join(60)
    assert not errors, errors
    got = _values(root)
    assert [o for o, _ in got] == list(range(20))
    assert sorted(v for _, v in got) == sorted(
        [b"old-%d" % i for i in range(10)] + [b"a-%d" % i for i in range(5)]
        + [b"b-%d" % i for i in range(5)])
    # the first committed first: its records directly follow the old ones
    assert [v for _, v in got[10:15]] == [b"a-%d" % i for i in range(5)]
    with Log.open(root / f"{TOPIC}-0", read_only=True) as log:
        log.verify_indexes()
    assert checkpoints.read_offset_checkpoint(root / files.RECOVERY_POINT_CHECKPOINT_FILE) == {
        files.TopicPartition(TOPIC, 0): 20}
    # no lock file is left behind once every writer is done
    assert not [n for n in os.listdir(root) if n.startswith(".") and n != ".lock"]


_COMMIT_SCRIPT = r"""
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from kafkalog.spark import _write as w
from kafkalog.storage import files
import pyarrow as pa

root, job, prefix, pause, ready = sys.argv[2:7]
opts = w.WriteOptions.parse({"path": root, "topic": "t", "fsync": "false"})
w.prepare_job(opts, job)
tw = w.TaskWriter(opts, job, "task-0", False)
tw.write_batch(pa.record_batch({"value": pa.array([b"%s-%d" % (prefix.encode(), i)
                                                   for i in range(5)], pa.binary())}))
staged = tw.finish()
real = files.exchange_paths
def exchange(a, b):
    open(ready, "w").close()
    time.sleep(float(pause))
    return real(a, b)
files.exchange_paths = exchange
open(ready + ".staged", "w").close()
go = ready + ".go"
while not os.path.exists(go):
    time.sleep(0.01)
w.commit_job(opts, job, staged, False)
"""


def test_two_append_commits_in_two_processes_keep_every_record(tmp_path):
    """The same race between two processes (two Spark drivers): the lock is a flock on a file
    in the root, so the second process waits too."""
    import kafkalog

    root = tmp_path / "root"
    _existing(root)
    src = str(Path(kafkalog.__file__).resolve().parent.parent)
    procs = []
    for name, pause in (("a", "1.0"), ("b", "0")):
        ready = str(tmp_path / f"ready-{name}")
        procs.append((subprocess.Popen(
            [sys.executable, "-c", _COMMIT_SCRIPT, src, str(root), f"job-{name}", name, pause,
             ready], stderr=subprocess.PIPE), ready))
    for p, ready in procs:  # both staged on log end 10
        deadline = time.monotonic() + 60
        while not os.path.exists(ready + ".staged"):
            assert p.poll() is None, p.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.02)
    (pa_, ready_a), (pb, ready_b) = procs
    open(ready_a + ".go", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(ready_a):  # a is about to swap (and pauses)
        assert pa_.poll() is None, pa_.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    open(ready_b + ".go", "w").close()
    for p, _ in procs:
        assert p.wait(120) == 0, p.stderr.read().decode()
    got = _values(root)
    assert [o for o, _ in got] == list(range(20))
    assert {v[:2] for _, v in got[10:]} == {b"a-", b"b-"}
    assert len({v for _, v in got}) == 20


def test_log_opened_during_a_commit_waits_and_appends_after_it(tmp_path, monkeypatch):
    """A writable Log opened on the partition while a commit is between its check of the log
    end and its swap waits for the commit, then appends after the committed records (it used
    to append to the directory the commit was about to replace: its records vanished)."""
    root = tmp_path / "root"
    _existing(root)
    opts, staged = _stage(root, "job-a", [b"a-%d" % i for i in range(5)])
    entered = threading.Event()
    _pause_before_swap(monkeypatch, "commit-a", 0.5, entered)
    appended = []

    def append_with_a_log():
        log = Log.open(root / f"{TOPIC}-0")
        try:
            for i in range(3):
                b = MemoryRecordsBuilder()
                b.append(1_700_000_000_000 + i, None, b"log-%d" % i)
                appended.append(log.append(b.build()).first_offset)
        finally:
            log.close()

    writer = threading.Thread(target=append_with_a_log, name="log-writer")

    def start_writer_at_swap(a, b, real=files.exchange_paths):
        if threading.current_thread().name == "commit-a" and not writer.is_alive():
            writer.start()
        return real(a, b)

    monkeypatch.setattr(files, "exchange_paths", start_writer_at_swap)
    c = threading.Thread(target=w.commit_job, args=(opts, "job-a", staged, False),
                         name="commit-a")
    c.start()
    c.join(60)
    writer.join(60)
    assert appended == [15, 16, 17]
    got = _values(root)
    assert [o for o, _ in got] == list(range(18))
    assert [v for _, v in got[10:]] == [b"a-%d" % i for i in range(5)] + [
        b"log-%d" % i for i in range(3)]


def test_commit_fails_naming_a_log_that_holds_the_partition(tmp_path, monkeypatch):
    """A partition held open for writing by a Log (here: in another thread, for longer than
    the commit waits) makes the commit fail, naming that writer; the target is unchanged."""
    from kafkalog.storage import partition_lock

    root = tmp_path / "root"
    _existing(root)
    opts, staged = _stage(root, "job-a", [b"a-%d" % i for i in range(5)])
    held = threading.Event()
    done = threading.Event()

    def hold():
        log = Log.open(root / f"{TOPIC}-0")
        held.set()
        done.wait(60)
        log.close()

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(30)
        monkeypatch.setattr(partition_lock, "WAIT_TIMEOUT_S", 0.5)
        with pytest.raises(LogLockedError) as ei:
            w.commit_job(opts, "job-a", staged, False)
        msg = str(ei.value)
        assert "t-0" in msg and "kafkalog.storage.Log" in msg and f"pid {os.getpid()}" in msg
        assert "job-a" in msg
    finally:
        done.set()
        t.join(60)
    assert _values(root) == [(i, b"old-%d" % i) for i in range(10)]
    w.abort_job(opts, "job-a")


def test_two_spark_append_jobs_at_once_keep_every_record(spark, tmp_path):
    """Two Spark jobs appending to one partition at the same time (their commits run in two
    Python workers): every record of both is there after both, numbered one job after the
    other."""
    out = str(tmp_path / "out")
    schema = "value BINARY"
    spark.createDataFrame([(b"old-%d" % i,) for i in range(10)], schema) \
        .write.format("kafkalog").mode("append").option("topic", TOPIC).save(out)
    dfs = [spark.createDataFrame([(b"%s-%d" % (n, i),) for i in range(5)], schema)
           for n in (b"a", b"b")]
    errors = []

    def job(df):
        # a Python thread talks to its own JVM thread, where no session is active yet: the
        # source is found through the active session
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        try:
            df.write.format("kafkalog").mode("append").option("topic", TOPIC).save(out)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(str(e)[:3000])

    threads = [threading.Thread(target=job, args=(df,)) for df in dfs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    got = _values(Path(out))
    assert [o for o, _ in got] == list(range(20))
    assert sorted(v for _, v in got[10:]) == sorted(
        [b"a-%d" % i for i in range(5)] + [b"b-%d" % i for i in range(5)])
    # one job's records, then the other's (each job's in its order)
    firsts = [v[:1] for _, v in got[10:]]
    assert firsts in ([b"a"] * 5 + [b"b"] * 5, [b"b"] * 5 + [b"a"] * 5)
