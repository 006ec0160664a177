/* test_roundtrip.c — the trace writer and reader: every field of random
 * and mbench-like events comes back exactly (ids wrapping past 2^32,
 * sizes up to 2^47, many threads), with the stacks, modules, categories,
 * meta, end statistics and the index; with and without prefetch; coded
 * on the caller's thread and on 2 and 4 encoder threads. */
#include "unit.h"
#include "trace/trace_gen.h"
#include "trace/trace_test.h"
#include "trace/trace_util.h"

#include <time.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    return gen_xorshift(&rng);
}

#define START 5000000000ull

/* Random events of every kind. */
static mt_trace_event *random_events(size_t n)
{
    mt_trace_event *e = calloc(n, sizeof *e);
    uint64_t t = START + 1000;
    uint32_t id = 0xFFFFF000u; /* wraps past 2^32 */
    for (size_t i = 0; i < n; i++) {
        mt_trace_event *v = &e[i];
        v->type = (uint8_t)(1 + rnd() % 5);
        v->thread = rnd() % 4 ? 100 + (uint32_t)(rnd() % 300) : (uint32_t)rnd();
        uint64_t r = rnd();
        t += r % 8 == 0 ? (rnd() % 1000000000ull) : r % 500;
        v->time_ns = r % 50 == 1 ? t - rnd() % 100000 : t; /* some go back */
        v->category = rnd() % 10 ? (uint8_t)(rnd() % 5) : (uint8_t)rnd();
        int bits = (int)(rnd() % 48);
        v->size = rnd() & ((1ull << bits) - 1);
        if (rnd() % 20 == 0)
            v->size = (1ull << 47) - rnd() % 3;
        if (rnd() % 500 == 0)
            v->size = UINT64_MAX - rnd() % 3; /* the full range of the format */
        v->id = rnd() % 8 ? ++id : (uint32_t)rnd();
        if (v->type == MT_TRACE_ALLOC || v->type == MT_TRACE_REALLOC)
            id = v->id;
        v->old_id = rnd() % 10 == 0 ? 0 : id - (uint32_t)(rnd() % 5000);
        if (v->type == MT_TRACE_FREE && rnd() % 10 == 0)
            v->id = 0; /* a block from before the trace */
        v->stack = rnd() % 3 ? (uint32_t)(rnd() % 64) : (uint32_t)rnd();
        if (rnd() % 100 == 0)
            v->stack = 0xdead; /* the host does not know it */
        v->address = rnd() % 2 ? rnd() : 0x7f0000000000ull + (rnd() % 1000) * 4096;
    }
    return e;
}

typedef struct rt_opts {
    uint32_t chunk_events, unit;
    int level;
    unsigned flags;
    unsigned coding;  /* config.chunk_flags: 0 the writer's pick, else 0x100 | TRACE_F_* */
    unsigned threads; /* config.threads */
} rt_opts;

static const char *stat_names[] = {"events_lost", "custom"};
static const uint64_t stat_values[] = {7, 1ull << 60};

static tbuf *write_trace(const mt_trace_event *evs, size_t n, const rt_opts *o, mt_trace_write_stats *st)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {.zstd_level = o->level,
                                 .chunk_events = o->chunk_events,
                                 .pid = 4242,
                                 .start_ns = START,
                                 .start_realtime_ns = 1700000000000000000ull,
                                 .time_unit_ns = o->unit,
                                 .chunk_flags = o->coding,
                                 .threads = o->threads};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    if (!w)
        return m;
    mt_trace_write_meta(w, "exe", "/bin/prog");
    mt_trace_write_begin(w);
    mt_trace_write_meta(w, "cmdline", "prog --flag");
    for (size_t i = 0; i < n; i++) {
        mt_trace_write_event(w, &evs[i]);
        if (i % 997 == 0)
            mt_trace_write_flush(w, i % 2);
    }
    mt_trace_write_finish(w, stat_names, stat_values, 2);
    mt_trace_write_get_stats(w, st);
    mt_trace_writer_destroy(w);
    return m;
}

