/* options_table.c — the agent options' table (options_table.h) and the
 * checks every reader of an option value shares. */
#include "common/options_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xe/xe_plan.h"

static const mt_optchoice modes[] = {
    {"summary", MT_MODE_SUMMARY, "counters per category"},
    {"detail", MT_MODE_DETAIL, "also call stacks per allocation site"},
    {"sample", MT_MODE_SAMPLE, "call stacks of a sample of allocations, chosen by bytes: estimated sites"},
    {"trace", MT_MODE_TRACE, "every event, in a trace file"},
    {"off", MT_MODE_OFF, "the agent does nothing"},
    {NULL, 0, NULL},
};
static const mt_optchoice unwinders[] = {
    {"auto", MT_UNWIND_AUTO, "= `cfi`"},
    {"cfi", MT_UNWIND_CFI, "memtrail's own walk over the unwind tables, libunwind where it cannot go"},
    {"libunwind", MT_UNWIND_LIBUNWIND, "libunwind only"},
    {"fp", MT_UNWIND_FP, "frame pointers"},
    {NULL, 0, NULL},
};
static const mt_optchoice losses[] = {
    {"drop", 0, "a full buffer loses the event, counted"},
    {"wait", 1, "the program waits"},
    {NULL, 0, NULL},
};
static const mt_optchoice on_errors[] = {
    {"report", MT_ON_ERROR_REPORT, "say it on stderr, go on"},
    {"abort", MT_ON_ERROR_ABORT, "say it, then abort"},
    {NULL, 0, NULL},
};
static const mt_optchoice canaries[] = {
    {"full", 0, "2 bytes after every block: an overrun of 1 or 2 bytes is caught, and absorbed"},
    {"fit", 1,
     "no byte glibc's chunk has no room for: at sizes 7 and 8 past a multiple of 16, 1 byte or none, "
     "and glibc's next chunk header checked (docs/canary.md)"},
    {NULL, 0, NULL},
};
static const mt_optchoice on_off[] = {{"on", 1, ""}, {"off", 0, ""}, {NULL, 0, NULL}};
static const mt_optchoice crash_reports[] = {
    {"on", 2,
     "a crash signal, or a signal that ends the process by its default action (SIGTERM, SIGHUP, SIGQUIT, "
     "SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGXFSZ; not SIGINT)"},
    {"crash", 1, "SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL only"},
    {"off", 0, "none"},
    {NULL, 0, NULL},
};
static const mt_optchoice follow[] = {
    {"on", 1, "exec'd programs load the agent too"},
    {"off", 0, "they run untracked"},
    {NULL, 0, NULL},
};
static const mt_optchoice starts[] = {
    {"on", 1, "from start-up"},
    {"off", 0, "summary counting only, until `memtrail query PID start`"},
    {NULL, 0, NULL},
};
static const mt_optchoice queries[] = {
    {"on", MT_QUERY_SIGNAL, "signal-driven; in trace mode, served from a thread"},
    {"thread", MT_QUERY_THREAD, "served from a thread of the agent's"},
    {"off", MT_QUERY_OFF, "no control socket"},
    {NULL, 0, NULL},
};
static const mt_optchoice alloc_timings[] = {
    {"spans", MT_ALLOC_TIMING_SPANS, "only the calls made inside request spans"},
    {"all", MT_ALLOC_TIMING_ALL, "every call (two clock reads per call)"},
    {NULL, 0, NULL},
};

