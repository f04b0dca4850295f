"""Fault injection for the storage tests: the OS calls kafkalog makes to change files are
counted, and the N-th one (optionally only among calls on files whose name matches a pattern)
fails with ``OSError(ENOSPC)``/``OSError(EIO)`` - or writes part of its data first, or returns
a short count without failing, as POSIX allows.

Patched (process-wide, only while a test holds the ``faults`` fixture): ``os.open``,
``os.write``, ``os.pwrite``, ``os.fsync``, ``os.fdatasync``, ``os.ftruncate``, ``os.truncate``,
``os.replace``, ``os.rename``, ``os.link``, ``os.unlink``, ``os.remove``, ``os.rmdir``,
``os.mkdir``, ``os.utime`` and ``mmap.mmap`` (creation and ``flush``).  kafkalog writes no file
through Python file objects (every write goes through ``os.write``/``os.pwrite`` or a mapping),
so ``open()`` is not patched.  File descriptors are mapped back to the paths ``os.open`` opened
them with, so a pattern such as ``"*.index"`` also selects ``ftruncate``/``fsync``/mapping
calls on that file.

Use::

    calls = faults.count(lambda: op(state))          # a clean run: [(op, path), ...]
    with faults.armed(at=3, err=errno.EIO):           # the 3rd call fails
        op(state)

Counting is only on inside ``count``/``armed``; calls of other threads are counted too (the
tests that inject faults run no background flusher).  The syncs (``fsync``, ``fdatasync``,
``mmap.flush``) are counted and failed like every other call but otherwise do nothing: these
tests simulate I/O errors, not power loss, and thousands of real syncs would only make them
slow.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import fnmatch
import mmap
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

ENOSPC = _errno.ENOSPC
EIO = _errno.EIO

# kinds of fault
ERROR = "error"  # fail before doing anything
PARTIAL = "partial"  # writes: write the first half, then fail; other calls: as ERROR
SHORT = "short"  # writes: write the first half and return that count (no error)

Pattern = Union[None, str, Sequence[str]]

_OPS = (
    "open",
    "write",
    "pwrite",
    "fsync",
    "fdatasync",
    "ftruncate",
    "truncate",
    "replace",
    "rename",
    "link",
    "unlink",
    "remove",
    "rmdir",
    "mkdir",
    "utime",
    "mmap",
    "mmap.flush",
)


class InjectedFault(OSError):
    """The OSError the injector raises (so a test can tell it from a real one)."""


def _name(path) -> Optional[str]:
    if path is None or isinstance(path, int):
        return None
    return os.path.basename(os.fsdecode(path).rstrip("/"))


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.fd_paths = {}
        self.recording = False
        self.calls: List[Tuple[str, Optional[str]]] = []
        self.fired: List[Tuple[int, str, Optional[str]]] = []
        self._at: Optional[int] = None
        self._err = ENOSPC
        self._kind = ERROR
        self._sticky = False
        self._match: Pattern = None
        self._ops: Optional[Iterable[str]] = None
        self._saved = []

    # -- set-up -------------------------------------------------------------------------------
    def install(self, monkeypatch) -> None:
        real = {name: getattr(os, name) for name in _OPS if hasattr(os, name)}
        real["close"] = os.close
        self.real = real
        inj = self

        def p_open(path, flags, mode=0o777, *, dir_fd=None):
            inj._check("open", path)
            fd = real["open"](path, flags, mode, dir_fd=dir_fd)
            inj.fd_paths[fd] = os.fsdecode(path) if dir_fd is None else None
            return fd

        def p_close(fd):
            inj.fd_paths.pop(fd, None)
            return real["close"](fd)

        def p_write(fd, data):
            short = inj._check("write", inj.fd_paths.get(fd), data=(fd, data, None))
            if short is not None:
                return short
            return real["write"](fd, data)

        def p_pwrite(fd, data, offset):
            short = inj._check("pwrite", inj.fd_paths.get(fd), data=(fd, data, offset))
            if short is not None:
                return short
            return real["pwrite"](fd, data, offset)

        def fd_call(op):
            def f(fd, *a, **kw):
                inj._check(op, inj.fd_paths.get(fd) if isinstance(fd, int) else fd)
                return real[op](fd, *a, **kw)

            f.__name__ = op
            return f

        def path_call(op):
            def f(path, *a, **kw):
                inj._check(op, path if not isinstance(path, int) else inj.fd_paths.get(path))
                return real[op](path, *a, **kw)

            f.__name__ = op
            return f

        monkeypatch.setattr(os, "open", p_open)
        monkeypatch.setattr(os, "close", p_close)
        monkeypatch.setattr(os, "write", p_write)
        monkeypatch.setattr(os, "pwrite", p_pwrite)
        def sync_call(op):
            def f(fd):
                inj._check(op, inj.fd_paths.get(fd) if isinstance(fd, int) else None)
                if not isinstance(fd, int):
                    fd = fd.fileno()
                os.fstat(fd)  # a closed descriptor still fails (EBADF)
                return None

            f.__name__ = op
            return f

        for op in ("fsync", "fdatasync"):
            if op in real:
                monkeypatch.setattr(os, op, sync_call(op))
        monkeypatch.setattr(os, "ftruncate", fd_call("ftruncate"))
        for op in ("truncate", "replace", "rename", "link", "unlink", "remove", "rmdir", "mkdir",
                   "utime"):
            monkeypatch.setattr(os, op, path_call(op))

        real_mmap = mmap.mmap

        class FaultyMmap(real_mmap):
            def __new__(cls, fileno, length, *a, **kw):
                path = inj.fd_paths.get(fileno)
                inj._check("mmap", path)
                self = super().__new__(cls, fileno, length, *a, **kw)
                self.kl_path = path
                return self

            def flush(self, *a):
                inj._check("mmap.flush", self.kl_path)
                if self.closed:
                    return super().flush(*a)  # raises as a closed map does
                return None

        monkeypatch.setattr(mmap, "mmap", FaultyMmap)

    def patch_callable(self, monkeypatch, owner, name: str, op: str) -> None:
        """Count (and fail) calls of ``owner.name`` too, e.g. a function that reaches the
        system through ctypes; its first argument is the path."""
        real = getattr(owner, name)
        inj = self

        def f(path, *a, **kw):
            inj._check(op, path)
            return real(path, *a, **kw)

        f.__name__ = name
        monkeypatch.setattr(owner, name, f)

    # -- the decision ---------------------------------------------------------------------------
    def _matches(self, op: str, path) -> bool:
        if self._ops is not None and op not in self._ops:
            return False
        if self._match is None:
            return True
        name = _name(path)
        if name is None:
            return False
        pats = (self._match,) if isinstance(self._match, str) else self._match
        return any(fnmatch.fnmatch(name, p) for p in pats)

    def _check(self, op: str, path, data=None):
        """Count the call; raise (or write part of ``data``) when it is the one to fail."""
        with self._lock:
            if not self.recording or not self._matches(op, path):
                return None
            self.calls.append((op, None if path is None else os.fsdecode(path)))
            n = len(self.calls)
            fire = self._at is not None and (n == self._at or (self._sticky and n > self._at))
            if not fire:
                return None
            self.fired.append((n, op, None if path is None else os.fsdecode(path)))
            kind = self._kind
        if data is not None and kind in (PARTIAL, SHORT):
            fd, buf, offset = data
            mv = memoryview(buf)
            half = len(mv) // 2
            if half:
                if offset is None:
                    done = self.real["write"](fd, mv[:half])
                else:
                    done = self.real["pwrite"](fd, mv[:half], offset)
            else:
                done = 0
            if kind == SHORT and done:
                return done
        elif kind == SHORT:
            return None  # only writes can be short: other calls go through
        raise InjectedFault(self._err, os.strerror(self._err), None if path is None else path)

    # -- use --------------------------------------------------------------------------------------
    def count(self, fn: Callable[[], object], match: Pattern = None, ops=None):
        """Run ``fn`` and return the calls it made: ``[(op, path), ...]``."""
        with self.armed(None, match=match, ops=ops):
            fn()
        return list(self.calls)

    @contextlib.contextmanager
    def armed(
        self,
        at: Optional[int],
        err: int = ENOSPC,
        kind: str = ERROR,
        sticky: bool = False,
        match: Pattern = None,
        ops=None,
    ):
        """Count calls (those matching ``match``/``ops``); the ``at``-th fails (and, with
        ``sticky``, every later one too, like a disk that stays full)."""
        with self._lock:
            self.calls = []
            self.fired = []
            self._at = at
            self._err = err
            self._kind = kind
            self._sticky = sticky
            self._match = match
            self._ops = None if ops is None else frozenset(ops)
            self.recording = True
        try:
            yield self
        finally:
            with self._lock:
                self.recording = False
                self._at = None

    def describe(self, n: int) -> str:
        if 1 <= n <= len(self.calls):
            op, path = self.calls[n - 1]
            return f"call {n}: {op} {_name(path) if path else '?'}"
        return f"call {n}"


def scratch_dir(tmp_path: Path, prefix: str):
    """A generator for a fixture: where fault sweeps work - in memory (``/dev/shm``) where there
    is such a directory, since they create, rename and delete thousands of small files - else
    ``tmp_path``."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        d = tempfile.mkdtemp(prefix=prefix, dir=shm)
        try:
            yield Path(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    else:
        yield tmp_path
