"""kafkalog.storage.segment.Segment (Kafka's LogSegment)."""

from __future__ import annotations

import os

import pytest

from kafkalog.errors import CorruptIndexError, InvalidOffsetError, LogClosedError
from kafkalog.records import MemoryRecords
from kafkalog.storage.file_records import TimestampAndOffset
from kafkalog.storage.index import TimestampOffset
from kafkalog.storage.segment import Segment

from .conftest import BASE_TS, make_batch


def fill(seg, start, n_batches, per_batch=3, ts_step=1, size=0):
    """Append ``n_batches`` batches of ``per_batch`` records; returns [(first, last, bytes)]."""
    out = []
    off = start
    for _ in range(n_batches):
        vals = [(b"v%d" % (off + j)).ljust(size, b"-") for j in range(per_batch)]
        tss = [BASE_TS + (off + j) * ts_step for j in range(per_batch)]
        data = make_batch(vals, tss, base_offset=off)
        seg.append(off + per_batch - 1, tss[-1], off + per_batch - 1, data)
        out.append((off, off + per_batch - 1, data))
        off += per_batch
    return out


def test_append_read_translate(tmp_path):
    seg = Segment.open(str(tmp_path), 100, index_interval_bytes=200)
    batches = fill(seg, 100, 20, size=20)
    assert seg.size == sum(len(b[2]) for b in batches)
    assert seg.read_next_offset() == 160
    # an offset inside a batch maps to the start of that batch
    pos = sum(len(b[2]) for b in batches[:5])
    found = seg.translate_offset(116)
    assert found.position == pos and found.offset == 115 and found.size == len(batches[5][2])
    assert seg.translate_offset(160) is None
    # read starts at a batch boundary and may end with a partial batch
    r = seg.read(116, 150)
    assert r.size_in_bytes == 150
    got = list(r)
    assert got[0].base_offset == 115 and r.truncated_bytes > 0
    # min_one_message returns the whole first batch even with max_size 1
    one = seg.read(116, 1, min_one_message=True)
    assert [b.base_offset for b in one] == [115] and one.truncated_bytes == 0
    assert seg.read(116, 0).size_in_bytes == 0
    assert seg.read(200, 100) is None
    # max_position caps the read
    capped = seg.read(100, 10**6, max_position=pos)
    assert capped.size_in_bytes == pos and [b.last_offset for b in capped][-1] == 114
    seg.close()


def test_index_entries_like_kafka_append_path(tmp_path):
    seg = Segment.open(str(tmp_path), 0, index_interval_bytes=0)
    batches = fill(seg, 0, 5)
    # The first append is never indexed; then every append is (bytes_since > 0).
    positions = [sum(len(b[2]) for b in batches[:i]) for i in range(5)]
    assert list(seg.offset_index) == [(b[1], p) for b, p in zip(batches[1:], positions[1:])]
    assert [e.offset for e in seg.time_index] == [b[1] for b in batches[1:]]
    seg.verify_indexes()
    seg.close()


def test_index_interval_spacing(tmp_path):
    seg = Segment.open(str(tmp_path), 0, index_interval_bytes=1000)
    batches = fill(seg, 0, 60, size=30)
    entries = list(seg.offset_index)
    assert 0 < len(entries) < 60
    for (_o1, p1), (_o2, p2) in zip(entries, entries[1:]):
        assert p2 - p1 > 1000 - 200  # roughly one entry per interval
    seg.verify_indexes()
    # every offset is found through the sparse index
    for first, last, _data in batches[::7]:
        assert seg.translate_offset(last).offset == first
    seg.close()


