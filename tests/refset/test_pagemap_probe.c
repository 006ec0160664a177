/* test_pagemap_probe.c — the recorder's zero-page probe
 * (rec_pagemap_probe, src/refset/record_pagemap.c) against what the
 * kernel does here: the PFN it gives is the frame a read of untouched
 * anonymous memory maps in any mapping, and a written page's frame is
 * never it. A PFN taken from a frame of the probe's own (a kernel that
 * maps no zero page) marks a page that reuses that frame as the zero
 * page: out of the report's graph while in its Size. */
#include "refset/record.h"
#include "unit.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* The frames of n pages from p (0: not present). */
static void frames(int fd, const unsigned char *p, size_t n, uint64_t *pfn)
{
    uint64_t e[8];
    rec_pagemap_read(fd, (uint64_t)(uintptr_t)p, n, e);
    for (size_t i = 0; i < n; i++)
        pfn[i] = e[i] & PM_PRESENT ? e[i] & PM_PFN_MASK : 0;
}

int main(void)
{
    uint64_t zero_pfn = 1;
    bool pfns = false;
    rec_pagemap_probe(&zero_pfn, &pfns);
    if (!pfns) {
        CHECK("probe: no zero page without readable PFNs", zero_pfn == 0);
        printf("SKIP zero-page probe against the kernel: PFNs are not readable here (not root)\n");
        return failures;
    }
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    long page = sysconf(_SC_PAGESIZE);
    /* Another mapping than the probe's, made after it: reads of two
     * untouched pages, a write to a third. Several rounds, so a frame the
     * probe freed has its chances of coming back. */
    bool read_ok = true, written_ok = true, consistent = true;
    for (int round = 0; round < 64; round++) {
        unsigned char *p =
            mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        p[2 * page] = 1;
        (void)*(volatile unsigned char *)p;
        (void)*(volatile unsigned char *)(p + page);
        uint64_t f[3];
        frames(fd, p, 3, f);
        bool shared_zero = f[0] && f[0] == f[1];
        if (zero_pfn)
            read_ok &= f[0] == zero_pfn && f[1] == zero_pfn;
        else
            consistent &= !shared_zero; /* the probe would have found that zero page */
        written_ok &= f[2] && f[2] != zero_pfn;
        munmap(p, (size_t)page * 3);
    }
    close(fd);
    CHECK("probe: reads of untouched memory elsewhere map the zero page it gives", read_ok);
    CHECK("probe: no zero page given where reads of untouched memory share none", consistent);
    CHECK("probe: a written page's frame is never the zero page", written_ok);
    return failures;
}
