/* test_time_order.c — a time-ordered session (xe_config.time_order, what
 * trace mode uses) with per-CPU buffers: no event stamped before a
 * watermark arrives after it, so a target that sorts what it holds by the
 * engine's clock and passes on what is older than each watermark passes
 * every event on in an order that respects causality.
 *
 * A token passes between threads (its holder fires an event carrying the
 * token's number, then hands the token on, so each token event happens
 * before the next, on whatever CPU), while other producers fire freely
 * into small buffers, and every 8th sealer stalls between sealing and
 * queueing (a test hook). The target checks: no event arrives stamped
 * before the last watermark; in the merged order token numbers increase
 * and each producer's own sequence too; every event arrives once under
 * NO_EVENT_LOSS; watermarks came during the run, not only at the stop.
 * Runs under alarm(). */
#include <pthread.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "xe/xe.h"
#include "xe/xe_internal.h"

#define TOKENS 3
#define NOISE 3
#define TOKEN_EVENTS 20000u
#define NOISE_EVENTS 150000u
#define TOTAL (TOKEN_EVENTS + NOISE * NOISE_EVENTS)

#include "order_producers.h"

typedef struct held {
    uint64_t tsc, key, site, value;
} held;

static held *pending; /* delivered, not yet past a watermark */
static size_t npending;
static uint64_t last_mark, late, marks, marks_before_stop;
static _Atomic int stopping;

static int rec_init(xe_target *t, const char *p, char *w, size_t wl)
{
    (void)t, (void)p, (void)w, (void)wl;
    return 0;
}

static void rec_deliver(xe_target *t, const xe_event *ev)
{
    (void)t;
    if (ev->tsc < last_mark)
        late++;
    pending[npending++] = (held){ev->tsc, ev->key, ev->site, ev->value};
}

