"""Discovery: every partition log under the paths given to the Spark source (Kafka's
``LogManager`` layout), that the topic options select.

Layout understood: every path is a log-dir root holding ``<topic>-<partition>`` directories,
one such partition directory, a directory of segments whose name is not
``<topic>-<partition>`` (topic and partition are then null), or one ``<20 digits>.log``
segment file.  Which of these a directory is follows the rule every reader of kafkalog follows
(:func:`kafkalog.storage.logdir.locate`): a directory one level above log roots
(``backups/broker-1/orders-0`` given as ``backups``) is refused with a ``NoKafkaLogError``
naming the roots to give instead (a glob such as ``backups/*`` reads them all, with
``replicaPolicy`` choosing between copies of a partition), and so is a directory under which
nothing looks like a Kafka log.  ``-delete``, ``-future`` and ``-stray`` directories are skipped,
and so are internal topics (``__*``) unless ``includeInternalTopics`` is set or a
``subscribe``/``assign`` option names them."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..errors import KafkaStorageError
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import logdir as _logdir
from ..storage.loader import CheckpointMemo
from ..storage.log import open_view
from ..storage.log_view import LogView as _LogView
from ..storage.logdir import DirVersion
from ..storage.selection import TopicSelection
from ..storage.selection import expand_path as _expand
from ._errors import NoKafkaLogError, OptionError, warn
from ._options import ReadOptions
from ._segments import SegmentRef, segment_refs
from ._store_clients import store_of


@dataclass
class DiscoveredPartition:
    """One partition directory (or bare segment list) found under the paths.  Its offsets
    (log start, log end, last stable offset) and timestamp lookups are the storage read
    model's (:class:`kafkalog.storage.log_view.LogView` over the directory), asked once and
    kept."""

    topic: Optional[str]
    partition: Optional[int]
    directory: str
    segments: List[SegmentRef]
    version: Optional[DirVersion] = None
    fs: Optional["_fs.FileSystem"] = field(default=None, compare=False, repr=False)
    _offsets: Optional[Tuple[int, int]] = field(default=None, compare=False, repr=False)
    _lso: Optional[int] = field(default=None, compare=False, repr=False)
    _tail: Optional[Tuple[int, int]] = field(default=None, compare=False, repr=False)
    _view: Optional[_LogView] = field(default=None, compare=False, repr=False)
    # the root checkpoints of the plan that found it, read once for all its partitions
    checkpoints: Optional[CheckpointMemo] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.version is None:
            self.version = getattr(self.segments, "version", None)

    @property
    def key(self) -> Tuple[Optional[str], Optional[int]]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        if self.topic is None:
            return self.directory
        return f"{self.topic}-{self.partition}"

    def open_view(self) -> _LogView:
        """The storage read model of the directory (close it after use)."""
        # the listing the segments came from (this plan's): one listing per partition and plan
        listing = getattr(self.segments, "view", None)
        # the planner reads little of each .log: opened at the first read (defer_opens); a
        # segment gone by then is an ENOENT KafkaStorageError, which the planner plans again on
        return open_view(self.directory, self.fs, listing=listing, defer_opens=True,
                         checkpoints=self.checkpoints)

    @contextlib.contextmanager
    def viewing(self) -> Iterator[None]:
        """Keep one view of the directory open meanwhile: the offsets and timestamp lookups
        asked then share it (one open, one recovery walk, in a store one set of fetches)."""
        if self._view is not None or not self.segments:
            yield
            return
        self._view = self.open_view()
        try:
            yield
        finally:
            view, self._view = self._view, None
            view.close()

    def _bounds(self) -> Tuple[int, int]:
        """(log start, log end), and what the planner needs of the log's tail: the base
        offset and byte size of its last segment as the view holds it (a torn tail cut)."""
        if self._offsets is None:
            if not self.segments:
                # no segment (storage opens no log without one): an empty log, no offsets
                self._offsets = (0, 0)
                self._lso = 0
                return self._offsets
            with self.viewing():
                v = self._view
                self._offsets = (v.log_start_offset, v.log_end_offset)
                segs = v.segments()
                self._tail = segs[-1][0], segs[-1][2]
        return self._offsets

    def earliest(self) -> int:
        """The log start offset (:attr:`LogView.log_start_offset`)."""
        return self._bounds()[0]

    def latest(self, read_committed: bool = False) -> int:
        """The log end offset; with ``read_committed``, the last stable offset (the end a
        read_committed consumer sees)."""
        return self.last_stable() if read_committed else self._bounds()[1]

    def last_stable(self) -> int:
        """The last stable offset (:attr:`LogView.last_stable_offset`): asked only when needed
        (it rebuilds the producer state of the partition)."""
        if self._lso is None:
            self._bounds()
            if self._lso is None:
                with self.viewing():
                    self._lso = self._view.last_stable_offset
        return self._lso

    def reads_whole_tail(self, seg: SegmentRef, end: int) -> bool:
        """Whether a read up to ``end`` needs all of ``seg``'s file: ``seg`` is the log's last
        segment, ``end`` is at the log end, and the file holds exactly the log's bytes."""
        start, leo = self._bounds()
        tail = self._tail
        return tail is not None and end >= leo and tail == (seg.base_offset, seg.size)


