"""The inputs of the ``kafkalog`` tools (dump, verify, stats, salvage): what a path given to
read is (a file, a partition directory, a log root; anything else refused), the segment files
and partition directories under it in the order Kafka lists them, paths shown as Java's
``File`` prints them, a read-only mapping of one file whose read pages can be dropped, and the
progress line of a long run."""
from __future__ import annotations

import mmap
import os
import re
import sys
import time
from typing import IO, Any, List, Optional, Sequence

from ..errors import KafkaStorageError
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import logdir as _logdir

__all__ = [
    "DROP_EVERY",
    "MappedFile",
    "NoProgress",
    "Progress",
    "classify_dir",
    "expand_inputs",
    "java_abs_path",
    "java_path",
    "no_base_offset_message",
    "partition_dirs",
    "segment_files",
]

DROP_EVERY = 32 * 1024 * 1024  # bytes walked between dropping mapped pages


# ------------------------------------------------------------------------------------------------
# paths as Java's File prints them
# ------------------------------------------------------------------------------------------------
def java_path(p: str) -> str:
    """``new File(p).toString()``: duplicate separators collapsed, trailing one removed (a URI
    is shown as given, less a trailing separator)."""
    if "://" in p and _fs.is_uri(p):
        return p.rstrip("/")
    q = re.sub("/+", "/", p)
    if len(q) > 1 and q.endswith("/"):
        q = q[:-1]
    return q


def java_abs_path(p: str) -> str:
    """``new File(p).getAbsolutePath()``: the working directory prefixed, nothing resolved."""
    q = java_path(p)
    if q.startswith("/") or _fs.is_uri(q):
        return q
    cwd = os.getcwd()
    return java_path(cwd + "/" + q) if q else cwd


# ------------------------------------------------------------------------------------------------
# input expansion: files, partition directories, log roots
# ------------------------------------------------------------------------------------------------
def segment_files(directory: str) -> List[str]:
    """The ``.log`` files of a partition directory by base offset, then KRaft snapshots.  A
    name of a segment that is not a regular file (a FIFO, a device, a directory, a dangling
    link) is kept in its place, so that the dump reports it (it is never opened)."""
    view = _logdir.scan_partition(directory)
    logs = [(s.base_offset, s.log) for s in view.segments]
    for ig in view.ignored:
        sf = _files.parse_segment_file_name(ig.name)
        if sf is not None and sf.kind == ".log" and sf.suffix == "":
            logs.append((sf.base_offset, ig.path))
    logs.sort()
    return [p for _, p in logs] + [p for _, _, p in view.kraft_snapshots]


def no_base_offset_message(shown: str, suffix: str) -> str:
    """The error for a segment file whose name does not start with its base offset."""
    return (f"{shown}: the file name is not <20-digit offset>{suffix}: Kafka names a segment's "
            "files after the segment's base offset (the offset of its first batch, e.g. "
            f"00000000000000000000{suffix}); rename or copy the file to that name to dump it")


def partition_dirs(root: str) -> List[str]:
    """The live ``<topic>-<partition>`` directories of a log root (topic, then partition order)."""
    return [p.path for p in _logdir.scan_root(root).live_partitions]


def classify_dir(path: str) -> str:
    """``"partition"`` or ``"root"`` for a directory given to read, by the rule every reader
    follows (:func:`kafkalog.storage.logdir.locate`); a directory that is neither (nothing of a
    log under it, or its logs one level down) raises
    :class:`~kafkalog.storage.logdir.NotALogError`, whose message names it (and the paths to
    give instead)."""
    return _logdir.locate(path).kind


def expand_inputs(paths: Sequence[str]) -> List[str]:
    """Expand directories into the files to dump: a partition directory gives its ``.log``
    segments (base-offset order) and KRaft ``.checkpoint`` snapshots; a log root gives those of
    every ``<topic>-<partition>`` directory in it (topic, then partition order); any other
    directory is refused (:func:`classify_dir`).  Files are kept as given (including missing
    ones: the dump reports them)."""
    out: List[str] = []
    for p in paths:
        if _logdir.isdir(p):
            if classify_dir(p) == "partition":
                out.extend(segment_files(p))
            else:
                for d in partition_dirs(p):
                    out.extend(segment_files(d))
        else:
            out.append(p)
    return out


# ------------------------------------------------------------------------------------------------
# mapped files and progress
# ------------------------------------------------------------------------------------------------
class MappedFile:
    """A read-only mapping of a file (``buf``: a memoryview; empty files give ``b""``) whose
    already-read pages can be dropped (:meth:`drop_before`) so memory stays flat."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mm: Optional[mmap.mmap] = None
        self._dropped = 0
        with _logdir.open_file(path) as f:  # regular files only; never blocks on a FIFO
            size = f.size
            if size == 0:
                self.buf: Any = memoryview(b"")
            elif not hasattr(f, "fileno"):
                # an object-store file: read in ranges into memory (one file at a time)
                data = bytearray(size)
                step = 8 << 20
                for at in range(0, size, step):
                    chunk = f.read(at, min(step, size - at))
                    if len(chunk) != min(step, size - at):
                        raise KafkaStorageError(
                            f"short read of {path} at position {at}", path=path, position=at,
                            operation="reading")
                    data[at:at + len(chunk)] = chunk
                self.buf = memoryview(data)
            else:
                self._mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
                if hasattr(self._mm, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
                    try:
                        self._mm.madvise(mmap.MADV_SEQUENTIAL)
                    except OSError:  # pragma: no cover
                        pass
                self.buf = memoryview(self._mm)
        self.size = size

    def drop_before(self, position: int) -> None:
        """Release the mapped pages below ``position`` (they are re-read if touched again)."""
        mm = self._mm
        if mm is None or not hasattr(mm, "madvise"):
            return
        end = (position // mmap.PAGESIZE) * mmap.PAGESIZE
        if end - self._dropped < DROP_EVERY:
            return
        try:
            mm.madvise(mmap.MADV_DONTNEED, self._dropped, end - self._dropped)
        except (OSError, ValueError, AttributeError):  # pragma: no cover
            return
        self._dropped = end

    def close(self) -> None:
        try:
            self.buf.release()
        except (BufferError, AttributeError):  # a batch still holds a view: leave it to GC
            return
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # pragma: no cover
                pass

    def __enter__(self) -> "MappedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Progress:
    """A progress line on stderr for long runs (only when enabled and stderr is a terminal).
    ``advance(n)`` is cheap; the line is redrawn at most 5 times a second, after 1 second."""

    def __init__(self, total: int, label: str = "", enabled: bool = True,
                 stream: Optional[IO] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = max(total, 1)
        self.label = label
        self.done = 0
        self.start = time.monotonic()
        self._next = self.start + 1.0
        self._shown = False
        self.enabled = enabled

    def advance(self, n: int) -> None:
        self.done += n
        if self.enabled:
            now = time.monotonic()
            if now >= self._next:
                self._draw(now)

    def set(self, done: int) -> None:
        self.advance(done - self.done)

    def _draw(self, now: float) -> None:
        self._next = now + 0.2
        frac = min(self.done / self.total, 1.0)
        rate = self.done / max(now - self.start, 1e-9) / 1e6
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}% {rate:8.1f} MB/s")
        self.stream.flush()
        self._shown = True

    def finish(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * 72 + "\r")
            self.stream.flush()
            self._shown = False


class NoProgress:
    """A :class:`Progress` that shows nothing."""

    def advance(self, n: int) -> None:
        pass

    def set(self, done: int) -> None:
        pass

    def finish(self) -> None:
        pass
