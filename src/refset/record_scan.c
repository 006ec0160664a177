/* record_scan.c — the periodic scan of a process's pages (every
 * --interval): pages present but not outstanding were referenced without a
 * fault we saw (fault-around maps up to 64 KiB of page cache on one fault,
 * a transparent huge page maps 2 MiB, a sample may have been lost): they
 * take the time, thread and stack of a fault of the same process in the
 * same 64 KiB (2 MiB for a huge page) window since the last scan, else the
 * scan's time. Outstanding pages neither present nor swapped left the
 * reference set at most one interval before the scan. */
#include "refset/record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SIZE_ (1ull << REC_PAGE_SHIFT)

static int by_addr(const void *a, const void *b)
{
    const rec_fault *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A fault of p (sorted by address) in the window of addr, or NULL. */
static const rec_fault *window_fault(const rec_proc *p, uint64_t addr, unsigned shift)
{
    uint64_t lo_addr = addr >> shift << shift, hi_addr = lo_addr + (1ull << shift);
    size_t lo = 0, hi = p->nfaults;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->faults[mid].addr < lo_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nfaults && p->faults[lo].addr < hi_addr ? &p->faults[lo] : NULL;
}

static bool in_sorted(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == x;
}

struct scan_ctx {
    rec_state *st;
    rec_proc *p;
    uint64_t time;
    uint32_t ref_flags;   /* RS_REF_BEFORE / INHERITED for an entry scan, else 0 */
    const uint64_t *skip; /* page numbers a later fault of the batch references */
    size_t nskip;
    const rec_proc *parent; /* a fork's entry scan: the parent */
};

/* A fork copies the page tables the parent had: a child's page is
 * inherited only if the parent held the same frame at the same address
 * from before the fork. Anything else the child touched itself between the
 * fork and this scan (its own faults, their fault-around neighbours): the
 * next periodic scan attributes those to its faults. */
static bool inherited(const struct scan_ctx *c, uint64_t addr, uint64_t pfn)
{
    const rec_page *e = rec_pages_find(&c->parent->pages, addr >> REC_PAGE_SHIFT);
    return e && e->time <= c->time && (pfn == 0 || e->pfn == 0 || e->pfn == pfn);
}

/* Pages [addr, addr + n pages) of m, none outstanding, in a region of
 * categories cat: referenced now, in runs of consecutive frames that share
 * their attribution. */
static void new_pages(const struct scan_ctx *c, const rec_map *m, uint64_t addr, size_t n, uint64_t cat)
{
    uint64_t entries[512];
    unsigned shift = cat & REC_IS_HUGE ? REC_THP_SHIFT : REC_FAULT_AROUND_SHIFT;
    while (n > 0) {
        size_t k = n > 512 ? 512 : n;
        rec_pagemap_read(c->p->pagemap, addr, k, entries);
        struct ref_args run = {0};
        const rec_fault *run_fault = NULL;
        for (size_t i = 0; i <= k; i++) {
            uint64_t a = addr + i * PAGE_SIZE_, e = i < k ? entries[i] : 0;
            uint64_t pfn = e & PM_PFN_MASK;
            const rec_fault *f = NULL;
            if (i < k && !c->ref_flags)
                f = window_fault(c->p, a, shift);
            bool inherit_ok = !c->parent || (i < k && inherited(c, a, pfn));
            bool joins = run.npages && i < k && (e & PM_PRESENT) && inherit_ok && f == run_fault &&
                         (e & PM_FILE) == (run.entry & PM_FILE) &&
                         (run.pfn ? pfn == run.pfn + run.npages : pfn == 0);
            if (!joins && run.npages) {
                rec_emit_ref(c->st, c->p, m, &run);
                run.npages = 0;
            }
            if (joins) {
                run.npages++;
                continue;
            }
            if (i == k || !(e & PM_PRESENT) || !inherit_ok)
                continue;
            run = (struct ref_args){.addr = a,
                                    .npages = 1,
                                    .pfn = pfn,
                                    .entry = e,
                                    .time = f ? f->time : c->time,
                                    .tid = f ? f->tid : 0,
                                    .stack = f ? f->stack : 0,
                                    .flags = c->ref_flags ? c->ref_flags : RS_REF_SCAN};
            if (cat & REC_IS_HUGE)
                run.flags |= RS_REF_THP;
            run_fault = f;
        }
        /* A run that joined its last page is emitted by the i == k pass. */
        addr += k * PAGE_SIZE_;
        n -= k;
    }
}

/* The present pages of region r that are not outstanding. */
static void region_new_pages(const struct scan_ctx *c, const rec_region *r)
{
    rec_proc *p = c->p;
    uint64_t a = r->start;
    while (a < r->end) {
        rec_map *m = rec_maps_find(&p->maps, a);
        if (!m) {
            a += PAGE_SIZE_;
            continue;
        }
        uint64_t seg_end = m->end < r->end ? m->end : r->end;
        if (m->skip) {
            a = seg_end;
            continue;
        }
        uint64_t run_start = 0;
        size_t run_n = 0;
        for (; a <= seg_end; a += PAGE_SIZE_) {
            bool fresh = a < seg_end && !rec_pages_find(&p->pages, a >> REC_PAGE_SHIFT) &&
                         !(c->nskip && in_sorted(c->skip, c->nskip, a >> REC_PAGE_SHIFT));
            if (fresh) {
                if (!run_n)
                    run_start = a;
                run_n++;
            } else if (run_n) {
                new_pages(c, m, run_start, run_n, r->cat);
                run_n = 0;
            }
        }
        a = seg_end;
    }
}

/* Is page number pg inside a region (present or swapped)? */
static bool still_there(const rec_region *v, size_t n, uint64_t pg)
{
    uint64_t addr = pg << REC_PAGE_SHIFT;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].start <= addr;
}

