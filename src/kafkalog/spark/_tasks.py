"""What a Spark task does: decode the pieces of one split into Arrow record batches of the
source's schema, each partition directory read wholly from the version it was planned on,
damage reported (``failOnDataLoss``) or skipped with a warning."""
from __future__ import annotations

import os
import struct
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import CorruptRecordError, KafkaLogError, KafkaStorageError
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import logdir as _logdir
from ..storage.log import open_view
from ..storage.segment import open_segment
from ._errors import ConcurrentWriteError, DataLossError, OptionError, warn
from ._options import ReadOptions
from ._planning import Piece, Pruning, Split
from ._schema import BATCH_FIELDS, KAFKA_COLUMNS, batch_type
from ..storage.logdir import dir_version, version_of
from ._segments import SegmentRef, offset_index_entries
from ._store import store_of
from ..storage.ranged import entry_windows, local_windows

#: a task reads a local segment in windows of about this many bytes (one buffer, reused)
_LOCAL_BLOCK = 8 << 20

_ENTRY = struct.Struct(">qi")  # an entry's offset and size
_DECODED = ("key", "value", "offset", "timestamp", "timestampType", "headers")


def _replaced(piece: Piece, why: str) -> ConcurrentWriteError:
    name = piece.directory if piece.topic is None else f"{piece.topic}-{piece.partition}"
    return ConcurrentWriteError(
        f"partition {name} ({piece.directory}) {why} after this query was planned (a concurrent "
        "write replaced or deleted it); nothing of it was returned: re-run the query",
        path=piece.directory,
    )


class _SplitFiles:
    """The files a split reads, one partition directory at a time: the directory is held open
    once (:meth:`kafkalog.storage.fs.FileSystem.open_dir`), checked to be the version the split was
    planned on, and its segments (up to ``EAGER`` of them at once, before anything of it is
    decoded) and, for read_committed, its transaction data are opened through that handle.  A
    directory a concurrent write swaps out afterwards stays readable through these handles, so
    every partition is read wholly from one version; what cannot be had from the planned
    version raises :class:`ConcurrentWriteError`, and a segment deleted in place (retention) is
    data loss under ``failOnDataLoss``."""

    EAGER = 64  # segment files held open per partition directory (the rest are opened late)

    def __init__(self, pieces: Sequence[Piece], opts: ReadOptions) -> None:
        self.opts = opts
        self.paths: Dict[str, List[str]] = {}  # directory -> its segments in this split
        for piece in pieces:
            ps = self.paths.setdefault(self._dirname(piece), [])
            if not ps or ps[-1] != piece.path:
                ps.append(piece.path)
        self.current: Optional[str] = None  # the directory open now
        self.dh: Optional[_fs.DirectoryHandle] = None
        self.files: Dict[str, Optional[_fs.ReadableFile]] = {}
        self.aborted: Optional[List[Tuple[int, int, int]]] = None

    def fs_of(self, path: str) -> "_fs.FileSystem":
        return store_of(path, self.opts.storage_options)

    @staticmethod
    def _dirname(piece: Piece) -> str:
        return piece.directory or _fs.parent(piece.path)

    def _enter(self, piece: Piece) -> None:
        d = self._dirname(piece)
        if d == self.current:
            return
        self.close()
        self.current = d
        if piece.version is not None:
            try:
                self.dh = _fs.LOCAL.open_dir(d)
            except _fs.NotRegularFileError:  # gone, or something else now has its name
                raise _replaced(piece, "disappeared") from None
            if self.dh is not None and version_of(self.dh) != piece.version:
                raise _replaced(piece, "was replaced")
        for path in self.paths.get(d, [])[: self.EAGER]:
            if path not in self.files:
                self.files[path] = self._open(piece, path)
        if self.opts.read_committed:
            self.aborted = self._aborted(piece, d)

    def _aborted(self, piece: Piece, d: str) -> List[Tuple[int, int, int]]:
        """``(producer_id, first_offset, last_offset)`` of the aborted transactions of the
        directory (the storage read model's: its transaction indexes), read from the version
        the split was planned on."""
        fs = self.fs_of(piece.path)
        try:
            with open_view(d, None if fs.is_local() else fs, defer_opens=True) as view:
                found = view.collect_aborted_transactions(0, view.log_end_offset)
        except (KafkaStorageError, FileNotFoundError):
            if piece.version is not None and dir_version(d) != piece.version:
                raise _replaced(piece, "was replaced") from None
            raise
        if piece.version is not None and dir_version(d) != piece.version:
            raise _replaced(piece, "was replaced")
        return sorted((t.producer_id, t.first_offset, t.last_offset) for t in found)

    def _open(self, piece: Piece, path: str) -> Optional[_fs.ReadableFile]:
        try:
            if self.dh is None:
                return self.fs_of(path).open_read(path)
            return self.dh.open_read(os.path.basename(path))
        except _fs.MissingFileError:
            if self.dh is not None and dir_version(piece.directory) != piece.version:
                raise _replaced(piece, "was replaced") from None
        name = piece.directory if piece.topic is None else f"{piece.topic}-{piece.partition}"
        upto = "" if piece.until_offset is None else f" up to offset {piece.until_offset - 1}"
        msg = (
            f"segment {path} of {name} was deleted (by retention?) after this query was "
            f"planned: its records from offset {piece.from_offset}{upto} are lost"
        )
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                msg + "; set failOnDataLoss=false to skip them",
                path=path,
                offset=piece.from_offset,
            )
        warn(msg + "; skipped (failOnDataLoss=false)")
        return None

    def file(self, piece: Piece) -> Optional[_fs.ReadableFile]:
        """The open segment of ``piece`` (None: deleted, skipped under failOnDataLoss=false)."""
        self._enter(piece)
        if piece.path not in self.files:
            # past the eagerly opened ones: keep one late-opened file at a time
            late = [p for p in self.files if p not in self.paths[self.current][: self.EAGER]]
            for p in late:
                f = self.files.pop(p)
                if f is not None:
                    f.close()
            self.files[piece.path] = self._open(piece, piece.path)
        return self.files[piece.path]

    def aborted_for(self, piece: Piece) -> Optional[List[Tuple[int, int, int]]]:
        self._enter(piece)
        return self.aborted

    def __del__(self) -> None:  # a read abandoned half-way (the generator is dropped)
        self.close()

    def close(self) -> None:
        for f in list(self.files.values()) + [self.dh]:
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.files.clear()
        self.dh = None
        self.current = None
        self.aborted = None


