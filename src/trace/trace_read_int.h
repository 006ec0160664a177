/* trace_read_int.h — the reader's internals shared by its files:
 * trace_read.c (the file, its chunks, the prefetch thread, events) and
 * trace_read_defs.c (definitions, end statistics and the index). */
#ifndef MT_TRACE_READ_INT_H
#define MT_TRACE_READ_INT_H

#include "trace/trace_read.h"

#include <pthread.h>

/* Definitions kept as they come. */
typedef struct trace_defs {
    uint32_t *tids; /* thread index -> tid */
    unsigned char *tid_known;
    uint32_t nthreads, threads_cap;
    mt_trace_stack *stacks; /* open addressing by id; nframes == UINT32_MAX: empty */
    uint32_t stacks_mask, nstacks;
    void *arena; /* frame blocks (a list, never moved) */
    size_t arena_left;
    unsigned char *arena_at;
    mt_trace_module *modules;
    size_t nmodules, modules_cap;
    char *categories[256];
    char **meta; /* key, value pairs */
    size_t nmeta;
    char **stat_names;
    uint64_t *stat_values;
    size_t nstats;
} trace_defs;

/* Parse a DEFS / END body into d: 0, or -1 with the reason in why. */
int trace_defs_parse(trace_defs *d, const unsigned char *p, size_t n, uint32_t count, char *why,
                     size_t whylen);
int trace_end_parse(trace_defs *d, const unsigned char *p, size_t n, uint32_t count, char *why,
                    size_t whylen);
void trace_defs_free(trace_defs *d);
const mt_trace_stack *trace_defs_stack(const trace_defs *d, uint32_t id);

/* An INDEX body: the number of entries, each checked; -1 with why. */
int trace_index_parse(const unsigned char *p, size_t n, uint32_t count, uint32_t unit,
                      mt_trace_chunk_info *out, char *why, size_t whylen);

#endif
