/* trace_write.c — the trace writer (docs/trace-format.md). Events are
 * appended to per-field streams (ops, threads, time deltas, sizes, ...),
 * each one byte plane of homogeneous values so zstd's entropy stage sees
 * one distribution at a time; a full (or old) chunk is laid out as one
 * body, compressed into one zstd frame and written with its header in one
 * host->write. Definitions a chunk's events use go out first in a DEFS
 * chunk. Runs inside the agent: every buffer is mmap'd, zstd works in a
 * static context on an mmap'd workspace, nothing locks. */
#define ZSTD_STATIC_LINKING_ONLY
#include "trace/trace_write_int.h"

#include <errno.h>
#include <sys/mman.h>
#include <time.h>
#include <zstd.h>

/* zstd levels when the configuration leaves it to the writer: 9 for the
 * first events chunk and after one that compressed more than 8:1 (a
 * repetitive program: 13% smaller than level 1 on SQLite's trace, and
 * fast on such input), else 1 (mbench's random values: level 3 is bigger
 * and slower there, higher levels gain ~1.5% for 1.7-2.5x the time). */
#define DEFAULT_LEVEL 1
#define REPETITIVE_LEVEL 9
#define REPETITIVE_TABLE_LOG                                                                                 \
    16 /* its hash and chain tables (256 KiB each): as small as level 9 with its                             \
           own (up to 8 MiB each, +14 MB of the agent's RSS on mbench) */
#define DEFAULT_CHUNK_EVENTS (128u << 10)
#define MAX_CHUNK_EVENTS (1u << 20)
#define DEFAULT_AGE_NS 1000000000ull
#define DEFS_FLUSH_BYTES (8u << 20) /* a DEFS chunk goes out early past this */

/* Worst-case bytes one event adds to each stream. */
static const unsigned stream_max[TRACE_NSTREAMS] = {
    [TRACE_S_OPS] = 1,   [TRACE_S_XOPS] = 1,  [TRACE_S_THREADS] = 5, [TRACE_S_TIMES] = 1,
    [TRACE_S_SIZES] = 1, [TRACE_S_FREES] = 1, [TRACE_S_BITS] = 28,   [TRACE_S_STACKS] = 5,
    [TRACE_S_IDS] = 5,   [TRACE_S_CATS] = 1,  [TRACE_S_ADDRS] = 10,  [TRACE_S_RUNS] = 5,
};

