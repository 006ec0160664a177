/* trace_write_enc.c — the column coder of the trace writer: one events
 * chunk's events appended to per-field streams (ops, threads, time deltas,
 * sizes, ...), each one byte plane of homogeneous values so zstd's entropy
 * stage sees one distribution at a time, then laid out as one body and
 * compressed into one zstd frame (docs/trace-format.md). A coder is used
 * by one thread at a time: the writer's caller (threads <= 1) or one of
 * its encoder threads (trace_write_pool.c). Agent-safe: every buffer is
 * mmap'd, zstd works in a static context on an mmap'd workspace. */
#define ZSTD_STATIC_LINKING_ONLY
#include "trace/trace_write_int.h"

#include <errno.h>
#include <sys/mman.h>
#include <zstd.h>

#define REPETITIVE_LEVEL 9
#define REPETITIVE_TABLE_LOG                                                                                 \
    16 /* its hash and chain tables (256 KiB each): as small as level 9 with its                             \
           own (up to 8 MiB each, +14 MB of the agent's RSS on mbench) */
#define PAGE 4096u

/* Worst-case bytes one event adds to each stream. */
static const unsigned stream_max[TRACE_NSTREAMS] = {
    [TRACE_S_OPS] = 1,   [TRACE_S_XOPS] = 1,  [TRACE_S_THREADS] = 5, [TRACE_S_TIMES] = 1,
    [TRACE_S_SIZES] = 1, [TRACE_S_FREES] = 1, [TRACE_S_BITS] = 28,   [TRACE_S_STACKS] = 5,
    [TRACE_S_IDS] = 5,   [TRACE_S_CATS] = 1,  [TRACE_S_ADDRS] = 10,  [TRACE_S_RUNS] = 5,
};

void *trace_w_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The streams are mapped at their worst case (64 bytes an event, 8 MiB at
 * the default 128 Ki events) but only the pages a chunk touches count. */
trace_enc *trace_enc_create(uint32_t chunk_events, int max_level)
{
    trace_enc *e = trace_w_map(sizeof *e);
    if (!e)
        return NULL;
    int ok = 1;
    for (int s = 0; s < TRACE_NSTREAMS && ok; s++) {
        e->stream_cap[s] = (size_t)chunk_events * stream_max[s];
        e->stream[s] = e->cur[s] = trace_w_map(e->stream_cap[s]);
        ok = e->stream[s] != NULL;
    }
    if (ok) {
        e->zwork_size = ZSTD_estimateCStreamSize(max_level);
        e->zwork = trace_w_map(e->zwork_size);
        e->cctx = e->zwork ? ZSTD_initStaticCCtx(e->zwork, e->zwork_size) : NULL;
        ok = e->cctx != NULL;
    }
    if (!ok) {
        trace_enc_destroy(e);
        return NULL;
    }
    return e;
}

void trace_enc_destroy(trace_enc *e)
{
    if (!e)
        return;
    for (int s = 0; s < TRACE_NSTREAMS; s++)
        if (e->stream[s])
            munmap(e->stream[s], e->stream_cap[s]);
    if (e->zwork)
        munmap(e->zwork, e->zwork_size);
    trace_wbuf_free(&e->thread_states);
    munmap(e, sizeof *e);
}

void trace_enc_open(trace_enc *e, uint64_t gen, unsigned flags, uint32_t base_id)
{
    e->flags = flags;
    e->zrun = 0;
    e->zeros = 0;
    e->sumk = 0;
    e->bits_out = 0;
    for (int s = 0; s < TRACE_NSTREAMS; s++)
        e->cur[s] = e->stream[s];
    e->nevents = 0;
    e->bacc = 0;
    e->bn = 0;
    e->cur_thread = 0;
    e->ops.prev = 0;
    e->cur_category = 0;
    e->prev_addr = 0;
    e->base_id = e->last_freed = e->last_id = base_id;
    e->chunk_gen = gen;
}

int trace_enc_threads(trace_enc *e, uint32_t n)
{
    if (n <= e->nthreads_cap)
        return 0;
    size_t want = (size_t)n * sizeof(thread_state);
    if (trace_wbuf_reserve(&e->thread_states, want - e->thread_states.len) < 0)
        return -ENOMEM;
    memset(e->thread_states.p + e->thread_states.len, 0, want - e->thread_states.len);
    e->thread_states.len = want;
    e->nthreads_cap = n;
    return 0;
}

