"""``kafkalog dump`` in a pipe: JSON lines that say which topic and partition each record is of
(so that ``jq`` keeps them over a whole root), ``--from-offset`` past the end of a log said on
stderr with exit status 1, and kcat's habits: ``--count N`` and ``--format`` with kcat's ``-f``
tokens.  Every record printed is compared with the records kafkalog.arrow reads from the same
log."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess

import pytest

from kafkalog.demo import generate

from .conftest import run_cli

pa = pytest.importorskip("pyarrow")
import kafkalog.arrow as ka  # noqa: E402


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """8 partitions of every codec, v0/v1 messages, LogAppendTime, transactions, 16 KiB
    segments (so that a partition has several)."""
    r = str(tmp_path_factory.mktemp("pipe") / "root")
    generate(r, records=1200, segment_bytes=16 * 1024)
    return r


@pytest.fixture(scope="module")
def records(root):
    """Every data record of the root (control markers left out), as to_arrow reads them."""
    t = ka.to_arrow(root, ["topic", "partition", "offset", "key", "value", "timestamp",
                           "headers"], timestamp_unit=None)
    return t.to_pylist()


def _key(r):
    return (r["topic"], r["partition"], r["offset"])


# -- JSON lines carry the partition ---------------------------------------------------------------
def test_json_records_and_batches_say_their_topic_partition_and_file(root, records):
    r = run_cli("dump", "--json", "--print-data-log", root)
    assert r.rc == 0, r
    objs = [json.loads(x) for x in r.lines]
    recs = [o for o in objs if o["type"] == "record" and "control" not in o]
    assert sorted(map(_key, recs)) == sorted(map(_key, records))
    for o in recs:
        d = os.path.basename(os.path.dirname(o["file"]))
        assert d == f"{o['topic']}-{o['partition']}" and o["file"].endswith(".log")
    batches = [o for o in objs if o["type"] == "batch"]
    assert batches and all(f"{b['topic']}-{b['partition']}" in b["file"] for b in batches)


def _docs_jq_recipe():
    """The jq filter of docs/cli.md's JSON recipe over a root."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "docs", "cli.md"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("kafkalog dump --json") and "| jq" in line:
                return line.split("| jq", 1)[1].strip().split(" ", 1)
    raise AssertionError("docs/cli.md has no 'kafkalog dump --json ... | jq' recipe")


def test_the_docs_jq_recipe_keeps_topic_and_partition(root, records):
    flags, program = _docs_jq_recipe()
    program = program.strip().strip("'")
    out = run_cli("dump", "--json", "--print-data-log", root).out
    jq = shutil.which("jq")
    if jq is None:  # the recipe's selection, done here: keep records, with their partition
        got = [json.loads(x) for x in out.decode().splitlines()]
        got = [o for o in got if o["type"] == "record"]
    else:
        p = subprocess.run([jq, flags, program], input=out, capture_output=True, check=True)
        got = [json.loads(x) for x in p.stdout.decode().splitlines()]
    data = [o for o in got if o.get("key") is not None or o.get("value") is not None]
    assert {(o["topic"], o["partition"]) for o in data} == {
        (r["topic"], r["partition"]) for r in records}
    assert all({"topic", "partition", "offset"} <= set(o) for o in got)


# -- --from-offset past the end --------------------------------------------------------------------
def test_from_offset_past_the_end_says_so(root):
    part = os.path.join(root, "orders-1")
    end = max(r for r in _offsets(root, "orders", 1)) + 1
    r = run_cli("dump", "--deep-iteration", "--from-offset", str(end), part)
    assert r.rc == 1
    assert r.err_lines == [
        f"kafkalog dump: error: --from-offset {end} is past the end of the log, nothing to "
        f"print: {part} ends at offset {end} (the log end offset: the offset the next record "
        "will get)"]
    assert not any(x.startswith(("baseOffset", "|")) for x in r.lines)
    # the last offset itself is printed, status 0
    r = run_cli("dump", "--deep-iteration", "--from-offset", str(end - 1), part)
    assert r.rc == 0 and r.err == "" and r.lines[-1].startswith(f"| offset: {end - 1} ")
    # JSON too: the same message and status, nothing on stdout but the file lines
    r = run_cli("dump", "--json", "--from-offset", str(end + 10), part)
    assert r.rc == 1 and "past the end of the log" in r.err
    assert {json.loads(x)["type"] for x in r.lines} == {"file"}


def test_from_offset_past_some_partitions_of_a_root(root):
    ends = {(t, p): max(_offsets(root, t, p)) + 1 for t, p in
            [("orders", 0), ("legacy", 0), ("payments", 0)]}
    off = min(ends.values())  # past the end of one partition at least, not of all
    assert off < max(ends.values())
    r = run_cli("dump", "--from-offset", str(off), root)
    assert r.rc == 0
    short = [x for x in r.err_lines if "is past the end of" in x]
    assert short and all(x.startswith(f"kafkalog dump: --from-offset {off} is past the end of ")
                         for x in short)
    assert any("baseOffset" in x for x in r.lines)


