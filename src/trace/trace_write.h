/* trace_write.h — the trace writer (docs/trace-format.md): allocation
 * events packed into delta- and varint-coded columns, one zstd frame per
 * chunk, definitions (threads, stacks, modules, categories) written before
 * the first chunk that uses them, and an index and trailer at the end.
 *
 * It runs inside the agent (the event_file target's encoder, on a session's
 * dispatcher thread): it never allocates through malloc (its buffers and
 * zstd's workspace are mmap'd), and it writes only through the host's
 * write callback, whole chunks at a time, so a file cut anywhere holds
 * every chunk written before the cut. One writer is used by one thread
 * (the caller); with cfg.threads > 1 it encodes full chunks on threads
 * of its own, but every call of the host's callbacks (write, stack,
 * modules, ...) is still made on the caller's thread, inside one of the
 * calls below; the same events and configuration give the same bytes
 * whatever the threads' timing.
 * A writer used in a fork child (which has none of the parent's encoder
 * threads) is only destroyed there: mt_trace_writer_destroy then unmaps
 * without joining. */
#ifndef MT_TRACE_WRITE_H
#define MT_TRACE_WRITE_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "trace/trace_event.h" /* mt_trace_event, enum mt_trace_type */

typedef struct mt_trace_writer mt_trace_writer;

/* What the writer asks of its host (the agent). */
typedef struct mt_trace_host {
    void *ctx;
    /* Writes all n bytes; 0, or a negative errno. */
    int (*write)(void *ctx, const void *buf, size_t n);
    /* The frames of stack `id` (return addresses, innermost first) into
     * out[max] and its category; returns the count, or -1 if unknown. */
    int (*stack)(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *category);
    /* Name of category id, or NULL. */
    const char *(*category_name)(void *ctx, unsigned id);
    /* Called when a frame lies outside every module written so far: the
     * host calls mt_trace_write_module for each loaded module (the writer
     * skips the ones it has). */
    void (*modules)(void *ctx, struct mt_trace_writer *w);
    /* Starts one of the writer's encoder threads (cfg.threads > 1) running
     * fn(arg): 0 or a negative errno. NULL: pthread_create with default
     * attributes. The agent's starts it as its own thread (in_agent, every
     * signal blocked). */
    int (*spawn)(void *ctx, void *(*fn)(void *), void *arg, pthread_t *out);
} mt_trace_host;

typedef struct mt_trace_write_config {
    int zstd_level;        /* 0: the default (see trace_write.c) */
    uint32_t chunk_events; /* events per chunk; 0: the default */
    uint64_t chunk_age_ns; /* mt_trace_write_flush(w, 0) closes a chunk this old; 0: 1 s */
    uint32_t pid;
    uint64_t start_ns;          /* CLOCK_MONOTONIC time 0 of the file */
    uint64_t start_realtime_ns; /* the wall clock at start_ns */
    uint32_t time_unit_ns;      /* times are stored in this unit (rounded down); 0: 1 ns, exact */
    unsigned chunk_flags;       /* testing: 0 the writer picks each chunk's coding; else 0x100 | the
                                   TRACE_F_* flags every events chunk uses */
    unsigned threads;           /* encoder threads: 0 or 1 encode on the calling thread; N > 1: full
                                   chunks are encoded and compressed on N threads of the writer's, at
                                   most N in flight, and written in order by the calling thread */
} mt_trace_write_config;

/* Maps a writer (and its zstd workspace). NULL on failure. */
mt_trace_writer *mt_trace_writer_create(const mt_trace_write_config *cfg, const mt_trace_host *host);
void mt_trace_writer_destroy(mt_trace_writer *w);

/* Starts a file: writes the header; every definition is written again
 * before its first use in this file, so each file stands alone. */
int mt_trace_write_begin(mt_trace_writer *w);
/* A meta key's or value's longest (the format's longest string): a longer
 * one is cut there. */
#define MT_TRACE_META_MAX 4096u
/* Key/value metadata (exe, cmdline, ...) for the next definitions chunk. */
int mt_trace_write_meta(mt_trace_writer *w, const char *key, const char *value);
/* Appends one event; writes a chunk when one is full. 0 or -errno (the
 * write failed: the chunk's events are lost and counted). */
int mt_trace_write_event(mt_trace_writer *w, const mt_trace_event *ev);
/* n events, as mt_trace_write_event each: the first error (0 if none). */
int mt_trace_write_events(mt_trace_writer *w, const mt_trace_event *ev, size_t n);
/* Writes the open chunk if `force`, or if it is older than chunk_age_ns. */
int mt_trace_write_flush(mt_trace_writer *w, int force);
/* Writes the open chunk, an end record with these statistics (name/value
 * pairs, e.g. "events_lost"), the index and the trailer. */
int mt_trace_write_finish(mt_trace_writer *w, const char *const *stat_names, const uint64_t *stat_values,
                          int nstats);
/* One module (from the host's modules callback). build_id may be NULL. */
void mt_trace_write_module(mt_trace_writer *w, uint64_t start, uint64_t end, uint64_t bias, const char *path,
                           const unsigned char *build_id, unsigned build_id_len);

/* The writer's own counts: events handed to it (written or lost; the
 * written ones are events - events_lost_to_errors, once the open chunk
 * went out),
 * chunks and bytes written, events lost to failed writes, and the chunks'
 * bytes before compression. */
typedef struct mt_trace_write_stats {
    uint64_t events, chunks, bytes, events_lost_to_errors, raw_bytes;
} mt_trace_write_stats;
void mt_trace_write_get_stats(const mt_trace_writer *w, mt_trace_write_stats *out);

#endif
