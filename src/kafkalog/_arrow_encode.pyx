"""Columnar encoding: Arrow buffers into v2 record batches - the compiled twin of
``_arrow_encode_py``.

Same names, signatures and results as ``_arrow_encode_py`` (read its docstring for the
contract); ``kafkalog.arrow.from_arrow`` is the public API.  What this twin adds is speed: two
passes over the columns' raw buffers without the GIL and without a Python object per row -
``plan()`` checks every row and cuts the rows into batches, ``write_records()`` writes each
batch's records straight into the output (uncompressed) or into a scratch buffer that
``kafkalog.compression`` then compresses - and the bytes are those the record builder writes.
Every access to a column buffer is checked against its length first (``bin_get``).
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from ._arrow_common import check_encode_args
from ._buffers cimport GBuf, gb_ensure, gb_free, kl_advise, put_be16, put_be32, put_be64
from ._varint cimport (
    kl_put_varint32 as wr_varint,
    kl_put_varint64 as wr_varlong,
    kl_size_varint32 as size_varint,
    kl_size_varint64 as size_varlong,
)
from .errors import InvalidOffsetError

__all__ = ["IMPLEMENTATION", "encode"]

IMPLEMENTATION = "cython"

cdef extern from "crc32c.h" nogil:
    uint32_t kl_crc32c(uint32_t crc, const unsigned char *buf, size_t len)

cdef enum:
    LOG_OVERHEAD = 12
    RECORD_BATCH_OVERHEAD = 61
    ATTRIBUTES_OFFSET = 21

# row-level errors (pass 1), raised by _raise_encode_error
cdef enum:
    X_NO_MEMORY = 27
    X_OFFSET_NULL = 100
    X_TIMESTAMP = 101
    X_OFFSET_ORDER = 102
    X_HEADER_NULL = 103
    X_HEADER_KEY_NULL = 104
    X_BUFFER = 105

cdef int64_t INT32_MAX_ = 2147483647


_compression = None


cdef object _compression_mod():
    global _compression
    if _compression is None:
        from . import compression as _c

        _compression = _c
    return _compression


# -- the rows, as Arrow buffers --------------------------------------------------------------------
cdef struct Fix:
    # a fixed-width column: validity bitmap (or NULL), values, first row
    const uint8_t* valid
    const uint8_t* data
    int64_t base
    bint present

cdef struct Bin:
    # a binary column: validity (or NULL), int32 offsets, data, first row
    const uint8_t* valid
    const int32_t* offs
    const uint8_t* data
    int64_t base
    int64_t n_offs
    int64_t valid_bits
    int64_t data_len
    bint present

cdef struct Hdr:
    const uint8_t* list_valid
    const int32_t* list_offs
    int64_t list_base
    const uint8_t* struct_valid
    int64_t struct_base
    int64_t struct_valid_bits
    Bin key
    Bin value
    bint present

cdef struct EncBatch:
    int64_t start_row
    int64_t count
    int64_t base_offset
    int64_t last_offset
    int64_t first_ts
    int64_t max_ts
    int64_t section
    int ttype

cdef struct EncErr:
    int code
    int64_t row
    int64_t a
    int64_t b

cdef inline bint bit_valid(const uint8_t* bm, int64_t i) noexcept nogil:
    return bm == NULL or ((bm[i >> 3] >> (i & 7)) & 1) != 0

cdef inline int bin_get(Bin* c, int64_t i, const uint8_t** ptr, int64_t* ln) noexcept nogil:
    """Value ``i`` of a binary column: 0 with (ptr, len) or len -1 for null; -1 on bad buffers."""
    cdef int64_t j = c.base + i
    cdef int64_t s, t
    if j < 0 or j + 1 >= c.n_offs:
        return -1
    if c.valid != NULL:
        if j >= c.valid_bits:
            return -1
        if not bit_valid(c.valid, j):
            ln[0] = -1
            return 0
    s = c.offs[j]
    t = c.offs[j + 1]
    if s < 0 or t < s or t > c.data_len:
        return -1
    ptr[0] = c.data + s
    ln[0] = t - s
    return 0

cdef inline int hdr_range(Hdr* h, int64_t i, int64_t* lo, int64_t* hi) noexcept nogil:
    """Entries [lo, hi) of row ``i``'s header list (lo == hi for a null/empty list)."""
    cdef int64_t j = h.list_base + i
    if not bit_valid(h.list_valid, j):
        lo[0] = 0
        hi[0] = 0
        return 0
    lo[0] = h.list_offs[j]
    hi[0] = h.list_offs[j + 1]
    if lo[0] < 0 or hi[0] < lo[0]:
        return -1
    return 0

