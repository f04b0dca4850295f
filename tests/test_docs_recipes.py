"""docs/arrow.md's recipes run: each ```python block of its "Recipes" section is taken out of the
page, pointed at a generated log instead of /var/lib/kafka, executed, and what it computed is
compared with the same answer worked out here from ``kafkalog.arrow.to_arrow`` (so the page
can neither break nor drift from the code)."""
from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict

import pytest

from kl_support import ROOT

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
pytest.importorskip("polars")
pytest.importorskip("pandas")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog.demo import generate  # noqa: E402

DOC = ROOT / "docs" / "arrow.md"
PLACEHOLDER = '"/var/lib/kafka"'


def recipes() -> dict:
    """``{"DuckDB": code, "Polars": code, "pandas": code}``: the Recipes section's blocks, by
    their ``####`` heading."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^### Recipes.*?$(.*?)^### ", text, re.S | re.M)
    assert m, "docs/arrow.md has no '### Recipes' section"
    out = {}
    for part in re.split(r"^#### ", m.group(1), flags=re.M)[1:]:
        name = part.split("\n", 1)[0].strip()
        blocks = re.findall(r"```python\n(.*?)```", part, re.S)
        assert len(blocks) == 1, name
        out[name] = blocks[0]
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = str(tmp_path_factory.mktemp("recipes") / "root")
    generate(r, records=4000, segment_bytes=32 * 1024)
    return r


@pytest.fixture(scope="module")
def orders(root):
    """The topic the recipes read, row by row."""
    t = ka.to_arrow(root, ["partition", "offset", "key", "value", "timestamp"],
                    topics=["orders"], timestamp_unit=None)
    return t.to_pylist()


def run(name, root):
    code = recipes()[name]
    assert code.count(PLACEHOLDER) == 1, f"the {name} recipe names its log once, as {PLACEHOLDER}"
    ns: dict = {}
    exec(compile(code.replace(PLACEHOLDER, repr(root)), f"docs/arrow.md:{name}", "exec"), ns)
    return ns


def _ms(*args):
    return int(dt.datetime(*args, tzinfo=dt.timezone.utc).timestamp() * 1000)


def test_the_recipes_are_there():
    assert list(recipes()) == ["DuckDB", "Polars", "pandas"]


def test_duckdb_recipe(root, orders):
    ns = run("DuckDB", root)
    lo, hi = _ms(2023, 11, 14, 22), _ms(2023, 11, 14, 23)
    per = defaultdict(lambda: [0, 0])
    for r in orders:
        if lo <= r["timestamp"] <= hi:
            per[r["partition"]][0] += 1
            per[r["partition"]][1] += len(r["value"] or b"")
    assert ns["per_partition"] == [(p, n, b) for p, (n, b) in sorted(per.items())]
    assert sum(n for _, n, _ in ns["per_partition"]) > 0
    latest = {}
    for r in orders:
        if r["key"] is not None:
            k = (r["partition"], r["key"])
            if k not in latest or r["offset"] > latest[k][0]:
                latest[k] = (r["offset"], r["value"])
    got = {(x["partition"], x["key"]): (x["offset"], x["value"])
           for x in ns["latest"].to_pylist()}
    assert got == latest
    totals = defaultdict(float)
    import json

    for r in orders:
        if r["partition"] == 1 and r["offset"] >= 100 and r["value"] is not None:
            totals[None if r["key"] is None else r["key"].decode()] += \
                json.loads(r["value"])["amount"]
    want = sorted(totals.items(), key=lambda kv: -kv[1])[:5]
    assert [k for k, _ in ns["amounts"]] == [k for k, _ in want]
    assert [round(v, 6) for _, v in ns["amounts"]] == [round(v, 6) for _, v in want]


def test_polars_recipe(root, orders):
    import json

    ns = run("Polars", root)
    since = _ms(2023, 11, 14, 22)
    per = defaultdict(lambda: [0, 0])
    for r in orders:
        if r["timestamp"] >= since:
            minute = r["timestamp"] // 60_000 * 60_000
            per[minute][0] += 1
            per[minute][1] += len(r["value"] or b"")
    got = ns["per_minute"]
    assert [int(t.timestamp() * 1000) for t in got["timestamp"]] == sorted(per)
    assert got["records"].to_list() == [per[m][0] for m in sorted(per)]
    assert got["bytes"].to_list() == [per[m][1] for m in sorted(per)]
    totals = defaultdict(float)
    for r in orders:
        if r["partition"] == 0 and r["value"] is not None:
            key = None if r["key"] is None else r["key"].decode()
            totals[key] += json.loads(r["value"])["amount"]
    amounts = dict(zip(ns["amounts"]["customer"], ns["amounts"]["amount"]))
    assert amounts.keys() == totals.keys()
    assert all(abs(amounts[k] - v) < 1e-6 for k, v in totals.items())
    first = ns["first"]
    assert first.height == 5 and all(o >= 200 for o in first["offset"])


def test_pandas_recipe(root, orders):
    ns = run("pandas", root)
    kept = [r for r in orders if r["partition"] in (0, 2) and r["offset"] < 1000]
    df = ns["df"]
    assert len(df) == len(kept) > 0
    assert sorted(zip(df["partition"], df["offset"])) == sorted(
        (r["partition"], r["offset"]) for r in kept)
    sizes = ns["sizes"]
    assert sorted(sizes.index) == [0, 2]
    assert int(sizes["count"].sum()) == sum(1 for r in kept if r["value"] is not None)
    assert ns["total"] == sum(len(r["value"] or b"") for r in orders)