/* Seeking to an events chunk: every event from its first one on. */
static void check_seek(const char *name, const tbuf *m, const mt_trace_event *evs, size_t n, const rt_opts *o)
{
    char err[MT_TRACE_ERR_MAX], label[160];
    mt_trace_reader *r;
    if (mt_trace_open_mem(m->p, m->len, name, o->flags, &r, err, sizeof err) < 0)
        return;
    size_t ni = mt_trace_index_count(r), tried = 0, good = 0;
    unsigned unit = o->unit ? o->unit : 1;
    for (size_t pick = 0; pick < 3; pick++) {
        size_t target = pick == 0 ? 0 : pick == 1 ? ni / 2 : ni - 1, before = 0, k;
        for (k = 0; k < ni && (k < target || mt_trace_index_get(r, k)->kind != 2); k++)
            if (mt_trace_index_get(r, k)->kind == 2)
                before += mt_trace_index_get(r, k)->count;
        if (k >= ni)
            continue;
        tried++;
        if (mt_trace_seek_chunk(r, k) != 0)
            continue;
        mt_trace_event ev;
        size_t got = before, same = 0;
        while (mt_trace_next(r, &ev) == 1) {
            if (got < n) {
                mt_trace_event want = texpect(&evs[got], START, unit);
                same += tsame(&ev, &want);
            }
            got++;
        }
        int ok = got == n && same == n - before && !mt_trace_error(r) && mt_trace_complete(r) &&
                 mt_trace_chunks_read(r) == mt_trace_chunks_total(r);
        if (!ok)
            printf("  seek to %zu: %zu events (want %zu), %zu same of %zu, error %s, complete %d, chunks "
                   "%llu/%llu\n",
                   k, got, n, same, n - before, mt_trace_error(r) ? mt_trace_error(r) : "none",
                   mt_trace_complete(r), (unsigned long long)mt_trace_chunks_read(r),
                   (unsigned long long)mt_trace_chunks_total(r));
        good += ok;
    }
    snprintf(label, sizeof label, "%s: seek to %zu events chunks, every event from there", name, tried);
    CHECK(label, (tried > 0 || n == 0) && good == tried && mt_trace_seek_chunk(r, ni) == -22);
    mt_trace_close(r);
}

