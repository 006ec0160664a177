/* record_proc.c — the recorded processes and what happens to their pages:
 * a process enters (start, fork, exec, attach) and leaves (exit); a fault
 * on a page not outstanding is its first reference; the agent's messages
 * release ranges exactly and name allocation stacks. The periodic scans
 * (record_scan.c) catch what no fault showed. */
#include "refset/record.h"
#include "common/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE_SIZE_ (1ull << REC_PAGE_SHIFT)
#define STACK_NEAR (64u << 10) /* a fault this close to the thread's SP is on its stack */

rec_proc *rec_proc_find(rec_state *st, pid_t pid)
{
    static size_t last;
    if (last < st->nprocs && st->procs[last]->pid == pid)
        return st->procs[last];
    for (size_t i = 0; i < st->nprocs; i++)
        if (st->procs[i]->pid == pid)
            return st->procs[last = i];
    return NULL;
}

static void proc_free(rec_proc *p)
{
    if (p->pagemap >= 0)
        close(p->pagemap);
    rec_maps_free(&p->maps);
    rec_pages_free(&p->pages);
    free(p->faults);
    free(p->ranges);
    free(p);
}

static void proc_remove(rec_state *st, rec_proc *p)
{
    for (size_t i = 0; i < st->nprocs; i++)
        if (st->procs[i] == p) {
            st->procs[i] = st->procs[--st->nprocs];
            break;
        }
    proc_free(p);
}

void rec_proc_free_all(rec_state *st)
{
    for (size_t i = 0; i < st->nprocs; i++)
        proc_free(st->procs[i]);
    free(st->procs);
    st->procs = NULL;
    st->nprocs = st->capprocs = 0;
    free(st->unread);
    st->unread = NULL;
    st->nunread = st->capunread = 0;
}

/* An outstanding page's REC_PG_* flags, from its reference's category and
 * RS_REF_* flags. */
static uint32_t page_flags(unsigned cat, uint32_t ref_flags)
{
    return (ref_flags & RS_REF_FILE_PAGE ? REC_PG_FILE : 0) |
           (ref_flags & RS_REF_ZERO_PAGE ? REC_PG_ZERO : 0) |
           (ref_flags & RS_REF_INHERITED ? REC_PG_INHERITED : 0) |
           (mt_rs_released_on_unmap(cat, ref_flags) ? 0 : REC_PG_KEEP);
}

static void note_unread(rec_state *st, size_t out, pid_t pid, uint64_t addr)
{
    if (st->nunread == st->capunread) {
        size_t nc = st->capunread ? 2 * st->capunread : 64;
        struct rec_unread *nv = realloc(st->unread, nc * sizeof *nv);
        if (!nv)
            return; /* kept as read: identified by its file, or per process */
        st->unread = nv;
        st->capunread = nc;
    }
    st->unread[st->nunread++] = (struct rec_unread){out, pid, addr};
}

void rec_proc_reread(rec_state *st, bool last)
{
    size_t keep = 0;
    for (size_t i = 0; i < st->nunread; i++) {
        const struct rec_unread *u = &st->unread[i];
        if (u->out >= st->out.n)
            continue;
        mt_rs_event *ev = &st->out.v[u->out];
        rec_proc *p = rec_proc_find(st, u->pid);
        rec_page *e = p ? rec_pages_find(&p->pages, u->addr >> REC_PAGE_SHIFT) : NULL;
        /* Only while the reference is the page's outstanding one (not
         * released, or faulted again, since). */
        if (ev->type != RS_EV_REF || ev->pid != (uint32_t)u->pid || ev->addr != u->addr || !e ||
            e->time != ev->time_ns || p->pagemap < 0)
            continue;
        uint64_t entry = 0;
        if (rec_pagemap_read(p->pagemap, u->addr, 1, &entry) != 0)
            continue;
        if (!(entry & PM_PRESENT)) {
            if (!last)
                st->unread[keep++] = *u; /* the fault may still be on its way: once more */
            continue;
        }
        uint64_t pfn = entry & PM_PFN_MASK;
        bool file = (entry & PM_FILE) != 0, zero = st->zero_pfn && pfn == st->zero_pfn;
        ev->pfn = st->pfns ? pfn : 0;
        ev->flags = (uint8_t)((ev->flags & ~(RS_REF_FILE_PAGE | RS_REF_ZERO_PAGE)) |
                              (file ? RS_REF_FILE_PAGE : 0) | (zero ? RS_REF_ZERO_PAGE : 0));
        if (ev->category == RS_CAT_IMAGE && !file)
            ev->category = RS_CAT_COPYONWRITEIMAGE; /* a private copy of the image's page */
        e->pfn = pfn;
        e->category = ev->category;
        e->flags = page_flags(ev->category, ev->flags);
    }
    st->nunread = keep;
}

