/* analyze.h — the streaming analyzer of traces (docs/trace-analysis.md):
 * one pass over a trace's events in bounded memory gives the totals, the
 * peak of live bytes and the stacks live at it, the leaks and temporary
 * allocations by stack, the hottest stacks, a size histogram and a
 * timeline of live bytes (analyze.c), the reading on a thread of its own
 * (analyze_run.c); text and JSON output for `memtrail
 * analyze` (analyze_print.c); the analysis as a detail report, so `memtrail
 * report` and `export` show traces too (analyze_report.c).
 *
 * Memory: a few MB, per-stack and per-thread state for the stacks and
 * threads seen, and the live map (analyze_live.c): at most 11.6 bytes per
 * live allocation plus 7 MB, whatever the file's size (analyze_live.h).
 *
 * CLI-side code: allocates with malloc. Functions return 0 or a negative
 * errno code. */
#ifndef MT_ANALYZE_H
#define MT_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace/trace_read.h"

struct report;
struct report_input;
struct report_scale;
struct symbolizer;
struct sym_cache;

struct analyze_live; /* the live map: analyze_live.h, private to the analyzer */

/* --- the analysis (analyze.c) --------------------------------------------- */

#define ANALYZE_HIST 65      /* size 0, then [2^(k-1), 2^k) for k = 1..64 */
#define ANALYZE_TIMELINE 256 /* timeline buckets (default) */
#define ANALYZE_CATEGORIES 256

/* One stack (a stack id and the category of its allocations: the agent's
 * detail-mode site). Counters follow detail mode's per-site rules: a
 * realloc at the block's own stack counts as a realloc there, one at
 * another stack as a free at the old stack and an allocation at the new. */
struct analyze_stack {
    uint32_t id;
    uint8_t category;
    uint64_t allocs, frees, reallocs;
    uint64_t allocated_bytes;        /* bytes allocated (and grown by realloc) here */
    uint64_t live_bytes, live_count; /* at the end: the leaks */
    uint64_t max_live_bytes;         /* the stack's own peak */
    uint64_t peak_bytes, peak_count; /* live at the trace's peak (after analyze_end) */
    uint64_t temp_count, temp_bytes; /* temporary allocations */
    uint64_t snap_epoch;             /* internal: peak_* hold the values at peak number snap_epoch */
};

/* Totals of one category. */
struct analyze_category {
    uint64_t allocs, frees, reallocs;
    uint64_t live_bytes, live_count, peak_bytes;
    bool used;
};

struct analyze_bucket {
    uint64_t live_bytes; /* at the bucket's end */
    uint64_t max_bytes;  /* the most live in it */
};

/* What a forked child's trace (meta `began fork`) took over from its
 * parent's trace: the blocks live in the parent at the fork, replayed from
 * the parent's file (analyze_inherit.c; docs/trace-analysis.md). */
enum analyze_inherit_state {
    ANALYZE_INHERIT_NONE,   /* not a forked child's trace (or one written before the meta) */
    ANALYZE_INHERIT_DONE,   /* the parent's blocks at the fork are the child's first live set */
    ANALYZE_INHERIT_FAILED, /* the parent's trace could not be used: note says why */
};

struct analyze_inherited {
    int state;             /* ANALYZE_INHERIT_* */
    uint64_t ppid;         /* the parent's pid (meta ppid), 0 when not given */
    uint64_t count, bytes; /* the blocks inherited */
    bool parent_short;     /* the parent's file ends (or stops) before the fork */
    bool parent_late;      /* the parent's trace began late itself (analyze_began_late) */
    char parent[1024];     /* the parent's trace file as opened (or as named) */
    char note[768];        /* FAILED: why; DONE with parent_short or parent_late: what it lacks */
};

