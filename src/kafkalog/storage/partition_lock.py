"""One lock per partition of a log root, taken by every writer of that partition: a writable
:class:`~kafkalog.storage.log.Log` for as long as it is open (so ``write_arrow`` and any program
appending through a Log too), and a commit that puts a new partition directory in place
(:mod:`kafkalog.storage.commit`, the Spark sink's driver commit) from its check of the log end
to its directory swap.  A broker's ``LogManager`` is the only writer of its partitions;
kafkalog's writers are several processes, so they take turns here.  (``kafkalog salvage``
writes its destination through a Log under a temporary name and renames it in only where no
partition, or an empty directory, is: it never writes into an existing partition.)

The lock is an exclusive ``flock`` on ``<root>/.<topic>-<partition>.lock``, a file next to the
root's ``.lock`` (the checkpoints' lock) and not a directory, so a broker that loads the root
ignores it, as it ignores every file there.  The file exists only while the partition is held:
its holder writes one line about itself into it (who, process id, host, since when), which a
writer that cannot get the lock names in its error, and removes it on release.  A waiter that
got the lock on a file removed meanwhile lets it go and tries again on the new one, so two
writers never hold two different files of one name.

Waiting.  A commit waits for a writable Log, and a Log for a commit, up to
:data:`WAIT_TIMEOUT_S` seconds, then fails with :class:`~kafkalog.errors.LogLockedError` naming
the holder.  A Log that finds another Log holding the partition fails at once, as it always
did (``LogLockedError``: a partition is open for writing by one Log at a time).  Within one
thread the lock is re-entrant: a commit that holds it opens and closes the partition's Log.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import threading
import time
from typing import Dict, Optional, Tuple

from ..errors import KafkaStorageError, LogLockedError
from . import files as _files
from . import fs as _fs

try:  # pragma: no cover - POSIX
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: only the in-process registry serialises
    fcntl = None  # type: ignore[assignment]

__all__ = ["PartitionLock", "lock_file_name", "is_lock_file_name", "WAIT_TIMEOUT_S",
           "LOG", "COMMIT"]

#: how long a writer waits for the holder of a partition before it fails naming it
WAIT_TIMEOUT_S = 300.0
LOCK_SUFFIX = ".lock"

# what holds a partition (the ``kind`` written in the lock file)
LOG = "log"
COMMIT = "commit"

_GUARD = threading.Lock()
_HELD: Dict[Tuple[str, str], "_Held"] = {}


def lock_file_name(partition_dir_name: str) -> str:
    """The lock file of a partition directory name (``t-0`` -> ``.t-0.lock``)."""
    return "." + partition_dir_name + LOCK_SUFFIX


def is_lock_file_name(name: str) -> bool:
    """Whether ``name`` (in a log root) is a partition's lock file."""
    if not (name.startswith(".") and name.endswith(LOCK_SUFFIX)):
        return False
    try:
        _files.parse_partition_dir(name[1:-len(LOCK_SUFFIX)])
    except ValueError:
        return False
    return True


class _Held:
    __slots__ = ("fd", "path", "owner", "count", "kind")

    def __init__(self, fd: int, path: str, owner: int, kind: str) -> None:
        self.fd = fd
        self.path = path
        self.owner = owner
        self.count = 1
        self.kind = kind


def _describe(record: Optional[dict]) -> str:
    if not record:
        return "another writer (it did not say who)"
    who = record.get("holder") or "another writer"
    pid = record.get("pid")
    host = record.get("host")
    since = record.get("since")
    bits = []
    if pid is not None:
        bits.append(f"pid {pid}" + (f" on {host}" if host else ""))
    if since:
        bits.append(f"since {since}")
    return who + (f" ({', '.join(bits)})" if bits else "")


