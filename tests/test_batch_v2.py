"""Record batches, magic v2, and the walk over log entries: both twins, byte-exact vectors,
every header field, flags, malformed input (never anything but kafkalog errors), buffers."""
from __future__ import annotations

import importlib
import mmap
import os
import pickle
import struct

import pytest

from kafkalog import compression
from kafkalog._crc_py import crc32c
from kafkalog._format import CompressionType, TimestampType
from kafkalog.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    InvalidOffsetError,
    KafkaLogError,
    RecordTooLargeError,
)

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
TS = 1700000000000
INT32_MAX = 2**31 - 1


@pytest.fixture(params=["pure", "compiled"])
def twin(request):
    """``kafkalog._batch_py`` and ``kafkalog._batch``.  The compiled twin must import (an
    ImportError fails the test) unless KAFKALOG_PURE_PYTHON=1 asks for a pure-only run."""
    if request.param == "pure":
        return importlib.import_module("kafkalog._batch_py")
    if PURE:
        pytest.skip("KAFKALOG_PURE_PYTHON=1: pure-only run")
    return importlib.import_module("kafkalog._batch")


def h(s: str) -> bytes:
    return bytes.fromhex("".join(s.split()))


def recompute_crc(buf: bytearray, pos: int = 0) -> None:
    """Refresh the CRC of the v2 batch at ``pos`` after a test has edited it."""
    length = struct.unpack_from(">i", buf, pos + 8)[0]
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))


def rec_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


# ==============================================================================================
# Byte-exact vectors (spec section 18)
# ==============================================================================================
V76 = h("""
    0000000000000000 00000040 00000000 02 db5e9cdd 0000 00000000 0000018bcfe56800 0000018bcfe56800
    ffffffffffffffff ffff ffffffff 00000001  1c 00 00 00 06 6b6579 0a 76616c7565 00""")
COMMIT_78 = h("""
    000000000000000a 00000042 00000003 02 40d514e9 0030 00000000 0000018bcfe56800 0000018bcfe56800
    00000000000003e8 0005 ffffffff 00000001  20 00 00 00 08 00000001 0c 0000 00000007 00""")
STRIMZI_COMMIT = h("""
    0000000000000001 00000042 00000000 02 c84cc350 0030 00000000 000001873eac3de3 000001873eac3de3
    0000000000000000 0000 ffffffff 00000001  20 00 00 00 08 00000001 0c 000000000000 00""")
SNAPSHOT_HEADER = h("""
    0000000000000000 00000047 00000000 02 cb09f114 0020 00000000 00000180ff31c30d 00000180ff31c30d
    ffffffffffffffff ffff ffffffff 00000001
    2a 00 00 00 08 00000003 16 0000 0000000000002710 00 00""")
SARAMA_RECORD = h("28 00 0a 00 08 01020304 06 050607 02 06 08090a 04 0b0c")
SARAMA_EMPTY = h("""
    0000000000000000 00000031 00000000 02 595fb7dd 0000 00000000 0000000000000000 0000000000000000
    0000000000000000 0000 00000000 00000000""")
SARAMA_CONTROL_EMPTY = h("""
    0000000000000000 00000031 00000000 02 512e43d9 0020 00000000 0000000000000000 0000000000000000
    0000000000000000 0000 00000000 00000000""")


def sarama_batch(attributes: int, crc: str, section: bytes) -> bytes:
    """The sarama record_test.go batch around ``section`` (spec 18.1 b)."""
    length = 49 + len(section)
    return (struct.pack(">qiib", 0, length, 0, 2) + h(crc) + struct.pack(">hi", attributes, 0)
            + h("000001588dcd5938 0000000000000000 0000000000000000 0000 00000000 00000001")
            + section)


SARAMA_NONE = sarama_batch(0, "547961fd", SARAMA_RECORD)
SARAMA_GZIP = sarama_batch(1, "e74acea5", h("1f8b0800 00096e88 00ff 001500eaff") + SARAMA_RECORD
                           + h("0300 adc95867 15000000"))
SARAMA_SNAPPY = sarama_batch(2, "15009f61", h("15 50") + SARAMA_RECORD)
SARAMA_LZ4 = sarama_batch(3, "a94a77c5", h("04224d18 64 70 b9 15000080") + SARAMA_RECORD
                          + h("00000000 0c3bef92"))
SARAMA_EXPECTED = [(0, 1479847795005, b"\x01\x02\x03\x04", b"\x05\x06\x07",
                    (("\x08\t\n", b"\x0b\x0c"),))]


def test_76_byte_vector_built(twin):
    b = twin.MemoryRecordsBuilder()
    assert b.append(TS, b"key", b"value") == 0
    assert b.build() == V76


def test_76_byte_vector_decoded(twin):
    bt = twin.RecordBatch(V76)
    assert bt.crc == 3680410845 and bt.is_valid() and bt.compute_checksum() == 3680410845
    assert bt.size_in_bytes == 76 and bt.length == 64
    assert rec_tuples(bt) == [(0, TS, b"key", b"value", ())]


