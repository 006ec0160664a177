/* trace_codec.c — the trace format's size and speed on mbench-like events
 * (tests/trace/trace_gen.h: shared/bench/mbench.c's pattern, 2 threads
 * interleaved, timestamps 50-350 ns apart): bytes per event, encode
 * (writer: pack + zstd) and decode (reader) ns per event, against the
 * information the events carry (the entropy floor).
 *
 * With -t N the writer codes on N encoder threads (cfg.threads): the
 * encode figure is then the wall time, with the caller's own CPU time per
 * event and the events/s per encoder thread; -x encodes with 1 and 2
 * threads (and N) in the same run and prints the speed-up.
 *
 * Usage: trace_codec [-g generated threads] [-t encoder threads] [-x]
 *                    [-n ops_per_thread] [-w window]
 *                    [-l zstd_level] [-c chunk_events] [-u time_unit_ns]
 *                    [-o file] [-r repeats] [-s: each stream's share]
 *                    [-P: decode on one thread, no prefetch]
 *                    [-z: skewed stacks and sizes instead of mbench's; the
 *                     floor printed is then mbench's, not this one's]
 *                    [-f flags: every chunk's coding (TRACE_F_*), not the writer's pick]
 *                    [-k N: with -i, skip the first N events]
 *                    [-i trace: re-encode a recorded trace's events instead
 *                     (its stacks and categories; no floor)] */
#include "trace/trace_read.h"
#include "trace/trace_write.h"
#include "trace/trace_gen.h"
#include "trace/trace_util.h"

#include <zstd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct membuf {
    unsigned char *p;
    size_t len, cap;
} membuf;

static int mem_write(void *ctx, const void *buf, size_t n)
{
    membuf *m = ctx;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1 << 20;
        while (cap < m->len + n)
            cap *= 2;
        unsigned char *p = realloc(m->p, cap);
        if (!p)
            return -12;
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, n);
    m->len += n;
    return 0;
}

static mt_trace_reader *src; /* -i: the recorded trace (its definitions) */

static int stack_cb(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *cat)
{
    (void)ctx;
    if (src) {
        const mt_trace_stack *st = mt_trace_stack_get(src, id);
        if (!st)
            return -1;
        int k = (int)st->nframes < max ? (int)st->nframes : max;
        memcpy(out, st->frames, (size_t)k * sizeof *out);
        *cat = st->category;
        return k;
    }
    int n = max < 6 ? max : 6;
    for (int i = 0; i < n; i++)
        out[i] = 0x400000 + id * 64 + (uint64_t)i * 4096;
    *cat = 1;
    return n;
}

static const char *cat_cb(void *ctx, unsigned id)
{
    (void)ctx;
    if (src)
        return mt_trace_category_name(src, id);
    return id == 1 ? "malloc" : NULL;
}

