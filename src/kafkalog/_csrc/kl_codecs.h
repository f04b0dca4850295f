/*
 * kl_codecs.h -- the snappy and LZ4 decoders of kafkalog's compiled modules (through
 * _codecs.pxd): snappy raw blocks and xerial framing, LZ4 in Kafka's frame format (independent
 * blocks) and the xxh32 checksum its frames carry.  Include after Python.h and kl_buffers.h.
 *
 * Self-contained: every function is static (each module that includes it has its own copy) and
 * a plain function, not an inline one: each decoder's loop is compiled once, as it is.
 *
 * They decompress into a kl_gbuf without touching Python objects (callers release the GIL).
 * Every read is checked against the end of the input before it happens; writes stay within the
 * output's capacity plus KL_GBUF_SLACK (the copies below may write up to 16 bytes past what
 * they copy; the slack is 64).  Results: 0 decoded; -2 the output would pass the limit (kafkalog.compression's
 * DecompressedSizeError, found without decoding past it); -1 anything unusual (a frame option
 * not taken, damage, an impossible length): the caller asks kafkalog.compression, so results
 * and errors are always that module's.
 */
#ifndef KL_CODECS_H
#define KL_CODECS_H

#include <stdint.h>
#include <string.h>

#include "kl_buffers.h"

#if defined(__GNUC__)
#define KL_CODECS_UNUSED __attribute__((unused))
#else
#define KL_CODECS_UNUSED
#endif

static inline uint32_t kl_le32(const uint8_t *p) {
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | (uint32_t)p[0];
}

