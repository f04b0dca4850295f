"""Fault tests: disk-full (ENOSPC) and I/O errors (EIO) injected into every OS call of an
operation (append, roll, index writes, producer snapshots, checkpoints, retention, compaction,
recovery, close), one call at a time: a clean run counts the calls, then each call 1..N fails
in turn (see ``_faults.py``).

The contract checked after each injected fault:

* the error is a :class:`~kafkalog.errors.KafkaStorageError` (also an OSError) with the
  system's ``errno``, naming the file, with the OSError as ``__cause__``;
* the Log goes offline (as a broker takes its log dir offline): every later call but
  ``close()`` raises KafkaStorageError, ``close()`` only closes the files (no clean-shutdown
  marker) and never raises;
* opening the directory again (recovery) gives a consistent log - contiguous offsets, every
  batch CRC-valid, indexes that pass every check, checkpoints and snapshots that parse - holding
  every record whose append returned, and the records of the failed call either all or none;
* with a fault that persists until the directory is reopened ("sticky", a disk that stays
  full) everything flushed before the fault survives and what survives is a prefix of the
  appended records, cut between two calls;
* short writes (a write that returns less than asked, no error) are continued: no error, no
  damage;
* compaction leaves either the whole pre-compaction view or the compacted one.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import time
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional

import pytest

from kafkalog.control import build_end_txn_marker
from kafkalog.errors import KafkaLogError, KafkaStorageError
from kafkalog.records import MemoryRecordsBuilder
from kafkalog.storage import checkpoints, files
from kafkalog.storage.cleaner import Cleaner, CleanerConfig
from kafkalog.storage.log import Log
from kafkalog.storage.producer_state import read_snapshot

from . import _faults
from ._faults import EIO, ENOSPC, ERROR, PARTIAL, SHORT, FaultInjector, scratch_dir
from .conftest import BASE_TS, FakeClock

TOPIC = "topic"


@pytest.fixture
def faults(monkeypatch):
    inj = FaultInjector()
    inj.install(monkeypatch)
    return inj


@pytest.fixture
def scratch(tmp_path):
    yield from scratch_dir(tmp_path, "kafkalog-faults-")


def slow(fault):
    return pytest.param(fault, marks=pytest.mark.slow, id=fault.name)


def _fault_id(f):
    return f.name



class Fault(NamedTuple):
    name: str
    err: int
    kind: str
    sticky: bool


ENOSPC_ONCE = Fault("enospc", ENOSPC, ERROR, False)
EIO_PARTIAL = Fault("eio-partial-write", EIO, PARTIAL, False)
ENOSPC_STICKY = Fault("enospc-sticky", ENOSPC, PARTIAL, True)
SHORT_WRITES = Fault("short-write", 0, SHORT, False)
FAULTS = [ENOSPC_ONCE, EIO_PARTIAL, ENOSPC_STICKY, SHORT_WRITES]
FAULT_IDS = [f.name for f in FAULTS]


# By default each scenario sweeps a one-off ENOSPC and a lasting ENOSPC with partial writes
# (the append scenario every kind); the other kinds run with -m slow.
ONCE_STICKY = [ENOSPC_ONCE, ENOSPC_STICKY, slow(EIO_PARTIAL)]
ONCE = [ENOSPC_ONCE, slow(EIO_PARTIAL), slow(ENOSPC_STICKY)]


# ------------------------------------------------------------------------------------------------
# records and steps
# ------------------------------------------------------------------------------------------------
def batch(values, ts=BASE_TS, keys=None, pid=-1, epoch=-1, seq=-1, txn=False, base_offset=0,
          leader_epoch=0):
    b = MemoryRecordsBuilder(
        compression_type="none",
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        partition_leader_epoch=leader_epoch,
    )
    keys = keys or [None] * len(values)
    for i, (k, v) in enumerate(zip(keys, values)):
        b.append(ts + i, k, v)
    return b.build()


class Step(NamedTuple):
    label: str
    fn: Callable[[Log], object]
    values: List[bytes]  # the record values this step appends
    flush: bool = False  # everything appended before it is durable once it returns


def vals(tag: str, n: int, size: int = 0) -> List[bytes]:
    return [(b"%s-%d|" % (tag.encode(), i)).ljust(size, b".") for i in range(n)]


def append_step(tag, n, size=0, ts=BASE_TS, **kw) -> Step:
    v = vals(tag, n, size)
    data = batch(v, ts=ts, **kw)
    return Step(f"append {tag}", lambda log: log.append(data), v)


def follower_step(tag, sizes, size=0, ts=BASE_TS) -> Step:
    """One append_as_follower call with several batches (offsets assigned at run time)."""
    allv = []
    groups = []
    for j, n in enumerate(sizes):
        v = vals(f"{tag}.{j}", n, size)
        groups.append(v)
        allv.extend(v)

    def run(log):
        off = log.log_end_offset
        data = b""
        for v in groups:
            data += batch(v, ts=ts, base_offset=off)
            off += len(v)
        log.append_as_follower(data)

    return Step(f"follower {tag}", run, allv)


def flush_step() -> Step:
    return Step("flush", lambda log: log.flush(), [], flush=True)


def roll_step() -> Step:
    return Step("roll", lambda log: log.roll(), [])


class Outcome(NamedTuple):
    acked: List[List[bytes]]  # values of each step that returned (in order)
    failed: Optional[Step]
    error: Optional[BaseException]
    durable: int  # records durable (flushed) before the fault, setup's included
    close_error: Optional[BaseException]


def run_steps(log, steps, base_durable: int, faulted) -> Outcome:
    acked: List[List[bytes]] = []
    durable = base_durable
    failed = error = None
    for st in steps:
        try:
            st.fn(log)
        except KafkaStorageError as e:
            failed, error = st, e
            break
        acked.append(st.values)
        if st.flush:
            durable = base_durable + sum(len(a) for a in acked)
    if error is not None:
        check_offline(log, error)
    close_error = None
    try:
        log.close()
    except KafkaStorageError as e:
        assert error is None, "close() of an offline log must not raise"
        close_error = e
    check_error(close_error or error, faulted)
    assert log.closed
    return Outcome(acked, failed, error, durable, close_error)


def check_error(err, faulted) -> None:
    """The surfaced error names the file and keeps errno, the OSError chained."""
    if err is None:
        return
    assert isinstance(err, KafkaStorageError) and isinstance(err, OSError)
    assert isinstance(err, KafkaLogError)
    assert faulted.fired, "an error without an injected fault"
    assert err.errno == faulted._err, (err.errno, err)
    assert err.path, err
    assert err.path in str(err)
    assert isinstance(err.__cause__, OSError), repr(err.__cause__)
    assert "I/O error" in str(err) or "offline" in str(err)
    assert os.strerror(faulted._err) in str(err)


def check_offline(log, error) -> None:
    """After a storage error every call but close() raises KafkaStorageError."""
    assert log.offline
    for call in (
        lambda: log.append(batch([b"late"])),
        lambda: log.flush(),
        lambda: log.read(log.log_start_offset),
        lambda: log.roll(),
    ):
        with pytest.raises(KafkaStorageError) as ei:
            call()
        assert ei.value.errno == error.errno and "offline" in str(ei.value)
        assert ei.value.__cause__ is error


# ------------------------------------------------------------------------------------------------
# the reopened log
# ------------------------------------------------------------------------------------------------
def check_files(d) -> None:
    """Every checkpoint and snapshot parses."""
    root = os.path.dirname(d)
    for name in (
        files.RECOVERY_POINT_CHECKPOINT_FILE,
        files.LOG_START_OFFSET_CHECKPOINT_FILE,
        files.REPLICATION_OFFSET_CHECKPOINT_FILE,
        files.CLEANER_OFFSET_CHECKPOINT_FILE,
    ):
        checkpoints.read_offset_checkpoint(os.path.join(root, name))
    checkpoints.read_leader_epoch_checkpoint(os.path.join(d, files.LEADER_EPOCH_CHECKPOINT_FILE))
    for name in os.listdir(d):
        if name.endswith(files.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            read_snapshot(os.path.join(d, name))
        assert not name.endswith(files.TEMP_FILE_SUFFIX), name


def reopen(d, cfg, clock, faulted=True, contiguous=True):
    """Open the directory again (recovering it) and check it; returns [(offset, key, value)]
    of the data records from the log start offset."""
    log = Log.open(d, cfg, clock=clock)
    try:
        if faulted:
            assert not log.had_clean_shutdown, "a failed log wrote its clean-shutdown marker"
        out = []
        nxt = None
        for b in log.iter_batches():
            b.ensure_valid()
            if contiguous:
                assert nxt is None or b.base_offset == nxt, (b.base_offset, nxt)
                nxt = b.last_offset + 1
            if b.is_control_batch:
                continue
            for r in b:
                if r.offset >= log.log_start_offset:
                    out.append((r.offset, r.key, r.value))
        offsets = [o for o, _k, _v in out]
        assert offsets == sorted(set(offsets))
        for seg in log.segments:
            seg.offset_index.sanity_check(full=True)
            seg.time_index.sanity_check(full=True)
            seg.txn_index.sanity_check()
        log.verify_indexes()
        check_files(d)
        # still a working log
        end = log.log_end_offset
        log.append(batch([b"after"], keys=[b"after"], ts=clock.now))
        assert log.log_end_offset == end + 1
        if contiguous:
            assert nxt in (None, end)
    finally:
        log.close()
    log = Log.open(d, cfg, clock=clock)
    try:
        assert log.had_clean_shutdown
        assert [r.value for r in log.iter_records()][-1] == b"after"
    finally:
        log.close()
    return out


def check_records(got_values, base, out: Outcome, sticky: bool) -> None:
    expected = list(base)
    for v in out.acked:
        expected.extend(v)
    failed = list(out.failed.values) if out.failed is not None else []
    if not sticky:
        # every acknowledged record; the failed call's records all or none
        assert got_values in (expected, expected + failed), _diff(got_values, expected, failed)
        return
    # a fault that lasts until the reopen (as a crash would): what was flushed stays, the rest
    # is a prefix of what was appended (unflushed batches may be lost, as in a crash), and
    # the failed call's records are all there or none
    full = expected + failed
    assert got_values == full[: len(got_values)], _diff(got_values, expected, failed)
    assert len(got_values) >= out.durable, (len(got_values), out.durable)
    assert len(got_values) <= len(expected) or len(got_values) == len(full), (
        "the failed call's records cut apart", len(got_values), len(expected), len(full))


def _diff(got, expected, failed) -> str:
    return f"got {len(got)} records {got[-3:]!r}, acknowledged {len(expected)} " \
           f"{expected[-3:]!r}, failed call {len(failed)}"


# ------------------------------------------------------------------------------------------------
# the sweep
# ------------------------------------------------------------------------------------------------
def sweep(scratch, faults, fault: Fault, setup, steps, check, match=None, limit=None):
    """Count the calls of a clean run of ``steps`` (and the close after them), then fail each
    call in turn; ``check(d, outcome, fault)`` runs on the reopened directory.  Returns N."""
    d0 = scratch / "clean" / f"{TOPIC}-0"
    log, base, clock = setup(d0)
    with faults.armed(None, match=match):
        out = run_steps(log, steps(), 0, faults)
    calls = list(faults.calls)
    assert out.error is None and out.close_error is None
    check(d0, out, base, clock, False, fault)
    assert calls, "no call to fail"
    n = len(calls) if limit is None else min(limit, len(calls))
    errors = 0
    for k in range(1, n + 1):
        d = scratch / f"k{k}" / f"{TOPIC}-0"
        log, base, clock = setup(d)
        with faults.armed(k, fault.err or ENOSPC, fault.kind, fault.sticky, match=match):
            try:
                out = run_steps(log, steps(), len(base), faults)
            except Exception as e:
                raise AssertionError(
                    f"{fault.name} at {faults.describe(k)}: {type(e).__name__}: {e}"
                ) from e
        failed = out.error is not None or out.close_error is not None
        errors += failed
        if not failed and os.environ.get("KAFKALOG_FAULTS_REPORT"):
            print(f"\n  not surfaced: {faults.describe(k)}", end="")
        if fault.kind == SHORT:
            assert not failed, f"{faults.describe(k)}: a short write must be continued"
        try:
            check(d, out, base, clock, failed, fault)
        except AssertionError as e:
            raise AssertionError(f"{fault.name} at {faults.describe(k)}: {e}") from e
        shutil.rmtree(d.parent, ignore_errors=True)
    if fault.kind != SHORT:
        assert errors, "no injected fault surfaced"
    if os.environ.get("KAFKALOG_FAULTS_REPORT"):
        print(f"\n{fault.name}: {n} calls, {errors} surfaced", end=" ")
    return n


CFG = {
    "segment.bytes": 2000,
    "index.interval.bytes": 100,
    "segment.index.bytes": 4096,
}


def make_setup(cfg, base_steps):
    def setup(d):
        clock = FakeClock()
        log = Log.open(d, cfg, clock=clock)
        base = []
        for st in base_steps():
            st.fn(log)
            base.extend(st.values)
        log.flush()
        return log, base, clock

    return setup


def records_check(cfg):
    def check(d, out, base, clock, failed, fault):
        got = reopen(d, cfg, clock, faulted=failed)
        check_records([v for _o, _k, v in got], base, out, fault.sticky)

    return check


# ------------------------------------------------------------------------------------------------
# scenarios
# ------------------------------------------------------------------------------------------------
def _append_steps():
    return [
        append_step("a", 3, 60),
        append_step("b", 5, 90),  # rolls (size)
        append_step("c", 2, 40, leader_epoch=3),
        Step("epoch 4", lambda log: log.append(batch([b"e4"]), leader_epoch=4), [b"e4"]),
        flush_step(),
        follower_step("f", [2, 3, 1], 70),  # several batches in one call (rolls first)
        append_step("d", 4, 120),
        roll_step(),
        append_step("p", 2, 30, pid=9, epoch=0, seq=0),  # producer state -> snapshot at roll
        append_step("g", 6, 100),
    ]


@pytest.mark.parametrize("fault", FAULTS, ids=FAULT_IDS)
def test_append_roll_flush_faults(scratch, faults, fault):
    """Appends (single batches, several batches at once, a new leader epoch, a producer id),
    size rolls, an explicit roll, a flush and the close, with every call failing in turn."""
    setup = make_setup(CFG, lambda: [append_step("base", 4, 50)])
    n = sweep(scratch, faults, fault, setup, _append_steps, records_check(CFG))
    assert n > 60


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_flush_messages_faults(scratch, faults, fault):
    """``flush.messages=3``: appends flush by themselves (fsync in the append)."""
    cfg = dict(CFG, **{"flush.messages": 3})
    setup = make_setup(cfg, lambda: [append_step("base", 2, 50)])

    def steps():
        return [append_step(f"m{i}", 2, 80) for i in range(6)]

    sweep(scratch, faults, fault, setup, steps, records_check(cfg))


@pytest.mark.parametrize("fault", ONCE, ids=_fault_id)
def test_time_roll_faults(scratch, faults, fault):
    """Time-based rolls (``segment.ms``): each append starts a new segment, trimming the old
    segment's indexes and snapshotting producer state."""
    cfg = dict(CFG, **{"segment.ms": 1000, "segment.bytes": 100_000})
    setup = make_setup(cfg, lambda: [append_step("base", 2, 10)])

    def steps():
        return [
            append_step(f"t{i}", 2, 20, ts=BASE_TS + 1500 * (i + 1), pid=5, epoch=0, seq=2 * i)
            for i in range(4)
        ]

    sweep(scratch, faults, fault, setup, steps, records_check(cfg))


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_large_batch_faults(scratch, faults, fault):
    """Batches larger than the segment write buffer are written straight to the file (a
    partial write leaves a torn batch that must not survive as a shorter one)."""
    cfg = {"segment.bytes": 4 * 1024 * 1024, "index.interval.bytes": 4096,
           "segment.index.bytes": 4096, "max.message.bytes": 4 * 1024 * 1024}
    setup = make_setup(cfg, lambda: [append_step("base", 2, 50)])

    def steps():
        return [
            append_step("big1", 8, 80_000),
            follower_step("big2", [4, 4], 80_000),
            append_step("small", 3, 50),
        ]

    sweep(scratch, faults, fault, setup, steps, records_check(cfg))


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_index_file_faults(scratch, faults, fault):
    """Only the calls on index files fail (``.index``, ``.timeindex``, ``.txnindex``):
    creation and preallocation, the mapping, the msync of a flush, the trim at roll and close,
    and transaction-index appends of aborted transactions."""
    setup = make_setup(CFG, lambda: [append_step("base", 4, 50)])

    def steps():
        out = [
            append_step("t1", 2, 60, pid=7, epoch=0, seq=0, txn=True),
            Step(
                "abort",
                lambda log: log.append(
                    build_end_txn_marker(False, 7, 0, 0, timestamp=BASE_TS), origin="coordinator"
                ),
                [],
            ),
        ]
        out += _append_steps()
        out.insert(5, flush_step())
        return out

    def check(d, o, base, clock, failed, fault):
        records_check(CFG)(d, o, base, clock, failed, fault)
        log = Log.open(d, CFG, clock=clock, read_only=True)
        try:
            # the abort marker, when it is in the log, is in the transaction index
            markers = [b for b in log.iter_batches() if b.is_control_batch]
            aborted = log.collect_aborted_transactions(0, log.log_end_offset)
            assert [(t.producer_id, t.first_offset) for t in aborted] == [
                (7, 4) for _ in markers
            ]
        finally:
            log.close()

    sweep(scratch, faults, fault, setup, steps, check, match=("*.index", "*.timeindex",
                                                                "*.txnindex"))


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_checkpoint_and_snapshot_faults(scratch, faults, fault):
    """Only the calls on checkpoint files fail: recovery-point, log-start-offset,
    replication-offset and leader-epoch checkpoints, producer snapshots, the clean-shutdown
    marker (and their ``.tmp`` files)."""
    setup = make_setup(CFG, lambda: [append_step("base", 6, 80)])

    def steps():
        return [
            Step("epoch 2", lambda log: log.append(batch([b"e2"]), leader_epoch=2), [b"e2"]),
            append_step("p", 3, 90, pid=3, epoch=0, seq=0),
            roll_step(),
            flush_step(),
            Step("start", lambda log: log.increment_log_start_offset(2), []),
            Step("epoch 5", lambda log: log.append(batch([b"e5"]), leader_epoch=5), [b"e5"]),
            flush_step(),
        ]

    def check(d, out, base, clock, failed, fault):
        got = reopen(d, CFG, clock, faulted=failed)
        start = got[0][0] if got else None
        # the log start offset moved to 2 or not at all
        assert start in (0, 2), start
        values = [v for _o, _k, v in got]
        prefix = base[:start]
        check_records(prefix + values, base, out, fault.sticky)

    sweep(scratch, faults, fault, setup, steps, check,
          match=("*checkpoint*", "*.snapshot*", ".kafka_cleanshutdown*"))


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_retention_faults(scratch, faults, fault):
    """Retention deletes (log start offset, ``retention.bytes``): segments renamed
    ``.deleted`` and removed, snapshots deleted, the log start checkpoint written.  Whatever
    fails, the log is a contiguous suffix of what it was, starting at or before the new log
    start offset."""
    cfg = dict(CFG, **{"retention.bytes": 2000, "segment.bytes": 1200})

    def base_steps():
        return [append_step(f"s{i}", 5, 90) for i in range(6)]

    setup = make_setup(cfg, base_steps)

    def steps():
        return [
            Step("start", lambda log: log.increment_log_start_offset(7), []),
            Step("retention", lambda log: log.delete_retention(), []),
            append_step("after", 2, 50),
        ]

    def check(d, out, base, clock, failed, fault):
        got = reopen(d, cfg, clock, faulted=failed)
        offsets = [o for o, _k, _v in got]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        start = offsets[0]
        if not failed:
            assert start > 7
        values = [v for _o, _k, v in got]
        assert values[: len(base) - start] == base[start:]
        check_records(base[:start] + values, base, out, fault.sticky)

    sweep(scratch, faults, fault, setup, steps, check)


