"""Spark benchmarks of the kafkalog data source (a script, not a pytest suite).

::

    python bench/spark_bench.py [--records 2000000] [--partitions 4] [--cores 1,2] [--reps 3]
                                [--compression none] [--dir /tmp/kafkalog-spark-bench]

Writes ``--records`` records (16-byte keys, 100-byte values, one header, CreateTime stamps;
the shape of ../shared/spark/NOTE.md) as a Kafka log root with ``--partitions`` partitions and
the same records as Parquet (snappy), then, for each core count in ``--cores`` (a fresh
``local[N]`` session each, in a child process):

* read: ``spark.read.format("kafkalog")...write.format("noop")`` against
  ``spark.read.parquet(...)...write.format("noop")`` (the whole rows are materialised in
  both; ``count()`` of Parquet reads only footers, so it is reported but not compared);
* pushdown: a 1 % offset range, with and without filter pushdown;
* write: ``kafkalog.spark.write(df, ...)`` (range shuffle + sort + log write) and a plain
  ``df.write.format("kafkalog")`` (no shuffle; the input comes from a kafkalog read so its
  splits are contiguous) against ``df.write.parquet(...)``, all from the same cached input.

Best of ``--reps`` after one warm-up; results as a table and as JSON (``--json``).

``--ratio`` measures only the read -> noop ratio against ``spark.read.parquet`` of the same
data (one Parquet file per partition), for one large partition (``--records``) and for 200
small ones (the same records spread over 200 partitions), each with the source registered by
``kafkalog.spark.register(spark)`` and with the source Spark finds by itself
(``pyspark_kafkalog``, no register() call), in a fresh ``local[N]`` session per case
(N = the first of ``--cores``).  The goal is <= 1.0x Parquet in every case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")


def generate(root: str, parquet: str, records: int, partitions: int, compression: str) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import kafkalog.arrow as ka
    from kafkalog.storage.log import Log

    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(parquet, ignore_errors=True)
    os.makedirs(root)
    os.makedirs(parquet)
    per = records // partitions
    t0 = time.time()
    pool = os.urandom(1 << 20)
    nbytes = 0
    for p in range(partitions):
        chunk = 250_000
        with Log.open(os.path.join(root, f"bench-{p}"), {"max.message.bytes": 1 << 30}) as log:
            for start in range(0, per, chunk):
                n = min(chunk, per - start)
                idx = range(start, start + n)
                keys = pa.array([b"user-%011d" % (i * 7919 % 10_000_000) for i in idx], pa.binary())
                vals = pa.array(
                    [pool[(i * 97) % 1_000_000 : (i * 97) % 1_000_000 + 100] for i in idx],
                    pa.binary(),
                )
                ts = pa.array([1_700_000_000_000 + i for i in idx], pa.int64())
                hdr = pa.array(
                    [[{"key": "h1", "value": b"x"}]] * n,
                    pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
                )
                t = pa.table({"key": keys, "value": vals, "timestamp": ts, "headers": hdr})
                data = ka.from_arrow(
                    t, compression=compression, base_offset=log.log_end_offset, batch_bytes=1 << 20
                )
                mv = memoryview(data)
                pos = 0
                while pos < len(mv):
                    size = int.from_bytes(mv[pos + 8 : pos + 12], "big") + 12
                    log.append_as_follower(mv[pos : pos + size])
                    pos += size
        d = os.path.join(root, f"bench-{p}")
        # the same records, as Spark's Kafka schema, to Parquet
        tbl = ka.to_arrow(
            d,
            columns=[
                "key",
                "value",
                "topic",
                "partition",
                "offset",
                "timestamp",
                "timestampType",
                "headers",
            ],
            timestamp_unit="us",
        )
        pq.write_table(
            tbl, os.path.join(parquet, f"part-{p:05d}.snappy.parquet"), compression="snappy"
        )
        nbytes += sum(
            os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log")
        )
    pq_bytes = sum(os.path.getsize(os.path.join(parquet, f)) for f in os.listdir(parquet))
    return {
        "records": per * partitions,
        "log_bytes": nbytes,
        "parquet_bytes": pq_bytes,
        "generate_s": round(time.time() - t0, 2),
    }


def _best(fn, reps: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def child(args) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafkalog.spark as ks

    cores = args.child
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ks.register(spark)
    root, parquet, out = args.root, args.parquet, os.path.join(args.dir, "out")
    res = {"cores": cores, "spark": spark.version}

    def kl():
        return spark.read.format("kafkalog").option("includeHeaders", "true").load(root)

    def pq():
        return spark.read.parquet(parquet)

    res["kafkalog_tasks"] = kl().rdd.getNumPartitions()
    res["parquet_tasks"] = pq().rdd.getNumPartitions()
    res["read_kafkalog_noop_s"] = _best(
        lambda: kl().write.format("noop").mode("overwrite").save(), args.reps
    )
    res["read_parquet_noop_s"] = _best(
        lambda: pq().write.format("noop").mode("overwrite").save(), args.reps
    )
    res["count_kafkalog_s"] = _best(lambda: kl().count(), args.reps)
    res["count_parquet_s"] = _best(lambda: pq().count(), args.reps)
    n = args.records
    lo, hi = n // args.partitions // 2, n // args.partitions // 2 + n // 100 // args.partitions
    q = f"offset >= {lo} and offset < {hi}"
    res["pushdown_rows"] = kl().where(q).count()
    # pushdown is opt-in (register(pushdown=True)); each run loads its own DataFrame, the use
    # it is safe for
    ks.register(spark, pushdown=True)
    res["pushdown_on_s"] = _best(
        lambda: kl().where(q).write.format("noop").mode("overwrite").save(), args.reps
    )
    ks.register(spark)
    res["pushdown_off_s"] = _best(
        lambda: kl().where(q).write.format("noop").mode("overwrite").save(), args.reps
    )
    res["pushdown_parquet_s"] = _best(
        lambda: pq().where(q).write.format("noop").mode("overwrite").save(), args.reps
    )
    # writes, from the same cached input
    src = pq().cache()
    src.count()

    def w_parquet():
        src.write.mode("overwrite").parquet(os.path.join(out, "pq"))

    def w_helper():
        ks.write(src, os.path.join(out, "kl"), mode="overwrite", fsync="false")

    res["write_parquet_s"] = _best(w_parquet, max(1, args.reps - 1))
    res["write_kafkalog_helper_s"] = _best(w_helper, max(1, args.reps - 1))
    kl_src = kl()

    def w_plain():
        kl_src.write.format("kafkalog").mode("overwrite").option("fsync", "false").save(
            os.path.join(out, "plain")
        )

    res["write_kafkalog_plain_s"] = _best(w_plain, max(1, args.reps - 1))
    src.unpersist()
    spark.stop()
    return res


RATIO_LAYOUTS = (("1 large partition", "one", 1), ("200 small partitions", "many", 200))


def ratio_child(args) -> dict:
    """read -> noop of kafkalog and of Parquet for each layout, in one session, with or
    without register()."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    cores = args.ratio_child
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if args.register:
        import kafkalog.spark as ks

        ks.register(spark)
    res = {"cores": cores, "register": bool(args.register)}
    for _label, key, _n in RATIO_LAYOUTS:
        root = os.path.join(args.dir, f"ratio-{key}", "logs")
        parquet = os.path.join(args.dir, f"ratio-{key}", "parquet")

        def kl(root=root):
            return spark.read.format("kafkalog").option("includeHeaders", "true").load(root)

        def pq(parquet=parquet):
            return spark.read.parquet(parquet)

        res[f"{key}_kafkalog_tasks"] = kl().rdd.getNumPartitions()
        res[f"{key}_parquet_tasks"] = pq().rdd.getNumPartitions()
        res[f"{key}_kafkalog_s"] = _best(
            lambda: kl().write.format("noop").mode("overwrite").save(), args.reps
        )
        res[f"{key}_parquet_s"] = _best(
            lambda: pq().write.format("noop").mode("overwrite").save(), args.reps
        )
    spark.stop()
    return res


