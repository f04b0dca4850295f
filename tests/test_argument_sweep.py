"""Every public entry point given out-of-range or mistyped arguments raises a documented
exception type (TypeError, ValueError or a kafkalog error) - never struct.error,
OverflowError, IndexError, a raw OSError or a crash."""

from __future__ import annotations

import pytest

from kafkalog import MemoryRecords, MemoryRecordsBuilder
from kafkalog.errors import KafkaLogError
from kafkalog.storage.index import OffsetIndex, TimeIndex
from kafkalog.storage.log import Log
from kafkalog.storage.segment import Segment
from kafkalog.storage.txn_index import TransactionIndex

BOUNDARY = [
    -(2**64),
    -(2**63) - 1,
    -(2**63),
    -(2**31) - 1,
    -1,
    0,
    2**31 - 1,
    2**31,
    2**32,
    2**63 - 1,
    2**63,
    2**64,
    None,
    "1",
    1.5,
    b"\x00",
]
ALLOWED = (TypeError, ValueError, KafkaLogError)


def _batch(n: int = 3, compression: str = "none") -> bytes:
    b = MemoryRecordsBuilder(2, compression, 0)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i)
    return b.build()


def _follower_batch(base: int) -> bytes:
    b = MemoryRecordsBuilder(2, "none", base)
    b.append(1_700_000_000_000, None, b"v")
    return b.build()


def _log(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 4096})
    for _ in range(3):
        log.append(_batch())
    return log


def _segment(tmp_path):
    seg = Segment.open(str(tmp_path), 0, max_index_size=4096)
    data = _batch()
    seg.append(2, 1_700_000_000_002, 2, MemoryRecords(data))
    return seg


# (name, factory(tmp_path) -> object, method, valid keyword arguments)
TARGETS = [
    ("Log.append", _log, "append", {"records": _batch(), "leader_epoch": 0}),
    ("Log.append_as_follower", _log, "append_as_follower", {"records": _follower_batch(9)}),
    ("Log.read", _log, "read", {"offset": 0, "max_bytes": 1000, "max_offset": None}),
    ("Log.iter_batches", _log, "iter_batches", {"start_offset": 0}),
    ("Log.iter_records", _log, "iter_records", {"start_offset": 0}),
    ("Log.offset_for_timestamp", _log, "offset_for_timestamp", {"timestamp": 0}),
    ("Log.increment_log_start_offset", _log, "increment_log_start_offset", {"new_start": 1}),
    ("Log.truncate_to", _log, "truncate_to", {"target_offset": 5}),
    ("Log.truncate_fully_and_start_at", _log, "truncate_fully_and_start_at", {"new_offset": 20}),
    (
        "Log.collect_aborted_transactions",
        _log,
        "collect_aborted_transactions",
        {"start_offset": 0, "upper_bound_offset": 5},
    ),
    ("Segment.read", _segment, "read", {"start_offset": 0, "max_size": 100, "max_position": None}),
    ("Segment.translate_offset", _segment, "translate_offset", {"offset": 0}),
    ("Segment.find_offset_by_timestamp", _segment, "find_offset_by_timestamp", {"timestamp": 0}),
    ("Segment.truncate_to", _segment, "truncate_to", {"offset": 1}),
    ("Segment.iter_batches", _segment, "iter_batches", {"start_position": 0, "end_position": None}),
    ("Segment.collect_aborted_txns", _segment, "collect_aborted_txns",
     {"fetch_offset": 0, "upper_bound_offset": 3}),
    ("Segment.resize_indexes", _segment, "resize_indexes", {"size": 4096}),
    (
        "OffsetIndex.append",
        lambda p: OffsetIndex(str(p / "0.index"), 0, 4096),
        "append",
        {"offset": 1, "position": 0},
    ),
    ("OffsetIndex.lookup", lambda p: OffsetIndex(str(p / "0.index"), 0, 4096), "lookup",
     {"target_offset": 0}),
    ("OffsetIndex.resize", lambda p: OffsetIndex(str(p / "0.index"), 0, 4096), "resize",
     {"new_size": 4096}),
    ("OffsetIndex.truncate_to", lambda p: OffsetIndex(str(p / "0.index"), 0, 4096), "truncate_to",
     {"offset": 0}),
    (
        "TimeIndex.maybe_append",
        lambda p: TimeIndex(str(p / "0.timeindex"), 0, 4096),
        "maybe_append",
        {"timestamp": 5, "offset": 1},
    ),
    ("TimeIndex.lookup", lambda p: TimeIndex(str(p / "0.timeindex"), 0, 4096), "lookup",
     {"target_timestamp": 0}),
    (
        "TransactionIndex.collect_aborted_txns",
        lambda p: TransactionIndex(0, str(p / "0.txnindex")),
        "collect_aborted_txns",
        {"fetch_offset": 0, "upper_bound_offset": 3},
    ),
    (
        "MemoryRecordsBuilder.append",
        lambda p: MemoryRecordsBuilder(2, "none", 0),
        "append",
        {"timestamp": 0, "key": b"k", "value": b"v"},
    ),
    (
        "MemoryRecordsBuilder.append_with_offset",
        lambda p: MemoryRecordsBuilder(2, "none", 0),
        "append_with_offset",
        {"offset": 0, "timestamp": 0, "key": b"k", "value": b"v"},
    ),
]

