/* record_out.c — the recorder's output: records are queued as they are
 * made and, once per scan interval, sorted by time (ties keep the order
 * they were made in: a stack before the reference that uses it) and given
 * to the writer, then flushed. Holding one interval lets a page a scan
 * finds take the time of the fault that mapped it, earlier in the same
 * interval. A fault sample that reaches us only after its interval was
 * written (a race of a few microseconds at the scan) is written at the
 * last time written, never before it: the writer takes records in order. */
#include "refset/record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rec_out_push(rec_out *o, const mt_rs_event *ev)
{
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 4096;
        mt_rs_event *nv = realloc(o->v, nc * sizeof *nv);
        if (!nv) {
            o->err = o->err ? o->err : -12;
            return;
        }
        o->v = nv;
        uint64_t *ns = realloc(o->seq, nc * sizeof *ns);
        if (!ns) {
            o->err = o->err ? o->err : -12;
            return;
        }
        o->seq = ns;
        o->cap = nc;
    }
    mt_rs_event *e = &o->v[o->n];
    *e = *ev;
    if (ev->name) {
        e->name = strdup(ev->name);
        e->name_len = e->name ? (uint32_t)strlen(e->name) : 0;
    }
    if (ev->value)
        e->value = strdup(ev->value);
    if (ev->frames && ev->nframes) {
        uint64_t *f = malloc(ev->nframes * sizeof *f);
        if (f)
            memcpy(f, ev->frames, ev->nframes * sizeof *f);
        e->frames = f;
        e->nframes = f ? ev->nframes : 0;
    }
    o->seq[o->n] = o->nseq++;
    o->n++;
    if (ev->type == RS_EV_REF)
        o->pages_referenced += ev->npages;
    else if (ev->type == RS_EV_RELEASE)
        o->pages_released += ev->npages;
    else if (ev->type == RS_EV_LOST)
        o->samples_lost += ev->count;
}

typedef struct order {
    uint64_t time, seq;
    size_t index;
} order;

static int by_time(const void *a, const void *b)
{
    const order *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void dump(const rec_out *o, const mt_rs_event *e)
{
    (void)o;
    fprintf(stderr,
            "rs type=%u t=%" PRIu64 " pid=%u tid=%u ppid=%u cat=%u reason=%u flags=0x%x addr=0x%" PRIx64
            " npages=%" PRIu64 " len=%" PRIu64 " pfn=%" PRIu64 " pgoff=%" PRIu64 " ino=%" PRIu64
            " stack=%u alloc_stack=%u nframes=%u count=%" PRIu64 " name=%s value=%s\n",
            e->type, e->time_ns, e->pid, e->tid, e->ppid, e->category, e->reason, e->flags, e->addr,
            e->npages, e->len, e->pfn, e->pgoff, e->ino, e->stack, e->alloc_stack, e->nframes, e->count,
            e->name ? e->name : "-", e->value ? e->value : "-");
}

int rec_out_write(rec_out *o)
{
    order *ord = malloc((o->n ? o->n : 1) * sizeof *ord);
    if (!ord)
        return -12;
    for (size_t i = 0; i < o->n; i++)
        ord[i] = (order){o->v[i].time_ns, o->seq[i], i};
    qsort(ord, o->n, sizeof *ord, by_time);
    for (size_t k = 0; k < o->n; k++) {
        mt_rs_event *e = &o->v[ord[k].index];
        bool timeless = e->type == RS_EV_STACK || e->type == RS_EV_MODULE || e->type == RS_EV_META;
        if (!timeless) {
            if (e->time_ns < o->last_time)
                e->time_ns = o->last_time;
            o->last_time = e->time_ns;
        }
        if (o->dump)
            dump(o, e);
        int rc = o->w && o->err == 0 ? mt_rs_write(o->w, e) : 0;
        /* -EINVAL: a record the file cannot hold (the writer goes on);
         * any other error stops the writing. */
        if (rc == -EINVAL)
            o->refused++;
        else if (rc < 0 && o->err == 0)
            o->err = rc;
        o->records++;
    }
    for (size_t i = 0; i < o->n; i++) {
        free((char *)o->v[i].name);
        free((char *)o->v[i].value);
        free((uint64_t *)o->v[i].frames);
    }
    free(ord);
    o->n = 0;
    if (o->w && o->err == 0) {
        int rc = mt_rs_write_flush(o->w);
        if (rc < 0)
            o->err = rc;
    }
    return o->err;
}

/* ---- input batches ---- */

rec_item *rec_batch_add(rec_batch *b)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        rec_item *nv = realloc(b->v, nc * sizeof *nv);
        if (!nv)
            return NULL;
        b->v = nv;
        b->cap = nc;
    }
    rec_item *it = &b->v[b->n++];
    memset(it, 0, sizeof *it);
    it->seq = b->seq++;
    return it;
}

static int item_by_time(const void *a, const void *b)
{
    const rec_item *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void rec_batch_sort(rec_batch *b)
{
    if (b->n == 0)
        return;
    qsort(b->v, b->n, sizeof *b->v, item_by_time);
}

void rec_batch_clear(rec_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->v[i].name);
        free(b->v[i].frames);
        free(b->v[i].ag);
    }
    b->n = 0;
}
