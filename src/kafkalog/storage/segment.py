"""One log segment: a ``.log`` file of record batches plus its three indexes (Kafka's
``LogSegment``, with the file handling of ``FileRecords``/``FileLogInputStream`` folded in).

A segment is named by its base offset and holds batches whose offsets fit in
``[base_offset, base_offset + 2**31 - 1]``; at most ``2**31 - 1`` bytes.  Appends go to the end
of the ``.log`` and are indexed batch by batch, exactly as Kafka 4.x's ``LogSegment.append``
does: before each batch, once more than ``index.interval.bytes`` were written since the last
entry, an offset-index entry keyed by *that batch's* last offset at *that batch's* position is
added (and a time-index entry for the max timestamp so far, when it grew).  So an append of many
batches is indexed as densely as single-batch appends, and recovery rebuilds the same entries.
Entries written by older brokers (one per append, keyed by the append's largest offset at the
position of its first batch) are still read: lookups only need an entry's key to be at most the
first offset after its position.

Appended bytes are collected in a small in-process write buffer (``WRITE_BUFFER_BYTES``) and
written to the file when it fills, before any read of this segment, and on flush/roll/close;
fewer system calls make appending pre-built batches faster than one ``write()`` per batch.
Buffered bytes are lost if the process dies, exactly like bytes a broker wrote to the page cache
are lost if the machine dies: only :meth:`flush` (fsync) makes data durable, and recovery
truncates whatever torn tail a crash leaves.

Reads return copies (``os.pread``), never views of a mapping, so a segment can be truncated or
deleted while callers still hold what they read.
"""

from __future__ import annotations

import errno
import os
import random
import re
import stat
import struct
import time
import warnings
from typing import Iterator, List, NamedTuple, Optional, Tuple

from . import files as _files
from . import fs as _fs
from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaLogError,
    KafkaStorageError,
    LogClosedError,
)
from . import logdir as _logdir
from .index import (
    STORE_INDEX_LIMIT,
    OffsetIndex,
    TimeIndex,
    TimestampOffset,
    read_store_index,
)
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from .. import _speedups
from ..records import MemoryRecords

__all__ = [
    "Segment",
    "StoreSegment",
    "EmptySegment",
    "LogOffsetPosition",
    "TimestampAndOffset",
    "BatchHeader",
    "WRITE_BUFFER_BYTES",
    "open_segment",
    "whole_batch_after",
    "framing_problem",
    "whole_entry_at",
    "entry_is_whole",
    "resume_point",
    "gap_is_damage",
    "SegmentWalk",
]

WRITE_BUFFER_BYTES = 512 * 1024
# Bytes read at a time when walking a segment (recovery, producer-state replay, verification).
SCAN_CHUNK_BYTES = 8 * 1024 * 1024
_FIRST_SCAN_CHUNK_BYTES = 32 * 1024
# Bytes read at a time when walking batch headers from an index position.
_HEADER_CHUNK_BYTES = 16 * 1024

_INT32_MAX = 2**31 - 1
_LOG_OVERHEAD = 12
_HEADER_SIZE_UP_TO_MAGIC = 17
_RECORD_OVERHEAD_V0 = 14
_V2_OVERHEAD = 61
_V2_PEEK = 43  # through maxTimestamp
_V1_PEEK = 26  # through the v1 timestamp
_V2_PID_PEEK = 51  # through producerId
_ENTRY = struct.Struct(">qi")
_OFFSET_ENTRY = struct.Struct(">ii")
_V2_PEEK_STRUCT = struct.Struct(">qiibIhiqq")  # ... through maxTimestamp
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U32 = struct.Struct(">I")
#: the first byte of the size field of the first batch of a multi-batch append still being
#: written (see Segment._write, append_in_flight)
IN_FLIGHT_SIZE_BYTE = 0x7F


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


def _now_ms() -> int:
    return int(time.time() * 1000)


# Where a whole log entry may start: a positive size of at least 14 bytes and a magic byte of
# 0, 1 or 2 (a zero-filled range matches nowhere).  Candidates are then checked whole.
_ENTRY_CANDIDATE = re.compile(
    rb"(?=[\x00-\xff]{8}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f][\x00-\xff]{7}[\x00-\x02])",
    re.S)
_RESYNC_BLOCK = 1 << 20


def whole_batch_after(read_at, size: int, position: int, base_offset: int,
                      hints: Iterator[int] = (), scan_end: Optional[int] = None) -> Optional[int]:
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
                 hints: Iterator[int] = ()) -> Optional[int]:
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


def whole_entry_at(seg: "Segment", position: int, size: int) -> bool:
    """Whether a whole valid entry (framing and CRC) starts at ``position`` of ``seg``."""
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


