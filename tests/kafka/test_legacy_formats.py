"""Message formats v0 and v1 judged by a real broker (issue 26, part 1: the older release).

A 4.x broker writes only v2, so a Kafka 3.x broker in ZooKeeper mode (``zk_broker``) with
``inter.broker.protocol.version`` 2.8 writes them: one topic per format, its
``message.format.version`` 0.9.0 (v0) or 0.10.2 (v1), one partition per codec (none, gzip,
snappy, lz4; zstd needs v2).  Kafka's 3.x Java producer sends (no idempotence, no headers: the
old formats have neither), the broker converts every batch to the topic's format, its 3.x
consumer reads everything back, and the broker stops cleanly.  kafkalog must then read what the
consumer got (``Log.open(read_only=True)``, ``to_arrow``) and ``kafkalog dump --deep-iteration
--print-data-log`` must print what the 3.x ``kafka.tools.DumpLogSegments`` prints.
"""
from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from test_broker_reads import arrow_rows, assert_same, consumer_rows, log_rows

import kafka_support as ks
import zk_broker as zk
from kafka_matrix import Gen, producer, send

pa = pytest.importorskip("pyarrow")
import kafkalog.arrow as ka  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

pytestmark = pytest.mark.kafka

FORMATS = {"v0": ("0.9.0", 0), "v1": ("0.10.2", 1)}  # topic -> (message.format.version, magic)
CODECS = ("none", "gzip", "snappy", "lz4")
DUMP_CLASS = "kafka.tools.DumpLogSegments"  # Scala, in kafka_2.13 3.x
DUMP_CLASS_4 = "org.apache.kafka.tools.DumpLogSegments"  # its Java successor, in kafka-tools 4.x
CASES = [(t, p) for t in FORMATS for p in range(len(CODECS))]


class Legacy:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.records: Dict[Any, List[Dict[str, Any]]] = {}
        self.bounds: Dict[Any, Any] = {}
        self.dump: Dict[str, bytes] = {}  # Kafka major version -> its dump's stdout
        self.dump_args: List[str] = []


def _records(gen: Gen, n: int) -> List[Dict[str, Any]]:
    out = []
    for r in gen.records(n):
        r["headers"] = []
        out.append(r)
    return out


