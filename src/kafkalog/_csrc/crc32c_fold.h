/*
 * crc32c_fold.h -- CRC-32C of long buffers by folding with carry-less multiplication (x86-64).
 *
 * Included by crc32c.h only (it needs kl__crc32c_hw_raw and the KL__CRC_X86 checks made
 * there); GCC >= 8 and Clang >= 6 on x86-64 compile it, every other compiler or architecture
 * leaves it out and keeps the crc32-instruction and table paths. No function here is built
 * with -m flags: each carries __attribute__((target(...))), and crc32c.h calls one only after
 * CPUID (and XGETBV, for the AVX state) said that the CPU and the OS support it, so a module
 * built from this header still runs on a CPU without any of these instructions.
 *
 * Kernels (each needs SSE4.2 as well, for the crc32 chains, the last 16 bytes and the tail):
 *   kl__crc32c_fold_pclmul      PCLMULQDQ on 128-bit xmm registers, 8 accumulators, beside
 *                               three crc32 chains (steps of 3*64 + 128 bytes)
 *   kl__crc32c_fold_vpclmul256  VPCLMULQDQ on 256-bit ymm registers (AVX2), 8 accumulators,
 *                               beside three crc32 chains (steps of 3*64 + 256 bytes)
 *   kl__crc32c_fold_vpclmul512  VPCLMULQDQ on 512-bit zmm registers (AVX-512F), 4 accumulators
 *                               (steps of 256 bytes)
 * Each takes a raw register (no pre/post inversion) and n >= KL__CRC_FOLD_MIN bytes.
 * Measured on an AMD EPYC with VPCLMULQDQ and AVX2 but no AVX-512 (1 MiB in cache, one
 * thread): the crc32 instruction alone (three chains) ~21 GB/s, multiplier alone ~22 GB/s
 * (ymm) and ~11 GB/s (xmm); beside three chains of 64 bytes ~33 GB/s (ymm), ~24 GB/s (xmm).
 * Chains of 48 to 128 bytes were within noise of 64. The zmm kernel could not be measured
 * (nor run) where it was written; crc32c.h admits it only after a check against the tables.
 *
 * The arithmetic. With the reflected bit order of CRC-32C, byte t of an N-byte message, bit b,
 * is the coefficient of x^(8(N-1-t) + 7-b) of the message polynomial M, and the raw CRC from a
 * zero register is M * x^32 mod P. Sixteen bytes loaded little-endian into a 128-bit lane,
 * with E message bits after them, stand for C * x^E where lane bit i is the coefficient of
 * x^(127-i) in C. Write a lane's two 64-bit halves as q0 (bits 0..63, the earlier bytes) and q1:
 * C = rev(q0) x^64 + rev(q1), with rev(q) the polynomial whose x^(63-i) coefficient is bit i.
 * Folding the lane D bits further on replaces C by C * x^D mod P, which is
 *         rev(q0) * (x^(D+64) mod P)  +  rev(q1) * (x^D mod P)
 * of degree < 96, i.e. again a 128-bit lane, and is XORed into the lane D bits on. A carry-less
 * multiply of q by a 32-bit constant whose bit 31-d is the x^d coefficient of K puts the
 * x^(63-i) * x^d term at bit i + 31-d, which as a 128-bit lane is the product times x^33; so
 * the constants are
 *         k0(D) = x^(D+31) mod P    (multiplies q0)      k1(D) = x^(D-33) mod P    (q1)
 * written bit-reversed into 32 bits (bit 31-d for x^d, i.e. the form of the register itself).
 * kl__crc32c_fold_k[j-1] holds {k0, k1} for D = 128*j. They were computed by a short script
 * from the reflected polynomial: x^0 is 0x80000000, and multiplying a register r by x is
 * r = (r >> 1) ^ (0x82F63B78 if r & 1 else 0); tests/test_crc_paths.py derives them again and
 * compares them with this table.
 * A starting register s is XORed into the first four bytes (s x^(8N-32) is what feeding N bytes
 * does to it). At the end the one lane left is 16 bytes of message that are congruent to all
 * the bytes folded into it, so two crc32 instructions from a zero register reduce it, and the
 * tail (< 16 bytes, or < 32/64 for the wider kernels' steps) continues from there.
 */
