/* test_threads.c — the trace writer's encoder threads (cfg.threads): the
 * same events read back the same with 1, 2 and 4 threads (events, stacks,
 * categories); N threads give the same bytes run after run whatever the
 * timing; 0 and 1 give the same bytes; partial batches at flush and
 * finish; many small chunks; a failing write (the lost count matches what
 * the file holds); the host's spawn, and a writer that cannot start its
 * threads; a writer destroyed in a fork child. */
#include "unit.h"
#include "trace/trace_gen.h"
#include "trace/trace_test.h"

#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct wopts {
    unsigned threads;
    uint32_t chunk_events;
    uint32_t unit;
    int jitter;         /* the host's writes sleep now and then */
    long fail_after;    /* > 0: writes fail past this many bytes */
    size_t flush_every; /* flush(1) after every this many events (0: never) */
    size_t batch;       /* > 0: events handed in runs of 1 to this many (mt_trace_write_events) */
    int (*spawn)(void *, void *(*)(void *), void *, pthread_t *);
} wopts;

static int jitter_write(void *ctx, const void *buf, size_t n)
{
    static unsigned k;
    if (++k % 3 == 0) {
        struct timespec ts = {0, 20000 + (long)(k % 7) * 10000};
        nanosleep(&ts, NULL);
    }
    return tbuf_write(ctx, buf, n);
}

static tbuf *write_file(const mt_trace_event *evs, size_t n, const wopts *o, mt_trace_write_stats *st,
                        int *errors)
{
    tbuf *m = tbuf_new();
    m->fail_after = o->fail_after > 0 ? o->fail_after : -1;
    mt_trace_host host;
    tbuf_host(m, &host);
    if (o->jitter)
        host.write = jitter_write;
    host.spawn = o->spawn;
    mt_trace_write_config cfg = {.chunk_events = o->chunk_events,
                                 .chunk_age_ns = 3600000000000ull, /* no flush by age: timing-free bytes */
                                 .pid = 77,
                                 .time_unit_ns = o->unit,
                                 .threads = o->threads};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    if (!w) {
        memset(st, 0, sizeof *st);
        return m;
    }
    mt_trace_write_meta(w, "exe", "/bin/threads");
    mt_trace_write_begin(w);
    int err = 0;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n;) {
        /* A run, cut at the next forced flush: the same flushes after the
         * same events as one event at a time. */
        size_t k = o->batch ? 1 + gen_xorshift(&s) % o->batch : 1;
        if (k > n - i)
            k = n - i;
        if (o->flush_every && k > o->flush_every - i % o->flush_every)
            k = o->flush_every - i % o->flush_every;
        err += (o->batch ? mt_trace_write_events(w, &evs[i], k) : mt_trace_write_event(w, &evs[i])) < 0;
        size_t first = i;
        i += k;
        if (o->flush_every && i % o->flush_every == 0)
            err += mt_trace_write_flush(w, 1) < 0;
        if (first % 5003 == 0 || first / 5003 != (i - 1) / 5003) /* the run held a multiple of 5003 */
            err += mt_trace_write_flush(w, 0) < 0; /* writes what is finished, never the open batch */
    }
    err += mt_trace_write_finish(w, NULL, NULL, 0) < 0;
    mt_trace_write_get_stats(w, st);
    mt_trace_writer_destroy(w);
    if (errors)
        *errors = err;
    return m;
}

/* Reads m back: its events (up to max) into out, the count in *got; the
 * number of events whose stack or category definition differs from the
 * host's. 0: complete and no error. */
static int read_back(const tbuf *m, mt_trace_event *out, size_t max, size_t *got, size_t *bad_defs)
{
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    *got = 0;
    *bad_defs = 0;
    if (mt_trace_open_mem(m->p, m->len, "threads", MT_TRACE_PREFETCH, &r, err, sizeof err) < 0)
        return -1;
    mt_trace_event ev;
    while (mt_trace_next(r, &ev) == 1) {
        if (*got < max)
            out[*got] = ev;
        (*got)++;
        const char *cn = mt_trace_category_name(r, ev.category), *want = tcat(NULL, ev.category);
        if ((cn || want) && (!cn || !want || strcmp(cn, want)))
            (*bad_defs)++;
        if (ev.stack && (ev.type == MT_TRACE_ALLOC || ev.type == MT_TRACE_REALLOC)) {
            const mt_trace_stack *s = mt_trace_stack_get(r, ev.stack);
            uint64_t f[64];
            unsigned cat = 0;
            int nf = tstack_frames(ev.stack, f, 64, &cat);
            if (!s || s->nframes != (uint32_t)nf || s->category != cat ||
                memcmp(s->frames, f, (size_t)nf * 8))
                (*bad_defs)++;
        }
    }
    int rc = mt_trace_error(r) || !mt_trace_complete(r) || !mt_trace_meta(r, "exe") ? 1 : 0;
    mt_trace_close(r);
    return rc;
}