static void *map_anon(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

mt_trace_writer *mt_trace_writer_create(const mt_trace_write_config *cfg, const mt_trace_host *host)
{
    mt_trace_writer *w = map_anon(sizeof *w);
    if (!w)
        return NULL;
    if (host)
        w->host = *host;
    w->level = cfg && cfg->zstd_level ? cfg->zstd_level : DEFAULT_LEVEL;
    if (w->level > ZSTD_maxCLevel())
        w->level = ZSTD_maxCLevel();
    w->auto_level = !(cfg && cfg->zstd_level);
    w->chunk_events = cfg && cfg->chunk_events ? cfg->chunk_events : DEFAULT_CHUNK_EVENTS;
    if (w->chunk_events > MAX_CHUNK_EVENTS)
        w->chunk_events = MAX_CHUNK_EVENTS;
    w->chunk_age_ns = cfg && cfg->chunk_age_ns ? cfg->chunk_age_ns : DEFAULT_AGE_NS;
    w->time_unit = cfg && cfg->time_unit_ns ? cfg->time_unit_ns : 1;
    w->force_flags = cfg ? cfg->chunk_flags : 0;
    if (cfg) {
        w->pid = cfg->pid;
        w->start_ns = cfg->start_ns;
        w->start_realtime_ns = cfg->start_realtime_ns;
    }
    int ok = 1;
    for (int s = 0; s < TRACE_NSTREAMS && ok; s++) {
        w->stream_cap[s] = (size_t)w->chunk_events * stream_max[s];
        w->stream[s] = w->cur[s] = map_anon(w->stream_cap[s]);
        ok = w->stream[s] != NULL;
    }
    if (ok) {
        w->zwork_size = ZSTD_estimateCStreamSize(w->auto_level ? REPETITIVE_LEVEL : w->level);
        w->zwork = map_anon(w->zwork_size);
        w->cctx = w->zwork ? ZSTD_initStaticCCtx(w->zwork, w->zwork_size) : NULL;
        ok = w->cctx != NULL;
    }
    /* Room for the end record (and a small index) now: a writer out of
     * memory later still finishes its file. */
    if (ok)
        ok = trace_wbuf_reserve(&w->body, 4096) == 0 && trace_wbuf_reserve(&w->out, 64u << 10) == 0;
    if (!ok) {
        mt_trace_writer_destroy(w);
        return NULL;
    }
    return w;
}

void mt_trace_writer_destroy(mt_trace_writer *w)
{
    if (!w)
        return;
    for (int s = 0; s < TRACE_NSTREAMS; s++)
        if (w->stream[s])
            munmap(w->stream[s], w->stream_cap[s]);
    if (w->zwork)
        munmap(w->zwork, w->zwork_size);
    trace_map_free(&w->threads);
    trace_map_free(&w->stacks);
    wbuf *bufs[] = {&w->thread_states, &w->modules, &w->defs, &w->meta, &w->index, &w->body, &w->out};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        trace_wbuf_free(bufs[i]);
    munmap(w, sizeof *w);
}

/* ---- writing chunks ---- */

static int write_out(mt_trace_writer *w, const void *p, size_t n)
{
    if (w->failed)
        return w->failed;
    int rc = w->host.write ? w->host.write(w->host.ctx, p, n) : 0;
    if (rc < 0) {
        w->failed = rc;
        return rc;
    }
    w->offset += n;
    w->stats.bytes += n;
    return 0;
}

static int index_add(mt_trace_writer *w, unsigned kind, uint64_t offset, uint32_t count, int64_t t0,
                     int64_t t1)
{
    if (trace_wbuf_reserve(&w->index, 48) < 0)
        return -ENOMEM;
    unsigned char *p = w->index.p + w->index.len;
    *p++ = (unsigned char)kind;
    p = trace_put_varint(p, offset);
    p = trace_put_varint(p, count);
    p = trace_put_varint(p, trace_zigzag(t0));
    p = trace_put_varint(p, (uint64_t)t1 - (uint64_t)t0);
    w->index.len = (size_t)(p - w->index.p);
    w->nindex++;
    return 0;
}

typedef struct seg {
    const unsigned char *p;
    size_t n;
} seg;

/* Compresses segs[0..nseg) into out (one zstd frame, a block boundary
 * after each segment so each zstd block holds one stream's values and
 * its entropy tables fit them): the stored size, 0 on failure. */
static size_t compress_segs(mt_trace_writer *w, unsigned char *out, size_t cap, const seg *segs, int nseg,
                            size_t n, int bits_seg)
{
    int rep = bits_seg >= 0 && w->repetitive;
    if (ZSTD_isError(ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_and_parameters)) ||
        ZSTD_isError(
            ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, rep ? REPETITIVE_LEVEL : w->level)) ||
        (rep && (ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_hashLog, REPETITIVE_TABLE_LOG)) ||
                 ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_chainLog, REPETITIVE_TABLE_LOG)))) ||
        ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(w->cctx, n)))
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
            rc = ZSTD_compressStream2(w->cctx, &o, &in, mode);
            if (ZSTD_isError(rc) || (rc && o.pos == o.size))
                return 0;
        } while (rc || in.pos < in.size);
        if (i == bits_seg)
            w->bits_out = o.pos - before;
    }
    return o.pos;
}

