/* cmd_options.c — `memtrail options [--markdown]`: the agent's options
 * (MEMTRAIL_OPTIONS), read from the option table every parser uses
 * (common/options_table.c). --markdown prints the README's table. */
#include "cli/cli.h"
#include "common/options_table.h"

#include <stdio.h>
#include <string.h>

static const char options_usage[] =
    "usage: memtrail options [--markdown]\n"
    "\n"
    "The agent's options: MEMTRAIL_OPTIONS=\"key=value:key=value...\" (memtrail run\n"
    "sets it; in a value, \\: stands for ':'), with what each accepts and its\n"
    "default. --markdown prints them as the README's table.\n";

static void values(FILE *f, const mt_optdef *d, int markdown)
{
    if (d->type != MT_OPTT_CHOICE) {
        fputs(d->accepted, f);
        return;
    }
    for (const mt_optchoice *c = d->choices; c->name; c++) {
        fprintf(f, "%s%s%s%s", c == d->choices ? "" : ", ", markdown ? "`" : "", c->name, markdown ? "`" : "");
        if (c->doc && *c->doc)
            fprintf(f, " (%s)", c->doc);
    }
}

int cmd_options(int argc, char **argv)
{
    int markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--markdown") == 0) {
            markdown = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(options_usage, stdout);
            return CLI_OK;
        } else {
            return cli_usage_error("options", "unknown argument '%s'", argv[i]);
        }
    }
    if (markdown)
        puts("| key | what | values | default |\n|---|---|---|---|");
    for (int k = 0; k < MT_NOPT; k++) {
        const mt_optdef *d = &mt_optdefs[k];
        if (markdown) {
            printf("| `%s` | %s | ", d->key, d->doc);
            values(stdout, d, 1);
            printf(" | `%s` |\n", d->dflt);
        } else {
            printf("%s\n    %s\n    values: ", d->key, d->doc);
            values(stdout, d, 0);
            printf("\n    default: %s\n", d->dflt);
        }
    }
    return CLI_OK;
}
