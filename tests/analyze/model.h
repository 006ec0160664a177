/* model.h — for the analyzer's tests: random event sequences (several
 * threads, reallocs, frees of unknown ids, ids wrapping and reused) and a
 * brute-force model of the analysis written independently of
 * src/analyze: plain arrays and linear searches, the stacks at the peak
 * copied whole at every new peak, the timeline computed at the end from
 * every event's live bytes. */
#ifndef MT_TESTS_ANALYZE_MODEL_H
#define MT_TESTS_ANALYZE_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_write.h"

/* --- random events -------------------------------------------------------- */

static uint64_t model_rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    model_rng ^= model_rng << 13;
    model_rng ^= model_rng >> 7;
    model_rng ^= model_rng << 17;
    return model_rng;
}
static uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

struct gen_live {
    uint32_t id;
    uint32_t tid;
};

/* n random events into ev (caller's array). */
static size_t gen_events(mt_trace_event *ev, size_t n, uint32_t first_id, unsigned nthreads)
{
    struct gen_live *live = malloc(n * sizeof *live);
    size_t nlive = 0, k = 0;
    uint32_t next_id = first_id;
    uint64_t t = 1000 + rnd_below(5000);
    static const uint32_t tids[] = {4242, 4243, 7, 100000, 31337, 1};
    while (k < n) {
        mt_trace_event e = {0};
        uint32_t tid = tids[rnd_below(nthreads)];
        e.thread = tid;
        if (rnd_below(100) < 3 && t > 100)
            t -= rnd_below(100); /* threads' clocks do not quite agree */
        else
            t += rnd_below(rnd_below(10) == 0 ? 200000 : 2000);
        e.time_ns = t;
        unsigned op = (unsigned)rnd_below(1000);
        uint32_t stack = (uint32_t)rnd_below(40);
        e.stack = stack;
        e.category = stack == 0 ? (uint8_t)rnd_below(4) : (uint8_t)(stack % 3);
        e.size = rnd_below(10) == 0 ? 0 : 1 + rnd_below(rnd_below(4) == 0 ? 100000 : 300);
        if (rnd_below(500) == 0)
            e.size = (1ull << 32) + rnd_below(1ull << 33); /* 4 GiB and more: the side table */
        if (op < 450 || nlive == 0) {
            e.type = MT_TRACE_ALLOC;
            e.id = next_id++;
            if (rnd_below(20) == 0) { /* two threads swapped neighbours */
                e.id = next_id++;
                ev[k++] = e;
                if (k == n)
                    break;
                live[nlive++] = (struct gen_live){e.id, tid};
                e.id -= 1;
            }
            if (rnd_below(300) == 0 && nlive) /* an id allocated again while live (wrapped) */
                e.id = live[rnd_below(nlive)].id;
            else
                live[nlive++] = (struct gen_live){e.id, tid};
            ev[k++] = e;
            /* a temporary: freed by the same thread's next call */
            if (k < n && rnd_below(6) == 0) {
                if (k + 2 < n && rnd_below(4) == 0) {
                    /* realloc'd in between (once or twice): resized, still the one block */
                    for (int r = (int)rnd_below(2); r >= 0; r--) {
                        mt_trace_event re = e;
                        re.type = MT_TRACE_REALLOC;
                        re.old_id = e.id;
                        re.id = next_id++;
                        re.size = 1 + rnd_below(4096);
                        if (rnd_below(2) == 0) { /* at another stack: moved there */
                            re.stack = 1 + (uint32_t)rnd_below(39);
                            re.category = (uint8_t)(re.stack % 3);
                        }
                        for (size_t i = nlive; i-- > 0;)
                            if (live[i].id == e.id) {
                                live[i].id = re.id;
                                break;
                            }
                        e = re;
                        ev[k++] = re;
                    }
                }
                mt_trace_event f = {.type = MT_TRACE_FREE, .thread = tid, .time_ns = t, .id = e.id};
                if (rnd_below(3) == 0 && k + 1 < n) {
                    /* another thread's call in between does not count */
                    mt_trace_event o = {.type = MT_TRACE_FREE,
                                        .thread = tids[rnd_below(nthreads)],
                                        .time_ns = t,
                                        .id = (uint32_t)rnd()};
                    ev[k++] = o;
                }
                ev[k++] = f;
                for (size_t i = nlive; i-- > 0;)
                    if (live[i].id == e.id) {
                        live[i] = live[--nlive];
                        break;
                    }
            }
            continue;
        }
        if (op < 800) {
            e.type = MT_TRACE_FREE;
            unsigned kind = (unsigned)rnd_below(100);
            if (kind < 4) {
                e.id = 0;
            } else if (kind < 9) {
                e.id = (uint32_t)rnd();
            } else {
                size_t i = rnd_below(nlive);
                e.id = live[i].id;
                live[i] = live[--nlive];
            }
        } else if (op < 950) {
            e.type = MT_TRACE_REALLOC;
            if (rnd_below(100) < 12) {
                e.old_id = (uint32_t)rnd();
            } else {
                size_t i = rnd_below(nlive);
                e.old_id = live[i].id;
                live[i] = live[--nlive];
            }
            e.id = next_id++;
            live[nlive++] = (struct gen_live){e.id, tid};
        } else {
            e.type = rnd_below(2) ? MT_TRACE_MMAP : MT_TRACE_MUNMAP;
            e.address = 0x7f0000000000ull + (rnd_below(1000) << 12);
            e.size = 4096 * (1 + rnd_below(64));
            e.stack = 0;
        }
        ev[k++] = e;
    }
    free(live);
    return k;
}

