# cython: language_level=3
"""CRC-32C and CRC-32 checksums (compiled twin of :mod:`kafkalog._crc_py`).

* ``crc32c(data, value=0)``: CRC-32C (Castagnoli), the checksum of v2 record batches, on the
  CPU's CRC instruction when it has one (SSE4.2 on x86-64, the CRC32 extension on AArch64),
  else on slicing-by-8 tables; see ``_csrc/crc32c.h``.
* ``crc32c_sw(data, value=0)``: the same CRC, always from the tables (a test oracle).
* ``crc32(data, value=0)``: CRC-32 (IEEE, zlib's), the checksum of v0/v1 (legacy) messages.
* ``HARDWARE``: whether ``crc32c`` runs on the CPU instruction.

Kernels (private, for tests and benches): ``_paths()`` names the CRC-32C kernels this CPU
runs, slowest first (``"table"``, then ``"sse4.2"`` or ``"armv8-crc"``, then on x86-64 the
folding kernels ``"pclmul"``, ``"vpclmul256"``, ``"vpclmul512"``); ``_KERNEL`` is the one
``crc32c`` uses (the last of them); ``_crc32c_path(name, data, crc=0)`` runs a named one, and
``_FOLD_MIN`` is the length from which the folding kernels fold (shorter buffers take the
crc32 instruction).

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
    int kl_crc32c_hw_available()
    int kl_crc32c_kernel()
    int kl_crc32c_kernel_supported(int k)
    const char *kl_crc32c_kernel_name(int k)
    uint32_t kl_crc32c_kernel_run(int k, uint32_t crc, const unsigned char *buf, size_t len)
    enum:
        KL_CRC32C_KERNELS
        KL_CRC32C_FOLD_MIN


__all__ = ["HARDWARE", "crc32", "crc32c", "crc32c_sw"]

# Probed here, at import and under the GIL, so the header's one-time CPU probe never races.
HARDWARE = bool(kl_crc32c_hw_available())

_KERNELS = {
    kl_crc32c_kernel_name(k).decode(): k
    for k in range(KL_CRC32C_KERNELS)
    if kl_crc32c_kernel_supported(k)
}
_KERNEL = kl_crc32c_kernel_name(kl_crc32c_kernel()).decode()
_FOLD_MIN = KL_CRC32C_FOLD_MIN  # 0 where no folding kernel is compiled in

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


cdef uint32_t _crc32c_of(object data, object value, int kernel) except? 0:
    """CRC-32C of ``data`` from ``value`` on ``kernel`` (-1: the best one this CPU runs)."""
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
                if kernel < 0:
                    crc = kl_crc32c(crc, buf, n)
                else:
                    crc = kl_crc32c_kernel_run(kernel, crc, buf, n)
        elif kernel < 0:
            crc = kl_crc32c(crc, buf, n)
        else:
            crc = kl_crc32c_kernel_run(kernel, crc, buf, n)
    finally:
        PyBuffer_Release(&view)
    return crc


def crc32c(data, value=0):
    """CRC-32C of ``data`` continuing from ``value`` (hardware instruction when available)."""
    return _crc32c_of(data, value, -1)


def crc32c_sw(data, value=0):
    """CRC-32C of ``data`` continuing from ``value``, always from the portable tables."""
    return _crc32c_of(data, value, 0)


def _paths():
    """Names of the CRC-32C kernels this CPU runs, slowest first (the last is ``_KERNEL``)."""
    return tuple(_KERNELS)


def _crc32c_path(name, data, crc=0):
    """CRC-32C of ``data`` continuing from ``crc`` on the kernel called ``name`` (see
    :func:`_paths`); ValueError for a kernel this CPU does not run."""
    try:
        kernel = _KERNELS[name]
    except (KeyError, TypeError):
        raise ValueError(f"no CRC-32C kernel {name!r} on this CPU; it runs {_paths()}") from None
    return _crc32c_of(data, crc, kernel)


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
