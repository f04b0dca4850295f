"""``kafkalog verify``, ``stats`` and ``salvage`` on the logs a real Kafka broker wrote (issue 26,
part 4; the broker and its consumer's answers are ``conftest.broker_matrix``'s).

* ``verify`` is clean on every partition directory after the broker's clean shutdown (exit 0,
  no problem line), and on the copy taken right after the SIGKILL mid-produce it reports nothing
  the restarted broker called damage: the broker recovered every segment of that copy (no
  recovery point had been checkpointed) and served every record in it, so the only errors
  docs/cli.md allows there are torn tails of a last segment (bytes a broker truncates), and
  the rest (left-over ``.deleted`` files, indexes a broker rebuilds) are warnings.
* ``stats`` counts the records the consumer got, plus the transaction markers a consumer never
  sees, and ends the partition at the consumer's end offset.
* On a copy damaged on purpose -- a byte flipped inside a batch of a middle segment, a middle
  segment cut short inside its last batch -- ``verify`` names exactly that batch (file, position,
  offset) and ``salvage`` copies out every other batch: the salvaged directory reads as the
  consumer's records less the damaged batch's.
"""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import List, Tuple

import pytest
from test_broker_reads import assert_same, consumer_rows, log_rows

from kafkalog.storage.log import Log

from kafka_matrix import INTERNAL, PARTITIONS

pytestmark = pytest.mark.kafka

USER = [(t, p) for t, parts in PARTITIONS.items() for p in parts]
ALL = USER + [(t, p) for t, parts in INTERNAL.items() for p in parts]


def run_cli(*args: str) -> Tuple[int, str, str]:
    """``kafkalog ARGS`` in this process (the twin of this session): (status, stdout, stderr)."""
    import io
    import sys

    from kafkalog.tools.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            rc = main(list(args))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdout, sys.stderr = old
    return rc or 0, out.getvalue(), err.getvalue()


def problems(stdout: str) -> List[dict]:
    return [o for o in map(json.loads, stdout.splitlines()) if o["type"] == "problem"]


def summary(stdout: str) -> dict:
    (s,) = [o for o in map(json.loads, stdout.splitlines()) if o["type"] == "summary"]
    return s


