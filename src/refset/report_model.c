/* report_model.c — page references from a recording's records, and the
 * system's outstanding set built from them (report_model.h).
 *
 * A REF makes one page reference per page; the (pid, page) -> reference
 * hash finds the reference a RELEASE ends and tells a duplicate REF (the
 * page is still outstanding in that pid) from a new one. rs_model_finish
 * sorts the references by physical page and sweeps each page's references
 * into maximal outstanding intervals (spans), so a page shared by several
 * processes counts once in the system view. */
#include "refset/report_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NO_REF UINT32_MAX

/* Open addressing, linear probing, deletion by backward shift. */
struct page_slot {
    uint64_t vpn;
    uint32_t pid;
    uint32_t ref; /* NO_REF: empty */
};

struct rs_page_map {
    struct page_slot *slots;
    size_t mask, used;
    /* pid -> current process index, the same way */
    uint32_t *pid_keys, *pid_vals;
    size_t pid_mask, pid_used;
};

static size_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

static size_t page_hash(uint32_t pid, uint64_t vpn)
{
    return hash64(vpn * 0x9e3779b97f4a7c15ULL ^ pid);
}

static int pages_grow(struct rs_page_map *p)
{
    size_t n = p->slots ? (p->mask + 1) * 2 : 1024;
    struct page_slot *s = malloc(n * sizeof *s);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        s[i].ref = NO_REF;
    for (size_t i = 0; p->slots && i <= p->mask; i++) {
        if (p->slots[i].ref == NO_REF)
            continue;
        size_t h = page_hash(p->slots[i].pid, p->slots[i].vpn) & (n - 1);
        while (s[h].ref != NO_REF)
            h = (h + 1) & (n - 1);
        s[h] = p->slots[i];
    }
    free(p->slots);
    p->slots = s;
    p->mask = n - 1;
    return 0;
}

static size_t page_find(const struct rs_page_map *p, uint32_t pid, uint64_t vpn)
{
    size_t h = page_hash(pid, vpn) & p->mask;
    while (p->slots[h].ref != NO_REF && (p->slots[h].pid != pid || p->slots[h].vpn != vpn))
        h = (h + 1) & p->mask;
    return h;
}

static int page_put(struct rs_page_map *p, uint32_t pid, uint64_t vpn, uint32_t ref)
{
    if (!p->slots || (p->used + 1) * 2 > p->mask + 1) { /* half full: misses (most releases) stay short */
        int rc = pages_grow(p);
        if (rc < 0)
            return rc;
    }
    size_t h = page_find(p, pid, vpn);
    if (p->slots[h].ref == NO_REF)
        p->used++;
    p->slots[h] = (struct page_slot){.vpn = vpn, .pid = pid, .ref = ref};
    return 0;
}

static void page_delete_at(struct rs_page_map *p, size_t h)
{
    p->slots[h].ref = NO_REF;
    p->used--;
    size_t j = h;
    for (;;) {
        j = (j + 1) & p->mask;
        if (p->slots[j].ref == NO_REF)
            return;
        size_t want = page_hash(p->slots[j].pid, p->slots[j].vpn) & p->mask;
        /* the entry at j may move to h when h lies cyclically in [want, j) */
        if (((j - want) & p->mask) >= ((j - h) & p->mask)) {
            p->slots[h] = p->slots[j];
            p->slots[j].ref = NO_REF;
            h = j;
        }
    }
}

/* The outstanding reference of (pid, vpn), or NO_REF; removed when take. */
static uint32_t page_get(struct rs_page_map *p, uint32_t pid, uint64_t vpn, bool take)
{
    if (!p->slots)
        return NO_REF;
    size_t h = page_find(p, pid, vpn);
    uint32_t ref = p->slots[h].ref;
    if (ref != NO_REF && take)
        page_delete_at(p, h);
    return ref;
}

static uint32_t pid_get(const struct rs_page_map *p, uint32_t pid)
{
    if (!p->pid_keys)
        return NO_REF;
    size_t h = hash64(pid) & p->pid_mask;
    while (p->pid_vals[h] != NO_REF) {
        if (p->pid_keys[h] == pid)
            return p->pid_vals[h];
        h = (h + 1) & p->pid_mask;
    }
    return NO_REF;
}

