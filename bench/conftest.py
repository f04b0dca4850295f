"""Seeded workloads shared by the benchmark suites (the peerbench shape, smaller).

Records: 16-byte keys (``user-%011d``), ~100-byte JSON-ish values, non-decreasing timestamps,
closed into ~16 KiB v2 batches.  ``KAFKALOG_BENCH_RECORDS`` sets the count (default 200k).
"""
from __future__ import annotations

import os
import random

import pytest

N = int(os.environ.get("KAFKALOG_BENCH_RECORDS", "200000"))
BATCH = 16384


def make_records(n: int = N, headers: bool = False, seed: int = 20240611):
    rnd = random.Random(seed)
    ts = 1_700_000_000_000
    out = []
    hdrs = (
        [("trace-id", b"0123456789abcdef"), ("content-type", b"application/json")]
        if headers
        else []
    )
    for i in range(n):
        uid = int(rnd.paretovariate(1.2)) % 10_000_000
        key = b"user-%011d" % uid
        val = (
            b'{"id":%10d,"u":%8d,"e":"page_view","p":"/cart","c":"DE","ms":%6d,"s":"%s"}'
            % (i, uid, rnd.randrange(999999), b"x" * 8)
        ).ljust(100, b" ")[:100]
        ts += rnd.randrange(2)
        out.append((key, val, ts, hdrs))
    return out


def build_log(records, codec: int = 0, magic: int = 2) -> bytes:
    import kafkalog

    out, offset = [], 0
    b = kafkalog.MemoryRecordsBuilder(magic, codec, 0, write_limit=BATCH)
    for k, v, ts, h in records:
        if not b.has_room_for(ts, k, v, h):
            out.append(b.build())
            b = kafkalog.MemoryRecordsBuilder(magic, codec, offset, write_limit=BATCH)
        b.append(ts, k, v, h)
        offset += 1
    out.append(b.build())
    return b"".join(out)


@pytest.fixture(scope="session")
def records():
    return make_records()


@pytest.fixture(scope="session")
def logs(records):
    cache = {}

    def get(codec: int = 0, magic: int = 2) -> bytes:
        if (codec, magic) not in cache:
            cache[codec, magic] = build_log(records, codec, magic)
        return cache[codec, magic]

    return get