cdef int headers_size(Hdr* h, int64_t i, int64_t* count, int64_t* size, EncErr* err) noexcept nogil:
    """Bytes the headers of row ``i`` take in a record (the count varint included)."""
    cdef int64_t lo, hi, e, s, kl, vl
    cdef const uint8_t* p
    if hdr_range(h, i, &lo, &hi) < 0:
        err.code = X_BUFFER
        err.row = i
        return -1
    s = size_varint(<int32_t>(hi - lo))
    for e in range(lo, hi):
        if h.struct_valid != NULL:
            if h.struct_base + e >= h.struct_valid_bits:
                err.code = X_BUFFER
                err.row = i
                return -1
            if not bit_valid(h.struct_valid, h.struct_base + e):
                err.code = X_HEADER_NULL
                err.row = i
                return -1
        if bin_get(&h.key, e, &p, &kl) < 0 or bin_get(&h.value, e, &p, &vl) < 0:
            err.code = X_BUFFER
            err.row = i
            return -1
        if kl < 0:
            err.code = X_HEADER_KEY_NULL
            err.row = i
            return -1
        s += size_varint(<int32_t>kl) + kl
        s += 1 if vl < 0 else size_varint(<int32_t>vl) + vl
    count[0] = hi - lo
    size[0] = s
    return 0

cdef inline int64_t body_size(int64_t off_delta, int64_t ts_delta, int64_t kl, int64_t vl,
                              int64_t hsize) noexcept nogil:
    cdef int64_t b = 1 + size_varlong(ts_delta) + size_varint(<int32_t>off_delta)
    b += 1 if kl < 0 else size_varint(<int32_t>kl) + kl
    b += 1 if vl < 0 else size_varint(<int32_t>vl) + vl
    return b + hsize

cdef inline int64_t record_size(int64_t body) noexcept nogil:
    return size_varint(<int32_t>body) + body

