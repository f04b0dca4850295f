"""The twins agree: hypothesis drives the pure (``_batch_py``/``_varint_py``) and compiled
(``_batch``/``_varint``) modules with the same input and requires the same result, or the same
error (class, message, position, offset).  Damaged input may only ever raise kafkalog errors.
Cross-checks: aiokafka's and kafka-python's v2 builders and decoders agree with kafkalog."""
from __future__ import annotations

import importlib
import os
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalog import compression
from kafkalog._format import CompressionType
from kafkalog.errors import CorruptRecordError, KafkaLogError

# kafka-python's own import-time deprecation warnings are not ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
TS = 1700000000000

P = importlib.import_module("kafkalog._batch_py")
PV = importlib.import_module("kafkalog._varint_py")
if PURE:
    # Pure-only run: the twins are compared in the default run; here the pure twin is still
    # fuzzed (against itself) so that it never raises anything but kafkalog errors.
    C, CV = P, PV
else:
    C = importlib.import_module("kafkalog._batch")     # an ImportError fails the module
    CV = importlib.import_module("kafkalog._varint")

FUZZ = settings(max_examples=int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", 200)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CODECS = ["none"] + [c for c in ("gzip", "snappy", "lz4", "zstd")
                     if compression.available(CompressionType.parse(c))]


def test_compiled_twins_loaded():
    if not PURE:
        assert C.__name__ == "kafkalog._batch" and C.__file__.endswith((".so", ".pyd"))
        assert CV.__file__.endswith((".so", ".pyd"))


# -- outcomes -------------------------------------------------------------------------------------
def attempt(fn):
    """("ok", value) or ("err", class, message, position, offset); a non-kafkalog error fails."""
    try:
        return ("ok", fn())
    except KafkaLogError as e:
        return ("err", type(e).__name__, e.message, e.position, e.offset)
    except Exception as e:  # pragma: no cover - a parity failure
        raise AssertionError(
            f"non-kafkalog error from damaged input: {type(e).__name__}: {e}") from e


def rec_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


def batch_facts(b):
    if b.magic != 2:
        # A legacy entry (the legacy twins have their own parity tests): where and what.
        return ("legacy", b.magic, getattr(b, "position", None))
    return (
        b.position, b.base_offset, b.length, b.partition_leader_epoch, b.magic, b.crc,
        b.attributes, b.last_offset_delta, b.base_timestamp, b.max_timestamp, b.producer_id,
        b.producer_epoch, b.base_sequence, b.records_count, b.compute_checksum(), b.is_valid(),
        b.last_offset, b.next_offset, b.size_in_bytes, int(b.timestamp_type), b.is_transactional,
        b.is_control_batch, b.has_delete_horizon, b.delete_horizon_ms, b.last_sequence,
        b.has_producer_id, len(b), bytes(b.view()),
        attempt(lambda: int(b.compression_type)),
        attempt(b.ensure_valid),
        attempt(lambda: rec_tuples(b.records())),
        attempt(lambda: rec_tuples(b)),
    )


def walk(mod, buf, check_crcs=True, max_batch_size=None):
    """Everything a consumer can learn from ``buf`` with twin ``mod``."""
    seen = []

    def run():
        mr = mod.MemoryRecords(buf, check_crcs=check_crcs, max_batch_size=max_batch_size)
        for b in mr:
            seen.append(batch_facts(b))
        return mr.valid_bytes, mr.truncated_bytes, mr.size_in_bytes

    def validate_by_objects():
        # validate()'s definition: iterate the batches and check each one's CRC
        mr = mod.MemoryRecords(buf, max_batch_size=max_batch_size)
        n = 0
        for b in mr:
            b.ensure_valid()
            n += 1
        return n

    res = attempt(run)
    validated = attempt(lambda: mod.MemoryRecords(buf, max_batch_size=max_batch_size).validate())
    # the compiled validate() walks runs of sound v2 batches without batch objects: it must
    # agree with the definition, error for error
    assert validated == attempt(validate_by_objects)
    return seen, res, validated, attempt(lambda: mod.MemoryRecords(buf).valid_bytes)


