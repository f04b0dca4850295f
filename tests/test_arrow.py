"""kafkalog.arrow: columnar decoding to Arrow and encoding back.

The reference is the record-by-record decoder (``kafkalog.MemoryRecords``): on every
conformance vector and on generated logs of every magic x codec x headers x nulls, the table
equals the records it yields.  Both twins of the columnar core (``_arrow`` and ``_arrow_py``) are
run in one process when the compiled one is loaded (the ``twin`` fixture) and must give equal
tables and equal errors; under ``KAFKALOG_PURE_PYTHON=1`` only the pure twin runs.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import threading

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog  # noqa: E402
import kafkalog.arrow as ka  # noqa: E402
from kafkalog import (  # noqa: E402
    CorruptRecordError,
    KafkaLogError,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordTooLargeError,
    _arrow_encode_py,
    _arrow_py,
)

from kl_support import CONFORMANCE_SKIP_REASON, PURE, conformance_dir  # noqa: E402

try:
    from kafkalog import _arrow as _arrow_c
    from kafkalog import _arrow_encode as _arrow_encode_c
except ImportError:  # pragma: no cover - pure-only installs
    _arrow_c = _arrow_encode_c = None

TWINS = ["python"] if PURE or _arrow_c is None else ["cython", "python"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(params=TWINS)
def twin(request, monkeypatch):
    """Run kafkalog.arrow on one twin of the columnar core."""
    mod = _arrow_c if request.param == "cython" else _arrow_py
    monkeypatch.setattr(ka, "_core", mod)
    encoder = _arrow_encode_c if request.param == "cython" else _arrow_encode_py
    monkeypatch.setattr(ka, "_encoder", encoder)
    return request.param


def both_twins(fn):
    """Call ``fn()`` once per twin; return the results (or the exceptions) by twin."""
    out = {}
    for name in TWINS:
        mod = _arrow_c if name == "cython" else _arrow_py
        saved = ka._core, ka._encoder
        ka._core = mod
        ka._encoder = _arrow_encode_c if name == "cython" else _arrow_encode_py
        try:
            out[name] = fn()
        except Exception as e:
            out[name] = e
        finally:
            ka._core, ka._encoder = saved
    return out


def assert_same(results):
    vals = list(results.values())
    first = vals[0]
    for other in vals[1:]:
        if isinstance(first, Exception):
            assert type(other) is type(first), results
            assert str(other) == str(first), results
        else:
            assert not isinstance(other, Exception), results
            assert other.equals(first), results
    return first


# -- the reference: the record API ---------------------------------------------------------------
def reference_rows(buf, *, check_crcs=True, include_control=False):
    rows = []
    for batch in MemoryRecords(buf, check_crcs=check_crcs).batches():
        if batch.is_control_batch and not include_control:
            if check_crcs:
                batch.ensure_valid()
            continue
        tt = int(batch.timestamp_type)
        for r in batch.records():
            rows.append(
                {
                    "key": r.key,
                    "value": r.value,
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "timestampType": tt,
                    "headers": [{"key": _java_str(k), "value": v} for k, v in r.headers] or None,
                }
            )
    return rows


def _java_str(k):
    # The record API keeps undecodable header-key bytes as surrogates; an Arrow string column
    # holds valid UTF-8, so kafkalog.arrow decodes as Java does (U+FFFD replacements).
    return k.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def reference_or_error(buf, **kw):
    try:
        return reference_rows(buf, **kw)
    except KafkaLogError as e:
        return e


def table_rows(t):
    return t.to_pylist()


def check_against_reference(buf, **kw):
    """to_arrow (both twins) == the record decoder, or both raise the same error class."""
    ref = reference_or_error(
        buf, **{k: v for k, v in kw.items() if k in ("check_crcs", "include_control")}
    )
    res = both_twins(lambda: ka.to_arrow(buf, timestamp_unit=None, **kw))
    got = assert_same(res)
    if isinstance(ref, Exception):
        assert isinstance(got, KafkaLogError), (ref, got)
        assert type(got) is type(ref) or isinstance(got, CorruptRecordError), (ref, got)
        return got
    assert not isinstance(got, Exception), got
    assert table_rows(got) == ref
    return got


# -- generated logs
# ----------------------------------------------------------------------------------
def build_log(
    magic,
    codec,
    *,
    headers=False,
    nulls=False,
    batches=3,
    per_batch=7,
    seed=1,
    log_append_time=False,
    gaps=False,
    producer=False,
):
    rnd = random.Random(seed)
    out = []
    off = 1000
    ts = 1_700_000_000_000
    for b in range(batches):
        lat = log_append_time and magic > 0 and b == 1
        kw = {}
        if magic == 2 and producer:
            kw = dict(producer_id=42, producer_epoch=3, base_sequence=b * per_batch)
        builder = MemoryRecordsBuilder(
            magic,
            codec,
            off,
            "log_append_time" if lat else "create_time",
            log_append_time=ts + 999 if lat else None,
            **kw,
        )
        for i in range(per_batch):
            key = None if nulls and i % 3 == 0 else f"key-{off}".encode()
            value = (
                None
                if nulls and i % 4 == 1
                else bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 300)))
            )
            hs = []
            if headers and magic == 2 and i % 2 == 0:
                hs = [
                    ("trace-id", b"%016x" % off),
                    ("empty", b""),
                    ("null", None),
                    ("ünï", b"\xff"),
                ]
            builder.append_with_offset(off, ts + rnd.randrange(-5, 50), key, value, hs)
            off += 3 if gaps else 1
            ts += 7
        out.append(builder.build())
    return b"".join(out)


def control_batch(offset, pid, abort=True, epoch=0):
    b = MemoryRecordsBuilder(
        2,
        "none",
        offset,
        producer_id=pid,
        producer_epoch=epoch,
        is_transactional=True,
        is_control_batch=True,
    )
    b.append(
        1_700_000_000_000,
        b"\x00\x00\x00" + (b"\x00" if abort else b"\x01"),
        b"\x00\x00\x00\x00\x00\x05",
    )
    return b.build()


def txn_batch(offset, pid, n=3, epoch=0):
    b = MemoryRecordsBuilder(
        2,
        "none",
        offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k%d" % (offset + i), b"v%d" % (offset + i))
    return b.build()


def plain_batch(offset, n=2, codec="none"):
    b = MemoryRecordsBuilder(2, codec, offset)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"p%d" % (offset + i), b"w%d" % (offset + i))
    return b.build()


def _codec_ok(codec):
    from kafkalog import compression

    return compression.available(int(kafkalog.CompressionType.parse(codec)))


GENERATED = [
    (magic, codec, headers, nulls)
    for magic in (0, 1, 2)
    for codec in CODECS
    for headers in ((False, True) if magic == 2 else (False,))
    for nulls in (False, True)
    if not (codec == "zstd" and magic < 2)
]


@pytest.mark.parametrize("magic,codec,headers,nulls", GENERATED, ids=lambda x: str(x))
def test_generated_logs_equal_record_decoder(magic, codec, headers, nulls):
    if not _codec_ok(codec):
        pytest.skip(f"{codec} library not installed")
    buf = build_log(
        magic, codec, headers=headers, nulls=nulls, log_append_time=True, gaps=magic == 2
    )
    t = check_against_reference(buf)
    assert t.num_rows == 21
    # and with the default timestamp type and the metadata columns
    t2 = assert_same(both_twins(lambda: ka.to_arrow(buf, batch_metadata=True)))
    assert t2.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert t2.column("compression").to_pylist() == [codec] * 21
    batches = list(MemoryRecords(buf).batches())
    expect_pos = []
    for b in batches:
        expect_pos += [b.position] * len(b.records())
    assert t2.column("position").to_pylist() == expect_pos


def test_mixed_magic_buffer():
    # v1 followed by v2 followed by v0 (aiokafka's Cython decoder fails on this; see RESULTS.md)
    buf = (
        build_log(1, "none", batches=1)
        + build_log(2, "lz4", batches=1, seed=2)
        + build_log(0, "gzip", batches=1, seed=3)
    )
    # offsets restart per build_log: rebase them so the buffer is a plausible log
    t = check_against_reference(buf)
    assert t.column("timestampType").to_pylist()[:7] == [0] * 7
    assert t.column("timestampType").to_pylist()[-7:] == [-1] * 7


def test_producer_fields_and_metadata(twin):
    buf = build_log(2, "none", producer=True, headers=True)
    t = ka.to_arrow(
        buf,
        [
            "offset",
            "producerId",
            "producerEpoch",
            "baseSequence",
            "isTransactional",
            "isControl",
            "leaderEpoch",
            "compression",
            "batchOffset",
            "position",
        ],
    )
    assert set(t.column("producerId").to_pylist()) == {42}
    assert set(t.column("producerEpoch").to_pylist()) == {3}
    assert t.column("baseSequence").to_pylist() == [0] * 7 + [7] * 7 + [14] * 7
    assert t.column("batchOffset").to_pylist() == [1000] * 7 + [1007] * 7 + [1014] * 7
    assert not any(t.column("isTransactional").to_pylist())
    assert t.column("leaderEpoch").to_pylist() == [0] * 21
    assert t.schema.field("producerEpoch").type == pa.int16()


# -- conformance corpus
# --------------------------------------------------------------------------------
_DIR = conformance_dir()
VECTORS = []
if _DIR is not None:
    with open(_DIR / "vectors.jsonl", encoding="utf-8") as f:
        VECTORS = [json.loads(line) for line in f if line.strip()]
_LOG_KINDS = ("v2_batch", "records_blob", "message_set", "segment_log")


def _vector_ids():
    out = []
    for v in VECTORS:
        if v["kind"] in _LOG_KINDS or (
            v["kind"] in ("v0_message", "v1_message") and v["expect"].get("framing") == "log_entry"
        ):
            out.append(pytest.param(v, id=v["id"]))
    return out or [pytest.param(None, id="corpus-absent")]


@pytest.mark.skipif(_DIR is None, reason=CONFORMANCE_SKIP_REASON)
@pytest.mark.parametrize("vector", _vector_ids())
@pytest.mark.parametrize("check_crcs", [True, False])
def test_conformance_vectors_equal_record_decoder(vector, check_crcs):
    buf = bytes.fromhex(vector["hex"])
    t = check_against_reference(buf, check_crcs=check_crcs)
    if not isinstance(t, Exception) and not vector.get("malformed"):
        exp = vector["expect"].get("records")
        if exp is not None and all(not r.get("control") for r in exp):
            assert t.column("offset").to_pylist() == [r["offset"] for r in exp]
    # control records kept on request
    check_against_reference(buf, check_crcs=check_crcs, include_control=True)


@pytest.mark.skipif(_DIR is None, reason=CONFORMANCE_SKIP_REASON)
def test_conformance_segment_files_and_dirs():
    files = _DIR / "files"
    seen = 0
    for root, _dirs, names in os.walk(files):
        for name in names:
            if not name.endswith(".log"):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            ref = reference_or_error(data)
            got = assert_same(both_twins(lambda: ka.to_arrow(path, timestamp_unit=None)))
            if isinstance(ref, Exception):
                assert isinstance(got, KafkaLogError)
                assert got.path == path
            else:
                assert table_rows(got) == ref
                seen += 1
    assert seen >= 10
    # a whole partition directory, with topic and partition columns
    d = files / "LDI-POC@8030792" / "__consumer_offsets-6"
    t = ka.to_arrow(d, ["topic", "partition", "offset", "key"])
    assert set(t.column("topic").to_pylist()) == {"__consumer_offsets"}
    assert set(t.column("partition").to_pylist()) == {6}


# -- projection, chunking, options -----------------------------------------------------------------
def test_projection_equals_selection(twin):
    buf = build_log(2, "snappy", headers=True, nulls=True) + build_log(
        1, "none", nulls=True, seed=5
    )
    full = ka.to_arrow(buf, ka.ALL_COLUMNS[:2] + ka.ALL_COLUMNS[4:])
    for cols in (
        ["offset"],
        ["value"],
        ["headers", "key"],
        ["timestampType", "position", "compression"],
        ["isControl", "isTransactional", "producerEpoch"],
    ):
        assert ka.to_arrow(buf, cols).equals(full.select(cols))
    assert ka.to_arrow(buf, []).num_columns == 0


def test_schema_matches_and_spark_types():
    s = ka.schema(timestamp_unit="us")
    assert s.names == ["key", "value", "offset", "timestamp", "timestampType", "headers"]
    assert s.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert s.field("headers").type.value_type == pa.struct(
        [("key", pa.string()), ("value", pa.binary())]
    )
    assert all(f.nullable for f in s)
    t = ka.to_arrow(b"")
    assert t.schema.equals(ka.schema()) and t.num_rows == 0
    with pytest.raises(ValueError):
        ka.schema(["nope"])
    with pytest.raises(ValueError):
        ka.schema(timestamp_unit="s")


def test_schema_equals_spark_kafka_schema():
    """The Spark source yields these batches: they must equal Spark's own Arrow schema for
    spark-sql-kafka's columns (SPARK-55583 checks it on 4.2+)."""
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    spark = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    want = to_arrow_schema(spark, timezone="UTC")
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
             "headers"]
    assert ka.schema(names, timestamp_unit="us").equals(want)
    rb = next(ka.iter_batches(build_log(2, "none", headers=True), names, timestamp_unit="us",
                              topic="t", partition=0))
    assert rb.schema.equals(want)