/* Sets pid -> proc (NO_REF: gone, kept as a tombstone value). */
static int pid_put(struct rs_page_map *p, uint32_t pid, uint32_t proc)
{
    if (!p->pid_keys || (p->pid_used + 1) * 2 > p->pid_mask + 1) {
        size_t n = p->pid_keys ? (p->pid_mask + 1) * 2 : 64;
        uint32_t *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            v[i] = NO_REF;
        for (size_t i = 0; p->pid_keys && i <= p->pid_mask; i++) {
            if (p->pid_vals[i] == NO_REF)
                continue;
            size_t h = hash64(p->pid_keys[i]) & (n - 1);
            while (v[h] != NO_REF)
                h = (h + 1) & (n - 1);
            k[h] = p->pid_keys[i];
            v[h] = p->pid_vals[i];
        }
        free(p->pid_keys);
        free(p->pid_vals);
        p->pid_keys = k;
        p->pid_vals = v;
        p->pid_mask = n - 1;
    }
    size_t h = hash64(pid) & p->pid_mask;
    while (p->pid_vals[h] != NO_REF && p->pid_keys[h] != pid)
        h = (h + 1) & p->pid_mask;
    if (p->pid_vals[h] == NO_REF)
        p->pid_used++;
    p->pid_keys[h] = pid;
    /* a gone pid keeps its slot with a value no process has */
    p->pid_vals[h] = proc == NO_REF ? NO_REF - 1 : proc;
    return 0;
}

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*v, n * elem);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = n;
    return 0;
}

int rs_model_init(struct rs_model *m, uint32_t page_size, uint32_t file_flags, uint64_t start_monotonic_ns)
{
    memset(m, 0, sizeof *m);
    m->page_size = page_size ? page_size : 4096;
    m->file_flags = file_flags;
    m->start_monotonic_ns = start_monotonic_ns;
    m->pages = calloc(1, sizeof *m->pages);
    return m->pages ? 0 : -ENOMEM;
}

static int new_proc(struct rs_model *m, uint32_t pid, uint32_t ppid, const char *name, size_t name_len)
{
    if (grow((void **)&m->procs, &m->procs_cap, m->nprocs + 1, sizeof *m->procs) < 0)
        return -ENOMEM;
    struct rs_proc *p = &m->procs[m->nprocs];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->ppid = ppid;
    p->alive = true;
    p->program = name ? strndup(name, name_len) : strdup("?");
    if (!p->program || pid_put(m->pages, pid, (uint32_t)m->nprocs) < 0) {
        free(p->program);
        return -ENOMEM;
    }
    m->nprocs++;
    return (int)(m->nprocs - 1);
}

/* The live process of pid, created (program unknown) when the recording
 * never said it started. -ENOMEM or its index. */
static int64_t proc_of(struct rs_model *m, uint32_t pid)
{
    uint32_t i = pid_get(m->pages, pid);
    if (i != NO_REF && i != NO_REF - 1)
        return i;
    return new_proc(m, pid, 0, NULL, 0);
}

/* The process let go of the page (it is no longer its reference: a new
 * one may follow). A page-cache page stays outstanding all the same, as
 * the seed says of closed files and unloaded images. */
static void release_ref(struct rs_pref *r, int64_t t)
{
    if (mt_rs_released_on_unmap(r->cat, r->flags))
        r->t_rel = t;
}

/* The process ends (exit, or exec into another program): its pages that
 * leave on unmap are released at t; all leave the page map. */
static void proc_end(struct rs_model *m, uint32_t pi, int64_t t)
{
    struct rs_proc *p = &m->procs[pi];
    for (size_t i = 0; i < p->nrefs; i++) {
        struct rs_pref *r = &m->refs[p->refs[i]];
        if (r->t_rel != RS_T_NEVER || page_get(m->pages, p->pid, r->addr / m->page_size, false) != p->refs[i])
            continue;
        page_get(m->pages, p->pid, r->addr / m->page_size, true);
        release_ref(r, t);
    }
    p->alive = false;
    free(p->refs); /* only the page map's lookups needed them */
    p->refs = NULL;
    p->nrefs = p->cap = 0;
}

