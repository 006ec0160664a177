/* cmd_diff.c — `memtrail diff BASE NEW [--json] [--scale KB|MB|GB]`: what
 * changed between two summary reports, category by category, like HotSpot's
 * `jcmd PID VM.native_memory summary.diff` (report_diff.c). Two builds of a
 * program, or a baseline and a later snapshot of one process. */
#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/detail.h"
#include "report/report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char diff_about[] =
    "Compare two summary reports (.mtr): two runs of a program (e.g. two builds),\n"
    "or a baseline and a later snapshot of one process (mt_report_write()). For\n"
    "each category, matched by name, it shows the NEW value and the change since\n"
    "BASE of the live bytes and blocks, peak, allocs, frees, and of the reserved,\n"
    "committed and resident address space; a category on one side only is marked\n"
    "new or gone. Then the total's and the process's RSS changes. Categories are\n"
    "listed by the size of their change, largest first; memtrail's own last.\n"
    "Either file may be - (stdin).\n"
    "\n"
    "When both are detail reports ('memtrail run --mode detail'), the allocation\n"
    "sites that grew, shrank, appeared or went follow, largest change of live\n"
    "bytes first, matched by symbolized stack (function names and module file\n"
    "names, module+offset where no name is known) and category, not by address.\n";

static const struct cli_command diff_cmd = {
    .name = "diff",
    .usage = "usage: memtrail diff BASE NEW [--scale KB|MB|GB] [--json] [--depth N] [--top N]\n",
    .about = diff_about,
    .more = "A report cut short is compared as far as it goes and named on stderr, with\n"
            "exit status 1; a file that is not a report is named, with nothing printed.\n",
    .max_args = 2,
    .extra = "too many arguments ('%s'; expected BASE NEW)",
};

/* Reads one side; returns the reader's code, the error already printed
 * when it is not -ENODATA (which the caller reports after the diff). */
static int read_side(const char *path, struct report *r, char *err)
{
    int rc = analyze_read_any(path, r, err, REPORT_ERR_MAX); /* a report or a trace; - is stdin */
    if (rc < 0 && rc != -ENODATA)
        cli_error("%s", err);
    return rc;
}

int cmd_diff(int argc, char **argv)
{
    bool json = false;
    struct report_scale scale;
    report_scale_parse("KB", &scale);
    struct detail_options dopt = {0};
    const struct cli_option options[] = {
        CLI_OPT_SCALE(&scale),
        CLI_OPT_JSON(&json, "print JSON instead (raw bytes; schema memtrail/1, keys in docs/json.md)"),
        CLI_OPT_DEPTH(&dopt, NULL, "detail: match sites by their first N frames only"),
        CLI_OPT_TOP(&dopt, NULL, "detail: show the N largest changes only"),
        {0},
    };
    int npos = cli_parse(&diff_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    if (npos < 2)
        return cli_usage_error("diff", npos ? "missing the NEW report" : "missing the BASE and NEW reports");
    char **positional = argv;
    if (strcmp(positional[0], "-") == 0 && strcmp(positional[1], "-") == 0)
        return cli_usage_error("diff", "only one of BASE and NEW can be - (stdin)");

    struct report base, cur;
    char base_err[REPORT_ERR_MAX], cur_err[REPORT_ERR_MAX];
    int brc = read_side(positional[0], &base, base_err);
    int crc = read_side(positional[1], &cur, cur_err);
    int status = CLI_OK;
    if ((brc < 0 && brc != -ENODATA) || (crc < 0 && crc != -ENODATA)) {
        status = CLI_FAILED; /* not a report: nothing to compare */
    } else {
        /* A truncated report still holds everything before the cut: compare it. */
        if ((base.has & REPORT_HAS_SITES) && (cur.has & REPORT_HAS_SITES)) {
            status = detail_cli_diff(&base, &cur, json, &scale, &dopt);
        } else {
            int prc = json ? report_diff_print_json(stdout, &base, &cur)
                           : report_diff_print_text(stdout, &base, &cur, &scale);
            status = cli_write_status(prc);
        }
        if (brc < 0)
            status = cli_error("%s", base_err);
        if (crc < 0)
            status = cli_error("%s", cur_err);
    }
    report_free(&base);
    report_free(&cur);
    return status;
}
