/* trace_mem.h — for the analyzer's tests: events written as a trace with
 * the real writer (src/trace) into memory, and opened with the real reader
 * (through a scratch file, cut to any length). Stack s has frames
 * 0x401000 + 16 s, 0x402000 + s and category s % 3; one module covers them. */
#ifndef MT_TESTS_ANALYZE_TRACE_MEM_H
#define MT_TESTS_ANALYZE_TRACE_MEM_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/trace_read.h"
#include "trace/trace_write.h"

#define TRACE_MEM_START_NS 1000000000ull
#define TRACE_MEM_LOST 7u

struct trace_mem {
    unsigned char *buf;
    size_t len, cap;
};

static inline int trace_mem_write_cb(void *ctx, const void *p, size_t n)
{
    struct trace_mem *m = ctx;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->len + n)
            cap *= 2;
        unsigned char *b = realloc(m->buf, cap);
        if (!b)
            return -ENOMEM;
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, p, n);
    m->len += n;
    return 0;
}

static inline int trace_mem_stack_cb(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *category)
{
    (void)ctx;
    if (max < 2)
        return -1;
    out[0] = 0x401000 + 16 * (uint64_t)id;
    out[1] = 0x402000 + (uint64_t)id;
    *category = id % 3;
    return 2;
}

static inline const char *trace_mem_category_cb(void *ctx, unsigned id)
{
    (void)ctx;
    static const char *names[] = {"malloc", "other", "strings", "cat3"};
    return id < 4 ? names[id] : NULL;
}

/* The one module written (tests of several files may name others). */
static uint64_t trace_mem_module_start = 0x400000;
static const char *trace_mem_module_path = "/nonexistent/test-program";

static inline void trace_mem_modules_cb(void *ctx, mt_trace_writer *w)
{
    (void)ctx;
    mt_trace_write_module(w, trace_mem_module_start, 0x500000, 0, trace_mem_module_path, NULL, 0);
}

/* 0, or -1. chunk_events 0: the writer's default. */
static inline int trace_mem_write(struct trace_mem *m, const mt_trace_event *ev, size_t n,
                                  uint32_t chunk_events)
{
    memset(m, 0, sizeof *m);
    mt_trace_host host = {.ctx = m,
                          .write = trace_mem_write_cb,
                          .stack = trace_mem_stack_cb,
                          .category_name = trace_mem_category_cb,
                          .modules = trace_mem_modules_cb};
    mt_trace_write_config cfg = {.chunk_events = chunk_events,
                                 .pid = 4242,
                                 .start_ns = TRACE_MEM_START_NS,
                                 .start_realtime_ns = 1700000000000000000ull};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    if (!w)
        return -1;
    int rc = mt_trace_write_begin(w);
    for (size_t i = 0; i < n && rc == 0; i++) {
        mt_trace_event e = ev[i];
        e.time_ns += TRACE_MEM_START_NS;
        rc = mt_trace_write_event(w, &e);
    }
    const char *names[] = {"events_lost"};
    const uint64_t values[] = {TRACE_MEM_LOST};
    if (rc == 0)
        rc = mt_trace_write_finish(w, names, values, 1);
    mt_trace_writer_destroy(w);
    return rc == 0 ? 0 : -1;
}

/* A trace with the header, meta and end statistics given: times in ev
 * are from start_ns; meta is key, value, ..., NULL. 0, or -1. */
struct trace_mem_opts {
    uint32_t pid;
    uint64_t start_ns;
    const char *const *meta;
    const char *const *stat_names;
    const uint64_t *stat_values;
    unsigned nstats;
    bool no_end; /* no END chunk: the writer was stopped after its last chunk */
};

static inline int trace_mem_write_opts(struct trace_mem *m, const mt_trace_event *ev, size_t n,
                                       const struct trace_mem_opts *o)
{
    memset(m, 0, sizeof *m);
    mt_trace_host host = {.ctx = m,
                          .write = trace_mem_write_cb,
                          .stack = trace_mem_stack_cb,
                          .category_name = trace_mem_category_cb,
                          .modules = trace_mem_modules_cb};
    mt_trace_write_config cfg = {
        .pid = o->pid, .start_ns = o->start_ns, .start_realtime_ns = 1700000000000000000ull};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    if (!w)
        return -1;
    int rc = mt_trace_write_begin(w);
    for (size_t i = 0; o->meta && o->meta[i] && o->meta[i + 1] && rc == 0; i += 2)
        rc = mt_trace_write_meta(w, o->meta[i], o->meta[i + 1]);
    for (size_t i = 0; i < n && rc == 0; i++) {
        mt_trace_event e = ev[i];
        e.time_ns += o->start_ns;
        rc = mt_trace_write_event(w, &e);
    }
    if (rc == 0)
        rc = o->no_end ? mt_trace_write_flush(w, 1)
                       : mt_trace_write_finish(w, o->stat_names, o->stat_values, o->nstats);
    mt_trace_writer_destroy(w);
    return rc == 0 ? 0 : -1;
}

/* Writes m to path. 0, or -1. */
static inline int trace_mem_save(const struct trace_mem *m, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t k = fwrite(m->buf, 1, m->len, f);
    return fclose(f) == 0 && k == m->len ? 0 : -1;
}

/* Writes m to a scratch file and opens it (the file is unlinked at once). */
static inline int trace_mem_open(const struct trace_mem *m, unsigned flags, mt_trace_reader **r, char *err,
                                 size_t errlen)
{
    char path[] = "/tmp/mt-analyze-test-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    while (off < m->len) {
        ssize_t k = write(fd, m->buf + off, m->len - off);
        if (k <= 0) {
            close(fd);
            unlink(path);
            return -EIO;
        }
        off += (size_t)k;
    }
    close(fd);
    int rc = mt_trace_open(path, flags, r, err, errlen);
    unlink(path);
    return rc;
}

static inline void trace_mem_free(struct trace_mem *m)
{
    free(m->buf);
    memset(m, 0, sizeof *m);
}

#endif
