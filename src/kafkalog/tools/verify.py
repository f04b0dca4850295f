"""``kafkalog verify``: offline checks of Kafka log directories.

What is checked, per partition directory (a log root is every partition in it, plus its offset
checkpoints; a single file is checked on its own):

* every segment: entry framing (sizes, a torn tail), magic, CRC (CRC-32C for v2, CRC-32 for
  v0/v1), v2 header sanity (sizes, codec, record count vs offset delta), offsets (not below the
  segment's base offset, strictly increasing across batches and across segments, within the
  segment's 2^31 range); with ``deep``: every record decodes (decompression included), record
  offsets lie inside their batch and increase, control records are well formed;
* offset index (``.index``): whole entries, strictly increasing offsets and positions, every entry
  at a batch boundary whose batch ends at the entry's offset, no entry past the log;
* time index (``.timeindex``): whole entries, strictly increasing timestamps, non-decreasing
  offsets, every entry's offset is the last offset of a batch whose max timestamp is the entry's
  timestamp; a rolled segment's index holds the segment's largest timestamp;
* transaction index (``.txnindex``): whole entries, version 0, offsets ordered and inside the
  segment, each entry's last offset is a control batch (the ABORT marker);
* producer snapshots (``.snapshot``): header, CRC and size;
* ``leader-epoch-checkpoint`` (format, increasing epochs and offsets, not past the log end),
  ``partition.metadata``, and the root's ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` and
  ``cleaner-offset-checkpoint`` (format; offsets not past the partition's log end).

Each problem is located by file, byte position (when it has one) and offset (when known).
Errors make the exit status 1; warnings (left-over ``.swap``/``.cleaned``/``.deleted`` files, a
missing index that a broker would rebuild, ...) only with ``--strict``.  Verification is
read-only: what it finds is reported, never repaired, and no file is created, changed or deleted.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import time
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple

from .._format import (
    ENTRY_HEADER,
    LEGACY_MESSAGE_HEADER,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    V2_HEADER,
)
from .._speedups import crc as _crc
from ..errors import CorruptCheckpointError, CorruptSnapshotError, KafkaLogError, MissingCodecError
from ..records import LegacyRecordBatch, RecordBatch
from ..storage import checkpoints as _checkpoints
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import logdir as _logdir
from ..storage import store_fs as _store_fs
from ..storage.txn_index import txn_index_entries
from ._inputs import MappedFile, NoProgress, Progress, classify_dir, partition_dirs

__all__ = ["Problem", "Verifier", "framing_problem", "no_segments_problem", "run_verify"]

EXIT_MISSING_DEPENDENCY = MissingCodecError.exit_status

_ENTRY = ENTRY_HEADER
_V2 = V2_HEADER
_LEGACY = LEGACY_MESSAGE_HEADER
_I64 = struct.Struct(">q")  # a v1 message's timestamp
_OFFSET_ENTRY = OFFSET_INDEX_ENTRY
_TIME_ENTRY = TIME_INDEX_ENTRY
_INT_MAX = 2**31 - 1
_DROP_EVERY = 32 * 1024 * 1024


def framing_problem(buf, pos: int, size: int) -> Optional[str]:
    """What stops a walk of log entries at ``pos`` (``size`` bytes in all): too few bytes for
    an entry header, a size below the minimum, or an entry cut short; None when a whole entry
    is there.  Bytes that are not entries are damage, for ``verify`` and ``stats`` alike."""
    remaining = size - pos
    if remaining <= 0:
        return None
    if remaining <= 17:
        return f"{remaining} bytes at the end are too few for a batch header (a torn write)"
    length = _ENTRY.unpack_from(buf, pos)[1]
    if length < 14:
        return (f"corrupt batch header: size {length} is below the minimum record overhead 14; "
                f"the rest of the segment ({remaining} bytes) cannot be read")
    if length + 12 > remaining:
        return (f"truncated batch: {length + 12} bytes declared, {remaining} present (a torn "
                "write; a broker truncates it on recovery)")
    return None


def no_segments_problem(view) -> str:
    """Why a partition directory (a :class:`~kafkalog.storage.logdir.PartitionListing`) given on
    its own has nothing to read: it holds no ``.log`` segment."""
    what = "an empty directory"
    if view.orphan_indexes:
        what = f"only {len(view.orphan_indexes)} index file(s) whose .log is missing"
    elif view.snapshots or view.state_files or view.metadata or view.ignored:
        what = "no .log file among its files"
    return (f"no log segments to read: expected <20-digit offset>.log files in this partition "
            f"directory ({what})")


class Problem:
    __slots__ = ("severity", "file", "position", "offset", "message")

    def __init__(self, severity: str, file: str, message: str, position: Optional[int] = None,
                 offset: Optional[int] = None) -> None:
        self.severity = severity
        self.file = file
        self.position = position
        self.offset = offset
        self.message = message

    def text(self) -> str:
        where = self.file if self.position is None else f"{self.file}:{self.position}"
        off = "" if self.offset is None else f"offset {self.offset}: "
        return f"{where}: {self.severity}: {off}{self.message}"

    def obj(self) -> Dict[str, Any]:
        return {"type": "problem", "severity": self.severity, "file": self.file,
                "position": self.position, "offset": self.offset, "message": self.message}


class _SegmentResult:
    __slots__ = ("first_offset", "last_offset", "max_timestamp", "valid_bytes", "batches",
                 "records", "readable")

    def __init__(self) -> None:
        self.first_offset: Optional[int] = None
        self.last_offset: Optional[int] = None
        self.max_timestamp = -1
        self.valid_bytes = 0
        self.batches = 0
        self.records = 0
        self.readable = True


class Verifier:
    """Collects problems while walking paths; see the module docstring for the checks."""

    def __init__(self, deep: bool = False, max_problems: int = 1000, progress: bool = False,
                 on_problem=None) -> None:
        self.deep = deep
        self.max_problems = max_problems
        self.problems: List[Problem] = []
        self.errors = 0
        self.warnings = 0
        self.partitions = 0
        self.segments = 0
        self.batches = 0
        self.records = 0
        self.bytes = 0
        self.files = 0
        self.unchecked = 0  # batches whose codec library is not installed
        self.missing: List[str] = []  # what is missing, once each
        self.progress_enabled = progress
        self.on_problem = on_problem
        self._clean_roots: Dict[str, bool] = {}  # log root -> holds .kafka_cleanshutdown

    # -- problems ----------------------------------------------------------------------------------
    def _add(self, severity: str, file: str, message: str, position: Optional[int] = None,
             offset: Optional[int] = None) -> None:
        if severity == "error":
            self.errors += 1
        else:
            self.warnings += 1
        if len(self.problems) < self.max_problems:
            p = Problem(severity, file, message, position, offset)
            self.problems.append(p)
            if self.on_problem is not None:
                self.on_problem(p)

    def error(self, file, message, position=None, offset=None) -> None:
        self._add("error", file, message, position, offset)

    def warning(self, file, message, position=None, offset=None) -> None:
        self._add("warning", file, message, position, offset)

    # -- entry points ------------------------------------------------------------------------------
    def verify_path(self, path: str) -> None:
        if _logdir.isdir(path):
            try:
                kind = classify_dir(path)
            except _logdir.NotALogError as e:  # nothing of a log, or the logs one level down
                self.error(path, e.message)
                return
            if kind == "partition":
                self.verify_partition(path, alone=True)
            else:
                self.verify_root(path)
        elif _logdir.exists(path):
            self.verify_file(path)
        else:
            self.error(path, "no such file or directory")

    def verify_file(self, path: str) -> None:
        name = os.path.basename(path)
        sf = _files.parse_segment_file_name(name)
        self.files += 1
        if (name.endswith(".log") or name.endswith(".checkpoint") and name[:1].isdigit()
                or name == "bootstrap.checkpoint"):
            base = sf.base_offset if sf is not None else 0
            self.segments += 1
            self._verify_segment(path, base, None, is_last=True)
        elif sf is not None and sf.kind == ".index":
            self._verify_segment(
                os.path.join(os.path.dirname(path),
                             _files.filename_prefix_from_offset(sf.base_offset) + ".log"),
                sf.base_offset, None, is_last=True)
        elif sf is not None and sf.kind == ".timeindex":
            self._verify_segment(
                os.path.join(os.path.dirname(path),
                             _files.filename_prefix_from_offset(sf.base_offset) + ".log"),
                sf.base_offset, None, is_last=True)
        elif sf is not None and sf.kind == ".snapshot":
            self._verify_producer_snapshot(path, None)
        elif sf is not None and sf.kind == ".txnindex":
            self._verify_txn_index(path, sf.base_offset, None, None)
        elif name == _files.LEADER_EPOCH_CHECKPOINT_FILE:
            self._verify_leader_epochs(path, None)
        elif name == _files.PARTITION_METADATA_FILE:
            self._verify_partition_metadata(path)
        elif name in (_files.RECOVERY_POINT_CHECKPOINT_FILE,
                      _files.LOG_START_OFFSET_CHECKPOINT_FILE,
                      _files.REPLICATION_OFFSET_CHECKPOINT_FILE,
                      _files.CLEANER_OFFSET_CHECKPOINT_FILE):
            self._read_root_checkpoint(path)
        else:
            self.error(path, "not a Kafka log file: expected a segment (<offset>.log), an index, "
                             "a snapshot, a checkpoint, a partition directory or a log directory")

    def verify_root(self, root: str) -> None:
        leos: Dict[Tuple[str, int], int] = {}
        bootstrap = os.path.join(root, "bootstrap.checkpoint")
        if _logdir.isfile(bootstrap):
            # Checked, but not a partition segment: it counts as a file, and its batches are
            # not in the totals (so verify and stats count the same segments and batches).
            totals = (self.batches, self.records, self.bytes)
            self.files += 1
            self._verify_segment(bootstrap, 0, None, is_last=True)
            self.batches, self.records, self.bytes = totals
        for d in partition_dirs(root):
            leo = self.verify_partition(d)
            tp = _files.parse_partition_dir(os.path.basename(d)).topic_partition
            if leo is not None:
                leos[(tp.topic, tp.partition)] = leo
        checks = (
            (_files.RECOVERY_POINT_CHECKPOINT_FILE, "recovery point"),
            (_files.LOG_START_OFFSET_CHECKPOINT_FILE, "log start offset"),
            (_files.REPLICATION_OFFSET_CHECKPOINT_FILE, "high watermark"),
            (_files.CLEANER_OFFSET_CHECKPOINT_FILE, "cleaner checkpoint"),
        )
        for name, what in checks:
            path = os.path.join(root, name)
            if not _logdir.exists(path):
                continue
            entries = self._read_root_checkpoint(path)
            if entries is None:
                continue
            for tp, off in entries.items():
                leo = leos.get((tp.topic, tp.partition))
                if leo is None:
                    continue  # partition not in this directory (another log dir, or not copied)
                if off > leo:
                    self.warning(path, f"{what} {off} of {tp} is past the partition's log end "
                                       f"offset {leo}", offset=off)
                if off < 0:
                    self.error(path, f"negative {what} {off} for {tp}", offset=off)

    def _read_root_checkpoint(self, path: str):
        self.files += 1
        try:
            fs, where = _store_fs.for_path(path)  # a URI: read in its store, not as a local path
            return _checkpoints.read_offset_checkpoint(where, fs)
        except CorruptCheckpointError as e:
            self.error(path, e.message)
        except (OSError, UnicodeDecodeError) as e:
            self.error(path, str(e))
        return None

    def verify_partition(self, directory: str, alone: bool = False) -> Optional[int]:
        """Check one partition directory; returns its log end offset (None when unknown).
        ``alone``: the directory was given on its own (not found in a root), so a directory
        without a segment is an error: there is nothing to verify."""
        self.partitions += 1
        try:
            view = _logdir.scan_partition(directory)
        except OSError as e:
            self.error(directory, f"cannot list: {e.strerror or e}")
            return None
        if alone and not view.segments and not view.kraft_snapshots and not view.refused():
            self.error(directory, no_segments_problem(view))
            return None
        for ig in view.ignored:
            if ig.kind != _fs.FILE and ig.kind != _fs.MISSING:
                self.error(ig.path, f"{ig.reason}: not read")
            elif ig.reason != "not a Kafka log file name":
                self.warning(ig.path, f"ignored: {ig.reason}")
        for st in view.state_files:
            self.warning(st.path, f"left-over {st.suffix} file (an interrupted delete, clean or "
                                  "swap; a broker finishes or discards it at startup)")
        logs: List[int] = view.base_offsets
        for orphan in view.orphan_indexes:
            self.warning(orphan.path, "index file without a .log segment")
        prev_last: Optional[int] = None
        leo: Optional[int] = None
        for i, base in enumerate(logs):
            next_base = logs[i + 1] if i + 1 < len(logs) else None
            log_path = _files.log_file(directory, base)
            self.segments += 1
            res = self._verify_segment(log_path, base, next_base, is_last=next_base is None,
                                       prev_last=prev_last)
            if res.last_offset is not None:
                prev_last = res.last_offset
            if (next_base is not None and res.last_offset is not None
                    and res.last_offset >= next_base):
                self.error(log_path, f"last offset {res.last_offset} reaches into the next segment "
                                     f"(base offset {next_base})", offset=res.last_offset)
        if logs:
            leo = prev_last + 1 if prev_last is not None else logs[-1]
        for _base, full in view.snapshots:
            self._verify_producer_snapshot(full, leo)
        for _end, _epoch, full in view.kraft_snapshots:  # KRaft snapshots: batches like a segment
            self.segments += 1
            self._verify_segment(full, 0, None, is_last=True)
        epoch_path = view.path_of(_files.LEADER_EPOCH_CHECKPOINT_FILE)
        if epoch_path is not None:
            self._verify_leader_epochs(epoch_path, leo)
        meta_path = view.path_of(_files.PARTITION_METADATA_FILE)
        if meta_path is not None:
            self._verify_partition_metadata(meta_path)
        return leo

    # -- segments ----------------------------------------------------------------------------------
    def _verify_segment(self, log_path: str, base: int, next_base: Optional[int], is_last: bool,
                        prev_last: Optional[int] = None) -> _SegmentResult:
        res = _SegmentResult()
        directory = os.path.dirname(log_path)
        prefix = os.path.basename(log_path)[:-4] if log_path.endswith(".log") else None
        idx_path = os.path.join(directory, prefix + ".index") if prefix else None
        tidx_path = os.path.join(directory, prefix + ".timeindex") if prefix else None
        txn_path = os.path.join(directory, prefix + ".txnindex") if prefix else None
        self.files += 1
        try:
            mf = MappedFile(log_path)
        except FileNotFoundError:
            self.error(log_path, "segment file is missing")
            res.readable = False
            return res
        except OSError as e:
            self.error(log_path, f"cannot read: {e.strerror or e}")
            res.readable = False
            return res
        with mf:
            size = mf.size
            oidx = self._load_offset_index(idx_path, base, size) if idx_path else None
            tidx = self._load_time_index(tidx_path, base) if tidx_path else None
            if prefix is not None and size > 0:
                if oidx is None:
                    self.warning(idx_path, "offset index is missing (a broker rebuilds it)")
                if tidx is None:
                    self.warning(tidx_path, "time index is missing (a broker rebuilds it)")
            controls = self._walk(mf, log_path, base, prev_last, res, oidx, tidx)
        if txn_path and _logdir.exists(txn_path):
            self._verify_txn_index(txn_path, base, next_base, controls)
        if tidx is not None and tidx[2]:
            self._zero_time_index(tidx_path, is_last, res)
        if tidx is not None and not is_last and res.max_timestamp >= 0 and tidx[0]:
            last_ts = tidx[0][-1][0]
            if last_ts < res.max_timestamp:
                self.warning(tidx_path, f"the time index of this rolled segment ends at timestamp "
                                        f"{last_ts}, below the segment's largest timestamp "
                                        f"{res.max_timestamp}")
        return res

    def _zero_time_index(self, path: str, is_last: bool, res: _SegmentResult) -> None:
        """A time index that is all zeros (preallocated, never written, never trimmed).  Benign
        only for the active (last) segment after an unclean stop: a broker's recovery rebuilds
        it.  A rolled segment's index was trimmed when the segment rolled, and after a clean
        stop (the broker's ``.kafka_cleanshutdown`` in the log root) nothing is rebuilt: Kafka
        then takes the segment's largest timestamp to be 0, and a timestamp lookup skips the
        segment (``offsetsForTimes`` answers a later offset, or none)."""
        where = path if _fs.is_uri(path) else os.path.abspath(path)
        if is_last and not self._root_clean_shutdown(os.path.dirname(os.path.dirname(where))):
            self.warning(path, "time index is preallocated and holds no entry (not trimmed: "
                               "the broker did not shut down cleanly; a broker rebuilds it)")
            return
        if res.batches == 0:
            self.warning(path, "time index is preallocated and holds no entry (its segment "
                               "holds no batch)")
            return
        if not is_last:
            why = ("this segment was rolled: its time index was trimmed then, so it is damaged; "
                   "a broker does not rebuild a rolled segment's index")
        else:
            why = ("the broker shut down cleanly (.kafka_cleanshutdown in the log root), so "
                   "nothing rebuilds it")
        self.error(path, f"time index is all zeros and holds no entry for the segment's "
                         f"{res.batches} batches: {why}; timestamp lookups skip the segment "
                         f"(it reads as if its largest timestamp were 0)")

    def _root_clean_shutdown(self, root: str) -> bool:
        """Whether the log root ``root`` holds the broker's clean-shutdown marker (kafkalog's
        own marker inside a partition directory is not the broker's: a broker ignores it)."""
        cache = self._clean_roots
        if root not in cache:
            try:
                cache[root] = bool(root) and _logdir.isfile(
                    os.path.join(root, _files.CLEAN_SHUTDOWN_FILE))
            except OSError:
                cache[root] = False
        return cache[root]

    def _load_offset_index(self, path: str, base: int, log_size: int):
        """Entries [(offset, position)] or None when there is no file."""
        try:
            data = _logdir.read_file(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            self.error(path, f"cannot read: {e.strerror or e}")
            return None
        self.files += 1
        if len(data) % 8:
            self.error(path, f"length {len(data)} is not a multiple of 8 (a torn entry)")
        n = len(data) // 8
        entries: List[Tuple[int, int]] = []
        prev_off = None
        prev_pos = -1
        for i in range(n):
            rel, pos = _OFFSET_ENTRY.unpack_from(data, i * 8)
            if i > 0 and rel == 0 and pos == 0:
                break  # zero-filled tail of a preallocated (untrimmed) index
            off = base + rel
            where = i * 8
            if rel < 0:
                self.error(path, f"entry {i} has a negative relative offset {rel}", where, off)
                continue
            if prev_off is not None and off <= prev_off:
                self.error(path, f"entry {i}: offset {off} does not increase (previous {prev_off})",
                           where, off)
                continue
            if pos < prev_pos or pos < 0:
                self.error(path, f"entry {i}: position {pos} goes backwards (previous {prev_pos})",
                           where, off)
                continue
            if pos >= log_size:
                self.error(path, f"entry {i}: position {pos} is past the end of the log "
                                 f"({log_size} bytes)", where, off)
                continue
            entries.append((off, pos))
            prev_off, prev_pos = off, pos
        return entries

    def _load_time_index(self, path: str, base: int):
        """(entries [(timestamp, offset)], path, all zeros) or None."""
        try:
            data = _logdir.read_file(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            self.error(path, f"cannot read: {e.strerror or e}")
            return None
        self.files += 1
        if len(data) % 12:
            self.error(path, f"length {len(data)} is not a multiple of 12 (a torn entry)")
        n = len(data) // 12
        entries: List[Tuple[int, int]] = []
        if n and data.count(0) == len(data):
            # a preallocated time index never written to and never trimmed: a broker leaves the
            # active segment's so when it dies before index.interval.bytes were appended; its
            # loader reads no entry from it (Kafka's sanity check passes, recovery rebuilds it).
            # Benign only there: the caller says (it knows whether the segment is the last one).
            return (entries, path, True)
        prev: Optional[Tuple[int, int]] = None
        for i in range(n):
            ts, rel = _TIME_ENTRY.unpack_from(data, i * 12)
            if i > 0 and ts == 0 and rel == 0:
                break  # preallocated zero tail
            off = base + rel
            where = i * 12
            if rel < 0:
                self.error(path, f"entry {i} has a negative relative offset {rel}", where, off)
                continue
            if prev is not None:
                if ts <= prev[0]:
                    self.error(path, f"entry {i}: timestamp {ts} is not larger than the previous "
                                     f"entry's {prev[0]} (time index must increase)", where, off)
                    continue
                if off < prev[1]:
                    self.error(path, f"entry {i}: offset {off} is below the previous entry's "
                                     f"{prev[1]}", where, off)
                    continue
            entries.append((ts, off))
            prev = (ts, off)
        return (entries, path, False)

    def _walk(self, mf: MappedFile, path: str, base: int, prev_last: Optional[int],
              res: _SegmentResult, oidx, tidx) -> List[int]:
        """One pass over the batches: framing, CRC, offsets, indexes.  Returns the last offsets
        of control batches (for the transaction index check)."""
        buf = mf.buf
        size = mf.size
        deep = self.deep
        crc32c = _crc.crc32c
        crc32 = _crc.crc32
        v2unpack = _V2.unpack_from
        entry = _ENTRY.unpack_from
        o_entries = oidx or []
        o_i = 0
        o_n = len(o_entries)
        idx_path = path[:-4] + ".index"
        t_entries, t_path = (tidx[0], tidx[1]) if tidx is not None else ([], None)
        t_i = 0
        t_n = len(t_entries)
        controls: List[int] = []
        progress = (Progress(size, os.path.basename(path))
                    if self.progress_enabled and size > (64 << 20) else NoProgress())
        pos = 0
        last = prev_last
        max_ts = -1
        batches = 0
        walked = 0
        while True:
            remaining = size - pos
            if remaining <= 17:
                if remaining > 0:
                    self.error(path, framing_problem(buf, pos, size), pos)
                break
            offset, length = entry(buf, pos)
            if length < 14:
                self.error(path, framing_problem(buf, pos, size), pos)
                res.readable = False
                break
            bsize = length + 12
            if bsize > remaining:
                self.error(path, framing_problem(buf, pos, size), pos, offset)
                break
            magic = buf[pos + 16]
            batches += 1
            if magic == 2:
                if bsize < 61:
                    self.error(path, f"v2 batch of {bsize} bytes is smaller than its 61-byte "
                                     "header", pos, offset)
                    pos += bsize
                    continue
                (bo, _l, _ple, _m, crc, attrs, lod, base_ts, mts, pid, epoch, bseq,
                 count) = v2unpack(buf, pos)
                computed = crc32c(buf[pos + 21 : pos + bsize])
                if computed != crc:
                    self.error(path, f"CRC mismatch: stored {crc}, computed {computed}", pos, bo)
                lo = bo + lod
                if lod < 0:
                    self.error(path, f"negative last offset delta {lod}", pos, bo)
                    lo = bo
                if count < 0 or count > lod + 1:
                    self.error(path, f"record count {count} does not fit the batch's offset range "
                                     f"[{bo}, {lo}]", pos, bo)
                if attrs & 0x07 > 4:
                    self.error(path, f"unknown compression codec id {attrs & 0x07}", pos, bo)
                first = bo
                if mts > max_ts:
                    max_ts = mts
                is_control = attrs & 0x20
            elif magic < 2:
                crc = _LEGACY.unpack_from(buf, pos + 12)[0]
                computed = crc32(buf[pos + 16 : pos + bsize])
                if computed != crc:
                    self.error(path, f"CRC mismatch: stored {crc}, computed {computed}",
                               pos, offset)
                if magic == 1:
                    if length < 22:
                        self.error(path, f"v1 message of {length} bytes is smaller than its header",
                                   pos, offset)
                        pos += bsize
                        continue
                    mts = _I64.unpack_from(buf, pos + 18)[0]
                    if mts > max_ts:
                        max_ts = mts
                else:
                    mts = -1
                lo = offset
                first = offset if not buf[pos + 17] & 0x07 else None
                is_control = 0
            else:
                self.error(path, f"invalid magic byte {magic if magic < 128 else magic - 256}",
                           pos, offset)
                pos += bsize
                continue
            # offsets
            if last is not None:
                if (first if first is not None else lo) <= last:
                    self.error(path, "offsets do not increase: batch starts at "
                                     f"{first if first is not None else lo} after offset {last}",
                               pos, offset)
            elif first is not None and first < base:
                self.error(path, f"offset {first} is below the segment's base offset {base}",
                           pos, offset)
            if lo - base > _INT_MAX:
                self.error(path, f"offset {lo} is beyond the segment's range "
                                 f"(base {base} + 2^31-1)", pos, offset)
            if res.first_offset is None:
                res.first_offset = first if first is not None else lo
            if is_control:
                controls.append(lo)
            # indexes
            while o_i < o_n and o_entries[o_i][1] < pos:
                ioff, ipos = o_entries[o_i]
                self.error(idx_path, f"entry for offset {ioff} points to position {ipos}, which is "
                                     "not the start of a batch", o_i * 8, ioff)
                o_i += 1
            if o_i < o_n and o_entries[o_i][1] == pos:
                ioff = o_entries[o_i][0]
                # Kafka 4.x keys an entry by the last offset of the batch it points at; older
                # brokers keyed it by the last offset of the whole appended message set and
                # pointed it at the set's first batch (follower and cleaner appends cover several
                # batches), so an entry past this batch's last offset is still valid.  An entry
                # before the batch's first offset would send lookups past their records.
                if ioff < (first if first is not None else lo):
                    self.error(idx_path, f"Index offset: {ioff}, log offset: {lo} (the batch at "
                                         f"position {pos} holds offsets up to {lo}; lookups of "
                                         f"{ioff} would skip records)", o_i * 8, ioff)
                o_i += 1
            if t_i < t_n:
                while t_i < t_n and t_entries[t_i][1] < lo:
                    ts, toff = t_entries[t_i]
                    if last is None or toff > last:
                        self.error(t_path, f"indexed offset {toff} is not the last offset of a "
                                           f"batch (the batch at position {pos} ends at {lo})",
                                   t_i * 12, toff)
                    else:
                        self.error(t_path, f"indexed offset {toff} is not the last offset of a "
                                           "batch", t_i * 12, toff)
                    t_i += 1
                if t_i < t_n and t_entries[t_i][1] == lo:
                    ts = t_entries[t_i][0]
                    if ts != mts:
                        self.error(t_path, f"Index timestamp: {ts}, log timestamp: {mts} (batch at "
                                           f"position {pos})", t_i * 12, lo)
                    t_i += 1
            if deep:
                res.records += self._deep_check(buf, pos, magic, path, first, lo)
            last = lo
            pos += bsize
            walked += bsize
            if walked >= _DROP_EVERY:
                progress.advance(walked)
                walked = 0
                mf.drop_before(pos)
        progress.finish()
        for j in range(o_i, o_n):
            ioff, ipos = o_entries[j]
            self.error(idx_path, f"entry for offset {ioff} points to position {ipos}, past the "
                                 f"last complete batch (valid data ends at {pos})", j * 8, ioff)
        for j in range(t_i, t_n):
            ts, toff = t_entries[j]
            self.error(t_path, f"indexed offset {toff} (timestamp {ts}) is not in the log "
                               f"(last offset {last})", j * 12, toff)
        res.last_offset = last if res.first_offset is not None else None
        res.max_timestamp = max_ts
        res.valid_bytes = pos
        res.batches = batches
        self.batches += batches
        self.bytes += size
        return controls

    def _deep_check(
        self, buf, pos: int, magic: int, path: str, first: Optional[int], last: int
    ) -> int:
        try:
            if magic == 2:
                batch = RecordBatch(buf, pos, check_crc=False)
                recs = batch.records()
                control = batch.is_control_batch
            else:
                batch = LegacyRecordBatch(buf, pos, check_crc=False)
                recs = batch.records()
                control = False
                for r in recs:
                    if not r.is_valid():
                        self.error(path, f"inner message CRC mismatch (stored {r.crc})",
                                   pos, r.offset)
        except MissingCodecError as e:  # a missing dependency, not corruption: unchecked
            self.unchecked += 1
            if e.message not in self.missing:
                self.missing.append(e.message)
            return 0
        except KafkaLogError as e:
            self.error(path, f"records do not decode: {e.message}",
                       pos, first if first is not None else last)
            return 0
        self.records += len(recs)
        prev = None
        lo_bound = first if first is not None else (recs[0].offset if recs else last)
        for r in recs:
            o = r.offset
            if o < lo_bound or o > last:
                self.error(path, f"record offset {o} is outside its batch's range "
                                 f"[{lo_bound}, {last}]", pos, o)
            if prev is not None and o <= prev:
                self.error(path, f"record offset {o} does not increase (previous {prev})", pos, o)
            prev = o
        if magic == 2 and recs and last != recs[-1].offset and not control:
            pass  # compaction can remove the last record of a batch: lastOffsetDelta is kept
        if control:
            from .decoders import DecodeError, control_record_object

            for r in recs:
                try:
                    control_record_object(r.key, r.value)
                except DecodeError as e:
                    self.error(path, f"malformed control record: {e}", pos, r.offset)
        return len(recs)

    # -- other files -------------------------------------------------------------------------------
    def _verify_txn_index(self, path: str, base: int, next_base: Optional[int],
                          controls: Optional[List[int]]) -> None:
        self.files += 1
        try:
            data = _logdir.read_file(path)
        except OSError as e:
            self.error(path, f"cannot read: {e.strerror or e}")
            return
        if len(data) % 34:
            self.error(path, f"length {len(data)} is not a multiple of 34 (a torn entry)")
        control_set = set(controls) if controls is not None else None
        prev_last = None
        for i, (version, pid, first, last, lso) in enumerate(txn_index_entries(data)):
            where = i * 34
            if version & 0xFF != 0:
                self.error(path, f"entry {i}: unexpected aborted-transaction version "
                                 f"{version & 0xFF}", where, last)
                continue
            if first > last:
                self.error(path, f"entry {i}: first offset {first} is after last offset {last} "
                                 f"(producer {pid})", where, first)
            if last < base:
                self.error(path, f"entry {i}: last offset {last} is below the segment's base "
                                 f"offset {base}", where, last)
            if next_base is not None and last >= next_base:
                self.error(path, f"entry {i}: last offset {last} belongs to a later segment "
                                 f"(base {next_base})", where, last)
            if prev_last is not None and last < prev_last:
                self.error(path, f"entry {i}: last offset {last} is below the previous entry's "
                                 f"{prev_last}", where, last)
            if control_set is not None and last not in control_set:
                self.warning(path, f"entry {i}: no control batch (ABORT marker) at its last "
                                   f"offset {last} (producer {pid})", where, last)
            prev_last = last

    def _verify_producer_snapshot(self, path: str, leo: Optional[int]) -> None:
        from ..storage.producer_state import decode_snapshot

        self.files += 1
        try:
            data = _logdir.read_file(path)
            decode_snapshot(data, path=path)
        except CorruptSnapshotError as e:
            self.error(path, e.message)
            return
        except OSError as e:
            self.error(path, f"cannot read: {e.strerror or e}")
            return
        sf = _files.parse_segment_file_name(os.path.basename(path))
        if sf is not None and leo is not None and sf.base_offset > leo:
            self.warning(path, f"producer snapshot at offset {sf.base_offset} is past the log end "
                               f"offset {leo}", offset=sf.base_offset)

    def _verify_leader_epochs(self, path: str, leo: Optional[int]) -> None:
        self.files += 1
        try:
            fs, where = _store_fs.for_path(path)
            entries = _checkpoints.read_leader_epoch_checkpoint(where, fs)
        except CorruptCheckpointError as e:
            self.error(path, e.message)
            return
        except (OSError, UnicodeDecodeError) as e:
            self.error(path, str(e))
            return
        prev = None
        for i, e in enumerate(entries):
            if e.epoch < 0 or e.start_offset < 0:
                self.error(path, f"entry {i}: negative epoch or offset "
                                 f"({e.epoch} {e.start_offset})", offset=e.start_offset)
            if prev is not None and (e.epoch <= prev.epoch or e.start_offset < prev.start_offset):
                self.error(path, f"entry {i}: epoch {e.epoch} at offset {e.start_offset} does not "
                                 f"follow epoch {prev.epoch} at offset {prev.start_offset}",
                           offset=e.start_offset)
            if leo is not None and e.start_offset > leo:
                self.warning(path, f"entry {i}: epoch {e.epoch} starts at {e.start_offset}, past "
                                   f"the log end offset {leo}", offset=e.start_offset)
            prev = e

    def _verify_partition_metadata(self, path: str) -> None:
        self.files += 1
        try:
            fs, where = _store_fs.for_path(path)
            _checkpoints.read_partition_metadata(where, fs)
        except CorruptCheckpointError as e:
            self.error(path, e.message)
        except (OSError, UnicodeDecodeError) as e:
            self.error(path, str(e))

    # -- summary -----------------------------------------------------------------------------------
    def summary(self, elapsed: float) -> Dict[str, Any]:
        return {
            "type": "summary",
            "partitions": self.partitions,
            "segments": self.segments,
            "files": self.files,
            "batches": self.batches,
            "records": self.records if self.deep else None,
            "bytes": self.bytes,
            "seconds": round(elapsed, 3),
            "errors": self.errors,
            "warnings": self.warnings,
            "unchecked_batches": self.unchecked,
            "missing_dependencies": self.missing,
        }


def run_verify(paths: Sequence[str], *, deep: bool = False, json_output: bool = False,
               strict: bool = False, quiet: bool = False, max_problems: int = 1000,
               progress: bool = False, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    """The ``verify`` command: problems (one per line) then a summary; exit status 0/1."""

    def show(p: Problem) -> None:
        if quiet:
            return
        if json_output:
            out.write(json.dumps(p.obj(), separators=(",", ":")) + "\n")
        else:
            out.write(p.text() + "\n")

    v = Verifier(deep=deep, max_problems=max_problems, progress=progress, on_problem=show)
    t0 = time.monotonic()
    for p in paths:
        v.verify_path(p)
    elapsed = time.monotonic() - t0
    s = v.summary(elapsed)
    failed = v.errors > 0 or (strict and v.warnings > 0)
    if json_output:
        s["ok"] = not failed
        out.write(json.dumps(s, separators=(",", ":")) + "\n")
    else:
        listed = len(v.problems)
        more = v.errors + v.warnings - listed
        rate = s["bytes"] / elapsed / 1e6 if elapsed > 0 else 0.0
        verdict = "FAILED" if failed else "OK"
        out.write(
            f"{verdict}: {v.partitions} partition(s), {v.segments} segment(s), "
            f"{v.batches} batches, "
            f"{v.bytes} bytes in {elapsed:.2f} s ({rate:.0f} MB/s): {v.errors} error(s), "
            f"{v.warnings} warning(s)" + (f" ({more} not listed)" if more > 0 else "")
            + (f", {v.unchecked} batch(es) unchecked" if v.unchecked else "") + "\n"
        )
    out.flush()
    for m in v.missing:
        err.write(f"kafkalog verify: missing dependency: {m}\n")
    if v.missing:
        err.write(f"kafkalog verify: {v.unchecked} batch(es) not checked "
                  f"(exit status {EXIT_MISSING_DEPENDENCY})\n")
        err.flush()
    if failed:
        return 1
    return EXIT_MISSING_DEPENDENCY if v.missing else 0
