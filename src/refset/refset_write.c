/* refset_write.c — writes a reference-set recording (docs/refset-format.md):
 * records are coded into the open EVENTS chunk's body (refset_format.h's
 * deltas against the chunk's previous records), and the body goes out as
 * one CRC-checked zstd frame once it reaches RS_CHUNK_TARGET bytes or the
 * recorder flushes; finish adds the END chunk, the index and the trailer.
 * Runs in the CLI: it mallocs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "refset/refset_file.h"
#include "refset/refset_format.h"

typedef struct rs_buf {
    unsigned char *p;
    size_t len, cap;
} rs_buf;

typedef struct rs_index_entry {
    uint64_t offset, t_min, t_max;
    uint32_t count;
    uint8_t kind;
} rs_index_entry;

struct mt_rs_writer {
    int fd;
    int failed; /* the first error: every later call returns it */
    mt_rs_header h;
    uint64_t offset; /* bytes written */
    uint64_t seq;    /* the next chunk's sequence number */
    rs_buf body, out;
    uint32_t nrecords; /* in the open chunk */
    int timed;         /* the open chunk has a timed record */
    uint64_t t_first, t_min, t_max;
    rs_coder c;
    rs_index_entry *index;
    size_t nindex, index_cap;
    ZSTD_CCtx *cctx;
};

/* The most one record can take coded: two strings, a stack's frames and
 * the fixed fields. */
#define RS_RECORD_MAX (2 * (TRACE_MAX_STRING + 10) + TRACE_MAX_FRAMES * 10 + 256)

static int buf_reserve(rs_buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int write_all(mt_rs_writer *w, const unsigned char *p, size_t n)
{
    if (w->failed)
        return w->failed;
    while (n) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            w->failed = k < 0 ? -errno : -EIO;
            return w->failed;
        }
        p += k;
        n -= (size_t)k;
        w->offset += (uint64_t)k;
    }
    return 0;
}

/* Writes body[0..n) as one chunk of `kind` holding `count` records. */
static int write_chunk(mt_rs_writer *w, unsigned kind, const unsigned char *body, size_t n, uint32_t count,
                       uint64_t t_min, uint64_t t_max)
{
    if (w->failed)
        return w->failed;
    if (n > TRACE_MAX_RAW)
        return w->failed = -EFBIG;
    size_t bound = ZSTD_compressBound(n);
    w->out.len = 0;
    if (buf_reserve(&w->out, TRACE_CHUNK_HEADER_SIZE + bound) < 0)
        return w->failed = -ENOMEM;
    unsigned char *h = w->out.p, *payload = h + TRACE_CHUNK_HEADER_SIZE;
    unsigned codec = TRACE_CODEC_ZSTD;
    size_t stored = w->cctx ? ZSTD_compressCCtx(w->cctx, payload, bound, body, n, RS_ZSTD_LEVEL) : 0;
    if (ZSTD_isError(stored) || !stored || stored >= n) {
        codec = TRACE_CODEC_NONE; /* zstd did not make it smaller */
        if (n)
            memcpy(payload, body, n);
        stored = n;
    }
    trace_chunk_header(h, kind, codec, w->seq, (uint32_t)stored, (uint32_t)n, count,
                       trace_crc32c(0, payload, stored));
    uint64_t at = w->offset;
    if (kind != RS_CHUNK_INDEX) {
        if (w->nindex == w->index_cap) {
            size_t cap = w->index_cap ? 2 * w->index_cap : 64;
            rs_index_entry *e = realloc(w->index, cap * sizeof *e);
            if (!e)
                return w->failed = -ENOMEM;
            w->index = e;
            w->index_cap = cap;
        }
        w->index[w->nindex++] = (rs_index_entry){at, t_min, t_max, count, (uint8_t)kind};
    }
    int rc = write_all(w, h, TRACE_CHUNK_HEADER_SIZE + stored);
    if (rc < 0)
        return rc;
    w->seq++;
    return 0;
}