# -- the batches of a segment, read here from Kafka's framing alone --------------------------------
def batches(segment: Path) -> List[Tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of each v2 batch of ``segment``."""
    data = segment.read_bytes()
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        assert data[pos + 16] == 2, f"{segment}:{pos}: not a v2 batch"
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, length + 12, base, base + delta))
        pos += length + 12
    assert pos == len(data), f"{segment}: {len(data) - pos} bytes after the last batch"
    return out


def segments(d: Path) -> List[Path]:
    return sorted(d.glob("*.log"))


# -- verify and stats on what the broker wrote -----------------------------------------------------
@pytest.mark.parametrize("topic,p", ALL + [("__cluster_metadata", 0)],
                         ids=[f"{t}-{p}" for t, p in ALL + [("__cluster_metadata", 0)]])
def test_verify_clean_shutdown(broker_matrix, topic, p):
    """Every partition directory of the clean shutdown verifies clean, ``--deep`` included."""
    d = broker_matrix.clean_dir / f"{topic}-{p}"
    for flags in ((), ("--deep",)):
        rc, out, err = run_cli("verify", "--json", *flags, str(d))
        assert problems(out) == [] and rc == 0, (flags, out[-3000:], err[-2000:])
        assert summary(out)["ok"] is True and summary(out)["batches"] > 0


def test_verify_clean_log_root(broker_matrix):
    """The whole log root, with its checkpoints: exit 0, no error, no warning."""
    rc, out, err = run_cli("verify", str(broker_matrix.clean_dir))
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 1 and lines[0].startswith("OK: ") \
        and lines[0].endswith(": 0 error(s), 0 warning(s)"), out[-3000:] + err[-2000:]


@pytest.mark.parametrize("topic,p", USER, ids=[f"{t}-{p}" for t, p in USER])
def test_verify_after_sigkill(broker_matrix, topic, p):
    """The SIGKILL copy: the restarted broker recovered every segment and lost no record (its
    consumer read up to the copy's last offset), so verify may report, as errors, only a torn
    tail of the last segment; anything else it says is a warning and the exit status is 0
    when there is no torn tail (docs/cli.md, ``kafkalog verify``)."""
    m = broker_matrix
    d = m.unclean_dir / f"{topic}-{p}"
    rc, out, err = run_cli("verify", "--json", "--deep", str(d))
    errors = [e for e in problems(out) if e["severity"] == "error"]
    last = str(segments(d)[-1])
    torn = [e for e in errors if e["file"] == last and "torn" in e["message"]]
    assert errors == torn, f"{topic}-{p}: errors the broker did not call damage: {errors}"
    assert rc == (1 if torn else 0), out[-3000:] + err[-2000:]
    # what the broker then served ends where the copy's whole batches end
    with Log.open(d, read_only=True) as log:
        end = log.log_end_offset
    assert m.bounds[(topic, p, "read_uncommitted")][1] == end


@pytest.mark.parametrize("state", ["clean", "unclean"])
@pytest.mark.parametrize("topic,p", USER, ids=[f"{t}-{p}" for t, p in USER])
def test_stats_counts(broker_matrix, state, topic, p):
    """``stats``: records = the consumer's records (read_uncommitted) + the transaction markers;
    the last offset is the consumer's end offset less one."""
    m = broker_matrix
    d = (m.clean_dir if state == "clean" else m.unclean_dir) / f"{topic}-{p}"
    rc, out, err = run_cli("stats", "--json", "--no-segments", str(d))
    assert rc == 0, err
    (part,) = [o for o in map(json.loads, out.splitlines()) if o["type"] == "partition"]
    consumed = m.records[(topic, p, "read_uncommitted")]
    assert part["errors"] == []
    assert part["records"] - part["commitMarkers"] - part["abortMarkers"] == len(consumed), part
    assert part["lastOffset"] + 1 == m.bounds[(topic, p, "read_uncommitted")][1]
    assert part["firstOffset"] <= consumed[0]["offset"]


# -- damage, found and salvaged ------------------------------------------------------------------
def _damaged_copy(m, tmp_path: Path, topic: str, p: int, how: str):
    """A copy of ``topic-p`` (clean shutdown) with its middle segment damaged: ``flip`` a byte
    inside the records of its second batch, or ``cut`` it inside its last batch.  Returns
    (copy, segment, (position, size, base offset, last offset) of the damaged batch)."""
    src = m.clean_dir / f"{topic}-{p}"
    d = tmp_path / f"{topic}-{p}"
    shutil.copytree(src, d)
    segs = segments(d)
    assert len(segs) >= 3, segs
    seg = segs[len(segs) // 2]
    found = batches(seg)
    assert len(found) >= 3
    if how == "flip":
        victim = found[1]
        pos, size = victim[0], victim[1]
        with open(seg, "r+b") as f:
            f.seek(pos + size - 3)
            b = f.read(1)
            f.seek(pos + size - 3)
            f.write(bytes([b[0] ^ 0x5A]))
    else:
        victim = found[-1]
        with open(seg, "r+b") as f:
            f.truncate(victim[0] + victim[1] // 2)
    return d, seg, victim


@pytest.mark.parametrize("how", ["flip", "cut"])
@pytest.mark.parametrize("topic,p", [("codecs", 0), ("codecs", 3), ("crash", 1)])
def test_damage_found_and_salvaged(broker_matrix, tmp_path, topic, p, how):
    m = broker_matrix
    d, seg, (pos, size, first, last) = _damaged_copy(m, tmp_path / "src", topic, p, how)
    rc, out, err = run_cli("verify", "--json", str(d))
    errors = [e for e in problems(out) if e["severity"] == "error"]
    assert rc == 1, out
    # the damaged batch, named once; the rest of the copy checks out
    on_log = [e for e in errors if e["file"] == str(seg)]
    assert [(e["position"], e["offset"]) for e in on_log] == [(pos, first)], errors
    if how == "flip":
        assert "CRC mismatch" in on_log[0]["message"] and errors == on_log, errors
    else:
        assert "truncated batch" in on_log[0]["message"], errors
        # the segment's indexes may point into the batch that is gone, and nowhere else
        stem = str(seg)[:-4]
        for e in errors:
            if e is not on_log[0]:
                assert e["file"] in (stem + ".index", stem + ".timeindex") \
                    and first <= e["offset"] <= last, errors

    dst = tmp_path / "rescue" / f"{topic}-{p}"
    rc, out, err = run_cli("salvage", "--json", str(d), str(dst))
    assert rc == 0, out + err
    lost = [o for o in map(json.loads, out.splitlines()) if o["type"] == "lost"]
    assert [(o["file"], o["start"], o["end"]) for o in lost] == \
        [(str(seg), pos, pos + size if how == "flip" else seg.stat().st_size)], lost
    assert (lost[0]["firstOffset"], lost[0]["lastOffset"]) == (first, last), lost
    want = [r for r in consumer_rows(m, topic, p, "read_uncommitted")
            if not first <= r[0] <= last]
    with Log.open(dst, read_only=True) as log:
        got = log_rows(log, "read_uncommitted")
    assert_same(want, got, f"salvaged {topic}-{p} ({how})")
    rc, out, err = run_cli("verify", str(dst))
    assert rc == 0, out + err
