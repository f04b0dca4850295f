"""Smoke run of the fuzz harnesses (fuzz/harnesses.py) without atheris: each harness's check
over its seed corpus (conformance corpus included when present) plus a few thousand random
mutations.  Each check compares the compiled and the pure twin directly, so this is the same
in both suite runs; the pure-Python run uses a different mutation seed for more variety.
Long, coverage-guided runs: scripts/fuzz.sh (see fuzz/README.md)."""
from __future__ import annotations

import sys

import pytest

from kafkalog.errors import KafkaLogError

from kl_support import PURE, ROOT


def _load(name: str, filename: str):
    """Import a fuzz/ module under a private name (fuzz/ is not put on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "fuzz" / filename)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


harnesses = _load("kafkalog_fuzz_harnesses", "harnesses.py")
fuzz_run = _load("kafkalog_fuzz_run", "run.py")

MUTATIONS = {
    "varint": 3000,
    "records": 3000,
    "index": 1500,
    "checkpoint": 2000,
    "snapshot": 3000,
    "segment": 1500,
    "decoders": 3000,
    "arrow": 1500,
    "arrow_codec": 2000,
}


@pytest.mark.parametrize("name", sorted(harnesses.HARNESSES))
def test_harness_seeds_and_mutations(name):
    check = harnesses.HARNESSES[name][0]
    seeds = harnesses.seeds(name)
    assert seeds, f"{name}: no seeds"
    for data in seeds:
        check(data)
    for data in fuzz_run.mutations(seeds, MUTATIONS[name], seed=2 if PURE else 1):
        try:
            check(data)
        except BaseException as e:  # name the input, so it can be replayed
            raise AssertionError(f"{name}: {type(e).__name__}: {e}\ninput: {data.hex()}") from e


def test_both_twins_compared():
    """The checks compare twins only when the compiled ones import (not on PyPy / no compiler)."""
    import kafkalog

    if kafkalog.IMPLEMENTATION == "cython":
        assert harnesses.HAVE_COMPILED


def test_invariant_error_is_raised_on_disagreement():
    """The twin comparison really fires (guards against a check that compares nothing)."""
    with pytest.raises(harnesses.InvariantError):
        harnesses._agree("x", [("a", ("ok", 1)), ("b", ("err", "CorruptRecordError"))], b"")


# ------------------------------------------------------------------------------------------------
# Regressions for bugs the fuzzers found (KB1-KB5 in fuzz/README.md, all fixed).  KB1 runs in
# a child process: before its fix the compiled twin crashed the interpreter.
# ------------------------------------------------------------------------------------------------
_EMPTY_WRAPPER = r"""
import struct, sys, zlib
from kafkalog import compression, errors
from kafkalog._format import CompressionType as C
import importlib
m = importlib.import_module(sys.argv[1])
for magic in (0, 1):
    for codec in (C.GZIP, C.SNAPPY, C.LZ4):
        v = compression.compress(codec, b"", magic=magic)
        msg = struct.pack(">bb", magic, codec) + (struct.pack(">q", 5) if magic else b"")
        msg += struct.pack(">i", -1) + struct.pack(">i", len(v)) + v
        msg = struct.pack(">I", zlib.crc32(msg)) + msg
        data = struct.pack(">qi", 7, len(msg)) + msg
        (b,) = m.MemoryRecords(data).batches()
        assert list(b) == [] and b.records_count == 0
        try:
            b.base_offset, b.last_offset_delta
        except errors.KafkaLogError:
            pass
