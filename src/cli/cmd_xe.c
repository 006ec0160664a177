/* cmd_xe.c — `memtrail xe plan`: an event session's buffers before it is
 * created, with the exact sizes SQL Server Extended Events would give them
 * (xe_plan.c, seed 000): one configuration, or the seed's range table for
 * any machine shape, and advice on where the 64 KB steps fall. */
#include "cli/cli.h"
#include "common/json_out.h"
#include "xe/xe_plan.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char plan_about[] =
    "Size an event session's buffers as Extended Events does (the columns of\n"
    "dm_xe_sessions): NONE gives 3 buffers, PER_NODE 3 per NUMA node, PER_CPU\n"
    "ceil(2.5 x CPUs). Each buffer takes MAX_MEMORY / buffers rounded up to the\n"
    "next 64 KB chunk (205 bytes of it kept for management), so the memory\n"
    "allocated exceeds MAX_MEMORY by up to 64 KB per buffer; a share under 64 KB\n"
    "is rejected. --strict rounds down instead: never more than MAX_MEMORY.\n"
    "\n"
    "With --range A-B it prints the range table of MAX_MEMORY A..B KB instead:\n"
    "one row per run of sizes with the same buffers, NULL where rejected.\n"
    "Both end with advice: which MAX_MEMORY values give the same buffers, and\n"
    "what the next step costs.\n";

#define RANGE_MAX_VALUES (1u << 24) /* --range: KB values in one table */

/* ---- this machine -------------------------------------------------------- */

static unsigned machine_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n >= 1 && n <= (long)XE_MAX_COUNT ? (unsigned)n : 1;
}

/* NUMA nodes as sysfs lists them (node0, node1, ...); 1 without NUMA. */
static unsigned machine_nodes(void)
{
    DIR *d = opendir("/sys/devices/system/node");
    if (!d)
        return 1;
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name;
        if (strncmp(p, "node", 4) != 0 || p[4] == '\0')
            continue;
        for (p += 4; *p >= '0' && *p <= '9'; p++)
            ;
        if (*p == '\0')
            n++;
    }
    closedir(d);
    return n ? n : 1;
}

/* ---- formatting ------------------------------------------------------------ */

/* A string built in a fixed buffer (the advice goes to text and to JSON). */
struct text {
    char buf[1024];
    size_t len;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < sizeof t->buf ? t->len + (size_t)n : sizeof t->buf - 1;
}

/* "576 KB" for a whole number of KB (the seed's unit), else "590000 bytes". */
static void add_size(struct text *t, uint64_t bytes)
{
    if (bytes % 1024 == 0)
        add(t, "%" PRIu64 " KB", bytes / 1024);
    else
        add(t, "%" PRIu64 " bytes", bytes);
}

/* ---- the advice ------------------------------------------------------------ */

/* Where the configuration's 64 KB step starts and ends, and what comes next. */
struct advice {
    uint64_t at;     /* max_memory it is for, bytes */
    int rc;          /* xe_plan's result there */
    char why[256];   /* its reason when rejected */
    uint64_t min_kb; /* the smallest accepted MAX_MEMORY for this buffer count */
    uint64_t step_start_kb, step_end_kb;
    int next_rc; /* xe_plan at step_end_kb + 1 (-ERANGE: there is none) */
    uint64_t next_kb;
    xe_plan_out out, next, strict; /* here, at the next step, and with --strict */
    struct text text;
};

static int same_buffers(const xe_plan_out *a, const xe_plan_out *b)
{
    return a->total_regular_buffers == b->total_regular_buffers &&
           a->regular_buffer_size == b->regular_buffer_size && a->total_buffer_size == b->total_buffer_size;
}

static int plan_at(const xe_plan_in *base, uint64_t max_memory, int strict, xe_plan_out *out, char *why,
                   size_t whylen)
{
    xe_plan_in in = *base;
    in.max_memory = max_memory;
    in.strict = strict;
    return xe_plan(&in, out, why, whylen);
}

