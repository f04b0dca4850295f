"""Kafka's memory-mapped segment indexes: :class:`OffsetIndex` (``.index``) and
:class:`TimeIndex` (``.timeindex``); the transaction index (``.txnindex``) is
:mod:`kafkalog.storage.txn_index`.

Entry layouts (big-endian)::

    .index      relativeOffset int32 | position int32                        (8 bytes)
    .timeindex  timestamp int64 | relativeOffset int32                       (12 bytes)

The offset and time indexes are memory-mapped, as in Kafka's ``AbstractIndex``: a new file is
preallocated to ``segment.index.bytes`` rounded down to the entry size (zero-filled), entries
are written through the map, and the file is trimmed to ``entries * entry_size`` when the
segment is rolled or closed.  Lookups are binary searches for the largest entry whose key is
<= the target, probing the "warm" tail (the last 8 KiB of entries) first.

Files written by real brokers are read as they are, including untrimmed files whose tail is
zero-filled (an active segment after a crash): the entry count stops at the first all-zero
slot, as ``kafka-dump-log`` does (Kafka itself counts every slot and relies on recovery to
rebuild such an index).  An index can also live only in memory (``path=None``), which is how a
read-only :class:`~kafkalog.storage.log.Log` rebuilds an index it may not write.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from typing import Any, Iterator, NamedTuple, Optional, Tuple

from .._format import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY
from ..errors import CorruptIndexError, InvalidOffsetError, KafkaStorageError
from . import fs as _fs
from .files import open_for_write as _open_for_write

__all__ = [
    "OffsetPosition",
    "TimestampOffset",
    "OffsetIndex",
    "TimeIndex",
    "read_store_index",
    "STORE_INDEX_LIMIT",
]

_INT32_MAX = 2**31 - 1
_NO_TIMESTAMP = -1
# AbstractIndex.warmEntries: the last 8192 bytes worth of entries are searched first.
_WARM_BYTES = 8192

_OFFSET_ENTRY = OFFSET_INDEX_ENTRY
_TIME_ENTRY = TIME_INDEX_ENTRY
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetPosition(NamedTuple):
    """An offset-index entry: absolute ``offset`` and the byte ``position`` of its batch."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time-index entry: ``timestamp`` (ms) and the absolute ``offset`` it maps to."""

    timestamp: int
    offset: int


def _round_down(n: int, factor: int) -> int:
    return n - n % factor


def _check_int(name: str, value, lo: int, hi: int, where) -> None:
    """TypeError for a non-integer ``value``, ValueError outside ``[lo, hi]``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} ({where})")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {value} ({where})")


_BLOCK = 4096
# posix_fallocate errors meaning "this file system cannot reserve space that way".
_NO_FALLOCATE = {errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS, getattr(errno, "ENOTSUP", 95)}


def _reserve(fd: int, start: int, end: int) -> None:
    """Make the file system back bytes ``[start, end)`` of ``fd`` with real blocks, so that
    writing through a memory map of them can never fault (SIGBUS) on a full disk: a full disk
    is an OSError (ENOSPC) here instead.  Existing bytes are never changed.  Uses
    ``posix_fallocate``; where the file system or platform lacks it, writes a zero byte into
    every block that still reads as zero (what the C library's own emulation does)."""
    if end <= start:
        return
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, start, end - start)
            return
        except OSError as e:
            if e.errno not in _NO_FALLOCATE:
                raise
    size = os.fstat(fd).st_size
    pos = start - start % _BLOCK + _BLOCK - 1  # the last byte of each block
    last = end - 1
    while True:
        p = min(pos, last)
        if p < start:
            p = start
        if p >= size or os.pread(fd, 1, p) in (b"", b"\0"):
            os.pwrite(fd, b"\0", p)
        if p >= last:
            break
        pos += _BLOCK


def _count_entries_in_file(fd: int, size: int, entry_size: int) -> int:
    """Entries in an existing index file: every slot up to the first all-zero one, read with
    ``pread`` rather than through a map, so that a sparse tail the file system cannot back
    (a full disk) is never faulted in."""
    return _count_entries(size // entry_size,
                          lambda n: not any(os.pread(fd, entry_size, n * entry_size)))


