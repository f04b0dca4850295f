"""df.write.format("kafkalog") / kafkalog.spark.write with a real local Spark."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")


def _verify(path) -> int:
    try:
        from kafkalog.tools import cli
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
    from kafkalog.storage.log import Log

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
    contiguous offset range of a partition, and commit joins the pieces into one log rolled
    at segmentBytes."""
    out = tmp_path / "plain"
    df = (
        spark.read.format("kafkalog")
        .option("maxPartitionBytes", "16384")
        .option("subscribe", "orders")
        .load(sample_root)
    )
    assert df.rdd.getNumPartitions() > 3
    df.write.format("kafkalog").mode("append").option("segmentBytes", "65536").save(str(out))
    assert _verify(out) == 0
    for _t, _p, d in oracle.dirs(str(out)):
        _assert_rolled_at(d, 65536)  # not one segment per task
    want = [r for r in oracle.rows(sample_root, headers=False) if r["topic"] == "orders"]
    assert oracle.norm(oracle.rows(str(out), headers=False)) == oracle.norm(want)


def _segment_sizes(d, lo=0, hi=None):
    """Batch sizes of each segment of ``d`` whose base offset is in [lo, hi)."""
    import struct

    out = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".log"):
            continue
        base = int(name[:-4])
        if base < lo or (hi is not None and base >= hi):
            continue
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        sizes, pos = [], 0
        while pos + 12 <= len(data):
            sizes.append(struct.unpack_from(">i", data, pos + 8)[0] + 12)
            pos += sizes[-1]
        out.append(sizes)
    return out


def _assert_rolled_at(d, segment_bytes, lo=0, hi=None):
    """Segments roll as segment.bytes implies: each but the last could not take the next
    batch.  Returns the number of segments."""
    segs = [s for s in _segment_sizes(d, lo, hi) if s]
    for cur, nxt in zip(segs, segs[1:]):
        assert sum(cur) <= segment_bytes
        assert sum(cur) + nxt[0] > segment_bytes, (d, [sum(s) for s in segs])
    return len(segs)


def test_rewrite_segments_follow_segment_bytes(spark, sample_root, oracle, tmp_path):
    """A rewrite with offsets over many write tasks: one task per partition, so each log is
    cut where segmentBytes says, never where the shuffle split it (it made several small
    segments per partition)."""
    import kafkalog.spark as ks

    out = tmp_path / "resegmented"
    df = spark.read.format("kafkalog").option("subscribe", "orders,payments").load(sample_root)
    ks.write(df, str(out), numTasks=8, segmentBytes="16384", fsync="false")
    want = [r for r in oracle.rows(sample_root, headers=False)
            if r["topic"] in ("orders", "payments")]
    assert oracle.norm(oracle.rows(str(out), headers=False)) == oracle.norm(
        _expected_after_rewrite(want)
    )
    counts = [_assert_rolled_at(d, 16384) for _t, _p, d in oracle.dirs(str(out))]
    assert len(counts) >= 2 and max(counts) >= 2


def test_assigned_offsets_append_and_overwrite(spark, tmp_path, oracle):
    from pyspark.sql import functions as F

    import kafkalog.spark as ks

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
    from pyspark.sql import functions as F

    import kafkalog.spark as ks
    from kafkalog.partitioner import default_partition

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


