"""Legacy messages (magic 0 and 1): both twins of ``_legacy``, the spec and conformance vectors,
round trips over every codec and timestamp type, malformed input, and cross-checks with
aiokafka and kafka-python.

Every twin test runs against ``kafkalog._legacy_py`` and, unless KAFKALOG_PURE_PYTHON is set,
``kafkalog._legacy`` (which must then import: a missing build fails here, it does not skip).
"""
from __future__ import annotations

import gzip
import importlib
import json
import os
import random
import struct
import time
import zlib
from pathlib import Path

import pytest

import kafkalog
from kafkalog import _batch_py, _legacy_py
from kafkalog._format import CompressionType, TimestampType
from kafkalog.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaLogError,
)

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
TWIN_NAMES = ["kafkalog._legacy_py"] + ([] if PURE else ["kafkalog._legacy"])
CODECS = ["none", "gzip", "snappy", "lz4"]
TS_TYPES = ["create_time", "log_append_time"]
SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


@pytest.fixture(params=TWIN_NAMES, ids=lambda n: n.rsplit(".", 1)[1])
def L(request):
    return importlib.import_module(request.param)


def twins():
    return [importlib.import_module(n) for n in TWIN_NAMES]


def test_compiled_twin_loads():
    if PURE:
        pytest.skip("KAFKALOG_PURE_PYTHON is set")
    mod = importlib.import_module("kafkalog._legacy")  # must import: no skip on failure
    assert mod.__file__.endswith((".so", ".pyd"))
    assert sorted(mod.__all__) == sorted(_legacy_py.__all__)


def test_compiled_record_attributes_are_member_descriptors():
    """The compiled LegacyRecord exposes its hot attributes as slot-style member descriptors."""
    if PURE:
        pytest.skip("KAFKALOG_PURE_PYTHON is set")
    mod = importlib.import_module("kafkalog._legacy")
    for name in ("offset", "timestamp", "key", "value", "headers"):
        assert type(mod.LegacyRecord.__dict__[name]).__name__ == "member_descriptor", name


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def entry(offset, magic, attributes, key, value, timestamp=-1, crc=None, klen=None, vlen=None,
          trailing=b""):
    """One hand-made log entry (CRC computed unless given)."""
    body = struct.pack(">bb", magic, attributes)
    if magic:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", (-1 if key is None else len(key)) if klen is None else klen)
    body += key or b""
    body += struct.pack(">i", (-1 if value is None else len(value)) if vlen is None else vlen)
    body += (value or b"") + trailing
    if crc is None:
        crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def wrapper(offset, magic, codec_id, inner: bytes, timestamp=-1, attributes_extra=0,
            value_override=None):
    """A compressed wrapper entry around the message set ``inner`` (gzip via zlib, others via
    kafkalog.compression)."""
    from kafkalog import compression

    if value_override is not None:
        value = value_override
    else:
        value = compression.compress(codec_id, inner, magic=magic) if codec_id != 4 else inner
    return entry(offset, magic, codec_id | attributes_extra, None, value, timestamp)


def fields(records):
    return [(r.offset, r.timestamp, r.key, r.value) for r in records]


def walk(L, buf, **kw):
    """Every entry of ``buf`` as LegacyRecordBatch objects (no MemoryRecords)."""
    out = []
    pos = 0
    while len(buf) - pos >= 17:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if len(buf) - pos - 12 < size:
            break
        out.append(L.LegacyRecordBatch(buf, pos, **kw))
        pos += 12 + size
    return out


def outcome(fn):
    """(result, None) or (None, (class name, str)) - for parity checks."""
    try:
        return fn(), None
    except KafkaLogError as e:
        return None, (type(e).__name__, str(e))


# ----------------------------------------------------------------------------------------------
# spec vectors (reference §18)
# ----------------------------------------------------------------------------------------------
V0_MESSAGE1 = bytes.fromhex("0000000000000000 00000016 e97538bc 00 00 ffffffff 00000008 "
                            "6d65737361676531".replace(" ", ""))
V1_ABC = bytes.fromhex("0000000000000000 00000019 eac5d7ee 01 00 00000168733b304b ffffffff "
                       "00000003 616263".replace(" ", ""))
V1_KV = bytes.fromhex("0000000000000005 00000018 39268c33 01 00 0000018bcfe56800 00000001 6b "
                      "00000001 76".replace(" ", ""))


def test_spec_v0_message1(L):
    b = L.LegacyRecordBatch(V0_MESSAGE1)
    assert (b.offset, b.length, b.crc, b.magic, b.attributes) == (0, 22, 3916773564, 0, 0)
    assert b.is_valid() and b.compute_checksum() == 3916773564
    assert b.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE
    assert b.max_timestamp == b.base_timestamp == -1
    [r] = list(b)
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == (0, -1, None, b"message1", ())
    assert r.crc == 3916773564 and r.is_valid() and r.size_in_bytes == 22
    bld = L.LegacyRecordsBuilder(0, "none", 0, "create_time")
    bld.append(1234, None, b"message1")
    assert bld.build() == V0_MESSAGE1


def test_spec_v1_abc(L):
    b = L.LegacyRecordBatch(V1_ABC)
    assert b.crc == 3938834414 and b.is_valid()
    assert b.timestamp == b.max_timestamp == 1548121485387
    assert fields(b) == [(0, 1548121485387, None, b"abc")]
    bld = L.LegacyRecordsBuilder(1, "none", 0, "create_time")
    bld.append(1548121485387, None, b"abc")
    assert bld.build() == V1_ABC


def test_spec_v1_k_v_offset5(L):
    bld = L.LegacyRecordsBuilder(1, "none", 5, "create_time")
    assert bld.append(1700000000000, b"k", b"v") == 5
    out = bld.build()
    assert out == V1_KV and len(out) == 36
    assert fields(L.LegacyRecordBatch(out)) == [(5, 1700000000000, b"k", b"v")]