def test_timestamp_units(twin):
    buf = build_log(2, "none", log_append_time=True)
    ms = ka.to_arrow(buf, ["timestamp"], timestamp_unit=None).column(0).to_pylist()
    us = ka.to_arrow(buf, ["timestamp"], timestamp_unit="us").column(0).cast(pa.int64()).to_pylist()
    assert us == [x * 1000 for x in ms]
    v0 = ka.to_arrow(build_log(0, "none"), ["timestamp", "timestampType"], timestamp_unit="us")
    assert v0.column(0).cast(pa.int64()).to_pylist() == [-1000] * 21
    assert v0.column(1).to_pylist() == [-1] * 21


@pytest.mark.parametrize(
    "max_rows,max_bytes", [(1, None), (5, None), (None, 100), (4, 2000), (65536, 1)]
)
def test_iter_batches_bounded_and_complete(twin, max_rows, max_bytes):
    buf = build_log(2, "none", headers=True, batches=6) + build_log(1, "gzip", seed=9, batches=2)
    full = ka.to_arrow(buf)
    parts = list(ka.iter_batches(buf, max_rows=max_rows, max_bytes=max_bytes))
    assert pa.Table.from_batches(parts, schema=full.schema).equals(full)
    if max_rows is not None:
        assert all(p.num_rows <= max_rows for p in parts)
    assert all(p.num_rows > 0 for p in parts)


