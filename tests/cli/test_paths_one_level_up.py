"""``kafkalog dump|verify|stats|salvage`` of a directory that is not a Kafka log follow the
one rule of ``storage.logdir.locate``: a directory one level above log roots (``backups/``
holding ``broker-1/orders-0``, the root's own name looking like a partition) was taken for a
root whose partition ``broker-1`` is empty (``stats``: exit 0 with 0 records; ``verify``:
"``orders-0``: not a Kafka log file name"); a directory of subdirectories without any log
(``x/{backup-2024,site-1}``) got "OK" and exit 0.  Each is now an error naming the path (and
the paths to give instead), and nothing is written by ``salvage``."""
from __future__ import annotations

import json

import pytest

from .conftest import BASE_TS, make_log_dir, run_cli, v2_batch


def _batches(n=4):
    return [v2_batch([(BASE_TS + 3 * i + j, b"k%d" % j, b"v%d" % (3 * i + j)) for j in range(3)],
                     base_offset=3 * i) for i in range(n)]


@pytest.fixture
def backups(tmp_path):
    b = tmp_path / "backups"
    make_log_dir(b / "broker-1" / "orders-0", _batches())
    (b / "broker-1" / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":3}')
    make_log_dir(b / "broker-2" / "orders-0", _batches(2))
    return b


def _one_level_up(b):
    return (f"{b} is neither a log root nor a partition directory: its Kafka logs are one level "
            f"down, in the log roots {b / 'broker-1'}, {b / 'broker-2'}; pass those paths "
            "instead")


def _nothing(x):
    return (f"no Kafka log under {x}: no Kafka log segments (<20-digit offset>.log), no "
            "<topic>-<partition> directory with log files and no log-dir checkpoint in it; pass "
            "a segment file, a partition directory or a log root (a broker's log.dirs entry)")


def test_the_roots_themselves_read(backups):
    r = run_cli("stats", "--json", "--no-segments", str(backups / "broker-1"),
                str(backups / "broker-2"))
    assert r.rc == 0, r
    assert [json.loads(ln)["records"] for ln in r.lines] == [12, 6]
    r = run_cli("verify", str(backups / "broker-1"), str(backups / "broker-2"))
    assert r.rc == 0 and r.lines == [r.lines[-1]] and r.lines[-1].startswith(
        "OK: 2 partition(s), 2 segment(s), 6 batches"), r


@pytest.mark.parametrize("case", ["one level up", "no logs"])
def test_verify_refuses(backups, no_logs, case):
    path = backups if case == "one level up" else no_logs
    msg = _one_level_up(backups) if case == "one level up" else _nothing(no_logs)
    r = run_cli("verify", str(path))
    assert r.rc == 1, r
    assert r.lines[0] == f"{path}: error: {msg}", r
    assert len(r.lines) == 2 and r.lines[1].startswith("FAILED: 0 partition(s)"), r


@pytest.mark.parametrize("case", ["one level up", "no logs"])
@pytest.mark.parametrize("command", [["stats"], ["stats", "--json"], ["dump"],
                                     ["dump", "--json"]])
def test_stats_and_dump_refuse(backups, no_logs, case, command):
    path = backups if case == "one level up" else no_logs
    msg = _one_level_up(backups) if case == "one level up" else _nothing(no_logs)
    r = run_cli(*command, str(path))
    assert (r.rc, r.out, r.err_lines) == (1, b"", [f"kafkalog {command[0]}: error: {msg}"]), r


@pytest.mark.parametrize("case", ["one level up", "no logs", "empty partition"])
def test_salvage_refuses_and_writes_nothing(backups, no_logs, tmp_path, case):
    path = {"one level up": backups, "no logs": no_logs,
            "empty partition": no_logs / "site-1"}[case]
    dst = tmp_path / "rescue"
    r = run_cli("salvage", str(path), str(dst))
    assert r.rc == 1 and r.out == b"", r
    if case == "one level up":
        assert r.err_lines == [f"kafkalog salvage: error: {_one_level_up(backups)}"], r
    elif case == "no logs":
        assert r.err_lines == [f"kafkalog salvage: error: {_nothing(no_logs)}"], r
    else:
        assert r.err_lines == [
            f"kafkalog salvage: error: {path}: no log segments to read: expected <20-digit "
            "offset>.log files in this partition directory (an empty directory)"], r
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backups", "x"]
