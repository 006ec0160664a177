/* cmd_analyze.c — `memtrail analyze TRACE [--json] [--peak] [--leaks]
 * [--temporary] [--hot] [--histogram] [--timeline] [--top N]`: one pass
 * over a trace (src/analyze) and its report, symbolized; progress on
 * stderr when it is a terminal. A trace that stops early (cut, corrupt) is
 * reported as far as it was read, then the reader's error, exit 1. */
#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/report.h"
#include "symbol/symbol.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char analyze_about[] =
    "Analyse the trace TRACE (written by 'memtrail run --mode trace'; - reads stdin,\n"
    "and a pipe is read as it comes) in one pass, in bounded memory, and print:\n"
    "  the totals   events, allocations, frees, reallocs, frees of blocks the trace\n"
    "               does not hold, mappings, events lost while recording\n"
    "  peak         the most bytes live at once, when it was first reached, and the\n"
    "               stacks holding them then\n"
    "  leaks        the blocks never freed, by stack\n"
    "  temporary    blocks freed by the very next malloc-family call of the thread\n"
    "               that allocated them (a realloc of the block in between resizes\n"
    "               it: still one block), by stack, out of the allocations\n"
    "  hot          the stacks that allocate most often, and the most bytes\n"
    "  histogram    requested sizes by power of two\n"
    "  timeline     live bytes over time (256 buckets at most; the text shows 24\n"
    "               rows unless --timeline is the only section asked for)\n"
    "When events were lost, blocks predate the trace or it is incomplete, CAUTION\n"
    "lines before the figures say which cannot be trusted and by how much. A forked\n"
    "child's trace starts with the blocks live in its parent's trace at the fork.\n"
    "Stacks are symbolized from the recorded modules' files and debug info.\n";

struct progress {
    const char *file;
    uint64_t size;
    struct timespec last;
    bool shown;
};

static void show_progress(void *ctx, uint64_t events, uint64_t off)
{
    struct progress *p = ctx;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ms = (now.tv_sec - p->last.tv_sec) * 1000 + (now.tv_nsec - p->last.tv_nsec) / 1000000;
    if (ms < 100)
        return;
    p->last = now;
    double pct = p->size ? 100.0 * (double)off / (double)p->size : 0;
    if (p->size)
        fprintf(stderr, "\rmemtrail: analysing %s: %3.0f%% (%" PRIu64 " events)", p->file,
                pct > 100 ? 100 : pct, events);
    else /* a stream: its size is not known */
        fprintf(stderr, "\rmemtrail: analysing %s: %" PRIu64 " events", p->file, events);
    p->shown = true;
}

static void print_warnings(struct symbolizer *s)
{
    const char *w = sym_warnings(s);
    while (*w) {
        size_t len = strcspn(w, "\n");
        fprintf(stderr, "memtrail: warning: %.*s\n", (int)len, w);
        w += len + (w[len] == '\n');
    }
}

/* The events whose stacks' modules are opened ahead, on a thread of their
 * own while the trace is analysed (analyze_preload). */
#define PRELOAD_EVENTS 65536

