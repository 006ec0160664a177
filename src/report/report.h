/* report.h — the summary report (.mtr) as the CLI sees it: one struct that
 * holds everything a report file says, a reader that fills it
 * (report_read.c) and the printers that turn it into NMT-like text
 * (report_print.c) or JSON (report_json.c, docs/json.md). The file format
 * is docs/report-format.md.
 *
 * This is CLI-side code: it allocates with malloc freely. Functions return
 * 0 or a negative errno code and, on error, leave one line in the caller's
 * buffer naming the file, the line and the problem (without the
 * "memtrail: " prefix, which the CLI adds). */
#ifndef MT_REPORT_H
#define MT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The format version this reader understands (line 1: "memtrail-report 1"). */
#define REPORT_FORMAT_VERSION 1

/* Size of the error buffer callers should pass. */
#define REPORT_ERR_MAX 512

/* The counters of a category line and of the total line. */
struct report_counts {
    int64_t live_bytes;
    int64_t live_count;
    int64_t peak_bytes;
    int64_t allocs;
    int64_t frees;
    int64_t reallocs; /* 0 when the file has no reallocs= field */
};

/* The virtual memory fields of a category line (all 0 in a report written
 * before they existed; see has_vm). */
struct report_vm {
    int64_t reserved;  /* address space mapped */
    int64_t committed; /* the accessible part of it */
    int64_t resident;  /* the part in memory when the report was written */
    int64_t mappings;  /* address ranges */
};

struct report_category {
    char *name;
    char *kind; /* "malloc", "overhead", "vm", or what a newer writer says */
    struct report_counts n;
    struct report_vm vm;
    bool has_vm; /* the line carried the virtual memory fields */
};

/* The process line: the kernel's figures when the report was written. */
struct report_process {
    int64_t rss_bytes;
    int64_t peak_rss_bytes; /* VmHWM */
    int64_t reserved;
    int64_t committed;
    int64_t resident;
};

struct report_errors {
    int64_t double_free;
    int64_t bad_canary;
    int64_t foreign_free;
};

/* Which single-valued lines were present (a truncated file may lack some). */
enum {
    REPORT_HAS_PID = 1u << 0,
    REPORT_HAS_PPID = 1u << 1,
    REPORT_HAS_EXE = 1u << 2,
    REPORT_HAS_CMDLINE = 1u << 3,
    REPORT_HAS_MODE = 1u << 4,
    REPORT_HAS_START = 1u << 5,
    REPORT_HAS_END_NS = 1u << 6,
    REPORT_HAS_REASON = 1u << 7,
    REPORT_HAS_TOTAL = 1u << 8,
    REPORT_HAS_ERRORS = 1u << 9,
    REPORT_HAS_PROCESS = 1u << 10, /* a process line */
    REPORT_HAS_VM = 1u << 11,      /* some category line carried VM fields */
    REPORT_HAS_SITES = 1u << 12,   /* detail mode: a stack_depth line (sites may follow) */
    REPORT_HAS_INFO = 1u << 13,    /* memory info: info lines and a memory_time line */
    REPORT_HAS_SPANS = 1u << 14,   /* a spans line (span_name/span lines may precede it) */
    /* the memory_time line (r->memory_time holds it) */
    REPORT_HAS_MEMORY_TIME = 1u << 15,
    /* sampled detail mode: the sample_rate line (r->sample_rate holds it) */
    REPORT_HAS_SAMPLE_RATE = 1u << 16,
};

/* Detail mode (docs/report-format.md "Detail mode"): the ELF objects the
 * recorded frames lie in, and the allocation sites. */
struct report_module {
    int64_t id;
    uint64_t bias;       /* runtime address - ELF virtual address */
    uint64_t start, end; /* [start, end): the span of its PT_LOAD segments */
    char *buildid;       /* lowercase hex, or NULL ("-") */
    char *path;          /* unescaped */
};

struct report_site {
    int64_t id;
    char *category;
    struct report_counts n; /* the blocks allocated at this site */
    uint64_t *frames;       /* return addresses, innermost first */
    size_t nframes;
    int64_t allocated_bytes; /* every byte allocated here over the run; 0 unless has_allocated */
    bool has_allocated;      /* the line carried allocated_bytes= (older reports lack it) */
    /* Sampled reports (docs/sampling.md): the counters above are estimates;
     * these are the sampled allocations behind them. */
    int64_t samples;      /* sampled allocations that came to this site */
    int64_t live_samples; /* ... still live */
    bool has_samples;     /* the line carried samples= and live_samples= */
};

