"""Zig-zag varints as Kafka's ByteUtils writes and reads them (pure-Python twin of _varint).

``read_varint(buf, pos)`` and ``read_varlong(buf, pos)`` return ``(value, next_pos)``.
Leniency matches Kafka: the 5th byte of a varint (10th of a varlong) is accepted as long as its
continuation bit is clear, with bits beyond the integer width dropped; a longer encoding or a
buffer that ends mid-varint raises :class:`~kafkalog.errors.CorruptRecordError`.
"""
from __future__ import annotations

from .errors import CorruptRecordError

__all__ = [
    "read_varint",
    "read_varlong",
    "read_unsigned_varint",
    "write_varint",
    "write_varlong",
    "write_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "size_of_unsigned_varint",
]

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


# Status codes of scan_raw (mirrors KL_VARINT_TRUNCATED / KL_VARINT_TOO_LONG in _varint.pxd).
_TRUNCATED = -1
_TOO_LONG = -2


def scan_raw(buf, pos: int, end: int, max_bytes: int):
    """Raw (unsigned, unmasked) varint at ``buf[pos]``, reading no byte at or after ``end``.

    Returns ``(raw, next_pos)``, or ``(0, _TRUNCATED)`` / ``(0, _TOO_LONG)``: the caller raises
    the error that fits where the varint was.  ``raw`` may exceed the integer width (Kafka's
    leniency on the last byte); callers mask it.
    """
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    shift = 0
    result = 0
    for _ in range(max_bytes):
        if pos >= end:
            return 0, _TRUNCATED
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    return 0, _TOO_LONG


def fault_message(code: int, what: str, max_bytes: int) -> str:
    """The error message for a :func:`scan_raw` status ``code`` (``what``: "varint"/"varlong")."""
    if code == _TRUNCATED:
        return f"{what} is truncated: the buffer ends inside it"
    return f"{what} is too long: the most significant bit of byte {max_bytes} is set"


def _read_raw(buf, pos: int, max_bytes: int, what: str):
    if not isinstance(pos, int):
        raise TypeError(f"pos must be an int, not {type(pos).__name__}")
    if pos < 0:
        raise ValueError(f"pos must be >= 0, not {pos}")
    raw, nxt = scan_raw(buf, pos, len(buf), max_bytes)
    if nxt < 0:
        raise CorruptRecordError(fault_message(nxt, what, max_bytes), pos)
    return raw, nxt


def read_unsigned_varint(buf, pos: int = 0):
    """Read an unsigned (non-zig-zag) 32-bit varint; returns ``(value, next_pos)``."""
    raw, pos = _read_raw(buf, pos, 5, "varint")
    return raw & _M32, pos


def read_varint(buf, pos: int = 0):
    """Read a zig-zag 32-bit varint; returns ``(value, next_pos)``."""
    raw, pos = _read_raw(buf, pos, 5, "varint")
    raw &= _M32
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int = 0):
    """Read a zig-zag 64-bit varlong; returns ``(value, next_pos)``."""
    raw, pos = _read_raw(buf, pos, 10, "varlong")
    raw &= _M64
    return (raw >> 1) ^ -(raw & 1), pos


def _check_range(value: int, bits: int) -> None:
    if not isinstance(value, int):
        raise TypeError(f"an integer is required, not {type(value).__name__}")
    lim = 1 << (bits - 1)
    if not -lim <= value < lim:
        raise ValueError(f"{value} does not fit in a signed {bits}-bit integer")


def _write_raw(u: int) -> bytes:
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def write_unsigned_varint(value: int) -> bytes:
    """Encode an unsigned 32-bit varint."""
    if not isinstance(value, int):
        raise TypeError(f"an integer is required, not {type(value).__name__}")
    if not 0 <= value <= _M32:
        raise ValueError(f"{value} does not fit in an unsigned 32-bit integer")
    return _write_raw(value)


def write_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zig-zag varint (1-5 bytes)."""
    _check_range(value, 32)
    return _write_raw(((value << 1) ^ (value >> 31)) & _M32)


def write_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zig-zag varlong (1-10 bytes)."""
    _check_range(value, 64)
    return _write_raw(((value << 1) ^ (value >> 63)) & _M64)


def _size_raw(u: int) -> int:
    n = 1
    while u > 0x7F:
        u >>= 7
        n += 1
    return n


def size_of_unsigned_varint(value: int) -> int:
    """Bytes needed to encode ``value`` as an unsigned varint."""
    if not isinstance(value, int):
        raise TypeError(f"an integer is required, not {type(value).__name__}")
    if not 0 <= value <= _M32:
        raise ValueError(f"{value} does not fit in an unsigned 32-bit integer")
    return _size_raw(value)


def size_of_varint(value: int) -> int:
    """Bytes needed to encode ``value`` as a zig-zag varint."""
    _check_range(value, 32)
    return _size_raw(((value << 1) ^ (value >> 31)) & _M32)


def size_of_varlong(value: int) -> int:
    """Bytes needed to encode ``value`` as a zig-zag varlong."""
    _check_range(value, 64)
    return _size_raw(((value << 1) ^ (value >> 63)) & _M64)
