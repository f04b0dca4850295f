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
    if kind in ("passwd", "png"):
        assert f"Ignoring unknown file {target}" in r.err  # kafka-dump-log's text is kept
        assert "expected Kafka log files" in errors[0]
    if kind == "missing":  # missing, not unknown: one line that says so
        assert r.err_lines == [f"kafkalog dump: error: {target}: no such file or directory"], r


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
    parts = [json.loads(line) for line in s.lines
             if line and json.loads(line).get("type") == "partition"]
    assert summary["records"] == 8 == sum(p["records"] for p in parts)
    assert summary["segments"] == sum(p["segments"] for p in parts)
    assert summary["batches"] == sum(p["batches"] for p in parts) == 4


# -- bytes that are not batches: damage for stats as for verify (issue 25) --------------------
STATS_FAILED = ("kafkalog stats: error: 1 error(s) in the data (listed with the statistics); "
                "kafkalog verify checks CRCs, offsets and indexes too")


def _walks():
    """stats' batch walk: the pure twin, and the compiled one when it is built."""
    import importlib
    import os

    out = [importlib.import_module("kafkalog._dump_py")]
    if os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() not in ("1", "true", "yes", "on"):
        try:
            out.append(importlib.import_module("kafkalog._dump"))
        except ImportError:  # pragma: no cover - a build without the extension
            pass
    return out


@pytest.fixture(params=_walks(), ids=lambda m: m.__name__.rpartition(".")[2])
def stats_walk(request, monkeypatch):
    from kafkalog.tools import stats

    monkeypatch.setattr(stats, "_walk", request.param)
    return request.param


def _good():
    return v2_batch([(1, b"k", b"v"), (2, b"k2", b"v2")])


@pytest.mark.parametrize("case", ["random", "torn-batch", "short-tail"])
def test_stats_reports_bytes_that_are_not_batches_and_fails(tmp_path, stats_walk, case):
    import json
    import random

    good = _good()
    if case == "random":  # a file of random bytes named like a segment
        raw = random.Random(25).randbytes(5000)
        valid, batches, problem = 0, 0, (
            "position 0: corrupt batch header: size -318618899 is below the minimum record "
            "overhead 14; the rest of the segment (5000 bytes) cannot be read")
    elif case == "torn-batch":  # a batch cut short after 40 bytes
        raw = good + good[:40]
        valid, batches, problem = len(good), 1, (
            f"position {len(good)}: truncated batch: {len(good)} bytes declared, 40 present "
            "(a torn write; a broker truncates it on recovery)")
    else:
        raw = good + bytes(10)
        valid, batches, problem = len(good), 1, (
            f"position {len(good)}: 10 bytes at the end are too few for a batch header "
            "(a torn write)")
    seg = write(tmp_path / "t-0" / "00000000000000000000.log", raw)
    r = run_cli("stats", str(seg))
    assert r.rc == 1, r
    assert f"    batches {batches}, records {2 * batches}, bytes {len(raw)} (valid {valid}), " \
        in r.text
    assert f"    error: {problem}" in r.lines, r
    assert r.err_lines == [STATS_FAILED], r
    r = run_cli("stats", "--json", "--shallow", str(seg.parent))
    assert r.rc == 1, r
    (part,) = [o for o in map(json.loads, r.lines) if o["type"] == "partition"]
    assert part["errors"] == [problem]
    v = run_cli("verify", str(seg))
    assert v.rc == 1 and problem.split(": ", 1)[1] in v.text  # verify says the same


def test_stats_of_good_data_still_exits_0(tmp_path, stats_walk):
    seg = write(tmp_path / "t-0" / "00000000000000000000.log", _good() + _good())
    r = run_cli("stats", str(seg))
    assert r.rc == 0 and r.err == "" and "error" not in r.text, r


