/* custom.c — blocks of a program's own allocator (pools, arenas, slabs),
 * reported through mt_alloc_report / mt_free_report / mt_realloc_report
 * (memtrail.h). They have no header of the agent's, so their sizes live
 * in a side table: open addressing over one mapping made on first use,
 * claimed with compare-and-swap (no lock, no malloc), freed slots left as
 * tombstones. Counted like malloc blocks, in the category of the calling
 * thread's current tag, or "custom" when it has none, and seen by detail
 * and trace modes and by event sessions. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/sessions.h"
#include "agent/sample.h"
#include "agent/site.h"
#include "agent/site_capture.h"
#include "agent/trace.h"
#include "memtrail.h"

#define SLOTS (1u << 20) /* blocks reported at once; more are counted as not tracked */
#define EMPTY 0
#define GONE 1 /* a tombstone */

typedef struct slot {
    _Atomic uintptr_t key;
    uint64_t size;
    uint32_t tag; /* of kind `kind` (record.h): a site, an allocation id or 0 */
    unsigned char cat;
    unsigned char kind;
} slot;

static slot *_Atomic table;
static _Atomic int custom_cat = -1;
static _Atomic int said_full;

static slot *get_table(void)
{
    slot *t = atomic_load_explicit(&table, memory_order_acquire);
    if (t)
        return t;
    mt_agent_enter();
    slot *fresh =
        mmap(NULL, sizeof(slot) * SLOTS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mt_agent_leave();
    if (fresh == MAP_FAILED)
        return NULL;
    slot *expect = NULL;
    if (!atomic_compare_exchange_strong(&table, &expect, fresh)) {
        mt_agent_enter();
        munmap(fresh, sizeof(slot) * SLOTS);
        mt_agent_leave();
        return expect;
    }
    return fresh;
}

static uint32_t hash(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 44) & (SLOTS - 1);
}

static slot *insert(slot *t, uintptr_t p)
{
    for (uint32_t i = hash(p), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
        uintptr_t k = atomic_load_explicit(&t[i].key, memory_order_relaxed);
        if ((k == EMPTY || k == GONE) && atomic_compare_exchange_strong_explicit(
                                             &t[i].key, &k, p, memory_order_acq_rel, memory_order_relaxed))
            return &t[i];
    }
    return NULL;
}

static slot *find(slot *t, uintptr_t p)
{
    for (uint32_t i = hash(p), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
        uintptr_t k = atomic_load_explicit(&t[i].key, memory_order_acquire);
        if (k == p)
            return &t[i];
        if (k == EMPTY)
            return NULL;
    }
    return NULL;
}

static int active(void)
{
    return atomic_load_explicit(&mt_hot, memory_order_relaxed) && mt_t.in_agent == 0;
}

static unsigned category(void)
{
    if (mt_t.cat != MT_CAT_MALLOC)
        return mt_t.cat;
    int c = atomic_load_explicit(&custom_cat, memory_order_relaxed);
    if (c < 0) {
        mt_agent_enter();
        c = mt_category_get("custom");
        mt_agent_leave();
        if (c < 0)
            return MT_CAT_MALLOC;
        atomic_store(&custom_cat, c);
    }
    return (unsigned)c;
}

static void say_full(void)
{
    if (!atomic_exchange(&said_full, 1))
        mt_say("mt_alloc_report: more than 1048576 custom blocks live at once; the rest are not tracked");
}

/* The new block's site and tag under recording `rec`, as hooks.c's
 * track_new takes them. */
static unsigned new_tag(int rec, uint64_t size, unsigned cat, uint32_t *site, uint32_t *tag, int frames)
{
    *site = *tag = 0;
    int kind = mt_sample_kind(rec, size); /* sampling: DETAIL if sampled, else NONE */
    if (MT_UNLIKELY(kind != MT_REC_NONE)) {
        *site = mt_site_here(cat, frames);
        *tag = mt_tag_new(kind, *site);
    }
    return (unsigned)kind;
}

