"""Planning a read: the splits of a batch read (or of one micro-batch), each a run of
segment pieces cut at offset index entries and packed as Spark packs file splits; pushed
filters prune partitions, offsets and segments."""
from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..storage.logdir import DirVersion
from ._discovery import DiscoveredPartition, discover
from ._errors import ConcurrentWriteError, OptionError
from ._offsets import Range, check_specs, resolve_ranges
from ._options import OPEN_COST_BYTES, ReadOptions


@dataclass
class Piece:
    """Entries of one segment starting in ``[start, end)`` (``end`` None: to the end of the
    file); rows are kept when ``from_offset <= offset < until_offset``."""

    topic: Optional[str]
    partition: Optional[int]
    path: str
    start: int
    end: Optional[int]
    from_offset: int
    until_offset: Optional[int]
    nbytes: int
    directory: str = ""
    version: Optional[DirVersion] = None  # of ``directory`` when planned (see dir_version)
    # the piece ends the partition's last segment (``end`` None: it reads the ``nbytes``
    # planned, which the read view took as the log's: a torn tail was cut before planning)
    tail: bool = False
    # the offsets of the piece's segment lie below this (the next segment's base offset, or the
    # log end): an entry at or past it is damage (None: not known)
    limit: Optional[int] = None


@dataclass
class Split:
    """What one Spark task reads: pieces in (topic, partition, offset) order."""

    index: int
    pieces: List[Piece]

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.pieces)


@dataclass
class Pruning:
    """Restrictions from pushed filters (all optional; exact unless noted)."""

    topics: Optional[set] = None  # allowed topic names
    topic_prefixes: Optional[List[str]] = None
    partitions: Optional[set] = None
    partition_lo: Optional[int] = None  # inclusive
    partition_hi: Optional[int] = None  # inclusive
    offset_lo: Optional[int] = None  # inclusive
    offset_hi: Optional[int] = None  # exclusive
    ts_lo_us: Optional[int] = None  # inclusive (row filter + segment pruning)
    ts_hi_us: Optional[int] = None  # inclusive (row filter only)
    exclude_unknown_tp: bool = False
    empty: bool = False

    def keeps_tp(self, tp: DiscoveredPartition) -> bool:
        if self.empty:
            return False
        if tp.topic is None:
            return (
                not self.exclude_unknown_tp
                and self.topics is None
                and self.topic_prefixes is None
                and self.partitions is None
                and self.partition_lo is None
                and self.partition_hi is None
            )
        if self.topics is not None and tp.topic not in self.topics:
            return False
        if self.topic_prefixes is not None and not all(
            tp.topic.startswith(p) for p in self.topic_prefixes
        ):
            return False
        if self.partitions is not None and tp.partition not in self.partitions:
            return False
        if self.partition_lo is not None and tp.partition < self.partition_lo:
            return False
        if self.partition_hi is not None and tp.partition > self.partition_hi:
            return False
        return True


