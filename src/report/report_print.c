/* report_print.c — the printers of a summary report: the NMT-like text
 * summary (`memtrail report summary`) and the small helpers the printers
 * share: scaling with NMT's rounding, shell quoting. The JSON document is
 * report_json.c's. */
#include "report/report.h"
#include "common/units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int report_scale_parse(const char *s, struct report_scale *out)
{
    static const struct report_scale scales[] = {
        {"KB", 1024},
        {"MB", 1024 * 1024},
        {"GB", 1024 * 1024 * 1024},
    };
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        if (strcasecmp(s, scales[i].unit) == 0) {
            *out = scales[i];
            return 0;
        }
    }
    return -EINVAL;
}

/* Nearest, halves away from zero, computed without overflow near INT64_MAX. */
int64_t report_scaled(int64_t bytes, int64_t scale)
{
    int64_t q = bytes / scale, r = bytes % scale;
    if (r >= 0 ? r >= scale - r : -r >= scale + r)
        q += r >= 0 ? 1 : -1;
    return q;
}

const char *report_size(int64_t bytes, const struct report_scale *scale)
{
    static _Thread_local char buf[16][MT_UNITS_MAX];
    static _Thread_local unsigned next;
    char *b = buf[next++ % 16];
    return mt_size_in(b, MT_UNITS_MAX, bytes, (uint64_t)scale->bytes, scale->unit);
}

int report_grow(void *items, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *old, *grown;
    memcpy(&old, items, sizeof old);
    if (n > SIZE_MAX / size || !(grown = realloc(old, n * size)))
        return -ENOMEM;
    memcpy(items, &grown, sizeof grown);
    *cap = n;
    return 0;
}

int64_t report_add(int64_t a, int64_t b)
{
    int64_t s;
    if (__builtin_add_overflow(a, b, &s))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return s;
}

int64_t report_sub(int64_t a, int64_t b)
{
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return d;
}

void report_vm_total(const struct report *r, struct report_vm *sum)
{
    memset(sum, 0, sizeof *sum);
    for (size_t i = 0; i < r->ncategories; i++) {
        const struct report_vm *v = &r->categories[i].vm;
        sum->reserved = report_add(sum->reserved, v->reserved);
        sum->committed = report_add(sum->committed, v->committed);
        sum->resident = report_add(sum->resident, v->resident);
        sum->mappings = report_add(sum->mappings, v->mappings);
    }
}

int64_t report_explained(const struct report *r)
{
    int64_t sum = 0;
    for (size_t i = 0; i < r->ncategories; i++)
        if (strcmp(r->categories[i].name, "other") != 0)
            sum = report_add(sum, r->categories[i].vm.resident);
    return sum;
}

/* --- shell quoting, for command lines shown to a human ------------------ */

static bool shell_safe(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-", *s))
            return false;
    return true;
}

void report_shell_quote(FILE *out, const char *s)
{
    if (shell_safe(s)) {
        fputs(s, out);
        return;
    }
    bool control = false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        control |= *p < 0x20 || *p == 0x7f;
    if (!control) { /* '...' with each ' written as '\'' */
        fputc('\'', out);
        for (; *s; s++) {
            if (*s == '\'')
                fputs("'\\''", out);
            else
                fputc(*s, out);
        }
        fputc('\'', out);
        return;
    }
    fputs("$'", out); /* bash/zsh/ksh ANSI-C quoting, so newlines stay visible */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p == '\\' || *p == '\'')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('\'', out);
}

void report_print_cmdline(FILE *out, const struct report *r)
{
    for (size_t i = 0; i < r->argc; i++) {
        if (i)
            fputc(' ', out);
        report_shell_quote(out, r->argv[i]);
    }
}

/* --- text ----------------------------------------------------------------- */

/* NMT's layout: "-" and the name right-aligned in 26 columns, details
 * continued under the opening parenthesis. */
#define NAME_COLUMN 26
#define CONTINUE "                            " /* NAME_COLUMN + 2 spaces */

bool report_category_is(const struct report_category *c, const char *kind)
{
    return c->kind && strcmp(c->kind, kind) == 0;
}

/* What the text shows first: the address space and the heap blocks
 * together, saturating (an order, not a figure anyone reads). */
static int64_t footprint(const struct report_category *c)
{
    return report_add(c->vm.committed, c->n.live_bytes);
}

/* Committed + live bytes descending, then name: in a report without VM
 * fields that is live bytes descending, as before they existed. */
