"""A read-only segment of a log in an object store or HDFS (:class:`StoreSegment`, its bytes
read with ranged reads: :class:`StoreRecords`), the empty stand-in a read-only open puts where
a writable one would create a segment (:class:`EmptySegment`), and :func:`open_segment`, which
opens a listed segment read-only wherever it lies."""

from __future__ import annotations

import os
from typing import Optional

from ..errors import KafkaStorageError
from . import files as _files
from . import fs as _fs
from . import logdir as _logdir
from . import store_fs as _store_fs
from .file_records import FileRecords
from .index import STORE_INDEX_LIMIT, OffsetIndex, TimeIndex, read_store_index
from .segment import Segment
from .txn_index import TransactionIndex

__all__ = ["StoreSegment", "StoreRecords", "EmptySegment", "open_segment"]


class StoreRecords(FileRecords):
    """The bytes of a segment's ``.log`` in a store: ranged reads through ``file`` (a
    :class:`~kafkalog.storage.fs.ReadableFile`), closed with the records when ``owns_file``.
    Nothing is ever written."""

    def __init__(self, path: str, file, owns_file: bool) -> None:
        super().__init__(path, -1, file.size)
        self._file = file
        self._owns_file = owns_file

    def read_at(self, position: int, size: int) -> bytes:
        end = self.size
        if position + size > end:
            size = end - position
        if size <= 0:
            return b""
        return self._file.read(position, size)

    def read_into(self, position: int, buf: memoryview) -> int:
        data = self.read_at(position, len(buf))
        buf[:len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            if self._owns_file:
                self._file.close()
        finally:
            self._closed = True


class StoreSegment(Segment):
    """A read-only segment of a log in an object store or HDFS (a
    :class:`~kafkalog.storage.fs.FileSystem` without local pages).  It answers what a
    read-only :class:`Segment` answers, the same way: the ``.log`` is read with ranged reads
    through the store (:meth:`kafkalog.storage.fs.ReadableFile.read`), never downloaded whole;
    the indexes are read into memory when first used (their entries, not a preallocated zero
    tail: :func:`read_store_index`), or handed in already read (``index_data``: path ->
    ``(entries, size)`` of an offset or time index, the bytes of a transaction index).
    Nothing is ever written.

    ``listed``: the segment's files as the directory listing found them (a
    :class:`~kafkalog.storage.logdir.SegmentFiles`), so that a missing index costs no request;
    without it the store is asked.  ``file``: the ``.log`` already open (a
    :class:`~kafkalog.storage.fs.ReadableFile` of the store), read through and left open."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        fs: "_fs.FileSystem",
        listed=None,
        index_data: Optional[dict] = None,
        file: Optional["_fs.ReadableFile"] = None,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        clock=None,
    ) -> None:
        self._init_fields(directory, base_offset, index_interval_bytes, max_index_size,
                          roll_jitter_ms, "", True, clock)
        self._fs = fs
        log_path = _files.log_file(self.directory, base_offset)
        self._oi_path = _files.offset_index_file(self.directory, base_offset)
        self._ti_path = _files.time_index_file(self.directory, base_offset)
        self._txn_path = _files.transaction_index_file(self.directory, base_offset)
        # the caller's open .log (kept open for it: its ranges serve the caller's reads too),
        # else one opened here (regular files only; no request when listed)
        owns_file = file is None
        if file is None:
            file = fs.open_read(log_path)
        self._index_data = dict(index_data or {})
        self._init_state(StoreRecords(log_path, file, owns_file))
        if listed is not None:
            self.offset_index_existed = listed.offset_index is not None
            self.time_index_existed = listed.time_index is not None
            self._txn_existed = listed.txn_index is not None
        else:
            self.offset_index_existed = fs.kind(self._oi_path) == _fs.FILE
            self.time_index_existed = fs.kind(self._ti_path) == _fs.FILE
            self._txn_existed = fs.kind(self._txn_path) == _fs.FILE
        self.created_ms = self._clock()

    def _read_index(self, path: str, entry_size: Optional[int] = None):
        """The bytes of a transaction index, or ``(entries, size)`` of an offset or time
        index (:func:`read_store_index`)."""
        data = self._index_data.pop(path, None)
        if data is None:
            limit = max(self.max_index_size, STORE_INDEX_LIMIT)
            if entry_size is not None:
                return read_store_index(self._fs, path, entry_size, limit)
            data = _logdir.read_file(path, self._fs, limit=limit)
        return data

    def _load_index(self, cls, path: str, existed: bool):
        """``cls`` (OffsetIndex, TimeIndex) of this segment: in memory when missing, else read
        from the store as far as its entries go."""
        if self._memory_indexes or not existed:
            return cls(path, self.base_offset, self.max_index_size, in_memory=True)
        data, size = self._read_index(path, cls.ENTRY_SIZE)
        return cls.from_bytes(path, self.base_offset, data, self.max_index_size, size)

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = self._load_index(OffsetIndex, self._oi_path,
                                                  self.offset_index_existed)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = self._load_index(TimeIndex, self._ti_path,
                                                self.time_index_existed)
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        txi = self._txn_index
        if txi is None:
            if self._memory_indexes:
                txi = TransactionIndex(self.base_offset, self._txn_path, in_memory=True)
            else:
                data = self._read_index(self._txn_path) if self._txn_existed else b""
                txi = TransactionIndex.from_bytes(self.base_offset, self._txn_path, data)
            self._txn_index = txi
        return txi

    @property
    def last_modified(self) -> int:
        """The store's modification time of the ``.log`` (its upload time), in ms; the time
        the segment was opened where the store does not say."""
        ms = self._fs.modified_ms(self.log_path)
        return self.created_ms if ms is None else ms

    def sanity_check(self, time_index_file_existed: Optional[bool] = None) -> None:
        if not self.offset_index_existed:
            raise FileNotFoundError(f"Offset index file {self._oi_path} does not exist")
        self.txn_index.sanity_check()

    def close(self) -> None:
        self.close_handlers()

    def close_handlers(self) -> None:
        if self._closed:
            return
        try:
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close_handler()
            if self._txn_index is not None:
                self._txn_index.close()
        finally:
            self._index_data = {}
            self._file_records.close()
            self._closed = True

    def _refuse(self, *_a, **_k):
        raise ValueError(f"segment {self.log_path} is in a store and read-only")

    delete = change_file_suffixes = _refuse


class _NoFile(_fs.ReadableFile):
    """The ``.log`` of an :class:`EmptySegment`: no bytes, nothing opened."""

    size = 0

    def read(self, position: int, size: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


class EmptySegment(StoreSegment):
    """A read-only segment that holds no batch and has no file: where a writable open of a
    log creates an empty segment, a read-only open (which creates nothing) stands this in
    its place, so both answer the same offsets.  That happens when every segment lies below
    the root's checkpointed log start offset: Kafka, like the writable open, then drops them
    and starts an empty log there.  Nothing is read or written; its indexes are empty."""

    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int = 4096,
                 max_index_size: int = 10 * 1024 * 1024, clock=None) -> None:
        log = _files.log_file(os.fspath(directory), base_offset)
        # no store: with its file and listing given (no index), nothing asks one for bytes
        super().__init__(directory, base_offset, fs=None,  # type: ignore[arg-type]
                         listed=_logdir.SegmentFiles(base_offset, log, None, None, None),
                         file=_NoFile(),
                         index_interval_bytes=index_interval_bytes,
                         max_index_size=max_index_size, clock=clock)

    @property
    def last_modified(self) -> int:
        return self.created_ms


def open_segment(seg: "_logdir.SegmentFiles", file: Optional[_fs.ReadableFile] = None,
                 fs: Optional[_fs.FileSystem] = None):
    """The segment read-only (:class:`Segment`: ``iter_headers()`` walks the batch headers
    without decoding, ``read``/``iter_batches`` read).  Release it with ``close_handlers()``.
    ``file``: its ``.log`` already open (e.g. relative to a directory held open); the segment
    reads a duplicate of it and ``file`` stays the caller's.  A segment in a store (a URI, or
    ``fs`` not local) is read with ranged reads through ``file`` (or a file opened here)."""
    fs, log = _store_fs.for_path(seg.log, fs)
    if not fs.is_local():
        return StoreSegment(_fs.parent(log), seg.base_offset, fs=fs, listed=seg, file=file)
    fd = None
    if file is not None:
        try:
            fd = os.dup(file.fileno())  # type: ignore[attr-defined]
        except OSError as e:
            raise KafkaStorageError.from_os_error(e, "opening for reading", path=file.path) from e
    return Segment.open(os.path.dirname(seg.log), seg.base_offset, read_only=True, fd=fd)