def test_commit_marker_vector(twin):
    b = twin.MemoryRecordsBuilder(
        base_offset=10, producer_id=1000, producer_epoch=5, is_transactional=True,
        partition_leader_epoch=3, is_control_batch=True,
    )
    b.append(TS, h("00000001"), h("0000 00000007"))
    assert b.build() == COMMIT_78
    bt = twin.RecordBatch(COMMIT_78)
    assert bt.crc == 1087706345 and bt.is_valid()
    assert (bt.is_control_batch, bt.is_transactional, bt.producer_id,
            bt.producer_epoch) == (True, True, 1000, 5)
    assert (bt.base_sequence, bt.last_sequence, bt.partition_leader_epoch) == (-1, -1, 3)
    assert rec_tuples(bt) == [(10, TS, h("00000001"), h("000000000007"), ())]


def test_real_broker_batches(twin):
    bt = twin.RecordBatch(STRIMZI_COMMIT)
    assert bt.crc == 3360473936 and bt.is_valid() and bt.size_in_bytes == 78
    assert rec_tuples(bt) == [(1, 1680383688163, h("00000001"), h("000000000000"), ())]
    bt = twin.RecordBatch(SNAPSHOT_HEADER)
    assert bt.crc == 3406426388 and bt.is_valid() and bt.size_in_bytes == 83
    assert bt.is_control_batch and not bt.is_transactional
    assert rec_tuples(bt) == [(0, 1653548892941, h("00000003"), h("0000 0000000000002710 00"), ())]


def test_sarama_empty_batches(twin):
    for raw, control in ((SARAMA_EMPTY, False), (SARAMA_CONTROL_EMPTY, True)):
        bt = twin.RecordBatch(raw)
        assert bt.is_valid() and bt.size_in_bytes == 61 and len(bt) == 0 and list(bt) == []
        assert bt.is_control_batch is control and bt.producer_id == 0 and bt.has_producer_id
        assert bt.records() == []


@pytest.mark.parametrize("raw,codec", [(SARAMA_NONE, "none"), (SARAMA_GZIP, "gzip"),
                                       (SARAMA_SNAPPY, "snappy"), (SARAMA_LZ4, "lz4")])
def test_sarama_record_with_headers_every_codec(twin, raw, codec):
    if codec != "none" and not compression.available(CompressionType.parse(codec)):
        pytest.skip(f"{codec} library not installed")
    bt = twin.RecordBatch(raw)
    assert bt.is_valid(), codec
    assert bt.compression_type == CompressionType.parse(codec)
    assert bt.max_timestamp == 0 and bt.base_timestamp == 1479847795000
    assert rec_tuples(bt) == SARAMA_EXPECTED


# ==============================================================================================
# Header fields and derived facts
# ==============================================================================================
def test_every_header_field(twin):
    b = twin.MemoryRecordsBuilder(
        2, "none", 1000, "create_time", producer_id=77, producer_epoch=3, base_sequence=40,
        is_transactional=True, partition_leader_epoch=9,
    )
    b.append_with_offset(1000, TS + 5, b"a", b"1")
    b.append_with_offset(1003, TS + 2, None, b"2")
    b.append_with_offset(1004, TS + 9, b"c", None, [("k", b"v"), ("n", None)])
    raw = b.build()
    bt = twin.RecordBatch(raw)
    assert bt.position == 0
    assert bt.base_offset == 1000
    assert bt.length == len(raw) - 12
    assert bt.size_in_bytes == len(raw)
    assert bt.partition_leader_epoch == 9
    assert bt.magic == 2
    assert bt.crc == struct.unpack_from(">I", raw, 17)[0] == bt.compute_checksum()
    assert bt.attributes == 0x10
    assert bt.last_offset_delta == 4
    assert bt.base_timestamp == TS + 5          # the first record's, not the minimum
    assert bt.max_timestamp == TS + 9
    assert bt.producer_id == 77 and bt.producer_epoch == 3 and bt.base_sequence == 40
    assert bt.records_count == 3 and len(bt) == 3
    assert bt.last_offset == 1004 and bt.next_offset == 1005
    assert bt.last_sequence == 44
    assert bt.compression_type is CompressionType.NONE
    assert bt.timestamp_type is TimestampType.CREATE_TIME
    assert bt.is_transactional and not bt.is_control_batch
    assert not bt.has_delete_horizon and bt.delete_horizon_ms is None
    assert bt.has_producer_id
    assert bytes(bt.view()) == raw
    assert bytes(bt.records_section()) == raw[61:]
    assert rec_tuples(bt) == [
        (1000, TS + 5, b"a", b"1", ()),
        (1003, TS + 2, None, b"2", ()),
        (1004, TS + 9, b"c", None, (("k", b"v"), ("n", None))),
    ]
    assert "base_offset=1000" in repr(bt) and "compression=none" in repr(bt)


def test_position_inside_a_larger_buffer(twin):
    raw = b"\xee" * 7 + V76 + b"\xdd" * 3
    bt = twin.RecordBatch(raw, 7)
    assert bt.position == 7 and bytes(bt.view()) == V76 and bt.is_valid()
    assert rec_tuples(bt) == [(0, TS, b"key", b"value", ())]


def test_sequence_wraps(twin):
    assert twin.increment_sequence(5, 5) == 10
    assert twin.increment_sequence(INT32_MAX, 1) == 0
    assert twin.increment_sequence(INT32_MAX - 5, 10) == 4
    b = twin.MemoryRecordsBuilder(producer_id=1, producer_epoch=0, base_sequence=INT32_MAX - 1)
    for i in range(4):
        b.append(TS, None, b"x")
    bt = twin.RecordBatch(b.build())
    assert bt.base_sequence == INT32_MAX - 1 and bt.last_sequence == 1


