"""What the parts of :class:`kafkalog.storage.log.Log` share: constants, the append result,
the crash-injection seam and small helpers.
"""
from __future__ import annotations

import time
from bisect import bisect_right
from typing import Any, Callable, List, Mapping, NamedTuple, Optional

from ..errors import KafkaStorageError, UnsafePathError
from ..records import MemoryRecords, MemoryRecordsBuilder
from . import checkpoints as _checkpoints

# What takes a Log offline: an operating-system failure, or a write refused because it would go
# through a planted link (either may leave the in-memory state ahead of the files).
STORAGE_ERRORS = (OSError, UnsafePathError)

try:  # POSIX only: a writable open locks the partition directory.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


LONG_MAX = 2**63 - 1

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

SCAN_CHUNK = 4 * 1024 * 1024


# ------------------------------------------------------------------------------------------------
# Append results
# ------------------------------------------------------------------------------------------------
class LogAppendInfo(NamedTuple):
    """What an append wrote: the offsets assigned, the max timestamp and the offset of the
    batch holding it, the LogAppendTime used (-1 with CreateTime), the bytes and records
    written.  ``first_offset == -1`` means nothing was appended (no complete batch)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    records_count: int


class BatchFacts:
    """The header facts producer-state tracking needs, for a batch being appended."""

    __slots__ = (
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "base_offset",
        "last_offset",
        "max_timestamp",
        "is_transactional",
        "is_control_batch",
        "magic",
        "_batch",
    )

    def __init__(self, batch, base_offset: int, max_timestamp: int) -> None:
        self.producer_id = batch.producer_id
        self.producer_epoch = batch.producer_epoch
        self.base_sequence = batch.base_sequence
        self.base_offset = base_offset
        self.last_offset = base_offset + batch.last_offset_delta
        self.max_timestamp = max_timestamp
        self.is_transactional = batch.is_transactional
        self.is_control_batch = batch.is_control_batch
        self.magic = batch.magic
        self._batch = batch

    def __iter__(self):
        return iter(self._batch)


class Prepared(NamedTuple):
    data: Any
    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset: int
    base_patch: Optional[int]
    epoch_patch: Optional[int]
    facts: List[Any]
    log_append_time: int
    records_count: int
    magic: int


def check_int_arg(name: str, value: Any, lo: int, hi: int) -> None:
    """TypeError for a non-integer argument, ValueError for one outside ``[lo, hi]``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {value}")


def now_ms() -> int:
    return int(time.time() * 1000)


def as_buffer(records) -> memoryview:
    if isinstance(records, MemoryRecordsBuilder):
        records = records.build()
    if isinstance(records, MemoryRecords):
        mv = records.buffer()
    elif isinstance(records, (bytes, bytearray, memoryview)):
        mv = records if isinstance(records, memoryview) else memoryview(records)
    else:
        try:
            mv = memoryview(records)
        except TypeError:
            raise TypeError(
                "records must be MemoryRecords, a MemoryRecordsBuilder or a bytes-like object, "
                f"not {type(records).__name__}"
            ) from None
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    return mv


tuple_new = tuple.__new__


CRASH_HOOK: Optional[Callable[[str], None]] = None


def hook(step: str) -> None:
    """Test seam: crash-injection tests set ``CRASH_HOOK`` to kill the process at a step."""
    if CRASH_HOOK is not None:
        CRASH_HOOK(step)


def update_root_checkpoint(
    path: str, updates: Mapping[Any, Optional[int]], fsync: bool = True
) -> None:
    """``checkpoints.update_offset_checkpoint`` with an I/O error raised as KafkaStorageError
    naming the checkpoint file."""
    try:
        _checkpoints.update_offset_checkpoint(path, updates, fsync=fsync)
    except OSError as e:
        raise KafkaStorageError.from_os_error(e, "writing a checkpoint", path=path)


def floor_index(bases: List[int], offset: int) -> int:
    """Index of the segment with the largest base offset <= offset, or -1."""
    return bisect_right(bases, offset) - 1


__all__ = [  # what the other Log modules import from here
    "STORAGE_ERRORS",
    "fcntl",
    "LONG_MAX",
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "SCAN_CHUNK",
    "LogAppendInfo",
    "BatchFacts",
    "Prepared",
    "check_int_arg",
    "now_ms",
    "as_buffer",
    "tuple_new",
    "CRASH_HOOK",
    "hook",
    "update_root_checkpoint",
    "floor_index",
]
