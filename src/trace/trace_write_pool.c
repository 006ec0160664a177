/* trace_write_pool.c — the trace writer's encoder threads (cfg.threads =
 * N > 1). The caller's thread makes each event's definitions (they need
 * the host) and appends a compact record of it (12-36 bytes) to the open
 * batch; a full batch (or one closed by a flush) goes to encoder thread
 * k % N for chunk k of the file, with the DEFS records pending when it
 * closed. That thread codes the events into the streams (its own coder:
 * trace_write_enc.c), lays out the body and compresses both chunks; the
 * caller writes them, in order, numbering and indexing them then, in a
 * later call (when it hands over another batch, at a flush) and all of
 * them at flush(force) and finish. Every host callback is thus made on
 * the caller's thread.
 *
 * Same bytes whatever the timing: chunk k is handed over only once chunk
 * k - N is written (at most N in flight), and its coding (the TRACE_F_*
 * flags, the auto zstd level) is picked from chunk k - N's statistics,
 * never from whichever chunk happened to finish last. A coder's state is
 * reset per chunk or tagged with the chunk's generation, so which thread
 * codes a chunk does not matter either.
 *
 * Memory, at the default 128 Ki events a chunk: the open batch and one per
 * thread, ~16 bytes an event on malloc/free pairs (2.1 MB each; mapped at
 * the worst case, 4.7 MB, touched as filled, refilled every chunk so not
 * given back); per thread its coder's streams (~1.5 MB touched on mbench's
 * events; trace_enc_trim gives back what an unusual chunk touched beyond
 * twice the last one's), zstd's window and tables (~1.2 MB: the window is
 * one chunk's body) and the compressed chunk (~0.4 MB): ~5 MB per encoder
 * thread, plus the open batch. Measured on mbench's events: +9.8 MB
 * resident with 2 threads, +20 MB with 4, over the 3.6 MB of the writer
 * coding on the caller's thread. A smaller chunk_events scales it down.
 *
 * No malloc (the writer runs in the agent): everything is mmap'd. The
 * threads meet the caller once per chunk under one mutex; nothing per event. */
#include "trace/trace_write_int.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define REC_MAX 36         /* bytes of the largest record (a realloc by a thread of index >= TIDX_ESC) */
#define TIDX_ESC 0x7ffffu  /* a record's thread index this big or bigger follows its head */
#define REPETITIVE_LEVEL 9 /* trace_write_enc.c's */

enum { W_IDLE, W_BUSY, W_DONE };

typedef struct worker {
    trace_pool *pool;
    trace_enc *enc;
    pthread_t thread;
    pthread_cond_t work;
    int state; /* W_*, under pool->lock */
    /* The batch: its records and the definitions pending when it closed. */
    unsigned char *raw;
    size_t raw_len;
    uint32_t nevents, nthreads, ndefs, base_id;
    uint64_t gen;
    unsigned flags;
    int repetitive, level;
    wbuf defs;
    /* What came of it: the DEFS chunk (if ndefs) then the EVENTS chunk in out. */
    wbuf out;
    trace_chunk_out defs_co, events_co;
    int rc;
    trace_chunk_stats stats;
} worker;

struct trace_pool {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int quit;
    unsigned n, started; /* threads; threads running */
    int start_failed;
    size_t raw_cap, size;
    /* The open batch. */
    unsigned char *fill;
    size_t fill_len;
    uint32_t fill_events, fill_base_id;
    int64_t fill_prev_t;      /* the time of the open batch's last record */
    uint64_t handed, written; /* events chunks of this file handed over; written (or dropped) */
    worker workers[];
};

static int start_threads(mt_trace_writer *w);

int trace_pool_create(mt_trace_writer *w)
{
    size_t size = sizeof(trace_pool) + w->threads * sizeof(worker);
    trace_pool *p = trace_w_map(size);
    if (!p)
        return -ENOMEM;
    p->size = size;
    p->n = w->threads;
    p->raw_cap = (size_t)w->chunk_events * REC_MAX;
    p->fill = trace_w_map(p->raw_cap);
    if (!p->fill || pthread_mutex_init(&p->lock, NULL) || pthread_cond_init(&p->done, NULL)) {
        if (p->fill)
            munmap(p->fill, p->raw_cap);
        munmap(p, size);
        return -ENOMEM;
    }
    w->pool = p;
    /* The threads start now, on the thread that makes the writer, not at
     * the first batch: in the agent that is the dispatcher, and a
     * pthread_create there waits for the loader's lock, which a program
     * thread may hold while it waits for the dispatcher (a new thread's
     * TLS allocated through a hook). If they cannot start, the writer
     * encodes inline. */
    if (start_threads(w) < 0)
        p->start_failed = 1;
    return 0;
}

