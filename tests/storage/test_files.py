"""kafkalog.storage.files: segment naming, partition directories, checkpoint and metadata files."""

from __future__ import annotations

import os
import uuid

import pytest

from kafkalog.errors import CorruptCheckpointError
from kafkalog.storage import checkpoints, files
from kafkalog.storage.checkpoints import EpochEntry
from kafkalog.storage.files import SegmentFile, TopicPartition


def test_filename_prefix_is_20_digits():
    assert files.filename_prefix_from_offset(0) == "00000000000000000000"
    assert files.filename_prefix_from_offset(368769) == "00000000000000368769"
    assert files.filename_prefix_from_offset(2**63 - 1) == "09223372036854775807"
    with pytest.raises(ValueError):
        files.filename_prefix_from_offset(-1)


def test_segment_paths(tmp_path):
    d = str(tmp_path)
    assert files.log_file(d, 42) == os.path.join(d, "00000000000000000042.log")
    assert files.offset_index_file(d, 42, ".swap") == os.path.join(
        d, "00000000000000000042.index.swap"
    )
    assert files.time_index_file(d, 1).endswith("00000000000000000001.timeindex")
    assert files.transaction_index_file(d, 1).endswith("00000000000000000001.txnindex")
    assert files.producer_snapshot_file(d, 7).endswith("00000000000000000007.snapshot")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("00000000000000000042.log", SegmentFile(42, ".log", "", "00000000000000000042.log")),
        (
            "00000000000000000042.index.swap",
            SegmentFile(42, ".index", ".swap", "00000000000000000042.index.swap"),
        ),
        (
            "00000000000000000000.timeindex.deleted",
            SegmentFile(0, ".timeindex", ".deleted", "00000000000000000000.timeindex.deleted"),
        ),
        (
            "00000000000000000009.log.cleaned",
            SegmentFile(9, ".log", ".cleaned", "00000000000000000009.log.cleaned"),
        ),
        (
            "00000000000000000012.snapshot",
            SegmentFile(12, ".snapshot", "", "00000000000000000012.snapshot"),
        ),
        (
            "00000000000000000012.txnindex",
            SegmentFile(12, ".txnindex", "", "00000000000000000012.txnindex"),
        ),
        ("leader-epoch-checkpoint", None),
        ("partition.metadata", None),
        ("00000000000000000012.checkpoint", None),
        ("abc.log", None),
        (".kafka_cleanshutdown", None),
    ],
)
def test_parse_segment_file_name(name, expected):
    assert files.parse_segment_file_name(name) == expected


def test_offset_from_file_name_uses_first_dot():
    assert files.offset_from_file_name("/x/00000000000000000100.index.deleted") == 100
    with pytest.raises(ValueError):
        files.offset_from_file_name("leader-epoch-checkpoint")


def test_is_index_and_log_file():
    assert files.is_index_file("00000000000000000000.index")
    assert files.is_index_file("00000000000000000000.timeindex")
    assert files.is_index_file("00000000000000000000.txnindex")
    assert not files.is_index_file("00000000000000000000.log")
    assert not files.is_index_file("00000000000000000000.index.deleted")
    assert files.is_log_file("00000000000000000000.log")


@pytest.mark.parametrize(
    "name, topic, partition, kind",
    [
        ("foo-0", "foo", 0, ""),
        ("__consumer_offsets-49", "__consumer_offsets", 49, ""),
        ("my-topic-with-dashes-12", "my-topic-with-dashes", 12, ""),
        ("topic.with.dots-3", "topic.with.dots", 3, ""),
        ("foo-1.0123456789abcdef0123456789abcdef-delete", "foo", 1, "delete"),
        ("foo-2.0123456789abcdef0123456789abcdef-future", "foo", 2, "future"),
        ("foo-2.0123456789abcdef0123456789abcdef-stray", "foo", 2, "stray"),
    ],
)
def test_parse_partition_dir(name, topic, partition, kind):
    parsed = files.parse_partition_dir(name)
    assert parsed.topic_partition == TopicPartition(topic, partition)
    assert parsed.kind == kind
    assert files.parse_topic_partition_name("/some/root/" + name + "/") == TopicPartition(
        topic, partition
    )


@pytest.mark.parametrize("name", ["foo", "-0", "foo-", "foo-x", "foo-1.abc-delete-", ""])
def test_parse_partition_dir_rejects(name):
    with pytest.raises(ValueError, match="not in the form of topic-partition"):
        files.parse_partition_dir(name)


def test_partition_dir_name_roundtrip():
    assert files.partition_dir_name("foo", 3) == "foo-3"
    assert str(TopicPartition("foo", 3)) == "foo-3"
    with pytest.raises(ValueError):
        files.partition_dir_name("", 0)


def test_offset_checkpoint_roundtrip_and_format(tmp_path):
    p = tmp_path / "recovery-point-offset-checkpoint"
    checkpoints.write_offset_checkpoint(p, {("foo", 0): 3, ("__consumer_offsets", 12): 0})
    assert p.read_bytes() == b"0\n2\n__consumer_offsets 12 0\nfoo 0 3\n"
    assert checkpoints.read_offset_checkpoint(p) == {
        TopicPartition("foo", 0): 3,
        TopicPartition("__consumer_offsets", 12): 0,
    }
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_offset_checkpoint_empty_and_missing(tmp_path):
    assert checkpoints.read_offset_checkpoint(tmp_path / "absent") == {}
    (tmp_path / "empty").write_bytes(b"")
    assert checkpoints.read_offset_checkpoint(tmp_path / "empty") == {}
    (tmp_path / "zero").write_bytes(b"0\n0\n")
    assert checkpoints.read_offset_checkpoint(tmp_path / "zero") == {}


