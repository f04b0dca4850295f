"""Handing a partition directory written by kafkalog to a real Kafka broker (issue 29).

The broker creates the topic (so its topic id is in the KRaft metadata and the partition has a
directory with the broker's ``partition.metadata``) and is stopped; :func:`hand_off` then
replaces that directory's files with the ones kafkalog wrote into a staging root and copies
kafkalog's entries for the partition from the staging root's checkpoints into the broker's
root checkpoints, the same files a kafkalog ``Log`` keeps (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
``cleaner-offset-checkpoint``; see ``kafkalog.storage.log``).  Two ways:

* clean: the broker's root ``.kafka_cleanshutdown`` (left by its SIGTERM) stays, so the broker
  trusts kafkalog's indexes, checkpoints, leader-epoch file and producer snapshots;
* recover: after a SIGKILL (no marker) with the partition's recovery point removed, so the
  broker recovers every segment of kafkalog's itself.

kafkalog's own clean-shutdown marker inside the partition directory (a standalone Log's, see
``kafkalog.storage.log``) is not handed over: the broker keeps its marker in the root.

The writers below fill a staging partition directory through each of kafkalog's write paths,
with generated content (every codec, several segments, headers, null keys and values,
timestamps out of order).
"""
from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from kafkalog import MemoryRecordsBuilder
from kafkalog.control import build_end_txn_marker
from kafkalog.storage import files as kfiles
from kafkalog.storage.log import Log

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# the broker's topic configs and the same settings for kafkalog's Log
TOPIC_CONFIGS = {"internal.segment.bytes": "16384", "index.interval.bytes": "1024",
                 "segment.index.bytes": "4096"}
LOG_CONFIG = {"segment.bytes": 16384, "index.interval.bytes": 1024, "segment.index.bytes": 4096}
COMPACT_TOPIC_CONFIGS = {**TOPIC_CONFIGS, "cleanup.policy": "compact",
                         "delete.retention.ms": "1000", "min.compaction.lag.ms": "0"}
COMPACT_LOG_CONFIG = {**LOG_CONFIG, "cleanup.policy": "compact", "delete.retention.ms": 1000,
                      "min.compaction.lag.ms": 0}
ROOT_CHECKPOINTS = (kfiles.RECOVERY_POINT_CHECKPOINT_FILE, kfiles.LOG_START_OFFSET_CHECKPOINT_FILE,
                    kfiles.REPLICATION_OFFSET_CHECKPOINT_FILE, kfiles.CLEANER_OFFSET_CHECKPOINT_FILE)
# what kafkalog keeps for itself in a partition directory (a broker keeps it in the root)
KAFKALOG_ONLY = (kfiles.CLEAN_SHUTDOWN_FILE,)


# -- hand-off ---------------------------------------------------------------------------------------
def topic_id(partition_dir: Path) -> uuid.UUID:
    return kfiles.read_partition_metadata(partition_dir / kfiles.PARTITION_METADATA_FILE).topic_id


def checkpoint_entries(root: Path, topic: str, partition: int) -> Dict[str, Optional[int]]:
    tp = kfiles.TopicPartition(topic, partition)
    return {name: kfiles.read_offset_checkpoint(root / name).get(tp) for name in ROOT_CHECKPOINTS}


def hand_off(stage_root: Path, broker_root: Path, topic: str, partition: int,
             recover: bool = False) -> Dict[str, Optional[int]]:
    """Replace the (stopped) broker's ``<topic>-<partition>`` files with kafkalog's from
    ``stage_root`` (the broker's ``partition.metadata`` stays; kafkalog's must name the same
    topic id) and set the partition's root checkpoint entries to kafkalog's.  ``recover``: drop
    the recovery point too (the broker then recovers every segment after an unclean
    shutdown).  Returns the checkpoint entries set."""
    name = f"{topic}-{partition}"
    src, dst = stage_root / name, broker_root / name
    assert dst.is_dir(), f"the broker has no directory for {name}"
    assert (broker_root / "meta.properties").exists(), f"{broker_root} is not a broker log dir"
    meta = dst / kfiles.PARTITION_METADATA_FILE
    ours = src / kfiles.PARTITION_METADATA_FILE
    assert topic_id(src) == topic_id(dst), f"{name}: kafkalog wrote another topic id"
    for f in dst.iterdir():
        if f != meta:
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    for f in src.iterdir():
        if f.name in KAFKALOG_ONLY or f == ours:
            continue
        shutil.copy2(f, dst / f.name)
    entries = checkpoint_entries(stage_root, topic, partition)
    if recover:
        entries[kfiles.RECOVERY_POINT_CHECKPOINT_FILE] = None
    for file, value in entries.items():
        kfiles.update_offset_checkpoint(broker_root / file, {(topic, partition): value})
    return entries


