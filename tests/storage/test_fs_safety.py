"""Filesystem safety: topic names checked as Kafka checks them before a path is built from
one, no writing through a symbolic link planted in a log directory, and atomic rewrites that
leave the old file intact when interrupted."""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
from pathlib import Path

import pytest

from kafkalog.control import build_end_txn_marker
from kafkalog.errors import InvalidTopicError, KafkaLogError, KafkaStorageError, UnsafePathError
from kafkalog.storage import checkpoints, files
from kafkalog.storage.cleaner import Cleaner, CleanerConfig
from kafkalog.storage.log import Log

from .conftest import BASE_TS, make_batch, values_batch

needs_symlinks = pytest.mark.skipif(
    not hasattr(os, "symlink") or os.name == "nt",
    reason="symbolic links are not available to this user on this platform",
)

SECRET = b"keep out\n"  # shorter than any index entry


# ------------------------------------------------------------------------------------------------
# topic names
# ------------------------------------------------------------------------------------------------
# Names Kafka's Topic.validate accepts ...
VALID_TOPICS = [
    "a",
    "foo",
    "foo.bar",
    "foo_bar",
    "foo-bar",
    "Foo-Bar.baz_09",
    "...",  # only "." and ".." are special
    ".hidden",
    "-",
    "_",
    "__consumer_offsets",
    "__transaction_state",
    "__cluster_metadata",
    "x" * 249,
]
# ... and names it rejects.
INVALID_TOPICS = [
    "",
    ".",
    "..",
    "x" * 250,
    "foo bar",
    "foo/bar",
    "../etc",
    "foo\\bar",
    "foo:bar",
    "foo*",
    "foo,bar",
    "foo\tbar",
    "foo\n",
    "foo\x00",
    "t\u00f3pico",  # non-ASCII letter
    "\u0661\u0662",  # Arabic-Indic digits: digits to str.isdigit, not to Kafka
    "\uff41",  # fullwidth 'a'
]


@pytest.mark.parametrize("topic", VALID_TOPICS)
def test_kafka_accepts(topic):
    assert files.validate_topic(topic) == topic
    assert files.is_valid_topic(topic)
    assert files.partition_dir_name(topic, 7) == f"{topic}-7"


@pytest.mark.parametrize("topic", INVALID_TOPICS)
def test_kafka_rejects(topic):
    with pytest.raises(InvalidTopicError) as ei:
        files.validate_topic(topic)
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, KafkaLogError)
    assert e.topic == topic
    assert repr(topic) in str(e)
    assert not files.is_valid_topic(topic)
    with pytest.raises(ValueError):
        files.partition_dir_name(topic, 0)


@pytest.mark.parametrize("topic", [None, b"foo", 3])
def test_non_str_topic_rejected(topic):
    with pytest.raises(InvalidTopicError):
        files.validate_topic(topic)
    assert not files.is_valid_topic(topic)


def test_invalid_topic_error_pickles_with_context():
    e = InvalidTopicError("bad name", topic="a b", path="/x/a b-0")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is InvalidTopicError
    assert (e2.message, e2.topic, e2.path) == ("bad name", "a b", "/x/a b-0")
    assert str(e2) == "bad name (file /x/a b-0)"
    u = pickle.loads(pickle.dumps(UnsafePathError("refused", path="/x/y")))
    assert type(u) is UnsafePathError and u.path == "/x/y"


@pytest.mark.parametrize("partition", [-1, 2**31, True, "1", 1.0, None])
def test_partition_numbers_checked(partition):
    with pytest.raises(ValueError):
        files.partition_dir_name("foo", partition)


def test_partition_number_bounds_accepted():
    assert files.partition_dir_name("foo", 0) == "foo-0"
    assert files.partition_dir_name("foo", 2**31 - 1) == f"foo-{2**31 - 1}"


def test_log_creation_validates_topic(tmp_path):
    for name in ("bad:topic-0", "t\u00f3pico-3", ("x" * 250) + "-0"):
        with pytest.raises(InvalidTopicError) as ei:
            Log.open(tmp_path / name)
        assert ei.value.topic == name.rsplit("-", 1)[0]
        assert not (tmp_path / name).exists()
    with Log.open(tmp_path / "__consumer_offsets-49") as log:
        log.append(values_batch(0, 2))
    # a directory whose name is not <topic>-<partition> is a free-form standalone log
    with Log.open(tmp_path / "scratch") as log:
        assert log.topic_partition is None
        log.append(values_batch(0, 1))


