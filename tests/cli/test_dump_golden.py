"""Golden output of ``kafkalog dump``.

The expected files under ``golden/`` come from the reference's documented kafka-dump-log output
(§16.4: the strimzi-debugging transaction dump and the KRaft snapshot header of PR #12084) and
from field-by-field reasoning over the byte vectors of §18 (each expected value is derived from
the hex in the comments below).  The real broker files of the conformance corpus are compared
line by line with ``oracle.py``, an independent model of the format; two of them, which use the
decoders, also have golden files checked by hand against their hex (see the comments).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import oracle
from .conftest import GOLDEN, hexbytes, run_cli, v2_batch, write

# §18.1: transactional COMMIT marker, baseOffset 1, pid 0, epoch 0, coordinatorEpoch 0 (78 bytes)
COMMIT_1 = hexbytes("""
0000000000000001 00000042 00000000 02 c84cc350 0030 00000000 000001873eac3de3 000001873eac3de3
0000000000000000 0000 ffffffff 00000001  20 00 00 00 08 00000001 0c 000000000000 00""")
# §18.1: KRaft snapshot header control batch (83 bytes)
SNAPSHOT_HEADER = hexbytes("""
0000000000000000 00000047 00000000 02 cb09f114 0020 00000000 00000180ff31c30d 00000180ff31c30d
ffffffffffffffff ffff ffffffff 00000001  2a 00 00 00 08 00000003 16 0000 0000000000002710 00 00""")
# §18.1: v1 message, offset 0, ts 1548121485387, key null, value "abc" (37 bytes)
V1_ABC = hexbytes("0000000000000000 00000019 eac5d7ee 01 00 00000168733b304b ffffffff 00000003 "
                  "616263")
# §18.1 (a): v0 message, key null, value "message1" (34 bytes, crc 3916773564)
V0_MESSAGE1 = hexbytes("0000000000000000 00000016 e97538bc 00 00 ffffffff 00000008 "
                       "6d65737361676531")
# §18.2: v2, key "key" value "value", ts 1700000000000 (76 bytes, crc 3680410845)
V2_KEY_VALUE = hexbytes("""
0000000000000000 00000040 00000000 02 db5e9cdd 0000 00000000 0000018bcfe56800 0000018bcfe56800
ffffffffffffffff ffff ffffffff 00000001  1c 00 00 00 06 6b6579 0a 76616c7565 00""")
# §18.2: COMMIT marker at offset 10, pid 1000, epoch 5, coordinatorEpoch 7, leaderEpoch 3 (crc
# 1087706345)
COMMIT_10 = hexbytes("""
000000000000000a 00000042 00000003 02 40d514e9 0030 00000000 0000018bcfe56800 0000018bcfe56800
00000000000003e8 0005 ffffffff 00000001  20 00 00 00 08 00000001 0c 0000 00000007 00""")


def golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


def test_strimzi_transaction_dump(chdir_tmp):
    """§16.4, verbatim: a transactional record and its COMMIT marker (Kafka 3.4 output)."""
    data = v2_batch([(1680383687941, None, b"tset a si siht")], producer_id=0, producer_epoch=0,
                    base_sequence=0, transactional=True)
    rel = "kafka-logs/output-topic-0/00000000000000000000.log"
    write(chdir_tmp / rel, data, COMMIT_1)
    r = run_cli("dump", "--deep-iteration", "--print-data-log", "--files", rel)
    assert r.rc == 0, r
    expected = golden("strimzi_txn.txt").replace("/tmp/" + rel, rel)
    assert r.text == expected
    assert r.err == ""


def test_kraft_snapshot_header(chdir_tmp):
    """PR #12084's example: 'Snapshot end offset: 0, epoch: 0' and the SnapshotHeader JSON."""
    write(chdir_tmp / "00000000000000000000-0000000000.checkpoint", SNAPSHOT_HEADER)
    r = run_cli("dump", "--deep-iteration", "--files", "00000000000000000000-0000000000.checkpoint")
    assert r.rc == 0, r
    assert r.text == golden("kraft_snapshot_header.txt")


@pytest.mark.parametrize("data,name", [(V1_ABC, "legacy_v1.txt"), (V0_MESSAGE1, "legacy_v0.txt")])
def test_legacy_messages(chdir_tmp, data, name):
    """v0/v1 batch lines ('offset: ... NoTimestampType: -1 ...') and the record line ending in
    'isValid: true crc: <crc>' (the golden files are Kafka 4.4.0's kafka-dump-log output on
    these bytes; the Scala tool of Kafka 4.2 and older printed a stray '}' after the CRC)."""
    write(chdir_tmp / "00000000000000000000.log", data)
    r = run_cli("dump", "--print-data-log", "--files", "00000000000000000000.log")
    assert r.rc == 0, r
    assert r.text == golden(name)


def test_v2_vectors_and_non_consecutive_report(chdir_tmp):
    write(chdir_tmp / "00000000000000000000.log", V2_KEY_VALUE, COMMIT_10)
    r = run_cli("dump", "--print-data-log", "--files", "00000000000000000000.log")
    assert r.rc == 0, r
    assert r.text == golden("v2_vectors.txt")
    absolute = os.path.join(str(chdir_tmp), "00000000000000000000.log")
    assert r.err_lines == [f"Non-consecutive offsets in {absolute}", "  0 is followed by 10"]


