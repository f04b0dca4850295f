"""Columnar decode/encode (kafkalog.arrow) against aiokafka's compiled codec, in the same run.

Workloads: the peerbench logs (1M records each; ``/tmp/peerbench-data`` or
``$KAFKALOG_PEERBENCH_DATA``, made by ``../shared/peerbench/make_workloads.py``) when present,
else the seeded logs of ``conftest.py``.  Groups:

* ``decode <workload>``: ``aiokafka-cy`` decodes with ``aiokafka.record.MemoryRecords`` (its
  Cython classes) and touches offset, timestamp, key, value and headers of every record, as
  peerbench's ``_drive_decode``; ``arrow`` is ``kafkalog.arrow.to_arrow(buf)`` with CRC checks,
  ``arrow-nocrc`` without.
* ``decode2t <workload>``: the same on two threads, each decoding one half of the log.
* ``encode <workload>``: aiokafka's ``DefaultRecordBatchBuilder.append`` per record from a list
  of ``(key, value, ts, headers)`` (peerbench's ``_drive_encode``), vs ``from_arrow(table)``
  from a table with the same columns; batches of 16 KiB uncompressed.

Run: ``pytest bench/test_bench_arrow.py --benchmark-group-by=group`` (add
``--benchmark-json=out.json`` to keep the numbers).  At the end a summary prints each group's
medians as records/s, GB/s of input, and the ratio to aiokafka.
"""

from __future__ import annotations

import os
import threading

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402  (after pyarrow is found)

DATA_DIR = os.environ.get("KAFKALOG_PEERBENCH_DATA", "/tmp/peerbench-data")
PEER_WORKLOADS = [
    "v2-none",
    "v2-none-h2",
    "v2-lz4",
    "v2-snappy",
    "v2-zstd",
    "v2-gzip",
    "v1-none",
    "v1-gzip",
]
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ROUNDS = int(os.environ.get("KAFKALOG_BENCH_ROUNDS", "5"))

_RESULTS: dict = {}


def _have_peer_data() -> bool:
    return all(os.path.exists(os.path.join(DATA_DIR, w + ".bin")) for w in ("v2-none",))


def _workload_names():
    if _have_peer_data():
        return [w for w in PEER_WORKLOADS if os.path.exists(os.path.join(DATA_DIR, w + ".bin"))]
    return ["gen-v2-none", "gen-v2-lz4", "gen-v2-zstd", "gen-v1-none"]


_CACHE: dict = {}


@pytest.fixture(scope="module")
def workload(request, records, logs):
    def get(name):
        if name not in _CACHE:
            if name.startswith("gen-"):
                magic = int(name[5])
                codec = CODECS[name.split("-")[-1]]
                buf = logs(codec, magic)
                _CACHE[name] = (buf, len(records), magic, codec)
            else:
                with open(os.path.join(DATA_DIR, name + ".bin"), "rb") as f:
                    buf = f.read()
                import json

                with open(os.path.join(DATA_DIR, name + ".json")) as f:
                    meta = json.load(f)
                _CACHE[name] = (buf, meta["n_records"], meta["magic"], meta["codec_id"])
        return _CACHE[name]

    return get


def _aiokafka():
    try:
        from aiokafka.record import MemoryRecords
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
    except ImportError:
        pytest.skip("aiokafka not installed")
    for cls in (MemoryRecords, DefaultRecordBatchBuilder):
        import sys

        mod = sys.modules.get(cls.__module__)
        if not getattr(mod, "__file__", "").endswith(".so"):
            pytest.skip("aiokafka's Cython extension is not in use")
    return MemoryRecords, DefaultRecordBatchBuilder


def _drive_decode(mr_cls, buf):
    # peerbench's _drive_decode: every record, 5 attribute loads
    mr = mr_cls(buf)
    n = 0
    has_next = mr.has_next
    next_batch = mr.next_batch
    while has_next():
        for r in next_batch():
            r.offset
            r.timestamp
            r.key
            r.value
            r.headers
            n += 1
    return n


def _drive_encode(builder_cls, records, codec, batch_size=16384):
    # peerbench's _drive_encode (magic 2)
    out = []

    def new():
        return builder_cls(2, codec, 0, -1, -1, -1, batch_size)

    b = new()
    d = 0
    for k, v, ts, h in records:
        if b.append(d, ts, k, v, h) is None:
            out.append(b.build())
            b = new()
            d = 0
            b.append(0, ts, k, v, h)
        d += 1
    out.append(b.build())
    return b"".join(out)


def _halves(buf):
    # cut at the batch boundary nearest the middle
    import struct

    pos = 0
    half = len(buf) // 2
    while pos < half:
        pos += struct.unpack_from(">i", buf, pos + 8)[0] + 12
    return buf[:pos], buf[pos:]