/* Memory info (docs/report-format.md "Memory info"): one `info` line per
 * kind, the snapshot of that kind's last event. */
struct report_info_category {
    char *name;
    int64_t live_bytes;
};
struct report_info {
    char *kind;    /* the kind asked: "any", "peak", "grow", "trim", "limit", "periodic" */
    char *event;   /* the snapshot's own kind ("peak", ... for kind any); "none" when count is 0 */
    int64_t count; /* events of this kind so far */
    int64_t index; /* the snapshot's */
    int64_t time_ns, run_time_ns;
    int64_t live_before_bytes, live_after_bytes;
    int64_t fragmentation_before_bytes, fragmentation_after_bytes;
    int64_t rss_bytes, committed_bytes, memory_load_bytes, total_available_bytes;
    int64_t alloc_time_ns, map_time_ns;
    int64_t minor_faults, major_faults, overhead_bytes, event_ns;
    struct report_info_category *categories; /* the categories= field, in its order */
    size_t ncategories;
};

/* The `memory_time` line: the whole process's time in memory management
 * so far (the info lines carry it as of each event). */
struct report_memory_time {
    int64_t run_time_ns, alloc_time_ns, map_time_ns;
};

/* Request spans: a latency histogram per span name. A bucket holds the
 * spans whose duration lies in [lo_ns, hi_ns). */
struct report_span_bucket {
    int64_t lo_ns, hi_ns;
    int64_t count;       /* spans */
    int64_t affected;    /* ... during which their thread raised at least one memory event */
    int64_t multiple;    /* ... at least two */
    int64_t events;      /* the events those spans met, summed */
    int64_t duration_ns; /* the spans' durations, summed */
    int64_t memory_ns;   /* their time inside allocator and mapping calls, summed */
    int64_t faults;      /* their threads' page faults (0 unless span_faults) */
    /* The affected spans' own sums (exact where report_span_bucket has
     * them; older reports lack them: has_affected_sums false). */
    int64_t affected_duration_ns, affected_memory_ns;
    bool has_affected_sums;
};
struct report_span {
    int64_t id;
    char *name;
    int64_t count;                      /* spans ended under this name */
    struct report_span_bucket *buckets; /* by duration, ascending lo_ns */
    size_t nbuckets;
    struct report_span_bucket *memory; /* by memory time: lo_ns, hi_ns, count only */
    size_t nmemory;
};

struct report {
    unsigned has; /* REPORT_HAS_* bits */
    int64_t pid;
    int64_t ppid;
    char *exe;
    char **argv; /* unescaped command line, argc entries */
    size_t argc;
    char *mode;
    int64_t start_ns;
    int64_t end_ns;
    char *reason;                       /* the whole rest of the line: "exit", "signal SIGSEGV", ... */
    struct report_category *categories; /* in file order */
    size_t ncategories;
    struct report_counts total;
    struct report_errors errors;
    struct report_process process; /* zeros unless REPORT_HAS_PROCESS */
    int64_t stack_depth;           /* detail mode: frames per stack; 0 otherwise */
    char *unwinder;                /* "libunwind", "fp", or NULL */
    int64_t sample_rate;           /* mode sample: mean bytes between samples; 0 for an exact report */
    struct report_module *modules;
    size_t nmodules;
    struct report_site *sites; /* in file order */
    size_t nsites;
    int64_t sites_dropped;     /* the sites line's dropped= */
    struct report_info *infos; /* memory info, in file order */
    size_t ninfos;
    struct report_memory_time memory_time;
    struct report_span *spans; /* by id */
    size_t nspans;
    int64_t spans_unmatched_ends; /* mt_span_end without a begin */
    int64_t spans_dropped;        /* spans not recorded (too deep, too many names) */
    bool span_faults;             /* faults were counted (option span_faults=on) */
    bool complete;                /* the end marker was read */
    long lines_read;              /* complete lines accepted so far */
    /* What the figures cannot know, one line each ("CAUTION: ..."): a
     * trace's caveats (events lost, begun late, blocks unknown, no end),
     * set by analyze_to_report; none for a report file. */
    char **caveats;
    size_t ncaveats;
};

/* Whether r's sites are sampled estimates (mode sample, docs/sampling.md). */
bool report_is_sampled(const struct report *r);

