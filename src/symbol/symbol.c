/* symbol.c — offline symbolization of recorded return addresses with
 * libdw (elfutils). Each recorded module gets its own Dwfl, reported
 * from the file on disk at the module's recorded bias; the recorded
 * build-id is checked against the file's, so a rebuilt binary is not
 * trusted. Debug info comes from the file itself or from where
 * dwfl_standard_find_debuginfo looks (/usr/lib/debug/.build-id/...,
 * .gnu_debuglink). An address inside inlined code expands to one frame per
 * inlined call (DW_TAG_inlined_subroutine scopes, their DW_AT_call_file and
 * DW_AT_call_line giving the outer frames' lines). Results are cached per
 * address: stacks repeat the same return addresses. */
#include "symbol/symbol.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* libstdc++'s demangler, C++ names only. Loaded the first time a name
 * needs it, not linked: loading libstdc++ costs every memtrail command
 * about 2 ms, `memtrail run` included. Without libstdc++ (never on a
 * Debian system, where the compiler's runtime is always installed), names
 * stay as the linker has them. */
typedef char *demangle_fn(const char *mangled, char *buf, size_t *len, int *status);
static demangle_fn *demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

static void find_demangler(void)
{
    void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (lib)
        *(void **)&demangle = dlsym(lib, "__cxa_demangle");
}

/* Inlined calls expanded per address, at most (deeper nests are cut). */
#define SYM_MAX_INLINE 16

enum sym_state {
    MODULE_UNOPENED,
    MODULE_FULL,        /* ELF (and maybe DWARF) usable */
    MODULE_OFFSET_ONLY, /* module + offset only */
};

/* A recorded module, and what opening it gave. */
struct module {
    char *path, *buildid; /* owned; buildid NULL: not checked */
    uint64_t bias, start, end;
    enum sym_state state;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    GElf_Addr dwfl_bias; /* where libdwfl placed the file: its address = ELF address + dwfl_bias */
};

struct cache_entry {
    uint64_t address; /* 0: empty slot (address 0 is never cached) */
    struct sym_frame *frames;
    int n;
};

/* A module opened ahead, in a sym_cache. */
struct sym_cached {
    struct module m;
    char *why;  /* its warning, or NULL */
    bool taken; /* adopted by a symbolizer */
};

struct sym_cache {
    struct sym_cached *mods;
    size_t n, cap;
};

struct symbolizer {
    struct sym_cache *cache_from; /* modules opened ahead, or NULL */
    struct module *mods;
    size_t nmods;
    size_t *by_start; /* module indices by start address: the module of an address in O(log n) */
    bool overlap;     /* modules overlap: searched in order instead */
    struct cache_entry *cache;
    size_t cache_cap, cache_used;
    char **strings; /* every string frames point at */
    size_t nstrings, strings_cap;
    char *warnings;
    size_t warnings_len;
};

/* Makes room for `need` items of `size` bytes in *items (a `T **` passed
 * as void *) of capacity *cap, doubling from `first`. 0 or -ENOMEM. */
static int grow(void *items, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *p = realloc(*(void **)items, n * size);
    if (!p)
        return -ENOMEM;
    *(void **)items = p;
    *cap = n;
    return 0;
}

static char *debuginfo_path; /* NULL: libdwfl's default search path */

/* Does a file `name` exist in dir, dir/.debug or /usr/lib/debug/dir (the
 * places libdwfl's default search path looks for a separate debug file)? */
static bool debug_candidate(const char *file, const char *name)
{
    if (!file || !name || !*name)
        return false;
    const char *slash = strrchr(file, '/');
    int dirlen = slash ? (int)(slash - file) : 0;
    static const char *const fmt[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        char path[4096];
        int n = snprintf(path, sizeof path, fmt[i], dirlen, file, name);
        if (n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0)
            return true;
    }
    return false;
}

/* libdwfl's standard search for a module's separate debug info (by
 * build-id, then by .gnu_debuglink or FILE.debug beside the file and
 * under /usr/lib/debug, then debuginfod), without loading libdebuginfod
 * (and curl, gnutls...: ~15 ms) when no debuginfod server is configured
 * and no file by that name exists: the standard search would then find
 * nothing either. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                          char **debuginfo_file_name)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (!urls || !*urls) {
        int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                              debuglink_crc, debuginfo_file_name);
        if (fd >= 0)
            return fd;
        const char *base_name = file_name ? strrchr(file_name, '/') : NULL;
        base_name = base_name ? base_name + 1 : file_name;
        char own[1024] = "";
        if (base_name)
            snprintf(own, sizeof own, "%s.debug", base_name);
        char *real = file_name ? realpath(file_name, NULL) : NULL;
        const char *rbase = real ? strrchr(real, '/') : NULL;
        char rown[1024] = "";
        if (rbase)
            snprintf(rown, sizeof rown, "%s.debug", rbase + 1);
        bool any = debug_candidate(file_name, debuglink_file ? debuglink_file : own) ||
                   (real && debug_candidate(real, debuglink_file ? debuglink_file : rown));
        free(real);
        if (!any)
            return -1;
    }
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

/* Keep `s` (taking ownership) for the symbolizer's lifetime. */
static const char *keep(struct symbolizer *s, char *str)
{
    if (!str)
        return NULL;
    if (grow(&s->strings, &s->strings_cap, s->nstrings + 1, sizeof *s->strings, 64) < 0) {
        free(str);
        return NULL;
    }
    s->strings[s->nstrings++] = str;
    return str;
}

static const char *keep_copy(struct symbolizer *s, const char *str)
{
    return str ? keep(s, strdup(str)) : NULL;
}

/* A C++ symbol demangled, others as they are. */
static const char *function_name(struct symbolizer *s, const char *name)
{
    if (!name)
        return NULL;
    if (name[0] == '_' && name[1] == 'Z' && pthread_once(&demangle_once, find_demangler) == 0 && demangle) {
        int status = -1;
        char *d = demangle(name, NULL, NULL, &status);
        if (d && status == 0)
            return keep(s, d);
        free(d);
    }
    return keep_copy(s, name);
}

static void warn(struct symbolizer *s, const char *path, const char *why)
{
    char *line;
    int n = asprintf(&line, "%s%s: %s", s->warnings_len ? "\n" : "", path, why);
    if (n < 0)
        return;
    char *grown = realloc(s->warnings, s->warnings_len + (size_t)n + 1);
    if (grown) {
        memcpy(grown + s->warnings_len, line, (size_t)n + 1);
        s->warnings = grown;
        s->warnings_len += (size_t)n;
    }
    free(line);
}

/* Opens module m: the file, its build-id, its debug info. Returns what
 * keeps it from being symbolized fully, or NULL (malloc'd; the caller
 * warns with it). */
static char *open_module(struct module *m)
{
    char *why = NULL;
    m->state = MODULE_OFFSET_ONLY;
    if (access(m->path, R_OK) != 0) {
        if (asprintf(&why, "%s; frames in it shown as module+offset",
                     errno == ENOENT ? "no such file" : strerror(errno)) < 0)
            why = NULL;
        return why;
    }
    /* The file names come from a recording: a FIFO or a device named there
     * would block or read without end if opened. */
    struct stat st;
    if (stat(m->path, &st) != 0 || !S_ISREG(st.st_mode))
        return strdup("not a regular file; frames in it shown as module+offset");
    m->dwfl = dwfl_begin(&offline_callbacks);
    if (!m->dwfl)
        return NULL;
    dwfl_report_begin(m->dwfl);
    m->mod = dwfl_report_elf(m->dwfl, m->path, m->path, -1, m->bias, false);
    dwfl_report_end(m->dwfl, NULL, NULL);
    if (!m->mod) {
        if (asprintf(&why, "cannot read it as ELF (%s); frames in it shown as module+offset",
                     dwfl_errmsg(-1)) < 0)
            why = NULL;
        return why;
    }
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(m->mod, &bits, &vaddr);
    if (m->buildid) {
        char hex[2 * 64 + 1] = "";
        for (int i = 0; i < len && i < 64; i++)
            snprintf(hex + 2 * i, 3, "%02x", bits[i]);
        if (len <= 0 || strcmp(hex, m->buildid) != 0) {
            if (asprintf(&why,
                         "build-id differs: rebuilt since the run? (recorded %.128s, file has %s); "
                         "frames in it shown as module+offset",
                         m->buildid, len > 0 ? hex : "none") < 0)
                why = NULL;
            return why;
        }
    }
    if (!dwfl_module_getelf(m->mod, &m->dwfl_bias))
        return strdup("cannot read its ELF data; frames in it shown as module+offset");
    m->state = MODULE_FULL;
    GElf_Addr dwbias;
    if (!dwfl_module_getdwarf(m->mod, &dwbias))
        return strdup("no debug info (stripped?): function names from its symbol table only, no file:line");
    return NULL;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Module m opened: taken from the cache when it was opened there. */
static void use_module(struct symbolizer *s, struct module *m)
{
    char *why = NULL;
    struct sym_cached *c = NULL;
    for (size_t i = 0; s->cache_from && i < s->cache_from->n && !c; i++) {
        struct sym_cached *k = &s->cache_from->mods[i];
        if (!k->taken && k->m.bias == m->bias && same_str(k->m.path, m->path) &&
            same_str(k->m.buildid, m->buildid))
            c = k;
    }
    if (c) {
        c->taken = true;
        m->state = c->m.state;
        m->dwfl = c->m.dwfl;
        m->mod = c->m.mod;
        m->dwfl_bias = c->m.dwfl_bias;
        c->m.dwfl = NULL;
        why = c->why;
        c->why = NULL;
    } else {
        why = open_module(m);
    }
    if (why)
        warn(s, m->path, why);
    free(why);
}

/* Keyed with a secret of this process: the addresses come from an
 * untrusted file, which must not be able to make them collide. */
static uint64_t hash_key;
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void make_hash_key(void)
{
    if (getrandom(&hash_key, sizeof hash_key, GRND_NONBLOCK) != sizeof hash_key)
        hash_key = (uint64_t)(uintptr_t)&hash_key ^ (uint64_t)getpid() * 0x9e3779b97f4a7c15u;
}

static size_t slot_of(uint64_t address, size_t cap)
{
    uint64_t x = address ^ hash_key; /* splitmix64's finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

/* --- modules by address --------------------------------------------------- */

static int by_start(const void *pa, const void *pb, void *ctx)
{
    const struct module *mods = ctx;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    if (mods[a].start != mods[b].start)
        return mods[a].start < mods[b].start ? -1 : 1;
    return a < b ? -1 : 1;
}

static int index_modules(struct symbolizer *s)
{
    if (!s->nmods)
        return 0;
    if (!(s->by_start = malloc(s->nmods * sizeof *s->by_start)))
        return -ENOMEM;
    for (size_t i = 0; i < s->nmods; i++)
        s->by_start[i] = i;
    qsort_r(s->by_start, s->nmods, sizeof *s->by_start, by_start, s->mods);
    /* Modules of one process do not overlap; a list where they do is
     * searched in its order (the first that holds the address). */
    uint64_t end = 0;
    for (size_t k = 0; k < s->nmods; k++) {
        const struct module *m = &s->mods[s->by_start[k]];
        if (m->start == m->end)
            continue; /* holds nothing */
        if (k && m->start < end)
            s->overlap = true;
        if (m->end > end)
            end = m->end;
    }
    return 0;
}

static struct module *find_module(struct symbolizer *s, uint64_t pc)
{
    if (s->overlap || !s->by_start) {
        for (size_t i = 0; i < s->nmods; i++)
            if (pc >= s->mods[i].start && pc < s->mods[i].end)
                return &s->mods[i];
        return NULL;
    }
    /* The last module starting at or below pc, over empty ones (they hold nothing). */
    size_t lo = 0, hi = s->nmods;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->mods[s->by_start[mid]].start <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo > 0) {
        struct module *m = &s->mods[s->by_start[lo - 1]];
        if (m->start != m->end)
            return pc < m->end ? m : NULL;
        lo--;
    }
    return NULL;
}

/* A copy of a recorded module's description into m (zeroed). 0 or -ENOMEM. */
static int copy_module(struct module *m, const struct sym_module *from)
{
    memset(m, 0, sizeof *m);
    m->bias = from->bias;
    m->start = from->start;
    m->end = from->end;
    m->path = strdup(from->path ? from->path : "");
    m->buildid = from->buildid ? strdup(from->buildid) : NULL;
    return m->path && (!from->buildid || m->buildid) ? 0 : -ENOMEM;
}

struct symbolizer *sym_open(const struct sym_module *mods, size_t n)
{
    return sym_open_cached(mods, n, NULL);
}

struct symbolizer *sym_open_cached(const struct sym_module *mods, size_t n, struct sym_cache *from)
{
    pthread_once(&hash_key_once, make_hash_key);
    struct symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cache_from = from;
    s->mods = calloc(n + 1, sizeof *s->mods);
    s->cache_cap = 256;
    s->cache = calloc(s->cache_cap, sizeof *s->cache);
    s->warnings = strdup("");
    if (!s->mods || !s->cache || !s->warnings) {
        sym_close(s);
        return NULL;
    }
    for (; s->nmods < n; s->nmods++)
        if (copy_module(&s->mods[s->nmods], &mods[s->nmods]) < 0) {
            s->nmods++;
            sym_close(s);
            return NULL;
        }
    if (index_modules(s) < 0) {
        sym_close(s);
        return NULL;
    }
    return s;
}

void sym_prepare(struct symbolizer *s, const uint64_t *addresses, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t pc = addresses[i];
        struct module *m = find_module(s, pc ? pc - 1 : 0);
        if (m && m->state == MODULE_UNOPENED)
            use_module(s, m);
    }
}

/* The name of a subprogram or inlined_subroutine DIE: its linkage name
 * demangled when it has one (C++: qualified, with parameters), else
 * DW_AT_name; both looked up through abstract_origin/specification. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (!name)
        name = dwarf_diename(die);
    return function_name(s, name);
}

/* A source file name as kept: relative names joined to the compilation
 * directory, as the compiler saw them. */
static const char *source_path(struct symbolizer *s, const char *comp_dir, const char *name)
{
    if (!name)
        return NULL;
    if (name[0] == '/' || !comp_dir || !*comp_dir)
        return keep_copy(s, name);
    char *joined;
    if (asprintf(&joined, "%s/%s", comp_dir, name) < 0)
        return NULL;
    return keep(s, joined);
}

static bool is_function(Dwarf_Die *die)
{
    int tag = dwarf_tag(die);
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

/* Expands the inlined calls at `pc` (Dwfl address) of m into out[];
 * returns how many frames, or 0 when DWARF has nothing for it. The
 * innermost function scope comes from dwarf_getscopes; each inlined
 * instance's caller is the next function scope around that instance
 * (dwarf_getscopes_die: the concrete tree, not the abstract origin's). */
static int dwarf_frames(struct symbolizer *s, struct module *m, uint64_t pc, const char *file, int line,
                        struct sym_frame *out, int max)
{
    Dwarf_Addr cubias;
    Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, pc, &cubias);
    if (!cudie)
        return 0;
    Dwarf_Die *scopes = NULL;
    int nscopes = dwarf_getscopes(cudie, pc - cubias, &scopes);
    Dwarf_Die die;
    int i = 0;
    while (i < nscopes && !is_function(&scopes[i]))
        i++;
    if (i == nscopes) {
        free(scopes);
        return 0;
    }
    die = scopes[i];
    free(scopes);

    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
        files = NULL;
    int n = 0;
    while (n < max) {
        struct sym_frame *f = &out[n++];
        bool inlined = dwarf_tag(&die) == DW_TAG_inlined_subroutine;
        f->function = die_name(s, &die);
        f->file = file;
        f->line = line;
        f->inlined = inlined;
        if (!inlined)
            break;
        /* The next frame out is at this inlined call's call site. */
        Dwarf_Attribute attr;
        Dwarf_Word fileidx = 0, callline = 0;
        file = NULL;
        line = 0;
        if (files && dwarf_formudata(dwarf_attr(&die, DW_AT_call_file, &attr), &fileidx) == 0 &&
            fileidx < nfiles)
            file = source_path(s, dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr)),
                               dwarf_filesrc(files, fileidx, NULL, NULL));
        if (dwarf_formudata(dwarf_attr(&die, DW_AT_call_line, &attr), &callline) == 0)
            line = (int)callline;
        Dwarf_Die *outer = NULL;
        int nouter = dwarf_getscopes_die(&die, &outer);
        int j = 1;
        while (j < nouter && !is_function(&outer[j]))
            j++;
        if (j >= nouter) {
            free(outer);
            /* The caller's scope is unknown: keep its call site without a name. */
            if (n < max)
                out[n++] = (struct sym_frame){.file = file, .line = line};
            break;
        }
        die = outer[j];
        free(outer);
    }
    return n;
}