static int by_footprint_desc(const void *a, const void *b)
{
    const struct report_category *x = *(const struct report_category *const *)a;
    const struct report_category *y = *(const struct report_category *const *)b;
    int64_t fx = footprint(x), fy = footprint(y);
    if (fx != fy)
        return fx > fy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void print_category(FILE *out, const struct report_category *c, const struct report_scale *sc)
{
    const char *live = report_size(c->n.live_bytes, sc);
    if (c->has_vm)
        fprintf(out, "-%*s (reserved=%s, committed=%s, resident=%s, mappings=%" PRId64 ")\n", NAME_COLUMN,
                c->name, report_size(c->vm.reserved, sc), report_size(c->vm.committed, sc),
                report_size(c->vm.resident, sc), c->vm.mappings);
    else /* a report without VM fields: reserved = committed = live bytes */
        fprintf(out, "-%*s (reserved=%s, committed=%s)\n", NAME_COLUMN, c->name, live, live);
    if (report_category_is(c, "overhead"))
        fputs(CONTINUE
              "(memtrail's own overhead: block headers, canaries, alignment padding, its counters)\n",
              out);
    if (report_category_is(c, "vm")) { /* address space only: no heap blocks to show */
        fputc('\n', out);
        return;
    }
    fprintf(out, CONTINUE "(malloc=%s #%" PRId64 ") (peak=%s)\n", live, c->n.live_count,
            report_size(c->n.peak_bytes, sc));
    fprintf(out, CONTINUE "(allocs=%" PRId64 " frees=%" PRId64, c->n.allocs, c->n.frees);
    if (c->n.reallocs)
        fprintf(out, " reallocs=%" PRId64, c->n.reallocs);
    fputs(")\n\n", out);
}

void report_print_reason(FILE *out, const char *reason)
{
    if (strcmp(reason, "exit") == 0)
        fputs("written at exit", out);
    else if (strcmp(reason, "api") == 0)
        fputs("written by mt_report_write()", out);
    else if (strcmp(reason, "exec") == 0)
        fputs("written at exec", out);
    else if (strcmp(reason, "query") == 0)
        fputs("read over the control socket", out);
    else if (strcmp(reason, "signal") == 0)
        fputs("written on a fatal signal", out);
    else if (strncmp(reason, "signal ", 7) == 0)
        fprintf(out, "written on fatal signal %s", reason + 7);
    else
        fprintf(out, "reason %s", reason);
}

void report_print_who(FILE *out, const struct report *r)
{
    if (r->has & REPORT_HAS_PID)
        fprintf(out, "pid %" PRId64, r->pid);
    else
        fputs("pid unknown", out);
    if (r->argc) {
        fputs(", ", out);
        report_print_cmdline(out, r);
    } else if (r->exe) {
        fprintf(out, ", %s", r->exe);
    }
}

static void print_title(FILE *out, const struct report *r)
{
    fputs("memtrail native memory summary: ", out);
    report_print_who(out, r);
    fputc('\n', out);

    /* One line of context: what ran, how it was tracked, why it reported. */
    const char *sep = "(";
    if (r->exe) {
        fprintf(out, "%sexe %s", sep, r->exe);
        sep = ", ";
    }
    if (r->has & REPORT_HAS_PPID) {
        fprintf(out, "%sparent %" PRId64, sep, r->ppid);
        sep = ", ";
    }
    if (r->mode) {
        fprintf(out, "%smode %s", sep, r->mode);
        sep = ", ";
    }
    if (r->reason) {
        fputs(sep, out);
        report_print_reason(out, r->reason);
        sep = ", ";
    }
    if ((r->has & REPORT_HAS_START) && (r->has & REPORT_HAS_END_NS) && r->end_ns >= r->start_ns) {
        char d[MT_UNITS_MAX];
        fprintf(out, "%safter %s", sep,
                mt_duration(d, sizeof d, (uint64_t)r->end_ns - (uint64_t)r->start_ns));
        sep = ", ";
    }
    if (sep[0] == ',')
        fputs(")\n", out);
    fputc('\n', out);
}

/* The kernel's view, and how much of it the categories account for. */
static void print_process(FILE *out, const struct report *r, const struct report_scale *sc)
{
    const struct report_process *p = &r->process;
    fprintf(out,
            "Process: rss=%s, peak rss=%s "
            "(reserved=%s, committed=%s, resident=%s)\n",
            report_size(p->rss_bytes, sc), report_size(p->peak_rss_bytes, sc), report_size(p->reserved, sc),
            report_size(p->committed, sc), report_size(p->resident, sc));
    if (p->rss_bytes > 0) {
        int64_t explained = report_explained(r);
        fprintf(out, "         the categories explain %s of it (%.1f%%; 'other' not counted)\n\n",
                report_size(explained, sc), 100.0 * (double)explained / (double)p->rss_bytes);
    } else {
        fputs("         RSS not measured (/proc was not readable when the report was written)\n\n", out);
    }
}

int report_print_text(FILE *out, const struct report *r, const struct report_scale *sc)
{
    print_title(out, r);

    bool vm = r->has & REPORT_HAS_VM;
    if (vm) {
        struct report_vm sum;
        report_vm_total(r, &sum);
        fprintf(out, "Total: reserved=%s, committed=%s, resident=%s\n", report_size(sum.reserved, sc),
                report_size(sum.committed, sc), report_size(sum.resident, sc));
    }
    /* The heap blocks: the whole total without VM data, under it with. */
    const char *label = vm ? "       malloc:" : "Total:";
    if (r->has & REPORT_HAS_TOTAL)
        fprintf(out,
                "%s live=%s (%" PRId64 " blocks), peak=%s, "
                "allocs=%" PRId64 ", frees=%" PRId64 ", reallocs=%" PRId64 "\n\n",
                label, report_size(r->total.live_bytes, sc), r->total.live_count,
                report_size(r->total.peak_bytes, sc), r->total.allocs, r->total.frees, r->total.reallocs);
    else
        fprintf(out, "%s not in the report (the file was cut short before it)\n\n", label);

    const struct report_category **order = malloc((r->ncategories + 1) * sizeof *order);
    if (!order)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < r->ncategories; i++) {
        const struct report_category *c = &r->categories[i];
        bool unused = !c->n.live_bytes && !c->n.live_count && !c->n.peak_bytes && !c->n.allocs &&
                      !c->n.frees && !c->n.reallocs && !c->vm.reserved && !c->vm.committed &&
                      !c->vm.resident && !c->vm.mappings;
        if (!report_category_is(c, "overhead") && !unused)
            order[n++] = c;
    }
    qsort(order, n, sizeof *order, by_footprint_desc);
    for (size_t i = 0; i < n; i++)
        print_category(out, order[i], sc);
    free(order);
    /* memtrail's own cost is always shown, last, as NMT shows its own. */
    bool overhead_seen = false;
    for (size_t i = 0; i < r->ncategories; i++) {
        if (report_category_is(&r->categories[i], "overhead")) {
            print_category(out, &r->categories[i], sc);
            overhead_seen = true;
        }
    }
    if (!overhead_seen)
        fprintf(out, "-%*s (not in the report)\n\n", NAME_COLUMN, "memtrail overhead");

    if (r->has & REPORT_HAS_PROCESS)
        print_process(out, r, sc);

    const struct report_errors *e = &r->errors;
    if (e->double_free || e->bad_canary || e->foreign_free) {
        static const char *const why[] = {
            "a block freed twice",
            "a block's guard bytes overwritten: an out-of-bounds write",
            "free of a pointer memtrail did not hand out; passed through",
        };
        static const char *const name[] = {"double_free", "bad_canary", "foreign_free"};
        const int64_t count[] = {e->double_free, e->bad_canary, e->foreign_free};
        fputs("Errors detected by memtrail:\n", out);
        for (int i = 0; i < 3; i++) {
            char field[48];
            snprintf(field, sizeof field, "%s=%" PRId64, name[i], count[i]);
            fprintf(out, "    %-20s (%s)\n", field, why[i]);
        }
        fputc('\n', out);
    }
    if (report_is_sampled(r)) {
        char rate[MT_UNITS_MAX];
        fprintf(out,
                "Sampled: one sample per %s allocated on average; site figures are estimates "
                "(the category totals above are exact)\n\n",
                mt_size(rate, sizeof rate, r->sample_rate));
    }
    if (!r->complete && r->mode && strcmp(r->mode, "trace") == 0)
        fprintf(out,
                "Incomplete: the trace stopped early after %ld events; "
                "the numbers above are those of the events before.\n",
                r->lines_read);
    else if (!r->complete)
        fprintf(out,
                "Incomplete: the report file was cut short after line %ld; "
                "the numbers above are what it held.\n",
                r->lines_read);
    return ferror(out) ? -EIO : 0;
}
