"""Record batches, magic v2 (Kafka's DefaultRecordBatch / DefaultRecord), and the walk over a
buffer of log entries (MemoryRecords) - the compiled twin of ``_batch_py``.

Layout of a v2 batch (61-byte header, big-endian; see ``_format``)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2)
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    baseSequence int32 | recordsCount int32 | records (maybe compressed)

and of a record (varints zig-zag encoded)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value
    headersCount varint | [headerKeyLength varint | headerKey | headerValueLength varint | value]*

Safety: the input is held through one ``Py_buffer`` (no copy) and every read goes through a
bounds check made *before* the read: batch headers are read only once ``position + 61`` and the
batch's declared size are known to be inside the buffer, varints are read byte by byte against
an end (``_varint.pxd``), and every key/value/header length is compared with the bytes left in
its record before anything is allocated or copied.  Record fields are read within the record's
declared length.  Errors are the pure twin's, with the same messages.

Speed: a batch's records are decoded in one C loop into a list.  ``Record`` keeps its five
fields as object slots published through ``T_OBJECT_EX`` member descriptors (the descriptors
``__slots__`` makes), so ``record.key`` in a Python loop runs CPython's specialised slot load.
The builder writes records straight into a growing C buffer.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_SIZE, PyList_New
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_AsEncodedString, PyUnicode_AsUTF8AndSize
from libc.stdint cimport (
    INT32_MAX, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
    uint32_t, uint64_t,
)
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

# big-endian fixed-width fields (callers have checked the bytes are there), decompression blocks
from ._buffers cimport (
    GBuf,
    gb_ensure_at_most,
    gb_free,
    be16 as _be16,
    be32 as _be32,
    be64 as _be64,
    put_be16 as _put16,
    put_be32 as _put32,
    put_be64 as _put64,
)
from ._codecs cimport codec_library_ready, decompress_into
from ._legacy cimport LegacyRecordsBuilder as _LegacyBuilder, make_legacy_batch
from ._varint cimport (
    KL_VARINT_OK,
    KL_VARINT_TRUNCATED,
    kl_read_uvarint32,
    kl_read_uvarint64,
    kl_size_uvarint32,
    kl_size_uvarint64,
    kl_unzigzag32,
    kl_unzigzag64,
    kl_write_uvarint32,
    kl_write_uvarint64,
    kl_zigzag32,
    kl_zigzag64,
)

import time as _time

from . import _records_common
from ._format import (
    COMPRESSION_TYPES,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    TIMESTAMP_TYPES,
    CompressionType,
    TimestampType,
)
from .errors import CorruptRecordError, InvalidOffsetError, RecordTooLargeError

__all__ = [
    "Record",
    "RecordBatch",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "increment_sequence",
    "encode_record_body",
    "record_size",
    "record_size_upper_bound",
    "walk_frames",
]

cdef extern from "crc32c.h" nogil:
    uint32_t kl_crc32c(uint32_t crc, const unsigned char *buf, size_t len)

# Raw C-API entry points: they return a new reference (NULL with an exception set on error),
# which the decoder stores straight into a Record slot.
cdef extern from "Python.h":
    PyObject* _new_long "PyLong_FromLongLong" (long long v) except NULL
    PyObject* _new_bytes "PyBytes_FromStringAndSize" (const char* s, Py_ssize_t n) except NULL
    PyObject* _new_str "PyUnicode_DecodeUTF8" (const char* s, Py_ssize_t n, const char* errors) except NULL
    PyObject* _new_tuple "PyTuple_New" (Py_ssize_t n) except NULL
    void _tuple_set "PyTuple_SET_ITEM" (PyObject* t, Py_ssize_t i, PyObject* o)
    void _list_set "PyList_SET_ITEM" (PyObject* l, Py_ssize_t i, PyObject* o)

# -- wire constants (the numbers of _format, checked by the tests) --------------------------
cdef enum:
    LOG_OVERHEAD = 12
    HEADER_SIZE_UP_TO_MAGIC = 17
    RECORD_OVERHEAD_V0 = 14
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    RECORD_BATCH_OVERHEAD = 61
    COMPRESSION_CODEC_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_FLAG_MASK = 0x10
    CONTROL_FLAG_MASK = 0x20
    DELETE_HORIZON_FLAG_MASK = 0x40
    MIN_RECORD_SIZE = 7          # length varint + attributes + 5 one-byte varints
    _KEY_CACHE = 8               # distinct header keys decoded once per batch
    CRC_NOGIL_THRESHOLD = 4096   # release the GIL around CRCs of at least this many bytes

cdef object _COMPRESSION_TYPES = COMPRESSION_TYPES
cdef object _TIMESTAMP_TYPES = TIMESTAMP_TYPES
cdef object _CREATE_TIME = TimestampType.CREATE_TIME
cdef object _LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
cdef object _NO_TIMESTAMP_TYPE = TimestampType.NO_TIMESTAMP_TYPE
cdef tuple _NO_HEADERS = ()


cdef inline int64_t _add64(int64_t a, int64_t b) noexcept nogil:
    """a + b with Java's long wrap-around (no signed-overflow UB)."""
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef uint32_t _crc32c(const uint8_t* p, Py_ssize_t n) noexcept:
    cdef uint32_t c
    if n >= CRC_NOGIL_THRESHOLD:
        with nogil:
            c = kl_crc32c(0, p, <size_t>n)
        return c
    return kl_crc32c(0, p, <size_t>n)


# -- lazily imported collaborators --------------------------------------------------------------
cdef object _compression = None


cdef object _compression_mod():
    global _compression
    if _compression is None:
        from . import compression
        _compression = compression
    return _compression


# -- snappy/lz4 records sections, decoded by the compiled decoders of _codecs.pxd -----------------
# A decompressed section lives only while its records are made; the block it was written into is
# kept for the next batch's (``_spare``), so that a loop over compressed batches reuses mapped
# pages instead of faulting fresh ones in per batch.  Taken and given back with the GIL held,
# so a second thread finds no spare and uses a block of its own.
cdef enum:
    SECTION_FIRST_BLOCK = 65536          # a section's first block (grown as it needs)
    SECTION_SPARE_MAX = 64 * 1024 * 1024  # larger blocks are freed, not kept

cdef GBuf _spare


cdef inline void _spare_take(GBuf* g) noexcept:
    global _spare
    g[0] = _spare
    memset(&_spare, 0, sizeof(GBuf))


cdef inline void _spare_give(GBuf* g) noexcept:
    global _spare
    if _spare.data == NULL and g.cap <= SECTION_SPARE_MAX:
        _spare = g[0]
        _spare.len = 0
    else:
        gb_free(g)


# ==============================================================================================
# Record
# ==============================================================================================
cdef enum:
    F_OFFSET = 0
    F_TIMESTAMP = 1
    F_KEY = 2
    F_VALUE = 3
    F_HEADERS = 4
    N_FIELDS = 5


@cython.final
@cython.freelist(1024)
@cython.no_gc
cdef class Record:
    """One record: ``offset``, ``timestamp`` (ms), ``key``, ``value`` (bytes or None) and
    ``headers`` (a tuple of ``(str, bytes | None)``)."""

    # Five owned references, read and written as one array, KL_RF(record)[F_...] (the fields
    # are contiguous: checked at import).  Published as T_OBJECT_EX member descriptors at
    # import (see _install_record_members), so Python code reads and writes them exactly like
    # the pure twin's __slots__, at the same speed.  There is no __dealloc__: Cython's own
    # deallocator clears object fields, where a __dealloc__ is wrapped in a fetch and restore
    # of the error state for every record (~5 % of an object decode, perf).  Records are not
    # tracked by the cyclic GC (decoded fields are ints, bytes, str and tuples of them, which
    # cannot form cycles); a cycle made by assigning a record into its own field would leak.
    cdef object _f0, _f1, _f2, _f3, _f4

    def __init__(self, offset, timestamp, key, value, headers=_NO_HEADERS):
        _set_field(self, F_OFFSET, offset)
        _set_field(self, F_TIMESTAMP, timestamp)
        _set_field(self, F_KEY, key)
        _set_field(self, F_VALUE, value)
        _set_field(self, F_HEADERS, headers)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record o = <Record>other
        return (
            _get_field(self, F_OFFSET) == _get_field(o, F_OFFSET)
            and _get_field(self, F_TIMESTAMP) == _get_field(o, F_TIMESTAMP)
            and _get_field(self, F_KEY) == _get_field(o, F_KEY)
            and _get_field(self, F_VALUE) == _get_field(o, F_VALUE)
            and tuple(_get_field(self, F_HEADERS)) == tuple(_get_field(o, F_HEADERS))
        )

    def __ne__(self, other):
        eq = self.__eq__(other)
        if eq is NotImplemented:
            return NotImplemented
        return not eq

    __hash__ = None

    def __reduce__(self):
        return (Record, (_get_field(self, F_OFFSET), _get_field(self, F_TIMESTAMP),
                         _get_field(self, F_KEY), _get_field(self, F_VALUE),
                         _get_field(self, F_HEADERS)))

    def __repr__(self):
        return (
            f"Record(offset={_get_field(self, F_OFFSET)}, "
            f"timestamp={_get_field(self, F_TIMESTAMP)}, key={_get_field(self, F_KEY)!r}, "
            f"value={_get_field(self, F_VALUE)!r}, headers={_get_field(self, F_HEADERS)!r})"
        )


