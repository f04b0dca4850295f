"""The ``kafkalog`` command: ``dump`` (kafka-dump-log, line for line), ``verify``, ``salvage``
and ``stats``.  ``main(argv) -> int`` is the console-script entry point.

Invoked with kafka-dump-log's flags and no sub-command (``kafkalog --files 0.log
--print-data-log``) it runs ``dump``, so ``kafka-dump-log.sh`` can be swapped for ``kafkalog``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import io
import os
import sys
from typing import List, Optional, Sequence

from .. import _speedups
from .._version import __version__

__all__ = ["main", "build_parser"]

SUBCOMMANDS = ("dump", "verify", "salvage", "stats")
INT_MAX = 2**31 - 1


class _CliError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors in one line (not the whole usage first): the closest option
    for a mistyped flag, else where the options are listed.  Exit status 2, as argparse's."""

    def error(self, message: str):  # type: ignore[override]
        hint = f"see '{self.prog} --help'"
        if message.startswith("unrecognized arguments:"):
            guess = self._closest_option(message.split(":", 1)[1].split())
            if guess is not None:
                hint = f"did you mean {guess}?"
        self.exit(2, f"{self.prog}: error: {message} ({hint})\n")

    def _closest_option(self, words: Sequence[str]) -> Optional[str]:
        import difflib

        known = [o for o in self._option_string_actions if o.startswith("--")]
        for w in words:
            if w.startswith("--"):
                found = difflib.get_close_matches(w.split("=", 1)[0], known, n=1, cutoff=0.8)
                if found:
                    return found[0]
        return None


class _UsageError(_CliError):
    """A command line that names nothing to work on: exit status 2, like argparse's errors."""


