"""Reading never writes: ``kafkalog dump`` (every mode), ``verify``, ``stats``, the Spark read
path and ``Log.open(read_only=True)`` leave a partition directory in an *unclean* state (no
clean-shutdown marker, missing and garbage indexes, a torn tail, stale temp/swap/cleaned/deleted
files, no ``partition.metadata``) exactly as they found it: names, sizes, mtimes (ns) and
content hashes of every file and directory are compared before and after."""
from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path

import pytest

from kafkalog.control import build_end_txn_marker
from kafkalog.storage import files
from kafkalog.storage.log import Log

from .conftest import BASE_TS, run_cli, v2_batch

TOPIC = "orders"
CFG = {"segment.bytes": 600, "index.interval.bytes": 64, "max.message.bytes": 1 << 20}


def _seg(d: Path, base: int, suffix: str) -> Path:
    return d / f"{base:020d}{suffix}"


def _build(root: Path) -> Path:
    """A log-dir root with two partitions; ``orders-0`` is left unclean."""
    d = root / f"{TOPIC}-0"
    log = Log.open(d, CFG, topic_id=uuid.uuid4())
    ts = BASE_TS
    seq = 0
    for i in range(12):
        recs = [(ts + 3 * i + j, b"k%d" % j, b"value-%d-%d" % (i, j),
                 [("h", b"x")]) for j in range(3)]
        log.append(v2_batch(recs, producer_id=1, producer_epoch=0, base_sequence=seq))
        seq += 3
        if i in (4, 8):  # one aborted and one committed transaction
            pid = 10 + i
            log.append(v2_batch([(ts + 50, b"t", b"txn")], producer_id=pid, producer_epoch=0,
                                base_sequence=0, transactional=True))
            log.append(build_end_txn_marker(i == 8, pid, 0, 0, timestamp=ts + 51),
                       origin="coordinator")
    log.close()
    with Log.open(root / f"{TOPIC}-1", CFG) as other:
        other.append(v2_batch([(ts, b"a", b"b")]))

    bases = sorted(int(p.name[:20]) for p in d.glob("*.log"))
    assert len(bases) >= 4, bases
    # the unclean state
    (d / files.CLEAN_SHUTDOWN_FILE).unlink()
    (d / files.PARTITION_METADATA_FILE).unlink()
    _seg(d, bases[0], ".index").unlink()  # a missing index
    _seg(d, bases[1], ".timeindex").write_bytes(b"\x01garbage")  # a garbage index
    _seg(d, bases[1], ".index").write_bytes(b"\xff" * 16)
    last = _seg(d, bases[-1], ".log")
    with open(last, "ab") as f:  # a torn tail: half of a batch
        f.write(v2_batch([(ts, b"x", b"y" * 40)], base_offset=10_000)[:37])
    shutil.copyfile(_seg(d, bases[2], ".log"), _seg(d, bases[2], ".log.swap"))
    _seg(d, bases[0], ".log.cleaned").write_bytes(b"\x00" * 40)
    _seg(d, bases[0], ".index.cleaned").write_bytes(b"")
    shutil.copyfile(_seg(d, bases[3], ".log"), _seg(d, bases[3], ".log.deleted"))
    _seg(d, bases[3], ".timeindex.deleted").write_bytes(b"\x00" * 12)
    _seg(d, 99_999, ".index").write_bytes(b"\x00" * 8)  # an orphaned index
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"0\n1\n")
    (d / f"{bases[1]:020d}.snapshot.tmp").write_bytes(b"\x00\x01")
    (root / "recovery-point-offset-checkpoint.tmp").write_bytes(b"0\n")
    return d


