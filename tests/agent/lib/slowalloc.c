/* slowalloc.c — an allocator that stalls (tests/agent/test_spans.sh),
 * preloaded after the agent (LD_PRELOAD=libmemtrail.so:libslowalloc.so) so
 * that the agent's real malloc (dlsym(RTLD_NEXT)) is this one. A request
 * of SLOW_SIZE to SLOW_SIZE+63 bytes (the program's size plus the agent's
 * header and canary) sleeps until SLOWALLOC_NS nanoseconds (default 5 ms)
 * have passed before glibc's malloc serves it; every other size goes
 * straight through. Sleeping, not spinning: stalled threads leave the
 * CPUs to the others, so a stall lasts its length plus a wake-up, which a
 * loaded machine can make long: slowalloc_last_stall_ns() tells the
 * program how long its thread's last stall really took. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define SLOW_SIZE 123456

extern void *__libc_malloc(size_t n);
uint64_t slowalloc_last_stall_ns(void);

static __thread uint64_t last_stall;

uint64_t slowalloc_last_stall_ns(void)
{
    return last_stall;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t stall_ns(void)
{
    static uint64_t ns;
    if (!ns) {
        const char *s = getenv("SLOWALLOC_NS"); /* getenv does not allocate */
        ns = s ? strtoull(s, NULL, 10) : 5000000;
    }
    return ns;
}

void *malloc(size_t n)
{
    if (n >= SLOW_SIZE && n < SLOW_SIZE + 64) {
        uint64_t start = now_ns(), end = start + stall_ns();
        struct timespec ts = {(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
        }
        last_stall = now_ns() - start;
    }
    return __libc_malloc(n);
}