struct analyze_result {
    uint64_t events;
    uint64_t allocs;           /* ALLOC events */
    uint64_t frees;            /* FREE events of a live block */
    uint64_t reallocs;         /* REALLOC events */
    uint64_t frees_unknown;    /* FREE of a block not live (before the trace, or lost) */
    uint64_t reallocs_unknown; /* REALLOC of a block not live: counted as a new block */
    uint64_t ids_reused;       /* an id allocated while live (wrapped): the older block is dropped */
    uint64_t mmaps, munmaps;
    uint64_t allocated_bytes;        /* allocated, and grown by realloc */
    uint64_t live_bytes, live_count; /* at the end: the leaks */
    uint64_t peak_bytes, peak_count, peak_time_ns;
    uint64_t temp_count, temp_bytes;
    uint64_t mapped_bytes, mapped_peak; /* mmap - munmap (not in live bytes) */
    uint64_t first_ns, last_ns;         /* the events' time range */
    uint64_t hist_count[ANALYZE_HIST], hist_bytes[ANALYZE_HIST];
    uint64_t max_size; /* the largest size an allocation or realloc asked for */
    struct analyze_inherited inherited;
    /* Frames of stacks only the parent's trace defines (inherited blocks'),
     * by id: analyze_stack_frames finds them. */
    mt_trace_stack *parent_stacks;
    size_t nparent_stacks;
    /* The parent's modules (the child's file lists only those its own
     * stacks need): analyze_modules adds the ones the child's lacks. */
    mt_trace_module *parent_modules;
    size_t nparent_modules;
    struct analyze_stack *stacks; /* every stack seen, in order of first use */
    size_t nstacks;
    struct analyze_category categories[ANALYZE_CATEGORIES];
    struct analyze_bucket *timeline; /* ntimeline buckets of bucket_ns from time 0 */
    /* Each category's live bytes at each bucket's end: bucket i's are
     * timeline_cat[i * ANALYZE_CATEGORIES + category]. */
    uint64_t *timeline_cat;
    size_t ntimeline;
    uint64_t bucket_ns;
};

struct analyzer;

/* timeline_buckets: 0 for ANALYZE_TIMELINE (at least 2). NULL on ENOMEM. */
struct analyzer *analyze_new(unsigned timeline_buckets);
void analyze_free(struct analyzer *a);
/* One event, in the trace's order. 0 or -ENOMEM. */
int analyze_event(struct analyzer *a, const mt_trace_event *ev);
/* n events, in the trace's order (the same as one at a time, faster). */
int analyze_events(struct analyzer *a, const mt_trace_event *ev, size_t n);
/* After the last event: the figures at the peak, the timeline's end; the
 * live map is freed (no events after this). */
void analyze_end(struct analyzer *a);
const struct analyze_result *analyze_result(const struct analyzer *a);
/* The live map's bytes (tests, --stats). */
uint64_t analyze_map_bytes(const struct analyzer *a);

/* Reads every event of r into a (then analyze_end), the reading on a
 * thread of its own (analyze_run.c): r must not be used until it returns.
 * progress, when not NULL, is called every 4096 events or so with the
 * events analysed and the bytes of the file read. Returns 0 at the end of
 * the trace, -EBADMSG when the reader stopped on an error (mt_trace_error
 * says which; everything before it was analysed), or -ENOMEM. */
int analyze_run(struct analyzer *a, mt_trace_reader *r,
                void (*progress)(void *ctx, uint64_t events, uint64_t offset), void *ctx);
/* The same, and peek called on the reading thread with each batch of
 * events as it is read (last: the reader reached its end or an error),
 * until it returns false: there, and only there while analyze_run runs,
 * the reader's definitions so far (stacks, modules) may be read. */
typedef bool analyze_peek_fn(void *ctx, mt_trace_reader *r, const mt_trace_event *ev, size_t n, bool last);
int analyze_run_peek(struct analyzer *a, mt_trace_reader *r,
                     void (*progress)(void *ctx, uint64_t events, uint64_t offset), void *ctx,
                     analyze_peek_fn *peek, void *peek_ctx);
/* The live map, for analyze_run's prefetching. */
struct analyze_live *analyze_live_of(struct analyzer *a);
/* The trace's file name, when it is a file: a parent's trace that is not
 * where the child's meta says is looked for beside it (analyze_inherit). */
void analyze_set_file(struct analyzer *a, const char *path);

/* --- process trees (analyze_inherit.c) ------------------------------------ */

/* Before the first event of `child` (its meta read so far: the first
 * definitions): when it is a forked child's trace, its parent's trace is
 * read up to the fork and the blocks live there become a's first live
 * set (res->inherited says what happened). analyze_run calls it. 0, or
 * -ENOMEM (a problem with the parent's file is not an error: a note). */
