"""The Spark source (local[2]) reading a log from an S3-compatible server on 127.0.0.1 (moto)
vs the same log on local disk, vs a Parquet copy of the same data: read by Spark's own Parquet
reader from local disk (Spark's S3 connector, hadoop-aws, is not in the pyspark wheel and
cannot be fetched here, so this is the closest Spark Parquet read: local disk is the faster
side of it) and by pyarrow from the same server.  Every read materialises the same four
columns of every row (a noop write).  One run; ratios.

    PYTHONPATH=src python bench/spark_remote.py --batches 4000 --reps 3

Every S3 read pays moto's (Python) request handling, so S3/Parquet-on-S3 is the meaningful
ratio; local disk is the floor.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "remote"))


def best(fn, reps):
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--compression", default="snappy")
    ap.add_argument("--segment-mb", type=int, default=4)
    args = ap.parse_args()

    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    import kafkalog
    import kafkalog.arrow as ka

    import s3_support as rc  # tests/remote/s3_support.py: server helpers

    work = tempfile.mkdtemp(prefix="kl-spark-remote-bench-")
    server = spark = None
    try:
        server, url = rc.start_server()
        os.environ.update(AWS_ACCESS_KEY_ID=rc.KEY_ID, AWS_SECRET_ACCESS_KEY=rc.SECRET,
                          AWS_REGION="us-east-1", AWS_ENDPOINT_URL=url)
        root = os.path.join(work, "root")
        for p in range(2):
            rc.write_partition(os.path.join(root, f"bench-{p}"), batches=args.batches // 2,
                               per_batch=50, value_bytes=100,
                               segment_bytes=args.segment_mb << 20,
                               compression=args.compression)
        rc.upload_tree(url, root, rc.BUCKET, "sparkbench")
        uri = f"s3://{rc.BUCKET}/sparkbench"
        import pyarrow as pa

        full = pa.concat_tables([ka.to_arrow(os.path.join(root, f"bench-{p}"),
                                             ["key", "value", "offset", "timestamp"])
                                 for p in range(2)])
        pq.write_table(full, os.path.join(work, "copy.parquet"))
        with open(os.path.join(work, "copy.parquet"), "rb") as f:
            rc.s3_client(url).put_object(Bucket=rc.BUCKET, Key="sparkbench-pq/copy.parquet",
                                         Body=f.read())
        s3 = pafs.S3FileSystem(access_key=rc.KEY_ID, secret_key=rc.SECRET, region="us-east-1",
                               endpoint_override=url.split("://")[1], scheme="http")
        log_mb = sum(os.path.getsize(os.path.join(d, n)) for d, _, fs in os.walk(root)
                     for n in fs if n.endswith(".log")) / 1e6

        os.environ["PYSPARK_PYTHON"] = sys.executable
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(kafkalog.__file__)))
        os.environ["PYTHONPATH"] = pkg + os.pathsep + os.environ.get("PYTHONPATH", "")
        warnings.filterwarnings("ignore", category=FutureWarning)
        from pyspark.sql import SparkSession

        import kafkalog.spark as ks

        spark = (SparkSession.builder.master("local[2]").appName("kafkalog-spark-remote")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        ks.register(spark)
        cols = ["key", "value", "offset", "timestamp"]

        def run(df):  # every row and column materialised (count() would skip Parquet's data)
            df.select(*cols).write.format("noop").mode("overwrite").save()
            return df.count()

        cnt = lambda p: run(spark.read.format("kafkalog").load(p))  # noqa: E731
        pq_local = os.path.join(work, "copy.parquet")
        cnt(root)  # warm the Python workers
        t_local, n_local = best(lambda: cnt(root), args.reps)
        t_s3, n_s3 = best(lambda: cnt(uri), args.reps)
        assert n_local == n_s3 == full.num_rows, (n_local, n_s3, full.num_rows)
        t_spq, n_spq = best(lambda: run(spark.read.parquet(pq_local)), args.reps)
        assert n_spq == full.num_rows
        t_pq, tpq = best(lambda: pq.read_table(f"{rc.BUCKET}/sparkbench-pq/copy.parquet",
                                               filesystem=s3), args.reps)
        assert tpq.num_rows == full.num_rows
        t_pql, _ = best(lambda: pq.read_table(pq_local), args.reps)
        print(f"rows {full.num_rows}, log {log_mb:.1f} MB in 2 partitions ({args.compression}),"
              f" best of {args.reps}, Spark local[2]")
        print(f"spark read local disk     {t_local:8.3f} s"
              f"  {full.num_rows / t_local / 1e6:6.2f} M rows/s")
        print(
            f"spark read s3 (moto)      {t_s3:8.3f} s  {full.num_rows / t_s3 / 1e6:6.2f} M rows/s"
        )
        print(
            f"spark parquet local disk  {t_spq:8.3f} s  {full.num_rows / t_spq / 1e6:6.2f} M rows/s"
        )
        print(
            f"parquet s3 via pyarrow    {t_pq:8.3f} s  {full.num_rows / t_pq / 1e6:6.2f} M rows/s"
        )
        print(
            f"parquet local via pyarrow {t_pql:8.3f} s  {full.num_rows / t_pql / 1e6:6.2f} M rows/s"
        )
        print(f"ratio spark s3 / local    {t_s3 / t_local:8.2f}x")
        print(
            f"ratio spark s3 / spark parquet local {t_s3 / t_spq:8.2f}x  (an upper bound of the "
            "ratio to Spark reading the Parquet copy from S3, which also pays the store)"
        )
        print(
            f"ratio spark s3 / parquet s3 (pyarrow) {t_s3 / t_pq:8.2f}x"
            "  (Parquet read without Spark)"
        )
    finally:
        if spark is not None:
            spark.stop()
        if server is not None:
            rc.stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
