# The memory layer shared by the compiled modules (cimported; no module of its own).
#
# Big-endian loads and stores, little-endian 32-bit loads, and GBuf: a growable malloc'd byte
# buffer with SLACK spare bytes past its capacity, so that word-sized copies (the codecs'
# copy8) may overshoot the end.  Buffers of 4 MiB and more are advised as transparent huge
# pages on Linux (``kl_buffers.h``; each module has its own switch, ``kl_hugepages``).
# The loads, stores and gb_ensure are ``cdef inline``: each cimporting module compiles its own
# copy, so the hot paths pay no call across modules; the growth itself (gb_reserve,
# gb_ensure_at_most) is a plain static C function of each module, the slow path it is.  Callers
# check bounds before every load.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free


cdef inline uint64_t be64(const uint8_t* p) noexcept nogil:
    return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
            | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
            | (<uint64_t>p[6] << 8) | <uint64_t>p[7])

cdef inline uint32_t be32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8)
            | <uint32_t>p[3])

cdef inline uint16_t be16(const uint8_t* p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | <uint16_t>p[1])

cdef inline uint32_t le32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[3] << 24) | (<uint32_t>p[2] << 16) | (<uint32_t>p[1] << 8)
            | <uint32_t>p[0])

cdef inline void put_be64(uint8_t* p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(v >> (56 - 8 * i))

cdef inline void put_be32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void put_be16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

# -- growable buffers (kl_buffers.h) ------------------------------------------------------------
# data is malloc'd with SLACK spare bytes past cap so that word-sized copies may overshoot.
cdef extern from "kl_buffers.h":
    enum:
        SLACK "KL_GBUF_SLACK"
        MIN_CAP "KL_GBUF_MIN_CAP"
        GROW_BLOCK "KL_GBUF_GROW_BLOCK"  # medium buffers grow in steps of this

    ctypedef struct GBuf "kl_gbuf":
        uint8_t* data
        size_t len
        size_t cap
        size_t touched  # bytes known to be mapped already (a block reused from the pool)
        int tag         # which column buffer it serves (pool matching)

    int kl_hugepages
    void kl_advise(void *p, size_t n) nogil
    # Make room for ``need`` bytes in total; 0, or -1 when out of memory (growth doubles,
    # rounded up: 2 MiB steps for large buffers, GROW_BLOCK for medium ones; huge-page advice)
    int gb_reserve "kl_gb_reserve"(GBuf* b, size_t need) noexcept nogil
    # Like gb_reserve, but growth never goes past ``most`` bytes (>= need): a decompression
    # scratch stays within its limit instead of doubling past it
    int gb_ensure_at_most "kl_gb_ensure_at_most"(GBuf* b, size_t need, size_t most) noexcept nogil
    # Copy n bytes into a GBuf's reserved room; short copies may write up to 31 bytes past
    # dst + n (into the room or the slack) and read past src + n, within src + room
    void copy_short "kl_copy_short"(uint8_t* dst, const uint8_t* src, size_t n, size_t room) noexcept nogil


cdef inline int gb_ensure(GBuf* b, size_t need) noexcept nogil:
    if need <= b.cap and b.data != NULL:
        return 0
    return gb_reserve(b, need)

cdef inline void gb_free(GBuf* b) noexcept nogil:
    free(b.data)
    b.data = NULL
    b.len = 0
    b.cap = 0

cdef inline int set_hugepages(int on) noexcept nogil:
    """Turn the huge-page advice of this module's buffers on or off; the previous setting."""
    global kl_hugepages
    cdef int old = kl_hugepages
    kl_hugepages = on
    return old
