# cython: language_level=3
"""Compiled twin of :mod:`kafkalog._dump_py`: the record lines of ``kafkalog dump
--deep-iteration [--print-data-log]`` for one v2 data batch, formatted straight from the records
section into one buffer (no record objects); whole runs of plain v2 batches at once, batch lines
and CRC checks included (:func:`v2_dump_run`); and what ``kafkalog stats`` counts of a batch or
of a run of them (:func:`v2_record_summary`, :func:`v2_stats_run`).

Only the common case is taken: the caller (``kafkalog.tools.dump``) uses it for magic-2 data batches
printed as text with the string decoders, record metadata shown and no header values.  Anything
this formatter does not do exactly as the general path - a malformed record, a sequence number
past Int.MAX - makes it return None, and the caller formats that batch the general way (which
also raises the right error).  Every varint and field length is checked against the section
before a byte is read; the runs stop before any entry they do not take whole.
"""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject, PyObject_Hash
from libc.stdint cimport (
    INT64_MAX,
    INT64_MIN,
    int16_t,
    int32_t,
    int64_t,
    uint8_t,
    uint16_t,
    uint32_t,
    uint64_t,
)
from libc.string cimport memcmp, memcpy

from ._varint cimport (
    KL_VARINT_OK,
    kl_read_uvarint32,
    kl_read_uvarint64,
    kl_unzigzag32,
    kl_unzigzag64,
)

cdef extern from "crc32c.h" nogil:
    uint32_t kl_crc32c(uint32_t crc, const unsigned char *buf, size_t len)
    int kl_crc32c_hw_available()

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define KL_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #else
    #define KL_PREFETCH(p) ((void)0)
    #endif
    """
    void KL_PREFETCH(const void* p) noexcept nogil

cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030E0000
    #define KL_HASH_BYTES(p, n) Py_HashBuffer((const void *)(p), (n))
    #else
    #define KL_HASH_BYTES(p, n) _Py_HashBytes((const void *)(p), (n))
    #endif
    """
    # hash(bytes(p[:n])) without the bytes object (bytes hash through this very function)
    Py_hash_t KL_HASH_BYTES(const void* p, Py_ssize_t n) noexcept

__all__ = ["v2_dump_run", "v2_record_lines", "v2_record_summary", "v2_stats_run", "hll_update"]

# the CRC header's one-time CPU probe, here at import under the GIL (as _crc does)
kl_crc32c_hw_available()

cdef enum:
    INT32_MAX_ = 2147483647


cdef struct _Out:
    char* buf
    Py_ssize_t len
    Py_ssize_t cap
    PyObject* obj   # NULL: buf is PyMem memory; else buf is the inside of this bytearray (borrowed)


cdef int _reserve(_Out* o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef char* nb
    if extra <= o.cap - o.len:
        return 0
    cap = o.cap * 2 if o.cap else 65536
    while cap - o.len < extra:
        cap *= 2
    if o.obj != NULL:
        PyByteArray_Resize(<object>o.obj, cap)   # keeps the contents
        o.buf = PyByteArray_AS_STRING(<object>o.obj)
        o.cap = cap
        return 0
    nb = <char*>PyMem_Realloc(o.buf, cap)
    if nb == NULL:
        raise MemoryError()
    o.buf = nb
    o.cap = cap
    return 0


cdef int _put(_Out* o, const char* p, Py_ssize_t n) except -1:
    _reserve(o, n)
    memcpy(o.buf + o.len, p, n)
    o.len += n
    return 0


cdef inline int _put_lit(_Out* o, bytes s) except -1:
    return _put(o, PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s))