/* ---- records ---- */

static unsigned char *put_zigzag(unsigned char *p, uint64_t value, uint64_t guess)
{
    return trace_put_varint(p, trace_zigzag((int64_t)(value - guess)));
}

/* A string: varint 0 for NULL, else length + 1, then the bytes. */
static unsigned char *put_string(unsigned char *p, const char *s, size_t n)
{
    if (!s)
        return trace_put_varint(p, 0);
    p = trace_put_varint(p, (uint64_t)n + 1);
    memcpy(p, s, n);
    return p + n;
}

static size_t name_length(const mt_rs_event *ev)
{
    if (!ev->name)
        return 0;
    return ev->name_len ? ev->name_len : strlen(ev->name);
}

/* What the writer refuses: what a reader would refuse (refset_read.c). */
static int record_valid(const mt_rs_event *ev)
{
    switch (ev->type) {
    case RS_EV_REF:
    case RS_EV_RELEASE:
        if (!ev->npages || ev->npages > RS_MAX_NPAGES)
            return 0;
        if (ev->type == RS_EV_REF && (ev->category >= RS_NCATEGORIES || ev->npages > RS_MAX_REF_NPAGES))
            return 0;
        break;
    case RS_EV_MAP:
        if (ev->category >= RS_NCATEGORIES)
            return 0;
        break;
    case RS_EV_STACK:
        if (ev->nframes > TRACE_MAX_FRAMES || (ev->nframes && !ev->frames))
            return 0;
        break;
    case RS_EV_PROCESS:
    case RS_EV_EXIT:
    case RS_EV_MODULE:
    case RS_EV_META:
    case RS_EV_LOST: break;
    default: return 0;
    }
    if (name_length(ev) > TRACE_MAX_STRING || (ev->value && strlen(ev->value) > TRACE_MAX_STRING))
        return 0;
    return 1;
}

static unsigned char *put_ref(mt_rs_writer *w, unsigned char *p, const mt_rs_event *ev)
{
    rs_coder *c = &w->c;
    unsigned type = RS_EV_REF, attrs = 0;
    uint64_t guess = rs_addr_guess(c, ev->pid, ev->tid);
    if (ev->pid == c->pid && ev->tid == c->tid)
        type |= RS_REF_SAME_THREAD;
    if (ev->addr == guess)
        type |= RS_REF_NEXT_ADDR;
    if (ev->npages == 1)
        type |= RS_REF_ONE_PAGE;
    attrs |= ev->category != c->category ? RS_ATTR_CATEGORY : 0;
    attrs |= ev->flags != c->flags ? RS_ATTR_FLAGS : 0;
    attrs |= ev->stack != c->stack ? RS_ATTR_STACK : 0;
    attrs |= ev->alloc_stack != c->alloc_stack ? RS_ATTR_ALLOC : 0;
    attrs |= ev->ino != c->ino ? RS_ATTR_INO : 0;
    attrs |= ev->dev != c->dev ? RS_ATTR_DEV : 0;
    /* an anonymous page has no predicted pgoff: a nonzero one goes as is */
    attrs |= !ev->ino && ev->pgoff ? RS_ATTR_PGOFF : 0;
    if (!attrs)
        type |= RS_REF_SAME_ATTRS;
    *p++ = (unsigned char)type;
    p = put_zigzag(p, ev->time_ns, c->time);
    if (!(type & RS_REF_SAME_THREAD)) {
        p = trace_put_varint(p, ev->pid);
        p = trace_put_varint(p, trace_zigzag32((int32_t)(ev->tid - ev->pid)));
    }
    if (!(type & RS_REF_NEXT_ADDR))
        p = put_zigzag(p, ev->addr, guess);
    if (!(type & RS_REF_ONE_PAGE))
        p = trace_put_varint(p, ev->npages);
    if (attrs) {
        *p++ = (unsigned char)attrs;
        if (attrs & RS_ATTR_CATEGORY)
            *p++ = ev->category;
        if (attrs & RS_ATTR_FLAGS)
            *p++ = ev->flags;
        if (attrs & RS_ATTR_STACK)
            p = trace_put_varint(p, ev->stack);
        if (attrs & RS_ATTR_ALLOC)
            p = trace_put_varint(p, ev->alloc_stack);
        if (attrs & RS_ATTR_INO)
            p = trace_put_varint(p, ev->ino);
        if (attrs & RS_ATTR_DEV)
            p = trace_put_varint(p, ev->dev);
    }
    if (attrs & RS_ATTR_PGOFF)
        p = trace_put_varint(p, ev->pgoff);
    else if (ev->ino)
        p = put_zigzag(p, ev->pgoff, rs_pgoff_guess(c, ev->addr));
    p = put_zigzag(p, ev->pfn, c->pfn_next);
    rs_coder_ref(c, ev, w->h.page_size);
    return p;
}

