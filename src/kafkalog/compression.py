"""Kafka's compression codecs, byte-compatible with the Java client and broker.

One pure-Python module calling the C libraries, shared by the compiled and the pure twins of
the batch codec.  Public API::

    decompress(codec, data, *, magic=2, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes
    compress(codec, data, *, magic=2, level=None) -> bytes
    available(codec) -> bool
    require(codec) -> None
    xxh32(data, seed=0) -> int          (pure Python; LZ4 frame checksums)

Codec ids are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (``CompressionType``).

What is read (mirroring Java's readers, see the reference §6):

* gzip -- RFC 1952, concatenated members as ``GZIPInputStream`` reads them: after a member,
  further bytes are decoded as another member when they start with a parseable gzip header and
  silently ignored otherwise (Java's ``readTrailer``).
* snappy -- xerial framing (``SnappyInputStream``) when the input starts with the 8-byte magic
  ``82 'SNAPPY' 00`` and is at least 16 bytes long, including concatenated xerial streams;
  otherwise the whole input is one raw snappy block (librdkafka, sarama, franz-go).
* lz4 -- Kafka's LZ4 frame (``Lz4BlockInputStream``): version 01, independent blocks only,
  reserved bits 0, block size code 4..7, content size skipped, header checksum verified for
  magic >= 1 and ignored for magic 0 (KAFKA-3160), stored-uncompressed blocks, block checksums
  verified, content checksum skipped, bytes after the end mark ignored.
* zstd -- one or more concatenated frames (skippable frames included), with or without a
  content size in the header.

Bounded memory: every decoder raises :class:`DecompressedSizeError` as soon as the output
would exceed ``max_size`` (an output of exactly ``max_size`` bytes is fine), without ever
holding much more than ``max_size`` bytes, even for a bomb: gzip asks zlib for at most half
the room left per call; zstd feeds at most (room left) / 65536 input bytes per call, which no
frame can expand beyond half the room; snappy checks each block's declared length before
decoding it; lz4 decodes one block (at most 4 MiB) at a time.  Only a successful result made
of several parts (members, chunks, blocks, frames) is briefly held twice while it is joined.
(zstd also allocates the window its frame header asks for, at most 128 MiB, zstd's limit.)
Malformed input raises :class:`DecompressionError` naming the codec; no library exception
escapes.

What is written: gzip as ``GZIPOutputStream`` (header ``1f 8b 08 00 00000000 00 ff``, level
-1 = 6 by default); snappy in xerial framing with 32 KiB chunks (``SnappyOutputStream``);
lz4 as ``Lz4BlockOutputStream`` (FLG 0x60, BD 0x40, 64 KiB independent blocks stored raw when
compression does not shrink them, end mark, no checksums; header checksum 0x82 for magic >= 1
and Kafka's "broken" 0x1A for magic 0); zstd as a standard frame (level 3 by default).

The codec libraries (``lz4``, ``cramjam``/``python-snappy``, ``zstandard``) are imported on
first use, so ``import kafkalog`` stays light and a missing library only matters when its codec
is met; it then raises :class:`UnsupportedCompressionError` naming the pip extra.  gzip is
inflated by zlib-ng when installed (``kafkalog[fast-gzip]``), else by zlib, with the same
answers and errors; isal is used only when named (``set_gzip_inflater``/
``$KAFKALOG_GZIP_INFLATER``), as it accepts some malformed streams that zlib refuses.
"""
from __future__ import annotations

import importlib
import os
import struct
import sys
import threading
import warnings
import zlib
from typing import Any, Callable, Dict, List, Optional

from kafkalog._format import DEFAULT_MAX_DECOMPRESSED_SIZE
from kafkalog.errors import (
    DecompressedSizeError,
    DecompressionError,
    KafkaLogError,
    MissingCodecError,
    UnsupportedCompressionError,
)

