"""Log compaction (kafkalog.storage.cleaner): the offset map, Kafka's cleaner rules, multi-pass
cleaning with a small map, crash safety of the .cleaned -> .swap -> final protocol, a property
test against a model, and real __consumer_offsets directories."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kafkalog.control import build_end_txn_marker
from kafkalog.errors import InvalidRecordError
from kafkalog.records import MemoryRecordsBuilder
from kafkalog.storage import _log_common as _log_mod
from kafkalog.storage.cleaner import Cleaner, CleanerConfig, SkimpyOffsetMap
from kafkalog.storage.log import Log

from .conftest import BASE_TS, FakeClock, storage_conformance_dir

RETENTION = 10_000


def _cfg(**kw):
    c = {
        "cleanup.policy": "compact",
        "segment.bytes": 1200,
        "index.interval.bytes": 100,
        "delete.retention.ms": RETENTION,
        "min.cleanable.dirty.ratio": 0.0,
    }
    c.update({k.replace("_", "."): v for k, v in kw.items()})
    return c


def _batch(records, ts, pid=-1, epoch=-1, seq=-1, txn=False, codec="none"):
    b = MemoryRecordsBuilder(
        compression_type=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )
    for k, v in records:
        b.append(ts, k, v)
    return b.build()


def _view(log, isolation="read_uncommitted"):
    return [(r.offset, r.key, r.value) for r in log.iter_records(isolation=isolation)]


def _latest(view):
    out = {}
    for _o, k, v in view:
        out[k] = v
    return out


@pytest.fixture
def tmpdir_log(tmp_path):
    return tmp_path / "topic-0"


# -- offset map ----------------------------------------------------------------------------------
def test_offset_map_put_get_and_bounds():
    m = SkimpyOffsetMap(24 * 100)
    assert m.slots == 100
    for i in range(50):
        m.put(b"k%d" % i, i)
    for i in range(50):
        m.put(b"k%d" % i, 100 + i)
    assert m.size == 50
    assert all(m.get(b"k%d" % i) == 100 + i for i in range(50))
    assert m.get(b"missing") == -1
    assert m.latest_offset == 149
    assert len(m._buf) == 2400  # the memory bound is the buffer
    m.clear()
    assert m.size == 0 and m.get(b"k1") == -1


def test_cleaner_config_from_properties():
    c = CleanerConfig.from_properties({"log.cleaner.dedupe.buffer.size": 4800})
    assert c.dedupe_buffer_size == 4800
    assert Cleaner(c).offset_map.slots == 200


# -- basic rules ---------------------------------------------------------------------------------
def test_keyless_records_rejected_in_compacted_log(tmpdir_log):
    with Log.open(tmpdir_log, _cfg()) as log:
        with pytest.raises(InvalidRecordError, match="without key"):
            log.append(_batch([(None, b"v")], BASE_TS))


def test_compaction_keeps_latest_per_key_and_offsets(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(), clock=clock) as log:
        for i in range(200):
            log.append(_batch([(b"k%d" % (i % 7), b"v%d" % i)], BASE_TS + i))
        before = _view(log)
        active_base = log.active_segment.base_offset
        active_bytes = open(log.active_segment.log_path, "rb").read()
        stats = log.compact()
        assert stats.passes >= 1 and stats.bytes_written < stats.bytes_read
        after = _view(log)
        assert _latest(after) == _latest(before)
        offs = [o for o, _k, _v in after]
        assert offs == sorted(set(offs))
        # every surviving record is the one at its original offset
        orig = {o: (k, v) for o, k, v in before}
        assert all(orig[o] == (k, v) for o, k, v in after)
        # the active segment is never touched
        assert log.active_segment.base_offset == active_base
        assert open(log.active_segment.log_path, "rb").read() == active_bytes
        # cleaned part: one record per key
        cleaned = [k for o, k, _v in after if o < active_base]
        assert len(cleaned) == len(set(cleaned))
        log.verify_indexes()
        assert log.log_end_offset == 200
    with Log.open(tmpdir_log, _cfg()) as log:
        assert _view(log) == after
        assert log.cleaner_checkpoint() == active_base


def test_dirty_ratio_and_compaction_lag(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(min_cleanable_dirty_ratio=0.99), clock=clock) as log:
        for i in range(60):
            log.append(_batch([(b"k%d" % (i % 3), b"x" * 50)], clock.now))
        assert log.compact().passes == 1  # all dirty: ratio 1.0 > 0.99
        for i in range(12):
            log.append(_batch([(b"k%d" % (i % 3), b"x" * 50)], clock.now))
        ltc = Cleaner().log_to_clean(log)
        assert 0 < ltc.dirty_ratio < 0.99
        assert log.compact().passes == 0
        assert log.compact(force=True).passes == 1
    with Log.open(tmpdir_log.parent / "lag-0", _cfg(min_compaction_lag_ms=1_000_000),
                  clock=clock) as log:
        for i in range(60):
            log.append(_batch([(b"k%d" % (i % 3), b"x" * 50)], clock.now))
        n = log.size
        assert log.compact(force=True).passes == 0  # every segment is too young
        assert log.size == n
        clock.advance(2_000_000)
        assert log.compact().passes == 1
        assert log.size < n


def test_tombstones_get_delete_horizon_then_go(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(), clock=clock) as log:
        log.append(_batch([(b"a", b"1"), (b"b", b"1")], clock.now))
        for i in range(30):
            log.append(_batch([(b"c", b"x" * 40)], clock.now))
        log.append(_batch([(b"a", None)], clock.now))
        for i in range(30):
            log.append(_batch([(b"c", b"y" * 40)], clock.now))
        log.roll()
        log.compact()
        view = _latest(_view(log))
        assert view[b"a"] is None and view[b"b"] == b"1"
        hz = [b for b in log.iter_batches() if any(r.key == b"a" for r in b)]
        assert len(hz) == 1 and hz[0].has_delete_horizon
        assert hz[0].delete_horizon_ms == clock.now + RETENTION
        # before the horizon: still kept
        clock.advance(RETENTION - 1)
        log.append(_batch([(b"d", b"1")], clock.now))
        log.roll()
        log.compact(force=True)
        assert _latest(_view(log))[b"a"] is None
        clock.advance(2)
        log.append(_batch([(b"e", b"1")], clock.now))
        log.roll()
        log.compact(force=True)
        view = _latest(_view(log))
        assert b"a" not in view and view[b"b"] == b"1" and view[b"e"] == b"1"


def test_multipass_with_small_map_equals_single_pass(tmp_path):
    import random

    rnd = random.Random(7)
    ops = [(b"k%d" % rnd.randrange(30),
            None if rnd.random() < 0.1 else b"v%d" % i) for i in range(200)]
    results = []
    for mem in (24 * 10_000, 24 * 20):
        d = tmp_path / ("m%d-0" % mem)
        clock = FakeClock()
        with Log.open(d, _cfg(), clock=clock) as log:
            for k, v in ops:
                log.append(_batch([(k, v)], clock.now))
            log.roll()
            st = log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=mem)))
            results.append((_latest(_view(log)), st.passes))
            offs = [o for o, _k, _v in _view(log)]
            assert offs == sorted(set(offs))
    assert results[0][0] == results[1][0]
    assert results[0][1] == 1 and results[1][1] > 1


def test_compressed_batch_rebuilt_with_metadata(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=100_000), clock=clock) as log:
        log.append(_batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], clock.now, pid=5, epoch=1,
                          seq=0, codec="gzip"))
        log.append(_batch([(b"b", b"2")], clock.now, pid=5, epoch=1, seq=3))
        log.roll()
        log.compact()
        bs = list(log.iter_batches())
        assert [(b.base_offset, b.last_offset, b.producer_id, b.producer_epoch,
                 b.base_sequence) for b in bs] == [
            (0, 2, 5, 1, 0),
            (3, 3, 5, 1, 3),
        ]
        assert int(bs[0].compression_type) == 1
        assert [(r.offset, r.key, r.value) for r in bs[0]] == [(2, b"a", b"2")]


def test_emptied_last_batch_of_producer_is_kept(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=100_000), clock=clock) as log:
        log.append(_batch([(b"a", b"1")], clock.now, pid=9, epoch=0, seq=0))
        log.append(_batch([(b"a", b"2")], clock.now, pid=10, epoch=0, seq=0))
        log.roll()
        log.compact()
        bs = list(log.iter_batches())
        # producer 9's only batch is empty now but kept (its last data batch)
        assert [(b.base_offset, b.last_offset, b.producer_id, len(list(b))) for b in bs] == [
            (0, 0, 9, 0),
            (1, 1, 10, 1),
        ]
        assert bs[0].is_valid()
    # producer state survives a rebuild from the log alone
    for f in os.listdir(tmpdir_log):
        if f.endswith(".snapshot") or f == ".kafka_cleanshutdown":
            os.unlink(tmpdir_log / f)
    with Log.open(tmpdir_log, _cfg(), clock=clock) as log:  # before producer 9 expires
        e = log.producer_state.producers[9]
        assert (e.last_offset, e.last_sequence) == (0, 0)


def test_aborted_transactions_and_markers_removed(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=100_000), clock=clock) as log:
        log.append(_batch([(b"k", b"committed")], clock.now, pid=1, epoch=0, seq=0, txn=True))
        log.append(_batch([(b"k", b"aborted")], clock.now, pid=2, epoch=0, seq=0, txn=True))
        log.append(_batch([(b"j", b"aborted")], clock.now, pid=2, epoch=0, seq=1, txn=True))
        log.append(build_end_txn_marker(True, 1, 0, 0, timestamp=clock.now), origin="coordinator")
        log.append(build_end_txn_marker(False, 2, 0, 0, timestamp=clock.now), origin="coordinator")
        log.append(_batch([(b"z", b"1")], clock.now))
        assert [t.producer_id for t in log.collect_aborted_transactions(0, 100)] == [2]
        rc = _view(log, "read_committed")
        assert [(k, v) for _o, k, v in rc] == [(b"k", b"committed"), (b"z", b"1")]
        log.roll()
        log.compact()
        # aborted data gone; both markers still there (abort: batches seen; commit: batch seen)
        bs = list(log.iter_batches())
        assert all(not (b.producer_id == 2 and not b.is_control_batch and len(list(b))) for b in bs)
        assert sum(b.is_control_batch for b in bs) == 2
        assert [(k, v) for _o, k, v in _view(log, "read_committed")] == [(b"k", b"committed"),
                                                                         (b"z", b"1")]
        assert [(k, v) for _o, k, v in _view(log)] == [(b"k", b"committed"), (b"z", b"1")]
        assert [t.producer_id for t in log.collect_aborted_transactions(0, 100)] == [2]
        # producer 2 is still active: its last (aborted) batch stays as an empty header,
        # so the ABORT marker (and its index entry) stays too, as in Kafka
        log.append(_batch([(b"y", b"1")], clock.now))
        log.roll()
        log.compact(force=True)
        assert [(k, v) for _o, k, v in _view(log, "read_committed")] == [
            (b"k", b"committed"), (b"z", b"1"), (b"y", b"1")
        ]


def test_abort_marker_of_an_older_transaction_goes_after_horizon(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=100_000), clock=clock) as log:
        log.append(_batch([(b"a", b"aborted")], clock.now, pid=2, epoch=0, seq=0, txn=True))
        log.append(build_end_txn_marker(False, 2, 0, 0, timestamp=clock.now), origin="coordinator")
        log.append(_batch([(b"b", b"ok")], clock.now, pid=2, epoch=0, seq=1, txn=True))
        log.append(build_end_txn_marker(True, 2, 0, 0, timestamp=clock.now), origin="coordinator")
        log.roll()
        log.compact()
        kinds = [(b.base_offset, b.is_control_batch, len(list(b)),
                  b.has_delete_horizon) for b in log.iter_batches()]
        # batch 0 gone, abort marker kept (its batch was seen), commit marker kept
        assert kinds == [(1, True, 1, False), (2, False, 1, False), (3, True, 1, False)]
        assert [t.first_offset for t in log.collect_aborted_transactions(0, 10)] == [0]
        log.append(_batch([(b"c", b"1")], clock.now))
        log.roll()
        log.compact(force=True)
        abort = [b for b in log.iter_batches() if b.base_offset == 1]
        assert abort and abort[0].has_delete_horizon  # removable: horizon first
        assert abort[0].delete_horizon_ms == clock.now + RETENTION
        clock.advance(RETENTION + 1)
        log.append(_batch([(b"d", b"1")], clock.now))
        log.roll()
        log.compact(force=True)
        assert [b.base_offset for b in log.iter_batches()][:3] == [2, 3, 4]
        assert _latest(_view(log, "read_committed")) == {b"b": b"ok", b"c": b"1", b"d": b"1"}


# -- crash safety --------------------------------------------------------------------------------
def _build_crash_log(d: Path, clock):
    with Log.open(d, _cfg(segment_bytes=600), clock=clock) as log:
        for i in range(36):
            log.append(_batch([(b"k%d" % (i % 5), None if i % 11 == 0 else b"v%d" % i)], clock.now))
        log.roll()


def _snapshot_view(d: Path):
    with Log.open(d, _cfg(segment_bytes=600)) as log:
        return _view(log)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("stride", [11, pytest.param(1, marks=pytest.mark.slow)])
def test_crash_at_every_file_operation_of_compaction(tmp_path, stride):
    """Kill the cleaning process just before its n-th rename/unlink (every ``stride``-th n;
    all of them in the slow run), reopen, and check the log."""
    clock = FakeClock()
    src = tmp_path / "src-0"
    _build_crash_log(src, clock)
    old = _snapshot_view(src)
    ref = tmp_path / "ref-0"
    shutil.copytree(src, ref)
    with Log.open(ref, _cfg(segment_bytes=600), clock=clock) as log:
        log.compact()
    new = _view(Log.open(ref, _cfg(segment_bytes=600), read_only=True))
    assert new != old
    n = 0
    seen_new = seen_old = 0
    while True:
        d = tmp_path / ("c%d-0" % n)
        shutil.copytree(src, d)
        pid = os.fork()
        if pid == 0:  # child: die just before the n-th rename/unlink
            code = 0
            try:
                count = [0]
                real_replace, real_unlink, real_rename = os.replace, os.unlink, os.rename

                def counted(fn):
                    def wrapper(*a, **k):
                        if count[0] == n:
                            os._exit(77)
                        count[0] += 1
                        return fn(*a, **k)

                    return wrapper

                log = Log.open(d, _cfg(segment_bytes=600), clock=clock)
                os.replace, os.unlink, os.rename = (
                    counted(real_replace),
                    counted(real_unlink),
                    counted(real_rename),
                )
                log.compact()
                code = 0
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.WEXITSTATUS(status)
        assert code in (0, 77), code
        got = _snapshot_view(d)
        # each group swaps atomically: the result is the old log with some groups cleaned,
        # so it lies between the new and the old record sets (never a loss, never a mix)
        gs, os_, ns = set(got), set(old), set(new)
        assert ns <= gs <= os_, f"crash before file operation {n}"
        assert _latest(got) == _latest(old)
        offs = [o for o, _k, _v in got]
        assert offs == sorted(set(offs))
        if got == new:
            seen_new += 1
        else:
            seen_old += 1
        if n % 4 == 0:  # the reopened log stays compactable and reaches the new state
            with Log.open(d, _cfg(segment_bytes=600), clock=clock) as log:
                log.compact(force=True)
                assert _latest(_view(log)) == _latest(new)
        shutil.rmtree(d)
        if code == 0:
            break
        n += stride
        assert n < 500
    assert seen_old and seen_new


def test_crash_hook_steps_recover(tmp_path):
    """A crash (exception) at each named swap step, then a reopen, loads old or new."""
    clock = FakeClock()
    src = tmp_path / "src-0"
    _build_crash_log(src, clock)
    old = _snapshot_view(src)
    for step in ("cleaned", "swapped", "old-removed", "renamed"):
        d = tmp_path / ("h%s-0" % step)
        shutil.copytree(src, d)

        class Crash(Exception):
            pass

        def hook(s, step=step):
            if s == step:
                raise Crash(s)

        log = Log.open(d, _cfg(segment_bytes=600), clock=clock)
        _log_mod.CRASH_HOOK = hook
        try:
            with pytest.raises(Crash):
                log.compact()
        finally:
            _log_mod.CRASH_HOOK = None
            log.close_handlers()
            log._release_dir_lock()
        got = _snapshot_view(d)
        assert _latest(got) == _latest(old)
        offs = [o for o, _k, _v in got]
        assert offs == sorted(set(offs))
        assert {o: (k, v) for o, k, v in got}.items() <= {o: (k, v) for o, k, v in old}.items()


# -- real broker data ----------------------------------------------------------------------------
def test_consumer_offsets_from_brokers_compact():
    corpus = storage_conformance_dir()
    if corpus is None:
        pytest.skip("conformance corpus not found (KAFKALOG_CONFORMANCE / ../shared/conformance)")
    dirs = sorted((corpus / "files").glob("*/__consumer_offsets-*"))
    if not dirs:
        pytest.skip("no __consumer_offsets directory in the corpus")
    for src in dirs:
        with tempfile.TemporaryDirectory() as t:
            d = Path(t) / src.name
            shutil.copytree(src, d)
            cfg = {"cleanup.policy": "compact", "segment.bytes": 104857600}
            with Log.open(d, cfg) as log:
                before = _latest(_view(log))
                log.roll()
                log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)), force=True)
                after = _view(log)
                assert _latest(after) == before, src
                offs = [o for o, _k, _v in after]
                assert offs == sorted(set(offs))
                log.verify_indexes()
            with Log.open(d, cfg) as log:
                assert _view(log) == after


def test_small_cleaned_segments_are_grouped(tmpdir_log):
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=400), clock=clock) as log:
        for i in range(120):
            log.append(_batch([(b"k%d" % (i % 4), b"v%d" % i)], clock.now))
        log.roll()
        log.compact()  # full source segments: nothing to merge yet, they shrink
        n_before = len(log.segments)
        log.append(_batch([(b"k9", b"x")], clock.now))
        log.roll()
        log.compact(force=True)  # the shrunken clean segments are merged in groups
        view = _view(log)
        assert len(log.segments) < n_before / 3
        assert all(s.size <= 400 for s in log.segments)
        assert _latest(view) == {b"k0": b"v116", b"k1": b"v117", b"k2": b"v118", b"k3": b"v119",
                                 b"k9": b"x"}
        log.verify_indexes()
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(bases) and bases[0] == 0


# -- what Apache Kafka's cleaner did on the same input (tests/kafka/test_broker_compaction.py) -----
def _bases_and_sizes(log):
    return [(s.base_offset, s.size) for s in log.segments]


def test_a_group_whose_records_all_go_becomes_an_empty_segment(tmpdir_log):
    """Kafka writes nothing for a batch whose records all go (unless its producer or the end of
    the round needs it), so a group of segments holding only superseded records is cleaned into
    an empty segment.  Kafka 4.4's broker did this in test_broker_compaction (its first segment,
    all superseded, became an empty segment 0); kafkalog used to add an empty batch there."""
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=600), clock=clock) as log:
        for rnd in (b"old", b"new"):
            for i in range(5):
                log.append(_batch([(b"a%d" % i, rnd + b"-" + b"x" * 40)], clock.now))
            log.roll()
        log.compact()
        assert [b.base_offset for b in log.iter_batches()] == [5, 6, 7, 8, 9]
        bases = _bases_and_sizes(log)
        assert [b for b, _s in bases] == [0, 5, 10] and bases[0][1] == 0
        log.verify_indexes()
    with Log.open(tmpdir_log, _cfg(segment_bytes=600), clock=clock) as log:
        assert [(k, v[:3]) for _o, k, v in _view(log)] == [(b"a%d" % i, b"new") for i in range(5)]


def test_the_last_batch_of_a_round_goes_when_its_records_go(tmpdir_log):
    """The last batch below a round's upper bound gets no exception: Kafka 4.4's broker, in
    test_broker_compaction, dropped an aborted batch that was alone in the last segment of the
    round (its ABORT marker opened the active segment, its producer wrote on) and left an empty
    segment; kafkalog used to add an empty batch there."""
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=100_000), clock=clock) as log:
        log.append(_batch([(b"a", b"1")], clock.now))
        log.roll()
        log.append(_batch([(b"x", b"aborted")], clock.now, pid=2, epoch=0, seq=0, txn=True))
        log.roll()  # the round stops at offset 2
        log.append(build_end_txn_marker(False, 2, 0, 0, timestamp=clock.now), origin="coordinator")
        log.append(_batch([(b"y", b"1")], clock.now, pid=2, epoch=0, seq=1, txn=True))
        log.append(build_end_txn_marker(True, 2, 0, 0, timestamp=clock.now), origin="coordinator")
        log.compact()
        assert log.cleaner_checkpoint() == 2
        assert [b.base_offset for b in log.iter_batches()] == [0, 2, 3, 4]
        assert [b for b, _s in _bases_and_sizes(log)] == [0, 2]
        assert [(k, v) for _o, k, v in _view(log, "read_committed")] == [(b"a", b"1"), (b"y", b"1")]


def test_the_batch_ending_at_the_high_watermark_is_kept_empty(tmp_path):
    """Kafka 4.4 keeps a batch whose next offset is the log's high watermark as an empty header
    (Cleaner.cleanInto: ``batch.nextOffset() == highWatermark`` -> RETAIN_EMPTY), so the log
    keeps its last offset: here a tombstone past its horizon, the last batch of the log, cleaned
    again after the cleaner checkpoint was lost.  Kafka's writeEmptyHeader: base timestamp -1,
    the batch's max timestamp."""
    clock = FakeClock()
    d = tmp_path / "topic-0"
    with Log.open(d, _cfg(segment_bytes=100_000), clock=clock) as log:
        log.append(_batch([(b"a", b"1")], clock.now))
        log.append(_batch([(b"b", None)], clock.now))
        log.roll()
        log.compact()
        assert [b.has_delete_horizon for b in log.iter_batches()] == [False, True]
    os.unlink(tmp_path / "cleaner-offset-checkpoint")
    clock.advance(RETENTION + 1)
    with Log.open(d, _cfg(segment_bytes=100_000), clock=clock) as log:
        assert log.cleaner_checkpoint() == 0
        log.compact(force=True)
        bs = list(log.iter_batches())
        assert [(b.base_offset, b.last_offset, len(list(b))) for b in bs] == [(0, 0, 1), (1, 1, 0)]
        assert (bs[1].base_timestamp, bs[1].max_timestamp, bs[1].is_valid()) == (-1, BASE_TS, True)
        assert log.log_end_offset == 2


