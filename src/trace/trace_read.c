/* trace_read.c — reading a trace (docs/trace-format.md): the header, the
 * optional index (through the trailer), then chunk after chunk. A loader
 * reads, checks (CRCs, lengths) and decompresses one chunk at a time,
 * either inline or, with MT_TRACE_PREFETCH, one chunk ahead on its own
 * thread; the caller's thread parses definitions and decodes events from
 * the chunk's streams. The first problem stops reading with an error
 * naming the file, the chunk and its offset. */
#include "trace/trace_read_int.h"
#include "trace/trace_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

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

/* Reads chunks from the file in order. */
typedef struct loader {
    int fd;
    const unsigned char *mem;
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
    uint8_t category;
    uint64_t addr;
    uint64_t bits; /* bit stream: buffered bits, their count */
    unsigned nbits;
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
    int prefetch, failed, complete, ended;
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

static void chunk_fail(chunk *c, const loader *ld, const char *fmt, ...)
{
    int n = snprintf(c->err, sizeof c->err, "%s: chunk %llu at offset %llu: ", ld->name,
                     (unsigned long long)ld->ordinal, (unsigned long long)ld->offset);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof c->err)
        vsnprintf(c->err + n, sizeof c->err - (size_t)n, fmt, ap);
    va_end(ap);
    c->status = -1;
    c->ordinal = ld->ordinal;
    c->offset = ld->offset;
}

