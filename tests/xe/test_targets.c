/* test_targets.c — the in-memory targets (ring_buffer, histogram,
 * event_counter, pair_matching) driven directly through their ops, each
 * checked against an independent tally kept here; every view is parsed by
 * python3's json module. A last part renders views and reads the ring
 * while another thread delivers, and checks no event reads back torn. */
#include "target_fixture.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* ---- ring_buffer ---- */

static void test_ring(void)
{
    CHECK("targets by name", xe_target_find("ring_buffer", 11) == &xe_target_ring_buffer &&
                                 xe_target_find("HISTOGRAM", 9) == &xe_target_histogram &&
                                 xe_target_find("event_counter", 13) == &xe_target_event_counter &&
                                 xe_target_find("pair_matching", 13) == &xe_target_pair_matching &&
                                 xe_target_find("event_file", 10) == &xe_target_event_file &&
                                 xe_target_find("ring", 4) == NULL);
    CHECK("only event_counter is synchronous",
          xe_target_event_counter.synchronous && !xe_target_ring_buffer.synchronous &&
              !xe_target_histogram.synchronous && !xe_target_pair_matching.synchronous &&
              !xe_target_event_file.synchronous);
    expect_init_error(&xe_target_ring_buffer, "max_events_limit=0",
                      "ring_buffer: max_events_limit='0' is not a number from 1 to");
    expect_init_error(&xe_target_ring_buffer, "max_events_limit=ten",
                      "max_events_limit='ten' is not a number");
    expect_init_error(&xe_target_ring_buffer, "foo=1",
                      "ring_buffer: unknown parameter 'foo' (accepted: max_events_limit)");
    expect_init_error(&xe_target_ring_buffer, "max_events_limit",
                      "parameter 'max_events_limit' has no '=value'");
    expect_init_error(&xe_target_ring_buffer, "max_events_limit=1,MAX_EVENTS_LIMIT=2", "given twice");

    xe_target *t = make(&xe_target_ring_buffer, "");
    CHECK("ring_buffer default", t != NULL);
    expect_view(t, "d['max_events_limit'], d['events_received'], d['events']", "1000 0 []");
    /* A top-level document: the schema key first, then the target's name. */
    expect_view(t, "list(d)[:2], d['schema'], d['target']", "['schema', 'target'] memtrail/1 ring_buffer");
    destroy(t);

    t = make(&xe_target_ring_buffer, " Max_Events_Limit = 10 ");
    CHECK("ring_buffer params are case insensitive, spaces allowed",
          t && strcmp(t->params, " Max_Events_Limit = 10 ") == 0);
    xe_event out[16];
    uint64_t total = 99;
    CHECK("empty ring reads nothing", xe_ring_read(t, out, 16, &total) == 0 && total == 0);
    for (uint64_t i = 0; i < 5; i++) {
        xe_event ev = seq_event(i);
        ev.data = "xyz";
        t->ops->deliver(t, &ev);
    }
    int n = xe_ring_read(t, out, 16, &total);
    int ok = n == 5 && total == 5;
    for (int i = 0; ok && i < n; i++)
        ok = out[i].value == (uint64_t)i && seq_consistent(&out[i]);
    CHECK("fewer than the limit: all, in order, data dropped", ok);
    for (uint64_t i = 5; i < 25; i++) {
        xe_event ev = seq_event(i);
        t->ops->deliver(t, &ev);
    }
    n = xe_ring_read(t, out, 16, &total);
    ok = n == 10 && total == 25;
    for (int i = 0; ok && i < n; i++)
        ok = out[i].value == 15u + (uint64_t)i && seq_consistent(&out[i]);
    CHECK("ring keeps exactly the newest 10, oldest first", ok);
    n = xe_ring_read(t, out, 3, NULL);
    CHECK("ring read of 3: the newest 3", n == 3 && out[0].value == 22 && out[2].value == 24);
    CHECK("ring read of 0", xe_ring_read(t, out, 0, &total) == 0 && total == 25);
    expect_view(t, "d['target'], d['max_events_limit'], d['events_received'], len(d['events'])",
                "ring_buffer 10 25 10");
    expect_view(t, "[e['value'] for e in d['events']]", "[15, 16, 17, 18, 19, 20, 21, 22, 23, 24]");
    expect_view(t,
                "all(e['size_bytes'] == e['address'] == e['key'] == e['time_ns'] == e['value'] and "
                "e['data_bytes'] == e['value'] for e in d['events'])",
                "True");
    expect_view(t, "sorted(d['events'][0].keys())",
                "['address', 'category', 'category_name', 'cpu', 'data_bytes', 'key', 'old_address', "
                "'site', 'size_bytes', 'tid', 'time_ns', 'type', 'value']");
    destroy(t);

    /* Names: types and host categories (escaped). */
    t = make(&xe_target_ring_buffer, "max_events_limit=3");
    xe_event a = {.type = XE_EV_ALLOC, .category = 1}, b = {.type = XE_EV_FREE, .category = 2},
             c = {.type = 77, .category = 5};
    t->ops->deliver(t, &a);
    t->ops->deliver(t, &b);
    t->ops->deliver(t, &c);
    expect_view(t, "[(e['type'], e['category'], e['category_name']) for e in d['events']]",
                "[('alloc', 1, 'parser'), ('free', 2, 'io \"quoted\"'), (77, 5, None)]");
    destroy(t);
}

