/* vm_scan.c — attributes every byte of the address space to a category by
 * laying the range table (vm.h) over the kernel's /proc/self/smaps.
 *
 * Each kernel mapping (VMA) is cut into pieces at the table's range
 * boundaries. A piece the table knows takes its range's category. A piece
 * it does not know is classified by origin:
 *   - named by the kernel: [heap] -> heap, [stack] -> stacks, [vdso] and
 *     friends -> other;
 *   - a file that has an executable mapping (an ELF image the loader
 *     mapped) -> code, or memtrail for our own library; other files -> files;
 *   - anonymous: a glibc arena (a 64 MiB-aligned heap_info header, then the
 *     PROT_NONE rest of its 64 MiB window) or glibc mmapped blocks (a chunk
 *     header marked IS_MMAPPED whose sizes add up to whole pages) -> heap;
 *     right after an image -> its bss (code / memtrail); else other.
 * Memory is read only with process_vm_readv and only in resident pages, so
 * a mapping another thread unmaps meanwhile cannot fault the agent.
 *
 * Resident bytes are smaps' Rss when one category gets the whole VMA and a
 * count of present pages in /proc/self/pagemap when it is split.
 * Everything here is static and async-signal-safe (read, pread,
 * process_vm_readv, mincore): the crash report uses it. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/allocator.h"
#include "agent/counters.h"
#include "agent/vm.h"

#define PAGE 4096u
#define HEAP_MAX ((uintptr_t)64 << 20) /* glibc's per-thread heap window (64-bit) */
#define MAX_IMAGES 2048
#define MAX_WINDOWS 512

/* ---- reading /proc files line by line, without malloc ------------------ */

typedef struct reader {
    int fd;
    char *buf;
    size_t cap, start, end;
    int eof;
} reader;

static int reader_open(reader *r, const char *path, char *buf, size_t cap)
{
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    r->buf = buf;
    r->cap = cap;
    r->start = r->end = 0;
    r->eof = 0;
    return r->fd;
}

/* The next line without its newline, NUL-terminated in place. An overlong
 * line is cut at the buffer size. Returns NULL at the end. */
static char *next_line(reader *r)
{
    for (;;) {
        char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
        if (nl || (r->eof && r->end > r->start) || r->end - r->start == r->cap - 1) {
            char *line = r->buf + r->start;
            char *stop = nl ? nl : r->buf + r->end;
            *stop = '\0';
            r->start = nl ? (size_t)(nl - r->buf) + 1 : r->end;
            return line;
        }
        if (r->eof)
            return NULL;
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
        ssize_t n;
        do
            n = read(r->fd, r->buf + r->end, r->cap - 1 - r->end);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
            r->eof = 1;
        else
            r->end += (size_t)n;
    }
}

static uint64_t parse_hex(const char **s)
{
    uint64_t v = 0;
    for (;; (*s)++) {
        char c = **s;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uint64_t)(c - 'a' + 10);
        else
            return v;
    }
}

static uint64_t parse_dec(const char **s)
{
    uint64_t v = 0;
    while (**s == ' ' || **s == '\t')
        (*s)++;
    for (; **s >= '0' && **s <= '9'; (*s)++)
        v = v * 10 + (uint64_t)(**s - '0');
    return v;
}

/* One line of maps/smaps that starts a VMA. */
typedef struct vma {
    uintptr_t s, e;
    char perms[5];
    uint64_t dev, ino;
    const char *path; /* "" for anonymous */
    int64_t rss;
} vma;

static int parse_vma(const char *line, vma *v)
{
    const char *p = line;
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
        return 0; /* a field line ("Rss:   4 kB") */
    v->s = parse_hex(&p);
    if (*p++ != '-')
        return 0;
    v->e = parse_hex(&p);
    if (*p++ != ' ' || strlen(p) < 5)
        return 0;
    memcpy(v->perms, p, 4);
    v->perms[4] = '\0';
    p += 5;
    parse_hex(&p); /* offset */
    p++;
    uint64_t major = parse_hex(&p);
    p++;
    v->dev = major << 32 | parse_hex(&p);
    v->ino = parse_dec(&p);
    while (*p == ' ')
        p++;
    v->path = p;
    v->rss = 0;
    return 1;
}

/* ---- scan state (static: the caller serialises) ------------------------- */