def _compact_cfg():
    return {
        "cleanup.policy": "compact",
        "segment.bytes": 700,
        "index.interval.bytes": 100,
        "segment.index.bytes": 4096,
        "delete.retention.ms": 10_000,
        "min.cleanable.dirty.ratio": 0.0,
    }


def _compact_setup(d):
    clock = FakeClock()
    log = Log.open(d, _compact_cfg(), clock=clock)
    for i in range(24):
        k = b"k%d" % (i % 5)
        log.append(batch([b"v%d" % i], keys=[k], ts=clock.now))
        clock.advance(10)
    log.append(batch([None], keys=[b"k1"], ts=clock.now))  # a tombstone
    log.flush()
    return log, clock


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_compaction_faults(scratch, faults, fault):
    """Compaction: ``.cleaned`` segments written and flushed, renamed ``.swap``, the old
    segments deleted, ``.swap`` renamed to the final names, the cleaner checkpoint written.
    Whatever fails, the reopened log is the whole pre-compaction log or the compacted one (never
    a mixture that loses a key's latest value)."""
    cfg = _compact_cfg()

    def view(d):
        return reopen(d, cfg, FakeClock(BASE_TS + 10_000), faulted=False, contiguous=False)

    # the two acceptable results
    d_before = scratch / "before" / f"{TOPIC}-0"
    log, _ = _compact_setup(d_before)
    log.close()
    before = view(d_before)
    d_after = scratch / "after" / f"{TOPIC}-0"
    log, clock = _compact_setup(d_after)
    with faults.armed(None):
        log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=24 * 64)), force=True)
    calls = list(faults.calls)
    log.close()
    after = view(d_after)
    assert len(after) < len(before)

    def latest(rows):
        out = {}
        for _o, k, v in rows:
            out[k] = v
        return out

    assert latest(before) == latest(after)
    assert calls
    errors = 0
    for k in range(1, len(calls) + 1):
        d = scratch / f"k{k}" / f"{TOPIC}-0"
        log, clock = _compact_setup(d)
        err = None
        with faults.armed(k, fault.err, fault.kind, fault.sticky):
            try:
                log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=24 * 64)), force=True)
            except KafkaStorageError as e:
                err = e
                check_error(e, faults)
                check_offline(log, e)
            try:
                log.close()
            except KafkaStorageError as e:  # a fault that lasts fails the close too
                assert err is None
                err = e
                check_error(e, faults)
        errors += err is not None
        try:
            rows = reopen(d, cfg, FakeClock(BASE_TS + 10_000), faulted=err is not None,
                          contiguous=False)
            # nothing the compaction keeps is lost, nothing is invented, every key keeps its
            # latest value (groups of segments are swapped in one at a time, each whole)
            assert set(after) <= set(rows) <= set(before), (len(rows), len(before), len(after))
            assert latest(rows) == latest(before)
        except AssertionError as e:
            raise AssertionError(f"{fault.name} at {faults.describe(k)}: {e}") from e
        shutil.rmtree(d.parent, ignore_errors=True)
    assert errors


