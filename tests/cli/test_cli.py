"""Command-line behaviour: --version/--help, usage and input errors (non-zero exit, one line),
broken pipes (``| head``), progress bars, and memory that stays flat on large files."""
from __future__ import annotations

import io
import struct
import subprocess
import sys
import textwrap

import pytest

import kafkalog

from .conftest import BASE_TS, child_env, run_child, run_cli, v2_batch, write

LOG = "00000000000000000000.log"


def test_version():
    r = run_cli("--version")
    assert r.rc == 0
    assert r.text.strip() == (f"kafkalog {kafkalog.__version__} "
                              f"(implementation: {kafkalog.IMPLEMENTATION})") or (
        r.text.startswith(f"kafkalog {kafkalog.__version__} (implementation: "
                          f"{kafkalog.IMPLEMENTATION};"))


@pytest.mark.parametrize("cmd,flags", [
    ("dump", ["--files", "--print-data-log", "--deep-iteration", "--skip-record-metadata",
              "--verify-index-only", "--index-sanity-check", "--max-message-size", "--max-bytes",
              "--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder",
              "--key-decoder-class", "--value-decoder-class", "--key-decoder", "--value-decoder",
              "--json", "--binary-encoding", "--print-headers", "--from-offset", "--to-offset",
              "--from-timestamp", "--no-progress"]),
    ("verify", ["--deep", "--json", "--strict", "--quiet", "--max-problems"]),
    ("salvage", ["--deep", "--segment-bytes", "--json"]),
    ("stats", ["--json", "--shallow", "--segments"]),
])
def test_help_explains_every_flag(cmd, flags):
    r = run_cli(cmd, "--help")
    assert r.rc == 0
    for f in flags:
        assert f in r.text, f


def test_usage_errors_exit_2():
    assert run_cli().rc == 2
    r = run_cli("dump", "--no-such-flag")
    assert r.rc == 2 and "unrecognized arguments: --no-such-flag" in r.err
    assert run_cli("frobnicate").rc == 2
    assert run_cli("dump", "--max-bytes", "lots").rc == 2
    assert run_cli("dump").rc == 2  # no files: a usage error, as docs/cli.md says


def test_bad_input_is_one_line_and_exit_1(chdir_tmp):
    cases = [
        ("dump", ["missing.log"]),                           # no such file
        ("dump", ["."]),                                     # a directory without segments
        ("verify", ["nowhere"]),
        ("stats", ["nowhere"]),
        ("salvage", ["nowhere", "out"]),
    ]
    for cmd, args in cases:
        r = run_cli(cmd, *args)
        assert r.rc == 1, (cmd, args, r)
        errs = [ln for ln in r.err_lines if ln]
        if cmd == "verify":  # verify reports the problem in its listing and summary instead
            assert "no such file or directory" in r.text
            continue
        assert len(errs) == 1 and errs[0].startswith(f"kafkalog {cmd}: error: "), (cmd, r)
    write(chdir_tmp / "00000000000000000000.index", b"\x00" * 8)
    r = run_cli("dump", "00000000000000000000.index")
    assert r.rc == 1 and "the log segment of 00000000000000000000.index does not exist" in r.err


def test_unsupported_kafka_decoders_are_refused(chdir_tmp):
    write(chdir_tmp / LOG, v2_batch([(BASE_TS, None, b"x")]))
    for flag in ("--remote-log-metadata-decoder", "--share-group-state-decoder"):
        r = run_cli("dump", flag, LOG)
        assert r.rc == 1 and "not supported" in r.err


def _many_records(path, n=3000):
    batches = [v2_batch([(BASE_TS + i, b"key-%d" % i, b"value-%d " % i * 20)
                         for i in range(j, j + 100)],
                        base_offset=j) for j in range(0, n, 100)]
    write(path, *batches)


