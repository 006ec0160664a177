/* xe_target_ring.c — the ring_buffer target: the newest max_events_limit
 * events (fields and data_len; data is not kept) in fixed slots, readable
 * live by xe_ring_read and the view while the dispatcher writes.
 *
 * Event i (counting from 0) goes to slot i % limit. Each slot's seqlock is
 * 2i+1 while event i is written and 2i+2 once it is whole, and `total` is
 * published after that, so a reader knows exactly which event a slot
 * should hold: a slot showing another sequence was overwritten by a newer
 * event (the reader skips it) — a reader never waits and never retries. */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <errno.h>

#define RING_DEFAULT_LIMIT 1000 /* XE's default MAX_EVENTS_LIMIT */
#define RING_MAX_LIMIT (1u << 22)

typedef struct ring_slot {
    uint64_t seq;
    uint64_t w[XE_EV_WORDS];
} ring_slot;

typedef struct ring_state {
    uint64_t limit;
    uint64_t total; /* events received; published after the slot */
    ring_slot slots[];
} ring_state;

static int ring_init(xe_target *t, const char *params, char *why, size_t whylen)
{
    xe_param p[] = {{.name = "max_events_limit"}};
    int rc = xe_params_parse("ring_buffer", params, p, 1, why, whylen);
    uint64_t limit = RING_DEFAULT_LIMIT;
    if (rc == 0 && p[0].set)
        rc = xe_param_u64("ring_buffer", &p[0], 1, RING_MAX_LIMIT, &limit, why, whylen);
    if (rc < 0)
        return rc;
    size_t bytes = sizeof(ring_state) + limit * sizeof(ring_slot);
    ring_state *s = xe_map(bytes);
    if (!s) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "ring_buffer: cannot map ");
        mt_out_u64(&o, bytes);
        mt_out_str(&o, " bytes for its events");
        xe_why_done(&o);
        return -ENOMEM;
    }
    s->limit = limit;
    xe_params_keep(t, params);
    t->state = s;
    t->state_bytes = bytes;
    return 0;
}

static void ring_deliver(xe_target *t, const xe_event *ev)
{
    ring_state *s = t->state;
    uint64_t i = s->total;
    ring_slot *slot = &s->slots[i % s->limit];
    uint64_t w[XE_EV_WORDS];
    xe_pack_event(ev, w);
    __atomic_store_n(&slot->seq, 2 * i + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    xe_words_store(slot->w, w, XE_EV_WORDS);
    __atomic_store_n(&slot->seq, 2 * i + 2, __ATOMIC_RELEASE);
    __atomic_store_n(&s->total, i + 1, __ATOMIC_RELEASE);
}

/* Event i as it was written, or 0 when its slot now holds a newer one. */
static int ring_get(const ring_state *s, uint64_t i, xe_event *ev)
{
    const ring_slot *slot = &s->slots[i % s->limit];
    uint64_t w[XE_EV_WORDS];
    if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != 2 * i + 2)
        return 0;
    xe_words_load(w, slot->w, XE_EV_WORDS);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) != 2 * i + 2)
        return 0;
    xe_unpack_event(w, ev);
    return 1;
}

int xe_ring_read(xe_target *t, xe_event *out, int max, uint64_t *total)
{
    const ring_state *s = t->state;
    uint64_t end = __atomic_load_n(&s->total, __ATOMIC_ACQUIRE);
    if (total)
        *total = end;
    if (max <= 0)
        return 0;
    uint64_t n = end < s->limit ? end : s->limit;
    if (n > (uint64_t)max)
        n = (uint64_t)max;
    int got = 0;
    for (uint64_t i = end - n; i < end; i++)
        got += ring_get(s, i, &out[got]);
    return got;
}

static void ring_view(xe_target *t, mt_json *j)
{
    const ring_state *s = t->state;
    uint64_t end = __atomic_load_n(&s->total, __ATOMIC_ACQUIRE);
    uint64_t n = end < s->limit ? end : s->limit;
    mt_json_ku64(j, "max_events_limit", s->limit);
    mt_json_ku64(j, "events_received", end);
    mt_json_key(j, "events");
    mt_json_array_begin(j);
    for (uint64_t i = end - n; i < end; i++) {
        xe_event ev;
        if (ring_get(s, i, &ev))
            xe_event_json(j, &ev);
    }
    mt_json_array_end(j);
}

const xe_target_ops xe_target_ring_buffer = {
    .name = "ring_buffer",
    .synchronous = 0,
    .init = ring_init,
    .deliver = ring_deliver,
    .flush = NULL,
    .close = xe_target_unmap_state,
    .view_json = ring_view,
};
