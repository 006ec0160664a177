/* tracegen.c — a synthetic trace for the analyzer's benchmark and tests:
 * N events written with the real writer, keeping LIVE blocks live all
 * along (a pool of LIVE slots: each step frees a random slot's block and
 * allocates a new one into it), so `memtrail analyze` can be measured on
 * 100 M+ events with a known live set, against its memory bound
 * (32 MB + 12 B x live).
 *
 * The events: ALLOC/FREE pairs from 4 threads; one step in 16 is a
 * temporary (an allocation freed by the thread's next call; a realloc of
 * the block in between would not end it), one in 32 a
 * realloc of a live block followed by a free of an id the trace never
 * allocated (0). Stacks are real return addresses of this program's functions
 * (its module is recorded), so the analysis symbolizes them. The LIVE
 * blocks left at the end are the leaks.
 *
 * Usage: tracegen -o FILE [-n EVENTS] [-l LIVE] [-s SEED] [-c CHUNK_EVENTS]
 *                 [-z LEVEL] [--expect FILE]
 * --expect writes the figures the analysis must find, as JSON (the test
 * compares). */
#include "trace/trace_write.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NSTACKS 6

/* The functions whose addresses make the stacks (noinline: each its own). */
__attribute__((noinline)) void tracegen_parse_input(void);
__attribute__((noinline)) void tracegen_build_index(void);
__attribute__((noinline)) void tracegen_format_line(void);
__attribute__((noinline)) void tracegen_cache_insert(void);
__attribute__((noinline)) void tracegen_leaky_helper(void);
__attribute__((noinline)) void tracegen_scratch_buffer(void);
void tracegen_parse_input(void)
{
    __asm__ volatile("" ::: "memory");
}
void tracegen_build_index(void)
{
    __asm__ volatile("" ::: "memory");
}
void tracegen_format_line(void)
{
    __asm__ volatile("" ::: "memory");
}
void tracegen_cache_insert(void)
{
    __asm__ volatile("" ::: "memory");
}
void tracegen_leaky_helper(void)
{
    __asm__ volatile("" ::: "memory");
}
void tracegen_scratch_buffer(void)
{
    __asm__ volatile("" ::: "memory");
}

static void (*const stack_fn[NSTACKS])(void) = {
    tracegen_parse_input,  tracegen_build_index,  tracegen_format_line,
    tracegen_cache_insert, tracegen_leaky_helper, tracegen_scratch_buffer,
};
#define TEMP_STACK 6 /* stack ids are 1..NSTACKS; temporaries come from the last */

struct out {
    int fd;
    uint64_t bytes;
};

static int out_write(void *ctx, const void *buf, size_t n)
{
    struct out *o = ctx;
    const char *p = buf;
    while (n) {
        ssize_t k = write(o->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? -errno : -EIO;
        p += k;
        n -= (size_t)k;
        o->bytes += (uint64_t)k;
    }
    return 0;
}

static int stack_frames(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *category)
{
    (void)ctx;
    if (id < 1 || id > NSTACKS || max < 2)
        return -1;
    out[0] = (uint64_t)(uintptr_t)stack_fn[id - 1] + 1; /* inside the function, as a return address is */
    out[1] = (uint64_t)(uintptr_t)stack_fn[(id % NSTACKS)] + 1;
    *category = 0;
    return 2;
}

static const char *category_name(void *ctx, unsigned id)
{
    (void)ctx;
    return id == 0 ? "malloc" : NULL;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    if (info->dlpi_name[0]) /* the main program only: "" */
        return 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        if (ph->p_vaddr < lo)
            lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi)
            hi = ph->p_vaddr + ph->p_memsz;
    }
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0 || lo == UINT64_MAX)
        return 1;
    path[n] = '\0';
    mt_trace_write_module(ctx, info->dlpi_addr + lo, info->dlpi_addr + hi, info->dlpi_addr, path, NULL, 0);
    return 1;
}

static void modules(void *ctx, mt_trace_writer *w)
{
    (void)ctx;
    dl_iterate_phdr(add_module, w);
}

