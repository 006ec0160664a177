/* cmd_query.c — `memtrail query PID [summary|baseline|diff] [--json]
 * [--scale KB|MB|GB] [--timeout SECONDS]`: asks a running, tracked process
 * over its control socket (src/agent/control.c; protocol in docs/cli.md;
 * the client in query_client.c) for its summary, to keep a baseline, or
 * for what changed since, or (`info`) for its memory info as `memtrail info
 * PID` shows it; `start detail|trace [-o FILE]` and `stop` switch
 * its recording on and off (src/agent/record.c). */
#include "cli/cli.h"
#include "report/detail.h"
#include "report/info.h"
#include "report/metrics.h"
#include "report/report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char query_about[] =
    "Ask the running process PID, tracked by memtrail (started with 'memtrail\n"
    "run'), without stopping it:\n"
    "\n"
    "  summary   its summary now, laid out as 'memtrail report' does (default)\n"
    "  detail    its allocation sites now, symbolized, as 'memtrail report detail'\n"
    "            shows them (the process must run in detail or sample mode;\n"
    "            --depth, --top and --sort as there)\n"
    "  baseline  keep its summary now as the baseline (in the process) and print it\n"
    "  diff      what changed, category by category, since the baseline\n"
    "  metrics   its summary now in Prometheus's text format, as 'memtrail exporter'\n"
    "            serves it (docs/metrics.md)\n"
    "  info      its memory events and the tail-latency report of its request spans,\n"
    "            as 'memtrail info PID' prints them (--kind and --percentiles as there)\n"
    "  start detail  record call sites from now on (summary counting goes on)\n"
    "  start sample  record sampled call sites from now on (a sample-mode process)\n"
    "  start trace   record every event from now on, in a trace file: FILE, or the\n"
    "                process's output when it runs in trace mode\n"
    "  stop      back to summary counting; a trace is finished, and its path said\n"
    "            (the process must run in detail, sample or trace mode, e.g. with\n"
    "            start=off)\n";

/* Parses one report from buf[0..len). */
static int parse(const char *buf, size_t len, const char *name, struct report *r)
{
    char err[REPORT_ERR_MAX];
    return query_read_report(buf, len, name, r, err, sizeof err) < 0 ? cli_error("%s", err) : 0;
}

/* The end of the first report in a diff reply: just past its "end" line. */
static size_t first_report_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++) {
        if ((i == 0 || buf[i - 1] == '\n') && memcmp(buf + i, "end\n", 4) == 0)
            return i + 4;
    }
    return len;
}

static int print_reply(const struct query_target *t, const char *cmd, const char *buf, size_t len, bool json,
                       const struct report_scale *scale, const struct detail_options *dopt)
{
    char name[64];
    int rc, prc;
    if (strcmp(cmd, "detail") == 0) {
        struct report r;
        snprintf(name, sizeof name, "process %ld", t->pid);
        rc = parse(buf, len, name, &r);
        if (rc == 0)
            rc = detail_cli_print(&r, name, json, scale, dopt);
        report_free(&r);
        return rc;
    }
    if (strcmp(cmd, "metrics") == 0) {
        struct report r;
        snprintf(name, sizeof name, "process %ld", t->pid);
        rc = parse(buf, len, name, &r);
        const struct report *one = &r;
        prc = rc == 0 ? metrics_print(stdout, &one, 1) : 0;
        report_free(&r);
    } else if (strcmp(cmd, "diff") == 0) {
        struct report base, cur;
        size_t cut = first_report_end(buf, len);
        snprintf(name, sizeof name, "process %ld (baseline)", t->pid);
        rc = parse(buf, cut, name, &base);
        snprintf(name, sizeof name, "process %ld", t->pid);
        if (rc == 0)
            rc = parse(buf + cut, len - cut, name, &cur);
        else
            memset(&cur, 0, sizeof cur);
        prc = 0;
        if (rc == 0)
            prc = json ? report_diff_print_json(stdout, &base, &cur)
                       : report_diff_print_text(stdout, &base, &cur, scale);
        report_free(&base);
        report_free(&cur);
    } else {
        struct report r;
        snprintf(name, sizeof name, "process %ld", t->pid);
        rc = parse(buf, len, name, &r);
        prc = 0;
        if (rc == 0 && strcmp(cmd, "baseline") == 0) {
            if (json)
                fprintf(stderr, "memtrail: baseline of process %ld set\n", t->pid);
            else
                printf("Baseline of process %ld set; 'memtrail query %ld diff' shows what changed since.\n\n",
                       t->pid, t->pid);
        }
        if (rc == 0)
            prc = json ? report_print_json(stdout, &r) : report_print_text(stdout, &r, scale);
        report_free(&r);
    }
    if (rc != 0)
        return rc;
    return cli_write_status(prc);
}

static const struct cli_command query_cmd = {
    .name = "query",
    .usage = "usage: memtrail query PID [summary|detail|baseline|diff|metrics] [--json]\n"
             "                          [--scale KB|MB|GB] [--timeout SECONDS] [--depth N] [--top N]\n"
             "                          [--sort live|allocated]\n"
             "       memtrail query PID info [--json] [--kind K] [--percentiles LIST] [--timeout SECONDS]\n"
             "       memtrail query PID start detail|sample|trace [-o FILE]\n"
             "       memtrail query PID stop\n",
    .about = query_about,
    .more = "Only your own processes can be queried. The process listens on\n"
            "$XDG_RUNTIME_DIR/memtrail/PID.sock or /tmp/memtrail-UID/PID.sock (mode 0600,\n"
            "in a 0700 directory); MEMTRAIL_OPTIONS=query=off turns that off.\n",
    .min_args = 1,
    .max_args = 3,
    .missing = "missing the PID of the process to ask",
    .extra = "too many arguments ('%s')",
};

