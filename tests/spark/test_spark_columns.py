"""The ``columns`` read option: the source's schema narrowed to the columns a query uses (the
Python Data Source API prunes no columns itself, and every column of the schema is converted
to a Spark row on the JVM)."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
KAFKA = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def _load(spark, path, fmt="kafkalog", schema=None, **options):
    r = spark.read.format(fmt)
    if schema is not None:
        r = r.schema(schema)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


def _rows(df):
    """A DataFrame's rows (via Arrow: bytes, not bytearrays), as a sorted list of reprs."""
    return sorted(repr(tuple(r.values())) for r in df.toArrow().to_pylist())


def _source(**options):
    from kafkalog.spark._source import KafkaLogDataSource

    return KafkaLogDataSource({str(k).lower(): v for k, v in options.items()})


# ------------------------------------------------------------------------------------------------
# The schema the option gives, and its errors (no Spark needed: schema() runs the checks)
# ------------------------------------------------------------------------------------------------
def test_schema_is_the_listed_columns_in_their_order(tmp_path):
    s = _source(path=str(tmp_path), columns="value, offset ,key")
    assert s.schema() == "value BINARY, offset BIGINT, key BINARY"
    # a name in another case is the column's own spelling
    assert _source(path=str(tmp_path), columns="TIMESTAMPTYPE,Topic").schema() == (
        "timestampType INT, topic STRING"
    )
    extras = _source(
        path=str(tmp_path), columns="segment,batch,headers,partition", includeHeaders="true",
        includeBatchMetadata="true", includeSegmentMetadata="true",
    ).schema()
    assert extras.startswith("segment STRING, batch STRUCT<baseOffset: BIGINT")
    assert extras.endswith(
        "headers ARRAY<STRUCT<key: STRING, value: BINARY>>, partition INT"
    )
    # without the option: the whole schema, as before
    import kafkalog.spark as ks

    assert _source(path=str(tmp_path)).schema() == ks.schema()
    # the public helper narrows the same way, with the same checks
    assert ks.schema(columns=["value", "Offset"]) == "value BINARY, offset BIGINT"
    from kafkalog.spark._errors import OptionError

    with pytest.raises(OptionError, match="'headers' .* without includeHeaders=true"):
        ks.schema(columns=["headers"])


@pytest.mark.parametrize(
    "columns, options, match",
    [
        ("key,valu,offset", {}, r"'valu' is not a column of the kafkalog source; the source's "
         r"columns are key, value, topic, partition, offset, timestamp, timestampType$"),
        ("offset,headers", {}, r"'headers' is not a column of the kafkalog source without "
         r"includeHeaders=true; the source's columns are key, value, .*, timestampType$"),
        ("batch", {"includeHeaders": "true"}, r"'batch' .* without includeBatchMetadata=true; "
         r"the source's columns are .*timestampType, headers$"),
        ("segment", {}, r"'segment' .* without includeSegmentMetadata=true"),
        ("key,offset,Key", {}, r"names 'key' twice \('key,offset,Key'\): name each column "
         r"once; the source's columns are key, value"),
        ("", {}, r"names no column \(''\).*the source's columns are key, value"),
        (" , ", {}, r"names no column"),
        ("key,,offset", {}, r"empty name in 'key,,offset' \(a stray comma\?\)"),
        ("key,offset,", {}, r"empty name"),
    ],
)
def test_bad_columns_are_option_errors(tmp_path, columns, options, match):
    from kafkalog.spark._errors import OptionError
    from kafkalog.spark._options import ReadOptions

    with pytest.raises(OptionError, match=match):
        _source(path=str(tmp_path), columns=columns, **options).schema()
    # the reader's options say the same (a user schema skips schema())
    with pytest.raises(OptionError, match=match):
        ReadOptions.parse({"path": str(tmp_path), "columns": columns,
                           **{k.lower(): v for k, v in options.items()}})


