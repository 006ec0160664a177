/* cmd_export.c — `memtrail export FILE --format folded|pprof [-o OUT]
 * [--value COUNTER]`: a detail report's sites, symbolized, as folded stacks
 * (flamegraph.pl, speedscope, inferno) or as a gzip'ed pprof profile
 * (go tool pprof, Pyroscope, Parca). The formats are src/export's. */
#include "analyze/analyze.h"
#include "cli/cli.h"
#include "common/units.h"
#include "export/export.h"
#include "report/detail.h"
#include "report/report.h"
#include "symbol/symbol.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char export_about[] =
    "Export the allocation sites of the detail report FILE (written by\n"
    "'memtrail run --mode detail'; - reads stdin), or the stacks of the trace\n"
    "FILE (written by 'memtrail run --mode trace'), for other tools. Return\n"
    "addresses are symbolized from the recorded modules' files (debug info\n"
    "where there is some), inlined calls as frames of their own.\n"
    "\n"
    "  folded  one line per distinct stack: root;...;leaf VALUE, the value\n"
    "          summed over the sites with that stack, for flamegraph.pl,\n"
    "          speedscope and inferno. Stacks whose value is 0 are left out.\n"
    "          Unknown functions are MODULE+0xOFFSET or 0xADDRESS. Written to\n"
    "          stdout unless -o is given.\n"
    "  pprof   a gzip'ed profile.proto for go tool pprof, Pyroscope and Parca:\n"
    "          one sample per site with the values inuse_space (live bytes),\n"
    "          inuse_objects (live blocks), alloc_space (bytes allocated over\n"
    "          the run; left out for a report of an older memtrail, whose\n"
    "          sites lack them) and alloc_objects (allocations), and a\n"
    "          'category' label. Written to FILE with its extension replaced\n"
    "          by .pb.gz unless -o is given.\n"
    "  json    the summary and every site with its symbolized stack, as\n"
    "          'memtrail report detail FILE --json' prints it (docs/cli.md).\n"
    "          Written to stdout unless -o is given.\n";

enum format { FORMAT_NONE, FORMAT_FOLDED, FORMAT_PPROF, FORMAT_JSON };

static const struct cli_choice formats[] = {
    {"folded", FORMAT_FOLDED, false},
    {"pprof", FORMAT_PPROF, false},
    {"json", FORMAT_JSON, false},
    {NULL, 0, false},
};

static int parse_value(const char *name, void *value)
{
    return export_value_parse(name, value);
}

/* FILE with its extension (if any, in the last path component) replaced by .pb.gz. */
static char *pprof_default_output(const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    const char *dot = strrchr(base, '.');
    size_t keep = dot && dot != base ? (size_t)(dot - file) : strlen(file);
    char *out = NULL;
    return asprintf(&out, "%.*s.pb.gz", (int)keep, file) < 0 ? NULL : out;
}

static const struct cli_command export_cmd = {
    .name = "export",
    .usage = "usage: memtrail export FILE --format folded|pprof|json [-o OUT] [--value COUNTER]\n",
    .about = export_about,
    .more = "A report cut short is exported as far as it goes, then named on stderr with\n"
            "exit status 1. A summary report (no sites) is refused with exit status 1.\n"
            "A trace's caveats (events lost while recording, a trace begun late, frees of\n"
            "blocks it does not hold, no end record) are printed on stderr, one CAUTION\n"
            "line each, as 'memtrail analyze' states them; pprof's comments hold them too.\n",
    .min_args = 1,
    .max_args = 1,
    .missing = "missing the report FILE",
    .extra = "too many arguments ('%s'; expected one FILE)",
};

