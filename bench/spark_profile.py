"""Where a Spark read of a kafkalog log root spends its time (bench only, a script).

::

    python bench/spark_profile.py --dir /tmp/kafkalog-spark-bench [--layout eight]
                                  [--codec none] [--cores 2] [--reps 3]

Reads the log root and Parquet copy that ``spark_bench.py --ratio`` generated
(``<dir>/ratio-<layout>-<codec>/``), ``select(key, value, offset, timestamp)`` -> noop, in a
``local[N]`` session, four ways, alternately, best of ``--reps``:

* ``kafkalog``: the source as users get it;
* ``profiled``: the same source under ``cProfile`` in each Python worker: every task's
  generator is profiled from its first batch to its last, *including* what PySpark's worker
  does with each batch between two of them (schema check, Arrow IPC to the JVM), so the merged
  profile is the whole Python side of the read; its time goes into buckets by the package of
  each function (kafkalog, pyarrow, pyspark, the rest);
* ``floor``: ``spark_floor.py``'s source (the same rows pre-built in the worker's memory);
* ``parquet``: ``spark.read.parquet`` of the same rows.

It also times, in each worker, the wall time of every task's generator without a profiler
(``timed``): Python busy time against the job's wall time shows how much of a read is the
Python worker and how much is the JVM (task start, Arrow -> rows, the noop sink).
"""
from __future__ import annotations

import argparse
import cProfile
import glob
import json
import os
import pstats
import sys
import tempfile
import time
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


from kafkalog.spark._source import KafkaLogDataSource, KafkaLogReader  # noqa: E402


class _ProfiledReader(KafkaLogReader):
    """kafkalog's batch reader, each task profiled (``mode=profile``) or timed (``mode=time``)
    into ``out``: one file per task."""

    def __init__(self, options, schema, out: str, mode: str) -> None:
        super().__init__(options, schema)
        self.out, self.mode = out, mode

    def read(self, partition) -> Iterator[Any]:
        inner = super().read(partition)
        out, mode = self.out, self.mode
        name = os.path.join(out, f"task-{os.getpid()}-{time.monotonic_ns()}")

        def gen():
            prof = cProfile.Profile() if mode == "profile" else None
            t0, c0 = time.perf_counter(), time.process_time()
            rows = 0
            if prof is not None:
                prof.enable()
            try:
                for rb in inner:
                    rows += rb.num_rows
                    yield rb  # PySpark's worker runs here, under the same profiler
            finally:
                if prof is not None:
                    prof.disable()
                    prof.dump_stats(name + ".prof")
                with open(name + ".json", "w") as f:
                    json.dump({"busy_s": time.perf_counter() - t0,
                               "cpu_s": time.process_time() - c0, "rows": rows}, f)

        return gen()


class ProfiledSource(KafkaLogDataSource):
    @classmethod
    def name(cls) -> str:
        return "kafkalog_profiled"

    def reader(self, schema):
        o = {str(k).lower(): v for k, v in dict(self.options).items()}
        opts = {k: v for k, v in dict(self.options).items()
                if str(k).lower() not in ("profiledir", "profilemode")}
        return _ProfiledReader(opts, schema, o["profiledir"], o.get("profilemode", "profile"))


def bucket(filename: str) -> str:
    for key in ("kafkalog", "pyarrow", "pyspark", "py4j"):
        if f"/{key}/" in filename or filename.startswith(f"{key}/"):
            return key
    if filename.startswith("~") or filename == "":
        return "builtins"
    return "other"


