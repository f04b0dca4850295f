"""``kafkalog dump``: kafka-dump-log's output, line for line, without a JVM.

Dispatch is Kafka's: on the file-name suffix after the last ``.``

========================  ====================================================================
``.log``                  ``Log starting offset: <base>``, one line per batch (and with deep
                          iteration one ``| offset: ...`` line per record)
``.checkpoint``           a KRaft snapshot (``Snapshot end offset: <o>, epoch: <e>``) or
                          ``bootstrap.checkpoint`` (``KRaft bootstrap snapshot``), then batches
``.index``                ``offset: <o> position: <p>`` per entry, checked against the log
``.timeindex``            ``timestamp: <t> offset: <o>`` per entry, checked against the log
``.txnindex``             ``version: 0 producerId: ... lastStableOffset: ...`` per entry
``.snapshot``             ``producerId: ... lastTimestamp: ...`` per producer
anything else             ``Ignoring unknown file <file>`` on stderr
========================  ====================================================================

and the end-of-run reports (index mismatches, time-index problems, non-consecutive offsets) go
to stderr in Kafka's words.  See ``docs/cli.md`` for the JSON output and every deliberate
difference from Kafka's tool.

The files are memory-mapped and walked batch by batch; pages already dumped are dropped from
the mapping as the walk advances, so memory does not grow with the file.  Nothing is ever
written: files are opened read-only, and a directory that was not shut down cleanly is dumped as
it is (tests/cli/test_readonly.py checks every mode).
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import mmap
import os
import re
import struct
import sys
import time
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import KafkaStorageError
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import logdir as _logdir
from ..storage.index import txn_index_entries
from .._speedups import crc as _crc, dump as _lines
from .decoders import (
    DecodeError,
    DecoderMessageParser,
    MessageParser,
    ValueDecoder,
    control_record_object,
    control_record_text,
    java_utf8,
)
from ..errors import KafkaLogError
from ..records import LegacyRecordBatch, RecordBatch

__all__ = [
    "DumpError",
    "DumpOptions",
    "Dumper",
    "expand_inputs",
    "java_path",
    "java_abs_path",
    "MappedFile",
    "Progress",
    "NoProgress",
    "classify_dir",
    "partition_dirs",
    "segment_files",
]

INT_MAX = 2**31 - 1
_ENTRY = struct.Struct(">qi")
_V2 = struct.Struct(">qiibIhiqqqhii")  # 61-byte v2 header
_LEGACY = struct.Struct(">IBB")  # crc, magic, attributes (after the 12-byte log overhead)
_I64 = struct.Struct(">q")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_TS_TYPES = ("CreateTime", "LogAppendTime")
_SNAPSHOT_NAME = re.compile(r"^(\d+)-(\d+)\.checkpoint$")
_DROP_EVERY = 32 * 1024 * 1024  # bytes walked between dropping mapped pages
# streams whose write() copies or writes out what it is given before it returns (they keep no
# reference): the compiled batch walk's reused buffer goes to them as it is
_COPYING_STREAMS = (io.BufferedWriter, io.BufferedRandom, io.BytesIO)


class DumpError(Exception):
    """Bad input that stops the dump (Kafka's tool throws in the same places)."""


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


def _no_base_offset(shown: str, suffix: str) -> str:
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
        if end - self._dropped < _DROP_EVERY:
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

    def __init__(self, total: int, label: str = "", enabled: bool = True, stream: Optional[IO] = None) -> None:
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


# ------------------------------------------------------------------------------------------------
# small formatting helpers
# ------------------------------------------------------------------------------------------------
def _jbool(b: bool) -> bytes:
    return b"true" if b else b"false"


def _u8(b: bytes) -> bytes:
    """Bytes as Java prints ``new String(b, UTF_8)``: malformed sequences become U+FFFD."""
    if b.isascii():
        return b
    try:
        b.decode("utf-8")
        return b
    except UnicodeDecodeError:
        return java_utf8(b).encode("utf-8")


def _hkey_bytes(k: str) -> bytes:
    return _u8(k.encode("utf-8", "surrogateescape"))


def _increment_sequence(seq: int, inc: int) -> int:
    if seq > INT_MAX - inc:
        return inc - (INT_MAX - seq) - 1
    return seq + inc


def _wrap64(x: int) -> int:
    if -(2**63) <= x < 2**63:
        return x
    return ((x + 2**63) % 2**64) - 2**63


def _encoder(name: str) -> Callable[[bytes], Any]:
    if name == "hex":
        return lambda b: binascii.hexlify(b).decode("ascii")
    if name == "string":
        return java_utf8
    return lambda b: base64.b64encode(b).decode("ascii")


class DumpOptions:
    """Everything that shapes a dump (the CLI fills it from the flags)."""

    def __init__(
        self,
        *,
        print_data_log: bool = False,
        deep_iteration: bool = False,
        skip_record_metadata: bool = False,
        verify_index_only: bool = False,
        index_sanity_check: bool = False,
        max_message_size: int = 5 * 1024 * 1024,
        max_bytes: int = INT_MAX,
        parser: Optional[MessageParser] = None,
        json_output: bool = False,
        binary_encoding: str = "base64",
        explicit_decoders: bool = False,
        print_headers: bool = False,
        header_encoding: Optional[str] = None,
        from_offset: Optional[int] = None,
        to_offset: Optional[int] = None,
        from_timestamp: Optional[int] = None,
        progress: bool = False,
    ) -> None:
        self.print_data_log = print_data_log
        # Kafka: --print-data-log (or any decoder) implies deep iteration
        self.deep_iteration = deep_iteration or print_data_log
        self.skip_record_metadata = skip_record_metadata
        self.verify_index_only = verify_index_only
        self.index_sanity_check = index_sanity_check
        self.max_message_size = max_message_size
        self.max_bytes = max_bytes
        self.parser = parser or DecoderMessageParser(ValueDecoder("string"), ValueDecoder("string"))
        self.json_output = json_output
        self.binary_encoding = binary_encoding
        self.explicit_decoders = explicit_decoders
        self.print_headers = print_headers
        self.header_encoding = header_encoding
        self.from_offset = from_offset
        self.to_offset = to_offset
        self.from_timestamp = from_timestamp
        self.progress = progress

    @property
    def seeking(self) -> bool:
        return self.from_offset is not None or self.to_offset is not None or self.from_timestamp is not None


class _Out:
    """Buffered binary writer: collects byte strings and writes them in large chunks."""

    __slots__ = ("stream", "parts", "size", "limit")
    LIMIT = 1 << 18

    def __init__(self, stream: IO[bytes], limit: int = LIMIT) -> None:
        self.stream = stream
        self.parts: List[bytes] = []
        self.size = 0
        self.limit = limit

    def line(self, b: bytes) -> None:
        self.parts.append(b)
        self.size += len(b)
        if self.size >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.stream.write(b"".join(self.parts))
            self.parts.clear()
        self.size = 0


# ------------------------------------------------------------------------------------------------
# end-of-run reports
# ------------------------------------------------------------------------------------------------
class _Reports:
    def __init__(self) -> None:
        self.index_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.ts_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.ts_out_of_order: Dict[str, List[Tuple[int, int]]] = {}
        self.ts_not_found: Dict[str, List[Tuple[int, int]]] = {}
        self.non_consecutive: Dict[str, List[Tuple[int, int]]] = {}

    @staticmethod
    def add(table: Dict[str, List[Tuple[int, int]]], path: str, pair: Tuple[int, int]) -> None:
        table.setdefault(path, []).append(pair)

    def any(self) -> bool:
        return any((self.index_mismatches, self.ts_mismatches, self.ts_out_of_order,
                    self.ts_not_found, self.non_consecutive))

    def text(self) -> str:
        """Kafka's stderr reports.  Kafka 4.4 keeps each file's index mismatches and
        non-consecutive pairs in a map sorted by their first offset (mismatches descending,
        pairs ascending; a repeated offset keeps its last pair)."""
        lines: List[str] = []
        for path, items in self.index_mismatches.items():
            lines.append(f"Mismatches in :{path}")
            for a, b in sorted(dict(items).items(), reverse=True):
                lines.append(f"  Index offset: {a}, log offset: {b}")
        for path, items in self.ts_mismatches.items():
            lines.append(f"Found timestamp mismatch in :{path}")
            for a, b in items:
                lines.append(f"  Index timestamp: {a}, log timestamp: {b}")
        for path, items in self.ts_out_of_order.items():
            lines.append(f"Found out of order timestamp in :{path}")
            for a, b in items:
                lines.append(f"  Index timestamp: {a}, Previously indexed timestamp: {b}")
        for _path, items in self.ts_not_found.items():
            lines.append("The following indexed offsets are not found in the log.")
            for a, b in items:
                lines.append(f"Indexed offset: {a}, found log offset: {b}")
        for path, items in self.non_consecutive.items():
            lines.append(f"Non-consecutive offsets in {path}")
            for a, b in sorted(dict(items).items()):
                lines.append(f"  {a} is followed by {b}")
        return "".join(line + "\n" for line in lines)

    def json_lines(self) -> List[str]:
        out = []
        for path, items in self.index_mismatches.items():
            for a, b in items:
                out.append({"type": "index_mismatch", "file": path, "indexOffset": a, "logOffset": b})
        for path, items in self.ts_mismatches.items():
            for a, b in items:
                out.append({"type": "time_index_mismatch", "file": path, "indexTimestamp": a, "logTimestamp": b})
        for path, items in self.ts_out_of_order.items():
            for a, b in items:
                out.append({"type": "time_index_out_of_order", "file": path, "indexTimestamp": a,
                            "previousTimestamp": b})
        for path, items in self.ts_not_found.items():
            for a, b in items:
                out.append({"type": "index_offset_not_found", "file": path, "indexOffset": a,
                            "foundLogOffset": b})
        for path, items in self.non_consecutive.items():
            for a, b in items:
                out.append({"type": "non_consecutive_offsets", "file": path, "offset": a, "nextOffset": b})
        return [json.dumps(o, separators=(",", ":")) for o in out]


# ------------------------------------------------------------------------------------------------
# batch header access
# ------------------------------------------------------------------------------------------------
class _Header:
    """The fields kafka-dump-log prints for one batch, read straight from the bytes."""

    __slots__ = ("pos", "size", "magic", "base_offset", "last_offset", "count", "base_sequence",
                 "last_sequence", "producer_id", "producer_epoch", "leader_epoch", "attributes",
                 "max_timestamp", "base_timestamp", "crc", "valid", "ts_type", "codec")


def _read_header(buf, pos: int, size: int, magic: int, path: str) -> _Header:
    """Header fields of the entry at ``pos`` (``size`` includes the log overhead)."""
    h = _Header()
    h.pos = pos
    h.size = size
    h.magic = magic
    n = len(buf)
    if magic >= 2:
        if pos + 61 > n:
            raise DumpError(
                f"Failed to read `record batch header` from file channel `{path}`. Expected to read "
                f"61 bytes, but reached end of file after reading {n - pos} bytes. Started read "
                f"from position {pos}."
            )
        (base, length, ple, _m, crc, attrs, lod, base_ts, max_ts, pid, epoch, base_seq,
         count) = _V2.unpack_from(buf, pos)
        h.base_offset = base
        h.last_offset = _wrap64(base + lod)
        h.count = count
        h.base_sequence = base_seq
        h.last_sequence = -1 if base_seq == -1 else _increment_sequence(base_seq, lod)
        h.producer_id = pid
        h.producer_epoch = epoch
        h.leader_epoch = ple
        h.attributes = attrs
        h.base_timestamp = base_ts
        h.max_timestamp = max_ts
        h.crc = crc
        h.valid = size >= 61 and crc == _crc.crc32c(buf[pos + 21 : pos + size])
        h.ts_type = _TS_TYPES[1 if attrs & 0x08 else 0]
        codec = attrs & 0x07
    else:
        offset = _ENTRY.unpack_from(buf, pos)[0]
        crc, _m, attrs = _LEGACY.unpack_from(buf, pos + 12)
        h.base_offset = None
        h.last_offset = offset
        h.count = None
        h.attributes = attrs
        h.crc = crc
        h.valid = crc == _crc.crc32(buf[pos + 16 : pos + size])
        if magic == 0:
            h.max_timestamp = -1
            h.ts_type = "NoTimestampType"
        else:
            h.max_timestamp = _I64.unpack_from(buf, pos + 18)[0]
            h.ts_type = _TS_TYPES[1 if attrs & 0x08 else 0]
        h.base_timestamp = h.max_timestamp
        h.base_sequence = h.last_sequence = h.producer_id = h.producer_epoch = h.leader_epoch = -1
        codec = attrs & 0x07
    if codec > 4:
        raise DumpError(f"Unknown compression type id: {codec}")
    h.codec = _CODECS[codec]
    return h


def _batch_line(h: _Header) -> bytes:
    if h.magic >= 2:
        attrs = h.attributes
        dh = b"OptionalLong[%d]" % h.base_timestamp if attrs & 0x40 else b"OptionalLong.empty"
        return (
            b"baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "
            b"producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s "
            b"isControl: %s deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d "
            b"compresscodec: %s crc: %d isvalid: %s\n"
            % (h.base_offset, h.last_offset, h.count, h.base_sequence, h.last_sequence,
               h.producer_id, h.producer_epoch, h.leader_epoch, _jbool(attrs & 0x10),
               _jbool(attrs & 0x20), dh, h.pos, h.ts_type.encode(), h.max_timestamp, h.size,
               h.magic, h.codec.encode(), h.crc, _jbool(h.valid))
        )
    return (
        b"offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s\n"
        % (h.last_offset, h.pos, h.ts_type.encode(), h.max_timestamp, h.size, h.magic,
           h.codec.encode(), h.crc, _jbool(h.valid))
    )


def _batch_obj(h: _Header, path: str) -> Dict[str, Any]:
    v2 = h.magic >= 2
    attrs = h.attributes
    return {
        "type": "batch",
        "file": path,
        "position": h.pos,
        "baseOffset": h.base_offset if v2 else None,
        "lastOffset": h.last_offset,
        "count": h.count if v2 else None,
        "baseSequence": h.base_sequence if v2 else None,
        "lastSequence": h.last_sequence if v2 else None,
        "producerId": h.producer_id if v2 else None,
        "producerEpoch": h.producer_epoch if v2 else None,
        "partitionLeaderEpoch": h.leader_epoch if v2 else None,
        "isTransactional": bool(v2 and attrs & 0x10),
        "isControl": bool(v2 and attrs & 0x20),
        "deleteHorizonMs": h.base_timestamp if v2 and attrs & 0x40 else None,
        "timestampType": h.ts_type,
        "maxTimestamp": h.max_timestamp,
        "size": h.size,
        "magic": h.magic,
        "compression": h.codec,
        "crc": h.crc,
        "isValid": h.valid,
    }


def _records_of(buf, h: _Header, path: str):
    """Decode the records of a batch (no CRC check, like Kafka's deep iteration)."""
    try:
        if h.magic >= 2:
            if h.magic != 2:  # Kafka reads any magic >= 2 as a v2 batch
                raw = bytearray(buf[h.pos : h.pos + h.size])
                raw[16] = 2
                return RecordBatch(bytes(raw), 0, check_crc=False).records()
            return RecordBatch(buf, h.pos, check_crc=False).records()
        return LegacyRecordBatch(buf, h.pos, check_crc=False).records()
    except KafkaLogError as e:
        raise DumpError(f"{e.message} in file {path} (batch at position {h.pos})") from None


def _fast_record_lines(buf, h: _Header, last_offset: int, contents: bool):
    """``_lines.v2_record_lines`` for the v2 data batch ``h``, or None (then the batch goes the
    general way, which also reports a damaged one)."""
    if h.codec == "none":
        section = buf[h.pos + 61 : h.pos + h.size]
    else:
        try:
            section = RecordBatch(buf, h.pos, check_crc=False).records_section()
        except KafkaLogError:
            return None
    return _lines.v2_record_lines(
        section, h.count, h.base_offset, h.base_timestamp,
        h.max_timestamp if h.attributes & 0x08 else None, h.base_sequence,
        h.ts_type.encode(), contents, last_offset, _u8,
    )


def _first_batch_last_offset(buf, pos: int, end: int, path: str) -> Optional[int]:
    """``slice(pos, ...).batches().iterator().next().lastOffset()``; None when no complete
    batch starts there."""
    if pos >= end - 17:
        return None
    offset, size = _ENTRY.unpack_from(buf, pos)
    if size < 14:
        raise DumpError(
            f"Found record size {size} smaller than minimum record overhead (14) in file {path}."
        )
    if pos > end - 12 - size:
        return None
    magic = struct.unpack_from(">b", buf, pos + 16)[0]
    if magic >= 2:
        if pos + 27 > len(buf):
            return None
        lod = struct.unpack_from(">i", buf, pos + 23)[0]
        return _wrap64(offset + lod)
    return offset


# ------------------------------------------------------------------------------------------------
# the dumper
# ------------------------------------------------------------------------------------------------
class Dumper:
    """Runs a dump over files, writing to ``out`` (binary) and ``err`` (text)."""

    def __init__(self, options: DumpOptions, out: IO[bytes], err: IO[str]) -> None:
        self.opts = options
        self.out = _Out(out)
        self.err = err
        self.reports = _Reports()
        bin_enc = options.binary_encoding
        self._bin = _encoder(bin_enc)
        self._hdr_enc = _encoder(options.header_encoding or ("string" if not options.json_output else bin_enc))

    # -- output helpers ---------------------------------------------------------------------------
    def _text(self, s: str) -> None:
        self.out.line(s.encode("utf-8", "surrogateescape") + b"\n")

    def _json(self, obj: Dict[str, Any]) -> None:
        self.out.line(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n")

    def _stderr(self, s: str) -> None:
        self.out.flush()
        self.err.write(s + "\n")
        self.err.flush()

    # -- driver --------------------------------------------------------------------------------------
    def run(self, files: Sequence[str]) -> int:
        """Dump every file (Kafka's loop); end-of-run reports last.  Raises DumpError."""
        opts = self.opts
        dumped = 0  # inputs of a kind kafka-dump-log reads
        try:
            for arg in files:
                shown = java_path(arg)
                name = os.path.basename(shown)
                dot = name.rfind(".")
                suffix = name[dot:] if dot >= 0 else ""
                if not opts.json_output:
                    self._text(f"Dumping {shown}")
                elif suffix not in (".log", ".checkpoint"):
                    kind = {".index": "offset_index", ".timeindex": "time_index",
                            ".snapshot": "producer_snapshot", ".txnindex": "transaction_index"}.get(suffix)
                    if kind is not None:
                        self._json({"type": "file", "file": shown, "kind": kind})
                if suffix in (".log", ".checkpoint"):
                    self.dump_log(arg, shown)
                elif suffix == ".index":
                    self.dump_index(arg, shown)
                elif suffix == ".timeindex":
                    self.dump_time_index(arg, shown)
                elif suffix == ".snapshot":
                    self.dump_producer_snapshot(arg, shown)
                elif suffix == ".txnindex":
                    self.dump_txn_index(arg, shown)
                else:
                    if not _logdir.exists(arg):  # missing, not unknown: say so, once
                        raise DumpError(f"{shown}: no such file or directory")
                    if opts.json_output:
                        self._json({"type": "ignored", "file": shown})
                    else:
                        self._stderr(f"Ignoring unknown file {shown}")
                    continue
                dumped += 1
        finally:
            self.out.flush()
        if opts.json_output:
            for line in self.reports.json_lines():
                self.out.line(line.encode("utf-8") + b"\n")
            self.out.flush()
        else:
            text = self.reports.text()
            if text:
                self.err.write(text)
                self.err.flush()
        if not dumped:
            raise DumpError(
                "nothing to dump: expected Kafka log files (.log, .index, .timeindex, "
                ".txnindex, .snapshot, .checkpoint), partition directories or log directories"
                + ("" if all(_logdir.exists(f) for f in files) else " (a path does not exist)")
            )
        return 0

    # -- .log / .checkpoint --------------------------------------------------------------------------
    def dump_log(self, path: str, shown: str) -> None:
        opts = self.opts
        name = os.path.basename(shown)
        info: Dict[str, Any] = {"type": "file", "file": shown}
        base_offset = 0
        if not _logdir.exists(path):
            raise DumpError(f"{shown}: no such file")
        if name.endswith(".log"):
            prefix = name.split(".")[0]
            try:
                base_offset = int(prefix)
            except ValueError:
                raise DumpError(_no_base_offset(shown, ".log")) from None
            header = f"Log starting offset: {base_offset}"
            info.update(kind="log", baseOffset=base_offset)
        elif name == "bootstrap.checkpoint":
            header = "KRaft bootstrap snapshot"
            info.update(kind="bootstrap_snapshot")
        else:
            m = _SNAPSHOT_NAME.match(name)
            if m is None:
                raise DumpError(
                    f"{shown}: not a KRaft snapshot file name (<20-digit offset>-<10-digit epoch>.checkpoint)"
                )
            header = f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}"
            info.update(kind="snapshot", snapshotEndOffset=int(m.group(1)), snapshotEpoch=int(m.group(2)))
        if opts.json_output:
            self._json(info)
        else:
            self._text(header)
        try:
            mf = MappedFile(path)
        except FileNotFoundError:
            raise DumpError(f"{shown}: no such file") from None
        except IsADirectoryError:
            raise DumpError(f"{shown}: is a directory") from None
        except OSError as e:
            raise DumpError(f"{shown}: {e.strerror or e}") from None
        with mf:
            self._dump_batches(mf, shown, base_offset, name.endswith(".log"))

    def _start(self, mf: MappedFile, path: str, base_offset: int, is_log: bool, end: int) -> int:
        """Where to start walking: 0, or an index-based position for --from-offset/--from-timestamp."""
        opts = self.opts
        if not is_log or (opts.from_offset is None and opts.from_timestamp is None):
            return 0
        directory = os.path.dirname(path) or "."
        from ..storage.index import OffsetIndex, TimeIndex

        target = opts.from_offset
        try:
            if opts.from_timestamp is not None:
                tpath = _files.time_index_file(directory, base_offset)
                if _logdir.exists(tpath):
                    tidx = TimeIndex(tpath, base_offset, writable=False)
                    try:
                        ts_off = tidx.lookup(opts.from_timestamp).offset
                    finally:
                        tidx.close()
                    target = ts_off if target is None else max(target, ts_off)
            if target is None:
                return 0
            ipath = _files.offset_index_file(directory, base_offset)
            if not _logdir.exists(ipath):
                return 0
            idx = OffsetIndex(ipath, base_offset, writable=False)
            try:
                pos = idx.lookup(target).position
            finally:
                idx.close()
        except (KafkaLogError, OSError, ValueError):
            return 0
        if pos < 0 or pos >= end or _first_batch_last_offset(mf.buf, pos, end, path) is None:
            return 0
        return pos

    def _dump_batches(self, mf: MappedFile, path: str, base_offset: int, is_log: bool) -> None:
        opts = self.opts
        buf = mf.buf
        size = mf.size
        end = min(size, opts.max_bytes) if opts.max_bytes >= 0 else size
        deep = opts.deep_iteration
        json_mode = opts.json_output
        abs_path = None
        progress = (Progress(end, os.path.basename(path)) if opts.progress and end > (64 << 20)
                    else NoProgress())
        from_off = opts.from_offset
        to_off = opts.to_offset
        from_ts = opts.from_timestamp
        seeking = opts.seeking
        pos = self._start(mf, path, base_offset, is_log, end)
        # for non-consecutive offsets: Kafka 4.4 checks a file's first record against -1 too; a
        # dump that starts at --from-offset/--from-timestamp checks its first record against
        # nothing (None), so that the part skipped is not reported
        last_offset = -1 if from_off is None and from_ts is None else None
        started = from_ts is None  # --from-timestamp: printing starts at the first batch that reaches it
        ts_reached = from_ts is None
        stopped = False
        line = self.out.line
        entry = _ENTRY.unpack_from
        walked = 0
        # record lines from the compiled formatter (text, metadata shown, string decoders, no
        # header values, no seeking); anything else goes through _records_text
        fast = (not json_mode and not seeking and not opts.skip_record_metadata
                and not opts.print_headers and type(opts.parser) is DecoderMessageParser
                and opts.parser.key_decoder.name == "string"
                and opts.parser.value_decoder.name == "string")
        contents = opts.print_data_log
        # runs of plain v2 data batches (no compression, not control): batch and record lines
        # from one compiled call per chunk of output; the loop below takes any other entry
        run = _lines.v2_dump_run if deep and fast else None
        run_gaps: List[Tuple[int, int]] = []
        text = bytearray()  # reused by every run: no fresh pages per chunk
        as_is = isinstance(self.out.stream, _COPYING_STREAMS)
        while True:
            if run is not None:
                n, npos, last_offset = run(buf, pos, end, last_offset, contents, _u8, run_gaps,
                                           text, _Out.LIMIT, _DROP_EVERY - walked)
                if npos != pos:
                    if run_gaps:
                        if abs_path is None:
                            abs_path = java_abs_path(path)
                        for g in run_gaps:
                            _Reports.add(self.reports.non_consecutive, abs_path, g)
                        run_gaps.clear()
                    self.out.flush()
                    with memoryview(text) as view:
                        self.out.stream.write(view[:n] if as_is else bytes(view[:n]))
                    walked += npos - pos
                    pos = npos
                    if walked >= _DROP_EVERY:
                        progress.advance(walked)
                        walked = 0
                        self.out.flush()
                        mf.drop_before(pos)
                    continue
            if pos >= end - 17:
                break
            offset, length = entry(buf, pos)
            if length < 14:
                raise DumpError(
                    f"Found record size {length} smaller than minimum record overhead (14) in file {path}."
                )
            if pos > end - 12 - length:
                break
            bsize = length + 12
            magic = buf[pos + 16]
            if magic > 127:
                raise DumpError(f"Invalid magic {magic - 256} in the entry at position {pos} of {path}")
            h = _read_header(buf, pos, bsize, magic, path)
            skip = False
            if seeking:
                if from_off is not None and h.last_offset < from_off:
                    skip = True
                if to_off is not None:
                    first = h.base_offset if h.base_offset is not None else (
                        h.last_offset if not h.attributes & 0x07 else None)
                    if first is not None and first > to_off:
                        stopped = True
                        break
                if not started and not skip:
                    if h.max_timestamp >= from_ts:
                        started = True
                    else:
                        skip = True
            deep_done = False
            if not skip:
                if json_mode:
                    self._json(_batch_obj(h, path))
                else:
                    line(_batch_line(h))
                if deep and fast and h.magic == 2 and not h.attributes & 0x20:
                    # the compiled line formatter: a v2 data batch straight from its bytes
                    done = _fast_record_lines(buf, h, last_offset, contents)
                    if done is not None:
                        lines, last_offset, gaps = done
                        if gaps:
                            if abs_path is None:
                                abs_path = java_abs_path(path)
                            for g in gaps:
                                _Reports.add(self.reports.non_consecutive, abs_path, g)
                        if lines:
                            line(lines)
                        deep_done = True
                if deep and not deep_done:
                    recs = _records_of(buf, h, path)
                    if seeking:
                        recs = [r for r in recs
                                if (from_off is None or r.offset >= from_off)
                                and (to_off is None or r.offset <= to_off)]
                        if from_ts is not None and not ts_reached:
                            for i, r in enumerate(recs):
                                if r.timestamp >= from_ts:
                                    ts_reached = True
                                    recs = recs[i:]
                                    break
                            else:
                                recs = []
                    if recs:
                        # Kafka 4.4: each record not at lastOffset + 1 (a Java long: MAX + 1
                        # is MIN) is reported, the first against -1.
                        lo = last_offset
                        for r in recs:
                            o = r.offset
                            if lo is not None and o != _wrap64(lo + 1):
                                if abs_path is None:
                                    abs_path = java_abs_path(path)
                                _Reports.add(self.reports.non_consecutive, abs_path, (lo, o))
                            lo = o
                        last_offset = lo
                        if json_mode:
                            self._records_json(h, recs)
                        else:
                            self._records_text(h, recs)
            pos += bsize
            walked += bsize
            if walked >= _DROP_EVERY:
                progress.advance(walked)
                walked = 0
                self.out.flush()
                mf.drop_before(pos)
        progress.finish()
        trailing = end - pos
        if not stopped and trailing > 0 and opts.max_bytes == INT_MAX:
            if json_mode:
                self._json({"type": "trailing_bytes", "file": path, "bytes": trailing})
            else:
                self._text(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")

    # -- records: text -------------------------------------------------------------------------------
    def _records_text(self, h: _Header, recs) -> None:
        opts = self.opts
        line = self.out.line
        skip_meta = opts.skip_record_metadata
        control = h.magic >= 2 and bool(h.attributes & 0x20)
        contents = opts.print_data_log and not control
        parser = opts.parser
        ts_name = h.ts_type.encode()
        v2 = h.magic >= 2
        print_headers = opts.print_headers
        fast = (
            v2 and not skip_meta and not control and not print_headers
            and type(parser) is DecoderMessageParser
            and parser.key_decoder.name == "string" and parser.value_decoder.name == "string"
        )
        if fast:
            # The hot loop (v2 data records, string decoders): the metadata is formatted with one
            # %-operation and key/payload bytes are appended as they are (joined once at flush).
            base = h.base_offset
            bseq = h.base_sequence
            out = self.out
            parts = out.parts
            add = parts.append
            fmt = b"| offset: %d " + ts_name + b": %d keySize: %d valueSize: %d sequence: %d headerKeys: [%b]"
            wraps = bseq >= 0 and bseq + (recs[-1].offset - base) > INT_MAX
            # the common record (key and value present, ASCII, no headers) in one %-operation
            fmt_kv = (b"| offset: %d " + ts_name + b": %d keySize: %d valueSize: %d sequence: "
                      + (b"-1" if bseq < 0 else b"%d") + b" headerKeys: [] key: %b payload: %b\n")
            fmt_m = (b"| offset: %d " + ts_name + b": %d keySize: %d valueSize: %d sequence: "
                     + (b"-1" if bseq < 0 else b"%d") + b" headerKeys: []\n")
            for r in recs:
                k = r.key
                v = r.value
                if not contents and not wraps and not r.headers:
                    if bseq < 0:
                        add(fmt_m % (r.offset, r.timestamp, -1 if k is None else len(k), -1 if v is None else len(v)))
                    else:
                        o = r.offset
                        add(fmt_m % (o, r.timestamp, -1 if k is None else len(k), -1 if v is None else len(v),
                                     bseq + (o - base)))
                    continue
                if (contents and k is not None and v is not None and not r.headers and not wraps
                        and k.isascii() and v.isascii()):
                    if bseq < 0:
                        add(fmt_kv % (r.offset, r.timestamp, len(k), len(v), k, v))
                    else:
                        o = r.offset
                        add(fmt_kv % (o, r.timestamp, len(k), len(v), bseq + (o - base), k, v))
                    continue
                o = r.offset
                hd = r.headers
                if bseq < 0:
                    seq = -1
                elif wraps:
                    seq = _increment_sequence(bseq, o - base)
                else:
                    seq = bseq + (o - base)
                add(fmt % (o, r.timestamp, -1 if k is None else len(k), -1 if v is None else len(v), seq,
                           b",".join([_hkey_bytes(x[0]) for x in hd]) if hd else b""))
                if contents:
                    if k is not None:
                        add(b" key: ")
                        add(k if k.isascii() else _u8(k))
                    if v is not None:
                        add(b" payload: ")
                        add(v if v.isascii() else _u8(v))
                add(b"\n")
            if len(parts) >= 4096:
                out.flush()
            return
        for r in recs:
            parts: List[bytes] = []
            prefix = b"| "
            k = r.key
            v = r.value
            if not skip_meta:
                parts.append(
                    b"| offset: %d %s: %d keySize: %d valueSize: %d"
                    % (r.offset, ts_name, r.timestamp, -1 if k is None else len(k),
                       -1 if v is None else len(v))
                )
                prefix = b" "
                if v2:
                    bseq = h.base_sequence
                    seq = -1 if bseq < 0 else _increment_sequence(bseq, r.offset - h.base_offset)
                    hd = r.headers
                    parts.append(b" sequence: %d headerKeys: [%s]" % (
                        seq, b",".join([_hkey_bytes(x[0]) for x in hd])))
                    if print_headers:
                        parts.append(b" headers: " + self._headers_text(hd))
                else:
                    parts.append(b" isValid: %s crc: %d" % (_jbool(r.is_valid()), r.crc))
                if control:
                    try:
                        parts.append(control_record_text(k, v).encode("utf-8"))
                    except DecodeError as e:
                        raise DumpError(f"{e} (control record at offset {r.offset})") from None
            if contents:
                try:
                    key_s, val_s = parser.parse(r)
                except DecodeError as e:
                    raise DumpError(str(e)) from None
                if key_s is not None:
                    parts.append(prefix + b"key: " + key_s.encode("utf-8", "surrogateescape"))
                    prefix = b" "
                if val_s is not None:
                    parts.append(prefix + b"payload: " + val_s.encode("utf-8", "surrogateescape"))
            parts.append(b"\n")
            line(b"".join(parts))

    def _headers_text(self, hd) -> bytes:
        enc = self._hdr_enc
        items = [[java_utf8(k.encode("utf-8", "surrogateescape")),
                  None if v is None else enc(v)] for k, v in hd]
        return json.dumps(items, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    # -- records: JSON -------------------------------------------------------------------------------
    def _records_json(self, h: _Header, recs) -> None:
        opts = self.opts
        control = h.magic >= 2 and bool(h.attributes & 0x20)
        contents = opts.print_data_log and not control
        parser = opts.parser
        v2 = h.magic >= 2
        bin_enc = self._bin
        hdr_enc = self._hdr_enc
        plain = type(parser) is DecoderMessageParser and not opts.explicit_decoders
        for r in recs:
            k = r.key
            v = r.value
            o: Dict[str, Any] = {
                "type": "record",
                "offset": r.offset,
                "timestamp": r.timestamp,
                "timestampType": h.ts_type,
                "keySize": -1 if k is None else len(k),
                "valueSize": -1 if v is None else len(v),
            }
            if v2:
                bseq = h.base_sequence
                o["sequence"] = -1 if bseq < 0 else _increment_sequence(bseq, r.offset - h.base_offset)
                o["headers"] = [
                    {"key": java_utf8(hk.encode("utf-8", "surrogateescape")),
                     "value": None if hv is None else hdr_enc(hv)}
                    for hk, hv in r.headers
                ]
            else:
                o["isValid"] = r.is_valid()
                o["crc"] = r.crc
            if control:
                try:
                    o["control"] = control_record_object(k, v)
                except DecodeError as e:
                    o["control"] = {"error": str(e)}
            if contents:
                if plain:
                    o["key"] = None if k is None else bin_enc(k)
                    o["value"] = None if v is None else bin_enc(v)
                else:
                    try:
                        ko, vo = parser.parse_obj(r)
                    except DecodeError as e:
                        raise DumpError(str(e)) from None
                    o["key"] = ko
                    o["value"] = vo
            self._json(o)

    # -- .index ------------------------------------------------------------------------------------------
    def _open_log_for_index(self, path: str, shown: str) -> Tuple[MappedFile, int, str]:
        name = os.path.basename(shown)
        prefix = name.split(".")[0]
        try:
            base = int(prefix)
        except ValueError:
            raise DumpError(_no_base_offset(shown, name[len(prefix):])) from None
        parent = os.path.dirname(java_abs_path(path))
        log_path = os.path.join(parent, prefix + ".log")
        try:
            return MappedFile(log_path), base, log_path
        except FileNotFoundError:
            raise DumpError(f"{log_path}: the log segment of {shown} does not exist") from None
        except OSError as e:
            raise DumpError(f"{log_path}: {e.strerror or e}") from None

    @staticmethod
    def _read_index_file(path: str, shown: str) -> bytes:
        try:
            return _logdir.read_file(path)
        except FileNotFoundError:
            raise DumpError(f"{shown}: no such file") from None
        except OSError as e:
            raise DumpError(f"{shown}: {e.strerror or e}") from None

    def dump_index(self, path: str, shown: str) -> None:
        opts = self.opts
        mf, base, log_path = self._open_log_for_index(path, shown)
        with mf:
            data = self._read_index_file(path, shown)
            entries = len(data) // 8
            abs_path = java_abs_path(path)
            if entries == 0:
                if opts.json_output:
                    self._json({"type": "index_empty", "file": shown})
                else:
                    self._text(f"{shown} is empty.")
                return
            if opts.index_sanity_check:
                last = base + _OFFSET_ENTRY.unpack_from(data, (entries - 1) * 8)[0]
                if last < base:
                    raise DumpError(
                        f"Corrupt index found, index file {abs_path} has non-zero size but the last "
                        f"offset is {last} which is less than the base offset {base}"
                    )
                if len(data) % 8 != 0:
                    raise DumpError(
                        f"Index file {abs_path} is corrupt, found {len(data)} bytes which is neither "
                        f"positive nor a multiple of 8"
                    )
                if opts.json_output:
                    self._json({"type": "sanity_check_passed", "file": shown})
                else:
                    self._text(f"{shown} passed sanity check.")
                return
            buf = mf.buf
            size = mf.size
            for i in range(entries):
                rel, position = _OFFSET_ENTRY.unpack_from(data, i * 8)
                offset = base + rel
                if offset == base and i > 0:
                    return  # zero-filled tail of a preallocated index
                if position < 0:
                    raise DumpError(f"Invalid position: {position} (entry {i} of {shown})")
                if position > size:
                    raise DumpError(
                        f"Slice from position {position} exceeds end position of {log_path} "
                        f"(entry {i} of {shown})"
                    )
                slice_end = min(position + opts.max_message_size, size)
                found = _first_batch_last_offset(buf, position, slice_end, log_path)
                if found is None:
                    raise DumpError(
                        f"No complete batch at position {position} of {log_path} within "
                        f"--max-message-size {opts.max_message_size} bytes (entry {i} of {shown})"
                    )
                if found != offset:
                    _Reports.add(self.reports.index_mismatches, abs_path, (offset, found))
                if not opts.verify_index_only:
                    if opts.json_output:
                        self._json({"type": "index_entry", "offset": offset, "position": position})
                    else:
                        self.out.line(b"offset: %d position: %d\n" % (offset, position))

    # -- .timeindex --------------------------------------------------------------------------------------
    def dump_time_index(self, path: str, shown: str) -> None:
        opts = self.opts
        mf, base, log_path = self._open_log_for_index(path, shown)
        with mf:
            data = self._read_index_file(path, shown)
            entries = len(data) // 12
            abs_path = java_abs_path(path)
            if opts.index_sanity_check:
                if entries:
                    first_ts = _I64.unpack_from(data, 0)[0]
                    last_ts, last_rel = _TIME_ENTRY.unpack_from(data, (entries - 1) * 12)
                    if last_ts < first_ts:
                        raise DumpError(
                            f"Corrupt time index found, time index file ({abs_path}) has non-zero "
                            f"size but the last timestamp is {last_ts} which is less than the first "
                            f"timestamp {first_ts}"
                        )
                    if base + last_rel < base:
                        raise DumpError(
                            f"Corrupt time index found, time index file ({abs_path}) has non-zero "
                            f"size but the last offset is {base + last_rel} which is less than the "
                            f"first offset {base}"
                        )
                if len(data) % 12 != 0:
                    raise DumpError(
                        f"Time index file {abs_path} is corrupt, found {len(data)} bytes which is "
                        f"neither positive nor a multiple of 12"
                    )
                if opts.json_output:
                    self._json({"type": "sanity_check_passed", "file": shown})
                else:
                    self._text(f"{shown} passed sanity check.")
                return
            from ..storage.index import OffsetIndex

            ipath = os.path.join(os.path.dirname(log_path), os.path.basename(log_path)[:-4] + ".index")
            oidx = OffsetIndex(ipath, base, writable=False)
            try:
                buf = mf.buf
                size = mf.size
                prev_ts = -1
                for i in range(entries):
                    ts, rel = _TIME_ENTRY.unpack_from(data, i * 12)
                    offset = base + rel
                    if offset == base and i > 0:
                        return
                    position = oidx.lookup(offset).position
                    match = self._find_batch(buf, max(position, 0), size, offset, log_path)
                    if match is None:
                        _Reports.add(self.reports.ts_not_found, abs_path, (offset, -1))
                    elif match.last_offset != offset:
                        _Reports.add(self.reports.ts_not_found, abs_path, (offset, match.last_offset))
                    else:
                        max_ts = -1
                        for r in _records_of(buf, match, log_path):
                            if r.timestamp > max_ts:
                                max_ts = r.timestamp
                        if max_ts != ts:
                            _Reports.add(self.reports.ts_mismatches, abs_path, (ts, max_ts))
                        if prev_ts >= ts:
                            _Reports.add(self.reports.ts_out_of_order, abs_path, (ts, prev_ts))
                    if not opts.verify_index_only:
                        if opts.json_output:
                            self._json({"type": "time_index_entry", "timestamp": ts, "offset": offset})
                        else:
                            self.out.line(b"timestamp: %d offset: %d\n" % (ts, offset))
                    prev_ts = ts
            finally:
                oidx.close()

    @staticmethod
    def _find_batch(buf, pos: int, end: int, offset: int, path: str) -> Optional[_Header]:
        """The first batch from ``pos`` whose last offset is >= ``offset``."""
        while pos < end - 17:
            base, length = _ENTRY.unpack_from(buf, pos)
            if length < 14:
                raise DumpError(
                    f"Found record size {length} smaller than minimum record overhead (14) in file {path}."
                )
            if pos > end - 12 - length:
                return None
            magic = buf[pos + 16]
            if magic > 127:
                raise DumpError(f"Invalid magic {magic - 256} in the entry at position {pos} of {path}")
            if magic >= 2:
                last = _wrap64(base + struct.unpack_from(">i", buf, pos + 23)[0])
            else:
                last = base
            if last >= offset:
                return _read_header(buf, pos, length + 12, magic, path)
            pos += length + 12
        return None

    # -- .txnindex ----------------------------------------------------------------------------------------
    def dump_txn_index(self, path: str, shown: str) -> None:
        data = self._read_index_file(path, shown)
        for version, pid, first, last, lso in txn_index_entries(data):
            if version > 0:
                raise DumpError(
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{java_abs_path(path)}, current version is 0"
                )
            if self.opts.json_output:
                self._json({"type": "aborted_txn", "version": version, "producerId": pid,
                            "firstOffset": first, "lastOffset": last, "lastStableOffset": lso})
            else:
                self.out.line(
                    b"version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n"
                    % (version, pid, first, last, lso)
                )

    # -- .snapshot (producer state) -----------------------------------------------------------------------
    def dump_producer_snapshot(self, path: str, shown: str) -> None:
        from ..errors import CorruptSnapshotError
        from ..storage.producer_state import decode_snapshot

        data = self._read_index_file(path, shown)
        try:
            entries = decode_snapshot(data, path=java_abs_path(path))
        except CorruptSnapshotError as e:
            if self.opts.json_output:
                self._json({"type": "error", "file": shown, "message": e.message})
            else:
                self._stderr(e.message)
            return
        for e in entries:
            has_batch = e.last_offset >= 0  # Kafka: batch metadata only for lastOffset >= 0
            # BatchMetadata.firstSeq = DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)
            if e.last_sequence < e.offset_delta:
                first_seq = INT_MAX - (e.offset_delta - e.last_sequence) + 1
            else:
                first_seq = e.last_sequence - e.offset_delta
            txn = ("OptionalLong.empty" if e.current_txn_first_offset < 0
                   else f"OptionalLong[{e.current_txn_first_offset}]")
            if self.opts.json_output:
                o = {"type": "producer", "producerId": e.producer_id, "producerEpoch": e.producer_epoch,
                     "coordinatorEpoch": e.coordinator_epoch,
                     "currentTxnFirstOffset": None if e.current_txn_first_offset < 0 else e.current_txn_first_offset,
                     "lastTimestamp": e.timestamp}
                if has_batch:
                    o.update(firstSequence=first_seq, lastSequence=e.last_sequence,
                             lastOffset=e.last_offset, offsetDelta=e.offset_delta, timestamp=e.timestamp)
                self._json(o)
                continue
            s = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: "
                 f"{e.coordinator_epoch} currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp}")
            if has_batch:
                s += (f" firstSequence: {first_seq} lastSequence: {e.last_sequence} lastOffset: "
                      f"{e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
            self._text(s)
