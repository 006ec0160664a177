/* test_fire_fields.c — xe_fire_fields, the fire of the agent's hooks
 * (src/xe/xe_fire.c), which writes its record from its arguments: the
 * fields fired are the fields every kind of target receives (an
 * asynchronous one; beside a synchronous one, which sends the fire the
 * event's way; one that takes records as they lie, and the events it
 * declines), the thread is the firing one, and event_mask, a predicate
 * and a stopped session leave out what xe_fire would. The truth is the
 * list of fields fired, kept by the test. */
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "unit.h"
#include "xe/xe.h"

#define MAXE 64
typedef struct seen {
    xe_event ev[MAXE];
    int n;
} seen;
static seen async_seen, sync_seen, rec_seen;
static int rec_decline, rec_calls; /* declining: every other record */
static int short_run;              /* the session's allocation events in short records */
static int alloc_entry;            /* allocation events fired by xe_fire_alloc (no addresses) */
static int rec_short, rec_full;    /* records taken, by length */

static void add(seen *s, const xe_event *ev)
{
    if (s->n < MAXE) {
        s->ev[s->n] = *ev;
        s->ev[s->n].data = NULL;
    }
    s->n++;
}
static int init_ok(xe_target *t, const char *p, char *w, size_t wl)
{
    (void)t, (void)p, (void)w, (void)wl;
    return 0;
}
static void async_deliver(xe_target *t, const xe_event *ev)
{
    (void)t;
    add(&async_seen, ev);
}
static void sync_deliver(xe_target *t, const xe_event *ev)
{
    (void)t;
    add(&sync_seen, ev);
}
static void rec_take(const xe_rec *r, uint32_t len)
{
    int full = len >= XE_RECORD_FIXED; /* a short record has nothing past value */
    rec_short += len == XE_RECORD_SHORT;
    rec_full += full;
    xe_event e = {.type = r->type,
                  .category = r->category,
                  .tid = r->tid,
                  .size = r->size,
                  .address = xe_rec_address(r),
                  .old_address = full ? r->old_address : 0,
                  .site = r->site,
                  .key = r->key,
                  .value = r->value,
                  .data_len = full ? r->data_len : 0,
                  .tsc = r->tsc};
    add(&rec_seen, &e);
}
/* A run of records: taken up to the first one declined. */
static uint64_t recs_take(xe_target *t, const char *recs, uint64_t bytes)
{
    (void)t;
    uint64_t at = 0;
    while (at < bytes) {
        const xe_rec *r = (const xe_rec *)(recs + at);
        if (rec_decline && (rec_calls++ & 1))
            break; /* async_deliver gets it as an event */
        uint32_t len = xe_rec_len(r);
        rec_take(r, len);
        at += len;
    }
    return at;
}
static const xe_target_ops async_t = {.name = "async", .init = init_ok, .deliver = async_deliver};
static const xe_target_ops sync_t = {
    .name = "sync", .synchronous = 1, .init = init_ok, .deliver = sync_deliver};
static const xe_target_ops rec_t = {
    .name = "records", .init = init_ok, .deliver = async_deliver, .deliver_recs = recs_take};

typedef struct fired {
    unsigned type, cat;
    uint64_t size, address, old, site, key, value;
} fired;
/* Every field distinct, key unique per event. */
static const fired fires[] = {
    {XE_EV_ALLOC, 3, 100, 0x1000, 0, 7, 11, 0}, {XE_EV_REALLOC, 4, 300, 0x2000, 0x1000, 8, 12, 11},
    {XE_EV_FREE, 4, 300, 0x2000, 0, 0, 13, 0},  {XE_EV_ALLOC, 5, 50, 0x3000, 0, 9, 14, 0},
    {XE_EV_MMAP, 6, 8192, 0x7000, 0, 0, 15, 0},
};
#define NFIRES (int)(sizeof fires / sizeof fires[0])

static uint32_t my_tid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

