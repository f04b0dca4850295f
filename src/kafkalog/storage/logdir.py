"""What is on disk, in Kafka's terms: the one read-only model of log roots and partition
directories that every reader and writer of kafkalog lists and opens through.

Kafka's names (``LogFileUtils``, ``LogSegments``, ``LogManager``'s view of a log dir)::

    <root>/                                   a log dir (``log.dirs`` entry)
        .lock  .kafka_cleanshutdown  meta.properties
        recovery-point-offset-checkpoint  log-start-offset-checkpoint
        replication-offset-checkpoint     cleaner-offset-checkpoint
        <topic>-<n>/                          a partition (Kafka's topic rules)
        <topic>-<n>.<id>-delete|-future|-stray/
    <topic>-<n>/
        <20 digits>.log .index .timeindex .txnindex .snapshot   (+ .deleted .cleaned .swap)
        leader-epoch-checkpoint  partition.metadata  <file>.tmp
        <end offset>-<epoch>.checkpoint  quorum-state            (KRaft metadata log)

One grammar, in one place (:func:`kafkalog.storage.files.parse_segment_file_name` for segment
names): a base offset is exactly 20 decimal digits within the int64 range.  :func:`scan_partition`
and :func:`scan_root` sort every name of a directory into what it is; a name that does not fit
the grammar, or that fits it but is not a regular file (a FIFO, a device, a directory, a
dangling or looping link), lands in ``ignored`` with the reason and is never opened, so it can
never change offsets.  Files are opened for reading only through :meth:`PartitionListing.open`
/ :func:`open_file` (the :mod:`kafkalog.storage.fs` interface: regular files only,
``KafkaStorageError`` naming the path and the operation for any OS error).  Nothing here writes.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..errors import KafkaStorageError
from . import files as _files
from . import fs as _fs
from . import store_fs as _store_fs
from .index import OffsetIndex, TimeIndex, read_store_index

__all__ = [
    "Ignored",
    "SegmentFiles",
    "StateFile",
    "PartitionRef",
    "PartitionListing",
    "RootListing",
    "scan_partition",
    "scan_root",
    "classify_dir",
    "locate",
    "Located",
    "NotALogError",
    "holds_log_files",
    "snapshot_files",
    "open_file",
    "read_file",
    "file_kind",
    "offset_index",
    "time_index",
    "ROOT_CHECKPOINT_FILES",
    "ROOT_LOCK_FILE",
]

PathLike = Union[str, "os.PathLike[str]"]

ROOT_LOCK_FILE = ".lock"
META_PROPERTIES_FILE = "meta.properties"
QUORUM_STATE_FILE = "quorum-state"
ROOT_CHECKPOINT_FILES = (
    _files.RECOVERY_POINT_CHECKPOINT_FILE,
    _files.LOG_START_OFFSET_CHECKPOINT_FILE,
    _files.REPLICATION_OFFSET_CHECKPOINT_FILE,
    _files.CLEANER_OFFSET_CHECKPOINT_FILE,
)
_PARTITION_METADATA_FILES = (
    _files.LEADER_EPOCH_CHECKPOINT_FILE,
    _files.PARTITION_METADATA_FILE,
    _files.CLEAN_SHUTDOWN_FILE,
    QUORUM_STATE_FILE,
)
_KRAFT_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$", re.ASCII)
_KRAFT_SNAPSHOT_LOOSE = re.compile(r"^(\d+)-(\d+)\.checkpoint$", re.ASCII)
_SEGMENT_KINDS = (
    _files.LOG_FILE_SUFFIX,
    _files.INDEX_FILE_SUFFIX,
    _files.TIME_INDEX_FILE_SUFFIX,
    _files.TXN_INDEX_FILE_SUFFIX,
    _files.PRODUCER_SNAPSHOT_FILE_SUFFIX,
)


class Ignored(NamedTuple):
    """A name the model does not use, and why (``kind`` is what it is: see
    :mod:`kafkalog.storage.fs`)."""

    name: str
    path: str
    kind: str
    reason: str


class SegmentFiles(NamedTuple):
    """One live segment: its ``.log`` (a regular file) and the sibling index files that exist
    as regular files (``None`` where missing)."""

    base_offset: int
    log: str
    offset_index: Optional[str]
    time_index: Optional[str]
    txn_index: Optional[str]


class StateFile(NamedTuple):
    """A segment file with a ``.deleted``, ``.cleaned`` or ``.swap`` suffix."""

    base_offset: int
    kind: str  # ".log", ".index", ".timeindex", ".txnindex", ".snapshot"
    suffix: str
    path: str


class PartitionRef(NamedTuple):
    """A partition directory of a root: ``kind`` is ``""`` (live), ``"delete"``, ``"future"``
    or ``"stray"``."""

    topic_partition: _files.TopicPartition
    kind: str
    unique_id: Optional[str]
    path: str


def _segment_name_problem(name: str) -> Optional[str]:
    """Why a name that looks like a segment file (``<digits>.<kind>[suffix]``) is not one."""
    stem = name
    for s in (_files.DELETED_FILE_SUFFIX, _files.CLEANED_FILE_SUFFIX, _files.SWAP_FILE_SUFFIX):
        if stem.endswith(s):
            stem = stem[: -len(s)]
            break
    dot = stem.find(".")
    if dot <= 0 or stem[dot:] not in _SEGMENT_KINDS:
        return None
    return _files.segment_prefix_problem(stem[:dot])


class PartitionListing:
    """The files of one partition directory, sorted by what they are (see the module doc)."""

    def __init__(self, directory: str, fs: _fs.FileSystem) -> None:
        self.directory = directory
        self.fs = fs
        try:
            pd = _files.parse_partition_dir(os.path.basename(directory.rstrip("/\\")))
            self.topic_partition: Optional[_files.TopicPartition] = pd.topic_partition
            self.dir_kind = pd.kind
        except ValueError:
            self.topic_partition = None
            self.dir_kind = ""
        self.segments: List[SegmentFiles] = []
        self.orphan_indexes: List[StateFile] = []  # index files whose .log is missing
        self.snapshots: List[Tuple[int, str]] = []  # producer-state snapshots
        self.state_files: List[StateFile] = []
        self.temp_files: List[str] = []
        self.metadata: Dict[str, str] = {}  # leader-epoch-checkpoint, partition.metadata, ...
        self.kraft_snapshots: List[Tuple[int, int, str]] = []
        self.ignored: List[Ignored] = []

    # -- queries -----------------------------------------------------------------------------
    @property
    def base_offsets(self) -> List[int]:
        return [s.base_offset for s in self.segments]

    def path_of(self, name: str) -> Optional[str]:
        """The path of a metadata file (``leader-epoch-checkpoint``...) if it is a regular file."""
        return self.metadata.get(name)

    def refused(self) -> List[Ignored]:
        """Names that fit the grammar of a log file but are not regular files (a FIFO, a device,
        a directory, a dangling or looping link): a writer must not work around them."""
        return [i for i in self.ignored if i.kind != _fs.FILE and _fits_grammar(i.name)]

    def open(self, path: str) -> _fs.ReadableFile:
        """Open one of this view's files for reading (regular files only)."""
        return self.fs.open_read(path)

    def __repr__(self) -> str:
        return (
            f"PartitionListing({self.directory!r}, {len(self.segments)} segments, "
            f"{len(self.ignored)} ignored)"
        )