/* Up to n bytes at off; the count read, or -1 on an I/O error. */
static ssize_t read_at(const loader *ld, uint64_t off, void *buf, size_t n)
{
    if (off >= ld->size)
        return 0;
    if (n > ld->size - off)
        n = (size_t)(ld->size - off);
    if (ld->mem) {
        memcpy(buf, ld->mem + off, n);
        return (ssize_t)n;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(ld->fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

static int grow(unsigned char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 1u << 16;
    while (n < need)
        n *= 2;
    unsigned char *q = realloc(*p, n);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Checks a chunk header's own fields; NULL when good, else what is wrong. */
static const char *header_problem(const unsigned char *h, int no_crc)
{
    if (memcmp(h, TRACE_CHUNK_MAGIC, 4))
        return "bad chunk magic";
    if (!no_crc && trace_get32(h + 36) != trace_crc32c(0, h, 36))
        return "chunk header CRC mismatch";
    if (h[6] != TRACE_CHUNK_HEADER_SIZE)
        return "unknown chunk header size";
    if (h[5] != TRACE_CODEC_NONE && h[5] != TRACE_CODEC_ZSTD)
        return "unknown codec";
    uint32_t stored = trace_get32(h + 16), raw = trace_get32(h + 20);
    if (stored > TRACE_MAX_STORED || raw > TRACE_MAX_RAW || (h[5] == TRACE_CODEC_NONE && stored != raw))
        return "bad chunk lengths";
    return NULL;
}

/* Loads the next chunk into c (status 1), or the end (0), or an error. */
static void load_next(loader *ld, chunk *c)
{
    c->status = 0;
    if (ld->done)
        return;
    unsigned char h[TRACE_CHUNK_HEADER_SIZE];
    ssize_t got = read_at(ld, ld->offset, h, sizeof h);
    if (got < 0) {
        chunk_fail(c, ld, "read error: %s", strerror(errno));
        goto stop;
    }
    if (got == 0)
        goto stop; /* the file ends at a chunk boundary */
    if (got >= 8 && !memcmp(h, TRACE_TRAILER_MAGIC, 8)) {
        if (got < (ssize_t)TRACE_TRAILER_SIZE)
            chunk_fail(c, ld, "truncated trailer (%zd of %u bytes)", got, TRACE_TRAILER_SIZE);
        else if (!ld->no_crc && trace_get32(h + 20) != trace_crc32c(0, h, 20))
            chunk_fail(c, ld, "trailer CRC mismatch");
        goto stop;
    }
    if (got < (ssize_t)sizeof h) {
        chunk_fail(c, ld, "truncated: the chunk header needs %u bytes, the file has %zd more",
                   TRACE_CHUNK_HEADER_SIZE, got);
        goto stop;
    }
    const char *bad = header_problem(h, ld->no_crc);
    if (bad) {
        chunk_fail(c, ld, "%s", bad);
        goto stop;
    }
    if (trace_get64(h + 8) != ld->ordinal) {
        chunk_fail(c, ld, "sequence number %llu where %llu belongs (a chunk missing or out of place)",
                   (unsigned long long)trace_get64(h + 8), (unsigned long long)ld->ordinal);
        goto stop;
    }
    uint32_t stored = trace_get32(h + 16), raw = trace_get32(h + 20);
    uint64_t room = ld->size - ld->offset - TRACE_CHUNK_HEADER_SIZE;
    if (stored > room) {
        chunk_fail(c, ld, "truncated: the payload needs %u bytes, the file has %llu more", stored,
                   (unsigned long long)room);
        goto stop;
    }
    if (grow(&ld->stored, &ld->stored_cap, stored + 1u) < 0) {
        chunk_fail(c, ld, "out of memory");
        goto stop;
    }
    got = read_at(ld, ld->offset + TRACE_CHUNK_HEADER_SIZE, ld->stored, stored);
    if (got != (ssize_t)stored) {
        chunk_fail(c, ld, "read error: %s", got < 0 ? strerror(errno) : "short read");
        goto stop;
    }
    if (!ld->no_crc && trace_get32(h + 28) != trace_crc32c(0, ld->stored, stored)) {
        chunk_fail(c, ld, "payload CRC mismatch");
        goto stop;
    }
    if (h[5] == TRACE_CODEC_ZSTD && ZSTD_getFrameContentSize(ld->stored, stored) != raw) {
        chunk_fail(c, ld, "the zstd frame's header does not say %u bytes, as the chunk's does", raw);
        goto stop;
    }
    if (grow(&c->raw, &c->raw_cap, raw + 1u) < 0) {
        chunk_fail(c, ld, "out of memory");
        goto stop;
    }
    if (h[5] == TRACE_CODEC_NONE) {
        memcpy(c->raw, ld->stored, stored);
    } else {
        if (!ld->dctx && !(ld->dctx = ZSTD_createDCtx())) {
            chunk_fail(c, ld, "out of memory");
            goto stop;
        }
        size_t n = ZSTD_decompressDCtx(ld->dctx, c->raw, raw, ld->stored, stored);
        if (ZSTD_isError(n)) {
            chunk_fail(c, ld, "zstd: %s", ZSTD_getErrorName(n));
            goto stop;
        }
        if (n != raw) {
            chunk_fail(c, ld, "decompressed to %zu bytes, the header says %u", n, raw);
            goto stop;
        }
    }
    c->status = 1;
    c->ordinal = ld->ordinal;
    c->offset = ld->offset;
    c->next = ld->offset + TRACE_CHUNK_HEADER_SIZE + stored;
    c->kind = h[4];
    c->count = trace_get32(h + 24);
    c->raw_len = raw;
    ld->offset = c->next;
    ld->ordinal++;
    return;
stop:
    ld->done = 1;
}

/* ---- the prefetch thread ---- */

static void *prefetch_main(void *arg)
{
    mt_trace_reader *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->ready == 2)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop)
            break;
        chunk *c = &r->slot[(r->head + r->ready) % 2];
        pthread_mutex_unlock(&r->mu);
        load_next(&r->ld, c);
        pthread_mutex_lock(&r->mu);
        r->ready++;
        pthread_cond_broadcast(&r->cv);
        if (c->status <= 0)
            break;
    }
    r->worker_done = 1;
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The next chunk (the previous one is released). */
static chunk *next_chunk(mt_trace_reader *r)
{
    if (!r->prefetch) {
        r->cur = &r->slot[0];
        load_next(&r->ld, r->cur);
        return r->cur;
    }
    pthread_mutex_lock(&r->mu);
    if (r->cur) {
        r->head = (r->head + 1) % 2;
        r->ready--;
        pthread_cond_broadcast(&r->cv);
    }
    while (!r->ready)
        pthread_cond_wait(&r->cv, &r->mu);
    r->cur = &r->slot[r->head];
    pthread_mutex_unlock(&r->mu);
    return r->cur;
}

/* ---- opening ---- */

static int open_fail(char *err, size_t errlen, int rc, const char *name, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "%s: ", name);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < errlen)
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The index, through the trailer, when the file has a good one. */
static void read_index(mt_trace_reader *r)
{
    loader *ld = &r->ld;
    unsigned char t[TRACE_TRAILER_SIZE];
    if (ld->size < TRACE_HEADER_SIZE + TRACE_TRAILER_SIZE ||
        read_at(ld, ld->size - TRACE_TRAILER_SIZE, t, sizeof t) != (ssize_t)sizeof t ||
        memcmp(t, TRACE_TRAILER_MAGIC, 8) || (!ld->no_crc && trace_get32(t + 20) != trace_crc32c(0, t, 20)))
        return;
    uint64_t at = trace_get64(t + 8);
    if (at < TRACE_HEADER_SIZE || at >= ld->size - TRACE_TRAILER_SIZE)
        return;
    loader il = *ld; /* a private loader at the index */
    il.offset = at;
    il.ordinal = trace_get32(t + 16); /* the index follows every chunk it lists */
    il.done = 0;
    il.stored = NULL;
    il.stored_cap = 0;
    il.dctx = NULL;
    chunk c;
    memset(&c, 0, sizeof c);
    load_next(&il, &c);
    if (c.status == 1 && c.kind == TRACE_CHUNK_INDEX && c.next == ld->size - TRACE_TRAILER_SIZE &&
        c.count == trace_get32(t + 16) && c.count <= c.raw_len / 5) { /* an entry takes 5 bytes at least */
        r->index = malloc((c.count ? c.count : 1) * sizeof *r->index);
        char why[160];
        if (r->index && trace_index_parse(c.raw, c.raw_len, c.count, r->info.time_unit_ns, r->index, why,
                                          sizeof why) == 0)
            r->nindex = c.count;
        else {
            free(r->index);
            r->index = NULL;
        }
    }
    free(c.raw);
    free(il.stored);
    ZSTD_freeDCtx(il.dctx);
}

static int open_common(mt_trace_reader *r, unsigned flags, char *err, size_t errlen)
{
    unsigned char h[TRACE_HEADER_SIZE];
    ssize_t got = read_at(&r->ld, 0, h, sizeof h);
    if (got < 0)
        return open_fail(err, errlen, -errno, r->name, "%s", strerror(errno));
    if (got < 8 || memcmp(h, TRACE_MAGIC, 8))
        return open_fail(err, errlen, -EINVAL, r->name, "not a memtrail trace (bad magic at offset 0)");
    if (got < (ssize_t)sizeof h)
        return open_fail(err, errlen, -EINVAL, r->name,
                         "truncated: the header needs %u bytes, the file has %zd", TRACE_HEADER_SIZE, got);
    uint32_t version = trace_get32(h + 8);
    if (version != TRACE_VERSION)
        return open_fail(err, errlen, -EINVAL, r->name,
                         "unknown trace version %u (this memtrail reads version %u)", version, TRACE_VERSION);
    r->ld.no_crc = (flags & MT_TRACE_NO_CRC) != 0;
    if (!r->ld.no_crc && trace_get32(h + 60) != trace_crc32c(0, h, 60))
        return open_fail(err, errlen, -EINVAL, r->name, "header at offset 0: CRC mismatch");
    if (trace_get32(h + 12) != TRACE_HEADER_SIZE)
        return open_fail(err, errlen, -EINVAL, r->name, "header at offset 0: unknown header size %u",
                         trace_get32(h + 12));
    r->info.version = version;
    r->info.start_ns = trace_get64(h + 16);
    r->info.start_realtime_ns = trace_get64(h + 24);
    r->info.pid = trace_get32(h + 32);
    r->info.time_unit_ns = trace_get32(h + 40) ? trace_get32(h + 40) : 1;
    r->info.file_bytes = r->ld.size;
    r->ld.offset = r->consumed = TRACE_HEADER_SIZE;
    read_index(r);
    if (flags & MT_TRACE_PREFETCH) {
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv, NULL);
        if (pthread_create(&r->thread, NULL, prefetch_main, r) == 0)
            r->prefetch = 1;
        else {
            pthread_mutex_destroy(&r->mu);
            pthread_cond_destroy(&r->cv);
        }
    }
    return 0;
}