static mt_trace_event *generate(int threads, long ops, long window, int skew, size_t *n)
{
    gen_state g;
    gen_init(&g, threads, ops, window, 0xFFFFF000u);
    g.skew = skew;
    size_t cap = (size_t)threads * (size_t)ops * 2 + 16;
    mt_trace_event *evs = calloc(cap, sizeof *evs);
    *n = 0;
    while (*n < cap && gen_next(&g, &evs[*n]))
        (*n)++;
    gen_free(&g);
    return evs;
}

/* Phases of 1500 events that code differently: many at one time with
 * repeated sizes (time runs, the repetitive level), then spread times and
 * random sizes; so each chunk's coding depends on the chunks before. */
static mt_trace_event *phases(size_t n)
{
    mt_trace_event *evs = calloc(n, sizeof *evs);
    uint64_t s = 0x1234567, t = 1000000;
    for (size_t i = 0; i < n; i++) {
        int calm = (i / 1500) % 2 == 0;
        uint64_t r = gen_xorshift(&s);
        t += calm ? (r % 16 == 0 ? 1000 : 0) : 500 + r % 100000;
        evs[i] = (mt_trace_event){.type = MT_TRACE_ALLOC,
                                  .category = 1,
                                  .thread = 7 + (uint32_t)(r >> 60) % 3,
                                  .time_ns = t,
                                  .size = calm ? 32 : (r >> 20) % 100000,
                                  .id = (uint32_t)i + 1,
                                  .stack = calm ? 3 : 1 + (uint32_t)(r >> 40) % 50};
        if (i % 3 == 2) {
            evs[i].type = MT_TRACE_FREE;
            evs[i].id = (uint32_t)(i - (calm ? 1 : 1 + (r >> 8) % (i < 100 ? 1 : 100)));
        }
    }
    return evs;
}

/* Times seconds apart (and some going back seconds), and more threads
 * than a record's head holds: the records' escapes. */
static mt_trace_event *far_apart(size_t n)
{
    mt_trace_event *evs = calloc(n, sizeof *evs);
    uint64_t s = 0xfeed, t = 1000000;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = gen_xorshift(&s);
        t += i % 97 == 0 ? 5000000000ull + r % 1000 : r % 300;
        evs[i] = (mt_trace_event){.type = (uint8_t)(1 + r % 5),
                                  .category = 2,
                                  .thread = (uint32_t)i, /* each event a new thread */
                                  .time_ns = i % 101 == 0 ? t - 3000000000ull : t,
                                  .size = r % 7 == 0 ? r >> 3 : r % 5000,
                                  .id = (uint32_t)i + 1,
                                  .old_id = (uint32_t)i,
                                  .stack = 1 + (uint32_t)(r >> 50) % 40,
                                  .address = r};
    }
    return evs;
}

static size_t same_events(const mt_trace_event *a, const mt_trace_event *b, size_t n)
{
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += tsame(&a[i], &b[i]);
    return same;
}

