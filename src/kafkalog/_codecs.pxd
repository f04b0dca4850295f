# The codecs shared by the compiled modules (cimported by _arrow.pyx and _batch.pyx; no module
# of its own): snappy (raw blocks and xerial framing), LZ4 in Kafka's frame format, and the
# xxh32 checksum the frame carries.  They decompress a records section (or a v0/v1 wrapper's
# value) into a GBuf (``_buffers.pxd``) without the GIL.  Anything unusual - a frame option
# they do not take, damage, a length past the limit - makes them decline (-1) and the caller
# asks ``kafkalog.compression``, so results and errors are always that module's; -2 means the
# output would pass the limit (its DecompressedSizeError, found without decoding past it).
# Every read is checked against the end of the input before it happens; writes stay within
# the output's capacity plus SLACK.  ``cdef inline``: each user compiles its own copy.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from ._buffers cimport GBuf, be32, gb_ensure_at_most, le32

# -- copies that may overshoot into SLACK ---------------------------------------------------------
cdef inline void copy8(uint8_t* dst, const uint8_t* src) noexcept nogil:
    memcpy(dst, src, 8)

cdef inline void match_copy(uint8_t* op, Py_ssize_t off, Py_ssize_t ln) noexcept nogil:
    """LZ77 copy of ``ln`` bytes from ``off`` bytes back (may overlap); may write up to 7 bytes
    past op+ln (the destination has SLACK spare bytes)."""
    cdef const uint8_t* src = op - off
    cdef Py_ssize_t i, d
    if off >= 8:
        i = 0
        while i < ln:
            copy8(op + i, src + i)
            i += 8
    else:
        # The output repeats with period ``off``: once the first ``d`` bytes (the smallest
        # multiple of ``off`` that is >= 8) are written byte by byte, the rest is copied 8 at
        # a time from ``d`` bytes back, where the source no longer overlaps the 8 written.
        d = off
        while d < 8:
            d += off
        i = 0
        while i < ln and i < d:
            op[i] = src[i]
            i += 1
        while i < ln:
            copy8(op + i, op + i - d)
            i += 8

cdef inline void lit_copy(uint8_t* op, const uint8_t* ip, Py_ssize_t ln, Py_ssize_t in_left) noexcept nogil:
    """Copy ``ln`` literal bytes; over-reads the input only when ``in_left`` allows."""
    if ln <= 16 and in_left >= 16:
        copy8(op, ip)
        copy8(op + 8, ip + 8)
    else:
        memcpy(op, ip, <size_t>ln)

# -- snappy (raw blocks and xerial framing) -------------------------------------------------------
cdef inline int snappy_len(const uint8_t* s, Py_ssize_t n, Py_ssize_t* hdr, uint64_t* out) noexcept nogil:
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef Py_ssize_t p = 0
    cdef uint8_t b
    while shift <= 28:
        if p >= n:
            return -1
        b = s[p]
        p += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            if (v >> 32) != 0:
                return -1
            hdr[0] = p
            out[0] = v
            return 0
        shift += 7
    return -1

cdef inline int snappy_block(const uint8_t* s, Py_ssize_t n, Py_ssize_t ip, uint8_t* dst, Py_ssize_t dlen) noexcept nogil:
    """Decode one raw snappy block (preamble already read: elements start at ``ip``) into
    exactly ``dlen`` bytes at ``dst`` (which has SLACK spare bytes).  0 or -1."""
    cdef Py_ssize_t op = 0
    cdef Py_ssize_t ln, off
    cdef uint8_t tag
    cdef int t, nb, k
    while ip < n:
        tag = s[ip]
        ip += 1
        t = tag & 3
        if t == 0:
            ln = tag >> 2
            if ln >= 60:
                nb = <int>ln - 59
                if nb > n - ip:
                    return -1
                ln = 0
                for k in range(nb):
                    ln |= (<Py_ssize_t>s[ip + k]) << (8 * k)
                ip += nb
            ln += 1
            if ln > n - ip or ln > dlen - op:
                return -1
            lit_copy(dst + op, s + ip, ln, n - ip)
            ip += ln
            op += ln
            continue
        if t == 1:
            if ip >= n:
                return -1
            ln = 4 + ((tag >> 2) & 7)
            off = ((<Py_ssize_t>(tag >> 5)) << 8) | s[ip]
            ip += 1
        elif t == 2:
            if 2 > n - ip:
                return -1
            ln = (tag >> 2) + 1
            off = <Py_ssize_t>s[ip] | (<Py_ssize_t>s[ip + 1] << 8)
            ip += 2
        else:
            if 4 > n - ip:
                return -1
            ln = (tag >> 2) + 1
            off = <Py_ssize_t>le32(s + ip)
            ip += 4
        if off == 0 or off > op or ln > dlen - op:
            return -1
        match_copy(dst + op, off, ln)
        op += ln
    return 0 if op == dlen else -1

