/* analyze_run.c — a trace's events from the reader to the analyzer: the
 * reader decodes on a thread of its own (its chunks decompressed on yet
 * another, MT_TRACE_PREFETCH) into batches the analyzer takes in turn, so
 * decoding and analysing overlap on two cores. Within a batch, each
 * event's live-map entry is prefetched ahead of its analysis, so the
 * random accesses of frees overlap instead of stalling one by one.
 * Before the reading starts, the first event is read here: the
 * definitions before it carry the meta that says whether the trace is a
 * forked child's, whose inherited blocks come first (analyze_inherit). */
#include "analyze/analyze.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define BATCH 16384
#define NBATCH 3

struct batch {
    mt_trace_event ev[BATCH];
    size_t n;
    uint64_t offset; /* the file's bytes read after it */
};

struct pipe {
    mt_trace_reader *r;
    struct batch *b; /* NBATCH */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t filled, taken; /* batches, counting forever */
    bool done;              /* the reader reached its end or an error: rc */
    bool stop;              /* the analyzer gave up */
    int rc;
    analyze_peek_fn *peek; /* NULL, or until it returns false */
    void *peek_ctx;
    int first_rc; /* the first event's mt_trace_next, read before the thread started */
    mt_trace_event first;
};

static void *reading(void *arg)
{
    struct pipe *p = arg;
    pthread_setname_np(pthread_self(), "memtrail-read");
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->filled - p->taken == NBATCH)
            pthread_cond_wait(&p->cv, &p->mu);
        bool stop = p->stop;
        struct batch *b = &p->b[p->filled % NBATCH];
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
        int rc = 1;
        size_t n = 0;
        if (p->filled == 0) { /* the first event, read already */
            rc = p->first_rc;
            if (rc > 0)
                b->ev[n++] = p->first;
        }
        while (rc > 0 && n < BATCH && (rc = mt_trace_next(p->r, &b->ev[n])) > 0)
            n++;
        b->n = n;
        b->offset = mt_trace_offset(p->r);
        if (p->peek && !p->peek(p->peek_ctx, p->r, b->ev, n, rc <= 0))
            p->peek = NULL;
        pthread_mutex_lock(&p->mu);
        p->filled++;
        if (rc <= 0) {
            p->done = true;
            p->rc = rc;
        }
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (rc <= 0)
            return NULL;
    }
}

int analyze_run(struct analyzer *a, mt_trace_reader *r,
                void (*progress)(void *ctx, uint64_t events, uint64_t offset), void *ctx)
{
    return analyze_run_peek(a, r, progress, ctx, NULL, NULL);
}

int analyze_run_peek(struct analyzer *a, mt_trace_reader *r,
                     void (*progress)(void *ctx, uint64_t events, uint64_t offset), void *ctx,
                     analyze_peek_fn *peek, void *peek_ctx)
{
    struct pipe p = {.r = r, .b = malloc(NBATCH * sizeof *p.b), .peek = peek, .peek_ctx = peek_ctx};
    pthread_t th;
    if (!p.b)
        return -ENOMEM;
    p.first_rc = mt_trace_next(r, &p.first);
    if (analyze_inherit(a, r) < 0) {
        free(p.b);
        return -ENOMEM;
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    if (pthread_create(&th, NULL, reading, &p) != 0) {
        free(p.b);
        return -ENOMEM;
    }
    int rc = 0;
    uint64_t events = 0;
    for (;;) {
        pthread_mutex_lock(&p.mu);
        while (p.filled == p.taken && !p.done)
            pthread_cond_wait(&p.cv, &p.mu);
        bool more = p.filled > p.taken;
        pthread_mutex_unlock(&p.mu);
        if (!more)
            break;
        const struct batch *b = &p.b[p.taken % NBATCH];
        if (analyze_events(a, b->ev, b->n) < 0) {
            rc = -ENOMEM;
            break;
        }
        events += b->n;
        if (progress)
            progress(ctx, events, b->offset);
        pthread_mutex_lock(&p.mu);
        p.taken++;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
    }
    pthread_mutex_lock(&p.mu);
    p.stop = true;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    free(p.b);
    analyze_end(a);
    if (rc < 0)
        return rc;
    return p.rc < 0 ? -EBADMSG : 0;
}
