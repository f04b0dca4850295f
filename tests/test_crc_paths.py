"""Every CRC-32C kernel of the compiled twin against the portable tables and the crc32c package.

``kafkalog._crc._paths()`` names the kernels this CPU runs; each kernel known to the header is a
parameter here, and one this CPU (or this build) does not run is skipped with that reason, so
the test output says which ran. The folding constants of ``_csrc/crc32c_fold.h`` are derived
again from the polynomial and compared with the header's table.

``python tests/test_crc_paths.py`` prints the constants table as the header holds it.
"""
from __future__ import annotations

import importlib
import os
import platform
import random
import re
import sys
from pathlib import Path

import crc32c as crc32c_pkg
import pytest

import kafkalog._crc_py as crc_py

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
HEADER = Path(__file__).resolve().parents[1] / "src" / "kafkalog" / "_csrc" / "crc32c_fold.h"
POLY = 0x82F63B78  # CRC-32C, reflected

try:
    crc_c = importlib.import_module("kafkalog._crc")
except ImportError:
    if not PURE:  # a compiled run must have the compiled twin: fail, never skip
        raise
    crc_c = None

# every kernel the header knows, slowest first
KERNELS = ["table", "sse4.2", "armv8-crc", "pclmul", "vpclmul256", "vpclmul512"]
FOLD_MIN = getattr(crc_c, "_FOLD_MIN", 0) or 512
# the steps of the kernels' loops: 3*64 + 128 (pclmul), 3*64 + 256 (vpclmul256), 256, 64, 32
STEPS = (320, 448, 256, 64, 32, 16)


def _kernel(name: str):
    """A function (data, crc) -> CRC on kernel ``name``, or a skip saying why it cannot run."""
    if crc_c is None:
        pytest.skip("the compiled twin is not built (pure-Python run)")
    paths = crc_c._paths()
    if name not in paths:
        pytest.skip(f"this CPU or build does not run the {name} kernel (it runs {paths})")
    return lambda data, crc=0: crc_c._crc32c_path(name, data, crc)


@pytest.fixture(scope="module")
def blob() -> bytes:
    return random.Random(37).randbytes((1 << 20) + 128)


def _edge_lengths() -> list[int]:
    out = set(range(65)) | {4095, 4096, 4097, 16383, 16384, 16385, 65535, 65536, 65537}
    for base in (FOLD_MIN, *STEPS):
        for k in range(1, 5):
            for d in (-17, -16, -1, 0, 1, 15, 16, 17):
                out.add(k * base + d)
    for m in range(16):  # every tail after a fold of FOLD_MIN, in 16-byte and 1-byte steps
        out.update({FOLD_MIN + 16 * m, FOLD_MIN + 16 * m + 7, FOLD_MIN + 8 * m + 3})
    return sorted(n for n in out if n >= 0)


EDGES = _edge_lengths()
RANDOM_LENGTHS = sorted(random.Random(2024).randrange(0, 1 << 20) for _ in range(60)) + [1 << 20]


# --------------------------------------------------------------------------- constants


def _times_x(r: int, n: int) -> int:
    """Register r (reflected: bit 31-d is the x^d coefficient) times x^n mod P."""
    for _ in range(n):
        r = (r >> 1) ^ (POLY if r & 1 else 0)
    return r


def fold_constants(count: int = 48) -> list[tuple[int, int]]:
    """{x^(D+31) mod P, x^(D-33) mod P} for D = 128*j, j = 1..count (see crc32c_fold.h)."""
    one = 0x80000000
    return [(_times_x(one, 128 * j + 31), _times_x(one, 128 * j - 33)) for j in range(1, count + 1)]


def header_constants() -> list[tuple[int, int]]:
    text = HEADER.read_text()
    body = text[text.index("kl__crc32c_fold_k[") :]
    body = body[: body.index("};")]
    return [(int(a, 16), int(b, 16))
            for a, b in re.findall(r"\{(0x[0-9a-f]+), (0x[0-9a-f]+)\}", body)]


def test_fold_constants_derive_from_the_polynomial():
    got = header_constants()
    assert len(got) == 48
    assert got == fold_constants(len(got))


def test_fold_constants_fold():
    # the defining property, by brute force in Python: a 16-byte lane followed by D zero bits
    # has the CRC of the lane's two halves multiplied by the constants (see the header)
    def clmul(a: int, b: int) -> int:
        r = 0
        while b:
            if b & 1:
                r ^= a
            a <<= 1
            b >>= 1
        return r

    rnd = random.Random(5)
    for j, (k0, k1) in enumerate(fold_constants(8), start=1):
        lane = rnd.randbytes(16)
        q0 = int.from_bytes(lane[:8], "little")
        q1 = int.from_bytes(lane[8:], "little")
        folded = (clmul(q0, k0) ^ clmul(q1, k1)).to_bytes(16, "little")

        def raw(b):
            return crc32c_pkg.crc32c(b) ^ 0xFFFFFFFF ^ _times_x(0xFFFFFFFF, 8 * len(b))

        assert raw(lane + bytes(16 * j)) == raw(folded), j


