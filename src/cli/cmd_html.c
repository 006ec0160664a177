/* cmd_html.c — `memtrail html INPUT [INPUT2] [-o FILE.html]`: one
 * self-contained HTML page of any memtrail input (docs/html.md). The data
 * is what the matching command prints with --json, produced by that very
 * command (run here with standard output caught in memory), so the page and
 * the CLI cannot disagree; src/html writes the page around it. */
#include "analyze/analyze.h"
#include "cli/cli.h"
#include "html/html.h"
#include "refset/refset.h"
#include "refset/refset_format.h"
#include "report/report.h"

#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum html_kind {
    KIND_AUTO,
    KIND_SUMMARY,
    KIND_DETAIL,
    KIND_TRACE,
    KIND_DIFF,
    KIND_TREE,
    KIND_REFSET,
    KIND_INFO
};

static const struct cli_choice kind_choices[] = {
    {"summary", KIND_SUMMARY, false}, {"detail", KIND_DETAIL, false},
    {"trace", KIND_TRACE, false},     {"diff", KIND_DIFF, false},
    {"tree", KIND_TREE, false},       {"refset", KIND_REFSET, false},
    {"info", KIND_INFO, false},       {NULL, 0, false},
};

static const struct cli_command html_cmd = {
    .name = "html",
    .usage = "usage: memtrail html INPUT [-o FILE.html] [--kind K]\n"
             "       memtrail html BASE NEW [-o FILE.html]\n",
    .about = "Write one self-contained HTML page (opens offline from disk: the data, the\n"
             "page code and its libraries are all inside) showing INPUT:\n"
             "  summary report   categories' live, peak, committed and resident bytes; RSS\n"
             "  detail report    icicle graphs of live and allocated bytes by stack, with\n"
             "                   search and zoom, and a sortable, filterable table of sites\n"
             "  trace (.mtt)     the analysis: timeline with the peak, stacks, histogram\n"
             "  BASE NEW         the diff: what grew and shrank, by category and by site\n"
             "  directory        the process tree of its reports\n"
             "  refset file      a reference-set recording, by process and category\n"
             "The data is the JSON that 'report --json', 'report detail --json', 'analyze\n"
             "--json', 'diff --json', 'refset report --json' or 'info --json' prints for\n"
             "the same input, so every number equals theirs. The guide is docs/html.md.\n",
    .more = "The page is written to FILE.html, or else to INPUT's name with .html for\n"
            "its extension, in the current directory (BASE NEW: NEW's name and\n"
            "-diff.html). Exit status: 0 written, 1 an input cannot be read (a report cut\n"
            "short is shown as far as it goes, and said so), 2 bad usage.\n",
    .min_args = 1,
    .max_args = 2,
    .missing = "missing the INPUT (a report, a trace, a directory of reports or a recording)",
    .extra = "too many arguments ('%s'; expected INPUT, or BASE NEW)",
};

/* Runs a command as `memtrail ARGV...` would, its standard output caught
 * in *buf (malloc'd, *len bytes): the commands print to stdout, so
 * pointing stdout at a memory stream for the call runs them unchanged. Its
 * errors go to stderr as usual. The command's exit code, or CLI_FAILED
 * when memory ran out. */
static int capture(int (*cmd)(int, char **), int argc, char **argv, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *mem = open_memstream(buf, len);
    if (!mem)
        return cli_error("out of memory");
    fflush(stdout);
    FILE *saved = stdout;
    stdout = mem;
    int status = cmd(argc, argv);
    stdout = saved;
    if (fclose(mem) != 0) {
        free(*buf);
        *buf = NULL;
        return cli_error("out of memory");
    }
    return status;
}

/* What one file is: a trace, a recording, a detail or summary report. 0,
 * or CLI_FAILED after the reader's line (not a report, unreadable). */
