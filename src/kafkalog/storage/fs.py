"""Byte access to the files of a log: one small interface, and its local-file-system backend.

Everything kafkalog reads from a log directory goes through a :class:`FileSystem`:

* :meth:`FileSystem.list_dir` names a directory's entries with what each *is* (a regular file,
  a directory, a FIFO, a device, a socket, a dangling or looping symbolic link), without
  opening any of them;
* :meth:`FileSystem.open_read` opens one regular file for reading and gives a
  :class:`ReadableFile`: its ``size``, ``read(position, length)`` and, where the backend has
  local pages, ``map()`` (a zero-copy read-only buffer).

Only regular files are ever opened.  The local backend checks what a name is before it opens it
(a FIFO, a device or a directory is refused without an ``open``), opens with ``O_NONBLOCK`` so
that a name swapped for a FIFO between the check and the open cannot block, and checks again
with ``fstat`` on the open descriptor.  Every operating-system error is raised as a
:class:`~kafkalog.errors.KafkaStorageError` naming the path and the operation.

The interface is deliberately small (the shape of ``pyarrow.fs``/``fsspec``: list, open, size,
read a range), so that an object-store backend can stand behind it with nothing above it
changing; such a backend (:mod:`kafkalog.storage.store_fs`, which also resolves a location to
its file system) returns ``None`` from ``map()`` and callers read ranges instead.
Nothing here writes.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from typing import TYPE_CHECKING, List, NamedTuple, Optional, Union

from ..errors import KafkaStorageError

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

__all__ = [
    "FILE",
    "DIRECTORY",
    "FIFO",
    "DEVICE",
    "SOCKET",
    "DANGLING_LINK",
    "LOOPING_LINK",
    "MISSING",
    "OTHER",
    "Entry",
    "NotRegularFileError",
    "MissingFileError",
    "not_regular_error",
    "ReadableFile",
    "DirectoryHandle",
    "FileSystem",
    "LocalFileSystem",
    "LOCAL",
    "open_local_fd",
    "is_uri",
    "join",
    "parent",
    "basename",
]

# what a name is (Entry.kind)
FILE = "file"
DIRECTORY = "directory"
FIFO = "fifo"
DEVICE = "device"
SOCKET = "socket"
DANGLING_LINK = "dangling symbolic link"
LOOPING_LINK = "looping symbolic link"
MISSING = "missing"
OTHER = "unknown file type"

PathLike = Union[str, "os.PathLike[str]"]


class Entry(NamedTuple):
    """One name in a directory: ``kind`` is :data:`FILE`, :data:`DIRECTORY`, :data:`FIFO`,
    :data:`DEVICE`, :data:`SOCKET`, :data:`DANGLING_LINK`, :data:`LOOPING_LINK`,
    :data:`MISSING` (vanished while listed) or :data:`OTHER`; a symbolic link that resolves is
    the kind of its target and has ``link`` True."""

    name: str
    path: str
    kind: str
    link: bool = False


class NotRegularFileError(KafkaStorageError):
    """kafkalog refused to open a name for reading because it is not a regular file (a FIFO, a
    device, a directory, a socket, a dangling or looping symbolic link); ``kind`` says which."""

    def __init__(
        self,
        message: str,
        position: Optional[int] = None,
        offset: Optional[int] = None,
        path: Optional[str] = None,
        errno: Optional[int] = None,
        operation: Optional[str] = None,
        kind: Optional[str] = None,
    ) -> None:
        super().__init__(message, position, offset, path, errno, operation)
        self.kind = kind
        if kind not in (None, MISSING, DANGLING_LINK):
            self.strerror = f"is a {kind}, not a regular file"

    def __reduce__(self):
        return (
            type(self),
            (self.message, self.position, self.offset, self.path, self.errno, self.operation,
             self.kind),
        )


def _storage_error(err: OSError, operation: str, path: str) -> KafkaStorageError:
    return KafkaStorageError.from_os_error(err, operation, path=path)


class ReadableFile:
    """A regular file open for reading.  ``size`` is its size when opened."""

    path: str
    size: int

    def read(self, position: int, length: int) -> bytes:  # pragma: no cover - interface
        """Up to ``length`` bytes from ``position`` (fewer only at the end of the file)."""
        raise NotImplementedError

    def map(self):  # pragma: no cover - interface
        """A read-only buffer of the whole file without copying (``b""`` when empty), or
        ``None`` where the backend has no local pages (read ranges instead).  The buffer stays
        valid until :meth:`close`."""
        return None

    def unmap(self) -> None:
        """Release the buffer :meth:`map` gave (the file stays open); a later ``map()`` maps
        again."""

    def close(self) -> None:  # pragma: no cover - interface
        pass

    def __enter__(self) -> "ReadableFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DirectoryHandle:
    """A directory held open: its entries listed and its regular files opened relative to the
    directory it was when opened, even after a rename or a new directory takes its name (a
    reader that must see one version of a partition directory holds one).  ``identity`` tells
    this directory from any other (device and inode where the backend has them)."""

    path: str
    identity: tuple

    def list_dir(self) -> List[Entry]:  # pragma: no cover - interface
        raise NotImplementedError

    def open_read(self, name: str) -> ReadableFile:  # pragma: no cover - interface
        """Open the regular file ``name`` of this directory (the same checks as
        :meth:`FileSystem.open_read`; MissingFileError when it is not there)."""
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        pass

    def __enter__(self) -> "DirectoryHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FileSystem:
    """Where a log's bytes live.  Subclasses implement the four methods; nothing writes."""

    def open_dir(self, path: PathLike) -> Optional[DirectoryHandle]:
        """Hold the directory ``path`` open (:class:`DirectoryHandle`), or None where the
        backend cannot (callers then open by path).  MissingFileError when it is not there,
        NotRegularFileError when it is not a directory."""
        return None

    def glob(self, pattern: str) -> List[str]:  # pragma: no cover - interface
        """The paths matching a shell pattern, sorted."""
        raise NotImplementedError

    def list_dir(self, path: PathLike) -> List[Entry]:  # pragma: no cover - interface
        raise NotImplementedError

    def kind(self, path: PathLike) -> str:  # pragma: no cover - interface
        """What ``path`` is (an :class:`Entry` kind); :data:`MISSING` when nothing is there."""
        raise NotImplementedError

    def open_read(self, path: PathLike) -> ReadableFile:  # pragma: no cover - interface
        raise NotImplementedError

    def size(self, path: PathLike) -> int:
        """The size of the regular file ``path`` without reading it (the errors of
        :meth:`open_read`)."""
        with self.open_read(path) as f:
            return f.size

    def modified_ms(self, path: PathLike) -> Optional[int]:
        """When the file ``path`` was last written, in ms since the epoch (an object's upload
        time); None where the backend does not say."""
        return None

    def version_key(self, path: PathLike) -> Optional[tuple]:
        """A value that changes whenever the file ``path`` does, as this file system last saw
        it (an object store: its latest listing or inspection, no new request where one holds
        the file); None where it cannot say, and for a file that is not there.  A cache keyed
        on it (the root checkpoints' parse) is valid while the key is equal."""
        return None

    def refresh(self) -> None:
        """Forget what this file system remembers of files and directories (an object store's
        listings and inspections): the next question about any of them asks again.  Called
        when a new plan or a new read starts, so that neither trusts what an earlier one saw;
        nothing to forget locally, where every open asks the system."""

    def is_local(self) -> bool:
        return False