/* Whether every site of `r` carries allocated_bytes (true when it has none). */
bool report_sites_have_allocated(const struct report *r);

/* Read the report at `path` into `r` (which the function initialises).
 * On any return, `r` holds what was read before the problem and must be
 * released with report_free(). Errors:
 *   -ENOENT, -EACCES, ...  the file cannot be opened or read
 *   -EISDIR                path is a directory
 *   -EINVAL                not a report (bad header, empty file)
 *   -ENOTSUP               a newer format version
 *   -EBADMSG               a corrupt line (bad value, bad field, ...)
 *   -ERANGE                a number that does not fit in 64 bits
 *   -ENODATA               truncated: no end marker; r holds every line
 *                          before the cut and r->complete is false */
int report_read(const char *path, struct report *r, char *err, size_t errlen);

/* Same, reading from an open stream; `name` is used in messages. */
int report_read_stream(FILE *f, const char *name, struct report *r, char *err, size_t errlen);

void report_free(struct report *r);

/* --- inputs (report_input.c) --------------------------------------------
 * A file a command reads, opened once: its first bytes are read ahead to
 * tell what it is (a report, a trace), then a reader takes it from its
 * first byte. Pipes and FIFOs cannot be reopened or rewound: they are read
 * once, front to back, the first bytes served from `head`. */
struct report_input {
    int fd;                /* -1 once a reader took it */
    const char *name;      /* as the user named it; "(stdin)" for - */
    unsigned char head[8]; /* the first bytes */
    size_t nhead;          /* fewer than 8: the input ends there */
    bool seekable;         /* a regular file, opened at its start: read from byte 0 again */
    uint64_t size;         /* of a seekable file */
};

/* Opens `path` (- is stdin) and reads its first bytes. 0, or -errno with
 * "NAME: why" in err (-EISDIR for a directory). */
int report_input_open(const char *path, struct report_input *in, char *err, size_t errlen);
/* Whether the input starts with those bytes (len at most 8). */
bool report_input_starts_with(const struct report_input *in, const void *magic, size_t len);
/* The whole input as a stream from its first byte; it takes the input's
 * descriptor (fclose closes it). NULL with errno on failure. */
FILE *report_input_file(struct report_input *in);
/* report_read on an opened input. */
int report_read_input(struct report_input *in, struct report *r, char *err, size_t errlen);
void report_input_close(struct report_input *in);

/* Parse a strict signed 64-bit decimal: optional '-', then digits only.
 * Returns 0, -EINVAL (not an integer) or -ERANGE (overflow). */
int report_parse_i64(const char *s, int64_t *out);

/* Text output units for the summary. */
struct report_scale {
    const char *unit; /* "KB", "MB", "GB" */
    int64_t bytes;    /* 1024, 1024^2, 1024^3 */
};

/* Look up a --scale value (KB, MB, GB; lowercase accepted). Returns 0 or
 * -EINVAL. */
int report_scale_parse(const char *s, struct report_scale *out);

/* `bytes` in `scale` units, rounded to the nearest integer. */
int64_t report_scaled(int64_t bytes, int64_t scale);

/* `bytes` in `scale` units as the text shows them ("4792KB", "0.879MB":
 * common/units.h, enough digits that nothing nonzero prints as 0). The
 * string lives in one of 16 per-thread buffers, until the 16th call after. */
const char *report_size(int64_t bytes, const struct report_scale *scale);

/* The NMT-like text summary and the JSON document (docs/json.md). They
 * print whatever `r` holds, complete or not. Return 0 or -EIO when the
 * stream reports a write error. */
int report_print_text(FILE *out, const struct report *r, const struct report_scale *scale);
int report_print_json(FILE *out, const struct report *r);

/* Write `s` so that a POSIX shell reads it back as one word. */
void report_shell_quote(FILE *out, const char *s);

/* --- helpers the printers share (report_print.c) ------------------------- */

/* a + b and a - b, saturating at INT64_MIN/INT64_MAX (files are untrusted). */
int64_t report_add(int64_t a, int64_t b);
int64_t report_sub(int64_t a, int64_t b);

/* Makes room for `need` items of `size` bytes in the array *items points
 * to (a `T **` passed as void *), whose capacity is *cap: doubles it,
 * starting at `first`. Returns 0, or -ENOMEM with the array as it was. */
int report_grow(void *items, size_t *cap, size_t need, size_t size, size_t first);

/* The sum of every category's virtual memory fields. */
void report_vm_total(const struct report *r, struct report_vm *sum);

