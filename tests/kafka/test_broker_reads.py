"""Apache Kafka as the judge of what kafkalog reads (issue 26, part 1).

A real Kafka broker (see ``conftest.broker_matrix``) wrote the log directories and its Java
consumer read them back; kafkalog then reads the same directories, the broker stopped, and
must answer what Kafka answered: the records a consumer gets (offsets, keys, values, headers,
timestamps and their types) at both isolation levels, the log start and end offsets, the last
stable offset, ``offsetsForTimes`` and the Admin's ListOffsets.  Each read is made twice: on the
directory the broker left after its final clean shutdown (``clean``), and on a copy taken right
after a SIGKILL mid-produce (``unclean``: kafkalog's read-only recovery must answer what the
broker, restarted on the same files, then served).
"""
from __future__ import annotations

import base64
from typing import Any, Dict, List, Optional, Tuple

import pytest

from kafka_matrix import INTERNAL, PARTITIONS

pa = pytest.importorskip("pyarrow")
import kafkalog.arrow as ka  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

pytestmark = pytest.mark.kafka

ISOLATIONS = ("read_uncommitted", "read_committed")
USER = [(t, p) for t, parts in PARTITIONS.items() for p in parts]
ALL = USER + [(t, p) for t, parts in INTERNAL.items() for p in parts]
# (state, topic, partition): the internal topics are compared after the clean shutdown only
# (the restarted broker's coordinators own them)
CASES = [("clean", t, p) for t, p in ALL] + [("unclean", t, p) for t, p in USER]


def case_id(case) -> str:
    state, topic, p = case
    return f"{state}-{topic}-{p}"


Row = Tuple[int, Optional[bytes], Optional[bytes], Tuple[Tuple[str, Optional[bytes]], ...],
            int, int]