static mt_trace_reader *reader_new(const char *name)
{
    mt_trace_reader *r = calloc(1, sizeof *r);
    if (r && !(r->name = strdup(name ? name : "<memory>"))) {
        free(r);
        r = NULL;
    }
    if (r) {
        r->ld.fd = -1;
        r->ld.name = r->name;
    }
    return r;
}

int mt_trace_open(const char *path, unsigned flags, mt_trace_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return open_fail(err, errlen, -errno, path, "%s", strerror(errno));
    struct stat st;
    mt_trace_reader *r = fstat(fd, &st) == 0 ? reader_new(path) : NULL;
    if (!r) {
        int e = errno ? errno : ENOMEM;
        close(fd);
        return open_fail(err, errlen, -e, path, "%s", strerror(e));
    }
    r->ld.fd = fd;
    r->ld.size = (uint64_t)st.st_size;
    int rc = open_common(r, flags, err, errlen);
    if (rc < 0) {
        mt_trace_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int mt_trace_open_mem(const void *data, size_t len, const char *name, unsigned flags, mt_trace_reader **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    mt_trace_reader *r = reader_new(name);
    if (!r)
        return open_fail(err, errlen, -ENOMEM, name ? name : "<memory>", "out of memory");
    r->ld.mem = data;
    r->ld.size = len;
    int rc = open_common(r, flags, err, errlen);
    if (rc < 0) {
        mt_trace_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void mt_trace_close(mt_trace_reader *r)
{
    if (!r)
        return;
    if (r->prefetch) {
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
    }
    if (r->ld.fd >= 0)
        close(r->ld.fd);
    free(r->ld.stored);
    ZSTD_freeDCtx(r->ld.dctx);
    free(r->slot[0].raw);
    free(r->slot[1].raw);
    free(r->ts);
    free(r->index);
    trace_defs_free(&r->defs);
    free(r->name);
    free(r);
}

int mt_trace_sniff(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char m[8];
    ssize_t n = read(fd, m, sizeof m);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    return n == 8 && !memcmp(m, TRACE_MAGIC, 8);
}

/* ---- events ---- */

static int fail(mt_trace_reader *r, const char *fmt, ...)
{
    const chunk *c = r->cur;
    int n = snprintf(r->err, sizeof r->err, "%s: chunk %llu at offset %llu: ", r->name,
                     (unsigned long long)(c ? c->ordinal : 0), (unsigned long long)(c ? c->offset : 0));
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof r->err)
        vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
    va_end(ap);
    r->failed = 1;
    return -1;
}

static const char *const stream_names[TRACE_NSTREAMS] = {
    "ops", "xops", "threads", "times", "sizes", "frees", "bits", "stacks", "ids", "categories", "addresses",
};

/* Sets up the decoder on an EVENTS chunk's body. */
static int events_begin(mt_trace_reader *r, const chunk *c)
{
    decoder *d = &r->dec;
    const unsigned char *p = c->raw, *end = c->raw + c->raw_len;
    uint64_t t0, base, ns;
    if (trace_get_varint(&p, end, &t0) < 0 || trace_get_varint(&p, end, &base) < 0 || base > UINT32_MAX ||
        trace_get_varint(&p, end, &ns) < 0 || ns > 64)
        return fail(r, "bad events body prefix");
    uint64_t len[64];
    for (uint64_t i = 0; i < ns; i++)
        if (trace_get_varint(&p, end, &len[i]) < 0)
            return fail(r, "bad stream length %llu", (unsigned long long)i);
    for (uint64_t i = 0; i < ns; i++) {
        if (len[i] > (uint64_t)(end - p))
            return fail(r, "stream %llu (%s) runs %llu bytes past the body", (unsigned long long)i,
                        i < TRACE_NSTREAMS ? stream_names[i] : "unknown",
                        (unsigned long long)(len[i] - (uint64_t)(end - p)));
        if (i < TRACE_NSTREAMS) {
            d->s[i] = p;
            d->e[i] = p + len[i];
        }
        p += len[i];
    }
    for (uint64_t i = ns; i < TRACE_NSTREAMS; i++)
        d->s[i] = d->e[i] = p;
    if (p != end)
        return fail(r, "%zu bytes after the streams", (size_t)(end - p));
    if ((uint64_t)(d->e[TRACE_S_OPS] - d->s[TRACE_S_OPS]) != c->count)
        return fail(r, "%u events in the header, %zu in the ops stream", c->count,
                    (size_t)(d->e[TRACE_S_OPS] - d->s[TRACE_S_OPS]));
    d->left = c->count;
    d->done = 0;
    d->t = (uint64_t)trace_unzigzag(t0);
    d->last_id = (uint32_t)base;
    d->thread = 0;
    d->category = 0;
    d->addr = 0;
    d->bits = 0;
    d->nbits = 0;
    r->ops.prev = 0;
    r->gen++;
    return 0;
}

static int events_end(mt_trace_reader *r)
{
    if (r->dec.nbits >= 8 || (r->dec.bits & ((1ull << r->dec.nbits) - 1)))
        return fail(r, "bits left in stream bits after the last event");
    for (int i = 0; i < TRACE_NSTREAMS; i++)
        if (r->dec.s[i] != r->dec.e[i])
            return fail(r, "%zu bytes left in stream %s after the last event",
                        (size_t)(r->dec.e[i] - r->dec.s[i]), stream_names[i]);
    return 0;
}

/* Hot path varint: one byte inline, else the checked reader. */
#define GETV(stream, var)                                                                                    \
    do {                                                                                                     \
        const unsigned char *p_ = d->s[stream];                                                              \
        if (p_ < d->e[stream] && *p_ < 0x80) {                                                               \
            var = *p_;                                                                                       \
            d->s[stream] = p_ + 1;                                                                           \
        } else if (trace_get_varint(&d->s[stream], d->e[stream], &var) < 0)                                  \
            return fail(r, "event %u: bad varint in stream %s", d->done, stream_names[stream]);              \
    } while (0)

/* k <= 32 bits from the bit stream: 0, or -1 past its end. */
static inline int get_bits(decoder *d, unsigned k, uint64_t *out)
{
    if (d->nbits < k) {
        const unsigned char *p = d->s[TRACE_S_BITS], *e = d->e[TRACE_S_BITS];
        if (e - p >= 8) {
            d->bits |= trace_get64(p) << d->nbits;
            unsigned take = (63 - d->nbits) >> 3;
            d->s[TRACE_S_BITS] = p + take;
            d->nbits += take * 8;
        } else {
            while (d->nbits <= 56 && p < e) {
                d->bits |= (uint64_t)*p++ << d->nbits;
                d->nbits += 8;
            }
            d->s[TRACE_S_BITS] = p;
            if (d->nbits < k)
                return -1;
        }
    }
    *out = d->bits & ((1ull << k) - 1);
    d->bits = k < 64 ? d->bits >> k : 0;
    d->nbits -= k;
    return 0;
}

/* A value coded as a symbol in `stream` and low bits in the bit stream. */
#define GETSYM(stream, var)                                                                                  \
    do {                                                                                                     \
        if (d->s[stream] >= d->e[stream])                                                                    \
            return fail(r, "event %u: stream %s ends early", d->done, stream_names[stream]);                 \
        unsigned k_;                                                                                         \
        uint64_t v_ = trace_sym_base(*d->s[stream]++, &k_), lo_, hi_ = 0;                                    \
        if (k_ > 32) {                                                                                       \
            if (get_bits(d, 32, &lo_) < 0 || get_bits(d, k_ - 32, &hi_) < 0)                                 \
                return fail(r, "event %u: stream bits ends early", d->done);                                 \
            lo_ |= hi_ << 32;                                                                                \
        } else if (get_bits(d, k_, &lo_) < 0)                                                                \
            return fail(r, "event %u: stream bits ends early", d->done);                                     \
        var = v_ + lo_;                                                                                      \
    } while (0)

static int decode(mt_trace_reader *r, mt_trace_event *ev)
{
    decoder *d = &r->dec;
    unsigned b = *d->s[TRACE_S_OPS]++, tc = b >> 5, x = b & 0x1f;
    if (tc == TRACE_TC_ESCAPE) {
        if (x || d->s[TRACE_S_XOPS] >= d->e[TRACE_S_XOPS])
            return fail(r, "event %u: bad escaped op", d->done);
        x = *d->s[TRACE_S_XOPS]++;
    }
    unsigned op = x ^ trace_op_guess(&r->ops, r->gen);
    unsigned type = op & TRACE_OP_TYPE;
    uint64_t v;
    if (type < MT_TRACE_ALLOC || type > MT_TRACE_MUNMAP || (op & ~TRACE_OP_KNOWN))
        return fail(r, "event %u: bad op 0x%02x", d->done, op);
    trace_op_seen(&r->ops, op);
    memset(ev, 0, sizeof *ev);
    ev->type = (uint8_t)type;
    if (op & TRACE_OP_THREAD) {
        GETV(TRACE_S_THREADS, v);
        if (v >= r->defs.nthreads || !r->defs.tid_known[v])
            return fail(r, "event %u: undefined thread index %llu", d->done, (unsigned long long)v);
        d->thread = (uint32_t)v + 1;
    } else if (!d->thread)
        return fail(r, "event %u: no thread", d->done);
    ev->thread = r->defs.tids[d->thread - 1];
    if (op & TRACE_OP_CATEGORY) {
        if (d->s[TRACE_S_CATS] >= d->e[TRACE_S_CATS])
            return fail(r, "event %u: stream categories ends early", d->done);
        d->category = *d->s[TRACE_S_CATS]++;
    }
    ev->category = d->category;
    if (tc < TRACE_TC_STREAM)
        v = tc;
    else
        GETSYM(TRACE_S_TIMES, v);
    d->t += op & TRACE_OP_BACK ? -v : v;
    ev->time_ns = d->t * r->info.time_unit_ns;
    if (type == MT_TRACE_FREE || type == MT_TRACE_REALLOC) {
        GETSYM(TRACE_S_FREES, v);
        if (v > UINT32_MAX)
            return fail(r, "event %u: bad free reference", d->done);
        uint32_t ref = d->last_id - (uint32_t)v;
        if (type == MT_TRACE_FREE)
            ev->id = ref;
        else
            ev->old_id = ref;
    }
    if (type == MT_TRACE_ALLOC || type == MT_TRACE_REALLOC) {
        GETV(TRACE_S_IDS, v);
        if (v > UINT32_MAX)
            return fail(r, "event %u: bad id delta", d->done);
        ev->id = d->last_id + 1 + (uint32_t)trace_unzigzag32((uint32_t)v);
        d->last_id = ev->id;
        GETV(TRACE_S_STACKS, v);
        if (v > UINT32_MAX)
            return fail(r, "event %u: bad stack delta", d->done);
        thread_stacks *ts = &r->ts[d->thread - 1];
        if (ts->gen != r->gen) {
            ts->gen = r->gen;
            ts->last[0] = ts->last[1] = 0;
        }
        uint32_t *last = &ts->last[type == MT_TRACE_REALLOC];
        *last += (uint32_t)trace_unzigzag32((uint32_t)v);
        ev->stack = *last;
        size_slot *sc = &r->size_cache[trace_hash32(ev->stack) % TRACE_SIZE_CACHE];
        if (op & TRACE_OP_SAME_SIZE) {
            if (sc->gen != r->gen || sc->stack != ev->stack)
                return fail(r, "event %u: same size as an unknown one", d->done);
            ev->size = sc->size;
        } else
            GETSYM(TRACE_S_SIZES, ev->size);
        sc->gen = r->gen;
        sc->stack = ev->stack;
        sc->size = ev->size;
    } else if (type != MT_TRACE_FREE) {
        if (op & TRACE_OP_SAME_SIZE)
            return fail(r, "event %u: bad op byte 0x%02x", d->done, op);
        GETSYM(TRACE_S_SIZES, ev->size);
        GETV(TRACE_S_ADDRS, v);
        d->addr += (uint64_t)trace_unzigzag(v);
        ev->address = d->addr;
    }
    d->done++;
    d->left--;
    return 1;
}

/* Makes room for per-thread decoder state of every defined thread. */
static int threads_room(mt_trace_reader *r)
{
    if (r->defs.nthreads <= r->ts_cap)
        return 0;
    size_t cap = r->ts_cap ? r->ts_cap : 64;
    while (cap < r->defs.nthreads)
        cap *= 2;
    thread_stacks *t = realloc(r->ts, cap * sizeof *t);
    if (!t)
        return -1;
    memset(t + r->ts_cap, 0, (cap - r->ts_cap) * sizeof *t);
    r->ts = t;
    r->ts_cap = cap;
    return 0;
}

/* Handles chunks until one has events to give: 1, 0 at the end, -1. */
static int advance(mt_trace_reader *r)
{
    for (;;) {
        if (r->cur && r->cur->status == 1 && r->cur->kind == TRACE_CHUNK_EVENTS && events_end(r) < 0)
            return -1;
        chunk *c = next_chunk(r);
        if (c->status < 0) {
            snprintf(r->err, sizeof r->err, "%s", c->err);
            r->failed = 1;
            return -1;
        }
        if (c->status == 0) {
            r->ended = 1;
            r->consumed = r->info.file_bytes;
            return 0;
        }
        r->chunks_read++;
        r->consumed = c->next;
        char why[256];
        switch (c->kind) {
        case TRACE_CHUNK_DEFS:
            if (trace_defs_parse(&r->defs, c->raw, c->raw_len, c->count, why, sizeof why) < 0)
                return fail(r, "%s", why);
            if (threads_room(r) < 0)
                return fail(r, "out of memory");
            break;
        case TRACE_CHUNK_EVENTS:
            if (events_begin(r, c) < 0)
                return -1;
            if (r->dec.left)
                return 1;
            break;
        case TRACE_CHUNK_END:
            if (trace_end_parse(&r->defs, c->raw, c->raw_len, c->count, why, sizeof why) < 0)
                return fail(r, "%s", why);
            r->complete = 1;
            break;
        default: /* the index (read at open), kinds of later versions */
            break;
        }
    }
}

int mt_trace_next(mt_trace_reader *r, mt_trace_event *ev)
{
    if (r->failed)
        return -1;
    if (r->ended)
        return 0;
    if (!r->cur || r->cur->status != 1 || r->cur->kind != TRACE_CHUNK_EVENTS || !r->dec.left) {
        int rc = advance(r);
        if (rc <= 0)
            return rc;
    }
    return decode(r, ev);
}

const char *mt_trace_error(const mt_trace_reader *r)
{
    return r->failed ? r->err : NULL;
}
int mt_trace_complete(const mt_trace_reader *r)
{
    return r->complete;
}
uint64_t mt_trace_offset(const mt_trace_reader *r)
{
    return r->consumed;
}
uint64_t mt_trace_chunks_read(const mt_trace_reader *r)
{
    return r->chunks_read;
}
uint64_t mt_trace_chunks_total(const mt_trace_reader *r)
{
    return r->nindex ? r->nindex + 1 : 0;
}
size_t mt_trace_index_count(const mt_trace_reader *r)
{
    return r->nindex;
}
const mt_trace_chunk_info *mt_trace_index_get(const mt_trace_reader *r, size_t i)
{
    return i < r->nindex ? &r->index[i] : NULL;
}
const mt_trace_file_info *mt_trace_info(const mt_trace_reader *r)
{
    return &r->info;
}

const mt_trace_stack *mt_trace_stack_get(const mt_trace_reader *r, uint32_t id)
{
    return trace_defs_stack(&r->defs, id);
}
size_t mt_trace_module_count(const mt_trace_reader *r)
{
    return r->defs.nmodules;
}
const mt_trace_module *mt_trace_module_get(const mt_trace_reader *r, size_t i)
{
    return i < r->defs.nmodules ? &r->defs.modules[i] : NULL;
}
const char *mt_trace_category_name(const mt_trace_reader *r, unsigned id)
{
    return id < 256 ? r->defs.categories[id] : NULL;
}
const char *mt_trace_meta(const mt_trace_reader *r, const char *key)
{
    for (size_t i = 0; i < r->defs.nmeta; i++)
        if (!strcmp(r->defs.meta[2 * i], key))
            return r->defs.meta[2 * i + 1];
    return NULL;
}
uint64_t mt_trace_stat(const mt_trace_reader *r, const char *name, int *found)
{
    for (size_t i = 0; i < r->defs.nstats; i++)
        if (!strcmp(r->defs.stat_names[i], name)) {
            if (found)
                *found = 1;
            return r->defs.stat_values[i];
        }
    if (found)
        *found = 0;
    return 0;
}
