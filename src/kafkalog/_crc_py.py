"""CRC-32C and CRC-32 checksums (pure-Python twin of :mod:`kafkalog._crc`).

* ``crc32c(data, value=0)``: CRC-32C (Castagnoli), the checksum of v2 record batches. Uses the
  ``crc32c`` package when it is importable, else :func:`crc32c_sw`.
* ``crc32c_sw(data, value=0)``: the same CRC from a pure-Python table (correct, slow: a test
  oracle and the last-resort fallback).
* ``crc32(data, value=0)``: CRC-32 (IEEE, zlib's), the checksum of v0/v1 (legacy) messages.
* ``HARDWARE``: whether this module's ``crc32c`` runs on a CPU instruction; always ``False``
  here (the ``crc32c`` package may, but the compiled twin is the one that reports it).

``data`` is any C-contiguous object with the buffer protocol (bytes, bytearray, memoryview,
mmap, array...), read as raw bytes; a non-buffer, or a non-contiguous buffer that is not
empty, raises :class:`TypeError`. ``value`` is a previous result to continue from, so
``crc32c(b, crc32c(a)) == crc32c(a + b)``; it is reduced modulo 2**32. Results are unsigned
32-bit ints.
"""
from __future__ import annotations

import warnings
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import Buffer

__all__ = ["HARDWARE", "crc32", "crc32c", "crc32c_sw"]

HARDWARE = False

_M32 = 0xFFFFFFFF
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected

try:
    with warnings.catch_warnings():
        # crc32c warns when it falls back to its own software implementation; still correct.
        warnings.simplefilter("ignore", RuntimeWarning)
        import crc32c as _crc32c_package
    _pkg_crc32c: Callable[..., int] | None = _crc32c_package.crc32c
except ImportError:  # pragma: no cover - crc32c is a dependency, but stay usable without it
    _pkg_crc32c = None


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def _after_buffer_error(data: object) -> bool:
    """Called when an exporter refused ``data`` with BufferError: True if ``data`` is empty
    (the CRC of no bytes, whatever the strides), a TypeError if it is a non-contiguous buffer,
    else False (re-raise)."""
    with memoryview(data) as mv:  # type: ignore[arg-type]
        if mv.nbytes == 0:
            return True
        if not mv.c_contiguous:
            raise _non_contiguous(data) from None
    return False


def _non_contiguous(data: object) -> TypeError:
    return TypeError(
        f"a C-contiguous buffer is required, not a non-contiguous {type(data).__name__}"
    )


def crc32c_sw(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value``, computed with a pure-Python table."""
    crc = (value & _M32) ^ _M32
    with memoryview(data) as mv:
        if not mv.c_contiguous and mv.nbytes:
            raise _non_contiguous(data)
        buf = data if isinstance(data, (bytes, bytearray)) else mv.tobytes()
        table = _TABLE
        for b in buf:
            crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ _M32


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value`` (the ``crc32c`` package, else tables)."""
    value &= _M32
    fast = _pkg_crc32c
    if fast is None:
        return crc32c_sw(data, value)
    try:
        return fast(data, value)
    except BufferError:
        if _after_buffer_error(data):
            return value
        raise


def crc32(data: Buffer, value: int = 0) -> int:
    """CRC-32 (IEEE 802.3, as zlib) of ``data`` continuing from ``value``."""
    value &= _M32
    try:
        return zlib.crc32(data, value) & _M32
    except BufferError:
        if _after_buffer_error(data):
            return value
        raise