cdef int plan(int64_t n, Fix* oc, Fix* tc, Fix* yc, Bin* kc, Bin* vc, Hdr* hc,
              int64_t base_offset, int64_t batch_bytes, int64_t batch_records,
              GBuf* batches, EncErr* err) noexcept nogil:
    """Pass 1: validate rows and cut them into batches (the rules of ``_arrow_encode_py.encode``)."""
    cdef int64_t i, off, ts, kl, vl, hcount, hsize, rs
    cdef int64_t prev = 0
    cdef bint have_prev = False
    cdef int ttype
    cdef int32_t yv
    cdef const uint8_t* p
    cdef EncBatch* b = NULL
    cdef bint new_batch
    cdef int64_t nb = 0
    for i in range(n):
        if oc.present:
            if not bit_valid(oc.valid, oc.base + i):
                err.code = X_OFFSET_NULL
                err.row = i
                return -1
            memcpy(&off, oc.data + (oc.base + i) * 8, 8)
        else:
            off = <int64_t>(<uint64_t>base_offset + <uint64_t>i)
        ts = -1
        if tc.present and bit_valid(tc.valid, tc.base + i):
            memcpy(&ts, tc.data + (tc.base + i) * 8, 8)
        if ts < 0 and ts != -1:
            err.code = X_TIMESTAMP
            err.row = i
            err.a = ts
            return -1
        ttype = 0
        if yc.present and bit_valid(yc.valid, yc.base + i):
            memcpy(&yv, yc.data + (yc.base + i) * 4, 4)
            ttype = 1 if yv == 1 else 0
        kl = -1
        vl = -1
        if kc.present and bin_get(kc, i, &p, &kl) < 0:
            err.code = X_BUFFER
            err.row = i
            return -1
        if vc.present and bin_get(vc, i, &p, &vl) < 0:
            err.code = X_BUFFER
            err.row = i
            return -1
        hsize = 1
        if hc.present and headers_size(hc, i, &hcount, &hsize, err) < 0:
            return -1
        if have_prev and off <= prev:
            err.code = X_OFFSET_ORDER
            err.row = i
            err.a = off
            err.b = prev
            return -1
        new_batch = b == NULL
        if b != NULL:
            # offsets increase, so the unsigned difference is exact (a signed one can wrap)
            new_batch = (b.count >= batch_records
                         or <uint64_t>off - <uint64_t>b.base_offset > <uint64_t>INT32_MAX_
                         or ttype != b.ttype or (ttype == 1 and ts != b.first_ts))
            if not new_batch:
                rs = record_size(body_size(off - b.base_offset, ts - b.first_ts, kl, vl, hsize))
                if RECORD_BATCH_OVERHEAD + b.section + rs > batch_bytes:
                    new_batch = True
        if new_batch:
            if gb_ensure(batches, <size_t>(nb + 1) * sizeof(EncBatch)) < 0:
                err.code = X_NO_MEMORY
                return -1
            b = (<EncBatch*>batches.data) + nb
            nb += 1
            b.start_row = i
            b.count = 0
            b.base_offset = off
            b.first_ts = ts
            b.max_ts = -1
            b.section = 0
            b.ttype = ttype
        b.section += record_size(body_size(off - b.base_offset, ts - b.first_ts, kl, vl, hsize))
        b.count += 1
        b.last_offset = off
        if ts > b.max_ts:
            b.max_ts = ts
        prev = off
        have_prev = True
    batches.len = <size_t>nb
    return 0

cdef uint8_t* write_records(uint8_t* p, EncBatch* b, Fix* oc, Fix* tc, Bin* kc, Bin* vc,
                            Hdr* hc, int64_t base_offset) noexcept nogil:
    """Pass 2: the records of one batch (rows already validated by plan())."""
    cdef int64_t i, off, ts, kl, vl, hcount, hsize, lo, hi, e
    cdef int64_t hkl = 0
    cdef int64_t hvl = 0
    cdef const uint8_t* kp = NULL
    cdef const uint8_t* vp = NULL
    cdef const uint8_t* hp = NULL
    cdef EncErr dummy
    for i in range(b.start_row, b.start_row + b.count):
        if oc.present:
            memcpy(&off, oc.data + (oc.base + i) * 8, 8)
        else:
            off = <int64_t>(<uint64_t>base_offset + <uint64_t>i)
        ts = -1
        if tc.present and bit_valid(tc.valid, tc.base + i):
            memcpy(&ts, tc.data + (tc.base + i) * 8, 8)
        kl = -1
        vl = -1
        if kc.present:
            bin_get(kc, i, &kp, &kl)
        if vc.present:
            bin_get(vc, i, &vp, &vl)
        hsize = 1
        hcount = 0
        if hc.present:
            headers_size(hc, i, &hcount, &hsize, &dummy)
        p = wr_varint(p, <int32_t>body_size(off - b.base_offset, ts - b.first_ts, kl, vl, hsize))
        p[0] = 0
        p += 1
        p = wr_varlong(p, ts - b.first_ts)
        p = wr_varint(p, <int32_t>(off - b.base_offset))
        if kl < 0:
            p = wr_varint(p, -1)
        else:
            p = wr_varint(p, <int32_t>kl)
            memcpy(p, kp, <size_t>kl)
            p += kl
        if vl < 0:
            p = wr_varint(p, -1)
        else:
            p = wr_varint(p, <int32_t>vl)
            memcpy(p, vp, <size_t>vl)
            p += vl
        p = wr_varint(p, <int32_t>hcount)
        if hcount:
            hdr_range(hc, i, &lo, &hi)
            for e in range(lo, hi):
                bin_get(&hc.key, e, &hp, &hkl)
                p = wr_varint(p, <int32_t>hkl)
                memcpy(p, hp, <size_t>hkl)
                p += hkl
                bin_get(&hc.value, e, &hp, &hvl)
                if hvl < 0:
                    p = wr_varint(p, -1)
                else:
                    p = wr_varint(p, <int32_t>hvl)
                    memcpy(p, hp, <size_t>hvl)
                    p += hvl
    return p

