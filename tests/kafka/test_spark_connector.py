"""kafkalog's Spark source held against Spark's own Kafka connector (issue 28, "Same answers",
reads).

One real broker (``kafka_support.Broker``) holds topics of every codec, with headers,
LogAppendTime, committed, aborted and open transactions, a compacted topic the cleaner has
cleaned, and a topic whose oldest segments retention deleted.  In ONE Spark session,
``format("kafka")`` (``spark-sql-kafka-0-10``; the version is chosen and fetched by
``kafka_support.fetch_spark_connector``: pyspark's own when Maven Central serves it, else the
newest served release of the same major version) reads them from the live broker for every
case of the option matrix below; the broker is then stopped cleanly and ``format("kafkalog")``
reads its log directory with the same options.  Each case must give the same schema and the
same rows (all columns, sorted by topic, partition and offset), or, where the connector refuses
the options, kafkalog must refuse them too.  A stream (``maxOffsetsPerTrigger`` with
``Trigger.AvailableNow``) must give the same rows in the same micro-batches.

The writer (issue 28, "the same for the writer"; issue 29, "the Spark writer"): a second broker
takes the same DataFrames from ``format("kafka")`` and, handed over by ``handoff.hand_off``
(after a clean and after an unclean shutdown), from ``format("kafkalog")`` in append and
overwrite mode, and serves them as ``test_broker_serves_writes`` requires; see "the writer"
below for what is compared and why not more.

Run: ``PYTHONPATH=src python -m pytest -p no:cacheprovider tests/kafka/test_spark_connector.py``
(needs Java 17+, Maven and pyspark >= 4.0; the jars are fetched once into
``~/.cache/kafkalog/kafka``; ``python tests/kafka/kafka_support.py fetch-spark-connector``
fetches the connector ahead of time).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import handoff as ho
import kafka_support as ks
from kafka_matrix import (
    CODECS,
    SMALL_SEGMENTS,
    TXN_TIMEOUT,
    Gen,
    checkpoint_entry,
    compacted_round,
    first_segment_base,
    producer,
    send,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

pyspark = pytest.importorskip("pyspark", minversion="4.0")

import kafkalog  # noqa: E402
from kafkalog.storage.files import topic_id_to_string  # noqa: E402

# -- the data on the broker -----------------------------------------------------------------------
DOTTED = "dotted.topic-x"  # a topic name with a dot and a dash (split on the last '-')
PARTITIONS: Dict[str, List[int]] = {"codecs": list(range(len(CODECS))), "appendtime": [0],
                                    "txn": [0, 1], "compacted": [0], "retention": [0],
                                    DOTTED: [0, 1, 2]}
ALL_TOPICS = ",".join(PARTITIONS)


def produce_steps(base_ts: int) -> List[Dict[str, Any]]:
    """Every topic but ``compacted`` (filled by ``kafka_matrix.compacted_round``)."""
    gen = Gen(28, base_ts)
    steps: List[Dict[str, Any]] = [{"op": "create_topics", "topics": [
        {"name": "codecs", "partitions": len(CODECS), "configs": SMALL_SEGMENTS},
        {"name": "appendtime", "partitions": 1,
         "configs": {**SMALL_SEGMENTS, "message.timestamp.type": "LogAppendTime"}},
        {"name": "txn", "partitions": 2, "configs": {**SMALL_SEGMENTS,
                                                     "internal.segment.bytes": "8192"}},
        # delete.retention.ms stays at its default (a day): once cleaned, nothing is left for
        # the cleaner, so the broker changes nothing between the connector's reads and the stop
        {"name": "compacted", "partitions": 1, "configs": {
            **SMALL_SEGMENTS, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
            "segment.ms": "100", "min.compaction.lag.ms": "0"}},
        {"name": "retention", "partitions": 1, "configs": {
            **SMALL_SEGMENTS, "retention.ms": str(24 * 3600 * 1000), "segment.ms": "3600000"}},
        {"name": DOTTED, "partitions": 3, "configs": {}},
    ]}]
    for codec in CODECS:
        cfg = {"compression.type": codec, "linger.ms": "20"}
        if codec == "gzip":  # one producer without a producer id
            cfg.update({"enable.idempotence": "false", "acks": "1"})
        steps.append(producer(codec, **cfg))
    for chunk in range(4):
        for i, codec in enumerate(CODECS):
            steps.append(send(codec, "codecs", i,
                              gen.records(12, large_at=2 if chunk == 1 else -1)))
    steps.append(producer("append", **{"compression.type": "lz4"}))
    for chunk in range(2):
        steps.append(send("append", "appendtime", 0, gen.records(10)))
    for p in PARTITIONS[DOTTED]:
        steps.append(send("zstd", DOTTED, p, gen.records(5 + p)))

    # two transactional producers interleaved with an idempotent one; a transaction left open
    for name, codec in (("tA", "zstd"), ("tB", "none")):
        steps.append(producer(name, **{
            "transactional.id": f"spark-{name}", "compression.type": codec,
            "transaction.timeout.ms": TXN_TIMEOUT, "linger.ms": "10", "batch.size": "4096"}))
    steps.append(producer("plain", **{"compression.type": "lz4", "batch.size": "4096"}))
    for _ in range(2):
        steps += [{"op": "begin", "producer": "tA"}, {"op": "begin", "producer": "tB"},
                  send("tA", "txn", 0, gen.records(5)), send("tB", "txn", 0, gen.records(4)),
                  send("plain", "txn", 0, gen.records(3)), send("tA", "txn", 1, gen.records(4)),
                  send("tB", "txn", 1, gen.records(3)), send("plain", "txn", 1, gen.records(2)),
                  {"op": "commit", "producer": "tA"}, {"op": "abort", "producer": "tB"}]
    steps += [{"op": "begin", "producer": "tB"}, send("tB", "txn", 0, gen.records(3)),
              send("plain", "txn", 0, gen.records(2)), send("plain", "txn", 1, gen.records(2)),
              {"op": "abandon", "producer": "tB"}]

    # retention: three-day-old segments (deleted by the one-day retention), then current ones
    old = Gen(29, base_ts - 3 * 24 * 3600 * 1000, broker_timestamps=False)
    steps.append(producer("ret", **{"compression.type": "none"}))
    for _ in range(4):
        steps.append(send("ret", "retention", 0, old.records(20)))
    for _ in range(2):
        steps.append(send("ret", "retention", 0, gen.records(20)))
    return steps


# -- rows
# ---------------------------------------------------------------------------------------------
def _bytes(b) -> Optional[bytes]:
    return None if b is None else bytes(b)


def row_tuple(r) -> Tuple:
    d = r.asDict()
    out = []
    for name, v in d.items():
        if name in ("key", "value"):
            v = _bytes(v)
        elif name == "headers" and v is not None:
            v = tuple((h["key"], _bytes(h["value"])) for h in v)
        out.append(v)
    return tuple(out)


@dataclass
class Answer:
    schema: Optional[List[Tuple[str, str, bool]]] = None
    rows: Optional[List[Tuple]] = None
    error: Optional[str] = None
    seconds: float = 0.0


def schema_of(df) -> List[Tuple[str, str, bool]]:
    """Name, type (with element nullability) and nullability of every column."""
    return [(f.name, json.dumps(f.dataType.jsonValue(), sort_keys=True), f.nullable)
            for f in df.schema.fields]


def sort_key(row: Tuple, names: List[str]):
    d = dict(zip(names, row))
    return (d["topic"], d["partition"], d["offset"])


def collect(reader: Callable[[], Any]) -> Answer:
    t0 = time.monotonic()
    try:
        df = reader()
        schema = schema_of(df)
        names = [s[0] for s in schema]
        rows = sorted((row_tuple(r) for r in df.collect()), key=lambda t: sort_key(t, names))
        return Answer(schema, rows, None, time.monotonic() - t0)
    except Exception as e:  # the connector refused the options (or failed to read)
        lines = [x.strip().lstrip(": ") for x in str(e).strip().splitlines() if x.strip()]
        # the first line, the first that names an exception and the deepest cause (Java)
        named = [x for x in lines[1:] if re.match(r"[\w.$]*(Exception|Error)\b", x)]
        causes = [x for x in lines if x.startswith("Caused by:")]
        parts = list(dict.fromkeys(lines[:1] + named[:1] + causes[-1:]))
        text = type(e).__name__ + ": " + " / ".join(x[:400] for x in parts)
        return Answer(error=text, seconds=time.monotonic() - t0)


# -- the option matrix
# ------------------------------------------------------------------------------
@dataclass
class Facts:
    """What the full read of every topic showed: (offset, timestamp ms) per partition."""
    records: Dict[Tuple[str, int], List[Tuple[int, int]]] = field(default_factory=dict)

    def offsets(self, topic: str, p: int) -> List[int]:
        return [o for o, _ in self.records[(topic, p)]]

    def timestamps(self, topic: str, p: int) -> List[int]:
        return sorted(t for _, t in self.records[(topic, p)])


def _j(obj) -> str:
    return json.dumps(obj)


def _gaps(offsets: List[int]) -> List[int]:
    """Offsets inside the range that hold no record (a control batch, or removed by the
    cleaner)."""
    have = set(offsets)
    return [o for o in range(offsets[0], offsets[-1]) if o not in have]


def _offsets_json(facts: Facts) -> Dict[str, str]:
    c1, c2, t0 = facts.offsets("codecs", 1), facts.offsets("codecs", 2), facts.offsets("txn", 0)
    k = facts.offsets("compacted", 0)
    txn_gaps, compacted_gaps = _gaps(t0), _gaps(k)
    return {"assign": _j({"codecs": [1, 2, 3], "txn": [0], "compacted": [0]}),
            # -2, an offset inside a batch, the first offset of a record; txn starts at a
            # transaction marker, compacted at an offset the cleaner removed, and both end at one
            "startingOffsets": _j({"codecs": {"1": -2, "2": c2[len(c2) // 4] + 1,
                                              "3": facts.offsets("codecs", 3)[5]},
                                   "txn": {"0": txn_gaps[0]},
                                   "compacted": {"0": compacted_gaps[0]}}),
            "endingOffsets": _j({"codecs": {"1": c1[len(c1) // 2], "2": -1, "3": -1},
                                 "txn": {"0": txn_gaps[-1]},
                                 "compacted": {"0": compacted_gaps[-1]}})}


def _starting_timestamp(facts: Facts) -> Dict[str, str]:
    # every partition has a record at or after it (the default strategy fails otherwise)
    t = min(facts.timestamps("codecs", p)[len(facts.timestamps("codecs", p)) * 2 // 3]
            for p in PARTITIONS["codecs"])
    return {"subscribe": "codecs", "startingTimestamp": str(t)}


def _by_timestamp(facts: Facts, which: str) -> Dict[str, str]:
    ts = {p: facts.timestamps("codecs", p) for p in PARTITIONS["codecs"]}
    spec = {"0": ts[0][len(ts[0]) // 2], "1": ts[1][0], "2": ts[2][-1] + 1 if which == "ending"
            else ts[2][-1], "3": -2 if which == "starting" else ts[3][len(ts[3]) // 3],
            "4": ts[4][len(ts[4]) // 3] + 3}
    return {"subscribe": "codecs", f"{which}OffsetsByTimestamp": _j({"codecs": spec})}


CASES: Dict[str, Callable[[Facts], Dict[str, str]]] = {
    # the first case is the full read the others are derived from
    "subscribe-all-headers": lambda f: {"subscribe": ALL_TOPICS, "includeHeaders": "true"},
    "subscribe-one": lambda f: {"subscribe": "codecs"},
    "subscribe-pattern": lambda f: {"subscribePattern": "c.*", "includeHeaders": "true"},
    "subscribe-pattern-dotted": lambda f: {"subscribePattern": r"dotted\.topic-.*|txn"},
    "assign": lambda f: {"assign": _j({"codecs": [0, 3], "txn": [1], DOTTED: [2]}),
                         "includeHeaders": "true"},
    "offsets-earliest-latest": lambda f: {"subscribe": "codecs,txn", "startingOffsets": "earliest",
                                          "endingOffsets": "latest"},
    "offsets-json": _offsets_json,
    "starting-latest-refused": lambda f: {"subscribe": "codecs", "startingOffsets": "latest"},
    "ending-earliest-refused": lambda f: {"subscribe": "codecs", "endingOffsets": "earliest"},
    "starting-timestamp": _starting_timestamp,
    "starting-timestamp-none-error": lambda f: {
        "subscribe": "codecs",
        "startingTimestamp": str(max(f.timestamps("codecs", 0)) + 3_600_000)},
    "starting-timestamp-none-latest": lambda f: {
        "subscribe": "codecs", "startingTimestamp": str(max(f.timestamps("codecs", 0)) + 3_600_000),
        "startingOffsetsByTimestampStrategy": "latest"},
    "starting-ending-timestamp": lambda f: {
        "subscribe": "codecs", "startingTimestamp": str(f.timestamps("codecs", 4)[4]),
        "endingTimestamp": str(min(f.timestamps("codecs", p)[-6] for p in PARTITIONS["codecs"]))},
    "starting-offsets-by-timestamp": lambda f: _by_timestamp(f, "starting"),
    "ending-offsets-by-timestamp": lambda f: _by_timestamp(f, "ending"),
    "read-uncommitted-txn": lambda f: {"subscribe": "txn,compacted", "includeHeaders": "true"},
    "read-committed": lambda f: {"subscribe": ALL_TOPICS, "includeHeaders": "true",
                                 "kafka.isolation.level": "read_committed"},
    "read-committed-offsets": lambda f: {
        "assign": _j({"txn": [0, 1]}), "kafka.isolation.level": "read_committed",
        "startingOffsets": _j({"txn": {"0": f.offsets("txn", 0)[3], "1": -2}}),
        "endingOffsets": _j({"txn": {"0": f.offsets("txn", 0)[-8], "1": -1}})},
    # an explicit end at the log end, above txn-0's last stable offset (the open transaction)
    "read-committed-end-above-lso": lambda f: {
        "assign": _j({"txn": [0]}), "kafka.isolation.level": "read_committed",
        "startingOffsets": _j({"txn": {"0": -2}}), "kafkaConsumer.pollTimeoutMs": "5000",
        "endingOffsets": _j({"txn": {"0": f.offsets("txn", 0)[-1] + 1}})},
    "read-committed-end-above-lso-no-fail": lambda f: {
        "assign": _j({"txn": [0]}), "kafka.isolation.level": "read_committed",
        "startingOffsets": _j({"txn": {"0": -2}}), "failOnDataLoss": "false",
        "kafkaConsumer.pollTimeoutMs": "5000",  # the connector waits that long for the end
        "endingOffsets": _j({"txn": {"0": f.offsets("txn", 0)[-1] + 1}})},
    # an explicit end past the log end (read_uncommitted)
    "end-above-log-end": lambda f: {
        "assign": _j({"codecs": [0]}), "kafkaConsumer.pollTimeoutMs": "5000",
        "endingOffsets": _j({"codecs": {"0": f.offsets("codecs", 0)[-1] + 5}})},
    "end-above-log-end-no-fail": lambda f: {
        "assign": _j({"codecs": [0]}), "kafkaConsumer.pollTimeoutMs": "5000",
        "failOnDataLoss": "false",
        "endingOffsets": _j({"codecs": {"0": f.offsets("codecs", 0)[-1] + 5}})},
    "min-partitions": lambda f: {"subscribe": ALL_TOPICS, "minPartitions": "11"},
    "appendtime": lambda f: {"subscribe": "appendtime", "includeHeaders": "true"},
    "data-loss-below-start-false": lambda f: {
        "assign": _j({"retention": [0]}), "startingOffsets": _j({"retention": {"0": 0}}),
        "failOnDataLoss": "false"},
    "data-loss-below-start-true": lambda f: {
        "assign": _j({"retention": [0]}), "startingOffsets": _j({"retention": {"0": 0}}),
        "failOnDataLoss": "true"},
}

STREAMS: Dict[str, Dict[str, str]] = {
    "max-offsets": {"subscribe": "codecs,txn,compacted", "startingOffsets": "earliest",
                    "maxOffsetsPerTrigger": "70", "includeHeaders": "true"},
    # read_committed: the open transaction holds txn-0 at its last stable offset
    "read-committed": {"subscribe": "txn,appendtime", "startingOffsets": "earliest",
                       "maxOffsetsPerTrigger": "15", "kafka.isolation.level": "read_committed"},
}


# -- the session
# ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def connector(request, kafka_env):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")
    try:
        version, jars = ks.fetch_spark_connector(pyspark.__version__)
    except ks.Unavailable as e:
        pytest.skip(f"Spark's Kafka connector for pyspark {pyspark.__version__}: {e}")
    line = (f"Spark's Kafka connector: {ks.SPARK_CONNECTOR[1]} {version} with pyspark "
            f"{pyspark.__version__}" + ("" if version == pyspark.__version__ else
                                        f" (Maven Central serves no {pyspark.__version__})"))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)
    return version, jars


@pytest.fixture(scope="module")
def session(connector):
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        pytest.fail("a Spark session is already running in this process; the connector's jars "
                    "can only be given to a new one: run tests/kafka/test_spark_connector.py in "
                    "a pytest run of its own or before the other Spark tests")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYSPARK_PYTHON",
                                            "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP")}
    pkg_parent = str(Path(kafkalog.__file__).resolve().parent.parent)
    pp = os.environ.get("PYTHONPATH", "")
    if pkg_parent not in pp.split(os.pathsep):  # the workers import this kafkalog
        os.environ["PYTHONPATH"] = pkg_parent + (os.pathsep + pp if pp else "")
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    spark = (SparkSession.builder.master("local[2]").appName("kafkalog-vs-spark-sql-kafka")
             .config("spark.jars", ",".join(str(j) for j in connector[1]))
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "1g")
             # the connector's producers and consumers are cached in the JVM, which outlives this
             # session: close idle ones within seconds, not after the default 10 / 5 minutes, so
             # none is left reconnecting to a stopped broker while later tests run
             .config("spark.kafka.producer.cache.timeout", "2s")
             .config("spark.kafka.producer.cache.evictorThreadRunInterval", "1s")
             .config("spark.kafka.consumer.cache.timeout", "2s")
             .config("spark.kafka.consumer.cache.evictorThreadRunInterval", "1s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from kafkalog.spark import register

    register(spark)
    yield spark
    spark.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# -- the broker and the connector's answers
# ----------------------------------------------------------
@dataclass
class Compared:
    log_dir: Path
    options: Dict[str, Dict[str, str]]
    answers: Dict[str, Answer]  # the connector's
    # the connector's micro-batches per stream (batch id -> rows)
    streams: Dict[str, Dict[int, List[Tuple]]]
    version: str
    timings: Dict[str, float] = field(default_factory=dict)


def stream_batches(spark, reader, checkpoint: Path) -> Dict[int, List[Tuple]]:
    got: Dict[int, List[Tuple]] = {}

    def each(df, batch_id):
        got[batch_id] = sorted((row_tuple(r) for r in df.collect()),
                               key=lambda t: sort_key(t, df.columns))

    q = reader().writeStream.foreachBatch(each).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    q.awaitTermination(240)
    assert not q.isActive, "the stream did not finish"
    if q.exception() is not None:
        raise AssertionError(f"the stream failed: {q.exception()}")
    return {b: rows for b, rows in got.items() if rows}  # empty batches are not data


@pytest.fixture(scope="module")
def compared(kafka_env, session, connector, tmp_path_factory) -> Compared:
    spark = session
    work = tmp_path_factory.mktemp("spark-connector-broker")
    broker = ks.Broker(kafka_env, work)
    timings: Dict[str, float] = {}
    t0 = time.monotonic()
    broker.format()
    broker.start()
    timings["broker start"] = time.monotonic() - t0
    try:
        t0 = time.monotonic()
        base_ts = int(time.time() * 1000) - 600_000
        ks.run_tool(kafka_env, {"bootstrap": broker.bootstrap, "steps": produce_steps(base_ts)})
        sent = ks.run_tool(kafka_env, {"bootstrap": broker.bootstrap,
                                       "steps": compacted_round(0, base_ts)})
        sentinel = sent[-1]["offsets"][0]
        wait_for(f"the cleaner to clean compacted-0 up to {sentinel}",
                 lambda: (checkpoint_entry(broker.log_dir / "cleaner-offset-checkpoint",
                                           "compacted", 0) or 0) >= sentinel, broker)
        wait_for("retention to delete the old segments of retention-0",
                 lambda: (first_segment_base(broker.partition_dir("retention")) or 0) > 0, broker)
        timings["produce"] = time.monotonic() - t0

        def kafka(opts: Dict[str, str]):
            return (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("kafkaConsumer.pollTimeoutMs", "10000").options(**opts).load())

        t0 = time.monotonic()
        facts = Facts()
        options: Dict[str, Dict[str, str]] = {}
        answers: Dict[str, Answer] = {}
        for name, make in CASES.items():
            options[name] = make(facts)
            answers[name] = collect(lambda: kafka(options[name]))
            if not facts.records:  # the full read: offsets and timestamps of every partition
                assert answers[name].error is None, answers[name].error
                names = [s[0] for s in answers[name].schema]
                for row in answers[name].rows:
                    d = dict(zip(names, row))
                    facts.records.setdefault((d["topic"], d["partition"]), []).append(
                        (d["offset"], round(d["timestamp"].timestamp() * 1000)))
        timings["connector batch reads"] = time.monotonic() - t0
        t0 = time.monotonic()
        streams = {name: stream_batches(
            spark, lambda: spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap).options(**opts).load(),
            work / f"stream-kafka-{name}") for name, opts in STREAMS.items()}
        timings["connector stream"] = time.monotonic() - t0
    finally:
        broker.stop()
    assert (broker.log_dir / ".kafka_cleanshutdown").exists(), "the broker did not stop cleanly"
    return Compared(broker.log_dir, options, answers, streams, connector[0], timings)


def test_connector_version_choice():
    """pyspark's own connector release when served, else the newest release (no previews) of
    the same major version; none of that major version cannot be run."""
    served = ["3.5.9", "4.1.3", "4.2.0", "4.2.0-preview5", "4.3.0-preview1", "3.5.10"]
    assert ks.pick_connector_version("4.1.3", served) == "4.1.3"
    assert ks.pick_connector_version("4.3.0", served) == "4.2.0"
    assert ks.pick_connector_version("3.5.1", served) == "3.5.10"
    with pytest.raises(ks.Unavailable, match="Spark 5.x"):
        ks.pick_connector_version("5.0.0", served)


# -- the comparisons
# ----------------------------------------------------------------------------------
def _describe(answer: Answer) -> str:
    return answer.error if answer.error else f"{len(answer.rows)} rows"


def _first_difference(want: List[Tuple], got: List[Tuple], names: List[str]) -> str:
    wk = {sort_key(r, names): r for r in want}
    gk = {sort_key(r, names): r for r in got}
    missing = sorted(set(wk) - set(gk))
    extra = sorted(set(gk) - set(wk))
    differ = [k for k in sorted(set(wk) & set(gk)) if wk[k] != gk[k]]
    out = [f"connector {len(want)} rows, kafkalog {len(got)}"]
    if missing:
        out.append(f"only the connector has {len(missing)} (topic, partition, offset): "
                   f"{missing[:8]}")
    if extra:
        out.append(f"only kafkalog has {len(extra)}: {extra[:8]}")
    if differ:
        k = differ[0]
        out.append(f"{len(differ)} rows differ; at {k}: connector {wk[k]!r}, kafkalog {gk[k]!r}")
    return "; ".join(out)


@pytest.mark.parametrize("case", list(CASES))
def test_same_answer(compared, session, case):
    """``format("kafkalog")`` on the stopped broker's log directory answers what
    ``format("kafka")`` answered from the live broker, with the same options."""
    opts = compared.options[case]
    want = compared.answers[case]
    got = collect(lambda: session.read.format("kafkalog").options(**opts)
                  .load(str(compared.log_dir)))
    what = f"{case} {opts} (spark-sql-kafka {compared.version})"
    print(f"{what}\n  connector: {_describe(want)} in {want.seconds:.1f}s\n"
          f"  kafkalog: {_describe(got)} in {got.seconds:.1f}s")
    if want.error is not None:
        assert got.error is not None, (
            f"{what}: the connector refused ({want.error}); kafkalog read {_describe(got)}")
        return
    assert got.error is None, f"{what}: kafkalog failed ({got.error}); the connector read " \
                              f"{len(want.rows)} rows"
    assert got.schema == want.schema, f"{what}: schema"
    names = [s[0] for s in want.schema]
    assert got.rows == want.rows, f"{what}: {_first_difference(want.rows, got.rows, names)}"


def test_matrix_covers_the_cases(compared):
    """The broker did write what the matrix is meant to compare, and the connector gave the
    answers the cases are there for (rows where rows are meant, refusals where refusals)."""
    a = compared.answers
    full = a["subscribe-all-headers"]
    names = [s[0] for s in full.schema]
    rows = [dict(zip(names, r)) for r in full.rows]
    assert {(r["topic"], r["partition"]) for r in rows} == {
        (t, p) for t, parts in PARTITIONS.items() for p in parts}
    assert any(r["headers"] for r in rows) and any(r["headers"] is None for r in rows)
    assert any(r["timestampType"] == 1 for r in rows if r["topic"] == "appendtime")
    retention = [r["offset"] for r in rows if r["topic"] == "retention"]
    assert min(retention) > 0  # retention deleted the oldest segments
    compacted = [r["offset"] for r in rows if r["topic"] == "compacted"]
    assert len(compacted) < max(compacted) - min(compacted) + 1  # the cleaner removed records
    txn = [r for r in rows if r["topic"] == "txn"]
    committed = [dict(zip(names, r)) for r in a["read-committed"].rows]
    assert len([r for r in committed if r["topic"] == "txn"]) < len(txn)
    refused = ("starting-latest-refused", "ending-earliest-refused",
               "starting-timestamp-none-error", "data-loss-below-start-true",
               "read-committed-end-above-lso", "end-above-log-end")
    for case in refused:
        assert a[case].error is not None, f"{case}: the connector read {_describe(a[case])}"
    for case, answer in a.items():
        if case not in refused + ("starting-timestamp-none-latest",):
            assert answer.error is None and answer.rows, f"{case}: {_describe(answer)}"
    for name, batches in compared.streams.items():
        assert len(batches) >= 3, f"{name}: micro-batches {sorted(batches)}"
    print({k: round(v, 1) for k, v in compared.timings.items()})


@pytest.mark.parametrize("stream", list(STREAMS))
def test_same_stream(compared, session, tmp_path, stream):
    """A stream with ``maxOffsetsPerTrigger`` and ``Trigger.AvailableNow``: the same rows, in
    the same micro-batches."""
    opts = STREAMS[stream]
    got = stream_batches(
        session, lambda: session.readStream.format("kafkalog").options(**opts)
        .load(str(compared.log_dir)), tmp_path / "stream-kafkalog")
    want = compared.streams[stream]
    names = ["key", "value", "topic", "partition", "offset"]  # the schema's first columns

    def everything(batches):
        return sorted((r for rows in batches.values() for r in rows),
                      key=lambda t: sort_key(t, names))

    what = f"{stream} {opts} (spark-sql-kafka {compared.version})"
    assert everything(got) == everything(want), \
        f"{what}: {_first_difference(everything(want), everything(got), names)}"
    sizes = lambda batches: [len(rows) for _, rows in sorted(batches.items())]  # noqa
    assert sizes(got) == sizes(want), f"{what}: rows per micro-batch"
    assert list(got.values()) == list(want.values()), f"{what}: rows of each micro-batch"


# == the writer (issue 28 "the same for the writer"; issue 29 "the Spark writer")
# ======================
# One DataFrame pair is written twice over: with ``format("kafka")`` to the topic ``sink`` of a
# live broker (the first then the second DataFrame), and with ``format("kafkalog")`` into a
# local root: ``ap`` (the first, then the second in mode append) and ``ow`` (the first, then
# the second in mode overwrite).  Each is read back with both readers: ``sink`` with
# ``format("kafka")`` from the live broker and ``format("kafkalog")`` from its stopped log
# directory; ``ap``/``ow`` with ``format("kafkalog")`` from the local root and, once
# ``handoff.hand_off`` has given their partitions to the broker, with ``format("kafka")`` and
# Kafka's consumer from the broker, which then serves them as ``test_broker_serves_writes``
# requires (``handoff.check_*``): first after its clean shutdown, then -- the same staged
# partitions handed over again after a clean stop whose marker is removed, with no recovery
# point -- as after an unclean one (the broker recovers every segment itself).
#
# What is compared, and why not more:
# * Rows that name their partition, and keyed rows (Kafka's default partitioner,
#   ``toPositive(murmur2(key)) % 3``, in the producer of the connector and in kafkalog's
#   ``numPartitions``): the same partition and, per partition, the same order of key, value and
#   headers.  Both connector writes and kafkalog's first write run as one Spark task, and
#   kafkalog's second as two: the connector's tasks share one producer, so records of two tasks
#   interleave in an order nothing fixes, while kafkalog keeps the DataFrame's order (task
#   order, then row order) -- one task for the connector is what makes its order comparable.
# * Keyless rows with no partition: Kafka's producer places them with its sticky partitioner
#   (batch by batch, load-dependent), kafkalog round-robin; they are compared as one multiset
#   over all partitions.
# * Timestamps: the connector's sink has no ``timestamp`` column (it ignores one), so each of
#   its records carries the producer's send time (CreateTime); kafkalog keeps a given timestamp
#   and stamps a null one with the time it writes the record (CreateTime).  Each is checked
#   against that rule and the write's wall-clock window.
# * Offsets: equal between the two readers of one log; between the writers they follow from
#   where the keyless rows landed, so only their order is compared.
W_PARTITIONS = 3
W_TOPICS = ("sink", "ow", "ap")
# small segments: every partition (about 10 KiB compressed a write) has several
W_TOPIC_CONFIGS = {**ho.TOPIC_CONFIGS, "internal.segment.bytes": "6144"}
W_OPTIONS = {"segmentBytes": W_TOPIC_CONFIGS["internal.segment.bytes"],
             "indexIntervalBytes": W_TOPIC_CONFIGS["index.interval.bytes"], "batchBytes": "2000",
             "numPartitions": str(W_PARTITIONS)}
W_CASES = [ho.Case(mode, f"spark-{'overwrite' if t == 'ow' else 'append'}", t, p)
           for mode in ("clean", "recover") for t in ("ow", "ap") for p in range(W_PARTITIONS)]
HEADERS = [None, [], [("h", b"v")], [("a", None), ("b", b"")],
           [("", b"x"), ("dup", b"1"), ("dup", b"2"), ("\u00e9t\u00e9", None)]]


def write_rows(write: int, count: int, base_ts: int) -> List[Dict[str, Any]]:
    """Rows of every shape; (key, value, headers) is unique, so a record read back names its
    row.  Every fifth row names its partition; a quarter have no key; a quarter no timestamp."""
    import random

    rnd = random.Random(write)
    rows = []
    for i in range(count):
        key = [None, b"", b"key-%d" % (i % 17), rnd.randbytes(rnd.randint(1, 30))][i % 4]
        value: Optional[bytes] = (b"w%d row %d " % (write, i)
                                  + b"spark to kafka " * rnd.randint(0, 20)
                                  + rnd.randbytes(rnd.randint(0, 120)))
        headers = HEADERS[i % len(HEADERS)]
        if i % 11 == 0 or i % 13 == 0:  # a null or an empty value: the row header keeps it unique
            value = None if i % 11 == 0 else b""
            headers = (headers or []) + [("row", b"w%d-%d" % (write, i))]
        ts = None if i % 4 == 3 else base_ts + i * 7 - (5000 if i % 10 == 9 else 0)
        part = (i // 5) % W_PARTITIONS if i % 5 == 0 else None
        rows.append({"key": key, "value": value, "headers": headers, "partition": part,
                     "timestamp": ts, "write": write, "i": i})
    return rows


def rows_df(spark, rows: List[Dict[str, Any]]):
    from datetime import datetime, timezone

    from pyspark.sql import types as T

    schema = T.StructType([
        T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
        T.StructField("headers", T.ArrayType(T.StructType([
            T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))),
        T.StructField("partition", T.IntegerType()), T.StructField("timestamp", T.TimestampType())])
    data = [(r["key"], r["value"],
             None if r["headers"] is None else [list(h) for h in r["headers"]],
             r["partition"],
             None if r["timestamp"] is None
             else datetime.fromtimestamp(r["timestamp"] / 1000, timezone.utc))
            for r in rows]
    return spark.createDataFrame(data, schema)  # two slices, in order (local[2])


def ident(key, value, headers) -> Tuple:
    return (key, value, tuple(tuple(h) for h in (headers or ())))


@dataclass
class Writes:
    rows: Dict[Tuple, Dict[str, Any]]  # ident -> the input row
    windows: Dict[Tuple[str, int], Tuple[int, int]]  # (topic, write) -> wall-clock ms
    answers: Dict[str, Answer]  # "<reader>/<what>" -> rows read back
    served: ho.Served
    timings: Dict[str, float]


def _ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def writes(kafka_env, session, tmp_path_factory) -> Writes:
    spark = session
    work = tmp_path_factory.mktemp("spark-writer")
    stage = work / "kafkalog"
    broker, s = ho.quiet_broker(kafka_env, work)
    base_ts = (_ms() // 1000) * 1000 - 3600 * 1000
    inputs = {1: write_rows(1, 500, base_ts), 2: write_rows(2, 350, base_ts + 10_000)}
    rows = {ident(r["key"], r["value"], r["headers"]): r for w in inputs.values() for r in w}
    assert len(rows) == sum(len(w) for w in inputs.values())
    frames = {w: rows_df(spark, r) for w, r in inputs.items()}
    windows: Dict[Tuple[str, int], Tuple[int, int]] = {}
    answers: Dict[str, Answer] = {}
    mark = 0
    cases_done: List[ho.Case] = []
    timings: Dict[str, float] = {}
    clock = [time.monotonic()]

    def lap(what: str) -> None:
        now = time.monotonic()
        timings[what], clock[0] = now - clock[0], now

    def read_finals(cases: List[ho.Case]) -> None:  # the broker stopped
        text = broker.log_text(mark)
        for c in cases:
            s.lines[c] = ho.partition_lines(text, c.name)
            s.final[c] = ho.read_dir(broker.partition_dir(c.topic, c.partition))

    def read(fmt: str, topics: str, root: Optional[Path] = None) -> Answer:
        r = spark.read.format(fmt).option("subscribe", topics).option("includeHeaders", "true")
        if fmt == "kafka":
            return collect(lambda: r.option("kafka.bootstrap.servers", broker.bootstrap).load())
        return collect(lambda: r.load(str(root)))

    broker.format()
    broker.start()
    try:
        ho.create_topics(kafka_env, broker, [{"name": t, "partitions": W_PARTITIONS,
                                              "configs": W_TOPIC_CONFIGS} for t in W_TOPICS])
        lap("broker start")
        for w, df in frames.items():
            t0 = _ms()
            df.coalesce(1).write.format("kafka").option("kafka.bootstrap.servers",
                                                        broker.bootstrap) \
                .option("kafka.batch.size", W_OPTIONS["batchBytes"]).option("topic", "sink").save()
            windows[("sink", w)] = (t0, _ms())
            answers[f"kafka/sink-{w}"] = read("kafka", "sink")
        # a partition the topic does not have: the producer refuses it (without waiting
        # max.block.ms's default minute for the partition to appear)
        try:
            spark.createDataFrame([(b"k", b"v", W_PARTITIONS)],
                                  "key binary, value binary, partition int") \
                .write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap) \
                .option("kafka.max.block.ms", "3000").option("topic", "sink").save()
            refused = None
        except Exception as e:  # noqa: BLE001 -- what the connector answered is the result
            refused = str(e)
        answers["kafka/no-such-partition"] = Answer(error=refused)
        lap("connector writes and reads")
        broker.stop()
        assert (broker.log_dir / ".kafka_cleanshutdown").exists()
        answers["kafkalog/sink"] = read("kafkalog", "sink", broker.log_dir)
        # Kafka's form of the id (a UUID string is the other form the option takes: see
        # test_writer_topic_id_forms)
        tids = {t: topic_id_to_string(ho.topic_id(broker.partition_dir(t, 0)))
                for t in ("ow", "ap")}

        # kafkalog: the first DataFrame in one task, the second in two (pieces joined at commit)
        for topic, w, mode, codec in (("ap", 1, "append", "lz4"), ("ow", 1, "append", "zstd"),
                                      ("ap", 2, "append", "lz4"), ("ow", 2, "overwrite", "zstd")):
            df = frames[w].coalesce(1) if w == 1 else frames[w]
            assert df.rdd.getNumPartitions() == w
            t0 = _ms()
            df.write.format("kafkalog").mode(mode).options(**W_OPTIONS).option("topic", topic) \
                .option("topicId", tids[topic]).option("compression", codec).save(str(stage))
            windows[(topic, w)] = (t0, _ms())
        lap("kafkalog writes")
        answers["kafkalog/ow,ap"] = read("kafkalog", "ow,ap", stage)
        for c in W_CASES:
            s.staged[c] = ho.read_dir(stage / c.name)
        lap("reads")

        for mode in ("clean", "recover"):
            cases = [c for c in W_CASES if c.mode == mode]
            if mode == "recover":
                # the same partitions handed over again, now as after an unclean shutdown: no
                # marker, no recovery point (the broker recovers every segment itself)
                broker.stop()
                read_finals(cases_done)
                (broker.log_dir / ".kafka_cleanshutdown").unlink()
            for c in cases:
                ho.hand_off(stage, broker.log_dir, c.topic, c.partition, recover=mode == "recover")
            mark = broker.log_path.stat().st_size
            broker.start()
            if mode == "clean":
                answers["kafka/ow,ap"] = read("kafka", "ow,ap")  # before the broker appends more
            ho.serve_phase(kafka_env, broker, stage, cases, s.staged, s, mode)
            cases_done = cases
            lap(f"{mode} hand-off and serve")
    finally:
        broker.stop()
    read_finals(cases_done)
    lap("stop")
    return Writes(rows, windows, answers, s, timings)


def _records(answer: Answer) -> List[Dict[str, Any]]:
    assert answer.error is None, answer.error
    names = [s[0] for s in answer.schema]
    return [dict(zip(names, r)) for r in answer.rows]  # by topic, partition, offset


def _placed(writes: Writes, answer: Answer, topic: str) -> Dict[int, List[Dict[str, Any]]]:
    """Partition -> the input rows of ``topic``'s records, in offset order."""
    out: Dict[int, List[Dict[str, Any]]] = {p: [] for p in range(W_PARTITIONS)}
    for rec in _records(answer):
        if rec["topic"] == topic:
            row = writes.rows.get(ident(rec["key"], rec["value"], rec["headers"]))
            assert row is not None, \
                f"{topic}-{rec['partition']}@{rec['offset']}: a record no row wrote: {rec}"
            out[rec["partition"]].append(row)
    return out


