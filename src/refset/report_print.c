/* report_print.c — the reference-set report's text and JSON
 * (report_print.h): the totals of the viewport, the rows the user asked
 * for, the system's peak and steady state, the notes on what the
 * recording could not see; stacks symbolized per process from the
 * recording's modules. */
#include "refset/report_print.h"

#include "common/json_out.h"
#include "common/units.h"
#include "report/detail.h"
#include "symbol/symbol.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const rs_category_names[RS_NCATEGORIES] = {
    "Heap", "VirtualAlloc", "UserStack", "PFMappedSection", "CopyOnWriteImage", "Image", "MapFile",
};
const char *const rs_class_names[2] = {"Dynamic", "File"};
static const char *const type_keys[RS_NTYPES] = {"impacting_bytes", "transient_bytes", "persistent_bytes"};

/* --- symbols: one symbolizer per process, from its MODULE records ---------- */

struct syms {
    uint32_t *pids;
    struct symbolizer **s;
    size_t n;
};

/* Whether the ELF file is position-dependent (ET_EXEC: addresses are its
 * own, bias 0). */
static bool fixed_address(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    Elf64_Ehdr eh;
    bool fixed = read(fd, &eh, sizeof eh) == (ssize_t)sizeof eh && eh.e_type == ET_EXEC;
    close(fd);
    return fixed;
}

static struct symbolizer *syms_of(struct syms *c, const struct rs_model *m, uint32_t pid)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->pids[i] == pid)
            return c->s[i];
    struct sym_module *mods = calloc(m->nmodules + 1, sizeof *mods);
    void *p1 = realloc(c->pids, (c->n + 1) * sizeof *c->pids);
    if (p1)
        c->pids = p1;
    void *p2 = realloc(c->s, (c->n + 1) * sizeof *c->s);
    if (p2)
        c->s = p2;
    if (!mods || !p1 || !p2) {
        free(mods);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->nmodules; i++) {
        const struct rs_module *mod = &m->modules[i];
        if (mod->pid != pid)
            continue;
        /* the load base: the start of the file's mapping at offset 0 */
        uint64_t base = mod->start - mod->pgoff;
        for (size_t k = 0; k < m->nmodules; k++)
            if (m->modules[k].pid == pid && m->modules[k].pgoff == 0 &&
                strcmp(m->modules[k].path, mod->path) == 0 && m->modules[k].start <= mod->start) {
                base = m->modules[k].start;
                break;
            }
        mods[n++] = (struct sym_module){.path = mod->path,
                                        .buildid = mod->buildid,
                                        .bias = fixed_address(mod->path) ? 0 : base,
                                        .start = mod->start,
                                        .end = mod->start + mod->len};
    }
    struct symbolizer *s = sym_open(mods, n);
    free(mods);
    c->pids[c->n] = pid;
    c->s[c->n++] = s;
    return s;
}

/* Says (on stderr) which modules could not be symbolized, and why. */
static void syms_close(struct syms *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (!c->s[i])
            continue;
        for (const char *w = sym_warnings(c->s[i]); *w;) {
            size_t len = strcspn(w, "\n");
            fprintf(stderr, "memtrail: warning: pid %" PRIu32 ": %.*s\n", c->pids[i], (int)len, w);
            w += len + (w[len] == '\n');
        }
        sym_close(c->s[i]);
    }
    free(c->pids);
    free(c->s);
}

/* --- text ------------------------------------------------------------------- */

static const char *sz(char *buf, int64_t b)
{
    return mt_size(buf, MT_UNITS_MAX, b);
}

static const char *secs(char *buf, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    snprintf(buf, MT_UNITS_MAX, "%" PRId64 ".%03" PRId64 "s", ns / 1000000000, ns % 1000000000 / 1000000);
    return buf;
}

static void text_header_row(FILE *out, const char *first)
{
    fprintf(out, "  %-28s %10s %11s %10s %10s %10s %10s %10s\n", first, "SIZE", "IMPACT", "AT T0", "AT T1",
            "IMPACTING", "TRANSIENT", "PERSISTENT");
}