static struct {
    char rbuf[65536];
    uint64_t pagemap[512];
    unsigned char vec[8192];
    char page[PAGE];
    struct {
        uint64_t dev, ino;
    } images[MAX_IMAGES];
    int nimages;
    uint64_t self_dev, self_ino;
    uintptr_t windows[MAX_WINDOWS];
    int nwindows;
    uintptr_t image_end; /* end of the last image mapping, for its bss */
    int image_cat;
    uintptr_t stack_ok; /* start of the stack range whose guard was seen PROT_NONE */
    int pagemap_fd;
    int have_table;
    mt_vm_sum *out;
    int ncat;
    const vma *v;
    int64_t piece_res[MT_NCAT]; /* resident bytes of the current VMA's pieces, by category */
} sc;

static int is_image(uint64_t dev, uint64_t ino)
{
    for (int i = 0; i < sc.nimages; i++)
        if (sc.images[i].dev == dev && sc.images[i].ino == ino)
            return 1;
    return 0;
}

/* Pass 1 over /proc/self/maps: the files with an executable mapping, and
 * which of them is our own library. */
static void find_images(void)
{
    reader r;
    sc.nimages = 0;
    sc.self_ino = 0;
    if (reader_open(&r, "/proc/self/maps", sc.rbuf, sizeof sc.rbuf) < 0)
        return;
    uintptr_t self = (uintptr_t)&find_images;
    for (char *line; (line = next_line(&r));) {
        vma v;
        if (!parse_vma(line, &v) || v.ino == 0 || v.perms[2] != 'x')
            continue;
        if (self >= v.s && self < v.e) {
            sc.self_dev = v.dev;
            sc.self_ino = v.ino;
        }
        if (!is_image(v.dev, v.ino) && sc.nimages < MAX_IMAGES) {
            sc.images[sc.nimages].dev = v.dev;
            sc.images[sc.nimages].ino = v.ino;
            sc.nimages++;
        }
    }
    close(r.fd);
}

/* ---- reading our own memory safely --------------------------------------- */

static int read_mem(uintptr_t addr, void *dst, size_t n)
{
    struct iovec local = {dst, n}, remote = {(void *)addr, n};
    return syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL) == (long)n ? 0 : -1;
}

static int resident_page(uintptr_t addr)
{
    unsigned char v = 0;
    return mincore((void *)(addr & ~(uintptr_t)(PAGE - 1)), PAGE, &v) == 0 && (v & 1);
}

/* A glibc heap_info at p, the start of a 64 MiB-aligned per-thread heap:
 * its arena pointer lies just past a heap_info (its own or its arena's
 * first heap's), and its sizes fit the window. */
static int heap_info_at(uintptr_t p)
{
    uint64_t h[4]; /* ar_ptr, prev, size, mprotect_size */
    if (p % HEAP_MAX || !resident_page(p) || read_mem(p, h, sizeof h) < 0)
        return 0;
    return h[0] && (h[0] & 7) == 0 && (h[0] & (HEAP_MAX - 1)) < 256 && h[1] % HEAP_MAX == 0 && h[2] > 0 &&
           h[2] <= HEAP_MAX && h[3] >= h[2] && h[3] <= HEAP_MAX;
}

static int in_window(uintptr_t p, uintptr_t *window_end)
{
    for (int i = 0; i < sc.nwindows; i++)
        if (p >= sc.windows[i] && p - sc.windows[i] < HEAP_MAX) {
            *window_end = sc.windows[i] + HEAP_MAX;
            return 1;
        }
    return 0;
}

/* A glibc mmapped block's mapping starting at m (within [m, limit)): the
 * chunk header sits at m, or, for an aligned block, at the offset its
 * prev_size says, in the first page glibc wrote. Returns the mapping's
 * end, or 0. */
