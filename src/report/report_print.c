/* report_print.c — the printers of a summary report: the NMT-like text
 * summary (`memtrail report summary`), the JSON document (`--json`, keys
 * documented in docs/cli.md), and the small helpers they share: scaling
 * with NMT's rounding, JSON string escaping, shell quoting. */
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
        { "KB", 1024 }, { "MB", 1024 * 1024 }, { "GB", 1024 * 1024 * 1024 },
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
    if (!control) {     /* '...' with each ' written as '\'' */
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
    fputs("$'", out);   /* bash/zsh/ksh ANSI-C quoting, so newlines stay visible */
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
#define CONTINUE "                            "   /* NAME_COLUMN + 2 spaces */

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
        fprintf(out, "-%*s (reserved=%s, committed=%s, resident=%s, mappings=%" PRId64 ")\n", NAME_COLUMN, c->name,
                report_size(c->vm.reserved, sc), report_size(c->vm.committed, sc),
                report_size(c->vm.resident, sc), c->vm.mappings);
    else    /* a report without VM fields: reserved = committed = live bytes */
        fprintf(out, "-%*s (reserved=%s, committed=%s)\n",
                NAME_COLUMN, c->name, live, live);
    if (report_category_is(c, "overhead"))
        fputs(CONTINUE "(memtrail's own overhead: block headers, canaries, alignment padding, its counters)\n", out);
    if (report_category_is(c, "vm")) {    /* address space only: no heap blocks to show */
        fputc('\n', out);
        return;
    }
    fprintf(out, CONTINUE "(malloc=%s #%" PRId64 ") (peak=%s)\n",
            live, c->n.live_count, report_size(c->n.peak_bytes, sc));
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
    fprintf(out, "Process: rss=%s, peak rss=%s "
            "(reserved=%s, committed=%s, resident=%s)\n",
            report_size(p->rss_bytes, sc), report_size(p->peak_rss_bytes, sc),
            report_size(p->reserved, sc), report_size(p->committed, sc),
            report_size(p->resident, sc));
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
        fprintf(out, "Total: reserved=%s, committed=%s, resident=%s\n",
                report_size(sum.reserved, sc), report_size(sum.committed, sc),
                report_size(sum.resident, sc));
    }
    /* The heap blocks: the whole total without VM data, under it with. */
    const char *label = vm ? "       malloc:" : "Total:";
    if (r->has & REPORT_HAS_TOTAL)
        fprintf(out, "%s live=%s (%" PRId64 " blocks), peak=%s, "
                "allocs=%" PRId64 ", frees=%" PRId64 ", reallocs=%" PRId64 "\n\n",
                label, report_size(r->total.live_bytes, sc), r->total.live_count,
                report_size(r->total.peak_bytes, sc), r->total.allocs, r->total.frees,
                r->total.reallocs);
    else
        fprintf(out, "%s not in the report (the file was cut short before it)\n\n", label);

    const struct report_category **order = malloc((r->ncategories + 1) * sizeof *order);
    if (!order)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < r->ncategories; i++) {
        const struct report_category *c = &r->categories[i];
        bool unused = !c->n.live_bytes && !c->n.live_count && !c->n.peak_bytes && !c->n.allocs
                      && !c->n.frees && !c->n.reallocs && !c->vm.reserved && !c->vm.committed
                      && !c->vm.resident && !c->vm.mappings;
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
        static const char *const name[] = { "double_free", "bad_canary", "foreign_free" };
        const int64_t count[] = { e->double_free, e->bad_canary, e->foreign_free };
        fputs("Errors detected by memtrail:\n", out);
        for (int i = 0; i < 3; i++) {
            char field[48];
            snprintf(field, sizeof field, "%s=%" PRId64, name[i], count[i]);
            fprintf(out, "    %-20s (%s)\n", field, why[i]);
        }
        fputc('\n', out);
    }
    if (!r->complete && r->mode && strcmp(r->mode, "trace") == 0)
        fprintf(out, "Incomplete: the trace stopped early after %ld events; "
                "the numbers above are those of the events before.\n", r->lines_read);
    else if (!r->complete)
        fprintf(out, "Incomplete: the report file was cut short after line %ld; "
                "the numbers above are what it held.\n", r->lines_read);
    return ferror(out) ? -EIO : 0;
}

/* --- JSON ----------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s, or 0 (overlong forms,
 * surrogates and code points past U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    else if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))
        || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string: quotes and backslashes escaped, control characters as
 * \u00XX, bytes that are not UTF-8 replaced by U+FFFD (JSON must be UTF-8).
 * NULL (a line the report lacks) is null. */
void report_json_string(FILE *out, const char *str)
{
    if (!str) {
        fputs("null", out);
        return;
    }
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', out);
    while (*s) {
        size_t n = utf8_len(s);
        if (n == 0) {
            fputs("\\ufffd", out);
            s++;
        } else if (*s == '"' || *s == '\\') {
            fprintf(out, "\\%c", *s++);
        } else if (*s < 0x20 || *s == 0x7f) {
            fprintf(out, "\\u%04x", *s++);
        } else {
            /* a run of characters that need no escape, written at once */
            const unsigned char *run = s;
            while (*s && *s != '"' && *s != '\\' && *s >= 0x20 && *s != 0x7f && (n = utf8_len(s)) > 0)
                s += n;
            fwrite(run, 1, (size_t)(s - run), out);
        }
    }
    fputc('"', out);
}

