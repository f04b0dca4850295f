"""``kafkalog verify``: clean logs pass (exit 0), each kind of damage is found, located by file,
byte position and offset, and fails the run (exit 1)."""
from __future__ import annotations

import json
import re
import struct

from .conftest import BASE_TS, make_log_dir, run_cli, v2_batch, write

LOG = "00000000000000000000.log"


def _dir(tmp, n=12, name="t-0", **kw):
    batches = [v2_batch([(BASE_TS + 3 * i + j, b"k%d" % j, b"v" * 20) for j in range(3)],
                        base_offset=3 * i)
               for i in range(n)]
    return make_log_dir(tmp / name, batches, index_interval=100, **kw), batches


def _problems(r):
    return [ln for ln in r.lines if not ln.startswith(("OK:", "FAILED:"))]


def test_clean_log_passes(tmp_path):
    d, _ = _dir(tmp_path)
    r = run_cli("verify", str(d))
    assert r.rc == 0, r
    assert _problems(r) == []
    assert re.match(r"^OK: 1 partition\(s\), 1 segment\(s\), 12 batches, \d+ bytes in [\d.]+ s "
                    r"\(\d+ MB/s\): 0 error\(s\), 0 warning\(s\)$", r.lines[-1])
    assert run_cli("verify", "--deep", str(d)).rc == 0


def test_real_broker_directories_pass(corpus):
    files_dir = corpus / "files"
    for d in sorted(p for p in files_dir.iterdir() if p.is_dir()):
        if d.name == "KafkaDemo@3152aef":
            # index files only (the .log is not in the snapshot): warnings, no log to check
            continue
        r = run_cli("verify", "--deep", str(d))
        assert r.rc == 0, r


def test_crc_mismatch_located(tmp_path):
    d, batches = _dir(tmp_path)
    log = d / LOG
    raw = bytearray(log.read_bytes())
    pos = len(batches[0]) + len(batches[1])  # third batch: offsets 6-8
    raw[pos + len(batches[2]) - 2] ^= 0xFF
    log.write_bytes(bytes(raw))
    r = run_cli("verify", str(d))
    assert r.rc == 1
    stored = struct.unpack_from(">I", raw, pos + 17)[0]
    probs = _problems(r)
    assert len(probs) == 1
    assert probs[0].startswith(f"{log}:{pos}: error: offset 6: CRC mismatch: stored {stored}, "
                               f"computed ")
    assert r.lines[-1].startswith("FAILED:") and "1 error(s)" in r.lines[-1]


def test_truncated_tail_and_garbage(tmp_path):
    d, batches = _dir(tmp_path)
    log = d / LOG
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(batches[0][:30])
    r = run_cli("verify", str(d))
    assert r.rc == 1
    assert any(p.startswith(f"{log}:{size}: error: offset 0: truncated batch")
               for p in _problems(r))
    log.write_bytes(log.read_bytes()[:size] + b"\x00" * 64)
    r = run_cli("verify", str(d))
    assert any(p.startswith(f"{log}:{size}: error: corrupt batch header: size 0")
               for p in _problems(r))


def test_offsets_must_increase(tmp_path):
    a = v2_batch([(BASE_TS, None, b"a")], base_offset=5)
    b = v2_batch([(BASE_TS, None, b"b")], base_offset=5)  # same offset again
    c = v2_batch([(BASE_TS, None, b"c")],
                 base_offset=2)  # below the segment's base offset 4... and earlier
    write(tmp_path / "t-0" / "00000000000000000004.log", a, b, c)
    r = run_cli("verify", str(tmp_path / "t-0"))
    probs = _problems(r)
    path = tmp_path / "t-0" / "00000000000000000004.log"
    assert (f"{path}:{len(a)}: error: offset 5: offsets do not increase: batch starts at 5 "
            "after offset 5") in probs
    assert any(p.startswith(f"{path}:{2 * len(a)}: error: offset 2: offsets do not increase")
               for p in probs)
    write(tmp_path / "u-0" / "00000000000000000009.log", a)
    r = run_cli("verify", str(tmp_path / "u-0"))
    assert any("offset 5 is below the segment's base offset 9" in p for p in _problems(r))


