"""``kafkalog dump`` on generated logs of every format and codec, field by field.

Each expected line is rebuilt from the inputs with Kafka's format (reference §16.3): the batch
line's fields in order, ``compresscodec`` in lower case, ``OptionalLong`` for the delete
horizon, legacy lines with ``NoTimestampType: -1`` for magic 0 and the record CRC last (Kafka
4.4; its Scala tool of 4.2 and older added a ``}``), ``| `` record lines with
``sequence``/``headerKeys`` for v2 only.
"""
from __future__ import annotations

import base64
import json
import os
import re
import struct
import zlib

import crc32c
import pytest

from kafkalog import MemoryRecords

from .conftest import BASE_TS, legacy_batch, make_log_dir, run_cli, v2_batch, write

LOG = "00000000000000000000.log"
V2_LINE = re.compile(
    r"^baseOffset: (-?\d+) lastOffset: (-?\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: "
    r"(-?\d+) "
    r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: "
    r"(true|false) "
    r"isControl: (true|false) deleteHorizonMs: (OptionalLong\.empty|OptionalLong\[-?\d+\]) "
    r"position: (\d+) (CreateTime|LogAppendTime): (-?\d+) size: (\d+) magic: 2 compresscodec: "
    r"(none|gzip|snappy|lz4|zstd) crc: (\d+) isvalid: (true|false)$"
)
LEGACY_LINE = re.compile(
    r"^offset: (-?\d+) position: (\d+) (CreateTime|LogAppendTime|NoTimestampType): (-?\d+) size: "
    r"(\d+) magic: ([01]) compresscodec: (none|gzip|snappy|lz4) crc: (\d+) isvalid: (true|false)$"
)


