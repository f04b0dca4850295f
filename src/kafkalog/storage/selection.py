"""What a read selects of the logs under its paths: which partitions (the topic rules of the
Spark source's ``subscribe``/``subscribePattern``/``assign`` and ``includeInternalTopics``), the
paths a glob names, and which offset ranges of a partition a read with offset and timestamp
bounds has to fetch.  The Spark source (``kafkalog.spark``), ``kafkalog.arrow`` and
``kafkalog.dataset`` ask this module; the offsets, indexes and timestamps themselves are the read
model's (:class:`~kafkalog.storage.log_view.LogView`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import KafkaStorageError
from . import files as _files
from . import fs as _fs

__all__ = [
    "GLOB_CHARS",
    "is_internal",
    "has_glob",
    "expand_path",
    "TopicSelection",
    "fetch_ranges",
    "segment_may_hold",
]

#: The characters that make a path a glob pattern (``fnmatch``'s, as Spark's paths).
GLOB_CHARS = "*?["

# Offsets and timestamps are signed 64-bit values
_MIN = -(2**63)
_MAX = 2**63 - 1


_INTERNAL = frozenset(_files.INTERNAL_TOPICS)


def is_internal(topic: Optional[str]) -> bool:
    """Whether ``topic`` is one of Kafka's internal topics
    (:data:`kafkalog.storage.files.INTERNAL_TOPICS`: ``__consumer_offsets``,
    ``__transaction_state``, ``__share_group_state`` and the KRaft metadata log
    ``__cluster_metadata``).  A user topic whose name merely starts with ``__`` (a connector's
    heartbeat topic, say) is not internal: Kafka's pattern subscriptions read it, and so does a
    root read here."""
    return topic in _INTERNAL


def has_glob(path: str) -> bool:
    """Whether ``path`` is a glob pattern."""
    return any(c in path for c in GLOB_CHARS)


def expand_path(path: str, fs: "_fs.FileSystem" = _fs.LOCAL) -> List[str]:
    """The paths ``path`` names: the matches of a glob pattern (FileNotFoundError when none),
    else ``path`` itself once it exists (FileNotFoundError, or in a store a KafkaStorageError
    saying what to give, when it does not)."""
    if has_glob(path):
        found = fs.glob(path)
        if not found:
            raise FileNotFoundError(f"path {path!r} matches nothing")
        return found
    if fs.kind(path) in (_fs.MISSING, _fs.DANGLING_LINK):
        if not fs.is_local():
            raise KafkaStorageError(
                f"cannot read {path}: no such object, directory or prefix in the store; give "
                "a log root (a broker's log.dirs entry), a <topic>-<partition> directory or a "
                "segment file", path=path, operation="listing")
        raise FileNotFoundError(f"path {path!r} does not exist")
    return [path]


def _names(value: Union[str, Iterable[str]], what: str) -> FrozenSet[str]:
    if isinstance(value, str):
        names = [t.strip() for t in value.split(",")]
    else:
        names = list(value)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise ValueError(f"{what} must be topic names (a list or a comma-separated str), "
                         f"not {value!r}")
    return frozenset(names)


def _partition_set(value: Any, what: str) -> FrozenSet[int]:
    try:
        out = frozenset(value)
    except TypeError:
        raise TypeError(f"{what} must be an iterable of partition numbers, not "
                        f"{type(value).__name__}") from None
    for p in out:
        if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < 2**31:
            raise ValueError(f"{what} must hold partition numbers (ints >= 0), not {p!r}")
    return out


@dataclass(frozen=True)
class TopicSelection:
    """The partitions a read selects, by the Spark source's rules
    (``kafkalog.spark._discovery``): ``topics`` (its ``subscribe``: exactly these topics, internal
    ones included when named), ``pattern`` (its ``subscribePattern``: a regular expression found
    anywhere in the topic name, as spark-sql-kafka filters the topic list), ``assign`` (its
    ``assign``: ``{topic: partitions}``), ``partitions`` (kafkalog's own: only these partition
    numbers, with any of the others) and ``include_internal`` (its ``includeInternalTopics``:
    internal topics ``__*`` are left out unless set or named).  A partition whose topic is not
    known (a directory not named ``<topic>-<partition>``) is kept unless topics, a pattern or
    partitions are asked for."""

    topics: Optional[FrozenSet[str]] = None
    pattern: Optional[str] = None
    assign: Optional[Mapping[str, FrozenSet[int]]] = None
    partitions: Optional[FrozenSet[int]] = None
    include_internal: bool = False

    @classmethod
    def parse(cls, topics: Any = None, pattern: Any = None, partitions: Any = None,
              include_internal: bool = False) -> "TopicSelection":
        """From the arguments of :func:`kafkalog.arrow.to_arrow` and
        :func:`kafkalog.dataset.dataset`: ``topics`` a list of names (or a comma-separated
        str), ``pattern`` a regular expression (str or compiled), ``partitions`` an iterable of
        partition numbers or a mapping ``{topic: partitions}`` (Spark's ``assign``: then
        neither ``topics`` nor ``pattern``)."""
        if topics is not None and pattern is not None:
            raise ValueError("give topics or topic_pattern, not both (as Spark's subscribe and "
                             "subscribePattern)")
        t = None if topics is None else _names(topics, "topics")
        pat = None
        if pattern is not None:
            if isinstance(pattern, re.Pattern):
                pat = pattern.pattern
            elif isinstance(pattern, str):
                pat = pattern
            else:
                raise TypeError(f"topic_pattern must be a str or a compiled regular expression, "
                                f"not {type(pattern).__name__}")
            try:
                re.compile(pat)
            except re.error as e:
                raise ValueError(f"invalid topic_pattern {pat!r}: {e}") from None
        assign = parts = None
        if isinstance(partitions, Mapping):
            if t is not None or pat is not None:
                raise ValueError("partitions as {topic: partitions} (Spark's assign) names the "
                                 "topics itself: give no topics nor topic_pattern with it")
            assign = {str(k): _partition_set(v, f"partitions[{k!r}]")
                      for k, v in partitions.items()}
            if not assign:
                raise ValueError("partitions={} selects nothing")
        elif partitions is not None:
            parts = _partition_set(partitions, "partitions")
        if not isinstance(include_internal, bool):
            raise TypeError("include_internal_topics must be a bool")
        return cls(t, pat, assign, parts, include_internal)

    @property
    def restricts(self) -> bool:
        """Whether anything but the internal-topics rule is asked for."""
        return not (self.topics is None and self.pattern is None and self.assign is None
                    and self.partitions is None)

    def selects(self, topic: Optional[str], partition: Optional[int],
                named: bool = False) -> bool:
        """Whether the partition ``topic``-``partition`` is read.  ``named``: its directory (or
        segment) was given by the caller rather than found by listing a root or matching a
        glob: an internal topic is then read as asked."""
        if self.partitions is not None and partition not in self.partitions:
            return False
        if self.topics is not None:
            return topic in self.topics
        if self.assign is not None:
            return topic is not None and topic in self.assign \
                and partition in self.assign[topic]
        if topic is not None and is_internal(topic) and not (self.include_internal or named):
            return False
        if self.pattern is not None:
            # anywhere in the name, as spark-sql-kafka's SubscribePatternStrategy filters the
            # topic list (Scala Regex.findFirstIn; tests/kafka/test_spark_connector.py)
            return topic is not None and re.search(self.pattern, topic) is not None
        return True


#: The selection of a read that asks for nothing: every partition but the internal topics'.
DEFAULT = TopicSelection()


def segment_may_hold(view: Any, base_offset: int, min_timestamp: int) -> bool:
    """Whether the segment at ``base_offset`` may hold a record with a timestamp >=
    ``min_timestamp``: False when its largest timestamp is known and smaller (the Spark
    source's segment pruning; :meth:`LogView.max_timestamp_of`)."""
    mx = view.max_timestamp_of(base_offset)
    return not (0 <= mx < min_timestamp)


def _clamp(ranges: Sequence[Tuple[Optional[int], Optional[int]]], lo: int, hi: int
           ) -> List[Tuple[int, int]]:
    out: List[Tuple[int, int]] = []
    for a, b in ranges:
        a = lo if a is None else max(a, lo)
        b = hi if b is None else min(b, hi)
        if a < b:
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
    return out


def _cut(ranges: List[Tuple[int, int]], lo: int, hi: int) -> List[Tuple[int, int]]:
    """``ranges`` without ``[lo, hi)``."""
    out: List[Tuple[int, int]] = []
    for a, b in ranges:
        if b <= lo or a >= hi:
            out.append((a, b))
            continue
        if a < lo:
            out.append((a, lo))
        if b > hi:
            out.append((hi, b))
    return out


def fetch_ranges(
    view: Any,
    wanted: Optional[Sequence[Tuple[Optional[int], Optional[int]]]] = None,
    *,
    read_committed: bool = False,
    min_timestamp: Optional[int] = None,
) -> List[Tuple[int, int]]:
    """The offset ranges ``[lo, hi)`` of the partition ``view`` (a
    :class:`~kafkalog.storage.log_view.LogView`) that a read of the offsets ``wanted`` fetches,
    in offset order: ``wanted`` (sorted ``(lo, hi)`` pairs, ``None`` for an open end; default:
    every offset) clamped to the log start and end offsets (with ``read_committed``, the last
    stable offset); with ``min_timestamp`` (ms; rows with smaller timestamps are not wanted),
    started at the first offset whose record may have that timestamp (the time index:
    :meth:`LogView.offset_for_timestamp` of ``min_timestamp - 1``, so that no record at or
    after the bound is left before it) and without the segments whose largest timestamp is
    smaller.  Every record the caller wants lies in a range; a range may hold records it does
    not want (the caller filters the rows)."""
    first = view.log_start_offset
    last = view.last_stable_offset if read_committed else view.log_end_offset
    ranges = _clamp([(None, None)] if wanted is None else wanted, first, last)
    if not ranges or min_timestamp is None or min_timestamp <= 0:
        return ranges
    if min_timestamp > _MAX:
        return []
    found = view.offset_for_timestamp(min_timestamp - 1)
    segs = view.segments()
    if found is not None and found.offset > ranges[0][0]:
        # No record before it has a timestamp >= min_timestamp - 1 - as far as the lookup
        # knows: it passes over a segment whose largest timestamp is below the bound, and for a
        # segment without time-index entries that is its file's mtime (Kafka's
        # largestTimestamp), which says nothing of its records (a log from before 0.10.1, a
        # deleted .timeindex, a copied file).  So the cut stops at the first segment wholly
        # below the found offset that may hold a record at or after the bound by its records
        # (segment_may_hold walks the headers of a segment whose index has no entries).
        cut = found.offset
        for i, (base, _path, _size) in enumerate(segs):
            end = segs[i + 1][0] if i + 1 < len(segs) else _MAX
            if end > found.offset:
                break  # the found offset's own segment: its search used its records
            if end <= ranges[0][0]:
                continue
            if segment_may_hold(view, base, min_timestamp):
                cut = base
                break
        ranges = _cut(ranges, _MIN, cut)
    for i, (base, _path, _size) in enumerate(segs):
        if not ranges:
            break
        end = segs[i + 1][0] if i + 1 < len(segs) else _MAX
        if end <= ranges[0][0]:
            continue
        if base >= ranges[-1][1]:
            break
        if not any(a < end and b > base for a, b in ranges):
            continue
        if not segment_may_hold(view, base, min_timestamp):
            ranges = _cut(ranges, base, end)
    return ranges
