"""The plumbing floor of a Python data source (bench only): a source named
``kafkalog_floor`` whose tasks yield Arrow batches of the rows kafkalog would return, already
built in the worker's memory, so a read through it costs only what PySpark's Python-source
path costs (task start, Arrow IPC to the JVM, Arrow -> row conversion), and no decoding.

Options: ``parquet`` (a directory of the same rows in Spark's Kafka schema with headers, as
``spark_bench.generate`` writes it), ``includeHeaders`` (as kafkalog's: the same columns),
``splits`` (the number of tasks: use the number kafkalog
plans for the same data, so both use the cores alike), ``rows`` (rows per batch, default
65536; the floor of ../shared/spark/NOTE.md §3.2 is for batches of >= 10k rows).  The first
read in a worker loads the Parquet files into memory (do one warm-up read); later reads in the
same (reused) Python worker only slice and yield.
"""
from __future__ import annotations

import os
from typing import Dict, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import kafkalog.spark as ks

_TABLES: Dict[tuple, object] = {}  # per worker process: each directory and schema, read once


def _table(parquet: str, schema):
    """The rows of ``parquet`` as one table of ``schema`` (an Arrow schema), built once."""
    key = (parquet, tuple(schema.names))
    t = _TABLES.get(key)
    if t is None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = sorted(os.path.join(parquet, f) for f in os.listdir(parquet)
                       if f.endswith(".parquet"))
        t = pa.concat_tables([pq.read_table(f, columns=schema.names) for f in files])
        t = t.cast(schema).combine_chunks()
        _TABLES[key] = t
    return t


class _Slice(InputPartition):
    def __init__(self, index: int, splits: int) -> None:
        self.index, self.splits = index, splits


class _Reader(DataSourceReader):
    def __init__(self, options, schema) -> None:
        self.parquet = options["parquet"]
        self.splits = int(options.get("splits", "1"))
        self.rows = int(options.get("rows", "65536"))
        self.schema = schema

    def partitions(self):
        return [_Slice(i, self.splits) for i in range(self.splits)]

    def read(self, partition: _Slice) -> Iterator:
        from pyspark.sql.pandas.types import to_arrow_schema

        t = _table(self.parquet, to_arrow_schema(self.schema, timezone="UTC"))
        n = t.num_rows
        lo = n * partition.index // partition.splits
        hi = n * (partition.index + 1) // partition.splits
        yield from t.slice(lo, hi - lo).to_batches(max_chunksize=self.rows)


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafkalog_floor"

    def schema(self) -> str:
        # kafkalog's default schema (no headers column unless includeHeaders=true)
        return ks.schema(include_headers=self.options.get("includeheaders", "false") == "true")

    def reader(self, schema) -> _Reader:
        return _Reader(self.options, schema)