def recs(n, start=0, key=True):
    return [(BASE_TS + i, (b"k%d" % i) if key else None, b"value-%d-" % i + b"x" * (i % 7))
            for i in range(start, start + n)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_v2_every_codec(chdir_tmp, codec):
    b1 = v2_batch(recs(5), compression=codec, producer_id=42, producer_epoch=3, base_sequence=7,
                  leader_epoch=9)
    b2 = v2_batch(recs(3, 5), base_offset=5, compression=codec)
    write(chdir_tmp / LOG, b1, b2)
    r = run_cli("dump", "--print-data-log", "--files", LOG)
    assert r.rc == 0, r
    lines = r.lines
    assert lines[:2] == [f"Dumping {LOG}", "Log starting offset: 0"]
    m = V2_LINE.match(lines[2])
    assert m, lines[2]
    g = m.groups()
    assert g[:12] == ("0", "4", "5", "7", "11", "42", "3", "9", "false", "false",
                      "OptionalLong.empty", "0")
    assert g[12:16] == ("CreateTime", str(BASE_TS + 4), str(len(b1)), codec)
    assert int(g[16]) == struct.unpack_from(">I", b1, 17)[0] == crc32c.crc32c(b1[21:])
    assert g[17] == "true"
    for i in range(5):
        assert lines[3 + i] == (
            f"| offset: {i} CreateTime: {BASE_TS + i} keySize: {len(b'k%d' % i)} "
            f"valueSize: {len(recs(5)[i][2])} sequence: {7 + i} headerKeys: [] "
            f"key: k{i} payload: {recs(5)[i][2].decode()}"
        )
    m = V2_LINE.match(lines[8])
    assert m and m.group(1) == "5" and m.group(12) == str(len(b1)) and m.group(4) == "-1"
    assert lines[9].startswith("| offset: 5 CreateTime: ") and " sequence: -1 " in lines[9]
    assert len(lines) == 12
    assert r.err == ""


@pytest.mark.parametrize("magic,codec",
                         [(m, c) for m in (0, 1) for c in ("none", "gzip", "snappy", "lz4")])
def test_legacy_every_codec(chdir_tmp, magic, codec):
    data = legacy_batch(magic, recs(4), compression=codec)
    write(chdir_tmp / LOG, data)
    r = run_cli("dump", "--print-data-log", "--files", LOG)
    assert r.rc == 0, r
    entries = list(MemoryRecords(data))
    batch_lines = [ln for ln in r.lines if LEGACY_LINE.match(ln)]
    assert len(batch_lines) == len(entries) == (4 if codec == "none" else 1)
    tstype = "NoTimestampType" if magic == 0 else "CreateTime"
    pos = 0
    for ln, e in zip(batch_lines, entries):
        g = LEGACY_LINE.match(ln).groups()
        ts = -1 if magic == 0 else e.max_timestamp
        assert g == (str(e.last_offset), str(pos), tstype, str(ts), str(e.size_in_bytes),
                     str(magic), codec,
                     str(e.crc), "true")
        assert e.crc == zlib.crc32(data[pos + 16 : pos + e.size_in_bytes])
        pos += e.size_in_bytes
    rec_lines = [ln for ln in r.lines if ln.startswith("| ")]
    assert len(rec_lines) == 4
    inner = [rec for e in entries for rec in e]
    for i, (ln, rec) in enumerate(zip(rec_lines, inner)):
        ts = -1 if magic == 0 else BASE_TS + i
        v = recs(4)[i][2]
        assert ln == (f"| offset: {i} {tstype}: {ts} keySize: {len(b'k%d' % i)} valueSize: "
                      f"{len(v)} isValid: true crc: {rec.crc} key: k{i} payload: {v.decode()}")


def test_log_append_time_delete_horizon_headers_and_nulls(chdir_tmp):
    b1 = v2_batch([(BASE_TS, None, b"a", [("h1", b"x"), ("h,2", None)]), (BASE_TS + 1, b"k", None)],
                  timestamp_type="log_append_time", log_append_time=BASE_TS + 500)
    b2 = v2_batch([(BASE_TS, b"k", None)], base_offset=2, delete_horizon_ms=BASE_TS + 86_400_000)
    write(chdir_tmp / LOG, b1, b2)
    r = run_cli("dump", "--print-data-log", "--files", LOG)
    lines = r.lines
    assert " LogAppendTime: %d size: " % (BASE_TS + 500) in lines[2]
    assert lines[3] == (f"| offset: 0 LogAppendTime: {BASE_TS + 500} keySize: -1 valueSize: 1 "
                        f"sequence: -1 "
                        "headerKeys: [h1,h,2] payload: a")
    assert lines[4] == (f"| offset: 1 LogAppendTime: {BASE_TS + 500} keySize: 1 valueSize: -1 "
                        f"sequence: -1 "
                        "headerKeys: [] key: k")
    assert f"deleteHorizonMs: OptionalLong[{BASE_TS + 86_400_000}] position: {len(b1)} " in lines[5]
    # header values (kafkalog extension)
    r = run_cli("dump", "--print-data-log", "--print-headers", "--files", LOG)
    assert r.lines[3] == (f"| offset: 0 LogAppendTime: {BASE_TS + 500} keySize: -1 valueSize: 1 "
                          f"sequence: -1 "
                          'headerKeys: [h1,h,2] headers: [["h1","x"],["h,2",null]] payload: a')


def test_transactional_producer_fields_and_sequence_wrap(chdir_tmp):
    b = v2_batch(recs(3), producer_id=7, producer_epoch=1, base_sequence=2**31 - 2,
                 transactional=True)
    write(chdir_tmp / LOG, b)
    r = run_cli("dump", "--deep-iteration", "--files", LOG)
    g = V2_LINE.match(r.lines[2]).groups()
    assert g[3:10] == (str(2**31 - 2), "0", "7", "1", "0", "true", "false")
    assert [ln.split(" sequence: ")[1].split(" ")[0] for ln in r.lines[3:6]] == [
        str(2**31 - 2), str(2**31 - 1), "0"]
    # deep iteration without --print-data-log: no key/payload
    assert r.lines[3].endswith("headerKeys: []")


def test_invalid_utf8_is_replaced_like_java(chdir_tmp):
    write(chdir_tmp / LOG, v2_batch([(BASE_TS, b"\xff\xfek", b"ok \xc3\x28 \xe2\x82\xac")]))
    r = run_cli("dump", "--print-data-log", "--files", LOG)
    assert r.lines[3].endswith("key: \ufffd\ufffdk payload: ok \ufffd( \u20ac")


@pytest.mark.parametrize("flags", [[], ["--skip-record-metadata"],
                                   ["--value-decoder-class",
                                    "org.apache.kafka.tools.api.StringDecoder"]])
def test_malformed_utf8_has_javas_replacements(chdir_tmp, flags):
    """74 ED B6 0D: Java's decoder replaces ED B6 (a lead and its continuation, cut short) by one
    U+FFFD, as Kafka 4.4 prints it (Python's own replacement makes two).  Every way a record line
    is made: the compiled run of plain batches, the general path (without metadata), a decoder
    class; a header key too."""
    bad = b"t\xed\xb6\r"
    write(chdir_tmp / LOG,
          v2_batch([(BASE_TS, bad, b"a" + bad, [(bad.decode("utf-8", "surrogateescape"), b"x")]),
                                     (BASE_TS + 1, None, bad + b"\xed\xa0\x80z")]))
    r = run_cli("dump", "--print-data-log", *flags, "--files", LOG)
    assert r.rc == 0, r
    lines = [ln for ln in r.lines if ln.startswith("| ")]
    assert lines[0].endswith("key: t\ufffd\r payload: at\ufffd\r")
    assert lines[1].endswith("payload: t\ufffd\r\ufffdz")
    if not flags or flags[0] != "--skip-record-metadata":
        assert "headerKeys: [t\ufffd\r]" in lines[0]


def test_skip_record_metadata_record_without_key(chdir_tmp):
    """Kafka 4.4: a record printed without metadata starts with '| ' whether it has a key or
    not ('| payload: ...'; the Scala tool of Kafka 4.2 and older printed ' payload: ...')."""
    write(chdir_tmp / LOG,
          v2_batch([(BASE_TS, None, b"v0"), (BASE_TS, b"k", b"v1"), (BASE_TS, b"k", None)]))
    r = run_cli("dump", "--print-data-log", "--skip-record-metadata", "--files", LOG)
    assert r.rc == 0, r
    assert r.lines[3:] == ["| payload: v0", "| key: k payload: v1", "| key: k"]


def test_crc_corruption_is_reported_not_fatal(chdir_tmp):
    data = bytearray(v2_batch(recs(2)))
    data[-3] ^= 0x01  # inside the last record's value: structure intact, CRC wrong
    write(chdir_tmp / LOG, bytes(data))
    r = run_cli("dump", "--print-data-log", "--files", LOG)
    assert r.rc == 0
    assert r.lines[2].endswith(f"crc: {struct.unpack_from('>I', data, 17)[0]} isvalid: false")
    assert len([ln for ln in r.lines if ln.startswith("| ")]) == 2


def test_trailing_bytes_and_max_bytes(chdir_tmp):
    b1, b2 = v2_batch(recs(2)), v2_batch(recs(2, 2), base_offset=2)
    write(chdir_tmp / LOG, b1, b2, b"\x00" * 10)
    r = run_cli("dump", "--files", LOG)
    assert r.lines[-1] == f"Found 10 invalid bytes at the end of {LOG}"
    # a partial batch (header complete, body cut) is also "invalid bytes"
    write(chdir_tmp / LOG, b1, b2[:40])
    r = run_cli("dump", "--files", LOG)
    assert r.lines[-1] == f"Found 40 invalid bytes at the end of {LOG}"
    # --max-bytes: only batches entirely inside the first N bytes, and no trailing report
    write(chdir_tmp / LOG, b1, b2, b"\x00" * 10)
    r = run_cli("dump", "--max-bytes", str(len(b1) + 5), "--files", LOG)
    assert len(r.lines) == 3 and V2_LINE.match(r.lines[2])
    r = run_cli("dump", "--max-bytes", str(len(b1) + len(b2)), "--files", LOG)
    assert len(r.lines) == 4


def test_corrupt_header_aborts_like_kafka(chdir_tmp):
    b1 = v2_batch(recs(2))
    write(chdir_tmp / LOG, b1, b"\x00" * 100)
    r = run_cli("dump", "--files", LOG)
    assert r.rc == 1
    assert len(r.lines) == 3  # the batch before the corruption was printed
    assert r.err_lines == [f"kafkalog dump: error: Found record size 0 smaller than minimum record "
                           f"overhead (14) in file {LOG}."]


def test_unknown_files_are_ignored(chdir_tmp):
    write(chdir_tmp / "notes.txt", b"x")
    write(chdir_tmp / "leader-epoch-checkpoint", b"0\n0\n")
    write(chdir_tmp / "00000000000000000000.log.deleted", b"")
    r = run_cli("dump", "--files",
                "notes.txt,leader-epoch-checkpoint,00000000000000000000.log.deleted")
    assert r.rc == 1  # nothing could be dumped (kafka-dump-log exits 0 here)
    assert r.lines == ["Dumping notes.txt", "Dumping leader-epoch-checkpoint",
                       "Dumping 00000000000000000000.log.deleted"]
    assert r.err_lines[:3] == ["Ignoring unknown file notes.txt",
                               "Ignoring unknown file leader-epoch-checkpoint",
                               "Ignoring unknown file 00000000000000000000.log.deleted"]
    assert len(r.err_lines) == 4 and r.err_lines[3].startswith("kafkalog dump: error: nothing to "
                                                               "dump")


def test_several_files_in_order(chdir_tmp):
    write(chdir_tmp / "a" / LOG, v2_batch(recs(1)))
    write(chdir_tmp / "b" / "00000000000000000005.log", v2_batch(recs(1, 5), base_offset=5))
    r = run_cli("dump", "--files", f"a/{LOG},b/00000000000000000005.log", "--files", f"a/{LOG}")
    assert [ln for ln in r.lines if not ln.startswith("baseOffset")] == [
        f"Dumping a/{LOG}", "Log starting offset: 0", "Dumping b/00000000000000000005.log",
        "Log starting offset: 5", f"Dumping a/{LOG}", "Log starting offset: 0"]


def test_kafka_style_invocation_without_subcommand(chdir_tmp):
    write(chdir_tmp / LOG, v2_batch(recs(2)))
    a = run_cli("--files", LOG, "--deep-iteration")
    b = run_cli("dump", "--files", LOG, "--deep-iteration")
    assert a.rc == 0 and a.out == b.out and len(a.lines) == 5
    c = run_cli("dump", "--files=" + LOG, "--deep")  # unique prefixes, as joptsimple accepts
    assert c.out == b.out


# -- indexes
# ----------------------------------------------------------------------------------------
def _partition(tmp, n_batches=12):
    batches = [v2_batch(recs(3, 3 * i), base_offset=3 * i) for i in range(n_batches)]
    d = make_log_dir(tmp / "t-0", batches, index_interval=100)
    return d, batches


def test_offset_index_entries_point_at_batches(tmp_path):
    d, batches = _partition(tmp_path)
    idx = d / "00000000000000000000.index"
    r = run_cli("dump", "--files", str(idx))
    assert r.rc == 0 and r.err == ""
    data = (d / LOG).read_bytes()
    entries = [ln for ln in r.lines[1:]]
    assert entries and len(entries) == os.path.getsize(idx) // 8
    for ln in entries:
        m = re.match(r"^offset: (\d+) position: (\d+)$", ln)
        off, pos = int(m.group(1)), int(m.group(2))
        b = next(iter(MemoryRecords(data[pos:])))
        assert b.last_offset == off


def test_offset_index_mismatch_report(tmp_path):
    d, _ = _partition(tmp_path)
    idx = d / "00000000000000000000.index"
    raw = bytearray(idx.read_bytes())
    n = len(raw) // 8
    assert n >= 2
    rel0 = struct.unpack_from(">i", raw, 0)[0]
    rel1 = struct.unpack_from(">i", raw, 8)[0]
    struct.pack_into(">i", raw, 0, rel0 - 1)
    struct.pack_into(">i", raw, 8, rel1 + 1)
    idx.write_bytes(bytes(raw) + b"\x00" * 80)  # plus a zero-filled (preallocated) tail
    r = run_cli("dump", "--verify-index-only", "--files", str(idx))
    assert r.rc == 0
    assert r.lines == [f"Dumping {idx}"]
    # Kafka 4.4 keeps the mismatches in a map sorted by index offset, descending
    assert r.err_lines == [f"Mismatches in :{idx}",
                           f"  Index offset: {rel1 + 1}, log offset: {rel1}",
                           f"  Index offset: {rel0 - 1}, log offset: {rel0}"]
    r = run_cli("dump", "--files", str(idx))
    assert len(r.lines) == 1 + n  # the zero tail is not printed


def test_index_sanity_check_failures(tmp_path):
    d, _ = _partition(tmp_path)
    idx = d / "00000000000000000000.index"
    raw = idx.read_bytes()
    idx.write_bytes(raw + b"\x01\x02\x03")
    r = run_cli("dump", "--index-sanity-check", "--files", str(idx))
    assert r.rc == 1
    assert r.err_lines == [f"kafkalog dump: error: Index file {idx} is corrupt, found "
                           f"{len(raw) + 3} bytes which "
                           "is neither positive nor a multiple of 8"]
    idx.write_bytes(raw[:-8] + struct.pack(">ii", -5, 0))
    r = run_cli("dump", "--index-sanity-check", "--files", str(idx))
    assert r.rc == 1 and ("has non-zero size but the last offset is -5 which is less than the "
                          "base offset 0") in r.err


def test_time_index_entries_and_reports(tmp_path):
    d, batches = _partition(tmp_path)
    tidx = d / "00000000000000000000.timeindex"
    r = run_cli("dump", "--files", str(tidx))
    assert r.rc == 0 and r.err == ""
    raw = tidx.read_bytes()
    n = len(raw) // 12
    assert n >= 3
    for i, ln in enumerate(r.lines[1:]):
        ts, rel = struct.unpack_from(">qi", raw, i * 12)
        assert ln == f"timestamp: {ts} offset: {rel}"
        assert (rel + 1) % 3 == 0 and ts == BASE_TS + rel  # last offset / max timestamp of a batch
    bad = bytearray(raw)
    ts1, rel1 = struct.unpack_from(">qi", raw, 12)
    struct.pack_into(">q", bad, 12, ts1 + 1000)           # entry 1: wrong timestamp
    ts2, rel2 = struct.unpack_from(">qi", raw, 24)
    struct.pack_into(">qi", bad, 24, ts1 - 5, rel2)       # entry 2: goes back in time
    struct.pack_into(">i", bad, 8,
                     1)                     # entry 0: offset 1 is not a batch's last offset
    tidx.write_bytes(bytes(bad))
    r = run_cli("dump", "--verify-index-only", "--files", str(tidx))
    assert r.lines == [f"Dumping {tidx}"]
    assert r.err_lines == [
        f"Found timestamp mismatch in :{tidx}",
        f"  Index timestamp: {ts1 + 1000}, log timestamp: {ts1}",
        f"  Index timestamp: {ts1 - 5}, log timestamp: {ts2}",
        f"Found out of order timestamp in :{tidx}",
        f"  Index timestamp: {ts1 - 5}, Previously indexed timestamp: {ts1 + 1000}",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 1, found log offset: 2",
    ]


def test_txn_index_and_producer_snapshot_vectors(chdir_tmp):
    # §18.2: txn index entry v0 pid 1000 first 10 last 20 lso 10
    write(chdir_tmp / "00000000000000000000.txnindex", bytes.fromhex(
        "0000" "00000000000003e8" "000000000000000a" "0000000000000014" "000000000000000a"))
    # §18.2: producer snapshot, one entry (pid 1000, epoch 5, lastSeq 9, lastOffset 19, offsetDelta
    # 9,
    # ts 1700000000000, coordEpoch 7, txnFirst -1) and an empty snapshot
    write(chdir_tmp / "00000000000000000020.snapshot", bytes.fromhex(
        "0001 e5b5d6bf 00000001 00000000000003e8 0005 00000009 0000000000000013 00000009 "
        "0000018bcfe56800 00000007 ffffffffffffffff".replace(" ", "")))
    write(chdir_tmp / "00000000000000000000.snapshot", bytes.fromhex("000148674bc700000000"))
    r = run_cli("dump", "--files", "00000000000000000000.txnindex,00000000000000000020.snapshot,"
                "00000000000000000000.snapshot")
    assert r.rc == 0, r
    assert r.lines == [
        "Dumping 00000000000000000000.txnindex",
        "version: 0 producerId: 1000 firstOffset: 10 lastOffset: 20 lastStableOffset: 10",
        "Dumping 00000000000000000020.snapshot",
        "producerId: 1000 producerEpoch: 5 coordinatorEpoch: 7 currentTxnFirstOffset: "
        "OptionalLong.empty "
        "lastTimestamp: 1700000000000 firstSequence: 0 lastSequence: 9 lastOffset: 19 offsetDelta: "
        "9 timestamp: 1700000000000",
        "Dumping 00000000000000000000.snapshot",
    ]
    # a corrupt snapshot: Kafka prints the CorruptSnapshotException message on stderr and goes on
    write(chdir_tmp / "00000000000000000020.snapshot", bytes.fromhex(
        "0001 e5b5d6be 00000001 00000000000003e8 0005 00000009 0000000000000013 00000009 "
        "0000018bcfe56800 00000007 ffffffffffffffff".replace(" ", "")))
    r = run_cli("dump", "--files", "00000000000000000020.snapshot")
    assert r.rc == 0
    assert r.err_lines == [f"Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                           f"{0xe5b5d6be}. Computed crc: {0xe5b5d6bf}"]


# -- decoders and control records
# ---------------------------------------------------------------------
def _control(type_id, value, base_offset=0):
    from kafkalog import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(2, "none", base_offset, is_control_batch=True)
    b.append(BASE_TS, struct.pack(">hh", 0, type_id), value)
    return b.build()


def test_kraft_control_records(chdir_tmp):
    """KRaftVersion and KRaftVoters as PR #19729 shows them, and LEADER_CHANGE as Kafka 4.1+."""
    voter_dir = base64.urlsafe_b64decode("tpx8pd1IQDqJwMfGzXj6GA==")
    voters = (struct.pack(">h", 0) + b"\x02" + struct.pack(">i", 1) + voter_dir + b"\x02"
              + b"\x0bCONTROLLER" + b"\x0alocalhost" + struct.pack(">H", 9093) + b"\x00"
              + struct.pack(">hh", 0, 1) + b"\x00" + b"\x00" + b"\x00")
    leader = (struct.pack(">hi", 0, 1) + b"\x02" + struct.pack(">i", 1) + b"\x00" + b"\x02"
              + struct.pack(">i", 1) + b"\x00\x00")
    data = (_control(2, leader) + _control(5, struct.pack(">hh", 0, 1) + b"\x00", 1)
            + _control(6, voters, 2) + _control(9, b"\x00", 3))
    write(chdir_tmp / LOG, data)
    r = run_cli("dump", "--cluster-metadata-decoder", "--files", LOG)
    assert r.rc == 0, r
    rec = [ln.split(" headerKeys: [] ", 1)[1] for ln in r.lines if ln.startswith("| ")]
    assert rec == [
        'LeaderChange: '
        '{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}',
        'KRaftVersion {"version":0,"kRaftVersion":1}',
        'KRaftVoters '
        '{"version":0,"voters":[{"voterId":1,"voterDirectoryId":"tpx8pd1IQDqJwMfGzXj6GA",'
        '"endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}',
        "controlType: UNKNOWN(9)",
    ]


def test_offsets_decoder_spec_examples(chdir_tmp):
    """§16.7: '{"type":"3","data":{"groupId":"group"}}' / '{"version":"0","data":{"epoch":10}}',
    tombstones print '<DELETE>', unknown key versions are skipped with a message."""
    key3 = struct.pack(">hh", 3, 5) + b"group"
    val3 = struct.pack(">hi", 0, 10) + b"\x00"
    key1 = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 4)
    val1 = (struct.pack(">hqi", 3, 100, 7) + struct.pack(">h", 2) + b"md"
            + struct.pack(">q", BASE_TS))
    key99 = struct.pack(">h", 99)
    b = v2_batch([(BASE_TS, key3, val3), (BASE_TS, key1, val1), (BASE_TS, key1, None),
                  (BASE_TS, key99, b"x")])
    write(chdir_tmp / LOG, b)
    r = run_cli("dump", "--offsets-decoder", "--files", LOG)
    rec = [ln.split(" headerKeys: [] ", 1)[1] for ln in r.lines if ln.startswith("| ")]
    assert rec == [
        'key: {"type":"3","data":{"groupId":"group"}} payload: {"version":"0","data":{"epoch":10}}',
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":4}} payload: '
        '{"version":"3","data":{"offset":100,"leaderEpoch":7,"metadata":"md",'
        '"commitTimestamp":%d}}' % BASE_TS,
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":4}} payload: <DELETE>',
        "key: Unknown record type 99 at offset 3, skipping.",
    ]


def test_transaction_log_decoder_prints_json(chdir_tmp):
    """§16.4's transaction records (the value is the 37-byte v0 TransactionLogValue of §17.2) as
    Kafka 4.4 prints them (checked against its kafka-dump-log on these bytes): the key and value
    as JSON, transactionStatus by name, a tombstone's value <DELETE>.  (The Scala tool of Kafka
    4.2 and older printed 'transaction_metadata::transactionalId=kafka-txn-0' and
    'producerId:0,producerEpoch:0,state=Empty,partitions=[],...'.)"""
    key = struct.pack(">hh", 0, 11) + b"kafka-txn-0"
    value = struct.pack(">hqhibiqq", 0, 0, 0, 60000, 0, 0, 1680383478418, -1)
    assert len(value) == 37
    ongoing = struct.pack(">hqhib", 0, 5, 1, 60000, 1) + struct.pack(">i", 1) \
        + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 3) \
        + struct.pack(">qq", 1680383478500, 1680383478400)
    write(chdir_tmp / LOG, v2_batch([(1680383478420, key, value), (1680383478421, key, ongoing),
                                     (1680383478422, key, None)]))
    r = run_cli("dump", "--transaction-log-decoder", "--files", LOG)
    rec = [ln for ln in r.lines if ln.startswith("| ")]
    k = 'key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}}'
    assert rec == [
        "| offset: 0 CreateTime: 1680383478420 keySize: 15 valueSize: 37 sequence: -1 headerKeys: "
        "[] "
        + k + ' payload: '
        '{"version":"0","data":{"producerId":0,"producerEpoch":0,"transactionTimeoutMs":60000,'
        '"transactionStatus":"Empty","transactionPartitions":[],"transactionLastUpdateTimestampMs":1680383478418,'
        '"transactionStartTimestampMs":-1}}',
        "| offset: 1 CreateTime: 1680383478421 keySize: 15 valueSize: 52 sequence: -1 headerKeys: "
        "[] "
        + k + ' payload: '
        '{"version":"0","data":{"producerId":5,"producerEpoch":1,"transactionTimeoutMs":60000,'
        '"transactionStatus":"Ongoing","transactionPartitions":[{"topic":"t","partitionIds":[0,3]}],'
        '"transactionLastUpdateTimestampMs":1680383478500,"transactionStartTimestampMs":1680383478400}}',
        "| offset: 2 CreateTime: 1680383478422 keySize: 15 valueSize: -1 sequence: -1 headerKeys: "
        "[] "
        + k + " payload: <DELETE>",
    ]


