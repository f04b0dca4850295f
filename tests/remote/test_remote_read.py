"""The same read tests over a local log root and over its copy on the S3 test server: identical
tables (full, column subsets, read_committed, offset-pruned), identical errors."""
from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog.storage import fs as _fs  # noqa: E402

SMALL_BLOCKS = {"block_size": 64 * 1024}


# "s3" asks for the S3 test server at run time (getfixturevalue), so it carries its marker here
@pytest.fixture(params=["local", "file-uri", pytest.param("s3", marks=pytest.mark.s3)])
def where(request, log_root):
    """(root location, storage_options) of one copy of the same log root."""
    if request.param == "local":
        return log_root, None
    if request.param == "file-uri":
        return "file://" + log_root, None
    return request.getfixturevalue("s3_root"), dict(SMALL_BLOCKS)


def partitions(log_root):
    return sorted(e.name for e in _fs.LOCAL.list_dir(log_root) if e.kind == _fs.DIRECTORY)


def test_tables_identical(where, log_root):
    root, so = where
    cols = ka._column_names(None, True)
    for d in partitions(log_root):
        want = ka.to_arrow(os.path.join(log_root, d), cols)
        got = ka.to_arrow(_fs.join(root, d), cols, storage_options=so)
        assert got.equals(want), d
        assert want.num_rows > 0
        want_c = ka.to_arrow(os.path.join(log_root, d), ["offset", "value"],
                             read_committed=True)
        got_c = ka.to_arrow(_fs.join(root, d), ["offset", "value"], read_committed=True,
                            storage_options=so)
        assert got_c.equals(want_c), d
        it = list(ka.iter_batches(_fs.join(root, d), ["key", "offset"], max_rows=100,
                                  storage_options=so))
        assert pa.Table.from_batches(it).equals(want.select(["key", "offset"])
                                                .combine_chunks().cast(it[0].schema)
                                                if it else want.select(["key", "offset"]))


def test_single_segment_file(where, log_root):
    root, so = where
    d = partitions(log_root)[0]
    seg = sorted(n for n in os.listdir(os.path.join(log_root, d)) if n.endswith(".log"))[-1]
    want = ka.to_arrow(os.path.join(log_root, d, seg))
    got = ka.to_arrow(_fs.join(_fs.join(root, d), seg), storage_options=so)
    assert got.equals(want)


@pytest.mark.parametrize("frac", [(0.0, 0.1), (0.5, 0.52), (0.9, 1.0), (0.3, None)])
def test_offset_pruned_equals_filtered(where, log_root, frac):
    root, so = where
    for d in partitions(log_root):
        full = ka.to_arrow(os.path.join(log_root, d), ["offset", "value"])
        offs = full.column("offset").to_pylist()
        if not offs:
            continue
        lo = offs[int(frac[0] * (len(offs) - 1))]
        hi = None if frac[1] is None else offs[int(frac[1] * (len(offs) - 1))]
        want = [r for r in full.to_pylist() if r["offset"] >= lo and (hi is None
                                                                         or r["offset"] < hi)]
        got = ka.to_arrow(_fs.join(root, d), ["offset", "value"], start_offset=lo,
                          end_offset=hi, storage_options=so)
        assert got.to_pylist() == want, (d, lo, hi)
        # without the offset column asked for
        got_v = ka.to_arrow(_fs.join(root, d), ["value"], start_offset=lo, end_offset=hi,
                            storage_options=so)
        assert got_v.column("value").to_pylist() == [r["value"] for r in want]


def test_log_open_file_uri_and_remote_refused(log_root, tmp_path, monkeypatch):
    from kafkalog.errors import KafkaStorageError
    from kafkalog.storage.log import Log

    d = partitions(log_root)[0]
    with Log.open(os.path.join(log_root, d), read_only=True) as a, \
            Log.open("file://" + os.path.join(log_root, d), read_only=True) as b:
        assert (a.log_start_offset, a.log_end_offset) == (b.log_start_offset, b.log_end_offset)
        assert a.read(a.log_start_offset).buffer() == b.read(b.log_start_offset).buffer()
    monkeypatch.chdir(tmp_path)
    for ro in (True, False):
        with pytest.raises(KafkaStorageError) as ei:
            Log.open("s3://bucket/prefix/orders-0", read_only=ro)
        assert "s3://bucket/prefix/orders-0" in str(ei.value)
    assert os.listdir(tmp_path) == []  # no local directory named after the scheme


def test_crc_bad_batch_past_range_same_as_local(s3_env, tmp_path):
    """Issue 27 (9): a CRC-bad batch just past the requested range: the same rows locally and
    from S3 (and the same error for a read that holds it)."""
    from storage.test_read_model import crc_bad_past_range

    from kafkalog.errors import CorruptRecordError

    from .s3_support import BUCKET, upload_tree

    d = crc_bad_past_range(tmp_path)
    upload_tree(s3_env, str(tmp_path), BUCKET, "readmodel9")
    uri = f"s3://{BUCKET}/readmodel9/t-0"
    for src in (d, uri):
        got = ka.to_arrow(src, ["offset"], start_offset=60, end_offset=89)
        assert got.column("offset").to_pylist() == list(range(60, 89)), src
        with pytest.raises(CorruptRecordError):
            ka.to_arrow(src)
