/* trace_write_int.h — the writer's internals shared by its files:
 * trace_write.c (events in, chunks out, the file), trace_write_defs.c (its
 * mmap'd buffers and maps, the definitions), trace_write_enc.c (the column
 * coder of one events chunk) and trace_write_pool.c (the encoder threads,
 * cfg.threads > 1). Agent-safe. */
#ifndef MT_TRACE_WRITE_INT_H
#define MT_TRACE_WRITE_INT_H

#include "trace/trace_util.h"
#include "trace/trace_write.h"

#include <errno.h>
#include <sys/types.h>
#include <time.h>
#include <zstd.h>

#define UNKNOWN_CACHE 256           /* frames the host's modules did not cover */
#define DEFS_FLUSH_BYTES (8u << 20) /* a DEFS chunk goes out early past this */
/* Threads a file can have (an index fits in an encoder thread's record;
 * Linux's pid_max is at most 2^22). */
#define TRACE_W_MAX_THREADS (1u << 24)

/* An mmap'd buffer that grows with mremap. */
typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
} wbuf;

/* An open-addressing map of nonzero-valued uint32 keys to uint32 values,
 * mmap'd; value 0 means empty. */
#define TW_TCACHE 16u
#define TW_SCACHE 1024u

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

/* One event as the encoder takes it: the thread already an index of the
 * file, the time already in the file's unit. */
typedef struct trace_rec {
    unsigned type, category;
    uint32_t tidx, id, old_id, stack;
    int64_t t;
    uint64_t size, address;
} trace_rec;

/* What one events chunk's coding left for picking the next ones' (the
 * TRACE_F_* flags, the zstd level). */
typedef struct trace_chunk_stats {
    uint32_t nevents, zeros;
    unsigned flags;
    size_t bits_out;      /* its bits stream, compressed */
    uint64_t bits_packed; /* its low bits, packed, in bytes */
    size_t stored, raw;   /* its payload and body sizes */
} trace_chunk_stats;

/* A compressed chunk, but for its header (the sequence number is given
 * when it is written). */
typedef struct trace_chunk_out {
    unsigned kind, codec;
    uint32_t count, crc;
    size_t stored, raw;
    int64_t t0, t1;
} trace_chunk_out;

/* The column coder of one events chunk (trace_write_enc.c): the streams,
 * the per-chunk models, a zstd context. The writer has one; with
 * cfg.threads > 1 each encoder thread has its own. Its state is either
 * reset per chunk or tagged with the chunk's generation, so a chunk's
 * bytes do not depend on which coder made it. */
typedef struct trace_enc {
    unsigned char *stream[TRACE_NSTREAMS];
    unsigned char *cur[TRACE_NSTREAMS];
    size_t stream_cap[TRACE_NSTREAMS];
    size_t stream_touched[TRACE_NSTREAMS]; /* bytes of each stream that may be resident */
    uint32_t nevents;
    int64_t first_t, prev_t, min_t, max_t; /* in time units */
    uint32_t base_id, last_id, last_freed;
    uint32_t cur_thread; /* index + 1 of the last event's thread, 0: none yet in the chunk */
    uint64_t bacc;       /* bits not yet stored in TRACE_S_BITS */
    unsigned bn;
    uint8_t cur_category;
    uint64_t prev_addr;
    uint64_t chunk_gen;
    unsigned flags;       /* TRACE_F_* of the open chunk */
    uint32_t zrun;        /* TRACE_F_TIME_RUNS: zero time deltas since the last nonzero one */
    uint32_t zeros;       /* events of the chunk with a zero time delta */
    uint64_t sumk;        /* low bits of the chunk's symbols (its bits stream packed, in bits) */
    size_t bits_out;      /* the last chunk's bits stream, compressed */
    uint64_t bits_packed; /* the last chunk's sumk / 8 */
    size_t last_stored, last_raw;
    wbuf thread_states; /* thread_state[nthreads_cap] */
    uint32_t nthreads_cap;
    unsigned char prefix[32 + 10 * TRACE_NSTREAMS];
    ZSTD_CCtx *cctx;
    void *zwork;
    size_t zwork_size;
    size_slot size_cache[TRACE_SIZE_CACHE];
    trace_opmodel ops;
} trace_enc;

typedef struct trace_pool trace_pool;