def test_user_schema_must_agree_with_columns(spark, tmp_path):
    from pyspark.sql import types as T

    from kafkalog.spark._errors import OptionError

    s = _source(path=str(tmp_path), columns="key,offset")
    bad = T.StructType([T.StructField("key", T.BinaryType()),
                        T.StructField("value", T.BinaryType())])
    with pytest.raises(OptionError, match=(
        r"the given schema and option 'columns' disagree: the schema names key, value, "
        r"'columns' names key, offset \(only in the schema: value; only in 'columns': "
        r"offset\): give one of them \(the source's columns are key, value, .*segment\)"
    )):
        s.reader(bad)
    # the same columns in another order agree: the schema's order is the rows'
    ok = T.StructType([T.StructField("offset", T.LongType()),
                       T.StructField("key", T.BinaryType())])
    assert s.reader(ok).schema == ok


def test_user_schema_and_columns_disagreeing_fail_through_spark(spark, sample_root):
    df = _load(spark, sample_root, schema="key BINARY, value BINARY", columns="key,offset")
    with pytest.raises(Exception, match="the given schema and option 'columns' disagree"):
        df.collect()
    with pytest.raises(Exception, match="'kye' is not a column of the kafkalog source"):
        _load(spark, sample_root, columns="kye,offset").collect()


# ------------------------------------------------------------------------------------------------
# Rows: the full read's same columns
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "columns, options",
    [
        ("key,value,offset,timestamp", {}),
        ("offset,partition,topic", {}),
        ("timestampType,value", {}),
        ("headers,offset,key,topic,partition", {"includeHeaders": "true"}),
        ("segment,batch,offset,topic,partition",
         {"includeBatchMetadata": "true", "includeSegmentMetadata": "true"}),
    ],
)
def test_rows_equal_the_full_reads_columns(spark, sample_root, columns, options):
    """Over the sample root: every codec (none, gzip, snappy, lz4, zstd), legacy magic v0/v1
    segments, transactions and several segments per partition."""
    names = columns.split(",")
    df = _load(spark, sample_root, columns=columns, **options)
    assert df.columns == names
    full = _load(spark, sample_root, **options)
    assert len(full.columns) > len(names)
    assert _rows(df) == _rows(full.select(*names))
    assert df.count() == full.count() > 0


def test_rows_of_several_codecs_and_formats(spark, sample_root):
    """The sample root holds the codecs and formats the other tests read through ``columns``."""
    df = _load(spark, sample_root, columns="topic,partition,batch",
               includeBatchMetadata="true")
    codecs = {r[0] for r in df.select("batch.compression").distinct().collect()}
    assert {"none", "gzip", "snappy", "lz4", "zstd"} <= codecs
    legacy = _load(spark, sample_root, columns="offset,timestampType,value", subscribe="legacy")
    full = _load(spark, sample_root, subscribe="legacy").select("offset", "timestampType",
                                                                "value")
    assert _rows(legacy) == _rows(full)
    # magic v0 records have no timestamp type (-1); v2 ones do
    assert {r[0] for r in legacy.select("timestampType").distinct().collect()} >= {-1, 0}


def test_read_committed_with_columns(spark, sample_root):
    opts = {"kafka.isolation.level": "read_committed", "subscribe": "payments"}
    df = _load(spark, sample_root, columns="value,offset", **opts)
    full = _load(spark, sample_root, **opts)
    assert _rows(df) == _rows(full.select("value", "offset"))
    assert df.count() < _load(spark, sample_root, subscribe="payments").count()


# ------------------------------------------------------------------------------------------------
# The decoder builds only the listed columns
# ------------------------------------------------------------------------------------------------
def test_the_decoder_builds_only_the_listed_columns(spark, sample_root, monkeypatch):
    """What a task sees: the target schema is the listed columns, and the decoder is asked for
    those (plus offset and position, which a task always needs to cut its range), never for
    the key, the headers or the timestamp when they are not listed."""
    from pyspark.sql.types import _parse_datatype_string

    import kafkalog.arrow as ka

    asked = []
    real = ka.iter_batches

    def spy(buf, *args, **kwargs):
        asked.append(tuple(kwargs.get("columns") or ()))
        return real(buf, *args, **kwargs)

    monkeypatch.setattr(ka, "iter_batches", spy)
    s = _source(path=sample_root, columns="value,topic", includeHeaders="true")
    schema = _parse_datatype_string(s.schema())
    reader = s.reader(schema)
    rows = 0
    for part in reader.partitions():
        for rb in reader.read(part):
            assert rb.schema.names == ["value", "topic"]
            assert rb.schema.equals(pa.schema([("value", pa.binary()), ("topic", pa.string())]))
            rows += rb.num_rows
    assert asked and set(asked) == {("value", "offset", "position")}
    full = _source(path=sample_root, includeHeaders="true")
    fr = full.reader(_parse_datatype_string(full.schema()))
    assert rows == sum(rb.num_rows for p in fr.partitions() for rb in fr.read(p)) > 0
    assert {"key", "headers", "timestamp"} <= set(asked[-1])


