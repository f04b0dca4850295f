"""``Log.open(uri, read_only=True)`` over the S3 test server against the same directories
opened locally read-only: the same offsets, segments, reads, timestamp lookups, transaction
facts, producer state and leader epochs (a differential over several generated logs), with
ranged reads that fetch a small part of the log, and nothing written to the store."""
from __future__ import annotations

import os
import random
import shutil

import pytest

from kafkalog import MemoryRecordsBuilder
from kafkalog.control import build_end_txn_marker
from kafkalog.errors import KafkaLogError, KafkaStorageError
from kafkalog.storage import checkpoints, files
from kafkalog.storage import fs as _fs
from kafkalog.storage import store_fs as _store_fs
from kafkalog.storage.log import Log

from .s3_support import BUCKET, s3_client, upload_tree

pa = pytest.importorskip("pyarrow")

PREFIX = "logtest"
SMALL_BLOCKS = {"block_size": 64 * 1024}
BASE_TS = 1_700_000_000_000
CONFIG = {"segment.bytes": 8 * 1024, "index.interval.bytes": 512,
          "max.message.bytes": 1024 * 1024}


def _codecs():
    out = ["none", "gzip"]
    for c in ("lz4", "zstd", "snappy"):
        try:
            MemoryRecordsBuilder(compression_type=c).build()
            out.append(c)
        except Exception:
            pass
    return out


