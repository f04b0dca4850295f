"""Control records (kafkalog.control): keys, end-transaction markers, the KRaft types, the spec
and conformance vectors, real KRaft logs, and malformed input."""
from __future__ import annotations

import struct
import uuid

import pytest

import kafkalog
from kafkalog.control import (
    ControlRecord,
    ControlRecordType,
    Voter,
    VoterEndpoint,
    build_end_txn_marker,
    control_key,
    end_txn_marker_value,
    parse_control_key,
    parse_control_record,
)
from kafkalog.errors import CorruptRecordError, InvalidRecordError

from kl_support import CONFORMANCE_SKIP_REASON, conformance_dir, conformance_vectors

VECTORS = conformance_vectors()


def _val(x):
    if x is None:
        return None
    if "utf8" in x:
        return x["utf8"].encode("utf-8")
    return bytes.fromhex(x["hex"])


def test_type_ids():
    assert [(t.name, int(t)) for t in ControlRecordType] == [
        ("UNKNOWN", -1), ("ABORT", 0), ("COMMIT", 1), ("LEADER_CHANGE", 2), ("SNAPSHOT_HEADER", 3),
        ("SNAPSHOT_FOOTER", 4), ("KRAFT_VERSION", 5), ("KRAFT_VOTERS", 6),
    ]
    assert ControlRecordType.from_id(128) is ControlRecordType.UNKNOWN
    assert ControlRecordType.from_id(-3) is ControlRecordType.UNKNOWN
    assert ControlRecordType.from_id(6) is ControlRecordType.KRAFT_VOTERS


# ----------------------------------------------------------------------------------------------
# conformance vectors (kind "other": control_record_key / control_record_value)
# ----------------------------------------------------------------------------------------------
KEY_VECTORS = [v for v in VECTORS.values()
               if v["expect"].get("record_part") == "control_record_key"]
VALUE_VECTORS = [v for v in VECTORS.values()
                 if v["expect"].get("record_part") == "control_record_value"]


@pytest.mark.parametrize("vec", KEY_VECTORS, ids=lambda v: v["id"])
def test_conformance_keys(vec):
    key = bytes.fromhex(vec["hex"])
    e = vec["expect"]
    version, ctype = parse_control_key(key)
    assert (version, ctype) == (e["control_key_version"], e["control_type"])
    assert ControlRecordType.from_id(ctype).name == e["control_type_name"]
    if e["control_type_name"] == "UNKNOWN":
        assert type(ctype) is int  # the raw id is kept
        rec = parse_control_record(key, b"")
        assert rec.type_id == e["control_type"] and rec.type is ControlRecordType.UNKNOWN
    else:
        assert isinstance(ctype, ControlRecordType)


@pytest.mark.parametrize("vec", VALUE_VECTORS, ids=lambda v: v["id"])
def test_conformance_marker_values(vec):
    value = bytes.fromhex(vec["hex"])
    e = vec["expect"]
    for key in (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01"):
        rec = parse_control_record(key, value)
        assert rec.value_version == e["control_value_version"]
        assert rec.coordinator_epoch == e["coordinator_epoch"]
        assert rec.is_transaction_marker


def test_conformance_key_value_pairs():
    pairs = [("sarama/control_record/abort_key", "sarama/control_record/abort_value", "ABORT", 10),
             ("sarama/control_record/commit_key", "sarama/control_record/commit_value", "COMMIT",
              15)]
    for k, v, name, epoch in pairs:
        if k not in VECTORS:
            pytest.skip(CONFORMANCE_SKIP_REASON)
        rec = parse_control_record(bytes.fromhex(VECTORS[k]["hex"]),
                                   bytes.fromhex(VECTORS[v]["hex"]))
        assert rec.type.name == name and rec.coordinator_epoch == epoch and rec.version == 0


def test_conformance_control_batches():
    """Every control record in the v2 batch vectors decodes to what the corpus says."""
    seen = 0
    for vec in VECTORS.values():
        if vec["kind"] != "v2_batch" or not vec["expect"].get("is_control"):
            continue
        for r in vec["expect"].get("records", []):
            c = r.get("control")
            if c is None:
                continue
            key, value = _val(r["key"]), _val(r["value"])
            rec = None
            try:
                rec = parse_control_record(key, value)
            except InvalidRecordError:
                # kafka-python's hand-made ABORT whose value is an opaque string, not a marker
                assert "coordinator_epoch" not in c or len(value) < 6 or value[:2] != b"\x00\x00"
                continue
            assert rec.version == c["version"] and rec.type_id == c["type"]
            assert rec.type.name == c["type_name"]
            if "coordinator_epoch" in c and c["coordinator_epoch"] is not None:
                assert rec.coordinator_epoch == c["coordinator_epoch"]
            seen += 1
    if VECTORS:
        assert seen >= 2


# ----------------------------------------------------------------------------------------------
# end-transaction markers: spec vectors byte-exact
# ----------------------------------------------------------------------------------------------
SPEC_COMMIT_10 = bytes.fromhex(
    "000000000000000a 00000042 00000003 02 40d514e9 0030 00000000 0000018bcfe56800 0000018bcfe56800"
    "00000000000003e8 0005 ffffffff 00000001  "
    "20 00 00 00 08 00000001 0c 0000 00000007 00".replace(" ", "")
)
SPEC_COMMIT_1 = bytes.fromhex(
    "0000000000000001 00000042 00000000 02 c84cc350 0030 00000000 000001873eac3de3 000001873eac3de3"
    "0000000000000000 0000 ffffffff 00000001  "
    "20 00 00 00 08 00000001 0c 000000000000 00".replace(" ", "")
)


def test_spec_commit_marker_offset_10():
    out = build_end_txn_marker(True, 1000, 5, 7, base_offset=10, timestamp=1700000000000,
                               partition_leader_epoch=3)
    assert out == SPEC_COMMIT_10 and len(out) == 78
    [batch] = list(kafkalog.MemoryRecords(out))
    assert batch.crc == 1087706345 and batch.is_valid()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 5, -1)
    [r] = list(batch)
    rec = parse_control_record(r.key, r.value)
    assert rec == ControlRecord(ControlRecordType.COMMIT, 0, 1, 0, coordinator_epoch=7,
                                value=r.value)