/* Symbolizes pc (the recorded return address) without the cache. */
static int lookup(struct symbolizer *s, uint64_t address, struct sym_frame *out, int max)
{
    struct sym_frame base = {.address = address};
    uint64_t pc = address ? address - 1 : 0; /* inside the call instruction */
    struct module *m = find_module(s, pc);
    if (!m) {
        out[0] = base;
        return 1;
    }
    if (m->state == MODULE_UNOPENED)
        use_module(s, m);
    base.module = m->path;
    base.offset = address - m->bias;
    if (m->state != MODULE_FULL) {
        out[0] = base;
        return 1;
    }
    /* The ELF address, placed where libdwfl put the file. */
    uint64_t dpc = pc - m->bias + m->dwfl_bias;

    const char *file = NULL;
    int line = 0;
    Dwfl_Line *dl = dwfl_module_getsrc(m->mod, dpc);
    if (dl) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(dl, NULL, &lineno, NULL, NULL, NULL);
        if (src && lineno > 0) {
            file = source_path(s, dwfl_line_comp_dir(dl), src);
            line = lineno;
        }
    }
    int n = dwarf_frames(s, m, dpc, file, line, out, max);
    if (n == 0) {
        /* No DWARF scope: the symbol table's name (.symtab or .dynsym). */
        GElf_Off off;
        GElf_Sym sym;
        const char *name = dwfl_module_addrinfo(m->mod, dpc, &off, &sym, NULL, NULL, NULL);
        out[0] = base;
        out[0].function = function_name(s, name);
        out[0].file = file;
        out[0].line = line;
        return 1;
    }
    for (int i = 0; i < n; i++) {
        out[i].module = base.module;
        out[i].address = address;
        out[i].offset = base.offset;
    }
    /* A DWARF scope without a name (rare): fall back to the symbol table. */
    if (!out[n - 1].function) {
        GElf_Off off;
        GElf_Sym sym;
        out[n - 1].function =
            function_name(s, dwfl_module_addrinfo(m->mod, dpc, &off, &sym, NULL, NULL, NULL));
    }
    return n;
}

