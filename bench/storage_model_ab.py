"""A/B timing of the storage paths that the directory model touches: ``Log.open`` (a log of
many segments), ``Log.append``, ``Log.read`` and ``to_arrow(dir)``, for two source trees in one
run (alternating child processes, the median of ``--reps``), so the ratio is fair on a shared
machine.

    python bench/storage_model_ab.py --before /path/to/old/src --after src [--mb 32] [--reps 3]

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
import json, os, random, sys, tempfile, time, shutil
try:
    from kafkalog.storage.log import Log
except ImportError:  # a tree from before the storage/ layout
    from kafkalog.log import Log
from kafkalog.records import MemoryRecordsBuilder
from kafkalog.arrow import to_arrow
mb, seg_mb = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(1)
batches = []
for j in range(64):
    b = MemoryRecordsBuilder(write_limit=16384)
    i = 0
    while True:
        key = b"user-%011d" % rnd.randrange(10**7)
        val = (b"%032x" % rnd.getrandbits(128)).ljust(100, b" ")
        ts = 1_700_000_000_000 + j * 1000 + i
        if not b.has_room_for(ts, key, val):
            break
        b.append(ts, key, val)
        i += 1
    batches.append(b.build())
n = mb * 1024 * 1024 // 16384
tmp = tempfile.mkdtemp(prefix="kl-ab-")
d = os.path.join(tmp, "bench-0")
out = {}
try:
    cfg = {"segment.bytes": seg_mb * 1024 * 1024}
    log = Log.open(d, cfg)
    t = time.perf_counter()
    for k in range(n):
        log.append(batches[k % 64])
    log.flush()
    out["Log.append"] = time.perf_counter() - t
    log.close()
    t = time.perf_counter()
    for _ in range(5):
        Log.open(d, cfg, read_only=True).close()
    out["Log.open(read_only) x5"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(5):
        Log.open(d, cfg).close()
    out["Log.open(writable) x5"] = time.perf_counter() - t
    with Log.open(d, cfg, read_only=True) as log:
        end = log.log_end_offset
        t = time.perf_counter()
        for _ in range(10):
            off = 0
            while off < end:
                recs = log.read(off, 1 << 20)
                last = None
                for b in recs.batches():
                    last = b.last_offset
                off = last + 1
        out["Log.read x10"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(3):
        rows = to_arrow(d).num_rows
    out["to_arrow(dir) x3"] = time.perf_counter() - t
    out["_rows"] = rows
finally:
    shutil.rmtree(tmp)
print(json.dumps(out))
'''


def run(src: str, mb: int, seg_mb: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    r = subprocess.run([sys.executable, "-c", CHILD, str(mb), str(seg_mb)], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--mb", type=int, default=32)
    ap.add_argument("--segment-mb", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    res = {"before": [], "after": []}
    for _ in range(a.reps):
        for side in ("before", "after"):
            res[side].append(run(getattr(a, side), a.mb, a.segment_mb))
    assert res["before"][0]["_rows"] == res["after"][0]["_rows"]
    print(f"{a.mb} MiB in {a.segment_mb} MiB segments, {res['after'][0]['_rows']} records, "
          f"median of {a.reps}")
    for k in res["before"][0]:
        if k.startswith("_"):
            continue
        b = statistics.median(r[k] for r in res["before"])
        f = statistics.median(r[k] for r in res["after"])
        print(f"{k:24s} before {b:8.3f} s  after {f:8.3f} s  after/before {f / b:5.2f}")


if __name__ == "__main__":
    main()
