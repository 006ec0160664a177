/* trace_order.c — checks the order of a trace's events as a reader sees
 * them (tests/agent/test_trace_threads.sh): every FREE and REALLOC names a
 * block allocated earlier in the file and not freed since, and event times
 * never go back in file order (global time order, to the trace's time
 * resolution). It knows nothing of how the writer merges threads' events:
 * only the file's order, through the reader (trace_read.h).
 *
 *   trace_order [--max-back UNITS] TRACE
 *
 * Prints the counts, then one line on ids ("ids: ok" or how many events
 * were out of order and the first of them), one on times ("time: ok" or
 * the same), and a "read:" line when the trace could not be read whole
 * (cut, damaged, no end record). Exit 0 when all is well, 1 otherwise, 2
 * on bad usage. --max-back lets times go back by that many time units
 * (default 0: never). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_read.h"

/* The ids of the blocks live so far: an open-addressing set (0 is never an
 * id of a block in the trace, so it marks an empty slot). */
struct id_set {
    uint32_t *slot;
    size_t cap, count; /* cap: a power of two */
};

static size_t id_home(const struct id_set *s, uint32_t id)
{
    return (size_t)((id * 2654435761u) & (s->cap - 1));
}

static size_t id_find(const struct id_set *s, uint32_t id)
{
    size_t i = id_home(s, id);
    while (s->slot[i] && s->slot[i] != id)
        i = (i + 1) & (s->cap - 1);
    return i;
}

static int id_has(const struct id_set *s, uint32_t id)
{
    return s->slot[id_find(s, id)] == id;
}

static int id_grow(struct id_set *s)
{
    struct id_set n = {calloc(s->cap * 2, sizeof *n.slot), s->cap * 2, 0};
    if (!n.slot)
        return -ENOMEM;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slot[i])
            n.slot[id_find(&n, s->slot[i])] = s->slot[i];
    n.count = s->count;
    free(s->slot);
    *s = n;
    return 0;
}

static int id_add(struct id_set *s, uint32_t id)
{
    if ((s->count + 1) * 2 > s->cap && id_grow(s) < 0)
        return -ENOMEM;
    s->slot[id_find(s, id)] = id;
    s->count++;
    return 0;
}