def _b(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else base64.b64decode(s)


def consumer_rows(m, topic: str, p: int, isolation: str) -> List[Row]:
    return [(r["offset"], _b(r["key"]), _b(r["value"]),
             tuple((k, _b(v)) for k, v in r["headers"]), r["timestamp"], r["timestampType"])
            for r in m.records[(topic, p, isolation)]]


def _opt(b) -> Optional[bytes]:
    return None if b is None else bytes(b)


def log_rows(log, isolation: str) -> List[Row]:
    types: Dict[int, int] = {}
    for batch in log.iter_batches():
        ttype = int(batch.timestamp_type)
        for r in batch:
            types[r.offset] = ttype
    return [(r.offset, _opt(r.key), _opt(r.value), tuple((k, _opt(v)) for k, v in r.headers),
             r.timestamp, types[r.offset])
            for r in log.iter_records(isolation=isolation)]


def arrow_rows(table) -> List[Row]:
    d = table.to_pydict()
    return [(off, key, value, tuple((h["key"], h["value"]) for h in (headers or ())), ts, tt)
            for off, key, value, headers, ts, tt in zip(d["offset"], d["key"], d["value"],
                                                        d["headers"], d["timestamp"],
                                                        d["timestampType"])]


def directory(m, state: str, topic: str, p: int):
    return (m.clean_dir if state == "clean" else m.unclean_dir) / f"{topic}-{p}"


def assert_same(kafka: List[Row], kafkalog: List[Row], what: str) -> None:
    assert len(kafkalog) == len(kafka), f"{what}: {len(kafkalog)} records, Kafka {len(kafka)}"
    for a, b in zip(kafka, kafkalog):
        assert b == a, f"{what}: at offset {a[0]} kafkalog read {b!r}, Kafka {a!r}"


# -- the matrix is what it should be -----------------------------------------------------------
def test_matrix_covers_the_cases(broker_matrix):
    """The broker did write what the comparisons below are meant to cover."""
    m = broker_matrix
    assert not (m.unclean_dir / ".kafka_cleanshutdown").exists()
    assert (m.clean_dir / ".kafka_cleanshutdown").exists()
    segments = {(t, p): len(list(directory(m, "clean", t, p).glob("*.log"))) for t, p in USER}
    assert all(segments[("codecs", p)] >= 2 for p in PARTITIONS["codecs"]), segments
    assert segments[("txn", 0)] >= 2 and segments[("crash", 0)] >= 2, segments
    # retention deleted the oldest segments; the cleaner removed records of compacted-0
    assert m.bounds[("retention", 0, "read_uncommitted")][0] > 0
    start, end = m.bounds[("compacted", 0, "read_uncommitted")]
    assert len(m.records[("compacted", 0, "read_uncommitted")]) < end - start
    # an open transaction: the last stable offset is below the end of txn-0
    assert m.bounds[("txn", 0, "read_committed")][1] < m.bounds[("txn", 0, "read_uncommitted")][1]
    # aborted transactions: read_committed sees fewer records
    assert len(m.records[("txn", 1, "read_committed")]) < len(
        m.records[("txn", 1, "read_uncommitted")])
    assert any(r["timestampType"] == 1 for r in m.records[("appendtime", 0, "read_uncommitted")])
    assert m.records[("__consumer_offsets", 0, "read_uncommitted")]
    assert m.records[("__transaction_state", 0, "read_uncommitted")]
    assert sum(len(m.records[("crash", p, "read_uncommitted")]) for p in (0, 1)) >= m.crash_acked
    assert "Kafka Server started" in m.broker_log


# -- records -------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_log_records(broker_matrix, case, isolation):
    """``Log.open(read_only=True).iter_records`` reads what Kafka's consumer got."""
    state, topic, p = case
    with Log.open(directory(broker_matrix, state, topic, p), read_only=True) as log:
        got = log_rows(log, isolation)
    assert_same(consumer_rows(broker_matrix, topic, p, isolation), got,
                f"{state} {topic}-{p} {isolation}")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_log_bounds(broker_matrix, case):
    """Log start offset, log end offset and last stable offset are the consumer's
    beginningOffsets, endOffsets (read_uncommitted) and endOffsets (read_committed)."""
    state, topic, p = case
    m = broker_matrix
    with Log.open(directory(m, state, topic, p), read_only=True) as log:
        got = (log.log_start_offset, log.log_end_offset, log.last_stable_offset)
    start, end = m.bounds[(topic, p, "read_uncommitted")]
    _, lso = m.bounds[(topic, p, "read_committed")]
    assert got == (start, end, lso), f"{state} {topic}-{p}: (start, end, LSO)"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_to_arrow(broker_matrix, case, isolation):
    """``to_arrow(partition directory)`` decodes what the consumer got (read_committed up to
    the last stable offset, which a file alone does not hold)."""
    state, topic, p = case
    m = broker_matrix
    path = directory(m, state, topic, p)
    end = None
    if isolation == "read_committed":
        with Log.open(path, read_only=True) as log:
            end = log.last_stable_offset
    table = ka.to_arrow(str(path), read_committed=isolation == "read_committed", end_offset=end,
                        timestamp_unit=None)
    assert_same(consumer_rows(m, topic, p, isolation), arrow_rows(table),
                f"to_arrow {state} {topic}-{p} {isolation}")


def _ranges(offsets: List[int], segment_bases: List[int], start: int, end: int):
    """Offset ranges that start and end on segment boundaries, inside batches, at the ends."""
    out = [(start, end), (start, start + 1), (end - 1, end + 5)]
    for b in segment_bases[1:]:
        out += [(b - 1, b + 1), (b, b + 3)]
    for i in range(0, len(offsets), max(1, len(offsets) // 6)):
        out.append((offsets[i] + 1, offsets[i] + 9))
    return out


@pytest.mark.parametrize("case", [c for c in CASES if c[1] in ("codecs", "txn", "compacted",
                                                              "retention", "crash")],
                         ids=case_id)
def test_iter_batches_offset_ranges(broker_matrix, case):
    """``iter_batches(directory, start_offset=, end_offset=)`` returns the consumer's records of
    that range (read_uncommitted), in small Arrow batches."""
    state, topic, p = case
    m = broker_matrix
    path = directory(m, state, topic, p)
    rows = consumer_rows(m, topic, p, "read_uncommitted")
    start, end = m.bounds[(topic, p, "read_uncommitted")]
    bases = sorted(int(f.name[:20]) for f in path.glob("*.log"))
    for lo, hi in _ranges([r[0] for r in rows], bases, start, end):
        got = []
        for rb in ka.iter_batches(str(path), start_offset=lo, end_offset=hi, max_rows=4,
                                  timestamp_unit=None):
            got += arrow_rows(pa.Table.from_batches([rb]))
        want = [r for r in rows if lo <= r[0] < hi]
        assert_same(want, got, f"iter_batches {state} {topic}-{p} [{lo}, {hi})")


# -- offsets for times and ListOffsets -------------------------------------------------------------
def _visible(found, lso: int, isolation: str):
    """Kafka answers a timestamp lookup only below the fetchable end (the LSO for
    read_committed, the high watermark otherwise)."""
    if found is None or (isolation == "read_committed" and found.offset >= lso):
        return None
    return found


@pytest.mark.parametrize("case", [c for c in CASES if c[1] in PARTITIONS], ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_offsets_for_times(broker_matrix, case, isolation):
    """``Log.offset_for_timestamp`` answers the consumer's ``offsetsForTimes``."""
    state, topic, p = case
    m = broker_matrix
    with Log.open(directory(m, state, topic, p), read_only=True) as log:
        lso = log.last_stable_offset
        wrong = []
        for target, offset, timestamp in m.for_times[(topic, p, isolation)]:
            found = _visible(log.offset_for_timestamp(target), lso, isolation)
            got = None if found is None else (found.offset, found.timestamp)
            want = None if offset is None else (offset, timestamp)
            if got != want:
                wrong.append((target, want, got))
    assert not wrong, f"{state} {topic}-{p} {isolation}: (target, Kafka, kafkalog): {wrong[:10]}"


SPECS = {"earliest": -2, "earliest_local": -4, "latest": -1, "max_timestamp": -3}


@pytest.mark.parametrize("case", [c for c in CASES if c[1] in PARTITIONS], ids=case_id)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_list_offsets(broker_matrix, case, isolation):
    """Earliest, latest and max-timestamp ListOffsets (the Admin client's) against
    ``Log.offset_for_timestamp(-2, -4, -1, -3)``: offset, timestamp and leader epoch."""
    state, topic, p = case
    m = broker_matrix
    listed = m.listed[(topic, p, isolation)]
    got: Dict[str, Any] = {}
    with Log.open(directory(m, state, topic, p), read_only=True) as log:
        lso = log.last_stable_offset
        for name, target in SPECS.items():
            found = log.offset_for_timestamp(target)
            if name == "latest" and isolation == "read_committed":
                found = found._replace(offset=lso)
            elif name == "max_timestamp":
                found = _visible(found, lso, isolation)
            got[name] = (-1, -1, -1) if found is None else (
                found.offset, found.timestamp,
                -1 if found.leader_epoch is None else found.leader_epoch)
    want = {name: (listed[name]["offset"], listed[name]["timestamp"], listed[name]["leaderEpoch"])
            for name in SPECS}
    # LATEST's leader epoch is the live partition's: the restarted broker was given a new leader
    # epoch by the controller and recorded it at the log end, an entry its own LogLoader drops
    # from the files' view on load (LeaderEpochFileCache.truncateFromEnd(log end offset)).  From
    # the files the answer is the epoch of the last batch, the one Kafka's consumer reports
    # with the last record.
    records = m.records[(topic, p, "read_uncommitted")]
    assert want["latest"][2] >= records[-1]["leaderEpoch"]
    want["latest"] = want["latest"][:2] + (records[-1]["leaderEpoch"],)
    assert got == want, f"{state} {topic}-{p} {isolation}: (offset, timestamp, leader epoch)"


# -- the metadata log ------------------------------------------------------------------------------
def test_cluster_metadata_log_reads(broker_matrix):
    """``__cluster_metadata-0`` (the KRaft log: control batches, snapshots beside it) opens and
    reads batch by batch, offsets contiguous up to the log end."""
    with Log.open(broker_matrix.clean_dir / "__cluster_metadata-0", read_only=True) as log:
        expected = log.log_start_offset
        count = 0
        for batch in log.iter_batches():
            assert batch.base_offset == expected
            count += len(list(batch))
            expected = batch.last_offset + 1
        assert expected == log.log_end_offset and count > 0
