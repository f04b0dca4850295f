"""What a read of :mod:`kafkalog.arrow` or :mod:`kafkalog.dataset` decodes: its source (a buffer,
a ``MemoryRecords``, a segment file, a partition directory, a log root, a glob of those, an open
``Log``, or a list) resolved into :class:`Source` s, one per buffer, file or partition, the
partitions picked by :class:`kafkalog.storage.selection.TopicSelection` (the Spark source's
topic rules).  Which directory is what is :func:`kafkalog.storage.logdir.locate`'s rule; this
module imports no pyarrow."""
from __future__ import annotations

import mmap
import os
from typing import Any, List, Optional

from .storage import fs as _fs
from .storage import selection as _selection
from .storage import store_fs as _store_fs
from .storage.selection import TopicSelection

__all__ = ["Source", "resolve", "Opened", "block_size", "is_log", "tp_of_dir"]


class Source:
    """One thing to decode: an in-memory buffer, a file (mapped when decoded), a partition
    directory (read through its :class:`~kafkalog.storage.log_view.LogView`) or a
    :class:`kafkalog.storage.log.Log` (read through its view).  ``listed``: found by listing a
    log root or matching a glob, not named by the caller."""

    __slots__ = ("buffer", "path", "topic", "partition", "log", "fs", "directory", "listed")

    def __init__(self, buffer=None, path=None, topic=None, partition=None, log=None, fs=None,
                 directory=None, listed=False):
        self.directory = directory  # a partition directory, read through its LogView
        self.buffer = buffer
        self.path = path
        self.topic = topic
        self.partition = partition
        self.log = log
        self.fs = fs  # kafkalog.storage.fs.FileSystem of path (None: the local one)
        self.listed = listed

    def __repr__(self) -> str:
        what = self.directory or self.path or ("a Log" if self.log is not None else "a buffer")
        return f"Source({what}, topic={self.topic!r}, partition={self.partition!r})"


def is_log(obj) -> bool:
    """Whether ``obj`` reads like a :class:`kafkalog.storage.log.Log`."""
    return all(
        hasattr(obj, a)
        for a in ("read", "log_end_offset", "log_start_offset", "collect_aborted_transactions")
    )


def tp_of_dir(directory: str):
    """``(topic, partition)`` of a ``<topic>-<partition>`` directory name, else ``(None, None)``."""
    from .storage.files import parse_partition_dir

    try:
        tp = parse_partition_dir(directory).topic_partition
        return tp.topic, tp.partition
    except ValueError:
        return None, None


def _readable_segments(view):
    """The segments of a :class:`~kafkalog.storage.logdir.PartitionListing`; a segment name that
    cannot be read (a FIFO, a directory...) raises: never skipped silently."""
    for ig in view.refused():
        if ig.name.endswith(".log"):
            raise _fs.not_regular_error(ig.path, ig.kind, f"cannot read partition {view.directory}")
    return view.segments


def _directory_sources(directory: str, fs=None, refuse_empty: bool = True,
                       selection: TopicSelection = _selection.DEFAULT,
                       listed: bool = False) -> List[Source]:
    """The partitions to read in a directory, by the rule every reader follows
    (:func:`kafkalog.storage.logdir.locate`): a partition directory, or a log root (a broker's
    ``log.dirs`` entry, whatever its name: ``kafka-logs-1`` is one too) whose live
    ``<topic>-<partition>`` directories that ``selection`` picks are read by topic then
    partition, each with its topic and partition.  Anything else raises
    :class:`~kafkalog.storage.logdir.NotALogError` naming the path (and, for a directory
    above log roots, the paths to give), never an empty table that would look like an empty
    log; so does a ``<topic>-<partition>`` directory holding nothing of a log.  With
    ``refuse_empty`` false a directory under which nothing is (an object-store key, not a
    prefix) gives ``[]``: the caller looks at what the path is."""
    from .storage.logdir import NotALogError, locate, scan_partition

    fs = fs or _fs.LOCAL
    try:
        loc = locate(directory, fs)
    except NotALogError as e:
        if refuse_empty or e.instead:
            raise
        return []
    if loc.kind == "partition":
        if not loc.holds_logs:
            if not refuse_empty:
                return []
            raise NotALogError(
                f"no Kafka log under {directory}: a directory named <topic>-<partition> that "
                "holds no Kafka log segments (<20-digit offset>.log) nor any other file of a "
                "partition; pass a segment file, a partition directory or a log root (a "
                "broker's log.dirs entry)", directory)
        t, p = tp_of_dir(directory)
        if not selection.selects(t, p, named=not listed):
            return []
        if _readable_segments(loc.view):
            return [Source(directory=directory, topic=t, partition=p, fs=fs, listed=listed)]
        return []  # the files of a partition without a segment: an empty log
    out: List[Source] = []
    for ref in loc.partitions:
        tp = ref.topic_partition
        if not selection.selects(tp.topic, tp.partition):
            continue  # not listed further: one request less per partition in a store
        if _readable_segments(scan_partition(ref.path, fs)):
            out.append(Source(directory=ref.path, topic=tp.topic, partition=tp.partition,
                              fs=fs, listed=True))
    return out


