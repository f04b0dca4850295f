"""Fixtures and helpers for the storage tests (files, indexes, segments, logs).

The conformance corpus is found at ``$KAFKALOG_CONFORMANCE`` or ``../shared/conformance``
relative to the repository root; tests that need it skip with the reason when it is absent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest

from kafkalog.records import MemoryRecords, MemoryRecordsBuilder

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_TS = 1_700_000_000_000


def storage_conformance_dir() -> Optional[Path]:
    env = os.environ.get("KAFKALOG_CONFORMANCE")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "conformance")
    for c in candidates:
        if (c / "files").is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def broker_files() -> Path:
    """``<corpus>/files``: partition directories written by real brokers."""
    d = storage_conformance_dir()
    if d is None:
        pytest.skip(
            "conformance corpus not found: set KAFKALOG_CONFORMANCE to the directory holding "
            "files/ (looked at $KAFKALOG_CONFORMANCE and ../shared/conformance)"
        )
    return d / "files"


@pytest.fixture
def broker_copy(tmp_path, broker_files):
    """Copy one broker source dir (e.g. ``kafka-tester@e856b9a``) to tmp and return it."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(broker_files / name, dst)
        return dst

    return copy


class FakeClock:
    """A settable millisecond clock for Log.open(clock=...)."""

    def __init__(self, now: int = BASE_TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_batch(
    values: Sequence[Optional[bytes]],
    timestamps: Optional[Sequence[int]] = None,
    keys: Optional[Sequence[Optional[bytes]]] = None,
    *,
    base_offset: int = 0,
    compression: str = "none",
    magic: int = 2,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    leader_epoch: int = 0,
    timestamp_type: str = "create_time",
) -> bytes:
    """One batch (v2) or message set (v0/v1) holding ``values``."""
    if timestamps is None:
        timestamps = [BASE_TS + i for i in range(len(values))]
    if keys is None:
        keys = [None] * len(values)
    if magic < 2:
        b = MemoryRecordsBuilder(
            magic, compression, base_offset, "create_time" if magic else "no_timestamp_type"
        )
    else:
        b = MemoryRecordsBuilder(
            2,
            compression,
            base_offset,
            timestamp_type,
            producer_id,
            producer_epoch,
            base_sequence,
            transactional,
            leader_epoch,
            log_append_time=BASE_TS if timestamp_type == "log_append_time" else None,
        )
    for ts, k, v in zip(timestamps, keys, values):
        b.append(ts, k, v)
    return b.build()


def values_batch(start: int, count: int, ts: Optional[int] = None, size: int = 0) -> bytes:
    """``count`` records with values ``b"v<i>"`` (padded to ``size``) for i from ``start``."""
    vals = [(b"v%d" % i).ljust(size, b".") for i in range(start, start + count)]
    tss = [(BASE_TS + i if ts is None else ts) for i in range(start, start + count)]
    return make_batch(vals, tss)


def all_records(log) -> List[Tuple[int, Optional[bytes]]]:
    return [(r.offset, r.value) for r in log.iter_records()]


def batches_of(data) -> list:
    return list(MemoryRecords(bytes(data)))
