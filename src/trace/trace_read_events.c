/* trace_read_events.c — the reader's events: an EVENTS chunk's streams
 * decoded event by event (every stream bound and value checked), chunks
 * handled in order (definitions, events, the end record), and seeking to
 * a chunk through the index. */
#include "trace/trace_read_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int trace_reader_fail(mt_trace_reader *r, const char *fmt, ...)
{
    const chunk *c = r->cur;
    int n = snprintf(r->err, sizeof r->err, "%s: chunk %llu at offset %llu: ", r->name,
                     (unsigned long long)(c ? c->ordinal : 0), (unsigned long long)(c ? c->offset : 0));
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof r->err)
        vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
    va_end(ap);
    r->failed = 1;
    return -1;
}

static const char *const stream_names[TRACE_NSTREAMS] = {
    "ops",  "xops",   "threads", "times",      "sizes",     "frees",
    "bits", "stacks", "ids",     "categories", "addresses", "runs",
};

/* Sets up the decoder on an EVENTS chunk's body. */
static int events_begin(mt_trace_reader *r, const chunk *c)
{
    decoder *d = &r->dec;
    const unsigned char *p = c->raw, *end = c->raw + c->raw_len;
    uint64_t t0, base, flags = 0, ns;
    if (trace_get_varint(&p, end, &t0) < 0 || trace_get_varint(&p, end, &base) < 0 || base > UINT32_MAX ||
        (r->info.version > 1 && trace_get_varint(&p, end, &flags) < 0) ||
        trace_get_varint(&p, end, &ns) < 0 || ns > 64)
        return trace_reader_fail(r, "bad events body prefix");
    if (flags & ~(uint64_t)TRACE_F_KNOWN)
        return trace_reader_fail(r, "unknown events coding flags 0x%llx", (unsigned long long)flags);
    uint64_t len[64];
    for (uint64_t i = 0; i < ns; i++)
        if (trace_get_varint(&p, end, &len[i]) < 0)
            return trace_reader_fail(r, "bad stream length %llu", (unsigned long long)i);
    for (uint64_t i = 0; i < ns; i++) {
        if (len[i] > (uint64_t)(end - p))
            return trace_reader_fail(r, "stream %llu (%s) runs %llu bytes past the body",
                                     (unsigned long long)i, i < TRACE_NSTREAMS ? stream_names[i] : "unknown",
                                     (unsigned long long)(len[i] - (uint64_t)(end - p)));
        if (i < TRACE_NSTREAMS) {
            d->s[i] = p;
            d->e[i] = p + len[i];
        }
        p += len[i];
    }
    for (uint64_t i = ns; i < TRACE_NSTREAMS; i++)
        d->s[i] = d->e[i] = p;
    if (p != end)
        return trace_reader_fail(r, "%zu bytes after the streams", (size_t)(end - p));
    if ((uint64_t)(d->e[TRACE_S_OPS] - d->s[TRACE_S_OPS]) != c->count)
        return trace_reader_fail(r, "%u events in the header, %zu in the ops stream", c->count,
                                 (size_t)(d->e[TRACE_S_OPS] - d->s[TRACE_S_OPS]));
    d->left = c->count;
    d->done = 0;
    d->t = (uint64_t)trace_unzigzag(t0);
    d->last_id = d->last_freed = (uint32_t)base;
    d->thread = 0;
    d->category = 0;
    d->addr = 0;
    d->bits = 0;
    d->nbits = 0;
    d->flags = (unsigned)flags;
    d->run_open = 0;
    d->run_left = 0;
    r->ops.prev = 0;
    r->gen++;
    return 0;
}

static int events_end(mt_trace_reader *r)
{
    if (r->dec.nbits >= 8 || (r->dec.bits & ((1ull << r->dec.nbits) - 1)))
        return trace_reader_fail(r, "bits left in stream bits after the last event");
    if (r->dec.run_left)
        return trace_reader_fail(r, "a time run goes %llu events past the last event",
                                 (unsigned long long)r->dec.run_left);
    for (int i = 0; i < TRACE_NSTREAMS; i++)
        if (r->dec.s[i] != r->dec.e[i])
            return trace_reader_fail(r, "%zu bytes left in stream %s after the last event",
                                     (size_t)(r->dec.e[i] - r->dec.s[i]), stream_names[i]);
    return 0;
}