def test_start_and_stop_positions(twin):
    parts = [build_log(2, "none", batches=1, seed=s) for s in range(4)]
    buf = b"".join(parts)
    bounds = [0]
    for p in parts:
        bounds.append(bounds[-1] + len(p))
    t = ka.to_arrow(buf, ["offset"], start_position=bounds[1], stop_position=bounds[3])
    assert t.num_rows == 14
    # an entry that starts before stop is decoded whole
    t = ka.to_arrow(buf, ["offset"], start_position=bounds[1], stop_position=bounds[1] + 1)
    assert t.num_rows == 7


def test_memory_records_mmap_and_list_sources(twin, tmp_path):
    buf = build_log(2, "lz4", headers=True)
    ref = ka.to_arrow(buf)
    assert ka.to_arrow(MemoryRecords(buf)).equals(ref)
    assert ka.to_arrow(bytearray(buf)).equals(ref)
    assert ka.to_arrow(memoryview(buf)).equals(ref)
    p = tmp_path / "00000000000000001000.log"
    p.write_bytes(buf + buf[:30])  # partial tail: ignored
    assert ka.to_arrow(str(p)).equals(ref)
    assert ka.to_arrow([buf, p]).num_rows == 2 * ref.num_rows
    import mmap

    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert ka.to_arrow(mm).equals(ref)


def test_partition_directory(twin, tmp_path):
    d = tmp_path / "orders-3"
    d.mkdir()
    a = build_log(2, "none", batches=2, seed=1)
    # second segment continues the offsets
    b = MemoryRecordsBuilder(2, "zstd", 2000)
    for i in range(5):
        b.append(1_700_000_000_000 + i, b"k", b"v%d" % i)
    (d / "00000000000000001000.log").write_bytes(a)
    (d / "00000000000000002000.log").write_bytes(b.build())
    (d / "00000000000000000000.log.deleted").write_bytes(b"junk")
    (d / "00000000000000002000.index").write_bytes(b"")
    t = ka.to_arrow(d, ["topic", "partition", "offset"])
    assert t.column("offset").to_pylist() == list(range(1000, 1014)) + list(range(2000, 2005))
    assert set(t.column("topic").to_pylist()) == {"orders"}
    assert set(t.column("partition").to_pylist()) == {3}
    t = ka.to_arrow(d, ["topic", "partition"], topic="x", partition=9)
    assert set(t.column("topic").to_pylist()) == {"x"} and set(
        t.column("partition").to_pylist()
    ) == {9}
    with pytest.raises(ValueError):
        ka.to_arrow(a, ["topic"])


