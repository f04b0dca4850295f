"""Spark test set-up: one local SparkSession (``local[2]``) for the whole run.

Tests that need Spark take the ``spark`` fixture; it skips them (with the reason) when pyspark
>= 4.0 or a Java runtime is missing.  tests/conftest.py marks them ``spark`` (deselect them with
``-m "not spark"``).  The Python workers run this interpreter and import the
same kafkalog as the tests (its parent directory is put first on the workers' PYTHONPATH), with
the same ``KAFKALOG_PURE_PYTHON`` setting.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest

import kafkalog


def _spark_unavailable_reason():
    try:
        import pyspark  # noqa: F401
        from pyspark.sql.datasource import DataSource  # noqa: F401
    except ImportError as e:
        return f"pyspark >= 4.0 is not installed ({e})"
    java_home = os.environ.get("JAVA_HOME")
    java = shutil.which("java") or (os.path.join(java_home, "bin", "java") if java_home else None)
    if not java or not os.path.exists(java):
        return "no Java runtime (java on PATH or JAVA_HOME) for Spark"
    return None


SPARK_SKIP_REASON = _spark_unavailable_reason()


@pytest.fixture(scope="session")
def spark():
    if SPARK_SKIP_REASON:
        pytest.skip(SPARK_SKIP_REASON)
    import site

    saved = {
        k: os.environ.get(k) for k in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    pkg_parent = str(Path(kafkalog.__file__).resolve().parent.parent)
    installed = {
        str(Path(p).resolve()) for p in site.getsitepackages() + [site.getusersitepackages()]
    }
    pp = os.environ.get("PYTHONPATH", "")
    if pkg_parent not in installed and pkg_parent not in pp.split(os.pathsep):
        # a source checkout (PYTHONPATH=src, or pytest run from the repository): the workers
        # must import this kafkalog too
        os.environ["PYTHONPATH"] = pkg_parent + (os.pathsep + pp if pp else "")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.pyspark.udf.faulthandler.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import kafkalog.spark as ks

    ks.register(session)
    yield session
    session.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory):
    """A small sample log root (every codec, legacy v0/v1, transactions, several segments)."""
    from kafkalog.demo import generate

    root = tmp_path_factory.mktemp("spark-sample") / "logs"
    generate(str(root), 4000, segment_bytes=32 * 1024)
    return str(root)


# ------------------------------------------------------------------------------------------------
# The oracle: a direct decode with kafkalog.arrow, in the connector's columns
# ------------------------------------------------------------------------------------------------
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def partition_dirs(root):
    from kafkalog.storage.files import parse_partition_dir

    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isdir(d) or name.startswith("."):
            continue
        try:
            pd = parse_partition_dir(name)
        except ValueError:
            continue
        if pd.kind:
            continue
        out.append((pd.topic_partition.topic, pd.topic_partition.partition, d))
    return out


def direct_rows(root, *, read_committed=False, headers=True, dirs=None):
    """Every record under ``root`` as dicts, sorted by (topic, partition, offset)."""
    import kafkalog.arrow as ka

    rows = []
    for _topic, _partition, d in dirs or partition_dirs(root):
        cols = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if headers:
            cols.append("headers")
        t = ka.to_arrow(d, columns=cols, timestamp_unit="us", read_committed=read_committed)
        rows.extend(t.to_pylist())
    return sorted(rows, key=lambda r: (r["topic"] or "", r["partition"] or 0, r["offset"]))


def spark_rows(df):
    """A DataFrame's rows as dicts (via Arrow), sorted like direct_rows."""
    rows = df.toArrow().to_pylist()
    for r in rows:
        h = r.get("headers")
        if h is not None:
            r["headers"] = [{"key": x["key"], "value": x["value"]} for x in h]
    return sorted(rows, key=lambda r: (r["topic"] or "", r["partition"] or 0, r["offset"]))


def _norm(rows):
    out = []
    for r in rows:
        r = dict(r)
        if "headers" in r and r["headers"] is not None:
            r["headers"] = [(h["key"], h["value"]) for h in r["headers"]]
        out.append(r)
    return out


@pytest.fixture(scope="session")
def oracle():
    class Oracle:
        rows = staticmethod(direct_rows)
        spark = staticmethod(spark_rows)
        dirs = staticmethod(partition_dirs)
        norm = staticmethod(_norm)

    return Oracle
