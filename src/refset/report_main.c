/* report_main.c — `memtrail refset report FILE [--by process|category|class|
 * stack] [--viewport T0:T1] [--json] [--top N]`: reads a recording
 * (refset_file.h) into the model (report_model.h), computes the viewport
 * and prints it (report_print.h). A recording cut short or damaged is
 * reported as far as it was read, then where it stopped, exit 1. */
#include "cli/cli.h"
#include "refset/refset.h"
#include "refset/refset_file.h"
#include "refset/report_model.h"
#include "refset/report_print.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CMD "refset report"

static const struct cli_command report_cmd = {
    .name = CMD,
    .usage = "usage: memtrail refset report FILE [--by process|category|class|stack]\n"
             "                              [--viewport T0:T1] [--json] [--top N]\n",
    .about = "Report a reference-set recording (written by 'memtrail refset record') for a\n"
             "viewport of it (default: the whole recording):\n"
             "  Size         the pages referenced in the viewport, per process (a page\n"
             "               shared by two processes counts in each)\n"
             "  Impact Size  the change of the system's outstanding pages from T0 to T1,\n"
             "               each physical page once, for the first process that\n"
             "               referenced it\n"
             "  impact types impacting (referenced outside the viewport and released in\n"
             "               it, or the reverse), transient (both inside), persistent\n"
             "               (both outside)\n"
             "  the graph    outstanding bytes at T0 and T1, the peak and the steady state\n"
             "               (outstanding at the end)\n"
             "by process, category (Heap, VirtualAlloc, UserStack, PFMappedSection,\n"
             "CopyOnWriteImage, Image, MapFile), class (Dynamic, File) or stack. The JSON\n"
             "holds every view, and a timeline of the graph by process and category.\n",
    .more = "docs/refset-report.md explains how to read a report. A recording cut short or\n"
            "damaged is reported up to the damage, then the error says where reading\n"
            "stopped, and the exit status is 1.\n",
    .min_args = 1,
    .max_args = 1,
    .missing = "missing the recording FILE",
    .extra = "too many arguments ('%s'; expected one FILE)",
};

/* Seconds ("1", "2.5", ".5") as ns (digits past the nanosecond are
 * dropped); -1 when not such a number. */
static int64_t parse_seconds(const char *s, size_t n)
{
    int64_t whole = 0, frac = 0, scale = 1000000000;
    size_t i = 0, digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (whole > 1000000000)
            return -1;
        whole = whole * 10 + (s[i] - '0');
    }
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++)
            if (scale > 1) {
                scale /= 10;
                frac += (s[i] - '0') * scale;
            }
    if (i != n || digits == 0)
        return -1;
    return whole * 1000000000 + frac;
}

/* T0:T1 (either may be left out: the start, the end). -1 when malformed;
 * *t1 = -1 when T1 is left out. */
static int parse_viewport(const char *s, int64_t *t0, int64_t *t1)
{
    const char *colon = strchr(s, ':');
    if (!colon || strchr(colon + 1, ':'))
        return -1;
    size_t n0 = (size_t)(colon - s), n1 = strlen(colon + 1);
    if (n0 == 0 && n1 == 0)
        return -1;
    *t0 = n0 ? parse_seconds(s, n0) : 0;
    *t1 = n1 ? parse_seconds(colon + 1, n1) : -1;
    if (*t0 < 0 || (n1 && *t1 < 0))
        return -1;
    return 0;
}

static void fmt_seconds(char *buf, size_t len, int64_t ns)
{
    int n = snprintf(buf, len, "%" PRId64 ".%09" PRId64, ns / 1000000000, ns % 1000000000);
    while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
        buf[--n] = '\0';
    if (n > 2 && buf[n - 1] == '0' && buf[n - 2] == '.')
        buf[n - 2] = '\0';
}

