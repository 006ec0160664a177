/* refset_prog — does known things to its memory and prints, for each, the
 * message the agent must send `memtrail refset record` (refset_agent.h),
 * from what the program itself knows (tests/agent/test_refset_agent.sh
 * compares them with what refset_listen received):
 *
 *     KIND pid addr len cat
 *
 * and "FN name addr" for the functions whose calls must show in the
 * frames. The truth for a malloc block the allocator mapped is the
 * difference between /proc/self/maps before and after its free: the
 * range around it that left (where that reading of a 1 MiB block is not
 * clean, the line says "? ?" for the range and another block is watched:
 * see free_watched). Output goes out with write(2) only (no
 * stdio buffers, no malloc of ours in between). Argument "exec-child":
 * the image an exec of itself starts (HELLO again, same pid); it exits 3.
 * Argument "close-fd": it closes the recorder's socket first; "threads":
 * only 4 threads mapping and unmapping at once; "big": only a 4 MiB
 * malloc and its free. */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE_UP(x) (((uintptr_t)(x) + 4095) & ~(uintptr_t)4095)

/* The categories (refset_event.h's enum mt_rs_category). */
enum { HEAP = 0, VIRTUALALLOC = 1, USERSTACK = 2, PFMAPPEDSECTION = 3, MAPFILE = 6 };

static void say(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (write(1, buf, (size_t)n) != n)
        _exit(90);
}

static void expect(const char *kind, uintptr_t addr, uintptr_t len, int cat)
{
    say("%s %d 0x%lx %lu %d\n", kind, (int)getpid(), (unsigned long)addr, (unsigned long)len, cat);
}

static void *must_map(void *p)
{
    if (p == MAP_FAILED) {
        say("mmap failed\n");
        _exit(91);
    }
    return p;
}

/* Calls whose return addresses must be among the frames: not inlined,
 * and with work after the call, so it is no tail call. */
static volatile uintptr_t sink;

__attribute__((noinline)) static void *rs_do_mmap(size_t len, int flags, int fd)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0);
    sink = (uintptr_t)p;
    return p;
}

static void *thread_fn(void *arg)
{
    (void)arg;
    pthread_attr_t a;
    void *bottom;
    size_t size;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &bottom, &size);
    pthread_attr_destroy(&a);
    expect("STACK", (uintptr_t)bottom, size, USERSTACK);
    return NULL;
}

__attribute__((noinline)) static void rs_start_thread(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, thread_fn, NULL) != 0)
        _exit(92);
    sink = 1;
    pthread_join(t, NULL);
}

/* ---- /proc/self/maps, without malloc ------------------------------------ */

#define MAX_RANGES 4096
typedef struct range {
    uintptr_t lo, hi;
} range;

static int read_maps(range *r)
{
    static char buf[1 << 20];
    int fd = open("/proc/self/maps", O_RDONLY), n = 0;
    size_t len = 0;
    ssize_t k;
    while ((k = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)k;
    close(fd);
    buf[len] = '\0';
    for (char *s = buf; *s && n < MAX_RANGES;) {
        char *end;
        r[n].lo = strtoul(s, &end, 16);
        r[n].hi = strtoul(end + 1, &end, 16);
        n++;
        s = strchr(end, '\n');
        if (!s)
            break;
        s++;
    }
    return n;
}

/* Joins the touching ranges of a sorted list in place; the new count. */
static int join_ranges(range *r, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else
            r[m++] = r[i];
    }
    return m;
}

/* The parts of the joined list a not covered by the joined list b, into
 * out (at most max of them); their count. */
static int ranges_minus(const range *a, int na, const range *b, int nb, range *out, int max)
{
    int k = 0, j = 0;
    for (int i = 0; i < na && k < max; i++) {
        uintptr_t lo = a[i].lo;
        while (j < nb && b[j].hi <= lo)
            j++;
        for (int jj = j; lo < a[i].hi && k < max; jj++) {
            if (jj >= nb || b[jj].lo >= a[i].hi) {
                out[k++] = (range){lo, a[i].hi};
                break;
            }
            if (b[jj].lo > lo)
                out[k++] = (range){lo, b[jj].lo};
            if (b[jj].hi > lo)
                lo = b[jj].hi;
        }
    }
    return k;
}

static range before[MAX_RANGES], after[MAX_RANGES];

/* Frees the block p of size bytes that glibc mapped for itself, and finds
 * the range its free unmapped from /proc/self/maps before and after. In
 * trace mode the agent's own thread maps and unmaps at the same time: the
 * kernel may place its mapping in the hole the free left, or a mapping
 * next to the block may leave with it. The observation is clean (returns
 * 1, the range in *lo, *len) only when no range was added, one range
 * left, and that range is the block's pages and no others: from the page
 * of p (glibc's and the agent's headers are smaller than a page) to the
 * end of the page holding the block's last byte. 0: not clean; -1: the
 * free unmapped nothing and nothing else changed (glibc did not map it). */
