"""CRC primitives: the compiled twin (kafkalog._crc) and the pure twin (kafkalog._crc_py).

Both twins, the ``crc32c`` package and zlib must agree on every input. With
``KAFKALOG_PURE_PYTHON`` set the compiled twin may be absent (its tests then skip); without it
the compiled twin must import, so a broken build fails here instead of skipping.
"""
from __future__ import annotations

import array
import importlib
import mmap
import os
import platform
import random
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor

import crc32c as crc32c_pkg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkalog._crc_py as crc_py

PURE = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")


def _load_compiled():
    if not PURE:
        # The compiled twin must be there: an ImportError here fails the run, it never skips.
        return importlib.import_module("kafkalog._crc")
    try:
        return importlib.import_module("kafkalog._crc")
    except ImportError:
        return None


crc_c = _load_compiled()


@pytest.fixture(scope="module")
def c():
    """The compiled twin; skips (pure-Python runs only) when it is not built."""
    if crc_c is None:
        return pytest.importorskip("kafkalog._crc")
    return crc_c


def _twin(name: str):
    """'py' -> kafkalog._crc_py; 'c' -> kafkalog._crc (or skip)."""
    if name == "py":
        return crc_py
    return crc_c if crc_c is not None else pytest.importorskip("kafkalog._crc")


def _fn(name: str):
    """'py.crc32c' -> kafkalog._crc_py.crc32c; 'c.crc32c' -> kafkalog._crc.crc32c (or skip)."""
    twin, attr = name.split(".")
    return getattr(_twin(twin), attr)


def _crc32c_impls():
    """Every CRC-32C function that is available in this run."""
    impls = [crc_py.crc32c, crc_py.crc32c_sw]
    if crc_c is not None:
        impls += [crc_c.crc32c, crc_c.crc32c_sw]
    return impls


TWINS = ["py", "c"]
CRC32C_FUNCS = ["py.crc32c", "py.crc32c_sw", "c.crc32c", "c.crc32c_sw"]
ALL_FUNCS = CRC32C_FUNCS + ["py.crc32", "c.crc32"]


# The compiled header works in blocks of 3*256 and 3*64 bytes after aligning to 8: cover every
# length around those boundaries and a few multiples of them.
EDGE_LENGTHS = sorted(
    set(range(200))
    | {k * b + d for b in (192, 768) for k in range(1, 6) for d in range(-9, 10)}
    | {4095, 4096, 4097, 16383, 16384, 16385, 70000}
)


def _data(n: int, seed: int = 0) -> bytes:
    return random.Random(seed * 1_000_003 + n).randbytes(n) if n else b""


def _ref(data: bytes, value: int = 0) -> int:
    return crc32c_pkg.crc32c(data, value)


# --------------------------------------------------------------------------- known vectors


@pytest.mark.parametrize("name", CRC32C_FUNCS)
@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", 0),
        (b"123456789", 0xE3069283),
        (b"Some String", 608512271),
        (b"a", 0xC1D04330),
        # RFC 3720 (iSCSI) appendix B.4
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_known_vectors(name, data, expected):
    assert _fn(name)(data) == expected
    assert _ref(data) == expected


@pytest.mark.parametrize("twin", TWINS)
def test_crc32_known_vectors(twin):
    mod = _twin(twin)
    assert mod.crc32(b"") == 0
    assert mod.crc32(b"123456789") == 0xCBF43926
    assert mod.crc32(b"The quick brown fox jumps over the lazy dog") == 0x414FA339


def test_hardware_flag_pure():
    assert crc_py.HARDWARE is False


def test_hardware_flag_compiled(c):
    assert isinstance(c.HARDWARE, bool)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/cpuinfo")
def test_hardware_used_where_the_cpu_has_it(c):
    try:
        with open("/proc/cpuinfo") as fh:
            info = fh.read().split()
    except OSError:  # pragma: no cover
        pytest.skip("no /proc/cpuinfo")
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        has = "sse4_2" in info
    elif machine in ("aarch64", "arm64"):
        has = "crc32" in info
    else:
        pytest.skip(f"no hardware CRC-32C path on {machine}")
    assert c.HARDWARE is has