/* One event sequence written with 0, 1, 2 and 4 threads. */
static void sequence(const char *name, const mt_trace_event *evs, size_t n, wopts o)
{
    char label[200];
    mt_trace_event *truth = calloc(n + 1, sizeof *truth), *back = calloc(n + 1, sizeof *back),
                   *one = calloc(n + 1, sizeof *one);
    uint32_t unit = o.unit ? o.unit : 1;
    for (size_t i = 0; i < n; i++)
        truth[i] = texpect(&evs[i], 0, unit);
    mt_trace_write_stats st;
    size_t got, bad_defs;
    o.threads = 0;
    tbuf *def = write_file(evs, n, &o, &st, NULL);
    o.threads = 1;
    tbuf *m1 = write_file(evs, n, &o, &st, NULL);
    int rc = read_back(m1, one, n, &got, &bad_defs);
    snprintf(label, sizeof label, "%s: 1 thread: every event and definition back", name);
    CHECK(label, rc == 0 && got == n && same_events(one, truth, n) == n && bad_defs == 0);
    snprintf(label, sizeof label, "%s: threads 1 writes the bytes of the default (0)", name);
    CHECK(label, def->len == m1->len && !memcmp(def->p, m1->p, m1->len));
    for (unsigned th = 2; th <= 4; th *= 2) {
        o.threads = th;
        o.jitter = 0;
        tbuf *a = write_file(evs, n, &o, &st, NULL);
        int ok_stats = st.events == n && st.events_lost_to_errors == 0 && st.bytes == a->len && st.chunks > 0;
        o.jitter = 1;
        tbuf *b = write_file(evs, n, &o, &st, NULL);
        rc = read_back(a, back, n, &got, &bad_defs);
        snprintf(label, sizeof label, "%s: %u threads: events and definitions as with 1, event by event",
                 name, th);
        CHECK(label, rc == 0 && got == n && same_events(back, one, n) == n && bad_defs == 0 && ok_stats);
        snprintf(label, sizeof label, "%s: %u threads: the same bytes on two runs of different timing", name,
                 th);
        CHECK(label, a->len == b->len && !memcmp(a->p, b->p, a->len));
        /* The dispatcher hands the writer runs of events: the same file. */
        o.jitter = 0;
        o.batch = 97;
        tbuf *c = write_file(evs, n, &o, &st, NULL);
        o.batch = 0;
        snprintf(label, sizeof label,
                 "%s: %u threads: runs of 1 to 97 events (mt_trace_write_events) write the same bytes", name,
                 th);
        CHECK(label, a->len == c->len && !memcmp(a->p, c->p, a->len) && st.events == n);
        tbuf_delete(c);
        if (th == 2)
            printf("  %s: %zu bytes with 1 thread, %zu with 2\n", name, m1->len, a->len);
        tbuf_delete(a);
        tbuf_delete(b);
    }
    tbuf_delete(def);
    tbuf_delete(m1);
    free(truth);
    free(back);
    free(one);
}

/* The file cut by a failed write: events lost = events not in the file. */
static void failing_write(const mt_trace_event *evs, size_t n)
{
    mt_trace_write_stats st;
    wopts o = {.chunk_events = 2048, .threads = 0};
    tbuf *full = write_file(evs, n, &o, &st, NULL);
    size_t len = full->len;
    tbuf_delete(full);
    int ok = 1;
    for (unsigned th = 2; th <= 4; th += 2)
        for (int k = 1; k <= 4; k++) {
            o.threads = th;
            o.fail_after = (long)(len * (size_t)k / 5);
            int errors = 0;
            tbuf *m = write_file(evs, n, &o, &st, &errors);
            mt_trace_reader *r;
            char err[MT_TRACE_ERR_MAX];
            size_t got = 0;
            if (mt_trace_open_mem(m->p, m->len, "cut", 0, &r, err, sizeof err) == 0) {
                mt_trace_event ev;
                while (mt_trace_next(r, &ev) == 1)
                    got++;
                mt_trace_close(r);
            }
            int good = st.events == n && got + st.events_lost_to_errors == n && got > 0 && errors > 0 &&
                       st.bytes <= m->len && st.events_lost_to_errors > 0;
            if (!good)
                printf("  %u threads, cut at %ld: %zu events back, %llu lost of %zu, %d errors\n", th,
                       o.fail_after, got, (unsigned long long)st.events_lost_to_errors, n, errors);
            ok &= good;
            tbuf_delete(m);
        }
    CHECK("failed write with 2 and 4 threads: events back + events lost = events handed in", ok);
}

static int spawned;
static int counting_spawn(void *ctx, void *(*fn)(void *), void *arg, pthread_t *out)
{
    (void)ctx;
    __atomic_add_fetch(&spawned, 1, __ATOMIC_RELAXED);
    return -pthread_create(out, NULL, fn, arg);
}

static int failing_spawn(void *ctx, void *(*fn)(void *), void *arg, pthread_t *out)
{
    (void)ctx;
    (void)fn;
    (void)arg;
    (void)out;
    return -EAGAIN;
}

static int second_fails_spawn(void *ctx, void *(*fn)(void *), void *arg, pthread_t *out)
{
    if (__atomic_add_fetch(&spawned, 1, __ATOMIC_RELAXED) == 2)
        return -EAGAIN;
    return counting_spawn(ctx, fn, arg, out);
}

