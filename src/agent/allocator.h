/* allocator.h — the allocator under the agent (allocator.c). */
#ifndef MT_ALLOCATOR_H
#define MT_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

enum { MT_ALLOC_GLIBC, MT_ALLOC_JEMALLOC, MT_ALLOC_TCMALLOC, MT_ALLOC_MIMALLOC, MT_ALLOC_OTHER };
extern int mt_alloc_kind;
extern uintptr_t mt_alloc_text_lo, mt_alloc_text_hi; /* its code, when not glibc: its mmaps are heap */

/* glibc's chunk header sits right under the pointer its malloc returns:
 * the previous chunk's size (for a chunk glibc mapped for itself, the
 * bytes of the mapping before it: alignment) and the chunk's size, whose
 * bit 0x2 is IS_MMAPPED. 1 and the mapping [*start, *start + *len) (as
 * glibc's munmap_chunk computes it) for such a chunk; 0 otherwise, and
 * under any other allocator. */
static inline int mt_glibc_mapped_chunk(const void *real, uintptr_t *start, uint64_t *len)
{
    if (mt_alloc_kind != MT_ALLOC_GLIBC || !real)
        return 0;
    const size_t *chunk = (const size_t *)real - 2;
    size_t prev = chunk[0], size = chunk[1];
    if (!(size & 2))
        return 0;
    *start = (uintptr_t)chunk - prev;
    *len = prev + (size & ~(size_t)7);
    return 1;
}
static inline int mt_glibc_is_mapped(const void *real)
{
    uintptr_t start;
    uint64_t len;
    return mt_glibc_mapped_chunk(real, &start, &len);
}

/* MT_FIRST_LIBRARY (and the file's name in who) when a preloaded
 * library's malloc comes before the agent's in the global scope, or
 * MT_FIRST_PROGRAM when the program defines malloc itself: the program's
 * calls go to that one. 0: the agent's malloc comes first. */
enum { MT_FIRST_LIBRARY = 1, MT_FIRST_PROGRAM = 2 };
int mt_allocator_precedes(char *who, size_t n);
/* Once at start-up: the functions the agent forwards to (allocator.c's
 * "the functions the agent forwards to": always the next definitions),
 * and which allocator is behind them. */
struct mt_real;
void mt_allocator_resolve(struct mt_real *out);
/* The posix_memalign each aligned entry point hands an untracked call to
 * (that of a malloc before the agent's, for an entry it lacks). */
enum { MT_ALIGNED_POSIX, MT_ALIGNED_MEMALIGN, MT_ALIGNED_VALLOC, MT_ALIGNED_PVALLOC, MT_ALIGNED_COUNT };
extern int (*mt_aligned_real[MT_ALIGNED_COUNT])(void **, size_t, size_t);

#pragma GCC visibility pop

/* jemalloc's API, exported by the agent (allocator.c). */
void *mallocx(size_t size, int flags);
void *rallocx(void *p, size_t size, int flags);
size_t xallocx(void *p, size_t size, size_t extra, int flags);
size_t sallocx(const void *p, int flags);
void dallocx(void *p, int flags);
void sdallocx(void *p, size_t size, int flags);

#endif