static inline uint32_t kl_be32c(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* -- copies that may overshoot into the slack ------------------------------------------------ */
static inline void kl_copy8(uint8_t *dst, const uint8_t *src) { memcpy(dst, src, 8); }

/* LZ77 copy of ln bytes from off bytes back (may overlap); may write up to 7 bytes past op+ln. */
static inline void kl_match_copy(uint8_t *op, Py_ssize_t off, Py_ssize_t ln) {
    const uint8_t *src = op - off;
    Py_ssize_t i, d;
    if (off >= 8) {
        for (i = 0; i < ln; i += 8)
            kl_copy8(op + i, src + i);
    } else {
        /* The output repeats with period off: once the first d bytes (the smallest multiple of
           off that is >= 8) are written byte by byte, the rest is copied 8 at a time from d
           bytes back, where the source no longer overlaps the 8 written. */
        d = off;
        while (d < 8)
            d += off;
        for (i = 0; i < ln && i < d; i++)
            op[i] = src[i];
        for (; i < ln; i += 8)
            kl_copy8(op + i, op + i - d);
    }
}

/* Copy ln literal bytes; over-reads the input only when in_left allows. */
static inline void kl_lit_copy(uint8_t *op, const uint8_t *ip, Py_ssize_t ln, Py_ssize_t in_left) {
    if (ln <= 16 && in_left >= 16) {
        memcpy(op, ip, 16);
    } else if (ln <= 32 && in_left >= 32) {
        memcpy(op, ip, 32);
    } else {
        memcpy(op, ip, (size_t)ln);
    }
}

/* -- snappy (raw blocks and xerial framing) -------------------------------------------------- */
static KL_CODECS_UNUSED int kl_snappy_len(const uint8_t *s, Py_ssize_t n, Py_ssize_t *hdr,
                                          uint64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    Py_ssize_t p = 0;
    uint8_t b;
    while (shift <= 28) {
        if (p >= n)
            return -1;
        b = s[p];
        p += 1;
        v |= ((uint64_t)(b & 0x7F)) << shift;
        if (!(b & 0x80)) {
            if ((v >> 32) != 0)
                return -1;
            *hdr = p;
            *out = v;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* One raw snappy block (preamble already read: elements start at ip) into exactly dlen bytes
   at dst (which has slack).  0 or -1. */
static KL_CODECS_UNUSED int kl_snappy_block(const uint8_t *s, Py_ssize_t n, Py_ssize_t ip,
                                            uint8_t *dst, Py_ssize_t dlen) {
    Py_ssize_t op = 0;
    Py_ssize_t ln, off;
    uint8_t tag;
    int t, nb, k;
    while (ip < n) {
        tag = s[ip];
        ip += 1;
        t = tag & 3;
        if (t == 0) {
            ln = tag >> 2;
            if (ln >= 60) {
                nb = (int)ln - 59;
                if (nb > n - ip)
                    return -1;
                ln = 0;
                for (k = 0; k < nb; k++)
                    ln |= ((Py_ssize_t)s[ip + k]) << (8 * k);
                ip += nb;
            }
            ln += 1;
            if (ln > n - ip || ln > dlen - op)
                return -1;
            kl_lit_copy(dst + op, s + ip, ln, n - ip);
            ip += ln;
            op += ln;
            continue;
        }
        if (t == 1) {
            if (ip >= n)
                return -1;
            ln = 4 + ((tag >> 2) & 7);
            off = (((Py_ssize_t)(tag >> 5)) << 8) | s[ip];
            ip += 1;
        } else if (t == 2) {
            if (2 > n - ip)
                return -1;
            ln = (tag >> 2) + 1;
            off = (Py_ssize_t)s[ip] | ((Py_ssize_t)s[ip + 1] << 8);
            ip += 2;
        } else {
            if (4 > n - ip)
                return -1;
            ln = (tag >> 2) + 1;
            off = (Py_ssize_t)kl_le32(s + ip);
            ip += 4;
        }
        if (off == 0 || off > op || ln > dlen - op)
            return -1;
        kl_match_copy(dst + op, off, ln);
        op += ln;
    }
    return op == dlen ? 0 : -1;
}

/* Kafka snappy (xerial framing, or one raw block) into out (len reset): 0, -2 or -1. */
static KL_CODECS_UNUSED int kl_snappy_decompress(const uint8_t *s, Py_ssize_t n, kl_gbuf *out,
                                                 int64_t limit) {
    Py_ssize_t ip, clen, hdr;
    uint64_t ulen;
    int32_t sclen;
    out->len = 0;
    if (n <= 0)
        return -1;
    if (n >= 16 && memcmp(s, "\x82SNAPPY\x00", 8) == 0) {
        if ((int32_t)kl_be32c(s + 8) < 1)
            return -1; /* incompatible version: the fallback raises */
        ip = 16;
        while (ip < n) {
            if (4 > n - ip)
                return -1;
            sclen = (int32_t)kl_be32c(s + ip);
            if (sclen <= 0 || sclen > (512 << 20))
                return -1; /* concatenated streams and bad lengths: the fallback decides */
            clen = sclen;
            ip += 4;
            if (clen > n - ip)
                return -1;
            if (kl_snappy_len(s + ip, clen, &hdr, &ulen) < 0)
                return -1;
            if ((int64_t)(out->len + ulen) > limit)
                /* kafkalog.compression's answer, without decoding anything again: too big,
                   unless the declared length is impossible for the chunk (then it decides) */
                return ulen <= (uint64_t)(22 * clen + 32) ? -2 : -1;
            if (ulen > (uint64_t)(22 * clen + 32))
                return -1; /* more than the chunk can expand to: nothing is reserved for it */
            if (kl_gb_ensure_at_most(out, out->len + (size_t)ulen, (size_t)limit) < 0)
                return -1;
            if (kl_snappy_block(s + ip, clen, hdr, out->data + out->len, (Py_ssize_t)ulen) < 0)
                return -1;
            out->len += (size_t)ulen;
            ip += clen;
        }
        return 0;
    }
    if (kl_snappy_len(s, n, &hdr, &ulen) < 0)
        return -1;
    if ((int64_t)ulen > limit)
        return ulen <= (uint64_t)(22 * n + 32) ? -2 : -1;
    if (ulen > (uint64_t)(22 * n + 32))
        return -1; /* more than the block can expand to (a copy of 3 bytes makes at most 64) */
    if (kl_gb_ensure_at_most(out, (size_t)ulen, (size_t)limit) < 0)
        return -1;
    if (kl_snappy_block(s, n, hdr, out->data, (Py_ssize_t)ulen) < 0)
        return -1;
    out->len = (size_t)ulen;
    return 0;
}

/* -- lz4 (Kafka's frame format: independent blocks) ------------------------------------------ */
#define KL_XXH_P1 2654435761U
#define KL_XXH_P2 2246822519U
#define KL_XXH_P3 3266489917U
#define KL_XXH_P4 668265263U
#define KL_XXH_P5 374761393U

static inline uint32_t kl_rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static KL_CODECS_UNUSED uint32_t kl_xxh32(const uint8_t *p, Py_ssize_t n, uint32_t seed) {
    Py_ssize_t i = 0;
    uint32_t h, v1, v2, v3, v4;
    if (n >= 16) {
        v1 = seed + KL_XXH_P1 + KL_XXH_P2;
        v2 = seed + KL_XXH_P2;
        v3 = seed;
        v4 = seed - KL_XXH_P1;
        while (i + 16 <= n) {
            v1 = kl_rotl32(v1 + kl_le32(p + i) * KL_XXH_P2, 13) * KL_XXH_P1;
            v2 = kl_rotl32(v2 + kl_le32(p + i + 4) * KL_XXH_P2, 13) * KL_XXH_P1;
            v3 = kl_rotl32(v3 + kl_le32(p + i + 8) * KL_XXH_P2, 13) * KL_XXH_P1;
            v4 = kl_rotl32(v4 + kl_le32(p + i + 12) * KL_XXH_P2, 13) * KL_XXH_P1;
            i += 16;
        }
        h = kl_rotl32(v1, 1) + kl_rotl32(v2, 7) + kl_rotl32(v3, 12) + kl_rotl32(v4, 18);
    } else {
        h = seed + KL_XXH_P5;
    }
    h += (uint32_t)n;
    while (i + 4 <= n) {
        h = kl_rotl32(h + kl_le32(p + i) * KL_XXH_P3, 17) * KL_XXH_P4;
        i += 4;
    }
    while (i < n) {
        h = kl_rotl32(h + p[i] * KL_XXH_P5, 11) * KL_XXH_P1;
        i += 1;
    }
    h ^= h >> 15;
    h *= KL_XXH_P2;
    h ^= h >> 13;
    h *= KL_XXH_P3;
    h ^= h >> 16;
    return h;
}

/* One LZ4 block into at most cap bytes at dst (slack after); the decoded length, or -1.  With
   dst NULL nothing is written: the block is only checked and its decoded length returned.  The
   format's end-of-block rules hold: the last sequence is literals only, the last 5 bytes are
   literals and the last match starts at least 12 bytes before the end of the block. */
static KL_CODECS_UNUSED Py_ssize_t kl_lz4_block(const uint8_t *s, Py_ssize_t n, uint8_t *dst,
                                                Py_ssize_t cap) {
    Py_ssize_t ip = 0;
    Py_ssize_t op = 0;
    Py_ssize_t ln, off;
    Py_ssize_t mstart = -1;
    Py_ssize_t mend = -1;
    uint8_t token, b;
    for (;;) {
        /* The common sequence - at most 14 literals, a match of at most 18 bytes, both inside
           cap, 32 or more input bytes left - takes one branch: 16 literal bytes are copied
           at once (the input has them; the output has slack) and the match in 8- or 16-byte
           chunks.  Anything else, including every error, goes through the checked path below,
           which this path never contradicts (it is taken only where that path would accept the
           sequence with the same result). */
        if (dst != NULL && n - ip >= 32) {
            token = s[ip];
            if (token < 0xF0 && (token & 15) != 15) {
                Py_ssize_t ml = (Py_ssize_t)(token & 15) + 4;
                ln = token >> 4;
                off = (Py_ssize_t)s[ip + 1 + ln] | ((Py_ssize_t)s[ip + 2 + ln] << 8);
                if (off != 0 && off <= op + ln && ln + ml <= cap - op) {
                    memcpy(dst + op, s + ip + 1, 16);
                    op += ln;
                    ip += 3 + ln;
                    if (off >= 16) {
                        memcpy(dst + op, dst + op - off, 16);
                        memcpy(dst + op + 16, dst + op + 16 - off, 2);
                    } else {
                        kl_match_copy(dst + op, off, ml);
                    }
                    mstart = op;
                    op += ml;
                    mend = op;
                    continue;
                }
            }
        }
        if (ip >= n)
            return -1;
        token = s[ip];
        ip += 1;
        ln = token >> 4;
        if (ln == 15) {
            for (;;) {
                if (ip >= n)
                    return -1;
                b = s[ip];
                ip += 1;
                ln += b;
                if (b != 255)
                    break;
            }
        }
        if (ln > n - ip || ln > cap - op)
            return -1;
        if (dst != NULL)
            kl_lit_copy(dst + op, s + ip, ln, n - ip);
        ip += ln;
        op += ln;
        if (ip == n) {
            /* the last sequence holds literals only; the end-of-block rules (LASTLITERALS,
               MFLIMIT) apply to the last match */
            if (mstart >= 0 && (op - mend < 5 || op - mstart < 12))
                return -1;
            return op;
        }
        if (ip > n - 8)
            return -1; /* as LZ4_decompress_safe: a match needs 2 + 1 + 5 bytes after literals */
        off = (Py_ssize_t)s[ip] | ((Py_ssize_t)s[ip + 1] << 8);
        ip += 2;
        if (off == 0 || off > op)
            return -1;
        ln = token & 15;
        if (ln == 15) {
            for (;;) {
                if (ip >= n)
                    return -1;
                b = s[ip];
                ip += 1;
                ln += b;
                if (b != 255)
                    break;
            }
        }
        ln += 4;
        if (ln > cap - op)
            return -1;
        if (dst != NULL)
            kl_match_copy(dst + op, off, ln);
        mstart = op;
        op += ln;
        mend = op;
    }
}

/* One LZ4 frame as Kafka writes it (v2 batches: header checksum verified) into out: 0, -2 (found
   without decoding past the limit: a block that may cross it is first only measured) or -1. */
static KL_CODECS_UNUSED int kl_lz4_decompress(const uint8_t *s, Py_ssize_t n, kl_gbuf *out,
                                              int64_t limit) {
    uint8_t flg, bd;
    Py_ssize_t hp, ip, maxblock, r, room;
    uint32_t bsz, word;
    int raw, block_sum, content_sum;
    out->len = 0;
    if (n < 7 || kl_le32(s) != 0x184D2204)
        return -1;
    flg = s[4];
    bd = s[5];
    if ((flg >> 6) != 1 || (flg & 0x03) || !(flg & 0x20) || (bd & 0x8F))
        return -1;
    if (((bd >> 4) & 7) < 4)
        return -1;
    maxblock = ((Py_ssize_t)1) << (2 * ((bd >> 4) & 7) + 8);
    block_sum = (flg & 0x10) != 0;
    content_sum = (flg & 0x04) != 0;
    hp = 6 + ((flg & 0x08) ? 8 : 0);
    if (hp + 1 > n)
        return -1;
    if (((kl_xxh32(s + 4, hp - 4, 0) >> 8) & 0xFF) != s[hp])
        return -1;
    ip = hp + 1;
    for (;;) {
        if (4 > n - ip)
            return -1;
        word = kl_le32(s + ip);
        ip += 4;
        raw = (word >> 31) != 0;
        bsz = word & 0x7FFFFFFF;
        if (bsz == 0)
            break; /* the end mark, with or without the uncompressed bit (as Kafka reads it) */
        if (bsz > (uint32_t)maxblock || (Py_ssize_t)bsz > n - ip)
            return -1;
        if (block_sum) {
            if ((Py_ssize_t)bsz + 4 > n - ip)
                return -1;
            if (kl_xxh32(s + ip, bsz, 0) != kl_le32(s + ip + bsz))
                return -1;
        }
        if ((int64_t)(out->len + maxblock) > limit) {
            /* this block may cross the limit: measure it first, so that a bomb is refused
               without holding more than the limit */
            r = raw ? (Py_ssize_t)bsz : kl_lz4_block(s + ip, bsz, NULL, maxblock);
            if (r < 0)
                return -1;
            if ((int64_t)(out->len + r) > limit)
                return -2;
            if (kl_gb_ensure_at_most(out, out->len + (size_t)r, (size_t)limit) < 0)
                return -1;
            room = r; /* only what was measured: the bytes may change while the GIL is free */
        } else if (kl_gb_ensure_at_most(out, out->len + (size_t)maxblock, (size_t)limit) < 0) {
            return -1;
        } else {
            room = maxblock;
        }
        if (raw) {
            memcpy(out->data + out->len, s + ip, bsz);
            r = bsz;
        } else {
            r = kl_lz4_block(s + ip, bsz, out->data + out->len, room);
            if (r < 0)
                return -1;
        }
        out->len += (size_t)r;
        ip += bsz + (block_sum ? 4 : 0);
    }
    if (content_sum) {
        if (4 > n - ip)
            return -1;
        ip += 4;
    }
    return ip == n ? 0 : -1;
}

#endif /* KL_CODECS_H */