def test_existing_directories_open_whatever_their_names(tmp_path):
    good = tmp_path / "good-0"
    with Log.open(good) as log:
        log.append(values_batch(0, 3))
    odd = tmp_path / "t\u00f3pico:x-0"
    os.rename(good, odd)
    with Log.open(odd, read_only=True) as log:
        assert [r.value for r in log.iter_records()] == [b"v0", b"v1", b"v2"]
    with Log.open(odd) as log:  # writable: kafkalog built no path from the name
        log.append(values_batch(3, 1))
        assert log.log_end_offset == 4


def test_salvage_checks_destination_topics_first(tmp_path):
    from kafkalog.tools.salvage import run_salvage

    src = tmp_path / "src"
    with Log.open(src / "ok-0") as log:
        log.append(values_batch(0, 2))
    with Log.open(src / "zz-0") as log:
        log.append(values_batch(0, 2))
    os.rename(src / "zz-0", src / "bad:name-0")
    dst = tmp_path / "dst"
    with pytest.raises(InvalidTopicError) as ei:
        run_salvage(str(src), str(dst))
    assert ei.value.topic == "bad:name" and "bad:name" in str(ei.value)
    assert not dst.exists()  # checked before anything was made
    # a partition-mode destination named <topic>-<partition> is checked too
    with pytest.raises(InvalidTopicError):
        run_salvage(str(src / "ok-0"), str(tmp_path / "no good-0"))
    assert not (tmp_path / "no good-0").exists()
    # a free-form destination name is fine
    with open(os.devnull, "w") as devnull:
        assert run_salvage(str(src / "ok-0"), str(tmp_path / "out"), out=devnull) == 0
    with Log.open(tmp_path / "out", read_only=True) as log:
        assert log.log_end_offset == 2


# ------------------------------------------------------------------------------------------------
# Spark writer (its Spark-free core: no JVM)
# ------------------------------------------------------------------------------------------------
def _spark_write():
    pytest.importorskip("pyarrow")
    from kafkalog.spark import _write as w

    return w


def _rows(topics, values, partitions=None):
    import pyarrow as pa

    cols = {"topic": pa.array(topics, pa.string()), "value": pa.array(values, pa.binary())}
    if partitions is not None:
        cols["partition"] = pa.array(partitions, pa.int32())
    return pa.RecordBatch.from_pydict(cols)


