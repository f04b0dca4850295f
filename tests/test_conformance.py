"""Conformance: every vector of the shared corpus, decoded by the public API of the twin in use.

The corpus holds real bytes from other implementations' tests and from real brokers, with the
facts they decode to (``vectors.jsonl``; see its README).  It is found at
``$KAFKALOG_CONFORMANCE`` or ``../shared/conformance``; without it these tests skip and say so.
"""
from __future__ import annotations

import hashlib
import json
import struct

import pytest

import kafkalog
from kafkalog import KafkaLogError, MemoryRecords
from kafkalog._varint_py import write_varint

from kl_support import CONFORMANCE_SKIP_REASON, conformance_dir

_DIR = conformance_dir()
VECTORS = []
if _DIR is not None:
    with open(_DIR / "vectors.jsonl", encoding="utf-8") as f:
        VECTORS = [json.loads(line) for line in f if line.strip()]

pytestmark = pytest.mark.skipif(_DIR is None, reason=CONFORMANCE_SKIP_REASON)


def _ids(kinds, malformed=None):
    out = []
    for v in VECTORS:
        if v["kind"] in kinds and (malformed is None or v["malformed"] == malformed):
            out.append(pytest.param(v, id=v["id"]))
    return out or [pytest.param(None, id="corpus-absent")]


def _bytes(spec):
    if spec is None:
        return None
    if "utf8" in spec:
        return spec["utf8"].encode("utf-8")
    return bytes.fromhex(spec["hex"])


def _log_entry(body: bytes, offset: int = 0) -> bytes:
    return struct.pack(">qi", offset, len(body)) + body


def _check_v2_header(batch, e):
    assert batch.magic == 2
    assert batch.base_offset == e["base_offset"]
    assert batch.length == e["batch_length"]
    assert batch.partition_leader_epoch == e["partition_leader_epoch"]
    assert batch.crc == e["crc"]
    assert batch.attributes == e["attributes"]
    assert batch.compression_type.kafka_name == e["compression"]
    assert batch.timestamp_type.kafka_name == e["timestamp_type"]
    assert batch.is_transactional == e["is_transactional"]
    assert batch.is_control_batch == e["is_control"]
    assert batch.last_offset_delta == e["last_offset_delta"]
    assert batch.last_offset == e["last_offset"]
    assert batch.base_timestamp == e["first_timestamp"]
    assert batch.max_timestamp == e["max_timestamp"]
    assert batch.producer_id == e["producer_id"]
    assert batch.producer_epoch == e["producer_epoch"]
    assert batch.base_sequence == e["base_sequence"]
    assert batch.records_count == e["record_count"]
    assert batch.is_valid() == e["crc_valid"]


def _check_legacy_entry(batch, e):
    assert batch.magic == e["magic"]
    assert batch.crc == e["crc"]
    assert batch.is_valid() == e["crc_valid"]
    assert batch.attributes == e["attributes"]
    assert batch.compression_type.kafka_name == e["compression"]
    if "offset" in e:
        assert batch.last_offset == e["offset"]
    if e["magic"] == 1:
        assert batch.max_timestamp == e["timestamp"]
        assert batch.timestamp_type.kafka_name == e["timestamp_type"]
    if "inner" not in e and e["compression"] == "none":
        assert batch.wrapper.key == _bytes(e["key"])
        assert batch.wrapper.value == _bytes(e["value"])


def _check_record(rec, e):
    assert rec.offset == e["offset"]
    if e.get("timestamp") is not None:
        assert rec.timestamp == e["timestamp"]
    assert rec.key == _bytes(e["key"])
    assert rec.value == _bytes(e["value"])
    headers = [(k, _bytes(v)) for k, v in e.get("headers") or []]
    assert list(rec.headers) == headers


# -- v2 batches -----------------------------------------------------------------------------
@pytest.mark.parametrize("v", _ids({"v2_batch"}, malformed=False))
def test_v2_batch(v):
    e = v["expect"]
    mr = MemoryRecords(bytes.fromhex(v["hex"]))
    batches = list(mr.batches())
    assert len(batches) == 1
    assert mr.truncated_bytes == 0
    _check_v2_header(batches[0], e)
    records = list(batches[0])
    assert len(records) == len(e["records"])
    for rec, er in zip(records, e["records"]):
        _check_record(rec, er)


@pytest.mark.parametrize("v", _ids({"v2_batch"}, malformed=True))
def test_v2_batch_malformed(v):
    e = v["expect"]
    data = bytes.fromhex(v["hex"])
    with pytest.raises(KafkaLogError):
        for batch in MemoryRecords(data):
            batch.ensure_valid()
            list(batch)
    if e.get("decodes_without_crc_check"):
        (batch,) = list(MemoryRecords(data, check_crcs=False))
        _check_v2_header(batch, e)
        for rec, er in zip(batch, e["records"]):
            _check_record(rec, er)