static void spawning(const mt_trace_event *evs, size_t n)
{
    mt_trace_write_stats st;
    size_t got, bad_defs;
    mt_trace_event *back = calloc(n + 1, sizeof *back);
    mt_trace_event *truth = calloc(n + 1, sizeof *truth);
    for (size_t i = 0; i < n; i++)
        truth[i] = texpect(&evs[i], 0, 1);
    wopts o = {.chunk_events = 1000, .threads = 3, .spawn = counting_spawn};
    spawned = 0;
    tbuf *m = write_file(evs, n, &o, &st, NULL);
    int rc = read_back(m, back, n, &got, &bad_defs);
    CHECK("the host's spawn starts each of the 3 encoder threads",
          spawned == 3 && rc == 0 && got == n && same_events(back, truth, n) == n);
    tbuf_delete(m);
    const char *what[] = {"no thread starts", "the second thread does not start"};
    for (int k = 0; k < 2; k++) {
        o.spawn = k ? second_fails_spawn : failing_spawn;
        spawned = 0;
        m = write_file(evs, n, &o, &st, NULL);
        rc = read_back(m, back, n, &got, &bad_defs);
        char label[160];
        snprintf(label, sizeof label, "%s: coded on the caller's thread, every event back", what[k]);
        CHECK(label, rc == 0 && got == n && same_events(back, truth, n) == n && bad_defs == 0 &&
                         st.events == n && st.events_lost_to_errors == 0 && st.bytes == m->len);
        tbuf_delete(m);
        /* Handed in runs: the fall-back comes in the middle of one, and
         * the rest of that run is coded on the caller's thread. */
        o.batch = 1000;
        spawned = 0;
        m = write_file(evs, n, &o, &st, NULL);
        o.batch = 0;
        rc = read_back(m, back, n, &got, &bad_defs);
        snprintf(label, sizeof label, "%s, events in runs of up to 1000: every event back", what[k]);
        CHECK(label, rc == 0 && got == n && same_events(back, truth, n) == n && bad_defs == 0 &&
                         st.events == n && st.events_lost_to_errors == 0 && st.bytes == m->len);
        tbuf_delete(m);
    }
    free(back);
    free(truth);
}

/* Flush and finish with partly filled batches: what flush(1) wrote reads
 * back whole, before finish. */
