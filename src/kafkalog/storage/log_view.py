"""The read model of a partition: one place for Kafka's read semantics (Kafka's ``LogSegments``
and the read half of ``UnifiedLog``/``LocalLog``).

:class:`LogView` answers, for the segments of one partition, whatever reader asks:

* the log start offset (the ``log-start-offset-checkpoint`` entry clamped to the first segment,
  as Kafka's ``LogLoader`` does; an unreadable checkpoint is warned about and the log starts at
  the first segment, as ``LogManager.loadLogs`` does), the log end offset, the high watermark
  as files can know it, and the last stable offset (the first offset of the earliest open
  transaction, never below the log start offset: Kafka's ``maybeIncrementFirstUnstableOffset``
  clamps it);
* aborted transactions, from the transaction indexes only (Kafka's
  ``collectAbortedTransactions``); a segment without a ``.txnindex`` has none, unless the log
  was not shut down cleanly and the segment lies after the recovery point: recovery then
  rebuilds its index (in memory for a read-only open), as Kafka's ``LogLoader`` does;
* the offset for a timestamp (``ListOffsets``), the byte position of an offset (offset index,
  then a walk over batch headers);
* the batches or the raw byte ranges of an offset range, under one damage policy (the rule
  in docs/architecture.md): an entry inside the log that cannot be framed (a size field past
  the end of its segment, below the minimum, an unknown magic), whose offsets are out of
  place, or (batches) whose CRC fails raises :class:`~kafkalog.errors.CorruptRecordError`
  naming the file, the position and the offset; a caller that asked to skip damage gets a
  :class:`DamageGap` reported instead and reading goes on exactly after the damaged entry
  where its size field still frames it, else at the first whole valid entry continuing the
  offsets (:func:`~kafkalog.storage.segment.resume_point`), else at the next segment: the
  Spark source under ``failOnDataLoss=false`` goes on at the same places.  Reading never
  stops silently before the log end offset: the loader cut the one thing that may end a log
  quietly, a torn tail of its last segment.  Bytes are read with ``pread`` (never a mapping),
  so a file truncated under a reader cannot kill the process: a segment that shrank while it
  was read raises :class:`~kafkalog.errors.KafkaStorageError` with ``errno`` EAGAIN (read
  again).

A :class:`~kafkalog.storage.log.Log` reads through its own view (``log.view``, over its live
segments, unflushed appends included); :func:`kafkalog.storage.log.open_view` gives the view of
a directory on any :class:`~kafkalog.storage.fs.FileSystem` (local or an object store) without
writing anything.  The log end of a directory that was not shut down cleanly is found in
memory by recovery, which reads past damage that whole batches follow (reads report it) and
cuts only a torn tail of the last segment: unlike Kafka's recovery, never the later segments.
"""
from __future__ import annotations

import errno as _errno
import os
from typing import Any, Callable, Iterator, List, NamedTuple, NoReturn, Optional, Tuple, Union

from .. import _speedups
from .._format import ENTRY_HEADER, V2_HEADER_TO_MAX_TIMESTAMP
from ..errors import (
    CorruptRecordError,
    KafkaLogError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnsafePathError,
)
from ..records import MemoryRecords
from ._log_common import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    SCAN_CHUNK,
    STORAGE_ERRORS,
    floor_index,
)
from .epoch_cache import LeaderEpochCache
from .file_records import TimestampAndOffset
from .framing import framing_problem, gap_is_damage, resume_point
from .readahead import BlockRead, ReadBlocks
from .segment import Segment
from .segments import LogOffsets, LogSegments

__all__ = ["LogView", "DamageGap", "RAISE", "SKIP"]

#: damage policies (``on_damage``)
RAISE = "raise"
SKIP = "skip"

_ENTRY = ENTRY_HEADER
_V2_HEAD = V2_HEADER_TO_MAX_TIMESTAMP  # [6]: the last offset delta
_LOG_OVERHEAD = 12
_MIN_ENTRY = 14 + _LOG_OVERHEAD  # Kafka's minimum record overhead (v0) plus the log overhead
_V2_MIN_ENTRY = 61
_MAX_SIZE = 2**31 - 1


class DamageGap(NamedTuple):
    """Offsets a read skipped (``on_damage="skip"``): the batch at ``position`` of ``path``
    (``offset`` from its header) could not be read for ``reason``; offsets from ``offset`` up
    to ``next_offset`` (that of the batch at the next offset-index entry of the segment, else
    the next segment's base offset, or the log end offset) were skipped."""

    path: str
    position: int
    offset: int
    next_offset: int
    reason: str