def assert_same_walk(buf, **kw):
    a, b = walk(P, buf, **kw), walk(C, buf, **kw)
    assert a == b
    return a


# -- strategies -----------------------------------------------------------------------------------
header = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16))
record = st.tuples(
    st.integers(-(10**6), 10**6),                      # timestamp, relative to TS
    st.none() | st.binary(max_size=24),                # key
    st.none() | st.binary(max_size=120),               # value
    st.lists(header, max_size=3),                      # headers
    st.integers(1, 3),                                 # offset step
)
batch_spec = st.fixed_dictionaries({
    "records": st.lists(record, min_size=1, max_size=20),
    "codec": st.sampled_from(CODECS + ["none"] * 3),
    "timestamp_type": st.sampled_from(["create_time", "create_time", "log_append_time"]),
    "producer": st.sampled_from([(-1, -1, -1), (1000, 5, 0), (7, 0, 2**31 - 3)]),
    "txn": st.booleans(),
    "control": st.booleans(),
    "delete_horizon": st.none() | st.integers(0, 2**45),
    "leader_epoch": st.integers(-1, 100),
})


def build_with(mod, spec, base_offset):
    pid, epoch, seq = spec["producer"]
    b = mod.MemoryRecordsBuilder(
        2, spec["codec"], base_offset, spec["timestamp_type"], pid, epoch, seq,
        spec["txn"] and pid >= 0, spec["leader_epoch"], is_control_batch=spec["control"],
        log_append_time=TS + 123456, delete_horizon_ms=spec["delete_horizon"],
    )
    offset = base_offset
    expected = []
    for ts, key, value, headers, step in spec["records"]:
        b.append_with_offset(offset, TS + ts, key, value, headers)
        expected.append((offset, TS + ts, key, value, tuple(headers)))
        offset += step
    return b.build(), expected, offset


def build_log(mod, specs):
    out, expected, offset = [], [], 0
    for spec in specs:
        raw, exp, offset = build_with(mod, spec, offset)
        out.append(raw)
        expected.append((spec, exp))
    return b"".join(out), expected


logs = st.lists(batch_spec, min_size=1, max_size=4)


# -- build -> decode round trip, both twins, both directions ------------------------------------
@FUZZ
@given(logs)
def test_round_trip(specs):
    raw_p, expected = build_log(P, specs)
    raw_c, _ = build_log(C, specs)
    assert raw_p == raw_c
    for mod in (P, C):
        batches = list(mod.MemoryRecords(raw_p))
        assert len(batches) == len(specs)
        for bt, (spec, exp) in zip(batches, expected):
            assert bt.is_valid()
            if spec["timestamp_type"] == "log_append_time":
                exp = [(o, TS + 123456, k, v, hd) for o, _, k, v, hd in exp]
            assert rec_tuples(bt) == exp
            assert bt.is_control_batch == spec["control"]
            assert bt.delete_horizon_ms == spec["delete_horizon"]
    assert_same_walk(raw_p)


# -- damaged input: same outcome, only kafkalog errors --------------------------------------------
@FUZZ
@given(logs, st.data())
def test_truncated(specs, data):
    raw, _ = build_log(P, specs)
    cut = data.draw(st.integers(0, len(raw)))
    assert_same_walk(raw[:cut])


@FUZZ
@given(logs, st.data(), st.booleans())
def test_bit_flips(specs, data, check_crcs):
    raw = bytearray(build_log(P, specs)[0])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= 1 << data.draw(st.integers(0, 7))
    assert_same_walk(bytes(raw), check_crcs=check_crcs)


@FUZZ
@given(logs, st.data())
def test_spliced_garbage(specs, data):
    raw = build_log(P, specs)[0]
    i = data.draw(st.integers(0, len(raw)))
    j = data.draw(st.integers(i, len(raw)))
    junk = data.draw(st.binary(max_size=64))
    assert_same_walk(raw[:i] + junk + raw[j:], check_crcs=data.draw(st.booleans()))


