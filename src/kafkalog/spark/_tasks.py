"""What a Spark task does: decode the pieces of one split into Arrow record batches of the
source's schema, each partition directory read wholly from the version it was planned on,
damage reported (``failOnDataLoss``) or skipped with a warning."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import KafkaLogError, KafkaStorageError
from ..storage import files as _files
from ..storage import fs as _fs
from ..storage import store_fs as _store_fs
from ..storage.log import open_view
from ..storage.logdir import dir_version, version_of
from ..storage.ranged_reads import sound_entries
from ._columns import KAFKA_COLUMNS
from ._errors import ConcurrentWriteError, DataLossError, OptionError, warn
from ._options import ReadOptions
from ._planning import Piece, Pruning, Split
from ._schema import BATCH_FIELDS, batch_type
from ._store_clients import store_of

#: a task reads a local segment in windows of about this many bytes (one buffer, reused)
_LOCAL_BLOCK = 8 << 20

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
        # a new read: nothing this process's store clients remember from an earlier task (a
        # reused worker) is trusted - a segment may have grown since (FileSystem.refresh)
        for fs in {id(f): f for f in (self.fs_of(p.path) for p in pieces)}.values():
            fs.refresh()
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
    for c in ("offset", "position"):  # position: the file's (errors and the batch column)
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
        # what the read model planned is the log's bytes (a torn tail was cut before planning),
        # so the storage layer reads it under one damage rule: failOnDataLoss=false is
        # on_damage="skip" (exactly the damaged entry where its framing holds, else to the next
        # whole batch), with CRCs checked there so that what it hands over decodes
        stop = min(planned, f.size)
        if stop <= piece.start:
            return
        sf = _files.parse_segment_file_name(_fs.basename(piece.path))
        base = sf.base_offset if sf is not None else 0
        skip = not opts.fail_on_data_loss
        gaps: List[Any] = []
        block = _LOCAL_BLOCK if getattr(f, "fileno", None) is not None else getattr(
            getattr(getattr(f, "fs", None), "options", None), "block_size",
            _store_fs.DEFAULT_BLOCK_SIZE)
        runs = sound_entries(f, piece.path, base, piece.start, stop, block, limit=piece.limit,
                             on_damage="skip" if skip else "raise", gaps=gaps,
                             check_crcs=skip)
        try:
            for pos, run in runs:
                while gaps:
                    g = gaps.pop(0)
                    warn(f"skipping corrupt data in {g.path} at position {g.position} (offsets "
                         f"{g.offset} to {g.next_offset}): {g.reason} (failOnDataLoss=false)")
                try:
                    for rb in _decode_buffer(piece, run, not skip):
                        if pos:
                            i = rb.schema.get_field_index("position")
                            rb = rb.set_column(i, rb.schema.field(i), pc.add(rb.column(i), pos))
                        yield rb
                except KafkaLogError as e:
                    if e.position is not None:
                        e.position += pos
                    raise
            for g in gaps:
                warn(f"skipping corrupt data in {g.path} at position {g.position} (offsets "
                     f"{g.offset} to {g.next_offset}): {g.reason} (failOnDataLoss=false)")
        except KafkaStorageError as e:
            if not skip:
                raise
            # the file changed under the read (cut shorter: EAGAIN): what was read is kept
            warn(f"{e}; keeping the rows read before it (failOnDataLoss=false)")
        except KafkaLogError as e:
            hint = ("[set failOnDataLoss=false to skip corrupt batches]" if not skip else
                    "[a batch whose CRC holds but does not decode is not skipped]")
            try:
                err = type(e)(f"{e.message} {hint}", e.position, e.offset, e.path or piece.path)
            except Exception:
                raise e from None
            raise err from e
        finally:
            runs.close()

    def _decode_buffer(piece: Piece, buf, check_crcs: bool):
        aborted = files.aborted_for(piece) if opts.read_committed else None
        return ka.iter_batches(
            buf,
            columns=dec_cols,
            timestamp_unit="us",
            max_rows=opts.max_records_per_batch,
            max_bytes=opts.max_batch_bytes,
            check_crcs=opts.check_crcs and check_crcs,
            read_committed=opts.read_committed,
            aborted_transactions=aborted,
            **kw,
        )

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