/* Reads the trace back and compares everything; returns the mismatches. */
static int check_trace(const char *name, const tbuf *m, const mt_trace_event *evs, size_t n, const rt_opts *o)
{
    char err[MT_TRACE_ERR_MAX], label[160];
    mt_trace_reader *r;
    int bad = 0;
    if (mt_trace_open_mem(m->p, m->len, name, o->flags, &r, err, sizeof err) < 0) {
        printf("  open: %s\n", err);
        return 1;
    }
    const mt_trace_file_info *fi = mt_trace_info(r);
    snprintf(label, sizeof label, "%s: header fields", name);
    CHECK(label, fi->version == 2 && fi->pid == 4242 && fi->start_ns == START &&
                     fi->start_realtime_ns == 1700000000000000000ull && fi->file_bytes == m->len);
    size_t got = 0, defined = 0, with_stack = 0;
    mt_trace_event ev;
    unsigned unit = o->unit ? o->unit : 1;
    while (mt_trace_next(r, &ev) == 1) {
        if (got < n) {
            mt_trace_event want = texpect(&evs[got], START, unit);
            if (!tsame(&ev, &want) && bad++ < 3) {
                printf("  event %zu differs\n", got);
                tprint("want", &want);
                tprint("got", &ev);
            }
            if (ev.stack && (ev.type == MT_TRACE_ALLOC || ev.type == MT_TRACE_REALLOC)) {
                with_stack++;
                const mt_trace_stack *s = mt_trace_stack_get(r, ev.stack);
                uint64_t f[1024];
                unsigned cat = 0;
                int nf = tstack_frames(ev.stack, f, 1024, &cat);
                if (nf < 0)
                    nf = 0, cat = 0;
                if (s && s->id == ev.stack && s->nframes == (uint32_t)nf && s->category == cat &&
                    !memcmp(s->frames, f, (size_t)nf * 8))
                    defined++;
            }
        }
        got++;
    }
    snprintf(label, sizeof label, "%s: %zu events back, no error", name, n);
    CHECK(label, got == n && !mt_trace_error(r));
    if (mt_trace_error(r))
        printf("  %s\n", mt_trace_error(r));
    snprintf(label, sizeof label, "%s: every field of every event", name);
    CHECK(label, bad == 0);
    snprintf(label, sizeof label, "%s: each stack defined (frames, category) before its use", name);
    CHECK(label, defined == with_stack);
    snprintf(label, sizeof label, "%s: complete, end statistics", name);
    int f1, f2, f3, f4;
    CHECK(label, mt_trace_complete(r) && mt_trace_stat(r, "events_lost", &f1) == 7 &&
                     mt_trace_stat(r, "custom", &f2) == (1ull << 60) &&
                     mt_trace_stat(r, "writer_events", &f3) == n && mt_trace_stat(r, "nope", &f4) == 0 &&
                     f1 && f2 && f3 && !f4);
    snprintf(label, sizeof label, "%s: meta, categories", name);
    CHECK(label, mt_trace_meta(r, "exe") && !strcmp(mt_trace_meta(r, "exe"), "/bin/prog") &&
                     mt_trace_meta(r, "cmdline") && !strcmp(mt_trace_meta(r, "cmdline"), "prog --flag") &&
                     !mt_trace_meta(r, "nope") &&
                     (!mt_trace_category_name(r, 1) || !strcmp(mt_trace_category_name(r, 1), "new")) &&
                     !mt_trace_category_name(r, 200));
    /* Index: one entry per chunk but itself, events summing to n, offsets at chunk starts. */
    size_t ni = mt_trace_index_count(r);
    uint64_t sum = 0;
    int offsets_ok = ni > 0;
    for (size_t i = 0; i < ni; i++) {
        const mt_trace_chunk_info *c = mt_trace_index_get(r, i);
        if (c->kind == 2)
            sum += c->count;
        int at_end = 0; /* a chunk starts where a write ended */
        for (size_t k = 0; k < m->nends; k++)
            at_end |= m->ends[k] == c->offset;
        offsets_ok &= at_end && (i == 0 || c->offset > mt_trace_index_get(r, i - 1)->offset);
    }
    snprintf(label, sizeof label, "%s: index (%zu chunks)", name, ni);
    CHECK(label, offsets_ok && sum == n && mt_trace_chunks_total(r) == ni + 1 &&
                     mt_trace_chunks_read(r) == ni + 1 && mt_trace_offset(r) == m->len &&
                     !mt_trace_index_get(r, ni));
    mt_trace_close(r);
    if (ni)
        check_seek(name, m, evs, n, o);
    return bad;
}

static void modules_check(const tbuf *m)
{
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    if (mt_trace_open_mem(m->p, m->len, "modules", 0, &r, err, sizeof err) < 0)
        return;
    mt_trace_event ev;
    while (mt_trace_next(r, &ev) == 1)
        ;
    size_t n = mt_trace_module_count(r);
    const mt_trace_module *a = mt_trace_module_get(r, 0), *c = mt_trace_module_get(r, 2);
    CHECK("modules: three, deduplicated, fields back",
          n == 3 && a && c && a->start == 0x400000 && a->end == 0x800000 && !strcmp(a->path, "/bin/one") &&
              a->build_id_len == 4 && a->build_id[3] == 0xef && c->bias == 0x2000 && c->build_id_len == 2 &&
              !strcmp(c->path, "/lib/three.so") && !mt_trace_module_get(r, 3));
    CHECK("modules: the host asked a bounded number of times",
          m->modules_calls > 0 && m->modules_calls < 200);
    mt_trace_close(r);
}