static void text_row(FILE *out, const char *name, const struct rs_figs *f)
{
    char a[MT_UNITS_MAX], b[MT_UNITS_MAX], c[MT_UNITS_MAX], d[MT_UNITS_MAX], e[MT_UNITS_MAX], g[MT_UNITS_MAX],
        h[MT_UNITS_MAX];
    char imp[MT_UNITS_MAX + 1];
    snprintf(imp, sizeof imp, "%s%s", f->impact > 0 ? "+" : "", sz(b, f->impact));
    fprintf(out, "  %-28s %10s %11s %10s %10s %10s %10s %10s\n", name, sz(a, (int64_t)f->size), imp,
            sz(c, (int64_t)f->graph_start), sz(d, (int64_t)f->graph_end),
            sz(e, (int64_t)f->types[RS_IMPACTING]), sz(g, (int64_t)f->types[RS_TRANSIENT]),
            sz(h, (int64_t)f->types[RS_PERSISTENT]));
}

static bool figs_empty(const struct rs_figs *f)
{
    return !f->size && !f->graph_start && !f->graph_end;
}

static int by_row_impact(const void *a, const void *b, void *ctx)
{
    const struct rs_figs *rows = ctx;
    const struct rs_figs *x = &rows[*(const uint32_t *)a], *y = &rows[*(const uint32_t *)b];
    int64_t ax = x->impact < 0 ? -x->impact : x->impact, ay = y->impact < 0 ? -y->impact : y->impact;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int text_processes(FILE *out, const struct rs_model *m, const struct rs_view *v)
{
    uint32_t *order = malloc((m->nprocs + 1) * sizeof *order);
    if (!order)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->nprocs; i++)
        if (!figs_empty(&v->procs[i]))
            order[n++] = (uint32_t)i;
    qsort_r(order, n, sizeof *order, by_row_impact, v->procs);
    fputs("By process (Size: per process, a shared page in each; Impact: each page once, for its first)\n",
          out);
    text_header_row(out, "PID PROGRAM / CATEGORY");
    for (size_t k = 0; k < n; k++) {
        const struct rs_proc *p = &m->procs[order[k]];
        char name[64];
        const char *prog = strrchr(p->program, '/') ? strrchr(p->program, '/') + 1 : p->program;
        snprintf(name, sizeof name, "%" PRIu32 " %s", p->pid, prog);
        text_row(out, name, &v->procs[order[k]]);
        for (int c = 0; c < RS_NCATEGORIES; c++) {
            const struct rs_figs *f = &v->proc_cats[order[k] * RS_NCATEGORIES + c];
            if (figs_empty(f))
                continue;
            snprintf(name, sizeof name, "    %s", rs_category_names[c]);
            text_row(out, name, f);
        }
    }
    if (n == 0)
        fputs("  (no page referenced in the viewport)\n", out);
    free(order);
    return 0;
}

static void text_frames(FILE *out, struct symbolizer *s, const struct rs_stack *st)
{
    if (!st || !st->nframes) {
        fputs("      [stack not defined in the recording]\n", out);
        return;
    }
    for (uint32_t i = 0; i < st->nframes; i++) {
        struct sym_frame f[8];
        int k = s ? sym_lookup(s, st->frames[i], f, 8) : 0;
        if (k == 0) {
            fprintf(out, "      [0x%016" PRIx64 "] ??\n", st->frames[i]);
            continue;
        }
        for (int j = 0; j < k; j++)
            sym_print_frame(out, "      ", st->frames[i], &f[j]);
    }
}

static void text_stacks(FILE *out, const struct rs_model *m, const struct rs_stack_row *rows, size_t n,
                        int top, const char *what, struct syms *c)
{
    size_t shown = top > 0 && n > (size_t)top ? (size_t)top : n;
    fprintf(out, "Top %s stacks (%zu of %zu, by Impact Size, then Size)\n", what, shown, n);
    if (n == 0)
        fputs(m->nstacks ? "  (none in the viewport)\n"
                         : "  (the recording has no stacks: record with --stacks)\n",
              out);
    for (size_t i = 0; i < shown; i++) {
        char a[MT_UNITS_MAX], b[MT_UNITS_MAX], d[MT_UNITS_MAX], e[MT_UNITS_MAX], g[MT_UNITS_MAX];
        const struct rs_figs *f = &rows[i].f;
        fprintf(out,
                "  #%zu  Size %s, Impact Size %s%s (impacting %s, transient %s, persistent %s), pid %" PRIu32
                "\n",
                i + 1, sz(a, (int64_t)f->size), f->impact > 0 ? "+" : "", sz(b, f->impact),
                sz(d, (int64_t)f->types[RS_IMPACTING]), sz(e, (int64_t)f->types[RS_TRANSIENT]),
                sz(g, (int64_t)f->types[RS_PERSISTENT]), rows[i].pid);
        text_frames(out, syms_of(c, m, rows[i].pid), rs_model_stack(m, rows[i].id));
    }
}

