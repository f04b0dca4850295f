"""One log segment: a ``.log`` file of record batches plus its three indexes (Kafka's
``LogSegment``).  The ``.log``'s bytes are a :class:`~kafkalog.storage.file_records.FileRecords`
(the descriptor, the write buffer, the positioned reads and writes, the header walks); the
framing rules every reader shares are in :mod:`kafkalog.storage.framing`; a read-only segment
in an object store and the empty stand-in are in :mod:`kafkalog.storage.store_segment`.

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

Appended bytes go through the FileRecords' write buffer: only :meth:`Segment.flush` (fsync)
makes them durable, and recovery truncates whatever torn tail a crash leaves.
"""

from __future__ import annotations

import os
import random
import struct
import time
import warnings
from typing import Any, Iterator, List, Optional, Tuple

from .._format import ENTRY_HEADER, OFFSET_INDEX_ENTRY
from .._format import HEADER_SIZE_UP_TO_MAGIC as _HEADER_SIZE_UP_TO_MAGIC
from .._format import INT32_MAX as _INT32_MAX
from .._format import LOG_OVERHEAD as _LOG_OVERHEAD
from .._format import RECORD_BATCH_OVERHEAD as _V2_OVERHEAD
from .._format import RECORD_OVERHEAD_V0 as _RECORD_OVERHEAD_V0
from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaLogError,
    LogClosedError,
)
from ..records import MemoryRecords
from . import files as _files
from . import logdir as _logdir
from .file_records import BatchHeader, FileRecords, LogOffsetPosition, TimestampAndOffset
from .framing import SegmentWalk, append_in_flight, gap_is_damage, walk_segment, whole_batch_after
from .index import OffsetIndex, TimeIndex, TimestampOffset
from .index_check import index_headers, verify_indexes
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

__all__ = ["Segment"]

_V1_PEEK = 26  # through the v1 timestamp
_ENTRY = ENTRY_HEADER
_OFFSET_ENTRY = OFFSET_INDEX_ENTRY
_Q = struct.Struct(">q")
_I = struct.Struct(">i")


def _now_ms() -> int:
    return int(time.time() * 1000)