@pytest.mark.parametrize("magic,size", [(0, 34), (1, 42)])
def test_key_value_sizes_and_crc(L, magic, size):
    bld = L.LegacyRecordsBuilder(magic, "none", 0, "create_time")
    bld.append(1700000000000, b"key", b"value")
    out = bld.build()
    assert len(out) == size
    assert struct.unpack_from(">I", out, 12)[0] == zlib.crc32(out[16:])
    expected = entry(0, magic, 0, b"key", b"value", 1700000000000 if magic else -1)
    assert out == expected


# ----------------------------------------------------------------------------------------------
# conformance corpus (../shared/conformance/vectors.jsonl)
# ----------------------------------------------------------------------------------------------
def _vectors():
    path = SHARED / "conformance" / "vectors.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.open()]


VECTORS = _vectors()


def _val(x):
    if x is None:
        return None
    if "utf8" in x:
        return x["utf8"].encode("utf-8")
    return bytes.fromhex(x["hex"])


def _legacy_vectors(kinds):
    return [v for v in VECTORS if v["kind"] in kinds]


@pytest.mark.parametrize(
    "vec", _legacy_vectors(("v0_message", "v1_message")), ids=lambda v: v["id"]
)
def test_conformance_single_messages(L, vec):
    raw = bytes.fromhex(vec["hex"])
    e = vec["expect"]
    if e["framing"] == "bare":
        raw = struct.pack(">qi", 0, len(raw)) + raw
    if vec["malformed"]:
        with pytest.raises(CorruptRecordError):
            list(L.LegacyRecordBatch(raw))
        return
    b = L.LegacyRecordBatch(raw)
    assert b.crc == e["crc"] and b.is_valid() == e["crc_valid"]
    assert b.attributes == e["attributes"] and b.magic == e["magic"]
    assert b.compression_type.kafka_name == e["compression"]
    if e["magic"] == 1:
        assert b.timestamp == e["timestamp"]
        assert b.timestamp_type.kafka_name == e["timestamp_type"]
    if e["compression"] == "none":
        [r] = list(b)
        assert (r.key, r.value) == (_val(e["key"]), _val(e["value"]))
        return
    inner = e.get("inner")
    if not inner:
        # An empty compressed message set (sarama writes one): read as no records.
        assert list(b) == []
        return
    recs = list(b)
    assert [(r.key, r.value) for r in recs] == [(_val(i["key"]), _val(i["value"])) for i in inner]


@pytest.mark.parametrize("vec", _legacy_vectors(("message_set",)), ids=lambda v: v["id"])
def test_conformance_message_sets(L, vec):
    raw = bytes.fromhex(vec["hex"])
    e = vec["expect"]
    batches = walk(L, raw)
    if vec["malformed"]:
        with pytest.raises(CorruptRecordError):
            for b in batches:
                list(b)
        return
    assert len(batches) == e["entry_count"]
    assert sum(b.size_in_bytes for b in batches) == e["valid_bytes"]
    for b, ent in zip(batches, e["entries"]):
        assert (b.position, b.offset, b.crc, b.magic) == (ent["position"], ent["offset"],
                                                          ent["crc"], ent["magic"])
        assert b.is_valid() == ent["crc_valid"]
        if "inner_count" in ent:
            assert b.records_count == ent["inner_count"]
    got = [r for b in batches for r in b]
    exp = e["records"]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (x["offset"], x.get("timestamp", -1) if x.get("timestamp") is not None else -1,
         _val(x["key"]), _val(x["value"]))
        for x in exp
    ]
    assert [r.timestamp_type.kafka_name for r in got] == [
        x.get("timestamp_type") or "NoTimestampType" for x in exp
    ]


@pytest.mark.parametrize("vec", _legacy_vectors(("records_blob", "message_set")),
                         ids=lambda v: v["id"])
def test_conformance_blobs_through_memory_records(vec):
    """Mixed-format blobs through the public MemoryRecords (whichever twin is loaded)."""
    raw = bytes.fromhex(vec["hex"])
    e = vec["expect"]
    mr = kafkalog.MemoryRecords(raw)
    if vec["malformed"] and not e.get("partial_trailing_bytes"):
        with pytest.raises(CorruptRecordError):
            for b in mr:
                list(b)
        return
    got = [r for b in mr for r in b]
    assert mr.truncated_bytes == e["partial_trailing_bytes"]
    assert len(got) == e["record_count"]
    if "records" in e:
        assert [(r.offset, r.key, r.value) for r in got] == [
            (x["offset"], _val(x["key"]), _val(x["value"])) for x in e["records"]
        ]


# ----------------------------------------------------------------------------------------------
# round trips: magic x codec x timestamp type, both twins produce the same bytes
# ----------------------------------------------------------------------------------------------
SAMPLE = [
    (1700000000000, b"key0", b"value0"),
    (1700000000005, None, b"value1"),
    (1700000000003, b"key2", None),
    (-1, b"", b""),
    (1700000000010, b"k" * 300, b"v" * 5000),
]


def _build(L, magic, codec, ts_type, base=1000, gaps=False, lat=1800000000000):
    bld = L.LegacyRecordsBuilder(magic, codec, base, ts_type, log_append_time=lat)
    off = base
    for ts, k, v in SAMPLE:
        if gaps:
            bld.append_with_offset(off, ts, k, v)
            off += 3
        else:
            bld.append(ts, k, v)
    return bld.build()


@pytest.mark.parametrize("gaps", [False, True])
@pytest.mark.parametrize("ts_type", TS_TYPES)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_round_trip(L, magic, codec, ts_type, gaps):
    out = _build(L, magic, codec, ts_type, gaps=gaps)
    offsets = [1000 + (3 * i if gaps else i) for i in range(len(SAMPLE))]
    batches = walk(L, out)
    if codec == "none":
        assert len(batches) == len(SAMPLE)
    else:
        assert len(batches) == 1
        w = batches[0]
        assert w.offset == w.last_offset == offsets[-1]
        assert w.base_offset == offsets[0] and w.records_count == len(SAMPLE) == len(w)
        assert w.last_offset_delta == offsets[-1] - offsets[0]
        assert w.wrapper.key is None
        if magic == 1:
            expected_ts = 1800000000000 if ts_type == "log_append_time" else max(t for t, _,
                                                                                 _ in SAMPLE)
            assert w.max_timestamp == expected_ts
    recs = [r for b in batches for r in b]
    lat = ts_type == "log_append_time" and magic == 1
    want = [
        (o, (1800000000000 if lat else ts) if magic else -1, k, v)
        for o, (ts, k, v) in zip(offsets, SAMPLE)
    ]
    assert fields(recs) == want
    for r in recs:
        assert r.is_valid() and r.headers == () and r.magic == magic
        assert r.timestamp_type == (
            TimestampType.NO_TIMESTAMP_TYPE if magic == 0
            else TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME
        )
    for b in batches:
        assert b.is_valid()
        assert b.compression_type == CompressionType.parse(codec)
        assert bytes(b.view()) == out[b.position : b.position + b.size_in_bytes]


