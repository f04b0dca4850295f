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
changing; such a backend returns ``None`` from ``map()`` and callers read ranges instead.
Nothing here writes.
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import stat
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Union

from ..errors import KafkaStorageError

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
    "ArrowFileSystem",
    "RemoteOptions",
    "remote_options",
    "resolve",
    "is_uri",
    "join",
    "parent",
    "basename",
    "for_path",
    "local_directory",
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
        except OSError as e:
            raise _storage_error(e, "listing a directory", path) from e
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
        except OSError as e:
            raise _storage_error(e, "listing a directory", self.path) from e
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



# -- remote stores: pyarrow.fs behind the same interface ---------------------------------------------
#
# Why pyarrow.fs and not fsspec: pyarrow is already what the arrow and spark extras install, its
# S3/GCS/HDFS/Azure clients are C++ (ranged reads release the GIL, so a read-ahead thread really
# overlaps decoding), it reads the standard AWS variables itself, and it adds no dependency.
# fsspec would add s3fs/gcsfs/adlfs/aiobotocore and an event loop for the same ranged GETs.

_SCHEMES_HINT = {
    "s3": "pip install 'kafkalog[s3]' (pyarrow with S3 support)",
    "s3a": "pip install 'kafkalog[s3]' (pyarrow with S3 support)",
    "gs": "pip install 'kafkalog[gcs]' (pyarrow with GCS support)",
    "gcs": "pip install 'kafkalog[gcs]' (pyarrow with GCS support)",
    "hdfs": "pip install 'kafkalog[hdfs]' (pyarrow) and install libhdfs (a Hadoop client, "
            "HADOOP_HOME, JAVA_HOME, CLASSPATH)",
    "abfs": "pip install 'kafkalog[azure]' (pyarrow>=16 with Azure support)",
    "abfss": "pip install 'kafkalog[azure]' (pyarrow>=16 with Azure support)",
}

DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024


def is_uri(location) -> bool:
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


class RemoteOptions(NamedTuple):
    """How kafkalog reads an object store (``storage_options`` keys of the same names):
    ``block_size`` bytes per ranged read (default 8 MiB; memory held per open file is about
    twice that), ``retries`` attempts after the first failure of a read or a listing, with
    exponential ``backoff`` seconds (doubling), ``connect_timeout``/``request_timeout`` seconds
    for one request."""

    block_size: int = DEFAULT_BLOCK_SIZE
    retries: int = 3
    backoff: float = 0.2
    connect_timeout: float = 5.0
    request_timeout: float = 30.0


_KAFKALOG_OPTIONS = set(RemoteOptions._fields)
_MAX_RETRIES = 100


def remote_options(storage_options: Optional[Mapping[str, Any]] = None) -> RemoteOptions:
    """kafkalog's own keys of ``storage_options`` as :class:`RemoteOptions`, checked before any
    request is made: ``block_size`` an int >= 65536, ``retries`` an int from 0 to 100,
    ``backoff`` a number >= 0, ``connect_timeout``/``request_timeout`` numbers > 0 (finite;
    seconds).  TypeError / ValueError naming the option otherwise: a value no request could
    use would only show later as every read failing."""
    if storage_options is None:
        return RemoteOptions()
    if not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict, not {type(storage_options).__name__}")
    got: Dict[str, Any] = {}
    for name in RemoteOptions._fields:
        if name not in storage_options:
            continue
        v = storage_options[name]
        what = f"storage_options[{name!r}]"
        if name in ("block_size", "retries"):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{what} must be an int, not {type(v).__name__} ({v!r})")
            if name == "block_size" and v < 64 * 1024:
                raise ValueError(f"{what} (bytes per ranged read) must be >= 65536, not {v}")
            if name == "retries" and not 0 <= v <= _MAX_RETRIES:
                raise ValueError(f"{what} (attempts after a failed request) must be from 0 to "
                                 f"{_MAX_RETRIES}, not {v}")
        else:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise TypeError(f"{what} must be a number of seconds, not {type(v).__name__} "
                                f"({v!r})")
            low_ok = v >= 0 if name == "backoff" else v > 0
            if not (low_ok and math.isfinite(v)):
                bound = ">= 0" if name == "backoff" else "> 0"
                raise ValueError(f"{what} must be a finite number of seconds {bound}, not {v}")
            v = float(v)
        got[name] = v
    return RemoteOptions(**got)