# --------------------------------------------------------------------------- kernels


def test_paths_and_kernel_in_use():
    if crc_c is None:
        pytest.skip("the compiled twin is not built (pure-Python run)")
    paths = crc_c._paths()
    assert paths[0] == "table" and set(paths) <= set(KERNELS)
    assert crc_c._KERNEL == paths[-1]
    assert crc_c.HARDWARE is (len(paths) > 1)
    data = random.Random(1).randbytes(100_000)
    assert crc_c.crc32c(data, 7) == crc_c._crc32c_path(crc_c._KERNEL, data, 7)
    with pytest.raises(ValueError, match="no CRC-32C kernel 'nope'"):
        crc_c._crc32c_path("nope", b"")
    with pytest.raises(TypeError):
        crc_c._crc32c_path("table", "not bytes")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/cpuinfo")
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 only")
def test_x86_kernels_follow_the_cpu_flags():
    if crc_c is None or not crc_c._FOLD_MIN:
        pytest.skip("no folding kernel built (pure-Python run, or a compiler without them)")
    with open("/proc/cpuinfo") as fh:
        flags = set(fh.read().split())
    want = ["table"]
    if "sse4_2" in flags:
        want.append("sse4.2")
        if "pclmulqdq" in flags:
            want.append("pclmul")
            if {"avx2", "vpclmulqdq"} <= flags:
                want.append("vpclmul256")
                if "avx512f" in flags:
                    want.append("vpclmul512")
    assert list(crc_c._paths()) == want


@pytest.mark.parametrize("name", KERNELS)
def test_edge_lengths(name, blob):
    f = _kernel(name)
    for n in EDGES:
        data = blob[:n]
        want = crc32c_pkg.crc32c(data)
        assert f(data) == want, n
        assert f(data, 0xDEADBEEF) == crc32c_pkg.crc32c(data, 0xDEADBEEF), n


@pytest.mark.parametrize("name", KERNELS)
def test_random_lengths_against_the_tables(name, blob):
    f, table = _kernel(name), _kernel("table")
    rnd = random.Random(name)
    for n in RANDOM_LENGTHS:
        start = rnd.randrange(64)
        data = blob[start : start + n]
        value = rnd.getrandbits(32)
        assert f(data, value) == table(data, value) == crc32c_pkg.crc32c(data, value), n


@pytest.mark.parametrize("name", KERNELS)
def test_alignments(name, blob):
    f = _kernel(name)
    buf = bytearray(blob[: 70_000 + 64])
    mv = memoryview(buf)
    for n in (FOLD_MIN - 1, FOLD_MIN, 1000, 4097, 70_000):
        for off in range(64):
            chunk = mv[off : off + n]
            assert f(chunk, off) == crc32c_pkg.crc32c(chunk, off), (n, off)


@pytest.mark.parametrize("name", KERNELS)
def test_split_points(name, blob):
    f = _kernel(name)
    rnd = random.Random(11)
    for n in (0, 1, FOLD_MIN - 1, FOLD_MIN, FOLD_MIN + 1, 2 * FOLD_MIN + 1, 20_000, 300_001):
        data = blob[:n]
        whole = f(data)
        cuts = {0, n, n // 2, min(n, FOLD_MIN), max(0, n - FOLD_MIN)}
        cuts.update(rnd.randrange(n + 1) for _ in range(6))
        for cut in sorted(cuts):
            a, b = data[:cut], data[cut:]
            assert f(b, f(a)) == whole, (n, cut)


@pytest.mark.parametrize("name", KERNELS)
def test_pure_twin_agrees(name, blob):
    f = _kernel(name)
    for n in (0, 1, 9, FOLD_MIN - 1, FOLD_MIN, FOLD_MIN + 1, 1337):
        data = blob[3 : 3 + n]
        assert f(data, 5) == crc_py.crc32c_sw(data, 5) == crc_py.crc32c(data, 5), n
    big = blob[: 1 << 20]
    assert f(big) == crc_py.crc32c(big)


def test_pure_twin_at_the_fold_thresholds(blob):
    # the pure twin alone (it runs in pure-Python runs too), at the compiled thresholds
    for n in (FOLD_MIN - 1, FOLD_MIN, FOLD_MIN + 1, 448 + 1, 320 - 1):
        data = blob[:n]
        assert crc_py.crc32c_sw(data) == crc_py.crc32c(data) == crc32c_pkg.crc32c(data), n


if __name__ == "__main__":
    for j, (k0, k1) in enumerate(fold_constants(), start=1):
        print(f"    {{0x{k0:08x}, 0x{k1:08x}}}, /* {j:2d}: D = {128 * j} */")