def _offsets(root, topic, partition):
    return ka.to_arrow(os.path.join(root, f"{topic}-{partition}"), ["offset"]) \
        .column("offset").to_pylist()


# -- --count ------------------------------------------------------------------------------------
def test_count_stops_after_n_records_across_files(root, records):
    r = run_cli("dump", "--print-data-log", "--count", "5", root)
    assert r.rc == 0, r
    lines = [x for x in r.lines if x.startswith("| offset:")]
    assert len(lines) == 5
    # kcat's -c, the short form; across segments and partitions: more than one file's worth
    many = len(_offsets(root, "events", 0)) + 3
    r = run_cli("dump", "-c", str(many), "--json", "--print-data-log", root)
    recs = [json.loads(x) for x in r.lines if '"type":"record"' in x]
    assert len(recs) == many and {o["partition"] for o in recs} == {0, 1}
    assert "trailing_bytes" not in r.text
    # batch lines only: N batches
    r = run_cli("dump", "-c", "3", os.path.join(root, "orders-0"))
    assert r.rc == 0 and sum(x.startswith("baseOffset") for x in r.lines) == 3
    assert sum(x.startswith("| offset") for x in r.lines) == 0
    # with seeking
    r = run_cli("dump", "-c", "2", "--from-offset", "7", "--deep-iteration",
                os.path.join(root, "orders-0"))
    assert [x.split()[2] for x in r.lines if x.startswith("| offset")] == ["7", "8"]
    for bad in ("0", "-1", "x"):
        assert run_cli("dump", "--count", bad, root).rc == 2


# -- --format -------------------------------------------------------------------------------------
def test_format_tokens_are_kcats(root, records):
    fmt = r"%t\t%p\t%o\t%T\t%K\t%S\t%k\t%h\t%s|%%\x41\n"
    r = run_cli("dump", "--format", fmt, root)
    assert r.rc == 0 and r.err == "", r
    want = []
    for rec in sorted(records, key=_key):
        k, v = rec["key"], rec["value"]
        hd = b",".join(h["key"].encode() + b"=" + (h["value"] or b"")
                       for h in (rec["headers"] or []))
        want.append(b"%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s|%%A\n" % (
            rec["topic"].encode(), rec["partition"], rec["offset"], rec["timestamp"],
            -1 if k is None else len(k), -1 if v is None else len(v), k or b"", hd, v or b""))
    got = r.out.split(b"A\n")[:-1]
    assert sorted(x + b"A\n" for x in got) == sorted(want)
    # nothing but the records: no 'Dumping', batch lines or reports
    assert not any(x.startswith((b"Dumping", b"baseOffset", b"Log starting")) for x in got)


def test_format_binary_lengths_decoders_and_count(root, records):
    part = os.path.join(root, "payments-0")
    mine = [x for x in records if (x["topic"], x["partition"]) == ("payments", 0)]
    r = run_cli("dump", "-f", "%R%s", "-c", "4", part)
    out, got = r.out, []
    while out:
        (n,) = struct.unpack_from(">i", out)
        got.append(out[4:4 + max(n, 0)])
        out = out[4 + max(n, 0):]
    assert got == [x["value"] or b"" for x in mine[:4]]
    r = run_cli("dump", "-f", r"%o %k\n", "--key-decoder", "hex", "-c", "2", part)
    assert r.lines == [f"{x['offset']} {(x['key'] or b'').hex()}" for x in mine[:2]]


def test_format_errors_are_usage_errors(root):
    for fmt in ("%q", "100%", "\\", "\\xZZ", "\\y"):
        r = run_cli("dump", "--format", fmt, root)
        assert r.rc == 2 and "--format" in r.err, (fmt, r)
    r = run_cli("dump", "--format", "%o", "--json", root)
    assert r.rc == 2 and "--format and --json" in r.err


def test_format_a_loose_segment_and_other_files(root, tmp_path):
    seg = sorted(n for n in os.listdir(os.path.join(root, "orders-0")) if n.endswith(".log"))[0]
    shutil.copy(os.path.join(root, "orders-0", seg), tmp_path / seg)
    r = run_cli("dump", "-f", r"[%t][%p]%o\n", "-c", "2", str(tmp_path / seg))
    assert r.lines == ["[][-1]0", "[][-1]1"]
    idx = os.path.join(root, "orders-0", seg.replace(".log", ".index"))
    r = run_cli("dump", "-f", "%o", idx)
    assert r.rc == 1 and "Ignoring" in r.err and r.out == b""