def _sticky(row: Dict[str, Any]) -> bool:
    """No key and no partition: Kafka's producer places it with its sticky partitioner."""
    return row["key"] is None and row["partition"] is None


def _ms_of(ts) -> int:
    return round(ts.timestamp() * 1000)


@pytest.mark.parametrize("pair",
                         [("kafka/sink-2", "kafkalog/sink"), ("kafka/ow,ap", "kafkalog/ow,ap")],
                         ids=["connector-written", "kafkalog-written"])
def test_writer_output_reads_the_same_both_ways(writes, pair):
    """What each writer wrote reads the same with ``format("kafka")`` from the live broker and
    with ``format("kafkalog")`` from the files: the connector's from the broker's stopped log
    directory, kafkalog's from its own root and, handed to the broker, from the broker."""
    want, got = (writes.answers[k] for k in pair)
    assert want.error is None and got.error is None, (want.error, got.error)
    assert got.schema == want.schema
    names = [s[0] for s in want.schema]
    assert len(want.rows) > 800
    assert got.rows == want.rows, _first_difference(want.rows, got.rows, names)


@pytest.mark.parametrize("topic", ["ap", "ow"])
def test_writer_same_records_as_the_connector(writes, topic):
    """kafkalog's writer puts the rows where the connector's producer puts them: every row
    once; rows that name their partition and keyed rows (Kafka's default partitioner) in the
    same partition and, per partition, the same order of key, value and headers; keyless rows
    without a partition (the producer's sticky partitioner) as the same multiset.  ``ap``: the
    first DataFrame, then the second appended; ``ow``: the second overwrote the first."""
    wanted = {1, 2} if topic == "ap" else {2}
    sink = {p: [r for r in rows if r["write"] in wanted]
            for p, rows in _placed(writes, writes.answers["kafka/sink-2"], topic="sink").items()}
    ours = _placed(writes, writes.answers["kafkalog/ow,ap"], topic)
    every = sorted((r["write"], r["i"]) for r in writes.rows.values() if r["write"] in wanted)
    for name, placed in (("connector", sink), ("kafkalog", ours)):
        got = sorted((r["write"], r["i"]) for rows in placed.values() for r in rows)
        assert got == every, f"{name}: not every row exactly once"
    for p in range(W_PARTITIONS):
        want = [ident(r["key"], r["value"], r["headers"]) for r in sink[p] if not _sticky(r)]
        got = [ident(r["key"], r["value"], r["headers"]) for r in ours[p] if not _sticky(r)]
        assert len(want) > 50
        first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b),
                     min(len(want), len(got)))
        assert got == want, (f"{topic}-{p}: kafkalog {len(got)} placed rows, the connector "
                             f"{len(want)}; first difference at #{first}")
    sticky = lambda placed: sorted((r["write"], r["i"])  # noqa: E731
                                   for rows in placed.values() for r in rows if _sticky(r))
    assert sticky(ours) == sticky(sink) and sticky(sink)


