"""spark.read.format("kafkalog") with a real local Spark (one session for the run)."""

from __future__ import annotations

import os
import shutil
import struct

import pytest

pa = pytest.importorskip("pyarrow")


def _connector_schema(headers: bool):
    """KafkaRecordToRowConverter.kafkaSchema, as the Scala code builds it (all nullable)."""
    from pyspark.sql import types as T

    fields = [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType()),
    ]
    if headers:
        fields.append(
            T.StructField(
                "headers",
                T.ArrayType(
                    T.StructType(
                        [
                            T.StructField("key", T.StringType()),
                            T.StructField("value", T.BinaryType()),
                        ]
                    )
                ),
            )
        )
    return T.StructType(fields)


def _load(spark, path, **options):
    r = spark.read.format("kafkalog")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


def test_schema_is_the_connectors(spark, sample_root):
    assert _load(spark, sample_root).schema == _connector_schema(False)
    assert _load(spark, sample_root, includeHeaders="true").schema == _connector_schema(True)


def test_content_equals_direct_decode(spark, sample_root, oracle):
    df = _load(spark, sample_root, includeHeaders="true")
    assert oracle.norm(oracle.spark(df)) == oracle.norm(oracle.rows(sample_root))


def test_topic_options(spark, sample_root):
    def tps(**o):
        return sorted(
            {
                (r[0], r[1])
                for r in _load(spark, sample_root, **o)
                .select("topic", "partition")
                .distinct()
                .collect()
            }
        )

    assert tps(subscribe="orders") == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert tps(subscribePattern="^(e.*|leg.*)$") == [
        ("events", 0),
        ("events", 1),
        ("legacy", 0),
        ("legacy", 1),
    ]
    assert tps(assign='{"orders":[1],"payments":[0]}') == [("orders", 1), ("payments", 0)]


def test_offset_options(spark, sample_root, oracle):
    rows = oracle.rows(sample_root, headers=False)
    df = _load(
        spark,
        sample_root,
        subscribe="orders",
        # both JSON name the same partitions (the connector refuses different sets)
        startingOffsets='{"orders":{"0":100,"1":-2,"2":-2}}',
        endingOffsets='{"orders":{"0":150,"1":-1,"2":20}}',
    )
    got = {(r[0], r[1]) for r in df.select("partition", "offset").collect()}
    want = {
        (r["partition"], r["offset"])
        for r in rows
        if r["topic"] == "orders"
        and (
            (r["partition"] == 0 and 100 <= r["offset"] < 150)
            or r["partition"] == 1
            or (r["partition"] == 2 and r["offset"] < 20)
        )
    }
    assert got == want
    # earliest/latest keywords
    n = _load(spark, sample_root, startingOffsets="earliest", endingOffsets="latest").count()
    assert n == len(rows)