def test_transaction_state_is_carried_across_the_groups_of_a_round(tmpdir_log):
    """Kafka's cleaner keeps one CleanedTransactionMetadata for all the groups of a round: a
    COMMIT marker cleaned in a later group than its transaction's data keeps no horizon and
    stays.  kafkalog used to start afresh in each group, took the marker for one of an empty
    transaction, gave it a horizon and then removed it while its data stayed."""
    clock = FakeClock()
    with Log.open(tmpdir_log, _cfg(segment_bytes=600), clock=clock) as log:
        for i in range(4):
            log.append(_batch([(b"t%d" % i, b"x" * 40)], clock.now, pid=1, epoch=0, seq=i,
                              txn=True))
        log.roll()  # the marker's segment is grouped apart from the data's
        log.append(build_end_txn_marker(True, 1, 0, 0, timestamp=clock.now), origin="coordinator")
        for i in range(4):
            log.append(_batch([(b"p%d" % i, b"y" * 40)], clock.now))
        log.roll()
        log.append(_batch([(b"z", b"1")], clock.now))
        log.compact()
        markers = [b for b in log.iter_batches() if b.is_control_batch]
        assert [(b.base_offset, b.has_delete_horizon) for b in markers] == [(4, False)]
        clock.advance(RETENTION + 1)
        log.append(_batch([(b"z", b"2")], clock.now))
        log.roll()
        log.compact(force=True)
        markers = [b for b in log.iter_batches() if b.is_control_batch]
        assert [(b.base_offset, b.has_delete_horizon) for b in markers] == [(4, False)]
        assert len(log.segments) > 2  # the data and the marker were still in different groups