cdef inline bint _ascii(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint64_t w0, w1, w2, w3, acc = 0
    if n < 8:
        while i < n:
            acc |= p[i]
            i += 1
        return (acc & 0x80) == 0
    while i + 32 <= n:
        memcpy(&w0, p + i, 8)
        memcpy(&w1, p + i + 8, 8)
        memcpy(&w2, p + i + 16, 8)
        memcpy(&w3, p + i + 24, 8)
        acc |= (w0 | w1) | (w2 | w3)
        i += 32
    while i + 8 <= n:
        memcpy(&w0, p + i, 8)
        acc |= w0
        i += 8
    memcpy(&w0, p + n - 8, 8)       # the last 8 bytes (overlapping what was read)
    acc |= w0
    return (acc & <uint64_t>0x8080808080808080) == 0


cdef inline char* _w(char* q, const char* s, Py_ssize_t n) noexcept nogil:
    memcpy(q, s, n)
    return q + n


cdef inline char* _wint(char* q, int64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int i = 24
    cdef uint64_t u
    cdef bint neg = v < 0
    u = (<uint64_t>0 - <uint64_t>v) if neg else <uint64_t>v
    while True:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if neg:
        i -= 1
        tmp[i] = b'-'
    memcpy(q, tmp + i, 24 - i)
    return q + 24 - i


cdef const char* _D2 = (b"0001020304050607080910111213141516171819"
                        b"2021222324252627282930313233343536373839"
                        b"4041424344454647484950515253545556575859"
                        b"6061626364656667686970717273747576777879"
                        b"8081828384858687888990919293949596979899")


cdef inline char* _wint24(char* q, int64_t v) noexcept nogil:
    """``v`` in decimal at ``q``, two digits a step, straight to their places; returns the end
    (the name: at most 20 digits and a sign, within the 24 bytes the callers reserve)."""
    cdef uint64_t u, p10 = 10
    cdef int n = 1
    cdef char* p
    if v < 0:
        q[0] = b'-'
        q += 1
        u = <uint64_t>0 - <uint64_t>v
    else:
        u = <uint64_t>v
    while n < 20 and u >= p10:
        n += 1
        p10 *= 10
    p = q + n
    while u >= 100:
        p -= 2
        memcpy(p, _D2 + 2 * (u % 100), 2)
        u //= 100
    if u >= 10:
        memcpy(p - 2, _D2 + 2 * u, 2)
    else:
        (p - 1)[0] = <char>(48 + u)
    return q + n


cdef inline char* _wint24_2(char* q, char* t, int64_t v) noexcept nogil:
    """``_wint24`` to both ``q`` and ``t`` (digit pairs stored to each: no read back)."""
    cdef uint64_t u, p10 = 10
    cdef int n = 1
    cdef Py_ssize_t k
    if v < 0:
        q[0] = t[0] = b'-'
        q += 1
        t += 1
        u = <uint64_t>0 - <uint64_t>v
    else:
        u = <uint64_t>v
    while n < 20 and u >= p10:
        n += 1
        p10 *= 10
    k = n
    while u >= 100:
        k -= 2
        memcpy(q + k, _D2 + 2 * (u % 100), 2)
        memcpy(t + k, _D2 + 2 * (u % 100), 2)
        u //= 100
    if u >= 10:
        memcpy(q + k - 2, _D2 + 2 * u, 2)
        memcpy(t + k - 2, _D2 + 2 * u, 2)
    else:
        q[k - 1] = t[k - 1] = <char>(48 + u)
    return q + n


cdef struct _Num:
    # one number column of the record lines (consecutive offsets and timestamps mostly differ
    # by 0 or 1; sizes and sequences repeat): ``t`` is the text of the value last formatted in
    # full, ``v`` the value now and ``last`` its last digit.  A step of one that does not carry
    # changes only that digit, which is written to the output alone, so ``t`` is not stored to
    # again just before it is next copied.
    int64_t v
    int n           # length of the text; 0: none yet
    int last        # last digit of v
    char t[24]


cdef inline char* _wnum(char* q, _Num* x, int64_t v) noexcept nogil:
    """``v`` in decimal at ``q`` through ``x`` (``q`` has 24 bytes reserved); returns the end
    of the number."""
    cdef int i
    if x.n != 0:
        if v != x.v and x.last != 9 and 0 <= x.v < INT64_MAX and v == x.v + 1:
            x.last += 1
            x.v = v
        if v == x.v:
            memcpy(q, x.t, 24)
            q[x.n - 1] = <char>(48 + x.last)
            return q + x.n
    i = <int>(_wint24_2(q, x.t, v) - q)
    x.n = i
    x.v = v
    x.last = q[i - 1] - 48
    return q + i


cdef int _put_int(_Out* o, int64_t v) except -1:
    _reserve(o, 24)
    o.len = _wint(o.buf + o.len, v) - o.buf
    return 0


cdef int _put_text(_Out* o, const uint8_t* p, Py_ssize_t n, object u8) except -1:
    """Bytes as the general path prints them: as they are when ASCII, else through ``u8``
    (valid UTF-8 unchanged, malformed sequences replaced as Java's String does)."""
    cdef bytes s
    if _ascii(p, n):
        return _put(o, <const char*>p, n)
    s = u8(PyBytes_FromStringAndSize(<const char*>p, n))
    return _put_lit(o, s)


cdef inline bint _varint(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, int64_t* out) noexcept:
    cdef uint32_t raw
    if kl_read_uvarint32(d, pos, end, &raw) != KL_VARINT_OK:
        return False
    out[0] = kl_unzigzag32(raw)
    return True


cdef inline bint _varlong(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, int64_t* out) noexcept:
    cdef uint64_t raw
    if kl_read_uvarint64(d, pos, end, &raw) != KL_VARINT_OK:
        return False
    out[0] = kl_unzigzag64(raw)
    return True


cdef struct _Rec:
    int64_t ts_delta, off_delta, klen, vlen, hcount
    Py_ssize_t kpos, vpos, hk_start


cdef bint _next_record(const uint8_t* d, Py_ssize_t* ppos, Py_ssize_t end, _Rec* r) noexcept:
    """Parse the v2 record at ``ppos[0]`` (every varint and length checked against its bounds
    before a byte is read) and move past it; False when it is malformed.  A negative key or
    value length is a null: ``klen``/``vlen`` are then -1."""
    cdef Py_ssize_t pos = ppos[0], body_end
    cdef int64_t length, hklen, hvlen
    cdef Py_ssize_t h
    r.kpos = r.vpos = 0
    if pos >= end or not _varint(d, &pos, end, &length):
        return False
    if length < 1 or length > end - pos:
        return False
    body_end = pos + length
    pos += 1  # attributes (unused)
    if not _varlong(d, &pos, body_end, &r.ts_delta) or not _varint(d, &pos, body_end, &r.off_delta):
        return False
    if not _varint(d, &pos, body_end, &r.klen):
        return False
    if r.klen >= 0:
        if r.klen > body_end - pos:
            return False
        r.kpos = pos
        pos += r.klen
    else:
        r.klen = -1
    if not _varint(d, &pos, body_end, &r.vlen):
        return False
    if r.vlen >= 0:
        if r.vlen > body_end - pos:
            return False
        r.vpos = pos
        pos += r.vlen
    else:
        r.vlen = -1
    if not _varint(d, &pos, body_end, &r.hcount) or r.hcount < 0 or r.hcount > body_end - pos:
        return False
    r.hk_start = pos
    for h in range(r.hcount):
        if not _varint(d, &pos, body_end, &hklen) or hklen < 0 or hklen > body_end - pos:
            return False
        pos += hklen
        if not _varint(d, &pos, body_end, &hvlen):
            return False
        if hvlen >= 0:
            if hvlen > body_end - pos:
                return False
            pos += hvlen
    if pos != body_end:
        return False
    ppos[0] = pos
    return True


cdef struct _Lines:
    _Num off
    _Num ts
    _Num klen
    _Num vlen
    _Num seq


cdef int _format(const uint8_t* d, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                 int64_t base_ts, bint log_append, int64_t append_ts, int64_t base_seq,
                 bytes ts_name, bint contents, int64_t* plast, list gaps, object u8, _Out* o,
                 _Lines* st, const uint8_t* pf, Py_ssize_t pf_len) except -1:
    """Append the record lines of one v2 data batch (records section ``d[:end]``) to ``o``:
    1, or 0 when the batch needs the general path (then ``o``, ``plast`` and ``gaps`` hold
    whatever was added so far: the caller rolls them back).  ``plast`` is the offset of the
    record printed before (-1 before the file's first, as Kafka 4.4 starts), updated; each
    record not at ``plast[0] + 1`` adds its pair to ``gaps``.
    ``pf[:pf_len]`` (the bytes the caller reads next) is prefetched a few cache lines a
    record, so that memory is read while this batch is formatted."""
    cdef Py_ssize_t pos = 0, body_end, hk_start, n
    cdef int64_t ts_delta, off_delta, klen, vlen, hcount, hklen, hvlen, offset, ts, seq
    cdef int64_t lo = plast[0]
    cdef Py_ssize_t i, h, kpos = 0, vpos = 0
    cdef _Rec r
    cdef bytes pre_ts = b"| offset: "
    cdef bytes mid_ts = b" " + ts_name + b": "
    cdef const char* tsn = PyBytes_AS_STRING(ts_name)
    cdef Py_ssize_t tsn_len = PyBytes_GET_SIZE(ts_name)
    cdef char* q
    cdef Py_ssize_t pf_at = 0
    for i in range(count):
        if pf_at + 192 <= pf_len:
            KL_PREFETCH(pf + pf_at)
            KL_PREFETCH(pf + pf_at + 64)
            KL_PREFETCH(pf + pf_at + 128)
            pf_at += 192
        if not _next_record(d, &pos, end, &r):
            return 0
        ts_delta, off_delta, klen, vlen, hcount = r.ts_delta, r.off_delta, r.klen, r.vlen, r.hcount
        kpos, vpos, hk_start = r.kpos, r.vpos, r.hk_start
        body_end = pos  # _next_record moved past the record
        offset = <int64_t>(<uint64_t>base_offset + <uint64_t>off_delta)       # Java long wrap
        ts = append_ts if log_append else <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)
        if base_seq < 0:
            seq = -1
        else:
            # offset - base_offset as the general path computes it (unbounded ints): give the
            # wrapped cases and sequences past Int.MAX to it
            if (off_delta >= 0 and offset < base_offset) or (off_delta < 0 and offset > base_offset):
                return 0
            seq = base_seq + off_delta
            if seq > INT32_MAX_:
                return 0
        if offset != <int64_t>(<uint64_t>lo + 1):       # Java long arithmetic: MAX + 1 is MIN
            gaps.append((lo, offset))
        lo = offset
        plast[0] = lo
        if (_ascii(d + hk_start, body_end - hk_start)
                and (not contents or ((klen <= 0 or _ascii(d + kpos, klen))
                                      and (vlen <= 0 or _ascii(d + vpos, vlen))))):
            # the common line: every text ASCII, so its size is known: one reservation and
            # plain copies (the header bytes hold the key bytes, hence the bound; each number
            # writes 24 bytes of which it keeps its own)
            n = 256 + tsn_len + (body_end - hk_start) + (klen + vlen + 18 if contents else 0)
            if n > o.cap - o.len:
                _reserve(o, n)
            q = o.buf + o.len
            q = _w(q, "| offset: ", 10)
            q = _wnum(q, &st.off, offset)
            q[0] = b' '
            q = _w(q + 1, tsn, tsn_len)
            q = _w(q, ": ", 2)
            q = _wnum(q, &st.ts, ts)
            q = _w(q, " keySize: ", 10)
            q = _wnum(q, &st.klen, klen)
            q = _w(q, " valueSize: ", 12)
            q = _wnum(q, &st.vlen, vlen)
            q = _w(q, " sequence: ", 11)
            q = _wnum(q, &st.seq, seq)
            q = _w(q, " headerKeys: [", 14)
            n = hk_start
            for h in range(hcount):
                _varint(d, &n, body_end, &hklen)       # checked above
                if h:
                    q[0] = b','
                    q += 1
                q = _w(q, <const char*>(d + n), <Py_ssize_t>hklen)
                n += hklen
                _varint(d, &n, body_end, &hvlen)
                if hvlen > 0:
                    n += hvlen
            q[0] = b']'
            q += 1
            if contents:
                if klen >= 0:
                    q = _w(_w(q, " key: ", 6), <const char*>(d + kpos), <Py_ssize_t>klen)
                if vlen >= 0:
                    q = _w(_w(q, " payload: ", 10), <const char*>(d + vpos), <Py_ssize_t>vlen)
            q[0] = b'\n'
            o.len = (q + 1) - o.buf
            continue
        _put_lit(o, pre_ts)
        _put_int(o, offset)
        _put_lit(o, mid_ts)
        _put_int(o, ts)
        _put_lit(o, b" keySize: ")
        _put_int(o, klen)
        _put_lit(o, b" valueSize: ")
        _put_int(o, vlen)
        _put_lit(o, b" sequence: ")
        _put_int(o, seq)
        _put_lit(o, b" headerKeys: [")
        if hcount:
            n = hk_start
            for h in range(hcount):
                _varint(d, &n, body_end, &hklen)       # checked above
                if h:
                    _put_lit(o, b",")
                _put_text(o, d + n, <Py_ssize_t>hklen, u8)
                n += hklen
                _varint(d, &n, body_end, &hvlen)
                if hvlen > 0:
                    n += hvlen
        _put_lit(o, b"]")
        if contents:
            if klen >= 0:
                _put_lit(o, b" key: ")
                _put_text(o, d + kpos, <Py_ssize_t>klen, u8)
            if vlen >= 0:
                _put_lit(o, b" payload: ")
                _put_text(o, d + vpos, <Py_ssize_t>vlen, u8)
        _put_lit(o, b"\n")
    if pos != end:
        return 0
    return 1


def v2_record_lines(section, Py_ssize_t count, int64_t base_offset, int64_t base_ts,
                    append_ts, int64_t base_seq, bytes ts_name, bint contents,
                    int64_t last_offset, u8):
    """The record lines of one v2 data batch, as ``(lines, last_offset, gaps)``, or None.

    ``section`` is the batch's records section (decompressed), ``count`` its record count,
    ``append_ts`` the batch's max timestamp under LogAppendTime (else None), ``base_seq`` its
    base sequence; ``contents`` adds ``key:``/``payload:``.  ``last_offset`` is the offset of
    the record printed before (-1 before the file's first record: Kafka 4.4 checks that one
    against -1 too); ``gaps`` lists each ``(previous, offset)`` pair that is not consecutive
    (Java long arithmetic: Long.MAX followed by Long.MIN is consecutive), and ``last_offset``
    in the result is the batch's last record offset.  ``u8`` formats non-ASCII text (dump's
    ``_u8``: Java's replacements of malformed UTF-8).  None: this batch needs the general path.
    """
    cdef Py_buffer view
    cdef _Out o
    cdef _Lines st
    cdef list gaps = []
    cdef int64_t lo = last_offset
    if count < 0:
        return None
    if count == 0:
        return (b"", last_offset, [])
    PyObject_GetBuffer(section, &view, PyBUF_SIMPLE)
    o.buf = NULL
    o.len = 0
    o.cap = 0
    o.obj = NULL
    st.off.n = st.ts.n = st.klen.n = st.vlen.n = st.seq.n = 0
    try:
        if count > view.len:
            return None
        if not _format(<const uint8_t*>view.buf, view.len, count, base_offset, base_ts,
                       append_ts is not None, 0 if append_ts is None else append_ts, base_seq,
                       ts_name, contents, &lo, gaps, u8, &o, &st, NULL, 0):
            return None
        return (PyBytes_FromStringAndSize(o.buf, o.len), lo, gaps)
    finally:
        PyMem_Free(o.buf)
        PyBuffer_Release(&view)


# ------------------------------------------------------------------------------------------------
# kafkalog dump: runs of plain v2 data batches, batch lines and record lines, in one call
# ------------------------------------------------------------------------------------------------
cdef inline int64_t _be64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline uint32_t _be32u(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int16_t _be16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint16_t>p[0] << 8) | <uint16_t>p[1])


