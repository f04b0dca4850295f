"""df.write.format("kafkalog") / kafkalog.spark.write with a real local Spark."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")


def _verify(path) -> int:
    try:
        from kafkalog import cli
    except ImportError:  # pragma: no cover - the CLI is optional here
        return 0
    return cli.main(["verify", "--quiet", str(path)])


def _expected_after_rewrite(rows):
    # magic v0 records have no timestamp type; a v2 batch says CreateTime (timestamp stays -1)
    return [
        dict(r, timestampType=0 if r["timestampType"] == -1 else r["timestampType"]) for r in rows
    ]


def test_round_trip_preserves_records(spark, sample_root, oracle, tmp_path):
    import kafkalog.spark as ks
    from kafkalog.log import Log

    out = tmp_path / "rt"
    df = spark.read.format("kafkalog").option("includeHeaders", "true").load(sample_root)
    ks.write(df, str(out), compression="lz4", segmentBytes="4096", batchBytes="2048")
    assert not (out / ".kafkalog-staging").exists()
    assert _verify(out) == 0
    want = _expected_after_rewrite(oracle.rows(sample_root))
    assert oracle.norm(oracle.rows(str(out))) == oracle.norm(want)
    # and through Spark again
    back = spark.read.format("kafkalog").option("includeHeaders", "true").load(str(out))
    assert oracle.norm(oracle.spark(back)) == oracle.norm(want)
    for topic, part, d in oracle.dirs(str(out)):
        with Log.open(d, read_only=True) as log:
            assert len(log.segments) >= 2  # rolled at segmentBytes
            offs = [r["offset"] for r in want if (r["topic"], r["partition"]) == (topic, part)]
            assert log.log_end_offset == offs[-1] + 1


def test_plain_write_merges_contiguous_splits(spark, sample_root, oracle, tmp_path):
    """A read split into many tasks written back without a shuffle: every task holds a
    contiguous offset range of a partition, and commit puts the pieces side by side."""
    out = tmp_path / "plain"
    df = (
        spark.read.format("kafkalog")
        .option("maxPartitionBytes", "16384")
        .option("subscribe", "orders")
        .load(sample_root)
    )
    assert df.rdd.getNumPartitions() > 3
    df.write.format("kafkalog").mode("append").save(str(out))
    assert _verify(out) == 0
    want = [r for r in oracle.rows(sample_root, headers=False) if r["topic"] == "orders"]
    assert oracle.norm(oracle.rows(str(out), headers=False)) == oracle.norm(want)


def test_assigned_offsets_append_and_overwrite(spark, tmp_path, oracle):
    import kafkalog.spark as ks
    from pyspark.sql import functions as F

    out = str(tmp_path / "assigned")
    df = spark.range(0, 300).select(
        F.col("id").cast("string").cast("binary").alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"),
        F.lit("t").alias("topic"),
    )
    ks.write(df, out, compression="snappy")
    ks.write(df, out)  # append: offsets continue after the log end
    rows = oracle.rows(out, headers=False)
    for p in range(3):
        offs = [r["offset"] for r in rows if r["partition"] == p]
        assert offs == list(range(200))
    ks.write(df.where("partition = 1"), out, mode="overwrite")
    rows = oracle.rows(out, headers=False)
    assert [r["offset"] for r in rows if r["partition"] == 1] == list(range(100))
    assert len([r for r in rows if r["partition"] == 0]) == 200  # other partitions kept
    assert _verify(out) == 0
    # appending offsets below the log end is refused, and nothing changes
    with pytest.raises(Exception, match="below the log end"):
        ks.write(
            spark.range(0, 300).select(
                F.col("id").cast("string").cast("binary").alias("value"),
                (F.col("id") % 3).cast("int").alias("partition"),
                F.lit("t").alias("topic"),
                F.col("id").alias("offset"),
            ),
            out,
        )
    assert len(oracle.rows(out, headers=False)) == 500
    assert not os.path.exists(os.path.join(out, ".kafkalog-staging"))


def test_topic_option_and_default_partitioner(spark, tmp_path, oracle):
    import kafkalog.spark as ks
    from kafkalog.spark._write import default_partition
    from pyspark.sql import functions as F

    out = str(tmp_path / "keyed")
    df = spark.range(0, 200).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.col("id").cast("string").alias("value"),
    )
    ks.write(df, out, topic="keyed", numPartitions=4)
    rows = oracle.rows(out, headers=False)
    assert len(rows) == 200 and {r["topic"] for r in rows} == {"keyed"}
    for r in rows:
        assert r["partition"] == default_partition(r["key"], 4)


def test_failed_job_leaves_nothing(spark, tmp_path):
    from pyspark.sql import functions as F

    out = tmp_path / "failed"

    @F.udf("long", useArrow=False)
    def boom(i):
        if i >= 150:
            raise RuntimeError("task failure injected by the test")
        return i

    df = spark.range(0, 200, numPartitions=2).select(
        F.col("id").cast("string").cast("binary").alias("value"),
        F.lit("t").alias("topic"),
        (F.col("id") / 100).cast("int").alias("partition"),
        boom("id").alias("offset"),
    )
    with pytest.raises(Exception, match="task failure injected"):
        df.write.format("kafkalog").mode("append").save(str(out))
    assert [p for p in os.listdir(out) if not p.startswith(".")] == []
    assert not (out / ".kafkalog-staging").exists()


def test_overlapping_tasks_are_rejected(spark, tmp_path):
    from pyspark.sql import functions as F

    out = tmp_path / "overlap"
    df = spark.range(0, 100, numPartitions=2).select(
        F.col("id").cast("string").cast("binary").alias("value")
    )
    with pytest.raises(Exception, match="overlapping"):
        df.write.format("kafkalog").option("topic", "t").mode("append").save(str(out))
    assert os.listdir(out) == []


def test_write_requires_value_and_topic(spark, tmp_path):
    from pyspark.sql import functions as F

    df = spark.range(3).select(F.col("id").cast("string").alias("key"))
    with pytest.raises(Exception, match="value"):
        df.write.format("kafkalog").mode("append").option("topic", "t").save(str(tmp_path / "x"))
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="topic"):
        df.write.format("kafkalog").mode("append").save(str(tmp_path / "y"))