/* Writes segs[0..nseg), concatenated, as one chunk of `kind`. */
static int write_chunk_segs(mt_trace_writer *w, unsigned kind, const seg *segs, int nseg, uint32_t count,
                            int64_t t0, int64_t t1, int bits_seg)
{
    if (w->failed)
        return w->failed;
    size_t n = 0;
    for (int i = 0; i < nseg; i++)
        n += segs[i].n;
    size_t bound = ZSTD_compressBound(n) + 16 * (size_t)nseg + 64;
    w->out.len = 0;
    if (trace_wbuf_reserve(&w->out, TRACE_CHUNK_HEADER_SIZE + bound) < 0)
        return -ENOMEM;
    unsigned char *h = w->out.p, *payload = h + TRACE_CHUNK_HEADER_SIZE;
    unsigned codec = TRACE_CODEC_ZSTD;
    size_t stored = compress_segs(w, payload, bound, segs, nseg, n, bits_seg);
    if (!stored || stored >= n) {
        codec = TRACE_CODEC_NONE;
        stored = 0;
        for (int i = 0; i < nseg; i++)
            if (segs[i].n) {
                memcpy(payload + stored, segs[i].p, segs[i].n);
                stored += segs[i].n;
            }
    }
    trace_chunk_header(h, kind, codec, w->seq, (uint32_t)stored, (uint32_t)n, count,
                       trace_crc32c(0, payload, stored));
    uint64_t at = w->offset;
    w->last_stored = stored;
    w->last_raw = n;
    int rc = write_out(w, h, TRACE_CHUNK_HEADER_SIZE + stored);
    if (rc < 0)
        return rc;
    w->seq++;
    w->stats.chunks++;
    w->stats.raw_bytes += n;
    if (kind != TRACE_CHUNK_INDEX && index_add(w, kind, at, count, t0, t1) < 0)
        w->index_lost = 1; /* the chunk is written; the file goes without an index */
    return 0;
}

static int write_chunk(mt_trace_writer *w, unsigned kind, const unsigned char *body, size_t n, uint32_t count,
                       int64_t t0, int64_t t1)
{
    seg one = {body, n};
    return write_chunk_segs(w, kind, &one, 1, count, t0, t1, -1);
}

/* The pending definitions (and meta not yet in this file) as a DEFS chunk. */
static int flush_defs(mt_trace_writer *w)
{
    size_t meta_more = w->meta.len - w->meta_written;
    if (!w->ndefs && !meta_more)
        return 0;
    if (meta_more) {
        if (trace_wbuf_reserve(&w->defs, meta_more) < 0)
            return -ENOMEM;
        memcpy(w->defs.p + w->defs.len, w->meta.p + w->meta_written, meta_more);
        w->defs.len += meta_more;
        w->ndefs += w->nmeta - w->nmeta_written;
        w->nmeta_written = w->nmeta;
        w->meta_written = w->meta.len;
    }
    int rc = write_chunk(w, TRACE_CHUNK_DEFS, w->defs.p, w->defs.len, w->ndefs, 0, 0);
    w->defs.len = 0;
    w->ndefs = 0;
    return rc;
}

/* The next chunk's coding, from how the last one went. Zero time deltas
 * go as runs when most deltas were zero (a coarse unit, a fast program:
 * the ops stream then stays as repetitive as the program). The low bits
 * go byte-aligned (zstd then finds the repeats of real programs' sizes
 * and free references) unless that made them bigger than packed: random
 * low bits (mbench's) go packed, probing aligned again every 64 chunks or
 * as soon as zstd finds structure in the packed ones. */