# -- content ---------------------------------------------------------------------------------------
Rec = Tuple[int, Optional[bytes], Optional[bytes], List[Tuple[str, Optional[bytes]]]]


class Gen:
    """Deterministic (timestamp, key, value, headers) of every shape; timestamps are unique
    within a generator and one in ten lies 5 s before its predecessors."""

    def __init__(self, seed: int, base_ts: int):
        self.rnd = random.Random(seed)
        self.base_ts = base_ts
        self.n = 0

    def record(self, large: bool = False) -> Rec:
        n, self.n = self.n, self.n + 1
        rnd = self.rnd
        key = [None, b"", b"key-%d" % (n % 37), rnd.randbytes(rnd.randint(1, 40))][n % 4]
        value: Optional[bytes] = (b"value %d " % n + b"kafka log segment " * rnd.randint(0, 12)
                                  + rnd.randbytes(rnd.randint(0, 300)))
        if n % 11 == 0:
            value = None
        elif n % 13 == 0:
            value = b""
        if large:
            value = rnd.randbytes(6000)
        headers = [[], [("h", b"v%d" % n)], [("a", None), ("b", b"")],
                   [("", b"x"), ("dup", b"1"), ("dup", b"2"), ("\u00e9t\u00e9", rnd.randbytes(5))]][n % 4]
        ts = self.base_ts + n * 7
        if n % 10 == 9:
            ts -= 5000
        return ts, key, value, headers

    def records(self, count: int) -> List[Rec]:
        return [self.record() for _ in range(count)]


def batch(recs: List[Rec], codec: str, **kw) -> bytes:
    b = MemoryRecordsBuilder(compression_type=codec, **kw)
    for ts, key, value, headers in recs:
        b.append(ts, key, value, headers=headers)
    return b.build()


def follower_batch(recs: List[Rec], codec: str, offsets: List[int], **kw) -> bytes:
    b = MemoryRecordsBuilder(compression_type=codec, base_offset=offsets[0], **kw)
    for off, (ts, key, value, headers) in zip(offsets, recs):
        b.append_with_offset(off, ts, key, value, headers=headers)
    return b.build()


def marker(commit: bool, pid: int, epoch: int, ts: int, **kw) -> bytes:
    return build_end_txn_marker(commit, pid, epoch, coordinator_epoch=0, timestamp=ts, **kw)


class Written(NamedTuple):
    """What a writer meant to write, where it can say: the (offset, timestamp, key, value,
    headers) a read_uncommitted / read_committed consumer must get (None: no statement)."""

    uncommitted: Optional[List[Tuple]]
    committed: Optional[List[Tuple]]


