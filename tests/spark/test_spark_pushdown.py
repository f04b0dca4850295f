"""Filter pushdown: pushed state must never reach a later query.

PySpark (4.1 to 4.3 at least) keeps the result of a pushdown planning - the pickled read
function, which holds the reader that ``pushFilters`` configured, and the pickled input
partitions planned with those filters - on the relation of the DataFrame
(``PythonDataSourceV2.readInfo``).  A later query over the same DataFrame or a temp view of it
that pushes no filter runs no Python planning at all and reuses that plan.  The minimal source
below shows it; kafkalog therefore registers its reader without ``pushFilters`` by default.
"""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def _with_conf(spark, key, value):
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    return old


def _restore_conf(spark, key, old):
    if old is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, old)


def _counting_source():
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Reader(DataSourceReader):
        def __init__(self):
            self.pushed = []

        def pushFilters(self, filters):
            self.pushed.extend(filters)
            return iter(())  # claims every filter, so Spark drops them

        def read(self, partition):
            yield (len(self.pushed),)

    class CountPushedSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_test_count_pushed"

        def schema(self):
            return "n INT"

        def reader(self, schema):
            return Reader()

    return CountPushedSource


def test_pyspark_keeps_pushed_state_for_later_queries(spark):
    """The PySpark behaviour kafkalog defends against.  When this test fails, PySpark no longer
    reuses a pushdown plan for a later unfiltered query: kafkalog's pushdown could then be
    turned on by default again (see docs/spark.md, "Filter pushdown")."""
    src = _counting_source()
    spark.dataSource.register(src)
    old = _with_conf(spark, PUSHDOWN_CONF, "true")
    try:
        fresh = spark.read.format(src.name()).load()
        assert fresh.collect()[0][0] == 0  # nothing pushed, nothing held
        df = spark.read.format(src.name()).load()
        # IsNotNull(n) and EqualTo(n, 0) pushed; the source claims them, so Spark drops them
        assert df.where("n = 0").collect()[0][0] == 2
        # a plain query on the same DataFrame: its reader still holds the two filters
        assert df.collect()[0][0] == 2, "PySpark fixed the pushdown-state leak"
    finally:
        _restore_conf(spark, PUSHDOWN_CONF, old)


# ------------------------------------------------------------------------------------------------
# The differential property at the core level (no JVM): pushed == unpushed == plain Python
# ------------------------------------------------------------------------------------------------
BASE_TS = 1_700_000_000_000  # ms


@pytest.fixture(scope="module")
def diff_root(tmp_path_factory):
    """Two log-dir roots read together: the demo sample with small segments (every codec,
    legacy v0/v1, transactions, LogAppendTime) and hand-built partitions with an ``.index``
    entry every 64 bytes, several segments and timestamps that go backwards."""
    import random

    from kafkalog import MemoryRecordsBuilder
    from kafkalog.demo import generate
    from kafkalog.storage.log import Log

    base = tmp_path_factory.mktemp("pushdown-diff")
    demo = str(base / "demo")
    generate(demo, 1600, segment_bytes=4096, value_bytes=10)
    idx = str(base / "indexed")
    rng = random.Random(7)
    for topic, partition, start in (("clicks", 0, 0), ("clicks", 3, 1000), ("ord", 0, 40)):
        log = Log.open(
            f"{idx}/{topic}-{partition}",
            {"segment.bytes": 1500, "index.interval.bytes": 64, "max.message.bytes": 1 << 20},
        )
        off = start
        if start:
            log.truncate_fully_and_start_at(start)
        for _ in range(40):
            n = rng.randrange(1, 6)
            b = MemoryRecordsBuilder(2, "none", off)
            for j in range(n):
                b.append(BASE_TS + (off + j) * 10 + rng.randrange(-300, 300), b"k", b"v" * 8)
            log.append_as_follower(b.build())
            off += n
        log.close()
    return [demo, idx]


def _spark_schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
            T.StructField("timestamp", T.TimestampType()),
        ]
    )


def _us(dt):
    import datetime as dtm

    return (dt - dtm.datetime(1970, 1, 1, tzinfo=dtm.timezone.utc)) // dtm.timedelta(
        microseconds=1
    )


_COL = {"topic": 0, "partition": 1, "offset": 2, "timestamp": 3}


