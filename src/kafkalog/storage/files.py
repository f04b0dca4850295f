"""Kafka's file naming (``LogFileUtils``, ``UnifiedLog.parseTopicPartitionName``, ``Topic``,
``Uuid``'s text form) and the atomic, link-safe writes every file of a log directory is made
with.  What the checkpoint and metadata files hold (``CheckpointFile``,
``LeaderEpochCheckpointFile``, ``PartitionMetadataFile``, the clean-shutdown file) is
:mod:`kafkalog.storage.checkpoints`.

Layout of a broker's log directory (``log.dirs`` entry)::

    <root>/.kafka_cleanshutdown                 present = clean shutdown, JSON (broker epoch)
    <root>/.lock                                flock'd while a root checkpoint is rewritten
    <root>/recovery-point-offset-checkpoint     "0\\n<count>\\n<topic> <partition> <offset>\\n..."
    <root>/log-start-offset-checkpoint          same format
    <root>/replication-offset-checkpoint        same format (high watermarks)
    <root>/cleaner-offset-checkpoint            same format (first dirty offset)
    <root>/<topic>-<partition>/                 one partition
        00000000000000368769.log                record batches, name = 20-digit base offset
        00000000000000368769.index              offset index (8-byte entries)
        00000000000000368769.timeindex          time index (12-byte entries)
        00000000000000368769.txnindex           aborted transactions (34-byte entries)
        00000000000000368769.snapshot           producer state up to that offset
        leader-epoch-checkpoint                 "0\\n<count>\\n<epoch> <start offset>\\n..."
        partition.metadata                      "version: 0\\ntopic_id: <base64url uuid>"

Any segment file may carry a ``.deleted``, ``.cleaned`` or ``.swap`` suffix after its extension.
Every writer here is atomic: it writes ``<file>.tmp``, fsyncs it, renames it over the target and
fsyncs the directory, as Kafka's ``CheckpointFile`` does.

Filesystem safety.  Topic names are checked as Kafka's ``Topic.validate`` checks them
(:func:`validate_topic`) before a partition directory name is built from one
(:func:`partition_dir_name`); *parsing* existing names stays lenient, as Kafka's is.  Files are
written without following a symbolic link planted inside a directory out of it: new files (and
the ``.tmp`` files of :func:`atomic_write`) are created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` after
a stale one is unlinked (unlinking a link removes the link, not its target), and
:func:`open_for_write` refuses, with :class:`~kafkalog.errors.UnsafePathError`, to open an
existing file through a link that leads outside the file's directory or dangles.  The directory
itself (a partition directory or a log-dir root) may be a symbolic link: operators link whole
data directories, and that link is followed.
"""

from __future__ import annotations

import base64
import errno
import os
import re
import sys
from typing import TYPE_CHECKING, Callable, Literal, NamedTuple, Optional, Union

from ..errors import InvalidTopicError, UnsafePathError

if TYPE_CHECKING:
    import uuid

__all__ = [
    "LOG_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "CLEANED_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TEMP_FILE_SUFFIX",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "STRAY_DIR_SUFFIX",
    "TopicPartition",
    "PartitionDir",
    "SegmentFile",
    "filename_prefix_from_offset",
    "offset_from_file_name",
    "log_file",
    "offset_index_file",
    "time_index_file",
    "transaction_index_file",
    "producer_snapshot_file",
    "is_log_file",
    "is_index_file",
    "parse_segment_file_name",
    "MAX_TOPIC_NAME_LENGTH",
    "INTERNAL_TOPICS",
    "validate_topic",
    "is_valid_topic",
    "validate_partition",
    "partition_dir_name",
    "parse_topic_partition_name",
    "parse_partition_dir",
    "topic_id_to_string",
    "topic_id_from_string",
    "atomic_write",
    "atomic_copy",
    "exchange_paths",
    "fsync_dir",
    "open_for_write",
    "create_new_file",
    "check_inside",
]

# -- LogFileUtils -------------------------------------------------------------------------------
LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TEMP_FILE_SUFFIX = ".tmp"

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

_SEGMENT_KINDS = (
    LOG_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
)
_STATE_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
_INDEX_KINDS = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)

PathLike = Union[str, "os.PathLike[str]"]


