"""The Spark source's object-store read at the core level (no JVM): planning lists the store,
splits carry what a task needs, and the rows equal the local read of the same root."""
from __future__ import annotations

import pickle

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark >= 4.0 is not installed")

from kafkalog.spark import (  # noqa: E402
    _errors,
    _object_stores,  # noqa: E402
    _options,
    _planning,
    _schema,
    _store_clients,
    _tasks,
)


def _rows(opts, splits, read=_tasks.read_split, sort=True):
    schema = _schema.arrow_schema(opts)
    rows = []
    for s in splits:
        s = pickle.loads(pickle.dumps(s))  # what a task receives
        for rb in read(s, opts, schema):
            assert rb.schema.equals(schema)
            rows.extend(rb.to_pylist())
    if not sort:
        return rows
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _local_form(rows, log_root, s3_root):
    """The remote rows with each segment URI written as the local path it was uploaded from."""
    import os

    for r in rows:
        if r.get("segment"):
            r["segment"] = os.path.join(log_root, r["segment"][len(s3_root) + 1:])
    return rows


CASES = [
    {},
    {"includeHeaders": "true"},
    {"kafka.isolation.level": "read_committed", "includeHeaders": "true"},
    {"maxPartitionBytes": "40000"},
    {"subscribe": "orders"},
    {"assign": '{"orders": [1]}'},
    {"startingOffsets": '{"orders": {"0": 300, "1": -2}}', "endingOffsets":
     '{"orders": {"0": 600, "1": -1}}'},
    {"subscribe": "orders", "startingOffsets": "earliest", "endingOffsets": "latest"},
    {"subscribePattern": "ord.*", "startingTimestamp": "1700000004000"},
    {"assign": "{\"orders\": [0]}",
     "startingOffsetsByTimestamp": '{"orders": {"0": 1700000002000}}',
     "endingOffsetsByTimestamp": '{"orders": {"0": 1700000006000}}'},
    {"includeBatchMetadata": "true", "includeSegmentMetadata": "true"},
    {"kafka.isolation.level": "read_committed", "endingOffsets": "latest",
     "includeBatchMetadata": "true"},
    {"minPartitions": "7", "includeBatchMetadata": "true"},
]


