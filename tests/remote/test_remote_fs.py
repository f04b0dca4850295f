"""The object-store backend of kafkalog.storage.fs against the S3 test server."""
from __future__ import annotations

import os

from kafkalog.storage import fs as _fs
from kafkalog.storage import store_fs as _store_fs


def test_resolve_local_and_file_uri(tmp_path):
    assert _store_fs.resolve(str(tmp_path)) == (_fs.LOCAL, str(tmp_path))
    assert _store_fs.resolve("file://" + str(tmp_path)) == (_fs.LOCAL, str(tmp_path))
    assert _store_fs.resolve(tmp_path) == (_fs.LOCAL, str(tmp_path))


def test_listing_matches_local(s3_root, log_root):
    fs, root = _store_fs.resolve(s3_root)
    assert isinstance(fs, _store_fs.ArrowFileSystem)
    local = [(e.name, e.kind) for e in _fs.LOCAL.list_dir(log_root)]
    remote = [(e.name, e.kind) for e in fs.list_dir(root)]
    assert remote == local
    d = sorted(e.name for e in _fs.LOCAL.list_dir(log_root) if e.kind == _fs.DIRECTORY)[0]
    before = fs.requests
    entries = fs.list_dir(_fs.join(root, d))
    assert fs.requests == before + 1  # one listing, no request per file
    for e in entries:
        assert fs.size(e.path) == os.path.getsize(os.path.join(log_root, d, e.name))
    assert fs.requests == before + 1
    assert fs.kind(_fs.join(root, "nope")) == _fs.MISSING
    assert fs.glob(root + "/*/*.log") == sorted(
        root + "/" + os.path.relpath(p, log_root)
        for p in _fs.LOCAL.glob(log_root + "/*/*.log"))


def test_ranged_reads_equal_local(s3_root, log_root):
    fs, root = _store_fs.resolve(s3_root, {"block_size": 64 * 1024})
    logs = _fs.LOCAL.glob(log_root + "/*/*.log")
    big = max(logs, key=os.path.getsize)
    data = open(big, "rb").read()
    with fs.open_read(root + "/" + os.path.relpath(big, log_root)) as f:
        assert f.size == len(data) and f.map() is None
        for pos, n in [(0, 61), (10, 5), (len(data) - 3, 100), (1000, 200_000), (7, 0)]:
            assert f.read(pos, n) == data[pos:pos + n]
        assert f.read(len(data) + 5, 10) == b""