static void released_pages(rec_state *st, rec_proc *p, const rec_region *regions, size_t nregions,
                           uint64_t time, uint64_t scan_start)
{
    uint64_t *out = NULL, *keep = NULL;
    size_t n = 0, nkeep = 0;
    if (!p->pages.n)
        return;
    out = malloc(p->pages.n * sizeof *out);
    keep = malloc(p->pages.n * sizeof *keep);
    if (out && keep) {
        for (size_t i = 0; i < p->pages.cap; i++) {
            const rec_page *e = &p->pages.v[i];
            if (!e->page || e->time >= scan_start || still_there(regions, nregions, e->page))
                continue;
            if (e->flags & REC_PG_KEEP)
                keep[nkeep++] = e->page;
            else
                out[n++] = e->page;
        }
        rec_release_pages(st, p, out, n, time, RS_REL_SCAN);
        for (size_t i = 0; i < nkeep; i++)
            rec_pages_del(&p->pages, keep[i]);
    }
    free(out);
    free(keep);
}

static void scan(rec_state *st, rec_proc *p, uint64_t time, uint32_t ref_flags, const uint64_t *skip,
                 size_t nskip, const rec_proc *parent)
{
    if (p->waiting_exec || p->pagemap < 0)
        return;
    uint64_t scan_start = rec_now();
    int rc = rec_proc_read_maps(p);
    if (rc == -ENOENT || rc == -ESRCH) {
        rec_proc_gone(st, p, time);
        return;
    }
    if (rc < 0)
        return;
    p->maps_stale = false;
    rec_region *regions = NULL;
    size_t nregions = 0, cap = 0;
    rc = rec_pagemap_scan(p->pagemap, &p->maps, &regions, &nregions, &cap, st->zero_pfn, &st->use_ioctl);
    if (rc < 0) {
        free(regions);
        return;
    }
    /* Every fault that made a page present was sampled before the page
     * was there: reading the rings now gives those pages their faults
     * (time, thread, stack) rather than the scan's. */
    pid_t pid = p->pid;
    if (st->drain && !st->in_batch && !ref_flags) {
        st->drain(st->drain_ctx);
        if (!(p = rec_proc_find(st, pid)) || p->pagemap < 0) {
            free(regions);
            return;
        }
    }
    st->scans++;
    if (p->nfaults)
        qsort(p->faults, p->nfaults, sizeof *p->faults, by_addr);
    struct scan_ctx c = {st, p, time, ref_flags, skip, nskip, parent};
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].cat & REC_IS_PRESENT)
            region_new_pages(&c, &regions[i]);
    if (!ref_flags)
        released_pages(st, p, regions, nregions, time, scan_start);
    free(regions);
    /* Faults after the scan began keep for the next one: their
     * fault-around neighbours may only show then. */
    size_t k = 0;
    for (size_t i = 0; i < p->nfaults; i++)
        if (p->faults[i].time >= scan_start)
            p->faults[k++] = p->faults[i];
    p->nfaults = k;
}

void rec_proc_scan(rec_state *st, rec_proc *p, uint64_t time, uint32_t extra_flags)
{
    scan(st, p, time, extra_flags, NULL, 0, NULL);
}

void rec_scan_entry(rec_state *st, rec_proc *p, uint64_t time, uint32_t ref_flags, const rec_batch *rest,
                    size_t from, const rec_proc *parent)
{
    uint64_t *skip = NULL;
    size_t n = 0;
    if (rest && from < rest->n) {
        skip = malloc((rest->n - from) * sizeof *skip);
        for (size_t i = from; skip && i < rest->n; i++)
            if (rest->v[i].kind == REC_IT_SAMPLE && rest->v[i].pid == (uint32_t)p->pid)
                skip[n++] = rest->v[i].addr >> REC_PAGE_SHIFT;
        if (skip && n)
            qsort(skip, n, sizeof *skip, cmp_u64);
    }
    scan(st, p, time, ref_flags, skip, n, parent);
    free(skip);
}

void rec_proc_scan_pending(rec_state *st)
{
    for (size_t i = st->nprocs; i-- > 0;)
        if (i < st->nprocs && st->procs[i]->trim_pending) {
            st->procs[i]->trim_pending = false;
            rec_proc_scan(st, st->procs[i], rec_now(), 0);
        }
}

void rec_proc_scan_all(rec_state *st, uint64_t time)
{
    /* A scan may find a process gone and remove it: walk backwards. */
    for (size_t i = st->nprocs; i-- > 0;)
        if (i < st->nprocs)
            rec_proc_scan(st, st->procs[i], time, 0);
}
