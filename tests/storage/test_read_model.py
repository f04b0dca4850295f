"""One read model (issue 27): the answers every non-Spark entry point gives about one partition
directory agree, and are Kafka's.  Entry points: ``Log.open(read_only=True)``, a writable
``Log.open()``, ``to_arrow(dir)``, ``iter_batches(dir)``, an offset-ranged ``to_arrow`` and the
CLI where it computes the answer; S3 (the moto server of tests/remote) where cheap."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog.errors import CorruptRecordError  # noqa: E402
from kafkalog.storage import checkpoints as _checkpoints  # noqa: E402
from kafkalog.storage import files as _files  # noqa: E402
from kafkalog.storage.log import Log, open_view  # noqa: E402
from kafkalog.storage.log_view import DamageGap  # noqa: E402

from kl_support import append_marker as _marker  # noqa: E402
from kl_support import append_plain as _plain  # noqa: E402
from kl_support import append_txn as _txn  # noqa: E402
from kl_support import entry_positions  # noqa: E402


def _offsets(table):
    return table.column("offset").to_pylist()


def _log_offsets(log, **kw):
    return [r.offset for r in log.iter_records(**kw)]


def _everywhere(d, **kw):
    """The offsets each non-Spark entry point reads from ``d``."""
    isolation = "read_committed" if kw.get("read_committed") else "read_uncommitted"
    out = {}
    with Log.open(d, read_only=True) as log:
        out["Log read-only"] = _log_offsets(log, isolation=isolation)
    out["to_arrow"] = _offsets(ka.to_arrow(d, ["offset"], **kw))
    out["iter_batches"] = [o for b in ka.iter_batches(d, ["offset"], max_rows=3, **kw)
                           for o in b.column(0).to_pylist()]
    out["to_arrow ranged"] = _offsets(ka.to_arrow(d, ["offset"], start_offset=0,
                                                  end_offset=10**9, **kw))
    return out


def _one_answer(answers):
    values = list(answers.values())
    assert all(v == values[0] for v in values), answers
    return values[0]


# -- 2: read_committed stops at the last stable offset --------------------------------------
def test_read_committed_stops_at_lso_of_open_transaction(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        _plain(log, 3)
        _txn(log, 2)  # offsets 3, 4: still open
        _plain(log, 2)  # 5, 6
    answers = _everywhere(d, read_committed=True)
    assert _one_answer(answers) == [0, 1, 2]
    with Log.open(d) as log:  # writable
        assert log.last_stable_offset == 3
        assert _log_offsets(log, isolation="read_committed") == [0, 1, 2]
        # an open Log read into Arrow asks its own read model (it read past the LSO)
        assert _offsets(ka.to_arrow(log, ["offset"], read_committed=True)) == [0, 1, 2]
        assert [o for b in ka.iter_batches(log, ["offset"], read_committed=True, max_rows=2)
                for o in b.column(0).to_pylist()] == [0, 1, 2]
        assert _offsets(ka.to_arrow(log, ["offset"])) == list(range(7))
    # read_uncommitted reads everything
    assert _one_answer(_everywhere(d)) == list(range(7))


# -- 1: the last stable offset never falls below the log start ------------------------------
def test_lso_clamped_to_log_start(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 200}) as log:
        _txn(log, 1)  # offset 0: open since before the log start
        for _ in range(6):
            _plain(log, 2)
        log.increment_log_start_offset(5)
        assert log.log_start_offset == 5
        assert log.last_stable_offset == 5
    with Log.open(d, read_only=True) as log:
        assert log.log_start_offset == 5
        assert log.last_stable_offset == 5
        assert _log_offsets(log, isolation="read_committed") == []
    with open_view(d) as view:
        assert view.last_stable_offset == 5
    assert _one_answer(_everywhere(d, read_committed=True)) == []


# -- 4: DeleteRecords (log start raised in the checkpoint) hides the deleted records ---------
def test_log_start_checkpoint_hides_deleted_records(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 200}) as log:
        for _ in range(5):
            _plain(log, 2)
        assert len(log._segments) > 1
    # a broker's DeleteRecords: only the checkpoint moves (inside a segment, inside a batch)
    _checkpoints.update_offset_checkpoint(
        os.path.join(str(tmp_path), _files.LOG_START_OFFSET_CHECKPOINT_FILE), {("t", 0): 3})
    assert _one_answer(_everywhere(d)) == list(range(3, 10))
    with Log.open(d) as log:
        assert log.log_start_offset == 3
        assert _log_offsets(log) == list(range(3, 10))
    assert _offsets(ka.to_arrow(d, ["offset"], start_offset=1, end_offset=5)) == [3, 4]
    # a log root reads the same
    assert _offsets(ka.to_arrow(str(tmp_path), ["offset"])) == list(range(3, 10))


# -- 5: an unreadable log-start checkpoint: warn, start at the first segment -------------------
def test_unreadable_log_start_checkpoint_warns(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        _plain(log, 4)
    ckpt = os.path.join(str(tmp_path), _files.LOG_START_OFFSET_CHECKPOINT_FILE)
    with open(ckpt, "w") as f:
        f.write("garbage\n")
    with pytest.warns(RuntimeWarning, match="log start offset checkpoint"):
        assert _one_answer(_everywhere(d)) == [0, 1, 2, 3]
    with pytest.warns(RuntimeWarning, match="log start offset checkpoint"):
        with Log.open(d, read_only=True) as log:
            assert log.log_start_offset == 0


# -- 3: no .txnindex, an aborted transaction spanning two segments ----------------------------
def test_missing_txnindex_one_answer(tmp_path):
    """Kafka reads aborted transactions from the transaction index only; a clean log whose
    .txnindex files are gone has none (the aborted records are read), and an unclean log has
    them rebuilt by recovery from the recovery point (dropped), as Kafka's LogLoader does."""
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 250}) as log:
        _plain(log, 1)
        _txn(log, 2)
        log.roll()
        _txn(log, 2, seq=2)
        _marker(log, commit=False)
        _plain(log, 1)
    txns = [n for n in os.listdir(d) if n.endswith(".txnindex")]
    assert txns
    for n in txns:
        os.unlink(os.path.join(d, n))
    last = 6
    clean = _one_answer(_everywhere(d, read_committed=True))
    assert clean == [0, 1, 2, 3, 4, last]  # no index: nothing is known to be aborted
    # without the clean-shutdown marker and no recovery point: recovery rebuilds the index
    os.unlink(os.path.join(d, _files.CLEAN_SHUTDOWN_FILE))
    os.unlink(os.path.join(str(tmp_path), _files.RECOVERY_POINT_CHECKPOINT_FILE))
    assert _one_answer(_everywhere(d, read_committed=True)) == [0, last]


