"""``kafkalog stats``: what is in a log, per segment and per partition.

For each segment and partition: batches, records, bytes (file and valid), offset range,
compression (batches per codec and the ratio of uncompressed to stored record bytes), magic
versions, time range, distinct producer ids, transactional and control batches (commit/abort
markers), null keys and tombstones, and the number of distinct keys: exact up to 4096 keys, then
a HyperLogLog estimate (16384 registers, ~0.8% standard error).

``deep=False`` reads batch headers only: records are then counted from the headers, and the
compression ratio and key figures are not computed.  Files are only read.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import struct
import sys
from collections import Counter
from typing import IO, Any, Dict, List, Optional, Sequence

from .._format import ENTRY_HEADER, V2_HEADER
from .._speedups import dump as _walk
from ..control import control_type_id
from ..errors import KafkaLogError, MissingCodecError
from ..records import LegacyRecordBatch, RecordBatch
from ..storage import logdir as _logdir
from ._inputs import MappedFile, NoProgress, Progress, classify_dir, partition_dirs, segment_files
from .verify import framing_problem, no_segments_problem

EXIT_MISSING_DEPENDENCY = MissingCodecError.exit_status

__all__ = ["KeyCardinality", "SegmentStats", "run_stats", "stats_for_paths"]

_ENTRY = ENTRY_HEADER
_V2 = V2_HEADER
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_M64 = (1 << 64) - 1
_EXACT_LIMIT = 4096
_CACHE_SLOTS = 8192
_P = 14
_M = 1 << _P
_DROP_EVERY = 32 * 1024 * 1024


class KeyCardinality:
    """Distinct keys: an exact set up to 4096 keys, then HyperLogLog (p=14)."""

    __slots__ = ("exact", "registers", "cache")

    def __init__(self) -> None:
        self.exact: Optional[set] = set()
        self.registers: Optional[bytearray] = None
        # keys known to be in ``exact``, by hash slot (the compiled batch walk's, see
        # _dump.v2_stats_run): only ever holds keys of that set
        self.cache: Optional[list] = [None] * _CACHE_SLOTS

    def check_limit(self) -> None:
        """Past 4096 exact keys: to HyperLogLog (what ``add_many`` does after each batch)."""
        ex = self.exact
        if ex is not None and len(ex) > _EXACT_LIMIT:
            self.registers = bytearray(_M)
            _walk.hll_update(self.registers, list(ex), _P)
            self.exact = None
            self.cache = None

    def add(self, key: bytes) -> None:
        ex = self.exact
        if ex is not None:
            ex.add(key)
            if len(ex) > _EXACT_LIMIT:
                self.registers = bytearray(_M)
                for k in ex:
                    self._add_hll(k)
                self.exact = None
                self.cache = None
            return
        self._add_hll(key)

    def add_many(self, keys: List[bytes]) -> None:
        """``add`` for each key (the same registers: HyperLogLog does not depend on order)."""
        ex = self.exact
        if ex is not None:
            ex.update(keys)
            if len(ex) > _EXACT_LIMIT:
                self.registers = bytearray(_M)
                _walk.hll_update(self.registers, list(ex), _P)
                self.exact = None
                self.cache = None
            return
        _walk.hll_update(self.registers, keys, _P)

    def _add_hll(self, key: bytes) -> None:
        x = hash(key) & _M64
        j = x >> (64 - _P)
        rest = x & ((1 << (64 - _P)) - 1)
        rho = (64 - _P) - rest.bit_length() + 1
        regs = self.registers
        if rho > regs[j]:
            regs[j] = rho

    def merge(self, other: "KeyCardinality") -> None:
        if other.exact is not None:
            for k in other.exact:
                self.add(k)
            return
        if self.exact is not None:
            keys = self.exact
            self.exact = None
            self.cache = None
            self.registers = bytearray(other.registers)
            for k in keys:
                self._add_hll(k)
            return
        regs = self.registers
        for i, v in enumerate(other.registers):
            if v > regs[i]:
                regs[i] = v

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    def estimate(self) -> int:
        if self.exact is not None:
            return len(self.exact)
        regs = self.registers
        alpha = 0.7213 / (1 + 1.079 / _M)
        z = sum(2.0 ** -v for v in regs)
        e = alpha * _M * _M / z
        zeros = regs.count(0)
        if e <= 2.5 * _M and zeros:
            e = _M * math.log(_M / zeros)
        return int(round(e))


class SegmentStats:
    def __init__(self, name: str, deep: bool) -> None:
        self.name = name
        self.deep = deep
        self.batches = 0
        self.records = 0
        self.file_bytes = 0
        self.valid_bytes = 0
        self.first_offset: Optional[int] = None
        self.last_offset: Optional[int] = None
        self.magic: Counter = Counter()
        self.codecs: Counter = Counter()
        self.stored_record_bytes = 0
        self.uncompressed_record_bytes = 0
        self.min_timestamp: Optional[int] = None
        self.max_timestamp: Optional[int] = None
        self.producers: set = set()
        self.transactional_batches = 0
        self.control_batches = 0
        self.commit_markers = 0
        self.abort_markers = 0
        self.null_keys = 0
        self.tombstones = 0
        self.keys = KeyCardinality()
        self.errors: List[str] = []
        self.segments = 1
        self.unchecked = 0  # batches whose codec library is not installed
        self.missing: List[str] = []  # what is missing, once each

    def _ts(self, lo: int, hi: int) -> None:
        if lo >= 0 and (self.min_timestamp is None or lo < self.min_timestamp):
            self.min_timestamp = lo
        if hi >= 0 and (self.max_timestamp is None or hi > self.max_timestamp):
            self.max_timestamp = hi

    def _records(self, recs) -> None:
        keys = self.keys
        lo = hi = None
        for r in recs:
            k = r.key
            if k is None:
                self.null_keys += 1
            else:
                keys.add(k)
            if r.value is None:
                self.tombstones += 1
            t = r.timestamp
            if lo is None or t < lo:
                lo = t
            if hi is None or t > hi:
                hi = t
        if lo is not None:
            self._ts(lo, hi)

    def merge(self, o: "SegmentStats") -> None:
        self.batches += o.batches
        self.records += o.records
        self.file_bytes += o.file_bytes
        self.valid_bytes += o.valid_bytes
        if o.first_offset is not None and (
            self.first_offset is None or o.first_offset < self.first_offset
        ):
            self.first_offset = o.first_offset
        if o.last_offset is not None and (
            self.last_offset is None or o.last_offset > self.last_offset
        ):
            self.last_offset = o.last_offset
        self.magic.update(o.magic)
        self.codecs.update(o.codecs)
        self.stored_record_bytes += o.stored_record_bytes
        self.uncompressed_record_bytes += o.uncompressed_record_bytes
        if o.min_timestamp is not None:
            self._ts(o.min_timestamp, o.max_timestamp if o.max_timestamp is not None else -1)
        self.producers |= o.producers
        self.transactional_batches += o.transactional_batches
        self.control_batches += o.control_batches
        self.commit_markers += o.commit_markers
        self.abort_markers += o.abort_markers
        self.null_keys += o.null_keys
        self.tombstones += o.tombstones
        self.keys.merge(o.keys)
        self.errors.extend(o.errors)
        self.unchecked += o.unchecked
        self.missing.extend(m for m in o.missing if m not in self.missing)

    @property
    def compression_ratio(self) -> Optional[float]:
        if not self.deep or self.stored_record_bytes == 0:
            return None
        return self.uncompressed_record_bytes / self.stored_record_bytes

    def obj(self, kind: str) -> Dict[str, Any]:
        return {
            "type": kind,
            "name": self.name,
            "segments": self.segments,
            "batches": self.batches,
            "records": self.records,
            "fileBytes": self.file_bytes,
            "validBytes": self.valid_bytes,
            "firstOffset": self.first_offset,
            "lastOffset": self.last_offset,
            "magic": {str(k): v for k, v in sorted(self.magic.items())},
            "codecs": dict(sorted(self.codecs.items())),
            "storedRecordBytes": self.stored_record_bytes,
            "uncompressedRecordBytes": self.uncompressed_record_bytes if self.deep else None,
            "compressionRatio": (
                None if self.compression_ratio is None else round(self.compression_ratio, 4)
            ),
            "minTimestamp": self.min_timestamp,
            "maxTimestamp": self.max_timestamp,
            "producers": len(self.producers),
            "producerIds": sorted(self.producers)[:20],
            "transactionalBatches": self.transactional_batches,
            "controlBatches": self.control_batches,
            "commitMarkers": self.commit_markers if self.deep else None,
            "abortMarkers": self.abort_markers if self.deep else None,
            "nullKeys": self.null_keys if self.deep else None,
            "tombstones": self.tombstones if self.deep else None,
            "distinctKeys": self.keys.estimate() if self.deep else None,
            "distinctKeysExact": self.keys.is_exact if self.deep else None,
            "errors": self.errors,
            "uncheckedBatches": self.unchecked,
            "missingDependencies": self.missing,
        }

    def text(self, indent: str) -> str:
        def iso(ms: Optional[int]) -> str:
            if ms is None:
                return "-"
            try:
                t = _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc)
                return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            except (OverflowError, OSError, ValueError):
                return str(ms)

        offs = "-" if self.first_offset is None else f"{self.first_offset}-{self.last_offset}"
        magic = ",".join(f"v{k}" for k in sorted(self.magic)) or "-"
        codecs = ",".join(f"{k}={v}" for k, v in sorted(self.codecs.items())) or "-"
        ratio = "-" if self.compression_ratio is None else f"{self.compression_ratio:.2f}"
        lines = [
            f"{indent}batches {self.batches}, records {self.records}, bytes {self.file_bytes} "
            f"(valid {self.valid_bytes}), offsets {offs}",
            f"{indent}magic {magic}, codecs {codecs}, compression ratio {ratio}",
            f"{indent}time {iso(self.min_timestamp)} .. {iso(self.max_timestamp)}",
            f"{indent}producers {len(self.producers)}, "
            f"transactional batches {self.transactional_batches}, "
            f"control batches {self.control_batches}"
            + (f" (commit {self.commit_markers}, abort {self.abort_markers})" if self.deep else ""),
        ]
        if self.deep:
            approx = "" if self.keys.is_exact else "~"
            lines.append(f"{indent}distinct keys {approx}{self.keys.estimate()}, "
                         f"null keys {self.null_keys}, tombstones {self.tombstones}")
        if self.unchecked:
            lines.append(f"{indent}unchecked batches {self.unchecked} (their codec library is not "
                         "installed: records and compression ratio leave them out)")
        for e in self.errors[:5]:
            lines.append(f"{indent}error: {e}")
        return "\n".join(lines)


def segment_stats(path: str, deep: bool = True, progress: bool = False) -> SegmentStats:
    st = SegmentStats(path, deep)
    try:
        mf = MappedFile(path)
    except OSError as e:
        st.errors.append(f"{path}: {e.strerror or e}")
        return st
    with mf:
        buf = mf.buf
        size = mf.size
        st.file_bytes = size
        prog = (Progress(size, os.path.basename(path)) if progress and size > (64 << 20)
                else NoProgress())
        pos = 0
        walked = 0
        # runs of plain v2 data batches (no compression, not control) counted in one compiled
        # call; the loop below takes any other entry (and reports what is wrong with it)
        run = _walk.v2_stats_run if deep else None
        while size - pos > 17:
            if run is not None:
                keys = st.keys
                (npos, nb, nrec, first, last, tx, stored, nulls, tombs, tmin, tmax) = run(
                    buf, pos, size, keys.exact, keys.cache, keys.registers, _P, _EXACT_LIMIT,
                    _DROP_EVERY - walked, st.producers)
                if npos != pos:
                    st.batches += nb
                    st.magic[2] += nb
                    st.codecs["none"] += nb
                    if st.first_offset is None:
                        st.first_offset = first
                    st.last_offset = last
                    st.transactional_batches += tx
                    st.stored_record_bytes += stored
                    st.uncompressed_record_bytes += stored
                    st.records += nrec
                    st.null_keys += nulls
                    st.tombstones += tombs
                    st._ts(-1 if tmin is None else tmin, -1 if tmax is None else tmax)
                    keys.check_limit()
                    walked += npos - pos
                    pos = npos
                    if walked >= _DROP_EVERY:
                        prog.advance(walked)
                        walked = 0
                        mf.drop_before(pos)
                    continue
            offset, length = _ENTRY.unpack_from(buf, pos)
            bsize = length + 12
            if length < 14 or bsize > size - pos:
                break
            magic = buf[pos + 16]
            st.batches += 1
            st.magic[magic] += 1
            stored_before = st.stored_record_bytes
            try:
                if magic == 2:
                    (bo, _l, _ple, _m, _crc, attrs, lod, bts, mts, pid, _ep, _bs, count) = (
                        _V2.unpack_from(buf, pos)
                    )
                    codec = attrs & 0x07
                    st.codecs[_CODECS[codec] if codec <= 4 else str(codec)] += 1
                    if st.first_offset is None:
                        st.first_offset = bo
                    st.last_offset = bo + lod
                    if pid >= 0:
                        st.producers.add(pid)
                    if attrs & 0x10:
                        st.transactional_batches += 1
                    control = attrs & 0x20
                    if control:
                        st.control_batches += 1
                    st.stored_record_bytes += bsize - 61
                    if not deep:
                        st.records += max(count, 0)
                        st._ts(bts if not attrs & 0x40 else mts, mts)
                    else:
                        batch = RecordBatch(buf, pos, check_crc=False)
                        if codec:
                            section = batch.records_section()
                            st.uncompressed_record_bytes += len(section)
                        else:
                            section = buf[pos + 61:pos + bsize]
                            st.uncompressed_record_bytes += bsize - 61
                        summary = None if control else _walk.v2_record_summary(
                            section, count, bts, mts if attrs & 0x08 else None)
                        if summary is not None:  # the common case, without record objects
                            n, nulls, tombstones, lo, hi, keys = summary
                            st.records += n
                            st.null_keys += nulls
                            st.tombstones += tombstones
                            st.keys.add_many(keys)
                            if n:
                                st._ts(lo, hi)
                        else:
                            recs = batch.records()
                            st.records += len(recs)
                            if control:
                                for r in recs:
                                    t = control_type_id(r.key)
                                    if t == 0:  # ControlRecordType.ABORT
                                        st.abort_markers += 1
                                    elif t == 1:  # COMMIT
                                        st.commit_markers += 1
                                if recs:
                                    st._ts(min(r.timestamp for r in recs),
                                           max(r.timestamp for r in recs))
                            else:
                                st._records(recs)
                elif magic < 2:
                    attrs = buf[pos + 17]
                    codec = attrs & 0x07
                    st.codecs[_CODECS[codec] if codec <= 4 else str(codec)] += 1
                    st.stored_record_bytes += length - (22 if magic == 1 else 14) + (
                        0 if codec else (22 if magic == 1 else 14))
                    if codec == 0 and not deep:
                        st.records += 1
                        if st.first_offset is None:
                            st.first_offset = offset
                        st.last_offset = offset
                        if magic == 1:
                            ts = struct.unpack_from(">q", buf, pos + 18)[0]
                            st._ts(ts, ts)
                    else:
                        batch = LegacyRecordBatch(buf, pos, check_crc=False)
                        recs = batch.records()
                        if deep:
                            st.uncompressed_record_bytes += (len(batch.records_section()) if codec
                                                             else length)
                        st.records += len(recs)
                        if recs:
                            if st.first_offset is None:
                                st.first_offset = recs[0].offset
                        st.last_offset = offset
                        if deep:
                            st._records(recs)
                        elif magic == 1:
                            ts = batch.max_timestamp
                            st._ts(ts, ts)
                else:
                    st.errors.append(f"invalid magic {magic} at position {pos}")
            except MissingCodecError as e:  # a missing dependency, not corruption
                st.unchecked += 1
                st.stored_record_bytes = stored_before  # the ratio leaves the batch out
                if e.message not in st.missing:
                    st.missing.append(e.message)
            except KafkaLogError as e:
                st.errors.append(f"position {pos}: {e.message}")
            pos += bsize
            walked += bsize
            if walked >= _DROP_EVERY:
                prog.advance(walked)
                walked = 0
                mf.drop_before(pos)
        prog.finish()
        st.valid_bytes = pos
        problem = framing_problem(buf, pos, size)
        if problem is not None:  # bytes that are not batches: damage, as verify says
            st.errors.append(f"position {pos}: {problem}")
    return st




def _logs_of(directory: str) -> List[str]:
    return [p for p in segment_files(directory) if p.endswith(".log")]


def stats_for_paths(paths: Sequence[str], deep: bool = True, progress: bool = False):
    """``[(partition name, SegmentStats total, [SegmentStats per segment])]``."""
    groups: List[tuple] = []
    for p in paths:
        if _logdir.isdir(p):
            kind = classify_dir(p)  # NotALogError: nothing of a log, or the logs one level down
            if kind == "partition":
                logs = _logs_of(p)
                if not logs:
                    raise ValueError(f"{p}: {no_segments_problem(_logdir.scan_partition(p))}")
                groups.append((p, logs))
            else:
                for d in partition_dirs(p):
                    groups.append((d, _logs_of(d)))
        elif _logdir.isfile(p):
            if not p.endswith((".log", ".checkpoint")):
                raise ValueError(
                    f"{p}: not a Kafka log segment: expected an <offset>.log file, a partition "
                    "directory or a log directory"
                )
            groups.append((p, [p]))
        else:
            raise FileNotFoundError(2, "No such file or directory", p)
    out = []
    for name, logs in groups:
        total = SegmentStats(name, deep)
        total.segments = 0
        segs = []
        for log in logs:
            s = segment_stats(log, deep, progress)
            segs.append(s)
            total.merge(s)
            total.segments += 1
        out.append((name, total, segs))
    return out


def run_stats(paths: Sequence[str], *, json_output: bool = False, deep: bool = True,
              per_segment: bool = True, progress: bool = False, out: IO[str] = sys.stdout,
              err: IO[str] = sys.stderr) -> int:
    results = stats_for_paths(paths, deep, progress)
    for name, total, segs in results:
        if json_output:
            if per_segment:
                for s in segs:
                    out.write(json.dumps({**s.obj("segment"), "partition": name},
                                         separators=(",", ":")) + "\n")
            out.write(json.dumps(total.obj("partition"), separators=(",", ":")) + "\n")
        else:
            out.write(f"{name}: {total.segments} segment(s)\n")
            if per_segment and len(segs) > 1:
                for s in segs:
                    out.write(f"  {os.path.basename(s.name)}\n{s.text('    ')}\n")
                out.write("  total\n")
            out.write(total.text("    ") + "\n")
    out.flush()
    missing: List[str] = []
    unchecked = 0
    for _name, total, _segs in results:
        unchecked += total.unchecked
        missing.extend(m for m in total.missing if m not in missing)
    errors = sum(len(total.errors) for _name, total, _segs in results)
    for m in missing:
        err.write(f"kafkalog stats: missing dependency: {m}\n")
    if missing:
        err.write(f"kafkalog stats: {unchecked} batch(es) not read "
                  f"(exit status {EXIT_MISSING_DEPENDENCY})\n")
        err.flush()
    if errors:  # damaged data fails the run, as it fails verify
        err.write(f"kafkalog stats: error: {errors} error(s) in the data (listed with the "
                  "statistics); kafkalog verify checks CRCs, offsets and indexes too\n")
        err.flush()
        return 1
    return EXIT_MISSING_DEPENDENCY if missing else 0