@pytest.mark.parametrize("ts_type", TS_TYPES)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_twins_write_identical_bytes(magic, codec, ts_type):
    outs = {L.__name__: _build(L, magic, codec, ts_type, gaps=True) for L in twins()}
    assert len(set(outs.values())) == 1


def test_log_append_time_inner_messages_carry_bit_and_time(L):
    """Kafka's builder writes LogAppendTime (and the bit) into every inner message too."""
    out = _build(L, 1, "gzip", "log_append_time", lat=42)
    w = L.LegacyRecordBatch(out)
    assert w.attributes == (1 | 0x08) and w.timestamp == 42
    from kafkalog import compression

    inner = compression.decompress(1, w.wrapper.value, magic=1, max_size=1 << 20)
    for b in walk(L, inner):
        assert b.attributes == 0x08 and b.timestamp == 42 and b.offset < len(SAMPLE)


def test_log_append_time_defaults_to_build_time(L):
    bld = L.LegacyRecordsBuilder(1, "none", 0, "log_append_time")
    bld.append(5, b"k", b"v")
    before = int(time.time() * 1000)
    out = bld.build()
    after = int(time.time() * 1000)
    [r] = list(L.LegacyRecordBatch(out))
    assert before <= r.timestamp <= after


def test_memory_records_builder_delegates_to_legacy():
    for magic in (0, 1):
        b = kafkalog.MemoryRecordsBuilder(magic, "gzip", 7, "create_time")
        assert b.append(1700000000000, b"a", b"b") == 7
        assert b.append(1700000000001, None, b"c") == 8
        assert b.records_count == 2
        out = b.build()
        recs = list(kafkalog.MemoryRecords(out).records())
        assert [(r.offset, r.key, r.value) for r in recs] == [(7, b"a", b"b"), (8, None, b"c")]
        with pytest.raises(ValueError, match="does not support record headers"):
            b.append(1, b"k", b"v", [("h", b"x")])


def test_uncompressed_magic0_ignores_timestamps(L):
    bld = L.LegacyRecordsBuilder(0, "none", 0, "log_append_time", log_append_time=99)
    bld.append(1700000000000, b"k", b"v")
    out = bld.build()
    assert out == entry(0, 0, 0, b"k", b"v")


# ----------------------------------------------------------------------------------------------
# builder rules
# ----------------------------------------------------------------------------------------------
def test_builder_rules(L):
    with pytest.raises(ValueError, match="ZStandard"):
        L.LegacyRecordsBuilder(1, "zstd", 0, "create_time")
    with pytest.raises(ValueError):
        L.LegacyRecordsBuilder(2, "none", 0, "create_time")
    with pytest.raises(ValueError, match="TimestampType must be set"):
        L.LegacyRecordsBuilder(1, "none", 0, TimestampType.NO_TIMESTAMP_TYPE)
    L.LegacyRecordsBuilder(0, "none", 0, TimestampType.NO_TIMESTAMP_TYPE)
    b = L.LegacyRecordsBuilder(1, "none", 10, "create_time")
    assert b.build() == b"" and b.records_count == 0 and len(b) == 0
    with pytest.raises(ValueError, match="Magic v1 does not support record headers"):
        b.append(1, b"k", b"v", [("h", b"v")])
    with pytest.raises(ValueError, match="Invalid negative timestamp -2"):
        b.append(-2, b"k", b"v")
    with pytest.raises(TypeError):
        b.append(1.5, b"k", b"v")
    with pytest.raises(TypeError):
        b.append(1, "str key", b"v")
    with pytest.raises(InvalidOffsetError):
        b.append_with_offset(9, 1, b"k", b"v")  # below the base offset
    assert b.append(-1, bytearray(b"k"), memoryview(b"v")) == 10
    b.append_with_offset(20, 1, b"k", b"v")
    with pytest.raises(InvalidOffsetError, match="Offsets must increase monotonically"):
        b.append_with_offset(20, 1, b"k", b"v")
    assert b.append(1, None, None) == 21
    assert b.records_count == 3
    assert [r.offset for b_ in walk(L, b.build()) for r in b_] == [10, 20, 21]


def test_builder_room_and_estimates(L):
    b = L.LegacyRecordsBuilder(1, "none", 0, "create_time", write_limit=100)
    assert b.has_room_for(1, b"k" * 1000, b"v")  # the first record always fits
    b.append(1, b"k", b"v")
    assert b.estimated_size_in_bytes() == 12 + 22 + 2
    assert b.has_room_for(1, b"k", b"v")  # 36 + 36 <= 100
    b.append(1, b"k", b"v")
    assert not b.has_room_for(1, b"k", b"v")  # 72 + 36 > 100
    c = L.LegacyRecordsBuilder(0, "gzip", 0, "create_time")
    assert c.estimated_size_in_bytes() == 0
    c.append(1, b"k", b"v")
    assert c.estimated_size_in_bytes() == (12 + 14) + (12 + 14 + 2)


# ----------------------------------------------------------------------------------------------
# batch surface: same attribute names as the v2 RecordBatch
# ----------------------------------------------------------------------------------------------
def test_attribute_surface_matches_v2_batch(L):
    v2_names = {n for n in dir(_batch_py.RecordBatch) if not n.startswith("_")}
    legacy_names = {n for n in dir(L.LegacyRecordBatch) if not n.startswith("_")}
    assert v2_names <= legacy_names, v2_names - legacy_names