static unsigned pick_flags(mt_trace_writer *w)
{
    if (w->force_flags)
        return w->force_flags & TRACE_F_KNOWN;
    if (w->first_chunk)
        return TRACE_F_ALIGNED | (w->time_unit >= 1000 ? TRACE_F_TIME_RUNS : 0);
    if (!w->nevents) /* an empty chunk (an early flush): nothing learnt */
        return w->flags;
    unsigned f = 0;
    if (w->zeros >= w->nevents / 4 * 3)
        f |= TRACE_F_TIME_RUNS;
    if (w->bits_packed) {
        uint64_t ratio = (uint64_t)w->bits_out * 1024 / w->bits_packed;
        if (w->flags & TRACE_F_ALIGNED ? ratio < 1024 : ratio < 993 || w->packed_run % 64 == 63)
            f |= TRACE_F_ALIGNED;
    } else
        f |= w->flags & TRACE_F_ALIGNED;
    return f;
}

static void chunk_reset(mt_trace_writer *w)
{
    unsigned f = pick_flags(w);
    w->packed_run = f & TRACE_F_ALIGNED ? 0 : w->packed_run + 1;
    w->flags = f;
    w->zrun = 0;
    w->zeros = 0;
    w->sumk = 0;
    w->bits_out = 0;
    for (int s = 0; s < TRACE_NSTREAMS; s++)
        w->cur[s] = w->stream[s];
    w->nevents = 0;
    w->bacc = 0;
    w->bn = 0;
    w->cur_thread = 0;
    w->ops.prev = 0;
    w->cur_category = 0;
    w->prev_addr = 0;
    w->base_id = w->last_freed = w->last_id;
    w->chunk_gen++;
}

/* Writes the open chunk (after the definitions it uses). */
static int flush_events(mt_trace_writer *w)
{
    int rc = w->failed ? w->failed : flush_defs(w);
    if (rc < 0 || !w->nevents) {
        w->stats.events_lost_to_errors += w->nevents;
        chunk_reset(w);
        return rc;
    }
    for (; w->bn; w->bn = w->bn > 8 ? w->bn - 8 : 0, w->bacc >>= 8) /* the last bits */
        *w->cur[TRACE_S_BITS]++ = (unsigned char)w->bacc;
    if (w->zrun) /* the last run of zero time deltas */
        w->cur[TRACE_S_RUNS] = trace_put_varint(w->cur[TRACE_S_RUNS], w->zrun);
    unsigned char *p = w->prefix;
    p = trace_put_varint(p, trace_zigzag(w->first_t));
    p = trace_put_varint(p, w->base_id);
    p = trace_put_varint(p, w->flags);
    p = trace_put_varint(p, TRACE_NSTREAMS);
    seg segs[TRACE_NSTREAMS + 1];
    segs[0].p = w->prefix;
    for (int s = 0; s < TRACE_NSTREAMS; s++) {
        segs[s + 1].p = w->stream[s];
        segs[s + 1].n = (size_t)(w->cur[s] - w->stream[s]);
        p = trace_put_varint(p, segs[s + 1].n);
    }
    segs[0].n = (size_t)(p - w->prefix);
    uint32_t n = w->nevents;
    w->bits_packed = (w->sumk + 7) / 8;
    rc = write_chunk_segs(w, TRACE_CHUNK_EVENTS, segs, TRACE_NSTREAMS + 1, n, w->min_t, w->max_t,
                          TRACE_S_BITS + 1);
    w->first_chunk = 0;
    w->repetitive = w->auto_level && w->last_stored < w->last_raw / 8;
    if (rc < 0)
        w->stats.events_lost_to_errors += n;
    chunk_reset(w);
    return rc;
}

/* ---- the file ---- */

