"""kafkalog.polars.scan_kafka_log: a Polars IO source over Kafka logs.  Every query's rows equal
Polars' own answer over the whole log (``pl.from_arrow(to_arrow(root))``) with the same query,
in both engines (in-memory and streaming); what was pushed into the read is checked through the
dataset scanner each scan runs (``on_scan``): the columns decoded, the pyarrow filter the Polars
predicate became, the partitions opened and the offset ranges fetched."""
from __future__ import annotations

import datetime as dt
import os

import pytest

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

import kafkalog  # noqa: E402
import kafkalog.arrow as ka  # noqa: E402
import kafkalog.polars  # noqa: E402
from kafkalog import _arrow_py  # noqa: E402
from kafkalog.demo import generate  # noqa: E402
from kafkalog.polars import arrow_filter, scan_kafka_log  # noqa: E402

from kl_support import PURE  # noqa: E402

try:
    from kafkalog import _arrow as _arrow_c
except ImportError:  # pragma: no cover - pure-only installs
    _arrow_c = None

TWINS = ["python"] if PURE or _arrow_c is None else ["cython", "python"]
c = pl.col
T0 = dt.datetime.fromtimestamp(1_700_000_000, dt.timezone.utc)  # kafkalog.demo's first ms
KEYS = ["topic", "partition", "offset"]


@pytest.fixture(params=TWINS)
def twin(request, monkeypatch):
    mod = _arrow_c if request.param == "cython" else _arrow_py
    monkeypatch.setattr(ka, "_core", mod)
    return request.param


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """4 topics, 8 partitions (every codec, v0/v1 messages, transactions), 16 KiB segments."""
    r = str(tmp_path_factory.mktemp("pl") / "root")
    generate(r, records=4000, segment_bytes=16 * 1024)
    return r


@pytest.fixture(scope="module")
def whole(root):
    """The whole log, decoded by to_arrow and handed to Polars: the reference."""
    return pl.from_arrow(ka.to_arrow(root))


def scan(root, **kw):
    scans = []
    return scan_kafka_log(root, on_scan=scans.append, **kw), scans


