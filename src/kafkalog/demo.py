"""The main job: write a sample Kafka log directory, dump and verify it, then read it with Spark.

::

    python -m kafkalog.demo [--out DIR] [--records N] [--no-spark]

1. Generates a log-dir root under ``DIR/logs`` with :class:`kafkalog.storage.log.Log`: several
   topics and partitions, every codec (none, gzip, snappy, lz4, zstd), legacy magic v0 and v1
   segments followed by v2 ones, LogAppendTime batches, transactions (committed and aborted, with
   their control markers), headers, null keys and tombstones, and segments rolled small so that
   each partition has several.
2. Prints a short dump of one partition (``kafkalog dump``), per-partition statistics
   (``kafkalog stats``) and the result of ``kafkalog verify``.
3. Starts a local Spark session (``local[2]``), reads the root through the ``kafkalog`` data
   source, writes it to Parquet under ``DIR/parquet`` and prints the record count per
   topic/partition, checked against a direct decode with :mod:`kafkalog.arrow`.  It also writes
   the DataFrame back as a log directory (``DIR/rewritten``, zstd) and verifies that.

The Spark step needs ``pip install "kafkalog[spark]"`` and Java 17+; with ``--no-spark``, or
when either is missing, it says so and stops after step 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

BASE_TS = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _codec_available(codec: str) -> bool:
    from . import MemoryRecordsBuilder

    if codec == "none":
        return True
    try:
        b = MemoryRecordsBuilder(compression_type=codec)
        b.append(0, b"k", b"v")
        b.build()
        return True
    except Exception:
        return False


# ------------------------------------------------------------------------------------------------
# Sample log generation
# ------------------------------------------------------------------------------------------------
class _Writer:
    """Appends batches to one partition log with explicit offsets (append_as_follower), so
    legacy and control batches are stored as built."""

    def __init__(self, root: str, topic: str, partition: int, segment_bytes: int) -> None:
        from .storage.log import Log

        self.log = Log.open(
            os.path.join(root, f"{topic}-{partition}"),
            {"segment.bytes": segment_bytes, "max.message.bytes": 16 * 1024 * 1024},
        )
        self.records = 0

    @property
    def next_offset(self) -> int:
        return self.log.log_end_offset

    def append(self, data: bytes, records: int) -> None:
        # one log entry per append, as a leader appends produce requests one batch at a time
        # (segments then roll between batches, as a broker's do)
        pos = 0
        while pos + 12 <= len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
            self.log.append_as_follower(data[pos : pos + size])
            pos += size
        self.records += records

    def close(self) -> None:
        self.log.close()


def _value(rng: random.Random, i: int, size: int) -> bytes:
    body = '{"id":%d,"amount":%d.%02d,"note":"' % (i, rng.randrange(1000), rng.randrange(100))
    pad = size - len(body) - 2
    return (body + "x" * max(0, pad) + '"}').encode()


def generate(
    root: str,
    records: int = 50_000,
    *,
    seed: int = 42,
    segment_bytes: int = 256 * 1024,
    codecs: Optional[Sequence[str]] = None,
    value_bytes: int = 100,
) -> Dict[Tuple[str, int], int]:
    """Write the sample log-dir root; returns ``{(topic, partition): records written}``
    (data records, control markers excluded).  Codecs whose library is missing are replaced
    by gzip."""
    from . import MemoryRecordsBuilder
    from .control import build_end_txn_marker

    rng = random.Random(seed)
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    avail = [c for c in (codecs or CODECS) if _codec_available(c)]

    def codec(c: str) -> str:
        return c if c in avail else "gzip"

    # share of the records per partition
    layout = [
        ("orders", 0, "none"),
        ("orders", 1, "gzip"),
        ("orders", 2, "snappy"),
        ("events", 0, "lz4"),
        ("events", 1, "zstd"),
        ("legacy", 0, "v0"),
        ("legacy", 1, "v1"),
        ("payments", 0, "txn"),
    ]
    per = max(20, records // len(layout))
    counts: Dict[Tuple[str, int], int] = {}
    ts = BASE_TS
    for topic, partition, kind in layout:
        w = _Writer(root, topic, partition, segment_bytes)
        n = per
        i = 0
        if kind in ("v0", "v1"):
            # legacy messages first (as an old broker wrote them), then v2 after the upgrade
            magic = 0 if kind == "v0" else 1
            legacy_n = n * 2 // 3
            wrappers = (
                ["none", codec("gzip")] if magic == 0 else [codec("snappy"), codec("lz4"), "none"]
            )
            while i < legacy_n:
                c = wrappers[(i // 25) % len(wrappers)]
                b = MemoryRecordsBuilder(magic=magic, compression_type=c, base_offset=w.next_offset)
                k = min(25, legacy_n - i)
                for j in range(k):
                    key = None if (i + j) % 7 == 0 else f"user-{(i + j) % 50}".encode()
                    b.append(ts + (i + j) * 10, key, _value(rng, i + j, value_bytes))
                w.append(b.build(), k)
                i += k
        while i < n:
            k = min(rng.randrange(10, 60), n - i)
            if kind == "txn":
                pid, epoch = 1000 + (i // 200) % 3, 0
                commit = (i // 100) % 3 != 1  # every third transaction is aborted
                b = MemoryRecordsBuilder(
                    2,
                    "none",
                    w.next_offset,
                    "create_time",
                    pid,
                    epoch,
                    i,
                    is_transactional=True,
                    partition_leader_epoch=0,
                )
                for j in range(k):
                    b.append(
                        ts + (i + j) * 10,
                        f"acct-{(i + j) % 20}".encode(),
                        _value(rng, i + j, value_bytes),
                        headers=[("txn", str(i // 100).encode())],
                    )
                w.append(b.build(), k)
                i += k
                if i % 100 < k or i >= n:
                    w.append(
                        build_end_txn_marker(
                            commit,
                            pid,
                            epoch,
                            0,
                            base_offset=w.next_offset,
                            timestamp=ts + i * 10,
                            partition_leader_epoch=0,
                        ),
                        0,
                    )
                continue
            c = codec(kind) if kind in CODECS else codec("zstd")
            lat = topic == "events" and (i // 60) % 4 == 3
            b = MemoryRecordsBuilder(
                2,
                c,
                w.next_offset,
                "log_append_time" if lat else "create_time",
                log_append_time=ts + i * 10 + 5 if lat else None,
                partition_leader_epoch=0,
            )
            for j in range(k):
                r = i + j
                key = None if (topic == "events" and r % 5 == 0) else f"customer-{r % 97}".encode()
                value = (
                    None if (topic == "orders" and r % 53 == 52) else _value(rng, r, value_bytes)
                )
                headers = [("source", b"demo"), ("seq", str(r).encode())] if r % 3 == 0 else []
                jitter = rng.randrange(-2000, 2000) if topic == "events" else 0
                b.append(ts + r * 10 + jitter, key, value, headers=headers)
            w.append(b.build(), k)
            i += k
        counts[(topic, partition)] = w.records
        w.close()
        ts += 7
    return counts


def direct_counts(root: str) -> Dict[Tuple[str, int], int]:
    """Records per partition as a consumer sees them (read_uncommitted), decoded with
    :mod:`kafkalog.arrow` (no Spark)."""
    from . import arrow as ka
    from .storage.logdir import scan_root

    out = {}
    for p in scan_root(root).live_partitions:
        tp = p.topic_partition
        out[(tp.topic, tp.partition)] = ka.to_arrow(p.path, columns=["offset"]).num_rows
    return out


# ------------------------------------------------------------------------------------------------
# Spark step
# ------------------------------------------------------------------------------------------------
def spark_available() -> Tuple[bool, str]:
    try:
        import pyspark  # noqa: F401
        from pyspark.sql.datasource import DataSource  # noqa: F401
    except ImportError as e:
        return False, f'pyspark >= 4.0 is not installed ({e}); pip install "kafkalog[spark]"'
    java = shutil.which("java") or (
        os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        if os.environ.get("JAVA_HOME")
        else None
    )
    if not java or not os.path.exists(java):
        return False, "no Java runtime found (java on PATH or JAVA_HOME); Spark needs Java 17+"
    return True, ""


def spark_session(master: str = "local[2]", app: str = "kafkalog-demo", **conf: str):
    """A local SparkSession suitable for kafkalog (UI off, few shuffle partitions, workers on
    this interpreter)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_spark(root: str, out: str, expected: Dict[Tuple[str, int], int]) -> bool:
    import kafkalog.spark as ks

    t0 = time.time()
    spark = spark_session()
    ks.register(spark)
    print(f"spark {spark.version}: local session started in {time.time() - t0:.1f} s")
    parquet = os.path.join(out, "parquet")
    t1 = time.time()
    df = spark.read.format("kafkalog").option("includeHeaders", "true").load(root)
    df.write.mode("overwrite").parquet(parquet)
    print(
        f"read {root} with the kafkalog data source and wrote Parquet to {parquet} "
        f"in {time.time() - t1:.1f} s"
    )
    rows = (
        spark.read.parquet(parquet)
        .groupBy("topic", "partition")
        .count()
        .orderBy("topic", "partition")
        .collect()
    )
    ok = True
    print("records: counted by Spark from the Parquet copy; direct: decoded straight from the "
          "log files with kafkalog.arrow (no Spark) - the two must agree")
    print(f"{'topic':<10} {'partition':>9} {'records':>9} {'direct':>9}")
    for r in rows:
        exp = expected.get((r["topic"], r["partition"]))
        mark = "" if exp == r["count"] else "   MISMATCH"
        ok &= exp == r["count"]
        print(
            f"{r['topic']:<10} {r['partition']:>9} {r['count']:>9} "
            f"{exp if exp is not None else '-':>9}{mark}"
        )
    total = sum(r["count"] for r in rows)
    print(f"{'total':<10} {'':>9} {total:>9} {sum(expected.values()):>9}")
    if len(rows) != len(expected):
        ok = False
        print("MISMATCH: partitions differ")
    committed = (
        spark.read.format("kafkalog")
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", "payments")
        .load(root)
        .count()
    )
    print(
        f"payments read_committed: {committed} records (read_uncommitted: "
        f"{expected.get(('payments', 0))})"
    )
    # and back: Parquet -> Kafka log directories (offsets, timestamps, headers preserved)
    rewritten = os.path.join(out, "rewritten")
    shutil.rmtree(rewritten, ignore_errors=True)
    t2 = time.time()
    ks.write(spark.read.parquet(parquet), rewritten, mode="overwrite", compression="zstd")
    print(
        f"wrote the Parquet data back as Kafka log directories (zstd) to {rewritten} "
        f"in {time.time() - t2:.1f} s"
    )
    again = direct_counts(rewritten)
    if again != expected:
        ok = False
        print(f"MISMATCH after the round trip: {again}")
    else:
        print("round trip: the rewritten log holds the same records per partition")
    rc = _cli(["verify", "--quiet", rewritten])
    ok &= rc == 0
    spark.stop()
    return ok


