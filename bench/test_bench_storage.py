"""Storage engine benchmarks: append throughput (with and without fsync per flush interval,
against plainly writing the same bytes with Python), read throughput, and offset/time lookup
latency in a 1 GiB segment.

    python -m pytest bench/test_bench_storage.py --benchmark-only --benchmark-group-by=group

Throughput figures (MB/s, records/s) are in each result's ``extra_info`` (``--benchmark-json``
keeps them); compare the append groups' ``kafkalog`` and ``plain-write`` rows for the ratio.
``KAFKALOG_BENCH_SEGMENT_MB`` sizes the lookup segment (default 1024 = 1 GiB, written once
to a temporary directory and deleted afterwards).
"""

from __future__ import annotations

import os
import random
import shutil
import struct

import pytest

from kafkalog._speedups import crc
from kafkalog.records import MemoryRecordsBuilder
from kafkalog.storage.log import Log
from kafkalog.storage.segment import Segment

BATCH_BYTES = 16 * 1024
BATCHES_PER_ROUND = 2048  # 32 MiB per round
FLUSH_EVERY = 64  # batches (1 MiB) between fsyncs in the "fsync" groups
SEGMENT_MB = int(os.environ.get("KAFKALOG_BENCH_SEGMENT_MB", "1024"))
BASE_TS = 1_700_000_000_000


def _client_batches(n_distinct: int = 64, size: int = BATCH_BYTES, value: int = 100):
    """Pre-built ~16 KiB v2 batches as a producer sends them (base offset 0)."""
    rnd = random.Random(1)
    out = []
    for j in range(n_distinct):
        b = MemoryRecordsBuilder(write_limit=size)
        i = 0
        while True:
            key = b"user-%011d" % rnd.randrange(10**7)
            val = (
                bytes(rnd.getrandbits(8) for _ in range(16))
                .hex()
                .encode()
                .ljust(value, b" ")[:value]
            )
            ts = BASE_TS + j * 1000 + i
            if not b.has_room_for(ts, key, val):
                break
            b.append(ts, key, val)
            i += 1
        out.append(b.build())
    return out


@pytest.fixture(scope="module")
def client_batches():
    return _client_batches()


def _records_in(batch: bytes) -> int:
    return struct.unpack_from(">i", batch, 57)[0]


class _Fresh:
    """A new empty directory per benchmark round (the previous one is removed)."""

    def __init__(self, root):
        self.root = root
        self.n = 0
        self.current = None

    def next(self):
        if self.current is not None:
            shutil.rmtree(self.current, ignore_errors=True)
        self.n += 1
        self.current = os.path.join(self.root, f"round{self.n}")
        os.makedirs(self.current)
        return self.current


def _throughput(benchmark, nbytes: int, nrecords: int) -> None:
    mean = benchmark.stats.stats.mean
    benchmark.extra_info["MB/s"] = round(nbytes / mean / 1e6, 1)
    benchmark.extra_info["records/s"] = round(nrecords / mean)
    benchmark.extra_info["bytes/round"] = nbytes


# -- append ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fsync", [False, True], ids=["no-fsync", "fsync-per-1MiB"])
def test_append_plain_write(benchmark, tmp_path, client_batches, fsync):
    """Baseline: ``f.write(batch)`` for every batch (and ``os.fsync`` every FLUSH_EVERY)."""
    benchmark.group = f"append-16KiB-{'fsync' if fsync else 'nofsync'}"
    fresh = _Fresh(str(tmp_path))
    batches = client_batches

    def setup():
        d = fresh.next()
        return (open(os.path.join(d, "plain.bin"), "wb"),), {}

    def run(f):
        n = len(batches)
        for i in range(BATCHES_PER_ROUND):
            f.write(batches[i % n])
            if fsync and i % FLUSH_EVERY == FLUSH_EVERY - 1:
                f.flush()
                os.fsync(f.fileno())
        f.flush()
        f.close()

    benchmark.pedantic(run, setup=setup, rounds=12 if fsync else 25, iterations=1)
    total = sum(len(batches[i % len(batches)]) for i in range(BATCHES_PER_ROUND))
    recs = sum(_records_in(batches[i % len(batches)]) for i in range(BATCHES_PER_ROUND))
    _throughput(benchmark, total, recs)