cdef int _batch_line(_Out* o, const uint8_t* b, Py_ssize_t pos, Py_ssize_t bsize,
                     bint valid) except -1:
    """kafka-dump-log's line for the plain v2 data batch at ``b`` (magic 2, no compression,
    not control; ``bsize`` >= 61 includes the log overhead), as dump's ``_batch_line``."""
    cdef int64_t base = _be64(b), lod = <int32_t>_be32u(b + 23), base_seq = <int32_t>_be32u(b + 53)
    cdef int16_t attrs = _be16(b + 21)
    cdef int64_t last_seq
    cdef char* q
    if base_seq == -1:
        last_seq = -1
    elif base_seq > INT32_MAX_ - lod:
        last_seq = lod - (INT32_MAX_ - base_seq) - 1
    else:
        last_seq = base_seq + lod
    _reserve(o, 640)
    q = o.buf + o.len
    q = _wint24(_w(q, "baseOffset: ", 12), base)
    q = _wint24(_w(q, " lastOffset: ", 13), <int64_t>(<uint64_t>base + <uint64_t>lod))
    q = _wint24(_w(q, " count: ", 8), <int32_t>_be32u(b + 57))
    q = _wint24(_w(q, " baseSequence: ", 15), base_seq)
    q = _wint24(_w(q, " lastSequence: ", 15), last_seq)
    q = _wint24(_w(q, " producerId: ", 13), _be64(b + 43))
    q = _wint24(_w(q, " producerEpoch: ", 16), _be16(b + 51))
    q = _wint24(_w(q, " partitionLeaderEpoch: ", 23), <int32_t>_be32u(b + 12))
    q = _w(q, " isTransactional: ", 18)
    q = _w(q, "true", 4) if attrs & 0x10 else _w(q, "false", 5)
    q = _w(q, " isControl: false deleteHorizonMs: ", 35)
    if attrs & 0x40:
        q = _w(_wint24(_w(q, "OptionalLong[", 13), _be64(b + 27)), "]", 1)
    else:
        q = _w(q, "OptionalLong.empty", 18)
    q = _wint24(_w(q, " position: ", 11), pos)
    q = _w(q, " LogAppendTime: ", 16) if attrs & 0x08 else _w(q, " CreateTime: ", 13)
    q = _wint24(q, _be64(b + 35))
    q = _wint24(_w(q, " size: ", 7), bsize)
    q = _wint24(_w(q, " magic: 2 compresscodec: none crc: ", 35), _be32u(b + 17))
    q = _w(q, " isvalid: true\n", 15) if valid else _w(q, " isvalid: false\n", 16)
    o.len = q - o.buf
    return 0


