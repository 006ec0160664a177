/* test_trace_order.c — the order checker of tests/trace/trace_order.c, on
 * traces written by the real writer: it passes orderly ones (reallocs,
 * ids freed and reused, times within one unit), fails each kind of
 * disorder naming the first event, and agrees with a brute-force model of
 * the live set over a long random history (its hash set grows and deletes
 * with backward shifts). */
#define TRACE_ORDER_NO_MAIN
#include "trace_order.c"

#include "unit.h"
#include "trace/trace_test.h"

#define START 1000000000ull
#define UNIT 10000u

/* A trace of these events, written and finished (or not) in memory. */
static tbuf *write_events(const mt_trace_event *evs, size_t n, int finish)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {.chunk_events = 1024, .pid = 7, .start_ns = START, .time_unit_ns = UNIT};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    if (!w)
        return m;
    mt_trace_write_begin(w);
    for (size_t i = 0; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    if (finish)
        mt_trace_write_finish(w, NULL, NULL, 0);
    else
        mt_trace_write_flush(w, 1);
    mt_trace_writer_destroy(w);
    return m;
}

/* order_check's result on these events, and its report in msg. */
static int check_events(const mt_trace_event *evs, size_t n, int finish, uint64_t max_back, char *msg,
                        size_t msglen)
{
    tbuf *m = write_events(evs, n, finish);
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    int bad = -1;
    if (mt_trace_open_mem(m->p, m->len, "mem.mtt", 0, &r, err, sizeof err) == 0) {
        FILE *out = fmemopen(msg, msglen, "w");
        bad = order_check(r, "mem.mtt", max_back, out);
        fclose(out);
        mt_trace_close(r);
    } else {
        snprintf(msg, msglen, "open: %s", err);
    }
    tbuf_delete(m);
    return bad;
}

static mt_trace_event alloc_ev(uint32_t id, uint64_t t)
{
    return (mt_trace_event){
        .type = MT_TRACE_ALLOC, .thread = 1, .time_ns = START + t, .size = 32, .id = id, .stack = 1};
}
static mt_trace_event free_ev(uint32_t id, uint64_t t)
{
    return (mt_trace_event){.type = MT_TRACE_FREE, .thread = 2, .time_ns = START + t, .id = id};
}
static mt_trace_event realloc_ev(uint32_t old_id, uint32_t id, uint64_t t)
{
    return (mt_trace_event){.type = MT_TRACE_REALLOC,
                            .thread = 3,
                            .time_ns = START + t,
                            .size = 64,
                            .id = id,
                            .old_id = old_id,
                            .stack = 1};
}

static char msg[4096];
#define CHECK_CASE(name, want, evs, finish, max_back)                                                        \
    do {                                                                                                     \
        int got_ = check_events(evs, sizeof evs / sizeof *evs, finish, max_back, msg, sizeof msg);           \
        CHECK(name, got_ == (want));                                                                         \
        if (got_ != (want))                                                                                  \
            printf("    got %d:\n%s", got_, msg);                                                            \
    } while (0)