/* A step is n buffers x 64 KB wide: XE gives k chunks for MAX_MEMORY in
 * [n (k-1) 64 KB, n k 64 KB), strict for [n k 64 KB, n (k+1) 64 KB); the end
 * is cut by MAX_EVENT_SIZE (which must stay >= MAX_MEMORY) and by what fits
 * in 64 bits, found by bisection: sizes with equal buffers form one run. */
static void step_bounds(const xe_plan_in *in, struct advice *a)
{
    uint64_t n = a->out.total_regular_buffers, k = a->out.chunks_per_buffer;
    uint64_t lo = n * (in->strict ? k : k - 1) * XE_CHUNK, hi;
    if (__builtin_mul_overflow(n * XE_CHUNK, in->strict ? k + 1 : k, &hi))
        hi = UINT64_MAX;
    else
        hi -= 1;
    if (in->max_event_size && hi > in->max_event_size)
        hi = in->max_event_size;
    xe_plan_out probe;
    if (plan_at(in, hi, in->strict, &probe, NULL, 0) != 0 || !same_buffers(&probe, &a->out)) {
        uint64_t good = a->at, bad = hi; /* invariant: good is in the run, bad is not */
        while (bad - good > 1) {
            uint64_t mid = good + (bad - good) / 2;
            if (plan_at(in, mid, in->strict, &probe, NULL, 0) == 0 && same_buffers(&probe, &a->out))
                good = mid;
            else
                bad = mid;
        }
        hi = good;
    }
    a->step_start_kb = (lo + 1023) / 1024;
    a->step_end_kb = hi / 1024;
}

static void advise(const xe_plan_in *in, uint64_t at, struct advice *a)
{
    memset(a, 0, sizeof *a);
    a->at = at;
    a->min_kb = (uint64_t)xe_plan_buffers(in->mode, in->cpus, in->nodes) * (XE_CHUNK / 1024);
    a->rc = plan_at(in, at, in->strict, &a->out, a->why, sizeof a->why);
    struct text *t = &a->text;
    if (a->rc != 0) {
        xe_plan_out first;
        if (at < a->min_kb * 1024 && plan_at(in, a->min_kb * 1024, in->strict, &first, NULL, 0) == 0) {
            add(t,
                "MAX_MEMORY below %" PRIu64 " KB is rejected (each of the %" PRIu32
                " buffers needs 64 KB); %" PRIu64 " KB is the smallest, giving %" PRIu32 " x %" PRIu64
                " bytes (",
                a->min_kb, first.total_regular_buffers, a->min_kb, first.total_regular_buffers,
                first.regular_buffer_size);
            add_size(t, first.total_regular_buffers * first.regular_buffer_alloc);
            add(t, " allocated).");
        } else {
            add(t, "rejected: %s.", a->why);
        }
        return;
    }
    step_bounds(in, a);
    const xe_plan_out *o = &a->out;
    uint64_t regular = (uint64_t)o->total_regular_buffers * o->regular_buffer_alloc;
    add(t,
        "any MAX_MEMORY from %" PRIu64 " to %" PRIu64 " KB gives these buffers (%" PRIu32 " x %" PRIu64
        " bytes, ",
        a->step_start_kb, a->step_end_kb, o->total_regular_buffers, o->regular_buffer_size);
    add_size(t, regular);
    if (regular > at) {
        add(t, " allocated, ");
        add_size(t, regular - at);
        add(t, " more than max_memory)");
    } else {
        add(t, " allocated, within max_memory)");
    }
    a->next_rc = -ERANGE;
    if (a->step_end_kb < UINT64_MAX / 1024 - 1) {
        a->next_kb = a->step_end_kb + 1;
        char why[256];
        a->next_rc = plan_at(in, a->next_kb * 1024, in->strict, &a->next, why, sizeof why);
        if (a->next_rc == 0) {
            add(t, "; %" PRIu64 " KB steps up to %" PRIu32 " x %" PRIu64 " bytes (", a->next_kb,
                a->next.total_regular_buffers, a->next.regular_buffer_size);
            add_size(t, (uint64_t)a->next.total_regular_buffers * a->next.regular_buffer_alloc);
            add(t, " allocated)");
        } else {
            add(t, "; %" PRIu64 " KB is rejected: %s", a->next_kb, why);
        }
    }
    add(t, ".");
    if (plan_at(in, at, 1, &a->strict, NULL, 0) == 0 && !in->strict) {
        add(t, " --strict keeps within max_memory: %" PRIu32 " x %" PRIu64 " bytes (",
            a->strict.total_regular_buffers, a->strict.regular_buffer_size);
        add_size(t, (uint64_t)a->strict.total_regular_buffers * a->strict.regular_buffer_alloc);
        add(t, " allocated).");
    }
}