def test_plain_write_of_any_dataframe(spark, tmp_path, oracle):
    """Every task holds rows of every partition and no offsets: commit numbers each
    partition's records across the tasks (task order, then row order), rolls segments at
    segmentBytes, and stamps the write time as CreateTime.  Used to fail with "overlapping
    offsets"."""
    import time

    from pyspark.sql import functions as F

    out = str(tmp_path / "plain-any")
    df = spark.range(0, 600, numPartitions=4).select(
        F.lpad(F.col("id").cast("string"), 60, "x").cast("binary").alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"),
    )
    writer = df.write.format("kafkalog").option("topic", "t").option("segmentBytes", "4096")
    t0 = int(time.time() * 1000)
    writer.option("batchBytes", "1024").mode("append").save(out)
    writer.mode("append").save(out)  # appends continue after the log end
    t1 = int(time.time() * 1000)
    assert _verify(out) == 0
    rows = oracle.rows(out, headers=False)
    for p in range(3):
        mine = [r for r in rows if r["partition"] == p]
        assert [r["offset"] for r in mine] == list(range(400))
        ids = [int(r["value"].lstrip(b"x") or b"0") for r in mine]
        assert ids == sorted(i for i in range(600) if i % 3 == p) * 2
        assert {r["timestampType"] for r in mine} == {0}
        assert all(t0 <= r["timestamp"].timestamp() * 1000 <= t1 for r in mine)
    for _t, _p, d in oracle.dirs(out):
        # the first job's segments, then the appended job's
        _assert_rolled_at(d, 4096, 0, 200)
        _assert_rolled_at(d, 4096, 200)


def test_write_requires_value_and_topic(spark, tmp_path):
    from pyspark.sql import functions as F

    df = spark.range(3).select(F.col("id").cast("string").alias("key"))
    with pytest.raises(Exception, match="value"):
        df.write.format("kafkalog").mode("append").option("topic", "t").save(str(tmp_path / "x"))
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="topic"):
        df.write.format("kafkalog").mode("append").save(str(tmp_path / "y"))


def test_save_modes(spark, tmp_path, oracle):
    """errorifexists and ignore as Spark's file sources: the helper takes them as modes, the
    plain writer as the saveMode option (PySpark refuses those modes for Python sources)."""
    from pyspark.sql import functions as F

    import kafkalog.spark as ks

    out = str(tmp_path / "modes")
    df = spark.range(0, 10, numPartitions=2).select(F.col("id").cast("string").alias("value"))
    ks.write(df, out, mode="errorifexists", topic="t")  # a new target: written
    assert len(oracle.rows(out, headers=False)) == 10
    with pytest.raises(Exception, match="already exists"):
        ks.write(df, out, mode="error", topic="t")
    ks.write(df, out, mode="ignore", topic="t")  # nothing runs
    plain = df.write.format("kafkalog").mode("append").option("topic", "t")
    with pytest.raises(Exception, match="already exists"):
        plain.option("saveMode", "errorifexists").save(out)
    plain.option("saveMode", "ignore").save(out)
    assert len(oracle.rows(out, headers=False)) == 10
    assert not os.path.exists(os.path.join(out, ".kafkalog-staging"))
    with pytest.raises(Exception, match="unknown save mode"):
        ks.write(df, out, mode="upsert", topic="t")
    # Spark's default mode (errorifexists) for a plain write: PySpark 4.3 refuses it before
    # the source runs; this notices the day it no longer does
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("kafkalog").option("topic", "t").save(str(tmp_path / "default"))
    assert not os.path.exists(tmp_path / "default")


def test_misspelled_write_option_is_an_error(spark, tmp_path):
    """kafkalog.spark.write(df, out, compresion="zstd") and .option("compresion", "zstd") wrote
    uncompressed data; both now fail before anything is written, naming the right option."""
    from pyspark.sql import functions as F

    import kafkalog.spark as ks
    from kafkalog.spark._write import WriteError

    df = spark.range(0, 20, numPartitions=2).select(F.col("id").cast("string").alias("value"))
    out = tmp_path / "out"
    with pytest.raises(WriteError, match="did you mean 'compression'"):
        ks.write(df, str(out), topic="t", compresion="zstd")
    with pytest.raises(Exception, match="did you mean 'compression'"):
        (df.write.format("kafkalog").mode("append").option("topic", "t")
         .option("compresion", "zstd").save(str(out)))
    assert not out.exists()
    ks.write(df, str(out), topic="t", compression="zstd")
    got = (spark.read.format("kafkalog").option("includeBatchMetadata", "true").load(str(out))
           .select("batch.compression").distinct().collect())
    assert [r[0] for r in got] == ["zstd"]
