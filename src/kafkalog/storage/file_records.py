"""The bytes of one segment's ``.log`` file (Kafka's ``FileRecords``, with the header walk of
``FileLogInputStream``): the descriptor, the positioned reads and writes, the write buffer,
truncation, and the walks over entry headers and batches.  A
:class:`~kafkalog.storage.segment.Segment` has one; it knows the bytes, not the indexes.

Appended bytes are collected in a small in-process write buffer (``WRITE_BUFFER_BYTES``) and
written to the file when it fills, before any read of its bytes, and on flush/trim/close; fewer
system calls make appending pre-built batches faster than one ``write()`` per batch.  Buffered
bytes are lost if the process dies, exactly like bytes a broker wrote to the page cache are
lost if the machine dies: only :meth:`FileRecords.flush` (fsync) makes data durable, and
recovery truncates whatever torn tail a crash leaves.

Reads return copies (``os.pread``), never views of a mapping, so a segment can be truncated or
deleted while callers still hold what they read.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from typing import Any, Iterator, NamedTuple, Optional, Tuple

from .._format import (
    ENTRY_HEADER,
    V2_HEADER_TO_MAX_TIMESTAMP,
)
from .._format import (
    HEADER_SIZE_UP_TO_MAGIC as _HEADER_SIZE_UP_TO_MAGIC,
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
from ..errors import CorruptRecordError, KafkaLogError, KafkaStorageError, LogClosedError
from ..records import MemoryRecords
from . import files as _files
from . import fs as _fs
from .framing import IN_FLIGHT_SIZE_BYTE

__all__ = [
    "FileRecords",
    "BatchHeader",
    "LogOffsetPosition",
    "TimestampAndOffset",
    "WRITE_BUFFER_BYTES",
    "SCAN_CHUNK_BYTES",
]

WRITE_BUFFER_BYTES = 512 * 1024
# Bytes read at a time when walking a segment (recovery, producer-state replay, verification).
SCAN_CHUNK_BYTES = 8 * 1024 * 1024
_FIRST_SCAN_CHUNK_BYTES = 32 * 1024
# Bytes read at a time when walking batch headers from an index position.
_HEADER_CHUNK_BYTES = 16 * 1024

_V2_PEEK = 43  # through maxTimestamp
_V1_PEEK = 26  # through the v1 timestamp
_V2_PID_PEEK = 51  # through producerId
_ENTRY = ENTRY_HEADER
_V2_PEEK_STRUCT = V2_HEADER_TO_MAX_TIMESTAMP  # ... through maxTimestamp
_Q = struct.Struct(">q")
_I = struct.Struct(">i")


class LogOffsetPosition(NamedTuple):
    """Where a batch is: its (base) offset, byte position and size (Kafka's LogOffsetPosition)."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: record ``timestamp``, its ``offset`` and the batch's leader epoch
    (``None`` when unknown)."""

    timestamp: int
    offset: int
    leader_epoch: Optional[int]


class BatchHeader(NamedTuple):
    """The facts a header walk yields without building a batch object."""

    position: int
    size: int
    magic: int
    base_offset: int  # for v0/v1 the entry offset (the last offset of a wrapper)
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int
    attributes: int = 0  # v2: the batch attributes; v0/v1: the wrapper's
    producer_id: int = -1  # v2 only


class FileRecords:
    """The ``.log`` file at ``path``: ``size`` bytes of entries (buffered ones included), the
    first of them written to the file.  Open one with :meth:`open` (or :meth:`from_listing`,
    read-only, opened at its first read).

    Main operations: :meth:`append` (through the write buffer), :meth:`read_at` /
    :meth:`read_into`, :meth:`iter_headers` / :meth:`iter_batches`,
    :meth:`search_for_offset_with_size`, :meth:`search_for_timestamp`, :meth:`truncate_to`,
    :meth:`flush`, :meth:`close`.
    """

    # the descriptor: opened on first use for a file opened from a listing
    _fdv = -1
    _lazy_fd = False
    _listed_st: Optional[Tuple[int, int]] = None  # (device, inode) of a listed file
    _wbuf: Optional[bytearray] = None
    _closed = False
    #: whether :meth:`open` created the file
    created = False

    def __init__(self, path: str, fd: int, size: int, unsynced: bool = False) -> None:
        self.path = path
        self._fdv = fd
        self._file_size = size  # bytes in the file
        #: bytes of entries, the buffered ones included
        self.size = size
        self._unsynced = unsynced

    @classmethod
    def open(cls, path: str, *, read_only: bool = False, fd: Optional[int] = None,
             preallocate: bool = False, init_file_size: int = 0) -> "FileRecords":
        """Open (or, unless ``read_only``, create) the file at ``path``; ``fd``: the file,
        already opened by the caller (read-only: a regular file), now the records'.  A new file
        is preallocated to ``init_file_size`` bytes when ``preallocate``."""
        exists = os.path.exists(path)
        if read_only and fd is not None:
            pass
        elif read_only:
            fd = _fs.open_local_fd(path)  # regular files only
        else:
            # never through a link planted in the directory that leads out of it
            fd = _files.open_for_write(path, os.O_RDWR | os.O_CREAT)
        try:
            if not exists and preallocate and init_file_size > 0:
                os.ftruncate(fd, init_file_size)
                size = 0
            else:
                size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        records = cls(path, fd, size, unsynced=not exists)
        records.created = not exists
        return records

    @classmethod
    def from_listing(cls, path: str) -> "FileRecords":
        """The file read-only as a directory listing found it: one ``stat`` (its size and kind),
        no descriptor until the first read (a file replaced by a non-regular one is still
        refused when opened, and one replaced by another file is refused at that first read)."""
        try:
            st = os.stat(path)
            regular = stat.S_ISREG(st.st_mode)
        except OSError:
            regular = False
        if regular:
            fd, lazy = -1, True
        else:
            # opened now, as an unlisted segment is: the error names what is there (a file
            # that is regular again by now is simply held open)
            fd = _fs.open_local_fd(path)
            try:
                st = os.fstat(fd)
            except OSError:  # pragma: no cover
                os.close(fd)
                raise
            lazy = False
        records = cls(path, fd, st.st_size)
        records._lazy_fd = lazy
        records._listed_st = (st.st_dev, st.st_ino)
        return records

    @property
    def _fd(self) -> int:
        fd = self._fdv
        if fd < 0 and self._lazy_fd:
            self._check_open()
            fd = _fs.open_local_fd(self.path)  # regular files only
            try:
                st = os.fstat(fd)
            except OSError:  # pragma: no cover
                os.close(fd)
                raise
            if (st.st_dev, st.st_ino) != self._listed_st:
                os.close(fd)
                raise KafkaStorageError(
                    f"segment {self.path} was replaced after its log was opened: open the "
                    "log again", path=self.path, errno=errno.ENOENT,
                    operation="opening a segment")
            self._fdv, self._lazy_fd = fd, False
        return fd

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"segment {self.path} is closed", path=self.path)

    def close(self) -> None:
        """Close the file (buffered bytes not yet written are dropped: :meth:`drain` first)."""
        self._wbuf = None
        fd, self._fdv, self._lazy_fd = self._fdv, -1, False
        if fd >= 0:
            os.close(fd)
        self._closed = True

    def rename_to(self, path: str) -> None:
        """Rename the file to ``path`` (Kafka's ``renameTo``)."""
        os.replace(self.path, path)
        self.path = path

    # -- writes ------------------------------------------------------------------------------------
    def discard_buffered(self) -> None:
        """Forget the appended bytes not yet written to the file (for a segment leaving the
        log after an error: closing it then writes nothing more)."""
        self.size = self._file_size

    def drain(self) -> None:
        """Write the buffered bytes to the file."""
        n = self.size - self._file_size
        if not n:
            return
        with memoryview(self._wbuf) as mv:  # type: ignore[arg-type]
            self._pwrite_all(mv[:n], self._file_size)
        self._file_size = self.size

    def release_buffer(self) -> None:
        """Write the buffered bytes and let the write buffer go (a segment no longer active)."""
        self.drain()
        self._wbuf = None

    def _pwrite_all(self, data, position: int) -> None:
        """Write all of ``data`` at ``position`` (short writes are continued); an I/O error
        raises KafkaStorageError naming the file and the position that failed."""
        self._unsynced = True
        view = data if isinstance(data, memoryview) else memoryview(data)
        fd = self._fd
        while view:
            try:
                written = os.pwrite(fd, view, position)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "writing a segment", path=self.path, position=position
                )
            if written <= 0:  # pragma: no cover - a full disk raises instead
                raise KafkaStorageError(
                    f"I/O error while writing a segment: the system wrote nothing of "
                    f"{len(view)} bytes",
                    position,
                    path=self.path,
                    errno=errno.EIO,
                    operation="writing a segment",
                )
            position += written
            view = view[written:]

    def _cut_torn_tail(self) -> None:
        """After a failed write: cut whatever part of it reached the file past the written
        size (best effort; recovery cuts a torn tail that stays)."""
        try:
            if os.fstat(self._fd).st_size > self._file_size:
                os.ftruncate(self._fd, self._file_size)
        except OSError:
            pass

    def discard_from(self, position: int) -> None:
        """Forget every byte from ``position`` on: the bytes of an append that failed.  Bytes
        still buffered are dropped; bytes already written are cut off the file (best effort).
        Earlier bytes are kept."""
        if position >= self._file_size:
            self.size = min(self.size, position)
        else:
            self.size = self._file_size = position
        self._cut_torn_tail()

    def append(self, data, n: int, base_offset_patch: Optional[int] = None,
               epoch_patch: Optional[int] = None) -> None:
        """Append the ``n`` bytes ``data`` at the end, optionally patching a v2 header's
        baseOffset and partitionLeaderEpoch (both outside the CRC) on the way."""
        size = self.size
        w = size - self._file_size
        wbuf = self._wbuf
        if wbuf is not None and w + n <= WRITE_BUFFER_BYTES:
            wbuf[w : w + n] = data
            if base_offset_patch is not None:
                _Q.pack_into(wbuf, w, base_offset_patch)
            if epoch_patch is not None:
                _I.pack_into(wbuf, w + 12, epoch_patch)
            self.size = size + n
        else:
            self._write(data, base_offset_patch, epoch_patch)

    def _write(
        self, data, base_offset_patch: Optional[int] = None, epoch_patch: Optional[int] = None
    ) -> None:
        """:meth:`append` when the bytes do not fit in the write buffer (or there is none)."""
        n = len(data)
        wbuf = self._wbuf
        if wbuf is None:
            wbuf = self._wbuf = bytearray(WRITE_BUFFER_BYTES)
        w = self.size - self._file_size
        if w + n > WRITE_BUFFER_BYTES:
            if w:
                self.drain()
                w = 0
            if n > WRITE_BUFFER_BYTES:
                try:
                    if base_offset_patch is not None or epoch_patch is not None:
                        head = bytearray(data[:_V2_OVERHEAD])
                        if base_offset_patch is not None:
                            _Q.pack_into(head, 0, base_offset_patch)
                        if epoch_patch is not None:
                            _I.pack_into(head, 12, epoch_patch)
                        self._pwrite_all(head, self._file_size)
                        self._pwrite_all(
                            memoryview(data)[_V2_OVERHEAD:], self._file_size + _V2_OVERHEAD
                        )
                    elif n > _ENTRY.unpack_from(data, 0)[1] + _LOG_OVERHEAD:
                        # Several batches: the first byte of the first one's size field is
                        # written as IN_FLIGHT_SIZE_BYTE (the size then claims about 2 GB, more
                        # than a segment holds) and fixed last, in a one-byte write that cannot
                        # tear.  Until then - and for good should a write fail part-way, even
                        # when the cut below fails too - every reader sees one incomplete batch
                        # at the end, never a shorter run of complete ones, and recovery knows
                        # it for an append that did not happen (append_in_flight: the other
                        # three size bytes, the offset and the CRC are the real ones), not for
                        # damage.
                        mv = memoryview(data)
                        pos = self._file_size
                        head = bytearray(mv[:_LOG_OVERHEAD])
                        head[8] = IN_FLIGHT_SIZE_BYTE
                        self._pwrite_all(head, pos)
                        self._pwrite_all(mv[_LOG_OVERHEAD:], pos + _LOG_OVERHEAD)
                        self._pwrite_all(mv[8:9], pos + 8)
                    else:
                        self._pwrite_all(data, self._file_size)
                except OSError:
                    self._cut_torn_tail()  # none of a failed append's batches may stay
                    raise
                self._file_size += n
                self.size = self._file_size
                return
        wbuf[w : w + n] = data
        if base_offset_patch is not None:
            _Q.pack_into(wbuf, w, base_offset_patch)
        if epoch_patch is not None:
            _I.pack_into(wbuf, w + 12, epoch_patch)
        self.size += n

    def flush(self) -> None:
        """Write the buffered bytes and fsync the file (when anything was written since)."""
        self.drain()
        if self._unsynced:
            try:
                os.fsync(self._fd)
            except OSError as e:
                raise KafkaStorageError.from_os_error(e, "syncing a segment", path=self.path)
            self._unsynced = False

    def trim(self) -> None:
        """Cut the file to the bytes written (a preallocated file's zero tail)."""
        if os.fstat(self._fd).st_size != self._file_size:
            try:
                os.ftruncate(self._fd, self._file_size)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "trimming a segment", path=self.path, position=self._file_size
                )

    def truncate_to(self, size: int) -> None:
        """Cut the file to ``size`` bytes (Kafka's ``truncateTo``)."""
        self.drain()
        if size > self._file_size:
            raise ValueError(
                f"Attempt to truncate log segment {self.path} to {size} bytes failed, "
                f"size of this log segment is {self._file_size} bytes."
            )
        if size < self._file_size or os.fstat(self._fd).st_size != size:
            try:
                os.ftruncate(self._fd, size)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "truncating a segment", path=self.path, position=size
                )
            self._unsynced = True
        self.size = self._file_size = size

    def end_at(self, position: int) -> None:
        """Read-only: the entries end at ``position`` (what follows is not read; nothing is
        written)."""
        self.size = self._file_size = min(self._file_size, position)

    # -- reads -------------------------------------------------------------------------------------
    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the segment)."""
        end = self.size
        if position + size > end:
            size = end - position
        if size <= 0:
            return b""
        if position + size > self._file_size:
            self.drain()
        data = os.pread(self._fd, size, position)
        if len(data) < size:
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(self._fd, size - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def read_into(self, position: int, buf: memoryview) -> int:
        """Read up to ``len(buf)`` bytes from ``position`` into ``buf`` (a writable byte
        memoryview, reused by the caller: no new object per read); the count read (fewer at
        the end of the segment)."""
        size = len(buf)
        end = self.size
        if position + size > end:
            size = end - position
        if size <= 0:
            return 0
        if position + size > self._file_size:
            self.drain()
        return _fs.read_into(self._fd, buf[:size], position)

    # -- header walking (FileLogInputStream) -------------------------------------------------------
    def iter_headers(
        self, start_position: int = 0, end_position: Optional[int] = None
    ) -> Iterator[BatchHeader]:
        """Walk the batch headers from ``start_position`` without building batch objects or
        checking CRCs.  Stops at a partial batch at the end; raises CorruptRecordError on a
        header no batch can have (size below 14, unknown magic, v2 size below 61)."""
        self._check_open()
        path = self.path
        if start_position < 0:
            raise ValueError(f"start_position must be >= 0, not {start_position} ({path})")
        end = self.size if end_position is None else min(end_position, self.size)
        pos = start_position
        chunk = b""
        chunk_start = pos
        unpack_entry = _ENTRY.unpack_from
        while pos + _HEADER_SIZE_UP_TO_MAGIC < end:
            rel = pos - chunk_start
            if rel + _V2_PID_PEEK > len(chunk):
                chunk_start = pos
                chunk = self.read_at(pos, min(_HEADER_CHUNK_BYTES, end - pos))
                rel = 0
                if len(chunk) < _HEADER_SIZE_UP_TO_MAGIC:
                    return
            offset, size = unpack_entry(chunk, rel)
            if size < _RECORD_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"Found record size {size} smaller than minimum record overhead "
                    f"({_RECORD_OVERHEAD_V0}) in file {path}.",
                    pos,
                    offset,
                    path,
                )
            total = size + _LOG_OVERHEAD
            if pos + total > end:
                return
            magic = chunk[rel + 16]
            if magic == 2:
                if total < _V2_OVERHEAD:
                    raise CorruptRecordError(
                        f"Record batch size {total} is smaller than the minimum v2 batch "
                        f"overhead ({_V2_OVERHEAD}) in file {path}.",
                        pos,
                        offset,
                        path,
                    )
                if rel + _V2_PID_PEEK > len(chunk):  # pragma: no cover - guarded by the read above
                    chunk_start = pos
                    chunk = self.read_at(pos, _V2_PID_PEEK)
                    rel = 0
                (base, _l, epoch, _m, _c, attrs, delta, _bt, max_ts) = _V2_PEEK_STRUCT.unpack_from(
                    chunk, rel
                )
                pid = _Q.unpack_from(chunk, rel + _V2_PEEK)[0]
                yield BatchHeader(pos, total, 2, base, base + delta, max_ts, epoch, attrs, pid)
            elif magic < 2:
                ts = -1
                if magic == 1 and rel + _V1_PEEK <= len(chunk):
                    ts = _Q.unpack_from(chunk, rel + 18)[0]
                yield BatchHeader(pos, total, magic, offset, offset, ts, -1, chunk[rel + 17])
            else:
                raise CorruptRecordError(
                    f"Invalid magic found in record: {magic}", pos, offset, path
                )
            pos += total

    def iter_batches(
        self, start_position: int = 0, end_position: Optional[int] = None
    ) -> Iterator[Tuple[int, Any]]:
        """``(position, batch)`` for every complete batch from ``start_position``: RecordBatch
        (v2) or LegacyRecordBatch (v0/v1) objects over chunks read from the file.  CRCs are
        not checked here (call ``batch.ensure_valid()``); a malformed header raises."""
        self._check_open()
        if start_position < 0:
            raise ValueError(f"start_position must be >= 0, not {start_position} ({self.path})")
        end = self.size if end_position is None else min(end_position, self.size)
        pos = start_position
        want = _FIRST_SCAN_CHUNK_BYTES  # lookups usually need only the first batches
        while pos < end:
            chunk = self.read_at(pos, min(want, end - pos))
            if not chunk:
                return
            records = MemoryRecords(chunk)
            consumed = 0
            try:
                for batch in records:
                    consumed = batch.position + batch.size_in_bytes
                    yield pos + batch.position, batch
            except KafkaLogError as e:
                raise e.located(self.path, pos) from None
            if consumed == 0:
                # The first batch did not fit: read at least its full size next time.
                if len(chunk) >= _LOG_OVERHEAD:
                    size = _ENTRY.unpack_from(chunk, 0)[1] + _LOG_OVERHEAD
                    if size > len(chunk) and pos + size <= end:
                        want = size
                        continue
                return  # a partial batch at the end
            want = min(want * 4, SCAN_CHUNK_BYTES)
            pos += consumed

    def search_for_offset_with_size(
        self, offset: int, position: int, interval: int
    ) -> Optional[LogOffsetPosition]:
        """Position and size of the first batch from ``position`` whose last offset is >=
        ``offset``, walking the headers in reads of about ``interval`` (the index interval)
        bytes (Kafka's ``searchForOffsetWithSize``); None if there is none."""
        pos = position
        end = self.size
        chunk = b""
        chunk_start = pos
        step = interval + _V2_OVERHEAD
        if step < 4096:
            step = 4096
        elif step > _HEADER_CHUNK_BYTES:
            step = _HEADER_CHUNK_BYTES
        unpack_entry = _ENTRY.unpack_from
        while pos + _HEADER_SIZE_UP_TO_MAGIC < end:
            rel = pos - chunk_start
            if rel + _V2_PEEK > len(chunk):
                chunk_start = pos
                chunk = self.read_at(pos, min(step, end - pos))
                rel = 0
            entry_offset, size = unpack_entry(chunk, rel)
            total = size + _LOG_OVERHEAD
            magic = chunk[rel + 16]
            if size < _RECORD_OVERHEAD_V0 or magic > 2 or (magic == 2 and total < _V2_OVERHEAD):
                # let the general walker produce Kafka's error
                for _h in self.iter_headers(pos):
                    break
                return None
            if pos + total > end:
                return None
            if magic == 2:
                base = entry_offset
                last = base + _I.unpack_from(chunk, rel + 23)[0]
            else:
                base = last = entry_offset
            if last >= offset:
                return LogOffsetPosition(base, pos, total)
            pos += total
        return None

    def search_for_timestamp(
        self, timestamp: int, position: int, starting_offset: int = 0
    ) -> Optional[TimestampAndOffset]:
        """The first record from ``position`` (in offset order) with a timestamp >=
        ``timestamp`` and an offset >= ``starting_offset`` (Kafka's ``searchForTimestamp``);
        None if there is none."""
        for _pos, batch in self.iter_batches(position):
            if batch.max_timestamp >= timestamp:
                for record in batch:
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(
                            record.timestamp, record.offset, epoch if epoch >= 0 else None
                        )
        return None

    def search_for_max_timestamp(self, ts: int, position: int) -> Optional[TimestampAndOffset]:
        """The first record from ``position`` carrying ``ts``, in the first batch whose max
        timestamp ``ts`` is; None if there is none."""
        for _pos, batch in self.iter_batches(position):
            if batch.max_timestamp == ts:
                for record in batch:
                    if record.timestamp == ts:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(ts, record.offset, epoch if epoch >= 0 else None)
        return None