# ------------------------------------------------------------------------------------------------
def _cli(argv: List[str], max_lines: Optional[int] = None) -> int:
    try:
        from .tools import cli
    except ImportError:
        print(f"(kafkalog.tools.cli is not available: skipped 'kafkalog {' '.join(argv)}')")
        return 0
    err: Optional[BaseException] = None
    raw = io.BytesIO()
    buf = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", write_through=True)
    with contextlib.redirect_stdout(buf):
        try:
            rc = cli.main(argv)
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
        except Exception as e:  # a sub-command still being built: say so and go on
            rc = None
            err = e
    buf.flush()
    if rc is None:
        print(f"(kafkalog {argv[0]} failed: {type(err).__name__}: {err}; skipped)")
        return 0
    lines = raw.getvalue().decode("utf-8", "replace").splitlines()
    print(f"$ kafkalog {' '.join(argv)}")
    shown = lines if max_lines is None else lines[:max_lines]
    for line in shown:
        print("  " + line)
    if max_lines is not None and len(lines) > max_lines:
        print(f"  ... ({len(lines) - max_lines} more lines)")
    return rc or 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the demo; user errors are one line on stderr, a closed stdout (``| head``) ends it
    quietly."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader left: stop quietly, as the kafkalog command does
        from .tools.cli import silence_stdout

        silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        where = f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)
        sys.stderr.write(f"python -m kafkalog.demo: error: {where}\n")
        return 1


