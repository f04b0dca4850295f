"""Spark-free core of the ``kafkalog`` sink: the write job's orchestration, the driver-side
commit that moves the partition logs the tasks staged into place.  The options and their
driver-side checks are :mod:`kafkalog.spark._write_options`; a task's writer is
:mod:`kafkalog.spark._staging`; the names the connector uses are all importable from here.

Protocol (one Spark write job):

1. Every task writes the rows it receives into partition logs of its own under
   ``<path>/.kafkalog-staging/<job id>/<task>/<topic>-<partition>/`` with
   :class:`kafkalog.storage.log.Log` (v2 batches built by :func:`kafkalog.arrow.from_arrow`;
   segments rolled at ``segmentBytes``; ``.index``/``.timeindex``/``leader-epoch-checkpoint``
   written by the Log), closes them cleanly and returns what it staged (a commit message;
   :mod:`kafkalog.spark._staging`).
2. ``commit`` (driver) groups the staged pieces by partition and locks every partition it
   will write (:class:`kafkalog.storage.commit.RootCommit`; the lock every writer of a
   partition takes, :mod:`kafkalog.storage.partition_lock`) until its directory is swapped in
   and the checkpoints are written: a concurrent job committing to the same partition waits,
   then numbers its records after this one's.  Several pieces of one partition
   (from several tasks) are accepted when their offsets are preserved and do not overlap, or
   when their tasks assigned the offsets (the pieces are then numbered one after another in
   task order); they are joined into one log rolled at ``segmentBytes`` (a single piece that
   needs no renumbering is used as it is).  Each partition's final directory is assembled inside the
   staging area (hard links to the segments of an existing partition when appending) and then
   renamed into place (an existing one is swapped with it in one atomic
   ``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere two renames leave a moment without it),
   so a partition directory is always either the old one or the complete new one.  Root
   checkpoints (recovery point, log start offset, high watermark) are updated last (a
   log-start entry that would hide new records is lowered before the swap), and the staging
   area is removed.  This module keeps the orchestration (which pieces, their offsets, the
   staging area); the directory swap and its undo, the root checkpoints and the leader-epoch
   merge are the storage's (:mod:`kafkalog.storage.commit`, a broker's ``LogManager``).
3. ``abort`` (driver, failed job) deletes the staging area; the target is untouched.

A commit that fails (an I/O error, a full disk) puts back, before it raises
:class:`~kafkalog.errors.KafkaStorageError`, every partition directory it had already swapped
and every checkpoint entry it had changed, so the target is as it was before the job; the
previous directories are only deleted once the whole job is in place.  The error says whether
putting back worked, and if not where a previous directory is (``<topic>-<partition>.<id>-delete``
in ``<path>``).  Spark then aborts the job, which removes the staging area; a staging
directory left behind because that removal failed too is never read by kafkalog and can be
deleted, and so can a ``-delete`` directory whose removal after a successful commit failed.
A log-start-offset entry above where a new partition directory starts is lowered before any
swap, so a commit that stops half-way (a crash) never hides the new records, nor lets a
writable open delete them; at worst records below an old log start show again.

Filesystem safety: every topic name is checked as Kafka checks it
(:func:`kafkalog.storage.files.validate_topic`) before a directory is made for it, on the driver for
the ``topic`` option and in each task for the ``topic`` column (the :class:`WriteError` names
the topic); a staging directory that resolves outside ``<path>`` (a planted symbolic link) is
refused; the files of an existing partition that are symbolic links leading out of it are
refused rather than linked into the new directory; and a partition directory that is itself a
symbolic link is replaced by a real directory on commit (the link is removed, the directory it
pointed to is left as it was).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._format import (
    ENTRY_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
)
from ..errors import KafkaStorageError
from ..storage import commit as _commit
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import partition_lock as _partition_lock
from ._staging import STAGING_DIR, StagedPartition, TaskWriter
from ._write_options import (
    SAVE_MODES,
    WriteError,
    WriteOptionError,
    WriteOptions,
    check_columns,
    check_option_keys,
    check_save_mode,
    effective_mode,
    exists_message,
)

__all__ = [
    # the options and the driver's checks (kafkalog.spark._write_options)
    "SAVE_MODES", "WriteError", "WriteOptionError", "WriteOptions", "check_columns",
    "check_option_keys", "check_save_mode", "effective_mode",
    # a task's writer (kafkalog.spark._staging)
    "STAGING_DIR", "StagedPartition", "TaskWriter",
    # the job
    "abort_job", "commit_job", "prepare_job", "target_has_data",
]

_ENTRY = ENTRY_HEADER


def target_has_data(root: str) -> bool:
    """Whether the target exists with anything in it but kafkalog's staging area and the
    partitions' lock files (what the errorifexists and ignore modes test at commit)."""
    kind = _fs.LOCAL.kind(root)
    if kind in (_fs.MISSING, _fs.DANGLING_LINK):
        return False
    if kind != _fs.DIRECTORY:
        return True
    try:
        entries = _fs.LOCAL.list_dir(root)
    except _fs.MissingFileError:
        return False
    return any(e.name != STAGING_DIR and not _partition_lock.is_lock_file_name(e.name)
               for e in entries)