struct mt_trace_writer {
    mt_trace_host host;
    int level;
    int auto_level; /* level not configured: REPETITIVE_LEVEL after a chunk that compressed 8:1 */
    int repetitive;
    uint32_t chunk_events, time_unit;
    /* Division by time_unit as a multiply (trace_util.h: trace_div). */
    uint64_t unit_magic;
    unsigned unit_shift;
    uint64_t chunk_age_ns, start_ns, start_realtime_ns;
    uint32_t pid;
    int failed; /* a write failed: nothing more goes to this file */
    int begun;
    unsigned force_flags;   /* config.chunk_flags */
    unsigned packed_run;    /* chunks in a row without TRACE_F_ALIGNED */
    int first_chunk;        /* no chunk written yet: the coding is a guess */
    uint64_t chunk_open_ns; /* monotonic time of the open chunk's first event */
    uint64_t chunk_gen;     /* the open chunk's generation (tags the coders' per-chunk state) */
    uint32_t last_id;       /* the last allocation's id (with the pool; else the coder's) */

    /* Encoding on the calling thread (threads <= 1, or before and
     * without the pool). */
    trace_enc *enc;
    /* cfg.threads > 1: the encoder threads (trace_write_pool.c). */
    unsigned threads;
    trace_pool *pool;
    pid_t creator; /* the process that made the writer (and its threads) */

