"""``kafkalog salvage SRC DST``: copy every valid batch out of damaged segments.

Each source segment is memory-mapped (read only) and walked.  A batch is *valid* when its framing
fits the file, its magic is 0, 1 or 2, its header is sane (sizes, codec, record count) and its
CRC matches; with ``deep`` its records must also decode.  Where the walk meets anything else it
resynchronises: it searches forward for the next position where a valid batch starts (candidate
positions are found with a byte pattern on the size and magic fields, runs of zero bytes are
skipped at C speed) and records the bytes in between as lost.  Valid batches whose offsets do not
increase past what was already copied are skipped (and reported), so the output is a valid log;
so are batches whose offsets cannot be in their segment (outside ``[base, base + 2^31 - 1]`` or
at or past the next segment's base: a damaged base offset, which the CRC does not cover) and
batches the log writer refuses.

The destination is written under a temporary name in its parent (``.<name>.salvage-*/<name>``)
and renamed into place once complete; on failure it is removed, so a half-written destination
never looks like a finished one.

The batches are appended, byte for byte, to a new :class:`~kafkalog.storage.log.Log` in DST (the
follower append path: offsets, producer ids, sequences, timestamps and leader epochs are kept),
which writes fresh segments, offset/time/transaction indexes, producer snapshots,
``leader-epoch-checkpoint``, ``partition.metadata`` (the source's topic id when it has one) and
the offset checkpoints.  Other files of a partition directory (``quorum-state``, KRaft
``.checkpoint`` snapshots) are copied as they are (temp file, fsync, rename).  SRC is never
written.

Destination names are checked before anything is created: a partition directory of DST named
``<topic>-<partition>`` must carry a topic name Kafka accepts
(:func:`kafkalog.storage.files.validate_topic`; :class:`~kafkalog.errors.InvalidTopicError` names
it), and nothing is written through a symbolic link planted inside DST that leads out of it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import IO, Any, Dict, List, Optional, Tuple

from .._format import ENTRY_HEADER, LEGACY_MESSAGE_HEADER, V2_HEADER
from .._speedups import crc as _crc
from ..errors import InvalidTopicError, KafkaLogError, KafkaStorageError
from ..records import LegacyRecordBatch, RecordBatch
from ..storage import checkpoints as _checkpoints
from ..storage import files as _files
from ..storage import fs as _fs
from ._inputs import MappedFile, NoProgress, Progress, classify_dir, partition_dirs, segment_files

__all__ = ["SalvageError", "LostRegion", "scan_segment", "run_salvage"]

_ENTRY = ENTRY_HEADER
_V2 = V2_HEADER
_LEGACY = LEGACY_MESSAGE_HEADER
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


def _check(
    buf, pos: int, size: int, deep: bool
) -> Tuple[int, Optional[Tuple[int, int]], Optional[str]]:
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
        (bo, _l, _ple, _m, crc, attrs, lod, _bts, _mts, _pid, _ep, _bseq, count) = _V2.unpack_from(
            buf, pos
        )
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
        if offsets is not None and reason in (
            "CRC mismatch", "truncated batch", "records do not decode"
        ):
            region.first_offset, region.last_offset = offsets
        yield ("lost", region)
        pos = end


class _PartitionJob:
    def __init__(self, sources: List[str], dst: str, topic_id, extra_files: List[str]) -> None:
        self.sources = sources
        self.dst = dst  # where it is written
        self.final: Optional[str] = None  # where it will be once finished (None: dst)
        self.topic_id = topic_id
        self.extra_files = extra_files


def _topic_id(directory: str):
    path = os.path.join(directory, _files.PARTITION_METADATA_FILE)
    if not os.path.exists(path):
        return None
    try:
        return _checkpoints.read_partition_metadata(path).topic_id
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


def _segment_range(src: str, next_src: Optional[str]) -> Tuple[Optional[int], Optional[int]]:
    """The offsets a source segment can hold, from the file names: ``(base, highest)``, Kafka's
    ``[base, base + 2^31 - 1]`` and below the next segment's base; ``(None, None)`` for a file
    whose name is not a base offset."""
    sf = _files.parse_segment_file_name(os.path.basename(src))
    if sf is None:
        return None, None
    hi = sf.base_offset + INT_MAX
    if next_src is not None:
        nf = _files.parse_segment_file_name(os.path.basename(next_src))
        if nf is not None and nf.base_offset > sf.base_offset:
            hi = min(hi, nf.base_offset - 1)
    return sf.base_offset, hi


def _salvage_partition(job: _PartitionJob, dst_root: str, deep: bool, segment_bytes: int,
                       report: SalvageReport, progress_enabled: bool) -> Dict[str, Any]:
    from ..storage.log import Log

    if not os.path.isdir(job.dst):
        os.mkdir(job.dst)  # a partition directory of a root: DST itself exists (and is empty)
    _files.check_inside(job.dst, dst_root)
    config = {"segment.bytes": segment_bytes, "max.message.bytes": INT_MAX}
    log = Log.open(job.dst, config, topic_id=job.topic_id)
    part = {"source": [os.fspath(s) for s in job.sources],
            "destination": getattr(job, "final", None) or job.dst, "batches": 0,
            "bytes": 0, "firstOffset": None, "lastOffset": None, "lost": 0}
    last: Optional[int] = None  # the last offset copied, or about to be (in the pending chunk)
    copied: Optional[int] = None  # the last offset the log took
    pending_lost: List[LostRegion] = []  # regions waiting for the next copied offset

    def lose(region: LostRegion) -> None:
        if region.first_offset is None and not region.reason.startswith("zero-filled"):
            if copied is not None:
                region.first_offset = copied + 1
            elif seg_base is not None:
                region.first_offset = seg_base
        pending_lost.append(region)
        report.lost.append(region)
        part["lost"] += region.size

    def take(data, batches: List[Tuple[int, int, int, int]]) -> None:
        """Append whole batches ``(pos, size, first, last)`` to the log (raises what it
        raises) and account for them."""
        nonlocal copied
        first = batches[0][2]
        if copied is None and first != log.log_end_offset:
            log.truncate_fully_and_start_at(first)  # the log starts where the source does
        log.append_as_follower(data)
        n = sum(b[1] for b in batches)
        report.batches += len(batches)
        report.bytes_copied += n
        part["batches"] += len(batches)
        part["bytes"] += n
        if part["firstOffset"] is None:
            part["firstOffset"] = first
        for region in pending_lost:
            if region.last_offset is None and region.first_offset is not None:
                region.last_offset = first - 1
        pending_lost.clear()
        copied = batches[-1][3]

    try:
        for si, src in enumerate(job.sources):
            next_src = job.sources[si + 1] if si + 1 < len(job.sources) else None
            seg_base, seg_hi = _segment_range(src, next_src)
            try:
                mf = MappedFile(src)
            except OSError as e:
                raise SalvageError(f"{src}: {e.strerror or e}") from None
            with mf:
                buf = mf.buf
                size = mf.size
                report.bytes_read += size
                progress = (Progress(size, os.path.basename(src))
                            if progress_enabled and size > (64 << 20) else NoProgress())
                if si > 0 and log.active_segment.size > 0:
                    log.roll()
                chunk: List[Tuple[int, int, int, int]] = []  # contiguous batches to append
                chunk_bytes = 0

                def flush_chunk():
                    """Append the pending batches; a batch the log writer refuses (offsets it
                    cannot store: a damaged base offset, which the CRC does not cover) is
                    damage, skipped and reported like any other.  I/O errors stop the run."""
                    nonlocal chunk, chunk_bytes, last
                    batches, chunk, chunk_bytes = chunk, [], 0
                    if not batches:
                        return
                    try:
                        take(buf[batches[0][0]:batches[-1][0] + batches[-1][1]], batches)
                    except KafkaStorageError:
                        raise
                    except KafkaLogError:
                        for b in batches:  # one by one: which of them is refused?
                            try:
                                take(buf[b[0]:b[0] + b[1]], [b])
                            except KafkaStorageError:
                                raise
                            except KafkaLogError as e:
                                lose(LostRegion(
                                    src, b[0], b[0] + b[1],
                                    f"a valid batch the log writer refused ({e.message}); "
                                    f"its header says offsets {b[2]}-{b[3]}"))
                    last = copied

                for item in scan_segment(buf, size, src, deep):
                    if item[0] == "lost":
                        flush_chunk()
                        lose(item[1])
                        continue
                    _, pos, n, first, lastoff = item
                    if last is not None and first <= last:
                        flush_chunk()
                        if first <= last:
                            region = LostRegion(
                                src, pos, pos + n,
                                f"valid batch whose offsets {first}-{lastoff} do not follow "
                                f"offset {last} already copied", first, lastoff)
                            report.lost.append(region)
                            part["lost"] += n
                            continue
                    if seg_base is not None and (
                            lastoff > seg_hi or (buf[pos + 16] >= 2 and first < seg_base)):
                        # Kafka keeps a segment's offsets within [base, base + 2^31 - 1] and
                        # below the next segment's base: a damaged base offset field
                        flush_chunk()
                        lose(LostRegion(src, pos, pos + n,
                                        f"valid batch whose offsets {first}-{lastoff} cannot be in "
                                        f"this segment (offsets {seg_base}-{seg_hi}): a damaged "
                                        "base offset (the CRC does not cover it)"))
                        continue
                    if chunk and (chunk[-1][0] + chunk[-1][1] != pos or chunk_bytes >= _CHUNK):
                        flush_chunk()
                    chunk.append((pos, n, first, lastoff))
                    chunk_bytes += n
                    last = lastoff
                    progress.set(pos + n)
                flush_chunk()
                progress.finish()
        part["lastOffset"] = copied
    finally:
        log.close()
    for extra in job.extra_files:
        target = os.path.join(job.dst, os.path.basename(extra))
        _files.atomic_copy(extra, target)  # never through a link planted at the name
        report.copied_files.append(target)
    return part


def _staging(dst: str) -> Tuple[str, str, str, List[str]]:
    """Where a salvage into ``dst`` is written until it is complete: ``(staging directory,
    work directory, final path, parents made)``.  The work directory, named as ``dst`` (a
    partition directory keeps its ``<topic>-<partition>`` name), is in a fresh temporary
    directory in ``dst``'s parent (the same file system), renamed to ``dst`` at the end."""
    final = os.path.realpath(dst) if os.path.islink(dst) else os.path.abspath(dst)
    parent = os.path.dirname(final)
    made: List[str] = []
    p = parent
    while not os.path.isdir(p):
        made.append(p)
        p = os.path.dirname(p)
    if made:
        os.makedirs(parent)
    name = os.path.basename(final)
    staging = tempfile.mkdtemp(prefix=f".{name}.salvage-", dir=parent)
    work = os.path.join(staging, name)
    os.mkdir(work)
    return staging, work, final, made


