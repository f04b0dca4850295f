"""Apache Spark data source for Kafka log directories (PySpark >= 4.0, ``pip install
"kafkalog[spark]"``).

::

    import kafkalog.spark
    kafkalog.spark.register(spark)                     # once per session

    df = (spark.read.format("kafkalog")                # the schema of Spark's Kafka connector
          .option("subscribe", "orders")
          .option("startingOffsets", '{"orders":{"0":1000}}')
          .load("/var/lib/kafka/data"))

    kafkalog.spark.write(df, "/backup/kafka-logs", compression="zstd")   # a valid log dir

    stream = spark.readStream.format("kafkalog").option("startingOffsets", "earliest").load(path)

``kafkalog.spark`` imports pyspark only when one of its Spark names is used; the Spark-free
parts live in modules of their own: options (:mod:`kafkalog.spark._options`), schema
(:mod:`~kafkalog.spark._schema`), discovery (:mod:`~kafkalog.spark._discovery`,
:mod:`~kafkalog.spark._segments`), offsets (:mod:`~kafkalog.spark._offsets`), planning
(:mod:`~kafkalog.spark._planning`), a task's read (:mod:`~kafkalog.spark._tasks`), errors
(:mod:`~kafkalog.spark._errors`), stores (:mod:`~kafkalog.spark._store_clients`), and the writer
(:mod:`~kafkalog.spark._write`, its options :mod:`~kafkalog.spark._write_options`, a task's
staging :mod:`~kafkalog.spark._staging`, :mod:`~kafkalog.spark._object_stores`; Kafka's default
partitioner is :mod:`kafkalog.partitioner`).  See docs/spark.md for options, schema and
cluster use.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "register",
    "write",
    "KafkaLogDataSource",
    "KafkaLogReader",
    "KafkaLogStreamReader",
    "KafkaLogArrowWriter",
    "KAFKA_SCHEMA_DDL",
    "HEADERS_DDL",
    "schema_ddl",
    "schema",
]

from ._schema import HEADERS_DDL, schema_ddl
from ._schema import KAFKA_DDL as KAFKA_SCHEMA_DDL

#: the former name of :func:`schema_ddl` (it returns Spark's DDL string, where
#: :func:`kafkalog.arrow.schema` returns a pyarrow schema), kept for existing callers
schema = schema_ddl

_SPARK_NAMES = {
    "KafkaLogDataSource",
    "KafkaLogReader",
    "KafkaLogPushdownReader",
    "KafkaLogPushdownDataSource",
    "KafkaLogStreamReader",
    "KafkaLogArrowWriter",
    "KafkaLogSplit",
    "HAS_PUSHDOWN",
    "HAS_ADMISSION_CONTROL",
}


def __getattr__(name: str) -> Any:
    if name in _SPARK_NAMES:
        from . import _source

        return getattr(_source, name)
    raise AttributeError(f"module 'kafkalog.spark' has no attribute {name!r}")


def _import_source():
    try:
        from . import _source
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"kafkalog.spark needs PySpark >= 4.0 (the Python Data Source API): {e}. "
            'Install it with: pip install "kafkalog[spark]"'
        ) from e
    return _source


def make_source(pushdown: bool = False, default_parallelism: Optional[int] = None):
    """The DataSource class to register: with or without filter pushdown, with the cluster's
    default parallelism baked in (Python data sources cannot read session settings)."""
    src = _import_source()
    base = src.KafkaLogPushdownDataSource if pushdown else src.KafkaLogDataSource
    if default_parallelism is None:
        return base
    return type(
        "KafkaLogDataSource",
        (base,),
        {
            "default_parallelism": int(default_parallelism),
            "__module__": base.__module__,
            "__qualname__": "make_source.<locals>.KafkaLogDataSource",
        },
    )


def register(spark, pushdown: bool = False, default_parallelism: Optional[int] = None):
    """Register the ``kafkalog`` format in ``spark`` and return the registered class.

    ``pushdown`` (default False): register the reader with ``pushFilters`` and set
    ``spark.sql.python.filterPushdown.enabled=true`` in the session (topic, partition and offset
    predicates then prune directories and seek with the indexes; timestamp predicates prune
    segments).  It is off by default because PySpark (4.1 to 4.3 at least) keeps the plan of a
    pushed-down scan on the DataFrame and reuses it for a later query on the same DataFrame or
    a temp view of it that pushes no filter: that query then returns the earlier query's rows.
    Turn it on only where every filtered query starts from its own ``spark.read...load()``;
    the ``subscribe``/``assign``/``startingOffsets``/``endingOffsets`` options prune the same
    way and are safe everywhere.  ``default_parallelism`` (default:
    ``spark.sparkContext.defaultParallelism`` where available): splits are sized so that a read
    uses at least that many tasks when the data allows (``maxPartitionBytes``, 256 MiB, stays
    the upper bound).
    """
    import warnings

    src = _import_source()
    if pushdown and not src.HAS_PUSHDOWN:
        raise RuntimeError("filter pushdown needs PySpark >= 4.1")
    if default_parallelism is None:
        try:
            default_parallelism = int(spark.sparkContext.defaultParallelism)
        except Exception:  # Spark Connect has no SparkContext
            default_parallelism = None
    if pushdown:
        warnings.warn(
            "kafkalog filter pushdown: PySpark reuses a pushed-down plan for later queries on "
            "the same DataFrame or view that push no filter, which then return too few rows; "
            "start every filtered query from its own spark.read...load() (docs/spark.md)",
            stacklevel=2,
        )
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    cls = make_source(pushdown, default_parallelism)
    spark.dataSource.register(cls)
    return cls


def _partition_udf(num_partitions: int):
    """Kafka's default partitioner as a plain Python UDF (no pandas needed)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ..partitioner import partition_of

    def part(key, value, partition):
        if partition is not None:
            return int(partition)
        # Kafka's producer spreads unkeyed records arbitrarily; partition_of hashes their
        # value (a Spark stage retry must route every row as the first attempt did)
        return partition_of(key, value, num_partitions)

    return F.udf(part, T.IntegerType(), useArrow=False)