# ------------------------------------------------------------------------------ agreement


@pytest.mark.parametrize("n", EDGE_LENGTHS)
def test_compiled_paths_agree_on_edge_lengths_and_alignments(c, n):
    raw = _data(n + 16, seed=1)
    mv = memoryview(raw)
    for off in range(9):
        chunk = mv[off : off + n]
        want = _ref(chunk)
        assert c.crc32c(chunk) == want, (n, off)
        assert c.crc32c_sw(chunk) == want, (n, off)
        assert c.crc32c(chunk, 0x12345678) == _ref(chunk, 0x12345678), (n, off)
        assert c.crc32c_sw(chunk, 0x9ABCDEF0) == _ref(chunk, 0x9ABCDEF0), (n, off)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 64, 65, 191, 192, 193, 767, 768, 769, 1000])
def test_pure_twin_agrees_on_edge_lengths(n):
    data = _data(n + 3, seed=2)
    for off in (0, 1, 3):
        chunk = memoryview(data)[off : off + n]
        assert crc_py.crc32c_sw(chunk) == _ref(chunk)
        assert crc_py.crc32c(chunk) == _ref(chunk)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 70000), seed=st.integers(0, 2**32 - 1), value=st.integers(0, 2**32 - 1))
def test_all_agree_on_random_bytes(n, seed, value):
    data = _data(n, seed)
    want = _ref(data, value)
    for f in _crc32c_impls():
        assert f(data, value) == want, f
    want32 = zlib.crc32(data, value)
    assert crc_py.crc32(data, value) == want32
    if crc_c is not None:
        assert crc_c.crc32(data, value) == want32


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=3000), value=st.integers(0, 2**32 - 1))
def test_all_agree_on_small_binaries(data, value):
    want = _ref(data, value)
    for f in _crc32c_impls():
        assert f(data, value) == want, f


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 70000),
    seed=st.integers(0, 2**32 - 1),
    start=st.integers(0, 63),
    data=st.data(),
)
def test_offsets_into_memoryview(n, seed, start, data):
    buf = bytearray(_data(n + start, seed))
    end = data.draw(st.integers(start, n + start), label="end")
    view = memoryview(buf)[start:end]
    want = _ref(bytes(buf[start:end]))
    for f in _crc32c_impls():
        if f is crc_py.crc32c_sw and end - start > 5000:
            continue  # the pure table is slow; it gets long inputs elsewhere
        assert f(view) == want, f


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 70000), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_chaining(n, seed, data):
    buf = _data(n, seed)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4), label="cuts"))
    pieces = [buf[a:b] for a, b in zip([0] + cuts, cuts + [n])]
    whole = _ref(buf)
    for f in _crc32c_impls():
        if f is crc_py.crc32c_sw and n > 5000:
            continue
        crc = 0
        for p in pieces:
            crc = f(p, crc)
        assert crc == whole, f
    for mod in (crc_py, crc_c):
        if mod is None:
            continue
        crc = 0
        for p in pieces:
            crc = mod.crc32(p, crc)
        assert crc == zlib.crc32(buf)


@pytest.mark.parametrize("twin", TWINS)
def test_value_is_reduced_mod_2_32(twin):
    mod = _twin(twin)
    data = b"kafka"
    for f, ref in ((mod.crc32c, _ref), (mod.crc32c_sw, _ref), (mod.crc32, zlib.crc32)):
        assert f(data, -1) == f(data, 0xFFFFFFFF) == ref(data, 0xFFFFFFFF)
        assert f(data, 2**32 + 5) == f(data, 5) == ref(data, 5)
        assert f(data, value=7) == ref(data, 7)
        with pytest.raises(TypeError):
            f(data, 1.5)
        with pytest.raises(TypeError):
            f(data, "0")


