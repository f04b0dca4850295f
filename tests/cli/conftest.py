"""Helpers for the command-line tests: run ``kafkalog`` in-process or as a child process, and
build logs of every format and codec.

``run_cli(...)`` calls :func:`kafkalog.tools.cli.main` with stdout/stderr captured (stdout as bytes,
since ``dump`` writes bytes); ``run_child(...)`` runs ``python -m kafkalog`` with the same
``kafkalog`` on its path (for pipes, exit codes and memory).
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import pytest

import kafkalog
from kafkalog import MemoryRecordsBuilder

BASE_TS = 1_700_000_000_000
GOLDEN = Path(__file__).resolve().parent / "golden"
PKG_PARENT = str(Path(kafkalog.__file__).resolve().parent.parent)


class Result:
    def __init__(self, rc: int, out: bytes, err: str) -> None:
        self.rc = rc
        self.out = out
        self.err = err

    @property
    def text(self) -> str:
        return self.out.decode("utf-8")

    @property
    def lines(self) -> List[str]:
        """stdout split on "\n" only (payloads may hold other line-break characters)."""
        t = self.text
        return t[:-1].split("\n") if t.endswith("\n") else (t.split("\n") if t else [])

    @property
    def err_lines(self) -> List[str]:
        e = self.err
        return e[:-1].split("\n") if e.endswith("\n") else (e.split("\n") if e else [])

    def __repr__(self) -> str:  # shown by pytest on failures
        return f"Result(rc={self.rc}, out={self.out[:2000]!r}, err={self.err[:2000]!r})"


def run_cli(*args: str, cwd: Optional[os.PathLike] = None) -> Result:
    """``kafkalog ARGS`` in this process."""
    from kafkalog.tools.cli import main

    bio = io.BytesIO()
    out = io.TextIOWrapper(bio, encoding="utf-8", write_through=True)
    err = io.StringIO()
    old = sys.stdout, sys.stderr, os.getcwd()
    sys.stdout, sys.stderr = out, err
    try:
        if cwd is not None:
            os.chdir(cwd)
        rc = main([str(a) for a in args])
        out.flush()
    finally:
        sys.stdout, sys.stderr = old[0], old[1]
        os.chdir(old[2])
    return Result(rc, bio.getvalue(), err.getvalue())


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                      else "")
    return env


def run_child(args: Sequence[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog", *map(str, args)], env=child_env(),
                          capture_output=True, **kw)


def v2_batch(records, *, base_offset: int = 0, compression: str = "none", producer_id: int = -1,
             producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
             leader_epoch: int = 0, timestamp_type: str = "create_time",
             log_append_time: Optional[int] = None,
             delete_horizon_ms: Optional[int] = None) -> bytes:
    """``records``: (timestamp, key, value[, headers]) tuples."""
    b = MemoryRecordsBuilder(2, compression, base_offset, timestamp_type, producer_id,
                             producer_epoch,
                             base_sequence, transactional, leader_epoch,
                             log_append_time=log_append_time, delete_horizon_ms=delete_horizon_ms)
    for r in records:
        b.append(r[0], r[1], r[2], r[3] if len(r) > 3 else ())
    return b.build()


def legacy_batch(magic: int, records, *, base_offset: int = 0, compression: str = "none") -> bytes:
    b = MemoryRecordsBuilder(magic, compression, base_offset,
                             "create_time" if magic else "no_timestamp_type")
    for ts, k, v in records:
        b.append(ts, k, v)
    return b.build()


def write(path: Path, *chunks: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(chunks))
    return path


def make_log_dir(directory: Path, batches: Sequence[bytes], index_interval: int = 128,
                 segment_bytes: int = 1 << 30) -> Path:
    """A partition directory written by kafkalog's Log (follower appends: offsets kept), with
    indexes and checkpoints, closed cleanly."""
    from kafkalog.storage.log import Log

    log = Log.open(str(directory),
                   {"index.interval.bytes": index_interval, "segment.bytes": segment_bytes,
                                     "max.message.bytes": 1 << 30})
    try:
        for b in batches:
            log.append_as_follower(b)
    finally:
        log.close()
    return directory


def hexbytes(s: str) -> bytes:
    return bytes.fromhex("".join(s.split()))


@pytest.fixture
def chdir_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path
