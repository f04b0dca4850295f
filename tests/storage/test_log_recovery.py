"""Loading a partition directory after an unclean shutdown (Kafka's LogLoader): torn tails,
corruption, missing/zero-filled indexes, temp/swap files, checkpoints and producer state."""

from __future__ import annotations

import os
import shutil

import pytest

from kafkalog import control
from kafkalog.errors import CorruptRecordError
from kafkalog.storage import checkpoints, files
from kafkalog.storage.index import OffsetIndex
from kafkalog.storage.log import Log
from kafkalog.storage.txn_index import AbortedTxn

from .conftest import BASE_TS, FakeClock, all_records, make_batch, values_batch

TP = files.TopicPartition("topic", 0)


def crash_image(log, tmp_path, name="topic-0"):
    """What a SIGKILL would leave: the files as the OS has them now (buffered bytes drained
    first, as if they had reached the page cache), copied to ``<tmp>/crash/<name>``."""
    for seg in log.segments:
        seg._drain()
    dst = tmp_path / "crash" / name
    shutil.copytree(log.dir, dst)
    for cp in (files.RECOVERY_POINT_CHECKPOINT_FILE, files.LOG_START_OFFSET_CHECKPOINT_FILE):
        src = os.path.join(os.path.dirname(log.dir), cp)
        if os.path.exists(src):
            shutil.copy(src, dst.parent / cp)
    return dst


def set_recovery_point(part_dir, offset):
    checkpoints.write_offset_checkpoint(
        part_dir.parent / files.RECOVERY_POINT_CHECKPOINT_FILE, {TP: offset}
    )


def seg_log_path(part_dir, base):
    return part_dir / (files.filename_prefix_from_offset(base) + ".log")


def test_torn_tail_is_truncated(tmp_path):
    log = Log.open(tmp_path / "topic-0", {"index.interval.bytes": 100})
    for i in range(0, 40, 2):
        log.append(values_batch(i, 2))
    log.flush()
    log.append(values_batch(40, 2))
    img = crash_image(log, tmp_path)
    log.close()
    with open(seg_log_path(img, 0), "ab") as f:
        f.write(values_batch(42, 2)[:37])  # half a batch
    # the crash left the active segment's index untrimmed (zero-filled tail)
    assert os.path.getsize(img / "00000000000000000000.index") == 10 * 1024 * 1024
    rec = Log.open(img, {"index.interval.bytes": 100})
    assert not rec.had_clean_shutdown
    assert rec.log_end_offset == 42 and rec.recovery_point == 40
    assert all_records(rec) == [(i, b"v%d" % i) for i in range(42)]
    rec.verify_indexes()
    rec.append(values_batch(0, 1))
    assert rec.log_end_offset == 43
    rec.close()


def test_garbage_and_zero_tail_are_truncated(tmp_path):
    log = Log.open(tmp_path / "topic-0")
    log.append(values_batch(0, 3))
    img = crash_image(log, tmp_path)
    log.close()
    with open(seg_log_path(img, 0), "ab") as f:
        f.write(bytes(4096))  # preallocated/zeroed space: size field 0 < 14
    rec = Log.open(img)
    assert rec.log_end_offset == 3
    assert os.path.getsize(seg_log_path(img, 0)) == len(values_batch(0, 3))
    rec.close()


def test_corruption_in_an_older_unflushed_segment_drops_later_segments(tmp_path):
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 500})
    for i in range(60):
        log.append(values_batch(i, 1))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 5
    img = crash_image(log, tmp_path)
    log.close()
    set_recovery_point(img, 0)  # nothing flushed: every segment is recovered
    victim = bases[2]
    raw = bytearray(seg_log_path(img, victim).read_bytes())
    one = len(values_batch(0, 1))
    raw[one * 3 + 65] ^= 0x55  # the 4th batch of that segment fails its CRC
    seg_log_path(img, victim).write_bytes(bytes(raw))
    before = {p.name: p.read_bytes() for p in img.iterdir() if p.suffix == ".log"}
    # by default a writable open refuses to cut whole batches, names the damage, cuts nothing
    with pytest.raises(CorruptRecordError) as info:
        Log.open(img, {"segment.bytes": 500})
    assert info.value.path == str(seg_log_path(img, victim))
    at = sum(len(values_batch(victim + j, 1)) for j in range(3))
    assert info.value.position == at and info.value.offset == victim + 3
    assert {p.name: p.read_bytes() for p in img.iterdir() if p.suffix == ".log"} == before
    # read-only, nothing is lost: the damaged batch is reported, the rest read around it
    with Log.open(img, {"segment.bytes": 500}, read_only=True) as ro:
        assert ro.log_end_offset == 60
        gaps = []
        got = [r.offset for r in ro.iter_records(on_damage="skip", gaps=gaps)]
        assert got == [i for i in range(60) if i != victim + 3]
        assert [(g.offset, g.next_offset) for g in gaps] == [(victim + 3, victim + 4)]
        with pytest.raises(CorruptRecordError):
            list(ro.iter_records())
    # a broker's recovery, asked for by name: cut as Kafka's recovery cuts, with a warning
    with pytest.warns(UserWarning, match="recovery='broker'"):
        rec = Log.open(img, {"segment.bytes": 500}, recovery="broker")
    assert rec.log_end_offset == victim + 3
    assert [s.base_offset for s in rec.segments] == bases[:3]
    assert all_records(rec) == [(i, b"v%d" % i) for i in range(victim + 3)]
    assert not any(seg_log_path(img, b).exists() for b in bases[3:])
    rec.verify_indexes()
    rec.close()


