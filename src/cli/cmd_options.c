/* cmd_options.c — `memtrail options [--markdown]`: the agent's options
 * (MEMTRAIL_OPTIONS), read from the option table every parser uses
 * (common/options_table.c). --markdown prints the README's table. */
#include "cli/cli.h"
#include "common/options_table.h"

#include <stdbool.h>
#include <stdio.h>

static void values(FILE *f, const mt_optdef *d, int markdown)
{
    if (d->type != MT_OPTT_CHOICE) {
        fputs(d->accepted, f);
        return;
    }
    for (const mt_optchoice *c = d->choices; c->name; c++) {
        fprintf(f, "%s%s%s%s", c == d->choices ? "" : ", ", markdown ? "`" : "", c->name,
                markdown ? "`" : "");
        if (c->doc && *c->doc)
            fprintf(f, " (%s)", c->doc);
    }
}

static const struct cli_command options_cmd = {
    .name = "options",
    .usage = "usage: memtrail options [--markdown]\n",
    .about = "The agent's options: MEMTRAIL_OPTIONS=\"key=value:key=value...\" (memtrail run\n"
             "sets it; in a value, \\: stands for ':'), with what each accepts and its\n"
             "default.\n",
    .max_args = 0,
    .extra = "unknown argument '%s'",
};

int cmd_options(int argc, char **argv)
{
    bool markdown = false;
    const struct cli_option options[] = {
        {.kind = CLI_OPT_FLAG,
         .name = "markdown",
         .value = &markdown,
         .help = "print them as the README's table"},
        {0},
    };
    int n = cli_parse(&options_cmd, options, argc, argv);
    if (n < 0)
        return cli_parse_exit(n);
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