print("ok")
"""


def _twin_modules():
    return ["kafkalog._batch_py"] + ([] if not harnesses.HAVE_COMPILED else ["kafkalog._batch"])


@pytest.mark.parametrize("module", _twin_modules())
def test_kb1_empty_compressed_wrapper_base_offset(module):
    import subprocess

    p = subprocess.run([sys.executable, "-c", _EMPTY_WRAPPER, module], check=False,
                       capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stderr[-1500:])


# A .log of v1 messages whose offsets go backwards (found by the segment harness).
_KB2_LOG = bytes.fromhex(
    "000000000000000000000019478628c201000000015e1867abaeffffffff00000003313233"
    "000000000000000100000016ef98c92001000000015e1867afc0ffffffff00000000"
    "0000000000000012000000165faffb5e01000000015e1867b072ffffffff00000000"
    "000000000000000300000019a812572001000000015e1867b803ffffffff00000003313233"
)


def test_kb2_segment_close_after_recover(tmp_path):
    from kafkalog.errors import InvalidOffsetError
    from kafkalog.storage.segment import Segment

    (tmp_path / "00000000000000000000.log").write_bytes(_KB2_LOG)
    seg = Segment.open(str(tmp_path), 0, index_interval_bytes=64, max_index_size=4096)
    try:
        seg.recover()
    except InvalidOffsetError:
        seg.close()
        return
    seg.close()  # must not raise, and must close/trim the indexes


# A v2 batch (CRC valid) with base offset -60672, last offset 16716544, leader epoch 0.
_KB4_LOG = bytes.fromhex(
    "ffffffffffff13000000005f000000000281b14683000001000000000000000000016679fa31200000016679fa3120ff"
    "ffffffffffffffffffffffffff000000015a0000000a4b45592d314456414c55452d4c6f72656d206970737500000000"
    "0000550000000000102396"
)


@pytest.mark.parametrize("read_only", [True, False])
def test_kb4_negative_base_offset_leader_epoch(tmp_path, read_only):
    from kafkalog.errors import KafkaLogError
    from kafkalog.storage.log import Log

    (tmp_path / "00000000000000000000.log").write_bytes(_KB4_LOG)
    try:
        log = Log.open(str(tmp_path), read_only=read_only)
    except KafkaLogError:
        return  # rejecting the segment as corrupt is fine
    log.close()


# KB5: an entry header of exactly 17 bytes (offset, size, epoch/CRC, a bad magic byte) at the
# end of a buffer.  MemoryRecords reports a partial tail there (Kafka's FileLogInputStream reads
# nothing unless more than 17 bytes remain), but the Arrow decoder read the magic byte and
# raised CorruptRecordError, so to_arrow and the record decoder disagreed on a truncated buffer.
_KB5_TAIL = bytes.fromhex("000000000000000900000086" "2ec7d2c1" "af")


@pytest.mark.parametrize("twin", [label for label, _mod in harnesses.ARROW])
def test_kb5_arrow_17_byte_tail_is_a_partial_entry(twin, monkeypatch):
    pytest.importorskip("pyarrow")
    import kafkalog.arrow as ka
    from kafkalog import MemoryRecords

    monkeypatch.setattr(ka, "_core", dict(harnesses.ARROW)[twin])
    assert list(MemoryRecords(_KB5_TAIL).batches()) == []
    assert ka.to_arrow(_KB5_TAIL).num_rows == 0
    # one byte more and the bad magic is read, by both decoders
    with pytest.raises(KafkaLogError, match="magic"):
        list(MemoryRecords(_KB5_TAIL + b"\0").batches())
    with pytest.raises(KafkaLogError, match="magic"):
        ka.to_arrow(_KB5_TAIL + b"\0")


def test_runner_falls_back_to_the_mutator_without_atheris(tmp_path):
    """scripts/fuzz.sh promises the random mutator where atheris is missing: the runner, started
    as the script starts it with atheris made unimportable, runs a harness to the end."""
    import os
    import subprocess

    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "atheris.py").write_text("raise ImportError('atheris blocked for this test')\n")
    env = dict(os.environ, KAFKALOG_FUZZ_DIR=str(tmp_path / "fuzz"))
    env["PYTHONPATH"] = os.pathsep.join(
        [str(blocker)] + [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, str(ROOT / "fuzz" / "run.py"), "varint",
                           "--seconds", "1"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "DONE (mutator) harness=varint" in proc.stdout
    assert "atheris is not installed" in proc.stderr
