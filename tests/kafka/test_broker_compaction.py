"""kafkalog's Cleaner against Apache Kafka's LogCleaner on the same input (issue 29, part 4).

One real broker (``kafka_support.Broker``) fills a compacted partition in three rounds and
cleans it three times.  Before each cleaning pass, while the broker is idle (the topic's
``min.cleanable.dirty.ratio`` is 1.0, which no log exceeds, so its cleaner leaves the topic
alone; every transaction marker is written), the partition directory and the root checkpoints
are copied; kafkalog's Cleaner cleans the copy once, with the same settings, and its result is
held against what the broker's cleaner made of the same directory (the ratio set to 0.0, then
the cleaner checkpoint waited for).  Compared: the segments (their base offsets, so the
grouping), every batch (offsets, producer id/epoch/sequence, flags, codec, leader epoch, max
timestamp, delete-horizon flag, and its bytes where they can be equal), every record (offset,
timestamp, key, value, headers), which control batches remain, the transaction index and the
cleaner checkpoint.

What the input holds: keys with many versions, headers, a zstd producer, tombstones (one
superseded by a later value, some never superseded, their record timestamps an hour old or in
the future), committed transactions (one whose data are all superseded later, so its marker
becomes removable) and aborted ones, from one transactional producer whose last batch is
committed (so its aborted batches are not kept as producer state).

Timing is controlled, not tolerated.  A v2 tombstone is judged by the delete horizon the cleaner
writes into its batch (``now + delete.retention.ms``) on the first pass that keeps it, not by its
record timestamp: the next pass, started after that horizon, drops it.  So each pass starts
only once every horizon written by the previous pass has passed (the test waits
``delete.retention.ms`` after it saw the previous pass end), and kafkalog cleans at the time the
broker's pass was started (every horizon the input holds has passed for both).  Horizons written
in a pass are the only values that depend on the clock: kafkalog's is its ``now`` +
``delete.retention.ms``, the broker's must lie between the start of its pass and the moment the
test saw it end, plus ``delete.retention.ms``.  Which segments a pass cleans is the same for both:
everything below the active segment (no transaction is open, ``min.compaction.lag.ms`` is 0).

The passes: (1) round 1 is deduplicated, aborted data dropped, tombstones and markers kept and
the tombstones given horizons, a segment whose records all went left empty; (2) round 1's
tombstones go, round 2's get horizons, markers of transactions with no data left get horizons, a
producer's emptied last batch stays as an empty header; (3) those markers and round 2's
tombstones go, and so does the round's last batch (aborted, alone in the segment below the
active one), leaving an empty segment.
"""
from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import pytest

from kafkalog.storage.cleaner import Cleaner, CleanerConfig
from kafkalog.storage.log import Log

import kafka_support as ks
from handoff import ROOT_CHECKPOINTS
from kafka_matrix import checkpoint_entry, wait_for

pytestmark = pytest.mark.kafka

TOPIC = "compaction"
RETENTION_MS = 1500  # delete.retention.ms
SEGMENT_BYTES = 2048
DEDUPE_BUFFER = 8 << 20  # kafka_support.Broker's log.cleaner.dedupe.buffer.size
TOPIC_CONFIGS = {
    "cleanup.policy": "compact", "internal.segment.bytes": str(SEGMENT_BYTES),
    "index.interval.bytes": "256", "segment.index.bytes": "4096",
    "delete.retention.ms": str(RETENTION_MS), "min.compaction.lag.ms": "0",
    "min.cleanable.dirty.ratio": "1.0", "file.delete.delay.ms": "0",
}
LOG_CONFIG = {
    "cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES, "index.interval.bytes": 256,
    "segment.index.bytes": 4096, "delete.retention.ms": RETENTION_MS, "min.compaction.lag.ms": 0,
    "min.cleanable.dirty.ratio": 0.0,
}
CHECKPOINT = "cleaner-offset-checkpoint"
RECOVERY_POINT = "recovery-point-offset-checkpoint"


