"""Speed-up of ``to_arrow`` on 2 buffers from 2 threads against the same 2 calls in one thread
(wall clock, best of 5), uncompressed and lz4/snappy.  The columnar decoder releases the GIL
while it walks and decompresses a buffer.

    python bench/threads_ratio.py [RECORDS]     # default 300k records per buffer
"""
from __future__ import annotations

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import build_log, make_records  # noqa: E402

from kafkalog.arrow import to_arrow  # noqa: E402

COLS = ["key", "value", "offset", "timestamp"]


def best(fn, reps=5):
    return min(_timed(fn) for _ in range(reps))


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    print(f"{n} records per buffer, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    for name, codec in (("none", 0), ("snappy", 2), ("lz4", 3)):
        bufs = [build_log(make_records(n, seed=s), codec=codec) for s in (1, 2)]

        def serial():
            for b in bufs:
                to_arrow(b, COLS)

        def threaded():
            ts = [threading.Thread(target=to_arrow, args=(b, COLS)) for b in bufs]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        s, p = best(serial), best(threaded)
        print(f"{name:7s} serial {s:.3f} s  2 threads {p:.3f} s  speed-up {s / p:.2f}x")


if __name__ == "__main__":
    main()
