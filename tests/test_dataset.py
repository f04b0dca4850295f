"""kafkalog.dataset: a lazy Arrow dataset DuckDB, Polars and pyarrow push columns and filters
into.  Every scan is checked three ways: its rows equal the whole log filtered by pyarrow (never
a wrong row, never a missing one), what it was handed (the scanner's arguments, recorded), and
what it read (the partitions opened, the offset ranges fetched, the bytes of the runs read).
Both twins of the columnar core run (the ``twin`` fixture), as in tests/test_arrow.py."""
from __future__ import annotations

import datetime as dt
import os
import pickle
import shutil

import pytest

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")
pds = pytest.importorskip("pyarrow.dataset")

import kafkalog  # noqa: E402
import kafkalog.arrow as ka  # noqa: E402
from kafkalog import _arrow_py  # noqa: E402
from kafkalog.dataset import KafkaLogDataset  # noqa: E402
from kafkalog.demo import generate  # noqa: E402
from kafkalog.storage.log_view import LogView  # noqa: E402

from kl_support import PURE  # noqa: E402

try:
    from kafkalog import _arrow as _arrow_c
except ImportError:  # pragma: no cover - pure-only installs
    _arrow_c = None

TWINS = ["python"] if PURE or _arrow_c is None else ["cython", "python"]
f = pc.field


