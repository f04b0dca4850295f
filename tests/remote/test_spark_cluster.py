"""The Spark source and writer on a real standalone cluster (a master and two workers, each its
own JVM and Python workers, on 127.0.0.1): what the cluster reads equals a direct decode.

Marked ``spark`` (deselect with ``-m "not spark"``).  It runs in both twins: the executors'
Python workers inherit ``KAFKALOG_PURE_PYTHON``, and one module-scoped cluster serves every test
here, so its start-up (~20-30 s on 2 cores) is paid once per twin."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "spark"))
import cluster as _cluster  # noqa: E402  (tests/spark/cluster.py)

# the cluster (two worker JVMs) costs ~85 s here: scripts/test.sh runs it once, in the compiled pass
pytestmark = [pytest.mark.spark, pytest.mark.cluster]

COLS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def _skip_reason():
    try:
        from pyspark.sql.datasource import DataSource  # noqa: F401
    except ImportError as e:
        return f"pyspark >= 4.0 is not installed ({e})"
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (java on PATH or JAVA_HOME) for Spark"
    return None


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory, s3_env):
    """``(master_url, env, workdir)`` of a running standalone cluster, stopped by pid after.
    Its daemons and executors get the AWS_* variables of the S3 test server."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("spark-cluster")
    env = _cluster.worker_env()
    try:
        c = _cluster.start_cluster(workdir, env)
    except RuntimeError as e:
        pytest.skip(str(e))
    try:
        yield c.master_url, env, workdir
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cluster_root(tmp_path_factory):
    from kafkalog.demo import generate

    root = tmp_path_factory.mktemp("cluster-sample") / "logs"
    generate(str(root), 3000, segment_bytes=32 * 1024)
    return str(root)


def _direct(root):
    import kafkalog.arrow as ka
    from kafkalog.storage.files import parse_partition_dir

    rows = []
    for name in sorted(os.listdir(root)):
        try:
            pd = parse_partition_dir(name)
        except ValueError:
            continue
        if pd.kind or not os.path.isdir(os.path.join(root, name)):
            continue
        rows += ka.to_arrow(os.path.join(root, name), columns=COLS,
                            timestamp_unit="us").to_pylist()
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _rows(table):
    return sorted(table.select(COLS).to_pylist(),
                  key=lambda r: (r["topic"], r["partition"], r["offset"]))


def test_cluster_reads_a_local_root_like_a_direct_decode(spark_cluster, cluster_root, tmp_path):
    master, env, workdir = spark_cluster
    table, info = _cluster.run_driver(
        master, {"read": cluster_root, "out": str(tmp_path / "read.arrow")}, env, workdir)
    expected = _direct(cluster_root)
    assert len(expected) > 0
    assert _rows(table) == expected
    assert info["executors"] == 2  # both workers' executors registered


def test_cluster_reads_s3_and_writes_a_copy_back(spark_cluster, s3_root, log_root, tmp_path):
    import subprocess
    import uuid

    from .s3_support import BUCKET

    master, env, workdir = spark_cluster
    copy = f"s3://{BUCKET}/copies/{uuid.uuid4().hex[:8]}"
    table, info = _cluster.run_driver(
        master, {"read": s3_root, "out": str(tmp_path / "read.arrow"), "write": copy},
        env, workdir)
    expected = _direct(log_root)
    assert _rows(table) == expected
    assert info["executors"] == 2
    # the copy verifies and holds the same records
    r = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "verify", copy], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    from kafkalog.spark import _options, _planning, _schema, _tasks

    opts = _options.ReadOptions.parse({"path": copy})
    got = []
    for s in _planning.plan(opts):
        for rb in _tasks.read_split(s, opts, _schema.arrow_schema(opts)):
            got.extend(rb.select(COLS).to_pylist())
    key = lambda r: (r["topic"], r["partition"], r["offset"])  # noqa: E731
    # the copy is written in the v2 format, where a v0 record's "no timestamp type" (-1)
    # becomes CreateTime (0); everything else is kept
    want = [dict(r, timestampType=0) if r["timestampType"] == -1 else r for r in expected]
    assert sorted(got, key=key) == want


def test_cluster_reads_parquet_through_s3a(spark_cluster, s3_env, s3_root, log_root, tmp_path):
    """Spark's own S3 connector (S3A: hadoop-aws at the Hadoop version pyspark bundles, from
    Maven Central) on the same cluster and the same S3 server: the rows kafkalog reads from
    s3:// are written as Parquet to s3a:// by Spark's own writer and read back by Spark's own
    Parquet reader; both equal a direct decode.  This is the S3A set-up that
    ``bench/spark_bench.py --s3`` compares kafkalog with."""
    import uuid

    from .s3_support import BUCKET, S3AUnavailable, s3a_conf, s3a_jars

    try:
        jars = s3a_jars()
    except S3AUnavailable as e:
        pytest.skip(f"Spark's S3 connector (hadoop-aws) cannot be fetched: {e}")
    master, env, workdir = spark_cluster
    conf = {"spark.jars": ",".join(jars), **s3a_conf(s3_env)}
    parquet = f"s3a://{BUCKET}/parquet/{uuid.uuid4().hex[:8]}"
    read, info = _cluster.run_driver(
        master, {"read": s3_root, "out": str(tmp_path / "read.arrow"), "conf": conf,
                 "write_parquet": parquet, "out_back": str(tmp_path / "back.arrow")},
        env, workdir)
    import pyarrow as pa

    with pa.memory_map(str(tmp_path / "back.arrow")) as f:
        back = pa.ipc.open_file(f).read_all()
    expected = _direct(log_root)
    assert len(expected) > 0 and info["executors"] == 2
    assert _rows(read) == expected
    assert _rows(back) == expected
