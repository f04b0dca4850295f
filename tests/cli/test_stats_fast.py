"""The record-object-free walk of ``kafkalog stats`` (``v2_stats_run`` over runs of plain
batches, ``v2_record_summary`` + ``hll_update`` per batch) against the general path: for
generated v2 logs (every codec, null keys and values, many distinct keys so the HyperLogLog
takes over, LogAppendTime, control batches, flipped bytes), ``stats --json`` gives the same
figures and errors with the walk in use and with it turned off; the two twins of the walk
agree with each other."""
from __future__ import annotations

import importlib
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog import MemoryRecordsBuilder, compression
from kafkalog._format import CompressionType
from kafkalog.tools import stats

from .conftest import BASE_TS, run_cli

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
TWINS = [importlib.import_module("kafkalog._dump_py")]
if not PURE:
    TWINS.append(importlib.import_module("kafkalog._dump"))
CODECS = ["none"] + [c for c in ("gzip", "snappy", "lz4", "zstd")
                     if compression.available(CompressionType.parse(c))]
SETTINGS = settings(max_examples=int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", 100)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

text = st.none() | st.binary(max_size=8)
batch = st.fixed_dictionaries({
    "records": st.lists(st.tuples(text, text, st.integers(-5, 5)), min_size=1, max_size=6),
    "distinct": st.sampled_from([0, 0, 3000]),   # extra distinct keys: past 4096 overall
    "codec": st.sampled_from(CODECS),
    "ts_type": st.sampled_from(["create_time", "log_append_time"]),
    "control": st.sampled_from([False, False, False, True]),
})


def build(specs):
    out, offset = [], 0
    for n, spec in enumerate(specs):
        b = MemoryRecordsBuilder(2, spec["codec"], offset, spec["ts_type"],
                                 7 if spec["control"] else -1, 0 if spec["control"] else -1,
                                 is_transactional=spec["control"], is_control_batch=spec["control"],
                                 log_append_time=BASE_TS + 7)
        if spec["control"]:
            b.append_with_offset(offset, BASE_TS, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
            offset += 1
        else:
            for k, v, dts in spec["records"]:
                b.append_with_offset(offset, BASE_TS + dts, k, v)
                offset += 1
            for i in range(spec["distinct"]):
                b.append_with_offset(offset, BASE_TS + i, b"key-%d-%d" % (n, i), b"v")
                offset += 1
        out.append(b.build())
    return b"".join(out)


def stats_both(tmp_path, raw, monkeypatch):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(raw)
    fast = run_cli("stats", "--json", str(path))
    with monkeypatch.context() as m:
        m.setattr(stats._walk, "v2_record_summary", lambda *a: None)
        # the batch walk counts nothing: it stops where it starts
        m.setattr(stats._walk, "v2_stats_run",
                  lambda *a: (a[1], 0, 0, None, None, 0, 0, 0, 0, None, None))
        slow = run_cli("stats", "--json", str(path))
    return fast, slow


@SETTINGS
@given(specs=st.lists(batch, min_size=1, max_size=4), data=st.data())
def test_walk_equals_the_general_path(tmp_path_factory, monkeypatch, specs, data):
    tmp = tmp_path_factory.mktemp("stats")
    raw = bytearray(build(specs))
    for _ in range(data.draw(st.sampled_from([0, 0, 1, 3]))):
        i = data.draw(st.integers(61, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    fast, slow = stats_both(tmp, bytes(raw), monkeypatch)
    assert (fast.rc, fast.out, fast.err) == (slow.rc, slow.out, slow.err)
    json.loads(fast.out.splitlines()[0])  # it is the JSON report


def test_walk_counts_what_the_records_hold(tmp_path, monkeypatch):
    """A known batch: the figures themselves, not only agreement."""
    raw = build([{"records": [(b"a", b"1", 0), (None, b"2", 3), (b"a", None, -2), (b"b", b"3", 1)],
                  "distinct": 0, "codec": "none", "ts_type": "create_time", "control": False}])
    fast, slow = stats_both(tmp_path, raw, monkeypatch)
    seg = json.loads(fast.out.splitlines()[0])
    assert (seg["records"], seg["nullKeys"], seg["tombstones"], seg["distinctKeys"]) == (4, 1, 1, 2)
    assert (seg["minTimestamp"], seg["maxTimestamp"]) == (BASE_TS - 2, BASE_TS + 3)
    assert fast.out == slow.out
    from kafkalog import MemoryRecords

    (b,) = MemoryRecords(raw).batches()
    summary = stats._walk.v2_record_summary(b.records_section(), b.records_count, b.base_timestamp,
                                            None)
    assert summary == (4, 1, 1, BASE_TS - 2, BASE_TS + 3, [b"a", b"a", b"b"])  # the walk was taken


@SETTINGS
@given(specs=st.lists(batch, min_size=1, max_size=3), cut=st.integers(0, 40))
def test_twins_agree(specs, cut):
    from kafkalog import MemoryRecords

    for b in MemoryRecords(build(specs)).batches():
        section = b.records_section()
        section = bytes(section)[: max(0, len(section) - cut)] if cut % 3 == 0 else section
        append_ts = b.max_timestamp if b.timestamp_type.name == "LOG_APPEND_TIME" else None
        got = {tw.__name__: tw.v2_record_summary(section, b.records_count, b.base_timestamp,
                                                 append_ts)
               for tw in TWINS}
        assert len({repr(v) for v in got.values()}) == 1, got
        keys = [bytes([i % 256]) * (i % 7) for i in range(300)] + [b"k%d" % i for i in range(2000)]
        regs = {}
        for tw in TWINS:
            r = bytearray(1 << 14)
            tw.hll_update(r, keys, 14)
            regs[tw.__name__] = bytes(r)
        assert len(set(regs.values())) == 1


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_hll_update_checks_its_registers(twin):
    with pytest.raises(ValueError):
        twin.hll_update(bytearray(100), [b"x"], 14)
    r = bytearray(16)
    twin.hll_update(r, [b"x"] * 3, 4)
    assert sum(1 for v in r if v) == 1


def _stats_walk(twin, raw, exact, cache_len, limit, max_walk):
    """``v2_stats_run`` called until it stops, switching to HyperLogLog past ``limit`` keys as
    ``stats`` does: (each call's result, exact keys or None, registers, producers)."""
    regs = bytearray(1 << 14) if exact is None else None
    cache = [None] * cache_len
    producers, calls, pos = set(), [], 0
    while True:
        r = twin.v2_stats_run(memoryview(raw), pos, len(raw), exact, cache, regs, 14, limit,
                              max_walk, producers)
        calls.append(r)
        if exact is not None and len(exact) > limit:
            regs = bytearray(1 << 14)
            twin.hll_update(regs, list(exact), 14)
            exact = None
        if r[0] == pos:
            return calls, exact, None if regs is None else bytes(regs), producers
        pos = r[0]


@SETTINGS
@given(specs=st.lists(batch, min_size=1, max_size=4), data=st.data())
def test_batch_walk_twins_agree(specs, data):
    """Both twins of the batch walk count the same, stop at the same places and leave the same
    keys (exact set or registers) and producers, for any walk limit and exact-key limit, with
    a key cache of any size (1 and 2 slots: every key collides), on whole and damaged logs."""
    raw = bytearray(build(specs))
    for _ in range(data.draw(st.sampled_from([0, 0, 1, 3]))):
        i = data.draw(st.integers(8, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    raw = bytes(raw)
    exact = data.draw(st.booleans())
    cache_len = data.draw(st.sampled_from([1, 2, 8192]))
    limit = data.draw(st.sampled_from([0, 3, 4096]))
    max_walk = data.draw(st.sampled_from([1, 500, 1 << 40]))
    got = [_stats_walk(t, raw, set() if exact else None, cache_len, limit, max_walk) for t in TWINS]
    assert all(g == got[0] for g in got)


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.__name__)
def test_batch_walk_counts_a_known_log(twin):
    """The figures themselves: three plain batches, then a compressed one the walk leaves."""
    specs = [{"records": [(b"a", b"1", 0), (None, b"2", 3), (b"a", None, -2)], "distinct": 0,
              "codec": "none", "ts_type": "create_time", "control": False},
             {"records": [(b"b", b"3", 1)], "distinct": 0, "codec": "none",
              "ts_type": "log_append_time", "control": False},
             {"records": [(b"c", b"3", 1)], "distinct": 0, "codec": "none",
              "ts_type": "create_time", "control": False},
             {"records": [(b"d", b"4", 1)], "distinct": 0, "codec": CODECS[-1],
              "ts_type": "create_time", "control": False}]
    raw = build(specs)
    exact, producers = set(), set()
    r = twin.v2_stats_run(raw, 0, len(raw), exact, [None] * 4, None, 14, 4096, 1 << 40, producers)
    stop = len(raw) if CODECS[-1] == "none" else len(raw) - len(build(specs[3:]))
    batches = 4 if CODECS[-1] == "none" else 3
    assert r[:3] == (stop, batches, 5 + batches - 3)
    assert r[3:] == (0, batches + 1, 0, r[6], 1, 1, BASE_TS - 2, BASE_TS + 7)
    assert exact == ({b"a", b"b", b"c", b"d"} if batches == 4 else {b"a", b"b", b"c"})
    with pytest.raises(ValueError):
        twin.v2_stats_run(raw, 0, len(raw), set(), [None] * 3, None, 14, 4096, 1, producers)
    with pytest.raises(ValueError):
        twin.v2_stats_run(raw, 0, len(raw) + 1, set(), [None], None, 14, 4096, 1, producers)