static int add_ref(struct rs_model *m, const mt_rs_event *ev)
{
    int64_t pi = proc_of(m, ev->pid);
    if (pi < 0)
        return (int)pi;
    struct rs_proc *p = &m->procs[pi];
    int64_t t = (ev->flags & RS_REF_BEFORE) ? RS_T_BEFORE : (int64_t)ev->time_ns;
    for (uint64_t i = 0; i < ev->npages; i++) {
        uint64_t addr = ev->addr + i * m->page_size;
        if (page_get(m->pages, ev->pid, addr / m->page_size, false) != NO_REF) {
            m->duplicate_pages++;
            continue;
        }
        if (m->nrefs >= RS_MODEL_MAX_REFS)
            return -E2BIG;
        if (m->nrefs >= NO_REF - 1 ||
            grow((void **)&m->refs, &m->refs_cap, m->nrefs + 1, sizeof *m->refs) < 0 ||
            grow((void **)&p->refs, &p->cap, p->nrefs + 1, sizeof *p->refs) < 0)
            return -ENOMEM;
        struct rs_pref *r = &m->refs[m->nrefs];
        *r = (struct rs_pref){.addr = addr,
                              .t_ref = t,
                              .t_rel = RS_T_NEVER,
                              .proc = (uint32_t)pi,
                              .stack = ev->stack,
                              .alloc_stack = ev->alloc_stack,
                              .cat = ev->category < RS_NCATEGORIES ? ev->category : RS_CAT_VIRTUALALLOC,
                              .flags = ev->flags};
        if (ev->flags & RS_REF_ZERO_PAGE) {
            r->id_kind = RS_ID_ZERO;
        } else if ((m->file_flags & RS_FILE_PFN) && ev->pfn) {
            r->id_kind = RS_ID_PFN;
            r->id_a = ev->pfn + i;
        } else if ((ev->flags & RS_REF_FILE_PAGE) && ev->ino) {
            r->id_kind = RS_ID_FILE;
            r->dev = ev->dev;
            r->id_a = ev->ino;
            r->id_b = ev->pgoff / m->page_size + i;
        } else {
            r->id_kind = RS_ID_PROCESS;
            r->id_a = ev->pid;
            r->id_b = addr;
        }
        if (page_put(m->pages, ev->pid, addr / m->page_size, (uint32_t)m->nrefs) < 0)
            return -ENOMEM;
        p->refs[p->nrefs++] = (uint32_t)m->nrefs;
        m->nrefs++;
    }
    return 0;
}

static void add_release(struct rs_model *m, const mt_rs_event *ev)
{
    uint32_t pi = pid_get(m->pages, ev->pid);
    if (pi == NO_REF || pi == NO_REF - 1)
        return;
    struct rs_proc *p = &m->procs[pi];
    uint64_t first = ev->addr / m->page_size, n = ev->npages;
    if (n > p->nrefs) {
        /* A large range (a reservation): look at the process's references
         * instead, and drop from its list those no longer current, so each
         * reference is walked past once after it ended. */
        size_t k = 0;
        for (size_t i = 0; i < p->nrefs; i++) {
            uint32_t idx = p->refs[i];
            struct rs_pref *r = &m->refs[idx];
            uint64_t vpn = r->addr / m->page_size;
            if (r->t_rel != RS_T_NEVER || page_get(m->pages, ev->pid, vpn, false) != idx)
                continue; /* released or replaced already */
            if (vpn >= first && vpn - first < n) {
                page_get(m->pages, ev->pid, vpn, true);
                release_ref(r, (int64_t)ev->time_ns);
                continue;
            }
            p->refs[k++] = idx;
        }
        p->nrefs = k;
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint32_t ref = page_get(m->pages, ev->pid, first + i, true);
        if (ref != NO_REF)
            release_ref(&m->refs[ref], (int64_t)ev->time_ns);
    }
}