# -- a partition directory without a segment: nothing to read (README: exit 1, one line) -------
@pytest.mark.parametrize("kind,what", [
    ("index-only", "only 2 index file(s) whose .log is missing"),
    ("empty", "an empty directory"),
])
def test_verify_and_stats_of_a_partition_without_segments_fail(tmp_path, kind, what):
    d = tmp_path / "t-0"
    d.mkdir()
    if kind == "index-only":
        write(d / "00000000000000000000.index", b"")
        write(d / "00000000000000000000.timeindex", b"")
    line = (f"no log segments to read: expected <20-digit offset>.log files in this partition "
            f"directory ({what})")
    r = run_cli("verify", str(d))
    assert r.rc == 1, r
    assert r.lines[0] == f"{d}: error: {line}", r
    assert len(r.lines) == 2 and r.lines[1].startswith(
        "FAILED: 1 partition(s), 0 segment(s), 0 batches, 0 bytes in "), r
    r = run_cli("stats", str(d))
    assert (r.rc, r.out, r.err_lines) == (1, b"", [f"kafkalog stats: error: {d}: {line}"]), r


# -- what a newcomer mistypes (issue 25) ---------------------------------------------------------
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_dump_of_a_missing_path_names_it_missing(tmp_path, json_flag):
    target = tmp_path / "nonexistent" / "orders-0"
    r = run_cli("dump", *json_flag, str(target))
    assert r.rc == 1, r
    assert r.err_lines == [f"kafkalog dump: error: {target}: no such file or directory"], r
    assert "Ignoring" not in r.err and r.lines == ([] if json_flag else [f"Dumping {target}"])


@pytest.mark.parametrize("args,line", [
    (["dump", "--fles", "x"],
     "kafkalog dump: error: unrecognized arguments: --fles (did you mean --files?)"),
    (["--fles", "x"],  # kafka-dump-log's command line, no sub-command
     "kafkalog dump: error: unrecognized arguments: --fles (did you mean --files?)"),
    (["verify", "--deeep", "x"],
     "kafkalog verify: error: unrecognized arguments: --deeep (did you mean --deep?)"),
    (["stats", "--jsn", "x"],
     "kafkalog stats: error: unrecognized arguments: --jsn (did you mean --json?)"),
    (["dump", "--print-data-logg=1", "x"],
     "kafkalog dump: error: unrecognized arguments: --print-data-logg=1 (did you mean "
     "--print-data-log?)"),
    (["dump", "--no-such-flag", "x"],
     "kafkalog dump: error: unrecognized arguments: --no-such-flag (see 'kafkalog dump --help')"),
    (["dump", "--max-bytes", "lots", "x"],
     "kafkalog dump: error: argument --max-bytes: invalid integer: 'lots' "
     "(see 'kafkalog dump --help')"),
])
def test_usage_errors_are_one_line_with_a_suggestion(args, line):
    r = run_cli(*args)
    assert (r.rc, r.out, r.err_lines) == (2, b"", [line]), r


@pytest.mark.parametrize("name", ["empty.log", "empty.index"])
def test_segment_name_without_a_base_offset_says_what_to_do(chdir_tmp, name):
    write(chdir_tmp / name, b"")
    suffix = name[len("empty"):]
    r = run_cli("dump", name)
    assert r.rc == 1, r
    assert r.err_lines == [
        f"kafkalog dump: error: {name}: the file name is not <20-digit offset>{suffix}: Kafka "
        "names a segment's files after the segment's base offset (the offset of its first "
        f"batch, e.g. 00000000000000000000{suffix}); rename or copy the file to that name to "
        "dump it"], r


@pytest.mark.parametrize("command", ["verify", "stats", "dump"])
def test_a_log_root_named_like_a_partition_is_read_as_a_root(tmp_path, command):
    """kafka-logs-1 (a broker's log dir) holds partitions: every command reads them all."""
    root = tmp_path / "kafka-logs-1"
    make_log_dir(root / "orders-0", [v2_batch([(1, b"k", b"v")])])
    make_log_dir(root / "orders-1", [v2_batch([(1, b"k", b"v"), (2, b"k", b"w")])])
    r = run_cli(command, str(root))
    assert r.rc == 0, r
    if command == "verify":
        assert r.lines[-1].startswith("OK: 2 partition(s), 2 segment(s), 2 batches, "), r
    elif command == "stats":
        assert f"{root / 'orders-0'}: 1 segment(s)" in r.lines
        assert f"{root / 'orders-1'}: 1 segment(s)" in r.lines
    else:
        assert [ln for ln in r.lines if ln.startswith("Dumping ")] == [
            f"Dumping {root / 'orders-0' / '00000000000000000000.log'}",
            f"Dumping {root / 'orders-1' / '00000000000000000000.log'}"]