def _size_arg(text: str) -> int:
    """A size or count: a Java int that is not negative."""
    v = _java_int_arg(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative (a size or count is expected)")
    return v


def _count_arg(text: str) -> int:
    v = _int_arg(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a count (1 or more)")
    return v


def _format_arg(text: str) -> str:
    from ._record_format import parse_record_format

    try:
        parse_record_format(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _offset_arg(text: str) -> int:
    v = _int_arg(text)
    if not 0 <= v <= 2**63 - 1:
        raise argparse.ArgumentTypeError(f"{text} is not an offset (0 .. 2^63-1)")
    return v


def _int_arg(text: str) -> int:
    try:
        if text.lower().startswith(("0x", "0o", "0b")):
            return int(text.replace("_", ""), 0)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None


def _java_int_arg(text: str) -> int:
    v = _int_arg(text)
    if not -(2**31) <= v <= INT_MAX:
        raise argparse.ArgumentTypeError(f"{text} does not fit in a Java int")
    return v


def _timestamp_arg(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date/time (UTC unless it has an offset)."""
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        s = t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t
        d = _dt.datetime.fromisoformat(s)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid timestamp {text!r}: give milliseconds since the epoch or an ISO-8601 time "
            "such as 2024-05-01T12:00:00Z"
        ) from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp() * 1000)


def _version_text() -> str:
    impl = _speedups.IMPLEMENTATION
    extra = f"; {_speedups.FALLBACK_REASON}" if _speedups.FALLBACK_REASON else ""
    return f"kafkalog {__version__} (implementation: {impl}{extra})"


# ------------------------------------------------------------------------------------------------
# parser
# ------------------------------------------------------------------------------------------------
def _add_dump(sub) -> None:
    p = sub.add_parser(
        "dump",
        help="print segments, indexes and snapshots exactly as kafka-dump-log.sh does",
        description=(
            "Parse Kafka log files and print their contents in kafka-dump-log's format "
            "(kafka-dump-log.sh --files ... works unchanged). Files are dispatched on their "
            "suffix: .log and .checkpoint (KRaft snapshots) print batches and records; .index, "
            ".timeindex, .txnindex and .snapshot print their entries; anything else is ignored "
            "with a message on stderr. Directories are accepted too: a partition directory "
            "(<topic>-<partition>) dumps its .log segments in offset order, a log directory "
            "root dumps every partition in it."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="files or directories to dump (in addition to --files)")
    g = p.add_argument_group("kafka-dump-log options")
    g.add_argument("--files", action="append", default=[], metavar="file1,file2,...",
                   help="REQUIRED unless PATHs are given: the comma-separated list of data and "
                        "index log files to be dumped (may be repeated)")
    g.add_argument("--print-data-log", action="store_true",
                   help="print the key and payload of every record (implies --deep-iteration); "
                        "set automatically by any decoder option")
    g.add_argument("--deep-iteration", action="store_true",
                   help="print one '| offset: ...' line per record (decompressing batches), "
                        "not only one line per batch")
    g.add_argument("--skip-record-metadata", action="store_true",
                   help="do not print the record metadata (offset, timestamps, sizes, control "
                        "record details) on record lines; batch lines are still printed")
    g.add_argument("--verify-index-only", action="store_true",
                   help="for .index/.timeindex files: check every entry against the log but print "
                        "only the problems (on stderr at the end)")
    g.add_argument("--index-sanity-check", action="store_true",
                   help="for .index/.timeindex files: run only the sanity check a broker runs at "
                        "startup to decide whether to rebuild the index")
    g.add_argument("--max-message-size", type=_size_arg, default=5 * 1024 * 1024, metavar="size",
                   help="size of the largest batch: how many bytes are read at each offset-index "
                        "position when checking an .index (default 5242880)")
    g.add_argument("--max-bytes", type=_size_arg, default=INT_MAX, metavar="size",
                   help="read only the batches lying entirely within the first SIZE bytes of each "
                        ".log/.checkpoint file (default: the whole file); the trailing-bytes "
                        "report is then not printed")
    g.add_argument("--offsets-decoder", action="store_true",
                   help="decode records as __consumer_offsets group-coordinator records (JSON)")
    g.add_argument("--transaction-log-decoder", action="store_true",
                   help="decode records as __transaction_state transaction metadata (JSON)")
    g.add_argument("--cluster-metadata-decoder", action="store_true",
                   help="decode values as KRaft __cluster_metadata records (JSON)")
    g.add_argument("--remote-log-metadata-decoder", action="store_true",
                   help="(not supported by kafkalog: reported as an error)")
    g.add_argument("--share-group-state-decoder", action="store_true",
                   help="(not supported by kafkalog: reported as an error)")
    g.add_argument("--key-decoder-class", nargs="?",
                   const="org.apache.kafka.tools.api.StringDecoder", metavar="CLASS",
                   help="Kafka decoder class for keys: org.apache.kafka.tools.api.StringDecoder "
                        "(default), LongDecoder or IntegerDecoder (no JVM classes are loaded); "
                        "implies --print-data-log")
    g.add_argument("--value-decoder-class", nargs="?",
                   const="org.apache.kafka.tools.api.StringDecoder", metavar="CLASS",
                   help="the same for values")
    x = p.add_argument_group("kafkalog extensions")
    x.add_argument("--key-decoder", choices=("string", "hex", "base64", "json", "long", "int"),
                   help="how keys are printed: string (UTF-8, the default), hex, base64, json "
                        "(embedded as JSON with --json), long, int; implies --print-data-log")
    x.add_argument("--value-decoder", choices=("string", "hex", "base64", "json", "long", "int"),
                   help="how payloads are printed (same choices); implies --print-data-log")
    x.add_argument("--json", action="store_true",
                   help="write one JSON object per line (files, batches, records, index entries, "
                        "reports) instead of kafka-dump-log's text; field names in docs/cli.md")
    x.add_argument("--binary-encoding", choices=("base64", "hex", "string"), default="base64",
                   help="with --json: how keys, values and header values are written unless a "
                        "decoder is chosen (default base64)")
    x.add_argument("--print-headers", action="store_true",
                   help="text output: append ' headers: [[key,value],...]' (JSON) with the header "
                        "values to each record line")
    x.add_argument("--header-encoding", choices=("string", "hex", "base64"),
                   help="how header values are written (default: string in text, --binary-encoding "
                        "with --json)")
    x.add_argument("--from-offset", type=_offset_arg, metavar="OFFSET",
                   help="start at the batch holding OFFSET; the .index is used to seek (no scan "
                        "from the start) and earlier segments of a directory are skipped")
    x.add_argument("--to-offset", type=_offset_arg, metavar="OFFSET",
                   help="stop after the batch holding OFFSET (records after it are not printed)")
    x.add_argument("--from-timestamp", type=_timestamp_arg, metavar="TIME",
                   help="start at the first batch with a timestamp >= TIME (ms since the epoch or "
                        "ISO-8601), found through the .timeindex and .index like a broker's "
                        "offsetsForTimes")
    x.add_argument("--count", "-c", type=_count_arg, metavar="N",
                   help="stop after N records (kcat's -c); N batches when only batch lines are "
                        "printed")
    x.add_argument("--format", "-f", type=_format_arg, metavar="FMT", dest="record_format",
                   help="print each record as FMT and nothing else (kcat's -f): %%t topic, %%p "
                        "partition, %%o offset, %%k key, %%s value, %%K/%%S key/value length "
                        "(-1: null), %%R value length as a 4-byte big-endian int, %%T timestamp "
                        "(ms), %%h headers (name=value,...), %%%% a %%; \\n \\r \\t \\\\ "
                        "\\xXX escapes. E.g. -f '%%t [%%p] %%o: %%k %%s\\n'")
    x.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar on stderr (default: when stderr is a terminal and "
                        "stdout is not)")
    x.add_argument("--no-progress", dest="progress", action="store_false", help="never show one")
    p.set_defaults(func=_run_dump)


def _add_verify(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check segments, indexes and checkpoints; exit 1 when a problem is found",
        description=(
            "Verify Kafka log directories offline: batch framing and CRCs, offsets (increasing, "
            "inside the segment), offset-index and time-index consistency with the log, time-index "
            "monotonicity, transaction indexes, producer snapshots, leader-epoch and offset "
            "checkpoints. Each problem is printed as FILE:POSITION: [offset N:] message. Exit "
            "status 0 when no error is found, 1 otherwise."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="log directory roots, partition directories or single files")
    p.add_argument("--deep", action="store_true",
                   help="also decompress and decode every record (record structure, offsets within "
                        "their batch, control records); slower")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per problem, then a summary object")
    p.add_argument("--strict", action="store_true", help="warnings also make the exit status 1")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the summary line")
    p.add_argument("--max-problems", type=_size_arg, default=1000, metavar="N",
                   help="stop listing problems after N (they are still counted; default 1000)")
    _add_progress(p)
    p.set_defaults(func=_run_verify)


def _add_progress(p) -> None:
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _add_salvage(sub) -> None:
    p = sub.add_parser(
        "salvage",
        help="copy every valid batch out of damaged logs into a fresh, valid log directory",
        description=(
            "Copy every valid record batch of SRC (a segment file, a partition directory or a log "
            "root) into DST, skipping damaged bytes and resynchronising on the next valid batch "
            "header. DST gets fresh segments, indexes, producer snapshots and checkpoints that a "
            "broker loads. What was lost is reported as byte and offset ranges. SRC is only read."
        ),
    )
    p.add_argument("src", metavar="SRC", help="a .log file, a partition directory or a log root")
    p.add_argument("dst", metavar="DST",
                   help="where to write: a new partition directory (for a file or partition "
                        "directory) or a new log root (for a log root); must not exist or be empty")
    p.add_argument("--deep", action="store_true",
                   help="also require every record of a batch to decode (decompression included)")
    p.add_argument("--segment-bytes", type=_size_arg, default=1024 ** 3, metavar="BYTES",
                   help="segment size of the output log (default 1 GiB)")
    p.add_argument("--json", action="store_true", help="report as JSON objects")
    _add_progress(p)
    p.set_defaults(func=_run_salvage)


def _add_stats(sub) -> None:
    p = sub.add_parser(
        "stats",
        help="per-partition and per-segment statistics",
        description=(
            "Statistics per partition and segment: batches, records, bytes, compression ratio, "
            "magic versions, codecs, time range, producers, transactional and control batches, "
            "and an estimate of the number of distinct keys (HyperLogLog)."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="log directory roots, partition directories or .log files")
    p.add_argument("--json", action="store_true", help="one JSON object per segment and partition")
    p.add_argument("--shallow", action="store_true",
                   help="read batch headers only (fast): no record counts for legacy compressed "
                        "entries, no compression ratio, no key cardinality")
    p.add_argument("--segments", action=argparse.BooleanOptionalAction, default=True,
                   help="print a line per segment as well as per partition (default: yes)")
    _add_progress(p)
    p.set_defaults(func=_run_stats)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kafkalog",
        description=(
            "Read, check and repair Apache Kafka log directories without a JVM. "
            "'kafkalog --files ...' with kafka-dump-log's flags runs 'kafkalog dump'."
        ),
    )
    parser.add_argument("--version", action="version", version=_version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_dump(sub)
    _add_verify(sub)
    _add_salvage(sub)
    _add_stats(sub)
    _SUBPARSERS.clear()
    _SUBPARSERS.update(sub.choices)
    return parser


_SUBPARSERS: dict = {}


# ------------------------------------------------------------------------------------------------
# commands
# ------------------------------------------------------------------------------------------------
def _progress_default(flag: Optional[bool], needs_redirected_stdout: bool) -> bool:
    if flag is not None:
        return flag
    try:
        if not sys.stderr.isatty():
            return False
        if needs_redirected_stdout and sys.stdout.isatty():
            return False
    except (AttributeError, ValueError):
        return False
    return True


def _stdout_bytes():
    return getattr(sys.stdout, "buffer", None) or sys.stdout


def _run_dump(args) -> int:
    from ._inputs import expand_inputs
    from ._record_format import RecordFormat
    from .decoders import (
        ClusterMetadataMessageParser,
        DecoderMessageParser,
        OffsetsMessageParser,
        TransactionLogMessageParser,
        make_value_decoder,
    )
    from .dump import Dumper, DumpOptions

    if args.remote_log_metadata_decoder:
        raise _CliError("--remote-log-metadata-decoder is not supported by kafkalog")
    if args.share_group_state_decoder:
        raise _CliError("--share-group-state-decoder is not supported by kafkalog")
    files: List[str] = []
    for f in args.files:
        files.extend(f.split(","))  # Kafka splits on "," and keeps empty names and spaces
    files.extend(args.paths)
    if not files:
        raise _UsageError('Missing required argument "[files]" (give --files f1,f2 or PATHs)')
    if args.offsets_decoder:
        parser = OffsetsMessageParser()
    elif args.transaction_log_decoder:
        parser = TransactionLogMessageParser()
    elif args.cluster_metadata_decoder:
        parser = ClusterMetadataMessageParser()
    else:
        try:
            kd = make_value_decoder(args.key_decoder or args.key_decoder_class)
            vd = make_value_decoder(args.value_decoder or args.value_decoder_class)
        except ValueError as e:
            raise _CliError(str(e)) from None
        parser = DecoderMessageParser(kd, vd)
    explicit = any(x is not None for x in (args.key_decoder, args.value_decoder,
                                           args.key_decoder_class, args.value_decoder_class))
    print_data = (args.print_data_log or args.offsets_decoder or args.transaction_log_decoder
                  or args.cluster_metadata_decoder or explicit)
    record_format = None
    if args.record_format is not None:
        if args.json:
            raise _UsageError("--format and --json are two outputs: give one")
        decoded = explicit or type(parser) is not DecoderMessageParser
        record_format = RecordFormat(args.record_format, parser.parse if decoded else None)
    opts = DumpOptions(
        print_data_log=print_data,
        deep_iteration=args.deep_iteration,
        skip_record_metadata=args.skip_record_metadata,
        verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check,
        max_message_size=args.max_message_size,
        max_bytes=args.max_bytes,
        parser=parser,
        json_output=args.json,
        binary_encoding=args.binary_encoding,
        explicit_decoders=explicit,
        print_headers=args.print_headers,
        header_encoding=args.header_encoding,
        from_offset=args.from_offset,
        to_offset=args.to_offset,
        from_timestamp=args.from_timestamp,
        progress=_progress_default(args.progress, True),
        count=args.count,
        record_format=record_format,
    )
    expanded = expand_inputs(files)
    if opts.seeking:
        expanded = _select_segments(expanded, opts)
    return Dumper(opts, _stdout_bytes(), sys.stderr).run(expanded)


def _select_segments(paths: List[str], opts) -> List[str]:
    """Skip whole segments of a partition directory that --from-offset/--to-offset/
    --from-timestamp rule out, using file names and time indexes (no data is read)."""
    from ..storage import files as _files
    from ..storage.index import TimeIndex

    by_dir = {}
    for i, p in enumerate(paths):
        sf = _files.parse_segment_file_name(os.path.basename(p))
        if sf is not None and sf.kind == ".log" and sf.suffix == "":
            by_dir.setdefault(os.path.dirname(p), []).append((sf.base_offset, i))
    drop = set()
    for d, segs in by_dir.items():
        segs.sort()
        bases = [b for b, _ in segs]
        for j, (b, i) in enumerate(segs):
            nxt = bases[j + 1] if j + 1 < len(bases) else None
            if opts.from_offset is not None and nxt is not None and nxt <= opts.from_offset:
                drop.add(i)
            if opts.to_offset is not None and b > opts.to_offset:
                drop.add(i)
            if opts.from_timestamp is not None and nxt is not None:
                tpath = _files.time_index_file(d, b)
                try:
                    if os.path.exists(tpath):
                        t = TimeIndex(tpath, b, writable=False)
                        try:
                            if t.entries and t.last_entry.timestamp < opts.from_timestamp:
                                drop.add(i)
                        finally:
                            t.close()
                except Exception:  # an unreadable index: keep the segment (it gets scanned)
                    pass
    return [p for i, p in enumerate(paths) if i not in drop]


def _run_verify(args) -> int:
    from .verify import run_verify

    return run_verify(args.paths, deep=args.deep, json_output=args.json, strict=args.strict,
                      quiet=args.quiet, max_problems=args.max_problems,
                      progress=_progress_default(args.progress, False),
                      out=sys.stdout, err=sys.stderr)


def _run_salvage(args) -> int:
    from .salvage import run_salvage

    return run_salvage(args.src, args.dst, deep=args.deep, segment_bytes=args.segment_bytes,
                       json_output=args.json, progress=_progress_default(args.progress, False),
                       out=sys.stdout, err=sys.stderr)


def _run_stats(args) -> int:
    from .stats import run_stats

    return run_stats(args.paths, json_output=args.json, deep=not args.shallow,
                     per_segment=args.segments, progress=_progress_default(args.progress, False),
                     out=sys.stdout, err=sys.stderr)


# ------------------------------------------------------------------------------------------------
# entry point
# ------------------------------------------------------------------------------------------------
def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 problems or bad input, 2 usage)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if (
        args_list
        and args_list[0] not in SUBCOMMANDS
        and args_list[0] not in ("-h", "--help", "--version")
    ):
        if args_list[0].startswith("-"):
            args_list.insert(0, "dump")  # kafka-dump-log.sh compatibility: flags only
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(args_list)
        if extra:
            sub = _SUBPARSERS.get(getattr(args, "command", None), parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # argparse: --help/--version (0) or a usage error (2)
        return int(e.code or 0) if isinstance(e.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    from ..errors import KafkaLogError
    from .dump import DumpError

    try:
        rc = args.func(args)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
        return rc
    except BrokenPipeError:
        # `kafkalog dump ... | head`: the reader left; stop quietly (kafka-dump-log exits 0 too).
        silence_stdout()
        return 0
    except KeyboardInterrupt:
        silence_stdout()
        return 130
    except (_CliError, DumpError, KafkaLogError, OSError, ValueError) as e:
        try:
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            silence_stdout()
        msg = str(e).replace("\n", " ")
        if isinstance(e, OSError) and e.filename and e.strerror:
            msg = f"{e.filename}: {e.strerror}"
        sys.stderr.write(f"kafkalog {args.command}: error: {msg}\n")
        sys.stderr.flush()
        return 2 if isinstance(e, _UsageError) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
