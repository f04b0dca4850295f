# C-level varint primitives shared by the compiled twins (cimported by _batch.pyx, _dump.pyx,
# _arrow.pyx and _arrow_encode.pyx).
#
# Zig-zag varints as Kafka's ByteUtils reads and writes them.  The readers never touch a byte at
# or beyond ``end``: every byte is checked (``p < end``) before it is read.  They report errors
# by status code instead of raising, so they can run without the GIL and each caller raises
# CorruptRecordError with the message that fits where the varint was (see _varint.pyx and
# _batch.pyx).  Leniency matches Kafka: the 5th byte of a varint (10th of a varlong) is accepted
# when its continuation bit is clear; bits beyond the integer width are dropped.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef enum:
    KL_VARINT_OK = 0
    KL_VARINT_TRUNCATED = 1      # the buffer ends inside the varint
    KL_VARINT_TOO_LONG = 2       # continuation bit set on byte 5 (varint) / 10 (varlong)
    KL_MAX_VARINT_BYTES = 5
    KL_MAX_VARLONG_BYTES = 10


cdef inline int kl_read_uvarint32(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end,
                                  uint32_t* out) noexcept nogil:
    """Raw (unsigned) 32-bit varint at buf[pos[0]]; advances pos[0] only on success."""
    cdef Py_ssize_t p = pos[0]
    cdef uint32_t b, result = 0
    cdef int shift = 0
    cdef int i
    if p < end:
        b = buf[p]
        if b < 0x80:                       # one-byte fast path
            out[0] = b
            pos[0] = p + 1
            return KL_VARINT_OK
    for i in range(KL_MAX_VARINT_BYTES):
        if p >= end:
            return KL_VARINT_TRUNCATED
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift      # unsigned: bits above 32 fall off (Kafka leniency)
        if not (b & 0x80):
            out[0] = result
            pos[0] = p
            return KL_VARINT_OK
        shift += 7
    return KL_VARINT_TOO_LONG


cdef inline int kl_read_uvarint64(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end,
                                  uint64_t* out) noexcept nogil:
    """Raw (unsigned) 64-bit varint at buf[pos[0]]; advances pos[0] only on success."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t b, result = 0
    cdef int shift = 0
    cdef int i
    if p < end:
        b = buf[p]
        if b < 0x80:
            out[0] = b
            pos[0] = p + 1
            return KL_VARINT_OK
    for i in range(KL_MAX_VARLONG_BYTES):
        if p >= end:
            return KL_VARINT_TRUNCATED
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift      # byte 10: only its low bit survives (b << 63)
        if not (b & 0x80):
            out[0] = result
            pos[0] = p
            return KL_VARINT_OK
        shift += 7
    return KL_VARINT_TOO_LONG


cdef inline int32_t kl_unzigzag32(uint32_t u) noexcept nogil:
    return <int32_t>((u >> 1) ^ (<uint32_t>0 - (u & 1)))


cdef inline int64_t kl_unzigzag64(uint64_t u) noexcept nogil:
    return <int64_t>((u >> 1) ^ (<uint64_t>0 - (u & 1)))


cdef inline uint32_t kl_zigzag32(int32_t v) noexcept nogil:
    return (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)


cdef inline uint64_t kl_zigzag64(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline int kl_size_uvarint32(uint32_t u) noexcept nogil:
    cdef int n = 1
    while u > 0x7F:
        u >>= 7
        n += 1
    return n


cdef inline int kl_size_uvarint64(uint64_t u) noexcept nogil:
    cdef int n = 1
    while u > 0x7F:
        u >>= 7
        n += 1
    return n


cdef inline Py_ssize_t kl_write_uvarint32(uint8_t* dst, uint32_t u) noexcept nogil:
    """Write ``u`` at ``dst`` (room for 5 bytes is the caller's job); returns bytes written."""
    cdef Py_ssize_t n = 0
    while u > 0x7F:
        dst[n] = <uint8_t>((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    dst[n] = <uint8_t>u
    return n + 1


cdef inline Py_ssize_t kl_write_uvarint64(uint8_t* dst, uint64_t u) noexcept nogil:
    """Write ``u`` at ``dst`` (room for 10 bytes is the caller's job); returns bytes written."""
    cdef Py_ssize_t n = 0
    while u > 0x7F:
        dst[n] = <uint8_t>((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    dst[n] = <uint8_t>u
    return n + 1


# -- signed (zig-zag) sizes and writes: what a record's fields need (the encoders' hot loop) -----
cdef inline int kl_size_varint32(int32_t v) noexcept nogil:
    cdef uint32_t u = (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline int kl_size_varint64(int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline uint8_t* kl_put_varint32(uint8_t* p, int32_t v) noexcept nogil:
    """Write zig-zag ``v`` at ``p`` (room for 5 bytes is the caller's job); the end of it."""
    cdef uint32_t u = (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)
    while u >= 0x80:
        p[0] = <uint8_t>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <uint8_t>u
    return p + 1


cdef inline uint8_t* kl_put_varint64(uint8_t* p, int64_t v) noexcept nogil:
    """Write zig-zag ``v`` at ``p`` (room for 10 bytes is the caller's job); the end of it."""
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while u >= 0x80:
        p[0] = <uint8_t>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <uint8_t>u
    return p + 1


# -- signed (zig-zag) reads with the caller's status codes -----------------------------------------
# For a decoder that reports its own codes (``_arrow``'s E_*): 0, or ``truncated`` / ``too_long``
# where the readers above return KL_VARINT_TRUNCATED / KL_VARINT_TOO_LONG; the same leniency.
cdef inline int kl_read_varint32_as(const uint8_t* d, Py_ssize_t* pp, Py_ssize_t end, int32_t* out,
                                    int truncated, int too_long) noexcept nogil:
    cdef Py_ssize_t p = pp[0]
    cdef uint32_t raw = 0
    cdef uint32_t b
    cdef int shift = 0
    if p < end and d[p] < 0x80:
        raw = d[p]
        pp[0] = p + 1
        out[0] = <int32_t>((raw >> 1) ^ (<uint32_t>0 - (raw & 1)))
        return 0
    while shift <= 28:
        if p >= end:
            return truncated
        b = d[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if not (b & 0x80):
            pp[0] = p
            out[0] = <int32_t>((raw >> 1) ^ (<uint32_t>0 - (raw & 1)))
            return 0
        shift += 7
    return too_long


cdef inline int kl_read_varint64_as(const uint8_t* d, Py_ssize_t* pp, Py_ssize_t end, int64_t* out,
                                    int truncated, int too_long) noexcept nogil:
    cdef Py_ssize_t p = pp[0]
    cdef uint64_t raw = 0
    cdef uint64_t b
    cdef int shift = 0
    if p < end and d[p] < 0x80:
        raw = d[p]
        pp[0] = p + 1
        out[0] = <int64_t>((raw >> 1) ^ (<uint64_t>0 - (raw & 1)))
        return 0
    while shift <= 63:
        if p >= end:
            return truncated
        b = d[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if not (b & 0x80):
            pp[0] = p
            out[0] = <int64_t>((raw >> 1) ^ (<uint64_t>0 - (raw & 1)))
            return 0
        shift += 7
    return too_long