static uintptr_t mmapped_chunk_at(uintptr_t m, uintptr_t limit)
{
    uint64_t w[2];
    if (resident_page(m) && read_mem(m, w, sizeof w) == 0 && w[0] == 0 && (w[1] & 7) == 2) {
        uint64_t len = w[1] & ~(uint64_t)7;
        return len && len % PAGE == 0 && len <= limit - m ? m + len : 0;
    }
    /* Aligned: the pages before the chunk were never touched. */
    size_t pages = (limit - m) / PAGE;
    if (pages > sizeof sc.vec)
        pages = sizeof sc.vec;
    if (pages == 0 || mincore((void *)m, pages * PAGE, sc.vec) != 0)
        return 0;
    size_t i = 0;
    while (i < pages && !(sc.vec[i] & 1))
        i++;
    if (i == pages || read_mem(m + i * PAGE, sc.page, PAGE) < 0)
        return 0;
    for (size_t off = 0; off + 16 <= PAGE; off += 16) {
        uint64_t prev, size;
        memcpy(&prev, sc.page + off, 8);
        memcpy(&size, sc.page + off + 8, 8);
        uint64_t len = prev + (size & ~(uint64_t)7);
        if (prev == i * PAGE + off && (size & 7) == 2 && len % PAGE == 0 && len <= limit - m)
            return m + len;
    }
    return 0;
}

/* ---- attributing pieces ------------------------------------------------- */

/* The shared zero page's frame number (0: unknown). A private anonymous
 * page that was only read maps it: pagemap calls it present, smaps' Rss
 * does not count it (it is nobody's memory). Frame numbers show only to
 * a privileged reader; otherwise pieces are capped below (emit_vma_end). */
static uint64_t zero_pfn(void)
{
    static uint64_t pfn = UINT64_MAX;
    if (pfn != UINT64_MAX || sc.pagemap_fd < 0)
        return pfn == UINT64_MAX ? 0 : pfn;
    pfn = 0;
    void *m = (void *)syscall(SYS_mmap, NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    (void)*(volatile const char *)m;
    uint64_t ent;
    if (pread(sc.pagemap_fd, &ent, sizeof ent, (off_t)((uintptr_t)m / PAGE * 8)) == sizeof ent && (ent >> 63))
        pfn = ent & (((uint64_t)1 << 55) - 1);
    syscall(SYS_munmap, m, PAGE);
    return pfn;
}

/* Without pagemap (no descriptor to spare at the descriptor limit: the
 * report then has one, for smaps): mincore's residency. It also counts a
 * file's pages in the page cache that this process has not mapped, and
 * the zero page; emit_vma_end scales the pieces down to the VMA's Rss. */
static int64_t resident_by_mincore(uintptr_t s, uintptr_t e)
{
    unsigned char *vec = (unsigned char *)sc.pagemap;
    const size_t most = sizeof sc.pagemap;
    int64_t n = 0;
    s &= ~(uintptr_t)(PAGE - 1);
    for (uintptr_t p = s; p < e;) {
        size_t pages = (e - p + PAGE - 1) / PAGE;
        if (pages > most)
            pages = most;
        if (mincore((void *)p, pages * PAGE, vec) != 0)
            break;
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
        p += pages * PAGE;
    }
    return n * PAGE;
}

static int64_t present_bytes(uintptr_t s, uintptr_t e)
{
    int64_t n = 0;
    if (sc.pagemap_fd < 0)
        return resident_by_mincore(s, e);
    uint64_t zero = zero_pfn();
    for (uintptr_t p = s; p < e;) {
        size_t want = (e - p) / PAGE;
        if (want > sizeof sc.pagemap / 8)
            want = sizeof sc.pagemap / 8;
        ssize_t got = pread(sc.pagemap_fd, sc.pagemap, want * 8, (off_t)(p / PAGE * 8));
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got / 8; i++) {
            uint64_t ent = sc.pagemap[i];
            n += (int64_t)(ent >> 63) && !(zero && (ent & (((uint64_t)1 << 55) - 1)) == zero);
        }
        p += (uintptr_t)(got / 8) * PAGE;
    }
    return n * PAGE;
}

static void emit(unsigned cat, uintptr_t s, uintptr_t e)
{
    const vma *v = sc.v;
    if (e <= s)
        return;
    if ((int)cat >= sc.ncat)
        cat = MT_CAT_OTHER;
    mt_vm_sum *o = &sc.out[cat];
    o->reserved += (int64_t)(e - s);
    if (strncmp(v->perms, "---", 3) != 0)
        o->committed += (int64_t)(e - s);
    /* pagemap only where a VMA with resident pages is split; the pieces'
     * figures are settled once the whole VMA is done (emit_vma_end). */
    if ((s == v->s && e == v->e) || v->rss == 0)
        o->resident += v->rss;
    else
        sc.piece_res[cat] += present_bytes(s, e);
    o->mappings++;
}

