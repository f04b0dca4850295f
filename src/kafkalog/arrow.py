"""Kafka log entries to Apache Arrow and back: columnar decoding and encoding.

::

    import kafkalog.arrow as ka

    table = ka.to_arrow("/var/kafka/orders-0")              # a partition directory
    table = ka.to_arrow("/var/kafka", ["topic", "partition", "offset", "value"])  # a log root
    table = ka.to_arrow(segment_bytes, columns=["offset", "value"])
    for batch in ka.iter_batches("/var/kafka/orders-0/00000000000000000000.log"):
        ...                                # a pyarrow.RecordBatchReader of batches, bounded
    data = ka.from_arrow(table, compression="zstd")          # v2 record batches (bytes)

Sources: a buffer (``bytes``, ``bytearray``, ``memoryview``, ``mmap``, anything with the buffer
protocol), a :class:`~kafkalog.MemoryRecords`, the path of a segment file (``*.log``, read
through ``mmap``), of a partition directory (``<topic>-<partition>``: every
``<20 digits>.log`` in base-offset order; ``.deleted``/``.cleaned``/``.swap`` files are
ignored) or of a log root (a broker's ``log.dirs`` entry: every live partition directory in
it, by topic then partition, each row with its own topic and partition), a glob of those, or
a sequence of those.  A directory holding neither segments nor partition directories is
refused (:class:`~kafkalog.KafkaStorageError` saying what to pass), not read as an empty
table.  A log root or a glob picks its partitions as the Spark source does (``topics=``,
``topic_pattern=``, ``partitions=``; internal topics ``__*`` left out unless
``include_internal_topics=True``) and reads with ``topic`` and ``partition`` columns unless
``columns=`` says otherwise.  For scans that DuckDB and Polars push filters into, see
:mod:`kafkalog.dataset`.

Columns (names and types as spark-sql-kafka's, all nullable):

=================  =========================================  =================================
``key``            ``binary``                                 null for a null key
``value``          ``binary``                                 null for a tombstone
``topic``          ``string``                                 root/glob, or on request
``partition``      ``int32``                                  root/glob, or on request
``offset``         ``int64``
``timestamp``      ``timestamp[ms, tz=UTC]``                  ``timestamp_unit="us"``: µs (as
                                                              Spark); ``None``: ``int64`` ms.
                                                              LogAppendTime batches report the
                                                              batch max timestamp; magic 0: -1
``timestampType``  ``int32``                                  0 CreateTime, 1 LogAppendTime,
                                                              -1 none (magic 0)
``headers``        ``list<struct<key: string, value: binary>>``  null when a record has none
=================  =========================================  =================================

and, on request (``columns=[...]`` or ``batch_metadata=True``), facts of the batch each record
came from: ``producerId`` int64, ``producerEpoch`` int16, ``baseSequence`` int32,
``isTransactional`` bool, ``isControl`` bool, ``leaderEpoch`` int32 (partition leader epoch),
``compression`` string (``none``/``gzip``/``snappy``/``lz4``/``zstd``), ``batchOffset`` int64
(base offset; for a legacy wrapper its first inner offset) and ``position`` int64 (byte position
of the batch in its buffer or segment file).  Legacy (v0/v1) entries report -1 / false for the
producer fields and the leader epoch.

Semantics (those of :class:`~kafkalog.MemoryRecords`): every magic (0, 1, 2) and codec; a
partial entry at the end of a buffer or file ends decoding without error; control batches are
skipped unless ``include_control=True`` (their CRC is still checked); ``check_crcs`` (default
on) verifies every batch's CRC; ``read_committed=True`` drops the transactional batches of
aborted transactions (or those given as ``aborted_transactions``).  A partition directory (or a
log root) is read through :class:`kafkalog.storage.log_view.LogView`, the same read model as
:class:`~kafkalog.storage.log.Log`: rows from the log start offset (the log-start checkpoint) to
the log end offset, read_committed stops at the last stable offset and knows aborted
transactions from the transaction indexes only (as Kafka), and a batch inside the log that
cannot be framed raises CorruptRecordError naming file, position and offset.  A segment file
or a buffer knows them from the ABORT markers in the data (and, for a segment file of a
partition directory, its log's transaction indexes); records of transactions still open at the
end of such data are kept (no last stable offset is known for loose files).  Unrequested
columns cost no copying (records are still fully validated).  Malformed input raises the same
:class:`~kafkalog.KafkaLogError` subclasses as the record API, with ``position`` and ``offset``
(and ``path`` for files).  A header key that is not valid UTF-8 is decoded with U+FFFD
replacement characters, as the Java client does.

Zero copy: the compiled decoder writes each column's Arrow buffers directly (no Python object
per record) and the arrays are built on them with ``pa.Array.from_buffers``; they can be handed
to Polars (``pl.from_arrow``) and DuckDB (``duckdb.sql("select ... from tbl")``) without copying
(see ``docs/arrow.md``).  Decoding releases the GIL, so threads decoding different buffers run
in parallel.  ``import kafkalog`` does not import pyarrow; importing this module does.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

try:
    import pyarrow as pa
except ImportError as _e:  # name the extra that installs it
    raise ModuleNotFoundError(
        f'kafkalog.arrow needs pyarrow, which is not installed ({_e}); install it with: '
        'pip install "kafkalog[arrow]"',
        name="pyarrow",
    ) from _e
import pyarrow.compute as pc  # noqa: E402

from ._format import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType
from ._sources import Opened, Source, block_size, resolve
from ._speedups import arrow as _core
from ._speedups import arrow_encode as _encoder
from .errors import KafkaLogError
from .storage.selection import TopicSelection, fetch_ranges

__all__ = [
    "IMPLEMENTATION",
    "DEFAULT_COLUMNS",
    "SPARK_COLUMNS",
    "METADATA_COLUMNS",
    "ALL_COLUMNS",
    "schema",
    "to_arrow",
    "iter_batches",
    "from_arrow",
    "write_arrow",
]

#: ``"cython"`` when the compiled decoder is in use, ``"python"`` for the pure twin.
IMPLEMENTATION: str = _core.IMPLEMENTATION

DEFAULT_COLUMNS: Tuple[str, ...] = (
    "key",
    "value",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
)
METADATA_COLUMNS: Tuple[str, ...] = (
    "producerId",
    "producerEpoch",
    "baseSequence",
    "isTransactional",
    "isControl",
    "leaderEpoch",
    "compression",
    "batchOffset",
    "position",
)
_SOURCE_COLUMNS = ("topic", "partition")
#: The columns of spark-sql-kafka's schema, in its order (a log root's default, then headers).
SPARK_COLUMNS: Tuple[str, ...] = DEFAULT_COLUMNS[:2] + _SOURCE_COLUMNS + DEFAULT_COLUMNS[2:5]
ALL_COLUMNS: Tuple[str, ...] = (
    DEFAULT_COLUMNS[:2] + _SOURCE_COLUMNS + DEFAULT_COLUMNS[2:] + METADATA_COLUMNS
)

_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(_HEADER_STRUCT)
_CODEC_NAMES = pa.array(["none", "gzip", "snappy", "lz4", "zstd", None, None, None], pa.string())

_FIXED_TYPES: Dict[str, pa.DataType] = {
    "offset": pa.int64(),
    "timestampType": pa.int32(),
    "key": pa.binary(),
    "value": pa.binary(),
    "headers": HEADERS_TYPE,
    "topic": pa.string(),
    "partition": pa.int32(),
    "producerId": pa.int64(),
    "producerEpoch": pa.int16(),
    "baseSequence": pa.int32(),
    "isTransactional": pa.bool_(),
    "isControl": pa.bool_(),
    "leaderEpoch": pa.int32(),
    "compression": pa.string(),
    "batchOffset": pa.int64(),
    "position": pa.int64(),
}

# to_arrow() cuts a table into chunks of at most this many key/value/header bytes (a soft
# limit, checked between batches); Arrow's ``binary`` caps one chunk's column at 2 GiB.
_TABLE_CHUNK_BYTES = 1 << 30
# A Log source is read in fetches of this many bytes (whole batches).
# A local partition directory is read (and decoded) in runs of about this many bytes unless
# storage_options names a block_size; two runs are held at once, the next read ahead (in a
# helper thread) while this one decodes.  8 MiB: the run just read is still in the CPU's caches
# when it is decoded (64 MiB runs were 10-20 % slower uncompressed); 4 MiB runs made lz4 reads
# slower (bench/read_model_ab.py).
_DIR_READ_BYTES = 8 << 20


def _timestamp_type(unit: Optional[str]) -> Tuple[pa.DataType, int]:
    if unit is None or unit == "int64":
        return pa.int64(), 1
    if unit == "ms":
        return pa.timestamp("ms", tz="UTC"), 1
    if unit == "us":
        return pa.timestamp("us", tz="UTC"), 1000
    raise ValueError(f"timestamp_unit must be 'ms', 'us' or None (int64 ms), not {unit!r}")


def _column_names(columns: Optional[Sequence[str]], batch_metadata: bool) -> List[str]:
    if columns is None:
        names = list(DEFAULT_COLUMNS)
        if batch_metadata:
            names += METADATA_COLUMNS
        return names
    if isinstance(columns, str):
        raise TypeError("columns must be a sequence of column names, not a str")
    names = list(columns)
    for name in names:
        if name not in ALL_COLUMNS:
            raise ValueError(f"unknown column {name!r}; columns are {', '.join(ALL_COLUMNS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate column names in {names!r}")
    if batch_metadata:
        names += [m for m in METADATA_COLUMNS if m not in names]
    return names


def schema(
    columns: Optional[Sequence[str]] = None,
    *,
    timestamp_unit: Optional[str] = "ms",
    batch_metadata: bool = False,
) -> pa.Schema:
    """The Arrow schema :func:`to_arrow` returns for these arguments."""
    names = _column_names(columns, batch_metadata)
    ts_type, _ = _timestamp_type(timestamp_unit)
    return pa.schema([pa.field(n, ts_type if n == "timestamp" else _FIXED_TYPES[n]) for n in names])


# -- building arrays from a chunk ------------------------------------------------------------------
def _buf(b):
    return None if b is None else pa.py_buffer(b)


_BINARY = pa.binary()


def _binary(n, validity, offsets, data, nulls, typ=_BINARY):
    return pa.Array.from_buffers(
        typ, n, [_buf(validity), _buf(offsets), _buf(data)], null_count=nulls
    )


def _header_keys(c) -> pa.Array:
    nh = c.header_count
    if not c.header_key_invalid_utf8:
        return _binary(nh, None, c.header_key_offsets, c.header_key_data, 0, pa.string())
    raw = _binary(nh, None, c.header_key_offsets, c.header_key_data, 0)
    # Not UTF-8: decode as Java's String(bytes, UTF_8) does, with U+FFFD replacements.
    return pa.array([b.decode("utf-8", "replace") for b in raw.to_pylist()], pa.string())


def _chunk_to_batch(
    c, names: List[str], out_schema: pa.Schema, ts_type, seg: Source, null_unknown: bool = False
) -> pa.RecordBatch:
    n = c.num_rows
    arrays = []
    for name in names:
        if name == "offset":
            a = pa.Array.from_buffers(pa.int64(), n, [None, _buf(c.offset)], null_count=0)
        elif name == "timestamp":
            a = pa.Array.from_buffers(ts_type, n, [None, _buf(c.timestamp)], null_count=0)
        elif name == "timestampType":
            a = pa.Array.from_buffers(pa.int32(), n, [None, _buf(c.timestamp_type)], null_count=0)
        elif name == "key":
            a = _binary(n, c.key_validity, c.key_offsets, c.key_data, c.key_null_count)
        elif name == "value":
            a = _binary(n, c.value_validity, c.value_offsets, c.value_data, c.value_null_count)
        elif name == "headers":
            nh = c.header_count
            hv = _binary(
                nh,
                c.header_value_validity,
                c.header_value_offsets,
                c.header_value_data,
                c.header_value_null_count,
            )
            st = pa.StructArray.from_arrays([_header_keys(c), hv], fields=list(_HEADER_STRUCT))
            a = pa.Array.from_buffers(
                HEADERS_TYPE,
                n,
                [_buf(c.headers_validity), _buf(c.headers_offsets)],
                null_count=c.headers_null_count,
                children=[st],
            )
        elif name == "topic":
            if seg.topic is None and not null_unknown:
                raise ValueError("the topic is unknown for this source: pass topic=...")
            a = pa.repeat(pa.scalar(seg.topic, pa.string()), n)
        elif name == "partition":
            if seg.partition is None and not null_unknown:
                raise ValueError("the partition is unknown for this source: pass partition=...")
            a = pa.repeat(pa.scalar(seg.partition, pa.int32()), n)
        elif name == "producerId":
            a = pa.Array.from_buffers(pa.int64(), n, [None, _buf(c.producer_id)], null_count=0)
        elif name == "producerEpoch":
            a = pa.Array.from_buffers(pa.int16(), n, [None, _buf(c.producer_epoch)], null_count=0)
        elif name == "baseSequence":
            a = pa.Array.from_buffers(pa.int32(), n, [None, _buf(c.base_sequence)], null_count=0)
        elif name == "isTransactional":
            a = pa.Array.from_buffers(pa.bool_(), n, [None, _buf(c.is_transactional)], null_count=0)
        elif name == "isControl":
            a = pa.Array.from_buffers(pa.bool_(), n, [None, _buf(c.is_control)], null_count=0)
        elif name == "leaderEpoch":
            a = pa.Array.from_buffers(pa.int32(), n, [None, _buf(c.leader_epoch)], null_count=0)
        elif name == "compression":
            codes = pa.Array.from_buffers(pa.int8(), n, [None, _buf(c.compression)], null_count=0)
            a = _CODEC_NAMES.take(codes)
        elif name == "batchOffset":
            a = pa.Array.from_buffers(pa.int64(), n, [None, _buf(c.batch_offset)], null_count=0)
        elif name == "position":
            a = pa.Array.from_buffers(pa.int64(), n, [None, _buf(c.position)], null_count=0)
        else:  # pragma: no cover - names are validated
            raise AssertionError(name)
        arrays.append(a)
    return pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _bounded(rb: pa.RecordBatch, max_rows: Optional[int]) -> Iterator[pa.RecordBatch]:
    if max_rows is not None and rb.num_rows > max_rows:
        for i in range(0, rb.num_rows, max_rows):
            yield rb.slice(i, max_rows)
    else:
        yield rb


def _column_bits(names: Sequence[str]) -> int:
    bits = 0
    for name in names:
        bits |= _core.COLUMN_BITS.get(name, 0)
    return bits


def check_int_args(**args: Any) -> None:
    """TypeError for a non-integer, ValueError for an integer a signed 64-bit value cannot
    hold (``None`` passes: the defaults); finer checks are the decoders' own."""
    for name, v in args.items():
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, not {type(v).__name__}")
        if not -(2**63) <= v < 2**63:
            raise ValueError(f"{name} is out of range: {v}")


