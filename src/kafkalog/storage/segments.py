"""The ordered segments of one partition (Kafka's ``LogSegments``) and the offsets that bound
them (the log start offset, the log end offset and the recovery point: what Kafka's
``LocalLog`` and ``UnifiedLog`` keep).

A :class:`~kafkalog.storage.log.Log` owns one :class:`LogSegments` and one
:class:`LogOffsets` for its whole life: the loader fills them, appends, rolls, retention,
truncation and the cleaner's swaps change them in place (under the log's lock), and the log's
read model (:class:`~kafkalog.storage.log_view.LogView`) reads the same two objects.  Neither
takes a lock of its own: whoever holds them takes the log's.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Iterable, Iterator, List, Optional

from .segment import Segment

__all__ = ["LogSegments", "LogOffsets"]


class LogSegments:
    """A partition's segments in base-offset order, with their base offsets alongside for the
    floor and higher lookups (Kafka's ``LogSegments``).  Indexing, iteration and ``len`` go
    over the segments; :attr:`items` and :attr:`bases` are the lists of the segments and of
    their base offsets, in the same order: read them, never change them (every change goes
    through the methods here).  The two lists are changed in place and never replaced, so a
    reader (the read model, on its hot paths) may keep them."""

    __slots__ = ("_segments", "_bases")

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._segments: List[Segment] = []
        self._bases: List[int] = []
        for seg in segments:
            self.add(seg)

    # -- reading ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._segments)

    def __bool__(self) -> bool:
        return bool(self._segments)

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._segments)

    def __getitem__(self, i):
        """The segment at position ``i`` (a slice: a list of them)."""
        return self._segments[i]

    def __repr__(self) -> str:
        return f"LogSegments({self._bases!r})"

    @property
    def items(self) -> List[Segment]:
        """The segments, in order (the list itself: do not change it)."""
        return self._segments

    @property
    def bases(self) -> List[int]:
        """The base offsets, in order (the list itself: do not change it)."""
        return self._bases

    def to_list(self) -> List[Segment]:
        """A copy of the segments, oldest first."""
        return list(self._segments)

    def index_of(self, seg: Segment) -> int:
        """The position of ``seg`` (ValueError when it is not one of them)."""
        return self._segments.index(seg)

    def floor_index(self, offset: int) -> int:
        """The position of the segment with the largest base offset <= ``offset``, or -1."""
        return bisect_right(self._bases, offset) - 1

    def floor_segment(self, offset: int) -> Optional[Segment]:
        """The segment with the largest base offset <= ``offset`` (Kafka's ``floorSegment``),
        or None."""
        i = bisect_right(self._bases, offset) - 1
        return self._segments[i] if i >= 0 else None

    def higher_segment(self, offset: int) -> Optional[Segment]:
        """The first segment with a base offset > ``offset`` (Kafka's ``higherSegment``), or
        None."""
        i = bisect_right(self._bases, offset)
        return self._segments[i] if i < len(self._segments) else None

    def get(self, base_offset: int) -> Optional[Segment]:
        """The segment whose base offset is ``base_offset``, or None."""
        i = bisect_right(self._bases, base_offset) - 1
        if i >= 0 and self._bases[i] == base_offset:
            return self._segments[i]
        return None

    # -- changing (under the owning log's lock) ----------------------------------------------------
    def add(self, seg: Segment) -> None:
        """Put ``seg`` in its place (after any segment with the same base offset)."""
        i = bisect_right(self._bases, seg.base_offset)
        self._bases.insert(i, seg.base_offset)
        self._segments.insert(i, seg)

    def remove_from(self, index: int) -> List[Segment]:
        """Take out the segments from position ``index`` on; returns them, oldest first."""
        gone = self._segments[index:]
        del self._segments[index:]
        del self._bases[index:]
        return gone

    def clear(self) -> List[Segment]:
        """Take out every segment; returns them, oldest first."""
        return self.remove_from(0)

    def replace_all(self, segments: Iterable[Segment]) -> None:
        """Hold exactly ``segments`` (put in base-offset order)."""
        del self._segments[:]
        del self._bases[:]
        for seg in segments:
            self.add(seg)


class LogOffsets:
    """The offsets of a partition's log: ``log_start_offset`` (the first offset a reader may
    read), ``log_end_offset`` (the offset the next append gets) and ``recovery_point``
    (offsets below it are flushed).  The loader fills them, the log updates them under its
    lock, the read model reads them."""

    __slots__ = ("log_start_offset", "log_end_offset", "recovery_point")

    def __init__(self, log_start_offset: int = 0, log_end_offset: int = 0,
                 recovery_point: int = 0) -> None:
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.recovery_point = recovery_point

    def __repr__(self) -> str:
        return (f"LogOffsets(log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, recovery_point={self.recovery_point})")
