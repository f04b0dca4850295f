"""CRC-32C kernels against the ``crc32c`` package, and validate() against one CRC call.

``python bench/crc_ratio.py [RECORDS]`` prints the CPU (model, the flags the kernels look for,
the load), then GB/s of every CRC-32C kernel this CPU runs (``kafkalog._crc._paths()``, called
by name; the one ``crc32c`` uses is marked), of kafkalog's ``crc32c`` and of ``crc32c.crc32c``
at 1 KiB, 64 KiB, 1 MiB, 16 MiB and
64 MiB, then ``MemoryRecords(buf).validate()`` over a buffer of ~16 KiB v2 batches (RECORDS
records, default 200k: ~25 MB) as a ratio to one ``crc32c.crc32c`` call over the same bytes
(above 1.0: validating is faster than that one call).

Times are the thread's CPU time (steadier than wall time on a shared machine); each figure is
the fastest of 7 rounds, the kernels (and validate and the package) interleaved within each
round, so that every figure is the code's cost with the least interference from other work on
the machine (medians here drift by tens of per cent between runs); each round repeats the call
until it has covered at least 32 MiB (at least once)."""
from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crc32c
from conftest import build_log, make_records

import kafkalog
from kafkalog import _speedups

SIZES = [(1 << 10, "1 KiB"), (1 << 16, "64 KiB"), (1 << 20, "1 MiB"), (1 << 24, "16 MiB"),
         (1 << 26, "64 MiB")]
FLAGS = ("sse4_2", "pclmulqdq", "avx", "avx2", "vpclmulqdq", "avx512f", "avx512vl", "crc32")
RUNS = 7
COVER = 32 << 20


def cpu_description() -> str:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model in (platform.processor(), platform.machine()):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    have = " ".join(f for f in FLAGS if f in flags) or "(flags unknown)"
    return f"{model}; {os.cpu_count()} CPUs; flags: {have}"


def once(f, data, reps: int) -> int:
    """Thread CPU time (ns) of ``reps`` calls of ``f(data)``."""
    t = time.thread_time_ns()
    for _ in range(reps):
        f(data)
    return max(time.thread_time_ns() - t, 1)


def kernels_table() -> None:
    crc = _speedups.crc
    paths = getattr(crc, "_paths", lambda: ())()
    best = getattr(crc, "_KERNEL", None)
    fns = {
        (f"{p}*" if p == best else p): (lambda d, _p=p: crc._crc32c_path(_p, d)) for p in paths
    }
    fns["crc32c()"] = crc.crc32c  # the public call: the kernel in use, no name lookup
    fns["crc32c package"] = crc32c.crc32c
    print(f"kafkalog {_speedups.IMPLEMENTATION}; kernel in use: {best or 'n/a'} (marked *); "
          f"folding from {getattr(crc, '_FOLD_MIN', 0)} bytes")
    print("GB/s".ljust(10) + "".join(name.rjust(16) for name in fns))
    rnd = random.Random(37)
    for n, label in SIZES:
        data = rnd.randbytes(n)
        reps = max(1, COVER // n)
        line = label.ljust(10)
        best: dict = {}
        for _ in range(RUNS):  # every kernel once a round: all see the same machine
            for name, f in fns.items():
                r = 1 if (name == "table" and n > (1 << 20)) else reps
                t = once(f, data, r)
                rate = len(data) * r / t  # bytes per ns == GB/s
                best[name] = max(best.get(name, 0.0), rate)
        got = best
        for name in fns:
            line += f"{got[name]:16.2f}"
        line += f"   crc32c()/package {got['crc32c()'] / got['crc32c package']:.2f}"
        print(line)


def validate_ratio(n_records: int) -> None:
    buf = build_log(make_records(n_records))
    mr = kafkalog.MemoryRecords
    ratios = []
    print(f"validate: {len(buf)} bytes of ~16 KiB v2 batches ({n_records} records)")
    for _ in range(3):
        tv, tc = [], []
        for _ in range(RUNS):  # interleaved, so both see the same machine
            t = time.thread_time_ns()
            mr(buf).validate()
            tv.append(time.thread_time_ns() - t)
            t = time.thread_time_ns()
            crc32c.crc32c(buf)
            tc.append(time.thread_time_ns() - t)
        v, c = min(tv), min(tc)
        ratios.append(c / v)
        print(f"  validate {len(buf) / v:6.2f} GB/s   crc32c package {len(buf) / c:6.2f} GB/s"
              f"   ratio {c / v:.2f}")
    print(f"median ratio validate / one crc32c call: {statistics.median(ratios):.2f}")


def main() -> None:
    n_records = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    print(cpu_description())
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    kernels_table()
    validate_ratio(n_records)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