static uint64_t rng = 0x853c49e6748fea9bull;
static inline uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Sizes: mostly small, log-uniform up to 64 KiB. */
static inline uint64_t rnd_size(void)
{
    uint64_t r = rnd();
    unsigned bits = 3 + (unsigned)(r % 14);
    return 1 + ((r >> 8) & (((uint64_t)1 << bits) - 1));
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct gen {
    mt_trace_writer *w;
    uint64_t t, events, allocs, frees, reallocs, frees_unknown, temps, temp_bytes;
    uint32_t next_id;
    uint32_t last[4]; /* per thread: the id its last call allocated (0: none) */
    int err;
};

/* Thread k frees block id (of size bytes): a temporary when its last call allocated it. */
static inline void count_free(struct gen *g, unsigned k, uint32_t id, uint64_t size)
{
    if (id && g->last[k] == id) {
        g->temps++;
        g->temp_bytes += size;
    }
    g->last[k] = 0;
}

static inline void emit(struct gen *g, mt_trace_event *e)
{
    g->t += 20 + (rnd() & 63);
    e->time_ns = g->t;
    if (g->err == 0)
        g->err = mt_trace_write_event(g->w, e);
    g->events++;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *expect = NULL;
    uint64_t nevents = 1000000, live = 10000;
    mt_trace_write_config cfg = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "tracegen: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "-o") == 0)
            path = v;
        else if (strcmp(a, "-n") == 0)
            nevents = strtoull(v, NULL, 10);
        else if (strcmp(a, "-l") == 0)
            live = strtoull(v, NULL, 10);
        else if (strcmp(a, "-s") == 0)
            rng = strtoull(v, NULL, 10) * 0x9e3779b97f4a7c15ull + 1;
        else if (strcmp(a, "-c") == 0)
            cfg.chunk_events = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "-z") == 0)
            cfg.zstd_level = atoi(v);
        else if (strcmp(a, "--expect") == 0)
            expect = v;
        else {
            fprintf(stderr,
                    "usage: tracegen -o FILE [-n EVENTS] [-l LIVE] [-s SEED] [-c CHUNK_EVENTS] [-z LEVEL] "
                    "[--expect FILE]\n");
            return 2;
        }
        i++;
    }
    if (!path || live == 0 || live > (1u << 30)) {
        fprintf(stderr, "tracegen: -o FILE is required, and -l from 1 to 2^30\n");
        return 2;
    }
    struct out o = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)};
    if (o.fd < 0) {
        fprintf(stderr, "tracegen: %s: %s\n", path, strerror(errno));
        return 1;
    }
    mt_trace_host host = {.ctx = &o,
                          .write = out_write,
                          .stack = stack_frames,
                          .category_name = category_name,
                          .modules = modules};
    cfg.pid = (uint32_t)getpid();
    cfg.start_ns = 1000000;
    cfg.start_realtime_ns = (uint64_t)time(NULL) * 1000000000u;
    struct gen g = {.w = mt_trace_writer_create(&cfg, &host), .t = cfg.start_ns, .next_id = 1};
    uint32_t *slot_id = malloc(live * sizeof *slot_id);
    uint32_t *slot_size = malloc(live * sizeof *slot_size);
    if (!g.w || !slot_id || !slot_size) {
        fprintf(stderr, "tracegen: out of memory\n");
        return 1;
    }
    mt_trace_write_meta(g.w, "exe", "tracegen");
    g.err = mt_trace_write_begin(g.w);
    static const uint32_t tids[4] = {1001, 1002, 1003, 1004};
    uint64_t t0 = now_ns();
    /* fill the pool */
    for (uint64_t i = 0; i < live && g.events < nevents; i++) {
        mt_trace_event e = {.type = MT_TRACE_ALLOC,
                            .thread = tids[i & 3],
                            .id = g.next_id++,
                            .size = rnd_size(),
                            .stack = 1 + (uint32_t)(rnd() % (NSTACKS - 1))};
        slot_id[i] = e.id;
        slot_size[i] = (uint32_t)e.size;
        emit(&g, &e);
        g.allocs++;
        g.last[i & 3] = e.id;
    }
    uint64_t filled = g.allocs;
    /* churn: free a random slot's block, allocate another into it */
    for (uint64_t step = 0; g.events + 2 <= nevents && filled == live; step++) {
        unsigned k = (unsigned)(step & 3);
        uint32_t tid = tids[k];
        uint64_t s = rnd() % live;
        if ((step & 15) == 7) {
            mt_trace_event a = {.type = MT_TRACE_ALLOC,
                                .thread = tid,
                                .id = g.next_id++,
                                .size = rnd_size(),
                                .stack = TEMP_STACK};
            emit(&g, &a);
            g.last[k] = a.id;
            mt_trace_event f = {.type = MT_TRACE_FREE, .thread = tid, .id = a.id};
            emit(&g, &f);
            count_free(&g, k, a.id, a.size);
            g.allocs++, g.frees++;
        } else if ((step & 31) == 12) {
            mt_trace_event r = {.type = MT_TRACE_REALLOC,
                                .thread = tid,
                                .old_id = slot_id[s],
                                .id = g.next_id++,
                                .size = rnd_size(),
                                .stack = 1 + (uint32_t)(rnd() % (NSTACKS - 1))};
            /* a realloc resizes the block, it ends none: still a temporary
             * if freed next, when it was the thread's last call's */
            g.last[k] = g.last[k] == slot_id[s] ? r.id : 0;
            slot_id[s] = r.id;
            slot_size[s] = (uint32_t)r.size;
            emit(&g, &r);
            g.reallocs++;
            mt_trace_event f = {.type = MT_TRACE_FREE, .thread = tid, .id = 0};
            emit(&g, &f);
            count_free(&g, k, 0, 0);
            g.frees_unknown++;
        } else {
            mt_trace_event f = {.type = MT_TRACE_FREE, .thread = tid, .id = slot_id[s]};
            emit(&g, &f);
            count_free(&g, k, slot_id[s], slot_size[s]);
            g.frees++;
            mt_trace_event a = {.type = MT_TRACE_ALLOC,
                                .thread = tid,
                                .id = g.next_id++,
                                .size = rnd_size(),
                                .stack = 1 + (uint32_t)(rnd() % (NSTACKS - 1))};
            slot_id[s] = a.id;
            slot_size[s] = (uint32_t)a.size;
            emit(&g, &a);
            g.last[k] = a.id;
            g.allocs++;
        }
    }
    const char *names[] = {"events_lost"};
    const uint64_t values[] = {0};
    if (g.err == 0)
        g.err = mt_trace_write_finish(g.w, names, values, 1);
    double secs = (double)(now_ns() - t0) / 1e9;
    mt_trace_writer_destroy(g.w);
    if (close(o.fd) != 0 && g.err == 0)
        g.err = -errno;
    if (g.err) {
        fprintf(stderr, "tracegen: %s: %s\n", path, strerror(-g.err));
        return 1;
    }
    uint64_t leak_bytes = 0, leak_count = filled;
    for (uint64_t i = 0; i < filled; i++)
        leak_bytes += slot_size[i];
    fprintf(stderr,
            "tracegen: %s: %" PRIu64 " events, %" PRIu64 " live, %" PRIu64 " bytes (%.3f B/event) in %.2f s "
            "(%.1f M events/s)\n",
            path, g.events, leak_count, o.bytes, (double)o.bytes / (double)(g.events ? g.events : 1), secs,
            (double)g.events / secs / 1e6);
    if (expect) {
        FILE *f = fopen(expect, "w");
        if (!f) {
            fprintf(stderr, "tracegen: %s: %s\n", expect, strerror(errno));
            return 1;
        }
        fprintf(f,
                "{\"events\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64
                ", \"reallocs\": %" PRIu64 ", \"frees_unknown\": %" PRIu64 ", \"temporary\": %" PRIu64
                ", \"temporary_bytes\": %" PRIu64 ", \"leak_bytes\": %" PRIu64 ", \"leak_count\": %" PRIu64
                "}\n",
                g.events, g.allocs, g.frees, g.reallocs, g.frees_unknown, g.temps, g.temp_bytes, leak_bytes,
                leak_count);
        fclose(f);
    }
    free(slot_id);
    free(slot_size);
    return 0;
}
