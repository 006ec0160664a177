/* fwdalloc.c — an interposer that allocates nothing itself: malloc, free,
 * calloc, realloc and posix_memalign go on to the next definition
 * (dlsym(RTLD_NEXT)), as another tool's wrapper would. Preloaded before
 * the agent (LD_PRELOAD=libfwdalloc.so:libmemtrail.so), that next
 * definition is the agent's, which forwards the calls it gets to the first
 * definition, this one (tests/agent/test_allocators.sh): the agent must
 * see the call come back and send it on to libc, not back here forever.
 * While dlsym itself runs, glibc's own functions serve. */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);
static __thread int resolving;

static void resolve(void)
{
    resolving = 1;
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    next_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    resolving = 0;
}

/* 1 when the next definitions are ready; 0: glibc's own serve this call. */
static int ready(void)
{
    if (resolving)
        return 0;
    if (!next_posix_memalign)
        resolve();
    return next_posix_memalign != NULL;
}

void *malloc(size_t n)
{
    return ready() ? next_malloc(n) : __libc_malloc(n);
}

void free(void *p)
{
    if (ready())
        next_free(p);
    else
        __libc_free(p);
}

void *calloc(size_t n, size_t m)
{
    return ready() ? next_calloc(n, m) : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    return ready() ? next_realloc(p, n) : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (ready())
        return next_posix_memalign(out, align, n);
    *out = __libc_memalign(align, n);
    return *out ? 0 : ENOMEM;
}
