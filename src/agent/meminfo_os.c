/* meminfo_os.c — see meminfo_os.h.
 *
 * The cgroup is the process's v2 one ("0::PATH" in /proc/self/cgroup),
 * under /sys/fs/cgroup or, on a hybrid v1/v2 host, /sys/fs/cgroup/unified.
 * Its memory.max of "max" sets no limit: the machine's numbers stand then,
 * as they do where the files cannot be read (cgroup v1, no /sys). A
 * descriptor the program closed behind our back is opened again once. */
#include "agent/meminfo_os.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/allocator.h"
#include "agent/fdguard.h"
#include "common/out.h"
#include "common/safe_file.h"

enum { F_STATM, F_MEMINFO, F_CG_CURRENT, F_CG_HIGH, F_CG_MAX, F_COUNT };

static int fds[F_COUNT] = {-1, -1, -1, -1, -1};
static dev_t fd_dev[F_COUNT]; /* what each descriptor was opened on: a program */
static ino_t fd_ino[F_COUNT]; /* that closes it and reuses the number is not read */
static char paths[F_COUNT][512];
static long page_size = 4096;

/* The machine's MemTotal and MemAvailable and the cgroup's limits change
 * slowly, and /proc/meminfo is the dearest file to read: the kernel builds
 * its whole text each time, about 15 us, most of what a snapshot cost
 * before (SQLite's workload in bench/overhead.sh raises 386 events in
 * 0.8 s). So after a read that took d ns the next waits 1000 d (0.1% of
 * the time while a read takes under 1 ms), at least MACHINE_NS and at
 * most MACHINE_MAX_NS (one slow read on a loaded machine must not leave
 * the figures stale for long); snapshots in between repeat them. The
 * process's own figures and memory.current (the LIMIT check's) are read
 * on every call. */
#define MACHINE_NS 10000000ull
#define MACHINE_MAX_NS 1000000000ull
static uint64_t machine_next_ns; /* 0: read at the next call */
static uint64_t machine_load, machine_total, cg_high, cg_max;

/* Kept open for the process's life, so at a high number (safe_file.h):
 * the low numbers stay the program's, as they would be bare. */
static int open_ro(const char *path)
{
    int fd = path[0] ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    return fd >= 0 ? mt_file_fd_high(fd) : fd;
}

/* Whether fds[f] is still the file the agent opened. */
static int still_ours(int f)
{
    return mt_file_fd_is(fds[f], fd_dev[f], fd_ino[f]);
}

/* Opens paths[f] and keeps it in fds[f]; -1 then (or when it cannot be
 * opened). Under a descriptor limit too small to keep it out of the
 * program's way (safe_file.h), it is not kept: the descriptor is returned
 * for one read, and the caller closes it. */
static int open_file(int f)
{
    struct stat st;
    int fd = open_ro(paths[f]);
    if (fd >= 0 && !mt_file_fd_out_of_way(fd))
        return fd;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        fd_dev[f] = st.st_dev;
        fd_ino[f] = st.st_ino;
        __atomic_store_n(&fds[f], fd, __ATOMIC_RELEASE);
        mt_fd_keep(&fds[f]); /* fdguard.h */
    } else if (fd >= 0) {
        close(fd);
    }
    return -1;
}

/* The file's start into buf (NUL-terminated); its length, or -1. A
 * descriptor the program closed (and perhaps reused) is left to it, and
 * the file opened again. */
