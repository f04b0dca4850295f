"""Kafka logs as a Polars ``LazyFrame``, scanned by Polars' in-memory and streaming engines with
projection, predicate and row-limit pushdown.

::

    import polars as pl
    from kafkalog.polars import scan_kafka_log

    lf = scan_kafka_log("/var/kafka", topics=["orders"])    # or s3://bucket/root, a glob
    (lf.filter((pl.col("partition") == 3) & (pl.col("offset") >= 1000))
       .group_by("key").agg(pl.len(), pl.col("value").bin.size().sum())
       .collect(engine="streaming"))

:func:`scan_kafka_log` lists the partitions once (:func:`kafkalog.dataset`) and registers a
Polars IO source (``polars.io.plugins.register_io_source``).  Each collect calls it with the
columns the query uses, its predicate (a ``polars.Expr``), a row limit and a batch size; the
source then

* decodes only those columns (and those the predicate reads);
* translates what the predicate says about ``topic``, ``partition``, ``offset`` and
  ``timestamp`` (comparisons with literals, ``is_between``, ``is_in``, ``&``, ``|``) into the
  pyarrow filter of a :class:`kafkalog.dataset.KafkaLogScanner`, which prunes partitions, reads
  only the offset ranges and seeks by timestamp as for DuckDB (docs/arrow.md);
* applies the whole Polars predicate to the decoded rows when part of it was not translated
  (Polars does not apply it again: a source given a predicate answers for it), so the rows are
  exactly Polars' own filter's;
* stops reading once ``n_rows`` rows passed.
"""
from __future__ import annotations

import io
import json
from typing import Any, Callable, Iterator, List, Optional, Tuple

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from polars.io.plugins import register_io_source

from .dataset import KafkaLogDataset
from .dataset import dataset as _dataset

__all__ = ["scan_kafka_log", "arrow_filter"]

_COMPARISONS = {"Eq": "equal", "NotEq": "not_equal", "Lt": "less", "LtEq": "less_equal",
                "Gt": "greater", "GtEq": "greater_equal"}
_FLIPPED = {"Eq": "Eq", "NotEq": "NotEq", "Lt": "Gt", "LtEq": "GtEq", "Gt": "Lt",
            "GtEq": "LtEq"}
_INTS = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Int128"}
_UNITS = {"Milliseconds": "ms", "Microseconds": "us", "Nanoseconds": "ns"}
#: the columns whose filters the dataset pushes into the read
_PUSHED = ("topic", "partition", "offset", "timestamp")

# A translation: a pyarrow expression (None: nothing of the node is pushed) and whether it
# keeps exactly the rows the Polars node keeps (False: it keeps those and maybe more).
_Translated = Tuple[Optional[pc.Expression], bool]


def _literal(node: Any, column: str, schema: pa.Schema) -> Optional[pa.Scalar]:
    """A Polars literal (its JSON form) as the pyarrow scalar Arrow compares ``column`` with
    exactly as Polars does (None: a literal this module does not push)."""
    if not isinstance(node, dict) or "Literal" not in node:
        return None
    lit = node["Literal"]
    ctype = schema.field(column).type
    if "Dyn" in lit:  # an untyped Python int
        v = lit["Dyn"].get("Int") if isinstance(lit["Dyn"], dict) else None
        if isinstance(v, int) and pa.types.is_integer(ctype):
            return pa.scalar(v)
        return None
    scalar = lit.get("Scalar")
    if not isinstance(scalar, dict) or len(scalar) != 1:
        return None
    (kind, v), = scalar.items()
    if kind in _INTS and isinstance(v, int) and pa.types.is_integer(ctype):
        return pa.scalar(v)
    if kind == "String" and isinstance(v, str) and pa.types.is_string(ctype):
        return pa.scalar(v, pa.string())
    if kind == "Datetime" and pa.types.is_timestamp(ctype) and isinstance(v, list) \
            and len(v) == 3 and isinstance(v[0], int):
        unit = _UNITS.get(v[1])
        tz = v[2]["inner"] if isinstance(v[2], dict) else v[2]
        # Polars casts a literal to the column's unit and zone when it builds the plan; another
        # unit or zone (or none) is left to Polars, which compares or refuses as it does
        if unit != ctype.unit or tz != ctype.tz:
            return None
        return pa.scalar(v[0], pa.timestamp(unit, tz))
    return None


