"""Reading log directories from an S3-compatible server gives exactly what reading the same
files from local disk gives: the same tables (every partition, every codec, legacy formats,
read_committed, position ranges, windows smaller than a batch), the same errors for damaged
objects; bad locations give one clear error naming the URI.  Runs in both twins."""
from __future__ import annotations

import os
import time

import pytest

from kafkalog.errors import KafkaLogError, KafkaStorageError
from kafkalog.storage import fs as _fs
from kafkalog.storage import remote

from .conftest import BUCKET, upload

pa = pytest.importorskip("pyarrow")
ka = pytest.importorskip("kafkalog.arrow")

COLUMNS = ["key", "value", "offset", "timestamp", "timestampType", "headers"]


def _entry_positions(raw: bytes):
    """The file positions where entries start (what an index or a planner hands a reader)."""
    out, pos = [], 0
    while len(raw) - pos >= 12:
        out.append(pos)
        pos += 12 + int.from_bytes(raw[pos + 8:pos + 12], "big")
    return out


def partitions(local_root):
    return sorted(n for n in os.listdir(local_root) if os.path.isdir(os.path.join(local_root, n)))


@pytest.mark.parametrize("read_committed", [False, True])
def test_every_partition_reads_the_same(sample, read_committed):
    local, uri = sample
    names = partitions(local)
    assert len(names) >= 4
    for name in names:
        want = ka.to_arrow(os.path.join(local, name), read_committed=read_committed,
                           batch_metadata=True)
        got = ka.to_arrow(f"{uri}/{name}", read_committed=read_committed, batch_metadata=True)
        assert got.num_rows == want.num_rows > 0, name
        assert got.equals(want), name


def test_small_windows_and_entries_larger_than_a_window(sample, monkeypatch):
    """Windows of 1 KiB (every batch spans windows) and of 64 KiB give the same batches."""
    local, uri = sample
    for window in (1024, 5000, 64 * 1024):
        monkeypatch.setattr(ka, "REMOTE_READ_BYTES", window)
        for name in partitions(local):
            want = ka.to_arrow(os.path.join(local, name), COLUMNS)
            got = pa.Table.from_batches(
                list(ka.iter_batches(f"{uri}/{name}", COLUMNS, max_rows=97)), schema=want.schema)
            assert got.equals(want), (window, name)