def test_find_offset_by_timestamp(tmp_path):
    seg = Segment.open(str(tmp_path), 0, index_interval_bytes=50)
    fill(seg, 0, 30, ts_step=10)  # record i has timestamp BASE_TS + 10*i
    assert seg.find_offset_by_timestamp(BASE_TS + 55) == TimestampAndOffset(BASE_TS + 60, 6, 0)
    assert seg.find_offset_by_timestamp(BASE_TS) == TimestampAndOffset(BASE_TS, 0, 0)
    assert seg.find_offset_by_timestamp(BASE_TS + 10 * 89) == TimestampAndOffset(
        BASE_TS + 890, 89, 0
    )
    assert seg.find_offset_by_timestamp(BASE_TS + 10 * 90) is None
    # starting offset (log start) is honoured
    assert seg.find_offset_by_timestamp(BASE_TS, starting_offset=40).offset == 40
    assert seg.offset_of_max_timestamp() == TimestampAndOffset(BASE_TS + 890, 89, 0)
    assert seg.largest_timestamp == BASE_TS + 890
    seg.close()


def test_close_trims_and_appends_final_time_entry(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 0, index_interval_bytes=10**6, max_index_size=4096)
    fill(seg, 0, 4, ts_step=100)
    assert seg.time_index.entries == 0
    assert os.path.getsize(os.path.join(d, "00000000000000000000.index")) == 4096
    seg.close()
    assert os.path.getsize(os.path.join(d, "00000000000000000000.index")) == 0
    assert os.path.getsize(os.path.join(d, "00000000000000000000.timeindex")) == 12
    again = Segment.open(d, 0, index_interval_bytes=10**6, max_index_size=4096)
    assert list(again.time_index) == [TimestampOffset(BASE_TS + 1100, 11)]
    assert again.max_timestamp_so_far == BASE_TS + 1100
    assert again.read_next_offset() == 12
    again.close()
    with pytest.raises(LogClosedError):
        again.read(0, 10)


def test_recover_truncates_torn_tail_and_rebuilds_indexes(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 0, index_interval_bytes=100)
    batches = fill(seg, 0, 20, size=10)
    good = seg.size
    seg.close()
    with open(os.path.join(d, "00000000000000000000.log"), "ab") as f:
        f.write(batches[0][2][:40])  # a torn batch
    os.unlink(os.path.join(d, "00000000000000000000.index"))
    seg = Segment.open(d, 0, index_interval_bytes=100)
    assert seg.size == good + 40
    truncated = seg.recover()
    assert truncated == 40 and seg.size == good
    assert os.path.getsize(os.path.join(d, "00000000000000000000.log")) == good
    assert seg.offset_index.entries > 0
    seg.verify_indexes()
    assert seg.read_next_offset() == 60
    assert seg.time_index.last_entry == TimestampOffset(BASE_TS + 59, 59)
    seg.close()


def test_recover_stops_at_crc_error(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 0, index_interval_bytes=100)
    batches = fill(seg, 0, 10)
    seg.close()
    path = os.path.join(d, "00000000000000000000.log")
    raw = bytearray(open(path, "rb").read())
    pos = sum(len(b[2]) for b in batches[:6])
    raw[pos + 70] ^= 0xFF  # inside batch 6's records: CRC mismatch
    open(path, "wb").write(bytes(raw))
    seg = Segment.open(d, 0, index_interval_bytes=100)
    assert seg.recover() == len(raw) - pos
    assert seg.read_next_offset() == 18
    seg.verify_indexes()
    seg.close()


def test_recover_read_only_does_not_touch_files(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 0, index_interval_bytes=100)
    fill(seg, 0, 10)
    seg.close()
    path = os.path.join(d, "00000000000000000000.log")
    with open(path, "ab") as f:
        f.write(b"\x00" * 30)
    os.unlink(os.path.join(d, "00000000000000000000.index"))
    before = sorted(os.listdir(d))
    size_before = os.path.getsize(path)
    ro = Segment.open(d, 0, read_only=True, index_interval_bytes=100)
    assert ro.offset_index.entries == 0  # missing file: empty in-memory index
    assert ro.recover() == 30
    assert ro.read_next_offset() == 30 and ro.offset_index.entries > 0
    assert [b.last_offset for b in ro.read(0, 10**6)][-1] == 29
    ro.verify_indexes()
    ro.close()
    assert sorted(os.listdir(d)) == before
    assert os.path.getsize(path) == size_before
    with pytest.raises(FileNotFoundError):
        Segment.open(d, 999, read_only=True)


