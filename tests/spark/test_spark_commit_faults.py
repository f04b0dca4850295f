"""Faults in the Spark writer's driver commit (``kafkalog.spark._write.commit_job``), driven
directly - no JVM: tasks stage partition logs with ``TaskWriter`` as Spark tasks do, then every
OS call of the commit (assembling each partition's directory, fsyncs, the swap into place, the
root checkpoints, removing the staging area) fails in turn (see ``tests/storage/_faults.py``),
and the driver aborts the job as Spark does after a failed commit.

Checked: the error is a KafkaStorageError saying what happened; the target directory is
either exactly as before the job (every partition's records, the root checkpoints, no new
directory) or, when the commit went through, exactly as a clean commit leaves it; a fault that
lasts (so that putting back fails too) leaves each partition old, new, or - named in the error -
its previous directory at ``<topic>-<partition>.<id>-delete``; leftovers are only ever inside
``.kafkalog-staging``."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from storage._faults import ENOSPC, ERROR, PARTIAL, FaultInjector, scratch_dir  # noqa: E402

from kafkalog.errors import KafkaStorageError  # noqa: E402
from kafkalog.records import MemoryRecordsBuilder  # noqa: E402
from kafkalog.spark import _write as w  # noqa: E402
from kafkalog.storage import checkpoints, files  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

TOPIC = "t"
CKPTS = (
    files.RECOVERY_POINT_CHECKPOINT_FILE,
    files.LOG_START_OFFSET_CHECKPOINT_FILE,
    files.REPLICATION_OFFSET_CHECKPOINT_FILE,
)


@pytest.fixture
def faults(monkeypatch):
    inj = FaultInjector()
    inj.install(monkeypatch)
    inj.patch_callable(monkeypatch, files, "exchange_paths", "exchange")
    return inj


@pytest.fixture
def scratch(tmp_path):
    yield from scratch_dir(tmp_path, "kafkalog-commit-faults-")


def _existing(root: Path) -> None:
    """The target before the job: t-0 with 6 records (log start moved to 2), another
    partition's checkpoint entries that must survive."""
    log = Log.open(root / f"{TOPIC}-0", {"segment.bytes": 1024})
    for i in range(6):
        b = MemoryRecordsBuilder()
        b.append(1_700_000_000_000 + i, None, b"old-%d" % i)
        log.append(b.build())
    log.increment_log_start_offset(2)
    log.close()
    for name in CKPTS:
        checkpoints.update_offset_checkpoint(root / name, {("other", 0): 42})


def _stage(root: Path, overwrite: bool):
    """Stage a job as two tasks would: t-0 (appended to or replaced) and a new t-1."""
    opts = w.WriteOptions.parse({"path": str(root), "topic": TOPIC, "segmentBytes": 1024})
    job = "job-" + uuid.uuid4().hex[:8]
    w.prepare_job(opts, job)
    staged = []
    for task, (part, n) in enumerate([(0, 30), (1, 25)]):
        tw = w.TaskWriter(opts, job, f"task-{task}", overwrite)
        tw.write_batch(pa.record_batch({
            "value": [b"new-%d-%d" % (part, i) for i in range(n)],
            "partition": pa.array([part] * n, pa.int32()),
        }))
        staged.extend(tw.finish())
    return opts, job, staged


def _state(root: Path):
    """Everything a reader sees: each partition's (log start, [values]), the checkpoints, the
    names in the root."""
    parts = {}
    for p in (0, 1):
        d = root / f"{TOPIC}-{p}"
        if not d.is_dir():
            parts[p] = None
            continue
        log = Log.open(d, read_only=True)
        try:
            for b in log.iter_batches():
                b.ensure_valid()
            parts[p] = (log.log_start_offset, [r.value for r in log.iter_records()])
            log.verify_indexes()
        finally:
            log.close()
    ckpts = {}
    for name in CKPTS:
        got = checkpoints.read_offset_checkpoint(root / name)
        ckpts[name] = {f"{tp.topic}-{tp.partition}": off for tp, off in got.items()}
    names = sorted(n for n in os.listdir(root) if n != w.STAGING_DIR and not _lock_file(n))
    return parts, ckpts, names


def _lock_file(name):
    """A partition's lock file (kafkalog.storage.partition_lock): it exists while a writer
    holds the partition, and one whose removal failed (an injected fault) is harmless: the
    next writer locks it again."""
    from kafkalog.storage import partition_lock

    return partition_lock.is_lock_file_name(name)


def _setup(root: Path, overwrite: bool):
    root.mkdir(parents=True)
    _existing(root)
    before = _state(root)
    opts, job, staged = _stage(root, overwrite)
    return opts, job, staged, before


class Template:
    """A staged job made once and copied for every trial (staging with pyarrow is the slow
    part of a trial)."""

    def __init__(self, root: Path, overwrite: bool) -> None:
        self.root = root
        self.opts, self.job, self.staged, self.before = _setup(root, overwrite)

    def copy(self, root: Path):
        shutil.copytree(self.root, root, symlinks=True)
        old = str(self.root)
        opts = w.WriteOptions.parse({"path": str(root), "topic": TOPIC, "segmentBytes": 1024})
        staged = [
            dataclasses.replace(s, directory=str(root) + s.directory[len(old):])
            for s in self.staged
        ]
        return opts, self.job, staged, self.before


