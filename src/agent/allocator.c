/* allocator.c — which allocator serves malloc after the agent (glibc,
 * jemalloc, tcmalloc, mimalloc or another), so that glibc-only heuristics
 * (arena and mmapped-chunk recognition) apply only to glibc and the
 * mappings another allocator makes count as heap; which functions the
 * agent forwards to (another malloc may come before its own); and
 * jemalloc's own entry points (mallocx and friends), served with the
 * agent's blocks.
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

static int named(const char *base, const char *what)
{
    return strstr(base, what) != NULL;
}

/* Once at start-up, with the real malloc found (mt_allocator_resolve). */
static void mt_allocator_detect(void *real_malloc)
{
    Dl_info info;
    if (!real_malloc || !dladdr(real_malloc, &info) || !info.dli_fname) {
        /* unknown: the hooks' common paths, which read glibc's chunk
         * headers, stay off */
        atomic_fetch_or(&mt_hooks_extra, MT_EXTRA_ALLOC);
        return;
    }
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    mt_alloc_kind = named(base, "libc.so") || named(base, "libc-") ? MT_ALLOC_GLIBC
                    : named(base, "jemalloc")                      ? MT_ALLOC_JEMALLOC
                    : named(base, "tcmalloc")                      ? MT_ALLOC_TCMALLOC
                    : named(base, "mimalloc")                      ? MT_ALLOC_MIMALLOC
                                                                   : MT_ALLOC_OTHER;
    if (mt_alloc_kind != MT_ALLOC_GLIBC) {
        atomic_fetch_or(&mt_hooks_extra, MT_EXTRA_ALLOC);
        want_base = (uintptr_t)info.dli_fbase;
        /* dli_fbase is the load address; dlpi_addr the bias (equal for
         * shared objects, 0 for a non-PIE executable). */
        if (!dl_iterate_phdr(find_text, NULL)) {
            want_base = 0;
            dl_iterate_phdr(find_text, NULL);
        }
    }
}

/* ---- who defines malloc first -------------------------------------------
 * The global scope is searched in load order: the program, the preloaded
 * libraries in LD_PRELOAD's order, then the rest. dlsym(RTLD_DEFAULT)
 * cannot answer "which object defines malloc before the agent": for a
 * program that takes malloc's address (python3) it returns the program's
 * own PLT entry, which leads back to the agent. So each object's .dynsym
 * is read through its GNU hash table, in memory: no malloc, no lock. */

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* A dynamic-section address: relocated in place by the loader, or not. */
static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v >= info->dlpi_addr ? (uintptr_t)v : info->dlpi_addr + v;
}

/* The address where the object defines name (a function), or NULL. */
static void *defined_in(const struct dl_phdr_info *info, const char *name)
{
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gh = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)dyn_addr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB)
            strtab = (const char *)dyn_addr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_GNU_HASH)
            gh = (const uint32_t *)dyn_addr(info, dyn->d_un.d_ptr);
    }
    if (!symtab || !strtab || !gh || gh[0] == 0)
        return NULL;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = gnu_hash(name), i = buckets[h % nbuckets];
    if (i < symoffset)
        return NULL;
    for (;; i++) {
        uint32_t ch = chain[i - symoffset];
        const ElfW(Sym) *sym = &symtab[i];
        if ((ch | 1) == (h | 1) && strcmp(strtab + sym->st_name, name) == 0)
            return sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC
                       ? (void *)(info->dlpi_addr + sym->st_value)
                       : NULL;
        if (ch & 1)
            return NULL;
    }
}

struct first_def {
    uintptr_t self_base;
    int done;
    const char *file; /* the object defining malloc before the agent */
    int program;      /* that object is the program itself */
    uintptr_t base;
    struct dl_phdr_info info;
};

static int find_first(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct first_def *f = arg;
    if (info->dlpi_addr == f->self_base)
        return 1; /* the agent: nothing before it defines malloc */
    if (defined_in(info, "malloc")) {
        /* the program's own entry has no name, and comes first */
        f->program = !info->dlpi_name || !info->dlpi_name[0];
        f->file = f->program ? "the program" : info->dlpi_name;
        f->base = info->dlpi_addr;
        f->info = *info;
        return 1;
    }
    return 0;
}

static struct first_def first;

static void find_first_definition(void)
{
    Dl_info self;
    if (first.done)
        return;
    first.done = 1;
    if (dladdr((void *)find_first_definition, &self))
        first.self_base = (uintptr_t)self.dli_fbase;
    dl_iterate_phdr(find_first, &first);
}

int mt_allocator_precedes(char *who, size_t n)
{
    find_first_definition();
    if (!first.file)
        return 0;
    size_t k = strlen(first.file) < n - 1 ? strlen(first.file) : n - 1;
    memcpy(who, first.file, k);
    who[k] = '\0';
    return first.program ? MT_FIRST_PROGRAM : MT_FIRST_LIBRARY;
}

/* ---- the functions the agent forwards to --------------------------------
 * With no definition of malloc before the agent's: the next ones
 * (dlsym(RTLD_NEXT)). With one (another allocator preloaded first, or one
 * linked into the program), that object gets the program's calls and
 * owns its blocks. A call still reaches the agent's entry point of a
 * function that object defines only when it was handed on explicitly
 * (dlsym(RTLD_NEXT) in an interposer: another tool's wrapper, glibc's
 * libmemusage.so, a program's counting malloc): the lookup would
 * otherwise have found that object's. Such a call goes on to the next
 * definition, once: sent back to the first, the two would hand it to each
 * other for ever (and the interposer would see it twice). So mt_real_fn
 * is always the next definitions. The program's calls of the functions
 * that object lacks (memalign, valloc, pvalloc: glibc's alone) do reach
 * the agent, and must get a block of that object's, so that its free
 * takes it back: they go to its posix_memalign (mt_aligned_real).
 * Others reach it through their global names: aligned_alloc calls
 * memalign, reallocarray realloc. */

int (*mt_aligned_real[MT_ALIGNED_COUNT])(void **, size_t, size_t);

void mt_allocator_resolve(mt_real *out)
{
    find_first_definition();
    out->malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    out->free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    out->calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    out->realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    out->posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    out->malloc_usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    static const char *const aligned_names[MT_ALIGNED_COUNT] = {"posix_memalign", "memalign", "valloc",
                                                                "pvalloc"};
    int (*first_pm)(void **, size_t, size_t) =
        first.file ? (int (*)(void **, size_t, size_t))defined_in(&first.info, "posix_memalign") : NULL;
    for (int i = 0; i < MT_ALIGNED_COUNT; i++)
        mt_aligned_real[i] =
            first_pm && !defined_in(&first.info, aligned_names[i]) ? first_pm : out->posix_memalign;
    /* the allocator itself, not the agent */
    void *first_malloc = first.file ? defined_in(&first.info, "malloc") : NULL;
    mt_allocator_detect(first_malloc ? first_malloc : (void *)out->malloc);
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

MT_EXPORT void *mallocx(size_t size, int flags)
{
    return alloc_flags(size ? size : 1, flags);
}

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