int mt_trace_write_begin(mt_trace_writer *w)
{
    w->failed = 0;
    w->offset = w->seq = 0;
    trace_map_clear(&w->threads);
    trace_map_clear(&w->stacks);
    w->nthreads = 0;
    w->thread_states.len = 0;
    memset(w->cat_defined, 0, sizeof w->cat_defined);
    memset(w->unknown, 0, sizeof w->unknown);
    w->modules_backoff = w->modules_skip = 0;
    w->modules.len = 0;
    w->defs.len = 0;
    w->ndefs = 0;
    w->meta_written = 0;
    w->nmeta_written = 0;
    w->index.len = 0;
    w->nindex = 0;
    w->index_lost = 0;
    w->last_id = 0;
    w->first_chunk = 1;
    w->repetitive = w->auto_level; /* a program starts with what it repeats */
    w->packed_run = 0;
    if (trace_wbuf_reserve(&w->index, 64) < 0)
        return -ENOMEM;
    chunk_reset(w);
    w->begun = 1;

    unsigned char h[TRACE_HEADER_SIZE] = {0};
    memcpy(h, TRACE_MAGIC, 8);
    trace_put32(h + 8, TRACE_VERSION);
    trace_put32(h + 12, TRACE_HEADER_SIZE);
    trace_put64(h + 16, w->start_ns);
    trace_put64(h + 24, w->start_realtime_ns);
    trace_put32(h + 32, w->pid);
    trace_put32(h + 36, 0);
    trace_put32(h + 40, w->time_unit);
    trace_put32(h + 60, trace_crc32c(0, h, 60));
    return write_out(w, h, sizeof h);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Appends k <= 32 low bits of v to the bit stream. */
static inline void put_bits(mt_trace_writer *w, uint64_t v, unsigned k)
{
    w->bacc |= v << w->bn;
    w->bn += k;
    if (w->bn >= 32) {
        trace_put32(w->cur[TRACE_S_BITS], (uint32_t)w->bacc);
        w->cur[TRACE_S_BITS] += 4;
        w->bacc >>= 32;
        w->bn -= 32;
    }
}

/* v as a symbol (with tag: 0, or 0x80 for a v < 2^32) in `stream` and
 * its low bits in the bit stream. */
static inline void put_sym_tag(mt_trace_writer *w, int stream, uint64_t v, unsigned tag)
{
    unsigned k;
    *w->cur[stream]++ = (unsigned char)(trace_sym(v, &k) | tag);
    w->sumk += k;
    if (w->flags & TRACE_F_ALIGNED) {
        if (k < 64)
            v &= (1ull << k) - 1;
        unsigned char *q = w->cur[TRACE_S_BITS];
        trace_put64(q, v); /* the stream has room for 8 more (stream_max) */
        w->cur[TRACE_S_BITS] = q + ((k + 7) >> 3);
        return;
    }
    if (k > 32) {
        put_bits(w, v & 0xffffffffu, 32);
        v >>= 32;
        k -= 32;
    }
    if (k)
        put_bits(w, v & ((1ull << k) - 1), k);
}

static inline void put_sym(mt_trace_writer *w, int stream, uint64_t v)
{
    put_sym_tag(w, stream, v, 0);
}

int mt_trace_write_event(mt_trace_writer *w, const mt_trace_event *ev)
{
    unsigned type = ev->type;
    if (type < MT_TRACE_ALLOC || type > MT_TRACE_MUNMAP)
        return -EINVAL;
    w->stats.events++;
    if (w->failed) {
        w->stats.events_lost_to_errors++;
        return w->failed;
    }
    int64_t t = (int64_t)(ev->time_ns - w->start_ns);
    if (w->time_unit != 1) /* rounded down, also before the start */
        t = t >= 0 ? t / w->time_unit : -(int64_t)(((uint64_t) - (t + 1)) / w->time_unit) - 1;
    if (!w->nevents) {
        w->first_t = w->prev_t = w->min_t = w->max_t = t;
        w->chunk_open_ns = now_ns();
    }
    /* What can fail (defining the thread, category, stack) comes first,
     * so a failed event leaves the streams as they were. */
    uint32_t known = trace_map_get(&w->threads, ev->thread + 1);
    int64_t ti = known ? (int64_t)known - 1 : trace_w_thread_new(w, ev->thread);
    int alloc = type == MT_TRACE_ALLOC || type == MT_TRACE_REALLOC;
    if (ti < 0 || (ev->category != w->cur_category && trace_w_define_category(w, ev->category) < 0) ||
        (alloc && ev->stack && !trace_map_get(&w->stacks, ev->stack + 1) &&
         trace_w_define_stack(w, ev->stack) < 0)) {
        w->stats.events_lost_to_errors++; /* out of memory: the event is dropped, and counted */
        return -ENOMEM;
    }
    unsigned op = type;
    if ((uint32_t)ti + 1 != w->cur_thread) {
        op |= TRACE_OP_THREAD;
        w->cur[TRACE_S_THREADS] = trace_put_varint(w->cur[TRACE_S_THREADS], (uint64_t)ti);
        w->cur_thread = (uint32_t)ti + 1;
    }
    uint32_t tidx = (uint32_t)ti;
    if (ev->category != w->cur_category) {
        op |= TRACE_OP_CATEGORY;
        *w->cur[TRACE_S_CATS]++ = ev->category;
        w->cur_category = ev->category;
    }
    size_slot *sc = NULL;
    int same = 0;
    if (alloc) {
        sc = &w->size_cache[trace_hash32(ev->stack) % TRACE_SIZE_CACHE];
        same = sc->chunk == w->chunk_gen && sc->stack == ev->stack && sc->size == ev->size;
        if (same)
            op |= TRACE_OP_SAME_SIZE;
    }
    uint64_t dt = (uint64_t)t - (uint64_t)w->prev_t;
    if ((int64_t)dt < 0) {
        op |= TRACE_OP_BACK;
        dt = -dt;
    }
    unsigned x = op ^ trace_op_guess(&w->ops, w->chunk_gen);
    trace_op_seen(&w->ops, op);
    w->zeros += !dt;
    if (w->flags & TRACE_F_TIME_RUNS) {
        if (x >= 32) {
            *w->cur[TRACE_S_OPS]++ = TRACE_TC_ESCAPE << 5;
            *w->cur[TRACE_S_XOPS]++ = (unsigned char)x;
        } else
            *w->cur[TRACE_S_OPS]++ = (unsigned char)x;
        if (!dt)
            w->zrun++;
        else {
            w->cur[TRACE_S_RUNS] = trace_put_varint(w->cur[TRACE_S_RUNS], w->zrun);
            w->zrun = 0;
            put_sym(w, TRACE_S_TIMES, dt - 1);
        }
    } else if (x >= 32) {
        *w->cur[TRACE_S_OPS]++ = TRACE_TC_ESCAPE << 5;
        *w->cur[TRACE_S_XOPS]++ = (unsigned char)x;
        put_sym(w, TRACE_S_TIMES, dt);
    } else if (dt < TRACE_TC_STREAM) {
        *w->cur[TRACE_S_OPS]++ = (unsigned char)(x | dt << 5);
    } else {
        *w->cur[TRACE_S_OPS]++ = (unsigned char)(x | TRACE_TC_STREAM << 5);
        put_sym(w, TRACE_S_TIMES, dt);
    }
    w->prev_t = t;
    if (t < w->min_t)
        w->min_t = t;
    if (t > w->max_t)
        w->max_t = t;

    if (type == MT_TRACE_FREE || type == MT_TRACE_REALLOC) {
        /* The freed id against the last allocation's, or (tagged) against
         * the last freed one when that is shorter: blocks freed in the
         * order they were made (a teardown) cost a few bits each. */
        uint32_t freed = type == MT_TRACE_FREE ? ev->id : ev->old_id;
        uint32_t back = w->last_id - freed, rel = trace_zigzag32((int32_t)(freed - w->last_freed - 1));
        if (rel < back / 8)
            put_sym_tag(w, TRACE_S_FREES, rel, 0x80);
        else
            put_sym(w, TRACE_S_FREES, back);
        w->last_freed = freed;
    }
    if (type != MT_TRACE_FREE && !same)
        put_sym(w, TRACE_S_SIZES, ev->size);
    if (sc) {
        sc->chunk = w->chunk_gen;
        sc->stack = ev->stack;
        sc->size = ev->size;
    }
    if (alloc) {
        w->cur[TRACE_S_IDS] =
            trace_put_varint(w->cur[TRACE_S_IDS], trace_zigzag32((int32_t)(ev->id - (w->last_id + 1))));
        w->last_id = ev->id;
        thread_state *ts = (thread_state *)w->thread_states.p + tidx;
        if (ts->chunk != w->chunk_gen) {
            ts->chunk = w->chunk_gen;
            ts->last_stack[0] = ts->last_stack[1] = 0;
        }
        uint32_t *last = &ts->last_stack[type == MT_TRACE_REALLOC];
        w->cur[TRACE_S_STACKS] =
            trace_put_varint(w->cur[TRACE_S_STACKS], trace_zigzag32((int32_t)(ev->stack - *last)));
        *last = ev->stack;
    } else if (type != MT_TRACE_FREE) {
        w->cur[TRACE_S_ADDRS] =
            trace_put_varint(w->cur[TRACE_S_ADDRS], trace_zigzag((int64_t)(ev->address - w->prev_addr)));
        w->prev_addr = ev->address;
    }
    int rc = 0;
    if (++w->nevents >= w->chunk_events)
        rc = flush_events(w);
    else if (w->defs.len >= DEFS_FLUSH_BYTES)
        rc = flush_defs(w);
    return rc;
}

int mt_trace_write_flush(mt_trace_writer *w, int force)
{
    if (!w->nevents && !force)
        return 0;
    if (!force && now_ns() - w->chunk_open_ns < w->chunk_age_ns)
        return 0;
    return flush_events(w);
}

int mt_trace_write_finish(mt_trace_writer *w, const char *const *stat_names, const uint64_t *stat_values,
                          int nstats)
{
    int rc = flush_events(w);
    if (rc < 0 && w->failed)
        return rc; /* the file takes no more */
    /* The end record: the host's statistics, then the writer's own. */
    const char *own[] = {"writer_events", "writer_chunks", "writer_events_lost"};
    uint64_t ownv[] = {w->stats.events, w->stats.chunks, w->stats.events_lost_to_errors};
    if (nstats < 0)
        nstats = 0;
    w->body.len = 0;
    for (int i = 0; i < nstats + 3; i++) {
        const char *name = i < nstats ? stat_names[i] : own[i - nstats];
        uint64_t v = i < nstats ? stat_values[i] : ownv[i - nstats];
        size_t n = trace_w_strlen(name);
        if (trace_wbuf_reserve(&w->body, 32 + n) < 0)
            return -ENOMEM;
        unsigned char *p = trace_w_put_bytes(w->body.p + w->body.len, name, n);
        p = trace_put_varint(p, v);
        w->body.len = (size_t)(p - w->body.p);
    }
    rc = write_chunk(w, TRACE_CHUNK_END, w->body.p, w->body.len, (uint32_t)(nstats + 3), 0, 0);
    if (rc < 0 || w->index_lost)
        return rc; /* without memory for the index: the end record ends the file */
    uint64_t index_at = w->offset;
    rc = write_chunk(w, TRACE_CHUNK_INDEX, w->index.p, w->index.len, w->nindex, 0, 0);
    if (rc < 0)
        return rc;
    unsigned char t[TRACE_TRAILER_SIZE];
    memcpy(t, TRACE_TRAILER_MAGIC, 8);
    trace_put64(t + 8, index_at);
    trace_put32(t + 16, w->nindex);
    trace_put32(t + 20, trace_crc32c(0, t, 20));
    return write_out(w, t, sizeof t);
}

void mt_trace_write_get_stats(const mt_trace_writer *w, mt_trace_write_stats *out)
{
    *out = w->stats;
}
