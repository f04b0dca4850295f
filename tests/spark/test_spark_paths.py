"""Paths and URIs given to the Spark data source: local forms are accepted as Hadoop accepts
them, anything else is refused with an error naming the URI (never a local directory named
after a remote URI)."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkaLogError
from kafkalog.spark import _errors, _options
from kafkalog.spark._local_paths import UnsupportedPathError, local_path
from kafkalog.spark._write import WriteOptions

LOCAL = [
    ("/data/logs", "/data/logs"),
    ("file:/data/logs", "/data/logs"),
    ("file:///data/logs", "/data/logs"),
    ("file://localhost/data/logs", "/data/logs"),
    ("FILE://LocalHost/data/logs", "/data/logs"),
    ("file:////data/logs", "/data/logs"),
    ("file:///data/a%20b", "/data/a%20b"),  # Hadoop does not percent-decode a path string
    ("file:/data/q?x#y", "/data/q?x#y"),  # nor split off a query or fragment
    ("/data/a:b", "/data/a:b"),  # a ':' after the first '/' is no scheme
    ("logs/a:b", "logs/a:b"),
    ("relative", "relative"),
    ("//localhost/data", "/data"),
    ("///data//logs", "/data//logs"),
]

REFUSED = [
    "s3a://bucket/x",
    "s3://bucket/x",
    "hdfs:///x",
    "hdfs:/x",  # one slash: still a scheme
    "gs:bucket",
    "abfss://c@acct.dfs.core.windows.net/x",
    "file://otherhost/data",
    "file:relative",
    "file:",
    "file://",
    "file://localhost",
    "//otherhost/data",  # file://otherhost/data to Hadoop
    "a b:c",
    "",
]


@pytest.mark.parametrize("uri,want", LOCAL)
def test_local_forms(uri, want):
    assert local_path(uri) == want
    assert WriteOptions.parse({"path": uri}).path == os.path.abspath(want)
    assert _options.ReadOptions.parse({"path": uri}).paths == [want]


@pytest.mark.parametrize("uri", REFUSED)
def test_other_storage_is_refused(uri):
    with pytest.raises(UnsupportedPathError) as ei:
        local_path(uri)
    assert isinstance(ei.value, KafkaLogError) and ei.value.uri == uri
    assert repr(uri) in str(ei.value)
    if uri:
        with pytest.raises(UnsupportedPathError, match="local"):
            WriteOptions.parse({"path": uri})
        with pytest.raises(_errors.OptionError, match="local"):
            _options.ReadOptions.parse({"paths": f'["/ok", "{uri}"]'})


def test_error_survives_pickling():
    import pickle

    e = pickle.loads(pickle.dumps(UnsupportedPathError("m", "s3a://b/x")))
    assert (type(e), e.uri, str(e)) == (UnsupportedPathError, "s3a://b/x", "m")


_PIECES = st.sampled_from(
    ["file", "FILE", "s3a", "hdfs", "localhost", "host", ":", "/", "//", "a", "b", "%20",
     "%2F", ".", "..", " ", "?", "#", "-", "~"]
)


def _hadoop_local(jvm, fs, uri):
    """Where Hadoop's local file system puts ``uri`` (None: Hadoop refuses it or it is not
    on the local file system)."""
    try:
        p = jvm.org.apache.hadoop.fs.Path(uri)
        scheme = p.toUri().getScheme()
        if scheme is not None and scheme.lower() != "file":
            return None
        q = fs.makeQualified(p).toUri()
        if q.getAuthority():
            return None  # another host: Hadoop's local file system says "Wrong FS" on use
        return q.getPath()
    except Exception:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(_PIECES, min_size=1, max_size=8), absolute=st.booleans())
def test_agrees_with_hadoop_path(spark, parts, absolute):
    """Differential: kafkalog's reading of a path string against Hadoop's Path and local file
    system, the way Spark's file sources resolve it.  The one deliberate difference:
    ``file://localhost/...`` is this machine (RFC 8089), where Hadoop says "Wrong FS"; text
    before a ':' that is no URI scheme is refused, and so is ``file:a:``, a Windows drive path
    to Hadoop."""
    uri = ("/tmp/" if absolute else "") + "".join(parts)
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    want = _hadoop_local(jvm, fs, uri)
    try:
        got = os.path.abspath(local_path(uri))
    except UnsupportedPathError:
        got = None
    if got is not None and want is None:
        lower = uri.lower()
        assert lower.startswith(("file://localhost/", "//localhost/")), uri
        want = _hadoop_local(jvm, fs, "file://" + uri[lower.index("//localhost") + 11 :])
    if got is None and want is not None:
        # Hadoop lets some text that is no URI scheme through ('?:' is its working directory),
        # and reads one letter and ':' after 'file:' as a Windows drive ('file:a:' is /a:);
        # kafkalog refuses both (the second as a file: URI with a relative path): refusing is
        # the safe side
        colon, slash = uri.find(":"), uri.find("/")
        assert colon != -1 and (slash == -1 or colon < slash), uri
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*\Z", uri[:colon]):
            assert re.match(r"file:[A-Za-z]:", uri, re.IGNORECASE), uri
        return
    if want is not None and want != "/":
        want = want.rstrip("/")
    assert (got is None) == (want is None), (uri, got, want)
    if got is not None:
        assert os.path.normpath(got) == os.path.normpath(want), uri


# Stores the sink has no commit for: refused as paths are, before any request is made.
# (s3://, s3a:// and hdfs:// are written: tests/remote/test_spark_remote.py.)
WRITE_REFUSED = [
    "gs://bucket/x",
    "GCS://bucket/x",
    "abfs://c@acct.dfs.core.windows.net/x",
    "abfss://c@acct.dfs.core.windows.net/x",
    "wasbs://c@acct.blob.core.windows.net/x",
    "oss://bucket/x",
]


@pytest.mark.parametrize("uri", WRITE_REFUSED)
def test_write_to_a_store_without_a_commit_is_refused_before_any_request(uri, monkeypatch):
    pytest.importorskip("pyspark.sql.datasource")
    from pyspark.sql import types as T

    from kafkalog.spark import _object_stores
    from kafkalog.spark._source import KafkaLogDataSource
    from kafkalog.storage import store_fs as kstore_fs

    def no_request(*args, **kwargs):
        raise AssertionError(f"a store was opened: {args}")

    monkeypatch.setattr(kstore_fs, "resolve", no_request)
    monkeypatch.setattr(kstore_fs.ArrowFileSystem, "for_uri", no_request)
    schema = T.StructType([T.StructField("topic", T.StringType()),
                           T.StructField("value", T.BinaryType())])
    for overwrite in (False, True):
        with pytest.raises(UnsupportedPathError, match="kafkalog writes log directories") as ei:
            KafkaLogDataSource({"path": uri}).writer(schema, overwrite)
        assert ei.value.uri == uri and repr(uri) in str(ei.value)
    with pytest.raises(UnsupportedPathError):
        _object_stores.RemoteWriteJob(uri, {}, False, "append", "job-x")


def test_spark_write_remote_uri_makes_nothing_local(spark, tmp_path, monkeypatch):
    """save("s3a://bucket/x") used to create ./s3a:/bucket/x; now it goes to the store (here
    an unreachable one: a clear error naming the URI) or is refused (overwrite), and nothing
    is made locally."""
    from pyspark.sql import functions as F

    monkeypatch.chdir(tmp_path)
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    store = {"storage.endpoint_url": "http://127.0.0.1:9", "storage.access_key": "k",
             "storage.secret_key": "s", "storage.retries": "0",
             "storage.connect_timeout": "1", "storage.request_timeout": "2"}
    w = df.write.format("kafkalog").option("topic", "t").options(**store)
    with pytest.raises(Exception, match=r"s3a://bucket/x failed after 1 attempt"):
        w.mode("append").save("s3a://bucket/x")
    with pytest.raises(Exception, match=r"s3a://bucket/x.*overwrite.*not supported on an object"):
        w.mode("overwrite").save("s3a://bucket/x")
    # a store the sink cannot write: refused before any request, by the plain writer and the
    # helper alike
    import kafkalog.spark as ks

    with pytest.raises(Exception, match=r"cannot write 'gs://bucket/x'.*no commit"):
        w.mode("append").save("gs://bucket/x")
    with pytest.raises(UnsupportedPathError, match=r"cannot write 'gs://bucket/x'"):
        ks.write(df, "gs://bucket/x", topic="t", **store)
    assert os.listdir(tmp_path) == []


def test_spark_write_accepts_local_uris(spark, tmp_path, oracle):
    from pyspark.sql import functions as F

    out = str(tmp_path / "out")
    df = spark.range(4, numPartitions=1).select(F.col("id").cast("string").alias("value"))
    df.write.format("kafkalog").mode("append").option("topic", "t").save("file:" + out)
    df.write.format("kafkalog").mode("append").option("topic", "t").save("file://localhost" + out)
    assert [r["offset"] for r in oracle.rows(out, headers=False)] == list(range(8))
    assert spark.read.format("kafkalog").load("file://" + out).count() == 8
