"""A/B wall time of the directory reads that go through the storage read model
(``storage.log_view.LogView``) for two or more source trees in one run:
``to_arrow(dir)`` (codecs none and lz4), ``Log.open(read_only=True)``, an offset-ranged
``to_arrow`` (1000 offsets from the middle), ``to_arrow(root)`` of a log root of 8
partitions, and ``to_arrow(dir)`` of a partition with a gap of 5 offsets after every batch (as
compaction leaves them).

    python bench/read_model_ab.py [RECORDS] TREE [TREE ...]

RECORDS (default 1M; the peerbench shape of ``conftest.py``, ~126 MB uncompressed) are written
once with this checkout's kafkalog ``Log`` (real indexes and checkpoints): a partition of 4
segments per codec, and a root of 8 partitions of 2 segments each holding the same records.
Each TREE (a checkout; its ``src`` goes first on the children's PYTHONPATH) is timed in child
processes, the trees alternating, ``ROUNDS`` rounds (env ``KAFKALOG_BENCH_ROUNDS``, default
3) of best-of-7 calls each; the figure is the best over the rounds and every ratio is to the
first TREE, measured in the same run.  The load average is printed before and after: on a
shared machine compare ratios of one run, and repeat runs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from conftest import build_log, make_records  # noqa: E402

ROUNDS = int(os.environ.get("KAFKALOG_BENCH_ROUNDS", "3"))
REPS = 7

# Written with this checkout's Log: one partition per codec, and a log root of 8 partitions.
WRITER = r'''
import json, sys
import kafkalog
from kafkalog.storage.log import Log
spec = json.loads(sys.argv[1])
buf = open(spec["data"], "rb").read()
mv = memoryview(buf)
with Log.open(spec["dir"], config={"segment.bytes": spec["segment_bytes"]}) as log:
    p = 0
    while p < len(buf):
        n = 12 + int.from_bytes(buf[p + 8:p + 12], "big")
        # as a producer sends it: base offset 0 (outside the CRC), the log assigns offsets
        log.append(kafkalog.MemoryRecords(bytes(8) + bytes(mv[p + 8:p + n])))
        p += n
'''
# The same batches as a follower appends them, every batch 5 offsets after the one before (the
# gaps compaction leaves): a scan judges each jump by the entry after it.
GAPS_WRITER = r'''
import json, sys
import kafkalog
from kafkalog.storage.log import Log
spec = json.loads(sys.argv[1])
buf = bytearray(open(spec["data"], "rb").read())
with Log.open(spec["dir"], config={"segment.bytes": spec["segment_bytes"]}) as log:
    p = off = 0
    while p < len(buf):
        n = 12 + int.from_bytes(buf[p + 8:p + 12], "big")
        count = int.from_bytes(buf[p + 57:p + 61], "big")
        b = bytearray(buf[p:p + n])
        b[0:8] = off.to_bytes(8, "big")  # outside the CRC
        log.append_as_follower(kafkalog.MemoryRecords(bytes(b)))
        off += count + 5
        p += n
'''

CHILD = r'''
import json, sys, time
import kafkalog.arrow as ka
from kafkalog.storage.log import Log
spec = json.loads(sys.argv[1])
reps = spec["reps"]
out = {}
def best(name, f):
    b = None
    for _ in range(reps):
        t = time.perf_counter()
        r = f()
        t = time.perf_counter() - t
        b = t if b is None else min(b, t)
    out[name] = [b, r]
mid = spec["records"] // 2
best("to_arrow(dir), none", lambda: ka.to_arrow(spec["none"]).num_rows)
best("to_arrow(dir), lz4", lambda: ka.to_arrow(spec["lz4"]).num_rows)
def open_close():
    log = Log.open(spec["none"], read_only=True)
    end = log.log_end_offset
    log.close()
    return end
best("Log.open(read_only)", open_close)
best("to_arrow(dir), 1000-offset range",
     lambda: ka.to_arrow(spec["none"], start_offset=mid, end_offset=mid + 1000).num_rows)
best("to_arrow(root of 8)", lambda: ka.to_arrow(spec["root"]).num_rows)
best("to_arrow(dir), gaps", lambda: ka.to_arrow(spec["gaps"]).num_rows)
print(json.dumps(out))
'''


def _env(src: str) -> dict:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    return env


def _write(d: str, data: bytes, directory: str, segments: int, writer: str = WRITER) -> None:
    path = os.path.join(d, "batches.bin")
    with open(path, "wb") as f:
        f.write(data)
    spec = {"data": path, "dir": directory, "segment_bytes": len(data) // segments + 1}
    subprocess.run([sys.executable, "-c", writer, json.dumps(spec)], check=True,
                   env=_env(os.path.join(os.path.dirname(HERE), "src")))
    os.remove(path)


def main() -> None:
    args = sys.argv[1:]
    n = int(args.pop(0)) if args and args[0].isdigit() else 1_000_000
    trees = [os.path.abspath(t) for t in args]
    if not trees:
        sys.exit(__doc__)
    records = make_records(n)
    with tempfile.TemporaryDirectory(prefix="kl-read-ab-") as d:
        spec = {"records": n, "reps": REPS}
        for codec, name in ((0, "none"), (3, "lz4")):
            spec[name] = os.path.join(d, f"{name}-0")
            _write(d, build_log(records, codec), spec[name], 4)
        spec["gaps"] = os.path.join(d, "gaps-0")
        _write(d, build_log(records, 0), spec["gaps"], 4, GAPS_WRITER)
        spec["root"] = os.path.join(d, "root")
        per = (n + 7) // 8
        for i in range(8):
            part = records[i * per:(i + 1) * per]
            if part:
                _write(d, build_log(part), os.path.join(spec["root"], f"orders-{i}"), 2)
        sizes = {k: sum(os.path.getsize(os.path.join(spec[k], f)) for f in os.listdir(spec[k])
                        if f.endswith(".log")) for k in ("none", "lz4")}
        print(f"{n} records: none {sizes['none'] / 1e6:.0f} MB, lz4 {sizes['lz4'] / 1e6:.0f} MB "
              f"(4 segments each); root of 8 partitions; {ROUNDS} rounds of best-of-{REPS}; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        res: dict = {}
        for _ in range(ROUNDS):
            for tree in trees:
                r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)],
                                   env=_env(os.path.join(tree, "src")), capture_output=True,
                                   text=True)
                if r.returncode:
                    sys.exit(f"{tree}: {r.stderr[-3000:]}")
                for op, (t, rows) in json.loads(r.stdout.strip().splitlines()[-1]).items():
                    res.setdefault(op, {}).setdefault(tree, []).append((t, rows))
        print(f"load after {os.getloadavg()[0]:.2f}")
        width = max(len(op) for op in res)
        for op, by_tree in res.items():
            base = min(t for t, _ in by_tree[trees[0]])
            rows = {tree: {r for _, r in v} for tree, v in by_tree.items()}
            if len({frozenset(v) for v in rows.values()}) != 1:
                sys.exit(f"{op}: the trees disagree: {rows}")
            cells = []
            for i, tree in enumerate(trees):
                t = min(x for x, _ in by_tree[tree])
                ratio = "" if i == 0 else f" ({t / base:.3f}x)"
                cells.append(f"{tree} {t * 1e3:8.2f} ms" + ratio)
            print(f"{op:{width}s}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