static void stop_threads(trace_pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    for (unsigned i = 0; i < p->started; i++)
        pthread_cond_signal(&p->workers[i].work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->workers[i].thread, NULL);
    p->started = 0;
}

void trace_pool_destroy(mt_trace_writer *w)
{
    trace_pool *p = w->pool;
    if (!p)
        return;
    /* In a fork child the threads are the parent's (they do not exist
     * here) and the lock may have been held at the fork: only unmap. */
    int here = getpid() == w->creator;
    if (here) {
        stop_threads(p);
        pthread_cond_destroy(&p->done);
        pthread_mutex_destroy(&p->lock);
    }
    for (unsigned i = 0; i < p->n; i++) {
        worker *x = &p->workers[i];
        if (here && x->raw) /* its cond was initialised with its buffers */
            pthread_cond_destroy(&x->work);
        trace_enc_destroy(x->enc);
        if (x->raw)
            munmap(x->raw, p->raw_cap);
        trace_wbuf_free(&x->defs);
        trace_wbuf_free(&x->out);
    }
    munmap(p->fill, p->raw_cap);
    munmap(p, p->size);
    w->pool = NULL;
}

uint32_t trace_pool_open_events(const mt_trace_writer *w)
{
    return w->pool->fill_events;
}

/* ---- records ---- */

static inline unsigned char *put32(unsigned char *q, uint32_t v)
{
    memcpy(q, &v, 4);
    return q + 4;
}

static inline unsigned char *put64(unsigned char *q, uint64_t v)
{
    memcpy(q, &v, 8);
    return q + 8;
}

static inline uint32_t get32(const unsigned char **q)
{
    uint32_t v;
    memcpy(&v, *q, 4);
    *q += 4;
    return v;
}

static inline uint64_t get64(const unsigned char **q)
{
    uint64_t v;
    memcpy(&v, *q, 8);
    *q += 8;
    return v;
}

/* A record: head (type, category, thread index, whether the time delta
 * and the size need 64 bits), the time against the batch's previous
 * record's, then the type's fields: 12 bytes a free, 20 a malloc of less
 * than 4 GiB 4 s after the previous event. */
#define REC_T64 (1u << 11)
#define REC_S64 (1u << 12)

static unsigned char *rec_put(unsigned char *q, const mt_trace_event *ev, uint32_t tidx, int64_t dt)
{
    uint32_t head = ev->type | (uint32_t)ev->category << 3 | (tidx < TIDX_ESC ? tidx : TIDX_ESC) << 13;
    int t64 = dt != (int32_t)dt, s64 = ev->size > UINT32_MAX;
    q = put32(q, head | (t64 ? REC_T64 : 0) | (s64 ? REC_S64 : 0));
    if (tidx >= TIDX_ESC)
        q = put32(q, tidx);
    q = t64 ? put64(q, (uint64_t)dt) : put32(q, (uint32_t)dt);
    if (ev->type == MT_TRACE_FREE)
        return put32(q, ev->id);
    if (ev->type == MT_TRACE_REALLOC)
        q = put32(q, ev->old_id);
    q = s64 ? put64(q, ev->size) : put32(q, (uint32_t)ev->size);
    if (ev->type == MT_TRACE_ALLOC || ev->type == MT_TRACE_REALLOC) {
        q = put32(q, ev->id);
        return put32(q, ev->stack);
    }
    return put64(q, ev->address);
}

/* The record at q into r (r->t: the previous record's time); past it. */
static const unsigned char *rec_get(const unsigned char *q, trace_rec *r)
{
    uint32_t head = get32(&q);
    r->type = head & 7;
    r->category = head >> 3 & 0xff;
    r->tidx = head >> 13;
    if (r->tidx == TIDX_ESC)
        r->tidx = get32(&q);
    uint64_t dt = head & REC_T64 ? get64(&q) : (uint64_t)(int64_t)(int32_t)get32(&q);
    r->t = (int64_t)((uint64_t)r->t + dt);
    if (r->type == MT_TRACE_FREE) {
        r->id = get32(&q);
        return q;
    }
    if (r->type == MT_TRACE_REALLOC)
        r->old_id = get32(&q);
    r->size = head & REC_S64 ? get64(&q) : get32(&q);
    if (r->type == MT_TRACE_ALLOC || r->type == MT_TRACE_REALLOC) {
        r->id = get32(&q);
        r->stack = get32(&q);
    } else
        r->address = get64(&q);
    return q;
}

/* ---- an encoder thread ---- */

