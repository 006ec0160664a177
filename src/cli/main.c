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
    {"run", cmd_run, "run a program with the memtrail agent and write its summary report"},
    {"report", cmd_report, "print a summary report (.mtr) as NMT-like text or JSON"},
    {"diff", cmd_diff, "compare two summary reports, category by category"},
    {"query", cmd_query, "ask a running tracked process for its summary, a baseline, or a diff"},
    {"top", cmd_top, "a live view of a running tracked process: its categories and top sites"},
    {"info", cmd_info, "memory events, time in memory management, and requests' tail latency"},
    {"exporter", cmd_exporter, "serve tracked processes' metrics (Prometheus) and heap profiles (pprof)"},
    {"html", cmd_html, "write a self-contained HTML page (charts, flame graphs, tables) of any input"},
    {"export", cmd_export, "export a detail report's or a trace's sites as folded stacks, pprof or JSON"},
    {"analyze", cmd_analyze, "analyse a trace: peak, leaks, temporary allocations, hot stacks, timeline"},
    {"sessions", cmd_sessions, "show a running tracked process's event sessions (as dm_xe_sessions)"},
    {"options", cmd_options, "the agent's options (MEMTRAIL_OPTIONS): what each accepts and its default"},
    {"refset", cmd_refset, "record a scenario's reference set (pages touched and released) and report it"},
    {"xe", cmd_xe, "plan event-session buffers: exact sizes per partition mode (Extended Events arithmetic)"},
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

/* The command list, for memtrail's own --help. */
static const char *command_list(void)
{
    static char text[2048];
    size_t used = (size_t)snprintf(text, sizeof text,
                                   "memtrail tracks where a native Linux program's memory goes.\n\n"
                                   "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS && used < sizeof text; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "  %-8s %s\n", commands[i].name,
                                 commands[i].summary);
    return text;
}

static struct cli_command top = {
    .usage = "usage: memtrail [--version] [--help] COMMAND [ARGS...]\n",
    .max_args = -1,
    .more = "'memtrail help COMMAND' or 'memtrail COMMAND --help' describes a command.\n"
            "Exit status: 0 ok, 1 memtrail failed, 2 bad usage; 'run' passes the\n"
            "program's own status through.\n",
    .stop_at_argument = true,
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int run_main(int argc, char **argv);

/* Every exit goes through the check of standard output. */
int main(int argc, char **argv)
{
    return cli_close_stdout(run_main(argc, argv));
}

static int run_main(int argc, char **argv)
{
    bool version = false;
    const struct cli_option options[] = {
        {.kind = CLI_OPT_FLAG, .name = "version", .value = &version, .help = "print memtrail's version"},
        {0},
    };
    top.about = command_list();
    if (argc < 2) {
        cli_print_help(stderr, &top, options);
        return CLI_USAGE;
    }
    int n = cli_parse(&top, options, argc, argv);
    if (n < 0)
        return cli_parse_exit(n);
    if (version) {
        printf("memtrail %s\n", MT_VERSION_STR);
        return CLI_OK;
    }
    if (n == 0) {
        cli_print_help(stderr, &top, options);
        return CLI_USAGE;
    }
    if (strcmp(argv[0], "help") == 0) {
        if (n == 1) {
            cli_print_help(stdout, &top, options);
            return CLI_OK;
        }
        if (n > 2)
            return cli_usage_error(NULL, "help: too many arguments (expected one command)");
        const struct command *cmd = find_command(argv[1]);
        if (!cmd)
            return cli_usage_error(NULL, "help: unknown command '%s'", argv[1]);
        char *help_argv[] = {(char *)cmd->name, (char *)"--help", NULL};
        return cmd->fn(2, help_argv);
    }
    const struct command *cmd = find_command(argv[0]);
    if (!cmd)
        return cli_usage_error(NULL, "unknown command '%s'", argv[0]);
    return cmd->fn(n, argv);
}

int cli_parse_scale(const char *value, void *scale)
{
    return report_scale_parse(value, scale);
}
