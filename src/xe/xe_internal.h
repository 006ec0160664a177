/* xe_internal.h — a session's layout and the buffer protocol, shared by
 * xe_session.c (life cycle, views), xe_fire.c (producers) and
 * xe_dispatch.c (the dispatcher thread). Not part of the interface.
 *
 * The buffer protocol. A buffer is k x 64 KiB of memory: a 192-byte header,
 * regular_buffer_size bytes of records, and 13 spare bytes at the end (the
 * seed's 205 bytes of overhead). `reserved` holds the next free offset and,
 * in its top bits, SEALED. A producer claims room with one fetch_add on
 * `reserved`, writes its record and publishes it by storing the record's
 * length last (release). A claim that does not fit and starts at or before
 * the end (the "straddler": exactly one per buffer) writes an end marker
 * and seals. The dispatcher seals by time. Whoever's fetch_add sets SEALED
 * first is the buffer's sealer: it alone moves the partition's `cur` off the
 * buffer and hands the buffer on. Claims that see SEALED write nothing. The
 * reader of a sealed buffer walks records from 0 up to min(claimed, size),
 * waiting for each length to appear, and stops at an end marker.
 *
 * A free buffer stays sealed until it is current: it is marked OPENING,
 * made current with a CAS on the partition's tagged `cur`, and only then
 * opened (reserved = 0). So no claim can land in a buffer that is not
 * current, and producers waiting on an OPENING buffer never detach it. */
#ifndef MT_XE_INTERNAL_H
#define MT_XE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "xe/xe.h"

#define XE_SEALED (1ull << 62)
#define XE_OPENING (1ull << 63) /* sealed, being made current: not to be detached */
#define XE_SEAL_MASK (3ull << 62)
#define XE_OFF_MASK ((1ull << 40) - 1)
#define XE_DATA_OFF 192u /* header; the other 13 bytes of overhead end the buffer */
#define XE_END_MARK 1u   /* a record length that ends a sealed buffer */

/* A short record's fields (XE_RECORD_SHORT bytes), all but len (published
 * last). */
static inline void xe_rec_set_short(xe_rec *r, unsigned type, unsigned category, uint32_t tid, uint32_t cpu,
                                    uint64_t tsc, uint64_t size, uint64_t site, uint64_t key, uint64_t value)
{
    r->type = (uint16_t)type;
    r->category = (uint16_t)category;
    r->tid = tid;
    r->cpu = cpu;
    r->tsc = tsc;
    r->size = size;
    r->site = site;
    r->key = key;
    r->value = value;
}

/* The rest of a full record's fixed part. */
static inline void xe_rec_set_rest(xe_rec *r, uint64_t address, uint64_t old_address, uint32_t data_len)
{
    r->address = address;
    r->old_address = old_address;
    r->data_len = data_len;
    r->pad = 0;
}

/* A record's fields, all but len (published last) and the data. */
static inline void xe_rec_set(xe_rec *r, unsigned type, unsigned category, uint32_t tid, uint32_t cpu,
                              uint64_t tsc, uint64_t size, uint64_t address, uint64_t old_address,
                              uint64_t site, uint64_t key, uint64_t value, uint32_t data_len)
{
    xe_rec_set_short(r, type, category, tid, cpu, tsc, size, site, key, value);
    xe_rec_set_rest(r, address, old_address, data_len);
}

/* A record's fields from an event: what xe_fire writes (and the
 * benchmark's baselines, so they do the same work); xe_fire_fields
 * writes its arguments field by field (a short record stops at value). */
static inline void xe_rec_fill(xe_rec *r, const xe_event *ev, uint32_t tid, uint32_t cpu, uint64_t tsc)
{
    xe_rec_set(r, ev->type, ev->category, tid, cpu, tsc, ev->size, ev->address, ev->old_address, ev->site,
               ev->key, ev->value, ev->data_len);
}

/* Seals a time-ordered session tracks past the oldest unwalked one (more
 * than it has buffers). */
#define XE_WALKED_WINDOW 8192u

/* Buffers an ordered session can hold back (its regular and large ones). */
#define XE_HELD_MAX 8

