/* trace_write.c — the trace writer (docs/trace-format.md). Events are
 * appended to per-field streams (ops, threads, time deltas, sizes, ...),
 * each one byte plane of homogeneous values so zstd's entropy stage sees
 * one distribution at a time; a full (or old) chunk is laid out as one
 * body, compressed into one zstd frame and written with its header in one
 * host->write. Definitions a chunk's events use go out first in a DEFS
 * chunk. Runs inside the agent: every buffer is mmap'd, zstd works in a
 * static context on an mmap'd workspace, nothing locks. */
#define ZSTD_STATIC_LINKING_ONLY
#include "trace/trace_write.h"
#include "trace/trace_util.h"

#include <errno.h>
#include <sys/mman.h>
#include <time.h>
#include <zstd.h>

#define DEFAULT_LEVEL 3
#define DEFAULT_CHUNK_EVENTS (128u << 10)
#define MAX_CHUNK_EVENTS (1u << 20)
#define DEFAULT_AGE_NS 1000000000ull
#define DEFS_FLUSH_BYTES (8u << 20)   /* a DEFS chunk goes out early past this */
#define UNKNOWN_CACHE 256             /* frames the host's modules did not cover */

/* Worst-case bytes one event adds to each stream. */
static const unsigned stream_max[TRACE_NSTREAMS] = {
    [TRACE_S_OPS] = 1, [TRACE_S_XOPS] = 1, [TRACE_S_THREADS] = 5, [TRACE_S_TIMES] = 1, [TRACE_S_SIZES] = 1,
    [TRACE_S_FREES] = 1, [TRACE_S_BITS] = 20, [TRACE_S_STACKS] = 5, [TRACE_S_IDS] = 5,
    [TRACE_S_CATS] = 1, [TRACE_S_ADDRS] = 10,
};

/* An mmap'd buffer that grows with mremap. */
typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
} wbuf;

