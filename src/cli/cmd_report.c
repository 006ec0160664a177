/* cmd_report.c — `memtrail report [summary] FILE [--scale KB|MB|GB] [--json]`:
 * reads a summary report (.mtr) and prints it as NMT-like text or JSON. A
 * report cut short prints what it holds, then the error, and exits 1.
 * With a directory or several files, it summarises the process tree they
 * came from (one report per process; report_tree.c). */
#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/detail.h"
#include "report/report.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char report_synopsis[] =
    "usage: memtrail report [summary] FILE [--scale KB|MB|GB] [--json]\n"
    "       memtrail report [summary] DIR|FILE FILE... [--scale KB|MB|GB] [--json]\n"
    "       memtrail report detail FILE [--depth N] [--top N] [--sort live|allocated]\n"
    "                                   [--scale KB|MB|GB] [--json]\n";

static const char report_about[] =
    "Print the summary report FILE (written by 'memtrail run'; - reads stdin) in\n"
    "the layout of HotSpot's 'jcmd PID VM.native_memory summary': the total,\n"
    "then one block per category, largest first (committed + live bytes),\n"
    "memtrail's own overhead last, the process's RSS and how much of it the\n"
    "categories explain, and the errors memtrail detected (double frees,\n"
    "overwritten canaries, frees of foreign pointers) when there are any.\n"
    "\n"
    "Given a directory (every *.mtr and *.mtt in it, and the agent's FILE.N and\n"
    "FILE.PID beside them) or several files, print one row per report instead: a\n"
    "process tree, each child under its parent, with totals.\n"
    "\n"
    "'report detail' (a report of 'memtrail run --mode detail', or a trace of\n"
    "'memtrail run --mode trace', which is shown so by default) prints the summary,\n"
    "then the allocation sites, largest live bytes first, each with its call stack\n"
    "symbolized from the modules' files and debug info: function, file:line\n"
    "(inlined calls marked), module; module+offset where no symbol is known.\n";

static const char report_more[] =
    "A report cut short (no end marker) is printed as far as it goes, with\n"
    "\"complete\": false in JSON; the error goes to stderr and the exit status is 1.\n"
    "In a tree, a file that cannot be read is named on stderr, the others are\n"
    "still shown, and the exit status is 1.\n";

static const struct cli_command report_cmd = {
    .name = "report",
    .usage = report_synopsis,
    .about = report_about,
    .more = report_more,
    .min_args = 1,
    .max_args = -1,
    .missing = "missing the report FILE",
};

/* The files of a process tree, from the command line and directories. */
struct file_list {
    char **paths;
    size_t n, cap;
};

static int list_add(struct file_list *l, char *path)
{
    if (report_grow(&l->paths, &l->cap, l->n + 1, sizeof *l->paths, 16) < 0) {
        free(path);
        return -ENOMEM;
    }
    l->paths[l->n++] = path;
    return 0;
}

/* A report file of a directory: NAME.mtr, or a trace NAME.mtt (its
 * process is in the tree too), either with the numeric suffixes the agent
 * adds (NAME.mtt.1 for an exec'd image, NAME.mtt.PID for a fork child when
 * the output has no %p), but not a writer's temporary (PATH.tmp, or a
 * *.tmp.* name). */
static bool is_report_name(const char *name)
{
    size_t len = run_output_base_len(name);
    return name[0] != '.' && len > 4 &&
           (strncmp(name + len - 4, ".mtr", 4) == 0 || strncmp(name + len - 4, ".mtt", 4) == 0) &&
           !strstr(name, ".tmp.");
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strverscmp((*a)->d_name, (*b)->d_name);
}

static int filter_reports(const struct dirent *d)
{
    return is_report_name(d->d_name);
}

/* Adds every report file of `dir`, in version order. Returns 0 (with an
 * error line printed when it holds none), or CLI_FAILED. */
static int add_directory(struct file_list *l, const char *dir, bool *failed)
{
    struct dirent **names;
    int n = scandir(dir, &names, filter_reports, by_name);
    if (n < 0) {
        cli_error("%s: cannot read the directory: %s", dir, strerror(errno));
        *failed = true;
        return 0;
    }
    int rc = 0, added = 0;
    size_t dl = strlen(dir);
    for (int i = 0; i < n; i++) {
        char *path;
        if (rc == 0) {
            bool slash = dl && dir[dl - 1] == '/';
            if (asprintf(&path, "%s%s%s", dir, slash ? "" : "/", names[i]->d_name) < 0)
                rc = -ENOMEM;
            else {
                struct stat st;
                if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
                    free(path); /* a directory named *.mtr or *.mtt: not a report */
                } else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
                    /* A FIFO or a device found in the directory (not named
                     * by the user): opening it could wait for ever. */
                    cli_error("%s: not a regular file; skipped", path);
                    *failed = true;
                    free(path);
                } else if ((rc = list_add(l, path)) == 0) {
                    added++;
                }
            }
        }
        free(names[i]);
    }
    free(names);
    if (rc < 0)
        return cli_error("out of memory");
    if (added == 0) {
        cli_error("%s: no report files (*.mtr, *.mtt) in this directory", dir);
        *failed = true;
    }
    return 0;
}

