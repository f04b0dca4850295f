"""gzip inflaters: zlib, zlib-ng and isal give the same answers, errors and memory bounds.

Each installed inflater is compared with zlib over generated streams (members, concatenations,
truncations, flipped bytes, reserved flags, bombs).  isal also accepts some crafted malformed
streams that zlib refuses, so the default choice never takes it (tested below).  The test
extra installs isal and zlib-ng, so CI runs every row; elsewhere a missing library is skipped
with its name.
"""
import gzip as gzip_mod
import os
import random
import subprocess
import sys
import zlib

import pytest

from kafkalog import compression
from kafkalog.errors import DecompressedSizeError, DecompressionError, MissingCodecError

GZIP = 1
FAST = ("isal", "zlib-ng")


@pytest.fixture(autouse=True)
def _restore_inflater():
    before = compression.gzip_inflater()
    yield
    compression.set_gzip_inflater(before)


def _need(name):
    try:
        compression.set_gzip_inflater(name)
    except MissingCodecError as exc:
        pytest.skip(f"gzip inflater {name} is not installed here: {exc}")


def _child(code, inflater_env, *flags):
    """Run ``code`` in a fresh interpreter with $KAFKALOG_GZIP_INFLATER set (first use decides)."""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ, KAFKALOG_GZIP_INFLATER=inflater_env,
               PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *flags, "-c", code], env=env, capture_output=True,
                          text=True)


def _answer(data, max_size):
    try:
        return ("ok", compression.decompress(GZIP, data, max_size=max_size))
    except DecompressedSizeError:
        return ("too big", None)
    except DecompressionError as exc:  # the same words: zlib's, whichever inflater found it
        return ("corrupt", str(exc))


def _cases(seed, n):
    rnd = random.Random(seed)
    for i in range(n):
        size = rnd.choice((0, 1, 100, 5000, 70000))
        body = bytes(rnd.getrandbits(8) if rnd.random() < 0.3 else 65 + i % 7 for _ in range(size))
        level = rnd.choice((-1, 1, 6, 9))
        packed = compression.compress(GZIP, body, level=level)
        if rnd.random() < 0.3:  # another member, from another writer
            packed += gzip_mod.compress(body[: size // 2], mtime=i)
        kind = rnd.randrange(5)
        if kind == 1 and packed:
            packed = packed[: rnd.randrange(len(packed))]
        elif kind == 2 and len(packed) > 12:
            b = bytearray(packed)
            b[rnd.randrange(10, len(b))] ^= 1 << rnd.randrange(8)
            packed = bytes(b)
        elif kind == 3:
            packed += bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 30)))
        elif kind == 4 and rnd.random() < 0.4:  # a reserved header flag (zlib refuses it)
            b = bytearray(packed)
            b[3] |= rnd.choice((0x20, 0x40, 0x80))
            packed = bytes(b)
        max_size = rnd.choice((compression.DEFAULT_MAX_DECOMPRESSED_SIZE, size, max(size - 1, 0),
                               size * 2))
        yield packed, max_size


@pytest.mark.parametrize("name", FAST)
def test_same_answers_as_zlib(name):
    _need(name)
    cases = list(_cases(20261124, 300))
    compression.set_gzip_inflater("zlib")
    expected = [_answer(d, m) for d, m in cases]
    compression.set_gzip_inflater(name)
    got = [_answer(d, m) for d, m in cases]
    kinds = {e[0] for e in expected}
    words = {":".join(e[1].split(":")[:2]) for e in expected if e[0] == "corrupt"}
    assert words > {"gzip: corrupt member at byte 0"}, words
    assert any("unknown header flags" in e[1] for e in expected if e[0] == "corrupt")
    assert kinds == {"ok", "too big", "corrupt"}, kinds  # the generator reaches every outcome
    for i, (e, g) in enumerate(zip(expected, got)):
        assert e == g, (i, e[0], g[0])


@pytest.mark.parametrize("name", FAST + ("zlib",))
def test_bomb_is_refused_within_the_limit(name):
    _need(name)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(c.compress(bytes(1 << 20)) for _ in range(256)) + c.flush()  # 256 MiB of zeros
    with pytest.raises(DecompressedSizeError, match="gzip"):
        compression.decompress(GZIP, bomb, max_size=4 << 20)
    assert compression.decompress(GZIP, bomb[: len(bomb)], max_size=256 << 20) == bytes(256 << 20)


@pytest.mark.parametrize("name", FAST)
def test_library_errors_are_kafkalog_errors(name):
    _need(name)
    packed = compression.compress(GZIP, b"hello kafka" * 100)
    bad = packed[:10] + b"\x07" + packed[11:]  # first block of a reserved type (BTYPE 11)
    with pytest.raises(DecompressionError, match="gzip: corrupt member at byte 0"):
        compression.decompress(GZIP, bad)
    with pytest.raises(DecompressionError, match="truncated"):
        compression.decompress(GZIP, packed[:-9])


