"""Putting new partition directories into a log root, the part of a broker's ``LogManager``
that replaces a partition's directory (its future-replica swap) and keeps the root's
checkpoints: the storage half of the Spark sink's driver commit (``kafkalog.spark._write``
keeps the orchestration: which pieces, their offsets, the job's staging area).

A :class:`RootCommit` changes one root:

1. :meth:`RootCommit.lock` takes the lock of every partition it will write
   (:mod:`kafkalog.storage.partition_lock`, in name order, so two commits never wait on each
   other in a circle) and holds them until :meth:`RootCommit.release`: from the caller's check
   of each log end (:meth:`RootCommit.log_end`) to the swap and the checkpoints, no other
   writer - another commit, a writable ``Log`` - changes those partitions.  A second commit of
   the same partition waits, and then sees the log end the first left;
2. :meth:`RootCommit.lower_log_starts` lowers, before any swap, a log-start entry that would
   hide the first records of a new directory, should the commit stop between a swap and the
   checkpoint update;
3. for each partition, the caller assembles the new directory inside the staging area
   (:meth:`RootCommit.carry_existing` hard-links the segments of the existing partition when
   appending, after opening and closing it cleanly, and returns its log start and leader
   epochs), then :meth:`RootCommit.place` merges the leader-epoch entries, writes the
   clean-shutdown and generation markers, syncs the tree and renames it into place (an
   existing directory is swapped with it in one ``renameat2(RENAME_EXCHANGE)`` on Linux;
   elsewhere two renames leave a moment without it);
4. :meth:`RootCommit.write_checkpoints` updates the recovery point, log start and high
   watermark entries (read-modify-write under the root's ``.lock``), and
   :meth:`RootCommit.finish` deletes the replaced directories.

What a failure must undo is kept as it goes (:attr:`RootCommit.swaps`,
:attr:`RootCommit.checkpoints_before`); :func:`undo` puts every swapped directory back, then
the checkpoint entries, and says in one sentence whether it could.
"""
from __future__ import annotations

import os
import shutil
import uuid
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import CorruptCheckpointError, KafkaStorageError, UnsafePathError
from . import checkpoints as _checkpoints
from . import files as _files
from . import fs as _fs
from . import logdir as _logdir
from .partition_lock import COMMIT, PartitionLock

__all__ = [
    "RootCommit",
    "Swap",
    "undo",
    "log_end_offset",
    "epoch_entries",
    "merge_epochs",
    "checkpoint_entries",
    "SEGMENT_KINDS",
]

TP = Tuple[str, int]
SEGMENT_KINDS = (".log", ".index", ".timeindex", ".txnindex")
_ROOT_CHECKPOINTS = (
    _files.RECOVERY_POINT_CHECKPOINT_FILE,
    _files.LOG_START_OFFSET_CHECKPOINT_FILE,
    _files.REPLICATION_OFFSET_CHECKPOINT_FILE,
)


def log_end_offset(directory: str) -> Optional[int]:
    """The log end offset of the partition directory ``directory`` (None when it is missing or
    holds no segment)."""
    from .log import open_view

    if _fs.LOCAL.kind(directory) != _fs.DIRECTORY:
        return None
    try:
        if not _logdir.scan_partition(directory).segments:
            return None
    except KafkaStorageError:
        return None
    with open_view(directory) as view:
        return view.log_end_offset


# -- leader epochs --------------------------------------------------------------------------------
def epoch_entries(directory: str) -> List[Tuple[int, int]]:
    """``(epoch, start offset)`` of the ``leader-epoch-checkpoint`` in ``directory`` ([] when
    there is none, or it cannot be read)."""
    p = os.path.join(directory, _files.LEADER_EPOCH_CHECKPOINT_FILE)
    if not os.path.isfile(p):
        return []
    try:
        return [(e.epoch, e.start_offset) for e in _checkpoints.read_leader_epoch_checkpoint(p)]
    except Exception:
        return []


