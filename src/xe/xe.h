/* xe.h — memtrail's event sessions, modelled on SQL Server Extended Events
 * (seed 000): the module's whole interface.
 *
 * A session owns buffers sized by xe_plan (xe_plan.h), partitioned NONE,
 * PER_NODE or PER_CPU. Producers (xe_fire) write events into their
 * partition's current buffer with one atomic add and no lock; a full
 * buffer is sealed and handed to the session's dispatcher thread, which
 * delivers its events to the asynchronous targets (ring_buffer, histogram,
 * pair_matching, event_file) and recycles it. Synchronous targets
 * (event_counter) see each event as it is fired. When no buffer is free the
 * retention mode decides: drop the event, drop a full buffer, or wait.
 *
 * Nothing here allocates through malloc: sessions, buffers and target state
 * are mmap'd (so the agent can run sessions from inside its malloc hooks),
 * and every view is rendered with mt_out (async-signal-safe: the agent's
 * control socket answers `memtrail sessions PID` from a signal handler). */
#ifndef MT_XE_H
#define MT_XE_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/json_out.h"
#include "common/out.h"
#include "xe/xe_plan.h"

/* ---- events --------------------------------------------------------------- */

/* Event types (memtrail.h's MT_EVENT_* have the same values). */
enum xe_event_type {
    XE_EV_USER = 0,
    XE_EV_ALLOC = 1,   /* address, size, site, category */
    XE_EV_FREE = 2,    /* address (size when known) */
    XE_EV_REALLOC = 3, /* old_address -> address, size */
    XE_EV_MMAP = 4,
    XE_EV_MUNMAP = 5,
    XE_EV_SPAN_BEGIN = 6, /* key: the span's id */
    XE_EV_SPAN_END = 7,
    XE_EV_SNAPSHOT = 8,
    XE_EV_PAGE_REF = 9,
    XE_EV_NTYPES
};

/* One event as producers give it and targets receive it. Producers leave
 * time_ns, tid and cpu to the engine. */
typedef struct xe_event {
    uint16_t type;
    uint16_t category;
    uint32_t tid;
    uint32_t cpu;
    uint32_t data_len; /* bytes at data (copied into the buffer) */
    uint64_t time_ns;  /* CLOCK_MONOTONIC */
    uint64_t tsc;      /* the engine's clock (xe_clock_conv_ns converts it): asynchronous targets of
                          time-ordered sessions get it, to order events across partitions
                          (others: 0) */
    uint64_t size;
    uint64_t address;
    uint64_t old_address;
    uint64_t site;
    uint64_t key;
    uint64_t value;
    const void *data;
} xe_event;

/* Bytes an event takes in a buffer (fixed part + data, 8-aligned): the
 * event's size as MAX_EVENT_SIZE and largest_event_dropped_size count it. */
#define XE_RECORD_FIXED 80u
static inline uint64_t xe_event_bytes(uint32_t data_len)
{
    return (XE_RECORD_FIXED + (uint64_t)data_len + 7u) & ~(uint64_t)7u;
}

/* A short record: an allocation event (alloc, free, realloc) of a session
 * whose config says short_allocs, written without its addresses and data
 * (the fields up to value): 30% less for its producer to write and its
 * dispatcher to read. */
#define XE_RECORD_SHORT 56u

/* A record in a buffer (XE_RECORD_FIXED bytes, then data; or
 * XE_RECORD_SHORT bytes, len says which): the event as its producer wrote
 * it, tsc in the engine's clock (xe_clock_conv_ns). An asynchronous target may
 * take records as they are (deliver_recs); a short record's fields past
 * value are not there (xe_rec_address). */
