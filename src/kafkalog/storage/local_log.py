"""Reads and truncation of a :class:`~kafkalog.storage.log.Log`'s segments (Kafka's
``LocalLog`` and ``UnifiedLog.read``/``fetchOffsetByTimestamp``/``truncateTo``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional

from . import files as _files
from ..records import MemoryRecords
from .log_view import LogView
from .segment import TimestampAndOffset
from ._log_common import (
    STORAGE_ERRORS,
)


class LocalLog:
    """Reads and truncation, a part of :class:`~kafkalog.storage.log.Log` (a mixin)."""

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
                self._offsets.recovery_point = min(self._offsets.recovery_point, self._offsets.log_end_offset)
                self._offsets.log_start_offset = min(self._offsets.log_start_offset, self._offsets.log_end_offset)
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
