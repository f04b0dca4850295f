"""Apache Kafka as the judge of what kafkalog writes (issue 29, part 1).

Every write path of kafkalog (``Log.append`` as the leader with idempotent and transactional
producers, markers, rolls, retention, log-start moves and ``truncate_to``; ``append_as_follower``;
the Cleaner's output; ``write_arrow``; ``kafkalog salvage`` of a damaged copy) fills a partition
directory in a staging root.  One real broker (``kafka_support.Broker``) then serves them, handed
over by ``handoff.hand_off`` twice: after the broker's clean shutdown (it must trust kafkalog's
indexes, checkpoints, leader-epoch file and producer snapshots) and after a SIGKILL with the
recovery point dropped (it recovers every segment itself).  For each partition:

* Kafka's Java consumer, at both isolation levels, reads exactly the records kafkalog's own
  reader finds in the staged directory (offsets, keys, values, headers, timestamps and their
  types), with the same log start offset, end offset and last stable offset; from offsets in
  the middle of segments and batches (index lookups); ``offsetsForTimes`` answers what Kafka's
  search rule gives on the records kafkalog wrote;
* the broker's own log has no truncation, index rebuild, corrupt-index or invalid-batch
  warning, deleted or stray directory for those partitions (after the clean hand-off; after the
  unclean one, recovery but no truncation or invalid batch);
* kafka-dump-log's ``--verify-index-only`` and ``--index-sanity-check`` find nothing in
  kafkalog's ``.index``/``.timeindex`` files, and it reads kafkalog's ``.snapshot`` files;
* the broker appends more records, and kafkalog then reads the whole directory back as the
  consumer reads it (the round trip closes).
"""
from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import pytest

import handoff as ho
import kafka_support as ks
from kafkalog.storage.log import Log

pytestmark = pytest.mark.kafka

ISOLATIONS = ("read_uncommitted", "read_committed")
ORDER = ("leader", "retention", "follower", "arrow", "salvage")


class Case(NamedTuple):
    mode: str  # "clean" or "recover"
    writer: str
    topic: str
    partition: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


CASES = ([Case("clean", w, ho.TOPIC, i) for i, w in enumerate(ORDER)]
         + [Case("clean", "compacted", ho.COMPACT_TOPIC, 0)]
         + [Case("recover", w, ho.TOPIC, len(ORDER) + i) for i, w in enumerate(ORDER)]
         + [Case("recover", "compacted", ho.COMPACT_TOPIC, 1)])

