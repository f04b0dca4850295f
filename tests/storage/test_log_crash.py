"""Crash safety: a child process appends (rolling, flushing, retaining, truncating) and is
killed with SIGKILL at a random moment; the reopened log must hold every flushed record exactly
once, at contiguous offsets, with indexes that pass their checks.  Each trial crashes the same
directory twice, so recovery after recovery is covered too."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from kafkalog.storage.log import Log

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_crash_child.py")
MODES = ["explicit", "flush_messages", "flush_ms"]


def _env():
    env = dict(os.environ)
    import kafkalog

    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(kafkalog.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
    return env


def run_and_kill(directory, seed, mode, rng):
    """Start the child, kill it at a random moment, return (durable offset, lines seen)."""
    proc = subprocess.Popen(
        [sys.executable, CHILD, str(directory), str(seed), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    lines = []
    ready = threading.Event()

    def reader():
        for raw in proc.stdout:
            lines.append(raw.decode().split())
            if lines[-1][0] == "READY":
                ready.set()
        ready.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    if not ready.wait(60):
        proc.kill()
        pytest.fail("child did not start")
    if proc.poll() is not None:
        t.join(5)
        pytest.fail(f"child exited early: {proc.stderr.read().decode()}")
    time.sleep(rng.uniform(0.0, 0.25))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t.join(10)
    err = proc.stderr.read().decode()
    assert proc.returncode == -signal.SIGKILL, err  # it must not have died on its own
    durable = 0
    for parts in lines:
        if parts[0] == "F":
            durable = max(durable, int(parts[1]))
        elif parts[0] == "T":
            durable = min(durable, int(parts[1]))
    return durable, lines


def check_log(directory, durable):
    log = Log.open(directory)
    try:
        assert not log.had_clean_shutdown
        assert log.log_end_offset >= durable, (log.log_end_offset, durable)
        start, end = log.log_start_offset, log.log_end_offset
        offsets = []
        for batch in log.iter_batches():
            batch.ensure_valid()
            for r in batch:
                if r.offset >= start:
                    assert r.value.startswith(b"r%d|" % r.offset), (r.offset, r.value[:20])
                    offsets.append(r.offset)
        assert offsets == list(range(start, end))  # contiguous, each exactly once
        for seg in log.segments:
            seg.offset_index.sanity_check(full=True)
            seg.time_index.sanity_check(full=True)
        log.verify_indexes()
        return end
    finally:
        log.close()


def _trials(tmp_path, n, base_seed):
    rng = random.Random(base_seed)
    for trial in range(n):
        seed = rng.randrange(10**6)
        mode = MODES[trial % len(MODES)]
        d = tmp_path / f"t{trial}" / "crash-0"
        d.parent.mkdir()
        prev_end = 0
        for cycle in range(2):
            durable, _ = run_and_kill(d, seed + cycle, mode, rng)
            if not d.exists():
                continue
            end = check_log(d, durable)
            prev_end = end
        assert prev_end >= 0


def test_sigkill_during_appends(tmp_path):
    _trials(tmp_path, 6, base_seed=2024)


@pytest.mark.slow
def test_sigkill_during_appends_many_trials(tmp_path):
    # Deselected by default (pyproject addopts '-m "not slow"'); run with: pytest -m slow
    _trials(tmp_path, 60, base_seed=int(os.environ.get("KAFKALOG_CRASH_SEED", "7")))