_records_common.register_record_class(Record)


cdef object _FIELD_NAMES = ("offset", "timestamp", "key", "value", "headers")


cdef inline object _get_field(Record r, int i):
    cdef PyObject* p = KL_RF(r)[i]
    if p is NULL:   # deleted (del record.key), as an empty __slots__ slot
        raise AttributeError(f"'Record' object has no attribute '{_FIELD_NAMES[i]}'")
    return <object>p


cdef inline void _set_field(Record r, int i, object v) noexcept:
    Py_INCREF(v)
    kl_rf_put(r, i, <PyObject*>v)


cdef extern from *:
    """
    /* a Record's five object fields as an array (contiguous: kl_rf_contiguous, at import) */
    #define KL_RF(o) (&((PyObject **)&((o)->_f0))[0])
    #define kl_rf_put(o, i, v) do { PyObject **kl_f_ = KL_RF(o); PyObject *kl_old_ = kl_f_[(i)]; \
        kl_f_[(i)] = (v); Py_XDECREF(kl_old_); } while (0)
    #define kl_rf_contiguous(o) ((char *)&(o)->_f4 - (char *)&(o)->_f0 == 4 * (Py_ssize_t)sizeof(PyObject *) \
        && (char *)&(o)->_f1 - (char *)&(o)->_f0 == (Py_ssize_t)sizeof(PyObject *) \
        && (char *)&(o)->_f2 - (char *)&(o)->_f0 == 2 * (Py_ssize_t)sizeof(PyObject *) \
        && (char *)&(o)->_f3 - (char *)&(o)->_f0 == 3 * (Py_ssize_t)sizeof(PyObject *))
    """
    PyObject** KL_RF(Record o)
    void kl_rf_put(Record o, int i, PyObject* v)   # steals v; releases what the field held
    bint kl_rf_contiguous(Record o)


cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030C0000
    #  define KL_T_OBJECT_EX Py_T_OBJECT_EX
    #else
    #  include <structmember.h>
    #  define KL_T_OBJECT_EX T_OBJECT_EX
    #endif
    static PyMemberDef kl_record_members[6];
    #define KL_RECORD_FIELD_OFFSET(o, i) ((Py_ssize_t)((char *)&(KL_RF(o)[(i)]) - (char *)(o)))
    static int kl_install_members(PyTypeObject *tp, const Py_ssize_t *offsets,
                                  const char *const *names, const char *const *docs, int n) {
        int i;
        for (i = 0; i < n; i++) {
            PyObject *d;
            kl_record_members[i].name = names[i];
            kl_record_members[i].type = KL_T_OBJECT_EX;
            kl_record_members[i].offset = offsets[i];
            kl_record_members[i].flags = 0;
            kl_record_members[i].doc = docs[i];
            d = PyDescr_NewMember(tp, &kl_record_members[i]);
            if (d == NULL) return -1;
            if (PyDict_SetItemString(tp->tp_dict, names[i], d) < 0) { Py_DECREF(d); return -1; }
            Py_DECREF(d);
        }
        PyType_Modified(tp);
        return 0;
    }
    """
    Py_ssize_t KL_RECORD_FIELD_OFFSET(Record o, int i)
    int kl_install_members(PyTypeObject* tp, const Py_ssize_t* offsets,
                           const char* const* names, const char* const* docs, int n) except -1


cdef void _install_record_members() except *:
    cdef Record probe = Record.__new__(Record)
    if not kl_rf_contiguous(probe):
        raise ImportError("kafkalog._batch: the Record fields are not laid out as one array")
    cdef Py_ssize_t offsets[5]
    cdef const char* names[5]
    cdef const char* docs[5]
    cdef int i
    names[0] = "offset"
    names[1] = "timestamp"
    names[2] = "key"
    names[3] = "value"
    names[4] = "headers"
    docs[0] = "The record's offset (int)."
    docs[1] = "The record's timestamp in ms (int; the batch's max timestamp for LogAppendTime)."
    docs[2] = "The key (bytes), or None."
    docs[3] = "The value (bytes), or None for a tombstone."
    docs[4] = "The headers: a tuple of (str, bytes | None)."
    for i in range(N_FIELDS):
        offsets[i] = KL_RECORD_FIELD_OFFSET(probe, i)
    kl_install_members(<PyTypeObject*>Record, offsets, names, docs, N_FIELDS)


_install_record_members()


# ==============================================================================================
# The input buffer
# ==============================================================================================
@cython.final
@cython.no_gc  # never in a cycle; tracked, GC could clear `mv` while `view` still exports it
cdef class _Source:
    """One ``Py_buffer`` on the caller's object, held for as long as any batch needs it."""
    cdef object mv
    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t* ptr
    cdef Py_ssize_t size

    def __dealloc__(self):
        if self.held:
            self.held = False
            PyBuffer_Release(&self.view)


cdef _Source _source(object buffer):
    cdef _Source s = _Source.__new__(_Source)
    mv = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if not mv.c_contiguous:
        raise TypeError(
            f"a C-contiguous buffer is required, not a non-contiguous {type(buffer).__name__}"
        )
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    PyObject_GetBuffer(mv, &s.view, PyBUF_SIMPLE)
    s.held = True
    s.mv = mv
    s.ptr = <const uint8_t*>s.view.buf
    s.size = s.view.len
    return s


cdef inline object _corrupt(msg, position, offset=None):
    return CorruptRecordError(msg, position, offset)


# ==============================================================================================
# Records of one batch: one C loop into a list
# ==============================================================================================
cdef object _structure(int code, bint is_long, Py_ssize_t where, int64_t base_offset):
    what = "varlong" if is_long else "varint"
    n = 10 if is_long else 5
    if code == KL_VARINT_TRUNCATED:
        msg = f"{what} is truncated: the buffer ends inside it"
    else:
        msg = f"{what} is too long: the most significant bit of byte {n} is set"
    return _corrupt("Found invalid record structure: " + msg, where, base_offset)


cdef inline int32_t _rd_varint(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t lim,
                               Py_ssize_t where, int64_t base_offset) except? -1:
    cdef uint32_t u
    cdef int code = kl_read_uvarint32(d, pos, lim, &u)
    if code != KL_VARINT_OK:
        raise _structure(code, False, where, base_offset)
    return kl_unzigzag32(u)


cdef inline int64_t _rd_varlong(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t lim,
                                Py_ssize_t where, int64_t base_offset) except? -1:
    cdef uint64_t u
    cdef int code = kl_read_uvarint64(d, pos, lim, &u)
    if code != KL_VARINT_OK:
        raise _structure(code, True, where, base_offset)
    return kl_unzigzag64(u)


cdef object _decode_records(const uint8_t* d, Py_ssize_t end, Py_ssize_t count,
                            int64_t base_offset, int64_t base_ts, bint log_append,
                            int64_t max_ts, Py_ssize_t where):
    """Decode exactly ``count`` records from ``d[0:end]`` (a whole records section).

    The list is allocated for ``min(count, end // 7)`` records: a record takes at least 7
    bytes, so a larger count fails before the list is full, and nothing is ever allocated in
    proportion to a count that the bytes cannot back.
    """
    cdef Py_ssize_t cap = count if count <= end // MIN_RECORD_SIZE else end // MIN_RECORD_SIZE
    cdef list out = PyList_New(cap)
    cdef object shared_obj = max_ts if log_append else None
    cdef PyObject* shared_ts = <PyObject*>shared_obj
    # Header keys repeat from record to record: the first _KEY_CACHE distinct ones of the batch
    # are decoded once and the (immutable) str shared.
    cdef Py_ssize_t kc_off[_KEY_CACHE]
    cdef Py_ssize_t kc_len[_KEY_CACHE]
    cdef PyObject* kc_obj[_KEY_CACHE]
    cdef int kc_n = 0, j
    try:
        return _decode_loop(d, end, count, base_offset, base_ts, log_append, shared_ts, where,
                            out, cap, kc_off, kc_len, kc_obj, &kc_n)
    finally:
        for j in range(kc_n):
            Py_XDECREF(kc_obj[j])