def _rows_of(reader, partitions):
    """(topic, partition, offset, timestamp in µs) of every row the reader returns."""
    out = []
    for p in partitions:
        for rb in reader.read(p):
            cols = [rb.column(i) for i in range(3)] + [rb.column(3).cast(pa.int64())]
            out.extend(zip(*(c.to_pylist() for c in cols)))
    return out


class Or:
    """A predicate Spark evaluates itself (OR is never pushed to a Python data source)."""

    def __init__(self, *parts):
        self.parts = parts

    def __repr__(self):
        return "Or" + repr(self.parts)


def _compile(f):  # noqa: C901 - SQL three-valued logic, one case per filter
    """Spark's evaluation of a filter on a row: a function giving True, False or None."""
    import operator

    import pyspark.sql.datasource as D

    if isinstance(f, Or):
        parts = [_compile(p) for p in f.parts]

        def any_true(row):
            vals = [p(row) for p in parts]
            if any(v is True for v in vals):
                return True
            return None if any(v is None for v in vals) else False

        return any_true
    if isinstance(f, D.Not):
        child = _compile(f.child)
        return lambda row: None if child(row) is None else not child(row)
    i = _COL[f.attribute[0]]
    ts = f.attribute[0] == "timestamp"
    if isinstance(f, D.IsNull):
        return lambda row: row[i] is None
    if isinstance(f, D.IsNotNull):
        return lambda row: row[i] is not None
    v = f.value
    if isinstance(f, D.In):
        vals = {_us(e) if ts else e for e in v}
        return lambda row: None if row[i] is None else row[i] in vals
    if ts:
        v = _us(v)
    if isinstance(f, D.EqualNullSafe):
        return lambda row: row[i] == v
    op = {
        D.EqualTo: operator.eq,
        D.GreaterThan: operator.gt,
        D.GreaterThanOrEqual: operator.ge,
        D.LessThan: operator.lt,
        D.LessThanOrEqual: operator.le,
        D.StringStartsWith: lambda x, y: x.startswith(y),
        D.StringEndsWith: lambda x, y: x.endswith(y),
        D.StringContains: lambda x, y: y in x,
    }[type(f)]
    return lambda row: None if row[i] is None else op(row[i], v)


def _keep(rows, conjuncts):
    preds = [_compile(c) for c in conjuncts]
    return sorted(r for r in rows if all(p(r) is True for p in preds))


