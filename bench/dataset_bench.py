"""kafkalog.dataset and kafkalog.polars against Parquet of the same records, in one run.

    python bench/dataset_bench.py duckdb     [--records N] [--reps R]   # aggregate vs Parquet
    python bench/dataset_bench.py selective  [--records N] [--reps R]   # pushed filters vs a scan
    python bench/dataset_bench.py memory     [--records N]              # peak RSS, streaming
    python bench/dataset_bench.py polars     [--records N] [--reps R]   # scan_kafka_log vs Parquet
    python bench/dataset_bench.py all ...

The log (8 partitions of one topic, 16-byte keys, 100-byte random values, one header, 1 ms
between records, 16 KiB batches: a producer's default batch.size) and the same
records as Parquet (pyarrow, zstd, one file per partition, the dataset's schema) are written
once under --dir and reused.  Each timing is the best of --reps runs, kafkalog and Parquet
alternating; ratios compare figures of the same run.  Memory is measured in child processes: the
peak resident set during the query (VmHWM, reset through /proc/self/clear_refs once the
imports and the dataset's listing are done; ru_maxrss would carry the parent's peak across
exec) minus the resident set at that point.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1_700_000_000_000
PARTITIONS = 8


def generate(d: str, records: int) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import kafkalog.arrow as ka
    from kafkalog.storage.log import Log

    marker = os.path.join(d, "generated.json")
    if os.path.exists(marker):
        with open(marker) as f:
            info = json.load(f)
        if info["records"] == records:
            return info
    shutil.rmtree(d, ignore_errors=True)
    root, parquet = os.path.join(d, "root"), os.path.join(d, "parquet")
    os.makedirs(root)
    os.makedirs(parquet)
    per = records // PARTITIONS
    pool = os.urandom(1 << 20)
    t0 = time.time()
    for p in range(PARTITIONS):
        path = os.path.join(root, f"events-{p}")
        with Log.open(path, {"max.message.bytes": 1 << 30}) as log:
            for start in range(0, per, 250_000):
                idx = range(start, min(per, start + 250_000))
                n = len(idx)
                t = pa.table({
                    "key": pa.array([b"user-%011d" % (i * 7919 % 10_000_000) for i in idx]),
                    "value": pa.array([pool[(i * 97) % 1_000_000:(i * 97) % 1_000_000 + 100]
                                       for i in idx], pa.binary()),
                    "timestamp": pa.array([T0 + i for i in idx], pa.int64()),
                    "headers": pa.array([[{"key": "h1", "value": b"x"}]] * n, pa.list_(
                        pa.struct([("key", pa.string()), ("value", pa.binary())]))),
                })
                data = memoryview(ka.from_arrow(t, base_offset=log.log_end_offset,
                                                batch_bytes=16 << 10))
                pos = 0
                while pos < len(data):
                    size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
                    log.append_as_follower(data[pos:pos + size])
                    pos += size
        import kafkalog

        tbl = kafkalog.dataset(path).to_table()
        pq.write_table(tbl, os.path.join(parquet, f"part-{p}.parquet"), compression="zstd")
    log_bytes = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(root)
                    for f in fs if f.endswith(".log"))
    pq_bytes = sum(os.path.getsize(os.path.join(parquet, f)) for f in os.listdir(parquet))
    info = {"records": records, "per_partition": per, "log_bytes": log_bytes,
            "parquet_bytes": pq_bytes, "generate_s": round(time.time() - t0, 1)}
    with open(marker, "w") as f:
        json.dump(info, f)
    return info


def best(fns, reps: int):
    """Best time of each function, run alternately ``reps`` times after one warm-up each."""
    out = [float("inf")] * len(fns)
    results = [None] * len(fns)
    for i, fn in enumerate(fns):
        results[i] = fn()
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            results[i] = fn()
            out[i] = min(out[i], time.perf_counter() - t)
    return out, results


def _ts(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S.%f+00")


def load() -> str:
    return os.getloadavg().__repr__()


# -- DuckDB: an aggregate over the dataset against Parquet -------------------------------------
def bench_duckdb(d: str, info: dict, reps: int) -> None:
    import duckdb

    import kafkalog

    per = info["per_partition"]
    ds = kafkalog.dataset(os.path.join(d, "root"))  # noqa: F841 - DuckDB finds it by name
    pq_glob = os.path.join(d, "parquet", "*.parquet")
    windows = {"all of it": (T0, T0 + per), "the middle half": (T0 + per // 4, T0 + 3 * per // 4)}
    for threads in (1, 2):
        con = duckdb.connect(config={"threads": threads})
        con.register("ds", ds)
        for name, (lo, hi) in windows.items():
            where = f"where timestamp between TIMESTAMPTZ '{_ts(lo)}' and TIMESTAMPTZ '{_ts(hi)}'"
            q_kl = ("select partition, count(*), sum(octet_length(value)) from ds "
                    f"{where} group by partition order by partition")
            q_pq = q_kl.replace("from ds", f"from read_parquet('{pq_glob}')")
            (t_kl, t_pq), (r_kl, r_pq) = best([lambda: con.sql(q_kl).fetchall(),
                                               lambda: con.sql(q_pq).fetchall()], reps)
            assert r_kl == r_pq, (r_kl, r_pq)
            print(f"duckdb threads={threads} timestamp window={name}: kafkalog.dataset "
                  f"{t_kl:.3f} s, Parquet (zstd) {t_pq:.3f} s, ratio {t_kl / t_pq:.2f}x "
                  f"(goal <= 1.5x); {sum(r[1] for r in r_kl)} rows; load {load()}")
        con.close()


# -- selective filters: bytes read and time against the unfiltered scan ------------------------
def bench_selective(d: str, info: dict, reps: int) -> None:
    import duckdb

    import kafkalog
    from kafkalog.storage.log_view import LogView

    per = info["per_partition"]
    counter = {"n": 0}
    real = LogView.chunks

    def chunks(self, *args, **kwargs):
        for run in real(self, *args, **kwargs):
            counter["n"] += len(run[2])
            yield run

    LogView.chunks = chunks  # the bytes of .log runs the read model hands out
    ds = kafkalog.dataset(os.path.join(d, "root"))  # noqa: F841
    con = duckdb.connect()
    con.register("ds", ds)
    agg = "select count(*), sum(octet_length(value)) from ds"
    one = per // 100
    cases = {
        "1% of one partition's offsets (middle)":
            f"{agg} where partition = 3 and \"offset\" between {per // 2} and {per // 2 + one - 1}",
        "1% of one partition's time range (middle)":
            f"{agg} where partition = 3 and timestamp between TIMESTAMPTZ '{_ts(T0 + per // 2)}'"
            f" and TIMESTAMPTZ '{_ts(T0 + per // 2 + one - 1)}'",
        "1% of one partition's time range (the latest)":
            f"{agg} where partition = 3 and timestamp >= TIMESTAMPTZ '{_ts(T0 + per - one)}'",
    }
    counter["n"] = 0
    con.sql(agg).fetchall()
    whole = counter["n"]
    print(f"log: {info['log_bytes'] / 1e6:.0f} MB of .log files, {info['records']} records in "
          f"{PARTITIONS} partitions; an unfiltered scan reads {whole / 1e6:.0f} MB")
    for name, q in cases.items():
        counter["n"] = 0
        rows = con.sql(q).fetchall()
        read = counter["n"]
        (t_sel, t_all), _ = best([lambda q=q: con.sql(q).fetchall(),
                                  lambda: con.sql(agg).fetchall()], reps)
        print(f"{name}: {rows[0][0]} rows; read {read / 1e6:.2f} MB = "
              f"{100 * read / info['log_bytes']:.2f}% of the log (goal <= 2%); "
              f"{t_sel * 1000:.1f} ms vs unfiltered {t_all * 1000:.0f} ms = "
              f"{t_all / t_sel:.0f}x faster (goal >= 20x); load {load()}")
    LogView.chunks = real


# -- memory: a streaming aggregate's peak RSS above the interpreter's own ----------------------
_CHILD = r"""
import os, sys, json
how, root = sys.argv[1], sys.argv[2]


