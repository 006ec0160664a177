/* report_model.h — the reference-set report's model (docs/refset-report.md):
 * fed one record at a time (rs_model_add), independent of the file, it
 * turns REF/RELEASE/EXIT records into page references with a reference
 * time and a release time; rs_model_finish merges them per physical page
 * into the system's outstanding set; rs_view computes every figure of one
 * viewport from that (report_view.c), so a new viewport needs no re-read.
 *
 * CLI-side code: allocates freely. Functions return 0 or -ENOMEM. */
#ifndef MT_REFSET_REPORT_MODEL_H
#define MT_REFSET_REPORT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "refset/refset_event.h"
#include "refset/refset_file.h" /* RS_FILE_* */

/* Page references a report holds at most (64 GiB of 4 KiB pages; the
 * model then takes about 3 GB): rs_model_add says -E2BIG beyond, rather
 * than let a few bytes of a hostile file take the machine's memory. */
#define RS_MODEL_MAX_REFS (1u << 24)

#define RS_T_BEFORE INT64_MIN /* referenced before the recording */
#define RS_T_NEVER INT64_MAX  /* never released */

enum { RS_IMPACTING = 0, RS_TRANSIENT = 1, RS_PERSISTENT = 2, RS_NTYPES };
/* How a page is identified across processes. */
enum { RS_ID_ZERO = 0, RS_ID_PFN = 1, RS_ID_FILE = 2, RS_ID_PROCESS = 3 };

/* One page reference: one page of a REF record. */
struct rs_pref {
    uint64_t addr;        /* the page's virtual address */
    uint64_t id_a, id_b;  /* identity: (pfn, 0), (ino, page index in the file), (pid, addr) */
    int64_t t_ref, t_rel; /* ns since the start; RS_T_BEFORE, RS_T_NEVER */
    uint32_t proc;        /* index into the model's processes */
    uint32_t stack;       /* impacting stack id (0: none) */
    uint32_t alloc_stack; /* allocation stack id (0: none) */
    uint32_t dev;         /* RS_ID_FILE: the file's device */
    uint8_t id_kind;      /* RS_ID_* */
    uint8_t cat, flags;
};

/* A process of the recording: a pid from its start (or exec) to its exit
 * (or next exec). */
struct rs_proc {
    uint32_t pid, ppid;
    char *program;
    bool alive;
    uint32_t *refs; /* its page references, in order */
    size_t nrefs, cap;
};

struct rs_stack {
    uint32_t id;
    uint32_t nframes;
    uint64_t *frames;
};

struct rs_module {
    uint32_t pid;
    uint64_t start, len, pgoff;
    char *path, *buildid;
};

/* A maximal interval over which one physical page is outstanding in the
 * system (the union of its references), attributed to the reference that
 * started it. */
struct rs_span {
    int64_t start, end;
    uint32_t ref;
};

struct rs_page_map; /* (pid, page) -> its outstanding reference */

struct rs_model {
    uint32_t page_size;
    uint32_t file_flags; /* RS_FILE_* */
    uint64_t start_monotonic_ns;
    int64_t end_ns; /* the last record's time */

    struct rs_pref *refs;
    size_t nrefs, refs_cap;
    struct rs_proc *procs;
    size_t nprocs, procs_cap;
    struct rs_stack *stacks;
    size_t nstacks, stacks_cap;
    struct rs_module *modules;
    size_t nmodules, modules_cap;

    uint64_t records;
    uint64_t duplicate_pages; /* REFs of a page still outstanding in that pid: ignored */
    uint64_t lost_samples;    /* RS_EV_LOST counts */
    uint64_t lost_records;

    struct rs_page_map *pages;

    /* After rs_model_finish: */
    struct rs_span *spans; /* by start time */
    size_t nspans;
    uint64_t peak_bytes;   /* the system graph's highest value */
    int64_t peak_ns;       /* first reached */
    uint64_t steady_bytes; /* outstanding at the end */
    bool finished;
};

/* page_size and file_flags come from the recording's header. */
int rs_model_init(struct rs_model *m, uint32_t page_size, uint32_t file_flags, uint64_t start_monotonic_ns);
/* One record, in the file's order. 0 or -ENOMEM. */
int rs_model_add(struct rs_model *m, const mt_rs_event *ev);
/* After the last record: builds the system view (spans, peak, steady). */
int rs_model_finish(struct rs_model *m);
void rs_model_free(struct rs_model *m);

/* A stack by id, or NULL. */
const struct rs_stack *rs_model_stack(const struct rs_model *m, uint32_t id);

/* --- one viewport (report_view.c) ------------------------------------- */

/* The figures of a row (a process, a category, a class, a stack, ...). */
struct rs_figs {
    uint64_t size;                   /* bytes of every page reference alive in the viewport */
    int64_t impact;                  /* graph_end - graph_start */
    uint64_t graph_start, graph_end; /* the system view's bytes at T0 and T1 */
    uint64_t types[RS_NTYPES];       /* size by impact type */
    uint64_t zero_page;              /* bytes of zero-page references in size */
};

struct rs_stack_row {
    uint32_t id;
    uint32_t pid;        /* a process whose references use it (for symbols) */
    const char *program; /* its program: the same frames in two programs are two stacks */
    struct rs_figs f;
};

struct rs_point {
    int64_t time_ns;
    uint64_t bytes;
    uint64_t *by_proc; /* nprocs values */
    uint64_t by_cat[RS_NCATEGORIES];
};

struct rs_view {
    int64_t t0, t1; /* ns since the start */
    struct rs_figs total;
    struct rs_figs *procs;     /* nprocs */
    struct rs_figs *proc_cats; /* nprocs * RS_NCATEGORIES */
    struct rs_figs cats[RS_NCATEGORIES];
    struct rs_figs classes[2];
    struct rs_stack_row *impacting, *allocation; /* sorted by |impact|, then size */
    size_t nimpacting, nallocation;
    struct rs_point *timeline; /* the system graph over the viewport, <= RS_TIMELINE_MAX points */
    size_t npoints;
};

#define RS_TIMELINE_MAX 500

/* Every figure for the viewport (t0, t1] (ns). 0 or -ENOMEM. */
int rs_view_compute(const struct rs_model *m, int64_t t0, int64_t t1, struct rs_view *v);
void rs_view_free(struct rs_view *v);
/* The impact type of a page reference alive in the viewport, or -1. */
int rs_impact_type(int64_t t_ref, int64_t t_rel, int64_t t0, int64_t t1);

#endif