# -- the input
# --------------------------------------------------------------------------------------
def b64(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else base64.b64encode(b).decode()


class Rounds:
    """The records of the three rounds; timestamps explicit (an hour ago, or a minute ahead)."""

    def __init__(self, base_ts: int):
        self.ts = base_ts
        self.future_ts = int(time.time() * 1000) + 60_000

    def rec(self, key: str, value: Optional[str], headers=(),
            ts: Optional[int] = None) -> Dict[str, Any]:
        self.ts += 3
        return {"key": b64(key.encode()), "value": b64(None if value is None else value.encode()),
                "timestamp": self.ts if ts is None else ts,
                "headers": [[k, b64(v)] for k, v in headers]}

    def versions(self, tag: str, keys: List[str], n: int) -> List[Dict[str, Any]]:
        """``n`` records cycling over ``keys``, every other one with headers."""
        out = []
        for i in range(n):
            key = keys[i % len(keys)]
            headers = [("v", b"%d" % i), ("tag", tag.encode())] if i % 2 else []
            if i % 5 == 4:
                headers.append(("none", None))
            out.append(self.rec(key, f"{tag}-{key}-{i}-" + "x" * (20 + i % 7), headers))
        return out


def send(producer: str, records: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"op": "send", "producer": producer, "topic": TOPIC, "partition": 0,
            "records": records, "flush": True}


def txn(producer: str, records: List[Dict[str, Any]], commit: bool) -> List[Dict[str, Any]]:
    return [{"op": "begin", "producer": producer}, send(producer, records),
            {"op": "commit" if commit else "abort", "producer": producer}]


PRODUCERS = [
    {"op": "producer", "name": "p", "config": {"linger.ms": "100", "compression.type": "none"}},
    {"op": "producer", "name": "z", "config": {"linger.ms": "100", "compression.type": "zstd"}},
    {"op": "producer", "name": "t", "config": {"linger.ms": "100", "compression.type": "none",
                                               "transactional.id": "compaction-txn",
                                               "transaction.timeout.ms": "600000"}},
]
KEYS = [f"k{i}" for i in range(10)]
BIG_VALUE = 1920  # a batch of ~2000 bytes: a segment holds it but not its marker too


def round_steps(rnd: int, g: Rounds) -> List[Dict[str, Any]]:
    steps: List[Dict[str, Any]] = []
    if rnd == 1:
        for i in range(4):
            steps.append(send("p", g.versions(f"r1p{i}", KEYS, 9)))
        steps.append(send("p", [g.rec("k0", None, ts=g.ts - 3600_000),  # an hour-old tombstone
                                g.rec("k1", None, [("why", b"future")], ts=g.future_ts),
                                g.rec("k2", None)]))  # superseded below
        steps.append(send("z", g.versions("r1z", ["k3", "k4", "k5", "k6"], 12)))
        steps += txn("t", [g.rec("c0", "committed-c0", [("txn", b"1")]),
                           g.rec("c1", "committed-c1")], True)
        steps += txn("t", [g.rec("k7", "aborted-k7"), g.rec("k8", "aborted-k8", [("a", b"")])],
                     False)
        steps += txn("t", [g.rec("d0", "committed-d0"), g.rec("d1", "committed-d1")],
                     True)  # superseded below
        steps.append(send("p", g.versions("r1q", KEYS[2:], 16)))
        steps.append(send("p", [g.rec("c0", "plain-c0"), g.rec("d0", "plain-d0"),
                                g.rec("d1", "plain-d1")]))
        steps += txn("t", [g.rec("c2", "committed-c2")], True)
        steps.append(send("z", g.versions("r1y", KEYS[2:], 14)))
    elif rnd == 2:
        steps.append(send("p", g.versions("r2p", KEYS[2:], 11)))
        steps.append(send("p", [g.rec("k5", None, [("t", b"2")], ts=g.ts - 3600_000),
                                g.rec("k6", None)]))
        for i in range(3):
            steps.append(send("p", g.versions(f"r2q{i}", ["k2", "k3", "k4", "k7", "k8", "k9"], 11)))
        steps += txn("t", [g.rec("k9", "aborted-k9")], False)
        steps += txn("t", [g.rec("e0", "committed-e0")], True)
        steps.append(send("z", g.versions("r2z", ["k2", "k3", "k4"], 20)))
    else:
        for i in range(4):
            steps.append(send("p", g.versions(f"r3p{i}", ["k3", "k4", "k7"], 10)))
        # an aborted batch of nearly a segment, alone in one: its ABORT marker no longer fits
        # and opens the active segment, so the aborted batch is the last one pass 3 cleans (the
        # producer writes on after it)
        steps += txn("t", [g.rec("k3", "aborted-" + "a" * BIG_VALUE)], False)
        steps += txn("t", [g.rec("e1", "committed-e1")], True)
    return steps


# -- reading a directory --------------------------------------------------------------------------
class Layout(NamedTuple):
    segments: List[int]  # base offsets
    batches: List[Dict[str, Any]]
    raw: List[bytes]
    aborted: List[Tuple[int, int, int, int]]
    end: int  # log end offset


def layout(path: Path, upto: Optional[int] = None) -> Layout:
    """What kafkalog reads in ``path`` below ``upto`` (default: everything)."""
    with Log.open(path, LOG_CONFIG, read_only=True) as log:
        end = log.log_end_offset if upto is None else upto
        segs = [s.base_offset for s in log.segments if s.base_offset < end]
        rows, raw = [], []
        for b in log.iter_batches():
            if b.base_offset >= end:
                break
            rows.append({
                "base": b.base_offset, "last": b.last_offset, "control": b.is_control_batch,
                "txn": b.is_transactional, "pid": b.producer_id, "epoch": b.producer_epoch,
                "seq": b.base_sequence, "codec": int(b.compression_type),
                "ts_type": int(b.timestamp_type), "leader_epoch": b.partition_leader_epoch,
                "max_ts": b.max_timestamp, "horizon": b.delete_horizon_ms,
                "records": [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in b],
            })
            raw.append(bytes(b.view()))
        aborted = [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                   for t in log.collect_aborted_transactions(0, end)]
        return Layout(segs, rows, raw, aborted, end)


def snapshot(broker: ks.Broker, dest: Path) -> Path:
    """Copy the (idle) broker's partition directory and root checkpoints to ``dest``, once the
    broker's recovery point reached its active segment (it flushes a segment when it rolls and
    checkpoints the recovery point every 200 ms): a log opened on the copy trusts every segment
    but the active one, which no cleaner touches, as the broker does after a crash."""
    part = broker.partition_dir(TOPIC)
    active = max(int(p.name[:20]) for p in part.glob("*.log"))
    wait_for(f"the broker's recovery point of {TOPIC}-0 to reach {active}",
             lambda: checkpoint_entry(broker.log_dir / RECOVERY_POINT, TOPIC, 0) == active, broker)
    dest.mkdir(parents=True)
    shutil.copytree(broker.partition_dir(TOPIC), dest / f"{TOPIC}-0")
    for name in ROOT_CHECKPOINTS:
        if (broker.log_dir / name).exists():
            shutil.copy2(broker.log_dir / name, dest / name)
    return dest / f"{TOPIC}-0"


def kafka_checkpoint(broker: ks.Broker) -> Optional[int]:
    return checkpoint_entry(broker.log_dir / CHECKPOINT, TOPIC, 0)


def now_ms() -> int:
    return int(time.time() * 1000)


# -- the comparison
# ---------------------------------------------------------------------------------
def describe(row: Dict[str, Any]) -> str:
    kind = "control" if row["control"] else "data"
    return (f"{kind} batch [{row['base']}, {row['last']}] pid {row['pid']} "
            f"({len(row['records'])} records, horizon {row['horizon']})")


def assert_same_clean(ours: Layout, kafka: Layout, pass_no: int, started: int,
                      seen_done: int) -> None:
    """kafkalog's result of a pass (it cleaned at ``started``) against Kafka's (whose pass began
    after ``started`` and had ended by ``seen_done``)."""
    what = f"pass {pass_no}"
    ours_desc = [describe(r) for r in ours.batches]
    kafka_desc = [describe(r) for r in kafka.batches]
    assert [(r["base"], r["last"], r["control"]) for r in ours.batches] == \
        [(r["base"], r["last"], r["control"]) for r in kafka.batches], \
        f"{what}: the batches differ\nkafkalog: {ours_desc}\nkafka:    {kafka_desc}"
    for o, k, o_raw, k_raw in zip(ours.batches, kafka.batches, ours.raw, kafka.raw):
        where = f"{what}, {describe(k)}"
        if o["horizon"] == k["horizon"]:
            if o["codec"] == 0:
                assert o_raw == k_raw, f"{where}: the bytes differ\n{o}\n{k}"
        else:
            # a horizon written by this pass: the only clock-dependent value
            assert o["horizon"] == started + RETENTION_MS, \
                f"{where}: kafkalog's horizon {o['horizon']}"
            assert k["horizon"] is not None and \
                started + RETENTION_MS <= k["horizon"] <= seen_done + RETENTION_MS, \
                f"{where}: Kafka's horizon {k['horizon']} is not its pass's time " \
                "+ delete.retention.ms"
        o_rest = {n: v for n, v in o.items() if n != "horizon"}
        k_rest = {n: v for n, v in k.items() if n != "horizon"}
        assert o_rest == k_rest, f"{where}: differs\nkafkalog: {o_rest}\nkafka:    {k_rest}"
    assert ours.segments == kafka.segments, \
        f"{what}: segments {ours.segments} != Kafka's {kafka.segments}"
    assert ours.aborted == kafka.aborted, \
        f"{what}: transaction index {ours.aborted} != {kafka.aborted}"


def live(rows: List[Dict[str, Any]]) -> Dict[bytes, Optional[bytes]]:
    """key -> latest value of the data records."""
    out: Dict[bytes, Optional[bytes]] = {}
    for r in rows:
        if not r["control"]:
            for _o, _ts, key, value, _h in r["records"]:
                out[key] = value
    return out


def tombstone_keys(rows: List[Dict[str, Any]]) -> set:
    return {rec[2] for r in rows if not r["control"] for rec in r["records"] if rec[3] is None}


def control_offsets(rows: List[Dict[str, Any]]) -> List[int]:
    return [r["base"] for r in rows if r["control"]]


# -- the test
# ---------------------------------------------------------------------------------------
def test_kafka_cleaner_and_kafkalog_cleaner_agree(kafka_env, tmp_path):
    work = tmp_path / "broker"
    broker = ks.Broker(kafka_env, work, {"log.flush.offset.checkpoint.interval.ms": 200})
    broker.format()
    broker.start()

    def tool(steps):
        return ks.run_tool(kafka_env, {"bootstrap": broker.bootstrap, "steps": steps})

    stable = {"op": "await_stable", "topic": TOPIC, "partition": 0}
    g = Rounds(now_ms() - 3600_000)
    results: List[Tuple[Layout, Layout]] = []  # (kafkalog's, Kafka's) per pass
    uppers: List[int] = []  # where each pass stopped
    try:
        tool([{"op": "create_topics",
               "topics": [{"name": TOPIC, "partitions": 1, "configs": TOPIC_CONFIGS}]},
              *PRODUCERS, *round_steps(1, g), stable])
        started = seen_done = 0
        for rnd in (1, 2, 3):
            if rnd > 1:
                # the cleaner off for the topic while the next round is produced
                tool([{"op": "alter_topic", "topic": TOPIC,
                       "configs": {"min.cleanable.dirty.ratio": "1.0"}},
                      *PRODUCERS, *round_steps(rnd, g), stable])
            copy = snapshot(broker, tmp_path / f"input{rnd}")
            before = layout(copy)
            assert len(before.segments) >= 3, f"round {rnd}: too few segments {before.segments}"
            upper = before.segments[-1]  # the active segment's base: where this pass stops
            uppers.append(upper)
            expected = (None, 0) if rnd == 1 else (results[-1][0].segments[-1],)
            assert kafka_checkpoint(broker) in expected, \
                "the broker's cleaner ran while the cleaner was off"
            if results:  # the previous pass's result, as the broker kept it
                results[-1] = (results[-1][0], layout(copy, upto=results[-1][0].end))
                assert_same_clean(*results[-1], rnd - 1, started, seen_done)
            # every horizon the previous pass wrote has passed before this pass starts
            while now_ms() <= seen_done + RETENTION_MS:
                time.sleep(0.05)
            started = now_ms()
            tool([{"op": "alter_topic", "topic": TOPIC,
                   "configs": {"min.cleanable.dirty.ratio": "0.0"}}])
            wait_for(f"the broker's cleaner pass {rnd} up to {upper}",
                     lambda: kafka_checkpoint(broker) == upper, broker)
            seen_done = now_ms()
            with Log.open(copy, LOG_CONFIG) as log:
                stats = log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=DEDUPE_BUFFER)),
                                    now=started)
                assert stats.passes == 1, f"pass {rnd}: kafkalog cleaned in {stats.passes} rounds"
                assert log.cleaner_checkpoint() == upper
            results.append((layout(copy), None))  # Kafka's side is read from the next copy
    finally:
        broker.stop()
    results[-1] = (results[-1][0], layout(broker.partition_dir(TOPIC)))
    assert_same_clean(*results[-1], 3, started, seen_done)

    # the scenario did what it claims (read from Kafka's results)
    k1, k2, k3 = (kafka for _ours, kafka in results)
    assert {b"k0", b"k1"} <= tombstone_keys(k1.batches) and b"k2" not in tombstone_keys(k1.batches)
    assert all(r["horizon"] is not None for r in k1.batches
               if any(rec[3] is None for rec in r["records"]))
    assert not {b"k0", b"k1"} & tombstone_keys(k2.batches), "round 1's tombstones outlived pass 2"
    assert {b"k5", b"k6"} <= tombstone_keys(k2.batches)
    assert not {b"k5", b"k6"} & tombstone_keys(k3.batches), "round 2's tombstones outlived pass 3"
    assert b"aborted-k7" not in {rec[3] for r in k1.batches for rec in r["records"]}
    markers1 = set(control_offsets(k1.batches))
    gone = markers1 - set(control_offsets(k3.batches))
    assert gone, f"no transaction marker of round 1 was removed by pass 3: {markers1}"
    assert live(k3.batches)[b"c0"] == b"plain-c0" and live(k3.batches)[b"c2"] == b"committed-c2"
    # the round's last batch, aborted and alone in its segment, went: an empty segment stays
    # (Kafka 4.4 keeps only a batch that ends at the high watermark, not the round's last)
    before_active = k3.segments[k3.segments.index(uppers[2]) - 1]
    assert not [r for r in k3.batches if before_active <= r["base"] < uppers[2]], \
        f"pass 3 kept something of the aborted batch: {[describe(r) for r in k3.batches]}"