/* The request line of `start MODE [-o FILE]`, FILE made absolute against
 * our directory (the process's may differ). */
static int start_request(const char *mode, const char *file, char *line, size_t cap)
{
    if (strcmp(mode, "detail") != 0 && strcmp(mode, "sample") != 0 && strcmp(mode, "trace") != 0)
        return cli_usage_error("query", "start: unknown recording '%s' (accepted: detail, sample, trace)",
                               mode);
    if (file && strcmp(mode, "trace") != 0)
        return cli_usage_error("query", "-o FILE applies to 'start trace' only");
    if (file && (!*file || strchr(file, '\n') || strchr(file, ',')))
        return cli_usage_error("query", "-o: '%s' is not a usable path (no newline or ',')", file);
    char cwd[4096] = "";
    if (file && file[0] != '/' && !getcwd(cwd, sizeof cwd))
        return cli_error("getcwd: %s", strerror(errno));
    int n = file ? snprintf(line, cap, "start trace %s%s%s\n", cwd, cwd[0] ? "/" : "", file)
                 : snprintf(line, cap, "start %s\n", mode);
    if (n < 0 || (size_t)n >= cap)
        return cli_usage_error("query", "-o: the path is too long");
    return 0;
}

/* "ok TEXT": TEXT on stdout. */
static int print_switch(const char *buf)
{
    const char *text = strncmp(buf, "ok", 2) == 0 ? buf + 2 + (buf[2] == ' ') : buf;
    fputs(text, stdout);
    return cli_write_status(0);
}

int cmd_query(int argc, char **argv)
{
    int timeout_s = 5;
    const char *output = NULL;
    bool json = false, detail_given = false, info_given = false;
    struct info_options iopt;
    info_options_default(&iopt);
    struct report_scale scale;
    report_scale_parse("KB", &scale);
    struct detail_options dopt = {0};
    const struct cli_option options[] = {
        CLI_OPT_JSON(&json, "print JSON instead (schema memtrail/1, keys in docs/json.md)"),
        CLI_OPT_SCALE(&scale),
        CLI_OPT_TIMEOUT(&timeout_s),
        CLI_OPT_DETAIL(&dopt, &detail_given),
        CLI_OPT_INFO(&iopt, &info_given),
        {.kind = CLI_OPT_STRING,
         .name = "output",
         .short_name = 'o',
         .arg = "FILE",
         .value = &output,
         .help = "start trace: where the trace goes (a relative path is taken from this directory)"},
        {0},
    };
    int npos = cli_parse(&query_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    char **positional = argv;
    const char *cmd = npos >= 2 ? positional[1] : "summary";
    if (npos == 3 && strcmp(cmd, "start") != 0)
        return cli_usage_error("query", "too many arguments ('%s')", positional[2]);
    bool switching = strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0;
    if (strcmp(cmd, "summary") != 0 && strcmp(cmd, "detail") != 0 && strcmp(cmd, "baseline") != 0 &&
        strcmp(cmd, "diff") != 0 && strcmp(cmd, "metrics") != 0 && strcmp(cmd, "info") != 0 && !switching)
        return cli_usage_error(
            "query",
            "unknown request '%s' (accepted: summary, detail, baseline, diff, metrics, info, "
            "start, stop)",
            cmd);
    if (detail_given && strcmp(cmd, "detail") != 0)
        return cli_usage_error("query", "--depth, --top and --sort apply to 'query PID detail' only");
    if (info_given && strcmp(cmd, "info") != 0)
        return cli_usage_error("query", "--kind and --percentiles apply to 'query PID info' only");
    if (strcmp(cmd, "start") == 0 && npos < 3)
        return cli_usage_error("query", "start: say what to record (start detail, or start trace -o FILE)");
    if (output && strcmp(cmd, "start") != 0)
        return cli_usage_error("query", "-o FILE applies to 'start trace' only");
    if ((switching || strcmp(cmd, "metrics") == 0) && json)
        return cli_usage_error("query", "--json does not apply to '%s'", cmd);
    char line[4200];
    int src = strcmp(cmd, "start") == 0 ? start_request(positional[2], output, line, sizeof line) : 0;
    if (src != 0)
        return src; /* a usage error, or getcwd failed (exit 1) */

    long pid;
    if (query_parse_pid(positional[0], &pid) < 0)
        return cli_usage_error("query", "'%s' is not a process id", positional[0]);
    if (strcmp(cmd, "info") == 0)
        return info_cli_query(pid, "query", timeout_s, json,
                              &iopt); /* the summary, shown as 'memtrail info PID' */
    struct query_target t;
    char *buf = NULL;
    size_t len = 0;
    int rc = query_open(pid, "query", &t);
    if (strcmp(cmd, "start") != 0) /* metrics: the process's summary, formatted here */
        snprintf(line, sizeof line, "%s\n", strcmp(cmd, "metrics") == 0 ? "summary" : cmd);
    if (rc == 0)
        rc = query_ask(&t, line, timeout_s * 1000, &buf, &len);
    if (rc == 0)
        rc = switching ? print_switch(buf) : print_reply(&t, cmd, buf, len, json, &scale, &dopt);
    free(buf);
    query_close(&t);
    return rc;
}