@pytest.mark.parametrize("fsync", [False, True], ids=["no-fsync", "fsync-per-1MiB"])
def test_append_kafkalog(benchmark, tmp_path, client_batches, fsync):
    """``Log.append`` (leader path: validation, CRC, offset assignment, index maintenance) of
    the same batches; with ``flush.messages`` set to the records of FLUSH_EVERY batches."""
    benchmark.group = f"append-16KiB-{'fsync' if fsync else 'nofsync'}"
    fresh = _Fresh(str(tmp_path))
    batches = client_batches
    per_batch = _records_in(batches[0])
    config = {"flush.messages": per_batch * FLUSH_EVERY} if fsync else {}
    logs = []

    def setup():
        while logs:
            logs.pop().close()
        log = Log.open(os.path.join(fresh.next(), "bench-0"), config)
        logs.append(log)
        return (log,), {}

    def run(log):
        append = log.append
        n = len(batches)
        for i in range(BATCHES_PER_ROUND):
            append(batches[i % n])
        log.active_segment._drain()  # count the bytes as written to the file

    benchmark.pedantic(run, setup=setup, rounds=12 if fsync else 25, iterations=1)
    while logs:
        logs.pop().close()
    total = sum(len(batches[i % len(batches)]) for i in range(BATCHES_PER_ROUND))
    recs = sum(_records_in(batches[i % len(batches)]) for i in range(BATCHES_PER_ROUND))
    _throughput(benchmark, total, recs)


def test_append_as_follower(benchmark, tmp_path, client_batches):
    """``Log.append_as_follower`` of batches whose offsets are already assigned, 1 MiB per call."""
    benchmark.group = "append-16KiB-nofsync"
    fresh = _Fresh(str(tmp_path))
    # one contiguous 32 MiB run of batches with assigned offsets, appended 64 batches per call
    chunks = []
    offset = 0
    buf = bytearray()
    for i in range(BATCHES_PER_ROUND):
        b = bytearray(client_batches[i % len(client_batches)])
        struct.pack_into(">q", b, 0, offset)
        offset += _records_in(b)
        buf += b
        if i % FLUSH_EVERY == FLUSH_EVERY - 1:
            chunks.append(bytes(buf))
            buf = bytearray()
    logs = []

    def setup():
        while logs:
            logs.pop().close()
        log = Log.open(os.path.join(fresh.next(), "bench-0"))
        logs.append(log)
        return (log,), {}

    def run(log):
        for c in chunks:
            log.append_as_follower(c)
        log.active_segment._drain()

    benchmark.pedantic(run, setup=setup, rounds=25, iterations=1)
    while logs:
        logs.pop().close()
    _throughput(benchmark, sum(map(len, chunks)), offset)


@pytest.mark.parametrize("fsync", [False, True], ids=["no-fsync", "fsync-per-1MiB"])
def test_append_ratio_interleaved(benchmark, tmp_path, client_batches, fsync):
    """The target figure: alternate plain-write rounds and ``Log.append`` rounds of the same
    bytes (so both see the same disk and page-cache conditions) and report the ratio of their
    median speeds in ``extra_info["kafkalog/plain"]`` (target: >= 0.70)."""
    import statistics
    import time

    benchmark.group = "append-16KiB-ratio"
    batches = client_batches
    per_batch = _records_in(batches[0])
    config = {"flush.messages": per_batch * FLUSH_EVERY} if fsync else {}
    fresh = _Fresh(str(tmp_path))
    plain_t, log_t = [], []

    def plain_round():
        d = fresh.next()
        with open(os.path.join(d, "plain.bin"), "wb") as f:
            t0 = time.perf_counter()
            for i in range(BATCHES_PER_ROUND):
                f.write(batches[i % len(batches)])
                if fsync and i % FLUSH_EVERY == FLUSH_EVERY - 1:
                    f.flush()
                    os.fsync(f.fileno())
            f.flush()
            plain_t.append(time.perf_counter() - t0)

    def log_round():
        d = fresh.next()
        log = Log.open(os.path.join(d, "bench-0"), config)
        append = log.append
        t0 = time.perf_counter()
        for i in range(BATCHES_PER_ROUND):
            append(batches[i % len(batches)])
        log.active_segment._drain()
        log_t.append(time.perf_counter() - t0)
        log.close()

    def pair():
        if len(plain_t) % 2:
            plain_round()
            log_round()
        else:
            log_round()
            plain_round()

    benchmark.pedantic(pair, rounds=10 if fsync else 20, iterations=1)
    ratio = statistics.median(plain_t) / statistics.median(log_t)
    nbytes = sum(len(batches[i % len(batches)]) for i in range(BATCHES_PER_ROUND))
    benchmark.extra_info["kafkalog/plain"] = round(ratio, 3)
    benchmark.extra_info["plain MB/s"] = round(nbytes / statistics.median(plain_t) / 1e6, 1)
    benchmark.extra_info["kafkalog MB/s"] = round(nbytes / statistics.median(log_t) / 1e6, 1)
    benchmark.extra_info["kafkalog records/s"] = round(
        per_batch * BATCHES_PER_ROUND / statistics.median(log_t)
    )


