"""The Spark source plans and reads with the storage read model (issue 27): its log start,
log end, last stable offset and aborted transactions are ``LogView``'s, so its rows are
``to_arrow(dir)``'s on the logs where the copies it kept before disagreed (an open transaction
older than the log start, DeleteRecords, an unreadable log-start checkpoint, missing
transaction indexes, a CRC-bad tail after a crash).  Spark-free (plan + read_split)."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog.spark import _discovery, _options, _planning, _tasks  # noqa: E402
from kafkalog.storage import checkpoints as _checkpoints  # noqa: E402
from kafkalog.storage import files as _files  # noqa: E402
from kafkalog.storage.log import Log, open_view  # noqa: E402

from kl_support import append_marker as _marker  # noqa: E402
from kl_support import append_plain as _plain  # noqa: E402
from kl_support import append_txn as _txn  # noqa: E402


def _spark(root, committed=False, **extra):
    opts = _options.ReadOptions.parse({
        "path": root, "kafka.isolation.level": "read_committed" if committed else
        "read_uncommitted", **extra})
    schema = pa.schema([pa.field("offset", pa.int64())])
    (tp,) = _discovery.discover(opts)
    offsets = [o for s in _planning.plan(opts) for rb in _tasks.read_split(s, opts, schema)
               for o in rb.column(0).to_pylist()]
    return tp, offsets


def _agrees(root, d, committed=False):
    """The planner's offsets are the view's and its rows are to_arrow's; the rows."""
    tp, got = _spark(root, committed)
    with open_view(d) as v:
        assert (tp.earliest(), tp.latest(), tp.last_stable()) == \
            (v.log_start_offset, v.log_end_offset, v.last_stable_offset)
    assert got == ka.to_arrow(d, ["offset"], read_committed=committed).column(0).to_pylist()
    return got


def test_lso_clamped_to_log_start(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 200}) as log:
        _txn(log, 1)  # offset 0: open since before the log start
        for _ in range(6):
            _plain(log, 2)
        log.increment_log_start_offset(5)
    assert _agrees(str(tmp_path), d, committed=True) == []
    tp, _ = _spark(str(tmp_path), committed=True)
    assert tp.last_stable() == 5


def test_log_start_checkpoint_hides_deleted_records(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 200}) as log:
        for _ in range(5):
            _plain(log, 2)
    _checkpoints.update_offset_checkpoint(
        os.path.join(str(tmp_path), _files.LOG_START_OFFSET_CHECKPOINT_FILE), {("t", 0): 3})
    assert _agrees(str(tmp_path), d) == list(range(3, 10))
    assert _spark(d)[1] == list(range(3, 10))  # the partition directory itself


def test_unreadable_log_start_checkpoint_warns(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        _plain(log, 4)
    with open(os.path.join(str(tmp_path), _files.LOG_START_OFFSET_CHECKPOINT_FILE), "w") as f:
        f.write("garbage\n")
    with pytest.warns(RuntimeWarning, match="log start offset checkpoint"):
        assert _spark(str(tmp_path))[1] == [0, 1, 2, 3]


def test_missing_txnindex_follows_the_index(tmp_path):
    """Aborted transactions come from the transaction indexes only (rebuilt by recovery past
    the recovery point), not from ABORT markers found in the data."""
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 250}) as log:
        _plain(log, 1)
        _txn(log, 2)
        log.roll()
        _txn(log, 2, seq=2)
        _marker(log, False)
        _plain(log, 1)
    for n in os.listdir(d):
        if n.endswith(".txnindex"):
            os.unlink(os.path.join(d, n))
    assert _agrees(str(tmp_path), d, committed=True) == [0, 1, 2, 3, 4, 6]
    os.unlink(os.path.join(d, _files.CLEAN_SHUTDOWN_FILE))
    os.unlink(os.path.join(str(tmp_path), _files.RECOVERY_POINT_CHECKPOINT_FILE))
    assert _agrees(str(tmp_path), d, committed=True) == [0, 6]


def test_crc_bad_tail_after_a_crash_ends_the_log(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        for _ in range(4):
            _plain(log, 2)
    seg = os.path.join(d, "00000000000000000000.log")
    data = bytearray(open(seg, "rb").read())
    data[-1] ^= 0xFF
    open(seg, "wb").write(bytes(data))
    os.unlink(os.path.join(d, _files.CLEAN_SHUTDOWN_FILE))
    os.unlink(os.path.join(str(tmp_path), _files.RECOVERY_POINT_CHECKPOINT_FILE))
    assert _agrees(str(tmp_path), d) == list(range(6))
    assert _spark(str(tmp_path))[0].latest() == 6