static int add_process(struct rs_model *m, const mt_rs_event *ev)
{
    uint32_t pi = pid_get(m->pages, ev->pid);
    bool known = pi != NO_REF && pi != NO_REF - 1;
    if (known && ev->reason != RS_PROC_EXEC) {
        /* said again (or first named after its pages came): take the name */
        if (ev->name && strcmp(m->procs[pi].program, "?") == 0) {
            char *s = strndup(ev->name, ev->name_len);
            if (!s)
                return -ENOMEM;
            free(m->procs[pi].program);
            m->procs[pi].program = s;
        }
        return 0;
    }
    uint32_t ppid = ev->ppid;
    if (known) {
        ppid = m->procs[pi].ppid;
        proc_end(m, pi, (int64_t)ev->time_ns);
    }
    int rc = new_proc(m, ev->pid, ppid, ev->name, ev->name ? ev->name_len : 0);
    return rc < 0 ? rc : 0;
}

static int add_stack(struct rs_model *m, const mt_rs_event *ev)
{
    if (rs_model_stack(m, ev->stack))
        return 0;
    if (grow((void **)&m->stacks, &m->stacks_cap, m->nstacks + 1, sizeof *m->stacks) < 0)
        return -ENOMEM;
    uint64_t *f = malloc((ev->nframes ? ev->nframes : 1) * sizeof *f);
    if (!f)
        return -ENOMEM;
    if (ev->nframes)
        memcpy(f, ev->frames, ev->nframes * sizeof *f);
    m->stacks[m->nstacks++] = (struct rs_stack){.id = ev->stack, .nframes = ev->nframes, .frames = f};
    return 0;
}

static int add_module(struct rs_model *m, const mt_rs_event *ev)
{
    if (grow((void **)&m->modules, &m->modules_cap, m->nmodules + 1, sizeof *m->modules) < 0)
        return -ENOMEM;
    struct rs_module *mod = &m->modules[m->nmodules];
    *mod = (struct rs_module){.pid = ev->pid, .start = ev->addr, .len = ev->len, .pgoff = ev->pgoff};
    mod->path = strndup(ev->name ? ev->name : "", ev->name ? ev->name_len : 0);
    mod->buildid = ev->value ? strdup(ev->value) : NULL;
    if (!mod->path || (ev->value && !mod->buildid)) {
        free(mod->path);
        free(mod->buildid);
        return -ENOMEM;
    }
    m->nmodules++;
    return 0;
}

static bool timed(unsigned type)
{
    return type != RS_EV_STACK && type != RS_EV_MODULE && type != RS_EV_META;
}

int rs_model_add(struct rs_model *m, const mt_rs_event *ev)
{
    m->records++;
    if (timed(ev->type) && (int64_t)ev->time_ns > m->end_ns)
        m->end_ns = (int64_t)ev->time_ns;
    switch (ev->type) {
    case RS_EV_PROCESS: return add_process(m, ev);
    case RS_EV_EXIT: {
        uint32_t pi = pid_get(m->pages, ev->pid);
        if (pi != NO_REF && pi != NO_REF - 1) {
            proc_end(m, pi, (int64_t)ev->time_ns);
            return pid_put(m->pages, ev->pid, NO_REF);
        }
        return 0;
    }
    case RS_EV_REF: return add_ref(m, ev);
    case RS_EV_RELEASE: add_release(m, ev); return 0;
    case RS_EV_STACK: return add_stack(m, ev);
    case RS_EV_MODULE: return add_module(m, ev);
    case RS_EV_LOST:
        m->lost_samples += ev->count;
        m->lost_records++;
        return 0;
    default: /* MAP, META: nothing the figures need */ return 0;
    }
}

const struct rs_stack *rs_model_stack(const struct rs_model *m, uint32_t id)
{
    /* stacks are few next to pages; a linear look-up only at definition
     * and printing time */
    for (size_t i = 0; i < m->nstacks; i++)
        if (m->stacks[i].id == id)
            return &m->stacks[i];
    return NULL;
}

/* --- the system view ------------------------------------------------------ */

static const struct rs_model *sort_model;

