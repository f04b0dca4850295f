"""The storage model (kafkalog.storage.logdir over kafkalog.storage.fs): one grammar of Kafka's
names, regular files only, every OS error a KafkaStorageError - and Log.open, to_arrow and the
CLI commands all seeing a directory the same way."""
from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkaStorageError
from kafkalog.storage import checkpoints, files, fs, logdir
from kafkalog.storage.log import Log
from kafkalog.storage.store_segment import open_segment

from .conftest import values_batch

INT64_MAX = 2**63 - 1
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")
needs_posix = pytest.mark.skipif(os.name == "nt", reason="FIFOs, devices and links are POSIX")


def seg(base: int, kind: str = ".log", suffix: str = "") -> str:
    return f"{base:020d}{kind}{suffix}"


def make_log(d, n=10, per=1, config=None):
    with Log.open(d, config) as log:
        for i in range(0, n, per):
            log.append(values_batch(i, per))
    return d


def values(d):
    with Log.open(d, read_only=True) as log:
        return [(r.offset, r.value) for r in log.iter_records()]


def expected(n):
    return [(i, b"v%d" % i) for i in range(n)]


# -- the grammar --------------------------------------------------------------------------------
@given(st.integers(0, INT64_MAX), st.sampled_from([".log", ".index", ".timeindex", ".txnindex",
                                                   ".snapshot"]),
       st.sampled_from(["", ".deleted", ".cleaned", ".swap"]))
@settings(max_examples=200, deadline=None)
def test_segment_names_round_trip(base, kind, suffix):
    name = files.filename_prefix_from_offset(base) + kind + suffix
    assert files.parse_segment_file_name(name) == files.SegmentFile(base, kind, suffix, name)


@given(st.one_of(
    st.integers(INT64_MAX + 1, 10**20 - 1).map(lambda b: "%020d" % b),  # 20 digits, past int64
    st.integers(0, 10**19 - 1).map(str),  # too few digits
    st.integers(0, 10**21 - 1).map(lambda b: "%021d" % b),  # too many
    st.text("0123456789٣x -+", min_size=1, max_size=22).filter(
        lambda s: not (len(s) == 20 and s.isascii() and s.isdigit())),
))
@settings(max_examples=300, deadline=None)
def test_names_outside_the_grammar_are_no_segments(prefix):
    assert files.parse_segment_file_name(prefix + ".log") is None
    assert files.segment_prefix_problem(prefix) is not None


def test_scan_sorts_names_and_says_why(tmp_path):
    d = tmp_path / "topic-0"
    make_log(d, 5)
    for name in ("1.log", "99999999999999999999.log", "000000000000000000001.log", "notes.txt",
                 "12-3.checkpoint"):
        (d / name).write_bytes(b"x")
    (d / seg(3, ".log", ".swap")).write_bytes(b"")
    (d / (seg(0, ".index") + ".tmp")).write_bytes(b"")
    (d / seg(9, ".timeindex")).write_bytes(b"")
    v = logdir.scan_partition(d)
    assert v.topic_partition == files.TopicPartition("topic", 0)
    assert [s.base_offset for s in v.segments] == [0]
    s0 = v.segments[0]
    assert s0.log == str(d / seg(0)) and s0.offset_index == str(d / seg(0, ".index"))
    assert s0.time_index == str(d / seg(0, ".timeindex"))
    assert [(o.base_offset, o.kind) for o in v.orphan_indexes] == [(9, ".timeindex")]
    assert [(f.base_offset, f.kind, f.suffix) for f in v.state_files] == [(3, ".log", ".swap")]
    assert v.temp_files == [str(d / (seg(0, ".index") + ".tmp"))]
    assert files.LEADER_EPOCH_CHECKPOINT_FILE in v.metadata
    assert v.snapshots and logdir.snapshot_files(d) == v.snapshots
    why = {i.name: i.reason for i in v.ignored}
    assert "1 digits" in why["1.log"]
    assert "past the int64 range" in why["99999999999999999999.log"]
    assert "21 digits" in why["000000000000000000001.log"]
    assert why["notes.txt"] == "not a Kafka log file name"
    assert "KRaft" in why["12-3.checkpoint"]