int analyze_inherit(struct analyzer *a, mt_trace_reader *child);
/* Before any event: the blocks live in `parent` (an analysis not ended)
 * become a's live set, at a first peak at time 0 (analyze.c). */
int analyze_take_live(struct analyzer *a, const struct analyzer *parent);
/* For analyze_inherit.c: the result to fill in, the file's name (or NULL). */
struct analyze_result *analyze_result_edit(struct analyzer *a);
const char *analyze_file_name(const struct analyzer *a);
/* The frames of stack id: the trace's own definition, else the parent's
 * (an inherited block's stack), else NULL. */
/* The modules to symbolize with: the trace's, then the parent's that
 * start where none of the trace's does. A malloc'd array of *n pointers
 * (NULL with *n = 0 on ENOMEM). res may be NULL: the trace's only. */
const mt_trace_module **analyze_modules(const struct analyze_result *res, mt_trace_reader *r, size_t *n);
const mt_trace_stack *analyze_stack_frames(const struct analyze_result *res, const mt_trace_reader *r,
                                           uint32_t id);

/* --- what lost events do to the figures (analyze_caveats.c) -------------- */

/* One figure that cannot be trusted, and by how much it may be off. */
struct analyze_caveat {
    const char *figure;                /* "live", "leaks", "peak", "allocations", "frees", "temporary" */
    uint64_t over_count, over_bytes;   /* it may be too high by up to this */
    uint64_t under_count, under_bytes; /* it may be too low by up to this */
    bool bounded;                      /* false: it may be off by more (trace cut short, blocks before it) */
};

#define ANALYZE_CAVEATS_MAX 6

struct analyze_caveats {
    bool any;             /* false: every figure is exact */
    bool lost_known;      /* the end record says how many were lost */
    uint64_t lost, fired; /* events lost, of events fired (fired: the end record's, else read + lost) */
    bool incomplete;      /* no end record, or reading stopped early */
    uint64_t unknown;     /* frees and reallocs of blocks the trace does not hold */
    bool before;          /* the trace began after the program had allocated (on demand, or a
                             forked child's without all its parent's blocks): those are in no figure */
    bool began_query;     /* before, because it began on demand (meta began=query) */
    uint64_t mean_size, max_size;
    struct analyze_caveat fig[ANALYZE_CAVEATS_MAX];
    size_t nfig;
};

/* Whether the trace read through r began after the program had allocated,
 * the blocks live then in no figure: on demand (meta began=query), or at a
 * fork without all the parent's blocks (its trace unreadable, ending
 * before the fork, or begun late itself). */
bool analyze_began_late(const struct analyze_result *res, const mt_trace_reader *r);
/* The caveats of a result read through r (NULL: none known), incomplete
 * when reading stopped early or the trace has no end record. */
void analyze_caveats(const struct analyze_result *res, const mt_trace_reader *r, bool incomplete,
                     struct analyze_caveats *cv);
/* Text: the lines to print before the figures (nothing when all exact),
 * the inherited blocks' line (a forked child's trace). */
void analyze_caveats_text(FILE *out, const struct analyze_result *res, const struct analyze_caveats *cv);
void analyze_inherited_text(FILE *out, const struct analyze_result *res);
/* The same caveats one line each, no newline ("CAUTION: ..."), for where
 * analyze's text is not shown: export's stderr, pprof's comments. */
#define ANALYZE_CAVEAT_LINES 4 /* lost, began late, unknown blocks, incomplete */
#define ANALYZE_CAVEAT_LINE_MAX 512
struct analyze_caveat_lines {
    size_t n;
    char line[ANALYZE_CAVEAT_LINES][ANALYZE_CAVEAT_LINE_MAX];
};
void analyze_caveats_lines(const struct analyze_result *res, const struct analyze_caveats *cv,
                           struct analyze_caveat_lines *out);
/* JSON: "caveats" (null when every figure is exact) and "inherited"
 * (null when the trace is not a forked child's). */
struct mt_json;
void analyze_caveats_json(struct mt_json *j, const struct analyze_caveats *cv);
void analyze_inherited_json(struct mt_json *j, const struct analyze_result *res);

