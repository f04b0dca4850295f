"""validate() against one CRC-32C call over the whole buffer, measured interleaved in one
process (CPU time, median of 7 per round, 3 rounds): the physical reference for validation is
the checksum itself.  ``python bench/validate_ratio.py [RECORDS]`` (default 1M records, ~126 MB of
~16 KiB v2 batches, the peerbench shape)."""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crc32c  # noqa: E402
from conftest import build_log, make_records  # noqa: E402

import kafkalog  # noqa: E402
from kafkalog import _speedups  # noqa: E402


def cpu(f, reps=7):
    xs = []
    for _ in range(reps):
        t = time.process_time()
        f()
        xs.append(time.process_time() - t)
    return statistics.median(xs)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    buf = build_log(make_records(n))
    own = _speedups.crc.crc32c
    print(f"{len(buf)} bytes, kafkalog {_speedups.IMPLEMENTATION}, load {os.getloadavg()[0]:.2f}")
    refs = {"kafkalog crc32c (whole buffer)": own, "crc32c package (whole buffer)": crc32c.crc32c}
    ratios = {k: [] for k in refs}
    for _ in range(3):
        tv = cpu(lambda: kafkalog.MemoryRecords(buf).validate())
        line = [f"validate {len(buf) / tv / 1e9:6.2f} GB/s"]
        for name, f in refs.items():
            tc = cpu(lambda: f(buf))
            ratios[name].append(tc / tv)
            line.append(f"{name} {len(buf) / tc / 1e9:6.2f} GB/s (ratio {tc / tv:.2f})")
        print("  ".join(line))
    for name, r in ratios.items():
        print(f"median ratio validate / {name}: {statistics.median(r):.2f}")


if __name__ == "__main__":
    main()