def test_segments_below_the_recovery_point_are_trusted(tmp_path):
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 500})
    for i in range(30):
        log.append(values_batch(i, 1))
    bases = [s.base_offset for s in log.segments]
    img = crash_image(log, tmp_path)
    log.close()
    set_recovery_point(img, bases[-1])
    # damage a record inside an old, flushed segment: not re-validated at load (as in Kafka)
    raw = bytearray(seg_log_path(img, 0).read_bytes())
    raw[70] ^= 1
    seg_log_path(img, 0).write_bytes(bytes(raw))
    rec = Log.open(img, {"segment.bytes": 500})
    assert rec.log_end_offset == 30 and len(rec.segments) == len(bases)
    rec.close()


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path):
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 2000, "index.interval.bytes": 100})
    for i in range(60):
        log.append(values_batch(i, 1))
    log.close()
    d = tmp_path / "topic-0"
    os.unlink(d / "00000000000000000000.index")
    os.unlink(d / "00000000000000000000.timeindex")
    second = sorted(n for n in os.listdir(d) if n.endswith(".index"))[0]
    with open(d / second, "ab") as f:
        f.write(b"\x01\x02\x03")  # length no longer a multiple of 8
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 2000, "index.interval.bytes": 100})
    assert log.had_clean_shutdown
    assert log.segments[0].offset_index.entries > 0
    log.verify_indexes()
    assert all_records(log) == [(i, b"v%d" % i) for i in range(60)]
    log.close()
    assert os.path.getsize(d / second) % 8 == 0


def test_temp_deleted_cleaned_swap_and_orphan_files(tmp_path):
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 400})
    for i in range(20):
        log.append(values_batch(i, 1))
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = tmp_path / "topic-0"
    # a compaction result for [bases[0], bases[2]) waiting to be swapped in: keep the records
    # of the first two segments with even offsets
    kept = b""
    for i in range(0, bases[2], 2):
        kept += make_batch([b"c%d" % i], base_offset=i)
    (d / (files.filename_prefix_from_offset(0) + ".log.swap")).write_bytes(kept)
    (d / "00000000000000000000.index.swap").write_bytes(b"")
    (d / "00000000000000000000.timeindex.swap").write_bytes(b"")
    (d / "00000000000000000999.log.deleted").write_bytes(b"junk")
    (d / "00000000000000000998.index.cleaned").write_bytes(b"junk")
    (d / "00000000000000000997.index").write_bytes(b"")  # orphan: no .log
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"junk")
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 400})
    names = os.listdir(d)
    assert not any(n.endswith((".deleted", ".cleaned", ".swap", ".tmp")) for n in names)
    assert "00000000000000000997.index" not in names
    assert [s.base_offset for s in log.segments] == [0] + bases[2:]
    recs = all_records(log)
    assert recs[: bases[2] // 2] == [(i, b"c%d" % i) for i in range(0, bases[2], 2)]
    assert recs[bases[2] // 2 :] == [(i, b"v%d" % i) for i in range(bases[2], 20)]
    log.close()


def test_incomplete_split_swap_is_discarded(tmp_path):
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 400})
    for i in range(10):
        log.append(values_batch(i, 1))
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = tmp_path / "topic-0"
    # a .cleaned at base 0 means the split did not finish: swap files at >= 0 are dropped
    (d / "00000000000000000000.log.cleaned").write_bytes(b"")
    (d / "00000000000000000000.log.swap").write_bytes(make_batch([b"x"]))
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 400})
    assert [s.base_offset for s in log.segments] == bases
    assert all_records(log) == [(i, b"v%d" % i) for i in range(10)]
    log.close()