@pytest.mark.parametrize("fault", ONCE_STICKY, ids=_fault_id)
def test_recovery_faults(scratch, faults, fault):
    """Opening a directory that needs recovery (no clean shutdown, a torn tail, indexes to
    rebuild, checkpoints to write) with every call failing in turn: the open raises
    KafkaStorageError and releases the directory, and a later open recovers it fully."""
    cfg = CFG

    def make(d):
        clock = FakeClock()
        log = Log.open(d, cfg, clock=clock)
        for i in range(10):
            log.append(batch(vals(f"r{i}", 3, 70), ts=clock.now))
            if i == 4:
                log.flush()
        log.close_handlers()  # as a crash leaves it (buffered bytes reached the OS)
        seg = sorted(p for p in os.listdir(d) if p.endswith(".log"))[-1]
        with open(os.path.join(d, seg), "ab") as f:
            f.write(batch([b"torn" * 20])[:50])
        return clock

    d0 = scratch / "clean" / f"{TOPIC}-0"
    clock = make(d0)
    with faults.armed(None):
        Log.open(d0, cfg, clock=clock).close_handlers()
    calls = list(faults.calls)
    want = [v for _o, _k, v in reopen(d0, cfg, clock, faulted=False)]
    assert len(want) == 30
    errors = 0
    for k in range(1, len(calls) + 1):
        d = scratch / f"k{k}" / f"{TOPIC}-0"
        clock = make(d)
        with faults.armed(k, fault.err, fault.kind, fault.sticky):
            try:
                Log.open(d, cfg, clock=clock).close_handlers()
            except KafkaStorageError as e:
                errors += 1
                check_error(e, faults)
        try:
            got = [v for _o, _k, v in reopen(d, cfg, clock)]
            assert got == want, (len(got), len(want))
        except AssertionError as e:
            raise AssertionError(f"{fault.name} at {faults.describe(k)}: {e}") from e
        shutil.rmtree(d.parent, ignore_errors=True)
    assert errors