/* Hot path varint: one byte inline, else the checked reader. */
#define GETV(stream, var)                                                                                    \
    do {                                                                                                     \
        const unsigned char *p_ = d->s[stream];                                                              \
        if (p_ < d->e[stream] && *p_ < 0x80) {                                                               \
            var = *p_;                                                                                       \
            d->s[stream] = p_ + 1;                                                                           \
        } else if (trace_get_varint(&d->s[stream], d->e[stream], &var) < 0)                                  \
            return trace_reader_fail(r, "event %u: bad varint in stream %s", d->done, stream_names[stream]); \
    } while (0)

/* k <= 32 bits from the bit stream: 0, or -1 past its end. */
static inline int get_bits(decoder *d, unsigned k, uint64_t *out)
{
    if (d->nbits < k) {
        const unsigned char *p = d->s[TRACE_S_BITS], *e = d->e[TRACE_S_BITS];
        if (e - p >= 8) {
            d->bits |= trace_get64(p) << d->nbits;
            unsigned take = (63 - d->nbits) >> 3;
            d->s[TRACE_S_BITS] = p + take;
            d->nbits += take * 8;
        } else {
            while (d->nbits <= 56 && p < e) {
                d->bits |= (uint64_t)*p++ << d->nbits;
                d->nbits += 8;
            }
            d->s[TRACE_S_BITS] = p;
            if (d->nbits < k)
                return -1;
        }
    }
    *out = d->bits & ((1ull << k) - 1);
    d->bits = k < 64 ? d->bits >> k : 0;
    d->nbits -= k;
    return 0;
}

/* TRACE_F_ALIGNED: k low bits as ceil(k / 8) bytes; 0, -1 past the
 * stream's end, -2 when they have bits set above k. */
static inline int get_bytes(decoder *d, unsigned k, uint64_t *out)
{
    unsigned n = (k + 7) >> 3;
    const unsigned char *p = d->s[TRACE_S_BITS];
    if ((size_t)(d->e[TRACE_S_BITS] - p) < n)
        return -1;
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    d->s[TRACE_S_BITS] = p + n;
    if (k < 64 && v >> k)
        return -2;
    *out = v;
    return 0;
}

/* A value coded as a symbol in `stream` and low bits in the bit stream;
 * tagbit 0x80 for values below 2^32 (whose symbols are below 128): the
 * symbol's top bit is a tag, given in `tag` (0x80 or 0). */
#define GETSYM_TAG(stream, var, tagbit, tag)                                                                 \
    do {                                                                                                     \
        if (d->s[stream] >= d->e[stream])                                                                    \
            return trace_reader_fail(r, "event %u: stream %s ends early", d->done, stream_names[stream]);    \
        unsigned k_;                                                                                         \
        tag = *d->s[stream] & (tagbit);                                                                      \
        uint64_t v_ = trace_sym_base(*d->s[stream]++ & ~(tagbit), &k_), lo_, hi_ = 0;                        \
        if (d->flags & TRACE_F_ALIGNED) {                                                                    \
            int rc_ = 0;                                                                                     \
            lo_ = 0;                                                                                         \
            if (k_)                                                                                          \
                rc_ = get_bytes(d, k_, &lo_);                                                                \
            if (rc_ < 0)                                                                                     \
                return trace_reader_fail(                                                                    \
                    r, rc_ == -1 ? "event %u: stream bits ends early" : "event %u: low bits out of range",   \
                    d->done);                                                                                \
        } else if (k_ > 32) {                                                                                \
            if (get_bits(d, 32, &lo_) < 0 || get_bits(d, k_ - 32, &hi_) < 0)                                 \
                return trace_reader_fail(r, "event %u: stream bits ends early", d->done);                    \
            lo_ |= hi_ << 32;                                                                                \
        } else if (get_bits(d, k_, &lo_) < 0)                                                                \
            return trace_reader_fail(r, "event %u: stream bits ends early", d->done);                        \
        var = v_ + lo_;                                                                                      \
    } while (0)

#define GETSYM(stream, var)                                                                                  \
    do {                                                                                                     \
        unsigned t_;                                                                                         \
        GETSYM_TAG(stream, var, 0u, t_);                                                                     \
        (void)t_;                                                                                            \
    } while (0)

/* Makes room for per-thread decoder state of every defined thread. */
static int threads_room(mt_trace_reader *r)
{
    if (r->defs.nthreads <= r->ts_cap)
        return 0;
    size_t cap = r->ts_cap ? r->ts_cap : 64;
    while (cap < r->defs.nthreads)
        cap *= 2;
    thread_stacks *t = realloc(r->ts, cap * sizeof *t);
    if (!t)
        return -1;
    memset(t + r->ts_cap, 0, (cap - r->ts_cap) * sizeof *t);
    r->ts = t;
    r->ts_cap = cap;
    return 0;
}

