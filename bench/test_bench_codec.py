"""Record-object decode, validate and encode: kafkalog against aiokafka's compiled codec and
kafka-python, in one run (read the ratios within a group; absolute times drift between runs).

    python -m pytest bench/test_bench_codec.py --benchmark-only --benchmark-group-by=group
"""
from __future__ import annotations

import pytest

import kafkalog

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _touch_kafkalog(buf):
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


def _touch_peer(mr_cls, buf):
    mr = mr_cls(buf)
    n = 0
    while mr.has_next():
        for r in mr.next_batch():
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


def _aiokafka():
    from aiokafka.record import MemoryRecords
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    if not MemoryRecords.__module__.endswith(("_crecords.memory_records", "memory_records")):
        pytest.skip("aiokafka compiled codec not available")
    return MemoryRecords, DefaultRecordBatchBuilder


def _kafka_python():
    from kafka.record import MemoryRecords
    from kafka.record.default_records import DefaultRecordBatchBuilder

    return MemoryRecords, DefaultRecordBatchBuilder


PEERS = {"aiokafka": _aiokafka, "kafka-python": _kafka_python}


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("impl", ["kafkalog", "aiokafka", "kafka-python"])
def test_decode(benchmark, logs, records, impl, codec):
    benchmark.group = f"decode v2 {codec}"
    buf = logs(CODECS[codec])
    if impl == "kafkalog":
        n = benchmark(_touch_kafkalog, buf)
    else:
        mr, _ = PEERS[impl]()
        n = benchmark(_touch_peer, mr, buf)
    assert n == len(records)
    benchmark.extra_info["records"] = n
    benchmark.extra_info["bytes"] = len(buf)


@pytest.mark.parametrize("impl", ["kafkalog", "aiokafka", "kafka-python"])
def test_validate(benchmark, logs, impl):
    benchmark.group = "validate v2 none (CRC + header)"
    buf = logs(0)
    if impl == "kafkalog":
        def run():
            n = 0
            for b in kafkalog.MemoryRecords(buf):
                b.ensure_valid()
                b.base_offset, b.last_offset_delta, b.max_timestamp, b.producer_id
                n += 1
            return n
    else:
        mr_cls, _ = PEERS[impl]()

        def run():
            mr = mr_cls(buf)
            n = 0
            while mr.has_next():
                b = mr.next_batch()
                assert b.validate_crc()
                b.base_offset, b.last_offset_delta, b.max_timestamp, b.producer_id
                n += 1
            return n

    assert benchmark(run) > 0
    benchmark.extra_info["bytes"] = len(buf)


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("impl", ["kafkalog", "aiokafka", "kafka-python"])
def test_encode(benchmark, records, impl, codec):
    benchmark.group = f"encode v2 {codec}"
    c = CODECS[codec]
    if impl == "kafkalog":
        def run():
            out, offset = [], 0
            b = kafkalog.MemoryRecordsBuilder(2, c, 0, write_limit=16384)
            for k, v, ts, h in records:
                if not b.has_room_for(ts, k, v, h):
                    out.append(b.build())
                    b = kafkalog.MemoryRecordsBuilder(2, c, offset, write_limit=16384)
                b.append(ts, k, v, h)
                offset += 1
            out.append(b.build())
            return b"".join(out)
    else:
        _, builder = PEERS[impl]()

        def run():
            out = []
            b = builder(2, c, 0, -1, -1, -1, 16384)
            d = 0
            for k, v, ts, h in records:
                if b.append(d, ts, k, v, h) is None:
                    out.append(b.build())
                    b = builder(2, c, 0, -1, -1, -1, 16384)
                    d = 0
                    b.append(0, ts, k, v, h)
                d += 1
            out.append(b.build())
            return b"".join(out)

    data = benchmark(run)
    assert sum(1 for batch in kafkalog.MemoryRecords(data) for _ in batch) == len(records)
