"""Encode magic 0/1 messages record by record: kafkalog (MemoryRecordsBuilder.try_append) against
aiokafka's compiled LegacyRecordBatchBuilder.append, interleaved in one process (CPU time).
``python bench/encode_legacy_ratio.py [RECORDS] [MAGIC] [ROUNDS]``, run from the repository root.

The first figure keeps every built batch and joins them (about 42 MB for 300k records): on a VM
that backs fresh guest memory slowly, the page faults of that output are a large cost both
sides pay.  The second ("outputs dropped") builds the same batches and lets each go at once,
which leaves the encoders' own work."""

import statistics
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from conftest import make_records

import kafkalog

recs = make_records(int(sys.argv[1]) if len(sys.argv) > 1 else 300000)
magic = int(sys.argv[2]) if len(sys.argv) > 2 else 1
print("aiokafka builder", LegacyRecordBatchBuilder.__module__)


def _drop(batch):
    pass


def kl(keep=True):
    out = []
    off = 0
    put = out.append if keep else _drop
    B = kafkalog.MemoryRecordsBuilder
    b = B(magic, 0, 0, write_limit=16384)
    for k, v, ts, h in recs:
        if b.try_append(ts, k, v, h if magic == 2 else None) is None:
            put(b.build())
            b = B(magic, 0, off, write_limit=16384)
            b.append(ts, k, v, h if magic == 2 else None)
        off += 1
    put(b.build())
    return b"".join(out)


def aio(keep=True):
    out = []
    put = out.append if keep else _drop

    def new():
        if magic == 2:
            return DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 16384)
        return LegacyRecordBatchBuilder(magic, 0, 16384)

    b = new()
    d = 0
    for k, v, ts, h in recs:
        if (b.append(d, ts, k, v, h) if magic == 2 else b.append(d, ts, k, v)) is None:
            put(b.build())
            b = new()
            d = 0
            b.append(0, ts, k, v, h) if magic == 2 else b.append(0, ts, k, v)
        d += 1
    put(b.build())
    return b"".join(out)


kl_drop = lambda: kl(False)  # noqa: E731
aio_drop = lambda: aio(False)  # noqa: E731


def cpu(f, reps=5):
    xs = []
    for _ in range(reps):
        t = time.process_time()
        f()
        xs.append(time.process_time() - t)
    return statistics.median(xs)


rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
rs = []
ds = []
for _ in range(rounds):
    a = cpu(kl)
    b = cpu(aio)
    rs.append(b / a)
    c = cpu(kl_drop)
    d = cpu(aio_drop)
    ds.append(d / c)
    print(
        f"kafkalog {len(recs) / a / 1e6:.2f} M/s aiokafka {len(recs) / b / 1e6:.2f} M/s"
        f" ratio {b / a:.2f}  (outputs dropped: {len(recs) / c / 1e6:.2f} /"
        f" {len(recs) / d / 1e6:.2f} M/s, {d / c:.2f})"
    )
print(f"load {__import__('os').getloadavg()[0]:.2f}")
print(
    "median", round(statistics.median(rs), 3), " outputs dropped", round(statistics.median(ds), 3)
)