# ------------------------------------------------------------------------------------------------
# the contract, and regressions
# ------------------------------------------------------------------------------------------------
def test_storage_error_contract():
    cause = OSError(errno.ENOSPC, "No space left on device")
    e = KafkaStorageError.from_os_error(cause, "writing a segment", path="/d/t-0/0.log",
                                        position=12)
    assert isinstance(e, OSError) and isinstance(e, KafkaLogError)
    assert (e.errno, e.filename, e.path, e.position) == (errno.ENOSPC, "/d/t-0/0.log",
                                                        "/d/t-0/0.log", 12)
    assert e.__cause__ is cause and e.strerror == os.strerror(errno.ENOSPC)
    assert str(e) == ("I/O error while writing a segment: [Errno 28] No space left on device "
                      "(file /d/t-0/0.log, position 12)")
    e2 = pickle.loads(pickle.dumps(e))
    assert (type(e2), str(e2), e2.errno, e2.operation) == (type(e), str(e), e.errno, e.operation)
    assert KafkaStorageError.from_os_error(e, "again") is e


def test_offline_log_refuses_calls_until_reopened(tmp_path, faults):
    d = tmp_path / f"{TOPIC}-0"
    log = Log.open(d, CFG)
    log.append(batch([b"one"]))
    with faults.armed(1, EIO, ops=("fsync",)):
        with pytest.raises(KafkaStorageError) as ei:
            log.flush()
    err = ei.value
    assert err.errno == EIO and err.path.endswith(".log") and "syncing a segment" in str(err)
    assert log.offline
    for call in (log.flush, log.roll, log.delete_retention, lambda: log.read(0),
                 lambda: list(log.iter_batches()), lambda: log.offset_for_timestamp(0),
                 lambda: log.append(batch([b"two"])), lambda: log.truncate_to(0)):
        with pytest.raises(KafkaStorageError, match="offline"):
            call()
    log.close()  # no error, no marker, the directory is released
    assert not os.path.exists(d / files.CLEAN_SHUTDOWN_FILE)
    log = Log.open(d, CFG)
    assert not log.had_clean_shutdown and not log.offline
    assert [r.value for r in log.iter_records()] == [b"one"]
    log.close()