def write(
    df,
    path: str,
    mode: str = "append",
    *,
    topic: Optional[str] = None,
    numPartitions: Optional[int] = None,
    numTasks: Optional[int] = None,
    **options: Any,
) -> None:
    """Write ``df`` as Kafka log directories under ``path`` (a log-dir root).

    Brings the rows into the order a partition log needs before the write: ``repartition`` by
    (topic, partition), so that one task writes each partition and its segments roll at
    ``segmentBytes`` as a broker's do, sorted by offset when the rows carry offsets
    (``preserveOffsets``, the default when an ``offset`` column exists), else by timestamp
    where there is one.  ``topic`` sets (or overrides) the topic of every row;
    ``numPartitions`` computes missing/null partitions with Kafka's default partitioner
    (murmur2 of the key); ``numTasks`` is the number of write tasks (default
    ``spark.sql.shuffle.partitions``, which adaptive execution may coalesce).  ``mode`` is
    ``"append"`` (new partitions, or records after an existing partition's log end),
    ``"overwrite"`` (the partitions written are replaced; others are kept),
    ``"errorifexists"`` (also ``"error"``: fail when ``path`` exists, as Spark's file sources
    do) or ``"ignore"`` (write nothing when ``path`` exists).  Other keyword
    arguments are writer options (``compression``, ``segmentBytes``, ``batchBytes``, ...).
    """
    import os

    from pyspark.sql import functions as F

    from ._local_paths import local_path
    from ._write_options import SAVE_MODES, WriteError, check_option_keys

    save_mode = SAVE_MODES.get(str(mode).strip().lower())
    if save_mode is None:
        raise WriteError(
            f"unknown save mode {mode!r}: use append, overwrite, errorifexists (error, default) "
            "or ignore"
        )
    check_option_keys(options)  # a misspelled option fails here, before any job runs
    from ._object_stores import check_writable
    from ._store_clients import is_remote

    remote = is_remote(str(path))
    if remote:
        check_writable(str(path))  # a store the sink cannot write: refused before any request
    if not remote:
        path = os.path.abspath(local_path(str(path)))
    elif save_mode == "overwrite":  # refused before any job (see _object_stores.RemoteWriteJob)
        from ._object_stores import RemoteWriteJob

        RemoteWriteJob(str(path), options, True, None, "")
    if not remote and save_mode == "ignore" and os.path.lexists(path):
        return  # as Spark's file sources: an existing target is left alone, nothing runs
    spark = df.sparkSession
    register(spark)
    cols = df.columns
    if topic is not None:
        df = df.withColumn("topic", F.lit(topic).cast("string"))
        options.pop("topic", None)
    elif "topic" not in cols and options.get("topic"):
        df = df.withColumn("topic", F.lit(str(options.pop("topic"))).cast("string"))
    if numPartitions is not None:
        options["numPartitions"] = str(numPartitions)
        key = F.col("key") if "key" in cols else F.lit(None).cast("binary")
        part = F.col("partition").cast("int") if "partition" in cols else F.lit(None).cast("int")
        df = df.withColumn(
            "partition", _partition_udf(int(numPartitions))(key, F.col("value"), part)
        )
    elif "partition" not in df.columns:
        df = df.withColumn("partition", F.lit(0).cast("int"))
    preserve = (
        "offset" in df.columns and str(options.get("preserveOffsets", "true")).lower() != "false"
    )
    # one task writes each partition, in offset order, so its segments roll at segmentBytes
    # as a broker's do (without numTasks, adaptive execution may coalesce the tasks)
    by = ["topic", "partition"]
    df = df.repartition(int(numTasks), *by) if numTasks else df.repartition(*by)
    if preserve:
        df = df.sortWithinPartitions("topic", "partition", "offset")
    else:
        order = ["topic", "partition"] + (["timestamp"] if "timestamp" in df.columns else [])
        df = df.sortWithinPartitions(*order)
    if save_mode in ("errorifexists", "ignore"):
        # PySpark refuses these modes for Python data sources: the sink takes them as an option
        options["saveMode"] = save_mode
        save_mode = "append"
    df.write.format("kafkalog").mode(save_mode).options(
        **{k: str(v) for k, v in options.items()}
    ).save(path)