/* Each stream's share: every EVENTS chunk's streams compressed alone. */
static void stream_breakdown(const unsigned char *p, size_t len, size_t nevents, int level)
{
    static const char *names[TRACE_NSTREAMS] = {"ops",  "xops",   "threads", "times", "sizes", "frees",
                                                "bits", "stacks", "ids",     "cats",  "addrs", "runs"};
    double raw[TRACE_NSTREAMS] = {0}, comp[TRACE_NSTREAMS] = {0}, h0[TRACE_NSTREAMS] = {0};
    size_t off = TRACE_HEADER_SIZE;
    while (off + TRACE_CHUNK_HEADER_SIZE <= len && !memcmp(p + off, TRACE_CHUNK_MAGIC, 4)) {
        const unsigned char *h = p + off;
        uint32_t stored = trace_get32(h + 16), rawn = trace_get32(h + 20);
        if (h[4] == TRACE_CHUNK_EVENTS) {
            unsigned char *body = malloc(rawn), *tmp = malloc(ZSTD_compressBound(rawn));
            if (h[5] == TRACE_CODEC_ZSTD)
                ZSTD_decompress(body, rawn, h + TRACE_CHUNK_HEADER_SIZE, stored);
            else
                memcpy(body, h + TRACE_CHUNK_HEADER_SIZE, rawn);
            const unsigned char *q = body, *end = body + rawn;
            uint64_t v, ns, sl[64];
            trace_get_varint(&q, end, &v);
            trace_get_varint(&q, end, &v);
            trace_get_varint(&q, end, &v);
            trace_get_varint(&q, end, &ns);
            for (uint64_t i = 0; i < ns; i++)
                trace_get_varint(&q, end, &sl[i]);
            for (uint64_t i = 0; i < ns && i < TRACE_NSTREAMS; i++) {
                raw[i] += (double)sl[i];
                if (sl[i])
                    comp[i] +=
                        (double)ZSTD_compress(tmp, ZSTD_compressBound(sl[i]), q, sl[i], level ? level : 3);
                double hist[256] = {0};
                for (uint64_t k = 0; k < sl[i]; k++)
                    hist[q[k]]++;
                for (int k = 0; k < 256; k++)
                    if (hist[k])
                        h0[i] -= hist[k] * log2(hist[k] / (double)sl[i]);
                q += sl[i];
            }
            free(body);
            free(tmp);
        }
        off += TRACE_CHUNK_HEADER_SIZE + stored;
    }
    printf("streams (each compressed alone), bits/event: raw, order-0 entropy of the bytes, compressed:\n");
    for (int i = 0; i < TRACE_NSTREAMS; i++)
        if (raw[i])
            printf("  %-9s %7.3f %7.3f %7.3f\n", names[i], raw[i] * 8 / nevents, h0[i] / nevents,
                   comp[i] * 8 / nevents);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(clockid_t which)
{
    struct timespec ts;
    clock_gettime(which, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The best of `repeats` encodes of evs with cfg (wall seconds; the
 * calling thread's CPU seconds in *cpu, the other threads' in *others),
 * the file left in m. */
static double encode(const mt_trace_write_config *cfg, const mt_trace_host *host, membuf *m,
                     const mt_trace_event *evs, size_t n, int repeats, double *cpu, double *others)
{
    double best = 1e30;
    *cpu = *others = 1e30;
    for (int rep = 0; rep < repeats; rep++) {
        m->len = 0;
        mt_trace_writer *w = mt_trace_writer_create(cfg, host);
        if (!w)
            exit(1);
        double t0 = now(), c0 = cpu_now(CLOCK_THREAD_CPUTIME_ID), p0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
        mt_trace_write_begin(w);
        for (size_t i = 0; i < n; i++)
            mt_trace_write_event(w, &evs[i]);
        const char *names[] = {"events_lost"};
        uint64_t vals[] = {0};
        mt_trace_write_finish(w, names, vals, 1);
        double t1 = now(), c1 = cpu_now(CLOCK_THREAD_CPUTIME_ID);
        mt_trace_writer_destroy(w); /* its threads' CPU time is counted once they are joined */
        double p1 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
        if (p1 - p0 - (c1 - c0) < *others)
            *others = p1 - p0 - (c1 - c0);
        if (t1 - t0 < best)
            best = t1 - t0;
        if (c1 - c0 < *cpu)
            *cpu = c1 - c0;
    }
    return best;
}

int main(int argc, char **argv)
{
    int threads = 2, level = 0, repeats = 3, opt, breakdown = 0, skew = 0, enc_threads = 1, scaling = 0;
    unsigned rflags = MT_TRACE_PREFETCH;
    long ops = 2000000, window = 4096;
    unsigned chunk = 0, unit = 1, fflags = 0;
    size_t skip = 0;
    const char *out = NULL, *in = NULL;
    while ((opt = getopt(argc, argv, "g:t:xn:w:l:c:u:o:r:szPi:f:k:")) != -1) {
        switch (opt) {
        case 'g': threads = atoi(optarg); break;
        case 't': enc_threads = atoi(optarg); break;
        case 'x': scaling = 1; break;
        case 'n': ops = atol(optarg); break;
        case 'w': window = atol(optarg); break;
        case 'l': level = atoi(optarg); break;
        case 'c': chunk = (unsigned)atol(optarg); break;
        case 'u': unit = (unsigned)atol(optarg); break;
        case 'o': out = optarg; break;
        case 'r': repeats = atoi(optarg); break;
        case 's': breakdown = 1; break;
        case 'z': skew = 1; break;
        case 'P': rflags = 0; break;
        case 'i': in = optarg; break;
        case 'k': skip = (size_t)atol(optarg); break;
        case 'f': fflags = 0x100u | (unsigned)atoi(optarg); break;
        default:
            fprintf(stderr, "usage: trace_codec [-g threads] [-t encoder_threads] [-x] [-n ops] [-w window] "
                            "[-l level] [-c chunk_events] "
                            "[-u time_unit_ns] [-o file] [-r repeats]\n");
            return 2;
        }
    }
    if (threads < 1 || ops < 1 || window < 1 || repeats < 1 || enc_threads < 1)
        return 2;

    mt_trace_event *evs;
    size_t n = 0;
    double info = 0;
    if (in) { /* a recorded trace's events (times relative to its start) */
        char err[MT_TRACE_ERR_MAX];
        if (mt_trace_open(in, 0, &src, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        size_t cap = 1 << 20;
        evs = malloc(cap * sizeof *evs);
        mt_trace_event ev;
        while (evs && mt_trace_next(src, &ev) == 1) {
            if (n == cap)
                evs = realloc(evs, (cap *= 2) * sizeof *evs);
            if (evs && skip)
                skip--;
            else if (evs)
                evs[n++] = ev;
        }
        if (!evs || mt_trace_error(src)) {
            fprintf(stderr, "%s\n", evs ? mt_trace_error(src) : "out of memory");
            return 1;
        }
        goto have_events;
    }
    /* The events, generated once. */
    gen_state g;
    gen_init(&g, threads, ops, window, 1);
    g.skew = skew;
    size_t cap = (size_t)(threads * ops * 2 + 16);
    evs = malloc(cap * sizeof *evs);
    if (!evs)
        return 1;
    while (n < cap && gen_next(&g, &evs[n]))
        n++;
    /* The floor: slots, sizes and thread picks, plus the time deltas' order-0 entropy. */
    info = g.info_bits;
    gen_free(&g);
have_events:;
    size_t nd = 1u << 20;
    uint32_t *hist = calloc(nd, sizeof *hist);
    for (size_t i = 1; i < n; i++) {
        uint64_t d = evs[i].time_ns / unit - evs[i - 1].time_ns / unit;
        hist[d < nd ? d : nd - 1]++;
    }
    double tbits = 0;
    for (size_t i = 0; i < nd; i++)
        if (hist[i])
            tbits -= hist[i] * log2((double)hist[i] / (double)(n - 1));
    free(hist);

    mt_trace_write_config cfg = {.zstd_level = level,
                                 .chunk_events = chunk,
                                 .time_unit_ns = unit,
                                 .pid = 1,
                                 .start_ns = 0,
                                 .chunk_flags = fflags};
    membuf m = {0};
    mt_trace_host host = {.ctx = &m, .write = mem_write, .stack = stack_cb, .category_name = cat_cb};
    double best_dec = 1e30, cpu_enc, cpu_others;
    /* -x: 1 and 2 encoder threads (and -t's), the last one's file kept. */
    int counts[3] = {enc_threads, 0, 0}, ncounts = 1;
    if (scaling) {
        counts[0] = 1;
        counts[1] = 2;
        ncounts = 2;
        if (enc_threads > 2)
            counts[ncounts++] = enc_threads;
    }
    double rate[3] = {0}, best_enc = 0;
    for (int c = 0; c < ncounts; c++) {
        cfg.threads = (unsigned)counts[c];
        best_enc = encode(&cfg, &host, &m, evs, n, repeats, &cpu_enc, &cpu_others);
        rate[c] = n / best_enc;
        printf(
            "encoder threads %d: %.1f M events/s (%.1f ns/event wall), %.1f M events/s per encoder thread; "
            "CPU: the caller %.1f ns/event",
            counts[c], rate[c] / 1e6, best_enc * 1e9 / n, rate[c] / counts[c] / 1e6, cpu_enc * 1e9 / n);
        if (counts[c] > 1)
            printf(", the encoder threads %.1f ns/event (%.1f M events/s per second of an encoder thread)",
                   cpu_others * 1e9 / n, n / cpu_others / 1e6);
        printf("\n");
    }
    if (scaling)
        for (int c = 1; c < ncounts; c++)
            printf("speed-up 1 -> %d encoder threads: %.2fx (%ld cores online)\n", counts[c],
                   rate[c] / rate[0], sysconf(_SC_NPROCESSORS_ONLN));
    for (int rep = 0; rep < repeats; rep++) {
        mt_trace_reader *r;
        char err[MT_TRACE_ERR_MAX];
        double t0 = now();
        if (mt_trace_open_mem(m.p, m.len, "bench", rflags, &r, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        mt_trace_event ev;
        size_t got = 0, bad = 0;
        uint64_t sum = 0;
        while (mt_trace_next(r, &ev) == 1) {
            sum += ev.size + ev.id;
            if (got < n && (ev.id != evs[got].id || ev.type != evs[got].type))
                bad++;
            got++;
        }
        double t1 = now();
        if (mt_trace_error(r) || got != n || bad) {
            fprintf(stderr, "decode mismatch: %zu of %zu events, %zu differ, %s\n", got, n, bad,
                    mt_trace_error(r) ? mt_trace_error(r) : "");
            return 1;
        }
        mt_trace_close(r);
        if (t1 - t0 < best_dec)
            best_dec = t1 - t0;
        (void)sum;
    }
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(m.p, 1, m.len, f) != m.len || fclose(f))
            return 1;
    }
    double floor_bits = info + tbits;
    if (in)
        printf("%s: ", in);
    printf("events %zu  bytes %zu  bytes/event %.3f  (level %d, chunk %u, time unit %u ns)\n", n, m.len,
           (double)m.len / n, level, chunk, unit);
    if (in)
        printf("time deltas' order-0 entropy: %.3f bits/event\n", tbits / n);
    else
        printf("floor: %.3f bytes/event (%.3f without the time deltas, whose order-0 entropy is %.2f "
               "bits/event)\n",
               floor_bits / 8 / n, info / 8 / n, tbits / n);
    printf("encode %.1f ns/event (%.1f M events/s)  decode %.1f ns/event (%.1f M events/s, %s)\n",
           best_enc * 1e9 / n, n / best_enc / 1e6, best_dec * 1e9 / n, n / best_dec / 1e6,
           rflags ? "prefetch" : "one thread");
    if (breakdown)
        stream_breakdown(m.p, m.len, n, level);
    free(m.p);
    free(evs);
    return 0;
}
