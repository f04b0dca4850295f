"""Columnar decoding of Kafka log entries - the compiled twin of ``_arrow_py``.

Same names, signatures and results as ``_arrow_py`` (read its docstring for the contract);
``kafkalog.arrow`` is the public API, ``_arrow_encode`` the way back.  What this twin adds is
speed:

* One call walks every log entry of a buffer and writes the Arrow buffers of each requested
  column directly (fixed-width values, LSB-first validity bitmaps, int32 offsets, data bytes):
  no Python object per record.  The buffers are malloc'd, grown with realloc and handed over
  to Python as ``OwnedBuffer`` objects (buffer protocol), which ``pa.py_buffer`` wraps without a
  copy.  Buffers of 4 MiB and more are advised as transparent huge pages on Linux.
* The walk over the entries (framing, v2 header, CRC-32C, records; uncompressed v0/v1
  messages with CRC-32) runs with the GIL released; so does the decompression of snappy (raw
  and xerial framing) and lz4 (Kafka's frame format; both in ``_codecs.pxd``) into a scratch
  buffer that the Decoder reuses from batch to batch.  gzip and zstd batches, and the values of compressed v0/v1
  wrappers, are decompressed by ``kafkalog.compression`` (zlib and zstd release the GIL
  inside); the decompressed records / inner messages are then parsed without the GIL.  When
  the native snappy/lz4 decoders meet anything unusual, the batch goes to
  ``kafkalog.compression`` instead, so results and errors are those of the pure twin; a
  batch whose output would pass ``max_decompressed_size`` is refused with the same
  DecompressedSizeError without being decompressed twice, and the scratch buffer never
  grows past that limit.
* Freed column buffers return to a small pool (``_set_pool_limit``) and are reused by the
  next decode(), so a streaming loop does not fault fresh pages in for every chunk.
* Every read is checked against the end of its buffer *before* it happens; the nogil code
  reports errors as (code, position, offset, a, b) and ``_arrow_common.decode_error`` turns
  them into the same kafkalog exception the pure twin raises.

Layout of a v2 batch and record: see ``_batch_py``.
"""
cimport cython
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from ._arrow_common import (
    COL_ALL,
    COLUMN_BITS,
    MAX_CHUNK_DATA,
    Chunk,
    decode_error,
    normalize_aborted,
)
from ._buffers cimport (
    MIN_CAP,
    GBuf,
    be16,
    be32,
    be64,
    copy_short,
    gb_ensure,
    gb_ensure_at_most,
    gb_free,
    gb_reserve,
    set_hugepages,
)
from ._codecs cimport codec_library_ready, decompress_into, lz4_decompress, snappy_decompress
from ._varint cimport kl_read_varint32_as, kl_read_varint64_as
from .errors import CorruptRecordError, InvalidOffsetError, KafkaLogError