typedef struct xe_bufhdr {
    _Atomic uint64_t reserved;  /* claimed offset | SEALED */
    _Atomic uint64_t first_tsc; /* when its first event was claimed; 0 = empty */
    uint64_t end;               /* set by the sealer: min(claimed, size) */
    _Atomic uint32_t next;      /* link in a pool or the dispatch queue (index + 1) */
    uint32_t index;
    uint32_t large;
    uint32_t part;            /* partition it was current in */
    uint32_t fork_gen;        /* the session's fork generation when it was opened */
    uint64_t seq;             /* ordered sessions: 1, 2, ... in the order buffers opened; 0 large */
    _Atomic uint64_t sealseq; /* time-ordered sessions: 1, 2, ... in the order buffers sealed; 0 not yet */
    uint64_t resident;        /* time-ordered sessions: data bytes that may still be resident once zeroed */
} xe_bufhdr;
_Static_assert(sizeof(xe_bufhdr) <= XE_DATA_OFF, "buffer header fits its overhead");

/* A partition's current buffer: its index (-1 none) in the low half and,
 * in the high half, a tag bumped by every change, so a thread that saw
 * buffer X current cannot mistake X recycled and current again for it. */
typedef struct xe_part {
    _Alignas(64) _Atomic uint64_t cur;
} xe_part;

static inline int32_t xe_cur_idx(uint64_t v)
{
    return (int32_t)(uint32_t)v;
}
/* Move cur from exactly `seen` to idx; 1 on success. */
static inline int xe_cur_cas(xe_part *p, uint64_t seen, int32_t idx)
{
    uint64_t nv = ((seen >> 32) + 1) << 32 | (uint32_t)idx;
    return atomic_compare_exchange_strong(&p->cur, &seen, nv);
}
static inline uint64_t xe_cur_next(uint64_t seen, int32_t idx)
{
    return ((seen >> 32) + 1) << 32 | (uint32_t)idx;
}

/* A lock-free stack of buffer indexes (index + 1 in the low half, a tag
 * against ABA in the high half). Pools and the dispatch queue. */
typedef struct xe_stack {
    _Alignas(64) _Atomic uint64_t head;
} xe_stack;

struct xe_session {
    xe_config cfg;
    xe_plan_out plan;
    size_t map_bytes; /* this struct's mapping, with parts and cpu map */
    _Atomic int state;
    _Atomic int life; /* start/stop/flush/drop take turns */
    int64_t create_time_ns;

    uint32_t nbuf, nlarge, nparts;
    uint64_t cap, large_cap; /* usable bytes */
    char *regular_base, *large_base;
    size_t regular_stride, large_stride;
    xe_part *parts;
    uint32_t *cpu_part; /* cpu -> partition */
    uint32_t ncpu_map;

    xe_stack free_pool, large_pool, queue;

    /* Producers waiting for a free buffer (NO_EVENT_LOSS). */
    _Alignas(64) _Atomic uint32_t free_seq;
    _Atomic uint32_t free_waiters;
    _Atomic uint32_t large_waiters; /* of them, waiting for a large buffer */
    /* Producers between leaving the fast path and finishing their slow path. */
    _Atomic uint32_t inflight;