def test_choice_and_missing_library(monkeypatch):
    assert compression.set_gzip_inflater("zlib") == "zlib"
    assert compression.gzip_inflater() == "zlib"
    with pytest.raises(ValueError, match="gzip inflater must be one of"):
        compression.set_gzip_inflater("deflate64")
    real = compression._import

    def no_fast(mod):
        if mod.startswith(("isal", "zlib_ng")):
            raise ImportError(f"No module named {mod!r}")
        return real(mod)

    monkeypatch.setattr(compression, "_import", no_fast)
    with pytest.raises(MissingCodecError, match=r"kafkalog\[fast-gzip\]"):
        compression.set_gzip_inflater("zlib-ng")
    with pytest.raises(MissingCodecError, match="pip install isal"):
        compression.set_gzip_inflater("isal")
    assert compression.set_gzip_inflater("auto") == "zlib"  # auto falls back to zlib
    assert compression.decompress(GZIP, compression.compress(GZIP, b"x" * 50)) == b"x" * 50


@pytest.mark.parametrize("env", ["zlib", "isal", "zlib-ng", ""])
def test_environment_variable_chooses_on_first_use(env):
    code = (
        "from kafkalog import compression as c\n"
        "assert c.decompress(1, c.compress(1, b'abc')) == b'abc'\n"
        "print(c.gzip_inflater())\n"
    )
    out = _child(code, env)
    assert out.returncode == 0, out.stderr
    if env in FAST and "is not used" in out.stderr:
        pytest.skip(f"gzip inflater {env} is not installed here: {out.stderr.strip()}")
    if env:
        assert out.stdout.strip() == env
    else:
        assert out.stdout.strip() in ("zlib-ng", "zlib")  # auto never picks isal


@pytest.mark.parametrize("env", ["isa-l", "zlib_ng", "deflate"])
def test_unusable_environment_value_warns_and_means_auto(env):
    """A mistyped $KAFKALOG_GZIP_INFLATER must not break every gzip read: the choice never
    changes a result, so it warns once and takes the first installed inflater."""
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "from kafkalog import compression as c\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    assert c.decompress(1, c.compress(1, b'abc')) == b'abc'\n"
        "    assert c.decompress(1, c.compress(1, b'def')) == b'def'\n"
        "print(c.gzip_inflater(), len(seen), seen[0].message if seen else '')\n"
    )
    out = _child(code, env)
    assert out.returncode == 0, out.stderr
    name, count, message = out.stdout.strip().split(" ", 2)
    assert name in ("zlib-ng", "zlib")
    assert count == "1"
    assert "KAFKALOG_GZIP_INFLATER" in message and env in message


def test_explicit_choice_before_first_use_is_kept():
    """set_gzip_inflater() before the first gzip read is not replaced by the environment's
    choice when that first read comes (the first-use choice happens only while none is set)."""
    code = (
        "from kafkalog import compression as c\n"
        "c.set_gzip_inflater('zlib')\n"
        "assert c.decompress(1, c.compress(1, b'abc')) == b'abc'\n"
        "print(c.gzip_inflater())\n"
    )
    out = _child(code, "auto")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "zlib"


def test_warning_raised_as_an_error_still_leaves_a_choice():
    """Under ``-W error`` the first gzip read raises the warning; the inflater is chosen all the
    same, so later reads work (and do not warn again)."""
    code = (
        "from kafkalog import compression as c\n"
        "try:\n"
        "    c.decompress(1, c.compress(1, b'abc'))\n"
        "except RuntimeWarning as w:\n"
        "    print('warned', 'KAFKALOG_GZIP_INFLATER' in str(w))\n"
        "assert c.decompress(1, c.compress(1, b'abc')) == b'abc'\n"
        "print(c.gzip_inflater())\n"
    )
    out = _child(code, "isa-l", "-W", "error::RuntimeWarning")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() in (["warned", "True", "zlib-ng"], ["warned", "True", "zlib"])


# Crafted members (valid CRC-32 and size of what a lenient inflater makes of them) whose deflate
# block has an incomplete Huffman code set: zlib refuses them, isal inflates them.
INCOMPLETE = {
    "literal/length code": "1f8b08000000000000ff05e0db922449922ccb02" + "00" * 48 + "02" + "00" * 78
    + "100a43beb7e801000000",
    "distance code": "1f8b08000000000000ff0de1db922449922ccb02" + "00" * 48 + "02" + "00" * 78
    + "10215945e598ad04000000",
}


@pytest.mark.parametrize("what", sorted(INCOMPLETE))
def test_default_refuses_what_zlib_refuses(what):
    """The default (auto) inflater refuses an incomplete Huffman code set, as zlib and Kafka's
    Java inflater do; isal, which accepts it, is never the default."""
    data = bytes.fromhex(INCOMPLETE[what])
    compression.set_gzip_inflater("zlib")
    with pytest.raises(DecompressionError) as zlib_says:
        compression.decompress(GZIP, data)
    assert compression.set_gzip_inflater("auto") in ("zlib-ng", "zlib")
    with pytest.raises(DecompressionError) as auto_says:
        compression.decompress(GZIP, data)
    assert str(auto_says.value) == str(zlib_says.value)