static int file_kind(const char *path, enum html_kind *kind)
{
    struct report_input in;
    char err[REPORT_ERR_MAX];
    int rc = report_input_open(path, &in, err, sizeof err);
    if (rc < 0)
        return cli_error("%s", err);
    if (analyze_input_is_trace(&in)) {
        *kind = KIND_TRACE;
    } else if (report_input_starts_with(&in, RS_MAGIC, 8)) {
        *kind = KIND_REFSET;
    } else {
        struct report r;
        rc = report_read_input(&in, &r, err, sizeof err);
        if (rc < 0 && rc != -ENODATA) {
            report_free(&r);
            report_input_close(&in);
            return cli_error("%s", err);
        }
        *kind = (r.has & REPORT_HAS_SITES) ? KIND_DETAIL : KIND_SUMMARY;
        report_free(&r);
    }
    report_input_close(&in);
    return CLI_OK;
}

/* FILE.html in the current directory for input `path` ("x/run.mtr":
 * "run.html"; a directory "x/tree/": "tree.html"). NULL: out of memory. */
static char *default_output(const char *path, const char *suffix)
{
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    size_t l = strlen(copy);
    while (l > 1 && copy[l - 1] == '/')
        copy[--l] = '\0';
    char *base = basename(copy);
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) { /* the directory's own name */
        char *real = realpath(path, NULL);
        if (real) {
            free(copy);
            copy = real;
            base = strcmp(real, "/") == 0 ? "root" : basename(real);
        }
    }
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
        *dot = '\0';
    char *out = NULL;
    if (asprintf(&out, "%s%s.html", base, suffix) < 0)
        out = NULL;
    free(copy);
    return out;
}

static const char *kind_name(enum html_kind k)
{
    for (int i = 0; kind_choices[i].name; i++)
        if (kind_choices[i].value == (int)k)
            return kind_choices[i].name;
    return "summary";
}

/* The command whose --json is the page's data, for `kind`: its argv
 * (room for 8) and argc. The inputs follow "--", so no name is taken for
 * an option. */
static int json_command(enum html_kind kind, char **in, int nin, char **argv, int (**cmd)(int, char **))
{
    int n = 0;
    switch (kind) {
    case KIND_DETAIL: *cmd = cmd_report, argv[n++] = "report", argv[n++] = "detail"; break;
    case KIND_TRACE: *cmd = cmd_analyze, argv[n++] = "analyze"; break;
    case KIND_DIFF: *cmd = cmd_diff, argv[n++] = "diff"; break;
    case KIND_REFSET: *cmd = cmd_refset, argv[n++] = "refset", argv[n++] = "report"; break;
    case KIND_INFO: *cmd = cmd_info, argv[n++] = "info"; break;
    case KIND_TREE: *cmd = cmd_report, argv[n++] = "report"; break;
    default: *cmd = cmd_report, argv[n++] = "report", argv[n++] = "summary"; break;
    }
    argv[n++] = "--json";
    argv[n++] = "--";
    for (int i = 0; i < nin; i++)
        argv[n++] = in[i];
    argv[n] = NULL;
    return n;
}

/* A name cut to fit ends on a whole UTF-8 character, not on part of one
 * (the page would show a replacement character). */
static void utf8_whole(char *s)
{
    size_t n = strlen(s), lead = n;
    while (lead > 0 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead == 0 || (unsigned char)s[lead - 1] < 0xC0)
        return; /* ASCII last, or no lead byte */
    unsigned char c = (unsigned char)s[lead - 1];
    size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (n - (lead - 1) < want)
        s[lead - 1] = '\0';
}

