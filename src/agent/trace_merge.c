/* trace_merge.c — the per-CPU runs of trace mode's events and their merge
 * by time (trace_merge.h). */
#include "agent/trace_merge.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_RUNS TRACE_MERGE_MAX_RUNS
#define RUN_FIRST (256u << 10) /* bytes a run maps first (5461 events) */
#define RUN_KEEP (256u << 10)  /* bytes of a drained run kept resident */
#define PAGE 4096u

typedef trace_merge_run run;

static void *map_anon(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

trace_merge *trace_merge_create(unsigned nruns)
{
    trace_merge *m = map_anon(sizeof *m);
    if (!m)
        return NULL;
    m->nruns = nruns == 0 ? 1 : nruns > MAX_RUNS ? MAX_RUNS : nruns;
    return m;
}

void trace_merge_destroy(trace_merge *m)
{
    if (!m)
        return;
    for (unsigned i = 0; i < m->nruns; i++)
        if (m->runs[i].ev)
            munmap(m->runs[i].ev, m->runs[i].cap_bytes);
    munmap(m, sizeof *m);
}

int trace_merge_grow(run *r)
{
    size_t want = r->cap_bytes ? 2 * r->cap_bytes : RUN_FIRST;
    void *p = r->ev ? mremap(r->ev, r->cap_bytes, want, MREMAP_MAYMOVE) : map_anon(want);
    if (p == MAP_FAILED || !p)
        return -ENOMEM;
    r->ev = p;
    r->cap_bytes = want;
    return 0;
}

/* Heap order: the earlier head first, then the lower run. */
static int before(const trace_merge *m, unsigned a, unsigned b)
{
    uint64_t ka = m->runs[a].ev[m->runs[a].head].time_ns, kb = m->runs[b].ev[m->runs[b].head].time_ns;
    return ka < kb || (ka == kb && a < b);
}

static void sift_down(trace_merge *m, unsigned n, unsigned i)
{
    for (;;) {
        unsigned l = 2 * i + 1, best = i;
        if (l < n && before(m, m->heap[l], m->heap[best]))
            best = l;
        if (l + 1 < n && before(m, m->heap[l + 1], m->heap[best]))
            best = l + 1;
        if (best == i)
            return;
        unsigned t = m->heap[i];
        m->heap[i] = m->heap[best];
        m->heap[best] = t;
        i = best;
    }
}

/* After an emit: a run's remaining events to the front, and pages given
 * back. All but a small reserve once the run is empty and took no event
 * since the emit before (the program paused, or this CPU fell quiet, for
 * a whole sweep). Not as soon as an emit empties it: under load every
 * sweep does, and the pages were faulted straight back (a hundred
 * thousand faults a second with eight busy threads, on the dispatcher
 * that every producer waits for), and each give-back flushes the TLB of
 * every CPU the program runs on. A run still fed keeps twice what this
 * sweep staged, so that a burst long past does not stay resident. */
static void compact(run *r)
{
    size_t staged = r->n * sizeof *r->ev; /* this sweep's events, emitted or not */
    int fed = r->n > r->n0;
    if (staged > r->touched) /* n only grew since the last compact */
        r->touched = staged;
    if (r->head > 0) {
        size_t left = r->n - r->head;
        memmove(r->ev, &r->ev[r->head], left * sizeof *r->ev);
        r->n = left;
        r->head = 0;
    }
    size_t keep = RUN_KEEP;
    if (fed || r->n) {
        size_t want = (2 * staged + PAGE - 1) & ~(size_t)(PAGE - 1);
        keep = want > RUN_KEEP ? want : RUN_KEEP;
        if (r->touched <= 4 * keep)
            keep = 0; /* nothing to give back (what is left is within keep) */
    }
    if (keep && r->touched > keep + 16 * PAGE &&
        madvise((char *)r->ev + keep, r->touched - keep, MADV_DONTNEED) == 0)
        r->touched = keep;
    r->n0 = r->n;
}

uint64_t trace_merge_emit(trace_merge *m, uint64_t mark, void (*fn)(void *ctx, mt_trace_event *ev, size_t n),
                          void *ctx)
{
    unsigned n = 0;
    for (unsigned i = 0; i < m->nruns; i++) {
        run *r = &m->runs[i];
        if (r->head < r->n && r->ev[r->head].time_ns < mark)
            m->heap[n++] = i;
    }
    for (unsigned i = n / 2; i-- > 0;)
        sift_down(m, n, i);
    uint64_t out = 0;
    while (n) {
        /* The top run gives events in a row while its head stays before
         * the next run's (the smaller of the root's children; below the
         * mark, as it is in the heap), or below the mark when alone: no
         * heap step for each event while one CPU's events come first. */
        unsigned top = m->heap[0], next = top;
        if (n > 1)
            next = n > 2 && before(m, m->heap[2], m->heap[1]) ? m->heap[2] : m->heap[1];
        run *r = &m->runs[top];
        size_t first = r->head;
        do
            r->head++;
        while (r->head < r->n && (n > 1 ? before(m, top, next) : r->ev[r->head].time_ns < mark));
        fn(ctx, &r->ev[first], r->head - first);
        out += r->head - first;
        if (r->head >= r->n || r->ev[r->head].time_ns >= mark)
            m->heap[0] = m->heap[--n];
        sift_down(m, n, 0);
    }
    for (unsigned i = 0; i < m->nruns; i++)
        compact(&m->runs[i]);
    return out;
}

void trace_merge_clear(trace_merge *m)
{
    for (unsigned i = 0; i < m->nruns; i++) {
        m->runs[i].head = m->runs[i].n;
        m->runs[i].n0 = m->runs[i].n; /* what it held is dropped: quiet from now */
        compact(&m->runs[i]);
    }
}

uint64_t trace_merge_staged(const trace_merge *m)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < m->nruns; i++)
        n += m->runs[i].n - m->runs[i].head;
    return n;
}