def test_scan_root(tmp_path):
    for name in ("a-0", "a-10", "a-2", "b.c_d-1", "x-1.0123abcd-delete", "x-2.0123abcd-future"):
        (tmp_path / name).mkdir()
    (tmp_path / "noname").mkdir()
    (tmp_path / "bad topic-1").mkdir()
    (tmp_path / "f-1").write_bytes(b"")
    checkpoints.update_offset_checkpoint(tmp_path / files.RECOVERY_POINT_CHECKPOINT_FILE,
                                         {("a", 0): 3})
    v = logdir.scan_root(tmp_path)
    assert [str(p.topic_partition) for p in v.live_partitions] == [
        "a-0", "a-2", "a-10", "b.c_d-1", "bad topic-1"]
    assert sorted(p.kind for p in v.partitions if p.kind) == ["delete", "future"]
    assert list(v.checkpoints) == [files.RECOVERY_POINT_CHECKPOINT_FILE]
    assert logdir.ROOT_LOCK_FILE in v.metadata
    assert {i.name for i in v.ignored} == {"noname", "f-1"}
    assert logdir.classify_dir(tmp_path) == "root"
    assert logdir.classify_dir(tmp_path / "a-0") == "partition"
    assert logdir.classify_dir(tmp_path / "noname") == "other"