def test_one_segment_file_and_position_ranges(sample):
    local, uri = sample
    name = partitions(local)[0]
    seg = sorted(n for n in os.listdir(os.path.join(local, name)) if n.endswith(".log"))[0]
    path = os.path.join(local, name, seg)
    cuts = _entry_positions(open(path, "rb").read())
    assert len(cuts) > 4
    a, b = cuts[len(cuts) // 3], cuts[2 * len(cuts) // 3]
    for start, stop in ((0, None), (0, b), (a, None), (a, b), (a, a + 1)):
        want = ka.to_arrow(path, start_position=start, stop_position=stop)
        got = ka.to_arrow(f"{uri}/{name}/{seg}", start_position=start, stop_position=stop)
        assert got.equals(want), (start, stop)


def test_a_position_pruned_read_fetches_only_its_range(s3_server, tmp_path, monkeypatch):
    """The reads of a range near the end of a 4 MiB segment fetch < 5 % of what a full read
    does (counted at the ranged-read call)."""
    from kafkalog import MemoryRecordsBuilder

    data = bytearray()
    offset = 0
    while len(data) < 4 << 20:
        b = MemoryRecordsBuilder(2, "none", offset)
        for i in range(50):
            b.append(1_700_000_000_000 + offset + i, b"k%d" % (offset + i), b"v" * 300)
        offset += 50
        data += b.build()
    d = tmp_path / "big-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(bytes(data))
    upload(str(tmp_path), BUCKET, "pruned")
    fetched = []
    real_read = remote.RemoteFile.read

    def counting(self, position, length):
        out = real_read(self, position, length)
        fetched.append(len(out))
        return out

    monkeypatch.setattr(remote.RemoteFile, "read", counting)
    uri = f"s3://{BUCKET}/pruned/big-0/00000000000000000000.log"
    full = ka.to_arrow(uri)
    full_bytes, fetched[:] = sum(fetched), []
    cuts = _entry_positions(bytes(data))
    start = next(c for c in cuts if c >= len(data) - len(data) // 50)
    part = ka.to_arrow(uri, start_position=start)
    assert 0 < part.num_rows < full.num_rows
    assert part.equals(ka.to_arrow(str(d / "00000000000000000000.log"), start_position=start))
    assert full_bytes >= len(data)
    assert sum(fetched) < 0.05 * full_bytes, (sum(fetched), full_bytes)


def test_a_truncated_object_reads_as_the_truncated_file(sample, tmp_path):
    local, uri = sample
    name = partitions(local)[0]
    seg = sorted(n for n in os.listdir(os.path.join(local, name)) if n.endswith(".log"))[0]
    raw = open(os.path.join(local, name, seg), "rb").read()
    cut = tmp_path / "cut" / name
    cut.mkdir(parents=True)
    (cut / seg).write_bytes(raw[: len(raw) - 100])
    upload(str(tmp_path / "cut"), BUCKET, "cut")
    want = ka.to_arrow(str(cut))
    got = ka.to_arrow(f"s3://{BUCKET}/cut/{name}")
    assert got.equals(want) and got.num_rows > 0


def test_a_corrupt_object_fails_as_the_file_does_naming_the_uri(sample, tmp_path):
    local, uri = sample
    name = partitions(local)[0]
    seg = sorted(n for n in os.listdir(os.path.join(local, name)) if n.endswith(".log"))[0]
    raw = bytearray(open(os.path.join(local, name, seg), "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "bad" / name
    bad.mkdir(parents=True)
    (bad / seg).write_bytes(bytes(raw))
    upload(str(tmp_path / "bad"), BUCKET, "bad")
    with pytest.raises(KafkaLogError) as local_err:
        ka.to_arrow(str(bad))
    with pytest.raises(KafkaLogError) as remote_err:
        ka.to_arrow(f"s3://{BUCKET}/bad/{name}")
    assert type(remote_err.value) is type(local_err.value)
    assert remote_err.value.position == local_err.value.position
    assert remote_err.value.path == f"s3://{BUCKET}/bad/{name}/{seg}"


def test_missing_bucket_prefix_and_object(s3_server):
    for uri in (f"s3://no-such-bucket-{os.getpid()}/logs/t-0", f"s3://{BUCKET}/no/such/prefix-0",
                f"s3://{BUCKET}/backup/logs/{'x' * 5}-0/00000000000000000000.log"):
        with pytest.raises(KafkaStorageError) as e:
            ka.to_arrow(uri)
        assert uri in str(e.value) or e.value.path == uri, (uri, str(e.value))


def test_unreachable_endpoint_is_bounded_and_named():
    t = time.monotonic()
    with pytest.raises(KafkaStorageError) as e:
        ka.to_arrow("s3://bucket/logs/t-0", storage_options={
            "endpoint_url": "http://127.0.0.1:9", "access_key": "a", "secret_key": "b",
            "connect_timeout": 0.5, "request_timeout": 1, "retries": 1, "retry_backoff": 0.05})
    assert time.monotonic() - t < 30
    assert "s3://bucket/logs/t-0" in str(e.value) and "reached" in str(e.value)


def test_missing_credentials_say_how_to_give_them(monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN",
              "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(remote.RemoteStorageError) as e:
        ka.to_arrow("s3://bucket/logs/t-0", storage_options={"endpoint_url": "http://127.0.0.1:9"})
    assert "s3://bucket/logs/t-0" in str(e.value) and "AWS_ACCESS_KEY_ID" in str(e.value)


@pytest.mark.parametrize("uri,words", [
    ("nosuch://bucket/x", "nosuch://"),
    ("hdfs://127.0.0.1:9/logs/t-0", "hdfs://"),
    ("s3:bucket/x", "s3://"),
])
def test_unsupported_locations_name_the_uri_and_the_fix(uri, words):
    with pytest.raises(KafkaStorageError) as e:
        ka.to_arrow(uri)
    assert uri in str(e.value) and words in str(e.value)


def test_bad_storage_options_are_refused():
    with pytest.raises(remote.RemoteStorageError, match="unknown storage option 'endpoint'"):
        remote.resolve("s3://b/x", {"endpoint": "http://x"})
    with pytest.raises(remote.RemoteStorageError, match="retries"):
        remote.resolve("s3://b/x", {"retries": -1})


def test_file_uris_are_local(sample):
    local, _ = sample
    name = partitions(local)[0]
    fs, path = remote.resolve("file://" + os.path.join(local, name))
    assert fs is _fs.LOCAL and path == os.path.join(local, name)
    assert ka.to_arrow("file://" + os.path.join(local, name)).equals(ka.to_arrow(os.path.join(local, name)))


class _ShortReads:
    """A pyarrow-like file system whose reads come back short."""

    class _File:
        def read_at(self, n, pos):
            return b"x" * (n // 2)

        def close(self):
            pass

    def open_input_file(self, path):
        return self._File()


def test_a_short_read_is_never_data():
    fs = remote.ArrowFileSystem(_ShortReads(), "s3", dict(remote._DEFAULTS, retries=2, retry_backoff=0.0))
    f = remote.RemoteFile(fs, "b/k", 100)
    with pytest.raises(KafkaStorageError, match="short read") as e:
        f.read(0, 100)
    assert e.value.path == "s3://b/k"


def test_a_reader_that_stops_early_leaves_nothing_running(sample):
    """Abandoning ``iter_batches`` mid-way (reads of the next segment already in flight) closes
    what was opened and leaves no reader thread behind."""
    import threading

    local, uri = sample
    sources = [f"{uri}/{n}" for n in partitions(local)]
    it = ka.iter_batches(sources, max_rows=10)
    first = next(it)
    assert first.num_rows > 0
    it.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("kafkalog-read")]
    whole = ka.to_arrow(sources)
    assert whole.equals(ka.to_arrow([os.path.join(local, n) for n in partitions(local)]))