static int by_identity(const void *a, const void *b)
{
    const struct rs_pref *x = &sort_model->refs[*(const uint32_t *)a];
    const struct rs_pref *y = &sort_model->refs[*(const uint32_t *)b];
    if (x->id_kind != y->id_kind)
        return x->id_kind < y->id_kind ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->id_a != y->id_a)
        return x->id_a < y->id_a ? -1 : 1;
    if (x->id_b != y->id_b)
        return x->id_b < y->id_b ? -1 : 1;
    if (x->t_ref != y->t_ref)
        return x->t_ref < y->t_ref ? -1 : 1;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return i < j ? -1 : i > j;
}

static bool same_page(const struct rs_pref *x, const struct rs_pref *y)
{
    return x->id_kind == y->id_kind && x->dev == y->dev && x->id_a == y->id_a && x->id_b == y->id_b;
}

static int by_start(const void *a, const void *b)
{
    const struct rs_span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->ref < y->ref ? -1 : x->ref > y->ref;
}

struct step {
    int64_t t;
    int64_t delta;
};

static int by_time(const void *a, const void *b)
{
    const struct step *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The system graph's peak (first reached) and its value at the end. */
static int peak_and_steady(struct rs_model *m)
{
    struct step *s = malloc((2 * m->nspans + 1) * sizeof *s);
    if (!s)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->nspans; i++) {
        s[n++] = (struct step){m->spans[i].start, (int64_t)m->page_size};
        if (m->spans[i].end != RS_T_NEVER)
            s[n++] = (struct step){m->spans[i].end, -(int64_t)m->page_size};
    }
    if (n)
        qsort(s, n, sizeof *s, by_time);
    int64_t cur = 0;
    m->peak_bytes = 0;
    m->peak_ns = 0;
    for (size_t i = 0; i < n;) {
        int64_t t = s[i].t;
        while (i < n && s[i].t == t)
            cur += s[i++].delta;
        if ((uint64_t)cur > m->peak_bytes) {
            m->peak_bytes = (uint64_t)cur;
            m->peak_ns = t < 0 ? 0 : t;
        }
    }
    m->steady_bytes = (uint64_t)cur;
    free(s);
    return 0;
}

int rs_model_finish(struct rs_model *m)
{
    uint32_t *order = malloc((m->nrefs + 1) * sizeof *order);
    if (!order)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->nrefs; i++)
        if (m->refs[i].id_kind != RS_ID_ZERO)
            order[n++] = (uint32_t)i;
    sort_model = m;
    if (n)
        qsort(order, n, sizeof *order, by_identity);
    free(m->spans);
    m->spans = malloc((n + 1) * sizeof *m->spans);
    m->nspans = 0;
    if (!m->spans) {
        free(order);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n;) {
        const struct rs_pref *first = &m->refs[order[i]];
        struct rs_span cur = {first->t_ref, first->t_rel, order[i]};
        for (i++; i < n && same_page(first, &m->refs[order[i]]); i++) {
            const struct rs_pref *r = &m->refs[order[i]];
            if (r->t_ref <= cur.end) { /* overlaps or touches: one outstanding interval */
                if (r->t_rel > cur.end)
                    cur.end = r->t_rel;
                continue;
            }
            m->spans[m->nspans++] = cur;
            cur = (struct rs_span){r->t_ref, r->t_rel, order[i]};
        }
        m->spans[m->nspans++] = cur;
    }
    free(order);
    if (m->nspans)
        qsort(m->spans, m->nspans, sizeof *m->spans, by_start);
    int rc = peak_and_steady(m);
    m->finished = rc == 0;
    return rc;
}

void rs_model_free(struct rs_model *m)
{
    for (size_t i = 0; i < m->nprocs; i++) {
        free(m->procs[i].program);
        free(m->procs[i].refs);
    }
    for (size_t i = 0; i < m->nstacks; i++)
        free(m->stacks[i].frames);
    for (size_t i = 0; i < m->nmodules; i++) {
        free(m->modules[i].path);
        free(m->modules[i].buildid);
    }
    if (m->pages) {
        free(m->pages->slots);
        free(m->pages->pid_keys);
        free(m->pages->pid_vals);
        free(m->pages);
    }
    free(m->refs);
    free(m->procs);
    free(m->stacks);
    free(m->modules);
    free(m->spans);
    memset(m, 0, sizeof *m);
}