def status(field):  # kB, from /proc/self/status (VmHWM: the peak since exec or the last reset)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])

import pyarrow, kafkalog
if how == "duckdb":
    import duckdb
elif how == "polars":
    import polars as pl
    from kafkalog.polars import scan_kafka_log
ds = kafkalog.dataset(root)
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:  # the peak starts again from here
    f.write("5")
if how == "duckdb":
    con = duckdb.connect()
    con.register("ds", ds)
    out = con.sql("select partition, count(*), sum(octet_length(value)), max(key) from ds "
                  "group by partition").fetchall()
    n = sum(r[1] for r in out)
elif how == "polars":
    out = (scan_kafka_log(ds).group_by("partition")
           .agg(pl.len(), pl.col("value").bin.size().sum(), pl.col("key").max())
           .collect(engine="streaming"))
    n = int(out["len"].sum())
else:  # the scanner's batches, as any Arrow consumer pulls them
    n = 0
    for b in ds.scanner(columns=["key", "value", "partition"]).to_reader():
        n += b.num_rows
peak = status("VmHWM")
print("RESULT " + json.dumps({"rows": n, "base_mb": base / 1024, "peak_mb": peak / 1024}))
"""


def bench_memory(d: str, info: dict) -> None:
    root = os.path.join(d, "root")
    for how in ("reader", "duckdb", "polars"):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _CHILD, how, root], capture_output=True,
                             text=True, check=True)
        r = json.loads(out.stdout.rsplit("RESULT ", 1)[1])
        assert r["rows"] == info["records"], r
        print(f"memory, {how}: {info['log_bytes'] / 1e6:.0f} MB log, {r['rows']} rows in "
              f"{time.perf_counter() - t:.1f} s; peak RSS {r['peak_mb']:.0f} MB, "
              f"{r['peak_mb'] - r['base_mb']:.0f} MB above the interpreter's own "
              f"({r['base_mb']:.0f} MB after imports and listing; goal <= 300 MB); "
              f"load {load()}")


# -- Polars: scan_kafka_log against scan_parquet ------------------------------------------------
def bench_polars(d: str, info: dict, reps: int) -> None:
    import datetime as dt

    import polars as pl

    from kafkalog.polars import scan_kafka_log

    per = info["per_partition"]
    since = dt.datetime.fromtimestamp((T0 + per // 4) / 1000, dt.timezone.utc)
    kl = scan_kafka_log(os.path.join(d, "root"))
    pq = pl.scan_parquet(os.path.join(d, "parquet", "*.parquet"))

    def query(lf, engine):
        return (lf.filter(pl.col("timestamp") >= since).group_by("partition")
                .agg(pl.len(), pl.col("value").bin.size().sum().alias("bytes"))
                .sort("partition").collect(engine=engine))

    for engine in ("in-memory", "streaming"):
        (t_kl, t_pq), (r_kl, r_pq) = best([lambda: query(kl, engine),
                                           lambda: query(pq, engine)], reps)
        assert r_kl.equals(r_pq), (r_kl, r_pq)
        print(f"polars {engine}: scan_kafka_log {t_kl:.3f} s, scan_parquet (zstd) "
              f"{t_pq:.3f} s, ratio {t_kl / t_pq:.2f}x (goal <= 1.2x); "
              f"{int(r_kl['len'].sum())} rows; load {load()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("duckdb", "selective", "memory", "polars", "all"))
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                  "kafkalog-dataset-bench"))
    args = ap.parse_args(argv)
    info = generate(args.dir, args.records)
    print(f"records {info['records']}, log {info['log_bytes'] / 1e6:.0f} MB, Parquet "
          f"{info['parquet_bytes'] / 1e6:.0f} MB (zstd); {os.cpu_count()} CPUs, load {load()}")
    todo = ("duckdb", "selective", "memory", "polars") if args.what == "all" else (args.what,)
    for what in todo:
        if what == "duckdb":
            bench_duckdb(args.dir, info, args.reps)
        elif what == "selective":
            bench_selective(args.dir, info, args.reps)
        elif what == "memory":
            bench_memory(args.dir, info)
        else:
            bench_polars(args.dir, info, args.reps)
    print(f"ru_maxrss of this process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
