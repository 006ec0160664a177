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

/* Up to n bytes of a stream at its current position: the bytes taken
 * before first, then the descriptor's. */
static ssize_t stream_read(loader *ld, void *buf, size_t n)
{
    if (ld->pos < ld->npre) {
        size_t k = ld->npre - ld->pos < n ? (size_t)(ld->npre - ld->pos) : n;
        memcpy(buf, ld->pre + ld->pos, k);
        ld->pos += k;
        return (ssize_t)k;
    }
    for (;;) {
        ssize_t k = read(ld->fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k > 0)
            ld->pos += (uint64_t)k;
        return k;
    }
}

/* A stream read at off: the loader only goes forward, so off is where the
 * stream stands (or ahead of it: skipped). */
static ssize_t stream_read_at(loader *ld, uint64_t off, void *buf, size_t n)
{
    if (off < ld->pos) {
        errno = ESPIPE;
        return -1;
    }
    while (ld->pos < off) {
        char skip[4096];
        ssize_t k =
            stream_read(ld, skip, off - ld->pos < sizeof skip ? (size_t)(off - ld->pos) : sizeof skip);
        if (k <= 0)
            return k;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = stream_read(ld, (char *)buf + got, n - got);
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* Up to n bytes at off; the count read, or -1 on an I/O error. */
static ssize_t read_at(loader *ld, uint64_t off, void *buf, size_t n)
{
    if (ld->stream)
        return stream_read_at(ld, off, buf, n);
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

/* The trailer ends the file: anything after it (a second file appended,
 * a copy gone wrong) is an error, not silently left unread. `got`: the
 * bytes read at the trailer, up to a chunk header's 40 (a stream's length
 * is not known: they tell). */
static void after_trailer(loader *ld, chunk *c, ssize_t got)
{
    uint64_t end = ld->offset + TRACE_TRAILER_SIZE;
    if (got <= (ssize_t)TRACE_TRAILER_SIZE)
        return;
    if (ld->stream)
        chunk_fail(c, ld, "bytes after the trailer, from offset %llu", (unsigned long long)end);
    else
        chunk_fail(c, ld, "%llu byte%s after the trailer, from offset %llu",
                   (unsigned long long)(ld->size - end), ld->size - end == 1 ? "" : "s",
                   (unsigned long long)end);
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
    if (got >= 3 && !memcmp(h, TRACE_TRAILER_MAGIC, got < 8 ? (size_t)got : 8)) { /* "MTT", not "MTC" */
        if (got < (ssize_t)TRACE_TRAILER_SIZE)
            chunk_fail(c, ld, "truncated trailer (%zd of %u bytes)", got, TRACE_TRAILER_SIZE);
        else if (!ld->no_crc && trace_get32(h + 20) != trace_crc32c(0, h, 20))
            chunk_fail(c, ld, "trailer CRC mismatch");
        else
            after_trailer(ld, c, got);
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
    if (got >= 0 && got < (ssize_t)stored && ld->stream) {
        chunk_fail(c, ld, "truncated: the payload needs %u bytes, the input ends after %zd", stored, got);
        goto stop;
    }
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

void trace_prefetch_start(mt_trace_reader *r)
{
    r->head = r->ready = 0;
    r->stop = r->worker_done = 0;
    r->cur = NULL;
    r->prefetch = pthread_create(&r->thread, NULL, prefetch_main, r) == 0;
}

void trace_prefetch_stop(mt_trace_reader *r)
{
    if (!r->prefetch)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    r->prefetch = 0;
    r->cur = NULL;
}

/* Loads the chunk at offset (the ordinal-th of the file) into c, and
 * reads on from the next one. */
void trace_load_at(mt_trace_reader *r, uint64_t offset, uint64_t ordinal, chunk *c)
{
    r->ld.offset = offset;
    r->ld.ordinal = ordinal;
    r->ld.done = 0;
    if (c)
        load_next(&r->ld, c);
}

/* The next chunk (the previous one is released). */
chunk *trace_next_chunk(mt_trace_reader *r)
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
    if (ld->stream)
        return; /* read once, front to back: no index to seek with */
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
    /* An entry takes 5 bytes at least, and lists a chunk before the index,
     * which takes 40 at least: a count from the file sizes nothing bigger
     * than the file. */
    if (c.status == 1 && c.kind == TRACE_CHUNK_INDEX && c.next == ld->size - TRACE_TRAILER_SIZE &&
        c.count == trace_get32(t + 16) && c.count <= c.raw_len / 5 &&
        c.count <= (at - TRACE_HEADER_SIZE) / TRACE_CHUNK_HEADER_SIZE) {
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
    if (version != TRACE_VERSION && version != 1)
        return open_fail(err, errlen, -EINVAL, r->name,
                         "unknown trace version %u (this memtrail reads versions 1 and %u)", version,
                         TRACE_VERSION);
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
    r->want_prefetch = (flags & MT_TRACE_PREFETCH) != 0;
    if (r->want_prefetch)
        trace_prefetch_start(r);
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
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv, NULL);
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

int mt_trace_open_fd(int fd, const void *head, size_t nhead, const char *name, unsigned flags,
                     mt_trace_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    struct stat st;
    mt_trace_reader *r = nhead <= TRACE_HEADER_SIZE ? reader_new(name) : NULL;
    if (!r) {
        close(fd);
        return open_fail(err, errlen, -ENOMEM, name ? name : "<fd>", "out of memory");
    }
    r->ld.fd = fd;
    if (flags & MT_TRACE_STREAM) {
        r->ld.stream = 1;
        r->ld.size = UINT64_MAX; /* unknown: the stream's end says */
        if (nhead)
            memcpy(r->ld.pre, head, nhead);
        r->ld.npre = nhead;
    } else if (fstat(fd, &st) == 0) {
        r->ld.size = (uint64_t)st.st_size;
    } else {
        int e = errno;
        mt_trace_close(r);
        return open_fail(err, errlen, -e, name ? name : "<fd>", "%s", strerror(e));
    }
    int rc = open_common(r, flags, err, errlen);
    if (rc < 0) {
        mt_trace_close(r);
        return rc;
    }
    if (r->ld.stream)
        r->info.file_bytes = 0;
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
    trace_prefetch_stop(r);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
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
    return mt_trace_sniff_bytes(m, (size_t)n);
}

int mt_trace_sniff_bytes(const void *head, size_t n)
{
    return n >= 8 && !memcmp(head, TRACE_MAGIC, 8);
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
