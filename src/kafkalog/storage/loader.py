"""Loading a partition directory into a :class:`~kafkalog.storage.log.Log` (Kafka's
``LogLoader``): the directory scan, left-over ``.cleaned``/``.swap``/``.deleted`` files, segment
loading, crash recovery from the recovery point, and the producer state rebuilt from
snapshots and the log.
"""
from __future__ import annotations

import errno
import os
import stat as _stat
import threading
import uuid as _uuid
import warnings
from typing import Any, Dict, Optional

from ..errors import (
    CorruptIndexError,
    InvalidOffsetError,
    KafkaLogError,
    KafkaStorageError,
)
from . import checkpoints as _checkpoints
from . import files as _files
from . import fs as _fs
from . import logdir as _logdir
from ._log_parts import LogParts
from .epoch_cache import LeaderEpochCache
from .producer_state import ProducerStateManager
from .segment import Segment
from .store_segment import EmptySegment, StoreSegment

#: ``Log.open(recovery=...)``: after an unclean stop a writable open cuts only a torn tail and
#: refuses to cut whole batches (STRICT); BROKER cuts at the first invalid batch and deletes the
#: later segments, as Kafka's recovery does, warning what it cut.
STRICT_RECOVERY = "strict"
BROKER_RECOVERY = "broker"
RECOVERY_MODES = (STRICT_RECOVERY, BROKER_RECOVERY)

# The root checkpoints last read, by path: every partition of a root reads the same three
# files, and a root of N partitions would otherwise parse them N times (quadratic).  An entry
# is used only while the file's identity, size and times are unchanged; Kafka and kafkalog both
# replace a checkpoint by renaming a new file over it, which changes the inode.
_ROOT_CHECKPOINTS: Dict[Any, Any] = {}
_ROOT_CHECKPOINTS_LOCK = threading.Lock()
_ROOT_CHECKPOINTS_MAX = 64


def read_root_checkpoint(path: str, store: Any = None) -> Dict[Any, int]:
    """``checkpoints.read_offset_checkpoint`` of a root checkpoint, reused while the file is
    unchanged (locally its device, inode, size and times; in a store its size and modification
    time as the store's latest listing says, so each partition of a root listed once costs no
    request).  Raises what that function raises."""
    if store is not None:
        key = store.version_key(path)
        if key is None:
            return _checkpoints.read_offset_checkpoint(path, store)
        return _cached_checkpoint((id(store), path), key,
                                  lambda: _checkpoints.read_offset_checkpoint(path, store))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError:
        st = None
    if st is None or not _stat.S_ISREG(st.st_mode):
        return _checkpoints.read_offset_checkpoint(path)  # raises the error naming what is there
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return _cached_checkpoint(path, key, lambda: _checkpoints.read_offset_checkpoint(path))


def _cached_checkpoint(where: Any, key: tuple, read) -> Dict[Any, int]:
    with _ROOT_CHECKPOINTS_LOCK:
        hit = _ROOT_CHECKPOINTS.get(where)
    if hit is not None and hit[0] == key:
        return hit[1]
    entries = read()
    with _ROOT_CHECKPOINTS_LOCK:
        if len(_ROOT_CHECKPOINTS) >= _ROOT_CHECKPOINTS_MAX:
            _ROOT_CHECKPOINTS.pop(next(iter(_ROOT_CHECKPOINTS)))
        _ROOT_CHECKPOINTS[where] = (key, entries)
    return entries


class CheckpointMemo:
    """The root checkpoints of one pass over many partitions (a planner's plan), each file
    read once for all of them: hand the same memo to each view the pass opens
    (``open_view(checkpoints=...)``) and a new one to the next pass.  Only files read
    successfully are kept (an error is met again by the next partition)."""

    def __init__(self) -> None:
        self._got: Dict[Any, Dict[Any, int]] = {}

    def read(self, path: str, store: Any = None) -> Dict[Any, int]:
        key = (id(store), path)
        got = self._got.get(key)
        if got is None:
            got = self._got[key] = read_root_checkpoint(path, store)
        return got