static int analyze_file(const char *file, bool json, unsigned show, int top)
{
    mt_trace_reader *r = NULL;
    char err[MT_TRACE_ERR_MAX] = "";
    struct report_input in;
    int rc = report_input_open(file, &in, err, sizeof err);
    if (rc < 0)
        return cli_error("%s", err);
    const char *path = in.name;
    if (!analyze_input_is_trace(&in)) {
        report_input_close(&in);
        if (in.nhead == 0)
            return cli_error("%s: empty file (not a memtrail trace)", path);
        return cli_error("%s: not a memtrail trace (bad magic at offset 0)", path);
    }
    rc = analyze_open_trace(&in, MT_TRACE_PREFETCH, &r, err, sizeof err);
    if (rc < 0)
        return cli_error("%s", err[0] ? err : strerror(-rc));
    struct analyzer *a = analyze_new(0);
    if (!a) {
        mt_trace_close(r);
        return cli_error("out of memory");
    }
    analyze_set_file(a, path); /* a parent's trace moved with it is looked for beside it */
    const mt_trace_file_info *fi = mt_trace_info(r);
    struct progress p = {.file = path, .size = fi ? fi->file_bytes : 0};
    clock_gettime(CLOCK_MONOTONIC, &p.last);
    bool tty = isatty(STDERR_FILENO);
    struct analyze_preload *pre = analyze_preload_new(PRELOAD_EVENTS);
    int arc = analyze_run_peek(a, r, tty ? show_progress : NULL, &p, pre ? analyze_preload_peek : NULL, pre);
    if (p.shown)
        fputs("\r\033[K", stderr);
    int status = CLI_OK;
    char stop[MT_TRACE_ERR_MAX + 160] = "";
    if (arc == -ENOMEM) {
        status = cli_error("%s: out of memory analysing the trace", path);
        goto done;
    }
    if (arc < 0)
        snprintf(stop, sizeof stop, "%s", mt_trace_error(r));
    else if (!mt_trace_complete(r))
        snprintf(stop, sizeof stop,
                 "%s: no end record after chunk %" PRIu64 " (offset %" PRIu64 "): the writer "
                 "stopped before finishing the trace; every whole chunk was read",
                 path, mt_trace_chunks_read(r), mt_trace_offset(r));
    const struct analyze_result *res = analyze_result(a);
    struct symbolizer *sym = analyze_symbolizer(res, r, analyze_preload_join(pre));
    if (!sym) {
        status = cli_error("out of memory");
        goto done;
    }
    print_warnings(sym);
    struct analyze_view v = {
        .file = path, .reader = r, .sym = sym, .show = show, .top = top, .error = stop[0] ? stop : NULL};
    status =
        cli_write_status(json ? analyze_print_json(stdout, res, &v) : analyze_print_text(stdout, res, &v));
    sym_close(sym);
    if (status == CLI_OK && stop[0])
        status = cli_error("%s", stop);
done:
    analyze_preload_free(pre);
    analyze_free(a);
    mt_trace_close(r);
    return status;
}

static const struct cli_command analyze_cmd = {
    .name = "analyze",
    .usage = "usage: memtrail analyze TRACE [--json] [--peak] [--leaks] [--temporary] [--hot]\n"
             "                              [--histogram] [--timeline] [--top N]\n",
    .about = analyze_about,
    .more = "A trace cut short or damaged is analysed up to the problem: the report of\n"
            "everything before it goes to stdout (\"complete\": false in JSON), the error,\n"
            "naming the chunk and its offset, to stderr, and the exit status is 1.\n",
    .min_args = 1,
    .max_args = 1,
    .missing = "missing the TRACE file",
    .extra = "too many arguments ('%s'; expected one TRACE)",
};

int cmd_analyze(int argc, char **argv)
{
    bool json = false;
    unsigned show = 0;
    int top = 10;
#define SECTION(name_, bit_)                                                                                 \
    {                                                                                                        \
        .kind = CLI_OPT_BIT, .name = name_, .value = &show, .bit = bit_,                                     \
        .help = "show the " name_ " section"                                                                 \
    }
    const struct cli_option options[] = {
        CLI_OPT_JSON(&json, "print JSON instead (schema memtrail/1, keys in docs/json.md)"),
        {.kind = CLI_OPT_BIT,
         .name = "peak",
         .value = &show,
         .bit = ANALYZE_SHOW_PEAK,
         .help =
             "show the peak section; the section options combine, and without any every section is shown"},
        SECTION("leaks", ANALYZE_SHOW_LEAKS),
        SECTION("temporary", ANALYZE_SHOW_TEMPORARY),
        SECTION("hot", ANALYZE_SHOW_HOT),
        SECTION("histogram", ANALYZE_SHOW_HISTOGRAM),
        SECTION("timeline", ANALYZE_SHOW_TIMELINE),
        CLI_OPT_STACKS_TOP(&top),
        {0},
    };
#undef SECTION
    int npos = cli_parse(&analyze_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    return analyze_file(argv[0], json, show ? show : ANALYZE_SHOW_ALL, top);
}