void trace_enc_trim(trace_enc *e)
{
    for (int s = 0; s < TRACE_NSTREAMS; s++) {
        size_t used = ((size_t)(e->cur[s] - e->stream[s]) + 8 + PAGE - 1) & ~(size_t)(PAGE - 1);
        if (e->stream_touched[s] >
            2 * used + (256u << 10)) { /* an unusual chunk: give its extra pages back */
            madvise(e->stream[s] + used, e->stream_touched[s] - used, MADV_DONTNEED);
            e->stream_touched[s] = used;
        } else if (used > e->stream_touched[s])
            e->stream_touched[s] = used;
    }
}

/* ---- one event ---- */

/* Appends k <= 32 low bits of v to the bit stream. */
static inline void put_bits(trace_enc *e, uint64_t v, unsigned k)
{
    e->bacc |= v << e->bn;
    e->bn += k;
    if (e->bn >= 32) {
        trace_put32(e->cur[TRACE_S_BITS], (uint32_t)e->bacc);
        e->cur[TRACE_S_BITS] += 4;
        e->bacc >>= 32;
        e->bn -= 32;
    }
}

/* v as a symbol (with tag: 0, or 0x80 for a v < 2^32) in `stream` and
 * its low bits in the bit stream. */
static inline void put_sym_tag(trace_enc *e, int stream, uint64_t v, unsigned tag)
{
    unsigned k;
    *e->cur[stream]++ = (unsigned char)(trace_sym(v, &k) | tag);
    e->sumk += k;
    if (e->flags & TRACE_F_ALIGNED) {
        if (k < 64)
            v &= (1ull << k) - 1;
        unsigned char *q = e->cur[TRACE_S_BITS];
        trace_put64(q, v); /* the stream has room for 8 more (stream_max) */
        e->cur[TRACE_S_BITS] = q + ((k + 7) >> 3);
        return;
    }
    if (k > 32) {
        put_bits(e, v & 0xffffffffu, 32);
        v >>= 32;
        k -= 32;
    }
    if (k)
        put_bits(e, v & ((1ull << k) - 1), k);
}

static inline void put_sym(trace_enc *e, int stream, uint64_t v)
{
    put_sym_tag(e, stream, v, 0);
}