/* The pieces of a split VMA never hold more than its Rss (pagemap may
 * see pages Rss does not count, as the zero page without frame numbers,
 * or pages faulted in between the two reads): scaled down to it. */
static void emit_vma_end(void)
{
    int64_t sum = 0, rss = sc.v->rss, given = 0;
    int big = -1;
    for (int c = 0; c < sc.ncat && c < MT_NCAT; c++) {
        sum += sc.piece_res[c];
        if (big < 0 || sc.piece_res[c] > sc.piece_res[big])
            big = c;
    }
    if (sum <= rss) {
        for (int c = 0; c < sc.ncat && c < MT_NCAT; c++)
            sc.out[c].resident += sc.piece_res[c];
    } else {
        for (int c = 0; c < sc.ncat && c < MT_NCAT; c++) {
            int64_t part = (int64_t)((__int128)sc.piece_res[c] * rss / sum) / PAGE * PAGE;
            sc.out[c].resident += part;
            given += part;
        }
        if (big >= 0)
            sc.out[big].resident += rss - given; /* what rounding left */
    }
    memset(sc.piece_res, 0, sizeof sc.piece_res);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A piece [s, e) of VMA v that the table does not know. */
static void classify_unknown(uintptr_t s, uintptr_t e)
{
    const vma *v = sc.v;
    const char *path = v->path;
    if (v->ino != 0) {
        if (is_image(v->dev, v->ino)) {
            int self = v->dev == sc.self_dev && v->ino == sc.self_ino;
            sc.image_cat = self ? MT_CAT_OVERHEAD : MT_CAT_CODE;
            sc.image_end = e;
            emit((unsigned)sc.image_cat, s, e);
        } else {
            emit(MT_CAT_FILES, s, e);
        }
        return;
    }
    if (strcmp(path, "[heap]") == 0 || starts_with(path, "[anon:glibc: malloc"))
        emit(MT_CAT_HEAP, s, e);
    else if (strcmp(path, "[stack]") == 0 || starts_with(path, "[anon:glibc: pthread stack"))
        emit(MT_CAT_STACKS, s, e);
    else if (path[0] && !starts_with(path, "[anon:"))
        emit(MT_CAT_OTHER, s, e); /* [vdso], [vvar], [vsyscall], deleted shared memory, ... */
    else {
        int readable = v->perms[0] == 'r';
        int glibc = mt_alloc_kind == MT_ALLOC_GLIBC; /* arenas and chunk headers are glibc's */
        for (uintptr_t p = s; p < e;) {
            uintptr_t q;
            if (in_window(p, &q)) {
                q = q < e ? q : e;
                emit(MT_CAT_HEAP, p, q);
                p = q;
            } else if (glibc && readable && sc.nwindows < MAX_WINDOWS && heap_info_at(p)) {
                sc.windows[sc.nwindows++] = p;
            } else if (glibc && readable && (q = mmapped_chunk_at(p, e)) != 0) {
                emit(MT_CAT_HEAP, p, q);
                p = q;
            } else {
                /* An image's bss follows its last file mapping. */
                emit(p == v->s && p == sc.image_end ? (unsigned)sc.image_cat : MT_CAT_OTHER, p, e);
                break;
            }
        }
    }
}

/* A piece [s, e) of the table's range r. */
static void classify_known(const mt_vm_range *r, uintptr_t s, uintptr_t e)
{
    if ((r->flags & MT_VM_STACK) && r->guard) {
        /* Stacks glibc freed from its cache leave stale ranges: trust one
         * only when its guard is PROT_NONE and directly below its stack. */
        uintptr_t guard_end = r->start + r->guard;
        if (s < guard_end) {
            if (strncmp(sc.v->perms, "---", 3) == 0 && sc.v->e == guard_end)
                sc.stack_ok = r->start;
            else
                sc.stack_ok = 0;
        }
        if (sc.stack_ok != r->start) {
            classify_unknown(s, e);
            return;
        }
    }
    emit(r->cat, s, e);
}

static void classify_vma(const vma *v)
{
    sc.v = v;
    uintptr_t p = v->s;
    size_t n = sc.have_table ? mt_vm_count : 0;
    for (size_t i = n ? mt_vm_first_after(v->s) : 0; i < n && mt_vm_table[i].start < v->e; i++) {
        const mt_vm_range *r = &mt_vm_table[i];
        if (r->start > p)
            classify_unknown(p, r->start);
        uintptr_t s = r->start > p ? r->start : p, e = r->end < v->e ? r->end : v->e;
        classify_known(r, s, e);
        p = e;
    }
    if (p < v->e)
        classify_unknown(p, v->e);
    emit_vma_end();
}

static int64_t status_kb(const char *key)
{
    reader r;
    int64_t v = 0;
    if (reader_open(&r, "/proc/self/status", sc.rbuf, sizeof sc.rbuf) < 0)
        return 0;
    size_t k = strlen(key);
    for (char *line; (line = next_line(&r));)
        if (strncmp(line, key, k) == 0) {
            const char *p = line + k;
            v = (int64_t)parse_dec(&p) * 1024;
            break;
        }
    close(r.fd);
    return v;
}

void mt_vm_scan(mt_vm_sum *out, int ncat, mt_vm_process *proc, int in_signal)
{
    memset(out, 0, (size_t)ncat * sizeof *out);
    memset(proc, 0, sizeof *proc);
    sc.out = out;
    sc.ncat = ncat;
    sc.nwindows = 0;
    sc.image_end = 0;
    sc.stack_ok = 0;
    find_images();
    reader r;
    if (reader_open(&r, "/proc/self/smaps", sc.rbuf, sizeof sc.rbuf) < 0)
        return;
    sc.pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    /* In a signal handler the interrupted code may hold the table: without
     * it every piece is classified by origin, which still adds up. */
    if (mt_t.vm_locked) /* a handler on the thread that holds the table */
        sc.have_table = 0;
    else if (in_signal)
        sc.have_table = mt_vm_trylock(1000000) == 0;
    else {
        mt_vm_lock();
        sc.have_table = 1;
    }
    vma cur;
    int have = 0;
    static char path[MT_PATH_MAX];
    for (char *line; (line = next_line(&r));) {
        vma v;
        if (parse_vma(line, &v)) {
            if (have)
                classify_vma(&cur);
            cur = v;
            /* The line buffer is reused: keep the path. */
            size_t n = strlen(v.path);
            if (n >= sizeof path)
                n = sizeof path - 1;
            memcpy(path, v.path, n);
            path[n] = '\0';
            cur.path = path;
            have = 1;
            proc->reserved += (int64_t)(v.e - v.s);
            if (strncmp(v.perms, "---", 3) != 0)
                proc->committed += (int64_t)(v.e - v.s);
        } else if (have && strncmp(line, "Rss:", 4) == 0) {
            const char *p = line + 4;
            cur.rss = (int64_t)parse_dec(&p) * 1024;
            proc->rss += cur.rss;
        }
    }
    if (have)
        classify_vma(&cur);
    if (sc.have_table) {
        for (int i = 0; i < ncat && i < MT_NCAT; i++)
            out[i].peak_mapped = mt_vm_mapped_peak[i];
        mt_vm_unlock();
    }
    close(r.fd);
    if (sc.pagemap_fd >= 0)
        close(sc.pagemap_fd);
    proc->ok = have;
    proc->resident = proc->rss;
    proc->peak_rss = status_kb("VmHWM:");
}

/* The mapping of /proc/self/maps that holds addr, and how far below it the
 * address space is free or PROT_NONE (a thread's guard page, the gap the
 * main stack may grow into). Reads with a buffer on the caller's stack:
 * no malloc, no lock, async-signal-safe, safe inside another allocator's
 * start-up (pthread_getattr_np is none of these). */
int mt_vm_mapping_of(uintptr_t addr, mt_vm_span *out)
{
    char buf[2048];
    reader r;
    if (reader_open(&r, "/proc/self/maps", buf, sizeof buf) < 0)
        return -1;
    uintptr_t prev_end = 0, guard_lo = 0;
    int prev_none = 0, found = 0;
    char *line;
    while ((line = next_line(&r)) != NULL) {
        vma v;
        if (!parse_vma(line, &v))
            continue;
        if (addr - v.s < v.e - v.s) {
            out->lo = v.s;
            out->hi = v.e;
            out->below = prev_end;
            out->guard_lo = prev_none && prev_end == v.s ? guard_lo : v.s;
            found = 1;
            break;
        }
        prev_none = strncmp(v.perms, "---", 3) == 0;
        guard_lo = v.s;
        prev_end = v.e;
    }
    close(r.fd);
    return found ? 0 : -1;
}
