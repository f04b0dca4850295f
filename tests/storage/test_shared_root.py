"""Several writers on one log root: the root's checkpoint files are read-modify-written under
the root lock, so no writer loses or corrupts another's entries (Kafka's LogManager holds the
root for its logs)."""
from __future__ import annotations

import multiprocessing
import os
import threading

from kafkalog.storage import checkpoints, files
from kafkalog.storage.log import Log

from .conftest import values_batch

ROUNDS = 60


def _writer(root: str, partition: int, rounds: int, q) -> None:
    try:
        with Log.open(os.path.join(root, f"topic-{partition}"), checkpoint_interval_ms=0) as log:
            for i in range(rounds):
                log.append(values_batch(i, 1))
                log.flush()  # rewrites this partition's recovery-point entry
                log.increment_log_start_offset(i // 2)  # and its log-start entry
        q.put((partition, None))
    except BaseException as e:  # reported to the parent
        q.put((partition, f"{type(e).__name__}: {e}"))


def _check_root(root, n, rounds):
    for name in (files.RECOVERY_POINT_CHECKPOINT_FILE, files.LOG_START_OFFSET_CHECKPOINT_FILE):
        entries = checkpoints.read_offset_checkpoint(os.path.join(root, name))
        assert sorted(entries) == [files.TopicPartition("topic", p) for p in range(n)], name
    read = checkpoints.read_offset_checkpoint
    rp = read(os.path.join(root, files.RECOVERY_POINT_CHECKPOINT_FILE))
    assert all(v == rounds for v in rp.values()), rp
    ls = read(os.path.join(root, files.LOG_START_OFFSET_CHECKPOINT_FILE))
    assert all(v == (rounds - 1) // 2 for v in ls.values()), ls
    leftovers = [n for n in os.listdir(root) if n.endswith(files.TEMP_FILE_SUFFIX)]
    assert leftovers == []


def test_processes_appending_to_partitions_of_one_root(tmp_path):
    n = 4
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), p, ROUNDS, q)) for p in range(n)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(n):
            part, err = q.get(timeout=120)
            results[part] = err
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():  # pragma: no cover - a hang is a failure, not a leftover
                p.kill()
                p.join()
    assert results == {p: None for p in range(n)}
    _check_root(str(tmp_path), n, ROUNDS)


def test_threads_with_logs_of_one_root(tmp_path):
    n = 3
    errors = []

    def run(p):
        try:
            with Log.open(tmp_path / f"topic-{p}", checkpoint_interval_ms=0) as log:
                for i in range(ROUNDS):
                    log.append(values_batch(i, 1))
                    log.flush()
                    log.increment_log_start_offset(i // 2)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(p,)) for p in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert errors == []
    _check_root(str(tmp_path), n, ROUNDS)


def test_update_offset_checkpoint_from_processes(tmp_path):
    """The checkpoint helper alone, hammered by processes: every entry survives."""
    path = str(tmp_path / files.CLEANER_OFFSET_CHECKPOINT_FILE)
    n, rounds = 4, 80
    ctx = multiprocessing.get_context("fork")

    def hammer(p):
        for i in range(rounds):
            checkpoints.update_offset_checkpoint(path, {("t", p): i + 1}, fsync=False)

    procs = [ctx.Process(target=hammer, args=(p,)) for p in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    codes = [p.exitcode for p in procs]
    assert codes == [0] * n
    assert checkpoints.read_offset_checkpoint(path) == {
        files.TopicPartition("t", p): rounds for p in range(n)
    }