typedef struct xe_rec {
    _Atomic uint32_t len; /* written last: 0 = not yet (the engine's own values end a buffer) */
    uint16_t type;
    uint16_t category;
    uint32_t tid;
    uint32_t cpu;
    uint64_t tsc; /* the engine's clock, converted at dispatch */
    uint64_t size, site, key, value;
    uint64_t address, old_address; /* not in a short record */
    uint32_t data_len;             /* not in a short record: 0 */
    uint32_t pad;
} xe_rec;
_Static_assert(sizeof(xe_rec) == XE_RECORD_FIXED, "record layout");
_Static_assert(__builtin_offsetof(xe_rec, address) == XE_RECORD_SHORT, "a short record ends before address");

/* A published record's length (its walker made it visible already). */
static inline uint32_t xe_rec_len(const xe_rec *r)
{
    return atomic_load_explicit(&((xe_rec *)r)->len, memory_order_relaxed);
}

/* Whether a (published) record is a short one. */
static inline int xe_rec_is_short(const xe_rec *r)
{
    return xe_rec_len(r) < XE_RECORD_FIXED;
}

/* A record's address (0 in a short record, which has none). */
static inline uint64_t xe_rec_address(const xe_rec *r)
{
    return xe_rec_is_short(r) ? 0 : r->address;
}

/* Fields, for predicates and histogram buckets. */
enum xe_field {
    XE_F_TYPE,
    XE_F_CATEGORY,
    XE_F_SIZE,
    XE_F_ADDRESS,
    XE_F_OLD_ADDRESS,
    XE_F_SITE,
    XE_F_KEY,
    XE_F_VALUE,
    XE_F_TID,
    XE_F_CPU,
    XE_F_DATA_LEN,
    XE_F_SIZE_CLASS, /* derived: 0 for size 0, else floor(log2(size)) + 1 */
    XE_F_NFIELDS
};
uint64_t xe_event_field(const xe_event *ev, enum xe_field f);
/* "type", "category", "size", ... "size_class"; -1 for an unknown name. */
int xe_field_by_name(const char *name, size_t len);
const char *xe_field_name(enum xe_field f);
/* "user", "alloc", "free", ...; -1 for an unknown name. */
int xe_type_by_name(const char *name, size_t len);
const char *xe_type_name(unsigned type);

/* What the host (the agent, or a test) knows about category names. */
typedef struct xe_host {
    /* Category id for a name (the agent creates it on first use), or < 0. */
    int (*category_id)(const char *name, size_t len);
    /* Name of a category id, or NULL. */
    const char *(*category_name)(unsigned id);
} xe_host;
void xe_set_host(const xe_host *host);
const char *xe_category_name(unsigned id); /* via the host; NULL if unknown */

/* ---- predicates (xe_pred.c) ------------------------------------------------
 * `size >= 4096 && (category == "parser" || type == free)`: comparisons
 * (== != < <= > >=) of a field with a number (sizes may carry KB/MB/GB), a
 * category name in quotes or an event type name, joined by && || ! and
 * parentheses. Compiled into a fixed-size program; no allocation. */
#define XE_PRED_MAX 64
typedef struct xe_pred_op {
    uint8_t op;
    uint8_t field;
    uint64_t value;
} xe_pred_op;
typedef struct xe_pred {
    uint16_t n; /* 0: no predicate, everything passes */
    xe_pred_op ops[XE_PRED_MAX];
    char text[256]; /* as written, for the view */
} xe_pred;
int xe_pred_compile(const char *text, xe_pred *out, char *why, size_t whylen);
int xe_pred_eval(const xe_pred *p, const xe_event *ev); /* 1 passes, 0 not */

/* ---- memory --------------------------------------------------------------- */

/* Anonymous mappings named "memtrail-xe" (PR_SET_VMA_ANON_NAME, where the
 * kernel has it), zeroed. xe_map returns NULL on failure. A session's event
 * buffers are mapped apart, named "memtrail-xe-buffers", and populated. */
void *xe_map(size_t bytes);
void xe_unmap(void *p, size_t bytes);

/* ---- targets (xe_target_*.c) ----------------------------------------------- */