def test_header_facts(L):
    b = L.LegacyRecordBatch(V1_KV)
    assert (b.partition_leader_epoch, b.producer_id, b.producer_epoch) == (-1, -1, -1)
    assert (b.base_sequence, b.last_sequence) == (-1, -1)
    assert not (b.is_transactional or b.is_control_batch or b.has_producer_id
                or b.has_delete_horizon)
    assert b.delete_horizon_ms is None
    assert (b.base_offset, b.last_offset, b.next_offset, b.last_offset_delta) == (5, 5, 6, 0)
    assert (b.length, b.size_in_bytes, b.records_count, len(b)) == (24, 36, 1, 1)
    assert b.timestamp_type == TimestampType.CREATE_TIME \
        and b.compression_type == CompressionType.NONE
    assert b.wrapper == list(b)[0]
    assert bytes(b.records_section()) == V1_KV
    assert "LegacyRecordBatch(magic=1, offset=5" in repr(b)


def test_records_section_of_wrapper(L):
    inner = entry(0, 1, 0, b"a", b"b", 7) + entry(1, 1, 0, b"c", b"d", 8)
    w = wrapper(11, 1, 1, inner, timestamp=8)
    assert bytes(L.LegacyRecordBatch(w).records_section()) == inner


def test_position_and_memoryview_sources(L):
    buf = b"\x00" * 7 + V1_KV + V0_MESSAGE1
    for src in (buf, bytearray(buf), memoryview(buf)):
        b = L.LegacyRecordBatch(src, 7 + len(V1_KV))
        assert b.position == 7 + len(V1_KV) and b.offset == 0
        assert fields(b) == [(0, -1, None, b"message1")]
        assert bytes(b.view()) == V0_MESSAGE1


# ----------------------------------------------------------------------------------------------
# LegacyRecord
# ----------------------------------------------------------------------------------------------
def test_record_equality_and_repr(L):
    r = L.LegacyRecord(5, 17, b"k", b"v")
    assert r == L.LegacyRecord(5, 17, b"k", b"v")
    assert r != L.LegacyRecord(5, 18, b"k", b"v")
    for other in twins():
        assert r == other.LegacyRecord(5, 17, b"k", b"v")
    assert r == _batch_py.Record(5, 17, b"k", b"v") and _batch_py.Record(5, 17, b"k", b"v") == r
    assert r != _batch_py.Record(5, 17, b"k", b"v", (("h", b"x"),))
    if not PURE:
        batch_c = importlib.import_module("kafkalog._batch")
        assert r == batch_c.Record(5, 17, b"k", b"v") and batch_c.Record(5, 17, b"k", b"v") == r
    assert r != (5, 17, b"k", b"v")
    with pytest.raises(TypeError):
        hash(r)
    assert repr(r) == ("LegacyRecord(offset=5, timestamp=17, key=b'k', value=b'v', magic=1, "
                       "attributes=0, crc=%d)" % r.crc)
    assert r.is_valid() and r.crc == zlib.crc32(entry(5, 1, 0, b"k", b"v", 17)[16:])
    assert r.size_in_bytes == 24 and r.compression_type == CompressionType.NONE
    r0 = L.LegacyRecord(5, 17, b"k", b"v", magic=0)
    assert r0.timestamp == -1 and r0.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE
    with pytest.raises(ValueError):
        L.LegacyRecord(5, 17, b"k", b"v", magic=2)


def test_record_is_valid_detects_corruption_of_stored_fields(L):
    raw = bytearray(entry(3, 1, 0, b"key", b"value", 99))
    raw[-1] ^= 0xFF
    b = L.LegacyRecordBatch(bytes(raw), check_crc=False)
    [r] = list(b)
    assert not r.is_valid() and not b.is_valid()
    with pytest.raises(CorruptRecordError, match="Record is corrupt"):
        r.ensure_valid()


# ----------------------------------------------------------------------------------------------
# wrappers: offsets, timestamps, Kafka's deep-iterator rules
# ----------------------------------------------------------------------------------------------
def test_v1_relative_inner_offsets(L):
    inner = b"".join(entry(i, 1, 0, b"k%d" % i, b"v", 100 + i) for i in range(3))
    w = L.LegacyRecordBatch(wrapper(52, 1, 1, inner, timestamp=102))
    assert [r.offset for r in w] == [50, 51, 52]
    assert w.base_offset == 50


def test_v1_noncontiguous_relative_offsets(L):
    inner = entry(0, 1, 0, b"a", b"v", 1) + entry(4, 1, 0, b"b", b"v", 2)
    w = L.LegacyRecordBatch(wrapper(14, 1, 1, inner, timestamp=2))
    assert [r.offset for r in w] == [10, 14]


def test_v1_wrapper_offset_zero_uses_inner_offsets(L):
    inner = entry(3, 1, 0, b"a", b"v", 1) + entry(5, 1, 0, b"b", b"v", 2)
    w = L.LegacyRecordBatch(wrapper(0, 1, 1, inner, timestamp=2))
    assert [r.offset for r in w] == [3, 5]


def test_v1_invalid_wrapper_offset(L):
    inner = entry(0, 1, 0, b"a", b"v", 1) + entry(9, 1, 0, b"b", b"v", 2)
    buf = V0_MESSAGE1 + wrapper(5, 1, 1, inner, timestamp=2)
    w = L.LegacyRecordBatch(buf, len(V0_MESSAGE1))
    with pytest.raises(InvalidRecordError, match="invalid wrapper offset") as ei:
        list(w)
    assert ei.value.position == len(V0_MESSAGE1) and ei.value.offset == 5


def test_v0_inner_offsets_are_absolute(L):
    inner = entry(40, 0, 0, b"a", b"v") + entry(41, 0, 0, b"b", b"v")
    w = L.LegacyRecordBatch(wrapper(41, 0, 2, inner))
    assert fields(w) == [(40, -1, b"a", b"v"), (41, -1, b"b", b"v")]
    assert w.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE


def test_log_append_time_wrapper_overrides_inner_timestamps(L):
    inner = entry(0, 1, 0, b"a", b"v", 1) + entry(1, 1, 0, b"b", b"v", 2)
    w = L.LegacyRecordBatch(wrapper(1, 1, 1, inner, timestamp=777, attributes_extra=0x08))
    recs = list(w)
    assert [r.timestamp for r in recs] == [777, 777]
    assert all(r.timestamp_type == TimestampType.LOG_APPEND_TIME and r.is_valid() for r in recs)
    w2 = L.LegacyRecordBatch(wrapper(1, 1, 1, inner, timestamp=777))
    assert [r.timestamp for r in w2] == [1, 2]


def test_mismatched_inner_magic_is_read_like_kafka(L):
    """v0 inner messages in a v1 wrapper (KAFKA-4298): no timestamps, relative offsets."""
    inner = entry(0, 0, 0, b"a", b"v") + entry(1, 0, 0, b"b", b"v")
    recs = list(L.LegacyRecordBatch(wrapper(21, 1, 1, inner, timestamp=5)))
    assert fields(recs) == [(20, -1, b"a", b"v"), (21, -1, b"b", b"v")]
    assert recs[0].timestamp_type == TimestampType.NO_TIMESTAMP_TYPE


def test_nested_wrapper_rejected(L):
    nested = wrapper(0, 1, 1, entry(0, 1, 0, b"a", b"v", 1), timestamp=1)
    w = L.LegacyRecordBatch(wrapper(0, 1, 1, nested, timestamp=1))
    with pytest.raises(InvalidRecordError, match="Inner messages must not be compressed"):
        list(w)


def test_empty_inner_set_and_null_value(L):
    from kafkalog import compression

    # A wrapper whose value inflates to nothing holds no records (lenient, like sarama) ...
    w = L.LegacyRecordBatch(wrapper(0, 1, 1, b"", timestamp=1))
    assert list(w) == []
    # ... but one whose inflated value holds no complete message is corrupt (Kafka).
    w = L.LegacyRecordBatch(wrapper(0, 1, 1, b"\x00" * 11, timestamp=1))
    with pytest.raises(InvalidRecordError, match="no inner records"):
        list(w)
    with pytest.raises(InvalidRecordError, match="no inner records"):
        w.base_offset
    nul = entry(0, 1, 1, None, None, 1)
    with pytest.raises(InvalidRecordError, match="null value"):
        list(L.LegacyRecordBatch(nul))
    assert compression  # keeps the import used


def test_zstd_and_unknown_codecs(L):
    # zstd in a legacy wrapper is read (sarama writes it), and garbage in it is corrupt.
    z = L.LegacyRecordBatch(entry(0, 1, 4, None, b"whatever", 1))
    assert z.compression_type == CompressionType.ZSTD
    with pytest.raises(CorruptRecordError, match="zstd"):
        list(z)
    from kafkalog import compression

    inner = entry(0, 1, 0, b"a", b"v", 1) + entry(1, 1, 0, b"b", b"w", 2)
    z = L.LegacyRecordBatch(wrapper(1, 1, 4, inner, timestamp=2,
                                    value_override=compression.compress(4, inner)))
    assert [(r.offset, r.key, r.value) for r in z] == [(0, b"a", b"v"), (1, b"b", b"w")]
    for c in (5, 6, 7):
        u = L.LegacyRecordBatch(entry(3, 1, c, None, b"x", 1))
        with pytest.raises(CorruptRecordError, match=f"Unknown compression type id {c}"):
            u.compression_type
        with pytest.raises(CorruptRecordError, match="Unknown compression type id"):
            list(u)
        assert f"unknown({c})" in repr(u)


def test_partial_trailing_inner_entry_is_dropped_like_kafka(L):
    inner = entry(0, 1, 0, b"a", b"v", 1) + entry(1, 1, 0, b"b", b"v", 2)
    for cut in (1, 11, 12, 20):
        w = L.LegacyRecordBatch(wrapper(0, 1, 1, inner[:-cut], timestamp=2))
        assert [r.key for r in w] == [b"a"]


def test_inner_entry_size_checks(L):
    bad = struct.pack(">qi", 0, 13) + b"\x00" * 13
    with pytest.raises(CorruptRecordError, match="minimum record overhead"):
        list(L.LegacyRecordBatch(wrapper(0, 1, 1, bad, timestamp=1)))
    neg = struct.pack(">qi", 0, -5) + b"\x00" * 30
    with pytest.raises(CorruptRecordError, match="minimum record overhead"):
        list(L.LegacyRecordBatch(wrapper(0, 1, 1, neg, timestamp=1)))
    huge = struct.pack(">qi", 0, 0x7FFFFFF0) + b"\x00" * 30  # partial: ends the set, no allocation
    with pytest.raises(InvalidRecordError, match="no inner records"):
        list(L.LegacyRecordBatch(wrapper(0, 1, 1, huge, timestamp=1)))


def test_inner_crc_checked_when_check_crc(L):
    good = entry(0, 1, 0, b"a", b"v", 1)
    bad = entry(1, 1, 0, b"b", b"v", 2, crc=12345)
    raw = wrapper(1, 1, 1, good + bad, timestamp=2)
    with pytest.raises(CorruptRecordError, match="Inner record at offset 1 is corrupt"):
        list(L.LegacyRecordBatch(raw))
    recs = list(L.LegacyRecordBatch(raw, check_crc=False))
    assert [r.is_valid() for r in recs] == [True, False]


def test_wrapper_crc_checked_before_decompression(L):
    raw = bytearray(wrapper(1, 1, 1, entry(0, 1, 0, b"a", b"v", 1), timestamp=1))
    raw[12] ^= 1  # the stored CRC
    b = L.LegacyRecordBatch(bytes(raw))
    with pytest.raises(CorruptRecordError, match=r"Record is corrupt \(stored crc"):
        list(b)
    with pytest.raises(CorruptRecordError, match=r"Record is corrupt \(stored crc"):
        b.base_offset
    assert [r.key for r in L.LegacyRecordBatch(bytes(raw), check_crc=False)] == [b"a"]


# ----------------------------------------------------------------------------------------------
# malformed outer entries
# ----------------------------------------------------------------------------------------------
def test_bad_crc(L):
    raw = bytearray(V1_KV)
    raw[-1] ^= 0x40
    b = L.LegacyRecordBatch(bytes(raw))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError,
                       match=r"Record is corrupt \(stored crc = 958827571") as ei:
        list(b)
    assert ei.value.offset == 5 and ei.value.position == 0
    with pytest.raises(CorruptRecordError):
        b.records()
    assert fields(L.LegacyRecordBatch(bytes(raw), check_crc=False))[0][3] == b"\x36"