/* ---- the agent's ranges: sorted, not overlapping ---- */

static rec_range *range_find(const rec_proc *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->ranges[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nranges && p->ranges[lo].start <= addr ? &p->ranges[lo] : NULL;
}

static int range_reserve(rec_proc *p, size_t need)
{
    if (need <= p->capranges)
        return 0;
    size_t nc = p->capranges ? p->capranges * 2 : 64;
    while (nc < need)
        nc *= 2;
    rec_range *nv = realloc(p->ranges, nc * sizeof *nv);
    if (!nv)
        return -ENOMEM;
    p->ranges = nv;
    p->capranges = nc;
    return 0;
}

static void range_remove(rec_proc *p, uint64_t start, uint64_t end)
{
    if (range_reserve(p, p->nranges + 1) < 0)
        return;
    size_t j = 0, n = p->nranges;
    rec_range extra = {0};
    bool split = false;
    for (size_t i = 0; i < n; i++) {
        rec_range r = p->ranges[i];
        if (r.end <= start || r.start >= end) {
            p->ranges[j++] = r;
        } else if (r.start < start && r.end > end) {
            extra = r;
            extra.start = end;
            r.end = start;
            p->ranges[j++] = r;
            split = true;
        } else if (r.start < start) {
            r.end = start;
            p->ranges[j++] = r;
        } else if (r.end > end) {
            r.start = end;
            p->ranges[j++] = r;
        }
    }
    p->nranges = j;
    if (split) { /* after the piece before it: the array stays sorted */
        size_t i = 0;
        while (i < p->nranges && p->ranges[i].start < extra.start)
            i++;
        memmove(&p->ranges[i + 1], &p->ranges[i], (p->nranges - i) * sizeof *p->ranges);
        p->ranges[i] = extra;
        p->nranges++;
    }
}

static void range_set(rec_proc *p, uint64_t start, uint64_t end, uint32_t category, uint32_t stack)
{
    range_remove(p, start, end);
    if (range_reserve(p, p->nranges + 1) < 0)
        return;
    size_t i = 0;
    while (i < p->nranges && p->ranges[i].start < start)
        i++;
    memmove(&p->ranges[i + 1], &p->ranges[i], (p->nranges - i) * sizeof *p->ranges);
    p->ranges[i] = (rec_range){start, end, category, stack};
    p->nranges++;
}

/* ---- references ---- */

/* The category of a page of map, as the agent refines it, and the file
 * page / private copy split of images. */
unsigned rec_page_category(const rec_proc *p, const rec_map *m, uint64_t addr, uint64_t entry,
                           uint32_t *alloc_stack)
{
    unsigned cat = m->category;
    const rec_range *r = range_find(p, addr);
    *alloc_stack = r ? r->stack : 0;
    bool anon_private = cat == RS_CAT_VIRTUALALLOC || cat == RS_CAT_HEAP || cat == RS_CAT_USERSTACK;
    if (r && anon_private && (r->category == RS_CAT_HEAP || r->category == RS_CAT_USERSTACK))
        cat = r->category;
    if (cat == RS_CAT_IMAGE && (entry & PM_PRESENT) && !(entry & PM_FILE))
        cat = RS_CAT_COPYONWRITEIMAGE;
    return cat;
}

/* Queues the reference of pages [addr, addr + npages) of map (all in it,
 * the same kind, consecutive pfns) and makes them outstanding. */
void rec_emit_ref(rec_state *st, rec_proc *p, const rec_map *m, const struct ref_args *a)
{
    uint32_t alloc_stack;
    unsigned cat = rec_page_category(p, m, a->addr, a->entry, &alloc_stack);
    uint32_t flags = a->flags;
    /* A page read too late to have a pagemap entry (its process is gone)
     * is still known to be the file's own when its mapping cannot hold a
     * private copy. */
    bool file_page = (a->entry & PM_FILE) ||
                     (!(a->entry & PM_PRESENT) && m->ino && (m->shared || !(m->prot & PROT_WRITE)));
    if (file_page)
        flags |= RS_REF_FILE_PAGE;
    if (st->zero_pfn && a->pfn == st->zero_pfn)
        flags |= RS_REF_ZERO_PAGE;
    mt_rs_event ev = {.type = RS_EV_REF,
                      .category = (uint8_t)cat,
                      .flags = (uint8_t)flags,
                      .pid = (uint32_t)p->pid,
                      .tid = a->tid,
                      .time_ns = a->time,
                      .addr = a->addr,
                      .npages = a->npages,
                      .pfn = st->pfns ? a->pfn : 0,
                      .stack = a->stack,
                      .alloc_stack = alloc_stack};
    if (m->ino) {
        ev.ino = m->ino;
        ev.dev = m->dev;
        ev.pgoff = m->pgoff + (a->addr - m->start);
    }
    rec_out_push(&st->out, &ev);
    uint32_t pg = page_flags(cat, flags);
    for (uint64_t i = 0; i < a->npages; i++) {
        uint64_t page = (a->addr >> REC_PAGE_SHIFT) + i;
        rec_page *e = rec_pages_find(&p->pages, page);
        if (!e && !(e = rec_pages_add(&p->pages, page)))
            return;
        e->pfn = a->pfn ? a->pfn + i : 0;
        e->time = a->time;
        e->flags = pg;
        e->category = cat;
    }
}

/* A page already outstanding faults again: a new reference only when what
 * backs it changed to memory of its own (a private copy of a file page or
 * of the zero page, or a copy-on-write break of a page shared at fork). */
static bool changed_backing(const rec_state *st, const rec_page *e, uint64_t entry)
{
    if (!(entry & PM_PRESENT))
        return false;
    uint64_t pfn = entry & PM_PFN_MASK;
    if ((e->flags & REC_PG_FILE) && !(entry & PM_FILE))
        return true;
    if ((e->flags & REC_PG_ZERO) && !(st->zero_pfn && pfn == st->zero_pfn))
        return true;
    return (e->flags & REC_PG_INHERITED) && st->pfns && pfn != e->pfn;
}

static void note_fault(rec_proc *p, const struct ref_args *a, uint32_t alloc_stack)
{
    if (p->nfaults == p->capfaults) {
        size_t nc = p->capfaults ? p->capfaults * 2 : 256;
        rec_fault *nv = realloc(p->faults, nc * sizeof *nv);
        if (!nv)
            return;
        p->faults = nv;
        p->capfaults = nc;
    }
    p->faults[p->nfaults++] = (rec_fault){a->addr, a->time, a->tid, a->stack, alloc_stack};
}

int rec_proc_read_maps(rec_proc *p)
{
    int rc = rec_maps_read(&p->maps, p->pid);
    if (rc == 0)
        rec_maps_categorize(&p->maps, p->exe);
    return rc;
}

rec_map *rec_map_of(rec_proc *p, uint64_t addr, uint64_t time)
{
    rec_map *m = rec_maps_find_at(&p->maps, addr, time);
    if (!m && !p->maps_stale) {
        /* A mapping made since the last read (brk growth has no MMAP2). */
        p->maps_stale = true;
        rec_proc_read_maps(p);
        m = rec_maps_find_at(&p->maps, addr, time);
    }
    return m;
}

void rec_proc_maps_read_all(rec_state *st)
{
    for (size_t i = 0; i < st->nprocs; i++)
        if (!st->procs[i]->waiting_exec)
            rec_proc_read_maps(st->procs[i]);
}

static void on_sample(rec_state *st, rec_item *it)
{
    rec_proc *p = rec_proc_find(st, (pid_t)it->pid);
    if (!p || p->waiting_exec)
        return;
    st->faults++;
    uint64_t addr = it->addr & ~(PAGE_SIZE_ - 1);
    rec_map *m = rec_map_of(p, addr, it->time);
    if (!m || m->skip)
        return;
    if (it->sp && m->category == RS_CAT_VIRTUALALLOC && !m->shared && !m->name &&
        (it->addr > it->sp ? it->addr - it->sp : it->sp - it->addr) <= STACK_NEAR) {
        m->is_stack = 1;
        m->category = RS_CAT_USERSTACK;
    }
    uint64_t entry = 0;
    rec_page *e = rec_pages_find(&p->pages, addr >> REC_PAGE_SHIFT);
    if (e && !(e->flags & (REC_PG_FILE | REC_PG_ZERO | REC_PG_INHERITED)))
        return;
    /* A mapping a read of the maps since the fault no longer had: what is
     * at addr now (pagemap, an outstanding page) is another mapping's. */
    bool gone = m->gone_ns != 0;
    if (gone && e)
        return;
    if (p->pagemap >= 0 && !gone)
        rec_pagemap_read(p->pagemap, addr, 1, &entry);
    if (st->test_unread && !e && (((uint64_t)p->pid << 40 ^ addr >> 12) * 0x9E3779B97F4A7C15ull) >> 63)
        entry = 0;
    if (e && !changed_backing(st, e, entry))
        return;
    if (e) {
        /* One reference per (process, page) is outstanding: the old backing
         * leaves as the new one comes. */
        uint64_t pg = addr >> REC_PAGE_SHIFT;
        rec_release_pages(st, p, &pg, 1, it->time, RS_REL_SCAN);
    }
    if (!(entry & (PM_PRESENT | PM_SWAPPED)) && !(m->prot & (PROT_READ | PROT_WRITE)))
        return; /* a guard page: nothing was mapped */
    struct ref_args a = {.addr = addr,
                         .npages = 1,
                         .pfn = entry & PM_PRESENT ? entry & PM_PFN_MASK : 0,
                         .entry = entry,
                         .time = it->time,
                         .tid = it->tid,
                         .flags = RS_REF_FAULT};
    if (it->nframes)
        a.stack = rec_stacks_intern(st->stacks, &st->out, it->frames, it->nframes, it->time);
    size_t at = st->out.n;
    rec_emit_ref(st, p, m, &a);
    if (gone) {
        /* Unmapped by the read that lost it, at the latest. */
        uint64_t pg = addr >> REC_PAGE_SHIFT;
        if (st->out.n > at && rec_pages_find(&p->pages, pg))
            rec_release_pages(st, p, &pg, 1, m->gone_ns, RS_REL_SCAN);
        return;
    }
    if (!(entry & PM_PRESENT) && p->pagemap >= 0 && st->out.n == at + 1)
        note_unread(st, at, p->pid, addr);
    uint32_t alloc_stack;
    rec_page_category(p, m, addr, entry, &alloc_stack);
    note_fault(p, &a, alloc_stack);
}

/* ---- releases ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void rec_release_pages(rec_state *st, rec_proc *p, uint64_t *pages, size_t n, uint64_t time, unsigned reason)
{
    if (n == 0)
        return;
    qsort(pages, n, sizeof *pages, cmp_u64);
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && pages[j] == pages[j - 1] + 1)
            j++;
        mt_rs_event ev = {.type = RS_EV_RELEASE,
                          .reason = (uint8_t)reason,
                          .pid = (uint32_t)p->pid,
                          .time_ns = time,
                          .addr = pages[i] << REC_PAGE_SHIFT,
                          .npages = j - i};
        rec_out_push(&st->out, &ev);
        i = j;
    }
    for (size_t k = 0; k < n; k++)
        rec_pages_del(&p->pages, pages[k]);
}

typedef struct u64vec {
    uint64_t *v;
    size_t n, cap;
} u64vec;

static int u64vec_push(u64vec *x, uint64_t v)
{
    if (x->n == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 256;
        uint64_t *nv = realloc(x->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        x->v = nv;
        x->cap = nc;
    }
    x->v[x->n++] = v;
    return 0;
}

/* The outstanding pages of [start, end) leave at time; page-cache pages
 * stay outstanding (no record) but are no longer the process's. */
static void release_range(rec_state *st, rec_proc *p, uint64_t start, uint64_t end, uint64_t time,
                          unsigned reason)
{
    uint64_t first = start >> REC_PAGE_SHIFT, last = (end + PAGE_SIZE_ - 1) >> REC_PAGE_SHIFT;
    u64vec out = {0}, keep = {0};
    bool by_page = last - first <= p->pages.n;
    uint64_t count = by_page ? last - first : p->pages.cap;
    for (uint64_t k = 0; k < count; k++) {
        rec_page *e = by_page ? rec_pages_find(&p->pages, first + k) : &p->pages.v[k];
        if (!e || !e->page || e->page < first || e->page >= last)
            continue;
        if (u64vec_push(e->flags & REC_PG_KEEP ? &keep : &out, e->page) < 0)
            break;
    }
    rec_release_pages(st, p, out.v, out.n, time, reason);
    for (size_t k = 0; k < keep.n; k++)
        rec_pages_del(&p->pages, keep.v[k]);
    free(out.v);
    free(keep.v);
}

/* ---- processes entering and leaving ---- */

static void push_map(rec_state *st, const rec_proc *p, const rec_map *m, uint64_t time, uint32_t stack)
{
    mt_rs_event ev = {.type = RS_EV_MAP,
                      .category = m->category,
                      .pid = (uint32_t)p->pid,
                      .time_ns = time,
                      .addr = m->start,
                      .len = m->end - m->start,
                      .pgoff = m->pgoff,
                      .ino = m->ino,
                      .dev = m->dev,
                      .prot = m->prot,
                      .map_flags = m->shared ? MAP_SHARED : MAP_PRIVATE,
                      .stack = stack,
                      .name = m->name};
    rec_out_push(&st->out, &ev);
    if ((m->prot & PROT_EXEC) && m->name && m->name[0] == '/') {
        mt_rs_event mod = {.type = RS_EV_MODULE,
                           .pid = (uint32_t)p->pid,
                           .time_ns = time,
                           .addr = m->start,
                           .len = m->end - m->start,
                           .pgoff = m->pgoff,
                           .name = m->name};
        rec_out_push(&st->out, &mod);
    }
}

/* Opens what describes the process's memory now (after exec: the new mm)
 * and queues its PROCESS record and mappings. */
static int enter(rec_state *st, rec_proc *p, pid_t ppid, int reason, uint64_t time, const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)p->pid);
    if (p->pagemap >= 0)
        close(p->pagemap);
    /* A process that is already gone (we read its records late) is still
     * recorded: its faults without frames, its mappings from MMAP2. */
    p->pagemap = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/exe", (int)p->pid);
    ssize_t n = readlink(path, p->exe, sizeof p->exe - 1);
    p->exe[n > 0 ? n : 0] = '\0';
    /* Where the brk heap starts (fixed at exec): the kernel's MMAP2 record
     * of a brk names it "//anon". */
    p->start_brk = mt_proc_stat_field(p->pid, 47);
    rec_maps_free(&p->maps);
    rec_proc_read_maps(p);
    p->waiting_exec = false;
    mt_rs_event ev = {.type = RS_EV_PROCESS,
                      .pid = (uint32_t)p->pid,
                      .ppid = (uint32_t)ppid,
                      .time_ns = time,
                      .reason = (uint8_t)reason,
                      .name = name};
    rec_out_push(&st->out, &ev);
    for (size_t i = 0; i < p->maps.n; i++)
        if (!p->maps.v[i].skip)
            push_map(st, p, &p->maps.v[i], time, 0);
    return 0;
}