cdef inline int snappy_decompress(const uint8_t* s, Py_ssize_t n, GBuf* out, int64_t limit) noexcept nogil:
    """Kafka snappy (xerial framing, or one raw block) into ``out`` (len reset).  0 ok,
    -2 the output would pass ``limit`` (DecompressedSizeError, as kafkalog.compression says),
    -1 anything unusual (the caller falls back to kafkalog.compression)."""
    cdef Py_ssize_t ip, clen, hdr
    cdef uint64_t ulen
    cdef int32_t sclen
    out.len = 0
    if n <= 0:
        return -1
    if n >= 16 and memcmp(s, b"\x82SNAPPY\x00", 8) == 0:
        if <int32_t>be32(s + 8) < 1:
            return -1  # incompatible version: the fallback raises
        ip = 16
        while ip < n:
            if 4 > n - ip:
                return -1
            sclen = <int32_t>be32(s + ip)
            if sclen <= 0 or sclen > (512 << 20):
                return -1  # concatenated streams and bad lengths: the fallback decides
            clen = sclen
            ip += 4
            if clen > n - ip:
                return -1
            if snappy_len(s + ip, clen, &hdr, &ulen) < 0:
                return -1
            if <int64_t>(out.len + ulen) > limit:
                # kafkalog.compression's answer, without decoding anything again: too big,
                # unless the declared length is impossible for the chunk (then it decides)
                return -2 if ulen <= <uint64_t>(22 * clen + 32) else -1
            if gb_ensure_at_most(out, out.len + <size_t>ulen, <size_t>limit) < 0:
                return -1
            if snappy_block(s + ip, clen, hdr, out.data + out.len, <Py_ssize_t>ulen) < 0:
                return -1
            out.len += <size_t>ulen
            ip += clen
        return 0
    if snappy_len(s, n, &hdr, &ulen) < 0:
        return -1
    if <int64_t>ulen > limit:
        return -2 if ulen <= <uint64_t>(22 * n + 32) else -1
    if gb_ensure_at_most(out, <size_t>ulen, <size_t>limit) < 0:
        return -1
    if snappy_block(s, n, hdr, out.data, <Py_ssize_t>ulen) < 0:
        return -1
    out.len = <size_t>ulen
    return 0

# -- lz4 (Kafka's frame format: independent blocks) ----------------------------------------------
cdef enum:
    XXH_P1 = 2654435761
    XXH_P2 = 2246822519
    XXH_P3 = 3266489917
    XXH_P4 = 668265263
    XXH_P5 = 374761393

cdef inline uint32_t rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))

cdef inline uint32_t xxh32(const uint8_t* p, Py_ssize_t n, uint32_t seed) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint32_t h, v1, v2, v3, v4
    if n >= 16:
        v1 = seed + <uint32_t>XXH_P1 + <uint32_t>XXH_P2
        v2 = seed + <uint32_t>XXH_P2
        v3 = seed
        v4 = seed - <uint32_t>XXH_P1
        while i + 16 <= n:
            v1 = rotl32(v1 + le32(p + i) * <uint32_t>XXH_P2, 13) * <uint32_t>XXH_P1
            v2 = rotl32(v2 + le32(p + i + 4) * <uint32_t>XXH_P2, 13) * <uint32_t>XXH_P1
            v3 = rotl32(v3 + le32(p + i + 8) * <uint32_t>XXH_P2, 13) * <uint32_t>XXH_P1
            v4 = rotl32(v4 + le32(p + i + 12) * <uint32_t>XXH_P2, 13) * <uint32_t>XXH_P1
            i += 16
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18)
    else:
        h = seed + <uint32_t>XXH_P5
    h += <uint32_t>n
    while i + 4 <= n:
        h = rotl32(h + le32(p + i) * <uint32_t>XXH_P3, 17) * <uint32_t>XXH_P4
        i += 4
    while i < n:
        h = rotl32(h + p[i] * <uint32_t>XXH_P5, 11) * <uint32_t>XXH_P1
        i += 1
    h ^= h >> 15
    h *= <uint32_t>XXH_P2
    h ^= h >> 13
    h *= <uint32_t>XXH_P3
    h ^= h >> 16
    return h

cdef inline Py_ssize_t lz4_block(const uint8_t* s, Py_ssize_t n, uint8_t* dst, Py_ssize_t cap) noexcept nogil:
    """Decode one LZ4 block into at most ``cap`` bytes at ``dst`` (SLACK spare bytes after);
    the decoded length, or -1.  With ``dst`` NULL nothing is written: the block is only
    checked and its decoded length returned.  The format's end-of-block rules hold: the last
    sequence is literals only, the last 5 bytes are literals and the last match starts at
    least 12 bytes before the end of the block."""
    cdef Py_ssize_t ip = 0
    cdef Py_ssize_t op = 0
    cdef Py_ssize_t ln, off
    cdef Py_ssize_t mstart = -1
    cdef Py_ssize_t mend = -1
    cdef uint8_t token, b
    while True:
        if ip >= n:
            return -1
        token = s[ip]
        ip += 1
        ln = token >> 4
        if ln == 15:
            while True:
                if ip >= n:
                    return -1
                b = s[ip]
                ip += 1
                ln += b
                if b != 255:
                    break
        if ln > n - ip or ln > cap - op:
            return -1
        if dst != NULL:
            lit_copy(dst + op, s + ip, ln, n - ip)
        ip += ln
        op += ln
        if ip == n:
            # the last sequence holds literals only; the end-of-block rules (LASTLITERALS,
            # MFLIMIT) apply to the last match
            if mstart >= 0 and (op - mend < 5 or op - mstart < 12):
                return -1
            return op
        if ip > n - 8:
            return -1  # as LZ4_decompress_safe: a match needs 2 + 1 + 5 bytes after literals
        off = <Py_ssize_t>s[ip] | (<Py_ssize_t>s[ip + 1] << 8)
        ip += 2
        if off == 0 or off > op:
            return -1
        ln = token & 15
        if ln == 15:
            while True:
                if ip >= n:
                    return -1
                b = s[ip]
                ip += 1
                ln += b
                if b != 255:
                    break
        ln += 4
        if ln > cap - op:
            return -1
        if dst != NULL:
            match_copy(dst + op, off, ln)
        mstart = op
        op += ln
        mend = op