typedef struct xe_target xe_target;
typedef struct xe_target_ops {
    const char *name; /* "ring_buffer", "histogram", ... */
    int synchronous;  /* deliver() runs on the firing thread, lock-free */
    /* Parse the parameters ("max_events_limit=100,..." without the
     * parentheses, may be empty) and map the target's state. 0 or -EINVAL
     * (reason in why) / -ENOMEM. */
    int (*init)(xe_target *t, const char *params, char *why, size_t whylen);
    /* One event. Asynchronous targets: called by the dispatcher thread only. */
    void (*deliver)(xe_target *t, const xe_event *ev);
    /* After each dispatched buffer and at stop (may be NULL). */
    void (*flush)(xe_target *t);
    /* Unmap everything (may be NULL). */
    void (*close)(xe_target *t);
    /* The target's data as JSON members of the object that
     * xe_target_json has opened with the target's name. Must be
     * async-signal-safe and safe against a concurrent deliver(): it may
     * run in a signal handler on any thread but the dispatcher. */
    void (*view_json)(xe_target *t, mt_json *j);
    /* When the session stops, after the last flush (may be NULL). */
    void (*stop)(xe_target *t);
    /* Time-ordered sessions (xe_config.time_order): every event fired
     * before engine time `tsc` has been delivered; the ones delivered from
     * now on are later (may be NULL). UINT64_MAX: everything fired. */
    void (*watermark)(xe_target *t, uint64_t tsc);
    /* Time-ordered sessions whose one asynchronous target this is:
     * records as they lie in the buffer, in place of deliver (may be
     * NULL): `bytes` of whole published records from `recs`, each `len`
     * long. Returns the bytes it took from the front (whole records); the
     * record after them, if any, goes to deliver as an event, and the
     * rest comes here again. */
    uint64_t (*deliver_recs)(xe_target *t, const char *recs, uint64_t bytes);
    /* In a fork child, before its dispatcher starts (may be NULL): 1 when
     * the target now writes files of the child's own, so that what was
     * buffered before the fork is left to the parent (xe_dispatch.c). */
    int (*forked)(xe_target *t);
} xe_target_ops;

struct xe_target {
    const xe_target_ops *ops;
    void *state; /* the target's own, mmap'd */
    size_t state_bytes;
    char params[512]; /* as given */
};

/* The built-in targets, by name; NULL when unknown. */
const xe_target_ops *xe_target_find(const char *name, size_t len);
extern const xe_target_ops xe_target_ring_buffer, xe_target_histogram, xe_target_event_counter,
    xe_target_pair_matching, xe_target_event_file;

/* ring_buffer read-back: copies up to max of the newest events (oldest
 * first) into out; data pointers are NULL (data is not kept). Returns how
 * many. `total` gets how many events the target ever received. */
int xe_ring_read(xe_target *t, xe_event *out, int max, uint64_t *total);

struct xe_session;

/* event_file's on-disk encoding: the raw one of docs/events.md, or the one
 * given to xe_file_set_encoder before the target is created (the agent's
 * trace mode gives the trace format's, docs/trace-format.md).
 *
 * A stateless encoder turns events into bytes (file_header, encode). A
 * stateful one (create != NULL) keeps its own state and writes through
 * the target's `write` (whole records or chunks at a time; a write that
 * fails leaves the file cut back to what was written before it). All its
 * calls come from the session's dispatcher thread, or the thread that
 * drops the session. */
