/* report_main.c — `memtrail refset report` (being built: see refset.h). */
#include "cli/cli.h"
#include "refset/refset.h"

int refset_report_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error("refset report: not built yet");
}