def test_cluster_metadata_decoder_errors(chdir_tmp):
    b = v2_batch([(BASE_TS, None, b"\x00\x02\x00"), (BASE_TS, None, b"\x01\x63\x00"),
                  (BASE_TS, None, b"\x01\x14\x00\x00\xff")])
    write(chdir_tmp / LOG, b)
    r = run_cli("dump", "--cluster-metadata-decoder", "--files", LOG)
    payloads = [ln.split(" payload: ", 1)[1] for ln in r.lines if ln.startswith("| ")]
    assert payloads[0].startswith("Error at 0, skipping. Could not deserialize metadata record "
                                  "with frame version 0.")
    # Kafka 4.4 prints the exception it wraps (checked against its kafka-dump-log)
    assert payloads[1] == ("Error at 1, skipping. "
                           "org.apache.kafka.common.errors.UnsupportedVersionException: "
                           "Unknown metadata id 99")
    assert payloads[2] == "Error at 2, skipping. Found 1 byte(s) of garbage after 20"


@pytest.mark.parametrize("decoder,expected", [
    ("hex", "key: 00000000000000ff payload: 68690a"),
    ("base64", "key: AAAAAAAAAP8= payload: aGkK"),
    ("long", None),
])
def test_key_value_decoders(chdir_tmp, decoder, expected):
    write(chdir_tmp / LOG, v2_batch([(BASE_TS, struct.pack(">q", 255), b"hi\n")]))
    if decoder == "long":
        r = run_cli("dump", "--key-decoder-class", "org.apache.kafka.tools.api.LongDecoder",
                    "--files", LOG)
        assert r.rc == 0, r
        assert r.text.split(" headerKeys: [] ", 1)[1] == "key: 255 payload: hi\n\n"
        return
    r = run_cli("dump", "--key-decoder", decoder, "--value-decoder", decoder, "--files", LOG)
    assert r.lines[-1].split(" headerKeys: [] ", 1)[1] == expected


