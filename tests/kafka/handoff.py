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
timestamps out of order).  :func:`serve_phase` then has the restarted broker serve the handed-off
partitions in one KafkaTool run (kafka-dump-log on kafkalog's files, consumers at both isolation
levels from the start, from the middle and by timestamp, the broker's appends, consumers again),
and the ``check_*`` functions hold what it served against what kafkalog's reader finds in the
staged directories (used by ``test_broker_serves_writes.py`` and, for the Spark writer, by
``test_spark_connector.py``).
"""
from __future__ import annotations

import base64
import os
import random
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from kafkalog import MemoryRecordsBuilder
from kafkalog.control import build_end_txn_marker
from kafkalog.storage import checkpoints as kcheckpoints
from kafkalog.storage import files as kfiles
from kafkalog.storage.log import Log

import kafka_support as ks

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
                    kfiles.REPLICATION_OFFSET_CHECKPOINT_FILE,
                    kfiles.CLEANER_OFFSET_CHECKPOINT_FILE)
# what kafkalog keeps for itself in a partition directory (a broker keeps it in the root)
KAFKALOG_ONLY = (kfiles.CLEAN_SHUTDOWN_FILE,)


# -- hand-off
# ---------------------------------------------------------------------------------------
def topic_id(partition_dir: Path) -> uuid.UUID:
    path = partition_dir / kfiles.PARTITION_METADATA_FILE
    return kcheckpoints.read_partition_metadata(path).topic_id


def checkpoint_entries(root: Path, topic: str, partition: int) -> Dict[str, Optional[int]]:
    tp = kfiles.TopicPartition(topic, partition)
    read = kcheckpoints.read_offset_checkpoint
    return {name: read(root / name).get(tp) for name in ROOT_CHECKPOINTS}


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
        kcheckpoints.update_offset_checkpoint(broker_root / file, {(topic, partition): value})
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
                   [("", b"x"), ("dup", b"1"), ("dup", b"2"),
                    ("\u00e9t\u00e9", rnd.randbytes(5))]][n % 4]
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


# -- the writers
# ------------------------------------------------------------------------------------
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
            log.append(marker(rnd % 2 != 0, 7_000_003, 0, base_ts + 90_500 + rnd),
                       origin="coordinator")
            if rnd == 5:
                log.roll()
        # truncate inside the last segment but one (as a follower told to by a new leader)
        segs = [s.base_offset for s in log.segments]
        cut = [r[0] for r in unc if segs[-2] < r[0] < segs[-1]][3]
        log.truncate_to(cut)
        end = log.log_end_offset
        unc[:] = [r for r in unc if r[0] < end]
        com[:] = [r for r in com if r[0] < end]
        # the producer goes on from there
        seqs[7_000_001] = sum(1 for r in unc if owner[r[0]] == 7_000_001)
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
                value = (None if rnd_.random() < 0.12
                         else b"v%d-%d " % (rnd, i) * rnd_.randint(1, 30))
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
                                    pa.list_(pa.struct([("key", pa.string()),
                                                        ("value", pa.binary())]))),
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


# -- serving kafkalog's partitions and what a served partition is checked for ---------------------
ISOLATIONS = ("read_uncommitted", "read_committed")


class Case(NamedTuple):
    mode: str  # "clean" or "recover"
    writer: str
    topic: str
    partition: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


Row = Tuple[int, Optional[bytes], Optional[bytes], Tuple[Tuple[str, Optional[bytes]], ...],
            int, int]


def _b(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else base64.b64decode(s)


def _opt(b) -> Optional[bytes]:
    return None if b is None else bytes(b)


class Staged(NamedTuple):
    """What kafkalog's reader finds in a directory."""

    rows: Dict[str, List[Row]]  # isolation -> records
    bounds: Tuple[int, int, int]  # log start, log end, last stable offset
    segments: List[Tuple[int, int, List[Tuple[int, int]]]]  # (base, max ts, [(offset, ts)])


def read_dir(path: Path) -> Staged:
    with Log.open(path, read_only=True) as log:
        types: Dict[int, int] = {}
        segs: Dict[int, List] = {s.base_offset: [s.base_offset, -1, []] for s in log.segments}
        bases = sorted(segs)
        for batch in log.iter_batches():
            base = max(b for b in bases if b <= batch.base_offset)
            seg = segs[base]
            seg[1] = max(seg[1], batch.max_timestamp)
            for r in batch:
                types[r.offset] = int(batch.timestamp_type)
                seg[2].append((r.offset, r.timestamp))
        rows = {iso: [(r.offset, _opt(r.key), _opt(r.value),
                       tuple((k, _opt(v)) for k, v in r.headers), r.timestamp, types[r.offset])
                      for r in log.iter_records(isolation=iso)]
                for iso in ISOLATIONS}
        bounds = (log.log_start_offset, log.log_end_offset, log.last_stable_offset)
    return Staged(rows, bounds, [tuple(segs[b]) for b in bases])


def kafka_for_time(staged: Staged, target: int) -> Optional[Tuple[int, int]]:
    """Kafka's offsetsForTimes rule on these files: the first segment whose largest timestamp
    is >= target, then the first record at or after the log start offset in it whose timestamp
    is >= target (None when that segment has none)."""
    start = staged.bounds[0]
    for base, max_ts, records in staged.segments:
        if max_ts >= target:
            for off, ts in records:
                if off >= start and ts >= target:
                    return off, ts
            return None
    return None


def targets(staged: Staged) -> List[int]:
    ts = sorted({t for _, _, recs in staged.segments for off, t in recs if off >= staged.bounds[0]})
    picked = ts[:: max(1, len(ts) // 25)]
    return sorted({0, ts[0] - 1, ts[-1], ts[-1] + 1} | set(picked) | {t + 1 for t in picked})


def starts(staged: Staged) -> List[int]:
    """Offsets in the middle of segments and batches, at segment bases, and in offset gaps."""
    offs = [r[0] for r in staged.rows["read_uncommitted"]]
    out = set()
    for base, _, _ in staged.segments[1:]:
        out |= {base, base + 1}
    for i in range(1, len(offs), max(1, len(offs) // 8)):
        out.add(offs[i])
        out.add(offs[i] - 1 if offs[i] - 1 > offs[i - 1] else offs[i] + 1)  # a gap, if any
    lo, hi = staged.bounds[0], staged.bounds[1]
    return sorted(o for o in out if lo <= o < hi)


# -- the broker session ----------------------------------------------------------------------------
FORBIDDEN = re.compile(r"truncat|index files|rebuilding index|corrupt|invalid|stray|delet|"
                       r"conflicting|recovering unflushed|could not find|sanity", re.I)
# after the unclean hand-off the broker recovers every segment: it rebuilds the indexes then
FORBIDDEN_RECOVER = re.compile(r"truncat|corrupt|invalid|stray|delet|conflicting", re.I)
# the broker keeps producer snapshots in [log start offset, log end offset] (Kafka's
# ProducerStateManager.truncateAndReload) and, when it recovers, rebuilds them
SNAPSHOT_DELETED = re.compile(r"Deleted producer state snapshot \S*/(\d{20})\.snapshot")


def expected_line(line: str, case: "Case", staged: "Staged") -> bool:
    m = SNAPSHOT_DELETED.search(line)
    return m is not None and (case.mode == "recover" or int(m.group(1)) < staged.bounds[0])


def partition_lines(log_text: str, name: str) -> List[str]:
    pat = re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])")
    return [line for line in log_text.splitlines() if pat.search(line)]


class Served(NamedTuple):
    staged: Dict[Case, Staged]
    written: Dict[Case, Written]
    lines: Dict[Case, List[str]]  # the broker's log lines naming the partition while it served
    records: Dict[Tuple[Case, str, str], List[Row]]  # (case, phase, isolation); phase before/after
    bounds: Dict[Tuple[Case, str, str], Tuple[int, int]]  # beginning, end
    starts: Dict[Tuple[Case, str], List[Tuple[int, List[int], List[Optional[bytes]]]]]
    for_times: Dict[Tuple[Case, str], List[Tuple[int, Optional[int], Optional[int]]]]
    dumps: Dict[str, Dict[str, Any]]  # mode/kind -> dump_log line
    appended: Dict[Case, int]
    final: Dict[Case, Staged]  # kafkalog's read of the broker's directory at the end
    broker_dir: Path


def quiet_broker(env: Dict[str, Path], work: Path) -> Tuple[ks.Broker, Served]:
    """A broker in ``work / "broker"`` that changes no partition's files by itself (no cleaner,
    no retention check), and an empty :class:`Served` for it: only the hand-off writes."""
    broker = ks.Broker(env, work / "broker", overrides={
        "log.cleaner.enable": "false", "log.retention.check.interval.ms": 3600_000,
        "log.initial.task.delay.ms": 3600_000})
    return broker, Served({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, broker.log_dir)


def more_records(case: Case, n: int = 6) -> List[Dict[str, Any]]:
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        key = b"" if i % 3 == 0 else b"more-%d" % i  # a compacted topic refuses null keys
        out.append({"key": None if key is None else base64.b64encode(key).decode(),
                    "value": base64.b64encode(b"broker %s %d" % (case.name.encode(), i)).decode(),
                    "timestamp": now + i, "headers": [["by", base64.b64encode(b"kafka").decode()]]})
    return out


def dump_steps(stage: Path, cases: List[Case], mode: str) -> List[Dict[str, Any]]:
    indexes, snapshots = [], []
    for c in cases:
        d = stage / c.name
        indexes += (sorted(str(f) for f in d.glob("*.index"))
                    + sorted(str(f) for f in d.glob("*.timeindex")))
        snapshots += sorted(str(f) for f in d.glob("*.snapshot"))
    cls = "org.apache.kafka.tools.DumpLogSegments"
    return [{"op": "dump_log", "class": cls,
             "args": ["--verify-index-only", "--files", ",".join(indexes)],
             "tag": f"{mode}/verify", "files": indexes},
            {"op": "dump_log", "class": cls,
             "args": ["--index-sanity-check", "--files", ",".join(indexes)],
             "tag": f"{mode}/sanity", "files": indexes},
            {"op": "dump_log", "class": cls, "args": ["--files", ",".join(snapshots)],
             "tag": f"{mode}/snapshot", "files": snapshots}]


def serve_phase(env, broker: ks.Broker, stage: Path, cases: List[Case], staged, s: Served,
                mode: str) -> None:
    """One KafkaTool run: dump-log checks of the staged files, consumers before, the broker's
    appends, consumers after."""
    topics: Dict[str, List[int]] = {}
    for c in cases:
        topics.setdefault(c.topic, []).append(c.partition)
    dumps = dump_steps(stage, cases, mode)
    steps: List[Dict[str, Any]] = [{k: v for k, v in d.items() if k not in ("tag", "files")}
                                   for d in dumps]
    for topic, parts in topics.items():
        for iso in ISOLATIONS:
            steps.append({"op": "consume", "topic": topic, "partitions": parts, "isolation": iso})
    for c in cases:
        st = staged[c]
        for iso in ISOLATIONS:
            # a short fetch wait: each seek would otherwise wait out the fetch in flight
            steps.append({"op": "consume_from", "topic": c.topic, "partition": c.partition,
                          "isolation": iso, "starts": starts(st), "count": 5,
                          "config": {"fetch.max.wait.ms": "20"}})
            steps.append({"op": "offsets", "topic": c.topic, "partitions": [c.partition],
                          "isolation": iso, "timestamps": targets(st)})
    steps.append({"op": "producer", "name": "more", "config": {"compression.type": "lz4",
                                                                "acks": "all", "linger.ms": "5"}})
    for c in cases:
        steps.append({"op": "send", "producer": "more", "topic": c.topic, "partition": c.partition,
                      "records": more_records(c), "flush": True})
    for topic, parts in topics.items():
        for iso in ISOLATIONS:
            steps.append({"op": "consume", "topic": topic, "partitions": parts, "isolation": iso})
    by_tp = {(c.topic, c.partition): c for c in cases}
    phase = "before"
    dump_i = 0
    for line in ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": steps}, timeout=400):
        op = line["op"]
        if op == "dump_log":
            s.dumps[dumps[dump_i]["tag"]] = {**line, "files": dumps[dump_i]["files"]}
            dump_i += 1
        elif op == "sent":
            phase = "after"
        elif op == "record":
            c = by_tp[(line["topic"], line["partition"])]
            s.records.setdefault((c, phase, line["isolation"]), []).append(
                (line["offset"], _b(line["key"]), _b(line["value"]),
                 tuple((k, _b(v)) for k, v in line["headers"]), line["timestamp"],
                 line["timestampType"]))
        elif op == "consumed":
            for p, begin in line["beginning"].items():
                c = by_tp[(line["topic"], int(p))]
                s.bounds[(c, phase, line["isolation"])] = (begin, line["end"][p])
                s.records.setdefault((c, phase, line["isolation"]), [])
        elif op == "from":
            c = by_tp[(line["topic"], line["partition"])]
            s.starts.setdefault((c, line["isolation"]), []).append(
                (line["start"], line["offsets"], [_b(v) for v in line["values"]]))
        elif op == "offsets":
            c = by_tp[(line["topic"], line["partition"])]
            s.for_times[(c, line["isolation"])] = [tuple(r) for r in line["for_times"]]
    assert dump_i == len(dumps)


def assert_same(kafka: List[Row], kafkalog: List[Row], what: str) -> None:
    assert len(kafkalog) == len(kafka), \
        f"{what}: kafkalog {len(kafkalog)} records, Kafka {len(kafka)}"
    for a, b in zip(kafka, kafkalog):
        assert b == a, f"{what}: at offset {a[0]} kafkalog {b!r}, Kafka {a!r}"


def create_topics(env, broker: ks.Broker, topics: List[Dict[str, Any]]) -> None:
    """Create ``topics`` (KafkaTool's ``create_topics`` entries) on the running broker and wait
    until each of their partitions has its directory with the broker's ``partition.metadata``."""
    ks.run_tool(env, {"bootstrap": broker.bootstrap,
                      "steps": [{"op": "create_topics", "topics": topics}]})
    deadline = time.monotonic() + 60
    while not all((broker.partition_dir(t["name"], p) / kfiles.PARTITION_METADATA_FILE).exists()
                  for t in topics for p in range(t["partitions"])):
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.2)


# -- the checks (each test of a served partition calls one)
# --------------------------------------------
def check_consumer_reads(s: Served, case: Case, isolation: str) -> None:
    """Kafka's consumer reads, from the start, exactly kafkalog's records; its beginning and
    end offsets are kafkalog's log start and log end (read_committed: last stable) offsets."""
    st = s.staged[case]
    assert_same(s.records[(case, "before", isolation)], st.rows[isolation],
                f"{case.mode} {case.writer} {isolation}")
    start, end, lso = st.bounds
    want = (start, end if isolation == "read_uncommitted" else lso)
    assert s.bounds[(case, "before", isolation)] == want


def check_from_the_middle(s: Served, case: Case, isolation: str) -> None:
    """A consumer seeking to offsets inside segments, inside batches and into offset gaps (the
    broker looks them up in kafkalog's offset index) gets the next records kafkalog wrote."""
    rows = s.staged[case].rows[isolation]
    got = s.starts[(case, isolation)]
    assert len(got) >= 4
    wrong = []
    for start, offsets, values in got:
        want = [r for r in rows if r[0] >= start][:5]
        if offsets != [r[0] for r in want] or values != [r[2] for r in want]:
            wrong.append((start, offsets, [r[0] for r in want]))
    assert not wrong, f"{case.name} {isolation}: (start, Kafka, kafkalog): {wrong[:5]}"


def check_offsets_for_times(s: Served, case: Case, isolation: str) -> None:
    """``offsetsForTimes`` (the broker searching kafkalog's time index) answers Kafka's rule
    applied to the records kafkalog wrote."""
    st = s.staged[case]
    wrong = []
    for target, offset, ts in s.for_times[(case, isolation)]:
        want = kafka_for_time(st, target)
        got = None if offset is None else (offset, ts)
        if got != want:
            wrong.append((target, got, want))
    assert not wrong, f"{case.name} {isolation}: (target, Kafka, rule): {wrong[:6]}"


def check_broker_log_quiet(s: Served, case: Case) -> None:
    """The broker's log for the partition: no truncation, index rebuild, corrupt index,
    invalid batch, deleted or stray directory, no warning (after the unclean hand-off the
    broker recovers the segments, which rebuilds their indexes, but truncates nothing)."""
    lines = s.lines[case]
    assert any("Completed load of Log" in line for line in lines), lines  # it did load them
    pat = FORBIDDEN if case.mode == "clean" else FORBIDDEN_RECOVER
    bad = [line for line in lines if (pat.search(line) or re.match(r"\[[^]]*\] (WARN|ERROR)", line))
           and not expected_line(line, case, s.staged[case])]
    assert not bad, "\n".join(bad)
    if case.mode == "recover":
        assert any("Recovering unflushed segment" in line for line in lines), "\n".join(lines)
    else:
        # the producer state is kafkalog's snapshot at the log end, not rebuilt from the data
        end = s.staged[case].bounds[1]
        loads = [int(m.group(1)) for line in lines
                 for m in [re.search(r"producer state from offset (\d+)", line)] if m]
        assert all(x == end for x in loads), "\n".join(lines)


def check_dump_log(s: Served, mode: str, producers: bool = True) -> None:
    """kafka-dump-log ``--verify-index-only`` and ``--index-sanity-check`` find nothing in
    kafkalog's ``.index``/``.timeindex`` files; it reads kafkalog's producer snapshots
    (``producers``: which hold producer state)."""
    verify = s.dumps[f"{mode}/verify"]
    out = base64.b64decode(verify["stdout"]).decode()
    err = base64.b64decode(verify["stderr"]).decode()
    assert verify["error"] is None, verify["error"]
    assert not re.search(r"mismatch|out of order|corrupt|non-consecutive", out + err,
                         re.I), out[-3000:]
    assert out.count("Dumping") == len(verify["files"]), out[-2000:]
    sanity = s.dumps[f"{mode}/sanity"]
    out = base64.b64decode(sanity["stdout"]).decode()
    assert sanity["error"] is None, sanity["error"]
    for f in sanity["files"]:
        assert f"{f} passed sanity check." in out or f"{f} is empty." in out, out[-2000:]
    snap = s.dumps[f"{mode}/snapshot"]
    out = base64.b64decode(snap["stdout"]).decode()
    assert snap["error"] is None, snap["error"]
    assert out.count("Dumping") == len(snap["files"]) and ("producerId" in out) == producers, \
        out[-2000:]


def check_round_trip(s: Served, case: Case, isolation: str) -> None:
    """After the broker appended more records, kafkalog reads the whole directory back as the
    consumer reads it, and the broker's appends follow kafkalog's records."""
    before = s.records[(case, "before", isolation)]
    after = s.records[(case, "after", isolation)]
    end = s.staged[case].bounds[1]
    assert after[: len(before)] == before
    appended = after[len(before):]
    assert len(appended) == 6 and appended[0][0] == end, appended[:2]
    assert_same(after, s.final[case].rows[isolation],
                f"kafkalog reading {case.name} back ({case.mode}, {isolation})")
    assert s.final[case].bounds[:2] == s.bounds[(case, "after", "read_uncommitted")]