static int free_watched(void *p, size_t size, uintptr_t *lo, uintptr_t *len)
{
    int nb = join_ranges(before, read_maps(before));
    free(p);
    int na = join_ranges(after, read_maps(after));
    range gone[2], added[1];
    int nadded = ranges_minus(after, na, before, nb, added, 1),
        ngone = ranges_minus(before, nb, after, na, gone, 2);
    if (nadded == 0 && ngone == 0)
        return -1;
    uintptr_t first = (uintptr_t)p & ~(uintptr_t)4095, last = PAGE_UP((uintptr_t)p + size);
    if (nadded != 0 || ngone != 1 || gone[0].lo != first || gone[0].hi != last)
        return 0;
    *lo = gone[0].lo;
    *len = gone[0].hi - gone[0].lo;
    return 1;
}

/* A block glibc mapped, grown and shrunk by realloc (glibc mremaps it).
 * Its mapping: the page under the pointer (glibc's and the agent's
 * headers) to the end of the page-multiple size asked for, one page more
 * in all; the last free checks that against the maps. */
static uintptr_t block_start(const void *p)
{
    return (uintptr_t)p & ~(uintptr_t)4095;
}

static void resized(const char *old, size_t olen, const char *now, size_t len)
{
    uintptr_t o = block_start(old), n = block_start(now);
    if (n == o && len > olen)
        expect("BLOCK", o + olen, len - olen, HEAP);
    else if (n == o && len < olen)
        expect("BLOCK_FREE", o + len, olen - len, HEAP);
    else if (n != o) {
        expect("BLOCK_FREE", o, olen, HEAP);
        expect("BLOCK", n, len, HEAP);
    }
}

static void realloc_blocks(void)
{
    /* Above the threshold glibc raised to the 1 MiB block's size when it
     * was freed: mapped too. */
    size_t s1 = 2 << 20, s2 = 8 << 20, s3 = 512 << 10;
    char *c = malloc(s1);
    expect("BLOCK", block_start(c), s1 + 4096, HEAP);
    char *c2 = realloc(c, s2);
    resized(c, s1 + 4096, c2, s2 + 4096);
    char *c3 = realloc(c2, s3);
    resized(c2, s2 + 4096, c3, s3 + 4096);
    uintptr_t lo, len;
    /* Observed unclean (see free_watched), the range is the layout's (the
     * clean readings of the other blocks check that layout). */
    int seen = free_watched(c3, s3, &lo, &len);
    if (seen < 0 || (seen > 0 && (lo != block_start(c3) || len != s3 + 4096))) {
        say("the free of the reallocated block did not unmap [0x%lx, +%lu)\n", (unsigned long)block_start(c3),
            (unsigned long)(s3 + 4096));
        _exit(96);
    }
    lo = block_start(c3);
    len = s3 + 4096;
    expect("BLOCK_FREE", lo, len, HEAP);
}

/* A mapping made in a signal handler on an alternate stack: the hooks'
 * sends and stack walk are async-signal-safe. */
static void *volatile sig_map;
static char alt_stack[1 << 16];

static void on_usr1(int sig)
{
    (void)sig;
    sig_map = rs_do_mmap(8192, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    munmap(sig_map, 8192);
}

static void map_in_handler(void)
{
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack};
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigaltstack(&ss, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
    expect("MAP", (uintptr_t)must_map(sig_map), 8192, VIRTUALALLOC);
    expect("UNMAP", (uintptr_t)sig_map, 8192, 0);
}

/* "threads": 4 threads map and unmap 200 times each at once; every one of
 * their messages must arrive, each from its own thread. */
#define NTHREADS 4
#define ROUNDS 200

static void *mapper(void *arg)
{
    size_t pages = 1 + (size_t)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        void *p =
            must_map(mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        munmap(p, pages * 4096);
    }
    return NULL;
}

static int threads(void)
{
    pthread_t t[NTHREADS];
    expect("HELLO", 0, 0, 0);
    for (uintptr_t i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, mapper, (void *)i) != 0)
            return 97;
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    return 0;
}

/* ---- the scenario -------------------------------------------------------- */

