"""A damaged log gives one answer whatever the split plan (issue 27, disagreement 8): the rows
of the Spark source never depend on how many splits it plans.  With failOnDataLoss=true a batch
that cannot be framed raises CorruptRecordError naming the file, the position and the offset,
in every plan; with false, every plan skips the same offsets (from the damaged batch to the
next entry of the segment's offset index, else to the next segment) and reads the rest."""

from __future__ import annotations

import os
import struct
import warnings

import pytest

pa = pytest.importorskip("pyarrow")

from kafkalog import MemoryRecordsBuilder  # noqa: E402
from kafkalog.errors import CorruptRecordError  # noqa: E402
from kafkalog.spark import _options, _planning, _schema, _tasks  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

PLANS = ({"defaultParallelism": "1", "minPartitions": "1"}, {}, {"minPartitions": "5"})


def _damaged_root(root):
    """Three segments of 40 offsets (100 in all) with an offset index entry every few
    batches; the second batch of the middle segment claims 2^31-1 bytes."""
    d = os.path.join(root, "t-0")
    with Log.open(d, {"segment.bytes": 4000, "index.interval.bytes": 200}) as log:
        for _ in range(50):
            b = MemoryRecordsBuilder()
            for j in range(2):
                b.append(1_700_000_000_000 + log.log_end_offset + j, None, b"v" * 60)
            log.append(b.build())
        bases = [s.base_offset for s in log._segments]
    assert len(bases) == 3
    mid = os.path.join(d, "%020d.log" % bases[1])
    data = bytearray(open(mid, "rb").read())
    pos = 12 + struct.unpack_from(">i", data, 8)[0]
    off = struct.unpack_from(">q", data, pos)[0]
    struct.pack_into(">i", data, pos + 8, 2**31 - 1)
    open(mid, "wb").write(bytes(data))
    return mid, pos, off, bases


def _read(root, fail_on_data_loss, extra):
    o = _options.ReadOptions.parse({"path": root, "failOnDataLoss": fail_on_data_loss, **extra})
    splits = _planning.plan(o)
    offsets = [x for s in splits for rb in _tasks.read_split(s, o, _schema.arrow_schema(o))
               for x in rb.column("offset").to_pylist()]
    return len(splits), offsets


def test_fail_on_data_loss_raises_in_every_plan(tmp_path):
    mid, pos, off, _bases = _damaged_root(str(tmp_path))
    counts = set()
    for extra in PLANS:
        with pytest.raises(CorruptRecordError) as e:
            counts.add(_read(str(tmp_path), "true", extra)[0])
        assert (e.value.path, e.value.position, e.value.offset) == (mid, pos, off), (extra, e.value)
    assert counts == set()  # nothing was returned
    o = _options.ReadOptions.parse({"path": str(tmp_path), **PLANS[2]})
    assert len(_planning.plan(o)) == 5  # the plans differ; the answer does not


def test_skipping_damage_gives_the_same_rows_in_every_plan(tmp_path):
    mid, pos, off, bases = _damaged_root(str(tmp_path))
    answers = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for extra in PLANS:
            n, offsets = _read(str(tmp_path), "false", extra)
            answers[n] = offsets
    assert len(answers) == 3, answers.keys()  # three different split counts
    values = list(answers.values())
    assert all(v == values[0] for v in values), {k: len(v) for k, v in answers.items()}
    got = values[0]
    assert got == sorted(set(got))
    # the records before the damage and those of the last segment are all read; what is
    # skipped is one run of offsets from the damaged batch on, inside the middle segment
    assert got[:off] == list(range(off)) and got[-(100 - bases[2]):] == list(range(bases[2], 100))
    missing = sorted(set(range(100)) - set(got))
    assert missing and missing[0] == off and missing == list(range(off, missing[-1] + 1))
    assert missing[-1] < bases[2]


def test_spark_reads_a_damaged_log_alike_with_any_split_count(spark, tmp_path):
    mid, pos, off, _bases = _damaged_root(str(tmp_path))
    rows = {}
    for n in (1, 5):
        df = (spark.read.format("kafkalog").option("failOnDataLoss", "false")
              .option("minPartitions", str(n)).option("defaultParallelism", "1")
              .load(str(tmp_path)))
        rows[n] = sorted(r["offset"] for r in df.select("offset").collect())
    assert rows[1] == rows[5] and off not in rows[1]
    df = spark.read.format("kafkalog").option("minPartitions", "5").load(str(tmp_path))
    with pytest.raises(Exception) as e:
        df.select("offset").collect()
    assert "CorruptRecordError" in str(e.value) or "Corrupt" in str(e.value)