def _fill(log: Log, rng: random.Random, records: int, *, open_txn: bool) -> None:
    """Batches of 1-40 records with jittered timestamps, rotating codecs, leader epochs that
    grow, and transactions of two producers (committed and aborted), one left open at the end
    when ``open_txn``."""
    codecs = _codecs()
    seqs = {}
    i = 0
    epoch = 0
    txn_open = {}  # producer id -> open since
    while i < records:
        if rng.random() < 0.04:
            epoch += 1
        k = rng.randrange(1, 40)
        pid = rng.choice((-1, -1, 7001, 7002))
        ts = BASE_TS + i * 10 + rng.randrange(-3000, 3000)
        if pid >= 0:
            b = MemoryRecordsBuilder(2, "none", log.log_end_offset, "create_time", pid, 0,
                                     seqs.get(pid, 0), is_transactional=True,
                                     partition_leader_epoch=epoch)
            seqs[pid] = seqs.get(pid, 0) + k
            txn_open.setdefault(pid, i)
        else:
            b = MemoryRecordsBuilder(2, codecs[(i // 7) % len(codecs)], log.log_end_offset,
                                     partition_leader_epoch=epoch)
        for j in range(k):
            b.append(ts + j, b"key-%d" % ((i + j) % 37),
                     None if (i + j) % 41 == 40 else b"value-%d-" % (i + j) * rng.randrange(1, 6))
        log.append_as_follower(b.build())
        i += k
        for p in list(txn_open):
            if i - txn_open[p] > 60 and rng.random() < 0.5:
                commit = rng.random() < 0.6
                log.append_as_follower(build_end_txn_marker(
                    commit, p, 0, 0, base_offset=log.log_end_offset, timestamp=ts + k,
                    partition_leader_epoch=epoch))
                del txn_open[p]
    if open_txn and not txn_open:
        b = MemoryRecordsBuilder(2, "none", log.log_end_offset, "create_time", 7003, 0, 0,
                                 is_transactional=True, partition_leader_epoch=epoch)
        b.append(BASE_TS + i * 10, b"open", b"transaction")
        log.append_as_follower(b.build())
    if not open_txn:
        for p in list(txn_open):
            log.append_as_follower(build_end_txn_marker(
                False, p, 0, 0, base_offset=log.log_end_offset, timestamp=BASE_TS + i * 10,
                partition_leader_epoch=epoch))


def _legacy(log: Log, rng: random.Random) -> None:
    """v0 messages, then v1 (some compressed), then v2, as an upgraded broker keeps them."""
    i = 0
    for magic, codec in ((0, "none"), (0, "gzip"), (1, "none"), (1, "gzip"), (2, "gzip")):
        for _ in range(12):
            b = MemoryRecordsBuilder(magic, codec, log.log_end_offset)
            for j in range(rng.randrange(1, 30)):
                b.append(BASE_TS + i * 10 if magic else -1, b"k%d" % i, b"v%d" % i * 20)
                i += 1
            log.append_as_follower(b.build())


@pytest.fixture(scope="module")
def gen_root(tmp_path_factory):
    """A local log-dir root of partitions made for these tests (all closed cleanly but one)."""
    root = str(tmp_path_factory.mktemp("remote-log") / "root")
    rng = random.Random(20)
    with Log.open(os.path.join(root, "epochs-0"), CONFIG) as log:
        _fill(log, rng, 2500, open_txn=True)
    # the log start offset moved by DeleteRecords (kept in the root's
    # log-start-offset-checkpoint), the segments below it deleted as retention deletes them
    trimmed = os.path.join(root, "trimmed-0")
    with Log.open(trimmed, CONFIG) as log:
        _fill(log, rng, 1500, open_txn=False)
        gone = [s.base_offset for s in log.segments[:2]]
        log.increment_log_start_offset(log.segments[2].base_offset + 5)
    for n in os.listdir(trimmed):
        if n[:20].isdigit() and int(n[:20]) in gone:
            os.unlink(os.path.join(trimmed, n))
    with Log.open(os.path.join(root, "legacy-0"), CONFIG) as log:
        _legacy(log, rng)
    # the root's log start checkpoint past a partition's end (its segments lost or copied
    # from elsewhere): opened, it is an empty log starting at the checkpoint
    with Log.open(os.path.join(root, "past-end-0"), CONFIG) as log:
        _fill(log, rng, 300, open_txn=False)
        past_end = log.log_end_offset + 1000
    ckpt = os.path.join(root, files.LOG_START_OFFSET_CHECKPOINT_FILE)
    starts = checkpoints.read_offset_checkpoint(ckpt)
    starts[files.TopicPartition("past-end", 0)] = past_end
    checkpoints.write_offset_checkpoint(
        ckpt, {(tp.topic, tp.partition): o for tp, o in starts.items()})
    # a copy that needs recovery: no clean-shutdown marker, a missing index, a torn tail
    src, dst = os.path.join(root, "epochs-0"), os.path.join(root, "unclean-0")
    shutil.copytree(src, dst)
    os.unlink(os.path.join(dst, ".kafka_cleanshutdown"))
    indexes = sorted(n for n in os.listdir(dst) if n.endswith(".index"))
    os.unlink(os.path.join(dst, indexes[len(indexes) // 2]))
    last = sorted(n for n in os.listdir(dst) if n.endswith(".log"))[-1]
    with open(os.path.join(dst, last), "ab") as f:
        f.write(b"\0\0\0\0\0\0\0\x63\0\0\0\x50torn")
    return root


@pytest.fixture(scope="module")
def gen_s3(s3_env, gen_root):
    upload_tree(s3_env, gen_root, BUCKET, PREFIX)
    return f"s3://{BUCKET}/{PREFIX}"


def _dirs(root):
    return sorted(e.name for e in _fs.LOCAL.list_dir(root) if e.kind == _fs.DIRECTORY)


@pytest.fixture(scope="module")
def pairs(gen_root, gen_s3, log_root, s3_root):
    """(name, local read-only Log, remote read-only Log) for every partition of both roots."""
    out = []
    try:
        for local_root, remote_root in ((gen_root, gen_s3), (log_root, s3_root)):
            for d in _dirs(local_root):
                a = Log.open(os.path.join(local_root, d), read_only=True)
                out.append((d, a, None))
                b = Log.open(_fs.join(remote_root, d), read_only=True,
                             storage_options=SMALL_BLOCKS)
                out[-1] = (d, a, b)
        yield out
    finally:
        for _, a, b in out:
            a.close()
            if b is not None:
                b.close()


def _facts(log: Log):
    ps = log.producer_state
    return dict(
        start=log.log_start_offset, end=log.log_end_offset, hw=log.high_watermark,
        lso=log.last_stable_offset, unstable=log.first_unstable_offset(),
        recovery_point=log.recovery_point, clean=log.had_clean_shutdown,
        tp=log.topic_partition, topic_id=log.topic_id, size=log.size, length=len(log),
        segments=[(s.base_offset, s.size) for s in log.segments],
        offset_indexes=[list(s.offset_index) for s in log.segments],
        time_indexes=[list(s.time_index) for s in log.segments],
        aborted=[s.txn_index.all_aborted_txns() for s in log.segments],
        epochs=log.leader_epoch_cache.entries,
        producers=sorted(ps.producers.items()), ongoing=sorted(ps.ongoing_txns.items()),
        map_end=ps.map_end_offset, ignored=[(i.name, i.kind) for i in log.ignored_files],
    )


def _outcome(fn, *args, **kw):
    """What a call answers: its value, or the kind of error (and the offset it names)."""
    try:
        got = fn(*args, **kw)
    except (KafkaLogError, ValueError) as e:
        return ("raised", type(e).__name__, getattr(e, "offset", None))
    if hasattr(got, "buffer"):
        return bytes(got.buffer())
    return got


def _offsets(log: Log, rng: random.Random, n: int):
    lo, hi = log.log_start_offset, log.log_end_offset
    picks = {lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0}
    for s in log.segments:
        picks.update((s.base_offset - 1, s.base_offset, s.base_offset + 1))
    picks.update(rng.randrange(lo, hi + 1) for _ in range(n))
    return sorted(p for p in picks if p >= 0)


def test_facts_equal(pairs):
    assert len(pairs) >= 12
    for name, a, b in pairs:
        assert _facts(b) == _facts(a), name
    by = {name: (a, b) for name, a, b in pairs}
    # the generated logs show what they were made to show
    a, _ = by["epochs-0"]
    assert a.last_stable_offset < a.log_end_offset and len(a.leader_epoch_cache.entries) > 3
    assert len(a.segments) > 5 and any(s.txn_index.all_aborted_txns() for s in a.segments)
    a, _ = by["trimmed-0"]
    assert a.log_start_offset > a.segments[0].base_offset
    a, _ = by["unclean-0"]
    assert not a.had_clean_shutdown and a.log_end_offset == by["epochs-0"][0].log_end_offset


def test_checkpoint_past_the_end_reads_as_the_writable_open(pairs, gen_root, tmp_path):
    """Read-only, locally and in the store, the log answers what a writable open of a copy
    answers: start = end = the checkpoint, one empty segment there, no records, no epochs (it
    raised FileNotFoundError: no log segments to read)."""
    (a, b), = [(a, b) for name, a, b in pairs if name == "past-end-0"]
    copy = tmp_path / "root"
    shutil.copytree(gen_root, copy)
    with Log.open(str(copy / "past-end-0"), CONFIG) as rw:
        want = {k: v for k, v in _facts(rw).items() if k not in ("ignored", "recovery_point")}
        want_rows = list(rw.iter_records())
    ckpt = os.path.join(gen_root, files.LOG_START_OFFSET_CHECKPOINT_FILE)
    start = checkpoints.read_offset_checkpoint(ckpt)[files.TopicPartition("past-end", 0)]
    assert (want["start"], want["end"], want["segments"], want["epochs"]) == \
        (start, start, [(start, 0)], [])
    for log in (a, b):
        got = {k: v for k, v in _facts(log).items() if k not in ("ignored", "recovery_point")}
        assert got == want
        assert list(log.iter_records()) == want_rows == []
        assert _outcome(log.read, start - 1) == ("raised", "OffsetOutOfRangeError", start - 1)
    assert len([n for n in os.listdir(os.path.join(gen_root, "past-end-0"))
                if n.endswith(".log")]) > 1  # the read-only opens removed nothing


def test_log_root_reads_every_partition_locally_and_in_the_store(gen_root, gen_s3):
    """A root (a broker's log.dirs copy) given to to_arrow: every partition, each row with
    its topic and partition, the same from the store as from the local copy (it gave 0 rows)."""
    import kafkalog.arrow as ka

    cols = ["topic", "partition", "offset", "key", "value"]
    local = ka.to_arrow(gen_root, cols)
    remote = ka.to_arrow(gen_s3, cols, storage_options=SMALL_BLOCKS)
    assert remote.equals(local)
    parts = [ka.to_arrow(os.path.join(gen_root, d), cols) for d in _dirs(gen_root)]
    assert local.equals(pa.concat_tables(parts)) and local.num_rows > 1000
    # every partition with records inside its log (past-end-0's log start checkpoint is past
    # its end: a DeleteRecords hid them all, as Log.open answers)
    def has_records(d):
        with Log.open(os.path.join(gen_root, d), CONFIG, read_only=True) as log:
            return log.log_start_offset < log.log_end_offset

    assert sorted(set(zip(local.column("topic").to_pylist(),
                          local.column("partition").to_pylist()))) == \
        sorted((d.rsplit("-", 1)[0], 0) for d in _dirs(gen_root) if has_records(d))


def test_reads_equal(pairs):
    rng = random.Random(5)
    for name, a, b in pairs:
        for off in _offsets(a, rng, 40):
            for max_bytes, one in ((1, True), (0, True), (700, False), (9000, True),
                                   (1 << 20, True)):
                for iso in ("read_uncommitted", "read_committed"):
                    want = _outcome(a.read, off, max_bytes, one, isolation=iso)
                    got = _outcome(b.read, off, max_bytes, one, isolation=iso)
                    assert got == want, (name, off, max_bytes, one, iso)
            bound = off + rng.randrange(0, 50)
            assert _outcome(b.read, off, 5000, max_offset=bound) == \
                _outcome(a.read, off, 5000, max_offset=bound), (name, off, bound)


def test_records_and_transactions_equal(pairs):
    def rows(log, iso):
        return [(r.offset, r.timestamp, r.key, r.value)
                for r in log.iter_records(isolation=iso)]

    for name, a, b in pairs:
        for iso in ("read_uncommitted", "read_committed"):
            assert rows(b, iso) == rows(a, iso), (name, iso)
        lo, lso = a.log_start_offset, a.last_stable_offset
        for start in (lo, (lo + lso) // 2, lso):
            assert b.collect_aborted_transactions(start, lso) == \
                a.collect_aborted_transactions(start, lso), (name, start)
        b.verify_indexes()  # no error locally: none remotely either
        a.verify_indexes()


def test_timestamp_lookups_equal(pairs):
    rng = random.Random(9)
    for name, a, b in pairs:
        stamps = sorted({r.timestamp for r in a.iter_records()})
        targets = [-1, -2, -3, -4, -5, 0]
        if stamps:
            targets += [stamps[0] - 1, stamps[-1], stamps[-1] + 1]
            targets += [rng.choice(stamps) + rng.randrange(-2, 3) for _ in range(40)]
        for t in targets:
            assert _outcome(b.offset_for_timestamp, t) == _outcome(a.offset_for_timestamp, t), \
                (name, t)


def test_arbitrary_reads_equal(pairs):
    """Reads and lookups drawn by hypothesis over the transactional log."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    (a, b), = [(a, b) for name, a, b in pairs if name == "epochs-0"]
    end = a.log_end_offset

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(off=st.integers(-2, end + 2), max_bytes=st.integers(0, 70_000),
                      one=st.booleans(), bound=st.none() | st.integers(0, end + 5),
                      iso=st.sampled_from(["read_uncommitted", "read_committed"]),
                      ts=st.integers(BASE_TS - 5000, BASE_TS + end * 10 + 5000))
    def check(off, max_bytes, one, bound, iso, ts):
        assert _outcome(b.read, off, max_bytes, one, bound, iso) == \
            _outcome(a.read, off, max_bytes, one, bound, iso)
        assert _outcome(b.offset_for_timestamp, ts) == _outcome(a.offset_for_timestamp, ts)

    check()


def _objects(endpoint):
    client = s3_client(endpoint)
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        out.extend((o["Key"], o["Size"], o["ETag"], o["LastModified"])
                   for o in page.get("Contents", ()))
    return sorted(out)


def test_nothing_written_and_writable_open_refused(gen_s3, gen_root, s3_env, tmp_path,
                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = _objects(s3_env)
    assert any(k.startswith(PREFIX + "/unclean-0/") for k, *_ in before)
    for d in _dirs(gen_root):
        uri = _fs.join(gen_s3, d)
        with Log.open(uri, read_only=True, storage_options=SMALL_BLOCKS) as log:
            log.read(log.log_start_offset)
            with pytest.raises(ValueError):
                log.append(MemoryRecordsBuilder().build())
            with pytest.raises(ValueError):
                log.roll()
            log.flush()  # a read-only flush does nothing
        for kw in ({}, {"read_only": False}, {"read_only": False, "create": False}):
            with pytest.raises(KafkaStorageError) as ei:
                Log.open(uri, **kw)
            assert uri in str(ei.value) and "read_only=True" in str(ei.value)
    assert _objects(s3_env) == before  # no object added, changed or removed
    assert os.listdir(tmp_path) == []  # and no local directory named after the URI


def test_missing_prefix_and_bucket_name_the_uri(gen_s3):
    for uri in (gen_s3 + "/nope-0", f"s3://{BUCKET}/no/such/prefix/t-0",
                "s3://kafkalog-no-such-bucket/t-0"):
        with pytest.raises(KafkaStorageError) as ei:
            Log.open(uri, read_only=True, storage_options={"retries": 0})
        assert uri in str(ei.value)
    with pytest.raises(KafkaStorageError) as ei:  # a file, not a partition directory
        Log.open(gen_s3 + "/recovery-point-offset-checkpoint", read_only=True)
    assert "recovery-point-offset-checkpoint" in str(ei.value)


def test_one_offset_fetches_little(big_partition, monkeypatch):
    """Count the bytes fetched: opening the log reads its indexes, checkpoints, snapshot and
    the end of its last segment; reading one offset then fetches one block, not the log."""
    local, uri = big_partition
    made = []
    orig = _store_fs.ArrowFileSystem.for_uri

    def spy(u, opts=None):
        made.append(orig(u, opts))
        return made[-1]

    monkeypatch.setattr(_store_fs.ArrowFileSystem, "for_uri", staticmethod(spy))
    log_bytes = sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local)
                    if n.endswith(".log"))
    with Log.open(local, read_only=True) as a, \
            Log.open(uri, read_only=True, storage_options=SMALL_BLOCKS) as b:
        (store,) = made
        opened, requests = store.bytes_read, store.requests
        assert len(b.segments) >= 4
        rng = random.Random(3)
        for off in [rng.randrange(a.log_start_offset, a.log_end_offset) for _ in range(5)]:
            before = store.bytes_read
            got = b.read(off, 1)
            fetched = store.bytes_read - before
            assert bytes(got.buffer()) == bytes(a.read(off, 1).buffer())
            assert fetched <= SMALL_BLOCKS["block_size"] + 4096
            assert fetched < 0.05 * log_bytes, (off, fetched, log_bytes)
            print(f"read({off}): fetched {fetched} of {log_bytes} log bytes")
        assert opened < 0.1 * log_bytes, (opened, log_bytes)
        print(f"open: fetched {opened} of {log_bytes} log bytes in {requests} requests")


@pytest.mark.parametrize("entry_size", [8, 12])
def test_store_index_count_equals_local_count(tmp_path, entry_size):
    """read_store_index finds the entries a local read-only open counts, for index files of
    every shape (trimmed, preallocated with a zero tail, zero slots inside), reading through
    the FileSystem interface (here the local one, whose reads are exact ranges)."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from kafkalog.storage.index import OffsetIndex, TimeIndex, read_store_index

    cls = OffsetIndex if entry_size == 8 else TimeIndex
    path = str(tmp_path / ("00000000000000000000" + (".index" if entry_size == 8
                                                     else ".timeindex")))

    @hypothesis.settings(max_examples=120, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(entries=st.integers(0, 5000), zero_tail=st.integers(0, 9000),
                      holes=st.lists(st.integers(0, 14000), max_size=3),
                      ragged=st.integers(0, entry_size - 1))
    def check(entries, zero_tail, holes, ragged):
        slot = bytes(range(1, entry_size + 1))
        data = bytearray(slot * entries + bytes(entry_size * zero_tail + ragged))
        for h in holes:
            if h * entry_size + entry_size <= len(data):
                data[h * entry_size: (h + 1) * entry_size] = bytes(entry_size)
        with open(path, "wb") as f:
            f.write(data)
        local = cls(path, 0, writable=False)
        try:
            want = (local.entries, local.length)
        finally:
            local.close()
        got, size = read_store_index(_fs.LOCAL, path, entry_size)
        assert (len(got) // entry_size, size) == want
        assert got == bytes(data[: len(got)]) and len(got) % entry_size == 0
        idx = cls.from_bytes(path, 0, got, length=size)
        assert (idx.entries, idx.length) == want

    check()


def test_preallocated_index_fetches_its_entries(s3_env, tmp_path):
    """The active segment of a copy taken from a running broker: its indexes preallocated
    with zeros.  The remote open answers as the local one and fetches the entries, not the
    zero tail."""
    from kafkalog.storage.index import OffsetIndex, read_store_index

    root = tmp_path / "live"
    d = str(root / "live-0")
    log = Log.open(d, {"segment.index.bytes": 400_000, "index.interval.bytes": 256})
    _fill(log, random.Random(1), 600, open_txn=False)
    log.flush()
    log.close_handlers()  # as a crash leaves it: untrimmed indexes, no clean-shutdown marker
    index = sorted(n for n in os.listdir(d) if n.endswith(".index"))[-1]
    assert os.path.getsize(os.path.join(d, index)) == 400_000
    upload_tree(s3_env, str(root), BUCKET, "live")
    uri = f"s3://{BUCKET}/live/live-0"
    store, _ = _store_fs.resolve(uri)
    got, size = read_store_index(store, _fs.join(uri, index), 8)
    local = OffsetIndex(os.path.join(d, index), int(index[:20]), writable=False)
    assert (len(got) // 8, size) == (local.entries, local.length) and local.entries > 0
    local.close()
    assert store.bytes_read < size / 4, store.bytes_read  # not the zero tail
    print(f"preallocated index: fetched {store.bytes_read} of {size} bytes")
    with Log.open(d, read_only=True) as a, Log.open(uri, read_only=True) as b:
        assert _facts(b) == _facts(a)
        for off in range(a.log_start_offset, a.log_end_offset + 1, 7):
            assert _outcome(b.read, off, 3000) == _outcome(a.read, off, 3000)