class Segment:
    """A log segment (Kafka's LogSegment).  Open one with :meth:`open`.

    Main operations: :meth:`append`, :meth:`read`, :meth:`translate_offset` (position of an
    offset), :meth:`find_offset_by_timestamp`, :meth:`recover`, :meth:`truncate_to`,
    :meth:`flush`, :meth:`close` and :meth:`delete`.
    """

    # what the last :meth:`recover` found (see there)
    recovery_damage: List[Tuple[int, int]] = []
    recovery_tail: Optional[int] = None

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        file_suffix: str = "",
        read_only: bool = False,
        preallocate: bool = False,
        init_file_size: int = 0,
        clock=None,
        fd: Optional[int] = None,
        listed: Optional["_logdir.SegmentFiles"] = None,
    ) -> None:
        """``listed`` (read-only only): the segment's files as the caller's listing of the
        directory found them; the index files' existence is taken from it and the ``.log`` is
        opened at its first read rather than now (a read view loads every segment but reads
        few; a file replaced by a non-regular one is still refused when opened)."""
        if base_offset < 0:
            raise ValueError(f"base offset must be non-negative, not {base_offset}")
        self.directory = os.fspath(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.file_suffix = file_suffix
        self.read_only = read_only
        self._clock = clock or _now_ms
        self._closed = False
        if (read_only and listed is not None and fd is None and not file_suffix
                and listed.log.startswith(self.directory)):
            # the listing's paths; the ones it did not find, built as Kafka names them
            self._log_path = listed.log
            self._oi_path = listed.offset_index or _files.offset_index_file(self.directory,
                                                                            base_offset)
            self._ti_path = listed.time_index or _files.time_index_file(self.directory,
                                                                        base_offset)
            self._txn_path = listed.txn_index or _files.transaction_index_file(self.directory,
                                                                               base_offset)
            self._init_listed(listed)
            return
        self._log_path = _files.log_file(self.directory, base_offset, file_suffix)
        self._oi_path = _files.offset_index_file(self.directory, base_offset, file_suffix)
        self._ti_path = _files.time_index_file(self.directory, base_offset, file_suffix)
        self._txn_path = _files.transaction_index_file(self.directory, base_offset, file_suffix)
        if read_only and listed is not None and fd is None:
            self._init_listed(listed)
            return
        exists = os.path.exists(self._log_path)
        if read_only and fd is not None:
            self._fd = fd  # the .log opened by the caller (a regular file), now the segment's
        elif read_only:
            self._fd = _fs.open_local_fd(self._log_path)  # regular files only
        else:
            # never through a link planted in the directory that leads out of it
            self._fd = _files.open_for_write(self._log_path, os.O_RDWR | os.O_CREAT)
        self._preallocated = bool(preallocate)
        self._offset_index: Optional[OffsetIndex] = None
        self._time_index: Optional[TimeIndex] = None
        self._txn_index: Optional[TransactionIndex] = None
        self._memory_indexes = False
        try:
            if not exists and preallocate and init_file_size > 0:
                os.ftruncate(self._fd, init_file_size)
                self._file_size = 0
            else:
                self._file_size = os.fstat(self._fd).st_size
            self.offset_index_existed = os.path.exists(self._oi_path)
            self.time_index_existed = os.path.exists(self._ti_path)
            if not exists and not read_only:
                # A new segment: create (preallocate) its index files now.
                _ = self.offset_index, self.time_index
        except BaseException:
            os.close(self._fd)
            raise
        self._wbuf: Optional[bytearray] = None
        self._wlen = 0
        self._unsynced = not exists
        self._bytes_since_last_index_entry = 0
        self._max_ts: Optional[int] = None  # loaded from the time index on first use
        self._max_ts_offset = base_offset
        self._rolling_based_timestamp: Optional[int] = None
        self.created_ms = self._clock()

    def _init_listed(self, listed: "_logdir.SegmentFiles") -> None:
        """The rest of a read-only open from a listing: one ``stat`` of the ``.log`` (its size
        and kind), no descriptor until the first read."""
        try:
            st = os.stat(self._log_path)
            regular = stat.S_ISREG(st.st_mode)
        except OSError:
            regular = False
        if regular:
            self._fdv, self._lazy_fd = -1, True
        else:
            # opened now, as an unlisted segment is: the error names what is there (a file
            # that is regular again by now is simply held open)
            fd = _fs.open_local_fd(self._log_path)
            try:
                st = os.fstat(fd)
            except OSError:  # pragma: no cover
                os.close(fd)
                raise
            self._fdv, self._lazy_fd = fd, False
        self._preallocated = False
        self._offset_index = None
        self._time_index = None
        self._txn_index = None
        self._memory_indexes = False
        self._file_size = st.st_size
        self._listed_st = (st.st_dev, st.st_ino)
        self.offset_index_existed = listed.offset_index is not None
        self.time_index_existed = listed.time_index is not None
        self._txn_listed = listed.txn_index is not None
        self._wbuf = None
        self._wlen = 0
        self._unsynced = False
        self._bytes_since_last_index_entry = 0
        self._max_ts = None
        self._max_ts_offset = self.base_offset
        self._rolling_based_timestamp = None
        self.created_ms = self._clock()

    # the .log's descriptor: opened on first use for a segment opened from a listing
    _fdv = -1
    _lazy_fd = False
    _txn_listed = True  # unknown: the transaction index may exist
    _next_offset_memo: Optional[Tuple[int, int]] = None  # read-only: (size, next offset)
    _listed_st: Optional[Tuple[int, int]] = None  # (device, inode) of a listed .log

    @property
    def _fd(self) -> int:
        fd = self._fdv
        if fd < 0 and self._lazy_fd:
            self._check_open()
            fd = _fs.open_local_fd(self._log_path)  # regular files only
            try:
                st = os.fstat(fd)
            except OSError:  # pragma: no cover
                os.close(fd)
                raise
            if (st.st_dev, st.st_ino) != self._listed_st:
                os.close(fd)
                raise KafkaStorageError(
                    f"segment {self._log_path} was replaced after its log was opened: open the "
                    "log again", path=self._log_path, errno=errno.ENOENT,
                    operation="opening a segment")
            self._fdv, self._lazy_fd = fd, False
        return fd

    @_fd.setter
    def _fd(self, fd: int) -> None:
        self._fdv = fd
        self._lazy_fd = False

    def _index_file_exists(self, path: str, listed: bool) -> bool:
        """Whether an index file is there: as the listing said for a segment opened from one,
        else asked."""
        return listed if self._listed_st is not None else os.path.exists(path)

    def _close_fd(self) -> None:
        fd, self._fdv, self._lazy_fd = self._fdv, -1, False
        if fd >= 0:
            os.close(fd)

    # -- indexes (opened on first use, like Kafka's LazyIndex) -------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        oi = self._offset_index
        if oi is None:
            if self._memory_indexes or (self.read_only and not self._index_file_exists(
                    self._oi_path, self.offset_index_existed)):
                oi = OffsetIndex(
                    self._oi_path, self.base_offset, self.max_index_size, in_memory=True
                )
            else:
                oi = OffsetIndex(
                    self._oi_path,
                    self.base_offset,
                    self.max_index_size,
                    writable=not self.read_only,
                )
            self._offset_index = oi
            if self._deferred_check:
                self._check_deferred_indexes()
                oi = self._offset_index
        return oi

    @property
    def time_index(self) -> TimeIndex:
        ti = self._time_index
        if ti is None:
            if self._memory_indexes or (self.read_only and not self._index_file_exists(
                    self._ti_path, self.time_index_existed)):
                ti = TimeIndex(self._ti_path, self.base_offset, self.max_index_size, in_memory=True)
            else:
                ti = TimeIndex(
                    self._ti_path,
                    self.base_offset,
                    self.max_index_size,
                    writable=not self.read_only,
                )
            self._time_index = ti
            if self._deferred_check:
                self._check_deferred_indexes()
                ti = self._time_index
        return ti

    _deferred_check = False

    def defer_index_checks(self) -> None:
        """Read-only: check the offset and time indexes when they are first used rather than
        now (Kafka opens them lazily, ``LazyIndex``).  An index that fails its check then is
        rebuilt in memory from the batch headers; the files are never touched."""
        if self.read_only:
            self._deferred_check = True

    def _check_deferred_indexes(self) -> None:
        self._deferred_check = False
        try:
            self.offset_index.sanity_check()
            self.time_index.sanity_check()
        except CorruptIndexError:
            self._index_headers_in_memory()

    def _index_headers_in_memory(self) -> None:
        """Offset and time indexes rebuilt in memory from the batch headers (entries every
        ``index_interval_bytes``, as recovery adds them); the transaction index is kept.  A
        header no batch can have ends the walk: a read reports that damage where it meets it."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        oi = OffsetIndex(self._oi_path, self.base_offset, self.max_index_size, in_memory=True)
        ti = TimeIndex(self._ti_path, self.base_offset, self.max_index_size, in_memory=True)
        self._offset_index, self._time_index = oi, ti
        last_entry = 0
        max_ts, max_off = -1, self.base_offset
        try:
            for h in self.iter_headers(0):
                if h.max_timestamp > max_ts:
                    max_ts, max_off = h.max_timestamp, h.last_offset
                if h.position - last_entry > self.index_interval_bytes:
                    oi.append(h.last_offset, h.position)
                    ti.maybe_append(max_ts, max_off)
                    last_entry = h.position
        except CorruptRecordError:
            pass
        ti.maybe_append(max_ts, max_off, skip_full_check=True)
        self._max_ts, self._max_ts_offset = max_ts, max_off

    @property
    def txn_index(self) -> TransactionIndex:
        txi = self._txn_index
        if txi is None:
            txi = self._txn_index = TransactionIndex(
                self.base_offset,
                self._txn_path,
                writable=not self.read_only,
                in_memory=self._memory_indexes,
            )
        return txi

    def _load_max_ts(self) -> None:
        last = self.time_index.last_entry
        self._max_ts = last.timestamp
        self._max_ts_offset = last.offset

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        segment_jitter_ms: int = 0,
        segment_ms: int = 604800000,
        file_suffix: str = "",
        read_only: bool = False,
        preallocate: bool = False,
        init_file_size: int = 0,
        clock=None,
        fd: Optional[int] = None,
        listed: Optional["_logdir.SegmentFiles"] = None,
    ) -> "Segment":
        """Open (or, unless ``read_only``, create) the segment at ``base_offset`` in
        ``directory``; like Kafka's ``LogSegment.open`` the roll jitter is drawn at random from
        ``[0, min(segment_jitter_ms, segment_ms))``."""
        jitter = 0
        if segment_jitter_ms > 0:
            jitter = random.randrange(min(segment_jitter_ms, segment_ms))
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            roll_jitter_ms=jitter,
            file_suffix=file_suffix,
            read_only=read_only,
            preallocate=preallocate,
            init_file_size=init_file_size,
            clock=clock,
            fd=fd,
            listed=listed,
        )

    # -- basic facts -------------------------------------------------------------------------------
    @property
    def log_path(self) -> str:
        return self._log_path

    @property
    def size(self) -> int:
        """Bytes of batches in the segment (buffered bytes included)."""
        return self._file_size + self._wlen

    def __len__(self) -> int:
        return self.size

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            self._load_max_ts()
        return self._max_ts  # type: ignore[return-value]

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            self._load_max_ts()
        return self._max_ts_offset

    def read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_ts is None:
            self._load_max_ts()
        return TimestampOffset(self._max_ts, self._max_ts_offset)  # type: ignore[arg-type]

    @property
    def last_modified(self) -> int:
        """Modification time of the ``.log`` file, in ms."""
        return int(os.stat(self._log_path).st_mtime * 1000)

    @property
    def largest_timestamp(self) -> int:
        """The segment's largest record timestamp, or its file's mtime when it has none
        (Kafka's ``largestTimestamp``, which time-based retention compares with)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return self.last_modified

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= _INT32_MAX

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"segment {self._log_path} is closed", path=self._log_path)

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ValueError(f"segment {self._log_path} is read-only")

    # -- file I/O ----------------------------------------------------------------------------------
    def discard_buffered(self) -> None:
        """Forget the appended bytes not yet written to the file (for a segment leaving the
        log after an error: closing it then writes nothing more)."""
        self._wlen = 0

    def _drain(self) -> None:
        """Write the buffered bytes to the file."""
        n = self._wlen
        if not n:
            return
        with memoryview(self._wbuf) as mv:
            self._pwrite_all(mv[:n], self._file_size)
        self._file_size += n
        self._wlen = 0

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
                    e, "writing a segment", path=self._log_path, position=position
                )
            if written <= 0:  # pragma: no cover - a full disk raises instead
                raise KafkaStorageError(
                    f"I/O error while writing a segment: the system wrote nothing of "
                    f"{len(view)} bytes",
                    position,
                    path=self._log_path,
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
        still buffered are dropped; bytes already written are cut off the file (best effort:
        a Log is offline by then and its next open recovers).  Earlier bytes are kept."""
        if self._closed or self.read_only:
            return
        if position >= self._file_size:
            self._wlen = min(self._wlen, position - self._file_size)
        else:
            self._wlen = 0
            self._file_size = position
        self._cut_torn_tail()

    def _write(
        self, data, base_offset_patch: Optional[int] = None, epoch_patch: Optional[int] = None
    ) -> None:
        """Append ``data`` at the end, optionally patching a v2 header's baseOffset and
        partitionLeaderEpoch (both outside the CRC) on the way."""
        n = len(data)
        wbuf = self._wbuf
        if wbuf is None:
            wbuf = self._wbuf = bytearray(WRITE_BUFFER_BYTES)
        w = self._wlen
        if w + n > WRITE_BUFFER_BYTES:
            if w:
                self._drain()
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
                return
        wbuf[w : w + n] = data
        if base_offset_patch is not None:
            _Q.pack_into(wbuf, w, base_offset_patch)
        if epoch_patch is not None:
            _I.pack_into(wbuf, w + 12, epoch_patch)
        self._wlen = w + n

    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the segment)."""
        end = self._file_size + self._wlen
        if position + size > end:
            size = end - position
        if size <= 0:
            return b""
        if position + size > self._file_size:
            self._drain()
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
        end = self._file_size + self._wlen
        if position + size > end:
            size = end - position
        if size <= 0:
            return 0
        if position + size > self._file_size:
            self._drain()
        return _fs.read_into(self._fd, buf[:size], position)

    # -- header walking (FileLogInputStream) -------------------------------------------------------
    def iter_headers(
        self, start_position: int = 0, end_position: Optional[int] = None
    ) -> Iterator[BatchHeader]:
        """Walk the batch headers from ``start_position`` without building batch objects or
        checking CRCs.  Stops at a partial batch at the end; raises CorruptRecordError on a
        header no batch can have (size below 14, unknown magic, v2 size below 61)."""
        self._check_open()
        if start_position < 0:
            raise ValueError(f"start_position must be >= 0, not {start_position} ({self._log_path})")
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
                    f"({_RECORD_OVERHEAD_V0}) in file {self._log_path}.",
                    pos,
                    offset,
                    self._log_path,
                )
            total = size + _LOG_OVERHEAD
            if pos + total > end:
                return
            magic = chunk[rel + 16]
            if magic == 2:
                if total < _V2_OVERHEAD:
                    raise CorruptRecordError(
                        f"Record batch size {total} is smaller than the minimum v2 batch "
                        f"overhead ({_V2_OVERHEAD}) in file {self._log_path}.",
                        pos,
                        offset,
                        self._log_path,
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
                    f"Invalid magic found in record: {magic}", pos, offset, self._log_path
                )
            pos += total

    def iter_batches(
        self, start_position: int = 0, end_position: Optional[int] = None
    ) -> Iterator[Tuple[int, object]]:
        """``(position, batch)`` for every complete batch from ``start_position``: RecordBatch
        (v2) or LegacyRecordBatch (v0/v1) objects over chunks read from the file.  CRCs are
        not checked here (call ``batch.ensure_valid()``); a malformed header raises."""
        self._check_open()
        if start_position < 0:
            raise ValueError(f"start_position must be >= 0, not {start_position} ({self._log_path})")
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
                raise e.located(self._log_path, pos) from None
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

    # -- append ------------------------------------------------------------------------------------
    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records,
    ) -> None:
        """Append ``records`` (MemoryRecords or bytes-like, offsets already assigned) whose
        largest offset and timestamp are given (Kafka's ``LogSegment.append``)."""
        if isinstance(records, MemoryRecords):
            data = records.buffer()
        else:
            data = records
        self.append_patched(data, largest_offset, largest_timestamp, shallow_offset_of_max_timestamp)

    def append_patched(
        self,
        data,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        base_offset_patch: Optional[int] = None,
        epoch_patch: Optional[int] = None,
    ) -> None:
        """:meth:`append` of the bytes ``data``, writing ``base_offset_patch`` and
        ``epoch_patch`` (when given) into the batch's base offset and leader epoch fields as
        they are written (both lie before the part a v2 CRC covers)."""
        n = len(data)
        if n == 0:
            return
        if self._closed or self.read_only:
            self._check_writable()
        w = self._wlen
        position = self._file_size + w
        rel = largest_offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise InvalidOffsetError(
                f"Detected offset overflow at offset {largest_offset} in segment {self._log_path}",
                offset=largest_offset,
                path=self._log_path,
            )
        if position + n > _INT32_MAX:
            raise InvalidRecordError(
                f"Appending {n} bytes to segment {self._log_path} of {position} bytes would "
                f"exceed the 2 GiB segment limit",
                path=self._log_path,
            )
        wbuf = self._wbuf
        if wbuf is not None and w + n <= WRITE_BUFFER_BYTES:
            wbuf[w : w + n] = data
            if base_offset_patch is not None:
                _Q.pack_into(wbuf, w, base_offset_patch)
            if epoch_patch is not None:
                _I.pack_into(wbuf, w + 12, epoch_patch)
            self._wlen = w + n
        else:
            self._write(data, base_offset_patch, epoch_patch)
        max_ts = self._max_ts
        if max_ts is None:
            self._load_max_ts()
            max_ts = self._max_ts
        if n < _LOG_OVERHEAD or _I.unpack_from(data, 8)[0] + _LOG_OVERHEAD >= n:
            # One batch: the caller's largest offset and timestamp are that batch's.
            if position == 0:
                self._rolling_based_timestamp = largest_timestamp
            if largest_timestamp > max_ts:  # type: ignore[operator]
                self._max_ts = max_ts = largest_timestamp
                self._max_ts_offset = shallow_offset_of_max_timestamp
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                (self._offset_index or self.offset_index).append(largest_offset, position)
                (self._time_index or self.time_index).maybe_append(max_ts, self._max_ts_offset)
                self._bytes_since_last_index_entry = n
            else:
                self._bytes_since_last_index_entry += n
        else:
            self._index_batches(data, position, max_ts, base_offset_patch)  # type: ignore[arg-type]

    def _index_batches(
        self, data, position: int, max_ts: int, base_offset_patch: Optional[int]
    ) -> None:
        """Index the batches of an append of several, one at a time (Kafka 4.x): before each
        batch, once more than ``index.interval.bytes`` were written since the last entry, an
        offset entry (that batch's last offset, its position) and a time-index attempt with the
        max timestamp so far (this batch included).  A new segment's rolling base timestamp is
        the max timestamp of its first batch.  ``data`` holds whole batches (the callers checked
        their framing); anything after a frame that does not fit is counted, not indexed."""
        n = len(data)
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        max_off = self._max_ts_offset
        q = _Q.unpack_from
        i32 = _I.unpack_from
        p = 0
        while p + _HEADER_SIZE_UP_TO_MAGIC <= n:
            size = i32(data, p + 8)[0] + _LOG_OVERHEAD
            if size < _LOG_OVERHEAD + _RECORD_OVERHEAD_V0 or p + size > n:
                break
            magic = data[p + 16]
            if magic >= 2 and size >= _V2_OVERHEAD:
                if p == 0 and base_offset_patch is not None:
                    base = base_offset_patch
                else:
                    base = q(data, p)[0]
                last = base + i32(data, p + 23)[0]
                ts = q(data, p + 35)[0]
            else:
                last = q(data, p)[0]
                ts = q(data, p + 18)[0] if magic == 1 and size >= _V1_PEEK else -1
            if p == 0 and position == 0:
                self._rolling_based_timestamp = ts
            if ts > max_ts:
                max_ts, max_off = ts, last
            if since > interval:
                (self._offset_index or self.offset_index).append(last, position + p)
                (self._time_index or self.time_index).maybe_append(max_ts, max_off)
                since = 0
            since += size
            p += size
        since += n - p
        self._max_ts = max_ts
        self._max_ts_offset = max_off
        self._bytes_since_last_index_entry = since

    def append_if_fits(
        self,
        data,
        n: int,
        largest_offset: int,
        largest_timestamp: int,
        base_offset_patch: int,
        epoch_patch: int,
        max_segment_bytes: int,
        max_segment_ms: int,
    ):
        """The log's hot path: :meth:`should_roll` and :meth:`append_patched` for one v2 batch whose
        largest offset is also the offset of its max timestamp, in one call.  Returns True once
        appended, False when the segment must roll first, None when the cheap checks cannot
        decide (the caller then takes the general route)."""
        w = self._wlen
        position = self._file_size + w
        if position > max_segment_bytes - n:
            return False
        if position > 0:
            ts = self._rolling_based_timestamp
            if ts is None or ts < 0:
                return None
            if largest_timestamp - ts > max_segment_ms - self.roll_jitter_ms:
                return False
        oi = self._offset_index
        ti = self._time_index
        max_ts = self._max_ts
        wbuf = self._wbuf
        if oi is None or ti is None or max_ts is None or wbuf is None or self._closed:
            return None
        if oi._entries >= oi._length >> 3 or ti._entries >= ti._length // 12 - 1:
            return False
        rel = largest_offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            return False
        if w + n <= WRITE_BUFFER_BYTES:
            wbuf[w : w + n] = data
            _Q.pack_into(wbuf, w, base_offset_patch)
            _I.pack_into(wbuf, w + 12, epoch_patch)
            self._wlen = w + n
        else:
            self._write(data, base_offset_patch, epoch_patch)
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if largest_timestamp > max_ts:
            self._max_ts = max_ts = largest_timestamp
            self._max_ts_offset = largest_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            e = oi._entries
            if e and largest_offset <= oi._last_offset:
                oi.append(largest_offset, position)  # raises InvalidOffsetError
            _OFFSET_ENTRY.pack_into(oi._buf, e << 3, rel, position)
            oi._entries = e + 1
            oi._last_offset = largest_offset
            ti.maybe_append(max_ts, self._max_ts_offset)
            self._bytes_since_last_index_entry = n
        else:
            self._bytes_since_last_index_entry += n
        return True

    def update_txn_index(self, completed_txn, last_stable_offset: int) -> None:
        """Record an aborted transaction whose marker is in this segment."""
        if completed_txn.is_aborted:
            self.txn_index.append(
                AbortedTxn(
                    completed_txn.producer_id,
                    completed_txn.first_offset,
                    completed_txn.last_offset,
                    last_stable_offset,
                )
            )

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # -- roll --------------------------------------------------------------------------------------
    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None and self.size > 0:
            for header in self.iter_headers(0):
                self._rolling_based_timestamp = header.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Producer time since the segment's first batch when that has a timestamp, else wall
        time since the segment object was created (Kafka's ``timeWaitedForRoll``)."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def should_roll(
        self,
        max_segment_ms: int,
        max_segment_bytes: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now_ms: Optional[int] = None,
    ) -> bool:
        """Kafka's ``shouldRoll``: size, time (producer timestamps), a full index, or an offset
        that cannot be stored relative to the base offset.  ``now_ms`` (default: the clock) is
        only needed when the segment's first batch has no timestamp."""
        size = self._file_size + self._wlen
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0:
            ts = self._rolling_based_timestamp
            if ts is None:
                self._load_first_batch_timestamp()
                ts = self._rolling_based_timestamp
            if ts is not None and ts >= 0:
                waited = max_timestamp_in_messages - ts
            else:
                waited = (self._clock() if now_ms is None else now_ms) - self.created_ms
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        oi = self._offset_index or self.offset_index
        ti = self._time_index or self.time_index
        if oi._entries >= oi._length >> 3 or ti._entries >= ti._length // 12 - 1:
            return True
        rel = max_offset_in_messages - self.base_offset
        return rel < 0 or rel > _INT32_MAX

    def on_become_inactive_segment(self) -> None:
        """At roll: append the final time-index entry, trim the indexes (and a preallocated
        ``.log``) and release the write buffer."""
        self._check_writable()
        self._drain()
        self._wbuf = None
        if self._max_ts is None:
            self._load_max_ts()
        self.time_index.maybe_append(self._max_ts, self._max_ts_offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_log()

    def _trim_log(self) -> None:
        if not self.read_only and os.fstat(self._fd).st_size != self._file_size:
            try:
                os.ftruncate(self._fd, self._file_size)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "trimming a segment", path=self._log_path, position=self._file_size
                )

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- read --------------------------------------------------------------------------------------
    def translate_offset(
        self, offset: int, starting_file_position: int = 0
    ) -> Optional[LogOffsetPosition]:
        """Position and size of the first batch whose last offset is >= ``offset``: an
        offset-index lookup, then a walk over batch headers (Kafka's
        ``searchForOffsetWithSize``); None if there is none."""
        if self._closed:
            self._check_open()
        mapping = (self._offset_index or self.offset_index).lookup(offset)
        pos = (
            mapping.position
            if mapping.position > starting_file_position
            else starting_file_position
        )
        end = self._file_size + self._wlen
        chunk = b""
        chunk_start = pos
        step = self.index_interval_bytes + _V2_OVERHEAD
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

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: Optional[int] = None,
        min_one_message: bool = False,
    ) -> Optional[MemoryRecords]:
        """Batches from the one holding ``start_offset`` on, at most ``max_size`` bytes and no
        further than ``max_position`` (default: the segment end).  The bytes start at a batch
        boundary (the first batch may begin before ``start_offset``) and may end in a partial
        batch; ``min_one_message`` returns the whole first batch even when it is larger than
        ``max_size``.  None when no batch at or after ``start_offset`` is in this segment."""
        if max_size < 0:
            raise ValueError(
                f"Invalid max size {max_size} for log read from segment {self._log_path}"
            )
        self._check_open()
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        adjusted = max(max_size, start.size) if min_one_message else max_size
        if max_position is None:
            max_position = self.size
        if adjusted == 0 or max_position <= start.position:
            return MemoryRecords(b"")
        fetch_size = min(max_position - start.position, adjusted)
        return MemoryRecords(self.read_at(start.position, fetch_size))

    def read_next_offset(self) -> int:
        """The offset after the last whole batch (the base offset when empty), found by
        walking the headers from the last offset-index entry (:meth:`walk`: past damage that
        whole batches follow, to the torn tail if there is one)."""
        self._check_open()
        memo = self._next_offset_memo
        if memo is not None and memo[0] == self.size:  # read-only: its bytes do not change
            return memo[1]
        nxt = self.tail_walk().next_offset
        if self.read_only:
            self._next_offset_memo = (self.size, nxt)
        return nxt

    def tail_walk(self) -> "SegmentWalk":
        """:meth:`walk` from the last offset-index entry (from the start when that finds no
        whole batch): how the segment ends."""
        pos = self.offset_index.last_entry().position
        if pos < 0 or pos > self.size:  # a damaged entry: walk from the start
            pos = 0
        w = self.walk(pos)
        if w.next_offset == self.base_offset and pos > 0:
            w = self.walk(0)
        if self.read_only:  # its bytes do not change: read_next_offset need not walk again
            self._next_offset_memo = (self.size, w.next_offset)
        return w

    def walk(self, position: int = 0) -> "SegmentWalk":
        """Walk the entry headers from ``position`` (no CRCs) to the end of the segment; where
        the bytes stop framing, look at what follows (:func:`whole_batch_after`): whole
        entries after them make it damage (recorded, and the walk goes on there), none makes it
        the segment's tail."""
        size = self.size
        base = self.base_offset
        nxt = before = base  # the offset after the last entry taken, and before it
        last = last_first = -1  # where the last entry taken starts, and its first offset
        damage: List[Tuple[int, int]] = []
        pos = position
        while True:
            end = pos
            try:
                for h in self.iter_headers(pos):
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
                q = whole_batch_after(self.read_at, size, last, before, scan_end=stop)
                if q is not None:
                    damage.append((last, q))
                    nxt, last = before, -1
                    pos = q
                    continue
            if stop >= size:
                return SegmentWalk(nxt, stop, damage, None)
            q = self.whole_batch_after(stop)
            if q is None or append_in_flight(self.read_at, stop, q, nxt):
                return SegmentWalk(nxt, stop, damage, stop)
            damage.append((stop, q))
            pos, last = q, -1

    def whole_batch_after(self, position: int) -> Optional[int]:
        """The position of the first whole valid entry after ``position`` (see the module's
        :func:`whole_batch_after`), trying the offset-index entries past it first."""
        try:
            hints = [e.position for e in self.offset_index if e.position > position]
        except KafkaLogError:
            hints = []
        return whole_batch_after(self.read_at, self.size, position, self.base_offset, hints)

    def cut_torn_tail(self, position: int) -> None:
        """A read-only segment ends at ``position`` (a torn tail after it; nothing is
        written)."""
        if not self.read_only:
            raise ValueError("cut_torn_tail is for read-only segments")
        memo = self._next_offset_memo
        self._file_size = min(self._file_size, position)
        # what follows the last whole batch is cut: the offset after it stays
        self._next_offset_memo = None if memo is None else (self._file_size, memo[1])

    def _damage_error(self, position: int, resumed: Optional[int]) -> CorruptRecordError:
        """The error for a writable open that would have to cut whole batches (or a later
        segment's) to recover: nothing is cut."""
        head = self.read_at(position, 12)
        offset = _ENTRY.unpack_from(head, 0)[0] if len(head) >= 8 + 4 else None
        follows = (f"whole valid batches follow at position {resumed}" if resumed is not None
                   else "the log goes on in later segments")
        return CorruptRecordError(
            f"Corrupt batch in {self._log_path} at position {position} ({self.size - position} "
            f"bytes from there to the end of the segment), and {follows}: recovering as a "
            "broker does would discard them, so nothing was cut; open the log read-only to read "
            "around the damage (on_damage='skip'), salvage it, or pass recovery='broker' to cut "
            "the log there as Kafka's recovery does", position, offset, self._log_path)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> Optional[TimestampAndOffset]:
        """The first record (in offset order) with a timestamp >= ``timestamp`` and offset >=
        ``starting_offset``: time-index lookup, offset-index lookup, then a scan."""
        self._check_open()
        ts_entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        for _pos, batch in self.iter_batches(position):
            if batch.max_timestamp >= timestamp:
                for record in batch:
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(
                            record.timestamp, record.offset, epoch if epoch >= 0 else None
                        )
        return None

    def offset_of_max_timestamp(self) -> Optional[TimestampAndOffset]:
        """The first record carrying the segment's max timestamp (ListOffsets ``-3``)."""
        self._check_open()
        ts = self.max_timestamp_so_far
        if ts < 0:
            return None
        position = self.offset_index.lookup(self._max_ts_offset).position
        for start in (position, 0):
            for _pos, batch in self.iter_batches(start):
                if batch.max_timestamp == ts:
                    for record in batch:
                        if record.timestamp == ts:
                            epoch = batch.partition_leader_epoch
                            return TimestampAndOffset(
                                ts, record.offset, epoch if epoch >= 0 else None
                            )
        return None

    # -- recovery ----------------------------------------------------------------------------------
    def _use_memory_indexes(self) -> None:
        """Read-only segments rebuild into in-memory indexes and never touch the files."""
        self._deferred_check = False
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        if self._txn_index is not None:
            self._txn_index.close()
        self._offset_index = self._time_index = self._txn_index = None
        self._memory_indexes = True

    def recover(self, producer_state=None, leader_epoch_cache=None, *,
                past_damage: bool = False, is_last: bool = True,
                may_cut_damage: bool = True) -> int:
        """Rebuild the indexes from the ``.log`` and truncate it at the first invalid batch
        (Kafka's ``LogSegment.recover``): every batch's size and CRC are checked, index entries
        are added every ``index.interval.bytes`` (per batch), and the leader-epoch cache and
        producer state (with the transaction index) are updated from v2 batches.  Returns the
        number of bytes truncated.  A read-only segment recovers into memory and just stops
        reading at the first invalid batch.  Raises InvalidOffsetError when offsets go
        backwards at an index entry (the caller then drops the segment, as Kafka does).

        Afterwards ``recovery_damage`` lists ``(position, resumed at)`` for each invalid
        stretch that whole valid batches follow (:func:`whole_batch_after`), and
        ``recovery_tail`` is where the bytes after the last whole batch begin when nothing
        whole follows them (a torn tail), else None.  Only a torn tail of the log's last
        segment (``is_last``) is the end of a log.  With ``past_damage`` (a read-only view,
        which must not end a log at damage) recovery goes on at each such batch and nothing is
        cut but that torn tail.  Without it, everything from the first invalid batch is cut, as
        Kafka's recovery does, where ``may_cut_damage`` (a broker's recovery asked for by name)
        or it is that torn tail; else CorruptRecordError is raised before anything is cut."""
        self._check_open()
        self._drain()
        if self.read_only:
            self._use_memory_indexes()
        oi, ti, txi = self.offset_index, self.time_index, self.txn_index
        oi.reset()
        ti.reset()
        txi.reset()
        valid = 0
        last_index_entry = 0
        max_ts = -1
        max_ts_off = self.base_offset
        interval = self.index_interval_bytes
        base = self.base_offset
        damage: List[Tuple[int, int]] = []
        tail: Optional[int] = None
        pos0 = 0
        expected = base  # the offset after the last valid batch
        while True:
            backwards = None
            try:
                for pos, batch in self.iter_batches(pos0):
                    batch.ensure_valid()
                    last = batch.last_offset
                    first = batch.base_offset if batch.magic >= 2 else last
                    if first > expected and gap_is_damage(
                            expected, first, self.read_at(pos + batch.size_in_bytes,
                                                           _HEADER_SIZE_UP_TO_MAGIC)):
                        first = -1  # a jump the entry after it contradicts: out of place
                    if first < expected:
                        # offsets going backwards: damage (whatever follows)
                        if may_cut_damage and not past_damage:
                            # a broker's recovery: the caller empties the segment, as Kafka does
                            raise InvalidOffsetError(
                                f"Found invalid offset {last} after {expected - 1} during "
                                f"recovery of {self._log_path}", pos, last, self._log_path)
                        backwards = (pos, pos + batch.size_in_bytes)
                        break
                    if batch.magic >= 2 and batch.base_offset < base:
                        raise CorruptRecordError(
                            f"Batch base offset {batch.base_offset} is below the segment base offset "
                            f"{base}",
                            pos,
                            batch.base_offset,
                            self._log_path,
                        )
                    rel = last - base
                    if rel < 0 or rel > _INT32_MAX:
                        raise CorruptRecordError(
                            f"Batch with last offset {last} cannot be stored relative to base offset "
                            f"{base}",
                            pos,
                            last,
                            self._log_path,
                        )
                    if batch.max_timestamp > max_ts:
                        max_ts = batch.max_timestamp
                        max_ts_off = last
                    if valid - last_index_entry > interval:
                        oi.append(last, valid)
                        ti.maybe_append(max_ts, max_ts_off)
                        last_index_entry = valid
                    valid += batch.size_in_bytes
                    expected = last + 1
                    if batch.magic >= 2:
                        if leader_epoch_cache is not None:
                            epoch = batch.partition_leader_epoch
                            latest = leader_epoch_cache.latest_epoch
                            if epoch >= 0 and (latest is None or epoch > latest):
                                leader_epoch_cache.assign(epoch, batch.base_offset)
                        if producer_state is not None:
                            completed = producer_state.update(batch)
                            if completed is not None:
                                lso = producer_state.last_stable_offset(completed)
                                self.update_txn_index(completed, lso)
                                producer_state.complete_txn(completed)
                    elif producer_state is not None:
                        producer_state.update(batch)
            except (CorruptRecordError, InvalidRecordError):
                pass
            if backwards is not None:
                damage.append(backwards)
                if not past_damage:
                    break
                valid = pos0 = backwards[1]
                continue
            if valid >= self.size:
                break
            q = self.whole_batch_after(valid)
            if q is None or append_in_flight(self.read_at, valid, q, expected):
                tail = valid
                break
            damage.append((valid, q))
            if not past_damage:
                break
            valid = pos0 = q
        self.recovery_damage, self.recovery_tail = damage, tail
        torn = tail is not None and is_last  # the one thing that may end a log
        if past_damage:
            cut = tail if torn else self.size
        else:
            bad = damage[0][0] if damage else tail
            if bad is not None and not torn and not may_cut_damage:
                raise self._damage_error(bad, damage[0][1] if damage else None)
            cut = self.size if bad is None else bad
        truncated = self.size - cut
        if self.read_only:
            self._file_size = cut
        else:
            self.truncate_log_bytes(cut)
        self._max_ts = max_ts
        self._max_ts_offset = max_ts_off
        oi.trim_to_valid_size()
        ti.maybe_append(max_ts, max_ts_off, skip_full_check=True)
        ti.trim_to_valid_size()
        self._bytes_since_last_index_entry = 0
        if valid == 0:
            self._rolling_based_timestamp = None
        return truncated

    def rebuild_indexes(self) -> None:
        """Rebuild the offset and time indexes from the log (no truncation; stops at the
        first invalid batch)."""
        self.recover()

    def truncate_log_bytes(self, size: int) -> None:
        """Cut the ``.log`` file (only: the indexes are the caller's) to ``size`` bytes."""
        self._drain()
        if size > self._file_size:
            raise ValueError(
                f"Attempt to truncate log segment {self._log_path} to {size} bytes failed, "
                f"size of this log segment is {self._file_size} bytes."
            )
        if size < self._file_size or os.fstat(self._fd).st_size != size:
            try:
                os.ftruncate(self._fd, size)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "truncating a segment", path=self._log_path, position=size
                )
            self._unsynced = True
        self._file_size = size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset`` on (so the whole batch that
        contains ``offset`` goes); returns the bytes removed (Kafka's ``truncateTo``)."""
        self._check_writable()
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        truncated = 0
        if mapping is not None:
            before = self.size
            self.truncate_log_bytes(mapping.position)
            truncated = before - mapping.position
        if self.size == 0:
            self.created_ms = self._clock()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        # Re-read the largest timestamp: the last time-index entry, then the batches after it.
        last = self.time_index.last_entry
        max_ts, max_off = last.timestamp, last.offset
        start = self.offset_index.lookup(last.offset).position if self.time_index.entries else 0
        for h in self.iter_headers(start):
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
        self._max_ts, self._max_ts_offset = max_ts, max_off
        return truncated

    # -- integrity ---------------------------------------------------------------------------------
    def sanity_check(self, time_index_file_existed: Optional[bool] = None) -> None:
        """Kafka's load-time check: the offset index must exist (else FileNotFoundError), a
        time index that did not exist is emptied, and the transaction index is checked."""
        if time_index_file_existed is None:
            time_index_file_existed = self.time_index_existed
        listed = self._listed_st is not None
        if not (self.offset_index_existed if listed else os.path.exists(self._oi_path)):
            raise FileNotFoundError(f"Offset index file {self._oi_path} does not exist")
        if not time_index_file_existed and not self.read_only:
            self.time_index.resize(0)
        if self._txn_listed:  # a listing that found no transaction index: nothing to check
            self.txn_index.sanity_check()

    def verify_indexes(self) -> None:
        """Cross-check the indexes against the log (what ``kafka-dump-log --verify-index-only``
        and ``--index-sanity-check`` look at, plus ordering): Kafka's sanity checks, strictly
        increasing entries, offset entries at batch boundaries such that every batch before an
        entry's position ends below its offset, and time entries whose offset lies in a batch
        that first reached that timestamp.  Raises CorruptIndexError."""
        self._check_open()
        oi, ti = self.offset_index, self.time_index
        oi.sanity_check(full=True)
        ti.sanity_check(full=True)
        txi = self.txn_index
        txi.sanity_check()
        headers = list(self.iter_headers(0))
        by_pos = {h.position: i for i, h in enumerate(headers)}
        size = self.size
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

    # -- lifecycle ---------------------------------------------------------------------------------
    def flush(self, indexes: bool = True) -> None:
        """Write buffered bytes and fsync the ``.log`` (and, unless ``indexes`` is false, the
        offset, time and transaction indexes)."""
        self._check_open()
        if self.read_only:
            return
        self._drain()
        if self._unsynced:
            try:
                os.fsync(self._fd)
            except OSError as e:
                raise KafkaStorageError.from_os_error(e, "syncing a segment", path=self._log_path)
            self._unsynced = False
        if indexes:
            for idx in (self._offset_index, self._time_index, self._txn_index):
                if idx is not None:
                    idx.flush()

    def close(self) -> None:
        """Append the final time-index entry, trim the indexes and close every file."""
        if self._closed:
            return
        try:
            if not self.read_only:
                self._drain()
                if self._max_ts is not None or not os.path.exists(self._ti_path):
                    ts = self.max_timestamp_so_far
                    try:
                        self.time_index.maybe_append(ts, self._max_ts_offset, skip_full_check=True)
                    except InvalidOffsetError as e:
                        # As Kafka's LogSegment.close: a final entry that does not fit (e.g. a
                        # recovered log whose offsets go backwards) must not stop the indexes
                        # from being trimmed and closed.
                        warnings.warn(f"{self._ti_path}: final time index entry skipped: {e}")
                if self._offset_index is None and not os.path.exists(self._oi_path):
                    _ = self.offset_index  # create it, trimmed to 0 below, as Kafka leaves it
                self._trim_log()
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close()
            if self._txn_index is not None:
                self._txn_index.close()
        finally:
            self._wbuf = None
            self._close_fd()
            self._closed = True

    def close_handlers(self) -> None:
        """Close every file without trimming or final entries (buffered bytes are written)."""
        if self._closed:
            return
        try:
            if not self.read_only:
                self._drain()
        finally:
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close_handler()
            if self._txn_index is not None:
                self._txn_index.close()
            self._wbuf = None
            self._close_fd()
            self._closed = True

    def _all_paths(self) -> List[str]:
        return [self._log_path, self._oi_path, self._ti_path, self._txn_path]

    def delete(self) -> None:
        """Close the segment and delete its files."""
        self._wlen = 0
        self.close_handlers()
        for path in self._all_paths():
            if path is None:
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, replacing ``old_suffix`` with ``new_suffix``
        (``"" -> ".deleted"`` when deleting, ``".swap" -> ""`` when swapping in)."""

        def renamed(path: str) -> str:
            if old_suffix and path.endswith(old_suffix):
                path = path[: -len(old_suffix)]
            return path + new_suffix

        new_log = renamed(self._log_path)
        os.replace(self._log_path, new_log)
        self._log_path = new_log
        for attr, idx in (
            ("_oi_path", self._offset_index),
            ("_ti_path", self._time_index),
            ("_txn_path", self._txn_index),
        ):
            new_path = renamed(getattr(self, attr))
            if idx is not None:
                idx.rename_to(new_path)
            else:
                try:
                    os.replace(getattr(self, attr), new_path)
                except FileNotFoundError:
                    pass
            setattr(self, attr, new_path)
        self.file_suffix = new_suffix

    def __repr__(self) -> str:
        return (
            f"Segment(base_offset={self.base_offset}, size={self.size}, "
            f"path={self._log_path!r}{', closed' if self._closed else ''})"
        )


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
        if base_offset < 0:
            raise ValueError(f"base offset must be non-negative, not {base_offset}")
        self.directory = os.fspath(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.file_suffix = ""
        self.read_only = True
        self._clock = clock or _now_ms
        self._closed = False
        self._fs = fs
        self._log_path = _files.log_file(self.directory, base_offset)
        self._oi_path = _files.offset_index_file(self.directory, base_offset)
        self._ti_path = _files.time_index_file(self.directory, base_offset)
        self._txn_path = _files.transaction_index_file(self.directory, base_offset)
        self._fd = -1
        # the caller's open .log (kept open for it: its ranges serve the caller's reads too),
        # else one opened here (regular files only; no request when listed)
        self._owns_file = file is None
        self._file = fs.open_read(self._log_path) if file is None else file
        self._index_data = dict(index_data or {})
        self._preallocated = False
        self._offset_index: Optional[OffsetIndex] = None
        self._time_index: Optional[TimeIndex] = None
        self._txn_index: Optional[TransactionIndex] = None
        self._memory_indexes = False
        self._file_size = self._file.size
        if listed is not None:
            self.offset_index_existed = listed.offset_index is not None
            self.time_index_existed = listed.time_index is not None
            self._txn_existed = listed.txn_index is not None
        else:
            self.offset_index_existed = fs.kind(self._oi_path) == _fs.FILE
            self.time_index_existed = fs.kind(self._ti_path) == _fs.FILE
            self._txn_existed = fs.kind(self._txn_path) == _fs.FILE
        self._wbuf: Optional[bytearray] = None
        self._wlen = 0
        self._unsynced = False
        self._bytes_since_last_index_entry = 0
        self._max_ts: Optional[int] = None
        self._max_ts_offset = base_offset
        self._rolling_based_timestamp: Optional[int] = None
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
        ms = self._fs.modified_ms(self._log_path)
        return self.created_ms if ms is None else ms

    def read_at(self, position: int, size: int) -> bytes:
        end = self._file_size
        if position + size > end:
            size = end - position
        if size <= 0:
            return b""
        return self._file.read(position, size)

    def read_into(self, position: int, buf: memoryview) -> int:
        data = self.read_at(position, len(buf))
        buf[:len(data)] = data
        return len(data)

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
            if self._owns_file:
                self._file.close()
            self._closed = True

    def _refuse(self, *_a, **_k):
        raise ValueError(f"segment {self._log_path} is in a store and read-only")

    delete = change_file_suffixes = _refuse


class _NoFile:
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
        super().__init__(directory, base_offset, fs=None,
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
    fs, log = _fs.for_path(seg.log, fs)
    if not fs.is_local():
        return StoreSegment(_fs.parent(log), seg.base_offset, fs=fs, listed=seg, file=file)
    fd = None
    if file is not None:
        try:
            fd = os.dup(file.fileno())  # type: ignore[attr-defined]
        except OSError as e:
            raise KafkaStorageError.from_os_error(e, "opening for reading", path=file.path) from e
    return Segment.open(os.path.dirname(seg.log), seg.base_offset, read_only=True, fd=fd)
