"""Retention of a :class:`~kafkalog.storage.log.Log`: segments deleted by ``retention.ms``,
``retention.bytes`` and the log start offset (Kafka's ``UnifiedLog.deleteOldSegments``).
"""
from __future__ import annotations

from typing import List

from ..errors import InvalidOffsetError, OffsetOutOfRangeError
from . import files as _files
from ._log_common import (
    LONG_MAX,
    STORAGE_ERRORS,
    check_int_arg,
)
from ._log_parts import LogParts
from .segment import Segment


class LogRetention(LogParts):
    """Retention and log-start-offset moves, a part of :class:`~kafkalog.storage.log.Log`
    (a mixin)."""

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
            except STORAGE_ERRORS as e:
                self._io_error(e, "deleting old segments of")

    def _deletable_segments(self, predicate) -> List[Segment]:
        hw = self.high_watermark
        out = []
        segs = self._segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._offsets.log_end_offset
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
        self._segments.replace_all(keep)
        # Oldest first: a crash part-way leaves a contiguous suffix of segments.
        for seg in deletable:
            self._delete_segment_files(seg)
            self.producer_state.delete_snapshot(seg.base_offset)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        _files.fsync_dir(self.dir)
        self._write_checkpoints()
        return count

    def _delete_log_start_offset_breached(self) -> int:
        start = self._offsets.log_start_offset
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
        if new_start <= self._offsets.log_start_offset:
            return False
        self._offsets.log_start_offset = new_start
        if self._offsets.recovery_point < new_start:
            self._offsets.recovery_point = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch
        return True

    def increment_log_start_offset(self, new_start: int) -> bool:
        """Move the log start offset forward (Kafka's DeleteRecords); the segments wholly below
        it go at the next :meth:`delete_retention`.  Raises OffsetOutOfRangeError beyond the
        high watermark.  Returns whether it moved."""
        if type(new_start) is not int:
            check_int_arg("new_start", new_start, 0, LONG_MAX)
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
            except STORAGE_ERRORS as e:
                self._io_error(e, "moving the log start offset of")
