"""``kafkalog dump`` against Apache Kafka's own ``kafka-dump-log`` (issue 26, part 1).

Kafka's tool (``org.apache.kafka.tools.DumpLogSegments`` of the release pinned in ``pom.xml``,
run in one JVM by ``KafkaTool``'s ``dump_log``) and ``kafkalog dump`` are given the same flags and
the same files -- every file the broker of ``conftest.broker_matrix`` wrote, after its clean
shutdown -- and must print the same bytes, on stdout and on stderr.  Where Kafka's tool throws,
kafkalog prints ``kafkalog dump: error: <Kafka's message>`` on stderr and exits 1 (docs/cli.md,
deliberate difference 2).
"""
from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import kafkalog

import kafka_support as ks
from kafka_matrix import PARTITIONS

pytestmark = pytest.mark.kafka

DUMP_CLASS = "org.apache.kafka.tools.DumpLogSegments"
PKG_PARENT = str(Path(kafkalog.__file__).resolve().parent.parent)


def _files(root: Path, suffix: str, partitions) -> List[str]:
    out: List[str] = []
    for name in partitions:
        out += sorted(str(f) for f in (root / name).glob("*" + suffix))
    return out


def cases(root: Path) -> Dict[str, List[str]]:
    """Each case: kafka-dump-log's arguments."""
    user = [f"{t}-{p}" for t, parts in PARTITIONS.items() for p in parts]
    every = sorted(d.name for d in root.iterdir() if d.is_dir())
    logs = ",".join(_files(root, ".log", user))
    indexes = _files(root, ".index", user) + _files(root, ".timeindex", user)
    return {
        "batches": ["--files", logs],
        "deep_iteration": ["--deep-iteration", "--files", logs],
        "print_data_log": ["--print-data-log", "--files", logs],
        "print_data_log_text_only": ["--print-data-log", "--files",
                                     ",".join(_files(root, ".log", ["compacted-0"]))],
        "skip_record_metadata": ["--print-data-log", "--skip-record-metadata", "--files", logs],
        "max_bytes": ["--deep-iteration", "--max-bytes", "5000", "--files", logs],
        "string_decoder_classes": [
            "--key-decoder-class", "org.apache.kafka.tools.api.StringDecoder",
            "--value-decoder-class", "org.apache.kafka.tools.api.StringDecoder",
            "--files", ",".join(_files(root, ".log", ["compacted-0"]))],
        "offset_index": ["--files", ",".join(_files(root, ".index", every))],
        "time_index": ["--files", ",".join(_files(root, ".timeindex", every))],
        "verify_index_only": ["--verify-index-only", "--files", ",".join(indexes)],
        "index_sanity_check": ["--index-sanity-check", "--files", ",".join(indexes)],
        # the KRaft log's time index fails the broker's sanity check: Kafka's tool throws
        "index_sanity_check_metadata": [
            "--index-sanity-check", "--files",
            ",".join(_files(root, ".timeindex", ["__cluster_metadata-0"]))],
        "transaction_index": ["--files", ",".join(_files(root, ".txnindex", every))],
        "producer_snapshot": ["--files", ",".join(_files(root, ".snapshot", every))],
        "offsets_decoder": ["--offsets-decoder", "--files",
                            ",".join(_files(root, ".log", ["__consumer_offsets-0"]))],
        "transaction_log_decoder": ["--transaction-log-decoder", "--files",
                                    ",".join(_files(root, ".log", ["__transaction_state-0"]))],
        "cluster_metadata_decoder": [
            "--cluster-metadata-decoder", "--files",
            ",".join(_files(root, ".log", ["__cluster_metadata-0"])
                     + _files(root, ".checkpoint", ["__cluster_metadata-0"]))],
    }


CASES = ["batches", "deep_iteration", "print_data_log", "print_data_log_text_only",
         "skip_record_metadata", "max_bytes", "string_decoder_classes", "offset_index",
         "time_index",
         "verify_index_only", "index_sanity_check", "index_sanity_check_metadata",
         "transaction_index", "producer_snapshot", "offsets_decoder", "transaction_log_decoder",
         "cluster_metadata_decoder"]