def _target_bytes(total: int, opts: ReadOptions, pieces: int = 0) -> int:
    """Split size as Spark's file sources pick it: ``min(maxPartitionBytes, max(openCost,
    (bytes + pieces * openCost) / parallelism))``, lowered to ``bytes / minPartitions``.  The
    parallelism is the cluster's when :func:`kafkalog.spark.register` passed it, else the
    number of cores of the planning process (a source found by Spark itself cannot read the
    session's settings)."""
    target = opts.max_partition_bytes
    par = opts.default_parallelism or os.cpu_count() or 1
    with_cost = total + pieces * OPEN_COST_BYTES
    if par > 1:
        target = min(target, max(OPEN_COST_BYTES, -(-with_cost // par)))
    if opts.min_partitions:
        target = min(target, max(1, -(-total // opts.min_partitions)))
    return max(1, target)


def _pieces_for_range(r: Range, target: int, pruning: Optional[Pruning]) -> List[Piece]:
    """The pieces of one partition's range, cut where the storage read model says (its offset
    -> position lookups, split positions at index entries, segment timestamps).  The model is
    opened only where the files alone cannot answer: whole segments smaller than ``target``
    read to the log end need no lookup."""
    tp = r.tp
    start, end = r.start, r.end
    if pruning is not None:
        if pruning.offset_lo is not None:
            start = max(start, pruning.offset_lo)
        if pruning.offset_hi is not None:
            end = min(end, pruning.offset_hi)
    if start >= end:
        return []
    pieces = []
    segs = tp.segments
    with contextlib.ExitStack() as stack:

        def view():
            if tp._view is None:
                stack.enter_context(tp.viewing())
            return tp._view

        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
            if nxt is not None and nxt <= start:
                continue
            if seg.base_offset >= end:
                break
            if seg.size == 0:
                continue
            if pruning is not None and pruning.ts_lo_us is not None:
                mx = view().max_timestamp_of(seg.base_offset)
                if mx >= 0 and mx * 1000 < pruning.ts_lo_us:
                    continue
            s_pos = 0
            if start > seg.base_offset:
                p = view().position_in(seg.base_offset, start)
                if p is None:
                    continue
                s_pos = p
            e_pos = None
            if (nxt is None and not tp.reads_whole_tail(seg, end)) or (
                    nxt is not None and end < nxt):
                e_pos = view().end_position_of(seg.base_offset, end)
            stop = seg.size if e_pos is None else e_pos
            if stop <= s_pos:
                continue
            cuts = (view().split_positions(seg.base_offset, s_pos, stop, target)
                    if stop - s_pos > target else [])
            bounds = [s_pos] + cuts + [stop]
            for a, b in zip(bounds, bounds[1:]):
                pieces.append(
                    Piece(
                        tp.topic,
                        tp.partition,
                        seg.path,
                        a,
                        None if (b == stop and e_pos is None) else b,
                        start,
                        end,
                        b - a,
                        tp.directory,
                        tp.version,
                        nxt is None and b == stop and e_pos is None,
                        nxt if nxt is not None else tp.latest(),
                    )
                )
    return pieces


def replanned(fn):
    """Run a planning step again when a file it read vanished under it (a concurrent write
    swapped a partition directory, retention deleted a segment); after three tries, a
    :class:`ConcurrentWriteError`.  A path the user gave that does not exist is not retried."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        for _attempt in range(3):
            try:
                return fn(*args, **kwargs)
            except OSError as e:  # FileNotFoundError, or storage's KafkaStorageError for one
                if e.errno != errno.ENOENT or e.filename is None:
                    raise
                last = e
        raise ConcurrentWriteError(
            f"the log directories kept changing while this query was planned ({last.filename} "
            "vanished); re-run the query",
            path=last.filename,
        ) from last

    return run


@replanned
def plan(
    opts: ReadOptions,
    pruning: Optional[Pruning] = None,
    tps: Optional[Sequence[DiscoveredPartition]] = None,
    ranges: Optional[Sequence[Range]] = None,
) -> List[Split]:
    """The splits of a batch read (or of one micro-batch when ``ranges`` is given)."""
    if ranges is None:
        if tps is None:
            tps = discover(opts)
        check_specs(tps, opts)
        if opts.subscribe is not None:
            found = {tp.topic for tp in tps}
            missing = [t for t in opts.subscribe if t not in found]
            if missing:
                # the connector fails too: its admin client cannot describe such a topic
                raise OptionError(
                    f"subscribe names topics not found under the path(s): {', '.join(missing)}"
                )
        if pruning is not None:
            tps = [tp for tp in tps if pruning.keeps_tp(tp)]
        ranges = resolve_ranges(tps, opts, check=False)
    elif pruning is not None:
        ranges = [r for r in ranges if pruning.keeps_tp(r.tp)]
    est = sum(_range_bytes_estimate(r) for r in ranges)
    cut_target = _target_bytes(est, opts)
    pieces: List[Piece] = []
    for r in ranges:
        pieces.extend(_pieces_for_range(r, cut_target, pruning))
    total = sum(p.nbytes for p in pieces)
    target = _target_bytes(total, opts, len(pieces))
    return pack(pieces, target, OPEN_COST_BYTES if not opts.min_partitions else 0)


def _range_bytes_estimate(r: Range) -> int:
    n = 0
    segs = r.tp.segments
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if nxt is not None and nxt <= r.start:
            continue
        if seg.base_offset >= r.end:
            break
        n += seg.size
    return n


def pack(pieces: Sequence[Piece], target: int, open_cost: int = OPEN_COST_BYTES) -> List[Split]:
    """Group consecutive pieces into splits of about ``target`` bytes, each piece costing its
    size plus ``open_cost`` (Spark's ``openCostInBytes``), as file splits are packed."""
    splits: List[Split] = []
    cur: List[Piece] = []
    cost = 0
    for p in pieces:
        c = p.nbytes + open_cost
        if cur and cost + c > target:
            splits.append(Split(len(splits), cur))
            cur, cost = [], 0
        cur.append(p)
        cost += c
    if cur:
        splits.append(Split(len(splits), cur))
    return splits
