"""What a partition log validates for producers, against a model (hypothesis state machine).

Several idempotent and transactional producers append through ``Log.append`` with retries of
earlier batches, sequence gaps, stale and bumped epochs (fencing), transaction markers of
transactions V1 and V2 (KIP-890: the coordinator bumps the epoch at every commit or abort),
zombie coordinators, producer-id expiration, rolls, flushes, clean reopens and crashes (a copy of
the files as a SIGKILL leaves them, with or without the bytes written after the last flush).

The model is Kafka's rule book written out plainly (``ProducerAppendInfo`` and
``UnifiedLog.analyzeAndValidateProducerState``): every append's outcome (the offsets assigned,
the original offsets of a retried duplicate, or the error class) and, after every step, each
producer's state (epoch, last sequence, last offset, timestamp, coordinator epoch, ongoing
transaction) and the log end offset must agree with it.  A snapshot keeps only a producer's last
batch (Kafka's format), so after a reopen the model knows that only that one of the recent
batches is surely remembered; a retry of another may be recognised or refused as out of order.

``KAFKALOG_PRODUCER_STATE_EXAMPLES`` raises the number of generated runs (default 25).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from kafkalog.control import build_end_txn_marker  # noqa: E402
from kafkalog.errors import (  # noqa: E402
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkalog.records import MemoryRecordsBuilder  # noqa: E402
from kafkalog.storage import files  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

from .conftest import BASE_TS, FakeClock  # noqa: E402

EXAMPLES = int(os.environ.get("KAFKALOG_PRODUCER_STATE_EXAMPLES", "25"))
INT32_MAX = 2**31 - 1
EXPIRATION_MS = 10_000
IDEMPOTENT = (101, 102)
TRANSACTIONAL = (201, 202)
PIDS = IDEMPOTENT + TRANSACTIONAL
# producer 102 starts near the top of the sequence space, to wrap past 2**31 - 1
FIRST_SEQ = {101: 0, 102: INT32_MAX - 3, 201: 0, 202: 0}


def _seq_add(seq, n):
    return (seq + n) % (INT32_MAX + 1)


class ModelProducer:
    """Kafka's view of one producer: epoch, last batch and the recent batches (up to five),
    each marked whether it is surely remembered by the log."""

    def __init__(self):
        self.epoch = -1
        self.last_seq = -1
        self.last_offset = -1
        self.timestamp = -1
        self.coordinator_epoch = -1
        self.txn_first = -1
        self.recent = []  # [first_seq, last_seq, first_offset, last_offset, surely_remembered]


class Model:
    def __init__(self):
        self.producers = {}
        self.end = 0
        # expired producers: a crash recovery that replays the log from before the expiry
        # brings their last batch and coordinator epoch back under a new incarnation's fields
        # that the new incarnation did not set yet (as in Kafka)
        self.expired = {}

    # Kafka's rules, as the model states them ------------------------------------------------
    def data_batch(self, pid, epoch, seq, n, txn, now):
        """('dup', first, last) | ('maybe-dup', entry) | ('ok', first, last) | error class."""
        p = self.producers.get(pid)
        last_seq = _seq_add(seq, n - 1)
        if p is not None and epoch == p.epoch:
            for r in p.recent:
                if r[0] == seq and r[1] == last_seq:
                    return ("dup", r[2], r[3]) if r[4] else ("maybe-dup", r)
        if p is not None:
            if epoch < p.epoch:
                return InvalidProducerEpochError
            if epoch != p.epoch:
                if seq != 0 and p.epoch >= 0:  # a new epoch starts at 0
                    return OutOfOrderSequenceError
            elif p.epoch >= 0 and not (
                seq == p.last_seq + 1 or (seq == 0 and p.last_seq == INT32_MAX)
            ):
                return OutOfOrderSequenceError
            if p.txn_first >= 0 and not txn:
                return InvalidTxnStateError
        return ("ok", self.end, self.end + n - 1)

    def apply_data(self, pid, epoch, seq, n, txn, ts):
        p = self.producers.setdefault(pid, ModelProducer())
        if epoch != p.epoch:
            p.recent = []
        p.epoch = epoch
        first, last = self.end, self.end + n - 1
        p.last_seq = _seq_add(seq, n - 1)
        p.last_offset = last
        p.timestamp = ts
        p.recent = (p.recent + [[seq, p.last_seq, first, last, True]])[-5:]
        if txn and p.txn_first < 0:
            p.txn_first = first
        self.end = last + 1

    def marker(self, pid, epoch, coordinator_epoch, version):
        p = self.producers.get(pid)
        if p is None:
            return None
        stale = epoch <= p.epoch if version >= 2 else epoch < p.epoch
        if stale and not (version >= 2 and epoch == p.epoch and p.txn_first < 0):
            return InvalidProducerEpochError
        if p.coordinator_epoch > coordinator_epoch:
            return TransactionCoordinatorFencedError
        return None

    def apply_marker(self, pid, epoch, coordinator_epoch, ts):
        p = self.producers.setdefault(pid, ModelProducer())
        if epoch != p.epoch:
            p.recent = []
            p.last_seq = -1
            p.last_offset = -1
        p.epoch = epoch
        p.coordinator_epoch = coordinator_epoch
        p.timestamp = ts
        p.txn_first = -1
        self.end += 1

    def expire(self, now):
        for pid in [
            pid
            for pid, p in self.producers.items()
            if p.txn_first < 0 and now - p.timestamp >= EXPIRATION_MS
        ]:
            self.expired.setdefault(pid, []).append(self.producers.pop(pid))

    def forget_all_but_last(self, crash):
        """After a reopen: a clean one loads the snapshot at the end (the last batch only); after
        a crash the batches replayed after an older snapshot may be remembered too."""
        for p in self.producers.values():
            if crash:
                for r in p.recent[:-1]:
                    r[4] = False
            else:
                p.recent = p.recent[-1:]


class ProducerStateVersusModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalog-pstate-"))
        self.generation = 0
        self.dir = self.tmp / "g0" / "topic-0"
        self.clock = FakeClock(BASE_TS)
        self.config = {"segment.bytes": 700, "index.interval.bytes": 100}
        self.log = self._open(self.dir)
        self.model = Model()
        # the clients: their epoch and next sequence, and the batches they sent successfully
        self.epoch = {pid: 0 for pid in PIDS}
        self.next_seq = dict(FIRST_SEQ)
        self.sent = {pid: [] for pid in PIDS}  # (epoch, seq, n, txn)
        self.coordinator_epoch = {pid: 0 for pid in PIDS}
        self.flushed = None  # (segment bases, active size, model copy) at the last flush

    def _open(self, d):
        log = Log.open(d, self.config, clock=self.clock)
        log.producer_state.producer_id_expiration_ms = EXPIRATION_MS
        return log

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- producing ------------------------------------------------------------------------------
    def _send(self, pid, epoch, seq, n, txn):
        b = MemoryRecordsBuilder(
            producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn
        )
        for i in range(n):
            b.append(self.clock.now, b"k", b"%d-%d-%d" % (pid, seq, i))
        expected = self.model.data_batch(pid, epoch, seq, n, txn, self.clock.now)
        try:
            info = self.log.append(b.build())
        except (
            OutOfOrderSequenceError,
            InvalidProducerEpochError,
            InvalidTxnStateError,
        ) as e:
            if isinstance(expected, tuple) and expected[0] == "maybe-dup":
                assert isinstance(e, OutOfOrderSequenceError), e
                p = self.model.producers[pid]
                p.recent.remove(expected[1])  # the log does not remember it
                return
            assert expected is type(e), (expected, e)
            return
        assert isinstance(expected, tuple), (expected, info)
        got = (info.first_offset, info.last_offset)
        if expected[0] == "maybe-dup":
            entry = expected[1]
            assert got == (entry[2], entry[3])
            entry[4] = True
            return
        assert got == expected[1:], (expected, got)
        if expected[0] == "ok":
            self.model.apply_data(pid, epoch, seq, n, txn, self.clock.now)
            self.sent[pid].append((epoch, seq, n, txn))
            if epoch == self.epoch[pid]:
                self.next_seq[pid] = _seq_add(seq, n)

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 3))
    def send_next(self, pid, n):
        """The client's next batch (in order, unless its view went stale)."""
        txn = pid in TRANSACTIONAL
        self._send(pid, self.epoch[pid], self.next_seq[pid], n, txn)

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 3))
    def send_in_model_order(self, pid, n):
        """A batch that follows what the log has (resynchronised client)."""
        p = self.model.producers.get(pid)
        txn = pid in TRANSACTIONAL
        if p is None:
            self._send(pid, self.epoch[pid], self.next_seq[pid], n, txn)
        else:
            seq = 0 if p.last_seq < 0 else _seq_add(p.last_seq, 1)
            self.epoch[pid] = max(self.epoch[pid], p.epoch)
            self._send(pid, p.epoch, seq, n, txn)

    @rule(pid=st.sampled_from(PIDS), back=st.integers(1, 7))
    def retry(self, pid, back):
        """A retried batch (recent or older than the five remembered)."""
        if not self.sent[pid]:
            return
        epoch, seq, n, txn = self.sent[pid][-min(back, len(self.sent[pid]))]
        self._send(pid, epoch, seq, n, txn)

    @rule(pid=st.sampled_from(PIDS), skip=st.integers(1, 3), n=st.integers(1, 2))
    def send_with_gap(self, pid, skip, n):
        txn = pid in TRANSACTIONAL
        self._send(pid, self.epoch[pid], _seq_add(self.next_seq[pid], skip), n, txn)

    @rule(pid=st.sampled_from(PIDS), seq=st.sampled_from([0, 1, 5]))
    def send_with_new_epoch(self, pid, seq):
        """An epoch bump (InitProducerId); starting anywhere but 0 is out of order."""
        self.epoch[pid] += 1
        self.next_seq[pid] = seq
        self._send(pid, self.epoch[pid], seq, 1, pid in TRANSACTIONAL)

    @rule(pid=st.sampled_from(PIDS))
    def zombie_send(self, pid):
        """A fenced producer: an epoch older than the newest one."""
        if self.epoch[pid] == 0:
            return
        self._send(pid, self.epoch[pid] - 1, 0, 1, pid in TRANSACTIONAL)

    @rule(pid=st.sampled_from(TRANSACTIONAL))
    def non_transactional_send(self, pid):
        self._send(pid, self.epoch[pid], self.next_seq[pid], 1, False)

    # -- the coordinator ------------------------------------------------------------------------
    @rule(
        pid=st.sampled_from(TRANSACTIONAL),
        commit=st.booleans(),
        version=st.sampled_from([1, 2]),
        epoch_delta=st.sampled_from([0, 0, 1, -1]),
        coordinator_delta=st.sampled_from([0, 0, 0, 1, -1]),
    )
    def marker(self, pid, commit, version, epoch_delta, coordinator_delta):
        if version >= 2 and epoch_delta == 0:
            epoch_delta = 1  # a V2 coordinator bumps the epoch (the 0 case is a retry below)
        epoch = self.epoch[pid] + epoch_delta
        if epoch < 0:
            return
        coordinator_epoch = self.coordinator_epoch[pid] + coordinator_delta
        self._marker(pid, commit, version, epoch, coordinator_epoch)

    @rule(pid=st.sampled_from(TRANSACTIONAL), commit=st.booleans())
    def retried_v2_marker(self, pid, commit):
        """A V2 marker of the producer's current epoch: a retry, accepted only once the
        transaction has ended."""
        self._marker(pid, commit, 2, self.epoch[pid], self.coordinator_epoch[pid])

    def _marker(self, pid, commit, version, epoch, coordinator_epoch):
        marker = build_end_txn_marker(
            commit, pid, epoch, coordinator_epoch, timestamp=self.clock.now
        )
        expected = self.model.marker(pid, epoch, coordinator_epoch, version)
        try:
            info = self.log.append(marker, origin="coordinator", transaction_version=version)
        except (InvalidProducerEpochError, TransactionCoordinatorFencedError) as e:
            assert expected is type(e), (expected, e)
            return
        assert expected is None, expected
        assert info.first_offset == self.model.end
        self.model.apply_marker(pid, epoch, coordinator_epoch, self.clock.now)
        self.coordinator_epoch[pid] = max(self.coordinator_epoch[pid], coordinator_epoch)
        if epoch > self.epoch[pid]:  # KIP-890: the producer goes on with the bumped epoch
            self.epoch[pid] = epoch
            self.next_seq[pid] = 0

    # -- time, files, restarts ------------------------------------------------------------------
    @rule(ms=st.sampled_from([100, 4_000, EXPIRATION_MS]))
    def time_passes(self, ms):
        """Time passes and the periodic expiration check runs."""
        self.clock.advance(ms)
        gone = self.log.remove_expired_producers()
        self.model.expire(self.clock.now)
        assert set(gone) <= set(PIDS)

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        self.log.flush()
        self.flushed = (
            [s.base_offset for s in self.log.segments],
            self.log.active_segment.size,
            copy.deepcopy(self.model),
        )

    def _after_reopen(self, crash):
        self.model.forget_all_but_last(crash)
        if crash:
            for pid, p in self.model.producers.items():
                e = self.log.producer_state.producers.get(pid)
                if e is None or e.producer_epoch != p.epoch:
                    continue
                got = (e.last_sequence, e.last_offset, e.coordinator_epoch)
                want = (p.last_seq, p.last_offset, p.coordinator_epoch)
                for old in self.model.expired.get(pid, ()):
                    before = (old.last_seq, old.last_offset, old.coordinator_epoch)
                    if got != want and all(
                        g == w or (w == -1 and g == b) for g, w, b in zip(got, want, before)
                    ):
                        if got[:2] != want[:2]:
                            p.recent = ([r[:4] + [False] for r in old.recent] + p.recent)[-5:]
                        p.last_seq, p.last_offset, p.coordinator_epoch = got
                        break
        # the periodic expiration check (a producer revived by replaying the tail goes again)
        self.log.remove_expired_producers()
        self.model.expire(self.clock.now)

    @rule()
    def clean_reopen(self):
        self.log.close()
        self.log = self._open(self.dir)
        self.flushed = None
        self._after_reopen(crash=False)

    def _crash_copy(self):
        for seg in self.log.segments:
            seg._drain()
        self.generation += 1
        dst = self.tmp / f"g{self.generation}" / "topic-0"
        shutil.copytree(self.log.dir, dst)
        for cp in (files.RECOVERY_POINT_CHECKPOINT_FILE, files.LOG_START_OFFSET_CHECKPOINT_FILE):
            src = os.path.join(os.path.dirname(self.log.dir), cp)
            if os.path.exists(src):
                shutil.copy(src, dst.parent / cp)
        return dst

    @rule()
    def crash_keeping_page_cache(self):
        """SIGKILL: every byte written is in the page cache, nothing closed cleanly."""
        dst = self._crash_copy()
        self.log.close()
        self.dir = dst
        self.log = self._open(dst)
        self.flushed = None
        self._after_reopen(crash=True)

    @precondition(
        lambda self: self.flushed is not None
        and self.flushed[0] == [s.base_offset for s in self.log.segments]
    )
    @rule()
    def crash_losing_unflushed_tail(self):
        """Power loss: the bytes appended after the last flush never reached the disk."""
        bases, size, model = self.flushed
        dst = self._crash_copy()
        self.log.close()
        path = dst / ("%020d.log" % bases[-1])
        with open(path, "r+b") as f:
            f.truncate(size)
        self.dir = dst
        self.log = self._open(dst)
        self.model = model
        self.flushed = None
        self._after_reopen(crash=True)

    # -- the comparison -------------------------------------------------------------------------
    @invariant()
    def state_matches_model(self):
        assert self.log.log_end_offset == self.model.end
        got = {
            pid: (
                e.producer_epoch,
                e.last_sequence,
                e.last_offset,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
            for pid, e in self.log.producer_state.producers.items()
        }
        want = {
            pid: (p.epoch, p.last_seq, p.last_offset, p.timestamp, p.coordinator_epoch, p.txn_first)
            for pid, p in self.model.producers.items()
        }
        assert got == want


TestProducerStateVersusModel = ProducerStateVersusModel.TestCase
TestProducerStateVersusModel.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path):
    """A retried batch is not appended again: same offsets back, the log does not grow."""
    clock = FakeClock(BASE_TS)
    with Log.open(tmp_path / "topic-0", clock=clock) as log:

        def batch(seq, n):
            b = MemoryRecordsBuilder(producer_id=5, producer_epoch=0, base_sequence=seq)
            for i in range(n):
                b.append(clock.now, None, b"v%d" % (seq + i))
            return b.build()

        first = log.append(batch(0, 2))
        second = log.append(batch(2, 1))
        size = log.size
        again = log.append(batch(0, 2))
        assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
        assert (log.log_end_offset, log.size) == (second.last_offset + 1, size)
        with pytest.raises(OutOfOrderSequenceError) as err:
            log.append(batch(5, 1))
        assert err.value.offset == 3 and "producer 5" in str(err.value)
        assert log.log_end_offset == 3


