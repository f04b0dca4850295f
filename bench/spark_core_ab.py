"""A/B of the Spark source's Spark-free read path (plan + read_split) between two source trees.

::

    python bench/spark_core_ab.py --before /tmp/before/src --after src \\
        [--records 400000] [--partitions 8] [--small-partitions 100] [--reps 5]

Writes a log root of ``--records`` records over ``--partitions`` partitions, and one of the
same records over ``--small-partitions`` partitions (planning cost dominates there), then times
``plan()`` and ``read_split()`` of every split (columns key, value, offset, timestamp) in a
child process per tree and rep, alternating the trees (before, after, before, ...), and reports
the best time of each and the ratio after/before.  Both trees must have their compiled twins
in place (or set KAFKALOG_PURE_PYTHON=1 for the pure ones).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from kafkalog.spark import _options, _planning, _tasks
    import pyarrow as pa

    root = sys.argv[1]
    opts = _options.ReadOptions.parse({"path": root, "maxPartitionBytes": str(4 << 20)},
                                      default_parallelism=2)
    schema = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                        pa.field("offset", pa.int64()),
                        pa.field("timestamp", pa.timestamp("us", tz="UTC"))])
    t0 = time.perf_counter()
    splits = _planning.plan(opts)
    t1 = time.perf_counter()
    rows = 0
    for s in splits:
        for rb in _tasks.read_split(s, opts, schema):
            rows += rb.num_rows
    t2 = time.perf_counter()
    print(json.dumps({"plan": t1 - t0, "read": t2 - t1, "rows": rows, "splits": len(splits)}))
    """
)


def _make_root(path: str, records: int, partitions: int, src: str) -> None:
    code = textwrap.dedent(
        """
        import sys
        from kafkalog import Log, MemoryRecordsBuilder
        root, n, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        per = n // parts
        for p in range(parts):
            log = Log.open(f"{root}/bench-{p}", {"segment.bytes": 1 << 20})
            for b in range(0, per, 500):
                mb = MemoryRecordsBuilder(2, "none", log.log_end_offset, "create_time")
                for i in range(min(500, per - b)):
                    mb.append(1_700_000_000_000 + b + i, b"k%015d" % (b + i), b"v" * 100)
                log.append_as_follower(mb.build())
            log.close()
        """
    )
    subprocess.run([sys.executable, "-c", code, path, str(records), str(partitions)],
                   check=True, env=dict(os.environ, PYTHONPATH=src))


def _run(src: str, root: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, root], check=True, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=src))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--small-partitions", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    before, after = os.path.abspath(a.before), os.path.abspath(a.after)
    with tempfile.TemporaryDirectory() as tmp:
        cases = {
            f"{a.partitions} partitions": os.path.join(tmp, "few"),
            f"{a.small_partitions} partitions": os.path.join(tmp, "many"),
        }
        _make_root(cases[f"{a.partitions} partitions"], a.records, a.partitions, after)
        _make_root(cases[f"{a.small_partitions} partitions"], a.records, a.small_partitions,
                   after)
        result = {}
        for name, root in cases.items():
            best = {"before": {}, "after": {}}
            rows = set()
            for _ in range(a.reps):
                for label, src in (("before", before), ("after", after)):
                    r = _run(src, root)
                    rows.add(r["rows"])
                    for k in ("plan", "read"):
                        best[label][k] = min(best[label].get(k, 1e9), r[k])
            assert len(rows) == 1, f"the trees read different row counts: {rows}"
            for label in best:
                best[label]["total"] = best[label]["plan"] + best[label]["read"]
            ratio = {k: best["after"][k] / best["before"][k] for k in ("plan", "read", "total")}
            result[name] = {"rows": rows.pop(), **best, "ratio": ratio}
            print(f"{name}: rows {result[name]['rows']}")
            for k in ("plan", "read", "total"):
                print(f"  {k:6s} before {best['before'][k]:.3f}s  after {best['after'][k]:.3f}s"
                      f"  after/before {ratio[k]:.2f}x")
        print(json.dumps(result))


if __name__ == "__main__":
    main()