/* The partition mode as --mode spells it (JSON's enum values are lower case). */
static const char *mode_json_name(xe_partition_mode mode)
{
    return mode == XE_PART_PER_NODE ? "per_node" : mode == XE_PART_PER_CPU ? "per_cpu" : "none";
}

/* The advice's keys, after the object's others (docs/json.md). */
static void json_advice(mt_json *j, const struct advice *a)
{
    bool ok = a->rc == 0, next = ok && a->next_rc == 0;
    mt_json_ku64(j, "min_max_memory_kb", a->min_kb);
    mt_json_ku64_or_null(j, "step_start_kb", ok, a->step_start_kb);
    mt_json_ku64_or_null(j, "step_end_kb", ok, a->step_end_kb);
    mt_json_ku64_or_null(j, "next_step_kb", ok && a->next_rc != -ERANGE, a->next_kb);
    mt_json_ku64_or_null(j, "next_regular_buffer_size_bytes", next, a->next.regular_buffer_size);
    mt_json_ku64_or_null(j, "next_total_buffer_size_bytes", next, a->next.total_buffer_size);
    mt_json_ku64_or_null(j, "next_memory_allocated_bytes", next, a->next.memory_allocated);
    mt_json_ku64_or_null(j, "strict_regular_buffer_size_bytes", ok, a->strict.regular_buffer_size);
    mt_json_ku64_or_null(j, "strict_memory_allocated_bytes", ok, a->strict.memory_allocated);
    mt_json_kstr(j, "advice", a->text.buf);
}

static void json_shape(mt_json *j, const xe_plan_in *in)
{
    mt_json_kstr(j, "partition_mode", mode_json_name(in->mode));
    mt_json_ku64(j, "cpus", in->cpus);
    mt_json_ku64(j, "nodes", in->nodes);
    mt_json_kbool(j, "strict", in->strict);
    mt_json_ku64_or_null(j, "max_event_size_bytes", in->max_event_size != 0, in->max_event_size);
}

/* 0, or -EIO: what cli_write_status takes. */
static int json_done(mt_json *j)
{
    return mt_json_document_end(j) == 0 ? 0 : -EIO;
}

/* ---- one configuration ------------------------------------------------------ */

