/* trace_write.c — the trace writer (docs/trace-format.md): the file
 * (header, chunks numbered and indexed as they are written, end record,
 * index, trailer) and the events' way in. Each event's definitions (its
 * thread, stack, category: they need the host) are made here, on the
 * caller's thread; the event itself goes to the column coder
 * (trace_write_enc.c) on this thread, or with cfg.threads > 1 into a batch
 * coded by an encoder thread (trace_write_pool.c). A chunk goes out with
 * one host->write, after a DEFS chunk with the definitions it uses. */
#include "trace/trace_write_int.h"

#include <errno.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

/* zstd levels when the configuration leaves it to the writer: 9 for the
 * first events chunk and after one that compressed more than 8:1 (a
 * repetitive program: 13% smaller than level 1 on SQLite's trace, and
 * fast on such input), else 1 (mbench's random values: level 3 is bigger
 * and slower there, higher levels gain ~1.5% for 1.7-2.5x the time). */
#define DEFAULT_LEVEL 1
#define REPETITIVE_LEVEL 9 /* trace_write_enc.c's */
#define DEFAULT_CHUNK_EVENTS (128u << 10)
#define MAX_CHUNK_EVENTS (1u << 20)
#define DEFAULT_AGE_NS 1000000000ull
#define MAX_THREADS 64