static void partial(const mt_trace_event *evs, size_t n)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {.chunk_events = 4096, .chunk_age_ns = 3600000000000ull, .threads = 2};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_meta(w, "exe", "/bin/threads");
    mt_trace_write_begin(w);
    size_t half = n / 2 + 123, ok_prefix = 0, got = 0;
    for (size_t i = 0; i < half; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_flush(w, 1);
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    if (mt_trace_open_mem(m->p, m->len, "prefix", 0, &r, err, sizeof err) == 0) {
        mt_trace_event ev;
        while (mt_trace_next(r, &ev) == 1) {
            mt_trace_event want = texpect(&evs[got], 0, 1);
            ok_prefix += got < half && tsame(&ev, &want);
            got++;
        }
        mt_trace_close(r);
    }
    CHECK("2 threads: after flush(1) the file holds every event so far (a partial batch too)",
          got == half && ok_prefix == half);
    for (size_t i = half; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    size_t bad_defs;
    mt_trace_event *back = calloc(n + 1, sizeof *back);
    int rc = read_back(m, back, n, &got, &bad_defs);
    size_t same = 0;
    for (size_t i = 0; i < n && i < got; i++) {
        mt_trace_event want = texpect(&evs[i], 0, 1);
        same += tsame(&back[i], &want);
    }
    CHECK("2 threads: finish writes the partial last batch", rc == 0 && got == n && same == n);
    free(back);
    tbuf_delete(m);
}

/* A fork child that only destroys the writer (the parent's threads are
 * not there): it exits cleanly, and the parent's file is whole. */
static void forked(const mt_trace_event *evs, size_t n)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {.chunk_events = 1024, .chunk_age_ns = 3600000000000ull, .threads = 2};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_meta(w, "exe", "/bin/threads");
    mt_trace_write_begin(w);
    size_t half = n / 2;
    for (size_t i = 0; i < half; i++)
        mt_trace_write_event(w, &evs[i]); /* batches in flight now */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        mt_trace_writer_destroy(w);
        _exit(0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK("a fork child destroys the writer and exits 0",
          pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (size_t i = half; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    mt_trace_event *back = calloc(n + 1, sizeof *back);
    size_t got, bad_defs, same = 0;
    int rc = read_back(m, back, n, &got, &bad_defs);
    for (size_t i = 0; i < n && i < got; i++) {
        mt_trace_event want = texpect(&evs[i], 0, 1);
        same += tsame(&back[i], &want);
    }
    CHECK("after the fork the parent finishes its file, every event back", rc == 0 && got == n && same == n);
    free(back);
    tbuf_delete(m);
}

/* A writer's second file: the bytes of a new writer's for the same events
 * up to its end record (whose writer statistics count both files). */
static void second_file(const mt_trace_event *evs, size_t n)
{
    tbuf *a = tbuf_new(), *b = tbuf_new();
    mt_trace_host ha, hb;
    tbuf_host(a, &ha);
    tbuf_host(b, &hb);
    mt_trace_write_config cfg = {.chunk_events = 1000, .chunk_age_ns = 3600000000000ull, .threads = 2};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &ha);
    mt_trace_write_begin(w);
    for (size_t i = 0; i < n / 3; i++)
        mt_trace_write_event(w, &evs[i]); /* batches in flight, the file not finished */
    size_t first = a->len;
    mt_trace_write_begin(w);
    for (size_t i = n / 3; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    w = mt_trace_writer_create(&cfg, &hb);
    mt_trace_write_begin(w);
    for (size_t i = n / 3; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    size_t at = 0; /* the second header */
    for (size_t i = first; i + 8 <= a->len && !at; i++)
        if (!memcmp(a->p + i, "MTTRACE", 7))
            at = i;
    size_t end = 0;
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    if (mt_trace_open_mem(b->p, b->len, "b", 0, &r, err, sizeof err) == 0) {
        for (size_t i = 0; i < mt_trace_index_count(r); i++)
            if (mt_trace_index_get(r, i)->kind == 3)
                end = mt_trace_index_get(r, i)->offset;
        mt_trace_close(r);
    }
    CHECK("2 threads: a writer's second file has the bytes of a new writer's",
          at && end > 64 && a->len - at >= end && !memcmp(a->p + at, b->p, end));
    tbuf_delete(a);
    tbuf_delete(b);
}

/* Definitions past 8 MB close a batch early; all still precede their use. */
static int big_stack(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *cat)
{
    (void)ctx;
    for (int i = 0; i < max; i++)
        out[i] = 0x7f0000000000ull + (uint64_t)id * 0x100000 + (uint64_t)i * 0x9e37;
    *cat = 3;
    return max;
}

static void big_defs(void)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    host.stack = big_stack;
    mt_trace_write_config cfg = {.chunk_events = 100000, .threads = 2};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_begin(w);
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
    mt_trace_write_finish(w, NULL, NULL, 0);
    mt_trace_writer_destroy(w);
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    size_t got = 0, ok = 0, defs = 0;
    if (mt_trace_open_mem(m->p, m->len, "big", 0, &r, err, sizeof err) == 0) {
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
    CHECK("2 threads: 6000 stacks of 1024 frames, DEFS chunks split, all back",
          got == n && ok == n && defs > 1);
    tbuf_delete(m);
}

int main(void)
{
    size_t n;
    mt_trace_event *evs = generate(2, 60000, 4096, 0, &n);
    sequence("mbench-like", evs, n, (wopts){.chunk_events = 8192});
    sequence("mbench-like, unit 1000, flush(1) every 10007", evs, n,
             (wopts){.chunk_events = 4096, .unit = 1000, .flush_every = 10007});
    sequence("mbench-like, chunks of 64", evs, 40000, (wopts){.chunk_events = 64});
    failing_write(evs, n);
    spawning(evs, 30000);
    partial(evs, 30000);
    forked(evs, 20000);
    second_file(evs, 30000);
    free(evs);
    evs = generate(4, 20000, 512, 1, &n);
    sequence("skewed, 4 threads", evs, n, (wopts){.chunk_events = 3000});
    free(evs);
    evs = generate(150, 150, 64, 0, &n);
    sequence("150 threads, chunks of 64", evs, n, (wopts){.chunk_events = 64, .flush_every = 999});
    free(evs);
    evs = phases(60000);
    sequence("phases of different coding, unit 1000", evs, 60000,
             (wopts){.chunk_events = 1000, .unit = 1000});
    sequence("phases of different coding", evs, 60000, (wopts){.chunk_events = 700});
    free(evs);
    n = 530000;
    evs = far_apart(n);
    mt_trace_event *back = calloc(n, sizeof *back);
    size_t same = 0, got, bad_defs;
    mt_trace_write_stats st;
    tbuf *m = write_file(evs, n, &(wopts){.chunk_events = 40000, .threads = 2}, &st, NULL);
    int rc = read_back(m, back, n, &got, &bad_defs);
    for (size_t i = 0; i < n && i < got; i++) {
        mt_trace_event want = texpect(&evs[i], 0, 1);
        same += tsame(&back[i], &want);
    }
    CHECK("2 threads: times seconds apart, 530000 threads, sizes past 4 GiB: every event back",
          rc == 0 && got == n && same == n && bad_defs == 0);
    tbuf_delete(m);
    free(back);
    free(evs);
    big_defs();
    return failures != 0;
}
