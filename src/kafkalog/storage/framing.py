"""The framing of log entries in a segment's bytes, judged by one set of rules every reader
shares: where a whole valid entry starts (:func:`whole_batch_after`, :func:`entry_is_whole`),
why an entry cannot frame (:func:`framing_problem`), whether a jump in offsets is damage or a
compaction gap (:func:`gap_is_damage`), where a read that skips damage goes on
(:func:`resume_point`), whether a tail is an append still in flight (:func:`append_in_flight`),
and THE walk over a segment's entry headers that tells damage from a torn tail
(:func:`walk_segment`, answering a :class:`SegmentWalk`).

The helpers read through a ``read_at(position, n)`` callable (a
:class:`~kafkalog.storage.file_records.FileRecords`'s, a store's, a ranged reader's), so the
same rules hold for a local segment, a segment in a store and a range of one.
"""

from __future__ import annotations

import re
import struct
from typing import Callable, Iterable, List, NamedTuple, Optional, Tuple

from .. import _speedups
from .._format import (
    ENTRY_HEADER,
)
from .._format import (
    HEADER_SIZE_UP_TO_MAGIC as _HEADER_SIZE_UP_TO_MAGIC,
)
from .._format import (
    INT32_MAX as _INT32_MAX,
)
from .._format import (
    LOG_OVERHEAD as _LOG_OVERHEAD,
)
from .._format import (
    RECORD_BATCH_OVERHEAD as _V2_OVERHEAD,
)
from .._format import (
    RECORD_OVERHEAD_V0 as _RECORD_OVERHEAD_V0,
)
from ..errors import CorruptRecordError, KafkaLogError
from ..records import MemoryRecords

__all__ = [
    "IN_FLIGHT_SIZE_BYTE",
    "RESUME_LOOKBACK",
    "SegmentWalk",
    "append_in_flight",
    "entry_is_whole",
    "framing_problem",
    "gap_is_damage",
    "resume_point",
    "walk_segment",
    "whole_batch_after",
    "whole_entry_at",
]

_ENTRY = ENTRY_HEADER
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U32 = struct.Struct(">I")
#: the first byte of the size field of the first batch of a multi-batch append still being
#: written (see FileRecords._write, append_in_flight)
IN_FLIGHT_SIZE_BYTE = 0x7F

# Where a whole log entry may start: a positive size of at least 14 bytes and a magic byte of
# 0, 1 or 2 (a zero-filled range matches nowhere).  Candidates are then checked whole.
_ENTRY_CANDIDATE = re.compile(
    rb"(?=[\x00-\xff]{8}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f][\x00-\xff]{7}[\x00-\x02])",
    re.S)
_RESYNC_BLOCK = 1 << 20


def whole_batch_after(read_at, size: int, position: int, base_offset: int,
                      hints: Iterable[int] = (), scan_end: Optional[int] = None) -> Optional[int]:
    """The position of the first whole, valid log entry (framing and CRC sound, offsets those
    of a segment at ``base_offset``) that starts after ``position`` in a file of ``size``
    bytes read with ``read_at(position, n)``; None when none does.  This is what tells a torn
    tail (nothing whole follows: the end of a log) from damage (whole batches follow: records
    a reader must not leave out silently), judged by the bytes that follow, never by the
    damaged entry's own size or offset fields.  ``hints``: positions to try first (the
    offset-index entries past ``position``, where batches started).  ``scan_end``: only
    entries starting before it."""
    last = size if scan_end is None else min(size, scan_end)
    for q in hints:
        if position < q < last and entry_is_whole(read_at, size, q, base_offset):
            return q
    q = position + 1
    while q + _HEADER_SIZE_UP_TO_MAGIC <= size and q < last:
        block = read_at(q, min(_RESYNC_BLOCK + _HEADER_SIZE_UP_TO_MAGIC, size - q))
        if len(block) < _HEADER_SIZE_UP_TO_MAGIC:
            return None
        usable = len(block) - _HEADER_SIZE_UP_TO_MAGIC + 1  # candidates starting in this block
        for m in _ENTRY_CANDIDATE.finditer(block, 0, len(block)):
            at = m.start()
            if at >= usable or q + at >= last:
                break
            if entry_is_whole(read_at, size, q + at, base_offset, block, at):
                return q + at
        q += usable
    return None


