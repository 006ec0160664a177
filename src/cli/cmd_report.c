/* cmd_report.c — `memtrail report [summary] FILE [--scale KB|MB|GB] [--json]`:
 * reads a summary report (.mtr) and prints it as NMT-like text or JSON. A
 * report cut short prints what it holds, then the error, and exits 1. */
#include "cli/cli.h"
#include "report/report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char report_usage[] =
    "usage: memtrail report [summary] FILE [--scale KB|MB|GB] [--json]\n"
    "\n"
    "Print the summary report FILE (written by 'memtrail run'; - reads stdin) in\n"
    "the layout of HotSpot's 'jcmd PID VM.native_memory summary': the total,\n"
    "then one block per category, largest live size first, memtrail's own\n"
    "overhead last, and the errors memtrail detected (double frees, overwritten\n"
    "canaries, frees of foreign pointers) when there are any.\n"
    "\n"
    "Options:\n"
    "  --scale KB|MB|GB  unit of the text report, rounded to the nearest (default KB)\n"
    "  --json            print JSON instead (raw byte counts; keys in docs/cli.md)\n"
    "  -h, --help        show this help\n"
    "\n"
    "A report cut short (no end marker) is printed as far as it goes, with\n"
    "\"complete\": false in JSON; the error goes to stderr and the exit status is 1.\n";

int cmd_report(int argc, char **argv)
{
    const char *positional[3];
    int npos = 0;
    bool json = false, options_done = false;
    struct report_scale scale;
    report_scale_parse("KB", &scale);

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        if (options_done || arg[0] != '-' || arg[1] == '\0') {
            if (npos == 2)
                return cli_usage_error("report", "too many arguments ('%s')", arg);
            positional[npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (cli_is_help(arg)) {
            fputs(report_usage, stdout);
            return CLI_OK;
        }
        if (strcmp(arg, "--json") == 0) {
            json = true;
            continue;
        }
        int m = cli_option_value("report", argc, argv, &i, "--scale", NULL, &value);
        if (m < 0)
            return CLI_USAGE;
        if (m > 0) {
            if (report_scale_parse(value, &scale) < 0)
                return cli_usage_error("report", "--scale: unknown scale '%s' (accepted: KB, MB, GB)",
                                       value);
            continue;
        }
        return cli_usage_error("report", "unknown option '%s'", arg);
    }
    if (npos == 0)
        return cli_usage_error("report", "missing the report FILE");
    const char *path = positional[npos - 1];
    if (npos == 2 && strcmp(positional[0], "summary") != 0)
        return cli_usage_error("report", "unknown report '%s' (accepted: summary)", positional[0]);

    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = strcmp(path, "-") == 0 ? report_read_stream(stdin, "(stdin)", &r, err, sizeof err)
                                    : report_read(path, &r, err, sizeof err);
    if (rc < 0 && rc != -ENODATA) {
        report_free(&r);
        return cli_error("%s", err);
    }
    /* A truncated report still holds everything before the cut: show it. */
    int prc = json ? report_print_json(stdout, &r) : report_print_text(stdout, &r, &scale);
    report_free(&r);
    if (prc == -ENOMEM)
        return cli_error("out of memory");
    errno = 0;
    if (fflush(stdout) != 0 || prc < 0)
        return cli_error("cannot write the report to stdout: %s", strerror(errno ? errno : EIO));
    if (rc < 0)
        return cli_error("%s", err);
    return CLI_OK;
}