def _kind_of_mode(mode: int) -> str:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        return DIRECTORY
    if stat.S_ISFIFO(mode):
        return FIFO
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return DEVICE
    if stat.S_ISSOCK(mode):
        return SOCKET
    return OTHER


def _by_name(e) -> str:
    return e.name


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


class _LocalFile(ReadableFile):
    __slots__ = ("path", "size", "_fd", "_mm")

    def __init__(self, path: str, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size
        self._mm: Optional[mmap.mmap] = None

    def fileno(self) -> int:
        return self._fd

    def read(self, position: int, length: int) -> bytes:
        if position < 0 or length < 0:
            raise ValueError(f"position and length must be non-negative ({position}, {length})")
        out = []
        try:
            while length > 0:
                chunk = os.pread(self._fd, length, position)
                if not chunk:
                    break
                out.append(chunk)
                position += len(chunk)
                length -= len(chunk)
        except OSError as e:
            raise KafkaStorageError.from_os_error(e, "reading", path=self.path,
                                                  position=position) from e
        return out[0] if len(out) == 1 else b"".join(out)

    def map(self):
        if self.size == 0:
            return b""
        if self._mm is None:
            try:
                self._mm = mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                if isinstance(e, ValueError):  # the file shrank to nothing since it was opened
                    e = OSError(errno.EINVAL, str(e))
                raise _storage_error(e, "mapping", self.path) from e
        return self._mm

    def detach(self) -> int:
        """Give up the descriptor to the caller (who closes it); the file object is closed."""
        if self._mm is not None:
            raise ValueError("cannot detach a mapped file")
        fd, self._fd = self._fd, -1
        return fd

    def unmap(self) -> None:
        mm, self._mm = self._mm, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:  # a view is still alive: the GC unmaps it with the view
                pass

    def close(self) -> None:
        self.unmap()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # pragma: no cover - a forgotten close
        try:
            if self._fd >= 0:
                os.close(self._fd)
        except Exception:
            pass


class LocalFileSystem(FileSystem):
    """The local file system (POSIX or Windows)."""

    def is_local(self) -> bool:
        return True

    def list_dir(self, path: PathLike) -> List[Entry]:
        path = os.fspath(path)
        out: List[Entry] = []
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as err:
            raise _storage_error(err, "listing a directory", path) from err
        entries.sort(key=_by_name)
        make = Entry._make
        for e in entries:
            try:
                # the directory entry's type (d_type): no stat for plain files and directories
                if e.is_file(follow_symlinks=False):
                    out.append(make((e.name, e.path, FILE, False)))
                elif e.is_dir(follow_symlinks=False):
                    out.append(make((e.name, e.path, DIRECTORY, False)))
                elif e.is_symlink():
                    out.append(make((e.name, e.path, self.kind(e.path), True)))
                else:
                    out.append(make((e.name, e.path, _kind_of_mode(os.lstat(e.path).st_mode),
                                     False)))
            except FileNotFoundError:
                out.append(make((e.name, e.path, MISSING, False)))
            except OSError as err:
                raise _storage_error(err, "listing a directory", e.path) from err
        return out

    def kind(self, path: PathLike) -> str:
        path = os.fspath(path)
        try:
            return _kind_of_mode(os.stat(path).st_mode)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return LOOPING_LINK
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                if os.path.islink(path):
                    return DANGLING_LINK
                return MISSING
            raise _storage_error(e, "inspecting a file", path) from e

    def size(self, path: PathLike) -> int:
        path = os.fspath(path)
        try:
            st = os.stat(path)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise _not_regular(path, self.kind(path)) from e
            raise _storage_error(e, "inspecting a file", path) from e
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, _kind_of_mode(st.st_mode))
        return st.st_size

    def open_read(self, path: PathLike) -> ReadableFile:
        path = os.fspath(path)
        kind = self.kind(path)
        if kind != FILE:
            raise _not_regular(path, kind)
        try:
            fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY)
        except OSError as e:
            raise _storage_error(e, "opening for reading", path) from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # swapped between the check and the open
                raise _not_regular(path, _kind_of_mode(st.st_mode))
        except BaseException as e:
            os.close(fd)
            if isinstance(e, OSError) and not isinstance(e, KafkaStorageError):
                raise _storage_error(e, "opening for reading", path) from e
            raise
        return _LocalFile(path, fd, st.st_size)

    def open_dir(self, path: PathLike) -> Optional[DirectoryHandle]:
        path = os.fspath(path)
        if not _DIR_FD:
            return None
        kind = self.kind(path)
        if kind != DIRECTORY:
            err = _not_regular(path, kind)
            if kind not in (MISSING, DANGLING_LINK):
                err.message = f"refusing to open {path} as a directory: it is a {kind}"
                err.args = (err.message,)
            raise err
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _O_NONBLOCK | _O_CLOEXEC)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                raise _not_regular(path, MISSING) from e
            raise _storage_error(e, "opening a directory", path) from e
        return _LocalDir(path, fd)

    def glob(self, pattern: str) -> List[str]:
        import glob

        return sorted(glob.glob(pattern))