static void text_notes(FILE *out, const struct rs_model *m, const struct rs_view *v)
{
    char a[MT_UNITS_MAX];
    if (v->total.zero_page)
        fprintf(out,
                "Zero page: %s of Size are reads of untouched anonymous memory (the shared zero page: no\n"
                "  memory of its own); they are in Size, not in Impact Size or the graph.\n",
                sz(a, (int64_t)v->total.zero_page));
    if (m->duplicate_pages)
        fprintf(out,
                "Duplicates: %" PRIu64 " page references of pages still outstanding in their process were\n"
                "  ignored (only the first reference of a page counts).\n",
                m->duplicate_pages);
    if (m->lost_samples)
        fprintf(out,
                "Lost: %" PRIu64 " page-fault samples were lost by the kernel (ring buffer full); the scans\n"
                "  still found those pages, at the scan's time and without their impacting stack.\n",
                m->lost_samples);
    if (m->file_flags & RS_FILE_ATTACH)
        fputs("Attached: pages present when recording began are counted as referenced before the scenario;\n"
              "  their re-references during it are not observable on this kernel (no page-idle tracking).\n",
              out);
    if (!(m->file_flags & RS_FILE_PFN))
        fputs("Sharing: no physical frame numbers (recorded without root): shared file pages are matched by\n"
              "  device, inode and offset, anonymous pages count once per process.\n",
              out);
}

int rs_print_text(FILE *out, const struct rs_model *m, const struct rs_view *v, const struct rs_print *p)
{
    char a[MT_UNITS_MAX], b[MT_UNITS_MAX], c[MT_UNITS_MAX], d[MT_UNITS_MAX];
    fprintf(out, "memtrail refset report: %s%s\n", p->file,
            p->complete ? "" : " (incomplete: read up to the damage)");
    fprintf(out, "Recording: %zu processes, %s long, page size %s\n", m->nprocs, secs(a, m->end_ns),
            sz(b, m->page_size));
    fprintf(out, "Viewport: %s to %s (--viewport T0:T1 in seconds since the start)\n\n", secs(a, v->t0),
            secs(b, v->t1));
    const struct rs_figs *t = &v->total;
    fprintf(out, "Totals\n");
    fprintf(out, "  Size                %s (impacting %s, transient %s, persistent %s)\n",
            sz(a, (int64_t)t->size), sz(b, (int64_t)t->types[RS_IMPACTING]),
            sz(c, (int64_t)t->types[RS_TRANSIENT]), sz(d, (int64_t)t->types[RS_PERSISTENT]));
    fprintf(out, "  Impact Size         %s%s (the system graph from T0 to T1)\n", t->impact > 0 ? "+" : "",
            sz(a, t->impact));
    fprintf(out, "  Graph at T0         %s\n", sz(a, (int64_t)t->graph_start));
    fprintf(out, "  Graph at T1         %s\n", sz(a, (int64_t)t->graph_end));
    fprintf(out, "  Peak                %s at %s (whole recording)\n", sz(a, (int64_t)m->peak_bytes),
            secs(b, m->peak_ns));
    fprintf(out, "  Steady state        %s (outstanding at the end)\n\n", sz(a, (int64_t)m->steady_bytes));
    int rc = 0;
    struct syms cache = {0};
    switch (p->by) {
    case RS_BY_PROCESS: rc = text_processes(out, m, v); break;
    case RS_BY_CATEGORY:
        fputs("By category\n", out);
        text_header_row(out, "CATEGORY (CLASS)");
        for (int k = 0; k < RS_NCATEGORIES; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s (%s)", rs_category_names[k],
                     rs_class_names[mt_rs_category_class(k)]);
            text_row(out, name, &v->cats[k]);
        }
        break;
    case RS_BY_CLASS:
        fputs("By class\n", out);
        text_header_row(out, "CLASS");
        text_row(out, "Dynamic", &v->classes[RS_CLASS_DYNAMIC]);
        text_row(out, "File", &v->classes[RS_CLASS_FILE]);
        break;
    case RS_BY_STACK:
        text_stacks(out, m, v->impacting, v->nimpacting, p->top, "impacting (the first touch's call chain)",
                    &cache);
        fputc('\n', out);
        text_stacks(out, m, v->allocation, v->nallocation, p->top, "allocation (the mapping's call chain)",
                    &cache);
        break;
    }
    syms_close(&cache);
    fputc('\n', out);
    text_notes(out, m, v);
    if (rc == 0 && ferror(out))
        rc = -EIO;
    return rc;
}

