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
import os
import re
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .._format import ENTRY_HEADER, V2_HEADER
from .._speedups import dump as _lines
from ..errors import KafkaLogError
from ..records import RecordBatch
from ..storage import files as _files
from ..storage import logdir as _logdir
from ._batch_header import (
    INT_MAX,
    BatchHeader,
    DumpError,
    batch_line,
    batch_obj,
    first_batch_last_offset,
    increment_sequence,
    jbool,
    read_header,
    records_of,
    wrap64,
)
from ._index_dump import IndexDumps, Reports
from ._inputs import DROP_EVERY as _DROP_EVERY
from ._inputs import (
    MappedFile,
    NoProgress,
    Progress,
    java_abs_path,
    java_path,
    no_base_offset_message,
)
from ._record_format import RecordFormat
from .decoders import (
    DecodeError,
    DecoderMessageParser,
    MessageParser,
    ValueDecoder,
    control_record_object,
    control_record_text,
    java_utf8,
)

__all__ = ["DumpError", "DumpOptions", "Dumper"]


def _topic_partition(path: str) -> Tuple[Optional[str], Optional[int]]:
    """The topic and partition of the directory holding ``path`` (its name
    ``<topic>-<partition>``, or a deleted/future/stray replica's), or ``(None, None)``."""
    d = os.path.basename(os.path.dirname(os.path.abspath(path)))
    try:
        tp = _files.parse_topic_partition_name(d)
    except ValueError:
        return None, None
    return tp.topic, tp.partition

_ENTRY = ENTRY_HEADER
_V2 = V2_HEADER  # 61-byte v2 header
_SNAPSHOT_NAME = re.compile(r"^(\d+)-(\d+)\.checkpoint$")
# streams whose write() copies or writes out what it is given before it returns (they keep no
# reference): the compiled batch walk's reused buffer goes to them as it is
_COPYING_STREAMS = (io.BufferedWriter, io.BufferedRandom, io.BytesIO)


# ------------------------------------------------------------------------------------------------
# small formatting helpers
# ------------------------------------------------------------------------------------------------
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
        count: Optional[int] = None,
        record_format: Optional[RecordFormat] = None,
    ) -> None:
        self.print_data_log = print_data_log
        # Kafka: --print-data-log (or any decoder) implies deep iteration; so does --format
        self.deep_iteration = deep_iteration or print_data_log or record_format is not None
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
        #: stop after this many records (batches when only batch lines are printed)
        self.count = count
        #: --format: records only, rendered from a kcat-style format string
        self.record_format = record_format

    @property
    def seeking(self) -> bool:
        return (
            self.from_offset is not None
            or self.to_offset is not None
            or self.from_timestamp is not None
        )


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


def _fast_record_lines(buf, h: BatchHeader, last_offset: int, contents: bool):
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


