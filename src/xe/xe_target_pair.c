/* xe_target_pair.c — the pair_matching target: begin events wait in a
 * table until an end event with the same match field arrives; what stays
 * unmatched is the result (with alloc/free, the leaks).
 *
 * Parameters: begin_event (default alloc), end_event (default free),
 * match_on (a field; default address, or key when begin_event is
 * span_begin), max_orphans (XE's default 10000: unmatched begins kept;
 * a begin beyond those is dropped and counted in orphans_dropped). With
 * alloc/free matched on address, a realloc ends the pair of its
 * old_address (when not 0) and begins one at its address (when not 0). A
 * begin whose key is already waiting replaces it (duplicate_begins).
 *
 * The table: linear probing over at least 2 x max_orphans entries, with
 * backward-shift deletion so no tombstones pile up. The dispatcher is the
 * only writer; each entry has a seqlock, so a view never reads a torn
 * entry, and every reader loop is bounded by the table size. A view racing
 * a deletion may miss an entry being shifted or see it twice (it lists
 * each begin once, by its arrival number). */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <errno.h>

#define PAIR_DEFAULT_ORPHANS 10000 /* XE's default MAX_ORPHANS */
#define PAIR_MAX_ORPHANS (1u << 22)
#define PAIR_LIST 100 /* unmatched begins the view lists, oldest first */

typedef struct pair_entry {
    uint64_t seq; /* seqlock */
    uint64_t used;
    uint64_t key;
    uint64_t order; /* the begin's arrival number */
    uint64_t w[XE_EV_WORDS];
} pair_entry;

typedef struct pair_state {
    unsigned begin, end, match;
    int realloc_pairs;
    uint64_t max_orphans;
    uint64_t mask;
    uint64_t begins, ends, matched, unmatched_ends, orphans_dropped, duplicate_begins;
    uint64_t unmatched_count, unmatched_bytes;
    pair_entry table[];
} pair_state;

static int type_param(const xe_param *p, unsigned *out, char *why, size_t whylen)
{
    int t = xe_type_by_name(p->val, p->len);
    if (t >= 0) {
        *out = (unsigned)t;
        return 0;
    }
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, "pair_matching: ");
    mt_out_str(&o, p->name);
    mt_out_str(&o, "='");
    mt_out_shown(&o, p->val, p->len);
    mt_out_str(&o, "' is not an event type (user, alloc, free, realloc, mmap, munmap, span_begin, "
                   "span_end, snapshot, page_ref)");
    xe_why_done(&o);
    return -EINVAL;
}

static int pair_init(xe_target *t, const char *params, char *why, size_t whylen)
{
    xe_param p[] = {
        {.name = "begin_event"},
        {.name = "end_event"},
        {.name = "match_on"},
        {.name = "max_orphans"},
    };
    unsigned begin = XE_EV_ALLOC, end = XE_EV_FREE, match = XE_F_ADDRESS;
    uint64_t max_orphans = PAIR_DEFAULT_ORPHANS;
    int rc = xe_params_parse("pair_matching", params, p, 4, why, whylen);
    if (rc == 0 && p[0].set)
        rc = type_param(&p[0], &begin, why, whylen);
    if (rc == 0 && p[1].set)
        rc = type_param(&p[1], &end, why, whylen);
    if (rc == 0 && p[3].set)
        rc = xe_param_u64("pair_matching", &p[3], 1, PAIR_MAX_ORPHANS, &max_orphans, why, whylen);
    if (rc < 0)
        return rc;
    if (p[2].set) {
        int f = xe_field_by_name(p[2].val, p[2].len);
        if (f < 0) {
            mt_out o;
            xe_why_init(&o, why, whylen);
            mt_out_str(&o, "pair_matching: match_on='");
            mt_out_shown(&o, p[2].val, p[2].len);
            mt_out_str(&o, "' is not a field (type, category, size, address, old_address, site, "
                           "key, value, tid, cpu, data_len, size_class)");
            xe_why_done(&o);
            return -EINVAL;
        }
        match = (unsigned)f;
    } else if (begin == XE_EV_SPAN_BEGIN) {
        match = XE_F_KEY;
    }
    if (begin == end) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "pair_matching: begin_event and end_event are both ");
        mt_out_str(&o, xe_type_name(begin));
        xe_why_done(&o);
        return -EINVAL;
    }
    uint64_t entries = xe_pow2_at_least(2 * max_orphans);
    size_t bytes = sizeof(pair_state) + entries * sizeof(pair_entry);
    pair_state *s = xe_map(bytes);
    if (!s) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "pair_matching: cannot map ");
        mt_out_u64(&o, bytes);
        mt_out_str(&o, " bytes for its table");
        xe_why_done(&o);
        return -ENOMEM;
    }
    s->begin = begin;
    s->end = end;
    s->match = match;
    s->realloc_pairs = begin == XE_EV_ALLOC && end == XE_EV_FREE && match == XE_F_ADDRESS;
    s->max_orphans = max_orphans;
    s->mask = entries - 1;
    xe_params_keep(t, params);
    t->state = s;
    t->state_bytes = bytes;
    return 0;
}