# -- the writers ------------------------------------------------------------------------------------
# Producer ids (7_000_00x) lie far from those the controller hands out (blocks of 1000 from 0):
# a broker-assigned id equal to one kafkalog wrote meets that producer's recorded sequence
# (OutOfOrderSequenceException).  Leader epochs stay at or below 1, the broker's epoch after
# its first restart: a higher one in the files is dropped from the epoch cache when the broker
# takes leadership ("New epoch entry ... caused truncation of conflicting entries").
def write_leader(path: Path, tid: uuid.UUID, base_ts: int) -> Written:
    """``Log.append`` as the leader: plain, idempotent and transactional producers in every
    codec, commit and abort markers (as the coordinator), size rolls, an explicit roll,
    ``truncate_to`` inside a segment, then appends under a new leader epoch."""
    gen = Gen(1, base_ts)
    unc: List[Tuple] = []
    com: List[Tuple] = []
    seqs = {7_000_001: 0, 7_000_002: 0, 7_000_003: 0}
    owner: Dict[int, int] = {}  # offset -> producer id
    with Log.open(path, LOG_CONFIG, topic_id=tid) as log:
        def add(recs, codec, pid=-1, txn=False, aborted=False, epoch=None):
            kw = {}
            if pid >= 0:
                kw = dict(producer_id=pid, producer_epoch=0, base_sequence=seqs[pid],
                          is_transactional=txn)
                seqs[pid] += len(recs)
            info = log.append(batch(recs, codec, **kw), leader_epoch=epoch)
            rows = [(info.first_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]
            owner.update((r[0], pid) for r in rows)
            unc.extend(rows)
            if not aborted:
                com.extend(rows)
            return info

        for rnd in range(12):
            codec = CODECS[rnd % len(CODECS)]
            add(gen.records(6), codec)
            add(gen.records(5), CODECS[(rnd + 1) % 5], pid=7_000_001)
            add(gen.records(4), CODECS[(rnd + 2) % 5], pid=7_000_002, txn=True)
            add(gen.records(3), codec, pid=7_000_003, txn=True, aborted=rnd % 2 == 0)
            add(gen.records(1), "none")
            add(gen.records(2), CODECS[(rnd + 3) % 5], pid=7_000_002, txn=True)
            log.append(marker(True, 7_000_002, 0, base_ts + 90_000 + rnd), origin="coordinator")
            log.append(marker(rnd % 2 != 0, 7_000_003, 0, base_ts + 90_500 + rnd), origin="coordinator")
            if rnd == 5:
                log.roll()
        # truncate inside the last segment but one (as a follower told to by a new leader)
        segs = [s.base_offset for s in log.segments]
        cut = [r[0] for r in unc if segs[-2] < r[0] < segs[-1]][3]
        log.truncate_to(cut)
        end = log.log_end_offset
        unc[:] = [r for r in unc if r[0] < end]
        com[:] = [r for r in com if r[0] < end]
        seqs[7_000_001] = sum(1 for r in unc if owner[r[0]] == 7_000_001)  # the producer goes on from there
        for rnd in range(4):
            add(gen.records(7), CODECS[rnd], epoch=1)
        add(gen.records(5), "zstd", pid=7_000_001, epoch=1)
    return Written(unc, com)


def write_retention(path: Path, tid: uuid.UUID, base_ts: int) -> Written:
    """``Log.append`` of old then current records, ``delete_retention`` (retention.ms: one
    day) and ``increment_log_start_offset`` inside a segment: log start offset above 0, kept
    in ``log-start-offset-checkpoint``."""
    old = Gen(2, base_ts - 3 * 24 * 3600 * 1000)
    gen = Gen(3, base_ts)
    rows: List[Tuple] = []
    with Log.open(path, {**LOG_CONFIG, "retention.ms": 24 * 3600 * 1000}, topic_id=tid) as log:
        for rnd in range(30):
            g = old if rnd < 12 else gen
            recs = g.records(10)
            info = log.append(batch(recs, CODECS[rnd % 5]))
            rows += [(info.first_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]
        assert log.delete_retention() > 0
        second = log.segments[1].base_offset
        log.increment_log_start_offset(second - 7)
        start = log.log_start_offset
    rows = [r for r in rows if r[0] >= start]
    return Written(rows, rows)


def write_follower(path: Path, tid: uuid.UUID, base_ts: int) -> Written:
    """``append_as_follower``: batches with their offsets already assigned, several per call,
    gaps between batches and inside them (a compacted leader's), leader epochs 0, 1 and 2,
    idempotent and transactional batches with their markers."""
    gen = Gen(4, base_ts)
    unc: List[Tuple] = []
    com: List[Tuple] = []
    rnd_ = random.Random(5)
    next_off = 0
    seq = {7_000_004: 0, 7_000_005: 0}
    with Log.open(path, LOG_CONFIG, topic_id=tid) as log:
        for call in range(30):
            epoch = call // 15  # at most the broker's epoch after its restart
            parts = []
            for j in range(3):
                recs = gen.records(rnd_.randint(1, 8))
                offsets = []
                for _ in recs:
                    offsets.append(next_off)
                    next_off += 1 + (2 if rnd_.random() < 0.15 else 0)
                kind = (call + j) % 4
                codec = CODECS[(call * 3 + j) % 5]
                if kind == 2 or kind == 3:
                    pid = 7_000_004 if kind == 2 else 7_000_005
                    # sequences are contiguous: no gaps inside a producer batch
                    offsets = list(range(offsets[0], offsets[0] + len(recs)))
                    next_off = offsets[-1] + 1
                    data = follower_batch(recs, codec, offsets, producer_id=pid, producer_epoch=0,
                                          base_sequence=seq[pid], is_transactional=kind == 3,
                                          partition_leader_epoch=epoch)
                    seq[pid] += len(recs)
                else:
                    data = follower_batch(recs, codec, offsets, partition_leader_epoch=epoch)
                parts.append(data)
                rows = [(o, ts, k, v, h) for o, (ts, k, v, h) in zip(offsets, recs)]
                unc.extend(rows)
                if kind != 3 or call % 3 != 0:
                    com.extend(rows)
                if kind == 3:
                    parts.append(marker(call % 3 != 0, 7_000_005, 0, base_ts + 95_000 + call,
                                        base_offset=next_off, partition_leader_epoch=epoch))
                    next_off += 1
            log.append_as_follower(b"".join(parts))
    return Written(unc, com)


def write_compacted(path: Path, tid: uuid.UUID, base_ts: int) -> Written:
    """The Cleaner's output (``Log.compact``): keys with many versions, tombstones, committed
    and aborted transactions with their markers, cleaned twice (tombstones and markers past
    ``delete.retention.ms`` removed on the second pass)."""
    rnd_ = random.Random(6)
    seq = {7_000_006: 0}
    ts = base_ts
    with Log.open(path, COMPACT_LOG_CONFIG, topic_id=tid) as log:
        for rnd in range(14):
            codec = CODECS[rnd % 5]
            recs = []
            for i in range(12):
                ts += 3
                k = rnd_.randrange(25)
                value = None if rnd_.random() < 0.12 else b"v%d-%d " % (rnd, i) * rnd_.randint(1, 30)
                hdr = [("round", b"%d" % rnd)] if i % 3 == 0 else []
                recs.append((ts - (4000 if i == 5 else 0), b"k%d" % k, value, hdr))
            log.append(batch(recs, codec))
            txn = [(ts + 1, b"k%d" % rnd_.randrange(25), b"txn-%d" % rnd, [])]
            ts += 2
            log.append(batch(txn, codec, producer_id=7_000_006, producer_epoch=0,
                             base_sequence=seq[7_000_006], is_transactional=True))
            seq[7_000_006] += 1
            log.append(marker(rnd % 3 != 0, 7_000_006, 0, ts), origin="coordinator")
        log.roll()
        now = ts + 10_000
        log.compact(force=True, now=now)
        log.compact(force=True, now=now + 5000)
        log.append(batch([(ts + 5, b"k1", b"after", [])], "lz4"))
    return Written(None, None)


def write_arrow_log(path: Path, tid: uuid.UUID, base_ts: int) -> Written:
    """``kafkalog.arrow.write_arrow``: one table per codec, some with their own (gapped)
    offsets, some with the log's next ones, LogAppendTime rows among them."""
    import pyarrow as pa
    import kafkalog.arrow as ka

    gen = Gen(7, base_ts)
    rows: List[Tuple] = []
    with Log.open(path, LOG_CONFIG, topic_id=tid) as log:
        for i, codec in enumerate(CODECS * 2):
            recs = gen.records(40)
            start = log.log_end_offset
            with_offsets = i % 2 == 1
            offsets = [start + 3 * j if with_offsets else start + j for j in range(len(recs))]
            ttypes = [1 if (i == 3 and 10 <= j < 15) else 0 for j in range(len(recs))]
            # the LogAppendTime rows are small: one batch (cut where the type changes)
            recs = [(ts, k, b"lat-%d" % j if t else v, h)
                    for j, ((ts, k, v, h), t) in enumerate(zip(recs, ttypes))]
            cols = {
                "timestamp": pa.array([r[0] for r in recs], pa.int64()),
                "timestampType": pa.array(ttypes, pa.int32()),
                "key": pa.array([r[1] for r in recs], pa.binary()),
                "value": pa.array([r[2] for r in recs], pa.binary()),
                "headers": pa.array([[{"key": k, "value": v} for k, v in r[3]] for r in recs],
                                    pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            }
            if with_offsets:
                cols["offset"] = pa.array(offsets, pa.int64())
            n = ka.write_arrow(log, pa.table(cols), compression=codec, batch_bytes=3000)
            assert n == len(recs)
            # a LogAppendTime record reports its batch's max timestamp (None: not checked)
            rows += [(o, None if t == 1 else r[0], r[1], r[2], r[3])
                     for o, r, t in zip(offsets, recs, ttypes)]
    return Written(rows, rows)


def damage(directory: Path) -> None:
    """Flip a byte in a batch of the second segment and zero 300 bytes of the third."""
    logs = sorted(directory.glob("*.log"))
    assert len(logs) >= 3, logs
    for f, at, data in ((logs[1], 2000, None), (logs[2], 5000, bytes(300))):
        raw = bytearray(f.read_bytes())
        if data is None:
            raw[at] ^= 0x55
        else:
            raw[at:at + len(data)] = data
        f.write_bytes(bytes(raw))


def write_salvaged(path: Path, tid: uuid.UUID, base_ts: int, work: Path) -> Written:
    """``kafkalog salvage`` of a damaged copy of a leader-written log (the CLI, as an operator
    runs it)."""
    src = work / "damaged" / path.name
    if src.exists():
        shutil.rmtree(src)
    src.parent.mkdir(parents=True, exist_ok=True)
    write_leader(src, tid, base_ts)
    damage(src)
    env = dict(os.environ)
    pkg = str(Path(__import__("kafkalog").__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "kafkalog", "salvage", "--segment-bytes", "16384",
                           str(src), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"\d+ damaged region", proc.stdout), proc.stdout
    return Written(None, None)


# topic -> partitions of the hand-off session
TOPIC = "kl"
COMPACT_TOPIC = "kl-compact"
WRITERS: Dict[str, Callable[..., Written]] = {
    "leader": write_leader, "retention": write_retention, "follower": write_follower,
    "arrow": write_arrow_log, "salvage": write_salvaged, "compacted": write_compacted}