def test_writer_timestamps(writes):
    """The connector's sink has no timestamp column: its records carry the producer's send
    time.  kafkalog keeps a given timestamp and stamps a null one with the time it writes.
    Both CreateTime."""
    wrong = []
    for key, topics in (("kafka/sink-2", ("sink",)), ("kafkalog/ow,ap", ("ow", "ap"))):
        for rec in _records(writes.answers[key]):
            if rec["topic"] not in topics:
                continue
            row = writes.rows[ident(rec["key"], rec["value"], rec["headers"])]
            lo, hi = writes.windows[(rec["topic"], row["write"])]
            ts = _ms_of(rec["timestamp"])
            ok = (lo <= ts <= hi if rec["topic"] == "sink" or row["timestamp"] is None
                  else ts == row["timestamp"])
            if not ok or rec["timestampType"] != 0:
                wrong.append((rec["topic"], rec["partition"], rec["offset"], ts,
                              rec["timestampType"], row["timestamp"], (lo, hi)))
    assert not wrong, f"{len(wrong)} records, (topic, partition, offset, timestamp, type, given, " \
                      f"window): {wrong[:5]}"


@pytest.mark.parametrize("form", ["kafka", "uuid"])
def test_writer_topic_id_forms(session, tmp_path, form):
    """The ``topicId`` option takes a topic id in Kafka's form (base64, as ``kafka-topics
    --describe`` prints it) or as a UUID (docs/spark.md), and writes it to
    ``partition.metadata``: the id a broker checks when it is handed the partition."""
    import uuid

    tid = uuid.UUID("c58ad141-fb99-4712-b383-7255c2502056")
    text = topic_id_to_string(tid) if form == "kafka" else str(tid)
    session.createDataFrame([(b"k", b"v")], "key binary, value binary").write.format("kafkalog") \
        .mode("append").option("topic", "t").option("topicId", text).save(str(tmp_path))
    assert ho.topic_id(tmp_path / "t-0") == tid