@pytest.mark.parametrize("extra", CASES,
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain")
def test_remote_read_equals_local_read(s3_root, log_root, extra):
    """The same planning and decoding over the store: every option gives the local rows."""
    local = _options.ReadOptions.parse({"path": log_root, **extra})
    remote = _options.ReadOptions.parse({"path": s3_root, **extra})
    want = _rows(local, _planning.plan(local))
    splits = _planning.plan(remote)
    got = _local_form(_rows(remote, splits), log_root, s3_root)
    assert len(want) > 0
    assert got == want
    for s in splits:
        assert all(p.path.startswith(s3_root + "/") for p in s.pieces)
    assert [(p.start, p.end, p.from_offset, p.until_offset) for s in _planning.plan(local)
            for p in s.pieces] == [(p.start, p.end, p.from_offset, p.until_offset)
                                   for s in splits for p in s.pieces]


def test_remote_pruning_equals_local_pruning(s3_root, log_root):
    """Pushed filters prune the same pieces over the store as locally."""
    def pr():
        return _planning.Pruning(topics={"orders"}, partitions={0}, offset_lo=300, offset_hi=420)

    local = _options.ReadOptions.parse({"path": log_root})
    remote = _options.ReadOptions.parse({"path": s3_root})
    store = _store_clients.store_of(s3_root, remote.storage_options)
    ls = _planning.plan(local, pr())
    before = store.bytes_read
    rs = _planning.plan(remote, pr())
    want = [r for r in _rows(local, ls) if 300 <= r["offset"] < 420]
    got = [r for r in _rows(remote, rs) if 300 <= r["offset"] < 420]
    assert want and got == want
    assert store.bytes_read > before


@pytest.mark.parametrize("how", ["offsets", "timestamps", "pushed"])
def test_pruned_read_fetches_under_5_percent(s3_env, big_partition, how):
    """An offset- or timestamp-bounded read (options or pushed filters) fetches, planning and
    task together, under 5% of the bytes of a full read, counted at the store."""
    local_dir, uri = big_partition
    extra = {}
    pruning = None
    if how == "offsets":
        extra = {"startingOffsets": '{"big": {"0": 9000}}', "endingOffsets": '{"big": {"0": 9200}}'}
    elif how == "timestamps":
        extra = {"startingTimestamp": str(1_700_000_000_000 + 9000),
                 "endingTimestamp": str(1_700_000_000_000 + 9200)}
    remote = _options.ReadOptions.parse({"path": uri, **extra})
    local = _options.ReadOptions.parse({"path": local_dir, **extra})
    if how == "pushed":
        pruning = _planning.Pruning(offset_lo=9000, offset_hi=9200)
    store = _store_clients.store_of(uri, remote.storage_options)
    before = store.bytes_read
    got = _rows(remote, _planning.plan(remote, pruning))
    pruned = store.bytes_read - before
    want = _rows(local, _planning.plan(local, pruning))
    assert got == want and {r["offset"] for r in got} >= set(range(9000, 9200))
    full_opts = _options.ReadOptions.parse({"path": uri})
    before = store.bytes_read
    n = len(_rows(full_opts, _planning.plan(full_opts)))
    full = store.bytes_read - before
    assert n == 20000
    assert 0 < pruned < full * 0.05, (pruned, full)


def test_remote_windows_decode_like_one_buffer(s3_env, big_partition):
    """A task reads a piece of a store's segment in windows of storage.block_size bytes: the
    rows (and batch positions) equal the local read, with windows far smaller than a piece."""
    local_dir, uri = big_partition
    extra = {"includeBatchMetadata": "true", "maxPartitionBytes": str(64 << 20)}
    local = _options.ReadOptions.parse({"path": local_dir, **extra})
    remote = _options.ReadOptions.parse({"path": uri, "storage.block_size": "65536", **extra})
    want = _rows(local, _planning.plan(local))
    got = _rows(remote, _planning.plan(remote))
    assert len(want) > 1000 and got == want


def test_storage_options_come_from_spark_options(s3_env, s3_root, log_root):
    import os

    opts = {"path": s3_root, "storage.endpoint_url": s3_env, "storage.access_key": "testing-key",
            "storage.secret_key": "testing-secret", "storage.block_size": "65536",
            "storage.retries": "1"}
    so = _store_clients.storage_options({k.lower(): v for k, v in opts.items()})
    assert so == {"endpoint_url": s3_env, "access_key": "testing-key",
                  "secret_key": "testing-secret", "block_size": 65536, "retries": 1}
    saved = {k: os.environ.pop(k, None) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                    "AWS_ENDPOINT_URL")}
    try:  # no AWS_* variables: the options alone reach the store
        ro = _options.ReadOptions.parse(opts)
        assert ro.storage_options == so
        _store_clients._STORES.clear()  # no client kept from an earlier test
        got = _rows(ro, _planning.plan(ro))
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    lo = _options.ReadOptions.parse({"path": log_root})
    assert got == _rows(lo, _planning.plan(lo))


def test_missing_prefix_and_bad_option_are_clear(s3_root):
    from kafkalog.errors import KafkaStorageError

    o = _options.ReadOptions.parse({"path": s3_root + "-missing"})
    with pytest.raises(KafkaStorageError, match="cannot read s3:.*-missing.*no such"):
        _planning.plan(o)
    with pytest.raises(_errors.OptionError, match="storage.anonymous.*true or false"):
        _options.ReadOptions.parse({"path": s3_root, "storage.anonymous": "maybe"})