const mt_optdef mt_optdefs[MT_NOPT] = {
    [MT_OPT_MODE] = {"mode", MT_OPTT_CHOICE, modes, 0, 0, NULL, "summary", "what to record"},
    [MT_OPT_DEPTH] = {"depth", MT_OPTT_INT, NULL, 1, MT_DEPTH_MAX, "1 to 64 frames", "4",
                      "detail, sample and trace modes: frames per stack"},
    [MT_OPT_UNWIND] = {"unwind", MT_OPTT_CHOICE, unwinders, 0, 0, NULL, "auto",
                       "detail, sample and trace modes: how stacks are taken"},
    [MT_OPT_OUTPUT] =
        {"output", MT_OPTT_PATH, NULL, 1, MT_OUTPUT_MAX,
         "a file path, at most 3800 bytes; %p = pid, %e = program name, %% = %, no other %",
         "memtrail.%p.mtr",
         "the report's (or trace's) path, in the start-up directory unless absolute; `%%` = `%`; "
         "`memtrail run --mode trace` gives `memtrail.%p.mtt`"},
    [MT_OPT_TRACE_BUFFER] = {"trace_buffer", MT_OPTT_SIZE, NULL, 192 << 10, 64ll << 30,
                             "a size from 192KB to 64GB, a number of MB or with a unit", "1MB",
                             "trace mode: the per-CPU event buffers between the program's threads and the "
                             "thread that merges them (at least 64KB x ceil(2.5 x CPUs))"},
    [MT_OPT_TRACE_LOSS] = {"trace_loss", MT_OPTT_CHOICE, losses, 0, 0, NULL, "wait",
                           "trace mode: what a full buffer does"},
    [MT_OPT_TRACE_TIME_UNIT] = {"trace_time_unit", MT_OPTT_INT, NULL, 1, 1000000000,
                                "nanoseconds from 1 to 1000000000", "10000",
                                "trace mode: the resolution of event times (order is always exact)"},
    [MT_OPT_TRACE_LEVEL] = {"trace_level", MT_OPTT_INT, NULL, 1, 19, "a zstd level from 1 to 19", "1",
                            "trace mode: how hard chunks are compressed"},
    [MT_OPT_TRACE_CHUNK] = {"trace_chunk", MT_OPTT_INT, NULL, 1024, 1 << 20,
                            "events per chunk, 1024 to 1048576", "32768",
                            "trace mode: events per compressed chunk"},
    [MT_OPT_TRACE_THREADS] = {"trace_threads", MT_OPTT_INT, NULL, 0, 64, "0 to 64; 0: min(CPUs, 4)", "0",
                              "trace mode: threads that encode and compress chunks"},
    [MT_OPT_ON_ERROR] = {"on_error", MT_OPTT_CHOICE, on_errors, 0, 0, NULL, "report",
                         "a heap error (double free, overwritten canary)"},
    [MT_OPT_CANARY] = {"canary", MT_OPTT_CHOICE, canaries, 0, 0, NULL, "full",
                       "the guard bytes after each block, which catch overruns"},
    [MT_OPT_CRASH_REPORT] =
        {"crash_report", MT_OPTT_CHOICE, crash_reports, 0, 0, NULL, "on",
         "a report when the program dies of a signal (and a summary on stderr for a crash)"},
    [MT_OPT_FOLLOW_EXEC] = {"follow_exec", MT_OPTT_CHOICE, follow, 0, 0, NULL, "off", "across exec"},
    [MT_OPT_QUERY] = {"query", MT_OPTT_CHOICE, queries, 0, 0, NULL, "on",
                      "the control socket of `memtrail query`"},
    [MT_OPT_START] = {"start", MT_OPTT_CHOICE, starts, 0, 0, NULL, "on",
                      "detail, sample and trace modes: when recording (call sites, the trace) starts; "
                      "`memtrail query PID start` and `stop` switch it at any time"},
    [MT_OPT_SAMPLE_RATE] = {"sample_rate", MT_OPTT_BYTES, NULL, 1, 1ll << 30,
                            "a size from 1 byte to 1GiB: bytes, or with a unit (KiB, MiB, GiB)", "512KiB",
                            "sample mode: mean bytes allocated between two sampled allocations "
                            "(docs/sampling.md)"},
    [MT_OPT_SAMPLE_SEED] = {"sample_seed", MT_OPTT_INT, NULL, 0, INT64_MAX, "0 to 2^63-1; 0: random", "0",
                            "sample mode: the seed of the sampling; a fixed one samples the same allocations "
                            "of a single-threaded run every time"},
    [MT_OPT_REFSET_FD] =
        {"refset_fd", MT_OPTT_INT, NULL, -1, 2147483647,
         "an open SOCK_SEQPACKET socket's descriptor, or -1 (off)", "-1",
         "every mode: the socket `memtrail refset record` hands the program, to which the "
         "agent reports mappings, releases and large blocks as they happen (docs/refset-agent.md)"},
    [MT_OPT_PEAK_STEP] = {"peak_step", MT_OPTT_SIZE, NULL, 1, 1ll << 50,
                          "a size from 1 byte, a number of MB or with a unit", "1MB",
                          "memory info: a PEAK event when live bytes pass the last one's mark by more than "
                          "this (or 1% of the mark, whichever is larger)"},
    [MT_OPT_LIMIT] = {"limit", MT_OPTT_SIZE, NULL, 0, 1ll << 50,
                      "a size, a number of MB or with a unit; 0 = none", "0",
                      "memory info: a LIMIT event when live bytes rise above this"},
    [MT_OPT_INFO_INTERVAL] =
        {"info_interval", MT_OPTT_INT, NULL, 0, 86400000, "milliseconds from 0 (off) to 86400000", "0",
         "memory info: a PERIODIC snapshot this often, taken by a thread of the agent's"},
    [MT_OPT_ALLOC_TIMING] = {"alloc_timing", MT_OPTT_CHOICE, alloc_timings, 0, 0, NULL, "spans",
                             "memory info: which allocator calls are timed (mapping calls always are)"},
    [MT_OPT_SPAN_FAULTS] = {"span_faults", MT_OPTT_CHOICE, on_off, 0, 0, NULL, "off",
                            "request spans: count each span's page faults (getrusage(RUSAGE_THREAD) at "
                            "begin and end, about 270 ns a span)"},
    [MT_OPT_RUN_PID] = {"run_pid", MT_OPTT_INT, NULL, 0, 2147483647, "a process id, or 0 (none)", "0",
                        "set by `memtrail run`: the process it started. Trace mode's line at exit "
                        "('trace: N events, ...') is said by that process, and by the others (its "
                        "children, forked or exec'd) only when events were lost or the file failed"},
};