# name -> (predicate, partitions opened, offsets fetched fewer than all, exactly translated)
PREDICATES = {
    "partition ==": (c("partition") == 1, 3, False, True),
    "partition is_in": (c("partition").is_in([0, 2]), 5, False, True),
    "topic ==, offset range": ((c("topic") == "orders") & (c("offset") >= 100)
                               & (c("offset") < 130), 3, True, True),
    "offset is_between": (c("offset").is_between(10, 12), 8, True, True),
    "offset is_between open": (c("offset").is_between(10, 14, closed="none"), 8, True, True),
    "offset is_in": (c("offset").is_in([0, 77, 300, 301, 10 ** 6]), 8, True, True),
    "literal first": (pl.lit(5) > c("offset"), 8, True, True),
    "or of offsets": ((c("offset") < 5) | (c("offset") > 440), 8, True, True),
    "topic is_in or": (c("topic").is_in(["events"]) | (c("topic") == "legacy"), 4, False, True),
    "timestamp >=": (c("timestamp") >= T0 + dt.timedelta(seconds=3), 8, True, True),
    "timestamp between": (c("timestamp").is_between(T0 + dt.timedelta(seconds=1),
                                                    T0 + dt.timedelta(seconds=1.2)),
                          8, True, True),
    "never": ((c("offset") < 5) & (c("offset") > 10), 0, True, True),
    # partly pushed: the rest applied by Polars' own expression to the rows read
    "pushed & value": ((c("partition") == 1) & (c("offset") < 50)
                       & (c("value").bin.size() > 60), 3, True, False),
    "pushed & headers": ((c("topic") == "orders") & c("headers").is_not_null()
                         & (c("offset") >= 400), 3, True, False),
    # nothing pushed: every partition and offset read, the predicate applied to the rows
    "value only": (c("value").bin.starts_with(b"\x00"), 8, False, False),
    # translated exactly, but an or across columns narrows no column: read whole
    "or across columns": ((c("offset") == 3) | (c("partition") == 1), 8, False, True),
    "not is_in": (~c("offset").is_in([1, 2]), 8, False, False),
    # Polars writes ~(x == v) as x != v before handing it over: pushed
    "not ==": (~(c("partition") == 0), 4, False, True),
    "float bound": (c("offset") > 99.5, 8, False, False),
    "key null": (c("key").is_null(), 8, False, False),
}
ENGINES = ["in-memory", "streaming"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_rows_exact_and_what_was_pushed(root, whole, twin, name, engine, monkeypatch):
    pred, opened, narrower, exact = PREDICATES[name]
    translated = []

    def spy(predicate, schema):
        translated.append(arrow_filter(predicate, schema))
        return translated[-1]

    monkeypatch.setattr(kafkalog.polars, "arrow_filter", spy)
    lf, scans = scan(root)
    got = lf.filter(pred).select("topic", "partition", "offset", "value").collect(engine=engine)
    want = whole.filter(pred).select("topic", "partition", "offset", "value")
    assert got.sort(KEYS).equals(want.sort(KEYS)), name
    (sc,) = scans
    assert len(sc.partitions) == opened, sc.partitions
    everything = sum(n for n in whole.group_by("topic", "partition").len()["len"])
    fetched = sum(f.end - f.start for f in sc.fetches)
    if narrower:
        assert fetched < everything, (fetched, everything)
    elif opened == 8:
        assert fetched >= everything
    # decoded: the query's columns and the predicate's, nothing else
    needed = {"topic", "partition", "offset", "value"} | set(pred.meta.root_names())
    assert set(sc.columns) <= needed, sc.columns
    assert (sc.filter is not None) == (exact or narrower or opened < 8)
    # the predicate as Polars handed it over: translated exactly (Polars applies nothing
    # after the source) or partly (the source applies the whole predicate to the rows)
    assert [x[1] for x in translated] == [exact]


def lf_schema(root):
    return kafkalog.dataset(root).schema


@pytest.mark.parametrize("engine", ENGINES)
def test_projection_decodes_only_what_the_query_uses(root, whole, twin, engine):
    lf, scans = scan(root)
    got = (lf.filter(c("partition") == 2).group_by("topic")
           .agg(c("offset").max().alias("last"), pl.len()).sort("topic").collect(engine=engine))
    want = (whole.filter(c("partition") == 2).group_by("topic")
            .agg(c("offset").max().alias("last"), pl.len()).sort("topic"))
    assert got.equals(want) and got.height == 1
    assert sorted(scans[-1].columns) == ["offset", "partition", "topic"]
    assert scans[-1].partitions == [("orders", 2)]
    # a count decodes one column, not the values
    assert lf.select(pl.len()).collect(engine=engine).item() == whole.height
    assert len(scans[-1].columns) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_n_rows_stops_the_read(root, whole, twin, engine):
    lf, scans = scan(root)
    got = lf.head(7).collect(engine=engine)
    assert got.equals(whole.head(7))
    # the read stopped in the first partition: the others were never fetched
    assert {(f.topic, f.partition) for f in scans[-1].fetches} == {whole.row(0)[2:4]}
    got = lf.filter(c("offset") >= 250).select("offset").head(3).collect(engine=engine)
    assert got["offset"].to_list() == [250, 251, 252]
    assert lf.head(0).collect(engine=engine).height == 0


def test_batch_size_and_polars_hint(root, whole, twin):
    lf, scans = scan(root, batch_size=100)
    frames = []
    got = lf.select("offset").collect()
    assert got.height == whole.height and scans[-1].batch_size == 100
    reader = scans[-1].to_reader()
    frames = [b.num_rows for b in reader]
    assert max(frames) <= 100 and sum(frames) == whole.height
    lf, scans = scan(root)
    lf.select("offset").collect()
    assert scans[-1].batch_size > 0  # Polars' own hint
    with pytest.raises(ValueError, match="batch_size"):
        scan_kafka_log(root, batch_size=0)
    with pytest.raises(TypeError, match="batch_size"):
        scan_kafka_log(root, batch_size="10")


def test_schema_options_and_a_dataset(root, whole, twin):
    lf = scan_kafka_log(root)
    assert lf.collect_schema() == whole.schema
    assert lf.collect_schema()["timestamp"] == pl.Datetime("ms", "UTC")
    us = scan_kafka_log(root, timestamp_unit="us", include_headers=False, batch_metadata=True,
                        topics=["payments"], read_committed=True)
    schema = us.collect_schema()
    assert schema["timestamp"] == pl.Datetime("us", "UTC") and "headers" not in schema
    assert "producerId" in schema
    want = pl.from_arrow(ka.to_arrow(os.path.join(root, "payments-0"), ["offset"],
                                     read_committed=True))
    got = (us.filter(c("timestamp") >= T0).select("offset")
           .collect(engine="streaming"))
    assert got["offset"].to_list() == [o for o, t in zip(
        want["offset"], ka.to_arrow(os.path.join(root, "payments-0"), ["timestamp"],
                                    read_committed=True, timestamp_unit=None)
        .column("timestamp").to_pylist()) if t >= 1_700_000_000_000]
    ds = kafkalog.dataset(root, topics=["legacy"])
    got = scan_kafka_log(ds).select("topic").unique().collect()
    assert got["topic"].to_list() == ["legacy"]
    with pytest.raises(TypeError, match="topics"):
        scan_kafka_log(ds, topics=["orders"])


def test_a_predicate_polars_refuses_is_refused_the_same(root, whole, twin):
    """A naive datetime against the UTC column: not pushed, and Polars' own error, as it
    raises over the reference."""
    pred = c("timestamp") >= dt.datetime(2023, 11, 14)
    with pytest.raises(pl.exceptions.PolarsError) as mine:
        scan_kafka_log(root).filter(pred).collect()
    with pytest.raises(pl.exceptions.PolarsError) as theirs:
        whole.lazy().filter(pred).collect()
    assert type(mine.value) is type(theirs.value)


def test_arrow_filter_translations(root):
    schema = lf_schema(root)
    f = pa.compute.field
    got, exact = arrow_filter((c("partition") == 3) & (c("offset").is_between(1, 9)), schema)
    assert exact and got.equals((f("partition") == 3) & ((f("offset") >= 1) & (f("offset") <= 9)))
    got, exact = arrow_filter((c("offset") > 5) & (c("value").bin.size() > 1), schema)
    assert not exact and got.equals(f("offset") > 5)
    got, exact = arrow_filter((c("offset") > 5) | (c("value").bin.size() > 1), schema)
    assert got is None and not exact
    assert arrow_filter(None, schema) == (None, True)
    got, exact = arrow_filter(c("topic").is_in(["a", "b"]), schema)
    assert exact and "is_in(topic" in str(got) and '"a"' in str(got)
