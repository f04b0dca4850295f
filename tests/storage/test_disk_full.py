"""A full disk: the memory-mapped indexes never fault (SIGBUS) on pages the file system cannot
back; a full disk is a KafkaStorageError (errno 28) at a point the library controls.

Runs on a small tmpfs mounted by the test (tmpfs backs a mapped page only when it is touched,
so an unreserved sparse index faults there exactly as on a full disk).  Every scenario runs in
a child process so that a SIGBUS fails the test instead of killing the test run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="tmpfs is Linux-only")

_PRELUDE = textwrap.dedent(
    """
    import errno, json, os, sys
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.errors import KafkaStorageError
    from kafkalog.storage.index import OffsetIndex, TimeIndex
    from kafkalog.storage.log import Log
    root = sys.argv[1]
    CFG = {"index.interval.bytes": 1, "segment.index.bytes": 1 << 14, "segment.bytes": 1 << 18}

    def value(i):
        return (b"%08d" % i) * 40

    def batch(i):
        b = MemoryRecordsBuilder(2, "none", 0)
        b.append(1_700_000_000_000 + i, None, value(i))
        return b.build()

    def fill(path):
        # Take every free block of the file system.
        with open(path, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"x" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    """
)


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the disk-full tests: {r.stderr.strip() or r}")
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _child(code: str, root: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(code), root],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert r.returncode == 0, (
        f"child died with {'SIGBUS' if r.returncode == -7 else r.returncode}: {r.stderr[-3000:]}"
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["OffsetIndex", "TimeIndex"])
def test_index_on_full_disk_is_a_storage_error_not_sigbus(small_fs, kind):
    out = _child(
        f"""
        fill(os.path.join(root, "filler"))
        cls = {kind}
        path = os.path.join(root, "00000000000000000000.idx")
        try:
            idx = cls(path, 0, 1 << 16)
        except KafkaStorageError as e:
            print(json.dumps({{"error": e.errno, "path": e.path, "left": os.path.getsize(path)}}))
            sys.exit(0)
        for i in range(idx.max_entries):  # touches every preallocated page
            if cls is OffsetIndex:
                idx.append(i + 1, i * 10)
            else:
                idx.maybe_append(1000 + i, i + 1)
        print(json.dumps({{"error": None}}))
        """,
        small_fs,
    )
    assert out["error"] == 28
    assert out["path"].endswith(".idx")
    assert out["left"] == 0  # no sparse tail is left behind to fault on later


def test_index_reexpand_on_full_disk_keeps_entries(small_fs):
    out = _child(
        """
        path = os.path.join(root, "00000000000000000000.index")
        idx = OffsetIndex(path, 0, 1 << 16)
        for i in range(100):
            idx.append(i + 1, i * 10)
        idx.trim_to_valid_size()
        fill(os.path.join(root, "filler"))
        try:
            idx.resize(1 << 16)
            err = None
        except KafkaStorageError as e:
            err = e.errno
        entries = [tuple(idx.entry(i)) for i in range(idx.entries)]
        print(json.dumps({"error": err, "entries": entries, "size": os.path.getsize(path)}))
        """,
        small_fs,
    )
    assert out["error"] == 28
    assert out["entries"] == [[i + 1, i * 10] for i in range(100)]
    assert out["size"] == 800


def test_log_on_full_disk_goes_offline_and_reopens(small_fs):
    d = os.path.join(small_fs, "t-0")
    filled = _child(
        """
        with open(os.path.join(root, "spare"), "wb") as f:
            f.write(b"s" * (128 << 10))  # freed later, so the log can be opened writable again
        log = Log.open(os.path.join(root, "t-0"), CFG)
        appended = flushed = 0
        try:
            for i in range(100000):
                log.append(batch(i))
                appended = i + 1
                if appended % 25 == 0:
                    log.flush()
                    flushed = appended
            raise AssertionError("the disk never filled")
        except KafkaStorageError as e:
            err = e.errno
        offline = log.offline
        try:
            log.append(batch(appended))
            again = None
        except KafkaStorageError as e:
            again = e.errno
        log.close()
        print(json.dumps(dict(err=err, offline=offline, again=again, appended=appended,
                              flushed=flushed)))
        """,
        small_fs,
    )
    assert filled["err"] == 28 and filled["offline"] and filled["again"] == 28
    assert filled["flushed"] > 100

    check = """
        log = Log.open(os.path.join(root, "t-0"), CFG, read_only=READ_ONLY)
        got = [(r.offset, bytes(r.value)) for r in log.iter_records()]
        log.close()
        print(json.dumps({"n": len(got), "ok": all(v == value(o) for o, v in got),
                          "contiguous": [o for o, _ in got] == list(range(len(got)))}))
    """
    ro = _child("READ_ONLY = True\n" + textwrap.dedent(check), small_fs)
    assert ro["ok"] and ro["contiguous"]
    assert filled["flushed"] <= ro["n"] <= filled["appended"]  # nothing flushed is lost

    rw = _child(
        """
        try:
            Log.open(os.path.join(root, "t-0"), CFG)
            print(json.dumps({"error": None}))
        except KafkaStorageError as e:
            print(json.dumps({"error": e.errno}))
        """,
        small_fs,
    )
    assert rw["error"] == 28

    os.unlink(os.path.join(small_fs, "spare"))
    rw = _child("READ_ONLY = False\n" + textwrap.dedent(check), small_fs)
    assert rw == ro
    assert os.path.isdir(d)


def test_reservation_fallback_backs_every_block_and_keeps_bytes(tmp_path, monkeypatch):
    """Where posix_fallocate is unsupported, the fallback writes a zero byte into each block
    that reads as zero: every block ends up allocated and no existing byte changes."""
    import errno

    from kafkalog.storage import index as index_mod

    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(index_mod.os, "posix_fallocate", unsupported, raising=False)
    path = tmp_path / "00000000000000000000.index"
    idx = index_mod.OffsetIndex(str(path), 0, 1 << 16)
    assert os.stat(path).st_blocks * 512 >= 1 << 16
    for i in range(700):  # crosses the first block boundaries
        idx.append(i + 1, i * 3)
    idx.flush()
    idx.close_handler()  # untrimmed, as after a crash
    before = path.read_bytes()
    with open(path, "r+b") as f:  # punch the tail back to a hole
        f.truncate(8 * 700)
        f.truncate(1 << 16)
    idx = index_mod.OffsetIndex(str(path), 0, 1 << 16)
    assert idx.entries == 700
    assert os.stat(path).st_blocks * 512 >= 1 << 16
    assert path.read_bytes() == before
    assert list(idx)[-1] == (700, 699 * 3)
    idx.close()
