"""Log entry points keep offsets in Kafka's range and refuse what no reader can read."""

from __future__ import annotations

import struct

import pytest

from kafkalog import MemoryRecordsBuilder
from kafkalog._crc import crc32c
from kafkalog.errors import CorruptRecordError, InvalidOffsetError
from kafkalog.storage.log import Log

LONG_MAX = 2**63 - 1


def _batch(base: int = 0, n: int = 1, compression: str = "none") -> bytes:
    b = MemoryRecordsBuilder(2, compression, base)
    for i in range(n):
        b.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return b.build()


def _with_codec(data: bytes, codec: int) -> bytes:
    buf = bytearray(data)
    attrs = struct.unpack_from(">h", buf, 21)[0]
    struct.pack_into(">h", buf, 21, (attrs & ~7) | codec)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.fixture
def log(tmp_path):
    lg = Log.open(tmp_path / "t-0", {"segment.index.bytes": 4096})
    yield lg
    lg.close()


@pytest.mark.parametrize("last_delta", [1, 2, 5])
def test_follower_batch_past_long_max_is_refused(log, last_delta):
    log.truncate_fully_and_start_at(LONG_MAX - 3)
    data = _batch(LONG_MAX - 3, 3 + last_delta)
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(data)
    assert log.log_end_offset == LONG_MAX - 3
    assert list(log.iter_batches()) == []


def test_follower_batch_ending_at_long_max_is_accepted(log):
    log.truncate_fully_and_start_at(LONG_MAX - 3)
    info = log.append_as_follower(_batch(LONG_MAX - 3, 3))
    assert info.last_offset == LONG_MAX - 1
    assert log.log_end_offset == LONG_MAX


@pytest.mark.parametrize("bad", [-1, 2**63, 2**64])
def test_log_start_offset_outside_long_range_is_refused(log, bad):
    log.append(_batch(n=3))
    with pytest.raises(InvalidOffsetError):
        log.increment_log_start_offset(bad)
    assert log.log_start_offset == 0


@pytest.mark.parametrize("bad", [2**63, 2**64, -(2**63) - 1])
def test_truncate_fully_outside_long_range_is_refused(log, bad):
    with pytest.raises((InvalidOffsetError, ValueError)):
        log.truncate_fully_and_start_at(bad)
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [5, 6, 7])
@pytest.mark.parametrize("validate_records", [False, True])
@pytest.mark.parametrize("follower", [False, True])
def test_unknown_codec_is_refused_on_append(tmp_path, codec, validate_records, follower):
    lg = Log.open(tmp_path / "t-0", validate_records=validate_records)
    try:
        data = _with_codec(_batch(n=2), codec)
        with pytest.raises(CorruptRecordError) as e:
            if follower:
                lg.append_as_follower(data)
            else:
                lg.append(data)
        assert str(codec) in str(e.value)
        assert lg.log_end_offset == 0
        assert lg.size == 0
        lg.append(_batch(n=2))  # the log stays usable
        assert lg.log_end_offset == 2
    finally:
        lg.close()


@pytest.mark.parametrize("read_from", [0, 2, 4])
def test_read_of_a_corrupt_batch_names_the_segment_file_and_position(tmp_path, read_from):
    d = tmp_path / "t-0"
    lg = Log.open(d, {"index.interval.bytes": 1})
    positions = []
    for i in range(4):
        positions.append(lg.size)
        lg.append(_batch(n=2))
    lg.close()
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[positions[2] + 70] ^= 0xFF  # a record byte of the batch holding offsets 4-5
    seg.write_bytes(bytes(data))
    lg = Log.open(d)  # a clean shutdown: nothing is recovered
    try:
        with pytest.raises(CorruptRecordError) as e:
            lg.read(read_from, 1 << 20)
        assert e.value.path == str(seg)
        assert e.value.position == positions[2]
        assert e.value.offset == 4
        assert str(seg) in str(e.value)
        assert [b.base_offset for b in lg.read(6, 1 << 20)] == [6]  # later batches still read
        with pytest.raises(CorruptRecordError) as e2:
            for b in lg.iter_batches(read_from):
                b.ensure_valid()
        assert e2.value.offset == 4
    finally:
        lg.close()