def _fits_grammar(name: str) -> bool:
    if name in _PARTITION_METADATA_FILES or name in ROOT_CHECKPOINT_FILES:
        return True
    return _files.parse_segment_file_name(name) is not None or bool(_KRAFT_SNAPSHOT.match(name))


def scan_partition(directory: Union[PathLike, _fs.DirectoryHandle],
                   fs: _fs.FileSystem = _fs.LOCAL) -> PartitionListing:
    """List one partition directory (KafkaStorageError if it cannot be listed); ``directory``
    may be a directory held open (:meth:`kafkalog.storage.fs.FileSystem.open_dir`), then listed
    through that handle."""
    if isinstance(directory, _fs.DirectoryHandle):
        entries = directory.list_dir()
        directory = directory.path
    else:
        fs, directory = _store_fs.for_path(directory, fs)
        entries = fs.list_dir(directory)
    return _partition_view(directory, fs, entries)


def _partition_view(directory: str, fs: _fs.FileSystem, entries) -> PartitionListing:
    """:func:`scan_partition` of a listing already made."""
    view = PartitionListing(directory, fs)
    logs: Dict[int, str] = {}
    indexes: Dict[Tuple[int, str], str] = {}
    for e in entries:
        name = e.name
        if name.endswith(_files.TEMP_FILE_SUFFIX) and e.kind == _fs.FILE:
            view.temp_files.append(e.path)
            continue
        sf = _files.parse_segment_file_name(name)
        grammar = sf is not None or name in _PARTITION_METADATA_FILES or bool(
            _KRAFT_SNAPSHOT.match(name)
        )
        if grammar and e.kind != _fs.FILE:
            view.ignored.append(Ignored(name, e.path, e.kind, f"a {e.kind}, not a regular file"))
            continue
        if sf is not None:
            if sf.suffix:
                view.state_files.append(StateFile(sf.base_offset, sf.kind, sf.suffix, e.path))
            elif sf.kind == _files.LOG_FILE_SUFFIX:
                logs[sf.base_offset] = e.path
            elif sf.kind == _files.PRODUCER_SNAPSHOT_FILE_SUFFIX:
                view.snapshots.append((sf.base_offset, e.path))
            else:
                indexes[(sf.base_offset, sf.kind)] = e.path
            continue
        if name in _PARTITION_METADATA_FILES:
            view.metadata[name] = e.path
            continue
        m = _KRAFT_SNAPSHOT.match(name)
        if m:
            view.kraft_snapshots.append((int(m.group(1)), int(m.group(2)), e.path))
            continue
        problem = _segment_name_problem(name)
        if problem is None and _KRAFT_SNAPSHOT_LOOSE.match(name):
            problem = "a KRaft snapshot name has a 20-digit offset and a 10-digit epoch"
        view.ignored.append(
            Ignored(name, e.path, e.kind, problem or "not a Kafka log file name")
        )
    for base in sorted(logs):
        view.segments.append(
            SegmentFiles(
                base,
                logs[base],
                indexes.pop((base, _files.INDEX_FILE_SUFFIX), None),
                indexes.pop((base, _files.TIME_INDEX_FILE_SUFFIX), None),
                indexes.pop((base, _files.TXN_INDEX_FILE_SUFFIX), None),
            )
        )
    view.orphan_indexes = sorted(StateFile(b, k, "", p) for (b, k), p in indexes.items())
    view.snapshots.sort()
    view.state_files.sort()
    view.temp_files.sort()
    view.kraft_snapshots.sort()
    return view