def v2_dump_run(buf, Py_ssize_t pos, Py_ssize_t end, int64_t last_offset, bint contents, u8,
                list gaps, bytearray out, Py_ssize_t limit, Py_ssize_t max_walk):
    """``kafkalog dump --deep-iteration`` (text, string decoders, record metadata, no header
    values, no seeking) of the plain v2 data batches from ``pos``: each batch's line (its CRC
    checked over the bytes, as ``isvalid``) and its record lines, written to the start of
    ``out`` (grown when it is short; what follows the text is left as it was, so one buffer
    serves every call), as ``(length of the text, pos, last_offset)``.

    It stops before ``end``, before the first entry that is not a whole uncompressed v2 data
    batch of at least the 61-byte header (a legacy entry, a compressed or control batch, a bad
    size, a truncated tail), before a batch whose records need the general path (see
    :func:`v2_record_lines`), and after the batch that brings the text to ``limit`` bytes or
    the walk to ``max_walk`` bytes; ``pos`` in the result is where it stopped (unchanged: the
    caller takes the batch there the general way).  ``last_offset`` is as in
    :func:`v2_record_lines`; each non-consecutive pair is appended to ``gaps``.
    """
    cdef Py_buffer view
    cdef _Out o
    cdef _Lines st
    cdef const uint8_t* d
    cdef const uint8_t* b
    cdef Py_ssize_t start = pos, bsize, mark, ngaps
    cdef int64_t length, count, lo = last_offset, lo_mark
    cdef int16_t attrs
    cdef bint valid
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    o.obj = <PyObject*>out
    o.buf = PyByteArray_AS_STRING(out)
    o.len = 0
    o.cap = PyByteArray_GET_SIZE(out)
    st.off.n = st.ts.n = st.klen.n = st.vlen.n = st.seq.n = 0
    try:
        if pos < 0 or end > view.len:
            raise ValueError(f"pos {pos} and end {end} must lie within the buffer "
                             f"of {view.len} bytes")
        d = <const uint8_t*>view.buf
        while pos < end - 17 and o.len < limit and pos - start < max_walk:
            b = d + pos
            length = <int32_t>_be32u(b + 8)
            if length < 49 or pos > end - 12 - length:    # under the v2 header, or cut short
                break
            bsize = <Py_ssize_t>length + 12
            if b[16] != 2:
                break
            attrs = _be16(b + 21)
            if attrs & 0x27:                              # compressed, or a control batch
                break
            count = <int32_t>_be32u(b + 57)
            if count < 0 or count > bsize - 61:
                break
            valid = _be32u(b + 17) == kl_crc32c(0, b + 21, <size_t>(bsize - 21))
            mark = o.len
            ngaps = len(gaps)
            lo_mark = lo
            _batch_line(&o, b, pos, bsize, valid)
            if count and not _format(b + 61, bsize - 61, count, _be64(b), _be64(b + 27),
                                     attrs & 0x08, _be64(b + 35), <int32_t>_be32u(b + 53),
                                     b"LogAppendTime" if attrs & 0x08 else b"CreateTime",
                                     contents, &lo, gaps, u8, &o, &st,
                                     b + bsize, min(bsize, end - pos - bsize)):
                o.len = mark
                del gaps[ngaps:]
                lo = lo_mark
                break
            pos += bsize
        return (o.len, pos, lo)
    finally:
        PyBuffer_Release(&view)