def _run(faults, k, fault, opts, job, staged, overwrite, monkeypatch):
    err = None
    # abort_job (also run at the end of a commit) retries for straggling tasks with waits:
    # there are none here
    with monkeypatch.context() as m, faults.armed(k, *fault):
        m.setattr(time, "sleep", lambda s: None)
        try:
            w.commit_job(opts, job, staged, overwrite)
        except KafkaStorageError as e:
            err = e
            w.abort_job(opts, job)  # what Spark does when the commit raised
    return err


FAULTS = {
    "enospc": (ENOSPC, ERROR, False),
    "eio-partial-sticky": (5, PARTIAL, True),
}


@pytest.mark.parametrize("overwrite", [False, True], ids=["append", "overwrite"])
@pytest.mark.parametrize("fault_name", list(FAULTS))
def test_commit_faults_leave_old_or_new_target(scratch, faults, monkeypatch, overwrite,
                                               fault_name):
    fault = FAULTS[fault_name]
    sticky = fault[2]
    template = Template(scratch / "template", overwrite)
    # a clean commit: the calls, and the state it leaves
    opts, job, staged, before = template.copy(scratch / "clean")
    with faults.armed(None):
        w.commit_job(opts, job, staged, overwrite)
    calls = list(faults.calls)
    after = _state(scratch / "clean")
    assert not (scratch / "clean" / w.STAGING_DIR).exists()
    assert after != before and after[0][1] is not None
    assert any(op == "exchange" for op, _p in calls) or any(op == "rename" for op, _p in calls)
    errors = rolled_back = 0
    for k in range(1, len(calls) + 1):
        root = scratch / f"k{k}"
        opts, job, staged, before = template.copy(root)
        err = _run(faults, k, fault, opts, job, staged, overwrite, monkeypatch)
        where = f"{fault_name} at {faults.describe(k)}"
        try:
            if err is not None:
                errors += 1
                assert err.errno == fault[0] and job in str(err), str(err)
                assert isinstance(err.__cause__, OSError)
            state = _state(root)
            if err is None:
                pass  # the commit went through (faults in removing what it replaced: below)
            elif not sticky:
                assert "left as it was before the job" in str(err), str(err)
                assert state == before
                rolled_back += 1
            else:
                _check_sticky(root, state, before, after, err)
            leftovers = {n for n in os.listdir(root) if not _lock_file(n)} - set(state[2]) - {
                w.STAGING_DIR}
            assert not leftovers, leftovers
            if err is None and state[2] != after[2]:
                # removing a previous directory after the commit failed part-way: what is
                # left is marked for deletion (readers skip it, a broker deletes it)
                extra = set(state[2]) - set(after[2])
                assert all(files.parse_partition_dir(n).kind == "delete" for n in extra), extra
                assert (state[0], state[1]) == (after[0], after[1])
            elif err is None:
                assert state == after
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from e
        shutil.rmtree(root, ignore_errors=True)
    assert errors and (sticky or rolled_back)


def _check_sticky(root, state, before, after, err):
    """A fault that lasts: putting back may fail; then each partition is old or new, or gone
    with its previous directory named in the error (and still there, whole)."""
    parts, _ckpts, names = state
    msg = str(err)
    for p in (0, 1):
        got = parts[p]
        if got in (before[0][p], after[0][p]):
            continue
        if p == 0 and got is not None and got[0] < before[0][0][0]:
            # the old directory, with the log-start entry lowered for the new one still in
            # place (restoring it failed too): records below the old log start show again,
            # nothing is lost
            assert got[1] == [b"old-%d" % i for i in range(got[0], 6)], got
            continue
        assert got is None, (p, got)
        old = before[0][p]
        if old is None:
            continue  # a new partition that never arrived
        # the previous directory is where the error says
        parked = [n for n in names if n.startswith(f"{TOPIC}-{p}.") and n.endswith("-delete")]
        assert parked and parked[0] in msg, (parked, msg)
        log = Log.open(root / parked[0], read_only=True)
        try:
            assert [r.value for r in log.iter_records()][-len(old[1]):] == old[1]
        finally:
            log.close()


def test_undo_puts_back_an_exchanged_partition(scratch, monkeypatch):
    """Regression: a commit that failed after swapping some partitions in (here: writing the
    root checkpoints) left them swapped - and with the two-rename fallback, a failure between
    the renames left no partition directory at all."""
    for exchange in (True, False):
        root = scratch / f"exchange-{exchange}"
        opts, job, staged, before = _setup(root, True)
        if not exchange:
            monkeypatch.setattr(files, "exchange_paths", lambda a, b: False)
        real = checkpoints.update_offset_checkpoint
        calls = []

        def failing(path, updates, fsync=True):
            calls.append(path)
            if len(calls) == 2:
                raise OSError(28, "No space left on device", str(path))
            return real(path, updates, fsync=fsync)

        monkeypatch.setattr(checkpoints, "update_offset_checkpoint", failing)
        with pytest.raises(KafkaStorageError, match="left as it was before the job"):
            w.commit_job(opts, job, staged, True)
        monkeypatch.undo()
        w.abort_job(opts, job)
        assert _state(root) == before
        assert not (root / w.STAGING_DIR).exists()


