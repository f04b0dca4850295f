"""Zig-zag varints (Kafka's ByteUtils), both twins: vectors, leniency, malformed input, buffers."""
from __future__ import annotations

import array
import importlib
import mmap
import os

import pytest

from kafkalog.errors import CorruptRecordError, KafkaLogError

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")


@pytest.fixture(params=["pure", "compiled"])
def varint(request):
    """``kafkalog._varint_py`` and ``kafkalog._varint``.  The compiled twin must import (an
    ImportError fails the test) unless KAFKALOG_PURE_PYTHON=1 asks for a pure-only run."""
    if request.param == "pure":
        return importlib.import_module("kafkalog._varint_py")
    if PURE:
        pytest.skip("KAFKALOG_PURE_PYTHON=1: pure-only run")
    return importlib.import_module("kafkalog._varint")


# Kafka's ByteUtilsTest vectors (spec section 1.2).
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]
VARLONG_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (17179869184, "808080808001"),
    (-17179869185, "818080808001"),
    (4611686018427387904, "80808080808080808001"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize("value,hexed", VARINT_VECTORS)
def test_varint_vectors(varint, value, hexed):
    raw = bytes.fromhex(hexed)
    assert varint.write_varint(value) == raw
    assert varint.size_of_varint(value) == len(raw)
    assert varint.read_varint(raw) == (value, len(raw))
    # a varint is also a valid varlong with the same value
    assert varint.read_varlong(raw) == (value, len(raw))


@pytest.mark.parametrize("value,hexed", VARLONG_VECTORS)
def test_varlong_vectors(varint, value, hexed):
    raw = bytes.fromhex(hexed)
    assert varint.write_varlong(value) == raw
    assert varint.size_of_varlong(value) == len(raw)
    assert varint.read_varlong(raw) == (value, len(raw))


def test_unsigned_varint(varint):
    assert varint.write_unsigned_varint(0) == b"\x00"
    assert varint.write_unsigned_varint(300) == b"\xac\x02"
    assert varint.write_unsigned_varint(2**32 - 1) == bytes.fromhex("ffffffff0f")
    assert varint.read_unsigned_varint(bytes.fromhex("ffffffff0f")) == (2**32 - 1, 5)
    assert varint.read_unsigned_varint(b"\xac\x02") == (300, 2)
    assert varint.size_of_unsigned_varint(2**32 - 1) == 5
    assert varint.size_of_unsigned_varint(127) == 1
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        varint.write_unsigned_varint(-1)
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        varint.size_of_unsigned_varint(2**32)


def test_read_at_position(varint):
    buf = b"\x00\x02\x04\xfe\x7f"
    assert varint.read_varint(buf, 1) == (1, 2)
    assert varint.read_varint(buf, 2) == (2, 3)
    assert varint.read_varint(buf, 3) == (8191, 5)
    assert varint.read_varlong(buf, 3) == (8191, 5)


# -- Kafka's leniency on the last byte ---------------------------------------------------------
def test_fifth_byte_high_bits_dropped(varint):
    # 0x7F in the 5th byte: bits above 32 fall off (accepted, like ByteUtils.readVarint)
    assert varint.read_varint(b"\xff\xff\xff\xff\x7f") == (-(2**31), 5)
    assert varint.read_varint(b"\x80\x80\x80\x80\x10") == (0, 5)
    assert varint.read_varint(b"\x80\x80\x80\x80\x70") == (0, 5)
    assert varint.read_unsigned_varint(b"\xff\xff\xff\xff\x7f") == (2**32 - 1, 5)


def test_tenth_byte_only_low_bit_survives(varint):
    assert varint.read_varlong(b"\x80" * 9 + b"\x7e") == (0, 10)
    assert varint.read_varlong(b"\x80" * 9 + b"\x7f") == (2**62, 10)
    assert varint.read_varlong(b"\x80" * 9 + b"\x01") == (2**62, 10)


@pytest.mark.parametrize(
    "raw", [bytes.fromhex("ffffffffff01"), b"\x80" * 5, b"\x80" * 5 + b"\x00", b"\xff" * 20]
)
def test_six_byte_varint_rejected(varint, raw):
    with pytest.raises(CorruptRecordError,
                       match="varint is too long: the most significant bit of byte 5 is set") as ei:
        varint.read_varint(raw)
    assert ei.value.position == 0
    with pytest.raises(CorruptRecordError, match="too long"):
        varint.read_unsigned_varint(raw)


@pytest.mark.parametrize("raw", [b"\xff" * 10 + b"\x01", b"\x80" * 10, b"\xff" * 11])
def test_eleven_byte_varlong_rejected(varint, raw):
    with pytest.raises(CorruptRecordError,
                       match="varlong is too long: the most significant bit of byte 10 is set"):
        varint.read_varlong(raw)


@pytest.mark.parametrize("raw", [b"", b"\x80", b"\xff\xff\xff\xff", b"\x81\x80"])
def test_truncated(varint, raw):
    with pytest.raises(CorruptRecordError,
                       match="varint is truncated: the buffer ends inside it") as ei:
        varint.read_varint(raw)
    assert ei.value.position == 0
    with pytest.raises(CorruptRecordError, match="varlong is truncated"):
        varint.read_varlong(raw)


def test_truncated_reports_start_position(varint):
    with pytest.raises(CorruptRecordError) as ei:
        varint.read_varint(b"\x00\x00\x80\x80", 2)
    assert ei.value.position == 2
    assert isinstance(ei.value, KafkaLogError) and isinstance(ei.value, ValueError)
    with pytest.raises(CorruptRecordError) as ei:
        varint.read_varint(b"\x00", 5)
    assert ei.value.position == 5
    with pytest.raises(CorruptRecordError):
        varint.read_varlong(b"\x00", 2**70)


def test_bad_position_argument(varint):
    with pytest.raises(ValueError, match="pos must be >= 0"):
        varint.read_varint(b"\x00\x00", -1)
    with pytest.raises(TypeError, match="pos must be an int"):
        varint.read_varlong(b"\x00", 0.0)


# -- writing: range and type errors --------------------------------------------------------------
@pytest.mark.parametrize("fn,value", [
    ("write_varint", 2**31), ("write_varint", -(2**31) - 1), ("size_of_varint", 2**31),
    ("write_varlong", 2**63), ("write_varlong", -(2**63) - 1), ("size_of_varlong", -(2**63) - 1),
    ("write_varlong", 2**200),
])
def test_write_out_of_range(varint, fn, value):
    bits = 32 if "varint" in fn else 64
    with pytest.raises(ValueError, match=f"^{value} does not fit in a signed {bits}-bit integer$"):
        getattr(varint, fn)(value)


@pytest.mark.parametrize("fn",
                         ["write_varint", "write_varlong", "size_of_varint", "size_of_varlong",
                                "write_unsigned_varint", "size_of_unsigned_varint"])
@pytest.mark.parametrize("value", [1.0, "1", None, b"\x01"])
def test_write_wrong_type(varint, fn, value):
    with pytest.raises(TypeError, match="an integer is required"):
        getattr(varint, fn)(value)


def test_bool_is_an_int(varint):
    assert varint.write_varint(True) == b"\x02"
    assert varint.size_of_varlong(False) == 1


def test_sizes_match_encodings(varint):
    for v in [0, 1, -1, 63, 64, -64, -65, 2**13, 2**20, 2**27, 2**28, 2**31 - 1, -(2**31)]:
        assert varint.size_of_varint(v) == len(varint.write_varint(v))
    for v in [2**31, 2**35, 2**42, 2**49, 2**56, 2**62, 2**63 - 1, -(2**63)]:
        assert varint.size_of_varlong(v) == len(varint.write_varlong(v))


# -- buffers ---------------------------------------------------------------------------------------
def test_buffer_types(varint, tmp_path):
    raw = b"\x07" + bytes.fromhex("feffffff0f")
    p = tmp_path / "v.bin"
    p.write_bytes(raw)
    with open(p, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
        inputs = [raw, bytearray(raw), memoryview(raw), memoryview(bytearray(raw)), mm,
                  array.array("B", raw)]
        for buf in inputs:
            assert varint.read_varint(buf, 1) == (2**31 - 1, 6), type(buf)
            assert varint.read_varlong(buf, 0) == (-4, 1)
        # a memoryview slice starts at its own 0
        assert varint.read_varint(memoryview(raw)[1:]) == (2**31 - 1, 5)


def test_non_byte_buffers_behave_like_the_pure_twin(varint):
    # A list of ints, a non-contiguous view and a memoryview of 4-byte items are indexable
    # sequences to the pure twin; the compiled twin hands them over, so both agree.
    assert varint.read_varint([0xFE, 0x7F]) == (8191, 2)
    nc = memoryview(b"\xfe\x00\x7f\x00")[::2]
    assert varint.read_varint(nc) == (8191, 2)
    with pytest.raises(TypeError):
        varint.read_varint("\x01")