typedef struct xe_file_encoder {
    const char *name;
    /* Stateless: bytes that start each file (a header); returns how many written in buf. */
    size_t (*file_header)(void *buf, size_t cap);
    /* Stateless: encode a batch of events; returns bytes written in buf
     * (<= cap), or 0 when buf is too small for even the first one. */
    size_t (*encode)(const xe_event *evs, size_t n, void *buf, size_t cap, size_t *consumed);
    /* Stateful: one state per target; NULL on failure. */
    void *(*create)(int (*write)(void *ctx, const void *buf, size_t n), void *ctx);
    int (*begin)(void *st); /* a file was opened: its header */
    void (*event)(void *st, const xe_event *ev);
    void (*flush)(void *st); /* after each dispatched buffer */
    void (*end)(void *st);   /* the file is about to close: finish it */
    void (*destroy)(void *st);
    void (*forked)(void *st); /* in a fork child: forget the parent's file and pending data */
    void (*watermark)(void *st, uint64_t tsc); /* the target's watermark (may be NULL) */
    /* Records, in place of event (may be NULL): `bytes` of whole records
     * back to back, as xe_target_ops.deliver_recs gets them; returns how
     * many. The file target calls it only for a time-ordered session, and
     * only with its file open (whose size it looks at after each run);
     * everything else still comes as events. */
    uint64_t (*records)(void *st, const char *recs, uint64_t bytes);
    /* At the session's stop, when no file was opened (no event came):
     * whether to write one all the same, begun and ended (may be NULL). */
    int (*wanted)(void *st);
} xe_file_encoder;
void xe_file_set_encoder(const xe_file_encoder *enc);
/* The agent's guard over its long-lived descriptors (src/agent/fdguard.h):
 * each event_file target's descriptor variable is passed to keep each time
 * a file is opened into it, and to forget before the target goes; the
 * target sets it to -1 before it closes the descriptor. Without a guard,
 * nothing is called. */
void xe_file_set_fd_guard(void (*keep)(int *where), void (*forget)(int *where));
/* In a fork child, before the engine's fork handling (xe_atfork_child):
 * the session's event_file target lets go of the parent's file (written
 * no more) and opens `filename` at its next event, and the session
 * delivers only events fired in the child (what was buffered at the fork
 * is the parent's). 0, or -ENOENT without such a target. */
int xe_session_file_retarget(struct xe_session *s, const char *filename);
/* What a session's event_file target did: files opened, events it dropped
 * (no file open, or a raw record too big), times the current file was
 * opened again by its name (its descriptor closed behind the agent's
 * hooks), and its last failure (op: 0 none, 1 open, 2 write; errno; the
 * file it was opening or writing). 0, or -ENOENT without such a target. */
typedef struct xe_file_status {
    uint64_t files_opened, events_dropped, write_errors, reopened;
    int last_op, last_errno;
    char path[600];
} xe_file_status;
int xe_session_file_status(struct xe_session *s, xe_file_status *out);

/* ---- sessions (xe_session.c, xe_fire.c, xe_dispatch.c) ---------------------- */

enum xe_retention { XE_ALLOW_SINGLE_EVENT_LOSS, XE_ALLOW_MULTIPLE_EVENT_LOSS, XE_NO_EVENT_LOSS };
enum xe_state { XE_CREATED, XE_STARTED, XE_STOPPING, XE_STOPPED };

#define XE_MAX_TARGETS 8
#define XE_MAX_SESSIONS 32
#define XE_NAME_MAX 63
#define XE_LATENCY_INFINITE UINT64_MAX

typedef struct xe_config {
    char name[XE_NAME_MAX + 1];
    uint64_t max_memory;     /* default 4 MB */
    uint64_t max_event_size; /* 0: none */
    xe_partition_mode mode;
    int strict;
    enum xe_retention retention;
    uint64_t max_dispatch_latency_ns; /* default 30 s; XE_LATENCY_INFINITE */
    uint32_t event_mask;              /* bit per event type; 0 = all */
    int start;                        /* start at once (agent sessions) */
    xe_pred pred;
    int ntargets;
    struct {
        const xe_target_ops *ops;
        char params[512];
    } targets[XE_MAX_TARGETS];
    unsigned cpus, nodes; /* 0: this machine's */
    /* Internal (trace mode; not in the options text): the session's
     * partitions are merged by time for its asynchronous targets. Each
     * event's clock is read after its buffer room is claimed; every few
     * milliseconds the dispatcher seals every partition's buffer and, once
     * each buffer sealed by then is delivered, gives the targets a
     * watermark: no event fired before it is still to come. Needs a
     * retention other than ALLOW_MULTIPLE_EVENT_LOSS. */
    int time_order;
    /* Internal (trace mode): allocation events fired by xe_fire_fields
     * come without their addresses (the trace's ids say which block), in
     * short records. */
    int short_allocs;
} xe_config;