@FUZZ
@given(logs, st.data())
def test_record_bytes_rewritten_with_valid_crc(specs, data):
    # Damage inside the records section, with the CRC fixed up: the record parser must cope.
    import struct

    from kafkalog._crc_py import crc32c

    raw = bytearray(build_log(P, specs[:1])[0])
    assume(len(raw) > 61 and raw[22] & 0x07 == 0)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(61, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        struct.pack_into(">i", raw, 57, data.draw(st.integers(-2, 2**31 - 1)))
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    assert_same_walk(bytes(raw))


@FUZZ
@given(st.binary(max_size=400), st.booleans())
def test_random_garbage(junk, check_crcs):
    assert_same_walk(junk, check_crcs=check_crcs)
    assert_same_walk(junk, check_crcs=check_crcs, max_batch_size=200)


@FUZZ
@given(st.binary(min_size=0, max_size=200),
       st.sampled_from([b"", b"\x00" * 8 + b"\x00\x00\x00\x31"]))
def test_garbage_behind_a_v2_header(junk, prefix):
    # A header that says "v2" in front of random bytes: the batch and record parsers see it all.
    import struct

    body = struct.pack(">ib", 0, 2) + junk
    raw = struct.pack(">qi", 0, len(body)) + body
    assert_same_walk(prefix[:0] + raw, check_crcs=False)
    assert_same_walk(raw[: len(raw) // 2], check_crcs=False)


@FUZZ
@given(st.binary(max_size=120), st.integers(0, 130))
def test_record_batch_constructor_parity(junk, pos):
    a = attempt(lambda: batch_facts(P.RecordBatch(junk, pos, check_crc=False)))
    b = attempt(lambda: batch_facts(C.RecordBatch(junk, pos, check_crc=False)))
    assert a == b


# -- varints --------------------------------------------------------------------------------------
@FUZZ
@given(st.binary(max_size=16), st.integers(0, 18))
def test_varint_parity(raw, pos):
    for name in ("read_varint", "read_varlong", "read_unsigned_varint"):
        a = attempt(lambda: getattr(PV, name)(raw, pos))
        b = attempt(lambda: getattr(CV, name)(raw, pos))
        assert a == b, name


@FUZZ
@given(st.integers(-(2**64), 2**64))
def test_varint_write_parity(v):
    for name in ("write_varint", "write_varlong", "write_unsigned_varint", "size_of_varint",
                 "size_of_varlong", "size_of_unsigned_varint"):
        def run(mod):
            try:
                return ("ok", getattr(mod, name)(v))
            except (ValueError, TypeError) as e:
                return ("err", type(e).__name__, str(e))

        a, b = run(PV), run(CV)
        assert a == b, name
        if a[0] == "ok" and name.startswith("write"):
            read = {"write_varint": "read_varint", "write_varlong": "read_varlong",
                    "write_unsigned_varint": "read_unsigned_varint"}[name]
            assert getattr(CV, read)(a[1]) == (v, len(a[1]))


# -- builder decisions ----------------------------------------------------------------------------
def arg_outcome(fn):
    try:
        return ("ok", fn())
    except (KafkaLogError, ValueError, TypeError) as e:
        return ("err", type(e).__name__, str(e))


odd_value = st.sampled_from(["text", 5, bytearray(b"ba"), memoryview(b"mv")])
op = st.tuples(
    st.sampled_from(["append", "try_append", "has_room_for", "append_with_offset"]),
    st.integers(-3, 2**20) | st.sampled_from([-1, -2, 2**63, 1.5]),
    st.none() | st.binary(max_size=300) | odd_value,
    st.none() | st.binary(max_size=300) | odd_value,
    st.lists(st.tuples(st.text(max_size=5) | st.binary(max_size=3),
                       st.none() | st.binary(max_size=8) | odd_value), max_size=3),
    st.integers(0, 5),
)


@FUZZ
@given(st.lists(op, max_size=25), st.none() | st.integers(0, 3000),
       st.sampled_from(["none", "gzip"]),
       st.none() | st.integers(0, 2**40))
def test_builder_parity(ops, write_limit, codec, horizon):
    bp = P.MemoryRecordsBuilder(compression_type=codec, base_offset=10, write_limit=write_limit,
                                delete_horizon_ms=horizon)
    bc = C.MemoryRecordsBuilder(compression_type=codec, base_offset=10, write_limit=write_limit,
                                delete_horizon_ms=horizon)
    next_offset = 10
    for name, ts, key, value, headers, gap in ops:
        if name == "append_with_offset":
            args = (next_offset + gap - 1, ts, key, value, headers)
        else:
            args = (ts if isinstance(ts, float) else TS + ts if ts >= 0 else ts, key, value,
                    headers)
        a = arg_outcome(lambda: getattr(bp, name)(*args))
        b = arg_outcome(lambda: getattr(bc, name)(*args))
        assert a == b, (name, args)
        assert bp.records_count == bc.records_count
        assert bp.estimated_size_in_bytes() == bc.estimated_size_in_bytes()
        if a[0] == "ok" and name == "append_with_offset":
            next_offset = args[0] + 1
        elif a[0] == "ok" and name in ("append", "try_append") and a[1] is not None:
            next_offset = a[1] + 1
    assert bp.build() == bc.build()


@FUZZ
@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
       st.none() | st.binary(max_size=40),
       st.none() | st.binary(max_size=40), st.lists(header, max_size=4))
def test_record_helpers_parity(off, ts, key, value, headers):
    for name, args in (("encode_record_body", (off, ts, key, value, headers)),
                       ("record_size", (off, ts, key, value, headers)),
                       ("record_size_upper_bound", (key, value, headers))):
        assert getattr(P, name)(*args) == getattr(C, name)(*args), name
    assert C.record_size(off, ts, key, value,
                         headers) == len(C.encode_record_body(off, ts, key, value, headers))


# -- peers: aiokafka and kafka-python
# ----------------------------------------------------------------
peer_header = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16))
peer_records = st.lists(
    st.tuples(st.integers(0, 10**6), st.none() | st.binary(max_size=30),
              st.none() | st.binary(max_size=60),
              st.lists(peer_header, max_size=3)),
    min_size=1, max_size=25,
)


