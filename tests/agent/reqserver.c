/* reqserver.c — a request server with a known ledger, for the tail-latency
 * report's end-to-end test (tests/cli/test_info_server.sh).
 *
 *   reqserver REQUESTS
 *
 * One thread serves REQUESTS requests, each inside mt_span_begin("req") /
 * mt_span_end(), each a few small mallocs and frees. Every 50th request
 * (i % 50 == 7) is hit by memory management: it maps and unmaps 1 MiB
 * (a GROW and a TRIM event) and asks malloc for SLOW_SIZE bytes, which
 * libslowalloc.so (preloaded after the agent) stalls for a known time.
 * The program keeps the seed's books itself: mt_event_count(MT_EVENT_ANY)
 * before and after each request (one thread: every event is its own), its
 * own clock around the span and around each of its memory calls, and the
 * stall's real length from libslowalloc. It prints one line per request:
 *   req LATENCY_NS EVENTS STALL_NS MEMORY_NS
 * (MEMORY_NS: the time its malloc, free, mmap and munmap calls took by its
 * own clock; on a loaded machine more than the stall, as a thread may be
 * preempted inside any of them, and the agent counts that time too)
 * (the PERIODIC kind is off, so every event counted is one a span counts). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "memtrail.h"

#define SLOW_SIZE 123456

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;
    if (n < 1) {
        fprintf(stderr, "usage: reqserver REQUESTS\n");
        return 2;
    }
    uint64_t (*last_stall)(void) = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "slowalloc_last_stall_ns");
    if (!last_stall) {
        fprintf(stderr, "reqserver: libslowalloc.so is not loaded\n");
        return 2;
    }
    /* Warm up outside spans: the heap's first growth and the first peaks
     * are not the requests' doing. */
    for (int i = 0; i < 64; i++)
        free(malloc(4096));
    for (long i = 0; i < n; i++) {
        int hit = i % 50 == 7;
        uint64_t ev0 = mt_event_count(MT_EVENT_ANY), stall = 0, mem = 0, c;
        uint64_t t0 = now_ns();
        mt_span_begin("req");
        void *small[8];
        for (int j = 0; j < 8; j++) {
            c = now_ns();
            small[j] = malloc(32 + 16 * (size_t)j);
            mem += now_ns() - c;
            memset(small[j], j, 32);
        }
        if (hit) {
            c = now_ns();
            char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m != MAP_FAILED)
                munmap(m, 1 << 20);
            void *p = malloc(SLOW_SIZE);
            uint64_t c2 = now_ns();
            stall = last_stall();
            mem += c2 - c;
            c = now_ns();
            free(p);
            mem += now_ns() - c;
        }
        for (int j = 0; j < 8; j++) {
            c = now_ns();
            free(small[j]);
            mem += now_ns() - c;
        }
        mt_span_end();
        uint64_t t1 = now_ns();
        printf("req %llu %llu %llu %llu\n", (unsigned long long)(t1 - t0),
               (unsigned long long)(mt_event_count(MT_EVENT_ANY) - ev0), (unsigned long long)stall,
               (unsigned long long)mem);
    }
    return 0;
}
