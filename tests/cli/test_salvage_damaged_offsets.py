"""``kafkalog salvage`` of a partition where a v2 batch's base offset (which the CRC does not
cover) has a bit flipped, in the middle segment of three.  The log writer refused that batch
("Detected offset overflow"): salvage stopped with exit 1 and left a destination of the first
52 of 148 records that ``verify`` passed.  A batch whose offsets cannot be in its segment, or
that the writer refuses, is now damage to skip and report, and an unfinished destination never
looks finished: it is written under a temporary name in the same parent and renamed at the end
(removed on failure)."""
from __future__ import annotations

import os
import struct

import pytest

from kafkalog import MemoryRecords

from .conftest import BASE_TS, legacy_batch, make_log_dir, run_cli, v2_batch, write


def _batches(n=37):
    return [v2_batch([(BASE_TS + 4 * i + j, b"k%d" % (4 * i + j), b"v" * 100) for j in range(4)],
                     base_offset=4 * i) for i in range(n)]


def _records(directory):
    out = []
    for p in sorted(directory.glob("*.log")):
        for b in MemoryRecords(p.read_bytes()):
            out.extend(r.offset for r in b)
    return out


def _positions(raw):
    pos, out = 0, []
    while pos < len(raw):
        out.append(pos)
        pos += struct.unpack_from(">i", raw, pos + 8)[0] + 12
    return out


@pytest.fixture
def damaged(tmp_path):
    """148 records in 3 segments; the 3rd batch of the middle one has bit ``bit`` of its base
    offset flipped.  Returns (partition dir, middle segment, the batch's position, its true
    offsets)."""
    def make(bit):
        src = make_log_dir(tmp_path / "src" / "orders-0", _batches(), segment_bytes=7000)
        logs = sorted(src.glob("*.log"))
        assert len(logs) == 3
        raw = bytearray(logs[1].read_bytes())
        pos = _positions(raw)[2]
        bo = struct.unpack_from(">q", raw, pos)[0]
        struct.pack_into(">q", raw, pos, bo ^ (1 << bit))
        logs[1].write_bytes(bytes(raw))
        return src, logs[1], pos, (bo, bo + 3)
    return make


@pytest.mark.parametrize("bit", [40, 31, 8, 6])
def test_a_batch_with_a_damaged_base_offset_is_skipped_and_reported(damaged, tmp_path, bit):
    src, seg, pos, (lo, hi) = damaged(bit)
    dst = tmp_path / "out" / "orders-0"
    r = run_cli("salvage", str(src), str(dst))
    assert r.rc == 0, r
    assert _records(dst) == [o for o in range(148) if not lo <= o <= hi]
    lost = [ln for ln in r.lines if ln.startswith("lost: ")]
    assert len(lost) == 1, r.lines
    assert lost[0].startswith(f"lost: {seg} bytes [{pos}, "), lost
    assert lost[0].endswith(f"offsets {lo}-{hi}"), lost
    assert "base offset" in lost[0], lost
    assert r.lines[-1].startswith("salvaged 36 batches") and "1 damaged region(s)" in r.lines[-1]
    v = run_cli("verify", "--deep", str(dst))
    assert v.rc == 0, v
    assert sorted(os.listdir(tmp_path / "out")) == ["orders-0"]  # nothing left beside it


def test_a_batch_the_writer_refuses_is_skipped_and_reported(tmp_path):
    """A v0 gzip wrapper whose offset field (outside the CRC) went down: its inner records
    still say 8-9, the wrapper 5, below what the log holds; the writer refuses it."""
    a = [v2_batch([(BASE_TS, None, b"a%d" % i)], base_offset=i) for i in range(8)]
    w = bytearray(legacy_batch(0, [(0, b"k", b"x"), (0, b"k", b"y")], base_offset=8,
                               compression="gzip"))
    struct.pack_into(">q", w, 0, 5)
    b = [v2_batch([(BASE_TS, None, b"b%d" % i)], base_offset=i) for i in range(10, 14)]
    log = write(tmp_path / "in" / "t-0" / "00000000000000000000.log", *a, bytes(w), *b)
    r = run_cli("salvage", str(log.parent), str(tmp_path / "out"))
    assert r.rc == 0, r
    assert _records(tmp_path / "out") == list(range(8)) + list(range(10, 14))
    start = sum(len(x) for x in a)
    lost = [ln for ln in r.lines if ln.startswith("lost: ")]
    assert len(lost) == 1 and lost[0].startswith(
        f"lost: {log} bytes [{start}, {start + len(w)}) ({len(w)} bytes): a valid batch the "
        "log writer refused ("), r.lines
    assert lost[0].endswith("offsets 8-9"), lost
    assert run_cli("verify", "--deep", str(tmp_path / "out")).rc == 0


@pytest.mark.parametrize("dst_exists", [False, True])
def test_a_failed_salvage_leaves_no_destination(damaged, tmp_path, monkeypatch, dst_exists):
    """An I/O error half-way: exit 1, and no half-written destination (nor temporary) is
    left for a later reader to take for a finished one."""
    from kafkalog.errors import KafkaStorageError
    from kafkalog.storage.log import Log

    src, *_ = damaged(40)
    out = tmp_path / "out"
    out.mkdir()
    (out / "other").mkdir()  # the parent's other contents are left alone
    dst = out / "orders-0"
    if dst_exists:
        dst.mkdir()  # an empty destination may exist; it is left as it was
    real = Log.append_as_follower
    calls = []

    def failing(self, records):
        calls.append(1)
        if len(calls) == 3:
            raise KafkaStorageError("I/O error while appending: [Errno 28] No space left",
                                    path=str(self.dir), errno=28, operation="appending")
        return real(self, records)

    monkeypatch.setattr(Log, "append_as_follower", failing)
    r = run_cli("salvage", str(src), str(dst))
    assert r.rc == 1, r
    assert "No space left" in r.err, r
    assert sorted(os.listdir(out)) == (["orders-0", "other"] if dst_exists else ["other"])
    if dst_exists:
        assert os.listdir(dst) == []
    # a root, too
    calls.clear()
    r = run_cli("salvage", str(src.parent), str(tmp_path / "root-out"))
    assert r.rc == 1, r
    assert not (tmp_path / "root-out").exists()
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]