# -- reading ---------------------------------------------------------------------------------------
class SourceReader:
    """Decodes :class:`~kafkalog._sources.Source` s into record batches of the columns
    ``names``: the reading half of :func:`to_arrow` and :func:`iter_batches`, and of the scans
    of :class:`kafkalog.dataset.KafkaLogDataset`.  The options are :func:`to_arrow`'s, checked
    by the caller.  ``with_offsets``: decode the offset column even when not asked for (rows
    are filtered by offset: an offset range, a partition's log start and end); it is not in
    the batches then.  ``on_fetch(source, ranges)`` (optional) is told the offset ranges read
    of each partition directory or ``Log``, as the storage read model chose them.
    ``null_unknown``: a source whose topic or partition is not known gives nulls in those
    columns (else asking for them raises ValueError)."""

    def __init__(self, names: List[str], *, check_crcs: bool, include_control: bool,
                 read_committed: bool, aborted_transactions: Optional[Iterable],
                 timestamp_unit: Optional[str], max_batch_size: Optional[int],
                 max_decompressed_size: int, max_rows: Optional[int], max_bytes: Optional[int],
                 start_position: int = 0, stop_position: Optional[int] = None,
                 start_offset: Optional[int] = None, end_offset: Optional[int] = None,
                 storage_options: Optional[Dict[str, Any]] = None, with_offsets: bool = True,
                 on_fetch: Optional[Any] = None, null_unknown: bool = False) -> None:
        self.names = names
        self.null_unknown = null_unknown
        self.ts_type, self.scale = _timestamp_type(timestamp_unit)
        self.schema = schema(names, timestamp_unit=timestamp_unit)
        self.dnames = names if (not with_offsets or "offset" in names) else names + ["offset"]
        self.d_schema = self.schema if self.dnames is names else schema(
            self.dnames, timestamp_unit=timestamp_unit)
        self.bits = _column_bits(self.dnames)
        self.check_crcs = check_crcs
        self.include_control = include_control
        self.read_committed = read_committed
        self.aborted_transactions = aborted_transactions
        self.max_batch_size = max_batch_size
        self.max_decompressed_size = max_decompressed_size
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.start_position = start_position
        self.stop_position = stop_position
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.storage_options = storage_options
        self.on_fetch = on_fetch
        self._txn_cache: Dict[str, list] = {}

    def batches(self, sources: Sequence[Source]) -> Iterator[pa.RecordBatch]:
        """The batches of every source, in order."""
        for src in sources:
            yield from self.read(src)

    def read(self, src: Source, wanted: Optional[Sequence[Tuple[Optional[int], Optional[int]]]]
             = None, min_timestamp: Optional[int] = None) -> Iterator[pa.RecordBatch]:
        """The batches of one source.  ``wanted``: the offset ranges ``[lo, hi)`` to read
        (``None``: ``start_offset``/``end_offset``); ``min_timestamp`` (ms): rows with smaller
        timestamps are not wanted (a partition is then read from the first offset the time
        index allows, and its segments holding only older records are skipped).  Rows
        outside ``wanted`` are not returned; rows older than ``min_timestamp`` may be."""
        if wanted is None:
            wanted = [(self.start_offset, self.end_offset)]
        if src.log is not None:
            # an open Log: its own read model (its live segments), as a directory is read
            if self.start_position or self.stop_position is not None:
                raise ValueError(
                    "start_position/stop_position do not apply to a Log; use its offsets")
            return self._from_model(src.log.view, src, wanted, min_timestamp)
        if src.directory is not None:
            return self._from_view(src, wanted, min_timestamp)
        return self._from_buffer(src, wanted)

    def _decoder(self, aborted) -> Any:
        return _core.Decoder(
            self.bits,
            check_crcs=self.check_crcs,
            include_control=self.include_control,
            max_batch_size=self.max_batch_size,
            max_decompressed_size=self.max_decompressed_size,
            timestamp_scale=self.scale,
            aborted=aborted,
        )

    def _emit(self, c, src: Source, base: int, lo, hi) -> Iterator[pa.RecordBatch]:
        dnames = self.dnames
        d_schema = self.d_schema
        rb = _chunk_to_batch(c, dnames, d_schema, self.ts_type, src, self.null_unknown)
        if base and "position" in dnames:
            i = dnames.index("position")
            rb = rb.set_column(i, d_schema.field(i), pc.add(rb.column(i), base))
        if (lo is not None or hi is not None) and rb.num_rows:
            offs = rb.column(dnames.index("offset"))
            # one pass for the common case, a chunk wholly inside the range
            mm = pc.min_max(offs)
            if (lo is not None and mm["min"].as_py() < lo) or (
                    hi is not None and mm["max"].as_py() >= hi):
                mask = None
                if lo is not None:
                    mask = pc.greater_equal(offs, lo)
                if hi is not None:
                    m2 = pc.less(offs, hi)
                    mask = m2 if mask is None else pc.and_(mask, m2)
                rb = rb.filter(mask)
        if dnames is not self.names:
            rb = pa.RecordBatch.from_arrays(rb.columns[: len(self.names)], schema=self.schema)
        if rb.num_rows == 0:
            return
        yield from _bounded(rb, self.max_rows)

    def _decode_all(self, dec, buf, src: Source, path, base: int, start: int, stop, lo, hi
                    ) -> Iterator[pa.RecordBatch]:
        max_rows = self.max_rows
        max_bytes = self.max_bytes
        emit = self._emit
        pos = start
        while True:
            try:
                c = dec.decode(buf, pos, stop, max_rows, max_bytes)
            except KafkaLogError as e:
                e.located(path, base)
                raise
            if c.num_rows:
                yield from emit(c, src, base, lo, hi)
            if c.done or c.next_position == pos:
                break
            pos = c.next_position

    def _from_view(self, src: Source, wanted, min_timestamp) -> Iterator[pa.RecordBatch]:
        # a partition directory: the storage read model says what the log is
        if self.start_position or self.stop_position is not None:
            raise ValueError("start_position/stop_position need a single buffer or segment file")
        from .storage.log import open_view

        with open_view(src.directory, src.fs) as view:
            yield from self._from_model(view, src, wanted, min_timestamp)

    def _from_model(self, view, src: Source, wanted, min_timestamp) -> Iterator[pa.RecordBatch]:
        # what the read model answers: log start, end, last stable offset, aborted
        # transactions, the ranges a timestamp bound leaves, and the bytes of each range
        ranges = fetch_ranges(view, wanted, read_committed=self.read_committed,
                              min_timestamp=min_timestamp)
        if self.on_fetch is not None:
            self.on_fetch(src, ranges)
        if not ranges:
            return
        aborted = None
        if self.read_committed:
            given = self.aborted_transactions
            aborted = (list(given) if given is not None
                       else [(t.producer_id, t.first_offset, t.last_offset)
                             for t in view.collect_aborted_transactions(ranges[0][0],
                                                                        ranges[-1][1])])
        dec = self._decoder(aborted)
        # borrowed: each run is a view into a buffer the scan reuses, valid until the scan
        # resumes; the decoder copies what it keeps, and the scan is closed (its read-ahead
        # ended) before the view closes the files
        so = self.storage_options or {}
        local = src.fs is None or src.fs.is_local()
        run_bytes = _DIR_READ_BYTES if local and "block_size" not in so else block_size(so)
        for lo, hi in ranges:
            runs = view.chunks(lo, hi, run_bytes, borrow=True)
            try:
                for path, base, buf in runs:
                    yield from self._decode_all(dec, buf, src, path, base, 0, None, lo, hi)
            finally:
                runs.close()

    def _loose_aborted(self, src: Source, buf) -> Optional[list]:
        # a segment file or bytes without their log: the ABORT markers in the data
        if not self.read_committed:
            return None
        if self.aborted_transactions is not None:
            return list(self.aborted_transactions)
        from .control import aborted_by_markers

        found = aborted_by_markers(buf, self.start_position or 0, self.stop_position)
        if src.path is not None:  # a segment file of a partition: also its log's indexes
            from .storage.fs import LOCAL, parent
            from .storage.log import open_view

            d = parent(src.path) if src.fs is not None else os.path.dirname(
                os.path.abspath(src.path))
            cache = self._txn_cache
            if d not in cache:
                try:
                    with open_view(d, src.fs or LOCAL) as view:
                        cache[d] = [
                            (t.producer_id, t.first_offset, t.last_offset)
                            for t in view.collect_aborted_transactions(view.log_start_offset,
                                                                       view.log_end_offset)]
                except (KafkaLogError, OSError):  # not a loadable partition: the markers only
                    cache[d] = []
            found += cache[d]
        return found

    def _from_buffer(self, src: Source, wanted) -> Iterator[pa.RecordBatch]:
        # a buffer, or a loose segment file (mapped): rows kept within the wanted span
        lo, hi = wanted[0][0], wanted[-1][1]
        with Opened(src) as buf:
            dec = self._decoder(self._loose_aborted(src, buf))
            yield from self._decode_all(dec, buf, src, src.path, 0, self.start_position or 0,
                                        self.stop_position, lo, hi)