#ifndef KAFKALOG_CRC32C_FOLD_H
#define KAFKALOG_CRC32C_FOLD_H

#include <immintrin.h>

/* Fold at least this many bytes (shorter buffers use the crc32 instruction alone; the kernels
 * need one full step of loads to start from). */
#ifndef KL__CRC_FOLD_MIN
#  define KL__CRC_FOLD_MIN 512
#endif

static const uint32_t kl__crc32c_fold_k[48][2] = {
    {0xf20c0dfe, 0x493c7d27}, /*  1: D = 128 */
    {0x3da6d0cb, 0xba4fc28e}, /*  2: D = 256 */
    {0x1c291d04, 0xddc0152b}, /*  3: D = 384 */
    {0x740eef02, 0x9e4addf8}, /*  4: D = 512 */
    {0x083a6eec, 0x39d3b296}, /*  5: D = 640 */
    {0xc49f4f67, 0x0715ce53}, /*  6: D = 768 */
    {0x2ad91c30, 0x47db8317}, /*  7: D = 896 */
    {0x6992cea2, 0x0d3b6092}, /*  8: D = 1024 */
    {0x7e908048, 0xc96cfdc0}, /*  9: D = 1152 */
    {0x1b3d8f29, 0x878a92a7}, /* 10: D = 1280 */
    {0xf1d0f55e, 0xdaece73e}, /* 11: D = 1408 */
    {0xa87ab8a8, 0xab7aff2a}, /* 12: D = 1536 */
    {0x8462d800, 0x2162d385}, /* 13: D = 1664 */
    {0x71d111a8, 0x83348832}, /* 14: D = 1792 */
    {0xffd852c6, 0x299847d5}, /* 15: D = 1920 */
    {0xdcb17aa4, 0xb9e02b86}, /* 16: D = 2048 */
    {0xf37c5aee, 0x18b33a4e}, /* 17: D = 2176 */
    {0x6051d5a2, 0xb6dd949b}, /* 18: D = 2304 */
    {0x18b0d4ff, 0x78d9ccb7}, /* 19: D = 2432 */
    {0x21f3d99c, 0xbac2fd7b}, /* 20: D = 2560 */
    {0x8f158014, 0xa60ce07b}, /* 21: D = 2688 */
    {0xa00457f7, 0xce7f39f4}, /* 22: D = 2816 */
    {0x8d6d2c43, 0x61d82e56}, /* 23: D = 2944 */
    {0x00ac29cf, 0xd270f1a2}, /* 24: D = 3072 */
    {0xe9adf796, 0xc619809d}, /* 25: D = 3200 */
    {0x96638b34, 0x2b3cac5d}, /* 26: D = 3328 */
    {0xe0e9f351, 0x65863b64}, /* 27: D = 3456 */
    {0x9af01f2d, 0x1b03397f}, /* 28: D = 3584 */
    {0x2cff42cf, 0xebb883bd}, /* 29: D = 3712 */
    {0x88f25a3a, 0xb3e32c28}, /* 30: D = 3840 */
    {0x4e36f0b0, 0x064f7f26}, /* 31: D = 3968 */
    {0xbd6f81f8, 0xdd7e3b0c}, /* 32: D = 4096 */
    {0x91c9bd4b, 0xf285651c}, /* 33: D = 4224 */
    {0x885f087b, 0x10746f3c}, /* 34: D = 4352 */
    {0x4c144932, 0xc7a68855}, /* 35: D = 4480 */
    {0x52148f02, 0x271d9844}, /* 36: D = 4608 */
    {0xa3c6f37a, 0x8e766a0c}, /* 37: D = 4736 */
    {0xd7c0557f, 0x93a5f730}, /* 38: D = 4864 */
    {0x63ded06a, 0x6cb08e5c}, /* 39: D = 4992 */
    {0x4d56973c, 0x6b749fb2}, /* 40: D = 5120 */
    {0x9669c9df, 0x1393e203}, /* 41: D = 5248 */
    {0xe417f38a, 0xcec3662e}, /* 42: D = 5376 */
    {0x4b9e0f71, 0x96c515bb}, /* 43: D = 5504 */
    {0xd104b8fc, 0xe6fc4e6a}, /* 44: D = 5632 */
    {0x5b397730, 0x8227bb8a}, /* 45: D = 5760 */
    {0xe78eb416, 0xb0cd4768}, /* 46: D = 5888 */
    {0x61ff0e01, 0x39c7ff35}, /* 47: D = 6016 */
    {0x8d96551c, 0xd7a4825c}, /* 48: D = 6144 */
};

