/* xe_target_histogram.c — the histogram target: counts events per
 * distinct value of one field (`source`, default size_class), up to
 * `slots` distinct values (XE's default 256); events with a value beyond
 * those are counted as overflow.
 *
 * Values live in an open-addressing table (linear probing, at least twice
 * `slots` entries, never deleted). The dispatcher is its only writer: it
 * stores a new entry's value before publishing its count (release), so a
 * reader that sees a non-zero count sees its value; counts only grow. The
 * view sorts a copy by count in a scratch area it claims with a flag (two
 * views at once: the second prints in table order, "sorted":false). */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <errno.h>

#define HIST_DEFAULT_SLOTS 256
#define HIST_MAX_SLOTS (1u << 20)

typedef struct hist_entry {
    uint64_t value;
    uint64_t count; /* 0: empty */
} hist_entry;

typedef struct hist_state {
    unsigned source; /* enum xe_field */
    uint64_t slots;  /* distinct values kept */
    uint64_t mask;   /* table entries - 1 */
    uint64_t used;   /* distinct values so far */
    uint64_t events;
    uint64_t overflow;
    int scratch_busy;
    hist_entry *table;
    hist_entry *scratch; /* slots entries, for the view's sort */
} hist_state;

static int hist_init(xe_target *t, const char *params, char *why, size_t whylen)
{
    xe_param p[] = {{.name = "source"}, {.name = "slots"}};
    int rc = xe_params_parse("histogram", params, p, 2, why, whylen);
    uint64_t slots = HIST_DEFAULT_SLOTS;
    int source = XE_F_SIZE_CLASS;
    if (rc == 0 && p[1].set)
        rc = xe_param_u64("histogram", &p[1], 1, HIST_MAX_SLOTS, &slots, why, whylen);
    if (rc == 0 && p[0].set && (source = xe_field_by_name(p[0].val, p[0].len)) < 0) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "histogram: unknown source field '");
        mt_out_shown(&o, p[0].val, p[0].len);
        mt_out_str(&o, "' (fields: type, category, size, address, old_address, site, key, value, "
                       "tid, cpu, data_len, size_class)");
        xe_why_done(&o);
        rc = -EINVAL;
    }
    if (rc < 0)
        return rc;
    uint64_t entries = xe_pow2_at_least(2 * slots);
    size_t bytes = sizeof(hist_state) + (entries + slots) * sizeof(hist_entry);
    hist_state *s = xe_map(bytes);
    if (!s) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "histogram: cannot map ");
        mt_out_u64(&o, bytes);
        mt_out_str(&o, " bytes for its buckets");
        xe_why_done(&o);
        return -ENOMEM;
    }
    s->source = (unsigned)source;
    s->slots = slots;
    s->mask = entries - 1;
    s->table = (hist_entry *)(s + 1);
    s->scratch = s->table + entries;
    xe_params_keep(t, params);
    t->state = s;
    t->state_bytes = bytes;
    return 0;
}

static void hist_deliver(xe_target *t, const xe_event *ev)
{
    hist_state *s = t->state;
    uint64_t v = xe_field_get(ev, s->source);
    xe_stat_add(&s->events, 1);
    /* The table has at least twice as many entries as values it keeps, so
     * the probe ends at an empty entry. */
    for (uint64_t i = xe_hash64(v) & s->mask;; i = (i + 1) & s->mask) {
        hist_entry *e = &s->table[i];
        if (e->count == 0) {
            if (s->used == s->slots) {
                xe_stat_add(&s->overflow, 1);
                return;
            }
            __atomic_store_n(&e->value, v, __ATOMIC_RELAXED);
            __atomic_store_n(&e->count, 1, __ATOMIC_RELEASE);
            xe_stat_add(&s->used, 1);
            return;
        }
        if (e->value == v) {
            xe_stat_add(&e->count, 1);
            return;
        }
    }
}