def test_log_append_time_reports_max_timestamp_for_every_record(twin):
    b = twin.MemoryRecordsBuilder(timestamp_type="log_append_time", log_append_time=TS + 777)
    for i in range(5):
        b.append(TS + i * 10, b"k%d" % i, b"v")
    bt = twin.RecordBatch(b.build())
    assert bt.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert bt.max_timestamp == TS + 777 and bt.base_timestamp == TS
    assert [r.timestamp for r in bt] == [TS + 777] * 5


def test_broker_sets_log_append_time_in_place(twin):
    # The broker flips the bit and max_timestamp and recomputes the CRC; deltas stay.
    b = twin.MemoryRecordsBuilder()
    for i in range(3):
        b.append(TS + i, b"k", b"v")
    raw = bytearray(b.build())
    struct.pack_into(">h", raw, 21, 0x08)
    struct.pack_into(">q", raw, 35, TS + 5000)
    recompute_crc(raw)
    bt = twin.RecordBatch(raw)
    assert bt.is_valid() and [r.timestamp for r in bt] == [TS + 5000] * 3


def test_delete_horizon(twin):
    horizon = TS + 86_400_000
    b = twin.MemoryRecordsBuilder(delete_horizon_ms=horizon)
    b.append(TS, b"k", None)      # a tombstone
    b.append(TS + 10, b"k2", b"v")
    bt = twin.RecordBatch(b.build())
    assert bt.has_delete_horizon and bt.delete_horizon_ms == horizon
    assert bt.base_timestamp == horizon and bt.attributes & 0x40
    assert rec_tuples(bt) == [(0, TS, b"k", None, ()), (1, TS + 10, b"k2", b"v", ())]


def test_control_and_transactional_flags(twin):
    for txn, control, attrs in ((False, False, 0), (True, False, 0x10), (False, True, 0x20),
                                (True, True, 0x30)):
        b = twin.MemoryRecordsBuilder(producer_id=5 if txn else -1, producer_epoch=1 if txn else -1,
                                      is_transactional=txn, is_control_batch=control)
        b.append(TS, h("00000000"), h("000000000001"))
        bt = twin.RecordBatch(b.build())
        assert (bt.is_transactional, bt.is_control_batch, bt.attributes) == (txn, control, attrs)


def test_memory_records_skips_control_batches_in_records(twin):
    data = twin.MemoryRecordsBuilder(base_offset=0).build()
    b = twin.MemoryRecordsBuilder(base_offset=0)
    b.append(TS, b"a", b"1")
    data = b.build() + COMMIT_78
    mr = twin.MemoryRecords(data)
    assert [bt.is_control_batch for bt in mr] == [False, True]
    assert rec_tuples(mr.records()) == [(0, TS, b"a", b"1", ())]


def test_unknown_codec_is_corrupt(twin):
    raw = bytearray(V76)
    struct.pack_into(">h", raw, 21, 0x07)
    recompute_crc(raw)
    bt = twin.RecordBatch(raw)
    with pytest.raises(CorruptRecordError, match="Unknown compression type id 7"):
        bt.compression_type
    with pytest.raises(CorruptRecordError, match="Unknown compression type id 7"):
        list(bt)
    assert "compression=7" in repr(bt)


def test_attribute_high_byte_ignored(twin):
    raw = bytearray(V76)
    struct.pack_into(">h", raw, 21, 0x7F00)
    recompute_crc(raw)
    bt = twin.RecordBatch(raw)
    assert bt.compression_type is CompressionType.NONE and not bt.is_transactional
    assert rec_tuples(bt) == [(0, TS, b"key", b"value", ())]


# ==============================================================================================
# Compression
# ==============================================================================================
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_round_trip(twin, codec):
    if not compression.available(CompressionType.parse(codec)):
        pytest.skip(f"{codec} library not installed")
    b = twin.MemoryRecordsBuilder(compression_type=codec)
    recs = [(TS + i, b"key-%d" % i, b"value-%d" % i * 5,
             [("h", b"%d" % i)] if i % 3 else ()) for i in range(200)]
    for ts, k, v, hd in recs:
        b.append(ts, k, v, hd)
    raw = b.build()
    bt = twin.RecordBatch(raw)
    assert bt.compression_type == CompressionType.parse(codec) and bt.is_valid()
    assert len(raw) < 61 + sum(len(k) + len(v) for _, k, v, _ in recs)
    assert rec_tuples(bt) == [(i, ts, k, v, tuple(hd)) for i, (ts, k, v, hd) in enumerate(recs)]


def test_decompression_errors_carry_the_batch_position(twin):
    # a gzip batch whose compressed section is garbage, at position 5 of the buffer
    b = twin.MemoryRecordsBuilder(base_offset=42, compression_type="gzip")
    b.append(TS, b"k", b"v" * 100)
    raw = bytearray(b.build())
    raw[70:80] = b"\x00" * 10
    recompute_crc(raw)
    mr = twin.MemoryRecords(b"\x00" * 0 + bytes(raw))
    with pytest.raises(CorruptRecordError) as ei:
        [list(bt) for bt in mr]
    assert ei.value.position == 0 and ei.value.offset == 42


def test_decompression_bomb_capped(twin):
    b = twin.MemoryRecordsBuilder(compression_type="gzip")
    b.append(TS, None, b"\x00" * 200_000)
    bt = twin.RecordBatch(b.build(), max_decompressed_size=1000)
    with pytest.raises(DecompressedSizeError) as ei:
        list(bt)
    assert ei.value.offset == 0


