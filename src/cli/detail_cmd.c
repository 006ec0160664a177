/* detail_cmd.c — the command-line side of detail reports shared by
 * `memtrail report detail` (cmd_report.c) and `memtrail diff` (cmd_diff.c):
 * the parsing of --sort (the options are declared in cli.h), opening the symbolizers, printing
 * their warnings, and running the printers of report_detail.c. */
#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/detail.h"
#include "symbol/symbol.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int detail_parse_sort(const char *value, void *by_allocs)
{
    if (strcmp(value, "live") == 0)
        *(bool *)by_allocs = false;
    else if (strcmp(value, "allocated") == 0 || strcmp(value, "allocs") == 0) /* allocs: the old name */
        *(bool *)by_allocs = true;
    else
        return -EINVAL;
    return 0;
}

/* Each warning line as "memtrail: warning: ..." on stderr; `side` names
 * the report in a diff (NULL otherwise). */
static void print_warnings(struct symbolizer *s, const char *side)
{
    const char *w = sym_warnings(s);
    while (*w) {
        size_t len = strcspn(w, "\n");
        fprintf(stderr, "memtrail: warning: %s%s%.*s\n", side ? side : "", side ? ": " : "", (int)len, w);
        w += len + (w[len] == '\n');
    }
}

int detail_cli_print(const struct report *r, const char *name, bool json, const struct report_scale *scale,
                     const struct detail_options *o)
{
    if (!(r->has & REPORT_HAS_SITES))
        return cli_error("%s: not a detail report (mode %s, no stack_depth line): it has no allocation "
                         "sites; record one with 'memtrail run --mode detail'",
                         name, r->mode ? r->mode : "unknown");
    struct symbolizer *s = detail_symbolizer(r);
    if (!s)
        return cli_error("out of memory");
    print_warnings(s, NULL);
    int st = cli_write_status(json ? detail_print_json(stdout, r, s, o)
                                   : detail_print_text(stdout, r, s, o, scale));
    sym_close(s);
    return st;
}

int detail_cli_report(struct report_input *in, bool json, const struct report_scale *scale,
                      const struct detail_options *o)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = analyze_read_input(in, &r, err, sizeof err); /* a report or a trace */
    report_input_close(in);
    if (rc < 0 && (rc != -ENODATA || !(r.has & REPORT_HAS_SITES))) {
        report_free(&r);
        return cli_error("%s", err);
    }
    int st = detail_cli_print(&r, in->name, json, scale, o);
    cli_print_caveats(in->name, &r); /* a trace's: its sites are no better than it */
    report_free(&r);
    if (st != CLI_OK)
        return st;
    if (rc < 0) /* truncated: what it held is shown, then the reason */
        return cli_error("%s", err);
    return CLI_OK;
}

int detail_cli_diff(const struct report *base, const struct report *cur, bool json,
                    const struct report_scale *scale, const struct detail_options *o)
{
    struct symbolizer *sb = detail_symbolizer(base), *sc = detail_symbolizer(cur);
    int st;
    if (!sb || !sc) {
        st = cli_error("out of memory");
    } else {
        print_warnings(sb, "BASE");
        print_warnings(sc, "NEW");
        int prc = json ? detail_diff_print_json(stdout, base, cur, sb, sc, o)
                       : report_diff_print_text(stdout, base, cur, scale);
        if (!json && prc == 0)
            prc = detail_diff_print_text(stdout, base, cur, sb, sc, o, scale);
        st = cli_write_status(prc);
    }
    sym_close(sb);
    sym_close(sc);
    return st;
}