def _batch(topic, partition, offsets):
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({
        "topic": pa.array([topic] * len(offsets)),
        "partition": pa.array([partition] * len(offsets), pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "value": pa.array([b"v%d" % o for o in offsets], pa.binary())})


def test_object_store_commit_never_mixes_or_replaces(s3_env, s3_root):
    import uuid

    from kafkalog.spark._write import WriteError

    with pytest.raises(WriteError, match="overwrite.*not supported on an object store"):
        _object_stores.RemoteWriteJob(s3_root, {}, True, None, "job-x")
    # appending to a partition the target holds: refused, and nothing staged stays behind
    job = _object_stores.RemoteWriteJob(s3_root, {}, False, "append", "job-" + uuid.uuid4().hex)
    existing = job.existing_partitions()
    topic, part = existing[0].rsplit("-", 1)
    staged = job.write_task(iter([_batch(topic, int(part), [10**9, 10**9 + 1])]), "t0", 0)
    with pytest.raises(WriteError, match=f"partition {existing[0]} already exists"):
        job.commit([staged])
    job.abort()
    assert job.existing_partitions() == existing
    # one partition from two tasks: refused; a good job lands whole and reads back
    new = f"{s3_root}-copy-{uuid.uuid4().hex[:6]}"
    job = _object_stores.RemoteWriteJob(new, {}, False, "append", "job-" + uuid.uuid4().hex)
    a = job.write_task(iter([_batch("t", 0, [0, 1])]), "t0", 0)
    b = job.write_task(iter([_batch("t", 0, [2, 3])]), "t1", 1)
    with pytest.raises(WriteError, match="t-0 came from two tasks"):
        job.commit([a, b])
    assert job.existing_partitions() == []
    job.commit([a, job.write_task(iter([_batch("u", 1, [0, 1, 2])]), "t2", 2)])
    assert sorted(job.existing_partitions()) == ["t-0", "u-1"]
    o = _options.ReadOptions.parse({"path": new})
    rows = _rows(o, _planning.plan(o))
    assert [(r["topic"], r["offset"], r["value"]) for r in rows] == [
        ("t", 0, b"v0"), ("t", 1, b"v1"), ("u", 0, b"v0"), ("u", 1, b"v1"), ("u", 2, b"v2")]


def test_s3a_is_the_same_store_for_writes(s3_env, s3_root):
    """s3a:// (Hadoop's name for S3, what Spark jobs write) goes to the same writer as s3://:
    a job lands whole and reads back through either name; a store without a commit is refused
    before any request (tests/spark/test_spark_paths.py)."""
    import uuid

    new = f"{s3_root}-s3a-{uuid.uuid4().hex[:6]}".replace("s3://", "s3a://", 1)
    job = _object_stores.RemoteWriteJob(new, {}, False, "append", "job-" + uuid.uuid4().hex)
    job.commit([job.write_task(iter([_batch("t", 0, [0, 1, 2])]), "t0", 0)])
    assert job.existing_partitions() == ["t-0"]
    for uri in (new, new.replace("s3a://", "s3://", 1)):
        o = _options.ReadOptions.parse({"path": uri})
        assert [(r["offset"], r["value"]) for r in _rows(o, _planning.plan(o))] == [
            (0, b"v0"), (1, b"v1"), (2, b"v2")]


def test_stream_over_the_store_follows_new_segments(s3_env, tmp_path):
    """A stream over a store: each trigger lists the prefix again, so segments uploaded since
    (a backup job syncing a live log) are read on, exactly once, in order."""
    import uuid

    from kafkalog.spark._source import KafkaLogStreamReader

    from .s3_support import BUCKET, append_records, upload_tree

    local = tmp_path / "root"
    d = local / "s-0"
    prefix = "stream-" + uuid.uuid4().hex[:8]

    def append(lo, hi):
        append_records(d, lo, hi, segment_bytes=4096)
        upload_tree(s3_env, str(local), BUCKET, prefix)

    append(0, 200)
    from pyspark.sql import types as T

    schema = T.StructType([
        T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType())])
    r = KafkaLogStreamReader({"path": f"s3://{BUCKET}/{prefix}", "subscribe": "s",
                              "startingOffsets": "earliest",
                              "maxOffsetsPerTrigger": "70"}, schema)
    start = r.initialOffset()
    seen = []

    def drain(start):
        while True:
            end = r.latestOffset(start, None)
            if end == start:
                return start
            for p in r.partitions(start, end):
                for rb in r.read(p):
                    seen.extend(rb.column(rb.schema.get_field_index("offset")).to_pylist())
            start = end

    start = drain(start)
    assert seen == list(range(200))
    append(200, 330)
    start = drain(start)
    assert seen == list(range(330)) and start == {"s": {"0": 330}}