try:
    import pyarrow  # noqa: F401

    import kafkalog.arrow as _ka
except ImportError:  # pragma: no cover - without the [arrow] extra
    _ka = None

if _ka is not None:
    _BUF = _batch(3, "gzip")
    _TABLE = _ka.to_arrow(_BUF)

    class _Arrow:
        """The arrow module's functions, as methods (the sweep calls methods)."""

        def to_arrow(self, **kw):
            return _ka.to_arrow(_BUF, **kw)

        def iter_batches(self, **kw):
            return _ka.iter_batches(_BUF, **kw)

        def from_arrow(self, **kw):
            return _ka.from_arrow(_TABLE, **kw)

        def write_arrow(self, **kw):
            return None  # covered through Log.append_as_follower

    TARGETS += [
        (
            "arrow.to_arrow",
            lambda p: _Arrow(),
            "to_arrow",
            {"max_batch_size": None, "max_decompressed_size": 1 << 20, "start_position": 0,
             "partition": None},
        ),
        (
            "arrow.iter_batches",
            lambda p: _Arrow(),
            "iter_batches",
            {"max_rows": 10, "max_bytes": 1 << 20, "max_decompressed_size": 1 << 20},
        ),
        (
            "arrow.from_arrow",
            lambda p: _Arrow(),
            "from_arrow",
            {"batch_bytes": 1 << 20, "batch_records": None, "base_offset": 0, "producer_id": -1,
             "producer_epoch": -1, "base_sequence": -1, "partition_leader_epoch": 0,
             "compression_level": None},
        ),
    ]

CONSTRUCTORS = [
    ("OffsetIndex", lambda p, **kw: OffsetIndex(**kw),
     {"path": None, "base_offset": 0, "max_index_size": 4096}),
    ("TimeIndex", lambda p, **kw: TimeIndex(**kw),
     {"path": None, "base_offset": 0, "max_index_size": 4096}),
    ("TransactionIndex", lambda p, **kw: TransactionIndex(**kw), {"start_offset": 0, "path": None}),
    (
        "MemoryRecordsBuilder",
        lambda p, **kw: MemoryRecordsBuilder(**kw),
        {"magic": 2, "compression_type": "none", "base_offset": 0},
    ),
    (
        "Segment.open",
        lambda p, **kw: Segment.open(str(p), **kw),
        {"base_offset": 0, "max_index_size": 4096, "index_interval_bytes": 4096},
    ),
    ("Log.open config", lambda p, **kw: Log.open(p / "t-0", kw), {"segment.bytes": 1 << 20}),
    (
        "MemoryRecords",
        lambda p, **kw: [list(b) for b in MemoryRecords(_batch(3, "gzip"), **kw)],
        {"max_decompressed_size": 1 << 20},
    ),
]


def _exercise(result):
    # Generators only run when iterated.
    if hasattr(result, "__next__"):
        for _ in result:
            pass


def _sweep(tmp_path, name, call, valid):
    leaks = []
    for param in valid:
        for value in BOUNDARY:
            kwargs = dict(valid)
            kwargs[param] = value
            try:
                _exercise(call(kwargs))
            except ALLOWED:
                pass
            except Exception as e:  # noqa: BLE001 - the point of the test
                leaks.append(f"{name}({param}={value!r}): {type(e).__name__}: {e}")
    return leaks


@pytest.mark.parametrize("name,factory,method,valid", TARGETS, ids=[t[0] for t in TARGETS])
def test_methods_raise_only_documented_errors(tmp_path, name, factory, method, valid):
    objects = []

    def call(kwargs):
        d = tmp_path / str(len(objects))
        d.mkdir()
        obj = factory(d)
        objects.append(obj)
        return getattr(obj, method)(**kwargs)

    try:
        leaks = _sweep(tmp_path, name, call, valid)
    finally:
        for obj in objects:
            close = getattr(obj, "close", None)
            if close is not None:
                try:
                    close()
                except ALLOWED:
                    pass
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("name,make,valid", CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS])
def test_constructors_raise_only_documented_errors(tmp_path, monkeypatch, name, make, valid):
    made = []
    monkeypatch.chdir(tmp_path)  # a swept relative path ("1") lands here, not in the checkout

    def call(kwargs):
        d = tmp_path / str(len(made))
        d.mkdir()
        made.append(d)
        obj = make(d, **kwargs)
        close = getattr(obj, "close", None)
        if close is not None:
            close()

    leaks = _sweep(tmp_path, name, call, valid)
    assert not leaks, "\n".join(leaks)
