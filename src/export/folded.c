/* folded.c — folded stacks, the input of flamegraph.pl, speedscope and
 * inferno: "root;caller;...;leaf VALUE", one line per distinct stack. A
 * recorded return address in inlined code becomes several frames (the
 * function it was inlined into first, as a caller). Sites that differ only
 * by category or by return addresses within the same functions fold into
 * one line. */
#include "export/export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct line {
    char *stack;
    int64_t value;
};

static int by_stack(const void *a, const void *b)
{
    return strcmp(((const struct line *)a)->stack, ((const struct line *)b)->stack);
}

/* A growable string. */
struct text {
    char *s;
    size_t len, cap;
};

static int text_add(struct text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->cap - t->len < n + 1) {
        size_t cap = t->cap ? t->cap : 128;
        while (cap - t->len < n + 1)
            cap *= 2;
        char *grown = realloc(t->s, cap);
        if (!grown)
            return -ENOMEM;
        t->s = grown;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n + 1);
    t->len += n;
    return 0;
}

/* The site's stack, root first; a site without frames (the site table's
 * overflow) is "[unknown]". */
static int site_stack(struct export_stacks *st, const struct report_site *site, char **out)
{
    struct text t = {0};
    int rc = 0;
    if (site->nframes == 0)
        rc = text_add(&t, "[unknown]");
    for (size_t k = site->nframes; k-- > 0 && rc == 0;) {
        size_t a;
        if ((rc = export_stacks_lookup(st, site->frames[k], &a)) < 0)
            break;
        const struct export_addr *ad = &st->addrs[a];
        /* frames innermost first: the outermost (the real function) is the caller */
        for (int j = ad->nframes; j-- > 0 && rc == 0;) {
            char *name = export_frame_name(&st->frames[ad->first + (size_t)j]);
            if (!name) {
                rc = -ENOMEM;
                break;
            }
            if (t.len)
                rc = text_add(&t, ";");
            if (rc == 0)
                rc = text_add(&t, name);
            free(name);
        }
    }
    if (rc < 0) {
        free(t.s);
        return rc;
    }
    *out = t.s;
    return 0;
}

int export_folded(FILE *out, const struct report *r, struct symbolizer *sym, enum export_value v)
{
    struct export_stacks st;
    export_stacks_init(&st, r, sym);
    struct line *lines = calloc(r->nsites ? r->nsites : 1, sizeof *lines);
    size_t n = 0;
    int rc = lines ? 0 : -ENOMEM;
    for (size_t i = 0; i < r->nsites && rc == 0; i++) {
        const struct report_site *site = &r->sites[i];
        int64_t value = export_site_value(site, v);
        if (value == 0)
            continue;
        if ((rc = site_stack(&st, site, &lines[n].stack)) == 0)
            lines[n++].value = value;
    }
    if (rc == 0) {
        qsort(lines, n, sizeof *lines, by_stack);
        for (size_t i = 0; i < n;) {
            int64_t sum = 0;
            size_t j = i;
            for (; j < n && strcmp(lines[j].stack, lines[i].stack) == 0; j++)
                sum = report_add(sum, lines[j].value);
            if (sum > 0)
                fprintf(out, "%s %lld\n", lines[i].stack, (long long)sum);
            i = j;
        }
        if (ferror(out))
            rc = -EIO;
    }
    for (size_t i = 0; i < n; i++)
        free(lines[i].stack);
    free(lines);
    export_stacks_free(&st);
    return rc;
}
