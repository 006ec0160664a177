/* analyze_inherit.c — process trees: a forked child's trace (meta `began
 * fork`) starts with the blocks its parent had live at the fork. They are
 * found by replaying the parent's trace (meta `parent_trace`) up to the
 * fork (`fork_ns`, `fork_last_id`) with an analysis of its own, whose live
 * set becomes the child's first one; the frames of their stacks are kept
 * from the parent's file. A parent that is a forked child too has its own
 * inherited blocks first (a chain of forks, MAX_GENERATIONS back). A
 * parent's file that is missing, unreadable or
 * another process's is a one-line note, and the child is analysed as
 * before. Semantics: docs/trace-analysis.md, "Process trees". */
#include "analyze/analyze.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_BATCH 4096
#define MAX_GENERATIONS 16 /* a chain of forks followed back this far (and a cycle of files stops) */

static int inherit_at(struct analyzer *a, mt_trace_reader *child, unsigned generation);

/* A meta value as an unsigned decimal; false when absent or not one. */
static bool meta_u64(mt_trace_reader *r, const char *key, uint64_t *v)
{
    const char *s = mt_trace_meta(r, key);
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *v = x;
    return true;
}

static void note(struct analyze_inherited *in, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->note, sizeof in->note, fmt, ap);
    va_end(ap);
}

/* A trace named by another file's meta: only a regular file (a FIFO's
 * open would wait for a writer, a device is no trace). */
static int open_named(const char *path, mt_trace_reader **pr, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        return -EINVAL;
    }
    return mt_trace_open(path, MT_TRACE_PREFETCH, pr, err, errlen);
}

/* The parent's trace: where the child's meta says, else a file of the
 * same name beside the child's (the traces moved together). */
static int open_parent(const char *named, const char *child_file, mt_trace_reader **pr, char *err,
                       size_t errlen, char *opened, size_t openedlen)
{
    snprintf(opened, openedlen, "%s", named);
    int rc = open_named(named, pr, err, errlen);
    const char *base = strrchr(named, '/');
    const char *slash = child_file ? strrchr(child_file, '/') : NULL;
    if (rc == -ENOENT && base && child_file) {
        char beside[1024];
        int n = snprintf(beside, sizeof beside, "%.*s%s", slash ? (int)(slash - child_file) : 1,
                         slash ? child_file : ".", base);
        if (n > 0 && (size_t)n < sizeof beside && strcmp(beside, named) != 0) {
            char err2[MT_TRACE_ERR_MAX];
            if (open_named(beside, pr, err2, sizeof err2) == 0) {
                snprintf(opened, openedlen, "%s", beside);
                return 0;
            }
        }
    }
    return rc;
}

/* Is an allocation id after the parent's last one at the fork? Ids are a
 * 32-bit counter that wraps: compared as serial numbers. */
static bool after_fork_id(uint32_t id, uint32_t last)
{
    return (int32_t)(id - last) > 0;
}

/* The parent's events up to the fork into pa. *past: the file reaches the
 * fork (an event after it was seen, or the file is complete). 0, -ENOMEM,
 * or -EBADMSG when the file stops on an error before the fork (what was
 * before it is in pa). */