void trace_enc_event(trace_enc *e, const trace_rec *r)
{
    unsigned type = r->type;
    int64_t t = r->t;
    if (!e->nevents)
        e->first_t = e->prev_t = e->min_t = e->max_t = t;
    int alloc = type == MT_TRACE_ALLOC || type == MT_TRACE_REALLOC;
    unsigned op = type;
    if (r->tidx + 1 != e->cur_thread) {
        op |= TRACE_OP_THREAD;
        e->cur[TRACE_S_THREADS] = trace_put_varint(e->cur[TRACE_S_THREADS], r->tidx);
        e->cur_thread = r->tidx + 1;
    }
    if (r->category != e->cur_category) {
        op |= TRACE_OP_CATEGORY;
        *e->cur[TRACE_S_CATS]++ = (unsigned char)r->category;
        e->cur_category = (uint8_t)r->category;
    }
    size_slot *sc = NULL;
    int same = 0;
    if (alloc) {
        sc = &e->size_cache[trace_hash32(r->stack) % TRACE_SIZE_CACHE];
        same = sc->chunk == e->chunk_gen && sc->stack == r->stack && sc->size == r->size;
        if (same)
            op |= TRACE_OP_SAME_SIZE;
    }
    uint64_t dt = (uint64_t)t - (uint64_t)e->prev_t;
    if ((int64_t)dt < 0) {
        op |= TRACE_OP_BACK;
        dt = -dt;
    }
    unsigned x = op ^ trace_op_guess(&e->ops, e->chunk_gen);
    trace_op_seen(&e->ops, op);
    e->zeros += !dt;
    if (e->flags & TRACE_F_TIME_RUNS) {
        if (x >= 32) {
            *e->cur[TRACE_S_OPS]++ = TRACE_TC_ESCAPE << 5;
            *e->cur[TRACE_S_XOPS]++ = (unsigned char)x;
        } else
            *e->cur[TRACE_S_OPS]++ = (unsigned char)x;
        if (!dt)
            e->zrun++;
        else {
            e->cur[TRACE_S_RUNS] = trace_put_varint(e->cur[TRACE_S_RUNS], e->zrun);
            e->zrun = 0;
            put_sym(e, TRACE_S_TIMES, dt - 1);
        }
    } else if (x >= 32) {
        *e->cur[TRACE_S_OPS]++ = TRACE_TC_ESCAPE << 5;
        *e->cur[TRACE_S_XOPS]++ = (unsigned char)x;
        put_sym(e, TRACE_S_TIMES, dt);
    } else if (dt < TRACE_TC_STREAM) {
        *e->cur[TRACE_S_OPS]++ = (unsigned char)(x | dt << 5);
    } else {
        *e->cur[TRACE_S_OPS]++ = (unsigned char)(x | TRACE_TC_STREAM << 5);
        put_sym(e, TRACE_S_TIMES, dt);
    }
    e->prev_t = t;
    if (t < e->min_t)
        e->min_t = t;
    if (t > e->max_t)
        e->max_t = t;

    if (type == MT_TRACE_FREE || type == MT_TRACE_REALLOC) {
        /* The freed id against the last allocation's, or (tagged) against
         * the last freed one when that is shorter: blocks freed in the
         * order they were made (a teardown) cost a few bits each. */
        uint32_t freed = type == MT_TRACE_FREE ? r->id : r->old_id;
        uint32_t back = e->last_id - freed, rel = trace_zigzag32((int32_t)(freed - e->last_freed - 1));
        if (rel < back / 8)
            put_sym_tag(e, TRACE_S_FREES, rel, 0x80);
        else
            put_sym(e, TRACE_S_FREES, back);
        e->last_freed = freed;
    }
    if (type != MT_TRACE_FREE && !same)
        put_sym(e, TRACE_S_SIZES, r->size);
    if (sc) {
        sc->chunk = e->chunk_gen;
        sc->stack = r->stack;
        sc->size = r->size;
    }
    if (alloc) {
        e->cur[TRACE_S_IDS] =
            trace_put_varint(e->cur[TRACE_S_IDS], trace_zigzag32((int32_t)(r->id - (e->last_id + 1))));
        e->last_id = r->id;
        thread_state *ts = (thread_state *)e->thread_states.p + r->tidx;
        if (ts->chunk != e->chunk_gen) {
            ts->chunk = e->chunk_gen;
            ts->last_stack[0] = ts->last_stack[1] = 0;
        }
        uint32_t *last = &ts->last_stack[type == MT_TRACE_REALLOC];
        e->cur[TRACE_S_STACKS] =
            trace_put_varint(e->cur[TRACE_S_STACKS], trace_zigzag32((int32_t)(r->stack - *last)));
        *last = r->stack;
    } else if (type != MT_TRACE_FREE) {
        e->cur[TRACE_S_ADDRS] =
            trace_put_varint(e->cur[TRACE_S_ADDRS], trace_zigzag((int64_t)(r->address - e->prev_addr)));
        e->prev_addr = r->address;
    }
    e->nevents++;
}

/* ---- compressing ---- */

typedef struct seg {
    const unsigned char *p;
    size_t n;
} seg;

/* Compresses segs[0..nseg) into out (one zstd frame, a block boundary
 * after each segment so each zstd block holds one stream's values and
 * its entropy tables fit them): the stored size, 0 on failure. */
static size_t compress_segs(trace_enc *e, int level, int rep, unsigned char *out, size_t cap, const seg *segs,
                            int nseg, size_t n, int bits_seg)
{
    if (ZSTD_isError(ZSTD_CCtx_reset(e->cctx, ZSTD_reset_session_and_parameters)) ||
        ZSTD_isError(
            ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, rep ? REPETITIVE_LEVEL : level)) ||
        (rep && (ZSTD_isError(ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_hashLog, REPETITIVE_TABLE_LOG)) ||
                 ZSTD_isError(ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_chainLog, REPETITIVE_TABLE_LOG)))) ||
        ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(e->cctx, n)))
        return 0;
    ZSTD_outBuffer o = {out, cap, 0};
    for (int i = 0; i < nseg; i++) {
        ZSTD_inBuffer in = {segs[i].p, segs[i].n, 0};
        size_t before = o.pos;
        ZSTD_EndDirective mode = i == nseg - 1 ? ZSTD_e_end : ZSTD_e_flush;
        if (!in.size && mode != ZSTD_e_end)
            continue;
        size_t rc;
        do {
            rc = ZSTD_compressStream2(e->cctx, &o, &in, mode);
            if (ZSTD_isError(rc) || (rc && o.pos == o.size))
                return 0;
        } while (rc || in.pos < in.size);
        if (i == bits_seg)
            e->bits_out = o.pos - before;
    }
    return o.pos;
}