/* --- JSON ------------------------------------------------------------------- */

static void json_seconds(mt_json *j, const char *key, int64_t ns)
{
    char buf[40];
    if (ns < 0)
        ns = 0;
    int n = snprintf(buf, sizeof buf, "%" PRId64 ".%09" PRId64, ns / 1000000000, ns % 1000000000);
    while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
        buf[--n] = '\0';
    mt_json_key(j, key);
    mt_json_number(j, buf);
}

static void json_types(mt_json *j, const struct rs_figs *f)
{
    mt_json_key(j, "impact_types");
    mt_json_oneline(j);
    mt_json_object_begin(j);
    for (int k = 0; k < RS_NTYPES; k++)
        mt_json_ku64(j, type_keys[k], f->types[k]);
    mt_json_object_end(j);
}

static void json_figs(mt_json *j, const struct rs_figs *f)
{
    mt_json_ku64(j, "size_bytes", f->size);
    mt_json_ki64(j, "impact_size_bytes", f->impact);
    mt_json_ku64(j, "graph_start_bytes", f->graph_start);
    mt_json_ku64(j, "graph_end_bytes", f->graph_end);
    json_types(j, f);
    mt_json_ku64(j, "zero_page_bytes", f->zero_page);
}

static void json_category(mt_json *j, int c, const struct rs_figs *f)
{
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_kstr(j, "name", rs_category_names[c]);
    mt_json_kstr(j, "class", rs_class_names[mt_rs_category_class((unsigned)c)]);
    json_figs(j, f);
    mt_json_object_end(j);
}