def test_unsupported_decoder_class_is_an_error(chdir_tmp):
    write(chdir_tmp / LOG, v2_batch(recs(1)))
    r = run_cli("dump", "--value-decoder-class", "com.example.AvroDecoder", "--files", LOG)
    assert r.rc == 1 and len(r.err_lines) == 1 \
        and "unsupported decoder 'com.example.AvroDecoder'" in r.err


# -- JSON
# -----------------------------------------------------------------------------------------------
def test_json_output(chdir_tmp):
    b1 = v2_batch([(BASE_TS, b"k", b"\x00\x01", [("h", b"v")]), (BASE_TS + 1, None, None)],
                  producer_id=3, producer_epoch=0, base_sequence=0)
    write(chdir_tmp / LOG, b1, _control(1, struct.pack(">hi", 0, 4), 2))
    r = run_cli("dump", "--json", "--print-data-log", "--files", LOG)
    objs = [json.loads(ln) for ln in r.lines]
    assert [o["type"] for o in objs] == ["file", "batch", "record", "record", "batch", "record"]
    assert objs[0] == {"type": "file", "file": LOG, "kind": "log", "baseOffset": 0}
    b = objs[1]
    assert b["baseOffset"] == 0 and b["lastOffset"] == 1 and b["count"] == 2 \
        and b["producerId"] == 3
    assert b["compression"] == "none" and b["isValid"] is True and b["deleteHorizonMs"] is None
    assert b["crc"] == struct.unpack_from(">I", b1,
                                          17)[0] and b["size"] == len(b1) and b["position"] == 0
    # a file not in a <topic>-<partition> directory: topic and partition are null
    assert objs[2] == {"type": "record", "file": LOG, "topic": None, "partition": None,
                       "offset": 0, "timestamp": BASE_TS,
                       "timestampType": "CreateTime",
                       "keySize": 1, "valueSize": 2, "sequence": 0,
                       "headers": [{"key": "h", "value": "dg=="}], "key": "aw==", "value": "AAE="}
    assert objs[3]["key"] is None and objs[3]["value"] is None
    assert objs[5]["control"] == {"controlType": "COMMIT", "controlTypeId": 1,
                                  "coordinatorEpoch": 4,
                                  "markerVersion": 0}
    assert "key" not in objs[5]
    r = run_cli("dump", "--json", "--print-data-log", "--binary-encoding", "hex", "--files", LOG)
    rec = json.loads(r.lines[2])
    assert rec["key"] == "6b" and rec["value"] == "0001" and rec["headers"][0]["value"] == "76"


