"""Reads, roll, flush and truncation of a :class:`~kafkalog.storage.log.Log`'s segments
(Kafka's ``LocalLog`` and ``UnifiedLog.read``/``fetchOffsetByTimestamp``/``roll``/``flush``/
``truncateTo``), and the partition's entries in the root checkpoints.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator, List, Optional

from ..errors import KafkaLogError, KafkaStorageError
from ..records import MemoryRecords
from . import files as _files
from ._log_common import (
    STORAGE_ERRORS,
    update_root_checkpoint,
)
from ._log_parts import LogParts
from .file_records import TimestampAndOffset
from .log_view import LogView
from .segment import Segment


class LocalLog(LogParts):
    """Reads, roll, flush and truncation, a part of :class:`~kafkalog.storage.log.Log` (a
    mixin)."""

    # Reads go through the partition's read model (:class:`~.log_view.LogView`).
    @property
    def view(self) -> LogView:
        """This log's :class:`~kafkalog.storage.log_view.LogView` (over its live segments)."""
        v = self.__dict__.get("_view")
        if v is None:
            v = self.__dict__["_view"] = self._new_view()
        return v

    def _new_view(self, close: Optional[Callable[[], None]] = None) -> LogView:
        """A view over this log's segments and offsets, given explicitly what it reads
        (``close``: what closing the view runs, for a view that owns this log)."""
        return LogView(
            self._segments, self._offsets, self._lock,
            directory=self.dir,
            topic_partition=self.topic_partition,
            tp_name=self._tp_name(),
            leader_epoch_cache=self.leader_epoch_cache,
            first_unstable_offset=self.first_unstable_offset,
            check_open=self._check_open,
            check_online=self._check_online,
            io_error=self._io_error,
            close=close,
        )

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
        return self.view.read(offset, max_bytes, min_one_message, max_offset, isolation)

    def iter_batches(self, start_offset: Optional[int] = None, *, on_damage: str = "raise",
                     gaps: Optional[list] = None) -> Iterator[Any]:
        """Every batch from the one holding ``start_offset`` (default: the log start) to the
        end, as RecordBatch / LegacyRecordBatch objects over copies of the bytes (the log may
        be appended to meanwhile; batches appended after a segment was passed are included
        only for later segments).  A batch inside the log that cannot be framed raises
        CorruptRecordError naming the file, position and offset; ``on_damage="skip"`` appends
        a :class:`~kafkalog.storage.log_view.DamageGap` to ``gaps`` and goes on at the next
        offset-index entry past the damage (else the next segment) instead."""
        return self.view.iter_batches(start_offset, None, on_damage, gaps)

    def iter_records(
        self, start_offset: Optional[int] = None, isolation: str = "read_uncommitted", *,
        on_damage: str = "raise", gaps: Optional[list] = None,
    ) -> Iterator[Any]:
        """Every data record (control batches skipped) with offset >= ``start_offset``.
        ``isolation="read_committed"``: what a read_committed consumer sees -- records below
        the last stable offset (taken when the iteration starts), without the batches of
        aborted transactions (found with the transaction indexes, as Kafka's fetcher does).
        Damage as :meth:`iter_batches`."""
        return self.view.iter_records(start_offset, isolation, on_damage, gaps)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> List[Any]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)`` from the
        transaction indexes (what a read_committed fetch returns)."""
        return self.view.collect_aborted_transactions(start_offset, upper_bound_offset)

    def offset_for_timestamp(self, timestamp: int) -> Optional[TimestampAndOffset]:
        """Kafka's ``fetchOffsetByTimestamp`` (ListOffsets): the first record with a timestamp
        >= ``timestamp`` and offset >= the log start offset, or None.  Special targets: -1
        latest (the log end offset), -2 earliest and -4 earliest local (the log start offset),
        -3 the first record carrying the max timestamp, -5 latest tiered (none: offset -1).

        As Kafka, only the first segment whose largest timestamp is >= the target is searched
        (a segment without timestamps, v0, counts its file's mtime as its largest): None when
        that segment's matching records all lie below the log start offset, or it has none.
        Segments wholly below the log start offset are passed over (Kafka deletes them soon
        after the log start moves past them)."""
        return self.view.offset_for_timestamp(timestamp)

    # -- roll --------------------------------------------------------------------------------------
    def roll(self) -> Segment:
        """Start a new active segment at the log end offset (no-op when the active segment is
        empty); the old one gets its final time-index entry, is trimmed and flushed."""
        with self._lock:
            self._check_writable()
            try:
                return self._roll(None)
            except STORAGE_ERRORS as e:
                self._io_error(e, "rolling")

    def _roll(self, expected_next_offset: Optional[int]) -> Segment:
        new_offset = max(expected_next_offset or 0, self._offsets.log_end_offset)
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
                self._flush_upto(self._offsets.log_end_offset, force=True)
                self._write_checkpoints()
            except STORAGE_ERRORS as e:
                self._io_error(e, "flushing")

    def _flush_upto(
        self, offset: int, force: bool = False, skip_active_indexes: bool = False
    ) -> None:
        """fsync the segments holding unflushed offsets below ``offset`` and move the recovery
        point there.  ``skip_active_indexes``: do not msync the active segment's indexes - an
        unclean open always rebuilds them (the recovery point lies in that segment), so the
        automatic flushes (``flush.messages``/``flush.ms``) only need its data on disk."""
        if offset > self._offsets.recovery_point or force:
            start = max(self._segments.floor_index(self._offsets.recovery_point), 0)
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
            if offset > self._offsets.recovery_point:
                self._offsets.recovery_point = offset
            self._last_flush_ms = self._clock()
        if self._offsets.recovery_point >= self._offsets.log_end_offset:
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
                    if self._offsets.log_end_offset > self._offsets.recovery_point:
                        self._flush_upto(self._offsets.log_end_offset, skip_active_indexes=True)
                except STORAGE_ERRORS as e:  # the log goes offline: the next call raises
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
        if written.get("rp") != self._offsets.recovery_point:
            # A recovery point that moves forward need not be durable (losing it only means
            # recovering more); one that moves back (truncation) must be, before data follows.
            lowered = written.get("rp") is not None and self._offsets.recovery_point < written["rp"]
            update_root_checkpoint(
                os.path.join(self.root, _files.RECOVERY_POINT_CHECKPOINT_FILE),
                {tp: self._offsets.recovery_point},
                fsync=lowered,
            )
            written["rp"] = self._offsets.recovery_point
        log_start = self._offsets.log_start_offset
        first_base = self._segments[0].base_offset if self._segments else log_start
        start = log_start if log_start > first_base else None
        if written.get("start", -1) != start:
            path = os.path.join(self.root, _files.LOG_START_OFFSET_CHECKPOINT_FILE)
            if start is not None or os.path.exists(path):
                update_root_checkpoint(path, {tp: start})
            written["start"] = start

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
                if target_offset >= self._offsets.log_end_offset:
                    return False
                if self._segments[0].base_offset > target_offset:
                    self._truncate_fully_and_start_at(target_offset)
                    return True
                # Lower the durable recovery point first, so a crash mid-way recovers enough.
                if self._offsets.recovery_point > target_offset:
                    self._offsets.recovery_point = target_offset
                    self._write_checkpoints()
                doomed = self._segments.remove_from(self._segments.floor_index(target_offset) + 1)
                # Newest first: a crash part-way leaves a contiguous prefix of segments.
                for seg in reversed(doomed):
                    self._delete_segment_files(seg)
                active = self._segments[-1]
                active.truncate_to(target_offset)
                self._offsets.log_end_offset = active.read_next_offset()
                self._offsets.recovery_point = min(self._offsets.recovery_point,
                                                   self._offsets.log_end_offset)
                self._offsets.log_start_offset = min(self._offsets.log_start_offset,
                                                     self._offsets.log_end_offset)
                self.leader_epoch_cache.truncate_from_end(self._offsets.log_end_offset)
                self._latest_epoch = self.leader_epoch_cache.latest_epoch
                self._rebuild_producer_state(self._offsets.log_end_offset)
                active.flush()
                _files.fsync_dir(self.dir)
                self._write_checkpoints()
                return True
            except STORAGE_ERRORS as e:
                self._io_error(e, "truncating")

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        if new_offset < 0:
            raise ValueError(f"offset must be non-negative, not {new_offset}")
        with self._lock:
            self._check_writable()
            try:
                self._truncate_fully_and_start_at(new_offset)
            except STORAGE_ERRORS as e:
                self._io_error(e, "truncating")

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        self._offsets.recovery_point = min(self._offsets.recovery_point, new_offset)
        self._write_checkpoints()
        doomed = self._segments.clear()
        for seg in reversed(doomed):
            self._delete_segment_files(seg)
        self._add_segment(self._open_segment(new_offset))
        self._offsets.log_end_offset = new_offset
        self._offsets.log_start_offset = new_offset
        self._offsets.recovery_point = new_offset
        self.leader_epoch_cache.clear()
        self._latest_epoch = None
        self.producer_state.truncate_fully_and_start_at(new_offset)
        _files.fsync_dir(self.dir)
        self._write_checkpoints()
