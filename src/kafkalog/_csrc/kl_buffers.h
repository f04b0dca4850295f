/*
 * kl_buffers.h -- growable byte buffers for kafkalog's compiled modules (through _buffers.pxd).
 *
 * Self-contained header: everything is static, so each module that includes it has its own
 * copy (and its own huge-page switch).  The growth functions are plain static functions, not
 * inline ones: they are the slow path of every append, and the append sites stay small.
 *
 * kl_gbuf: malloc'd data with KL_GBUF_SLACK spare bytes past cap, so that word-sized copies
 * may overshoot the end; len is what is written, touched what is known to be mapped already
 * (a block reused from a pool), tag which column buffer it serves (pool matching).
 *
 * kl_advise() asks Linux for transparent huge pages on the whole 2 MiB pages of a buffer of
 * 4 MiB or more, while kl_hugepages is set (default 1): a fresh 4 KiB page costs a fault each,
 * a 2 MiB page one fault per 512 of them.  A no-op elsewhere.
 */
#ifndef KL_BUFFERS_H
#define KL_BUFFERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__GNUC__)
#define KL_BUFFERS_UNUSED __attribute__((unused))
#else
#define KL_BUFFERS_UNUSED
#endif

#define KL_GBUF_SLACK 64
#define KL_GBUF_MIN_CAP 256
#define KL_GBUF_GROW_BLOCK 65536
/* the most a buffer may ask for: a quarter of the address space, so that doubling, rounding
   and the slack never wrap (a caller's size computed from hostile or overflowing numbers is
   refused as out of memory, never wrapped into a small buffer) */
#define KL_GBUF_MAX (((size_t)-1) >> 2)

typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t touched;
    int tag;
} kl_gbuf;

static KL_BUFFERS_UNUSED int kl_hugepages = 1;

static KL_BUFFERS_UNUSED void kl_advise(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!kl_hugepages) return;
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(huge - 1);
    if (n >= ((size_t)4 << 20) && e > a)
        madvise((void *)a, (size_t)(e - a), MADV_HUGEPAGE);
#else
    (void)p; (void)n;
#endif
}

/* Copy n bytes to dst, a kl_gbuf's data at or before len, where len + n <= cap: a short copy
   moves whole 16- or 32-byte blocks, so it may write up to 31 bytes past dst + n (into the
   buffer's unused room or its KL_GBUF_SLACK) and read past src + n, never past src + room (the
   bytes the caller may read there); a long one, or one too near the end of its source, is a
   plain memcpy.  Short copies are the keys and values of a columnar decode: one call of
   libc's memcpy each costs more than the copy. */
static inline void kl_copy_short(uint8_t *dst, const uint8_t *src, size_t n, size_t room) {
    size_t i;
    if (n <= 16 && room >= 16) {
        memcpy(dst, src, 16);
    } else if (n <= 128 && room >= 128) {
        for (i = 0; i < n; i += 32)
            memcpy(dst + i, src + i, 32);
    } else {
        memcpy(dst, src, n);
    }
}

/* Make room for need bytes in total; 0, or -1 when out of memory.  A first allocation is the
   caller's size, growth doubles; both rounded up (2 MiB for large buffers, 64 KiB for medium
   ones) so that chunks of similar sizes can reuse each other's pooled blocks. */
static KL_BUFFERS_UNUSED int kl_gb_reserve(kl_gbuf *b, size_t need) {
    size_t nc;
    void *p;
    if (need <= b->cap && b->data != NULL)
        return 0;
    if (need > KL_GBUF_MAX)  /* no such allocation, and the rounding below would wrap */
        return -1;
    nc = b->cap ? b->cap * 2 : (size_t)KL_GBUF_MIN_CAP;
    if (nc < need)
        nc = need;
    if (nc >= ((size_t)4 << 20))
        nc = (nc + (((size_t)2 << 20) - 1)) & ~(((size_t)2 << 20) - 1);
    else if (nc >= (size_t)KL_GBUF_GROW_BLOCK)
        nc = (nc + ((size_t)KL_GBUF_GROW_BLOCK - 1)) & ~((size_t)KL_GBUF_GROW_BLOCK - 1);
    p = realloc(b->data, nc + KL_GBUF_SLACK);
    if (p == NULL)
        return -1;
    b->data = (uint8_t *)p;
    b->cap = nc;
    kl_advise(p, nc);
    return 0;
}

/* Like kl_gb_reserve, but growth never goes past most bytes (>= need): a decompression scratch
   stays within its limit instead of doubling past it.  No huge-page advice. */
static KL_BUFFERS_UNUSED int kl_gb_ensure_at_most(kl_gbuf *b, size_t need, size_t most) {
    size_t nc;
    void *p;
    if (need <= b->cap && b->data != NULL)
        return 0;
    if (need > KL_GBUF_MAX)
        return -1;
    nc = b->cap ? b->cap * 2 : (size_t)KL_GBUF_MIN_CAP;
    if (nc < need)
        nc = need;
    if (nc > most)
        nc = most >= need ? most : need;
    p = realloc(b->data, nc + KL_GBUF_SLACK);
    if (p == NULL)
        return -1;
    b->data = (uint8_t *)p;
    b->cap = nc;
    return 0;
}

#endif /* KL_BUFFERS_H */