cdef object _decode_loop(const uint8_t* d, Py_ssize_t end, Py_ssize_t count,
                         int64_t base_offset, int64_t base_ts, bint log_append,
                         PyObject* shared_ts, Py_ssize_t where, list out, Py_ssize_t cap,
                         Py_ssize_t* kc_off, Py_ssize_t* kc_len, PyObject** kc_obj, int* kc_n):
    cdef Py_ssize_t pos = 0, i = 0, h, start, body_end
    cdef int32_t length, off_delta, klen, vlen, hcount, hklen, hvlen
    cdef int64_t ts_delta, ts, prev_ts = 0
    cdef PyObject* prev_ts_obj = NULL
    cdef PyObject* hdrs
    cdef PyObject* pair
    cdef PyObject* hkey
    cdef Record rec
    cdef int j
    for i in range(count):
        if pos >= end:
            raise _corrupt("Incorrect declared batch size, premature EOF reached", where, base_offset)
        length = _rd_varint(d, &pos, end, where, base_offset)
        if length < 0 or length > end - pos:
            raise _corrupt(
                f"Invalid record size: expected {length} bytes in record payload, "
                f"but instead the buffer has only {end - pos} remaining bytes",
                where, base_offset)
        if length < 1:
            raise _corrupt("Found invalid record structure: empty record body", where, base_offset)
        start = pos
        body_end = pos + length
        pos += 1  # attributes (unused)
        rec = Record.__new__(Record)
        ts_delta = _rd_varlong(d, &pos, body_end, where, base_offset)
        off_delta = _rd_varint(d, &pos, body_end, where, base_offset)
        klen = _rd_varint(d, &pos, body_end, where, base_offset)
        if klen >= 0:
            if klen > body_end - pos:
                raise _corrupt("Found invalid record structure: key runs past the record",
                               where, base_offset)
            kl_rf_put(rec, F_KEY, _new_bytes(<const char*>d + pos, klen))
            pos += klen
        # else: the key stays None (a new Record's fields are None)
        vlen = _rd_varint(d, &pos, body_end, where, base_offset)
        if vlen >= 0:
            if vlen > body_end - pos:
                raise _corrupt("Found invalid record structure: value runs past the record",
                               where, base_offset)
            kl_rf_put(rec, F_VALUE, _new_bytes(<const char*>d + pos, vlen))
            pos += vlen
        # else: the value stays None
        hcount = _rd_varint(d, &pos, body_end, where, base_offset)
        if hcount < 0:
            raise _corrupt(f"Found invalid number of record headers {hcount}", where, base_offset)
        if hcount == 0:
            Py_INCREF(_NO_HEADERS)
            kl_rf_put(rec, F_HEADERS, <PyObject*>_NO_HEADERS)
        else:
            if hcount > body_end - pos:
                raise _corrupt(
                    f"Found invalid number of record headers {hcount}: more than the "
                    f"{body_end - pos} bytes left in the record", where, base_offset)
            # The tuple goes into the record at once (NULL items are fine until it is
            # complete: nothing outside this function can see it, and tuple dealloc skips them).
            hdrs = _new_tuple(hcount)
            kl_rf_put(rec, F_HEADERS, hdrs)
            for h in range(hcount):
                hklen = _rd_varint(d, &pos, body_end, where, base_offset)
                if hklen < 0:
                    raise _corrupt(f"Invalid negative header key size {hklen}", where, base_offset)
                if hklen > body_end - pos:
                    raise _corrupt("Found invalid record structure: header key runs past the record",
                                   where, base_offset)
                pair = _new_tuple(2)
                _tuple_set(hdrs, h, pair)
                hkey = NULL
                for j in range(kc_n[0]):
                    if kc_len[j] == hklen and memcmp(d + kc_off[j], d + pos, <size_t>hklen) == 0:
                        hkey = kc_obj[j]
                        Py_INCREF(<object>hkey)
                        break
                if hkey is NULL:
                    hkey = _new_str(<const char*>d + pos, hklen, "surrogateescape")
                    if kc_n[0] < _KEY_CACHE:
                        Py_INCREF(<object>hkey)
                        kc_off[kc_n[0]] = pos
                        kc_len[kc_n[0]] = hklen
                        kc_obj[kc_n[0]] = hkey
                        kc_n[0] += 1
                _tuple_set(pair, 0, hkey)
                pos += hklen
                hvlen = _rd_varint(d, &pos, body_end, where, base_offset)
                if hvlen >= 0:
                    if hvlen > body_end - pos:
                        raise _corrupt(
                            "Found invalid record structure: header value runs past the record",
                            where, base_offset)
                    _tuple_set(pair, 1, _new_bytes(<const char*>d + pos, hvlen))
                    pos += hvlen
                else:
                    Py_INCREF(None)
                    _tuple_set(pair, 1, <PyObject*>None)
        if pos != body_end:
            raise _corrupt(
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {pos - start}", where, base_offset)
        kl_rf_put(rec, F_OFFSET, _new_long(_add64(base_offset, off_delta)))
        if log_append:
            Py_INCREF(<object>shared_ts)
            kl_rf_put(rec, F_TIMESTAMP, shared_ts)
        else:
            ts = _add64(base_ts, ts_delta)
            if prev_ts_obj is NULL or ts != prev_ts:
                prev_ts_obj = _new_long(ts)
                prev_ts = ts
                kl_rf_put(rec, F_TIMESTAMP, prev_ts_obj)
            else:
                Py_INCREF(<object>prev_ts_obj)
                kl_rf_put(rec, F_TIMESTAMP, prev_ts_obj)
        if i < cap:
            Py_INCREF(rec)
            _list_set(<PyObject*>out, i, <PyObject*>rec)
        else:   # unreachable (a record takes >= 7 bytes), but never write past the list
            out.append(rec)
    if pos != end:
        raise _corrupt("Incorrect declared batch size, records still remaining in file",
                       where, base_offset)
    return out


# ==============================================================================================
# RecordBatch
# ==============================================================================================
@cython.final
@cython.freelist(32)
@cython.no_gc
cdef class RecordBatch:
    """A magic v2 record batch, read in place from a buffer (Kafka's DefaultRecordBatch).

    ``RecordBatch(buffer, position=0)`` parses the batch that starts at ``position``.  Iterating
    it decodes the records (decompressing if needed); with ``check_crc`` (the default) the CRC
    is verified first, like a consumer with ``check.crcs=true``.
    """
    cdef _Source _src
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t records_count
    cdef bint _check_crc
    cdef object _max_decompressed

    def __init__(self, buffer, position=0, *, check_crc=True,
                 max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        cdef _Source src = _source(buffer)
        if not isinstance(position, int):
            raise TypeError(f"position must be an int, not {type(position).__name__}")
        if position < 0:
            raise ValueError(f"position must be >= 0, not {position}")
        if position > src.size:
            raise _corrupt(
                f"Record batch is truncated: 0 bytes, less than the "
                f"{RECORD_BATCH_OVERHEAD}-byte header", position)
        _init_batch(self, src, position)
        self._check_crc = bool(check_crc)
        self._max_decompressed = max_decompressed_size

    # -- derived header facts -------------------------------------------------------------
    @property
    def size_in_bytes(self):
        return <int64_t>self.length + LOG_OVERHEAD

    @property
    def last_offset(self):
        return _add64(self.base_offset, self.last_offset_delta)

    @property
    def next_offset(self):
        return _add64(self.base_offset, <int64_t>self.last_offset_delta + 1)

    @property
    def compression_type(self):
        cdef int c = self.attributes & COMPRESSION_CODEC_MASK
        if c > 4:
            raise _corrupt(f"Unknown compression type id {c}", self.position, self.base_offset)
        return _COMPRESSION_TYPES[c]

    @property
    def timestamp_type(self):
        return _TIMESTAMP_TYPES[1 if self.attributes & TIMESTAMP_TYPE_MASK else 0]

    @property
    def is_transactional(self):
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control_batch(self):
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self):
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self):
        """The delete horizon set by the log cleaner, or None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def last_sequence(self):
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self):
        return self.producer_id > -1

    # -- integrity --------------------------------------------------------------------------
    def compute_checksum(self):
        """CRC-32C of the batch from the attributes field to its end."""
        return self._checksum()

    cdef inline uint32_t _checksum(self) noexcept:
        return _crc32c(self._src.ptr + self.position + ATTRIBUTES_OFFSET,
                       <Py_ssize_t>self.length + LOG_OVERHEAD - ATTRIBUTES_OFFSET)

    def is_valid(self):
        return self._checksum() == self.crc

    def ensure_valid(self):
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the bytes."""
        self._ensure_valid()

    cdef int _ensure_valid(self) except -1:
        cdef uint32_t computed = self._checksum()
        if computed != self.crc:
            raise _corrupt(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                self.position, self.base_offset)
        return 0

    # -- records ------------------------------------------------------------------------------
    def view(self):
        """The batch's bytes, without copying."""
        return self._src.mv[self.position:self.position + <Py_ssize_t>self.length + LOG_OVERHEAD]

    def records_section(self):
        """The records section: a memoryview of the buffer, or the decompressed bytes."""
        cdef Py_ssize_t start = self.position + RECORD_BATCH_OVERHEAD
        cdef Py_ssize_t stop = self.position + <Py_ssize_t>self.length + LOG_OVERHEAD
        raw = self._src.mv[start:stop]
        cdef int codec = self.attributes & COMPRESSION_CODEC_MASK
        if codec == 0:
            return raw
        if codec > 4:
            raise _corrupt(f"Unknown compression type id {codec}", self.position, self.base_offset)
        try:
            return _compression_mod().decompress(codec, raw, magic=2,
                                                 max_size=self._max_decompressed)
        except CorruptRecordError as e:
            e.position = self.position
            e.offset = self.base_offset
            raise

    def records(self):
        """Decode every record of the batch into a list."""
        if self._check_crc:
            self._ensure_valid()
        return self._records()

    cdef object _records(self):
        cdef Py_ssize_t count = self.records_count
        cdef Py_buffer view
        cdef Py_ssize_t n
        cdef const uint8_t* data
        if count < 0:
            raise _corrupt(f"Found invalid record count {count} in magic v2 batch",
                           self.position, self.base_offset)
        if count == 0:
            return []
        cdef bint log_append = (self.attributes & TIMESTAMP_TYPE_MASK) != 0
        if self.attributes & COMPRESSION_CODEC_MASK == 0:
            data = self._src.ptr + self.position + RECORD_BATCH_OVERHEAD
            n = <Py_ssize_t>self.length + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD
            if count > n:
                raise self._count_error(count, n)
            return _decode_records(data, n, count, self.base_offset, self.base_timestamp,
                                   log_append, self.max_timestamp, self.position)
        cdef int codec = self.attributes & COMPRESSION_CODEC_MASK
        cdef GBuf g
        cdef int r
        if (codec == 2 or codec == 3) and 0 <= self._max_decompressed <= 0x7FFFFFFFFFFFFFFF \
                and codec_library_ready(_compression_mod(), codec):
            # the compiled decoders (no bytes object per batch, no Python frame walk); where
            # they decline, records_section() answers or raises the exact error through
            # kafkalog.compression (a negative limit: its ValueError; a missing library: its
            # MissingCodecError)
            _spare_take(&g)
            if g.data == NULL and self._max_decompressed >= SECTION_FIRST_BLOCK:
                gb_ensure_at_most(&g, <size_t>SECTION_FIRST_BLOCK, <size_t>SECTION_FIRST_BLOCK)
            r = self._decompress_native(codec, &g)
            try:
                if r == 0 and g.data != NULL:
                    n = <Py_ssize_t>g.len
                    if count > n:
                        raise self._count_error(count, n)
                    return _decode_records(g.data, n, count, self.base_offset,
                                           self.base_timestamp, log_append, self.max_timestamp,
                                           self.position)
            finally:
                _spare_give(&g)
        section = self.records_section()
        PyObject_GetBuffer(section, &view, PyBUF_SIMPLE)
        try:
            n = view.len
            if count > n:
                raise self._count_error(count, n)
            return _decode_records(<const uint8_t*>view.buf, n, count, self.base_offset,
                                   self.base_timestamp, log_append, self.max_timestamp,
                                   self.position)
        finally:
            PyBuffer_Release(&view)

    cdef int _decompress_native(self, int codec, GBuf* g) noexcept:
        """This batch's records section into ``g``: 0, -1 (declined) or -2 (past the limit)."""
        cdef int64_t limit = self._max_decompressed
        cdef const uint8_t* s = self._src.ptr + self.position + RECORD_BATCH_OVERHEAD
        cdef Py_ssize_t n = <Py_ssize_t>self.length + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD
        cdef int r
        with nogil:
            r = decompress_into(codec, s, n, g, limit)
        return r

    cdef object _count_error(self, Py_ssize_t count, Py_ssize_t n):
        return _corrupt(
            f"Found invalid record count {count} in magic v2 batch: more than the "
            f"{n} bytes of records", self.position, self.base_offset)

    def __iter__(self):
        if self._check_crc:
            self._ensure_valid()
        return iter(self._records())

    def __len__(self):
        return self.records_count if self.records_count > 0 else 0

    def __repr__(self):
        cdef int c = self.attributes & COMPRESSION_CODEC_MASK
        codec = _COMPRESSION_TYPES[c].kafka_name if c <= 4 else str(c)
        return (
            f"RecordBatch(magic=2, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, count={self.records_count}, "
            f"compression={codec}, size={self.size_in_bytes}, position={self.position})"
        )