def peer_builders():
    from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

    return {"aiokafka": AioBuilder, "kafka-python": KpBuilder}


def peer_decode(name, raw):
    if name == "aiokafka":
        from aiokafka.record import MemoryRecords

        mr, out = MemoryRecords(raw), []
        while mr.has_next():
            out.extend(mr.next_batch())
    else:
        from kafka.record import MemoryRecords

        mr, out = MemoryRecords(raw), []
        while True:
            bt = mr.next_batch()
            if bt is None:
                break
            out.extend(bt)
    return [(r.offset, r.timestamp, r.key, r.value,
             tuple(tuple(h) for h in r.headers)) for r in out]


@pytest.mark.parametrize("peer", ["aiokafka", "kafka-python"])
@settings(max_examples=100, deadline=None)
@given(recs=peer_records)
def test_peer_batches_decode_identically(peer, recs):
    builder = peer_builders()[peer](2, 0, 0, -1, -1, -1, 1 << 24)
    for i, (ts, k, v, hd) in enumerate(recs):
        assert builder.append(i, TS + ts, k, v, hd) is not None
    raw = bytes(builder.build())
    expected = [(i, TS + ts, k, v, tuple(hd)) for i, (ts, k, v, hd) in enumerate(recs)]
    assert peer_decode(peer, raw) == expected
    for mod in (P, C):
        [bt] = list(mod.MemoryRecords(raw))
        assert bt.is_valid()
        assert rec_tuples(bt) == expected
    # and kafkalog writes the same bytes (aiokafka writes partition leader epoch -1)
    ours = P.MemoryRecordsBuilder(partition_leader_epoch=-1 if peer == "aiokafka" else 0)
    theirs = C.MemoryRecordsBuilder(partition_leader_epoch=-1 if peer == "aiokafka" else 0)
    for ts, k, v, hd in recs:
        ours.append(TS + ts, k, v, hd)
        theirs.append(TS + ts, k, v, hd)
    assert ours.build() == theirs.build() == raw


