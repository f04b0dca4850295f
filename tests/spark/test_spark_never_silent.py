"""Damage that used to make a read quietly short (issue 34, items 2, 3, 4 and 7), read through
every entry point and every Spark plan: with failOnDataLoss=true / on_damage="raise" each one
raises CorruptRecordError naming the same file and position; with failOnDataLoss=false /
on_damage="skip" each one returns the same rows, every record but the damaged batch's.  The
Spark source is driven as its tasks run (planner and task reader, no JVM); the JVM path is
exercised by the spark-marked tests."""

from __future__ import annotations

import os
import struct
import warnings

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog import MemoryRecordsBuilder  # noqa: E402
from kafkalog.errors import CorruptRecordError  # noqa: E402
from kafkalog.spark import _options, _planning, _schema, _tasks  # noqa: E402
from kafkalog.storage import files as _files  # noqa: E402
from kafkalog.storage.log import Log  # noqa: E402

from kl_support import entry_positions  # noqa: E402

PLANS = ({"defaultParallelism": "1", "minPartitions": "1"}, {}, {"minPartitions": "5"})
PER = 4  # records per batch
N_BATCHES = 46  # 7-10 segments; the last holds 4-6 batches


def _build(root, copied: bool, codec: str = "none"):
    """A partition of N_BATCHES batches of PER records in three or more segments, cleanly closed;
    ``copied``: without the clean-shutdown marker and the root checkpoints, as a backup copy."""
    d = os.path.join(root, "t-0")
    def batch(at):
        b = MemoryRecordsBuilder(compression_type=codec)
        for j in range(PER):
            b.append(1_700_000_000_000 + at + j, b"k", b"v%d" % (at + j) * 9)
        return b.build()

    one = len(batch(0))  # about 7 batches a segment, an index entry every 2-3
    with Log.open(d, {"segment.bytes": 7 * one + 20, "index.interval.bytes": 2 * one}) as log:
        for _ in range(N_BATCHES):
            log.append(batch(log.log_end_offset))
        bases = [s.base_offset for s in log._segments]
    assert len(bases) >= 3
    if copied:
        for name in os.listdir(root):
            if name != "t-0":
                os.unlink(os.path.join(root, name))
        for name in os.listdir(d):
            if name == _files.CLEAN_SHUTDOWN_FILE:
                os.unlink(os.path.join(d, name))
    return d, bases


def _damage(d, bases, which, kind):
    """Damage the ``which``-th batch of segment ``bases[k]`` (which = (k, i)); returns
    (.log path, position, offset of the damaged batch)."""
    k, i = which
    path = os.path.join(d, "%020d.log" % bases[k])
    pos, off, total = entry_positions(path)[i]
    data = bytearray(open(path, "rb").read())
    if kind == "crc":
        data[pos + total - 2] ^= 0x40
    elif kind == "base offset":  # not covered by a v2 batch's CRC
        data[pos] ^= 0x08
    elif kind == "header overwritten":  # offset and size: 12 bytes of garbage
        data[pos:pos + 12] = struct.pack(">qi", 0x5A5A5A5A5A5A5A5A, 2**31 - 1)
    elif kind == "magic":  # size intact
        data[pos + 16] = 7
    else:
        raise AssertionError(kind)
    open(path, "wb").write(bytes(data))
    return path, pos, off


def _spark(root, fail_on_data_loss, extra):
    o = _options.ReadOptions.parse({"path": root, "failOnDataLoss": fail_on_data_loss, **extra})
    return [x for s in _planning.plan(o) for rb in _tasks.read_split(s, o, _schema.arrow_schema(o))
            for x in rb.column("offset").to_pylist()]


CASES = [
    # (item, copied, codec, (segment, batch), damage)
    ("2: copied, bad CRC mid-way through the first segment", True, "lz4", (0, 5), "crc"),
    ("2: copied, bad CRC in the middle segment", True, "none", (1, 3), "crc"),
    ("3: base offset flipped in the middle segment", False, "none", (1, 2), "base offset"),
    ("3: base offset flipped, copied", True, "gzip", (1, 2), "base offset"),
    ("4: header overwritten in the last segment", False, "none", (-1, 1), "header overwritten"),
    ("4: header overwritten in the last segment, copied", True, "none", (-1, 1),
     "header overwritten"),
    ("7: bad magic, size intact, middle segment", False, "none", (1, 2), "magic"),
    ("7: bad magic, size intact, last segment, copied", True, "none", (-1, 0), "magic"),
]


@pytest.mark.parametrize("item, copied, codec, which, kind", CASES, ids=[c[0] for c in CASES])
def test_damage_is_never_silent_anywhere(tmp_path, item, copied, codec, which, kind):
    root = str(tmp_path)
    d, bases = _build(root, copied, codec)
    n = N_BATCHES * PER
    last = os.path.join(d, "%020d.log" % bases[-1])
    assert which[0] != -1 or which[1] + 1 < len(entry_positions(last))  # whole batches follow it
    path, pos, off = _damage(d, bases, which, kind)
    # raise: every entry point, every plan, names the same batch
    readers = {
        "Log read-only": lambda: [r.offset for r in Log.open(d, read_only=True).iter_records()],
        "to_arrow(dir)": lambda: ka.to_arrow(d, ["offset"]),
        "iter_batches(dir)": lambda: list(ka.iter_batches(d, ["offset"], max_rows=7)),
        "to_arrow(root)": lambda: ka.to_arrow(root, ["offset"]),
    }
    for extra in PLANS:
        readers["spark %s" % extra] = lambda extra=extra: _spark(root, "true", extra)
    for name, read in readers.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(CorruptRecordError) as e:
                read()
        assert (e.value.path, e.value.position) == (path, pos), (name, e.value)
    # skip: one answer, all records but those of the damaged batch
    expected = [o for o in range(n) if not off // PER * PER <= o < off // PER * PER + PER] \
        if kind != "header overwritten" and kind != "base offset" else None
    answers = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gaps = []
        with Log.open(d, read_only=True) as log:
            answers["Log skip"] = [r.offset for r in log.iter_records(on_damage="skip",
                                                                      gaps=gaps)]
        for extra in PLANS:
            answers["spark skip %s" % extra] = _spark(root, "false", extra)
    values = list(answers.values())
    assert all(v == values[0] for v in values), {k: len(v) for k, v in answers.items()}
    got = values[0]
    assert len(gaps) == 1 and (gaps[0].path, gaps[0].position) == (path, pos)
    # exactly one batch is missing, and the gap says which offsets
    missing = sorted(set(range(n)) - set(got))
    assert len(missing) == PER and missing == list(range(missing[0], missing[0] + PER))
    assert gaps[0].next_offset == missing[-1] + 1
    if expected is not None:
        assert got == expected