/* The entry holding key, or the empty entry where it would go. */
static uint64_t pair_probe(const pair_state *s, uint64_t key)
{
    uint64_t i = xe_hash64(key) & s->mask;
    while (s->table[i].used && s->table[i].key != key)
        i = (i + 1) & s->mask;
    return i;
}

static void entry_write(pair_entry *e, uint64_t used, uint64_t key, uint64_t order, const uint64_t *w)
{
    xe_seq_write_begin(&e->seq);
    __atomic_store_n(&e->used, used, __ATOMIC_RELAXED);
    __atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
    __atomic_store_n(&e->order, order, __ATOMIC_RELAXED);
    if (w)
        xe_words_store(e->w, w, XE_EV_WORDS);
    xe_seq_write_end(&e->seq);
}

static void pair_begin(pair_state *s, uint64_t key, const xe_event *ev)
{
    uint64_t w[XE_EV_WORDS];
    uint64_t i = pair_probe(s, key);
    pair_entry *e = &s->table[i];
    xe_stat_add(&s->begins, 1);
    if (e->used) {
        xe_stat_add(&s->duplicate_begins, 1);
        xe_stat_add(&s->unmatched_bytes, ev->size - e->w[3]);
    } else if (s->unmatched_count >= s->max_orphans) {
        xe_stat_add(&s->orphans_dropped, 1);
        return;
    } else {
        xe_stat_add(&s->unmatched_count, 1);
        xe_stat_add(&s->unmatched_bytes, ev->size);
    }
    xe_pack_event(ev, w);
    entry_write(e, 1, key, s->begins, w);
}

/* Backward-shift deletion: entries after the hole that may live in it
 * move back, so every probe still ends at the first empty entry. */
static void pair_remove(pair_state *s, uint64_t i)
{
    uint64_t j = i;
    for (uint64_t steps = 0; steps <= s->mask; steps++) {
        j = (j + 1) & s->mask;
        pair_entry *e = &s->table[j];
        if (!e->used)
            break;
        uint64_t home = xe_hash64(e->key) & s->mask;
        /* e stays when its home lies cyclically in (i, j]. */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        entry_write(&s->table[i], 1, e->key, e->order, e->w);
        i = j;
    }
    entry_write(&s->table[i], 0, 0, 0, NULL);
}

static void pair_end(pair_state *s, uint64_t key)
{
    uint64_t i = pair_probe(s, key);
    pair_entry *e = &s->table[i];
    xe_stat_add(&s->ends, 1);
    if (!e->used) {
        xe_stat_add(&s->unmatched_ends, 1);
        return;
    }
    xe_stat_add(&s->matched, 1);
    xe_stat_add(&s->unmatched_count, (uint64_t)-1);
    xe_stat_add(&s->unmatched_bytes, (uint64_t)0 - e->w[3]);
    pair_remove(s, i);
}