int cmd_export(int argc, char **argv)
{
    const char *output = NULL;
    int format = FORMAT_NONE;
    enum export_value value = EXPORT_LIVE_BYTES;
    bool value_given = false;
    const struct cli_option options[] = {
        {.kind = CLI_OPT_CHOICE,
         .name = "format",
         .arg = "FORMAT",
         .value = &format,
         .choices = formats,
         .noun = "format",
         .help = "folded, pprof or json (required)"},
        {.kind = CLI_OPT_STRING,
         .name = "output",
         .short_name = 'o',
         .arg = "OUT",
         .value = &output,
         .help = "the output file (- for stdout); written whole or not at all, never through a symbolic link "
                 "or over anything but a regular file of yours (see docs/cli.md)"},
        {.kind = CLI_OPT_PARSE,
         .name = "value",
         .arg = "COUNTER",
         .value = &value,
         .parse = parse_value,
         .noun = "counter",
         .accepted = "live_bytes, live_count, peak_bytes, allocs, frees, reallocs, allocated_bytes",
         .given = &value_given,
         .help =
             "folded: the counter shown, one of live_bytes (default), live_count, peak_bytes, allocs, frees, "
             "reallocs, allocated_bytes; pprof: the default sample type, one of live_bytes (default), "
             "live_count, allocated_bytes, allocs"},
        {0},
    };
    int npos = cli_parse(&export_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    const char *file = argv[0];
    if (format == FORMAT_NONE)
        return cli_usage_error("export", "missing --format (folded, pprof or json)");
    if (format == FORMAT_JSON && value_given)
        return cli_usage_error("export", "--value: json has every counter; it takes no --value");
    if (format == FORMAT_PPROF && value != EXPORT_LIVE_BYTES && value != EXPORT_LIVE_COUNT &&
        value != EXPORT_ALLOCS && value != EXPORT_ALLOCATED_BYTES)
        return cli_usage_error("export",
                               "--value: pprof has no sample type for '%s' (accepted: live_bytes, "
                               "live_count, allocated_bytes, allocs)",
                               export_value_name(value));
    bool from_stdin = strcmp(file, "-") == 0;
    char *derived = NULL;
    if (!output && format == FORMAT_PPROF) {
        if (from_stdin)
            return cli_usage_error("export", "reading stdin: name the pprof output with -o");
        if (!(derived = pprof_default_output(file)))
            return cli_error("out of memory");
        output = derived;
    }
    bool to_stdout = !output || strcmp(output, "-") == 0;

    /* The output first: a target that cannot be written (a symbolic link,
     * a device, another user's file) is refused before any work. */
    struct cli_out out;
    if (cli_out_open(&out, output) != CLI_OK) {
        free(derived);
        return CLI_FAILED;
    }
    struct report r;
    char err[REPORT_ERR_MAX];
    int rrc = analyze_read_any(file, &r, err, sizeof err); /* a report or a trace; - is stdin */
    int status = CLI_OK;
    struct symbolizer *sym = NULL;
    if (rrc < 0 && rrc != -ENODATA) {
        status = cli_error("%s", err);
        goto done;
    }
    if (!(r.has & REPORT_HAS_SITES) && !(r.mode && strcmp(r.mode, "detail") == 0)) {
        status = cli_error("%s: not a detail report (mode %s): it has no allocation sites to export; "
                           "record one with 'memtrail run --mode detail'",
                           from_stdin ? "(stdin)" : file, r.mode ? r.mode : "unknown");
        goto done;
    }
    if (value == EXPORT_ALLOCATED_BYTES && !report_sites_have_allocated(&r)) {
        status = cli_error("%s: its sites have no allocated_bytes (a report of an older memtrail): "
                           "--value allocated_bytes cannot be shown; try --value allocs",
                           from_stdin ? "(stdin)" : file);
        goto done;
    }
    if (!(sym = detail_symbolizer(&r))) {
        status = cli_error("out of memory");
        goto done;
    }
    struct detail_options all_sites = {0};
    int xrc = format == FORMAT_FOLDED ? export_folded(out.f, &r, sym, value)
              : format == FORMAT_JSON ? detail_print_json(out.f, &r, sym, &all_sites)
                                      : export_pprof(out.f, &r, sym, value, from_stdin ? "(stdin)" : file);
    /* Only a complete file replaces what was there. */
    status = cli_out_close(&out, 1, xrc);
    const char *warnings = sym_warnings(sym);
    for (const char *w = warnings; w && *w;) {
        const char *nl = strchr(w, '\n');
        int len = nl ? (int)(nl - w) : (int)strlen(w);
        fprintf(stderr, "memtrail: warning: %.*s\n", len, w);
        w = nl ? nl + 1 : w + len;
    }
    if (status == CLI_OK && format == FORMAT_FOLDED && report_is_sampled(&r)) {
        /* folded stacks have no place for a comment: the caveat goes to stderr */
        char rate[MT_UNITS_MAX];
        fprintf(
            stderr,
            "memtrail: %s is sampled (one sample per %s allocated on average): the values are estimates\n",
            from_stdin ? "(stdin)" : file, mt_size(rate, sizeof rate, r.sample_rate));
    }
    if (status == CLI_OK && format == FORMAT_PPROF && !to_stdout)
        fprintf(stderr, "memtrail: wrote %s (%zu sites)\n", output, r.nsites);
    /* A trace's caveats, whatever the format (pprof's comments hold them
     * too): the values exported are no better than the trace. */
    if (status == CLI_OK)
        cli_print_caveats(from_stdin ? "(stdin)" : file, &r);
    if (rrc == -ENODATA)
        status = cli_error("%s", err);
done:
    if (status != CLI_OK)
        cli_out_close(&out, 0, 0);
    if (sym)
        sym_close(sym);
    report_free(&r);
    free(derived);
    return status;
}