def _default_names(batch_metadata: bool, listed: bool) -> List[str]:
    """``to_arrow``'s columns when none are asked for: with ``topic`` and ``partition`` (in
    Spark's order) when partitions were found by listing a root or matching a glob."""
    names = list(SPARK_COLUMNS + ("headers",) if listed else DEFAULT_COLUMNS)
    if batch_metadata:
        names += METADATA_COLUMNS
    return names


def _open_read(source, columns, *, check_crcs, include_control, read_committed,
               aborted_transactions, timestamp_unit, batch_metadata, max_batch_size,
               max_decompressed_size, topic, partition, start_position, stop_position,
               max_rows, max_bytes, start_offset, end_offset, storage_options, topics,
               topic_pattern, partitions, include_internal_topics
               ) -> Tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """What :func:`to_arrow` and :func:`iter_batches` share: the arguments checked, the sources
    resolved (now), and their batches (decoded as they are iterated)."""
    check_int_args(
        max_batch_size=max_batch_size,
        max_decompressed_size=max_decompressed_size,
        partition=partition,
        start_position=start_position,
        stop_position=stop_position,
        max_rows=max_rows,
        max_bytes=max_bytes,
        start_offset=start_offset,
        end_offset=end_offset,
    )
    if columns is not None:
        names = _column_names(columns, batch_metadata)
    _timestamp_type(timestamp_unit)
    selection = TopicSelection.parse(topics, topic_pattern, partitions, include_internal_topics)
    sources = resolve(source, topic, partition, storage_options, selection)
    if columns is None:
        names = _default_names(batch_metadata, any(s.listed for s in sources))
    # rows are filtered by offset (an offset range, a partition's log start and end): decode
    # the offset column even when not asked for
    pruned = start_offset is not None or end_offset is not None \
        or any(s.directory is not None for s in sources)
    if (start_position or stop_position is not None) and len(sources) != 1:
        raise ValueError("start_position/stop_position need a single buffer or segment file")
    for s in sources:
        if topic is not None:
            s.topic = topic
        if partition is not None:
            s.partition = partition
    if max_rows is not None and max_rows < 1:
        raise ValueError("max_rows must be >= 1")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError("max_bytes must be >= 1")
    reader = SourceReader(
        names, check_crcs=check_crcs, include_control=include_control,
        read_committed=read_committed, aborted_transactions=aborted_transactions,
        timestamp_unit=timestamp_unit, max_batch_size=max_batch_size,
        max_decompressed_size=max_decompressed_size, max_rows=max_rows, max_bytes=max_bytes,
        start_position=start_position, stop_position=stop_position, start_offset=start_offset,
        end_offset=end_offset, storage_options=storage_options, with_offsets=pruned)
    return reader.schema, reader.batches(sources)