static void code_batch(worker *x)
{
    trace_enc *e = x->enc;
    size_t at = 0;
    x->rc = 0;
    if (x->ndefs) {
        x->rc = trace_enc_pack(e, x->level, &x->out, 0, TRACE_CHUNK_DEFS, x->defs.p, x->defs.len, x->ndefs,
                               &x->defs_co);
        at = x->out.len;
    }
    if (!x->rc)
        x->rc = trace_enc_threads(e, x->nthreads);
    if (x->rc < 0)
        return;
    trace_enc_open(e, x->gen, x->flags, x->base_id);
    trace_rec r = {0};
    for (const unsigned char *q = x->raw, *end = x->raw + x->raw_len; q < end;) {
        q = rec_get(q, &r);
        trace_enc_event(e, &r);
    }
    x->rc = trace_enc_close(e, x->level, x->repetitive, &x->out, at, &x->events_co);
    trace_enc_stats(e, &x->stats);
    trace_enc_trim(e);
}

static void *worker_main(void *arg)
{
    worker *x = arg;
    trace_pool *p = x->pool;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (x->state != W_BUSY && !p->quit)
            pthread_cond_wait(&x->work, &p->lock);
        if (x->state != W_BUSY)
            break;
        pthread_mutex_unlock(&p->lock);
        code_batch(x);
        pthread_mutex_lock(&p->lock);
        x->state = W_DONE;
        pthread_cond_signal(&p->done); /* only the caller waits on it */
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Maps each thread's coder and buffers and starts it: 0, or a negative
 * errno with no thread left running. */
static int start_threads(mt_trace_writer *w)
{
    trace_pool *p = w->pool;
    int rc = 0;
    for (unsigned i = 0; i < p->n && !rc; i++) {
        worker *x = &p->workers[i];
        x->pool = p;
        if (!x->enc)
            x->enc = trace_enc_create(w->chunk_events, w->auto_level ? REPETITIVE_LEVEL : w->level);
        if (!x->raw) {
            x->raw = trace_w_map(p->raw_cap);
            if (x->raw && pthread_cond_init(&x->work, NULL)) {
                munmap(x->raw, p->raw_cap);
                x->raw = NULL;
            }
        }
        if (!x->enc || !x->raw)
            rc = -ENOMEM;
        else if (w->host.spawn)
            rc = w->host.spawn(w->host.ctx, worker_main, x, &x->thread);
        else
            rc = -pthread_create(&x->thread, NULL, worker_main, x);
        if (!rc)
            p->started++;
    }
    if (rc < 0)
        stop_threads(p);
    return rc;
}

/* ---- the caller's side ---- */

/* Writes the chunks of batch `x` (its DEFS, its EVENTS). */
static int write_batch(mt_trace_writer *w, worker *x)
{
    int rc = w->failed ? w->failed : x->rc;
    if (!rc && x->ndefs)
        rc = trace_w_emit(w, x->out.p, &x->defs_co);
    if (!rc) {
        size_t at = x->ndefs ? TRACE_CHUNK_HEADER_SIZE + x->defs_co.stored : 0;
        rc = trace_w_emit(w, x->out.p + at, &x->events_co);
    }
    if (rc < 0)
        w->stats.events_lost_to_errors += x->nevents;
    return rc;
}

/* Writes the finished chunks in order, waiting for those before chunk
 * `wait_below`: 0 or the first error. */
static int collect(mt_trace_writer *w, uint64_t wait_below)
{
    trace_pool *p = w->pool;
    int rc = 0;
    while (p->written < p->handed) {
        worker *x = &p->workers[p->written % p->n];
        pthread_mutex_lock(&p->lock);
        if (x->state == W_BUSY && p->written >= wait_below) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        while (x->state == W_BUSY)
            pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
        int r = write_batch(w, x);
        if (r < 0 && !rc)
            rc = r;
        pthread_mutex_lock(&p->lock);
        x->state = W_IDLE;
        pthread_mutex_unlock(&p->lock);
        p->written++;
    }
    return rc;
}

/* Codes the open batch on this thread, as threads <= 1 would from now on
 * (the threads did not start). */
static int fall_back(mt_trace_writer *w)
{
    trace_pool *p = w->pool;
    trace_enc *e = w->enc;
    w->threads = 1;
    trace_enc_open(e, ++w->chunk_gen, trace_pick_flags(w, NULL), p->fill_base_id);
    uint32_t n = p->fill_events;
    p->fill_events = 0;
    if (trace_enc_threads(e, w->nthreads) < 0) {
        w->stats.events_lost_to_errors += n;
        return -ENOMEM;
    }
    trace_rec r = {0};
    for (const unsigned char *q = p->fill, *end = p->fill + p->fill_len; q < end;) {
        q = rec_get(q, &r);
        trace_enc_event(e, &r);
    }
    p->fill_len = 0;
    return trace_w_flush_events(w);
}

/* Hands the open batch (with events) to the thread of its chunk number. */
static int hand_off(mt_trace_writer *w)
{
    trace_pool *p = w->pool;
    if (w->failed) {
        w->stats.events_lost_to_errors += p->fill_events;
        p->fill_events = 0;
        p->fill_len = 0;
        return w->failed;
    }
    if (!p->started && !p->start_failed && start_threads(w) < 0)
        p->start_failed = 1;
    if (p->start_failed)
        return fall_back(w);
    uint64_t k = p->handed;
    worker *x = &p->workers[k % p->n];
    int rc = k >= p->n ? collect(w, k - p->n + 1) : 0; /* chunk k - N is written: x is free */
    /* Without memory for its definitions the batch is lost (its events
     * would come before them); they stay pending for the next. */
    int defs_rc = w->failed ? w->failed : trace_w_take_defs(w, &x->defs, &x->ndefs);
    if (defs_rc < 0) {
        w->stats.events_lost_to_errors += p->fill_events;
        p->fill_events = 0;
        p->fill_len = 0;
        return rc < 0 ? rc : defs_rc;
    }
    w->first_chunk = k < p->n;
    unsigned f = trace_pick_flags(w, k >= p->n ? &x->stats : NULL);
    w->packed_run = f & TRACE_F_ALIGNED ? 0 : w->packed_run + 1;
    x->repetitive = k >= p->n ? trace_repetitive(w, x->stats.stored, x->stats.raw) : w->auto_level;
    x->flags = f;
    x->level = w->level;
    x->gen = ++w->chunk_gen;
    x->base_id = p->fill_base_id;
    x->nthreads = w->nthreads;
    unsigned char *raw = x->raw;
    x->raw = p->fill;
    x->raw_len = p->fill_len;
    x->nevents = p->fill_events;
    p->fill = raw;
    p->fill_len = 0;
    p->fill_events = 0;
    pthread_mutex_lock(&p->lock);
    x->state = W_BUSY;
    pthread_cond_signal(&x->work);
    pthread_mutex_unlock(&p->lock);
    p->handed++;
    int r = collect(w, 0); /* whatever else is finished */
    return rc < 0 ? rc : r;
}

size_t trace_pool_events(mt_trace_writer *w, const mt_trace_event *ev, size_t n, int *rc)
{
    trace_pool *p = w->pool;
    for (size_t i = 0; i < n; i++, ev++) {
        int64_t t = 0, ti = trace_w_event_start(w, ev, p->fill_events, &t);
        if (ti < 0) {
            if (!*rc)
                *rc = (int)ti;
            continue;
        }
        if (!p->fill_events) {
            p->fill_base_id = w->last_id;
            p->fill_prev_t = 0;
        }
        unsigned char *end = rec_put(p->fill + p->fill_len, ev, (uint32_t)ti,
                                     (int64_t)((uint64_t)t - (uint64_t)p->fill_prev_t));
        p->fill_len = (size_t)(end - p->fill);
        p->fill_prev_t = t;
        if (ev->type == MT_TRACE_ALLOC || ev->type == MT_TRACE_REALLOC)
            w->last_id = ev->id;
        if (++p->fill_events >= w->chunk_events || w->defs.len >= DEFS_FLUSH_BYTES) {
            int r = hand_off(w);
            if (r < 0 && !*rc)
                *rc = r;
            if (w->threads <= 1) /* fell back: the rest is coded inline */
                return i + 1;
        }
    }
    return n;
}

int trace_pool_flush(mt_trace_writer *w, int force, int wait)
{
    trace_pool *p = w->pool;
    int rc = force && p->fill_events ? hand_off(w) : 0;
    if (w->threads <= 1) /* fell back: nothing in flight */
        return rc;
    int r = collect(w, wait ? p->handed : 0);
    return rc < 0 ? rc : r;
}

void trace_pool_reset(mt_trace_writer *w)
{
    trace_pool *p = w->pool;
    pthread_mutex_lock(&p->lock);
    for (; p->written < p->handed; p->written++) {
        worker *x = &p->workers[p->written % p->n];
        while (x->state == W_BUSY)
            pthread_cond_wait(&p->done, &p->lock);
        x->state = W_IDLE;
    }
    pthread_mutex_unlock(&p->lock);
    p->handed = p->written = 0;
    p->fill_events = 0;
    p->fill_len = 0;
}