/* The main loops ask for the bytes KL__PREFETCH_AHEAD on, a line per 64 bytes of a step:
 * the hardware prefetcher alone left buffers past the L2 cache about 1.3x slower (16 MiB) and
 * memory-bound ones (64 MiB) about 5% slower. A prefetch past the end of the buffer is
 * harmless: prefetches never fault. */
#define KL__PREFETCH_AHEAD 4096
#define KL__FOLD_PREFETCH(p, step)                                                          \
    do {                                                                                    \
        for (int kl__i = 0; kl__i < (step); kl__i += 64)                                    \
            _mm_prefetch((const char *)((uintptr_t)(p) + KL__PREFETCH_AHEAD + kl__i),     \
                         _MM_HINT_T0);                                              \
    } while (0)

#define KL__FOLD128_TARGET __attribute__((target("sse4.2,pclmul")))
#define KL__FOLD256_TARGET __attribute__((target("sse4.2,pclmul,avx,avx2,vpclmulqdq")))
#define KL__FOLD512_TARGET \
    __attribute__((target("sse4.2,pclmul,avx,avx2,avx512f,vpclmulqdq")))

/* ------------------------------------------------------------------------ 128-bit lanes */
static KL__FOLD128_TARGET inline __m128i kl__fold_k128(int j)
{
    return _mm_set_epi64x((long long)kl__crc32c_fold_k[j - 1][1],
                          (long long)kl__crc32c_fold_k[j - 1][0]);
}

/* x moved D = 128*j bits on (k = kl__fold_k128(j)), XORed with the lane found there. */
static KL__FOLD128_TARGET inline __m128i kl__fold128(__m128i x, __m128i k, __m128i there)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), there);
}

/* One lane x (16 bytes of message, congruent to everything folded so far), then the tail. */
static KL__FOLD128_TARGET inline uint32_t
kl__fold_finish(__m128i x, const unsigned char *p, size_t n)
{
    uint32_t crc = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    crc = (uint32_t)_mm_crc32_u64(crc, (uint64_t)_mm_extract_epi64(x, 1));
    return kl__crc32c_hw_raw(crc, p, n);
}

/* The crc32 instruction and the carry-less multiplier are separate units, so the kernels
 * below feed both: a block is three regions of L bytes, each run through its own crc32 chain
 * from a zero register, then F bytes of lanes for the multiplier. The three chain results a, b,
 * c are registers after their regions; a register after some bytes is what XORing it into the
 * next four bytes does, so c goes into the first lane of the block's F part, and b and a do so
 * after moving 8L and 16L bits on (one multiplication each: they sit in the low half only).
 * The block's first chain starts from the caller's register instead of zero (block 0), or from
 * zero (later blocks). The lanes fold D = 8*(3L + F) bits from block to block. */
static KL__FOLD128_TARGET inline __m128i
kl__crc3(uint32_t a, const unsigned char *p, size_t len, __m128i k8l, __m128i k16l)
{
    uint64_t x = a, y = 0, z = 0;
    const unsigned char *end = p + len;
    do {
        x = _mm_crc32_u64(x, kl__crc32c_load64(p));
        y = _mm_crc32_u64(y, kl__crc32c_load64(p + len));
        z = _mm_crc32_u64(z, kl__crc32c_load64(p + 2 * len));
        p += 8;
    } while (p != end);
    __m128i bx = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)(uint32_t)y), k8l, 0x00);
    __m128i ax = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)(uint32_t)x), k16l, 0x00);
    return _mm_xor_si128(_mm_xor_si128(ax, bx), _mm_cvtsi32_si128((int)(uint32_t)z));
}