MT_EXPORT void mt_alloc_report(const void *ptr, size_t size)
{
    slot *t;
    if (!ptr || !active() || !(t = get_table()))
        return;
    slot *s = insert(t, (uintptr_t)ptr);
    if (!s) {
        say_full();
        return;
    }
    unsigned cat = category();
    uint32_t site, tag;
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy);
    unsigned kind = new_tag(rec, size, cat, &site, &tag, 1);
    s->size = size;
    s->cat = (unsigned char)cat;
    s->kind = (unsigned char)kind;
    s->tag = tag;
    _Atomic long *sbusy = kind == MT_REC_DETAIL ? mt_site_enter() : NULL; /* record.h: across a fork */
    mt_count_block(cat, (int64_t)size, 0, +1);
    if (kind == MT_REC_DETAIL) { /* (sbusy is NULL in a thread with no shard) */
        mt_site_count_new(site, size);
        mt_site_leave(sbusy);
    }
    mt_event_alloc(ptr, size, cat, site, rec == MT_REC_TRACE ? tag : 0, rec);
    mt_rec_leave(rec, busy);
}

MT_EXPORT void mt_free_report(const void *ptr)
{
    slot *t, *s;
    if (!ptr || !active() || !(t = atomic_load_explicit(&table, memory_order_acquire)) ||
        !(s = find(t, (uintptr_t)ptr)))
        return;
    uint64_t size = s->size;
    unsigned cat = s->cat, kind = s->kind;
    uint32_t tag = s->tag;
    uintptr_t k = (uintptr_t)ptr;
    if (!atomic_compare_exchange_strong(&s->key, &k, GONE))
        return; /* another thread freed it meanwhile */
    _Atomic long *sbusy = kind == MT_REC_DETAIL ? mt_site_enter() : NULL;
    mt_count_block(cat, (int64_t)size, 0, -1);
    if (kind == MT_REC_DETAIL) {
        mt_site_count_gone(tag, size);
        mt_site_leave(sbusy);
    }
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy);
    uint32_t id = rec == MT_REC_TRACE ? mt_tag_id(kind, tag) : 0;
    mt_event_free(ptr, size, cat, mt_tag_site(kind, tag), id, rec);
    mt_rec_leave(rec, busy);
}

MT_EXPORT void mt_realloc_report(const void *old, const void *ptr, size_t size)
{
    slot *t, *s;
    if (!old) {
        mt_alloc_report(ptr, size);
        return;
    }
    if (!active() || !(t = atomic_load_explicit(&table, memory_order_acquire)) ||
        !(s = find(t, (uintptr_t)old))) {
        mt_alloc_report(ptr, size); /* an unknown old block: the new one still counts */
        return;
    }
    if (!ptr) {
        mt_free_report(old);
        return;
    }
    uint64_t was = s->size;
    unsigned cat = s->cat, okind = s->kind;
    uint32_t old_tag = s->tag;
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy);
    /* As hooks.c's realloc: not recording, a block stays at its site. */
    uint32_t site = 0, tag = 0;
    unsigned kind = MT_REC_NONE;
    if (rec != MT_REC_NONE)
        kind = new_tag(rec, size, cat, &site, &tag, 1);
    else if (okind == MT_REC_DETAIL && !mt_site_opt.sample) /* a sampled block is sampled afresh */
        site = tag = old_tag, kind = MT_REC_DETAIL;
    if (ptr != old) {
        uintptr_t k = (uintptr_t)old;
        if (!atomic_compare_exchange_strong(&s->key, &k, GONE)) {
            mt_rec_leave(rec, busy);
            return;
        }
        s = insert(t, (uintptr_t)ptr);
        if (!s) {
            say_full();
            _Atomic long *sbusy = okind == MT_REC_DETAIL ? mt_site_enter() : NULL; /* record.h */
            mt_count_block(cat, (int64_t)was, 0, -1);
            if (okind == MT_REC_DETAIL) { /* it leaves its site too */
                mt_site_count_gone(old_tag, was);
                mt_site_leave(sbusy);
            }
            mt_rec_leave(rec, busy);
            return;
        }
        s->cat = (unsigned char)cat;
    }
    s->size = size;
    s->kind = (unsigned char)kind;
    s->tag = tag;
    _Atomic long *sbusy = mt_site_enter();
    mt_count_resize(cat, (int64_t)size - (int64_t)was, 0);
    mt_site_count_resize(okind, old_tag, kind, tag, (int64_t)was, (int64_t)size);
    mt_site_leave(sbusy);
    if (rec == MT_REC_TRACE)
        mt_event_realloc(ptr, old, size, cat, site, tag, mt_tag_id(okind, old_tag), rec);
    else
        mt_event_realloc(ptr, old, size, cat, site, 0, 0, rec);
    mt_rec_leave(rec, busy);
}