def test_flusher_thread_io_error_takes_log_offline(tmp_path, faults):
    d = tmp_path / f"{TOPIC}-0"
    log = Log.open(d, dict(CFG, **{"flush.ms": 0}))
    with faults.armed(1, EIO, ops=("fsync",), match="*.log"):
        log.append(batch([b"one"]))
        for _ in range(500):
            if log.offline:
                break
            time.sleep(0.01)
    assert log.offline
    with pytest.raises(KafkaStorageError, match="offline"):
        log.append(batch([b"two"]))
    log.close()
    log = Log.open(d, CFG)
    assert [r.value for r in log.iter_records()] == [b"one"]
    log.close()


def test_directory_fsync_error_is_raised(tmp_path, faults):
    """Regression: an EIO from fsync of the partition directory (making a roll's new files
    durable) was swallowed, so flush() reported success for renames that may be lost."""
    d = tmp_path / f"{TOPIC}-0"
    log = Log.open(d, CFG)
    log.append(batch([b"x" * 100]))
    log.roll()
    log.append(batch([b"y" * 100]))
    log._dir_dirty = True
    with faults.armed(1, EIO, ops=("fsync",), match=f"{TOPIC}-0"):
        with pytest.raises(KafkaStorageError) as ei:
            log.flush()
    assert ei.value.errno == EIO
    log.close()
    # unsupported directory syncs stay a no-op
    with faults.armed(1, errno.EINVAL, ops=("fsync",)):
        files.fsync_dir(str(d))