/* ---- histogram ---- */

static void test_histogram(void)
{
    expect_init_error(&xe_target_histogram, "source=sizes", "histogram: unknown source field 'sizes'");
    expect_init_error(&xe_target_histogram, "slots=0", "histogram: slots='0' is not a number from 1 to");
    expect_init_error(&xe_target_histogram, "bins=3", "unknown parameter 'bins' (accepted: source, slots)");

    xe_target *t = make(&xe_target_histogram, "");
    expect_view(t, "d['target'], d['source'], d['slots'], d['overflow_events'], d['buckets']",
                "histogram size_class 256 0 []");
    destroy(t);

    /* 200 distinct sizes, 300 slots: every value counted. */
    t = make(&xe_target_histogram, "source=size,slots=300");
    static uint64_t tally[200];
    memset(tally, 0, sizeof tally);
    for (int i = 0; i < 20000; i++) {
        unsigned k = (unsigned)(rnd() % 200);
        k = k * k / 200; /* skewed, so counts differ */
        tally[k]++;
        xe_event ev = {.type = XE_EV_ALLOC, .size = 8ull * k};
        t->ops->deliver(t, &ev);
    }
    char *json = view(t);
    char *out = py(json, "for b in d['buckets']: print(b['value'], b['count'])\n"
                         "print('overflow', d['overflow_events'], d['events'])\n"
                         "c = [b['count'] for b in d['buckets']]\n"
                         "print('sorted', c == sorted(c, reverse=True))");
    int distinct = 0, ok = 1, lines = 0;
    for (int k = 0; k < 200; k++)
        distinct += tally[k] != 0;
    char *line = strtok(out, "\n");
    uint64_t seen[200] = {0};
    for (; line; line = strtok(NULL, "\n")) {
        uint64_t v, c;
        if (strncmp(line, "overflow", 8) == 0) {
            ok &= strcmp(line, "overflow 0 20000") == 0;
        } else if (strncmp(line, "sorted", 6) == 0) {
            ok &= strcmp(line, "sorted True") == 0;
        } else if (sscanf(line, "%" SCNu64 " %" SCNu64, &v, &c) == 2) {
            lines++;
            ok &= v % 8 == 0 && v / 8 < 200 && tally[v / 8] == c && !seen[v / 8];
            if (v % 8 == 0 && v / 8 < 200)
                seen[v / 8] = 1;
        } else
            ok = 0;
    }
    CHECK("histogram counts equal the tally, sorted by count", ok && lines == distinct);
    free(out);
    free(json);
    destroy(t);

    /* 50 slots, values arrive 0..199 in a shuffled order: the first 50
     * distinct values get buckets, the rest is overflow. */
    t = make(&xe_target_histogram, "source=key,slots=50");
    int kept[200] = {0}, nkept = 0;
    uint64_t counts[200] = {0}, overflow = 0;
    for (int i = 0; i < 5000; i++) {
        unsigned k = (unsigned)(rnd() % 200);
        if (!kept[k] && nkept < 50)
            kept[k] = 1, nkept++;
        if (kept[k])
            counts[k]++;
        else
            overflow++;
        xe_event ev = {.key = k};
        t->ops->deliver(t, &ev);
    }
    json = view(t);
    out = py(json, "print(len(d['buckets']), d['overflow_events'])\n"
                   "for b in d['buckets']: print(b['value'], b['count'])");
    ok = 1;
    line = strtok(out, "\n");
    char want[64];
    snprintf(want, sizeof want, "50 %" PRIu64, overflow);
    ok = line && strcmp(line, want) == 0;
    for (line = strtok(NULL, "\n"); line; line = strtok(NULL, "\n")) {
        uint64_t v, c;
        ok &= sscanf(line, "%" SCNu64 " %" SCNu64, &v, &c) == 2 && v < 200 && kept[v] && counts[v] == c;
    }
    CHECK("histogram overflow: first 50 values kept, the rest counted", ok && overflow > 0);
    free(out);
    free(json);
    destroy(t);

    /* size_class buckets carry their byte range; category and type their names. */
    t = make(&xe_target_histogram, "");
    uint64_t sizes[] = {0, 1, 4096, 8191, 4096, 5000, UINT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        t->ops->deliver(t, &(xe_event){.size = sizes[i]});
    expect_view(t,
                "[(b['value'], b['count'], b['min_size_bytes'], b['max_size_bytes']) for b in d['buckets']]",
                "[(13, 4, 4096, 8191), (0, 1, 0, 0), (1, 1, 1, 1), (64, 1, 9223372036854775808, "
                "18446744073709551615)]");
    destroy(t);
    t = make(&xe_target_histogram, "source=category");
    for (int i = 0; i < 6; i++)
        t->ops->deliver(t, &(xe_event){.category = (uint16_t)(i % 3)});
    t->ops->deliver(t, &(xe_event){.category = 1});
    expect_view(t, "[(b['value'], b['count'], b['name']) for b in d['buckets']]",
                "[(1, 3, 'parser'), (0, 2, None), (2, 2, 'io \"quoted\"')]");
    destroy(t);
    t = make(&xe_target_histogram, "source=type");
    t->ops->deliver(t, &(xe_event){.type = XE_EV_FREE});
    expect_view(t, "[(b['value'], b['name']) for b in d['buckets']]", "[(2, 'free')]");
    destroy(t);
}

/* ---- event_counter ---- */

static xe_target *counter_target;
static void *counter_thread(void *arg)
{
    uint32_t id = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 0; i < 200000; i++) {
        xe_event ev = {.type = (uint16_t)(i % 10), .cpu = (id * 7 + i) % 5};
        counter_target->ops->deliver(counter_target, &ev);
    }
    return NULL;
}