static void read_comm(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
}

rec_proc *rec_proc_add(rec_state *st, pid_t pid, pid_t ppid, int reason, uint64_t time, const char *name,
                       uint32_t ref_flags, bool waiting, const rec_batch *rest, size_t from)
{
    if (st->nprocs == st->capprocs) {
        size_t nc = st->capprocs ? st->capprocs * 2 : 16;
        rec_proc **nv = realloc(st->procs, nc * sizeof *nv);
        if (!nv)
            return NULL;
        st->procs = nv;
        st->capprocs = nc;
    }
    rec_proc *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->pid = pid;
    p->ppid = ppid ? ppid : (pid_t)mt_proc_stat_field(pid, 4);
    p->pagemap = -1;
    p->waiting_exec = waiting;
    st->procs[st->nprocs++] = p;
    if (waiting)
        return p;
    char comm[64];
    if (!name) {
        read_comm(pid, comm, sizeof comm);
        name = comm;
    }
    if (enter(st, p, p->ppid, reason, time, name) < 0) {
        proc_remove(st, p);
        return NULL;
    }
    if (ref_flags)
        rec_scan_entry(st, p, time, ref_flags, rest, from, NULL);
    return p;
}

static void on_fork(rec_state *st, rec_item *it, const rec_batch *b, size_t index)
{
    if (rec_proc_find(st, (pid_t)it->pid))
        return;
    rec_proc *parent = rec_proc_find(st, (pid_t)it->ppid);
    if (!parent)
        return; /* not a process of the recording */
    char comm[64];
    read_comm((pid_t)it->pid, comm, sizeof comm);
    rec_proc *p = rec_proc_add(st, (pid_t)it->pid, (pid_t)it->ppid, RS_PROC_FORK, it->time, comm, 0, false, b,
                               index + 1);
    if (!p)
        return;
    /* The parent's private pages are shared with the child now: whichever
     * writes one first gets a copy of its own (a new frame), a new
     * reference. */
    for (size_t i = 0; i < parent->pages.cap; i++)
        if (parent->pages.v[i].page && !(parent->pages.v[i].flags & REC_PG_FILE))
            parent->pages.v[i].flags |= REC_PG_INHERITED;
    /* The agent's word on ranges holds in the child's copy too. */
    if (parent->nranges && range_reserve(p, parent->nranges) == 0) {
        memcpy(p->ranges, parent->ranges, parent->nranges * sizeof *p->ranges);
        p->nranges = parent->nranges;
    }
    rec_scan_entry(st, p, it->time, RS_REF_INHERITED, b, index + 1, parent);
}

