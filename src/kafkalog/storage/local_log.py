"""Reads and truncation of a :class:`~kafkalog.storage.log.Log`'s segments (Kafka's
``LocalLog`` and ``UnifiedLog.read``/``fetchOffsetByTimestamp``/``truncateTo``).
"""
from __future__ import annotations

import struct
from typing import Any, Iterator, List, Optional

from . import files as _files
from ..errors import KafkaLogError, OffsetOutOfRangeError
from ..records import MemoryRecords
from .segment import Segment, TimestampAndOffset
from ._log_common import (
    _STORAGE_ERRORS,
    LATEST_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    MAX_TIMESTAMP,
    EARLIEST_LOCAL_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    _SCAN_CHUNK,
    _floor_index,
)


class LocalLog:
    """Reads and truncation, a part of :class:`~kafkalog.storage.log.Log` (a mixin)."""

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
                result = None
                while result is None and i < len(self._segments):
                    seg = self._segments[i]
                    if limit_seg is not None and seg.base_offset > limit_seg.base_offset:
                        break
                    max_position = limit_pos if seg is limit_seg else None
                    result = seg.read(offset, max_bytes, max_position, min_one_message)
                    i += 1
                if result is None:
                    return MemoryRecords(b"")
            except _STORAGE_ERRORS as e:
                self._io_error(e, "reading")
        # ``result`` is a copy: check it without holding up appends
        self._check_read(seg, offset, result)
        return result

    def _check_read(self, seg: Segment, offset: int, result: MemoryRecords) -> None:
        """Check the framing and CRC of every complete batch ``read`` returns, so that a
        corrupt batch raises here naming the segment file and the batch's file position (the
        caller only holds a copy, whose positions start at 0); a partial last batch is left
        to the caller, as a fetch may end inside one."""
        try:
            result.validate()  # the compiled twin checks a run of sound batches without the GIL
        except KafkaLogError as e:
            with self._lock:
                found = None if seg.closed else seg.translate_offset(offset)
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