_SELECTION_DOC = """
    Partitions found by listing a log root or matching a glob (``/var/kafka/orders-*``) are
    picked as the Spark source picks them: ``topics`` (a list of names: these topics, internal
    ones included), ``topic_pattern`` (a regular expression found anywhere in the topic name),
    ``partitions`` (partition numbers, or ``{topic: [partitions]}`` as Spark's ``assign``); the
    internal topics (Kafka's four: ``storage.files.INTERNAL_TOPICS``) are left out unless
    ``include_internal_topics`` or named.  A partition directory or segment file given by path
    is read whatever its topic, unless ``topics``/``topic_pattern``/``partitions`` leave it out.
"""


def to_arrow(
    source: Any,
    columns: Optional[Sequence[str]] = None,
    *,
    check_crcs: bool = True,
    include_control: bool = False,
    read_committed: bool = False,
    aborted_transactions: Optional[Iterable] = None,
    timestamp_unit: Optional[str] = "ms",
    batch_metadata: bool = False,
    max_batch_size: Optional[int] = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    topic: Optional[str] = None,
    partition: Optional[int] = None,
    start_position: int = 0,
    stop_position: Optional[int] = None,
    start_offset: Optional[int] = None,
    end_offset: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    topics: Optional[Union[str, Sequence[str]]] = None,
    topic_pattern: Optional[Any] = None,
    partitions: Optional[Any] = None,
    include_internal_topics: bool = False,
) -> pa.Table:
    """Decode every record of ``source`` into a :class:`pyarrow.Table` (see the module doc).

    ``columns`` picks and orders the columns (default: key, value, offset, timestamp,
    timestampType, headers; for a log root or a glob, key, value, topic, partition, offset,
    timestamp, timestampType, headers); ``batch_metadata=True`` appends the batch columns.
    ``start_position``/``stop_position`` (single buffer or file) decode only the entries that
    start in that byte range.  ``aborted_transactions`` (``(producer_id, first_offset,
    last_offset)`` tuples or ``AbortedTxn``) replaces the transaction indexes and markers for
    ``read_committed``.  ``max_batch_size`` rejects larger entries
    (:class:`~kafkalog.RecordTooLargeError`); ``max_decompressed_size`` bounds one batch's
    decompressed size (:class:`~kafkalog.DecompressedSizeError`).  ``topic``/``partition``
    label the rows (replacing what a directory name says).

    ``source`` may also be a URI: ``file://``, or ``s3://``, ``gs://``, ``hdfs://``,
    ``abfs://`` (a segment file, a partition directory or a log root; see docs/remote.md),
    read with ranged reads of ``storage_options["block_size"]`` bytes; ``storage_options``
    configures the store (endpoint, credentials, retries, timeouts; kafkalog's own keys are
    checked before any request).  ``start_offset``/``end_offset`` keep the
    records with ``start_offset <= offset < end_offset``; with a partition directory the
    segments and the offset index are used to read only the byte ranges that can hold them.
    """
    out_schema, batches = _open_read(
        source, columns, check_crcs=check_crcs, include_control=include_control,
        read_committed=read_committed, aborted_transactions=aborted_transactions,
        timestamp_unit=timestamp_unit, batch_metadata=batch_metadata,
        max_batch_size=max_batch_size, max_decompressed_size=max_decompressed_size,
        topic=topic, partition=partition, start_position=start_position,
        stop_position=stop_position, max_rows=None, max_bytes=_TABLE_CHUNK_BYTES,
        start_offset=start_offset, end_offset=end_offset, storage_options=storage_options,
        topics=topics, topic_pattern=topic_pattern, partitions=partitions,
        include_internal_topics=include_internal_topics)
    return pa.Table.from_batches(list(batches), schema=out_schema)