@pytest.mark.parametrize("peer", ["aiokafka", "kafka-python"])
@settings(max_examples=100, deadline=None)
@given(recs=peer_records, codec=st.sampled_from(CODECS), base=st.integers(0, 2**40))
def test_kafkalog_batches_decode_identically_with_peers(peer, recs, codec, base):
    if codec == "lz4" and peer == "kafka-python":
        pytest.importorskip("lz4")
    b = C.MemoryRecordsBuilder(compression_type=codec, base_offset=base)
    for ts, k, v, hd in recs:
        b.append(TS + ts, k, v, hd)
    raw = b.build()
    expected = [(base + i, TS + ts, k, v, tuple(hd)) for i, (ts, k, v, hd) in enumerate(recs)]
    assert peer_decode(peer, raw) == expected
    assert rec_tuples(P.MemoryRecords(raw).records()) == expected


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 10**6),
                          st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=200),
                          st.sampled_from([None, (), [], [("h", b"v")]]),
                          st.sampled_from(["same", "ts", "key", "value", "headers", "copy"])),
                max_size=40),
       st.integers(61, 2000))
def test_has_room_for_then_append_parity(steps, write_limit):
    # Kafka's producer pattern: has_room_for(record) then append(record) - with the same
    # objects, or with one argument changed in between.
    bp = P.MemoryRecordsBuilder(write_limit=write_limit)
    bc = C.MemoryRecordsBuilder(write_limit=write_limit)
    for n_checks, ts, key, value, headers, change in steps:
        args = [TS + ts if ts >= 0 else ts, key, value, headers]
        for _ in range(n_checks):
            assert arg_outcome(lambda: bp.has_room_for(*args)) == arg_outcome(
                lambda: bc.has_room_for(*args))
        if change == "ts":
            args[0] = TS + ts + 1
        elif change == "key":
            args[1] = (key or b"") + b"!"
        elif change == "value":
            args[2] = None if value else b"v"
        elif change == "headers":
            args[3] = [("x", None)]
        elif change == "copy":
            args[1] = None if key is None else bytes(bytearray(key))
            args[2] = None if value is None else bytearray(value)
        assert arg_outcome(lambda: bp.append(*args)) == arg_outcome(lambda: bc.append(*args))
        assert bp.estimated_size_in_bytes() == bc.estimated_size_in_bytes()
    assert bp.build() == bc.build()


LEGACY_VALUES = st.sampled_from([None, b"", b"k", b"v" * 300, bytearray(b"ba"), "str", 7])
LEGACY_INTS = st.sampled_from([0, 1, 5, -1, -2, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, True, 1.5,
                               "1"])


@FUZZ
@given(st.sampled_from([0, 1]), st.sampled_from(["none", "gzip"]),
       st.sampled_from([None, 0, 40, 200, 2**63, -5]), st.integers(0, 3),
       st.lists(st.tuples(st.sampled_from(["try", "append", "at"]),
                          LEGACY_INTS | st.integers(0, 10**6),
                          LEGACY_INTS, LEGACY_VALUES, LEGACY_VALUES,
                          st.sampled_from([(), None, [("h", b"v")]])), max_size=25))