# ==============================================================================================
# MemoryRecords: the entry walk
# ==============================================================================================
def build(twin, n, base=0, **kw):
    b = twin.MemoryRecordsBuilder(base_offset=base, **kw)
    for i in range(n):
        b.append(TS + i, b"k%d" % i, b"v%d" % i)
    return b.build()


def test_truncated_tail_is_reported_not_raised(twin):
    a, b = build(twin, 3), build(twin, 2, base=3)
    for cut in range(1, len(b)):
        mr = twin.MemoryRecords(a + b[:cut])
        assert [bt.base_offset for bt in mr] == [0]
        assert mr.valid_bytes == len(a) and mr.truncated_bytes == cut
        assert mr.size_in_bytes == len(a) + cut
    mr = twin.MemoryRecords(a + b)
    assert mr.truncated_bytes == 0 and mr.valid_bytes == len(a) + len(b)
    assert [r.offset for r in mr.records()] == [0, 1, 2, 3, 4]


def test_empty_and_short_buffers(twin):
    for raw in (b"", b"\x00" * 17):
        mr = twin.MemoryRecords(raw)
        assert list(mr) == [] and mr.truncated_bytes == len(raw) and mr.validate() == 0


@pytest.mark.parametrize("size", [0, 13, -1, -(2**31)])
def test_entry_size_below_14_is_corrupt(twin, size):
    raw = bytearray(V76)
    struct.pack_into(">i", raw, 8, size)
    with pytest.raises(CorruptRecordError, match=f"Record size {size} is smaller than the minimum "
                       f"record overhead \\(14\\)") as ei:
        list(twin.MemoryRecords(raw))
    assert ei.value.position == 0 and ei.value.offset == 0
    with pytest.raises(CorruptRecordError):
        twin.MemoryRecords(raw).valid_bytes


def test_zero_filled_tail_is_corrupt(twin):
    mr = twin.MemoryRecords(V76 + b"\x00" * 100)
    it = iter(mr)
    assert next(it).base_offset == 0
    with pytest.raises(CorruptRecordError, match="Record size 0") as ei:
        next(it)
    assert ei.value.position == 76
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize("magic,shown", [(3, 3), (0x7F, 127), (0xFF, -1), (0x80, -128)])
def test_magic_above_2_is_corrupt(twin, magic, shown):
    raw = bytearray(V76)
    raw[16] = magic
    with pytest.raises(CorruptRecordError) as ei:
        list(twin.MemoryRecords(raw))
    assert ei.value.message == f"Invalid magic found in record: {shown}"
    with pytest.raises(CorruptRecordError, match=f"Invalid magic {shown} for a v2 record batch"):
        twin.RecordBatch(raw)


def test_max_batch_size(twin):
    raw = V76 + V76
    with pytest.raises(RecordTooLargeError,
                       match=r"Record size 64 exceeds the largest allowable message size \(63\)"):
        list(twin.MemoryRecords(raw, max_batch_size=63))
    assert len(list(twin.MemoryRecords(raw, max_batch_size=64))) == 2
    assert len(list(twin.MemoryRecords(raw, max_batch_size=2**80))) == 2
    with pytest.raises(TypeError):
        twin.MemoryRecords(raw, max_batch_size="64")


def test_v2_entry_smaller_than_its_header(twin):
    raw = bytearray(V76)
    struct.pack_into(">i", raw, 8, 40)   # >= 14, < 49
    with pytest.raises(CorruptRecordError,
                       match=r"the size 52 is smaller than the minimum allowed overhead 61"):
        list(twin.MemoryRecords(raw))


def test_bad_crc(twin):
    raw = bytearray(V76)
    raw[-2] ^= 0x01    # inside the value
    bt = twin.RecordBatch(raw)
    assert not bt.is_valid()
    with pytest.raises(CorruptRecordError, match=r"Record is corrupt \(stored crc = 3680410845, "
                       r"computed crc = \d+\)") as ei:
        bt.ensure_valid()
    assert ei.value.position == 0 and ei.value.offset == 0
    with pytest.raises(CorruptRecordError, match="Record is corrupt"):
        [list(b) for b in twin.MemoryRecords(raw)]
    with pytest.raises(CorruptRecordError, match="Record is corrupt"):
        twin.MemoryRecords(raw).validate()
    # without CRC checks the (still well-formed) record decodes
    assert [r.value for b in twin.MemoryRecords(raw, check_crcs=False) for r in b] == [b"valud"]
    assert [r.value for r in twin.RecordBatch(raw, check_crc=False)] == [b"valud"]


def test_leader_epoch_and_magic_are_outside_the_crc(twin):
    raw = bytearray(V76)
    struct.pack_into(">i", raw, 12, 12345)
    assert twin.RecordBatch(raw).is_valid()


def test_validate_counts_and_sets_valid_bytes(twin):
    data = build(twin, 3) + build(twin, 4, base=3) + V76[:30]
    mr = twin.MemoryRecords(data)
    assert mr.validate() == 2
    assert mr.truncated_bytes == 30


def test_mixed_magic_entries(twin):
    v1 = h("0000000000000005 00000018 39268c33 01 00 0000018bcfe56800 00000001 6b 00000001 76")
    mr = twin.MemoryRecords(v1 + V76 + v1)
    kinds = [(type(b).__name__, b.magic) for b in mr]
    assert [m for _, m in kinds] == [1, 2, 1]
    assert rec_tuples(mr.records()) == [(5, TS, b"k", b"v", ()), (0, TS, b"key", b"value", ()),
                                        (5, TS, b"k", b"v", ())]
    assert mr.validate() == 3


