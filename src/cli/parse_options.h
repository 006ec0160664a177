/* parse_options.h — the one argument parser of memtrail's commands (git's
 * parse-options is the model). A command declares its options in an array
 * of struct cli_option: long name, short name, the kind of value, where it
 * goes and a line of help. cli_parse() reads argv by that array and
 * cli_print_help() writes the command's --help from it, so what a command
 * accepts and what its help lists cannot differ.
 *
 * The parser handles "--opt VALUE", "--opt=VALUE", "-o VALUE", "-oVALUE",
 * "-h"/"--help", "--" (the rest are arguments), "-" (an argument: stdin),
 * and options and arguments in any order. Every mistake is one usage
 * error ("memtrail: ..." and "Try 'memtrail CMD --help' for usage."): an
 * unknown option, a missing value, a value given to a flag, a number out
 * of range, a choice not among the accepted ones. */
#ifndef MT_CLI_PARSE_OPTIONS_H
#define MT_CLI_PARSE_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum cli_opt_kind {
    CLI_OPT_END,    /* ends the array */
    CLI_OPT_FLAG,   /* bool *: set true */
    CLI_OPT_BIT,    /* unsigned *: `bit` or'ed in */
    CLI_OPT_INT,    /* int *: an integer from min to max */
    CLI_OPT_STRING, /* const char **: the value as given */
    CLI_OPT_LIST,   /* struct cli_list *: every value given, in order (repeatable) */
    CLI_OPT_CHOICE, /* int *: the value of the choice named */
    CLI_OPT_SIZE,   /* uint64_t *: bytes; a bare number counts `unit` bytes */
    CLI_OPT_PARSE,  /* any: parse(value, dest) < 0 refuses the value */
    CLI_OPT_AGENT,  /* const char **: a value of the agent option `agent`, checked
                       against the option table (common/options_table.h); its
                       help, accepted values and default come from there */
};

struct cli_choice {
    const char *name;
    int value;
    bool hidden; /* an old spelling: accepted, not listed */
};

struct cli_option {
    enum cli_opt_kind kind;
    const char *name;                 /* the long name, without "--" */
    char short_name;                  /* 'o' for -o, or 0 */
    const char *arg;                  /* the value's name in the help ("FILE"); NULL for flags */
    void *value;                      /* where the value goes (see the kinds) */
    const char *help;                 /* one paragraph, wrapped by the help printer ('\n' breaks a line);
                                         CLI_OPT_AGENT: added after the table's text */
    long long min, max;               /* CLI_OPT_INT */
    const struct cli_choice *choices; /* CLI_OPT_CHOICE: ended by a NULL name */
    const char *noun;                 /* the errors' word for a value: "--mode: unknown NOUN 'x'";
                                         CLI_OPT_INT: "--cpus: 'x' is not NOUN from 1 to 8" */
    const char *accepted;             /* CLI_OPT_PARSE: the accepted values, for the error */
    int (*parse)(const char *value, void *dest);
    unsigned bit;       /* CLI_OPT_BIT */
    uint64_t unit;      /* CLI_OPT_SIZE: bytes of a bare number */
    int agent;          /* CLI_OPT_AGENT: MT_OPT_* */
    const char *except; /* CLI_OPT_AGENT: a choice of the agent's not accepted here */
    bool *given;        /* set true when the option is given (may be NULL) */
};

/* CLI_OPT_LIST's destination: v has room for argc entries. */
struct cli_list {
    const char **v;
    int n;
};

/* A command: its help text around the options, and how many arguments
 * (non-options) it takes. */
struct cli_command {
    const char *name;  /* "run", "xe plan"; NULL for memtrail itself */
    const char *usage; /* the synopsis: "usage: memtrail CMD ..." lines */
    const char *about; /* what the command does, before the options */
    const char *more;  /* after the options (may be NULL) */
    int min_args;      /* fewer: the usage error `missing` */
    int max_args;      /* more: the usage error `extra`, a format naming
                          the first one too many with %s; -1: no limit */
    const char *missing, *extra;
    bool stop_at_argument;    /* the first argument ends the options (run: the
                                 program's own arguments follow it) */
    const char *unknown_hint; /* added to "unknown option '--x'" */
};

enum { CLI_PARSE_HELP = -1, CLI_PARSE_ERROR = -2 };

/* Reads argv[1..argc) by the options (ended by a CLI_OPT_END entry) of
 * command c. Returns the number of arguments (non-options), moved to
 * argv[0..n) in order and followed by a NULL; or CLI_PARSE_HELP after
 * printing the help on stdout, or CLI_PARSE_ERROR after a usage error
 * (an unknown option, a bad value, too few or too many arguments). */
int cli_parse(const struct cli_command *c, const struct cli_option *options, int argc, char **argv);
/* The exit code for cli_parse's negative returns: 0 for help, 2. */
int cli_parse_exit(int parsed);
/* The --help text: usage, about, the options (and -h, --help), more. */
void cli_print_help(FILE *f, const struct cli_command *c, const struct cli_option *options);

#endif /* MT_CLI_PARSE_OPTIONS_H */