# ------------------------------------------------------------------------------------------------
# Pushdown: filters on listed columns are pushed as without the option
# ------------------------------------------------------------------------------------------------
@pytest.fixture()
def pushdown_format(spark):
    from kafkalog.spark._source import KafkaLogPushdownDataSource

    class PushedSource(KafkaLogPushdownDataSource):
        default_parallelism = 2

        @classmethod
        def name(cls):
            return "kafkalog_test_columns_pushed"

    spark.dataSource.register(PushedSource)
    old = spark.conf.get(PUSHDOWN_CONF, None)
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        yield PushedSource.name()
    finally:
        if old is None:
            spark.conf.unset(PUSHDOWN_CONF)
        else:
            spark.conf.set(PUSHDOWN_CONF, old)


def test_pushdown_with_columns(spark, sample_root, pushdown_format):
    def load(**o):
        return _load(spark, sample_root, fmt=pushdown_format, minPartitions="8", **o)

    where = "topic = 'orders' and partition = 1 and offset >= 100 and offset < 130"
    df = load(columns="value,offset,topic,partition").where(where)
    # pruned at planning: the splits of one partition's 30 offsets, not of the whole root
    assert df.rdd.getNumPartitions() <= 2 < 8 <= load(columns="value,offset,topic,partition"
                                                      ).rdd.getNumPartitions()
    want = _load(spark, sample_root).where(where).select("value", "offset", "topic", "partition")
    assert _rows(df) == _rows(want) and df.count() == 30
    # with only the filter columns the query needs beside the values
    got = load(columns="offset,value,partition,topic").where(where).select("value")
    assert _rows(got) == _rows(want.select("value"))
    # a timestamp filter on a listed timestamp: pruned and filtered, still exact
    stamps = sorted(r[0] for r in _load(spark, sample_root, subscribe="events")
                    .selectExpr("unix_micros(timestamp)").collect())
    ts = f"timestamp >= timestamp_micros({stamps[len(stamps) // 2]}) and topic = 'events'"
    a = load(columns="offset,timestamp,topic").where(ts)
    b = _load(spark, sample_root).where(ts).select("offset", "timestamp", "topic")
    assert _rows(a) == _rows(b) and 0 < a.count() < len(stamps)
    # a filter on a column that is not listed cannot be planned: Spark knows no such column
    with pytest.raises(Exception, match="offset"):
        load(columns="value,topic").where("offset >= 100").collect()


# ------------------------------------------------------------------------------------------------
# Streaming reads accept the option
# ------------------------------------------------------------------------------------------------
def test_stream_with_columns(spark, sample_root, tmp_path):
    import os
    import shutil

    root = tmp_path / "grow"
    shutil.copytree(os.path.join(sample_root, "orders-0"), root / "orders-0")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    sdf = (spark.readStream.format("kafkalog").option("startingOffsets", "earliest")
           .option("columns", "offset,value").load(str(root)))
    assert sdf.columns == ["offset", "value"]
    q = (sdf.writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert not q.isActive and q.exception() is None
    got = spark.read.parquet(str(out))
    assert got.columns == ["offset", "value"]
    assert _rows(got) == _rows(_load(spark, str(root)).select("offset", "value"))
    with pytest.raises(Exception, match="'valu' is not a column"):
        spark.readStream.format("kafkalog").option("columns", "offset,valu").load(str(root))
