/* record_pagemap.c — which pages of a process are present, from
 * /proc/PID/pagemap: single entries (a fault's page) by pread, and whole
 * address spaces by the PAGEMAP_SCAN ioctl (Linux 6.7), which answers in
 * ranges, so a scan of hundreds of MB costs a few calls; on kernels
 * without it, by reading the entries of every mapping. */
#include "refset/record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* linux/fs.h of older headers lacks these (Linux 6.7 uapi). */
struct rec_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define REC_PAGEMAP_SCAN _IOWR('f', 16, struct rec_pm_scan_arg)
/* Where user space ends on x86-64 (47-bit; 5-level paging maps nothing
 * above it unless asked). */
#define REC_USER_END ((1ull << 47) - 4096)

int rec_pagemap_read(int fd, uint64_t addr, size_t n, uint64_t *out)
{
    size_t want = n * 8, got = 0;
    off_t off = (off_t)((addr >> REC_PAGE_SHIFT) * 8);
    while (got < want) {
        ssize_t r = pread(fd, (char *)out + got, want - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    memset((char *)out + got, 0, want - got);
    return 0;
}

static int push_region(rec_region **v, size_t *n, size_t *cap, uint64_t start, uint64_t end, uint64_t cat)
{
    if (*n > 0 && (*v)[*n - 1].end == start && (*v)[*n - 1].cat == cat) {
        (*v)[*n - 1].end = end;
        return 0;
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        rec_region *nv = realloc(*v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = (rec_region){start, end, cat};
    return 0;
}

static int scan_ioctl(int fd, rec_region **v, size_t *n, size_t *cap)
{
    uint64_t start = 0;
    const uint64_t want = REC_IS_PRESENT | REC_IS_SWAPPED;
    for (;;) {
        if (*cap - *n < 256) {
            size_t nc = *cap ? *cap * 2 : 4096;
            rec_region *nv = realloc(*v, nc * sizeof *nv);
            if (!nv)
                return -ENOMEM;
            *v = nv;
            *cap = nc;
        }
        struct rec_pm_scan_arg a = {
            .size = sizeof a,
            .start = start,
            .end = REC_USER_END,
            .vec = (uint64_t)(uintptr_t)(*v + *n),
            .vec_len = *cap - *n,
            .category_anyof_mask = want,
            .return_mask = want | REC_IS_FILE | REC_IS_PFNZERO | REC_IS_HUGE,
        };
        int r = ioctl(fd, REC_PAGEMAP_SCAN, &a);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        *n += (size_t)r;
        if (a.walk_end >= REC_USER_END || a.walk_end <= start || (size_t)r < a.vec_len)
            return 0;
        start = a.walk_end;
    }
}

static int scan_read(int fd, const rec_maps *m, rec_region **v, size_t *n, uint64_t zero_pfn, size_t *cap)
{
    uint64_t buf[4096];
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].skip)
            continue;
        for (uint64_t a = m->v[i].start; a < m->v[i].end;) {
            size_t k = (size_t)((m->v[i].end - a) >> REC_PAGE_SHIFT);
            if (k > 4096)
                k = 4096;
            int rc = rec_pagemap_read(fd, a, k, buf);
            if (rc < 0)
                return rc;
            for (size_t j = 0; j < k; j++, a += 1ull << REC_PAGE_SHIFT) {
                uint64_t e = buf[j], cat = 0;
                if (e & PM_PRESENT)
                    cat |= REC_IS_PRESENT;
                if (e & PM_SWAPPED)
                    cat |= REC_IS_SWAPPED;
                if (!cat)
                    continue;
                if (e & PM_FILE)
                    cat |= REC_IS_FILE;
                if ((e & PM_PRESENT) && zero_pfn && (e & PM_PFN_MASK) == zero_pfn)
                    cat |= REC_IS_PFNZERO;
                if ((rc = push_region(v, n, cap, a, a + (1ull << REC_PAGE_SHIFT), cat)) < 0)
                    return rc;
            }
        }
    }
    return 0;
}

int rec_pagemap_scan(int fd, const rec_maps *m, rec_region **v, size_t *n, size_t *cap, uint64_t zero_pfn,
                     bool *used_ioctl)
{
    *n = 0;
    if (*used_ioctl) {
        int rc = scan_ioctl(fd, v, n, cap);
        if (rc != -ENOTTY && rc != -EINVAL && rc != -EOPNOTSUPP && rc != -EFAULT)
            return rc;
        *used_ioctl = false;
        *n = 0;
    }
    return scan_read(fd, m, v, n, zero_pfn, cap);
}

void rec_pagemap_probe(uint64_t *zero_pfn, bool *pfns)
{
    *zero_pfn = 0;
    *pfns = false;
    long page = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    /* A page never written reads as the shared zero page once read, on
     * most kernels: some give every read of untouched anonymous memory a
     * frame of its own. That frame is freed by the munmap below and soon
     * holds another page, which would then pass for the zero page: left
     * out of the system view (the graph, Impact Size) while still in Size.
     * Only the zero page can back two pages of one private mapping that
     * were only read, so two such pages must show the same frame. */
    unsigned char *p =
        mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        uint64_t e[3];
        p[2 * page] = 1;
        (void)*(volatile unsigned char *)p;
        (void)*(volatile unsigned char *)(p + page);
        if (rec_pagemap_read(fd, (uint64_t)(uintptr_t)p, 3, e) == 0) {
            uint64_t z = e[0] & PM_PFN_MASK;
            if ((e[0] & PM_PRESENT) && (e[1] & PM_PRESENT) && z && (e[1] & PM_PFN_MASK) == z)
                *zero_pfn = z;
            *pfns = (e[2] & PM_PRESENT) && (e[2] & PM_PFN_MASK) != 0;
        }
        munmap(p, (size_t)page * 3);
    }
    close(fd);
}
