"""The damaged partition directories of tests/test_damage_everywhere.py, read through the Spark
source: a smaller sample (8 cases, each kind of damage; see CASES), each read
with the default options, with ``minPartitions=5`` and with ``failOnDataLoss=false``.

The same rule: a read returns every record the files hold below the log end, or reports what
it could not read (a failing job naming a kafkalog error; with ``failOnDataLoss=false``, a
warning).  Asserted, per case:

(a) the two failing reads (default, ``minPartitions=5``) give the same rows, and those of the
    library's reads that do not raise (``Log.iter_records``, ``to_arrow(dir)``), or the job
    fails with a kafkalog error (``CorruptRecordError`` ...), nothing else;
(b) no read returns without an error while leaving out a record of an untouched batch;
(c) with ``failOnDataLoss=false`` the job does not fail on damage and returns every untouched
    batch's records in other segments or at or after the first offset-index entry (of the
    pristine ``.index``) past the damaged bytes; any other untouched record it leaves out is
    warned about (checked on the same options run in this process through the source's
    planner and tasks, where the warnings can be seen);
(d) no offset that was never written (but those a damaged offset field claims where nothing
    can tell them from written ones).
"""

from __future__ import annotations

import os
import warnings

import pytest

pa = pytest.importorskip("pyarrow")

import test_damage_everywhere as tde  # noqa: E402  (tests/ is on sys.path, as for kl_support)

import kafkalog.errors as kerr  # noqa: E402

# One case of each kind of damage, taken where the rule bites: damage before whole batches of
# the LAST segment (a bit flip in a base offset, a zeroed range, a bad size, a bad offset, a
# bad magic; 24: a size one byte too large, so what follows is misaligned), and, for the two
# kinds that leave no batch after them in their file, truncation and appended bytes, in a
# middle segment.  All but 24 are copied partitions (no .kafka_cleanshutdown, no checkpoints).
# (The list is of case numbers of tests/test_damage_everywhere.py; each case's layout is
# printed when it fails.)
CASES = [28, 8, 23, 38, 11, 12, 13, 24]
OPTIONS = {
    "default": {},
    "minPartitions=5": {"minPartitions": "5"},
    "failOnDataLoss=false": {"failOnDataLoss": "false"},
}
_ERROR_NAMES = sorted(
    {c.__name__ for c in vars(kerr).values()
     if isinstance(c, type) and issubclass(c, kerr.KafkaLogError)},
    key=len, reverse=True)


def _kafkalog_error_in(text: str):
    return next((n for n in _ERROR_NAMES if n in text), None)


def _spark_offsets(spark, root, extra):
    df = spark.read.format("kafkalog")
    for k, v in extra.items():
        df = df.option(k, v)
    try:
        rows = df.load(root).select("offset").collect()
    except Exception as e:  # noqa: BLE001 - a failed job is an answer
        text = str(e)
        return None, text
    return [r["offset"] for r in rows], None


def _local_skip(root):
    """failOnDataLoss=false run in this process through the source's planner and tasks (the
    code Spark runs), with the warnings it gives."""
    from kafkalog.spark import _options, _planning, _schema, _tasks

    o = _options.ReadOptions.parse({"path": root, "failOnDataLoss": "false"})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            splits = _planning.plan(o)
            offs = [x for s in splits
                    for rb in _tasks.read_split(s, o, _schema.arrow_schema(o))
                    for x in rb.column("offset").to_pylist()]
            err = None
        except Exception as e:  # noqa: BLE001
            offs, err = None, e
    return offs, err, [str(x.message) for x in w]