/* --- the brute-force model ------------------------------------------------ */

struct m_block {
    uint32_t id;
    uint64_t size;
    size_t stack;
    bool used;
};

struct m_stack {
    uint32_t id;
    unsigned category;
    uint64_t allocs, frees, reallocs, allocated, live_bytes, live_count, max_live, temp_count, temp_bytes;
    uint64_t peak_bytes, peak_count;
};

struct m_thread {
    uint32_t tid;
    bool has_last;
    uint32_t last;
    bool resized; /* last was given by a realloc of the block before it */
};

struct model {
    struct m_block *blocks; /* every block ever: searched linearly from the end */
    size_t nblocks, cap;
    struct m_stack st[512];
    size_t nst;
    struct m_thread th[16];
    size_t nth;
    uint64_t events, allocs, frees, reallocs, frees_unknown, reallocs_unknown, ids_reused, mmaps, munmaps;
    uint64_t allocated, live_bytes, live_count, peak_bytes, peak_count, peak_time, temp_count, temp_bytes;
    uint64_t temp_resized; /* temporaries realloc'd between their allocation and free */
    uint64_t mapped, mapped_peak, first_ns, last_ns;
    uint64_t hist_count[65], hist_bytes[65];
    uint64_t *ev_time, *ev_live; /* per event: running max of times, live bytes after */
    uint64_t cat_allocs[256], cat_frees[256], cat_reallocs[256], cat_live[256], cat_count[256], cat_peak[256];
};

static size_t m_stack_of(struct model *m, uint32_t id, unsigned cat)
{
    for (size_t i = 0; i < m->nst; i++)
        if (m->st[i].id == id && m->st[i].category == cat)
            return i;
    m->st[m->nst] = (struct m_stack){.id = id, .category = cat};
    return m->nst++;
}

static struct m_thread *m_thread_of(struct model *m, uint32_t tid)
{
    for (size_t i = 0; i < m->nth; i++)
        if (m->th[i].tid == tid)
            return &m->th[i];
    m->th[m->nth] = (struct m_thread){.tid = tid};
    return &m->th[m->nth++];
}

static struct m_block *m_find(struct model *m, uint32_t id)
{
    for (size_t i = m->nblocks; i-- > 0;)
        if (m->blocks[i].used && m->blocks[i].id == id)
            return &m->blocks[i];
    return NULL;
}

static void m_add(struct model *m, uint32_t id, uint64_t size, size_t s)
{
    if (m->nblocks == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->blocks = realloc(m->blocks, m->cap * sizeof *m->blocks);
    }
    m->blocks[m->nblocks++] = (struct m_block){id, size, s, true};
    struct m_stack *st = &m->st[s];
    st->live_bytes += size;
    st->live_count++;
    if (st->live_bytes > st->max_live)
        st->max_live = st->live_bytes;
    m->live_bytes += size;
    m->live_count++;
    m->cat_live[st->category] += size;
    m->cat_count[st->category]++;
    if (m->cat_live[st->category] > m->cat_peak[st->category])
        m->cat_peak[st->category] = m->cat_live[st->category];
}

static void m_remove(struct model *m, struct m_block *b)
{
    struct m_stack *st = &m->st[b->stack];
    b->used = false;
    st->live_bytes -= b->size;
    st->live_count--;
    m->live_bytes -= b->size;
    m->live_count--;
    m->cat_live[st->category] -= b->size;
    m->cat_count[st->category]--;
}

static void m_hist(struct model *m, uint64_t size)
{
    int k = 0;
    while (k < 64 && (size >> k) != 0)
        k++;
    m->hist_count[k]++;
    m->hist_bytes[k] += size;
}

/* A block freed by thread th's free: temporary when th's last call allocated
 * it (or resized it, when that call's block was the one it resized). */
static void m_temp(struct model *m, struct m_thread *th, struct m_block *b)
{
    if (th->has_last && th->last == b->id) {
        m->st[b->stack].temp_count++;
        m->st[b->stack].temp_bytes += b->size;
        m->temp_count++;
        m->temp_bytes += b->size;
        m->temp_resized += th->resized;
    }
}