/* In a short_allocs session an allocation event comes without its
 * addresses; a mapping keeps its own. */
static int same(const xe_event *e, const fired *f)
{
    int no_addresses = (short_run || alloc_entry) && f->type >= XE_EV_ALLOC && f->type <= XE_EV_REALLOC;
    uint64_t address = no_addresses ? 0 : f->address, old = no_addresses ? 0 : f->old;
    return e->type == f->type && e->category == f->cat && e->size == f->size && e->address == address &&
           e->old_address == old && e->site == f->site && e->key == f->key && e->value == f->value &&
           e->data_len == 0 && e->tid == my_tid();
}

/* How many of the fires whose bit is in `want` are in s, once each, and
 * nothing else. */
static int matches(const seen *s, unsigned want)
{
    int n = 0;
    for (int i = 0; i < NFIRES; i++) {
        if (!(want >> i & 1))
            continue;
        int times = 0;
        for (int k = 0; k < s->n && k < MAXE; k++)
            times += s->ev[k].key == fires[i].key && same(&s->ev[k], &fires[i]);
        n += times == 1;
    }
    return n == __builtin_popcount(want) && s->n == n;
}

static xe_session *session(const xe_target_ops *a, const xe_target_ops *b, int time_order, const char *extra)
{
    static xe_config c;
    char why[256] = "";
    xe_config_defaults(&c);
    if (extra && xe_config_parse(extra, &c, why, sizeof why) != 0) {
        printf("# parse %s: %s\n", extra, why);
        return NULL;
    }
    strcpy(c.name, "fire-fields");
    c.max_dispatch_latency_ns = XE_LATENCY_INFINITE;
    c.short_allocs = short_run;
    if (time_order) {
        c.time_order = 1;
        c.mode = XE_PART_PER_CPU;
        c.retention = XE_NO_EVENT_LOSS;
    }
    c.ntargets = b ? 2 : 1;
    c.targets[0].ops = a;
    c.targets[0].params[0] = '\0';
    if (b) {
        c.targets[1].ops = b;
        c.targets[1].params[0] = '\0';
    }
    xe_session *s = NULL;
    if (xe_session_create(&c, &s, why, sizeof why) != 0 || xe_session_start(s) != 0) {
        printf("# session: %s\n", why);
        return NULL;
    }
    return s;
}

/* Fires every event; the return values, as a bit per fire collected. */
static unsigned fire_all(xe_session *s)
{
    unsigned ok = 0;
    for (int i = 0; i < NFIRES; i++) {
        const fired *f = &fires[i];
        int rc =
            alloc_entry && f->type >= XE_EV_ALLOC && f->type <= XE_EV_REALLOC
                ? xe_fire_alloc(s, f->type | f->cat << 16, f->size, f->site, f->key, f->value)
                : xe_fire_fields(s, f->type, f->cat, f->size, f->address, f->old, f->site, f->key, f->value);
        ok |= (unsigned)(rc == 1) << i;
    }
    return ok;
}

static void reset(void)
{
    memset(&async_seen, 0, sizeof async_seen);
    memset(&sync_seen, 0, sizeof sync_seen);
    memset(&rec_seen, 0, sizeof rec_seen);
    rec_calls = rec_short = rec_full = 0;
}

