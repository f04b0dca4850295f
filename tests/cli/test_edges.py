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
