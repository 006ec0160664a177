/* cmd_refset.c — `memtrail refset record|report`: reference sets
 * (docs/refset.md). The subcommands live in src/refset (refset.h). */
#include "cli/cli.h"
#include "refset/refset.h"

#include <string.h>

static const struct cli_command refset_cmd = {
    .name = "refset",
    .usage = "usage: memtrail refset record|report ...\n",
    .about = "Reference sets (as Windows' WPR/WPA measure them): which pages a scenario\n"
             "touched and released, system-wide, by process, category and class.\n"
             "\n"
             "Commands:\n"
             "  record   run a program (or attach to processes) and record its page\n"
             "           references and releases\n"
             "  report   Size, Impact Size and impact types of a recording for any\n"
             "           viewport, by process, category, class or stack\n",
    .more = "'memtrail refset record --help' and 'memtrail refset report --help' describe their options.\n",
    .min_args = 1,
    .max_args = -1,
    .missing = "missing the refset command (accepted: record, report)",
    .stop_at_argument = true,
};

int cmd_refset(int argc, char **argv)
{
    static const struct cli_option no_options[] = {{0}};
    int n = cli_parse(&refset_cmd, no_options, argc, argv);
    if (n < 0)
        return cli_parse_exit(n);
    if (strcmp(argv[0], "record") == 0)
        return refset_record_main(n, argv);
    if (strcmp(argv[0], "report") == 0)
        return refset_report_main(n, argv);
    return cli_usage_error("refset", "unknown refset command '%s' (accepted: record, report)", argv[0]);
}