def summarise(prof_files, top: int) -> dict:
    st = pstats.Stats(*prof_files)
    buckets: dict = {}
    total = 0.0
    rows = []
    for (fn, line, func), (cc, nc, tt, ct, callers) in st.stats.items():
        total += tt
        b = bucket(fn)
        if b == "builtins":  # a C function: charge it to the package of its callers
            cb = {bucket(c[0]) for c in callers} - {"builtins"}
            b = (cb.pop() if len(cb) == 1 else "mixed") + " (C calls)"
        buckets[b] = buckets.get(b, 0.0) + tt
        rows.append((tt, ct, nc, f"{os.path.basename(fn)}:{line}({func})"))
    rows.sort(reverse=True)
    return {"total_s": total, "buckets": buckets, "top": rows[:top]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="/tmp/kafkalog-spark-bench")
    p.add_argument("--layout", default="eight", choices=("one", "eight", "many"))
    p.add_argument("--codec", default="none")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession
    from spark_bench import _best_of, implementations
    from spark_floor import FloorSource

    import kafkalog
    import kafkalog.spark as ks

    d = os.path.join(args.dir, f"ratio-{args.layout}-{args.codec}")
    root, parquet = os.path.join(d, "logs"), os.path.join(d, "parquet")
    if not os.path.isdir(root):
        raise SystemExit(f"{root} does not exist: run spark_bench.py --ratio --dir {args.dir} "
                         f"--compression {args.codec} first")
    spark = (SparkSession.builder.master(f"local[{args.cores}]")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ks.register(spark)
    spark.dataSource.register(FloorSource)
    spark.dataSource.register(ProfiledSource)
    impl = implementations(spark)
    if impl["worker"] != kafkalog.IMPLEMENTATION:
        raise SystemExit(f"the Python worker runs {impl}, this process {kafkalog.IMPLEMENTATION}")
    cols = ["key", "value", "offset", "timestamp"]
    print(f"kafkalog {kafkalog.IMPLEMENTATION} ({impl['worker_path']}); {root}; "
          f"local[{args.cores}]; load before {os.getloadavg()[0]:.2f}", flush=True)

    def noop(df):
        return lambda: df().write.format("noop").mode("overwrite").save()

    def kl():
        return spark.read.format("kafkalog").load(root).select(*cols)

    tasks = kl().rdd.getNumPartitions()

    def floor():
        return (spark.read.format("kafkalog_floor").option("parquet", parquet)
                .option("splits", str(tasks)).load().select(*cols))

    def pq():
        return spark.read.parquet(parquet).select(*cols)

    work = tempfile.mkdtemp(prefix="kafkalog-profile-")

    def instrumented(mode):
        out = os.path.join(work, mode)
        os.makedirs(out, exist_ok=True)

        def df():
            return (spark.read.format("kafkalog_profiled").option("profileDir", out)
                    .option("profileMode", mode).load(root).select(*cols))

        return out, df

    narrow = "key BINARY, value BINARY, offset BIGINT, timestamp TIMESTAMP"

    def kl4():  # the columns pruned by hand (a Python source gets no column pruning)
        return spark.read.format("kafkalog").schema(narrow).load(root).select(*cols)

    def floor4():
        return (spark.read.format("kafkalog_floor").schema(narrow).option("parquet", parquet)
                .option("splits", str(tasks)).load().select(*cols))

    names = ["kafkalog", "floor", "parquet", "kafkalog, 4-column schema",
             "floor, 4-column schema"]
    best = _best_of([noop(kl), noop(floor), noop(pq), noop(kl4), noop(floor4)], args.reps,
                    warmups=2)
    tdir, timed = instrumented("time")
    t0 = time.perf_counter()
    noop(timed)()  # one run (the worker is warm): Python busy time of each task
    timed_job = time.perf_counter() - t0
    busy = [json.load(open(f)) for f in glob.glob(os.path.join(tdir, "*.json"))]
    pdir, profiled = instrumented("profile")
    t0 = time.perf_counter()
    noop(profiled)()
    prof_job = time.perf_counter() - t0
    s = summarise(glob.glob(os.path.join(pdir, "*.prof")), args.top)
    spark.stop()

    rows = sum(b["rows"] for b in busy)
    busy_s = sum(b["busy_s"] for b in busy)
    print(f"\n{tasks} tasks, {rows} rows; best of {args.reps}, the five timed in turn")
    print(f"{'':28}{'best s':>8}{'/ parquet':>10}{'/ floor':>9}")
    for i, n in enumerate(names):
        fl = best[1] if i < 3 else best[4]
        print(f"{n:28}{best[i]:8.3f}{best[i] / best[2]:9.2f}x{best[i] / fl:8.2f}x")
    cpu_s = sum(b["cpu_s"] for b in busy)
    print(f"\none timed run of kafkalog: job {timed_job:.3f} s; in the Python workers, from "
          f"each task's first batch to its last: wall {busy_s:.3f} s, CPU {cpu_s:.3f} s over "
          f"{len(busy)} tasks ({cpu_s / (timed_job * min(args.cores, len(busy))):.0%} of the "
          "job's core-seconds are Python CPU; the rest of a task's wall time the worker waits "
          "for the JVM to take its batches)")
    print(f"one profiled run: job {prof_job:.3f} s; profile total {s['total_s']:.3f} s "
          "(cProfile adds its own cost to each Python call)")
    print("\nPython worker time by package (own time, C functions charged to their callers):")
    for b, t in sorted(s["buckets"].items(), key=lambda kv: -kv[1]):
        print(f"  {b:28}{t:8.3f} s {t / s['total_s']:6.1%}")
    print(f"\ntop {args.top} functions by own time:")
    print(f"  {'own s':>8}{'cum s':>8}{'calls':>9}  function")
    for tt, ct, nc, name in s["top"]:
        print(f"  {tt:8.3f}{ct:8.3f}{nc:9d}  {name}")
    print(f"\nload after {os.getloadavg()[0]:.2f}; profiles in {pdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