    /* The dispatcher. */
    _Alignas(64) _Atomic uint32_t wake_seq;
    _Atomic int disp_idle;
    _Atomic int disp_stop;
    _Atomic uint32_t flush_req, flush_done;
    _Atomic uint32_t batch; /* chain taken from the queue, not yet processed (index + 1) */
    /* Ordered sessions (xe_ordered): buffers taken from the queue ahead of
     * an earlier one wait here; the dispatcher delivers by seq. */
    int ordered;
    _Atomic uint64_t open_seq; /* seqs handed out */
    uint64_t next_seq;         /* the next to deliver; 0 after a fork: the oldest held */
    uint32_t nheld;
    uint32_t held[XE_HELD_MAX];
    uint32_t stopper_inflight;   /* the stopping thread's own slow-path fires (a handler's stop) */
    _Atomic int stopper_in_fire; /* the stop runs in a handler that interrupted a fire */
    int fork_in_fire;            /* the last fork ran in a handler that interrupted a fire */
    _Atomic uint32_t fork_gen;   /* forks this session went through */
    uint32_t deliver_gen;        /* buffers opened in an earlier fork generation are not delivered */
    /* Time-ordered sessions (cfg.time_order): seals are numbered; the
     * dispatcher knows every seal below walked_low was walked (and which
     * above it, in a window of XE_WALKED_WINDOW). */
    int time_order;
    _Atomic uint64_t seal_seq;
    uint64_t walked_low;
    uint64_t walked_bits[XE_WALKED_WINDOW / 64];
    uint64_t last_sweep;      /* ticks */
    uint64_t since_mark;      /* events delivered since the last watermark */
    int follow_up;            /* the last watermark may have left events with the targets */
    _Atomic uint32_t sealing; /* seals begun and not yet numbered */
    _Atomic uint64_t unsure;  /* watermarks given without every buffer walked (a sealer stuck > 1 s) */
    pthread_t disp;
    int disp_running;
    int released; /* xe_session_release_buffers: no buffers, no restart */
    pid_t pid;
    uint64_t latency_tsc; /* max_dispatch_latency in clock units; 0 = infinite */
    int trim_wanted;      /* time-ordered: free buffers hold pages to give back (dispatcher only) */
    /* xe_trim_free's buffers out of the free pool (the one being trimmed,
     * then a chain, index + 1): a fork child puts them back. */
    _Atomic uint32_t trim_cur, trim_chain;

    /* The view's counters. */
    _Alignas(64) _Atomic uint64_t pending;
    _Atomic uint64_t dropped_events, dropped_buffers, blocked_ns, largest_dropped;
    _Atomic uint64_t delivered;
    _Atomic uint64_t abandoned_buffers; /* walks given up on a writer that never finished */

    xe_target targets[XE_MAX_TARGETS];
    int nsync, nasync;
    xe_target *sync[XE_MAX_TARGETS], *async[XE_MAX_TARGETS];
};

static inline xe_bufhdr *xe_buf(const xe_session *s, uint32_t idx)
{
    if (idx < s->nbuf)
        return (xe_bufhdr *)(s->regular_base + (size_t)idx * s->regular_stride);
    return (xe_bufhdr *)(s->large_base + (size_t)(idx - s->nbuf) * s->large_stride);
}
static inline char *xe_buf_data(xe_bufhdr *b)
{
    return (char *)b + XE_DATA_OFF;
}
static inline uint64_t xe_buf_cap(const xe_session *s, const xe_bufhdr *b)
{
    return b->large ? s->large_cap : s->cap;
}

/* Stacks (xe_fire.c). */
void xe_stack_push(xe_session *s, xe_stack *st, uint32_t idx);
int32_t xe_stack_pop(xe_session *s, xe_stack *st); /* -1 empty */
/* Take the whole stack: its chain (index + 1, 0 ends), oldest first, linked by next. */
uint32_t xe_stack_take_all(xe_session *s, xe_stack *st);
/* Is buffer idx on stack st? Only where nothing else moves the stack (a
 * fork child, alone). */
int xe_stack_has(xe_session *s, xe_stack *st, uint32_t idx);

/* Hand a sealed buffer to the dispatcher. */
void xe_enqueue(xe_session *s, uint32_t idx);
/* Make free buffer idx (popped, still sealed) the partition's current one
 * if cur still is `seen`, then open it; else it goes back to the pool.
 * Returns 1 when it was installed. */
int xe_install(xe_session *s, xe_part *p, uint64_t seen, int32_t idx);
/* Seal buffer idx if nobody has; 1 if this call sealed it (b->end set). */
int xe_seal(xe_session *s, uint32_t idx);
/* After sealing the partition's current buffer `idx`: give the partition a
 * free buffer, or none (-1). With `reuse`, idx itself is dropped (its events
 * counted lost) and becomes current again (ALLOW_MULTIPLE_EVENT_LOSS). */