# ==============================================================================================
# Malformed records: only CorruptRecordError, never a crash or a big allocation
# ==============================================================================================
def batch_with_records(section: bytes, count: int, attributes: int = 0) -> bytes:
    """A valid-CRC v2 batch around an arbitrary records section."""
    raw = bytearray(struct.pack(">qiibIhiqqqhii", 0, 49 + len(section), 0, 2, 0, attributes, 0,
                                TS, TS, -1, -1, -1, count) + section)
    recompute_crc(raw)
    return bytes(raw)


def corrupt(twin, section, count=1, match=None):
    bt = twin.RecordBatch(batch_with_records(section, count))
    assert bt.is_valid()
    with pytest.raises(CorruptRecordError, match=match) as ei:
        bt.records()
    assert ei.value.position == 0 and ei.value.offset == 0
    return ei.value


GOOD = h("1c 00 00 00 06 6b6579 0a 76616c7565 00")   # the 76-byte vector's record


def test_good_section_decodes(twin):
    assert rec_tuples(twin.RecordBatch(batch_with_records(GOOD, 1))) == [
        (0, TS, b"key", b"value", ())]


def test_record_count_larger_than_records(twin):
    corrupt(twin, GOOD, 2, "Incorrect declared batch size, premature EOF reached")


def test_record_count_smaller_than_records(twin):
    corrupt(twin, GOOD + GOOD, 1, "Incorrect declared batch size, records still remaining in file")


def test_leftover_bytes(twin):
    corrupt(twin, GOOD + b"\x00", 1, "records still remaining")


def test_negative_and_huge_record_count(twin):
    corrupt(twin, GOOD, -1, "Found invalid record count -1 in magic v2 batch")
    corrupt(twin, GOOD, INT32_MAX,
            f"Found invalid record count {INT32_MAX} in magic v2 batch: more "
            f"than the 15 bytes of records")


def test_count_zero_ignores_the_section(twin):
    bt = twin.RecordBatch(batch_with_records(b"\xff" * 10, 0))
    assert bt.records() == [] and list(bt) == []


def test_overlong_varints_in_records(twin):
    corrupt(twin, b"\xff" * 6 + GOOD, 1, "Found invalid record structure: varint is too long")
    # an 11-byte timestamp delta inside the record body
    body = b"\x00" + b"\xff" * 10 + b"\x01" + h("00 06 6b6579 0a 76616c7565 00")
    corrupt(twin, bytes([len(body) * 2]) + body, 1,
            "Found invalid record structure: varlong is too long")


def test_record_length_past_the_buffer(twin):
    corrupt(twin, h("1e") + GOOD[1:], 1,
            "Invalid record size: expected 15 bytes in record payload, but instead the buffer has "
            "only 14 remaining bytes")
    corrupt(twin, h("feffffff0f") + GOOD[1:], 1, f"expected {INT32_MAX} bytes in record payload")
    corrupt(twin, h("03") + GOOD[1:], 1, "expected -2 bytes in record payload")


def test_record_shorter_than_its_fields(twin):
    corrupt(twin, h("00") + GOOD[1:], 1, "Invalid record size|empty record body")
    corrupt(twin, h("1a") + GOOD[1:-1] + b"", 1,
            "Found invalid record structure: varint is truncated")


def test_record_longer_than_its_fields(twin):
    # declared 15 bytes, fields take 14: one byte left inside the record
    corrupt(twin, h("1e 00 00 00 06 6b6579 0a 76616c7565 00 00"), 1,
            "Invalid record size: expected to read 15 bytes in record payload, but instead read 14")


@pytest.mark.parametrize("klen", ["feffffff0f", "e0ffffff0f", "1e"])
def test_key_length_past_the_record(twin, klen):
    # key length near 2**31 (or just past the record): an error, no allocation
    body = h("00 00 00") + h(klen) + h("6b6579 0a 76616c7565 00")
    corrupt(twin, bytes([len(body) * 2]) + body, 1, "key runs past the record")


def test_value_and_header_lengths_past_the_record(twin):
    body = h("00 00 00 06 6b6579 feffffff0f 76616c7565 00")
    corrupt(twin, bytes([len(body) * 2]) + body, 1, "value runs past the record")
    body = h("00 00 00 01 01 02 feffffff0f 6b 01")
    corrupt(twin, bytes([len(body) * 2]) + body, 1, "header key runs past the record")
    body = h("00 00 00 01 01 02 02 6b feffffff0f 76")
    corrupt(twin, bytes([len(body) * 2]) + body, 1, "header value runs past the record")


def test_negative_header_key_size(twin):
    body = h("00 00 00 01 01 02 01 6b 02 76")
    corrupt(twin, bytes([len(body) * 2]) + body, 1, "Invalid negative header key size -1")


def test_header_count_checks(twin):
    body = h("00 00 00 01 01 01")
    corrupt(twin, bytes([len(body) * 2]) + body, 1, "Found invalid number of record headers -1")
    body = h("00 00 00 01 01 feffffff0f 00")
    corrupt(twin, bytes([len(body) * 2]) + body, 1,
            f"Found invalid number of record headers {INT32_MAX}: more than the 1 bytes left in "
            f"the record")


