# Declarations of the compiled legacy (magic 0/1) twin, for other compiled modules.
#
# The compiled MemoryRecords (``_batch.pyx``) can skip the Python-level constructor call
# (argument tuple + keyword dict + a buffer export per entry) with:
#
#     from kafkalog._legacy cimport LegacyRecordBatch, make_legacy_batch
#     batch = make_legacy_batch(buffer, owner, base, buflen, pos, check_crc, max_decompressed)
#
# ``base``/``buflen`` describe the whole buffer (``pos`` is relative to ``base``); ``buffer`` is
# the Python object they come from (``view()`` slices ``memoryview(buffer)``); ``owner`` is any
# object whose lifetime keeps ``base[0:buflen]`` valid and unchanged: ``buffer`` itself when it
# is ``bytes``, or an object holding a buffer export on it.  Pass ``owner=None`` to have the
# batch take its own export on ``buffer``.  The entry is validated exactly as the Python
# constructor validates it.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from cpython.buffer cimport Py_buffer


cdef class LegacyRecord:
    # offset, timestamp, key, value and headers are objects so that _legacy.pyx can expose them
    # as member descriptors (see _install_member_descriptors there)
    cdef readonly object offset
    cdef readonly object timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers
    cdef readonly int magic
    cdef readonly int attributes
    cdef readonly uint32_t crc
    cdef int _ts_type
    cdef int64_t _raw_ts
    cdef int32_t _klen
    cdef int32_t _vlen
    cdef object _trailing

    cdef uint32_t _checksum(self)


cdef class LegacyRecordBatch:
    cdef object _obj
    cdef object _owner
    cdef Py_buffer _view
    cdef bint _has_view
    cdef const uint8_t* _p
    cdef readonly Py_ssize_t position
    cdef readonly int64_t offset
    cdef readonly int32_t length
    cdef readonly uint32_t crc
    cdef readonly int magic
    cdef readonly int attributes
    cdef readonly int64_t timestamp
    cdef bint _check_crc
    cdef object _max_decompressed
    cdef list _inner

    cdef int _setup(self, object buffer, const uint8_t* base, Py_ssize_t buflen,
                    Py_ssize_t position, bint check_crc, object max_decompressed) except -1
    cdef LegacyRecord _outer(self)
    cdef list _load(self)
    cdef int _ensure_valid(self) except -1


cdef class LegacyRecordsBuilder:
    cdef readonly int magic
    cdef readonly object compression_type
    cdef readonly object timestamp_type
    cdef readonly int64_t base_offset
    cdef object _write_limit
    cdef object _log_append_time
    cdef object _level
    cdef int _codec
    cdef bint _lat          # magic 1 and LogAppendTime
    cdef int _attrs         # attributes of every (inner) message
    cdef uint8_t* _buf      # the (inner) log entries, CRCs filled in by build()
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _count
    cdef int64_t _last_offset
    cdef int64_t _max_ts
    cdef bint _c_limit      # write_limit is an int, held in _limit (clamped to int64)
    cdef int64_t _limit

    cdef int _reserve(self, Py_ssize_t extra) except -1
    cdef int _put(self, object offset, object timestamp, object key, object value,
                  object headers) except -1
    cdef int _put_at(self, int64_t off, object timestamp, object key, object value,
                     object headers) except -1
    # has_room_for then append: the offset, or None when the message does not fit
    cdef object _try_append(self, object timestamp, object key, object value, object headers)


cdef LegacyRecordBatch make_legacy_batch(object buffer, object owner, const uint8_t* base,
                                         Py_ssize_t buflen, Py_ssize_t position,
                                         bint check_crc, object max_decompressed)
