"""The segments of one partition directory as the Spark source plans and reads them, through
the storage model (:mod:`kafkalog.storage.logdir`, ``index.py``): their offset-index entries
(where a task that skips damage resumes), listed with the directory's version
(:func:`kafkalog.storage.logdir.dir_version`: its identity and the generation marker a kafkalog
write's commit gives it), which tells a directory from any other that takes its name later."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

from ..errors import KafkaStorageError
from ..storage import fs as _fs
from ..storage import logdir as _logdir
from ..storage.logdir import DirVersion, dir_version


@dataclass
class SegmentRef:
    base_offset: int
    path: str
    size: int
    # its files as the storage model found them (index paths); not part of equality
    files: Optional["_logdir.SegmentFiles"] = field(default=None, compare=False, repr=False)
    # its offset index entries once read (they only grow: older entries stay valid)
    index_entries: Optional[List[Tuple[int, int]]] = field(
        default=None, compare=False, repr=False
    )
    # the file system holding it (None: the local one)
    fs: Optional["_fs.FileSystem"] = field(default=None, compare=False, repr=False)


def _seg_files(seg: "SegmentRef") -> "_logdir.SegmentFiles":
    if seg.files is not None:
        return seg.files
    return _logdir.SegmentFiles(seg.base_offset, seg.path, None, None, None)


def offset_index_entries(seg: "SegmentRef") -> List[Tuple[int, int]]:
    """``(offset, position)`` entries of the segment's offset index (read with
    :class:`kafkalog.storage.index.OffsetIndex`), up to the first non-increasing one (a damaged or
    missing index only costs seeks).  Read once per :class:`SegmentRef`."""
    if seg.index_entries is not None:
        return seg.index_entries
    sf = _seg_files(seg)
    if sf.offset_index is None:
        seg.index_entries = []
        return []
    try:
        idx = _logdir.offset_index(sf, seg.fs)
    except KafkaStorageError:
        return []
    out: List[Tuple[int, int]] = []
    try:
        last_off = seg.base_offset - 1
        last_pos = -1
        for off, pos in idx:
            if off <= last_off or pos <= last_pos or pos < 0:
                break
            out.append((off, pos))
            last_off, last_pos = off, pos
    finally:
        idx.close()
    seg.index_entries = out
    return out


class _Segments(list):
    """The segments of a partition directory, with the directory's version taken *before*
    they were listed (the read checks the directory is still that one)."""

    version: Optional[DirVersion] = None
    view: Any = None  # the PartitionListing they came from


def _refs_of_view(view: Any) -> List[SegmentRef]:
    out = _Segments()
    for sf in view.segments:
        try:
            size = view.fs.size(sf.log)
        except _fs.MissingFileError:
            continue  # deleted since listed (retention)
        out.append(SegmentRef(sf.base_offset, sf.log, size, sf,
                              fs=None if view.fs.is_local() else view.fs))
    return out


def segment_refs(directory: str, fs: "_fs.FileSystem" = _fs.LOCAL) -> List[SegmentRef]:
    # a store without directories to hold open has no version: nothing replaces a prefix
    # atomically there, and the writer never rewrites a partition in a store
    version = dir_version(directory) if fs.is_local() else None
    try:
        view = _logdir.scan_partition(directory, fs)
    except KafkaStorageError:
        return []
    out = _refs_of_view(view)
    out.version = version
    out.view = view
    return out
