"""What a user sees when a command is given something it cannot read: one line saying what
was expected, and an exit status that says so (1: nothing readable / problems, 2: usage)."""

from __future__ import annotations

import pytest

from .conftest import make_log_dir, run_cli, v2_batch, write

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


@pytest.fixture
def log_dir(tmp_path):
    return make_log_dir(tmp_path / "t-0", [v2_batch([(1, b"k", b"v")])])


@pytest.mark.parametrize("kind", ["missing", "passwd", "png", "index-only-dir", "empty-dir"])
def test_dump_with_nothing_readable_fails(tmp_path, kind):
    if kind == "missing":
        target = tmp_path / "nope"
    elif kind == "passwd":
        target = write(tmp_path / "passwd", b"root:x:0:0:root:/root:/bin/bash\n")
    elif kind == "png":
        target = write(tmp_path / "picture.png", PNG)
    elif kind == "index-only-dir":
        target = tmp_path / "t-0"
        write(target / "00000000000000000000.index", b"")
        write(target / "00000000000000000000.timeindex", b"")
    else:
        target = tmp_path / "t-0"
        target.mkdir()
    r = run_cli("dump", str(target))
    assert r.rc == 1, r
    errors = [line for line in r.err_lines if "error:" in line]
    assert len(errors) == 1, r
    if kind in ("passwd", "png", "missing"):
        assert f"Ignoring unknown file {target}" in r.err  # kafka-dump-log's text is kept
        assert "expected Kafka log files" in errors[0]


def test_dump_of_a_readable_file_among_unknown_ones_succeeds(tmp_path, log_dir):
    png = write(tmp_path / "picture.png", PNG)
    r = run_cli("dump", str(png), str(log_dir / "00000000000000000000.log"))
    assert r.rc == 0, r
    assert f"Ignoring unknown file {png}" in r.err


@pytest.mark.parametrize(
    "args",
    [
        ["dump"],
        ["dump", "--max-bytes", "-5", "X"],
        ["dump", "--max-message-size", "-1", "X"],
        ["dump", "--from-offset", "-1", "X"],
        ["dump", "--to-offset", str(2**63), "X"],
        ["verify", "--max-problems", "-1", "X"],
        ["salvage", "--segment-bytes", "-1", "X", "Y"],
    ],
)
def test_invalid_numbers_and_missing_files_are_usage_errors(args, log_dir):
    args = [str(log_dir) if a == "X" else a for a in args]
    r = run_cli(*args)
    assert r.rc == 2, r
    assert r.err.strip(), r


@pytest.mark.parametrize("command", ["verify", "stats"])
@pytest.mark.parametrize("kind", ["passwd", "png"])
def test_verify_and_stats_refuse_a_non_kafka_file(tmp_path, command, kind):
    target = (
        write(tmp_path / "passwd", b"root:x:0:0:root:/root:/bin/bash\n")
        if kind == "passwd"
        else write(tmp_path / "picture.png", PNG)
    )
    r = run_cli(command, str(target))
    assert r.rc == 1, r
    assert "not a Kafka log" in r.err + r.text


@pytest.mark.parametrize("command", ["verify", "stats", "dump"])
def test_a_good_directory_still_succeeds(command, log_dir):
    r = run_cli(command, str(log_dir))
    assert r.rc == 0, r


@pytest.fixture
def without_zstd(monkeypatch):
    from kafkalog import compression

    real = compression._import

    def fake(name):
        if name.startswith("zstandard"):
            raise ImportError(f"No module named {name!r}")
        return real(name)

    monkeypatch.setattr(compression, "_import", fake)
    compression._reset_libraries()
    yield
    monkeypatch.undo()
    compression._reset_libraries()


@pytest.fixture
def zstd_dir(tmp_path):
    pytest.importorskip("zstandard")
    batches = []
    for i in range(6):
        batches.append(
            v2_batch([(1, None, b"v" * 100), (2, b"k", b"w")], base_offset=2 * i,
                     compression="zstd" if i % 2 else "gzip")
        )
    return make_log_dir(tmp_path / "z-0", batches)


@pytest.mark.parametrize("args", [["verify", "--deep"], ["verify", "--deep", "--json"], ["stats"]])
def test_missing_codec_is_a_missing_dependency_not_corruption(zstd_dir, without_zstd, args):
    r = run_cli(*args, str(zstd_dir))
    assert r.rc == 3, r
    missing = [line for line in r.err_lines if "missing dependency" in line]
    assert len(missing) == 1, r  # once, not per batch
    assert "pip install 'kafkalog[zstd]'" in missing[0]
    assert "3 batch(es) not" in r.err
    assert "records do not decode" not in r.text and "FAILED" not in r.text
    if args[0] == "stats":
        assert "unchecked batches 3" in r.text
        assert "records 6," in r.text  # the three readable batches


def test_missing_codec_with_a_real_error_still_fails(zstd_dir, without_zstd):
    log = zstd_dir / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # the last (gzip... or zstd) batch's CRC no longer matches
    log.write_bytes(bytes(data))
    r = run_cli("verify", "--deep", str(zstd_dir))
    assert r.rc == 1, r


def test_verify_and_stats_agree_on_counts(tmp_path):
    import json

    d = make_log_dir(
        tmp_path / "t-0",
        [v2_batch([(1, b"k", b"v"), (2, None, b"w")], base_offset=2 * i, compression="gzip")
         for i in range(4)],
        segment_bytes=200,
    )
    write(tmp_path / "bootstrap.checkpoint", (d / "00000000000000000000.log").read_bytes())
    v = run_cli("verify", "--deep", "--json", str(tmp_path))
    s = run_cli("stats", "--json", str(tmp_path))
    assert v.rc == 0 and s.rc == 0, (v, s)
    summary = json.loads(v.lines[-1])
    parts = [json.loads(line) for line in s.lines if line and json.loads(line).get("type") == "partition"]
    assert summary["records"] == 8 == sum(p["records"] for p in parts)
    assert summary["segments"] == sum(p["segments"] for p in parts)
    assert summary["batches"] == sum(p["batches"] for p in parts) == 4