def ratio_main(args, env) -> int:
    import kafkalog

    gens = {}
    for _label, key, parts in RATIO_LAYOUTS:
        d = os.path.join(args.dir, f"ratio-{key}")
        gens[key] = generate(
            os.path.join(d, "logs"), os.path.join(d, "parquet"), args.records, parts,
            args.compression,
        )
    cores = int(args.cores.split(",")[0])
    print(
        f"kafkalog {kafkalog.__version__} ({kafkalog.IMPLEMENTATION}), {os.cpu_count()} CPUs, "
        f"local[{cores}]; load before: {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    results = []
    for register in (True, False):
        cmd = [
            sys.executable, os.path.abspath(__file__), "--ratio-child", str(cores),
            "--dir", args.dir, "--reps", str(args.reps),
        ] + (["--register"] if register else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            print(proc.stdout[-3000:], proc.stderr[-5000:], file=sys.stderr)
            return 1
        results.append(json.loads(line[0][7:]))
    print(f"\n{'read -> noop, best of ' + str(args.reps):42}{'records':>10}{'log MB':>8}"
          f"{'kafkalog':>10}{'parquet':>10}{'ratio':>8}{'tasks kl/pq':>13}")
    for r in results:
        how = "register()" if r["register"] else "auto (no register)"
        for label, key, _n in RATIO_LAYOUTS:
            g = gens[key]
            kl, pq = r[f"{key}_kafkalog_s"], r[f"{key}_parquet_s"]
            tasks = f"{r[key + '_kafkalog_tasks']}/{r[key + '_parquet_tasks']}"
            print(
                f"{label + ', ' + how:42}{g['records']:>10}{g['log_bytes'] / 1e6:>8.0f}"
                f"{kl:>9.2f}s{pq:>9.2f}s{kl / pq:>7.2f}x{tasks:>13}"
            )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps({"generate": gens, "results": results}, indent=1))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--cores", default="1,2")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--compression", default="none")
    p.add_argument("--dir", default="/tmp/kafkalog-spark-bench")
    p.add_argument("--json", action="store_true")
    p.add_argument("--ratio", action="store_true", help="only the read -> noop ratio vs Parquet")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ratio-child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--register", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--parquet", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args)))
        return 0
    if args.ratio_child:
        print("RESULT " + json.dumps(ratio_child(args)))
        return 0
    if args.ratio:
        env = dict(os.environ)
        env["PYTHONPATH"] = SRC + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        return ratio_main(args, env)
    import kafkalog

    root = os.path.join(args.dir, "logs")
    parquet = os.path.join(args.dir, "parquet")
    gen = generate(root, parquet, args.records, args.partitions, args.compression)
    print(
        f"kafkalog {kafkalog.__version__} ({kafkalog.IMPLEMENTATION}), {os.cpu_count()} CPUs; "
        f"{gen['records']} records: log {gen['log_bytes'] / 1e6:.0f} MB ({args.compression}), "
        f"parquet {gen['parquet_bytes'] / 1e6:.0f} MB (snappy); generated in {gen['generate_s']} s",
        flush=True,
    )
    results = []
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for cores in [int(c) for c in args.cores.split(",")]:
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            str(cores),
            "--root",
            root,
            "--parquet",
            parquet,
            "--dir",
            args.dir,
            "--records",
            str(args.records),
            "--partitions",
            str(args.partitions),
            "--reps",
            str(args.reps),
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            print(proc.stdout[-3000:], proc.stderr[-5000:], file=sys.stderr)
            return 1
        results.append(json.loads(line[0][7:]))
    n = gen["records"]
    print(f"\n{'':34}" + "".join(f"{'local[' + str(r['cores']) + ']':>16}" for r in results))

    def row(label, key, rate=True):
        cells = []
        for r in results:
            v = r[key]
            cells.append(f"{v:7.2f} s" + (f" {n / v / 1e6:4.2f}M/s" if rate else "       "))
        print(f"{label:34}" + "".join(f"{c:>16}" for c in cells))

    row("kafkalog read -> noop", "read_kafkalog_noop_s")
    row("parquet read -> noop", "read_parquet_noop_s")
    print(
        f"{'  ratio kafkalog/parquet':34}"
        + "".join(
            f"{r['read_kafkalog_noop_s'] / r['read_parquet_noop_s']:>15.2f}x" for r in results
        )
    )
    row("kafkalog count()", "count_kafkalog_s")
    row("parquet count() (footers only)", "count_parquet_s", rate=False)
    row("1% offset range, pushdown on", "pushdown_on_s", rate=False)
    row("1% offset range, pushdown off", "pushdown_off_s", rate=False)
    row("1% offset range, parquet", "pushdown_parquet_s", rate=False)
    row("write parquet (cached input)", "write_parquet_s")
    row("kafkalog.spark.write (shuffle+sort)", "write_kafkalog_helper_s")
    row("kafkalog plain write (no shuffle)", "write_kafkalog_plain_s")
    print(
        f"{'tasks kafkalog / parquet':34}"
        + "".join(
            f"{str(r['kafkalog_tasks']) + ' / ' + str(r['parquet_tasks']):>16}" for r in results
        )
    )
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(
            f"\nscaling {a['cores']} -> {b['cores']} cores, kafkalog read: "
            f"{a['read_kafkalog_noop_s'] / b['read_kafkalog_noop_s']:.2f}x; parquet read: "
            f"{a['read_parquet_noop_s'] / b['read_parquet_noop_s']:.2f}x"
        )
    if args.json:
        print(json.dumps({"generate": gen, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
