/*
 * kl_advise.h -- transparent huge pages for large buffers, for kafkalog's compiled modules.
 *
 * Self-contained header: the switch and the function are static, so each module that includes
 * it (through _buffers.pxd) has its own.  A fresh 4 KiB page costs a fault each, a 2 MiB page
 * one fault per 512 of them: kl_advise() asks Linux for huge pages on the whole 2 MiB pages of
 * a buffer of 4 MiB or more, while kl_hugepages is set (default 1).  A no-op elsewhere.
 */
#ifndef KL_ADVISE_H
#define KL_ADVISE_H

#include <stddef.h>
#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__GNUC__)
#define KL_ADVISE_UNUSED __attribute__((unused))
#else
#define KL_ADVISE_UNUSED
#endif

static KL_ADVISE_UNUSED int kl_hugepages = 1;

static KL_ADVISE_UNUSED void kl_advise(void *p, size_t n) {
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

#endif /* KL_ADVISE_H */