static ssize_t read_file(int f, char *buf, size_t cap)
{
    if (!paths[f][0])
        return -1;
    int once = -1;
    if (!still_ours(f)) {
        /* not ours (any more): never read through that number again */
        __atomic_store_n(&fds[f], -1, __ATOMIC_RELEASE);
        once = open_file(f);
    }
    int fd = once >= 0 ? once : fds[f];
    ssize_t n = fd >= 0 ? pread(fd, buf, cap - 1, 0) : -1;
    if (once >= 0)
        close(once);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* The decimal number at *p (spaces skipped), advancing p; 0 if none. */
static uint64_t number(const char **p)
{
    const char *s = *p;
    uint64_t v = 0;
    while (*s == ' ' || *s == '\t')
        s++;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (uint64_t)(*s++ - '0');
    *p = s;
    return v;
}

/* "max" (no limit) and unreadable files are 0. */
static uint64_t cgroup_value(int f)
{
    char buf[64];
    if (read_file(f, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
        return 0;
    const char *p = buf;
    return number(&p);
}

/* The value in kB of `key` (with its colon) in /proc/meminfo's text, in bytes. */
static uint64_t meminfo_field(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p)
        return 0;
    p += strlen(key);
    return number(&p) * 1024;
}

/* The cgroup v2 directory's file `name` into paths[f], if it can be opened. */
static int cgroup_file(int f, const char *dir, size_t dlen, const char *name)
{
    mt_out o;
    mt_out_init(&o, paths[f], sizeof paths[f], -1);
    mt_out_mem(&o, dir, dlen);
    mt_out_str(&o, name);
    if (o.len + 1 >= sizeof paths[f]) {
        paths[f][0] = '\0';
        return -1;
    }
    mt_out_cstr(&o);
    int once = open_file(f);
    if (once >= 0)
        close(once);
    else if (fds[f] < 0)
        paths[f][0] = '\0';
    return paths[f][0] ? 0 : -1;
}

static void find_cgroup(void)
{
    char buf[4096], dir[512];
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    const char *line = buf;
    if (strncmp(line, "0::", 3) != 0) {
        line = strstr(buf, "\n0::");
        if (!line)
            return;
        line++;
    }
    line += 3;
    size_t len = strcspn(line, "\n");
    static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
        mt_out o;
        mt_out_init(&o, dir, sizeof dir, -1);
        mt_out_str(&o, roots[r]);
        if (len > 1 || line[0] != '/')
            mt_out_mem(&o, line, len);
        if (o.len + 32 >= sizeof dir)
            return;
        if (cgroup_file(F_CG_CURRENT, dir, o.len, "/memory.current") == 0) {
            cgroup_file(F_CG_HIGH, dir, o.len, "/memory.high");
            cgroup_file(F_CG_MAX, dir, o.len, "/memory.max");
            return;
        }
    }
}

void mt_os_mem_open(void)
{
    int saved = errno;
    for (int f = 0; f < F_COUNT; f++) {
        int fd = still_ours(f) ? fds[f] : -1;            /* never a descriptor the program reused */
        __atomic_store_n(&fds[f], -1, __ATOMIC_RELEASE); /* before the close: fdguard.h */
        if (fd >= 0)
            close(fd);
        paths[f][0] = '\0';
    }
    machine_next_ns = 0;
    long ps = sysconf(_SC_PAGESIZE);
    page_size = ps > 0 ? ps : 4096;
    strcpy(paths[F_STATM], "/proc/self/statm");
    strcpy(paths[F_MEMINFO], "/proc/meminfo");
    for (int f = F_STATM; f <= F_MEMINFO; f++) {
        int once = open_file(f);
        if (once >= 0)
            close(once);
    }
    find_cgroup();
    errno = saved;
}

/* MemTotal - MemAvailable and MemTotal, or the cgroup's memory.high and
 * memory.max, into the statics above. buf: the caller's (one 4 KiB buffer
 * on the stack of whatever thread raised the event, as before). */
static void read_machine(char *buf, size_t cap)
{
    machine_load = machine_total = cg_high = cg_max = 0;
    if (paths[F_CG_CURRENT][0]) {
        cg_high = cgroup_value(F_CG_HIGH);
        cg_max = cgroup_value(F_CG_MAX);
    }
    if (!cg_max && read_file(F_MEMINFO, buf, cap) > 0) {
        uint64_t total = meminfo_field(buf, "MemTotal:"), avail = meminfo_field(buf, "MemAvailable:");
        machine_total = total;
        machine_load = total > avail ? total - avail : 0;
    }
}

void mt_os_mem_read(mt_os_mem *m, uint64_t now_ns)
{
    char buf[4096];
    memset(m, 0, sizeof *m);
    if (read_file(F_STATM, buf, sizeof buf) > 0) {
        const char *p = buf;
        number(&p);                                      /* size */
        m->rss = number(&p) * (uint64_t)page_size;       /* resident */
        number(&p), number(&p), number(&p);              /* shared, text, lib */
        m->committed = number(&p) * (uint64_t)page_size; /* data */
    }
    if (now_ns >= machine_next_ns) {
        uint64_t r0 = mt_clock_ns(CLOCK_MONOTONIC);
        read_machine(buf, sizeof buf);
        uint64_t wait = (mt_clock_ns(CLOCK_MONOTONIC) - r0) * 1000;
        wait = wait < MACHINE_NS ? MACHINE_NS : wait > MACHINE_MAX_NS ? MACHINE_MAX_NS : wait;
        machine_next_ns = r0 + wait;
    }
    if (paths[F_CG_CURRENT][0])
        m->cg_current = cgroup_value(F_CG_CURRENT);
    m->cg_high = cg_high;
    m->cg_max = cg_max;
    m->load = cg_max ? m->cg_current : machine_load;
    m->total = cg_max ? cg_max : machine_total;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        m->minflt = (uint64_t)ru.ru_minflt;
        m->majflt = (uint64_t)ru.ru_majflt;
    }
}

int mt_os_free_bytes(uint64_t *out)
{
    if (mt_alloc_kind != MT_ALLOC_GLIBC)
        return -ENOSYS;
    struct mallinfo2 mi = mallinfo2();
    *out = (uint64_t)mi.fordblks;
    return 0;
}