static unsigned char *put_release(mt_rs_writer *w, unsigned char *p, const mt_rs_event *ev)
{
    rs_coder *c = &w->c;
    unsigned type = RS_EV_RELEASE;
    if (ev->pid == c->pid)
        type |= RS_REL_SAME_PID;
    if (ev->addr == c->addr_end)
        type |= RS_REL_NEXT_ADDR;
    if (ev->npages == 1)
        type |= RS_REL_ONE_PAGE;
    *p++ = (unsigned char)type;
    p = put_zigzag(p, ev->time_ns, c->time);
    if (!(type & RS_REL_SAME_PID))
        p = trace_put_varint(p, ev->pid);
    if (!(type & RS_REL_NEXT_ADDR))
        p = put_zigzag(p, ev->addr, c->addr_end);
    if (!(type & RS_REL_ONE_PAGE))
        p = trace_put_varint(p, ev->npages);
    *p++ = ev->reason;
    rs_coder_release(c, ev, w->h.page_size);
    return p;
}

/* Codes ev (time already relative) at p: the end. */
static unsigned char *put_record(mt_rs_writer *w, unsigned char *p, const mt_rs_event *ev)
{
    rs_coder *c = &w->c;
    switch (ev->type) {
    case RS_EV_REF: return put_ref(w, p, ev);
    case RS_EV_RELEASE: return put_release(w, p, ev);
    default: break;
    }
    *p++ = ev->type;
    if (rs_type_timed(ev->type))
        p = put_zigzag(p, ev->time_ns, c->time);
    switch (ev->type) {
    case RS_EV_PROCESS:
        p = trace_put_varint(p, ev->pid);
        p = trace_put_varint(p, ev->ppid);
        *p++ = ev->reason;
        p = put_string(p, ev->name, name_length(ev));
        break;
    case RS_EV_EXIT: p = trace_put_varint(p, ev->pid); break;
    case RS_EV_MAP:
        p = trace_put_varint(p, ev->pid);
        p = trace_put_varint(p, ev->addr);
        p = trace_put_varint(p, ev->len);
        p = trace_put_varint(p, ev->pgoff);
        p = trace_put_varint(p, ev->dev);
        p = trace_put_varint(p, ev->ino);
        p = trace_put_varint(p, ev->prot);
        p = trace_put_varint(p, ev->map_flags);
        *p++ = ev->category;
        p = trace_put_varint(p, ev->stack);
        p = put_string(p, ev->name, name_length(ev));
        break;
    case RS_EV_STACK: {
        p = trace_put_varint(p, ev->stack);
        p = trace_put_varint(p, ev->nframes);
        uint64_t prev = 0;
        for (uint32_t i = 0; i < ev->nframes; i++) {
            p = put_zigzag(p, ev->frames[i], prev);
            prev = ev->frames[i];
        }
        break;
    }
    case RS_EV_MODULE:
        p = trace_put_varint(p, ev->pid);
        p = trace_put_varint(p, ev->addr);
        p = trace_put_varint(p, ev->len);
        p = trace_put_varint(p, ev->pgoff);
        p = put_string(p, ev->name, name_length(ev));
        p = put_string(p, ev->value, ev->value ? strlen(ev->value) : 0);
        break;
    case RS_EV_META:
        p = put_string(p, ev->name, name_length(ev));
        p = put_string(p, ev->value, ev->value ? strlen(ev->value) : 0);
        break;
    case RS_EV_LOST:
        p = trace_put_varint(p, ev->pid);
        p = trace_put_varint(p, ev->count);
        break;
    }
    return p;
}

