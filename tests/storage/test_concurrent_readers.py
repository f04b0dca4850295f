"""Concurrent readers: while one writer appends to a log with a small ``segment.bytes`` (a roll
every few batches) and flushes now and then, readers in other threads (``Log.read`` as a
consumer fetches, ``Log.iter_batches``, ``Log.offset_for_timestamp``) and in another process
(the raw ``.log`` bytes through ``MemoryRecords``, read-only ``Segment`` and ``Log`` objects,
``kafkalog dump``) read it over and over.  Every reader must only ever see complete, CRC-valid
batches with contiguous offsets, each record the one written at its offset; a torn tail that a
raw-file reader meets (the writer's bytes not all there yet) is an incomplete tail
(``truncated_bytes``, dump's trailing bytes), never corruption or an exception.

Bounded by a batch count and a short time limit; the checks are invariants of every
interleaving (no timing assertion), so the outcome does not depend on scheduling.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

from kafkalog import MemoryRecords
from kafkalog.records import MemoryRecordsBuilder
from kafkalog.storage.log import Log

from .conftest import BASE_TS

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reader_child.py")
CFG = {"segment.bytes": 4096, "index.interval.bytes": 256, "segment.index.bytes": 4096}
MAX_BATCHES = 3000
MAX_SECONDS = 1.5


def _env():
    import kafkalog

    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(kafkalog.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH", "")) if p)
    return env


def _batch(offset: int, n: int, rng: random.Random, pad: int = 300, base_offset: int = 0) -> bytes:
    b = MemoryRecordsBuilder(compression_type="none", base_offset=base_offset)
    for i in range(n):
        b.append(BASE_TS + offset + i, None, b"r%d|" % (offset + i) + b"." * rng.randrange(pad))
    return b.build()


class Writer(threading.Thread):
    """Appends batches (1-5 records) and flushes every 50 batches; with ``big_every``, every
    that many batches also appends three ~200 KB batches in one ``append_as_follower`` call
    (larger than the segment write buffer: written straight to the file)."""

    def __init__(self, log, seed=7, big_every=0):
        super().__init__(name="writer", daemon=True)
        self.log = log
        self.rng = random.Random(seed)
        self.big_every = big_every
        self.done = threading.Event()
        self.error = None
        self.batches = 0

    def run(self):
        try:
            deadline = time.monotonic() + MAX_SECONDS
            while self.batches < MAX_BATCHES and time.monotonic() < deadline:
                off = self.log.log_end_offset
                self.log.append(_batch(off, self.rng.randrange(1, 6), self.rng))
                self.batches += 1
                if self.big_every and self.batches % self.big_every == 0:
                    off = self.log.log_end_offset
                    data = b"".join(
                        _batch(off + 2 * j, 2, self.rng, 100_000, base_offset=off + 2 * j)
                        for j in range(3)
                    )
                    self.log.append_as_follower(data)
                if self.batches % 50 == 0:
                    self.log.flush()
        except BaseException as e:  # pragma: no cover - reported by the test
            self.error = e
        finally:
            self.done.set()


def check_batches(batches, start=None):
    """CRC-valid, contiguous, every record the one written at its offset; returns the next
    offset."""
    nxt = start
    for b in batches:
        b.ensure_valid()
        assert nxt is None or b.base_offset == nxt, (b.base_offset, nxt)
        for r in b:
            assert r.value.startswith(b"r%d|" % r.offset), (r.offset, r.value[:20])
        nxt = b.last_offset + 1
    return nxt


class Reader(threading.Thread):
    def __init__(self, name, fn, writer):
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.writer = writer
        self.error = None
        self.passes = 0

    def run(self):
        try:
            while True:
                finished = self.writer.done.is_set()
                self.fn()
                self.passes += 1
                if finished:
                    return  # one last pass over the finished log
                time.sleep(0.001)  # let the writer run too
        except BaseException as e:
            self.error = e


@pytest.mark.parametrize("big", [False, True], ids=["small-batches", "with-large-appends"])
def test_thread_and_process_readers_see_only_complete_batches(tmp_path, big):
    d = tmp_path / "topic-0"
    cfg = dict(CFG, **{"segment.bytes": 1_500_000}) if big else CFG
    log = Log.open(d, cfg)
    log.append(_batch(0, 3, random.Random(0)))
    log.flush()

    child = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", CHILD, str(d)],  # a crash prints its stack
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        ready: list = []  # the READY line, read with a bound on the wait
        t = threading.Thread(target=lambda: ready.append(child.stdout.readline()), daemon=True)
        t.start()
        t.join(60)
        if not ready or ready[0].strip() != b"READY":
            child.kill()
            _, err = child.communicate()
            raise AssertionError(f"reader child not ready (exit {child.returncode}, got "
                                 f"{ready!r}): {err.decode()[-3000:]}")
        writer = Writer(log, big_every=25 if big else 0)

        def fetch_loop():
            """A consumer: fetch from where it is, at most 2000 bytes at a time."""
            pos = log.log_start_offset
            while pos < log.log_end_offset:
                data = log.read(pos, max_bytes=2000 if not big else 300_000)
                mr = MemoryRecords(data.buffer())
                nxt = check_batches(mr)
                assert nxt is not None and nxt > pos, (pos, nxt)  # progress, no skipped offset
                assert list(mr)[0].base_offset <= pos < nxt
                pos = nxt

        def scan():
            check_batches(log.iter_batches(), log.log_start_offset)

        def lookup():
            end = log.log_end_offset
            found = log.offset_for_timestamp(BASE_TS + end // 2)
            assert found is not None and found.offset <= end

        readers = [Reader("fetch", fetch_loop, writer), Reader("scan", scan, writer),
                   Reader("lookup", lookup, writer)]
        for r in readers:
            r.start()
        writer.start()
        writer.join(60)
        assert writer.done.is_set()
        for r in readers:
            r.join(60)
        assert writer.error is None, repr(writer.error)
        for r in readers:
            assert r.error is None, f"{r.name}: {r.error!r}"
            assert r.passes >= 1
        with open(str(d) + ".stop", "w"):
            pass
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, f"reader child exited {child.returncode}: {err.decode()[-3000:]}"
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["errors"] == [], report["errors"]
    assert report["passes"] >= 1 and report["files"] >= 1 and report["batches"] >= 1, report
    assert writer.batches > 0 and len(log.segments) > (1 if big else 3)  # it rolled
    end = log.log_end_offset
    log.close()

    # what everyone saw is what stayed
    log = Log.open(d, cfg, read_only=True)
    try:
        assert check_batches(log.iter_batches(), 0) == end
    finally:
        log.close()


def test_raw_reader_reports_a_torn_tail_as_incomplete(tmp_path):
    """A ``.log`` read while its last batch is half written: every read API reports the
    complete batches and the torn tail as incomplete, without an exception."""
    from kafkalog.storage.segment import Segment

    d = tmp_path / "topic-0"
    log = Log.open(d, CFG)
    rng = random.Random(3)
    for _ in range(5):
        log.append(_batch(log.log_end_offset, 2, rng))
    log.close()
    path = d / "00000000000000000000.log"
    whole = path.read_bytes()
    tail = _batch(10, 2, rng)
    # a multi-batch append larger than the write buffer while it is being written: the first
    # byte of its first size field makes it say more than a segment holds until the last write
    # fixes it
    several = bytearray(b"".join(_batch(10 + 2 * j, 2, rng, base_offset=10 + 2 * j)
                                 for j in range(3)))
    several[8] = 0x7F
    for cut in (1, 11, 12, 17, 40, 61, len(tail) - 1, "several"):
        torn = bytes(several) if cut == "several" else tail[:cut]
        cut = len(torn)
        path.write_bytes(whole + torn)
        mr = MemoryRecords(path.read_bytes())
        assert check_batches(mr, 0) == 10
        assert mr.valid_bytes == len(whole) and mr.truncated_bytes == cut
        seg = Segment.open(str(d), 0, read_only=True)
        try:
            assert check_batches((b for _p, b in seg.iter_batches()), 0) == 10
            assert [h.last_offset for h in seg.iter_headers()][-1] == 9
            assert seg.read_next_offset() == 10
        finally:
            seg.close()
        ro = Log.open(d, CFG, read_only=True)
        try:
            assert ro.log_end_offset == 10
            assert check_batches(ro.iter_batches(), 0) == 10
        finally:
            ro.close()
        res = subprocess.run(
            [sys.executable, "-m", "kafkalog", "dump", "--json", str(path)],
            capture_output=True, env=_env(), timeout=60,
        ) if cut in (1, 40) else None
        if res is not None:
            assert res.returncode == 0, res.stderr.decode()
            lines = [json.loads(x) for x in res.stdout.decode().splitlines()]
            assert [x["type"] for x in lines].count("batch") == 5
            assert lines[-1]["type"] == "trailing_bytes" and lines[-1]["bytes"] == cut
            assert all(x.get("isValid", True) for x in lines)


@pytest.mark.slow
def test_readers_many_rounds(tmp_path):
    """The concurrent test five times more (deselected by default)."""
    for i in range(5):
        for big in (False, True):
            sub = tmp_path / f"r{i}-{big}"
            sub.mkdir()
            test_thread_and_process_readers_see_only_complete_batches(sub, big)