mt_trace_writer *mt_trace_writer_create(const mt_trace_write_config *cfg, const mt_trace_host *host)
{
    mt_trace_writer *w = trace_w_map(sizeof *w);
    if (!w)
        return NULL;
    if (host)
        w->host = *host;
    w->creator = getpid();
    w->level = cfg && cfg->zstd_level ? cfg->zstd_level : DEFAULT_LEVEL;
    if (w->level > ZSTD_maxCLevel())
        w->level = ZSTD_maxCLevel();
    w->auto_level = !(cfg && cfg->zstd_level);
    w->chunk_events = cfg && cfg->chunk_events ? cfg->chunk_events : DEFAULT_CHUNK_EVENTS;
    if (w->chunk_events > MAX_CHUNK_EVENTS)
        w->chunk_events = MAX_CHUNK_EVENTS;
    w->chunk_age_ns = cfg && cfg->chunk_age_ns ? cfg->chunk_age_ns : DEFAULT_AGE_NS;
    w->time_unit = cfg && cfg->time_unit_ns ? cfg->time_unit_ns : 1;
    w->unit_magic = trace_div_magic(w->time_unit, &w->unit_shift);
    w->force_flags = cfg ? cfg->chunk_flags : 0;
    w->threads = cfg && cfg->threads > 1 ? (cfg->threads < MAX_THREADS ? cfg->threads : MAX_THREADS) : 1;
    if (cfg) {
        w->pid = cfg->pid;
        w->start_ns = cfg->start_ns;
        w->start_realtime_ns = cfg->start_realtime_ns;
    }
    w->enc = trace_enc_create(w->chunk_events, w->auto_level ? REPETITIVE_LEVEL : w->level);
    /* Room for the end record (and a small index) now: a writer out of
     * memory later still finishes its file. */
    int ok = w->enc && trace_wbuf_reserve(&w->body, 4096) == 0 && trace_wbuf_reserve(&w->out, 64u << 10) == 0;
    if (ok && w->threads > 1)
        ok = trace_pool_create(w) == 0;
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
    trace_pool_destroy(w); /* first: its threads may still code */
    trace_enc_destroy(w->enc);
    trace_map_free(&w->threads_map);
    trace_map_free(&w->stacks);
    wbuf *bufs[] = {&w->modules, &w->defs, &w->meta, &w->index, &w->body, &w->out};
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

int trace_w_emit(mt_trace_writer *w, unsigned char *h, const trace_chunk_out *co)
{
    if (w->failed)
        return w->failed;
    trace_chunk_header(h, co->kind, co->codec, w->seq, (uint32_t)co->stored, (uint32_t)co->raw, co->count,
                       co->crc);
    uint64_t at = w->offset;
    int rc = write_out(w, h, TRACE_CHUNK_HEADER_SIZE + co->stored);
    if (rc < 0)
        return rc;
    w->seq++;
    w->stats.chunks++;
    w->stats.raw_bytes += co->raw;
    if (co->kind != TRACE_CHUNK_INDEX && index_add(w, co->kind, at, co->count, co->t0, co->t1) < 0)
        w->index_lost = 1; /* the chunk is written; the file goes without an index */
    return 0;
}

/* body[0..n) as one chunk of `kind`, compressed on this thread. */
static int write_chunk(mt_trace_writer *w, unsigned kind, const unsigned char *body, size_t n, uint32_t count)
{
    if (w->failed)
        return w->failed;
    trace_chunk_out co;
    int rc = trace_enc_pack(w->enc, w->level, &w->out, 0, kind, body, n, count, &co);
    return rc < 0 ? rc : trace_w_emit(w, w->out.p, &co);
}

/* Appends the meta records not yet in this file to the pending DEFS. */
static int defs_add_meta(mt_trace_writer *w)
{
    size_t meta_more = w->meta.len - w->meta_written;
    if (!meta_more)
        return 0;
    if (trace_wbuf_reserve(&w->defs, meta_more) < 0)
        return -ENOMEM;
    memcpy(w->defs.p + w->defs.len, w->meta.p + w->meta_written, meta_more);
    w->defs.len += meta_more;
    w->ndefs += w->nmeta - w->nmeta_written;
    w->nmeta_written = w->nmeta;
    w->meta_written = w->meta.len;
    return 0;
}

int trace_w_take_defs(mt_trace_writer *w, wbuf *d, uint32_t *count)
{
    if (defs_add_meta(w) < 0)
        return -ENOMEM; /* they stay pending */
    wbuf t = *d;
    *d = w->defs;
    w->defs = t;
    w->defs.len = 0;
    *count = w->ndefs;
    w->ndefs = 0;
    return 0;
}

/* The pending definitions (and meta not yet in this file) as a DEFS chunk. */
static int flush_defs(mt_trace_writer *w)
{
    if (!w->ndefs && w->meta.len == w->meta_written)
        return 0;
    int rc = defs_add_meta(w);
    if (rc < 0)
        return rc;
    rc = write_chunk(w, TRACE_CHUNK_DEFS, w->defs.p, w->defs.len, w->ndefs);
    w->defs.len = 0;
    w->ndefs = 0;
    return rc;
}

/* The next chunk's coding, from how the last one went (`last`: the one
 * cfg.threads chunks back, whose coding is surely finished). Zero time
 * deltas go as runs when most deltas were zero (a coarse unit, a fast
 * program: the ops stream then stays as repetitive as the program). The
 * low bits go byte-aligned (zstd then finds the repeats of real programs'
 * sizes and free references) unless that made them bigger than packed:
 * random low bits (mbench's) go packed, probing aligned again every 64
 * chunks or as soon as zstd finds structure in the packed ones. */
unsigned trace_pick_flags(const mt_trace_writer *w, const trace_chunk_stats *last)
{
    if (w->force_flags)
        return w->force_flags & TRACE_F_KNOWN;
    if (w->first_chunk || !last)
        return TRACE_F_ALIGNED | (w->time_unit >= 1000 ? TRACE_F_TIME_RUNS : 0);
    if (!last->nevents) /* an empty chunk (an early flush): nothing learnt */
        return last->flags;
    unsigned f = 0;
    if (last->zeros >= last->nevents / 4 * 3)
        f |= TRACE_F_TIME_RUNS;
    if (last->bits_packed) {
        uint64_t ratio = (uint64_t)last->bits_out * 1024 / last->bits_packed;
        if (last->flags & TRACE_F_ALIGNED ? ratio < 1024 : ratio < 993 || w->packed_run % 64 == 63)
            f |= TRACE_F_ALIGNED;
    } else
        f |= last->flags & TRACE_F_ALIGNED;
    return f;
}

/* A chunk that compressed more than 8:1: the next ones at REPETITIVE_LEVEL. */
int trace_repetitive(const mt_trace_writer *w, size_t stored, size_t raw)
{
    return w->auto_level && stored < raw / 8;
}

/* Opens the next chunk on this thread's coder. */
static void chunk_reset(mt_trace_writer *w)
{
    trace_chunk_stats last;
    trace_enc_stats(w->enc, &last);
    unsigned f = trace_pick_flags(w, &last);
    w->packed_run = f & TRACE_F_ALIGNED ? 0 : w->packed_run + 1;
    trace_enc_open(w->enc, ++w->chunk_gen, f, w->enc->last_id);
}

/* Writes the open chunk of this thread's coder (after the definitions it uses). */
static int flush_events(mt_trace_writer *w)
{
    trace_enc *e = w->enc;
    int rc = w->failed ? w->failed : flush_defs(w);
    if (rc < 0 || !e->nevents) {
        w->stats.events_lost_to_errors += e->nevents;
        chunk_reset(w);
        return rc;
    }
    uint32_t n = e->nevents;
    trace_chunk_out co;
    rc = trace_enc_close(e, w->level, w->repetitive, &w->out, 0, &co);
    if (rc == 0)
        rc = trace_w_emit(w, w->out.p, &co);
    w->first_chunk = 0;
    w->repetitive = trace_repetitive(w, e->last_stored, e->last_raw);
    if (rc < 0)
        w->stats.events_lost_to_errors += n;
    trace_enc_trim(e);
    chunk_reset(w);
    return rc;
}

int trace_w_flush_events(mt_trace_writer *w)
{
    return flush_events(w);
}

/* ---- the file ---- */

int mt_trace_write_begin(mt_trace_writer *w)
{
    if (w->pool)
        trace_pool_reset(w); /* chunks of an unfinished file are dropped, as the open one is */
    w->failed = 0;
    w->offset = w->seq = 0;
    trace_map_clear(&w->threads_map);
    trace_map_clear(&w->stacks);
    memset(w->tcache_tid, 0, sizeof w->tcache_tid);
    memset(w->scache, 0, sizeof w->scache);
    w->nthreads = 0;
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
    w->last_id = w->enc->last_id = 0;
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

static uint32_t open_events(const mt_trace_writer *w)
{
    return w->threads > 1 ? trace_pool_open_events(w) : w->enc->nevents;
}

/* An event coded on this thread (threads <= 1). */
static int write_inline(mt_trace_writer *w, const mt_trace_event *ev)
{
    int64_t t = 0, ti = trace_w_event_start(w, ev, w->enc->nevents, &t);
    if (ti < 0)
        return (int)ti;
    if (w->nthreads > w->enc->nthreads_cap && trace_enc_threads(w->enc, w->nthreads) < 0) {
        w->stats.events_lost_to_errors++; /* out of memory: the event is dropped, and counted */
        return -ENOMEM;
    }
    trace_rec r = {.type = ev->type,
                   .category = ev->category,
                   .tidx = (uint32_t)ti,
                   .id = ev->id,
                   .old_id = ev->old_id,
                   .stack = ev->stack,
                   .t = t,
                   .size = ev->size,
                   .address = ev->address};
    trace_enc_event(w->enc, &r);
    int rc = 0;
    if (w->enc->nevents >= w->chunk_events)
        rc = flush_events(w);
    else if (w->defs.len >= DEFS_FLUSH_BYTES)
        rc = flush_defs(w);
    return rc;
}

int mt_trace_write_events(mt_trace_writer *w, const mt_trace_event *ev, size_t n)
{
    int rc = 0;
    while (n) {
        size_t k = 1;
        if (w->threads > 1)
            k = trace_pool_events(w, ev, n, &rc);
        else {
            int r = write_inline(w, ev);
            if (r < 0 && !rc)
                rc = r;
        }
        ev += k;
        n -= k;
    }
    return rc;
}

int mt_trace_write_event(mt_trace_writer *w, const mt_trace_event *ev)
{
    return mt_trace_write_events(w, ev, 1);
}

int mt_trace_write_flush(mt_trace_writer *w, int force)
{
    if (w->threads > 1) {
        int old = !force && open_events(w) && trace_w_now_ns() - w->chunk_open_ns >= w->chunk_age_ns;
        int rc = trace_pool_flush(w, force || old, force);
        return rc < 0 || !force ? rc : flush_defs(w); /* definitions without events */
    }
    if (!w->enc->nevents && !force)
        return 0;
    if (!force && trace_w_now_ns() - w->chunk_open_ns < w->chunk_age_ns)
        return 0;
    return flush_events(w);
}

int mt_trace_write_finish(mt_trace_writer *w, const char *const *stat_names, const uint64_t *stat_values,
                          int nstats)
{
    int rc = w->threads > 1 ? mt_trace_write_flush(w, 1) : flush_events(w);
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
    rc = write_chunk(w, TRACE_CHUNK_END, w->body.p, w->body.len, (uint32_t)(nstats + 3));
    if (rc < 0 || w->index_lost)
        return rc; /* without memory for the index: the end record ends the file */
    uint64_t index_at = w->offset;
    rc = write_chunk(w, TRACE_CHUNK_INDEX, w->index.p, w->index.len, w->nindex);
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