static void exec_child(void)
{
    expect("HELLO", 0, 0, 0);
    void *p = must_map(rs_do_mmap(16384, MAP_PRIVATE | MAP_ANONYMOUS, -1));
    expect("MAP", (uintptr_t)p, 16384, VIRTUALALLOC);
    munmap(p, 16384);
    expect("UNMAP", (uintptr_t)p, 16384, 0);
    exit(3);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
        exec_child();
    if (argc > 1 && strcmp(argv[1], "threads") == 0)
        return threads();
    if (argc > 1 && strcmp(argv[1], "big") == 0) { /* one 4 MiB block, nothing else */
        expect("HELLO", 0, 0, 0);
        char *p = malloc(4 << 20);
        memset(p, 3, 4 << 20);
        free(p);
        return 0;
    }
    expect("HELLO", 0, 0, 0);
    /* "close-fd": the program closes the recorder's socket unknowingly
     * (as a daemon closing every descriptor would): page events stop, the
     * program goes on. */
    const char *o = getenv("MEMTRAIL_OPTIONS"), *at = o ? strstr(o, "refset_fd=") : NULL;
    if (argc > 1 && strcmp(argv[1], "close-fd") == 0 && at)
        close(atoi(at + strlen("refset_fd=")));
    say("FN rs_do_mmap 0x%lx\n", (unsigned long)(uintptr_t)rs_do_mmap);
    say("FN rs_start_thread 0x%lx\n", (unsigned long)(uintptr_t)rs_start_thread);

    /* 1 MiB, half of it unmapped, four pages discarded, then grown. */
    char *a = must_map(rs_do_mmap(1 << 20, MAP_PRIVATE | MAP_ANONYMOUS, -1));
    expect("MAP", (uintptr_t)a, 1 << 20, VIRTUALALLOC);
    memset(a, 1, 1 << 20);
    munmap(a + (512 << 10), 512 << 10);
    expect("UNMAP", (uintptr_t)a + (512 << 10), 512 << 10, 0);
    madvise(a, 4 * 4096, MADV_DONTNEED);
    expect("DISCARD", (uintptr_t)a, 4 * 4096, 0);
    /* MADV_FREE's pages stay until the kernel reclaims them (the
     * recorder's scans see that): no message, as for a non-discard. */
    madvise(a + 8 * 4096, 2 * 4096, MADV_FREE);
    madvise(a, 4096, MADV_WILLNEED); /* no discard: no message */
    char *q = must_map(mremap(a, 512 << 10, 2 << 20, MREMAP_MAYMOVE));
    if (q == a) {
        expect("MAP", (uintptr_t)a + (512 << 10), (2 << 20) - (512 << 10), VIRTUALALLOC);
    } else {
        expect("UNMAP", (uintptr_t)a, 512 << 10, 0);
        expect("MAP", (uintptr_t)q, 2 << 20, VIRTUALALLOC);
    }
    /* MAP_FIXED over the middle of it: what was there goes first. */
    char *fx = must_map(mmap(q + 65536, 16384, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    expect("UNMAP", (uintptr_t)fx, 16384, 0);
    expect("MAP", (uintptr_t)fx, 16384, VIRTUALALLOC);
    munmap(q, 2 << 20);
    expect("UNMAP", (uintptr_t)q, 2 << 20, 0);

    /* A block glibc maps for itself (1 MiB is over its mmap threshold).
     * An unclean observation (see free_watched) is said as "? ?" for the
     * range, and the test takes any range there; another block, a little
     * larger (glibc raised its threshold to the last one's size), is
     * watched until one observation is clean. */
    for (int attempt = 0;; attempt++) {
        if (attempt == 10) {
            say("the free of a 1 MiB block never unmapped one range around it (10 tries)\n");
            return 93;
        }
        size_t size = (1 << 20) + (size_t)attempt * 8192;
        char *b = malloc(size);
        memset(b, 2, size);
        uintptr_t lo, len;
        int seen = free_watched(b, size, &lo, &len);
        if (seen < 0) {
            say("the free of a 1 MiB block unmapped nothing\n");
            return 93;
        }
        if (seen > 0) {
            expect("BLOCK", lo, len, HEAP);
            expect("BLOCK_FREE", lo, len, HEAP);
            break;
        }
        say("BLOCK %d ? ? %d\nBLOCK_FREE %d ? ? %d\n", (int)getpid(), HEAP, (int)getpid(), HEAP);
    }
    malloc_trim(0);
    expect("TRIM", 0, 0, 0);
    realloc_blocks();

    rs_start_thread();
    map_in_handler();

    char *s = must_map(rs_do_mmap(65536, MAP_SHARED | MAP_ANONYMOUS, -1));
    expect("MAP", (uintptr_t)s, 65536, PFMAPPEDSECTION);
    munmap(s, 65536);
    expect("UNMAP", (uintptr_t)s, 65536, 0);

    int fd = open("/proc/self/exe", O_RDONLY);
    char *f = must_map(mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0));
    close(fd);
    expect("MAP", (uintptr_t)f, 8192, MAPFILE);
    munmap(f, 8192);
    expect("UNMAP", (uintptr_t)f, 8192, 0);

    /* The program's own break: 64 KiB more, then back. */
    uintptr_t brk0 = (uintptr_t)sbrk(65536);
    expect("MAP", PAGE_UP(brk0), PAGE_UP(brk0 + 65536) - PAGE_UP(brk0), HEAP);
    sbrk(-65536);
    expect("UNMAP", PAGE_UP(brk0), PAGE_UP(brk0 + 65536) - PAGE_UP(brk0), 0);

    pid_t c = fork();
    if (c == 0) {
        void *p = must_map(rs_do_mmap(65536, MAP_PRIVATE | MAP_ANONYMOUS, -1));
        expect("MAP", (uintptr_t)p, 65536, VIRTUALALLOC);
        munmap(p, 65536);
        expect("UNMAP", (uintptr_t)p, 65536, 0);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 94;

    execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
    say("exec failed\n");
    return 95;
}
