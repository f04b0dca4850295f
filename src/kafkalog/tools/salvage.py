"""``kafkalog salvage SRC DST``: copy every valid batch out of damaged segments.

Each source segment is memory-mapped (read only) and walked.  A batch is *valid* when its framing
fits the file, its magic is 0, 1 or 2, its header is sane (sizes, codec, record count) and its
CRC matches; with ``deep`` its records must also decode.  Where the walk meets anything else it
resynchronises: it searches forward for the next position where a valid batch starts (candidate
positions are found with a byte pattern on the size and magic fields, runs of zero bytes are
skipped at C speed) and records the bytes in between as lost.  Valid batches whose offsets do not
increase past what was already copied are skipped (and reported), so the output is a valid log.

The batches are appended, byte for byte, to a new :class:`~kafkalog.storage.log.Log` in DST (the
follower append path: offsets, producer ids, sequences, timestamps and leader epochs are kept),
which writes fresh segments, offset/time/transaction indexes, producer snapshots,
``leader-epoch-checkpoint``, ``partition.metadata`` (the source's topic id when it has one) and
the offset checkpoints.  Other files of a partition directory (``quorum-state``, KRaft
``.checkpoint`` snapshots) are copied as they are (temp file, fsync, rename).  SRC is never
written.

Destination names are checked before anything is created: a partition directory of DST named
``<topic>-<partition>`` must carry a topic name Kafka accepts
(:func:`kafkalog.storage.files.validate_topic`; :class:`~kafkalog.errors.InvalidTopicError` names it), and
nothing is written through a symbolic link planted inside DST that leads out of it.
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
import time
from typing import IO, Any, Dict, List, Optional, Tuple

from ..storage import files as _files
from ..storage import fs as _fs
from .._speedups import crc as _crc
from .dump import MappedFile, Progress, NoProgress, classify_dir, partition_dirs, segment_files
from ..errors import InvalidTopicError, KafkaLogError
from ..records import LegacyRecordBatch, RecordBatch

__all__ = ["SalvageError", "LostRegion", "scan_segment", "run_salvage"]

_ENTRY = struct.Struct(">qi")
_V2 = struct.Struct(">qiibIhiqqqhii")
_LEGACY = struct.Struct(">IBB")
# A batch can start at p only if its size field (bytes 8-11) is >= 14 and < 2^31 and its magic
# (byte 16) is 0, 1 or 2.
_CANDIDATE = re.compile(rb"(?=.{8}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f].{7}[\x00-\x02])", re.S)
_NONZERO = re.compile(rb"[^\x00]")
_CHUNK = 8 * 1024 * 1024
INT_MAX = 2**31 - 1


class SalvageError(ValueError):
    """Salvage cannot run (bad arguments, unwritable destination)."""


class LostRegion:
    """Bytes ``[start, end)`` of ``file`` that were not copied, and why.  ``first_offset`` /
    ``last_offset`` bound the offsets that were lost there when they are known."""

    __slots__ = ("file", "start", "end", "reason", "first_offset", "last_offset")

    def __init__(self, file: str, start: int, end: int, reason: str,
                 first_offset: Optional[int] = None, last_offset: Optional[int] = None) -> None:
        self.file = file
        self.start = start
        self.end = end
        self.reason = reason
        self.first_offset = first_offset
        self.last_offset = last_offset

    @property
    def size(self) -> int:
        return self.end - self.start

    def offsets_text(self) -> str:
        if self.reason.startswith("zero-filled"):
            return "no records (every byte is zero)"
        a, b = self.first_offset, self.last_offset
        if a is None and b is None:
            return "offsets unknown"
        if a is not None and b is not None:
            if b < a:
                return "no offsets lost"
            return f"offsets {a}-{b}" if a != b else f"offset {a}"
        if a is not None:
            return f"offsets from {a}"
        return f"offsets up to {b}"

    def obj(self) -> Dict[str, Any]:
        return {"type": "lost", "file": self.file, "start": self.start, "end": self.end,
                "bytes": self.size, "reason": self.reason, "firstOffset": self.first_offset,
                "lastOffset": self.last_offset}


def _check(buf, pos: int, size: int, deep: bool) -> Tuple[int, Optional[Tuple[int, int]], Optional[str]]:
    """Is there a valid batch at ``pos``?  ``(batch size or 0, (first, last) offsets if the header
    could be read, reason when invalid)``."""
    remaining = size - pos
    if remaining <= 17:
        return 0, None, "too few bytes for a batch header"
    offset, length = _ENTRY.unpack_from(buf, pos)
    if length < 14:
        return 0, None, "corrupt batch header"
    bsize = length + 12
    magic = buf[pos + 16]
    if magic > 2:
        return 0, None, "corrupt batch header"
    if magic == 2:
        if bsize < 61 or remaining < 61:
            return 0, None, "corrupt batch header"
        (bo, _l, _ple, _m, crc, attrs, lod, _bts, _mts, _pid, _ep, _bseq, count) = _V2.unpack_from(buf, pos)
        if lod < 0 or count < 0 or count > lod + 1 or attrs & 0x07 > 4 or bo < 0:
            return 0, None, "corrupt batch header"
        offsets = (bo, bo + lod)
        if bsize > remaining:
            return 0, offsets, "truncated batch"
        if _crc.crc32c(buf[pos + 21 : pos + bsize]) != crc:
            return 0, offsets, "CRC mismatch"
        if deep:
            try:
                RecordBatch(buf, pos, check_crc=False).records()
            except KafkaLogError:
                return 0, offsets, "records do not decode"
        return bsize, offsets, None
    if length < (22 if magic == 1 else 14) or offset < 0:
        return 0, None, "corrupt batch header"
    crc, _m, attrs = _LEGACY.unpack_from(buf, pos + 12)
    if attrs & 0x07 > 3:
        return 0, None, "corrupt batch header"
    if bsize > remaining:
        return 0, (offset, offset), "truncated batch"
    if _crc.crc32(buf[pos + 16 : pos + bsize]) != crc:
        return 0, (offset, offset), "CRC mismatch"
    first = offset
    if attrs & 0x07 or deep:
        try:
            b = LegacyRecordBatch(buf, pos, check_crc=True)
            recs = b.records()
            if recs:
                first = recs[0].offset
        except KafkaLogError:
            return 0, (offset, offset), "records do not decode"
    return bsize, (first, offset), None


def _next_valid(buf, start: int, size: int, deep: bool) -> Optional[int]:
    """The next position >= ``start`` where a valid batch starts, or None."""
    pos = start
    while pos < size - 17:
        if buf[pos] == 0:
            # a batch has a non-zero byte in its size field (bytes 8-11): skip zero runs at C speed
            m = _NONZERO.search(buf, pos)
            if m is None:
                return None
            pos = max(pos, m.start() - 11)
        m = _CANDIDATE.search(buf, pos)
        if m is None:
            return None
        p = m.start()
        if _check(buf, p, size, deep)[0]:
            return p
        pos = p + 1
    return None


def scan_segment(buf, size: int, path: str, deep: bool = False):
    """Walk a (possibly damaged) segment: yields ``("batch", pos, bsize, first, last)`` for each
    valid batch and ``("lost", LostRegion)`` for each damaged region, in file order."""
    pos = 0
    while pos < size:
        n, offsets, reason = _check(buf, pos, size, deep)
        if n:
            yield ("batch", pos, n, offsets[0], offsets[1])
            pos += n
            continue
        start = pos
        nxt = _next_valid(buf, pos + 1, size, deep)
        end = size if nxt is None else nxt
        zeros = _NONZERO.search(buf, start, end) is None
        if zeros and reason in ("corrupt batch header", "too few bytes for a batch header"):
            reason = "zero-filled bytes (preallocated space or a torn write)"
        region = LostRegion(path, start, end, reason or "corrupt data")
        if offsets is not None and reason in ("CRC mismatch", "truncated batch", "records do not decode"):
            region.first_offset, region.last_offset = offsets
        yield ("lost", region)
        pos = end


class _PartitionJob:
    def __init__(self, sources: List[str], dst: str, topic_id, extra_files: List[str]) -> None:
        self.sources = sources
        self.dst = dst
        self.topic_id = topic_id
        self.extra_files = extra_files


def _topic_id(directory: str):
    path = os.path.join(directory, _files.PARTITION_METADATA_FILE)
    if not os.path.exists(path):
        return None
    try:
        return _files.read_partition_metadata(path).topic_id
    except (KafkaLogError, OSError, ValueError):
        return None


def _extra_files(directory: str) -> List[str]:
    from ..storage.logdir import QUORUM_STATE_FILE, scan_partition

    view = scan_partition(directory)
    out = [p for _, _, p in view.kraft_snapshots]
    if view.path_of(QUORUM_STATE_FILE) is not None:
        out.append(view.path_of(QUORUM_STATE_FILE))
    return sorted(out)


def _plan(src: str, dst: str) -> List[_PartitionJob]:
    if os.path.isdir(src):
        # a partition directory or a log root, by the rule every reader follows; anything else
        # (nothing of a log under it, its logs one level down) raises NotALogError naming it
        if classify_dir(src) == "partition":
            logs = [p for p in segment_files(src) if p.endswith(".log")]
            extra = _extra_files(src)
            if not logs and not extra:  # nothing to copy: never an empty "salvaged" log
                from ..storage.logdir import scan_partition
                from .verify import no_segments_problem

                raise SalvageError(f"{src}: {no_segments_problem(scan_partition(src))}")
            return [_PartitionJob(logs, dst, _topic_id(src), extra)]
        jobs = []
        for d in partition_dirs(src):
            logs = [p for p in segment_files(d) if p.endswith(".log")]
            jobs.append(_PartitionJob(logs, os.path.join(dst, os.path.basename(d)), _topic_id(d),
                                      _extra_files(d)))
        return jobs
    if os.path.isfile(src):
        return [_PartitionJob([src], dst, None, [])]
    raise SalvageError(f"{src}: no such file or directory")


def _check_destination_names(jobs: List[_PartitionJob]) -> None:
    """Every destination partition directory named ``<topic>-<partition>`` must carry a topic
    name Kafka accepts (checked before any directory is made)."""
    for job in jobs:
        name = os.path.basename(os.path.normpath(job.dst))
        try:
            tp = _files.parse_partition_dir(name).topic_partition
        except ValueError:
            continue  # not a <topic>-<partition> name: a free-form destination directory
        try:
            _files.validate_topic(tp.topic)
            _files.validate_partition(tp.partition)
        except InvalidTopicError as e:
            raise InvalidTopicError(
                f"cannot salvage into {job.dst}: {e.message}", e.topic, job.dst
            ) from None


def _check_destination(src: str, dst: str) -> None:
    rs = os.path.realpath(src)
    rd = os.path.realpath(dst)
    if rd == rs or rd.startswith(rs.rstrip(os.sep) + os.sep):
        raise SalvageError(f"{dst}: the destination must not be the source or inside it")
    if os.path.isdir(src) and rs.startswith(rd.rstrip(os.sep) + os.sep):
        raise SalvageError(f"{dst}: the destination must not contain the source")
    if os.path.exists(dst):
        if not os.path.isdir(dst):
            raise SalvageError(f"{dst}: exists and is not a directory")
        if _fs.LOCAL.list_dir(dst):
            raise SalvageError(f"{dst}: exists and is not empty")


class SalvageReport:
    def __init__(self) -> None:
        self.batches = 0
        self.bytes_copied = 0
        self.bytes_read = 0
        self.lost: List[LostRegion] = []
        self.partitions: List[Dict[str, Any]] = []
        self.copied_files: List[str] = []

    @property
    def lost_bytes(self) -> int:
        return sum(r.size for r in self.lost)


def _salvage_partition(job: _PartitionJob, dst_root: str, deep: bool, segment_bytes: int,
                       report: SalvageReport, progress_enabled: bool) -> Dict[str, Any]:
    from ..storage.log import Log

    if not os.path.isdir(job.dst):
        os.mkdir(job.dst)  # a partition directory of a root: DST itself exists (and is empty)
    _files.check_inside(job.dst, dst_root)
    config = {"segment.bytes": segment_bytes, "max.message.bytes": INT_MAX}
    log = Log.open(job.dst, config, topic_id=job.topic_id)
    part = {"source": [os.fspath(s) for s in job.sources], "destination": job.dst, "batches": 0,
            "bytes": 0, "firstOffset": None, "lastOffset": None, "lost": 0}
    last: Optional[int] = None
    pending_lost: List[LostRegion] = []  # regions waiting for the next copied offset
    try:
        for si, src in enumerate(job.sources):
            try:
                mf = MappedFile(src)
            except OSError as e:
                raise SalvageError(f"{src}: {e.strerror or e}") from None
            with mf:
                buf = mf.buf
                size = mf.size
                report.bytes_read += size
                progress = (Progress(size, os.path.basename(src)) if progress_enabled and size > (64 << 20)
                            else NoProgress())
                if si > 0 and log.active_segment.size > 0:
                    log.roll()
                chunk_start = chunk_end = None
                chunk_n = 0

                def flush_chunk():
                    nonlocal chunk_start, chunk_end, chunk_n
                    if chunk_start is not None:
                        log.append_as_follower(buf[chunk_start:chunk_end])
                        report.batches += chunk_n
                        report.bytes_copied += chunk_end - chunk_start
                        part["batches"] += chunk_n
                        part["bytes"] += chunk_end - chunk_start
                    chunk_start = chunk_end = None
                    chunk_n = 0

                for item in scan_segment(buf, size, src, deep):
                    if item[0] == "lost":
                        region = item[1]
                        if region.first_offset is None and not region.reason.startswith("zero-filled"):
                            if last is not None:
                                region.first_offset = last + 1
                            else:
                                sf = _files.parse_segment_file_name(os.path.basename(src))
                                if sf is not None:
                                    region.first_offset = sf.base_offset
                        pending_lost.append(region)
                        report.lost.append(region)
                        part["lost"] += region.size
                        flush_chunk()
                        continue
                    _, pos, n, first, lastoff = item
                    if last is not None and first <= last:
                        flush_chunk()
                        region = LostRegion(src, pos, pos + n,
                                            f"valid batch whose offsets {first}-{lastoff} do not follow "
                                            f"offset {last} already copied", first, lastoff)
                        report.lost.append(region)
                        part["lost"] += n
                        continue
                    for region in pending_lost:
                        if region.last_offset is None and region.first_offset is not None:
                            region.last_offset = first - 1
                    pending_lost.clear()
                    if part["firstOffset"] is None:
                        part["firstOffset"] = first
                        if log.log_end_offset == 0 and first > 0:
                            log.truncate_fully_and_start_at(first)
                    if chunk_start is not None and (chunk_end != pos or chunk_end - chunk_start >= _CHUNK):
                        flush_chunk()
                    if chunk_start is None:
                        chunk_start = pos
                    chunk_end = pos + n
                    chunk_n += 1
                    last = lastoff
                    progress.set(pos + n)
                flush_chunk()
                progress.finish()
        part["lastOffset"] = last
    finally:
        log.close()
    for extra in job.extra_files:
        target = os.path.join(job.dst, os.path.basename(extra))
        _files.atomic_copy(extra, target)  # never through a link planted at the name
        report.copied_files.append(target)
    return part


def run_salvage(src: str, dst: str, *, deep: bool = False, segment_bytes: int = 1024 ** 3,
                json_output: bool = False, progress: bool = False, out: IO[str] = sys.stdout,
                err: IO[str] = sys.stderr) -> int:
    """The ``salvage`` command.  Exit status 0 once DST is written (losses are reported)."""
    _check_destination(src, dst)
    jobs = _plan(src, dst)
    _check_destination_names(jobs)
    report = SalvageReport()
    t0 = time.monotonic()
    if not os.path.exists(dst):
        os.makedirs(dst)
    for job in jobs:
        report.partitions.append(_salvage_partition(job, dst, deep, segment_bytes, report, progress))
    elapsed = time.monotonic() - t0
    if json_output:
        for p in report.partitions:
            out.write(json.dumps({"type": "partition", **p}, separators=(",", ":")) + "\n")
        for r in report.lost:
            out.write(json.dumps(r.obj(), separators=(",", ":")) + "\n")
        out.write(json.dumps({
            "type": "summary", "source": src, "destination": dst, "batches": report.batches,
            "bytesCopied": report.bytes_copied, "bytesRead": report.bytes_read,
            "lostRegions": len(report.lost), "lostBytes": report.lost_bytes,
            "seconds": round(elapsed, 3),
        }, separators=(",", ":")) + "\n")
    else:
        for p in report.partitions:
            rng = ("no batches" if p["firstOffset"] is None
                   else f"offsets {p['firstOffset']}-{p['lastOffset']}")
            out.write(f"{p['destination']}: {p['batches']} batches, {p['bytes']} bytes copied ({rng})\n")
        for r in report.lost:
            out.write(f"lost: {r.file} bytes [{r.start}, {r.end}) ({r.size} bytes): {r.reason}; "
                      f"{r.offsets_text()}\n")
        verdict = "nothing lost" if not report.lost else (
            f"{len(report.lost)} damaged region(s), {report.lost_bytes} bytes lost")
        out.write(f"salvaged {report.batches} batches ({report.bytes_copied} of {report.bytes_read} "
                  f"bytes) from {src} into {dst} in {elapsed:.2f} s: {verdict}\n")
    out.flush()
    return 0