# ------------------------------------------------------------------------------------------------
# kafkalog stats: what it counts of a batch's records, without record objects
# ------------------------------------------------------------------------------------------------
cdef object _summary(const uint8_t* d, Py_ssize_t end, Py_ssize_t count, int64_t base_ts,
                     bint log_append, int64_t append_ts):
    cdef Py_ssize_t pos = 0, i
    cdef int64_t ts_delta, ts
    cdef int64_t lo = 0, hi = 0
    cdef Py_ssize_t nulls = 0, tombstones = 0
    cdef list keys = []
    cdef _Rec r
    for i in range(count):
        if not _next_record(d, &pos, end, &r):
            return None
        if r.klen >= 0:
            keys.append(PyBytes_FromStringAndSize(<const char*>(d + r.kpos), <Py_ssize_t>r.klen))
        else:
            nulls += 1
        if r.vlen < 0:
            tombstones += 1
        ts_delta = r.ts_delta
        ts = append_ts if log_append else <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)
        if i == 0 or ts < lo:
            lo = ts
        if i == 0 or ts > hi:
            hi = ts
    if pos != end:
        return None
    return (count, nulls, tombstones, lo if count else None, hi if count else None, keys)


def v2_record_summary(section, Py_ssize_t count, int64_t base_ts, append_ts):
    """What ``kafkalog stats`` counts of one v2 data batch's records, as ``(records, null keys,
    tombstones, min timestamp, max timestamp, keys)`` (``keys``: the non-null keys, as bytes;
    the timestamps None for no records), or None: the batch needs the general path (which
    also reports a damaged one).  ``section`` is the records section (decompressed),
    ``append_ts`` the batch's max timestamp under LogAppendTime (else None)."""
    cdef Py_buffer view
    if count < 0:
        return None
    if count == 0:
        return (0, 0, 0, None, None, [])
    PyObject_GetBuffer(section, &view, PyBUF_SIMPLE)
    try:
        if count > view.len:
            return None
        return _summary(<const uint8_t*>view.buf, view.len, count, base_ts,
                        append_ts is not None, 0 if append_ts is None else append_ts)
    finally:
        PyBuffer_Release(&view)


