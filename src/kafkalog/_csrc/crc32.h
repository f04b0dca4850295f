/*
 * crc32.h -- CRC-32 (IEEE 802.3, the one zlib.crc32 and java.util.zip.CRC32 compute) for the
 * legacy (magic 0/1) message format of kafkalog.
 *
 * Self-contained header: every function and table is static, so each translation unit that
 * includes it gets its own private copy. From Cython:
 *
 *     cdef extern from "crc32.h" nogil:
 *         void kl_crc32_init()
 *         uint32_t kl_crc32(uint32_t crc, const unsigned char *buf, size_t len)
 *         uint32_t kl_crc32_sw(uint32_t crc, const unsigned char *buf, size_t len)
 *         int kl_crc32_hw_available()
 *
 * kl_crc32_init() fills the tables; call it once (at module import, under the GIL) before the
 * first kl_crc32(). CRCs are finished values and chain like zlib's crc32(): start from 0 and
 * pass the previous result to continue, so kl_crc32(kl_crc32(0, a, n), b, m) is the CRC of a
 * followed by b. Check value: "123456789" -> 0xCBF43926.
 *
 * Portable method: slicing-by-8 (eight 256-entry tables, 8 bytes per step, little-endian word
 * loads done byte by byte so it is alignment- and endian-independent), single bytes for the head
 * and tail. Reflected polynomial P = 0xEDB88320, raw register r, feeding one byte x:
 *     r = (r >> 8) ^ T0[(r ^ x) & 0xff]
 *     T0[i]    = i fed through 8 bit-steps of r = (r >> 1) ^ (P if r & 1 else 0)
 *     Tk[i]    = (T(k-1)[i] >> 8) ^ T0[T(k-1)[i] & 0xff]      (k = 1..7)
 *
 * x86-64 with GCC or Clang (define KL_CRC32_NO_HW to leave it out): inputs of 64 bytes or more
 * are folded 64 then 16 bytes at a time with carry-less multiplication (PCLMULQDQ, detected at
 * run time by kl_crc32_init) and reduced to 32 bits with Barrett's method, as in Intel's
 * white paper "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction"
 * (Gopal et al., 2009). The constants are that paper's bit-reflected values for the IEEE
 * polynomial P' = 0x104C11DB7 (remainders of powers of x modulo P'; the same numbers Linux's
 * crc32-pclmul and Chromium's zlib use): k1 = 0x154442bd4, k2 = 0x1c6e41596 (fold by 512 bits),
 * k3 = 0x1751997d0, k4 = 0xccaa009e (fold by 128 bits), k5 = 0x163cd6124 (96 -> 64 bits),
 * P' reflected = 0x1db710641 and mu = 0x1f7011641 (Barrett). Whatever is left after the last
 * whole 16-byte block goes through the tables.
 * kl_crc32_hw_available() says whether that path is in use; kl_crc32_sw() is the tables alone.
 */
#ifndef KAFKALOG_CRC32_H
#define KAFKALOG_CRC32_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#  define KL__CRC32_UNUSED __attribute__((unused))
#else
#  define KL__CRC32_UNUSED
#endif

#if !defined(KL_CRC32_NO_HW) && (defined(__x86_64__) || defined(_M_X64)) && \
    (defined(__GNUC__) || defined(__clang__))
#  define KL__CRC32_CLMUL 1
#  include <cpuid.h>
#  include <immintrin.h>
#endif

static uint32_t kl__crc32_table[8][256];
static int kl__crc32_ready = 0;
static int kl__crc32_hw = 0;

static KL__CRC32_UNUSED void kl_crc32_init(void)
{
    uint32_t i, r;
    int k, b;
    if (kl__crc32_ready)
        return;
    for (i = 0; i < 256; i++) {
        r = i;
        for (b = 0; b < 8; b++)
            r = (r >> 1) ^ ((r & 1u) ? 0xEDB88320u : 0u);
        kl__crc32_table[0][i] = r;
    }
    for (i = 0; i < 256; i++) {
        r = kl__crc32_table[0][i];
        for (k = 1; k < 8; k++) {
            r = (r >> 8) ^ kl__crc32_table[0][r & 0xffu];
            kl__crc32_table[k][i] = r;
        }
    }
#if defined(KL__CRC32_CLMUL)
    {
        unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
        /* leaf 1, ECX: bit 1 PCLMULQDQ, bit 19 SSE4.1 (for _mm_extract_epi32) */
        if (__get_cpuid(1, &eax, &ebx, &ecx, &edx))
            kl__crc32_hw = ((ecx >> 1) & 1u) && ((ecx >> 19) & 1u);
    }
#endif
    kl__crc32_ready = 1;
}

static KL__CRC32_UNUSED int kl_crc32_hw_available(void)
{
    return kl__crc32_hw;
}

/* Raw register in, raw register out (no pre/post inversion). */
static inline uint32_t kl__crc32_tables(uint32_t r, const unsigned char *buf, size_t len)
{
    const uint32_t (*t)[256] = (const uint32_t (*)[256])kl__crc32_table;
    while (len && ((uintptr_t)buf & 7u)) {
        r = (r >> 8) ^ t[0][(r ^ *buf++) & 0xffu];
        len--;
    }
    while (len >= 8) {
        uint32_t lo = r ^ ((uint32_t)buf[0] | ((uint32_t)buf[1] << 8) |
                           ((uint32_t)buf[2] << 16) | ((uint32_t)buf[3] << 24));
        uint32_t hi = (uint32_t)buf[4] | ((uint32_t)buf[5] << 8) |
                      ((uint32_t)buf[6] << 16) | ((uint32_t)buf[7] << 24);
        r = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^
            t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^
            t[3][hi & 0xffu] ^ t[2][(hi >> 8) & 0xffu] ^
            t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
        buf += 8;
        len -= 8;
    }
    while (len--) {
        r = (r >> 8) ^ t[0][(r ^ *buf++) & 0xffu];
    }
    return r;
}

#if defined(KL__CRC32_CLMUL)
/* Raw register in and out; len >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t kl__crc32_clmul(uint32_t r, const unsigned char *buf, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)r));
    buf += 64;
    len -= 64;

    /* four parallel folds of 512 bits */
    x0 = k1k2;
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }

    /* fold the four lanes into one 128-bit value */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);

    /* single folds of 128 bits */
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }

    /* 128 -> 64 bits */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, mask32);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);

    /* Barrett reduction to 32 bits */
    x0 = poly;
    x2 = _mm_and_si128(x1, mask32);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, mask32);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* The tables alone (for tests and for comparison). */
static KL__CRC32_UNUSED uint32_t kl_crc32_sw(uint32_t crc, const unsigned char *buf, size_t len)
{
    return ~kl__crc32_tables(~crc, buf, len);
}

static KL__CRC32_UNUSED uint32_t kl_crc32(uint32_t crc, const unsigned char *buf, size_t len)
{
    uint32_t r = ~crc;
#if defined(KL__CRC32_CLMUL)
    if (len >= 64 && kl__crc32_hw) {
        size_t chunk = len & ~(size_t)15;
        r = kl__crc32_clmul(r, buf, chunk);
        buf += chunk;
        len -= chunk;
    }
#endif
    return ~kl__crc32_tables(r, buf, len);
}

#endif /* KAFKALOG_CRC32_H */