def test_checkpoint_read_error_keeps_other_partitions(tmp_path, monkeypatch):
    """Regression: an I/O error reading a root checkpoint made update_offset_checkpoint start
    from an empty file, silently dropping every other partition's entry."""
    p = tmp_path / files.RECOVERY_POINT_CHECKPOINT_FILE
    checkpoints.write_offset_checkpoint(p, {("a", 0): 10, ("b", 0): 20})

    def broken(path):
        raise OSError(EIO, "Input/output error", str(path))

    monkeypatch.setattr(checkpoints, "read_offset_checkpoint", broken)
    with pytest.raises(OSError):
        checkpoints.update_offset_checkpoint(p, {("a", 0): 11})
    monkeypatch.undo()
    assert checkpoints.read_offset_checkpoint(p) == {("a", 0): 10, ("b", 0): 20}
    # a malformed file is still replaced
    p.write_text("garbage\n")
    checkpoints.update_offset_checkpoint(p, {("a", 0): 12})
    assert checkpoints.read_offset_checkpoint(p) == {("a", 0): 12}


def test_txn_index_short_write_is_continued(tmp_path, faults):
    """Regression: a short os.write of a transaction-index entry was not continued, leaving a
    torn entry after which every later entry was misaligned."""
    from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex

    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(0, path)
    with faults.armed(1, ENOSPC, SHORT, ops=("write",)):
        idx.append(AbortedTxn(1, 0, 5, 6))
    idx.append(AbortedTxn(2, 7, 9, 10))
    assert os.path.getsize(path) == 68
    idx.sanity_check()
    assert [t.producer_id for t in TransactionIndex(0, path)] == [1, 2]
    # a failed write leaves no torn entry behind
    with faults.armed(1, EIO, PARTIAL, ops=("write",)):
        with pytest.raises(KafkaStorageError) as ei:
            idx.append(AbortedTxn(3, 11, 12, 13))
    assert ei.value.path == path and ei.value.position == 68
    assert os.path.getsize(path) == 68


