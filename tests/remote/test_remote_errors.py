"""Bad input against object stores: one clear KafkaStorageError naming the URI (and the fix),
never a hang, never a partial read returned as data."""
from __future__ import annotations

import os
import socket
import time

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog.errors import KafkaStorageError  # noqa: E402
from kafkalog.storage import fs as _fs  # noqa: E402
from kafkalog.storage import store_fs as _store_fs  # noqa: E402

from .s3_support import BUCKET, s3_client, upload_tree  # noqa: E402

FAST = {"retries": 1, "backoff": 0.05, "connect_timeout": 2, "request_timeout": 5}
PREFIX_OPTS = "options"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint(s3_env):
    uri = f"s3://{BUCKET}/nowhere/t-0"
    t = time.monotonic()
    with pytest.raises(KafkaStorageError) as ei:
        ka.to_arrow(uri, storage_options=dict(
            FAST, endpoint_override=f"127.0.0.1:{_closed_port()}", scheme="http"))
    assert time.monotonic() - t < 60
    assert uri in str(ei.value) and "endpoint" in str(ei.value)


def test_missing_credentials(s3_env, monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
              "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    uri = f"s3://{BUCKET}/backup/logs/orders-0"
    with pytest.raises(KafkaStorageError) as ei:
        ka.to_arrow(uri)
    assert uri in str(ei.value) and "AWS_ACCESS_KEY_ID" in str(ei.value)


@pytest.mark.parametrize("uri", [
    "s3://no-such-bucket-kl/logs/orders-0",
    f"s3://{BUCKET}/no/such/prefix/orders-0",
    f"s3://{BUCKET}/no/such/prefix/00000000000000000000.log",
])
def test_missing_bucket_or_prefix(s3_root, uri):
    with pytest.raises(KafkaStorageError) as ei:
        ka.to_arrow(uri, storage_options=FAST)
    assert uri in str(ei.value)
    assert "no such file" in str(ei.value) or "NoSuchBucket" in str(ei.value)


def test_scheme_without_support(monkeypatch):
    import pyarrow.fs as pafs

    monkeypatch.delattr(pafs, "S3FileSystem")
    with pytest.raises(KafkaStorageError) as ei:
        ka.to_arrow("s3://b/p/t-0")
    assert "s3://b/p/t-0" in str(ei.value) and "pip install" in str(ei.value)
    with pytest.raises(KafkaStorageError) as ei:
        ka.to_arrow("nosuchscheme://b/p/t-0")
    assert "nosuchscheme://b/p/t-0" in str(ei.value)


def test_truncated_segment_same_as_local(s3_env, log_root, tmp_path):
    """A segment cut mid-entry reads the same from S3 as from disk (rows or error)."""
    d = sorted(e.name for e in _fs.LOCAL.list_dir(log_root) if e.kind == _fs.DIRECTORY)[0]
    src = os.path.join(log_root, d)
    local = tmp_path / d
    local.mkdir()
    logs = sorted(n for n in os.listdir(src) if n.endswith(".log"))
    data = open(os.path.join(src, logs[0]), "rb").read()
    for cut in (len(data) - 7, len(data) // 2 + 3, 30):
        (local / logs[0]).write_bytes(data[:cut])
        upload_tree(s3_env, str(tmp_path), BUCKET, f"trunc{cut}")
        uri = f"s3://{BUCKET}/trunc{cut}/{d}/{logs[0]}"

        def outcome(source, **kw):
            try:
                t = ka.to_arrow(source, **kw)
                return ("rows", t.to_pylist())
            except Exception as e:  # compare the kind and the place of the failure
                return (type(e).__name__, getattr(e, "position", None))

        assert outcome(uri, storage_options={"block_size": 65536}) == outcome(
            str(local / logs[0])), cut


def test_object_shrunk_after_listing_is_an_error(s3_root, log_root):
    """A ranged read that returns fewer bytes than the listed size is never data."""
    fs, root = _store_fs.resolve(s3_root, dict(FAST, block_size=65536))
    d = sorted(e.name for e in _fs.LOCAL.list_dir(log_root) if e.kind == _fs.DIRECTORY)[0]
    entries = fs.list_dir(_fs.join(root, d))
    log = [e for e in entries if e.name.endswith(".log")][0]
    f = fs.open_read(log.path)
    key = log.path[len("s3://" + BUCKET + "/"):]
    client = s3_client(os.environ["AWS_ENDPOINT_URL"])
    body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    try:
        client.put_object(Bucket=BUCKET, Key=key, Body=body[: f.size // 2])
        with pytest.raises(KafkaStorageError) as ei:
            f.read(0, f.size)
        assert log.path in str(ei.value)
    finally:
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
        f.close()


def test_offset_pruned_read_fetches_little(big_partition):
    """Count the bytes fetched: a read of a few offsets fetches < 5% of a full read."""
    local, uri = big_partition
    so = {"block_size": 64 * 1024}
    offs = ka.to_arrow(local, ["offset"]).column("offset").to_pylist()
    counted = []
    orig = _store_fs.ArrowFileSystem.for_uri

    def spy(u, opts=None):
        got = orig(u, opts)
        counted.append(got)
        return got

    seg_bytes = sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local)
                    if n.endswith(".log"))
    _store_fs.ArrowFileSystem.for_uri = staticmethod(spy)
    try:
        for lo in (offs[len(offs) // 2], offs[-20], offs[5]):
            counted.clear()
            t = ka.to_arrow(uri, ["offset", "value"], start_offset=lo, end_offset=lo + 10,
                            storage_options=so)
            assert t.to_pylist() == ka.to_arrow(local, ["offset", "value"], start_offset=lo,
                                                end_offset=lo + 10).to_pylist()
            assert t.column("offset").to_pylist() == [o for o in offs if lo <= o < lo + 10]
            pruned = sum(f.bytes_read for f in counted)
            counted.clear()
            ka.to_arrow(uri, ["offset"], storage_options=so)
            full = sum(f.bytes_read for f in counted)
            assert full >= seg_bytes
            assert pruned < 0.05 * full, (lo, pruned, full)
            print(f"offset {lo}: pruned read fetched {pruned} of {full} bytes")
    finally:
        _store_fs.ArrowFileSystem.for_uri = orig


def test_silent_endpoint_times_out(s3_env):
    """A server that accepts connections and never answers: bounded by request_timeout."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    uri = f"s3://{BUCKET}/silent/t-0"
    try:
        t0 = time.monotonic()
        with pytest.raises(KafkaStorageError) as ei:
            ka.to_arrow(uri, storage_options={
                "retries": 1, "backoff": 0.05, "connect_timeout": 1, "request_timeout": 1,
                "endpoint_override": f"127.0.0.1:{srv.getsockname()[1]}", "scheme": "http"})
        assert time.monotonic() - t0 < 30
        assert uri in str(ei.value)
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


class _Flaky:
    """A pyarrow file handle whose first ``fail`` reads raise, and whose reads return
    ``short`` bytes fewer than asked when ``short`` is set."""

    def __init__(self, inner, state):
        self.inner = inner
        self.state = state

    def read_at(self, n, pos):
        if self.state["fail"] > 0:
            self.state["fail"] -= 1
            raise OSError("connection reset by peer (injected)")
        data = self.inner.read_at(n, pos)
        return data[: max(0, len(data) - self.state.get("short", 0))]

    def close(self):
        self.inner.close()


@pytest.mark.parametrize("fail,short,ok", [(0, 0, True), (2, 0, True), (5, 0, False),
                                            (0, 1, False)])
def test_retries_then_error_never_short(s3_root, log_root, fail, short, ok):
    fs, root = _store_fs.resolve(s3_root, {"retries": 2, "backoff": 0.01, "block_size": 65536})
    state = {"fail": fail, "short": short}
    real = fs.pafs

    class Wrapped:
        def __getattr__(self, name):
            return getattr(real, name)

        def open_input_file(self, info):
            return _Flaky(real.open_input_file(info), state)

    fs.pafs = Wrapped()
    d = sorted(e.name for e in _fs.LOCAL.list_dir(log_root) if e.kind == _fs.DIRECTORY)[0]
    log = [e for e in fs.list_dir(_fs.join(root, d)) if e.name.endswith(".log")][0]
    want = open(os.path.join(log_root, d, log.name), "rb").read()
    with fs.open_read(log.path) as f:
        if ok:
            assert f.read(0, f.size) == want
        else:
            with pytest.raises(KafkaStorageError) as ei:
                f.read(0, f.size)
            assert log.path in str(ei.value)
            assert "attempt" in str(ei.value)


@pytest.mark.parametrize("option,value,exc", [
    ("retries", -1, ValueError),
    ("retries", 101, ValueError),
    ("retries", "3", TypeError),
    ("retries", 2.0, TypeError),
    ("block_size", 4096, ValueError),
    ("block_size", True, TypeError),
    ("backoff", -0.5, ValueError),
    ("backoff", float("inf"), ValueError),
    ("connect_timeout", 0, ValueError),
    ("request_timeout", float("nan"), ValueError),
    ("request_timeout", "30", TypeError),
])
def test_bad_storage_options_are_refused_before_any_request(log_root, monkeypatch, option, value,
                                                            exc):
    """A value no request could use (``retries: -1`` made every read fail without a request,
    blaming the endpoint and credentials) is refused up front, naming the option, whatever
    the location."""
    import re

    from kafkalog.storage.log import Log

    def no_store(*_a, **_k):
        raise AssertionError("a store was set up for options that cannot work")

    monkeypatch.setattr(_store_fs.ArrowFileSystem, "_s3", staticmethod(no_store))
    opts = dict(FAST, **{option: value})
    uri = f"s3://{BUCKET}/{PREFIX_OPTS}/orders-0"
    for call in (lambda: ka.to_arrow(uri, storage_options=opts),
                 lambda: Log.open(uri, read_only=True, storage_options=opts),
                 lambda: _store_fs.resolve(log_root, opts)):
        with pytest.raises(exc, match=re.escape(f"storage_options[{option!r}]")) as ei:
            call()
        assert repr(value) in str(ei.value) or str(value) in str(ei.value)


def test_good_storage_options_are_typed():
    o = _store_fs.remote_options({"retries": 0, "backoff": 0, "connect_timeout": 1,
                                  "block_size": 65536, "endpoint_override": "elsewhere"})
    assert o == _store_fs.RemoteOptions(65536, 0, 0.0, 1.0, 30.0)
    assert isinstance(o.backoff, float) and isinstance(o.connect_timeout, float)