class RootListing:
    """A log root: its partition directories, checkpoint and metadata files."""

    def __init__(self, root: str, fs: _fs.FileSystem) -> None:
        self.root = root
        self.fs = fs
        self.partitions: List[PartitionRef] = []  # live ones and -delete/-future/-stray
        self.checkpoints: Dict[str, str] = {}
        self.metadata: Dict[str, str] = {}  # .kafka_cleanshutdown, meta.properties, .lock
        self.ignored: List[Ignored] = []

    @property
    def live_partitions(self) -> List[PartitionRef]:
        return [p for p in self.partitions if not p.kind]

    def __repr__(self) -> str:
        return f"RootListing({self.root!r}, {len(self.partitions)} partitions)"


def scan_root(root: PathLike, fs: _fs.FileSystem = _fs.LOCAL) -> RootListing:
    """List a log root (KafkaStorageError if it cannot be listed).  Partitions are sorted by
    topic, then partition number.  Existing directories are parsed leniently, as Kafka's
    ``parseTopicPartitionName`` does: a topic name Kafka would not create today is still read
    (writers check names with :func:`kafkalog.storage.files.validate_topic` before making one)."""
    fs, root = _store_fs.for_path(root, fs)
    return _root_view(root, fs, fs.list_dir(root))


def _root_view(root: str, fs: _fs.FileSystem, entries) -> RootListing:
    """:func:`scan_root` of a listing already made."""
    view = RootListing(root, fs)
    for e in entries:
        name = e.name
        if name in ROOT_CHECKPOINT_FILES or name in (
            _files.CLEAN_SHUTDOWN_FILE, META_PROPERTIES_FILE, ROOT_LOCK_FILE
        ):
            if e.kind != _fs.FILE:
                view.ignored.append(
                    Ignored(name, e.path, e.kind, f"a {e.kind}, not a regular file")
                )
            elif name in ROOT_CHECKPOINT_FILES:
                view.checkpoints[name] = e.path
            else:
                view.metadata[name] = e.path
            continue
        try:
            pd = _files.parse_partition_dir(name)
        except ValueError:
            pd = None
        if pd is None:
            reason = "not a partition directory name (<topic>-<partition>)"
            view.ignored.append(Ignored(name, e.path, e.kind, reason))
            continue
        if e.kind != _fs.DIRECTORY:
            view.ignored.append(Ignored(name, e.path, e.kind, f"a {e.kind}, not a directory"))
            continue
        view.partitions.append(PartitionRef(pd.topic_partition, pd.kind, pd.unique_id, e.path))
    view.partitions.sort(key=lambda p: (p.topic_partition.topic, p.topic_partition.partition,
                                        p.kind, p.path))
    return view