@pytest.mark.parametrize("case", CASES)
def test_spark_reads_damage_never_silently_short(spark, tmp_path, case):
    root = str(tmp_path / "root")
    d, layout, segs, dmg, copied, facts = tde._case(root, case)
    entries = [e for s in segs for e in s.entries]
    written = {o for e in entries if not e.control for o in e.offsets()}
    untouched = [e for e in entries if not tde._touched(e, dmg)]
    must = sorted(o for e in untouched if not e.control for o in e.offsets())
    dseg = next(s for s in segs if s.path == dmg.path)
    later_index = [p for p in dseg.index_positions if p >= dmg.end]
    resume = min(later_index) if later_index else None
    must_skip = sorted(
        o for e in untouched if not e.control
        and (e.file != dmg.path or (resume is not None and e.pos >= resume))
        for o in e.offsets())
    claimed = tde._undetectable_offsets(segs, dmg)
    state = "copied (no .kafka_cleanshutdown, no root checkpoints)" if copied else \
        "cleanly closed"
    header = (
        f"case {case}: layout {layout}, {state}, {len(segs)} segment(s) "
        f"{[(s.base, s.size) for s in segs]}, log end {facts['leo']}\n"
        f"  damage: {dmg.kind}: {dmg.what} in {os.path.basename(dmg.path)}\n"
        f"  untouched data records: {tde._ranges(must)}"
    )

    got = {name: _spark_offsets(spark, root, extra) for name, extra in OPTIONS.items()}
    lib = {name: tde._call(lambda f=f: f(d)) for name, f in
           (("Log.iter_records", tde._log_records), ("to_arrow(dir)", tde._arrow_dir))}
    local_offs, local_err, local_warned = _local_skip(root)

    fails = []
    # (a) the same rows, or a kafkalog error
    answers = {}
    for name, (offs, err) in got.items():
        if err is not None:
            if _kafkalog_error_in(err) is None:
                fails.append(f"(a) spark {name} failed without naming a kafkalog error: "
                             f"{err[:600]}")
            continue
        if len(offs) != len(set(offs)):  # (rows come in no set order)
            fails.append(f"(a) spark {name} returned offsets twice: "
                         f"{tde._ranges([o for o in offs if offs.count(o) > 1])}")
        if name != "failOnDataLoss=false":
            answers.setdefault(tuple(sorted(set(offs))), []).append(f"spark {name}")
    for name, g in lib.items():
        if g.error is None:
            answers.setdefault(tuple(sorted(set(g.offsets))), []).append(name)
    if len(answers) > 1:
        fails.append("(a) the reads disagree: " + " | ".join(
            f"{', '.join(names)}: {len(offs)} offsets {tde._ranges(offs)}"
            for offs, names in answers.items()))

    # (b) never silently short
    for name, (offs, err) in got.items():
        if offs is None or name == "failOnDataLoss=false":
            continue
        missing = sorted(set(must) - set(offs))
        if missing:
            fails.append(f"(b) spark {name} returned {len(offs)} rows without an error and "
                         f"without {len(missing)} record(s) of untouched batches: "
                         f"{tde._ranges(missing)}")

    # (c) failOnDataLoss=false
    offs, err = got["failOnDataLoss=false"]
    if err is not None:
        fails.append(f"(c) spark failOnDataLoss=false failed: {err[:600]}")
    else:
        missing = sorted(set(must_skip) - set(offs))
        if missing:
            fails.append(f"(c) spark failOnDataLoss=false left out {len(missing)} record(s) "
                         f"of untouched batches in other segments or past the next index "
                         f"entry (pos {resume}): {tde._ranges(missing)} (got {len(offs)} "
                         f"rows {tde._ranges(offs)})")
    if local_err is not None:
        fails.append(f"(c) the source's planner/tasks with failOnDataLoss=false raised "
                     f"{type(local_err).__name__}: {local_err}")
    else:
        lost = sorted(set(must) - set(local_offs))
        if lost and not local_warned:
            fails.append(f"(c) failOnDataLoss=false (planner/tasks in process) left out "
                         f"{tde._ranges(lost)} (untouched) without a warning")
        if offs is not None and sorted(set(offs)) != sorted(set(local_offs)):
            fails.append(f"(c) failOnDataLoss=false: spark returned {tde._ranges(offs)}, "
                         f"the same planner/tasks in process {tde._ranges(local_offs)}")

    # (d) no invented offsets
    for name, (offs, err) in got.items():
        if offs is None:
            continue
        phantom = sorted(set(offs) - written - claimed)
        if phantom:
            fails.append(f"(d) spark {name} returned offsets never written: "
                         f"{tde._ranges(phantom)} (written: {tde._ranges(written)})")

    if fails:
        lines = [header]
        for name, (o, e) in got.items():
            lines.append(f"  spark {name}: " + (
                f"failed ({_kafkalog_error_in(e)}): {e.strip().splitlines()[0][:300]}"
                if e is not None else f"{len(o)} rows {tde._ranges(o)}"))
        for name, g in lib.items():
            lines.append(f"  {name}: {g.show()}")
        lines.append("  in-process failOnDataLoss=false: "
                     + (f"raised {local_err!r}" if local_err is not None else
                        f"{len(local_offs)} rows {tde._ranges(local_offs)}")
                     + (f"; warned: {[w[:200] for w in local_warned]}" if local_warned else ""))
        lines.append("  FAILED:")
        lines.extend("    " + f for f in fails)
        pytest.fail("\n".join(lines), pytrace=False)