def test_json_with_decoders(chdir_tmp):
    key3 = struct.pack(">hh", 3, 5) + b"group"
    val3 = struct.pack(">hi", 0, 10) + b"\x00"
    write(chdir_tmp / LOG, v2_batch([(BASE_TS, key3, val3)]))
    r = run_cli("dump", "--json", "--offsets-decoder", "--files", LOG)
    rec = json.loads(r.lines[2])
    assert rec["key"] == {"type": "3", "data": {"groupId": "group"}}
    assert rec["value"] == {"version": "0", "data": {"epoch": 10}}
    write(chdir_tmp / LOG,
          v2_batch([(BASE_TS, b"1", b'{"a": [1, 2]}'), (BASE_TS, b"2", b"not json")]))
    r = run_cli("dump", "--json", "--value-decoder", "json", "--key-decoder", "string",
                "--files", LOG)
    recs = [json.loads(ln) for ln in r.lines if '"type":"record"' in ln]
    assert recs[0]["key"] == "1" and recs[0]["value"] == {"a": [1, 2]} \
        and recs[1]["value"] == "not json"


def test_json_reports(chdir_tmp):
    write(chdir_tmp / LOG, v2_batch(recs(1)), v2_batch(recs(1, 5), base_offset=5), b"\x00" * 3)
    r = run_cli("dump", "--json", "--deep-iteration", "--files", LOG)
    objs = [json.loads(ln) for ln in r.lines]
    assert objs[-2] == {"type": "trailing_bytes", "file": LOG, "bytes": 3}
    assert objs[-1] == {"type": "non_consecutive_offsets", "file": str(chdir_tmp / LOG),
                        "offset": 0,
                        "nextOffset": 5}
    assert r.err == ""


