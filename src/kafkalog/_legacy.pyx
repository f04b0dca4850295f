"""Legacy messages, magic v0 and v1 (Kafka's LegacyRecord / AbstractLegacyRecordBatch /
the legacy half of MemoryRecordsBuilder) - the compiled twin of ``_legacy_py``.

Layout of one log entry (big-endian; see ``_format``)::

    offset int64 | size int32 | crc uint32 (CRC-32 of magic..end) | magic int8 (0 or 1)
    attributes int8 | [timestamp int64, v1 only] | keyLength int32 | key | valueLength int32 | value

A compressed entry is a wrapper whose value holds the compressed inner entries (absolute
offsets for magic 0; relative for magic 1, rebased on ``wrapper offset - last inner offset``,
a wrapper offset of 0 meaning "as they are").  Behaviour, results, errors and messages are
those of ``_legacy_py``; see its docstrings.

Every read goes through a pointer whose bounds were checked against the end of the entry (or of
the decompressed inner set) before the read.  CRC-32 comes from ``_csrc/crc32.h`` (PCLMULQDQ
folding on x86-64 when the CPU has it, slicing-by-8 tables otherwise).  Compiled callers can
build batches without a Python-level call through ``make_legacy_batch`` (see ``_legacy.pxd``).
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

# big-endian access (callers check bounds first)
from kafkalog._buffers cimport be32 as _u32, put_be32 as _put32, put_be64 as _put64

import time

from kafkalog import _records_common
from kafkalog._format import (
    COMPRESSION_TYPES,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionType,
    TimestampType,
)
from kafkalog.errors import CorruptRecordError, InvalidOffsetError, InvalidRecordError, KafkaLogError

cdef extern from "crc32.h" nogil:
    void kl_crc32_init()
    uint32_t kl_crc32(uint32_t crc, const unsigned char *buf, size_t len)
    uint32_t kl_crc32_sw(uint32_t crc, const unsigned char *buf, size_t len)
    int kl_crc32_hw_available()

kl_crc32_init()

__all__ = ["LegacyRecord", "LegacyRecordBatch", "LegacyRecordsBuilder", "record_size"]

# Mirrors of the _format constants this module needs (tests/test_legacy.py checks them).
cdef enum:
    LOG_OVERHEAD = 12
    RECORD_OVERHEAD_V0 = 14
    RECORD_OVERHEAD_V1 = 22
    TS_MASK = 0x08
    CODEC_MASK = 0x07

cdef int64_t I64_MAX = 0x7FFFFFFFFFFFFFFF
cdef object PY_I64_MAX = 2**63 - 1
cdef object PY_I64_MIN = -(2**63)
cdef object PY_I32_MAX = 2**31 - 1

cdef tuple _TS_TYPES = (
    TimestampType.NO_TIMESTAMP_TYPE,
    TimestampType.CREATE_TIME,
    TimestampType.LOG_APPEND_TIME,
)
cdef tuple _CODECS = COMPRESSION_TYPES
cdef tuple _NO_HEADERS = ()
cdef object _LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
cdef object _NO_TIMESTAMP_TYPE = TimestampType.NO_TIMESTAMP_TYPE
cdef object _compression = None


cdef object _codecs():
    global _compression
    if _compression is None:
        from kafkalog import compression
        _compression = compression
    return _compression


# -- signed big-endian fields (over _buffers.pxd's loads; callers check bounds first) -------------
cdef inline int32_t _i32(const uint8_t* p) noexcept nogil:
    return <int32_t>_u32(p)


cdef inline int64_t _i64(const uint8_t* p) noexcept nogil:
    return <int64_t>(((<uint64_t>_u32(p)) << 32) | _u32(p + 4))


cdef inline int _header_size(int magic) noexcept nogil:
    return RECORD_OVERHEAD_V1 if magic else RECORD_OVERHEAD_V0


cdef object _as_bytes_or_none(object x, str what):
    if x is None:
        return None
    if type(x) is bytes:
        return x
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, not {type(x).__name__}")


def _crc32(data, value=0, software=False):
    """CRC-32 (zlib's) of a contiguous buffer, chained from ``value``; ``software`` forces the
    table path.  For tests of the C implementation."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef uint32_t v = value
    if mv.shape[0] == 0:
        return v
    if software:
        return kl_crc32_sw(v, &mv[0], mv.shape[0])
    return kl_crc32(v, &mv[0], mv.shape[0])


_CRC32_HARDWARE = bool(kl_crc32_hw_available())


def record_size(magic, key, value):
    """Size of one message without the 12-byte log overhead (Kafka's LegacyRecord.recordSize)."""
    return (
        (RECORD_OVERHEAD_V1 if magic else RECORD_OVERHEAD_V0)
        + (len(key) if key is not None else 0)
        + (len(value) if value is not None else 0)
    )


# =============================================================================================
# LegacyRecord
# =============================================================================================
@cython.final
@cython.freelist(256)
@cython.no_gc
cdef class LegacyRecord:
    """One legacy message (magic 0 or 1): ``offset``, ``timestamp`` (ms, -1 for magic 0),
    ``key``, ``value`` (bytes or None) and ``headers`` (always ``()``), plus the message's own
    ``magic``, ``attributes``, stored ``crc`` and ``timestamp_type``.

    Inner messages of a compressed wrapper report absolute offsets, the wrapper's timestamp
    type and, under LogAppendTime, the wrapper's timestamp; :meth:`is_valid` still checks the
    CRC of the bytes as stored.  ``size_in_bytes`` is the message size without the 12-byte log
    overhead (Kafka's ``LegacyRecord.sizeInBytes``).

    ``LegacyRecord(offset, timestamp, key, value, magic=1, attributes=0)`` builds one by
    hand; its CRC is computed from the fields.
    """

    def __init__(self, offset, timestamp, key, value, magic=1, attributes=0):
        if magic not in (0, 1):
            raise ValueError(f"magic must be 0 or 1, not {magic!r}")
        if not isinstance(offset, int) or not PY_I64_MIN <= offset <= PY_I64_MAX:
            raise ValueError(f"offset out of range: {offset!r}")
        if not isinstance(timestamp, int) or not PY_I64_MIN <= timestamp <= PY_I64_MAX:
            raise ValueError(f"timestamp out of range: {timestamp!r}")
        if not isinstance(attributes, int) or not -128 <= attributes <= 127:
            raise ValueError(f"attributes must be an int8, not {attributes!r}")
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        self.offset = int(offset)
        self.key = key
        self.value = value
        self.headers = _NO_HEADERS
        self.magic = magic
        self.attributes = attributes
        if magic == 0:
            self.timestamp = -1
            self._raw_ts = -1
            self._ts_type = -1
        else:
            self.timestamp = int(timestamp)
            self._raw_ts = timestamp
            self._ts_type = 1 if attributes & TS_MASK else 0
        self._klen = -1 if key is None else len(key)
        self._vlen = -1 if value is None else len(value)
        self._trailing = None
        self.crc = self._checksum()

    @property
    def timestamp_type(self):
        """NO_TIMESTAMP_TYPE for magic 0; for an inner message, its wrapper's type."""
        return _TS_TYPES[self._ts_type + 1]

    @property
    def compression_type(self):
        cdef int c = self.attributes & CODEC_MASK
        if c > 4:
            raise CorruptRecordError(f"Unknown compression type id {c}", None, self.offset)
        return _CODECS[c]

    @property
    def is_compressed(self):
        return (self.attributes & CODEC_MASK) != 0

    @property
    def size_in_bytes(self):
        cdef Py_ssize_t n = _header_size(self.magic)
        if self._klen > 0:
            n += self._klen
        if self._vlen > 0:
            n += self._vlen
        if self._trailing is not None:
            n += PyBytes_GET_SIZE(self._trailing)
        return n

    cdef uint32_t _checksum(self):
        cdef uint8_t head[14]
        cdef Py_ssize_t h
        cdef uint32_t crc
        head[0] = <uint8_t>self.magic
        head[1] = <uint8_t>self.attributes
        if self.magic:
            _put64(head + 2, <uint64_t>self._raw_ts)
            _put32(head + 10, <uint32_t>self._klen)
            h = 14
        else:
            _put32(head + 2, <uint32_t>self._klen)
            h = 6
        crc = kl_crc32(0, head, h)
        if self.key is not None:
            crc = kl_crc32(crc, <const uint8_t*>PyBytes_AS_STRING(self.key), PyBytes_GET_SIZE(self.key))
        _put32(head, <uint32_t>self._vlen)
        crc = kl_crc32(crc, head, 4)
        if self.value is not None:
            crc = kl_crc32(crc, <const uint8_t*>PyBytes_AS_STRING(self.value), PyBytes_GET_SIZE(self.value))
        if self._trailing is not None:
            crc = kl_crc32(crc, <const uint8_t*>PyBytes_AS_STRING(self._trailing),
                           PyBytes_GET_SIZE(self._trailing))
        return crc

    def compute_checksum(self):
        """CRC-32 of the message as stored, from the magic byte to its end."""
        return self._checksum()

    def is_valid(self):
        return self._checksum() == self.crc

    def ensure_valid(self):
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the bytes."""
        cdef uint32_t computed = self._checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                None,
                self.offset,
            )

    def __eq__(self, other):
        if not isinstance(other, _records_common.EQ_CLASSES):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and tuple(other.headers) == ()
        )

    def __ne__(self, other):
        eq = self.__eq__(other)
        if eq is NotImplemented:
            return eq
        return not eq

    __hash__ = None

    def __repr__(self):
        return (
            f"LegacyRecord(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, magic={self.magic}, attributes={self.attributes}, "
            f"crc={self.crc})"
        )


# -- fast attribute access -------------------------------------------------------------------
# Cython exposes cdef attributes through getset descriptors, which CPython's attribute-load
# specialisation does not handle: every ``record.key`` takes the generic lookup path (~25 ns).
# A T_OBJECT_EX member descriptor (what ``__slots__`` creates) is specialised to a pointer load
# (LOAD_ATTR_SLOT, ~5 ns).  The five attributes every consumer loop reads are object fields, so
# they get member descriptors: their struct offsets are found by planting a sentinel in each
# field of a probe instance and scanning the instance for it (no dependence on Cython's struct
# names); if any lookup fails the getset descriptors simply stay.  Both are read-only.
cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    enum:
        T_OBJECT_EX
        READONLY

cdef extern from "Python.h":
    object PyDescr_NewMember(PyTypeObject* t, PyMemberDef* m)
    void PyType_Modified(PyTypeObject* t)

cdef PyMemberDef _record_members[5]


cdef Py_ssize_t _slot_offset(object o, object sentinel):
    cdef char* base = <char*><PyObject*>o
    cdef Py_ssize_t n = Py_TYPE(o).tp_basicsize
    cdef Py_ssize_t off = sizeof(PyObject)
    cdef Py_ssize_t found = -1
    while off + <Py_ssize_t>sizeof(void*) <= n:
        if (<PyObject**>(base + off))[0] == <PyObject*>sentinel:
            if found != -1:
                return -1
            found = off
        off += sizeof(void*)
    return found


cdef int _install_member_descriptors() except -1:
    cdef LegacyRecord probe = LegacyRecord.__new__(LegacyRecord)
    cdef PyTypeObject* tp = <PyTypeObject*>LegacyRecord
    cdef Py_ssize_t offs[5]
    cdef int i
    names = (b"offset", b"timestamp", b"key", b"value", b"headers")
    sentinels = [object() for _ in range(4)] + [(object(),)]
    probe.offset, probe.timestamp, probe.key, probe.value, probe.headers = sentinels
    for i in range(5):
        offs[i] = _slot_offset(probe, sentinels[i])
        if offs[i] < 0:
            return 0
    probe.offset = probe.timestamp = probe.key = probe.value = None
    probe.headers = None
    for i in range(5):
        _record_members[i].name = _MEMBER_NAMES[i]
        _record_members[i].type = T_OBJECT_EX
        _record_members[i].offset = offs[i]
        _record_members[i].flags = READONLY
        _record_members[i].doc = NULL
    for i in range(5):
        (<dict>tp.tp_dict)[names[i].decode()] = PyDescr_NewMember(tp, &_record_members[i])
    PyType_Modified(tp)
    return 0


cdef const char* _MEMBER_NAMES[5]
_MEMBER_NAMES[0] = "offset"
_MEMBER_NAMES[1] = "timestamp"
_MEMBER_NAMES[2] = "key"
_MEMBER_NAMES[3] = "value"
_MEMBER_NAMES[4] = "headers"
_install_member_descriptors()


cdef LegacyRecord _parse_message(const uint8_t* m, Py_ssize_t size, int64_t offset,
                                 Py_ssize_t where, int64_t where_offset, bint inner):
    """Parse the message ``m[0:size]`` (from its CRC field; ``size`` >= 14 checked by the
    caller) into a LegacyRecord with ``offset``.  Errors report ``where``/``where_offset``."""
    cdef int magic = <int8_t>m[4]
    cdef int attrs = <int8_t>m[5]
    cdef int64_t raw_ts
    cdef Py_ssize_t p
    cdef int32_t klen, vlen
    cdef LegacyRecord rec
    cdef str what
    if magic != 0 and magic != 1:
        what = "inner message" if inner else "message"
        raise CorruptRecordError(f"Invalid magic {magic} in legacy {what}", where, where_offset)
    if magic:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(
                f"Record size {size} is smaller than the minimum v1 record overhead "
                f"({RECORD_OVERHEAD_V1})",
                where,
                where_offset,
            )
        raw_ts = _i64(m + 6)
        p = 14
    else:
        raw_ts = -1
        p = 6
    # p + 8 <= size here (both length fields fit: size >= header size)
    klen = _i32(m + p)
    p += 4
    rec = LegacyRecord.__new__(LegacyRecord)
    if klen >= 0:
        if klen > size - p - 4:
            what = "inner message" if inner else "message"
            raise CorruptRecordError(
                f"Found invalid {what} structure: key size {klen} runs past the end of the "
                f"{size}-byte message",
                where,
                where_offset,
            )
        rec.key = PyBytes_FromStringAndSize(<const char*>m + p, klen)
        p += klen
    else:
        rec.key = None
    vlen = _i32(m + p)
    p += 4
    if vlen >= 0:
        if vlen > size - p:
            what = "inner message" if inner else "message"
            raise CorruptRecordError(
                f"Found invalid {what} structure: value size {vlen} runs past the end of the "
                f"{size}-byte message",
                where,
                where_offset,
            )
        rec.value = PyBytes_FromStringAndSize(<const char*>m + p, vlen)
        p += vlen
    else:
        rec.value = None
    rec.offset = offset
    rec.timestamp = raw_ts
    rec.headers = _NO_HEADERS
    rec.magic = magic
    rec.attributes = attrs
    rec.crc = _u32(m)
    rec._ts_type = ((1 if attrs & TS_MASK else 0) if magic else -1)
    rec._raw_ts = raw_ts
    rec._klen = klen
    rec._vlen = vlen
    if p < size:
        rec._trailing = PyBytes_FromStringAndSize(<const char*>m + p, size - p)
    else:
        rec._trailing = None
    return rec


cdef list _parse_inner(object data, int wrapper_magic, int64_t wrapper_offset, int64_t wrapper_ts,
                       bint log_append_time, bint check_crc, Py_ssize_t where):
    """Kafka's DeepRecordsIterator over the decompressed value of a wrapper."""
    cdef const uint8_t* buf = <const uint8_t*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0
    cdef int64_t offset, base, o, last_inner
    cdef int32_t size
    cdef uint32_t computed
    cdef LegacyRecord rec
    cdef list out = []
    while n - pos >= LOG_OVERHEAD:
        offset = _i64(buf + pos)
        size = _i32(buf + pos + 8)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Inner record size {size} is less than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                where,
                wrapper_offset,
            )
        if size > n - pos - LOG_OVERHEAD:
            break  # a partial trailing inner entry ends the set (Kafka's DataLogInputStream)
        rec = _parse_message(buf + pos + LOG_OVERHEAD, size, offset, where, wrapper_offset, True)
        if rec.attributes & CODEC_MASK:
            raise InvalidRecordError(
                "Inner messages must not be compressed (nested wrapper)", where, wrapper_offset
            )
        if check_crc:
            computed = kl_crc32(0, buf + pos + LOG_OVERHEAD + 4, size - 4)
            if computed != rec.crc:
                raise CorruptRecordError(
                    f"Inner record at offset {offset} is corrupt (stored crc = {rec.crc}, "
                    f"computed crc = {computed})",
                    where,
                    wrapper_offset,
                )
        if rec.magic:
            if wrapper_magic == 0:
                rec._ts_type = -1
            elif log_append_time:
                rec._ts_type = 1
                rec.timestamp = wrapper_ts
            else:
                rec._ts_type = 0
        out.append(rec)
        pos += LOG_OVERHEAD + size
    if not out:
        raise InvalidRecordError(
            "Found invalid compressed record set with no inner records", where, wrapper_offset
        )
    if wrapper_magic == 1:
        if wrapper_offset == 0:
            base = 0
        else:
            last_inner = <int64_t>(<LegacyRecord>out[len(out) - 1]).offset
            if wrapper_offset < last_inner:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper_offset}' is less than the last inner message offset "
                    f"'{last_inner}' and it is not zero.",
                    where,
                    wrapper_offset,
                )
            if last_inner < 0:
                # a negative inner offset (never written by Kafka): rebase in Python integers,
                # since wrapper_offset - last_inner may not fit an int64
                pybase = <object>wrapper_offset - <object>last_inner
                for r in out:
                    rec = <LegacyRecord>r
                    pyo = rec.offset + pybase
                    if pyo > PY_I64_MAX:
                        raise InvalidRecordError(
                            f"Inner message offset {rec.offset} overflows when rebased on {pybase}",
                            where,
                            wrapper_offset,
                        )
                    rec.offset = pyo
                return out
            base = wrapper_offset - last_inner  # 0 <= base <= wrapper_offset: no overflow
        if base:
            for r in out:
                rec = <LegacyRecord>r
                o = <int64_t>rec.offset
                if o > I64_MAX - base:
                    raise InvalidRecordError(
                        f"Inner message offset {o} overflows when rebased on {base}",
                        where,
                        wrapper_offset,
                    )
                rec.offset = o + base
    return out


