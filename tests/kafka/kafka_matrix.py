"""The data the Kafka tests produce, and how they drive the broker through it (used by
``conftest.broker_matrix``; see its module doc)."""
from __future__ import annotations

import base64
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import kafka_support as ks

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SMALL_SEGMENTS = {"internal.segment.bytes": "16384", "index.interval.bytes": "1024",
                  "segment.index.bytes": "4096"}
TXN_TIMEOUT = "600000"  # the open transaction must outlive the test


def b64(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else base64.b64encode(b).decode()


def unb64(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else base64.b64decode(s)


@dataclass
class Matrix:
    clean_dir: Path  # the log dir after the final clean shutdown
    unclean_dir: Path  # a copy of the log dir as the SIGKILL left it
    partitions: Dict[str, List[int]]  # user topic -> partitions
    # (topic, partition, isolation) -> the records the Java consumer got, in order
    records: Dict[Tuple[str, int, str], List[Dict[str, Any]]] = field(default_factory=dict)
    # (topic, partition, isolation) -> (beginningOffsets, endOffsets)
    bounds: Dict[Tuple[str, int, str], Tuple[int, int]] = field(default_factory=dict)
    # (topic, partition, isolation) -> [(target, offset or None, timestamp or None)]
    for_times: Dict[Tuple[str, int, str], List[Tuple[int, Optional[int], Optional[int]]]] = field(
        default_factory=dict)
    # (topic, partition, isolation) -> the Admin's ListOffsets answers
    listed: Dict[Tuple[str, int, str], Dict[str, Any]] = field(default_factory=dict)
    crash_acked: int = 0  # records the crash producer had acknowledged before the SIGKILL
    broker_log: str = ""


# -- the data -----------------------------------------------------------------------------------
class Gen:
    """Deterministic keys, values, headers and timestamps of every shape a log holds."""

    def __init__(self, seed: int, base_ts: int, broker_timestamps: bool = True):
        self.rnd = random.Random(seed)
        self.base_ts = base_ts
        self.broker_timestamps = broker_timestamps
        self.n = 0

    def text(self, lo: int, hi: int) -> bytes:
        words = [b"kafka", b"log", b"offset", b"segment", b"batch", b"{\"id\":", b"}", b" "]
        out = b"".join(self.rnd.choice(words) for _ in range(self.rnd.randint(lo, hi)))
        return out

    def record(self, large: bool = False) -> Dict[str, Any]:
        n, self.n = self.n, self.n + 1
        rnd = self.rnd
        key = [None, b"", b"key-%d" % n, self.text(1, 8)][n % 4]
        if n % 41 == 0:
            key = rnd.randbytes(3000)
        value: Optional[bytes] = self.text(2, 60)
        if n % 11 == 0:
            value = None
        elif n % 13 == 0:
            value = b""
        if large:
            value = rnd.randbytes(12_000)  # incompressible; most of a 16 KiB segment
        headers = [
            [],
            [("h", b"v%d" % n)],
            [("a", None), ("b", b"")],
            [("", b"x"), ("dup", b"1"), ("dup", b"2"), ("\u00e9t\u00e9", rnd.randbytes(5))],
        ][n % 4]
        ts: Optional[int] = self.base_ts + n * 7
        if n % 10 == 9:
            ts -= 5000  # timestamps need not grow with offsets
        if n % 17 == 16 and self.broker_timestamps:
            ts = None  # the producer assigns it
        return {"key": b64(key), "value": b64(value), "timestamp": ts,
                "headers": [[k, b64(v)] for k, v in headers]}

    def records(self, count: int, large_at: int = -1) -> List[Dict[str, Any]]:
        return [self.record(large=(i == large_at)) for i in range(count)]


def keyed(key: str, value: Optional[bytes], ts: int) -> Dict[str, Any]:
    return {"key": b64(key.encode()), "value": b64(value), "timestamp": ts, "headers": []}


def producer(name: str, **config: str) -> Dict[str, Any]:
    """A producer step; batches stay below the topics' 16 KiB segments (a batch larger than a
    segment is refused by the broker)."""
    return {"op": "producer", "name": name, "config": {"batch.size": "8192", **config}}


def send(producer: str, topic: str, partition: int,
         records: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"op": "send", "producer": producer, "topic": topic, "partition": partition,
            "records": records, "flush": True}


# the user topics and their partitions
PARTITIONS: Dict[str, List[int]] = {"codecs": list(range(6)), "appendtime": [0], "txn": [0, 1],
                                    "compacted": [0], "retention": [0], "crash": [0, 1]}
INTERNAL = {"__consumer_offsets": [0], "__transaction_state": [0]}


def produce_spec(base_ts: int) -> List[Dict[str, Any]]:
    """The steps that create the topics and fill all but ``compacted`` (filled in rounds) and
    ``crash``."""
    gen = Gen(26, base_ts)
    steps: List[Dict[str, Any]] = [{"op": "create_topics", "topics": [
        # partition i: codec CODECS[i] alone; partition 5: every codec interleaved
        {"name": "codecs", "partitions": 6, "configs": SMALL_SEGMENTS},
        {"name": "appendtime", "partitions": 1,
         "configs": {**SMALL_SEGMENTS, "message.timestamp.type": "LogAppendTime"}},
        {"name": "txn", "partitions": 2, "configs": {**SMALL_SEGMENTS,
                                                     "internal.segment.bytes": "8192"}},
        {"name": "compacted", "partitions": 1, "configs": {
            **SMALL_SEGMENTS, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100", "segment.ms": "100", "min.compaction.lag.ms": "0"}},
        # segment.ms: the first current record opens a segment after the old ones
        {"name": "retention", "partitions": 1, "configs": {
            **SMALL_SEGMENTS, "retention.ms": str(24 * 3600 * 1000), "segment.ms": "3600000"}},
        {"name": "crash", "partitions": 2, "configs": {"internal.segment.bytes": "65536"}},
    ]}]
    for i, codec in enumerate(CODECS):
        cfg = {"compression.type": codec, "linger.ms": "50"}
        if codec == "gzip":  # one producer without a producer id
            cfg.update({"enable.idempotence": "false", "acks": "1"})
        steps.append(producer(codec, **cfg))
    for chunk in range(10):
        for i, codec in enumerate(CODECS):
            steps.append(send(codec, "codecs", i,
                              gen.records(14, large_at=3 if chunk == 4 else -1)))
        for codec in CODECS:
            steps.append(send(codec, "codecs", 5, gen.records(3)))
    steps.append(producer("append", **{"compression.type": "lz4"}))
    for chunk in range(4):
        steps.append(send("append", "appendtime", 0, gen.records(12)))

    # three transactional producers interleaved with an idempotent one
    for name, codec in (("tA", "zstd"), ("tB", "none"), ("tC", "snappy")):
        steps.append(producer(name, **{
            "transactional.id": f"txn-{name}", "compression.type": codec,
            "transaction.timeout.ms": TXN_TIMEOUT, "linger.ms": "10", "batch.size": "4096"}))
    steps.append(producer("plain", **{"compression.type": "lz4", "batch.size": "4096"}))
    for rnd in range(3):
        steps += [{"op": "begin", "producer": "tA"}, {"op": "begin", "producer": "tB"},
                  send("tA", "txn", 0, gen.records(5)), send("tB", "txn", 0, gen.records(5)),
                  send("plain", "txn", 0, gen.records(3)), send("tA", "txn", 1, gen.records(5)),
                  send("tB", "txn", 1, gen.records(4)), send("tA", "txn", 0, gen.records(3)),
                  {"op": "commit", "producer": "tA"}, {"op": "abort", "producer": "tB"},
                  {"op": "begin", "producer": "tB"}, {"op": "begin", "producer": "tC"},
                  {"op": "begin", "producer": "tA"},
                  send("tC", "txn", 0, gen.records(4)), send("tA", "txn", 0, gen.records(6)),
                  send("tB", "txn", 0, gen.records(2)), send("tC", "txn", 1, gen.records(3)),
                  send("plain", "txn", 1, gen.records(2)), send("tA", "txn", 1, gen.records(5)),
                  {"op": "commit", "producer": "tC"}, {"op": "abort", "producer": "tA"},
                  {"op": "commit", "producer": "tB"}]
    # an open transaction at the end of txn-0: the last stable offset stays at its first offset
    steps += [{"op": "begin", "producer": "tC"}, send("tC", "txn", 0, gen.records(3)),
              send("plain", "txn", 0, gen.records(2)), send("plain", "txn", 1, gen.records(2)),
              {"op": "abandon", "producer": "tC"}]

    # retention: old segments (3 days old) then current ones; 1-day retention deletes the old
    old = Gen(27, base_ts - 3 * 24 * 3600 * 1000, broker_timestamps=False)
    steps.append(producer("ret", **{"compression.type": "none"}))
    for chunk in range(6):
        steps.append(send("ret", "retention", 0, old.records(20)))
    for chunk in range(3):
        steps.append(send("ret", "retention", 0, gen.records(20)))
    return steps


def compacted_round(rnd: int, base_ts: int) -> List[Dict[str, Any]]:
    """One round of updates of 30 keys to ``compacted``: tombstones, a committed and an
    aborted transaction, and a final one-record append that opens a new segment (a broker rolls
    by time when a batch's timestamp is ``segment.ms`` past the segment's first one; the
    transaction markers carry the broker's clock, so the sentinel is dated ahead of it).  The
    cleaner then cleans every segment below the sentinel's."""
    ts = base_ts + 100_000 * (rnd + 1)
    sentinel_ts = int(time.time() * 1000) + 60_000 * (rnd + 1)
    steps: List[Dict[str, Any]] = [
        producer("cK", **{"compression.type": "zstd"}),
        producer("tK",
                 **{"transactional.id": "txn-compacted", "transaction.timeout.ms": TXN_TIMEOUT})]
    for chunk in range(3):
        recs = [keyed(f"k{(chunk * 10 + i) % 30}", b"r%d-c%d-%d" % (rnd, chunk, i) * 20, ts + i)
                for i in range(10)]
        steps.append(send("cK", "compacted", 0, recs))
    tomb = range(0, 5) if rnd == 0 else range(10, 13)
    steps.append(send("cK", "compacted", 0, [keyed(f"k{k}", None, ts + 50) for k in tomb]))
    steps += [{"op": "begin", "producer": "tK"},
              send("tK", "compacted", 0,
                   [keyed(f"k{k}", b"committed", ts + 60) for k in (5, 6, 7)]),
              {"op": "commit", "producer": "tK"},
              {"op": "begin", "producer": "tK"},
              send("tK", "compacted", 0, [keyed(f"k{k}", b"aborted", ts + 70) for k in (8, 9)]),
              {"op": "abort", "producer": "tK"},
              send("cK", "compacted", 0, [keyed("sentinel", b"%d" % rnd, sentinel_ts)])]
    return steps


# -- waiting on the broker ------------------------------------------------------------------------
def wait_for(what: str, cond, broker: ks.Broker, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{broker.log_tail()}")
        time.sleep(0.2)


def checkpoint_entry(path: Path, topic: str, partition: int) -> Optional[int]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
            return int(parts[2])
    return None


def first_segment_base(directory: Path) -> Optional[int]:
    bases = [int(p.name[:20]) for p in directory.glob("*.log")]
    return min(bases) if bases else None


# -- the session --------------------------------------------------------------------------------
def crash(env, broker: ks.Broker) -> int:
    """Produce to ``crash`` without pause; SIGKILL the broker once 1200 records are acked."""
    spec = {"bootstrap": broker.bootstrap, "steps": [
        producer("crash", **{"compression.type": "lz4", "acks": "1",
                             "enable.idempotence": "false", "linger.ms": "0", "retries": "0"}),
        {"op": "send_forever", "producer": "crash", "topic": "crash", "partitions": [0, 1],
         "value_size": 700, "records_per_flush": 40}]}
    import json

    proc = subprocess.Popen(ks.tool_command(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    acked = 0
    try:
        proc.stdin.write(json.dumps(spec))
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith("{"):
                acked = json.loads(line)["count"]
                if acked >= 1200:
                    broker.kill()  # mid-produce: the producer is sending the next records
                    break
        else:
            raise AssertionError(f"the crash producer stopped after {acked} records")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return acked


def read_back(env, broker: ks.Broker, m: Matrix) -> None:
    steps = []
    for topic, parts in {**m.partitions, **INTERNAL}.items():
        for iso in ("read_uncommitted", "read_committed"):
            steps.append({"op": "consume", "topic": topic, "partitions": parts, "isolation": iso})
    for line in ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": steps}):
        if line["op"] == "record":
            m.records.setdefault((line["topic"], line["partition"], line["isolation"]),
                                 []).append(line)
        elif line["op"] == "consumed":
            for p, start in line["beginning"].items():
                key = (line["topic"], int(p), line["isolation"])
                m.bounds[key] = (start, line["end"][p])
                m.records.setdefault(key, [])
    # offsetsForTimes at every timestamp in the partition (and around it), Admin ListOffsets
    steps = []
    for topic, parts in m.partitions.items():
        for p in parts:
            seen = {r["timestamp"] for r in m.records[(topic, p, "read_uncommitted")]}
            targets = sorted(seen | {t + 1 for t in seen} | {t - 1 for t in seen} | {0})
            if len(targets) > 120:
                targets = targets[:: len(targets) // 120 + 1] + [max(seen), max(seen) + 1]
            for iso in ("read_uncommitted", "read_committed"):
                steps.append({"op": "offsets", "topic": topic, "partitions": [p], "isolation": iso,
                              "timestamps": targets})
                steps.append({"op": "list_offsets", "topic": topic, "partitions": [p],
                              "isolation": iso})
    for line in ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": steps}):
        key = (line["topic"], line["partition"], line["isolation"])
        if line["op"] == "offsets":
            m.for_times[key] = [tuple(row) for row in line["for_times"]]
        elif line["op"] == "list_offsets":
            m.listed[key] = line


