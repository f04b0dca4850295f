"""The pure-Python twin against kafka-python's pure codec: decode every record (offset,
timestamp, key, value, headers; CRC checks off, as kafka-python's iterator does not check them),
interleaved in one process (the fastest of 3 rounds of 3 calls, thread CPU time).
``python bench/pure_ratio.py [RECORDS]``, from the repository root with kafkalog importable."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import build_log, make_records

os.environ["KAFKALOG_PURE_PYTHON"] = "1"
import kafkalog

assert kafkalog._speedups.IMPLEMENTATION == "python", kafkalog._speedups.IMPLEMENTATION
import kafka.record.default_records as kdr  # noqa: E402  (after the twin is chosen)
from kafka.record.memory_records import MemoryRecords as KPMR  # noqa: E402

print("kafka-python crc:", getattr(kdr, "calc_crc32c", None))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100000


def kl_decode(buf):
    n = 0
    for batch in kafkalog.MemoryRecords(buf, check_crcs=False):
        for r in batch:
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


def kp_decode(buf):
    n = 0
    mr = KPMR(buf)
    while True:
        b = mr.next_batch()
        if b is None:
            break
        for r in b:
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


def cpu(f, reps=3):
    """Fastest thread CPU time of ``reps`` calls (the machine is shared: the fastest call is the
    one with the least interference)."""
    best = None
    for _ in range(reps):
        t = time.thread_time()
        f()
        t = time.thread_time() - t
        best = t if best is None else min(best, t)
    return best


print(f"load {os.getloadavg()[0]:.2f}; {N} records; fastest of 3 rounds x 3 calls, "
      f"interleaved")
for name, codec, magic, hdr in [
    ("v2-none", 0, 2, False),
    ("v2-none-h2", 0, 2, True),
    ("v2-snappy", 2, 2, False),
    ("v1-none", 0, 1, False),
    ("v1-gzip", 1, 1, False),
    ("v2-lz4", 3, 2, False),
    ("v2-zstd", 4, 2, False),
    ("v2-gzip", 1, 2, False),
]:
    buf = build_log(make_records(N, headers=hdr), codec, magic)
    assert kl_decode(buf) == kp_decode(buf) == N
    a = b = None
    for _ in range(3):
        x = cpu(lambda: kl_decode(buf))
        y = cpu(lambda: kp_decode(buf))
        a = x if a is None else min(a, x)
        b = y if b is None else min(b, y)
    print(
        f"{name:12s} kafkalog-py {N / a / 1e3:7.0f} k/s  kafka-python {N / b / 1e3:7.0f} k/s"
        f"  ratio {b / a:.2f}"
    )