static int wbuf_reserve(wbuf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64u << 10;
    while (cap < b->len + more)
        cap *= 2;
    void *p = b->p ? mremap(b->p, b->cap, cap, MREMAP_MAYMOVE)
                   : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

static void wbuf_free(wbuf *b)
{
    if (b->p)
        munmap(b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* An open-addressing map of nonzero-valued uint32 keys to uint32 values,
 * mmap'd; value 0 means empty. */
typedef struct u32map {
    uint32_t *slots;   /* key, value pairs */
    uint32_t mask, used;
} u32map;

static uint32_t *map_find(const u32map *m, uint32_t key)
{
    for (uint32_t i = trace_hash32(key) & m->mask;; i = (i + 1) & m->mask)
        if (!m->slots[2 * i + 1] || m->slots[2 * i] == key)
            return &m->slots[2 * i];
}

static int map_grow(u32map *m)
{
    uint32_t n = m->slots ? (m->mask + 1) * 2 : 1024;
    size_t bytes = (size_t)n * 8;
    uint32_t *s = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return -ENOMEM;
    u32map nm = {s, n - 1, m->used};
    if (m->slots) {
        for (uint32_t i = 0; i <= m->mask; i++)
            if (m->slots[2 * i + 1]) {
                uint32_t *e = map_find(&nm, m->slots[2 * i]);
                e[0] = m->slots[2 * i];
                e[1] = m->slots[2 * i + 1];
            }
        munmap(m->slots, (size_t)(m->mask + 1) * 8);
    }
    *m = nm;
    return 0;
}

/* The value of key, 0 if absent. */
static uint32_t map_get(const u32map *m, uint32_t key)
{
    return m->slots ? map_find(m, key)[1] : 0;
}

static int map_put(u32map *m, uint32_t key, uint32_t value)
{
    if ((!m->slots || (m->used + 1) * 4 > (m->mask + 1) * 3) && map_grow(m) < 0)
        return -ENOMEM;
    uint32_t *e = map_find(m, key);
    if (!e[1])
        m->used++;
    e[0] = key;
    e[1] = value;
    return 0;
}

static void map_clear(u32map *m)
{
    if (m->slots)
        memset(m->slots, 0, (size_t)(m->mask + 1) * 8);
    m->used = 0;
}

static void map_free(u32map *m)
{
    if (m->slots)
        munmap(m->slots, (size_t)(m->mask + 1) * 8);
    m->slots = NULL;
    m->mask = m->used = 0;
}

/* Per thread of the file: its last stacks (alloc, realloc) in the chunk
 * of generation `chunk`. */
typedef struct thread_state {
    uint32_t last_stack[2];
    uint64_t chunk;
} thread_state;

typedef struct size_slot {
    uint64_t size, chunk;
    uint32_t stack;
} size_slot;

typedef struct module_range {
    uint64_t start, end;
} module_range;

struct mt_trace_writer {
    mt_trace_host host;
    int level;
    uint32_t chunk_events, time_unit;
    uint64_t chunk_age_ns, start_ns, start_realtime_ns;
    uint32_t pid;
    int failed;        /* a write failed: nothing more goes to this file */
    int begun;

    /* The open chunk. */
    unsigned char *stream[TRACE_NSTREAMS];
    unsigned char *cur[TRACE_NSTREAMS];
    size_t stream_cap[TRACE_NSTREAMS];
    uint32_t nevents;
    int64_t first_t, prev_t, min_t, max_t;   /* in time units */
    uint32_t base_id, last_id;
    uint32_t cur_thread;   /* index + 1 of the last event's thread, 0: none yet in the chunk */
    uint64_t bacc;         /* bits not yet stored in TRACE_S_BITS */
    unsigned bn;
    uint8_t cur_category;
    uint64_t prev_addr;
    uint64_t chunk_gen;
    uint64_t chunk_open_ns;   /* monotonic time of the chunk's first event */

    /* The file. */
    uint64_t offset, seq;
    u32map threads;      /* tid + 1 -> index + 1 */
    u32map stacks;       /* id + 1 -> 1 when defined */
    uint32_t nthreads;
    wbuf thread_states;  /* thread_state[nthreads] */
    uint64_t cat_defined[4];
    wbuf modules;        /* module_range[], sorted by start */
    uint64_t unknown[UNKNOWN_CACHE];
    uint32_t modules_backoff, modules_skip;
    wbuf defs;           /* pending DEFS records */
    uint32_t ndefs;
    wbuf meta;           /* every meta record so far (each file repeats them) */
    uint32_t nmeta;
    size_t meta_written; /* bytes of meta already in this file's DEFS */
    uint32_t nmeta_written;
    wbuf index;          /* index records */
    uint32_t nindex;

    /* Output. */
    wbuf body, out;
    unsigned char prefix[32 + 10 * TRACE_NSTREAMS];
    ZSTD_CCtx *cctx;
    void *zwork;
    size_t zwork_size;
    uint64_t frames[TRACE_MAX_FRAMES];
    size_slot size_cache[TRACE_SIZE_CACHE];
    trace_opmodel ops;

    mt_trace_write_stats stats;
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
    w->chunk_events = cfg && cfg->chunk_events ? cfg->chunk_events : DEFAULT_CHUNK_EVENTS;
    if (w->chunk_events > MAX_CHUNK_EVENTS)
        w->chunk_events = MAX_CHUNK_EVENTS;
    w->chunk_age_ns = cfg && cfg->chunk_age_ns ? cfg->chunk_age_ns : DEFAULT_AGE_NS;
    w->time_unit = cfg && cfg->time_unit_ns ? cfg->time_unit_ns : 1;
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
        w->zwork_size = ZSTD_estimateCStreamSize(w->level);
        w->zwork = map_anon(w->zwork_size);
        w->cctx = w->zwork ? ZSTD_initStaticCCtx(w->zwork, w->zwork_size) : NULL;
        ok = w->cctx != NULL;
    }
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
    map_free(&w->threads);
    map_free(&w->stacks);
    wbuf *bufs[] = {&w->thread_states, &w->modules, &w->defs, &w->meta, &w->index, &w->body, &w->out};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        wbuf_free(bufs[i]);
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

static int index_add(mt_trace_writer *w, unsigned kind, uint64_t offset, uint32_t count, int64_t t0, int64_t t1)
{
    if (wbuf_reserve(&w->index, 48) < 0)
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
static size_t compress_segs(mt_trace_writer *w, unsigned char *out, size_t cap, const seg *segs, int nseg, size_t n)
{
    if (ZSTD_isError(ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_and_parameters)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->level)) ||
        ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(w->cctx, n)))
        return 0;
    ZSTD_outBuffer o = {out, cap, 0};
    for (int i = 0; i < nseg; i++) {
        ZSTD_inBuffer in = {segs[i].p, segs[i].n, 0};
        ZSTD_EndDirective mode = i == nseg - 1 ? ZSTD_e_end : ZSTD_e_flush;
        if (!in.size && mode != ZSTD_e_end)
            continue;
        size_t rc;
        do {
            rc = ZSTD_compressStream2(w->cctx, &o, &in, mode);
            if (ZSTD_isError(rc) || (rc && o.pos == o.size))
                return 0;
        } while (rc || in.pos < in.size);
    }
    return o.pos;
}

/* Writes segs[0..nseg), concatenated, as one chunk of `kind`. */
static int write_chunk_segs(mt_trace_writer *w, unsigned kind, const seg *segs, int nseg, uint32_t count, int64_t t0,
                            int64_t t1)
{
    if (w->failed)
        return w->failed;
    size_t n = 0;
    for (int i = 0; i < nseg; i++)
        n += segs[i].n;
    size_t bound = ZSTD_compressBound(n) + 16 * (size_t)nseg + 64;
    w->out.len = 0;
    if (wbuf_reserve(&w->out, TRACE_CHUNK_HEADER_SIZE + bound) < 0)
        return -ENOMEM;
    unsigned char *h = w->out.p, *payload = h + TRACE_CHUNK_HEADER_SIZE;
    unsigned codec = TRACE_CODEC_ZSTD;
    size_t stored = compress_segs(w, payload, bound, segs, nseg, n);
    if (!stored || stored >= n) {
        codec = TRACE_CODEC_NONE;
        stored = 0;
        for (int i = 0; i < nseg; i++)
            if (segs[i].n) {
                memcpy(payload + stored, segs[i].p, segs[i].n);
                stored += segs[i].n;
            }
    }
    memcpy(h, TRACE_CHUNK_MAGIC, 4);
    h[4] = (unsigned char)kind;
    h[5] = (unsigned char)codec;
    h[6] = TRACE_CHUNK_HEADER_SIZE;
    h[7] = 0;
    trace_put64(h + 8, w->seq);
    trace_put32(h + 16, (uint32_t)stored);
    trace_put32(h + 20, (uint32_t)n);
    trace_put32(h + 24, count);
    trace_put32(h + 28, trace_crc32c(0, payload, stored));
    trace_put32(h + 32, 0);
    trace_put32(h + 36, trace_crc32c(0, h, 36));
    uint64_t at = w->offset;
    int rc = write_out(w, h, TRACE_CHUNK_HEADER_SIZE + stored);
    if (rc < 0)
        return rc;
    w->seq++;
    w->stats.chunks++;
    w->stats.raw_bytes += n;
    return kind == TRACE_CHUNK_INDEX ? 0 : index_add(w, kind, at, count, t0, t1);
}

static int write_chunk(mt_trace_writer *w, unsigned kind, const unsigned char *body, size_t n, uint32_t count,
                       int64_t t0, int64_t t1)
{
    seg one = {body, n};
    return write_chunk_segs(w, kind, &one, 1, count, t0, t1);
}

/* The pending definitions (and meta not yet in this file) as a DEFS chunk. */
static int flush_defs(mt_trace_writer *w)
{
    size_t meta_more = w->meta.len - w->meta_written;
    if (!w->ndefs && !meta_more)
        return 0;
    if (meta_more) {
        if (wbuf_reserve(&w->defs, meta_more) < 0)
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

static void chunk_reset(mt_trace_writer *w)
{
    for (int s = 0; s < TRACE_NSTREAMS; s++)
        w->cur[s] = w->stream[s];
    w->nevents = 0;
    w->bacc = 0;
    w->bn = 0;
    w->cur_thread = 0;
    w->ops.prev = 0;
    w->cur_category = 0;
    w->prev_addr = 0;
    w->base_id = w->last_id;
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
    for (; w->bn; w->bn = w->bn > 8 ? w->bn - 8 : 0, w->bacc >>= 8)   /* the last bits */
        *w->cur[TRACE_S_BITS]++ = (unsigned char)w->bacc;
    unsigned char *p = w->prefix;
    p = trace_put_varint(p, trace_zigzag(w->first_t));
    p = trace_put_varint(p, w->base_id);
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
    rc = write_chunk_segs(w, TRACE_CHUNK_EVENTS, segs, TRACE_NSTREAMS + 1, n, w->min_t, w->max_t);
    if (rc < 0)
        w->stats.events_lost_to_errors += n;
    chunk_reset(w);
    return rc;
}

/* ---- definitions ---- */

static unsigned char *defs_room(mt_trace_writer *w, size_t n)
{
    if (wbuf_reserve(&w->defs, n) < 0)
        return NULL;
    w->ndefs++;
    return w->defs.p + w->defs.len;
}

static unsigned char *put_bytes(unsigned char *p, const void *s, size_t n)
{
    p = trace_put_varint(p, n);
    if (n)
        memcpy(p, s, n);
    return p + n;
}

static size_t str_len(const char *s)
{
    size_t n = s ? strnlen(s, TRACE_MAX_STRING) : 0;
    return n;
}

static int module_find(const mt_trace_writer *w, uint64_t addr)
{
    const module_range *m = (const module_range *)w->modules.p;
    size_t lo = 0, hi = w->modules.len / sizeof *m;
    while (lo < hi) {   /* first module starting above addr */
        size_t mid = (lo + hi) / 2;
        if (m[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;) {   /* ranges may nest or overlap: look back a little */
        if (addr >= m[i].start && addr < m[i].end)
            return 1;
        if (lo - i > 8)
            break;
    }
    return 0;
}

void mt_trace_write_module(mt_trace_writer *w, uint64_t start, uint64_t end, uint64_t bias, const char *path,
                           const unsigned char *build_id, unsigned build_id_len)
{
    if (!w || end <= start)
        return;
    module_range *m = (module_range *)w->modules.p;
    size_t n = w->modules.len / sizeof *m, at = 0;
    while (at < n && m[at].start < start)
        at++;
    for (size_t i = at; i < n && m[i].start == start; i++)
        if (m[i].end == end)
            return;
    if (build_id_len > 255)
        build_id_len = 255;
    size_t plen = str_len(path);
    if (wbuf_reserve(&w->modules, sizeof *m) < 0)
        return;
    unsigned char *p = defs_room(w, 1 + 40 + build_id_len + plen);
    if (!p)
        return;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_MODULE;
    p = trace_put_varint(p, start);
    p = trace_put_varint(p, end - start);
    p = trace_put_varint(p, bias);
    p = put_bytes(p, build_id, build_id ? build_id_len : 0);
    p = put_bytes(p, path, plen);
    w->defs.len += (size_t)(p - p0);
    m = (module_range *)w->modules.p;
    memmove(m + at + 1, m + at, (n - at) * sizeof *m);
    m[at].start = start;
    m[at].end = end;
    w->modules.len += sizeof *m;
}

/* Asks the host for the modules when a frame lies outside all we have.
 * Frames still outside after asking are remembered (a small cache), and
 * asking in vain backs off (1, 2, 4, ... up to 1024 stacks without asking)
 * so code outside every module (JIT) does not cost a module walk per stack. */
static void frames_modules(mt_trace_writer *w, const uint64_t *f, int n)
{
    int asked = 0;
    for (int i = 0; i < n; i++) {
        if (!f[i] || module_find(w, f[i]))
            continue;
        uint64_t *u = &w->unknown[trace_hash32((uint32_t)(f[i] ^ f[i] >> 32)) % UNKNOWN_CACHE];
        if (*u == f[i])
            continue;
        if (!asked && w->host.modules) {
            if (w->modules_skip) {
                w->modules_skip--;
                return;
            }
            size_t before = w->modules.len;
            w->host.modules(w->host.ctx, w);
            asked = 1;
            if (w->modules.len == before) {
                w->modules_backoff = w->modules_backoff ? w->modules_backoff * 2 : 1;
                if (w->modules_backoff > 1024)
                    w->modules_backoff = 1024;
                w->modules_skip = w->modules_backoff;
            } else
                w->modules_backoff = 0;
            if (module_find(w, f[i]))
                continue;
        }
        *u = f[i];
    }
}

static int define_category(mt_trace_writer *w, unsigned c)
{
    if (w->cat_defined[c >> 6] >> (c & 63) & 1)
        return 0;
    w->cat_defined[c >> 6] |= 1ull << (c & 63);
    const char *name = w->host.category_name ? w->host.category_name(w->host.ctx, c) : NULL;
    if (!name)
        return 0;
    size_t n = str_len(name);
    unsigned char *p = defs_room(w, 16 + n);
    if (!p)
        return -ENOMEM;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_CATEGORY;
    p = trace_put_varint(p, c);
    p = put_bytes(p, name, n);
    w->defs.len += (size_t)(p - p0);
    return 0;
}

static int define_stack(mt_trace_writer *w, uint32_t id)
{
    unsigned cat = 0;
    int n = w->host.stack ? w->host.stack(w->host.ctx, id, w->frames, TRACE_MAX_FRAMES, &cat) : -1;
    if (n < 0)
        n = 0;
    if (n > (int)TRACE_MAX_FRAMES)
        n = TRACE_MAX_FRAMES;
    cat &= 0xff;
    if (map_put(&w->stacks, id + 1, 1) < 0)
        return -ENOMEM;
    frames_modules(w, w->frames, n);
    int rc = define_category(w, cat);
    if (rc < 0)
        return rc;
    unsigned char *p = defs_room(w, 32 + (size_t)n * 10);
    if (!p)
        return -ENOMEM;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_STACK;
    p = trace_put_varint(p, id);
    p = trace_put_varint(p, cat);
    p = trace_put_varint(p, (uint64_t)n);
    uint64_t prev = 0;
    for (int i = 0; i < n; i++) {
        p = trace_put_varint(p, trace_zigzag((int64_t)(w->frames[i] - prev)));
        prev = w->frames[i];
    }
    w->defs.len += (size_t)(p - p0);
    return 0;
}

/* The file's index of thread `tid` (defining it when new), or -errno. */
static int64_t thread_index(mt_trace_writer *w, uint32_t tid)
{
    uint32_t v = map_get(&w->threads, tid + 1);
    if (v)
        return v - 1;
    uint32_t idx = w->nthreads;
    if (map_put(&w->threads, tid + 1, idx + 1) < 0 || wbuf_reserve(&w->thread_states, sizeof(thread_state)) < 0)
        return -ENOMEM;
    memset(w->thread_states.p + w->thread_states.len, 0, sizeof(thread_state));
    w->thread_states.len += sizeof(thread_state);
    w->nthreads++;
    unsigned char *p = defs_room(w, 16);
    if (!p)
        return -ENOMEM;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_THREAD;
    p = trace_put_varint(p, idx);
    p = trace_put_varint(p, tid);
    w->defs.len += (size_t)(p - p0);
    return idx;
}

int mt_trace_write_meta(mt_trace_writer *w, const char *key, const char *value)
{
    size_t kn = str_len(key), vn = str_len(value);
    if (wbuf_reserve(&w->meta, 24 + kn + vn) < 0)
        return -ENOMEM;
    unsigned char *p = w->meta.p + w->meta.len;
    *p++ = TRACE_DEF_META;
    p = put_bytes(p, key, kn);
    p = put_bytes(p, value, vn);
    w->meta.len = (size_t)(p - w->meta.p);
    w->nmeta++;
    return 0;
}

/* ---- the file ---- */

int mt_trace_write_begin(mt_trace_writer *w)
{
    w->failed = 0;
    w->offset = w->seq = 0;
    map_clear(&w->threads);
    map_clear(&w->stacks);
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
    w->last_id = 0;
    if (wbuf_reserve(&w->index, 64) < 0)
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

/* v as a symbol in `stream` and its low bits in the bit stream. */
static inline void put_sym(mt_trace_writer *w, int stream, uint64_t v)
{
    unsigned k;
    *w->cur[stream]++ = (unsigned char)trace_sym(v, &k);
    if (k > 32) {
        put_bits(w, v & 0xffffffffu, 32);
        v >>= 32;
        k -= 32;
    }
    if (k)
        put_bits(w, v & ((1ull << k) - 1), k);
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
    if (w->time_unit != 1)   /* rounded down, also before the start */
        t = t >= 0 ? t / w->time_unit : -(int64_t)(((uint64_t)-(t + 1)) / w->time_unit) - 1;
    if (!w->nevents) {
        w->first_t = w->prev_t = w->min_t = w->max_t = t;
        w->chunk_open_ns = now_ns();
    }
    /* What can fail (defining the thread, category, stack) comes first,
     * so a failed event leaves the streams as they were. */
    int64_t ti = thread_index(w, ev->thread);
    if (ti < 0)
        return (int)ti;
    int alloc = type == MT_TRACE_ALLOC || type == MT_TRACE_REALLOC;
    if ((ev->category != w->cur_category && define_category(w, ev->category) < 0) ||
        (alloc && ev->stack && !map_get(&w->stacks, ev->stack + 1) && define_stack(w, ev->stack) < 0))
        return -ENOMEM;
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
    if (x >= 32) {
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
        put_sym(w, TRACE_S_FREES, (uint32_t)(w->last_id - (type == MT_TRACE_FREE ? ev->id : ev->old_id)));
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
        w->cur[TRACE_S_STACKS] = trace_put_varint(w->cur[TRACE_S_STACKS], trace_zigzag32((int32_t)(ev->stack - *last)));
        *last = ev->stack;
    } else if (type != MT_TRACE_FREE) {
        w->cur[TRACE_S_ADDRS] = trace_put_varint(w->cur[TRACE_S_ADDRS], trace_zigzag((int64_t)(ev->address - w->prev_addr)));
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

int mt_trace_write_finish(mt_trace_writer *w, const char *const *stat_names, const uint64_t *stat_values, int nstats)
{
    int rc = flush_events(w);
    if (rc < 0)
        return rc;
    /* The end record: the host's statistics, then the writer's own. */
    const char *own[] = {"writer_events", "writer_chunks", "writer_events_lost"};
    uint64_t ownv[] = {w->stats.events, w->stats.chunks, w->stats.events_lost_to_errors};
    if (nstats < 0)
        nstats = 0;
    w->body.len = 0;
    for (int i = 0; i < nstats + 3; i++) {
        const char *name = i < nstats ? stat_names[i] : own[i - nstats];
        uint64_t v = i < nstats ? stat_values[i] : ownv[i - nstats];
        size_t n = str_len(name);
        if (wbuf_reserve(&w->body, 32 + n) < 0)
            return -ENOMEM;
        unsigned char *p = put_bytes(w->body.p + w->body.len, name, n);
        p = trace_put_varint(p, v);
        w->body.len = (size_t)(p - w->body.p);
    }
    rc = write_chunk(w, TRACE_CHUNK_END, w->body.p, w->body.len, (uint32_t)(nstats + 3), 0, 0);
    if (rc < 0)
        return rc;
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