def _count_entries_in_bytes(data, entry_size: int) -> int:
    """:func:`_count_entries_in_file` over bytes already read: every slot up to the first
    all-zero one."""
    return _count_entries(len(data) // entry_size,
                          lambda n: not any(data[n * entry_size: (n + 1) * entry_size]))


def _count_entries(slots: int, zero) -> int:
    """The search of :func:`_count_entries_in_file` with ``zero(slot)`` telling whether a slot
    is all zero (the same slots probed, so the same answer on any content)."""
    if slots == 0 or not zero(slots - 1):
        return slots
    lo, hi = 0, slots - 1  # the answer lies in [lo, hi]; slot hi is zero
    while lo < hi:
        mid = (lo + hi) // 2
        if zero(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


# Index files of a segment in a store larger than this (and than the configured
# segment.index.bytes) are refused rather than read.
STORE_INDEX_LIMIT = 10 * 1024 * 1024
# An offset or time index up to this size is read in one request; a larger one is searched for
# its end in pages of this size (a multiple of both entry sizes) first.
_INDEX_PAGE = 12 * 1024


def read_store_index(fs: "_fs.FileSystem", path: str, entry_size: int,
                     limit: int = STORE_INDEX_LIMIT) -> Tuple[bytes, int]:
    """``(entries, file size)`` of an offset (``entry_size`` 8) or time (12) index in a
    store, counted as a local read-only open counts them (every slot up to the first all-zero
    one, found with the same search), reading only what that needs: a trimmed index whole, an
    index preallocated with zeros (a broker's active segment) its entries and the few pages
    the search probes, not its zero tail.  A file over ``limit`` bytes is a KafkaStorageError."""
    with fs.open_read(path) as f:
        size = f.size
        if size > limit:
            raise KafkaStorageError(
                f"{path} is {size} bytes, more than the {limit} an index may have here (raise "
                "segment.index.bytes in the Log's config to read it)",
                path=path, operation="reading an index")
        get = getattr(f, "fetch", f.read)  # exact ranges where the file can (no read-ahead)
        slots = size // entry_size
        if size <= _INDEX_PAGE:
            data = get(0, size)
            return data[: _count_entries(slots, lambda n: not any(
                data[n * entry_size: (n + 1) * entry_size])) * entry_size], size
        pages: dict = {}

        def zero(n: int) -> bool:
            pos = n * entry_size
            page = pos // _INDEX_PAGE
            got = pages.get(page)
            if got is None:
                got = pages[page] = get(page * _INDEX_PAGE, _INDEX_PAGE)
            rel = pos - page * _INDEX_PAGE
            return not any(got[rel: rel + entry_size])

        n = _count_entries(slots, zero)
        want = n * entry_size
        last = -(-want // _INDEX_PAGE)
        if all(p in pages for p in range(last)):
            data = b"".join(pages[p] for p in range(last))[:want]
        else:
            data = get(0, want)
        return data, size


class _Index:
    """Shared machinery of the two memory-mapped indexes (Kafka's AbstractIndex)."""

    ENTRY_SIZE = 0
    __slots__ = (
        "path",
        "base_offset",
        "_max_index_size",
        "_writable",
        "_buf",
        "_length",
        "_entries",
        "_resized",
        "_closed",
        "_in_memory",
    )

    def __init__(
        self,
        path: Optional[str],
        base_offset: int,
        max_index_size: int = -1,
        writable: bool = True,
        in_memory: bool = False,
    ) -> None:
        es = self.ENTRY_SIZE
        _check_int("base_offset", base_offset, 0, 2**63 - 1, path)
        _check_int("max_index_size", max_index_size, -1, _INT32_MAX, path)
        self.path = os.fspath(path) if path is not None else None
        self.base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        # mmap, bytearray, bytes (from_bytes) or None (empty); Any: read only while it holds
        # entries, where a check for None would cost every lookup
        self._buf: Any = None
        self._length = 0
        self._entries = 0
        self._resized = False
        self._closed = False
        self._in_memory = in_memory or self.path is None
        if self._in_memory:
            # In-memory index (read-only logs rebuild their indexes here); ``path`` only names it.
            self._writable = True
            size = _round_down(max(max_index_size, 0), es)
            self._buf = bytearray(size)
            self._length = size
            return
        assert self.path is not None  # a file-backed index has a path
        if writable:
            created = not os.path.exists(self.path)
            try:
                fd = _open_for_write(self.path, os.O_RDWR | os.O_CREAT)  # no planted link out
            except OSError as e:  # a directory or a FIFO in its place, no permission, ...
                raise KafkaStorageError.from_os_error(e, "opening an index", path=self.path)
            try:
                if created:
                    if max_index_size < es:
                        raise ValueError(
                            f"max_index_size must be at least {es} to create {self.path}, "
                            f"not {max_index_size}"
                        )
                    size = _round_down(max_index_size, es)
                    os.ftruncate(fd, size)
                    try:
                        _reserve(fd, 0, size)
                    except OSError:
                        os.ftruncate(fd, 0)  # no sparse tail left to fault on later
                        raise
                    entries = 0
                else:
                    size = os.fstat(fd).st_size
                    entries = _count_entries_in_file(fd, size, es)
                    # Back the tail that appends will write through the map (an untrimmed
                    # file from a crash may be sparse on a disk that is now full).
                    _reserve(fd, entries * es, size)
                self._map(fd, size)
            except OSError as e:
                raise KafkaStorageError.from_os_error(e, "opening an index", path=self.path)
            finally:
                os.close(fd)  # the mapping keeps its own handle
            self._entries = entries
        else:
            try:
                fd = _fs.open_local_fd(self.path)  # regular files only
            except FileNotFoundError:
                return  # an absent index reads as empty
            try:
                for attempt in range(3):
                    size = os.fstat(fd).st_size
                    # Only the entries are mapped: slots past them (maybe a sparse tail the
                    # file system cannot back) are never touched.
                    self._entries = _count_entries_in_file(fd, size, es)
                    try:
                        self._map(fd, size, self._entries * es)
                        break
                    except ValueError:  # a writer trimmed the file meanwhile: look again
                        if attempt == 2:
                            raise CorruptIndexError(
                                f"index file {self.path} keeps shrinking while it is opened",
                                path=self.path,
                            ) from None
            except OSError as e:
                raise KafkaStorageError.from_os_error(e, "opening an index", path=self.path)
            finally:
                os.close(fd)

    @classmethod
    def from_bytes(cls, path: str, base_offset: int, data, max_index_size: int = -1,
                   length: Optional[int] = None):
        """A read-only index over the bytes of its file read elsewhere (an index in an object
        store, read through :mod:`kafkalog.storage.fs`): the same entries, lookups and checks
        as opening ``path`` read-only; ``path`` only names it.  ``data``: the whole file, or
        with ``length`` (the file's size) exactly its counted entries."""
        self = cls(None, base_offset, -1, in_memory=True)  # nothing preallocated
        es = cls.ENTRY_SIZE
        if length is None:
            entries = _count_entries_in_bytes(data, es)
            length = len(data)
        else:
            entries = len(data) // es
        _check_int("max_index_size", max_index_size, -1, _INT32_MAX, path)
        self.path = os.fspath(path)
        self._max_index_size = max_index_size
        self._buf = bytes(data[: entries * es])
        self._length = length
        self._entries = entries
        self._writable = False
        self._after_truncate()  # the last entry
        return self

    # -- mapping ------------------------------------------------------------------------------
    def _map(self, fd: int, size: int, map_size: Optional[int] = None) -> None:
        """Map ``map_size`` bytes (default: all ``size`` bytes of the file)."""
        if map_size is None:
            map_size = size
        if map_size == 0:
            self._buf = None
            self._length = size
            return
        access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
        self._buf = mmap.mmap(fd, map_size, access=access)
        self._length = size

    def _remap_after_failure(self) -> None:
        """After a failed resize: map the file again at the length it has now, so the entries
        stay readable; an index that cannot be mapped again is closed."""
        self._unmap()
        assert self.path is not None  # in-memory indexes are not mapped
        try:
            fd = _open_for_write(self.path, os.O_RDWR)  # mapped writable: no planted link out
            try:
                size = _round_down(os.fstat(fd).st_size, self.ENTRY_SIZE)
                self._map(fd, size)
            finally:
                os.close(fd)
            self._entries = min(self._entries, size // self.ENTRY_SIZE)
        except Exception:
            self._buf = None
            self._length = 0
            self._entries = 0
            self._closed = True

    def _unmap(self) -> None:
        buf = self._buf
        self._buf = None
        if isinstance(buf, mmap.mmap):
            buf.close()

    # -- properties -----------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        """Slots in the current mapping (Kafka: ``mmap.limit / entrySize``)."""
        return self._length // self.ENTRY_SIZE

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def length(self) -> int:
        """Bytes in the file (or in-memory buffer), preallocated tail included."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes taken by the entries."""
        return self._entries * self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def writable(self) -> bool:
        return self._writable

    def __len__(self) -> int:
        return self._entries

    def __bool__(self) -> bool:  # an empty index is still an index
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise ValueError(f"index {self.path} is read-only")

    # -- search ---------------------------------------------------------------------------------
    def _key(self, slot: int) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _value(self, slot: int) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target: int, by_value: bool = False) -> int:
        """Slot of the largest entry whose key (or value) is <= target; -1 if none.
        Probes the warm tail first, like Kafka's ``indexSlotRangeFor``."""
        n = self._entries
        if n == 0:
            return -1
        get = self._value if by_value else self._key
        first_hot = max(0, n - 1 - _WARM_BYTES // self.ENTRY_SIZE)
        if get(first_hot) < target:
            lo, hi = first_hot, n - 1
        else:
            if get(0) > target:
                return -1
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            k = get(mid)
            if k > target:
                hi = mid - 1
            elif k < target:
                lo = mid
            else:
                return mid
        return lo

    def _smallest_upper_bound_slot(self, target: int, by_value: bool = False) -> int:
        """Slot of the smallest entry whose key (or value) is >= target; -1 if none."""
        n = self._entries
        if n == 0:
            return -1
        get = self._value if by_value else self._key
        if get(n - 1) < target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if get(mid) < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- mutation ------------------------------------------------------------------------------
    def resize(self, new_size: int) -> bool:
        """Set the file (or buffer) length to ``new_size`` rounded down to the entry size;
        entries beyond it are dropped.  Returns whether the length changed."""
        self._check_writable()
        _check_int("new_size", new_size, -(2**63), _INT32_MAX, self.path)
        rounded = _round_down(max(new_size, 0), self.ENTRY_SIZE)
        if rounded == self._length:
            return False
        if self._in_memory:
            buf = self._buf
            if rounded < len(buf):
                del buf[rounded:]
            else:
                buf.extend(bytes(rounded - len(buf)))
            self._length = rounded
        else:
            self._unmap()
            assert self.path is not None  # not in memory
            try:
                fd = _open_for_write(self.path, os.O_RDWR)
                try:
                    old_size = os.fstat(fd).st_size
                    os.ftruncate(fd, rounded)
                    if rounded > old_size:
                        try:
                            _reserve(fd, old_size, rounded)
                        except OSError:
                            os.ftruncate(fd, old_size)  # never leave an unbacked tail mapped
                            raise
                    self._map(fd, rounded)
                finally:
                    os.close(fd)
            except BaseException as e:
                self._remap_after_failure()
                if isinstance(e, OSError):
                    raise KafkaStorageError.from_os_error(
                        e, "resizing an index", path=self.path, position=rounded
                    )
                raise
            self._resized = True
        self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
        return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries it holds (done on roll, close and recovery)."""
        if self._writable and not self._closed:
            self.resize(self._entries * self.ENTRY_SIZE)

    def _truncate_to_entries(self, entries: int) -> None:
        self._check_writable()
        if entries < self._entries:
            # Zero the dropped slots so a later crash cannot resurrect them.
            start = entries * self.ENTRY_SIZE
            end = self._entries * self.ENTRY_SIZE
            self._buf[start:end] = bytes(end - start)
        self._entries = entries
        self._after_truncate()

    def _after_truncate(self) -> None:
        pass

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_to_entries(0)

    def reset(self) -> None:
        """Remove every entry and re-expand to ``max_index_size`` (start of a recovery)."""
        self.truncate()
        if self._max_index_size > 0:
            self.resize(self._max_index_size)

    def flush(self) -> None:
        """Write the mapped entries (and a changed file length) to disk."""
        if self._closed or self._in_memory:
            return
        if isinstance(self._buf, mmap.mmap) and self._writable:
            try:
                self._buf.flush()
            except OSError as e:
                raise KafkaStorageError.from_os_error(e, "syncing an index", path=self.path)
        # Like Kafka, a changed file length (preallocation, trim) is not fsynced: a length lost
        # in a crash leaves a zero-filled tail, which is not counted as entries on open.
        self._resized = False

    def close_handler(self) -> None:
        """Unmap and close the file without trimming it."""
        if self._closed:
            return
        self._unmap()
        self._closed = True

    def close(self) -> None:
        """Trim the file to its entries, then unmap and close it."""
        if self._closed:
            return
        self.trim_to_valid_size()
        self.close_handler()

    def delete_if_exists(self) -> bool:
        self.close_handler()
        if self.path is None or self._in_memory:
            return False
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, new_path: str) -> None:
        """Rename the file (the mapping stays valid)."""
        if self.path is None or self._in_memory:
            self.path = os.fspath(new_path)
            return
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = os.fspath(new_path)

    @property
    def file_exists(self) -> bool:
        return self.path is not None and not self._in_memory and os.path.exists(self.path)

    @property
    def in_memory(self) -> bool:
        return self._in_memory

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={self.path!r}, base_offset={self.base_offset}, "
            f"entries={self._entries}, max_entries={self.max_entries})"
        )


class OffsetIndex(_Index):
    """Sparse map from offsets to byte positions in a segment's ``.log`` (Kafka's OffsetIndex).

    ``lookup(offset)`` returns the entry with the largest offset <= ``offset`` (or
    ``(base_offset, 0)``); the caller then scans batch headers forward from that position.
    """

    ENTRY_SIZE = 8
    __slots__ = ("_last_offset",)

    def __init__(
        self,
        path: Optional[str],
        base_offset: int,
        max_index_size: int = -1,
        writable: bool = True,
        in_memory: bool = False,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable, in_memory)
        self._last_offset = self._read_last_offset()

    def _read_last_offset(self) -> int:
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + _I32.unpack_from(self._buf, (self._entries - 1) * 8)[0]

    def _after_truncate(self) -> None:
        self._last_offset = self._read_last_offset()

    def _key(self, slot: int) -> int:
        return self.base_offset + _I32.unpack_from(self._buf, slot * 8)[0]

    def _value(self, slot: int) -> int:
        return _I32.unpack_from(self._buf, slot * 8 + 4)[0]

    @property
    def last_offset(self) -> int:
        """Offset of the last entry (the base offset when empty)."""
        return self._last_offset

    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry (absolute offset, position)."""
        if n < 0 or n >= self._entries:
            raise IndexError(
                f"Attempt to fetch the {n}th entry from index {self.path}, which has size "
                f"{self._entries}."
            )
        rel, pos = _OFFSET_ENTRY.unpack_from(self._buf, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def __iter__(self) -> Iterator[OffsetPosition]:
        for i in range(self._entries):
            yield self.entry(i)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``, else ``(base_offset, 0)``."""
        # Inlined binary search (hot path: every read and every offset lookup).
        n = self._entries
        if n == 0:
            return OffsetPosition(self.base_offset, 0)
        buf = self._buf
        target = target_offset - self.base_offset
        unpack = _I32.unpack_from
        first_hot = n - 1 - _WARM_BYTES // 8
        if first_hot < 0:
            first_hot = 0
        if unpack(buf, first_hot * 8)[0] < target:
            lo, hi = first_hot, n - 1
        else:
            if unpack(buf, 0)[0] > target:
                return OffsetPosition(self.base_offset, 0)
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            k = unpack(buf, mid * 8)[0]
            if k > target:
                hi = mid - 1
            elif k < target:
                lo = mid
            else:
                lo = mid
                break
        rel, pos = _OFFSET_ENTRY.unpack_from(buf, lo * 8)
        if pos < 0:  # a damaged entry (no batch starts there): a walk from the start is right
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + rel, pos)

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> Optional[OffsetPosition]:
        """The first entry whose position is >= ``fetch_offset.position + fetch_size``."""
        slot = self._smallest_upper_bound_slot(fetch_offset.position + fetch_size, by_value=True)
        if slot == -1:
            return None
        return self.entry(slot)

    def can_append_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= _INT32_MAX

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must increase strictly (Kafka's InvalidOffsetException)."""
        n = self._entries
        if n >= self._length >> 3:
            self._check_writable()
            raise InvalidOffsetError(
                f"Attempt to append to a full index (size = {n}).", path=self.path, offset=offset
            )
        if n != 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {n} no larger than the "
                f"last offset appended ({self._last_offset}) to {self.path}.",
                path=self.path,
                offset=offset,
            )
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise InvalidOffsetError(
                f"Integer overflow for offset: {offset} ({self.path})",
                path=self.path,
                offset=offset,
            )
        if not self._writable or self._closed:
            self._check_writable()
        try:
            _OFFSET_ENTRY.pack_into(self._buf, n << 3, rel, position)
        except struct.error:
            _check_int("offset", offset, 0, 2**63 - 1, self.path)
            _check_int("position", position, 0, _INT32_MAX, self.path)
            raise
        self._entries = n + 1
        self._last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset)
        if slot < 0:
            new_entries = 0
        elif self._key(slot) == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def sanity_check(self, full: bool = False) -> None:
        """Kafka's checks: the last offset is >= the base offset and the file length is a
        multiple of 8.  With ``full`` also require strictly increasing offsets and
        non-decreasing, non-negative positions."""
        if self._entries != 0 and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset "
                f"{self.base_offset}.",
                path=self.path,
            )
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}.",
                path=self.path,
            )
        if self._entries != 0 and self.last_entry().position < 0:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has a last entry with the "
                f"negative position {self.last_entry().position}.",
                path=self.path,
            )
        if full:
            prev_off = None
            prev_pos = -1
            for i, (off, pos) in enumerate(self):
                if off < self.base_offset or (prev_off is not None and off <= prev_off):
                    raise CorruptIndexError(
                        f"Corrupt index found, index file ({self.path}) has entry {i} with "
                        f"offset {off} not larger than the previous offset {prev_off}.",
                        path=self.path,
                        offset=off,
                    )
                if pos < prev_pos:
                    raise CorruptIndexError(
                        f"Corrupt index found, index file ({self.path}) has entry {i} with "
                        f"position {pos} smaller than the previous position {prev_pos}.",
                        path=self.path,
                        offset=off,
                    )
                prev_off, prev_pos = off, pos


