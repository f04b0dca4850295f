"""The columnar path on crafted LZ4/snappy blocks: both twins give one answer (the native
decoders apply LZ4's end-of-block rules), and a decompression bomb is refused after at most
one decompression, holding about ``max_decompressed_size``."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

import kafkalog.arrow as ka
from kafkalog import MemoryRecords, MemoryRecordsBuilder, _arrow_encode_py, _arrow_py, compression
from kafkalog._crc import crc32c
from kafkalog.errors import DecompressedSizeError

from kl_support import PURE

try:
    from kafkalog import _arrow as _arrow_c
    from kafkalog import _arrow_encode as _arrow_encode_c
except ImportError:  # pragma: no cover - a pure install
    _arrow_c = _arrow_encode_c = None

pytest.importorskip("lz4")
needs_native = pytest.mark.skipif(
    PURE or _arrow_c is None, reason="the compiled twin is not in use"
)


def v2_batch(section: bytes, count: int, codec: int) -> bytes:
    """A v2 batch at offset 0 whose records section (already compressed) is ``section``."""
    body = struct.pack(">hiqqqhii", codec, count - 1, 1000, 1000, -1, -1, -1, count) + section
    crc = crc32c(body)
    return struct.pack(">qiibI", 0, 9 + len(body), 0, 2, crc) + body


def records_section(value: bytes) -> bytes:
    b = MemoryRecordsBuilder(2, "none", 0)
    b.append(1000, None, value)
    return b.build()[61:]


def lz4_frame(*blocks: bytes) -> bytes:
    flg, bd = 0x60, 0x40  # version 1, independent blocks; 64 KiB blocks
    hc = compression._lz4_hc(bytes((flg, bd)))
    out = bytearray(struct.pack("<I", 0x184D2204) + bytes((flg, bd, hc)))
    for blk in blocks:
        out += struct.pack("<I", len(blk)) + blk
    return bytes(out + struct.pack("<I", 0))


def lz4_block(literals: bytes, offset: int, match_len: int, tail: bytes) -> bytes:
    """One block: ``literals``, a match (``match_len`` >= 4 bytes from ``offset`` back), then
    a last sequence of the literals ``tail`` (may be fewer than LZ4's five)."""

    def length(n: int) -> bytes:  # the extra length bytes after a nibble of 15
        out = bytearray()
        while n >= 255:
            out.append(255)
            n -= 255
        out.append(n)
        return bytes(out)

    lit, ml = len(literals), match_len - 4
    token = (min(lit, 15) << 4) | min(ml, 15)
    out = bytearray([token])
    if lit >= 15:
        out += length(lit - 15)
    out += literals + struct.pack("<H", offset)
    if ml >= 15:
        out += length(ml - 15)
    out.append(min(len(tail), 15) << 4)
    if len(tail) >= 15:
        out += length(len(tail) - 15)
    return bytes(out + tail)


def both(fn):
    out = {}
    for name, mod in (("cython", _arrow_c), ("python", _arrow_py)):
        if mod is None:
            continue
        saved = ka._core
        ka._core = mod
        try:
            out[name] = fn()
        except Exception as e:  # noqa: BLE001 - compared below
            out[name] = e
        finally:
            ka._core = saved
    return out


def same(results):
    vals = list(results.values())
    for other in vals[1:]:
        if isinstance(vals[0], Exception):
            assert type(other) is type(vals[0]) and str(other) == str(vals[0]), results
        else:
            assert not isinstance(other, Exception) and other.equals(vals[0]), results
    return vals[0]


def memory_records_answer(buf):
    try:
        return [bytes(r.value) for b in MemoryRecords(buf) for r in b]
    except Exception as e:  # noqa: BLE001
        return type(e).__name__


# Every value ends with a run of 'a' then the record's header count (0): the match repeats
# the run, the last sequence holds the final ``tail_len`` bytes.  Blocks that break LZ4's
# end-of-block rules (fewer than 5 final literals, a last match starting less than 12 bytes
# before the end) are left by the native decoder to the lz4 library, which decides; long
# matches whose length bytes run into the last 5 input bytes were once accepted natively.
@pytest.mark.parametrize("tail_len", [0, 1, 2, 3, 4, 5, 6, 12])
@pytest.mark.parametrize("match_len", [4, 8, 11, 19, 40, 300, 600, 800, 1100])
def test_lz4_end_of_block_rules_both_twins_agree(tail_len, match_len):
    value = b"x" * 20 + b"a" * (match_len + 30)
    section = records_section(value)
    total = len(section)
    start = total - tail_len - match_len  # where the match writes
    block = lz4_block(section[:start], 1, match_len, section[start + match_len :])
    buf = v2_batch(lz4_frame(block), 1, 3)
    table = same(both(lambda: ka.to_arrow(buf)))
    mr = memory_records_answer(buf)
    # the record API (lz4 library in both twins) gives the same verdict
    if isinstance(table, Exception):
        assert mr != [value]
    else:
        assert table.column("value").to_pylist() == [value] == mr


@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_bomb_is_refused_with_one_decompression(codec, monkeypatch):
    pytest.importorskip("snappy" if codec == "snappy" else "lz4")
    b = MemoryRecordsBuilder(2, codec, 0)
    b.append(1, b"k", b"x" * 300_000)
    buf = b.build()
    calls = []
    real = compression.decompress

    def counting(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)

    monkeypatch.setattr(compression, "decompress", counting)
    results = both(lambda: ka.to_arrow(buf, max_decompressed_size=100_000))
    err = same(results)
    assert isinstance(err, DecompressedSizeError)
    assert err.position == 0 and err.offset == 0
    if "cython" in results:
        # the pure twin decompresses once through kafkalog.compression; the native decoder
        # refuses on its own and never hands the batch over for a second decompression
        assert len(calls) == 1, calls


@needs_native
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's VmHWM reset")
@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_bomb_peak_memory_about_the_limit(codec, tmp_path):
    """The resident-memory peak while refusing a bomb stays near the limit (it was 2x)."""
    pytest.importorskip("snappy" if codec == "snappy" else "lz4")
    limit = 96 << 20
    b = MemoryRecordsBuilder(2, codec, 0)
    b.append(1, None, bytes(limit + (8 << 20)))
    path = tmp_path / "bomb"
    path.write_bytes(b.build())
    code = textwrap.dedent(
        f"""
        import json
        import kafkalog.arrow as ka
        from kafkalog import _arrow
        from kafkalog.errors import DecompressedSizeError

        def status(key):
            for line in open("/proc/self/status"):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024

        ka._core = _arrow
        buf = open({str(path)!r}, "rb").read()
        open("/proc/self/clear_refs", "w").write("5")  # VmHWM starts again from VmRSS
        base = status("VmRSS")
        try:
            ka.to_arrow(buf, max_decompressed_size={limit})
            err = None
        except DecompressedSizeError as e:
            err = type(e).__name__
        print(json.dumps({{"err": err, "peak": status("VmHWM") - base}}))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["err"] == "DecompressedSizeError"
    assert out["peak"] <= 1.25 * limit, out


def test_from_arrow_offsets_further_apart_than_int64_split_batches_in_both_twins():
    """Offsets -2^63 and a large positive one are more than 2^31-1 apart: a new batch in both
    twins (the compiled twin's signed difference wrapped and put them in one batch)."""
    pa = pytest.importorskip("pyarrow")
    table = pa.table(
        {
            "key": pa.array([None, None], pa.binary()),
            "value": pa.array([b"", b""], pa.binary()),
            "offset": pa.array([-(2**63), 278172146860033], pa.int64()),
            "timestamp": pa.array([-1, -1], pa.int64()),
        }
    )
    results = {}
    for name, mod in (("cython", _arrow_encode_c), ("python", _arrow_encode_py)):
        if mod is None:
            continue
        saved = ka._encoder
        ka._encoder = mod
        try:
            results[name] = ka.from_arrow(table)
        except Exception as e:  # noqa: BLE001 - compared below
            results[name] = repr(e)
        finally:
            ka._encoder = saved
    assert len(set(results.values())) == 1, results
    out = next(iter(results.values()))
    assert isinstance(out, bytes)
    assert [r.offset for b in MemoryRecords(out) for r in b] == [-(2**63), 278172146860033]