def test_writer_bad_topic_id(session, tmp_path):
    """A ``topicId`` that is no topic id fails naming the option, before anything is
    written."""
    df = session.createDataFrame([(b"k", b"v")], "key binary, value binary")
    with pytest.raises(Exception, match="topicId") as e:
        df.write.format("kafkalog").mode("append").option("topic", "t") \
            .option("topicId", "not-a-topic-id").save(str(tmp_path / "out"))
    assert not (tmp_path / "out" / "t-0").exists(), str(e.value)[:500]


def test_writer_refuses_a_partition_the_topic_lacks(writes, session, tmp_path):
    """A row for partition 3 of a 3-partition topic: the connector's producer refuses it
    (``Partition 3 of topic sink with partition count 3 is not present in metadata``), and so
    must kafkalog once ``numPartitions`` says how many the topic has; nothing is written."""
    refused = writes.answers["kafka/no-such-partition"].error
    assert refused is not None and "partition" in refused.lower(), refused
    df = session.createDataFrame([(b"k", b"v", 0), (b"k", b"v", W_PARTITIONS)],
                                 "key binary, value binary, partition int")
    with pytest.raises(Exception, match=f"partition {W_PARTITIONS}") as e:
        df.coalesce(1).write.format("kafkalog").mode("append").option("topic", "t") \
            .option("numPartitions", str(W_PARTITIONS)).save(str(tmp_path / "out"))
    assert not list((tmp_path / "out").glob("t-*")), str(e.value)[:500]


