"""What an object store's file system remembers between plans and reads (issue items 9 and
10), over the S3 test server.

* A reused Spark worker (one process, one store client, many tasks): a segment that grew since
  the worker's previous task is read to the size the new plan saw; the worker used to keep the
  size it first inspected for the life of the process, and failed with a false data-loss error
  (or, with failOnDataLoss=false, returned only the rows of the old size).
* A long-lived planner: a root checkpoint rewritten with the same size within the same second
  (S3 keeps modification times to the second) is read again by the next plan; the planner used
  to reuse its parse of the old file.

The planner and the worker are two processes in Spark; here each gets its own store clients
(``kafkalog.spark._store_clients._STORES``), as it would there."""
from __future__ import annotations

import pickle
import uuid
import warnings

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark >= 4.0 is not installed")

from kafkalog.spark import _options, _planning, _schema, _store_clients, _tasks  # noqa: E402
from kafkalog.storage import checkpoints, files  # noqa: E402
from kafkalog.storage import store_fs as _store_fs  # noqa: E402

from .s3_support import BUCKET, append_records, s3_client, upload_tree  # noqa: E402


class _Processes:
    """The planner's and the worker's store clients, kept apart as two processes keep them."""

    def __init__(self, monkeypatch):
        self.mp = monkeypatch
        self.planner: dict = {}
        self.worker: dict = {}

    def plan(self, opts):
        self.mp.setattr(_store_clients, "_STORES", self.planner)
        return _planning.plan(opts)

    def read(self, opts, splits):
        self.mp.setattr(_store_clients, "_STORES", self.worker)
        schema = _schema.arrow_schema(opts)
        rows = []
        for s in splits:
            s = pickle.loads(pickle.dumps(s))  # what a task receives
            for rb in _tasks.read_split(s, opts, schema):
                rows.extend(rb.column(rb.schema.get_field_index("offset")).to_pylist())
        return sorted(rows)


def test_reused_worker_reads_a_segment_that_grew(s3_env, tmp_path, monkeypatch):
    local = tmp_path / "root"
    d = local / "g-0"
    prefix = "grow-" + uuid.uuid4().hex[:8]
    uri = f"s3://{BUCKET}/{prefix}"
    p = _Processes(monkeypatch)
    strict = _options.ReadOptions.parse({"path": uri})
    lenient = _options.ReadOptions.parse({"path": uri, "failOnDataLoss": "false"})

    append_records(d, 0, 100)
    upload_tree(s3_env, str(local), BUCKET, prefix)
    assert p.read(strict, p.plan(strict)) == list(range(100))
    assert p.read(lenient, p.plan(lenient)) == list(range(100))

    # the one segment grows (a backup job syncing a live log): the next query reads it all
    append_records(d, 100, 150)
    upload_tree(s3_env, str(local), BUCKET, prefix)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert p.read(lenient, p.plan(lenient)) == list(range(150))
    assert not [str(x.message) for x in seen if "shorter than" in str(x.message)]
    append_records(d, 150, 200)
    upload_tree(s3_env, str(local), BUCKET, prefix)
    assert p.read(strict, p.plan(strict)) == list(range(200))


def test_a_plan_sees_a_new_file_its_client_once_listed_as_missing(s3_env, tmp_path,
                                                                  monkeypatch):
    """A name a directory's earlier listing lacked is not missing for a later plan."""
    local = tmp_path / "root"
    prefix = "appear-" + uuid.uuid4().hex[:8]
    uri = f"s3://{BUCKET}/{prefix}"
    p = _Processes(monkeypatch)
    append_records(local / "a-0", 0, 20)
    upload_tree(s3_env, str(local), BUCKET, prefix)
    o = _options.ReadOptions.parse({"path": uri})
    assert p.read(o, p.plan(o)) == list(range(20))
    append_records(local / "b-0", 0, 30)
    upload_tree(s3_env, str(local), BUCKET, prefix)
    one = _options.ReadOptions.parse({"path": uri + "/b-0"})
    assert p.read(one, p.plan(one)) == list(range(30))


def _start_of(p, opts):
    return min(piece.from_offset for s in p.plan(opts) for piece in s.pieces)


def test_same_size_checkpoint_rewritten_within_a_second_is_seen(s3_env, tmp_path, monkeypatch):
    local = tmp_path / "root"
    append_records(local / "c-0", 0, 40)
    ckpt = files.LOG_START_OFFSET_CHECKPOINT_FILE
    client = s3_client(s3_env)
    same_second = 0
    for attempt in range(6):
        prefix = f"ckpt-{uuid.uuid4().hex[:8]}"
        uri = f"s3://{BUCKET}/{prefix}"
        key = f"{prefix}/{ckpt}"
        checkpoints.write_offset_checkpoint(local / ckpt, {("c", 0): 10}, fsync=False)
        upload_tree(s3_env, str(local), BUCKET, prefix)
        p = _Processes(monkeypatch)
        opts = _options.ReadOptions.parse({"path": uri})
        first = client.head_object(Bucket=BUCKET, Key=key)["LastModified"]
        assert _start_of(p, opts) == 10
        # DeleteRecords moved the log start: the same number of bytes, a new value
        client.put_object(Bucket=BUCKET, Key=key, Body=b"0\n1\nc 0 20\n")
        second = client.head_object(Bucket=BUCKET, Key=key)["LastModified"]
        assert client.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == len(
            b"0\n1\nc 0 10\n")
        assert _start_of(p, opts) == 20, f"attempt {attempt}: {first} -> {second}"
        # the read of a new plan starts there too
        assert p.read(opts, p.plan(opts)) == list(range(20, 40))
        same_second += first == second
        if same_second >= 2:
            break
    if not same_second:
        pytest.skip("the checkpoint was never rewritten within the second it was written")


def test_store_version_key_changes_with_each_listing_of_a_rewritten_file(s3_env):
    """The key the root-checkpoint cache compares: a listing that finds the file rewritten
    with the same size and modification second gives a new key."""
    prefix = "vk-" + uuid.uuid4().hex[:8]
    client = s3_client(s3_env)
    key = f"{prefix}/{files.LOG_START_OFFSET_CHECKPOINT_FILE}"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"0\n1\nc 0 10\n")
    fs, root = _store_fs.resolve(f"s3://{BUCKET}/{prefix}")
    path = f"{root}/{files.LOG_START_OFFSET_CHECKPOINT_FILE}"
    fs.list_dir(root)
    k1 = fs.version_key(path)
    assert k1 is not None and fs.version_key(path) == k1  # stable until the next listing
    client.put_object(Bucket=BUCKET, Key=key, Body=b"0\n1\nc 0 20\n")
    fs.list_dir(root)
    assert fs.version_key(path) != k1