def test_legacy_try_append_parity(magic, codec, write_limit, base, steps):
    # the compiled MemoryRecordsBuilder.try_append on magic 0/1 takes a fused path in the legacy
    # builder: it must behave as has_room_for then append (the pure twin), value for value and
    # error for error, and build the same bytes
    bp = P.MemoryRecordsBuilder(magic, codec, base, write_limit=write_limit) \
        if write_limit is None or write_limit >= 0 else None
    if bp is None:
        return
    bc = C.MemoryRecordsBuilder(magic, codec, base, write_limit=write_limit)
    for op, offset, ts, key, value, headers in steps:
        if op == "try":
            call = lambda b: b.try_append(ts, key, value, headers)  # noqa: E731
        elif op == "append":
            call = lambda b: b.append(ts, key, value, headers)  # noqa: E731
        else:
            call = lambda b: b.append_with_offset(offset, ts, key, value, headers)  # noqa: E731
        assert arg_outcome(lambda: call(bp)) == arg_outcome(lambda: call(bc))
        assert bp.estimated_size_in_bytes() == bc.estimated_size_in_bytes()
    assert arg_outcome(lambda: bp.build()) == arg_outcome(lambda: bc.build())


LP = importlib.import_module("kafkalog._legacy_py")


def legacy_facts(b):
    return (b.position, b.offset, b.length, b.crc, b.magic, b.attributes, b.timestamp,
            attempt(lambda: [(r.offset, r.timestamp, r.key, r.value, r.crc, r.attributes)
                             for r in b.records()]))


def test_a_legacy_entry_whose_magic_flips_to_2_reads_as_a_v2_batch_not_a_legacy_one():
    # the case the fuzz test below once drew: a 61-byte v0 gzip entry with its magic byte
    # flipped to 2 frames as a v2 batch (61 bytes is the v2 header), so the walk yields a v2
    # batch when CRCs are not checked, and the legacy constructor refuses the entry
    b = P.MemoryRecordsBuilder(0, "gzip", 0)
    b.append(TS, None, b"")
    raw = bytearray(b.build())
    raw[16] ^= 2
    raw = bytes(raw)
    batches = list(P.MemoryRecords(raw, check_crcs=False))
    assert [(x.position, x.magic) for x in batches] == [(0, 2)]
    with pytest.raises(CorruptRecordError, match="Invalid magic 2 for a legacy"):
        LP.LegacyRecordBatch(raw, 0, check_crc=False)


@FUZZ
@given(st.sampled_from([0, 1]), st.sampled_from(["none", "none", "gzip"]),
       st.lists(st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=60)),
                min_size=1, max_size=8),
       st.data(), st.booleans())
def test_pure_memory_records_legacy_entries_equal_the_constructor(magic, codec, recs, data, check):
    # the pure MemoryRecords builds legacy batches through a constructor that skips the header
    # checks it has already made: every batch must equal LegacyRecordBatch(buffer, position)
    b = P.MemoryRecordsBuilder(magic, codec, 0)
    for k, v in recs:
        b.append(TS, k, v)
    raw = bytearray(b.build())
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    raw = bytes(raw)
    seen = []

    def run():
        for batch in P.MemoryRecords(raw, check_crcs=check):
            direct = attempt(lambda: LP.LegacyRecordBatch(raw, batch.position, check_crc=check))
            if batch.magic == 2:
                # a flipped magic byte made the entry a v2 batch that frames (its CRC unchecked
                # here): the walk reads it as one, and the legacy constructor refuses it
                assert direct[:3] == ("err", "CorruptRecordError",
                                      "Invalid magic 2 for a legacy (v0/v1) message"), direct
                seen.append(batch.position)
                continue
            assert direct[0] == "ok", direct
            assert legacy_facts(batch) == legacy_facts(direct[1])
            seen.append(batch.position)
    outcome = attempt(run)
    # an entry the constructor refuses is refused by the walk with the same error
    if outcome[0] == "err" and outcome[3] is not None:
        pos = outcome[3]
        if pos not in seen and pos + 17 <= len(raw) and raw[pos + 16] in (0, 1):
            assert attempt(lambda: LP.LegacyRecordBatch(raw, pos,
                                                        check_crc=check))[:3] == outcome[:3]