def entry_is_whole(read_at, size: int, q: int, base_offset: int,
                    block: bytes = b"", at: int = 0) -> bool:
    """Whether a whole valid entry starts at ``q`` (see :func:`whole_batch_after`)."""
    head = block[at:at + _HEADER_SIZE_UP_TO_MAGIC]
    if len(head) < _HEADER_SIZE_UP_TO_MAGIC:
        head = read_at(q, _HEADER_SIZE_UP_TO_MAGIC)
        if len(head) < _HEADER_SIZE_UP_TO_MAGIC:
            return False
    offset, length = _ENTRY.unpack_from(head, 0)
    magic = head[16]
    total = length + _LOG_OVERHEAD
    if (length < _RECORD_OVERHEAD_V0 or magic > 2 or (magic == 2 and total < _V2_OVERHEAD)
            or q + total > size or offset < base_offset or offset - base_offset > _INT32_MAX):
        return False
    data = block[at:at + total]
    if len(data) < total:
        data = read_at(q, total)
        if len(data) < total:
            return False
    try:
        for batch in MemoryRecords(data):
            batch.ensure_valid()
            return batch.position == 0 and batch.size_in_bytes == total and (
                batch.last_offset - base_offset <= _INT32_MAX)
    except (KafkaLogError, ValueError):
        return False
    return False


def append_in_flight(read_at, position: int, following: int, expected_offset: int) -> bool:
    """Whether the entry at ``position`` is the first batch of a multi-batch append that has
    not finished (or failed part-way): kafkalog's writer writes the first byte of its size
    field as :data:`IN_FLIGHT_SIZE_BYTE` (the size then claims about 2 GB) and fixes that one
    byte last, in a write that cannot tear, so that readers see one incomplete batch, never
    part of the append.  Known by all of it, never by a size claim alone: that first byte with
    the other three of the real size (the bytes up to the whole batch that follows,
    ``following``), the offset the log expects next, and a CRC that holds.  Such bytes are a
    torn tail (the append never happened), not damage."""
    head = read_at(position, 21)
    if len(head) < 21 or following - position < _RECORD_OVERHEAD_V0 + _LOG_OVERHEAD:
        return False
    real = _I.pack(following - position - _LOG_OVERHEAD)
    if head[8] != IN_FLIGHT_SIZE_BYTE or real[0] == IN_FLIGHT_SIZE_BYTE or head[9:12] != real[1:] \
            or _Q.unpack_from(head, 0)[0] != expected_offset:
        return False
    if head[16] == 2:
        body = read_at(position + 21, following - position - 21)
        return len(body) == following - position - 21 and \
            _speedups.crc.crc32c(body) == _U32.unpack_from(head, 17)[0]
    body = read_at(position + 16, following - position - 16)  # v0/v1: from the magic byte on
    return len(body) == following - position - 16 and \
        _speedups.crc.crc32(body) == _U32.unpack_from(head, 12)[0]


def framing_problem(head: bytes, pos: int, end: int, max_size: int = _INT32_MAX) -> Optional[str]:
    """Why the log entry whose first bytes (up to 17) are ``head``, at ``pos`` of a file or
    range ending at ``end``, cannot be a whole entry there; None when its framing can be."""
    if len(head) < _LOG_OVERHEAD:
        return f"{end - pos} bytes at the end of the segment are not a whole batch header"
    size = _ENTRY.unpack_from(head, 0)[1]
    if size < _RECORD_OVERHEAD_V0:
        return (f"found record size {size} smaller than minimum record overhead "
                f"({_RECORD_OVERHEAD_V0})")
    if len(head) > 16 and head[16] > 2:
        return f"invalid magic {head[16]}"
    if len(head) > 16 and head[16] == 2 and size + _LOG_OVERHEAD < _V2_OVERHEAD:
        return (f"record batch size {size + _LOG_OVERHEAD} is smaller than the minimum v2 "
                f"batch overhead ({_V2_OVERHEAD})")
    if size + _LOG_OVERHEAD > end - pos:
        return (f"the batch claims {size} bytes but the segment has {end - pos - _LOG_OVERHEAD} "
                "left after its header")
    if size > max_size:
        return f"the batch claims {size} bytes, more than the limit of {max_size}"
    return None


def gap_is_damage(expected: int, first: int, after: bytes) -> bool:
    """Whether an entry whose first offset ``first`` jumps past ``expected`` (the offset after
    the entry before it) is damage rather than a gap in the offsets (compaction leaves gaps):
    the entry after it (``after``: its first 17 bytes, framed) starts at or past ``expected``
    but below ``first``, so the offsets went on without this entry's jump (a damaged offset
    field, which a v2 batch's CRC does not cover).  Every reader judges a jump so, the entry
    after it deciding; an entry out of order is otherwise the one going backwards."""
    if len(after) < _HEADER_SIZE_UP_TO_MAGIC or framing_problem(after, 0, _INT32_MAX) is not None:
        return False
    return expected <= _Q.unpack_from(after, 0)[0] < first