class TopicPartition(NamedTuple):
    """A topic and a partition number; ``str()`` gives the directory name
    ``<topic>-<partition>``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionDir(NamedTuple):
    """A parsed partition directory name.  ``kind`` is ``""`` for a live partition, else
    ``"delete"``, ``"future"`` or ``"stray"``; ``unique_id`` is the hex id those carry."""

    topic_partition: TopicPartition
    kind: str = ""
    unique_id: Optional[str] = None


class SegmentFile(NamedTuple):
    """A parsed segment file name: ``00000000000000000042.index.swap`` gives
    ``SegmentFile(42, ".index", ".swap", name)``."""

    base_offset: int
    kind: str  # ".log", ".index", ".timeindex", ".txnindex" or ".snapshot"
    suffix: str  # "", ".deleted", ".cleaned" or ".swap"
    name: str


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit, zero-padded decimal base offset that names a segment's files."""
    if offset < 0:
        raise ValueError(f"offset must be non-negative, not {offset}")
    return "%020d" % offset


def offset_from_file_name(name: str) -> int:
    """The offset a segment file name encodes (the part before the first ``.``)."""
    base = os.path.basename(name)
    prefix = base.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"{base!r} is not a segment file name (no numeric offset prefix)")
    return int(prefix)


def _segment_path(directory: PathLike, offset: int, kind: str, suffix: str) -> str:
    return os.path.join(os.fspath(directory), filename_prefix_from_offset(offset) + kind + suffix)


def log_file(directory: PathLike, offset: int, suffix: str = "") -> str:
    return _segment_path(directory, offset, LOG_FILE_SUFFIX, suffix)


def offset_index_file(directory: PathLike, offset: int, suffix: str = "") -> str:
    return _segment_path(directory, offset, INDEX_FILE_SUFFIX, suffix)


def time_index_file(directory: PathLike, offset: int, suffix: str = "") -> str:
    return _segment_path(directory, offset, TIME_INDEX_FILE_SUFFIX, suffix)


def transaction_index_file(directory: PathLike, offset: int, suffix: str = "") -> str:
    return _segment_path(directory, offset, TXN_INDEX_FILE_SUFFIX, suffix)


def producer_snapshot_file(directory: PathLike, offset: int) -> str:
    return _segment_path(directory, offset, PRODUCER_SNAPSHOT_FILE_SUFFIX, "")


def is_log_file(name: str) -> bool:
    return os.path.basename(name).endswith(LOG_FILE_SUFFIX)


def is_index_file(name: str) -> bool:
    """Kafka's ``isIndexFile``: ``.index``, ``.timeindex`` or ``.txnindex`` (no state suffix)."""
    return os.path.basename(name).endswith(_INDEX_KINDS)


def parse_segment_file_name(name: str) -> Optional[SegmentFile]:
    """Parse ``<20 digits><kind>[<suffix>]`` (the digits an int64 base offset: see
    :func:`segment_prefix_problem`); None for any other file name."""
    base = os.path.basename(name) if ("/" in name or os.sep in name) else name
    suffix = ""
    stem = base
    for s in _STATE_SUFFIXES:
        if stem.endswith(s):
            suffix = s
            stem = stem[: -len(s)]
            break
    dot = stem.find(".")
    if dot <= 0:
        return None
    prefix, kind = stem[:dot], stem[dot:]
    if kind not in _SEGMENT_KINDS or segment_prefix_problem(prefix) is not None:
        return None
    return SegmentFile(int(prefix), kind, suffix, base)


INT64_MAX = 2**63 - 1
SEGMENT_PREFIX_DIGITS = 20


def segment_prefix_problem(prefix: str) -> Optional[str]:
    """Why ``prefix`` (the part of a file name before its first ``.``) is not a segment base
    offset, or None when it is one: exactly 20 ASCII decimal digits (as
    :func:`filename_prefix_from_offset` writes them) whose value fits Kafka's int64 offsets."""
    if not prefix.isascii() or not prefix.isdigit():
        return f"{prefix!r} is not a decimal base offset"
    if len(prefix) != SEGMENT_PREFIX_DIGITS:
        return (
            f"base offset {prefix!r} has {len(prefix)} digits; segment names have exactly "
            f"{SEGMENT_PREFIX_DIGITS}"
        )
    if int(prefix) > INT64_MAX:
        return f"base offset {prefix} is past the int64 range of offsets"
    return None