def _in_values(node: Any, column: str, schema: pa.Schema) -> Optional[pa.Array]:
    """The values of a Polars list literal (an Arrow IPC stream in the JSON form) for
    ``is_in`` (None: not pushed: a null among them, another type, or another form)."""
    while isinstance(node, dict) and "Alias" in node:
        node = node["Alias"][0]
    if not isinstance(node, dict) or "Literal" not in node:
        return None
    scalar = node["Literal"].get("Scalar")
    if not isinstance(scalar, dict) or not isinstance(scalar.get("List"), list):
        return None
    try:
        table = pa.ipc.open_stream(io.BytesIO(bytes(scalar["List"]))).read_all()
    except (pa.ArrowException, ValueError):
        return None
    if table.num_columns != 1:
        return None
    values = table.column(0).combine_chunks()
    ctype = schema.field(column).type
    if values.null_count:
        return None
    if pa.types.is_integer(ctype) and pa.types.is_integer(values.type):
        return values.cast(pa.int64()) if values.type != pa.uint64() else values
    if pa.types.is_string(ctype) and values.type in (pa.string(), pa.large_string(),
                                                     pa.string_view()):
        return values.cast(pa.string())
    return None


def _column(node: Any, schema: pa.Schema) -> Optional[str]:
    if isinstance(node, dict) and isinstance(node.get("Column"), str):
        name = node["Column"]
        if name in _PUSHED and name in schema.names:
            return name
    return None


def _translate(node: Any, schema: pa.Schema) -> _Translated:
    if not isinstance(node, dict) or len(node) != 1:
        return None, False
    (kind, body), = node.items()
    if kind == "BinaryExpr" and isinstance(body, dict):
        op = body.get("op")
        if op in ("And", "LogicalAnd"):
            (a, ea), (b, eb) = _translate(body["left"], schema), _translate(body["right"], schema)
            if a is None or b is None:
                return (a if b is None else b), False
            return a & b, ea and eb
        if op in ("Or", "LogicalOr"):
            (a, ea), (b, eb) = _translate(body["left"], schema), _translate(body["right"], schema)
            if a is None or b is None:
                return None, False
            return a | b, ea and eb
        if op in _COMPARISONS:
            left, right = body["left"], body["right"]
            col = _column(left, schema)
            if col is None:
                col, op, right = _column(right, schema), _FLIPPED[op], left
            if col is None:
                return None, False
            lit = _literal(right, col, schema)
            if lit is None:
                return None, False
            return getattr(pc, _COMPARISONS[op])(pc.field(col), pc.scalar(lit)), True
        return None, False
    if kind == "Function" and isinstance(body, dict):
        fn = body.get("function")
        args = body.get("input") or []
        boolean = fn.get("Boolean") if isinstance(fn, dict) else None
        if not isinstance(boolean, dict) or not args:
            return None, False
        col = _column(args[0], schema)
        if col is None:
            return None, False
        if "IsBetween" in boolean and len(args) == 3:
            closed = (boolean["IsBetween"] or {}).get("closed")
            lo, hi = _literal(args[1], col, schema), _literal(args[2], col, schema)
            if lo is None or hi is None or closed not in ("Both", "Left", "Right", "None"):
                return None, False
            f = pc.field(col)
            low = f >= lo if closed in ("Both", "Left") else f > lo
            high = f <= hi if closed in ("Both", "Right") else f < hi
            return low & high, True
        if "IsIn" in boolean and len(args) == 2:
            values = _in_values(args[1], col, schema)
            if values is None:
                return None, False
            return pc.field(col).isin(values), True
    return None, False