def read_split(
    split: Split, opts: ReadOptions, target_schema, pruning: Optional[Pruning] = None
) -> Iterator[Any]:
    """Decode a split into ``pyarrow.RecordBatch`` es of exactly ``target_schema`` (the Arrow
    form of the Spark schema; any subset and order of the source's columns)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .. import arrow as ka

    names = list(target_schema.names)
    known = set(KAFKA_COLUMNS) | {"headers", "batch", "segment"}
    for n in names:
        if n not in known:
            raise OptionError(
                f"column {n!r} is not a column of the kafkalog source ({', '.join(sorted(known))})"
            )
    dec_cols = [c for c in _DECODED if c in names]
    for c in ("offset", "position"):  # position: where the walk for damage starts
        if c not in dec_cols:
            dec_cols.append(c)
    if (
        pruning is not None
        and (pruning.ts_lo_us is not None or pruning.ts_hi_us is not None)
        and "timestamp" not in dec_cols
    ):
        dec_cols.append("timestamp")
    want_batch = "batch" in names
    if want_batch:
        dec_cols += [src for _, src, _ in BATCH_FIELDS if src not in dec_cols]
    kw: Dict[str, Any] = {}
    if opts.max_decompressed_size is not None:
        kw["max_decompressed_size"] = opts.max_decompressed_size
    files = _SplitFiles(split.pieces, opts)

    def decode(piece: Piece, start: int, stop: Optional[int]):
        f = files.file(piece)
        if f is None:
            return
        if f.size == 0 or start >= f.size:
            return
        end = f.size if stop is None else min(stop, f.size)
        fileno = getattr(f, "fileno", None)
        if fileno is not None:
            # a local file: read into a reused buffer, never mapped (a segment a broker cuts
            # shorter meanwhile is then bytes the decoder judges, not a SIGBUS)
            yield from _decode_runs(piece, local_windows(fileno(), start, end, _LOCAL_BLOCK,
                                                          piece.path))
            return
        # a store: windows of about block_size bytes, the next fetched while this one decodes
        # (memory: two windows, not the piece)
        block = getattr(getattr(getattr(f, "fs", None), "options", None), "block_size",
                        _fs.DEFAULT_BLOCK_SIZE)
        yield from _decode_runs(piece, entry_windows(_Ranged(f, end), start, block))

    def _decode_runs(piece: Piece, windows):
        """Decode windows of whole entries; positions (in errors and the batch column) are
        the file's."""
        for pos, win in windows:
            try:
                for rb in _decode_buffer(piece, win, 0, None):
                    if pos:
                        i = rb.schema.get_field_index("position")
                        rb = rb.set_column(i, rb.schema.field(i), pc.add(rb.column(i), pos))
                    yield rb
            except KafkaLogError as e:
                if e.position is not None:
                    e.position += pos
                raise

    def _decode_buffer(piece: Piece, buf, start: int, stop: Optional[int]):
        aborted = files.aborted_for(piece) if opts.read_committed else None
        return ka.iter_batches(
            buf,
            columns=dec_cols,
            timestamp_unit="us",
            max_rows=opts.max_records_per_batch,
            max_bytes=opts.max_batch_bytes,
            check_crcs=opts.check_crcs,
            read_committed=opts.read_committed,
            aborted_transactions=aborted,
            start_position=start,
            stop_position=stop,
            **kw,
        )

    def piece_batches(piece: Piece) -> Iterator[Any]:
        # open first, outside the corrupt-data handling below: a replaced directory or a
        # deleted segment is not corrupt data
        f = files.file(piece)
        if f is None:
            return
        planned = piece.start + piece.nbytes
        if f.size < planned:
            # cut short (or replaced by a shorter object) since planning: what was planned
            # past its end is gone; never passed off as the whole piece
            name = piece.directory if piece.topic is None else f"{piece.topic}-{piece.partition}"
            msg = (f"segment {piece.path} of {name} is {f.size} bytes, shorter than the "
                   f"{planned} bytes planned: it was truncated or replaced after this query was "
                   f"planned, and records from offset {piece.from_offset} on may be lost")
            if opts.fail_on_data_loss:
                raise DataLossError(msg + "; set failOnDataLoss=false to read what is left",
                                    path=piece.path, offset=piece.from_offset)
            warn(msg + "; reading what is left (failOnDataLoss=false)")
        def last_position(rb, at: int) -> int:
            return rb.column("position")[-1].as_py() if rb.num_rows else at

        if opts.fail_on_data_loss:
            try:
                at = piece.start
                for rb in decode(piece, piece.start, piece.end):
                    at = last_position(rb, at)
                    yield rb
                damage = _damage_in(piece, files.file(piece), at, files.fs_of(piece.path))
                if damage is not None:
                    raise CorruptRecordError(damage[2], damage[0], damage[1], piece.path)
            except KafkaLogError as e:
                try:
                    err = type(e)(
                        f"{e.message} [set failOnDataLoss=false to skip corrupt batches]",
                        e.position,
                        e.offset,
                        e.path or piece.path,
                    )
                except Exception:
                    raise e from None
                raise err from e
            return
        restart: Optional[int] = piece.start
        last_yielded = None

        def fresh(rb):
            nonlocal last_yielded
            if last_yielded is not None:
                rb = rb.filter(pc.greater(rb.column("offset"), pa.scalar(last_yielded, pa.int64())))
            if rb.num_rows:
                last_yielded = rb.column("offset")[-1].as_py()
            return rb

        while restart is not None:
            at = restart
            try:
                for rb in decode(piece, restart, piece.end):
                    at = last_position(rb, at)
                    rb = fresh(rb)
                    if rb.num_rows:
                        yield rb
                f = files.file(piece)
                damage = _damage_in(piece, f, at, files.fs_of(piece.path))
                if damage is None:
                    return
                bad, why = damage[0], damage[2]
                size = None
            except KafkaLogError as e:
                bad, why = e.position, str(e)
                f = files.file(piece)
                size = _entry_size(f, bad) if bad is not None and f is not None else None
                if bad is None or bad < restart:
                    warn(f"skipping corrupt data in {piece.path} at position {bad}: {why} "
                          "(failOnDataLoss=false)")
                    return
                # re-decode the good entries before the bad one, then go on after it
                if bad > restart:
                    try:
                        for rb in decode(piece, restart, bad):
                            rb = fresh(rb)
                            if rb.num_rows:
                                yield rb
                    except KafkaLogError:
                        pass
            stop = f.size if piece.end is None else min(piece.end, f.size)
            if size is not None and bad + size <= stop:
                restart = bad + size  # one whole entry that does not decode: skip it
            else:  # framing lost: go on at the next offset index entry of the segment
                restart = _resync(piece, bad, stop, files.fs_of(piece.path))
            warn(f"skipping corrupt data in {piece.path} at position {bad}: {why}; reading on "
                  + ("at the end of the segment" if restart is None else f"at position {restart}")
                  + " (failOnDataLoss=false)")
            if restart is not None and restart >= stop:
                return

    ts_lo = ts_hi = None
    if pruning is not None:
        ts_lo, ts_hi = pruning.ts_lo_us, pruning.ts_hi_us
    schema_types = {f.name: f.type for f in target_schema}
    for piece in split.pieces:
        for rb in piece_batches(piece):
            n = rb.num_rows
            if n == 0:
                continue
            offs = rb.column("offset")
            lo = piece.from_offset
            hi = piece.until_offset
            mm = pc.min_max(offs)
            mn, mx = mm["min"].as_py(), mm["max"].as_py()
            if hi is not None and mn >= hi:
                break
            mask = None
            if mn < lo or (hi is not None and mx >= hi):
                mask = pc.greater_equal(offs, pa.scalar(lo, pa.int64()))
                if hi is not None:
                    mask = pc.and_(mask, pc.less(offs, pa.scalar(hi, pa.int64())))
            if ts_lo is not None or ts_hi is not None:
                ts = rb.column("timestamp").cast(pa.int64())
                m2 = None
                if ts_lo is not None:
                    m2 = pc.greater_equal(ts, pa.scalar(ts_lo, pa.int64()))
                if ts_hi is not None:
                    m3 = pc.less_equal(ts, pa.scalar(ts_hi, pa.int64()))
                    m2 = m3 if m2 is None else pc.and_(m2, m3)
                mask = m2 if mask is None else pc.and_(mask, m2)
            if mask is not None:
                rb = rb.filter(mask)
                n = rb.num_rows
                if n == 0:
                    continue
            arrays = []
            for f in target_schema:
                name = f.name
                if name == "topic":
                    a = (
                        pa.nulls(n, pa.string())
                        if piece.topic is None
                        else pa.repeat(pa.scalar(piece.topic, pa.string()), n)
                    )
                elif name == "partition":
                    a = (
                        pa.nulls(n, pa.int32())
                        if piece.partition is None
                        else pa.repeat(pa.scalar(piece.partition, pa.int32()), n)
                    )
                elif name == "segment":
                    a = pa.repeat(pa.scalar(piece.path, pa.string()), n)
                elif name == "batch":
                    a = pa.StructArray.from_arrays(
                        [rb.column(src) for _, src, _ in BATCH_FIELDS],
                        fields=list(batch_type()),
                    )
                else:
                    a = rb.column(name)
                t = schema_types[name]
                if a.type != t:
                    a = a.cast(t)
                arrays.append(a)
            yield pa.RecordBatch.from_arrays(arrays, schema=target_schema)
    files.close()