# -- partition directories ------------------------------------------------------------------------
_DELETE_DIR_RE = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(DELETE_DIR_SUFFIX) + "$")
_FUTURE_DIR_RE = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(FUTURE_DIR_SUFFIX) + "$")
_STRAY_DIR_RE = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(STRAY_DIR_SUFFIX) + "$")


# -- topic names (Kafka's org.apache.kafka.common.internals.Topic) -------------------------------
MAX_TOPIC_NAME_LENGTH = 249
# Topic.isInternal's names (the group, transaction and share-group state topics) and the KRaft
# metadata log a broker keeps beside the partitions; a user topic named "__..." is not internal
INTERNAL_TOPICS = (
    "__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"
)
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)
_INT32_MAX = 2**31 - 1


def validate_topic(topic: str) -> str:
    """Return ``topic`` if Kafka would accept it as a topic name, else raise
    :class:`~kafkalog.errors.InvalidTopicError` (also a ValueError) naming it.

    The rules of Kafka's ``Topic.validate``: not empty, not ``.`` or ``..``, at most 249
    characters, only ASCII letters, digits, ``.``, ``_`` and ``-``.  kafkalog checks them before
    it builds a path from a topic name (new partition directories of the Spark writer, salvage
    and :meth:`Log.open <kafkalog.storage.log.Log.open>`); existing directories are read
    whatever their names."""
    if not isinstance(topic, str):
        raise InvalidTopicError(
            f"topic name must be a str, not {type(topic).__name__}", topic=None
        )
    if not topic:
        raise InvalidTopicError("invalid topic name '': a topic name must not be empty", topic)
    if topic in (".", ".."):
        raise InvalidTopicError(
            f"invalid topic name {topic!r}: a topic must not be named '.' or '..'", topic
        )
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"invalid topic name {topic!r}: {len(topic)} characters, at most "
            f"{MAX_TOPIC_NAME_LENGTH} are allowed",
            topic,
        )
    if _LEGAL_TOPIC.fullmatch(topic) is None:
        bad = next(c for c in topic if _LEGAL_TOPIC.fullmatch(c) is None)
        raise InvalidTopicError(
            f"invalid topic name {topic!r}: it holds {bad!r}; only ASCII letters, digits, '.', "
            "'_' and '-' are allowed",
            topic,
        )
    return topic


def is_valid_topic(topic: object) -> bool:
    """Whether :func:`validate_topic` accepts ``topic``."""
    try:
        validate_topic(topic)  # type: ignore[arg-type]
    except InvalidTopicError:
        return False
    return True


def validate_partition(partition: int) -> int:
    """Return ``partition`` if it is a partition number (an int in ``[0, 2**31 - 1]``, not a
    bool), else raise ValueError."""
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise ValueError(f"partition must be a non-negative int, not {partition!r}")
    if partition < 0 or partition > _INT32_MAX:
        raise ValueError(f"partition must be in [0, {_INT32_MAX}], not {partition}")
    return partition


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, after checking both (:func:`validate_topic`,
    :func:`validate_partition`): a topic such as ``../x`` never becomes a path."""
    validate_topic(topic)
    validate_partition(partition)
    return f"{topic}-{partition}"


def _bad_dir(name: str) -> ValueError:
    return ValueError(
        f"Found directory {name}, '{name}' is not in the form of topic-partition or "
        "topic-partition.uniqueId-delete (if marked for deletion).\n"
        "Kafka's log directories (and children) should only contain Kafka topic data."
    )


def parse_topic_partition_name(name: str) -> TopicPartition:
    """Split a directory name at its last ``-`` into topic and partition (Kafka's
    ``parseTopicPartitionName``, which also accepts ``-delete``/``-future``/``-stray`` names)."""
    return parse_partition_dir(name).topic_partition


def parse_partition_dir(name: str) -> PartitionDir:
    """Parse a partition directory name, including the marked-for-deletion, future-replica and
    stray forms (``<topic>-<partition>.<uuid>-delete`` ...).  Raises ValueError like Kafka."""
    base = os.path.basename(os.fspath(name).rstrip("/\\"))
    if not base:
        raise _bad_dir(base)
    kind = ""
    unique_id = None
    tp_name = base
    for suffix, regex, k in (
        (DELETE_DIR_SUFFIX, _DELETE_DIR_RE, "delete"),
        (FUTURE_DIR_SUFFIX, _FUTURE_DIR_RE, "future"),
        (STRAY_DIR_SUFFIX, _STRAY_DIR_RE, "stray"),
    ):
        if base.endswith(suffix):
            m = regex.match(base)
            if m is None:
                raise _bad_dir(base)
            tp_name = f"{m.group(1)}-{m.group(2)}"
            unique_id = m.group(3)
            kind = k
            break
    idx = tp_name.rfind("-")
    if idx <= 0:
        raise _bad_dir(base)
    topic, part = tp_name[:idx], tp_name[idx + 1 :]
    if not topic or not part or not part.isdigit() or not part.isascii():
        raise _bad_dir(base)
    return PartitionDir(TopicPartition(topic, int(part)), kind, unique_id)


# -- topic ids (Kafka's Uuid) --------------------------------------------------------------------
def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_string(text: str) -> uuid.UUID:
    """Inverse of :func:`topic_id_to_string` (Kafka's ``Uuid.fromString``)."""
    s = text.strip()
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"invalid topic id {text!r}") from None
    if len(raw) != 16:
        raise ValueError(f"invalid topic id {text!r}: {len(raw)} bytes, expected 16")
    import uuid  # here, not at import: uuid (and the platform module it loads) costs ~3 ms

    return uuid.UUID(bytes=raw)