def _log_root(tmp_path):
    """A broker's log dir: orders-0 (two segments), orders-1, audit-0, plus what a root also
    holds (checkpoints, meta.properties, a -delete directory) that must not be read.  Its own
    name has the <topic>-<partition> form, as log dirs often do."""
    root = tmp_path / "kafka-logs-1"
    for name, segs in (("orders-1", {0: plain_batch(0, 3)}),
                       ("orders-0", {0: plain_batch(0, 2), 2: plain_batch(2, 2)}),
                       ("audit-0", {5: plain_batch(5, 1)}),
                       ("orders-2.0123456789abcdef0123456789abcdef-delete", {0: plain_batch(0)})):
        d = root / name
        d.mkdir(parents=True)
        for base, data in segs.items():
            (d / ("%020d.log" % base)).write_bytes(data)
    (root / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    (root / "meta.properties").write_text("version=0\n")
    return root


def test_log_root_reads_every_partition(twin, tmp_path):
    root = _log_root(tmp_path)
    cols = ["topic", "partition", "offset", "value"]
    t = ka.to_arrow(root, cols)
    rows = list(zip(*(t.column(c).to_pylist() for c in cols[:3])))
    assert rows == [("audit", 0, 5), ("orders", 0, 0), ("orders", 0, 1), ("orders", 0, 2),
                    ("orders", 0, 3), ("orders", 1, 0), ("orders", 1, 1), ("orders", 1, 2)]
    # the same rows as its partition directories read one by one
    parts = [ka.to_arrow(root / n, cols) for n in ("audit-0", "orders-0", "orders-1")]
    assert t.equals(pa.concat_tables(parts))
    assert pa.Table.from_batches(list(ka.iter_batches(str(root), cols, max_rows=2))).equals(t)
    # offset pruning keeps each partition's own segment boundaries
    t = ka.to_arrow(root, ["topic", "partition", "offset"], start_offset=2, end_offset=3)
    assert list(zip(*(c.to_pylist() for c in t.columns))) == [("orders", 0, 2), ("orders", 1, 2)]
    t = ka.to_arrow(root, ["topic", "partition", "offset"], start_offset=1)
    assert t.num_rows == 6 and ("orders", 1, 0) not in zip(*(c.to_pylist() for c in t.columns))


def test_directory_without_a_log_is_refused(twin, tmp_path):
    other = tmp_path / "not-a-root"
    (other / "docs").mkdir(parents=True)
    (other / "notes.txt").write_text("x")
    with pytest.raises(KafkaLogError, match="pass a segment file, a partition directory or a "
                                            "log root"):
        ka.to_arrow(other)
    with pytest.raises(KafkaLogError, match="no Kafka log segments"):
        list(ka.iter_batches(str(other)))
    empty = tmp_path / "orders-7"  # an empty directory is refused too, whatever its name
    empty.mkdir()
    with pytest.raises(KafkaLogError, match=f"no Kafka log under {empty}"):
        ka.to_arrow(empty)


def test_control_batches_skipped_or_kept(twin):
    buf = txn_batch(0, 7) + control_batch(3, 7, abort=False) + plain_batch(4)
    t = ka.to_arrow(buf, ["offset", "isControl"])
    assert t.column("offset").to_pylist() == [0, 1, 2, 4, 5]
    t = ka.to_arrow(buf, ["offset", "isControl", "key"], include_control=True)
    assert t.column("offset").to_pylist() == [0, 1, 2, 3, 4, 5]
    assert t.column("isControl").to_pylist() == [False] * 3 + [True] + [False] * 2
    assert t.column("key").to_pylist()[3] == b"\x00\x00\x00\x01"


def test_read_committed(twin, tmp_path):
    buf = (
        txn_batch(0, 1)
        + txn_batch(3, 2)
        + plain_batch(6)
        + control_batch(8, 1, abort=True)
        + txn_batch(9, 1)
        + control_batch(12, 2, abort=False)
        + control_batch(13, 1, abort=False)
        + txn_batch(14, 3)  # still open at the end: kept
    )
    everything = ka.to_arrow(buf, ["offset"]).column(0).to_pylist()
    assert everything == [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 14, 15, 16]
    committed = ka.to_arrow(buf, ["offset"], read_committed=True).column(0).to_pylist()
    assert committed == [3, 4, 5, 6, 7, 9, 10, 11, 14, 15, 16]
    # explicit aborted transactions, e.g. from a fetch response
    t = ka.to_arrow(buf, ["offset"], read_committed=True, aborted_transactions=[(2, 3, 12)])
    assert t.column(0).to_pylist() == [0, 1, 2, 6, 7, 9, 10, 11, 14, 15, 16]
    # the transaction index of a partition directory (the marker lives in another segment)
    from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex

    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(txn_batch(0, 5) + plain_batch(3))
    # the ABORT marker ends the transaction in the data too: without it the transaction would
    # still be open and the last stable offset 0 (as for Kafka)
    (d / "00000000000000000005.log").write_bytes(plain_batch(5) + control_batch(7, 5, abort=True))
    idx = TransactionIndex(5, str(d / "00000000000000000005.txnindex"))
    idx.append(AbortedTxn(5, 0, 7, 0))
    idx.close()
    assert ka.to_arrow(d, ["offset"]).column(0).to_pylist() == [0, 1, 2, 3, 4, 5, 6]
    assert ka.to_arrow(d, ["offset"], read_committed=True).column(0).to_pylist() == [3, 4, 5, 6]
    seg0 = str(d / "00000000000000000000.log")
    assert ka.to_arrow(seg0, ["offset"], read_committed=True).column(0).to_pylist() == [3, 4]


def test_invalid_utf8_header_key_is_replaced(twin):
    from kafkalog._batch_py import encode_record_body

    rec = encode_record_body(0, 0, b"k", b"v", [(b"bad\xff\xfekey", b"x")])
    b = MemoryRecordsBuilder(2, "none", 0)
    b.append(1, b"k", b"v")
    good = bytearray(b.build())
    # splice: rebuild the batch around the crafted record
    hdr = good[:61]
    batch = hdr + rec
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    from kafkalog._crc_py import crc32c

    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    t = ka.to_arrow(bytes(batch), ["headers"])
    assert t.column(0).to_pylist() == [[{"key": "bad\ufffd\ufffdkey", "value": b"x"}]]


# -- malformed input
# ----------------------------------------------------------------------------------
def _mutations(buf, seed, n):
    rnd = random.Random(seed)
    for _ in range(n):
        b = bytearray(buf)
        kind = rnd.randrange(4)
        if kind == 0:
            yield bytes(b[: rnd.randrange(len(b))])
        elif kind == 1:
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
            yield bytes(b)
        elif kind == 2:
            i = rnd.randrange(len(b))
            b[i] = rnd.choice([0x00, 0x7F, 0x80, 0xFF])
            yield bytes(b)
        else:
            i = rnd.randrange(len(b))
            yield bytes(b[:i] + bytes([rnd.randrange(256)]) + b[i:])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("check_crcs", [True, False])
def test_malformed_inputs_raise_kafkalog_errors_like_the_record_decoder(codec, check_crcs):
    if not _codec_ok(codec):
        pytest.skip(f"{codec} library not installed")
    buf = build_log(2, codec, headers=True, nulls=True, batches=2, per_batch=4)
    if codec == "none":
        buf += build_log(1, "none", batches=1, per_batch=2, seed=4)
    for i, bad in enumerate(_mutations(buf, seed=hash(codec) % 1000 + check_crcs, n=150)):
        ref = reference_or_error(bad, check_crcs=check_crcs)
        got = assert_same(
            both_twins(lambda: ka.to_arrow(bad, timestamp_unit=None, check_crcs=check_crcs))
        )
        if isinstance(ref, Exception):
            assert isinstance(got, KafkaLogError), (i, ref, got)
        else:
            assert not isinstance(got, Exception), (i, got)
            assert table_rows(got) == ref, i


def _legacy_entry(offset, magic, attrs, ts, key, value):
    import zlib

    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", ts) if magic else b"")
    body += struct.pack(">i", -1 if key is None else len(key)) + (key or b"")
    body += struct.pack(">i", -1 if value is None else len(value)) + (value or b"")
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def _wrapper(woff, wmagic, wattrs, inner, codec=1):
    from kafkalog import compression

    value = compression.compress(codec, inner, magic=wmagic)
    return _legacy_entry(woff, wmagic, wattrs | codec, 1_700_000_009_999, None, value)


def _inner_set(magic, n, start=0, attrs=0):
    return b"".join(
        _legacy_entry(start + i, magic, attrs, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i)
        for i in range(n)
    )


@pytest.mark.parametrize(
    "name,data",
    [
        ("v1 relative offsets", lambda: _wrapper(41, 1, 0, _inner_set(1, 3))),
        ("v1 wrapper offset 0", lambda: _wrapper(0, 1, 0, _inner_set(1, 3))),
        ("v1 LogAppendTime", lambda: _wrapper(9, 1, 8, _inner_set(1, 3))),
        ("v0 absolute offsets", lambda: _wrapper(12, 0, 0, _inner_set(0, 3, start=10))),
        ("v0 inner in v1 wrapper", lambda: _wrapper(5, 1, 8, _inner_set(0, 2))),
        ("v1 inner in v0 wrapper", lambda: _wrapper(5, 0, 0, _inner_set(1, 2))),
        ("wrapper offset below last inner", lambda: _wrapper(1, 1, 0, _inner_set(1, 3))),
        ("nested compression", lambda: _wrapper(3, 1, 0, _inner_set(1, 2, attrs=1))),
        ("empty inner set", lambda: _wrapper(3, 1, 0, b"")),
        ("partial trailing inner entry", lambda: _wrapper(3, 1, 0, _inner_set(1, 3)[:-5])),
        ("null wrapper value", lambda: _legacy_entry(3, 1, 1, 0, None, None)),
        ("snappy wrapper", lambda: _wrapper(7, 1, 0, _inner_set(1, 4), codec=2)),
    ],
)
def test_legacy_wrappers_equal_record_decoder(name, data):
    if "snappy" in name and not _codec_ok("snappy"):
        pytest.skip("snappy library not installed")
    buf = data()
    check_against_reference(buf)
    check_against_reference(buf + plain_batch(1000))


def test_legacy_inner_sets_mutated():
    from kafkalog import compression

    rnd = random.Random(5)
    for i in range(300):
        wmagic = rnd.choice([0, 1])
        inner = _inner_set(rnd.choice([wmagic, 1 - wmagic]), rnd.randrange(0, 4))
        if inner:
            inner = next(_mutations(inner, seed=i, n=1))
        buf = _legacy_entry(
            rnd.choice([0, 1, 3, 100, 2**63 - 2]), wmagic, 1 | rnd.choice([0, 8]), 5, None,
            compression.compress(1, inner, magic=wmagic),
        )
        check_against_reference(buf, check_crcs=rnd.choice([True, False]))


def _entry_bounds(buf):
    """The start position of each entry (the 12-byte framing: offset, size)."""
    out, pos = [], 0
    while pos + 12 <= len(buf):
        out.append(pos)
        pos += 12 + struct.unpack_from(">i", buf, pos + 8)[0]
    return out


def _legacy_run_log(rnd):
    """A buffer of long runs of plain v0/v1 messages (null keys and values, empty and large
    ones, both timestamp types), between v2 batches and compressed v0/v1 wrappers: the runs
    cross the columnar decoder's row blocks (LEGACY_BLOCK, 256 rows) at every phase."""
    parts, off = [], 0
    for _ in range(rnd.randrange(1, 5)):
        kind = rnd.choice(["run", "run", "v2", "wrapper"])
        if kind == "run":
            magic = rnd.choice([0, 1])
            attrs = rnd.choice([0, 8]) if magic else 0
            for _ in range(rnd.choice([1, 2, 255, 256, 257, 300, 513, 700])):
                key = None if rnd.random() < 0.1 else b"k%d" % off
                size = rnd.choice([0, 1, 9, 100, 3000])
                value = (None if rnd.random() < 0.1
                         else bytes(rnd.getrandbits(8) for _ in range(size)))
                ts = 1_700_000_000_000 + off
                parts.append(_legacy_entry(off, magic, attrs, ts, key, value))
                off += 1
        elif kind == "v2":
            parts.append(plain_batch(off, n=3))
            off += 3
        else:
            wmagic = rnd.choice([0, 1])
            parts.append(_wrapper(off + 2, wmagic, 0,
                                  _inner_set(wmagic, 3, start=0 if wmagic else off)))
            off += 3
    return b"".join(parts)


@pytest.mark.parametrize("seed", range(12))
def test_plain_legacy_runs_generated(seed):
    """Runs of uncompressed v0/v1 messages, which the compiled decoder appends a block of rows
    at a time: equal to the record decoder and to the pure twin, whole, bounded by rows and
    bytes, between random start and stop positions, and damaged anywhere."""
    rnd = random.Random(seed)
    buf = _legacy_run_log(rnd)
    full = check_against_reference(buf)
    check_against_reference(buf, check_crcs=False)
    meta = assert_same(both_twins(lambda: ka.to_arrow(buf, batch_metadata=True)))
    assert meta.num_rows == full.num_rows
    for _ in range(3):
        max_rows = rnd.choice([None, 1, 7, 255, 256, 257, 1000])
        max_bytes = rnd.choice([None, 1, 500, 20_000, 300_000])

        def parts(max_rows=max_rows, max_bytes=max_bytes):
            return list(ka.iter_batches(buf, timestamp_unit=None, max_rows=max_rows,
                                        max_bytes=max_bytes))

        res = both_twins(parts)
        for got in res.values():
            assert not isinstance(got, Exception), got
            assert pa.Table.from_batches(got, schema=full.schema).equals(full)
            if max_rows is not None:
                assert all(p.num_rows <= max_rows for p in got)
        assert [p.num_rows for p in res[TWINS[0]]] == [p.num_rows for p in res[TWINS[-1]]]
    bounds = _entry_bounds(buf)
    for _ in range(4):
        i = rnd.randrange(len(bounds))
        j = rnd.randrange(i, len(bounds) + 1)
        start = bounds[i]
        stop = bounds[j] if j < len(bounds) else len(buf)
        t = assert_same(both_twins(lambda: ka.to_arrow(buf, timestamp_unit=None,
                                                       start_position=start,
                                                       stop_position=stop)))
        assert table_rows(t) == reference_rows(buf[start:stop])
    for k, bad in enumerate(_mutations(buf, seed=seed, n=6)):
        check_against_reference(bad, check_crcs=bool(k % 2))


@pytest.mark.parametrize("null_tail", [False, True])
def test_plain_legacy_run_denser_than_its_start(null_tail):
    """The compiled decoder sizes a chunk from its first 1024 v0/v1 messages and extrapolates
    the rest: a log whose later messages are far smaller (or null) than its first ones needs
    the buffers to grow mid-run, and must still equal the record decoder, whole and bounded."""
    big = [_legacy_entry(i, 1, 0, 1_700_000_000_000 + i, b"k%d" % i, b"v" * 2000)
           for i in range(1100)]
    small = [_legacy_entry(1100 + i, i % 2, 0, 5, None if null_tail else b"",
                           None if null_tail else b"") for i in range(5000)]
    buf = b"".join(big + small)
    full = check_against_reference(buf)
    assert full.num_rows == 6100
    for max_rows, max_bytes in [(None, 1_000_000), (3000, None), (None, 2_300_000)]:
        res = both_twins(lambda: list(ka.iter_batches(buf, timestamp_unit=None,
                                                      max_rows=max_rows, max_bytes=max_bytes)))
        for got in res.values():
            assert not isinstance(got, Exception), got
            assert pa.Table.from_batches(got, schema=full.schema).equals(full)


@pytest.mark.parametrize("limits", [{"max_bytes": 2**62}, {"max_bytes": 2**63 - 1},
                                    {"max_rows": 2**63 - 1}, {"max_rows": 2**63 - 1,
                                                              "max_bytes": 2**63 - 1}])
def test_plain_legacy_runs_with_huge_limits(limits):
    """Limits near the int64 range (any positive int is a valid limit) on a log of more v0/v1
    messages than the compiled decoder walks before it extrapolates a chunk's size: one chunk
    of every row, in both twins, with the metadata columns (whose bitmaps take the row count)
    and the null headers column."""
    buf = b"".join(_legacy_entry(i, 1, 0, 1_700_000_000_000 + i, b"k", b"v" * 10)
                   for i in range(3000))
    full = check_against_reference(buf)
    res = both_twins(lambda: list(ka.iter_batches(buf, timestamp_unit=None, **limits)))
    for got in res.values():
        assert not isinstance(got, Exception), got
        assert [p.num_rows for p in got] == [3000]
        assert pa.Table.from_batches(got, schema=full.schema).equals(full)
    meta = both_twins(lambda: list(ka.iter_batches(buf, batch_metadata=True, **limits)))
    assert_same({k: pa.Table.from_batches(v) if isinstance(v, list) else v
                 for k, v in meta.items()})


@pytest.mark.parametrize("tail", [b"", b"\x00" * 40])
def test_short_v2_entry_errors_like_record_batch(tail):
    # a complete 28-byte entry that says magic 2: RecordBatch wants 61 header bytes first
    short = struct.pack(">qi", 4, 16) + b"\x00" * 4 + b"\x02" + b"\x00" * 11
    err = check_against_reference(plain_batch(0) + short + tail)
    assert isinstance(err, CorruptRecordError)


def test_error_carries_position_offset_and_path(twin, tmp_path):
    good = plain_batch(0)
    bad = bytearray(plain_batch(2))
    bad[17] ^= 0xFF  # the stored CRC
    buf = good + bytes(bad)
    with pytest.raises(CorruptRecordError) as ei:
        ka.to_arrow(buf)
    assert ei.value.position == len(good)
    assert ei.value.offset == 2
    assert "crc" in str(ei.value)
    assert ka.to_arrow(buf, check_crcs=False).num_rows == 4
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(buf)
    with pytest.raises(CorruptRecordError) as ei:
        ka.to_arrow(p)
    assert ei.value.path == str(p)
    with pytest.raises(RecordTooLargeError):
        ka.to_arrow(buf, max_batch_size=20)


def test_decompression_bounds(twin):
    from kafkalog import DecompressedSizeError

    for codec in ("gzip", "snappy", "lz4", "zstd"):
        if not _codec_ok(codec):
            continue
        b = MemoryRecordsBuilder(2, codec, 0)
        b.append(1, b"k", b"x" * 100_000)
        with pytest.raises(DecompressedSizeError):
            ka.to_arrow(b.build(), max_decompressed_size=50_000)
        assert ka.to_arrow(b.build(), max_decompressed_size=200_000).num_rows == 1


# -- encoding
# -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec):
    if not _codec_ok(codec):
        pytest.skip(f"{codec} library not installed")
    src = build_log(
        2,
        "gzip" if _codec_ok("gzip") else "none",
        headers=True,
        nulls=True,
        log_append_time=True,
        gaps=True,
    ) + build_log(1, "none", nulls=True, seed=3, batches=1)
    # the v1 part restarts at offset 1000: move it after the v2 part
    t = ka.to_arrow(src, timestamp_unit=None)
    offs = t.column("offset").to_pylist()
    offs = offs[:21] + [o + 1000 for o in offs[21:]]
    t = t.set_column(t.schema.get_field_index("offset"), "offset", pa.array(offs, pa.int64()))
    data = assert_same(
        both_twins(lambda: _Bytes(ka.from_arrow(t, compression=codec, batch_bytes=700)))
    )
    back = ka.to_arrow(data.b, timestamp_unit=None)
    assert table_rows(back) == [
        dict(r, timestampType=max(r["timestampType"], 0)) for r in table_rows(t)
    ]
    assert reference_rows(data.b) == table_rows(back)
    for b in MemoryRecords(data.b).batches():
        assert b.compression_type.kafka_name == codec
        assert b.size_in_bytes <= 700 or b.records_count == 1 or codec != "none"


class _Bytes:
    """bytes with .equals (for assert_same)."""

    def __init__(self, b):
        self.b = b

    def equals(self, other):
        return self.b == other.b


def test_from_arrow_matches_memory_records_builder():
    t = ka.to_arrow(
        build_log(2, "none", headers=True, nulls=True, batches=1, per_batch=9), timestamp_unit=None
    )
    for codec in CODECS:
        if not _codec_ok(codec):
            continue
        b = MemoryRecordsBuilder(
            2,
            codec,
            1000,
            producer_id=9,
            producer_epoch=1,
            base_sequence=5,
            is_transactional=True,
            partition_leader_epoch=4,
        )
        for r in table_rows(t):
            b.append_with_offset(
                r["offset"],
                r["timestamp"],
                r["key"],
                r["value"],
                [(h["key"], h["value"]) for h in r["headers"] or []],
            )
        want = b.build()
        got = both_twins(
            lambda: _Bytes(
                ka.from_arrow(
                    t,
                    compression=codec,
                    producer_id=9,
                    producer_epoch=1,
                    base_sequence=5,
                    is_transactional=True,
                    partition_leader_epoch=4,
                )
            )
        )
        for name, g in got.items():
            if codec in ("none", "snappy", "lz4", "gzip"):  # deterministic codecs
                assert g.b == want, (name, codec)
            else:
                assert reference_rows(g.b) == reference_rows(want)


def test_from_arrow_batching_and_sequences():
    n = 1000
    t = pa.table(
        {
            "value": pa.array([b"x" * (i % 50) for i in range(n)]),
            "timestamp": pa.array(range(n), pa.int64()),
        }
    )
    data = assert_same(
        both_twins(
            lambda: _Bytes(
                ka.from_arrow(t, batch_records=64, base_offset=5, base_sequence=2**31 - 100)
            )
        )
    )
    batches = list(MemoryRecords(data.b).batches())
    assert [b.records_count for b in batches] == [64] * 15 + [40]
    assert batches[0].base_offset == 5 and batches[-1].last_offset == 5 + n - 1
    assert batches[1].base_sequence == 2**31 - 100 + 64
    assert batches[2].base_sequence == 28  # wrapped past Int.MAX like Kafka's incrementSequence
    back = ka.to_arrow(
        data.b, ["offset", "key", "value", "timestamp", "headers"], timestamp_unit=None
    )
    assert back.column("value").to_pylist() == t.column("value").to_pylist()
    assert back.column("key").null_count == n
    assert back.column("headers").null_count == n
    data2 = ka.from_arrow(t, batch_bytes=1000)
    assert all(b.size_in_bytes <= 1000 for b in MemoryRecords(data2).batches())


def test_from_arrow_input_types_and_errors():
    t = pa.table(
        {
            "key": pa.array(["a", None, "c"], pa.large_string()),
            "value": pa.array([b"1", b"2", None], pa.large_binary()),
            "timestamp": pa.array([1_000_000, 2_000_000, None], pa.timestamp("us", tz="UTC")),
            "headers": pa.array(
                [[("h", "v")], None, []],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
            ),
            "offset": pa.array([10, 11, 20], pa.int32()),
            "extra": pa.array([1, 2, 3]),
        }
    )
    data = assert_same(both_twins(lambda: _Bytes(ka.from_arrow(t.slice(0, 3)))))
    back = ka.to_arrow(data.b, timestamp_unit=None)
    assert back.column("key").to_pylist() == [b"a", None, b"c"]
    assert back.column("timestamp").to_pylist() == [1000, 2000, -1]
    assert back.column("headers").to_pylist() == [[{"key": "h", "value": b"v"}], None, None]
    assert back.column("offset").to_pylist() == [10, 11, 20]
    # sliced input (non-zero array offsets)
    sl = assert_same(
        both_twins(
            lambda: _Bytes(
                ka.from_arrow(
                    pa.concat_tables(
                        [t, t.set_column(4, "offset", pa.array([30, 31, 32], pa.int32()))]
                    ).slice(1, 4)
                )
            )
        )
    )
    assert ka.to_arrow(sl.b, ["offset"]).column(0).to_pylist() == [11, 20, 30, 31]
    bad_order = pa.table({"value": [b"a", b"b"], "offset": [5, 5]})
    res = both_twins(lambda: ka.from_arrow(bad_order))
    assert all(isinstance(e, kafkalog.InvalidOffsetError) for e in res.values()), res
    assert len({str(e) for e in res.values()}) == 1
    bad_ts = pa.table({"value": [b"a"], "timestamp": pa.array([-5], pa.int64())})
    assert all(
        isinstance(e, ValueError) for e in both_twins(lambda: ka.from_arrow(bad_ts)).values()
    )
    null_key = pa.table(
        {
            "headers": pa.array(
                [[(None, b"v")]],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            )
        }
    )
    assert all(
        isinstance(e, ValueError) for e in both_twins(lambda: ka.from_arrow(null_key)).values()
    )
    assert ka.from_arrow(pa.table({"value": pa.array([], pa.binary())})) == b""


def test_write_arrow_to_a_log_and_read_it_back(twin, tmp_path):
    from kafkalog.storage.log import Log

    d = tmp_path / "restore-0"
    src = ka.to_arrow(build_log(2, "none", headers=True, nulls=True, gaps=True, batches=4))
    with Log.open(d, {"segment.bytes": 4096}) as log:
        # keep the offsets of the table (a restore)
        assert ka.write_arrow(log, src, batch_bytes=1000, compression="lz4") == src.num_rows
        assert log.log_end_offset == src.column("offset").to_pylist()[-1] + 1
        assert len(log.segments) > 1  # rolled at segment.bytes
        # new records at the log end
        more = pa.table({"value": [b"a", b"b", None], "key": [b"k", None, b"k"]})
        end = log.log_end_offset
        assert ka.write_arrow(log, more) == 3
        t = ka.to_arrow(log)  # through the Log object (sees unflushed appends)
        assert t.num_rows == src.num_rows + 3
        assert (
            t.slice(0, src.num_rows)
            .select(["offset", "key", "value", "headers"])
            .equals(src.select(["offset", "key", "value", "headers"]))
        )
        assert t.column("offset").to_pylist()[-3:] == [end, end + 1, end + 2]
        assert t.column("value").to_pylist()[-3:] == [b"a", b"b", None]
        parts = list(ka.iter_batches(log, max_rows=10))
        assert pa.Table.from_batches(parts).equals(t)
        with pytest.raises(kafkalog.InvalidOffsetError):
            ka.write_arrow(log, src)  # offsets below the log end
    # and through the directory, once closed
    t2 = ka.to_arrow(d, ["topic", "partition", "offset", "value"])
    assert t2.column("offset").equals(t.column("offset"))
    assert set(t2.column("topic").to_pylist()) == {"restore"}


# -- threads, import hygiene, interop
# ------------------------------------------------------------------
def test_two_threads_decode_in_parallel(twin):
    bufs = [
        build_log(2, c, headers=True, batches=20, seed=i) for i, c in enumerate(["none", "snappy"])
    ]
    want = [ka.to_arrow(b) for b in bufs]
    got = [None, None]

    def run(i):
        for _ in range(3):
            got[i] = ka.to_arrow(bufs[i])

    ts = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got[0].equals(want[0]) and got[1].equals(want[1])


def test_import_kafkalog_arrow_loads_pyarrow_only_on_request():
    code = (
        "import sys, kafkalog; a = 'pyarrow' in sys.modules; import kafkalog.arrow; "
        "print(a, 'pyarrow' in sys.modules, kafkalog.arrow.IMPLEMENTATION)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[:2] == ["False", "True"]
    assert out[2] == ("python" if PURE else ("cython" if _arrow_c is not None else "python"))


def test_zero_copy_buffers(twin):
    t = ka.to_arrow(build_log(2, "none"), ["value"])
    a = t.column(0).chunk(0)
    # the data buffer is the one the decoder filled: no copy was made to build the array
    assert a.buffers()[2].address == pa.py_buffer(a.buffers()[2]).address


def test_polars_zero_copy():
    pl = pytest.importorskip("polars")
    t = ka.to_arrow(build_log(2, "none", headers=True, nulls=True))
    df = pl.from_arrow(t)
    assert df.height == t.num_rows
    assert df["offset"].to_list() == t.column("offset").to_pylist()
    assert df["value"].to_list() == t.column("value").to_pylist()


def test_duckdb_scan():
    duckdb = pytest.importorskip("duckdb")
    tbl = ka.to_arrow(build_log(2, "zstd" if _codec_ok("zstd") else "none", nulls=True))
    n, total = duckdb.sql('select count(*), sum(octet_length("value")) from tbl').fetchall()[0]
    assert n == tbl.num_rows
    assert total == sum(len(v) for v in tbl.column("value").to_pylist() if v is not None)


def test_pooled_header_buffers_are_reused_safely():
    """Freed column buffers (the header entries' too) go back to a pool and serve the next
    call: tables alive while others are decoded and dropped keep their own data, and every
    decode equals the record decoder."""
    import gc

    logs = [build_log(2, "none", headers=True, batches=40, per_batch=600, seed=s) for s in (3, 4)]
    want = [reference_rows(b) for b in logs]
    cols = ["offset", "key", "value", "headers"]
    keep = []
    for i in range(6):
        j = i % 2
        t = ka.to_arrow(logs[j], cols)
        assert t.to_pylist() == [{c: r[c] for c in cols} for r in want[j]]
        keep.append(t)
        if i % 3 == 2:
            keep.pop(0)
            gc.collect()
    expect = [[{c: r[c] for c in cols} for r in w] for w in want]
    assert expect[0] != expect[1]
    for t in keep:  # the survivors were not overwritten by later decodes
        assert t.to_pylist() in expect


def test_unknown_compression_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"^unknown compression type 'zst': the types are "
                                         r"none, gzip, snappy, lz4, zstd$"):
        ka.from_arrow(pa.table({"value": [b"v"]}), compression="zst")
