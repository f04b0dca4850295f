"""A partition's log: a directory of segments with Kafka's append, read, roll, flush,
retention, truncation and crash recovery (Kafka's ``UnifiedLog`` + ``LocalLog`` +
``LogLoader`` + ``LeaderEpochFileCache``, flattened), and :class:`LogConfig` with Kafka's
topic-config keys and defaults.

Where the files live.  ``Log.open(dir)`` treats ``dir`` as one partition directory
(``<topic>-<partition>``) and its parent as the log-dir root, exactly as a broker lays them
out, so a directory kafkalog writes is one a broker loads (and vice versa):

* segments, indexes, producer snapshots, ``leader-epoch-checkpoint`` and
  ``partition.metadata`` are in ``dir``;
* the recovery point, the log start offset and the high watermark are entries for this
  partition in the root's ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``
  and ``replication-offset-checkpoint`` (read-modify-write, so other partitions' entries are
  kept).  When ``dir``'s name is not ``<topic>-<partition>`` no root file is touched: the
  recovery point is then 0 (an unclean open recovers every segment) and the log start offset is
  the first segment's base offset.

The clean-shutdown marker.  A broker writes ``.kafka_cleanshutdown`` in the *root* once every
partition in it is closed; a standalone Log owns one partition, so kafkalog keeps its own
marker inside the partition directory (``dir/.kafka_cleanshutdown``, same content; a broker
ignores files it does not know there).  A writable open deletes that marker (durably) before it
changes anything and :meth:`Log.close` writes it last, after every byte and checkpoint is on
disk; an open without it recovers from the recovery point.  The root marker is honoured only
by read-only opens (a writable open cannot tell whether kafkalog crashed in this partition
after the broker shut down cleanly, so it recovers from the recovery point, which is cheap
after a clean broker shutdown: the checkpoint then equals the log end offset).

Durability.  Appends are written to the OS (and to a small in-process buffer, see
:mod:`kafkalog.storage.segment`) without fsync.  ``flush.messages`` fsyncs once that many messages are
unflushed, ``flush.ms`` from a background thread once the oldest unflushed append is that old,
:meth:`Log.flush` on demand, and a roll fsyncs the segment it closes (Kafka flushes it
asynchronously).  Everything flushed survives a crash; recovery truncates the rest at the
first torn or invalid batch.

I/O errors.  An OSError from the system (a full disk, EIO, ...) while a Log reads or writes
raises :class:`~kafkalog.errors.KafkaStorageError` (an OSError too: same ``errno``, the file in
``path``, the OSError as ``__cause__``) and takes the Log offline, as a broker takes a log dir
offline: every later call but :meth:`Log.close` raises KafkaStorageError, and ``close()`` then
only closes the files (bytes already accepted are handed to the OS when it can, no
clean-shutdown marker is written).  Opening the directory again recovers it: every record whose
append returned is there when the system accepted the bytes by the close (always, for records a
:meth:`Log.flush` covered), and a call that failed is there entirely or not at all (a call of
several batches whose clean-up also failed may leave a prefix of them, as a crash may).
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
import uuid as _uuid
from bisect import bisect_right
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple, Union

from . import files as _files
from . import fs as _fs
from . import logdir as _logdir
from .._format import CompressionType, TimestampType
from .._speedups import crc as _crc
from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaLogError,
    KafkaStorageError,
    LogClosedError,
    LogLockedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsafePathError,
)
from .producer_state import ProducerStateManager
from ..records import MemoryRecords, MemoryRecordsBuilder, RecordBatch
from .segment import Segment, TimestampAndOffset

# What takes a Log offline: an operating-system failure, or a write refused because it would go
# through a planted link (either may leave the in-memory state ahead of the files).
_STORAGE_ERRORS = (OSError, UnsafePathError)

try:  # POSIX only: a writable open locks the partition directory.
    import fcntl as _fcntl
except ImportError:  # pragma: no cover
    _fcntl = None  # type: ignore[assignment]

__all__ = [
    "Log",
    "LogConfig",
    "LogAppendInfo",
    "LeaderEpochCache",
    "TimestampAndOffset",
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
]

LONG_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

_V2 = struct.Struct(">qiibIhiqqqhii")
_SCAN_CHUNK = 4 * 1024 * 1024
_U32 = struct.Struct(">I")
_H = struct.Struct(">h")
_Q = struct.Struct(">q")


# ------------------------------------------------------------------------------------------------
# LogConfig
# ------------------------------------------------------------------------------------------------
def _parse_long(key: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool):
        raise ValueError(f"Invalid value {v!r} for configuration {key}: expected an integer")
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            raise ValueError(f"Invalid value {v!r} for configuration {key}: not a number") from None
    if not isinstance(v, int):
        raise ValueError(f"Invalid value {v!r} for configuration {key}: expected an integer")
    if v < lo or v > hi:
        raise ValueError(
            f"Invalid value {v} for configuration {key}: Value must be in [{lo}, {hi}]"
        )
    return v


def _parse_bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError(
        f"Invalid value {v!r} for configuration {key}: Expected value to be either true or false"
    )


def _parse_double(key: str, v: Any, lo: float, hi: float) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid value {v!r} for configuration {key}: not a number") from None
    if not lo <= f <= hi:
        raise ValueError(
            f"Invalid value {f} for configuration {key}: Value must be in [{lo}, {hi}]"
        )
    return f


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = {"createtime": "CreateTime", "logappendtime": "LogAppendTime"}


def _parse_policy(key: str, v: Any) -> Tuple[str, ...]:
    items = v.split(",") if isinstance(v, str) else list(v)
    out = []
    for item in items:
        item = str(item).strip().lower()
        if not item:
            continue
        if item not in ("compact", "delete"):
            raise ValueError(
                f"Invalid value {item} for configuration {key}: "
                "String must be one of: compact, delete"
            )
        if item not in out:
            out.append(item)
    return tuple(out)


def _parse_str_choice(key: str, v: Any, choices) -> str:
    s = str(v).strip()
    if s.lower() not in choices:
        raise ValueError(
            f"Invalid value {s} for configuration {key}: "
            f"String must be one of: {', '.join(choices)}"
        )
    return s.lower()


def _parse_ts_type(key: str, v: Any) -> str:
    if isinstance(v, TimestampType):
        v = v.kafka_name
    s = str(v).strip().replace("_", "").lower()
    if s not in _TIMESTAMP_TYPES:
        raise ValueError(
            f"Invalid value {v} for configuration {key}: "
            "String must be one of: CreateTime, LogAppendTime"
        )
    return _TIMESTAMP_TYPES[s]


def _long(lo: int = -(2**63), hi: int = LONG_MAX):
    return lambda k, v: _parse_long(k, v, lo, hi)


def _int(lo: int = -(2**31), hi: int = _INT32_MAX):
    return lambda k, v: _parse_long(k, v, lo, hi)


def _str(k: str, v: Any) -> str:
    return "" if v is None else str(v)


# key -> (default, parser).  Kafka's TopicConfig / LogConfig at the spec snapshot.
_CONFIG_DEFS: Dict[str, Tuple[Any, Callable[[str, Any], Any]]] = {
    "cleanup.policy": (("delete",), _parse_policy),
    "compression.type": ("producer", lambda k, v: _parse_str_choice(k, v, _COMPRESSION_TYPES)),
    "compression.gzip.level": (-1, _int(-1, 9)),
    "compression.lz4.level": (9, _int(1, 17)),
    "compression.zstd.level": (3, _int(-131072, 22)),
    "delete.retention.ms": (86400000, _long(0)),
    "file.delete.delay.ms": (60000, _long(0)),
    "flush.messages": (LONG_MAX, _long(1)),
    "flush.ms": (LONG_MAX, _long(0)),
    "follower.replication.throttled.replicas": ("", _str),
    "index.interval.bytes": (4096, _int(0)),
    "leader.replication.throttled.replicas": ("", _str),
    "local.retention.bytes": (-2, _long(-2)),
    "local.retention.ms": (-2, _long(-2)),
    "max.compaction.lag.ms": (LONG_MAX, _long(1)),
    "max.message.bytes": (1048588, _int(0)),
    "message.downconversion.enable": (True, _parse_bool),
    "message.format.version": ("3.0-IV1", _str),
    "message.timestamp.after.max.ms": (LONG_MAX, _long(0)),
    "message.timestamp.before.max.ms": (LONG_MAX, _long(0)),
    "message.timestamp.difference.max.ms": (LONG_MAX, _long(0)),
    "message.timestamp.type": ("CreateTime", _parse_ts_type),
    "min.cleanable.dirty.ratio": (0.5, lambda k, v: _parse_double(k, v, 0.0, 1.0)),
    "min.compaction.lag.ms": (0, _long(0)),
    "min.insync.replicas": (1, _int(1)),
    "preallocate": (False, _parse_bool),
    "remote.storage.enable": (False, _parse_bool),
    "remote.log.copy.disable": (False, _parse_bool),
    "remote.log.delete.on.disable": (False, _parse_bool),
    "retention.bytes": (-1, _long()),
    "retention.ms": (604800000, _long(-1)),
    "segment.bytes": (1073741824, _int(14)),
    "segment.index.bytes": (10485760, _int(4)),
    "segment.jitter.ms": (0, _long(0)),
    "segment.ms": (604800000, _long(1)),
    "unclean.leader.election.enable": (False, _parse_bool),
}


class LogConfig:
    """A topic's log configuration: Kafka's topic-config keys with Kafka's defaults.

    ``LogConfig({"segment.bytes": 1 << 20, "cleanup.policy": "compact"})``, or keyword
    arguments with dots spelled as underscores (``LogConfig(segment_bytes=1 << 20)``).  Values
    may be strings, as in a ``.properties`` file.  Every key is an attribute with dots replaced
    by underscores (``config.segment_bytes``); unknown keys and invalid values raise ValueError.
    """

    __slots__ = ("_values", "_originals")

    def __init__(self, props: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> None:
        originals: Dict[str, Any] = {}
        for k, v in (props or {}).items():
            originals[str(k).strip()] = v
        for k, v in kwargs.items():
            originals[k.replace("_", ".")] = v
        values = {}
        for key, (default, parse) in _CONFIG_DEFS.items():
            values[key] = parse(key, originals[key]) if key in originals else default
        unknown = sorted(set(originals) - set(_CONFIG_DEFS))
        if unknown:
            raise ValueError(f"Unknown topic config name: {', '.join(unknown)}")
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_originals", originals)

    @classmethod
    def from_properties(cls, props: Optional[Mapping[str, Any]] = None) -> "LogConfig":
        return cls(props)

    def __getattr__(self, name: str) -> Any:
        key = name.replace("_", ".")
        values = object.__getattribute__(self, "_values")
        if key in values:
            return values[key]
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LogConfig is immutable; use with_overrides()")

    def get(self, key: str) -> Any:
        """The value of a dotted Kafka key."""
        return self._values[key]

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    @property
    def originals(self) -> Dict[str, Any]:
        """The keys that were set explicitly."""
        return dict(self._originals)

    def to_properties(self, include_defaults: bool = False) -> Dict[str, Any]:
        if include_defaults:
            return dict(self._values)
        return {k: self._values[k] for k in self._originals}

    def with_overrides(
        self, props: Optional[Mapping[str, Any]] = None, **kwargs: Any
    ) -> "LogConfig":
        merged = dict(self._originals)
        merged.update(props or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        return LogConfig(merged)

    # -- derived (Kafka's LogConfig getters) -------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def segment_size(self) -> int:
        return self._values["segment.bytes"]

    @property
    def max_index_size(self) -> int:
        return self._values["segment.index.bytes"]

    @property
    def max_message_size(self) -> int:
        return self._values["max.message.bytes"]

    @property
    def flush_interval(self) -> int:
        return self._values["flush.messages"]

    @property
    def retention_size(self) -> int:
        return self._values["retention.bytes"]

    @property
    def initial_file_size(self) -> int:
        return self._values["segment.bytes"] if self._values["preallocate"] else 0

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self._values["message.timestamp.type"] == "LogAppendTime"
            else TimestampType.CREATE_TIME
        )

    @property
    def timestamp_before_max_ms(self) -> int:
        """``message.timestamp.before.max.ms``, or the deprecated difference when unset."""
        v = self._values["message.timestamp.before.max.ms"]
        return v if v != LONG_MAX else self._values["message.timestamp.difference.max.ms"]

    @property
    def timestamp_after_max_ms(self) -> int:
        v = self._values["message.timestamp.after.max.ms"]
        return v if v != LONG_MAX else self._values["message.timestamp.difference.max.ms"]

    @property
    def target_compression(self) -> Optional[CompressionType]:
        """The codec written to the log (None: keep the producer's)."""
        c = self._values["compression.type"]
        if c == "producer":
            return None
        if c == "uncompressed":
            return CompressionType.NONE
        return CompressionType.parse(c)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogConfig):
            return NotImplemented
        return self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LogConfig({self.to_properties()!r})"