_REPORTED: set = set()  # ignored names already warned about (once per process)


def _report_ignored(view: Any) -> None:
    """Report the names of a partition directory (a PartitionListing; None: nothing) that the
    storage model did not use, as the CLI's ``verify`` reports them: a name of the log's
    grammar that is not a regular file (never opened, never waited on), or one that is almost
    a log file name.  Other unknown names are left alone, as Kafka does."""
    if view is None:
        return
    for ig in view.ignored:
        if ig.kind != _fs.FILE and ig.kind != _fs.MISSING:
            msg = f"{ig.path}: {ig.reason}: not read"
        elif ig.reason != "not a Kafka log file name":
            msg = f"{ig.path}: ignored: {ig.reason}"
        else:
            continue
        if msg not in _REPORTED:
            _REPORTED.add(msg)
            warn(msg)


def _parse_tp_dir(name: str) -> Optional[Tuple[str, int]]:
    try:
        pd = _files.parse_partition_dir(name)
    except ValueError:
        return None
    if pd.kind:
        return None  # -delete / -future / -stray
    return pd.topic_partition.topic, pd.topic_partition.partition


def discover(opts: ReadOptions) -> List[DiscoveredPartition]:
    """Every partition log under ``opts.paths`` that the topic options select, sorted by topic
    and partition."""
    found: List[DiscoveredPartition] = []
    # a new plan: nothing the stores' clients remember from an earlier plan is trusted (a
    # long-lived planner; kafkalog.storage.fs.FileSystem.refresh)
    for fs in {id(f): f for f in (store_of(raw, opts.storage_options)
                                  for raw in opts.paths)}.values():
        fs.refresh()
    for raw in opts.paths:
        fs = store_of(raw, opts.storage_options)
        _fs_arg = None if fs.is_local() else fs
        if not fs.is_local():
            raw = raw.rstrip("/")
        for path in _expand(raw, fs):
            if fs.is_local():
                path = os.path.abspath(path)
            kind = fs.kind(path)
            if kind != _fs.DIRECTORY:
                sf = _files.parse_segment_file_name(_fs.basename(path))
                if kind != _fs.FILE or sf is None or sf.kind != ".log" or sf.suffix:
                    raise OptionError(
                        f"{path} is neither a directory nor a <20 digits>.log segment file"
                        + ("" if kind == _fs.FILE else f" (it is a {kind})")
                    )
                d = _fs.parent(path)
                tp = _parse_tp_dir(_fs.basename(d))
                files = None
                try:
                    files = next(
                        (s for s in _logdir.scan_partition(d, fs).segments if s.log == path),
                        None,
                    )
                except KafkaStorageError:
                    pass
                seg = SegmentRef(sf.base_offset, path, fs.size(path), files,
                                 fs=None if fs.is_local() else fs)
                found.append(
                    DiscoveredPartition(tp[0] if tp else None, tp[1] if tp else None, d, [seg],
                                      fs=_fs_arg)
                )
                continue
            # a partition directory or a log root, by the rule every reader follows
            # (storage.logdir.locate); anything else is refused, naming the path
            try:
                loc = _logdir.locate(path, fs)
            except _logdir.NotALogError as e:
                if e.instead:  # the logs are one level down: which to read is the caller's
                    raise NoKafkaLogError(e.message) from None
                _no_kafka_log(path, fs, opts)  # a stream may wait on an empty directory
                continue
            if loc.kind == "partition":
                tp = _parse_tp_dir(_fs.basename(path))
                segs = segment_refs(path, fs)
                view = getattr(segs, "view", None)
                if not loc.holds_logs:
                    _no_kafka_log(path, fs, opts)
                _report_ignored(view)
                found.append(DiscoveredPartition(tp[0] if tp else None, tp[1] if tp else None,
                                               path, segs, fs=_fs_arg))
                continue
            for ref in loc.partitions:  # a log-dir root
                tp = (ref.topic_partition.topic, ref.topic_partition.partition)
                psegs = segment_refs(ref.path, fs)
                _report_ignored(getattr(psegs, "view", None))
                found.append(DiscoveredPartition(tp[0], tp[1], ref.path, psegs, fs=_fs_arg))
    selection = _selection(opts)
    found = [tp for tp in found if selection.selects(tp.topic, tp.partition)]
    memo = CheckpointMemo()  # one plan: each root checkpoint read once
    for tp in found:
        tp.checkpoints = memo
    return _dedupe(found, opts.replica_policy)


