"""Transactions and compaction against a model (hypothesis state machine): random keyed
appends and tombstones, transactions of two producers with commits and aborts, rolls, clock
moves, reopen, and compaction at random points.  Checked: the read_committed view (last
stable offset, aborted batches dropped through the transaction index) shows for every key the
latest committed value below the LSO (or, for a tombstone, nothing or the tombstone), never an
aborted record; offsets increase; every record is the one appended at its offset; producer
state survives reopen through the ``.snapshot`` files."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule  # noqa: E402

from kafkalog.control import build_end_txn_marker  # noqa: E402
from kafkalog.records import MemoryRecordsBuilder  # noqa: E402
from kafkalog.storage.cleaner import Cleaner, CleanerConfig  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

from .conftest import BASE_TS, FakeClock  # noqa: E402

RETENTION = 5_000
KEYS = [b"k%d" % i for i in range(6)]
PIDS = (7, 8)


class CompactionVersusModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalog-txn-"))
        self.dir = self.tmp / "compacted-0"
        self.clock = FakeClock(BASE_TS)
        self.config = {
            "cleanup.policy": "compact",
            "segment.bytes": 500,
            "index.interval.bytes": 80,
            "delete.retention.ms": RETENTION,
            "min.cleanable.dirty.ratio": 0.0,
        }
        self.cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=24 * 8))  # forces passes
        self.log = Log.open(self.dir, self.config, clock=self.clock)
        self.records = {}  # offset -> (key, value, pid or None)
        self.status = {}  # pid -> "open" while a transaction is ongoing
        self.txn_first = {}  # pid -> first offset of the ongoing transaction
        self.txn_offsets = {p: [] for p in PIDS}
        self.aborted_offsets = set()
        self.seq = {p: 0 for p in PIDS}
        self.n = 0

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _append(self, data, origin="client"):
        return self.log.append(data, origin=origin)

    def _value(self):
        self.n += 1
        return b"v%d" % self.n

    # -- rules -----------------------------------------------------------------------------------
    @rule(key=st.sampled_from(KEYS), tomb=st.booleans(), n=st.integers(1, 3))
    def append(self, key, tomb, n):
        b = MemoryRecordsBuilder()
        recs = []
        for i in range(n):
            k = KEYS[(KEYS.index(key) + i) % len(KEYS)]
            v = None if tomb and i == 0 else self._value()
            b.append(self.clock.now, k, v)
            recs.append((k, v))
        info = self._append(b.build())
        for i, (k, v) in enumerate(recs):
            self.records[info.first_offset + i] = (k, v, None)

    @rule(pid=st.sampled_from(PIDS), key=st.sampled_from(KEYS), tomb=st.booleans())
    def txn_append(self, pid, key, tomb):
        b = MemoryRecordsBuilder(
            producer_id=pid, producer_epoch=0, base_sequence=self.seq[pid], is_transactional=True
        )
        v = None if tomb else self._value()
        b.append(self.clock.now, key, v)
        info = self._append(b.build())
        self.seq[pid] += 1
        if self.status.get(pid) != "open":
            self.status[pid] = "open"
            self.txn_first[pid] = info.first_offset
        self.records[info.first_offset] = (key, v, pid)
        self.txn_offsets[pid].append(info.first_offset)

    @precondition(lambda self: any(s == "open" for s in self.status.values()))
    @rule(data=st.data(), commit=st.booleans())
    def end_txn(self, data, commit):
        pid = data.draw(st.sampled_from(sorted(p for p, s in self.status.items() if s == "open")))
        self._append(build_end_txn_marker(commit, pid, 0, 0, timestamp=self.clock.now),
                     "coordinator")
        if not commit:
            self.aborted_offsets.update(self.txn_offsets[pid])
        self.txn_offsets[pid] = []
        self.status[pid] = "done"
        del self.txn_first[pid]

    @rule()
    def roll(self):
        self.log.roll()

    @rule(ms=st.integers(0, 2 * RETENTION))
    def tick(self, ms):
        self.clock.advance(ms)

    @rule(force=st.booleans())
    def compact(self, force):
        self.log.compact(self.cleaner, force=force)
        self.check_view()

    @rule()
    def reopen(self):
        before = {
            p: (e.producer_epoch, e.last_sequence, e.last_offset, e.current_txn_first_offset)
            for p, e in self.log.producer_state.producers.items()
        }
        lso = self.log.last_stable_offset
        self.log.close()
        self.log = Log.open(self.dir, self.config, clock=self.clock)
        after = {
            p: (e.producer_epoch, e.last_sequence, e.last_offset, e.current_txn_first_offset)
            for p, e in self.log.producer_state.producers.items()
        }
        assert after == before
        assert self.log.last_stable_offset == lso

    # -- checks ------------------------------------------------------------------------------------
    def model_lso(self):
        return min(self.txn_first.values()) if self.txn_first else self.log.log_end_offset

    @invariant()
    def lso_matches(self):
        assert self.log.last_stable_offset == self.model_lso()

    def check_view(self):
        lso = self.model_lso()
        seen = {}
        last = -1
        for r in self.log.iter_records(isolation="read_committed"):
            assert r.offset > last
            last = r.offset
            assert r.offset < lso
            k, v, _pid = self.records[r.offset]
            assert (r.key, r.value) == (k, v)
            assert r.offset not in self.aborted_offsets
            seen[r.key] = r.value
        latest = {}
        for off in sorted(self.records):
            if off >= lso or off in self.aborted_offsets:
                continue
            k, v, _pid = self.records[off]
            latest[k] = v
        for k in KEYS:
            if k not in latest:
                assert k not in seen
            elif latest[k] is None:
                assert seen.get(k) is None
            else:
                assert seen.get(k) == latest[k]
        # read_uncommitted: every record is the one written at its offset
        last = -1
        for r in self.log.iter_records():
            assert r.offset > last
            last = r.offset
            k, v, _pid = self.records[r.offset]
            assert (r.key, r.value) == (k, v)

    def check_final(self):
        self.check_view()


CompactionVersusModel.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
TestCompactionVersusModel = CompactionVersusModel.TestCase


@pytest.mark.slow
def test_compaction_model_long():
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        CompactionVersusModel,
        settings=settings(
            max_examples=300, stateful_step_count=60, deadline=None,
            suppress_health_check=list(HealthCheck)
        ),
    )


def test_read_committed_read_is_bounded_by_lso(tmp_path):
    clock = FakeClock(BASE_TS)
    with Log.open(tmp_path / "t-0", {"cleanup.policy": "compact"}, clock=clock) as log:
        b = MemoryRecordsBuilder()
        b.append(clock.now, b"a", b"1")
        log.append(b.build())
        t = MemoryRecordsBuilder(producer_id=1, producer_epoch=0, base_sequence=0,
                                 is_transactional=True)
        t.append(clock.now, b"a", b"2")
        log.append(t.build())
        assert log.last_stable_offset == 1
        assert [bb.base_offset for bb in log.read(0, isolation="read_committed")] == [0]
        assert [bb.base_offset for bb in log.read(0)] == [0, 1]
        with pytest.raises(ValueError):
            log.read(0, isolation="bogus")
        log.append(build_end_txn_marker(False, 1, 0, 0, timestamp=clock.now), origin="coordinator")
        assert log.last_stable_offset == 3
        assert [(r.offset, r.value)
                for r in log.iter_records(isolation="read_committed")] == [(0, b"1")]
        aborted = log.collect_aborted_transactions(0, 3)
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(1, 1, 2)]
        # snapshot format round trip: the producer survives a reopen
    with Log.open(tmp_path / "t-0", {"cleanup.policy": "compact"}, clock=clock) as log:
        e = log.producer_state.producers[1]
        assert (e.producer_epoch, e.last_sequence, e.last_offset,
                e.current_txn_first_offset) == (0, 0, 1, -1)
        assert log.last_stable_offset == 3
