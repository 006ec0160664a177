/* rs_release.c — pages leaving the reference set, each way at a
 * known moment: 8 MiB mapped and written, then munmap'd; 8 MiB written,
 * then madvise(MADV_DONTNEED); 8 MiB written and kept until exit. Around
 * each release it prints "<WHAT> <ns before> <ns after>" (CLOCK_MONOTONIC),
 * and "EXIT <ns>" just before it exits, so the test can ask the report for
 * the reference set on either side of each moment. argv[1]: milliseconds
 * between steps (default 300). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char *written(const char *name)
{
    char *p = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, 8 * MIB, MADV_NOHUGEPAGE);
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < 8 * MIB; i += (size_t)page)
        p[i] = 1;
    printf("RANGE %s %#lx %d\n", name, (unsigned long)(uintptr_t)p, 8 * MIB);
    return p;
}

int main(int argc, char **argv)
{
    useconds_t step = (useconds_t)(argc > 1 ? atol(argv[1]) : 300) * 1000;
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *a = written("unmapped");
    usleep(step);
    uint64_t t = now_ns();
    munmap(a, 8 * MIB);
    printf("MUNMAP %llu %llu\n", (unsigned long long)t, (unsigned long long)now_ns());
    usleep(step);
    char *b = written("discarded");
    usleep(step);
    t = now_ns();
    madvise(b, 8 * MIB, MADV_DONTNEED);
    printf("DONTNEED %llu %llu\n", (unsigned long long)t, (unsigned long long)now_ns());
    usleep(step);
    written("kept");
    usleep(step);
    printf("EXIT %llu\n", (unsigned long long)now_ns());
    return 0;
}