def test_spec_commit_marker_from_a_real_broker():
    out = build_end_txn_marker(True, 0, 0, 0, base_offset=1, timestamp=1680383688163,
                               partition_leader_epoch=0)
    assert out == SPEC_COMMIT_1
    [batch] = list(kafkalog.MemoryRecords(out))
    assert batch.crc == 3360473936


def test_abort_marker_and_defaults():
    out = build_end_txn_marker(False, 42, 1, 9)
    [batch] = list(kafkalog.MemoryRecords(out))
    assert batch.partition_leader_epoch == -1 and batch.base_offset == 0
    [r] = list(batch)
    assert r.key == control_key(ControlRecordType.ABORT) == b"\x00\x00\x00\x00"
    assert r.value == end_txn_marker_value(9) == b"\x00\x00\x00\x00\x00\x09"
    rec = parse_control_record(r.key, r.value)
    assert rec.type is ControlRecordType.ABORT and rec.coordinator_epoch == 9


def test_marker_through_both_batch_twins():
    from kafkalog import _batch_py

    out = build_end_txn_marker(True, 7, 2, 3, base_offset=5, timestamp=10)
    for MR in [_batch_py.MemoryRecords] + ([] if kafkalog.IMPLEMENTATION == "python" else [
            __import__("kafkalog._batch", fromlist=["MemoryRecords"]).MemoryRecords]):
        [batch] = list(MR(out))
        [r] = list(batch)
        assert parse_control_record(r.key, r.value).coordinator_epoch == 3
        assert list(MR(out).records()) == []  # control batches are skipped by records()


# ----------------------------------------------------------------------------------------------
# KRaft control records
# ----------------------------------------------------------------------------------------------
def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact_str(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def test_snapshot_header_from_spec_batch():
    raw = bytes.fromhex(
        "0000000000000000 00000047 00000000 02 cb09f114 0020 00000000 00000180ff31c30d "
        "00000180ff31c30d"
        "ffffffffffffffff ffff ffffffff 00000001  2a 00 00 00 08 00000003 16 0000 0000000000002710 "
        "00 00".replace(" ", "")
    )
    [batch] = list(kafkalog.MemoryRecords(raw))
    assert batch.is_control_batch and batch.crc == 3406426388
    [r] = list(batch)
    rec = parse_control_record(r.key, r.value)
    assert rec.type is ControlRecordType.SNAPSHOT_HEADER
    assert rec.value_version == 0 and rec.last_contained_log_timestamp == 10000


def test_snapshot_footer_and_kraft_version():
    rec = parse_control_record(control_key(4), b"\x00\x00\x00")
    assert rec.type is ControlRecordType.SNAPSHOT_FOOTER and rec.value_version == 0
    rec = parse_control_record(control_key(5), b"\x00\x00\x00\x01\x00")
    assert rec.type is ControlRecordType.KRAFT_VERSION and rec.kraft_version == 1


def test_leader_change():
    value = (
        struct.pack(">hi", 0, 3)
        + uvarint(3) + struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 3) + b"\x00"
        + uvarint(2) + struct.pack(">i", 3) + b"\x01" + uvarint(7) + uvarint(2) + b"\xab\xcd"
        + b"\x00"
    )
    rec = parse_control_record(control_key(2), value)
    assert rec.type is ControlRecordType.LEADER_CHANGE
    assert (rec.leader_id, rec.voters, rec.granting_voters) == (3, (1, 3), (3,))