# ------------------------------------------------------------------------------------------------
# Leader-epoch cache
# ------------------------------------------------------------------------------------------------
class LeaderEpochCache:
    """The ``leader-epoch-checkpoint`` of a partition (Kafka's LeaderEpochFileCache): the
    first offset written under each leader epoch, written through on every change."""

    def __init__(self, path: Optional[str], read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only or path is None
        self._entries: List[_files.EpochEntry] = []
        if path is not None and os.path.exists(path):
            self._entries = sorted(_files.read_leader_epoch_checkpoint(path))

    @property
    def entries(self) -> List[_files.EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> Optional[int]:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> Optional[_files.EpochEntry]:
        return self._entries[-1] if self._entries else None

    def flush(self, fsync: bool = True) -> None:
        if not self.read_only and self.path is not None:
            try:
                _files.write_leader_epoch_checkpoint(self.path, self._entries, fsync=fsync)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "writing the leader-epoch checkpoint", path=self.path
                )

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; entries with a larger or equal
        epoch or start offset are dropped first (Kafka's ``assign``).  Returns whether the
        cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(
                f"Received invalid partition leader epoch entry ({epoch}, {start_offset})"
            )
        latest = self.latest_entry
        if latest is not None and not (epoch != latest.epoch or start_offset < latest.start_offset):
            return False
        self._entries = [
            e for e in self._entries if not (e.epoch >= epoch or e.start_offset >= start_offset)
        ]
        self._entries.append(_files.EpochEntry(epoch, start_offset))
        if flush:
            self.flush()
        return True

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        previous = None
        for e in self._entries:
            if e.start_offset == offset:
                return e.epoch
            if e.start_offset > offset:
                return previous
            previous = e.epoch
        return previous

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset``."""
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop the entries below ``start_offset``, moving the last of them to it."""
        if start_offset < 0:
            return
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        keep = [e for e in self._entries if e.start_offset > start_offset]
        new_first = _files.EpochEntry(removed[-1].epoch, start_offset)
        new_entries = [new_first] + keep
        if new_entries != self._entries:
            self._entries = new_entries
            self.flush(fsync=False)  # re-applied from the log start offset at every open

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self.flush()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries!r})"


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


class _BatchFacts:
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


class _Prepared(NamedTuple):
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


