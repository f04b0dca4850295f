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

pytestmark = pytest.mark.spark

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
def spark_cluster(tmp_path_factory):
    """``(master_url, env, workdir)`` of a running standalone cluster, stopped by pid after."""
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
    from kafkalog.tools.demo import generate

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