__all__ = [
    "decompress", "compress", "available", "require", "xxh32", "set_gzip_inflater", "gzip_inflater"
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_EXTRAS = {SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_U32LE = struct.Struct("<I")
_I32BE = struct.Struct(">i")
_unpack_u32le = _U32LE.unpack_from
_unpack_i32be = _I32BE.unpack_from
_pack_u32le = _U32LE.pack
_pack_i32be = _I32BE.pack


def _view(data: Any) -> memoryview:
    """A flat unsigned-byte memoryview over any buffer, without copying when possible."""
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        try:
            mv = mv.cast("B")
        except TypeError:  # not C-contiguous
            mv = memoryview(mv.tobytes())
    return mv


def _too_big(name: str, max_size: int) -> DecompressedSizeError:
    return DecompressedSizeError(
        f"{name}: decompressed size exceeds the limit of {max_size} bytes"
    )


# ---------------------------------------------------------------------------------------------
# xxHash32 (pure Python).  The LZ4 frame header checksum covers 2 to 10 bytes; lz4 does not
# expose xxhash, and a C implementation is not worth a dependency.
# ---------------------------------------------------------------------------------------------
_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF
_U32X4LE = struct.Struct("<4I")


def xxh32(data: Any, seed: int = 0) -> int:
    """xxHash32 of ``data`` (any buffer) with ``seed``, as an unsigned int.

    Pure Python: meant for the few bytes of an LZ4 frame descriptor, slow on large inputs.
    """
    b = bytes(data)
    n = len(b)
    i = 0
    seed &= _M32
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed
        v4 = (seed - _P1) & _M32
        limit = n - 16
        unpack4 = _U32X4LE.unpack_from
        while i <= limit:
            a, bb, c, d = unpack4(b, i)
            v1 = (v1 + a * _P2) & _M32
            v1 = (((v1 << 13) | (v1 >> 19)) & _M32) * _P1 & _M32
            v2 = (v2 + bb * _P2) & _M32
            v2 = (((v2 << 13) | (v2 >> 19)) & _M32) * _P1 & _M32
            v3 = (v3 + c * _P2) & _M32
            v3 = (((v3 << 13) | (v3 >> 19)) & _M32) * _P1 & _M32
            v4 = (v4 + d * _P2) & _M32
            v4 = (((v4 << 13) | (v4 >> 19)) & _M32) * _P1 & _M32
            i += 16
        h = (
            ((v1 << 1) | (v1 >> 31))
            + ((v2 << 7) | (v2 >> 25))
            + ((v3 << 12) | (v3 >> 20))
            + ((v4 << 18) | (v4 >> 14))
        ) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (h + _unpack_u32le(b, i)[0] * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        i += 4
    while i < n:
        h = (h + b[i] * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------------------------------------
# Lazy library loading
# ---------------------------------------------------------------------------------------------
_load_lock = threading.RLock()
_load_errors: Dict[int, UnsupportedCompressionError] = {}

# Bound on first use (None until then).
_lz4_block_decompress: Optional[Callable[..., bytes]] = None
_lz4_block_compress: Optional[Callable[..., bytes]] = None
_lz4_frame_decompress: Optional[Callable[..., bytes]] = None
_snappy_raw_decompress: Optional[Callable[[Any], Any]] = None
_snappy_raw_compress: Optional[Callable[[Any], Any]] = None
_zstd: Any = None
_zstd_error: Any = None

_tls = threading.local()


def _import(name: str) -> Any:
    """Import hook (tests monkeypatch it to simulate a missing library)."""
    return importlib.import_module(name)


def _missing(codec: int, exc: BaseException) -> UnsupportedCompressionError:
    name = _NAMES[codec]
    extra = _EXTRAS[codec]
    return MissingCodecError(
        f"{name} compression needs a library that is not installed ({exc}); "
        f"install it with: pip install 'kafkalog[{extra}]'"
    )


def _load(codec: int) -> None:
    """Import the library of ``codec`` (2, 3 or 4) or raise UnsupportedCompressionError."""
    global _lz4_block_decompress, _lz4_block_compress
    global _snappy_raw_decompress, _snappy_raw_compress, _zstd, _zstd_error
    with _load_lock:
        err = _load_errors.get(codec)
        if err is not None:
            raise MissingCodecError(err.message)
        try:
            if codec == LZ4:
                if _lz4_block_decompress is None:
                    block = _import("lz4.block")
                    _lz4_block_compress = block.compress
                    _lz4_block_decompress = block.decompress
            elif codec == SNAPPY:
                if _snappy_raw_decompress is None:
                    try:
                        cramjam = _import("cramjam")
                        snap = cramjam.snappy
                        _snappy_raw_compress = snap.compress_raw
                        _snappy_raw_decompress = snap.decompress_raw
                    except (ImportError, AttributeError):
                        # python-snappy (before 0.7 a C extension of its own): raw block API.
                        snappy = _import("snappy")
                        _snappy_raw_compress = snappy.compress
                        _snappy_raw_decompress = snappy.decompress
            elif codec == ZSTD:
                if _zstd is None:
                    zstd = _import("zstandard")
                    _zstd_error = zstd.ZstdError
                    _zstd = zstd
        except (ImportError, AttributeError) as exc:
            err = _missing(codec, exc)
            _load_errors[codec] = err
            raise MissingCodecError(err.message) from exc


def _load_lz4_frame() -> Callable[..., bytes]:
    global _lz4_frame_decompress
    if _lz4_frame_decompress is None:
        try:
            _lz4_frame_decompress = _import("lz4.frame").decompress
        except (ImportError, AttributeError) as exc:
            raise _missing(LZ4, exc) from exc
    return _lz4_frame_decompress


def _reset_libraries() -> None:
    """Forget loaded libraries and load failures (for tests)."""
    global _lz4_block_decompress, _lz4_block_compress, _lz4_frame_decompress
    global _snappy_raw_decompress, _snappy_raw_compress, _zstd, _zstd_error, _tls
    global _gzip_backend_in_use, _gzip_inflater
    with _load_lock:
        _load_errors.clear()
        _lz4_block_decompress = _lz4_block_compress = _lz4_frame_decompress = None
        _snappy_raw_decompress = _snappy_raw_compress = None
        _zstd = _zstd_error = None
        _tls = threading.local()
        _gzip_inflater, _gzip_backend_in_use = None, None  # the name first: a reader that
        # finds no backend then finds no name either, and chooses again


def _codec_id(codec: Any) -> int:
    if isinstance(codec, bool) or not isinstance(codec, int):
        raise TypeError(f"codec must be an int, not {type(codec).__name__}")
    if codec not in _NAMES:
        raise UnsupportedCompressionError(f"unknown compression codec id {int(codec)}")
    return int(codec)


def available(codec: int) -> bool:
    """Whether ``codec`` can be used here (its library imports).  Unknown ids: False."""
    if isinstance(codec, bool) or not isinstance(codec, int) or codec not in _NAMES:
        return False
    if codec in (NONE, GZIP):
        return True
    try:
        _load(int(codec))
    except UnsupportedCompressionError:
        return False
    return True


def require(codec: int) -> None:
    """Raise :class:`UnsupportedCompressionError` unless ``codec`` is known and usable here."""
    codec = _codec_id(codec)
    if codec in (SNAPPY, LZ4, ZSTD):
        _load(codec)


# ---------------------------------------------------------------------------------------------
# gzip
# ---------------------------------------------------------------------------------------------
# The inflater: zlib-ng (``zlib_ng``) when installed, else zlib; isal's igzip
# (``isal.isal_zlib``) when named.  Both inflate the same streams faster (bench/README.md)
# behind zlib's ``decompressobj`` API (``max_length``, ``unconsumed_tail``, ``unused_data``,
# ``eof``).  zlib-ng refuses what zlib refuses; isal accepts some malformed deflate streams
# that zlib refuses (incomplete Huffman code sets, a reserved header flag), so "auto" never
# picks it.  Only decompression changes: what kafkalog writes stays zlib's bytes.
GZIP_INFLATERS = ("zlib-ng", "isal", "zlib")
_GZIP_AUTO = ("zlib-ng", "zlib")
_GZIP_INSTALL = {"zlib-ng": "pip install 'kafkalog[fast-gzip]'", "isal": "pip install isal"}
_GZIP_MODULES = {"isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng", "zlib": "zlib"}
_GZIP_ENV = "KAFKALOG_GZIP_INFLATER"
# (decompressobj, error class) of the chosen inflater, swapped as one object so that a thread
# switching inflaters never leaves a decoder with one library's decompressobj and another's error
_gzip_backend_in_use: Optional[tuple] = None
_gzip_inflater: Optional[str] = None
_MAX_LENGTH = sys.maxsize >> 1


def _gzip_backend(name: str) -> tuple:
    """``(decompressobj, error class)`` of inflater ``name`` or MissingCodecError."""
    if name not in _GZIP_MODULES:
        raise ValueError(
            f"gzip inflater must be one of {', '.join(GZIP_INFLATERS)} or auto, not {name!r}"
        )
    if name == "zlib":
        return zlib.decompressobj, zlib.error
    try:
        mod = _import(_GZIP_MODULES[name])
        dobj, err = mod.decompressobj, mod.error
    except (ImportError, AttributeError) as exc:
        raise MissingCodecError(
            f"gzip inflater {name!r} needs a library that is not installed ({exc}); "
            f"install it with: {_GZIP_INSTALL[name]} (or choose zlib)"
        ) from None
    return dobj, err


def _select_gzip_inflater(name: Optional[str]) -> str:
    """Install inflater ``name`` (None/"auto": zlib-ng if installed, else zlib); the caller
    holds the lock."""
    global _gzip_backend_in_use, _gzip_inflater
    if name is None or name == "auto":
        for cand in _GZIP_AUTO:
            try:
                backend = _gzip_backend(cand)
            except MissingCodecError:
                continue
            name = cand
            break
    else:
        backend = _gzip_backend(name)
    _gzip_backend_in_use, _gzip_inflater = backend, name
    return name  # type: ignore[return-value]


def set_gzip_inflater(name: Optional[str] = None) -> str:
    """Choose the library that inflates gzip and return its name.

    ``name`` is ``"zlib-ng"``, ``"isal"``, ``"zlib"`` (always there), or ``None``/``"auto"``:
    zlib-ng if installed, else zlib.  A named library that is not installed raises
    :class:`MissingCodecError`, an unknown name ValueError.  Without a call, the first gzip
    decompression chooses from ``$KAFKALOG_GZIP_INFLATER`` (same names; unset means auto; a
    name that is unknown or not installed warns once and means auto).  With zlib-ng, results
    and errors are zlib's (an error it finds is answered by zlib again, so the words are
    zlib's too).  isal, only when named, is the fastest but accepts some malformed streams
    that zlib refuses (incomplete Huffman code sets): a valid stream gives the same bytes.
    """
    with _load_lock:
        return _select_gzip_inflater(name)


def gzip_inflater() -> str:
    """The name of the library that inflates gzip (chosen on first use, see set_gzip_inflater)."""
    if _gzip_inflater is None:
        problem = None
        with _load_lock:
            if _gzip_inflater is None:  # not chosen meanwhile by set_gzip_inflater()
                wanted = os.environ.get(_GZIP_ENV, "").strip().lower() or None
                try:
                    _select_gzip_inflater(wanted)
                except (ValueError, MissingCodecError) as exc:
                    chosen = _select_gzip_inflater(None)
                    problem = (
                        f"${_GZIP_ENV}={wanted!r} is not used ({exc}); "
                        f"gzip is inflated by {chosen}"
                    )
        if problem is not None:  # warned once, after the choice (a warning raised as an error
            warnings.warn(problem, RuntimeWarning, stacklevel=2)  # must not leave none made)
    return _gzip_inflater  # type: ignore[return-value]


def _gzip_header_ok(mv: memoryview, pos: int) -> bool:
    """Whether a gzip member header parses at ``pos``, as ``GZIPInputStream.readHeader``."""
    n = len(mv)
    if n - pos < 10 or mv[pos] != 0x1F or mv[pos + 1] != 0x8B or mv[pos + 2] != 8:
        return False
    flg = mv[pos + 3]
    p = pos + 10
    if flg & 4:  # FEXTRA
        if n - p < 2:
            return False
        p += 2 + (mv[p] | (mv[p + 1] << 8))
        if p > n:
            return False
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flg & bit:
            while p < n and mv[p] != 0:
                p += 1
            if p >= n:
                return False
            p += 1
    if flg & 2:  # FHCRC
        if n - p < 2:
            return False
        if (zlib.crc32(mv[pos:p]) & 0xFFFF) != (mv[p] | (mv[p + 1] << 8)):
            return False
    return True


def _gzip_decompress(data: Any, magic: int, max_size: int) -> bytes:
    t = type(data)
    mv = memoryview(data) if t is bytes or t is bytearray else _view(data)
    if len(mv) == 0:
        raise DecompressionError("gzip: empty input (no gzip header)")
    backend = _gzip_backend_in_use
    if backend is None:
        gzip_inflater()
        backend = _gzip_backend_in_use
    if backend[0] is zlib.decompressobj:
        return _gzip_inflate(mv, max_size, backend, False)
    try:
        return _gzip_inflate(mv, max_size, backend, True)
    except DecompressionError:
        # Where another inflater finds fault (damage, a bomb, a header zlib refuses), zlib
        # decides: the libraries buffer differently, so which of "too big" and "corrupt" comes
        # first, and the words, may differ.  Only damaged input pays for the second pass.
        return _gzip_inflate(mv, max_size, (zlib.decompressobj, zlib.error), False)


def _gzip_inflate(mv: memoryview, max_size: int, backend: tuple, strict: bool) -> bytes:
    """Inflate every gzip member of ``mv`` with ``backend`` (decompressobj, error class).
    ``strict``: refuse the reserved header flags that zlib refuses and other inflaters accept."""
    dobj, error = backend
    n = len(mv)
    parts: List[bytes] = []
    total = 0
    pos = 0
    while True:  # one gzip member per round
        if strict and n - pos > 3 and mv[pos + 3] & 0xE0:
            raise DecompressionError(f"gzip: reserved header flags set in the member at byte {pos}")
        d = dobj(31)
        buf = mv[pos:] if pos else mv
        while True:
            # Ask for at most half the room left (+1 to see an overflow): zlib's output buffer
            # plus its final copy then stay within the limit even for a bomb.
            want = ((max_size - total) >> 1) + 1
            if want > _MAX_LENGTH:
                want = 0  # no practical limit
            try:
                out = d.decompress(buf, want)
            except error as exc:
                raise DecompressionError(f"gzip: corrupt member at byte {pos}: {exc}") from None
            total += len(out)
            if total > max_size:
                raise _too_big("gzip", max_size)
            parts.append(out)
            if d.eof:
                break
            if not want or len(out) < want:
                raise DecompressionError(
                    f"gzip: unexpected end of input (member at byte {pos} is truncated)"
                )
            buf = d.unconsumed_tail
        tail = len(d.unused_data)
        if not tail:
            break
        pos = n - tail
        if not _gzip_header_ok(mv, pos):
            break  # as GZIPInputStream: trailing bytes that are no gzip member are ignored
    return parts[0] if len(parts) == 1 else b"".join(parts)


_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
try:
    zlib.compress(b"", 6, 31)  # wbits since Python 3.11
    _ZLIB_COMPRESS_WBITS = True
except TypeError:
    _ZLIB_COMPRESS_WBITS = False


def _gzip_compress(data: Any, magic: int, level: Optional[int]) -> bytes:
    if level is None:
        level = -1
    elif (
        isinstance(level, bool)
        or not isinstance(level, int)
        or not (level == -1 or 1 <= level <= 9)
    ):
        raise ValueError(f"gzip level must be -1 or 1..9, not {level!r}")
    if _ZLIB_COMPRESS_WBITS:
        out = zlib.compress(data, level, 31)
    else:  # Python < 3.11
        c = zlib.compressobj(level, zlib.DEFLATED, 31, 8, zlib.Z_DEFAULT_STRATEGY)
        out = c.compress(data) + c.flush()
    # zlib writes mtime 0 too, but its own XFL and OS bytes: use GZIPOutputStream's header.
    return _GZIP_HEADER + out[10:]


# ---------------------------------------------------------------------------------------------
# snappy
# ---------------------------------------------------------------------------------------------
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_unpack_u64be = struct.Struct(">Q").unpack_from
_XERIAL_MAGIC_U64 = _unpack_u64be(_XERIAL_MAGIC, 0)[0]
_XERIAL_MAGIC_HEAD = _unpack_i32be(_XERIAL_MAGIC, 0)[0]  # 0x82534E41 as an int32 (negative)
_XERIAL_MAX_CHUNK = 512 * 1024 * 1024
_XERIAL_BLOCK = 32 * 1024


def _snappy_where(chunk_pos: int) -> str:
    return "raw snappy block" if chunk_pos < 0 else f"xerial chunk at byte {chunk_pos}"


def _snappy_block(mv: memoryview, start: int, end: int, budget: int, max_size: int, chunk_pos: int):
    """Decode the raw snappy block ``mv[start:end]`` after checking its declared length.

    ``chunk_pos`` is the position of the xerial chunk header, -1 for a raw stream (messages).
    """
    if start >= end:
        raise DecompressionError(f"snappy: empty {_snappy_where(chunk_pos)}")
    # Declared uncompressed length: unsigned varint of at most 32 bits (5 bytes).
    declared = 0
    shift = 0
    i = start
    while True:
        if i >= end or shift > 28:
            raise DecompressionError(
                f"snappy: invalid uncompressed length varint in {_snappy_where(chunk_pos)}"
            )
        b = mv[i]
        i += 1
        declared |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if declared > budget:
        if declared > 0xFFFFFFFF:
            raise DecompressionError(
                f"snappy: invalid uncompressed length varint in {_snappy_where(chunk_pos)}"
            )
        if declared > 22 * (end - start) + 32:
            # A snappy tag yields at most 64 bytes per 3 input bytes: garbage, not a bomb.
            raise DecompressionError(
                f"snappy: corrupt {_snappy_where(chunk_pos)}: declared uncompressed length "
                f"{declared} is impossible for {end - start} compressed bytes"
            )
        raise _too_big("snappy", max_size)
    try:
        out = _snappy_raw_decompress(mv[start:end])  # type: ignore[misc]
    except Exception as exc:
        raise DecompressionError(f"snappy: corrupt {_snappy_where(chunk_pos)}: {exc}") from None
    if len(out) != declared:
        raise DecompressionError(
            f"snappy: corrupt {_snappy_where(chunk_pos)}: expected {declared} bytes, "
            f"but it decompressed to {len(out)}"
        )
    return out


def _snappy_decompress(data: Any, magic: int, max_size: int) -> bytes:
    if _snappy_raw_decompress is None:
        _load(SNAPPY)
    t = type(data)
    mv = memoryview(data) if t is bytes or t is bytearray else _view(data)
    n = len(mv)
    if n == 0:
        raise DecompressionError("snappy: cannot decompress empty stream")
    if n < 16 or _unpack_u64be(mv, 0)[0] != _XERIAL_MAGIC_U64:
        # Not xerial framing: the whole input is one raw snappy block (SnappyInputStream).
        return bytes(_snappy_block(mv, 0, n, max_size, max_size, -1))
    if _unpack_i32be(mv, 8)[0] < 1:
        raise DecompressionError("snappy: incompatible xerial stream version (must be >= 1)")
    parts: list = []
    total = 0
    pos = 16
    while n - pos >= 4:  # as Java, fewer than 4 trailing bytes end the stream
        clen = _unpack_i32be(mv, pos)[0]
        if clen < 0:
            if clen == _XERIAL_MAGIC_HEAD:
                # Concatenated xerial stream: a new 16-byte header follows.
                if n - pos < 16:
                    raise DecompressionError(
                        "snappy: insufficient header size in a concatenated xerial block "
                        f"at byte {pos}"
                    )
                if _unpack_u64be(mv, pos)[0] != _XERIAL_MAGIC_U64:
                    break  # Java stops reading at an invalid concatenated header
                if _unpack_i32be(mv, pos + 8)[0] < 1:
                    raise DecompressionError(
                        "snappy: incompatible xerial stream version (must be >= 1)"
                    )
                pos += 16
                continue
            raise DecompressionError(f"snappy: negative xerial chunk size {clen} at byte {pos}")
        if clen > _XERIAL_MAX_CHUNK:
            raise DecompressionError(
                f"snappy: xerial chunk size {clen} at byte {pos} is greater than the maximum "
                f"{_XERIAL_MAX_CHUNK}"
            )
        start = pos + 4
        end = start + clen
        if end > n:
            raise DecompressionError(
                f"snappy: truncated xerial chunk at byte {pos} ({clen} bytes declared, "
                f"{n - start} left)"
            )
        out = _snappy_block(mv, start, end, max_size - total, max_size, pos)
        total += len(out)
        parts.append(out)
        pos = end
    if len(parts) == 1:
        return bytes(parts[0])
    return b"".join(parts)


def _snappy_compress(data: Any, magic: int, level: Optional[int]) -> bytes:
    if _snappy_raw_compress is None:
        _load(SNAPPY)
    comp = _snappy_raw_compress
    mv = _view(data)
    n = len(mv)
    out = [_XERIAL_HEADER]
    for i in range(0, n, _XERIAL_BLOCK):
        block = comp(mv[i : i + _XERIAL_BLOCK])  # type: ignore[misc]
        out.append(_pack_i32be(len(block)))
        out.append(block)
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# lz4 (Kafka's LZ4 frame)
# ---------------------------------------------------------------------------------------------
_LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = b"\x04\x22\x4d\x18"
_LZ4_STORED = 0x80000000
_LZ4_KAFKA_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_KAFKA_BD = 0x40  # 64 KiB blocks
_LZ4_KAFKA_BLOCK = 64 * 1024
_hc_cache: Dict[bytes, int] = {}


def _lz4_hc(descriptor: bytes) -> int:
    """``(xxh32(descriptor) >> 8) & 0xFF``, cached (descriptors repeat)."""
    hc = _hc_cache.get(descriptor)
    if hc is None:
        hc = (xxh32(descriptor) >> 8) & 0xFF
        if len(_hc_cache) < 4096:
            _hc_cache[descriptor] = hc
    return hc


_LZ4_HC_V1 = _lz4_hc(bytes((_LZ4_KAFKA_FLG, _LZ4_KAFKA_BD)))  # 0x82
_LZ4_HC_V0 = _lz4_hc(_LZ4_MAGIC_BYTES + bytes((_LZ4_KAFKA_FLG, _LZ4_KAFKA_BD)))  # 0x1A (KAFKA-3160)


def _lz4_checked_block(mv: memoryview, start: int, end: int, word: int, bd: int) -> bytes:
    """Verify a block's xxh32 checksum (4 bytes after ``end``) and decode it.

    The check runs in C: the block is wrapped in a one-block standard frame with the
    block-checksum flag and handed to ``lz4.frame``.
    """
    frame_decompress = _load_lz4_frame()
    desc = bytes((0x70, bd))
    mini = b"".join(
        (
            _LZ4_MAGIC_BYTES, desc, bytes((_lz4_hc(desc),)), _pack_u32le(word),
            mv[start : end + 4], b"\0\0\0\0",
        )
    )
    try:
        return frame_decompress(mini)
    except Exception as exc:
        if "hecksum" in str(exc):
            raise DecompressionError(
                f"lz4: block checksum mismatch in block at byte {start - 4}"
            ) from None
        raise DecompressionError(f"lz4: corrupt block at byte {start - 4}: {exc}") from None


_LZ4_HEADER = struct.Struct("<IBBB")
_unpack_lz4_header = _LZ4_HEADER.unpack_from
# Validated frame descriptors: (FLG << 8) | BD -> (max block size, header checksum expected
# for magic >= 1, or -1 when the descriptor carries a content size, then computed per frame).
_lz4_descriptors: Dict[int, tuple] = {}


def _lz4_descriptor(flg: int, bd: int) -> tuple:
    """Validate FLG/BD as ``Lz4BlockInputStream`` does; cache the result."""
    if flg & 0x03:
        raise DecompressionError(f"lz4: reserved FLG bits must be 0 (FLG 0x{flg:02x})")
    if not flg & 0x20:
        raise DecompressionError(
            "lz4: dependent block stream is unsupported (block independence must be set)"
        )
    if flg >> 6 != 1:
        raise DecompressionError(f"lz4: frame version {flg >> 6} is unsupported (FLG 0x{flg:02x})")
    if bd & 0x8F:
        raise DecompressionError(f"lz4: reserved BD bits must be 0 (BD 0x{bd:02x})")
    bsv = (bd >> 4) & 7
    if bsv < 4:
        raise DecompressionError(f"lz4: block size value {bsv} is unsupported (BD 0x{bd:02x})")
    desc = (1 << (2 * bsv + 8), -1 if flg & 0x08 else _lz4_hc(bytes((flg, bd))))
    _lz4_descriptors[(flg << 8) | bd] = desc
    return desc


def _lz4_decompress(data: Any, magic: int, max_size: int) -> bytes:
    dec = _lz4_block_decompress
    if dec is None:
        _load(LZ4)
        dec = _lz4_block_decompress
    t = type(data)
    mv = memoryview(data) if t is bytes or t is bytearray else _view(data)
    n = len(mv)
    if n < 7:
        raise DecompressionError("lz4: stream ended prematurely (incomplete frame header)")
    word, flg, bd, hc = _unpack_lz4_header(mv, 0)
    if word != _LZ4_MAGIC:
        raise DecompressionError("lz4: stream unsupported (invalid magic bytes)")
    desc = _lz4_descriptors.get((flg << 8) | bd)
    if desc is None:
        desc = _lz4_descriptor(flg, bd)
    max_block, expected = desc
    if expected < 0:  # an 8-byte content size follows BD: skipped, but in the checksum
        if n < 15:
            raise DecompressionError("lz4: stream ended prematurely (incomplete frame header)")
        hc = mv[14]
        pos = 15
        if magic != 0:
            expected = _lz4_hc(bytes(mv[4:14]))
    else:
        pos = 7
    if magic != 0 and hc != expected:
        # Magic 0 frames carry Kafka's broken checksum (KAFKA-3160): not checked, as Kafka.
        raise DecompressionError(
            "lz4: stream frame descriptor corrupted (header checksum mismatch)"
        )
    block_checksum = flg & 0x10
    parts: list = []
    total = 0
    while True:
        if n - pos < 4:
            raise DecompressionError(
                f"lz4: stream ended prematurely (no block header at byte {pos})"
            )
        word = _unpack_u32le(mv, pos)[0]
        pos += 4
        size = word & 0x7FFFFFFF
        if not size:  # end mark
            if flg & 0x04 and n - pos < 4:
                raise DecompressionError("lz4: stream ended prematurely (missing content checksum)")
            # Kafka reads the content checksum but does not verify it; later bytes are ignored.
            break
        end = pos + size
        if size > max_block:
            raise DecompressionError(
                f"lz4: block size {size} exceeded max: {max_block} (block at byte {pos - 4})"
            )
        if end > n:
            raise DecompressionError(
                f"lz4: stream ended prematurely (block at byte {pos - 4} declares {size} bytes)"
            )
        if block_checksum:
            if end + 4 > n:
                raise DecompressionError(
                    f"lz4: stream ended prematurely (block checksum of block at byte {pos - 4})"
                )
            out = _lz4_checked_block(mv, pos, end, word, bd)
            end += 4
        elif word & 0x80000000:  # stored uncompressed
            out = mv[pos:end]
        else:
            # An LZ4 sequence never yields more than 255 bytes per input byte.
            cap = 255 * size
            try:
                out = dec(mv[pos:end], uncompressed_size=cap if cap < max_block else max_block)  # type: ignore[misc]
            except Exception as exc:
                raise DecompressionError(f"lz4: corrupt block at byte {pos - 4}: {exc}") from None
        pos = end
        total += len(out)
        if total > max_size:
            raise _too_big("lz4", max_size)
        parts.append(out)
    if len(parts) == 1:
        out = parts[0]
        return out if type(out) is bytes else bytes(out)
    return b"".join(parts)


def _lz4_compress(data: Any, magic: int, level: Optional[int]) -> bytes:
    if _lz4_block_compress is None:
        _load(LZ4)
    if level is None:
        level = 9
    elif isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 17:
        raise ValueError(f"lz4 level must be 1..17, not {level!r}")
    comp = _lz4_block_compress
    if level == 9:  # Kafka's default level: the fast compressor
        kwargs: Dict[str, Any] = {"store_size": False}
    else:  # any other level: the HC compressor (lz4 clamps levels above 12)
        kwargs = {"store_size": False, "mode": "high_compression", "compression": level}
    mv = _view(data)
    n = len(mv)
    out = [
        _LZ4_MAGIC_BYTES,
        bytes((_LZ4_KAFKA_FLG, _LZ4_KAFKA_BD, _LZ4_HC_V0 if magic == 0 else _LZ4_HC_V1)),
    ]
    for i in range(0, n, _LZ4_KAFKA_BLOCK):
        chunk = mv[i : i + _LZ4_KAFKA_BLOCK]
        block = comp(chunk, **kwargs)  # type: ignore[misc]
        if len(block) >= len(chunk):  # incompressible: store it
            out.append(_pack_u32le(len(chunk) | _LZ4_STORED))
            out.append(chunk)
        else:
            out.append(_pack_u32le(len(block)))
            out.append(block)
    out.append(b"\0\0\0\0")
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# zstd
# ---------------------------------------------------------------------------------------------
# Worst-case zstd expansion: an RLE block (3-byte header + 1 byte) yields up to 128 KiB, i.e.
# 32768 output bytes per input byte.  Feeding at most (room left) >> 16 input bytes at a time
# keeps one call's output (and its internal copy) within half the room left.
_ZSTD_FEED_SHIFT = 16
_ZSTD_MIN_FEED = 128


def _zstd_dctx() -> Any:
    tls = _tls
    try:
        return tls.zd
    except AttributeError:
        tls.zd = d = _zstd.ZstdDecompressor()
        return d


def _zstd_decompress(data: Any, magic: int, max_size: int) -> bytes:
    if _zstd is None:
        _load(ZSTD)
    zerr = _zstd_error
    t = type(data)
    mv = memoryview(data) if t is bytes or t is bytearray else _view(data)
    n = len(mv)
    if n == 0:
        raise DecompressionError("zstd: empty input (no frame)")
    dctx = _zstd_dctx()
    # Fast path: the first frame declares its content size (zstd CLI, one-shot compressors).
    try:
        size = _zstd.frame_content_size(mv)
    except zerr:
        size = -1
    if size > max_size:
        raise _too_big("zstd", max_size)
    if size > 0:
        try:
            return dctx.decompress(mv, allow_extra_data=False)
        except zerr:
            pass  # concatenated frames or corrupt data: the streaming path sorts it out
    # Streaming path (Kafka's zstd-jni writer records no content size): one frame at a time,
    # with inputs small enough that one call cannot produce more than half the room left.
    parts: List[bytes] = []
    total = 0
    pos = 0
    while pos < n:
        frame_start = pos
        dobj = dctx.decompressobj()
        while True:
            if pos >= n:
                raise DecompressionError(
                    f"zstd: truncated frame (frame at byte {frame_start} is incomplete)"
                )
            feed = (max_size - total) >> _ZSTD_FEED_SHIFT
            if feed < _ZSTD_MIN_FEED:
                feed = _ZSTD_MIN_FEED
            chunk = mv[pos : pos + feed]
            try:
                out = dobj.decompress(chunk)
            except zerr as exc:
                raise DecompressionError(
                    f"zstd: corrupt frame at byte {frame_start}: {exc}"
                ) from None
            if out:
                total += len(out)
                if total > max_size:
                    raise _too_big("zstd", max_size)
                parts.append(out)
            if dobj.eof:
                pos += len(chunk) - len(dobj.unused_data)
                break
            pos += len(chunk)
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


def _zstd_compress(data: Any, magic: int, level: Optional[int]) -> bytes:
    if magic < 2:
        raise ValueError("zstd requires magic 2")
    if _zstd is None:
        _load(ZSTD)
    if level is None:
        level = 3
    elif isinstance(level, bool) or not isinstance(level, int) or not -131072 <= level <= 22:
        raise ValueError(f"zstd level must be -131072..22, not {level!r}")
    tls = _tls
    try:
        cache = tls.zc
    except AttributeError:
        cache = tls.zc = {}
    cctx = cache.get(level)
    if cctx is None:
        cctx = cache[level] = _zstd.ZstdCompressor(level=level)
    return cctx.compress(_view(data))


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------
_DECOMPRESS = {
    GZIP: _gzip_decompress,
    SNAPPY: _snappy_decompress,
    LZ4: _lz4_decompress,
    ZSTD: _zstd_decompress,
}
_COMPRESS = {
    GZIP: _gzip_compress,
    SNAPPY: _snappy_compress,
    LZ4: _lz4_compress,
    ZSTD: _zstd_compress,
}


def decompress(
    codec: int,
    data: Any,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress ``data`` (any buffer) compressed with Kafka codec ``codec``.

    ``magic`` is the batch/message format (0 disables the LZ4 header-checksum check, as Kafka).
    Raises :class:`DecompressionError` on malformed input, :class:`DecompressedSizeError` as soon
    as the output would exceed ``max_size`` bytes, :class:`UnsupportedCompressionError` for an
    unknown codec id or a codec whose library is not installed.
    """
    fn = _DECOMPRESS.get(codec)
    if fn is None or type(codec) is bool:
        if _codec_id(codec) == NONE:
            return bytes(data)
        fn = _DECOMPRESS[codec]
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, not {max_size}")
    try:
        return fn(data, magic, max_size)
    except KafkaLogError:
        raise
    except (IndexError, struct.error) as exc:  # defensive: never let these escape raw
        raise DecompressionError(f"{_NAMES[int(codec)]}: malformed input ({exc})") from None


def compress(codec: int, data: Any, *, magic: int = 2, level: Optional[int] = None) -> bytes:
    """Compress ``data`` (any buffer) as the Java client writes codec ``codec``.

    ``magic`` selects the LZ4 header checksum (0: Kafka's broken KAFKA-3160 value) and forbids
    zstd below magic 2 (``ValueError``).  ``level`` is the codec's level as Kafka configures it
    (gzip -1 or 1..9, lz4 1..17, zstd -131072..22; ignored for none and snappy), ``None`` for
    Kafka's default.  Unknown codec ids raise :class:`UnsupportedCompressionError`.
    """
    codec = _codec_id(codec)
    if isinstance(magic, bool) or not isinstance(magic, int) or magic not in (0, 1, 2):
        raise ValueError(f"magic must be 0, 1 or 2, not {magic!r}")
    if codec == NONE:
        return bytes(data)
    return _COMPRESS[codec](data, magic, level)