class PartitionLock:
    """The lock of partition directory ``name`` in log root ``root`` (see the module doc).

    ``kind`` is :data:`LOG` or :data:`COMMIT`; ``holder`` says who holds it, in words, for the
    error of a writer that waits in vain (``"a writable kafkalog.storage.Log"``, ``"the commit
    of Spark write job 1234"``).  :meth:`acquire` waits up to ``timeout`` seconds (default
    :data:`WAIT_TIMEOUT_S`; a Log that meets another Log fails at once); :meth:`release` lets
    it go.  Also a context manager."""

    def __init__(self, root: str, name: str, kind: str, holder: str,
                 timeout: Optional[float] = None) -> None:
        self.root = os.path.realpath(os.path.abspath(os.fspath(root)))
        self.name = name
        self.kind = kind
        self.holder = holder
        self.timeout = timeout
        self.path = os.path.join(self.root, lock_file_name(name))
        self._key = (self.root, name)
        self._held = False

    # -- taking it --------------------------------------------------------------------------------
    def acquire(self) -> "PartitionLock":
        if self._held:
            return self
        me = threading.get_ident()
        with _GUARD:
            h = _HELD.get(self._key)
            if h is not None and h.owner == me:
                h.count += 1  # this thread holds it already (a commit opening the Log)
                self._held = True
                return self
        timeout = WAIT_TIMEOUT_S if self.timeout is None else self.timeout
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            fd = self._try()
            if fd >= 0:
                break
            record = self._holder_record()
            if self.kind == LOG and record is not None and record.get("kind") == LOG:
                raise LogLockedError(
                    f"{os.path.join(self.root, self.name)} is already open for writing by "
                    f"another Log: {_describe(record)}", path=os.path.join(self.root, self.name))
            if time.monotonic() >= deadline:
                raise LogLockedError(
                    f"partition {self.name} of {self.root} is held by {_describe(record)}; "
                    f"{self.holder} waited {timeout:g} s for it and gave up (close that writer, "
                    "or wait for it to finish, then try again)",
                    path=os.path.join(self.root, self.name))
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        with _GUARD:
            _HELD[self._key] = _Held(fd, self.path, me, self.kind)
        self._held = True
        self._write_record(fd)
        return self

    def _try(self) -> int:
        """The descriptor of the lock file, locked by us; -1 when another writer holds it."""
        for _ in range(100):
            try:
                fd = _files.open_for_write(self.path, os.O_RDWR | os.O_CREAT)
            except OSError as e:
                if isinstance(e, KafkaStorageError):
                    raise
                raise KafkaStorageError.from_os_error(
                    e, f"opening the lock file of partition {self.name}", path=self.path) from e
            try:
                if fcntl is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError as e:
                        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                            os.close(fd)
                            return -1
                        raise KafkaStorageError.from_os_error(
                            e, f"locking partition {self.name}", path=self.path) from e
                # the file we locked must still be the one at the name (its last holder
                # removes it on release: a lock on a removed file holds nothing)
                try:
                    st = os.stat(self.path)
                except FileNotFoundError:
                    st = None
                fst = os.fstat(fd)
                if st is not None and (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino):
                    return fd
                os.close(fd)  # the holder let it go meanwhile: take the new file at once
            except BaseException:
                try:
                    os.close(fd)
                except OSError:
                    pass
                raise
        return -1

    def _holder_record(self) -> Optional[dict]:
        """What the holder wrote about itself (None: nothing readable yet)."""
        try:
            with _fs.LOCAL.open_read(self.path) as f:
                raw = f.read(0, 4096)
        except (KafkaStorageError, OSError):
            return None
        try:
            rec = json.loads(raw.decode("utf-8", "replace").strip() or "null")
        except ValueError:
            return None
        return rec if isinstance(rec, dict) else None

    def _write_record(self, fd: int) -> None:
        """Say who holds the partition (best effort: the lock holds without it)."""
        record = {
            "kind": self.kind, "holder": self.holder, "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime()),
        }
        data = (json.dumps(record) + "\n").encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except OSError:
            pass

    # -- letting it go ----------------------------------------------------------------------------
    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        with _GUARD:
            h = _HELD.get(self._key)
            if h is None:
                return
            h.count -= 1
            if h.count > 0:
                return
            del _HELD[self._key]
        # removed while still held, so that no writer takes a lock on a file about to go
        try:
            os.unlink(h.path)
        except OSError:
            pass  # left behind: harmless, the next writer locks it again
        try:
            os.close(h.fd)
        except OSError:
            pass

    @property
    def held(self) -> bool:
        return self._held

    def __enter__(self) -> "PartitionLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"PartitionLock({self.root!r}, {self.name!r}, held={self._held})"


def for_log_directory(directory: str) -> Optional[PartitionLock]:
    """The lock a writable Log on ``directory`` takes, taken (None when the directory is not
    named ``<topic>-<partition>``: such a Log touches nothing in its parent, and no commit
    writes it; None too where the root does not let a lock file be created, as a read-only
    root: nothing can commit there either)."""
    name = os.path.basename(os.path.normpath(directory))
    try:
        pd = _files.parse_partition_dir(name)
    except ValueError:
        return None
    if pd.kind:
        return None  # -delete / -future / -stray: no commit replaces those
    lock = PartitionLock(os.path.dirname(os.path.abspath(directory)), name, LOG,
                         "a writable kafkalog.storage.Log")
    try:
        return lock.acquire()
    except KafkaStorageError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return None
        raise