def test_offset_index_problems(tmp_path):
    d, _ = _dir(tmp_path)
    idx = d / "00000000000000000000.index"
    raw = bytearray(idx.read_bytes())
    assert len(raw) >= 16
    rel, pos = struct.unpack_from(">ii", raw, 0)
    # entry 0 keyed before its batch's first offset (batches hold 3 offsets): lookups would skip
    struct.pack_into(">i", raw, 0, rel - 3)
    idx.write_bytes(bytes(raw) + b"\x00\x00\x00")  # a torn entry
    r = run_cli("verify", str(d))
    probs = _problems(r)
    assert f"{idx}: error: length {len(raw) + 3} is not a multiple of 8 (a torn entry)" in probs
    assert any(p.startswith(f"{idx}:0: error: offset {rel - 3}: Index offset: {rel - 3}, log "
                            f"offset: {rel}")
               for p in probs)
    struct.pack_into(">ii", raw, 0, rel, pos + 1)  # entry 0 points inside a batch
    idx.write_bytes(bytes(raw))
    r = run_cli("verify", str(d))
    assert any(f"points to position {pos + 1}, which is not the start of a batch" in p
               for p in _problems(r))


def test_index_entry_for_a_multi_batch_append_is_valid(tmp_path):
    # Kafka's append path keys an entry by the last offset of the appended message set and
    # points it at the set's first batch (follower/cleaner appends hold several batches).
    d, _ = _dir(tmp_path)
    idx = d / "00000000000000000000.index"
    raw = bytearray(idx.read_bytes())
    rel, pos = struct.unpack_from(">ii", raw, 0)
    nxt = struct.unpack_from(">i", raw, 8)[0] if len(raw) >= 16 else None
    later = rel + 2  # an offset of the batch after the one at `pos`, below the next entry's
    assert nxt is None or later < nxt
    struct.pack_into(">i", raw, 0, later)
    idx.write_bytes(bytes(raw))
    r = run_cli("verify", str(d))
    assert r.rc == 0, r
    assert _problems(r) == []


def test_time_index_problems(tmp_path):
    d, _ = _dir(tmp_path)
    tidx = d / "00000000000000000000.timeindex"
    raw = bytearray(tidx.read_bytes())
    assert len(raw) >= 36
    ts0, rel0 = struct.unpack_from(">qi", raw, 0)
    ts1, rel1 = struct.unpack_from(">qi", raw, 12)
    struct.pack_into(">q", raw, 12, ts0)  # not increasing
    tidx.write_bytes(bytes(raw))
    r = run_cli("verify", str(d))
    assert any(p.startswith(f"{tidx}:12: error: offset {rel1}: entry 1: timestamp {ts0} is not "
                            f"larger")
               for p in _problems(r))
    struct.pack_into(">q", raw, 12, ts1 + 7)  # increasing, but not the batch's max timestamp
    tidx.write_bytes(bytes(raw))
    r = run_cli("verify", str(d))
    assert any(f"Index timestamp: {ts1 + 7}, log timestamp: {ts1}" in p for p in _problems(r))


def test_preallocated_time_index_without_entries_is_a_warning(tmp_path):
    """A broker killed before index.interval.bytes were appended leaves the active segment's time
    index preallocated and all zero; Kafka's sanity check passes it and its recovery rebuilds
    it (seen on a real broker: tests/kafka/test_broker_verify.py). Read as an entry (timestamp
    0, the base offset), it was reported as an error."""
    d, _ = _dir(tmp_path)
    tidx = d / "00000000000000000000.timeindex"
    tidx.write_bytes(bytes(12 * 341))
    r = run_cli("verify", str(d))
    assert r.rc == 0, r.err
    assert _problems(r) == [f"{tidx}: warning: time index is preallocated and holds no entry (not "
                            "trimmed: the broker did not shut down cleanly; a broker rebuilds it)"]


