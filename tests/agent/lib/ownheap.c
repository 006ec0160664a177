/* ownheap.c — an allocator with a heap of its own (one mapping, blocks cut
 * from it in turn, never reused) that defines malloc, free, calloc,
 * realloc, posix_memalign and malloc_usable_size, and not memalign,
 * valloc, pvalloc, aligned_alloc or reallocarray. Preloaded before the
 * agent (tests/agent/test_allocators.sh), the program's calls of those it
 * lacks reach the agent, which must serve them from this heap (through
 * its posix_memalign and realloc), since this free gets the block: a
 * free of a pointer from anywhere else aborts the program. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HEAP_BYTES (1ull << 32) /* reserved, not committed */

static char *heap;
static uintptr_t next_off; /* atomic: the offset of the next block */

static char *base(void)
{
    if (!heap) {
        void *h = mmap(NULL, HEAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        char *none = NULL;
        if (h == MAP_FAILED)
            abort();
        if (!__atomic_compare_exchange_n(&heap, &none, (char *)h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            munmap(h, HEAP_BYTES);
    }
    return __atomic_load_n(&heap, __ATOMIC_ACQUIRE);
}

/* A block of n bytes aligned to align (a power of two, at least 16), its
 * size in the 16 bytes before it. */
static void *cut(size_t n, size_t align)
{
    char *b = base();
    uintptr_t need = (uintptr_t)n + align + 16,
              off = __atomic_fetch_add(&next_off, (need + 15) & ~15ull, __ATOMIC_RELAXED);
    if (off + need > HEAP_BYTES)
        return NULL;
    uintptr_t p = ((uintptr_t)b + off + 16 + align - 1) & ~(uintptr_t)(align - 1);
    *(size_t *)(p - 16) = n;
    return (void *)p;
}

static int ours(const void *p)
{
    return heap && (uintptr_t)p - (uintptr_t)heap < HEAP_BYTES;
}

void *malloc(size_t n)
{
    return cut(n, 16);
}

void free(void *p)
{
    if (p && !ours(p))
        abort(); /* a block of another allocator's: the agent sent it the wrong way */
}

void *calloc(size_t n, size_t m)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, m, &bytes))
        return NULL;
    return cut(bytes, 16); /* fresh pages: zero */
}

size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (!ours(p))
        abort();
    return *(size_t *)((char *)p - 16);
}

void *realloc(void *p, size_t n)
{
    if (p && !ours(p))
        abort();
    void *q = cut(n, 16);
    if (q && p) {
        size_t old = malloc_usable_size(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = cut(n, align < 16 ? 16 : align);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
