"""The rows of the ``kafkalog`` Spark data source: the spark-sql-kafka schema, plus the optional
``headers``, ``batch`` and ``segment`` columns, as DDL and as Arrow."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ._columns import parse_columns, source_columns
from ._errors import OptionError
from ._options import ReadOptions

# The spark-sql-kafka schema (KafkaRecordToRowConverter.kafkaSchema), all fields nullable.
KAFKA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS_DDL = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
BATCH_FIELDS: Tuple[Tuple[str, str, str], ...] = (
    # (Spark field, kafkalog.arrow column, Spark type)
    ("baseOffset", "batchOffset", "BIGINT"),
    ("position", "position", "BIGINT"),
    ("leaderEpoch", "leaderEpoch", "INT"),
    ("producerId", "producerId", "BIGINT"),
    ("producerEpoch", "producerEpoch", "SMALLINT"),
    ("baseSequence", "baseSequence", "INT"),
    ("isTransactional", "isTransactional", "BOOLEAN"),
    ("compression", "compression", "STRING"),
)
BATCH_DDL = "batch STRUCT<" + ", ".join(f"{n}: {t}" for n, _, t in BATCH_FIELDS) + ">"
SEGMENT_DDL = "segment STRING"
#: each column's Spark type, as DDL
COLUMN_TYPES = dict(c.split(" ", 1) for c in KAFKA_DDL.split(", "))
COLUMN_TYPES.update(d.split(" ", 1) for d in (HEADERS_DDL, BATCH_DDL, SEGMENT_DDL))


def schema_ddl(
    include_headers: bool = False,
    batch_metadata: bool = False,
    segment_metadata: bool = False,
    columns: Optional[Sequence[str]] = None,
) -> str:
    """The DDL of the data source's default schema for these options; with ``columns`` (as
    the ``columns`` option, checked the same way), only those columns, in that order."""
    parts = [KAFKA_DDL]
    if include_headers:
        parts.append(HEADERS_DDL)
    if batch_metadata:
        parts.append(BATCH_DDL)
    if segment_metadata:
        parts.append(SEGMENT_DDL)
    if columns is None:
        return ", ".join(parts)
    columns = parse_columns({"columns": ",".join(columns)}, include_headers, batch_metadata,
                            segment_metadata)
    return ", ".join(f"{c} {COLUMN_TYPES[c]}" for c in columns)


def arrow_schema(opts: "ReadOptions"):
    """The Arrow schema of the default Spark schema
    (``to_arrow_schema(schema, timezone="UTC")``)."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if opts.include_headers:
        fields.append(pa.field("headers", _headers_type()))
    if opts.include_batch_metadata:
        fields.append(pa.field("batch", batch_type()))
    if opts.include_segment_metadata:
        fields.append(pa.field("segment", pa.string()))
    return pa.schema(fields)


def check_schema(target_schema, opts: "ReadOptions") -> None:
    """A user-supplied schema (``.schema(...)``) may name any subset of the source's columns in
    any order, each with the source's type: the data are never converted (a Spark cast would
    differ, e.g. ``timestamp BIGINT`` is seconds in Spark; cast after the read instead)."""
    every = ReadOptions(
        paths=[], include_headers=True, include_batch_metadata=True, include_segment_metadata=True
    )
    full = arrow_schema(every)
    ddl = COLUMN_TYPES
    if opts.columns is not None and sorted(target_schema.names) != sorted(opts.columns):
        given, listed = set(target_schema.names), set(opts.columns)
        raise OptionError(
            "the given schema and option 'columns' disagree: the schema names "
            f"{', '.join(target_schema.names) or 'no column'}, 'columns' names "
            f"{', '.join(opts.columns)} (only in the schema: "
            f"{', '.join(n for n in target_schema.names if n not in listed) or 'none'}; only in "
            f"'columns': {', '.join(n for n in opts.columns if n not in given) or 'none'}): "
            "give one of them (the source's columns are "
            f"{', '.join(source_columns(True, True, True))})"
        )
    for f in target_schema:
        if f.name not in full.names:
            raise OptionError(
                f"column {f.name!r} of the given schema is not a column of the kafkalog source "
                f"({', '.join(full.names)})"
            )
        if not _same_type(f.type, full.field(f.name).type):
            raise OptionError(
                f"column {f.name!r} of the given schema has type {f.type}, but the kafkalog "
                f"source reads it as {ddl[f.name]}: give that type (or leave the column out) and "
                f"convert after the read, e.g. .withColumn({f.name!r}, col({f.name!r}).cast(...))"
            )


def _same_type(a, b) -> bool:
    """Arrow types equal up to nullability and the name of a list's child field."""
    import pyarrow as pa

    if pa.types.is_list(a) and pa.types.is_list(b):
        return _same_type(a.value_type, b.value_type)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return a.num_fields == b.num_fields and all(
            a.field(i).name == b.field(i).name and _same_type(a.field(i).type, b.field(i).type)
            for i in range(a.num_fields)
        )
    return a.equals(b)


def _headers_type():
    import pyarrow as pa

    return pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))


_ARROW_BATCH_TYPES = {
    "BIGINT": "int64",
    "INT": "int32",
    "SMALLINT": "int16",
    "BOOLEAN": "bool_",
    "STRING": "string",
}


def batch_type():
    import pyarrow as pa

    return pa.struct(
        [pa.field(n, getattr(pa, _ARROW_BATCH_TYPES[t])()) for n, _, t in BATCH_FIELDS]
    )