cdef inline int lz4_decompress(const uint8_t* s, Py_ssize_t n, GBuf* out, int64_t limit) noexcept nogil:
    """One LZ4 frame as Kafka writes it (v2 batches: header checksum verified) into ``out``.
    0 ok, -2 the output would pass ``limit`` (found without decoding past it: a block that
    may cross the limit is first only measured), -1 anything unusual (the caller falls back
    to kafkalog.compression)."""
    cdef uint8_t flg, bd
    cdef Py_ssize_t hp, ip, maxblock, r, room
    cdef uint32_t bsz, word
    cdef bint raw, block_sum, content_sum
    out.len = 0
    if n < 7 or le32(s) != 0x184D2204:
        return -1
    flg = s[4]
    bd = s[5]
    if (flg >> 6) != 1 or (flg & 0x03) or not (flg & 0x20) or (bd & 0x8F):
        return -1
    if ((bd >> 4) & 7) < 4:
        return -1
    maxblock = (<Py_ssize_t>1) << (2 * ((bd >> 4) & 7) + 8)
    block_sum = (flg & 0x10) != 0
    content_sum = (flg & 0x04) != 0
    hp = 6 + (8 if (flg & 0x08) else 0)
    if hp + 1 > n:
        return -1
    if ((xxh32(s + 4, hp - 4, 0) >> 8) & 0xFF) != s[hp]:
        return -1
    ip = hp + 1
    while True:
        if 4 > n - ip:
            return -1
        word = le32(s + ip)
        ip += 4
        raw = (word >> 31) != 0
        bsz = word & 0x7FFFFFFF
        if bsz == 0:
            break  # the end mark, with or without the uncompressed bit (as Kafka reads it)
        if bsz > <uint32_t>maxblock or <Py_ssize_t>bsz > n - ip:
            return -1
        if block_sum:
            if <Py_ssize_t>bsz + 4 > n - ip:
                return -1
            if xxh32(s + ip, bsz, 0) != le32(s + ip + bsz):
                return -1
        if <int64_t>(out.len + maxblock) > limit:
            # this block may cross the limit: measure it first, so that a bomb is refused
            # without holding more than the limit
            r = bsz if raw else lz4_block(s + ip, bsz, NULL, maxblock)
            if r < 0:
                return -1
            if <int64_t>(out.len + r) > limit:
                return -2
            if gb_ensure_at_most(out, out.len + <size_t>r, <size_t>limit) < 0:
                return -1
            room = r  # only what was measured: the bytes may change while the GIL is free
        elif gb_ensure_at_most(out, out.len + <size_t>maxblock, <size_t>limit) < 0:
            return -1
        else:
            room = maxblock
        if raw:
            memcpy(out.data + out.len, s + ip, bsz)
            r = bsz
        else:
            r = lz4_block(s + ip, bsz, out.data + out.len, room)
            if r < 0:
                return -1
        out.len += <size_t>r
        ip += bsz + (4 if block_sum else 0)
    if content_sum:
        if 4 > n - ip:
            return -1
        ip += 4
    return 0 if ip == n else -1


cdef inline int decompress_into(int codec, const uint8_t* s, Py_ssize_t n, GBuf* out,
                                int64_t limit) noexcept nogil:
    """A records section compressed with snappy (2) or lz4 (3) into ``out``: 0, -1 (declined:
    kafkalog.compression answers) or -2 (past ``limit``), as the decoders above."""
    if codec == 2:
        return snappy_decompress(s, n, out, limit)
    if codec == 3:
        return lz4_decompress(s, n, out, limit)
    return -1


cdef inline bint codec_library_ready(object compression, int codec) except -1:
    """Whether ``compression`` (the kafkalog.compression module) has, or can load, the library
    of snappy (2) or lz4 (3): only then do the decoders here take that codec, so that a missing
    library gives the pure twin's MissingCodecError.  A loaded library is seen from its module
    global (tens of ns: the object decoder asks once per batch); otherwise ``available()``
    decides."""
    if (compression._snappy_raw_decompress if codec == 2
            else compression._lz4_block_decompress) is not None:
        return True
    return compression.available(codec)