_records_common.register_record_class(LegacyRecord)


# =============================================================================================
# LegacyRecordBatch
# =============================================================================================
@cython.final
@cython.freelist(64)
@cython.no_gc  # holds no back-references; if GC-tracked, clearing a cycle that reaches it could
               # clear the memoryview it exports before the export is released (BufferError)
cdef class LegacyRecordBatch:
    """One legacy log entry (magic 0 or 1), read in place from a buffer: Kafka's
    AbstractLegacyRecordBatch, with the same attributes as the v2 :class:`RecordBatch`.

    An uncompressed entry holds one message; a compressed one is a wrapper whose value holds the
    inner messages.  ``base_offset``, ``last_offset_delta``, ``records_count`` and ``len()`` of
    a wrapper need the inner messages, so the first of them decompresses the wrapper (once;
    the result is cached).  Iterating (or :meth:`records`) yields :class:`LegacyRecord` objects
    with absolute offsets; with ``check_crc`` (the default) the CRC of the entry, and of every
    inner message, is verified first.  Errors carry the entry's ``position`` and ``offset``.
    """

    def __init__(self, buffer, position=0, *, check_crc=True,
                 max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        cdef const uint8_t* base
        cdef Py_ssize_t buflen, pos
        if self._has_view or self._obj is not None:
            raise TypeError("LegacyRecordBatch.__init__ called twice")
        if type(buffer) is bytes:
            base = <const uint8_t*>PyBytes_AS_STRING(buffer)
            buflen = PyBytes_GET_SIZE(buffer)
            self._owner = buffer
        else:
            PyObject_GetBuffer(buffer, &self._view, PyBUF_SIMPLE)
            self._has_view = True
            base = <const uint8_t*>self._view.buf
            buflen = self._view.len
        try:
            pos = position
        except OverflowError:  # beyond Py_ssize_t: certainly outside the buffer
            raise CorruptRecordError(
                f"Legacy log entry is truncated: {max(buflen - position, 0)} bytes, less than the "
                f"{LOG_OVERHEAD}-byte log overhead",
                position,
            ) from None
        self._setup(buffer, base, buflen, pos, check_crc, max_decompressed_size)

    def __dealloc__(self):
        if self._has_view:
            self._has_view = False
            PyBuffer_Release(&self._view)

    cdef int _setup(self, object buffer, const uint8_t* base, Py_ssize_t buflen,
                    Py_ssize_t position, bint check_crc, object max_decompressed) except -1:
        cdef Py_ssize_t avail
        cdef const uint8_t* p
        cdef int64_t offset
        cdef int32_t size
        cdef int magic
        if position < 0 or position > buflen or buflen - position < LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Legacy log entry is truncated: {max(<object>buflen - <object>position, 0)} bytes, "
                f"less than the {LOG_OVERHEAD}-byte log overhead",
                position,
            )
        avail = buflen - position
        p = base + position
        offset = _i64(p)
        size = _i32(p + 8)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size {size} is smaller than the minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                position,
                offset,
            )
        if size > avail - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"Legacy log entry is truncated: its size is {size + LOG_OVERHEAD} bytes but "
                f"only {avail} remain",
                position,
                offset,
            )
        magic = <int8_t>p[16]
        if magic != 0 and magic != 1:
            raise CorruptRecordError(f"Invalid magic {magic} for a legacy (v0/v1) message", position, offset)
        if magic:
            if size < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(
                    f"Record size {size} is smaller than the minimum v1 record overhead "
                    f"({RECORD_OVERHEAD_V1})",
                    position,
                    offset,
                )
            self.timestamp = _i64(p + 18)
        else:
            self.timestamp = -1
        self._obj = buffer
        self._p = p
        self.position = position
        self.offset = offset
        self.length = size
        self.crc = _u32(p + 12)
        self.magic = magic
        self.attributes = <int8_t>p[17]
        self._check_crc = check_crc
        self._max_decompressed = max_decompressed
        self._inner = None
        return 0

    # -- header facts (same names as the v2 RecordBatch) ------------------------------------------
    @property
    def partition_leader_epoch(self):
        return -1

    @property
    def producer_id(self):
        return -1

    @property
    def producer_epoch(self):
        return -1

    @property
    def base_sequence(self):
        return -1

    @property
    def last_sequence(self):
        return -1

    @property
    def is_transactional(self):
        return False

    @property
    def is_control_batch(self):
        return False

    @property
    def has_producer_id(self):
        return False

    @property
    def has_delete_horizon(self):
        return False

    @property
    def delete_horizon_ms(self):
        return None

    @property
    def size_in_bytes(self):
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self):
        """The entry's offset: the (last) message's absolute offset."""
        return self.offset

    @property
    def next_offset(self):
        return self.offset + 1

    @property
    def base_offset(self):
        """The first message's offset (decompresses a wrapper)."""
        if self.attributes & CODEC_MASK == 0:
            return self.offset
        inner = self._load()
        if not inner:  # an empty compressed set (read leniently): the entry's own offset
            return self.offset
        return (<LegacyRecord>inner[0]).offset

    @property
    def last_offset_delta(self):
        return self.offset - self.base_offset

    @property
    def base_timestamp(self):
        return self.timestamp

    @property
    def max_timestamp(self):
        return self.timestamp

    @property
    def records_count(self):
        if self.attributes & CODEC_MASK == 0:
            return 1
        return len(self._load())

    @property
    def compression_type(self):
        cdef int c = self.attributes & CODEC_MASK
        if c > 4:
            raise CorruptRecordError(f"Unknown compression type id {c}", self.position, self.offset)
        return _CODECS[c]

    @property
    def is_compressed(self):
        return (self.attributes & CODEC_MASK) != 0

    @property
    def timestamp_type(self):
        if self.magic == 0:
            return _NO_TIMESTAMP_TYPE
        return _TS_TYPES[2 if self.attributes & TS_MASK else 1]

    @property
    def wrapper(self):
        """The entry's own message (for a wrapper: null key, compressed value)."""
        return self._outer()

    cdef LegacyRecord _outer(self):
        return _parse_message(self._p + LOG_OVERHEAD, self.length, self.offset,
                              self.position, self.offset, False)

    # -- integrity ----------------------------------------------------------------------------------
    def compute_checksum(self):
        """CRC-32 of the message from the magic byte to the end of the entry."""
        return kl_crc32(0, self._p + 16, self.length - 4)

    def is_valid(self):
        return kl_crc32(0, self._p + 16, self.length - 4) == self.crc

    cdef int _ensure_valid(self) except -1:
        cdef uint32_t computed = kl_crc32(0, self._p + 16, self.length - 4)
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                self.position,
                self.offset,
            )
        return 0

    def ensure_valid(self):
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the bytes."""
        self._ensure_valid()

    # -- records -------------------------------------------------------------------------------------
    def view(self):
        """The entry's bytes, without copying."""
        mv = memoryview(self._obj)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        return mv[self.position : self.position + LOG_OVERHEAD + self.length]

    def records_section(self):
        """The entry's message set: for a wrapper its value decompressed (the inner entries),
        otherwise the entry itself (a message set of one)."""
        cdef int codec = self.attributes & CODEC_MASK
        if codec == 0:
            return self.view()
        if codec > 4:
            raise CorruptRecordError(f"Unknown compression type id {codec}", self.position, self.offset)
        value = self._outer().value
        if value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self.magic})",
                self.position,
                self.offset,
            )
        try:
            return _codecs().decompress(codec, value, magic=self.magic, max_size=self._max_decompressed)
        except KafkaLogError as e:
            e.position = self.position
            e.offset = self.offset
            raise

    cdef list _load(self):
        """The inner messages of a wrapper (Kafka's DeepRecordsIterator), cached."""
        cdef int codec
        cdef LegacyRecord wrapper
        if self._inner is not None:
            return self._inner
        codec = self.attributes & CODEC_MASK
        if codec > 4:
            raise CorruptRecordError(f"Unknown compression type id {codec}", self.position, self.offset)
        # zstd below magic 2 is refused by brokers on produce but written by some clients
        # (sarama): it is read leniently, as every other codec.
        if self._check_crc:
            self._ensure_valid()
        wrapper = self._outer()
        if wrapper.value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self.magic})",
                self.position,
                self.offset,
            )
        try:
            data = _codecs().decompress(
                codec, wrapper.value, magic=self.magic, max_size=self._max_decompressed
            )
        except KafkaLogError as e:
            e.position = self.position
            e.offset = self.offset
            raise
        if type(data) is not bytes:
            data = bytes(data)
        if not data:
            # A wrapper compressing an empty message set (written by some clients): no records.
            self._inner = []
            return self._inner
        self._inner = _parse_inner(
            data, self.magic, self.offset, self.timestamp,
            (self.attributes & TS_MASK) != 0, self._check_crc, self.position,
        )
        return self._inner

    def records(self):
        """The messages of the entry as a list, with absolute offsets."""
        if self.attributes & CODEC_MASK == 0:
            if self._check_crc:
                self._ensure_valid()
            return [self._outer()]
        return list(self._load())

    def __iter__(self):
        cdef _LegacyIter it = _LegacyIter.__new__(_LegacyIter)
        if self.attributes & CODEC_MASK == 0:
            if self._check_crc:
                self._ensure_valid()
            it._single = self._outer()
        else:
            it._items = self._load()
        return it

    def __len__(self):
        if self.attributes & CODEC_MASK == 0:
            return 1
        return len(self._load())

    def __repr__(self):
        cdef int c = self.attributes & CODEC_MASK
        codec = _CODECS[c].kafka_name if c <= 4 else f"unknown({c})"
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.offset}, compression={codec}, "
            f"size={self.length + LOG_OVERHEAD}, position={self.position})"
        )


