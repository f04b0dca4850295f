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

The serving (``handoff.serve_phase``) and these checks (``handoff.check_*``) are shared with
the Spark writer's hand-off in ``test_spark_connector.py``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import handoff as ho

pytestmark = pytest.mark.kafka

ISOLATIONS = ho.ISOLATIONS
ORDER = ("leader", "retention", "follower", "arrow", "salvage")
Case = ho.Case
CASES = ([Case("clean", w, ho.TOPIC, i) for i, w in enumerate(ORDER)]
         + [Case("clean", "compacted", ho.COMPACT_TOPIC, 0)]
         + [Case("recover", w, ho.TOPIC, len(ORDER) + i) for i, w in enumerate(ORDER)]
         + [Case("recover", "compacted", ho.COMPACT_TOPIC, 1)])


def _write_all(cases: List[ho.Case], stage: Path, work: Path, tids: Dict[str, Any], base_ts: int,
               s: ho.Served):
    for c in cases:
        w = ho.WRITERS[c.writer]
        path = stage / c.name
        s.written[c] = (w(path, tids[c.topic], base_ts, work) if c.writer == "salvage"
                        else w(path, tids[c.topic], base_ts))
        s.staged[c] = ho.read_dir(path)


@pytest.fixture(scope="module")
def served(kafka_env, tmp_path_factory) -> ho.Served:
    work = tmp_path_factory.mktemp("kafka-handoff")
    stage = work / "stage"
    stage.mkdir()
    broker, s = ho.quiet_broker(kafka_env, work)
    base_ts = (int(time.time() * 1000) // 1000) * 1000 - 3600 * 1000
    clean = [c for c in CASES if c.mode == "clean"]
    recover = [c for c in CASES if c.mode == "recover"]
    broker.format()
    broker.start()
    try:
        ho.create_topics(kafka_env, broker, [
            {"name": ho.TOPIC, "partitions": 2 * len(ORDER), "configs": ho.TOPIC_CONFIGS},
            {"name": ho.COMPACT_TOPIC, "partitions": 2, "configs": ho.COMPACT_TOPIC_CONFIGS}])
        broker.stop()
        assert (broker.log_dir / ".kafka_cleanshutdown").exists()
        tids = {t: ho.topic_id(broker.partition_dir(t, 0)) for t in (ho.TOPIC, ho.COMPACT_TOPIC)}
        _write_all(CASES, stage, work, tids, base_ts, s)

        # clean hand-off: the broker's marker stays
        for c in clean:
            ho.hand_off(stage, broker.log_dir, c.topic, c.partition)
        mark = broker.log_path.stat().st_size
        broker.start()
        ho.serve_phase(kafka_env, broker, stage, clean, s.staged, s, "clean")
        broker.kill()
        text = broker.log_text(mark)
        for c in clean:
            s.lines[c] = ho.partition_lines(text, c.name)

        # unclean hand-off: no marker, no recovery point
        assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
        for c in recover:
            ho.hand_off(stage, broker.log_dir, c.topic, c.partition, recover=True)
        mark = broker.log_path.stat().st_size
        broker.start()
        ho.serve_phase(kafka_env, broker, stage, recover, s.staged, s, "recover")
    finally:
        broker.stop()
    text = broker.log_text(mark)
    for c in recover:
        s.lines[c] = ho.partition_lines(text, c.name)
    for c in CASES:
        s.final[c] = ho.read_dir(broker.partition_dir(c.topic, c.partition))
    return s


def case_id(c: Case) -> str:
    return f"{c.mode}-{c.writer}"


# -- the tests
# -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafkalog_wrote_what_was_asked(served, case):
    """The staged directory holds what the writer meant (where it can say), in several
    segments: the content the broker is then given is the intended one."""
    st = served.staged[case]
    assert len(st.segments) >= 2, st.segments
    written = served.written[case]
    for iso, want in zip(ho.ISOLATIONS, written):
        if want is None:
            continue
        got = [(r[0], r[4], r[1], r[2], r[3]) for r in st.rows[iso]]
        want = [(o, got[i][1] if ts is None else ts, k, v, tuple(h))
                for i, (o, ts, k, v, h) in enumerate(want)]
        assert got == want, f"{case.name} {iso}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_consumer_reads_what_kafkalog_wrote(served, case, isolation):
    ho.check_consumer_reads(served, case, isolation)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_consumer_from_the_middle(served, case, isolation):
    ho.check_from_the_middle(served, case, isolation)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_offsets_for_times(served, case, isolation):
    ho.check_offsets_for_times(served, case, isolation)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_broker_log_is_quiet(served, case):
    ho.check_broker_log_quiet(served, case)


@pytest.mark.parametrize("mode", ["clean", "recover"])
def test_dump_log_verifies_kafkalog_indexes(served, mode):
    ho.check_dump_log(served, mode)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_round_trip_closes(served, case, isolation):
    ho.check_round_trip(served, case, isolation)