_SEGMENT_KINDS = _commit.SEGMENT_KINDS


def _segment_files(d: str) -> List[str]:
    out = []
    for e in _fs.LOCAL.list_dir(d):
        sf = _files.parse_segment_file_name(e.name)
        if sf is not None and sf.suffix == "" and sf.kind in _SEGMENT_KINDS:
            out.append(e.name)
    return sorted(out)


# The directory swap, its undo, the root checkpoints and the leader-epoch merge are the
# storage's (kafkalog.storage.commit, a broker's LogManager); these names stay for callers.
_Swap = _commit.Swap


def _undo_commit(
    swaps: List[_commit.Swap], ckpt_old: Mapping[str, Mapping[Tuple[str, int], Optional[int]]],
    fsync: bool,
) -> str:
    """:func:`kafkalog.storage.commit.undo` (the sentence for the commit's error)."""
    return _commit.undo(swaps, ckpt_old, fsync)


def _storage_error(
    job_id: str, root: str, e: OSError, doing: str, undone: str
) -> KafkaStorageError:
    path = getattr(e, "path", None) or getattr(e, "filename", None)
    why = e if isinstance(e, KafkaStorageError) else KafkaStorageError.from_os_error(e, doing)
    return KafkaStorageError(
        f"write job {job_id} could not be committed to {root}: {why}; {undone}",
        path=os.fsdecode(path) if path is not None else root,
        errno=e.errno,
        operation="committing a write job",
    )


def commit_job(
    opts: WriteOptions, job_id: str, staged: Sequence[StagedPartition], overwrite: bool,
    save_mode: Optional[str] = None,
) -> Dict[str, Any]:
    """Move the staged partitions of a job into ``opts.path`` (see the module doc).  Returns a
    summary ``{"partitions": n, "records": n, "bytes": n}``.

    Every partition written is locked (:class:`kafkalog.storage.commit.RootCommit`) from the
    check of its log end to its swap and checkpoints: a concurrent job committing to the same
    partition waits and then appends after this one (or, with given offsets below the new log
    end, fails saying so); a writable ``Log`` open on it makes this commit wait, and fail
    naming it after ``kafkalog.storage.partition_lock.WAIT_TIMEOUT_S`` seconds."""
    root = opts.path
    job_dir = os.path.join(root, STAGING_DIR, job_id)
    if save_mode in ("errorifexists", "ignore") and target_has_data(root):
        # something was written to the target while the job ran
        if save_mode == "ignore":
            abort_job(opts, job_id)
            return {"partitions": 0, "records": 0, "bytes": 0}
        raise WriteError(exists_message(root))

    by_tp: Dict[Tuple[str, int], List[StagedPartition]] = {}
    for s in staged:
        if s.end_offset > s.first_offset or s.records:
            by_tp.setdefault((s.topic, s.partition), []).append(s)
    commit = _commit.RootCommit(
        root, os.path.join(job_dir, "_merged"), fsync=opts.fsync,
        holder=f"the commit of write job {job_id}")
    try:
        try:
            commit.lock(by_tp)
        except OSError as e:  # the lock file could not be made: nothing was touched
            raise _storage_error(job_id, root, e, "locking the partitions",
                                 "the target was left as it was before the job") from e
        summary = _commit_locked(opts, job_id, by_tp, overwrite, commit)
    finally:
        commit.release()
    abort_job(opts, job_id)
    return summary