class Segment:
    """A log segment (Kafka's LogSegment).  Open one with :meth:`open`.

    Main operations: :meth:`append`, :meth:`read`, :meth:`translate_offset` (position of an
    offset), :meth:`find_offset_by_timestamp`, :meth:`recover`, :meth:`truncate_to`,
    :meth:`flush`, :meth:`close` and :meth:`delete`.
    """

    # what the last :meth:`recover` found (see there)
    recovery_damage: List[Tuple[int, int]] = []
    recovery_tail: Optional[int] = None

    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int = 4096,
                 max_index_size: int = 10 * 1024 * 1024, roll_jitter_ms: int = 0,
                 file_suffix: str = "", read_only: bool = False, preallocate: bool = False,
                 init_file_size: int = 0, clock=None, fd: Optional[int] = None,
                 listed: Optional["_logdir.SegmentFiles"] = None) -> None:
        """``listed`` (read-only only): the segment's files as the caller's listing of the
        directory found them; the index files' existence is taken from it and the ``.log`` is
        opened at its first read rather than now (a read view loads every segment but reads
        few; a file replaced by a non-regular one is still refused when opened)."""
        self._init_fields(directory, base_offset, index_interval_bytes, max_index_size,
                          roll_jitter_ms, file_suffix, read_only, clock)
        directory = self.directory
        if (read_only and listed is not None and fd is None and not file_suffix
                and listed.log.startswith(directory)):
            # the listing's paths; the ones it did not find, built as Kafka names them
            log_path = listed.log
            self._oi_path = listed.offset_index or _files.offset_index_file(directory,
                                                                            base_offset)
            self._ti_path = listed.time_index or _files.time_index_file(directory, base_offset)
            self._txn_path = listed.txn_index or _files.transaction_index_file(directory,
                                                                               base_offset)
            self._init_listed(log_path, listed)
            return
        log_path = _files.log_file(directory, base_offset, file_suffix)
        self._oi_path = _files.offset_index_file(directory, base_offset, file_suffix)
        self._ti_path = _files.time_index_file(directory, base_offset, file_suffix)
        self._txn_path = _files.transaction_index_file(directory, base_offset, file_suffix)
        if read_only and listed is not None and fd is None:
            self._init_listed(log_path, listed)
            return
        records = FileRecords.open(log_path, read_only=read_only, fd=fd,
                                   preallocate=preallocate, init_file_size=init_file_size)
        self._init_state(records)
        try:
            self.offset_index_existed = os.path.exists(self._oi_path)
            self.time_index_existed = os.path.exists(self._ti_path)
            if records.created and not read_only:
                # A new segment: create (preallocate) its index files now.
                _ = self.offset_index, self.time_index
        except BaseException:
            records.close()
            raise
        self.created_ms = self._clock()

    def _init_fields(self, directory: str, base_offset: int, index_interval_bytes: int,
                     max_index_size: int, roll_jitter_ms: int, file_suffix: str,
                     read_only: bool, clock) -> None:
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

    def _init_state(self, records: FileRecords) -> None:
        """The segment over ``records``: no index opened yet, nothing appended."""
        self._file_records = records
        # bound once: a read of the segment is a read of its records, with no hop between
        self.read_at = records.read_at
        self.read_into = records.read_into
        self._offset_index: Optional[OffsetIndex] = None
        self._time_index: Optional[TimeIndex] = None
        self._txn_index: Optional[TransactionIndex] = None
        self._memory_indexes = False
        self._bytes_since_last_index_entry = 0
        self._max_ts: Optional[int] = None  # loaded from the time index on first use
        self._max_ts_offset = self.base_offset
        self._rolling_based_timestamp: Optional[int] = None

    def _init_listed(self, log_path: str, listed: "_logdir.SegmentFiles") -> None:
        """The rest of a read-only open from a listing: one ``stat`` of the ``.log`` (its size
        and kind), no descriptor until the first read."""
        self._init_state(FileRecords.from_listing(log_path))
        self._listed = True
        self.offset_index_existed = listed.offset_index is not None
        self.time_index_existed = listed.time_index is not None
        self._txn_listed = listed.txn_index is not None
        self.created_ms = self._clock()

    _listed = False  # opened from a listing: the index files are as it found them
    _txn_listed = True  # unknown: the transaction index may exist
    _next_offset_memo: Optional[Tuple[int, int]] = None  # read-only: (size, next offset)

    def _index_file_exists(self, path: str, listed: bool) -> bool:
        """Whether an index file is there: as the listing said for a segment opened from one,
        else asked."""
        return listed if self._listed else os.path.exists(path)

    # -- indexes (opened on first use, like Kafka's LazyIndex) -------------------------------------
    def _open_index(self, cls, path: str, existed: bool):
        """``cls`` (OffsetIndex, TimeIndex) of this segment: in memory when the segment
        recovers into memory or, read-only, its file is missing."""
        if self._memory_indexes or (self.read_only and not self._index_file_exists(path,
                                                                                   existed)):
            return cls(path, self.base_offset, self.max_index_size, in_memory=True)
        return cls(path, self.base_offset, self.max_index_size, writable=not self.read_only)

    @property
    def offset_index(self) -> OffsetIndex:
        oi = self._offset_index
        if oi is None:
            oi = self._offset_index = self._open_index(OffsetIndex, self._oi_path,
                                                       self.offset_index_existed)
            if self._deferred_check:
                self._check_deferred_indexes()
                oi = self._offset_index
        return oi

    @property
    def time_index(self) -> TimeIndex:
        ti = self._time_index
        if ti is None:
            ti = self._time_index = self._open_index(TimeIndex, self._ti_path,
                                                     self.time_index_existed)
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
        max_ts, max_off = index_headers(self.iter_headers(0), oi, ti, self.index_interval_bytes,
                                        self.base_offset)
        self._max_ts, self._max_ts_offset = max_ts, max_off

    @property
    def txn_index(self) -> TransactionIndex:
        txi = self._txn_index
        if txi is None:
            txi = self._txn_index = TransactionIndex(self.base_offset, self._txn_path,
                                                     writable=not self.read_only,
                                                     in_memory=self._memory_indexes)
        return txi

    def _load_max_ts(self) -> int:
        last = self.time_index.last_entry
        self._max_ts = last.timestamp
        self._max_ts_offset = last.offset
        return last.timestamp

    @classmethod
    def open(cls, directory: str, base_offset: int, *, index_interval_bytes: int = 4096,
             max_index_size: int = 10 * 1024 * 1024, segment_jitter_ms: int = 0,
             segment_ms: int = 604800000, file_suffix: str = "", read_only: bool = False,
             preallocate: bool = False, init_file_size: int = 0, clock=None,
             fd: Optional[int] = None,
             listed: Optional["_logdir.SegmentFiles"] = None) -> "Segment":
        """Open (or, unless ``read_only``, create) the segment at ``base_offset`` in
        ``directory``; like Kafka's ``LogSegment.open`` the roll jitter is drawn at random from
        ``[0, min(segment_jitter_ms, segment_ms))``."""
        jitter = 0
        if segment_jitter_ms > 0:
            jitter = random.randrange(min(segment_jitter_ms, segment_ms))
        return cls(directory, base_offset, index_interval_bytes=index_interval_bytes,
                   max_index_size=max_index_size, roll_jitter_ms=jitter, file_suffix=file_suffix,
                   read_only=read_only, preallocate=preallocate, init_file_size=init_file_size,
                   clock=clock, fd=fd, listed=listed)

    # -- basic facts -------------------------------------------------------------------------------
    @property
    def log_path(self) -> str:
        return self._file_records.path

    @property
    def size(self) -> int:
        """Bytes of batches in the segment (buffered bytes included)."""
        return self._file_records.size

    def __len__(self) -> int:
        return self.size

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def max_timestamp_so_far(self) -> int:
        max_ts = self._max_ts
        return self._load_max_ts() if max_ts is None else max_ts

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            self._load_max_ts()
        return self._max_ts_offset

    def read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self._load_max_ts()
        return TimestampOffset(max_ts, self._max_ts_offset)

    @property
    def last_modified(self) -> int:
        """Modification time of the ``.log`` file, in ms."""
        return int(os.stat(self.log_path).st_mtime * 1000)

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
            raise LogClosedError(f"segment {self.log_path} is closed", path=self.log_path)

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ValueError(f"segment {self.log_path} is read-only")

    # -- the .log's bytes (its FileRecords) -------------------------------------------------------
    # ``read_at(position, size)`` and ``read_into(position, buf)`` are the records' own methods
    # (FileRecords.read_at, read_into), bound on the segment when it is made (_init_state).

    def _drain(self) -> None:
        """Write the buffered bytes to the file."""
        self._file_records.drain()

    def discard_buffered(self) -> None:
        """Forget the appended bytes not yet written to the file (for a segment leaving the
        log after an error: closing it then writes nothing more)."""
        self._file_records.discard_buffered()

    def discard_from(self, position: int) -> None:
        """Forget every byte from ``position`` on: the bytes of an append that failed.  Bytes
        still buffered are dropped; bytes already written are cut off the file (best effort:
        a Log is offline by then and its next open recovers).  Earlier bytes are kept."""
        if self._closed or self.read_only:
            return
        self._file_records.discard_from(position)

    def iter_headers(
        self, start_position: int = 0, end_position: Optional[int] = None
    ) -> Iterator[BatchHeader]:
        """Walk the batch headers from ``start_position`` without building batch objects or
        checking CRCs (:meth:`FileRecords.iter_headers`)."""
        return self._file_records.iter_headers(start_position, end_position)

    def iter_batches(
        self, start_position: int = 0, end_position: Optional[int] = None
    ) -> Iterator[Tuple[int, Any]]:
        """``(position, batch)`` for every complete batch from ``start_position``
        (:meth:`FileRecords.iter_batches`; CRCs are not checked there)."""
        return self._file_records.iter_batches(start_position, end_position)

    # -- append ------------------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int,
               shallow_offset_of_max_timestamp: int, records) -> None:
        """Append ``records`` (MemoryRecords or bytes-like, offsets already assigned) whose
        largest offset and timestamp are given (Kafka's ``LogSegment.append``)."""
        data = records.buffer() if isinstance(records, MemoryRecords) else records
        self.append_patched(data, largest_offset, largest_timestamp,
                            shallow_offset_of_max_timestamp)

    def append_patched(self, data, largest_offset: int, largest_timestamp: int,
                       shallow_offset_of_max_timestamp: int,
                       base_offset_patch: Optional[int] = None,
                       epoch_patch: Optional[int] = None) -> None:
        """:meth:`append` of the bytes ``data``, writing ``base_offset_patch`` and
        ``epoch_patch`` (when given) into the batch's base offset and leader epoch fields as
        they are written (both lie before the part a v2 CRC covers)."""
        n = len(data)
        if n == 0:
            return
        if self._closed or self.read_only:
            self._check_writable()
        records = self._file_records
        position = records.size
        rel = largest_offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise InvalidOffsetError(f"Detected offset overflow at offset {largest_offset} in "
                                     f"segment {self.log_path}", offset=largest_offset,
                                     path=self.log_path)
        if position + n > _INT32_MAX:
            raise InvalidRecordError(f"Appending {n} bytes to segment {self.log_path} of "
                                     f"{position} bytes would exceed the 2 GiB segment limit",
                                     path=self.log_path)
        records.append(data, n, base_offset_patch, epoch_patch)
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self._load_max_ts()
        if n < _LOG_OVERHEAD or _I.unpack_from(data, 8)[0] + _LOG_OVERHEAD >= n:
            # One batch: the caller's largest offset and timestamp are that batch's.
            if position == 0:
                self._rolling_based_timestamp = largest_timestamp
            if largest_timestamp > max_ts:
                self._max_ts = max_ts = largest_timestamp
                self._max_ts_offset = shallow_offset_of_max_timestamp
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                (self._offset_index or self.offset_index).append(largest_offset, position)
                (self._time_index or self.time_index).maybe_append(max_ts, self._max_ts_offset)
                self._bytes_since_last_index_entry = n
            else:
                self._bytes_since_last_index_entry += n
        else:
            self._index_batches(data, position, max_ts, base_offset_patch)

    def _index_batches(self, data, position: int, max_ts: int,
                       base_offset_patch: Optional[int]) -> None:
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

    def append_if_fits(self, data, n: int, largest_offset: int, largest_timestamp: int,
                       base_offset_patch: int, epoch_patch: int, max_segment_bytes: int,
                       max_segment_ms: int):
        """The log's hot path: :meth:`should_roll` and :meth:`append_patched` for one v2 batch
        whose largest offset is also the offset of its max timestamp, in one call (the bytes go
        to :meth:`FileRecords.append`, the index entry is written here).  Returns True once
        appended, False when the segment must roll first, None when the cheap checks cannot
        decide (the caller then takes the general route)."""
        records = self._file_records
        position = records.size
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
        if oi is None or ti is None or max_ts is None or self._closed or self.read_only:
            return None
        if oi._entries >= oi._length >> 3 or ti._entries >= ti._length // 12 - 1:
            return False
        rel = largest_offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            return False
        records.append(data, n, base_offset_patch, epoch_patch)
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
            self.txn_index.append(AbortedTxn(completed_txn.producer_id, completed_txn.first_offset,
                                             completed_txn.last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> TxnIndexSearchResult:
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

    def should_roll(self, max_segment_ms: int, max_segment_bytes: int,
                    max_timestamp_in_messages: int, max_offset_in_messages: int,
                    messages_size: int, now_ms: Optional[int] = None) -> bool:
        """Kafka's ``shouldRoll``: size, time (producer timestamps), a full index, or an offset
        that cannot be stored relative to the base offset.  ``now_ms`` (default: the clock) is
        only needed when the segment's first batch has no timestamp."""
        size = self._file_records.size
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
        self._file_records.release_buffer()
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self._load_max_ts()
        self.time_index.maybe_append(max_ts, self._max_ts_offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._file_records.trim()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- read --------------------------------------------------------------------------------------
    def translate_offset(self, offset: int,
                         starting_file_position: int = 0) -> Optional[LogOffsetPosition]:
        """Position and size of the first batch whose last offset is >= ``offset``: an
        offset-index lookup, then a walk over batch headers (Kafka's
        ``searchForOffsetWithSize``); None if there is none."""
        if self._closed:
            self._check_open()
        mapping = (self._offset_index or self.offset_index).lookup(offset)
        pos = mapping.position
        if pos < starting_file_position:
            pos = starting_file_position
        return self._file_records.search_for_offset_with_size(offset, pos,
                                                              self.index_interval_bytes)

    def read(self, start_offset: int, max_size: int, max_position: Optional[int] = None,
             min_one_message: bool = False) -> Optional[MemoryRecords]:
        """Batches from the one holding ``start_offset`` on, at most ``max_size`` bytes and no
        further than ``max_position`` (default: the segment end).  The bytes start at a batch
        boundary (the first batch may begin before ``start_offset``) and may end in a partial
        batch; ``min_one_message`` returns the whole first batch even when it is larger than
        ``max_size``.  None when no batch at or after ``start_offset`` is in this segment."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment "
                             f"{self.log_path}")
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

    def tail_walk(self) -> SegmentWalk:
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

    def walk(self, position: int = 0) -> SegmentWalk:
        """Walk the entry headers from ``position`` (no CRCs) to the end of the segment; where
        the bytes stop framing, look at what follows (:meth:`whole_batch_after`): whole
        entries after them make it damage (recorded, and the walk goes on there), none makes it
        the segment's tail (:func:`~kafkalog.storage.framing.walk_segment`)."""
        return walk_segment(self._file_records, self.base_offset, position,
                            self.whole_batch_after)

    def whole_batch_after(self, position: int) -> Optional[int]:
        """The position of the first whole valid entry after ``position``
        (:func:`~kafkalog.storage.framing.whole_batch_after`), trying the offset-index entries
        past it first."""
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
        self._file_records.end_at(position)
        # what follows the last whole batch is cut: the offset after it stays
        self._next_offset_memo = None if memo is None else (self.size, memo[1])

    def _damage_error(self, position: int, resumed: Optional[int]) -> CorruptRecordError:
        """The error for a writable open that would have to cut whole batches (or a later
        segment's) to recover: nothing is cut."""
        head = self.read_at(position, 12)
        offset = _ENTRY.unpack_from(head, 0)[0] if len(head) >= 8 + 4 else None
        follows = (f"whole valid batches follow at position {resumed}" if resumed is not None
                   else "the log goes on in later segments")
        return CorruptRecordError(
            f"Corrupt batch in {self.log_path} at position {position} ({self.size - position} "
            f"bytes from there to the end of the segment), and {follows}: recovering as a "
            "broker does would discard them, so nothing was cut; open the log read-only to read "
            "around the damage (on_damage='skip'), salvage it, or pass recovery='broker' to cut "
            "the log there as Kafka's recovery does", position, offset, self.log_path)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> Optional[TimestampAndOffset]:
        """The first record (in offset order) with a timestamp >= ``timestamp`` and offset >=
        ``starting_offset``: time-index lookup, offset-index lookup, then a scan."""
        self._check_open()
        ts_entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        return self._file_records.search_for_timestamp(timestamp, position, starting_offset)

    def offset_of_max_timestamp(self) -> Optional[TimestampAndOffset]:
        """The first record carrying the segment's max timestamp (ListOffsets ``-3``)."""
        self._check_open()
        ts = self.max_timestamp_so_far
        if ts < 0:
            return None
        position = self.offset_index.lookup(self._max_ts_offset).position
        records = self._file_records
        return (records.search_for_max_timestamp(ts, position)
                or records.search_for_max_timestamp(ts, 0))

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
        valid = last_index_entry = pos0 = 0
        base = max_ts_off = self.base_offset
        max_ts = -1
        interval = self.index_interval_bytes
        damage: List[Tuple[int, int]] = []
        tail: Optional[int] = None
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
                                f"recovery of {self.log_path}", pos, last, self.log_path)
                        backwards = (pos, pos + batch.size_in_bytes)
                        break
                    if batch.magic >= 2 and batch.base_offset < base:
                        raise CorruptRecordError(
                            f"Batch base offset {batch.base_offset} is below the segment base "
                            f"offset {base}", pos, batch.base_offset, self.log_path)
                    rel = last - base
                    if rel < 0 or rel > _INT32_MAX:
                        raise CorruptRecordError(
                            f"Batch with last offset {last} cannot be stored relative to base "
                            f"offset {base}", pos, last, self.log_path)
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
            cut = tail if torn and tail is not None else self.size  # torn: tail is set
        else:
            bad = damage[0][0] if damage else tail
            if bad is not None and not torn and not may_cut_damage:
                raise self._damage_error(bad, damage[0][1] if damage else None)
            cut = self.size if bad is None else bad
        truncated = self.size - cut
        if self.read_only:
            self._file_records.end_at(cut)
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
        self._file_records.truncate_to(size)

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
        if not (self.offset_index_existed if self._listed else os.path.exists(self._oi_path)):
            raise FileNotFoundError(f"Offset index file {self._oi_path} does not exist")
        if not time_index_file_existed and not self.read_only:
            self.time_index.resize(0)
        if self._txn_listed:  # a listing that found no transaction index: nothing to check
            self.txn_index.sanity_check()

    def verify_indexes(self) -> None:
        """Cross-check the indexes against the log (what ``kafka-dump-log --verify-index-only``
        and ``--index-sanity-check`` look at, plus ordering:
        :func:`~kafkalog.storage.index_check.verify_indexes`).  Raises CorruptIndexError."""
        self._check_open()
        verify_indexes(self)

    # -- lifecycle ---------------------------------------------------------------------------------
    def flush(self, indexes: bool = True) -> None:
        """Write buffered bytes and fsync the ``.log`` (and, unless ``indexes`` is false, the
        offset, time and transaction indexes)."""
        self._check_open()
        if self.read_only:
            return
        self._file_records.flush()
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
                self._file_records.trim()
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close()
            if self._txn_index is not None:
                self._txn_index.close()
        finally:
            self._file_records.close()
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
            self._file_records.close()
            self._closed = True

    def _all_paths(self) -> List[str]:
        return [self.log_path, self._oi_path, self._ti_path, self._txn_path]

    def delete(self) -> None:
        """Close the segment and delete its files."""
        self._file_records.discard_buffered()
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

        self._file_records.rename_to(renamed(self.log_path))
        for attr, idx in (("_oi_path", self._offset_index), ("_ti_path", self._time_index),
                          ("_txn_path", self._txn_index)):
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
        return (f"Segment(base_offset={self.base_offset}, size={self.size}, "
                f"path={self.log_path!r}{', closed' if self._closed else ''})")