int refset_report_main(int argc, char **argv)
{
    bool json = false;
    int by = RS_BY_PROCESS, top = 10;
    const char *viewport = NULL;
    static const struct cli_choice by_choices[] = {
        {.name = "process", .value = RS_BY_PROCESS},
        {.name = "category", .value = RS_BY_CATEGORY},
        {.name = "class", .value = RS_BY_CLASS},
        {.name = "stack", .value = RS_BY_STACK},
        {0},
    };
    const struct cli_option options[] = {
        {.kind = CLI_OPT_CHOICE,
         .name = "by",
         .arg = "process|category|class|stack",
         .value = &by,
         .choices = by_choices,
         .noun = "grouping",
         .help =
             "the text's rows: processes with their categories (default), categories, classes, or the top "
             "impacting and allocation stacks"},
        {.kind = CLI_OPT_STRING,
         .name = "viewport",
         .arg = "T0:T1",
         .value = &viewport,
         .help = "the viewport, in seconds since the recording started (decimals allowed; T0 or T1 may be "
                 "left out: the start, the end); default: the whole recording"},
        CLI_OPT_JSON(&json, "print JSON instead (schema memtrail/1, keys in docs/json.md)"),
        CLI_OPT_STACKS_TOP(&top),
        {0},
    };
    int npos = cli_parse(&report_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    const char *file = argv[0];
    int64_t t0 = 0, t1 = -1;
    if (viewport && parse_viewport(viewport, &t0, &t1) < 0)
        return cli_usage_error(CMD, "--viewport: '%s' is not T0:T1 (seconds since the start, e.g. 1.5:3)",
                               viewport);
    if (viewport && t1 >= 0 && t0 >= t1)
        return cli_usage_error(CMD, "--viewport: '%s' ends before it starts (T0 must be below T1)", viewport);

    char err[512] = "";
    mt_rs_reader *r = NULL;
    int rc = mt_rs_reader_open(file, &r, err, sizeof err);
    if (rc < 0)
        return cli_error(CMD ": %s: %s", file, err[0] ? err : strerror(-rc));
    const mt_rs_header *h = mt_rs_reader_header(r);
    struct rs_model m;
    if (rs_model_init(&m, h->page_size, h->flags, h->start_ns) < 0) {
        mt_rs_reader_close(r);
        return cli_error("out of memory");
    }
    mt_rs_event ev;
    int got, added = 0;
    while ((got = mt_rs_read(r, &ev)) > 0)
        if ((added = rs_model_add(&m, &ev)) < 0)
            break;
    int status = CLI_OK;
    if (added == -E2BIG) {
        status =
            cli_error(CMD ": %s: more than %u page references (at offset %llu): more than a report holds",
                      file, RS_MODEL_MAX_REFS, (unsigned long long)mt_rs_reader_offset(r));
        goto done;
    }
    if (got > 0 || rs_model_finish(&m) < 0) {
        status = cli_error(CMD ": %s: out of memory", file);
        goto done;
    }
    char stop[1024] = "";
    if (got < 0)
        snprintf(stop, sizeof stop, "%s", mt_rs_reader_error(r));
    else if (!mt_rs_reader_complete(r))
        snprintf(stop, sizeof stop, "no end record (the recorder was killed?); every whole chunk was read");
    if (t1 < 0)
        t1 = m.end_ns;
    if (t0 >= m.end_ns && viewport) {
        char a[40];
        fmt_seconds(a, sizeof a, m.end_ns);
        status = cli_usage_error(CMD, "viewport %s lies outside the recording (0 to %s s)", viewport, a);
        goto done;
    }
    if (t1 <= t0) /* an empty recording: a viewport of nothing */
        t1 = t0;
    struct rs_view v;
    if (rs_view_compute(&m, t0, t1, &v) < 0) {
        status = cli_error(CMD ": %s: out of memory", file);
        goto done;
    }
    struct rs_print p = {
        .file = file, .by = (enum rs_by)by, .top = top, .complete = !stop[0], .stop = stop[0] ? stop : NULL};
    status = cli_write_status(json ? rs_print_json(stdout, &m, &v, &p) : rs_print_text(stdout, &m, &v, &p));
    rs_view_free(&v);
    if (status == CLI_OK && stop[0]) {
        char a[40];
        fmt_seconds(a, sizeof a, m.end_ns);
        status = cli_error(CMD ": %s: stopped at offset %" PRIu64 ": %s; the report covers the first %s s",
                           file, mt_rs_reader_offset(r), stop, a);
    }
done:
    rs_model_free(&m);
    mt_rs_reader_close(r);
    return status;
}