def _commit_locked(
    opts: WriteOptions, job_id: str, by_tp: Mapping[Tuple[str, int], List[StagedPartition]],
    overwrite: bool, commit: "_commit.RootCommit",
) -> Dict[str, Any]:
    """The commit, its partitions locked: validate against the log ends as they are now,
    assemble each partition's directory, swap it in, update the checkpoints."""
    root = opts.path
    job_dir = os.path.join(root, STAGING_DIR, job_id)

    def log_end(topic: str, partition: int) -> Optional[int]:
        # reading the existing partition fails: nothing was touched yet
        try:
            return commit.log_end(topic, partition)
        except OSError as e:
            raise _storage_error(job_id, root, e, "reading the existing partition",
                                 "the target was left as it was before the job") from e

    # validate everything before touching the target
    plans = []
    for (topic, partition), pieces in sorted(by_tp.items()):
        pieces = sorted(pieces, key=lambda p: (p.first_offset, p.end_offset))
        exists = commit.exists(topic, partition)
        end = log_end(topic, partition) if exists and not overwrite else None
        if any(p.assigned for p in pieces):
            if not all(p.assigned for p in pieces):
                raise WriteError(
                    f"partition {topic}-{partition}: some tasks kept the given offsets and others "
                    "assigned new ones"
                )
            pieces = _number_pieces(pieces, end or 0)
        for a, b in zip(pieces, pieces[1:]):
            if b.first_offset < a.end_offset:
                raise WriteError(
                    f"partition {topic}-{partition} was written by several tasks with overlapping "
                    f"offsets ({a.first_offset}..{a.end_offset - 1} and "
                    f"{b.first_offset}..{b.end_offset - 1}): "
                    "repartition by topic and partition and sort by offset first, as "
                    "kafkalog.spark.write(df, path) does (or drop the offset column to assign new "
                    "offsets)"
                )
        if end is not None and pieces[0].first_offset < end:
            raise WriteError(
                f"cannot append to {topic}-{partition}: the new records start at offset "
                f"{pieces[0].first_offset}, below the log end offset {end} of the existing "
                "partition (use mode('overwrite') to replace it, or drop the offset column to "
                "assign offsets after the log end)"
            )
        plans.append((topic, partition, pieces, exists))

    records = nbytes = 0
    try:
        os.makedirs(commit.staging, exist_ok=True)
        _files.check_inside(commit.staging, root)  # no planted link out of the target root
        # A log-start entry above where a new directory starts would hide its first records
        # (and make a writable open delete them all) should the commit stop between a swap and
        # the checkpoint update: such entries are lowered before any swap.
        commit.lower_log_starts({(t, p): pieces[0].first_offset for t, p, pieces, _e in plans})
        for topic, partition, pieces, exists in plans:
            name = _files.partition_dir_name(topic, partition)
            merged = commit.new_directory(topic, partition)
            if len(pieces) > 1 or pieces[0].shift:
                # several tasks' pieces (or offsets to renumber): one log, rolled at
                # segmentBytes, whatever the number of tasks
                pieces = [_combine_pieces(opts, pieces, os.path.join(job_dir, "_combined", name))]
            epochs: List[Tuple[int, int]] = []
            log_start = pieces[0].first_offset
            if exists and not overwrite:
                # the existing log's files (closed cleanly first), the new records after them
                log_start, epochs = commit.carry_existing(
                    topic, partition, merged, pieces[0].first_offset)
            for p in pieces:
                for fname in _segment_files(p.directory):
                    dst = os.path.join(merged, fname)
                    if os.path.exists(dst):
                        if os.path.getsize(
                            os.path.join(p.directory, fname)
                        ) == 0 and not fname.endswith(".log"):
                            continue
                        raise WriteError(f"segment file {fname} of {name} written twice")
                    os.rename(os.path.join(p.directory, fname), dst)
                epochs.extend(_commit.epoch_entries(p.directory))
                meta = os.path.join(p.directory, _files.PARTITION_METADATA_FILE)
                if os.path.isfile(meta) and not os.path.exists(
                    os.path.join(merged, _files.PARTITION_METADATA_FILE)
                ):
                    os.rename(meta, os.path.join(merged, _files.PARTITION_METADATA_FILE))
                records += p.records
                nbytes += p.nbytes
            commit.place(topic, partition, merged, log_start, pieces[-1].end_offset, epochs)
        commit.write_checkpoints()
    except BaseException as e:
        undone = _undo_commit(commit.swaps, commit.checkpoints_before, opts.fsync)
        if isinstance(e, OSError):
            raise _storage_error(job_id, root, e, "committing", undone) from e
        raise
    commit.finish()  # committed: the old directories go
    return {"partitions": len(plans), "records": records, "bytes": nbytes}