class TimeIndex(_Index):
    """Sparse map from timestamps to offsets (Kafka's TimeIndex).

    Timestamps in it strictly increase: an entry is appended only when the segment's max
    timestamp grew.  One slot is kept free for the final entry that a roll or close appends
    (``is_full`` at ``max_entries - 1``).
    """

    ENTRY_SIZE = 12
    __slots__ = ("_last_entry",)

    def __init__(
        self,
        path: Optional[str],
        base_offset: int,
        max_index_size: int = -1,
        writable: bool = True,
        in_memory: bool = False,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable, in_memory)
        self._last_entry = self._read_last_entry()

    def _read_last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(_NO_TIMESTAMP, self.base_offset)
        ts, rel = _TIME_ENTRY.unpack_from(self._buf, (self._entries - 1) * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def _after_truncate(self) -> None:
        self._last_entry = self._read_last_entry()

    def _key(self, slot: int) -> int:
        return _I64.unpack_from(self._buf, slot * 12)[0]

    def _value(self, slot: int) -> int:
        return self.base_offset + _I32.unpack_from(self._buf, slot * 12 + 8)[0]

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        return self._last_entry

    def entry(self, n: int) -> TimestampOffset:
        if n < 0 or n >= self._entries:
            raise IndexError(
                f"Attempt to fetch the {n}th entry from time index {self.path}, which has size "
                f"{self._entries}."
            )
        ts, rel = _TIME_ENTRY.unpack_from(self._buf, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def __iter__(self) -> Iterator[TimestampOffset]:
        for i in range(self._entries):
            yield self.entry(i)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, else ``(-1, base_offset)``."""
        slot = self._largest_lower_bound_slot(target_timestamp)
        if slot == -1:
            return TimestampOffset(_NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if the timestamp is larger than the last entry's.
        A smaller offset raises InvalidOffsetError, a smaller timestamp ValueError."""
        n = self._entries
        if not skip_full_check and n >= self._length // 12 - 1:
            self._check_writable()
            raise InvalidOffsetError(
                f"Attempt to append to a full time index (size = {n}).",
                path=self.path,
                offset=offset,
            )
        last_ts, last_off = self._last_entry
        if n != 0 and offset < last_off:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {n} no larger than the last "
                f"offset appended ({last_off}) to {self.path}.",
                path=self.path,
                offset=offset,
            )
        if n != 0 and timestamp < last_ts:
            raise ValueError(
                f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger than the "
                f"last timestamp appended ({last_ts}) to {self.path}."
            )
        if timestamp > last_ts:
            rel = offset - self.base_offset
            if rel < 0 or rel > _INT32_MAX:
                raise InvalidOffsetError(
                    f"Integer overflow for offset: {offset} ({self.path})",
                    path=self.path,
                    offset=offset,
                )
            if n >= self._length // 12:
                raise InvalidOffsetError(
                    f"Attempt to append to a full time index (size = {n}).",
                    path=self.path,
                    offset=offset,
                )
            if not self._writable or self._closed:
                self._check_writable()
            try:
                _TIME_ENTRY.pack_into(self._buf, n * 12, timestamp, rel)
            except struct.error:
                _check_int("timestamp", timestamp, -(2**63), 2**63 - 1, self.path)
                _check_int("offset", offset, 0, 2**63 - 1, self.path)
                raise
            self._entries = n + 1
            self._last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset, by_value=True)
        if slot < 0:
            new_entries = 0
        elif self._value(slot) == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def sanity_check(self, full: bool = False) -> None:
        """Kafka's checks: last timestamp >= first timestamp, last offset >= base offset and
        a length that is a multiple of 12.  With ``full`` also require strictly increasing
        timestamps and non-decreasing offsets throughout."""
        n = self._entries
        last_ts, last_off = self._last_entry
        if n != 0:
            first_ts = self._key(0)
            if last_ts < first_ts:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                    f"but the last timestamp is {last_ts} which is less than the first "
                    f"timestamp {first_ts}",
                    path=self.path,
                )
            if last_off < self.base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                    f"but the last offset is {last_off} which is less than the first offset "
                    f"{self.base_offset}",
                    path=self.path,
                )
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Time index file {self.path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}.",
                path=self.path,
            )
        if full:
            prev = None
            for i, (ts, off) in enumerate(self):
                if off < self.base_offset or (
                    prev is not None and (ts <= prev[0] or off < prev[1])
                ):
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({self.path}) has entry {i} "
                        f"({ts}, {off}) out of order after {prev}",
                        path=self.path,
                        offset=off,
                    )
                prev = (ts, off)
