"""A/B timing of segment appends for two source trees in one run (alternating child
processes, median of ``--reps``): ``Log.append`` of single small batches (the leader's hot
path) and ``Log.append_as_follower`` of 32-batch message sets (the path whose indexing went
from one entry per append to one per batch).

    python bench/index_per_batch_ab.py --before /path/to/old/src --after src [--reps 5]

A ``--before`` tree can be made from git: ``mkdir -p /tmp/old && git archive REV src | tar -x
-C /tmp/old`` (then copy the compiled ``.so`` files into ``/tmp/old/src/kafkalog``).
Prints one line per operation: before, after (seconds) and after/before.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys, tempfile, time, shutil
from kafkalog.storage.log import Log, LogConfig
from kafkalog.records import MemoryRecordsBuilder

def batch(base, n, ts):
    b = MemoryRecordsBuilder(base_offset=base)
    for i in range(n):
        b.append(ts + i, b"key-%06d" % i, b"v" * 100)
    return b.build()

out = {}
d = tempfile.mkdtemp()
try:
    leader = [batch(0, 1 + i % 4, 1_700_000_000_000 + i) for i in range(256)]
    with Log.open(d + "/a-0", LogConfig({"segment.bytes": 64 << 20})) as log:
        t = time.perf_counter()
        for i in range(40_000):
            log.append(leader[i & 255])
        out["Log.append (1 batch)"] = time.perf_counter() - t
    sets, off = [], 0
    for j in range(400):
        parts = []
        for k in range(32):
            parts.append(batch(off, 3, 1_700_000_000_000 + off))
            off += 3
        sets.append(b"".join(parts))
    with Log.open(d + "/f-0", LogConfig({"segment.bytes": 64 << 20})) as log:
        t = time.perf_counter()
        for s in sets:
            log.append_as_follower(s)
        out["append_as_follower (32 batches)"] = time.perf_counter() - t
finally:
    shutil.rmtree(d)
print(json.dumps(out))
'''


def run(src: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    res = {"before": [], "after": []}
    for _ in range(a.reps):
        res["before"].append(run(a.before))
        res["after"].append(run(a.after))
    for op in res["before"][0]:
        b = statistics.median(x[op] for x in res["before"])
        f = statistics.median(x[op] for x in res["after"])
        print(f"{op:34s} before {b:7.3f}s  after {f:7.3f}s  after/before {f / b:5.3f}")


if __name__ == "__main__":
    main()
