"""Issue 37's codec figures in one command: per workload, ns/record of

* kafkalog's compiled object decode (``MemoryRecords`` -> ``Record``; offset, timestamp, key,
  value and headers of each touched, CRC checks off as in the peers' iterators),
* ``kafkalog.arrow.to_arrow`` of the same buffer (the five columns),
* aiokafka's compiled object decode (the same touches),

and the ratios aiokafka / kafkalog for each.  ``python bench/codec_ratio.py [RECORDS [ROUNDS]]``
from the repository root (default 200k records, 5 rounds); workloads as ``bench/conftest.py``
builds them (16-byte keys, ~100-byte JSON-ish values, ~16 KiB batches).

The machine is shared and its timings drift by tens of per cent between runs: every figure is
the *fastest* CPU time (thread time) over ROUNDS rounds of 3 calls, the three sides interleaved
in each round, so a figure is the code's cost with the least interference and every ratio is
taken between figures of the same rounds.  The CPU (model, the flags the kernels look for) and
the load are printed first.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aiokafka.record.memory_records import MemoryRecords as AioMR  # noqa: E402
from conftest import build_log, make_records  # noqa: E402
from crc_ratio import cpu_description  # noqa: E402

import kafkalog  # noqa: E402
from kafkalog import arrow as kl_arrow  # noqa: E402

WORKLOADS = {"v2-none": (0, 2, False), "v2-none-h2": (0, 2, True), "v2-gzip": (1, 2, False),
             "v2-snappy": (2, 2, False), "v2-lz4": (3, 2, False), "v2-zstd": (4, 2, False),
             "v1-none": (0, 1, False), "v1-gzip": (1, 1, False)}


def kl_objects(buf):
    n = 0
    for batch in kafkalog.MemoryRecords(buf, check_crcs=False):
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def kl_columns(buf):
    return kl_arrow.to_arrow(buf, check_crcs=False).num_rows


def aio_objects(buf):
    n = 0
    mr = AioMR(buf)
    while True:
        b = mr.next_batch()
        if b is None:
            break
        for r in b:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def fastest(f, buf, calls=3):
    best = None
    for _ in range(calls):
        t = time.thread_time()
        f(buf)
        t = time.thread_time() - t
        best = t if best is None else min(best, t)
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    names = sys.argv[3:] or list(WORKLOADS)
    print(f"{cpu_description()}; load {os.getloadavg()[0]:.2f}; kafkalog "
          f"{kafkalog._speedups.IMPLEMENTATION}; {n} records, fastest of {rounds} x 3 calls")
    print(f"{'workload':11s} {'objects':>8s} {'arrow':>7s} {'aiokafka':>9s}   "
          f"{'objects/aio':>11s} {'arrow/aio':>9s}   (ns/record; ratios: aiokafka time over "
          f"kafkalog's)")
    for name in names:
        codec, magic, hdr = WORKLOADS[name]
        buf = build_log(make_records(n, headers=hdr), codec, magic)
        assert kl_objects(buf) == aio_objects(buf) == kl_columns(buf) == n
        best = {"objects": None, "arrow": None, "aio": None}
        for _ in range(rounds):
            for side, f in (("objects", kl_objects), ("arrow", kl_columns), ("aio", aio_objects)):
                t = fastest(f, buf)
                best[side] = t if best[side] is None else min(best[side], t)
        ns = {k: v / n * 1e9 for k, v in best.items()}
        print(f"{name:11s} {ns['objects']:8.1f} {ns['arrow']:7.1f} {ns['aio']:9.1f}   "
              f"{ns['aio'] / ns['objects']:11.2f} {ns['aio'] / ns['arrow']:9.2f}")


if __name__ == "__main__":
    main()