/* The open chunk's body: a prefix (the chunk's times) then the records,
 * coded after the prefix's room. The prefix is written last, in front. */
#define RS_PREFIX_MAX 30

static void chunk_reset(mt_rs_writer *w)
{
    w->body.len = RS_PREFIX_MAX;
    w->nrecords = 0;
    w->timed = 0;
    w->t_first = w->t_min = w->t_max = 0;
    rs_coder_reset(&w->c, 0);
}

int mt_rs_write_flush(mt_rs_writer *w)
{
    if (w->failed)
        return w->failed;
    if (!w->nrecords)
        return 0;
    unsigned char prefix[RS_PREFIX_MAX], *q = prefix;
    q = trace_put_varint(q, w->t_first);
    q = trace_put_varint(q, w->t_first - w->t_min);
    q = trace_put_varint(q, w->t_max - w->t_min);
    size_t np = (size_t)(q - prefix);
    unsigned char *start = w->body.p + RS_PREFIX_MAX - np;
    memcpy(start, prefix, np);
    int rc = write_chunk(w, RS_CHUNK_EVENTS, start, w->body.len - (RS_PREFIX_MAX - np), w->nrecords, w->t_min,
                         w->t_max);
    chunk_reset(w);
    return rc;
}

int mt_rs_write(mt_rs_writer *w, const mt_rs_event *ev)
{
    if (w->failed)
        return w->failed;
    if (!record_valid(ev))
        return -EINVAL;
    if (buf_reserve(&w->body, RS_RECORD_MAX) < 0)
        return w->failed = -ENOMEM;
    mt_rs_event rel = *ev;
    if (rs_type_timed(ev->type)) {
        /* relative to the start; a time before it (a clock read before
         * the header's) is the start */
        rel.time_ns = ev->time_ns > w->h.start_ns ? ev->time_ns - w->h.start_ns : 0;
        if (!w->timed) {
            w->timed = 1;
            w->t_first = w->t_min = w->t_max = rel.time_ns;
            w->c.time = rel.time_ns;
        }
        if (rel.time_ns < w->t_min)
            w->t_min = rel.time_ns;
        if (rel.time_ns > w->t_max)
            w->t_max = rel.time_ns;
    }
    unsigned char *end = put_record(w, w->body.p + w->body.len, &rel);
    w->body.len = (size_t)(end - w->body.p);
    if (rs_type_timed(ev->type))
        w->c.time = rel.time_ns;
    w->nrecords++;
    if (w->body.len >= RS_CHUNK_TARGET)
        return mt_rs_write_flush(w);
    return 0;
}

mt_rs_writer *mt_rs_writer_open(int fd, const mt_rs_header *h, int *err)
{
    mt_rs_writer *w = calloc(1, sizeof *w);
    int rc = -ENOMEM;
    if (!w)
        goto fail;
    w->fd = fd;
    w->h = *h;
    rc = -EINVAL;
    if (!h->page_size || (h->page_size & (h->page_size - 1)) || h->page_size > (1u << 30))
        goto fail;
    rc = -ENOMEM;
    if (buf_reserve(&w->body, RS_CHUNK_TARGET + RS_RECORD_MAX) < 0 || !(w->cctx = ZSTD_createCCtx()))
        goto fail;
    chunk_reset(w);
    unsigned char hd[RS_HEADER_SIZE] = {0};
    memcpy(hd, RS_MAGIC, 8);
    trace_put32(hd + 8, RS_VERSION);
    trace_put32(hd + 12, RS_HEADER_SIZE);
    trace_put64(hd + 16, h->start_ns);
    trace_put64(hd + 24, h->start_realtime_ns);
    trace_put32(hd + 32, h->page_size);
    trace_put32(hd + 36, h->flags);
    trace_put32(hd + 60, trace_crc32c(0, hd, 60));
    if ((rc = write_all(w, hd, sizeof hd)) < 0)
        goto fail;
    return w;
fail:
    if (err)
        *err = rc;
    if (w) {
        ZSTD_freeCCtx(w->cctx);
        free(w->body.p);
        free(w);
    }
    close(fd);
    return NULL;
}