cdef void write_header(uint8_t* p, EncBatch* b, int64_t total, int32_t ple, int16_t attrs,
                       int64_t pid, int16_t epoch, int32_t seq) noexcept nogil:
    put_be64(p, <uint64_t>b.base_offset)
    put_be32(p + 8, <uint32_t>(total - LOG_OVERHEAD))
    put_be32(p + 12, <uint32_t>ple)
    p[16] = 2
    put_be32(p + 17, 0)
    put_be16(p + 21, <uint16_t>attrs)
    put_be32(p + 23, <uint32_t>(b.last_offset - b.base_offset))
    put_be64(p + 27, <uint64_t>b.first_ts)
    put_be64(p + 35, <uint64_t>b.max_ts)
    put_be64(p + 43, <uint64_t>pid)
    put_be16(p + 51, <uint16_t>epoch)
    put_be32(p + 53, <uint32_t>seq)
    put_be32(p + 57, <uint32_t>b.count)

cdef inline int32_t inc_sequence(int32_t seq, int64_t inc) noexcept nogil:
    # Kafka's DefaultRecordBatch.incrementSequence for inc in [0, 2**31)
    if seq > INT32_MAX_ - inc:
        return <int32_t>(inc - (INT32_MAX_ - seq) - 1)
    return <int32_t>(seq + inc)


cdef object _u8(object obj, list keep):
    """A byte view of a buffer-protocol object (kept alive in ``keep``)."""
    mv = memoryview(obj)
    if mv.ndim != 1 or mv.itemsize != 1 or mv.format != "B":
        mv = mv.cast("B")
    keep.append(mv)
    return mv


cdef const uint8_t* _ptr(object mv):
    cdef const uint8_t[::1] v = mv
    if v.shape[0] == 0:
        return <const uint8_t*>b""
    return &v[0]


cdef void _fix(Fix* f, object desc, int64_t n, int width, list keep, str name) except *:
    memset(f, 0, sizeof(Fix))
    if desc is None:
        return
    validity, data, base = desc
    f.base = base
    d = _u8(data, keep)
    if base < 0 or (base + n) * width > len(d):
        raise ValueError(f"{name}: the data buffer is too short for {n} rows")
    f.data = _ptr(d)
    if validity is not None:
        v = _u8(validity, keep)
        if (base + n + 7) // 8 > len(v):
            raise ValueError(f"{name}: the validity bitmap is too short for {n} rows")
        f.valid = _ptr(v)
    f.present = True


cdef void _bin(Bin* b, object desc, int64_t n, list keep, str name) except *:
    memset(b, 0, sizeof(Bin))
    if desc is None:
        return
    validity, offsets, data, base = desc
    b.base = base
    o = _u8(offsets, keep)
    b.n_offs = len(o) // 4
    if base < 0 or base + n + 1 > b.n_offs:
        raise ValueError(f"{name}: the offsets buffer is too short for {n} values")
    b.offs = <const int32_t*>_ptr(o)
    if data is not None:
        d = _u8(data, keep)
        b.data = _ptr(d)
        b.data_len = len(d)
    else:
        b.data = <const uint8_t*>b""
        b.data_len = 0
    if validity is not None:
        v = _u8(validity, keep)
        b.valid_bits = len(v) * 8
        if base + n > b.valid_bits:
            raise ValueError(f"{name}: the validity bitmap is too short for {n} values")
        b.valid = _ptr(v)
    b.present = True