static int cache_grow(struct symbolizer *s)
{
    size_t cap = 2 * s->cache_cap;
    struct cache_entry *grown = calloc(cap, sizeof *grown);
    if (!grown)
        return -ENOMEM;
    for (size_t i = 0; i < s->cache_cap; i++) {
        if (!s->cache[i].address)
            continue;
        size_t j = slot_of(s->cache[i].address, cap);
        while (grown[j].address)
            j = (j + 1) & (cap - 1);
        grown[j] = s->cache[i];
    }
    free(s->cache);
    s->cache = grown;
    s->cache_cap = cap;
    return 0;
}

int sym_lookup(struct symbolizer *s, uint64_t address, struct sym_frame *out, int max)
{
    if (max <= 0)
        return 0;
    size_t j = slot_of(address, s->cache_cap);
    while (address && s->cache[j].address) {
        if (s->cache[j].address == address) {
            int n = s->cache[j].n < max ? s->cache[j].n : max;
            memcpy(out, s->cache[j].frames, (size_t)n * sizeof *out);
            return n;
        }
        j = (j + 1) & (s->cache_cap - 1);
    }
    struct sym_frame frames[SYM_MAX_INLINE];
    memset(frames, 0, sizeof frames);
    int n = lookup(s, address, frames, SYM_MAX_INLINE);
    if (address && (s->cache_used + 1) * 2 <= s->cache_cap) {
        struct sym_frame *copy = malloc((size_t)n * sizeof *copy);
        if (copy) {
            memcpy(copy, frames, (size_t)n * sizeof *copy);
            s->cache[j] = (struct cache_entry){address, copy, n};
            s->cache_used++;
            if ((s->cache_used + 1) * 2 > s->cache_cap)
                cache_grow(s);
        }
    }
    if (n > max)
        n = max;
    memcpy(out, frames, (size_t)n * sizeof *out);
    return n;
}