int mt_opt_find(const char *key, size_t klen)
{
    for (int k = 0; k < MT_NOPT; k++)
        if (strlen(mt_optdefs[k].key) == klen && memcmp(mt_optdefs[k].key, key, klen) == 0)
            return k;
    return -1;
}

/* "64KiB" as "64KB" (both mean 65536 here), into buf; 0 when val is not
 * so spelled. */
static int strip_iec(const char *val, char *buf, size_t cap)
{
    size_t n = strlen(val);
    if (n < 4 || n >= cap || (val[n - 2] != 'i' && val[n - 2] != 'I') ||
        (val[n - 1] != 'B' && val[n - 1] != 'b'))
        return 0;
    char u = val[n - 3];
    if (!strchr("kKmMgG", u))
        return 0;
    memcpy(buf, val, n - 2);
    buf[n - 2] = val[n - 1];
    buf[n - 1] = '\0';
    return 1;
}

long mt_template_bad(const char *t)
{
    for (const char *s = t; *s; s++) {
        if (*s != '%')
            continue;
        if (s[1] != 'p' && s[1] != 'e' && s[1] != '%')
            return s - t;
        s++;
    }
    return -1;
}

int mt_opt_value(int k, const char *val, int64_t *out)
{
    const mt_optdef *d = &mt_optdefs[k];
    switch (d->type) {
    case MT_OPTT_CHOICE:
        for (const mt_optchoice *c = d->choices; c->name; c++)
            if (strcmp(val, c->name) == 0) {
                *out = c->value;
                return 0;
            }
        return -EINVAL;
    case MT_OPTT_INT: {
        char *end;
        long long v = strtoll(val, &end, 10);
        if (!*val || *end || v < d->min || v > d->max)
            return -EINVAL;
        *out = v;
        return 0;
    }
    case MT_OPTT_SIZE:
    case MT_OPTT_BYTES: {
        uint64_t v;
        char iec[32];
        if (strip_iec(val, iec, sizeof iec))
            val = iec;
        if (xe_parse_size(val, d->type == MT_OPTT_BYTES ? 1 : 1u << 20, &v) < 0 || v < (uint64_t)d->min ||
            v > (uint64_t)d->max)
            return -EINVAL;
        *out = (int64_t)v;
        return 0;
    }
    default: {
        size_t n = strlen(val);
        if (n < (size_t)d->min || n > (size_t)d->max || mt_template_bad(val) >= 0)
            return -EINVAL;
        *out = (int64_t)n;
        return 0;
    }
    }
}

void mt_opt_accepted(mt_out *o, int k)
{
    const mt_optdef *d = &mt_optdefs[k];
    mt_out_str(o, " (accepted: ");
    if (d->type == MT_OPTT_CHOICE) {
        for (const mt_optchoice *c = d->choices; c->name; c++) {
            if (c != d->choices)
                mt_out_str(o, ", ");
            mt_out_str(o, c->name);
        }
    } else {
        mt_out_str(o, d->accepted);
    }
    mt_out_char(o, ')');
}

void mt_opt_keys(mt_out *o)
{
    for (int k = 0; k < MT_NOPT; k++) {
        if (k)
            mt_out_str(o, ", ");
        mt_out_str(o, mt_optdefs[k].key);
    }
}