/* `memtrail report DIR` / `memtrail report FILE FILE...`. */
static int report_tree(char **args, int nargs, bool json, const struct report_scale *scale)
{
    struct file_list files = {0};
    bool failed = false;
    int rc = CLI_OK;
    for (int i = 0; i < nargs && rc == CLI_OK; i++) {
        struct stat st;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = add_directory(&files, args[i], &failed);
        } else {
            char *copy = strdup(args[i]);
            if (!copy || list_add(&files, copy) < 0)
                rc = cli_error("out of memory");
        }
    }
    struct report *reports = calloc(files.n + 1, sizeof *reports);
    const char **names = calloc(files.n + 1, sizeof *names);
    if (rc == CLI_OK && (!reports || !names))
        rc = cli_error("out of memory");
    size_t nread = 0;
    for (size_t i = 0; i < files.n && rc == CLI_OK; i++) {
        char err[REPORT_ERR_MAX];
        int r = analyze_read_any(files.paths[i], &reports[nread], err, sizeof err);
        if (r < 0) {
            cli_error("%s", err);
            failed = true;
        }
        if (r < 0 && r != -ENODATA) {
            report_free(&reports[nread]);
            continue;
        }
        names[nread++] = files.paths[i]; /* a truncated report is shown as far as it goes */
    }
    if (rc == CLI_OK && nread > 0) {
        int prc = json ? report_tree_print_json(stdout, reports, names, nread)
                       : report_tree_print_text(stdout, reports, names, nread, scale);
        rc = cli_write_status(prc);
    }
    for (size_t i = 0; i < nread; i++)
        report_free(&reports[i]);
    for (size_t i = 0; i < files.n; i++)
        free(files.paths[i]);
    free(files.paths);
    free(reports);
    free(names);
    if (rc != CLI_OK)
        return rc;
    return failed ? CLI_FAILED : CLI_OK;
}

int cmd_report(int argc, char **argv)
{
    bool json = false, detail_given = false, detail = false;
    struct report_scale scale;
    report_scale_parse("KB", &scale);
    struct detail_options dopt = {0};
    const struct cli_option options[] = {
        CLI_OPT_SCALE(&scale),
        CLI_OPT_JSON(&json, "print JSON instead (raw byte counts; schema memtrail/1, keys in docs/json.md)"),
        CLI_OPT_DETAIL(&dopt, &detail_given),
        {0},
    };
    int npos = cli_parse(&report_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    char **positional = argv;
    /* A first word that is the view, or that looks like one while others
     * follow (`report detail x.mtr`: no such file, no slash, no .mtr), is
     * the view. */
    struct stat st;
    const char *first = positional[0];
    size_t fl = strlen(first);
    bool view_like = strcmp(first, "-") != 0 && stat(first, &st) < 0 && !strchr(first, '/') &&
                     !(fl > 4 && strcmp(first + fl - 4, ".mtr") == 0);
    bool view_given = false;
    if (npos >= 2 && (strcmp(first, "summary") == 0 || strcmp(first, "detail") == 0 || view_like)) {
        view_given = true;
        if (strcmp(positional[0], "summary") != 0 && strcmp(positional[0], "detail") != 0)
            return cli_usage_error("report", "unknown report '%s' (accepted: summary, detail)",
                                   positional[0]);
        detail = strcmp(positional[0], "detail") == 0;
        positional++;
        npos--;
    }
    if (detail && npos > 1)
        return cli_usage_error("report", "'report detail' reads a single report (got %d files)", npos);
    const char *path = positional[0];
    bool tree = npos > 1 || (strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    /* (a single file may be a trace, shown as 'report detail': known once it is opened) */
    if (detail_given && !detail && (view_given || tree))
        return cli_usage_error("report", "--depth, --top and --sort apply to 'report detail' only");
    if (tree) {
        for (int i = 0; i < npos; i++)
            if (strcmp(positional[i], "-") == 0)
                return cli_usage_error("report", "- (stdin) reads a single report, not one of several");
        return report_tree(positional, npos, json, &scale);
    }

    /* One input, opened once: a pipe or a FIFO cannot be read twice, so
     * what it is (a report, a trace) is told from the bytes read ahead. */
    struct report_input in;
    char err[REPORT_ERR_MAX];
    int rc = report_input_open(path, &in, err, sizeof err);
    if (rc < 0)
        return cli_error("%s", err);
    /* A trace (memtrail run --mode trace) shows as a detail report unless
     * 'summary' is asked for: its stacks are the sites. */
    if (!view_given && analyze_input_is_trace(&in))
        detail = true;
    if (detail_given && !detail) {
        report_input_close(&in);
        return cli_usage_error("report", "--depth, --top and --sort apply to 'report detail' only");
    }
    if (detail)
        return detail_cli_report(&in, json, &scale, &dopt);

    struct report r;
    rc = analyze_read_input(&in, &r, err, sizeof err); /* a report or a trace */
    report_input_close(&in);
    if (rc < 0 && rc != -ENODATA) {
        report_free(&r);
        return cli_error("%s", err);
    }
    /* A truncated report still holds everything before the cut: show it. */
    int prc = json ? report_print_json(stdout, &r) : report_print_text(stdout, &r, &scale);
    cli_print_caveats(path, &r); /* a trace's: its figures are no better than it */
    if (!json && prc == 0 && (r.has & REPORT_HAS_SITES))
        printf(
            "Detail report: 'memtrail report detail %s' shows its %zu allocation sites with their stacks.\n",
            path, r.nsites);
    report_free(&r);
    if (cli_write_status(prc) != CLI_OK)
        return CLI_FAILED;
    if (rc < 0)
        return cli_error("%s", err);
    return CLI_OK;
}