def snapshot_files(directory: PathLike, fs: _fs.FileSystem = _fs.LOCAL) -> List[Tuple[int, str]]:
    """``(offset, path)`` of the producer-state snapshots of a partition directory, ascending:
    :attr:`PartitionListing.snapshots` without sorting the other names (producer-state loading
    asks often)."""
    out = []
    fs, directory = _store_fs.for_path(directory, fs)
    for e in fs.list_dir(directory):
        if e.kind == _fs.FILE and e.name.endswith(_files.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            sf = _files.parse_segment_file_name(e.name)
            if sf is not None and not sf.suffix:
                out.append((sf.base_offset, e.path))
    out.sort()
    return out


def classify_dir(path: PathLike, fs: _fs.FileSystem = _fs.LOCAL) -> str:
    """``"partition"`` (it holds a segment), ``"root"`` (it holds a partition directory,
    whatever its own name: log dirs are often named ``kafka-logs-1`` or ``data-0``),
    ``"partition"`` (its name is ``<topic>-<partition>``: an empty partition) or ``"other"``."""
    fs, path = _store_fs.for_path(path, fs)
    entries = fs.list_dir(path)
    for e in entries:
        sf = _files.parse_segment_file_name(e.name)
        if sf is not None and sf.kind == _files.LOG_FILE_SUFFIX:
            return "partition"
    for e in entries:
        if e.kind != _fs.DIRECTORY:
            continue
        try:
            if not _files.parse_partition_dir(e.name).kind:
                return "root"
        except ValueError:
            pass
    try:
        pd = _files.parse_partition_dir(os.path.basename(os.path.normpath(path)))
        if not pd.kind:
            return "partition"
    except ValueError:
        pass
    return "other"


# -- what a directory given to read is: one rule for every reader ---------------------------------
class NotALogError(KafkaStorageError):
    """A directory given to read is not a Kafka log: nothing under it looks like one, or the
    logs are one level down (it holds log roots or partition directories: ``instead`` lists
    them, the paths to give).  Never read as an empty log."""

    def __init__(self, message: str, directory: str, instead: Sequence[str] = ()) -> None:
        super().__init__(message, path=directory, operation="listing")
        self.directory = directory
        self.instead = list(instead)

    def __str__(self) -> str:  # the message names the directory already
        return self.message

    def __reduce__(self):
        return (type(self), (self.message, self.directory, self.instead))


class Located(NamedTuple):
    """What :func:`locate` found a directory to be."""

    kind: str  # "partition" or "root"
    path: str
    fs: _fs.FileSystem
    view: PartitionListing  # the directory's own listing, read as a partition directory
    root: Optional[RootListing]  # kind "root": its partition directories and checkpoints
    # False only for a directory named <topic>-<partition> that holds no file of a Kafka log
    # (an empty one): each reader refuses it, as a partition without segments (a stream may
    # wait on an empty one)
    holds_logs: bool

    @property
    def partitions(self) -> List[PartitionRef]:
        """A root's live ``<topic>-<partition>`` directories (topic, then partition order)."""
        return self.root.live_partitions if self.root is not None else []


_ROOT_ONLY_FILES = ROOT_CHECKPOINT_FILES + (META_PROPERTIES_FILE, ROOT_LOCK_FILE)
_MAX_LOOKS_BELOW = 256  # subdirectories examined to name the logs one level down


def holds_log_files(view: Optional[PartitionListing]) -> bool:
    """Whether a directory's listing (None: it could not be listed) holds a file of a Kafka
    partition: a segment or index, a producer snapshot, a partition checkpoint
    (``.kafka_cleanshutdown`` alone is not: a broker writes it in its log roots), a KRaft
    snapshot, or a name of the log's grammar (even one that is not a regular file, or a near
    miss such as a segment name with 19 digits: the reader reports it)."""
    if view is None:
        return False
    return bool(
        view.segments or view.orphan_indexes or view.snapshots or view.state_files
        or view.kraft_snapshots
        # not the clean-shutdown marker alone: a broker leaves it in its log roots
        or any(name != _files.CLEAN_SHUTDOWN_FILE for name in view.metadata)
        or any(ig.reason != "not a Kafka log file name" for ig in view.ignored)
    )


def _holds_segments(view: PartitionListing) -> bool:
    """A ``.log`` segment (a live one, or a name of one that is not a regular file: the reader
    names it) or a KRaft snapshot: the directory is a partition, whatever else is there."""
    if view.segments or view.kraft_snapshots:
        return True
    for ig in view.ignored:
        sf = _files.parse_segment_file_name(ig.name)
        if sf is not None and sf.kind == _files.LOG_FILE_SUFFIX:
            return True
    return False


def _kind_of(path: str, fs: _fs.FileSystem, entries) -> Tuple[Optional[str], PartitionListing,
                                                                 Optional[RootListing]]:
    """``"partition"``, ``"root"`` or None (nothing of a log here) for one listing (the root
    view is None where the directory holds segments: it is not read as a root)."""
    view = _partition_view(path, fs, entries)
    if _holds_segments(view):
        return "partition", view, None
    root = _root_view(path, fs, entries)
    if len(root.partitions) > len(root.live_partitions):  # -delete/-future/-stray: Kafka's
        return "root", view, root
    if root.live_partitions and any(name in root.checkpoints or name in root.metadata
                                    for name in _ROOT_ONLY_FILES):
        return "root", view, root  # rule 4 before listing a partition (a plan lists them all)
    for ref in root.live_partitions:
        try:
            if holds_log_files(scan_partition(ref.path, fs)):
                return "root", view, root
        except KafkaStorageError:  # gone, or cannot be listed: not known to hold a log
            continue
    if holds_log_files(view):
        return "partition", view, root
    if any(name in root.checkpoints or name in root.metadata for name in _ROOT_ONLY_FILES):
        return "root", view, root
    return None, view, root


def _is_partition_name(path: str) -> bool:
    name = _fs.basename(path) if _fs.is_uri(path) else os.path.basename(os.path.normpath(path))
    try:
        return not _files.parse_partition_dir(name).kind
    except ValueError:
        return False


def locate(path: PathLike, fs: _fs.FileSystem = _fs.LOCAL) -> Located:
    """What a directory given to read is, by one rule every reader follows (``to_arrow`` /
    ``iter_batches`` of a path, ``kafkalog dump|verify|stats|salvage``, the Spark source):

    1. it holds a ``<20 digits>.log`` segment (or a KRaft snapshot): a **partition** directory,
       whatever its name and whatever else is in it;
    2. it holds ``<topic>-<partition>`` directories of which one holds a file of a Kafka log
       (or a ``-delete``/``-future``/``-stray`` one): a log **root** (a broker's ``log.dirs``
       entry), whatever its own name (``kafka-logs-1``, ``broker-1``);
    3. it holds other files of a partition (indexes, snapshots, ``leader-epoch-checkpoint``,
       ``partition.metadata``...): a **partition** directory without segments;
    4. it holds a root's own files (its offset checkpoints, ``meta.properties``, ``.lock``): a
       **root** (without partitions);
    5. otherwise, when some of its subdirectories are log roots or partition directories by
       rules 1-4 (a directory of backups, ``backups/broker-1/orders-0``), it is refused with
       :class:`NotALogError` naming them: the logs are one level down, and which of them to
       read (replicas of the same partitions?) is the caller's choice;
    6. otherwise a directory named ``<topic>-<partition>`` is a partition directory that holds
       nothing of a log (``holds_logs`` False: every reader refuses it, naming it; a Spark
       stream may wait on an empty one);
    7. anything else (an empty directory, ``/etc``) is refused with :class:`NotALogError`.

    A directory that cannot be listed raises KafkaStorageError (MissingFileError where it is
    missing)."""
    fs, path = _store_fs.for_path(path, fs)
    entries = fs.list_dir(path)
    kind, view, root = _kind_of(path, fs, entries)
    if kind is not None:
        return Located(kind, path, fs, view, root if kind == "root" else None, True)
    below: List[Tuple[str, str]] = []
    subdirs = sorted((e for e in entries if e.kind == _fs.DIRECTORY), key=lambda e: e.name)
    for e in subdirs[:_MAX_LOOKS_BELOW]:
        try:
            k = _kind_of(e.path, fs, fs.list_dir(e.path))[0]
        except KafkaStorageError:
            continue
        if k is not None:
            below.append((e.path, k))
    if below:
        kinds = {k for _, k in below}
        what = ("log root" if kinds == {"root"} else "partition director"
                if kinds == {"partition"} else "log director")
        plural = len(below) > 1
        what += ("ies" if what.endswith("director") else "s") if plural else (
            "y" if what.endswith("director") else "")
        more = " (and maybe more)" if len(subdirs) > _MAX_LOOKS_BELOW else ""
        raise NotALogError(
            f"{path} is neither a log root nor a partition directory: its Kafka logs are one "
            f"level down, in the {what} {', '.join(p for p, _ in below)}{more}; pass "
            f"{'those paths' if plural else 'that path'} instead",
            path, [p for p, _ in below])
    if _is_partition_name(path):
        return Located("partition", path, fs, view, None, False)
    raise NotALogError(
        f"no Kafka log under {path}" + (" (an empty directory)" if not entries else "")
        + ": no Kafka log segments (<20-digit offset>.log), no <topic>-<partition> directory "
        "with log files and no log-dir checkpoint in it; pass a segment file, a partition "
        "directory or a log root (a broker's log.dirs entry)", path)


def file_kind(path: PathLike, fs: _fs.FileSystem = _fs.LOCAL) -> str:
    """What ``path`` is (a :mod:`kafkalog.storage.fs` kind), without opening it."""
    fs, path = _store_fs.for_path(path, fs)
    return fs.kind(path)


def exists(path: PathLike) -> bool:
    """Whether something is at ``path`` (a local path or a URI)."""
    if not _fs.is_uri(path):
        return os.path.exists(path)
    return file_kind(path) not in (_fs.MISSING, _fs.DANGLING_LINK)


def isdir(path: PathLike) -> bool:
    """Whether ``path`` (a local path or a URI) is a directory."""
    if not _fs.is_uri(path):
        return os.path.isdir(path)
    return file_kind(path) == _fs.DIRECTORY


def isfile(path: PathLike) -> bool:
    """Whether ``path`` (a local path or a URI) is a regular file."""
    if not _fs.is_uri(path):
        return os.path.isfile(path)
    return file_kind(path) == _fs.FILE


def open_file(path: PathLike, fs: _fs.FileSystem = _fs.LOCAL) -> _fs.ReadableFile:
    """Open a log file for reading: regular files only, KafkaStorageError otherwise.  A URI
    opens through its object store (``map()`` is then None: read ranges)."""
    fs, path = _store_fs.for_path(path, fs)
    return fs.open_read(path)


def read_file(path: PathLike, fs: _fs.FileSystem = _fs.LOCAL,
              limit: Optional[int] = None) -> bytes:
    """The whole of a (small) log file: a checkpoint, a snapshot, an index.  ``limit`` bounds
    what is read (a larger file raises KafkaStorageError rather than filling memory)."""
    fs, path = _store_fs.for_path(path, fs)
    with fs.open_read(path) as f:
        if limit is not None and f.size > limit:
            raise KafkaStorageError(
                f"{os.fspath(path)} is {f.size} bytes, more than the {limit} expected",
                path=os.fspath(path), operation="reading",
            )
        return f.read(0, f.size)


# -- read-only access to one segment's indexes (index.py, never writable) ----------------------
def _store_index(cls, path: Optional[str], base_offset: int, fs: Optional[_fs.FileSystem]):
    """``cls`` (OffsetIndex or TimeIndex) read-only over ``path``: opened locally, or in a
    store read as far as its entries go (:func:`kafkalog.storage.index.read_store_index`: a
    preallocated zero tail is not fetched); empty when the file is missing."""
    if path is not None:
        fs, path = _store_fs.for_path(path, fs)
        if not fs.is_local():
            data, size = read_store_index(fs, path, cls.ENTRY_SIZE)
            return cls.from_bytes(path, base_offset, data, length=size)
    return cls(path, base_offset, writable=False)


def offset_index(seg: SegmentFiles, fs: Optional[_fs.FileSystem] = None):
    """The segment's offset index, read-only (:class:`kafkalog.storage.index.OffsetIndex`:
    iterate it for ``(offset, position)`` entries, ``lookup(offset)``); empty when the file is
    missing.  In a store (a URI, or ``fs`` not local) only its entries are fetched.  Close it
    after use."""
    return _store_index(OffsetIndex, seg.offset_index, seg.base_offset, fs)


def time_index(seg: SegmentFiles, fs: Optional[_fs.FileSystem] = None):
    """The segment's time index, read-only (:class:`kafkalog.storage.index.TimeIndex`: iterate
    it for ``(timestamp, offset)`` entries, ``last_entry``, ``lookup(timestamp)``); empty when
    the file is missing.  In a store only its entries are fetched.  Close it after use."""
    return _store_index(TimeIndex, seg.time_index, seg.base_offset, fs)


# -- the directory's version (concurrent-overwrite detection) ------------------------------------
# A kafkalog write's commit puts a fresh one in every partition directory it swaps in (an
# identity no directory shares, unlike an inode number, which the filesystem reuses).  Kafka
# ignores files it does not know in a partition directory.
GENERATION_FILE = ".kafkalog-generation"

DirVersion = Tuple[int, int, Optional[str]]


def write_generation(directory: str) -> str:
    """Give ``directory`` a new generation marker (replacing a linked or copied one); returns
    it.  Called by the writer on a partition directory before it is swapped into place."""
    import uuid as _uuid  # here, not at import: ~3 ms of every CLI start

    gen = _uuid.uuid4().hex
    # a new file: a hard link to the previous directory's marker is unlinked, never written
    fd = _files.create_new_file(os.path.join(directory, GENERATION_FILE))
    try:
        _files.write_all(fd, (gen + "\n").encode("ascii"))
    finally:
        os.close(fd)
    return gen


def version_of(handle: "_fs.DirectoryHandle") -> DirVersion:
    """The version of a directory held open: its identity and its generation marker."""
    gen = None
    try:
        with handle.open_read(GENERATION_FILE) as f:
            gen = f.read(0, 64).decode("ascii", "replace").strip()
    except KafkaStorageError:  # no marker (or not a regular file): identity only
        pass
    dev, ino = handle.identity[:2]
    return (dev, ino, gen)


def dir_version(directory: str) -> Optional[DirVersion]:
    """What tells this partition directory from any other that takes its name later: its
    device and inode and its generation marker (None where the directory is missing or
    the system cannot open a directory)."""
    try:
        handle = _fs.LOCAL.open_dir(directory)
    except KafkaStorageError:
        return None
    if handle is None:
        return None
    with handle:
        return version_of(handle)
