/* main.c — memtrail's entry point: the subcommand table, top-level
 * --help/--version/help CMD, and the option and error helpers every
 * subcommand shares (cli.h). */
#include "cli/cli.h"
#include "report/report.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    { "run",    cmd_run,    "run a program with the memtrail agent and write its summary report" },
    { "report", cmd_report, "print a summary report (.mtr) as NMT-like text or JSON" },
    { "diff",   cmd_diff,   "compare two summary reports, category by category" },
    { "query",  cmd_query,  "ask a running tracked process for its summary, a baseline, or a diff" },
    { "export", cmd_export, "export a detail report's or a trace's sites as folded stacks, pprof or JSON" },
    { "analyze", cmd_analyze, "analyse a trace: peak, leaks, temporary allocations, hot stacks, timeline" },
    { "sessions", cmd_sessions, "show a running tracked process's event sessions (as dm_xe_sessions)" },
    { "options", cmd_options, "the agent's options (MEMTRAIL_OPTIONS): what each accepts and its default" },
    { "xe",     cmd_xe,     "plan event-session buffers: exact sizes per partition mode (Extended Events arithmetic)" },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

int cli_quiet;

static void vsay(const char *fmt, va_list ap)
{
    if (cli_quiet)
        return;
    fputs("memtrail: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    return CLI_FAILED;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try 'memtrail%s%s --help' for usage.\n", cmd ? " " : "", cmd ? cmd : "");
    return CLI_USAGE;
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_option_value(const char *cmd, int argc, char **argv, int *i, const char *name,
                     const char *short_name, const char **value)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) == 0 && arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    bool separate = strcmp(arg, name) == 0 || (short_name && strcmp(arg, short_name) == 0);
    if (!separate && short_name && strncmp(arg, short_name, strlen(short_name)) == 0) {
        *value = arg + strlen(short_name);   /* "-oFILE" */
        return 1;
    }
    if (!separate)
        return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option '%s' needs a value", arg);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

static void usage(FILE *out)
{
    fputs("usage: memtrail [--version] [--help] COMMAND [ARGS...]\n"
          "\n"
          "memtrail tracks where a native Linux program's memory goes.\n"
          "\n"
          "Commands:\n", out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "'memtrail help COMMAND' or 'memtrail COMMAND --help' describes a command.\n"
          "Exit status: 0 ok, 1 memtrail failed, 2 bad usage; 'run' passes the\n"
          "program's own status through.\n", out);
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int run_main(int argc, char **argv);

/* Every exit goes through the check of standard output. */
int main(int argc, char **argv) { return cli_close_stdout(run_main(argc, argv)); }

static int run_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *first = argv[1];
    if (cli_is_help(first)) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(first, "--version") == 0) {
        printf("memtrail %s\n", MT_VERSION_STR);
        return CLI_OK;
    }
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            usage(stdout);
            return CLI_OK;
        }
        if (argc > 3)
            return cli_usage_error(NULL, "help: too many arguments (expected one command)");
        const struct command *c = find_command(argv[2]);
        if (!c)
            return cli_usage_error(NULL, "help: unknown command '%s'", argv[2]);
        char *help_argv[] = { (char *)c->name, (char *)"--help", NULL };
        return c->fn(2, help_argv);
    }
    if (first[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s'", first);
    const struct command *c = find_command(first);
    if (!c)
        return cli_usage_error(NULL, "unknown command '%s'", first);
    return c->fn(argc - 1, argv + 1);
}

int cli_output_option(const char *cmd, int argc, char **argv, int *i, _Bool *json, struct report_scale *scale)
{
    const char *value;
    if (strcmp(argv[*i], "--json") == 0) {
        *json = 1;
        return 1;
    }
    int m = cli_option_value(cmd, argc, argv, i, "--scale", NULL, &value);
    if (m <= 0)
        return m;
    if (report_scale_parse(value, scale) < 0) {
        cli_usage_error(cmd, "--scale: unknown scale '%s' (accepted: KB, MB, GB)", value);
        return -1;
    }
    return 1;
}