class MissingFileError(NotRegularFileError, FileNotFoundError):
    """The name to read does not exist (or is a dangling symbolic link); also a
    ``FileNotFoundError``."""


def not_regular_error(path: str, kind: str, context: str = "",
                      operation: str = "opening for reading") -> NotRegularFileError:
    """The error for a name that is not a regular file (``kind``: an :class:`Entry` kind);
    ``context`` prefixes the message (e.g. ``"cannot read partition t-0"``)."""
    err = _not_regular(path, kind)
    if context:
        err.message = f"{context}: {err.message}"
        err.args = (err.message,)
    err.operation = operation
    return err


def _not_regular(path: str, kind: str) -> NotRegularFileError:
    code = {
        DIRECTORY: errno.EISDIR,
        MISSING: errno.ENOENT,
        DANGLING_LINK: errno.ENOENT,
        LOOPING_LINK: errno.ELOOP,
    }.get(kind)
    if code == errno.ENOENT:
        err: NotRegularFileError = MissingFileError(
            f"cannot read {path}: no such file" + (" (a dangling symbolic link)"
                                                    if kind == DANGLING_LINK else ""),
            path=path, errno=code, operation="opening for reading", kind=kind,
        )
    else:
        err = NotRegularFileError(
            f"refusing to read {path}: it is a {kind}, not a regular file",
            path=path, errno=code, operation="opening for reading", kind=kind,
        )
    return err