static void run(const char *name, const mt_trace_event *evs, size_t n, rt_opts o, int modules)
{
    mt_trace_write_stats st;
    tbuf *m = write_trace(evs, n, &o, &st);
    char label[160];
    snprintf(label, sizeof label, "%s: writer stats", name);
    CHECK(label, st.events == n && st.events_lost_to_errors == 0 && st.bytes == m->len && st.chunks > 0);
    check_trace(name, m, evs, n, &o);
    o.flags ^= MT_TRACE_PREFETCH;
    snprintf(label, sizeof label, "%s (%s)", name, o.flags ? "prefetch" : "no prefetch");
    check_trace(label, m, evs, n, &o);
    if (modules)
        modules_check(m);
    tbuf_delete(m);
}

/* Two files from one writer: the second stands alone. */
static void two_files(void)
{
    tbuf *m2 = tbuf_new();
    mt_trace_host host;
    tbuf_host(m2, &host);
    mt_trace_write_config cfg = {.chunk_events = 100, .start_ns = START};
    mt_trace_event *evs = random_events(1000);
    /* A writer that goes on into a second file (appended to the same
     * buffer here): a fresh header and definitions. */
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_begin(w);
    for (int i = 0; i < 200; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_flush(w, 1);
    mt_trace_write_begin(w);
    for (int i = 500; i < 1000; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    /* m2 holds file 1 (200 events, no end) then file 2 appended: read file 2 alone. */
    size_t second = 0;
    for (size_t i = 0; i + 8 <= m2->len; i++)
        if (i > 0 && !memcmp(m2->p + i, "MTTRACE\0", 8)) {
            second = i;
            break;
        }
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    size_t got = 0, bad = 0;
    if (second &&
        mt_trace_open_mem(m2->p + second, m2->len - second, "second", 0, &r, err, sizeof err) == 0) {
        mt_trace_event ev;
        while (mt_trace_next(r, &ev) == 1) {
            mt_trace_event want = texpect(&evs[500 + got], START, 1);
            bad += !tsame(&ev, &want);
            got++;
        }
        bad += mt_trace_error(r) != NULL || !mt_trace_complete(r);
        mt_trace_close(r);
    }
    CHECK("second file of one writer stands alone", second && got == 500 && bad == 0);
    free(evs);
    tbuf_delete(m2);
}

/* The format's primitives against known values. */
/* trace_div against the division, for units from 1 ns to 4 s: n around
 * multiples of d, around powers of two, and at the bound 2^62 and past it. */
static void division(void)
{
    uint32_t units[] = {1,    2,    3,    7,       10,         100,         999,
                        1000, 1001, 4096, 1000000, 999999937u, 4000000000u, UINT32_MAX};
    uint64_t bad = 0, tried = 0;
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        uint32_t d = units[u];
        unsigned shift;
        uint64_t magic = trace_div_magic(d, &shift);
        uint64_t top = (1ull << TRACE_DIV_BITS) - 1;
        uint64_t ns[] = {0,       1,       d - 1,      d,           (uint64_t)d + 1, top,
                         top - 1, top + 1, UINT64_MAX, top / d * d, top / d * d - 1};
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++, tried++)
            bad += trace_div(ns[i], d, magic, shift) != ns[i] / d;
        for (unsigned b = 0; b < 64; b++)
            for (int k = -2; k <= 2; k++, tried++) {
                uint64_t n = (1ull << b) + (uint64_t)(int64_t)k;
                bad += trace_div(n, d, magic, shift) != n / d;
            }
        uint64_t x = 0x9E3779B97F4A7C15ull * (u + 1);
        for (int i = 0; i < 200000; i++, tried++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t q = (x >> (i % 40)) % ((top / d) + 1), n = q * d + (x >> 3) % d; /* n / d = q */
            bad += trace_div(n, d, magic, shift) != q || trace_div(n, d, magic, shift) != n / d;
        }
    }
    char label[128];
    snprintf(label, sizeof label, "division by the time unit as a multiply equals the division (%llu cases)",
             (unsigned long long)tried);
    CHECK(label, bad == 0);
}

