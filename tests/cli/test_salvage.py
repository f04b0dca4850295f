"""``kafkalog salvage SRC DST``: every valid batch is copied into a valid log directory, damaged
bytes are skipped (resynchronising on the next valid batch) and reported, SRC is not modified."""
from __future__ import annotations

import hashlib
import json
import os

from kafkalog import MemoryRecords

from .conftest import BASE_TS, legacy_batch, make_log_dir, run_cli, v2_batch, write

LOG = "00000000000000000000.log"


def _tree_digest(root):
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for f in sorted(filenames):
            p = os.path.join(dirpath, f)
            h.update(p.encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def _records(directory):
    out = []
    for p in sorted(directory.glob("*.log")):
        for b in MemoryRecords(p.read_bytes()):
            if not b.is_control_batch:
                out.extend((r.offset, r.key, r.value) for r in b)
    return out


def _batches(n=10, codec="none"):
    return [v2_batch([(BASE_TS + 4 * i + j, b"k%d" % (4 * i + j), b"value-%d" % (4 * i + j) * 3)
                      for j in range(4)], base_offset=4 * i, compression=codec, producer_id=9,
                     producer_epoch=0, base_sequence=4 * i)
            for i in range(n)]


def test_salvage_skips_damage_and_reports_it(tmp_path):
    batches = _batches()
    src = make_log_dir(tmp_path / "src" / "t-0", batches)
    log = src / LOG
    raw = bytearray(log.read_bytes())
    starts = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    raw[starts[2] + 70] ^= 0x55                        # batch 2 (offsets 8-11): CRC broken
    raw[starts[5] + 3: starts[5] + 40] = os.urandom(37)  # batch 5 (offsets 20-23): header garbage
    raw += b"\x00" * 300                               # zero-filled tail
    log.write_bytes(bytes(raw))
    before = _tree_digest(tmp_path / "src")
    dst = tmp_path / "out" / "t-0"
    r = run_cli("salvage", str(src), str(dst))
    assert r.rc == 0, r
    assert _tree_digest(tmp_path / "src") == before  # SRC untouched
    got = _records(dst)
    expected = [(o, k, v) for i, b in enumerate(batches) if i not in (2, 5)
                for (o, k, v) in ((r.offset, r.key, r.value) for r in next(iter(MemoryRecords(b))))]
    assert got == expected
    lost = [ln for ln in r.lines if ln.startswith("lost: ")]
    assert lost[0] == (f"lost: {log} bytes [{starts[2]}, {starts[3]}) ({len(batches[2])} bytes): "
                       f"CRC mismatch; "
                       "offsets 8-11")
    assert lost[1].startswith(f"lost: {log} bytes [{starts[5]}, {starts[6]}) ({len(batches[5])} "
                              f"bytes): ")
    assert lost[1].endswith("offsets 20-23")
    assert lost[2] == (f"lost: {log} bytes [{len(raw) - 300}, {len(raw)}) (300 bytes): zero-filled "
                       f"bytes "
                       "(preallocated space or a torn write); no records (every byte is zero)")
    assert r.lines[-1].startswith("salvaged 8 batches") and "3 damaged region(s)" in r.lines[-1]
    # the result is a valid log directory with fresh indexes
    v = run_cli("verify", "--deep", str(tmp_path / "out"))
    assert v.rc == 0, v
    assert (dst / "00000000000000000000.index").exists() \
        and (dst / "00000000000000000000.timeindex").exists()


def test_salvage_keeps_base_offset_segments_and_codecs(tmp_path):
    batches = [v2_batch([(BASE_TS, b"k", b"v" * 50)], base_offset=100 + i, compression=c)
               for i, c in enumerate(["gzip", "snappy", "lz4", "zstd", "none"])]
    legacy = legacy_batch(1, [(BASE_TS, b"a", b"b"), (BASE_TS, b"c", b"d")], base_offset=105,
                          compression="gzip")
    write(tmp_path / "in" / "00000000000000000100.log", *batches, legacy)
    dst = tmp_path / "out" / "t-3"
    r = run_cli("salvage", "--deep", "--json", str(tmp_path / "in" / "00000000000000000100.log"),
                str(dst))
    assert r.rc == 0, r
    objs = [json.loads(ln) for ln in r.lines]
    summary = objs[-1]
    assert summary["type"] == "summary" and summary["batches"] == 6 and summary["lostBytes"] == 0
    assert sorted(p.name for p in dst.glob("*.log")) == ["00000000000000000100.log"]
    assert [o for o, _, _ in _records(dst)] == [100, 101, 102, 103, 104, 105, 106]
    assert run_cli("verify", "--deep", str(dst)).rc == 0


def test_salvage_log_root_and_kraft_files(corpus, tmp_path):
    src = corpus / "files" / "kafka-tester@e856b9a"
    dst = tmp_path / "root"
    r = run_cli("salvage", str(src), str(dst))
    assert r.rc == 0, r
    assert "nothing lost" in r.lines[-1]
    for part in ("__cluster_metadata-0", "foo-0"):
        assert _records(dst / part) == _records(src / part)
        # the topic id is kept
        from kafkalog.storage.checkpoints import read_partition_metadata

        assert read_partition_metadata(dst / part / "partition.metadata").topic_id == \
            read_partition_metadata(src / part / "partition.metadata").topic_id
    assert (dst / "__cluster_metadata-0" / "quorum-state").read_bytes() == \
        (src / "__cluster_metadata-0" / "quorum-state").read_bytes()
    assert run_cli("verify", str(dst)).rc == 0


def test_salvage_out_of_order_batches_are_skipped(tmp_path):
    a = v2_batch([(BASE_TS, None, b"a")], base_offset=10)
    b = v2_batch([(BASE_TS, None, b"b")], base_offset=5)   # valid but goes back
    c = v2_batch([(BASE_TS, None, b"c")], base_offset=11)
    write(tmp_path / "in" / "00000000000000000000.log", a, b, c)
    r = run_cli("salvage", str(tmp_path / "in"), str(tmp_path / "out"))
    assert r.rc == 0, r
    assert [o for o, _, _ in _records(tmp_path / "out")] == [10, 11]
    assert any("valid batch whose offsets 5-5 do not follow offset 10 already copied" in ln
               for ln in r.lines)


def test_salvage_refuses_bad_destinations(tmp_path):
    src = make_log_dir(tmp_path / "t-0", _batches(2))
    r = run_cli("salvage", str(src), str(src / "inside"))
    assert r.rc == 1 and "must not be the source or inside it" in r.err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    r = run_cli("salvage", str(src), str(tmp_path / "full"))
    assert r.rc == 1 and "exists and is not empty" in r.err
    assert not (src / "inside").exists()


def test_resync_scan_unit():
    from kafkalog.tools.salvage import scan_segment

    good = _batches(3)
    junk = bytes(range(256)) * 3
    data = (good[0] + junk + good[1] + b"\x00" * 1000 + good[2]
            + b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
    items = list(scan_segment(memoryview(data), len(data), "x"))
    kinds = [i[0] for i in items]
    assert kinds == ["batch", "lost", "batch", "lost", "batch", "lost"]
    assert items[1][1].start == len(good[0]) and items[1][1].end == len(good[0]) + len(junk)
    assert items[3][1].reason.startswith("zero-filled") and items[3][1].size == 1000
    assert items[5][1].size == 11
