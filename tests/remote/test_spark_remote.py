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
