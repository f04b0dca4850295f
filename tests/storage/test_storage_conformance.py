"""Partition directories written by real brokers (../shared/conformance/files): they open
(read-only and writable copies), read, and their indexes check out against their logs."""

from __future__ import annotations

import json
import os

import pytest

from kafkalog.storage import checkpoints, files
from kafkalog.storage.index import OffsetIndex, TimeIndex
from kafkalog.storage.log import Log
from kafkalog.storage.segment import Segment

from .conftest import storage_conformance_dir


def _partition_dirs():
    d = storage_conformance_dir()
    if d is None:
        return []
    out = []
    for src in sorted(os.listdir(d / "files")):
        root = d / "files" / src
        if not root.is_dir():
            continue
        for part in sorted(os.listdir(root)):
            p = root / part
            if p.is_dir() and any(n.endswith(".log") for n in os.listdir(p)):
                out.append(f"{src}/{part}")
    return out


def _vectors(kind):
    d = storage_conformance_dir()
    if d is None:
        return []
    out = []
    with open(d / "vectors.jsonl") as f:
        for line in f:
            v = json.loads(line)
            if v["kind"] == kind and v["source"].get("corpus_file"):
                if kind == "segment_log" and v["expect"].get("base_offset_from_filename") is None:
                    continue  # e.g. bootstrap.checkpoint: a record file, not a segment
                out.append(v)
    return out


PARTITIONS = _partition_dirs()


def _snapshot(path):
    return {n: (path / n).read_bytes() for n in os.listdir(path) if (path / n).is_file()}


@pytest.mark.parametrize("rel", PARTITIONS or ["<corpus absent>"])
def test_broker_partition_reads_read_only(broker_files, rel):
    part = broker_files / rel
    before = _snapshot(part)
    log = Log.open(part, read_only=True)
    try:
        batches = list(log.iter_batches())
        assert log.log_end_offset >= log.log_start_offset
        lasts = [b.last_offset for b in batches]
        assert lasts == sorted(lasts) and len(set(lasts)) == len(lasts)
        if batches:
            assert batches[-1].last_offset + 1 == log.log_end_offset
            for b in batches:
                b.ensure_valid()
            # every batch is found through the index + header scan
            for b in batches[:: max(1, len(batches) // 50)]:
                first = next(iter(log.read(b.last_offset, 1)))
                assert first.last_offset == b.last_offset
            # ListOffsets by timestamp finds a record at or before each batch's max
            for b in batches[:: max(1, len(batches) // 20)]:
                if b.max_timestamp >= 0:
                    found = log.offset_for_timestamp(b.max_timestamp)
                    assert found is not None and found.offset <= b.last_offset
                    assert found.timestamp >= b.max_timestamp
        log.verify_indexes()
    finally:
        log.close()
    assert _snapshot(part) == before  # a read-only open never writes


@pytest.mark.parametrize("rel", PARTITIONS or ["<corpus absent>"])
def test_broker_partition_opens_writable_and_reloads(broker_files, tmp_path, rel):
    src = broker_files / rel
    ro = Log.open(src, read_only=True)
    expected = [(r.offset, r.value) for r in ro.iter_records()]
    leo = ro.log_end_offset
    ro.close()
    import shutil

    root = tmp_path / rel.split("/")[0]
    shutil.copytree(src.parent, root)
    part = root / rel.split("/")[1]
    log = Log.open(part)
    assert log.log_end_offset == leo
    assert [(r.offset, r.value) for r in log.iter_records()] == expected
    log.verify_indexes()
    log.close()
    # what kafkalog leaves behind is a directory Kafka's loader accepts
    names = os.listdir(part)
    for n in names:
        parsed = files.parse_segment_file_name(n)
        assert parsed is not None or n in (
            files.LEADER_EPOCH_CHECKPOINT_FILE,
            files.PARTITION_METADATA_FILE,
            files.CLEAN_SHUTDOWN_FILE,
            "quorum-state",
        ), n
        if parsed is not None:
            assert parsed.suffix == ""
            if parsed.kind in (".index", ".timeindex"):
                assert os.path.getsize(part / n) % (8 if parsed.kind == ".index" else 12) == 0
    checkpoints.read_leader_epoch_checkpoint(part / files.LEADER_EPOCH_CHECKPOINT_FILE)
    again = Log.open(part)
    assert again.had_clean_shutdown and again.log_end_offset == leo
    again.verify_indexes()
    again.close()


@pytest.mark.parametrize(
    "vector", _vectors("segment_log") or [None], ids=lambda v: v["id"] if v else "absent"
)
def test_segment_vectors(broker_files, vector):
    if vector is None:
        pytest.skip("conformance corpus absent")
    e = vector["expect"]
    path = broker_files.parent / vector["source"]["corpus_file"]
    seg = Segment(str(path.parent), e["base_offset_from_filename"], read_only=True)
    try:
        batches = [b for _p, b in seg.iter_batches()]
        assert len(batches) == e["entry_count"]
        assert sum(len(list(b)) for b in batches) == e["record_count"]
        assert seg.size == e["valid_bytes"]
        headers = list(seg.iter_headers())
        assert [(h.position, h.last_offset) for h in headers] == [
            (b_pos, b.last_offset) for b_pos, b in seg.iter_batches()
        ]
    finally:
        seg.close()


@pytest.mark.parametrize(
    "vector",
    (_vectors("offset_index") + _vectors("time_index")) or [None],
    ids=lambda v: v["id"] if v else "absent",
)
def test_index_vectors(broker_files, vector):
    if vector is None:
        pytest.skip("conformance corpus absent")
    e = vector["expect"]
    path = broker_files.parent / vector["source"]["corpus_file"]
    base = e["base_offset_from_filename"]
    if vector["kind"] == "offset_index":
        idx = OffsetIndex(str(path), base, writable=False)
    else:
        idx = TimeIndex(str(path), base, writable=False)
    got = list(idx)
    if vector["kind"] == "offset_index":
        assert [(x.offset, x.position) for x in got] == [
            (c["offset"], c["position"]) for c in e["entries"]
        ]
    else:
        assert [(x.offset, x.timestamp) for x in got] == [
            (c["offset"], c["timestamp"]) for c in e["entries"]
        ]
    idx.sanity_check(full=True)
    check = e.get("cross_check_with_log")
    if check:
        log_path = broker_files.parent / check["log_file"]
        seg = Segment(str(log_path.parent), base, read_only=True)
        try:
            seg.verify_indexes()
            if vector["kind"] == "offset_index":
                for c in check["entries"]:
                    found = seg.translate_offset(c["offset"])
                    assert (found.position, found.offset) == (c["position"], c["batch_base_offset"])
            else:
                for c in check["entries"]:
                    assert seg.time_index.lookup(c["timestamp"]).offset == c["offset"]
        finally:
            seg.close()


def test_appending_to_a_broker_log_keeps_its_epochs(broker_copy):
    from kafkalog.records import MemoryRecordsBuilder

    root = broker_copy("kafka-tester@e856b9a")
    log = Log.open(root / "__cluster_metadata-0")
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 81)]
    end = log.log_end_offset
    b = MemoryRecordsBuilder()
    b.append(1725272098041, b"k", b"v")
    info = log.append(b)
    assert info.first_offset == end
    batch = list(log.iter_batches(end))[-1]
    assert batch.partition_leader_epoch == 2  # continues the broker's latest epoch
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 81)]
    log.close()
    again = Log.open(root / "__cluster_metadata-0", read_only=True)
    assert again.log_end_offset == end + 1
    again.verify_indexes()
    again.close()