to_arrow.__doc__ = (to_arrow.__doc__ or "") + _SELECTION_DOC


def iter_batches(
    source: Any,
    columns: Optional[Sequence[str]] = None,
    *,
    max_rows: Optional[int] = 65536,
    max_bytes: Optional[int] = 64 * 1024 * 1024,
    check_crcs: bool = True,
    include_control: bool = False,
    read_committed: bool = False,
    aborted_transactions: Optional[Iterable] = None,
    timestamp_unit: Optional[str] = "ms",
    batch_metadata: bool = False,
    max_batch_size: Optional[int] = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    topic: Optional[str] = None,
    partition: Optional[int] = None,
    start_position: int = 0,
    stop_position: Optional[int] = None,
    start_offset: Optional[int] = None,
    end_offset: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    topics: Optional[Union[str, Sequence[str]]] = None,
    topic_pattern: Optional[Any] = None,
    partitions: Optional[Any] = None,
    include_internal_topics: bool = False,
) -> pa.RecordBatchReader:
    """Like :func:`to_arrow`, as a stream of :class:`pyarrow.RecordBatch` es of at most
    ``max_rows`` rows: a :class:`pyarrow.RecordBatchReader` (iterate it, or hand it to anything
    that takes an Arrow stream through ``__arrow_c_stream__``: DuckDB, Polars, pandas,
    DataFusion), decoded as it is read, in bounded memory.

    ``max_bytes`` bounds the key/value/header bytes of a batch: a batch ends after the Kafka
    batch that reaches it (so a batch may exceed it by one Kafka batch).  Decoding happens as
    the stream advances; for files, one segment is mapped at a time.  The sources are resolved
    (and the arguments checked) when it is called.
    """
    out_schema, batches = _open_read(
        source, columns, check_crcs=check_crcs, include_control=include_control,
        read_committed=read_committed, aborted_transactions=aborted_transactions,
        timestamp_unit=timestamp_unit, batch_metadata=batch_metadata,
        max_batch_size=max_batch_size, max_decompressed_size=max_decompressed_size,
        topic=topic, partition=partition, start_position=start_position,
        stop_position=stop_position, max_rows=max_rows, max_bytes=max_bytes,
        start_offset=start_offset, end_offset=end_offset, storage_options=storage_options,
        topics=topics, topic_pattern=topic_pattern, partitions=partitions,
        include_internal_topics=include_internal_topics)
    return pa.RecordBatchReader.from_batches(out_schema, batches)