    /* The file. */
    uint64_t offset, seq;
    u32map threads_map; /* tid + 1 -> index + 1 */
    u32map stacks;      /* id + 1 -> 1 when defined */
    /* In front of the maps, for the events of a few threads and stacks
     * in a row (each lookup there is a hash and a probe): the last tid +
     * 1 (0 empty) seen in each of TW_TCACHE slots with its index, and a
     * defined stack's id + 1 in each of TW_SCACHE slots. Emptied with the
     * maps. */
    uint32_t tcache_tid[TW_TCACHE], tcache_idx[TW_TCACHE];
    uint32_t scache[TW_SCACHE];
    uint32_t nthreads;
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
    uint64_t frames[TRACE_MAX_FRAMES];

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

/* ---- an event's way into the writer (trace_write.c, trace_write_pool.c) ---- */

static inline uint64_t trace_w_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC ns as the file's time: since its start, in time units
 * (rounded down, also before the start). */
static inline int64_t trace_w_time(const mt_trace_writer *w, uint64_t ns)
{
    int64_t t = (int64_t)(ns - w->start_ns);
    if (w->time_unit != 1)
        t = t >= 0
                ? (int64_t)trace_div((uint64_t)t, w->time_unit, w->unit_magic, w->unit_shift)
                : -(int64_t)trace_div((uint64_t) - (t + 1), w->time_unit, w->unit_magic, w->unit_shift) - 1;
    return t;
}

/* The file's index of thread tid, defining it if new; negative on error. */
static inline int64_t trace_w_thread_index(mt_trace_writer *w, uint32_t tid)
{
    uint32_t at = tid % TW_TCACHE;
    if (w->tcache_tid[at] == tid + 1 && tid != UINT32_MAX) /* 0: an empty slot */
        return w->tcache_idx[at];
    uint32_t known = trace_map_get(&w->threads_map, tid + 1);
    int64_t ti = known ? (int64_t)known - 1 : trace_w_thread_new(w, tid);
    if (ti >= 0) {
        w->tcache_tid[at] = tid + 1;
        w->tcache_idx[at] = (uint32_t)ti;
    }
    return ti;
}

/* Stack id defined in the file (now, if it was not); negative on error. */
static inline int trace_w_stack(mt_trace_writer *w, uint32_t id)
{
    uint32_t at = id % TW_SCACHE;
    if (w->scache[at] == id + 1 && id != UINT32_MAX) /* 0: an empty slot */
        return 0;
    if (!trace_map_get(&w->stacks, id + 1) && trace_w_define_stack(w, id) < 0)
        return -1;
    w->scache[at] = id + 1;
    return 0;
}

/* What an event needs defined before it (its thread, category and
 * stack), defined now if new: the thread's index, or negative when out of
 * memory (the event is then dropped: what it defined stays). */
static inline int64_t trace_w_event_defs(mt_trace_writer *w, const mt_trace_event *ev)
{
    int64_t ti = trace_w_thread_index(w, ev->thread);
    int alloc = ev->type == MT_TRACE_ALLOC || ev->type == MT_TRACE_REALLOC;
    if (ti < 0 ||
        !(w->cat_defined[ev->category >> 6] >> (ev->category & 63) & 1 ||
          trace_w_define_category(w, ev->category) == 0) ||
        (alloc && ev->stack && trace_w_stack(w, ev->stack) < 0))
        return -1;
    return ti;
}

/* An event's first steps into the writer, whichever way it is coded: its
 * type checked, counted, its time (*t), and what it needs defined, with
 * `open` the events of the open chunk (none: the chunk's age starts now).
 * Returns its thread's index, or the error (the event dropped, and
 * counted unless its type was bad). */
static inline int64_t trace_w_event_start(mt_trace_writer *w, const mt_trace_event *ev, uint32_t open,
                                          int64_t *t)
{
    if (ev->type < MT_TRACE_ALLOC || ev->type > MT_TRACE_MUNMAP)
        return -EINVAL;
    w->stats.events++;
    if (w->failed) {
        w->stats.events_lost_to_errors++;
        return w->failed;
    }
    *t = trace_w_time(w, ev->time_ns);
    if (!open)
        w->chunk_open_ns = trace_w_now_ns();
    /* What can fail (defining the thread, category, stack) comes first,
     * so a failed event leaves the streams as they were. */
    int64_t ti = trace_w_event_defs(w, ev);
    if (ti < 0) {
        w->stats.events_lost_to_errors++; /* out of memory: the event is dropped, and counted */
        return -ENOMEM;
    }
    return ti;
}
unsigned char *trace_w_put_bytes(unsigned char *p, const void *s, size_t n);
size_t trace_w_strlen(const char *s);
void *trace_w_map(size_t n);

/* The column coder (trace_write_enc.c). */
trace_enc *trace_enc_create(uint32_t chunk_events, int max_level);
void trace_enc_destroy(trace_enc *e);
/* Opens a chunk of generation gen with these flags, ids counted from base_id. */
void trace_enc_open(trace_enc *e, uint64_t gen, unsigned flags, uint32_t base_id);
/* Room for the per-thread state of threads [0, n): 0 or -ENOMEM. */
int trace_enc_threads(trace_enc *e, uint32_t n);
void trace_enc_event(trace_enc *e, const trace_rec *r);
/* Compresses body[0..n) (one DEFS/END/INDEX chunk) into out at `at`
 * (after room for its header): 0 or -ENOMEM. */
int trace_enc_pack(trace_enc *e, int level, wbuf *out, size_t at, unsigned kind, const void *body, size_t n,
                   uint32_t count, trace_chunk_out *co);
/* Lays out and compresses the open events chunk into out at `at`, fills
 * *co and e's last-chunk statistics: 0 or -ENOMEM. */
int trace_enc_close(trace_enc *e, int level, int repetitive, wbuf *out, size_t at, trace_chunk_out *co);
/* The last chunk's statistics, for trace_pick_flags. */
void trace_enc_stats(const trace_enc *e, trace_chunk_stats *s);
/* Gives back stream pages far beyond what the last chunk used. */
void trace_enc_trim(trace_enc *e);
unsigned trace_pick_flags(const mt_trace_writer *w, const trace_chunk_stats *last);
int trace_repetitive(const mt_trace_writer *w, size_t stored, size_t raw);

/* Writes a compressed chunk (out: its header's room, then the payload),
 * numbering and indexing it: 0 or a negative errno. */
int trace_w_emit(mt_trace_writer *w, unsigned char *out, const trace_chunk_out *co);
/* The pending definitions and meta, moved into d (whose old buffer becomes
 * the writer's next), their count in *count: 0 or -ENOMEM. */
int trace_w_take_defs(mt_trace_writer *w, wbuf *d, uint32_t *count);

/* The encoder threads (trace_write_pool.c). */
int trace_pool_create(mt_trace_writer *w);
void trace_pool_destroy(mt_trace_writer *w);
/* Events to the encoder threads' open batch, from the first on, while
 * the writer has its threads (a batch handed off may find they could not
 * start: the writer then codes inline). Returns how many it took (at
 * least one); *rc gets the first error. */
size_t trace_pool_events(mt_trace_writer *w, const mt_trace_event *ev, size_t n, int *rc);
int trace_w_flush_events(mt_trace_writer *w);
/* Hands over the open batch (if it has events) and, if wait, writes every
 * chunk in flight; else the finished ones. 0 or a negative errno. */
int trace_pool_flush(mt_trace_writer *w, int force, int wait);
/* Forgets every batch (a new file begins). */
void trace_pool_reset(mt_trace_writer *w);
/* Events of the open batch. */
uint32_t trace_pool_open_events(const mt_trace_writer *w);

#endif