static int replay(struct analyzer *pa, mt_trace_reader *pr, uint64_t fork_t, uint32_t last_id, bool *past,
                  unsigned generation)
{
    mt_trace_event *buf = malloc(REPLAY_BATCH * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    int rc = 0, nrc;
    size_t n = 0;
    mt_trace_event ev;
    *past = false;
    /* the parent may be a forked child too: its own inherited blocks
     * first (its meta is read with its first event) */
    nrc = mt_trace_next(pr, &ev);
    if (generation + 1 < MAX_GENERATIONS && inherit_at(pa, pr, generation + 1) < 0)
        rc = -ENOMEM;
    for (; rc == 0 && nrc > 0; nrc = mt_trace_next(pr, &ev)) {
        if (ev.time_ns > fork_t) {
            *past = true;
            break;
        }
        /* in the fork's own time unit: an allocation after the last id
         * the child inherited is the parent's own, after the fork */
        if ((ev.type == MT_TRACE_ALLOC || ev.type == MT_TRACE_REALLOC) && after_fork_id(ev.id, last_id))
            continue;
        buf[n++] = ev;
        if (n == REPLAY_BATCH) {
            if ((rc = analyze_events(pa, buf, n)) < 0)
                break;
            n = 0;
        }
    }
    if (rc == 0 && n)
        rc = analyze_events(pa, buf, n);
    free(buf);
    if (rc == 0 && nrc < 0)
        rc = -EBADMSG;
    /* The parent was writing this file at the fork (it named it to the
     * child there): finished whole, it reaches the fork even when its
     * last event came before it. */
    if (rc == 0 && nrc == 0 && mt_trace_complete(pr))
        *past = true;
    return rc;
}

static int by_id(const void *a, const void *b)
{
    uint32_t x = ((const mt_trace_stack *)a)->id, y = ((const mt_trace_stack *)b)->id;
    return (x > y) - (x < y);
}

/* The frames of the stacks the inherited blocks use that the child's
 * file may not define, copied from the parent's definitions, by id. */
static int keep_frames(struct analyze_result *res, const struct analyze_result *pres, mt_trace_reader *pr)
{
    mt_trace_stack *v = calloc(pres->nstacks + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < pres->nstacks; i++) {
        const struct analyze_stack *s = &pres->stacks[i];
        const mt_trace_stack *st = s->live_count && s->id ? analyze_stack_frames(pres, pr, s->id) : NULL;
        if (!st || !st->nframes)
            continue;
        uint64_t *f = malloc(st->nframes * sizeof *f);
        if (!f) {
            for (size_t k = 0; k < n; k++)
                free((void *)v[k].frames);
            free(v);
            return -ENOMEM;
        }
        memcpy(f, st->frames, st->nframes * sizeof *f);
        v[n++] = (mt_trace_stack){.id = s->id, .category = st->category, .nframes = st->nframes, .frames = f};
    }
    /* Sorted, then each id once (a stack may be several of the parent's
     * entries): n log n, not a scan per stack. */
    qsort(v, n, sizeof *v, by_id);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept && v[kept - 1].id == v[i].id) {
            free((void *)v[i].frames);
            continue;
        }
        v[kept++] = v[i];
    }
    res->parent_stacks = v;
    res->nparent_stacks = kept;
    return 0;
}

/* The parent's modules, copied: the inherited stacks' frames lie in them. */
static int keep_modules(struct analyze_result *res, const struct analyze_result *pres, mt_trace_reader *pr)
{
    size_t n;
    const mt_trace_module **ms = analyze_modules(pres, pr, &n); /* its parent's too */
    mt_trace_module *v = ms ? calloc(n + 1, sizeof *v) : NULL;
    if (!v) {
        free(ms);
        return -ENOMEM;
    }
    res->parent_modules = v;
    for (size_t i = 0; i < n; i++) {
        const mt_trace_module *m = ms[i];
        mt_trace_module *c = &v[res->nparent_modules++];
        *c = (mt_trace_module){.start = m->start, .end = m->end, .bias = m->bias};
        if (!(c->path = strdup(m->path ? m->path : ""))) {
            free(ms);
            return -ENOMEM;
        }
        if (m->build_id && m->build_id_len) {
            unsigned char *b = malloc(m->build_id_len);
            if (!b) {
                free(ms);
                return -ENOMEM;
            }
            memcpy(b, m->build_id, m->build_id_len);
            c->build_id = b;
            c->build_id_len = m->build_id_len;
        }
    }
    free(ms);
    return 0;
}

const mt_trace_module **analyze_modules(const struct analyze_result *res, mt_trace_reader *r, size_t *n)
{
    size_t own = r ? mt_trace_module_count(r) : 0, inherited = res ? res->nparent_modules : 0;
    const mt_trace_module **v = calloc(own + inherited + 1, sizeof *v);
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < own; i++)
        if ((v[*n] = mt_trace_module_get(r, i)))
            (*n)++;
    for (size_t i = 0; i < inherited; i++) {
        const mt_trace_module *m = &res->parent_modules[i];
        bool known = false;
        for (size_t k = 0; k < own && !known; k++)
            known = v[k]->start == m->start;
        if (!known)
            v[(*n)++] = m;
    }
    return v;
}