# -- single legacy messages ------------------------------------------------------------------
@pytest.mark.parametrize("v", _ids({"v0_message", "v1_message"}))
def test_legacy_message(v):
    e = v["expect"]
    data = bytes.fromhex(v["hex"])
    if e["framing"] == "bare":
        data = _log_entry(data)
    if v["malformed"]:
        with pytest.raises(KafkaLogError):
            for batch in MemoryRecords(data):
                batch.ensure_valid()
                list(batch)
        return
    (batch,) = list(MemoryRecords(data))
    _check_legacy_entry(batch, e)
    records = list(batch)
    if "inner" in e:
        assert [(r.key, r.value) for r in records] == [
            (_bytes(i["key"]), _bytes(i["value"])) for i in e["inner"]
        ]
    else:
        assert len(records) == 1


# -- blobs: message sets, fetch payloads, whole segments -------------------------------------
def _walk(data, check_crcs=True):
    mr = MemoryRecords(data, check_crcs=check_crcs)
    entries, records = [], []
    for batch in mr:
        entries.append(batch)
        records.extend(batch)
    return mr, entries, records


@pytest.mark.parametrize("v", _ids({"message_set", "records_blob", "segment_log"}))
def test_blob(v):
    e = v["expect"]
    data = bytes.fromhex(v["hex"])
    if v["malformed"] and "entries" not in e:
        with pytest.raises(KafkaLogError):
            _walk(data)
        return
    if v["malformed"] and not all(x.get("crc_valid", True) for x in e["entries"]):
        with pytest.raises(KafkaLogError):
            _walk(data)
        mr, entries, records = _walk(data, check_crcs=False)
    elif v["malformed"] and e.get("error") and e["entry_count"] == 0:
        # Corrupt or partial data with no complete entry: Kafka either stops at the partial
        # tail (fewer than 17 bytes, or a size running past the end) or raises.
        try:
            mr, entries, records = _walk(data)
        except KafkaLogError:
            return
        assert entries == [] and mr.truncated_bytes == e["partial_trailing_bytes"]
        return
    else:
        mr, entries, records = _walk(data)
    assert len(entries) == e["entry_count"]
    assert mr.truncated_bytes == e["partial_trailing_bytes"]
    assert mr.valid_bytes == e["valid_bytes"]
    for batch, ee in zip(entries, e["entries"]):
        assert batch.position == ee["position"]
        if ee["entry_kind"] == "v2_batch":
            _check_v2_header(batch, ee)
        else:
            _check_legacy_entry(batch, ee)
    assert len(records) == len(e["records"])
    for rec, er in zip(records, e["records"]):
        _check_record(rec, er)


# -- single v2 records, wrapped in a batch ------------------------------------------------------
def _wrap_record(record: bytes, base_ts: int = 0) -> bytes:
    b = kafkalog.MemoryRecordsBuilder(base_offset=0)
    b.append(base_ts, b"", b"")
    good = bytearray(b.build())
    # Replace the records section with the vector's record and fix the length and CRC.
    out = good[:61] + record
    struct.pack_into(">i", out, 8, len(out) - 12)
    from kafkalog._crc_py import crc32c

    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize("v", _ids({"other"}))
def test_other(v):
    e = v["expect"]
    data = bytes.fromhex(v["hex"])
    part = e.get("record_part")
    if part == "v2_record":
        assert v["malformed"]
        with pytest.raises(KafkaLogError):
            for batch in MemoryRecords(_wrap_record(data)):
                list(batch)
    elif part == "v2_record_body_without_length_varint":
        rec_bytes = write_varint(len(data)) + data
        (batch,) = list(MemoryRecords(_wrap_record(rec_bytes, e["first_timestamp_assumed"])))
        (rec,) = list(batch)
        _check_record(rec, e["record"])
    elif part == "control_record_key":
        from kafkalog import control

        version, ctype = control.parse_control_key(data)
        assert (version, ctype) == (e["control_key_version"], e["control_type"])
        rtype = control.ControlRecordType.from_id(ctype)
        assert rtype.name == e["control_type_name"]
    elif part == "control_record_value":
        from kafkalog import control

        rec = control.parse_control_record(b"\x00\x00\x00\x00", data)
        assert rec.version == e["control_value_version"]
        assert rec.coordinator_epoch == e["coordinator_epoch"]
    elif "codec" in e:
        from kafkalog import compression

        codec = kafkalog.CompressionType.parse(e["codec"])
        magic = 0 if e.get("lz4_hc_variant") == "broken_kafka_magic0" else 2
        out = compression.decompress(codec, data, magic=magic)
        if "decompressed" in e:
            assert out == _bytes(e["decompressed"])
        if "decompressed_length" in e:
            assert len(out) == e["decompressed_length"]
        if "decompressed_sha256" in e:
            assert hashlib.sha256(out).hexdigest() == e["decompressed_sha256"]
    else:
        pytest.fail(f"vector kind not handled by this test: {sorted(e)}")


def test_corpus_is_complete():
    kinds = {v["kind"] for v in VECTORS}
    assert len(VECTORS) >= 150
    assert {"v2_batch", "message_set", "records_blob", "segment_log", "other"} <= kinds