@pytest.fixture(scope="session")
def kafka_dumps(kafka_env, broker_matrix) -> Dict[str, Tuple[List[str], bytes, bytes, str]]:
    """case -> (arguments, Kafka's stdout, Kafka's stderr, the exception Kafka's tool threw)."""
    all_cases = cases(broker_matrix.clean_dir)
    assert sorted(all_cases) == sorted(CASES)
    steps = [{"op": "dump_log", "class": DUMP_CLASS, "args": args} for args in all_cases.values()]
    lines = ks.run_tool(kafka_env, {"bootstrap": "unused", "steps": steps})
    assert len(lines) == len(steps)
    return {name: (args, base64.b64decode(r["stdout"]), base64.b64decode(r["stderr"]), r["error"])
            for (name, args), r in zip(all_cases.items(), lines)}


_RUNS: Dict[str, subprocess.CompletedProcess] = {}


def run_kafkalog(case: str, args: List[str]) -> subprocess.CompletedProcess:
    """``python -m kafkalog dump ARGS`` (the twin this test session uses), once per case."""
    if case not in _RUNS:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [PKG_PARENT, env.get("PYTHONPATH")]))
        _RUNS[case] = subprocess.run([sys.executable, "-m", "kafkalog", "dump", *args], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    return _RUNS[case]


def _by_file(out: bytes) -> Dict[str, List[bytes]]:
    """stdout split into each file's lines (``Dumping <file>`` starts one)."""
    files: Dict[str, List[bytes]] = {}
    current: List[bytes] = files.setdefault("", [])
    for line in out.split(b"\n"):
        if line.startswith(b"Dumping "):
            current = files.setdefault(line[8:].decode("utf-8", "replace"), [])
        current.append(line)
    return files


def _first_difference(kafka: bytes, ours: bytes) -> str:
    theirs_by, ours_by = _by_file(kafka), _by_file(ours)
    for name in list(theirs_by) + [n for n in ours_by if n not in theirs_by]:
        a, b = theirs_by.get(name, []), ours_by.get(name, [])
        for i in range(max(len(a), len(b))):
            la = a[i] if i < len(a) else b"<no line>"
            lb = b[i] if i < len(b) else b"<no line>"
            if la != lb:
                return (f"{name}, line {i + 1} of its dump:\n  kafka-dump-log: {la[:400]!r}\n"
                        f"  kafkalog dump:  {lb[:400]!r}")
    return "(same lines)"


@pytest.mark.parametrize("case", CASES)
def test_dump_stdout(kafka_dumps, case):
    """stdout, byte for byte."""
    args, out, _, _ = kafka_dumps[case]
    ours = run_kafkalog(case, args)
    assert ours.stdout == out, f"{case}: first difference in {_first_difference(out, ours.stdout)}"


@pytest.mark.parametrize("case", CASES)
def test_dump_stderr(kafka_dumps, case):
    """stderr (the end-of-run reports), each file's report byte for byte; an exception of
    Kafka's tool is kafkalog's one-line error with Kafka's message and exit status 1."""
    args, _, err, error = kafka_dumps[case]
    ours = run_kafkalog(case, args)
    text = ours.stderr.decode("utf-8", "replace")
    if error is None:
        assert ours.returncode == 0, text[-2000:]
    else:
        message = error.split(": ", 1)[1] if ": " in error else error
        assert ours.returncode == 1
        tail = f"kafkalog dump: error: {message}\n"
        assert text.endswith(tail)
        text = text[: -len(tail)]
    assert _reports(text) == _reports(err.decode("utf-8", "replace"))


def _reports(stderr: str) -> List[str]:
    """The end-of-run reports, one block per file (a line and its indented lines), in a fixed
    order: Kafka's tool lists the files in hash-map order (docs/cli.md, deliberate difference
    10), the content of each block is compared as printed."""
    blocks: List[str] = []
    for line in stderr.splitlines(keepends=True):
        if line.startswith(" ") and blocks:
            blocks[-1] += line
        else:
            blocks.append(line)
    return sorted(blocks)