__all__ = [
    "COL_OFFSET",
    "COL_TIMESTAMP",
    "COL_TIMESTAMP_TYPE",
    "COL_KEY",
    "COL_VALUE",
    "COL_HEADERS",
    "COL_PRODUCER_ID",
    "COL_PRODUCER_EPOCH",
    "COL_BASE_SEQUENCE",
    "COL_IS_TRANSACTIONAL",
    "COL_IS_CONTROL",
    "COL_LEADER_EPOCH",
    "COL_COMPRESSION",
    "COL_BATCH_OFFSET",
    "COL_POSITION",
    "COL_ALL",
    "COLUMN_BITS",
    "MAX_CHUNK_DATA",
    "Chunk",
    "Decoder",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "cython"

from . import _arrow_common as _common

globals().update({_name: getattr(_common, _name) for _name in _common.__dict__ if _name.startswith("COL_")})
del _common

cdef extern from "crc32c.h" nogil:
    uint32_t kl_crc32c(uint32_t crc, const unsigned char *buf, size_t len)

cdef extern from "crc32.h" nogil:
    void kl_crc32_init()
    uint32_t kl_crc32(uint32_t crc, const unsigned char *buf, size_t len)

kl_crc32_init()  # CRC-32 tables for legacy messages (under the GIL, at import)

def _set_hugepages(bint on):
    """Advise transparent huge pages for large column buffers (Linux; default on).  Returns
    the previous setting.  For benchmarks and tests."""
    return bool(set_hugepages(1 if on else 0))



# -- constants (the same numbers as _arrow_py / _format) -----------------------------------------
cdef enum:
    COL_OFFSET = 1 << 0
    COL_TIMESTAMP = 1 << 1
    COL_TIMESTAMP_TYPE = 1 << 2
    COL_KEY = 1 << 3
    COL_VALUE = 1 << 4
    COL_HEADERS = 1 << 5
    COL_PRODUCER_ID = 1 << 6
    COL_PRODUCER_EPOCH = 1 << 7
    COL_BASE_SEQUENCE = 1 << 8
    COL_IS_TRANSACTIONAL = 1 << 9
    COL_IS_CONTROL = 1 << 10
    COL_LEADER_EPOCH = 1 << 11
    COL_COMPRESSION = 1 << 12
    COL_BATCH_OFFSET = 1 << 13
    COL_POSITION = 1 << 14
    COL_META = ((1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
                | (1 << 13) | (1 << 14))

cdef enum:
    LOG_OVERHEAD = 12
    HEADER_SIZE_UP_TO_MAGIC = 17
    RECORD_OVERHEAD_V0 = 14
    RECORD_BATCH_OVERHEAD = 61
    ATTRIBUTES_OFFSET = 21

# error codes: _arrow_py.E_*
cdef enum:
    E_ENTRY_SIZE = 1
    E_TOO_LARGE = 2
    E_MAGIC = 3
    E_BATCH_SIZE = 4
    E_CRC = 5
    E_COUNT_NEGATIVE = 6
    E_CODEC = 7
    E_COUNT_TOO_LARGE = 8
    E_RECORD_SIZE = 9
    E_EMPTY_BODY = 10
    E_KEY = 11
    E_VALUE = 12
    E_HEADER_COUNT_NEGATIVE = 13
    E_HEADER_COUNT_TOO_LARGE = 14
    E_HEADER_KEY_NEGATIVE = 15
    E_HEADER_KEY = 16
    E_HEADER_VALUE = 17
    E_RECORD_CONSUMED = 18
    E_RECORDS_REMAINING = 19
    E_VARINT_TRUNCATED = 20
    E_VARINT_TOO_LONG = 21
    E_VARLONG_TRUNCATED = 22
    E_VARLONG_TOO_LONG = 23
    E_CHUNK_TOO_LARGE = 26
    E_NO_MEMORY = 27
    E_PREMATURE_EOF = 28
    E_LEGACY_V1_SIZE = 29
    E_LEGACY_KEY = 30
    E_LEGACY_VALUE = 31
    E_WRAPPER_ZSTD = 32
    E_WRAPPER_NULL = 33
    E_INNER_SIZE = 34
    E_INNER_MAGIC = 35
    E_INNER_KEY = 36
    E_INNER_VALUE = 37
    E_INNER_COMPRESSED = 38
    E_INNER_CRC = 39
    E_INNER_EMPTY = 40
    E_WRAPPER_OFFSET = 41
    E_INNER_OVERFLOW = 42
    E_BATCH_TRUNCATED = 43

# results of the nogil walk
cdef enum:
    R_DONE = 0      # reached stop
    R_TRUNC = 1     # partial entry at the end of the buffer
    R_LIMIT = 2     # max_rows / max_bytes reached (or int32 data limit)
    R_GIL = 3       # the entry at pos needs Python (legacy entry, gzip/zstd, fallback)
    R_ERR = 4

cdef int64_t INT32_MAX_ = 2147483647
cdef int64_t INT64_MAX_ = 0x7FFFFFFFFFFFFFFF

# -- column buffers (GBuf, from _buffers.pxd): Arrow bitmaps --------------------------------------
cdef enum:
    POOL_SLOTS = 32
    POOL_MIN_BLOCK = 65536

cdef int bm_cover(GBuf* b, int64_t rows, uint8_t fill) noexcept nogil:
    """Make a bitmap cover ``rows`` bits; bytes first touched here are set to ``fill``."""
    cdef size_t nbytes
    if rows < 0:
        return -1
    nbytes = <size_t>((rows + 7) >> 3)
    if gb_ensure(b, nbytes) < 0:
        return -1
    if b.len < nbytes:
        memset(b.data + b.len, fill, nbytes - b.len)
        b.len = nbytes
    return 0

cdef inline void bit_clear(uint8_t* bm, int64_t i) noexcept nogil:
    bm[i >> 3] &= <uint8_t>~(1 << (i & 7))

cdef void bits_set_range(uint8_t* bm, int64_t start, int64_t n, bint v) noexcept nogil:
    cdef int64_t i
    for i in range(start, start + n):
        if v:
            bm[i >> 3] |= <uint8_t>(1 << (i & 7))
        else:
            bm[i >> 3] &= <uint8_t>~(1 << (i & 7))

# -- a small pool of large freed buffers ------------------------------------------------------------
# A column buffer the decoder hands to Arrow comes back here when Arrow lets go of it, and the
# next decode() reuses it: its pages are already mapped, so a streaming loop (decode a chunk,
# use it, drop it, decode the next) stops paying a page fault per 4 KiB.  Bounded (count and
# bytes); only touched with the GIL held.  ``_set_pool_limit(0)`` disables it.

cdef struct PoolBlock:
    uint8_t* data
    size_t cap
    size_t touched
    int tag

cdef PoolBlock _pool[32]
cdef int _pool_n = 0
cdef size_t _pool_bytes = 0
cdef size_t _pool_limit = 512 * 1024 * 1024


cdef void pool_put(uint8_t* data, size_t cap, size_t touched, int tag) noexcept:
    """Give a malloc'd block (``cap`` usable bytes, the first ``touched`` of them mapped) to
    the pool, or free it.  The pool's size counts mapped bytes.  GIL held."""
    global _pool_n, _pool_bytes
    cdef int i
    if data == NULL:
        return
    if touched > cap:
        touched = cap
    if tag == 0 or cap < POOL_MIN_BLOCK or touched > _pool_limit:
        free(data)  # only the big per-row buffers that decode() asks the pool for come back
        return
    while _pool_n > 0 and (_pool_n == POOL_SLOTS or _pool_bytes + touched > _pool_limit):
        free(_pool[0].data)
        _pool_bytes -= _pool[0].touched
        for i in range(1, _pool_n):
            _pool[i - 1] = _pool[i]
        _pool_n -= 1
    _pool[_pool_n].data = data
    _pool[_pool_n].cap = cap
    _pool[_pool_n].touched = touched
    _pool[_pool_n].tag = tag
    _pool_n += 1
    _pool_bytes += touched


cdef inline bint _pool_better(int i, int best, int tag) noexcept:
    # same column buffer first, then the most pages already mapped, then the smallest
    cdef bint si = _pool[i].tag == tag
    cdef bint sb = _pool[best].tag == tag
    if si != sb:
        return si
    if _pool[i].touched != _pool[best].touched:
        return _pool[i].touched > _pool[best].touched
    return _pool[i].cap < _pool[best].cap


cdef void pool_get(GBuf* b, size_t need, int tag) noexcept:
    """Fill an empty GBuf with a pooled block of at least ``need`` bytes - preferably one
    that served the same column buffer (``tag``) before - if any.  GIL held."""
    global _pool_n, _pool_bytes
    cdef int i
    cdef int best = -1
    b.tag = tag
    if b.data != NULL or need < POOL_MIN_BLOCK:
        return
    for i in range(_pool_n):
        if _pool[i].cap >= need and (best < 0 or _pool_better(i, best, tag)):
            best = i
    if best < 0:
        return
    b.data = _pool[best].data
    b.cap = _pool[best].cap
    b.touched = _pool[best].touched
    b.len = 0
    _pool_bytes -= _pool[best].touched
    for i in range(best + 1, _pool_n):
        _pool[i - 1] = _pool[i]
    _pool_n -= 1


def _set_pool_limit(Py_ssize_t limit):
    """Bytes of freed column buffers kept for reuse (default 512 MiB; 0 disables the pool and
    frees what it holds).  Returns the previous limit.  For benchmarks and tests."""
    global _pool_limit, _pool_n, _pool_bytes
    cdef size_t old = _pool_limit
    _pool_limit = <size_t>limit if limit > 0 else 0
    while _pool_n > 0 and _pool_bytes > _pool_limit:
        _pool_n -= 1
        free(_pool[_pool_n].data)
        _pool_bytes -= _pool[_pool_n].touched
    return old


def _pool_blocks():
    """[(capacity, touched bytes)] of the pooled blocks (debugging)."""
    return [(_pool[i].cap, _pool[i].touched) for i in range(_pool_n)]


def _pool_stats():
    """(blocks, mapped bytes) held by the pool."""
    return _pool_n, _pool_bytes


cdef char* FORMAT_B = "B"


@cython.final
cdef class OwnedBuffer:
    """Memory filled by the compiled decoder, exported through the buffer protocol (so that
    ``pyarrow.py_buffer`` wraps it without copying) and freed when the last user lets go."""

    cdef uint8_t* data
    cdef Py_ssize_t size
    cdef size_t cap
    cdef size_t touched
    cdef int tag
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self):
        self.data = NULL
        self.size = 0
        self.cap = 0

    def __dealloc__(self):
        pool_put(self.data, self.cap, self.touched, self.tag)
        self.data = NULL

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.size
        self.strides[0] = 1
        view.buf = <void*>self.data
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        if flags & PyBUF_FORMAT:
            view.format = FORMAT_B
        else:
            view.format = NULL
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __repr__(self):
        return f"OwnedBuffer(size={self.size})"


cdef object take(GBuf* b, size_t nbytes):
    """Hand a GBuf's memory to a new OwnedBuffer of ``nbytes`` (None when never allocated)."""
    cdef OwnedBuffer ob
    if b.data == NULL:
        return None
    ob = OwnedBuffer.__new__(OwnedBuffer)
    ob.data = b.data
    ob.size = <Py_ssize_t>nbytes
    ob.cap = b.cap
    ob.touched = b.touched if b.touched > nbytes else nbytes
    ob.tag = b.tag
    b.data = NULL
    b.len = 0
    b.cap = 0
    b.touched = 0
    return ob

# -- varints (``_varint.pxd``; their faults as this module's error codes) -------------------------
cdef inline int rd_varint(const uint8_t* d, Py_ssize_t* pp, Py_ssize_t end, int32_t* out) noexcept nogil:
    return kl_read_varint32_as(d, pp, end, out, E_VARINT_TRUNCATED, E_VARINT_TOO_LONG)

cdef inline int rd_varlong(const uint8_t* d, Py_ssize_t* pp, Py_ssize_t end, int64_t* out) noexcept nogil:
    return kl_read_varint64_as(d, pp, end, out, E_VARLONG_TRUNCATED, E_VARLONG_TOO_LONG)

# -- UTF-8 validation (strict, as Python's decoder: no overlongs, surrogates, > U+10FFFF) --------
cdef bint utf8_valid(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif c < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if c == 0xE0:
                if c1 < 0xA0 or c1 > 0xBF:
                    return False
            elif c == 0xED:
                if c1 < 0x80 or c1 > 0x9F:
                    return False
            elif (c1 & 0xC0) != 0x80:
                return False
            if (s[i + 2] & 0xC0) != 0x80:
                return False
            i += 3
        elif c < 0xF5:
            if i + 3 >= n:
                return False
            c1 = s[i + 1]
            if c == 0xF0:
                if c1 < 0x90 or c1 > 0xBF:
                    return False
            elif c == 0xF4:
                if c1 < 0x80 or c1 > 0x8F:
                    return False
            elif (c1 & 0xC0) != 0x80:
                return False
            if (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return False
            i += 4
        else:
            return False
    return True


def decompress_section(int codec, source, Py_ssize_t start, Py_ssize_t stop, int64_t limit):
    """``source[start:stop]``, the records section of a v2 batch compressed with snappy (2) or
    lz4 (3), decoded by the compiled decoders of ``_codecs.pxd`` (GIL released) into a new
    OwnedBuffer from the pool.

    None for anything they do not take (another codec, an unusual frame, damage, an output
    past ``limit``): kafkalog.compression then gives the answer or the exact error, so the
    result never differs from it.  The compiled object decoder (``_batch``) runs the same
    decoders into a block of its own; this entry point is theirs for tests and tools."""
    cdef Py_buffer view
    cdef GBuf g
    cdef int r = -1
    if (codec != 2 and codec != 3) or limit < 0:
        return None  # a negative limit: kafkalog.compression's ValueError, as elsewhere
    if not codec_library_ready(_compression_mod(), codec):
        return None  # kafkalog.compression raises MissingCodecError, as the pure twin does
    PyObject_GetBuffer(source, &view, PyBUF_SIMPLE)
    if start < 0 or stop > view.len or start > stop:
        PyBuffer_Release(&view)
        return None
    memset(&g, 0, sizeof(GBuf))
    # a block from the pool (the previous section's, freed when its records were made): no
    # fresh pages to fault in per batch
    pool_get(&g, <size_t>POOL_MIN_BLOCK, TAG_SECTION)
    if g.data == NULL and limit >= POOL_MIN_BLOCK:
        gb_ensure_at_most(&g, <size_t>POOL_MIN_BLOCK, <size_t>POOL_MIN_BLOCK)
    try:
        with nogil:
            r = decompress_into(codec, <const uint8_t*>view.buf + start, stop - start, &g, limit)
    finally:
        PyBuffer_Release(&view)
    if r != 0 or g.data == NULL:
        gb_free(&g)
        return None
    return take(&g, g.len)

# -- decoder state ---------------------------------------------------------------------------------
cdef struct Out:
    int cols
    int64_t rows
    int64_t batches
    GBuf offset
    GBuf ts
    GBuf tstype
    GBuf key_valid
    GBuf key_off
    GBuf key_data
    int64_t key_nulls
    GBuf val_valid
    GBuf val_off
    GBuf val_data
    int64_t val_nulls
    GBuf h_valid
    GBuf h_off
    int64_t h_nulls
    GBuf hk_off
    GBuf hk_data
    int hk_bad
    GBuf hv_valid
    GBuf hv_off
    GBuf hv_data
    int64_t hv_nulls
    int64_t nh
    GBuf pid
    GBuf epoch
    GBuf seq
    GBuf txn
    GBuf ctrl
    GBuf lepoch
    GBuf codec
    GBuf boff
    GBuf pos

cdef struct Mark:
    int64_t rows
    int64_t batches
    int64_t key_nulls
    int64_t val_nulls
    int64_t h_nulls
    int64_t hv_nulls
    int64_t nh
    int hk_bad
    size_t key_data
    size_t val_data
    size_t hk_data
    size_t hv_data

cdef struct Err:
    int code
    int64_t position
    int64_t offset
    int64_t a
    int64_t b
    int64_t c

cdef struct Batch:
    # the v2 batch being decoded
    int64_t position
    int64_t base_offset
    int64_t size            # 12 + batchLength
    int32_t leader_epoch
    int16_t attributes
    int64_t base_ts
    int64_t max_ts
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t count
    int codec

cdef void out_free(Out* o) noexcept nogil:
    gb_free(&o.offset)
    gb_free(&o.ts)
    gb_free(&o.tstype)
    gb_free(&o.key_valid)
    gb_free(&o.key_off)
    gb_free(&o.key_data)
    gb_free(&o.val_valid)
    gb_free(&o.val_off)
    gb_free(&o.val_data)
    gb_free(&o.h_valid)
    gb_free(&o.h_off)
    gb_free(&o.hk_off)
    gb_free(&o.hk_data)
    gb_free(&o.hv_valid)
    gb_free(&o.hv_off)
    gb_free(&o.hv_data)
    gb_free(&o.pid)
    gb_free(&o.epoch)
    gb_free(&o.seq)
    gb_free(&o.txn)
    gb_free(&o.ctrl)
    gb_free(&o.lepoch)
    gb_free(&o.codec)
    gb_free(&o.boff)
    gb_free(&o.pos)

cdef void out_init(Out* o, int cols) noexcept nogil:
    memset(o, 0, sizeof(Out))
    o.cols = cols


cdef int out_prepare(Out* o) noexcept nogil:
    """Allocate what is still unallocated; int32 offset buffers get their leading 0."""
    cdef int cols = o.cols
    if cols & COL_KEY:
        if gb_reserve(&o.key_off, MIN_CAP) < 0 or gb_reserve(&o.key_data, MIN_CAP) < 0:
            return -1
        (<int32_t*>o.key_off.data)[0] = 0
    if cols & COL_VALUE:
        if gb_reserve(&o.val_off, MIN_CAP) < 0 or gb_reserve(&o.val_data, MIN_CAP) < 0:
            return -1
        (<int32_t*>o.val_off.data)[0] = 0
    if cols & COL_HEADERS:
        if (gb_reserve(&o.h_off, MIN_CAP) < 0 or gb_reserve(&o.hk_off, MIN_CAP) < 0
                or gb_reserve(&o.hk_data, MIN_CAP) < 0 or gb_reserve(&o.hv_off, MIN_CAP) < 0
                or gb_reserve(&o.hv_data, MIN_CAP) < 0):
            return -1
        (<int32_t*>o.h_off.data)[0] = 0
        (<int32_t*>o.hk_off.data)[0] = 0
        (<int32_t*>o.hv_off.data)[0] = 0
    return 0

cdef int out_reserve_rows(Out* o, int64_t extra) noexcept nogil:
    """Room for ``extra`` more rows in every per-row buffer (data bytes excepted)."""
    cdef int cols = o.cols
    cdef int64_t n = o.rows + extra
    cdef size_t n8 = <size_t>n * 8
    cdef size_t n4 = <size_t>n * 4
    cdef size_t o4 = <size_t>(n + 1) * 4
    if cols & COL_OFFSET and gb_ensure(&o.offset, n8) < 0:
        return -1
    if cols & COL_TIMESTAMP and gb_ensure(&o.ts, n8) < 0:
        return -1
    if cols & COL_TIMESTAMP_TYPE and gb_ensure(&o.tstype, n4) < 0:
        return -1
    if cols & COL_KEY:
        if gb_ensure(&o.key_off, o4) < 0:
            return -1
        if o.key_valid.data != NULL and bm_cover(&o.key_valid, n, 0xFF) < 0:
            return -1
    if cols & COL_VALUE:
        if gb_ensure(&o.val_off, o4) < 0:
            return -1
        if o.val_valid.data != NULL and bm_cover(&o.val_valid, n, 0xFF) < 0:
            return -1
    if cols & COL_HEADERS:
        if gb_ensure(&o.h_off, o4) < 0:
            return -1
        if o.h_valid.data != NULL and bm_cover(&o.h_valid, n, 0xFF) < 0:
            return -1
    if cols & COL_META:
        if cols & COL_PRODUCER_ID and gb_ensure(&o.pid, n8) < 0:
            return -1
        if cols & COL_PRODUCER_EPOCH and gb_ensure(&o.epoch, <size_t>n * 2) < 0:
            return -1
        if cols & COL_BASE_SEQUENCE and gb_ensure(&o.seq, n4) < 0:
            return -1
        if cols & COL_IS_TRANSACTIONAL and bm_cover(&o.txn, n, 0) < 0:
            return -1
        if cols & COL_IS_CONTROL and bm_cover(&o.ctrl, n, 0) < 0:
            return -1
        if cols & COL_LEADER_EPOCH and gb_ensure(&o.lepoch, n4) < 0:
            return -1
        if cols & COL_COMPRESSION and gb_ensure(&o.codec, <size_t>n) < 0:
            return -1
        if cols & COL_BATCH_OFFSET and gb_ensure(&o.boff, n8) < 0:
            return -1
        if cols & COL_POSITION and gb_ensure(&o.pos, n8) < 0:
            return -1
    return 0

cdef inline int first_null(GBuf* bm, int64_t rows_cover) noexcept nogil:
    """Allocate a lazily created validity bitmap (all valid so far)."""
    return bm_cover(bm, rows_cover, 0xFF)

cdef void out_mark(Out* o, Mark* m) noexcept nogil:
    m.rows = o.rows
    m.batches = o.batches
    m.key_nulls = o.key_nulls
    m.val_nulls = o.val_nulls
    m.h_nulls = o.h_nulls
    m.hv_nulls = o.hv_nulls
    m.nh = o.nh
    m.hk_bad = o.hk_bad
    m.key_data = o.key_data.len
    m.val_data = o.val_data.len
    m.hk_data = o.hk_data.len
    m.hv_data = o.hv_data.len

cdef void out_rollback(Out* o, Mark* m) noexcept nogil:
    # Bits and values past the restored row count are never read again (the chunk ends).
    o.rows = m.rows
    o.batches = m.batches
    o.key_nulls = m.key_nulls
    o.val_nulls = m.val_nulls
    o.h_nulls = m.h_nulls
    o.hv_nulls = m.hv_nulls
    o.nh = m.nh
    o.hk_bad = m.hk_bad
    o.key_data.len = m.key_data
    o.val_data.len = m.val_data
    o.hk_data.len = m.hk_data
    o.hv_data.len = m.hv_data

cdef inline bint out_overflowed(Out* o) noexcept nogil:
    return (<int64_t>o.key_data.len > INT32_MAX_ or <int64_t>o.val_data.len > INT32_MAX_
            or <int64_t>o.hk_data.len > INT32_MAX_ or <int64_t>o.hv_data.len > INT32_MAX_)

cdef inline int64_t out_data_bytes(Out* o) noexcept nogil:
    return <int64_t>(o.key_data.len + o.val_data.len + o.hk_data.len + o.hv_data.len)

cdef void fill_batch_columns(Out* o, int64_t r0, int64_t n, int32_t tstype, int64_t pid,
                             int16_t epoch, int32_t seq, bint txn, bint ctrl, int32_t lepoch,
                             int8_t codec, int64_t boff, int64_t position) noexcept nogil:
    """Per-batch constants into rows [r0, r0 + n)."""
    cdef int cols = o.cols
    cdef int64_t i
    cdef int32_t* p32
    cdef int64_t* p64
    cdef int16_t* p16
    if cols & COL_TIMESTAMP_TYPE:
        p32 = <int32_t*>o.tstype.data
        for i in range(r0, r0 + n):
            p32[i] = tstype
    if not (cols & COL_META):
        return
    if cols & COL_PRODUCER_ID:
        p64 = <int64_t*>o.pid.data
        for i in range(r0, r0 + n):
            p64[i] = pid
    if cols & COL_PRODUCER_EPOCH:
        p16 = <int16_t*>o.epoch.data
        for i in range(r0, r0 + n):
            p16[i] = epoch
    if cols & COL_BASE_SEQUENCE:
        p32 = <int32_t*>o.seq.data
        for i in range(r0, r0 + n):
            p32[i] = seq
    if cols & COL_IS_TRANSACTIONAL:
        bits_set_range(o.txn.data, r0, n, txn)
    if cols & COL_IS_CONTROL:
        bits_set_range(o.ctrl.data, r0, n, ctrl)
    if cols & COL_LEADER_EPOCH:
        p32 = <int32_t*>o.lepoch.data
        for i in range(r0, r0 + n):
            p32[i] = lepoch
    if cols & COL_COMPRESSION:
        for i in range(r0, r0 + n):
            (<int8_t*>o.codec.data)[i] = codec
    if cols & COL_BATCH_OFFSET:
        p64 = <int64_t*>o.boff.data
        for i in range(r0, r0 + n):
            p64[i] = boff
    if cols & COL_POSITION:
        p64 = <int64_t*>o.pos.data
        for i in range(r0, r0 + n):
            p64[i] = position

cdef inline int set_err(Err* e, int code, int64_t position, int64_t offset, int64_t a, int64_t b) noexcept nogil:
    e.code = code
    e.position = position
    e.offset = offset
    e.a = a
    e.b = b
    return -1

cdef int parse_records(Out* o, Err* e, const uint8_t* d, Py_ssize_t n, Batch* bt,
                       int64_t scale) noexcept nogil:
    """Decode exactly ``bt.count`` records from the records section ``d[0:n]`` and append
    them.  0, or -1 with ``e`` set.  Mirrors ``_batch_py.decode_records``: the length varint is
    bounded by the section, every other field by the record body."""
    cdef int cols = o.cols
    cdef int64_t r0 = o.rows
    cdef int64_t r = r0
    cdef int32_t count = bt.count
    cdef int64_t pos_b = bt.position
    cdef int64_t base_off = bt.base_offset
    cdef bint append_time = (bt.attributes & 0x08) != 0
    cdef uint64_t base_ts = <uint64_t>bt.base_ts
    cdef uint64_t ts
    cdef Py_ssize_t p = 0
    cdef Py_ssize_t body_end
    cdef int32_t length, off_delta, klen, vlen, hcount, hklen, hvlen, _h
    cdef int64_t ts_delta
    cdef int rc
    cdef int32_t _i
    cdef bint want_key = (cols & COL_KEY) != 0
    cdef bint want_val = (cols & COL_VALUE) != 0
    cdef bint want_hdr = (cols & COL_HEADERS) != 0
    cdef int64_t* off_out
    cdef int64_t* ts_out
    cdef int32_t* koff
    cdef int32_t* voff
    cdef int32_t* hoff
    cdef int32_t* hkoff = NULL
    cdef int32_t* hvoff = NULL
    cdef uint8_t* kdata
    cdef uint8_t* vdata
    cdef size_t klen_total, vlen_total
    if out_reserve_rows(o, count) < 0:
        return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
    if want_key and gb_ensure(&o.key_data, o.key_data.len + <size_t>n) < 0:
        return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
    if want_val and gb_ensure(&o.val_data, o.val_data.len + <size_t>n) < 0:
        return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
    off_out = <int64_t*>o.offset.data
    ts_out = <int64_t*>o.ts.data
    koff = <int32_t*>o.key_off.data
    voff = <int32_t*>o.val_off.data
    hoff = <int32_t*>o.h_off.data
    kdata = o.key_data.data
    vdata = o.val_data.data
    klen_total = o.key_data.len
    vlen_total = o.val_data.len
    for _i in range(count):
        if p >= n:
            return set_err(e, E_PREMATURE_EOF, pos_b, base_off, 0, 0)
        rc = rd_varint(d, &p, n, &length)
        if rc:
            return set_err(e, rc, pos_b, base_off, 0, 0)
        if length < 0 or length > n - p:
            return set_err(e, E_RECORD_SIZE, pos_b, base_off, length, n - p)
        body_end = p + length
        if length < 1:
            return set_err(e, E_EMPTY_BODY, pos_b, base_off, 0, 0)
        p += 1  # attributes (unused)
        rc = rd_varlong(d, &p, body_end, &ts_delta)
        if rc:
            return set_err(e, rc, pos_b, base_off, 0, 0)
        rc = rd_varint(d, &p, body_end, &off_delta)
        if rc:
            return set_err(e, rc, pos_b, base_off, 0, 0)
        # key
        rc = rd_varint(d, &p, body_end, &klen)
        if rc:
            return set_err(e, rc, pos_b, base_off, 0, 0)
        if klen >= 0:
            if klen > body_end - p:
                return set_err(e, E_KEY, pos_b, base_off, 0, 0)
            if want_key:
                copy_short(kdata + klen_total, d + p, <size_t>klen, <size_t>(n - p))
                klen_total += <size_t>klen
            p += klen
        elif want_key:
            if o.key_valid.data == NULL and first_null(&o.key_valid, r0 + count) < 0:
                return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
            bit_clear(o.key_valid.data, r)
            o.key_nulls += 1
        # value
        rc = rd_varint(d, &p, body_end, &vlen)
        if rc:
            return set_err(e, rc, pos_b, base_off, 0, 0)
        if vlen >= 0:
            if vlen > body_end - p:
                return set_err(e, E_VALUE, pos_b, base_off, 0, 0)
            if want_val:
                copy_short(vdata + vlen_total, d + p, <size_t>vlen, <size_t>(n - p))
                vlen_total += <size_t>vlen
            p += vlen
        elif want_val:
            if o.val_valid.data == NULL and first_null(&o.val_valid, r0 + count) < 0:
                return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
            bit_clear(o.val_valid.data, r)
            o.val_nulls += 1
        # headers
        rc = rd_varint(d, &p, body_end, &hcount)
        if rc:
            return set_err(e, rc, pos_b, base_off, 0, 0)
        if hcount < 0:
            return set_err(e, E_HEADER_COUNT_NEGATIVE, pos_b, base_off, hcount, 0)
        if hcount > 0:
            if hcount > body_end - p:
                return set_err(e, E_HEADER_COUNT_TOO_LARGE, pos_b, base_off, hcount, body_end - p)
            if want_hdr:
                if (gb_ensure(&o.hk_off, <size_t>(o.nh + hcount + 1) * 4) < 0
                        or gb_ensure(&o.hv_off, <size_t>(o.nh + hcount + 1) * 4) < 0
                        or gb_ensure(&o.hk_data, o.hk_data.len + <size_t>(body_end - p)) < 0
                        or gb_ensure(&o.hv_data, o.hv_data.len + <size_t>(body_end - p)) < 0):
                    return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
                if o.hv_valid.data != NULL and bm_cover(&o.hv_valid, o.nh + hcount, 0xFF) < 0:
                    return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
                hkoff = <int32_t*>o.hk_off.data
                hvoff = <int32_t*>o.hv_off.data
            for _h in range(hcount):
                rc = rd_varint(d, &p, body_end, &hklen)
                if rc:
                    return set_err(e, rc, pos_b, base_off, 0, 0)
                if hklen < 0:
                    return set_err(e, E_HEADER_KEY_NEGATIVE, pos_b, base_off, hklen, 0)
                if hklen > body_end - p:
                    return set_err(e, E_HEADER_KEY, pos_b, base_off, 0, 0)
                if want_hdr:
                    copy_short(o.hk_data.data + o.hk_data.len, d + p, <size_t>hklen, <size_t>(n - p))
                    if not o.hk_bad and not utf8_valid(d + p, hklen):
                        o.hk_bad = 1
                    o.hk_data.len += <size_t>hklen
                    hkoff[o.nh + 1] = <int32_t>o.hk_data.len
                p += hklen
                rc = rd_varint(d, &p, body_end, &hvlen)
                if rc:
                    return set_err(e, rc, pos_b, base_off, 0, 0)
                if hvlen >= 0:
                    if hvlen > body_end - p:
                        return set_err(e, E_HEADER_VALUE, pos_b, base_off, 0, 0)
                    if want_hdr:
                        copy_short(o.hv_data.data + o.hv_data.len, d + p, <size_t>hvlen, <size_t>(n - p))
                        o.hv_data.len += <size_t>hvlen
                    p += hvlen
                elif want_hdr:
                    if o.hv_valid.data == NULL and first_null(&o.hv_valid, o.nh + hcount) < 0:
                        return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
                    bit_clear(o.hv_valid.data, o.nh)
                    o.hv_nulls += 1
                if want_hdr:
                    hvoff[o.nh + 1] = <int32_t>o.hv_data.len
                    o.nh += 1
        if want_hdr:
            hoff[r + 1] = <int32_t>o.nh
            if hcount == 0:
                if o.h_valid.data == NULL and first_null(&o.h_valid, r0 + count) < 0:
                    return set_err(e, E_NO_MEMORY, pos_b, base_off, 0, 0)
                bit_clear(o.h_valid.data, r)
                o.h_nulls += 1
        if p != body_end:
            return set_err(e, E_RECORD_CONSUMED, pos_b, base_off, length, length - (body_end - p))
        # fixed-width columns
        if cols & COL_OFFSET:
            off_out[r] = <int64_t>(<uint64_t>base_off + <uint64_t>(<int64_t>off_delta))
        if cols & COL_TIMESTAMP:
            ts = <uint64_t>bt.max_ts if append_time else base_ts + <uint64_t>ts_delta
            if scale != 1:
                ts = ts * <uint64_t>scale
            ts_out[r] = <int64_t>ts
        if want_key:
            koff[r + 1] = <int32_t>klen_total
        if want_val:
            voff[r + 1] = <int32_t>vlen_total
        r += 1
    if p != n:
        return set_err(e, E_RECORDS_REMAINING, pos_b, base_off, 0, 0)
    o.key_data.len = klen_total
    o.val_data.len = vlen_total
    fill_batch_columns(o, r0, count, 1 if append_time else 0, bt.producer_id, bt.producer_epoch,
                       bt.base_sequence, (bt.attributes & 0x10) != 0, (bt.attributes & 0x20) != 0,
                       bt.leader_epoch, <int8_t>(bt.attributes & 0x07), bt.base_offset, bt.position)
    o.rows = r
    return 0


# Sorted aborted transactions (producer_id, first_offset, last_offset), for read_committed.
cdef struct Aborted:
    int64_t* pid
    int64_t* first
    int64_t* last
    Py_ssize_t n

cdef bint aborted_contains(Aborted* ab, int64_t pid, int64_t offset) noexcept nogil:
    cdef Py_ssize_t lo = 0
    cdef Py_ssize_t hi = ab.n
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if ab.pid[mid] < pid or (ab.pid[mid] == pid and ab.first[mid] <= offset):
            lo = mid + 1
        else:
            hi = mid
    lo -= 1
    return lo >= 0 and ab.pid[lo] == pid and ab.first[lo] <= offset and offset <= ab.last[lo]


cdef struct Walk:
    # configuration of one decode() call, plus where it is
    const uint8_t* buf
    Py_ssize_t n
    Py_ssize_t pos
    Py_ssize_t stop
    int64_t max_rows
    int64_t max_bytes
    int64_t max_batch
    int64_t max_dec
    int64_t scale
    bint check_crcs
    bint include_control
    Aborted* aborted
    GBuf* scratch
    Batch bt           # header of the entry at pos when R_GIL / after R_ERR
    int magic          # magic of the entry at pos when R_GIL
    int need_python    # R_GIL reason: 1 legacy, 2 python decompression, 3 over the limit,
                       # 4 ask whether the library of codec w.bt.codec is installed
    int native         # bit (1 << codec) set: snappy (2) / lz4 (3) decoded here, in C
    int known          # bit (1 << codec) set: ``native`` is decided for that codec


cdef enum:
    LEGACY_MIN_ENTRY = 26  # LOG_OVERHEAD + RECORD_OVERHEAD_V0: the smallest v0/v1 entry
    LEGACY_BLOCK = 256     # rows reserved at a time by legacy_run
    LEGACY_PRESCAN = 1024  # v0/v1 messages that prescan walks before it extrapolates
    R_NEXT = -1            # legacy_run: the entry at w.pos is not a plain v0/v1 message


cdef void prescan(Walk* w, int64_t* rows_out, int64_t* data_out) noexcept nogil:
    """Estimate a chunk's size from a walk over the entry headers, so that the column buffers
    need no growth (hence no realloc copies) for uncompressed data: rows <= the records
    counts, key and value bytes <= the records sections (compressed sections are guessed at
    4x).  Pages never written are never faulted in: the over-estimate costs address space."""
    cdef const uint8_t* b
    cdef Py_ssize_t pos = w.pos
    cdef Py_ssize_t remaining
    cdef int64_t size, sect, rows = 0, data = 0
    cdef int64_t nleg = 0, legbytes = 0, legdata = 0, rest, by_bytes, bound
    cdef int32_t count
    while pos < w.stop:
        remaining = w.n - pos
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            break
        b = w.buf + pos
        size = <int32_t>be32(b + 8)
        if size < RECORD_OVERHEAD_V0 or remaining < size + LOG_OVERHEAD:
            break
        if rows > 0 and ((w.max_rows >= 0 and rows >= w.max_rows)
                         or (w.max_bytes >= 0 and data >= w.max_bytes)):
            break
        if b[16] == 2 and size + LOG_OVERHEAD >= RECORD_BATCH_OVERHEAD:
            count = <int32_t>be32(b + 57)
            sect = size + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD
            if count > 0:
                rows += count if count < sect else sect
                data += sect if (b[22] & 0x07) == 0 else 4 * sect
        elif b[16] < 2 and (b[17] & 0x07) == 0:
            rows += 1
            data += size
            nleg += 1
            legbytes += size + LOG_OVERHEAD
            legdata += size - (22 if b[16] else RECORD_OVERHEAD_V0)  # key and value bytes
            if nleg == LEGACY_PRESCAN:
                # Plain v0/v1 messages: walking every one here would cost a second pass of
                # dependent loads over every message header (~20 % of a v1 decode).  The rest
                # of the chunk is extrapolated from these entries' average (+1/8 and a row
                # block), within the smallest-entry bound; legacy_run grows the buffers
                # (doubling) where the rest is denser than that.
                pos += size + LOG_OVERHEAD
                if pos < w.stop:
                    rest = (<int64_t>(w.stop - pos)) * nleg // legbytes
                    if w.max_bytes >= 0 and legdata > 0:
                        # the byte budget clamped to INT32_MAX (what a chunk's data can be)
                        # before it is multiplied: max_bytes may be any int64
                        by_bytes = w.max_bytes - data if w.max_bytes > data else 0
                        if by_bytes > INT32_MAX_:
                            by_bytes = INT32_MAX_
                        by_bytes = by_bytes * nleg // legdata
                        if by_bytes < rest:
                            rest = by_bytes
                    rest += (rest >> 3) + LEGACY_BLOCK
                    bound = legacy_rows_bound(w, pos, rows)
                    rows += rest if rest < bound else bound
                    sect = <int64_t>(w.stop - pos)
                    if w.max_bytes >= 0 and sect - 65536 > w.max_bytes - data:  # no overflow
                        sect = w.max_bytes - data + 65536 if w.max_bytes > data else 65536
                    data += sect
                break
        else:
            rows += 1
            data += size
        pos += size + LOG_OVERHEAD
    if rows > (1 << 28):
        rows = 1 << 28
    if data > INT32_MAX_:
        data = INT32_MAX_
    rows_out[0] = rows
    data_out[0] = data


cdef enum:
    # pool tags of the header entries' buffers (past every 2 * COL_x + 1)
    TAG_HEADER_KEY_OFFSETS = 1 << 16
    TAG_HEADER_VALUE_OFFSETS = (1 << 16) + 1
    TAG_HEADER_VALUE_DATA = (1 << 16) + 2
    TAG_SECTION = 1 << 17  # decompress_section's output


cdef void out_from_pool(Out* o, int64_t rows, int64_t data) noexcept:
    """Take pooled blocks for the big per-row buffers (GIL held)."""
    cdef int cols = o.cols
    cdef size_t n8 = <size_t>rows * 8
    cdef size_t n4 = <size_t>(rows + 1) * 4
    # tags: the column bit, times 2 for data (+1 for offsets) buffers
    if cols & COL_VALUE:
        pool_get(&o.val_data, <size_t>data, 2 * COL_VALUE)
    if cols & COL_KEY:
        pool_get(&o.key_data, <size_t>data, 2 * COL_KEY)
    if cols & COL_OFFSET:
        pool_get(&o.offset, n8, 2 * COL_OFFSET)
    if cols & COL_TIMESTAMP:
        pool_get(&o.ts, n8, 2 * COL_TIMESTAMP)
    if cols & COL_TIMESTAMP_TYPE:
        pool_get(&o.tstype, n4, 2 * COL_TIMESTAMP_TYPE)
    if cols & COL_KEY:
        pool_get(&o.key_off, n4, 2 * COL_KEY + 1)
    if cols & COL_VALUE:
        pool_get(&o.val_off, n4, 2 * COL_VALUE + 1)
    if cols & COL_HEADERS:
        pool_get(&o.h_off, n4, 2 * COL_HEADERS + 1)
        # the header entries' buffers: their sizes are not known before the walk (a first
        # ask of one offset slot per row); a pooled block of a previous chunk spares the
        # page faults of growing fresh ones
        pool_get(&o.hk_off, n4, TAG_HEADER_KEY_OFFSETS)
        pool_get(&o.hv_off, n4, TAG_HEADER_VALUE_OFFSETS)
        pool_get(&o.hk_data, n4, 2 * COL_HEADERS)
        pool_get(&o.hv_data, n4, TAG_HEADER_VALUE_DATA)
    if cols & COL_PRODUCER_ID:
        pool_get(&o.pid, n8, 2 * COL_PRODUCER_ID)
    if cols & COL_BATCH_OFFSET:
        pool_get(&o.boff, n8, 2 * COL_BATCH_OFFSET)
    if cols & COL_POSITION:
        pool_get(&o.pos, n8, 2 * COL_POSITION)


cdef int presize(Out* o, int64_t rows, int64_t data) noexcept nogil:
    if out_prepare(o) < 0 or out_reserve_rows(o, rows) < 0:
        return -1
    if o.cols & COL_KEY and gb_ensure(&o.key_data, <size_t>data) < 0:
        return -1
    if o.cols & COL_VALUE and gb_ensure(&o.val_data, <size_t>data) < 0:
        return -1
    return 0


cdef inline int run_err(Err* e, int code, int64_t position, int64_t offset, int64_t a,
                        int64_t b) noexcept nogil:
    set_err(e, code, position, offset, a, b)
    return R_ERR


cdef inline int64_t legacy_rows_bound(Walk* w, Py_ssize_t pos, int64_t rows) noexcept nogil:
    """At most how many rows the uncompressed v0/v1 entries starting in [pos, w.stop) make,
    each at least LEGACY_MIN_ENTRY bytes, counting a max_rows limit (``rows`` already out).
    prescan presizes a chunk by it and legacy_run reserves by it, so that a legacy run never
    grows the presized buffers."""
    cdef int64_t bound = (<int64_t>w.stop - pos) // LEGACY_MIN_ENTRY + 1
    # (max_rows - rows, both >= 0, cannot overflow; max_rows - rows + 1 could, at INT64_MAX)
    if w.max_rows >= 0 and w.max_rows - rows < bound - 1:
        bound = w.max_rows - rows + 1 if w.max_rows > rows else 1
    return bound


cdef inline int append_binary(GBuf* data, GBuf* valid, GBuf* offs, int64_t* nulls, int64_t r,
                              const uint8_t* src, int32_t n, size_t room,
                              int64_t cover) noexcept nogil:
    """Row ``r`` of a binary column: the ``n`` bytes at ``src`` (``room`` of them readable
    there), or a null when ``n`` < 0 (the validity bitmap made at the first null covers
    ``cover`` rows, which the caller has reserved).  0, or -1 when out of memory."""
    if n >= 0:
        if gb_ensure(data, data.len + <size_t>n) < 0:
            return -1
        copy_short(data.data + data.len, src, <size_t>n, room)
        data.len += <size_t>n
    else:
        if valid.data == NULL and first_null(valid, cover) < 0:
            return -1
        bit_clear(valid.data, r)
        nulls[0] += 1
    (<int32_t*>offs.data)[r + 1] = <int32_t>data.len
    return 0


cdef int legacy_run(Walk* w, Out* o, Err* e) noexcept nogil:
    """The uncompressed v0/v1 messages from ``w.pos`` on, appended, while the entry there is
    one (walk has checked the first; each next one gets walk's checks, in walk's order, and
    any entry that is not a complete plain message, or a limit, goes back to walk: R_NEXT).
    Mirrors ``_legacy_py``: LegacyRecordBatch's size check, ensure_valid() (CRC-32 of
    magic..end), then _parse_message() (trailing bytes after the value are tolerated).
    Rows are reserved LEGACY_BLOCK at a time, not per message, and each message is checked
    against the int32 data limit before it is appended (nothing to roll back)."""
    cdef const uint8_t* buf = w.buf
    cdef const uint8_t* b
    cdef const uint8_t* m
    cdef Py_ssize_t pos = w.pos
    cdef Py_ssize_t remaining, p, kpos
    cdef int64_t offset, size, ts, blk_end = o.rows, rows_block
    cdef int magic
    cdef uint8_t attrs
    cdef int32_t klen, vlen
    cdef int64_t r
    cdef int cols = o.cols
    cdef bint want_key = (cols & COL_KEY) != 0
    cdef bint want_val = (cols & COL_VALUE) != 0
    cdef bint want_hdr = (cols & COL_HEADERS) != 0
    cdef uint32_t stored, computed
    cdef bint first = True
    while True:
        if not first:
            # walk's checks of the entry at pos, in walk's order; anything but a complete
            # uncompressed v0/v1 message under the limits is walk's to handle
            if pos >= w.stop:
                return R_NEXT
            remaining = w.n - pos
            if remaining <= HEADER_SIZE_UP_TO_MAGIC:
                return R_NEXT
            b = buf + pos
            size = <int32_t>be32(b + 8)
            if (size < RECORD_OVERHEAD_V0 or (w.max_batch >= 0 and size > w.max_batch)
                    or b[16] > 1 or remaining < size + LOG_OVERHEAD or (b[17] & 0x07) != 0):
                return R_NEXT
            if (w.max_rows >= 0 and o.rows >= w.max_rows) or (
                    w.max_bytes >= 0 and out_data_bytes(o) >= w.max_bytes):
                return R_NEXT
        else:
            b = buf + pos
            size = <int32_t>be32(b + 8)
            first = False
        offset = <int64_t>be64(b)
        m = b + LOG_OVERHEAD  # the message, from its CRC field
        magic = b[16]
        attrs = b[17]
        if magic == 1 and size < 22:
            return run_err(e, E_LEGACY_V1_SIZE, pos, offset, size, 0)
        if w.check_crcs:
            stored = be32(m)
            computed = kl_crc32(0, m + 4, <size_t>(size - 4))
            if stored != computed:
                return run_err(e, E_CRC, pos, offset, stored, computed)
        if magic:
            ts = <int64_t>be64(m + 6)
            p = 14
        else:
            ts = -1
            p = 6
        klen = <int32_t>be32(m + p)
        p += 4
        if klen >= 0 and klen > size - p - 4:
            return run_err(e, E_LEGACY_KEY, pos, offset, klen, size)
        if klen > 0:
            p += klen
        vlen = <int32_t>be32(m + p)
        p += 4
        if vlen >= 0 and vlen > size - p:
            return run_err(e, E_LEGACY_VALUE, pos, offset, vlen, size)
        # a chunk's binary columns take int32 offsets: this message starts the next chunk
        if ((want_key and klen > 0 and <int64_t>o.key_data.len + klen > INT32_MAX_)
                or (want_val and vlen > 0 and <int64_t>o.val_data.len + vlen > INT32_MAX_)):
            if o.rows == 0:
                return run_err(e, E_CHUNK_TOO_LARGE, pos, offset, 0, 0)
            w.pos = pos
            return R_LIMIT
        # append the row
        r = o.rows
        if r >= blk_end:
            rows_block = legacy_rows_bound(w, pos, r)
            if rows_block > LEGACY_BLOCK:
                rows_block = LEGACY_BLOCK
            if out_reserve_rows(o, rows_block) < 0:
                return run_err(e, E_NO_MEMORY, pos, offset, 0, 0)
            blk_end = r + rows_block
        if cols & COL_OFFSET:
            (<int64_t*>o.offset.data)[r] = offset
        if cols & COL_TIMESTAMP:
            (<int64_t*>o.ts.data)[r] = <int64_t>(<uint64_t>ts * <uint64_t>w.scale)
        kpos = 18 if magic else 10
        if want_key and append_binary(&o.key_data, &o.key_valid, &o.key_off, &o.key_nulls, r,
                                      m + kpos, klen, <size_t>(w.n - (pos + LOG_OVERHEAD + kpos)),
                                      blk_end) < 0:
            return run_err(e, E_NO_MEMORY, pos, offset, 0, 0)
        if want_val and append_binary(&o.val_data, &o.val_valid, &o.val_off, &o.val_nulls, r,
                                      m + p, vlen, <size_t>(w.n - (pos + LOG_OVERHEAD + p)),
                                      blk_end) < 0:
            return run_err(e, E_NO_MEMORY, pos, offset, 0, 0)
        if want_hdr:  # a v0/v1 message has no headers: null
            if o.h_valid.data == NULL and first_null(&o.h_valid, blk_end) < 0:
                return run_err(e, E_NO_MEMORY, pos, offset, 0, 0)
            bit_clear(o.h_valid.data, r)
            o.h_nulls += 1
            (<int32_t*>o.h_off.data)[r + 1] = <int32_t>o.nh
        if cols & COL_META:
            fill_batch_columns(o, r, 1, (1 if attrs & 0x08 else 0) if magic else -1, -1, -1, -1,
                               False, False, -1, 0, offset, pos)
        elif cols & COL_TIMESTAMP_TYPE:
            (<int32_t*>o.tstype.data)[r] = (1 if attrs & 0x08 else 0) if magic else -1
        o.rows = r + 1
        o.batches += 1
        pos += size + LOG_OVERHEAD
        w.pos = pos


cdef int inner_message(const uint8_t* d, Py_ssize_t ipos, int64_t isize, int64_t where,
                       int64_t woff, bint check, Err* e, int* imagic, int64_t* its,
                       Py_ssize_t* kpos, int32_t* klen, Py_ssize_t* vpos, int32_t* vlen) noexcept nogil:
    """Validate one inner message of a wrapper (``_legacy_py._parse_message(inner=True)``,
    then the nested-codec and CRC checks of ``_parse_inner``)."""
    cdef const uint8_t* m = d + ipos + LOG_OVERHEAD
    cdef int magic = <int8_t>m[4]
    cdef Py_ssize_t p
    cdef uint32_t stored, computed
    if magic != 0 and magic != 1:
        return set_err(e, E_INNER_MAGIC, where, woff, magic, 0)
    if magic:
        if isize < 22:
            return set_err(e, E_LEGACY_V1_SIZE, where, woff, isize, 0)
        its[0] = <int64_t>be64(m + 6)
        p = 14
    else:
        its[0] = -1
        p = 6
    klen[0] = <int32_t>be32(m + p)
    p += 4
    kpos[0] = ipos + LOG_OVERHEAD + p
    if klen[0] >= 0:
        if klen[0] > isize - p - 4:
            return set_err(e, E_INNER_KEY, where, woff, klen[0], isize)
        p += klen[0]
    vlen[0] = <int32_t>be32(m + p)
    p += 4
    vpos[0] = ipos + LOG_OVERHEAD + p
    if vlen[0] >= 0 and vlen[0] > isize - p:
        return set_err(e, E_INNER_VALUE, where, woff, vlen[0], isize)
    if m[5] & 0x07:
        return set_err(e, E_INNER_COMPRESSED, where, woff, 0, 0)
    if check:
        stored = be32(m)
        computed = kl_crc32(0, m + 4, <size_t>(isize - 4))
        if stored != computed:
            set_err(e, E_INNER_CRC, where, woff, stored, computed)
            e.c = <int64_t>be64(d + ipos)
            return -1
    imagic[0] = magic
    return 0


cdef int legacy_inner(Out* o, Err* e, const uint8_t* d, Py_ssize_t n, int64_t where,
                      int64_t woff, int wmagic, int wattrs, int64_t wts, bint check,
                      int64_t scale) noexcept nogil:
    """The inner messages of a decompressed wrapper, appended (``_legacy_py._parse_inner``:
    a partial trailing inner entry ends the set; magic 1 offsets are rebased on the wrapper's
    offset unless it is 0; a v1 inner message of a LogAppendTime v1 wrapper reports the
    wrapper's timestamp)."""
    cdef Py_ssize_t ipos = 0
    cdef int64_t isize, ioff, its
    cdef uint64_t base = 0  # wrapper offset - last inner offset: exact in uint64 (>= 0)
    cdef int64_t last = 0
    cdef int64_t count = 0
    cdef int imagic
    cdef Py_ssize_t kpos, vpos
    cdef int32_t klen, vlen
    cdef int cols = o.cols
    cdef int64_t r
    cdef int32_t tstype = -1 if wmagic == 0 else (1 if wattrs & 0x08 else 0)
    cdef int64_t first_offset = 0
    # pass 1: validate, count, find the last inner offset
    while n - ipos >= LOG_OVERHEAD:
        ioff = <int64_t>be64(d + ipos)
        isize = <int32_t>be32(d + ipos + 8)
        if isize < RECORD_OVERHEAD_V0:
            return set_err(e, E_INNER_SIZE, where, woff, isize, 0)
        if isize > n - ipos - LOG_OVERHEAD:
            break
        if inner_message(d, ipos, isize, where, woff, check, e, &imagic, &its, &kpos, &klen,
                         &vpos, &vlen) < 0:
            return -1
        last = ioff
        count += 1
        ipos += LOG_OVERHEAD + isize
    if count == 0:
        return set_err(e, E_INNER_EMPTY, where, woff, 0, 0)
    if wmagic == 1 and woff != 0:
        if woff < last:
            return set_err(e, E_WRAPPER_OFFSET, where, woff, woff, last)
        base = <uint64_t>woff - <uint64_t>last
    # pass 2: append
    if out_reserve_rows(o, count) < 0:
        return set_err(e, E_NO_MEMORY, where, woff, 0, 0)
    ipos = 0
    r = o.rows
    while count > 0:
        ioff = <int64_t>be64(d + ipos)
        isize = <int32_t>be32(d + ipos + 8)
        inner_message(d, ipos, isize, where, woff, False, e, &imagic, &its, &kpos, &klen, &vpos, &vlen)
        if base:
            if base > <uint64_t>INT64_MAX_ - <uint64_t>ioff:
                return set_err(e, E_INNER_OVERFLOW, where, woff, ioff, <int64_t>base)
            ioff = <int64_t>(<uint64_t>ioff + base)
        if r == o.rows:
            first_offset = ioff
        if imagic == 1 and wmagic == 1 and (wattrs & 0x08):
            its = wts
        if cols & COL_OFFSET:
            (<int64_t*>o.offset.data)[r] = ioff
        if cols & COL_TIMESTAMP:
            (<int64_t*>o.ts.data)[r] = <int64_t>(<uint64_t>its * <uint64_t>scale)
        if cols & COL_KEY:
            if klen >= 0:
                if gb_ensure(&o.key_data, o.key_data.len + <size_t>klen) < 0:
                    return set_err(e, E_NO_MEMORY, where, woff, 0, 0)
                memcpy(o.key_data.data + o.key_data.len, d + kpos, <size_t>klen)
                o.key_data.len += <size_t>klen
            else:
                if o.key_valid.data == NULL and first_null(&o.key_valid, o.rows + count + (r - o.rows)) < 0:
                    return set_err(e, E_NO_MEMORY, where, woff, 0, 0)
                bit_clear(o.key_valid.data, r)
                o.key_nulls += 1
            (<int32_t*>o.key_off.data)[r + 1] = <int32_t>o.key_data.len
        if cols & COL_VALUE:
            if vlen >= 0:
                if gb_ensure(&o.val_data, o.val_data.len + <size_t>vlen) < 0:
                    return set_err(e, E_NO_MEMORY, where, woff, 0, 0)
                memcpy(o.val_data.data + o.val_data.len, d + vpos, <size_t>vlen)
                o.val_data.len += <size_t>vlen
            else:
                if o.val_valid.data == NULL and first_null(&o.val_valid, o.rows + count + (r - o.rows)) < 0:
                    return set_err(e, E_NO_MEMORY, where, woff, 0, 0)
                bit_clear(o.val_valid.data, r)
                o.val_nulls += 1
            (<int32_t*>o.val_off.data)[r + 1] = <int32_t>o.val_data.len
        if cols & COL_HEADERS:
            if o.h_valid.data == NULL and first_null(&o.h_valid, o.rows + count + (r - o.rows)) < 0:
                return set_err(e, E_NO_MEMORY, where, woff, 0, 0)
            bit_clear(o.h_valid.data, r)
            o.h_nulls += 1
            (<int32_t*>o.h_off.data)[r + 1] = <int32_t>o.nh
        r += 1
        count -= 1
        ipos += LOG_OVERHEAD + isize
    fill_batch_columns(o, o.rows, r - o.rows, tstype, -1, -1, -1, False, False, -1,
                       <int8_t>(wattrs & 0x07), first_offset, where)
    o.rows = r
    o.batches += 1
    return 0


cdef int walk(Walk* w, Out* o, Err* e) noexcept nogil:
    """Decode entries from ``w.pos`` until something needs Python, a limit, the end, or an
    error.  Runs without the GIL."""
    cdef const uint8_t* buf = w.buf
    cdef const uint8_t* b
    cdef const uint8_t* data
    cdef Py_ssize_t pos, remaining, dn
    cdef int64_t offset, size
    cdef uint32_t stored, computed
    cdef int magic, codec
    cdef bint control
    cdef Batch* bt = &w.bt
    cdef Mark m
    cdef int rc
    while True:
        pos = w.pos
        if pos >= w.stop:
            return R_DONE
        remaining = w.n - pos
        if remaining <= HEADER_SIZE_UP_TO_MAGIC:  # as MemoryRecords: no entry fits
            return R_TRUNC
        b = buf + pos
        offset = <int64_t>be64(b)
        size = <int32_t>be32(b + 8)
        if size < RECORD_OVERHEAD_V0:
            set_err(e, E_ENTRY_SIZE, pos, offset, size, 0)
            return R_ERR
        if w.max_batch >= 0 and size > w.max_batch:
            set_err(e, E_TOO_LARGE, pos, offset, size, w.max_batch)
            return R_ERR
        magic = b[16]
        if magic > 2:
            set_err(e, E_MAGIC, pos, offset, <int8_t>magic, 0)  # Kafka reads a signed byte
            return R_ERR
        if remaining < size + LOG_OVERHEAD:
            return R_TRUNC
        if o.rows > 0 and ((w.max_rows >= 0 and o.rows >= w.max_rows)
                           or (w.max_bytes >= 0 and out_data_bytes(o) >= w.max_bytes)):
            return R_LIMIT
        w.magic = magic
        if magic != 2:
            if (b[17] & 0x07) != 0:  # a compressed wrapper: record objects, with the GIL
                w.need_python = 1
                return R_GIL
            rc = legacy_run(w, o, e)
            if rc != R_NEXT:
                return rc
            continue
        # -- v2 batch header (RecordBatch: 61 bytes present, then the declared size)
        bt.position = pos
        bt.base_offset = offset
        bt.size = size + LOG_OVERHEAD
        if remaining < RECORD_BATCH_OVERHEAD:
            set_err(e, E_BATCH_TRUNCATED, pos, offset, remaining, 0)
            return R_ERR
        if bt.size < RECORD_BATCH_OVERHEAD:
            set_err(e, E_BATCH_SIZE, pos, offset, bt.size, 0)
            return R_ERR
        bt.leader_epoch = <int32_t>be32(b + 12)
        bt.attributes = <int16_t>be16(b + 21)
        bt.base_ts = <int64_t>be64(b + 27)
        bt.max_ts = <int64_t>be64(b + 35)
        bt.producer_id = <int64_t>be64(b + 43)
        bt.producer_epoch = <int16_t>be16(b + 51)
        bt.base_sequence = <int32_t>be32(b + 53)
        bt.count = <int32_t>be32(b + 57)
        if w.check_crcs:
            stored = be32(b + 17)
            computed = kl_crc32c(0, b + ATTRIBUTES_OFFSET, <size_t>(bt.size - ATTRIBUTES_OFFSET))
            if stored != computed:
                set_err(e, E_CRC, pos, offset, stored, computed)
                return R_ERR
        control = (bt.attributes & 0x20) != 0
        if control and not w.include_control:
            w.pos = pos + bt.size
            continue
        if (w.aborted != NULL and (bt.attributes & 0x10) and not control
                and aborted_contains(w.aborted, bt.producer_id, offset)):
            w.pos = pos + bt.size
            continue
        if bt.count < 0:
            set_err(e, E_COUNT_NEGATIVE, pos, offset, bt.count, 0)
            return R_ERR
        if bt.count == 0:
            o.batches += 1
            w.pos = pos + bt.size
            continue
        codec = bt.attributes & 0x07
        bt.codec = codec
        if codec > 4:
            set_err(e, E_CODEC, pos, offset, codec, 0)
            return R_ERR
        data = b + RECORD_BATCH_OVERHEAD
        dn = <Py_ssize_t>(bt.size - RECORD_BATCH_OVERHEAD)
        if (codec == 2 or codec == 3) and not (w.known & (1 << codec)):
            w.need_python = 4  # is that codec's library installed? (asked at its first batch)
            return R_GIL
        if (codec == 2 or codec == 3) and (w.native & (1 << codec)):
            if codec == 2:
                codec = snappy_decompress(data, dn, w.scratch, w.max_dec)
            else:
                codec = lz4_decompress(data, dn, w.scratch, w.max_dec)
            if codec != 0:
                w.need_python = 3 if codec == -2 else 2
                return R_GIL
            data = w.scratch.data
            dn = <Py_ssize_t>w.scratch.len
        elif codec != 0:
            w.need_python = 2
            return R_GIL
        out_mark(o, &m)
        if parse_batch(o, e, bt, data, dn, w.scale) < 0:
            return R_ERR
        if out_overflowed(o):
            # a binary column would pass int32 offsets: this batch starts the next chunk
            if m.rows == 0:
                set_err(e, E_CHUNK_TOO_LARGE, pos, offset, 0, 0)
                return R_ERR
            out_rollback(o, &m)
            return R_LIMIT
        w.pos = pos + bt.size


cdef int parse_batch(Out* o, Err* e, Batch* bt, const uint8_t* data, Py_ssize_t dn,
                     int64_t scale) noexcept nogil:
    """Count check, records, batch counter (for a decompressed or raw records section)."""
    if bt.count > dn:
        return set_err(e, E_COUNT_TOO_LARGE, bt.position, bt.base_offset, bt.count, dn)
    if parse_records(o, e, data, dn, bt, scale) < 0:
        return -1
    o.batches += 1
    return 0


_compression = None


cdef object _compression_mod():
    global _compression
    if _compression is None:
        from . import compression as _c

        _compression = _c
    return _compression


@cython.final
cdef class Decoder:
    """Decode log entries into column buffers; see ``_arrow_py.Decoder``.

    One Decoder is not meant for two threads at once (it owns a decompression scratch
    buffer); create one per thread."""

    cdef readonly int columns
    cdef readonly bint check_crcs
    cdef readonly bint include_control
    cdef readonly object max_batch_size
    cdef readonly int64_t max_decompressed_size
    cdef readonly int64_t timestamp_scale
    cdef readonly tuple aborted
    cdef Aborted ab
    cdef GBuf scratch
    cdef bint busy

    def __cinit__(self):
        memset(&self.ab, 0, sizeof(Aborted))
        memset(&self.scratch, 0, sizeof(GBuf))
        self.busy = False

    def __init__(
        self,
        int columns=COL_ALL,
        *,
        check_crcs=True,
        include_control=False,
        max_batch_size=None,
        max_decompressed_size=256 * 1024 * 1024,
        timestamp_scale=1,
        aborted=None,
    ):
        cdef Py_ssize_t i
        if columns < 0 or columns > COL_ALL:
            raise ValueError(f"columns must be a bit set of COL_* values, not {columns!r}")
        if timestamp_scale not in (1, 1000):
            raise ValueError(f"timestamp_scale must be 1 or 1000, not {timestamp_scale!r}")
        if max_decompressed_size < 0:
            raise ValueError("max_decompressed_size must be >= 0")
        self.columns = columns
        self.check_crcs = bool(check_crcs)
        self.include_control = bool(include_control)
        self.max_batch_size = max_batch_size
        self.max_decompressed_size = max_decompressed_size
        self.timestamp_scale = timestamp_scale
        self.aborted = normalize_aborted(aborted)
        self._free_aborted()
        n = len(self.aborted)
        if n:
            self.ab.pid = <int64_t*>malloc(n * sizeof(int64_t))
            self.ab.first = <int64_t*>malloc(n * sizeof(int64_t))
            self.ab.last = <int64_t*>malloc(n * sizeof(int64_t))
            if self.ab.pid == NULL or self.ab.first == NULL or self.ab.last == NULL:
                self._free_aborted()
                raise MemoryError()
            for i, (p, f, l) in enumerate(self.aborted):
                self.ab.pid[i] = p
                self.ab.first[i] = f
                self.ab.last[i] = l
            self.ab.n = n

    cdef void _free_aborted(self):
        free(self.ab.pid)
        free(self.ab.first)
        free(self.ab.last)
        memset(&self.ab, 0, sizeof(Aborted))

    def __dealloc__(self):
        self._free_aborted()
        gb_free(&self.scratch)

    def decode(self, buffer, Py_ssize_t start=0, stop=None, max_rows=None, max_bytes=None):
        """Decode the entries that start in ``[start, stop)``; see ``_arrow_py``."""
        cdef Py_buffer view
        cdef Walk w
        cdef Out o
        cdef Err e
        cdef Mark m
        cdef int r
        cdef int64_t est_rows = 0, est_data = 0
        cdef bint truncated = False
        cdef bint done = False
        if self.busy:
            raise RuntimeError("this Decoder is in use by another thread; create one per thread")
        PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
        self.busy = True
        memset(&o, 0, sizeof(Out))
        try:
            if start < 0 or start > view.len:
                raise ValueError(f"start {start} outside the buffer (0..{view.len})")
            memset(&w, 0, sizeof(Walk))
            memset(&e, 0, sizeof(Err))
            w.buf = <const uint8_t*>view.buf
            w.n = view.len
            w.pos = start
            w.stop = view.len if stop is None or stop > view.len else stop
            w.max_rows = -1 if max_rows is None else max_rows
            w.max_bytes = -1 if max_bytes is None else max_bytes
            w.max_batch = -1 if self.max_batch_size is None else self.max_batch_size
            w.max_dec = self.max_decompressed_size
            w.scale = self.timestamp_scale
            w.check_crcs = self.check_crcs
            w.include_control = self.include_control
            w.aborted = &self.ab if self.ab.n else NULL
            w.scratch = &self.scratch
            out_init(&o, self.columns)
            with nogil:
                prescan(&w, &est_rows, &est_data)
            out_from_pool(&o, est_rows, est_data)
            with nogil:
                r = presize(&o, est_rows, est_data)
            if r < 0:
                raise MemoryError()
            mv = None
            while True:
                with nogil:
                    r = walk(&w, &o, &e)
                if r == R_ERR:
                    raise decode_error(e.code, e.position, e.offset, e.a, e.b, e.c)
                if r == R_DONE:
                    done = True
                    break
                if r == R_TRUNC:
                    done = truncated = True
                    break
                if r == R_LIMIT:
                    break
                # R_GIL: the entry at w.pos needs Python
                if w.need_python == 4:
                    # The C decoders need no library, but where the codec's library is missing
                    # the section goes to kafkalog.compression, which raises MissingCodecError
                    # like the pure twin (asked only when a batch of that codec comes, so
                    # uncompressed data never imports a codec library, as in the pure twin).
                    if codec_library_ready(_compression_mod(), w.bt.codec):
                        w.native |= 1 << w.bt.codec
                    w.known |= 1 << w.bt.codec
                    continue
                if mv is None:
                    mv = memoryview(buffer)
                    if mv.ndim != 1 or mv.itemsize != 1:
                        mv = mv.cast("B")
                out_mark(&o, &m)
                if self.scratch.cap > (<size_t>4 << 20):
                    gb_free(&self.scratch)  # never held while kafkalog.compression works
                if w.need_python == 1:
                    self._legacy_wrapper(mv, &w, &o, &e)
                elif w.need_python == 3:
                    exc = _compression_mod()._too_big(
                        "snappy" if w.bt.codec == 2 else "lz4", w.max_dec
                    )
                    exc.position = w.bt.position
                    exc.offset = w.bt.base_offset
                    raise exc
                else:
                    self._python_batch(mv, &w, &o, &e)
                if out_overflowed(&o):
                    if m.rows == 0:
                        raise decode_error(E_CHUNK_TOO_LARGE, w.pos, <int64_t>be64(w.buf + w.pos))
                    out_rollback(&o, &m)
                    break
                w.pos += <Py_ssize_t>(<int32_t>be32(w.buf + w.pos + 8)) + LOG_OVERHEAD
            return self._chunk(&o, w.pos, done, truncated)
        finally:
            out_free(&o)
            self.busy = False
            PyBuffer_Release(&view)

    cdef object _chunk(self, Out* o, Py_ssize_t next_position, bint done, bint truncated):
        cdef int cols = o.cols
        cdef int64_t n = o.rows
        c = Chunk()
        c.columns = cols
        c.num_rows = n
        c.num_batches = o.batches
        c.next_position = next_position
        c.done = done
        c.truncated = truncated
        if cols & COL_OFFSET:
            gb_ensure(&o.offset, 8)
            c.offset = take(&o.offset, n * 8)
        if cols & COL_TIMESTAMP:
            gb_ensure(&o.ts, 8)
            c.timestamp = take(&o.ts, n * 8)
        if cols & COL_TIMESTAMP_TYPE:
            gb_ensure(&o.tstype, 8)
            c.timestamp_type = take(&o.tstype, n * 4)
        if cols & COL_KEY:
            c.key_null_count = o.key_nulls
            c.key_validity = take(&o.key_valid, (n + 7) >> 3) if o.key_nulls else None
            c.key_offsets = take(&o.key_off, (n + 1) * 4)
            c.key_data = take(&o.key_data, o.key_data.len)
        if cols & COL_VALUE:
            c.value_null_count = o.val_nulls
            c.value_validity = take(&o.val_valid, (n + 7) >> 3) if o.val_nulls else None
            c.value_offsets = take(&o.val_off, (n + 1) * 4)
            c.value_data = take(&o.val_data, o.val_data.len)
        if cols & COL_HEADERS:
            c.headers_null_count = o.h_nulls
            c.headers_validity = take(&o.h_valid, (n + 7) >> 3) if o.h_nulls else None
            c.headers_offsets = take(&o.h_off, (n + 1) * 4)
            c.header_count = o.nh
            c.header_key_offsets = take(&o.hk_off, (o.nh + 1) * 4)
            c.header_key_data = take(&o.hk_data, o.hk_data.len)
            c.header_key_invalid_utf8 = bool(o.hk_bad)
            c.header_value_null_count = o.hv_nulls
            c.header_value_validity = take(&o.hv_valid, (o.nh + 7) >> 3) if o.hv_nulls else None
            c.header_value_offsets = take(&o.hv_off, (o.nh + 1) * 4)
            c.header_value_data = take(&o.hv_data, o.hv_data.len)
        if cols & COL_PRODUCER_ID:
            gb_ensure(&o.pid, 8)
            c.producer_id = take(&o.pid, n * 8)
        if cols & COL_PRODUCER_EPOCH:
            gb_ensure(&o.epoch, 8)
            c.producer_epoch = take(&o.epoch, n * 2)
        if cols & COL_BASE_SEQUENCE:
            gb_ensure(&o.seq, 8)
            c.base_sequence = take(&o.seq, n * 4)
        if cols & COL_IS_TRANSACTIONAL:
            gb_ensure(&o.txn, 8)
            c.is_transactional = take(&o.txn, (n + 7) >> 3)
        if cols & COL_IS_CONTROL:
            gb_ensure(&o.ctrl, 8)
            c.is_control = take(&o.ctrl, (n + 7) >> 3)
        if cols & COL_LEADER_EPOCH:
            gb_ensure(&o.lepoch, 8)
            c.leader_epoch = take(&o.lepoch, n * 4)
        if cols & COL_COMPRESSION:
            gb_ensure(&o.codec, 8)
            c.compression = take(&o.codec, n)
        if cols & COL_BATCH_OFFSET:
            gb_ensure(&o.boff, 8)
            c.batch_offset = take(&o.boff, n * 8)
        if cols & COL_POSITION:
            gb_ensure(&o.pos, 8)
            c.position = take(&o.pos, n * 8)
        return c

    cdef void _python_batch(self, object mv, Walk* w, Out* o, Err* e) except *:
        """A v2 batch whose records section kafkalog.compression decompresses (gzip, zstd, or
        a snappy/lz4 stream the native decoders left to it)."""
        cdef Batch* bt = &w.bt
        cdef Py_buffer dview
        cdef int rc
        start = bt.position + RECORD_BATCH_OVERHEAD
        raw = mv[start : bt.position + bt.size]
        try:
            data = _compression_mod().decompress(bt.codec, raw, magic=2, max_size=w.max_dec)
        except CorruptRecordError as exc:
            exc.position = bt.position
            exc.offset = bt.base_offset
            raise
        PyObject_GetBuffer(data, &dview, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = parse_batch(o, e, bt, <const uint8_t*>dview.buf, dview.len, w.scale)
            if rc < 0:
                raise decode_error(e.code, e.position, e.offset, e.a, e.b)
        finally:
            PyBuffer_Release(&dview)

    cdef void _legacy_wrapper(self, object mv, Walk* w, Out* o, Err* e) except *:
        """A compressed v0/v1 entry (a wrapper): checked like ``_legacy_py``'s
        LegacyRecordBatch._load(), decompressed by kafkalog.compression, and its inner
        messages parsed and appended without the GIL (``legacy_inner``)."""
        cdef Py_ssize_t pos = w.pos
        cdef const uint8_t* b = w.buf + pos
        cdef const uint8_t* m = b + LOG_OVERHEAD
        cdef int64_t offset = <int64_t>be64(b)
        cdef int64_t size = <int32_t>be32(b + 8)
        cdef int magic = b[16]
        cdef int attrs = b[17]
        cdef int codec = attrs & 0x07
        cdef Py_ssize_t p
        cdef int32_t klen, vlen
        cdef uint32_t stored, computed
        cdef Py_buffer dview
        cdef int rc
        cdef int64_t wts
        if magic == 1 and size < 22:
            raise decode_error(E_LEGACY_V1_SIZE, pos, offset, size)
        if codec > 4:
            raise decode_error(E_CODEC, pos, offset, codec)
        # (zstd below magic 2 is read leniently, as _legacy_py does)
        if w.check_crcs:
            stored = be32(m)
            computed = kl_crc32(0, m + 4, <size_t>(size - 4))
            if stored != computed:
                raise decode_error(E_CRC, pos, offset, stored, computed)
        p = 14 if magic else 6
        klen = <int32_t>be32(m + p)
        p += 4
        if klen >= 0 and klen > size - p - 4:
            raise decode_error(E_LEGACY_KEY, pos, offset, klen, size)
        if klen > 0:
            p += klen
        vlen = <int32_t>be32(m + p)
        p += 4
        if vlen >= 0 and vlen > size - p:
            raise decode_error(E_LEGACY_VALUE, pos, offset, vlen, size)
        if vlen < 0:
            raise decode_error(E_WRAPPER_NULL, pos, offset, magic)
        value = mv[pos + LOG_OVERHEAD + p : pos + LOG_OVERHEAD + p + vlen]
        try:
            data = _compression_mod().decompress(codec, value, magic=magic, max_size=w.max_dec)
        except KafkaLogError as exc:
            exc.position = pos
            exc.offset = offset
            raise
        wts = <int64_t>be64(m + 6) if magic else -1
        if not len(data):
            o.batches += 1  # a wrapper of an empty message set: no records
            return
        PyObject_GetBuffer(data, &dview, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = legacy_inner(o, e, <const uint8_t*>dview.buf, dview.len, pos, offset, magic,
                                  attrs, wts, w.check_crcs, w.scale)
            if rc < 0:
                raise decode_error(e.code, e.position, e.offset, e.a, e.b, e.c)
        finally:
            PyBuffer_Release(&dview)