/* segs[0..nseg), concatenated, compressed (or stored, if that is not
 * smaller) into out at `at` + the header's room. */
static int pack_segs(trace_enc *e, int level, int rep, wbuf *out, size_t at, const seg *segs, int nseg,
                     int bits_seg, trace_chunk_out *co)
{
    size_t n = 0;
    for (int i = 0; i < nseg; i++)
        n += segs[i].n;
    size_t bound = ZSTD_compressBound(n) + 16 * (size_t)nseg + 64;
    out->len = at;
    if (trace_wbuf_reserve(out, TRACE_CHUNK_HEADER_SIZE + bound) < 0)
        return -ENOMEM;
    unsigned char *payload = out->p + at + TRACE_CHUNK_HEADER_SIZE;
    unsigned codec = TRACE_CODEC_ZSTD;
    size_t stored = compress_segs(e, level, rep, payload, bound, segs, nseg, n, bits_seg);
    if (!stored || stored >= n) {
        codec = TRACE_CODEC_NONE;
        stored = 0;
        for (int i = 0; i < nseg; i++)
            if (segs[i].n) {
                memcpy(payload + stored, segs[i].p, segs[i].n);
                stored += segs[i].n;
            }
    }
    co->codec = codec;
    co->stored = stored;
    co->raw = n;
    co->crc = trace_crc32c(0, payload, stored);
    out->len = at + TRACE_CHUNK_HEADER_SIZE + stored;
    e->last_stored = stored;
    e->last_raw = n;
    return 0;
}

int trace_enc_pack(trace_enc *e, int level, wbuf *out, size_t at, unsigned kind, const void *body, size_t n,
                   uint32_t count, trace_chunk_out *co)
{
    seg one = {body, n};
    co->kind = kind;
    co->count = count;
    co->t0 = co->t1 = 0;
    return pack_segs(e, level, 0, out, at, &one, 1, -1, co);
}

int trace_enc_close(trace_enc *e, int level, int repetitive, wbuf *out, size_t at, trace_chunk_out *co)
{
    for (; e->bn; e->bn = e->bn > 8 ? e->bn - 8 : 0, e->bacc >>= 8) /* the last bits */
        *e->cur[TRACE_S_BITS]++ = (unsigned char)e->bacc;
    if (e->zrun) /* the last run of zero time deltas */
        e->cur[TRACE_S_RUNS] = trace_put_varint(e->cur[TRACE_S_RUNS], e->zrun);
    unsigned char *p = e->prefix;
    p = trace_put_varint(p, trace_zigzag(e->first_t));
    p = trace_put_varint(p, e->base_id);
    p = trace_put_varint(p, e->flags);
    p = trace_put_varint(p, TRACE_NSTREAMS);
    seg segs[TRACE_NSTREAMS + 1];
    segs[0].p = e->prefix;
    for (int s = 0; s < TRACE_NSTREAMS; s++) {
        segs[s + 1].p = e->stream[s];
        segs[s + 1].n = (size_t)(e->cur[s] - e->stream[s]);
        p = trace_put_varint(p, segs[s + 1].n);
    }
    segs[0].n = (size_t)(p - e->prefix);
    e->bits_packed = (e->sumk + 7) / 8;
    co->kind = TRACE_CHUNK_EVENTS;
    co->count = e->nevents;
    co->t0 = e->min_t;
    co->t1 = e->max_t;
    return pack_segs(e, level, repetitive, out, at, segs, TRACE_NSTREAMS + 1, TRACE_S_BITS + 1, co);
}

void trace_enc_stats(const trace_enc *e, trace_chunk_stats *s)
{
    s->nevents = e->nevents;
    s->zeros = e->zeros;
    s->flags = e->flags;
    s->bits_out = e->bits_out;
    s->bits_packed = e->bits_packed;
    s->stored = e->last_stored;
    s->raw = e->last_raw;
}