/* --- output (analyze_print.c) --------------------------------------------- */

enum {
    ANALYZE_SHOW_PEAK = 1u << 0,
    ANALYZE_SHOW_LEAKS = 1u << 1,
    ANALYZE_SHOW_TEMPORARY = 1u << 2,
    ANALYZE_SHOW_HOT = 1u << 3,
    ANALYZE_SHOW_HISTOGRAM = 1u << 4,
    ANALYZE_SHOW_TIMELINE = 1u << 5,
    ANALYZE_SHOW_ALL = 0x3f,
};

/* What the printers need besides the result. */
struct analyze_view {
    const char *file;
    mt_trace_reader *reader; /* stacks' frames, categories, end statistics */
    struct symbolizer *sym;  /* over the trace's modules (analyze_symbolizer) */
    unsigned show;           /* ANALYZE_SHOW_* */
    int top;                 /* stacks per list */
    const char *error;       /* reading stopped early: why (NULL: it did not) */
};

int analyze_print_text(FILE *out, const struct analyze_result *res, const struct analyze_view *v);
int analyze_print_json(FILE *out, const struct analyze_result *res, const struct analyze_view *v);

/* "tree": the stacks live at the peak as one call tree, outermost frame
 * first, a flat array of {name, value, parent} (analyze_tree.c); nodes under
 * 1/5000 of the peak are left out. 0 or -ENOMEM. */
int analyze_tree_json(struct mt_json *j, const struct analyze_result *res, mt_trace_reader *r,
                      struct symbolizer *sym);

/* --- a trace as a detail report (analyze_report.c) ------------------------ */

/* The analysis as a detail report: one site per stack (its counters at the
 * end of the trace, peak_bytes its own peak, allocated_bytes), the trace's
 * modules, one category per category used, the caveats one line each
 * (analyze_caveats_lines; complete false counts as incomplete). `r` is initialised here; free
 * it with report_free. 0 or -ENOMEM. */
int analyze_to_report(const struct analyze_result *res, mt_trace_reader *tr, bool complete, struct report *r);

/* For `memtrail report` and `export`: reads the file at `path`, a trace
 * (analysed into a detail report) or a report file (report_read), with
 * report_read's returns: 0, -ENODATA when it stopped early (r holds what
 * was read before), other negative errno codes with r empty. */
int analyze_read_any(const char *path, struct report *r, char *err, size_t errlen);
/* The same for an input opened once (report_input_open: a pipe or a FIFO
 * is read once, front to back); the reader takes it. */
int analyze_read_input(struct report_input *in, struct report *r, char *err, size_t errlen);
/* Whether an opened input is a trace (by its first bytes). */
bool analyze_input_is_trace(const struct report_input *in);
/* The trace reader of an opened input (which it takes): a regular file
 * with its index, a stream front to back. mt_trace_open's returns. */
int analyze_open_trace(struct report_input *in, unsigned flags, mt_trace_reader **out, char *err,
                       size_t errlen);

/* --- symbolizing a trace's stacks (analyze_symbols.c) -------------------- */

/* A symbolizer over the trace's modules (its module list as read so far),
 * the modules the stacks of res lie in opened already (its warnings
 * complete), taken from c when they were opened there (c may be NULL).
 * NULL on out-of-memory. */
struct symbolizer *analyze_symbolizer(const struct analyze_result *res, mt_trace_reader *tr,
                                      struct sym_cache *c);

/* The modules that the stacks of a trace's first events lie in, opened on
 * a thread of their own while the trace is analysed (reading their debug
 * info is the slowest fixed cost, and the analysis leaves a core idle).
 * Fed by analyze_run_peek in the same pass over the file: pass
 * analyze_preload_peek with the preload as its context. */
struct analyze_preload;
/* NULL on out-of-memory (then analyse without it). */
struct analyze_preload *analyze_preload_new(uint64_t events);
bool analyze_preload_peek(void *preload, mt_trace_reader *r, const mt_trace_event *ev, size_t n, bool last);
/* After analyze_run_peek: waits for the modules, which the returned cache
 * (NULL when there is none) holds until analyze_preload_free. */
struct sym_cache *analyze_preload_join(struct analyze_preload *p);
void analyze_preload_free(struct analyze_preload *p);

#endif
