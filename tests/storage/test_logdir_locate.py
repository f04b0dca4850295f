"""One rule for what a directory given to read is (``storage.logdir.locate``), followed by
every reader: ``to_arrow``/``iter_batches`` of a path, the Spark source's discovery, and
``kafkalog dump|verify|stats|salvage`` (tests/cli/test_paths_one_level_up.py).

A directory one level above log roots (``backups/`` holding ``broker-1/orders-0``: the root's
own name looks like a partition) was read as a root whose partition ``broker-1`` is empty: 0
rows, 0 records, "OK"; a directory holding only subdirectories without any log was "OK" too.
Now both are refused with an error naming the path (and, for the first, the paths to give)."""
from __future__ import annotations

import pytest

from kafkalog import MemoryRecordsBuilder
from kafkalog.errors import KafkaLogError
from kafkalog.storage import logdir

BASE_TS = 1_700_000_000_000


def _batch(base, n=3):
    b = MemoryRecordsBuilder(2, "none", base)
    for i in range(n):
        b.append(BASE_TS + base + i, b"k%d" % i, b"v%d" % (base + i))
    return b.build()


def _partition(d, records=9):
    from kafkalog.storage.log import Log

    with Log.open(str(d)) as log:
        for base in range(0, records, 3):
            log.append_as_follower(_batch(base))
    return d


@pytest.fixture
def backups(tmp_path):
    """``backups/broker-1`` and ``backups/broker-2``: two broker roots (named like partitions),
    each holding ``orders-0`` (broker-1 shut down cleanly: its marker is in its root)."""
    b = tmp_path / "backups"
    _partition(b / "broker-1" / "orders-0")
    (b / "broker-1" / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":3}')
    _partition(b / "broker-2" / "orders-0", records=6)
    return b


def test_the_rule(backups, no_logs, tmp_path):
    for root in ("broker-1", "broker-2"):
        loc = logdir.locate(backups / root)
        assert (loc.kind, [p.path for p in loc.partitions]) == (
            "root", [str(backups / root / "orders-0")])
        loc = logdir.locate(backups / root / "orders-0")
        assert (loc.kind, loc.holds_logs, [s.base_offset for s in loc.view.segments]) == (
            "partition", True, [0])
    with pytest.raises(logdir.NotALogError) as ei:
        logdir.locate(backups)
    assert ei.value.instead == [str(backups / "broker-1"), str(backups / "broker-2")]
    assert str(ei.value) == (
        f"{backups} is neither a log root nor a partition directory: its Kafka logs are one "
        f"level down, in the log roots {backups / 'broker-1'}, {backups / 'broker-2'}; pass "
        "those paths instead")
    assert isinstance(ei.value, KafkaLogError)
    for d in (no_logs, tmp_path / "empty"):
        d.mkdir(exist_ok=True)
        with pytest.raises(logdir.NotALogError, match=f"no Kafka log under {d}") as ei:
            logdir.locate(d)
        assert ei.value.instead == []
    # a directory named <topic>-<partition> without any log file: a partition holding nothing
    loc = logdir.locate(no_logs / "site-1")
    assert (loc.kind, loc.holds_logs) == ("partition", False)
    # a directory holding <topic>-<partition> directories with logs is a root, whatever its
    # name; one holding a directory of segments of another name is one level above it
    _partition(tmp_path / "loose" / "orders-3")
    assert logdir.locate(tmp_path / "loose").kind == "root"
    _partition(tmp_path / "above" / "copied segments")
    with pytest.raises(logdir.NotALogError, match="in the partition directory .*copied "
                                                  "segments; pass that path instead"):
        logdir.locate(tmp_path / "above")


def test_to_arrow_and_iter_batches_follow_it(backups, no_logs, tmp_path):
    import kafkalog.arrow as ka

    t = ka.to_arrow(backups / "broker-1", ["topic", "partition", "offset"])
    assert t.num_rows == 9 and set(t.column("topic").to_pylist()) == {"orders"}
    for d, match in ((backups, "one level down, in the log roots"),
                     (no_logs, f"no Kafka log under {no_logs}"),
                     (no_logs / "site-1", f"no Kafka log under {no_logs / 'site-1'}")):
        with pytest.raises(KafkaLogError, match=match):
            ka.to_arrow(d)
        with pytest.raises(KafkaLogError, match=match):
            list(ka.iter_batches(str(d)))
    empty = tmp_path / "orders-7"  # an empty directory is refused, whatever its name
    empty.mkdir()
    with pytest.raises(KafkaLogError, match=f"no Kafka log under {empty}"):
        ka.to_arrow(empty)


def test_spark_discovery_follows_it(backups, no_logs):
    pytest.importorskip("pyarrow")
    from kafkalog.spark import _discovery, _errors, _options

    def discover(path, streaming=False):
        return _discovery.discover(_options.ReadOptions.parse({"path": str(path)},
                                                              streaming=streaming))

    assert [(t.name, t.directory) for t in discover(backups / "broker-2")] == [
        ("orders-0", str(backups / "broker-2" / "orders-0"))]
    for streaming in (False, True):
        with _no_warnings():
            with pytest.raises(_errors.NoKafkaLogError, match="one level down") as ei:
                discover(backups, streaming)
        assert str(backups / "broker-1") in str(ei.value)
        with _no_warnings():
            with pytest.raises(_errors.NoKafkaLogError, match=f"no Kafka log under {no_logs}"):
                discover(no_logs, streaming)
    # the glob of the roots reads both (replicas: the policy picks one)
    found = _discovery.discover(_options.ReadOptions.parse(
        {"path": str(backups / "broker-*"), "replicaPolicy": "longest"}))
    assert [(t.name, t.directory) for t in found] == [
        ("orders-0", str(backups / "broker-1" / "orders-0"))]


class _no_warnings:
    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        self.caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)
        assert not self.caught, [str(w.message) for w in self.caught]
        return False
