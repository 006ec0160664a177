/* report_diff.c — deltas between two summary reports, by category name.
 * A minimal version (live bytes/count, allocs, frees), so that `memtrail
 * query PID diff` builds; the `memtrail diff` work replaces it. */
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static const struct report_category *find(const struct report *r, const char *name)
{
    for (size_t i = 0; i < r->ncategories; i++)
        if (strcmp(r->categories[i].name, name) == 0)
            return &r->categories[i];
    return NULL;
}

/* Calls fn for every category of base, then those only cur has. */
typedef void (*diff_fn)(FILE *out, const char *name, const struct report_counts *b,
                        const struct report_counts *c, void *arg);

static void each(const struct report *base, const struct report *cur, diff_fn fn, FILE *out, void *arg)
{
    static const struct report_counts zero;
    for (size_t i = 0; i < base->ncategories; i++) {
        const struct report_category *c = find(cur, base->categories[i].name);
        fn(out, base->categories[i].name, &base->categories[i].n, c ? &c->n : &zero, arg);
    }
    for (size_t i = 0; i < cur->ncategories; i++)
        if (!find(base, cur->categories[i].name))
            fn(out, cur->categories[i].name, &zero, &cur->categories[i].n, arg);
}

static void text_line(FILE *out, const char *name, const struct report_counts *b,
                      const struct report_counts *c, void *arg)
{
    const struct report_scale *s = arg;
    fprintf(out,
            "%20s live=%" PRId64 "%s %+" PRId64 "%s (#%" PRId64 " %+" PRId64 ") allocs %+" PRId64
            " frees %+" PRId64 "\n",
            name, report_scaled(c->live_bytes, s->bytes), s->unit,
            report_scaled(c->live_bytes - b->live_bytes, s->bytes), s->unit, c->live_count,
            c->live_count - b->live_count, c->allocs - b->allocs, c->frees - b->frees);
}

int report_diff_print_text(FILE *out, const struct report *base, const struct report *cur,
                           const struct report_scale *scale)
{
    fprintf(out, "memtrail native memory diff: pid %" PRId64 " against pid %" PRId64 "\n\n", cur->pid,
            base->pid);
    fprintf(out, "Total: live=%" PRId64 "%s %+" PRId64 "%s (#%" PRId64 " %+" PRId64 ")\n\n",
            report_scaled(cur->total.live_bytes, scale->bytes), scale->unit,
            report_scaled(cur->total.live_bytes - base->total.live_bytes, scale->bytes), scale->unit,
            cur->total.live_count, cur->total.live_count - base->total.live_count);
    each(base, cur, text_line, out, (void *)scale);
    return ferror(out) ? -EIO : 0;
}

static void json_line(FILE *out, const char *name, const struct report_counts *b,
                      const struct report_counts *c, void *arg)
{
    int *first = arg;
    fputs(*first ? "\n    {\"name\": \"" : ",\n    {\"name\": \"", out);
    *first = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fprintf(out,
            "\", \"live_bytes\": %" PRId64 ", \"live_bytes_delta\": %" PRId64 ", \"live_count\": %" PRId64
            ", \"live_count_delta\": %" PRId64 ", \"allocs_delta\": %" PRId64 ", \"frees_delta\": %" PRId64
            "}",
            c->live_bytes, c->live_bytes - b->live_bytes, c->live_count, c->live_count - b->live_count,
            c->allocs - b->allocs, c->frees - b->frees);
}

int report_diff_print_json(FILE *out, const struct report *base, const struct report *cur)
{
    int first = 1;
    fprintf(out, "{\n  \"base_pid\": %" PRId64 ",\n  \"pid\": %" PRId64 ",\n  \"categories\": [", base->pid,
            cur->pid);
    each(base, cur, json_line, out, &first);
    fprintf(out,
            "\n  ],\n  \"total\": {\"live_bytes\": %" PRId64 ", \"live_bytes_delta\": %" PRId64
            ", \"live_count\": %" PRId64 ", \"live_count_delta\": %" PRId64 "}\n}\n",
            cur->total.live_bytes, cur->total.live_bytes - base->total.live_bytes, cur->total.live_count,
            cur->total.live_count - base->total.live_count);
    return ferror(out) ? -EIO : 0;
}
