# cython: language_level=3
"""CRC-32C and CRC-32 checksums (compiled twin of :mod:`kafkalog._crc_py`).

* ``crc32c(data, value=0)``: CRC-32C (Castagnoli), the checksum of v2 record batches, on the
  CPU's CRC instruction when it has one (SSE4.2 on x86-64, the CRC32 extension on AArch64),
  else on slicing-by-8 tables; see ``_csrc/crc32c.h``.
* ``crc32c_sw(data, value=0)``: the same CRC, always from the tables (a test oracle).
* ``crc32(data, value=0)``: CRC-32 (IEEE, zlib's), the checksum of v0/v1 (legacy) messages.
* ``HARDWARE``: whether ``crc32c`` runs on the CPU instruction.

``data`` is any C-contiguous object with the buffer protocol (bytes, bytearray, memoryview,
mmap, array...), read as raw bytes; a non-buffer, or a non-contiguous buffer that is not
empty, raises :class:`TypeError`. ``value`` is a previous result to continue from, so
``crc32c(b, crc32c(a)) == crc32c(a + b)``; it is reduced modulo 2**32. Results are unsigned
32-bit ints. The GIL is released for buffers of 4096 bytes or more.
"""
from cpython.buffer cimport (
    PyBUF_INDIRECT,
    PyBuffer_IsContiguous,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdint cimport uint32_t

import zlib as _zlib

cdef extern from "crc32c.h" nogil:
    uint32_t kl_crc32c(uint32_t crc, const unsigned char *buf, size_t len)
    uint32_t kl_crc32c_sw(uint32_t crc, const unsigned char *buf, size_t len)
    int kl_crc32c_hw_available()

__all__ = ["HARDWARE", "crc32", "crc32c", "crc32c_sw"]

# Probed here, at import and under the GIL, so the header's one-time CPU probe never races.
HARDWARE = bool(kl_crc32c_hw_available())

cdef enum:
    _NOGIL_MIN = 4096  # release the GIL from this many bytes on

_zlib_crc32 = _zlib.crc32


cdef int _acquire(object data, Py_buffer *view) except -1:
    """Get a read-only view of ``data``'s bytes; TypeError unless it is C-contiguous."""
    # PyBUF_INDIRECT asks for everything (strides, suboffsets) but not writability, so any
    # exporter answers, read-only ones (bytes, read-only mmap) included; contiguity is
    # checked here rather than left to the exporter, which would raise BufferError.
    PyObject_GetBuffer(data, view, PyBUF_INDIRECT)
    if not PyBuffer_IsContiguous(view, c'C'):
        PyBuffer_Release(view)
        raise TypeError(
            f"a C-contiguous buffer is required, not a non-contiguous {type(data).__name__}"
        )
    return 0


cdef uint32_t _crc32c_of(object data, object value, bint software) except? 0:
    """CRC-32C of ``data`` from ``value``: hardware path, or the portable tables."""
    cdef uint32_t crc = <uint32_t>(value & 0xFFFFFFFF)
    cdef Py_buffer view
    cdef const unsigned char *buf
    cdef size_t n
    _acquire(data, &view)
    try:
        buf = <const unsigned char *>view.buf
        n = <size_t>view.len
        if n >= _NOGIL_MIN:
            with nogil:
                crc = kl_crc32c_sw(crc, buf, n) if software else kl_crc32c(crc, buf, n)
        else:
            crc = kl_crc32c_sw(crc, buf, n) if software else kl_crc32c(crc, buf, n)
    finally:
        PyBuffer_Release(&view)
    return crc


def crc32c(data, value=0):
    """CRC-32C of ``data`` continuing from ``value`` (hardware instruction when available)."""
    return _crc32c_of(data, value, False)


def crc32c_sw(data, value=0):
    """CRC-32C of ``data`` continuing from ``value``, always from the portable tables."""
    return _crc32c_of(data, value, True)


cdef bint _after_buffer_error(object data) except -1:
    """Called when an exporter refused ``data`` with BufferError: True if ``data`` is empty
    (the CRC of no bytes, whatever the strides), a TypeError if it is a non-contiguous buffer,
    else False (re-raise)."""
    with memoryview(data) as mv:
        if mv.nbytes == 0:
            return True
        if not mv.c_contiguous:
            raise TypeError(
                f"a C-contiguous buffer is required, not a non-contiguous {type(data).__name__}"
            ) from None
    return False


def crc32(data, value=0):
    """CRC-32 (IEEE 802.3, as zlib) of ``data`` continuing from ``value``."""
    value &= 0xFFFFFFFF
    try:
        # zlib releases the GIL itself for large buffers.
        return _zlib_crc32(data, value) & 0xFFFFFFFF
    except BufferError:
        if _after_buffer_error(data):
            return value
        raise