static int print_plan(const xe_plan_in *in, bool json)
{
    struct advice a;
    advise(in, in->max_memory, &a);
    if (a.rc != 0)
        return cli_error("%s", a.why);
    const xe_plan_out *o = &a.out;
    if (json) {
        mt_json j;
        mt_json_init_file(&j, stdout, true);
        mt_json_document_begin(&j);
        mt_json_ku64(&j, "max_memory_bytes", in->max_memory);
        json_shape(&j, in);
        mt_json_ku64(&j, "total_regular_buffers", o->total_regular_buffers);
        mt_json_ku64(&j, "chunks_per_buffer", o->chunks_per_buffer);
        mt_json_ku64(&j, "regular_buffer_size_bytes", o->regular_buffer_size);
        mt_json_ku64(&j, "regular_buffer_alloc_bytes", o->regular_buffer_alloc);
        mt_json_ku64(&j, "total_buffer_size_bytes", o->total_buffer_size);
        mt_json_ku64(&j, "total_large_buffers", o->total_large_buffers);
        mt_json_ku64(&j, "large_buffer_size_bytes", o->large_buffer_size);
        mt_json_ku64(&j, "large_buffer_alloc_bytes", o->large_buffer_alloc);
        mt_json_ku64(&j, "memory_allocated_bytes", o->memory_allocated);
        json_advice(&j, &a);
        return json_done(&j) == 0 ? CLI_OK : cli_write_status(-EIO);
    }
    struct text t = {0};
    add_size(&t, in->max_memory);
    printf("%-22s %s\n", "max_memory", t.buf);
    printf("%-22s %s", "memory_partition_mode", xe_partition_mode_name(in->mode));
    if (in->mode == XE_PART_PER_CPU)
        printf(" (%u CPU%s)", in->cpus, in->cpus == 1 ? "" : "s");
    else if (in->mode == XE_PART_PER_NODE)
        printf(" (%u node%s)", in->nodes, in->nodes == 1 ? "" : "s");
    printf("\n%-22s %s\n", "strict_max_memory", in->strict ? "ON" : "OFF");
    t.len = 0;
    if (in->max_event_size)
        add_size(&t, in->max_event_size);
    else
        add(&t, "none");
    printf("%-22s %s\n", "max_event_size", t.buf);
    printf("%-22s %" PRIu32 "\n", "total_regular_buffers", o->total_regular_buffers);
    printf("%-22s %" PRIu64 " (%" PRIu32 " x 64 KB allocated, 205 bytes of it for management)\n",
           "regular_buffer_size", o->regular_buffer_size, o->chunks_per_buffer);
    printf("%-22s %" PRIu64 "\n", "total_buffer_size", o->total_buffer_size);
    printf("%-22s %" PRIu32 "\n", "total_large_buffers", o->total_large_buffers);
    printf("%-22s %" PRIu64, "large_buffer_size", o->large_buffer_size);
    if (o->total_large_buffers)
        printf(" (%" PRIu64 " x 64 KB allocated)", o->large_buffer_alloc / XE_CHUNK);
    t.len = 0;
    add_size(&t, o->memory_allocated);
    printf("\n%-22s %" PRIu64 " (%s: %" PRIu32 " x %" PRIu64 " regular", "memory_allocated",
           o->memory_allocated, t.buf, o->total_regular_buffers, o->regular_buffer_alloc);
    if (o->total_large_buffers)
        printf(" + %" PRIu32 " x %" PRIu64 " large", o->total_large_buffers, o->large_buffer_alloc);
    printf(")\n\nadvice: %s\n", a.text.buf);
    return CLI_OK;
}

/* ---- the range table ---------------------------------------------------------- */

struct row {
    uint64_t start, end;
    int rc;
    xe_plan_out out;
};

/* A row of the table: to j when it is JSON, else as text. */
static void print_row(const struct row *r, mt_json *j)
{
    if (j) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_ku64(j, "start_memory_range_kb", r->start);
        mt_json_ku64(j, "end_memory_range_kb", r->end);
        mt_json_ku64_or_null(j, "total_regular_buffers", r->rc == 0, r->out.total_regular_buffers);
        mt_json_ku64_or_null(j, "regular_buffer_size_bytes", r->rc == 0, r->out.regular_buffer_size);
        mt_json_ku64_or_null(j, "total_buffer_size_bytes", r->rc == 0, r->out.total_buffer_size);
        mt_json_object_end(j);
        return;
    }
    if (r->rc == 0)
        printf("%-22" PRIu64 " %-20" PRIu64 " %-22" PRIu32 " %-20" PRIu64 " %" PRIu64 "\n", r->start, r->end,
               r->out.total_regular_buffers, r->out.regular_buffer_size, r->out.total_buffer_size);
    else
        printf("%-22" PRIu64 " %-20" PRIu64 " %-22s %-20s %s\n", r->start, r->end, "NULL", "NULL", "NULL");
}

/* Every KB value from a to b, as the seed's T-SQL loop tries them, with
 * consecutive values that give the same buffers grouped into one row. */