# -- 6: a CRC-bad tail without a clean-shutdown marker: one log end -----------------------------
def test_crc_bad_tail_one_log_end(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        for _ in range(4):
            _plain(log, 2)
    seg = os.path.join(d, "00000000000000000000.log")
    data = bytearray(open(seg, "rb").read())
    data[-1] ^= 0xFF  # the last batch's CRC no longer matches
    open(seg, "wb").write(bytes(data))
    os.unlink(os.path.join(d, _files.CLEAN_SHUTDOWN_FILE))
    os.unlink(os.path.join(str(tmp_path), _files.RECOVERY_POINT_CHECKPOINT_FILE))
    assert _one_answer(_everywhere(d)) == list(range(6))
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 6
    with open_view(d) as view:
        assert view.log_end_offset == 6


# -- 7: a batch size field of 2^31-1 in the middle segment: never a silent stop -------------------
def _oversized_second_batch(tmp_path, config, batches):
    """A log of 2-record batches in three or more segments whose middle segment's second batch
    claims 2^31-1 bytes: (directory, that .log, the batch's position and offset, the segment
    bases, the position of the batch after it, the log end offset)."""
    d = str(tmp_path / "t-0")
    with Log.open(d, config) as log:
        for _ in range(batches):
            _plain(log, 2)
        bases = [s.base_offset for s in log._segments]
        end = log.log_end_offset
    assert len(bases) >= 3
    mid = os.path.join(d, "%020d.log" % bases[1])
    data = bytearray(open(mid, "rb").read())
    first = 12 + struct.unpack_from(">i", data, 8)[0]  # the second batch of the segment
    after = first + 12 + struct.unpack_from(">i", data, first + 8)[0]
    off = struct.unpack_from(">q", data, first)[0]
    struct.pack_into(">i", data, first + 8, 2**31 - 1)
    open(mid, "wb").write(bytes(data))
    return d, mid, first, off, bases, after, end


def _three_segments(tmp_path):
    return _oversized_second_batch(tmp_path, {"segment.bytes": 300}, 9)[:5]


def test_oversized_batch_in_middle_segment_raises(tmp_path):
    d, mid, pos, off, bases = _three_segments(tmp_path)

    def check(e):
        assert e.value.path == mid and e.value.position == pos and e.value.offset == off, e.value

    with pytest.raises(CorruptRecordError) as e:
        ka.to_arrow(d)
    check(e)
    with pytest.raises(CorruptRecordError) as e:
        list(ka.iter_batches(d, max_rows=2))
    check(e)
    for ro in (True, False):
        with Log.open(d, read_only=ro) as log:
            with pytest.raises(CorruptRecordError) as e:
                _log_offsets(log)
            check(e)
    # an offset-ranged read agrees: over the damage it raises, past it it reads
    with pytest.raises(CorruptRecordError) as e:
        ka.to_arrow(d, start_offset=off - 1, end_offset=bases[2] + 1)
    check(e)
    assert _offsets(ka.to_arrow(d, ["offset"], start_offset=bases[2])) == \
        list(range(bases[2], 18))
    # asked to skip damage: the gap is reported, the later records are read; the size field
    # is lost (it claims 2 GB), so the read goes on at the next whole valid batch after it,
    # the batch of offsets off+2.. (the damaged batch's own two records are the gap)
    gaps = []
    with Log.open(d, read_only=True) as log:
        got = _log_offsets(log, on_damage="skip", gaps=gaps)
    assert gaps == [DamageGap(mid, pos, off, off + 2, gaps[0].reason)]
    assert off + 2 < bases[2]
    assert got == list(range(off)) + list(range(off + 2, 18))


# -- 9: local and S3 agree on a CRC-bad batch just past the requested range -----------------------
def crc_bad_past_range(root):
    """A partition ``root/t-0`` of offsets 0-99 in batches of 10 whose batch 90-99 has a bad
    CRC; returns its directory.  (The S3 half of this test is in tests/remote.)"""
    d = str(root / "t-0")
    with Log.open(d) as log:
        for _ in range(10):
            _plain(log, 10)
    seg = os.path.join(d, "00000000000000000000.log")
    data = bytearray(open(seg, "rb").read())
    pos = 0
    while struct.unpack_from(">q", data, pos)[0] != 90:
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    data[pos + 12 + struct.unpack_from(">i", data, pos + 8)[0] - 1] ^= 0xFF
    open(seg, "wb").write(bytes(data))
    return d


def test_crc_bad_batch_past_range(tmp_path):
    d = crc_bad_past_range(tmp_path)
    assert _offsets(ka.to_arrow(d, ["offset"], start_offset=60, end_offset=89)) == \
        list(range(60, 89))
    assert _offsets(ka.to_arrow(d, ["offset"], start_offset=60, end_offset=90)) == \
        list(range(60, 90))
    with pytest.raises(CorruptRecordError):  # a range that holds it reads it
        ka.to_arrow(d, start_offset=60, end_offset=91)
    with pytest.raises(CorruptRecordError):
        ka.to_arrow(d)


# -- 10: a segment truncated under iter_batches(dir) must not kill the reader ---------------------
_READER_CHILD = r"""
import os, sys
from kafkalog.errors import KafkaLogError
d, seg = sys.argv[1], sys.argv[2]
%s
n = next(it).num_rows
os.truncate(seg, 100)
try:
    for b in it:
        b.column(1).to_pylist()
        n += b.num_rows
except KafkaLogError as e:
    print("ERROR", type(e).__name__, getattr(e, "errno", None), e)
    sys.exit(0)
print("ROWS", n)
"""
# the reader each child runs (it: an iterator of record batches of offset and value)
_CHILD = _READER_CHILD % """import kafkalog.arrow as ka
it = ka.iter_batches(d, ["offset", "value"], max_rows=100)"""


def _truncated_under_a_reader(tmp_path, child: str, *args: str):
    """A partition of one segment of over 4 MiB; ``child`` (a script run in a subprocess: it
    gets the directory, the segment and ``args``) cuts the segment to 100 bytes while it reads.
    ``(its output, the log end offset, the segment)``; it must not die (of SIGBUS)."""
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 64 << 20}) as log:
        for _ in range(400):
            _plain(log, 50, value=b"x" * 200)
        end = log.log_end_offset
    seg = os.path.join(d, "00000000000000000000.log")
    assert os.path.getsize(seg) > 4 << 20
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    p = subprocess.run([sys.executable, "-c", child, d, seg, *args], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    return p.stdout.strip(), end, seg


def test_iter_batches_survives_truncation(tmp_path):
    out, end, _seg = _truncated_under_a_reader(tmp_path, _CHILD)
    # the old bytes (all of them), or a clear error asking to read again
    assert out == f"ROWS {end}" or out.startswith("ERROR KafkaStorageError 11 "), out


_TASK_CHILD = _READER_CHILD % """import pyarrow as pa
from kafkalog.spark import _options, _planning, _tasks
opts = _options.ReadOptions.parse({"path": d, "failOnDataLoss": sys.argv[3],
                                   "maxRecordsPerBatch": "100"})
schema = pa.schema([("offset", pa.int64()), ("value", pa.binary())])
_tasks._LOCAL_BLOCK = 1 << 20  # several windows: the rest is read after the cut
splits = _planning.plan(opts)
it = (rb for s in splits for rb in _tasks.read_split(s, opts, schema))"""


@pytest.mark.parametrize("fail", ["true", "false"])
def test_spark_task_survives_truncation(tmp_path, fail):
    """Behaviour 10 for the Spark source's tasks: a segment a broker cuts shorter while a task
    reads it is bytes the task judges (an error naming it, or with failOnDataLoss=false the
    rows it could read), never a SIGBUS that kills the Python worker."""
    pytest.importorskip("pyarrow")
    out, end, seg = _truncated_under_a_reader(tmp_path, _TASK_CHILD, fail)
    if fail == "true":  # the records the task could not read are an error naming the file
        assert out.startswith("ERROR ") and seg in out, out
    else:  # what could be read, and a warning
        assert out.startswith("ROWS ") and 0 < int(out.split()[1]) < end, out


def test_skip_resumes_at_the_next_index_entry(tmp_path):
    """Skipping damage loses only what no index entry points past: with an entry at every
    batch, the records after the damaged batch in the same segment are read (the place the
    Spark source resumes at under failOnDataLoss=false)."""
    d, seg, first, off, bases, after, end = _oversized_second_batch(
        tmp_path, {"segment.bytes": 400, "index.interval.bytes": 1}, 12)
    data = open(seg, "rb").read()
    assert after < len(data), "the segment needs a batch after the damaged one"
    nxt = struct.unpack_from(">q", data, after)[0]
    gaps = []
    with Log.open(d, read_only=True) as log:
        got = _log_offsets(log, on_damage="skip", gaps=gaps)
    assert gaps == [DamageGap(seg, first, off, nxt, gaps[0].reason)]
    assert got == list(range(off)) + list(range(nxt, end))


def test_read_view_checks_each_index_when_first_read(tmp_path, monkeypatch):
    """A read view opens only the last segment's indexes (Kafka opens indexes lazily); an index
    that fails its check when first read is rebuilt in memory, so reads through it answer as
    an eager read-only open does, and no file changes."""
    from kafkalog.storage import index as _index

    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 500, "index.interval.bytes": 1}) as log:
        for _ in range(20):
            _plain(log, 3)
        bases = [s.base_offset for s in log._segments]
    assert len(bases) >= 4
    bad = os.path.join(d, "%020d.index" % bases[1])
    raw = bytearray(open(bad, "rb").read())
    struct.pack_into(">i", raw, 8 * (len(raw) // 8 - 1), -5)  # last entry below the base
    open(bad, "wb").write(bytes(raw))
    before = {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)}

    opened = []
    real = _index.OffsetIndex.__init__

    def spy(self, path, *a, **kw):
        opened.append(os.path.basename(path) if path else None)
        real(self, path, *a, **kw)

    monkeypatch.setattr(_index.OffsetIndex, "__init__", spy)
    with open_view(d) as view:
        assert opened == ["%020d.index" % bases[-1]]
        lazy = [view.position_in(bases[1], o) for o in range(bases[1], bases[2] + 1)]
        got = _log_offsets(view, start_offset=bases[1] + 1)
    monkeypatch.setattr(_index.OffsetIndex, "__init__", real)
    with Log.open(d, read_only=True) as log:  # every index checked on open
        eager = [log.view.position_in(bases[1], o) for o in range(bases[1], bases[2] + 1)]
        want = _log_offsets(log, start_offset=bases[1] + 1)
    assert lazy == eager and None not in lazy[:-1]
    assert got == want == list(range(bases[1] + 1, 60))
    assert {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)} == before


