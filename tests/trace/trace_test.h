/* trace_test.h — what the trace tests share: a host that writes into
 * memory (recording where each write, hence each chunk, ends), stacks and
 * modules made from ids, and the event comparison the reader promises
 * (the fields each type carries; times relative to start_ns). */
#ifndef MT_TRACE_TEST_H
#define MT_TRACE_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_read.h"
#include "trace/trace_write.h"

typedef struct tbuf {
    unsigned char *p;
    size_t len, cap;
    size_t ends[1 << 16]; /* the file's length after each write */
    size_t nends;
    long fail_after; /* >= 0: writes fail once the file would pass this many bytes */
    int modules_calls;
} tbuf;

static inline int tbuf_write(void *ctx, const void *buf, size_t n)
{
    tbuf *m = ctx;
    size_t take = n;
    int rc = 0;
    if (m->fail_after >= 0 && m->len + n > (size_t)m->fail_after) {
        take = (size_t)m->fail_after > m->len ? (size_t)m->fail_after - m->len : 0;
        rc = -28; /* ENOSPC, after a partial write */
    }
    if (m->len + take > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1 << 16;
        while (cap < m->len + take)
            cap *= 2;
        m->p = realloc(m->p, cap);
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, take);
    m->len += take;
    if (!rc && m->nends < sizeof m->ends / sizeof *m->ends)
        m->ends[m->nends++] = m->len;
    return rc;
}

/* Stack id -> frames: id % 7 + 1 frames near 0x400000 * (1 + id % 3);
 * category id % 5. Unknown: id 0xdead. */
static inline int tstack_frames(uint32_t id, uint64_t *out, int max, unsigned *cat)
{
    if (id == 0xdead)
        return -1;
    int n = (int)(id % 7) + 1;
    if (n > max)
        n = max;
    for (int i = 0; i < n; i++)
        out[i] = 0x400000ull * (1 + id % 3) + (uint64_t)id * 16 + (uint64_t)i * 0x101;
    *cat = id % 5;
    return n;
}

static inline int tstack(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *cat)
{
    (void)ctx;
    return tstack_frames(id, out, max, cat);
}

static inline const char *tcat(void *ctx, unsigned id)
{
    (void)ctx;
    static const char *names[] = {"malloc", "new", "mmap", "pool", "other"};
    return id < 5 ? names[id] : NULL;
}

static inline void tmodules(void *ctx, mt_trace_writer *w)
{
    tbuf *m = ctx;
    m->modules_calls++;
    static const unsigned char bid[] = {0xde, 0xad, 0xbe, 0xef};
    mt_trace_write_module(w, 0x400000, 0x800000, 0, "/bin/one", bid, 4);
    mt_trace_write_module(w, 0x800000, 0xc00000, 0x1000, "/lib/two.so", NULL, 0);
    mt_trace_write_module(w, 0xc00000, 0x1000000, 0x2000, "/lib/three.so", bid, 2);
    mt_trace_write_module(w, 0x400000, 0x800000, 0, "/bin/one", bid, 4); /* a duplicate */
}

static inline void tbuf_host(tbuf *m, mt_trace_host *h)
{
    memset(h, 0, sizeof *h);
    h->ctx = m;
    h->write = tbuf_write;
    h->stack = tstack;
    h->category_name = tcat;
    h->modules = tmodules;
}

static inline tbuf *tbuf_new(void)
{
    tbuf *m = calloc(1, sizeof *m);
    m->fail_after = -1;
    return m;
}

static inline void tbuf_delete(tbuf *m)
{
    free(m->p);
    free(m);
}

/* The event as the reader gives it back (start: the file's start_ns, unit its time unit). */
static inline mt_trace_event texpect(const mt_trace_event *in, uint64_t start, uint64_t unit)
{
    mt_trace_event e = *in;
    int64_t t = (int64_t)(in->time_ns - start);
    t = t >= 0 ? t / (int64_t)unit : -((-t + (int64_t)unit - 1) / (int64_t)unit);
    e.time_ns = (uint64_t)t * unit;
    switch (e.type) {
    case MT_TRACE_FREE:
        e.size = 0;
        e.stack = 0;
        e.old_id = 0;
        e.address = 0;
        break;
    case MT_TRACE_ALLOC:
        e.old_id = 0;
        e.address = 0;
        break;
    case MT_TRACE_REALLOC: e.address = 0; break;
    default:
        e.id = 0;
        e.old_id = 0;
        e.stack = 0;
        break;
    }
    return e;
}

static inline int tsame(const mt_trace_event *a, const mt_trace_event *b)
{
    return a->type == b->type && a->category == b->category && a->thread == b->thread &&
           a->time_ns == b->time_ns && a->size == b->size && a->id == b->id && a->old_id == b->old_id &&
           a->stack == b->stack && a->address == b->address;
}

static inline void tprint(const char *what, const mt_trace_event *e)
{
    printf("  %s: type %u cat %u thread %u time %llu size %llu id %u old %u stack %u addr %llx\n", what,
           e->type, e->category, e->thread, (unsigned long long)e->time_ns, (unsigned long long)e->size,
           e->id, e->old_id, e->stack, (unsigned long long)e->address);
}

#endif