int cmd_html(int argc, char **argv)
{
    const char *output = NULL;
    int kind = KIND_AUTO;
    const struct cli_option options[] = {
        {.kind = CLI_OPT_STRING,
         .name = "output",
         .short_name = 'o',
         .arg = "FILE",
         .value = &output,
         .help =
             "the page's file (- for stdout); written whole or not at all, never through a symbolic link"},
        {.kind = CLI_OPT_CHOICE,
         .name = "kind",
         .arg = "K",
         .value = &kind,
         .choices = kind_choices,
         .noun = "kind",
         .help = "the page for one INPUT, instead of the one its contents call for (a pipe or FIFO, read "
                 "once, needs it): summary, detail, trace, tree, refset, info (a report's memory info and "
                 "spans)"},
        {0},
    };
    int npos = cli_parse(&html_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    char **in = argv;
    for (int i = 0; i < npos; i++)
        if (strcmp(in[i], "-") == 0)
            return cli_usage_error("html", "the inputs must be files: - (stdin) is not read here "
                                           "(save it to a file first)");
    if (npos == 2 && kind != KIND_AUTO && kind != KIND_DIFF)
        return cli_usage_error("html", "--kind %s: two inputs make a diff", kind_name(kind));
    if (npos == 1 && kind == KIND_DIFF)
        return cli_usage_error("html", "--kind diff: needs two inputs, BASE and NEW");
    struct stat st;
    if (npos == 2) {
        kind = KIND_DIFF;
    } else if (stat(in[0], &st) == 0 && S_ISDIR(st.st_mode)) {
        if (kind != KIND_AUTO && kind != KIND_TREE)
            return cli_usage_error("html", "--kind %s: %s is a directory (its page is the tree)",
                                   kind_name(kind), in[0]);
        kind = KIND_TREE;
    } else if (kind == KIND_TREE) {
        return cli_usage_error("html", "--kind tree: needs a directory of reports (%s is not one)", in[0]);
    } else if (kind == KIND_AUTO && stat(in[0], &st) == 0 && !S_ISREG(st.st_mode)) {
        /* Its kind is told by reading it, and the command that makes the
         * page reads it again: a pipe or FIFO gives its bytes once (the
         * second open of a FIFO waits for a writer that has gone). */
        return cli_usage_error(
            "html",
            "%s: not a regular file (a pipe or FIFO is read once): its kind cannot be told "
            "before the page is made; give --kind summary, detail, trace, refset or info",
            in[0]);
    } else if (kind == KIND_AUTO) {
        enum html_kind k = KIND_SUMMARY;
        if (file_kind(in[0], &k) != CLI_OK)
            return CLI_FAILED;
        kind = k;
    }

    char *derived = NULL;
    if (!output && !(output = derived = default_output(in[npos - 1], npos == 2 ? "-diff" : "")))
        return cli_error("out of memory");
    struct stat ost;
    if (strcmp(output, "-") != 0 && stat(output, &ost) == 0)
        for (int i = 0; i < npos; i++)
            if (stat(in[i], &st) == 0 && st.st_dev == ost.st_dev && st.st_ino == ost.st_ino) {
                free(derived);
                return cli_usage_error("html", "-o %s: that is an input; the page would replace it", output);
            }
    /* The output first: a target that cannot be written is refused before any work. */
    struct cli_out out;
    if (cli_out_open(&out, output) != CLI_OK) {
        free(derived);
        return CLI_FAILED;
    }
    char *cargv[8];
    int (*cmd)(int, char **);
    int cargc = json_command(kind, in, npos, cargv, &cmd);
    char *data;
    size_t len;
    int status = capture(cmd, cargc, cargv, &data, &len);
    /* A failing command printed why; what it printed (a report cut short)
     * is still worth a page, otherwise there is nothing to show. */
    if (!data || len == 0) {
        cli_out_close(&out, 0, 0);
        free(data);
        free(derived);
        return CLI_FAILED;
    }
    char title[512];
    if (kind == KIND_DIFF)
        snprintf(title, sizeof title, "memtrail diff: %s → %s", in[0], in[1]);
    else
        snprintf(title, sizeof title, "memtrail %s: %s", kind_name(kind), in[0]);
    utf8_whole(title);
    const struct html_page page = {.kind = kind_name(kind),
                                   .title = title,
                                   .inputs = (const char *const *)in,
                                   .ninputs = npos,
                                   .data = data,
                                   .datalen = len};
    int wrc = cli_out_close(&out, 1, html_write_page(out.f, &page));
    if (wrc == CLI_OK && !out.is_stdout)
        fprintf(stderr, "memtrail: wrote %s (%s page)\n", output, kind_name(kind));
    free(data);
    free(derived);
    return wrc != CLI_OK ? wrc : status;
}
