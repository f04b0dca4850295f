"""kafka-dump-log's dumps of the index files - ``.index`` and ``.timeindex`` (each entry checked
against its log segment, or with ``--index-sanity-check`` the file's shape only) and ``.txnindex``
- and of producer-state ``.snapshot`` files; and the end-of-run reports of the checks (Kafka's
``DumpLogSegments`` keeps the same maps: index mismatches, time-index problems, non-consecutive
offsets).  :class:`IndexDumps` is a part of :class:`kafkalog.tools.dump.Dumper`."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Tuple

from .._format import INT32_MAX, OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY
from ..storage import logdir as _logdir
from ..storage.txn_index import txn_index_entries
from ._batch_header import DumpError, find_batch, first_batch_last_offset, records_of
from ._inputs import MappedFile, java_abs_path, no_base_offset_message

__all__ = ["IndexDumps", "Reports"]

INT_MAX = INT32_MAX
_OFFSET_ENTRY = OFFSET_INDEX_ENTRY
_TIME_ENTRY = TIME_INDEX_ENTRY


class Reports:
    """What the checks found, reported at the end of a run (stderr text, or JSON lines)."""

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
        return any(
            (
                self.index_mismatches,
                self.ts_mismatches,
                self.ts_out_of_order,
                self.ts_not_found,
                self.non_consecutive,
            )
        )

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
                out.append(
                    {"type": "index_mismatch", "file": path, "indexOffset": a, "logOffset": b}
                )
        for path, items in self.ts_mismatches.items():
            for a, b in items:
                out.append(
                    {
                        "type": "time_index_mismatch",
                        "file": path,
                        "indexTimestamp": a,
                        "logTimestamp": b,
                    }
                )
        for path, items in self.ts_out_of_order.items():
            for a, b in items:
                out.append(
                    {
                        "type": "time_index_out_of_order",
                        "file": path,
                        "indexTimestamp": a,
                        "previousTimestamp": b,
                    }
                )
        for path, items in self.ts_not_found.items():
            for a, b in items:
                out.append(
                    {
                        "type": "index_offset_not_found",
                        "file": path,
                        "indexOffset": a,
                        "foundLogOffset": b,
                    }
                )
        for path, items in self.non_consecutive.items():
            for a, b in items:
                out.append(
                    {"type": "non_consecutive_offsets", "file": path, "offset": a, "nextOffset": b}
                )
        return [json.dumps(o, separators=(",", ":")) for o in out]


class IndexDumps:
    """The index and snapshot dumps of a :class:`~kafkalog.tools.dump.Dumper` (which has the
    options, the output and the reports these use)."""

    # -- .index ------------------------------------------------------------------------------------
    def _open_log_for_index(self, path: str, shown: str) -> Tuple[MappedFile, int, str]:
        name = os.path.basename(shown)
        prefix = name.split(".")[0]
        try:
            base = int(prefix)
        except ValueError:
            raise DumpError(no_base_offset_message(shown, name[len(prefix) :])) from None
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
                        f"Corrupt index found, index file {abs_path} has non-zero size but the "
                        f"last offset is {last} which is less than the base offset {base}"
                    )
                if len(data) % 8 != 0:
                    raise DumpError(
                        f"Index file {abs_path} is corrupt, found {len(data)} bytes which is "
                        f"neither positive nor a multiple of 8"
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
                found = first_batch_last_offset(buf, position, slice_end, log_path)
                if found is None:
                    raise DumpError(
                        f"No complete batch at position {position} of {log_path} within "
                        f"--max-message-size {opts.max_message_size} bytes (entry {i} of {shown})"
                    )
                if found != offset:
                    Reports.add(self.reports.index_mismatches, abs_path, (offset, found))
                if not opts.verify_index_only:
                    if opts.json_output:
                        self._json({"type": "index_entry", "offset": offset, "position": position})
                    else:
                        self.out.line(b"offset: %d position: %d\n" % (offset, position))

    # -- .timeindex --------------------------------------------------------------------------------
    def dump_time_index(self, path: str, shown: str) -> None:
        opts = self.opts
        mf, base, log_path = self._open_log_for_index(path, shown)
        with mf:
            data = self._read_index_file(path, shown)
            entries = len(data) // 12
            abs_path = java_abs_path(path)
            if opts.index_sanity_check:
                if entries:
                    first_ts = _TIME_ENTRY.unpack_from(data, 0)[0]
                    last_ts, last_rel = _TIME_ENTRY.unpack_from(data, (entries - 1) * 12)
                    if last_ts < first_ts:
                        raise DumpError(
                            f"Corrupt time index found, time index file ({abs_path}) has non-zero "
                            f"size but the last timestamp is {last_ts} which is less than the "
                            f"first timestamp {first_ts}"
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

            ipath = os.path.join(
                os.path.dirname(log_path), os.path.basename(log_path)[:-4] + ".index"
            )
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
                    match = find_batch(buf, max(position, 0), size, offset, log_path)
                    if match is None:
                        Reports.add(self.reports.ts_not_found, abs_path, (offset, -1))
                    elif match.last_offset != offset:
                        Reports.add(
                            self.reports.ts_not_found, abs_path, (offset, match.last_offset)
                        )
                    else:
                        max_ts = -1
                        for r in records_of(buf, match, log_path):
                            if r.timestamp > max_ts:
                                max_ts = r.timestamp
                        if max_ts != ts:
                            Reports.add(self.reports.ts_mismatches, abs_path, (ts, max_ts))
                        if prev_ts >= ts:
                            Reports.add(self.reports.ts_out_of_order, abs_path, (ts, prev_ts))
                    if not opts.verify_index_only:
                        if opts.json_output:
                            self._json(
                                {"type": "time_index_entry", "timestamp": ts, "offset": offset}
                            )
                        else:
                            self.out.line(b"timestamp: %d offset: %d\n" % (ts, offset))
                    prev_ts = ts
            finally:
                oidx.close()

    # -- .txnindex ---------------------------------------------------------------------------------
    def dump_txn_index(self, path: str, shown: str) -> None:
        data = self._read_index_file(path, shown)
        for version, pid, first, last, lso in txn_index_entries(data):
            if version > 0:
                raise DumpError(
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{java_abs_path(path)}, current version is 0"
                )
            if self.opts.json_output:
                self._json(
                    {
                        "type": "aborted_txn",
                        "version": version,
                        "producerId": pid,
                        "firstOffset": first,
                        "lastOffset": last,
                        "lastStableOffset": lso,
                    }
                )
            else:
                self.out.line(
                    b"version: %d producerId: %d firstOffset: %d lastOffset: %d "
                    b"lastStableOffset: %d\n"
                    % (version, pid, first, last, lso)
                )

    # -- .snapshot (producer state) ----------------------------------------------------------------
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
            txn = (
                "OptionalLong.empty"
                if e.current_txn_first_offset < 0
                else f"OptionalLong[{e.current_txn_first_offset}]"
            )
            if self.opts.json_output:
                o = {
                    "type": "producer",
                    "producerId": e.producer_id,
                    "producerEpoch": e.producer_epoch,
                    "coordinatorEpoch": e.coordinator_epoch,
                    "currentTxnFirstOffset": None
                    if e.current_txn_first_offset < 0
                    else e.current_txn_first_offset,
                    "lastTimestamp": e.timestamp,
                }
                if has_batch:
                    o.update(
                        firstSequence=first_seq,
                        lastSequence=e.last_sequence,
                        lastOffset=e.last_offset,
                        offsetDelta=e.offset_delta,
                        timestamp=e.timestamp,
                    )
                self._json(o)
                continue
            s = (
                f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: "
                f"{e.coordinator_epoch} currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp}"
            )
            if has_batch:
                s += (
                    f" firstSequence: {first_seq} lastSequence: {e.last_sequence} lastOffset: "
                    f"{e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
                )
            self._text(s)