def resolve(location: PathLike, storage_options: Optional[dict] = None):
    """``(file_system, path)`` for a local path, a ``file://`` URI or an object-store / HDFS URI
    (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``, ...).  Local paths and ``file://`` give
    :data:`LOCAL` and a local path; other schemes give an :class:`ArrowFileSystem` and the URI
    itself as the path (so every error names the URI).  ``storage_options`` passes keys to the
    pyarrow file system (e.g. ``endpoint_override``, ``region``, ``access_key``,
    ``secret_key``, ``anonymous``) and kafkalog's own :class:`RemoteOptions`.  A scheme whose
    support is not installed is a KafkaStorageError naming the URI and what to install."""
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    remote_options(storage_options)  # checked whatever the location: a bad value is a mistake
    if not is_uri(location):
        return LOCAL, location
    scheme = location.split("://", 1)[0].lower()
    if scheme == "file":
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise KafkaStorageError(
                f"cannot read {location}: a file:// URI names a local path (file:///dir/...),"
                f" not host {parts.netloc!r}", path=location, operation="resolving a URI")
        path = unquote(parts.path)
        if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
            path = path[1:]
        return LOCAL, path
    return ArrowFileSystem.for_uri(location, storage_options), location.rstrip("/")


def _credentials_available(opts: dict) -> bool:
    if opts.get("anonymous") or opts.get("access_key") or opts.get("session_name"):
        return True
    if opts.get("credentials") in ("default", "instance"):
        return True
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return True
    if env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE") \
            or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") \
            or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return True
    shared = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(
        os.path.expanduser("~"), ".aws", "credentials")
    return os.path.isfile(shared)


def _missing_extra(uri: str, scheme: str, err: BaseException) -> KafkaStorageError:
    fix = _SCHEMES_HINT.get(scheme, "install pyarrow with support for this scheme")
    e = KafkaStorageError(
        f"cannot read {uri}: the {scheme}:// scheme is not available here ({err}); {fix}",
        path=uri, operation="resolving a URI")
    return e