@pytest.mark.parametrize(
    "content, message",
    [
        (b"1\n0\n", "Unrecognised version:1"),
        (b"0\n2\nfoo 0 1\n", "Expected 2 entries"),
        (b"0\n1\nfoo 0\n", "Malformed line"),
        (b"0\n1\nfoo x 1\n", "Malformed line"),
        (b"zero\n", "Malformed line"),
    ],
)
def test_offset_checkpoint_malformed(tmp_path, content, message):
    p = tmp_path / "cp"
    p.write_bytes(content)
    with pytest.raises(CorruptCheckpointError, match=message):
        checkpoints.read_offset_checkpoint(p)


def test_update_offset_checkpoint_merges(tmp_path):
    p = tmp_path / "cp"
    checkpoints.write_offset_checkpoint(p, {("a", 0): 1, ("b", 1): 2})
    checkpoints.update_offset_checkpoint(p, {("a", 0): 10, ("c", 5): 7})
    assert checkpoints.read_offset_checkpoint(p) == {
        TopicPartition("a", 0): 10,
        TopicPartition("b", 1): 2,
        TopicPartition("c", 5): 7,
    }
    checkpoints.update_offset_checkpoint(p, {("b", 1): None})
    assert TopicPartition("b", 1) not in checkpoints.read_offset_checkpoint(p)


def test_leader_epoch_checkpoint_roundtrip(tmp_path):
    p = tmp_path / "leader-epoch-checkpoint"
    checkpoints.write_leader_epoch_checkpoint(p, [(0, 0), (3, 1200)])
    assert p.read_bytes() == b"0\n2\n0 0\n3 1200\n"
    assert checkpoints.read_leader_epoch_checkpoint(p) == [EpochEntry(0, 0), EpochEntry(3, 1200)]
    p.write_bytes(b"0\n2\n0 0\n")
    with pytest.raises(CorruptCheckpointError):
        checkpoints.read_leader_epoch_checkpoint(p)


def test_partition_metadata_roundtrip(tmp_path):
    p = tmp_path / "partition.metadata"
    tid = uuid.UUID("7d98b8a8-4a42-4eb2-a4fa-b38ce48d5862")
    checkpoints.write_partition_metadata(p, tid)
    text = p.read_text()
    assert text.startswith("version: 0\ntopic_id: ") and not text.endswith("\n")
    assert checkpoints.read_partition_metadata(p).topic_id == tid
    assert files.topic_id_from_string(files.topic_id_to_string(tid)) == tid
    with pytest.raises(ValueError):
        checkpoints.write_partition_metadata(p, uuid.UUID(int=0))
    p.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(CorruptCheckpointError, match="zero"):
        checkpoints.read_partition_metadata(p)
    p.write_text("version: 1\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg")
    with pytest.raises(CorruptCheckpointError, match="version"):
        checkpoints.read_partition_metadata(p)


def test_clean_shutdown_file(tmp_path):
    p = tmp_path / ".kafka_cleanshutdown"
    assert checkpoints.read_clean_shutdown_file(p) is None
    checkpoints.write_clean_shutdown_file(p, 83)
    assert p.read_bytes() == b'{"version":0,"brokerEpoch":83}'
    assert checkpoints.read_clean_shutdown_file(p) == 83
    p.write_bytes(b"")
    assert checkpoints.read_clean_shutdown_file(p) == -1


def test_broker_checkpoints_and_metadata(broker_files):
    root = broker_files / "kafka-tester@e856b9a"
    assert checkpoints.read_offset_checkpoint(root / "recovery-point-offset-checkpoint") == {
        TopicPartition("foo", 0): 3
    }
    assert checkpoints.read_offset_checkpoint(root / "log-start-offset-checkpoint") == {}
    assert checkpoints.read_offset_checkpoint(root / "cleaner-offset-checkpoint") == {}
    assert checkpoints.read_leader_epoch_checkpoint(
        root / "__cluster_metadata-0" / "leader-epoch-checkpoint"
    ) == [
        EpochEntry(1, 0),
        EpochEntry(2, 81),
    ]
    md = checkpoints.read_partition_metadata(root / "foo-0" / "partition.metadata")
    assert files.topic_id_to_string(md.topic_id) == "fZi4qEpCTsik-rzkyV0Ypg"
    assert checkpoints.read_clean_shutdown_file(root / ".kafka_cleanshutdown") == 83
    big = checkpoints.read_offset_checkpoint(
        broker_files / "LDI-POC@8030792" / "recovery-point-offset-checkpoint"
    )
    assert len(big) == 54 and big[TopicPartition("__consumer_offsets", 6)] >= 0
    epochs = checkpoints.read_leader_epoch_checkpoint(
        broker_files / "KafkaDemo@3152aef" / "__cluster_metadata-0" / "leader-epoch-checkpoint"
    )
    assert len(epochs) == 21 and epochs[0] == EpochEntry(1, 0)
    assert [e.start_offset for e in epochs] == sorted(e.start_offset for e in epochs)


def test_atomic_write_replaces(tmp_path):
    p = tmp_path / "f"
    files.atomic_write(p, b"one")
    files.atomic_write(p, b"two")
    assert p.read_bytes() == b"two"
    assert sorted(os.listdir(tmp_path)) == ["f"]
