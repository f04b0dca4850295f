"""The Spark source's planning and reading see a log directory through the storage model: a
FIFO, a directory or a looping link named like a segment or an index, a stray ``1.log`` and a
name past the int64 range are never opened, so they neither hang nor crash a read.  A
partition directory holding a FIFO at a segment or index name is refused as the storage read
model refuses it (``open_view``, as ``to_arrow(dir)`` and ``Log.open``: NotRegularFileError
naming the file; issue 27, one answer everywhere); the other odd names are reported.  Run at
the Spark-free core level (plan + read_split), in a child process with a timeout (a FIFO
opened for reading would block forever)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyarrow")

if not hasattr(os, "mkfifo"):
    pytest.skip("no FIFOs on this system", allow_module_level=True)

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")

_READ = textwrap.dedent(
    """
    import json, sys, warnings
    from kafkalog.errors import KafkaLogError
    from kafkalog.spark import _options, _planning, _schema, _tasks

    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, root in (("clean", sys.argv[1]), ("odd", sys.argv[2])):
            for committed in ("false", "true"):
                opts = _options.ReadOptions.parse({
                    "path": root, "kafka.isolation.level":
                    "read_committed" if committed == "true" else "read_uncommitted",
                    "maxPartitionBytes": "8192",
                })
                schema = _schema.arrow_schema(opts)
                rows = []
                try:
                    for split in _planning.plan(opts):
                        for rb in _tasks.read_split(split, opts, schema):
                            d = rb.to_pydict()
                            rows += zip(d["topic"], d["partition"], d["offset"], d["value"])
                except KafkaLogError as e:
                    out[name + "-" + committed] = [type(e).__name__, getattr(e, "path", None)]
                    continue
                out[name + "-" + committed] = sorted(
                    [t, p, o, v.hex() if v is not None else None] for t, p, o, v in rows)
    out["warnings"] = [str(w.message) for w in caught]
    print(json.dumps(out))
    """
)


def _odd_entries(partition_dir: str):
    """Put odd names in a partition directory; returns the names that must be reported."""
    logs = sorted(n for n in os.listdir(partition_dir) if n.endswith(".log"))
    first = logs[0][:-4]
    j = lambda n: os.path.join(partition_dir, n)  # noqa: E731
    os.mkfifo(j("00000000000010000000.log"))  # past the log end: would be the active segment
    os.mkdir(j("00000000000020000000.log"))
    os.symlink("00000000000030000000.log", j("00000000000030000000.log"))  # loops
    os.symlink("nowhere", j("00000000000040000000.log"))  # dangles
    for suffix in (".index", ".timeindex", ".txnindex"):
        if os.path.exists(j(first + suffix)):
            os.unlink(j(first + suffix))
        os.mkfifo(j(first + suffix))
    with open(j("1.log"), "wb") as f:  # a stray name with data that is not a segment
        f.write(b"\0" * 100)
    shutil.copy(j(logs[0]), j("99999999999999999999.log"))  # past int64: not a base offset
    return [
        "00000000000010000000.log", "00000000000020000000.log", "00000000000030000000.log",
        "00000000000040000000.log", first + ".index", first + ".timeindex", first + ".txnindex",
        "99999999999999999999.log", "1.log",
    ]


def test_odd_entries_neither_hang_nor_crash_nor_change_a_read(sample_root, tmp_path):
    odd = tmp_path / "odd"
    shutil.copytree(sample_root, odd, symlinks=True)
    parts = sorted(
        d for d in os.listdir(odd) if os.path.isdir(os.path.join(odd, d))
    )
    reported = []
    for d in parts[:2]:
        reported += [os.path.join(odd, d, n) for n in _odd_entries(os.path.join(odd, d))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        res = subprocess.run(
            [sys.executable, "-c", _READ, sample_root, str(odd)],
            capture_output=True, text=True, timeout=240, env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("planning or reading a directory with odd entries hung")
    assert res.returncode == 0, res.stderr[-4000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["clean-false"] and out["clean-true"]
    fifos = {p for p in reported
             if p.endswith(("00000000000010000000.log", ".index", ".timeindex", ".txnindex"))}
    for committed in ("false", "true"):
        kind, path = out["odd-" + committed]
        assert kind == "NotRegularFileError" and path in fifos, out["odd-" + committed]
    # every odd name is reported (by path) when the directories are listed, as the CLI's
    # verify reports it
    warned = "\n".join(out["warnings"])
    for path in reported:
        assert path in warned, (path, warned[:2000])
    # the stray 1.log is almost a segment name: reported why it is not one, never read
    assert f"{os.path.join(odd, parts[0], '1.log')}: ignored: base offset '1'" in warned


def test_plan_rejects_a_fifo_given_as_the_path(tmp_path):
    from kafkalog.spark import _planning

    fifo = tmp_path / "00000000000000000000.log"
    os.mkfifo(fifo)
    code = textwrap.dedent(
        """
        import sys
        from kafkalog.spark import _errors, _options, _planning
        try:
            _planning.plan(_options.ReadOptions.parse({"path": sys.argv[1]}))
        except _errors.OptionError as e:
            print("OptionError:", e)
        """
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        res = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                             text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("planning a FIFO given as the path hung")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "OptionError:" in res.stdout and "fifo" in res.stdout
    assert _planning is not None


def test_header_walk_matches_the_decoded_batches(sample_root):
    """The storage model's header walk (segment.py's iter_headers, which the planner's cuts
    come from) gives each entry's attributes and producer id as a full decode of the entry
    does, over the segments the planner lists."""
    from kafkalog.records import RecordBatch
    from kafkalog.spark import _discovery, _options
    from kafkalog.storage.store_segment import open_segment

    tps = _discovery.discover(_options.ReadOptions.parse({"path": sample_root}))
    seen_v2 = seen_legacy = seen_txn = 0
    for tp in tps:
        for seg in tp.segments:
            with open(seg.path, "rb") as f:
                data = f.read()
            sg = open_segment(seg.files)
            try:
                headers = list(sg.iter_headers())
            finally:
                sg.close_handlers()
            assert headers and headers[-1].position + headers[-1].size == len(data)
            for h in headers:
                assert h.magic == data[h.position + 16]
                if h.magic == 2:
                    batch = RecordBatch(data[h.position:h.position + h.size], 0, check_crc=False)
                    assert (h.attributes, h.producer_id) == (batch.attributes, batch.producer_id)
                    assert h.base_offset == batch.base_offset
                    assert h.last_offset == batch.last_offset
                    seen_v2 += 1
                    seen_txn += bool(h.attributes & 0x10)
                else:
                    assert h.attributes == data[h.position + 17] and h.producer_id == -1
                    seen_legacy += 1
    assert seen_v2 and seen_legacy and seen_txn


def test_directory_handle_reads_the_directory_it_opened(tmp_path):
    """fs.open_dir, as a read task uses it: the files are listed and opened in the directory
    that was opened, even after another takes its name; a FIFO in it is refused unopened."""
    from kafkalog.storage import fs

    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(b"old")
    os.mkfifo(d / "00000000000000000005.log")
    h = fs.LOCAL.open_dir(str(d))
    if h is None:
        pytest.skip("this system cannot hold a directory open")
    with h:
        os.rename(d, tmp_path / "t-0.moved")
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(b"new!")
        with fs.LOCAL.open_dir(str(d)) as h2:
            assert h2.identity != h.identity
        kinds = {e.name: e.kind for e in h.list_dir()}
        assert kinds == {"00000000000000000000.log": fs.FILE, "00000000000000000005.log": fs.FIFO}
        with h.open_read("00000000000000000000.log") as f:
            assert f.read(0, 10) == b"old" and bytes(f.map()) == b"old"
        with pytest.raises(fs.NotRegularFileError) as ei:
            h.open_read("00000000000000000005.log")
        assert ei.value.kind == fs.FIFO and "t-0" in str(ei.value)
        with pytest.raises(fs.MissingFileError):
            h.open_read("00000000000000000009.log")
    with pytest.raises(fs.MissingFileError):
        fs.LOCAL.open_dir(str(tmp_path / "absent"))
    with pytest.raises(fs.NotRegularFileError):
        fs.LOCAL.open_dir(str(d / "00000000000000000000.log"))