def _two_threads(fn, parts):
    res = [None, None]
    bar = threading.Barrier(2)

    def go(j):
        bar.wait()
        res[j] = fn(parts[j])

    ts = [threading.Thread(target=go, args=(j,)) for j in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res


def _record(benchmark, group, impl, n_records, n_bytes):
    benchmark.group = group
    benchmark.extra_info.update(records=n_records, input_bytes=n_bytes)
    med = benchmark.stats.stats.median if benchmark.stats else None
    if med:
        benchmark.extra_info["records_per_s"] = n_records / med
        benchmark.extra_info["gb_per_s"] = n_bytes / med / 1e9
        _RESULTS.setdefault(group, {})[impl] = (med, n_records, n_bytes)


def _run(benchmark, fn):
    return benchmark.pedantic(fn, rounds=ROUNDS, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("impl", ["aiokafka-cy", "arrow", "arrow-nocrc"])
@pytest.mark.parametrize("name", _workload_names())
def test_decode(benchmark, workload, name, impl):
    buf, n, _magic, _codec = workload(name)
    if impl == "aiokafka-cy":
        mr, _ = _aiokafka()
        got = _run(benchmark, lambda: _drive_decode(mr, buf))
    else:
        crc = impl == "arrow"
        got = _run(benchmark, lambda: ka.to_arrow(buf, check_crcs=crc).num_rows)
    assert got == n
    _record(benchmark, f"decode {name}", impl, n, len(buf))


@pytest.mark.parametrize("impl", ["aiokafka-cy", "arrow"])
@pytest.mark.parametrize(
    "name",
    [w for w in _workload_names() if w.endswith(("v2-none", "v2-lz4", "v2-zstd", "v2-snappy"))],
)
def test_decode_two_threads(benchmark, workload, name, impl):
    buf, n, _magic, _codec = workload(name)
    parts = _halves(buf)
    if impl == "aiokafka-cy":
        mr, _ = _aiokafka()
        got = _run(benchmark, lambda: sum(_two_threads(lambda b: _drive_decode(mr, b), parts)))
    else:
        got = _run(benchmark, lambda: sum(t.num_rows for t in _two_threads(ka.to_arrow, parts)))
    assert got == n
    _record(benchmark, f"decode2t {name}", impl, n, len(buf))


@pytest.mark.parametrize("impl", ["aiokafka-cy", "arrow"])
@pytest.mark.parametrize("name", [w for w in _workload_names() if "v2" in w and "gzip" not in w])
def test_encode(benchmark, workload, name, impl):
    buf, n, _magic, codec = workload(name)
    cols = ["key", "value", "timestamp", "headers"]
    table = ka.to_arrow(buf, cols, timestamp_unit=None)
    if impl == "aiokafka-cy":
        _, builder = _aiokafka()
        hdrs = [
            [(h["key"], h["value"]) for h in (x or [])] for x in table.column("headers").to_pylist()
        ]
        recs = list(
            zip(
                table.column("key").to_pylist(),
                table.column("value").to_pylist(),
                table.column("timestamp").to_pylist(),
                hdrs,
            )
        )
        out = _run(benchmark, lambda: _drive_encode(builder, recs, codec))
    else:
        out = _run(benchmark, lambda: ka.from_arrow(table, compression=codec, batch_bytes=16384))
    assert ka.to_arrow(out, ["offset"]).num_rows == n
    _record(benchmark, f"encode {name}", impl, n, len(buf))


class _SummaryPlugin:
    """Prints the ratios at the end of the session (registered by the fixture below, so that
    this file needs no conftest hook)."""

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if not _RESULTS:
            return
        tr.write_sep("-", "kafkalog.arrow vs aiokafka-cy (medians of this run)")
        for group in sorted(_RESULTS):
            res = _RESULTS[group]
            base = res.get("aiokafka-cy")
            for impl, (med, n, nb) in sorted(res.items()):
                ratio = (
                    f"  x{base[0] / med:5.2f} vs aiokafka-cy"
                    if base and impl != "aiokafka-cy"
                    else ""
                )
                tr.write_line(
                    f"{group:22s} {impl:12s} {med * 1e3:9.1f} ms {n / med / 1e6:7.2f} M rec/s "
                    f"{nb / med / 1e9:6.2f} GB/s{ratio}"
                )
        for g, r in sorted(_RESULTS.items()):
            if g.startswith("decode2t "):
                w = g.split(" ", 1)[1]
                one = _RESULTS.get("decode " + w, {}).get("arrow")
                if one and r.get("arrow"):
                    tr.write_line(
                        f"2 threads / 1 thread, arrow, {w}: x{one[0] / r['arrow'][0]:.2f}"
                    )


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    pm = request.config.pluginmanager
    if not pm.has_plugin("kafkalog-arrow-bench-summary"):
        pm.register(_SummaryPlugin(), "kafkalog-arrow-bench-summary")
    yield