static void pair_deliver(xe_target *t, const xe_event *ev)
{
    pair_state *s = t->state;
    if (ev->type == s->begin)
        pair_begin(s, xe_field_get(ev, s->match), ev);
    else if (ev->type == s->end)
        pair_end(s, xe_field_get(ev, s->match));
    else if (ev->type == XE_EV_REALLOC && s->realloc_pairs) {
        if (ev->old_address)
            pair_end(s, ev->old_address);
        if (ev->address)
            pair_begin(s, ev->address, ev);
    }
}

/* Entry i when it is whole and in use: its order and event. */
static int entry_read(const pair_entry *e, uint64_t *order, xe_event *ev)
{
    uint64_t w[XE_EV_WORDS];
    uint64_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1)
        return 0;
    uint64_t used = __atomic_load_n(&e->used, __ATOMIC_RELAXED);
    *order = __atomic_load_n(&e->order, __ATOMIC_RELAXED);
    if (ev)
        xe_words_load(w, e->w, XE_EV_WORDS);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1 || !used)
        return 0;
    if (ev)
        xe_unpack_event(w, ev);
    return 1;
}

static void pair_view(xe_target *t, mt_json *j)
{
    const pair_state *s = t->state;
    mt_json_kstr(j, "begin_event", xe_type_name(s->begin));
    mt_json_kstr(j, "end_event", xe_type_name(s->end));
    mt_json_kstr(j, "match_on", xe_field_name((enum xe_field)s->match));
    mt_json_ku64(j, "max_orphans", s->max_orphans);
    mt_json_ku64(j, "begins", xe_stat_get(&s->begins));
    mt_json_ku64(j, "ends", xe_stat_get(&s->ends));
    mt_json_ku64(j, "matches", xe_stat_get(&s->matched));
    mt_json_ku64(j, "unmatched_ends", xe_stat_get(&s->unmatched_ends));
    mt_json_ku64(j, "orphans_dropped", xe_stat_get(&s->orphans_dropped));
    mt_json_ku64(j, "duplicate_begins", xe_stat_get(&s->duplicate_begins));
    mt_json_ku64(j, "unmatched_begins", xe_stat_get(&s->unmatched_count));
    mt_json_ku64(j, "unmatched_bytes", xe_stat_get(&s->unmatched_bytes));

    /* The oldest PAIR_LIST begins: one pass keeping a sorted short list
     * of (order, entry), then each entry read again whole. */
    uint64_t ord[PAIR_LIST] = {0}, idx[PAIR_LIST] = {0};
    int n = 0;
    for (uint64_t i = 0; i <= s->mask; i++) {
        uint64_t order;
        if (!entry_read(&s->table[i], &order, NULL))
            continue;
        if (n == PAIR_LIST && order >= ord[n - 1])
            continue;
        int seen = 0; /* an entry met twice while a deletion moved it */
        for (int k = 0; k < n && !seen; k++)
            seen = ord[k] == order;
        if (seen)
            continue;
        int k = n < PAIR_LIST ? n++ : n - 1;
        for (; k > 0 && ord[k - 1] > order; k--) {
            ord[k] = ord[k - 1];
            idx[k] = idx[k - 1];
        }
        ord[k] = order;
        idx[k] = i;
    }
    mt_json_key(j, "unmatched");
    mt_json_array_begin(j);
    for (int k = 0; k < n; k++) {
        uint64_t order;
        xe_event ev;
        if (!entry_read(&s->table[idx[k]], &order, &ev) || order != ord[k])
            continue;
        xe_event_json(j, &ev);
    }
    mt_json_array_end(j);
}

const xe_target_ops xe_target_pair_matching = {
    .name = "pair_matching",
    .synchronous = 0,
    .init = pair_init,
    .deliver = pair_deliver,
    .flush = NULL,
    .close = xe_target_unmap_state,
    .view_json = pair_view,
};
