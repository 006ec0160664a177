/* xe_thread.h — what a producer reads about itself for each event, cheaply:
 * its CPU (from glibc's rseq area, one load; else sched_getcpu) and the
 * engine's clock ticks (the TSC on x86-64, converted at dispatch). Shared
 * by the engine's fast path and the benchmark's baselines, so they pay the
 * same for the same facts. */
#ifndef MT_XE_THREAD_H
#define MT_XE_THREAD_H

#include <sched.h>
#include <stdint.h>
#include <sys/rseq.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline uint32_t xe_this_cpu(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
    if (__rseq_size != 0) {
        const struct rseq *rs = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
        uint32_t cpu = *(const volatile uint32_t *)&rs->cpu_id;
        if ((int32_t)cpu >= 0)
            return cpu;
    }
#endif
    int c = sched_getcpu();
    return c < 0 ? 0 : (uint32_t)c;
}

static inline uint64_t xe_ticks(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* Waits for everything before it to complete (loads included) before the
 * next clock read. */
static inline void xe_fence(void)
{
#if defined(__x86_64__)
    _mm_lfence();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

#endif /* MT_XE_THREAD_H */
