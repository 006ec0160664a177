/* rs_seed.c — the seed's reference-set example, on purpose: 10 MB
 * referenced before the viewport and kept past it (Persistent), 10 MB
 * referenced inside it and kept (Impacting), 10 MB referenced and released
 * inside it (Transient). Prints "T0 <ns>" and "T1 <ns>" (CLOCK_MONOTONIC)
 * around the viewport and "RANGE <name> <addr> <bytes>" for each region, so
 * the test knows the truth without trusting the recorder.
 *
 * Everything else the program touches inside the viewport (its stack,
 * stdout's buffer) was touched before T0, so the viewport holds only the
 * three regions' pages. argv[1]: how the transient region goes away:
 * munmap (default) or dontneed. argv[2]: milliseconds to wait after it and
 * before T1 (default 300: several scan intervals, so a release seen by a
 * scan also falls inside the viewport). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MB (1024 * 1024)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static char *region(const char *name, size_t bytes)
{
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    /* No transparent huge pages: one fault per page, like the seed's 4 KB pages. */
    madvise(p, bytes, MADV_NOHUGEPAGE);
    printf("RANGE %s %#lx %zu\n", name, (unsigned long)(uintptr_t)p, bytes);
    return p;
}

static void touch(char *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < bytes; i += (size_t)page)
        p[i] = 1;
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "munmap";
    long settle = argc > 2 ? atol(argv[2]) : 300;
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *persistent = region("persistent", 10 * MB);
    char *impacting = region("impacting", 10 * MB);
    char *transient = region("transient", 10 * MB);
    touch(persistent, 10 * MB);
    pause_ms(settle); /* the persistent pages are referenced well before T0 */

    printf("T0 %llu\n", (unsigned long long)now_ns());
    pause_ms(settle / 3);
    touch(impacting, 10 * MB);
    touch(transient, 10 * MB);
    if (strcmp(how, "dontneed") == 0)
        madvise(transient, 10 * MB, MADV_DONTNEED);
    else
        munmap(transient, 10 * MB);
    pause_ms(settle);
    printf("T1 %llu\n", (unsigned long long)now_ns());
    pause_ms(settle);
    return persistent[0] + impacting[0] == 2 ? 0 : 1;
}
