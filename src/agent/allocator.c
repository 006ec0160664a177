/* allocator.c — which allocator serves malloc after the agent (glibc,
 * jemalloc, tcmalloc, mimalloc or another), so that glibc-only heuristics
 * (arena and mmapped-chunk recognition) apply only to glibc and the
 * mappings another allocator makes count as heap; and jemalloc's own
 * entry points (mallocx and friends), served with the agent's blocks.
 *
 * Detection runs once at start-up with dladdr and dl_iterate_phdr: no
 * malloc, safe inside another allocator's own initialisation. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/allocator.h"

int mt_alloc_kind = MT_ALLOC_GLIBC;
char mt_alloc_file[256] = "libc.so.6";
uintptr_t mt_alloc_text_lo, mt_alloc_text_hi;

static uintptr_t want_base;

static int find_text(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size;
    (void)unused;
    if (info->dlpi_addr != want_base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            mt_alloc_text_lo = info->dlpi_addr + ph->p_vaddr;
            mt_alloc_text_hi = mt_alloc_text_lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static int named(const char *base, const char *what) { return strstr(base, what) != NULL; }

void mt_allocator_detect(void *real_malloc)
{
    Dl_info info;
    if (!real_malloc || !dladdr(real_malloc, &info) || !info.dli_fname)
        return;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    size_t n = strlen(base);
    if (n >= sizeof mt_alloc_file)
        n = sizeof mt_alloc_file - 1;
    memcpy(mt_alloc_file, base, n);
    mt_alloc_file[n] = '\0';
    mt_alloc_kind = named(base, "libc.so") || named(base, "libc-") ? MT_ALLOC_GLIBC
                    : named(base, "jemalloc")                     ? MT_ALLOC_JEMALLOC
                    : named(base, "tcmalloc")                     ? MT_ALLOC_TCMALLOC
                    : named(base, "mimalloc")                     ? MT_ALLOC_MIMALLOC
                                                                  : MT_ALLOC_OTHER;
    if (mt_alloc_kind != MT_ALLOC_GLIBC) {
        want_base = (uintptr_t)info.dli_fbase;
        /* dli_fbase is the load address; dlpi_addr the bias (equal for
         * shared objects, 0 for a non-PIE executable). */
        if (!dl_iterate_phdr(find_text, NULL)) {
            want_base = 0;
            dl_iterate_phdr(find_text, NULL);
        }
    }
}

const char *mt_allocator_name(void)
{
    static const char *const names[] = {"glibc", "jemalloc", "tcmalloc", "mimalloc", "other"};
    return names[mt_alloc_kind];
}

static int in_self(void *fn)
{
    Dl_info info, self;
    return fn && dladdr(fn, &info) && dladdr((void *)in_self, &self) && info.dli_fbase == self.dli_fbase;
}

/* The first definition of name in the global scope unless it is the
 * agent's own; else the next one after the agent. */
void *mt_allocator_sym(const char *name, int first)
{
    void *fn = first ? dlsym(RTLD_DEFAULT, name) : NULL;
    return fn && !in_self(fn) ? fn : dlsym(RTLD_NEXT, name);
}

/* Another allocator loaded before the agent serves the program's malloc
 * calls itself (`malloc` here would name that first definition too:
 * compare the files that define it). */
int mt_allocator_precedes(char *who, size_t n)
{
    void *first = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    if (!first || in_self(first) || !dladdr(first, &info))
        return 0;
    const char *f = info.dli_fname ? info.dli_fname : "a library";
    size_t k = strlen(f) < n - 1 ? strlen(f) : n - 1;
    memcpy(who, f, k);
    who[k] = '\0';
    return 1;
}

/* ---- jemalloc's non-standard API ----------------------------------------
 * Served with the agent's own blocks (through the interposed entry points
 * above the real allocator), so they are counted like any other and
 * free() and these agree on every pointer. Arena and tcache choices in
 * the flags are not honoured: the block comes from the default arena. */

#define JE_LG_ALIGN(flags) ((unsigned)(flags)&0x3f)
#define JE_ZERO 0x40

static void *alloc_flags(size_t size, int flags)
{
    unsigned lg = JE_LG_ALIGN(flags);
    void *p = NULL;
    if (lg > 4) {
        if (lg >= 8 * sizeof(size_t) || posix_memalign(&p, (size_t)1 << lg, size) != 0)
            return NULL;
    } else {
        p = malloc(size);
    }
    if (p && (flags & JE_ZERO))
        memset(p, 0, size);
    return p;
}

MT_EXPORT void *mallocx(size_t size, int flags) { return alloc_flags(size ? size : 1, flags); }

MT_EXPORT void *rallocx(void *p, size_t size, int flags)
{
    if (!size)
        size = 1;
    size_t old = malloc_usable_size(p);
    if (JE_LG_ALIGN(flags) <= 4 && !(flags & JE_ZERO))
        return realloc(p, size);
    void *np = alloc_flags(size, flags);
    if (!np)
        return NULL;
    memcpy(np, p, old < size ? old : size);
    free(p);
    return np;
}

/* Resizing in place is not offered: the size stays (a valid answer). */
MT_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags)
{
    (void)size;
    (void)extra;
    (void)flags;
    return malloc_usable_size(p);
}

MT_EXPORT size_t sallocx(const void *p, int flags)
{
    (void)flags;
    return malloc_usable_size((void *)(uintptr_t)p);
}

MT_EXPORT void dallocx(void *p, int flags)
{
    (void)flags;
    free(p);
}

MT_EXPORT void sdallocx(void *p, size_t size, int flags)
{
    (void)size;
    (void)flags;
    free(p);
}
