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

``--ratio`` measures only reads, ``select(key, value, offset, timestamp)`` -> noop, for three
layouts of ``--records`` records (one partition, 8 partitions, 200 partitions) and each codec
of ``--compression`` (a comma list, e.g. ``none,lz4``), in one ``local[N]`` session per core
count of ``--cores``: kafkalog against ``spark.read.parquet`` of the same rows (goal <= 1.0x),
and against the plumbing floor (``spark_floor.py``: a Python source yielding the same rows as
pre-built Arrow batches; it bounds what any Python source can do).  kafkalog is given the
columns the query uses (``option("columns", "key,value,offset,timestamp")``: a Python source
gets no column pruning from ``select``, and every column of its schema is converted to rows on
the JVM) and, for the comparison before that option, its whole schema; the floor likewise
(a four-column user schema, and the whole schema).  ``--ratio-schema columns|full`` runs one
of the two (default ``both``).  All are timed in turn in the same session (the first of each
round rotating; the session's first reads warm the JVM up), so floor/Parquet is measured too;
with two core counts the scaling of the kafkalog read is printed.  Child sessions import the
kafkalog this process imports (checked in a Python worker: figures from another build are
refused).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child_env() -> dict:
    """The environment of a child session: the kafkalog this process imports goes first on
    its PYTHONPATH (and so on its Python workers'), so every process runs the same build.  (A
    checkout's ``src`` holds the compiled twins only after ``build_ext --inplace``; putting it
    first regardless made the children of an installed, compiled kafkalog run the pure-Python
    twins and report figures no plain session reproduces.)"""
    import kafkalog

    here = os.path.dirname(os.path.dirname(os.path.abspath(kafkalog.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def implementations(spark) -> dict:
    """Which twins the driver and a Python worker of ``spark`` run (the worker decodes)."""
    import kafkalog

    def probe(_):
        import kafkalog as k

        return [(k.IMPLEMENTATION, os.path.dirname(k.__file__))]

    worker = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]
    return {"driver": kafkalog.IMPLEMENTATION, "driver_path": os.path.dirname(kafkalog.__file__),
            "worker": worker[0], "worker_path": worker[1]}


def check_same_build(results) -> None:
    """Refuse figures from children that ran another build than this process imports."""
    import kafkalog

    for r in results:
        impl = r.get("impl") or {}
        if impl.get("worker") != kafkalog.IMPLEMENTATION or impl.get("driver") != \
                kafkalog.IMPLEMENTATION:
            raise SystemExit(
                f"the child session ran kafkalog {impl} but this process imports "
                f"{kafkalog.IMPLEMENTATION} ({os.path.dirname(kafkalog.__file__)}): the figures "
                "would not be this build's")


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
    res = {"cores": cores, "spark": spark.version, "impl": implementations(spark)}

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


RATIO_LAYOUTS = (("1 large partition", "one", 1), ("8 partitions", "eight", 8),
                 ("200 small partitions", "many", 200))
RATIO_COLUMNS = ("key", "value", "offset", "timestamp")


def _ratio_schemas(args):
    """``--ratio-schema``: kafkalog (and the floor) given the query's columns (the ``columns``
    option), the source's whole schema (the comparison before the option), or both."""
    return {"columns": ("columns",), "full": ("full",), "both": ("columns", "full")}[
        args.ratio_schema]


def _layouts(args):
    """The layouts of ``--layouts`` (keys of RATIO_LAYOUTS: one, eight, many)."""
    want = args.layouts.split(",")
    unknown = set(want) - {k for _, k, _ in RATIO_LAYOUTS}
    if unknown:
        raise SystemExit(f"unknown layouts {sorted(unknown)}: one, eight, many")
    return [lay for lay in RATIO_LAYOUTS if lay[1] in want]


def ratio_child(args) -> dict:
    """read -> select(key, value, offset, timestamp) -> noop, in one ``local[N]`` session, for
    each layout and codec: kafkalog over the log root, ``spark.read.parquet`` of the same rows,
    and the plumbing floor (``spark_floor``: the same rows as pre-built Arrow batches from a
    Python source, as many tasks as kafkalog plans), timed in turn; kafkalog and the floor
    with the query's columns and/or the whole schema (``--ratio-schema``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from spark_floor import FloorSource

    import kafkalog.spark as ks

    cores = args.ratio_child
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if args.s3_endpoint:  # Spark's own S3 connector (S3A) for the Parquet side
        s3 = _s3_support()
        builder = builder.config("spark.jars", ",".join(s3.s3a_jars()))
        for k, v in s3.s3a_conf(args.s3_endpoint).items():
            builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ks.register(spark)
    spark.dataSource.register(FloorSource)
    res = {"cores": cores, "impl": implementations(spark), "cases": []}
    cols = list(RATIO_COLUMNS)
    first = True
    for codec in args.compression.split(","):
        for label, key, _n in _layouts(args):
            d = os.path.join(args.dir, f"ratio-{key}-{codec}")
            root, parquet = os.path.join(d, "logs"), os.path.join(d, "parquet")

            def kl(root=root, columns=True):
                r = spark.read.format("kafkalog")
                if columns:  # the columns the query uses: only these are converted to rows
                    r = r.option("columns", ",".join(cols))
                return r.load(root).select(*cols)

            def pq(parquet=parquet):
                return spark.read.parquet(parquet).select(*cols)

            tasks = kl().rdd.getNumPartitions()

            def floor(parquet=parquet, tasks=tasks, columns=True):
                r = spark.read.format("kafkalog_floor")
                if columns:  # the floor of a source whose schema is the query's columns
                    r = r.schema(ks.schema(columns=cols))
                return (r.option("parquet", parquet).option("splits", str(tasks)).load()
                        .select(*cols))

            def noop(df, **kw):
                return lambda: df(**kw).write.format("noop").mode("overwrite").save()

            runs = {"parquet": noop(pq)}
            for schema in _ratio_schemas(args):
                sfx = "" if schema == "columns" else "_full"
                on = schema == "columns"
                runs["kafkalog" + sfx] = noop(kl, columns=on)
                runs["floor" + sfx] = noop(floor, columns=on)
            names = sorted(runs)
            if first:  # the JVM compiles its hot paths over the first reads: warm it up
                _best_of([runs[n] for n in names], 0, warmups=3)
                first = False
            best = dict(zip(names, _best_of([runs[n] for n in names], args.reps)))
            case = {"layout": label, "codec": codec, "kafkalog_tasks": tasks,
                    "parquet_tasks": pq().rdd.getNumPartitions(), "parquet_s": best["parquet"]}
            for sfx in ("", "_full"):
                if "kafkalog" + sfx not in best:
                    continue
                kl_s, floor_s = best["kafkalog" + sfx], best["floor" + sfx]
                case.update({
                    f"kafkalog{sfx}_s": kl_s, f"floor{sfx}_s": floor_s,
                    f"kafkalog{sfx}_vs_parquet": kl_s / best["parquet"],
                    f"kafkalog{sfx}_vs_floor": kl_s / floor_s,
                    f"floor{sfx}_vs_parquet": floor_s / best["parquet"],
                })
            res["cases"].append(case)
    if args.s3_endpoint:
        codec = args.compression.split(",")[0]
        for label, key, _n in RATIO_LAYOUTS:
            if key != "eight":
                continue

            def kl_s3(key=key):
                r = spark.read.format("kafkalog")
                if "columns" in _ratio_schemas(args):
                    r = r.option("columns", ",".join(cols))
                return r.load(f"s3://{S3_BUCKET}/ratio-{key}-{codec}/logs").select(*cols)

            def pq_s3a(key=key):
                return spark.read.parquet(
                    f"s3a://{S3_BUCKET}/ratio-{key}-{codec}/parquet").select(*cols)

            def noop(df):
                return lambda: df().write.format("noop").mode("overwrite").save()

            kl_s, pq_s = _best_of([noop(kl_s3), noop(pq_s3a)], args.reps)
            res["s3"] = {"layout": label, "codec": codec, "kafkalog_s3_s": kl_s,
                         "parquet_s3a_s": pq_s, "kafkalog_tasks": kl_s3().rdd.getNumPartitions(),
                         "parquet_tasks": pq_s3a().rdd.getNumPartitions(),
                         # one more run of each, watched from the server's side
                         "kafkalog_server": _server_cost(noop(kl_s3)),
                         "parquet_server": _server_cost(noop(pq_s3a))}
    spark.stop()
    return res


S3_BUCKET = "kafkalog-bench"


def _server_cost(fn) -> dict:
    """Run ``fn`` once and say what the S3 test server did for it: its requests by kind (from
    its request log) and the CPU seconds its process spent (the server shares the cores)."""
    pid, log = os.environ.get("KAFKALOG_BENCH_S3_PID"), os.environ.get("KAFKALOG_BENCH_S3_LOG")
    if not pid or not log:
        return {}

    def cpu() -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    start, c0 = os.path.getsize(log), cpu()
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    time.sleep(0.2)  # the log's last lines
    c1 = cpu()
    with open(log, "rb") as f:
        f.seek(start)
        lines = f.read().decode("utf-8", "replace").splitlines()
    kinds: dict = {}
    for ln in lines:
        ln = re.sub(r"\x1b\[[0-9;]*m", "", ln)  # the server colours its log
        q = ln.find('"')
        if q < 0:
            continue
        parts = ln[q + 1:].split(" ")
        if len(parts) < 2:
            continue
        method, target = parts[0], parts[1]
        path = target.split("?", 1)[0]
        if method == "GET" and ("list-type" in target or "prefix=" in target
                                or path.rstrip("/").count("/") <= 1):
            kind = "LIST"
        else:
            name = path.rsplit("/", 1)[-1]
            ext = name.rsplit(".", 1)[-1] if "." in name else name
            kind = f"{method} {ext}"
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"wall_s": wall, "server_cpu_s": c1 - c0, "requests": kinds}


def _s3_support():
    """tests/remote/s3_support.py: the S3 test server (moto) and Spark's S3A jars."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "remote"))
    import s3_support

    return s3_support


def _best_of(fns, reps: int, warmups: int = 1):
    """Best of ``reps`` for each of ``fns``, run in turn (the first of each round rotates),
    after ``warmups`` runs of each, so a drift in the machine's load reaches all of them."""
    for _ in range(warmups):
        for fn in fns:
            fn()
    best = [float("inf")] * len(fns)
    for rep in range(reps):
        for k in range(len(fns)):
            i = (rep + k) % len(fns)
            t = time.perf_counter()
            fns[i]()
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def _generated(d: str, records: int, parts: int, codec: str, reuse: bool) -> dict:
    """The data of one layout in ``d``: generated, or with ``reuse`` the data an earlier run
    left there for the same records, partitions and codec (``generated.json``)."""
    mark = os.path.join(d, "generated.json")
    want = {"records": records, "partitions": parts, "codec": codec}
    if reuse and os.path.exists(mark):
        with open(mark) as f:
            got = json.load(f)
        if {k: got.get(k) for k in want} == want:
            return got
    g = generate(os.path.join(d, "logs"), os.path.join(d, "parquet"), records, parts, codec)
    g.update(want)
    with open(mark, "w") as f:
        json.dump(g, f)
    return g


def ratio_main(args, env) -> int:
    import kafkalog

    env = dict(env)
    env["PYTHONPATH"] = HERE + os.pathsep + env["PYTHONPATH"]  # spark_floor, for the workers
    gens = {}
    for codec in args.compression.split(","):
        for _label, key, parts in _layouts(args):
            d = os.path.join(args.dir, f"ratio-{key}-{codec}")
            gens[(key, codec)] = _generated(d, args.records, parts, codec, args.reuse)
    print(
        f"kafkalog {kafkalog.__version__} ({kafkalog.IMPLEMENTATION}), {os.cpu_count()} CPUs; "
        f"load before: {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    results = []
    server = None
    if args.s3 and "eight" not in args.layouts.split(","):
        raise SystemExit("--s3 reads the 8-partition layout: keep 'eight' in --layouts")
    if args.s3:  # the 8-partition layout, first codec, on an S3 test server
        s3 = _s3_support()
        server_log = os.path.join(args.dir, "s3-server.log")
        server, endpoint = s3.start_server(log_path=server_log)
        env.update(KAFKALOG_BENCH_S3_PID=str(server.pid), KAFKALOG_BENCH_S3_LOG=server_log)
        codec = args.compression.split(",")[0]
        for what in ("logs", "parquet"):
            s3.upload_tree(endpoint, os.path.join(args.dir, f"ratio-eight-{codec}", what),
                           S3_BUCKET, f"ratio-eight-{codec}/{what}")
        env.update(AWS_ACCESS_KEY_ID=s3.KEY_ID, AWS_SECRET_ACCESS_KEY=s3.SECRET,
                   AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint,
                   AWS_EC2_METADATA_DISABLED="true")
    try:
        results = _ratio_children(args, env, endpoint if server else None)
    finally:
        if server is not None:
            s3.stop_server(server)
    if results is None:
        return 1
    return _ratio_report(args, gens, results)


def _ratio_children(args, env, endpoint):
    results = []
    for cores in [int(c) for c in args.cores.split(",")]:
        cmd = [
            sys.executable, os.path.abspath(__file__), "--ratio-child", str(cores),
            "--dir", args.dir, "--reps", str(args.reps), "--compression", args.compression,
            "--layouts", args.layouts, "--ratio-schema", args.ratio_schema,
        ] + (["--s3-endpoint", endpoint] if endpoint else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            print(proc.stdout[-3000:], proc.stderr[-5000:], file=sys.stderr)
            return None
        results.append(json.loads(line[0][7:]))
    return results


def _ratio_report(args, gens, results) -> int:
    check_same_build(results)
    print(f"\nread -> select({', '.join(RATIO_COLUMNS)}) -> noop, best of {args.reps}; the "
          "sources of a row timed in turn, the first of each round rotating")
    print("(floor: a Python source yielding the same rows pre-built, spark_floor.py; where "
          "floor/pq > 1, no Python source can reach Parquet)")
    for sfx, what in (("", f'kafkalog and the floor given the query\'s columns (option '
                           f'"columns" = "{",".join(RATIO_COLUMNS)}")'),
                      ("_full", "kafkalog and the floor with the source's whole schema (7 "
                                "columns, the select prunes nothing; before the option)")):
        if not any(f"kafkalog{sfx}_s" in c for r in results for c in r["cases"]):
            continue
        print(f"\n{what}:")
        print(f"{'':26}{'codec':>6}{'cores':>6}{'records':>10}{'log MB':>8}{'kafkalog':>10}"
              f"{'parquet':>10}{'floor':>10}{'kl/pq':>8}{'kl/floor':>9}{'floor/pq':>9}"
              f"{'tasks':>7}")
        for r in results:
            for c in r["cases"]:
                key = next(k for lb, k, _ in RATIO_LAYOUTS if lb == c["layout"])
                g = gens[(key, c["codec"])]
                print(f"{c['layout']:26}{c['codec']:>6}{r['cores']:>6}{g['records']:>10}"
                      f"{g['log_bytes'] / 1e6:>8.0f}{c[f'kafkalog{sfx}_s']:>9.2f}s"
                      f"{c['parquet_s']:>9.2f}s{c[f'floor{sfx}_s']:>9.2f}s"
                      f"{c[f'kafkalog{sfx}_vs_parquet']:>7.2f}x"
                      f"{c[f'kafkalog{sfx}_vs_floor']:>8.2f}x{c[f'floor{sfx}_vs_parquet']:>8.2f}x"
                      f"{c['kafkalog_tasks']:>7}")
        cases = [c for r in results for c in r["cases"]]
        kp = [c[f"kafkalog{sfx}_vs_parquet"] for c in cases]
        kf = [c[f"kafkalog{sfx}_vs_floor"] for c in cases]
        print(f"  kl/pq {min(kp):.2f}-{max(kp):.2f}x ({sum(x <= 1.0 for x in kp)} of {len(kp)} "
              f"<= 1.0), kl/floor {min(kf):.2f}-{max(kf):.2f}x")
    for r in results:
        if "s3" in r:
            c = r["s3"]
            print(f"{c['layout']}, {c['codec']}, local[{r['cores']}], on the S3 test server: "
                  f"kafkalog s3:// {c['kafkalog_s3_s']:.2f}s, Parquet s3a:// "
                  f"{c['parquet_s3a_s']:.2f}s: {c['kafkalog_s3_s'] / c['parquet_s3a_s']:.2f}x "
                  f"(tasks {c['kafkalog_tasks']}/{c['parquet_tasks']})")
            for who in ("kafkalog", "parquet"):
                sc = c.get(f"{who}_server") or {}
                if sc:
                    reqs = ", ".join(f"{n} {k}" for k, n in sorted(sc["requests"].items()))
                    print(f"  one more {who} run: {sc['wall_s']:.2f}s; the S3 test server spent "
                          f"{sc['server_cpu_s']:.2f} CPU s on {sum(sc['requests'].values())} "
                          f"requests ({reqs})")
    if len(results) > 1:
        a, b = results[0], results[-1]
        k = "kafkalog_s" if "kafkalog_s" in a["cases"][0] else "kafkalog_full_s"
        for ca, cb in zip(a["cases"], b["cases"]):
            speedup = ca[k] / cb[k]
            print(f"scaling {a['cores']} -> {b['cores']} cores, {ca['layout']}, {ca['codec']}: "
                  f"{speedup:.2f}x ({speedup / (b['cores'] / a['cores']):.2f} of linear)")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps({"generate": {f"{k}-{c}": v for (k, c), v in gens.items()},
                          "results": results}, indent=1))
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
    p.add_argument("--s3", action="store_true",
                   help="with --ratio: also kafkalog from s3:// against Parquet from s3a:// on an "
                        "S3 test server (moto; hadoop-aws fetched with Maven)")
    p.add_argument("--layouts", default="one,eight,many",
                   help="with --ratio: which layouts (one: 1 partition, eight: 8, many: 200)")
    p.add_argument("--ratio-schema", choices=("both", "columns", "full"), default="both",
                   help="with --ratio: kafkalog (and the floor) given the query's columns "
                        "(option 'columns'), the source's whole schema (the comparison before "
                        "that option), or both, timed in turn (default)")
    p.add_argument("--reuse", action="store_true",
                   help="with --ratio: read the data an earlier run generated in --dir for the "
                        "same records, layouts and codecs instead of generating it again")
    p.add_argument("--s3-endpoint", help=argparse.SUPPRESS)
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
        return ratio_main(args, child_env())
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
    env = child_env()
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
    check_same_build(results)
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