def test_checkpoints_snapshots_and_txn_index(tmp_path):
    d, _ = _dir(tmp_path)
    (d / "leader-epoch-checkpoint").write_text("0\n2\n5 0\n3 10\n")
    snap = sorted(d.glob("*.snapshot"))
    assert snap
    raw = bytearray(snap[0].read_bytes())
    raw[3] ^= 1
    snap[0].write_bytes(bytes(raw))
    (d / "00000000000000000000.txnindex").write_bytes(struct.pack(">hqqqq", 0, 1, 3, 2,
                                                                  0) + b"\x00")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 999\n")
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n3\nt 0 0\n")
    r = run_cli("verify", str(tmp_path))
    probs = _problems(r)
    assert any(p.startswith(f"{d / 'leader-epoch-checkpoint'}: error: offset 10: entry 1: epoch 3 "
                            f"at offset 10")
               for p in probs)
    assert any(p.startswith(f"{snap[0]}: error: Snapshot is corrupt") for p in probs)
    txn = d / "00000000000000000000.txnindex"
    assert f"{txn}: error: length 35 is not a multiple of 34 (a torn entry)" in probs
    assert any(p.startswith(f"{txn}:0: error: offset 3: entry 0: first offset 3 is after last "
                            f"offset 2") for p in probs)
    rp = tmp_path / "recovery-point-offset-checkpoint"
    assert any(p.startswith(f"{rp}: warning: offset 999: recovery point 999 of t-0 is past")
               for p in probs)
    assert any(p.startswith(f"{tmp_path / 'log-start-offset-checkpoint'}: error: "
                            "Expected 3 entries") for p in probs)
    assert r.rc == 1


def test_left_overs_are_warnings_and_strict(tmp_path):
    d, _ = _dir(tmp_path)
    (d / "00000000000000000000.log.swap").write_bytes(b"")
    r = run_cli("verify", str(d))
    assert r.rc == 0 and "1 warning(s)" in r.lines[-1]
    assert any(" warning: left-over .swap file" in p for p in _problems(r))
    assert run_cli("verify", "--strict", str(d)).rc == 1
    q = run_cli("verify", "--quiet", str(d))
    assert len(q.lines) == 1 and q.lines[0].startswith("OK:") and "1 warning(s)" in q.lines[0]


def test_deep_check_finds_undecodable_records(tmp_path):
    batch = bytearray(v2_batch([(BASE_TS, b"k", b"value")]))
    batch[61] = 0x7F  # record length varint: far more than the batch holds
    import crc32c

    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))  # CRC made valid again
    write(tmp_path / "t-0" / LOG, bytes(batch))
    assert run_cli("verify", str(tmp_path / "t-0")).rc == 0  # shallow: CRC and framing are fine
    r = run_cli("verify", "--deep", str(tmp_path / "t-0"))
    assert r.rc == 1
    assert any(p.startswith(f"{tmp_path / 't-0' / LOG}:0: error: offset 0: records do not decode:")
               for p in _problems(r))


def test_json_output_and_max_problems(tmp_path):
    d, batches = _dir(tmp_path)
    raw = bytearray((d / LOG).read_bytes())
    pos = 0
    for b in batches:
        raw[pos + len(b) - 1] ^= 1
        pos += len(b)
    (d / LOG).write_bytes(bytes(raw))
    r = run_cli("verify", "--json", "--max-problems", "3", str(d))
    objs = [json.loads(ln) for ln in r.lines]
    probs = [o for o in objs if o["type"] == "problem"]
    assert len(probs) == 3
    assert probs[0] == {"type": "problem", "severity": "error", "file": str(d / LOG), "position": 0,
                        "offset": 0, "message": probs[0]["message"]}
    summary = objs[-1]
    assert summary["type"] == "summary" and summary["errors"] == 12 and summary["ok"] is False
    assert summary["batches"] == 12 and summary["partitions"] == 1
