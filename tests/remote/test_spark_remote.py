"""The Spark source's object-store read at the core level (no JVM): planning lists the store,
splits carry what a task needs, and the rows equal the local read of the same root."""
from __future__ import annotations

import pickle

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark >= 4.0 is not installed")

from kafkalog.spark import _core as core  # noqa: E402
from kafkalog.spark import _remote  # noqa: E402


def _rows(opts, splits, read):
    schema = core.arrow_schema(opts)
    rows = []
    for s in splits:
        s = pickle.loads(pickle.dumps(s))  # what a task receives
        for rb in read(s, opts, schema):
            assert rb.schema.equals(schema)
            rows.extend(rb.to_pylist())
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


CASES = [
    {},
    {"includeHeaders": "true"},
    {"kafka.isolation.level": "read_committed", "includeHeaders": "true"},
    {"maxPartitionBytes": "40000"},
    {"subscribe": "orders"},
    {"assign": '{"orders": [1]}'},
]


@pytest.mark.parametrize("extra", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain")
def test_remote_read_equals_local_read(s3_root, log_root, extra):
    local = core.ReadOptions.parse({"path": log_root, **extra})
    remote = core.ReadOptions.parse({"path": s3_root, **extra})
    want = _rows(local, core.plan(local), core.read_split)
    splits = _remote.plan(remote, _remote.storage_options({}))
    got = _rows(remote, splits, _remote.read_split)
    assert len(want) > 0
    assert got == want
    for s in splits:
        assert all(uri.startswith(s3_root + "/") for uri, _ in s.segments)
    if "maxPartitionBytes" in extra:
        assert all(s.nbytes <= 40000 for s in splits if len(s.segments) > 1)
        assert len(splits) > len({(s.topic, s.partition) for s in splits})  # segments split up


def test_storage_options_come_from_spark_options(s3_env, s3_root, log_root):
    import os

    opts = {"path": s3_root, "storage.endpoint_url": s3_env, "storage.access_key": "testing-key",
            "storage.secret_key": "testing-secret", "storage.block_size": "65536",
            "storage.retries": "1"}
    so = _remote.storage_options({k.lower(): v for k, v in opts.items()})
    assert so == {"endpoint_url": s3_env, "access_key": "testing-key",
                  "secret_key": "testing-secret", "block_size": 65536, "retries": 1}
    saved = {k: os.environ.pop(k, None) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                    "AWS_ENDPOINT_URL")}
    try:  # no AWS_* variables: the options alone reach the store
        ro = core.ReadOptions.parse(opts)
        splits = _remote.plan(ro, so)
        got = _rows(ro, splits, _remote.read_split)
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    lo = core.ReadOptions.parse({"path": log_root})
    assert got == _rows(lo, core.plan(lo), core.read_split)


def test_unsupported_options_and_missing_prefix_are_clear(s3_root):
    o = core.ReadOptions.parse({"path": s3_root, "startingOffsets": "{\"orders\": {\"0\": 5}}"})
    with pytest.raises(core.OptionError, match="startingOffsets.*object store"):
        _remote.plan(o, {})
    o = core.ReadOptions.parse({"path": s3_root + "-missing"})
    with pytest.raises(Exception, match="cannot read s3:.*-missing.*no such directory"):
        _remote.plan(o, {})


def _batch(topic, partition, offsets):
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({
        "topic": pa.array([topic] * len(offsets)), "partition": pa.array([partition] * len(offsets), pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "value": pa.array([b"v%d" % o for o in offsets], pa.binary())})


def test_object_store_commit_never_mixes_or_replaces(s3_env, s3_root):
    import uuid

    from kafkalog.spark._write import WriteError

    with pytest.raises(WriteError, match="overwrite.*not supported on an object store"):
        _remote.RemoteWriteJob(s3_root, {}, True, None, "job-x")
    # appending to a partition the target holds: refused, and nothing staged stays behind
    job = _remote.RemoteWriteJob(s3_root, {}, False, "append", "job-" + uuid.uuid4().hex)
    existing = job.existing_partitions()
    topic, part = existing[0].rsplit("-", 1)
    staged = job.write_task(iter([_batch(topic, int(part), [10**9, 10**9 + 1])]), "t0", 0)
    with pytest.raises(WriteError, match=f"partition {existing[0]} already exists"):
        job.commit([staged])
    job.abort()
    assert job.existing_partitions() == existing
    # one partition from two tasks: refused; a good job lands whole and reads back
    new = f"{s3_root}-copy-{uuid.uuid4().hex[:6]}"
    job = _remote.RemoteWriteJob(new, {}, False, "append", "job-" + uuid.uuid4().hex)
    a = job.write_task(iter([_batch("t", 0, [0, 1])]), "t0", 0)
    b = job.write_task(iter([_batch("t", 0, [2, 3])]), "t1", 1)
    with pytest.raises(WriteError, match="t-0 came from two tasks"):
        job.commit([a, b])
    assert job.existing_partitions() == []
    job.commit([a, job.write_task(iter([_batch("u", 1, [0, 1, 2])]), "t2", 2)])
    assert sorted(job.existing_partitions()) == ["t-0", "u-1"]
    o = core.ReadOptions.parse({"path": new})
    rows = _rows(o, _remote.plan(o, {}), _remote.read_split)
    assert [(r["topic"], r["offset"], r["value"]) for r in rows] == [
        ("t", 0, b"v0"), ("t", 1, b"v1"), ("u", 0, b"v0"), ("u", 1, b"v1"), ("u", 2, b"v2")]