_DIR_FD = (
    hasattr(os, "O_DIRECTORY")
    and os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.scandir in os.supports_fd
)


class _LocalDir(DirectoryHandle):
    __slots__ = ("path", "identity", "_fd")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        try:
            st = os.fstat(fd)
        except OSError as e:
            os.close(fd)
            raise _storage_error(e, "inspecting a directory", path) from e
        self.identity = (st.st_dev, st.st_ino)

    def _path(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _check_open(self) -> int:
        if self._fd < 0:
            raise ValueError(f"directory handle of {self.path} is closed")
        return self._fd

    def list_dir(self) -> List[Entry]:
        fd = self._check_open()
        out: List[Entry] = []
        try:
            with os.scandir(fd) as it:
                entries = list(it)
        except OSError as err:
            raise _storage_error(err, "listing a directory", self.path) from err
        entries.sort(key=_by_name)
        make = Entry._make
        for e in entries:
            path = self._path(e.name)
            try:
                if e.is_file(follow_symlinks=False):
                    out.append(make((e.name, path, FILE, False)))
                elif e.is_dir(follow_symlinks=False):
                    out.append(make((e.name, path, DIRECTORY, False)))
                elif e.is_symlink():
                    out.append(make((e.name, path, self._kind(e.name), True)))
                else:
                    st = os.stat(e.name, dir_fd=fd, follow_symlinks=False)
                    out.append(make((e.name, path, _kind_of_mode(st.st_mode), False)))
            except FileNotFoundError:
                out.append(make((e.name, path, MISSING, False)))
            except OSError as err:
                raise _storage_error(err, "listing a directory", path) from err
        return out

    def _kind(self, name: str) -> str:
        fd = self._check_open()
        try:
            return _kind_of_mode(os.stat(name, dir_fd=fd).st_mode)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return LOOPING_LINK
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                try:
                    os.stat(name, dir_fd=fd, follow_symlinks=False)
                    return DANGLING_LINK
                except OSError:
                    return MISSING
            raise _storage_error(e, "inspecting a file", self._path(name)) from e

    def open_read(self, name: str) -> ReadableFile:
        if os.sep in name or (os.altsep and os.altsep in name) or name in ("", ".", ".."):
            raise ValueError(f"not a name in the directory {self.path}: {name!r}")
        fd = self._check_open()
        path = self._path(name)
        kind = self._kind(name)
        if kind != FILE:
            raise _not_regular(path, kind)
        try:
            ffd = os.open(name, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY, dir_fd=fd)
        except OSError as e:
            if e.errno == errno.ENOENT:  # vanished since the check
                raise _not_regular(path, MISSING) from e
            raise _storage_error(e, "opening for reading", path) from e
        try:
            st = os.fstat(ffd)
            if not stat.S_ISREG(st.st_mode):  # swapped between the check and the open
                raise _not_regular(path, _kind_of_mode(st.st_mode))
        except BaseException as e:
            os.close(ffd)
            if isinstance(e, OSError) and not isinstance(e, KafkaStorageError):
                raise _storage_error(e, "opening for reading", path) from e
            raise
        return _LocalFile(path, ffd, st.st_size)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # pragma: no cover - a forgotten close
        try:
            if self._fd >= 0:
                os.close(self._fd)
        except Exception:
            pass


LOCAL = LocalFileSystem()


_PREADV = getattr(os, "preadv", None)


def read_into(fd: int, buf: memoryview, position: int) -> int:
    """Read up to ``len(buf)`` bytes at ``position`` of ``fd`` into ``buf`` (a writable byte
    memoryview): the count read, fewer only at the end of the file."""
    got, size = 0, len(buf)
    while got < size:
        if _PREADV is not None:
            n = _PREADV(fd, [buf[got:]], position + got)
        else:  # pragma: no cover - no preadv here: read, then copy
            data = os.pread(fd, size - got, position + got)
            n = len(data)
            buf[got:got + n] = data
        if not n:
            break
        got += n
    return got


def open_local_fd(path: PathLike) -> int:
    """A read-only descriptor of a local regular file, opened as :meth:`FileSystem.open_read`
    opens (never a FIFO, a device or a directory; KafkaStorageError otherwise).  For the
    segment and index classes, which map or ``pread`` their files themselves."""
    return LOCAL.open_read(path).detach()  # type: ignore[attr-defined]



# -- paths and URIs -----------------------------------------------------------------------------
def is_uri(location: object) -> TypeGuard[str]:
    """Whether ``location`` is a ``scheme://`` URI (a one-letter scheme is a Windows drive)."""
    if not isinstance(location, str):
        return False
    i = location.find("://")
    return i > 1 and location[:i].replace("+", "").replace("-", "").replace(".", "").isalnum()


def join(directory: str, name: str) -> str:
    """``directory``/``name`` for a local path or a URI."""
    if is_uri(directory):
        return directory.rstrip("/") + "/" + name
    return os.path.join(directory, name)


def parent(path: str) -> str:
    """The directory holding ``path`` (a local path or a URI)."""
    if is_uri(path):
        head, _, _ = path.rstrip("/").rpartition("/")
        return head if "://" in head and not head.endswith(":/") else path
    return os.path.dirname(os.path.abspath(path))


def basename(path: str) -> str:
    if is_uri(path):
        return path.rstrip("/").rpartition("/")[2]
    return os.path.basename(path)