def merge_epochs(entries: Iterable[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """The leader-epoch entries of several pieces of one log, as one checkpoint: by start
    offset, each epoch greater than the one before (epochs only grow along a log)."""
    out: List[Tuple[int, int]] = []
    for epoch, start in sorted(entries, key=lambda e: (e[1], e[0])):
        if out and epoch <= out[-1][0]:
            continue
        if out and start <= out[-1][1]:
            continue
        out.append((epoch, start))
    return out


def write_epochs(directory: str, entries: List[Tuple[int, int]], fsync: bool) -> None:
    _checkpoints.write_leader_epoch_checkpoint(
        os.path.join(directory, _files.LEADER_EPOCH_CHECKPOINT_FILE), entries, fsync=fsync)


# -- root checkpoints -----------------------------------------------------------------------------
def checkpoint_entries(path: str, updates: Mapping[TP, Optional[int]]
                       ) -> Dict[TP, Optional[int]]:
    """The current entries of ``updates``' partitions in a root checkpoint (None: absent)."""
    try:
        current = _checkpoints.read_offset_checkpoint(path)
    except CorruptCheckpointError:
        current = {}
    return {tp: current.get(_files.TopicPartition(*tp)) for tp in updates}


# -- swapping and undoing -------------------------------------------------------------------------
class Swap:
    """One partition directory being put in place: ``placed`` once the new directory is at
    ``target``, ``old`` where the previous directory is (None: there was none), ``back`` where
    the new one came from (in the staging area)."""

    __slots__ = ("target", "back", "placed", "old")

    def __init__(self, target: str, back: str) -> None:
        self.target = target
        self.back = back
        self.placed = False
        self.old: Optional[str] = None


def undo(swaps: List[Swap], checkpoints_before: Mapping[str, Mapping[TP, Optional[int]]],
         fsync: bool) -> str:
    """Put back what a failed commit changed, newest first: each new partition directory goes
    back into the staging area and the previous one returns to its name; then the checkpoint
    entries are restored - directories first, so that no moment pairs a new directory with an
    old (higher) log-start entry that would hide its first records, and only for the
    partitions whose directory did go back.  Returns a sentence for the error message: every
    step is tried, and one that fails names where the previous data is."""
    problems = []
    stuck = set()  # targets whose previous directory could not be put back
    for sw in reversed(swaps):
        try:
            if sw.placed:
                away = sw.back
                if os.path.lexists(away):
                    away = f"{sw.back}.{uuid.uuid4().hex}"
                os.rename(sw.target, away)
                sw.placed = False
            if sw.old is not None:
                os.rename(sw.old, sw.target)
                sw.old = None
        except OSError as e:
            stuck.add(sw.target)
            where = f"; the previous directory is at {sw.old}" if sw.old is not None else ""
            problems.append(f"could not put back {sw.target} ({e}){where}")
    for path, entries in checkpoints_before.items():
        root = os.path.dirname(path)
        keep = {
            tp: v for tp, v in entries.items()
            if os.path.join(root, f"{tp[0]}-{tp[1]}") not in stuck
        }
        if not keep:
            continue
        try:
            _checkpoints.update_offset_checkpoint(path, keep, fsync=fsync)
        except OSError as e:
            problems.append(f"could not restore {path} ({e})")
    if not problems and swaps and fsync:
        try:
            _files.fsync_dir(os.path.dirname(swaps[0].target))
        except OSError as e:
            problems.append(f"could not sync {os.path.dirname(swaps[0].target)} ({e})")
    if problems:
        return "putting the target back failed: " + "; ".join(problems)
    return "the target was left as it was before the job"


def _refuse_outside_link(path: str, directory: str) -> None:
    """UnsafePathError unless the symbolic link ``path`` leads to a regular file inside
    ``directory``."""
    real = os.path.realpath(path)
    real_dir = os.path.realpath(directory)
    if not os.path.isfile(real) or os.path.commonpath([real, real_dir]) != real_dir:
        raise UnsafePathError(
            f"refusing to carry {path} into the new partition directory: it is a symbolic link "
            f"to {real}, not a file inside {real_dir}",
            path=path,
        )


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def fsync_tree(directory: str, fsync: bool) -> None:
    """fsync every regular file of ``directory`` and the directory itself."""
    if not fsync:
        return
    for e in _fs.LOCAL.list_dir(directory):
        if e.kind == _fs.FILE:
            with _fs.LOCAL.open_read(e.path) as f:
                os.fsync(f.fileno())  # type: ignore[attr-defined]
    _files.fsync_dir(directory)


class RootCommit:
    """New partition directories going into the log root ``root`` (see the module doc).
    ``staging`` is a directory inside the root (on its file system) where the new directories
    are assembled; ``holder`` names the commit in the error of a writer that waits for it in
    vain, and in this commit's own error when it waits in vain (``"the commit of Spark write
    job 1234"``); ``timeout``: seconds to wait for each partition's lock (default
    :data:`kafkalog.storage.partition_lock.WAIT_TIMEOUT_S`)."""

    def __init__(self, root: str, staging: str, *, fsync: bool = True,
                 holder: str = "a kafkalog commit", timeout: Optional[float] = None) -> None:
        self.root = root
        self.staging = staging
        self.fsync = fsync
        self.holder = holder
        self.timeout = timeout
        self.swaps: List[Swap] = []
        self.checkpoints_before: Dict[str, Dict[TP, Optional[int]]] = {}
        self._updates: Dict[str, Dict[TP, Optional[int]]] = {n: {} for n in _ROOT_CHECKPOINTS}
        self._locks: List[PartitionLock] = []

    # -- the partitions' locks --------------------------------------------------------------------
    def lock(self, partitions: Iterable[TP]) -> None:
        """Take the lock of each partition (in name order; waiting for other writers), held
        until :meth:`release`.  On failure the locks taken are let go again."""
        names = sorted({_files.partition_dir_name(t, p) for t, p in partitions})
        try:
            for name in names:
                lk = PartitionLock(self.root, name, COMMIT, self.holder, self.timeout)
                lk.acquire()
                self._locks.append(lk)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let every partition go (newest first)."""
        while self._locks:
            self._locks.pop().release()

    def __enter__(self) -> "RootCommit":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- what is there ----------------------------------------------------------------------------
    def target(self, topic: str, partition: int) -> str:
        return os.path.join(self.root, _files.partition_dir_name(topic, partition))

    def exists(self, topic: str, partition: int) -> bool:
        return os.path.isdir(self.target(topic, partition))

    def log_end(self, topic: str, partition: int) -> Optional[int]:
        """The log end offset of the partition as it is now (None: no partition, or no
        segment); stays so while the partition is locked."""
        return log_end_offset(self.target(topic, partition))

    # -- changing it ------------------------------------------------------------------------------
    def lower_log_starts(self, starts: Mapping[TP, int]) -> None:
        """Lower each log-start entry above where the partition's new directory starts, before
        any swap (remembered for :func:`undo`)."""
        path = os.path.join(self.root, _files.LOG_START_OFFSET_CHECKPOINT_FILE)
        current = checkpoint_entries(path, starts)
        lower = {tp: s for tp, s in starts.items()
                 if current[tp] is not None and current[tp] > s}  # type: ignore[operator]
        if lower:
            old = self.checkpoints_before.setdefault(path, {})
            for tp in lower:
                old.setdefault(tp, current[tp])
            _checkpoints.update_offset_checkpoint(path, lower, fsync=self.fsync)

    def new_directory(self, topic: str, partition: int) -> str:
        """An empty directory in the staging area for the partition's new directory."""
        d = os.path.join(self.staging, _files.partition_dir_name(topic, partition))
        os.makedirs(d)
        return d

    def carry_existing(self, topic: str, partition: int, directory: str,
                       below: int) -> Tuple[int, List[Tuple[int, int]]]:
        """Hard-link (or copy) the files of the existing partition into ``directory``, after
        opening and closing it cleanly (trimmed indexes, producer snapshot), leaving out its
        segment files from offset ``below`` on (an empty active segment at the old log end:
        the new data replaces it) and its ``leader-epoch-checkpoint``.  Returns its log start
        offset and leader-epoch entries.  A file that is a symbolic link leading out of the
        partition is refused."""
        from .log import Log

        target = self.target(topic, partition)
        existing = Log.open(target, read_only=False)
        log_start = existing.log_start_offset
        existing.close()
        for entry in _fs.LOCAL.list_dir(target):
            fname = entry.name
            src = os.path.join(target, fname)
            sf = _files.parse_segment_file_name(fname)
            if sf is not None and sf.kind in SEGMENT_KINDS and sf.base_offset >= below:
                continue
            if fname == _files.LEADER_EPOCH_CHECKPOINT_FILE:
                continue
            if entry.link:
                _refuse_outside_link(src, target)
            if entry.kind == _fs.FILE:
                _link_or_copy(src, os.path.join(directory, fname))
        return log_start, epoch_entries(target)

    def place(self, topic: str, partition: int, directory: str, log_start: int, end: int,
              epochs: Iterable[Tuple[int, int]] = ()) -> None:
        """Finish the new directory ``directory`` (leader epochs, clean-shutdown and
        generation markers, synced) and put it in place of the partition's directory; its
        checkpoint entries (log start ``log_start``, recovery point and high watermark
        ``end``) are written by :meth:`write_checkpoints`."""
        merged = merge_epochs(epochs)
        if merged:
            write_epochs(directory, merged, self.fsync)
        _checkpoints.write_clean_shutdown_file(
            os.path.join(directory, _files.CLEAN_SHUTDOWN_FILE), fsync=self.fsync)
        # a fresh generation marker: readers planned on the directory this one replaces tell
        # it from this one (an inode number may be reused) and fail instead of mixing
        _logdir.write_generation(directory)
        fsync_tree(directory, self.fsync)
        target = self.target(topic, partition)
        name = os.path.basename(target)
        # the old directory is kept, outside the staging area, until the whole commit is in
        # place (a failure puts every partition back)
        swap = Swap(target, directory)
        self.swaps.append(swap)
        if os.path.isdir(target):
            trash = os.path.join(self.root,
                                 f"{name}.{uuid.uuid4().hex}{_files.DELETE_DIR_SUFFIX}")
            if _files.exchange_paths(directory, target):
                # one atomic swap: the old directory (or link) is now at `directory`
                swap.placed, swap.old = True, directory
                os.rename(directory, trash)
                swap.old = trash
            else:  # two renames: for a moment there is no partition directory
                os.rename(target, trash)
                swap.old = trash
                os.rename(directory, target)
                swap.placed = True
        else:
            os.rename(directory, target)
            swap.placed = True
        if self.fsync:
            _files.fsync_dir(self.root)  # the new directory is durably in place first
        tp = (topic, partition)
        self._updates[_files.RECOVERY_POINT_CHECKPOINT_FILE][tp] = end
        self._updates[_files.REPLICATION_OFFSET_CHECKPOINT_FILE][tp] = end
        self._updates[_files.LOG_START_OFFSET_CHECKPOINT_FILE][tp] = log_start

    def write_checkpoints(self) -> None:
        """Update the root checkpoints of every partition placed (the entries they replace
        are remembered for :func:`undo`)."""
        for fname, updates in self._updates.items():
            if updates:
                path = os.path.join(self.root, fname)
                old = self.checkpoints_before.setdefault(path, {})
                for tp, value in checkpoint_entries(path, updates).items():
                    old.setdefault(tp, value)
                _checkpoints.update_offset_checkpoint(path, updates, fsync=self.fsync)

    def undo(self) -> str:
        """:func:`undo` of what this commit changed."""
        return undo(self.swaps, self.checkpoints_before, self.fsync)

    def finish(self) -> None:
        """Committed: delete the directories it replaced (a linked partition directory: the
        link, not its target)."""
        for swap in self.swaps:
            if swap.old is None:
                continue
            if os.path.islink(swap.old):
                os.unlink(swap.old)
            else:
                shutil.rmtree(swap.old, ignore_errors=True)