static void on_exit_(rec_state *st, rec_item *it)
{
    rec_proc *p = rec_proc_find(st, (pid_t)it->pid);
    if (!p)
        return;
    if (!p->waiting_exec) {
        mt_rs_event ev = {.type = RS_EV_EXIT, .pid = (uint32_t)p->pid, .time_ns = it->time};
        rec_out_push(&st->out, &ev);
    }
    proc_remove(st, p);
}

void rec_proc_gone(rec_state *st, rec_proc *p, uint64_t time)
{
    mt_rs_event ev = {.type = RS_EV_EXIT, .pid = (uint32_t)p->pid, .time_ns = time};
    rec_out_push(&st->out, &ev);
    proc_remove(st, p);
}

static void on_exec(rec_state *st, rec_item *it)
{
    rec_proc *p = rec_proc_find(st, (pid_t)it->pid);
    if (!p)
        return;
    int reason = p->waiting_exec ? RS_PROC_START : RS_PROC_EXEC;
    /* The old image's pages went with its mm: the report lets them go at
     * this record, as at an exit. */
    rec_pages_free(&p->pages);
    p->nfaults = 0;
    p->nranges = 0;
    if (enter(st, p, p->ppid, reason, it->time, it->name) < 0)
        proc_remove(st, p);
}