iter_batches.__doc__ = (iter_batches.__doc__ or "") + _SELECTION_DOC


# -- encoding --------------------------------------------------------------------------------------
def _column(table, name: str):
    if name not in table.schema.names:
        return None
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def _fixed_desc(arr: pa.Array, typ: pa.DataType):
    if arr.type != typ:
        arr = arr.cast(typ)
    bufs = arr.buffers()
    return (bufs[0], bufs[1], arr.offset), arr


def _binary_desc(arr: pa.Array):
    if not pa.types.is_binary(arr.type):
        arr = arr.cast(pa.binary())
    bufs = arr.buffers()
    return (bufs[0], bufs[1], bufs[2], arr.offset), arr


_ENC_HEADERS = pa.list_(pa.struct([pa.field("key", pa.binary()), pa.field("value", pa.binary())]))


def _headers_desc(arr: pa.Array):
    t = arr.type
    if pa.types.is_null(t):
        return None, arr
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(
        t.value_type
    ):
        raise TypeError(f"headers must be list<struct<key, value>>, not {t}")
    st = t.value_type
    if st.get_field_index("key") < 0 or st.get_field_index("value") < 0:
        raise TypeError(f"headers must be list<struct<key, value>>, not {t}")
    if t != _ENC_HEADERS:
        arr = arr.cast(_ENC_HEADERS)
    values = arr.values
    k = values.field("key")
    v = values.field("value")
    kb = k.buffers()
    vb = v.buffers()
    desc = (
        arr.buffers()[0],
        arr.buffers()[1],
        arr.offset,
        values.buffers()[0],
        values.offset,
        (kb[0], kb[1], kb[2], k.offset),
        (vb[0], vb[1], vb[2], v.offset),
    )
    return desc, arr