def test_broken_pipe_is_quiet(tmp_path):
    _many_records(tmp_path / LOG)
    p = subprocess.Popen([sys.executable, "-m", "kafkalog", "dump", "--print-data-log",
                          str(tmp_path / LOG)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    first = p.stdout.readline()
    p.stdout.close()  # like `| head -1`
    err = p.stderr.read()
    rc = p.wait(timeout=60)
    assert first.startswith(b"Dumping ")
    assert rc == 0
    assert err == b""


def test_python_dash_m_and_exit_codes(tmp_path):
    _many_records(tmp_path / LOG, 200)
    ok = run_child(["dump", "--deep-iteration", str(tmp_path / LOG)])
    assert ok.returncode == 0 and ok.stdout.count(b"\n") == 2 + 2 + 200
    bad = run_child(["dump", str(tmp_path / "nope.log")])
    assert bad.returncode == 1 and bad.stderr.count(b"\n") == 1


def test_progress_bar_draws_on_a_terminal_only():
    from kafkalog.tools._inputs import Progress
    from kafkalog.tools.cli import _progress_default

    s = io.StringIO()
    p = Progress(100 << 20, "x.log", enabled=True, stream=s)
    p._next = 0  # due now
    p.advance(50 << 20)
    assert "50.0%" in s.getvalue() and "MB/s" in s.getvalue()
    p.finish()
    assert s.getvalue().endswith("\r")
    assert _progress_default(False, False) is False
    assert _progress_default(True, True) is True
    # under pytest stderr is not a terminal: no bar by default
    assert _progress_default(None, False) is False


def big_segment(path, size_bytes: int) -> int:
    """A segment of ~size_bytes: one 16 KiB batch template repeated with increasing base offsets
    (the base offset is outside the CRC, so every copy stays valid)."""
    tmpl = bytearray(v2_batch([(BASE_TS + i, b"key-%04d" % i, bytes([65 + i % 26]) * 1000)
                               for i in range(16)]))
    n = max(size_bytes // len(tmpl), 1)
    with open(path, "wb") as f:
        chunk = bytearray()
        for i in range(n):
            struct.pack_into(">q", tmpl, 0, 16 * i)
            chunk += tmpl
            if len(chunk) >= 8 << 20:
                f.write(chunk)
                chunk.clear()
        f.write(chunk)
    return n


_RSS_CHILD = textwrap.dedent("""
    import os, resource, sys
    from kafkalog.tools.cli import main
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    rc = main(sys.argv[1:])
    sys.stderr.write("RSS %d %d\\n" % (rc, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
""")


def _peak_rss_kb(args):
    r = subprocess.run([sys.executable, "-c", _RSS_CHILD, *map(str, args)], env=child_env(),
                       capture_output=True, timeout=300)
    line = [ln for ln in r.stderr.decode().splitlines() if ln.startswith("RSS ")][-1]
    _, rc, kb = line.split()
    return int(rc), int(kb)


@pytest.mark.skipif(sys.platform != "linux",
                    reason="peak RSS via getrusage in KiB and madvise: Linux")
def test_memory_stays_flat_on_a_large_segment(tmp_path):
    small = tmp_path / "small" / LOG
    big = tmp_path / "big" / LOG
    small.parent.mkdir()
    big.parent.mkdir()
    big_segment(small, 1 << 20)
    big_segment(big, 160 << 20)
    size_mb = big.stat().st_size >> 20
    for cmd in (["dump"], ["verify", "--no-progress"], ["dump", "--print-data-log"], ["stats"]):
        rc0, base = _peak_rss_kb([*cmd, small])
        rc1, peak = _peak_rss_kb([*cmd, big])
        assert rc0 == rc1 == 0
        growth_mb = (peak - base) / 1024
        assert growth_mb < 64, \
            f"{cmd}: peak RSS grew by {growth_mb:.0f} MB on a {size_mb} MB segment"


def test_dump_start_up_leaves_heavy_modules_until_needed(tmp_path):
    """A deep dump of a segment without control records never imports kafkalog.control (with
    dataclasses and inspect), uuid or platform: a third of the CLI's start-up.  One with a
    control record imports kafkalog.control at that record and prints it."""
    import subprocess
    import sys

    from kafkalog import MemoryRecordsBuilder

    plain = tmp_path / "plain" / "00000000000000000000.log"
    plain.parent.mkdir()
    b = MemoryRecordsBuilder(2, "none", 0)
    b.append(1_700_000_000_000, b"k", b"v")
    plain.write_bytes(b.build())
    marked = tmp_path / "marked" / "00000000000000000000.log"
    marked.parent.mkdir()
    m = MemoryRecordsBuilder(2, "none", 1, producer_id=7, is_transactional=True,
                             is_control_batch=True)
    m.append(1_700_000_000_000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")
    marked.write_bytes(b.build() + m.build())
    probe = (
        "import sys\n"
        "from kafkalog.tools.cli import main\n"
        "rc = main(['dump', '--deep-iteration', '--print-data-log', '--files', sys.argv[1]])\n"
        "sys.stdout.flush()\n"
        "heavy = [m for m in ('kafkalog.control', 'dataclasses', 'uuid', 'platform')"
        " if m in sys.modules]\n"
        "print(rc, ','.join(heavy) or '-', file=sys.stderr)\n"
    )

    def dump(path):
        p = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                           text=True, check=True)
        return p.stdout, p.stderr.split()

    out, got = dump(plain)
    assert got == ["0", "-"], got
    assert "| offset: 0 CreateTime: 1700000000000" in out
    out, got = dump(marked)
    assert got[0] == "0" and "kafkalog.control" in got[1].split(","), got
    assert "endTxnMarker: COMMIT" in out, out