def test_truncate_to(tmp_path):
    seg = Segment.open(str(tmp_path), 0, index_interval_bytes=50)
    batches = fill(seg, 0, 10, ts_step=10)
    removed = seg.truncate_to(13)  # batch [12, 14] goes entirely
    assert removed == sum(len(b[2]) for b in batches[4:])
    assert seg.read_next_offset() == 12
    assert seg.max_timestamp_so_far == BASE_TS + 110
    assert all(e.offset < 13 for e in seg.offset_index)
    seg.verify_indexes()
    assert seg.truncate_to(1000) == 0
    seg.truncate_to(0)
    assert seg.size == 0 and seg.read_next_offset() == 0
    fill(seg, 0, 2)  # usable again
    assert seg.read_next_offset() == 6
    seg.close()


def test_offset_overflow_rejected(tmp_path):
    seg = Segment.open(str(tmp_path), 10)
    data = make_batch([b"x"], base_offset=10 + 2**31)
    with pytest.raises(InvalidOffsetError, match="overflow"):
        seg.append(10 + 2**31, BASE_TS, 10 + 2**31, data)
    with pytest.raises(InvalidOffsetError):
        seg.append(5, BASE_TS, 5, make_batch([b"x"], base_offset=5))
    assert seg.size == 0
    seg.close()


def test_should_roll(tmp_path):
    seg = Segment.open(str(tmp_path), 0, max_index_size=24)
    now = BASE_TS
    assert not seg.should_roll(
        1000, 10**6, BASE_TS + 10**6, 10, 100, now
    )  # empty: time does not count
    fill(seg, 0, 1)
    assert seg.should_roll(1000, 10**6, BASE_TS + 2000, 10, 100, now)  # producer time
    assert not seg.should_roll(1000, 10**6, BASE_TS + 500, 10, 100, now)
    assert seg.should_roll(10**9, seg.size + 99, BASE_TS, 10, 100, now)  # size
    assert not seg.should_roll(10**9, seg.size + 100, BASE_TS, 10, 100, now)
    assert seg.should_roll(10**9, 10**6, BASE_TS, 2**31, 100, now)  # relative offset overflow
    for i in range(3):
        seg.offset_index.append(10 + i, 100 + i)
    assert seg.should_roll(10**9, 10**6, BASE_TS, 20, 100, now)  # offset index full
    seg.close()


def test_delete_and_rename(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 5)
    fill(seg, 5, 2)
    assert not seg.txn_index.file_exists  # loaded, file not created
    seg.change_file_suffixes("", ".deleted")
    assert sorted(os.listdir(d)) == [
        "00000000000000000005.index.deleted",
        "00000000000000000005.log.deleted",
        "00000000000000000005.timeindex.deleted",
    ]
    assert seg.read_next_offset() == 11  # still readable after the rename
    seg.delete()
    assert os.listdir(d) == []


def test_verify_indexes_detects_bad_entry(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 0, index_interval_bytes=0)
    fill(seg, 0, 5)
    seg.close()
    p = os.path.join(d, "00000000000000000000.index")
    raw = bytearray(open(p, "rb").read())
    raw[7] += 1  # a position that is not a batch boundary
    open(p, "wb").write(bytes(raw))
    seg = Segment.open(d, 0, read_only=True)
    with pytest.raises(CorruptIndexError, match="does not point at a batch"):
        seg.verify_indexes()
    seg.close()


def test_append_memory_records_and_buffering(tmp_path):
    d = str(tmp_path)
    seg = Segment.open(d, 0)
    data = make_batch([b"a", b"b"])
    seg.append(1, BASE_TS + 1, 1, MemoryRecords(data))
    # buffered bytes are visible to reads of this segment
    assert bytes(seg.read(0, 1000).buffer()) == data
    seg.flush()
    assert os.path.getsize(os.path.join(d, "00000000000000000000.log")) == len(data)
    seg.close()