@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 7), st.integers(-3, 3)),
                min_size=0, max_size=12),
       st.data())
@FUZZ
def test_walk_frames_twins_agree(entries, data):
    """The read model's framing walk (``walk_frames``): the twins stop at the same entry with the
    same offset, over runs of entries of every magic with sizes, offsets and bytes bent."""
    buf = bytearray()
    off = data.draw(st.integers(-2, 2**63 - 1 - 100))
    for magic, records, bend in entries:
        if magic == 2:
            body = bytearray(61 - 12 + 10 * records)
            body[4] = 2
            struct.pack_into(">i", body, 23 - 12, max(records - 1, 0))
        else:
            body = bytearray(14 + 10 * records)
            body[4] = magic
        size = len(body) + bend * data.draw(st.sampled_from([0, 1, 7, 2**31 - 1 - len(body)]))
        buf += struct.pack(">qI", off, size % 2**32) + body  # any 32-bit size, negative too
        # offsets that follow on, jump (a gap, or a damaged field) or go back
        off += records + 1 + data.draw(st.sampled_from([0, 0, 0, 5, -3]))
    n = data.draw(st.integers(0, len(buf)))
    p = data.draw(st.integers(0, n))
    left = data.draw(st.integers(n - p, len(buf) + 20))
    end = data.draw(st.sampled_from([-1, 0, off // 2 if off > 0 else 0, off, 2**62]))
    max_size = data.draw(st.sampled_from([2**31 - 1, 100, 14]))
    seen = data.draw(st.sampled_from([0, max(off // 3, 0), data.draw(st.integers(0, 2**40))]))
    gaps = data.draw(st.booleans())  # stop where a jump is contradicted by the entry after it
    for b in (bytes(buf), memoryview(bytes(buf))):
        assert C.walk_frames(b, p, n, left, end, max_size, seen, gaps) == \
            P.walk_frames(b, p, n, left, end, max_size, seen, gaps)
    got_p, _seen = P.walk_frames(bytes(buf), p, n, left, end, max_size, seen)
    assert p <= got_p <= n
    with pytest.raises(ValueError):
        C.walk_frames(bytes(buf), 0, len(buf) + 1, left, end, max_size, seen)
    with pytest.raises(ValueError):
        P.walk_frames(bytes(buf), 0, len(buf) + 1, left, end, max_size, seen)


def test_walk_frames_judges_a_jump_by_the_entry_after_it():
    """With ``stop_at_gaps`` the walk takes a gap whose next entry goes on above it (compaction
    leaves such gaps) and stops at a jump the next entry contradicts (a damaged offset field),
    or whose next entry it cannot see: the read model judges those (gap_is_damage)."""

    def entry(off):
        body = bytearray(61 - 12)
        body[4] = 2
        return struct.pack(">qI", off, len(body)) + bytes(body)  # one record: last = off

    one = len(entry(0))
    gapped = entry(0) + entry(5) + entry(9) + entry(10)  # gaps after 0 and 5: taken
    jumped = entry(0) + entry(7) + entry(2)  # 7 jumps, 2 goes on from below it: stop at 7
    for twin in (C, P):
        assert twin.walk_frames(gapped, 0, len(gapped), len(gapped), -1, 2**31 - 1, 0, True) \
            == (4 * one, 11)
        assert twin.walk_frames(jumped, 0, len(jumped), len(jumped), -1, 2**31 - 1, 0, True) \
            == (one, 1)
        # the next entry not in the buffer: stop at the jump, the caller reads on to judge it
        assert twin.walk_frames(gapped, 0, 2 * one, 3 * one, -1, 2**31 - 1, 0, True) \
            == (one, 1)
        # without stop_at_gaps only offsets going back stop it
        assert twin.walk_frames(jumped, 0, len(jumped), len(jumped), -1, 2**31 - 1, 0) \
            == (2 * one, 8)
