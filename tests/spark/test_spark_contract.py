"""The connector's contract (spark-sql-kafka's options and their checks), option by option;
each deliberate difference is listed in docs/spark.md."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog.spark import _discovery, _errors, _options, _planning, _schema, _tasks  # noqa: E402


def _parse(root, **o):
    return _options.ReadOptions.parse({"path": root, **o})


def _offsets(root, **o):
    opts = _parse(root, **o)
    out = []
    for s in _planning.plan(opts):
        for rb in _tasks.read_split(s, opts, _schema.arrow_schema(opts)):
            out.extend(
                zip(rb.column("topic").to_pylist(), rb.column("partition").to_pylist(),
                    rb.column("offset").to_pylist())
            )
    return sorted(out)


# ------------------------------------------------------------------------------------------------
# Option keys
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key,hint",
    [
        ("subscibe", "did you mean 'subscribe'"),
        ("startingOffset", "did you mean 'startingOffsets'"),
        ("failondatalos", "did you mean 'failOnDataLoss'"),
        ("kafka.isolaton.level", "did you mean 'kafka.isolation.level'"),
        ("includeheader", "did you mean 'includeHeaders'"),
        ("colour", "unknown option 'colour'"),
    ],
)
def test_unknown_option_is_an_error_with_a_suggestion(sample_root, key, hint):
    with pytest.raises(_errors.OptionError, match=hint):
        _parse(sample_root, **{key: "orders"})


@pytest.mark.parametrize(
    "key,match",
    [
        ("kafka.auto.offset.reset", "set the source option 'startingOffsets'"),
        ("kafka.key.deserializer", "keys are deserialized as byte arrays"),
        ("kafka.value.deserializer", "values are deserialized as byte arrays"),
        ("kafka.enable.auto.commit", "'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "'interceptor.classes' is not supported"),
    ],
)
def test_options_the_connector_rejects(sample_root, key, match):
    with pytest.raises(_errors.OptionError, match=match):
        _parse(sample_root, **{key: "x"})


def test_consumer_settings_are_ignored_with_a_warning(sample_root):
    with pytest.warns(UserWarning, match="kafka.group.id, kafka.security.protocol"):
        o = _parse(sample_root, **{"kafka.security.protocol": "SSL", "kafka.group.id": "g"})
    assert o.ignored == ["kafka.group.id", "kafka.security.protocol"]


@pytest.mark.filterwarnings("ignore:kafkalog reads files")
def test_min_offsets_above_max_offsets_per_trigger(sample_root):
    with pytest.raises(_errors.OptionError, match="higher than the maxOffsetsPerTrigger"):
        _parse(sample_root, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="5")


# ------------------------------------------------------------------------------------------------
# Offsets
# ------------------------------------------------------------------------------------------------
def test_ending_offsets_past_the_log_end(sample_root):
    leo = {tp.name: tp.latest() for tp in _discovery.discover(_parse(sample_root))}
    end = '{"orders":{"0":%d}}' % (leo["orders-0"] + 5)
    with pytest.raises(_errors.OptionError, match="Cannot fetch offset .* failOnDataLoss"):
        _planning.plan(_parse(sample_root, subscribe="orders", endingOffsets=end))
    with pytest.warns(UserWarning, match="log end"):
        got = _offsets(sample_root, assign='{"orders":[0]}', endingOffsets=end,
                       failOnDataLoss="false")
    assert len(got) == 500 and got[-1][2] == leo["orders-0"] - 1
    # exactly the log end is fine
    end = '{"orders":{"0":%d}}' % leo["orders-0"]
    assert len(_offsets(sample_root, assign='{"orders":[0]}', endingOffsets=end)) == 500


def test_assign_of_a_missing_partition(sample_root):
    with pytest.raises(_errors.OptionError, match="assign names partitions not found.*orders-7"):
        _planning.plan(_parse(sample_root, assign='{"orders":[0,7]}'))
    with pytest.raises(_errors.OptionError, match="nope-0"):
        _planning.plan(_parse(sample_root, assign='{"nope":[0]}'))


def test_subscribe_of_a_missing_topic(sample_root):
    with pytest.raises(_errors.OptionError, match="subscribe names topics not found.*: ordres"):
        _planning.plan(_parse(sample_root, subscribe="orders,ordres"))
    assert len(_planning.plan(_parse(sample_root, subscribe="orders, events"))) >= 1


def test_start_and_end_json_over_different_partitions(sample_root):
    with pytest.raises(
        _errors.OptionError, match="different partitions.*only in endingOffsets: orders-1"
    ):
        _parse(
            sample_root,
            startingOffsets='{"orders":{"0":1}}',
            endingOffsets='{"orders":{"0":5,"1":5}}',
        )
    with pytest.raises(_errors.OptionError,
                       match=r"orders-0 \(9\) is after its endingOffsets \(5\)"):
        _parse(
            sample_root, startingOffsets='{"orders":{"0":9}}', endingOffsets='{"orders":{"0":5}}'
        )
    # the -2/-1 markers are not compared
    _parse(sample_root, startingOffsets='{"orders":{"0":-2}}', endingOffsets='{"orders":{"0":-1}}')


def test_negative_timestamps_are_kafkas_earliest_and_latest(sample_root):
    everything = _offsets(sample_root, subscribe="orders")
    assert _offsets(sample_root, subscribe="orders", startingTimestamp="-2") == everything
    assert _offsets(sample_root, subscribe="orders", startingTimestamp="-1") == []
    assert _offsets(sample_root, subscribe="orders", endingTimestamp="-1") == everything
    assert _offsets(sample_root, subscribe="orders", endingTimestamp="-2") == []
    by = '{"orders":{"0":-2,"1":-1,"2":-2}}'
    got = _offsets(sample_root, subscribe="orders", startingOffsetsByTimestamp=by)
    assert got == [r for r in everything if r[1] != 1]
    for bad in ({"startingTimestamp": "-3"}, {"endingOffsetsByTimestamp": '{"orders":{"0":-5}}'}):
        with pytest.raises(_errors.OptionError, match="-2 for the earliest and -1 for the latest"):
            _parse(sample_root, **bad)


# ------------------------------------------------------------------------------------------------
# subscribePattern: java.util.regex
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pattern,topics",
    [
        (r"\Qorders\E", ["orders"]),
        (r"\Qord.\E.*", []),  # the dot is literal
        (r"(?<name>ord)ers", ["orders"]),
        (r"^\p{Lower}{6}$", ["events", "legacy", "orders"]),
        (r"\p{Lower}{7}", ["payments"]),  # found anywhere in the name, as the connector does
        (r"[\p{Alpha}]+s\z", ["events", "orders", "payments"]),
        (r"^\P{Digit}*y\z", ["legacy"]),
    ],
)
def test_java_regex_syntax(sample_root, pattern, topics):
    got = sorted({tp.topic
                  for tp in _discovery.discover(_parse(sample_root, subscribePattern=pattern))})
    assert got == topics


@pytest.mark.parametrize("pattern", [r"[a-z&&[^e]]+", r"\Gorders", r"\p{InGreek}", r"a\Rb"])
def test_java_regex_without_a_python_equivalent_fails_clearly(sample_root, pattern):
    with pytest.raises(_errors.OptionError, match="Java regex syntax kafkalog cannot reproduce"):
        _parse(sample_root, subscribePattern=pattern)


# ------------------------------------------------------------------------------------------------
# User-supplied schema, streaming errors, planning without register()
# ------------------------------------------------------------------------------------------------
def _struct(ddl_fields):
    from pyspark.sql import types as T

    return T.StructType([T.StructField(n, t) for n, t in ddl_fields])


def test_user_schema_must_keep_the_source_types(sample_root):
    pytest.importorskip("pyspark")
    from pyspark.sql import types as T

    from kafkalog.spark._source import KafkaLogDataSource

    ds = KafkaLogDataSource({"path": sample_root})
    ok = _struct(
        [("offset", T.LongType()), ("timestamp", T.TimestampType()), ("topic", T.StringType())]
    )
    ds.reader(ok)
    for name, typ in [
        ("timestamp", T.LongType()),
        ("offset", T.IntegerType()),
        ("partition", T.LongType()),
        ("key", T.StringType()),
    ]:
        with pytest.raises(_errors.OptionError, match=f"column '{name}' .* has type"):
            ds.reader(_struct([(name, typ)]))
    with pytest.raises(_errors.OptionError, match="not a column"):
        ds.reader(_struct([("value2", T.BinaryType())]))


def test_streaming_option_errors_surface_with_their_message(sample_root):
    """PySpark's stream runner hides an exception raised while creating the stream reader
    behind an UnboundLocalError; the source defers it to the first call."""
    pytest.importorskip("pyspark")
    from kafkalog.spark._source import KafkaLogDataSource

    ds = KafkaLogDataSource({"path": sample_root, "endingOffsets": "latest"})
    r = ds.streamReader(ds_schema())
    r.stop()  # what the runner calls in its finally
    with pytest.raises(_errors.OptionError, match="ending offset not valid in streaming queries"):
        r.initialOffset()


def ds_schema():
    from pyspark.sql import types as T

    return _struct([("offset", T.LongType())])


def _big_partition(root, mib):
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    log = Log.open(os.path.join(root, "big-0"), {"segment.bytes": 64 << 20})
    off = 0
    value = os.urandom(16 << 10)
    while off * (16 << 10) < mib << 20:
        b = MemoryRecordsBuilder(2, "none", off)
        for _ in range(4):
            b.append(1_700_000_000_000 + off, None, value)
        log.append_as_follower(b.build())
        off += 4
    log.close()


def test_planning_without_register_is_as_parallel(tmp_path, monkeypatch):
    """The source Spark finds by itself (pyspark_kafkalog) cannot read the session's default
    parallelism: it plans for the cores of the planning process, cutting a big partition at
    ``.index`` positions, as a registered source planned for that parallelism does."""
    pytest.importorskip("pyspark")
    import kafkalog.spark as ks
    import pyspark_kafkalog

    root = str(tmp_path / "logs")
    _big_partition(root, 24)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    schema = ds_schema()
    auto = pyspark_kafkalog.DefaultSource({"path": root}).reader(schema).partitions()
    reg = ks.make_source(default_parallelism=4)({"path": root}).reader(schema).partitions()
    assert len(auto) >= 4
    assert [[(p.start, p.end) for p in s.split.pieces] for s in auto] == [
        [(p.start, p.end) for p in s.split.pieces] for s in reg
    ]


def test_through_spark(spark, sample_root, tmp_path):
    """The same errors as a Spark user sees them (one shared session)."""
    with pytest.raises(Exception, match="did you mean 'subscribe'"):
        spark.read.format("kafkalog").option("subscibe", "orders").load(sample_root).count()
    with pytest.raises(Exception, match="column 'timestamp' of the given schema has type"):
        spark.read.format("kafkalog").schema("offset BIGINT, timestamp BIGINT").load(
            sample_root
        ).count()
    q = (
        spark.readStream.format("kafkalog")
        .option("endingOffsets", "latest")
        .load(sample_root)
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
            q.awaitTermination(120)
    finally:
        q.stop()