static int print_range(const xe_plan_in *base, uint64_t a, uint64_t b, bool json)
{
    mt_json jd, *j = json ? &jd : NULL;
    if (j) {
        mt_json_init_file(j, stdout, true);
        mt_json_document_begin(j);
        json_shape(j, base);
        mt_json_key(j, "rows");
        mt_json_array_begin(j);
    } else {
        printf("%-22s %-20s %-22s %-20s %s\n", "start_memory_range_kb", "end_memory_range_kb",
               "total_regular_buffers", "regular_buffer_size", "total_buffer_size");
    }
    struct row cur = {0};
    bool have = false;
    for (uint64_t kb = a;; kb++) {
        xe_plan_out out;
        int rc = plan_at(base, kb * 1024, base->strict, &out, NULL, 0) == 0 ? 0 : -EINVAL;
        if (have && rc == cur.rc && (rc != 0 || same_buffers(&out, &cur.out))) {
            cur.end = kb;
        } else {
            if (have)
                print_row(&cur, j);
            cur = (struct row){.start = kb, .end = kb, .rc = rc, .out = out};
            have = true;
        }
        if (kb == b)
            break;
    }
    print_row(&cur, j);

    struct advice adv;
    advise(base, b * 1024, &adv);
    if (j) {
        mt_json_array_end(j);
        mt_json_ku64(j, "advice_max_memory_kb", b);
        json_advice(j, &adv);
        return json_done(j);
    }
    printf("\nadvice for %" PRIu64 " KB (the range's end): %s\n", b, adv.text.buf);
    return 0;
}

/* ---- options ------------------------------------------------------------------ */

static int parse_partition_mode(const char *value, void *mode)
{
    return xe_parse_partition_mode(value, mode);
}

/* "A-B": whole KB, 1 <= A <= B, B KB still a byte count in 64 bits. */
static int parse_range(const char *s, uint64_t *a, uint64_t *b)
{
    const char *dash = strchr(s, '-');
    char *end;
    bool ok = dash && s[0] >= '0' && s[0] <= '9' && dash[1] >= '0' && dash[1] <= '9';
    if (ok) {
        errno = 0;
        *a = strtoull(s, &end, 10);
        ok = !errno && end == dash;
        *b = strtoull(dash + 1, &end, 10);
        ok = ok && !errno && *end == '\0';
    }
    if (!ok) {
        cli_usage_error("xe plan", "--range: '%s' is not a range A-B of KB (e.g. 1-4096)", s);
        return -1;
    }
    if (*a < 1 || *b < *a || *b > UINT64_MAX / 1024 - 1) {
        cli_usage_error("xe plan", "--range: '%s' needs 1 <= A <= B <= %" PRIu64 " (KB)", s,
                        UINT64_MAX / 1024 - 1);
        return -1;
    }
    /* Every KB value of the range is planned: bounded, so the table comes
     * in seconds (16 GB of MAX_MEMORY at most). */
    if (*b - *a >= RANGE_MAX_VALUES) {
        cli_usage_error("xe plan",
                        "--range: '%s' spans %" PRIu64 " KB values; a table covers at most %u "
                        "(e.g. %" PRIu64 "-%" PRIu64 ")",
                        s, *b - *a + 1, RANGE_MAX_VALUES, *a, *a + RANGE_MAX_VALUES - 1);
        return -1;
    }
    return 0;
}

static const struct cli_command plan_cmd = {
    .name = "xe plan",
    .usage = "usage: memtrail xe plan --max-memory SIZE [--mode none|per_node|per_cpu] [--cpus N]\n"
             "                        [--nodes N] [--strict] [--max-event-size SIZE] [--json]\n"
             "       memtrail xe plan --range A-B [--mode ...] [--cpus N] [--nodes N] [--strict]\n"
             "                        [--max-event-size SIZE] [--json]\n",
    .about = plan_about,
    .more = "Exit status: 0, or 1 when the session would be rejected (the reason on\n"
            "stderr), 2 for bad usage.\n",
    .max_args = 0,
    .extra = "unexpected argument '%s'",
};

