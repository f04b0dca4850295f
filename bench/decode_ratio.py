"""Decode every record to objects (offset, timestamp, key, value, headers; CRC checks off as in
aiokafka's iterator): kafkalog's compiled twin against aiokafka's compiled codec, interleaved
in one process (CPU time).  ``python bench/decode_ratio.py [RECORDS] [WORKLOAD ...]``, from the
repository root; workloads: v2-none v2-none-h2 v2-gzip v2-snappy v2-lz4 v2-zstd v1-none v1-gzip."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from codec_ratio import WORKLOADS, aio_objects, kl_objects  # noqa: E402
from conftest import build_log, make_records  # noqa: E402

import kafkalog  # noqa: E402

# the same workloads and decode loops as codec_ratio.py (which also times to_arrow, and takes
# the fastest of interleaved rounds); this script keeps its medians and its M rec/s lines
kl_decode, aio_decode = kl_objects, aio_objects


def cpu(f, reps=5):
    xs = []
    for _ in range(reps):
        t = time.process_time()
        f()
        xs.append(time.process_time() - t)
    return statistics.median(xs)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    names = sys.argv[2:] or list(WORKLOADS)
    print(f"kafkalog {kafkalog._speedups.IMPLEMENTATION}, load {os.getloadavg()[0]:.2f}")
    for name in names:
        codec, magic, hdr = WORKLOADS[name]
        buf = build_log(make_records(n, headers=hdr), codec, magic)
        assert kl_decode(buf) == aio_decode(buf) == n
        rs = []
        for _ in range(3):
            a = cpu(lambda: kl_decode(buf))
            b = cpu(lambda: aio_decode(buf))
            rs.append(b / a)
        print(f"{name:11s} kafkalog {n / a / 1e6:5.2f} M rec/s  aiokafka {n / b / 1e6:5.2f} M rec/s"
              f"  ratio {statistics.median(rs):.2f}")


if __name__ == "__main__":
    main()
