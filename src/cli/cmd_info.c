/* cmd_info.c — `memtrail info FILE|PID [--json] [--kind K] [--percentiles
 * LIST]`: the memory info of a report file, or of a running tracked
 * process (its summary asked over the control socket, as `memtrail query
 * PID summary` does): the last event of each kind, the time spent in
 * memory management, and the tail-latency report of the request spans
 * (src/report/report_info*.c; docs/info.md). `memtrail query PID info`
 * prints the same through info_cli_print. */
#include "cli/cli.h"
#include "report/info.h"
#include "report/report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const struct cli_choice info_kind_choices[] = {
    {"any", 0, false},   {"peak", 1, false},     {"grow", 2, false}, {"trim", 3, false},
    {"limit", 4, false}, {"periodic", 5, false}, {NULL, 0, false},
};

static const struct cli_command info_cmd = {
    .name = "info",
    .usage = "usage: memtrail info FILE|PID [--json] [--kind any|peak|grow|trim|limit|periodic]\n"
             "                      [--percentiles LIST] [--timeout SECONDS]\n",
    .about = "Print the memory info of the report FILE (written by 'memtrail run'; - reads\n"
             "stdin), or of the running process PID, tracked by memtrail (asked over its\n"
             "control socket, without stopping it): the last memory event of each kind\n"
             "(peak, grow, trim, limit, periodic, and whichever came last) with every figure\n"
             "of its snapshot, how many there were, the share of the run spent in memory\n"
             "management, and the tail-latency report of the program's request spans\n"
             "(mt_span_begin/mt_span_end): the share of requests memory events hit, the\n"
             "share of their time memory management took, and the same by latency\n"
             "percentile band. An argument of digits names a process unless a file has that\n"
             "name. The guide is docs/info.md.\n",
    .more = "Exit status: 0 ok, 1 the report cannot be read (or is cut short: what it holds\n"
            "is printed first), has no memory info (an older agent wrote it), or the\n"
            "process cannot be asked; 2 bad usage.\n",
    .min_args = 1,
    .max_args = 1,
    .missing = "missing the report FILE or the PID of a process",
    .extra = "too many arguments ('%s')",
};

int info_cli_print(const struct report *r, int read_rc, const char *err, bool json,
                   const struct info_options *o)
{
    if (read_rc < 0 && read_rc != -ENODATA)
        return cli_error("%s", err);
    if (!(r->has & REPORT_HAS_INFO)) {
        if (read_rc < 0)
            return cli_error("%s", err);
        return cli_error("%s: no memory info in this report (written by a memtrail agent older than "
                         "'memtrail info')",
                         err);
    }
    int prc = json ? info_print_json(stdout, r, o) : info_print_text(stdout, r, o);
    if (cli_write_status(prc) != CLI_OK)
        return CLI_FAILED;
    if (read_rc < 0)
        return cli_error("%s", err); /* cut short: shown as far as it goes, then why */
    return CLI_OK;
}

/* Reads the report at `path` and prints its info. */
static int info_file(const char *path, bool json, const struct info_options *o)
{
    struct report_input in;
    char err[REPORT_ERR_MAX];
    int rc = report_input_open(path, &in, err, sizeof err);
    if (rc < 0)
        return cli_error("%s", err);
    struct report r;
    rc = report_read_input(&in, &r, err, sizeof err);
    if (rc == 0)
        snprintf(err, sizeof err, "%s", in.name); /* for the message "FILE: no memory info" */
    report_input_close(&in);
    int status = info_cli_print(&r, rc, err, json, o);
    report_free(&r);
    return status;
}

int info_cli_query(long pid, const char *cmd_name, int timeout_s, bool json, const struct info_options *o)
{
    struct query_target t;
    char *buf = NULL;
    size_t len = 0;
    int rc = query_open(pid, cmd_name, &t);
    if (rc == 0)
        rc = query_ask(&t, "summary\n", timeout_s * 1000, &buf, &len);
    if (rc == 0) {
        char name[64], err[REPORT_ERR_MAX];
        snprintf(name, sizeof name, "process %ld", pid);
        struct report r;
        int rrc = query_read_report(buf, len, name, &r, err, sizeof err);
        if (rrc == 0)
            snprintf(err, sizeof err, "%s", name);
        rc = info_cli_print(&r, rrc, err, json, o);
        report_free(&r);
    }
    free(buf);
    query_close(&t);
    return rc;
}

int cmd_info(int argc, char **argv)
{
    bool json = false;
    int timeout_s = 5;
    struct info_options o;
    info_options_default(&o);
    const struct cli_option options[] = {
        CLI_OPT_JSON(&json, "print JSON instead (schema memtrail/1, keys in docs/info.md)"),
        CLI_OPT_INFO(&o, NULL),
        CLI_OPT_TIMEOUT(&timeout_s),
        {0},
    };
    int npos = cli_parse(&info_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    const char *what = argv[0];
    struct stat st;
    long pid;
    if (query_parse_pid(what, &pid) == 0 && stat(what, &st) < 0)
        return info_cli_query(pid, "info", timeout_s, json, &o);
    return info_file(what, json, &o);
}