def encode(
    Py_ssize_t n,
    offset=None,
    timestamp=None,
    timestamp_type=None,
    key=None,
    value=None,
    headers=None,
    *,
    base_offset=0,
    compression=0,
    compression_level=None,
    batch_bytes=1048576,
    batch_records=2147483647,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    is_transactional=False,
    partition_leader_epoch=0,
):
    """Encode ``n`` rows given as Arrow buffers into v2 record batches; see
    ``_arrow_encode_py.encode``."""
    cdef Fix oc, tc, yc
    cdef Bin kc, vc
    cdef Hdr hc
    cdef GBuf batches
    cdef GBuf scratch
    cdef GBuf outb
    cdef EncErr err
    cdef EncBatch* b
    cdef int64_t nb, k, total, rows_before
    cdef int rc
    cdef int codec
    cdef int16_t attrs
    cdef int32_t seq
    cdef uint32_t crc
    cdef uint8_t* p
    cdef uint8_t* start
    cdef int64_t c_base_offset, c_batch_bytes, c_batch_records, c_pid
    cdef int16_t c_epoch
    cdef int32_t c_seq0, c_ple
    cdef bint c_txn
    cdef bytes result
    cdef list keep = []
    check_encode_args(n, base_offset, compression, batch_bytes, batch_records, producer_id,
                       producer_epoch, base_sequence, partition_leader_epoch)
    c_base_offset = base_offset
    c_batch_bytes = batch_bytes
    c_batch_records = batch_records
    c_pid = producer_id
    c_epoch = producer_epoch
    c_seq0 = base_sequence
    c_ple = partition_leader_epoch
    c_txn = bool(is_transactional)
    codec = compression
    _fix(&oc, offset, n, 8, keep, "offset")
    _fix(&tc, timestamp, n, 8, keep, "timestamp")
    _fix(&yc, timestamp_type, n, 4, keep, "timestampType")
    _bin(&kc, key, n, keep, "key")
    _bin(&vc, value, n, keep, "value")
    memset(&hc, 0, sizeof(Hdr))
    if headers is not None:
        list_valid, list_offsets, list_base, struct_valid, struct_base, key_desc, value_desc = headers
        lo = _u8(list_offsets, keep)
        if list_base < 0 or (list_base + n + 1) * 4 > len(lo):
            raise ValueError("headers: the list offsets buffer is too short")
        hc.list_offs = <const int32_t*>_ptr(lo)
        hc.list_base = list_base
        if list_valid is not None:
            lv = _u8(list_valid, keep)
            if (list_base + n + 7) // 8 > len(lv):
                raise ValueError("headers: the validity bitmap is too short")
            hc.list_valid = _ptr(lv)
        hc.struct_base = struct_base
        if struct_valid is not None:
            sv = _u8(struct_valid, keep)
            hc.struct_valid = _ptr(sv)
            hc.struct_valid_bits = len(sv) * 8
        # child lengths are checked per access (bin_get); give them room for any entry index
        kdesc = key_desc
        vdesc = value_desc
        _bin(&hc.key, kdesc, 0, keep, "headers.key")
        _bin(&hc.value, vdesc, 0, keep, "headers.value")
        hc.present = True
    memset(&batches, 0, sizeof(GBuf))
    memset(&scratch, 0, sizeof(GBuf))
    memset(&outb, 0, sizeof(GBuf))
    memset(&err, 0, sizeof(EncErr))
    try:
        with nogil:
            rc = plan(n, &oc, &tc, &yc, &kc, &vc, &hc, c_base_offset, c_batch_bytes,
                      c_batch_records, &batches, &err)
        if rc < 0:
            _raise_encode_error(&err)
        nb = <int64_t>batches.len
        if nb == 0:
            return b""
        attrs = <int16_t>(codec | (0x10 if c_txn else 0))
        if codec == 0:
            total = 0
            for k in range(nb):
                total += RECORD_BATCH_OVERHEAD + (<EncBatch*>batches.data)[k].section
            result = PyBytes_FromStringAndSize(NULL, total)
            p = <uint8_t*>PyBytes_AS_STRING(result)
            kl_advise(p, <size_t>total)  # not touched yet: let it fault in huge pages
            with nogil:
                rows_before = 0
                for k in range(nb):
                    b = (<EncBatch*>batches.data) + k
                    start = p
                    seq = -1 if c_seq0 == -1 else inc_sequence(c_seq0, rows_before)
                    write_header(p, b, RECORD_BATCH_OVERHEAD + b.section, c_ple,
                                 <int16_t>(attrs | (0x08 if b.ttype == 1 else 0)), c_pid, c_epoch, seq)
                    p = write_records(p + RECORD_BATCH_OVERHEAD, b, &oc, &tc, &kc, &vc, &hc, c_base_offset)
                    crc = kl_crc32c(0, start + ATTRIBUTES_OFFSET, <size_t>(p - start - ATTRIBUTES_OFFSET))
                    put_be32(start + 17, crc)
                    rows_before += b.count
            return result
        compress = _compression_mod().compress
        rows_before = 0
        for k in range(nb):
            b = (<EncBatch*>batches.data) + k
            if gb_ensure(&scratch, <size_t>b.section) < 0:
                raise MemoryError()
            with nogil:
                write_records(scratch.data, b, &oc, &tc, &kc, &vc, &hc, c_base_offset)
            section = compress(codec, PyBytes_FromStringAndSize(<char*>scratch.data, b.section),
                               magic=2, level=compression_level)
            total = RECORD_BATCH_OVERHEAD + len(section)
            if gb_ensure(&outb, outb.len + <size_t>total) < 0:
                raise MemoryError()
            start = outb.data + outb.len
            seq = -1 if c_seq0 == -1 else inc_sequence(c_seq0, rows_before)
            write_header(start, b, total, c_ple, <int16_t>(attrs | (0x08 if b.ttype == 1 else 0)),
                         c_pid, c_epoch, seq)
            memcpy(start + RECORD_BATCH_OVERHEAD, PyBytes_AS_STRING(section) if isinstance(section, bytes)
                   else PyBytes_AS_STRING(bytes(section)), <size_t>len(section))
            crc = kl_crc32c(0, start + ATTRIBUTES_OFFSET, <size_t>(total - ATTRIBUTES_OFFSET))
            put_be32(start + 17, crc)
            outb.len += <size_t>total
            rows_before += b.count
        return PyBytes_FromStringAndSize(<char*>outb.data, outb.len)
    finally:
        gb_free(&batches)
        gb_free(&scratch)
        gb_free(&outb)


cdef _raise_encode_error(EncErr* err):
    cdef int64_t i = err.row
    if err.code == X_OFFSET_NULL:
        raise ValueError(f"row {i}: offset is null")
    if err.code == X_TIMESTAMP:
        raise ValueError(f"Invalid negative timestamp {err.a}")
    if err.code == X_OFFSET_ORDER:
        raise InvalidOffsetError(
            f"Illegal offset {err.a} following previous offset {err.b} (Offsets must increase monotonically)."
        )
    if err.code == X_HEADER_NULL:
        raise ValueError(f"row {i}: a header is null (Kafka headers need a key)")
    if err.code == X_HEADER_KEY_NULL:
        raise ValueError(f"row {i}: a header key is null (Kafka rejects null header keys)")
    if err.code == X_NO_MEMORY:
        raise MemoryError()
    raise ValueError(f"row {i}: inconsistent Arrow buffers")