# -- atomic writes ---------------------------------------------------------------------------------
def fsync_dir(directory: PathLike) -> None:
    """fsync a directory so that renames and creations in it are durable (a no-op where
    directories cannot be opened or synced).  An I/O error of the sync itself (EIO, ENOSPC...)
    is raised: the renames it should make durable may be lost."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _DIR_SYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


# errno of fsync on a directory where the platform or file system cannot sync one
_DIR_SYNC_UNSUPPORTED = {
    e
    for e in (errno.EINVAL, errno.EBADF, getattr(errno, "ENOTSUP", None), errno.EOPNOTSUPP)
    if e is not None
}


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# errno of open(O_NOFOLLOW) on a symbolic link: ELOOP (Linux, macOS), EMLINK (FreeBSD),
# EFTYPE (NetBSD)
_NOFOLLOW_ERRNOS = {e for e in (errno.ELOOP, errno.EMLINK, getattr(errno, "EFTYPE", None)) if e}


def _inside(path: str, directory: str) -> bool:
    """Whether real path ``path`` is ``directory`` or below it (both already resolved)."""
    try:
        return os.path.commonpath([path, directory]) == directory
    except ValueError:  # different drives
        return False


def check_inside(path: PathLike, root: PathLike) -> str:
    """Return ``path`` if its real path (symbolic links resolved) is ``root``'s real path or
    below it, else raise :class:`~kafkalog.errors.UnsafePathError`: a directory kafkalog
    creates or writes in must not lead out of the tree it belongs to through a planted link."""
    path = os.fspath(path)
    real = os.path.realpath(path)
    real_root = os.path.realpath(os.fspath(root))
    if not _inside(real, real_root):
        raise UnsafePathError(
            f"refusing to write in {path}: it resolves to {real}, outside {real_root} "
            "(a symbolic link leads out of it)",
            path=path,
        )
    return path


def _refuse_link(path: str) -> str:
    """The real path of the symbolic link ``path`` when it leads to a regular file inside the
    link's own directory; UnsafePathError otherwise."""
    directory = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        raise UnsafePathError(
            f"refusing to write through the symbolic link {path}: it leads to {real}, which is "
            "not an existing regular file",
            path=path,
        )
    if not _inside(real, directory) or real == directory:
        raise UnsafePathError(
            f"refusing to write through the symbolic link {path}: it leads to {real}, outside "
            f"{directory}",
            path=path,
        )
    return real


