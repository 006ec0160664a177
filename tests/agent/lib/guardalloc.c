/* guardalloc.c — a test allocator preloaded after the agent: every block
 * starts a mapping of its own, right above a PROT_NONE page (as an
 * allocator's reservation or guard can lie below a block). The agent must
 * tell these blocks from its own without reading below them: a header
 * read there faults. Blocks are never reused; sizes are kept in a table.
 * Only the functions the agent forwards to (and the program may call)
 * are defined: malloc, free, calloc, realloc, posix_memalign,
 * aligned_alloc, memalign, malloc_usable_size. */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096u
#define SLOTS (1u << 16)

static struct slot {
    _Atomic(uintptr_t) addr;
    size_t size;
} slots[SLOTS];
static atomic_uint used;

static size_t size_of(const void *p)
{
    unsigned n = atomic_load(&used);
    for (unsigned i = 0; i < n && i < SLOTS; i++)
        if (atomic_load(&slots[i].addr) == (uintptr_t)p)
            return slots[i].size;
    return 0;
}

static void *block(size_t n)
{
    size_t len = PAGE + ((n ? n : 1) + PAGE - 1) / PAGE * PAGE;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m, PAGE, PROT_NONE) != 0) {
        munmap(m, len);
        return NULL;
    }
    unsigned i = atomic_fetch_add(&used, 1);
    if (i < SLOTS) {
        slots[i].size = n;
        atomic_store(&slots[i].addr, (uintptr_t)(m + PAGE));
    }
    return m + PAGE;
}

void *malloc(size_t n)
{
    return block(n);
}
void free(void *p)
{
    (void)p; /* never reused: a stale read finds the same bytes */
}
size_t malloc_usable_size(void *p)
{
    return p ? size_of(p) : 0;
}

void *calloc(size_t a, size_t b)
{
    if (b && a > SIZE_MAX / b)
        return NULL;
    return block(a * b); /* fresh mappings are zero */
}

void *realloc(void *p, size_t n)
{
    void *q = block(n);
    if (q && p) {
        size_t old = size_of(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align > PAGE || (align & (align - 1)))
        return EINVAL;
    void *p = block(n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, align, n) == 0 ? p : NULL;
}

void *memalign(size_t align, size_t n)
{
    return aligned_alloc(align, n);
}
