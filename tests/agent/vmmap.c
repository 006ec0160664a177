/* vmmap: maps, partially unmaps, remaps, protects, discards and touches
 * known numbers of pages in known categories, writes a report, and prints
 * what each category must show ("expect CATEGORY reserved committed
 * resident"), from its own ledger of what it did. The kernel's own RSS is
 * printed around the report ("rss_before", "rss_after") so the report's
 * process line can be checked against it.
 * Usage: vmmap REPORT_PATH */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrail.h"

#define PG 4096L

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void touch(char *p, long first, long n)
{
    for (long i = first; i < first + n; i++)
        p[i * PG] = (char)(i + 1);
}

static long rss_now(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Rss: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;

    /* vm.anon: 100 pages; touch 0..39; unmap 10..19; protect 20..29
     * (touched, so still resident, no longer committed); discard 30..34;
     * move the last 5 pages with mremap, growing them to 15, and touch 3. */
    if (mt_tag_push("vm.anon") != 0)
        die("mt_tag_push");
    char *a = mmap(NULL, 100 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        die("mmap");
    touch(a, 0, 40);
    if (munmap(a + 10 * PG, 10 * PG) != 0)
        die("munmap");
    if (mprotect(a + 20 * PG, 10 * PG, PROT_NONE) != 0)
        die("mprotect");
    if (madvise(a + 30 * PG, 5 * PG, MADV_DONTNEED) != 0)
        die("madvise");
    char *b = mremap(a + 95 * PG, 5 * PG, 15 * PG, MREMAP_MAYMOVE);
    if (b == MAP_FAILED)
        die("mremap");
    touch(b, 0, 3);
    mt_tag_pop();
    /* reserved: 10 + 75 (pages 20..94) + 15; committed: minus the 10 protected;
     * resident: 0..9, 20..29, 35..39, 3 in the moved block */
    printf("expect vm.anon %ld %ld %ld\n", 100 * PG, 90 * PG, (10 + 10 + 5 + 3) * PG);

    /* vm.file: a private writable mapping of a 16-page file; writing 6
     * pages copies them (no read fault-around, so exactly 6 resident). */
    char tmpl[] = "/tmp/vmmap.XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0 || ftruncate(fd, 16 * PG) != 0)
        die("temp file");
    unlink(tmpl);
    mt_tag_push("vm.file");
    char *f = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (f == MAP_FAILED)
        die("mmap file");
    mt_tag_pop();
    close(fd);
    touch(f, 2, 6);
    printf("expect vm.file %ld %ld %ld\n", 16 * PG, 16 * PG, 6 * PG);

    /* Untagged: 8 pages go to "mmap", touch 0..2; then a MAP_FIXED mapping
     * under vm.fixed replaces pages 2..5 and touches one of them. Nothing
     * else in this program maps memory through mmap (glibc's malloc and
     * stdio use their own internal calls, which count as heap). */
    char *u = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (u == MAP_FAILED)
        die("mmap untagged");
    touch(u, 0, 3);
    mt_tag_push("vm.fixed");
    char *x =
        mmap(u + 2 * PG, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (x != u + 2 * PG)
        die("mmap fixed");
    mt_tag_pop();
    touch(x, 3, 1);
    printf("expect vm.fixed %ld %ld %ld\n", 4 * PG, 4 * PG, 1 * PG);
    printf("expect mmap %ld %ld %ld\n", 4 * PG, 4 * PG, 2 * PG);

    /* vm.brk: the program's own use of the break. */
    mt_tag_push("vm.brk");
    char *old = sbrk(0);
    char *got = sbrk(6 * PG);
    mt_tag_pop();
    if (got == (void *)-1)
        die("sbrk");
    uintptr_t lo = ((uintptr_t)old + PG - 1) & ~(uintptr_t)(PG - 1);
    uintptr_t hi = ((uintptr_t)old + 6 * PG + PG - 1) & ~(uintptr_t)(PG - 1);
    for (uintptr_t p = lo; p < lo + 2 * PG; p += PG)
        *(volatile char *)p = 1;
    printf("expect vm.brk %ld %ld %ld\n", (long)(hi - lo), (long)(hi - lo), 2 * PG);

    /* Built-in categories are not tags. */
    printf("builtin_tag %d %d\n", mt_tag_push("heap"), mt_tag_push("memtrail"));

    /* A warm-up report first: the agent's first scan touches its own
     * buffers. Then the kernel's RSS around the real one. */
    if (mt_report_write(argv[1]) != 0)
        die("mt_report_write");
    long before = rss_now();
    if (mt_report_write(argv[1]) != 0)
        die("mt_report_write");
    long after = rss_now();
    printf("rss_before %ld\nrss_after %ld\n", before, after);
    return 0;
}