def _number_pieces(pieces: Sequence[StagedPartition], base: int) -> List[StagedPartition]:
    """Pieces whose offsets were assigned by their tasks, numbered one after another from
    ``base`` in task order (each piece's offsets are consecutive)."""
    out = []
    for p in sorted(pieces, key=lambda p: (p.task_index, p.directory)):
        n = p.end_offset - p.first_offset
        out.append(
            dataclasses.replace(
                p, first_offset=base, end_offset=base + n, shift=p.shift + base - p.first_offset
            )
        )
        base += n
    return out


def _combine_pieces(
    opts: WriteOptions, pieces: Sequence[StagedPartition], directory: str
) -> StagedPartition:
    """Copy the batches of ``pieces`` (one partition, in offset order) into one new log in
    ``directory``, adding each piece's ``shift`` to its offsets (a v2 batch's base offset is
    outside its CRC), so that segments roll at ``segmentBytes`` as one writer's would."""
    from ..storage.log import Log

    os.makedirs(directory)
    _files.check_inside(directory, opts.path)
    topic_id = _files.topic_id_from_string(opts.topic_id) if opts.topic_id else None
    first = pieces[0]
    log = Log.open(directory, opts.log_config(), topic_id=topic_id)
    try:
        if first.first_offset:
            log.truncate_fully_and_start_at(first.first_offset)
        for p in pieces:
            for fname in _segment_files(p.directory):
                if fname.endswith(".log"):
                    _copy_batches(os.path.join(p.directory, fname), p.shift, log)
        start, end = log.log_start_offset, log.log_end_offset
    finally:
        log.close()
    if end != pieces[-1].end_offset:
        raise WriteError(
            f"combining the pieces of {first.topic}-{first.partition} ended at offset {end}, "
            f"not {pieces[-1].end_offset}"
        )
    return StagedPartition(
        first.topic, first.partition, directory, start, end,
        sum(p.records for p in pieces), sum(p.nbytes for p in pieces),
    )


def _copy_batches(path: str, shift: int, log: Any) -> None:
    """Append every batch of the segment file ``path`` to ``log``, base offsets moved by
    ``shift``."""
    with _fs.LOCAL.open_read(path) as f:
        pos = 0
        while True:
            head = f.read(pos, LOG_OVERHEAD)
            if len(head) < LOG_OVERHEAD:
                break
            base, size = _ENTRY.unpack_from(head, 0)
            body = f.read(pos + LOG_OVERHEAD, size) if size >= 0 else b""
            pos += LOG_OVERHEAD + size
            if (len(body) < size or size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
                    or body[MAGIC_OFFSET - LOG_OVERHEAD] != MAGIC_VALUE_V2):
                raise WriteError(f"unexpected data in the staged segment {path}")
            batch = bytearray(head + body)
            if shift:
                _ENTRY.pack_into(batch, 0, base + shift, size)
            log.append_as_follower(batch)


def prepare_job(opts: WriteOptions, job_id: str) -> str:
    """Create a job's staging directory (on the driver, before any task runs)."""
    from ..errors import UnsafePathError

    staging = os.path.join(opts.path, STAGING_DIR)
    if os.path.islink(staging):
        raise UnsafePathError(
            f"refusing to stage in {staging}: it is a symbolic link (to "
            f"{os.path.realpath(staging)}); remove it",
            path=staging,
        )
    job_dir = os.path.join(staging, job_id)
    os.makedirs(job_dir, exist_ok=True)
    _files.check_inside(job_dir, opts.path)
    return job_dir


def abort_job(opts: WriteOptions, job_id: str) -> None:
    """Delete a job's staging area (and the staging root when nothing else is in it).  Tasks
    of a failed job may still be running: retry until the tree stays gone (tasks never
    re-create the job directory)."""
    import time

    staging = os.path.join(opts.path, STAGING_DIR)
    job_dir = os.path.join(staging, job_id)
    for attempt in range(8):
        shutil.rmtree(job_dir, ignore_errors=True)
        if not os.path.exists(job_dir):
            if attempt:
                break
            time.sleep(0.05)
            if not os.path.exists(job_dir):
                break
        time.sleep(0.1 * (attempt + 1))
    try:
        os.rmdir(staging)
    except OSError:
        pass