def test_null_header_value_and_negative_lengths_mean_null(twin):
    # key length -3 (any negative = null), header value -1 = null
    body = h("00 00 00 05 01 02 02 6b 01")
    bt = twin.RecordBatch(batch_with_records(bytes([len(body) * 2]) + body, 1))
    assert rec_tuples(bt) == [(0, TS, None, None, (("k", None),))]


def test_non_utf8_header_key(twin):
    body = h("00 00 00 01 01 02 04 ff6b 01")
    bt = twin.RecordBatch(batch_with_records(bytes([len(body) * 2]) + body, 1))
    [r] = list(bt)
    assert r.headers == (("\udcffk", None),)
    # and it round-trips through the builder
    b = twin.MemoryRecordsBuilder()
    b.append(TS, None, None, r.headers)
    assert rec_tuples(twin.RecordBatch(b.build())) == [(0, TS, None, None, (("\udcffk", None),))]


def test_offsets_and_timestamps_wrap_like_java_longs(twin):
    raw = bytearray(batch_with_records(h("0c 00 02 02 01 01 00"), 1))
    struct.pack_into(">q", raw, 0, 2**63 - 1)
    struct.pack_into(">q", raw, 27, 2**63 - 1)
    recompute_crc(raw)
    [r] = list(twin.RecordBatch(raw))
    assert r.offset == -(2**63) and r.timestamp == -(2**63)


def test_batch_length_near_2_31(twin):
    raw = bytearray(V76)
    struct.pack_into(">i", raw, 8, INT32_MAX - 1)
    with pytest.raises(CorruptRecordError, match=f"Record batch is truncated: its size is "
                       f"{INT32_MAX + 11} bytes but only 76 remain"):
        twin.RecordBatch(raw)
    mr = twin.MemoryRecords(bytes(raw))    # a partial tail, as Kafka reads it
    assert list(mr) == [] and mr.truncated_bytes == 76
    with pytest.raises(RecordTooLargeError):
        list(twin.MemoryRecords(bytes(raw), max_batch_size=1 << 20))


def test_record_batch_constructor_checks(twin):
    with pytest.raises(CorruptRecordError,
                       match="Record batch is truncated: 60 bytes, less than the 61-byte header"):
        twin.RecordBatch(V76[:60])
    with pytest.raises(CorruptRecordError, match="Record batch is truncated: 0 bytes"):
        twin.RecordBatch(V76, 100)
    with pytest.raises(CorruptRecordError,
                       match="Record batch is truncated: its size is 76 bytes but only 75 remain"):
        twin.RecordBatch(V76[:75])
    with pytest.raises(ValueError, match="position must be >= 0"):
        twin.RecordBatch(V76, -1)
    with pytest.raises(TypeError):
        twin.RecordBatch(V76, "0")
    with pytest.raises(TypeError):
        twin.RecordBatch(12345)