static void fixed_cases(void)
{
    mt_trace_event good[] = {alloc_ev(1, 10),   alloc_ev(2, 20000), realloc_ev(1, 3, 30000),
                             free_ev(2, 30005), free_ev(3, 40000),  alloc_ev(2, 50000),
                             free_ev(2, 50001)};
    CHECK_CASE("trace_order: allocs, a realloc, frees, an id reused after its free: all well", 0, good, 1, 0);
    CHECK("trace_order: the counts are reported",
          strstr(msg, "7 events (3 allocs, 3 frees, 1 reallocs, 0 live at the end)") != NULL);

    mt_trace_event free_first[] = {alloc_ev(1, 10), free_ev(5, 20), alloc_ev(5, 30)};
    CHECK_CASE("trace_order: a free before its alloc fails the ids", ORDER_IDS, free_first, 1, 0);
    CHECK("trace_order: ... naming the first such event", strstr(msg, "event #2 (FREE of id 5") != NULL);

    mt_trace_event realloc_unknown[] = {alloc_ev(1, 10), realloc_ev(9, 10, 20)};
    CHECK_CASE("trace_order: a realloc of an id never allocated fails the ids", ORDER_IDS, realloc_unknown, 1,
               0);
    CHECK("trace_order: ... naming it", strstr(msg, "event #2 (REALLOC of id 9") != NULL);

    mt_trace_event twice[] = {alloc_ev(1, 10), free_ev(1, 20), free_ev(1, 30)};
    CHECK_CASE("trace_order: a second free of an id fails the ids", ORDER_IDS, twice, 1, 0);

    mt_trace_event after_realloc[] = {alloc_ev(1, 10), realloc_ev(1, 2, 20), free_ev(1, 30)};
    CHECK_CASE("trace_order: a free of the id a realloc replaced fails the ids", ORDER_IDS, after_realloc, 1,
               0);

    mt_trace_event live_again[] = {alloc_ev(4, 10), alloc_ev(4, 20)};
    CHECK_CASE("trace_order: an alloc of a live id fails the ids", ORDER_IDS, live_again, 1, 0);

    mt_trace_event unknown[] = {free_ev(0, 10)};
    CHECK_CASE("trace_order: a free of a block before the trace (id 0) fails the ids", ORDER_IDS, unknown, 1,
               0);

    mt_trace_event back[] = {alloc_ev(1, 2 * UNIT), alloc_ev(2, UNIT), free_ev(1, 3 * UNIT),
                             free_ev(2, 3 * UNIT)};
    CHECK_CASE("trace_order: a time one unit back fails the times", ORDER_TIME, back, 1, 0);
    CHECK("trace_order: ... naming the event and how far back",
          strstr(msg, "event #2 (ALLOC of id 2, thread 1)") && strstr(msg, "(1 units of 10000 ns) back"));
    CHECK_CASE("trace_order: ... and passes with --max-back 1", 0, back, 1, 1);

    mt_trace_event same_unit[] = {alloc_ev(1, UNIT + 9000), free_ev(1, UNIT + 1)};
    CHECK_CASE("trace_order: times back within one unit are equal to the trace: all well", 0, same_unit, 1,
               0);

    CHECK_CASE("trace_order: a trace with no end record fails the reading", ORDER_READ, good, 0, 0);
    CHECK("trace_order: ... and says so", strstr(msg, "read: mem.mtt: no end record") != NULL);
}

/* A long random history of well-ordered events: ids allocated, freed and
 * reallocated in random order, many live at once. The checker must find
 * nothing wrong, and its live count must be the model's. */
static void random_history(void)
{
    enum { N = 400000, POOL = 20000 };
    mt_trace_event *evs = calloc(N, sizeof *evs);
    uint32_t *slot = calloc(POOL, sizeof *slot);
    uint64_t s = 88172645463325252ull;
    uint32_t next_id = 0xFFFF0000u; /* wraps past 2^32 (skipping 0) */
    size_t n = 0, live = 0;
    while (n < N) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t k = (uint32_t)(s % POOL);
        uint64_t t = 100 * (uint64_t)n;
        if (!slot[k]) {
            if (++next_id == 0)
                next_id = 1;
            slot[k] = next_id;
            evs[n++] = alloc_ev(next_id, t);
            live++;
        } else if ((s >> 32) % 3 == 0) {
            if (++next_id == 0)
                next_id = 1;
            evs[n++] = realloc_ev(slot[k], next_id, t);
            slot[k] = next_id;
        } else {
            evs[n++] = free_ev(slot[k], t);
            slot[k] = 0;
            live--;
        }
    }
    int got = check_events(evs, N, 1, 0, msg, sizeof msg);
    CHECK("trace_order: 400000 random well-ordered events: all well", got == 0);
    char want[64];
    snprintf(want, sizeof want, "%zu live at the end", live);
    CHECK("trace_order: ... with the model's live count", strstr(msg, want) != NULL);
    if (got != 0 || !strstr(msg, want))
        printf("    model: %s\n%s", want, msg);

    /* The same history with one free moved before its alloc. */
    size_t a = N / 2;
    while (evs[a].type != MT_TRACE_ALLOC)
        a++;
    size_t f = a + 1;
    while (f < N && !(evs[f].type == MT_TRACE_FREE && evs[f].id == evs[a].id) &&
           !(evs[f].type == MT_TRACE_REALLOC && evs[f].old_id == evs[a].id))
        f++;
    if (f < N) {
        mt_trace_event moved = evs[f];
        memmove(&evs[a + 1], &evs[a], (f - a) * sizeof *evs);
        evs[a] = moved;
        for (size_t i = a; i <= f; i++)
            evs[i].time_ns = evs[f + 1 < N ? f + 1 : f].time_ns; /* keep times in order */
        got = check_events(evs, N, 1, 0, msg, sizeof msg);
        char first[64];
        snprintf(first, sizeof first, "the first: event #%zu ", a + 1);
        CHECK("trace_order: one free moved before its alloc among 400000 events: found, and named",
              got == ORDER_IDS && strstr(msg, first) != NULL);
        if (got != ORDER_IDS || !strstr(msg, first))
            printf("    got %d, want %s:\n%s", got, first, msg);
    }
    free(slot);
    free(evs);
}

int main(void)
{
    fixed_cases();
    random_history();
    return failures ? 1 : 0;
}