def _finish(staging: str, work: str, final: str) -> None:
    """Put the finished destination in place: ``work`` renamed to ``final`` (an empty
    directory there is replaced), then the staging directory removed."""
    if os.path.isdir(final) and not os.path.islink(final):
        if _fs.LOCAL.list_dir(final):
            raise SalvageError(f"{final}: exists and is not empty (written to meanwhile)")
        os.rmdir(final)
    os.rename(work, final)
    _files.fsync_dir(os.path.dirname(final))
    shutil.rmtree(staging, ignore_errors=True)


def _discard(staging: str, made: List[str]) -> None:
    """Remove an unfinished destination (and the parents made for it, if still empty)."""
    shutil.rmtree(staging, ignore_errors=True)
    for p in made:  # deepest first
        try:
            os.rmdir(p)
        except OSError:
            break


def run_salvage(src: str, dst: str, *, deep: bool = False, segment_bytes: int = 1024 ** 3,
                json_output: bool = False, progress: bool = False, out: IO[str] = sys.stdout,
                err: IO[str] = sys.stderr) -> int:
    """The ``salvage`` command.  Exit status 0 once DST is written (losses are reported)."""
    _check_destination(src, dst)
    jobs = _plan(src, dst)
    _check_destination_names(jobs)
    report = SalvageReport()
    t0 = time.monotonic()
    # an unfinished destination must never look finished: everything is written under a
    # temporary name in DST's parent and renamed to DST at the end (removed on failure)
    staging, work, final, made = _staging(dst)
    try:
        for job in jobs:
            job.final = job.dst
            rel = os.path.relpath(job.dst, dst)
            job.dst = work if rel == os.curdir else os.path.join(work, rel)
            report.partitions.append(_salvage_partition(job, work, deep, segment_bytes, report,
                                                        progress))
        report.copied_files = [os.path.join(dst, os.path.relpath(f, work))
                               for f in report.copied_files]
        _finish(staging, work, final)
    except BaseException:
        _discard(staging, made)
        raise
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
            out.write(f"{p['destination']}: {p['batches']} batches, {p['bytes']} bytes copied "
                      f"({rng})\n")
        for r in report.lost:
            out.write(f"lost: {r.file} bytes [{r.start}, {r.end}) ({r.size} bytes): {r.reason}; "
                      f"{r.offsets_text()}\n")
        verdict = "nothing lost" if not report.lost else (
            f"{len(report.lost)} damaged region(s), {report.lost_bytes} bytes lost")
        out.write(f"salvaged {report.batches} batches ({report.bytes_copied} of "
                  f"{report.bytes_read} bytes) from {src} into {dst} in {elapsed:.2f} s: "
                  f"{verdict}\n")
    out.flush()
    return 0
