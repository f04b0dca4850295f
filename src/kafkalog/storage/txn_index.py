"""Kafka's transaction index (``.txnindex``): the aborted transactions whose ABORT marker lies
in a segment (Kafka's ``TransactionIndex`` and ``AbortedTxn``).

Entry layout (big-endian, 34 bytes)::

    version int16 | producerId int64 | firstOffset int64 | lastOffset int64
    | lastStableOffset int64

Unlike the offset and time indexes (:mod:`kafkalog.storage.index`) it is neither preallocated
nor memory-mapped: the file is created by the first append and read with plain I/O.
"""

from __future__ import annotations

import os
import struct
from typing import Iterator, List, NamedTuple, Optional, Tuple

from ..errors import CorruptIndexError, InvalidOffsetError, KafkaStorageError
from . import fs as _fs
from .files import open_for_write as _open_for_write
from .files import write_all as _write_all

__all__ = [
    "AbortedTxn",
    "TxnIndexSearchResult",
    "TransactionIndex",
    "iter_txn_entries",
    "txn_index_entries",
]

# version, producer id, first offset, last offset, last stable offset (declared here only)
_TXN_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    """A transaction-index entry (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: List[AbortedTxn]
    is_complete: bool

def iter_txn_entries(raw, base: int, path) -> Iterator[Tuple[int, AbortedTxn]]:
    """``(file position, entry)`` for the whole 34-byte entries of ``raw`` (read at ``base``)."""
    for j in range(0, len(raw) - len(raw) % 34, 34):
        version, pid, first, last, lso = _TXN_ENTRY.unpack_from(raw, j)
        # Kafka reads the version as one byte (the int16's high byte).
        if (version >> 8) & 0xFF != 0:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {(version >> 8) & 0xFF} in "
                f"transaction index {path}, current version is 0",
                position=base + j,
                path=path,
            )
        yield base + j, AbortedTxn(pid, first, last, lso, version)


def txn_index_entries(data) -> Iterator[Tuple[int, int, int, int, int]]:
    """``(version, producer id, first offset, last offset, last stable offset)`` of every
    whole 34-byte entry of a ``.txnindex`` file's bytes, unchecked (for tools that report on
    each entry; ``version`` is the int16's high byte, signed, as Kafka's
    ``AbortedTxn.version()`` reads it)."""
    for i in range(len(data) // 34):
        _v, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, i * 34)
        yield struct.unpack_from(">b", data, i * 34)[0], pid, first, last, lso


class TransactionIndex:
    """Aborted transactions whose ABORT marker lies in this segment (Kafka's TransactionIndex).

    Not preallocated and not mapped: the file is created by the first :meth:`append` and read
    with plain I/O (no file handle is held between calls).  ``path=None`` keeps the entries in
    memory only.
    """

    ENTRY_SIZE = 34
    __slots__ = ("path", "start_offset", "_writable", "_mem", "_last_offset", "_closed", "_dirty")

    def __init__(
        self, start_offset: int, path: Optional[str], writable: bool = True, in_memory: bool = False
    ) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.start_offset = start_offset
        self._writable = writable or in_memory
        self._mem: Optional[bytearray] = bytearray() if (in_memory or path is None) else None
        self._last_offset: Optional[int] = None
        self._closed = False
        self._dirty = False
        # Only the last whole entry is read: the file may be large (or hostile).
        n = self.size_in_bytes // 34
        if n:
            last = next(self._chunks((n - 1) * 34), b"")
            if len(last) >= 34:
                self._last_offset = _TXN_ENTRY.unpack_from(last, 0)[3]

    @classmethod
    def from_bytes(cls, start_offset: int, path: str, data) -> "TransactionIndex":
        """A read-only transaction index over the bytes of its file read elsewhere (an object
        store); ``path`` only names it."""
        self = cls(start_offset, None, in_memory=True)
        self.path = os.fspath(path)
        self._mem = bytearray(data)
        self._writable = False
        n = len(self._mem) // 34
        if n:
            self._last_offset = _TXN_ENTRY.unpack_from(self._mem, (n - 1) * 34)[3]
        return self

    _CHUNK = 34 * 4096

    def _chunks(self, start: int = 0):
        """Whole entries from byte ``start`` on, ~136 KiB at a time (memory stays flat)."""
        if self._mem is not None:
            end = len(self._mem) - len(self._mem) % 34
            for i in range(start, end, self._CHUNK):
                yield bytes(self._mem[i : min(i + self._CHUNK, end)])
            return
        try:
            f = os.fdopen(_fs.open_local_fd(self.path), "rb")  # type: ignore[arg-type]
        except FileNotFoundError:
            return
        with f:
            f.seek(start)
            while True:
                data = f.read(self._CHUNK)
                data = data[: len(data) - len(data) % 34]
                if not data:
                    return
                yield data

    @property
    def size_in_bytes(self) -> int:
        if self._mem is not None:
            return len(self._mem)
        try:
            return os.path.getsize(self.path)  # type: ignore[arg-type]
        except (FileNotFoundError, TypeError):
            return 0

    @property
    def file_exists(self) -> bool:
        return self._mem is None and self.path is not None and os.path.exists(self.path)

    @property
    def last_offset(self) -> Optional[int]:
        return self._last_offset

    def append(self, txn: AbortedTxn) -> None:
        """Append an entry; the last offsets must increase strictly."""
        if self._closed or not self._writable:
            raise ValueError(f"transaction index {self.path} is closed or read-only")
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise InvalidOffsetError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset {self._last_offset} "
                f"of index {self.path}",
                path=self.path,
                offset=txn.last_offset,
            )
        data = _TXN_ENTRY.pack(
            txn.version, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
        )
        if self._mem is not None:
            self._mem += data
        else:
            assert self.path is not None  # a file-backed index (no _mem) has a path
            fd = _open_for_write(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                start = os.fstat(fd).st_size
                try:
                    _write_all(fd, data)  # a short write is continued, never left torn
                except OSError as e:
                    try:
                        os.ftruncate(fd, start)  # no torn entry stays (best effort)
                    except OSError:
                        pass
                    raise KafkaStorageError.from_os_error(
                        e, "writing a transaction index", path=self.path, position=start
                    )
            finally:
                os.close(fd)
            self._dirty = True
        self._last_offset = txn.last_offset

    def _entries_with_position(self):
        base = 0
        for raw in self._chunks():
            yield from iter_txn_entries(raw, base, self.path)
            base += len(raw)

    def all_aborted_txns(self) -> List[AbortedTxn]:
        return [t for _, t in self._entries_with_position()]

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.all_aborted_txns())

    def __len__(self) -> int:
        return self.size_in_bytes // 34

    def __bool__(self) -> bool:
        return True

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``; complete
        once an entry's last stable offset reaches the upper bound."""
        out = []
        for _, t in self._entries_with_position():
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                out.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(out, True)
        return TxnIndexSearchResult(out, False)

    def _truncate_file(self, size: int) -> None:
        if self._mem is not None:
            del self._mem[size:]
            return
        if not self.file_exists:
            return
        if not self._writable:
            raise ValueError(f"transaction index {self.path} is read-only")
        assert self.path is not None  # file_exists: it has one
        fd = _open_for_write(self.path, os.O_WRONLY)  # os.truncate(path) would follow a link
        try:
            os.ftruncate(fd, size)
        except OSError as e:
            raise KafkaStorageError.from_os_error(
                e, "truncating a transaction index", path=self.path, position=size
            )
        finally:
            os.close(fd)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= ``offset``."""
        new_last = None
        for pos, t in self._entries_with_position():
            if t.last_offset >= offset:
                self._truncate_file(pos)
                self._last_offset = new_last
                return
            new_last = t.last_offset

    def reset(self) -> None:
        """Remove every entry."""
        self._truncate_file(0)
        self._last_offset = None

    def sanity_check(self) -> None:
        """Every entry's last offset must be >= the segment's start offset (Kafka); the file
        must also hold whole entries (kafkalog: a torn tail makes the segment recover)."""
        size = self.size_in_bytes
        if size % 34 != 0:
            raise CorruptIndexError(
                f"Transaction index file {self.path} is corrupt, found {size} bytes which is not "
                f"a multiple of 34.",
                path=self.path,
            )
        for _, t in self._entries_with_position():
            if t.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {t} in index {self.path} is less than "
                    f"start offset {self.start_offset}",
                    path=self.path,
                    offset=t.last_offset,
                )

    def flush(self) -> None:
        if self._dirty and self._writable and self.file_exists:
            assert self.path is not None  # file_exists: it has one
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            except OSError as e:
                raise KafkaStorageError.from_os_error(
                    e, "syncing a transaction index", path=self.path
                )
            finally:
                os.close(fd)
        self._dirty = False

    def close(self) -> None:
        self._closed = True

    def delete_if_exists(self) -> bool:
        self.close()
        if self.path is None or self._mem is not None:
            return False
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, new_path: str) -> None:
        if self.path is None or self._mem is not None:
            self.path = os.fspath(new_path)
            return
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = os.fspath(new_path)

    def __repr__(self) -> str:
        return f"TransactionIndex(path={self.path!r}, start_offset={self.start_offset})"