def _main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kafkalog.demo", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--out", default=None, help="output directory (default: a new temporary directory)"
    )
    p.add_argument(
        "--records", type=int, default=50_000, help="records to generate (default 50000)"
    )
    p.add_argument("--no-spark", action="store_true", help="skip the Spark step")
    args = p.parse_args(argv)
    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        p.error(f"--out {args.out} exists and is not a directory")
    if args.records < 1:
        p.error(f"--records must be at least 1, not {args.records}")
    import kafkalog

    out = args.out or tempfile.mkdtemp(prefix="kafkalog-demo-")
    os.makedirs(out, exist_ok=True)
    root = os.path.join(out, "logs")
    print(f"kafkalog {kafkalog.__version__} ({kafkalog.IMPLEMENTATION}); output in {out}")
    t0 = time.time()
    written = generate(root, args.records)
    print(
        f"generated {sum(written.values())} records in {len(written)} partitions under {root} "
        f"in {time.time() - t0:.1f} s"
    )
    _cli(
        ["dump", "--deep-iteration", "--max-bytes", "16384", os.path.join(root, "payments-0")],
        max_lines=12,
    )
    _cli(["stats", "--no-segments", root])
    rc = _cli(["verify", "--quiet", root])
    ok = rc == 0
    try:
        expected = direct_counts(root)
    except ImportError as e:  # no pyarrow: the columnar reader and Spark cannot run
        print(f"kafkalog.arrow step skipped: {e}")
        print("Spark step skipped (it needs pyarrow too)" if not args.no_spark
              else "Spark step skipped (--no-spark)")
        return 0 if ok else 1
    if args.no_spark:
        print("Spark step skipped (--no-spark)")
        return 0 if ok else 1
    avail, why = spark_available()
    if not avail:
        print(f"Spark step skipped: {why}")
        return 0 if ok else 1
    ok &= run_spark(root, out, expected)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