@pytest.mark.parametrize("cut", range(1, 36))
def test_truncated_entry(L, cut):
    with pytest.raises(CorruptRecordError, match="truncated|minimum"):
        L.LegacyRecordBatch(V1_KV[:cut])


def test_size_rules(L):
    with pytest.raises(CorruptRecordError,
                       match="Record size 13 is smaller than the minimum record overhead"):
        L.LegacyRecordBatch(struct.pack(">qi", 1, 13) + b"\x00" * 13)
    v1_short = struct.pack(">qiIbb", 1, 20, 0, 1, 0) + b"\x00" * 14
    with pytest.raises(CorruptRecordError, match="minimum v1 record overhead"):
        L.LegacyRecordBatch(v1_short)
    with pytest.raises(CorruptRecordError, match="truncated") as ei:
        L.LegacyRecordBatch(V0_MESSAGE1 + struct.pack(">qi", 77, 0x7FFFFFFF) + b"\x00" * 40,
                            len(V0_MESSAGE1))
    assert ei.value.position == len(V0_MESSAGE1) and ei.value.offset == 77
    for magic in (2, 3, -1):
        raw = struct.pack(">qiIbb", 0, 14, 0, magic, 0) + b"\xff" * 8
        with pytest.raises(CorruptRecordError, match="Invalid magic"):
            L.LegacyRecordBatch(raw)
    with pytest.raises(CorruptRecordError):
        L.LegacyRecordBatch(V1_KV, -1)
    with pytest.raises(CorruptRecordError):
        L.LegacyRecordBatch(V1_KV, 10**30)


@pytest.mark.parametrize(
    "klen,vlen,match",
    [
        (0x7FFFFFF0, 1, "key size"),
        (1, 0x7FFFFFF0, "value size"),
        (2**31 - 1, 2**31 - 1, "key size"),
        (1, 3, "value size"),
        (3, 1, "key size"),
    ],
)
def test_huge_or_overrunning_lengths(L, klen, vlen, match):
    raw = entry(0, 1, 0, b"k", b"v", 1, klen=klen, vlen=vlen)
    b = L.LegacyRecordBatch(raw, check_crc=False)
    with pytest.raises(CorruptRecordError, match=match):
        list(b)
    with pytest.raises(CorruptRecordError, match=match):
        b.wrapper


def test_negative_lengths_mean_null_and_trailing_bytes_are_kept(L):
    raw = entry(0, 0, 0, b"", b"", klen=-7, vlen=-100, trailing=b"xyz")
    b = L.LegacyRecordBatch(raw)
    [r] = list(b)
    assert (r.key, r.value) == (None, None)
    assert r.is_valid() and r.size_in_bytes == 14 + 3


def test_error_position_is_entry_position(L):
    raw = V0_MESSAGE1 + V1_ABC + entry(9, 1, 0, b"k", b"v", 1, klen=99)
    pos = len(V0_MESSAGE1) + len(V1_ABC)
    b = L.LegacyRecordBatch(raw, pos, check_crc=False)
    with pytest.raises(CorruptRecordError) as ei:
        list(b)
    assert (ei.value.position, ei.value.offset) == (pos, 9)


# ----------------------------------------------------------------------------------------------
# decompression bombs
# ----------------------------------------------------------------------------------------------
def test_decompression_bomb_is_stopped(L):
    one = entry(0, 1, 0, None, b"\x00" * 100_000, 1)
    inner = one * 40  # ~4 MB of inner messages, compresses to a few KB
    raw = V1_ABC + wrapper(39, 1, 1, inner, timestamp=1)
    b = L.LegacyRecordBatch(raw, len(V1_ABC), max_decompressed_size=1 << 20)
    assert b.size_in_bytes < 50_000
    with pytest.raises(DecompressedSizeError) as ei:
        list(b)
    assert (ei.value.position, ei.value.offset) == (len(V1_ABC), 39)
    ok = L.LegacyRecordBatch(raw, len(V1_ABC), max_decompressed_size=8 << 20)
    assert ok.records_count == 40


def test_gzip_bomb_default_limit(L):
    """A ~300 MiB gzip bomb in a ~300 KiB wrapper hits the default 256 MiB limit."""
    zeros = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"\x00" * (1 << 20)
    value = b"".join([zeros.compress(chunk) for _ in range(300)] + [zeros.flush()])
    raw = entry(0, 1, 1, None, value, 1)
    with pytest.raises(DecompressedSizeError):
        list(L.LegacyRecordBatch(raw))


# ----------------------------------------------------------------------------------------------
# both twins: same answers, same errors (seeded mutation fuzz)
# ----------------------------------------------------------------------------------------------
def _seeds():
    pieces = [V0_MESSAGE1, V1_ABC, V1_KV]
    pieces.append(wrapper(12, 1, 1, b"".join(entry(i, 1, 0, b"k%d" % i, b"v" * i, 5 + i)
                                             for i in range(3)), timestamp=7))
    pieces.append(wrapper(2, 0, 2,
                          b"".join(entry(i, 0, 0, b"k%d" % i, b"v" * i) for i in range(3))))
    pieces.append(wrapper(3, 1, 3, b"".join(entry(i, 1, 0, None, b"x" * 20, i) for i in range(4)),
                          timestamp=3))
    pieces.append(wrapper(3, 0, 3, b"".join(entry(i, 0, 0, None, b"x" * 20) for i in range(4))))
    return pieces


def _decode_all(L, raw, pos, check):
    b = L.LegacyRecordBatch(raw, pos, check_crc=check, max_decompressed_size=1 << 16)
    recs = [(r.offset, r.timestamp, r.key, r.value, r.magic, r.attributes, r.crc, r.is_valid(),
             int(r.timestamp_type)) for r in b]
    return (b.offset, b.length, b.crc, b.magic, b.attributes, b.timestamp, b.is_valid(), recs,
            b.base_offset, b.records_count)