def test_failed_follower_append_leaves_none_of_its_batches(tmp_path, faults):
    """Regression: a multi-batch append_as_follower whose write failed part-way (or whose
    flush failed) kept the batches that had reached the file, so the failed call was half
    present after recovery."""
    d = tmp_path / f"{TOPIC}-0"
    cfg = {"segment.bytes": 4 * 1024 * 1024, "max.message.bytes": 4 * 1024 * 1024}
    log = Log.open(d, cfg)
    log.append(batch([b"a"]))
    data = b"".join(batch([b"%d" % i * 200_000], base_offset=1 + i) for i in range(4))
    with faults.armed(2, ENOSPC, PARTIAL, sticky=True, ops=("pwrite",)):
        with pytest.raises(KafkaStorageError):
            log.append_as_follower(data)
        log.close()
    log = Log.open(d, cfg)
    assert [r.value for r in log.iter_records()] == [b"a"]
    log.close()


def test_index_resize_failure_keeps_index_readable(tmp_path, faults):
    """Regression: a failed resize (open/ftruncate/mmap of an index) left the index unmapped
    with its entry count intact, so the next lookup failed with a TypeError."""
    from kafkalog.storage.index import OffsetIndex

    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 4096)
    for i in range(10):
        idx.append(i * 2, i * 100)
    with faults.armed(1, ENOSPC, ops=("ftruncate",)):
        with pytest.raises(KafkaStorageError) as ei:
            idx.trim_to_valid_size()
    assert ei.value.path == path
    assert idx.lookup(7) == (6, 300)
    idx.close()
    assert os.path.getsize(path) == 80
    assert OffsetIndex(path, 0, 4096).entries == 10


