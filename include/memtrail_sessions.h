/* memtrail_sessions.h — event sessions of the memtrail agent: a program
 * creates its own sessions (as SQL Server's Extended Events), fires its
 * own events into them and reads their targets. Needs <memtrail.h>'s
 * agent (or the stub, where every call says -ENOSYS). */
#ifndef MEMTRAIL_SESSIONS_H
#define MEMTRAIL_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- event sessions ------------------------------------------------------
 * An event session buffers events in memory sized as SQL Server Extended
 * Events sizes its buffers (MAX_MEMORY, MEMORY_PARTITION_MODE, ...) and
 * hands them to its targets (ring_buffer, event_file, histogram,
 * event_counter, pair_matching); docs/events.md has the options. Sessions
 * work whenever the agent is loaded, even with mode=off; without it every
 * function returns -ENOSYS (reads return 0). `memtrail sessions PID` shows
 * a live process's sessions. */

typedef struct mt_session mt_session;

/* Event types: the `type` of an mt_event. */
enum {
    MT_EVENT_USER = 0,
    MT_EVENT_ALLOC = 1,   /* address, size, site, category */
    MT_EVENT_FREE = 2,    /* address (size when known) */
    MT_EVENT_REALLOC = 3, /* old_address -> address, size */
    MT_EVENT_MMAP = 4,
    MT_EVENT_MUNMAP = 5,
    MT_EVENT_SPAN_BEGIN = 6, /* key: the span's id */
    MT_EVENT_SPAN_END = 7,
    MT_EVENT_SNAPSHOT = 8,
    MT_EVENT_PAGE_REF = 9
};

/* One event to fire. The fields mean what the program wants them to mean
 * (predicates and targets read them by name: "size", "key", ...); the
 * session adds the time, thread and CPU. `data` (data_len bytes, may be
 * NULL) is copied with the event and counts towards its size. */
typedef struct mt_event {
    unsigned type;     /* MT_EVENT_* */
    unsigned category; /* a category id (as the agent numbers them) or the program's own number */
    uint64_t size, address, old_address, site, key, value;
    const void *data;
    size_t data_len;
} mt_event;

/* An event as a ring_buffer target kept it (its data is not kept). */
typedef struct mt_event_record {
    unsigned type, category, tid, cpu;
    uint64_t time_ns; /* CLOCK_MONOTONIC */
    uint64_t size, address, old_address, site, key, value;
    size_t data_len;
} mt_event_record;

/* Create a session, stopped. `options` is the session's definition,
 * "max_memory=4MB; memory_partition_mode=per_cpu;
 * event_retention_mode=no_event_loss; target=ring_buffer(max_events_limit=1000);
 * where=size >= 4096" (NULL: every default), and `name`, when not NULL,
 * names it (over any name= in options; a session must have a name, unique
 * in the process). The session's buffers are mapped now, at the size its
 * view reports. Returns 0 and sets *session, or a negative errno code
 * (-EINVAL bad options or a MAX_MEMORY too small for its buffers, -EEXIST
 * the name is taken, -ENOSPC too many sessions, -ENOMEM, -ENOSYS no agent)
 * with a one-line reason in error[0..error_len) (error may be NULL). */
int mt_session_create(const char *name, const char *options, mt_session **session, char *error,
                      size_t error_len);

/* Start collecting: starts the session's dispatcher thread. 0 or -errno. */
int mt_session_start(mt_session *session);

/* Stop collecting: what is buffered is dispatched to the targets, which
 * are flushed (an event_file is complete on disk). The session keeps its
 * targets' data and can be started again. 0 or -errno. */
int mt_session_stop(mt_session *session);

/* Dispatch what is buffered now, as an expired MAX_DISPATCH_LATENCY would.
 * 0 or -errno. */
int mt_session_flush(mt_session *session);

/* Stop the session and unmap everything it has. `session` is invalid
 * after, so no other thread may still fire into it. */
int mt_session_drop(mt_session *session);

/* Fire one event. Returns 1 when the session collected it, 0 when it was
 * not for the session (not started, a type it does not take, its
 * predicate is false), -ENOBUFS when it was dropped for want of a free
 * buffer (ALLOW_SINGLE_EVENT_LOSS), -EMSGSIZE when it is larger than any
 * buffer. Lock-free; with EVENT_RETENTION_MODE=NO_EVENT_LOSS it waits
 * while every buffer is full. */
int mt_event_fire(mt_session *session, const mt_event *event);

/* The session's row of the sessions view (the dm_xe_sessions columns). */
typedef struct mt_session_info {
    char name[64];
    int state;                /* 0 created, 1 started, 2 stopping, 3 stopped */
    uint64_t pending_buffers; /* full buffers waiting for the dispatcher */
    uint64_t total_regular_buffers;
    uint64_t regular_buffer_size; /* usable bytes of one buffer */
    uint64_t total_large_buffers; /* 2 with MAX_EVENT_SIZE, else 0 */
    uint64_t large_buffer_size;
    uint64_t total_buffer_size;  /* total_regular_buffers x regular_buffer_size */
    char buffer_policy_desc[32]; /* drop_event, drop_full_buffer, do_not_drop_event */
    uint64_t dropped_event_count;
    uint64_t dropped_buffer_count;
    uint64_t blocked_event_fire_time_ns;
    uint64_t largest_event_dropped_size;
    int64_t create_time_ns;    /* CLOCK_REALTIME */
    uint64_t events_delivered; /* events handed to the asynchronous targets */
    uint64_t max_memory;
    uint64_t memory_allocated;        /* bytes mapped for the buffers */
    uint64_t max_dispatch_latency_ns; /* UINT64_MAX: INFINITE */
    unsigned partition_mode;          /* 0 NONE, 1 PER_NODE, 2 PER_CPU */
    int strict;                       /* STRICT_MAX_MEMORY=ON */
    unsigned partitions;
    int ntargets;
} mt_session_info;

/* Fill *info (the struct and the function cannot share a name in C:
 * hence _get). 0 or -errno. */
int mt_session_info_get(mt_session *session, mt_session_info *info);

/* The data of the session's target named `target` ("ring_buffer",
 * "histogram", ...; the first of that name) as one JSON object
 * ({"schema":"memtrail/1","target":"ring_buffer",...}: the version of
 * the JSON, the target's kind, then its data), written NUL-terminated into
 * buf. Returns its length, -ENOENT (no such target) or -ENOSPC (buf is too
 * small). */
int mt_session_target_json(mt_session *session, const char *target, char *buf, size_t len);

/* Up to `max` of the newest events the session's ring_buffer target holds,
 * oldest first, into out. Returns how many, or -ENOENT (no ring_buffer
 * target); *total (may be NULL) gets how many events the target ever
 * received. */
int mt_session_ring_read(mt_session *session, mt_event_record *out, int max, uint64_t *total);

#ifdef __cplusplus
}
#endif
#endif /* MEMTRAIL_SESSIONS_H */
