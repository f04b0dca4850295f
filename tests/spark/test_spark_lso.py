"""The last stable offset the Spark source plans with (``DiscoveredPartition.last_stable``: the
storage read model's, ``LogView.last_stable_offset`` of the directory as files) against the
one a live ``kafkalog.storage.log.Log`` keeps in its producer state, over generated
transactional logs (several producers, commits, aborts, rolls, reopens that write snapshots);
and batch reads with read_committed ending there.  Spark-free; runs in both twins."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkalog.control import build_end_txn_marker  # noqa: E402
from kafkalog.records import MemoryRecordsBuilder  # noqa: E402
from kafkalog.spark import _discovery, _errors, _options, _planning, _tasks  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

# Recent timestamps: a producer whose last batch is older than producer.id.expiration.ms (a day)
# is forgotten when a reopened log loads its snapshot, as Kafka does; a fixed old timestamp
# made some generated sequences (txn, end, reopen, end, txn) fail on a sequence check that
# Kafka makes too, not on what this module tests.
TS = int(time.time() * 1000) - 60_000
PIDS = (1, 2, 3)


class TxnLog:
    """A partition ``t-0`` written through Log: plain and transactional batches, markers."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "t-0"
        self.config = {"segment.bytes": 2048}
        self.log = Log.open(self.dir, self.config)
        self.seq = {p: 0 for p in PIDS}
        self.n = 0

    def plain(self, n: int) -> None:
        b = MemoryRecordsBuilder()
        for _ in range(n):
            b.append(TS + self.n, None, b"plain-%d" % self.n)
            self.n += 1
        self.log.append(b.build())

    def txn(self, pid: int, n: int) -> None:
        b = MemoryRecordsBuilder(
            producer_id=pid, producer_epoch=0, base_sequence=self.seq[pid], is_transactional=True
        )
        for _ in range(n):
            b.append(TS + self.n, None, b"txn-%d-%d" % (pid, self.n))
            self.n += 1
        self.seq[pid] += n
        self.log.append(b.build())

    def end(self, pid: int, commit: bool) -> None:
        self.log.append(build_end_txn_marker(commit, pid, 0, 0, timestamp=TS), origin="coordinator")

    def reopen(self) -> None:
        self.log.close()  # a clean close writes a producer snapshot at the log end
        self.log = Log.open(self.dir, self.config)

    def tp(self) -> _discovery.DiscoveredPartition:
        self.log.flush()
        opts = _options.ReadOptions.parse({"path": str(self.dir.parent)})
        (tp,) = _discovery.discover(opts)
        return tp


ops = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.integers(1, 4)),
        st.tuples(st.just("txn"), st.sampled_from(PIDS), st.integers(1, 4)),
        st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans()),
        st.tuples(st.just("roll")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("check")),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops)
def test_last_stable_offset_matches_the_log(steps):
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-lso-"))
    t = TxnLog(tmp)
    try:
        for op in steps + [("check",)]:
            if op[0] == "plain":
                t.plain(op[1])
            elif op[0] == "txn":
                t.txn(op[1], op[2])
            elif op[0] == "end":
                t.end(op[1], op[2])
            elif op[0] == "roll":
                t.log.roll()
            elif op[0] == "reopen":
                t.reopen()
            else:
                want = t.log.last_stable_offset
                assert t.tp().last_stable() == want  # from the files alone
                assert t.tp().latest(read_committed=True) == want
                assert t.tp().latest() == t.log.log_end_offset
    finally:
        t.log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _offsets(root, **options):
    opts = _options.ReadOptions.parse(
        {"path": str(root), "kafka.isolation.level": "read_committed", **options}
    )
    schema = pa.schema([pa.field("offset", pa.int64()), pa.field("value", pa.binary())])
    out = []
    for split in _planning.plan(opts):
        for rb in _tasks.read_split(split, opts, schema):
            out += list(zip(rb.column(0).to_pylist(), rb.column(1).to_pylist()))
    return out


def test_batch_read_committed_ends_at_the_last_stable_offset(tmp_path):
    """An open transaction's records (and everything after its start) are not read; under
    read_committed the last stable offset is the end, so endingOffsets past it is data loss
    (an error, or with failOnDataLoss=false a read that stops there); once the transaction
    aborts, the read goes on without its records."""
    t = TxnLog(tmp_path)
    t.plain(2)  # 0, 1
    t.txn(1, 2)  # 2, 3: committed below
    t.end(1, True)  # 4
    t.txn(2, 2)  # 5, 6: open
    t.plain(2)  # 7, 8: after the LSO
    t.log.flush()
    assert t.log.last_stable_offset == 5
    got = _offsets(tmp_path)
    assert [o for o, _ in got] == [0, 1, 2, 3]
    with pytest.raises(_errors.OptionError, match=r"endingOffsets asks for offsets up to 9 but the "
                       r"last stable offset \(read_committed\) is 5\."):
        _offsets(tmp_path, endingOffsets='{"t":{"0":9}}')
    got = _offsets(tmp_path, endingOffsets='{"t":{"0":9}}', failOnDataLoss="false")
    assert [o for o, _ in got] == [0, 1, 2, 3]
    t.end(2, False)  # 9: the open transaction aborts
    t.log.flush()
    got = _offsets(tmp_path)
    assert [o for o, _ in got] == [0, 1, 2, 3, 7, 8]
    t.log.close()