# -- a middle segment's .log that is a dangling or looping symbolic link ------------------------
@pytest.mark.parametrize("link", ["dangling", "looping"])
def test_a_middle_segment_that_is_a_bad_link_is_refused_everywhere(tmp_path, link):
    from kafkalog.errors import KafkaLogError

    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 300}) as log:
        for _ in range(20):
            _plain(log, 3)
    segs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    assert len(segs) >= 3
    mid = os.path.join(d, segs[1])
    os.unlink(mid)
    os.symlink(os.path.join(d, "nowhere") if link == "dangling" else mid, mid)
    readers = {
        "Log read-only": lambda: _log_offsets(Log.open(d, read_only=True)),
        "Log writable": lambda: _log_offsets(Log.open(d)),
        "open_view": lambda: [b.base_offset for b in open_view(d).iter_batches()],
        "to_arrow": lambda: ka.to_arrow(d),
        "iter_batches": lambda: list(ka.iter_batches(d)),
    }
    for name, read in readers.items():
        with pytest.raises(KafkaLogError) as info:
            read()
        assert info.value.path == mid, (name, info.value)
        assert link in str(info.value), (name, info.value)


# -- damaged index entries and checkpoint values give kafkalog errors or warnings ----------------
def test_last_index_entry_with_a_negative_position_is_rebuilt(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d, {"segment.bytes": 3000, "index.interval.bytes": 100}) as log:
        for _ in range(40):
            _plain(log, 3)
    idx = sorted(f for f in os.listdir(d) if f.endswith(".index"))
    assert len(idx) >= 2
    for name in (idx[-1], idx[0]):  # the active segment's, then a middle one's
        p = os.path.join(d, name)
        raw = bytearray(open(p, "rb").read())
        n = len(raw) // 8
        assert n >= 2
        raw[(n - 1) * 8 + 4] |= 0x80  # the position's sign bit
        open(p, "wb").write(bytes(raw))
        for ro in (True, False):
            with Log.open(d, read_only=ro) as log:
                assert log.log_end_offset == 120
                assert _log_offsets(log) == list(range(120))
                assert [next(iter(log.read(o, 1).batches())).base_offset
                        for o in (0, 50, 119)] == [0, 48, 117]
        assert _offsets(ka.to_arrow(d, ["offset"])) == list(range(120))


