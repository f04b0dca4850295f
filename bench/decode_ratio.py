"""Decode every record to objects (offset, timestamp, key, value, headers; CRC checks off as in
aiokafka's iterator): kafkalog's compiled twin against aiokafka's compiled codec, interleaved
in one process (CPU time).  ``python bench/decode_ratio.py [RECORDS] [WORKLOAD ...]``, from the
repository root; workloads: v2-none v2-none-h2 v2-gzip v2-snappy v2-lz4 v2-zstd v1-none v1-gzip."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aiokafka.record.memory_records import MemoryRecords as AioMR  # noqa: E402
from conftest import build_log, make_records  # noqa: E402

import kafkalog  # noqa: E402

WORKLOADS = {"v2-none": (0, 2, False), "v2-none-h2": (0, 2, True), "v2-gzip": (1, 2, False),
             "v2-snappy": (2, 2, False), "v2-lz4": (3, 2, False), "v2-zstd": (4, 2, False),
             "v1-none": (0, 1, False), "v1-gzip": (1, 1, False)}


def kl_decode(buf):
    n = 0
    for batch in kafkalog.MemoryRecords(buf, check_crcs=False):
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def aio_decode(buf):
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