def test_injector_counts_every_kind_of_call(tmp_path, faults):
    """The sweeps reach every kind of call an append/roll/flush/close makes."""
    d = tmp_path / f"{TOPIC}-0"
    log = Log.open(d, CFG)
    steps = _append_steps()
    with faults.armed(None):
        run_steps(log, steps, 0, faults)
    ops = {op for op, _p in faults.calls}
    assert {"open", "pwrite", "write", "fsync", "ftruncate", "replace", "unlink", "mmap",
            "mmap.flush"} <= ops, ops
    names = {os.path.basename(p) for _op, p in faults.calls if p}
    assert any(n.endswith(".index") for n in names) and any(n.endswith(".snapshot.tmp")
                                                            for n in names)
    assert _faults.PARTIAL and _faults.SHORT


def _tree_state(root: Path) -> dict:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_flusher_writes_nothing_once_the_log_is_offline(tmp_path, faults):
    """Regression (review): the background flusher kept fsyncing segments and writing the root
    recovery-point checkpoint after another call had taken the log offline, from an in-memory
    state known to be ahead of the files."""
    d = tmp_path / f"{TOPIC}-0"
    log = Log.open(d, dict(CFG, **{"flush.ms": 200}), checkpoint_interval_ms=0)
    log.append(batch([b"one"]))
    log.flush()
    # a follower append in a new leader epoch: its batches reach the file, then the
    # leader-epoch checkpoint cannot be written, so the call fails and is undone
    data = batch([b"f1", b"f2"], base_offset=1, leader_epoch=7)
    with faults.armed(1, ENOSPC, ops=("write",), match="*leader-epoch-checkpoint*"):
        with pytest.raises(KafkaStorageError):
            log.append_as_follower(data)
    assert log.offline
    before = _tree_state(tmp_path)
    # whatever was pending when the log went offline: the flusher is woken with a flush due
    with log._cond:
        log._unflushed_since = time.monotonic() - 10
        log._cond.notify_all()
    time.sleep(0.7)  # three flush intervals
    assert _tree_state(tmp_path) == before
    log.close()
    log = Log.open(d, CFG)
    assert [r.value for r in log.iter_records()] == [b"one"]
    log.close()


def test_roll_replaces_a_dangling_link_at_the_new_segment_name(tmp_path):
    """Regression (review): roll checked for stale files at the new segment's names with
    os.path.exists, which is False for a dangling link, so the link stayed and the safe open
    refused it on every later append."""
    if not hasattr(os, "symlink"):
        pytest.skip("no symbolic links here")
    d = tmp_path / f"{TOPIC}-0"
    log = Log.open(d, CFG)
    log.append(batch([b"a"]))
    nxt = log.log_end_offset
    try:
        os.symlink(tmp_path / "nowhere", d / f"{nxt:020d}.log")
    except OSError:
        pytest.skip("cannot create symbolic links here")
    log.roll()
    log.append(batch([b"b"]))
    assert not os.path.islink(d / f"{nxt:020d}.log")
    assert not (tmp_path / "nowhere").exists()
    assert [r.value for r in log.iter_records()] == [b"a", b"b"]
    log.close()