def _damage_in(piece: Piece, f: Optional["_fs.ReadableFile"], at: int,
               fs: "_fs.FileSystem") -> Optional[Tuple[int, Optional[int], str]]:
    """``(position, offset, why)`` of the first entry of ``piece`` from the entry at ``at`` on
    that cannot be framed (a size past the piece's end or below the minimum, an unknown
    magic), None when its entries are whole up to its end; a torn tail of the partition's last
    segment past the offsets read is not damage (Kafka's recovery cuts it)."""
    if f is None:
        return None
    stop = f.size if piece.end is None else min(piece.end, f.size)
    if at >= stop:
        return None
    sf = _files.parse_segment_file_name(_fs.basename(piece.path))
    base = sf.base_offset if sf is not None else 0
    sg = open_segment(_logdir.SegmentFiles(base, piece.path, None, None, None), f,
                              None if fs.is_local() else fs)
    end = at
    try:
        for h in sg.iter_headers(at, stop):
            end = h.position + h.size
    except CorruptRecordError as e:
        return e.position, e.offset, e.message
    finally:
        sg.close_handlers()
    if end >= stop:
        return None
    head = f.read(end, 12)
    offset = _ENTRY.unpack_from(head, 0)[0] if len(head) >= 12 else None
    if piece.tail and (offset is None or piece.until_offset is None
                       or offset >= piece.until_offset):
        return None
    claim = (f"the entry claims {_ENTRY.unpack_from(head, 0)[1]} bytes"
             if offset is not None else "a partial entry header")
    return end, offset, (f"Corrupt batch in {piece.path} at position {end}: {claim} in a "
                         f"segment of {f.size} bytes, and the log goes on after it, so the read "
                         "stops here rather than leave out what follows")