class ArrowFileSystem(FileSystem):
    """An object store or HDFS through :mod:`pyarrow.fs`: paths are the URIs themselves.

    Listing a directory is one listing request whose sizes are remembered, so opening or
    sizing a listed file costs no extra request.  Reads are ranged (``block_size`` at a time,
    at most one block cached per open file), retried with backoff, and never short: a range
    that comes back shorter than asked is an error naming the URI, not data.  ``map()`` is
    ``None``: callers read ranges.  ``bytes_read``/``requests`` count what was fetched.

    What is remembered (the sizes and names of listings and inspections) lasts until
    :meth:`refresh`, which a new plan and a new read call: a client kept for the life of a
    process (a reused Spark worker, a long-lived planner) never answers from what an earlier
    plan or task saw (a segment that grew since, a name that appeared).  A listing always asks
    the store, and replaces what was remembered of the names it holds.

    :meth:`version_key` is the size, the modification time and the identity of the listing or
    inspection that saw the file: S3 keeps modification times to the second and pyarrow's
    listings carry no ETag or version, so a file rewritten with the same size within the same
    second has the same size and time; each new listing of its directory gives a new key, so a
    cache keyed on it (the root checkpoints' parse) reads the file again once per listing
    (once per plan), never across plans."""

    def __init__(self, pafs, prefix: str, options: RemoteOptions) -> None:
        self.pafs = pafs
        self.prefix = prefix  # s3://, gs://: URI = prefix + pyarrow path
        self._native_base: Optional[str] = None  # others: pyarrow path = base + URI path
        self.options = options
        self.bytes_read = 0
        self.requests = 0
        # path -> (pyarrow FileInfo, the number of the listing or inspection that gave it)
        self._infos: Dict[str, tuple] = {}
        # the names of each directory as last listed: a name missing there is missing without
        # a request (a listing is as fresh as what it says is there; until refresh())
        self._listed: Dict[str, set] = {}
        self._seen = 0  # listings and inspections so far (what version_key tells apart)
        import threading

        self._lock = threading.Lock()

    def refresh(self) -> None:
        with self._lock:
            self._infos.clear()
            self._listed.clear()

    # -- construction
    @classmethod
    def for_uri(cls, uri: str, storage_options: Optional[dict] = None) -> "ArrowFileSystem":
        options = remote_options(storage_options)
        opts = {k: v for k, v in dict(storage_options or {}).items() if k not in _KAFKALOG_OPTIONS}
        scheme = uri.split("://", 1)[0].lower()
        try:
            import pyarrow.fs as pafs_mod
        except ImportError as e:
            raise _missing_extra(uri, scheme, e) from e
        try:
            if scheme in ("s3", "s3a"):
                fs = cls._s3(pafs_mod, uri, opts, options)
                prefix = scheme + "://"
            elif scheme in ("gs", "gcs"):
                kw = dict(opts)
                kw.setdefault("retry_time_limit", _timedelta(options.request_timeout))
                fs = pafs_mod.GcsFileSystem(**kw)
                prefix = scheme + "://"
            elif opts:
                raise ValueError(
                    f"storage_options {sorted(opts)} are not supported for {scheme}:// here")
            else:
                fs, native = pafs_mod.FileSystem.from_uri(uri)
                # hdfs://host:port/dir, abfs://container@account/dir: the pyarrow path of a URI
                # is a base (/, container/) then the URI's path
                rest = uri.split("://", 1)[1]
                auth, _, rel = rest.partition("/")
                rel = rel.rstrip("/")
                if rel and not native.rstrip("/").endswith(rel):
                    raise ValueError(f"cannot map {uri} to a path of its file system ({native})")
                base = native.rstrip("/")[: len(native.rstrip("/")) - len(rel)]
                out = cls(fs, uri[: len(uri) - len(rest)] + auth, options)
                out._native_base = base if base else ("/" if native.startswith("/") else "")
                return out
        except KafkaStorageError:
            raise
        except (ImportError, AttributeError) as e:
            raise _missing_extra(uri, scheme, e) from e
        except Exception as e:  # OSError, ValueError, pyarrow.ArrowException ...
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if "Unrecognized filesystem type" in msg or "not supported" in msg \
                    or "libjvm" in msg or "libhdfs" in msg or "support" in msg and "enabled" in msg:
                raise _missing_extra(uri, scheme, msg) from e
            raise KafkaStorageError(
                f"cannot open {uri}: {msg}; check the URI and the store's credentials "
                "(see storage_options)", path=uri, operation="resolving a URI") from e
        return cls(fs, prefix, options)

    @staticmethod
    def _s3(pafs_mod, uri: str, opts: dict, options: RemoteOptions):
        if not hasattr(pafs_mod, "S3FileSystem"):
            raise ImportError("this pyarrow was built without S3")
        env = os.environ
        kw = dict(opts)
        cred = kw.pop("credentials", None)
        if not _credentials_available(opts):
            raise KafkaStorageError(
                f"cannot read {uri}: no S3 credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), pass storage_options "
                "{'access_key': ..., 'secret_key': ...}, {'anonymous': True} for a public "
                "bucket, or {'credentials': 'default'} to use the instance's role",
                path=uri, operation="resolving a URI")
        if cred is None and not kw.get("anonymous") and "access_key" not in kw \
                and env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            kw["access_key"] = env["AWS_ACCESS_KEY_ID"]
            kw["secret_key"] = env["AWS_SECRET_ACCESS_KEY"]
            if env.get("AWS_SESSION_TOKEN"):
                kw.setdefault("session_token", env["AWS_SESSION_TOKEN"])
        endpoint = kw.pop("endpoint_url", None) or env.get("AWS_ENDPOINT_URL_S3") \
            or env.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_override" not in kw:
            if endpoint.startswith("http://"):
                kw.setdefault("scheme", "http")
                endpoint = endpoint[len("http://"):]
            elif endpoint.startswith("https://"):
                endpoint = endpoint[len("https://"):]
            kw["endpoint_override"] = endpoint.rstrip("/")
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            kw.setdefault("region", region)
        elif kw.get("endpoint_override"):
            kw.setdefault("region", "us-east-1")  # no region lookup against a custom endpoint
        kw.setdefault("connect_timeout", options.connect_timeout)
        kw.setdefault("request_timeout", options.request_timeout)
        kw.setdefault("retry_strategy", pafs_mod.AwsStandardS3RetryStrategy(max_attempts=2))
        return pafs_mod.S3FileSystem(**kw)

    # -- paths
    def _native(self, path) -> str:
        path = os.fspath(path)
        if not path.startswith(self.prefix):
            raise ValueError(f"{path} is not a path of {self.prefix}")
        p = path[len(self.prefix):].rstrip("/")
        if self._native_base is not None:
            return (self._native_base + p.lstrip("/")) or "/"
        return p

    def _uri(self, native: str) -> str:
        if self._native_base is not None:
            return self.prefix + "/" + native[len(self._native_base):].lstrip("/")
        return self.prefix + native

    def _retry(self, what: str, uri: str, fn, position: Optional[int] = None):
        import time

        from pyarrow.lib import ArrowException

        opts = self.options
        last: Optional[BaseException] = None
        for attempt in range(opts.retries + 1):
            try:
                return fn()
            except KafkaStorageError:
                raise
            except FileNotFoundError as e:
                raise _not_regular(uri, MISSING) from e
            except (OSError, ArrowException) as e:
                last = e
                msg = str(e)
                # not worth retrying: access, credentials, missing bucket, bad request
                if any(s in msg for s in ("AccessDenied", "InvalidAccessKeyId", "NoSuchBucket",
                                           "SignatureDoesNotMatch", "Forbidden", "HTTP status 403",
                                           "HTTP status 404", "HTTP status 400")):
                    break
                if attempt < opts.retries:
                    time.sleep(opts.backoff * (2 ** attempt))
        text = str(last).strip().splitlines()[0] if str(last).strip() else type(last).__name__
        raise KafkaStorageError(
            f"{what} {uri} failed after {opts.retries + 1} attempt(s): {text}; check the URI, "
            "the endpoint (AWS_ENDPOINT_URL / storage_options endpoint_override), the "
            "credentials and the network, or raise storage_options retries/request_timeout",
            path=uri, position=position, operation=what) from last

    # -- listing
    def _info(self, path: str):
        return self._seen_info(path)[0]

    def _seen_info(self, path: str) -> tuple:
        """(FileInfo, which listing or inspection gave it) of ``path``: remembered, else one
        request (a name its directory's listing lacks is missing without one)."""
        with self._lock:
            got = self._infos.get(path)
        if got is not None:
            return got
        import pyarrow.fs as pafs_mod

        native = self._native(path)
        if native in ("", "/"):
            return _FakeDirInfo(native), 0
        parent, _, name = path.rstrip("/").rpartition("/")
        with self._lock:
            names = self._listed.get(parent)
        if names is not None and name not in names:
            return _MissingInfo(native), 0
        self.requests += 1
        info = self._retry("inspecting", path, lambda: self.pafs.get_file_info(native))
        with self._lock:
            self._seen += 1
            got = (info, self._seen)
            if info.type != pafs_mod.FileType.NotFound:
                self._infos[path] = got
        return got

    def kind(self, path: PathLike) -> str:
        import pyarrow.fs as pafs_mod

        t = self._info(os.fspath(path)).type
        if t == pafs_mod.FileType.File:
            return FILE
        if t == pafs_mod.FileType.Directory:
            return DIRECTORY
        if t == pafs_mod.FileType.NotFound:
            return MISSING
        return OTHER

    def list_dir(self, path: PathLike) -> List[Entry]:
        import pyarrow.fs as pafs_mod

        path = os.fspath(path).rstrip("/")
        native = self._native(path)
        sel = pafs_mod.FileSelector(native, recursive=False, allow_not_found=True)
        self.requests += 1
        infos = self._retry("listing", path, lambda: self.pafs.get_file_info(sel))
        if not infos and self.kind(path) == MISSING:
            raise _not_regular(path, MISSING)
        out: List[Entry] = []
        with self._lock:
            self._seen += 1
            seen = self._seen
            names = set()
            for info in infos:
                base = info.path.rstrip("/").rpartition("/")[2]
                uri = self._uri(info.path.rstrip("/"))
                self._infos[uri] = (info, seen)
                names.add(base)
                if info.type == pafs_mod.FileType.File:
                    kind = FILE
                elif info.type == pafs_mod.FileType.Directory:
                    kind = DIRECTORY
                else:
                    kind = OTHER
                out.append(Entry(base, uri, kind, False))
            self._listed[path] = names
        out.sort(key=_by_name)
        return out

    def glob(self, pattern: str) -> List[str]:
        """Shell patterns over the URI's components; one listing per directory level that
        holds a pattern."""
        import fnmatch

        head, _, rest = pattern.partition("://")
        parts = rest.split("/")
        # the fixed leading components (bucket, prefix) up to the first wildcard
        fixed = []
        for i, part in enumerate(parts):
            if any(c in part for c in "*?["):
                break
            fixed.append(part)
        else:
            return [pattern] if self.kind(pattern) != MISSING else []
        current = [head + "://" + "/".join(fixed)]
        for part in parts[len(fixed):]:
            nxt = []
            for d in current:
                if any(c in part for c in "*?["):
                    try:
                        entries = self.list_dir(d)
                    except MissingFileError:
                        continue
                    nxt.extend(e.path for e in entries if fnmatch.fnmatchcase(e.name, part))
                else:
                    nxt.append(d.rstrip("/") + "/" + part)
            current = nxt
        return sorted(p for p in current if self.kind(p) != MISSING)

    def size(self, path: PathLike) -> int:
        import pyarrow.fs as pafs_mod

        path = os.fspath(path)
        info = self._info(path)
        if info.type != pafs_mod.FileType.File:
            raise _not_regular(path, self.kind(path))
        return info.size

    def open_read(self, path: PathLike) -> ReadableFile:
        import pyarrow.fs as pafs_mod

        path = os.fspath(path)
        info = self._info(path)
        if info.type != pafs_mod.FileType.File:
            raise _not_regular(path, self.kind(path))
        return _RemoteFile(self, path, info)

    def modified_ms(self, path: PathLike) -> Optional[int]:
        mtime = getattr(self._info(os.fspath(path)), "mtime", None)
        return None if mtime is None else int(mtime.timestamp() * 1000)

    def version_key(self, path: PathLike) -> Optional[tuple]:
        """(size, modification time, the listing or inspection that saw the file): see the
        class doc; a new listing of the file's directory gives a new key."""
        import pyarrow.fs as pafs_mod

        info, seen = self._seen_info(os.fspath(path))
        mtime = getattr(info, "mtime", None)
        if info.type != pafs_mod.FileType.File or mtime is None:
            return None
        return (info.size, mtime, seen)