def test_kraft_voters():
    d1 = uuid.UUID("12345678-1234-5678-1234-567812345678")
    voter = (
        struct.pack(">i", 1) + d1.bytes
        + uvarint(2) + compact_str("CONTROLLER") + compact_str("localhost")
        + struct.pack(">H", 9093) + b"\x00"
        + struct.pack(">hh", 0, 1) + b"\x00"
        + b"\x00"
    )
    value = struct.pack(">h", 0) + uvarint(2) + voter + b"\x00"
    rec = parse_control_record(control_key(6), value)
    assert rec.type is ControlRecordType.KRAFT_VOTERS and rec.voters == (1,)
    assert rec.voter_set == (Voter(1, d1, (VoterEndpoint("CONTROLLER", "localhost", 9093),), 0, 1),)


def test_real_kraft_logs_decode():
    """Every control record in the corpus's real __cluster_metadata logs and checkpoints."""
    if conformance_dir() is None:
        pytest.skip(CONFORMANCE_SKIP_REASON)
    files = conformance_dir() / "files"
    types = set()
    for path in sorted(files.rglob("*")):
        if not path.is_file() or path.suffix not in (".log", ".checkpoint"):
            continue
        data = path.read_bytes()
        try:
            batches = list(kafkalog.MemoryRecords(data, check_crcs=False))
        except CorruptRecordError:
            continue
        for batch in batches:
            if batch.magic != 2 or not batch.is_control_batch:
                continue
            for r in batch:
                rec = parse_control_record(r.key, r.value)
                types.add(rec.type)
                if rec.type is ControlRecordType.LEADER_CHANGE:
                    assert rec.leader_id >= 0 and rec.voters
                if rec.type is ControlRecordType.SNAPSHOT_HEADER:
                    assert rec.last_contained_log_timestamp >= 0
    assert types, "no control record found in the corpus files"
    assert ControlRecordType.UNKNOWN not in types


def test_unknown_types_do_not_crash():
    rec = parse_control_record(b"\x00\x00\x00\x80", b"anything at all")
    assert rec.type is ControlRecordType.UNKNOWN and rec.type_id == 128 \
        and rec.value == b"anything at all"
    rec = parse_control_record(b"\x00\x00\x7f\xff", None)
    assert rec.type is ControlRecordType.UNKNOWN and rec.value is None
    # newer version, extra bytes
    assert parse_control_key(b"\x00\x05\x00\x01\xff") == (5, ControlRecordType.COMMIT)
    assert parse_control_key(b"\x00\x00\x00\x80") == (0, 128)


# ----------------------------------------------------------------------------------------------
# malformed input -> InvalidRecordError (a CorruptRecordError)
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key,value,match",
    [
        (b"", b"", "Must have at least 4 bytes, but found only 0"),
        (b"\x00\x00\x00", b"", "found only 3"),
        (b"\xff\xff\x00\x00", b"\x00" * 6, "Invalid version found for control record: -1"),
        (None, b"\x00" * 6, "null"),
        (b"\x00\x00\x00\x01", None, "null"),
        (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x07", "end transaction marker. Must have at least "
         "6"),
        (b"\x00\x00\x00\x00", b"\xff\xfe\x00\x00\x00\x07", "Invalid version found for end "
         "transaction marker: -2"),
        (b"\x00\x00\x00\x03", b"\x00\x00\x00\x00", "SNAPSHOT_HEADER"),
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\x7f", "LEADER_CHANGE"),
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01\x00", "null array"),
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01\x7f\x00", "array of 126 elements"),
        (b"\x00\x00\x00\x06", b"\x00\x00\x02\x00\x00\x00\x01", "KRAFT_VOTERS"),
        (b"\x00\x00\x00\x05", b"\x00\x00", "KRAFT_VERSION"),
        (b"\x00\x00\x00\x04", b"\x00\x00\x02\x01", "SNAPSHOT_FOOTER"),
    ],
)
def test_malformed(key, value, match):
    with pytest.raises(InvalidRecordError, match=match) as ei:
        parse_control_record(key, value)
    assert isinstance(ei.value, CorruptRecordError)


def test_marker_tolerates_trailing_bytes():
    rec = parse_control_record(b"\x00\x00\x00\x01", b"\x00\x01\x00\x00\x00\x07extra")
    assert rec.coordinator_epoch == 7 and rec.value_version == 1


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError):
        parse_control_key("0000")