_holds_log_files = _logdir.holds_log_files


def _no_kafka_log(path: str, fs: "_fs.FileSystem", opts: ReadOptions) -> None:
    """Refuse a path under which nothing looks like a Kafka log, as a missing path is refused
    (a stream may start on an empty directory, a mirror that is not synced yet)."""
    if opts.streaming:
        try:
            if not fs.list_dir(path):
                return
        except KafkaStorageError:
            pass
    raise NoKafkaLogError(
        f"no Kafka log under {path}: it holds no <20 digits>.log segment, no "
        "<topic>-<partition> directory with log files and no log-dir checkpoint; give a "
        "log-dir root (a broker's log.dirs entry), a <topic>-<partition> directory or a "
        "segment file"
    )


def _selection(opts: ReadOptions) -> TopicSelection:
    """The topic options as the storage rule takes them (kafkalog.storage.selection)."""
    return TopicSelection(
        topics=None if opts.subscribe is None else frozenset(opts.subscribe),
        pattern=opts.subscribe_pattern, assign=opts.assign,
        include_internal=opts.include_internal_topics)


def _real(path: str) -> str:
    return path if _fs.is_uri(path) else os.path.realpath(path)


def _dedupe(found: List[DiscoveredPartition], policy: str) -> List[DiscoveredPartition]:
    by_key: Dict[Any, List[DiscoveredPartition]] = {}
    order = []
    for tp in found:
        k = tp.key if tp.topic is not None else ("\0dir", tp.directory)
        if k not in by_key:
            order.append(k)
            by_key[k] = []
        if all(
            _real(x.directory) != _real(tp.directory)
            or x.segments != tp.segments
            for x in by_key[k]
        ):
            by_key[k].append(tp)
    out = []
    for k in order:
        cands = by_key[k]
        if len(cands) > 1:
            if policy == "error":
                raise OptionError(
                    f"partition {cands[0].name} is present under several paths "
                    f"({', '.join(c.directory for c in cands)}): set option replicaPolicy to "
                    "'first' or 'longest' to pick one"
                )
            if policy == "longest":
                cands = sorted(cands, key=lambda c: (-(c.latest() - c.earliest()), -c.latest()))
        out.append(cands[0])
    out.sort(
        key=lambda t: (
            t.topic is None,
            t.topic or "",
            t.partition if t.partition is not None else -1,
            t.directory,
        )
    )
    return out
