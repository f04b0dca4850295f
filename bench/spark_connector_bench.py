"""kafkalog against Spark's own Kafka connector on the same records (a script).

::

    python bench/spark_connector_bench.py [--records 1000000] [--partitions 8] [--cores 2]
                                          [--reps 3] [--compression lz4]

Starts a real Kafka broker (KRaft, 127.0.0.1, the jars of tests/kafka fetched from Maven
Central and cached outside the checkout) and a ``local[N]`` Spark session holding Spark's
Kafka connector (``spark-sql-kafka-0-10``, the version tests/kafka picks for the installed
pyspark).  The records (16-byte keys, 100-byte values) are produced into a topic of
``--partitions`` partitions through the connector's own sink (``df.write.format("kafka")``),
then read, ``select(key, value, offset, timestamp)`` -> noop, alternately:

* ``format("kafka")`` from the live broker (``startingOffsets=earliest``, ``endingOffsets=latest``);
* ``format("kafkalog")`` from that broker's log directory (the same live files, read-only).

Both must return the same number of rows.  Prints each best time and the ratio (goal: kafkalog
>= 3x faster).  The broker and Spark run on the same cores; the load is printed.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "kafka"))

from spark_bench import _best_of, child_env, implementations  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--compression", default="lz4")
    args = p.parse_args(argv)

    import pyspark

    import kafka_support as ks

    env = ks.prepare()
    version, jars = ks.fetch_spark_connector(pyspark.__version__)
    os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]  # the workers import this kafkalog
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    with tempfile.TemporaryDirectory(prefix="kafkalog-connector-bench-") as work:
        broker = ks.Broker(env, Path(work) / "broker")
        broker.format()
        broker.start()
        try:
            return _run(args, ks, env, broker, version, jars)
        finally:
            broker.stop()


def _run(args, ks, env, broker, version, jars) -> int:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafkalog
    import kafkalog.spark as kls

    ks.run_tool(env, {"bootstrap": broker.bootstrap, "steps": [
        {"op": "create_topics", "topics": [{"name": "bench", "partitions": args.partitions}]}]})
    spark = (SparkSession.builder.master(f"local[{args.cores}]")
             .config("spark.jars", ",".join(str(j) for j in jars))
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "3g")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kls.register(spark)
    impl = implementations(spark)
    t0 = time.perf_counter()
    rows = spark.range(args.records, numPartitions=args.cores).select(
        F.format_string("user-%011d", (F.col("id") * 7919) % 10_000_000).cast("binary")
        .alias("key"),
        F.expr("cast(repeat(substr(sha2(cast(id as string), 256), 1, 50), 2) as binary)")
        .alias("value"))
    (rows.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", "bench").option("kafka.compression.type", args.compression)
     .option("kafka.linger.ms", "20").option("kafka.batch.size", str(1 << 20)).save())
    produce_s = time.perf_counter() - t0
    cols = ["key", "value", "offset", "timestamp"]

    def connector():
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", "bench").option("startingOffsets", "earliest")
                .option("endingOffsets", "latest").load().select(*cols))

    def files():
        return (spark.read.format("kafkalog").option("subscribe", "bench")
                .load(str(broker.log_dir)).select(*cols))

    n_conn, n_files = connector().count(), files().count()
    if n_conn != args.records or n_files != args.records:
        print(f"row counts differ: connector {n_conn}, kafkalog {n_files}, "
              f"produced {args.records}", file=sys.stderr)
        return 1
    log_bytes = sum(f.stat().st_size for d in broker.log_dir.glob("bench-*")
                    for f in d.glob("*.log"))
    load = os.getloadavg()[0]
    kl_s, conn_s = _best_of([
        lambda: files().write.format("noop").mode("overwrite").save(),
        lambda: connector().write.format("noop").mode("overwrite").save()], args.reps)
    print(f"kafkalog {kafkalog.__version__} (driver {impl['driver']}, worker {impl['worker']}), "
          f"pyspark {pyspark_version()}, connector {version}; {os.cpu_count()} CPUs, "
          f"local[{args.cores}]; load {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{args.records} records in {args.partitions} partitions, {args.compression}, "
          f"{log_bytes / 1e6:.0f} MB of log (produced through the connector in {produce_s:.1f} s)")
    print(f"read -> select({', '.join(cols)}) -> noop, best of {args.reps}, alternately:")
    print(f"  format('kafka') from the live broker   {conn_s:8.2f} s")
    print(f"  format('kafkalog') from its log dir    {kl_s:8.2f} s")
    print(f"  kafkalog is {conn_s / kl_s:.2f}x faster")
    spark.stop()
    return 0


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


if __name__ == "__main__":
    sys.exit(main())
