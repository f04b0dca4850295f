"""The checkpoint and metadata files of a log directory: Kafka's ``CheckpointFile`` (the
root's offset checkpoints, read-modify-written under the root's ``.lock``),
``LeaderEpochCheckpointFile``, ``PartitionMetadataFile`` and the clean-shutdown file.

Their names and where they live are :mod:`kafkalog.storage.files` (which also writes them
atomically: ``<file>.tmp``, fsync, rename, fsync of the directory, as Kafka's
``CheckpointFile`` does).  Every reader takes an optional :class:`~kafkalog.storage.fs.FileSystem`
(default: the local one), so a copy in an object store reads the same way.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
import uuid
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, TypeVar

from ..errors import CorruptCheckpointError, KafkaStorageError
from . import fs as _fs
from .files import (
    PathLike,
    TopicPartition,
    atomic_write,
    open_for_write,
    topic_id_from_string,
    topic_id_to_string,
)

__all__ = [
    "ROOT_LOCK_FILE",
    "ROOT_LOCK_TIMEOUT_S",
    "EpochEntry",
    "PartitionMetadata",
    "read_offset_checkpoint",
    "write_offset_checkpoint",
    "update_offset_checkpoint",
    "read_leader_epoch_checkpoint",
    "write_leader_epoch_checkpoint",
    "read_partition_metadata",
    "write_partition_metadata",
    "read_clean_shutdown_file",
    "write_clean_shutdown_file",
]


# -- CheckpointFile --------------------------------------------------------------------------------
def _read_whole(path: str, fs: Optional["_fs.FileSystem"] = None) -> bytes:
    """A small metadata file's bytes, read through the storage interface: only a regular file
    is opened (a FIFO or a directory at the name raises KafkaStorageError, never blocks).
    ``fs``: the file system holding it (default: the local one)."""
    with (fs or _fs.LOCAL).open_read(path) as f:
        return f.read(0, f.size)


def _missing(path: str, fs: Optional["_fs.FileSystem"]) -> bool:
    if fs is None or fs is _fs.LOCAL:
        return not os.path.exists(path)
    return fs.kind(path) == _fs.MISSING


def _read_checkpoint_lines(path: str, version: int, fields: int,
                           fs: Optional["_fs.FileSystem"] = None) -> List[List[str]]:
    """Kafka's ``CheckpointReadBuffer.read``: version line, count line, one entry per line."""
    raw = _read_whole(path, fs)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError(f"Checkpoint file is not UTF-8: {e}", path=path) from None
    lines = text.splitlines()
    if not lines:
        return []
    try:
        read_version = int(lines[0].strip())
    except ValueError:
        raise CorruptCheckpointError(
            f"Malformed line in checkpoint file ({path}): '{lines[0]}'", path=path
        ) from None
    if read_version != version:
        raise CorruptCheckpointError(
            f"Unrecognised version:{read_version}, expected version: {version} in checkpoint "
            f"file at: {path}",
            path=path,
        )
    if len(lines) < 2:
        return []
    try:
        expected = int(lines[1].strip())
    except ValueError:
        raise CorruptCheckpointError(
            f"Malformed line in checkpoint file ({path}): '{lines[1]}'", path=path
        ) from None
    entries = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields:
            raise CorruptCheckpointError(
                f"Malformed line in checkpoint file ({path}): '{line}'", path=path
            )
        entries.append(parts)
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file at: {path}, but found only "
            f"{len(entries)}",
            path=path,
        )
    return entries


def _format_checkpoint(version: int, entries: Iterable[str]) -> bytes:
    entries = list(entries)
    out = [str(version), str(len(entries))]
    out.extend(entries)
    return ("\n".join(out) + "\n").encode("utf-8")