# ==============================================================================================
# Buffers: no copies
# ==============================================================================================
def test_buffer_types_without_copying(twin, tmp_path):
    data = build(twin, 3) + build(twin, 2, base=3)
    p = tmp_path / "seg.log"
    p.write_bytes(data)
    ba = bytearray(data)
    with open(p, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
        try:
            for buf in (data, ba, memoryview(data), memoryview(ba), mm):
                mr = twin.MemoryRecords(buf)
                batches = list(mr)
                owner = buf.obj if isinstance(buf, memoryview) else buf
                assert all(b.view().obj is owner for b in batches), type(buf)
                assert mr.buffer().obj is owner
                assert [r.offset for r in mr.records()] == [0, 1, 2, 3, 4]
                del mr, batches
        finally:
            mm.close()
    # the bytearray is shared, not copied: an edit shows through; a resize is refused
    mr = twin.MemoryRecords(ba)
    ba[-1] ^= 0xFF
    assert not list(mr)[1].is_valid()
    with pytest.raises(BufferError):
        ba.extend(b"x")


def test_memoryview_of_other_formats(twin):
    import array
    arr = array.array("I", V76 + b"\x00" * (-len(V76) % 4))
    mr = twin.MemoryRecords(arr)
    assert [len(b) for b in mr] == [1] and mr.truncated_bytes == len(arr) * 4 - 76
    with pytest.raises(TypeError, match="C-contiguous"):
        twin.MemoryRecords(memoryview(V76 * 2)[::2])


# ==============================================================================================
# Records
# ==============================================================================================
def test_record_object(twin):
    r = twin.Record(5, TS, b"k", None, (("h", b"v"),))
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == (5, TS, b"k", None, (("h", b"v"),))
    assert r == twin.Record(5, TS, b"k", None, [("h", b"v")])
    assert r != twin.Record(6, TS, b"k", None, (("h", b"v"),))
    assert (r == 5) is False and r != "x"
    assert repr(r) == ("Record(offset=5, timestamp=1700000000000, key=b'k', value=None, "
                       "headers=(('h', b'v'),))")
    assert twin.Record(1, 2, None, b"v").headers == ()
    with pytest.raises(TypeError):
        hash(r)
    r2 = pickle.loads(pickle.dumps(r))
    assert type(r2) is twin.Record and r2 == r
    r.value = b"new"
    assert r.value == b"new"
    del r.key
    with pytest.raises(AttributeError):
        r.key
    with pytest.raises(AttributeError):
        repr(r)
    with pytest.raises(AttributeError):
        r.other = 1


def test_records_are_slot_objects(twin):
    [r] = list(twin.RecordBatch(V76))
    assert not hasattr(r, "__dict__")
    assert type(r).offset.__get__(r) == 0


# ==============================================================================================
# Builder
# ==============================================================================================
def test_builder_offsets(twin):
    b = twin.MemoryRecordsBuilder(base_offset=100)
    assert b.records_count == 0 and len(b) == 0 and b.build() == b""
    assert b.estimated_size_in_bytes() == 61
    assert b.append(TS, b"a", b"1") == 100
    b.append_with_offset(105, TS, b"b", b"2")
    assert b.append(TS, b"c", b"3") == 106
    assert b.records_count == 3 and len(b) == 3
    with pytest.raises(InvalidOffsetError,
                       match=r"Illegal offset 106 following previous offset 106"):
        b.append_with_offset(106, TS, None, None)
    with pytest.raises(InvalidOffsetError, match="cannot be stored relative to base offset 100"):
        b.append_with_offset(100 + 2**31, TS, None, None)
    with pytest.raises(TypeError):
        b.append_with_offset("107", TS, None, None)
    assert [r.offset for r in twin.RecordBatch(b.build())] == [100, 105, 106]
    b = twin.MemoryRecordsBuilder(base_offset=100)
    with pytest.raises(InvalidOffsetError):
        b.append_with_offset(99, TS, None, None)
    b.append_with_offset(100 + INT32_MAX, TS, None, None)
    with pytest.raises(InvalidOffsetError, match=f"offset {101 + INT32_MAX} cannot be stored"):
        b.append(TS, None, None)
    assert twin.RecordBatch(b.build()).last_offset_delta == INT32_MAX


def test_builder_rejects_bad_records_and_stays_unchanged(twin):
    b = twin.MemoryRecordsBuilder()
    b.append(TS, b"k", b"v")
    before = b.build()
    bad = [
        ((TS - 2**60 - TS, b"k", b"v"), ValueError),    # negative timestamp
        ((-2, b"k", b"v"), ValueError),
        ((2**63, b"k", b"v"), ValueError),
        ((1.5, b"k", b"v"), TypeError),
        ((TS, "str key", b"v"), TypeError),
        ((TS, b"k", 5), TypeError),
        ((TS, b"k", b"v", [("h", "str value")]), TypeError),
        ((TS, b"k", b"v", [(5, b"v")]), TypeError),
        ((TS, b"k", b"v", [("a", b"1", b"2")]), ValueError),
        ((TS, b"k", b"v", [5]), TypeError),
        ((TS, b"k", b"v", 5), TypeError),
    ]
    for args, exc in bad:
        with pytest.raises(exc):
            b.append(*args)
    assert b.build() == before and b.records_count == 1
    b.append(-1, None, None)      # NO_TIMESTAMP is allowed
    assert [r.timestamp for r in twin.RecordBatch(b.build())] == [TS, -1]


def test_builder_first_failed_append_does_not_set_base_timestamp(twin):
    b = twin.MemoryRecordsBuilder()
    with pytest.raises(TypeError):
        b.append(TS + 1000, b"k", b"v", [("h", 5)])
    b.append(TS, b"k", b"v")
    assert twin.RecordBatch(b.build()).base_timestamp == TS


def test_builder_inputs(twin):
    b = twin.MemoryRecordsBuilder()
    b.append(TS, bytearray(b"ba"), memoryview(b"mv"),
             ((b"bytes-key", bytearray(b"x")), ("s", memoryview(b"y"))))
    b.append(TS, b"", b"", iter([("gen", None)]))
    b.append(TS, None, None, None)
    assert rec_tuples(twin.RecordBatch(b.build())) == [
        (0, TS, b"ba", b"mv", (("bytes-key", b"x"), ("s", b"y"))),
        (1, TS, b"", b"", (("gen", None),)),
        (2, TS, None, None, ()),
    ]


def test_builder_many_headers(twin):
    hdrs = [("h%d" % i, b"v" * i if i % 2 else None) for i in range(40)]
    b = twin.MemoryRecordsBuilder()
    b.append(TS, b"k", b"v", hdrs)
    assert rec_tuples(twin.RecordBatch(b.build())) == [(0, TS, b"k", b"v", tuple(hdrs))]


def test_has_room_for_is_exact(twin):
    b = twin.MemoryRecordsBuilder(write_limit=200)
    assert b.has_room_for(TS, b"k" * 1000, b"v")       # the first record always fits
    b.append(TS, b"k", b"v")
    size = b.estimated_size_in_bytes()
    nxt = twin.record_size(1, 5, b"k" * 10, b"v" * 20, [("h", b"x")])
    assert nxt == len(twin.encode_record_body(1, 5, b"k" * 10, b"v" * 20, [("h", b"x")]))
    b2 = twin.MemoryRecordsBuilder(write_limit=size + nxt)
    b2.append(TS, b"k", b"v")
    assert b2.has_room_for(TS + 5, b"k" * 10, b"v" * 20, [("h", b"x")])
    assert not b2.has_room_for(TS + 5, b"k" * 11, b"v" * 20, [("h", b"x")])
    assert b2.try_append(TS + 5, b"k" * 11, b"v" * 20, [("h", b"x")]) is None
    assert b2.records_count == 1
    assert b2.try_append(TS + 5, b"k" * 10, b"v" * 20, [("h", b"x")]) == 1
    assert b2.estimated_size_in_bytes() == size + nxt
    assert not b2.has_room_for(TS, None, None)
    assert twin.MemoryRecordsBuilder().has_room_for(TS, b"x" * 10**6, None)   # no write limit


def test_record_size_helpers(twin):
    for args in [(0, 0, None, None, ()), (5, -3, b"k", b"", [("a", None)]),
                 (INT32_MAX, 2**62, b"x" * 300, b"y" * 70000, [("é", b"z" * 200)] * 3)]:
        body = twin.encode_record_body(*args)
        assert twin.record_size(*args) == len(body)
        assert twin.record_size_upper_bound(*args[2:]) >= len(body)
    assert twin.encode_record_body(0, 0, b"key", b"value", ()) == V76[61:]
    with pytest.raises(ValueError):
        twin.encode_record_body(2**31, 0, None, None)
    with pytest.raises(ValueError):
        twin.record_size(0, 2**63, None, None)


def test_builder_configuration(twin):
    b = twin.MemoryRecordsBuilder(2, CompressionType.GZIP, 7, TimestampType.LOG_APPEND_TIME, 1, 2,
                                  3, True, 4, is_control_batch=True)
    assert (b.magic, b.compression_type, b.base_offset, b.timestamp_type) == (
        2, CompressionType.GZIP, 7, TimestampType.LOG_APPEND_TIME)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional,
            b.is_control_batch,
            b.partition_leader_epoch) == (1, 2, 3, True, True, 4)
    for kw, exc in [({"magic": 3}, ValueError), ({"compression_type": "brotli"}, ValueError),
                    ({"compression_type": 9}, ValueError), ({"timestamp_type": "nope"}, ValueError),
                    ({"producer_epoch": 2**15}, ValueError), ({"base_offset": 2**63}, ValueError),
                    ({"base_sequence": "1"}, ValueError), ({"write_limit": "10"}, TypeError),
                    ({"timestamp_type": "no_timestamp_type"}, ValueError),
                    ({"delete_horizon_ms": 2**64}, ValueError),
                    ({"log_append_time": 1.5}, ValueError)]:
        with pytest.raises(exc):
            twin.MemoryRecordsBuilder(**kw)


