/* trace_write_int.h — the writer's internals shared by its files:
 * trace_write.c (events, chunks, the file) and trace_write_defs.c (its
 * mmap'd buffers and maps, the definitions). Agent-safe. */
#ifndef MT_TRACE_WRITE_INT_H
#define MT_TRACE_WRITE_INT_H

#include "trace/trace_util.h"
#include "trace/trace_write.h"

#include <zstd.h>

#define UNKNOWN_CACHE 256 /* frames the host's modules did not cover */

/* An mmap'd buffer that grows with mremap. */
typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
} wbuf;

/* An open-addressing map of nonzero-valued uint32 keys to uint32 values,
 * mmap'd; value 0 means empty. */
typedef struct u32map {
    uint32_t *slots; /* key, value pairs */
    uint32_t mask, used;
} u32map;

/* Per thread of the file: its last stacks (alloc, realloc) in the chunk
 * of generation `chunk`. */
typedef struct thread_state {
    uint32_t last_stack[2];
    uint64_t chunk;
} thread_state;

typedef struct size_slot {
    uint64_t size, chunk;
    uint32_t stack;
} size_slot;

typedef struct module_range {
    uint64_t start, end;
} module_range;

struct mt_trace_writer {
    mt_trace_host host;
    int level;
    int auto_level; /* level not configured: REPETITIVE_LEVEL after a chunk that compressed 8:1 */
    int repetitive;
    size_t last_stored, last_raw; /* the last chunk written */
    uint32_t chunk_events, time_unit;
    uint64_t chunk_age_ns, start_ns, start_realtime_ns;
    uint32_t pid;
    int failed; /* a write failed: nothing more goes to this file */
    int begun;

    /* The open chunk. */
    unsigned char *stream[TRACE_NSTREAMS];
    unsigned char *cur[TRACE_NSTREAMS];
    size_t stream_cap[TRACE_NSTREAMS];
    uint32_t nevents;
    int64_t first_t, prev_t, min_t, max_t; /* in time units */
    uint32_t base_id, last_id, last_freed;
    uint32_t cur_thread; /* index + 1 of the last event's thread, 0: none yet in the chunk */
    uint64_t bacc;       /* bits not yet stored in TRACE_S_BITS */
    unsigned bn;
    uint8_t cur_category;
    uint64_t prev_addr;
    uint64_t chunk_gen;
    uint64_t chunk_open_ns; /* monotonic time of the chunk's first event */
    unsigned flags;         /* TRACE_F_* of the open chunk */
    unsigned force_flags;   /* config.chunk_flags */
    uint32_t zrun;          /* TRACE_F_TIME_RUNS: zero time deltas since the last nonzero one */
    uint32_t zeros;         /* events of the chunk with a zero time delta */
    uint64_t sumk;          /* low bits of the chunk's symbols (its bits stream packed, in bits) */
    size_t bits_out;        /* the last chunk's bits stream, compressed */
    uint64_t bits_packed;   /* the last chunk's sumk / 8 */
    unsigned packed_run;    /* chunks in a row without TRACE_F_ALIGNED */
    int first_chunk;        /* no chunk written yet: the coding is a guess */

    /* The file. */
    uint64_t offset, seq;
    u32map threads; /* tid + 1 -> index + 1 */
    u32map stacks;  /* id + 1 -> 1 when defined */
    uint32_t nthreads;
    wbuf thread_states; /* thread_state[nthreads] */
    uint64_t cat_defined[4];
    wbuf modules; /* module_range[], sorted by start */
    uint64_t unknown[UNKNOWN_CACHE];
    uint32_t modules_backoff, modules_skip;
    wbuf defs; /* pending DEFS records */
    uint32_t ndefs;
    wbuf meta; /* every meta record so far (each file repeats them) */
    uint32_t nmeta;
    size_t meta_written; /* bytes of meta already in this file's DEFS */
    uint32_t nmeta_written;
    wbuf index; /* index records */
    uint32_t nindex;
    int index_lost; /* a chunk could not be indexed (no memory): no index in this file */

    /* Output. */
    wbuf body, out;
    unsigned char prefix[32 + 10 * TRACE_NSTREAMS];
    ZSTD_CCtx *cctx;
    void *zwork;
    size_t zwork_size;
    uint64_t frames[TRACE_MAX_FRAMES];
    size_slot size_cache[TRACE_SIZE_CACHE];
    trace_opmodel ops;

    mt_trace_write_stats stats;
};

static inline uint32_t *trace_map_find(const u32map *m, uint32_t key)
{
    for (uint32_t i = trace_hash32(key) & m->mask;; i = (i + 1) & m->mask)
        if (!m->slots[2 * i + 1] || m->slots[2 * i] == key)
            return &m->slots[2 * i];
}

/* The value of key, 0 if absent. */
static inline uint32_t trace_map_get(const u32map *m, uint32_t key)
{
    return m->slots ? trace_map_find(m, key)[1] : 0;
}

int trace_wbuf_reserve(wbuf *b, size_t more);
void trace_wbuf_free(wbuf *b);
int trace_map_put(u32map *m, uint32_t key, uint32_t value);
void trace_map_clear(u32map *m);
void trace_map_free(u32map *m);

/* Definitions into w->defs: 0 or -ENOMEM. */
int trace_w_define_category(mt_trace_writer *w, unsigned c);
int trace_w_define_stack(mt_trace_writer *w, uint32_t id);
/* A new thread: its index in the file, or -ENOMEM. */
int64_t trace_w_thread_new(mt_trace_writer *w, uint32_t tid);
unsigned char *trace_w_put_bytes(unsigned char *p, const void *s, size_t n);
size_t trace_w_strlen(const char *s);

#endif