int analyze_inherit(struct analyzer *a, mt_trace_reader *child)
{
    return inherit_at(a, child, 0);
}

static int inherit_at(struct analyzer *a, mt_trace_reader *child, unsigned generation)
{
    struct analyze_result *res = analyze_result_edit(a);
    struct analyze_inherited *in = &res->inherited;
    const char *began = mt_trace_meta(child, "began");
    if (!began || strcmp(began, "fork") != 0)
        return 0;
    in->state = ANALYZE_INHERIT_FAILED;
    bool has_ppid = meta_u64(child, "ppid", &in->ppid);
    const char *named = mt_trace_meta(child, "parent_trace");
    uint64_t fork_ns, last_id;
    if (!named || !*named || !meta_u64(child, "fork_ns", &fork_ns) ||
        !meta_u64(child, "fork_last_id", &last_id)) {
        note(in, "the trace began at a fork but does not say where its parent's trace is (meta parent_trace, "
                 "fork_ns, fork_last_id): blocks inherited at the fork are unknown");
        return 0;
    }
    snprintf(in->parent, sizeof in->parent, "%s", named);
    mt_trace_reader *pr = NULL;
    char err[MT_TRACE_ERR_MAX] = "";
    if (open_parent(named, analyze_file_name(a), &pr, err, sizeof err, in->parent, sizeof in->parent) < 0) {
        note(in, "the parent's trace cannot be read (%s): blocks inherited at the fork are unknown", err);
        return 0;
    }
    const mt_trace_file_info *fi = mt_trace_info(pr);
    int rc = 0;
    if (!has_ppid)
        in->ppid = fi->pid; /* without the meta, the parent's header says */
    if (has_ppid && fi->pid != in->ppid) {
        note(in,
             "%s is pid %" PRIu32 "'s trace, not the parent's (pid %" PRIu64 "): blocks inherited at the "
             "fork are unknown",
             in->parent, fi->pid, in->ppid);
    } else if (fork_ns < fi->start_ns) {
        note(in, "the parent's trace %s began after the fork: blocks inherited at the fork are unknown",
             in->parent);
    } else {
        uint64_t unit = fi->time_unit_ns ? fi->time_unit_ns : 1;
        uint64_t fork_t = (fork_ns - fi->start_ns) / unit * unit; /* in the parent's time unit */
        struct analyzer *pa = analyze_new(2);
        if (pa)
            analyze_set_file(pa, in->parent);
        bool past = false;
        rc = pa ? replay(pa, pr, fork_t, (uint32_t)last_id, &past, generation) : -ENOMEM;
        if (rc == 0 || rc == -EBADMSG) {
            in->parent_short = !past;
            if (rc == -EBADMSG)
                note(in,
                     "the parent's trace stops before the fork (%s): blocks it allocated after that are "
                     "unknown",
                     mt_trace_error(pr));
            else if (!past)
                note(in,
                     "the parent's trace %s ends before the fork: blocks it allocated after its last "
                     "event are unknown",
                     in->parent);
            /* what the parent's trace did not know of, it could not hand on */
            in->parent_late = analyze_began_late(analyze_result(pa), pr);
            if (in->parent_late && !in->note[0])
                note(in,
                     "the parent's trace %s began after the parent had allocated (on demand, or at a fork "
                     "without all its own parent's blocks): blocks it held from before are unknown",
                     in->parent);
            rc = analyze_take_live(a, pa);
            if (rc == 0)
                rc = keep_frames(res, analyze_result(pa), pr);
            if (rc == 0)
                rc = keep_modules(res, analyze_result(pa), pr);
            if (rc == 0)
                in->state = ANALYZE_INHERIT_DONE;
        }
        analyze_free(pa);
    }
    mt_trace_close(pr);
    return rc < 0 ? -ENOMEM : 0;
}

const mt_trace_stack *analyze_stack_frames(const struct analyze_result *res, const mt_trace_reader *r,
                                           uint32_t id)
{
    const mt_trace_stack *st = r && id ? mt_trace_stack_get(r, id) : NULL;
    if (st || !id || !res->nparent_stacks)
        return st;
    mt_trace_stack key = {.id = id};
    return bsearch(&key, res->parent_stacks, res->nparent_stacks, sizeof key, by_id);
}