@cython.final
@cython.freelist(16)
@cython.no_gc
cdef class _LegacyIter:
    """Iterator over the messages of one entry: one record, or the cached inner list."""
    cdef LegacyRecord _single
    cdef list _items
    cdef Py_ssize_t _i

    def __iter__(self):
        return self

    def __next__(self):
        cdef LegacyRecord rec
        if self._single is not None:
            rec = self._single
            self._single = None
            return rec
        if self._items is not None and self._i < len(self._items):
            self._i += 1
            return self._items[self._i - 1]
        raise StopIteration


cdef LegacyRecordBatch make_legacy_batch(object buffer, object owner, const uint8_t* base,
                                         Py_ssize_t buflen, Py_ssize_t position,
                                         bint check_crc, object max_decompressed):
    """Fast constructor for compiled callers (see ``_legacy.pxd``)."""
    cdef LegacyRecordBatch batch = LegacyRecordBatch.__new__(LegacyRecordBatch)
    if owner is None:
        PyObject_GetBuffer(buffer, &batch._view, PyBUF_SIMPLE)
        batch._has_view = True
        base = <const uint8_t*>batch._view.buf
        buflen = batch._view.len
    else:
        batch._owner = owner
    batch._setup(buffer, base, buflen, position, check_crc, max_decompressed)
    return batch