def test_snapshot_after_expiry_no_longer_holds_the_producer(tmp_path):
    clock = FakeClock(BASE_TS)
    d = tmp_path / "topic-0"
    with Log.open(d, clock=clock) as log:
        log.producer_state.producer_id_expiration_ms = 1_000
        for pid in (1, 2):
            b = MemoryRecordsBuilder(producer_id=pid, producer_epoch=0, base_sequence=0)
            b.append(clock.now, None, b"x")
            log.append(b.build())
        clock.advance(600)
        b = MemoryRecordsBuilder(producer_id=2, producer_epoch=0, base_sequence=1)
        b.append(clock.now, None, b"y")
        log.append(b.build())
        clock.advance(500)
        assert log.remove_expired_producers() == [1]
        log.roll()  # writes a snapshot at the new segment
        snapshots = [p for p in sorted(os.listdir(d)) if p.endswith(".snapshot")]
        from kafkalog.storage.producer_state import read_snapshot

        assert [e.producer_id for e in read_snapshot(str(d / snapshots[-1]))] == [2]
    with Log.open(d, clock=clock) as log:
        assert sorted(log.producer_state.producers) == [2]


def test_cleaner_drops_the_last_batch_of_an_expired_producer(tmp_path):
    """The cleaner keeps an emptied last batch only for producers the log still tracks."""
    clock = FakeClock(BASE_TS)
    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0}

    def batch(pid, value):
        b = MemoryRecordsBuilder(producer_id=pid, producer_epoch=0, base_sequence=0)
        b.append(clock.now, b"a", value)
        return b.build()

    shapes = {}
    for expire in (False, True):
        with Log.open(tmp_path / f"e{int(expire)}" / "topic-0", config, clock=clock) as log:
            log.producer_state.producer_id_expiration_ms = 1_000
            log.append(batch(9, b"1"))
            clock.advance(1_000)
            log.append(batch(10, b"2"))
            if expire:
                assert log.remove_expired_producers() == [9]
            log.roll()
            log.compact()
            shapes[expire] = [
                (b.base_offset, b.producer_id, len(list(b))) for b in log.iter_batches()
            ]
    assert shapes[False] == [(0, 9, 0), (1, 10, 1)]
    assert shapes[True] == [(1, 10, 1)]