def test_commit_stopped_after_swap_keeps_new_records(scratch, monkeypatch):
    """Regression: a commit that stopped (a crash, or a failure that could not be undone)
    after swapping an overwritten partition in but before updating the root checkpoints left
    the old, higher log-start entry: the new records below it were hidden, and when the new
    log ended below it a writable open deleted every segment."""
    root = scratch / "r"
    root.mkdir()
    log = Log.open(root / f"{TOPIC}-0", {"segment.bytes": 1024})
    for i in range(6):
        b = MemoryRecordsBuilder()
        b.append(1_700_000_000_000 + i, None, b"old-%d" % i)
        log.append(b.build())
    log.increment_log_start_offset(6)  # every old record deleted
    log.close()
    opts = w.WriteOptions.parse({"path": str(root), "topic": TOPIC, "segmentBytes": 1024})
    job = "job-crash"
    w.prepare_job(opts, job)
    tw = w.TaskWriter(opts, job, "task-0", True)
    tw.write_batch(pa.record_batch({"value": [b"new-%d" % i for i in range(3)]}))
    staged = tw.finish()
    real = checkpoints.update_offset_checkpoint
    seen = []

    def stop_at_final_update(path, updates, fsync=True):
        seen.append(dict(updates))
        if len(seen) > 1 or ("t", 0) not in updates or updates[("t", 0)] != 0:
            raise SystemExit("the driver died")  # as if the process stopped here
        return real(path, updates, fsync=fsync)

    monkeypatch.setattr(checkpoints, "update_offset_checkpoint", stop_at_final_update)
    monkeypatch.setattr(w, "_undo_commit", lambda *a: "not undone")
    with pytest.raises(SystemExit):
        w.commit_job(opts, job, staged, True)
    monkeypatch.undo()
    assert seen[0] == {("t", 0): 0}  # lowered before the swap
    log = Log.open(root / f"{TOPIC}-0")  # writable: would have deleted the segments
    try:
        assert [r.value for r in log.iter_records()] == [b"new-0", b"new-1", b"new-2"]
    finally:
        log.close()


def test_undo_restores_directories_before_checkpoints(tmp_path, monkeypatch):
    """Regression (review): the undo restored the root checkpoint entries first and the
    directories second, so a stop in between (or a directory that could not be put back) paired
    a new partition directory with the old, higher log-start entry, hiding its first records.
    Directories now go back first, and a partition whose directory stays keeps its entries."""
    root = tmp_path / "root"
    (root / w.STAGING_DIR).mkdir(parents=True)
    ckpt = str(root / files.LOG_START_OFFSET_CHECKPOINT_FILE)
    checkpoints.write_offset_checkpoint(ckpt, {(TOPIC, 0): 0, (TOPIC, 1): 0})  # the lowered entries
    swaps = []
    for p in (0, 1):
        target = root / f"{TOPIC}-{p}"
        old = root / f"{TOPIC}-{p}.old-delete"
        old.mkdir()
        (old / "marker").write_text("old")
        target.mkdir()
        (target / "marker").write_text("new")
        sw = w._Swap(str(target), str(root / w.STAGING_DIR / f"{TOPIC}-{p}"))
        sw.placed, sw.old = True, str(old)
        swaps.append(sw)
    order = []
    real_rename, real_update = os.rename, checkpoints.update_offset_checkpoint

    def rename(a, b):
        order.append(("rename", os.path.basename(str(b))))
        if str(b) == swaps[1].target:  # partition 1's old directory cannot go back
            raise OSError(5, "Input/output error", str(a))
        return real_rename(a, b)

    def update(path, entries, fsync=True):
        order.append(("checkpoint", tuple(sorted(entries))))
        return real_update(path, entries, fsync=fsync)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(checkpoints, "update_offset_checkpoint", update)
    msg = w._undo_commit(swaps, {ckpt: {(TOPIC, 0): 6, (TOPIC, 1): 6}}, fsync=False)
    monkeypatch.undo()
    assert "could not put back" in msg and swaps[1].old in msg
    first_checkpoint = next(i for i, (kind, _) in enumerate(order) if kind == "checkpoint")
    assert all(kind == "rename" for kind, _ in order[:first_checkpoint])
    assert (root / f"{TOPIC}-0" / "marker").read_text() == "old"
    # partition 0 is back to its old directory and entry; partition 1 keeps the new directory
    # and the lowered entry that does not hide its records
    assert checkpoints.read_offset_checkpoint(ckpt) == {
        files.TopicPartition(TOPIC, 0): 6, files.TopicPartition(TOPIC, 1): 0}
