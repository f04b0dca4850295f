"""``--from-offset`` / ``--to-offset`` / ``--from-timestamp``: the indexes are used to seek.

To prove that nothing before the target is read, the first batches of the segment are made
unreadable (a batch size below the 14-byte minimum, which aborts a scan from the start, as it
aborts kafka-dump-log); a seek past them through the ``.index``/``.timeindex`` still works.
"""
from __future__ import annotations

import re
import struct

from .conftest import BASE_TS, make_log_dir, run_cli, v2_batch

LOG = "00000000000000000000.log"


def _log(tmp, n=20, per=4, start=0, name="t-0", segment_bytes=1 << 30):
    batches = [v2_batch([(BASE_TS + 10 * (start + per * i + j), b"k",
                          b"v%d" % (start + per * i + j))
                         for j in range(per)], base_offset=start + per * i)
               for i in range(n)]
    return make_log_dir(tmp / name, batches, index_interval=150,
                        segment_bytes=segment_bytes), batches


def _break_first_batch(path):
    raw = bytearray(path.read_bytes())
    struct.pack_into(">i", raw, 8, 3)  # size 3 < 14: unreadable framing
    path.write_bytes(bytes(raw))


def _offsets(lines):
    return [int(m.group(1)) for m in (re.match(r"^\| offset: (\d+) ", ln) for ln in lines) if m]


def _batch_bases(lines):
    return [int(m.group(1)) for m in (re.match(r"^baseOffset: (\d+) ", ln) for ln in lines) if m]


def test_from_offset_seeks_with_the_offset_index(tmp_path):
    d, _ = _log(tmp_path)
    _break_first_batch(d / LOG)
    assert run_cli("dump", str(d / LOG)).rc == 1  # a scan from the start fails
    r = run_cli("dump", "--deep-iteration", "--from-offset", "50", str(d / LOG))
    assert r.rc == 0, r
    assert _offsets(r.lines) == list(range(50, 80))
    assert _batch_bases(r.lines)[0] == 48  # the batch holding offset 50
    assert r.err == ""  # no "non-consecutive" report for the skipped part


def test_to_offset_stops_early(tmp_path):
    d, _ = _log(tmp_path)
    r = run_cli("dump", "--deep-iteration", "--from-offset", "10", "--to-offset", "21",
                str(d / LOG))
    assert _offsets(r.lines) == list(range(10, 22))
    assert _batch_bases(r.lines) == [8, 12, 16, 20]
    assert "invalid bytes" not in r.text


def test_from_timestamp_uses_the_time_index(tmp_path):
    d, _ = _log(tmp_path)
    _break_first_batch(d / LOG)
    r = run_cli("dump", "--print-data-log", "--from-timestamp", str(BASE_TS + 10 * 61 + 3),
                str(d / LOG))
    assert r.rc == 0, r
    offs = _offsets(r.lines)
    # the first record with timestamp >= target, then the rest
    assert offs[0] == 62 and offs[-1] == 79
    # ISO-8601 is accepted too
    import datetime as dt

    iso = dt.datetime.fromtimestamp((BASE_TS + 10 * 61 + 3) / 1000, dt.timezone.utc).isoformat()
    r2 = run_cli("dump", "--print-data-log", "--from-timestamp", iso, str(d / LOG))
    assert _offsets(r2.lines) == offs


def test_directory_seek_skips_whole_segments(tmp_path):
    d, _ = _log(tmp_path, n=30, segment_bytes=1000)
    logs = sorted(p.name for p in d.glob("*.log"))
    assert len(logs) >= 4
    (d / logs[0]).write_bytes(b"\xff" * 200)  # garbage: would abort a dump of that segment
    r = run_cli("dump", "--deep-iteration", "--from-offset", "100", str(d))
    assert r.rc == 0, r
    assert _offsets(r.lines) == list(range(100, 120))
    dumped = [ln for ln in r.lines if ln.startswith("Dumping ")]
    assert all(logs[0] not in ln for ln in dumped)
    r = run_cli("dump", "--deep-iteration", "--to-offset", "5", str(tmp_path / "t-0"),
                "--no-progress")
    assert r.rc == 1  # the first (garbage) segment is needed for offsets <= 5


def test_seek_without_index_scans(tmp_path):
    d, _ = _log(tmp_path)
    (d / "00000000000000000000.index").unlink()
    (d / "00000000000000000000.timeindex").unlink()
    r = run_cli("dump", "--deep-iteration", "--from-offset", "70", str(d / LOG))
    assert _offsets(r.lines) == list(range(70, 80))