class _MissingInfo:
    """What a directory's listing says of a name it does not hold."""

    def __init__(self, path):
        import pyarrow.fs as pafs_mod

        self.path = path
        self.type = pafs_mod.FileType.NotFound
        self.size = None


class _FakeDirInfo:
    def __init__(self, path):
        import pyarrow.fs as pafs_mod

        self.path = path
        self.type = pafs_mod.FileType.Directory
        self.size = None


def _timedelta(seconds: float):
    import datetime

    return datetime.timedelta(seconds=seconds)


class _RemoteFile(ReadableFile):
    """Ranged reads of one object: ``read`` keeps the last range fetched, so small reads
    (headers, index entries) cost no extra request; reading on grows the ranges up to
    ``block_size``, a jump starts again at :attr:`FIRST_READ` bytes."""

    def __init__(self, fs: ArrowFileSystem, path: str, info) -> None:
        self.fs = fs
        self.path = path
        self.size = int(info.size)
        self._info = info
        self._handle = None
        self._block_start = 0
        self._block = b""
        self._want = self.FIRST_READ

    FIRST_READ = 16 * 1024  # bytes fetched by a read away from the block kept

    def _open(self):
        if self._handle is None:
            native = self.fs._native(self.path)

            def opener():
                try:
                    return self.fs.pafs.open_input_file(self._info)
                except TypeError:  # a backend that wants a path
                    return self.fs.pafs.open_input_file(native)

            self._handle = self.fs._retry("opening", self.path, opener)
        return self._handle

    def fetch(self, position: int, length: int) -> bytes:
        """Exactly ``min(length, size - position)`` bytes from the store (one ranged read,
        retried); never fewer."""
        want = max(0, min(length, self.size - position))
        if want == 0:
            return b""

        def go():
            h = self._open()
            data = h.read_at(want, position)
            if len(data) != want:
                raise OSError(
                    f"short read: {len(data)} of {want} bytes at position {position} (the object"
                    f" is shorter than its listed size {self.size}: truncated or replaced?)")
            return data

        data = self.fs._retry("reading", self.path, go, position=position)
        self.fs.bytes_read += want
        self.fs.requests += 1
        return data.to_pybytes() if hasattr(data, "to_pybytes") else bytes(data)

    def read(self, position: int, length: int) -> bytes:
        if position < 0 or length < 0:
            raise ValueError(f"position and length must be non-negative ({position}, {length})")
        end = min(position + length, self.size)
        if end <= position:
            return b""
        bs, blk = self._block_start, self._block
        if bs <= position and end <= bs + len(blk):
            return blk[position - bs: end - bs]
        block_size = self.fs.options.block_size
        # reading on from the block kept: twice as much as last time, up to block_size; a
        # jump elsewhere (an index lookup, a header walk) starts small again, so a seek
        # costs a small range, not a block
        if blk and bs <= position <= bs + len(blk):
            self._want = min(block_size, self._want * 2)
        else:
            self._want = min(block_size, self.FIRST_READ)
        if end - position >= self._want:
            return self.fetch(position, end - position)
        self._block = self.fetch(position, self._want)
        self._block_start = position
        return self._block[: end - position]

    def map(self):
        return None

    def close(self) -> None:
        h, self._handle = self._handle, None
        self._block = b""
        if h is not None:
            try:
                h.close()
            except Exception:
                pass