def _timestamp_desc(arr: pa.Array):
    t = arr.type
    if pa.types.is_timestamp(t):
        if t.unit != "ms":
            arr = arr.cast(pa.timestamp("ms", tz=t.tz), safe=False)
        arr = arr.view(pa.int64())
    elif pa.types.is_date(t):
        arr = arr.cast(pa.timestamp("ms")).view(pa.int64())
    elif not pa.types.is_integer(t):
        raise TypeError(f"timestamp must be a timestamp or an integer (ms), not {t}")
    return _fixed_desc(arr, pa.int64())


def from_arrow(
    table: Any,
    *,
    compression: Union[int, str, CompressionType] = "none",
    compression_level: Optional[int] = None,
    batch_bytes: int = 1024 * 1024,
    batch_records: Optional[int] = None,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = 0,
) -> bytes:
    """Encode a table (or record batch) into v2 record batches, returned as one ``bytes``.

    The columns are :func:`to_arrow`'s; only ``value``, ``key``, ``offset``, ``timestamp``,
    ``timestampType`` and ``headers`` are used, each optional: absent offsets are assigned from
    ``base_offset`` (present offsets must increase), absent or null timestamps are -1, key and
    value may be binary or string, header values binary or string.  Batches are cut where the
    next record would take the uncompressed batch past ``batch_bytes`` (61-byte header
    included; every batch holds at least one record), after ``batch_records`` records, where
    ``timestampType`` changes (1 = LogAppendTime batches, whose records then all report the
    batch's timestamp), and where an offset delta would overflow int32.  Each batch is byte for
    byte what :class:`~kafkalog.MemoryRecordsBuilder` builds for its records with the same
    options; ``base_sequence`` (if not -1) numbers the records across batches, as a producer.
    ``from_arrow(to_arrow(x))`` decodes to the same records as ``x``.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise TypeError(f"table must be a pyarrow.Table or RecordBatch, not {type(table).__name__}")
    check_int_args(
        compression_level=compression_level,
        batch_bytes=batch_bytes,
        batch_records=batch_records,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )
    codec = int(CompressionType.parse(compression))
    n = table.num_rows
    keep = []
    off = _column(table, "offset")
    ts = _column(table, "timestamp")
    tt = _column(table, "timestampType")
    key = _column(table, "key")
    value = _column(table, "value")
    hdr = _column(table, "headers")
    off_d = ts_d = tt_d = key_d = val_d = hdr_d = None
    if off is not None:
        off_d, a = _fixed_desc(off, pa.int64())
        keep.append(a)
    if ts is not None:
        ts_d, a = _timestamp_desc(ts)
        keep.append(a)
    if tt is not None:
        tt_d, a = _fixed_desc(tt, pa.int32())
        keep.append(a)
    if key is not None:
        key_d, a = _binary_desc(key)
        keep.append(a)
    if value is not None:
        val_d, a = _binary_desc(value)
        keep.append(a)
    if hdr is not None:
        hdr_d, a = _headers_desc(hdr)
        keep.append(a)
    return _encoder.encode(
        n,
        off_d,
        ts_d,
        tt_d,
        key_d,
        val_d,
        hdr_d,
        base_offset=base_offset,
        compression=codec,
        compression_level=compression_level,
        batch_bytes=batch_bytes,
        batch_records=2**31 - 1 if batch_records is None else batch_records,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        partition_leader_epoch=partition_leader_epoch,
    )


def write_arrow(log: Any, table: Any, *, preserve_offsets: Optional[bool] = None, **options) -> int:
    """Append a table to a :class:`kafkalog.storage.log.Log` as v2 batches; returns the records
    written.

    The records keep the table's ``offset`` column when there is one (``preserve_offsets``,
    default: whether the column exists; they must lie at or after the log end offset and
    increase), else they get the log's next offsets.  The batches are appended with
    :meth:`~kafkalog.storage.log.Log.append_as_follower` (offsets already assigned, as a replica
    appends), in groups that fit a segment, so the log rolls segments and maintains its
    indexes and producer state as usual.  ``options`` are :func:`from_arrow`'s
    (``compression``, ``batch_bytes`` - keep it under the log's ``max.message.bytes`` -,
    ``batch_records``, producer fields, ``partition_leader_epoch``).
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if preserve_offsets is None:
        preserve_offsets = "offset" in table.schema.names
    if not preserve_offsets:
        if "offset" in table.schema.names:
            table = table.drop_columns(["offset"])
        options["base_offset"] = int(log.log_end_offset)
    data = from_arrow(table, **options)
    if not data:
        return 0
    config = getattr(log, "config", None)
    group_limit = min(int(getattr(config, "segment_size", 1 << 30) or (1 << 30)), 64 << 20)
    append = getattr(log, "append_as_follower", None)
    if append is None:
        raise TypeError(
            f"{type(log).__name__} has no append_as_follower(); pass a kafkalog.storage.log.Log"
        )
    start = pos = 0
    n = len(data)
    while pos < n:
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos > start and pos + size - start > group_limit:
            append(memoryview(data)[start:pos])
            start = pos
        pos += size
    append(memoryview(data)[start:])
    return table.num_rows