@pytest.fixture(scope="module")
def legacy(tmp_path_factory) -> Legacy:
    try:
        env = zk.prepare()
    except ks.Unavailable as e:
        pytest.skip(str(e))
    work = tmp_path_factory.mktemp("kafka3-zk")
    keeper = zk.ZooKeeper(env, work / "zk")
    broker = zk.ZkBroker(env, work / "broker", keeper)
    base_ts = (int(time.time() * 1000) // 1000) * 1000 - 3600 * 1000
    keeper.start()
    try:
        broker.format()
        broker.start()
        gen = Gen(2603, base_ts)
        steps: List[Dict[str, Any]] = [{"op": "create_topics", "topics": [
            {"name": t, "partitions": len(CODECS),
             "configs": {"message.format.version": v, "segment.bytes": "16384"}}
            for t, (v, _) in FORMATS.items()]}]
        for codec in CODECS:
            steps.append(producer(codec, **{"compression.type": codec, "linger.ms": "20",
                                            "enable.idempotence": "false", "acks": "1"}))
        for chunk in range(6):
            for topic in FORMATS:
                for p, codec in enumerate(CODECS):
                    steps.append(send(codec, topic, p, _records(gen, 12)))
        for topic in FORMATS:
            steps.append({"op": "consume", "topic": topic, "partitions": list(range(len(CODECS))),
                          "isolation": "read_uncommitted"})
        m = Legacy(broker.log_dir)
        for line in ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": steps}):
            if line["op"] == "record":
                m.records.setdefault((line["topic"], line["partition"], line["isolation"]),
                                     []).append(line)
            elif line["op"] == "consumed":
                for p, start in line["beginning"].items():
                    m.bounds[(line["topic"], int(p))] = (start, line["end"][p])
        broker.stop()
    finally:
        broker.kill()
        keeper.stop()
    assert (broker.log_dir / ".kafka_cleanshutdown").exists(), broker.log_tail()
    logs = sorted(str(f) for t, p in CASES for f in (broker.log_dir / f"{t}-{p}").glob("*.log"))
    m.dump_args = ["--deep-iteration", "--print-data-log", "--files", ",".join(logs)]
    # the 3.x tool that wrote them, and the 4.x tool that kafkalog's dump follows
    for name, tool_env, cls in (("3", env, DUMP_CLASS), ("4", ks.prepare(), DUMP_CLASS_4)):
        (out,) = ks.run_tool(tool_env, {"bootstrap": "unused", "steps": [
            {"op": "dump_log", "class": cls, "args": m.dump_args}]})
        assert out["error"] is None, (name, out["error"])
        m.dump[name] = base64.b64decode(out["stdout"])
    return m


def test_broker_wrote_the_old_formats(legacy):
    """Every batch of the v0 topic is magic 0, of the v1 topic magic 1, compressed with its
    partition's codec; the consumer got every record sent, across several segments."""
    for topic, p in CASES:
        d = legacy.log_dir / f"{topic}-{p}"
        with Log.open(d, read_only=True) as log:
            found = {(b.magic, int(b.compression_type)) for b in log.iter_batches()}
        assert found == {(FORMATS[topic][1], p)}, (topic, p, found)  # codec ids 0-3, in order
        assert len(legacy.records[(topic, p, "read_uncommitted")]) == 72
    assert len(list((legacy.log_dir / "v1-0").glob("*.log"))) >= 2
    v0 = [r for (t, _, _), rs in legacy.records.items() if t == "v0" for r in rs]
    v1 = [r for (t, _, _), rs in legacy.records.items() if t == "v1" for r in rs]
    assert {(r["timestamp"], r["timestampType"]) for r in v0} == {(-1, -1)}  # no timestamps
    assert all(r["timestamp"] > 0 and r["timestampType"] == 0 for r in v1)  # CreateTime
    for rs in (v0, v1):  # null and empty keys and values, a large key
        assert {r["key"] for r in rs} >= {None, ""} and {r["value"] for r in rs} >= {None, ""}
        assert max(len(r["key"] or "") for r in rs) > 3000


@pytest.mark.parametrize("topic,p", CASES, ids=[f"{t}-{c}" for t in FORMATS for c in CODECS])
def test_log_records(legacy, topic, p):
    with Log.open(legacy.log_dir / f"{topic}-{p}", read_only=True) as log:
        got = log_rows(log, "read_uncommitted")
        bounds = (log.log_start_offset, log.log_end_offset)
    assert_same(consumer_rows(legacy, topic, p, "read_uncommitted"), got, f"{topic}-{p}")
    assert bounds == legacy.bounds[(topic, p)]


@pytest.mark.parametrize("topic,p", CASES, ids=[f"{t}-{c}" for t in FORMATS for c in CODECS])
def test_to_arrow(legacy, topic, p):
    table = ka.to_arrow(str(legacy.log_dir / f"{topic}-{p}"), timestamp_unit=None)
    assert_same(consumer_rows(legacy, topic, p, "read_uncommitted"), arrow_rows(table),
                f"to_arrow {topic}-{p}")


_OURS: Dict[str, bytes] = {}


def kafkalog_dump(args: List[str]) -> bytes:
    """``python -m kafkalog dump ARGS`` (the twin of this session), once."""
    import kafkalog

    if "out" not in _OURS:
        env = dict(os.environ)
        parent = str(Path(kafkalog.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [parent, env.get("PYTHONPATH")]))
        ours = subprocess.run([sys.executable, "-m", "kafkalog", "dump", *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        assert ours.returncode == 0, ours.stderr[-2000:]
        _OURS["out"] = ours.stdout
    return _OURS["out"]


def _same_lines(want: bytes, got: bytes, who: str) -> None:
    a_lines, b_lines = want.split(b"\n"), got.split(b"\n")
    for i, (a, b) in enumerate(zip(a_lines, b_lines)):
        assert b == a, f"line {i + 1}:\n  {who}: {a[:400]!r}\n  kafkalog dump: {b[:400]!r}"
    assert len(b_lines) == len(a_lines)


def test_dump_matches_kafka_4(legacy):
    """``kafkalog dump --deep-iteration --print-data-log`` on the v0/v1 segments prints what
    the 4.x ``kafka-dump-log`` (the release ``pom.xml`` pins) prints, byte for byte."""
    _same_lines(legacy.dump["4"], kafkalog_dump(legacy.dump_args), "kafka-dump-log 4.x")


# the 3.x tool closes each v0/v1 record's crc with a stray '}' (``crc: 123} key: ...``), which
# its 4.x successor no longer prints
_STRAY_BRACE = re.compile(rb"^(\| offset: \d+ .* crc: \d+)\}", re.M)


def test_dump_matches_kafka_3(legacy):
    """... and what the 3.x ``kafka.tools.DumpLogSegments`` that wrote them prints, but for the
    3.x tool's stray ``}`` after each v0/v1 record's crc (found on every record line)."""
    three = legacy.dump["3"]
    fixed, n = _STRAY_BRACE.subn(rb"\1", three)
    assert n == sum(len(v) for v in legacy.records.values())
    _same_lines(fixed, kafkalog_dump(legacy.dump_args), "kafka-dump-log 3.x")