static void primitives(void)
{
    division();
    CHECK("CRC32C of \"123456789\" is 0xE3069283", trace_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK("CRC32C in pieces", trace_crc32c(trace_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
    int ok = 1;
    uint64_t vals[] = {0, 1, 15, 16, 17, 31, 32, 100, 1000, 65535, 1ull << 40, UINT64_MAX, UINT64_MAX - 1};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        unsigned k1, k2;
        unsigned sym = trace_sym(vals[i], &k1);
        uint64_t base = trace_sym_base(sym, &k2);
        ok &= sym < 256 && k1 == k2 && base <= vals[i] && (k1 == 64 || vals[i] - base < (1ull << k1));
    }
    unsigned k;
    ok &= trace_sym(16, &k) == 16 && k == 2 && trace_sym(28, &k) == 19 && trace_sym(UINT64_MAX, &k) == 255 &&
          k == 61;
    CHECK("symbols: value = base + low bits, every bit length", ok);
}

/* Stacks of 1024 frames, thousands of them new in one chunk: the
 * definitions go out in DEFS chunks of their own before the events. */
static int big_stack(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *cat)
{
    (void)ctx;
    for (int i = 0; i < max; i++)
        out[i] = 0x7f0000000000ull + (uint64_t)id * 0x100000 + (uint64_t)i * 0x9e37;
    *cat = 3;
    return max;
}

static void writer_edges(void)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    host.stack = big_stack;
    mt_trace_write_config cfg = {.chunk_events = 100000, .chunk_age_ns = 3600000000000ull};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_begin(w);
    mt_trace_event bad = {.type = 9, .thread = 1};
    CHECK("writer: an unknown event type is refused", mt_trace_write_event(w, &bad) == -22);
    size_t n = 6000;
    for (uint32_t i = 0; i < n; i++) {
        mt_trace_event e = {.type = MT_TRACE_ALLOC,
                            .thread = 5,
                            .time_ns = i,
                            .size = i,
                            .id = i + 1,
                            .stack = i + 1,
                            .category = 3};
        mt_trace_write_event(w, &e);
    }
    size_t before = m->len;
    mt_trace_write_flush(w, 0);
    CHECK("writer: flush(0) keeps a young chunk open", m->len == before);
    mt_trace_write_flush(w, 1);
    CHECK("writer: flush(1) writes it", m->len > before);
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    size_t got = 0, ok = 0, defs = 0;
    if (mt_trace_open_mem(m->p, m->len, "big", MT_TRACE_PREFETCH, &r, err, sizeof err) == 0) {
        mt_trace_event ev;
        while (mt_trace_next(r, &ev) == 1) {
            const mt_trace_stack *s = mt_trace_stack_get(r, ev.stack);
            uint64_t f[1024];
            unsigned cat;
            big_stack(NULL, ev.stack, f, 1024, &cat);
            ok += s && s->nframes == 1024 && !memcmp(s->frames, f, sizeof f) && ev.size == got &&
                  ev.id == got + 1;
            got++;
        }
        for (size_t i = 0; i < mt_trace_index_count(r); i++)
            defs += mt_trace_index_get(r, i)->kind == 1;
        ok += mt_trace_error(r) != NULL;
        mt_trace_close(r);
    }
    CHECK("writer: 6000 stacks of 1024 frames in one chunk, DEFS chunks split, all back",
          got == n && ok == n && defs > 1);

    /* A chunk older than chunk_age_ns goes out at flush(0). */
    tbuf *m2 = tbuf_new();
    tbuf_host(m2, &host);
    cfg.chunk_age_ns = 1;
    w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_begin(w);
    mt_trace_event e = {.type = MT_TRACE_FREE, .thread = 5, .id = 7};
    mt_trace_write_event(w, &e);
    before = m2->len;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    mt_trace_write_flush(w, 0);
    CHECK("writer: flush(0) writes a chunk older than chunk_age_ns", m2->len > before);
    mt_trace_writer_destroy(w);
    tbuf_delete(m);
    tbuf_delete(m2);
}

int main(void)
{
    primitives();
    writer_edges();
    size_t n = 20000;
    mt_trace_event *evs = random_events(n);
    run("random", evs, n, (rt_opts){.chunk_events = 777}, 1);
    for (unsigned th = 2; th <= 4; th += 2) { /* encoder threads; flushes every 997 events */
        char label[64];
        snprintf(label, sizeof label, "random, %u encoder threads", th);
        run(label, evs, n, (rt_opts){.chunk_events = 777, .threads = th}, 1);
        snprintf(label, sizeof label, "random, tiny chunks, %u encoder threads", th);
        run(label, evs, 3000, (rt_opts){.chunk_events = 1, .level = 3, .threads = th}, 0);
        snprintf(label, sizeof label, "random, time unit 1000, %u encoder threads", th);
        run(label, evs, n, (rt_opts){.chunk_events = 4096, .unit = 1000, .threads = th}, 0);
    }
    run("random, one chunk", evs, n, (rt_opts){.level = 1}, 0);
    run("random, tiny chunks", evs, 3000, (rt_opts){.chunk_events = 1, .level = 19}, 0);
    run("random, time unit 1000", evs, n, (rt_opts){.chunk_events = 4096, .unit = 1000}, 0);
    /* Each chunk coding forced (times inline or as runs, low bits packed or aligned). */
    for (unsigned f = 0; f <= TRACE_F_KNOWN; f++) {
        char label[64];
        snprintf(label, sizeof label, "random, coding %u", f);
        run(label, evs, n, (rt_opts){.chunk_events = 1000, .coding = 0x100 | f}, 0);
        snprintf(label, sizeof label, "random, coding %u, time unit 1000", f);
        run(label, evs, n, (rt_opts){.chunk_events = 999, .unit = 1000, .coding = 0x100 | f}, 0);
    }
    free(evs);

    gen_state g;
    gen_init(&g, 2, 100000, 4096, 0xFFFF0000u);
    evs = calloc(300000, sizeof *evs);
    n = 0;
    while (n < 300000 && gen_next(&g, &evs[n]))
        n++;
    gen_free(&g);
    for (size_t i = 0; i < n; i++)
        evs[i].time_ns += START;
    run("mbench-like", evs, n, (rt_opts){0}, 0);
    run("mbench-like, 2 encoder threads", evs, n, (rt_opts){.chunk_events = 16384, .threads = 2}, 0);
    run("mbench-like, 4 encoder threads, unit 1000", evs, n,
        (rt_opts){.chunk_events = 8192, .unit = 1000, .threads = 4}, 0);
    run("mbench-like, 64k chunks", evs, n, (rt_opts){.chunk_events = 65536, .unit = 1000}, 0);
    run("mbench-like, 4k chunks, runs + aligned", evs, n,
        (rt_opts){.chunk_events = 4096, .unit = 1000, .coding = 0x100 | TRACE_F_TIME_RUNS | TRACE_F_ALIGNED},
        0);
    free(evs);

    gen_init(&g, 200, 200, 64, 1);
    evs = calloc(80000, sizeof *evs);
    n = 0;
    while (n < 80000 && gen_next(&g, &evs[n]))
        n++;
    gen_free(&g);
    run("200 threads", evs, n, (rt_opts){.chunk_events = 5000}, 0);
    run("200 threads, 3 encoder threads", evs, n, (rt_opts){.chunk_events = 5000, .threads = 3}, 0);
    free(evs);

    /* An empty trace: header, end, index, trailer. */
    run("empty", NULL, 0, (rt_opts){0}, 0);
    run("empty, 2 encoder threads", NULL, 0, (rt_opts){.threads = 2}, 0);
    two_files();
    return failures != 0;
}