static void test_counter(void)
{
    expect_init_error(&xe_target_event_counter, "x=1",
                      "event_counter: unknown parameter 'x' (it takes none)");
    xe_target *t = make(&xe_target_event_counter, "");
    expect_view(t, "d['target'], d['events'], d['events_by_type']", "event_counter 0 {}");
    counter_target = t;
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, counter_thread, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    t->ops->deliver(t, &(xe_event){.type = 200});
    expect_view(t, "d['events'], sorted(d['events_by_type'].items())",
                "800001 [('alloc', 80000), ('free', 80000), ('mmap', 80000), ('munmap', 80000), "
                "('other', 1), ('page_ref', 80000), ('realloc', 80000), ('snapshot', 80000), "
                "('span_begin', 80000), ('span_end', 80000), ('user', 80000)]");
    destroy(t);
}

/* ---- pair_matching ---- */

typedef struct live {
    uint64_t addr, size, order;
} live;

static void test_pair(void)
{
    expect_init_error(&xe_target_pair_matching, "begin_event=allocs",
                      "begin_event='allocs' is not an event type");
    expect_init_error(&xe_target_pair_matching, "match_on=addr", "match_on='addr' is not a field");
    expect_init_error(&xe_target_pair_matching, "end_event=alloc",
                      "begin_event and end_event are both alloc");
    expect_init_error(&xe_target_pair_matching, "max_orphans=0", "max_orphans='0' is not a number");
    expect_init_error(&xe_target_pair_matching, "match=1",
                      "unknown parameter 'match' (accepted: begin_event, end_event, match_on, max_orphans)");

    /* A random alloc/free/realloc sequence against a list of live blocks. */
    xe_target *t = make(&xe_target_pair_matching, "max_orphans=4000");
    expect_view(t, "d['begin_event'], d['end_event'], d['match_on'], d['max_orphans'], d['unmatched']",
                "alloc free address 4000 []");
    static live lv[4000];
    int nlive = 0;
    uint64_t next = 0x10000, begins = 0, matched = 0, unmatched_ends = 0, ok = 1;
    for (int i = 0; i < 60000; i++) {
        unsigned r = (unsigned)(rnd() % 100);
        if ((r < 45 || nlive == 0) && nlive < 3900) {
            uint64_t size = rnd() % 5000;
            xe_event ev = {.type = XE_EV_ALLOC, .address = next, .size = size};
            begins++;
            lv[nlive++] = (live){next, size, begins};
            next += 16 + (rnd() % 4) * 16;
            t->ops->deliver(t, &ev);
        } else if (r < 85) {
            int k = (int)(rnd() % (uint64_t)nlive);
            xe_event ev = {.type = XE_EV_FREE, .address = lv[k].addr};
            lv[k] = lv[--nlive];
            matched++;
            t->ops->deliver(t, &ev);
        } else if (r < 92) {
            /* Never allocated (or already freed). */
            xe_event ev = {.type = XE_EV_FREE, .address = 0x8 + (rnd() % 1000) * 16};
            unmatched_ends++;
            t->ops->deliver(t, &ev);
        } else {
            int k = (int)(rnd() % (uint64_t)nlive);
            uint64_t size = rnd() % 5000;
            xe_event ev = {.type = XE_EV_REALLOC, .old_address = lv[k].addr, .address = next, .size = size};
            matched++;
            begins++;
            lv[k] = (live){next, size, begins};
            next += 32;
            t->ops->deliver(t, &ev);
        }
    }
    uint64_t bytes = 0;
    for (int k = 0; k < nlive; k++)
        bytes += lv[k].size;
    char want[200];
    snprintf(want, sizeof want, "%" PRIu64 " %" PRIu64 " %d %" PRIu64 " 0 100", matched, unmatched_ends,
             nlive, bytes);
    expect_view(t,
                "d['matches'], d['unmatched_ends'], d['unmatched_begins'], d['unmatched_bytes'], "
                "d['orphans_dropped'], len(d['unmatched'])",
                want);
    /* The listed ones are the 100 oldest live begins, oldest first. */
    for (int a = 1; a < nlive; a++)
        for (int b = a; b > 0 && lv[b - 1].order > lv[b].order; b--) {
            live tmp = lv[b];
            lv[b] = lv[b - 1];
            lv[b - 1] = tmp;
        }
    char *json = view(t);
    char *out = py(json, "for e in d['unmatched']: print(e['address'], e['size_bytes'], e['type'])");
    char *line = strtok(out, "\n");
    for (int k = 0; k < 100; k++, line = strtok(NULL, "\n")) {
        uint64_t addr, size;
        char type[16];
        ok &= line && sscanf(line, "%" SCNu64 " %" SCNu64 " %15s", &addr, &size, type) == 3 &&
              addr == lv[k].addr && size == lv[k].size;
    }
    CHECK("pair_matching lists the 100 oldest unmatched begins", ok);
    free(out);
    free(json);
    /* Free everything left: all match, nothing stays. */
    for (int k = 0; k < nlive; k++)
        t->ops->deliver(t, &(xe_event){.type = XE_EV_FREE, .address = lv[k].addr});
    snprintf(want, sizeof want, "%" PRIu64 " 0 0 []", matched + (uint64_t)nlive);
    expect_view(t, "d['matches'], d['unmatched_begins'], d['unmatched_bytes'], d['unmatched']", want);
    destroy(t);

    /* Over max_orphans: new begins are dropped and their ends unmatched. */
    t = make(&xe_target_pair_matching, "max_orphans=100");
    for (uint64_t i = 0; i < 150; i++)
        t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC, .address = 0x1000 + i * 16, .size = 10});
    for (uint64_t i = 0; i < 150; i++)
        t->ops->deliver(t, &(xe_event){.type = XE_EV_FREE, .address = 0x1000 + i * 16});
    expect_view(t, "d['orphans_dropped'], d['matches'], d['unmatched_ends'], d['unmatched_begins']",
                "50 100 50 0");
    destroy(t);

    /* realloc: ends the old pair, begins one at the new address; NULL
     * sides only begin or only end. Duplicate begins replace. */
    t = make(&xe_target_pair_matching, "");
    t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC, .address = 0xa0, .size = 10});
    t->ops->deliver(t, &(xe_event){.type = XE_EV_REALLOC, .old_address = 0xa0, .address = 0xb0, .size = 20});
    t->ops->deliver(t, &(xe_event){.type = XE_EV_REALLOC, .old_address = 0, .address = 0xc0, .size = 30});
    t->ops->deliver(t, &(xe_event){.type = XE_EV_REALLOC, .old_address = 0xc0, .address = 0, .size = 0});
    t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC, .address = 0xd0, .size = 5});
    t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC, .address = 0xd0, .size = 7});
    expect_view(t,
                "d['matches'], d['duplicate_begins'], d['unmatched_begins'], d['unmatched_bytes'], "
                "[(e['type'], e['address'], e['size_bytes']) for e in d['unmatched']]",
                "2 1 2 27 [('realloc', 176, 20), ('alloc', 208, 7)]");
    destroy(t);

    /* Spans match on key by default; other events are ignored. */
    t = make(&xe_target_pair_matching, "begin_event=span_begin,end_event=span_end");
    for (uint64_t k = 1; k <= 10; k++)
        t->ops->deliver(t, &(xe_event){.type = XE_EV_SPAN_BEGIN, .key = k, .address = 0x99});
    for (uint64_t k = 1; k <= 10; k += 3)
        t->ops->deliver(t, &(xe_event){.type = XE_EV_SPAN_END, .key = k});
    t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC, .key = 2});
    expect_view(t, "d['match_on'], d['matches'], [e['key'] for e in d['unmatched']]",
                "key 4 [2, 3, 5, 6, 8, 9]");
    destroy(t);

    /* A tiny table, heavy churn: deletions shift entries across the wrap. */
    t = make(&xe_target_pair_matching, "max_orphans=8");
    uint64_t set[8];
    int ns = 0;
    matched = 0;
    for (int i = 0; i < 20000; i++) {
        if (ns < 8 && (rnd() % 2 || ns == 0)) {
            uint64_t a = rnd() % 64;
            int dup = 0;
            for (int k = 0; k < ns; k++)
                dup |= set[k] == a;
            if (!dup)
                set[ns++] = a;
            t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC, .address = a});
        } else if (ns > 0) {
            int k = (int)(rnd() % (uint64_t)ns);
            t->ops->deliver(t, &(xe_event){.type = XE_EV_FREE, .address = set[k]});
            set[k] = set[--ns];
            matched++;
        }
    }
    snprintf(want, sizeof want, "%" PRIu64 " 0 %d 0", matched, ns);
    expect_view(t, "d['matches'], d['unmatched_ends'], d['unmatched_begins'], d['orphans_dropped']", want);
    destroy(t);
}