def test_log_end_below_checkpointed_start_resets(tmp_path):
    log = Log.open(tmp_path / "topic-0")
    log.append(values_batch(0, 5))
    log.close()
    checkpoints.write_offset_checkpoint(tmp_path / files.LOG_START_OFFSET_CHECKPOINT_FILE, {TP: 50})
    log = Log.open(tmp_path / "topic-0")
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert [s.base_offset for s in log.segments] == [50]
    log.close()


def _start_end_facts(log):
    ps = log.producer_state
    return dict(
        start=log.log_start_offset, end=log.log_end_offset, hw=log.high_watermark,
        lso=log.last_stable_offset, length=len(log), size=log.size,
        segments=[(s.base_offset, s.size) for s in log.segments],
        epochs=log.leader_epoch_cache.entries, producers=sorted(ps.producers),
        map_end=ps.map_end_offset, records=all_records(log),
        read_end=bytes(log.read(log.log_end_offset, 1000).buffer()),
        by_time=log.offset_for_timestamp(BASE_TS),
    )


def test_read_only_open_agrees_when_the_checkpointed_start_is_past_the_end(tmp_path):
    """The root's log start checkpoint past the log end (the segments were lost or copied
    from elsewhere): the writable open drops them and starts an empty log at the checkpoint;
    the read-only open answers the same without touching a file (it raised
    FileNotFoundError: no log segments to read)."""
    d = tmp_path / "topic-0"
    log = Log.open(d, {"segment.bytes": 300})
    for i in range(0, 24, 4):
        log.append_as_follower(make_batch([b"v%d" % j for j in range(i, i + 4)],
                                          [BASE_TS + j for j in range(i, i + 4)],
                                          base_offset=i, leader_epoch=3, producer_id=7,
                                          producer_epoch=0, base_sequence=i))
    log.close()
    assert len(log.segments) > 1
    with Log.open(d, read_only=True) as ro:  # a leader epoch, which the reset drops
        assert ro.leader_epoch_cache.entries
    checkpoints.write_offset_checkpoint(tmp_path / files.LOG_START_OFFSET_CHECKPOINT_FILE, {TP: 50})
    before = {n: (d / n).read_bytes() for n in sorted(os.listdir(d))}
    with Log.open(d, read_only=True) as ro:
        got = _start_end_facts(ro)
        assert [s.base_offset for s in ro.segments] == [50]
    assert {n: (d / n).read_bytes() for n in sorted(os.listdir(d))} == before  # untouched
    with Log.open(d) as rw:
        assert got == _start_end_facts(rw)
    assert (got["start"], got["end"], got["records"], got["epochs"]) == (50, 50, [], [])


def test_root_marker_is_honoured_only_read_only(tmp_path):
    log = Log.open(tmp_path / "topic-0")
    log.append(values_batch(0, 3))
    img = crash_image(log, tmp_path)
    log.close()
    checkpoints.write_clean_shutdown_file(img.parent / files.CLEAN_SHUTDOWN_FILE, 5)
    ro = Log.open(img, read_only=True)
    assert ro.had_clean_shutdown and ro.log_end_offset == 3
    ro.close()
    rw = Log.open(img)
    assert not rw.had_clean_shutdown and rw.log_end_offset == 3
    rw.close()
    assert (img.parent / files.CLEAN_SHUTDOWN_FILE).exists()  # the broker's marker is left alone


