"""kafkalog.storage.index: OffsetIndex, TimeIndex, TransactionIndex (Kafka semantics)."""

from __future__ import annotations

import os
import random

import pytest

from kafkalog.errors import CorruptIndexError, InvalidOffsetError
from kafkalog.storage.index import (
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex


def test_offset_index_entry_bytes_match_spec_vector(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(p, 100, max_index_size=80)
    assert os.path.getsize(p) == 80  # preallocated
    idx.append(150, 4168)
    idx.close()
    assert open(p, "rb").read() == bytes.fromhex("00000032 00001048")  # trimmed on close


def test_time_index_entry_bytes_match_spec_vector(tmp_path):
    p = str(tmp_path / "00000000000000000100.timeindex")
    idx = TimeIndex(p, 100, max_index_size=120)
    idx.maybe_append(1700000000000, 150)
    idx.close()
    assert open(p, "rb").read() == bytes.fromhex("0000018bcfe56800 00000032")


def test_preallocation_rounds_down(tmp_path):
    oi = OffsetIndex(str(tmp_path / "a.index"), 0, max_index_size=10 * 1024 * 1024 + 5)
    ti = TimeIndex(str(tmp_path / "a.timeindex"), 0, max_index_size=10 * 1024 * 1024)
    assert oi.length == 10 * 1024 * 1024 and oi.max_entries == 1310720
    assert ti.length == 10485756 and ti.max_entries == 873813
    oi.close()
    ti.close()
    assert os.path.getsize(tmp_path / "a.index") == 0
    assert os.path.getsize(tmp_path / "a.timeindex") == 0


def test_offset_lookup_largest_lower_bound(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 1000, max_index_size=8 * 1000)
    entries = [(1000 + 3 * i + 2, 100 * i + 50) for i in range(500)]
    for off, pos in entries:
        idx.append(off, pos)
    assert idx.lookup(999) == OffsetPosition(1000, 0)  # below every entry
    assert idx.lookup(1001) == OffsetPosition(1000, 0)
    rng = random.Random(7)
    for _ in range(2000):
        target = rng.randrange(995, 1000 + 3 * 500 + 10)
        expected = OffsetPosition(1000, 0)
        for off, pos in entries:
            if off <= target:
                expected = OffsetPosition(off, pos)
        assert idx.lookup(target) == expected, target
    # exact hits in the warm tail and in the cold part
    assert idx.lookup(entries[-1][0]) == OffsetPosition(*entries[-1])
    assert idx.lookup(entries[3][0]) == OffsetPosition(*entries[3])


def test_offset_index_rejects_non_increasing_and_overflow(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 10, max_index_size=80)
    idx.append(20, 100)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        idx.append(20, 200)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        idx.append(15, 200)
    with pytest.raises(InvalidOffsetError, match="overflow"):
        idx.append(10 + 2**31, 300)
    assert idx.entries == 1


def test_offset_index_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, max_index_size=24)
    for i in range(3):
        assert not idx.is_full
        idx.append(i + 1, i * 10)
    assert idx.is_full
    with pytest.raises(InvalidOffsetError, match="full index"):
        idx.append(10, 100)


def test_offset_index_truncate_to(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, max_index_size=800)
    for i in range(1, 11):
        idx.append(i * 10, i * 100)
    idx.truncate_to(55)  # drops 60.. ; keeps 50
    assert idx.last_offset == 50 and idx.entries == 5
    idx.truncate_to(50)  # exact: drops 50
    assert idx.last_offset == 40 and idx.entries == 4
    idx.truncate_to(5)
    assert idx.entries == 0 and idx.last_offset == 0
    idx.append(7, 1)  # appending after truncation works
    assert idx.lookup(8) == OffsetPosition(7, 1)


def test_offset_index_reopen_and_zero_tail(tmp_path):
    p = str(tmp_path / "00000000000000000005.index")
    idx = OffsetIndex(p, 5, max_index_size=8 * 100)
    for i in range(1, 8):
        idx.append(5 + i, 1000 * i)
    idx.flush()
    idx.close_handler()  # a crash: the file keeps its zero-filled preallocated tail
    assert os.path.getsize(p) == 800
    again = OffsetIndex(p, 5, max_index_size=800)
    assert again.entries == 7 and again.last_offset == 12
    again.sanity_check(full=True)
    ro = OffsetIndex(p, 5, writable=False)
    assert ro.entries == 7 and ro.lookup(9) == OffsetPosition(9, 4000)
    with pytest.raises(ValueError):
        ro.append(100, 1)
    # all-zero file: no entries
    z = str(tmp_path / "z.index")
    with open(z, "wb") as f:
        f.write(bytes(80))
    assert OffsetIndex(z, 0, writable=False).entries == 0


def test_offset_index_sanity_check(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    with open(p, "wb") as f:
        f.write(bytes.fromhex("00000010 00000000 0000000c"))  # 12 bytes: not a multiple of 8
    idx = OffsetIndex(p, 100, writable=False)
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        idx.sanity_check()
    p2 = str(tmp_path / "00000000000000000200.index")
    with open(p2, "wb") as f:
        f.write(bytes.fromhex("00000005 00000010 fffffff0 00000020"))  # last offset below base
    with pytest.raises(CorruptIndexError, match="less than the base offset"):
        OffsetIndex(p2, 200, writable=False).sanity_check()
    p3 = str(tmp_path / "00000000000000000300.index")
    with open(p3, "wb") as f:
        f.write(bytes.fromhex("00000005 00000010 00000004 00000020 00000009 00000030"))
    OffsetIndex(
        p3, 300, writable=False
    ).sanity_check()  # Kafka's check only looks at the last entry
    with pytest.raises(CorruptIndexError, match="not larger than the previous"):
        OffsetIndex(p3, 300, writable=False).sanity_check(full=True)


def test_resize_and_trim(tmp_path):
    p = str(tmp_path / "x.index")
    idx = OffsetIndex(p, 0, max_index_size=800)
    idx.append(1, 10)
    idx.append(2, 20)
    idx.trim_to_valid_size()
    assert os.path.getsize(p) == 16 and idx.is_full
    idx.resize(800)
    assert os.path.getsize(p) == 800 and not idx.is_full and idx.entries == 2
    idx.resize(8)  # shrinking below the entries drops entries
    assert idx.entries == 1


def test_time_index_maybe_append_only_growing_timestamps(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 100, max_index_size=12 * 10)
    assert idx.last_entry == TimestampOffset(-1, 100)
    idx.maybe_append(1000, 105)
    idx.maybe_append(1000, 107)  # equal timestamp: ignored
    assert idx.entries == 1
    idx.maybe_append(2000, 107)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(3000, 106)  # smaller offset
    with pytest.raises(ValueError, match="no larger than the last timestamp"):
        idx.maybe_append(1500, 110)  # smaller timestamp
    assert list(idx) == [TimestampOffset(1000, 105), TimestampOffset(2000, 107)]
    assert idx.lookup(999) == TimestampOffset(-1, 100)
    assert idx.lookup(1000) == TimestampOffset(1000, 105)
    assert idx.lookup(1999) == TimestampOffset(1000, 105)
    assert idx.lookup(10**13) == TimestampOffset(2000, 107)


def test_time_index_reserves_a_slot(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 0, max_index_size=36)  # 3 slots
    idx.maybe_append(1, 1)
    assert not idx.is_full
    idx.maybe_append(2, 2)
    assert idx.is_full  # one slot kept for the final entry
    with pytest.raises(InvalidOffsetError, match="full"):
        idx.maybe_append(3, 3)
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3


def test_time_index_truncate_to_uses_offsets(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 0, max_index_size=12 * 10)
    for i in range(1, 6):
        idx.maybe_append(i * 1000, i * 10)
    idx.truncate_to(30)
    assert idx.last_entry == TimestampOffset(2000, 20)
    idx.truncate_to(25)
    assert idx.last_entry == TimestampOffset(2000, 20)
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.last_entry == TimestampOffset(-1, 0)


def test_time_index_sanity_check(tmp_path):
    p = str(tmp_path / "00000000000000000000.timeindex")
    with open(p, "wb") as f:  # last timestamp smaller than the first
        f.write(bytes.fromhex("00000000000003e8 00000001 00000000000001f4 00000002"))
    with pytest.raises(CorruptIndexError, match="less than the first timestamp"):
        TimeIndex(p, 0, writable=False).sanity_check()
    with open(p, "wb") as f:
        f.write(bytes(13))
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        TimeIndex(p, 0, writable=False).sanity_check()


def test_index_lookup_in_memory_matches_file(tmp_path):
    mem = OffsetIndex(None, 0, max_index_size=8 * 5000)
    disk = OffsetIndex(str(tmp_path / "d.index"), 0, max_index_size=8 * 5000)
    off = 0
    for i in range(4000):
        off += random.Random(i).randint(1, 5)
        mem.append(off, i * 7)
        disk.append(off, i * 7)
    for t in range(0, off + 5, 13):
        assert mem.lookup(t) == disk.lookup(t)


def test_transaction_index(tmp_path):
    p = str(tmp_path / "00000000000000000010.txnindex")
    idx = TransactionIndex(10, p)
    assert not os.path.exists(p)  # created lazily
    idx.append(AbortedTxn(1000, 10, 20, 10))
    assert open(p, "rb").read() == bytes.fromhex(
        "0000 00000000000003e8 000000000000000a 0000000000000014 000000000000000a"
    )
    idx.append(AbortedTxn(1001, 15, 30, 12))
    idx.append(AbortedTxn(1002, 25, 40, 41))
    with pytest.raises(InvalidOffsetError):
        idx.append(AbortedTxn(1003, 25, 40, 41))
    assert [t.producer_id for t in idx.all_aborted_txns()] == [1000, 1001, 1002]
    res = idx.collect_aborted_txns(21, 35)
    assert [t.producer_id for t in res.aborted_transactions] == [1001, 1002] and res.is_complete
    res = idx.collect_aborted_txns(0, 100)
    assert len(res.aborted_transactions) == 3 and not res.is_complete
    again = TransactionIndex(10, p)
    assert again.last_offset == 40
    again.sanity_check()
    again.truncate_to(30)
    assert [t.last_offset for t in again] == [20] and again.last_offset == 20
    again.reset()
    assert len(again) == 0 and os.path.getsize(p) == 0


def test_transaction_index_sanity_check(tmp_path):
    p = str(tmp_path / "00000000000000000100.txnindex")
    TransactionIndex(100, p).append(AbortedTxn(1, 50, 60, 61))  # last offset below the segment base
    with pytest.raises(CorruptIndexError, match="less than start offset"):
        TransactionIndex(100, p).sanity_check()
    with open(p, "ab") as f:
        f.write(b"\x00" * 5)
    with pytest.raises(CorruptIndexError, match="multiple of 34"):
        TransactionIndex(100, p).sanity_check()
    q = str(tmp_path / "00000000000000000000.txnindex")
    with open(q, "wb") as f:
        f.write(bytes.fromhex("0100") + bytes(32))
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 1"):
        TransactionIndex(0, q).all_aborted_txns()


def test_broker_index_only_sample(broker_files):
    d = broker_files / "KafkaDemo@3152aef" / "__cluster_metadata-0"
    oi = OffsetIndex(str(d / "00000000000000000000.index"), 0, writable=False)
    ti = TimeIndex(str(d / "00000000000000000000.timeindex"), 0, writable=False)
    assert oi.entries == 6648 and ti.entries == 6649
    oi.sanity_check(full=True)
    ti.sanity_check(full=True)
    entries = list(oi)
    for target_entry in entries[::97]:
        assert oi.lookup(target_entry.offset) == target_entry
        assert oi.lookup(target_entry.offset + 1).offset >= target_entry.offset
    tentries = list(ti)
    for e in tentries[::101]:
        assert ti.lookup(e.timestamp) == e
