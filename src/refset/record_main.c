/* record_main.c — `memtrail refset record` (being built: see refset.h). */
#include "cli/cli.h"
#include "refset/refset.h"

int refset_record_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error("refset record: not built yet");
}