def test_invalid_offsets_during_recovery_empty_the_segment(tmp_path):
    d = tmp_path / "topic-0"
    log = Log.open(d, {"index.interval.bytes": 0})
    log.close()
    # batches whose offsets go backwards (CRCs valid): the index append fails during recovery
    data = (
        make_batch([b"a", b"b"], base_offset=0)
        + make_batch([b"c"], base_offset=5)
        + make_batch([b"d"], base_offset=3)
    )
    seg_log_path(d, 0).write_bytes(data)
    os.unlink(d / files.CLEAN_SHUTDOWN_FILE)
    second = len(make_batch([b"a", b"b"], base_offset=0))
    # which batch is out of place: the one the batch after contradicts (offsets 0-1, then a jump
    # to 5, then 3: the offsets went on from 2 without the jump, so the jump is the damage; a
    # base offset is not covered by a v2 batch's CRC).  By default a writable open refuses,
    # naming it, and nothing is cut
    with pytest.raises(CorruptRecordError) as info:
        Log.open(d, {"index.interval.bytes": 0})
    assert (info.value.position, info.value.offset) == (second, 5)
    assert seg_log_path(d, 0).read_bytes() == data
    # read-only: every reader reports the same batch, or skips exactly it
    with Log.open(d, {"index.interval.bytes": 0}, read_only=True) as ro:
        assert ro.log_end_offset == 4
        with pytest.raises(CorruptRecordError, match="out of place") as info:
            list(ro.iter_records())
        assert info.value.position == second and info.value.path == str(seg_log_path(d, 0))
        gaps = []
        assert [r.value for r in ro.iter_records(on_damage="skip", gaps=gaps)] == [b"a", b"b",
                                                                                  b"d"]
        # the gap: the offsets the damaged batch stands in place of (from 2, the first one not
        # read, up to 3, where the log goes on), not its own claim of 5
        assert [(g.position, g.offset, g.next_offset) for g in gaps] == [(second, 2, 3)]
    # a broker's recovery: Kafka empties the segment
    with pytest.warns(UserWarning, match="recovery='broker'"):
        log = Log.open(d, {"index.interval.bytes": 0}, recovery="broker")
    assert log.log_end_offset == 0 and log.segments[0].size == 0
    log.close()


def test_transactions_are_rebuilt_by_recovery(tmp_path):
    log = Log.open(tmp_path / "topic-0")
    log.append(
        make_batch([b"t"], producer_id=3, producer_epoch=0, base_sequence=0, transactional=True)
    )
    log.append(values_batch(1, 1))
    log.append(
        control.build_end_txn_marker(False, 3, 0, 9, timestamp=BASE_TS), origin="coordinator"
    )
    img = crash_image(log, tmp_path)
    log.close()
    for n in os.listdir(img):
        if n.endswith((".snapshot", ".txnindex")):
            os.unlink(img / n)
    rec = Log.open(img, clock=FakeClock(BASE_TS))  # not yet past producer.id.expiration.ms
    assert rec.collect_aborted_transactions(0, 10) == [AbortedTxn(3, 0, 2, 3)]
    assert rec.producer_state.producers[3].coordinator_epoch == 9
    rec.close()


def test_read_only_recovery_reports_corruption_without_writing(tmp_path):
    """A read-only open of an uncleanly stopped log with a bad batch at the end of a middle
    segment: the log is not ended there (a broker's recovery would cut it and delete the later
    segments); reads report the batch, or skip exactly it, and nothing is written."""
    log = Log.open(tmp_path / "topic-0", {"segment.bytes": 400})
    for i in range(20):
        log.append(values_batch(i, 1))
    bases = [s.base_offset for s in log.segments]
    img = crash_image(log, tmp_path)
    log.close()
    set_recovery_point(img, 0)
    raw = bytearray(seg_log_path(img, bases[1]).read_bytes())
    raw[-3] ^= 0xFF
    seg_log_path(img, bases[1]).write_bytes(bytes(raw))
    before = {n: (img / n).read_bytes() for n in os.listdir(img)}
    ro = Log.open(img, read_only=True)
    bad = bases[2] - 1  # the last batch of the middle segment
    assert ro.log_end_offset == 20
    assert [s.base_offset for s in ro.segments] == bases
    with pytest.raises(CorruptRecordError) as info:
        all_records(ro)
    assert info.value.path == str(seg_log_path(img, bases[1])) and info.value.offset == bad
    gaps = []
    assert [r.offset for r in ro.iter_records(on_damage="skip", gaps=gaps)] == [
        i for i in range(20) if i != bad]
    assert [(g.offset, g.next_offset) for g in gaps] == [(bad, bad + 1)]
    ro.close()
    assert {n: (img / n).read_bytes() for n in os.listdir(img)} == before


def test_untrimmed_index_of_an_older_segment_reads_correctly(tmp_path):
    d = tmp_path / "topic-0"
    log = Log.open(d, {"segment.bytes": 600, "index.interval.bytes": 50})
    for i in range(30):
        log.append(values_batch(i, 1))
    log.close()
    # re-expand the first segment's index to its preallocated size, as a crash during roll would
    idx_path = d / "00000000000000000000.index"
    entries = os.path.getsize(idx_path) // 8
    assert entries > 0
    with open(idx_path, "ab") as f:
        f.write(bytes(8 * 1000))
    assert OffsetIndex(str(idx_path), 0, writable=False).entries == entries
    log = Log.open(d, {"segment.bytes": 600, "index.interval.bytes": 50})
    log.verify_indexes()
    assert [b.base_offset for b in log.read(5, 10**6)][0] == 5
    log.close()
