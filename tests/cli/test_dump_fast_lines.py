"""The compiled record-line formatter and batch walk of ``kafkalog dump --deep-iteration``
against the general path: for generated v2 logs (every codec, null and non-ASCII and malformed
UTF-8 keys, values and header keys, LogAppendTime, sequences near Int.MAX, offset gaps, flipped
bytes), ``dump`` prints the same bytes and reports the same non-consecutive offsets and errors
with them in use and with them turned off.  Both twins of each are compared too."""
from __future__ import annotations

import importlib
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog import MemoryRecordsBuilder, compression
from kafkalog._format import CompressionType
from kafkalog.tools import dump

from .conftest import BASE_TS, run_cli

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
TWINS = [importlib.import_module("kafkalog._dump_py")]
if not PURE:
    TWINS.append(importlib.import_module("kafkalog._dump"))
CODECS = ["none"] + [c for c in ("gzip", "snappy", "lz4", "zstd")
                     if compression.available(CompressionType.parse(c))]
SETTINGS = settings(max_examples=int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", 150)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

text = st.none() | st.binary(max_size=12) | st.sampled_from(
    [b"plain", "gr\u00fc\u00df".encode(), b"\xff\xfe bad", b"\xed\xa0\x80", "\u20ac".encode()[:2]])
header = st.tuples(st.sampled_from(["h", "k\u00e9y", "x\udcff"]), st.none() | st.binary(max_size=4))
batch = st.fixed_dictionaries({
    "records": st.lists(st.tuples(text, text, st.lists(header, max_size=2), st.integers(1, 3),
                                  st.integers(-5, 5)), min_size=1, max_size=6),
    "codec": st.sampled_from(CODECS),
    "ts_type": st.sampled_from(["create_time", "log_append_time"]),
    "seq": st.sampled_from([-1, 0, 2**31 - 3]),
})


def build(specs):
    out, offset = [], 0
    for spec in specs:
        pid, epoch = (-1, -1) if spec["seq"] < 0 else (9, 0)
        b = MemoryRecordsBuilder(2, spec["codec"], offset, spec["ts_type"], pid, epoch, spec["seq"],
                                 log_append_time=BASE_TS + 7)
        for k, v, hd, step, dts in spec["records"]:
            b.append_with_offset(offset, BASE_TS + dts, k, v, hd)
            offset += step
        out.append(b.build())
    return b"".join(out)


def dump_both(tmp_path, raw, *args, monkeypatch):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(raw)
    fast = run_cli("dump", "--files", str(path), *args)
    with monkeypatch.context() as m:
        m.setattr(dump, "_fast_record_lines", lambda *a: None)
        # the batch walk takes nothing: (no text, where it started, the last offset given)
        m.setattr(dump._lines, "v2_dump_run", lambda *a: (0, a[1], a[3]))
        slow = run_cli("dump", "--files", str(path), *args)
    return fast, slow


@SETTINGS
@given(specs=st.lists(batch, min_size=1, max_size=4), data=st.data())
@pytest.mark.parametrize("args", [("--deep-iteration",), ("--print-data-log",)])
def test_fast_record_lines_equal_the_general_path(tmp_path_factory, monkeypatch, specs, data, args):
    tmp = tmp_path_factory.mktemp("dump")
    raw = bytearray(build(specs))
    for _ in range(data.draw(st.sampled_from([0, 0, 1, 3]))):
        i = data.draw(st.integers(61, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    fast, slow = dump_both(tmp, bytes(raw), *args, monkeypatch=monkeypatch)
    assert (fast.rc, fast.out, fast.err) == (slow.rc, slow.out, slow.err)


@SETTINGS
@given(specs=st.lists(batch, min_size=1, max_size=3), cut=st.integers(0, 40),
       last=st.integers(-1, 50))
def test_formatter_twins_agree(specs, cut, last):
    raw = build(specs)
    spec = specs[0]
    b = MemoryRecordsBuilder  # noqa: F841 - the section comes from the first batch
    from kafkalog import RecordBatch

    batch0 = RecordBatch(raw, 0, check_crc=False)
    section = bytes(batch0.records_section())
    section = section[: max(0, len(section) - cut)] if cut % 3 == 0 else section
    args = (section, batch0.records_count, batch0.base_offset, batch0.base_timestamp,
            batch0.max_timestamp if spec["ts_type"] == "log_append_time" else None,
            batch0.base_sequence, b"CreateTime", bool(cut & 1), last, dump._u8)
    results = [t.v2_record_lines(*args) for t in TWINS]
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("zigzag", [0x03, 0x09, 0x7F])
@pytest.mark.parametrize("field", ["key", "value"])
def test_negative_lengths_other_than_minus_one_print_as_null(tmp_path, monkeypatch, zigzag, field):
    """A key or value length of -2, -5 or -64 is a null, which Kafka's dump prints as size -1
    (the general path); the compiled formatter once printed the raw length."""
    raw = bytearray(build([{"records": [(None, None, [], 1, 0)], "codec": "none",
                            "ts_type": "create_time", "seq": -1}]))
    at = 61 + 4 + (0 if field == "key" else 1)   # length, attributes, ts delta, offset delta
    assert raw[at] == 0x01                        # zigzag -1: null
    raw[at] = zigzag
    fast, slow = dump_both(tmp_path, bytes(raw), "--print-data-log", monkeypatch=monkeypatch)
    assert (fast.rc, fast.out, fast.err) == (slow.rc, slow.out, slow.err)
    assert b"keySize: -1 valueSize: -1 " in fast.out


def _walk(twin, raw, contents, last, limit, max_walk, end=None):
    """``v2_dump_run`` called until it stops: (text, where it stopped, last offset, gaps)."""
    end = len(raw) if end is None else end
    out, text, gaps, pos = bytearray(b"stale bytes"), [], [], 0
    while True:
        n, npos, last = twin.v2_dump_run(memoryview(raw), pos, end, last, contents, dump._u8, gaps,
                                         out, limit, max_walk)
        assert 0 <= n <= len(out) and pos <= npos <= end
        text.append(bytes(out[:n]))
        if npos == pos:
            return b"".join(text), pos, last, gaps
        pos = npos


@SETTINGS
@given(specs=st.lists(batch, min_size=1, max_size=4), data=st.data())
def test_batch_walk_twins_agree(specs, data):
    """Both twins of the batch walk give the same text, stop at the same place and report the
    same gaps, for any output limit, walk limit and end, on whole and damaged logs; cutting the
    walk into many calls changes nothing."""
    raw = bytearray(build(specs))
    for _ in range(data.draw(st.sampled_from([0, 0, 1, 3]))):
        i = data.draw(st.integers(8, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    raw = bytes(raw)
    contents = data.draw(st.booleans())
    last = data.draw(st.sampled_from([-1, 0, 5, 2**63 - 1]))
    end = data.draw(st.integers(0, len(raw)))
    whole = [_walk(t, raw, contents, last, 1 << 30, 1 << 40, end) for t in TWINS]
    assert all(w == whole[0] for w in whole)
    limit = data.draw(st.integers(1, 400))
    max_walk = data.draw(st.integers(1, 3000))
    for t in TWINS:
        assert _walk(t, raw, contents, last, limit, max_walk, end) == whole[0]


def test_batch_walk_lines_are_the_general_lines(tmp_path, monkeypatch):
    """Plain batches (CRC good and bad, transactional, LogAppendTime, a delete horizon, a
    sequence past Int.MAX at the last record) go through the walk and print what the general
    path prints; a compressed or control batch and a legacy entry end a run, and the walk picks
    up after them."""
    specs = [
        {"records": [(b"k", b"v", [], 1, 0), (None, b"x", [("h", b"1")], 2, 3)], "codec": "none",
         "ts_type": "create_time", "seq": -1},
        {"records": [(b"a", None, [], 1, -2)] * 4, "codec": "none", "ts_type": "log_append_time",
         "seq": 2**31 - 3},
        {"records": [(b"a", b"b", [], 1, 0)], "codec": CODECS[-1], "ts_type": "create_time",
         "seq": 0},
        {"records": [(b"c", b"d", [], 1, 0)] * 3, "codec": "none", "ts_type": "create_time",
         "seq": 0},
    ]
    raw = bytearray(build(specs))
    raw[100] ^= 0x20                                  # the first batch's CRC no longer matches
    calls = []
    real = dump._lines.v2_dump_run

    def spy(*a):
        r = real(*a)
        calls.append((a[1], r[1]))
        return r

    monkeypatch.setattr(dump._lines, "v2_dump_run", spy)
    fast, slow = dump_both(tmp_path, bytes(raw), "--print-data-log", monkeypatch=monkeypatch)
    assert (fast.rc, fast.out, fast.err) == (slow.rc, slow.out, slow.err)
    assert b"isvalid: false" in fast.out and fast.out.count(b"baseOffset:") == 4
    # Int.MAX + 1 wraps to 0 (the general path's business)
    assert (b"sequence: 2147483647 headerKeys: [] key: a\n| offset: 6 LogAppendTime: "
            b"1700000000007 keySize: 1 valueSize: -1 sequence: 0 ") in fast.out
    assert any(npos > pos for pos, npos in calls)     # the walk did print batches
    assert any(npos == pos for pos, npos in calls)    # and left some to the general path


@pytest.mark.parametrize("base", [2**63 - 2, 2**63 - 12, 99, -3])
def test_offsets_across_long_max_and_decimal_carries(tmp_path, monkeypatch, base):
    """Record offsets and timestamps that step past Long.MAX (Java wraps them to Long.MIN),
    across a carry of every digit and through zero print as the general path prints them (set
    in the bytes: the base timestamp's change makes the CRC mismatch, printed alike)."""
    raw = bytearray(build([{"records": [(b"k", b"v", [], 1, i) for i in range(12)],
                            "codec": "none", "ts_type": "create_time", "seq": -1}]))
    raw[0:8] = base.to_bytes(8, "big", signed=True)
    raw[27:35] = base.to_bytes(8, "big", signed=True)
    fast, slow = dump_both(tmp_path, bytes(raw), "--deep-iteration", monkeypatch=monkeypatch)
    assert (fast.rc, fast.out, fast.err) == (slow.rc, slow.out, slow.err)
    if base == 2**63 - 2:
        assert b"| offset: 9223372036854775807 CreateTime: 9223372036854775807 " in fast.out
        assert b"| offset: -9223372036854775808 CreateTime: -9223372036854775808 " in fast.out


def test_a_stream_that_keeps_what_it_is_given(tmp_path):
    """The batch walk reuses one buffer for its chunks of text: a stream that keeps the objects
    it is given (no copy) still ends up with the whole dump, as a BytesIO does."""
    import io

    class Keep(io.RawIOBase):
        def __init__(self):
            self.parts = []

        def writable(self):
            return True

        def write(self, b):
            self.parts.append(b)
            return len(b)

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(build([{"records": [(b"key-%d" % i, b"v" * 200, [], 1, 0) for i in range(400)],
                             "codec": "none", "ts_type": "create_time", "seq": -1}] * 8))
    kept, copied = Keep(), io.BytesIO()
    for out in (kept, copied):
        dump.Dumper(dump.DumpOptions(print_data_log=True), out, io.StringIO()).run([str(path)])
    assert len(copied.getvalue()) > 3 * dump._Out.LIMIT    # several chunks
    assert b"".join(bytes(p) for p in kept.parts) == copied.getvalue()