# -- Kafka 4.4's non-consecutive offsets report ---------------------------------------------------
@pytest.mark.parametrize("codec",
                         ["none", "gzip"])   # the compiled run of plain batches; the general path
def test_non_consecutive_offsets_start_from_minus_one(chdir_tmp, codec):
    """Kafka 4.4 checks a file's first record against -1 (a segment not starting at 0 reports
    '-1 is followed by <base>') and lists the pairs in ascending order."""
    name = "00000000000000000038.log"
    write(chdir_tmp / name, v2_batch(recs(3, 38), base_offset=38, compression=codec),
          v2_batch(recs(2, 45), base_offset=45, compression=codec),
          v2_batch(recs(1, 52), base_offset=52, compression=codec))
    r = run_cli("dump", "--deep-iteration", "--files", name)
    assert r.rc == 0, r
    assert r.err_lines == [f"Non-consecutive offsets in {chdir_tmp / name}",
                           "  -1 is followed by 38",
                           "  40 is followed by 45", "  46 is followed by 52"]
    write(chdir_tmp / LOG, v2_batch(recs(2), compression=codec), v2_batch(recs(1, 3), base_offset=3,
                                                                           compression=codec))
    r = run_cli("dump", "--deep-iteration", "--files", LOG)
    assert r.err_lines == [f"Non-consecutive offsets in {chdir_tmp / LOG}", "  1 is followed by 3"]