/* How much of the RSS the categories explain: the sum of `resident` over
 * every category except `other` (address space of unknown origin). */
int64_t report_explained(const struct report *r);

/* "pid N, " and the command line (or the executable): whose report it is. */
void report_print_who(FILE *out, const struct report *r);

/* The command line, each argument shell-quoted, separated by spaces. */
void report_print_cmdline(FILE *out, const struct report *r);

/* The reason line in words: "written at exit", "written on fatal signal
 * SIGSEGV", ... */
void report_print_reason(FILE *out, const char *reason);

/* Whether category c is of `kind` ("malloc", "overhead", "vm"). */
bool report_category_is(const struct report_category *c, const char *kind);

/* --- JSON (report_json.c; the documents are in docs/json.md) ------------ */

struct mt_json;
/* The command line as a JSON array of strings, or null when r has none. */
void report_json_cmdline(struct mt_json *j, const struct report *r);
/* The six counters (live_bytes ... reallocs), into an open object. */
void report_json_counts(struct mt_json *j, const struct report_counts *c);
/* "sampling": {"rate_bytes": R} for a sampled report, null for an exact one. */
void report_json_sampling(struct mt_json *j, const struct report *r);
/* The summary document's keys after "schema" (pid ... errors), into the
 * open top-level object, so that the detail document can add its own. */
void report_json_summary(struct mt_json *j, const struct report *r);
/* The same for the diff document (base, new, categories ... errors). */
int report_json_diff(struct mt_json *j, const struct report *base, const struct report *cur);

/* --- lookups (report_index.c) ------------------------------------------- */

/* A hash of bytes keyed with a secret of this process (SipHash-1-3), so a
 * crafted file cannot make its names collide. */
uint64_t report_hash(const void *data, size_t len);
uint64_t report_hash_str(const char *s);
uint64_t report_hash_i64(int64_t v);

/* A hash index of the items of an array (by their position): the caller
 * hashes an item's key, adds it, and finds the items of a hash again,
 * comparing keys itself. Zero-initialise; free with report_index_free. */
struct report_index {
    struct report_slot *slots;
    size_t cap, n;
};
/* 0, or -ENOMEM with the index as it was. */
int report_index_add(struct report_index *x, uint64_t hash, size_t item);
/* The next item added with `hash`, or SIZE_MAX when there is none left;
 * *pos starts at 0 and carries the position between calls. */
size_t report_index_next(const struct report_index *x, uint64_t hash, size_t *pos);
void report_index_free(struct report_index *x);

/* The modules of a report sorted by address: the module a return address
 * lies in, in O(log n). Where modules overlap (never in a report the agent
 * writes), the first in file order that holds it, as a scan would find. */
struct report_module_map {
    const struct report *r;
    size_t *order; /* module indices by start address */
    size_t n;
    bool overlap;
};
/* 0 or -ENOMEM. r must outlive the map. */
int report_module_map_init(struct report_module_map *m, const struct report *r);
/* The index in r->modules of the module holding pc, or -1. */
long report_module_map_find(const struct report_module_map *m, uint64_t pc);
void report_module_map_free(struct report_module_map *m);

/* --- process trees (report_tree.c) --------------------------------------- */

/* One row per report, indented under its parent when the parent's report
 * is among them (matched by pid = ppid), then a totals row; JSON is
 * {"schema": ..., "processes": [...], "total": {...}} (docs/json.md). `files[i]` names
 * `reports[i]`. Return 0, -ENOMEM or -EIO. */
int report_tree_print_text(FILE *out, const struct report *reports, const char *const *files, size_t n,
                           const struct report_scale *scale);
int report_tree_print_json(FILE *out, const struct report *reports, const char *const *files, size_t n);

/* --- diff of two reports (report_diff.c) --------------------------------- */

/* Category by category (matched by name; one present on one side only is
 * shown as new or gone), the new value and the change from `base` to `cur`
 * of every counter and virtual memory field, then the total's and the
 * process's. The text is like 'jcmd PID VM.native_memory summary.diff';
 * the JSON contract is in docs/json.md. Either report may be incomplete.
 * Return 0 or -EIO (or -ENOMEM). */
int report_diff_print_text(FILE *out, const struct report *base, const struct report *cur,
                           const struct report_scale *scale);
int report_diff_print_json(FILE *out, const struct report *base, const struct report *cur);

#endif /* MT_REPORT_H */