static void on_mmap(rec_state *st, rec_item *it)
{
    rec_proc *p = rec_proc_find(st, (pid_t)it->pid);
    if (!p || p->waiting_exec || !it->len)
        return;
    rec_map m = {.start = it->addr,
                 .end = it->addr + it->len,
                 .pgoff = it->pgoff,
                 .ino = it->ino,
                 .dev = it->dev,
                 .prot = it->prot,
                 .shared = (it->flags & MAP_SHARED) != 0,
                 .name = it->name && it->name[0] && strcmp(it->name, "//anon") != 0 ? it->name : NULL};
    if (m.name && strncmp(m.name, "//anon", 6) == 0)
        m.name = NULL;
    if (!m.name && !m.shared && p->start_brk && m.start == p->start_brk)
        m.name = (char *)"[heap]";
    /* A new mapping ends what the agent said of the old one at these
     * addresses (glibc unmaps cached thread stacks itself, unseen); the
     * agent's word on the new one comes after this record. */
    range_remove(p, m.start, m.end);
    if (rec_maps_insert(&p->maps, &m) < 0)
        return;
    rec_maps_categorize(&p->maps, p->exe);
    rec_map *in = rec_maps_find(&p->maps, m.start);
    if (in && !in->skip)
        push_map(st, p, in, it->time, 0);
}