class LogLoader(LogParts):
    """The loading and recovery part of :class:`~kafkalog.storage.log.Log` (a mixin: its
    methods run on the Log being opened)."""

    _producer_state_pending: Optional[Any] = None  # (end offset, clean) of a deferred rebuild
    _checkpoint_memo: Optional[CheckpointMemo] = None  # set by open_view(checkpoints=...)
    _recovery: str = STRICT_RECOVERY  # set by Log.open(recovery=...)

    def _read_root(self, path: str) -> Dict[Any, int]:
        memo = self._checkpoint_memo
        if memo is not None:
            return memo.read(path, self._store)
        return read_root_checkpoint(path, self._store)

    @property
    def producer_state(self) -> ProducerStateManager:
        """The producer state at the log end (Kafka's ``ProducerStateManager``)."""
        pending = self._producer_state_pending
        if pending is not None:
            with self._lock:
                pending = self._producer_state_pending
                if pending is not None:
                    self._producer_state_pending = None
                    try:
                        self._rebuild_producer_state(pending[0],
                                                     reload_from_clean_shutdown=pending[1])
                    except BaseException:
                        self._producer_state_pending = pending
                        raise
        return self._producer_state

    @producer_state.setter
    def producer_state(self, value: ProducerStateManager) -> None:
        self._producer_state = value

    def _root_checkpoint(self, name: str) -> Optional[int]:
        """This partition's entry in a root checkpoint; None when the file is missing or
        malformed (as a broker rebuilds it).  A file that cannot be read (an I/O error, or a
        FIFO or directory at the name) raises KafkaStorageError: reading on as if it were
        absent would move the log start offset back."""
        if self.topic_partition is None:
            return None
        path = os.path.join(self.root, name)
        try:
            return self._read_root(path).get(self.topic_partition)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise KafkaStorageError.from_os_error(e, f"reading the root checkpoint {name}",
                                                  path=path) from e
        except KafkaLogError:
            return None

    def _log_start_checkpoint(self) -> Optional[int]:
        """This partition's ``log-start-offset-checkpoint`` entry.  A checkpoint that cannot
        be parsed is warned about and ignored: the log starts at its first segment (Kafka's
        ``LogManager.loadLogs``).  One that is there but cannot be read at all (an I/O error,
        a FIFO) raises KafkaStorageError, as before: reading on could move the start back."""
        if self.topic_partition is None:
            return None
        name = _files.LOG_START_OFFSET_CHECKPOINT_FILE
        path = os.path.join(self.root, name)
        try:
            return self._read_root(path).get(self.topic_partition)
        except FileNotFoundError:
            return None
        except OSError as e:  # there but unreachable (an I/O error, a FIFO): refused
            raise KafkaStorageError.from_os_error(e, f"reading the root checkpoint {name}",
                                                  path=path) from e
        except KafkaLogError as e:
            warnings.warn(
                f"cannot read the log start offset checkpoint {path} ({e}); log "
                f"{self._tp_name()} starts at its first segment", RuntimeWarning, stacklevel=4)
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

    def _open_segment(self, base_offset: int, suffix: str = "",
                      listed: Optional["_logdir.SegmentFiles"] = None) -> Segment:
        if self._store is not None:
            return self._open_store_segment(base_offset)
        kw = self._kwargs_memo or self._segment_kwargs()
        return Segment.open(self.dir, base_offset, file_suffix=suffix, listed=listed, **kw)

    # -- a log in an object store or HDFS (read-only) ----------------------------------------
    def _open_store_segment(self, base_offset: int) -> Segment:
        c = self.config
        assert self._store is not None  # called for a log in a store only
        listed = {s.base_offset: s for s in self._store_view.segments}.get(base_offset)
        index_data = self._store_indexes
        return StoreSegment(
            self.dir, base_offset, fs=self._store, listed=listed,
            index_data={p: index_data.pop(p) for p in (listed or ()) if p in index_data},
            index_interval_bytes=c.index_interval_bytes, max_index_size=c.segment_index_bytes,
            clock=self._clock,
        )

    def _prefetch_store_indexes(self) -> None:
        """Read every index file of the listed segments, several at a time: the open checks
        them all (as it does locally), and one request after another would cost a round trip
        per file."""
        from concurrent.futures import ThreadPoolExecutor

        from .index import STORE_INDEX_LIMIT as _STORE_INDEX_LIMIT
        from .index import OffsetIndex, TimeIndex, read_store_index

        store = self._store
        limit = max(self.config.segment_index_bytes, _STORE_INDEX_LIMIT)
        jobs = []
        for s in self._store_view.segments:
            for path, es in ((s.offset_index, OffsetIndex.ENTRY_SIZE),
                             (s.time_index, TimeIndex.ENTRY_SIZE), (s.txn_index, None)):
                if path is not None:
                    jobs.append((path, es))

        def read(job):
            path, es = job
            if es is None:
                return _logdir.read_file(path, store, limit=limit)
            return read_store_index(store, path, es, limit)

        self._store_indexes: Dict[str, Any] = {}
        if not jobs:
            return
        with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
            datas = list(pool.map(read, jobs))
        self._store_indexes = {path: data for (path, _), data in zip(jobs, datas)}

    def _exists(self, path: str) -> bool:
        """Whether a file is at ``path``: the local file system asked, or in a store the
        listing of the partition directory (no request) or, outside it, the store."""
        listing = getattr(self, "_listing", None)
        if self._store is None:
            if listing is not None and self.read_only and os.path.dirname(path) == self.dir:
                return os.path.basename(path) in listing.metadata  # the caller's listing
            return os.path.exists(path)
        if os.path.dirname(path) == self.dir:
            return os.path.basename(path) in self._store_view.metadata
        return self._store.kind(path) == _fs.FILE

    def _load(self, topic_id: Optional[_uuid.UUID]) -> None:
        d = self.dir
        ro = self.read_only
        if self._store is not None:
            self._store_view = self._scan()  # one listing serves the whole open
            self._prefetch_store_indexes()
        marker = os.path.join(d, _files.CLEAN_SHUTDOWN_FILE)
        had_clean = self._exists(marker)
        if ro and not had_clean:
            had_clean = self._exists(os.path.join(self.root, _files.CLEAN_SHUTDOWN_FILE))
        self.had_clean_shutdown = had_clean
        if not ro and os.path.exists(marker):
            os.unlink(marker)
            _files.fsync_dir(d)

        rp_entry = self._root_checkpoint(_files.RECOVERY_POINT_CHECKPOINT_FILE)
        start_entry = self._log_start_checkpoint()
        recovery_point_ckpt = rp_entry or 0
        log_start_ckpt = start_entry or 0
        self._checkpointed = {
            "rp": rp_entry,
            "start": start_entry,
            "hw": self._root_checkpoint(_files.REPLICATION_OFFSET_CHECKPOINT_FILE),
        }

        listing = getattr(self, "_listing", None)
        epoch_path = os.path.join(d, _files.LEADER_EPOCH_CHECKPOINT_FILE)
        self.leader_epoch_cache = LeaderEpochCache(
            epoch_path, read_only=ro, fs=self._store,
            present=(self._exists(epoch_path) if ro and listing is not None else None))
        self.producer_state = ProducerStateManager(d, read_only=ro, clock=self._clock,
                                                   fs=self._store)
        if ro and listing is not None:  # a view loads from its caller's listing: snapshots too
            self.producer_state.use_listed_snapshots([off for off, _ in listing.snapshots])

        if not ro:
            self._remove_temp_files_and_swap()
        self._load_segments(had_clean, recovery_point_ckpt)

        # Recovery (LogLoader.recoverLog).
        if not had_clean:
            self._recover_from(recovery_point_ckpt, log_start_ckpt)
        else:
            self._check_tail_readable(log_start_ckpt)

        # A log whose end is below the checkpointed start lost its files: start over there
        # (Kafka's recoverLog).  Read-only, nothing is deleted or created: the segments are
        # left alone and an empty one without files stands in for the one a writable open
        # creates, so both answer log start = log end = the checkpoint.
        if self._segments:
            leo = self._segments[-1].read_next_offset()
            if leo < log_start_ckpt:
                if ro:  # never an empty answer without a word: say which file makes it empty
                    warnings.warn(
                        f"the log start offset checkpoint puts log {self._tp_name()} at "
                        f"{log_start_ckpt}, past its segments' end {leo}: it reads as empty "
                        f"(a broker deletes its {len(self._segments)} segment(s))",
                        RuntimeWarning, stacklevel=4)
                self._drop_segments_from(0, delete=not ro)
                self.leader_epoch_cache.clear()  # in memory only when read-only
                self.producer_state.truncate_fully_and_start_at(log_start_ckpt)
                if ro:
                    c = self.config
                    self._add_segment(EmptySegment(
                        d, log_start_ckpt, index_interval_bytes=c.index_interval_bytes,
                        max_index_size=c.segment_index_bytes, clock=self._clock))
        if not self._segments:
            if ro:
                raise FileNotFoundError(errno.ENOENT, "no log segments to read", d)
            self._add_segment(self._open_segment(log_start_ckpt))
        self._offsets.log_end_offset = self._segments[-1].read_next_offset()
        self._offsets.log_start_offset = max(log_start_ckpt, self._segments[0].base_offset)
        if had_clean:
            self._offsets.recovery_point = self._offsets.log_end_offset
        else:
            self._offsets.recovery_point = min(recovery_point_ckpt, self._offsets.log_end_offset)
        if not ro:
            self._segments[-1].resize_indexes(self.config.segment_index_bytes)
            if not os.path.exists(self.leader_epoch_cache.path):  # type: ignore[arg-type]
                self.leader_epoch_cache.flush()
        self.leader_epoch_cache.truncate_from_end(self._offsets.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self._offsets.log_start_offset)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch

        if ro:
            # Read-only, the producer state is rebuilt when first asked for (the LSO, a
            # read_committed fetch): most reads never need it, and a root of many partitions
            # would otherwise list and load every partition's snapshots on open.
            self._producer_state_pending = (self._offsets.log_end_offset, had_clean)
        else:
            self._rebuild_producer_state(self._offsets.log_end_offset,
                                         reload_from_clean_shutdown=had_clean)
            self.producer_state.remove_stray_snapshots(self._segments.bases,
                                                       keep=(self._offsets.log_end_offset,))

        self._last_flush_ms = self._clock()
        # topic id
        pm_path = os.path.join(d, _files.PARTITION_METADATA_FILE)
        self.topic_id: Optional[_uuid.UUID] = None
        if self._exists(pm_path):
            try:
                self.topic_id = _checkpoints.read_partition_metadata(pm_path, self._store).topic_id
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
                _checkpoints.write_partition_metadata(pm_path, topic_id)
            self.topic_id = topic_id
        if not ro and (not had_clean or recovery_point_ckpt != self._offsets.recovery_point):
            self._write_checkpoints()

    def _scan(self) -> "_logdir.PartitionListing":
        """The directory as the storage model sees it.  A name of the log's grammar that is a
        FIFO, a device, a socket, a directory or a dangling or looping link is refused (never
        opened, never waited on: a log read without that segment would have a hole);
        other names outside the grammar are kept in ``ignored_files`` and never change offsets."""
        if self._store is not None:
            view = (getattr(self, "_store_view", None) or getattr(self, "_listing", None)
                    or _logdir.scan_partition(self.dir, self._store))
        else:
            view = getattr(self, "_listing", None) or _logdir.scan_partition(self.dir)
        for ig in view.refused():  # not a regular file: a FIFO, a directory, a bad link...
            if (_files.parse_segment_file_name(ig.name) is not None
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
        self._segments.add(seg)

    _lazy_index_checks = False  # set by open_view: see Segment.defer_index_checks
    _defer_opens = False  # set by open_view(defer_opens=True): see Segment(listed=...)
    _kwargs_memo: Optional[Dict[str, Any]] = None  # the segments' options during a load

    def _load_segments(self, had_clean: bool, recovery_point: int) -> None:
        listing = self._scan()
        bases = listing.base_offsets
        lazy = self._lazy_index_checks and self.read_only and self._store is None
        # a view asked to defer opens opens each .log at its first read (from the listing)
        listed = listing.segments if lazy and self._defer_opens else [None] * len(bases)
        self._kwargs_memo = self._segment_kwargs()
        try:
            self._open_listed(bases, listed, lazy)
        finally:
            self._kwargs_memo = None

    def _open_listed(self, bases, listed, lazy: bool) -> None:
        for k, base in enumerate(bases):
            seg = self._open_segment(base, listed=listed[k])
            self._add_segment(seg)
            needs_recovery = False
            try:
                if not seg.offset_index_existed:
                    raise FileNotFoundError(seg.offset_index.path)
                seg.sanity_check(seg.time_index_existed)
                # Kafka's cheap offset/time index checks (not run by brokers at startup any
                # more); a failing index is rebuilt rather than trusted.  A read view checks
                # each index when it is first used, except the last segment's (its log end).
                if lazy and k + 1 < len(bases):
                    seg.defer_index_checks()
                else:
                    seg.offset_index.sanity_check()
                    seg.time_index.sanity_check()
            except (FileNotFoundError, CorruptIndexError):
                needs_recovery = True
            if needs_recovery:
                self._recover_segment(seg)

    def _recover_segment(self, seg: Segment) -> int:
        """Recover one segment with the producer state rebuilt to its base offset.  Only a
        torn tail of the last segment may end the log: a read-only open reads on past other
        damage (its reads report it), a writable one refuses to cut whole batches unless a
        broker's recovery was asked for (``recovery="broker"``), and then warns what it cut."""
        self._rebuild_producer_state(seg.base_offset)
        broker = self._recovery == BROKER_RECOVERY
        size = seg.size
        truncated = seg.recover(self.producer_state, self.leader_epoch_cache,
                                past_damage=self.read_only, is_last=seg is self._segments[-1],
                                may_cut_damage=broker)
        if truncated and not self.read_only and (seg.recovery_damage
                                                 or seg is not self._segments[-1]):
            at = size - truncated
            warnings.warn(
                f"recovery='broker': cut {seg.log_path} at position {at} ({truncated} bytes "
                "after it, whole batches among them, are gone) as Kafka's recovery does",
                stacklevel=4)
        self.producer_state.update_map_end_offset(
            max(self.producer_state.map_end_offset, seg.read_next_offset())
        )
        self.producer_state.take_snapshot(fsync=False)
        return truncated

    def _recover_from(self, recovery_point: int, log_start: int) -> None:
        """Recover every segment from the one holding the recovery point; where one is cut
        (a torn tail, or under a broker's recovery any damage), drop all later segments (their
        data would follow a gap)."""
        start = max(self._segments.floor_index(recovery_point), 0)
        i = start
        while i < len(self._segments):
            seg = self._segments[i]
            try:
                truncated = self._recover_segment(seg)
            except InvalidOffsetError:
                # only under recovery="broker" (else it is damage, refused or read around).
                # Kafka: "Found invalid offset during recovery. Deleting the corrupt segment
                # and creating an empty one with starting offset <base>".
                truncated = seg.size
                warnings.warn(
                    f"recovery='broker': offsets go backwards in {seg.log_path}; its "
                    f"{truncated} bytes are gone, as Kafka's recovery deletes such a segment",
                    stacklevel=3)
                seg.offset_index.reset()
                seg.time_index.reset()
                seg.txn_index.reset()
                seg.truncate_log_bytes(0)
            if truncated > 0:
                later = len(self._segments) - i - 1
                if later and not self.read_only:
                    warnings.warn(
                        f"recovery='broker': {later} segment(s) after {seg.log_path} deleted, "
                        "as Kafka's recovery does after cutting a segment", stacklevel=3)
                self._drop_segments_from(i + 1, delete=not self.read_only)
                break
            i += 1

    def _check_tail_readable(self, log_start: int) -> None:
        """After a clean shutdown the last segment is trusted as far as its headers frame;
        where they stop framing before its end, the bytes after decide (Segment.walk): a torn
        tail is cut (in memory when read-only), damage that whole batches follow is left for
        the reads to report (read-only) or recovered as above (writable: refused unless a
        broker's recovery was asked for)."""
        if not self._segments:
            return
        seg = self._segments[-1]
        walk = seg.tail_walk()
        if self.read_only:
            if walk.tail is not None:
                seg.cut_torn_tail(walk.tail)
        elif walk.damage or walk.tail is not None:
            self._recover_segment(seg)

    def _drop_segments_from(self, index: int, delete: bool) -> None:
        doomed = self._segments.remove_from(index)
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
            # the segment is leaving the log: close its files, keep the error
            seg.discard_buffered()
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
        i = max(self._segments.floor_index(start), 0)
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
        log_start = self._offsets.log_start_offset
        if log_start < 0:  # loading: the log start is not known yet
            log_start = self._segments.bases[0] if self._segments else 0
        if reload_from_clean_shutdown and not ps.snapshot_offsets():
            ps.update_map_end_offset(last_offset)
            ps.take_snapshot()
            return
        ps.truncate_and_reload(min(log_start, last_offset), last_offset)
        if ps.map_end_offset < last_offset:
            self._replay_producer_state(ps.map_end_offset, last_offset)
        ps.update_map_end_offset(last_offset)