Row = Tuple[int, Optional[bytes], Optional[bytes], Tuple[Tuple[str, Optional[bytes]], ...], int, int]


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
        rows = {iso: [(r.offset, _opt(r.key), _opt(r.value), tuple((k, _opt(v)) for k, v in r.headers),
                       r.timestamp, types[r.offset]) for r in log.iter_records(isolation=iso)]
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
    written: Dict[Case, ho.Written]
    lines: Dict[Case, List[str]]  # the broker's log lines naming the partition while it served
    records: Dict[Tuple[Case, str, str], List[Row]]  # (case, phase, isolation); phase before/after
    bounds: Dict[Tuple[Case, str, str], Tuple[int, int]]  # beginning, end
    starts: Dict[Tuple[Case, str], List[Tuple[int, List[int], List[Optional[bytes]]]]]
    for_times: Dict[Tuple[Case, str], List[Tuple[int, Optional[int], Optional[int]]]]
    dumps: Dict[str, Dict[str, Any]]  # mode/kind -> dump_log line
    appended: Dict[Case, int]
    final: Dict[Case, Staged]  # kafkalog's read of the broker's directory at the end
    broker_dir: Path


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
        indexes += sorted(str(f) for f in d.glob("*.index")) + sorted(str(f) for f in d.glob("*.timeindex"))
        snapshots += sorted(str(f) for f in d.glob("*.snapshot"))
    cls = "org.apache.kafka.tools.DumpLogSegments"
    return [{"op": "dump_log", "class": cls, "args": ["--verify-index-only", "--files", ",".join(indexes)],
             "tag": f"{mode}/verify", "files": indexes},
            {"op": "dump_log", "class": cls, "args": ["--index-sanity-check", "--files", ",".join(indexes)],
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
    steps: List[Dict[str, Any]] = [{k: v for k, v in d.items() if k not in ("tag", "files")} for d in dumps]
    for topic, parts in topics.items():
        for iso in ISOLATIONS:
            steps.append({"op": "consume", "topic": topic, "partitions": parts, "isolation": iso})
    for c in cases:
        st = staged[c]
        for iso in ISOLATIONS:
            steps.append({"op": "consume_from", "topic": c.topic, "partition": c.partition,
                          "isolation": iso, "starts": starts(st), "count": 5})
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


def _write_all(cases: List[Case], stage: Path, work: Path, tids: Dict[str, Any], base_ts: int, s: Served):
    for c in cases:
        w = ho.WRITERS[c.writer]
        path = stage / c.name
        s.written[c] = (w(path, tids[c.topic], base_ts, work) if c.writer == "salvage"
                        else w(path, tids[c.topic], base_ts))
        s.staged[c] = read_dir(path)


@pytest.fixture(scope="module")
def served(kafka_env, tmp_path_factory) -> Served:
    work = tmp_path_factory.mktemp("kafka-handoff")
    stage = work / "stage"
    stage.mkdir()
    broker = ks.Broker(kafka_env, work / "broker", overrides={
        # nothing but the hand-off may change the partitions' files
        "log.cleaner.enable": "false", "log.retention.check.interval.ms": 3600_000,
        "log.initial.task.delay.ms": 3600_000})
    s = Served({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, broker.log_dir)
    base_ts = (int(time.time() * 1000) // 1000) * 1000 - 3600 * 1000
    clean = [c for c in CASES if c.mode == "clean"]
    recover = [c for c in CASES if c.mode == "recover"]
    broker.format()
    broker.start()
    try:
        ks.run_tool(kafka_env, {"bootstrap": broker.bootstrap, "steps": [{"op": "create_topics", "topics": [
            {"name": ho.TOPIC, "partitions": 2 * len(ORDER), "configs": ho.TOPIC_CONFIGS},
            {"name": ho.COMPACT_TOPIC, "partitions": 2, "configs": ho.COMPACT_TOPIC_CONFIGS}]}]})
        deadline = time.monotonic() + 60
        while not all((broker.partition_dir(c.topic, c.partition) / "partition.metadata").exists()
                      for c in CASES):
            assert time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.2)
        broker.stop()
        assert (broker.log_dir / ".kafka_cleanshutdown").exists()
        tids = {t: ho.topic_id(broker.partition_dir(t, 0)) for t in (ho.TOPIC, ho.COMPACT_TOPIC)}
        _write_all(CASES, stage, work, tids, base_ts, s)

        # clean hand-off: the broker's marker stays
        for c in clean:
            ho.hand_off(stage, broker.log_dir, c.topic, c.partition)
        mark = broker.log_path.stat().st_size
        broker.start()
        serve_phase(kafka_env, broker, stage, clean, s.staged, s, "clean")
        broker.kill()
        text = broker.log_text(mark)
        for c in clean:
            s.lines[c] = partition_lines(text, c.name)

        # unclean hand-off: no marker, no recovery point
        assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
        for c in recover:
            ho.hand_off(stage, broker.log_dir, c.topic, c.partition, recover=True)
        mark = broker.log_path.stat().st_size
        broker.start()
        serve_phase(kafka_env, broker, stage, recover, s.staged, s, "recover")
    finally:
        broker.stop()
    text = broker.log_text(mark)
    for c in recover:
        s.lines[c] = partition_lines(text, c.name)
    for c in CASES:
        s.final[c] = read_dir(broker.partition_dir(c.topic, c.partition))
    return s


def case_id(c: Case) -> str:
    return f"{c.mode}-{c.writer}"


def assert_same(kafka: List[Row], kafkalog: List[Row], what: str) -> None:
    assert len(kafkalog) == len(kafka), f"{what}: kafkalog {len(kafkalog)} records, Kafka {len(kafka)}"
    for a, b in zip(kafka, kafkalog):
        assert b == a, f"{what}: at offset {a[0]} kafkalog {b!r}, Kafka {a!r}"


# -- the tests -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafkalog_wrote_what_was_asked(served, case):
    """The staged directory holds what the writer meant (where it can say), in several
    segments: the content the broker is then given is the intended one."""
    st = served.staged[case]
    assert len(st.segments) >= 2, st.segments
    written = served.written[case]
    for iso, want in zip(ISOLATIONS, written):
        if want is None:
            continue
        got = [(r[0], r[4], r[1], r[2], r[3]) for r in st.rows[iso]]
        want = [(o, got[i][1] if ts is None else ts, k, v, tuple(h))
                for i, (o, ts, k, v, h) in enumerate(want)]
        assert got == want, f"{case.name} {iso}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_consumer_reads_what_kafkalog_wrote(served, case, isolation):
    """Kafka's consumer reads, from the start, exactly kafkalog's records; its beginning and
    end offsets are kafkalog's log start and log end (read_committed: last stable) offsets."""
    st = served.staged[case]
    assert_same(served.records[(case, "before", isolation)], st.rows[isolation],
                f"{case.mode} {case.writer} {isolation}")
    start, end, lso = st.bounds
    want = (start, end if isolation == "read_uncommitted" else lso)
    assert served.bounds[(case, "before", isolation)] == want


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_consumer_from_the_middle(served, case, isolation):
    """A consumer seeking to offsets inside segments, inside batches and into offset gaps (the
    broker looks them up in kafkalog's offset index) gets the next records kafkalog wrote."""
    rows = served.staged[case].rows[isolation]
    got = served.starts[(case, isolation)]
    assert len(got) >= 4
    wrong = []
    for start, offsets, values in got:
        want = [r for r in rows if r[0] >= start][:5]
        if offsets != [r[0] for r in want] or values != [r[2] for r in want]:
            wrong.append((start, offsets, [r[0] for r in want]))
    assert not wrong, f"{case.name} {isolation}: (start, Kafka, kafkalog): {wrong[:5]}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_offsets_for_times(served, case, isolation):
    """``offsetsForTimes`` (the broker searching kafkalog's time index) answers Kafka's rule
    applied to the records kafkalog wrote."""
    st = served.staged[case]
    wrong = []
    for target, offset, ts in served.for_times[(case, isolation)]:
        want = kafka_for_time(st, target)
        got = None if offset is None else (offset, ts)
        if got != want:
            wrong.append((target, got, want))
    assert not wrong, f"{case.name} {isolation}: (target, Kafka, rule): {wrong[:6]}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_broker_log_is_quiet(served, case):
    """The broker's log for the partition: no truncation, index rebuild, corrupt index,
    invalid batch, deleted or stray directory, no warning (after the unclean hand-off the
    broker recovers the segments, which rebuilds their indexes, but truncates nothing)."""
    lines = served.lines[case]
    assert any("Completed load of Log" in line for line in lines), lines  # it did load them
    pat = FORBIDDEN if case.mode == "clean" else FORBIDDEN_RECOVER
    bad = [line for line in lines if (pat.search(line) or re.match(r"\[[^]]*\] (WARN|ERROR)", line))
           and not expected_line(line, case, served.staged[case])]
    assert not bad, "\n".join(bad)
    if case.mode == "recover":
        assert any("Recovering unflushed segment" in line for line in lines), "\n".join(lines)
    else:
        # the producer state is kafkalog's snapshot at the log end, not rebuilt from the data
        end = served.staged[case].bounds[1]
        loads = [int(m.group(1)) for line in lines
                 for m in [re.search(r"producer state from offset (\d+)", line)] if m]
        assert all(x == end for x in loads), "\n".join(lines)


@pytest.mark.parametrize("mode", ["clean", "recover"])
def test_dump_log_verifies_kafkalog_indexes(served, mode):
    """kafka-dump-log ``--verify-index-only`` and ``--index-sanity-check`` find nothing in
    kafkalog's ``.index``/``.timeindex`` files; it reads kafkalog's producer snapshots."""
    verify = served.dumps[f"{mode}/verify"]
    out = base64.b64decode(verify["stdout"]).decode()
    err = base64.b64decode(verify["stderr"]).decode()
    assert verify["error"] is None, verify["error"]
    assert not re.search(r"mismatch|out of order|corrupt|non-consecutive", out + err, re.I), out[-3000:]
    assert out.count("Dumping") == len(verify["files"]), out[-2000:]
    sanity = served.dumps[f"{mode}/sanity"]
    out = base64.b64decode(sanity["stdout"]).decode()
    assert sanity["error"] is None, sanity["error"]
    for f in sanity["files"]:
        assert f"{f} passed sanity check." in out or f"{f} is empty." in out, out[-2000:]
    snap = served.dumps[f"{mode}/snapshot"]
    out = base64.b64decode(snap["stdout"]).decode()
    assert snap["error"] is None, snap["error"]
    assert out.count("Dumping") == len(snap["files"]) and "producerId" in out, out[-2000:]


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_round_trip_closes(served, case, isolation):
    """After the broker appended more records, kafkalog reads the whole directory back as the
    consumer reads it, and the broker's appends follow kafkalog's records."""
    before = served.records[(case, "before", isolation)]
    after = served.records[(case, "after", isolation)]
    end = served.staged[case].bounds[1]
    assert after[: len(before)] == before
    appended = after[len(before):]
    assert len(appended) == 6 and appended[0][0] == end, appended[:2]
    assert_same(after, served.final[case].rows[isolation],
                f"kafkalog reading {case.name} back ({case.mode}, {isolation})")
    assert served.final[case].bounds[:2] == served.bounds[(case, "after", "read_uncommitted")]