static void json_stacks(mt_json *j, const struct rs_model *m, const struct rs_stack_row *rows, size_t n,
                        int top, struct syms *c)
{
    size_t shown = top > 0 && n > (size_t)top ? (size_t)top : n;
    mt_json_array_begin(j);
    for (size_t i = 0; i < shown; i++) {
        mt_json_object_begin(j);
        mt_json_ku64(j, "stack_id", rows[i].id);
        mt_json_ku64(j, "pid", rows[i].pid);
        json_figs(j, &rows[i].f);
        const struct rs_stack *st = rs_model_stack(m, rows[i].id);
        mt_json_key(j, "frames");
        detail_json_frames(j, syms_of(c, m, rows[i].pid), st ? st->frames : NULL, st ? st->nframes : 0);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
}

static void json_timeline(mt_json *j, const struct rs_model *m, const struct rs_view *v)
{
    mt_json_key(j, "timeline");
    mt_json_array_begin(j);
    for (size_t i = 0; i < v->npoints; i++) {
        const struct rs_point *pt = &v->timeline[i];
        mt_json_oneline(j);
        mt_json_object_begin(j);
        json_seconds(j, "time_s", pt->time_ns);
        mt_json_ki64(j, "time_ns", pt->time_ns < 0 ? 0 : pt->time_ns);
        mt_json_ku64(j, "bytes", pt->bytes);
        mt_json_key(j, "by_process");
        mt_json_array_begin(j);
        for (size_t k = 0; k < m->nprocs; k++)
            mt_json_u64(j, pt->by_proc[k]);
        mt_json_array_end(j);
        mt_json_key(j, "by_category");
        mt_json_object_begin(j);
        for (int c = 0; c < RS_NCATEGORIES; c++)
            mt_json_ku64(j, rs_category_names[c], pt->by_cat[c]);
        mt_json_object_end(j);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
}

int rs_print_json(FILE *out, const struct rs_model *m, const struct rs_view *v, const struct rs_print *p)
{
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    mt_json_kstr(&j, "file", p->file);
    mt_json_kbool(&j, "complete", p->complete);
    mt_json_kstr(&j, "stopped", p->stop);
    mt_json_ku64(&j, "start_monotonic_ns", m->start_monotonic_ns);
    mt_json_ku64(&j, "page_size_bytes", m->page_size);
    mt_json_kbool(&j, "physical_pages", (m->file_flags & RS_FILE_PFN) != 0);
    mt_json_kbool(&j, "agent", (m->file_flags & RS_FILE_AGENT) != 0);
    mt_json_kbool(&j, "attached", (m->file_flags & RS_FILE_ATTACH) != 0);
    json_seconds(&j, "duration_s", m->end_ns);
    mt_json_key(&j, "viewport");
    mt_json_oneline(&j);
    mt_json_object_begin(&j);
    json_seconds(&j, "start_s", v->t0);
    json_seconds(&j, "end_s", v->t1);
    mt_json_ki64(&j, "start_ns", v->t0);
    mt_json_ki64(&j, "end_ns", v->t1);
    mt_json_object_end(&j);
    json_figs(&j, &v->total);
    mt_json_ku64(&j, "duplicate_references", m->duplicate_pages);
    mt_json_ku64(&j, "lost_samples", m->lost_samples);
    mt_json_key(&j, "peak");
    mt_json_oneline(&j);
    mt_json_object_begin(&j);
    mt_json_ku64(&j, "bytes", m->peak_bytes);
    json_seconds(&j, "time_s", m->peak_ns);
    mt_json_ki64(&j, "time_ns", m->peak_ns);
    mt_json_object_end(&j);
    mt_json_ku64(&j, "steady_state_bytes", m->steady_bytes);

    mt_json_key(&j, "processes");
    mt_json_array_begin(&j);
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct rs_proc *pr = &m->procs[i];
        mt_json_object_begin(&j);
        mt_json_ku64(&j, "pid", pr->pid);
        mt_json_ku64(&j, "ppid", pr->ppid);
        mt_json_kstr(&j, "program", pr->program);
        json_figs(&j, &v->procs[i]);
        mt_json_key(&j, "categories");
        mt_json_array_begin(&j);
        for (int c = 0; c < RS_NCATEGORIES; c++)
            json_category(&j, c, &v->proc_cats[i * RS_NCATEGORIES + c]);
        mt_json_array_end(&j);
        mt_json_object_end(&j);
    }
    mt_json_array_end(&j);

    mt_json_key(&j, "categories");
    mt_json_array_begin(&j);
    for (int c = 0; c < RS_NCATEGORIES; c++)
        json_category(&j, c, &v->cats[c]);
    mt_json_array_end(&j);
    mt_json_key(&j, "classes");
    mt_json_array_begin(&j);
    for (int c = 0; c < 2; c++) {
        mt_json_oneline(&j);
        mt_json_object_begin(&j);
        mt_json_kstr(&j, "name", rs_class_names[c]);
        json_figs(&j, &v->classes[c]);
        mt_json_object_end(&j);
    }
    mt_json_array_end(&j);

    struct syms cache = {0};
    mt_json_key(&j, "stacks");
    mt_json_object_begin(&j);
    mt_json_key(&j, "impacting");
    json_stacks(&j, m, v->impacting, v->nimpacting, p->top, &cache);
    mt_json_key(&j, "allocation");
    json_stacks(&j, m, v->allocation, v->nallocation, p->top, &cache);
    mt_json_object_end(&j);
    syms_close(&cache);

    json_timeline(&j, m, v);
    int rc = rs_print_page_data(&j, m);
    int jrc = mt_json_document_end(&j);
    return rc < 0 ? rc : jrc;
}