def _resync(piece: Piece, bad: int, stop: int, fs: "_fs.FileSystem") -> Optional[int]:
    """The first offset index entry of ``piece``'s segment after ``bad`` and before ``stop``
    (where a plan of more splits may also start a piece), None when there is none."""
    try:
        view = _logdir.scan_partition(piece.directory or _fs.parent(piece.path), fs)
    except KafkaStorageError:
        return None
    sf = next((s for s in view.segments if s.log == piece.path), None)
    if sf is None:
        return None
    ref = SegmentRef(sf.base_offset, sf.log, stop, sf, fs=None if fs.is_local() else fs)
    return next((p for _o, p in offset_index_entries(ref) if bad < p < stop), None)


class _Ranged:
    """The first ``size`` bytes of an open file in a store (what one piece may read)."""

    def __init__(self, f: "_fs.ReadableFile", size: int) -> None:
        self.f = f
        self.size = size

    def fetch(self, position: int, length: int) -> bytes:
        length = max(0, min(length, self.size - position))
        fetch = getattr(self.f, "fetch", None) or self.f.read
        return fetch(position, length) if length else b""


def _entry_size(f: "_fs.ReadableFile", position: int) -> Optional[int]:
    try:
        head = f.read(position, 12)
    except (OSError, ValueError):
        return None
    if len(head) < 12:
        return None
    size = _ENTRY.unpack_from(head, 0)[1]
    if size < 14:
        return None
    return size + 12