def read_offset_checkpoint(path: PathLike,
                           fs: Optional["_fs.FileSystem"] = None) -> Dict[TopicPartition, int]:
    """Read a log-dir checkpoint (``recovery-point-offset-checkpoint``,
    ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
    ``cleaner-offset-checkpoint``).  A missing or empty file reads as ``{}``.  ``fs``: the
    file system holding it (default: the local one)."""
    path = os.fspath(path)
    if _missing(path, fs):
        return {}
    result: Dict[TopicPartition, int] = {}
    for parts in _read_checkpoint_lines(path, 0, 3, fs):
        topic, part, off = parts
        try:
            value = int(off)
            if not -2**63 <= value < 2**63 or not -2**31 <= int(part) < 2**31:
                raise ValueError(off)  # what Kafka's parseLong/parseInt refuse
            result[TopicPartition(topic, int(part))] = value
        except ValueError:
            raise CorruptCheckpointError(
                f"Malformed line in checkpoint file ({path}): '{' '.join(parts)}'", path=path
            ) from None
    return result


# a (topic, partition) key: a plain tuple or a TopicPartition
_TP = TypeVar("_TP", bound=Tuple[str, int])


def write_offset_checkpoint(
    path: PathLike, offsets: Mapping[_TP, int], fsync: bool = True
) -> None:
    """Atomically (re)write a log-dir offset checkpoint with ``{(topic, partition): offset}``."""
    lines = []
    for (topic, partition), offset in sorted(offsets.items()):
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"invalid topic name {topic!r}")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    atomic_write(path, _format_checkpoint(0, lines), fsync=fsync)


_CHECKPOINT_LOCKS: Dict[str, threading.Lock] = {}
_CHECKPOINT_LOCKS_GUARD = threading.Lock()


def _checkpoint_lock(path: str) -> threading.Lock:
    key = os.path.realpath(path)
    with _CHECKPOINT_LOCKS_GUARD:
        lock = _CHECKPOINT_LOCKS.get(key)
        if lock is None:
            lock = _CHECKPOINT_LOCKS[key] = threading.Lock()
        return lock


ROOT_LOCK_FILE = ".lock"
ROOT_LOCK_TIMEOUT_S = 60.0


