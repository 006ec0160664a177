/* parse_options.c — the commands' argument parser and their --help
 * (parse_options.h). */
#include "cli/parse_options.h"

#include "cli/cli.h"
#include "common/options_table.h"
#include "xe/xe_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HELP_WIDTH 79  /* the help's lines, at most */
#define HELP_COLUMN 24 /* where an option's help starts */

/* ---- values ------------------------------------------------------------ */

/* Strict decimal: an optional '-', then digits, nothing else. */
static int parse_ll(const char *s, long long *out)
{
    const char *p = s + (*s == '-');
    if (*p < '0' || *p > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

/* "a, b, c": the listed choices of agent option k, but `except`. */
static void agent_choices(char *buf, size_t len, int k, const char *except)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const mt_optchoice *ch = mt_optdefs[k].choices; ch->name; ch++) {
        if (except && strcmp(ch->name, except) == 0)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", ch->name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

static int agent_value(const char *cmd, const struct cli_option *o, const char *v)
{
    const mt_optdef *d = &mt_optdefs[o->agent];
    int64_t n;
    bool ok = mt_opt_value(o->agent, v, &n) == 0 && !(o->except && strcmp(v, o->except) == 0);
    if (ok) {
        *(const char **)o->value = v;
        return 0;
    }
    char accepted[512];
    if (d->type == MT_OPTT_CHOICE)
        agent_choices(accepted, sizeof accepted, o->agent, o->except);
    else
        snprintf(accepted, sizeof accepted, "%s", d->accepted);
    if (o->noun)
        return cli_usage_error(cmd, "--%s: unknown %s '%s' (accepted: %s)", o->name, o->noun, v, accepted);
    return cli_usage_error(cmd, "--%s: bad value '%s' (accepted: %s)", o->name, v, accepted);
}

static int choice_value(const char *cmd, const struct cli_option *o, const char *v)
{
    char accepted[512];
    size_t used = 0;
    accepted[0] = '\0';
    for (const struct cli_choice *ch = o->choices; ch->name; ch++) {
        if (strcmp(ch->name, v) == 0) {
            *(int *)o->value = ch->value;
            return 0;
        }
        if (ch->hidden || used >= sizeof accepted)
            continue;
        int n = snprintf(accepted + used, sizeof accepted - used, "%s%s", used ? ", " : "", ch->name);
        used += n > 0 ? (size_t)n : 0;
    }
    return cli_usage_error(cmd, "--%s: unknown %s '%s' (accepted: %s)", o->name, o->noun ? o->noun : "value",
                           v, accepted);
}

static const char *unit_name(uint64_t unit)
{
    return unit == 1024 ? "KB" : unit == 1u << 20 ? "MB" : unit == 1u << 30 ? "GB" : "bytes";
}

/* Stores value v of option o. 0, or CLI_USAGE after the usage error. */
static int take_value(const char *cmd, const struct cli_option *o, const char *v)
{
    long long n;
    int rc;
    switch (o->kind) {
    case CLI_OPT_INT:
        if (parse_ll(v, &n) == 0 && n >= o->min && n <= o->max) {
            *(int *)o->value = (int)n;
            return 0;
        }
        if (o->noun)
            return cli_usage_error(cmd, "--%s: '%s' is not %s from %lld to %lld", o->name, v, o->noun, o->min,
                                   o->max);
        return cli_usage_error(cmd, "bad value '%s' for --%s (expected an integer from %lld to %lld)", v,
                               o->name, o->min, o->max);
    case CLI_OPT_STRING: *(const char **)o->value = v; return 0;
    case CLI_OPT_LIST: {
        struct cli_list *l = o->value;
        l->v[l->n++] = v;
        return 0;
    }
    case CLI_OPT_CHOICE: return choice_value(cmd, o, v);
    case CLI_OPT_SIZE:
        rc = xe_parse_size(v, o->unit, o->value);
        if (rc == -ERANGE)
            return cli_usage_error(cmd, "--%s: '%s' is too big (more than 2^64 bytes)", o->name, v);
        if (rc < 0)
            return cli_usage_error(cmd,
                                   "--%s: '%s' is not a size (a number of %s, or with a unit: B, KB, MB, GB)",
                                   o->name, v, unit_name(o->unit));
        return 0;
    case CLI_OPT_PARSE:
        if (o->parse(v, o->value) == 0)
            return 0;
        if (o->noun)
            return cli_usage_error(cmd, "--%s: unknown %s '%s' (accepted: %s)", o->name, o->noun, v,
                                   o->accepted);
        return cli_usage_error(cmd, "--%s: bad value '%s' (accepted: %s)", o->name, v, o->accepted);
    case CLI_OPT_AGENT: return agent_value(cmd, o, v);
    default: return 0;
    }
}

/* ---- argv -------------------------------------------------------------- */

static bool takes_value(const struct cli_option *o)
{
    return o->kind != CLI_OPT_FLAG && o->kind != CLI_OPT_BIT;
}

static const struct cli_option *find_long(const struct cli_option *options, const char *name, size_t len)
{
    for (const struct cli_option *o = options; o && o->kind != CLI_OPT_END; o++)
        if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

static const struct cli_option *find_short(const struct cli_option *options, char s)
{
    for (const struct cli_option *o = options; o && o->kind != CLI_OPT_END; o++)
        if (o->short_name && o->short_name == s)
            return o;
    return NULL;
}

/* One option at argv[*i]. 0 (advancing *i past a separate value),
 * CLI_PARSE_HELP, or CLI_PARSE_ERROR. */
static int one_option(const struct cli_command *c, const struct cli_option *options, int argc, char **argv,
                      int *i)
{
    const char *arg = argv[*i], *inline_value = NULL;
    const struct cli_option *o;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        cli_print_help(stdout, c, options);
        return CLI_PARSE_HELP;
    }
    if (arg[1] == '-') {
        const char *eq = strchr(arg + 2, '=');
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        o = find_long(options, arg + 2, len);
        inline_value = eq ? eq + 1 : NULL;
        if (o && inline_value && !takes_value(o)) {
            cli_usage_error(c->name, "option '--%s' takes no value", o->name);
            return CLI_PARSE_ERROR;
        }
    } else {
        o = find_short(options, arg[1]);
        if (o && arg[2] != '\0') {
            if (!takes_value(o))
                o = NULL; /* no bundled flags: "-ox" is unknown */
            else
                inline_value = arg + 2; /* "-oFILE" */
        }
    }
    if (!o) {
        cli_usage_error(c->name, "unknown option '%s'%s", arg, c->unknown_hint ? c->unknown_hint : "");
        return CLI_PARSE_ERROR;
    }
    if (o->given)
        *o->given = true;
    if (o->kind == CLI_OPT_FLAG) {
        *(bool *)o->value = true;
        return 0;
    }
    if (o->kind == CLI_OPT_BIT) {
        *(unsigned *)o->value |= o->bit;
        return 0;
    }
    const char *v = inline_value;
    if (!v) {
        if (*i + 1 >= argc) {
            cli_usage_error(c->name, "option '%s' needs a value", arg);
            return CLI_PARSE_ERROR;
        }
        v = argv[++*i]; /* whatever it is: "--max-memory -5" is a value */
    }
    return take_value(c->name, o, v) == 0 ? 0 : CLI_PARSE_ERROR;
}

int cli_parse(const struct cli_command *c, const struct cli_option *options, int argc, char **argv)
{
    int n = 0, i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (c->stop_at_argument)
                break;
            argv[n++] = argv[i]; /* n < i: moved down, never over an unread one */
            continue;
        }
        int rc = one_option(c, options, argc, argv, &i);
        if (rc < 0)
            return rc;
    }
    for (; i < argc; i++)
        argv[n++] = argv[i];
    argv[n] = NULL;
    if (n < c->min_args) {
        cli_usage_error(c->name, "%s", c->missing);
        return CLI_PARSE_ERROR;
    }
    if (c->max_args >= 0 && n > c->max_args) {
        cli_usage_error(c->name, c->extra, argv[c->max_args]);
        return CLI_PARSE_ERROR;
    }
    return n;
}