def open_for_write(path: PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open`` for writing a file inside a log directory without following a planted
    symbolic link out of it.

    ``flags`` holds the access mode (``O_RDWR``/``O_WRONLY``) and maybe ``O_CREAT``,
    ``O_APPEND``, ``O_TRUNC``.  A file that does not exist is created with
    ``O_CREAT|O_EXCL|O_NOFOLLOW``; an existing regular file is opened with ``O_NOFOLLOW``; an
    existing symbolic link is followed only when it leads to a regular file inside the link's
    own directory (a dangling link or one leading out raises
    :class:`~kafkalog.errors.UnsafePathError` naming ``path``)."""
    path = os.fspath(path)
    create = bool(flags & os.O_CREAT)
    base = (flags & ~(os.O_CREAT | os.O_EXCL)) | _O_CLOEXEC
    for _ in range(4):  # a file that appears or vanishes between the two opens: try again
        if create:
            if not _O_NOFOLLOW and os.path.islink(path):
                return os.open(_refuse_link(path), base)
            try:
                return os.open(path, base | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, mode)
            except FileExistsError:
                pass  # exists (a link, even a dangling one, counts): open it as it is
        if not _O_NOFOLLOW and os.path.islink(path):
            return os.open(_refuse_link(path), base)
        try:
            return os.open(path, base | _O_NOFOLLOW)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as e:
            if e.errno not in _NOFOLLOW_ERRNOS or not os.path.islink(path):
                raise
            return os.open(_refuse_link(path), base)
    raise FileNotFoundError(errno.ENOENT, "file keeps appearing and vanishing", path)


def create_new_file(path: PathLike, mode: int = 0o644) -> int:
    """Create ``path`` afresh for writing and return the descriptor: whatever is at the name (a
    stale temp file, a symbolic link) is unlinked first (which never touches a link's target),
    then the file is created with ``O_CREAT|O_EXCL|O_NOFOLLOW``, so nothing is written through a
    link."""
    path = os.fspath(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode
    )


def write_all(fd: int, data) -> None:
    """``os.write`` all of ``data`` to ``fd``, continuing short writes."""
    view = memoryview(data)
    while view:  # a short write is continued
        n = os.write(fd, view)
        if n <= 0:  # pragma: no cover - a full disk raises instead
            raise OSError(errno.EIO, "the system wrote nothing")
        view = view[n:]


def _replace_atomically(path: str, fill, fsync: bool) -> None:
    """Create ``<path>.tmp`` afresh, let ``fill(fd)`` write it, fsync it, rename it over
    ``path`` and fsync the directory; on any error the temp file is removed and ``path`` keeps
    its old content."""
    tmp = path + TEMP_FILE_SUFFIX
    fd = create_new_file(tmp)
    try:
        try:
            fill(fd)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def atomic_write(path: PathLike, data: bytes, fsync: bool = True) -> None:
    """Write ``data`` to ``<path>.tmp``, fsync it, rename it to ``path`` and fsync the directory.

    The temp file is created afresh (:func:`create_new_file`), so a symbolic link planted at
    ``<path>.tmp`` is replaced, not written through; a link at ``path`` is replaced by the
    rename.  On an error the temp file is removed and ``path`` keeps its old content."""
    _replace_atomically(os.fspath(path), lambda fd: write_all(fd, data), fsync)


_RENAME_EXCHANGE = 2  # linux/fs.h
# the C function once looked up, False where there is none
_renameat2: Optional[Union[Literal[False], Callable[..., int]]] = None


def exchange_paths(a: PathLike, b: PathLike) -> bool:
    """Atomically swap two existing names (directories or files) on one filesystem, with
    Linux's ``renameat2(RENAME_EXCHANGE)``: a reader sees one or the other at each name, never
    neither.  Returns False, changing nothing, where that is not available (another system, an
    old kernel or C library, a filesystem without it); the caller then falls back to two
    renames."""
    global _renameat2
    if not sys.platform.startswith("linux"):
        return False
    if _renameat2 is None:
        try:
            import ctypes

            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError, ImportError):
            _renameat2 = False
    if not _renameat2:
        return False
    import ctypes

    at_fdcwd = -100
    rc = _renameat2(at_fdcwd, os.fsencode(os.fspath(a)), at_fdcwd, os.fsencode(os.fspath(b)),
                    _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a), None, os.fspath(b))


def atomic_copy(src: PathLike, dst: PathLike, fsync: bool = True) -> None:
    """Copy ``src`` to ``dst`` the way :func:`atomic_write` writes (``<dst>.tmp``, fsync, rename,
    fsync of the directory), streaming, with ``src``'s permission bits and times."""
    with open(os.fspath(src), "rb") as f:

        def fill(fd: int) -> None:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                write_all(fd, chunk)
            st = os.fstat(f.fileno())
            if hasattr(os, "fchmod"):
                os.fchmod(fd, st.st_mode & 0o777)
            if os.utime in os.supports_fd:
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))

        _replace_atomically(os.fspath(dst), fill, fsync)