static int decode(mt_trace_reader *r, mt_trace_event *ev)
{
    decoder *d = &r->dec;
    unsigned b = *d->s[TRACE_S_OPS]++, tc = b >> 5, x = b & 0x1f;
    if (tc == TRACE_TC_ESCAPE) {
        if (x || d->s[TRACE_S_XOPS] >= d->e[TRACE_S_XOPS])
            return trace_reader_fail(r, "event %u: bad escaped op", d->done);
        x = *d->s[TRACE_S_XOPS]++;
    }
    unsigned op = x ^ trace_op_guess(&r->ops, r->gen);
    unsigned type = op & TRACE_OP_TYPE;
    uint64_t v;
    if (type < MT_TRACE_ALLOC || type > MT_TRACE_MUNMAP || (op & ~TRACE_OP_KNOWN))
        return trace_reader_fail(r, "event %u: bad op 0x%02x", d->done, op);
    trace_op_seen(&r->ops, op);
    memset(ev, 0, sizeof *ev);
    ev->type = (uint8_t)type;
    if (op & TRACE_OP_THREAD) {
        GETV(TRACE_S_THREADS, v);
        if (v >= r->defs.nthreads || !r->defs.tid_known[v])
            return trace_reader_fail(r, "event %u: undefined thread index %llu", d->done,
                                     (unsigned long long)v);
        if (v >= r->ts_cap && threads_room(r) < 0)
            return trace_reader_fail(r, "out of memory");
        d->thread = (uint32_t)v + 1;
    } else if (!d->thread)
        return trace_reader_fail(r, "event %u: no thread", d->done);
    ev->thread = r->defs.tids[d->thread - 1];
    if (op & TRACE_OP_CATEGORY) {
        if (d->s[TRACE_S_CATS] >= d->e[TRACE_S_CATS])
            return trace_reader_fail(r, "event %u: stream categories ends early", d->done);
        d->category = *d->s[TRACE_S_CATS]++;
    }
    ev->category = d->category;
    if (d->flags & TRACE_F_TIME_RUNS) {
        if (tc != 0 && tc != TRACE_TC_ESCAPE)
            return trace_reader_fail(r, "event %u: a time code in a chunk of time runs", d->done);
        if (!d->run_open) {
            GETV(TRACE_S_RUNS, d->run_left);
            d->run_open = 1;
        }
        if (d->run_left) {
            d->run_left--;
            v = 0;
        } else {
            GETSYM(TRACE_S_TIMES, v);
            v++;
            d->run_open = 0;
        }
    } else if (tc < TRACE_TC_STREAM)
        v = tc;
    else
        GETSYM(TRACE_S_TIMES, v);
    d->t += op & TRACE_OP_BACK ? -v : v;
    ev->time_ns = d->t * r->info.time_unit_ns;
    if (type == MT_TRACE_FREE || type == MT_TRACE_REALLOC) {
        unsigned rel;
        GETSYM_TAG(TRACE_S_FREES, v, 0x80u, rel);
        if (v > UINT32_MAX)
            return trace_reader_fail(r, "event %u: bad free reference", d->done);
        uint32_t ref =
            rel ? d->last_freed + 1 + (uint32_t)trace_unzigzag32((uint32_t)v) : d->last_id - (uint32_t)v;
        d->last_freed = ref;
        if (type == MT_TRACE_FREE)
            ev->id = ref;
        else
            ev->old_id = ref;
    }
    if (type == MT_TRACE_ALLOC || type == MT_TRACE_REALLOC) {
        GETV(TRACE_S_IDS, v);
        if (v > UINT32_MAX)
            return trace_reader_fail(r, "event %u: bad id delta", d->done);
        ev->id = d->last_id + 1 + (uint32_t)trace_unzigzag32((uint32_t)v);
        d->last_id = ev->id;
        GETV(TRACE_S_STACKS, v);
        if (v > UINT32_MAX)
            return trace_reader_fail(r, "event %u: bad stack delta", d->done);
        thread_stacks *ts = &r->ts[d->thread - 1];
        if (ts->gen != r->gen) {
            ts->gen = r->gen;
            ts->last[0] = ts->last[1] = 0;
        }
        uint32_t *last = &ts->last[type == MT_TRACE_REALLOC];
        *last += (uint32_t)trace_unzigzag32((uint32_t)v);
        ev->stack = *last;
        size_slot *sc = &r->size_cache[trace_hash32(ev->stack) % TRACE_SIZE_CACHE];
        if (op & TRACE_OP_SAME_SIZE) {
            if (sc->gen != r->gen || sc->stack != ev->stack)
                return trace_reader_fail(r, "event %u: same size as an unknown one", d->done);
            ev->size = sc->size;
        } else
            GETSYM(TRACE_S_SIZES, ev->size);
        sc->gen = r->gen;
        sc->stack = ev->stack;
        sc->size = ev->size;
    } else if (type != MT_TRACE_FREE) {
        if (op & TRACE_OP_SAME_SIZE)
            return trace_reader_fail(r, "event %u: bad op byte 0x%02x", d->done, op);
        GETSYM(TRACE_S_SIZES, ev->size);
        GETV(TRACE_S_ADDRS, v);
        d->addr += (uint64_t)trace_unzigzag(v);
        ev->address = d->addr;
    }
    d->done++;
    d->left--;
    return 1;
}