def test_non_consecutive_offsets_java_long_wrap(chdir_tmp):
    """Offsets are Java longs: Long.MAX followed by Long.MIN is consecutive (MAX + 1 wraps)."""
    write(chdir_tmp / LOG, v2_batch(recs(1), base_offset=2**63 - 1),
          v2_batch(recs(1), base_offset=-2**63))
    r = run_cli("dump", "--deep-iteration", "--files", LOG)
    assert r.rc == 0, r
    assert r.err_lines == [f"Non-consecutive offsets in {chdir_tmp / LOG}",
                           f"  -1 is followed by {2**63 - 1}"]


def test_producer_snapshot_entry_without_batch_metadata(chdir_tmp):
    """An entry whose lastOffset is -1 has no batch metadata: its line ends with lastTimestamp
    (Kafka 4.4; the Scala tool left a space there)."""
    entry = struct.pack(">qhiqiqiq", 11, 5, -1, -1, 0, 1795764036172, 0, -1)
    body = struct.pack(">i", 1) + entry
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    write(chdir_tmp / "00000000000000000083.snapshot", data)
    r = run_cli("dump", "--files", "00000000000000000083.snapshot")
    assert r.rc == 0, r
    assert r.lines == ["Dumping 00000000000000000083.snapshot",
                       "producerId: 11 producerEpoch: 5 coordinatorEpoch: 0 currentTxnFirstOffset: "
                       "OptionalLong.empty lastTimestamp: 1795764036172"]
