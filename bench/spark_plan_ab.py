"""Spark planning time (``kafkalog.spark._planning.plan``: discovery, offsets, splits; no Spark)
for a log root of 8 and of 100 partitions, read_uncommitted and read_committed, in each TREE
given (a checkout whose ``src`` goes first on a child's PYTHONPATH), all in one run on the
same files.  ``python bench/spark_plan_ab.py [TREE ...]`` from the repository root; each
figure is the best of 7 plans in a fresh child process (after one warm-up plan), best again
over ``ROUNDS`` rounds (env ``KAFKALOG_BENCH_ROUNDS``, default 3) in which the trees alternate,
and the ratio is against the first tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROUNDS = int(os.environ.get("KAFKALOG_BENCH_ROUNDS", "3"))

CHILD = r"""
import json, sys, time
import kafkalog
try:
    from kafkalog.spark import _options as options, _planning as planning
except ImportError:  # a tree from before spark/_core.py was split
    from kafkalog.spark import _core as options
    planning = options
root, committed = sys.argv[1], sys.argv[2] == "1"
opts = options.ReadOptions.parse({"path": root, "kafka.isolation.level":
                                  "read_committed" if committed else "read_uncommitted"})
n = len(planning.plan(opts))
best = None
for _ in range(7):
    t = time.perf_counter()
    planning.plan(opts)
    t = time.perf_counter() - t
    best = t if best is None else min(best, t)
print(json.dumps({"splits": n, "s": best, "impl": kafkalog.IMPLEMENTATION}))
"""


def build_root(root: str, partitions: int) -> None:
    """``partitions`` partitions of topic ``t``: 3 segments each, plain batches and a committed
    and an open transaction, a producer snapshot, indexes, a log-start checkpoint."""
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.control import build_end_txn_marker
    from kafkalog.storage.log import Log

    for p in range(partitions):
        with Log.open(os.path.join(root, f"t-{p}"), {"segment.bytes": 64 * 1024}) as log:
            for i in range(120):
                txn = i % 10 == 0
                b = MemoryRecordsBuilder(producer_id=7 if txn else -1, producer_epoch=0,
                                         base_sequence=i if txn else -1, is_transactional=txn)
                for j in range(10):
                    b.append(1_700_000_000_000 + i * 10 + j, b"k%d" % j, b"v" * 100)
                log.append(b.build())
                if txn and i < 110:
                    log.append(build_end_txn_marker(True, 7, 0, 0, timestamp=1_700_000_000_000),
                               origin="coordinator")


def main() -> None:
    trees = sys.argv[1:] or ["."]
    src = os.path.abspath("src")
    sys.path.insert(0, src)
    with tempfile.TemporaryDirectory() as d:
        roots = {}
        for n in (8, 100):
            roots[n] = os.path.join(d, f"root{n}")
            build_root(roots[n], n)
        print(f"load {os.getloadavg()[0]:.2f}")
        best: dict = {}
        for _ in range(ROUNDS):  # the trees alternate, so a drift in load reaches them all
            for n, root in roots.items():
                for committed in ("0", "1"):
                    for tree in trees:
                        env = dict(os.environ)
                        env["PYTHONPATH"] = os.path.join(os.path.abspath(tree), "src")
                        out = subprocess.run([sys.executable, "-c", CHILD, root, committed],
                                             env=env, check=True, capture_output=True,
                                             text=True).stdout
                        r = json.loads(out.strip().splitlines()[-1])
                        key = (n, committed, tree)
                        if key not in best or r["s"] < best[key]["s"]:
                            best[key] = r
        print(f"load after {os.getloadavg()[0]:.2f}")
        for n in roots:
            for committed in ("0", "1"):
                base = best[(n, committed, trees[0])]["s"]
                for tree in trees:
                    r = best[(n, committed, tree)]
                    iso = "read_committed  " if committed == "1" else "read_uncommitted"
                    print(f"{n:4d} partitions {iso} {tree:24s} {r['s'] * 1000:8.1f} ms "
                          f"({r['splits']} splits, {r['impl']})  {r['s'] / base:.2f}x")


if __name__ == "__main__":
    main()