/* Handles chunks until one has events to give: 1, 0 at the end, -1. */
static int advance(mt_trace_reader *r)
{
    for (;;) {
        if (r->cur && r->cur->status == 1 && r->cur->kind == TRACE_CHUNK_EVENTS && events_end(r) < 0)
            return -1;
        chunk *c = trace_next_chunk(r);
        if (c->status < 0) {
            snprintf(r->err, sizeof r->err, "%s", c->err);
            r->failed = 1;
            return -1;
        }
        if (c->status == 0) {
            r->ended = 1;
            if (r->info.file_bytes) /* a stream's size is not known: it stays at the last chunk */
                r->consumed = r->info.file_bytes;
            return 0;
        }
        r->chunks_read++;
        r->consumed = c->next;
        char why[256];
        switch (c->kind) {
        case TRACE_CHUNK_DEFS:
            if (trace_defs_parse(&r->defs, c->raw, c->raw_len, c->count, why, sizeof why) < 0)
                return trace_reader_fail(r, "%s", why);
            if (threads_room(r) < 0)
                return trace_reader_fail(r, "out of memory");
            break;
        case TRACE_CHUNK_EVENTS:
            if (events_begin(r, c) < 0)
                return -1;
            if (r->dec.left)
                return 1;
            break;
        case TRACE_CHUNK_END:
            if (trace_end_parse(&r->defs, c->raw, c->raw_len, c->count, why, sizeof why) < 0)
                return trace_reader_fail(r, "%s", why);
            r->complete = 1;
            break;
        default: /* the index (read at open), kinds of later versions */ break;
        }
    }
}

int mt_trace_next(mt_trace_reader *r, mt_trace_event *ev)
{
    if (r->failed)
        return -1;
    if (r->ended)
        return 0;
    if (!r->cur || r->cur->status != 1 || r->cur->kind != TRACE_CHUNK_EVENTS || !r->dec.left) {
        int rc = advance(r);
        if (rc <= 0)
            return rc;
    }
    return decode(r, ev);
}

int mt_trace_seek_chunk(mt_trace_reader *r, size_t i)
{
    if (i >= r->nindex)
        return -EINVAL;
    trace_prefetch_stop(r);
    r->failed = r->ended = 0;
    r->dec.left = 0;
    char why[256];
    for (size_t j = 0; j < i; j++) {
        if (r->index[j].kind != TRACE_CHUNK_DEFS)
            continue;
        chunk *c = r->cur = &r->slot[0];
        trace_load_at(r, r->index[j].offset, j, c);
        if (c->status < 0) {
            snprintf(r->err, sizeof r->err, "%s", c->err);
            r->failed = 1;
            return -1;
        }
        if (c->status == 0 || c->kind != TRACE_CHUNK_DEFS)
            return trace_reader_fail(r, "the index says definitions, the chunk does not");
        if (trace_defs_parse(&r->defs, c->raw, c->raw_len, c->count, why, sizeof why) < 0)
            return trace_reader_fail(r, "%s", why);
        if (threads_room(r) < 0)
            return trace_reader_fail(r, "out of memory");
    }
    r->cur = NULL;
    trace_load_at(r, r->index[i].offset, i, NULL);
    r->chunks_read = i;
    r->consumed = r->index[i].offset;
    if (r->want_prefetch)
        trace_prefetch_start(r);
    return 0;
}