def _segment_name(path: str):
    from .storage.files import parse_segment_file_name

    return parse_segment_file_name(_fs.basename(path))


def _file_source(path: str, fs, selection: TopicSelection, listed: bool) -> List[Source]:
    t, p = tp_of_dir(_fs.parent(path) if fs is not None else
                     os.path.dirname(os.path.abspath(path)))
    if not selection.selects(t, p, named=not listed):
        return []
    return [Source(path=path, topic=t, partition=p, fs=fs, listed=listed)]


def _glob_sources(pattern: str, fs, selection: TopicSelection) -> List[Source]:
    """The sources a glob pattern names: each match read as a path given alone (a partition
    directory, a log root or a segment file), its partitions picked by ``selection`` as
    partitions found by listing are (internal topics left out unless asked for)."""
    out: List[Source] = []
    for path in _selection.expand_path(pattern, fs):
        if fs.is_local():
            if os.path.isdir(path):
                out.extend(_directory_sources(path, None, selection=selection, listed=True))
            else:
                out.extend(_file_source(path, None, selection, True))
            continue
        kind = fs.kind(path)
        if kind == _fs.DIRECTORY:
            out.extend(_directory_sources(path, fs, selection=selection, listed=True))
        elif kind == _fs.FILE:
            out.extend(_file_source(path, fs, selection, True))
        else:
            raise _fs.not_regular_error(path, kind, f"cannot read {path}")
    return out


def _is_glob(path: str, fs) -> bool:
    """A path with glob characters that does not exist as written (a directory may be named
    ``[backup]``: read as it is)."""
    return _selection.has_glob(path) and fs.kind(path) in (_fs.MISSING, _fs.DANGLING_LINK)


def resolve(source: Any, topic=None, partition=None, storage_options=None,
            selection: TopicSelection = _selection.DEFAULT) -> List[Source]:
    """The sources of ``source`` (see :mod:`kafkalog.arrow`), in reading order; ``topic`` and
    ``partition`` label the rows of the sources that have none (and replace the directory's
    own for the others: the caller sets them)."""
    from .records import MemoryRecords

    if isinstance(source, str) and _fs.is_uri(source):
        fs, path = _store_fs.resolve(source, storage_options)
        if fs.is_local():
            source = path
        else:
            if _segment_name(path) is None:  # list it directly: one request for a partition
                try:
                    found = _directory_sources(path, fs, refuse_empty=False,
                                               selection=selection)
                except _fs.MissingFileError:
                    found = None
                if found:
                    return found
            kind = fs.kind(path)
            if kind == _fs.DIRECTORY:
                return _directory_sources(path, fs, selection=selection)
            if kind in (_fs.MISSING, _fs.DANGLING_LINK) and _selection.has_glob(path):
                return _glob_sources(path, fs, selection)
            if kind != _fs.FILE:
                raise _fs.not_regular_error(path, kind, f"cannot read {path}")
            return _file_source(path, fs, selection, False)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            return _directory_sources(path, selection=selection)
        if _is_glob(path, _fs.LOCAL):
            return _glob_sources(path, _fs.LOCAL, selection)
        return _file_source(path, None, selection, False)
    if isinstance(source, MemoryRecords):
        return [Source(buffer=source.buffer())]
    if isinstance(source, (bytes, bytearray, memoryview, mmap.mmap)):
        return [Source(buffer=source)]
    if is_log(source):  # kafkalog.storage.log.Log: read through the log (sees unflushed appends)
        t, p = tp_of_dir(getattr(source, "dir", "") or "")
        return [Source(log=source, topic=t, partition=p)]
    try:
        memoryview(source)
    except TypeError:
        pass
    else:
        return [Source(buffer=source)]
    if isinstance(source, (list, tuple)):
        out: List[Source] = []
        for s in source:
            out.extend(resolve(s, topic, partition, storage_options, selection))
        return out
    raise TypeError(
        "source must be a buffer, a MemoryRecords, a segment file or partition directory path, "
        f"or a sequence of those; not {type(source).__name__}"
    )


class Opened:
    """Context manager giving a source's buffer (mmap for files; closed afterwards)."""

    def __init__(self, src: Source):
        self.src = src
        self._f = None

    def __enter__(self):
        if self.src.path is None:
            return self.src.buffer
        from .storage.logdir import open_file

        fs = self.src.fs
        if fs is not None and not fs.is_local():
            self._f = fs.open_read(self.src.path)
        else:
            self._f = open_file(self.src.path)  # regular files only; KafkaStorageError otherwise
        buf = self._f.map()
        if buf is None:  # a backend without local pages
            buf = self._f.read(0, self._f.size)
        return buf

    def __exit__(self, *exc):
        if self._f is not None:
            # a view may still be alive (e.g. in a traceback): then the GC closes the map
            self._f.close()
        return False


def block_size(storage_options: Optional[dict]) -> int:
    """The ranged-read size of a store (``storage_options["block_size"]``)."""
    size = (storage_options or {}).get("block_size")
    return _store_fs.DEFAULT_BLOCK_SIZE if size is None else int(size)