/* ---- views racing the dispatcher ---- */

typedef struct race {
    xe_target *ring, *hist, *pair;
    volatile int done;
    uint64_t n;
} race;

/* Pair events have size = address = old_address = site = key = value. */
static void *race_writer(void *arg)
{
    race *r = arg;
    for (uint64_t i = 0; i < r->n; i++) {
        xe_event ev = seq_event(i);
        r->ring->ops->deliver(r->ring, &ev);
        ev.value = i % 3000;
        r->hist->ops->deliver(r->hist, &ev);
        uint64_t x = i + 1;
        xe_event al = {.type = XE_EV_ALLOC,
                       .size = x,
                       .address = x,
                       .old_address = x,
                       .site = x,
                       .key = x,
                       .value = x,
                       .time_ns = x};
        r->pair->ops->deliver(r->pair, &al);
        if (i >= 40 && i % 97 != 0) {
            uint64_t y = i - 40 + 1;
            r->pair->ops->deliver(r->pair, &(xe_event){.type = XE_EV_FREE, .address = y});
        }
    }
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static uint64_t num_after(const char *p, const char *key)
{
    const char *k = strstr(p, key);
    return k ? strtoull(k + strlen(key), NULL, 10) : UINT64_MAX - 1;
}

/* Every event object in a rendered view has equal size, address,
 * old_address, site, key and value (what the writer gave). Returns how
 * many events, or -1 on a torn one. */
static long check_text(const char *json)
{
    long n = 0;
    for (const char *p = strstr(json, "\"size_bytes\":"); p; p = strstr(p + 1, "\"size_bytes\":")) {
        const char *end = strchr(p, '}');
        if (!end)
            return -1;
        uint64_t v = num_after(p, "\"size_bytes\":");
        if (num_after(p, "\"address\":") != v || num_after(p, "\"old_address\":") != v ||
            num_after(p, "\"site\":") != v || num_after(p, "\"key\":") != v ||
            num_after(p, "\"value\":") != v)
            return -1;
        n++;
    }
    return n;
}

static void render(xe_target *t, char *buf, size_t cap)
{
    mt_out o;
    mt_out_init(&o, buf, cap, -1);
    xe_target_json(t, &o, 1);
    mt_out_cstr(&o);
}

static void test_race(void)
{
    race r = {.n = 400000};
    r.ring = make(&xe_target_ring_buffer, "max_events_limit=64");
    r.hist = make(&xe_target_histogram, "source=value,slots=2000");
    r.pair = make(&xe_target_pair_matching, "max_orphans=2000");
    static char rbuf[1 << 20], hbuf[1 << 20], pbuf[1 << 20];
    static char rsnap[1 << 20], hsnap[1 << 20], psnap[1 << 20];
    int snapped = 0;
    long views = 0, torn = 0, events_seen = 0, reads = 0, bad_reads = 0;
    pthread_t th;
    pthread_create(&th, NULL, race_writer, &r);
    int last = 0;
    while (!last) {
        last = __atomic_load_n(&r.done, __ATOMIC_ACQUIRE);
        for (int k = 0; k < 200; k++) {
            xe_event out[64];
            uint64_t total = 0;
            int n = xe_ring_read(r.ring, out, 64, &total);
            reads++;
            int ok = n <= 64 && (uint64_t)n <= total;
            for (int i = 0; ok && i < n; i++)
                ok = seq_consistent(&out[i]) && out[i].value < total && out[i].value + 64 >= total &&
                     (i == 0 || out[i].value > out[i - 1].value);
            bad_reads += !ok;
        }
        for (int k = 0; k < 20; k++) {
            render(r.ring, rbuf, sizeof rbuf);
            long a = check_text(rbuf);
            torn += a < 0;
            events_seen += a > 0 ? a : 0;
        }
        render(r.hist, hbuf, sizeof hbuf);
        render(r.pair, pbuf, sizeof pbuf);
        long c = check_text(pbuf);
        torn += c < 0;
        events_seen += c > 0 ? c : 0;
        views++;
        if (!snapped && !last && views > 3) {
            memcpy(rsnap, rbuf, sizeof rbuf);
            memcpy(hsnap, hbuf, sizeof hbuf);
            memcpy(psnap, pbuf, sizeof pbuf);
            snapped = 1;
        }
    }
    pthread_join(th, NULL);
    printf("  %ld views, %ld ring reads, %ld events checked\n", views, reads, events_seen);
    CHECK("concurrent ring reads: whole events, in order, within the window", bad_reads == 0);
    CHECK("concurrent views: no torn event", torn == 0 && events_seen > 0);
    if (snapped) {
        char *o1 = py(rsnap, "print(d['target'], len(d['events']) <= 64)");
        char *o2 =
            py(hsnap,
               "print(d['target'], sum(b['count'] for b in d['buckets']) + d['overflow_events'] <= 400000)");
        char *o3 = py(psnap, "print(d['target'], len(d['unmatched']) <= 100, len(set(e['key'] for e in "
                             "d['unmatched'])) == len(d['unmatched']))");
        CHECK("views taken mid-run parse as JSON", strcmp(o1, "ring_buffer True\n") == 0 &&
                                                       strcmp(o2, "histogram True\n") == 0 &&
                                                       strcmp(o3, "pair_matching True True\n") == 0);
        if (strcmp(o1, "ring_buffer True\n") || strcmp(o2, "histogram True\n") ||
            strcmp(o3, "pair_matching True True\n"))
            printf("  got '%s' '%s' '%s'\n", o1, o2, o3);
        free(o1);
        free(o2);
        free(o3);
    }
    /* After the writer: every begin is stored, dropped or matched; every
     * end matched or not; the table never holds more than max_orphans. */
    uint64_t freed = 0;
    for (uint64_t i = 40; i < r.n; i++)
        freed += i % 97 != 0;
    char want[160];
    snprintf(want, sizeof want, "%" PRIu64 " %" PRIu64 " True True True", r.n, freed);
    expect_view(
        r.pair,
        "d['begins'], d['ends'], d['unmatched_begins'] + d['orphans_dropped'] + d['matches'] == d['begins'], "
        "d['matches'] + d['unmatched_ends'] == d['ends'], 0 < d['unmatched_begins'] <= 2000",
        want);
    /* Values i % 3000: 0..1999 get the 2000 slots; 0..999 come 134 times. */
    expect_view(r.hist, "len(d['buckets']), d['overflow_events'], d['events'], d['buckets'][0]['count']",
                "2000 133000 400000 134");
    expect_view(r.ring, "d['events'][0]['value'], d['events'][-1]['value']", "399936 399999");
    destroy(r.ring);
    destroy(r.hist);
    destroy(r.pair);
}

/* xe_map: zeroed, and named in /proc/self/maps where the kernel names
 * anonymous mappings (checked on a mapping of the test's own). */
static void test_map(void)
{
    size_t len = 3 * 4096 + 100;
    unsigned char *p = xe_map(len);
    int zero = p != NULL;
    for (size_t i = 0; zero && i < len; i++)
        zero = p[i] == 0;
    CHECK("xe_map gives zeroed memory", zero);
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int named =
        prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)probe, 4096UL, (unsigned long)"probe") == 0;
    munmap(probe, 4096);
    if (named) {
        FILE *f = fopen("/proc/self/maps", "r");
        char line[512], want[64];
        snprintf(want, sizeof want, "%lx-", (unsigned long)p);
        int found = 0;
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, want, strlen(want)) == 0)
                found = strstr(line, "[anon:memtrail-xe]") != NULL;
        if (f)
            fclose(f);
        CHECK("xe_map names its mapping memtrail-xe", found);
    } else {
        printf("  the kernel does not name anonymous mappings; name not checked\n");
    }
    xe_unmap(p, len);
}

int main(void)
{
    if (fixture_setup() < 0)
        return 1;
    test_map();
    test_ring();
    test_histogram();
    test_counter();
    test_pair();
    test_race();
    fixture_cleanup();
    return failures != 0;
}