static int by_tsc(const void *a, const void *b)
{
    const held *x = a, *y = b;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static void rec_watermark(xe_target *t, uint64_t tsc)
{
    (void)t;
    qsort(pending, npending, sizeof *pending, by_tsc);
    size_t n = 0;
    for (; n < npending && pending[n].tsc < tsc; n++)
        order_seen(pending[n].key, pending[n].site, pending[n].value);
    memmove(pending, pending + n, (npending - n) * sizeof *pending);
    npending -= n;
    if (tsc > last_mark)
        last_mark = tsc;
    marks++;
    if (!atomic_load(&stopping))
        marks_before_stop++;
}

static const xe_target_ops recorder = {
    .name = "recorder", .init = rec_init, .deliver = rec_deliver, .watermark = rec_watermark};

/* ---- pages given back when the dispatcher falls idle ---------------------- */

static _Atomic uint64_t counted;
static void count_deliver(xe_target *t, const xe_event *ev)
{
    (void)t, (void)ev;
    atomic_fetch_add(&counted, 1);
}
static const xe_target_ops counter = {.name = "counter", .init = rec_init, .deliver = count_deliver};

/* Resident pages of the session's regular buffers, as the kernel says. */
static size_t resident_kb(const xe_session *s)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = (size_t)s->nbuf * s->regular_stride, pages = (bytes + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(pages);
    size_t n = 0;
    if (vec && mincore(s->regular_base, bytes, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
    free(vec);
    return n * (size_t)page / 1024;
}

/* A burst fills every buffer (1 MB each); once the events are through and
 * nothing more comes, each free buffer keeps at most 256 KB (+ its header
 * page) resident. */
static void idle_trim(void)
{
    xe_config c;
    xe_config_defaults(&c);
    strcpy(c.name, "idle_trim");
    c.mode = XE_PART_PER_CPU;
    c.cpus = 2; /* 5 buffers */
    c.max_memory = 5u << 20;
    c.time_order = 1;
    c.retention = XE_NO_EVENT_LOSS;
    c.ntargets = 1;
    c.targets[0].ops = &counter;
    char why[256] = "";
    xe_session *s = NULL;
    if (xe_session_create(&c, &s, why, sizeof why) < 0) {
        printf("FAIL idle trim: create: %s\n", why);
        failures++;
        return;
    }
    xe_session_start(s);
    const uint64_t burst = 400000; /* ~32 MB of records: every buffer filled several times */
    xe_event ev = {.type = XE_EV_ALLOC, .size = 16};
    size_t after_burst = 0; /* the most resident during the burst (the dispatcher may trim right after it) */
    for (uint64_t i = 0; i < burst; i++) {
        ev.key = i;
        xe_fire(s, &ev);
        if (i % 50000 == 49999) {
            size_t r = resident_kb(s);
            after_burst = r > after_burst ? r : after_burst;
        }
    }
    size_t kb = resident_kb(s);
    size_t bound = (size_t)s->nbuf * (256 + 4 + 4);
    /* The dispatcher trims once it has nothing in flight: a few sweeps. */
    for (int i = 0; i < 2000 && (kb > bound || atomic_load(&counted) < burst); i++) { /* up to 10 s */
        usleep(5000);
        kb = resident_kb(s);
    }
    CHECK("idle trim: every event of the burst passed on", atomic_load(&counted) == burst);
    CHECK("idle trim: the burst made the buffers resident", after_burst > bound);
    char name[200];
    snprintf(name, sizeof name,
             "idle trim: idle buffers keep <= %zu KB resident (kernel: %zu KB, %zu KB at most in the burst)",
             bound, kb, after_burst);
    CHECK(name, kb <= bound);
    xe_session_stop(s);
    xe_session_drop(s);
}

int main(void)
{
    alarm(120);
    pending = malloc(sizeof *pending * (TOTAL + 16));
    xe_config c;
    xe_config_defaults(&c);
    strcpy(c.name, "time_order");
    c.mode = XE_PART_PER_CPU;
    c.cpus = 2;               /* 5 buffers */
    c.max_memory = 5 * 65536; /* of 64 KB - 205: ~800 events each */
    c.time_order = 1;
    c.retention = XE_NO_EVENT_LOSS;
    c.max_dispatch_latency_ns = 500000000u;
    c.ntargets = 1;
    c.targets[0].ops = &recorder;
    char why[256] = "";
    if (xe_session_create(&c, &sess, why, sizeof why) < 0) {
        printf("FAIL create: %s\n", why);
        return 1;
    }
    xe_test_before_enqueue = slow_sealer;
    xe_session_start(sess);
    pthread_t th[TOKENS + NOISE];
    for (unsigned i = 0; i < TOKENS; i++)
        pthread_create(&th[i], NULL, token_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < NOISE; i++)
        pthread_create(&th[TOKENS + i], NULL, noise_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < TOKENS + NOISE; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stopping, 1);
    xe_session_stop(sess);
    CHECK("time order: no event arrives stamped before a watermark given", late == 0);
    CHECK("time order: every token event passed on", token_count == TOKEN_EVENTS);
    CHECK("time order: every other event passed on", noise_count == (uint64_t)NOISE * NOISE_EVENTS);
    CHECK("time order: token events (each after the one before, on any CPU) in order",
          token_out_of_order == 0);
    CHECK("time order: each producer's events in its order", noise_out_of_order == 0);
    CHECK("time order: watermarks came while the producers ran", marks_before_stop > 2);
    CHECK("time order: nothing left held after the stop", npending == 0);
    printf(
        "# late %lu, token out of order %lu, noise out of order %lu, %lu watermarks (%lu before the stop)\n",
        (unsigned long)late, (unsigned long)token_out_of_order, (unsigned long)noise_out_of_order,
        (unsigned long)marks, (unsigned long)marks_before_stop);
    xe_session_drop(sess);
    free(pending);
    xe_test_before_enqueue = NULL;
    idle_trim();
    return failures != 0;
}