# -- issue 29: the broker serves the Spark writer's partitions unchanged
# --------------------------------
def _w_id(c: ho.Case) -> str:
    return f"{c.mode}-{c.writer}-{c.partition}"


@pytest.mark.parametrize("case", [c for c in W_CASES if c.mode == "clean"], ids=_w_id)
def test_spark_written_as_read(writes, case):
    """The staged partition (several segments) holds what ``format("kafkalog")`` read from the
    write's root: the content the broker is given."""
    st = writes.served.staged[case]
    assert len(st.segments) >= 2, st.segments
    read = [(r["offset"], r["key"], r["value"], tuple(tuple(h) for h in (r["headers"] or ())),
             _ms_of(r["timestamp"]), r["timestampType"])
            for r in _records(writes.answers["kafkalog/ow,ap"])
            if (r["topic"], r["partition"]) == (case.topic, case.partition)]
    assert st.rows["read_uncommitted"] == read


@pytest.mark.parametrize("case", W_CASES, ids=_w_id)
@pytest.mark.parametrize("isolation", ho.ISOLATIONS)
def test_spark_write_consumer_reads(writes, case, isolation):
    ho.check_consumer_reads(writes.served, case, isolation)


@pytest.mark.parametrize("case", W_CASES, ids=_w_id)
@pytest.mark.parametrize("isolation", ho.ISOLATIONS)
def test_spark_write_from_the_middle(writes, case, isolation):
    ho.check_from_the_middle(writes.served, case, isolation)


@pytest.mark.parametrize("case", W_CASES, ids=_w_id)
@pytest.mark.parametrize("isolation", ho.ISOLATIONS)
def test_spark_write_offsets_for_times(writes, case, isolation):
    ho.check_offsets_for_times(writes.served, case, isolation)


@pytest.mark.parametrize("case", W_CASES, ids=_w_id)
def test_spark_write_broker_log_is_quiet(writes, case):
    ho.check_broker_log_quiet(writes.served, case)


@pytest.mark.parametrize("mode", ["clean", "recover"])
def test_spark_write_dump_log(writes, mode):
    """The writer's records have no producer id: its snapshots hold no producer."""
    ho.check_dump_log(writes.served, mode, producers=False)
    print({k: round(v, 1) for k, v in writes.timings.items()})


@pytest.mark.parametrize("case", W_CASES, ids=_w_id)
@pytest.mark.parametrize("isolation", ho.ISOLATIONS)
def test_spark_write_round_trip_closes(writes, case, isolation):
    ho.check_round_trip(writes.served, case, isolation)
