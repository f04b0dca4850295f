"""kafkalog.dataset over the S3 test server: the same rows as over the local copy for every
pushed filter, and the pushdown measured in what the store served (bytes fetched)."""
from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

import kafkalog  # noqa: E402
import kafkalog.arrow as ka  # noqa: E402
from kafkalog.storage import store_fs as _store_fs  # noqa: E402

SMALL_BLOCKS = {"block_size": 64 * 1024}
f = pc.field


@pytest.fixture
def fetched(monkeypatch):
    """The store clients made meanwhile (their ``bytes_read`` count what was fetched)."""
    made = []
    orig = _store_fs.ArrowFileSystem.for_uri

    def spy(uri, opts=None):
        got = orig(uri, opts)
        made.append(got)
        return got

    monkeypatch.setattr(_store_fs.ArrowFileSystem, "for_uri", staticmethod(spy))
    return lambda: sum(x.bytes_read for x in made)


FILTERS = [
    (f("offset") >= 300) & (f("offset") < 320),
    f("partition").isin([1]) & (f("offset") > 700),
    pc.if_else(f("topic").is_valid(), f("topic").isin(["orders"]), pa.scalar(None, pa.bool_())),
    (f("timestamp") >= pa.scalar(1_700_000_000_000 + 50_000, pa.timestamp("ms", tz="UTC"))),
    (f("offset") == 5) | (f("offset") == 600),
    f("value") == b"x",
]


@pytest.mark.parametrize("i", range(len(FILTERS)))
def test_remote_scan_equals_local(s3_root, log_root, i):
    expr = FILTERS[i]
    cols = ["topic", "partition", "offset", "timestamp", "value"]
    local = kafkalog.dataset(log_root).to_table(columns=cols, filter=expr)
    remote = kafkalog.dataset(s3_root, storage_options=dict(SMALL_BLOCKS))
    sc = remote.scanner(columns=cols, filter=expr)
    got = sc.to_table()
    assert got.equals(local)
    # the same partitions and ranges as locally
    assert sc.fetches == (lambda s: (s.to_table(), s.fetches)[1])(
        kafkalog.dataset(log_root).scanner(columns=cols, filter=expr))


def test_pushed_filters_fetch_little_of_the_store(big_partition, fetched):
    """One partition of 20,000 records (4 MiB in 4 segments) in the store: a scan fetches what
    its offset or timestamp filter needs, a small part of what the whole read fetches."""
    local, uri = big_partition
    so = dict(SMALL_BLOCKS)
    before = fetched()
    kafkalog.dataset(uri, storage_options=so).to_table(columns=["offset"])
    full = fetched() - before
    assert full >= sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local)
                       if n.endswith(".log"))
    t0 = 1_700_000_000_000
    for expr, share in ((f("offset").isin([9000, 9001]), 0.05),
                        ((f("offset") >= 15000) & (f("offset") < 15100), 0.05),
                        ((f("partition") == 0) & (f("offset") < 10), 0.05),
                        (f("timestamp") >= pa.scalar(t0 + 19000, pa.timestamp("ms", tz="UTC")),
                         0.12)):
        ds = kafkalog.dataset(uri, storage_options=so)
        before = fetched()
        sc = ds.scanner(columns=["offset", "value"], filter=expr)
        t = sc.to_table()
        got = fetched() - before
        assert t.num_rows > 0 and t.equals(
            kafkalog.dataset(local).to_table(columns=["offset", "value"], filter=expr))
        assert got < full * share, (str(expr), got, full)
        print(f"{expr}: fetched {got} of {full} bytes; ranges {sc.fetches}")


def test_duckdb_over_the_store(s3_root, log_root):
    duckdb = pytest.importorskip("duckdb")
    remote = kafkalog.dataset(s3_root, storage_options=dict(SMALL_BLOCKS))  # noqa: F841
    local = kafkalog.dataset(log_root)  # noqa: F841
    q = """select topic, partition, count(*), min("offset"), max("offset") from {}
           where "offset" >= 200 and partition in (0, 1) group by all order by all"""
    assert duckdb.sql(q.format("remote")).fetchall() == duckdb.sql(q.format("local")).fetchall()
    # to_arrow of a glob in the store: the partitions it names, with topic and partition
    t = ka.to_arrow(s3_root + "/orders-*", ["topic", "partition", "offset"],
                    storage_options=dict(SMALL_BLOCKS))
    assert t.equals(ka.to_arrow(os.path.join(log_root, "orders-*"),
                                ["topic", "partition", "offset"]))
    assert set(t.column("topic").to_pylist()) == {"orders"}