def _snapshot(root: Path):
    """Every entry under ``root`` (root included): kind, size, mtime in ns and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [""] + dirnames + filenames:
            p = os.path.join(dirpath, name) if name else dirpath
            if name == "" and dirpath != str(root):
                continue  # each directory is listed once, by its parent
            st = os.lstat(p)
            if os.path.isdir(p):
                out[os.path.relpath(p, root)] = ("dir", st.st_mtime_ns,
                                                 tuple(sorted(os.listdir(p))))
            else:
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[os.path.relpath(p, root)] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture(scope="module")
def unclean(tmp_path_factory):
    root = tmp_path_factory.mktemp("ro") / "root"
    d = _build(root)
    return root, d, _snapshot(root)


def _assert_untouched(unclean):
    root, _d, before = unclean
    after = _snapshot(root)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"reading changed {changed}"


def _dump_variants(d: Path):
    every = sorted(str(p) for p in d.iterdir() if p.is_file())
    listed = ",".join(every)
    return [
        ["dump", str(d)],
        ["dump", str(d.parent)],
        ["dump", "--print-data-log", str(d)],
        ["dump", "--deep-iteration", "--print-data-log", str(d)],
        ["dump", "--deep-iteration", "--print-data-log", "--print-headers", "--json", str(d)],
        ["dump", "--json", str(d)],
        ["dump", "--skip-record-metadata", "--print-data-log", str(d)],
        ["dump", "--from-offset", "10", "--to-offset", "30", "--print-data-log", str(d)],
        ["dump", "--from-timestamp", str(BASE_TS + 20), str(d)],
        ["dump", "--files", listed],
        ["dump", "--files", listed, "--index-sanity-check"],
        ["dump", "--files", listed, "--verify-index-only"],
        ["dump", "--files", listed, "--deep-iteration", "--json"],
        ["--files", listed, "--print-data-log"],  # kafka-dump-log.sh style
    ]


def test_dump_writes_nothing(unclean):
    _root, d, _ = unclean
    for args in _dump_variants(d):
        r = run_cli(*args)
        assert r.rc in (0, 1), (args, r)
        assert r.out, (args, r)
        _assert_untouched(unclean)


@pytest.mark.parametrize("extra", [[], ["--deep"], ["--json", "--strict"], ["--quiet"]])
def test_verify_writes_nothing(unclean, extra):
    root, d, _ = unclean
    r = run_cli("verify", *extra, str(d), str(root))
    assert r.rc == 1, r  # the damage is reported ...
    _assert_untouched(unclean)  # ... and left alone


@pytest.mark.parametrize("extra", [[], ["--json"], ["--shallow", "--no-segments"]])
def test_stats_writes_nothing(unclean, extra):
    root, _d, _ = unclean
    r = run_cli("stats", *extra, str(root))
    assert r.rc in (0, 1) and r.out, r
    _assert_untouched(unclean)


def test_read_only_log_writes_nothing(unclean):
    _root, d, _ = unclean
    with Log.open(d, CFG, read_only=True) as log:
        assert not log.had_clean_shutdown
        recs = list(log.iter_records())
        assert recs and recs[0].offset == 0
        committed = list(log.iter_records(isolation="read_committed"))
        assert len(committed) < len(recs)
        assert log.collect_aborted_transactions(0, log.log_end_offset)
        assert log.offset_for_timestamp(BASE_TS + 10) is not None
        log.read(0, 1 << 20)
        log.flush()  # a no-op when read-only
        with pytest.raises(ValueError, match="read-only"):
            log.append(v2_batch([(BASE_TS, b"k", b"v")]))
    _assert_untouched(unclean)


def test_spark_read_path_writes_nothing(unclean):
    pytest.importorskip("pyarrow")
    from kafkalog.spark import _options, _planning, _schema, _tasks

    root, d, _ = unclean
    for o in (
        {"path": str(root)},
        {"path": str(d), "includeHeaders": "true", "kafka.isolation.level": "read_committed"},
        {"path": str(d), "startingTimestamp": str(BASE_TS + 10), "maxPartitionBytes": "256",
         "includeBatchMetadata": "true", "includeSegmentMetadata": "true"},
    ):
        opts = _options.ReadOptions.parse(o)
        schema = _schema.arrow_schema(opts)
        rows = 0
        for split in _planning.plan(opts):
            for rb in _tasks.read_split(split, opts, schema):
                rows += rb.num_rows
        assert rows > 0, o
        _assert_untouched(unclean)


def test_the_snapshot_sees_a_writable_open(tmp_path):
    """The check above can fail: a writable open of the same unclean directory recovers it
    (deletes the stale files, rebuilds indexes, truncates the torn tail)."""
    root = tmp_path / "root"
    d = _build(root)
    before = _snapshot(root)
    Log.open(d, CFG).close()
    after = _snapshot(root)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert "leader-epoch-checkpoint.tmp" not in os.listdir(d)
    assert f"{TOPIC}-0/{99_999:020d}.index" in changed
    assert len(changed) > 5
