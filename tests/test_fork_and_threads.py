"""Reads stay exact across fork() and across threads.

The read path keeps its read buffers between scans (``storage.log_view``: kept buffers, a
read-ahead helper thread).  Those buffers were once anonymous *shared* mappings
(``mmap(-1, n)`` is MAP_SHARED): after a fork, parent and child took the same kept buffer and
read different files into the same pages, so each decoded the other's bytes.  These tests
read real partition directories, several MB each (so that reads go through the kept buffers
and the read-ahead thread), and compare every answer with what was written: the (offset,
value) digest of each partition, with CRC checks on.

* fork: the parent reads a partition (its buffers are then kept), forks children (a
  ``multiprocessing`` 'fork' context) that read OTHER partitions while the parent keeps
  reading its own; then the same with ``os.fork`` called while a parent thread is in the
  middle of a scan (its buffers in use, the read-ahead thread busy, the buffer lock maybe
  held).  Every read in every process must give exactly what was written; a child that hangs
  (a lock held across the fork) fails the test after a time limit.
* threads: several threads at once read different partitions, the same partition through
  separate views, and one partition through a single shared view and a single shared Log.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sys
import threading
import time
import traceback

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog import MemoryRecordsBuilder  # noqa: E402
from kafkalog.storage.log import Log, open_view  # noqa: E402

TS = 1_700_000_000_000
PARTITIONS = 4
CHILD_TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


# ------------------------------------------------------------------------------------------------
# the data
# ------------------------------------------------------------------------------------------------
def _value(p: int, offset: int, rng: random.Random) -> bytes:
    # distinct in every partition and offset; half of it incompressible
    body = rng.randbytes(rng.randrange(200, 900))
    return b"p%d|o%d|" % (p, offset) + body + b"." * rng.randrange(0, 400)


def _write_partition(d: str, p: int, target_bytes: int) -> str:
    rng = random.Random(1000 + p)
    h = hashlib.sha256()
    n = 0
    with Log.open(d, {"segment.bytes": 3 << 20, "index.interval.bytes": 4096}) as log:
        written = 0
        while written < target_bytes:
            base = log.log_end_offset
            codec = ("none", "none", "lz4", "zstd", "gzip")[rng.randrange(5)]
            b = MemoryRecordsBuilder(2, codec, base, "create_time", partition_leader_epoch=0)
            for j in range(rng.randrange(20, 120)):
                v = _value(p, base + j, rng)
                b.append(TS + base + j, b"k%d" % (base + j), v)
                h.update(b"%d:" % (base + j) + v)
                n += 1
                written += len(v)
            log.append_as_follower(b.build())
    return f"{n}:{h.hexdigest()}"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """PARTITIONS partitions of ~3-5 MB each (several segments), and the digest of each."""
    r = str(tmp_path_factory.mktemp("fork-threads") / "logs")
    digests = {}
    for p in range(PARTITIONS):
        digests[p] = _write_partition(os.path.join(r, f"t-{p}"), p, (3 << 20) + p * (700 << 10))
    return r, digests


def _digest_pairs(pairs) -> str:
    h = hashlib.sha256()
    n = 0
    for off, v in pairs:
        h.update(b"%d:" % off + v)
        n += 1
    return f"{n}:{h.hexdigest()}"


# the ways of reading a partition (each checks CRCs: to_arrow's check_crcs defaults to on, a
# view's batches are validated before their records are read)
def read_arrow_dir(d: str) -> str:
    t = ka.to_arrow(d, columns=["offset", "value"], check_crcs=True)
    return _digest_pairs(zip(t.column("offset").to_pylist(), t.column("value").to_pylist()))


def read_arrow_iter(d: str) -> str:
    def pairs():
        for rb in ka.iter_batches(d, columns=["offset", "value"], check_crcs=True,
                                  max_rows=5000):
            yield from zip(rb.column("offset").to_pylist(), rb.column("value").to_pylist())
    return _digest_pairs(pairs())


def read_log_records(d: str) -> str:
    with Log.open(d, read_only=True) as log:
        return _digest_pairs((r.offset, r.value) for r in log.iter_records())


def read_view_batches(d: str) -> str:
    def pairs(v):
        for b in v.iter_batches():
            b.ensure_valid()
            for r in b:
                yield r.offset, r.value
    with open_view(d) as v:
        return _digest_pairs(pairs(v))


READS = (read_arrow_dir, read_log_records, read_arrow_iter, read_view_batches)


def _check(d: str, expected: str, fn, who: str) -> str:
    """'' when ``fn`` reads exactly ``expected`` from ``d``, else what went wrong."""
    try:
        got = fn(d)
    except Exception as e:  # noqa: BLE001
        return f"{who}: {fn.__name__}({os.path.basename(d)}) raised {type(e).__name__}: {e}"
    if got != expected:
        return (f"{who}: {fn.__name__}({os.path.basename(d)}) read {got}, "
                f"expected {expected}")
    return ""


# ------------------------------------------------------------------------------------------------
# fork
# ------------------------------------------------------------------------------------------------
def _child(r: str, parts, digests, rounds: int, q) -> None:
    errors = []
    try:
        for k in range(rounds):
            for p in parts:
                for fn in READS:
                    msg = _check(os.path.join(r, f"t-{p}"), digests[p], fn,
                                 f"child pid {os.getpid()} round {k}")
                    if msg:
                        errors.append(msg)
    except BaseException:  # noqa: BLE001
        errors.append(traceback.format_exc())
    q.put((os.getpid(), errors))


def test_forked_children_read_other_partitions_while_the_parent_reads(root):
    import multiprocessing

    r, digests = root
    d0 = os.path.join(r, "t-0")
    # the parent reads first: its buffers are kept for its next scans
    for fn in READS:
        assert _check(d0, digests[0], fn, "parent before fork") == ""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    children = [ctx.Process(target=_child, args=(r, [p, (p % (PARTITIONS - 1)) + 1], digests,
                                                  3, q))
                for p in range(1, PARTITIONS)]
    for c in children:
        c.start()
    errors = []
    rounds = 0
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    results = {}
    try:
        # the parent keeps reading its partition (and one a child reads) until all report
        while len(results) < len(children) and time.monotonic() < deadline:
            for fn in READS:
                for p in (0, 1):
                    msg = _check(os.path.join(r, f"t-{p}"), digests[p], fn,
                                 f"parent round {rounds}")
                    if msg:
                        errors.append(msg)
            rounds += 1
            while not q.empty():
                pid, errs = q.get()
                results[pid] = errs
        while len(results) < len(children) and time.monotonic() < deadline:
            try:
                pid, errs = q.get(timeout=1)
                results[pid] = errs
            except Exception:  # queue.Empty
                pass
    finally:
        for c in children:
            c.join(timeout=max(1.0, deadline - time.monotonic()))
            if c.is_alive():
                errors.append(f"child pid {c.pid} still running after {CHILD_TIMEOUT_S} s "
                              "(hung: a lock or thread of the parent's carried over the fork?)")
                c.kill()
                c.join(5)
            elif c.exitcode != 0:
                errors.append(f"child pid {c.pid} exited {c.exitcode}")
    for c in children:
        if c.pid not in results and c.exitcode == 0:
            errors.append(f"child pid {c.pid} reported nothing")
    for pid, errs in results.items():
        errors.extend(errs)
    assert rounds >= 1
    assert not errors, "\n".join(errors)


def test_fork_while_a_parent_thread_is_mid_scan(root):
    """os.fork() while another thread of the parent is inside scans (buffers in use, the
    read-ahead thread busy): children must neither hang nor read wrong bytes, and the parent's
    thread must go on reading exactly."""
    r, digests = root
    d0 = os.path.join(r, "t-0")
    stop = threading.Event()
    parent_errors = []
    parent_rounds = [0]

    def keep_reading():
        k = 0
        while not stop.is_set():
            for fn in (read_arrow_dir, read_log_records, read_arrow_iter):
                msg = _check(d0, digests[0], fn, f"parent thread round {k}")
                if msg:
                    parent_errors.append(msg)
            k += 1
            parent_rounds[0] = k

    t = threading.Thread(target=keep_reading, name="parent-reader", daemon=True)
    t.start()
    pids = []
    errors = []
    try:
        time.sleep(0.05)
        for i in range(6):
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: no pytest, no exceptions past here
                code = 1
                try:
                    os.close(rfd)
                    p = 1 + i % (PARTITIONS - 1)
                    msgs = []
                    for fn in (read_log_records, read_view_batches, read_arrow_dir):
                        msg = _check(os.path.join(r, f"t-{p}"), digests[p], fn,
                                     f"forked child {i}")
                        if msg:
                            msgs.append(msg)
                    os.write(wfd, "\n".join(msgs).encode()[:60000])
                    code = 0 if not msgs else 3
                except BaseException:  # noqa: BLE001
                    try:
                        os.write(wfd, traceback.format_exc().encode()[:60000])
                    except BaseException:  # noqa: BLE001
                        pass
                finally:
                    os._exit(code)
            os.close(wfd)
            pids.append((i, pid, rfd))
            time.sleep(random.Random(i).uniform(0.01, 0.15))  # fork at different moments
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        for i, pid, rfd in pids:
            out = b""
            status = None
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                errors.append(f"forked child {i} (pid {pid}) hung for {CHILD_TIMEOUT_S} s "
                              "(a lock held across the fork?)")
            with os.fdopen(rfd, "rb") as f:
                out = f.read()
            if status is not None and status != 0:
                code = os.waitstatus_to_exitcode(status) if hasattr(
                    os, "waitstatus_to_exitcode") else status
                errors.append(f"forked child {i} (pid {pid}) exited {code}: "
                              f"{out.decode('utf-8', 'replace')}")
    finally:
        stop.set()
        t.join(CHILD_TIMEOUT_S)
    assert not t.is_alive(), "the parent's reading thread hung"
    errors.extend(parent_errors)
    assert parent_rounds[0] >= 1
    assert not errors, "\n".join(errors)


# ------------------------------------------------------------------------------------------------
# threads
# ------------------------------------------------------------------------------------------------
def test_threads_read_different_and_same_partitions_at_once(root):
    r, digests = root
    rounds = 3
    dirs = {p: os.path.join(r, f"t-{p}") for p in range(PARTITIONS)}
    errors = []
    shared_view = open_view(dirs[1])
    shared_log = Log.open(dirs[2], read_only=True)

    def shared_view_records():
        return _digest_pairs((r_.offset, r_.value) for r_ in shared_view.iter_records())

    def shared_view_batches():
        def pairs():
            for b in shared_view.iter_batches():
                b.ensure_valid()
                for x in b:
                    yield x.offset, x.value
        return _digest_pairs(pairs())

    def shared_view_chunks():
        # the borrowing scan (read-ahead, reused buffers), as to_arrow(dir) uses it
        from kafkalog import MemoryRecords

        def pairs():
            for _path, _pos, data in shared_view.chunks(block=1 << 20, borrow=True):
                mr = MemoryRecords(bytes(data))
                mr.validate()
                for b in mr:
                    for x in b:
                        yield x.offset, x.value
        return _digest_pairs(pairs())

    def shared_log_records():
        return _digest_pairs((r_.offset, r_.value) for r_ in shared_log.iter_records())

    def shared_log_arrow():
        t = ka.to_arrow(shared_log, columns=["offset", "value"])
        return _digest_pairs(zip(t.column("offset").to_pylist(), t.column("value").to_pylist()))

    jobs = []
    # different partitions, each through views of its own
    for p in range(PARTITIONS):
        jobs.append((f"own views t-{p} (arrow)", digests[p], lambda p=p: read_arrow_dir(dirs[p])))
        jobs.append((f"own views t-{p} (records)", digests[p],
                     lambda p=p: read_log_records(dirs[p])))
    # the same partition through separate views at once
    for k, fn in enumerate((read_arrow_iter, read_view_batches, read_arrow_dir,
                            read_log_records)):
        jobs.append((f"separate view {k} of t-0 ({fn.__name__})", digests[0],
                     lambda fn=fn: fn(dirs[0])))
    # one shared view and one shared Log, several threads each
    for name, fn in (("shared view records", shared_view_records),
                     ("shared view batches", shared_view_batches),
                     ("shared view chunks", shared_view_chunks),
                     ("shared view records 2", shared_view_records)):
        jobs.append((f"{name} of t-1", digests[1], fn))
    for name, fn in (("shared Log records", shared_log_records),
                     ("shared Log to_arrow", shared_log_arrow),
                     ("shared Log records 2", shared_log_records)):
        jobs.append((f"{name} of t-2", digests[2], fn))

    barrier = threading.Barrier(len(jobs))

    def run(name, expected, fn):
        try:
            barrier.wait(timeout=60)
            for k in range(rounds):
                got = fn()
                if got != expected:
                    errors.append(f"{name} round {k}: read {got}, expected {expected}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}")

    threads = [threading.Thread(target=run, args=job, name=job[0], daemon=True) for job in jobs]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 300
        for t in threads:
            t.join(max(0.1, deadline - time.monotonic()))
        hung = [t.name for t in threads if t.is_alive()]
    finally:
        shared_view.close()
        shared_log.close()
    assert not hung, f"threads still reading after 300 s: {hung}"
    assert not errors, "\n".join(errors)
    # and after all that, a fresh read in this thread
    for p in range(PARTITIONS):
        assert read_arrow_dir(dirs[p]) == digests[p]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