/* --- modules opened ahead ------------------------------------------------ */

struct sym_cache *sym_cache_new(void)
{
    return calloc(1, sizeof(struct sym_cache));
}

void sym_cache_load(struct sym_cache *c, const struct sym_module *mods, size_t n, const uint64_t *addresses,
                    size_t naddr)
{
    /* A symbolizer without debug info opened: it finds the modules used. */
    struct symbolizer *s = sym_open(mods, n);
    if (!s)
        return;
    for (size_t a = 0; a < naddr; a++) {
        struct module *m = find_module(s, addresses[a] ? addresses[a] - 1 : 0);
        if (!m || m->state != MODULE_UNOPENED || !mods[m - s->mods].path)
            continue;
        m->state = MODULE_OFFSET_ONLY; /* looked at */
        bool have = false;
        for (size_t k = 0; k < c->n && !have; k++)
            have = c->mods[k].m.bias == m->bias && same_str(c->mods[k].m.path, m->path) &&
                   same_str(c->mods[k].m.buildid, m->buildid);
        if (have || grow(&c->mods, &c->cap, c->n + 1, sizeof *c->mods, 8) < 0)
            continue;
        struct sym_cached *k = &c->mods[c->n];
        memset(k, 0, sizeof *k);
        if (copy_module(&k->m, &mods[m - s->mods]) < 0) {
            free(k->m.path);
            free(k->m.buildid);
            continue;
        }
        k->why = open_module(&k->m);
        c->n++;
    }
    sym_close(s);
}