cdef int _init_batch(RecordBatch b, _Source src, Py_ssize_t position) except -1:
    """Read and check the header at ``position`` (0 <= position <= src.size)."""
    cdef Py_ssize_t avail = src.size - position
    cdef const uint8_t* p
    cdef int64_t size
    if avail < RECORD_BATCH_OVERHEAD:
        raise _corrupt(
            f"Record batch is truncated: {avail} bytes, less than the "
            f"{RECORD_BATCH_OVERHEAD}-byte header", position)
    p = src.ptr + position
    b.base_offset = <int64_t>_be64(p)
    b.length = <int32_t>_be32(p + 8)
    b.partition_leader_epoch = <int32_t>_be32(p + 12)
    b.magic = <int8_t>p[16]
    b.crc = _be32(p + 17)
    b.attributes = <int16_t>_be16(p + 21)
    b.last_offset_delta = <int32_t>_be32(p + 23)
    b.base_timestamp = <int64_t>_be64(p + 27)
    b.max_timestamp = <int64_t>_be64(p + 35)
    b.producer_id = <int64_t>_be64(p + 43)
    b.producer_epoch = <int16_t>_be16(p + 51)
    b.base_sequence = <int32_t>_be32(p + 53)
    b.records_count = <int32_t>_be32(p + 57)
    if b.magic != 2:
        raise _corrupt(f"Invalid magic {b.magic} for a v2 record batch", position, b.base_offset)
    size = <int64_t>b.length + LOG_OVERHEAD
    if size < RECORD_BATCH_OVERHEAD:
        raise _corrupt(
            f"Record batch is corrupt (the size {size} is smaller than the minimum "
            f"allowed overhead {RECORD_BATCH_OVERHEAD})", position, b.base_offset)
    if size > avail:
        raise _corrupt(
            f"Record batch is truncated: its size is {size} bytes but only {avail} remain",
            position, b.base_offset)
    b._src = src
    b.position = position
    return 0


cdef RecordBatch _new_batch(_Source src, Py_ssize_t position, bint check_crc, object max_dec):
    cdef RecordBatch b = RecordBatch.__new__(RecordBatch)
    _init_batch(b, src, position)
    b._check_crc = check_crc
    b._max_decompressed = max_dec
    return b


cdef Py_ssize_t _sound_v2_run(const uint8_t* base, Py_ssize_t size, Py_ssize_t pos,
                              int64_t max_size, Py_ssize_t* count) noexcept nogil:
    """Walk complete magic-2 batches from ``pos`` while every check of ``_next_entry``,
    ``_init_batch`` and ``_ensure_valid`` passes; return the position of the first entry that is
    not such a batch (the caller re-checks it the slow way).  Adds the batches to ``count``."""
    cdef const uint8_t* p
    cdef int64_t length
    cdef Py_ssize_t total
    while size - pos >= RECORD_BATCH_OVERHEAD:
        p = base + pos
        if p[16] != 2:
            break
        length = <int32_t>_be32(p + 8)
        total = <Py_ssize_t>length + LOG_OVERHEAD
        if (length < RECORD_OVERHEAD_V0 or length > max_size or total < RECORD_BATCH_OVERHEAD
                or total > size - pos):
            break
        if kl_crc32c(0, p + ATTRIBUTES_OFFSET, <size_t>(total - ATTRIBUTES_OFFSET)) != _be32(p + 17):
            break
        count[0] += 1
        pos += total
    return pos


def increment_sequence(sequence, increment):
    """Kafka's DefaultRecordBatch.incrementSequence: wrap past Int.MAX to 0."""
    if sequence > 2147483647 - increment:
        return increment - (2147483647 - sequence) - 1
    return sequence + increment