int cli_parse_exit(int parsed)
{
    return parsed == CLI_PARSE_HELP ? CLI_OK : CLI_USAGE;
}

/* ---- --help ------------------------------------------------------------ */

/* Writes text from column `col` (the cursor is there), wrapped at
 * HELP_WIDTH with later lines indented to `indent`; backquotes (the
 * option table's Markdown) are left out. */
static void wrap(FILE *f, const char *text, int col, int indent)
{
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            p++;
            continue;
        }
        size_t word = strcspn(p, " \n"), shown = 0;
        for (size_t k = 0; k < word; k++)
            shown += p[k] != '`';
        if (col > indent && col + 1 + (int)shown > HELP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        for (size_t k = 0; k < word; k++)
            if (p[k] != '`')
                fputc(p[k], f);
        col += (int)shown;
        p += word;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

/* An agent option's help, from the option table: what it does, what it
 * accepts, its default; then the declaration's own help. */
static void agent_help(char *buf, size_t len, const struct cli_option *o)
{
    const mt_optdef *d = &mt_optdefs[o->agent];
    size_t used = (size_t)snprintf(buf, len, "%s", d->doc);
    if (d->type == MT_OPTT_CHOICE) {
        const char *sep = ": ";
        for (const mt_optchoice *ch = d->choices; ch->name && used < len; ch++) {
            if (o->except && strcmp(ch->name, o->except) == 0)
                continue;
            used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s%s", sep, ch->name,
                                     *ch->doc ? " (" : "", ch->doc, *ch->doc ? ")" : "");
            sep = ", ";
        }
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "; default %s.", d->dflt);
    } else if (used < len) {
        used += (size_t)snprintf(buf + used, len - used, " (%s; default %s).", d->accepted, d->dflt);
    }
    if (o->help && used < len)
        snprintf(buf + used, len - used, " %s", o->help);
}