/* The defaults: 4 MB, NONE, ALLOW_SINGLE_EVENT_LOSS, 30 s, all events. */
void xe_config_defaults(xe_config *cfg);

/* Parse "max_memory=4MB; memory_partition_mode=per_cpu; ...;
 * target=ring_buffer(max_events_limit=100); where=size >= 4096"
 * (options separated by ';', names as in CREATE EVENT SESSION, case
 * insensitive; docs/events.md). 0 or -EINVAL with the reason in why. */
int xe_config_parse(const char *text, xe_config *cfg, char *why, size_t whylen);

typedef struct xe_session xe_session;

/* Create (size, map the buffers, set up the targets) and register a
 * session. 0 or -EINVAL/-ENOMEM/-ENOSPC/-EEXIST with the reason in why. */
int xe_session_create(const xe_config *cfg, xe_session **out, char *why, size_t whylen);
int xe_session_start(xe_session *s); /* starts the dispatcher thread */
/* Stop taking events, dispatch everything buffered, flush the targets,
 * end the dispatcher. The session can be started again. */
int xe_session_stop(xe_session *s);
/* Is the calling thread the session's dispatcher (a crash handler there
 * must not stop the session: the stop would wait for itself)? */
int xe_session_on_dispatcher(const xe_session *s);
/* Dispatch what is buffered now (like a dispatch latency expiring). */
int xe_session_flush(xe_session *s);
/* A stopped session gives back its buffers' memory (all but each buffer's
 * first page, which late producers may still touch) and can never start
 * again. For a process out of memory. 0, or -EBUSY when not stopped. */
int xe_session_release_buffers(xe_session *s);
/* Stop, unregister and unmap. */
int xe_session_drop(xe_session *s);
/* Stop, unregister and close the targets (files finished), but keep the
 * session's own memory mapped for good: for a session that producers may
 * still reach (a hook that read its pointer before it was retired), where
 * a drop would pull memory from under them. `release`: give back the
 * buffers' memory too (as xe_session_release_buffers), when no producer
 * can be inside a buffer any more. */
void xe_session_retire(xe_session *s, int release);

/* Fire: 1 collected, 0 not (session not started, type not in the session,
 * predicate false), -ENOBUFS dropped (no free buffer), -EMSGSIZE dropped
 * (too big). Lock-free unless the retention mode is NO_EVENT_LOSS and every
 * buffer is full. */
int xe_fire(xe_session *s, const xe_event *ev);
/* xe_fire of an event with no data, from its fields (the others 0):
 * written straight into the record, with no event built on the way
 * (the agent's allocation hooks: a trace's every event). It leaves errno
 * as it found it (its waits and wakes are system calls). */
int xe_fire_fields(xe_session *s, unsigned type, unsigned category, uint64_t size, uint64_t address,
                   uint64_t old_address, uint64_t site, uint64_t key, uint64_t value);
/* xe_fire_fields of an allocation event (XE_EV_ALLOC, FREE, REALLOC) in a
 * short_allocs session, whose records have no addresses: the same, with
 * fewer arguments to pass (type_cat: type | category << 16). Other
 * events and sessions: xe_fire_fields with both addresses 0. */
int xe_fire_alloc(xe_session *s, unsigned type_cat, uint64_t size, uint64_t site, uint64_t key,
                  uint64_t value);

/* The sessions view: one row per session (the dm_xe_sessions columns and
 * a few more). */