void sym_cache_free(struct sym_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        if (c->mods[i].m.dwfl)
            dwfl_end(c->mods[i].m.dwfl);
        free(c->mods[i].m.path);
        free(c->mods[i].m.buildid);
        free(c->mods[i].why);
    }
    free(c->mods);
    free(c);
}

const char *sym_warnings(struct symbolizer *s)
{
    return s->warnings ? s->warnings : "";
}

void sym_close(struct symbolizer *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nmods; i++) {
        if (s->mods[i].dwfl)
            dwfl_end(s->mods[i].dwfl);
        free(s->mods[i].path);
        free(s->mods[i].buildid);
    }
    free(s->mods);
    free(s->by_start);
    if (s->cache)
        for (size_t i = 0; i < s->cache_cap; i++)
            free(s->cache[i].frames);
    free(s->cache);
    for (size_t i = 0; i < s->nstrings; i++)
        free(s->strings[i]);
    free(s->strings);
    free(s->warnings);
    free(s);
}

void sym_print_frame(FILE *out, const char *indent, uint64_t address, const struct sym_frame *f)
{
    const char *mod = f->module ? strrchr(f->module, '/') : NULL;
    mod = mod ? mod + 1 : f->module;
    fprintf(out, "%s[0x%016" PRIx64 "] ", indent, address);
    if (f->function)
        fputs(f->function, out);
    else if (mod)
        fprintf(out, "%s+0x%" PRIx64, mod, f->offset);
    else
        fputs("??", out);
    if (f->inlined)
        fputs(" [inlined]", out);
    if (f->file && f->line > 0)
        fprintf(out, " (%s:%d)", f->file, f->line);
    else if (f->file)
        fprintf(out, " (%s)", f->file);
    if (f->function && mod)
        fprintf(out, " %s", mod);
    fputc('\n', out);
}
