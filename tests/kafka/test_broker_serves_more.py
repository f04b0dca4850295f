"""Apache Kafka as the judge of what kafkalog writes (issue 29, part 2): producer state, open
transactions and converted message formats.

One real broker (``kafka_support.Broker``) is handed, by ``handoff.hand_off`` after its clean
shutdown and again after a SIGKILL (it then recovers every segment itself), partitions that
kafkalog wrote:

* ``idempotent``: ``Log.append`` of an idempotent producer's batches (producer id, epoch and
  sequences of kafkalog's choosing) among plain ones.  The broker must take up that producer
  where kafkalog's producer snapshot (clean) or its batches (recover) left it: over a raw
  Produce request (``produce_raw``; Kafka's Java producer cannot take a chosen producer id) a
  batch with a sequence gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, a retry of kafkalog's
  last batch of that producer is answered as a duplicate with the offset kafkalog gave it, the
  next sequence is appended at the log end, and its retry is again a duplicate (nothing more
  appended).
* ``open`` / ``aborted``: transactional batches whose last transaction has no marker (the
  broker's last stable offset must be kafkalog's ``LogView.last_stable_offset``, a
  read_committed consumer reads exactly the records below it that were not aborted, until the
  broker itself aborts the transaction with Admin ``abortTransaction``: then it reads all the
  rest, and so does kafkalog from the broker's directory), and the same partition with
  kafkalog's ABORT marker written for it (read_committed then skips the aborted records, as
  ``to_arrow(..., read_committed=True)`` does).
* every partition: the producer state the broker loaded (Admin ``describeProducers``: ids,
  epochs, last sequences and timestamps, coordinator epochs, open transactions' first offsets)
  is the one kafkalog's reader finds in the directory.
* ``up``: legacy messages (magic 0 without timestamps, then magic 1 CreateTime and
  LogAppendTime; uncompressed runs and compressed wrappers of every legacy codec; offset gaps)
  up-converted by ``kafkalog.convert.up_convert`` and appended with ``append_as_follower``.
* ``down1`` / ``down01``: magic-2 batches (every codec, idempotent and transactional ones with
  their markers, LogAppendTime) down-converted by ``kafkalog.convert.down_convert`` to magic 1,
  and to magic 0 then magic 1 (a topic that lived through the message format upgrade).  Kafka
  4.x no longer writes these formats but still loads and serves them.

Each partition gets the checks of ``test_broker_serves_writes.py`` (``handoff.check_*``): what
Kafka's consumer reads at both isolation levels, from the start and from the middle, a quiet
broker log, kafka-dump-log on kafkalog's indexes and snapshots, and the round trip after the
broker's appends (for ``idempotent`` including the raw produces; for ``open`` read_committed
stays where the open transaction begins).  ``offsetsForTimes`` is held against Kafka's rule with
two parts ``handoff.kafka_for_time`` does not need for the other writers: a segment without
timestamps (magic 0) counts its file's mtime as its largest timestamp, and under read_committed
an answer at or past the last stable offset is none.  kafkalog's own ``offset_for_timestamp``
must answer as the broker did, but where the broker has no answer and kafkalog, as documented,
goes on to the next segment (``LocalLog.offset_for_timestamp``).
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

import pytest

from kafkalog import MemoryRecords, MemoryRecordsBuilder
from kafkalog.convert import down_convert, up_convert
from kafkalog.storage.log import Log

import handoff as ho
import kafka_support as ks
import produce_raw as raw

pytestmark = pytest.mark.kafka

ISOLATIONS = ho.ISOLATIONS
Case = ho.Case
IDEM_TOPIC, TXN_TOPIC, CONV_TOPIC = "kl-idem", "kl-txn", "kl-conv"
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")  # zstd needs magic 2
# producer ids far from the controller's blocks (handed out from 0 in blocks of 1000): a
# broker-assigned id equal to one kafkalog wrote would meet that producer's recorded sequence
PID, EPOCH = 7_100_001, 2  # the idempotent producer the broker must continue
OTHER_PID = 7_100_002
T_COMMITS, T_OPEN = 7_100_011, 7_100_012
WRITERS_BY_TOPIC = {IDEM_TOPIC: ("idempotent",), TXN_TOPIC: ("open", "aborted"),
                    CONV_TOPIC: ("up", "down1", "down01")}
CASES = [Case(mode, w, topic, i + (len(ws) if mode == "recover" else 0))
         for topic, ws in WRITERS_BY_TOPIC.items() for mode in ("clean", "recover")
         for i, w in enumerate(ws)]


class Producer(NamedTuple):
    """An idempotent producer as kafkalog left it: its last batch (the client's bytes), the
    offset kafkalog gave that batch, and its last sequence."""

    last_batch: bytes
    last_base_offset: int
    last_sequence: int


class More(NamedTuple):
    """What the module's broker session found (``s``: what ``handoff.serve_phase`` found)."""

    s: ho.Served
    producers: Dict[Case, Producer]
    answers: Dict[Case, Dict[str, raw.ProduceResult]]  # the broker's answers to the raw produces
    sent: Dict[Case, List[ho.Row]]  # the rows of the batch sent as the next sequence
    # what a consumer reads after them (and, for ``open``, after the broker aborted it)
    raw_rows: Dict[Tuple[Case, str], List[ho.Row]]
    raw_bounds: Dict[Tuple[Case, str], Tuple[int, int]]
    # LogView.last_stable_offset, the open transaction's first offset
    lso: Dict[Case, Tuple[int, int]]
    stage: Path  # kafkalog's directories, as handed over
    # the broker's log lines naming the partition during the raw produces
    raw_lines: Dict[Case, List[str]]
    hidden: Dict[Case, set]  # offsets of records in aborted or open transactions
    # the producer state the broker loaded (Admin describeProducers), and kafkalog's
    broker_producers: Dict[Case, Dict[int, Tuple]]
    kafkalog_producers: Dict[Case, Dict[int, Tuple]]
    aborted_by_broker: Dict[Case, List[Tuple[int, int]]]  # (producer id, transaction start)


def rows_of(recs, offsets) -> List[Tuple]:
    return [(o, ts, k, v, h) for o, (ts, k, v, h) in zip(offsets, recs)]


# -- the writers -----------------------------------------------------------------------------------
def write_idempotent(path: Path, tid, base_ts: int) -> Tuple[ho.Written, Producer]:
    """``Log.append``: plain batches, producer ``PID`` (epoch ``EPOCH``) in every round and
    ``OTHER_PID`` in the first ones only (its state lies in an old segment), every codec."""
    gen = ho.Gen(11, base_ts)
    seqs = {PID: 0, OTHER_PID: 0}
    rows: List[Tuple] = []
    last = None
    with Log.open(path, ho.LOG_CONFIG, topic_id=tid) as log:
        for rnd in range(16):
            codec = ho.CODECS[rnd % 5]
            for pid, n in ((-1, 5), (OTHER_PID, 2), (PID, 3 + rnd % 4)):
                if pid == OTHER_PID and rnd >= 5:
                    continue
                recs = gen.records(n)
                kw = {}
                if pid >= 0:
                    kw = dict(producer_id=pid, producer_epoch=EPOCH if pid == PID else 0,
                              base_sequence=seqs[pid])
                    seqs[pid] += n
                data = ho.batch(recs, codec, **kw)
                info = log.append(data)
                rows += rows_of(recs, range(info.first_offset, info.first_offset + n))
                if pid == PID:
                    last = Producer(data, info.first_offset, seqs[PID] - 1)
    return ho.Written(rows, rows), last


def write_transactions(path: Path, tid, base_ts: int,
                       abort_open: bool) -> Tuple[ho.Written, int, set]:
    """``Log.append``: plain batches, producer ``T_COMMITS``'s transactions (each ended by
    its marker, one in four aborted) and ``T_OPEN``'s transaction of two batches that no marker
    ends (``abort_open``: ended by an ABORT marker written last).  Returns what each isolation
    level must read, the open transaction's first offset and the offsets of the aborted and
    open transactions' records."""
    gen = ho.Gen(31, base_ts)
    seqs = {T_COMMITS: 0, T_OPEN: 0}
    rows: List[Tuple] = []
    hidden = set()  # offsets a read_committed consumer never gets
    open_first = None
    ts = base_ts + 100_000
    with Log.open(path, ho.LOG_CONFIG, topic_id=tid) as log:
        def add(recs, codec, pid=-1):
            kw = {}
            if pid >= 0:
                kw = dict(producer_id=pid, producer_epoch=0, base_sequence=seqs[pid],
                          is_transactional=True)
                seqs[pid] += len(recs)
            info = log.append(ho.batch(recs, codec, **kw))
            out = rows_of(recs, range(info.first_offset, info.first_offset + len(recs)))
            rows.extend(out)
            return out

        for rnd in range(16):
            codec = ho.CODECS[rnd % 5]
            add(gen.records(5), codec)
            t = add(gen.records(3), ho.CODECS[(rnd + 2) % 5], pid=T_COMMITS)
            commit = rnd % 4 != 2
            if not commit:
                hidden |= {r[0] for r in t}
            log.append(ho.marker(commit, T_COMMITS, 0, ts + rnd), origin="coordinator")
            if rnd in (9, 12):
                t = add(gen.records(4), codec, pid=T_OPEN)
                hidden |= {r[0] for r in t}
                open_first = t[0][0] if open_first is None else open_first
        if abort_open:
            log.append(ho.marker(False, T_OPEN, 0, ts + 100), origin="coordinator")
    committed = [r for r in rows if r[0] not in hidden and (abort_open or r[0] < open_first)]
    return ho.Written(rows, committed), open_first, hidden


def write_up_converted(path: Path, tid, base_ts: int) -> ho.Written:
    """Legacy messages as an old broker kept them, ``up_convert``-ed, ``append_as_follower``:
    magic 0 (no timestamps), then magic 1 CreateTime and LogAppendTime; uncompressed runs and
    compressed wrappers of every legacy codec; offset gaps between and inside wrappers."""
    gen = ho.Gen(41, base_ts)
    parts: List[bytes] = []
    rows: List[Tuple] = []
    off = 0
    for i in range(36):
        magic = 0 if i < 12 else 1
        codec = LEGACY_CODECS[i % 4]
        lat = magic == 1 and i % 5 == 0
        append_time = base_ts + 200_000 + i
        b = MemoryRecordsBuilder(magic, codec, off, "log_append_time" if lat else "create_time",
                                 log_append_time=append_time if lat else None)
        for ts, k, v, _ in gen.records(6):
            b.append_with_offset(off, ts, k, v)
            rows.append((off, -1 if magic == 0 else append_time if lat else ts, k, v, ()))
            off += 1 + (2 if (off * 7) % 10 == 3 else 0)
        parts.append(b.build())
    converted = up_convert(b"".join(parts), max_batch_bytes=3000)
    with Log.open(path, ho.LOG_CONFIG, topic_id=tid) as log:
        for b in MemoryRecords(converted):
            assert b.magic == 2
            log.append_as_follower(bytes(b.view()))
    return ho.Written(rows, rows)


def write_down_converted(path: Path, tid, base_ts: int, magics: Tuple[int, ...]) -> ho.Written:
    """Magic-2 batches (every codec, idempotent and transactional ones with their markers, a
    LogAppendTime one) ``down_convert``-ed, the first part to ``magics[0]``, the rest to
    ``magics[-1]``, and ``append_as_follower``-ed (markers dropped: offset gaps)."""
    gen = ho.Gen(51, base_ts)
    rows: List[Tuple] = []
    off = 0
    seq = 0
    n_batches = 40
    with Log.open(path, ho.LOG_CONFIG, topic_id=tid) as log:
        for i in range(n_batches):
            magic = magics[0] if i < n_batches // 2 else magics[-1]
            codec = ho.CODECS[i % 5]
            recs = gen.records(3 + i % 5)
            offsets = list(range(off, off + len(recs)))
            kind = i % 4
            append_time = base_ts + 300_000 + i
            if kind == 3:
                b = MemoryRecordsBuilder(2, codec, off, "log_append_time",
                                         log_append_time=append_time)
                for o, (ts, k, v, h) in zip(offsets, recs):
                    b.append_with_offset(o, ts, k, v, headers=h)
                data = b.build()
            else:
                kw = {}
                if kind in (1, 2):
                    kw = dict(producer_id=OTHER_PID, producer_epoch=0, base_sequence=seq,
                              is_transactional=kind == 2)
                    seq += len(recs)
                data = ho.follower_batch(recs, codec, offsets, **kw)
            off += len(recs)
            if kind == 2:
                data += ho.marker(True, OTHER_PID, 0, base_ts + 310_000 + i, base_offset=off)
                off += 1
            old = down_convert(data, magic, compression_type="gzip" if codec == "zstd" else None)
            assert {b.magic for b in MemoryRecords(old)} == {magic}
            log.append_as_follower(old)
            rows += [(o, -1 if magic == 0 else append_time if kind == 3 else ts, k, v, ())
                     for o, (ts, k, v, _) in zip(offsets, recs)]
    return ho.Written(rows, rows)


# -- serving ---------------------------------------------------------------------------------------
def for_serving(st: ho.Staged) -> ho.Staged:
    """The staged read without the records that have no timestamp (-1: magic 0) in the list
    ``handoff.targets`` picks ``offsetsForTimes`` targets from: Kafka's consumer refuses a
    negative target time."""
    return ho.Staged(st.rows, st.bounds,
                     [(b, m, [(o, t) for o, t in recs if t >= 0]) for b, m, recs in st.segments])


KAFKALOG_PIDS = 7_000_000  # kafkalog's producer ids are above, the broker's below


def producer_states(entries) -> Dict[int, Tuple]:
    """producer id -> (epoch, last sequence, last timestamp, coordinator epoch, open
    transaction's first offset) of kafkalog's producers (-1: none)."""
    return {e["producerId"]: (e["producerEpoch"], e["lastSequence"], e["lastTimestamp"],
                              e["coordinatorEpoch"], e["txnStartOffset"])
            for e in entries if e["producerId"] >= KAFKALOG_PIDS}


def kafkalog_producers(path: Path) -> Dict[int, Tuple]:
    with Log.open(path, read_only=True) as log:
        log.last_stable_offset  # a read-only open rebuilds producer state when it is asked
        return {pid: (e.producer_epoch, e.last_sequence, e.timestamp, e.coordinator_epoch,
                      e.current_txn_first_offset)
                for pid, e in log.producer_state.producers.items()}


def describe_producers(env, broker: ks.Broker, cases: List[Case], m: More) -> None:
    """The producer state the broker holds for ``cases``' partitions."""
    steps = [{"op": "producers", "topic": c.topic, "partition": c.partition} for c in cases]
    by_tp = {(c.topic, c.partition): c for c in cases}
    for line in ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": steps}):
        if line["op"] == "producers":
            m.broker_producers[by_tp[(line["topic"], line["partition"])]] = \
                producer_states(line["producers"])


def consume(env, broker: ks.Broker, cases: List[Case], m: More,
            abort: List[Case] = ()) -> Tuple[Dict, Dict]:
    """The broker aborts the open transactions of ``abort``' partitions (Admin
    abortTransaction); then what Kafka's consumer reads from ``cases``' partitions (both
    isolation levels)."""
    steps = [{"op": "producers", "topic": c.topic, "partition": c.partition, "abort_open": True}
             for c in abort]
    steps += [{"op": "consume", "topic": c.topic, "partitions": [c.partition], "isolation": iso}
              for c in cases for iso in ISOLATIONS]
    by_tp = {(c.topic, c.partition): c for c in cases}
    rows: Dict[Tuple[Case, str], List[ho.Row]] = {}
    bounds: Dict[Tuple[Case, str], Tuple[int, int]] = {}
    current = None
    for line in ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": steps}):
        if line["op"] == "producers":
            current = by_tp[(line["topic"], line["partition"])]
            m.aborted_by_broker[current] = []
        elif line["op"] == "aborted_txn":
            m.aborted_by_broker[current].append((line["producerId"], line["txnStartOffset"]))
        elif line["op"] == "record":
            c = by_tp[(line["topic"], line["partition"])]
            rows.setdefault((c, line["isolation"]), []).append(
                (line["offset"], ho._b(line["key"]), ho._b(line["value"]),
                 tuple((k, ho._b(v)) for k, v in line["headers"]), line["timestamp"],
                 line["timestampType"]))
        elif line["op"] == "consumed":
            for p, begin in line["beginning"].items():
                c = by_tp[(line["topic"], int(p))]
                bounds[(c, line["isolation"])] = (begin, line["end"][p])
                rows.setdefault((c, line["isolation"]), [])
    return rows, bounds


def continue_producer(broker: ks.Broker, case: Case, p: Producer, more: More) -> None:
    """As producer ``PID`` (epoch ``EPOCH``): a sequence gap, a retry of kafkalog's last
    batch, the next sequence, its retry; the broker's answers."""
    now = int(time.time() * 1000)
    recs = [(now + i, b"next-%d" % i, b"after kafkalog %s %d" % (case.mode.encode(), i),
             [("seq", b"%d" % (p.last_sequence + 1 + i))]) for i in range(3)]

    def batch(first_seq: int) -> bytes:
        return ho.batch(recs, "zstd", producer_id=PID, producer_epoch=EPOCH,
                        base_sequence=first_seq)

    with raw.Connection("127.0.0.1", broker.port) as conn:
        lo, hi = conn.api_versions()[raw.PRODUCE]
        assert lo <= raw.PRODUCE_VERSION <= hi, f"the broker serves Produce v{lo}-v{hi}"

        def send(data: bytes) -> raw.ProduceResult:
            return conn.produce(case.topic, case.partition, data)

        answers = {"gap": send(batch(p.last_sequence + 2)), "retry_kafkalog": send(p.last_batch),
                   "next": send(batch(p.last_sequence + 1)),
                   "retry_next": send(batch(p.last_sequence + 1))}
    more.answers[case] = answers
    end = more.s.bounds[(case, "after", "read_uncommitted")][1]
    more.sent[case] = [(end + i, k, v, tuple(h), ts, 0) for i, (ts, k, v, h) in enumerate(recs)]


@pytest.fixture(scope="module")
def more(kafka_env, tmp_path_factory) -> More:
    work = tmp_path_factory.mktemp("kafka-handoff-more")
    stage = work / "stage"
    stage.mkdir()
    broker, s = ho.quiet_broker(kafka_env, work)
    m = More(s, {}, {}, {}, {}, {}, {}, stage, {}, {}, {}, {}, {})
    base_ts = (int(time.time() * 1000) // 1000) * 1000 - 3600 * 1000
    broker.format()
    broker.start()
    mark = 0
    try:
        ho.create_topics(kafka_env, broker, [
            {"name": t, "partitions": 2 * len(ws), "configs": ho.TOPIC_CONFIGS}
            for t, ws in WRITERS_BY_TOPIC.items()])
        broker.stop()
        tids = {t: ho.topic_id(broker.partition_dir(t, 0)) for t in WRITERS_BY_TOPIC}
        for c in CASES:
            path, tid = stage / c.name, tids[c.topic]
            if c.writer == "idempotent":
                s.written[c], m.producers[c] = write_idempotent(path, tid, base_ts)
            elif c.writer in ("open", "aborted"):
                s.written[c], first, m.hidden[c] = write_transactions(path, tid, base_ts,
                                                                       c.writer == "aborted")
                with Log.open(path, read_only=True) as log:
                    m.lso[c] = (log.view.last_stable_offset, first)
            elif c.writer == "up":
                s.written[c] = write_up_converted(path, tid, base_ts)
            else:
                s.written[c] = write_down_converted(path, tid, base_ts,
                                                    (1,) if c.writer == "down1" else (0, 1))
            s.staged[c] = ho.read_dir(path)
            m.kafkalog_producers[c] = kafkalog_producers(path)
        serving = {c: for_serving(st) for c, st in s.staged.items()}

        for mode in ("clean", "recover"):
            cases = [c for c in CASES if c.mode == mode]
            # clean: the broker's marker stays; recover: after a SIGKILL, no recovery point
            assert (broker.log_dir / ".kafka_cleanshutdown").exists() == (mode == "clean")
            for c in cases:
                ho.hand_off(stage, broker.log_dir, c.topic, c.partition, recover=mode == "recover")
            mark = broker.log_path.stat().st_size
            broker.start()
            describe_producers(kafka_env, broker, cases, m)
            ho.serve_phase(kafka_env, broker, stage, cases, serving, s, mode)
            idem = [c for c in cases if c.writer == "idempotent"]
            opened = [c for c in cases if c.writer == "open"]
            raw_mark = broker.log_path.stat().st_size
            for c in idem:
                continue_producer(broker, c, m.producers[c], m)
            rows, bounds = consume(kafka_env, broker, idem + opened, m, abort=opened)
            m.raw_rows.update(rows)
            m.raw_bounds.update(bounds)
            raw_text = broker.log_text(raw_mark)
            for c in idem:
                m.raw_lines[c] = ho.partition_lines(raw_text, c.name)
            if mode == "clean":
                broker.kill()
                _lines(broker.log_text(mark), cases, m)
    finally:
        broker.stop()
    _lines(broker.log_text(mark), [c for c in CASES if c.mode == "recover"], m)
    for c in CASES:
        s.final[c] = ho.read_dir(broker.partition_dir(c.topic, c.partition))
    return m


def _lines(text: str, cases: List[Case], m: More) -> None:
    """The broker's log lines naming each partition, but for those of the raw produces (the
    refused sequence gap is logged as an error; ``test_broker_logs_the_gap_only``)."""
    for c in cases:
        raw_lines = set(m.raw_lines.get(c, ()))
        m.s.lines[c] = [line for line in ho.partition_lines(text, c.name) if line not in raw_lines]


def case_id(c: Case) -> str:
    return f"{c.mode}-{c.writer}"


def cases_of(*writers: str) -> List[Case]:
    return [c for c in CASES if c.writer in writers]


# -- the tests -------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafkalog_wrote_what_was_asked(more, case):
    """The staged directory holds what the writer meant, in several segments."""
    st = more.s.staged[case]
    assert len(st.segments) >= 2, st.segments
    for iso, want in zip(ISOLATIONS, more.s.written[case]):
        got = [(r[0], r[4], r[1], r[2], r[3]) for r in st.rows[iso]]
        want = [(o, ts, k, v, tuple(h)) for o, ts, k, v, h in want]
        assert got == want, f"{case.name} {iso}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_consumer_reads_what_kafkalog_wrote(more, case, isolation):
    ho.check_consumer_reads(more.s, case, isolation)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_consumer_from_the_middle(more, case, isolation):
    ho.check_from_the_middle(more.s, case, isolation)


def with_mtimes(more: More, case: Case) -> ho.Staged:
    """The staged read with Kafka's ``largestTimestamp`` of each segment: its largest record
    timestamp or, when it has none (magic 0), its ``.log`` file's mtime (``hand_off`` copies
    the files with their mtimes, and the broker answers before it appends)."""
    st = more.s.staged[case]
    segs = []
    for base, max_ts, recs in st.segments:
        if max_ts < 0:
            f = more.stage / case.name / ("%020d.log" % base)
            max_ts = int(os.stat(f).st_mtime * 1000)
        segs.append((base, max_ts, recs))
    return st._replace(segments=segs)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_offsets_for_times(more, case, isolation):
    """``offsetsForTimes`` answers Kafka's rule on kafkalog's records (``handoff.kafka_for_time``
    with each segment's ``largestTimestamp``); under read_committed an answer at or past the
    last stable offset is no answer (the broker's ListOffsets for that isolation level)."""
    st = with_mtimes(more, case)
    lso = st.bounds[2]
    wrong = []
    for target, offset, ts in more.s.for_times[(case, isolation)]:
        want = ho.kafka_for_time(st, target)
        if want is not None and isolation == "read_committed" and want[0] >= lso:
            want = None
        got = None if offset is None else (offset, ts)
        if got != want:
            wrong.append((target, got, want))
    assert not wrong, f"{case.name} {isolation}: (target, Kafka, rule): {wrong[:6]}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafkalog_offsets_for_times_as_the_broker(more, case):
    """kafkalog's own ``offset_for_timestamp`` on the directory it wrote answers what the
    broker answered for it, None included: Kafka searches only the first segment whose largest
    timestamp reaches the target (for a magic-0 segment, its file's mtime), and so does
    kafkalog.  (kafkalog went on to later segments until the broker showed this: on the
    up-converted and down-converted v0 directories it answered (88, ...) where Kafka had
    none.)"""
    with Log.open(more.stage / case.name, read_only=True) as log:
        wrong = []
        for target, offset, ts in more.s.for_times[(case, "read_uncommitted")]:
            found = log.offset_for_timestamp(target)
            mine = None if found is None else (found.offset, found.timestamp)
            kafka = None if offset is None else (offset, ts)
            if mine != kafka:
                wrong.append((target, kafka, mine))
    assert not wrong, f"{case.name}: (target, Kafka, kafkalog): {wrong[:6]}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_broker_log_is_quiet(more, case):
    ho.check_broker_log_quiet(more.s, case)


@pytest.mark.parametrize("mode", ["clean", "recover"])
def test_dump_log_verifies_kafkalog_indexes(more, mode):
    ho.check_dump_log(more.s, mode)


@pytest.mark.parametrize("case", [c for c in CASES if c.writer not in ("idempotent", "open")],
                         ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_round_trip_closes(more, case, isolation):
    """(``idempotent`` and ``open``: the broker appended more, see their own tests.)"""
    ho.check_round_trip(more.s, case, isolation)


# -- the idempotent producer -----------------------------------------------------------------------
@pytest.mark.parametrize("case", cases_of("idempotent"), ids=case_id)
def test_producer_sequence_gap_is_refused(more, case):
    """The broker knows the producer's last sequence (a producer it knows nothing of may start
    anywhere): a gap after it is refused."""
    gap = more.answers[case]["gap"]
    assert gap.error_code == raw.OUT_OF_ORDER_SEQUENCE_NUMBER, gap


@pytest.mark.parametrize("case", cases_of("idempotent"), ids=case_id)
def test_broker_logs_the_gap_only(more, case):
    """What the broker logged for the partition during the raw produces: the refused gap
    only, measured against the producer's last sequence as kafkalog recorded it."""
    last = more.producers[case].last_sequence
    end = more.s.bounds[(case, "after", "read_uncommitted")][1]
    lines = more.raw_lines[case]
    want = (f"Out of order sequence number for producer {PID} at offset {end} in partition "
            f"{case.name}: {last + 2} (incoming seq. number), {last} (current end sequence number)")
    assert any(want in line for line in lines), "\n".join(lines)
    bad = [line for line in lines if re.match(r"\[[^]]*\] (WARN|ERROR)", line)
           and "Error processing append operation" not in line]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("case", cases_of("idempotent"), ids=case_id)
def test_retry_of_kafkalogs_last_batch_is_a_duplicate(more, case):
    """A retry of the last batch kafkalog appended for the producer: success, the offset
    kafkalog gave it, nothing appended."""
    got = more.answers[case]["retry_kafkalog"]
    assert (got.error_code, got.base_offset) == (0, more.producers[case].last_base_offset), got


@pytest.mark.parametrize("case", cases_of("idempotent"), ids=case_id)
def test_producer_continues_with_its_next_sequence(more, case):
    """The next sequence is appended at the log end, and its retry answered as a duplicate."""
    end = more.s.bounds[(case, "after", "read_uncommitted")][1]
    nxt, again = more.answers[case]["next"], more.answers[case]["retry_next"]
    assert (nxt.error_code, nxt.base_offset) == (0, end), nxt
    assert (again.error_code, again.base_offset) == (0, end), again


@pytest.mark.parametrize("case", cases_of("idempotent"), ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_idempotent_round_trip_closes(more, case, isolation):
    """A consumer then reads what it read before plus the one batch sent (the duplicates
    appended nothing), and kafkalog reads the broker's directory back the same."""
    after = more.s.records[(case, "after", isolation)]
    got = more.raw_rows[(case, isolation)]
    ho.assert_same(got, after + more.sent[case], f"{case.name} {isolation} after the producer")
    end = more.s.bounds[(case, "after", isolation)][1] + len(more.sent[case])
    assert more.raw_bounds[(case, isolation)][1] == end
    ho.assert_same(got, more.s.final[case].rows[isolation], f"kafkalog reading {case.name} back")
    assert more.s.final[case].bounds[1] == end


# -- transactions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", cases_of("open", "aborted"), ids=case_id)
def test_last_stable_offset_is_kafkalogs(more, case):
    """kafkalog's ``LogView.last_stable_offset`` is the open transaction's first offset (the
    log end once it is aborted), and it is the broker's read_committed end offset."""
    lso, first = more.lso[case]
    st = more.s.staged[case]
    assert lso == (first if case.writer == "open" else st.bounds[1])
    assert st.bounds[2] == lso
    assert more.s.bounds[(case, "before", "read_committed")][1] == lso


@pytest.mark.parametrize("case", cases_of("open"), ids=case_id)
def test_open_transaction_hides_what_follows(more, case):
    """With the transaction still open after the broker's appends, read_committed still ends
    at its first offset and reads only the committed records below it."""
    lso = more.lso[case][0]
    before = more.s.records[(case, "before", "read_committed")]
    assert before and all(r[0] < lso for r in before)
    assert more.s.records[(case, "after", "read_committed")] == before
    assert more.s.bounds[(case, "after", "read_committed")][1] == lso


@pytest.mark.parametrize("case", cases_of("open"), ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_broker_aborts_kafkalogs_open_transaction(more, case, isolation):
    """The broker aborts the transaction kafkalog left open (Admin abortTransaction, with the
    producer epoch it loaded): the ABORT marker follows the broker's appends, read_committed
    then skips the transaction's records and reads all the rest, and kafkalog reads the
    broker's directory back the same, its last stable offset the log end again."""
    assert more.aborted_by_broker[case] == [(T_OPEN, more.lso[case][1])]
    after = more.s.records[(case, "after", "read_uncommitted")]
    want = after if isolation == "read_uncommitted" else [
        r for r in after if r[0] not in more.hidden[case]]
    got = more.raw_rows[(case, isolation)]
    ho.assert_same(got, want, f"{case.name} {isolation} after the broker's abort")
    end = more.s.bounds[(case, "after", "read_uncommitted")][1] + 1  # the marker
    assert more.raw_bounds[(case, isolation)][1] == end
    final = more.s.final[case]
    assert final.bounds[1:] == (end, end)
    ho.assert_same(got, final.rows[isolation], f"kafkalog reading {case.name} back")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_broker_holds_kafkalogs_producer_state(more, case):
    """The producer state the broker loaded (kafkalog's snapshot after the clean hand-off,
    rebuilt from kafkalog's batches after the unclean one), as Admin describeProducers reports
    it, is kafkalog's: producer ids, epochs, last sequences, last timestamps, coordinator
    epochs and open transactions' first offsets."""
    mine = more.kafkalog_producers[case]
    assert more.broker_producers[case] == mine
    if case.writer in ("idempotent", "open", "aborted"):
        assert mine, "the writer left producer state"


@pytest.mark.parametrize("case", cases_of("aborted"), ids=case_id)
def test_aborted_transaction_skipped_as_to_arrow_skips_it(more, case):
    """After kafkalog's ABORT marker a read_committed consumer skips the aborted records, as
    ``to_arrow(..., read_committed=True)`` of the staged directory does."""
    pytest.importorskip("pyarrow")
    import kafkalog.arrow as ka

    t = ka.to_arrow(str(more.stage / case.name), columns=["offset", "key", "value"],
                    read_committed=True)
    arrow = list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                     t.column("value").to_pylist()))
    kafka = [(r[0], r[1], r[2]) for r in more.s.records[(case, "before", "read_committed")]]
    assert arrow == kafka
    written = more.s.written[case]
    assert [(o, k, v) for o, _, k, v, _ in written.committed] == kafka
    assert len(written.committed) < len(written.uncommitted)