def test_v2_vectors_skip_record_metadata(chdir_tmp):
    """--skip-record-metadata: '| key: ... payload: ...'; a control record leaves an empty line."""
    write(chdir_tmp / "00000000000000000000.log", V2_KEY_VALUE, COMMIT_10)
    r = run_cli("dump", "--print-data-log", "--skip-record-metadata", "--files",
                "00000000000000000000.log")
    assert r.rc == 0, r
    assert r.text == golden("v2_vectors_skip_metadata.txt")


def test_v2_vectors_shallow(chdir_tmp):
    """Without deep iteration: batch lines only, no record lines, no offset report."""
    write(chdir_tmp / "00000000000000000000.log", V2_KEY_VALUE, COMMIT_10)
    r = run_cli("dump", "--files", "00000000000000000000.log")
    assert r.rc == 0, r
    assert r.text == golden("v2_vectors_shallow.txt")
    assert r.err == ""


def test_kafka_print_data_log_test_shape(chdir_tmp):
    """DumpLogSegmentsTest.testPrintDataLog: every record line starts with '| offset: N' and ends
    with 'headerKeys: [] key: message key N payload: message value N'."""
    batches = []
    for b in range(4):
        recs = [(1_700_000_000_000 + i, b"message key %d" % i, b"message value %d" % i)
                for i in range(b * 5, b * 5 + 5)]
        batches.append(v2_batch(recs, base_offset=b * 5))
    write(chdir_tmp / "00000000000000000000.log", *batches)
    r = run_cli("dump", "--print-data-log", "--files", "00000000000000000000.log")
    recs = [ln for ln in r.lines if ln.startswith("|")]
    assert len(recs) == 20
    for n, ln in enumerate(recs):
        assert ln.startswith(f"| offset: {n} ")
        assert ln.endswith(f"headerKeys: [] key: message key {n} payload: message value {n}")


# -- the real broker files of the conformance corpus ----------------------------------------------
def _corpus_logs(files_dir: Path):
    out = []
    for p in sorted(files_dir.rglob("*")):
        if p.suffix in (".log", ".checkpoint") and p.is_file():
            if p.name.endswith(".log") or p.name == "bootstrap.checkpoint":
                out.append(p)
    return out


@pytest.mark.parametrize("mode", ["shallow", "deep", "print"])
def test_corpus_matches_oracle(corpus, mode):
    """Every real segment and bootstrap snapshot, line by line against the independent model."""
    files_dir = corpus / "files"
    logs = _corpus_logs(files_dir)
    assert logs
    flags = {"shallow": [], "deep": ["--deep-iteration"], "print": ["--print-data-log"]}[mode]
    for p in logs:
        rel = str(p.relative_to(files_dir))
        r = run_cli("dump", *flags, "--files", rel, cwd=files_dir)
        assert r.rc == 0, r
        data = p.read_bytes()
        base = int(p.name.split(".")[0]) if p.name.endswith(".log") else 0
        expected = oracle.dump_lines(data, base, mode != "shallow", mode == "print", p.name)
        if p.name == "bootstrap.checkpoint":
            expected[0] = "KRaft bootstrap snapshot"
        assert r.text == f"Dumping {rel}\n" + "".join(line + "\n" for line in expected), rel


def test_corpus_cluster_metadata_golden(corpus):
    """kafka-tester@018f9bc (2 batches, KRaft bootstrap records).  Checked by hand against the hex:
    the first record's value 01 17 00 01 00 12 12 'Bootstrap records' is frame 1, apiKey 23
    (BeginTransactionRecord) v0 with tagged field 0 (Name, compact string of 17 chars); the
    PartitionRecord v1 value (65 bytes) decodes to partition 0, topic id bfd99e5e...0c
    (v9meXjI1RVKB-NSvF0GXDA), replicas/isr [1], no removing/adding replicas, leader 1, epochs 0,
    one directory, and no tagged fields (LeaderRecoveryState keeps its default and is omitted)."""
    files_dir = corpus / "files"
    rel = "kafka-tester@018f9bc/__cluster_metadata-0/00000000000000000000.log"
    r = run_cli("dump", "--cluster-metadata-decoder", "--files", rel, cwd=files_dir)
    assert r.rc == 0, r
    assert r.text == golden("kafka-tester@018f9bc.cluster-metadata.txt")
    # offsets 1-4 then 34-35: Kafka 4.4's report (checked against its kafka-dump-log): the first
    # record is checked against -1, pairs in ascending order (the path as the CLI's working
    # directory resolves it: the corpus may be reached through a symbolic link)
    where = files_dir.resolve() / rel
    assert r.err_lines == [f"Non-consecutive offsets in {where}", "  -1 is followed by 1",
                           "  4 is followed by 34"]