@pytest.fixture(params=TWINS)
def twin(request, monkeypatch):
    mod = _arrow_c if request.param == "cython" else _arrow_py
    monkeypatch.setattr(ka, "_core", mod)
    return request.param


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A broker's log dir of 4 topics (every codec, v0/v1 messages, LogAppendTime batches,
    transactions with aborts), segments of 16 KiB, plus two internal topics."""
    r = str(tmp_path_factory.mktemp("ds") / "root")
    generate(r, records=4000, segment_bytes=16 * 1024)
    for internal in ("__consumer_offsets-0", "__cluster_metadata-0"):
        shutil.copytree(os.path.join(r, "orders-0"), os.path.join(r, internal))
    return r


def test_only_kafkas_internal_topics_are_left_out(tmp_path):
    """A user topic whose name starts with ``__`` is no internal topic (Kafka's pattern
    subscriptions read it): a root read includes it; the four internal names stay out."""
    r = str(tmp_path / "root")
    generate(r, records=200, segment_bytes=16 * 1024)
    names = ("__consumer_offsets", "__transaction_state", "__share_group_state",
             "__cluster_metadata", "__debezium-heartbeat.server1", "__user_topic")
    for name in names:
        shutil.copytree(os.path.join(r, "orders-0"), os.path.join(r, f"{name}-0"))
    got = set(kafkalog.dataset(r).to_table(columns=["topic"]).column("topic").to_pylist())
    assert "__debezium-heartbeat.server1" in got and "__user_topic" in got
    assert not got & set(names[:4])
    with_internal = set(kafkalog.dataset(r, include_internal_topics=True)
                        .to_table(columns=["topic"]).column("topic").to_pylist())
    assert set(names) <= with_internal


@pytest.fixture
def bytes_read(monkeypatch):
    """The bytes of segment runs the read model hands out (what was read of the .log files)."""
    counter = {"n": 0}
    real = LogView.chunks

    def chunks(self, *args, **kwargs):
        for run in real(self, *args, **kwargs):
            counter["n"] += len(run[2])
            yield run

    monkeypatch.setattr(LogView, "chunks", chunks)
    return counter


def rows(t):
    return t.to_pylist()


def reference(ds, expr, columns=None):
    """The whole dataset read (nothing pushed), filtered by pyarrow."""
    full = pa.Table.from_batches(list(ds.scanner().to_reader()), schema=ds.schema)
    out = full.filter(expr) if expr is not None else full
    return out.select(columns) if columns is not None else out


# -- the object --------------------------------------------------------------------------------
def test_a_pyarrow_dataset_with_the_spark_schema(root, twin):
    ds = kafkalog.dataset(root)
    assert isinstance(ds, pds.Dataset) and isinstance(ds, KafkaLogDataset)
    assert ds.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                               "timestampType", "headers"]
    assert [str(t) for t in ds.schema.types[:7]] == [
        "binary", "binary", "string", "int32", "int64", "timestamp[ms, tz=UTC]", "int32"]
    us = kafkalog.dataset(root, timestamp_unit="us", include_headers=False, batch_metadata=True)
    assert us.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert "headers" not in us.schema.names and "producerId" in us.schema.names
    # pyarrow's Dataset methods it does not implement raise, never reach a C++ dataset
    for call in (lambda: ds.get_fragments(), lambda: ds.join(ds, "offset"),
                 lambda: ds.sort_by("offset"), lambda: ds.replace_schema(ds.schema),
                 lambda: ds._scan_options):
        with pytest.raises(NotImplementedError):
            call()
    assert ds.partition_expression.equals(pc.scalar(True))
    # kafkalog.dataset is the submodule once imported (as here), and calling it is dataset()
    import types

    assert isinstance(kafkalog.dataset, types.ModuleType) and callable(kafkalog.dataset)
    back = pickle.loads(pickle.dumps(ds.filter(f("partition") == 1)))
    assert back.to_table().equals(ds.to_table(filter=f("partition") == 1))


def test_partitions_chosen_as_the_spark_source_chooses_them(root, twin):
    parts = lambda ds: sorted({(t, p) for t, p, _ in ds.sources})  # noqa: E731
    every = parts(kafkalog.dataset(root))
    assert ("orders", 0) in every and not any(t.startswith("__") for t, _ in every)
    with_internal = parts(kafkalog.dataset(root, include_internal_topics=True))
    assert {("__consumer_offsets", 0), ("__cluster_metadata", 0)} <= set(with_internal)
    assert parts(kafkalog.dataset(root, topics=["orders", "__consumer_offsets"])) == [
        ("__consumer_offsets", 0), ("orders", 0), ("orders", 1), ("orders", 2)]
    assert parts(kafkalog.dataset(root, topics="events,payments")) == [
        ("events", 0), ("events", 1), ("payments", 0)]
    assert parts(kafkalog.dataset(root, topic_pattern="rder")) == [
        ("orders", 0), ("orders", 1), ("orders", 2)]
    assert parts(kafkalog.dataset(root, partitions={"orders": [2], "events": [0]})) == [
        ("events", 0), ("orders", 2)]
    assert parts(kafkalog.dataset(root, partitions=[1])) == [
        ("events", 1), ("legacy", 1), ("orders", 1)]
    # a glob names partitions as a root lists them; a partition named by path is read
    assert parts(kafkalog.dataset(os.path.join(root, "orders-*"))) == [
        ("orders", 0), ("orders", 1), ("orders", 2)]
    assert parts(kafkalog.dataset(os.path.join(root, "*-0"))) == [
        ("events", 0), ("legacy", 0), ("orders", 0), ("payments", 0)]
    assert parts(kafkalog.dataset(os.path.join(root, "__consumer_offsets-0"))) == [
        ("__consumer_offsets", 0)]
    with pytest.raises(ValueError, match="not both"):
        kafkalog.dataset(root, topics=["a"], topic_pattern="b")
    with pytest.raises(FileNotFoundError, match="matches nothing"):
        kafkalog.dataset(os.path.join(root, "nothing-*"))


def test_to_arrow_of_a_root_or_glob_has_topic_and_partition(root, twin):
    t = ka.to_arrow(root)
    assert t.schema.names == list(ka.SPARK_COLUMNS) + ["headers"]
    assert not any(x.startswith("__") for x in set(t.column("topic").to_pylist()))
    # offset 0 of each partition, told apart by its topic and partition
    zeros = t.filter(pc.equal(t.column("offset"), 0))
    pairs = list(zip(zeros.column("topic").to_pylist(), zeros.column("partition").to_pylist()))
    assert len(pairs) == len(set(pairs)) == 8
    g = ka.to_arrow(os.path.join(root, "orders-*"), ["topic", "partition", "offset"])
    assert g.equals(ka.to_arrow(root, ["topic", "partition", "offset"], topics=["orders"]))
    assert set(ka.to_arrow(root, ["topic"], include_internal_topics=True)
               .column("topic").to_pylist()) >= {"__consumer_offsets", "__cluster_metadata"}
    # a partition directory keeps its columns: no topic/partition unless asked for
    assert ka.to_arrow(os.path.join(root, "orders-0")).schema.names == list(ka.DEFAULT_COLUMNS)
    assert ka.to_arrow(os.path.join(root, "__consumer_offsets-0")).num_rows > 0
    r = ka.iter_batches(root, ["offset"], topics=["payments"], read_committed=True)
    assert isinstance(r, pa.RecordBatchReader)
    assert r.read_all().column("offset").to_pylist() == ka.to_arrow(
        os.path.join(root, "payments-0"), ["offset"], read_committed=True
    ).column("offset").to_pylist()


# -- filters: exact rows, pushed where they can be -------------------------------------------------
T0 = 1_700_000_000_000  # kafkalog.demo's first timestamp


def _ts(ms, unit="ms"):
    return pa.scalar(ms * (1000 if unit == "us" else 1), pa.timestamp(unit, tz="UTC"))


FILTERS = {
    "offset range": (f("offset") >= 100) & (f("offset") < 130),
    "offset between, topic": (f("offset") >= 10) & (f("offset") <= 12) & (f("topic") == "orders"),
    "offset IN": f("offset").isin([0, 77, 300, 301, 10 ** 6]),
    "partition IN": f("partition").isin([1]),
    "partition or": (f("partition") == 0) | (f("partition") == 2),
    "topic IN (DuckDB's form)": pc.if_else(f("topic").is_valid(), f("topic").isin(["events"]),
                                           pa.scalar(None, pa.bool_())),
    "topic >": f("topic") > "orders",
    "or of ranges": ((f("offset") < 5) & (f("topic") == "orders"))
    | ((f("offset") > 440) & (f("topic") == "orders")),
    "timestamp >=": f("timestamp") >= _ts(T0 + 3000),
    "timestamp us >": f("timestamp") > _ts(T0 + 2000, "us"),
    "timestamp range": (f("timestamp") >= _ts(T0 + 1000)) & (f("timestamp") < _ts(T0 + 1200)),
    "not pushed (value)": f("value") == b"nothing",
    "not pushed (or across columns)": (f("offset") == 3) | (f("partition") == 1),
    "never": (f("offset") < 5) & (f("offset") > 10),
    "float bound": f("offset") > 99.5,
    "not": ~(f("partition") == 0),
}
# what each filter lets a scan skip: (partitions opened, offsets fetched are fewer than all)
PUSHED = {
    "offset range": (8, True), "offset between, topic": (3, True), "offset IN": (8, True),
    "partition IN": (3, False), "partition or": (5, False), "topic IN (DuckDB's form)": (2, False),
    "topic >": (1, False), "or of ranges": (3, True), "timestamp >=": (8, True),
    "timestamp us >": (8, True), "timestamp range": (8, True), "not pushed (value)": (8, False),
    "not pushed (or across columns)": (8, False), "never": (0, True), "float bound": (8, True),
    "not": (8, False),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_rows_exact_and_pushed(root, twin, bytes_read, name):
    ds = kafkalog.dataset(root)
    expr = FILTERS[name]
    want = reference(ds, expr, ["topic", "partition", "offset", "value"])
    bytes_read["n"] = 0
    full = ds.scanner(columns=["offset"])
    full.to_table()
    all_bytes, all_offsets = bytes_read["n"], sum(x.end - x.start for x in full.fetches)
    bytes_read["n"] = 0
    sc = ds.scanner(columns=["topic", "partition", "offset", "value"], filter=expr,
                    batch_size=100)
    got = sc.to_table()
    assert rows(got) == rows(want), name
    assert all(b.num_rows <= 100 for b in got.to_batches())
    opened, narrower = PUSHED[name]
    assert len(sc.partitions) == opened, sc.partitions
    fetched = sum(x.end - x.start for x in sc.fetches)
    if narrower:
        assert fetched < all_offsets and bytes_read["n"] < all_bytes, (fetched, all_offsets)
    elif opened == 8:
        assert fetched == all_offsets
    assert ds.count_rows(filter=expr) == want.num_rows
    assert ds.head(7, filter=expr, columns=["offset"]).column("offset").to_pylist() == \
        want.column("offset").to_pylist()[:7]


def test_offset_ranges_fetched_are_the_filters(root, twin, bytes_read):
    ds = kafkalog.dataset(root, topics=["orders"])
    sc = ds.scanner(columns=["offset"], filter=f("offset").isin([77, 300, 301])
                    & (f("partition") == 1))
    assert sc.to_table().column("offset").to_pylist() == [77, 300, 301]
    assert sc.fetches == [("orders", 1, 77, 78), ("orders", 1, 300, 302)]
    assert sc.pushdown.describe()["offsets"] == [(77, 77), (300, 301)]
    # a few batches read, not the partition
    with kafkalog.storage.log.Log.open(os.path.join(root, "orders-1"), read_only=True) as log:
        size = sum(s.size for s in log.segments)
    assert 0 < bytes_read["n"] < size / 4


def test_timestamp_seeks_with_the_time_index_and_skips_segments(root, twin, bytes_read):
    ds = kafkalog.dataset(root, topics=["orders"], partitions=[0])
    ts = ds.to_table(columns=["offset", "timestamp"])
    offs = ts.column("offset").to_pylist()
    mid = ts.column("timestamp")[len(offs) * 3 // 4].value
    bytes_read["n"] = 0
    ds.to_table(columns=["offset"])
    whole = bytes_read["n"]
    bytes_read["n"] = 0
    sc = ds.scanner(columns=["offset", "timestamp"], filter=f("timestamp") >= _ts(mid))
    got = sc.to_table()
    assert rows(got) == rows(ts.filter(pc.greater_equal(ts.column("timestamp"), _ts(mid))))
    assert sc.pushdown.min_timestamp == mid
    # started at the time index's offset: past three quarters of the partition
    assert sc.fetches[0].start > offs[len(offs) // 2]
    assert bytes_read["n"] < whole / 2, (bytes_read["n"], whole)
    # a bound past every record: nothing read at all
    bytes_read["n"] = 0
    sc = ds.scanner(filter=f("timestamp") > _ts(T0 + 10 ** 9))
    assert sc.to_table().num_rows == 0 and bytes_read["n"] == 0


@pytest.mark.parametrize("index", ["empty", "missing", "intact"])
@pytest.mark.parametrize("mtime", ["before", "after"])
def test_timestamp_bound_keeps_segments_whose_time_index_has_no_entries(tmp_path, twin, index,
                                                                        mtime):
    """A closed segment whose .timeindex is empty or gone (a log from before 0.10.1, an index an
    operator deleted: Kafka then opens an empty one and does not rebuild it) has its file's
    mtime as its largest timestamp.  With that mtime before its records' timestamps, the time
    lookup passes over it; the timestamp bound must still read it: every bound gives the rows
    of the unpushed read filtered by pyarrow."""
    from kafkalog import MemoryRecordsBuilder
    from kafkalog.storage.log import Log

    base = 1_700_000_000_000
    part = str(tmp_path / "t-0")
    log = Log.open(part, {"segment.bytes": 6000})
    for b in range(60):
        mb = MemoryRecordsBuilder()
        for _ in range(10):  # the later batches' timestamps dip below earlier ones
            mb.append(base + b - (7 if b % 9 == 4 else 0), None, b"x" * 40)
        log.append(mb.build())
    log.close()
    logs = sorted(n for n in os.listdir(part) if n.endswith(".log"))
    assert len(logs) >= 3
    for name in logs[:2]:
        seg = os.path.join(part, name)
        ti = seg[:-4] + ".timeindex"
        if index == "empty":
            os.truncate(ti, 0)
        elif index == "missing":
            os.unlink(ti)
        secs = (base - 3_600_000 if mtime == "before" else base + 3_600_000) / 1000
        os.utime(seg, (secs, secs))
    ds = kafkalog.dataset(str(tmp_path))
    whole = ds.to_table(columns=["offset", "timestamp"])
    for bound in (base - 10, base, base + 1, base + 5, base + 20, base + 40, base + 59,
                  base + 60):
        expr = f("timestamp") >= _ts(bound)
        sc = ds.scanner(columns=["offset", "timestamp"], filter=expr)
        assert rows(sc.to_table()) == rows(whole.filter(expr)), (bound, sc.fetches)


def test_unknown_topic_and_loose_segments(tmp_path, root, twin):
    """A directory not named <topic>-<partition>: topic and partition are null, a filter on
    them leaves it out without reading it; a segment file given alone is filtered exactly."""
    d = tmp_path / "copied segments"
    shutil.copytree(os.path.join(root, "orders-0"), d)
    ds = kafkalog.dataset(str(d))
    t = ds.to_table(columns=["topic", "partition", "offset"])
    assert t.num_rows > 0 and t.column("topic").null_count == t.num_rows
    sc = ds.scanner(filter=f("topic") == "orders")
    assert sc.partitions == [] and sc.to_table().num_rows == 0
    assert ds.count_rows(filter=f("topic").is_null()) == t.num_rows
    seg = sorted(n for n in os.listdir(os.path.join(root, "orders-0")) if n.endswith(".log"))[1]
    one = kafkalog.dataset(os.path.join(root, "orders-0", seg))
    expr = f("offset") < 200
    assert rows(one.to_table(filter=expr)) == rows(reference(one, expr))


def test_columns_not_asked_for_are_not_decoded(root, twin, monkeypatch):
    bits = []
    core = ka._core

    class Spy:
        COLUMN_BITS = core.COLUMN_BITS
        IMPLEMENTATION = core.IMPLEMENTATION

        @staticmethod
        def Decoder(b, **kw):
            bits.append(b)
            return core.Decoder(b, **kw)

    monkeypatch.setattr(ka, "_core", Spy)
    ds = kafkalog.dataset(root, topics=["orders"])
    ds.to_table(columns=["offset"], filter=f("timestamp") > _ts(T0))
    cb = core.COLUMN_BITS
    heavy = cb["key"] | cb["value"] | cb["headers"]
    assert bits and all(b & heavy == 0 for b in bits)
    assert all(b & cb["timestamp"] for b in bits)  # the filter's column
    bits.clear()
    ds.to_table(columns=["key"])
    assert all(b & cb["key"] and not b & (cb["value"] | cb["headers"]) for b in bits)


def test_read_committed_dataset(root, twin):
    ds = kafkalog.dataset(root, topics=["payments"], read_committed=True)
    want = ka.to_arrow(os.path.join(root, "payments-0"), ["offset", "value"],
                       read_committed=True)
    assert rows(ds.to_table(columns=["offset", "value"])) == rows(want)
    got = ds.to_table(columns=["offset"], filter=f("offset") > 200)
    assert got.column("offset").to_pylist() == [o for o in want.column("offset").to_pylist()
                                                if o > 200]


# -- the engines -------------------------------------------------------------------------------
@pytest.fixture
def scanner_calls(monkeypatch):
    calls = []
    real_scanner = KafkaLogDataset.scanner

    def scanner(self, *args, **kwargs):
        calls.append(("scanner", kwargs))
        return real_scanner(self, *args, **kwargs)

    real_batches = KafkaLogDataset.to_batches

    def to_batches(self, **kwargs):
        calls.append(("to_batches", kwargs))
        return real_batches(self, **kwargs)

    monkeypatch.setattr(KafkaLogDataset, "scanner", scanner)
    monkeypatch.setattr(KafkaLogDataset, "to_batches", to_batches)
    return calls


def test_duckdb_pushes_projection_and_filters(root, twin, scanner_calls, bytes_read):
    duckdb = pytest.importorskip("duckdb")
    ds = kafkalog.dataset(root)  # noqa: F841 - DuckDB finds it by name
    bytes_read["n"] = 0
    got = duckdb.sql("""select topic, partition, "offset", octet_length(value) as n from ds
                        where topic in ('orders', 'events') and partition = 1
                          and "offset" between 100 and 119 order by all""").fetchall()
    pushed = bytes_read["n"]
    kind, kw = scanner_calls[-1]
    assert kind == "scanner"
    assert sorted(kw["columns"]) == ["offset", "partition", "topic", "value"]
    text = str(kw["filter"])
    assert "is_in(topic" in text and "(partition == 1)" in text and "offset >= 100" in text
    full = ka.to_arrow(root, ["topic", "partition", "offset", "value"])
    want = sorted((r["topic"], r["partition"], r["offset"],
                   None if r["value"] is None else len(r["value"]))
                  for r in full.to_pylist()
                  if r["topic"] in ("orders", "events") and r["partition"] == 1
                  and 100 <= r["offset"] <= 119)
    assert got == want and len(got) == 40
    sc = kafkalog.dataset(root).scanner(columns=kw["columns"], filter=kw["filter"])
    assert sc.partitions == [("events", 1), ("orders", 1)]
    bytes_read["n"] = 0
    duckdb.sql("select count(*) from ds").fetchall()
    assert pushed < bytes_read["n"] / 10
    # a timestamp predicate as DuckDB hands it over, and its exact rows
    got = duckdb.sql("""select count(*) from ds where topic = 'orders'
                        and timestamp >= TIMESTAMPTZ '2023-11-14 22:13:23+00'""").fetchall()
    ms = int(dt.datetime(2023, 11, 14, 22, 13, 23, tzinfo=dt.timezone.utc).timestamp() * 1000)
    assert got[0][0] == sum(1 for r in full.to_pylist() if r["topic"] == "orders") - sum(
        1 for r in ka.to_arrow(root, ["topic", "timestamp"], timestamp_unit=None).to_pylist()
        if r["topic"] == "orders" and r["timestamp"] < ms)
    assert "timestamp >=" in str(scanner_calls[-1][1]["filter"])


def test_polars_pushes_projection_and_filters(root, twin, scanner_calls):
    pl = pytest.importorskip("polars")
    ds = kafkalog.dataset(root)
    got = (pl.scan_pyarrow_dataset(ds)
           .filter((pl.col("offset") >= 50) & (pl.col("offset") < 60)
                   & pl.col("topic").is_in(["legacy"]))
           .select("partition", "offset").collect())
    kind, kw = scanner_calls[0]  # (to_batches then makes a scanner of the same arguments)
    assert kind == "to_batches" and kw["batch_size"] > 0
    assert kw["columns"] == ["topic", "partition", "offset"] or \
        sorted(kw["columns"]) == ["offset", "partition", "topic"]
    sc = ds.scanner(columns=kw["columns"], filter=kw["filter"])
    assert sc.partitions == [("legacy", 0), ("legacy", 1)]
    assert sc.pushdown.describe()["offsets"] == [(50, 59)]
    assert got.sort(["partition", "offset"]).rows() == [(p, o) for p in (0, 1)
                                                         for o in range(50, 60)]
    ts = (pl.scan_pyarrow_dataset(ds)
          .filter(pl.col("timestamp") >= dt.datetime(2023, 11, 14, 22, 13, 25,
                                                       tzinfo=dt.timezone.utc))
          .select(pl.len()).collect().item())
    assert ts == ds.count_rows(filter=f("timestamp") >= _ts(1_700_000_005_000))


def test_every_read_is_a_stream(root, twin):
    """iter_batches and a scan are pyarrow RecordBatchReaders (Arrow's C stream): DuckDB,
    Polars and pandas take them as they are."""
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    r = ka.iter_batches(root, ["topic", "offset"], max_rows=500)
    assert isinstance(r, pa.RecordBatchReader) and hasattr(r, "__arrow_c_stream__")
    n = duckdb.sql("select count(*) from r").fetchall()[0][0]
    assert n == ka.to_arrow(root, ["offset"]).num_rows
    sc = kafkalog.dataset(root).scanner(columns=["partition", "offset"],
                                        filter=f("topic") == "orders")
    stream = pa.RecordBatchReader.from_stream(sc)  # through __arrow_c_stream__
    assert stream.schema.names == ["partition", "offset"]
    df = pl.from_arrow(sc.to_reader())
    assert df.height == stream.read_all().num_rows > 0
    pytest.importorskip("pandas")
    assert len(sc.to_reader().read_pandas()) == df.height
    # errors surface as kafkalog's, from inside the stream
    with pytest.raises(TypeError):
        kafkalog.dataset(root).scanner(filter="offset > 3")


def test_kafkalog_dataset_before_and_after_its_module_is_imported(root):
    """``kafkalog.dataset`` is a function until the submodule is imported (``import kafkalog``
    imports no pyarrow), the callable submodule afterwards: both calls work."""
    import subprocess
    import sys

    code = ("import sys, kafkalog; assert 'pyarrow' not in sys.modules; "
            "a = kafkalog.dataset(sys.argv[1]); b = kafkalog.dataset(sys.argv[1]); "
            "print(type(kafkalog.dataset).__name__, a.count_rows() == b.count_rows() > 0)")
    out = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["_CallableModule", "True"]