def test_timestamp_options(spark, sample_root, oracle):
    rows = [r for r in oracle.rows(sample_root, headers=False) if r["topic"] == "events"]
    stamps = sorted(r["timestamp"] for r in rows)
    t1 = int(stamps[len(stamps) // 4].timestamp() * 1000)
    t2 = int(stamps[3 * len(stamps) // 4].timestamp() * 1000)

    def first_at(part, t):
        return min(
            (
                r["offset"]
                for r in rows
                if r["partition"] == part and r["timestamp"].timestamp() * 1000 >= t
            ),
            default=None,
        )

    df = _load(
        spark, sample_root, subscribe="events", startingTimestamp=str(t1), endingTimestamp=str(t2)
    )
    got = sorted((r[0], r[1]) for r in df.select("partition", "offset").collect())
    want = sorted(
        (r["partition"], r["offset"])
        for r in rows
        if first_at(r["partition"], t1) <= r["offset"] < first_at(r["partition"], t2)
    )
    assert got == want
    by = f'{{"events":{{"0":{t1},"1":{t2}}}}}'
    df = _load(spark, sample_root, subscribe="events", startingOffsetsByTimestamp=by)
    assert df.where("partition = 0").agg({"offset": "min"}).first()[0] == first_at(0, t1)
    assert df.where("partition = 1").agg({"offset": "min"}).first()[0] == first_at(1, t2)
    future = str(int(stamps[-1].timestamp() * 1000) + 10**7)
    with pytest.raises(Exception, match="No offset matched"):
        _load(spark, sample_root, subscribe="events", startingTimestamp=future).count()
    assert (
        _load(
            spark,
            sample_root,
            subscribe="events",
            startingTimestamp=future,
            startingOffsetsByTimestampStrategy="latest",
        ).count()
        == 0
    )


def test_fail_on_data_loss(spark, sample_root, tmp_path):
    root = tmp_path / "lossy"
    shutil.copytree(sample_root, root)
    d = root / "orders-0"
    logs = sorted(p for p in os.listdir(d) if p.endswith(".log"))
    base = int(logs[1].split(".")[0])
    for f in os.listdir(d):  # retention deleted the first segment
        if f.startswith(logs[0].split(".")[0]):
            os.unlink(d / f)
    with pytest.raises(Exception, match="failOnDataLoss"):
        _load(spark, str(root), subscribe="orders", startingOffsets='{"orders":{"0":0}}').count()
    df = _load(
        spark,
        str(root),
        subscribe="orders",
        startingOffsets='{"orders":{"0":0}}',
        failOnDataLoss="false",
    )
    assert df.where("partition = 0").agg({"offset": "min"}).first()[0] == base
    # a corrupt batch: CRC mismatch
    d1 = root / "orders-1"
    seg = sorted(p for p in os.listdir(d1) if p.endswith(".log"))[0]
    with open(d1 / seg, "r+b") as f:
        f.seek(0)
        head = f.read(12)
        size = struct.unpack(">qi", head)[1] + 12
        f.seek(size + 70)  # inside the second batch's records
        b = f.read(1)
        f.seek(size + 70)
        f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(Exception, match="(?i)crc|corrupt"):
        _load(spark, str(root), assign='{"orders":[1]}').count()
    clean = _load(spark, sample_root, assign='{"orders":[1]}').count()
    skipped = _load(spark, str(root), assign='{"orders":[1]}', failOnDataLoss="false").count()
    assert 0 < skipped < clean


def test_min_partitions_and_split_size(spark, sample_root):
    base = _load(spark, sample_root)
    small = _load(spark, sample_root, maxPartitionBytes="8192")
    assert small.rdd.getNumPartitions() > base.rdd.getNumPartitions()
    assert _load(spark, sample_root, minPartitions="9").rdd.getNumPartitions() >= 9
    assert sorted(small.select("topic", "partition", "offset").collect()) == sorted(
        base.select("topic", "partition", "offset").collect()
    )


def test_read_committed(spark, sample_root, oracle):
    df = _load(
        spark, sample_root, subscribe="payments", **{"kafka.isolation.level": "read_committed"}
    )
    got = sorted(r[0] for r in df.select("offset").collect())
    want = [
        r["offset"]
        for r in oracle.rows(sample_root, read_committed=True, headers=False)
        if r["topic"] == "payments"
    ]
    assert got == want
    assert len(got) < _load(spark, sample_root, subscribe="payments").count()


def test_broker_options_are_ignored(spark, sample_root):
    n = _load(
        spark,
        sample_root,
        **{
            "kafka.bootstrap.servers": "localhost:9092",
            "groupIdPrefix": "g",
            "subscribe": "legacy",
        },
    ).count()
    assert n == _load(spark, sample_root, subscribe="legacy").count()


def test_batch_and_segment_metadata(spark, sample_root):
    df = _load(spark, sample_root, includeBatchMetadata="true", includeSegmentMetadata="true")
    assert df.columns[-2:] == ["batch", "segment"]
    codecs = {
        (r[0], r[1], r[2])
        for r in df.select("topic", "partition", "batch.compression").distinct().collect()
    }
    assert ("orders", 1, "gzip") in codecs and ("events", 1, "zstd") in codecs
    seg = df.where("topic = 'orders' and partition = 0").select("segment").first()[0]
    assert seg.endswith(".log") and "orders-0" in seg


def test_user_schema_subset(spark, sample_root):
    df = (
        spark.read.format("kafkalog")
        .schema("offset BIGINT, partition INT, topic STRING")
        .load(sample_root)
    )
    rows = df.where("topic = 'legacy'").collect()
    assert len(rows[0]) == 3 and len(rows) == _load(spark, sample_root, subscribe="legacy").count()


def test_bad_option_fails_at_planning(spark, sample_root):
    with pytest.raises(Exception, match="Only one of"):
        _load(spark, sample_root, subscribe="orders", assign='{"orders":[0]}').count()


@pytest.mark.filterwarnings("ignore:kafkalog filter pushdown")
def test_pushdown_equals_unpushed(spark, sample_root):
    import kafkalog.spark as ks

    queries = [
        "topic = 'orders' and partition = 1 and offset >= 40 and offset < 90",
        "topic in ('events', 'legacy') and partition in (0, 2) and offset <= 10 or offset = 7",
        "topic like 'ord%' and partition >= 1 and partition < 2 and offset in (3, 300, 700)",
        "timestamp >= '2023-11-14 22:13:22' and timestamp < '2023-11-14 22:13:23.5' and offset > 5",
        "topic = 'nope'",
    ]
    results = {}
    try:
        for pushdown in (False, True):
            ks.register(spark, pushdown=pushdown)
            for q in queries:
                df = spark.read.format("kafkalog").load(sample_root).where(q)
                results[(pushdown, q)] = sorted(df.select("topic", "partition", "offset").collect())
        pushed = (
            spark.read.format("kafkalog")
            .load(sample_root)
            .where("topic = 'orders' and partition = 1 and offset >= 40 and offset < 90")
        )
        assert pushed.rdd.getNumPartitions() == 1
    finally:
        ks.register(spark)
    for q in queries:
        assert results[(True, q)] == results[(False, q)], q
    assert len(results[(False, queries[0])]) == 50
    assert all(results[(False, q)] for q in queries[:-1])
    assert results[(False, queries[-1])] == []


def test_conformance_directories(spark, corpus, oracle):
    """The real log directories of the corpus (several clusters: read one root at a time)."""
    from functools import reduce

    from pyspark.sql import functions as F

    import kafkalog.arrow as ka
    from kafkalog.spark import _discovery, _options

    roots = sorted(str(p) for p in (corpus / "files").iterdir() if p.is_dir())
    dfs = [
        spark.read.format("kafkalog")
        .option("includeInternalTopics", "true")
        .option("includeHeaders", "true")
        .load(p)
        .withColumn("root", F.lit(p))
        for p in roots
    ]
    got = reduce(lambda a, b: a.unionByName(b), dfs).toArrow().to_pylist()
    want = []
    for p in roots:
        for tp in _discovery.discover(
            _options.ReadOptions.parse({"path": p, "includeInternalTopics": "true"})
        ):
            src = tp.directory if tp.topic is not None else [s.path for s in tp.segments]
            t = ka.to_arrow(
                src,
                columns=["key", "value", "offset", "timestamp", "timestampType", "headers"],
                timestamp_unit="us",
            )
            for r in t.to_pylist():
                r["topic"], r["partition"], r["root"] = tp.topic, tp.partition, p
                want.append(r)

    def key(r):
        return (r["root"], r["topic"] or "", r["partition"] or 0, r["offset"])

    assert len(got) == len(want) > 8000
    assert oracle.norm(sorted(got, key=key)) == oracle.norm(sorted(want, key=key))


def test_load_of_a_path_without_kafka_logs_fails(spark, tmp_path):
    """load('/etc') gave an empty DataFrame and warnings; now an error naming the path, as for a
    missing path."""
    junk = tmp_path / "etc"
    (junk / "dbus-1" / "session.d").mkdir(parents=True)
    (junk / "dbus-1" / "system.conf").write_text("<busconfig/>\n")
    (junk / "hosts").write_text("127.0.0.1 localhost\n")
    with pytest.raises(Exception, match=f"no Kafka log under {junk}"):
        spark.read.format("kafkalog").load(str(junk)).count()
    with pytest.raises(Exception, match="does not exist"):
        spark.read.format("kafkalog").load(str(tmp_path / "missing")).count()


_LIMIT_JOB = r"""
import json, sys
from pyspark.sql import SparkSession
import kafkalog.spark as ks

spark = (SparkSession.builder.master("local[2]").appName("kafkalog-limit")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "512m").getOrCreate())
ks.register(spark, default_parallelism=1)  # one split: far more than the socket buffers hold
df = spark.read.format("kafkalog").load(sys.argv[1])
got = [[r.offset for r in df.limit(3).collect()]]
df.createOrReplaceTempView("logs")
got.append([r.offset for r in spark.sql("select offset from logs limit 3").collect()])
got.append([r.offset for r in df.where("value is not null").limit(3).collect()])
spark.stop()
print("ROWS " + json.dumps(got))
"""


@pytest.mark.once
@pytest.mark.spark  # a Spark session of its own, in a subprocess
def test_limit_leaves_no_traceback(tmp_path):
    """A `limit 3` query stops reading early: Spark closes the Python worker's socket while the
    reader still yields batches. The rows must be right and nothing may be printed about it
    (PySpark 4.3's daemon printed a BrokenPipeError traceback as it ended the worker). A Spark
    session of its own, so that the stderr of the driver and of its Python workers can be
    read. The split is larger than the socket buffers: when a small split's rows are all sent
    before Spark closes the socket, the reader is done and PySpark still prints its traceback
    (docs/spark.md, Splits)."""
    import json
    import subprocess
    import sys

    from kafkalog import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    from .conftest import SPARK_SKIP_REASON

    if SPARK_SKIP_REASON:
        pytest.skip(SPARK_SKIP_REASON)
    import kafkalog

    n = 30_000  # ~30 MiB in 1 MiB segments, read as one split
    with Log.open(str(tmp_path / "logs" / "big-0"), {"segment.bytes": 1 << 20}) as log:
        for i in range(0, n, 100):
            b = MemoryRecordsBuilder()
            for j in range(i, i + 100):
                b.append(1_700_000_000_000 + j, b"k%d" % j, b"%06d" % j + b"x" * 1000)
            log.append(b.build())
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(kafkalog.__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                      else "")
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    p = subprocess.run([sys.executable, "-c", _LIMIT_JOB, str(tmp_path / "logs")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    rows = json.loads(p.stdout.split("ROWS ", 1)[1])
    for got in rows:
        assert len(set(got)) == 3 and all(0 <= o < n for o in got), rows
    for bad in ("Traceback", "BrokenPipeError", "ConnectionResetError", "Broken pipe"):
        assert bad not in p.stderr, p.stderr[-4000:]