static void model_run(struct model *m, const mt_trace_event *ev, size_t n)
{
    memset(m, 0, sizeof *m);
    m->ev_time = calloc(n + 1, sizeof *m->ev_time);
    m->ev_live = calloc(n + 1, sizeof *m->ev_live);
    uint64_t tmax = 0;
    for (size_t k = 0; k < n; k++) {
        const mt_trace_event *e = &ev[k];
        if (k == 0)
            m->first_ns = e->time_ns;
        if (e->time_ns > tmax)
            tmax = e->time_ns;
        m->events++;
        struct m_thread *th = m_thread_of(m, e->thread);
        if (e->type == MT_TRACE_ALLOC || e->type == MT_TRACE_REALLOC) {
            size_t s = m_stack_of(m, e->stack, e->category);
            m_hist(m, e->size);
            struct m_block *old = NULL;
            uint64_t old_size = 0;
            size_t old_stack = 0;
            bool fresh = e->type == MT_TRACE_ALLOC; /* a realloc ends no block: temporary if freed next */
            if (e->type == MT_TRACE_REALLOC) {
                m->reallocs++;
                m->cat_reallocs[m->st[s].category]++;
                if ((old = m_find(m, e->old_id)) != NULL) {
                    old_size = old->size;
                    old_stack = old->stack;
                    fresh = th->has_last && th->last == old->id;
                    m_remove(m, old);
                } else {
                    m->reallocs_unknown++;
                }
            }
            struct m_block *dup = m_find(m, e->id);
            if (dup) {
                m->ids_reused++;
                m_remove(m, dup);
            }
            m_add(m, e->id, e->size, s);
            if (e->type == MT_TRACE_ALLOC) {
                m->allocs++;
                m->cat_allocs[m->st[s].category]++;
                m->st[s].allocs++;
                m->st[s].allocated += e->size;
                m->allocated += e->size;
            } else if (old && old_stack == s) {
                m->st[s].reallocs++;
                uint64_t g = e->size > old_size ? e->size - old_size : 0;
                m->st[s].allocated += g;
                m->allocated += g;
            } else {
                /* the block comes to this stack: its whole size there; the
                 * total counts its growth (its new size when not held) */
                if (old)
                    m->st[old_stack].frees++;
                m->st[s].allocs++;
                m->st[s].allocated += e->size;
                m->allocated += !old ? e->size : e->size > old_size ? e->size - old_size : 0;
            }
            th->resized = fresh && e->type == MT_TRACE_REALLOC;
            th->has_last = fresh;
            th->last = e->id;
        } else if (e->type == MT_TRACE_FREE) {
            struct m_block *b = e->id ? m_find(m, e->id) : NULL;
            if (b) {
                m->frees++;
                m->st[b->stack].frees++;
                m->cat_frees[m->st[b->stack].category]++;
                m_temp(m, th, b);
                m_remove(m, b);
            } else {
                m->frees_unknown++;
            }
            th->has_last = false;
        } else if (e->type == MT_TRACE_MMAP) {
            m->mmaps++;
            m->mapped += e->size;
            if (m->mapped > m->mapped_peak)
                m->mapped_peak = m->mapped;
        } else if (e->type == MT_TRACE_MUNMAP) {
            m->munmaps++;
            m->mapped = e->size < m->mapped ? m->mapped - e->size : 0;
        }
        if (m->live_bytes > m->peak_bytes) {
            m->peak_bytes = m->live_bytes;
            m->peak_count = m->live_count;
            m->peak_time = e->time_ns;
            for (size_t i = 0; i < m->nst; i++) {
                m->st[i].peak_bytes = m->st[i].live_bytes;
                m->st[i].peak_count = m->st[i].live_count;
            }
        }
        m->ev_time[k] = tmax;
        m->ev_live[k] = m->live_bytes;
    }
    m->last_ns = tmax;
}

/* The timeline for buckets of width w (a power of two): nb buckets, each
 * the live bytes at its end and the most in it (from the bytes carried in). */
static size_t model_timeline(const struct model *m, size_t n, uint64_t w, uint64_t *end, uint64_t *max,
                             size_t cap)
{
    if (n == 0)
        return 0;
    size_t nb = (size_t)(m->ev_time[n - 1] / w) + 1;
    if (nb > cap)
        return 0;
    uint64_t live = 0;
    size_t k = 0;
    for (size_t b = 0; b < nb; b++) {
        end[b] = max[b] = live;
        while (k < n && m->ev_time[k] / w == b) {
            live = m->ev_live[k++];
            end[b] = live;
            if (live > max[b])
                max[b] = live;
        }
    }
    return nb;
}

static void model_free(struct model *m)
{
    free(m->blocks);
    free(m->ev_time);
    free(m->ev_live);
}

#endif