static int cmd_plan(int argc, char **argv)
{
    xe_plan_in in = {.mode = XE_PART_NONE, .cpus = 0, .nodes = 0};
    const char *range = NULL;
    bool json = false, strict = false, max_memory_given = false;
    int cpus = (int)machine_cpus(), nodes = (int)machine_nodes();
    const struct cli_option options[] = {
        {.kind = CLI_OPT_SIZE,
         .name = "max-memory",
         .arg = "SIZE",
         .value = &in.max_memory,
         .unit = 1024,
         .given = &max_memory_given,
         .help = "MAX_MEMORY: a number of KB, or with a unit B, KB, MB, GB (e.g. 576, 4MB)"},
        {.kind = CLI_OPT_PARSE,
         .name = "mode",
         .arg = "MODE",
         .value = &in.mode,
         .parse = parse_partition_mode,
         .noun = "partition mode",
         .accepted = "none, per_node, per_cpu",
         .help = "MEMORY_PARTITION_MODE: none (default), per_node, per_cpu"},
        {.kind = CLI_OPT_INT,
         .name = "cpus",
         .arg = "N",
         .value = &cpus,
         .min = 1,
         .max = XE_MAX_COUNT,
         .noun = "a count",
         .help = "logical CPUs for per_cpu (default: this machine's)"},
        {.kind = CLI_OPT_INT,
         .name = "nodes",
         .arg = "N",
         .value = &nodes,
         .min = 1,
         .max = XE_MAX_COUNT,
         .noun = "a count",
         .help = "NUMA nodes for per_node (default: this machine's)"},
        {.kind = CLI_OPT_FLAG,
         .name = "strict",
         .value = &strict,
         .help = "STRICT_MAX_MEMORY=ON: buffers never exceed MAX_MEMORY"},
        {.kind = CLI_OPT_SIZE,
         .name = "max-event-size",
         .arg = "SIZE",
         .value = &in.max_event_size,
         .unit = 1024,
         .help =
             "MAX_EVENT_SIZE (at least MAX_MEMORY): adds 2 large buffers that hold one event of that size"},
        {.kind = CLI_OPT_STRING,
         .name = "range",
         .arg = "A-B",
         .value = &range,
         .help = "the range table for MAX_MEMORY A..B KB (1 <= A <= B, at most 16777216 values)"},
        CLI_OPT_JSON(&json, "print JSON instead (schema memtrail/1, keys in docs/json.md)"),
        {0},
    };
    int npos = cli_parse(&plan_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    in.cpus = (unsigned)cpus;
    in.nodes = (unsigned)nodes;
    in.strict = strict;
    if (range) {
        if (max_memory_given)
            return cli_usage_error("xe plan", "--range gives the MAX_MEMORY values: drop --max-memory");
        uint64_t a, b;
        if (parse_range(range, &a, &b) < 0)
            return CLI_USAGE;
        return cli_write_status(print_range(&in, a, b, json));
    }
    if (!max_memory_given)
        return cli_usage_error("xe plan", "missing --max-memory SIZE (or --range A-B)");
    int status = print_plan(&in, json);
    return status == CLI_OK ? cli_write_status(0) : status;
}

static const struct cli_command xe_cmd = {
    .name = "xe",
    .usage = "usage: memtrail xe plan --max-memory SIZE [--mode none|per_node|per_cpu] [OPTIONS]\n",
    .about = "Event sessions buffer events the way SQL Server Extended Events does.\n"
             "\n"
             "Commands:\n"
             "  plan     the buffers a MAX_MEMORY and partition mode give: exact sizes,\n"
             "           memory allocated, and the range table of a machine shape\n",
    .more = "'memtrail xe plan --help' describes its options.\n",
    .min_args = 1,
    .max_args = -1,
    .missing = "missing the xe command (accepted: plan)",
    .stop_at_argument = true,
};

int cmd_xe(int argc, char **argv)
{
    static const struct cli_option no_options[] = {{0}};
    int n = cli_parse(&xe_cmd, no_options, argc, argv);
    if (n < 0)
        return cli_parse_exit(n);
    if (strcmp(argv[0], "plan") == 0)
        return cmd_plan(n, argv);
    return cli_usage_error("xe", "unknown xe command '%s' (accepted: plan)", argv[0]);
}