def arrow_filter(predicate: Optional[pl.Expr], schema: pa.Schema) -> _Translated:
    """What of a Polars ``predicate`` on a dataset of ``schema`` maps onto the columns the
    dataset pushes (``topic``, ``partition``, ``offset``, ``timestamp``), as a pyarrow
    filter, and whether that filter keeps exactly the predicate's rows (True) or those and
    maybe more (False: the predicate is to be applied to the rows read).  ``(None, False)``:
    nothing is pushed; ``(None, True)``: no predicate."""
    if predicate is None:
        return None, True
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # a predicate Polars cannot write as JSON: push nothing
        return None, False
    return _translate(tree, schema)


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    return pl.from_arrow(schema.empty_table()).schema  # type: ignore[union-attr]


def scan_kafka_log(source: Any, *, batch_size: Optional[int] = None,
                   on_scan: Optional[Callable[[Any], None]] = None,
                   **options: Any) -> pl.LazyFrame:
    """Kafka logs as a :class:`polars.LazyFrame` (see the module doc).

    ``source`` and ``options`` are :func:`kafkalog.dataset`'s (a log root, a partition
    directory, a segment file, a glob, a store URI or a list of those; ``topics=``,
    ``partitions=``, ``read_committed=``, ``timestamp_unit=``, ``include_headers=``,
    ``batch_metadata=``, ``storage_options=``...), or ``source`` is a
    :class:`kafkalog.dataset.KafkaLogDataset` (then no options).  The columns are the
    dataset's.  ``batch_size``: rows per decoded chunk (default: Polars' hint).  ``on_scan``
    is called with the :class:`~kafkalog.dataset.KafkaLogScanner` of each scan Polars runs
    (its ``pushdown``, ``partitions`` and, once read, ``fetches`` say what was pushed)."""
    if isinstance(source, KafkaLogDataset):
        if options:
            raise TypeError("options are given with the dataset (kafkalog.dataset(...)), not "
                            f"with an existing one: {', '.join(sorted(options))}")
        ds = source
    else:
        ds = _dataset(source, **options)
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise TypeError(f"batch_size must be an int, not {type(batch_size).__name__}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
    arrow_schema = ds.schema
    schema = _polars_schema(arrow_schema)
    all_names = list(arrow_schema.names)

    def io_source(with_columns: Optional[List[str]], predicate: Optional[pl.Expr],
                  n_rows: Optional[int], hint: Optional[int]) -> Iterator[pl.DataFrame]:
        # no column at all (Polars asks for one even to count rows): the offsets
        names = all_names if with_columns is None else list(with_columns) or ["offset"]
        pushed, exact = arrow_filter(predicate, arrow_schema)
        residual = None if exact else predicate
        decode = list(names)
        if residual is not None:
            decode += [c for c in residual.meta.root_names() if c not in decode]
        scanner = ds.scanner(columns=decode, filter=pushed, batch_size=batch_size or hint)
        if on_scan is not None:
            on_scan(scanner)
        return _frames(scanner, names, decode, residual, n_rows)

    return register_io_source(io_source, schema=schema, explain_name="kafkalog",
                              explain_detail=f"{len(ds.sources)} partition source(s) of "
                                             f"{_describe(source)}")


def _describe(source: Any) -> str:
    text = repr(source) if not isinstance(source, str) else source
    return text if len(text) <= 80 else text[:77] + "..."


def _frames(scanner: Any, names: List[str], decode: List[str], residual: Optional[pl.Expr],
            n_rows: Optional[int]) -> Iterator[pl.DataFrame]:
    left = n_rows
    if left is not None and left <= 0:
        return
    reader = scanner.to_reader()
    try:
        for rb in reader:
            df: pl.DataFrame = pl.from_arrow(rb)  # type: ignore[assignment]
            if residual is not None:
                df = df.filter(residual)
            if decode != names:
                df = df.select(names)
            if df.height == 0:
                continue
            if left is not None:
                if df.height >= left:
                    yield df.head(left)
                    return
                left -= df.height
            yield df
    finally:
        reader.close()
