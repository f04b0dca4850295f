"""Reads racing the writer's commits: a read sees each partition wholly as it was before or
wholly as it was after a concurrent overwrite/append commit, or fails with the retryable
``ConcurrentWriteError`` - never rows of two versions, never a raw OSError.

A writer thread commits jobs (``kafkalog.spark._write``, as ``df.write`` does) in a loop - one
overwrite or append at a time, every commit's rows tagged with its number, small segments so
a partition spans many files and several splits - and records every state the target passes
through.  The reading loop plans and reads (``read_split`` directly, both twins; once through
Spark) and checks each partition it returned against those states.  Bounded in time."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog.spark import _core as core  # noqa: E402
from kafkalog.spark import _write as w  # noqa: E402

TOPIC = "t"
PARTS = (0, 1)


class Writer(threading.Thread):
    """Commits jobs until stopped; ``states[p]`` holds every value list partition ``p`` had."""

    def __init__(self, root: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.current = {p: [] for p in PARTS}
        self.states = {p: {()} for p in PARTS}
        self.commits = 0
        self.error = None

    def commit(self) -> None:
        overwrite = self.rng.random() < 0.6 or not self.current[0]
        opts = w.WriteOptions.parse({"path": self.root, "topic": TOPIC, "segmentBytes": 1024})
        job = "job-" + uuid.uuid4().hex[:8]
        w.prepare_job(opts, job)
        tw = w.TaskWriter(opts, job, "task-0", overwrite)
        values, parts, new = [], [], {}
        for p in PARTS:
            n = self.rng.randrange(20, 120)
            new[p] = [b"c%d-p%d-%d" % (self.commits, p, i) for i in range(n)]
            values += new[p]
            parts += [p] * n
        tw.write_batch(pa.record_batch({"value": values, "partition": pa.array(parts, pa.int32())}))
        staged = tw.finish()
        for p in PARTS:  # every state a reader may see is known before it can be seen
            after = new[p] if overwrite else self.current[p] + new[p]
            self.states[p].add(tuple(after))
        w.commit_job(opts, job, staged, overwrite)
        for p in PARTS:
            self.current[p] = new[p] if overwrite else self.current[p] + new[p]
        self.commits += 1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.commit()
        except BaseException as e:  # pragma: no cover - reported by the test
            self.error = e


def _check(rows_by_part, writer: Writer) -> None:
    for p, rows in rows_by_part.items():
        rows.sort()
        offsets = [o for o, _ in rows]
        values = tuple(v for _, v in rows)
        assert offsets == list(range(len(rows))), f"partition {p}: offsets {offsets}"
        assert values in writer.states[p], f"partition {p}: a mix of versions: {values}"


def _race(root, read_once, seconds: float, min_reads: int = 20):
    writer = Writer(str(root), 1)
    writer.commit()
    writer.start()
    consistent = retryable = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline or consistent + retryable < min_reads:
            try:
                rows = read_once()
            except core.ConcurrentWriteError as e:
                assert e.retryable and "re-run the query" in str(e)
                retryable += 1
                continue
            _check(rows, writer)
            consistent += 1
            if time.monotonic() > deadline + 60:
                break
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.error is None, writer.error
    assert writer.commits > 5
    return consistent, retryable


def test_read_split_never_mixes_versions(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    opts = core.ReadOptions.parse(
        {"path": str(root), "maxPartitionBytes": "1500", "defaultParallelism": "4"}
    )
    schema = pa.schema([pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
                        pa.field("value", pa.binary())])

    def read_once():
        out = {p: [] for p in PARTS}
        splits = core.plan(opts)
        for split in splits:
            time.sleep(0.001)  # let commits land between the splits of one read
            for rb in core.read_split(split, opts, schema):
                for p, o, v in zip(*(rb.column(i).to_pylist() for i in range(3))):
                    out[p].append((o, v))
        return out

    consistent, retryable = _race(root, read_once, 4.0)
    assert consistent > 0


def test_generation_marker_is_new_in_every_commit(tmp_path):
    """The writer leaves a fresh marker in each directory it swaps in, an append included (a
    hard link to the previous directory's marker would make the two look the same)."""
    root = tmp_path / "logs"
    root.mkdir()
    writer = Writer(str(root), 2)
    seen = set()
    for _ in range(6):
        writer.commit()
        for p in PARTS:
            v = core.dir_version(str(root / f"{TOPIC}-{p}"))
            if v is not None:
                assert v[2] is not None and v not in seen
                seen.add(v)


def test_spark_read_never_mixes_versions(spark, tmp_path):
    root = tmp_path / "logs"
    root.mkdir()

    def read_once():
        try:
            got = (
                spark.read.format("kafkalog")
                .option("maxPartitionBytes", "1500")
                .load(str(root))
                .select("partition", "offset", "value")
                .collect()
            )
        except Exception as e:
            if "ConcurrentWriteError" in str(e):
                raise core.ConcurrentWriteError("re-run the query") from e
            raise
        out = {p: [] for p in PARTS}
        for r in got:
            out[r[0]].append((r[1], bytes(r[2])))
        return out

    consistent, retryable = _race(root, read_once, 3.0, min_reads=5)
    assert consistent > 0