def _check_on_damage(on_damage: str) -> None:
    if on_damage not in (RAISE, SKIP):
        raise ValueError(f"on_damage must be {RAISE!r} or {SKIP!r}, not {on_damage!r}")


class LogView:
    """The read-only view of one partition's segments (see the module doc).  Thread-safe:
    every lookup runs under the owning log's lock; batches are returned as copies."""

    def __init__(
        self,
        segments: LogSegments,
        offsets: LogOffsets,
        lock: Any,
        *,
        directory: str,
        topic_partition: Any,
        tp_name: str,
        leader_epoch_cache: LeaderEpochCache,
        first_unstable_offset: Callable[[], Optional[int]],
        check_open: Callable[[], None],
        check_online: Callable[[], None],
        io_error: Callable[[Union[OSError, UnsafePathError], str], NoReturn],
        close: Optional[Callable[[], None]] = None,
    ) -> None:
        """A view over ``segments`` and ``offsets`` (changed in place by their owner, under
        ``lock``, which every lookup here takes too).  From the owner: its directory,
        ``topic_partition`` and ``tp_name`` (the name errors give the partition), its
        leader-epoch cache, ``first_unstable_offset()`` (from the producer state, the first
        offset of the earliest open transaction or None), ``check_open()`` (raises when the
        owner is closed or offline), ``check_online()`` (raises when it is offline),
        ``io_error(e, operation)`` (raises the KafkaStorageError for an OSError and takes the
        owner offline) and ``close`` (what :meth:`close` runs: given when the view owns its
        log, as :func:`~kafkalog.storage.log.open_view` makes it)."""
        self._segments = segments
        # the two lists themselves (changed in place, never replaced): the hot paths index
        # them without a call
        self._segs = segments.items
        self._bases = segments.bases
        self._offsets = offsets
        self._lock = lock
        self._directory = directory
        self._topic_partition = topic_partition
        self._tp_name = tp_name
        self._epoch_cache = leader_epoch_cache
        self._first_unstable_offset = first_unstable_offset
        self._check_open = check_open
        self._check_online = check_online
        self._io_error = io_error
        self._close = close

    def close(self) -> None:
        if self._close is not None:
            self._close()

    def __enter__(self) -> "LogView":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the offsets -----------------------------------------------------------------------------
    @property
    def directory(self) -> str:
        return self._directory

    @property
    def topic_partition(self):
        return self._topic_partition

    @property
    def log_start_offset(self) -> int:
        return self._offsets.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._offsets.log_end_offset

    @property
    def high_watermark(self) -> int:
        """What files can know of it: every offset below the log end offset (a standalone log
        is its own only replica)."""
        return self._offsets.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the high watermark; never
        below the log start offset (Kafka clamps the first unstable offset to it)."""
        with self._lock:
            hw = self._offsets.log_end_offset
            fu = self._first_unstable_offset()
            lso = hw if fu is None else min(fu, hw)
            return max(lso, self._offsets.log_start_offset)

    def segment_paths(self) -> List[Tuple[int, str]]:
        """``(base offset, .log path)`` of every segment, in offset order."""
        with self._lock:
            return [(s.base_offset, s.log_path) for s in self._segs]

    # -- positions -------------------------------------------------------------------------------
    def position_of(self, offset: int) -> Optional[Tuple[str, int]]:
        """``(.log path, byte position)`` of the batch holding ``offset`` (or the first batch
        after it), found with the offset index and a walk over batch headers; None past the
        last batch."""
        with self._lock:
            self._check_open()
            segs = self._segs
            i = max(floor_index(self._bases, offset), 0)
            try:
                while i < len(segs):
                    found = segs[i].translate_offset(offset)
                    if found is not None:
                        return segs[i].log_path, found.position
                    i += 1
            except STORAGE_ERRORS as e:
                self._io_error(e, "reading")
        return None

    # -- planning: where a range of one segment starts, ends and may be cut -----------------------
    def segments(self) -> List[Tuple[int, str, int]]:
        """``(base offset, .log path, bytes the log holds in it)`` of every segment, in offset
        order: the sizes are those recovery left (a torn tail is not counted)."""
        with self._lock:
            return [(s.base_offset, s.log_path, s.size) for s in self._segs]

    def _segment(self, base_offset: int) -> Segment:
        """The segment at ``base_offset``; a KafkaStorageError with errno ENOENT naming its
        ``.log`` when the view has none there (deleted or replaced since the caller listed it:
        a planner plans again)."""
        self._check_open()
        i = floor_index(self._bases, base_offset)
        if i < 0 or self._bases[i] != base_offset:
            path = os.path.join(self._directory, "%020d.log" % base_offset)
            raise KafkaStorageError(
                f"no segment with base offset {base_offset} in {self._directory} (deleted or "
                "replaced since it was listed?)", path=path, errno=_errno.ENOENT,
                operation="reading")
        return self._segs[i]

    def position_in(self, base_offset: int, offset: int) -> Optional[int]:
        """In the segment at ``base_offset``, the position of the first entry holding an offset
        ``>= offset`` (Kafka's ``translateOffset``: index lookup, then a header walk); None
        when the segment has none (or its headers cannot be walked that far)."""
        with self._lock:
            seg = self._segment(base_offset)
            try:
                found = seg.translate_offset(offset)
            except CorruptRecordError:
                return None
            except STORAGE_ERRORS as e:
                self._io_error(e, "reading")
        return None if found is None else found.position

    def end_position_of(self, base_offset: int, end: int) -> Optional[int]:
        """In the segment at ``base_offset``, the position of the first entry whose offsets are
        all ``>= end`` (the entry after the one holding ``end - 1``, or the end of that entry
        when it is the segment's last as the log holds it: a torn or invalid tail that recovery
        would cut is not read): where a range ending before ``end`` stops.  None when no entry
        of the segment holds ``end - 1`` (the range needs every entry), or its headers cannot
        be walked that far (the reader reports the damage)."""
        with self._lock:
            seg = self._segment(base_offset)
            try:
                start = seg.offset_index.lookup(end - 1).position
                prev_last = after = None
                for h in seg.iter_headers(start):
                    if h.magic == 2 and h.base_offset >= end:
                        return h.position
                    if prev_last is not None and prev_last >= end - 1:
                        return h.position
                    prev_last, after = h.last_offset, h.position + h.size
                if prev_last is not None and prev_last >= end - 1:
                    return after
            except CorruptRecordError:
                return None
            except STORAGE_ERRORS as e:
                self._io_error(e, "reading")
        return None

    def split_positions(self, base_offset: int, start: int, stop: int, target: int) -> List[int]:
        """Positions strictly inside ``(start, stop)`` of the segment at ``base_offset`` where a
        read may be cut, about ``target`` bytes apart: offset-index entries (each starts an
        entry), or with no entry in the range and more than ``target`` bytes, the entries'
        own positions from a header walk.  None of the pieces is under ``target // 4``."""
        with self._lock:
            seg = self._segment(base_offset)
            try:
                positions = [e.position for e in seg.offset_index if start < e.position < stop]
                if not positions and stop - start > target:
                    try:
                        positions = [h.position for h in seg.iter_headers(start, stop)
                                     if h.position > start]
                    except CorruptRecordError:
                        pass  # cut where it was walkable; the reader reports the damage
            except STORAGE_ERRORS as e:
                self._io_error(e, "reading")
        cuts: List[int] = []
        last = start
        for p in positions:
            if p - last >= target and stop - p >= target // 4:
                cuts.append(p)
                last = p
        return cuts

    def max_timestamp_of(self, base_offset: int) -> int:
        """The largest record timestamp (ms) in the segment at ``base_offset``, -1 when none has
        one: a closed segment's last time-index entry (its index is trimmed to its entries),
        else that entry and a header walk over what follows it."""
        with self._lock:
            seg = self._segment(base_offset)
            try:
                ti = seg.time_index
                n = ti.entries
                best, start = -1, 0
                if n:
                    last = ti.last_entry
                    if not ti.in_memory and ti.length == n * ti.ENTRY_SIZE:
                        return last.timestamp
                    best = last.timestamp
                    start = seg.offset_index.lookup(last.offset).position
                try:
                    for h in seg.iter_headers(start):
                        if h.max_timestamp > best:
                            best = h.max_timestamp
                except CorruptRecordError:
                    pass  # what could be walked; the reader reports the damage
                return best
            except STORAGE_ERRORS as e:
                self._io_error(e, "reading")
        return -1  # pragma: no cover - _io_error raises

    # -- fetch -----------------------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int = 1048576,
        min_one_message: bool = True,
        max_offset: Optional[int] = None,
        isolation: str = "read_uncommitted",
    ) -> MemoryRecords:
        """See :meth:`kafkalog.storage.log.Log.read`."""
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be non-negative, not {max_bytes}")
        with self._lock:
            self._check_open()
            try:
                leo = self._offsets.log_end_offset
                start = self._offsets.log_start_offset
                if offset < start or offset > leo:
                    if offset > leo:
                        msg = (
                            f"Received request for offset {offset} for partition "
                            f"{self._tp_name}, but we "
                            f"only have log segments upto {leo}."
                        )
                    else:
                        msg = (
                            f"Received request for offset {offset} for partition "
                            f"{self._tp_name}, but we "
                            "only have log segments starting from offset: "
                            f"{start}."
                        )
                    raise OffsetOutOfRangeError(msg, offset=offset)
                i = floor_index(self._bases, offset)
                if i < 0:
                    raise OffsetOutOfRangeError(
                        f"Received request for offset {offset} for partition "
                        f"{self._tp_name}, but we only "
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
                    j = floor_index(self._bases, limit)
                    limit_seg = self._segs[j]
                    found = limit_seg.translate_offset(limit)
                    limit_pos = found.position if found is not None else limit_seg.size
                result = None
                while result is None and i < len(self._segs):
                    seg = self._segs[i]
                    if limit_seg is not None and seg.base_offset > limit_seg.base_offset:
                        break
                    max_position = limit_pos if seg is limit_seg else None
                    result = seg.read(offset, max_bytes, max_position, min_one_message)
                    i += 1
                if result is None:
                    return MemoryRecords(b"")
            except STORAGE_ERRORS as e:
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

    # -- scans -----------------------------------------------------------------------------------
    def _damage(self, seg: Segment, pos: int, head: bytes, why: str, on_damage: str,
                gaps: Optional[list], next_offset: int, seen: int = -1) -> None:
        """Apply the damage policy to the unreadable entry at ``pos`` of ``seg`` (``seen``:
        the offset after the last whole entry read before it)."""
        offset = int.from_bytes(head[:8], "big", signed=True) if len(head) >= 8 else None
        if on_damage == SKIP:
            if gaps is not None:
                # the damaged entry's offset, unless it lies past the offsets skipped (then
                # the first one not read)
                first = seen if offset is None or offset >= next_offset > seen else offset
                gaps.append(DamageGap(seg.log_path, pos, first, next_offset, why))
            return
        raise CorruptRecordError(
            f"Corrupt batch in log {self._tp_name}: {why}; the log continues to offset "
            f"{next_offset}, so the read stops here rather than leave out what follows",
            pos, offset, seg.log_path)

    def _head_at(self, seg: Segment, position: int, size: int) -> bytes:
        """The first 17 bytes of the entry at ``position`` of ``seg`` (fewer past ``size``)."""
        if position + 17 > size:
            return b""
        with self._lock:
            try:
                return seg.read_at(position, 17)
            except STORAGE_ERRORS as err:
                self._io_error(err, "reading")
        return b""  # pragma: no cover - _io_error raises

    def _resume_after(self, seg: Segment, bad: int, size: int, head: bytes, seen: int,
                      lo: int) -> Optional[Tuple[int, int]]:
        """Where a scan that skips damage goes on after the unreadable entry at ``bad`` of
        ``seg`` (of ``size`` bytes; ``head``: its first bytes; ``seen``: the offset after the
        last whole entry read; ``lo``: where the scan's bytes of this segment begin):
        ``(position, offset)`` of the entry after it when its size field still frames it (the
        segment ends there or a whole valid entry starts there: exactly that entry is
        skipped), else of the first whole valid entry continuing the offsets
        (:func:`~kafkalog.storage.segment.resume_point`; it may start inside the entry before,
        whose size field was the damaged one); None when none follows in the segment (the scan
        goes on with the next)."""
        with self._lock:
            try:
                nxt = resume_point(seg.read_at, size, bad, head, seen, lo,
                                   hints=[e.position for e in seg.offset_index
                                          if e.position > bad])
                if nxt is None:
                    return None
                head = seg.read_at(nxt, 8)
                return (nxt, int.from_bytes(head, "big", signed=True)) if len(head) == 8 else None
            except STORAGE_ERRORS as err:
                self._io_error(err, "reading")
        return None

    def _framing(self, seg: Segment, pos: int, head: bytes, end: int,
                 max_size: int = _MAX_SIZE) -> Optional[str]:
        """Why the entry whose first bytes are ``head`` at ``pos`` cannot be a whole batch of
        a segment of ``end`` bytes (None when it can)."""
        return framing_problem(head, pos, end, max_size)

    def chunks(
        self,
        start_offset: Optional[int] = None,
        end_offset: Optional[int] = None,
        block: int = 64 << 20,
        on_damage: str = RAISE,
        gaps: Optional[list] = None,
        max_size: int = _MAX_SIZE,
        borrow: bool = False,
    ) -> Iterator[Tuple[str, int, Any]]:
        """``(.log path, file position, bytes)``: runs of whole batches (about ``block``
        bytes each) from the batch holding ``start_offset`` (default: the log start) up to
        the last batch holding an offset below ``end_offset`` (v2 batches starting at or after
        it are not read; without it: to the end, appends made meanwhile included for the
        segments not passed yet).  Framing damage follows ``on_damage``; CRCs are the
        caller's to check.

        The bytes are read into two buffers that the scan reuses (at most two blocks, or one
        batch larger than a block, are held).  By default each run is handed out as a
        ``bytes`` copy.  With ``borrow=True`` it is a memoryview into a reused buffer, valid
        only until the generator is resumed (copy what must outlive that), and the next block
        is read by a helper thread while the caller works on this one (the read is planned
        before the run is handed out, so appends made meanwhile are seen a block later);
        close the generator before the view."""
        _check_on_damage(on_damage)
        with self._lock:
            self._check_open()
            start = self._offsets.log_start_offset if start_offset is None else max(start_offset, 0)
            end = None if end_offset is None else min(end_offset, self._offsets.log_end_offset)
            segs = list(self._segs)
        if end is not None and start >= end:
            return
        blocks = ReadBlocks(self._lock, self._read_into, block, borrow)
        walk_frames = _speedups.batch.walk_frames
        unpack = _ENTRY.unpack_from
        v2_head = _V2_HEAD.unpack_from
        try:
            cur = self._plan(blocks, segs, 0, None, None, start, end)
            k_seen = -1
            seen = 0
            while cur is not None:
                data = blocks.wait(cur)
                k, seg, pos, size, leo = cur.k, cur.seg, cur.pos, cur.size, cur.leo
                if k != k_seen:
                    k_seen = k
                    seen = seg.base_offset  # the offset after the last whole batch read
                    seg_lo = pos  # where this scan's bytes of the segment begin
                if data is None:  # the segment was closed meanwhile
                    cur = self._plan(blocks, segs, k + 1, None, None, start, end)
                    continue
                path = seg.log_path
                n = len(data)
                left = size - pos  # bytes of the segment from the start of ``data``
                p = 0
                stop = False
                damaged = None
                while p < n:
                    # the plain entries at compiled speed; the loop below sees the others
                    # the compiled walk stops at an offset at or past the end of the range or
                    # of the segment (the next one's base offset, or the log end): damage
                    # unless it is where the range ends
                    upper = segs[k + 1].base_offset if k + 1 < len(segs) else leo
                    p, seen = walk_frames(data, p, n, left,
                                          upper if end is None else min(end, upper),
                                          max_size, seen, True)
                    if p >= n:
                        break
                    r = n - p
                    if r < 17:  # a header cut by the end of the read
                        head = bytes(data[p:n])
                        if r >= _LOG_OVERHEAD or pos + n >= size:
                            damaged = self._framing(seg, pos + p, head, size, max_size)
                        break  # else the rest of the batch comes with the next read
                    off, length = unpack(data, p)
                    magic = data[p + 16]
                    total = length + _LOG_OVERHEAD
                    if (length < _MIN_ENTRY - _LOG_OVERHEAD or magic > 2
                            or (magic == 2 and total < _V2_MIN_ENTRY) or total > left - p
                            or length > max_size):
                        damaged = self._framing(seg, pos + p, bytes(data[p:p + 17]), size,
                                                max_size)
                        if damaged is not None:
                            break
                    if off < seen or off >= upper:  # offsets a segment cannot hold here
                        damaged = (f"the entry's offset {off} is out of place (the entry before "
                                   f"ends at offset {seen - 1}; the segment's offsets end "
                                   f"below {upper})")
                        break
                    if off > seen and (end is None or off < end):
                        # a gap: the entry after it says whether it is one (gap_is_damage)
                        q = p + total
                        after = (bytes(data[q:q + 17]) if q + 17 <= n
                                 else self._head_at(seg, pos + q, size))
                        if gap_is_damage(seen, off, after):
                            damaged = (f"the entry's offset {off} is out of place (the entry "
                                       f"before ends at offset {seen - 1}, the one after it "
                                       f"goes on from {unpack(after, 0)[0]})")
                            break
                    if end is not None and off >= end and magic == 2:
                        stop = True  # a v2 batch wholly at or after the end
                        break
                    if total > r:
                        break  # the rest of the batch comes with the next read
                    seen = off + v2_head(data, p)[6] + 1 if magic == 2 else off + 1
                    p += total
                    if end is not None and off >= end:  # a legacy entry (offset: its last)
                        stop = True
                        break
                if stop or damaged is not None:
                    if p:
                        yield path, pos, (data[:p] if borrow else bytes(data[:p]))
                    if stop:
                        return
                    # inside the log: the loader cut the one thing that may end it quietly (a
                    # torn tail of the last segment), so every byte left is the log's
                    resume = (self._resume_after(seg, pos + p, size, bytes(data[p:p + 17]),
                                                 seen, seg_lo)
                              if on_damage == SKIP else None)
                    if resume is not None:
                        nxt = resume[1]
                    else:
                        nxt = segs[k + 1].base_offset if k + 1 < len(segs) else leo
                    assert damaged is not None  # not stop: damage ended the entries
                    self._damage(seg, pos + p, bytes(data[p:p + 8]), damaged, on_damage,
                                 gaps, nxt, seen)
                    if resume is not None:
                        cur = self._plan(blocks, segs, k, resume[0], None, start, end)
                        continue
                    cur = self._plan(blocks, segs, k + 1, None, None, start, end)
                    continue
                if p == 0:  # one batch larger than the read: read it whole
                    off, length = unpack(data, 0)
                    need = length + _LOG_OVERHEAD
                    data = blocks.extend(cur, need)
                    if data is None:
                        cur = self._plan(blocks, segs, k + 1, None, None, start, end)
                        continue
                    yield path, pos, (data if borrow else bytes(data))
                    seen = off + 1 + (v2_head(data, 0)[6] if data[16] == 2 else 0)
                    if end is not None and off >= end:
                        return
                    cur = self._plan(blocks, segs, k, pos + need, None, start, end)
                    continue
                carry = data[p:] if p < n else None
                if borrow:  # read the next block while the caller works on this one
                    cur = self._plan(blocks, segs, k, pos + p, carry, start, end, ahead=True)
                    yield path, pos, (data[:p] if p < n else data)
                else:
                    yield path, pos, bytes(data[:p])
                    cur = self._plan(blocks, segs, k, pos + p, carry, start, end)
        finally:
            blocks.close()

    def _plan(self, blocks: ReadBlocks, segs: List[Segment], k: int, pos: Optional[int],
              carry: Any, start: int, end: Optional[int],
              ahead: bool = False) -> Optional[BlockRead]:
        """Start the next read of a scan: of ``segs[k]`` at ``pos`` (``carry``: its first
        bytes, already read), else (``pos`` None, or the segment read to its end) of the
        first later segment that holds offsets in ``[start, end)``; None when none is left.
        ``ahead``: the caller works on a block meanwhile (the read may go to the helper)."""
        while k < len(segs):
            seg = segs[k]
            with self._lock:
                if seg.closed:
                    k, pos, carry = k + 1, None, None
                    continue
                if pos is None:  # entering the segment
                    if k + 1 < len(segs) and segs[k + 1].base_offset <= start:
                        k += 1
                        continue
                    if end is not None and seg.base_offset >= end:
                        return None
                    pos = 0
                    if start > seg.base_offset:
                        try:
                            found = seg.translate_offset(start)
                        except STORAGE_ERRORS as e:
                            self._io_error(e, "reading")
                        if found is None:
                            k, pos = k + 1, None
                            continue
                        pos = found.position
                    upper = (segs[k + 1].base_offset if k + 1 < len(segs)
                             else self._offsets.log_end_offset)
                    blocks.stop_at = (k, self._stop_position(seg, end, upper))
                self._check_online()
                size = seg.size
                leo = self._offsets.log_end_offset
            stop_k, stop_pos = blocks.stop_at
            if stop_k == k and stop_pos is not None:
                if pos >= stop_pos:
                    return None  # the batches below ``end`` are read
                size = min(size, stop_pos)
            if pos >= size:
                k, pos, carry = k + 1, None, None
                continue
            return blocks.start(k, seg, pos, carry, size, leo, ahead)
        return None

    def _stop_position(self, seg: Segment, end: Optional[int], upper: int) -> Optional[int]:
        """Where a scan of ``seg`` up to ``end`` can stop reading (under the log's lock): after
        the batch holding ``end``, or before it where it is a v2 batch starting at ``end``;
        None where that is not known from sound bytes (a scan then reads on and stops as its
        walk finds, damage included): where ``end`` is not inside ``seg`` (its offsets lie
        below ``upper``), or the batch found there has an offset the segment cannot hold."""
        if end is None or end >= upper:
            return None
        try:
            found = seg.translate_offset(end)
            if found is None:
                return None
            head = seg.read_at(found.position, 17)
        except STORAGE_ERRORS as e:
            self._io_error(e, "reading")
        if len(head) < 17 or self._framing(seg, found.position, head, seg.size) is not None:
            return None
        off, length = _ENTRY.unpack_from(head, 0)
        if not seg.base_offset <= off < upper:
            return None  # a damaged offset: read on, the walk reports it
        if off >= end and head[16] == 2:
            return found.position
        return found.position + length + _LOG_OVERHEAD

    def _read_into(self, seg: Segment, pos: int, buf: memoryview) -> None:
        """Fill ``buf`` with the bytes at ``pos`` of ``seg`` (under the log's lock); a segment
        that shrank meanwhile raises KafkaStorageError with errno EAGAIN."""
        try:
            got = seg.read_into(pos, buf)
        except STORAGE_ERRORS as e:
            self._io_error(e, "reading")
        if got < len(buf):
            raise KafkaStorageError(
                f"segment {seg.log_path} shrank while it was read ({len(buf)} bytes expected at "
                f"position {pos}, {got} there): the log was truncated or replaced "
                "meanwhile; read again", position=pos, path=seg.log_path,
                errno=_errno.EAGAIN, operation="reading")

    def _batches(self, start_offset: Optional[int], end_offset: Optional[int], on_damage: str,
                 gaps: Optional[list]) -> Iterator[Tuple[str, int, Any]]:
        """``(.log path, chunk position, batch)`` for every batch of :meth:`chunks`, each one's
        CRC checked: a batch that fails it raises CorruptRecordError naming the file, its
        position and offset, or (``on_damage="skip"``) exactly that batch is reported as a
        :class:`DamageGap` and left out."""
        leo = self._offsets.log_end_offset
        for path, pos, data in self.chunks(start_offset, end_offset, SCAN_CHUNK, on_damage,
                                           gaps):
            try:
                # each batch's CRC checked once, here (a wrapper's covers its inner messages):
                # decoding its records does not check it again
                for b in MemoryRecords(data, check_crcs=False):
                    try:
                        b.ensure_valid()
                    except KafkaLogError as e:
                        if on_damage != SKIP:
                            raise
                        self._skip_batch(path, pos, b, e, leo, gaps)
                        continue
                    yield path, pos, b
            except KafkaLogError as e:  # name the file and the file position
                if e.path is None:
                    if e.position is None:
                        e.position = 0
                    e.located(path, pos)
                raise

    @staticmethod
    def _skip_batch(path: str, pos: int, b: Any, e: KafkaLogError, leo: int,
                    gaps: Optional[list]) -> None:
        if gaps is None:
            return
        base = b.base_offset if b.magic >= 2 else b.offset
        last = b.last_offset if b.magic >= 2 else b.offset
        nxt = min(max(last + 1, base + 1), max(leo, base + 1))
        gaps.append(DamageGap(path, pos + b.position, base, nxt, str(e.message)))

    def iter_batches(
        self,
        start_offset: Optional[int] = None,
        end_offset: Optional[int] = None,
        on_damage: str = RAISE,
        gaps: Optional[list] = None,
    ) -> Iterator[Any]:
        """Every batch from the one holding ``start_offset`` (default: the log start) up to
        the log end offset (or the last one holding an offset below ``end_offset``), as
        RecordBatch / LegacyRecordBatch objects over copies of the bytes, each one's CRC
        checked; ``batch.position`` is its position in the chunk it was read with.  Damage
        follows ``on_damage``."""
        for _path, _pos, b in self._batches(start_offset, end_offset, on_damage, gaps):
            yield b

    def _records(self, path: str, pos: int, b: Any, on_damage: str, gaps: Optional[list]
                 ) -> List[Any]:
        """The records of ``b`` (of the chunk at ``pos`` of ``path``); one that cannot be
        decoded raises naming the file and position, or is skipped and reported."""
        try:
            return b.records()
        except KafkaLogError as e:
            if on_damage == SKIP:
                self._skip_batch(path, pos, b, e, self._offsets.log_end_offset, gaps)
                return []
            if e.path is None:
                if e.position is None:
                    e.position = b.position
                e.located(path, pos)
            raise

    def iter_records(
        self,
        start_offset: Optional[int] = None,
        isolation: str = "read_uncommitted",
        on_damage: str = RAISE,
        gaps: Optional[list] = None,
    ) -> Iterator[Any]:
        """See :meth:`kafkalog.storage.log.Log.iter_records`."""
        from ..control import is_abort_marker

        start = self._offsets.log_start_offset if start_offset is None else start_offset
        if isolation == "read_uncommitted":
            for path, pos, b in self._batches(start, None, on_damage, gaps):
                if b.is_control_batch:
                    continue
                for r in self._records(path, pos, b, on_damage, gaps):
                    if r.offset >= start:
                        yield r
            return
        if isolation != "read_committed":
            raise ValueError(
                f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
        with self._lock:
            lso = self.last_stable_offset
            aborted = sorted(
                self.collect_aborted_transactions(start, lso), key=lambda t: t.first_offset
            )
        k = 0
        aborted_pids = set()
        for path, pos, b in self._batches(start, lso, on_damage, gaps):
            if b.magic >= 2 and b.base_offset >= lso:
                break
            if b.magic >= 2 and b.producer_id >= 0:
                while k < len(aborted) and aborted[k].first_offset <= b.last_offset:
                    aborted_pids.add(aborted[k].producer_id)
                    k += 1
                if b.is_control_batch:
                    for r in self._records(path, pos, b, on_damage, gaps):
                        if is_abort_marker(r.key):
                            aborted_pids.discard(b.producer_id)
                        break
                    continue
                if b.is_transactional and b.producer_id in aborted_pids:
                    continue
            elif b.magic >= 2 and b.is_control_batch:
                continue
            for r in self._records(path, pos, b, on_damage, gaps):
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
                i = max(floor_index(self._bases, start_offset), 0)
                for seg in self._segs[i:]:
                    result = seg.collect_aborted_txns(start_offset, upper_bound_offset)
                    out.extend(result.aborted_transactions)
                    if result.is_complete:
                        break
                return out
            except STORAGE_ERRORS as e:
                self._io_error(e, "reading the transaction indexes of")

    def offset_for_timestamp(self, timestamp: int) -> Optional[TimestampAndOffset]:
        """See :meth:`kafkalog.storage.log.Log.offset_for_timestamp`."""
        with self._lock:
            self._check_open()
            try:
                cache = self._epoch_cache
                if timestamp == LATEST_TIMESTAMP:
                    return TimestampAndOffset(-1, self._offsets.log_end_offset, cache.latest_epoch)
                if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                    first = cache.entries[0] if cache.entries else None
                    epoch = (
                        first.epoch
                        if first is not None
                        and first.start_offset <= self._offsets.log_start_offset
                        else None
                    )
                    return TimestampAndOffset(-1, self._offsets.log_start_offset, epoch)
                if timestamp == LATEST_TIERED_TIMESTAMP:
                    return TimestampAndOffset(-1, -1, -1)
                if timestamp == MAX_TIMESTAMP:
                    best = None
                    for seg in self._segs:
                        if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                            best = seg
                    if best is None or best.max_timestamp_so_far < 0:
                        return None
                    return best.offset_of_max_timestamp()
                if timestamp < 0:
                    raise ValueError(f"unsupported special timestamp {timestamp}")
                start = self._offsets.log_start_offset
                segs = self._segs
                for i, seg in enumerate(segs):
                    if i + 1 < len(segs) and segs[i + 1].base_offset <= start:
                        continue  # wholly below the log start offset
                    if seg.largest_timestamp >= timestamp:
                        # Kafka searches this segment only: None when its records at or
                        # after the target lie below the log start, or when it has no
                        # timestamps (its largest timestamp is then its file's mtime)
                        return seg.find_offset_by_timestamp(timestamp, start)
                return None
            except STORAGE_ERRORS as e:
                self._io_error(e, "looking up a timestamp in")