/* The program's clock and the kernel's sample clock may disagree by a few
 * microseconds, so a page touched right after its mmap can come first:
 * references of the range queued just before the message get its
 * allocation stack too. */
#define ALLOC_STACK_SLACK_NS 1000000ull

static void give_alloc_stack(rec_state *st, const rec_proc *p, uint64_t start, uint64_t end, uint32_t stack,
                             uint64_t time)
{
    for (size_t i = st->out.n; i-- > 0;) {
        mt_rs_event *e = &st->out.v[i];
        if (e->time_ns + ALLOC_STACK_SLACK_NS < time)
            break;
        if (e->type == RS_EV_REF && e->pid == (uint32_t)p->pid && !e->alloc_stack && e->addr >= start &&
            e->addr < end)
            e->alloc_stack = stack;
    }
}

static void on_agent(rec_state *st, rec_item *it)
{
    const mt_rs_agent_msg *m = it->ag;
    rec_proc *p = rec_proc_find(st, (pid_t)m->pid);
    if (!p || p->waiting_exec)
        return;
    uint64_t start = m->addr & ~(PAGE_SIZE_ - 1),
             end = (m->addr + m->len + PAGE_SIZE_ - 1) & ~(PAGE_SIZE_ - 1);
    switch (m->kind) {
    case MT_RS_AG_HELLO: {
        char v[32];
        snprintf(v, sizeof v, "pid %u", m->pid);
        mt_rs_event ev = {.type = RS_EV_META, .time_ns = it->time, .name = "agent", .value = v};
        rec_out_push(&st->out, &ev);
        return;
    }
    case MT_RS_AG_MAP:
    case MT_RS_AG_BLOCK:
    case MT_RS_AG_STACK: {
        uint32_t cat = m->kind == MT_RS_AG_BLOCK      ? RS_CAT_HEAP
                       : m->kind == MT_RS_AG_STACK    ? RS_CAT_USERSTACK
                       : m->category < RS_NCATEGORIES ? m->category
                                                      : RS_CAT_VIRTUALALLOC;
        uint32_t stack = rec_stacks_intern(st->stacks, &st->out, m->frames, m->nframes, it->time);
        range_set(p, start, end, cat, stack);
        give_alloc_stack(st, p, start, end, stack, it->time);
        rec_map rm = {.start = start, .end = end, .category = (uint8_t)cat, .prot = PROT_READ | PROT_WRITE};
        rec_map *in = rec_maps_find(&p->maps, start);
        if (in) {
            rm = *in;
            rm.start = start;
            rm.end = end;
            rm.category = (uint8_t)cat;
        }
        push_map(st, p, &rm, it->time, stack);
        return;
    }
    case MT_RS_AG_UNMAP:
        release_range(st, p, start, end, it->time, RS_REL_UNMAP);
        range_remove(p, start, end);
        rec_maps_remove(&p->maps, start, end);
        return;
    case MT_RS_AG_DISCARD: release_range(st, p, start, end, it->time, RS_REL_DISCARD); return;
    case MT_RS_AG_BLOCK_FREE:
        release_range(st, p, start, end, it->time, RS_REL_FREE);
        range_remove(p, start, end);
        return;
    case MT_RS_AG_TRIM: p->trim_pending = true; return; /* scanned after the batch: its faults first */
    default: return;
    }
}

void rec_proc_item(rec_state *st, rec_item *it, const rec_batch *b, size_t index)
{
    switch (it->kind) {
    case REC_IT_SAMPLE: on_sample(st, it); break;
    case REC_IT_FORK: on_fork(st, it, b, index); break;
    case REC_IT_EXIT: on_exit_(st, it); break;
    case REC_IT_EXEC: on_exec(st, it); break;
    case REC_IT_MMAP: on_mmap(st, it); break;
    case REC_IT_LOST: {
        mt_rs_event ev = {.type = RS_EV_LOST, .time_ns = it->time, .count = it->count};
        rec_out_push(&st->out, &ev);
        break;
    }
    case REC_IT_AGENT: on_agent(st, it); break;
    }
}