/* The view's order: count descending, then value ascending. */
static int hist_before(const hist_entry *a, const hist_entry *b)
{
    return a->count != b->count ? a->count > b->count : a->value < b->value;
}

static void sift_down(hist_entry *a, uint64_t i, uint64_t n)
{
    for (;;) {
        uint64_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && hist_before(&a[c], &a[c + 1]))
            c++;
        if (!hist_before(&a[i], &a[c]))
            return;
        hist_entry tmp = a[i];
        a[i] = a[c];
        a[c] = tmp;
        i = c;
    }
}

/* Heap sort into hist_before order: no recursion and no memory beyond the
 * array, for a signal handler. */
static void hist_sort(hist_entry *a, uint64_t n)
{
    for (uint64_t i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (uint64_t end = n; end > 1; end--) {
        hist_entry tmp = a[0];
        a[0] = a[end - 1];
        a[end - 1] = tmp;
        sift_down(a, 0, end - 1);
    }
}

static void bucket_json(const hist_state *s, mt_json *j, const hist_entry *e)
{
    mt_json_object_begin(j);
    mt_json_ku64(j, "value", e->value);
    mt_json_ku64(j, "count", e->count);
    if (s->source == XE_F_SIZE_CLASS) {
        /* Class c holds sizes [2^(c-1), 2^c - 1]; class 0 holds size 0. */
        uint64_t c = e->value;
        uint64_t lo = c == 0 ? 0 : c <= 64 ? 1ull << (c - 1) : 0;
        uint64_t hi = c == 0 ? 0 : c < 64 ? (1ull << c) - 1 : UINT64_MAX;
        mt_json_ku64(j, "min_size_bytes", lo);
        mt_json_ku64(j, "max_size_bytes", hi);
    } else if (s->source == XE_F_CATEGORY) {
        mt_json_kstr(j, "name", e->value <= 0xffff ? xe_category_name((unsigned)e->value) : NULL);
    } else if (s->source == XE_F_TYPE) {
        mt_json_kstr(j, "name", e->value < XE_EV_NTYPES ? xe_type_name((unsigned)e->value) : NULL);
    }
    mt_json_object_end(j);
}

static void hist_view(xe_target *t, mt_json *j)
{
    hist_state *s = t->state;
    mt_json_kstr(j, "source", xe_field_name((enum xe_field)s->source));
    mt_json_ku64(j, "slots", s->slots);
    mt_json_ku64(j, "events", xe_stat_get(&s->events));
    mt_json_ku64(j, "overflow_events", xe_stat_get(&s->overflow));
    int mine = __atomic_exchange_n(&s->scratch_busy, 1, __ATOMIC_ACQUIRE) == 0;
    mt_json_kbool(j, "sorted", mine);
    mt_json_key(j, "buckets");
    mt_json_array_begin(j);
    uint64_t n = 0;
    for (uint64_t i = 0; i <= s->mask; i++) {
        hist_entry e;
        e.count = __atomic_load_n(&s->table[i].count, __ATOMIC_ACQUIRE);
        if (e.count == 0)
            continue;
        e.value = __atomic_load_n(&s->table[i].value, __ATOMIC_RELAXED);
        if (mine) {
            if (n < s->slots)
                s->scratch[n++] = e;
        } else {
            bucket_json(s, j, &e);
        }
    }
    if (mine) {
        hist_sort(s->scratch, n);
        for (uint64_t i = 0; i < n; i++)
            bucket_json(s, j, &s->scratch[i]);
        __atomic_store_n(&s->scratch_busy, 0, __ATOMIC_RELEASE);
    }
    mt_json_array_end(j);
}

const xe_target_ops xe_target_histogram = {
    .name = "histogram",
    .synchronous = 0,
    .init = hist_init,
    .deliver = hist_deliver,
    .flush = NULL,
    .close = xe_target_unmap_state,
    .view_json = hist_view,
};
