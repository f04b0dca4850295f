"""kafkalog.storage.producer_state: .snapshot files and producer/transaction tracking."""

from __future__ import annotations

import pytest

from kafkalog import control
from kafkalog.errors import CorruptSnapshotError
from kafkalog.records import RecordBatch
from kafkalog.storage.producer_state import (
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_offsets,
    read_snapshot,
)

from .conftest import make_batch

SPEC_ONE = bytes.fromhex(
    "0001 e5b5d6bf 00000001 00000000000003e8 0005 00000009 0000000000000013 00000009 "
    "0000018bcfe56800 00000007 ffffffffffffffff"
)
SPEC_EMPTY = bytes.fromhex("0001 48674bc7 00000000")


def test_snapshot_spec_vectors():
    entry = ProducerStateEntry(1000, 5, 9, 19, 9, 1700000000000, 7, -1)
    assert encode_snapshot([entry]) == SPEC_ONE
    assert encode_snapshot([]) == SPEC_EMPTY
    (decoded,) = decode_snapshot(SPEC_ONE)
    assert decoded == entry
    assert decoded.first_sequence == 0 and decoded.first_offset == 10
    assert decode_snapshot(SPEC_EMPTY) == []


def test_snapshot_errors():
    with pytest.raises(CorruptSnapshotError, match="unknown file version 2"):
        decode_snapshot(b"\x00\x02" + SPEC_EMPTY[2:])
    bad = bytearray(SPEC_ONE)
    bad[-1] ^= 1
    with pytest.raises(CorruptSnapshotError, match="CRC is no longer valid"):
        decode_snapshot(bytes(bad))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(b"\x00\x01\x00")


def test_broker_snapshots(broker_files):
    entries = read_snapshot(
        str(broker_files / "kafka-tester@e856b9a" / "foo-0" / "00000000000000000003.snapshot")
    )
    assert len(entries) == 1
    e = entries[0]
    assert (e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta) == (
        0,
        0,
        2,
        2,
        0,
    )
    assert e.current_txn_first_offset == -1 and e.coordinator_epoch == -1
    # The snapshot agrees with the producer state replayed from the segment itself.
    from kafkalog.records import MemoryRecords

    ps = ProducerStateManager(None)
    for batch in MemoryRecords(
        (broker_files / "kafka-tester@e856b9a" / "foo-0" / "00000000000000000000.log").read_bytes()
    ):
        ps.update(batch)
    assert ps.map_end_offset == 3 and ps.producers[0] == e
    empty = read_snapshot(
        str(
            broker_files
            / "kafka-tester@e856b9a"
            / "__cluster_metadata-0"
            / "00000000000000000116.snapshot"
        )
    )
    assert empty == []
    assert list_snapshot_offsets(
        str(broker_files / "kafka-tester@e856b9a" / "__cluster_metadata-0")
    ) == [81, 116]


def _batch(data, base):
    b = RecordBatch(data, 0)
    return b


def test_manager_tracks_transactions_and_snapshots(tmp_path):
    ps = ProducerStateManager(str(tmp_path))
    data = make_batch(
        [b"a", b"b"],
        base_offset=0,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        transactional=True,
    )
    assert ps.update(RecordBatch(data)) is None
    assert ps.ongoing_txns == {0: 7} and ps.first_unstable_offset() == 0
    other = make_batch(
        [b"c"], base_offset=2, producer_id=8, producer_epoch=0, base_sequence=0, transactional=True
    )
    ps.update(RecordBatch(other))
    marker = control.build_end_txn_marker(False, 7, 1, 3, base_offset=3, timestamp=5)
    completed = ps.update(RecordBatch(marker))
    assert completed is not None and completed.is_aborted
    assert (completed.producer_id, completed.first_offset, completed.last_offset) == (7, 0, 3)
    assert ps.last_stable_offset(completed) == 2  # producer 8's transaction is still open
    ps.complete_txn(completed)
    assert ps.ongoing_txns == {2: 8}
    assert ps.producers[7].coordinator_epoch == 3 and ps.producers[7].current_txn_first_offset == -1
    assert ps.producers[7].last_sequence == 1 and ps.producers[7].last_offset == 1
    assert ps.map_end_offset == 4
    path = ps.take_snapshot()
    assert path.endswith("00000000000000000004.snapshot")
    fresh = ProducerStateManager(str(tmp_path))
    assert fresh.load_latest_snapshot(10) == 4
    assert fresh.ongoing_txns == {2: 8}
    assert {p: e.last_offset for p, e in fresh.producers.items()} == {7: 1, 8: 2}
    commit = control.build_end_txn_marker(True, 8, 0, 0, base_offset=4, timestamp=5)
    done = fresh.update(RecordBatch(commit))
    assert not done.is_aborted and fresh.last_stable_offset(done) == 5


def test_manager_skips_corrupt_snapshot(tmp_path):
    ps = ProducerStateManager(str(tmp_path))
    ps.update(RecordBatch(make_batch([b"x"], producer_id=1, producer_epoch=0, base_sequence=0)))
    ps.take_snapshot()  # at 1
    (tmp_path / "00000000000000000005.snapshot").write_bytes(b"garbage!!!")
    fresh = ProducerStateManager(str(tmp_path))
    assert fresh.load_latest_snapshot(10) == 1
    assert 1 in fresh.producers
    assert not (tmp_path / "00000000000000000005.snapshot").exists()
    fresh.truncate_and_reload(0, 0)
    assert list_snapshot_offsets(str(tmp_path)) == []
