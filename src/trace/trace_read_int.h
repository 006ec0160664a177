/* trace_read_int.h — the reader's internals shared by its files:
 * trace_read.c (the file, its chunks, the prefetch thread, events) and
 * trace_read_defs.c (definitions, end statistics and the index). */
#ifndef MT_TRACE_READ_INT_H
#define MT_TRACE_READ_INT_H

#include "trace/trace_read.h"
#include "trace/trace_util.h"

#include <pthread.h>
#include <zstd.h>

/* Definitions kept as they come. Their sizes come from the file, so what
 * they hold is counted (`bytes`, at most TRACE_DEFS_MAX_BYTES) and a stack
 * defined again gives its old frames back (`free_frames`, one list per
 * frame count): a small file of compressed definitions must not make the
 * reader take gigabytes. */
#define TRACE_DEFS_MAX_BYTES ((size_t)512 << 20)
#define TRACE_DEFS_MAX_META 64u /* distinct meta keys (the writer has 9) */
#define TRACE_MAX_STATS 4096u   /* statistics of an end record (the writer has 6) */
typedef struct trace_defs {
    uint32_t *tids; /* thread index -> tid */
    unsigned char *tid_known;
    uint32_t nthreads, threads_cap;
    mt_trace_stack *stacks; /* open addressing by id; nframes == UINT32_MAX: empty */
    uint32_t stacks_mask, nstacks;
    void *arena; /* frame blocks (a list, never moved) */
    size_t arena_left;
    unsigned char *arena_at;
    uint64_t *free_frames[TRACE_MAX_FRAMES + 1]; /* by frame count; each block's first word links the next */
    size_t bytes;                                /* memory held, against TRACE_DEFS_MAX_BYTES */
    mt_trace_module *modules;
    size_t nmodules, modules_cap;
    char *categories[256];
    char **meta; /* key, value pairs */
    size_t nmeta;
    char **stat_names;
    uint64_t *stat_values;
    size_t nstats;
} trace_defs;

/* A chunk as the loader hands it over. */
typedef struct chunk {
    int status; /* 1 a chunk, 0 the clean end, -1 an error (err) */
    char err[MT_TRACE_ERR_MAX];
    uint64_t ordinal, offset, next;
    unsigned kind;
    uint32_t count;
    unsigned char *raw;
    size_t raw_len, raw_cap;
} chunk;

/* Reads chunks from the file in order. A stream (a pipe, a FIFO) is read
 * front to back once: `pos` is how far, and the first `npre` bytes, which
 * the caller took from it before (to tell a trace from a report), come
 * from `pre`. */
typedef struct loader {
    int fd;
    const unsigned char *mem;
    int stream;
    uint64_t pos;
    unsigned char pre[TRACE_HEADER_SIZE];
    size_t npre;
    uint64_t size, offset, ordinal;
    const char *name;
    int done, no_crc;
    unsigned char *stored;
    size_t stored_cap;
    ZSTD_DCtx *dctx;
} loader;

/* The event decoder's state within an EVENTS chunk. */
typedef struct decoder {
    const unsigned char *s[TRACE_NSTREAMS], *e[TRACE_NSTREAMS];
    uint32_t left, done;
    uint64_t t;               /* in time units, wrapping */
    uint32_t last_id, thread; /* thread: index + 1, 0 none yet */
    uint32_t last_freed;      /* the last freed id (FREE's id, REALLOC's old id) */
    uint8_t category;
    uint64_t addr;
    uint64_t bits; /* bit stream: buffered bits, their count */
    unsigned nbits;
    unsigned flags; /* TRACE_F_* of the chunk */
    int run_open;   /* TRACE_F_TIME_RUNS: a run was read, run_left zero deltas remain before a nonzero one */
    uint64_t run_left;
} decoder;

typedef struct size_slot {
    uint64_t size, gen;
    uint32_t stack;
} size_slot;

typedef struct thread_stacks {
    uint32_t last[2];
    uint64_t gen;
} thread_stacks;

struct mt_trace_reader {
    char *name;
    mt_trace_file_info info;
    loader ld;
    int prefetch, want_prefetch, failed, complete, ended;
    char err[MT_TRACE_ERR_MAX];
    chunk slot[2];
    chunk *cur;
    /* prefetch: the loader thread fills slot[(head + ready) % 2] */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned head, ready;
    int stop, worker_done;
    decoder dec;
    uint64_t gen, consumed, chunks_read;
    thread_stacks *ts;
    size_t ts_cap;
    size_slot size_cache[TRACE_SIZE_CACHE];
    trace_opmodel ops;
    trace_defs defs;
    mt_trace_chunk_info *index;
    size_t nindex;
};

/* trace_read.c: the next chunk (releasing the previous one); the
 * prefetch thread's start and stop. */
chunk *trace_next_chunk(mt_trace_reader *r);
void trace_prefetch_start(mt_trace_reader *r);
void trace_prefetch_stop(mt_trace_reader *r);
void trace_load_at(mt_trace_reader *r, uint64_t offset, uint64_t ordinal, chunk *c);
/* trace_read_events.c: a chunk's body to events. */
int trace_reader_fail(mt_trace_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