/* Removal with backward shift, so that no tombstones build up. */
static void id_remove(struct id_set *s, uint32_t id)
{
    size_t i = id_find(s, id);
    if (s->slot[i] != id)
        return;
    s->slot[i] = 0;
    s->count--;
    for (size_t j = (i + 1) & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1)) {
        size_t home = id_home(s, s->slot[j]);
        /* slot[j] may move to the hole at i when its home is not in (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            s->slot[i] = s->slot[j];
            s->slot[j] = 0;
            i = j;
        }
    }
}

static const char *type_name(unsigned t)
{
    switch (t) {
    case MT_TRACE_ALLOC: return "ALLOC";
    case MT_TRACE_FREE: return "FREE";
    case MT_TRACE_REALLOC: return "REALLOC";
    case MT_TRACE_MMAP: return "MMAP";
    case MT_TRACE_MUNMAP: return "MUNMAP";
    }
    return "?";
}

/* What order_check found wrong (bits of its result). */
#define ORDER_IDS 1  /* a free or realloc of an id not live, or an alloc of a live one */
#define ORDER_TIME 2 /* a time more than max_back units before an earlier event's */
#define ORDER_READ 4 /* the trace could not be read to its end record */

/* Reads every event of r, prints the counts and one line each on ids,
 * times and (if it failed) reading to out; name names the trace. Returns
 * the ORDER_* bits of what went wrong (0: all well), or -ENOMEM. */
static int order_check(mt_trace_reader *r, const char *name, uint64_t max_back_units, FILE *out)
{
    uint64_t unit = mt_trace_info(r)->time_unit_ns;
    struct id_set live = {calloc(1024, sizeof(uint32_t)), 1024, 0};
    if (!live.slot)
        return -ENOMEM;
    uint64_t n = 0, allocs = 0, frees = 0, reallocs = 0, prev_ns = 0, back_max = 0;
    uint64_t id_bad = 0, time_bad = 0;
    char id_first[512] = "", time_first[512] = "";
    int got;
    mt_trace_event ev;
    while ((got = mt_trace_next(r, &ev)) == 1) {
        n++;
        if (ev.time_ns < prev_ns) {
            uint64_t back = prev_ns - ev.time_ns;
            if (back > back_max)
                back_max = back;
            if (back > max_back_units * unit && time_bad++ == 0)
                snprintf(time_first, sizeof time_first,
                         "event #%" PRIu64 " (%s of id %" PRIu32 ", thread %" PRIu32 ") at %" PRIu64
                         " ns comes after one at %" PRIu64 " ns: %" PRIu64 " ns (%" PRIu64
                         " units of %" PRIu64 " ns) back",
                         n, type_name(ev.type), ev.id, ev.thread, ev.time_ns, prev_ns, back,
                         unit ? back / unit : 0, unit);
        } else {
            prev_ns = ev.time_ns;
        }
        if (ev.type == MT_TRACE_FREE || ev.type == MT_TRACE_REALLOC) {
            uint32_t gone = ev.type == MT_TRACE_FREE ? ev.id : ev.old_id;
            if (!gone || !id_has(&live, gone)) {
                if (id_bad++ == 0)
                    snprintf(id_first, sizeof id_first,
                             "event #%" PRIu64 " (%s of id %" PRIu32 ", thread %" PRIu32 ", at %" PRIu64
                             " ns): %s",
                             n, type_name(ev.type), gone, ev.thread, ev.time_ns,
                             gone ? "that id was not allocated before it (or was freed already)"
                                  : "a block the trace did not hold (id 0)");
            } else {
                id_remove(&live, gone);
            }
            if (ev.type == MT_TRACE_FREE)
                frees++;
        }
        if (ev.type == MT_TRACE_ALLOC || ev.type == MT_TRACE_REALLOC) {
            if (id_has(&live, ev.id)) {
                if (id_bad++ == 0)
                    snprintf(id_first, sizeof id_first,
                             "event #%" PRIu64 " (%s of id %" PRIu32 ", thread %" PRIu32
                             "): that id is live already (its free came later, or was lost)",
                             n, type_name(ev.type), ev.id, ev.thread);
            } else if (id_add(&live, ev.id) < 0) {
                free(live.slot);
                return -ENOMEM;
            }
            if (ev.type == MT_TRACE_ALLOC)
                allocs++;
            else
                reallocs++;
        }
    }
    fprintf(out,
            "trace_order: %s: %" PRIu64 " events (%" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
            " reallocs, %zu live at the end)\n",
            name, n, allocs, frees, reallocs, live.count);
    free(live.slot);
    if (id_bad)
        fprintf(out, "ids: %" PRIu64 " events out of order, the first: %s\n", id_bad, id_first);
    else
        fprintf(out, "ids: ok, every free and realloc after its allocation\n");
    if (time_bad)
        fprintf(out, "time: %" PRIu64 " events back in time by more than %" PRIu64 " units, the first: %s\n",
                time_bad, max_back_units, time_first);
    else
        fprintf(out,
                "time: ok, never back by more than %" PRIu64 " units (largest step back %" PRIu64
                " ns, time unit %" PRIu64 " ns)\n",
                max_back_units, back_max, unit);
    int bad = (id_bad ? ORDER_IDS : 0) | (time_bad ? ORDER_TIME : 0);
    if (got < 0) {
        fprintf(out, "read: %s\n", mt_trace_error(r));
        bad |= ORDER_READ;
    } else if (!mt_trace_complete(r)) {
        fprintf(out, "read: %s: no end record (the writer did not finish)\n", name);
        bad |= ORDER_READ;
    }
    return bad;
}

#ifndef TRACE_ORDER_NO_MAIN /* tests/trace/test_trace_order.c includes this file */
static int usage(void)
{
    fprintf(stderr, "usage: trace_order [--max-back UNITS] TRACE\n");
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t max_back_units = 0;
    int a = 1;
    if (a + 1 < argc && strcmp(argv[a], "--max-back") == 0) {
        char *end;
        max_back_units = strtoull(argv[a + 1], &end, 10);
        if (*end || end == argv[a + 1])
            return usage();
        a += 2;
    }
    if (a + 1 != argc)
        return usage();

    char err[MT_TRACE_ERR_MAX];
    mt_trace_reader *r;
    if (mt_trace_open(argv[a], MT_TRACE_PREFETCH, &r, err, sizeof err) < 0) {
        printf("read: %s\n", err);
        return 1;
    }
    int bad = order_check(r, argv[a], max_back_units, stdout);
    mt_trace_close(r);
    if (bad < 0)
        fprintf(stderr, "trace_order: out of memory\n");
    return bad ? 1 : 0;
}
#endif