uint64_t mt_rs_write_bytes(const mt_rs_writer *w)
{
    return w->offset;
}

static void writer_free(mt_rs_writer *w)
{
    ZSTD_freeCCtx(w->cctx);
    free(w->body.p);
    free(w->out.p);
    free(w->index);
    free(w);
}

static int write_end(mt_rs_writer *w, const char *const *names, const uint64_t *values, int nstats)
{
    if (nstats < 0 || (unsigned)nstats > RS_MAX_STATS)
        return -EINVAL;
    rs_buf b = {0};
    if (buf_reserve(&b, 16 + (size_t)nstats * (TRACE_MAX_STRING + 24)) < 0)
        return -ENOMEM;
    unsigned char *p = trace_put_varint(b.p, (uint64_t)nstats);
    for (int i = 0; i < nstats; i++) {
        size_t n = names[i] ? strlen(names[i]) : 0;
        if (n > TRACE_MAX_STRING)
            n = TRACE_MAX_STRING; /* a statistic's name is ours: never this long */
        p = trace_put_varint(p, n);
        memcpy(p, names[i] ? names[i] : "", n);
        p = trace_put_varint(p + n, values[i]);
    }
    int rc = write_chunk(w, RS_CHUNK_END, b.p, (size_t)(p - b.p), (uint32_t)nstats, 0, 0);
    free(b.p);
    return rc;
}

static int write_index(mt_rs_writer *w)
{
    rs_buf b = {0};
    if (buf_reserve(&b, 16 + w->nindex * 48) < 0)
        return -ENOMEM;
    unsigned char *p = b.p;
    for (size_t i = 0; i < w->nindex; i++) {
        const rs_index_entry *e = &w->index[i];
        p = trace_put_varint(p, e->offset);
        *p++ = e->kind;
        p = trace_put_varint(p, e->count);
        p = trace_put_varint(p, e->t_min);
        p = trace_put_varint(p, e->t_max - e->t_min);
    }
    uint64_t at = w->offset;
    int rc = write_chunk(w, RS_CHUNK_INDEX, b.p, (size_t)(p - b.p), (uint32_t)w->nindex, 0, 0);
    free(b.p);
    if (rc < 0)
        return rc;
    unsigned char t[RS_TRAILER_SIZE];
    memcpy(t, RS_TRAILER_MAGIC, 8);
    trace_put64(t + 8, at);
    trace_put32(t + 16, (uint32_t)w->nindex);
    trace_put32(t + 20, trace_crc32c(0, t, 20));
    return write_all(w, t, sizeof t);
}

int mt_rs_write_finish(mt_rs_writer *w, const char *const *stat_names, const uint64_t *stat_values,
                       int nstats)
{
    int rc = mt_rs_write_flush(w);
    if (rc >= 0)
        rc = write_end(w, stat_names, stat_values, nstats);
    if (rc >= 0)
        rc = write_index(w);
    if (close(w->fd) < 0 && rc >= 0)
        rc = -errno;
    writer_free(w);
    return rc < 0 ? rc : 0;
}

void mt_rs_write_abort(mt_rs_writer *w)
{
    mt_rs_write_flush(w);
    close(w->fd);
    writer_free(w);
}
