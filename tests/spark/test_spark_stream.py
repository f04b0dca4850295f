"""spark.readStream.format("kafkalog") over a growing log directory."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pa = pytest.importorskip("pyarrow")


def _append(directory, n, start_value=0):
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.log import Log

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