def test_twins_agree_on_mutated_input():
    if PURE:
        pytest.skip("needs both twins")
    P, C = twins()
    rng = random.Random(20240611)
    for seed in _seeds():
        for _ in range(150):
            raw = bytearray(seed)
            for _k in range(rng.randint(1, 3)):
                i = rng.randrange(len(raw))
                raw[i] = (rng.randrange(256) if rng.random() < 0.5
                          else raw[i] ^ (1 << rng.randrange(8)))
            if rng.random() < 0.2:
                raw = raw[: rng.randrange(len(raw))]
            raw = bytes(raw)
            for check in (True, False):
                a = outcome(lambda: _decode_all(P, raw, 0, check))
                b = outcome(lambda: _decode_all(C, raw, 0, check))
                assert a == b, (raw.hex(), check)


def test_no_foreign_exceptions_on_garbage(L):
    rng = random.Random(7)
    for n in range(2000):
        size = rng.randrange(0, 80)
        raw = bytes(rng.randrange(256) for _ in range(size))
        if size >= 12 and rng.random() < 0.7:
            raw = raw[:8] + struct.pack(">i", size - 12) + raw[12:]
            if size >= 17:
                raw = raw[:16] + bytes([rng.choice([0, 1])]) + raw[17:]
        try:
            _decode_all(L, raw, 0, rng.random() < 0.5)
        except KafkaLogError:
            pass


# ----------------------------------------------------------------------------------------------
# mixed magic buffers through MemoryRecords (both MemoryRecords twins)
# ----------------------------------------------------------------------------------------------
def _mr_classes():
    out = [_batch_py.MemoryRecords]
    if not PURE:
        out.append(importlib.import_module("kafkalog._batch").MemoryRecords)
    return out


@pytest.mark.parametrize("MR", _mr_classes(), ids=lambda c: c.__module__)
def test_mixed_magic_buffer(MR):
    parts = []
    b0 = kafkalog.MemoryRecordsBuilder(0, "none", 0, "create_time")
    b0.append(1, b"a", b"0")
    parts.append(b0.build())
    b0c = kafkalog.MemoryRecordsBuilder(0, "snappy", 1, "create_time")
    b0c.append(1, b"b", b"1")
    b0c.append(1, b"c", b"2")
    parts.append(b0c.build())
    b1 = kafkalog.MemoryRecordsBuilder(1, "gzip", 3, "create_time")
    b1.append(1700000000003, b"d", b"3")
    b1.append(1700000000004, b"e", b"4")
    parts.append(b1.build())
    b2 = kafkalog.MemoryRecordsBuilder(2, "lz4", 5, "create_time")
    b2.append(1700000000005, b"f", b"5", [("h", b"x")])
    parts.append(b2.build())
    b1u = kafkalog.MemoryRecordsBuilder(1, "none", 6, "log_append_time", log_append_time=99)
    b1u.append(1700000000006, b"g", b"6")
    parts.append(b1u.build())
    raw = b"".join(parts) + b"\x00" * 5
    mr = MR(raw)
    batches = list(mr)
    assert [b.magic for b in batches] == [0, 0, 1, 2, 1]
    recs = [r for b in batches for r in b]
    assert [(r.offset, r.timestamp, r.key) for r in recs] == [
        (0, -1, b"a"), (1, -1, b"b"), (2, -1, b"c"), (3, 1700000000003, b"d"),
        (4, 1700000000004, b"e"), (5, 1700000000005, b"f"), (6, 99, b"g"),
    ]
    assert mr.truncated_bytes == 5
    assert [b.base_offset for b in batches] == [0, 1, 3, 5, 6]
    assert [b.last_offset for b in batches] == [0, 2, 4, 5, 6]


# ----------------------------------------------------------------------------------------------
# cross-checks with aiokafka and kafka-python
# ----------------------------------------------------------------------------------------------
aiokafka_legacy = pytest.importorskip("aiokafka.record.legacy_records")
kp_legacy = pytest.importorskip("kafka.record.legacy_records")

AIO_CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
PEER_RECORDS = [(1700000000000 + i, (b"key%d" % i) if i % 3 else None,
                 b"value-%d" % i * (i % 4 + 1)) for i in range(25)]


def _peer_iter(batch):
    return [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value) for r in batch]


# aiokafka has no lz4 for magic 0 (Kafka's broken-checksum framing); that combination is
# cross-checked against kafka-python and a real broker's vector instead.
AIO_COMBOS = [(m, c) for m in (0, 1) for c in CODECS if not (m == 0 and c == "lz4")]


@pytest.mark.parametrize("magic,codec", AIO_COMBOS)
def test_aiokafka_builds_we_read(L, magic, codec):
    for Builder in (aiokafka_legacy.LegacyRecordBatchBuilder,
                    aiokafka_legacy._LegacyRecordBatchBuilderPy):
        bld = Builder(magic=magic, compression_type=AIO_CODEC[codec], batch_size=1 << 20)
        for i, (ts, k, v) in enumerate(PEER_RECORDS):
            bld.append(i, timestamp=ts, key=k, value=v)
        raw = bytes(bld.build())
        got = [r for b in walk(L, raw) for r in b]
        assert fields(got) == [(i, ts if magic else -1, k, v)
                               for i, (ts, k, v) in enumerate(PEER_RECORDS)]
        if codec == "none":
            ours = L.LegacyRecordsBuilder(magic, "none", 0, "create_time")
            for ts, k, v in PEER_RECORDS:
                ours.append(ts, k, v)
            assert ours.build() == raw  # byte-exact