@pytest.mark.parametrize("value", [2**63, 2**64 + 5, -2**63 - 1])
def test_log_start_checkpoint_out_of_range_is_malformed(tmp_path, value):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        _plain(log, 3)
    with open(os.path.join(str(tmp_path), "log-start-offset-checkpoint"), "w") as f:
        f.write(f"0\n1\nt 0 {value}\n")
    for open_ in (lambda: Log.open(d, read_only=True), lambda: Log.open(d)):
        with pytest.warns(RuntimeWarning, match="cannot read the log start offset checkpoint"):
            log = open_()
        with log:
            assert (log.log_start_offset, log.log_end_offset) == (0, 3)
    with pytest.warns(RuntimeWarning, match="cannot read the log start offset checkpoint"):
        assert _offsets(ka.to_arrow(d, ["offset"])) == [0, 1, 2]


def test_log_start_checkpoint_past_the_end_is_said(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        _plain(log, 3)
    _checkpoints.write_offset_checkpoint(os.path.join(str(tmp_path), "log-start-offset-checkpoint"),
                                   {("t", 0): 2**62})
    with pytest.warns(RuntimeWarning, match="past its segments' end 3: it reads as empty"):
        assert ka.to_arrow(d, ["offset"]).num_rows == 0


# -- a size field claiming 2 GB is damage, unless the writer's whole in-flight marker is there ---
@pytest.mark.parametrize("marker", [False, True])
def test_a_2gb_size_field_before_whole_batches(tmp_path, marker):
    """kafkalog's writer marks the first batch of a multi-batch append it has not finished
    by the first byte of its size, 0x7F, the other three real (the batches after it are not
    the log's yet: a torn tail).  The size field alone is a claim of the damaged bytes, never a
    reason to end the log: whole batches after it make it damage, reported by every reader."""
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        for _ in range(8):
            _plain(log, 3)
    seg = os.path.join(d, "%020d.log" % 0)
    data = bytearray(open(seg, "rb").read())
    pos = 0
    for _ in range(5):  # the sixth batch (offsets 15-17)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    if marker:  # the writer's: only the size's first byte, the rest real
        data[pos + 8] = 0x7F
    else:
        data[pos + 8:pos + 12] = (2**31 - 1).to_bytes(4, "big")
    open(seg, "wb").write(bytes(data))
    os.unlink(os.path.join(str(tmp_path), ".kafka_cleanshutdown")) if os.path.exists(
        os.path.join(str(tmp_path), ".kafka_cleanshutdown")) else None
    for name in os.listdir(d):
        if name == _files.CLEAN_SHUTDOWN_FILE:
            os.unlink(os.path.join(d, name))
    if marker:  # an append that never finished: the log ends before it, quietly
        assert _one_answer(_everywhere(d)) == list(range(15))
        with Log.open(d) as log:
            assert log.log_end_offset == 15
        return
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 24
        with pytest.raises(CorruptRecordError) as e:
            _log_offsets(log)
        assert (e.value.path, e.value.position, e.value.offset) == (seg, pos, 15)
        gaps = []
        assert _log_offsets(log, on_damage="skip", gaps=gaps) == [
            o for o in range(24) if not 15 <= o < 18]
        assert [(g.offset, g.next_offset) for g in gaps] == [(15, 18)]
    with pytest.raises(CorruptRecordError):
        ka.to_arrow(d)
    with pytest.raises(CorruptRecordError):  # a writable open refuses to cut whole batches
        Log.open(d)
    assert open(seg, "rb").read() == bytes(data)


# -- 17, 18: a CRC error names the file and the file position, control batches too --------------
def test_crc_error_from_iter_records_names_the_file_and_its_position(tmp_path):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        for _ in range(6):
            _plain(log, 3)
    seg = os.path.join(d, "%020d.log" % 0)
    pos, off, total = entry_positions(seg)[4]
    data = bytearray(open(seg, "rb").read())
    data[pos + total - 1] ^= 0x01
    open(seg, "wb").write(bytes(data))
    for ro in (True, False):
        with Log.open(d, read_only=ro) as log:
            with pytest.raises(CorruptRecordError) as e:
                _log_offsets(log)
            assert (e.value.path, e.value.position, e.value.offset) == (seg, pos, off), e.value
            with pytest.raises(CorruptRecordError) as e:
                list(log.iter_batches())
            assert (e.value.path, e.value.position) == (seg, pos)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_commit_marker_with_a_bad_crc_is_reported(tmp_path, isolation):
    d = str(tmp_path / "t-0")
    with Log.open(d) as log:
        _plain(log, 2)
        _txn(log, 2)
        _marker(log, True)  # offset 4
        _plain(log, 2)
    seg = os.path.join(d, "%020d.log" % 0)
    (pos, off, total), = [e for e in entry_positions(seg) if e[1] == 4]
    data = bytearray(open(seg, "rb").read())
    data[pos + total - 1] ^= 0x01
    open(seg, "wb").write(bytes(data))
    with Log.open(d, read_only=True) as log:
        with pytest.raises(CorruptRecordError) as e:
            _log_offsets(log, isolation=isolation)
        assert (e.value.path, e.value.position, e.value.offset) == (seg, pos, 4)
        gaps = []
        got = _log_offsets(log, isolation=isolation, on_damage="skip", gaps=gaps)
        assert [(g.path, g.position, g.offset, g.next_offset) for g in gaps] == [
            (seg, pos, 4, 5)]
        assert 5 in got and 6 in got and 0 in got
    with pytest.raises(CorruptRecordError) as e:
        ka.to_arrow(d, read_committed=isolation == "read_committed")
    assert (e.value.path, e.value.position) == (seg, pos)


# -- 19: read-only and writable opens agree on the LSO after an unclean stop ---------------------
@pytest.mark.parametrize("txn_at, log_start, snapshots", [
    (2, 5, False), (2, 5, True), (2, 2, False), (6, 5, False), (6, 9, False), (0, 13, False)])
def test_read_only_and_writable_agree_on_the_lso_after_an_unclean_stop(tmp_path, txn_at,
                                                                       log_start, snapshots):
    """An open transaction that may begin below the log start, no clean-shutdown marker, with
    or without producer snapshots: a writable open recovers (writing a snapshot after each
    recovered segment, then loading the newest, as Kafka's LogLoader does) and a read-only one
    must answer what it answers, keeping recovery's snapshots in memory."""
    import shutil

    root = tmp_path / "r"
    d = str(root / "t-0")
    with Log.open(d, {"segment.bytes": 200}) as log:
        while log.log_end_offset < txn_at:
            _plain(log, 1)
        _txn(log, 1)  # never committed
        while log.log_end_offset < 19:
            _plain(log, 2)
        log.increment_log_start_offset(log_start)
    for name in os.listdir(d):
        if name.endswith(".snapshot") and not snapshots:
            os.unlink(os.path.join(d, name))
    for where in (d, str(root)):
        marker = os.path.join(where, _files.CLEAN_SHUTDOWN_FILE)
        if os.path.exists(marker):
            os.unlink(marker)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    with Log.open(d, read_only=True) as ro:
        answer = (ro.log_start_offset, ro.log_end_offset, ro.last_stable_offset)
    with open_view(d) as view:
        assert (view.log_start_offset, view.log_end_offset, view.last_stable_offset) == answer
    with Log.open(str(copy / "t-0")) as rw:
        assert (rw.log_start_offset, rw.log_end_offset, rw.last_stable_offset) == answer
    # the transaction is open: nothing at or after its first offset is stable
    assert answer[2] == max(txn_at, answer[0])
    assert _offsets(ka.to_arrow(d, ["offset"], read_committed=True)) == list(
        range(answer[0], answer[2]))