# =============================================================================================
# LegacyRecordsBuilder
# =============================================================================================
@cython.final
cdef class LegacyRecordsBuilder:
    """Write legacy messages (magic 0 or 1) as Kafka's MemoryRecordsBuilder does.

    Uncompressed: one log entry per message, carrying its absolute offset.  Compressed: one
    wrapper entry whose value is the compressed inner entries; for magic 1 the inner offsets are
    relative (offset - ``base_offset``) and the wrapper carries the last absolute offset, for
    magic 0 inner offsets are absolute.  The wrapper's timestamp is the largest inner timestamp
    (CreateTime) or the append time (LogAppendTime); under LogAppendTime every message (inner
    ones included) is written with the append time and the LogAppendTime attribute bit, as
    Kafka's builder writes them.  Magic 0 has no timestamps (they are accepted and dropped).

    ``log_append_time`` defaults to the current time in ms when :meth:`build` runs.  zstd is
    refused (``ValueError``), like Kafka ("ZStandard compression is not supported for magic
    0/1"), and so are record headers.
    """

    # attributes and C methods: declared in _legacy.pxd (the compiled MemoryRecordsBuilder
    # calls _try_append directly)

    def __cinit__(self):
        self._buf = NULL
        self._len = 0
        self._cap = 0
        self._count = 0

    def __dealloc__(self):
        if self._buf != NULL:
            PyMem_Free(self._buf)
            self._buf = NULL

    def __init__(self, magic, compression_type, base_offset, timestamp_type, *,
                 write_limit=None, log_append_time=None, compression_level=None):
        if isinstance(magic, bool) or magic not in (0, 1):
            raise ValueError(f"magic must be 0 or 1 for legacy messages, not {magic!r}")
        codec = CompressionType.parse(compression_type)
        if codec == CompressionType.ZSTD:
            raise ValueError(f"ZStandard compression is not supported for magic {magic}")
        ts_type = TimestampType.parse(timestamp_type)
        if magic == 1 and ts_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("TimestampType must be set for magic >= 1")
        if isinstance(base_offset, bool) or not isinstance(base_offset, int) or not PY_I64_MIN <= base_offset <= PY_I64_MAX:
            raise ValueError(f"base_offset out of range: {base_offset!r}")
        if log_append_time is not None and (
            isinstance(log_append_time, bool)
            or not isinstance(log_append_time, int)
            or not PY_I64_MIN <= log_append_time <= PY_I64_MAX
        ):
            raise ValueError(f"log_append_time out of range: {log_append_time!r}")
        self.magic = magic
        self.compression_type = codec
        self.timestamp_type = ts_type
        self.base_offset = base_offset
        self._write_limit = write_limit
        self._c_limit = isinstance(write_limit, int) and not isinstance(write_limit, bool)
        if self._c_limit:
            self._limit = (PY_I64_MAX if write_limit > PY_I64_MAX
                           else PY_I64_MIN if write_limit < PY_I64_MIN else write_limit)
        self._log_append_time = log_append_time
        self._level = compression_level
        self._codec = int(codec)
        self._lat = magic == 1 and ts_type == _LOG_APPEND_TIME
        self._attrs = TS_MASK if self._lat else 0
        self._len = 0
        self._count = 0
        self._max_ts = -1

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self._len + extra
        cdef Py_ssize_t cap
        cdef uint8_t* nb
        if need <= self._cap:
            return 0
        if self._cap:
            cap = self._cap * 2
        elif self._c_limit and 4096 < self._limit <= (1 << 20):
            # a write limit says about how much comes: one allocation, no growth copies
            cap = <Py_ssize_t>self._limit + 64
        else:
            cap = 4096
        if cap < need:
            cap = need
        nb = <uint8_t*>PyMem_Realloc(self._buf, cap)
        if nb == NULL:
            raise MemoryError()
        self._buf = nb
        self._cap = cap
        return 0

    # -- appending ----------------------------------------------------------------------------------
    def append(self, timestamp, key, value, headers=()):
        """Append a message at the next offset; returns that offset."""
        offset = self.base_offset if self._count == 0 else self._last_offset + 1
        self._put(offset, timestamp, key, value, headers)
        return offset

    def try_append(self, timestamp, key, value, headers=()):
        """:meth:`has_room_for` then :meth:`append` in one call: the new message's offset, or
        None (and nothing appended) when it does not fit under ``write_limit``."""
        return self._try_append(timestamp, key, value, headers)

    cdef object _try_append(self, object timestamp, object key, object value, object headers):
        cdef Py_ssize_t klen, vlen
        if self._count and self._write_limit is not None:
            if not self._c_limit:
                if not self.has_room_for(timestamp, key, value, headers):
                    return None
            else:
                key = _as_bytes_or_none(key, "key")
                value = _as_bytes_or_none(value, "value")
                klen = 0 if key is None else PyBytes_GET_SIZE(key)
                vlen = 0 if value is None else PyBytes_GET_SIZE(value)
                # estimated_size_in_bytes() + LOG_OVERHEAD + record_size(): every term is far
                # below 2**62, so the int64 sum cannot overflow
                if ((LOG_OVERHEAD + _header_size(self.magic) if self._codec else 0) + self._len
                        + LOG_OVERHEAD + _header_size(self.magic) + klen + vlen > self._limit):
                    return None
        cdef int64_t off
        if self._count == 0:
            off = self.base_offset
        elif self._last_offset == INT64_MAX:
            # the next offset wraps to -2**63, as Java's long: _put raises the error
            self._put(INT64_MIN, timestamp, key, value, headers)
        else:
            off = self._last_offset + 1
        if self._codec and self.magic == 1 and <uint64_t>off - <uint64_t>self.base_offset > <uint64_t>INT64_MAX:
            self._put(off, timestamp, key, value, headers)  # raises: not storable as relative
        self._put_at(off, timestamp, key, value, headers)
        return off

    def append_with_offset(self, offset, timestamp, key, value, headers=()):
        self._put(offset, timestamp, key, value, headers)

    cdef int _put(self, object offset, object timestamp, object key, object value,
                  object headers) except -1:
        cdef int64_t off
        cdef int ovf = 0
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        # the checks below in C on int64 values; ovf/tovf say where a value lies past int64
        off = PyLong_AsLongLongAndOverflow(offset, &ovf)
        if self._count and (ovf < 0 or (ovf == 0 and off <= self._last_offset)):
            raise InvalidOffsetError(
                f"Illegal offset {offset} following previous offset {self._last_offset} "
                f"(Offsets must increase monotonically)."
            )
        if (ovf != 0 or off < self.base_offset
                or (self._codec and self.magic == 1
                    and <uint64_t>off - <uint64_t>self.base_offset > <uint64_t>INT64_MAX)):
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored relative to base offset {self.base_offset}"
            )
        return self._put_at(off, timestamp, key, value, headers)

    cdef int _put_at(self, int64_t off, object timestamp, object key, object value,
                     object headers) except -1:
        """Append at ``off``, an offset already checked (the tail of _put; _try_append calls
        it with the next offset, which needs no check)."""
        cdef int64_t ts
        cdef Py_ssize_t klen, vlen, size
        cdef uint8_t* q
        cdef int hs
        cdef int tovf = 0
        if not isinstance(timestamp, int):
            raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
        ts = PyLong_AsLongLongAndOverflow(timestamp, &tovf)
        if tovf < 0 or (tovf == 0 and ts < 0 and ts != -1):
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        if tovf > 0:
            raise ValueError(f"timestamp out of range: {timestamp}")
        if headers:
            raise ValueError(f"Magic v{self.magic} does not support record headers")
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        klen = -1 if key is None else PyBytes_GET_SIZE(key)
        vlen = -1 if value is None else PyBytes_GET_SIZE(value)
        if klen > PY_I32_MAX:
            raise ValueError("key longer than 2147483647 bytes")
        if vlen > PY_I32_MAX:
            raise ValueError("value longer than 2147483647 bytes")
        hs = _header_size(self.magic)
        size = hs + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
        self._reserve(LOG_OVERHEAD + size)
        q = self._buf + self._len
        if self._codec and self.magic == 1:
            _put64(q, <uint64_t>(off - self.base_offset))
        else:
            _put64(q, <uint64_t>off)
        _put32(q + 8, <uint32_t>size)
        _put32(q + 12, 0)  # CRC, filled in by build()
        q[16] = <uint8_t>self.magic
        q[17] = <uint8_t>self._attrs
        q += 18
        if self.magic:
            _put64(q, <uint64_t>(ts if not self._lat else -1))  # LogAppendTime: set by build()
            q += 8
        _put32(q, <uint32_t>klen)
        q += 4
        if klen > 0:
            memcpy(q, PyBytes_AS_STRING(key), klen)
            q += klen
        _put32(q, <uint32_t>vlen)
        q += 4
        if vlen > 0:
            memcpy(q, PyBytes_AS_STRING(value), vlen)
        self._len += LOG_OVERHEAD + size
        self._count += 1
        self._last_offset = off
        if self.magic and ts > self._max_ts:
            self._max_ts = ts
        return 0

    def estimated_size_in_bytes(self):
        """Bytes of the entries if built now, before compression (a wrapper's header included)."""
        if self._codec and self._count:
            return LOG_OVERHEAD + _header_size(self.magic) + self._len
        return self._len

    def has_room_for(self, timestamp, key, value, headers=()):
        """Whether a message fits under ``write_limit`` (always true for the first one)."""
        if self._count == 0 or self._write_limit is None:
            return True
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        size = LOG_OVERHEAD + record_size(self.magic, key, value)
        return self.estimated_size_in_bytes() + size <= self._write_limit

    @property
    def records_count(self):
        return self._count

    def __len__(self):
        return self._count

    # -- building -----------------------------------------------------------------------------------
    def build(self):
        """The log entries as bytes (b"" when nothing was appended)."""
        cdef int64_t lat = -1
        cdef int64_t wts
        cdef Py_ssize_t pos = 0
        cdef int32_t size
        cdef uint8_t* q
        cdef Py_ssize_t clen, wsize
        cdef int hs
        if self._count == 0:
            return b""
        if self._lat:
            if self._log_append_time is None:
                lat = int(time.time() * 1000)
            else:
                lat = self._log_append_time
        while pos < self._len:
            q = self._buf + pos
            size = _i32(q + 8)
            if self._lat:
                _put64(q + 18, <uint64_t>lat)
            _put32(q + 12, kl_crc32(0, q + 16, size - 4))
            pos += LOG_OVERHEAD + size
        if not self._codec:
            return PyBytes_FromStringAndSize(<const char*>self._buf, self._len)
        data = PyBytes_FromStringAndSize(<const char*>self._buf, self._len)
        compressed = _codecs().compress(self._codec, data, magic=self.magic, level=self._level)
        if type(compressed) is not bytes:
            compressed = bytes(compressed)
        clen = PyBytes_GET_SIZE(compressed)
        hs = _header_size(self.magic)
        wsize = hs + clen
        if wsize > PY_I32_MAX:
            raise ValueError("compressed wrapper larger than 2147483647 bytes")
        out = PyBytes_FromStringAndSize(NULL, LOG_OVERHEAD + wsize)
        q = <uint8_t*>PyBytes_AS_STRING(out)
        _put64(q, <uint64_t>self._last_offset)
        _put32(q + 8, <uint32_t>wsize)
        q[16] = <uint8_t>self.magic
        q[17] = <uint8_t>(self._codec | self._attrs)
        pos = 18
        if self.magic:
            wts = lat if self._lat else self._max_ts
            _put64(q + 18, <uint64_t>wts)
            pos = 26
        _put32(q + pos, 0xFFFFFFFF)  # null key
        _put32(q + pos + 4, <uint32_t>clen)
        memcpy(q + pos + 8, PyBytes_AS_STRING(compressed), clen)
        _put32(q + 12, kl_crc32(0, q + 16, wsize - 4))
        return out

    def __repr__(self):
        return (
            f"LegacyRecordsBuilder(magic={self.magic}, compression={self.compression_type.kafka_name}, "
            f"base_offset={self.base_offset}, count={self._count})"
        )