@pytest.mark.parametrize("magic,codec", AIO_COMBOS)
def test_aiokafka_reads_what_we_build(L, magic, codec):
    ours = L.LegacyRecordsBuilder(magic, codec, 500, "create_time")
    for ts, k, v in PEER_RECORDS:
        ours.append(ts, k, v)
    raw = ours.build()
    from aiokafka.record.memory_records import MemoryRecords as AioMR

    mr = AioMR(raw)
    got = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        got.extend(_peer_iter(batch))
    assert got == [(500 + i, ts if magic else -1, k, v)
                   for i, (ts, k, v) in enumerate(PEER_RECORDS)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_round_trips(L, magic, codec):
    import kafka.codec

    if magic == 0 and codec == "lz4" and getattr(kafka.codec, "xxhash", None) is None:
        pytest.skip("kafka-python's magic-0 lz4 (old Kafka framing) needs the xxhash package")
    # kafka-python builds -> we read
    bld = kp_legacy.LegacyRecordBatchBuilder(magic, AIO_CODEC[codec], 1 << 20)
    for i, (ts, k, v) in enumerate(PEER_RECORDS):
        bld.append(i, ts, k, v)
    raw = bytes(bld.build())
    got = [r for b in walk(L, raw) for r in b]
    assert fields(got) == [(i, ts if magic else -1, k, v)
                           for i, (ts, k, v) in enumerate(PEER_RECORDS)]
    # we build -> kafka-python reads
    ours = L.LegacyRecordsBuilder(magic, codec, 300, "create_time")
    for ts, k, v in PEER_RECORDS:
        ours.append(ts, k, v)
    out = ours.build()
    if codec == "none":
        ref = kp_legacy.LegacyRecordBatchBuilder(magic, 0, 1 << 20)
        for i, (ts, k, v) in enumerate(PEER_RECORDS):
            ref.append(300 + i, ts, k, v)
        assert bytes(ref.build()) == out  # byte-exact
    from kafka.record.memory_records import MemoryRecords as KpMR

    mr = KpMR(out)
    seen = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        seen.extend(_peer_iter(batch))
    assert seen == [(300 + i, ts if magic else -1, k, v)
                    for i, (ts, k, v) in enumerate(PEER_RECORDS)]


def test_aiokafka_reads_log_append_time_wrapper(L):
    ours = L.LegacyRecordsBuilder(1, "gzip", 10, "log_append_time", log_append_time=1234)
    for ts, k, v in PEER_RECORDS[:3]:
        ours.append(ts, k, v)
    batch = aiokafka_legacy.LegacyRecordBatch(ours.build(), 1)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in batch] == [
        (10, 1234, 1), (11, 1234, 1), (12, 1234, 1)]


def test_gzip_value_is_a_standard_gzip_stream(L):
    ours = L.LegacyRecordsBuilder(1, "gzip", 0, "create_time")
    ours.append(1, b"k", b"v")
    w = L.LegacyRecordBatch(ours.build())
    inner = gzip.decompress(w.wrapper.value)
    assert inner == entry(0, 1, 0, b"k", b"v", 1)


# ----------------------------------------------------------------------------------------------
# C CRC-32 (compiled twin): table path and PCLMULQDQ path against zlib
# ----------------------------------------------------------------------------------------------
def test_crc32_matches_zlib(L):
    rng = random.Random(3)
    data = bytes(rng.randrange(256) for _ in range(5000))
    for start in range(0, 17):
        for n in list(range(0, 200)) + [255, 256, 257, 1000, 4096, 4983 - start]:
            chunk = data[start : start + n]
            seed = (n * 2654435761) & 0xFFFFFFFF
            want = zlib.crc32(chunk, seed)
            assert L._crc32(chunk, seed) == want
            assert L._crc32(chunk, seed, software=True) == want
    assert L._crc32(b"123456789") == 0xCBF43926


# ----------------------------------------------------------------------------------------------
# int64 edges: no overflow in either twin, the same answers
# ----------------------------------------------------------------------------------------------
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def test_extreme_offsets_in_builder(L):
    b = L.LegacyRecordsBuilder(1, "gzip", I64_MIN, "create_time")
    with pytest.raises(InvalidOffsetError):
        b.append_with_offset(I64_MAX, 1, b"k", b"v")  # relative offset would not fit an int64
    b.append_with_offset(-1, 1, b"k", b"v")
    u = L.LegacyRecordsBuilder(1, "none", I64_MIN, "create_time")
    u.append_with_offset(I64_MIN, 1, b"a", b"v")
    u.append_with_offset(I64_MAX, 1, b"b", b"v")
    assert [r.offset for b_ in walk(L, u.build()) for r in b_] == [I64_MIN, I64_MAX]


@pytest.mark.parametrize(
    "wrapper_offset,inner_offsets",
    [
        (I64_MAX, [I64_MIN, -5]),      # base does not fit an int64, the results do
        (I64_MAX, [-5, -3]),           # rebased past INT64_MAX
        (5, [I64_MIN, 0]),
        (I64_MAX, [0, 1]),
        (-1, [-7, -3]),                # negative wrapper offset below the last inner one
        (-1, [-7, -1]),
    ],
)
def test_negative_inner_offsets(L, wrapper_offset, inner_offsets):
    inner = b"".join(entry(o, 1, 0, b"k", b"v", 1) for o in inner_offsets)
    raw = wrapper(wrapper_offset, 1, 1, inner, timestamp=1)
    got = outcome(lambda: [r.offset for r in L.LegacyRecordBatch(raw)])
    base = wrapper_offset - inner_offsets[-1]
    want = [o + base for o in inner_offsets]
    if wrapper_offset < inner_offsets[-1]:
        assert got[1][0] == "InvalidRecordError" and "invalid wrapper offset" in got[1][1]
    elif any(w > I64_MAX for w in want):
        assert got[1][0] == "InvalidRecordError" and "overflows" in got[1][1]
    else:
        assert got == (want, None)
    for other in twins():
        assert outcome(lambda: [r.offset for r in other.LegacyRecordBatch(raw)]) == got


@pytest.mark.parametrize("magic", [0, 1])
def test_next_offset_after_long_max_wraps_like_java(magic):
    """After an entry at Long.MAX_VALUE the next offset wraps (a Java long), so the monotonic
    check refuses it with Kafka's message, in both twins (the pure one once said the offset
    could not be stored relative to the base offset)."""
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.errors import InvalidOffsetError

    b = MemoryRecordsBuilder(magic, "none", 0)
    b.append_with_offset(2**63 - 1, 0, None, None)
    for append in (b.append, b.try_append):
        with pytest.raises(InvalidOffsetError,
                           match=r"^Illegal offset -9223372036854775808 following "
                                                      r"previous offset 9223372036854775807"):
            append(0, None, None)