class _Universe:
    """Everything the cases need from the log: the oracle rows (a direct decode) and the
    values worth comparing against."""

    def __init__(self, paths):
        import kafkalog.arrow as ka
        from kafkalog.spark import _discovery, _options, _segments

        self.options = {"paths": json.dumps(paths)}
        opts = _options.ReadOptions.parse(self.options)
        rows = []
        offsets, stamps = {0, -1, 10**12}, set()
        for tp in _discovery.discover(opts):
            t = ka.to_arrow(tp.directory, columns=["offset", "timestamp"], timestamp_unit="us")
            offs = t.column("offset").to_pylist()
            tss = t.column("timestamp").cast(pa.int64()).to_pylist()
            rows.extend((tp.topic, tp.partition, o, ts) for o, ts in zip(offs, tss))
            stamps.update(tss)
            for s in tp.segments:
                offsets.update((s.base_offset - 1, s.base_offset, s.base_offset + 1))
                for o, _p in _segments.offset_index_entries(s):
                    offsets.update((o - 1, o, o + 1))
            offsets.update((tp.earliest(), tp.latest() - 1, tp.latest(), tp.latest() + 1))
        self.rows = rows
        self.topics = sorted({r[0] for r in rows})
        self.partitions = sorted({r[1] for r in rows}) + [-1, 7]
        self.offsets = sorted(offsets)
        st = sorted(stamps)
        pick = st[:: max(1, len(st) // 40)] + [st[0], st[-1]]
        self.stamps = sorted({s + d for s in pick for d in (-1000, -1, 0, 1)} | {-(10**15)})


@pytest.fixture(scope="module")
def universe(diff_root):
    pytest.importorskip("pyspark")
    return _Universe(diff_root)


def _filters_strategy(u):
    import datetime as dtm

    import pyspark.sql.datasource as D
    from hypothesis import strategies as st

    def ts(us):
        return dtm.datetime(1970, 1, 1, tzinfo=dtm.timezone.utc) + dtm.timedelta(microseconds=us)

    topic = st.sampled_from(u.topics + ["nope", ""])
    prefix = st.sampled_from(["o", "or", "ord", "orders", "c", "x", ""])
    part = st.sampled_from(u.partitions)
    off = st.sampled_from(u.offsets)
    stamp = st.sampled_from(u.stamps).map(ts)
    cmp = st.sampled_from(
        [D.GreaterThan, D.GreaterThanOrEqual, D.LessThan, D.LessThanOrEqual, D.EqualTo]
    )

    def one(col, val):
        return st.builds(lambda c, v: c((col,), v), cmp, val)

    simple = st.one_of(
        st.builds(lambda v: D.EqualTo(("topic",), v), topic),
        st.builds(lambda v: D.EqualNullSafe(("topic",), v), topic),
        st.builds(lambda vs: D.In(("topic",), tuple(vs)), st.lists(topic, min_size=1, max_size=3)),
        st.builds(lambda v: D.StringStartsWith(("topic",), v), prefix),
        st.builds(lambda v: D.StringEndsWith(("topic",), v), st.sampled_from(["s", "ord"])),
        one("partition", part),
        st.builds(
            lambda vs: D.In(("partition",), tuple(vs)), st.lists(part, min_size=1, max_size=3)
        ),
        st.builds(lambda v: D.EqualNullSafe(("partition",), v), part),
        one("offset", off),
        one("offset", off),
        st.builds(lambda vs: D.In(("offset",), tuple(vs)), st.lists(off, min_size=1, max_size=4)),
        one("timestamp", stamp),
        one("timestamp", stamp),
        st.builds(lambda v: D.Not(D.EqualTo(("offset",), v)), off),
        st.builds(
            lambda c: D.IsNotNull((c,)),
            st.sampled_from(["topic", "partition", "offset", "timestamp"]),
        ),
        st.builds(lambda c: D.IsNull((c,)), st.sampled_from(["topic", "offset"])),
    )
    opaque = st.builds(lambda a, b: Or(a, b), simple, simple)
    return st.lists(st.one_of(simple, simple, simple, opaque), min_size=0, max_size=5)


def _check_case(u, conjuncts):
    from kafkalog.spark._source import KafkaLogPushdownReader

    pushable = [c for c in conjuncts if not isinstance(c, Or)]
    reader = KafkaLogPushdownReader(u.options, _spark_schema())
    rest = list(reader.pushFilters(list(pushable)))
    assert all(any(r is c for c in pushable) for r in rest), "returned a filter not pushed"
    kept_by_spark = rest + [c for c in conjuncts if isinstance(c, Or)]
    parts = reader.partitions()
    pushed = _keep(_rows_of(reader, parts), kept_by_spark)
    assert pushed == _keep(u.rows, conjuncts), conjuncts
    return parts


def test_pushed_equals_unpushed_equals_python_filter(universe):
    """Thousands of generated filter sets (topic, partition, offset, timestamp; =, <=>, IN,
    ranges, prefixes, NOT, IS [NOT] NULL, empty results; OR left to Spark): the rows a pushed
    scan returns, after the filters it hands back, are exactly a plain Python filter of every
    record (a direct decode), which is also what the unpushed scan returns: the unpushed scan
    yields every record, so Spark's filter of it is that same Python filter."""
    from hypothesis import HealthCheck, given, settings

    from kafkalog.spark._source import KafkaLogReader

    u = universe
    plain = KafkaLogReader(u.options, _spark_schema())
    unpushed_rows = _rows_of(plain, plain.partitions())
    assert sorted(unpushed_rows) == sorted(u.rows) and len(u.rows) > 1700
    seen = {"empty": 0, "some": 0}

    @settings(
        max_examples=2000,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(_filters_strategy(u))
    def prop(conjuncts):
        _check_case(u, conjuncts)
        seen["empty" if not _keep(u.rows, conjuncts) else "some"] += 1

    prop()
    assert seen["empty"] > 100 and seen["some"] > 500, seen


def test_read_uses_only_the_splits_pruning(universe):
    """The reader Spark ships with the read function may be the one of an earlier, filtered
    scan: read() must not apply that reader's pruning to a split planned without it."""
    import pyspark.sql.datasource as D

    from kafkalog.spark._source import KafkaLogPushdownReader, KafkaLogReader

    u = universe
    plain = KafkaLogReader(u.options, _spark_schema())
    splits = plain.partitions()
    stale = KafkaLogPushdownReader(u.options, _spark_schema())
    list(stale.pushFilters([D.EqualTo(("topic",), "orders"), D.LessThan(("offset",), 3)]))
    assert _keep(_rows_of(stale, splits), []) == _keep(u.rows, [])
    # and pushFilters starts afresh on a reader that already pushed
    list(stale.pushFilters([D.GreaterThanOrEqual(("offset",), 0)]))
    assert _keep(_rows_of(stale, stale.partitions()), []) == _keep(u.rows, [])


# ------------------------------------------------------------------------------------------------
# The same property through a real Spark: reused DataFrames and views, queries in sequence
# ------------------------------------------------------------------------------------------------
def _spark_queries(u):
    import datetime as dtm

    mid = sorted(r[3] for r in u.rows)[len(u.rows) // 2]
    lit = (dtm.datetime(1970, 1, 1) + dtm.timedelta(microseconds=mid)).isoformat(" ")
    return [
        ("topic = 'orders'", lambda r: r[0] == "orders"),
        (None, lambda r: True),
        (f"timestamp >= '{lit}'", lambda r: r[3] >= mid),
        ("offset > 10 or offset < 5", lambda r: r[2] > 10 or r[2] < 5),
        ("partition = 1 or offset < 5", lambda r: r[1] == 1 or r[2] < 5),
        (
            "topic in ('clicks', 'ord') and offset >= 1010 and offset < 1040",
            lambda r: r[0] in ("clicks", "ord") and 1010 <= r[2] < 1040,
        ),
        (None, lambda r: True),
        ("offset = 3 and partition <= 1", lambda r: r[2] == 3 and r[1] <= 1),
        (
            "topic like 'ord%' and partition >= 0 and offset < 45",
            lambda r: r[0].startswith("ord") and r[2] < 45,
        ),
        ("topic = 'nope'", lambda r: False),
        (None, lambda r: True),
    ]


def _tpo(rows):
    return sorted((r[0], r[1], r[2]) for r in rows)


def test_spark_reused_dataframes_and_views_give_each_querys_rows(spark, universe, diff_root):
    """The issue's sequences on one DataFrame and on a temp view of it (a filtered query, then
    an unfiltered one; an OR after a timestamp filter; ...), with the format as registered by
    default: every query returns its own rows."""
    u = universe
    df = spark.read.format("kafkalog").load(diff_root)
    df.createOrReplaceTempView("kafkalog_pushdown_reuse")
    for where, pred in _spark_queries(u):
        want = _tpo(r for r in u.rows if pred(r))
        got = df if where is None else df.where(where)
        assert _tpo(got.select("topic", "partition", "offset").collect()) == want, where
        sql = "select topic, partition, offset from kafkalog_pushdown_reuse"
        got = spark.sql(sql if where is None else f"{sql} where {where}").collect()
        assert _tpo(got) == want, where
        # count() plans its own scan of the same relation
        assert (df if where is None else df.where(where)).count() == len(want), where


def test_spark_opt_in_pushdown_on_fresh_dataframes(spark, universe, diff_root):
    """register(spark, pushdown=True) prunes each scan exactly when every query loads its own
    DataFrame (the use it is documented for)."""
    import kafkalog.spark as ks
    from kafkalog.spark._source import KafkaLogPushdownDataSource

    class PushedSource(KafkaLogPushdownDataSource):
        default_parallelism = 2

        @classmethod
        def name(cls):
            return "kafkalog_test_pushed"

    u = universe
    spark.dataSource.register(PushedSource)
    old = _with_conf(spark, PUSHDOWN_CONF, "true")
    try:
        for where, pred in _spark_queries(u):
            want = _tpo(r for r in u.rows if pred(r))
            df = spark.read.format("kafkalog_test_pushed").load(diff_root)
            got = df if where is None else df.where(where)
            assert _tpo(got.select("topic", "partition", "offset").collect()) == want, where
        one = (
            spark.read.format("kafkalog_test_pushed")
            .load(diff_root)
            .where("topic = 'clicks' and partition = 3 and offset >= 1010 and offset < 1020")
        )
        assert one.rdd.getNumPartitions() == 1  # pruned at planning, not only filtered
    finally:
        _restore_conf(spark, PUSHDOWN_CONF, old)
    with pytest.warns(UserWarning, match="pushdown"):
        ks.register(spark, pushdown=True)
    ks.register(spark)  # back to the default for the other tests
    _restore_conf(spark, PUSHDOWN_CONF, old)