def test_pure_twin_without_the_crc32c_package(monkeypatch):
    monkeypatch.setattr(crc_py, "_pkg_crc32c", None)
    data = _data(1000, seed=3)
    assert crc_py.crc32c(data) == _ref(data)
    assert crc_py.crc32c(data[500:], crc_py.crc32c(data[:500])) == _ref(data)
    with pytest.raises(TypeError):
        crc_py.crc32c(memoryview(data)[::2])
    with pytest.raises(TypeError):
        crc_py.crc32c("text")


# --------------------------------------------------------------------------------- inputs


def _inputs(data: bytes):
    yield "bytes", data
    yield "bytearray", bytearray(data)
    yield "memoryview", memoryview(data)
    yield "read-only memoryview", memoryview(bytearray(data)).toreadonly()
    if len(data) % 4 == 0:
        yield "array('I')", array.array("I", data)
        yield "memoryview cast to I", memoryview(data).cast("I")
    if len(data) % 8 == 0 and data:
        yield "2-d memoryview", memoryview(data).cast("B", (8, len(data) // 8))


def _reference_for(name: str):
    return zlib.crc32 if name.endswith(".crc32") else _ref


@pytest.mark.parametrize("name", ALL_FUNCS)
@pytest.mark.parametrize("n", [0, 8, 4096, 20000])
def test_buffer_kinds(name, n):
    f = _fn(name)
    data = _data(n, seed=4)
    want = _reference_for(name)(data)
    for kind, obj in _inputs(data):
        assert f(obj) == want, kind
    # a strided view with nothing in it is contiguous: the CRC of no bytes
    assert f(memoryview(data)[:0:2], 5) == 5


@pytest.mark.parametrize("name", ALL_FUNCS)
def test_mmap_inputs(name, tmp_path):
    f = _fn(name)
    ref = _reference_for(name)
    data = _data(70000, seed=5)
    anon = mmap.mmap(-1, len(data))
    try:
        anon[:] = data
        assert f(anon) == ref(data)
        with memoryview(anon) as whole, whole[123:45678] as part:
            assert f(part) == ref(data[123:45678])
    finally:
        anon.close()  # raises BufferError if a buffer export leaked
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        ro = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            assert f(ro) == ref(data)
        finally:
            ro.close()


@pytest.mark.parametrize("name", ALL_FUNCS)
@pytest.mark.parametrize("bad", ["abc", 123, None, [1, 2, 3], 1.0, object()])
def test_non_buffer_is_a_type_error(name, bad):
    with pytest.raises(TypeError):
        _fn(name)(bad)


@pytest.mark.parametrize("name", ALL_FUNCS)
@pytest.mark.parametrize("n", [5, 9, 10000])
def test_non_contiguous_is_a_type_error(name, n):
    f = _fn(name)
    data = _data(n, seed=6)
    for view in (memoryview(data)[::2], memoryview(data)[::-1], memoryview(data)[1::2]):
        with pytest.raises(TypeError):
            f(view)
    # one item is contiguous whatever the stride
    assert f(memoryview(data)[::n]) == _reference_for(name)(data[:1])
    buf = bytearray(data)
    with pytest.raises(TypeError):
        f(memoryview(buf)[::2])
    buf.append(0)  # BufferError here if a failed call leaked its buffer export


def test_compiled_twin_in_threads(c):
    # Large buffers run without the GIL: threads at once must each get the right answer.
    bufs = [_data(1 << 20, seed=s) for s in range(4)]

    def work(buf):
        return {(c.crc32c(buf), c.crc32c_sw(buf)) for _ in range(5)}

    with ThreadPoolExecutor(max_workers=len(bufs)) as pool:
        got = list(pool.map(work, bufs))
    assert got == [{(_ref(b), _ref(b))} for b in bufs]


@pytest.mark.parametrize("twin", TWINS)
def test_same_api(twin):
    mod = _twin(twin)
    assert set(mod.__all__) == {"crc32c", "crc32c_sw", "crc32", "HARDWARE"}
    assert isinstance(mod.HARDWARE, bool)
    for name in ("crc32c", "crc32c_sw", "crc32"):
        f = getattr(mod, name)
        assert f(b"x") == f(b"x", 0) == f(data=b"x", value=0) == f(b"x", value=0)
        assert type(f(b"x")) is int