cdef inline void _hll_add(unsigned char* rv, uint64_t x, int p) noexcept nogil:
    cdef int width = 64 - p
    cdef Py_ssize_t j = <Py_ssize_t>(x >> width)
    cdef uint64_t rest = x & ((<uint64_t>1 << width) - 1)
    cdef uint64_t mask = <uint64_t>1 << (width - 1)
    cdef int rho = 1
    while rho <= width and not (rest & mask):
        rho += 1
        mask >>= 1
    if rho > rv[j]:
        rv[j] = <unsigned char>rho


cdef int _check_registers(object registers, int p) except -1:
    cdef Py_ssize_t m = len(registers)
    if p < 4 or p > 18 or m != (<Py_ssize_t>1 << p):
        raise ValueError(f"registers must hold 2**p bytes for p in [4, 18], not {m} for p={p}")
    return 0


def hll_update(bytearray registers, list keys, int p):
    """Add ``keys`` to the HyperLogLog ``registers`` (``2**p`` of them): register ``hash(key) >>
    (64 - p)`` keeps the largest rank (leading zeros of the remaining bits, plus one)."""
    _check_registers(registers, p)
    cdef unsigned char* rv = <unsigned char*>PyByteArray_AS_STRING(registers)
    for key in keys:
        _hll_add(rv, <uint64_t>PyObject_Hash(key), p)