#ifndef KL__PCLMUL_L
#  define KL__PCLMUL_L 64
#endif
#define KL__PCLMUL_BLOCK (3 * KL__PCLMUL_L + 128)

static KL__FOLD128_TARGET KL__CRC_UNUSED uint32_t
kl__crc32c_fold_pclmul(uint32_t crc, const unsigned char *p, size_t n)
{
    const __m128i *q;
    __m128i x0 = _mm_setzero_si128(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0;
    __m128i x7 = x0;
    __m128i k = kl__fold_k128(KL__PCLMUL_BLOCK / 16);
    __m128i k8l = kl__fold_k128(KL__PCLMUL_L / 16), k16l = kl__fold_k128(KL__PCLMUL_L / 8);
    do {
        KL__FOLD_PREFETCH(p, KL__PCLMUL_BLOCK);
        __m128i c = kl__crc3(crc, p, KL__PCLMUL_L, k8l, k16l);
        crc = 0;
        q = (const __m128i *)(p + 3 * KL__PCLMUL_L);
        x0 = kl__fold128(x0, k, _mm_xor_si128(_mm_loadu_si128(q), c));
        x1 = kl__fold128(x1, k, _mm_loadu_si128(q + 1));
        x2 = kl__fold128(x2, k, _mm_loadu_si128(q + 2));
        x3 = kl__fold128(x3, k, _mm_loadu_si128(q + 3));
        x4 = kl__fold128(x4, k, _mm_loadu_si128(q + 4));
        x5 = kl__fold128(x5, k, _mm_loadu_si128(q + 5));
        x6 = kl__fold128(x6, k, _mm_loadu_si128(q + 6));
        x7 = kl__fold128(x7, k, _mm_loadu_si128(q + 7));
        p += KL__PCLMUL_BLOCK;
        n -= KL__PCLMUL_BLOCK;
    } while (n >= KL__PCLMUL_BLOCK);
    k = kl__fold_k128(8);
    while (n >= 128) { /* the rest in whole steps of the multiplier alone */
        q = (const __m128i *)p;
        x0 = kl__fold128(x0, k, _mm_loadu_si128(q));
        x1 = kl__fold128(x1, k, _mm_loadu_si128(q + 1));
        x2 = kl__fold128(x2, k, _mm_loadu_si128(q + 2));
        x3 = kl__fold128(x3, k, _mm_loadu_si128(q + 3));
        x4 = kl__fold128(x4, k, _mm_loadu_si128(q + 4));
        x5 = kl__fold128(x5, k, _mm_loadu_si128(q + 5));
        x6 = kl__fold128(x6, k, _mm_loadu_si128(q + 6));
        x7 = kl__fold128(x7, k, _mm_loadu_si128(q + 7));
        p += 128;
        n -= 128;
    }
    /* eight lanes in message order -> one, halving: lane i moves 4, then 2, then 1 lanes on */
    k = kl__fold_k128(4);
    x4 = kl__fold128(x0, k, x4);
    x5 = kl__fold128(x1, k, x5);
    x6 = kl__fold128(x2, k, x6);
    x7 = kl__fold128(x3, k, x7);
    k = kl__fold_k128(2);
    x6 = kl__fold128(x4, k, x6);
    x7 = kl__fold128(x5, k, x7);
    k = kl__fold_k128(1);
    x7 = kl__fold128(x6, k, x7);
    while (n >= 16) {
        x7 = kl__fold128(x7, k, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    return kl__fold_finish(x7, p, n);
}

/* ------------------------------------------------------------------------ 256-bit lanes */
static KL__FOLD256_TARGET inline __m256i kl__fold_k256(int j)
{
    return _mm256_broadcastsi128_si256(kl__fold_k128(j));
}

static KL__FOLD256_TARGET inline __m256i kl__zext256(__m128i x)
{
    return _mm256_inserti128_si256(_mm256_setzero_si256(), x, 0);
}

static KL__FOLD256_TARGET inline __m256i kl__fold256(__m256i x, __m256i k, __m256i there)
{
    __m256i lo = _mm256_clmulepi64_epi128(x, k, 0x00);
    __m256i hi = _mm256_clmulepi64_epi128(x, k, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(lo, hi), there);
}

#ifndef KL__VPCLMUL256_L
#  define KL__VPCLMUL256_L 64
#endif
#define KL__VPCLMUL256_BLOCK (3 * KL__VPCLMUL256_L + 256)

static KL__FOLD256_TARGET KL__CRC_UNUSED uint32_t
kl__crc32c_fold_vpclmul256(uint32_t crc, const unsigned char *p, size_t n)
{
    const __m256i *q;
    __m256i y0 = _mm256_setzero_si256(), y1 = y0, y2 = y0, y3 = y0, y4 = y0, y5 = y0, y6 = y0;
    __m256i y7 = y0;
    __m256i k = kl__fold_k256(KL__VPCLMUL256_BLOCK / 16);
    __m128i k8l = kl__fold_k128(KL__VPCLMUL256_L / 16), k16l = kl__fold_k128(KL__VPCLMUL256_L / 8);
    do {
        KL__FOLD_PREFETCH(p, KL__VPCLMUL256_BLOCK);
        __m128i c = kl__crc3(crc, p, KL__VPCLMUL256_L, k8l, k16l);
        crc = 0;
        q = (const __m256i *)(p + 3 * KL__VPCLMUL256_L);
        y0 = kl__fold256(y0, k, _mm256_xor_si256(_mm256_loadu_si256(q), kl__zext256(c)));
        y1 = kl__fold256(y1, k, _mm256_loadu_si256(q + 1));
        y2 = kl__fold256(y2, k, _mm256_loadu_si256(q + 2));
        y3 = kl__fold256(y3, k, _mm256_loadu_si256(q + 3));
        y4 = kl__fold256(y4, k, _mm256_loadu_si256(q + 4));
        y5 = kl__fold256(y5, k, _mm256_loadu_si256(q + 5));
        y6 = kl__fold256(y6, k, _mm256_loadu_si256(q + 6));
        y7 = kl__fold256(y7, k, _mm256_loadu_si256(q + 7));
        p += KL__VPCLMUL256_BLOCK;
        n -= KL__VPCLMUL256_BLOCK;
    } while (n >= KL__VPCLMUL256_BLOCK);
    if (n >= 256) { /* the rest in whole steps of the multiplier alone (one at most) */
        k = kl__fold_k256(16);
        q = (const __m256i *)p;
        y0 = kl__fold256(y0, k, _mm256_loadu_si256(q));
        y1 = kl__fold256(y1, k, _mm256_loadu_si256(q + 1));
        y2 = kl__fold256(y2, k, _mm256_loadu_si256(q + 2));
        y3 = kl__fold256(y3, k, _mm256_loadu_si256(q + 3));
        y4 = kl__fold256(y4, k, _mm256_loadu_si256(q + 4));
        y5 = kl__fold256(y5, k, _mm256_loadu_si256(q + 5));
        y6 = kl__fold256(y6, k, _mm256_loadu_si256(q + 6));
        y7 = kl__fold256(y7, k, _mm256_loadu_si256(q + 7));
        p += 256;
        n -= 256;
    }
    /* eight registers in message order -> one, halving (4, 2, then 1 register = 8, 4, 2 lanes) */
    k = kl__fold_k256(8);
    y4 = kl__fold256(y0, k, y4);
    y5 = kl__fold256(y1, k, y5);
    y6 = kl__fold256(y2, k, y6);
    y7 = kl__fold256(y3, k, y7);
    k = kl__fold_k256(4);
    y6 = kl__fold256(y4, k, y6);
    y7 = kl__fold256(y5, k, y7);
    y7 = kl__fold256(y6, kl__fold_k256(2), y7);
    k = kl__fold_k256(2);
    while (n >= 32) {
        y7 = kl__fold256(y7, k, _mm256_loadu_si256((const __m256i *)p));
        p += 32;
        n -= 32;
    }
    __m128i x = kl__fold128(_mm256_castsi256_si128(y7), kl__fold_k128(1),
                            _mm256_extracti128_si256(y7, 1));
    _mm256_zeroupper(); /* GCC adds none here; dirty upper halves slow the SSE code after us */
    if (n >= 16) {
        x = kl__fold128(x, kl__fold_k128(1), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    return kl__fold_finish(x, p, n);
}

/* ------------------------------------------------------------------------ 512-bit lanes */
static KL__FOLD512_TARGET inline __m512i kl__fold_k512(int j)
{
    return _mm512_broadcast_i32x4(kl__fold_k128(j));
}

static KL__FOLD512_TARGET inline __m512i kl__fold512(__m512i x, __m512i k, __m512i there)
{
    __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, there, 0x96); /* lo ^ hi ^ there */
}

static KL__FOLD512_TARGET KL__CRC_UNUSED uint32_t
kl__crc32c_fold_vpclmul512(uint32_t crc, const unsigned char *p, size_t n)
{
    __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)p),
                                  _mm512_inserti32x4(_mm512_setzero_si512(),
                                  _mm_cvtsi32_si128((int)crc), 0));
    __m512i z1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i z2 = _mm512_loadu_si512((const void *)(p + 128));
    __m512i z3 = _mm512_loadu_si512((const void *)(p + 192));
    __m512i k = kl__fold_k512(16);
    p += 256;
    n -= 256;
    while (n >= 256) {
        KL__FOLD_PREFETCH(p, 256);
        z0 = kl__fold512(z0, k, _mm512_loadu_si512((const void *)p));
        z1 = kl__fold512(z1, k, _mm512_loadu_si512((const void *)(p + 64)));
        z2 = kl__fold512(z2, k, _mm512_loadu_si512((const void *)(p + 128)));
        z3 = kl__fold512(z3, k, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256;
        n -= 256;
    }
    /* four registers in message order -> one, halving (2, then 1 register = 8, 4 lanes) */
    k = kl__fold_k512(8);
    z2 = kl__fold512(z0, k, z2);
    z3 = kl__fold512(z1, k, z3);
    z3 = kl__fold512(z2, kl__fold_k512(4), z3);
    k = kl__fold_k512(4);
    while (n >= 64) {
        z3 = kl__fold512(z3, k, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }
    /* four lanes in message order -> one */
    __m128i x = kl__fold128(_mm512_castsi512_si128(z3), kl__fold_k128(3),
                            _mm512_extracti32x4_epi32(z3, 3));
    x = kl__fold128(_mm512_extracti32x4_epi32(z3, 1), kl__fold_k128(2), x);
    x = kl__fold128(_mm512_extracti32x4_epi32(z3, 2), kl__fold_k128(1), x);
    _mm256_zeroupper();
    while (n >= 16) {
        x = kl__fold128(x, kl__fold_k128(1), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    return kl__fold_finish(x, p, n);
}

#if KL__CRC_FOLD_MIN < KL__PCLMUL_BLOCK || KL__CRC_FOLD_MIN < KL__VPCLMUL256_BLOCK \
    || KL__CRC_FOLD_MIN < 256 || KL__PCLMUL_L % 16 != 0 || KL__VPCLMUL256_L % 16 != 0      \
    || KL__PCLMUL_BLOCK > 16 * 48 || KL__VPCLMUL256_BLOCK > 16 * 48
#  error "crc32c_fold.h: each kernel needs one whole step, L a multiple of 16, a step <= 768"
#endif

#endif /* KAFKALOG_CRC32C_FOLD_H */