void xe_replace(xe_session *s, xe_part *p, uint32_t idx, int allow_reuse);
/* Tests only: called by a sealer before it hands its buffer on (a slow
 * sealer, made to order). NULL otherwise. */
extern void (*xe_test_before_enqueue)(void);

/* Records of a sealed buffer, waiting for claims still being written
 * (bounded). Unless fn is NULL, hands it the published records in runs
 * [from, to) of about XE_WALK_RUN bytes (8 KiB, still in L1 when read
 * again), a run before the walk waits for a claim and the last at its
 * end; returns the count. */
typedef void (*xe_recs_fn)(xe_session *s, const char *from, const char *to);
uint64_t xe_walk(xe_session *s, xe_bufhdr *b, xe_recs_fn fn, int *abandoned);
/* Zero the used part of a walked buffer and return it to its pool. */
void xe_recycle(xe_session *s, uint32_t idx);
/* Time-ordered sessions keep XE_KEEP_RESIDENT of a buffer resident and
 * give the rest back when the dispatcher falls idle (no event in flight):
 * memory is committed only while events flow. Not at every recycle: under
 * load the pages would be faulted straight back, and each give-back costs
 * every CPU running the program a TLB flush. */
#define XE_KEEP_RESIDENT (256u << 10)
#define XE_TRIM_SLACK (64u << 10)
/* Has buffer b more than that resident? */
int xe_trim_wanted(const xe_bufhdr *b);
/* From the idle dispatcher: the free buffers' pages past the reserve go
 * back to the system. */
void xe_trim_free(xe_session *s);
/* In a fork child: the buffers a trim had out of the pool go back. */
void xe_trim_forked(xe_session *s);

/* Dispatcher (xe_dispatch.c). */
int xe_dispatch_start(xe_session *s);
void xe_dispatch_stop(xe_session *s);
void xe_dispatch_flush(xe_session *s);
void xe_wake_dispatcher(xe_session *s);
void xe_rec_to_event(const xe_session *s, const xe_rec *r, xe_event *ev);

/* Time-ordered sessions: buffer seal number seq was walked; every seal so
 * far counts as walked (a start after a stop, a fork child) (xe_dispatch.c). */
void xe_mark_walked(xe_session *s, uint64_t seq);
void xe_walked_reset(xe_session *s);

/* Clock (xe_dispatch.c): converting raw ticks (xe_thread.h's xe_ticks). */
uint64_t xe_ticks_to_ns(uint64_t ticks);
uint64_t xe_ns_to_ticks(uint64_t ns);
/* The ns from tick reading t0 to t1 (0 if t1 is earlier), with one
 * reading of the rate: two conversions subtracted could straddle a
 * refinement of it, and their difference then wrap. */
uint64_t xe_ticks_delta_ns(uint64_t t0, uint64_t t1);
void xe_clock_init(void);

/* Futex helpers (xe_dispatch.c). */
void xe_futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t timeout_ns);
void xe_futex_wake(_Atomic uint32_t *addr);
void xe_futex_wake_one(_Atomic uint32_t *addr);
/* Waiting for another thread, the n-th time (from 0): a yield, later a
 * short sleep (xe_fire.c). */
void xe_backoff(unsigned n);
/* Buffers came back to a free pool (or the session stops): producers
 * waiting for one are told; one is woken unless `all` or one waits for a
 * large buffer (xe_fire.c). */
void xe_tell_waiters(xe_session *s, int all);

/* This thread's slow-path fires in progress on s (xe_fire.c). */
uint32_t xe_fire_inflight_here(const xe_session *s);
int xe_fire_depth_here(void); /* fires in progress on this thread */
/* Outside a fire, a thread holding a buffer no stack lists counts as in
 * one meanwhile (+1, then -1): a fork from a signal handler on it then
 * leaves that buffer to it. */
void xe_fire_depth_add(int d);
void xe_fire_forget_tid(void);
/* In a fork child; `in_fire`: the fork ran in a signal handler that
 * interrupted a fire on the forking thread (whose frame still exists). */
void xe_dispatch_after_fork(xe_session *s, int in_fire);

#endif /* MT_XE_INTERNAL_H */