def _tree(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_spark_writer_rejects_bad_topic_before_any_directory(tmp_path):
    w = _spark_write()
    root = tmp_path / "out"
    opts = w.WriteOptions.parse({"path": str(root)})
    w.prepare_job(opts, "job1")
    before = _tree(root)
    tw = w.TaskWriter(opts, "job1", "task-0", overwrite=False)
    for bad in ("../../escape", "a b", "", "..", "x" * 250):
        with pytest.raises(w.WriteError) as ei:
            tw.write_batch(_rows(["good", bad, "good"], [b"1", b"2", b"3"]))
        assert repr(bad) in str(ei.value)
        assert _tree(root) == before  # not even the valid topic's directory
    with pytest.raises(w.WriteError) as ei:
        tw.write_batch(_rows([".."], [b"1"]))  # one topic for the whole batch
    assert "'..'" in str(ei.value)
    assert _tree(root) == before
    assert not (tmp_path / "escape").exists()
    # the topic option is checked on the driver
    with pytest.raises(w.WriteError) as ei:
        w.check_columns(["value"], w.WriteOptions.parse({"path": str(root), "topic": "a/b"}))
    assert "'a/b'" in str(ei.value)
    # and the commit refuses a staged piece with a bad topic before touching the target
    piece = w.StagedPartition("../x", 0, str(tmp_path), 0, 1, 1, 1)
    with pytest.raises(ValueError):
        w.commit_job(opts, "job1", [piece], overwrite=False)
    assert not (tmp_path / "x-0").exists()
    tw.cleanup()


# ------------------------------------------------------------------------------------------------
# symbolic links planted in a log directory
# ------------------------------------------------------------------------------------------------
class Outside:
    """A file outside every log directory, and a check that it never changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_bytes(SECRET)
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
        self.state = self._state()

    def _state(self):
        st = os.stat(self.path)
        return st.st_size, st.st_mtime_ns, hashlib.sha256(self.path.read_bytes()).hexdigest()

    def plant(self, at: Path) -> Path:
        """A symbolic link at ``at`` to this file (replacing whatever is there)."""
        if at.is_symlink() or at.exists():
            at.unlink()
        os.symlink(self.path, at)
        return at

    def untouched(self) -> bool:
        return self._state() == self.state and self.path.read_bytes() == SECRET


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "elsewhere"
    d.mkdir()
    return Outside(d / "victim")


@needs_symlinks
def test_atomic_write_replaces_links_never_writes_through(tmp_path, outside):
    target = tmp_path / "checkpoint"
    outside.plant(tmp_path / "checkpoint.tmp")
    files.atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and not target.is_symlink()
    assert not (tmp_path / "checkpoint.tmp").exists()
    outside.plant(target)  # a link at the target name is replaced by the rename
    checkpoints.write_offset_checkpoint(target, {("t", 0): 5})
    assert not target.is_symlink()
    assert checkpoints.read_offset_checkpoint(target) == {("t", 0): 5}
    outside.plant(tmp_path / "copy.tmp")
    files.atomic_copy(target, tmp_path / "copy")
    assert (tmp_path / "copy").read_bytes() == target.read_bytes()
    assert outside.untouched()


@needs_symlinks
def test_open_for_write_policy(tmp_path, outside):
    d = tmp_path / "p-0"
    d.mkdir()
    fd = files.open_for_write(d / "new", os.O_RDWR | os.O_CREAT)
    os.close(fd)
    assert (d / "new").is_file()
    outside.plant(d / "out")
    with pytest.raises(UnsafePathError) as ei:
        files.open_for_write(d / "out", os.O_RDWR | os.O_CREAT)
    assert ei.value.path == str(d / "out") and str(d / "out") in str(ei.value)
    with pytest.raises(UnsafePathError):
        files.open_for_write(d / "out", os.O_WRONLY | os.O_TRUNC)
    os.symlink(d / "missing", d / "dangling")
    with pytest.raises(UnsafePathError):
        files.open_for_write(d / "dangling", os.O_RDWR | os.O_CREAT)
    assert not (d / "missing").exists()
    # a link to a file inside the same directory is followed
    (d / "real").write_bytes(b"abc")
    os.symlink("real", d / "alias")
    fd = files.open_for_write(d / "alias", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"d")
    os.close(fd)
    assert (d / "real").read_bytes() == b"abcd"
    with pytest.raises(FileNotFoundError):
        files.open_for_write(d / "absent", os.O_RDWR)
    assert outside.untouched()


@needs_symlinks
def test_log_temp_names_linked_out(tmp_path, outside):
    """Links at every temp name a Log writes (checkpoints, snapshots, clean-shutdown marker,
    root checkpoints): append, roll, flush, checkpoint, snapshot and close replace them."""
    d = tmp_path / "topic-0"
    log = Log.open(d, {"segment.bytes": 1024}, topic_id=None)
    names = [
        d / "leader-epoch-checkpoint.tmp",
        d / ".kafka_cleanshutdown.tmp",
        tmp_path / "recovery-point-offset-checkpoint.tmp",
        tmp_path / "log-start-offset-checkpoint.tmp",
        tmp_path / "replication-offset-checkpoint.tmp",
    ]
    names += [d / f"{o:020d}.snapshot.tmp" for o in range(40)]
    for n in names:
        outside.plant(n)
    for i in range(0, 30, 3):
        log.append(make_batch([b"x" * 100] * 3, producer_id=7, producer_epoch=0,
                              base_sequence=i), leader_epoch=1)
    log.roll()
    log.flush()
    log.close()
    assert len(Log.open(d, read_only=True).segments) > 1
    assert checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert outside.untouched()
    assert not any(n.is_symlink() for n in names if n.name.startswith((".kafka", "leader", "rec")))


@needs_symlinks
@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex", ".txnindex"])
def test_roll_replaces_a_linked_new_segment_file(tmp_path, outside, suffix):
    """Like Kafka, a roll deletes files already at the new segment's names: the link goes,
    its target stays, and the new file is a real one."""
    d = tmp_path / "topic-0"
    log = Log.open(d)
    log.append(values_batch(0, 3))
    planted = outside.plant(d / f"{3:020d}{suffix}")
    log.roll()
    log.append(values_batch(3, 2))
    log.close()
    assert not planted.is_symlink()
    with Log.open(d, read_only=True) as log:
        assert [r.value for r in log.iter_records()] == [b"v%d" % i for i in range(5)]
    assert outside.untouched()


@needs_symlinks
def test_new_segment_refuses_a_dangling_link(tmp_path, outside):
    d = tmp_path / "topic-0"
    d.mkdir()
    os.symlink(outside.path.parent / "created-through-link", d / f"{0:020d}.log")
    # refused on load (a segment name that is no regular file), before any write could follow it
    with pytest.raises((UnsafePathError, KafkaStorageError)) as ei:
        Log.open(d)
    assert f"{0:020d}.log" in str(ei.value)
    assert sorted(os.listdir(outside.path.parent)) == ["victim"]


@needs_symlinks
def test_txn_index_refuses_a_link(tmp_path, outside):
    d = tmp_path / "topic-0"
    log = Log.open(d)
    log.append(make_batch([b"a", b"b"], producer_id=5, producer_epoch=0, base_sequence=0,
                          transactional=True))
    planted = outside.plant(d / f"{0:020d}.txnindex")
    with pytest.raises(UnsafePathError):
        log.append(build_end_txn_marker(False, 5, 0, 0, timestamp=BASE_TS), origin="coordinator")
    # the marker reached the segment but not the index: like an I/O error, the refusal takes the
    # log offline until it is opened again (and recovered)
    assert log.offline
    with pytest.raises(KafkaStorageError, match="offline"):
        log.append(make_batch([b"c"]))
    log.close()
    assert planted.is_symlink()
    assert outside.untouched()


@needs_symlinks
def test_existing_segment_file_linked_out(tmp_path, outside):
    d = tmp_path / "topic-0"
    with Log.open(d, {"segment.bytes": 200}) as log:
        for i in range(6):
            log.append(values_batch(i * 2, 2))
    for suffix in (".log", ".index", ".timeindex"):
        victim = d / f"{0:020d}{suffix}"
        saved = victim.read_bytes()
        outside.plant(victim)
        with pytest.raises(UnsafePathError) as ei:
            Log.open(d).close()
        assert str(victim) in str(ei.value)
        victim.unlink()
        victim.write_bytes(saved)
    assert outside.untouched()


@needs_symlinks
def test_link_inside_the_directory_is_followed(tmp_path):
    d = tmp_path / "topic-0"
    with Log.open(d) as log:
        log.append(values_batch(0, 3))
    idx = d / f"{0:020d}.index"
    os.rename(idx, d / "moved.index")
    os.symlink("moved.index", idx)
    with Log.open(d) as log:
        log.append(values_batch(3, 2))
    with Log.open(d, read_only=True) as log:
        assert log.log_end_offset == 5


@needs_symlinks
def test_partition_directory_itself_may_be_a_link(tmp_path):
    real = tmp_path / "disk2" / "topic-0"
    real.mkdir(parents=True)
    (tmp_path / "root").mkdir()
    os.symlink(real, tmp_path / "root" / "topic-0")
    with Log.open(tmp_path / "root" / "topic-0") as log:
        log.append(values_batch(0, 2))
    assert (real / f"{0:020d}.log").stat().st_size > 0


@needs_symlinks
def test_cleaner_outputs_linked_out(tmp_path, outside):
    d = tmp_path / "topic-0"
    cfg = {"cleanup.policy": "compact", "segment.bytes": 300, "min.cleanable.dirty.ratio": 0.0}
    log = Log.open(d, cfg)
    for i in range(12):
        log.append(make_batch([b"v%d" % i], keys=[b"k%d" % (i % 2)]))
    log.roll()
    planted = []
    for seg in log.segments:
        for kind in (".log", ".index", ".timeindex", ".txnindex"):
            for sfx in (".cleaned", ".swap"):
                planted.append(outside.plant(d / f"{seg.base_offset:020d}{kind}{sfx}"))
    planted.append(outside.plant(d / f"{log.log_end_offset:020d}.snapshot.tmp"))
    log.compact(Cleaner(CleanerConfig(dedupe_buffer_size=1 << 20)), force=True)
    latest = {r.key: r.value for r in log.iter_records()}
    assert latest == {b"k0": b"v10", b"k1": b"v11"}
    log.close()
    assert outside.untouched()


@needs_symlinks
def test_salvage_outputs_linked_out(tmp_path, outside):
    from kafkalog.tools import salvage

    src = tmp_path / "src" / "topic-0"
    with Log.open(src) as log:
        log.append(values_batch(0, 4))
    (src / "quorum-state").write_bytes(b'{"leaderId":1}')
    dst = tmp_path / "dst" / "topic-0"
    dst.mkdir(parents=True)
    outside.plant(dst / "quorum-state")  # the extra file's name
    outside.plant(dst / "partition.metadata.tmp")
    job = salvage._plan(str(src), str(dst))[0]
    report = salvage.SalvageReport()
    salvage._salvage_partition(job, str(dst), False, 1 << 20, report, False)
    assert (dst / "quorum-state").read_bytes() == b'{"leaderId":1}'
    assert not (dst / "quorum-state").is_symlink()
    # a partition directory of a root destination planted as a link out is refused
    root = tmp_path / "dst2"
    root.mkdir()
    os.symlink(outside.path.parent, root / "topic-0")
    job = salvage._plan(str(tmp_path / "src"), str(root))[0]
    with pytest.raises(UnsafePathError):
        salvage._salvage_partition(job, str(root), False, 1 << 20, report, False)
    assert sorted(os.listdir(outside.path.parent)) == ["victim"]
    assert outside.untouched()


@needs_symlinks
def test_spark_staging_linked_out(tmp_path, outside):
    w = _spark_write()
    root = tmp_path / "out"
    root.mkdir()
    opts = w.WriteOptions.parse({"path": str(root)})
    os.symlink(outside.path.parent, root / w.STAGING_DIR)
    with pytest.raises(UnsafePathError):
        w.prepare_job(opts, "j")
    os.unlink(root / w.STAGING_DIR)
    w.prepare_job(opts, "j")
    # a task directory planted as a link out of the root
    os.symlink(outside.path.parent, root / w.STAGING_DIR / "j" / "task-0")
    tw = w.TaskWriter(opts, "j", "task-0", overwrite=False)
    with pytest.raises(UnsafePathError):
        tw.write_batch(_rows(["t"], [b"v"]))
    os.unlink(root / w.STAGING_DIR / "j" / "task-0")
    # the commit's merge area planted as a link out of the root
    tw = w.TaskWriter(opts, "j", "task-0", overwrite=False)
    tw.write_batch(_rows(["t"], [b"v"]))
    staged = tw.finish()
    os.symlink(outside.path.parent, root / w.STAGING_DIR / "j" / "_merged")
    with pytest.raises(UnsafePathError):
        w.commit_job(opts, "j", staged, overwrite=False)
    assert sorted(os.listdir(outside.path.parent)) == ["victim"]
    assert outside.untouched()


@needs_symlinks
def test_spark_commit_with_links_planted_in_the_root(tmp_path, outside):
    w = _spark_write()
    root = tmp_path / "out"
    opts = w.WriteOptions.parse({"path": str(root)})

    def write(job, values, overwrite=False):
        w.prepare_job(opts, job)
        tw = w.TaskWriter(opts, job, "task-0", overwrite)
        tw.write_batch(_rows(["t"] * len(values), values, [0] * len(values)))
        return w.commit_job(opts, job, tw.finish(), overwrite)

    write("j1", [b"a", b"b"])
    planted = [
        outside.plant(root / "recovery-point-offset-checkpoint.tmp"),
        outside.plant(root / "replication-offset-checkpoint"),
        outside.plant(root / "t-0" / "leader-epoch-checkpoint.tmp"),
    ]
    write("j2", [b"c"])  # append: links the old segments into the new directory
    assert not (root / "replication-offset-checkpoint").is_symlink()
    replication = root / "replication-offset-checkpoint"
    assert checkpoints.read_offset_checkpoint(replication) == {("t", 0): 3}
    with Log.open(root / "t-0", read_only=True) as log:
        assert [r.value for r in log.iter_records()] == [b"a", b"b", b"c"]
    # a file of the existing partition linked out is not carried into the new directory
    outside.plant(root / "t-0" / "notes")
    with pytest.raises(UnsafePathError):
        write("j3", [b"d"])
    assert planted and outside.untouched()
    # a partition directory that is itself a link is replaced by a real one on overwrite
    os.unlink(root / "t-0" / "notes")
    moved = tmp_path / "disk2"
    os.rename(root / "t-0", moved)
    os.symlink(moved, root / "t-0")
    write("j4", [b"z"], overwrite=True)
    assert not (root / "t-0").is_symlink() and moved.is_dir()
    assert not [n for n in os.listdir(root) if n.endswith("-delete")]
    assert outside.untouched()


# ------------------------------------------------------------------------------------------------
# atomic rewrites
# ------------------------------------------------------------------------------------------------
class Crash(BaseException):
    """Stands for the process dying at that point."""


def test_crash_between_temp_write_and_rename_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "replication-offset-checkpoint"
    checkpoints.write_offset_checkpoint(path, {("t", 0): 1})
    old = path.read_bytes()
    real_replace = os.replace

    def crash(src, dst, *a, **k):
        assert Path(src).read_bytes() != old  # the new content is complete in the temp file
        raise Crash()

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(Crash):
        checkpoints.write_offset_checkpoint(path, {("t", 0): 2, ("t", 1): 9})
    monkeypatch.setattr(os, "replace", real_replace)
    assert path.read_bytes() == old
    assert checkpoints.read_offset_checkpoint(path) == {("t", 0): 1}
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()


def test_failed_fsync_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "leader-epoch-checkpoint"
    checkpoints.write_leader_epoch_checkpoint(path, [(0, 0)])

    def eio(fd):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(OSError):
        checkpoints.write_leader_epoch_checkpoint(path, [(0, 0), (1, 10)])
    monkeypatch.undo()
    assert checkpoints.read_leader_epoch_checkpoint(path) == [(0, 0)]
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


def test_stale_temp_file_left_by_a_crash(tmp_path):
    """A .tmp a crash left half-written is never read, and a writable open removes it."""
    d = tmp_path / "topic-0"
    with Log.open(d) as log:
        log.append(values_batch(0, 2), leader_epoch=3)
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"0\n2\n3 ")
    (tmp_path / "recovery-point-offset-checkpoint.tmp").write_bytes(b"0\n")
    with Log.open(d, read_only=True) as log:
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(3, 0)]
    assert (d / "leader-epoch-checkpoint.tmp").exists()  # read-only: left alone
    with Log.open(d) as log:
        assert log.log_end_offset == 2
    assert not (d / "leader-epoch-checkpoint.tmp").exists()
    assert checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        ("topic", 0): 2
    }


def test_crash_during_producer_snapshot_keeps_old_snapshot(tmp_path, monkeypatch):
    from kafkalog.storage import producer_state

    path = tmp_path / f"{5:020d}.snapshot"
    producer_state.write_snapshot(str(path), [])
    old = path.read_bytes()

    def crash(fd):
        raise Crash()

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(Crash):
        producer_state.write_snapshot(str(path), [])
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert sorted(os.listdir(tmp_path)) == [path.name]


def test_exchange_paths_swaps_or_declines(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_bytes(b"from a")
    (b / "y").write_bytes(b"from b")
    if files.exchange_paths(a, b):
        assert (a / "y").exists() and (b / "x").exists()
    else:  # not available here: nothing changed
        assert (a / "x").exists() and (b / "y").exists()


def test_spark_overwrite_without_atomic_exchange(tmp_path, monkeypatch):
    w = _spark_write()
    root = tmp_path / "out"
    opts = w.WriteOptions.parse({"path": str(root)})
    for job, values, fallback in (("j1", [b"a", b"b"], False), ("j2", [b"c"], True)):
        if fallback:
            monkeypatch.setattr(files, "exchange_paths", lambda a, b: False)
        w.prepare_job(opts, job)
        tw = w.TaskWriter(opts, job, "task-0", True)
        tw.write_batch(_rows(["t"] * len(values), values))
        w.commit_job(opts, job, tw.finish(), True)
    with Log.open(root / "t-0", read_only=True) as log:
        assert [r.value for r in log.iter_records()] == [b"c"]
    assert sorted(os.listdir(root)) == sorted(
        ["t-0", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
         "replication-offset-checkpoint", ".lock"]
    )