void report_json_cmdline(FILE *out, const struct report *r)
{
    if (!(r->has & REPORT_HAS_CMDLINE)) {
        fputs("null", out);
        return;
    }
    fputc('[', out);
    for (size_t i = 0; i < r->argc; i++) {
        if (i)
            fputs(", ", out);
        report_json_string(out, r->argv[i]);
    }
    fputc(']', out);
}

static void json_opt_string(FILE *out, const char *key, const char *value)
{
    fprintf(out, "  \"%s\": ", key);
    report_json_string(out, value);
    fputs(",\n", out);
}

static void json_opt_int(FILE *out, const char *key, bool present, int64_t value)
{
    if (present)
        fprintf(out, "  \"%s\": %" PRId64 ",\n", key, value);
    else
        fprintf(out, "  \"%s\": null,\n", key);
}

int report_print_json(FILE *out, const struct report *r)
{
    fputs("{\n", out);
    json_opt_int(out, "pid", r->has & REPORT_HAS_PID, r->pid);
    json_opt_int(out, "ppid", r->has & REPORT_HAS_PPID, r->ppid);
    json_opt_string(out, "exe", r->exe);
    fputs("  \"cmdline\": ", out);
    report_json_cmdline(out, r);
    fputs(",\n", out);
    json_opt_string(out, "mode", r->mode);
    json_opt_string(out, "reason", r->reason);
    json_opt_int(out, "start_ns", r->has & REPORT_HAS_START, r->start_ns);
    json_opt_int(out, "end_ns", r->has & REPORT_HAS_END_NS, r->end_ns);
    fprintf(out, "  \"complete\": %s,\n", r->complete ? "true" : "false");

    fputs("  \"categories\": [", out);
    for (size_t i = 0; i < r->ncategories; i++) {
        const struct report_category *c = &r->categories[i];
        fputs(i ? ",\n    {" : "\n    {", out);
        fputs("\"name\": ", out);
        report_json_string(out, c->name);
        fputs(", \"kind\": ", out);
        report_json_string(out, c->kind);
        fprintf(out, ", \"live_bytes\": %" PRId64 ", \"live_count\": %" PRId64
                ", \"peak_bytes\": %" PRId64 ", \"allocs\": %" PRId64 ", \"frees\": %" PRId64
                ", \"reallocs\": %" PRId64,
                c->n.live_bytes, c->n.live_count, c->n.peak_bytes, c->n.allocs, c->n.frees, c->n.reallocs);
        if (c->has_vm)
            fprintf(out, ", \"reserved\": %" PRId64 ", \"committed\": %" PRId64
                    ", \"resident_bytes\": %" PRId64 ", \"mappings\": %" PRId64 "}",
                    c->vm.reserved, c->vm.committed, c->vm.resident, c->vm.mappings);
        else    /* a report without VM fields: as before they existed */
            fprintf(out, ", \"reserved\": %" PRId64 ", \"committed\": %" PRId64
                    ", \"resident_bytes\": null, \"mappings\": null}", c->n.live_bytes, c->n.live_bytes);
    }
    fputs(r->ncategories ? "\n  ],\n" : "],\n", out);

    if (r->has & REPORT_HAS_TOTAL)
        fprintf(out, "  \"total\": {\"live_bytes\": %" PRId64 ", \"live_count\": %" PRId64
                ", \"peak_bytes\": %" PRId64 ", \"allocs\": %" PRId64 ", \"frees\": %" PRId64
                ", \"reallocs\": %" PRId64,
                r->total.live_bytes, r->total.live_count, r->total.peak_bytes, r->total.allocs,
                r->total.frees, r->total.reallocs);
    if ((r->has & REPORT_HAS_TOTAL) && (r->has & REPORT_HAS_VM)) {
        struct report_vm sum;
        report_vm_total(r, &sum);
        fprintf(out, ", \"reserved\": %" PRId64 ", \"committed\": %" PRId64 ", \"resident_bytes\": %" PRId64
                "},\n", sum.reserved, sum.committed, sum.resident);
    } else if (r->has & REPORT_HAS_TOTAL) {
        fputs(", \"reserved\": null, \"committed\": null, \"resident_bytes\": null},\n", out);
    } else {
        fputs("  \"total\": null,\n", out);
    }
    if (r->has & REPORT_HAS_PROCESS)
        fprintf(out, "  \"process\": {\"rss_bytes\": %" PRId64 ", \"peak_rss_bytes\": %" PRId64
                ", \"reserved\": %" PRId64 ", \"committed\": %" PRId64 ", \"resident_bytes\": %" PRId64
                ", \"explained_bytes\": %" PRId64 "},\n",
                r->process.rss_bytes, r->process.peak_rss_bytes, r->process.reserved, r->process.committed,
                r->process.resident, report_explained(r));
    else
        fputs("  \"process\": null,\n", out);
    if (r->has & REPORT_HAS_ERRORS)
        fprintf(out, "  \"errors\": {\"double_free\": %" PRId64 ", \"bad_canary\": %" PRId64
                ", \"foreign_free\": %" PRId64 "}\n",
                r->errors.double_free, r->errors.bad_canary, r->errors.foreign_free);
    else
        fputs("  \"errors\": null\n", out);
    fputs("}\n", out);
    return ferror(out) ? -EIO : 0;
}