def test_a_root_named_like_a_partition_is_a_root(tmp_path):
    """Log dirs are often named kafka-logs-1 or data-0: holding partition directories and no
    segment, such a directory is a root (it was taken for an empty partition)."""
    root = tmp_path / "kafka-logs-1"
    (root / "orders-0").mkdir(parents=True)
    assert logdir.classify_dir(root) == "root"
    (root / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    assert logdir.classify_dir(root / "orders-0") == "partition"
    empty = tmp_path / "orders-3"
    empty.mkdir()
    assert logdir.classify_dir(empty) == "partition"  # an empty partition
    (empty / "00000000000000000000.log").write_bytes(b"")
    (empty / "sub-0").mkdir()  # a segment decides, whatever else is there
    assert logdir.classify_dir(empty) == "partition"


def test_local_file_reads_ranges_and_maps(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(bytes(range(256)) * 40)
    with fs.LOCAL.open_read(p) as f:
        assert f.size == 10240
        assert f.read(250, 10) == bytes(range(250, 256)) + bytes(range(4))
        assert f.read(10238, 100) == bytes([254, 255])
        m = f.map()
        assert bytes(m[:3]) == b"\x00\x01\x02" and len(m) == 10240
    (tmp_path / "empty").write_bytes(b"")
    with fs.LOCAL.open_read(tmp_path / "empty") as f:
        assert f.size == 0 and f.map() == b"" and f.read(0, 5) == b""
    with pytest.raises(FileNotFoundError) as ei:
        fs.LOCAL.open_read(tmp_path / "absent")
    assert isinstance(ei.value, KafkaStorageError) and ei.value.path == str(tmp_path / "absent")
    with pytest.raises(KafkaStorageError) as ei:
        fs.LOCAL.open_read(tmp_path)
    assert ei.value.errno == errno.EISDIR and ei.value.operation == "opening for reading"
    with pytest.raises(KafkaStorageError) as ei:
        fs.LOCAL.list_dir(tmp_path / "f")
    assert ei.value.path == str(tmp_path / "f") and "listing" in str(ei.value)


# -- odd names never change offsets -------------------------------------------------------------
def test_stray_short_name_does_not_rewind_a_writable_log(tmp_path):
    d = make_log(tmp_path / "topic-0", 10)
    shutil.copy(d / seg(0), d / "1.log")  # a copy an operator left, under a short name
    with Log.open(d) as log:
        assert log.log_end_offset == 10
        assert log.append(values_batch(10, 1)).first_offset == 10
        assert "1.log" in {i.name for i in log.ignored_files}
    assert values(d) == expected(11)


def test_empty_swap_file_does_not_rewind_a_writable_log(tmp_path):
    d = make_log(tmp_path / "topic-0", 10)
    (d / seg(7, ".log", ".swap")).write_bytes(b"")
    with Log.open(d) as log:
        assert log.log_end_offset == 10
        assert log.append(values_batch(10, 1)).first_offset == 10
        assert seg(7, ".log", ".swap") in {i.name for i in log.ignored_files}
    assert values(d) == expected(11)
    assert (d / seg(7, ".log", ".swap")).exists()  # left for the operator, not completed


def test_swap_inside_a_live_segment_is_not_completed(tmp_path):
    d = make_log(tmp_path / "topic-0", 10)
    # a swap at base 7 holding offsets 7..8 only: completing it would end the log at 9
    src = make_log(tmp_path / "other-0", 9)
    with Log.open(src, read_only=True) as log:
        part = log.read(7, 1 << 20).buffer()
    (d / seg(7, ".log", ".swap")).write_bytes(bytes(part))
    with Log.open(d) as log:
        assert log.log_end_offset == 10
        assert log.append(values_batch(10, 1)).first_offset == 10
    assert values(d) == expected(11)


def test_name_past_int64_is_not_a_segment(tmp_path):
    d = make_log(tmp_path / "topic-0", 10)
    shutil.copy(d / seg(0), d / "99999999999999999999.log")
    assert values(d) == expected(10)
    with Log.open(d) as log:
        assert log.log_end_offset == 10
        log.append(values_batch(10, 1))
    assert values(d) == expected(11)
    from kafkalog.arrow import to_arrow

    assert to_arrow(d).column("offset").to_pylist() == list(range(11))


# -- things in place of files: reported, never opened, never waited on -------------------------
def _cli(*args, timeout=60):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "kafkalog", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def _plant(path, what):
    if what == "fifo":
        os.mkfifo(path)
    elif what == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
        except PermissionError:
            pytest.skip("creating a device node needs root (or CAP_MKNOD)")
    elif what == "directory":
        os.mkdir(path)
    elif what == "looping link":
        os.symlink(os.path.basename(path), path)
    elif what == "dangling link":
        os.symlink("nowhere", path)
    else:  # pragma: no cover
        raise AssertionError(what)


PLANTS = ["fifo", "device", "directory", "looping link", "dangling link"]


@pytest.fixture
def no_hang():
    """Fail (instead of hanging the suite) when a test blocks, e.g. opening a FIFO: SIGALRM
    interrupts the blocked call and its handler's exception ends it."""
    import signal

    if not hasattr(signal, "SIGALRM"):  # pragma: no cover
        yield
        return

    def hung(signum, frame):
        raise TimeoutError("blocked for 60 s (a FIFO or device opened?)")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@needs_posix
@pytest.mark.parametrize("what", PLANTS)
def test_thing_in_place_of_a_segment(tmp_path, what, no_hang):
    d = make_log(tmp_path / "topic-0", 10, per=5, config={"segment.bytes": 200})
    bases = logdir.scan_partition(d).base_offsets
    assert len(bases) >= 2
    victim = d / seg(bases[-1])
    victim.unlink()
    _plant(victim, what)
    # the model reports it and never opens it
    v = logdir.scan_partition(d)
    assert bases[-1] not in v.base_offsets
    (ig,) = [i for i in v.ignored if i.name == victim.name]
    assert ig.kind == {"fifo": fs.FIFO, "device": fs.DEVICE, "directory": fs.DIRECTORY,
                       "looping link": fs.LOOPING_LINK, "dangling link": fs.DANGLING_LINK}[what]
    with pytest.raises(KafkaStorageError) as ei:
        fs.LOCAL.open_read(victim)
    assert ei.value.path == str(victim)
    # Log.open refuses what it cannot read or write past, bad links too (read without that
    # segment, a log would have a hole no error mentions)
    for ro in (True, False):
        with pytest.raises(KafkaStorageError) as ei:
            Log.open(d, read_only=ro)
        assert str(victim) in str(ei.value)
    # to_arrow fails with KafkaStorageError naming the file (never skips it, never hangs)
    from kafkalog.arrow import iter_batches, to_arrow

    for call in (lambda p: to_arrow(p), lambda p: list(iter_batches(p))):
        for p in (d, victim):
            if what == "directory" and p == victim:
                continue  # a directory given as the source is read as a partition directory
            with pytest.raises(KafkaStorageError) as ei:
                call(p)
            assert ei.value.path == str(victim)
    # every CLI command finishes and names the file
    for args in (["verify", d], ["dump", "--files", victim], ["stats", d], ["dump", "--files", d]):
        r = _cli(*args)
        assert victim.name in r.stdout + r.stderr, (args, r.stdout, r.stderr)
    r = _cli("verify", d)
    assert r.returncode != 0
    out = tmp_path / "salvaged"
    r = _cli("salvage", d, out)
    assert victim.name in r.stdout + r.stderr or r.returncode == 0, (r.stdout, r.stderr)


@needs_posix
@pytest.mark.parametrize("what", ["fifo", "device", "directory"])
@pytest.mark.parametrize("kind", [".index", ".timeindex", ".txnindex", ".snapshot"])
def test_thing_in_place_of_an_index(tmp_path, what, kind, no_hang):
    d = make_log(tmp_path / "topic-0", 10)
    victim = d / seg(0, kind)
    if victim.exists():
        victim.unlink()
    _plant(victim, what)
    for ro in (True, False):
        with pytest.raises(KafkaStorageError) as ei:
            Log.open(d, read_only=ro)
        assert str(victim) in str(ei.value)
    r = _cli("verify", d)
    assert r.returncode != 0 and victim.name in r.stdout + r.stderr


@needs_posix
@pytest.mark.parametrize("name", [files.RECOVERY_POINT_CHECKPOINT_FILE,
                                  files.LOG_START_OFFSET_CHECKPOINT_FILE])
def test_fifo_in_place_of_a_root_checkpoint(tmp_path, name, no_hang):
    d = make_log(tmp_path / "topic-0", 3)
    os.unlink(tmp_path / name) if (tmp_path / name).exists() else None
    os.mkfifo(tmp_path / name)
    with pytest.raises(KafkaStorageError):
        checkpoints.read_offset_checkpoint(tmp_path / name)
    for ro in (True, False):  # refused, never waited on (reading on would lose its entries)
        with pytest.raises(KafkaStorageError) as ei:
            Log.open(d, read_only=ro)
        assert ei.value.path == str(tmp_path / name)
    os.unlink(tmp_path / name)
    assert values(d) == expected(3)
    os.mkfifo(tmp_path / name)
    r = _cli("verify", tmp_path)
    assert name in r.stdout + r.stderr


def test_to_arrow_of_a_directory_in_place_of_a_segment_file(tmp_path):
    from kafkalog.arrow import to_arrow

    d = make_log(tmp_path / "topic-0", 3)
    (d / seg(7)).mkdir()
    with pytest.raises(KafkaStorageError) as ei:
        to_arrow(d)
    assert ei.value.errno == errno.EISDIR and ei.value.path == str(d / seg(7))


@needs_posix
def test_unreadable_segment(tmp_path, no_hang):
    """A file that stat calls regular but that even root cannot read (a write-only procfs
    file, reached through a link): a KafkaStorageError naming the path, everywhere."""
    target = "/proc/sys/vm/compact_memory"
    try:
        os.close(os.open(target, os.O_RDONLY))
    except FileNotFoundError:
        pytest.skip(f"{target} does not exist here")
    except PermissionError:
        pass
    else:
        pytest.skip(f"{target} is readable here")
    d = make_log(tmp_path / "topic-0", 10, per=5, config={"segment.bytes": 200})
    bases = logdir.scan_partition(d).base_offsets
    victim = d / seg(bases[-1])
    victim.unlink()
    os.symlink(target, victim)
    with pytest.raises(KafkaStorageError) as ei:
        fs.LOCAL.open_read(victim)
    assert ei.value.errno == errno.EACCES and ei.value.path == str(victim)
    with pytest.raises(KafkaStorageError) as ei:
        Log.open(d, read_only=True)
    assert str(victim) in str(ei.value)
    from kafkalog.arrow import to_arrow

    with pytest.raises(KafkaStorageError) as ei:
        to_arrow(d)
    assert ei.value.path == str(victim)
    r = _cli("verify", d)
    assert r.returncode != 0 and victim.name in r.stdout


def test_read_only_segment_access(tmp_path):
    """The planner's view of a segment: its index entries, last time-index entry and header walk,
    read-only (the files are unchanged)."""
    d = make_log(tmp_path / "topic-0", 40, per=4, config={"segment.bytes": 400,
                                                        "index.interval.bytes": 1})
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    v = logdir.scan_partition(d)
    assert len(v.segments) > 2
    seen = []
    for s in v.segments:
        seg = open_segment(s)
        try:
            heads = list(seg.iter_headers())
        finally:
            seg.close_handlers()
        seen += [(h.base_offset, h.last_offset) for h in heads]
        idx = logdir.offset_index(s)
        try:
            entries = [(e.offset, e.position) for e in idx]
        finally:
            idx.close()
        assert set(entries) <= {(h.last_offset,
                                 h.position) for h in heads}  # Kafka indexes last offsets
        assert entries  # index.interval.bytes=1: one entry per batch
        tix = logdir.time_index(s)
        try:
            assert tix.last_entry.offset == heads[-1].last_offset
        finally:
            tix.close()
    assert seen == [(i, i + 3) for i in range(0, 40, 4)]
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before