def _check_int_arg(name: str, value: Any, lo: int, hi: int) -> None:
    """TypeError for a non-integer argument, ValueError for one outside ``[lo, hi]``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {value}")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _as_buffer(records) -> memoryview:
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


_tuple_new = tuple.__new__


_CRASH_HOOK: Optional[Callable[[str], None]] = None


def _hook(step: str) -> None:
    """Test seam: crash-injection tests set ``_CRASH_HOOK`` to kill the process at a step."""
    if _CRASH_HOOK is not None:
        _CRASH_HOOK(step)


def _update_root_checkpoint(
    path: str, updates: Mapping[Any, Optional[int]], fsync: bool = True
) -> None:
    """``files.update_offset_checkpoint`` with an I/O error raised as KafkaStorageError naming
    the checkpoint file."""
    try:
        _files.update_offset_checkpoint(path, updates, fsync=fsync)
    except OSError as e:
        raise KafkaStorageError.from_os_error(e, "writing a checkpoint", path=path)


def _floor_index(bases: List[int], offset: int) -> int:
    """Index of the segment with the largest base offset <= offset, or -1."""
    return bisect_right(bases, offset) - 1


# ------------------------------------------------------------------------------------------------
# Log
# ------------------------------------------------------------------------------------------------
class Log:
    """One partition's log directory.  Use :meth:`Log.open`; a Log is also a context manager
    (``with Log.open(path) as log: ...`` closes it cleanly).  All methods are thread-safe."""

    def __init__(self, *_: Any, **__: Any) -> None:
        raise TypeError("use Log.open(directory, config)")

    # -- opening -----------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Union[str, "os.PathLike[str]"],
        config: Union[LogConfig, Mapping[str, Any], None] = None,
        *,
        read_only: bool = False,
        create: bool = True,
        clock: Optional[Callable[[], int]] = None,
        topic_id: Optional[_uuid.UUID] = None,
        validate_records: bool = False,
        checkpoint_interval_ms: int = 60000,
    ) -> "Log":
        """Open (or create) the partition log in ``directory``, recovering it if it was not
        closed cleanly.

        ``config``: a :class:`LogConfig` or a mapping of Kafka topic-config keys.
        ``read_only``: never write, create or delete a file; a log that needs recovery is
        validated in memory instead (reads stop at the first invalid batch, missing indexes are
        rebuilt in memory).  ``clock``: milliseconds since the epoch (for tests; default
        ``time.time``).  ``topic_id``: written to ``partition.metadata`` when that is missing
        (a different existing id raises ValueError).  ``validate_records``: let
        :meth:`append` decode every record like Kafka's LogValidator even when no setting needs
        it (by default records are only decoded for compacted topics, finite timestamp bounds,
        codec/format conversion; the batch header's max timestamp, covered by the CRC, is
        trusted otherwise).  ``checkpoint_interval_ms``: how often a flush also rewrites the
        recovery-point checkpoint (Kafka's ``log.flush.offset.checkpoint.interval.ms``).

        Creating ``directory`` when its name has the ``<topic>-<partition>`` form requires a
        topic name Kafka accepts (:class:`~kafkalog.errors.InvalidTopicError` otherwise);
        existing directories open whatever their names.  Files are never written through a
        symbolic link inside ``directory`` that leads out of it
        (:class:`~kafkalog.errors.UnsafePathError`); ``directory`` itself may be a link.
        """
        self = object.__new__(cls)
        self._init(
            os.path.abspath(_fs.local_directory(directory)),
            config if isinstance(config, LogConfig) else LogConfig(config),
            read_only,
            create,
            clock or _now_ms,
            topic_id,
            validate_records,
            checkpoint_interval_ms,
        )
        return self

    def _init(
        self,
        directory: str,
        config: LogConfig,
        read_only: bool,
        create: bool,
        clock: Callable[[], int],
        topic_id: Optional[_uuid.UUID],
        validate_records: bool,
        checkpoint_interval_ms: int,
    ) -> None:
        self.dir = directory
        self.config = config
        self.read_only = read_only
        self._clock = clock
        self._validate_records = validate_records
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._closed = False
        self._lock_fd = -1
        self._segments: List[Segment] = []
        self._bases: List[int] = []
        self._flusher: Optional[threading.Thread] = None
        self._unflushed_since: Optional[float] = None
        self._last_checkpoint_ms = 0
        self._checkpointed: Dict[str, Any] = {}  # values last written to the root checkpoints
        self._dir_dirty = False
        self._flusher_error: Optional[BaseException] = None
        self._offline: Optional[KafkaStorageError] = None  # the I/O error that took it offline
        self.ignored_files: List[_logdir.Ignored] = []  # names the storage model does not use
        self._swap_notes: List[_logdir.Ignored] = []  # swap files left uncompleted
        self.root = os.path.dirname(directory)
        try:
            parsed = _files.parse_partition_dir(os.path.basename(directory))
            self.topic_partition: Optional[_files.TopicPartition] = parsed.topic_partition
            self._partition_dir_kind = parsed.kind
        except ValueError:
            self.topic_partition = None
            self._partition_dir_kind = ""

        if not os.path.isdir(directory):
            if read_only or not create:
                raise FileNotFoundError(errno.ENOENT, "log directory does not exist", directory)
            if self.topic_partition is not None:
                # a new <topic>-<partition> directory: only a topic name Kafka accepts
                _files.validate_topic(self.topic_partition.topic)
                _files.validate_partition(self.topic_partition.partition)
            os.makedirs(directory, exist_ok=True)
            _files.fsync_dir(self.root)
        try:
            try:
                if not read_only:
                    self._acquire_dir_lock()
                self._load(topic_id)
            except OSError as e:
                if isinstance(e, (KafkaStorageError, FileNotFoundError)):
                    raise
                raise KafkaStorageError.from_os_error(
                    e, f"opening log {self._tp_name()}", path=e.filename or directory
                ) from e
        except BaseException:
            for seg in self._segments:
                try:
                    seg.close_handlers()
                except Exception:
                    pass
            self._release_dir_lock()
            raise
        self._refresh_fast_path()
        if not read_only and config.flush_ms < LONG_MAX:
            self._flusher = threading.Thread(
                target=self._flusher_loop,
                name=f"kafkalog-flusher-{os.path.basename(directory)}",
                daemon=True,
            )
            self._flusher.start()

    def _acquire_dir_lock(self) -> None:
        if _fcntl is None:  # pragma: no cover
            return
        fd = os.open(self.dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogLockedError(
                    f"{self.dir} is already open for writing by another Log", path=self.dir
                ) from None
            raise
        self._lock_fd = fd

    def _release_dir_lock(self) -> None:
        if self._lock_fd >= 0:
            try:
                os.close(self._lock_fd)  # closing releases the flock
            finally:
                self._lock_fd = -1

    # -- loading (LogLoader) -----------------------------------------------------------------------
    def _root_checkpoint(self, name: str) -> Optional[int]:
        """This partition's entry in a root checkpoint; None when the file is missing or
        malformed (as a broker rebuilds it).  A file that cannot be read (an I/O error, or a
        FIFO or directory at the name) raises KafkaStorageError: reading on as if it were
        absent would move the log start offset back."""
        if self.topic_partition is None:
            return None
        path = os.path.join(self.root, name)
        try:
            return _files.read_offset_checkpoint(path).get(self.topic_partition)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise KafkaStorageError.from_os_error(e, f"reading the root checkpoint {name}",
                                                  path=path) from e
        except KafkaLogError:
            return None

    def _segment_kwargs(self) -> Dict[str, Any]:
        c = self.config
        return dict(
            index_interval_bytes=c.index_interval_bytes,
            max_index_size=c.segment_index_bytes,
            segment_jitter_ms=c.segment_jitter_ms,
            segment_ms=c.segment_ms,
            read_only=self.read_only,
            preallocate=c.preallocate,
            init_file_size=c.initial_file_size,
            clock=self._clock,
        )

    def _open_segment(self, base_offset: int, suffix: str = "") -> Segment:
        return Segment.open(self.dir, base_offset, file_suffix=suffix, **self._segment_kwargs())

    def _load(self, topic_id: Optional[_uuid.UUID]) -> None:
        d = self.dir
        ro = self.read_only
        marker = os.path.join(d, _files.CLEAN_SHUTDOWN_FILE)
        had_clean = os.path.exists(marker)
        if ro and not had_clean:
            had_clean = os.path.exists(os.path.join(self.root, _files.CLEAN_SHUTDOWN_FILE))
        self.had_clean_shutdown = had_clean
        if not ro and os.path.exists(marker):
            os.unlink(marker)
            _files.fsync_dir(d)

        rp_entry = self._root_checkpoint(_files.RECOVERY_POINT_CHECKPOINT_FILE)
        start_entry = self._root_checkpoint(_files.LOG_START_OFFSET_CHECKPOINT_FILE)
        recovery_point_ckpt = rp_entry or 0
        log_start_ckpt = start_entry or 0
        self._checkpointed = {
            "rp": rp_entry,
            "start": start_entry,
            "hw": self._root_checkpoint(_files.REPLICATION_OFFSET_CHECKPOINT_FILE),
        }

        self.leader_epoch_cache = LeaderEpochCache(
            os.path.join(d, _files.LEADER_EPOCH_CHECKPOINT_FILE), read_only=ro
        )
        self.producer_state = ProducerStateManager(d, read_only=ro)

        if not ro:
            self._remove_temp_files_and_swap()
        self._load_segments(had_clean, recovery_point_ckpt)

        # Recovery (LogLoader.recoverLog).
        if not had_clean:
            self._recover_from(recovery_point_ckpt, log_start_ckpt)
        else:
            self._check_tail_readable(log_start_ckpt)

        # A log whose end is below the checkpointed start lost its files: start over there.
        if self._segments:
            leo = self._segments[-1].read_next_offset()
            if leo < log_start_ckpt:
                if ro:
                    self._drop_segments_from(0, delete=False)
                else:
                    self._drop_segments_from(0, delete=True)
                    self.leader_epoch_cache.clear()
                    self.producer_state.truncate_fully_and_start_at(log_start_ckpt)
        if not self._segments:
            if ro:
                raise FileNotFoundError(errno.ENOENT, "no log segments to read", d)
            self._add_segment(self._open_segment(log_start_ckpt))
        self._log_end_offset = self._segments[-1].read_next_offset()
        self._log_start_offset = max(log_start_ckpt, self._segments[0].base_offset)
        if had_clean:
            self._recovery_point = self._log_end_offset
        else:
            self._recovery_point = min(recovery_point_ckpt, self._log_end_offset)
        if not ro:
            self._segments[-1].resize_indexes(self.config.segment_index_bytes)
            if not os.path.exists(self.leader_epoch_cache.path):  # type: ignore[arg-type]
                self.leader_epoch_cache.flush()
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch

        self._rebuild_producer_state(self._log_end_offset, reload_from_clean_shutdown=had_clean)
        if not ro:
            self.producer_state.remove_stray_snapshots(self._bases, keep=(self._log_end_offset,))

        self._last_flush_ms = self._clock()
        # topic id
        pm_path = os.path.join(d, _files.PARTITION_METADATA_FILE)
        self.topic_id: Optional[_uuid.UUID] = None
        if os.path.exists(pm_path):
            try:
                self.topic_id = _files.read_partition_metadata(pm_path).topic_id
            except KafkaLogError:
                if topic_id is None or ro:
                    raise
        if topic_id is not None:
            if self.topic_id is not None and self.topic_id != topic_id:
                raise ValueError(
                    f"Topic id {_files.topic_id_to_string(topic_id)} does not match the id "
                    f"{_files.topic_id_to_string(self.topic_id)} in {pm_path}"
                )
            if self.topic_id is None and not ro:
                _files.write_partition_metadata(pm_path, topic_id)
            self.topic_id = topic_id
        if not ro and (not had_clean or recovery_point_ckpt != self._recovery_point):
            self._write_checkpoints()

    def _scan(self) -> "_logdir.PartitionView":
        """The directory as the storage model sees it.  A name of the log's grammar that is a
        FIFO, a device, a socket or a directory is refused (never opened, never waited on);
        other names outside the grammar are kept in ``ignored_files`` and never change offsets."""
        view = _logdir.scan_partition(self.dir)
        for ig in view.ignored:
            if ig.kind in (_fs.FIFO, _fs.DEVICE, _fs.SOCKET, _fs.DIRECTORY, _fs.OTHER) and (
                _files.parse_segment_file_name(ig.name) is not None
                or ig.name in (_files.LEADER_EPOCH_CHECKPOINT_FILE, _files.PARTITION_METADATA_FILE)
            ):
                raise _fs.not_regular_error(
                    ig.path, ig.kind, f"cannot open log {self._tp_name()}",
                    operation=f"opening log {self._tp_name()}",
                )
        self.ignored_files = view.ignored + self._swap_notes
        return view

    def _remove_temp_files_and_swap(self) -> None:
        """Kafka's ``removeTempFilesAndCollectSwapFiles`` plus the swap completion of
        ``LogLoader.load``: delete ``.deleted``/``.cleaned``/``.tmp`` files, discard swap files
        from incomplete splits, complete the others, and delete orphaned index files.  A swap
        segment that holds no batch, or that starts inside a live segment it does not replace,
        is left alone: completing it would move the log end offset back onto offsets that hold
        data."""
        d = self.dir
        view = self._scan()
        cleaned_bases = []
        swaps = []
        changed = False
        for path in view.temp_files:
            os.unlink(path)
            changed = True
        for st in view.state_files:
            if st.suffix == _files.DELETED_FILE_SUFFIX:
                os.unlink(st.path)
                changed = True
            elif st.suffix == _files.CLEANED_FILE_SUFFIX:
                cleaned_bases.append(st.base_offset)
                os.unlink(st.path)
                changed = True
            elif st.suffix == _files.SWAP_FILE_SUFFIX:
                swaps.append(st)
                changed = True
        min_cleaned = min(cleaned_bases) if cleaned_bases else None
        valid_swaps = []
        for sw in swaps:
            if min_cleaned is not None and sw.base_offset >= min_cleaned:
                os.unlink(sw.path)
            else:
                valid_swaps.append(sw)
        live = view.base_offsets
        ranges = {}
        for sw in valid_swaps:
            if sw.kind != _files.LOG_FILE_SUFFIX:
                continue
            swap_seg = self._open_segment(sw.base_offset, _files.SWAP_FILE_SUFFIX)
            try:
                ranges[sw.base_offset] = swap_seg.read_next_offset()
            finally:
                swap_seg.close_handlers()
        replaced = {b for b in live for sb, nxt in ranges.items() if sb <= b < nxt}
        refused = set()
        for sb, nxt in ranges.items():
            if nxt <= sb:
                refused.add(sb)  # holds no batch
                continue
            before = [b for b in live if b < sb and b not in replaced]
            if before and self._live_next_offset(before[-1]) > sb:
                refused.add(sb)  # would overlap a live segment it does not replace
        for sb in sorted(refused):
            self._swap_notes.append(
                _logdir.Ignored(
                    os.path.basename(_files.log_file(d, sb, _files.SWAP_FILE_SUFFIX)),
                    _files.log_file(d, sb, _files.SWAP_FILE_SUFFIX),
                    _fs.FILE,
                    "a swap segment that holds no batch or overlaps a live segment it does not "
                    "replace; left in place, not completed",
                )
            )
        valid_swaps = [sw for sw in valid_swaps if sw.base_offset not in refused]
        for sb, nxt in ranges.items():
            if sb in refused:
                continue
            for b in live:
                if sb <= b < nxt:
                    for fn in (
                        _files.log_file,
                        _files.offset_index_file,
                        _files.time_index_file,
                        _files.transaction_index_file,
                    ):
                        try:
                            os.unlink(fn(d, b))
                        except FileNotFoundError:
                            pass
        for sw in valid_swaps:
            if os.path.exists(sw.path):
                os.replace(sw.path, sw.path[: -len(_files.SWAP_FILE_SUFFIX)])
        # Orphaned index files.
        for orphan in _logdir.scan_partition(d).orphan_indexes:
            os.unlink(orphan.path)
            changed = True
        if changed:
            _files.fsync_dir(d)

    def _live_next_offset(self, base: int) -> int:
        """The next offset of the live segment at ``base``, read without changing its files."""
        kw = self._segment_kwargs()
        kw["read_only"] = True
        seg = Segment.open(self.dir, base, **kw)
        try:
            return seg.read_next_offset()
        finally:
            seg.close_handlers()

    def _add_segment(self, seg: Segment) -> None:
        i = bisect_right(self._bases, seg.base_offset)
        self._bases.insert(i, seg.base_offset)
        self._segments.insert(i, seg)

    def _load_segments(self, had_clean: bool, recovery_point: int) -> None:
        for base in self._scan().base_offsets:
            seg = self._open_segment(base)
            self._add_segment(seg)
            needs_recovery = False
            try:
                if not seg.offset_index_existed:
                    raise FileNotFoundError(seg.offset_index.path)
                seg.sanity_check(seg.time_index_existed)
                # Kafka's cheap offset/time index checks (not run by brokers at startup any
                # more); a failing index is rebuilt rather than trusted.
                seg.offset_index.sanity_check()
                seg.time_index.sanity_check()
            except (FileNotFoundError, CorruptIndexError):
                needs_recovery = True
            if needs_recovery:
                self._recover_segment(seg)

    def _recover_segment(self, seg: Segment) -> int:
        """Recover one segment with the producer state rebuilt to its base offset."""
        self._rebuild_producer_state(seg.base_offset)
        truncated = seg.recover(self.producer_state, self.leader_epoch_cache)
        self.producer_state.update_map_end_offset(
            max(self.producer_state.map_end_offset, seg.read_next_offset())
        )
        self.producer_state.take_snapshot(fsync=False)
        return truncated

    def _recover_from(self, recovery_point: int, log_start: int) -> None:
        """Recover every segment from the one holding the recovery point; at the first one
        that lost bytes, drop all later segments (their data would follow a gap)."""
        start = max(_floor_index(self._bases, recovery_point), 0)
        i = start
        while i < len(self._segments):
            seg = self._segments[i]
            try:
                truncated = self._recover_segment(seg)
            except InvalidOffsetError:
                # Kafka: "Found invalid offset during recovery. Deleting the corrupt segment
                # and creating an empty one with starting offset <base>".
                truncated = seg.size
                if self.read_only:
                    seg._file_size = 0
                else:
                    seg.offset_index.reset()
                    seg.time_index.reset()
                    seg.txn_index.reset()
                    seg._truncate_log(0)
            if truncated > 0:
                self._drop_segments_from(i + 1, delete=not self.read_only)
                break
            i += 1

    def _check_tail_readable(self, log_start: int) -> None:
        """After a clean shutdown the last segment is trusted; if its headers cannot even be
        walked it is recovered anyway."""
        if not self._segments:
            return
        seg = self._segments[-1]
        try:
            seg.read_next_offset()
        except CorruptRecordError:
            self._recover_segment(seg)

    def _drop_segments_from(self, index: int, delete: bool) -> None:
        doomed = self._segments[index:]
        del self._segments[index:]
        del self._bases[index:]
        # Newest first: a crash part-way leaves a contiguous prefix of segments.
        for seg in reversed(doomed):
            if delete:
                self._delete_segment_files(seg)
            else:
                seg.close_handlers()

    def _delete_segment_files(self, seg: Segment) -> None:
        """Rename the segment's files to ``.deleted`` (the ``.log`` first, so a crash never
        leaves half a segment that loads) and delete them."""
        try:
            seg.change_file_suffixes("", _files.DELETED_FILE_SUFFIX)
        except FileNotFoundError:
            pass
        except BaseException:
            seg._wlen = 0  # the segment is leaving the log: close its files, keep the error
            try:
                seg.close_handlers()
            except OSError:
                pass
            raise
        seg.delete()
        self._dir_dirty = True

    # -- producer state ----------------------------------------------------------------------------
    def _replay_producer_state(self, start: int, end: int) -> None:
        ps = self.producer_state
        i = max(_floor_index(self._bases, start), 0)
        while i < len(self._segments):
            seg = self._segments[i]
            if seg.base_offset >= end:
                break
            pos = 0
            if start > seg.base_offset:
                found = seg.translate_offset(start)
                if found is None:
                    i += 1
                    continue
                pos = found.position
            for _p, batch in seg.iter_batches(pos):
                if batch.last_offset < start:
                    continue
                if batch.base_offset >= end if batch.magic >= 2 else batch.last_offset >= end:
                    return
                completed = ps.update(batch)
                if completed is not None:
                    ps.complete_txn(completed)
            i += 1

    def _rebuild_producer_state(
        self, last_offset: int, reload_from_clean_shutdown: bool = False
    ) -> None:
        """Kafka's ``rebuildProducerState``: load the newest snapshot <= ``last_offset`` and
        replay the batches after it; with no snapshot at all after a clean shutdown, skip the
        scan and just snapshot the end (Kafka's upgrade shortcut)."""
        ps = self.producer_state
        log_start = getattr(self, "_log_start_offset", self._bases[0] if self._bases else 0)
        if reload_from_clean_shutdown and not ps.snapshot_offsets():
            ps.update_map_end_offset(last_offset)
            ps.take_snapshot()
            return
        ps.truncate_and_reload(min(log_start, last_offset), last_offset)
        if ps.map_end_offset < last_offset:
            self._replay_producer_state(ps.map_end_offset, last_offset)
        ps.update_map_end_offset(last_offset)

    # -- properties --------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """A standalone log is its own only replica: every appended offset is committed."""
        return self._log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest ongoing transaction, else the high watermark
        (what a read_committed consumer may read up to)."""
        fu = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if fu is None else min(fu, hw)

    def first_unstable_offset(self) -> Optional[int]:
        """First offset of the earliest ongoing (not yet committed/aborted) transaction."""
        return self.producer_state.first_unstable_offset()

    # -- compaction (see kafkalog.storage.cleaner) ------------------------------------------------------
    def cleaner_checkpoint(self) -> int:
        """The first dirty offset: the ``cleaner-offset-checkpoint`` entry of this partition
        (kept in memory for a directory that is not named like a partition), or the log start."""
        v = getattr(self, "_cleaner_ckpt", None)
        if v is None:
            v = self._root_checkpoint(_files.CLEANER_OFFSET_CHECKPOINT_FILE)
        if v is None or v < self._log_start_offset or v > self._log_end_offset:
            v = self._log_start_offset
        return v

    def _set_cleaner_checkpoint(self, offset: int) -> None:
        self._cleaner_ckpt = offset
        if self.topic_partition is not None and not self.read_only:
            tp = self.topic_partition
            _update_root_checkpoint(
                os.path.join(self.root, _files.CLEANER_OFFSET_CHECKPOINT_FILE),
                {(tp.topic, tp.partition): offset},
            )

    def compact(self, cleaner=None, *, force: bool = False, now: Optional[int] = None):
        """Run Kafka's log cleaner on this log (``cleanup.policy`` must include ``compact``):
        when the log is eligible (dirty ratio above ``min.cleanable.dirty.ratio`` or
        ``max.compaction.lag.ms`` exceeded; always with ``force``), clean rounds until the
        whole cleanable range is clean (several passes when the offset map fills).  Returns
        the merged :class:`kafkalog.storage.cleaner.CleanerStats` (``passes == 0`` when nothing ran)."""
        from .cleaner import Cleaner, CleanerStats

        cleaner = cleaner or Cleaner()
        total = CleanerStats()
        with self._lock:
            self._check_writable()
            try:
                if not self.config.compact:
                    raise ValueError(f"log {self.dir} does not have cleanup.policy=compact")
                if not force and not cleaner.needs_cleaning(self, now):
                    total.end = time.monotonic()
                    return total
                while True:
                    before = self.cleaner_checkpoint()
                    end, stats = cleaner.clean(self, now)
                    total.merge(stats)
                    ltc = cleaner.log_to_clean(self, now)
                    if end <= before or ltc.first_uncleanable_offset <= ltc.first_dirty_offset:
                        break
            except _STORAGE_ERRORS as e:
                self._io_error(e, "compacting")
        total.end = time.monotonic()
        return total

    def replace_segments(self, new_segments: List[Segment], old_segments: List[Segment]) -> None:
        """Swap cleaned segments in for ``old_segments`` crash-safely (Kafka's
        ``replaceSegments``): ``.cleaned`` -> ``.swap`` (newest first), the old segments leave
        the log (renamed ``.deleted`` and deleted, also one whose name a new segment reuses),
        then ``.swap`` -> final name.  A crash at any point loads either the old or the new
        segments (the loader drops ``.cleaned`` and incomplete swaps and completes the rest)."""
        with self._lock:
            self._check_writable()
            swapped_in = False
            try:
                new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
                for seg in reversed(new_sorted):
                    if seg.file_suffix == _files.CLEANED_FILE_SUFFIX:
                        seg.change_file_suffixes(
                            _files.CLEANED_FILE_SUFFIX, _files.SWAP_FILE_SUFFIX
                        )
                _files.fsync_dir(self.dir)
                _hook("swapped")
                old_ids = {id(s) for s in old_segments}
                keep = [s for s in self._segments if id(s) not in old_ids]
                self._segments = []
                self._bases = []
                for s in keep:
                    self._add_segment(s)
                for s in new_sorted:
                    self._add_segment(s)
                swapped_in = True
                # Every old file goes (a stale .txnindex under a reused name included); the swap
                # files are complete, so the loader would finish this from any point on.
                for old in sorted(old_segments, key=lambda s: s.base_offset, reverse=True):
                    self._delete_segment_files(old)
                    _hook("old-removed")
                for seg in new_sorted:
                    seg.change_file_suffixes(_files.SWAP_FILE_SUFFIX, "")
                    _hook("renamed")
                _files.fsync_dir(self.dir)
            except OSError as e:
                if not swapped_in:
                    # the new segments never joined the log: close their files (the loader
                    # deletes or completes what is on disk)
                    for seg in new_segments:
                        try:
                            seg.close_handlers()
                        except OSError:
                            pass
                self._io_error(e, "replacing segments of")

    @property
    def recovery_point(self) -> int:
        """Offsets below this were flushed (fsynced) to disk."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    @property
    def segments(self) -> List[Segment]:
        """The segments, oldest first (a copy of the list)."""
        return list(self._segments)

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        """Total bytes of all segments."""
        return sum(s.size for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_ms

    def __len__(self) -> int:
        return self._log_end_offset - self._log_start_offset

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.dir} is closed", path=self.dir)
        if self._offline is not None:
            self._raise_offline()

    # -- I/O errors (Kafka's LogDirFailureChannel) ------------------------------------------------
    @property
    def offline(self) -> bool:
        """Whether an I/O error took this log offline (see :meth:`_io_error`)."""
        return self._offline is not None

    def _raise_offline(self):
        first = self._offline
        raise KafkaStorageError(
            f"log {self._tp_name()} is offline since an I/O error ({first}); close it and open "
            "the directory again, which recovers it",
            path=first.path,
            errno=getattr(first, "errno", None),  # None after an UnsafePathError
            operation=getattr(first, "operation", None),
        ) from first

    def _io_error(self, e: OSError, operation: str):
        """Raise the KafkaStorageError for an OSError met while ``operation`` and take the log
        offline, as a broker takes a log dir offline: the in-memory state may no longer match
        the files, so every later call but :meth:`close` (which then only closes the files,
        writing no clean-shutdown marker) raises, and the next open recovers the directory."""
        if isinstance(e, UnsafePathError):
            # a refused write (a planted link) may also leave the state half-changed
            if self._offline is None:
                self._offline = e
            raise e
        err = KafkaStorageError.from_os_error(
            e, f"{operation} log {self._tp_name()}", path=getattr(e, "filename", None) or self.dir
        )
        if self._offline is None:
            self._offline = err
        if err is e:
            raise err
        raise err from e

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ValueError(f"log {self.dir} was opened read-only")
        if self._flusher_error is not None:
            err, self._flusher_error = self._flusher_error, None
            raise err

    def _tp_name(self) -> str:
        return str(self.topic_partition) if self.topic_partition is not None else self.dir

    # -- append ------------------------------------------------------------------------------------
    def _refresh_fast_path(self) -> None:
        c = self.config
        self._fast_ok = (
            not self._validate_records
            and not c.compact
            and c.timestamp_type == TimestampType.CREATE_TIME
            and c.timestamp_before_max_ms == LONG_MAX
            and c.timestamp_after_max_ms == LONG_MAX
        )
        target = c.target_compression
        self._target_codec = -1 if target is None else int(target)
        self._max_message_bytes = c.max_message_bytes
        self._segment_bytes = c.segment_bytes
        self._segment_ms = c.segment_ms
        self._flush_messages = c.flush_messages

    def append(
        self,
        records,
        *,
        leader_epoch: Optional[int] = None,
        origin: str = "client",
    ) -> LogAppendInfo:
        """Append records as the partition leader: validate them like Kafka's LogValidator,
        assign offsets from the log end offset and write them (Kafka's ``appendAsLeader``).

        ``records``: MemoryRecords, a MemoryRecordsBuilder or bytes holding one v2 batch (or
        v0/v1 messages, converted to a v2 batch).  ``leader_epoch`` is stamped into the batch
        (default: the latest epoch in the leader-epoch cache, 0 for a new log); a new epoch is
        recorded in ``leader-epoch-checkpoint``.
        ``origin``: ``"client"`` (a producer: base offset 0, no control batches, consistent
        counts...) or ``"coordinator"`` (may write transaction markers and other control
        batches).  Raises InvalidRecordError, CorruptRecordError, RecordTooLargeError or
        InvalidTimestampError for what Kafka rejects; nothing is written then.
        """
        if leader_epoch is not None and (
            type(leader_epoch) is not int or not -(2**31) <= leader_epoch <= _INT32_MAX
        ):
            _check_int_arg("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
        t = type(records)
        mv = (
            records
            if t is memoryview
            else memoryview(records)
            if t is bytes
            else _as_buffer(records)
        )
        with self._lock:
            if (
                self._closed
                or self.read_only
                or self._flusher_error is not None
                or self._offline is not None
            ):
                self._check_writable()
            try:
                if origin != "client" and origin != "coordinator":
                    raise ValueError(f"origin must be 'client' or 'coordinator', not {origin!r}")
                if leader_epoch is None:
                    leader_epoch = self._latest_epoch if self._latest_epoch is not None else 0
                n = len(mv)
                if self._fast_ok and origin == "client" and n >= 61 and mv[16] == 2:
                    # Fast path: one v2 batch from a client whose codec is kept and that needs no
                    # record-level check - validate the header and CRC, patch the offsets in place.
                    (
                        base, length, _e, _m, crc, attrs, delta, _bt, max_ts, pid, _pe, bseq, count
                    ) = _V2.unpack_from(mv, 0)
                    target = self._target_codec
                    if (
                        length + 12 == n
                        and not attrs & 0x28  # neither LogAppendTime nor control
                        and (attrs & 7) <= 4  # a codec id readers know (else refused below)
                        and (target < 0 or (attrs & 7) == target)
                        and base == 0
                        and n <= self._max_message_bytes
                        and delta >= 0
                        and delta + 1 == count
                        and (pid < 0 or bseq >= 0)
                        and _crc.crc32c(mv[21:]) == crc
                    ):
                        first = self._log_end_offset
                        last = first + delta
                        seg = self._segments[-1]
                        if n > self._segment_bytes:
                            self._raise_too_large_for_segment(n)
                        done = seg._append_if_fits(
                            mv,
                            n,
                            last,
                            max_ts,
                            first,
                            leader_epoch,
                            self._segment_bytes,
                            self._segment_ms,
                        )
                        if not done:
                            if done is False or seg.should_roll(
                                self._segment_ms, self._segment_bytes, max_ts, last, n, None
                            ):
                                seg = self._roll(first)
                            seg._append(mv, last, max_ts, last, first, leader_epoch)
                        self._log_end_offset = last + 1
                        if leader_epoch != self._latest_epoch and leader_epoch >= 0:
                            self.leader_epoch_cache.assign(leader_epoch, first)
                            self._latest_epoch = self.leader_epoch_cache.latest_epoch
                        if pid >= 0:
                            facts = [
                                _BatchFacts(RecordBatch(mv, 0, check_crc=False), first, max_ts)
                            ]
                            self._update_producer_state(facts, seg)
                        self.producer_state.map_end_offset = last + 1
                        if last + 1 - self._recovery_point >= self._flush_messages:
                            self._flush_upto(last + 1, skip_active_indexes=True)
                        elif self._flusher is not None and self._unflushed_since is None:
                            self._unflushed_since = time.monotonic()
                            self._cond.notify_all()
                        return _tuple_new(
                            LogAppendInfo,
                            (first, last, max_ts, last, -1, self._log_start_offset, n, count),
                        )
                # The general path (also reports every error the fast path left to it).
                now = self._clock()
                prepared = self._prepare_leader_append(mv, leader_epoch, origin, now)
                if prepared is None:
                    return LogAppendInfo(-1, -1, -1, -1, -1, self._log_start_offset, 0, 0)
                self._append_prepared(prepared, now, leader_epoch)
                return LogAppendInfo(
                    prepared.first_offset,
                    prepared.last_offset,
                    prepared.max_timestamp,
                    prepared.shallow_offset,
                    prepared.log_append_time,
                    self._log_start_offset,
                    len(prepared.data),
                    prepared.records_count,
                )
            except _STORAGE_ERRORS as e:
                self._io_error(e, "appending to")

    def _raise_too_large_for_segment(self, size: int) -> None:
        raise RecordTooLargeError(
            f"Message batch size is {size} bytes in append to partition {self._tp_name()} which "
            f"exceeds the maximum configured segment size of {self._segment_bytes}."
        )

    def _validate_batch(self, batch, first_batch, origin: str) -> None:
        """Kafka's ``LogValidator.validateBatch``."""
        tp = self._tp_name()
        if batch.magic != first_batch.magic:
            raise InvalidRecordError(
                f"Batch magic {batch.magic} is not the same as the first batch's magic byte "
                f"{first_batch.magic} in topic partition {tp}."
            )
        if origin == "client":
            if batch.magic >= 2:
                count_from_offsets = batch.last_offset - batch.base_offset + 1
                if count_from_offsets <= 0:
                    raise InvalidRecordError(
                        f"Batch has an invalid offset range: [{batch.base_offset}, "
                        f"{batch.last_offset}] in topic partition {tp}."
                    )
                count = batch.records_count
                if count <= 0:
                    raise InvalidRecordError(
                        f"Invalid reported count for record batch: {count} in topic partition {tp}."
                    )
                if count_from_offsets != count:
                    raise InvalidRecordError(
                        "Inconsistent batch offset range "
                        f"[{batch.base_offset}, {batch.last_offset}] "
                        f"and count of records {count} in topic partition {tp}."
                    )
            if batch.is_control_batch:
                raise InvalidRecordError(
                    f"Clients are not allowed to write control records in topic partition {tp}."
                )
            if batch.producer_id >= 0 and batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {batch.base_sequence} in record batch with "
                    f"producerId {batch.producer_id} in topic partition {tp}."
                )

    def _validate_record(self, batch, record, index: int, now: int) -> None:
        """Kafka's ``validateRecord`` / ``validateKey`` / ``validateTimestamp``."""
        tp = self._tp_name()
        c = self.config
        if c.compact and record.key is None:
            raise InvalidRecordError(
                f"Compacted topic cannot accept message without key in topic partition {tp}."
            )
        ts = record.timestamp
        if c.timestamp_type == TimestampType.CREATE_TIME and ts != -1:
            before, after = c.timestamp_before_max_ms, c.timestamp_after_max_ms
            if (before != LONG_MAX and ts < now - before) or (
                after != LONG_MAX and ts > now + after
            ):
                lo = now - before if before != LONG_MAX else "-inf"
                hi = now + after if after != LONG_MAX else "+inf"
                raise InvalidTimestampError(
                    f"Timestamp {ts} of message with offset {record.offset} is out of range. The "
                    f"timestamp should be within [{lo}, {hi}]",
                    offset=record.offset,
                )
        elif batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
            raise InvalidTimestampError(
                f"Invalid timestamp type in message {record}. Producer should not set timestamp "
                f"type to LogAppendTime."
            )

    def _prepare_leader_append(
        self, mv: memoryview, leader_epoch: int, origin: str, now: int
    ) -> Optional[_Prepared]:
        """The full LogValidator path: any magic, codec conversion, LogAppendTime, record-level
        checks."""
        tp = self._tp_name()
        c = self.config
        mr = MemoryRecords(mv)
        batches = list(mr)
        if not batches:
            return None
        source_codec = CompressionType.NONE
        for b in batches:
            if origin == "client" and b.magic >= 2 and b.base_offset != 0:
                raise InvalidRecordError(
                    f"The baseOffset of the record batch in the append to {tp} should be 0, but it "
                    f"is {b.base_offset}"
                )
            if b.size_in_bytes > c.max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {tp} is {b.size_in_bytes} bytes which "
                    f"exceeds the maximum configured value of {c.max_message_bytes}."
                )
            if not b.is_valid():
                raise CorruptRecordError(
                    f"Record is corrupt (stored crc = {b.crc}) in topic partition {tp}."
                )
            if b.attributes & 7 > 4:
                raise InvalidRecordError(
                    f"Unknown compression type id {b.attributes & 7} in the batch at offset "
                    f"{b.base_offset} in the append to {tp}."
                )
            if b.compression_type != CompressionType.NONE:
                source_codec = b.compression_type
        first_b = batches[0]
        if (first_b.magic >= 2 or source_codec != CompressionType.NONE) and len(batches) > 1:
            raise InvalidRecordError("Compressed outer record has more than one batch")
        for b in batches:
            self._validate_batch(b, first_b, origin)
        target = c.target_compression
        target_codec = source_codec if target is None else target
        lat = c.timestamp_type == TimestampType.LOG_APPEND_TIME
        first = self._log_end_offset
        in_place = first_b.magic == 2 and (
            target_codec == source_codec
            or (first_b.is_control_batch and source_codec == CompressionType.NONE)
        )
        if in_place:
            b = first_b
            need_records = (
                self._validate_records
                or c.compact
                or c.timestamp_before_max_ms != LONG_MAX
                or c.timestamp_after_max_ms != LONG_MAX
                or bool(b.attributes & 0x08)
            )
            max_ts = b.max_timestamp
            if need_records:
                records = list(b)
                if len(records) != b.records_count:
                    raise InvalidRecordError(
                        f"Record count {len(records)} does not match the batch header count "
                        f"{b.records_count} in topic partition {tp}."
                    )
                rec_max = -1
                for i, r in enumerate(records):
                    self._validate_record(b, r, i, now)
                    if r.timestamp > rec_max:
                        rec_max = r.timestamp
                max_ts = rec_max
            last = first + b.last_offset_delta
            data: Any = mv[: b.size_in_bytes]
            log_append_time = -1
            new_attrs = b.attributes
            if lat:
                max_ts = now
                log_append_time = now
                new_attrs = b.attributes | 0x08
            else:
                new_attrs = b.attributes & ~0x08
            if new_attrs != b.attributes or max_ts != b.max_timestamp:
                buf = bytearray(data)
                _H.pack_into(buf, 21, new_attrs)
                _Q.pack_into(buf, 35, max_ts)
                _U32.pack_into(buf, 17, _crc.crc32c(memoryview(buf)[21:]))
                data = buf
            facts: List[Any] = []
            if b.producer_id >= 0:
                facts.append(_BatchFacts(b, first, max_ts))
            return _Prepared(
                data,
                first,
                last,
                max_ts,
                last,
                first,
                leader_epoch,
                facts,
                log_append_time,
                b.records_count,
                2,
            )

        # Rebuild: codec or format conversion (Kafka's buildRecordsAndAssignOffsets).
        records = []
        for b in batches:
            for i, r in enumerate(b):
                self._validate_record(b, r, i, now)
                records.append(r)
        if not records:
            return None
        v2 = first_b.magic >= 2
        builder = MemoryRecordsBuilder(
            magic=2,
            compression_type=target_codec,
            base_offset=first,
            timestamp_type=c.timestamp_type,
            producer_id=first_b.producer_id if v2 else -1,
            producer_epoch=first_b.producer_epoch if v2 else -1,
            base_sequence=first_b.base_sequence if v2 else -1,
            is_transactional=first_b.is_transactional if v2 else False,
            partition_leader_epoch=leader_epoch if leader_epoch >= 0 else -1,
            is_control_batch=first_b.is_control_batch if v2 else False,
            log_append_time=now if lat else None,
        )
        max_ts = -1
        for i, r in enumerate(records):
            ts = r.timestamp
            builder.append_with_offset(
                first + i, ts, r.key, r.value, tuple(getattr(r, "headers", ()) or ())
            )
            if ts > max_ts:
                max_ts = ts
        built = builder.build()
        if len(built) > c.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {tp} is {len(built)} bytes which "
                f"exceeds the maximum configured value of {c.max_message_bytes}."
            )
        last = first + len(records) - 1
        log_append_time = -1
        if lat:
            max_ts = now
            log_append_time = now
        facts = []
        if v2 and first_b.producer_id >= 0:
            facts.append(_BatchFacts(RecordBatch(built, 0, check_crc=False), first, max_ts))
        return _Prepared(
            memoryview(built),
            first,
            last,
            max_ts,
            last,
            None,
            None,
            facts,
            log_append_time,
            len(records),
            2,
        )

    def _append_prepared(self, p: _Prepared, now: int, leader_epoch: int) -> None:
        data = p.data
        size = len(data)
        if size > self._segment_bytes:
            self._raise_too_large_for_segment(size)
        seg = self._segments[-1]
        if seg.should_roll(
            self._segment_ms, self._segment_bytes, p.max_timestamp, p.last_offset, size, now
        ):
            seg = self._roll(p.first_offset if p.first_offset >= 0 else p.last_offset - _INT32_MAX)
        seg._append(
            data, p.last_offset, p.max_timestamp, p.shallow_offset, p.base_patch, p.epoch_patch
        )
        self._log_end_offset = p.last_offset + 1
        if leader_epoch >= 0 and leader_epoch != self._latest_epoch and p.magic >= 2:
            self.leader_epoch_cache.assign(leader_epoch, p.first_offset)
            self._latest_epoch = self.leader_epoch_cache.latest_epoch
        if p.facts:
            self._update_producer_state(p.facts, seg)
        self.producer_state.map_end_offset = self._log_end_offset
        self._after_append()

    def _update_producer_state(self, facts, seg: Segment) -> None:
        ps = self.producer_state
        for f in facts:
            completed = ps.update(f)
            if completed is not None:
                lso = ps.last_stable_offset(completed)
                seg.update_txn_index(completed, lso)
                ps.complete_txn(completed)

    def _after_append(self) -> None:
        if self._log_end_offset - self._recovery_point >= self._flush_messages:
            self._flush_upto(self._log_end_offset, skip_active_indexes=True)
        elif self._flusher is not None and self._unflushed_since is None:
            self._unflushed_since = time.monotonic()
            self._cond.notify_all()

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append batches whose offsets are already assigned (Kafka's ``appendAsFollower``):
        CRCs and sizes are checked, offsets must increase and start at or after the log end
        offset; several batches may be appended at once.  Raises InvalidOffsetError for
        offsets out of order or below the log end."""
        mv = _as_buffer(records)
        with self._lock:
            self._check_writable()
            mark = None
            try:
                tp = self._tp_name()
                now = self._clock()
                mr = MemoryRecords(mv)
                batches = list(mr)
                if not batches:
                    return LogAppendInfo(-1, -1, -1, -1, -1, self._log_start_offset, 0, 0)
                valid = mr.valid_bytes
                prev_last = -1
                max_ts = -1
                shallow = -1
                count = 0
                facts = []
                first_is_exact = batches[0].magic >= 2
                first = batches[0].base_offset if first_is_exact else batches[0].last_offset
                for b in batches:
                    if b.last_offset <= prev_last or (b.magic >= 2 and b.base_offset <= prev_last):
                        raise InvalidOffsetError(
                            f"Out of order offsets found in append to {tp}: "
                            f"{[x.last_offset for x in batches][:10]}"
                        )
                    prev_last = b.last_offset
                    if prev_last > LONG_MAX - 1:  # the log end offset must stay a long
                        raise InvalidOffsetError(
                            f"Offset {prev_last} in the append to {tp} is out of range: the "
                            f"last offset of a batch must be below {LONG_MAX}",
                            offset=prev_last,
                        )
                    if b.size_in_bytes > self.config.max_message_bytes:
                        raise RecordTooLargeError(
                            f"The record batch size in the append to {tp} is "
                            f"{b.size_in_bytes} bytes which exceeds the maximum configured value "
                            f"of {self.config.max_message_bytes}."
                        )
                    if not b.is_valid():
                        raise CorruptRecordError(
                            f"Record is corrupt (stored crc = {b.crc}) in topic partition {tp}."
                        )
                    if b.attributes & 7 > 4:
                        raise InvalidRecordError(
                            f"Unknown compression type id {b.attributes & 7} in the batch at "
                            f"offset {b.base_offset} in the append to {tp}."
                        )
                    if b.max_timestamp > max_ts:
                        max_ts = b.max_timestamp
                        shallow = b.last_offset
                    count += b.records_count if b.magic >= 2 else 1
                    if b.magic >= 2 and b.producer_id >= 0:
                        facts.append(b)
                if first < self._log_end_offset:
                    raise InvalidOffsetError(
                        f"Unexpected offset in append to {tp}. First offset {first} is less than "
                        "the next "
                        f"offset {self._log_end_offset}. First 10 offsets in append: "
                        f"{[x.last_offset for x in batches][:10]}, last offset in append: "
                        f"{prev_last}. "
                        f"Log start offset = {self._log_start_offset}",
                        offset=first,
                    )
                data = mv[:valid]
                if len(data) > self._segment_bytes:
                    raise RecordTooLargeError(
                        f"Message batch size is {len(data)} bytes in append to partition {tp} "
                        f"which exceeds the maximum configured segment size of "
                        f"{self._segment_bytes}."
                    )
                seg = self._segments[-1]
                if seg.should_roll(
                    self._segment_ms, self._segment_bytes, max_ts, prev_last, len(data), now
                ):
                    seg = self._roll(first if first_is_exact else prev_last - _INT32_MAX)
                mark = (seg, seg.size)
                seg._append(data, prev_last, max_ts, shallow)
                self._log_end_offset = prev_last + 1
                for b in batches:
                    if b.magic >= 2 and b.partition_leader_epoch >= 0:
                        if self.leader_epoch_cache.assign(b.partition_leader_epoch, b.base_offset):
                            self._latest_epoch = self.leader_epoch_cache.latest_epoch
                if facts:
                    self._update_producer_state(facts, seg)
                self.producer_state.map_end_offset = self._log_end_offset
                self._after_append()
                return LogAppendInfo(
                    first, prev_last, max_ts, shallow, -1, self._log_start_offset, valid, count
                )
            except _STORAGE_ERRORS as e:
                if mark is not None:
                    mark[0]._discard_from(mark[1])  # none of a failed call's batches stay
                self._io_error(e, "appending to")

    # -- roll --------------------------------------------------------------------------------------
    def roll(self) -> Segment:
        """Start a new active segment at the log end offset (no-op when the active segment is
        empty); the old one gets its final time-index entry, is trimmed and flushed."""
        with self._lock:
            self._check_writable()
            try:
                return self._roll(None)
            except _STORAGE_ERRORS as e:
                self._io_error(e, "rolling")

    def _roll(self, expected_next_offset: Optional[int]) -> Segment:
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset:
            if active.size == 0:
                return active
            raise KafkaLogError(
                "Trying to roll a new log segment for topic partition "
                f"{self._tp_name()} with start offset {new_offset} while it already exists."
            )
        if new_offset < active.base_offset:
            raise KafkaLogError(
                "Trying to roll a new log segment for topic partition "
                f"{self._tp_name()} with start offset {new_offset} lower than the active "
                f"segment's base offset {active.base_offset}."
            )
        for fn in (
            _files.log_file,
            _files.offset_index_file,
            _files.time_index_file,
            _files.transaction_index_file,
        ):
            path = fn(self.dir, new_offset)
            if os.path.lexists(path):  # a dangling link too
                os.unlink(
                    path
                )  # Kafka: "Newly rolled segment file ... already exists; deleting it first"
        self.producer_state.update_map_end_offset(new_offset)
        self.producer_state.take_snapshot(fsync=False)
        active.on_become_inactive_segment()
        seg = self._open_segment(new_offset)
        self._add_segment(seg)
        self._dir_dirty = True
        # Kafka schedules this flush asynchronously; it makes the rolled segment durable.
        self._flush_upto(new_offset)
        return seg

    # -- flush -------------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every unflushed byte (data and indexes) up to the log end offset, advance the
        recovery point and checkpoint it (automatic flushes checkpoint it at most every
        ``checkpoint_interval_ms``, like a broker)."""
        with self._lock:
            self._check_open()
            if self.read_only:
                return
            try:
                self._flush_upto(self._log_end_offset, force=True)
                self._write_checkpoints()
            except _STORAGE_ERRORS as e:
                self._io_error(e, "flushing")

    def _flush_upto(
        self, offset: int, force: bool = False, skip_active_indexes: bool = False
    ) -> None:
        """fsync the segments holding unflushed offsets below ``offset`` and move the recovery
        point there.  ``skip_active_indexes``: do not msync the active segment's indexes - an
        unclean open always rebuilds them (the recovery point lies in that segment), so the
        automatic flushes (``flush.messages``/``flush.ms``) only need its data on disk."""
        if offset > self._recovery_point or force:
            start = max(_floor_index(self._bases, self._recovery_point), 0)
            segs = self._segments
            flushed_any = False
            for seg in segs[start:]:
                if seg.base_offset >= offset and flushed_any:
                    break
                seg.flush(indexes=not (skip_active_indexes and seg is segs[-1]))
                flushed_any = True
            if self._dir_dirty:
                _files.fsync_dir(self.dir)
                self._dir_dirty = False
            if offset > self._recovery_point:
                self._recovery_point = offset
            self._last_flush_ms = self._clock()
        if self._recovery_point >= self._log_end_offset:
            self._unflushed_since = None
        now = self._clock()
        if now - self._last_checkpoint_ms >= self._checkpoint_interval_ms:
            self._write_checkpoints()

    def _flusher_loop(self) -> None:
        flush_ms = self.config.flush_ms
        with self._cond:
            while not self._closed and self._offline is None:  # offline: nothing more is written
                since = self._unflushed_since
                if since is None:
                    self._cond.wait()
                    continue
                delay = since + flush_ms / 1000.0 - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                try:
                    self._unflushed_since = None
                    if self._log_end_offset > self._recovery_point:
                        self._flush_upto(self._log_end_offset, skip_active_indexes=True)
                except _STORAGE_ERRORS as e:  # the log goes offline: the next call raises
                    try:
                        self._io_error(e, "flushing")
                    except KafkaStorageError:
                        pass
                    return
                except BaseException as e:  # surfaced by the next append
                    self._flusher_error = e
                    return

    def _write_checkpoints(self) -> None:
        """Write this partition's entries in the root checkpoints (recovery point, log start
        offset) - only when the directory is named ``<topic>-<partition>``."""
        self._last_checkpoint_ms = self._clock()
        if self.read_only or self.topic_partition is None:
            return
        tp = self.topic_partition
        written = self._checkpointed
        if written.get("rp") != self._recovery_point:
            # A recovery point that moves forward need not be durable (losing it only means
            # recovering more); one that moves back (truncation) must be, before data follows.
            lowered = written.get("rp") is not None and self._recovery_point < written["rp"]
            _update_root_checkpoint(
                os.path.join(self.root, _files.RECOVERY_POINT_CHECKPOINT_FILE),
                {tp: self._recovery_point},
                fsync=lowered,
            )
            written["rp"] = self._recovery_point
        first_base = self._segments[0].base_offset if self._segments else self._log_start_offset
        start = self._log_start_offset if self._log_start_offset > first_base else None
        if written.get("start", -1) != start:
            path = os.path.join(self.root, _files.LOG_START_OFFSET_CHECKPOINT_FILE)
            if start is not None or os.path.exists(path):
                _update_root_checkpoint(path, {tp: start})
            written["start"] = start

    # -- read --------------------------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int = 1048576,
        min_one_message: bool = True,
        max_offset: Optional[int] = None,
        isolation: str = "read_uncommitted",
    ) -> MemoryRecords:
        """Batches from the one holding ``offset``, at most ``max_bytes`` (the first batch
        whole when ``min_one_message``), as a broker answers a fetch: the data starts at a batch
        boundary (earlier offsets of that batch included) and may end with a partial batch.
        ``max_offset`` bounds the read (exclusive, e.g. a high watermark or last stable offset).
        Reading at the log end offset gives empty records; before the log start offset or past
        the end raises OffsetOutOfRangeError.  ``isolation="read_committed"`` bounds the read
        at the last stable offset (the aborted transactions of the range are given by
        :meth:`collect_aborted_transactions`; :meth:`iter_records` filters them)."""
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be non-negative, not {max_bytes}")
        with self._lock:
            self._check_open()
            try:
                leo = self._log_end_offset
                if offset < self._log_start_offset or offset > leo:
                    if offset > leo:
                        msg = (
                            f"Received request for offset {offset} for partition "
                            f"{self._tp_name()}, but we "
                            f"only have log segments upto {leo}."
                        )
                    else:
                        msg = (
                            f"Received request for offset {offset} for partition "
                            f"{self._tp_name()}, but we "
                            "only have log segments starting from offset: "
                            f"{self._log_start_offset}."
                        )
                    raise OffsetOutOfRangeError(msg, offset=offset)
                i = _floor_index(self._bases, offset)
                if i < 0:
                    raise OffsetOutOfRangeError(
                        f"Received request for offset {offset} for partition "
                        f"{self._tp_name()}, but we only "
                        f"have log segments starting from offset: {self._bases[0]}.",
                        offset=offset,
                    )
                limit = leo if max_offset is None else min(max_offset, leo)
                if isolation == "read_committed":
                    limit = min(limit, self.last_stable_offset)
                if offset >= limit:
                    return MemoryRecords(b"")
                limit_seg = None
                limit_pos = None
                if limit < leo:
                    j = _floor_index(self._bases, limit)
                    limit_seg = self._segments[j]
                    found = limit_seg.translate_offset(limit)
                    limit_pos = found.position if found is not None else limit_seg.size
                while i < len(self._segments):
                    seg = self._segments[i]
                    if limit_seg is not None and seg.base_offset > limit_seg.base_offset:
                        break
                    max_position = limit_pos if seg is limit_seg else None
                    result = seg.read(offset, max_bytes, max_position, min_one_message)
                    if result is not None:
                        self._check_read(seg, offset, result)
                        return result
                    i += 1
                return MemoryRecords(b"")
            except _STORAGE_ERRORS as e:
                self._io_error(e, "reading")

    def _check_read(self, seg: Segment, offset: int, result: MemoryRecords) -> None:
        """Check the framing and CRC of every complete batch ``read`` returns, so that a
        corrupt batch raises here naming the segment file and the batch's file position (the
        caller only holds a copy, whose positions start at 0); a partial last batch is left
        to the caller, as a fetch may end inside one."""
        try:
            for b in result:
                b.ensure_valid()
        except KafkaLogError as e:
            found = seg.translate_offset(offset)
            e.path = None
            raise e.located(seg.log_path, found.position if found is not None else 0)

    def iter_batches(self, start_offset: Optional[int] = None) -> Iterator[Any]:
        """Every batch from the one holding ``start_offset`` (default: the log start) to the
        end, as RecordBatch / LegacyRecordBatch objects over copies of the bytes (the log may
        be appended to meanwhile; batches appended after a segment was passed are included
        only for later segments)."""
        with self._lock:
            self._check_open()
            start = self._log_start_offset if start_offset is None else start_offset
            segs = list(self._segments)
        for k, seg in enumerate(segs):
            if k + 1 < len(segs) and segs[k + 1].base_offset <= start:
                continue
            with self._lock:
                if seg.closed:
                    continue
                pos = 0
                if start > seg.base_offset:
                    try:
                        found = seg.translate_offset(start)
                    except _STORAGE_ERRORS as e:
                        self._io_error(e, "reading")
                    if found is None:
                        continue
                    pos = found.position
            want = _SCAN_CHUNK
            while True:
                with self._lock:
                    if seg.closed:
                        break
                    if self._offline is not None:
                        self._raise_offline()
                    end = seg.size
                    if pos >= end:
                        break
                    try:
                        chunk = seg._read_at(pos, min(want, end - pos))
                    except _STORAGE_ERRORS as e:
                        self._io_error(e, "reading")
                records = MemoryRecords(chunk)
                consumed = 0
                try:
                    for b in records:
                        consumed = b.position + b.size_in_bytes
                        yield b
                except KafkaLogError as e:  # name the file and the file position
                    if e.path is None:
                        e.located(seg.log_path, pos)
                    raise
                if consumed == 0:
                    if len(chunk) >= 12:
                        need = struct.unpack_from(">i", chunk, 8)[0] + 12
                        if need > len(chunk) and pos + need <= end:
                            want = need
                            continue
                    break
                want = _SCAN_CHUNK
                pos += consumed

    def iter_records(
        self, start_offset: Optional[int] = None, isolation: str = "read_uncommitted"
    ) -> Iterator[Any]:
        """Every data record (control batches skipped) with offset >= ``start_offset``.
        ``isolation="read_committed"``: what a read_committed consumer sees -- records below
        the last stable offset (taken when the iteration starts), without the batches of
        aborted transactions (found with the transaction indexes, as Kafka's fetcher does)."""
        start = self._log_start_offset if start_offset is None else start_offset
        if isolation == "read_uncommitted":
            for b in self.iter_batches(start):
                if b.is_control_batch:
                    continue
                for r in b:
                    if r.offset >= start:
                        yield r
            return
        if isolation != "read_committed":
            raise ValueError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        with self._lock:
            lso = self.last_stable_offset
            aborted = sorted(
                self.collect_aborted_transactions(start, lso), key=lambda t: t.first_offset
            )
        k = 0
        aborted_pids = set()
        for b in self.iter_batches(start):
            if b.magic >= 2 and b.base_offset >= lso:
                break
            if b.magic >= 2 and b.producer_id >= 0:
                while k < len(aborted) and aborted[k].first_offset <= b.last_offset:
                    aborted_pids.add(aborted[k].producer_id)
                    k += 1
                if b.is_control_batch:
                    for r in b:
                        key = r.key
                        if key is not None and len(key) >= 4 and struct.unpack_from(">hh", key)[1] == 0:
                            aborted_pids.discard(b.producer_id)
                        break
                    continue
                if b.is_transactional and b.producer_id in aborted_pids:
                    continue
            elif b.magic >= 2 and b.is_control_batch:
                continue
            for r in b:
                if r.offset >= lso:
                    return
                if r.offset >= start:
                    yield r

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> List[Any]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)`` from the
        transaction indexes (what a read_committed fetch returns)."""
        with self._lock:
            self._check_open()
            try:
                out: List[Any] = []
                i = max(_floor_index(self._bases, start_offset), 0)
                for seg in self._segments[i:]:
                    result = seg.collect_aborted_txns(start_offset, upper_bound_offset)
                    out.extend(result.aborted_transactions)
                    if result.is_complete:
                        break
                return out
            except _STORAGE_ERRORS as e:
                self._io_error(e, "reading the transaction indexes of")

    def offset_for_timestamp(self, timestamp: int) -> Optional[TimestampAndOffset]:
        """Kafka's ``fetchOffsetByTimestamp`` (ListOffsets): the first record with a timestamp
        >= ``timestamp`` and offset >= the log start offset, or None.  Special targets: -1
        latest (the log end offset), -2 earliest and -4 earliest local (the log start offset),
        -3 the first record carrying the max timestamp, -5 latest tiered (none: offset -1).

        Kafka searches only the first segment whose largest timestamp is >= the target, so it
        answers None when that segment's matching records all lie below the log start offset;
        kafkalog goes on to the next segments instead."""
        with self._lock:
            self._check_open()
            try:
                cache = self.leader_epoch_cache
                if timestamp == LATEST_TIMESTAMP:
                    return TimestampAndOffset(-1, self._log_end_offset, cache.latest_epoch)
                if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                    first = cache.entries[0] if cache.entries else None
                    epoch = (
                        first.epoch
                        if first is not None and first.start_offset <= self._log_start_offset
                        else None
                    )
                    return TimestampAndOffset(-1, self._log_start_offset, epoch)
                if timestamp == LATEST_TIERED_TIMESTAMP:
                    return TimestampAndOffset(-1, -1, -1)
                if timestamp == MAX_TIMESTAMP:
                    best = None
                    for seg in self._segments:
                        if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                            best = seg
                    if best is None or best.max_timestamp_so_far < 0:
                        return None
                    return best.offset_of_max_timestamp()
                if timestamp < 0:
                    raise ValueError(f"unsupported special timestamp {timestamp}")
                start = self._log_start_offset
                segs = self._segments
                for i, seg in enumerate(segs):
                    if i + 1 < len(segs) and segs[i + 1].base_offset <= start:
                        continue  # wholly below the log start offset
                    if seg.largest_timestamp >= timestamp:
                        found = seg.find_offset_by_timestamp(timestamp, start)
                        if found is not None:
                            return found
                return None
            except _STORAGE_ERRORS as e:
                self._io_error(e, "looking up a timestamp in")

    # -- retention ---------------------------------------------------------------------------------
    def delete_retention(self) -> int:
        """Kafka's ``deleteOldSegments``: delete the oldest segments that lie wholly below the
        log start offset, then (with ``cleanup.policy`` including ``delete``) those beyond
        ``retention.bytes`` and those older than ``retention.ms`` (by largest record timestamp,
        else file mtime).  A qualifying active segment is rolled first; an empty last segment is
        never deleted.  Returns the number of segments deleted."""
        with self._lock:
            self._check_writable()
            try:
                n = self._delete_log_start_offset_breached()
                if self.config.delete:
                    n += self._delete_retention_size_breached()
                    n += self._delete_retention_ms_breached()
                return n
            except _STORAGE_ERRORS as e:
                self._io_error(e, "deleting old segments of")

    def _deletable_segments(self, predicate) -> List[Segment]:
        hw = self.high_watermark
        out = []
        segs = self._segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            is_last_and_empty = nxt is None and seg.size == 0
            if hw >= upper and predicate(seg, nxt) and not is_last_and_empty:
                out.append(seg)
            else:
                break
        return out

    def _delete_old_segments(self, predicate) -> int:
        deletable = self._deletable_segments(predicate)
        if not deletable:
            return 0
        count = len(deletable)
        if len(self._segments) == len(deletable):
            new = self._roll(None)
            if deletable[-1].base_offset == new.base_offset:
                deletable = deletable[:-1]
        doomed = set(id(s) for s in deletable)
        keep = [s for s in self._segments if id(s) not in doomed]
        self._segments = keep
        self._bases = [s.base_offset for s in keep]
        # Oldest first: a crash part-way leaves a contiguous suffix of segments.
        for seg in deletable:
            self._delete_segment_files(seg)
            self.producer_state.delete_snapshot(seg.base_offset)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        _files.fsync_dir(self.dir)
        self._write_checkpoints()
        return count

    def _delete_log_start_offset_breached(self) -> int:
        start = self._log_start_offset
        return self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= start
        )

    def _delete_retention_size_breached(self) -> int:
        retention = self.config.retention_bytes
        size = self.size
        if retention < 0 or size < retention:
            return 0
        diff = [size - retention]

        def should_delete(seg: Segment, nxt) -> bool:
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False

        return self._delete_old_segments(should_delete)

    def _delete_retention_ms_breached(self) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        now = self._clock()
        return self._delete_old_segments(lambda seg, nxt: now - seg.largest_timestamp > retention)

    def _maybe_increment_log_start_offset(self, new_start: int) -> bool:
        if new_start <= self._log_start_offset:
            return False
        self._log_start_offset = new_start
        if self._recovery_point < new_start:
            self._recovery_point = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch
        return True

    def increment_log_start_offset(self, new_start: int) -> bool:
        """Move the log start offset forward (Kafka's DeleteRecords); the segments wholly below
        it go at the next :meth:`delete_retention`.  Raises OffsetOutOfRangeError beyond the
        high watermark.  Returns whether it moved."""
        if type(new_start) is not int:
            _check_int_arg("new_start", new_start, 0, LONG_MAX)
        if not 0 <= new_start <= LONG_MAX:
            raise InvalidOffsetError(
                f"Cannot increment the log start offset of partition {self._tp_name()} to "
                f"{new_start}: offsets lie in [0, {LONG_MAX}]",
                offset=new_start,
            )
        with self._lock:
            self._check_writable()
            try:
                if new_start > self.high_watermark:
                    raise OffsetOutOfRangeError(
                        f"Cannot increment the log start offset to {new_start} of partition "
                        f"{self._tp_name()} since it is larger than the high watermark "
                        f"{self.high_watermark}",
                        offset=new_start,
                    )
                moved = self._maybe_increment_log_start_offset(new_start)
                if moved:
                    self._write_checkpoints()
                return moved
            except _STORAGE_ERRORS as e:
                self._io_error(e, "moving the log start offset of")

    # -- truncation --------------------------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything from the batch holding ``target_offset`` on (Kafka's
        ``truncateTo``, as a follower does); the log end offset becomes the next offset after
        the last remaining batch.  Returns False when there was nothing to remove."""
        if target_offset < 0:
            raise ValueError(
                f"Cannot truncate partition {self._tp_name()} to a negative offset "
                f"({target_offset})."
            )
        with self._lock:
            self._check_writable()
            try:
                if target_offset >= self._log_end_offset:
                    return False
                if self._segments[0].base_offset > target_offset:
                    self._truncate_fully_and_start_at(target_offset)
                    return True
                # Lower the durable recovery point first, so a crash mid-way recovers enough.
                if self._recovery_point > target_offset:
                    self._recovery_point = target_offset
                    self._write_checkpoints()
                i = _floor_index(self._bases, target_offset)
                doomed = self._segments[i + 1 :]
                del self._segments[i + 1 :]
                del self._bases[i + 1 :]
                # Newest first: a crash part-way leaves a contiguous prefix of segments.
                for seg in reversed(doomed):
                    self._delete_segment_files(seg)
                active = self._segments[-1]
                active.truncate_to(target_offset)
                self._log_end_offset = active.read_next_offset()
                self._recovery_point = min(self._recovery_point, self._log_end_offset)
                self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                self._latest_epoch = self.leader_epoch_cache.latest_epoch
                self._rebuild_producer_state(self._log_end_offset)
                active.flush()
                _files.fsync_dir(self.dir)
                self._write_checkpoints()
                return True
            except _STORAGE_ERRORS as e:
                self._io_error(e, "truncating")

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        if new_offset < 0:
            raise ValueError(f"offset must be non-negative, not {new_offset}")
        with self._lock:
            self._check_writable()
            try:
                self._truncate_fully_and_start_at(new_offset)
            except _STORAGE_ERRORS as e:
                self._io_error(e, "truncating")

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        self._recovery_point = min(self._recovery_point, new_offset)
        self._write_checkpoints()
        doomed = self._segments
        self._segments = []
        self._bases = []
        for seg in reversed(doomed):
            self._delete_segment_files(seg)
        self._add_segment(self._open_segment(new_offset))
        self._log_end_offset = new_offset
        self._log_start_offset = new_offset
        self._recovery_point = new_offset
        self.leader_epoch_cache.clear()
        self._latest_epoch = None
        self.producer_state.truncate_fully_and_start_at(new_offset)
        _files.fsync_dir(self.dir)
        self._write_checkpoints()

    # -- checks ------------------------------------------------------------------------------------
    def verify_indexes(self) -> None:
        """Run :meth:`Segment.verify_indexes` on every segment (raises CorruptIndexError)."""
        with self._lock:
            self._check_open()
            try:
                for seg in self._segments:
                    seg.verify_indexes()
            except _STORAGE_ERRORS as e:
                self._io_error(e, "verifying the indexes of")

    # -- close -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush everything, write the producer snapshot, the checkpoints and finally the
        clean-shutdown marker, then close every file (Kafka's clean shutdown).  An offline log
        (see :attr:`offline`) only has its files closed, as :meth:`close_handlers` does; an I/O
        error while closing raises KafkaStorageError after every file is closed, without the
        marker, so the next open recovers."""
        with self._lock:
            if self._closed:
                return
            offline = self._offline is not None
        if offline:
            self.close_handlers()
            return
        with self._lock:
            if self._closed:
                return
            try:
                if not self.read_only:
                    self.producer_state.update_map_end_offset(self._log_end_offset)
                    self.producer_state.take_snapshot(fsync=False)
                    self._flush_upto(self._log_end_offset, force=True)
                    for seg in self._segments:
                        seg.close()
                    self._write_checkpoints()
                    if (
                        self.topic_partition is not None
                        and self._checkpointed.get("hw") != self.high_watermark
                    ):
                        _update_root_checkpoint(
                            os.path.join(self.root, _files.REPLICATION_OFFSET_CHECKPOINT_FILE),
                            {self.topic_partition: self.high_watermark},
                        )
                    # Everything it vouches for is already fsynced; losing the marker itself
                    # only costs a recovery.
                    _files.write_clean_shutdown_file(
                        os.path.join(self.dir, _files.CLEAN_SHUTDOWN_FILE), fsync=False
                    )
                else:
                    for seg in self._segments:
                        seg.close()
            except _STORAGE_ERRORS as e:
                self._io_error(e, "closing")
            finally:
                self._closed = True
                self._cond.notify_all()
                for seg in self._segments:
                    if not seg.closed:
                        try:
                            seg.close_handlers()
                        except Exception:
                            pass
                self._release_dir_lock()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=5)

    def close_handlers(self) -> None:
        """Close every file *without* flushing, snapshotting, checkpointing or writing the
        clean-shutdown marker (Kafka's ``closeHandlers``, used when a log dir fails).  Bytes
        already handed to the OS stay; the next open recovers from the recovery point, exactly
        as after a crash of this process."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            try:
                for seg in self._segments:
                    try:
                        seg.close_handlers()
                    except OSError:
                        pass
            finally:
                self._release_dir_lock()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=5)

    def delete(self) -> None:
        """Close the log and delete its directory (and its root checkpoint entries)."""
        with self._lock:
            if not self._closed:
                for seg in self._segments:
                    seg.close_handlers()
                self._closed = True
                self._cond.notify_all()
            self._release_dir_lock()
            for entry in _fs.LOCAL.list_dir(self.dir):
                if entry.kind == _fs.FILE:
                    os.unlink(entry.path)
            os.rmdir(self.dir)
            if self.topic_partition is not None and not self.read_only:
                for name in (
                    _files.RECOVERY_POINT_CHECKPOINT_FILE,
                    _files.LOG_START_OFFSET_CHECKPOINT_FILE,
                    _files.REPLICATION_OFFSET_CHECKPOINT_FILE,
                ):
                    path = os.path.join(self.root, name)
                    if os.path.exists(path):
                        _files.update_offset_checkpoint(path, {self.topic_partition: None})

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._segments)} segments"
        return (
            f"Log(dir={self.dir!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self._log_end_offset}, {state})"
        )