# ------------------------------------------------------------------------------------------------
# the dumper
# ------------------------------------------------------------------------------------------------
class Dumper(IndexDumps):
    """Runs a dump over files, writing to ``out`` (binary) and ``err`` (text)."""

    def __init__(self, options: DumpOptions, out: IO[bytes], err: IO[str]) -> None:
        self.opts = options
        self.out = _Out(out)
        self.err = err
        self.reports = Reports()
        bin_enc = options.binary_encoding
        self._bin = _encoder(bin_enc)
        self._hdr_enc = _encoder(
            options.header_encoding or ("string" if not options.json_output else bin_enc)
        )
        self._left = options.count  # records (or batches) still to print; None: no --count
        self._done = False  # --count reached: nothing more is read
        # the file being dumped: its path as shown and its partition directory's topic/partition
        self._file = ""
        self._topic: Optional[str] = None
        self._partition: Optional[int] = None
        self._render: Optional[Callable[[Any], bytes]] = None
        # --from-offset: per directory of .log files, whether a batch reached the offset and
        # the log end offset seen (the next offset after the last batch walked)
        self._from_state: Dict[str, List[Any]] = {}

    # -- output helpers ---------------------------------------------------------------------------
    def _text(self, s: str) -> None:
        self.out.line(s.encode("utf-8", "surrogateescape") + b"\n")

    def _json(self, obj: Dict[str, Any]) -> None:
        self.out.line(
            json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
            .encode("utf-8", "surrogateescape") + b"\n"
        )

    def _stderr(self, s: str) -> None:
        self.out.flush()
        self.err.write(s + "\n")
        self.err.flush()

    # -- driver ------------------------------------------------------------------------------------
    def run(self, files: Sequence[str]) -> int:
        """Dump every file (Kafka's loop); end-of-run reports last.  Raises DumpError."""
        opts = self.opts
        dumped = 0  # inputs of a kind kafka-dump-log reads
        fmt = opts.record_format
        try:
            for arg in files:
                if self._done:
                    break
                shown = java_path(arg)
                name = os.path.basename(shown)
                dot = name.rfind(".")
                suffix = name[dot:] if dot >= 0 else ""
                if fmt is not None and suffix not in (".log", ".checkpoint"):
                    if not _logdir.exists(arg):
                        raise DumpError(f"{shown}: no such file or directory")
                    self._stderr(f"Ignoring {shown} (--format prints the records of .log and "
                                 ".checkpoint files)")
                    continue
                if fmt is not None:
                    pass  # records only
                elif not opts.json_output:
                    self._text(f"Dumping {shown}")
                elif suffix not in (".log", ".checkpoint"):
                    kind = {".index": "offset_index", ".timeindex": "time_index",
                            ".snapshot": "producer_snapshot",
                            ".txnindex": "transaction_index"}.get(suffix)
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
            if fmt is not None:  # a record stream: gaps (compaction, markers) are no news
                self.reports.non_consecutive.clear()
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
        return self._check_from_offset()

    def _check_from_offset(self) -> int:
        """--from-offset past the end of a log: a line on stderr for each such log, and an
        error (exit status 1) when it is past the end of every log dumped (nothing printed)."""
        opts = self.opts
        if opts.from_offset is None or not self._from_state or self._done:
            return 0
        short = [(d, end) for d, (reached, end) in self._from_state.items() if not reached]
        if not short:
            return 0
        what = "; ".join(f"{d} ends at offset {end}" for d, end in short)
        if len(short) == len(self._from_state):
            raise DumpError(f"--from-offset {opts.from_offset} is past the end of the log, "
                            f"nothing to print: {what} (the log end offset: the offset the "
                            "next record will get)")
        for d, end in short:
            self._stderr(f"kafkalog dump: --from-offset {opts.from_offset} is past the end of "
                         f"{d}: it ends at offset {end}")
        return 0

    # -- .log / .checkpoint ------------------------------------------------------------------------
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
                raise DumpError(no_base_offset_message(shown, ".log")) from None
            header = f"Log starting offset: {base_offset}"
            info.update(kind="log", baseOffset=base_offset)
        elif name == "bootstrap.checkpoint":
            header = "KRaft bootstrap snapshot"
            info.update(kind="bootstrap_snapshot")
        else:
            m = _SNAPSHOT_NAME.match(name)
            if m is None:
                raise DumpError(
                    f"{shown}: not a KRaft snapshot file name "
                    "(<20-digit offset>-<10-digit epoch>.checkpoint)"
                )
            header = f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}"
            info.update(kind="snapshot", snapshotEndOffset=int(m.group(1)),
                        snapshotEpoch=int(m.group(2)))
        self._file = shown
        self._topic, self._partition = _topic_partition(path)
        fmt = opts.record_format
        if fmt is not None:
            self._render = fmt.for_partition(self._topic, self._partition)
        elif opts.json_output:
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
        """Where to start walking: 0, or an index-based position for
        --from-offset/--from-timestamp."""
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
        if pos < 0 or pos >= end or first_batch_last_offset(mf.buf, pos, end, path) is None:
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
        # --from-timestamp: printing starts at the first batch that reaches it
        started = from_ts is None
        ts_reached = from_ts is None
        stopped = False
        line = self.out.line
        entry = _ENTRY.unpack_from
        walked = 0
        fmt = opts.record_format
        left = self._left  # --count
        topic, partition = self._topic, self._partition
        reached = False  # --from-offset: a batch holding it (or past it) was walked
        log_end = 0
        # record lines from the compiled formatter (text, metadata shown, string decoders, no
        # header values, no seeking); anything else goes through _records_text
        fast = (not json_mode and not seeking and fmt is None and left is None
                and not opts.skip_record_metadata
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
                            Reports.add(self.reports.non_consecutive, abs_path, g)
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
                    f"Found record size {length} smaller than minimum record overhead (14) "
                    f"in file {path}."
                )
            if pos > end - 12 - length:
                break
            bsize = length + 12
            magic = buf[pos + 16]
            if magic > 127:
                raise DumpError(
                    f"Invalid magic {magic - 256} in the entry at position {pos} of {path}"
                )
            h = read_header(buf, pos, bsize, magic, path)
            skip = False
            if seeking:
                if from_off is not None:
                    log_end = h.last_offset + 1
                    if h.last_offset < from_off:
                        skip = True
                    else:
                        reached = True
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
                    self._json(batch_obj(h, path, topic, partition))
                elif fmt is None:
                    line(batch_line(h))
                if deep and fast and h.magic == 2 and not h.attributes & 0x20:
                    # the compiled line formatter: a v2 data batch straight from its bytes
                    done = _fast_record_lines(buf, h, last_offset, contents)
                    if done is not None:
                        lines, last_offset, gaps = done
                        if gaps:
                            if abs_path is None:
                                abs_path = java_abs_path(path)
                            for g in gaps:
                                Reports.add(self.reports.non_consecutive, abs_path, g)
                        if lines:
                            line(lines)
                        deep_done = True
                if deep and not deep_done:
                    recs = records_of(buf, h, path)
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
                    if left is not None and recs and (
                            fmt is None or h.magic < 2 or not h.attributes & 0x20):
                        if len(recs) > left:
                            recs = recs[:left]
                        left -= len(recs)
                    if recs:
                        # Kafka 4.4: each record not at lastOffset + 1 (a Java long: MAX + 1
                        # is MIN) is reported, the first against -1.
                        lo = last_offset
                        for r in recs:
                            o = r.offset
                            if lo is not None and o != wrap64(lo + 1):
                                if abs_path is None:
                                    abs_path = java_abs_path(path)
                                Reports.add(self.reports.non_consecutive, abs_path, (lo, o))
                            lo = o
                        last_offset = lo
                        if json_mode:
                            self._records_json(h, recs)
                        elif fmt is not None:
                            self._records_format(h, recs)
                        else:
                            self._records_text(h, recs)
            if left is not None and not skip:
                if not deep:
                    left -= 1
                if left <= 0:  # --count reached
                    stopped = True
                    break
            pos += bsize
            walked += bsize
            if walked >= _DROP_EVERY:
                progress.advance(walked)
                walked = 0
                self.out.flush()
                mf.drop_before(pos)
        progress.finish()
        if left is not None:
            self._left = left
            self._done = left <= 0
        if from_off is not None and is_log:
            state = self._from_state.setdefault(os.path.dirname(path) or ".", [False, 0])
            state[0] = state[0] or reached or stopped
            state[1] = max(state[1], base_offset, log_end)
        trailing = end - pos
        if not stopped and trailing > 0 and opts.max_bytes == INT_MAX:
            found = f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}"
            if json_mode:
                self._json({"type": "trailing_bytes", "file": path, "bytes": trailing})
            elif fmt is not None:  # stdout carries the records alone
                self._stderr(found)
            else:
                self._text(found)

    # -- records: text -----------------------------------------------------------------------------
    def _records_text(self, h: BatchHeader, recs) -> None:
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
            fmt = (b"| offset: %d " + ts_name
                   + b": %d keySize: %d valueSize: %d sequence: %d headerKeys: [%b]")
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
                        add(fmt_m % (r.offset, r.timestamp, -1 if k is None else len(k),
                                     -1 if v is None else len(v)))
                    else:
                        o = r.offset
                        add(fmt_m % (o, r.timestamp, -1 if k is None else len(k),
                                     -1 if v is None else len(v), bseq + (o - base)))
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
                    seq = increment_sequence(bseq, o - base)
                else:
                    seq = bseq + (o - base)
                add(fmt % (o, r.timestamp, -1 if k is None else len(k), -1 if v is None else len(v),
                           seq, b",".join([_hkey_bytes(x[0]) for x in hd]) if hd else b""))
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
                    seq = -1 if bseq < 0 else increment_sequence(bseq, r.offset - h.base_offset)
                    hd = r.headers
                    parts.append(b" sequence: %d headerKeys: [%s]" % (
                        seq, b",".join([_hkey_bytes(x[0]) for x in hd])))
                    if print_headers:
                        parts.append(b" headers: " + self._headers_text(hd))
                else:
                    parts.append(b" isValid: %s crc: %d" % (jbool(r.is_valid()), r.crc))
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

    # -- records: --format ------------------------------------------------------------------------
    def _records_format(self, h: BatchHeader, recs) -> None:
        if h.magic >= 2 and h.attributes & 0x20:
            return  # control records (transaction markers...) are not data: kcat never sees them
        render = self._render
        line = self.out.line
        for r in recs:
            line(render(r))

    # -- records: JSON -----------------------------------------------------------------------------
    def _records_json(self, h: BatchHeader, recs) -> None:
        opts = self.opts
        control = h.magic >= 2 and bool(h.attributes & 0x20)
        contents = opts.print_data_log and not control
        parser = opts.parser
        v2 = h.magic >= 2
        bin_enc = self._bin
        hdr_enc = self._hdr_enc
        plain = type(parser) is DecoderMessageParser and not opts.explicit_decoders
        shown, topic, partition = self._file, self._topic, self._partition
        for r in recs:
            k = r.key
            v = r.value
            o: Dict[str, Any] = {
                "type": "record",
                "file": shown,
                "topic": topic,
                "partition": partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "timestampType": h.ts_type,
                "keySize": -1 if k is None else len(k),
                "valueSize": -1 if v is None else len(v),
            }
            if v2:
                bseq = h.base_sequence
                o["sequence"] = (
                    -1 if bseq < 0 else increment_sequence(bseq, r.offset - h.base_offset)
                )
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