class _RootLock:
    """An exclusive ``flock`` on ``<root>/.lock`` (the file Kafka's LogManager locks), held
    while a root checkpoint is read, modified and written: writers in other processes (and
    other threads, which open their own descriptor) wait their turn.  Where ``fcntl`` is
    missing only the in-process lock serialises."""

    def __init__(self, root: str, timeout: float) -> None:
        self.path = os.path.join(root, ROOT_LOCK_FILE)
        self.timeout = timeout
        self.fd = -1

    def __enter__(self) -> "_RootLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        import time

        try:
            self.fd = open_for_write(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as e:
            raise KafkaStorageError.from_os_error(e, "opening the log root's lock file",
                                                  path=self.path) from e
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    self._close()
                    raise KafkaStorageError.from_os_error(
                        e, "locking the log root", path=self.path) from e
            if time.monotonic() >= deadline:
                self._close()
                raise KafkaStorageError(
                    f"timed out after {self.timeout:g} s waiting for the lock on {self.path} "
                    "(another process holds the log root)",
                    path=self.path, errno=errno.EWOULDBLOCK, operation="locking the log root",
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing releases the flock
            self.fd = -1

    def __exit__(self, *exc) -> None:
        self._close()


def update_offset_checkpoint(
    path: PathLike, updates: Mapping[Tuple[str, int], Optional[int]], fsync: bool = True
) -> Dict[TopicPartition, int]:
    """Read-modify-write a log-dir checkpoint: set each given partition's offset (``None``
    removes it) and keep every other entry.  Serialised per file within this process and,
    through an exclusive lock on the root's ``.lock`` file, across processes: several writers
    (processes or :class:`~kafkalog.storage.log.Log` objects) may own different partitions of one
    root.  A malformed existing file is replaced; one that cannot be read (an I/O error)
    raises, so the other partitions' entries are never lost.  Returns the entries written."""
    path = os.fspath(path)
    root = os.path.dirname(os.path.abspath(path))
    with _checkpoint_lock(path), _RootLock(root, ROOT_LOCK_TIMEOUT_S):
        try:
            current = read_offset_checkpoint(path)
        except (CorruptCheckpointError, FileNotFoundError):
            current = {}
        for (topic, partition), offset in updates.items():
            tp = TopicPartition(topic, int(partition))
            if offset is None:
                current.pop(tp, None)
            else:
                current[tp] = int(offset)
        write_offset_checkpoint(path, current, fsync=fsync)
        return current


# -- leader-epoch-checkpoint ---------------------------------------------------------------------
class EpochEntry(NamedTuple):
    """One leader-epoch-checkpoint line: the first offset written under ``epoch``."""

    epoch: int
    start_offset: int


def read_leader_epoch_checkpoint(path: PathLike,
                                 fs: Optional["_fs.FileSystem"] = None) -> List[EpochEntry]:
    """Read ``leader-epoch-checkpoint`` (missing or empty file: ``[]``; ``fs``: the file system
    holding it, default the local one)."""
    path = os.fspath(path)
    if _missing(path, fs):
        return []
    out = []
    for parts in _read_checkpoint_lines(path, 0, 2, fs):
        try:
            out.append(EpochEntry(int(parts[0]), int(parts[1])))
        except ValueError:
            raise CorruptCheckpointError(
                f"Malformed line in checkpoint file ({path}): '{' '.join(parts)}'", path=path
            ) from None
    return out


def write_leader_epoch_checkpoint(
    path: PathLike, entries: Iterable[Tuple[int, int]], fsync: bool = True
) -> None:
    lines = [f"{int(e)} {int(o)}" for e, o in entries]
    atomic_write(path, _format_checkpoint(0, lines), fsync=fsync)


# -- partition.metadata ---------------------------------------------------------------------------
class PartitionMetadata(NamedTuple):
    version: int
    topic_id: uuid.UUID


def read_partition_metadata(path: PathLike,
                            fs: Optional["_fs.FileSystem"] = None) -> PartitionMetadata:
    """Read ``partition.metadata`` (``version: 0\\ntopic_id: <id>``).  The zero UUID and any
    other version are rejected, as Kafka's ``PartitionMetadataReadBuffer`` does.  ``fs``: the
    file system holding it (default: the local one)."""
    path = os.fspath(path)
    text = _read_whole(path, fs).decode("utf-8", "replace")
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError(
            f"Failed to read topic ID from partition metadata file: {path} (expected 2 lines)",
            path=path,
        )
    fields = {}
    for line in lines[:2]:
        parts = re.split(r":\s+", line.strip(), maxsplit=1)
        if len(parts) != 2:
            raise CorruptCheckpointError(
                f"Malformed line in partition metadata file ({path}): '{line}'", path=path
            )
        fields[parts[0]] = parts[1]
    try:
        version = int(fields.get("version", ""))
    except ValueError:
        raise CorruptCheckpointError(f"Malformed version in {path}", path=path) from None
    if version != 0:
        raise CorruptCheckpointError(
            f"Unrecognised version:{version}, expected version: 0 in checkpoint file at: {path}",
            path=path,
        )
    try:
        topic_id = topic_id_from_string(fields.get("topic_id", ""))
    except ValueError as e:
        raise CorruptCheckpointError(str(e), path=path) from None
    if topic_id.int == 0:
        raise CorruptCheckpointError(f"Invalid topic ID (zero) in {path}", path=path)
    return PartitionMetadata(version, topic_id)


def write_partition_metadata(path: PathLike, topic_id: uuid.UUID, fsync: bool = True) -> None:
    if topic_id.int == 0:
        raise ValueError("the zero UUID is not a valid topic id")
    data = f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}".encode("ascii")
    atomic_write(path, data, fsync=fsync)


# -- .kafka_cleanshutdown -------------------------------------------------------------------------
def read_clean_shutdown_file(path: PathLike) -> Optional[int]:
    """The broker epoch stored in a clean-shutdown file: ``None`` when the file is absent,
    ``-1`` when it is present but empty or from before broker epochs were stored."""
    path = os.fspath(path)
    try:
        raw = _read_whole(path)
    except FileNotFoundError:
        return None
    if not raw.strip():
        return -1
    try:
        obj = json.loads(raw.decode("utf-8"))
        return int(obj.get("brokerEpoch", -1))
    except (ValueError, AttributeError, TypeError):
        return -1


def write_clean_shutdown_file(path: PathLike, broker_epoch: int = -1, fsync: bool = True) -> None:
    data = json.dumps({"version": 0, "brokerEpoch": int(broker_epoch)}, separators=(",", ":"))
    atomic_write(path, data.encode("ascii"), fsync=fsync)
