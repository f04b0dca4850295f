"""The planning answers of the read model (``LogView.segments``, ``position_in``,
``end_position_of``, ``split_positions``, ``max_timestamp_of``), which the Spark planner cuts
its splits with, held against a plain walk over every batch of the same files, over generated
logs: formats v0, v1 and v2, compressed wrappers, compaction gaps, sparse and dense offset
indexes, clean and unclean shutdowns."""
from __future__ import annotations

import errno
import os
import random

import pytest

from kafkalog import MemoryRecordsBuilder
from kafkalog.errors import KafkaStorageError
from kafkalog.storage import checkpoints as _checkpoints
from kafkalog.storage import files as _files
from kafkalog.storage.log import Log, open_view

FORMATS = {2: "3.0-IV1", 1: "0.10.2", 0: "0.9.0"}


def _build(path, rnd: random.Random, magic: int, compact: bool) -> None:
    config = {
        "segment.bytes": rnd.choice([600, 1500, 4000]),
        "index.interval.bytes": rnd.choice([1, 200, 4096]),
        "message.format.version": FORMATS[magic],
        "compression.type": rnd.choice(["producer", "uncompressed", "lz4"]),
    }
    if compact:
        config["cleanup.policy"] = "compact"
    ts = 1_700_000_000_000
    with Log.open(path, config) as log:
        for _ in range(rnd.randint(5, 60)):
            # as a follower appends: offsets assigned, the format kept as it is (v0/v1 too)
            b = MemoryRecordsBuilder(magic=magic, base_offset=log.log_end_offset,
                                     compression_type=rnd.choice(["none", "gzip"]))
            for _ in range(rnd.randint(1, 6)):
                ts += rnd.randint(-3000, 5000)  # out of order now and then
                b.append(max(ts, 0), b"k%d" % rnd.randint(0, 3), b"v" * rnd.randint(0, 90))
            log.append_as_follower(b.build())
        if compact:
            log.compact(force=True)
    if rnd.random() < 0.3:  # as after a crash: recovery point at the start, no marker
        os.unlink(os.path.join(path, _files.CLEAN_SHUTDOWN_FILE))


def _walk(path, base):
    """Every entry of one segment: (position, size, magic, base offset, last offset, max ts)."""
    with Log.open(path, read_only=True) as log:
        seg = next(s for s in log._segments if s.base_offset == base)
        return [(h.position, h.size, h.magic, h.base_offset, h.last_offset, h.max_timestamp)
                for h in seg.iter_headers()]


@pytest.mark.parametrize("defer_opens", [False, True], ids=["opened", "deferred"])
@pytest.mark.parametrize("seed", range(24))
def test_planning_answers_match_a_walk(tmp_path, seed, defer_opens):
    rnd = random.Random(seed)
    magic = rnd.choice([0, 1, 2, 2])
    path = tmp_path / "t-0"
    _build(path, rnd, magic, compact=rnd.random() < 0.4)
    with open_view(str(path), defer_opens=defer_opens) as view:
        segs = view.segments()
        assert [s[0] for s in segs] == sorted(s[0] for s in segs)
        assert [p for _, p, _ in segs] == [p for _, p in view.segment_paths()]
        for base, log_path, size in segs:
            heads = _walk(path, base)
            assert size == (heads[-1][0] + heads[-1][1] if heads else 0)
            # the largest timestamp of the segment
            want_ts = max((h[5] for h in heads), default=-1)
            assert view.max_timestamp_of(base) == want_ts
            if not heads:
                continue
            # where a range ending before `end` stops, for every end the segment holds
            first, last = heads[0][3], heads[-1][4]
            for offset in range(first, last + 2):
                # where a range starting at `offset` starts: the first entry holding one >= it
                want = next((h[0] for h in heads if h[4] >= offset), None)
                assert view.position_in(base, offset) == want, offset
            for end in range(max(first, 1), last + 2):
                got = view.end_position_of(base, end)
                # the first entry holding an offset >= end - 1 is the last one needed, unless
                # it is a v2 batch wholly at or past end (a compaction gap before it)
                i = next((i for i, h in enumerate(heads) if h[4] >= end - 1), None)
                if i is None:
                    want = None
                elif heads[i][2] == 2 and heads[i][3] >= end:
                    want = heads[i][0]
                else:  # the next entry, or the end of the segment's last
                    want = heads[i + 1][0] if i + 1 < len(heads) else heads[i][0] + heads[i][1]
                assert got == want, (end, got, want)
            # cut points: entry starts, inside the range, at least target apart
            starts = {h[0] for h in heads}
            for target in (1, 100, 700, 10_000):
                lo = heads[0][0]
                hi = size
                cuts = view.split_positions(base, lo, hi, target)
                assert cuts == sorted(set(cuts))
                assert all(c in starts and lo < c < hi for c in cuts)
                prev = lo
                for c in cuts:
                    assert c - prev >= target and hi - c >= target // 4
                    prev = c
                if target == 1 and len(heads) > 1:
                    assert cuts, "a dense enough target must cut a segment of several entries"


