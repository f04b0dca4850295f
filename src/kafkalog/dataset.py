"""Kafka logs as a lazy Arrow dataset that DuckDB, Polars and pyarrow scan with projection and
filter pushdown.

::

    import duckdb, polars as pl, kafkalog

    orders = kafkalog.dataset("/var/kafka", topics=["orders"])     # or s3://bucket/root, a glob
    duckdb.sql('''select partition, count(*) from orders
                  where "offset" >= 1000 and timestamp >= '2024-05-01' group by 1''')
    pl.scan_pyarrow_dataset(orders).filter(pl.col("partition") == 3).select("value").collect()
    orders.to_table(columns=["offset"], filter=pc.field("partition").isin([0, 1]))

:func:`dataset` lists the partitions once (as the Spark source discovers them: topics, pattern,
partitions, internal topics left out, globs) and returns a :class:`KafkaLogDataset`, a
:class:`pyarrow.dataset.Dataset` (DuckDB hands its columns and filters to such objects through
``scanner(columns=, filter=)``; Polars' ``scan_pyarrow_dataset`` through ``to_batches``).  Each
scan opens the partitions' read models anew (appends made since are seen) and:

* decodes only the columns asked for and those the filter reads (keys, values and headers not
  asked for are never copied);
* reads the filter for ``topic``, ``partition``, ``offset`` and ``timestamp`` (comparisons,
  ranges, ``IN`` lists, ``and``/``or``, as DuckDB and Polars hand them over;
  :mod:`kafkalog._pushdown`): partitions whose topic or number cannot pass are not opened,
  offsets outside the filter's ranges are not read (the offset index finds where each range
  starts and ends), and a lower bound on ``timestamp`` starts each partition at the offset the
  time index gives and skips the segments holding only older records
  (:func:`kafkalog.storage.selection.fetch_ranges`);
* applies the whole filter to the rows it decoded: the result is exactly the filter's, whatever
  was pushed.

:meth:`KafkaLogScanner.to_reader` is a :class:`pyarrow.RecordBatchReader` (``__arrow_c_stream__``):
anything that takes an Arrow stream consumes a scan in bounded memory.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Dict, Generator, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as _ds

from . import _pushdown
from . import arrow as _arrow
from ._format import DEFAULT_MAX_DECOMPRESSED_SIZE
from ._sources import Source, resolve
from .storage.selection import TopicSelection

__all__ = ["dataset", "KafkaLogDataset", "KafkaLogScanner", "Fetch"]

#: Rows per batch when the caller names no ``batch_size`` (pyarrow's scanners use 131,072).
DEFAULT_BATCH_SIZE = 131_072
_BATCH_BYTES = 64 << 20


class Fetch(NamedTuple):
    """One offset range ``[start, end)`` of one partition that a scan read, as the storage
    read model chose it."""

    topic: Optional[str]
    partition: Optional[int]
    start: int
    end: int


def _field_type(name: str, timestamp_unit: Optional[str]) -> pa.DataType:
    return _arrow.schema([name], timestamp_unit=timestamp_unit).field(0).type


class KafkaLogScanner:
    """One scan of a :class:`KafkaLogDataset`: the columns and filter it was given, what of the
    filter it pushes (:attr:`pushdown`, :attr:`partitions`), and its rows, as pyarrow's
    ``Scanner`` gives them (:meth:`to_reader`, :meth:`to_batches`, :meth:`to_table`,
    :meth:`head`, :meth:`count_rows`).  Nothing is read until rows are asked for; each of
    those calls reads anew.  :attr:`fetches` lists the offset ranges the last read fetched."""

    def __init__(self, ds: "KafkaLogDataset", columns: Optional[Sequence[str]] = None,
                 filter: Optional[pc.Expression] = None,
                 batch_size: Optional[int] = None) -> None:
        self._ds = ds
        full = ds.schema
        if columns is None:
            names = list(full.names)
        elif isinstance(columns, dict):
            raise TypeError("columns as {name: expression} is not supported by kafkalog's "
                            "dataset; pass a list of column names")
        elif isinstance(columns, str):
            raise TypeError("columns must be a list of column names, not a str")
        else:
            names = list(columns)
            for n in names:
                if n not in full.names:
                    raise ValueError(f"no column {n!r} in the dataset; columns are "
                                     f"{', '.join(full.names)}")
        if ds._filter is not None:
            filter = ds._filter if filter is None else (ds._filter & filter)
        if filter is not None and not isinstance(filter, pc.Expression):
            raise TypeError(f"filter must be a pyarrow.compute.Expression, not "
                            f"{type(filter).__name__}")
        if batch_size is not None:
            _arrow.check_int_args(batch_size=batch_size)
            if batch_size < 1:
                raise ValueError("batch_size must be >= 1")
        self.columns: List[str] = names
        self.filter: Optional[pc.Expression] = filter
        self.batch_size = batch_size or DEFAULT_BATCH_SIZE
        self.projected_schema: pa.Schema = pa.schema([full.field(n) for n in names])
        self.dataset_schema: pa.Schema = full
        ts_type = full.field("timestamp").type
        pushed = _pushdown.analyze(filter, ts_type)
        refs = _pushdown.field_names(filter)
        if refs is None or any(r not in full.names for r in refs):
            # a nested reference, or a column the dataset lacks: decode every column and let
            # pyarrow say what is wrong with the filter
            refs = [] if filter is None else list(full.names)
        #: What of the filter the scan pushes into the read (None: nothing: a filter form
        #: kafkalog does not read); the whole filter is applied to the rows decoded anyway.
        self.pushdown: Optional[_pushdown.Pushdown] = pushed
        self._decode = names + [r for r in refs if r not in names]
        #: The offset ranges of each partition the last read fetched.
        self.fetches: List[Fetch] = []

    # -- what is read --------------------------------------------------------------------------
    @property
    def partitions(self) -> List[Tuple[Optional[str], Optional[int]]]:
        """``(topic, partition)`` of each source the scan reads (the others were pruned by the
        filter before anything of them was opened)."""
        return [(s.topic, s.partition) for s in self._sources()]

    def _sources(self) -> List[Source]:
        pushed = self.pushdown
        if pushed is None:
            return list(self._ds._sources)
        return [s for s in self._ds._sources if pushed.keeps(s.topic, s.partition)]

    def _wanted(self):
        pushed = self.pushdown
        if pushed is None or pushed.offsets is None:
            return None
        return pushed.offsets.ranges()

    def _reader(self, names: List[str]) -> "_arrow.SourceReader":
        o = self._ds._options
        self.fetches = []
        fetches = self.fetches

        def on_fetch(src: Source, ranges) -> None:
            fetches.extend(Fetch(src.topic, src.partition, lo, hi) for lo, hi in ranges)

        return _arrow.SourceReader(
            names, check_crcs=o["check_crcs"], include_control=o["include_control"],
            read_committed=o["read_committed"], aborted_transactions=None,
            timestamp_unit=o["timestamp_unit"], max_batch_size=o["max_batch_size"],
            max_decompressed_size=o["max_decompressed_size"], max_rows=self.batch_size,
            max_bytes=_BATCH_BYTES, storage_options=o["storage_options"], with_offsets=True,
            on_fetch=on_fetch, null_unknown=True)

    def _batches(self, names: Optional[List[str]] = None
                 ) -> Generator[pa.RecordBatch, None, None]:
        """The rows that pass the filter, as batches of ``names`` (default: the projection)."""
        out = self.columns if names is None else names
        decode = out + [r for r in self._decode if r not in out]
        if not decode:  # no column at all (a count): the smallest one
            decode = ["offset"]
        reader = self._reader(decode)
        pushed = self.pushdown
        never = pushed is not None and pushed.never
        wanted = self._wanted()
        min_ts = None if pushed is None else pushed.min_timestamp
        flt = None if self.filter is None else _pushdown.row_filter(self.filter)
        out_schema = pa.schema([self.dataset_schema.field(n) for n in out])
        select = None if decode == out else list(range(len(out)))
        if never:
            return
        for src in self._sources():
            for rb in reader.read(src, wanted, min_ts):
                if flt is not None:
                    rb = flt(rb)
                    if rb.num_rows == 0:
                        continue
                if select is not None:
                    if out:
                        rb = pa.RecordBatch.from_arrays(
                            [rb.column(i) for i in select], schema=out_schema)
                    else:
                        rb = _empty_rows(rb.num_rows)
                yield rb

    # -- pyarrow's Scanner -----------------------------------------------------------------------
    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as a :class:`pyarrow.RecordBatchReader`, decoded as it is read."""
        return pa.RecordBatchReader.from_batches(self.projected_schema, self._batches())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as record batches of at most ``batch_size`` rows."""
        return iter(self.to_reader())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self._batches()), schema=self.projected_schema)

    def head(self, num_rows: int) -> pa.Table:
        """The first ``num_rows`` rows (reading stops there)."""
        _arrow.check_int_args(num_rows=num_rows)
        if num_rows < 0:
            raise ValueError("num_rows must be >= 0")
        got: List[pa.RecordBatch] = []
        left = num_rows
        if left:
            it = self._batches()
            try:
                for rb in it:
                    got.append(rb.slice(0, left))
                    left -= got[-1].num_rows
                    if left <= 0:
                        break
            finally:
                it.close()
        return pa.Table.from_batches(got, schema=self.projected_schema)

    def count_rows(self) -> int:
        """The number of rows that pass the filter (only the columns the filter reads, and
        the offsets, are decoded)."""
        return sum(rb.num_rows for rb in self._batches([]))

    def take(self, indices: Any) -> pa.Table:
        """The rows at ``indices`` (reads the scan's rows)."""
        return self.to_table().take(indices)

    def scan_batches(self) -> Iterator[Any]:
        raise NotImplementedError("KafkaLogScanner has no fragments: use to_batches()")


def _empty_rows(n: int) -> pa.RecordBatch:
    """A batch of ``n`` rows and no column."""
    return pa.RecordBatch.from_struct_array(pa.array([{}] * n, pa.struct([])))


class KafkaLogDataset(_ds.Dataset):
    """Kafka logs (partition directories, log roots, segment files, in a store or not) as a
    :class:`pyarrow.dataset.Dataset`: see the module doc.  Made by :func:`dataset`.

    It subclasses pyarrow's ``Dataset`` so that DuckDB scans it with its projection and
    filters (DuckDB checks ``isinstance(obj, pyarrow.dataset.Dataset)``, then calls
    :meth:`scanner` and reads :attr:`schema`); it holds no C++ dataset: every method pyarrow's
    ``Dataset`` has is either implemented here or raises NotImplementedError."""

    def __init__(self, source: Any, options: Dict[str, Any], sources: List[Source],
                 filter: Optional[pc.Expression] = None) -> None:
        # pyarrow's Dataset.__init__ is not called: it refuses direct construction, and this
        # class overrides what it would set up
        self._source = source
        self._options = options
        self._sources = sources
        self._filter = filter
        names = list(_arrow.SPARK_COLUMNS)
        if options["include_headers"]:
            names.append("headers")
        if options["batch_metadata"]:
            names += _arrow.METADATA_COLUMNS
        self._schema = _arrow.schema(names, timestamp_unit=options["timestamp_unit"])

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        """The dataset's columns: spark-sql-kafka's (``key``, ``value``, ``topic``,
        ``partition``, ``offset``, ``timestamp``, ``timestampType``), then ``headers`` and, with
        ``batch_metadata``, the batch columns (see docs/arrow.md)."""
        return self._schema

    @property
    def partition_expression(self) -> pc.Expression:  # type: ignore[override]
        return pc.scalar(True)

    @property
    def sources(self) -> List[Tuple[Optional[str], Optional[int], str]]:
        """``(topic, partition, location)`` of every partition directory, segment file or
        buffer the dataset reads, in reading order."""
        return [(s.topic, s.partition, s.directory or s.path or "<buffer>")
                for s in self._sources]

    def __repr__(self) -> str:
        return (f"<kafkalog.dataset.KafkaLogDataset: {len(self._sources)} source(s) of "
                f"{self._source!r}>")

    def __reduce__(self):
        return (_rebuild, (self._source, self._options, self._filter))

    def scanner(self, columns: Optional[Sequence[str]] = None,  # type: ignore[override]
                filter: Optional[pc.Expression] = None, batch_size: Optional[int] = None,
                **_ignored: Any) -> KafkaLogScanner:
        """A scan of ``columns`` (default: all) of the rows passing ``filter``; pyarrow's other
        scanner options (threads, read-ahead, memory pool...) are accepted and ignored."""
        return KafkaLogScanner(self, columns, filter, batch_size)

    def to_reader(self, **kwargs: Any) -> pa.RecordBatchReader:
        return self.scanner(**kwargs).to_reader()

    def to_batches(self, **kwargs: Any) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return self.scanner(**kwargs).to_batches()

    def to_table(self, **kwargs: Any) -> pa.Table:  # type: ignore[override]
        return self.scanner(**kwargs).to_table()

    def head(self, num_rows: int, **kwargs: Any) -> pa.Table:  # type: ignore[override]
        return self.scanner(**kwargs).head(num_rows)

    def count_rows(self, **kwargs: Any) -> int:  # type: ignore[override]
        return self.scanner(**kwargs).count_rows()

    def take(self, indices: Any, **kwargs: Any) -> pa.Table:  # type: ignore[override]
        return self.scanner(**kwargs).take(indices)

    def filter(self, expression: pc.Expression) -> "KafkaLogDataset":  # type: ignore[override]
        """The same dataset with ``expression`` applied to every scan (and pushed as a scan's
        own filter is)."""
        if not isinstance(expression, pc.Expression):
            raise TypeError(f"filter must be a pyarrow.compute.Expression, not "
                            f"{type(expression).__name__}")
        combined = expression if self._filter is None else (self._filter & expression)
        return KafkaLogDataset(self._source, self._options, self._sources, combined)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.scanner().__arrow_c_stream__(requested_schema)


def _unsupported(name: str):
    def method(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"KafkaLogDataset.{name} is not supported: scan it (scanner, "
                                  "to_table, to_batches) or load it into pyarrow first")

    method.__name__ = name
    return method


# pyarrow's Dataset methods not implemented above raise rather than reach its C++ (there is no
# C++ dataset behind this object)
for _name in list(vars(_ds.Dataset)):
    if _name.startswith("__") or _name in vars(KafkaLogDataset):
        continue
    _attr = vars(_ds.Dataset)[_name]
    if type(_attr).__name__ == "getset_descriptor":
        setattr(KafkaLogDataset, _name, property(_unsupported(_name)))
    else:
        setattr(KafkaLogDataset, _name, _unsupported(_name))
KafkaLogDataset.__setstate__ = _unsupported("__setstate__")  # type: ignore[method-assign]
del _name, _attr


def _rebuild(source: Any, options: Dict[str, Any], filter: Optional[pc.Expression]
             ) -> KafkaLogDataset:
    ds = dataset(source, **options)
    return ds if filter is None else ds.filter(filter)


def dataset(
    source: Any,
    *,
    storage_options: Optional[Dict[str, Any]] = None,
    topics: Any = None,
    topic_pattern: Any = None,
    partitions: Any = None,
    include_internal_topics: bool = False,
    read_committed: bool = False,
    include_control: bool = False,
    check_crcs: bool = True,
    timestamp_unit: Optional[str] = "ms",
    include_headers: bool = True,
    batch_metadata: bool = False,
    max_batch_size: Optional[int] = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> KafkaLogDataset:
    """Kafka logs as a :class:`KafkaLogDataset` (see the module doc).

    ``source``: what :func:`kafkalog.arrow.to_arrow` reads (a log root, a partition directory,
    a segment file, a glob, a ``s3://``/``gs://``/``abfs://``/``hdfs://``/``file://`` URI, a
    list of those); ``storage_options`` configures a store (docs/remote.md).  ``topics``,
    ``topic_pattern``, ``partitions`` and ``include_internal_topics`` pick partitions as the
    Spark source's ``subscribe``, ``subscribePattern``, ``assign`` and
    ``includeInternalTopics`` do (internal topics ``__*`` are left out unless asked for).
    ``read_committed`` reads as a read_committed consumer (up to the last stable offset,
    aborted transactions left out); ``timestamp_unit="us"`` gives Spark's timestamp type;
    ``include_headers=False`` leaves the ``headers`` column out, ``batch_metadata=True`` adds
    the batch columns.  The partitions are listed now; their logs are opened by each scan."""
    _arrow.check_int_args(max_batch_size=max_batch_size,
                          max_decompressed_size=max_decompressed_size)
    for name, v in (("read_committed", read_committed), ("include_control", include_control),
                    ("check_crcs", check_crcs), ("include_headers", include_headers),
                    ("batch_metadata", batch_metadata)):
        if not isinstance(v, bool):
            raise TypeError(f"{name} must be a bool, not {type(v).__name__}")
    _field_type("timestamp", timestamp_unit)  # checks the unit
    selection = TopicSelection.parse(topics, topic_pattern, partitions, include_internal_topics)
    sources = resolve(source, None, None, storage_options, selection)
    options = dict(storage_options=storage_options, topics=topics, topic_pattern=topic_pattern,
                   partitions=partitions, include_internal_topics=include_internal_topics,
                   read_committed=read_committed, include_control=include_control,
                   check_crcs=check_crcs, timestamp_unit=timestamp_unit,
                   include_headers=include_headers, batch_metadata=batch_metadata,
                   max_batch_size=max_batch_size, max_decompressed_size=max_decompressed_size)
    return KafkaLogDataset(source, options, sources)


class _CallableModule(types.ModuleType):
    """``kafkalog.dataset`` is this module once it is imported (Python binds a package's
    submodule as its attribute): calling it calls :func:`dataset`, so ``kafkalog.dataset(path)``
    works whichever of the two the attribute holds."""

    def __call__(self, *args: Any, **kwargs: Any) -> KafkaLogDataset:
        return dataset(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
