/* xe_util.h — helpers shared inside src/xe by the event, predicate and
 * target files: the field getter the predicate evaluator inlines, the
 * targets' parameter lists, reasons, JSON rendering, and the packed event
 * words that ring_buffer and pair_matching publish under per-slot seqlocks.
 * Not part of the module's interface (that is xe.h). */
#ifndef MT_XE_UTIL_H
#define MT_XE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "xe/xe.h"

static inline uint64_t xe_field_get(const xe_event *ev, unsigned f)
{
    switch (f) {
    case XE_F_TYPE: return ev->type;
    case XE_F_CATEGORY: return ev->category;
    case XE_F_SIZE: return ev->size;
    case XE_F_ADDRESS: return ev->address;
    case XE_F_OLD_ADDRESS: return ev->old_address;
    case XE_F_SITE: return ev->site;
    case XE_F_KEY: return ev->key;
    case XE_F_VALUE: return ev->value;
    case XE_F_TID: return ev->tid;
    case XE_F_CPU: return ev->cpu;
    case XE_F_DATA_LEN: return ev->data_len;
    case XE_F_SIZE_CLASS: return ev->size ? 64u - (unsigned)__builtin_clzll(ev->size) : 0;
    default: return 0;
    }
}

/* NUL-terminated `word` equals name[0..len) ignoring ASCII case (names are
 * ASCII; no locale, so it is the same in every process and handler). */
static inline int xe_name_eq(const char *word, const char *name, size_t len)
{
    size_t i = 0;
    for (; i < len && word[i]; i++) {
        char a = word[i], b = name[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z')
            b = (char)(b - 'A' + 'a');
        if (a != b)
            return 0;
    }
    return i == len && word[i] == '\0';
}

/* The host's id for a category name (it may create it), or < 0; -1 with no
 * host. The predicate compiler resolves `category == "name"` with it. */
int xe_category_id(const char *name, size_t len);

/* A target's close when its state is one mapping (xe_targets.c). */
void xe_target_unmap_state(xe_target *t);

/* Trim ASCII blanks (space, tab, CR, LF) off both ends of a slice. */
void xe_trim(const char **s, size_t *n);

/* ---- reasons: an mt_out over the caller's why buffer ---- */
void xe_why_init(mt_out *o, char *why, size_t whylen);
void xe_why_done(mt_out *o);

/* ---- target parameters: "name=value,name=value" ----
 * Names are matched case-insensitively against `p[i].name`; values may be
 * quoted ('..' or ".."), and are left as slices of the text. An unknown
 * or repeated name, or a missing '=', is -EINVAL naming it (and, for an
 * unknown one, listing the accepted names). */
typedef struct xe_param {
    const char *name;
    const char *val;
    size_t len;
    int set;
} xe_param;
int xe_params_parse(const char *target, const char *text, xe_param *p, int n, char *why, size_t whylen);
/* A plain decimal (or 0x hex) number in [min, max]; -EINVAL naming the
 * parameter and the range otherwise. */
int xe_param_u64(const char *target, const xe_param *p, uint64_t min, uint64_t max, uint64_t *out, char *why,
                 size_t whylen);
/* Copies the parameter text into t->params (when it is not already there). */
void xe_params_keep(xe_target *t, const char *params);

/* ---- JSON ---- */
/* {"type":"alloc","category":N,"category_name":..,"tid":..,...,
 * "size_bytes":..,"data_bytes":..} */
void xe_event_json(mt_json *j, const xe_event *ev);

/* ---- packed events ----
 * An event's fields (not data) as XE_EV_WORDS 64-bit words, stored and
 * loaded with relaxed atomics so a reader racing the writer reads words,
 * never tearing one; the slot's seqlock tells it whether the set is whole. */
#define XE_EV_WORDS 9
void xe_pack_event(const xe_event *ev, uint64_t w[XE_EV_WORDS]);
void xe_unpack_event(const uint64_t w[XE_EV_WORDS], xe_event *ev);

static inline void xe_words_store(uint64_t *dst, const uint64_t *src, int n)
{
    for (int i = 0; i < n; i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}
static inline void xe_words_load(uint64_t *dst, const uint64_t *src, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* Seqlock of one slot: odd while its single writer changes it. */
static inline void xe_seq_write_begin(uint64_t *seq)
{
    __atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline void xe_seq_write_end(uint64_t *seq)
{
    __atomic_store_n(seq, *seq + 1, __ATOMIC_RELEASE);
}

/* Single-writer counters readers load concurrently. */
static inline void xe_stat_add(uint64_t *c, uint64_t v)
{
    __atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}
static inline uint64_t xe_stat_get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* 64-bit mixer for the targets' open-addressing tables. */
static inline uint64_t xe_hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t xe_pow2_at_least(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

#endif /* MT_XE_UTIL_H */