# ------------------------------------------------------------------------------------------------
# kafkalog stats: runs of plain v2 data batches counted in one call, keys without bytes objects
# ------------------------------------------------------------------------------------------------
cdef int _add_key(const uint8_t* k, Py_ssize_t n, set exact, list cache, Py_ssize_t cmask,
                  unsigned char* rv, int p) except -1:
    """Key ``k[:n]`` into the exact set (``cache`` remembers keys already in it, by hash slot:
    no bytes object for those), or into the HyperLogLog registers when ``exact`` is None."""
    cdef uint64_t h = <uint64_t>KL_HASH_BYTES(k, n)
    cdef Py_ssize_t slot
    if exact is None:
        _hll_add(rv, h, p)
        return 0
    slot = <Py_ssize_t>(h & <uint64_t>cmask)
    c = cache[slot]
    if (type(c) is bytes and PyBytes_GET_SIZE(c) == n
            and memcmp(PyBytes_AS_STRING(c), k, <size_t>n) == 0):
        return 0
    key = PyBytes_FromStringAndSize(<const char*>k, n)
    exact.add(key)
    cache[slot] = key
    return 0


def v2_stats_run(buf, Py_ssize_t pos, Py_ssize_t end, set exact, list cache, registers, int p,
                 Py_ssize_t exact_limit, Py_ssize_t max_walk, set producers):
    """What ``kafkalog stats`` counts of the plain v2 data batches from ``pos`` (uncompressed,
    not control, at least the 61-byte header, records that :func:`v2_record_summary` reads),
    as ``(pos, batches, records, first offset, last offset, transactional batches, record
    bytes, null keys, tombstones, min timestamp, max timestamp)``: the offsets are the first
    batch's base offset and the last batch's base offset plus its last offset delta, the
    timestamps the least and greatest of the batches' own least and greatest record
    timestamps that are not negative (None for none).

    Producer ids (not negative) are added to ``producers``; the non-null keys to ``exact``
    (``cache``: a list of a power-of-two length that the caller keeps with that set, for
    keys already added), or, when ``exact`` is None, to the HyperLogLog ``registers``
    (``2**p`` bytes) as :func:`hll_update` does.  The walk stops before ``end``, before any
    other entry (which the caller takes the general way), and after the batch that brings
    ``exact`` past ``exact_limit`` keys or the walk to ``max_walk`` bytes.
    """
    cdef Py_buffer view
    cdef const uint8_t* d
    cdef const uint8_t* b
    cdef const uint8_t* sec
    cdef Py_ssize_t start = pos, bsize, send, spos, i, nkeys, cmask = 0
    cdef int64_t length, count, bo, lod, bts, mts, pid, lo = 0, hi = 0, ts, tmin = -1, tmax = -1
    cdef int64_t last = 0
    cdef int16_t attrs
    cdef Py_ssize_t batches = 0, records = 0, tx = 0, stored = 0, nulls = 0, tombs = 0, bn, bt
    cdef Py_ssize_t* kp = NULL
    cdef Py_ssize_t kcap = 0
    cdef unsigned char* rv = NULL
    cdef bint ok
    cdef _Rec r
    first = None
    if exact is None:
        _check_registers(registers, p)
        rv = <unsigned char*>PyByteArray_AS_STRING(registers)
    else:
        cmask = len(cache) - 1
        if cmask < 0 or (cmask & (cmask + 1)) != 0:
            raise ValueError(f"cache must be a list of a power-of-two length, not {cmask + 1}")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or end > view.len:
            raise ValueError(f"pos {pos} and end {end} must lie within the buffer "
                             f"of {view.len} bytes")
        d = <const uint8_t*>view.buf
        while end - pos > 17 and pos - start < max_walk:
            b = d + pos
            length = <int32_t>_be32u(b + 8)
            if length < 49 or length + 12 > end - pos:     # under the v2 header, or cut short
                break
            bsize = <Py_ssize_t>length + 12
            if b[16] != 2:
                break
            attrs = _be16(b + 21)
            if attrs & 0x27:                               # compressed, or a control batch
                break
            bo = _be64(b)
            lod = <int32_t>_be32u(b + 23)
            if (lod > 0 and bo > INT64_MAX - lod) or (lod < 0 and bo < INT64_MIN - lod):
                break                                      # the last offset is past a long
            count = <int32_t>_be32u(b + 57)
            if count < 0 or count > bsize - 61:
                break
            bts = _be64(b + 27)
            mts = _be64(b + 35)
            sec = b + 61
            send = bsize - 61
            if count > kcap:
                kcap = count if count > 2 * kcap else 2 * kcap
                PyMem_Free(kp)
                kp = <Py_ssize_t*>PyMem_Malloc(<size_t>kcap * 2 * sizeof(Py_ssize_t))
                if kp == NULL:
                    kcap = 0
                    raise MemoryError()
            # every record read before anything of the batch is counted
            spos = 0
            nkeys = bn = bt = 0
            ok = True
            for i in range(count):
                if not _next_record(sec, &spos, send, &r):
                    ok = False
                    break
                if r.klen >= 0:
                    kp[2 * nkeys] = r.kpos
                    kp[2 * nkeys + 1] = <Py_ssize_t>r.klen
                    nkeys += 1
                else:
                    bn += 1
                if r.vlen < 0:
                    bt += 1
                ts = mts if attrs & 0x08 else <int64_t>(<uint64_t>bts + <uint64_t>r.ts_delta)
                if i == 0 or ts < lo:
                    lo = ts
                if i == 0 or ts > hi:
                    hi = ts
            if not ok or (count and spos != send):
                break
            pid = _be64(b + 43)
            if pid >= 0:
                producers.add(pid)
            if first is None:
                first = bo
            last = bo + lod
            batches += 1
            if attrs & 0x10:
                tx += 1
            stored += send
            records += count
            nulls += bn
            tombs += bt
            if count:
                if lo >= 0 and (tmin < 0 or lo < tmin):
                    tmin = lo
                if hi >= 0 and hi > tmax:
                    tmax = hi
            for i in range(nkeys):
                _add_key(sec + kp[2 * i], kp[2 * i + 1], exact, cache, cmask, rv, p)
            pos += bsize
            if exact is not None and len(exact) > exact_limit:
                break
        return (pos, batches, records, first, last if batches else None, tx, stored, nulls, tombs,
                tmin if tmin >= 0 else None, tmax if tmax >= 0 else None)
    finally:
        PyMem_Free(kp)
        PyBuffer_Release(&view)