def test_log_append_time_defaults_to_now(twin):
    import time
    b = twin.MemoryRecordsBuilder(timestamp_type="log_append_time")
    b.append(TS, None, b"v")
    t0 = int(time.time() * 1000)
    bt = twin.RecordBatch(b.build())
    assert abs(bt.max_timestamp - t0) < 60_000 and [r.timestamp for r in bt] == [bt.max_timestamp]


def test_append_after_build_and_rebuild(twin):
    b = twin.MemoryRecordsBuilder()
    b.append(TS, b"a", b"1")
    first = b.build()
    assert b.build() == first
    b.append(TS + 1, b"b", b"2")
    assert [r.key for r in twin.RecordBatch(b.build())] == [b"a", b"b"]


def test_builder_legacy_delegation(twin):
    b = twin.MemoryRecordsBuilder(magic=1, base_offset=5)
    assert b.append(TS, b"k", b"v") == 5
    raw = b.build()
    assert raw == h("0000000000000005 00000018 39268c33 01 00 0000018bcfe56800 00000001 6b "
                    "00000001 76")
    assert b.records_count == 1
    with pytest.raises(ValueError, match="need magic 2"):
        twin.MemoryRecordsBuilder(magic=1, is_transactional=True)
    with pytest.raises(ValueError, match="need magic 2"):
        twin.MemoryRecordsBuilder(magic=0, producer_id=5)


def test_every_error_is_a_kafkalog_error():
    assert issubclass(CorruptRecordError, KafkaLogError)
    assert issubclass(RecordTooLargeError, KafkaLogError)


def test_repeated_and_similar_header_keys(twin):
    # Decoders may share the str of a header key seen earlier in the batch: same-length keys
    # that differ, repeats across records, and more distinct keys than any small cache.
    b = twin.MemoryRecordsBuilder()
    rows = []
    for i in range(30):
        hd = [("ab", b"%d" % i), ("ac", None), ("ab", b"x"), ("k%02d" % (i % 12), b"y"),
              ("\udcff", b"")]
        b.append(TS, None, None, hd)
        rows.append((i, TS, None, None, tuple(hd)))
    got = rec_tuples(twin.RecordBatch(b.build()))
    assert got == rows


def test_user_code_inside_append_cannot_corrupt_the_builder(twin):
    # A header pair whose unpacking appends to the same builder (refused: RuntimeError), and a
    # key whose __del__ appends: the builder stays consistent and builds a valid batch.
    b = twin.MemoryRecordsBuilder()
    b.append(TS, b"first", b"1")

    class Sneaky:
        def __iter__(self):
            b.append(TS, b"nested", b"2")
            return iter(("k", b"v"))

    with pytest.raises(RuntimeError, match="re-entered"):
        b.append(TS, b"outer", b"3", [Sneaky()])
    assert b.records_count == 1

    class Key(bytes):
        def __del__(self):
            try:
                b.append(TS, b"from-del", None)
            except RuntimeError:
                pass

    b.append(TS, b"x", b"y", [(Key(b"kk"), None)])
    bt = twin.RecordBatch(b.build())
    assert bt.is_valid()
    recs = list(bt)
    assert len(recs) == b.records_count == len(bt)
    assert [r.offset for r in recs] == list(range(len(recs)))