static void print_option(FILE *f, const struct cli_option *o)
{
    char label[96], text[1024];
    int at = o->short_name ? snprintf(label, sizeof label, "-%c, ", o->short_name) : 0;
    snprintf(label + at, sizeof label - (size_t)at, "--%s%s%s", o->name, o->arg ? " " : "",
             o->arg ? o->arg : "");
    const char *help = o->help ? o->help : "";
    if (o->kind == CLI_OPT_AGENT) {
        agent_help(text, sizeof text, o);
        help = text;
    }
    fprintf(f, "  %s", label);
    int col = 2 + (int)strlen(label);
    if (col + 2 > HELP_COLUMN) {
        fprintf(f, "\n%*s", HELP_COLUMN, "");
    } else {
        fprintf(f, "%*s", HELP_COLUMN - col, "");
    }
    wrap(f, help, HELP_COLUMN, HELP_COLUMN);
}

void cli_print_help(FILE *f, const struct cli_command *c, const struct cli_option *options)
{
    fputs(c->usage, f);
    if (c->about)
        fprintf(f, "\n%s", c->about);
    fputs("\nOptions:\n", f);
    for (const struct cli_option *o = options; o && o->kind != CLI_OPT_END; o++)
        print_option(f, o);
    static const struct cli_option help = {
        .kind = CLI_OPT_FLAG, .name = "help", .short_name = 'h', .help = "show this help"};
    print_option(f, &help);
    if (c->more)
        fprintf(f, "\n%s", c->more);
    /* A help longer than stdout's buffer is written as it goes: tell a
     * failed write now, while errno is still its own (at exit it is gone
     * and only EIO could be said). */
    if (f == stdout && ferror(f) && errno)
        cli_stdout_failed(errno);
}
