/* export.h — detail reports in other tools' formats: folded stacks
 * (flamegraph.pl, speedscope, inferno; folded.c) and pprof's gzip'ed
 * profile.proto (go tool pprof, Pyroscope, Parca; pprof.c, encoded by
 * pb.c). Both walk the report's sites and symbolize each recorded return
 * address once (stacks.c), inlined calls as frames of their own.
 *
 * CLI-side code: allocates freely. Functions return 0 or a negative errno
 * code (-ENOMEM, -EIO when the stream reports a write error). */
#ifndef MT_EXPORT_H
#define MT_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report/report.h"
#include "symbol/symbol.h"

/* The per-site counter an export shows (--value). */
enum export_value {
    EXPORT_LIVE_BYTES,
    EXPORT_LIVE_COUNT,
    EXPORT_PEAK_BYTES,
    EXPORT_ALLOCS,
    EXPORT_FREES,
    EXPORT_REALLOCS,
    EXPORT_ALLOCATED_BYTES, /* 0 for a site without allocated_bytes (an older report) */
};

/* "live_bytes", "live_count", "peak_bytes", "allocs", "frees", "reallocs",
 * "allocated_bytes".
 * Returns 0 or -EINVAL. */
int export_value_parse(const char *name, enum export_value *out);
const char *export_value_name(enum export_value v);
int64_t export_site_value(const struct report_site *s, enum export_value v);

/* Folded stacks: one line per distinct stack, root first, frames joined
 * by ';', a space and the sum of `v` over the sites with that stack (their
 * categories merged); stacks whose sum is not positive are left out. Lines
 * are sorted by stack. */
int export_folded(FILE *out, const struct report *r, struct symbolizer *sym, enum export_value v);

/* The pprof profile, gzip'ed, to `out`. Sample types inuse_space/bytes,
 * inuse_objects/count, alloc_space/bytes, alloc_objects/count (pprof's heap
 * profile order); alloc_space only when every site carries allocated_bytes
 * (report_sites_have_allocated; older reports lack it, and a comment says
 * so). One sample per site with a "category" label. `default_type` picks
 * default_sample_type: EXPORT_LIVE_BYTES, EXPORT_LIVE_COUNT, EXPORT_ALLOCS
 * or EXPORT_ALLOCATED_BYTES (-EINVAL for the others, and for
 * EXPORT_ALLOCATED_BYTES without alloc_space). `source` names the report in
 * the profile's comments, which also carry r's caveats (a trace's). */
int export_pprof(FILE *out, const struct report *r, struct symbolizer *sym, enum export_value default_type,
                 const char *source);

/* --- shared by the exporters (stacks.c) ---------------------------------- */

/* A uint64 -> uint64 hash map (open addressing). */
struct export_map {
    uint64_t *keys, *vals;
    unsigned char *used;
    size_t cap, n;
};
/* 1 and *val when key is there, else 0. */
int export_map_get(const struct export_map *m, uint64_t key, uint64_t *val);
/* Insert or replace; 0 or -ENOMEM. */
int export_map_put(struct export_map *m, uint64_t key, uint64_t val);
void export_map_free(struct export_map *m);

/* One distinct return address and what the symbolizer made of it. */
struct export_addr {
    uint64_t address;
    size_t first; /* its frames: stacks->frames[first .. first + nframes) */
    int nframes;  /* >= 1, innermost (inlined) first */
    long module;  /* index in r->modules of the module holding it, or -1 */
};

struct export_stacks {
    const struct report *r;
    struct symbolizer *sym;
    struct export_addr *addrs; /* in order of first use */
    size_t naddrs, addrs_cap;
    struct sym_frame *frames;
    size_t nframes, frames_cap;
    struct export_map index;          /* address -> index in addrs */
    struct report_module_map modules; /* built on the first lookup */
    bool modules_ready;
};

void export_stacks_init(struct export_stacks *st, const struct report *r, struct symbolizer *sym);
/* The index in st->addrs of `address`, symbolized on first use. 0 or -ENOMEM. */
int export_stacks_lookup(struct export_stacks *st, uint64_t address, size_t *index);
void export_stacks_free(struct export_stacks *st);

/* A frame's name for display: its function, else "MODULE+0xOFFSET" (the
 * module's file name, the ELF address), else "0xADDRESS"; ';', '\n' and
 * '\r' replaced by '_'. malloc'd; NULL on out-of-memory. */
char *export_frame_name(const struct sym_frame *f);

#endif