# ==============================================================================================
# MemoryRecords
# ==============================================================================================
@cython.final
cdef class MemoryRecords:
    """A sequence of log entries in a buffer: what a segment file or a fetch response holds.

    ``MemoryRecords(buffer)`` accepts bytes, bytearray, memoryview or mmap without copying.
    Iterating (or :meth:`batches`) yields a :class:`RecordBatch` per v2 batch and a legacy batch
    per v0/v1 log entry, in order.  A short trailing partial entry ends iteration and is
    reported in :attr:`truncated_bytes`, as Kafka does; a malformed entry header raises
    :class:`CorruptRecordError`.
    """
    cdef _Source _src
    cdef bint _check_crcs
    cdef object _max_batch_size
    cdef bint _has_max
    cdef int64_t _max_bs
    cdef object _max_decompressed
    cdef Py_ssize_t _valid_bytes

    def __init__(self, buffer, *, check_crcs=True, max_batch_size=None,
                 max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        cdef int overflow = 0
        self._src = _source(buffer)
        if max_batch_size is not None and not isinstance(max_batch_size, int):
            raise TypeError(
                f"max_batch_size must be an int or None, not {type(max_batch_size).__name__}")
        self._check_crcs = bool(check_crcs)
        self._max_batch_size = max_batch_size
        self._has_max = max_batch_size is not None
        if self._has_max:
            self._max_bs = PyLong_AsLongLongAndOverflow(max_batch_size, &overflow)
            if overflow > 0:
                self._has_max = False
            elif overflow < 0:
                self._max_bs = INT64_MIN
        self._max_decompressed = max_decompressed_size
        self._valid_bytes = -1

    @property
    def size_in_bytes(self):
        return self._src.size

    def buffer(self):
        return self._src.mv

    cdef Py_ssize_t _next_entry(self, Py_ssize_t pos) except -2:
        """Size of the complete entry at ``pos``, or -1 at a partial tail (raises if corrupt)."""
        cdef Py_ssize_t remaining = self._src.size - pos
        cdef const uint8_t* p
        cdef int64_t offset
        cdef int32_t size
        cdef int8_t magic
        if remaining <= HEADER_SIZE_UP_TO_MAGIC:   # Kafka's FileLogInputStream: no entry fits
            return -1
        p = self._src.ptr + pos
        offset = <int64_t>_be64(p)
        size = <int32_t>_be32(p + 8)
        if size < RECORD_OVERHEAD_V0:
            raise _corrupt(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})", pos, offset)
        if self._has_max and size > self._max_bs:
            raise RecordTooLargeError(
                f"Record size {size} exceeds the largest allowable message size "
                f"({self._max_batch_size})", pos, offset)
        magic = <int8_t>p[16]
        if magic < 0 or magic > 2:
            raise _corrupt(f"Invalid magic found in record: {magic}", pos, offset)
        if remaining < <Py_ssize_t>size + LOG_OVERHEAD:
            return -1
        return <Py_ssize_t>size + LOG_OVERHEAD

    cdef object _legacy_batch(self, Py_ssize_t pos):
        # The C-level constructor: no argument tuple, keyword dict or buffer export per entry
        # (the _Source keeps the export alive for the batch).
        return make_legacy_batch(self._src.mv, self._src, self._src.ptr, self._src.size, pos,
                                 self._check_crcs, self._max_decompressed)

    def batches(self):
        return _BatchIterator(self)

    def __iter__(self):
        return _BatchIterator(self)

    def records(self):
        """Every record of every data batch (control batches are skipped), in order."""
        for batch in _BatchIterator(self):
            if not batch.is_control_batch:
                yield from batch

    def validate(self):
        """Verify every complete entry (its header, then its CRC) and return how many there are.

        The same checks as iterating the batches and calling ``ensure_valid()`` on each, whatever
        ``check_crcs`` says; raises :class:`CorruptRecordError` at the first bad entry.  A partial
        tail ends the walk (see :attr:`truncated_bytes`).
        """
        cdef Py_ssize_t pos = 0, n
        cdef Py_ssize_t count = 0
        cdef RecordBatch b
        while True:
            # the common case, a run of sound v2 batches, without a batch object per entry and
            # with the GIL released once; anything else (a legacy entry, a partial tail, any
            # failed check) goes through the checks below, which raise the exact error
            with nogil:
                pos = _sound_v2_run(self._src.ptr, self._src.size, pos,
                                    self._max_bs if self._has_max else INT64_MAX, &count)
            n = self._next_entry(pos)
            if n < 0:
                break
            if self._src.ptr[pos + 16] == 2:
                b = _new_batch(self._src, pos, True, self._max_decompressed)
                b._ensure_valid()
            else:
                self._legacy_batch(pos).ensure_valid()
            count += 1
            pos += n
        self._valid_bytes = pos
        return count

    @property
    def valid_bytes(self):
        """Bytes taken by complete entries (walks the entry headers once)."""
        cdef Py_ssize_t pos = 0, n
        if self._valid_bytes < 0:
            while True:
                n = self._next_entry(pos)
                if n < 0:
                    break
                pos += n
            self._valid_bytes = pos
        return self._valid_bytes

    @property
    def truncated_bytes(self):
        """Bytes of the partial entry at the end (0 when the buffer ends on an entry)."""
        return self._src.size - self.valid_bytes

    def __repr__(self):
        return f"MemoryRecords(size={self._src.size})"


@cython.final
@cython.no_gc
cdef class _BatchIterator:
    cdef MemoryRecords _mr
    cdef Py_ssize_t _pos
    cdef bint _done

    def __cinit__(self, MemoryRecords mr):
        self._mr = mr
        self._pos = 0
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        cdef MemoryRecords mr = self._mr
        cdef Py_ssize_t pos = self._pos, n
        if self._done:
            raise StopIteration
        self._done = True   # until this entry is known good: an error ends the iteration
        n = mr._next_entry(pos)
        if n < 0:
            mr._valid_bytes = pos
            raise StopIteration
        if mr._src.ptr[pos + 16] == 2:
            b = _new_batch(mr._src, pos, mr._check_crcs, mr._max_decompressed)
        else:
            b = mr._legacy_batch(pos)
        self._pos = pos + n
        self._done = False
        return b


# ==============================================================================================
# Writing records
# ==============================================================================================
cdef struct _Out:
    uint8_t* buf
    Py_ssize_t len
    Py_ssize_t cap