def test_corpus_offsets_golden(corpus):
    """Bheem6005 __consumer_offsets-0: two GroupMetadata records (key version 2, value version 3);
    the consumer member's subscription (version 1: topics, null userData, no owned partitions)
    and assignment (cities-0) are decoded into JSON as Kafka 3.8+ does."""
    files_dir = corpus / "files"
    rel = "Bheem6005-kafka@78ab3de/__consumer_offsets-0/00000000000000000000.log"
    r = run_cli("dump", "--offsets-decoder", "--files", rel, cwd=files_dir)
    assert r.rc == 0, r
    assert r.text == golden("Bheem6005-kafka@78ab3de.offsets.txt")


def test_corpus_offsets_decoder_every_record(corpus):
    """Every __consumer_offsets record of the corpus decodes (no 'Error at offset')."""
    files_dir = corpus / "files"
    for p in sorted(files_dir.rglob("__consumer_offsets-*/*.log")):
        r = run_cli("dump", "--offsets-decoder", str(p))
        assert r.rc == 0, r
        recs = [ln for ln in r.lines if ln.startswith("| ")]
        assert recs
        for ln in recs:
            assert " key: {\"type\":\"" in ln, ln
            assert "Error at offset" not in ln and "Unknown record type" not in ln
            assert ln.endswith("payload: <DELETE>") or ' payload: {"version":"' in ln


def test_corpus_cluster_metadata_every_record(corpus):
    """Every KRaft metadata record of the corpus decodes to JSON with a known type name."""
    files_dir = corpus / "files"
    paths = (sorted(files_dir.rglob("__cluster_metadata-0/*.log"))
             + sorted(files_dir.rglob("bootstrap.checkpoint")))
    for p in paths:
        r = run_cli("dump", "--cluster-metadata-decoder", str(p))
        assert r.rc == 0, r
        for ln in r.lines:
            if ln.startswith("| ") and " payload: " in ln:
                payload = ln.split(" payload: ", 1)[1]
                assert payload.startswith('{"type":"') and '_RECORD","version":' in payload, ln


def test_corpus_indexes(corpus):
    """Real .index/.timeindex files: entries print, --verify-index-only finds no mismatch, the
    sanity check passes."""
    files_dir = corpus / "files"
    pairs = [
        ("kafka-tester@510714e/__cluster_metadata-0/00000000000000000000.index",
         ["offset: 57 position: 4154", "offset: 114 position: 8258"]),
        ("kafka-tester@510714e/__cluster_metadata-0/00000000000000000000.timeindex",
         ["timestamp: 1726045967500 offset: 57", "timestamp: 1726045996206 offset: 114",
          "timestamp: 1726046001742 offset: 128"]),
        ("LDI-POC@8030792/__consumer_offsets-6/00000000000000000000.index",
         ["offset: 3 position: 4730", "offset: 7 position: 9571"]),
        ("kafka-tester@510714e/foo-0/00000000000000000000.index", None),
    ]
    for rel, lines in pairs:
        r = run_cli("dump", "--files", rel, cwd=files_dir)
        assert r.rc == 0, r
        if lines is None:
            assert r.lines == [f"Dumping {rel}", f"{rel} is empty."]
            continue
        assert r.lines == [f"Dumping {rel}"] + lines
        assert r.err == ""
        r = run_cli("dump", "--verify-index-only", "--files", rel, cwd=files_dir)
        assert r.lines == [f"Dumping {rel}"] and r.err == ""
        r = run_cli("dump", "--index-sanity-check", "--files", rel, cwd=files_dir)
        assert r.lines == [f"Dumping {rel}", f"{rel} passed sanity check."]


def test_corpus_producer_snapshots(corpus):
    """foo-0's snapshot: one producer (id 0, epoch 0) whose last batch is offset 0, sequence 0;
    an empty snapshot prints nothing."""
    files_dir = corpus / "files"
    rel = "kafka-tester@510714e/foo-0/00000000000000000001.snapshot"
    r = run_cli("dump", "--files", rel, cwd=files_dir)
    assert r.lines == [
        f"Dumping {rel}",
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty "
        "lastTimestamp: 1726045973899 firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: "
        "0 timestamp: 1726045973899",
    ]
    rel = "LDI-POC@8030792/__consumer_offsets-6/00000000000000000013.snapshot"
    r = run_cli("dump", "--files", rel, cwd=files_dir)
    assert r.lines == [f"Dumping {rel}"]


def test_corpus_partition_directory_and_root(corpus, tmp_path):
    """A partition directory dumps its segments; a log root dumps every partition (no indexes)."""
    files_dir = corpus / "files"
    r = run_cli("dump", "kafka-tester@e856b9a/foo-0", cwd=files_dir)
    assert r.rc == 0, r
    assert r.lines[0] == "Dumping kafka-tester@e856b9a/foo-0/00000000000000000000.log"
    r = run_cli("dump", "kafka-tester@e856b9a", cwd=files_dir)
    dumped = [ln for ln in r.lines if ln.startswith("Dumping ")]
    assert dumped == ["Dumping kafka-tester@e856b9a/__cluster_metadata-0/00000000000000000000.log",
                      "Dumping kafka-tester@e856b9a/foo-0/00000000000000000000.log"]
