"""spark.readStream.format("kafkalog") over a growing log directory."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pa = pytest.importorskip("pyarrow")


def _append(directory, n, start_value=0):
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    with Log.open(directory) as log:
        for i in range(0, n, 10):
            b = MemoryRecordsBuilder(compression_type="gzip")
            for j in range(i, min(n, i + 10)):
                b.append(1_800_000_000_000 + j, f"new-{j}".encode(), f"v{start_value + j}".encode())
            log.append(b.build())


def _run(spark, root, out, ckpt, **options):
    r = spark.readStream.format("kafkalog").option("startingOffsets", "earliest")
    for k, v in options.items():
        r = r.option(k, v)
    q = (
        r.load(str(root))
        .select("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert not q.isActive
    if q.exception() is not None:
        raise q.exception()
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def test_stream_available_now_and_growth(spark, sample_root, tmp_path, oracle):
    from kafkalog.spark._source import HAS_ADMISSION_CONTROL

    root = tmp_path / "grow"
    for name in ("orders-0", "orders-1"):
        shutil.copytree(os.path.join(sample_root, name), root / name)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    want = [
        (r["topic"], r["partition"], r["offset"]) for r in oracle.rows(str(root), headers=False)
    ]
    sizes = _run(spark, root, out, ckpt, maxOffsetsPerTrigger="300")
    got = sorted(
        (r[0], r[1], r[2])
        for r in spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    )
    assert got == sorted(want)
    if HAS_ADMISSION_CONTROL:
        assert len(sizes) >= len(want) // 300 and max(sizes) <= 300
    # the checkpoint holds the connector's offset JSON
    last = sorted((f for f in os.listdir(ckpt / "offsets") if f.isdigit()), key=int)[-1]
    offsets = json.loads((ckpt / "offsets" / last).read_text().splitlines()[-1])
    ends = {p: max(o for t, q, o in want if q == int(p)) + 1 for p in ("0", "1")}
    assert offsets == {"orders": ends}
    # the log grows (and a new partition appears): the next run reads only what is new
    _append(str(root / "orders-0"), 35)
    shutil.copytree(os.path.join(sample_root, "orders-2"), root / "orders-2")
    _run(spark, root, out, ckpt)
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    n2 = len(
        [
            r
            for r in oracle.rows(sample_root, headers=False)
            if (r["topic"], r["partition"]) == ("orders", 2)
        ]
    )
    assert len(rows) == len(want) + 35 + n2
    assert len(set(rows)) == len(rows)  # nothing read twice


def test_stream_starting_offsets_latest_by_default(spark, sample_root, tmp_path):
    root = tmp_path / "latest"
    shutil.copytree(os.path.join(sample_root, "events-0"), root / "events-0")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = (
        spark.readStream.format("kafkalog")
        .load(str(root))
        .select("offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert spark.read.schema("offset BIGINT").parquet(str(out)).count() == 0


def _txn_log(directory):
    """A Log with helpers for plain batches, transactional batches and their markers."""
    from kafkalog.control import build_end_txn_marker
    from kafkalog.records import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    log = Log.open(directory)

    def plain(*values):
        b = MemoryRecordsBuilder()
        for v in values:
            b.append(1_800_000_000_000, None, v)
        log.append(b.build())

    def txn(pid, *values):
        b = MemoryRecordsBuilder(producer_id=pid, producer_epoch=0, base_sequence=0,
                                 is_transactional=True)
        for v in values:
            b.append(1_800_000_000_000, None, v)
        log.append(b.build())

    def end(pid, commit):
        log.append(build_end_txn_marker(commit, pid, 0, 0, timestamp=1_800_000_000_000),
                   origin="coordinator")

    return log, plain, txn, end


def _out(spark, out):
    return sorted(
        (r[0], bytes(r[1]))
        for r in spark.read.parquet(str(out)).select("offset", "value").collect()
    )


def test_stream_read_committed_ends_at_the_last_stable_offset(spark, tmp_path):
    """A micro-batch never goes past a transaction that is still open (it aborts later); the
    next micro-batch goes on from there once the transaction is over."""
    root = tmp_path / "txn"
    log, plain, txn, end = _txn_log(str(root / "t-0"))
    plain(b"a", b"b")  # 0, 1
    txn(7, b"x", b"y")  # 2, 3: open
    plain(b"c")  # 4: after the open transaction's start
    log.flush()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    opts = {"kafka.isolation.level": "read_committed"}
    _run(spark, root, out, ckpt, **opts)
    assert _out(spark, out) == [(0, b"a"), (1, b"b")]
    end(7, False)  # 5: it aborts
    plain(b"d")  # 6
    log.flush()
    _run(spark, root, out, ckpt, **opts)
    assert _out(spark, out) == [(0, b"a"), (1, b"b"), (4, b"c"), (6, b"d")]
    log.close()


def test_stream_log_end_moving_back_is_data_loss(spark, tmp_path):
    """A partition recreated shorter than where the stream is: failOnDataLoss=true fails with
    the connector's message; false warns and reads the new records from their start."""
    root = tmp_path / "recreated"
    log, plain, _txn, _end = _txn_log(str(root / "t-0"))
    plain(*[b"old-%d" % i for i in range(10)])
    log.close()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _run(spark, root, out, ckpt)
    assert len(_out(spark, out)) == 10
    shutil.rmtree(root / "t-0")  # the topic is deleted and created again
    log, plain, _txn, _end = _txn_log(str(root / "t-0"))
    plain(*[b"new-%d" % i for i in range(4)])
    log.flush()
    with pytest.raises(Exception, match="offset was changed from 10 to 4"):
        _run(spark, root, out, ckpt)
    _run(spark, root, out, ckpt, failOnDataLoss="false")
    plain(b"new-4", b"new-5")
    log.close()
    _run(spark, root, out, ckpt, failOnDataLoss="false")
    got = _out(spark, out)
    assert [v for o, v in got if v.startswith(b"new")] == [b"new-%d" % i for i in range(6)]
    assert [o for o, v in got if v.startswith(b"new")] == list(range(6))