cdef int _reserve(_Out* o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need, cap
    cdef uint8_t* p
    if extra <= o.cap - o.len:
        return 0
    if extra > (<Py_ssize_t>0x7FFFFFFFFFFFFFFF) // 2 - o.len:
        raise MemoryError()
    need = o.len + extra
    cap = o.cap * 2 if o.cap > 0 else 256
    if cap < need:
        cap = need
    p = <uint8_t*>realloc(o.buf, <size_t>cap)
    if p is NULL:
        raise MemoryError()
    o.buf = p
    o.cap = cap
    return 0


# A key/value/header operand: its bytes, and the object that keeps them alive.
cdef struct _Bytes:
    const char* ptr
    Py_ssize_t len       # -1 = None


cdef inline int _get_bytes(object x, _Bytes* out, list keep, str what) except -1:
    """Key/value as the pure twin's _as_bytes_or_none: bytes kept, bytearray/memoryview copied."""
    if PyBytes_Check(x):
        out.ptr = PyBytes_AS_STRING(x)
        out.len = PyBytes_GET_SIZE(x)
        return 0
    if x is None:
        out.ptr = NULL
        out.len = -1
        return 0
    return _get_bytes_slow(x, out, keep, what)


cdef int _get_bytes_slow(object x, _Bytes* out, list keep, str what) except -1:
    if isinstance(x, (bytearray, memoryview)):
        x = bytes(x)
        keep.append(x)
    else:
        raise TypeError(
            f"{what} must be bytes, bytearray, memoryview or None, not {type(x).__name__}")
    out.ptr = PyBytes_AS_STRING(x)
    out.len = PyBytes_GET_SIZE(x)
    return 0


cdef inline Py_ssize_t _byte_len(object x, str what) except -2:
    """The pure twin's _byte_len: encoded length without copying (-1 for None)."""
    if PyBytes_Check(x):
        return PyBytes_GET_SIZE(x)
    if x is None:
        return -1
    return _byte_len_slow(x, what)


cdef Py_ssize_t _byte_len_slow(object x, str what) except -2:
    if isinstance(x, bytearray):
        return len(x)
    if isinstance(x, memoryview):
        return x.nbytes
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, not {type(x).__name__}")


cdef int _get_header_key(object k, _Bytes* out, list keep) except -1:
    cdef Py_ssize_t n
    if isinstance(k, str):
        try:
            out.ptr = PyUnicode_AsUTF8AndSize(k, &n)
            out.len = n
            return 0
        except UnicodeEncodeError:
            k = PyUnicode_AsEncodedString(k, "utf-8", "surrogateescape")
    elif isinstance(k, (bytes, bytearray, memoryview)):
        k = bytes(k)
    else:
        raise TypeError(f"header key must be str or bytes, not {type(k).__name__}")
    keep.append(k)
    out.ptr = PyBytes_AS_STRING(k)
    out.len = PyBytes_GET_SIZE(k)
    return 0


cdef inline object _header_seq(object headers):
    """None -> (); an exact tuple or list as it is; any other iterable -> a tuple of it."""
    if headers is None:
        return _NO_HEADERS
    if type(headers) is tuple or type(headers) is list:
        return headers
    return tuple(headers)


cdef int _too_long(Py_ssize_t n) except -1:
    raise ValueError(f"{n} does not fit in a signed 32-bit integer")


cdef inline int _check_len(Py_ssize_t n) except -1:
    if n > INT32_MAX:
        return _too_long(n)
    return 0


cdef inline Py_ssize_t _size_of_len(Py_ssize_t n) noexcept nogil:
    """Encoded size of a nullable length-prefixed field (n = -1 for null)."""
    if n < 0:
        return 1
    return kl_size_uvarint32(kl_zigzag32(<int32_t>n)) + n


cdef inline Py_ssize_t _put_field(uint8_t* dst, const char* src, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t w
    if n < 0:
        dst[0] = 1   # zig-zag(-1)
        return 1
    w = kl_write_uvarint32(dst, kl_zigzag32(<int32_t>n))
    memcpy(dst + w, src, <size_t>n)
    return w + n


cdef enum:
    _STACK_HEADERS = 8


cdef Py_ssize_t _encode_record(_Out* o, int32_t offset_delta, int64_t timestamp_delta,
                               _Bytes* key, _Bytes* value, object headers, list keep) except -1:
    """Append one DefaultRecord (length prefix included) at ``o.len``; returns its size.

    ``headers`` is an exact tuple or list.  Every header is resolved to bytes (and kept alive)
    before the first byte is written, so no Python code runs while the buffer is written.
    ``o.len`` moves only on success.  Checks and their order follow the pure twin's
    encode_record_body (key, value, then per header: key, value, lengths; then the body length).
    """
    cdef Py_ssize_t start = o.len, body, n, hcount, i
    cdef uint64_t tsz = kl_zigzag64(timestamp_delta)
    cdef uint32_t offz = kl_zigzag32(offset_delta)
    cdef uint8_t* p
    cdef _Bytes stack_hb[2 * _STACK_HEADERS]
    cdef _Bytes* hb = stack_hb
    cdef tuple snapshot
    _check_len(key.len)
    _check_len(value.len)
    hcount = len(headers)
    _check_len(hcount)
    body = (1 + kl_size_uvarint64(tsz) + kl_size_uvarint32(offz)
            + _size_of_len(key.len) + _size_of_len(value.len)
            + kl_size_uvarint32(kl_zigzag32(<int32_t>hcount)))
    try:
        if hcount:
            # A snapshot: code run below (unpacking a user-defined pair) cannot change it.
            snapshot = tuple(headers) if type(headers) is not tuple else <tuple>headers
            hcount = len(snapshot)
            if hcount > _STACK_HEADERS:
                hb = <_Bytes*>malloc(<size_t>(2 * hcount) * sizeof(_Bytes))
                if hb is NULL:
                    raise MemoryError()
            i = 0
            for h in snapshot:
                if type(h) is tuple and len(<tuple>h) == 2:
                    hkey = (<tuple>h)[0]
                    hval = (<tuple>h)[1]
                else:
                    hkey, hval = h
                    keep.append(hkey)
                    keep.append(hval)
                _get_header_key(hkey, &hb[2 * i], keep)
                _get_bytes(hval, &hb[2 * i + 1], keep, "header value")
                _check_len(hb[2 * i].len)
                _check_len(hb[2 * i + 1].len)
                body += _size_of_len(hb[2 * i].len) + _size_of_len(hb[2 * i + 1].len)
                i += 1
        _check_len(body)
        _reserve(o, 5 + body)
        # -- from here on: plain C, no Python code, no allocation --------------------------------
        p = o.buf + start
        n = kl_write_uvarint32(p, kl_zigzag32(<int32_t>body))
        p[n] = 0                                   # attributes
        n += 1
        n += kl_write_uvarint64(p + n, tsz)
        n += kl_write_uvarint32(p + n, offz)
        n += _put_field(p + n, key.ptr, key.len)
        n += _put_field(p + n, value.ptr, value.len)
        n += kl_write_uvarint32(p + n, kl_zigzag32(<int32_t>hcount))
        for i in range(hcount):
            n += _put_field(p + n, hb[2 * i].ptr, hb[2 * i].len)
            n += _put_field(p + n, hb[2 * i + 1].ptr, hb[2 * i + 1].len)
        o.len = start + n
        return n
    finally:
        if hb is not stack_hb:
            free(hb)


cdef Py_ssize_t _record_size_c(int32_t offset_delta, int64_t timestamp_delta, Py_ssize_t klen,
                               Py_ssize_t vlen, object headers) except -1:
    """The pure twin's _record_size (same checks, same order)."""
    cdef Py_ssize_t body, hcount, hvlen
    cdef _Bytes hk
    cdef list keep = None
    body = 1 + kl_size_uvarint64(kl_zigzag64(timestamp_delta)) + kl_size_uvarint32(kl_zigzag32(offset_delta))
    _check_len(klen)
    body += _size_of_len(klen)
    _check_len(vlen)
    body += _size_of_len(vlen)
    hcount = len(headers)
    _check_len(hcount)
    body += kl_size_uvarint32(kl_zigzag32(<int32_t>hcount))
    if hcount:
        keep = []
        for h in headers:
            hkey, hval = h
            _get_header_key(hkey, &hk, keep)
            hvlen = _byte_len(hval, "header value")
            _check_len(hk.len)
            body += _size_of_len(hk.len)
            _check_len(hvlen)
            body += _size_of_len(hvlen)
    _check_len(body)
    return kl_size_uvarint32(kl_zigzag32(<int32_t>body)) + body


cdef int64_t _as_int64(object v, str what) except? -1:
    """``v`` as int64, else TypeError/ValueError as the pure twin's write_varlong would raise."""
    cdef int overflow = 0
    cdef long long x
    if not isinstance(v, int):
        raise TypeError(f"an integer is required, not {type(v).__name__}")
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow:
        raise ValueError(f"{v} does not fit in a signed 64-bit integer")
    return x


cdef int32_t _as_int32(object v) except? -1:
    cdef int overflow = 0
    cdef long long x
    if not isinstance(v, int):
        raise TypeError(f"an integer is required, not {type(v).__name__}")
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < -2147483648 or x > 2147483647:
        raise ValueError(f"{v} does not fit in a signed 32-bit integer")
    return <int32_t>x


def encode_record_body(offset_delta, timestamp_delta, key, value, headers=()):
    """One DefaultRecord (length prefix included)."""
    cdef _Bytes k, v
    cdef list keep = []
    cdef _Out o
    cdef int64_t tsd
    cdef int32_t offd
    _get_bytes(key, &k, keep, "key")
    _get_bytes(value, &v, keep, "value")
    headers = _header_seq(headers)
    tsd = _as_int64(timestamp_delta, "timestamp_delta")
    offd = _as_int32(offset_delta)
    o.buf = NULL
    o.len = 0
    o.cap = 0
    try:
        _encode_record(&o, offd, tsd, &k, &v, headers, keep)
        return PyBytes_FromStringAndSize(<const char*>o.buf, o.len)
    finally:
        free(o.buf)


def record_size_upper_bound(key, value, headers=()):
    """An upper bound on a record's encoded size (Kafka's estimateSizeInBytesUpperBound)."""
    cdef Py_ssize_t size = 21, n
    cdef _Bytes hk
    cdef list keep = []
    n = _byte_len(key, "key")
    size += 5 + (n if n > 0 else 0)
    n = _byte_len(value, "value")
    size += 5 + (n if n > 0 else 0)
    size += 5
    for h in _header_seq(headers):
        hkey, hval = h
        _get_header_key(hkey, &hk, keep)
        n = _byte_len(hval, "header value")
        size += 5 + hk.len + 5 + (n if n > 0 else 0)
    return size


def record_size(offset_delta, timestamp_delta, key, value, headers=()):
    """Exact encoded size of a record, length prefix included (Kafka's sizeInBytes)."""
    cdef Py_ssize_t klen = _byte_len(key, "key")
    cdef Py_ssize_t vlen = _byte_len(value, "value")
    headers = _header_seq(headers)
    cdef int64_t tsd = _as_int64(timestamp_delta, "timestamp_delta")
    cdef int32_t offd = _as_int32(offset_delta)
    return _record_size_c(offd, tsd, klen, vlen, headers)


cdef int64_t _timestamp(object timestamp) except? -2:
    """The pure twin's _check_timestamp, returning the value."""
    cdef int overflow = 0
    cdef long long v
    if not isinstance(timestamp, int):
        raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
    v = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
    if overflow < 0 or (overflow == 0 and v < 0 and v != -1):
        raise ValueError(f"Invalid negative timestamp {timestamp}")
    if overflow > 0:
        raise ValueError(f"timestamp {timestamp} does not fit in a signed 64-bit integer")
    return v


cdef dict _CODEC_CACHE = {}
cdef dict _TS_TYPE_CACHE = {}


cdef object _parse_codec(object value):
    """CompressionType.parse, with the common (exact int / str) answers cached."""
    cdef object t = type(value)
    if t is int or t is str:
        r = _CODEC_CACHE.get(value)
        if r is not None:
            return r
        r = CompressionType.parse(value)
        if len(_CODEC_CACHE) < 64:
            _CODEC_CACHE[value] = r
        return r
    return CompressionType.parse(value)


cdef object _parse_ts_type(object value):
    """TimestampType.parse, with the common (exact int / str) answers cached."""
    cdef object t = type(value)
    if t is int or t is str:
        r = _TS_TYPE_CACHE.get(value)
        if r is not None:
            return r
        r = TimestampType.parse(value)
        if len(_TS_TYPE_CACHE) < 64:
            _TS_TYPE_CACHE[value] = r
        return r
    return TimestampType.parse(value)


cdef inline bint _fits(object v, int64_t lo, int64_t hi):
    """An exact int within [lo, hi] (anything else goes to the slow, exact checks)."""
    cdef int overflow = 0
    cdef long long x
    if type(v) is not int:
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    return overflow == 0 and lo <= x <= hi


cdef enum:
    _COMMIT = 0
    _COMMIT_IF_ROOM = 1


cdef enum:
    _INITIAL_CAPACITY = 1024
    _MAX_PREALLOCATION = 1 << 20


@cython.final
cdef class MemoryRecordsBuilder:
    """Build a record batch (magic 2), or legacy messages (magic 0/1), as Kafka's
    MemoryRecordsBuilder does; ``build()`` returns the bytes.

    ``append(timestamp, key, value, headers=())`` assigns the next offset and returns it.
    ``write_limit`` (bytes) makes :meth:`has_room_for` answer like Kafka's ``hasRoomFor``
    (the exact size of the next record against the uncompressed size so far).
    With ``timestamp_type="log_append_time"`` every record reports ``log_append_time``
    (default: the current time in ms when :meth:`build` runs).  An append that raises leaves
    the builder unchanged.
    """
    cdef object _legacy
    cdef object _magic, _codec_obj, _ts_type, _base_offset_obj
    cdef int _codec
    cdef bint _log_append
    cdef int64_t _base_offset
    cdef int64_t _producer_id
    cdef int16_t _producer_epoch
    cdef int32_t _base_sequence
    cdef int32_t _partition_leader_epoch
    cdef bint _transactional, _control
    cdef object _log_append_time, _level, _delete_horizon_obj
    cdef bint _has_dh
    cdef int64_t _delete_horizon
    cdef bint _has_limit
    cdef int64_t _write_limit
    cdef _Out _o                 # header space (61 bytes) + records
    cdef int64_t _count
    cdef bint _has_first
    cdef int64_t _first_ts
    cdef int64_t _max_ts
    cdef bint _has_last
    cdef int64_t _last_delta     # last offset - base offset
    cdef list _keep
    cdef bint _busy              # inside _append (guards against re-entrant appends)

    def __cinit__(self):
        self._o.buf = NULL
        self._o.len = 0
        self._o.cap = 0

    def __dealloc__(self):
        free(self._o.buf)
        self._o.buf = NULL

    def __init__(self, magic=2, compression_type="none", base_offset=0,
                 timestamp_type="create_time", producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, is_transactional=False, partition_leader_epoch=0, *,
                 is_control_batch=False, write_limit=None, log_append_time=None,
                 compression_level=None, delete_horizon_ms=None):
        cdef int overflow = 0
        cdef int64_t cap
        codec = _parse_codec(compression_type)
        ts_type = _parse_ts_type(timestamp_type)
        if not (type(magic) is int and 0 <= magic <= 2) and magic not in (0, 1, 2):
            raise ValueError(f"magic must be 0, 1 or 2, not {magic!r}")
        if write_limit is not None and not isinstance(write_limit, int):
            raise TypeError(f"write_limit must be an int or None, not {type(write_limit).__name__}")
        self._magic = magic
        self._codec_obj = codec
        self._ts_type = ts_type
        self._base_offset_obj = base_offset
        self._has_limit = write_limit is not None
        if self._has_limit:
            self._write_limit = PyLong_AsLongLongAndOverflow(write_limit, &overflow)
            if overflow > 0:
                self._write_limit = INT64_MAX
            elif overflow < 0:
                self._write_limit = INT64_MIN
        if magic < 2:
            self._legacy = _LegacyBuilder(
                magic,
                codec,
                base_offset,
                ts_type,
                write_limit=write_limit,
                log_append_time=log_append_time,
                compression_level=compression_level,
            )
            if is_transactional or is_control_batch or producer_id != -1:
                raise ValueError(
                    f"transactional, control and idempotent batches need magic 2, not {magic}")
            return
        self._legacy = None
        if ts_type == _NO_TIMESTAMP_TYPE:
            raise ValueError("magic 2 batches need CreateTime or LogAppendTime")
        if not (_fits(base_offset, INT64_MIN, INT64_MAX)
                and _fits(producer_id, INT64_MIN, INT64_MAX)
                and _fits(producer_epoch, -32768, 32767)
                and _fits(base_sequence, -2147483648, 2147483647)
                and _fits(partition_leader_epoch, -2147483648, 2147483647)
                and (log_append_time is None or _fits(log_append_time, INT64_MIN, INT64_MAX))
                and (delete_horizon_ms is None or _fits(delete_horizon_ms, INT64_MIN, INT64_MAX))):
            # Slow path: the pure twin's checks, in its order, for its exact messages.
            for name, v, lo, hi in (
                ("base_offset", base_offset, -(2**63), 2**63 - 1),
                ("producer_id", producer_id, -(2**63), 2**63 - 1),
                ("producer_epoch", producer_epoch, -(2**15), 2**15 - 1),
                ("base_sequence", base_sequence, -(2**31), 2**31 - 1),
                ("partition_leader_epoch", partition_leader_epoch, -(2**31), 2**31 - 1),
                ("log_append_time", -1 if log_append_time is None else log_append_time, -(2**63), 2**63 - 1),
                ("delete_horizon_ms", -1 if delete_horizon_ms is None else delete_horizon_ms, -(2**63), 2**63 - 1),
            ):
                if not isinstance(v, int) or not lo <= v <= hi:
                    raise ValueError(f"{name} out of range: {v!r}")
        self._codec = <int>codec
        self._log_append = ts_type == _LOG_APPEND_TIME
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._transactional = bool(is_transactional)
        self._control = bool(is_control_batch)
        self._partition_leader_epoch = partition_leader_epoch
        self._log_append_time = log_append_time
        self._level = compression_level
        self._delete_horizon_obj = delete_horizon_ms
        self._has_dh = delete_horizon_ms is not None
        self._delete_horizon = delete_horizon_ms if self._has_dh else -1
        self._keep = []
        # Header space, then room for the records: up to the write limit (capped).
        cap = _INITIAL_CAPACITY
        if self._has_limit and self._write_limit > 0:
            cap = (self._write_limit if self._write_limit < _MAX_PREALLOCATION
                   else _MAX_PREALLOCATION) + 512
        self._o.len = 0
        _reserve(&self._o, RECORD_BATCH_OVERHEAD + cap)
        self._o.len = RECORD_BATCH_OVERHEAD
        self._count = 0
        self._has_first = False
        self._first_ts = 0
        self._max_ts = -1
        self._has_last = False
        self._last_delta = -1

    # -- configuration, as the pure twin's attributes ------------------------------------------
    @property
    def magic(self):
        return self._magic

    @property
    def compression_type(self):
        return self._codec_obj

    @property
    def timestamp_type(self):
        return self._ts_type

    @property
    def base_offset(self):
        return self._base_offset_obj

    cdef int _v2_only(self, str name) except -1:
        if self._legacy is not None:
            raise AttributeError(f"'MemoryRecordsBuilder' object has no attribute '{name}'")
        return 0

    @property
    def producer_id(self):
        self._v2_only("producer_id")
        return self._producer_id

    @property
    def producer_epoch(self):
        self._v2_only("producer_epoch")
        return self._producer_epoch

    @property
    def base_sequence(self):
        self._v2_only("base_sequence")
        return self._base_sequence

    @property
    def is_transactional(self):
        self._v2_only("is_transactional")
        return self._transactional

    @property
    def is_control_batch(self):
        self._v2_only("is_control_batch")
        return self._control

    @property
    def partition_leader_epoch(self):
        self._v2_only("partition_leader_epoch")
        return self._partition_leader_epoch

    # -- appending ----------------------------------------------------------------------------
    cdef object _offset_obj(self, int64_t delta):
        if self._base_offset <= INT64_MAX - delta:
            return self._base_offset + delta
        return self._base_offset_obj + delta

    # The per-record methods are plain method descriptors (binding off: CPython's fastest call
    # path) with Argument-Clinic signatures, so inspect.signature() still sees them.
    @cython.binding(False)
    @cython.embedsignature.format("clinic")
    def append(self, timestamp, key, value, headers=()):
        """Append a record at the next offset; returns that offset."""
        cdef int64_t delta
        if self._legacy is not None:
            return self._legacy.append(timestamp, key, value, headers)
        delta = self._last_delta + 1 if self._has_last else 0
        if delta > INT32_MAX:
            raise InvalidOffsetError(
                f"offset {self._offset_obj(delta)} cannot be stored relative to base offset "
                f"{self._base_offset_obj}")
        self._append(delta, timestamp, key, value, headers, _COMMIT)
        return self._offset_obj(delta)

    @cython.binding(False)
    @cython.embedsignature.format("clinic")
    def try_append(self, timestamp, key, value, headers=()):
        """:meth:`has_room_for` then :meth:`append` in one call: the new record's offset, or
        None (and nothing appended) when it does not fit under ``write_limit``."""
        cdef int64_t delta
        if self._legacy is not None:
            return (<_LegacyBuilder>self._legacy)._try_append(timestamp, key, value, headers)
        if self._has_last and self._last_delta >= INT32_MAX:
            if not self.has_room_for(timestamp, key, value, headers):
                return None
            return self.append(timestamp, key, value, headers)
        delta = self._last_delta + 1 if self._has_last else 0
        if not self._append(delta, timestamp, key, value, headers, _COMMIT_IF_ROOM):
            return None
        return self._offset_obj(delta)

    @cython.binding(False)
    @cython.embedsignature.format("clinic")
    def append_with_offset(self, offset, timestamp, key, value, headers=()):
        """Append a record at ``offset`` (greater than the last one, within 2**31 - 1 of the base)."""
        if self._legacy is not None:
            return self._legacy.append_with_offset(offset, timestamp, key, value, headers)
        if not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if self._has_last:
            last = self._offset_obj(self._last_delta)
            if offset <= last:
                raise InvalidOffsetError(
                    f"Illegal offset {offset} following previous offset {last} "
                    f"(Offsets must increase monotonically).")
        base = self._base_offset_obj
        if offset < base or offset - base > 2147483647:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored relative to base offset {base}")
        self._append(offset - base, timestamp, key, value, headers, _COMMIT)

    cdef int _append(self, int64_t delta, object timestamp, object key, object value,
                     object headers, int mode) except -1:
        """Encode a record at offset base + delta behind the others.

        ``_COMMIT``: keep it (returns 1).  ``_COMMIT_IF_ROOM``: keep it only if it is the first
        record or the batch stays within ``write_limit`` (1 kept, 0 not).  Bytes written beyond
        the committed length are simply ignored.  Nothing changes when it raises.
        """
        cdef int64_t ts = _timestamp(timestamp)
        cdef int64_t first
        cdef _Bytes k, v
        cdef Py_ssize_t n, before = self._o.len
        cdef list keep = self._keep
        cdef int kept = 0
        if self._busy:
            raise RuntimeError("MemoryRecordsBuilder.append re-entered while appending")
        self._busy = True
        try:
            _get_bytes(key, &k, keep, "key")
            _get_bytes(value, &v, keep, "value")
            headers = _header_seq(headers)
            if self._has_first:
                first = self._first_ts
            elif self._has_dh:
                first = self._delete_horizon
            else:
                first = ts
            n = _encode_record(&self._o, <int32_t>delta,
                               <int64_t>(<uint64_t>ts - <uint64_t>first),
                               &k, &v, headers, keep)
            self._o.len = before
            if (mode == _COMMIT or self._count == 0 or not self._has_limit
                    or <int64_t>before + n <= self._write_limit):
                self._commit(delta, ts, first, n)
                kept = 1
        finally:
            # The state is consistent by now; objects released here may run __del__ code,
            # which must not append to this builder (it is still busy).
            if PyList_GET_SIZE(keep):
                del keep[:]
            self._busy = False
        return kept

    cdef inline void _commit(self, int64_t delta, int64_t ts, int64_t first, Py_ssize_t n) noexcept:
        """Keep the ``n`` record bytes written at the committed end."""
        self._o.len += n
        self._has_first = True
        self._first_ts = first
        self._count += 1
        if ts > self._max_ts:
            self._max_ts = ts
        self._has_last = True
        self._last_delta = delta

    def estimated_size_in_bytes(self):
        """Bytes of the batch if built now, before compression."""
        if self._legacy is not None:
            return self._legacy.estimated_size_in_bytes()
        return self._o.len

    @cython.binding(False)
    @cython.embedsignature.format("clinic")
    def has_room_for(self, timestamp, key, value, headers=()):
        """Whether the next record fits under ``write_limit`` (always true for the first record)."""
        cdef int64_t ts
        cdef Py_ssize_t klen, vlen, size
        if self._legacy is not None:
            return self._legacy.has_room_for(timestamp, key, value, headers)
        if self._count == 0 or not self._has_limit:
            return True
        ts = _timestamp(timestamp)
        klen = _byte_len(key, "key")
        vlen = _byte_len(value, "value")
        headers = _header_seq(headers)
        size = _record_size_c(<int32_t>(<uint32_t>(self._last_delta + 1)),
                              <int64_t>(<uint64_t>ts - <uint64_t>self._first_ts),
                              klen, vlen, headers)
        return <int64_t>self._o.len + size <= self._write_limit

    @property
    def records_count(self):
        if self._legacy is not None:
            return self._legacy.records_count
        return self._count

    def __len__(self):
        if self._legacy is not None:
            return self._legacy.records_count
        return self._count

    # -- building -----------------------------------------------------------------------------
    def build(self):
        """The batch bytes (b"" when no record was appended)."""
        cdef int attributes
        cdef int64_t max_ts
        cdef Py_ssize_t total
        cdef uint8_t* p
        cdef Py_buffer view
        if self._legacy is not None:
            return self._legacy.build()
        if self._count == 0:
            return b""
        attributes = self._codec
        if self._log_append:
            attributes |= TIMESTAMP_TYPE_MASK
            if self._log_append_time is not None:
                max_ts = self._log_append_time
            else:
                max_ts = int(_time.time() * 1000)
        else:
            max_ts = self._max_ts
        if self._transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self._control:
            attributes |= CONTROL_FLAG_MASK
        if self._has_dh:
            attributes |= DELETE_HORIZON_FLAG_MASK
        if self._codec == 0:
            total = self._o.len
            self._check_size(total)
            p = self._o.buf
            self._write_header(p, total, attributes, max_ts)
            _put32(p + CRC_OFFSET, _crc32c(p + ATTRIBUTES_OFFSET, total - ATTRIBUTES_OFFSET))
            return PyBytes_FromStringAndSize(<const char*>p, total)
        raw = PyBytes_FromStringAndSize(<const char*>self._o.buf + RECORD_BATCH_OVERHEAD,
                                        self._o.len - RECORD_BATCH_OVERHEAD)
        compressed = _compression_mod().compress(self._codec, raw, magic=2, level=self._level)
        del raw
        PyObject_GetBuffer(compressed, &view, PyBUF_SIMPLE)
        try:
            total = RECORD_BATCH_OVERHEAD + view.len
            self._check_size(total)
            out = PyBytes_FromStringAndSize(NULL, total)
            p = <uint8_t*>PyBytes_AS_STRING(out)
            memcpy(p + RECORD_BATCH_OVERHEAD, view.buf, <size_t>view.len)
        finally:
            PyBuffer_Release(&view)
        self._write_header(p, total, attributes, max_ts)
        _put32(p + CRC_OFFSET, _crc32c(p + ATTRIBUTES_OFFSET, total - ATTRIBUTES_OFFSET))
        return out

    cdef int _check_size(self, Py_ssize_t size) except -1:
        if size - LOG_OVERHEAD > INT32_MAX:
            raise RecordTooLargeError(
                f"Record batch of {size} bytes is larger than the format allows "
                f"({<int64_t>INT32_MAX + LOG_OVERHEAD} bytes)")
        return 0

    cdef void _write_header(self, uint8_t* p, Py_ssize_t total, int attributes,
                            int64_t max_ts) noexcept:
        _put64(p, <uint64_t>self._base_offset)
        _put32(p + 8, <uint32_t>(total - LOG_OVERHEAD))
        _put32(p + 12, <uint32_t>self._partition_leader_epoch)
        p[16] = 2
        _put32(p + 17, 0)
        _put16(p + 21, <uint16_t>attributes)
        _put32(p + 23, <uint32_t>self._last_delta)
        _put64(p + 27, <uint64_t>self._first_ts)
        _put64(p + 35, <uint64_t>max_ts)
        _put64(p + 43, <uint64_t>self._producer_id)
        _put16(p + 51, <uint16_t>self._producer_epoch)
        _put32(p + 53, <uint32_t>self._base_sequence)
        _put32(p + 57, <uint32_t>self._count)

# -- framing a run of log entries (the read model's scans) -------------------------------------
def walk_frames(buf, Py_ssize_t p, Py_ssize_t n, Py_ssize_t left, long long end,
                long long max_size, long long seen, bint stop_at_gaps=False):
    """Walk the well-framed whole log entries of ``buf[p:n]`` (see ``_batch_py.walk_frames``):
    ``(position of the first entry not walked, the offset after the last one walked)``."""
    cdef Py_buffer view
    cdef const uint8_t* d
    cdef int64_t off, total, delta, noff
    cdef int32_t length, nlen
    cdef uint8_t magic, nmagic
    cdef Py_ssize_t q
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if p < 0 or p > n or n > view.len:
            raise ValueError(f"walk_frames: bad range [{p}, {n}) of {view.len} bytes")
        d = <const uint8_t*>view.buf
        while n - p >= 17:
            off = <int64_t>_be64(d + p)
            length = <int32_t>_be32(d + p + 8)
            magic = d[p + 16]
            total = <int64_t>length + 12
            if (length < 14 or magic > 2 or (magic == 2 and total < 61) or total > left - p
                    or length > max_size):
                break
            if off < seen or off > 0x7FFFFFFF00000000 or (end >= 0 and off >= end):
                break
            if total > n - p:
                break
            if stop_at_gaps and off > seen:
                # a gap: the entry after it says whether it is one (the caller judges where
                # that entry's header is not here, or it goes on from below the jump)
                q = p + total
                if n - q < 17:
                    break
                nlen = <int32_t>_be32(d + q + 8)
                nmagic = d[q + 16]
                noff = <int64_t>_be64(d + q)
                if (nlen >= 14 and nmagic <= 2 and (nmagic != 2 or nlen >= 49)
                        and seen <= noff < off):
                    break
            if magic == 2:
                delta = <int32_t>_be32(d + p + 23)
                seen = off + delta + 1
            else:
                seen = off + 1
            p += total
    finally:
        PyBuffer_Release(&view)
    return p, seen
