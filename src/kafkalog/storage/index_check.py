"""A segment's offset and time indexes checked against, and built from, its batch headers:
the cross-check ``kafka-dump-log --verify-index-only`` and ``--index-sanity-check`` make (plus
ordering), and the entries recovery would add, for indexes rebuilt in memory."""

from __future__ import annotations

from typing import Iterable, Tuple

from ..errors import CorruptIndexError, CorruptRecordError
from .file_records import BatchHeader
from .index import OffsetIndex, TimeIndex

__all__ = ["index_headers", "verify_indexes"]


def index_headers(headers: Iterable[BatchHeader], oi: OffsetIndex, ti: TimeIndex,
                  interval: int, base_offset: int) -> Tuple[int, int]:
    """Add to the (empty) indexes ``oi`` and ``ti`` the entries recovery adds for the batches
    whose ``headers`` are walked: one every ``interval`` bytes, and the final time entry.  A
    header no batch can have (CorruptRecordError) ends the walk.  Returns the max timestamp and
    the last offset of the batch that first reached it (-1 and ``base_offset`` for none)."""
    last_entry = 0
    max_ts, max_off = -1, base_offset
    try:
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            if h.position - last_entry > interval:
                oi.append(h.last_offset, h.position)
                ti.maybe_append(max_ts, max_off)
                last_entry = h.position
    except CorruptRecordError:
        pass
    ti.maybe_append(max_ts, max_off, skip_full_check=True)
    return max_ts, max_off


def verify_indexes(seg) -> None:
    """Cross-check the indexes of the segment ``seg`` against its batch headers: Kafka's
    sanity checks, strictly increasing entries, offset entries at batch boundaries such that
    every batch before an entry's position ends below its offset, and time entries whose
    offset lies in a batch that first reached that timestamp.  Raises CorruptIndexError."""
    oi, ti = seg.offset_index, seg.time_index
    oi.sanity_check(full=True)
    ti.sanity_check(full=True)
    txi = seg.txn_index
    txi.sanity_check()
    headers = list(seg.iter_headers(0))
    by_pos = {h.position: i for i, h in enumerate(headers)}
    size = seg.size
    for off, pos in oi:
        if pos >= size and not (pos == 0 and size == 0):
            raise CorruptIndexError(
                f"Index entry ({off}, {pos}) of {oi.path} points beyond the log ({size} bytes)",
                position=pos,
                offset=off,
                path=oi.path,
            )
        i = by_pos.get(pos)
        if i is None:
            raise CorruptIndexError(
                f"Index entry ({off}, {pos}) of {oi.path} does not point at a batch",
                position=pos,
                offset=off,
                path=oi.path,
            )
        if i > 0 and headers[i - 1].last_offset >= off:
            raise CorruptIndexError(
                f"Index entry ({off}, {pos}) of {oi.path}: the batch before position {pos} "
                f"ends at offset {headers[i - 1].last_offset} >= {off}",
                position=pos,
                offset=off,
                path=oi.path,
            )
        if headers[i].base_offset > off and headers[i].magic == 2:
            raise CorruptIndexError(
                f"Index entry ({off}, {pos}) of {oi.path}: the batch there starts at "
                f"offset {headers[i].base_offset}",
                position=pos,
                offset=off,
                path=oi.path,
            )
    running = -1
    j = 0
    for ts, off in ti:
        # Advance to the batch holding `off`, tracking the max timestamp before it.
        while j < len(headers) and headers[j].last_offset < off:
            running = max(running, headers[j].max_timestamp)
            j += 1
        if j == len(headers):
            raise CorruptIndexError(
                f"Time index entry ({ts}, {off}) of {ti.path} points beyond the log",
                offset=off,
                path=ti.path,
            )
        h = headers[j]
        if h.max_timestamp != ts and not (h.magic < 2 and h.max_timestamp <= ts):
            # v0/v1 wrappers: older brokers indexed the exact inner record offset.
            raise CorruptIndexError(
                f"Time index entry ({ts}, {off}) of {ti.path}: the batch at position "
                f"{h.position} has max timestamp {h.max_timestamp}",
                offset=off,
                path=ti.path,
            )
        if running >= ts:
            raise CorruptIndexError(
                f"Time index entry ({ts}, {off}) of {ti.path}: an earlier batch already "
                f"reached timestamp {running}",
                offset=off,
                path=ti.path,
            )
