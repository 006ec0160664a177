/* xe_target_counter.c — the event_counter target: how many events of each
 * type were fired. Synchronous: deliver() runs on every firing thread at
 * once, so the counts are relaxed atomic adds, sharded by the event's CPU
 * (one cache line per shard) so threads on different CPUs do not contend;
 * the view sums the shards. It takes no parameters. */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <errno.h>

#define COUNTER_SHARDS 16
#define COUNTER_SLOTS 16 /* XE_EV_NTYPES types, then "other" */

typedef struct counter_shard {
    uint64_t n[COUNTER_SLOTS]; /* 128 bytes: two cache lines, its own */
} counter_shard;

typedef struct counter_state {
    counter_shard shards[COUNTER_SHARDS];
} counter_state;

_Static_assert(XE_EV_NTYPES < COUNTER_SLOTS, "one slot per type and one for the rest");

static int counter_init(xe_target *t, const char *params, char *why, size_t whylen)
{
    int rc = xe_params_parse("event_counter", params, NULL, 0, why, whylen);
    if (rc < 0)
        return rc;
    counter_state *s = xe_map(sizeof *s);
    if (!s) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "event_counter: cannot map its counters");
        xe_why_done(&o);
        return -ENOMEM;
    }
    xe_params_keep(t, params);
    t->state = s;
    t->state_bytes = sizeof *s;
    return 0;
}

static void counter_deliver(xe_target *t, const xe_event *ev)
{
    counter_state *s = t->state;
    unsigned k = ev->type < XE_EV_NTYPES ? ev->type : XE_EV_NTYPES;
    __atomic_fetch_add(&s->shards[ev->cpu % COUNTER_SHARDS].n[k], 1, __ATOMIC_RELAXED);
}

static uint64_t counter_sum(const counter_state *s, unsigned k)
{
    uint64_t v = 0;
    for (int i = 0; i < COUNTER_SHARDS; i++)
        v += __atomic_load_n(&s->shards[i].n[k], __ATOMIC_RELAXED);
    return v;
}

static void counter_view(xe_target *t, mt_json *j)
{
    const counter_state *s = t->state;
    uint64_t counts[XE_EV_NTYPES + 1], total = 0;
    for (unsigned k = 0; k <= XE_EV_NTYPES; k++)
        total += counts[k] = counter_sum(s, k);
    mt_json_ku64(j, "events", total);
    mt_json_key(j, "events_by_type");
    mt_json_object_begin(j);
    for (unsigned k = 0; k <= XE_EV_NTYPES; k++) {
        if (counts[k] != 0)
            mt_json_ku64(j, k < XE_EV_NTYPES ? xe_type_name(k) : "other", counts[k]);
    }
    mt_json_object_end(j);
}

const xe_target_ops xe_target_event_counter = {
    .name = "event_counter",
    .synchronous = 1,
    .init = counter_init,
    .deliver = counter_deliver,
    .flush = NULL,
    .close = xe_target_unmap_state,
    .view_json = counter_view,
};