typedef struct xe_session_info {
    char name[XE_NAME_MAX + 1];
    int state;
    uint64_t pending_buffers;
    uint64_t total_regular_buffers;
    uint64_t regular_buffer_size;
    uint64_t total_large_buffers;
    uint64_t large_buffer_size;
    uint64_t total_buffer_size;
    const char *buffer_policy_desc; /* drop_event, drop_full_buffer, do_not_drop_event */
    uint64_t dropped_event_count;   /* events dropped one at a time or with their buffer */
    uint64_t dropped_buffer_count;
    uint64_t blocked_event_fire_time_ns;
    uint64_t largest_event_dropped_size;
    int64_t create_time_ns; /* CLOCK_REALTIME */
    /* Beyond the seed's columns. */
    uint64_t events_delivered; /* events handed to the asynchronous targets */
    uint64_t max_memory;
    uint64_t memory_allocated; /* bytes mapped for buffers */
    uint64_t max_dispatch_latency_ns;
    xe_partition_mode mode;
    int strict;
    uint32_t partitions;
    int ntargets;
} xe_session_info;

void xe_session_info_get(xe_session *s, xe_session_info *info);
xe_session *xe_session_find(const char *name);
/* Registered sessions, up to max; returns how many. */
int xe_sessions(xe_session **out, int max);
/* The session's configuration and targets. */
const xe_config *xe_session_config(const xe_session *s);
xe_target *xe_session_target(xe_session *s, const char *name);

/* The engine's JSON opens every top-level object with "schema":
 * MT_JSON_SCHEMA (common/json_out.h; docs/json-sessions.md,
 * docs/schema/sessions.schema.json). */

/* The view as JSON ({"schema":"memtrail/1","sessions":[...]}, targets'
 * data included when with_targets; `memtrail sessions` prints its table
 * from it). Async-signal-safe. */
void xe_view_json(mt_out *o, int with_targets);

/* One target as a JSON object, {"target":"ring_buffer",...its data}; a
 * top-level document (with the "schema" key first) when `document` is
 * set. Async-signal-safe. */
void xe_target_json(xe_target *t, mt_out *o, int document);
/* The same object written by an mt_json already under way. */
void xe_target_json_object(xe_target *t, mt_json *j, int document);

/* In a forked child: the sessions get a dispatcher of their own and the
 * work of threads that did not survive the fork is finished. Registered
 * with pthread_atfork at the first session; call it yourself after a fork
 * that runs no handlers (_Fork), or from a handler of your own (the
 * engine's then does nothing in that child). */
void xe_atfork_child(void);

/* Time: the engine's clock (CLOCK_MONOTONIC ns). */
uint64_t xe_now_ns(void);
/* The engine's clock (xe_event.tsc) in CLOCK_MONOTONIC ns: the
 * conversion, taken once for a run of events (xe_clock_conv_ns). The
 * rate it holds is refined now and then (by a dispatcher, ~20 ms after
 * the first session started, then about once a second); a run converted
 * with it is converted as the engine would have a moment earlier. */
typedef struct xe_clock_conv {
    uint64_t ticks0, ns0, mult;
} xe_clock_conv;
void xe_clock_conv_get(xe_clock_conv *c);
/* `ticks` of the engine's clock in ns at rate `mult` (ns per tick, 32.32
 * fixed point). */
static inline uint64_t xe_clock_scale(uint64_t ticks, uint64_t mult)
{
    return (uint64_t)(((unsigned __int128)ticks * mult) >> 32);
}
static inline uint64_t xe_clock_conv_ns(const xe_clock_conv *c, uint64_t tsc)
{
    if (tsc >= c->ticks0)
        return c->ns0 + xe_clock_scale(tsc - c->ticks0, c->mult);
    return c->ns0 - xe_clock_scale(c->ticks0 - tsc, c->mult);
}

#endif /* MT_XE_H */