def test_store_errors_name_the_uri_and_never_return_partial_data(s3_env, big_partition):
    """Through the Spark reader: an unreachable endpoint fails at planning naming the URI,
    within the timeouts; an object cut short after planning fails the task naming it (never
    returns the part that was there)."""
    import socket
    import time

    from kafkalog.errors import KafkaStorageError

    from .s3_support import BUCKET, s3_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"s3://{BUCKET}/nowhere"
    o = _options.ReadOptions.parse({"path": uri, "storage.endpoint_url": f"http://127.0.0.1:{port}",
                                    "storage.retries": "0", "storage.connect_timeout": "1",
                                    "storage.request_timeout": "2"})
    t = time.monotonic()
    with pytest.raises(KafkaStorageError) as ei:
        _planning.plan(o)
    assert time.monotonic() - t < 60 and uri in str(ei.value)

    _local_dir, part = big_partition
    o = _options.ReadOptions.parse({"path": part, "storage.retries": "0"})
    splits = _planning.plan(o)
    last = max((p.path for s in splits for p in s.pieces))
    key = last[len(f"s3://{BUCKET}/"):]
    client = s3_client(s3_env)
    body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    mine = [s for s in splits if any(p.path == last for p in s.pieces)]
    whole = _rows(o, mine)
    try:
        client.put_object(Bucket=BUCKET, Key=key, Body=body[: len(body) // 2])
        _store_clients._STORES.clear()  # a task in a fresh worker: no listing kept from planning
        with pytest.raises(_errors.DataLossError) as ei:
            _rows(o, mine)
        assert last in str(ei.value) and "truncated or replaced" in str(ei.value)
        lenient = _options.ReadOptions.parse({"path": part, "failOnDataLoss": "false"})
        with pytest.warns(UserWarning, match="reading what is left"):
            rows = _rows(lenient, mine)
        assert 0 < len(rows) < len(whole) and rows == whole[: len(rows)]
    finally:
        client.put_object(Bucket=BUCKET, Key=key, Body=body)


def test_preallocated_indexes_of_an_active_segment_are_not_fetched_whole(s3_env, tmp_path):
    """A copy of a live broker directory: the active segment's indexes are 10 MB files of
    zeros past their entries; planning fetches the entries, not the zeros, and reads the same
    rows as locally."""
    import os
    import uuid

    from kafkalog import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    from .s3_support import BUCKET, upload_tree

    d = tmp_path / "root" / "live-0"
    log = Log.open(str(d), {"segment.bytes": 1 << 20, "index.interval.bytes": 512})
    try:
        for i in range(0, 3000, 20):
            mb = MemoryRecordsBuilder(magic=2, base_offset=log.log_end_offset)
            for j in range(i, i + 20):
                mb.append(1_700_000_000_000 + j, b"k%d" % j, b"v" * 50)
            log.append_as_follower(mb.build())
        log.flush()
        sizes = {n: os.path.getsize(d / n) for n in os.listdir(d)}
        assert max(v for n, v in sizes.items() if n.endswith("index")) >= 10 << 20
        prefix = "live-" + uuid.uuid4().hex[:8]
        upload_tree(s3_env, str(tmp_path / "root"), BUCKET, prefix)
    finally:
        log.close()
    uri = f"s3://{BUCKET}/{prefix}"
    extra = {"startingTimestamp": str(1_700_000_000_000 + 1500)}
    remote = _options.ReadOptions.parse({"path": uri, **extra})
    local = _options.ReadOptions.parse({"path": str(tmp_path / "root"), **extra})
    store = _store_clients.store_of(uri, remote.storage_options)
    before = store.bytes_read
    splits = _planning.plan(remote)
    planned = store.bytes_read - before
    got = _local_form(_rows(remote, splits), str(tmp_path / "root"), uri)
    assert got == _rows(local, _planning.plan(local)) and len(got) == 1500
    assert planned < 1 << 20, planned


def test_hdfs_commit_renames_staged_files_into_place(tmp_path, monkeypatch):
    """On HDFS the commit renames (no bytes copied through the driver). No HDFS runs here:
    pyarrow's local file system stands in for it behind an hdfs:// URI (a rename keeps the
    file, a copy makes a new one: the inodes tell); the copy reads back as written."""
    import os
    import uuid

    import pyarrow.fs as pafs

    from kafkalog.storage import store_fs as kstore_fs

    base = tmp_path / "hdfs"
    base.mkdir()
    real_resolve = kstore_fs.resolve

    def fake_resolve(location, storage_options=None):
        if isinstance(location, str) and location.startswith("hdfs://nn"):
            fs = kstore_fs.ArrowFileSystem(pafs.LocalFileSystem(), "hdfs://nn",
                                           kstore_fs.RemoteOptions())
            fs._native_base = str(base) + "/"
            return fs, location.rstrip("/")
        return real_resolve(location, storage_options)

    monkeypatch.setattr(kstore_fs, "resolve", fake_resolve)
    target = "hdfs://nn/copies/t"
    job = _object_stores.RemoteWriteJob(target, {}, False, "append", "job-" + uuid.uuid4().hex)
    assert job.renames
    staged = job.write_task(iter([_batch("t", 0, [0, 1, 2]), _batch("u", 3, [5, 6])]), "t0", 0)
    root = base / "copies" / "t"
    inodes = {(d, f): os.stat(root / ".kafkalog-staging" / job.job_id / "t0" / d / f).st_ino
              for d, _t, _p, files in staged.partitions for f in files}
    job.commit([staged])
    assert sorted(job.existing_partitions()) == ["t-0", "u-3"]
    assert inodes and all(os.stat(root / d / f).st_ino == ino for (d, f), ino in inodes.items())
    assert not (root / ".kafkalog-staging").exists()
    import kafkalog.arrow as ka

    t = ka.to_arrow(str(root / "u-3"), ["offset", "value"])
    assert t.to_pylist() == [{"offset": 5, "value": b"v5"}, {"offset": 6, "value": b"v6"}]
