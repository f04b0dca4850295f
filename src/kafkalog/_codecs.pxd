# The codecs shared by the compiled modules (cimported by _arrow.pyx and _batch.pyx; no module
# of its own): snappy (raw blocks and xerial framing), LZ4 in Kafka's frame format, and the
# xxh32 checksum the frame carries, in ``_csrc/kl_codecs.h`` (plain static C functions: each
# user compiles its own copy of each decoder loop, called directly, as when it was its own).
# They decompress a records section (or a v0/v1 wrapper's value) into a GBuf (``_buffers.pxd``)
# without the GIL.  Anything unusual - a frame option they do not take, damage, a length past
# the limit - makes them decline (-1) and the caller asks ``kafkalog.compression``, so results
# and errors are always that module's; -2 means the output would pass the limit (its
# DecompressedSizeError, found without decoding past it).  Every read is checked against the
# end of the input before it happens; writes stay within the output's capacity plus SLACK.
from libc.stdint cimport int64_t, uint8_t, uint32_t

from ._buffers cimport GBuf


cdef extern from "kl_codecs.h" nogil:
    # 0, -1 (declined) or -2 (past ``limit``); ``out`` is reset (len 0) first
    int snappy_decompress "kl_snappy_decompress"(const uint8_t* s, Py_ssize_t n, GBuf* out,
                                                 int64_t limit) noexcept
    int lz4_decompress "kl_lz4_decompress"(const uint8_t* s, Py_ssize_t n, GBuf* out,
                                           int64_t limit) noexcept
    # xxh32 of ``p[:n]``; one LZ4 block into ``dst`` (NULL: only measured), its length or -1
    uint32_t xxh32 "kl_xxh32"(const uint8_t* p, Py_ssize_t n, uint32_t seed) noexcept
    Py_ssize_t lz4_block "kl_lz4_block"(const uint8_t* s, Py_ssize_t n, uint8_t* dst,
                                        Py_ssize_t cap) noexcept


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