_CACHE: dict = {}


def for_path(path: PathLike, fs: Optional[FileSystem] = None):
    """``(file_system, path)``: ``fs`` when given and not the local one, else the file system a
    path or URI names, configured from the environment (``KAFKALOG_STORAGE_OPTIONS``, a JSON
    object of storage_options, besides the store's own variables; one :class:`ArrowFileSystem` per scheme
    and bucket/authority, kept, so its listing sizes serve later opens)."""
    if fs is not None and fs is not LOCAL:
        return fs, os.fspath(path)
    if not is_uri(path):
        return LOCAL, os.fspath(path) if not isinstance(path, str) else path
    scheme, _, rest = path.partition("://")
    key = (scheme.lower(), rest.split("/", 1)[0])
    got = _CACHE.get(key)
    if got is None:
        got, p = resolve(path, _env_storage_options())
        if got is LOCAL:
            return got, p
        _CACHE[key] = got
    return got, path.rstrip("/")


def local_directory(location: PathLike) -> str:
    """The local path a writable :class:`~kafkalog.storage.log.Log` opens: a path as given, a
    ``file://`` URI as its path; any other URI is a KafkaStorageError naming it (a ``Log``
    appends, locks and recovers in place, which needs a local file system; object-store and
    HDFS copies are opened with ``Log.open(uri, read_only=True)`` or read with
    :mod:`kafkalog.arrow` and the ``kafkalog`` CLI), never a local directory named after the
    scheme."""
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not is_uri(location):
        return location
    if location.split("://", 1)[0].lower() == "file":
        return resolve(location)[1]
    raise KafkaStorageError(
        f"cannot open {location} as a writable Log: a Log appends, locks and recovers in place, "
        "which needs a local directory; open an object-store or HDFS copy with "
        "Log.open(uri, read_only=True), kafkalog.arrow.to_arrow/iter_batches or "
        "`kafkalog dump|verify|stats`",
        path=location, operation="opening a log")


def _env_storage_options() -> Optional[dict]:
    import json

    raw = os.environ.get("KAFKALOG_STORAGE_OPTIONS")
    if not raw:
        return None
    try:
        opts = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"KAFKALOG_STORAGE_OPTIONS is not a JSON object: {e}") from None
    if not isinstance(opts, dict):
        raise ValueError("KAFKALOG_STORAGE_OPTIONS must be a JSON object")
    return opts
