"""Zig-zag varints as Kafka's ByteUtils writes and reads them (compiled twin of _varint_py).

``read_varint(buf, pos)`` and ``read_varlong(buf, pos)`` return ``(value, next_pos)``.
Leniency matches Kafka: the 5th byte of a varint (10th of a varlong) is accepted as long as its
continuation bit is clear, with bits beyond the integer width dropped; a longer encoding or a
buffer that ends mid-varint raises :class:`~kafkalog.errors.CorruptRecordError`.

The byte-level work is in ``_varint.pxd`` (shared with the other compiled modules).  Inputs
that are not a plain byte buffer (a list of ints, a non-contiguous or multi-byte-item
memoryview) are read item by item (``_read_items``), the way the pure twin reads every input,
so both twins give the same answer for every input.
"""
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

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

cdef enum _Kind:
    K_VARINT = 0
    K_VARLONG = 1
    K_UNSIGNED = 2


cdef object _fault(int code, object start, bint is_long):
    what = "varlong" if is_long else "varint"
    n = KL_MAX_VARLONG_BYTES if is_long else KL_MAX_VARINT_BYTES
    if code == KL_VARINT_TRUNCATED:
        msg = f"{what} is truncated: the buffer ends inside it"
    else:
        msg = f"{what} is too long: the most significant bit of byte {n} is set"
    return CorruptRecordError(msg, start)


cdef object _read_items(object buf, object pos, _Kind kind):
    """A varint from any sequence of ints (``buf[i]``, ``len(buf)``), with the pure twin's
    arithmetic on Python ints: the same value, error or exception for every input."""
    cdef int max_bytes = KL_MAX_VARLONG_BYTES if kind == K_VARLONG else KL_MAX_VARINT_BYTES
    cdef int i
    end = len(buf)
    p = pos
    raw = None
    if p < end:
        b = buf[p]
        if b < 0x80:
            raw = b
            p = p + 1
    if raw is None:
        shift = 0
        result = 0
        for i in range(max_bytes + 1):
            if i == max_bytes:
                raise _fault(KL_VARINT_TOO_LONG, pos, kind == K_VARLONG)
            if p >= end:
                raise _fault(KL_VARINT_TRUNCATED, pos, kind == K_VARLONG)
            b = buf[p]
            p = p + 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        raw = result
    if kind == K_VARLONG:
        raw &= 0xFFFFFFFFFFFFFFFF
    else:
        raw &= 0xFFFFFFFF
    if kind == K_UNSIGNED:
        return raw, p
    return (raw >> 1) ^ -(raw & 1), p


cdef object _read(object buf, object pos, _Kind kind):
    cdef Py_buffer view
    cdef const uint8_t* data
    cdef Py_ssize_t size, p
    cdef uint32_t u32
    cdef uint64_t u64
    cdef int code
    cdef bint have_view = False
    if not isinstance(pos, int):
        raise TypeError(f"pos must be an int, not {type(pos).__name__}")
    if pos < 0:
        raise ValueError(f"pos must be >= 0, not {pos}")
    if type(buf) is bytes:
        data = <const uint8_t*>PyBytes_AS_STRING(buf)
        size = PyBytes_GET_SIZE(buf)
    elif type(buf) is bytearray:
        data = <const uint8_t*>PyByteArray_AS_STRING(buf)
        size = PyByteArray_GET_SIZE(buf)
    else:
        try:
            PyObject_GetBuffer(buf, &view, PyBUF_FORMAT | PyBUF_ND)
        except (TypeError, BufferError):
            have_view = False
        else:
            have_view = True
        if (not have_view or view.ndim != 1 or view.itemsize != 1
                or (view.format != NULL and not (view.format[0] == b"B" and view.format[1] == 0))):
            # Not a plain byte buffer: read it item by item, as the pure twin does.
            if have_view:
                PyBuffer_Release(&view)
            return _read_items(buf, pos, kind)
        data = <const uint8_t*>view.buf
        size = view.len
    try:
        if pos >= size:
            raise _fault(KL_VARINT_TRUNCATED, pos, kind == K_VARLONG)
        p = pos
        if kind == K_VARLONG:
            code = kl_read_uvarint64(data, &p, size, &u64)
            if code != KL_VARINT_OK:
                raise _fault(code, pos, True)
            return kl_unzigzag64(u64), p
        code = kl_read_uvarint32(data, &p, size, &u32)
        if code != KL_VARINT_OK:
            raise _fault(code, pos, False)
        if kind == K_VARINT:
            return kl_unzigzag32(u32), p
        return u32, p
    finally:
        if have_view:
            PyBuffer_Release(&view)


def read_unsigned_varint(buf, pos=0):
    """Read an unsigned (non-zig-zag) 32-bit varint; returns ``(value, next_pos)``."""
    return _read(buf, pos, K_UNSIGNED)


def read_varint(buf, pos=0):
    """Read a zig-zag 32-bit varint; returns ``(value, next_pos)``."""
    return _read(buf, pos, K_VARINT)


def read_varlong(buf, pos=0):
    """Read a zig-zag 64-bit varlong; returns ``(value, next_pos)``."""
    return _read(buf, pos, K_VARLONG)


cdef int64_t _signed(object value, int bits) except? -1:
    """``value`` as a C integer, or TypeError/ValueError exactly like the pure twin."""
    cdef int overflow = 0
    cdef long long v
    if not isinstance(value, int):
        raise TypeError(f"an integer is required, not {type(value).__name__}")
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or (bits == 32 and (v < -2147483648 or v > 2147483647)):
        raise ValueError(f"{value} does not fit in a signed {bits}-bit integer")
    return v


cdef uint32_t _unsigned32(object value) except? 0xFFFFFFFF:
    cdef int overflow = 0
    cdef long long v
    if not isinstance(value, int):
        raise TypeError(f"an integer is required, not {type(value).__name__}")
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or v < 0 or v > 0xFFFFFFFF:
        raise ValueError(f"{value} does not fit in an unsigned 32-bit integer")
    return <uint32_t>v


def write_unsigned_varint(value):
    """Encode an unsigned 32-bit varint."""
    cdef uint8_t out[5]
    cdef Py_ssize_t n = kl_write_uvarint32(out, _unsigned32(value))
    return PyBytes_FromStringAndSize(<char*>out, n)


def write_varint(value):
    """Encode a signed 32-bit integer as a zig-zag varint (1-5 bytes)."""
    cdef uint8_t out[5]
    cdef Py_ssize_t n = kl_write_uvarint32(out, kl_zigzag32(<int32_t>_signed(value, 32)))
    return PyBytes_FromStringAndSize(<char*>out, n)


def write_varlong(value):
    """Encode a signed 64-bit integer as a zig-zag varlong (1-10 bytes)."""
    cdef uint8_t out[10]
    cdef Py_ssize_t n = kl_write_uvarint64(out, kl_zigzag64(_signed(value, 64)))
    return PyBytes_FromStringAndSize(<char*>out, n)


def size_of_unsigned_varint(value):
    """Bytes needed to encode ``value`` as an unsigned varint."""
    return kl_size_uvarint32(_unsigned32(value))


def size_of_varint(value):
    """Bytes needed to encode ``value`` as a zig-zag varint."""
    return kl_size_uvarint32(kl_zigzag32(<int32_t>_signed(value, 32)))


def size_of_varlong(value):
    """Bytes needed to encode ``value`` as a zig-zag varlong."""
    return kl_size_uvarint64(kl_zigzag64(_signed(value, 64)))