#: how far before an unreadable entry a skipping read looks for the entry that really follows
#: the one before it (whose size field may be the damaged one)
RESUME_LOOKBACK = 1 << 20


def resume_point(read_at, size: int, bad: int, head: bytes, seen: int, lo: int,
                 hints: Iterable[int] = ()) -> Optional[int]:
    """Where a read that skips damage goes on after the unreadable entry at ``bad`` (its
    first bytes ``head``) of a file or range of ``size`` bytes, after whole entries that end
    at offset ``seen`` (the read's bytes began at ``lo``): the entry after it when its size
    field still frames it (the end, or a whole valid entry there continuing the offsets:
    exactly that entry is skipped); else the first whole valid entry continuing the offsets
    (at or past ``seen``), looked for from a little before ``bad`` (the entry before may be
    the one whose size field was damaged) on, ``hints`` (index positions) first; None when
    none follows.  Every reader that skips goes on where this says."""
    if len(head) >= _LOG_OVERHEAD:
        after = bad + _ENTRY.unpack_from(head, 0)[1] + _LOG_OVERHEAD
        if bad + _RECORD_OVERHEAD_V0 + _LOG_OVERHEAD <= after <= size and (
                after == size or entry_is_whole(read_at, size, after, seen)):
            return None if after >= size else after
    q = whole_batch_after(read_at, size, max(lo, bad - RESUME_LOOKBACK) - 1, seen,
                          hints=[h for h in hints if h > bad])
    return None if q is None or q >= size else q


def whole_entry_at(seg, position: int, size: int) -> bool:
    """Whether a whole valid entry (framing and CRC) starts at ``position`` of ``seg`` (a
    segment: its ``read_at`` and ``base_offset``)."""
    return entry_is_whole(seg.read_at, size, position, seg.base_offset)


class SegmentWalk(NamedTuple):
    """What a walk over a segment's entries from some position found: ``next_offset``, the
    offset after the last whole entry; ``end``, the position after it; ``damage``, the
    ``(position, resumed at)`` of each stretch of bytes that did not frame but was followed by
    whole entries (reported, never taken for the end); ``tail``, where the bytes after the
    last whole entry begin when they are not one (a torn tail: nothing whole follows), else
    None."""

    next_offset: int
    end: int
    damage: List[Tuple[int, int]]
    tail: Optional[int]



def walk_segment(records, base: int, position: int,
                 resync: Callable[[int], Optional[int]]) -> SegmentWalk:
    """Walk the entry headers of ``records`` (a segment's
    :class:`~kafkalog.storage.file_records.FileRecords`, of a segment at offset ``base``) from
    ``position`` (no CRCs) to the end; where the bytes stop framing, look at what follows
    (``resync(position)``: the segment's :func:`whole_batch_after`, its index entries tried
    first): whole entries after them make it damage (recorded, and the walk goes on there),
    none makes it the segment's tail."""
    size = records.size
    read_at = records.read_at
    nxt = before = base  # the offset after the last entry taken, and before it
    last = last_first = -1  # where the last entry taken starts, and its first offset
    damage: List[Tuple[int, int]] = []
    pos = position
    while True:
        end = pos
        try:
            for h in records.iter_headers(pos):
                end = h.position + h.size
                first = h.base_offset if h.magic >= 2 else h.last_offset
                if first < base or h.last_offset - base > _INT32_MAX:
                    damage.append((h.position, end))  # offsets no entry here can have
                    continue
                if first < nxt:  # offsets going backwards
                    if last >= 0 and before <= first < last_first:
                        # the entry before jumped and this one goes on below the jump: that
                        # one was out of place (gap_is_damage, as every reader judges it)
                        damage.append((last, h.position))
                        nxt = before
                    else:
                        damage.append((h.position, end))  # this one is out of place
                        continue
                before, last, last_first, nxt = nxt, h.position, first, h.last_offset + 1
            stop = end
        except CorruptRecordError as e:
            stop = e.position if e.position is not None else end
        if stop < size and last >= 0:
            # the entry before may be the damaged one (a size field that claims too much
            # or too little): a whole entry continuing the offsets inside its bytes says so
            q = whole_batch_after(read_at, size, last, before, scan_end=stop)
            if q is not None:
                damage.append((last, q))
                nxt, last = before, -1
                pos = q
                continue
        if stop >= size:
            return SegmentWalk(nxt, stop, damage, None)
        q = resync(stop)
        if q is None or append_in_flight(read_at, stop, q, nxt):
            return SegmentWalk(nxt, stop, damage, stop)
        damage.append((stop, q))
        pos, last = q, -1
