# cython: language_level=3
"""Compiled twin of :mod:`kafkalog._dump_py`: the record lines of ``kafkalog dump
--deep-iteration [--print-data-log]`` for one v2 data batch, formatted straight from the records
section into one buffer (no record objects).

Only the common case is taken: the caller (``kafkalog.tools.dump``) uses it for magic-2 data batches
printed as text with the string decoders, record metadata shown and no header values.  Anything
this formatter does not do exactly as the general path - a malformed record, a sequence number
past Int.MAX - makes it return None, and the caller formats that batch the general way (which
also raises the right error).  Every varint and field length is checked against the section
before a byte is read.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject_Hash
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from ._varint cimport (
    KL_VARINT_OK,
    kl_read_uvarint32,
    kl_read_uvarint64,
    kl_unzigzag32,
    kl_unzigzag64,
)

__all__ = ["v2_record_lines", "v2_record_summary", "hll_update"]

cdef enum:
    INT32_MAX_ = 2147483647


cdef struct _Out:
    char* buf
    Py_ssize_t len
    Py_ssize_t cap


cdef int _reserve(_Out* o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef char* nb
    if extra <= o.cap - o.len:
        return 0
    cap = o.cap * 2 if o.cap else 65536
    while cap - o.len < extra:
        cap *= 2
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
    cdef uint64_t w, acc = 0
    while i + 8 <= n:
        memcpy(&w, p + i, 8)
        acc |= w
        i += 8
    while i < n:
        acc |= p[i]
        i += 1
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


cdef object _format(const uint8_t* d, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                    int64_t base_ts, bint log_append, int64_t append_ts, int64_t base_seq,
                    bytes ts_name, bint contents, int64_t last_offset, object u8, _Out* o):
    cdef Py_ssize_t pos = 0, body_end, hk_start, n
    cdef int64_t ts_delta, off_delta, klen, vlen, hcount, hklen, hvlen, offset, ts, seq
    cdef int64_t lo = last_offset
    cdef Py_ssize_t i, h, kpos = 0, vpos = 0
    cdef _Rec r
    cdef list gaps = None
    cdef bytes pre_ts = b"| offset: "
    cdef bytes mid_ts = b" " + ts_name + b": "
    cdef char* q
    for i in range(count):
        if not _next_record(d, &pos, end, &r):
            return None
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
                return None
            seq = base_seq + off_delta
            if seq > INT32_MAX_:
                return None
        if lo != -1 and (lo == INT64_MAX or offset != lo + 1):
            if gaps is None:
                gaps = []
            gaps.append((lo, offset))
        lo = offset
        if (_ascii(d + hk_start, body_end - hk_start)
                and (not contents or ((klen <= 0 or _ascii(d + kpos, klen))
                                      and (vlen <= 0 or _ascii(d + vpos, vlen))))):
            # the common line: every text ASCII, so its size is known: one reservation and
            # plain copies (the header bytes hold the key bytes, hence the bound)
            _reserve(o, 160 + PyBytes_GET_SIZE(ts_name) + (body_end - hk_start)
                     + (klen + vlen + 18 if contents else 0))
            q = o.buf + o.len
            q = _w(q, "| offset: ", 10)
            q = _wint(q, offset)
            q[0] = b' '
            q = _w(q + 1, PyBytes_AS_STRING(ts_name), PyBytes_GET_SIZE(ts_name))
            q = _w(q, ": ", 2)
            q = _wint(q, ts)
            q = _w(q, " keySize: ", 10)
            q = _wint(q, klen)
            q = _w(q, " valueSize: ", 12)
            q = _wint(q, vlen)
            q = _w(q, " sequence: ", 11)
            q = _wint(q, seq)
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
        return None
    return (PyBytes_FromStringAndSize(o.buf, o.len), lo, gaps or [])


def v2_record_lines(section, Py_ssize_t count, int64_t base_offset, int64_t base_ts,
                    append_ts, int64_t base_seq, bytes ts_name, bint contents,
                    int64_t last_offset, u8):
    """The record lines of one v2 data batch, as ``(lines, last_offset, gaps)``, or None.

    ``section`` is the batch's records section (decompressed), ``count`` its record count,
    ``append_ts`` the batch's max timestamp under LogAppendTime (else None), ``base_seq`` its
    base sequence; ``contents`` adds ``key:``/``payload:``.  ``last_offset`` is the offset of
    the record printed before (-1 for none); ``gaps`` lists each ``(previous, offset)`` pair
    that is not consecutive, and ``last_offset`` in the result is the batch's last record
    offset.  ``u8`` formats non-ASCII text (dump's ``_u8``).  None: this batch needs the
    general path.
    """
    cdef Py_buffer view
    cdef _Out o
    if count < 0:
        return None
    if count == 0:
        return (b"", last_offset, [])
    PyObject_GetBuffer(section, &view, PyBUF_SIMPLE)
    o.buf = NULL
    o.len = 0
    o.cap = 0
    try:
        if count > view.len:
            return None
        return _format(<const uint8_t*>view.buf, view.len, count, base_offset, base_ts,
                       append_ts is not None, 0 if append_ts is None else append_ts, base_seq,
                       ts_name, contents, last_offset, u8, &o)
    finally:
        PyMem_Free(o.buf)
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


def hll_update(bytearray registers, list keys, int p):
    """Add ``keys`` to the HyperLogLog ``registers`` (``2**p`` of them): register ``hash(key) >>
    (64 - p)`` keeps the largest rank (leading zeros of the remaining bits, plus one)."""
    cdef Py_ssize_t m = len(registers)
    cdef unsigned char[:] rv = registers
    cdef uint64_t x, rest, mask
    cdef Py_ssize_t j
    cdef int rho, width = 64 - p
    if p < 4 or p > 18 or m != (<Py_ssize_t>1 << p):
        raise ValueError(f"registers must hold 2**p bytes for p in [4, 18], not {m} for p={p}")
    for key in keys:
        x = <uint64_t>PyObject_Hash(key)
        j = <Py_ssize_t>(x >> width)
        rest = x & ((<uint64_t>1 << width) - 1)
        rho = 1
        mask = <uint64_t>1 << (width - 1)
        while rho <= width and not (rest & mask):
            rho += 1
            mask >>= 1
        if rho > rv[j]:
            rv[j] = <unsigned char>rho
