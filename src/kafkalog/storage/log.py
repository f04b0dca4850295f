"""A partition's log: a directory of segments with Kafka's append, read, roll, flush,
retention, truncation and crash recovery.  :class:`Log` is Kafka's ``UnifiedLog``; its parts
follow Kafka's own seams: loading and recovery (:mod:`.loader`, ``LogLoader``), reads, roll,
flush and truncation (:mod:`.local_log`, ``LocalLog``), retention (:mod:`.retention`), the
append checks (:mod:`.validator`, ``LogValidator``), the leader-epoch cache
(:mod:`.epoch_cache`), the topic config (:mod:`.config`, ``LogConfig``); append, close and the
cleaner's entry points (``compact``, ``replace_segments``) are here.  The cleaner
(:mod:`.cleaner`) does not import this module.

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
:mod:`kafkalog.storage.segment`) without fsync.  ``flush.messages`` fsyncs once that many
messages are unflushed, ``flush.ms`` from a background thread once the oldest unflushed
append is that old, :meth:`Log.flush` on demand, and a roll fsyncs the segment it closes
(Kafka flushes it asynchronously).  Everything flushed survives a crash; recovery truncates
the rest at the first torn or invalid batch.

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
import threading
import time
import uuid as _uuid
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Union

from .._format import INT32_MAX, V2_HEADER, TimestampType
from .._speedups import crc as _crc
from ..errors import (
    KafkaStorageError,
    LogClosedError,
    LogLockedError,
    RecordTooLargeError,
    UnsafePathError,
)
from ..records import RecordBatch
from . import checkpoints as _checkpoints
from . import files as _files
from . import fs as _fs
from . import logdir as _logdir
from . import partition_lock as _partition_lock
from . import store_fs as _store_fs
from ._log_common import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    LONG_MAX,
    MAX_TIMESTAMP,
    STORAGE_ERRORS,
    BatchFacts,
    LogAppendInfo,
    Prepared,
    as_buffer,
    check_int_arg,
    fcntl,
    hook,
    now_ms,
    tuple_new,
    update_root_checkpoint,
)
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .file_records import TimestampAndOffset
from .loader import RECOVERY_MODES, STRICT_RECOVERY, CheckpointMemo, LogLoader
from .local_log import LocalLog
from .log_view import LogView
from .retention import LogRetention
from .segment import Segment
from .segments import LogOffsets, LogSegments
from .validator import LogValidator

__all__ = [
    "Log",
    "open_view",
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


# ------------------------------------------------------------------------------------------------
# Log
# ------------------------------------------------------------------------------------------------
class Log(LogLoader, LocalLog, LogRetention):
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
        storage_options: Optional[Mapping[str, Any]] = None,
        recovery: str = STRICT_RECOVERY,
    ) -> "Log":
        """Open (or create) the partition log in ``directory``, recovering it if it was not
        closed cleanly.

        ``directory``: a local path, a ``file://`` URI or, with ``read_only=True``, an
        object-store or HDFS URI (``s3://bucket/root/topic-0``, ``gs://``, ``hdfs://``,
        ``abfs://``: what :func:`kafkalog.storage.store_fs.resolve` supports), configured by
        ``storage_options`` as :func:`kafkalog.arrow.to_arrow` is.  A log in a store answers
        what the same directory opened locally read-only answers; its ``.log`` files are read
        with ranged reads as needed, its indexes as far as their entries go, its checkpoint
        and snapshot files whole, and nothing is written to the store.  A writable open of such
        a URI raises KafkaStorageError (a Log appends, locks and recovers in place).

        ``config``: a :class:`LogConfig` or a mapping of Kafka topic-config keys.
        ``read_only``: never write, create or delete a file; a log that needs recovery is
        validated in memory instead (only a torn tail ends it; reads report other damage,
        see ``recovery``; missing indexes are rebuilt in memory).  ``clock``: milliseconds
        since the epoch (for tests; default ``time.time``).  ``topic_id``: written to
        ``partition.metadata`` when that is missing (a different existing id raises
        ValueError).  ``validate_records``: let :meth:`append` decode every record like
        Kafka's LogValidator even when no setting needs it (by default records are only
        decoded for compacted topics, finite timestamp bounds, codec/format conversion; the
        batch header's max timestamp, covered by the CRC, is trusted otherwise).
        ``checkpoint_interval_ms``: how often a flush also rewrites the recovery-point
        checkpoint (Kafka's ``log.flush.offset.checkpoint.interval.ms``).

        Creating ``directory`` when its name has the ``<topic>-<partition>`` form requires a
        topic name Kafka accepts (:class:`~kafkalog.errors.InvalidTopicError` otherwise);
        existing directories open whatever their names.  Files are never written through a
        symbolic link inside ``directory`` that leads out of it
        (:class:`~kafkalog.errors.UnsafePathError`); ``directory`` itself may be a link.

        ``recovery``: what a writable open does with damage it finds on load (a bad CRC,
        size, magic or offset).  Only a torn tail (bytes after the last whole batch of the last
        segment that no whole batch follows) is cut by default (``"strict"``); damage that
        whole batches follow raises :class:`~kafkalog.errors.CorruptRecordError` naming the
        file and position, and nothing is cut.  ``"broker"`` cuts the log at the first invalid
        batch and deletes the later segments, as Kafka's recovery does, with a warning naming
        what was cut.  A read-only open never cuts anything but a torn tail: its reads report
        the damage (``on_damage``).
        """
        if recovery not in RECOVERY_MODES:
            raise ValueError(f"recovery must be one of {RECOVERY_MODES}, not {recovery!r}")
        self = object.__new__(cls)
        self._recovery = recovery
        store = None
        if read_only and _fs.is_uri(directory) \
                and directory.split("://", 1)[0].lower() != "file":
            store, directory = _store_fs.resolve(directory, dict(storage_options or {}))
        else:
            directory = os.path.abspath(_store_fs.local_directory(directory))
        self._store = store
        self._init(
            directory,
            config if isinstance(config, LogConfig) else LogConfig(config),
            read_only,
            create,
            clock or now_ms,
            topic_id,
            validate_records,
            checkpoint_interval_ms,
        )
        return self

    @classmethod
    def _open_in_store(cls, directory: str, fs: "_fs.FileSystem",
                       config: Union[LogConfig, Mapping[str, Any], None] = None,
                       listing: Optional["_logdir.PartitionListing"] = None,
                       checkpoints: Any = None) -> "Log":
        """Open ``directory`` of the store ``fs`` read-only (``Log.open`` of its URI);
        ``listing``: the directory's listing just taken by the caller (no second one);
        ``checkpoints``: see :func:`open_view`."""
        self = object.__new__(cls)
        self._store = fs
        self._listing = listing
        self._checkpoint_memo = checkpoints
        self._init(directory, config if isinstance(config, LogConfig) else LogConfig(config),
                   True, False, now_ms, None, False, 60000)
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
        self._segments = LogSegments()
        self._offsets = LogOffsets(-1, -1, -1)  # filled by the loader
        self._flusher: Optional[threading.Thread] = None
        self._unflushed_since: Optional[float] = None
        self._last_checkpoint_ms = 0
        self._checkpointed: Dict[str, Any] = {}  # values last written to the root checkpoints
        self._dir_dirty = False
        self._flusher_error: Optional[BaseException] = None
        self._offline = None  # the I/O error (or refused write) that took it offline
        self.ignored_files: List[_logdir.Ignored] = []  # names the storage model does not use
        self._swap_notes: List[_logdir.Ignored] = []  # swap files left uncompleted
        self.root = os.path.dirname(directory) if self._store is None else _fs.parent(directory)
        try:
            parsed = _files.parse_partition_dir(os.path.basename(directory))
            self.topic_partition: Optional[_files.TopicPartition] = parsed.topic_partition
            self._partition_dir_kind = parsed.kind
        except ValueError:
            self.topic_partition = None
            self._partition_dir_kind = ""

        if self._store is not None:
            kind = self._store.kind(directory)
            if kind == _fs.MISSING:
                raise _fs.MissingFileError(
                    f"cannot open log {directory}: nothing is there (check the bucket and the "
                    "prefix)", path=directory, errno=errno.ENOENT, operation="opening a log",
                    kind=kind)
            if kind != _fs.DIRECTORY:
                raise KafkaStorageError(
                    f"cannot open log {directory}: it is a {kind}, not a partition directory",
                    path=directory, operation="opening a log")
        elif not os.path.isdir(directory):
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
        if fcntl is None:  # pragma: no cover
            return
        # the partition's lock, which every writer takes (a commit swapping this directory
        # waits for it): held until the Log is closed; released by _release_dir_lock
        self._partition_lock = _partition_lock.for_log_directory(self.dir)
        fd = os.open(self.dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogLockedError(
                    f"{self.dir} is already open for writing by another Log", path=self.dir
                ) from None
            raise
        self._lock_fd = fd

    def _release_dir_lock(self) -> None:
        partition_lock, self._partition_lock = getattr(self, "_partition_lock", None), None
        try:
            if self._lock_fd >= 0:
                try:
                    os.close(self._lock_fd)  # closing releases the flock
                finally:
                    self._lock_fd = -1
        finally:
            if partition_lock is not None:
                partition_lock.release()

    # -- properties --------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._offsets.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._offsets.log_end_offset

    @property
    def high_watermark(self) -> int:
        """A standalone log is its own only replica: every appended offset is committed."""
        return self._offsets.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest ongoing transaction, else the high watermark
        (what a read_committed consumer may read up to); never below the log start offset."""
        return self.view.last_stable_offset

    def first_unstable_offset(self) -> Optional[int]:
        """First offset of the earliest ongoing (not yet committed/aborted) transaction."""
        return self.producer_state.first_unstable_offset()

    # -- compaction (see kafkalog.storage.cleaner) -------------------------------------------------
    def cleaner_checkpoint(self) -> int:
        """The first dirty offset: the ``cleaner-offset-checkpoint`` entry of this partition
        (kept in memory for a directory that is not named like a partition), or the log start."""
        v = getattr(self, "_cleaner_ckpt", None)
        if v is None:
            v = self._root_checkpoint(_files.CLEANER_OFFSET_CHECKPOINT_FILE)
        if v is None or v < self._offsets.log_start_offset or v > self._offsets.log_end_offset:
            v = self._offsets.log_start_offset
        return v

    def _set_cleaner_checkpoint(self, offset: int) -> None:
        self._cleaner_ckpt = offset
        if self.topic_partition is not None and not self.read_only:
            tp = self.topic_partition
            update_root_checkpoint(
                os.path.join(self.root, _files.CLEANER_OFFSET_CHECKPOINT_FILE),
                {(tp.topic, tp.partition): offset},
            )

    def compact(self, cleaner=None, *, force: bool = False, now: Optional[int] = None):
        """Run Kafka's log cleaner on this log (``cleanup.policy`` must include ``compact``):
        when the log is eligible (dirty ratio above ``min.cleanable.dirty.ratio`` or
        ``max.compaction.lag.ms`` exceeded; always with ``force``), clean rounds until the
        whole cleanable range is clean (several passes when the offset map fills).  Returns
        the merged :class:`kafkalog.storage.cleaner.CleanerStats` (``passes == 0`` when nothing
        ran)."""
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
            except STORAGE_ERRORS as e:
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
                hook("swapped")
                old_ids = {id(s) for s in old_segments}
                keep = [s for s in self._segments if id(s) not in old_ids]
                self._segments.replace_all(keep + new_sorted)
                swapped_in = True
                # Every old file goes (a stale .txnindex under a reused name included); the swap
                # files are complete, so the loader would finish this from any point on.
                for old in sorted(old_segments, key=lambda s: s.base_offset, reverse=True):
                    self._delete_segment_files(old)
                    hook("old-removed")
                for seg in new_sorted:
                    seg.change_file_suffixes(_files.SWAP_FILE_SUFFIX, "")
                    hook("renamed")
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
        return self._offsets.recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._offsets.log_end_offset - self._offsets.recovery_point

    @property
    def segments(self) -> List[Segment]:
        """The segments, oldest first (a copy of the list)."""
        return self._segments.to_list()

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
        return self._offsets.log_end_offset - self._offsets.log_start_offset

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.dir} is closed", path=self.dir)
        if self._offline is not None:
            self._raise_offline()

    def _check_online(self) -> None:
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

    def _io_error(self, e: Union[OSError, UnsafePathError], operation: str) -> NoReturn:
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
        # the append checks (a read-only log appends nothing, and loads its producer state late)
        self._validator = None if self.read_only else LogValidator(
            self._tp_name(), c, self.producer_state, self._validate_records
        )

    def append(
        self,
        records,
        *,
        leader_epoch: Optional[int] = None,
        origin: str = "client",
        transaction_version: int = 1,
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
        Batches with a producer id are checked against the producer state (see
        :mod:`kafkalog.storage.producer_state`): a client's retried duplicate is not written
        again and the original offsets are returned; OutOfOrderSequenceError,
        InvalidProducerEpochError, InvalidTxnStateError and TransactionCoordinatorFencedError
        refuse the rest.  ``transaction_version``: that of a coordinator's marker (2: KIP-890).
        """
        if leader_epoch is not None and (
            type(leader_epoch) is not int or not -(2**31) <= leader_epoch <= INT32_MAX
        ):
            check_int_arg("leader_epoch", leader_epoch, -(2**31), INT32_MAX)
        t = type(records)
        mv = (
            records
            if t is memoryview
            else memoryview(records)
            if t is bytes
            else as_buffer(records)
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
                    ) = V2_HEADER.unpack_from(mv, 0)
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
                        offsets = self._offsets
                        first = offsets.log_end_offset
                        if pid >= 0 and self.producer_state.validation_enabled:
                            dup = self.producer_state.check_data_batch(
                                pid, _pe, bseq, delta, bool(attrs & 0x10), first
                            )
                            if dup is not None:
                                return self._duplicate_append_info(dup)
                        last = first + delta
                        seg = self._segments[-1]
                        if n > self._segment_bytes:
                            self._raise_too_large_for_segment(n)
                        done = seg.append_if_fits(
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
                            seg.append_patched(mv, last, max_ts, last, first, leader_epoch)
                        offsets.log_end_offset = last + 1
                        if leader_epoch != self._latest_epoch and leader_epoch >= 0:
                            self.leader_epoch_cache.assign(leader_epoch, first)
                            self._latest_epoch = self.leader_epoch_cache.latest_epoch
                        if pid >= 0:
                            facts = [
                                BatchFacts(RecordBatch(mv, 0, check_crc=False), first, max_ts)
                            ]
                            self._update_producer_state(facts, seg)
                        self.producer_state.map_end_offset = last + 1
                        if last + 1 - offsets.recovery_point >= self._flush_messages:
                            self._flush_upto(last + 1, skip_active_indexes=True)
                        elif self._flusher is not None and self._unflushed_since is None:
                            self._unflushed_since = time.monotonic()
                            self._cond.notify_all()
                        return tuple_new(
                            LogAppendInfo,
                            (first, last, max_ts, last, -1, offsets.log_start_offset, n, count),
                        )
                # The general path (also reports every error the fast path left to it).
                now = self._clock()
                validator = self._validator
                assert validator is not None  # a writable log has one
                prepared = validator.validate_and_assign_offsets(
                    mv, self._offsets.log_end_offset, leader_epoch, origin, now
                )
                if prepared is None:
                    return LogAppendInfo(-1, -1, -1, -1, -1, self._offsets.log_start_offset, 0, 0)
                dup = validator.check_producer_state(prepared, origin, transaction_version)
                if dup is not None:
                    return self._duplicate_append_info(dup)
                self._append_prepared(prepared, now, leader_epoch)
                return LogAppendInfo(
                    prepared.first_offset,
                    prepared.last_offset,
                    prepared.max_timestamp,
                    prepared.shallow_offset,
                    prepared.log_append_time,
                    self._offsets.log_start_offset,
                    len(prepared.data),
                    prepared.records_count,
                )
            except STORAGE_ERRORS as e:
                self._io_error(e, "appending to")

    def _duplicate_append_info(self, dup) -> LogAppendInfo:
        """What an append of a retried duplicate batch returns: the original offsets."""
        count = dup.last_offset - dup.first_offset + 1
        return LogAppendInfo(
            dup.first_offset, dup.last_offset, dup.timestamp, dup.last_offset, -1,
            self._offsets.log_start_offset, 0, count,
        )

    def remove_expired_producers(self, now: Optional[int] = None) -> List[int]:
        """Forget producers idle for ``producer_state.producer_id_expiration_ms`` without an
        ongoing transaction (Kafka's periodic producer-expiration check); returns their ids."""
        with self._lock:
            return self.producer_state.remove_expired_producers(
                self._clock() if now is None else now
            )

    def _raise_too_large_for_segment(self, size: int) -> None:
        raise RecordTooLargeError(
            f"Message batch size is {size} bytes in append to partition {self._tp_name()} which "
            f"exceeds the maximum configured segment size of {self._segment_bytes}."
        )

    def _append_prepared(self, p: Prepared, now: int, leader_epoch: int) -> None:
        data = p.data
        size = len(data)
        if size > self._segment_bytes:
            self._raise_too_large_for_segment(size)
        seg = self._segments[-1]
        if seg.should_roll(
            self._segment_ms, self._segment_bytes, p.max_timestamp, p.last_offset, size, now
        ):
            seg = self._roll(p.first_offset if p.first_offset >= 0 else p.last_offset - INT32_MAX)
        seg.append_patched(
            data, p.last_offset, p.max_timestamp, p.shallow_offset, p.base_patch, p.epoch_patch
        )
        self._offsets.log_end_offset = p.last_offset + 1
        if leader_epoch >= 0 and leader_epoch != self._latest_epoch and p.magic >= 2:
            self.leader_epoch_cache.assign(leader_epoch, p.first_offset)
            self._latest_epoch = self.leader_epoch_cache.latest_epoch
        if p.facts:
            self._update_producer_state(p.facts, seg)
        self.producer_state.map_end_offset = self._offsets.log_end_offset
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
        if self._offsets.log_end_offset - self._offsets.recovery_point >= self._flush_messages:
            self._flush_upto(self._offsets.log_end_offset, skip_active_indexes=True)
        elif self._flusher is not None and self._unflushed_since is None:
            self._unflushed_since = time.monotonic()
            self._cond.notify_all()

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append batches whose offsets are already assigned (Kafka's ``appendAsFollower``):
        CRCs and sizes are checked, offsets must increase and start at or after the log end
        offset; several batches may be appended at once.  Raises InvalidOffsetError for
        offsets out of order or below the log end."""
        mv = as_buffer(records)
        with self._lock:
            self._check_writable()
            mark = None
            try:
                now = self._clock()
                assert self._validator is not None  # a writable log has one
                found = self._validator.analyze_follower_append(
                    mv, self._offsets.log_end_offset, self._offsets.log_start_offset
                )
                if found is None:
                    return LogAppendInfo(-1, -1, -1, -1, -1, self._offsets.log_start_offset, 0, 0)
                batches, valid, first, first_is_exact, prev_last, max_ts, shallow, count, facts = (
                    found
                )
                data = mv[:valid]
                if len(data) > self._segment_bytes:
                    self._raise_too_large_for_segment(len(data))
                seg = self._segments[-1]
                if seg.should_roll(
                    self._segment_ms, self._segment_bytes, max_ts, prev_last, len(data), now
                ):
                    seg = self._roll(first if first_is_exact else prev_last - INT32_MAX)
                mark = (seg, seg.size)
                seg.append_patched(data, prev_last, max_ts, shallow)
                self._offsets.log_end_offset = prev_last + 1
                for b in batches:
                    if b.magic >= 2 and b.partition_leader_epoch >= 0:
                        if self.leader_epoch_cache.assign(b.partition_leader_epoch, b.base_offset):
                            self._latest_epoch = self.leader_epoch_cache.latest_epoch
                if facts:
                    self._update_producer_state(facts, seg)
                self.producer_state.map_end_offset = self._offsets.log_end_offset
                self._after_append()
                return LogAppendInfo(
                    first, prev_last, max_ts, shallow, -1, self._offsets.log_start_offset, valid,
                    count,
                )
            except STORAGE_ERRORS as e:
                if mark is not None:
                    mark[0].discard_from(mark[1])  # none of a failed call's batches stay
                self._io_error(e, "appending to")

    # -- checks ------------------------------------------------------------------------------------
    def verify_indexes(self) -> None:
        """Run :meth:`Segment.verify_indexes` on every segment (raises CorruptIndexError)."""
        with self._lock:
            self._check_open()
            try:
                for seg in self._segments:
                    seg.verify_indexes()
            except STORAGE_ERRORS as e:
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
                    self.producer_state.update_map_end_offset(self._offsets.log_end_offset)
                    self.producer_state.take_snapshot(fsync=False)
                    self._flush_upto(self._offsets.log_end_offset, force=True)
                    for seg in self._segments:
                        seg.close()
                    self._write_checkpoints()
                    if (
                        self.topic_partition is not None
                        and self._checkpointed.get("hw") != self.high_watermark
                    ):
                        update_root_checkpoint(
                            os.path.join(self.root, _files.REPLICATION_OFFSET_CHECKPOINT_FILE),
                            {self.topic_partition: self.high_watermark},
                        )
                    # Everything it vouches for is already fsynced; losing the marker itself
                    # only costs a recovery.
                    _checkpoints.write_clean_shutdown_file(
                        os.path.join(self.dir, _files.CLEAN_SHUTDOWN_FILE), fsync=False
                    )
                else:
                    for seg in self._segments:
                        seg.close()
            except STORAGE_ERRORS as e:
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
        if self._store is not None:
            raise ValueError(f"log {self.dir} is in a store and opened read-only: not deleted")
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
                        _checkpoints.update_offset_checkpoint(path, {self.topic_partition: None})

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._segments)} segments"
        return (
            f"Log(dir={self.dir!r}, log_start_offset={self._offsets.log_start_offset}, "
            f"log_end_offset={self._offsets.log_end_offset}, {state})"
        )


_DEFAULT_CONFIG: Optional[LogConfig] = None


def _view_config(config: Any) -> LogConfig:
    """``config`` as a LogConfig; the defaults' one is shared (LogConfig is immutable)."""
    global _DEFAULT_CONFIG
    if isinstance(config, LogConfig):
        return config
    if config is None:
        if _DEFAULT_CONFIG is None:
            _DEFAULT_CONFIG = LogConfig()
        return _DEFAULT_CONFIG
    return LogConfig(config)


def open_view(directory: str, fs: Any = None, config: Any = None,
              listing: Optional["_logdir.PartitionListing"] = None,
              defer_opens: bool = False,
              checkpoints: Optional[CheckpointMemo] = None) -> "LogView":
    """The read model (:class:`~kafkalog.storage.log_view.LogView`) of the partition directory
    ``directory`` on ``fs`` (default: the local file system): loaded as a read-only
    :meth:`Log.open` loads it (recovery in memory, nothing written), except that each segment's
    offset and time indexes but the last's are checked when first read rather than on open (as
    Kafka's ``LazyIndex`` opens them).  ``listing``: the directory's
    :func:`~kafkalog.storage.logdir.scan_partition` just taken by the caller (a reader that
    plans from it then sees the same segments, and a store is not listed twice).
    ``defer_opens``: open each segment's ``.log`` at its first read, not on load (for a caller
    that asks the view about offsets and positions and reads little, as a planner does; a
    segment deleted or replaced before its first read is then a KafkaStorageError with errno
    ENOENT, where one opened on load could still be read).  ``checkpoints``: a
    :class:`~kafkalog.storage.loader.CheckpointMemo` shared by the views of one pass over a
    root, so that its checkpoints are read once.  Close the view (or use it as a context
    manager); that closes the log it owns."""
    if fs is None or fs.is_local():
        log = object.__new__(Log)
        log._store = None
        log._lazy_index_checks = True  # each index checked when first read (Kafka's LazyIndex)
        log._listing = listing
        log._defer_opens = defer_opens
        log._checkpoint_memo = checkpoints
        log._init(os.path.abspath(_store_fs.local_directory(directory)), _view_config(config),
                  True, False, now_ms, None, False, 60000)
    else:
        log = Log._open_in_store(directory, fs, config, listing=listing,
                                 checkpoints=checkpoints)
    return log._new_view(close=log.close)