# -- read ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def filled_log(tmp_path_factory, client_batches):
    d = tmp_path_factory.mktemp("read") / "read-0"
    log = Log.open(d, {"segment.bytes": 64 * 1024 * 1024})
    for i in range(8192):  # 128 MiB in two segments
        log.append(client_batches[i % len(client_batches)])
    log.flush()
    yield log
    log.close()
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("max_bytes", [1 << 20, 4 << 20])
def test_read_sequential(benchmark, filled_log, max_bytes):
    """Fetch the whole log front to back, ``max_bytes`` per read (page-cache resident)."""
    benchmark.group = "read-sequential"
    log = filled_log

    def run():
        offset = log.log_start_offset
        end = log.log_end_offset
        total = 0
        while offset < end:
            records = log.read(offset, max_bytes)
            last = None
            for batch in records:  # complete batches (a fetch may end with a partial one)
                last = batch
            total += records.size_in_bytes
            offset = last.next_offset
        return total

    total = benchmark.pedantic(run, rounds=5, iterations=1)
    _throughput(benchmark, total, log.log_end_offset)


# -- lookups in a 1 GiB segment --------------------------------------------------------------------
@pytest.fixture(scope="module")
def big_segment(tmp_path_factory):
    """A ``SEGMENT_MB`` segment of ~1 KiB batches (10 records of 100 bytes), its indexes
    rebuilt by recovery as Kafka would (one offset entry per ~4 KiB)."""
    d = str(tmp_path_factory.mktemp("bigseg"))
    b = MemoryRecordsBuilder()
    for i in range(10):
        b.append(BASE_TS + i, b"key-%06d" % i, b"v" * 100)
    template = bytearray(b.build())
    size = len(template)
    target = SEGMENT_MB * 1024 * 1024
    n_batches = target // size
    path = os.path.join(d, "00000000000000000000.log")
    with open(path, "wb") as f:
        chunk = bytearray()
        for i in range(n_batches):
            struct.pack_into(">q", template, 0, i * 10)  # base offset is outside the CRC
            struct.pack_into(">qq", template, 27, BASE_TS + i * 10, BASE_TS + i * 10 + 9)
            # timestamps are inside the CRC: recompute it
            struct.pack_into(">I", template, 17, crc.crc32c(bytes(template[21:])))
            chunk += template
            if len(chunk) >= 8 << 20:
                f.write(chunk)
                chunk = bytearray()
        f.write(chunk)
    seg = Segment(d, 0)
    seg.recover()
    yield seg, n_batches * 10
    seg.close()
    shutil.rmtree(d, ignore_errors=True)


def test_offset_lookup_1gib_segment(benchmark, big_segment):
    """``Segment.translate_offset``: offset-index binary search + batch-header scan."""
    benchmark.group = "lookup-1GiB-segment"
    seg, n = big_segment
    rnd = random.Random(5)
    targets = [rnd.randrange(n) for _ in range(4096)]
    state = {"i": 0}

    def run():
        i = state["i"] = (state["i"] + 1) & 4095
        return seg.translate_offset(targets[i])

    found = benchmark(run)
    assert found is not None
    benchmark.extra_info["segment_bytes"] = seg.size
    benchmark.extra_info["index_entries"] = seg.offset_index.entries
    benchmark.extra_info["us"] = round(benchmark.stats.stats.mean * 1e6, 2)


def test_index_lookup_1gib_segment(benchmark, big_segment):
    """``OffsetIndex.lookup`` alone (the binary search over the mmap)."""
    benchmark.group = "lookup-1GiB-segment"
    seg, n = big_segment
    idx = seg.offset_index
    rnd = random.Random(6)
    targets = [rnd.randrange(n) for _ in range(4096)]
    state = {"i": 0}

    def run():
        i = state["i"] = (state["i"] + 1) & 4095
        return idx.lookup(targets[i])

    benchmark(run)
    benchmark.extra_info["us"] = round(benchmark.stats.stats.mean * 1e6, 2)


def test_timestamp_lookup_1gib_segment(benchmark, big_segment):
    """``Segment.find_offset_by_timestamp``: time index, offset index, scan, record decode."""
    benchmark.group = "lookup-1GiB-segment"
    seg, n = big_segment
    rnd = random.Random(7)
    targets = [BASE_TS + rnd.randrange(n) for _ in range(4096)]
    state = {"i": 0}

    def run():
        i = state["i"] = (state["i"] + 1) & 4095
        return seg.find_offset_by_timestamp(targets[i])

    found = benchmark(run)
    assert found is not None
    benchmark.extra_info["us"] = round(benchmark.stats.stats.mean * 1e6, 2)