static void run(const char *label, const xe_target_ops *a, const xe_target_ops *b, int time_order,
                const char *extra, unsigned want, int decline)
{
    reset();
    rec_decline = decline;
    xe_session *s = session(a, b, time_order, extra);
    char what[200];
    snprintf(what, sizeof what, "%s: session started", label);
    CHECK(what, s != NULL);
    if (!s)
        return;
    unsigned ok = fire_all(s);
    xe_session_stop(s); /* every buffer delivered */
    snprintf(what, sizeof what, "%s: collected exactly the fires wanted", label);
    CHECK(what, ok == want);
    if (a == &rec_t) {
        snprintf(what, sizeof what, "%s: records and declined events together are the fires", label);
        seen all = rec_seen;
        for (int k = 0; k < async_seen.n && k < MAXE && all.n < MAXE; k++)
            all.ev[all.n++] = async_seen.ev[k];
        CHECK(what, matches(&all, want));
        int stamped = 1;
        for (int k = 0; k < rec_seen.n && k < MAXE; k++)
            stamped &= rec_seen.ev[k].tsc != 0;
        snprintf(what, sizeof what, "%s: %d records taken as they lie, %d declined, each stamped", label,
                 rec_seen.n, async_seen.n);
        CHECK(what, stamped && rec_seen.n > 0 && (decline ? async_seen.n > 0 : async_seen.n == 0));
        /* The mapping's record is the only full one a short run takes
         * (when it is taken, not declined). */
        int maps = 0;
        for (int k = 0; k < rec_seen.n && k < MAXE; k++)
            maps += rec_seen.ev[k].type == XE_EV_MMAP;
        snprintf(what, sizeof what, "%s: %d short records, %d full", label, rec_short, rec_full);
        CHECK(what, short_run ? rec_full == maps && rec_short == rec_seen.n - maps
                              : rec_short == 0 && rec_full == rec_seen.n);
    } else {
        snprintf(what, sizeof what, "%s: the asynchronous target got each fire's fields", label);
        CHECK(what, matches(&async_seen, want));
    }
    if (b == &sync_t) {
        snprintf(what, sizeof what, "%s: the synchronous target too", label);
        CHECK(what, matches(&sync_seen, want));
    }
    snprintf(what, sizeof what, "%s: a stopped session takes nothing", label);
    CHECK(what, fire_all(s) == 0);
    xe_session_drop(s);
}

int main(void)
{
    unsigned all = (1u << NFIRES) - 1;
    run("fields, asynchronous target", &async_t, NULL, 0, NULL, all, 0);
    run("fields, beside a synchronous target", &async_t, &sync_t, 0, NULL, all, 0);
    run("fields, predicate size >= 100", &async_t, NULL, 0, "where=size >= 100", all & ~(1u << 3), 0);
    run("fields, event_mask of allocations", &async_t, NULL, 0, "events=alloc", 1u << 0 | 1u << 3, 0);
    run("fields, time-ordered, records taken", &rec_t, NULL, 1, NULL, all, 0);
    run("fields, time-ordered, every other record declined", &rec_t, NULL, 1, NULL, all, 1);
    /* Trace mode's session: allocation events in short records, taken as
     * they lie or (declined) as events, and from an ordinary target. */
    short_run = 1;
    run("short allocations, time-ordered, records taken", &rec_t, NULL, 1, NULL, all, 0);
    run("short allocations, time-ordered, every other record declined", &rec_t, NULL, 1, NULL, all, 1);
    run("short allocations, asynchronous target", &async_t, NULL, 0, NULL, all, 0);
    run("short allocations, beside a synchronous target", &async_t, &sync_t, 0, NULL, all, 0);
    /* The same through xe_fire_alloc (the trace's hooks): the fields but
     * the addresses, which short records do not have. */
    alloc_entry = 1;
    run("xe_fire_alloc, short, time-ordered, records taken", &rec_t, NULL, 1, NULL, all, 0);
    run("xe_fire_alloc, short, every other record declined", &rec_t, NULL, 1, NULL, all, 1);
    run("xe_fire_alloc, short, predicate size >= 100", &async_t, NULL, 0, "where=size >= 100",
        all & ~(1u << 3), 0);
    run("xe_fire_alloc, short, beside a synchronous target", &async_t, &sync_t, 0, NULL, all, 0);
    /* In a session of full records: full records, addresses 0. */
    short_run = 0;
    run("xe_fire_alloc, full records, addresses 0", &rec_t, NULL, 1, NULL, all, 0);
    alloc_entry = 0;
    return failures != 0;
}