def test_planning_answers_name_the_segment(tmp_path):
    path = tmp_path / "t-0"
    _build(path, random.Random(1), 2, compact=False)
    with open_view(str(path)) as view:
        with pytest.raises(KafkaStorageError, match="no segment with base offset 12345") as e:
            view.split_positions(12345, 0, 10, 1)
    assert e.value.errno == errno.ENOENT  # a planner plans again
    assert e.value.filename == os.path.join(str(path), "%020d.log" % 12345)


def _open_fds():
    d = "/proc/self/fd"
    return {os.readlink(os.path.join(d, f)) for f in os.listdir(d)
            if os.path.exists(os.path.join(d, f))}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to see fds")
def test_deferred_opens_open_each_log_at_its_first_read(tmp_path):
    """``defer_opens``: a view loads without a descriptor on any .log but the ones its load
    reads (the last segment's, for the log end), answers as an opened view does, and opens a
    .log when asked about it."""
    path = tmp_path / "t-0"
    _build(path, random.Random(3), 2, compact=False)
    with open_view(str(path)) as opened:
        want = (opened.log_start_offset, opened.log_end_offset, opened.segments())
    assert len(want[2]) >= 3
    with open_view(str(path), defer_opens=True) as view:
        logs = {p for p in _open_fds() if p.endswith(".log")}
        first, last = want[2][0][1], want[2][-1][1]
        assert first not in logs and last in logs
        assert (view.log_start_offset, view.log_end_offset, view.segments()) == want
        base = want[2][0][0]
        assert view.position_in(base, base) == 0
        view.split_positions(base, 0, want[2][0][2], 1)
    assert not {p for p in _open_fds() if p.startswith(str(path))}


def test_deferred_open_of_a_deleted_or_replaced_segment_is_retryable(tmp_path):
    """A segment deleted (or replaced by another file) after a deferring view loaded and before
    its first read is a KafkaStorageError with errno ENOENT naming the .log (a planner plans
    again), never the bytes of another file."""
    path = tmp_path / "t-0"
    _build(path, random.Random(5), 2, compact=False)
    with open_view(str(path), defer_opens=True) as view:
        (b0, p0, _s0) = view.segments()[0]
        os.unlink(p0)
        with pytest.raises(KafkaStorageError) as e:
            list(view.iter_batches(b0, b0 + 1))
        assert e.value.errno == errno.ENOENT and e.value.filename == p0
    path = tmp_path / "t-1"
    _build(path, random.Random(5), 2, compact=False)
    with open_view(str(path), defer_opens=True) as view:
        (b1, p1, _s1) = view.segments()[0]  # not the last: that one is read on load
        tmp = p1 + ".new"
        with open(p1, "rb") as f, open(tmp, "wb") as g:
            g.write(f.read())
        os.replace(tmp, p1)  # the same bytes, another file
        with pytest.raises(KafkaStorageError, match="replaced") as e:
            list(view.iter_batches(b1, b1 + 1))
        assert e.value.errno == errno.ENOENT and e.value.filename == p1


def test_checkpoint_memo_reads_each_root_checkpoint_once_per_pass(tmp_path, monkeypatch):
    """Views of one pass sharing a CheckpointMemo read each root checkpoint once, answer as
    views without it do, and a new pass (a new memo) sees a checkpoint changed since."""
    from kafkalog.storage import loader as _loader
    from kafkalog.storage.loader import CheckpointMemo

    dirs = []
    for p in range(3):
        d = tmp_path / f"t-{p}"
        _build(d, random.Random(p), 2, compact=False)
        dirs.append(str(d))
    start = os.path.join(str(tmp_path), _files.LOG_START_OFFSET_CHECKPOINT_FILE)
    _checkpoints.write_offset_checkpoint(start,
                                         {_files.TopicPartition("t", p): 2 for p in range(3)})
    reads = []
    real = _loader._checkpoints.read_offset_checkpoint

    def spy(path, *a, **kw):
        reads.append(os.path.basename(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(_loader._checkpoints, "read_offset_checkpoint", spy)

    def starts(memo):
        out = []
        for d in dirs:
            with open_view(d, checkpoints=memo) as v:
                out.append((v.log_start_offset, v.log_end_offset))
        return out

    plain = starts(None)
    assert [s for s, _ in plain] == [2, 2, 2]
    reads.clear()
    memo = CheckpointMemo()
    assert starts(memo) == plain
    assert len(reads) == len(set(reads)) <= 3  # each file at most once for the three views
    _checkpoints.write_offset_checkpoint(start,
                                         {_files.TopicPartition("t", p): 3 for p in range(3)})
    assert [s for s, _ in starts(memo)] == [2, 2, 2]  # the same pass: the same answer
    assert [s for s, _ in starts(CheckpointMemo())] == [3, 3, 3]  # a new pass sees it


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_deferred_view_refuses_a_fifo_put_at_a_listed_log(tmp_path):
    """A .log replaced by a FIFO between the caller's listing and the view's load is refused
    (named, never opened for reading as data, nothing waits on it), as an unlisted one is."""
    from kafkalog.storage import logdir as _logdir

    path = tmp_path / "t-0"
    _build(path, random.Random(4), 2, compact=False)
    listing = _logdir.scan_partition(str(path))
    first = listing.segments[0].log
    os.unlink(first)
    os.mkfifo(first)
    with pytest.raises(KafkaStorageError) as e:
        open_view(str(path), listing=listing, defer_opens=True)
    assert e.value.filename == first
