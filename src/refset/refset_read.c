/* refset_read.c — reads a reference-set recording (docs/refset-format.md)
 * front to back: each chunk is checked whole (lengths against the file and
 * the limits, CRCs, the zstd frame) before any of its records is given,
 * so a cut or damaged file gives every record of the whole chunks before
 * the damage and then stops with a message naming what and where. Records
 * that decode but make no sense stop reading the same way. Nothing read
 * from the file sizes an allocation beyond the file's own size or the
 * format's limits. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "refset/refset_file.h"
#include "refset/refset_format.h"

typedef struct rs_seen {
    uint64_t offset, t_min, t_max;
    uint32_t count;
    uint8_t kind;
} rs_seen;

enum { RS_READING, RS_DONE, RS_FAILED };

struct mt_rs_reader {
    int fd;                   /* -1: reading from mem */
    const unsigned char *mem; /* the caller's bytes (open_mem) */
    uint64_t size;
    unsigned flags;
    mt_rs_header h;
    int state;
    int ended;             /* the END chunk was read */
    uint64_t off;          /* the next chunk's offset */
    uint64_t chunk_off;    /* the current chunk's */
    uint64_t nchunks;      /* chunks read whole */
    unsigned char *stored; /* a payload read from fd */
    size_t stored_cap;
    unsigned char *raw; /* a decompressed body */
    size_t raw_cap;
    const unsigned char *body; /* the current EVENTS chunk's body */
    size_t body_len, pos;
    int in_events;
    uint32_t left, recno; /* records left in the chunk; the next one's number */
    uint64_t t_min, t_max;
    rs_coder c;
    rs_seen *seen;
    size_t nseen, seen_cap;
    char **stat_names;
    uint64_t *stat_values;
    int nstats;
    ZSTD_DCtx *dctx;
    char err[320];
    char why[160];
    char name[TRACE_MAX_STRING + 1], value[TRACE_MAX_STRING + 1];
    uint64_t frames[TRACE_MAX_FRAMES];
};

static int fail(mt_rs_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(mt_rs_reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->state = RS_FAILED;
    return -1;
}

/* Reads n bytes at off into buf: 0, or -1 (message set) on an I/O error.
 * The caller has checked off + n against the size. */
static int read_at(mt_rs_reader *r, uint64_t off, void *buf, size_t n)
{
    if (r->mem) {
        memcpy(buf, r->mem + off, n);
        return 0;
    }
    unsigned char *p = buf;
    while (n) {
        ssize_t k = pread(r->fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(r, "read error at offset %" PRIu64 ": %s", off,
                        k < 0 ? strerror(errno) : "end of file");
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

static int grow(unsigned char **p, size_t *cap, size_t n)
{
    if (*cap >= n)
        return 0;
    unsigned char *q = realloc(*p, n);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* ---- the header ---- */

static void magic_text(const unsigned char *p, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k,
                              p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' ? "%c" : "\\x%02x", p[i]);
    out[k] = 0;
}

static int read_header(mt_rs_reader *r)
{
    unsigned char hd[RS_HEADER_SIZE];
    size_t n = r->size < RS_HEADER_SIZE ? (size_t)r->size : RS_HEADER_SIZE;
    if (!n)
        return fail(r, "empty file (the recorder wrote nothing: was it killed at once?)");
    if (read_at(r, 0, hd, n) < 0)
        return -1;
    size_t nm = n < 8 ? n : 8;
    if (memcmp(hd, RS_MAGIC, nm)) {
        char text[48];
        magic_text(hd, nm, text, sizeof text);
        if (!memcmp(hd, TRACE_MAGIC, nm) && nm == 8)
            return fail(r,
                        "not a memtrail reference-set recording (magic \"%s\": a memtrail trace; read it "
                        "with memtrail report or analyze)",
                        text);
        return fail(r, "not a memtrail reference-set recording (magic \"%s\", expected \"%s\")", text,
                    RS_MAGIC);
    }
    if (n < 12)
        return fail(r, "truncated header: %zu of its %u bytes (the recorder was killed?)", n, RS_HEADER_SIZE);
    uint32_t version = trace_get32(hd + 8);
    if (version != RS_VERSION)
        return fail(r, "unsupported version %" PRIu32 " (this memtrail reads version %u)", version,
                    RS_VERSION);
    if (n < RS_HEADER_SIZE)
        return fail(r, "truncated header: %zu of its %u bytes (the recorder was killed?)", n, RS_HEADER_SIZE);
    if (trace_get32(hd + 12) != RS_HEADER_SIZE)
        return fail(r, "bad header: header size %" PRIu32 ", expected %u", trace_get32(hd + 12),
                    RS_HEADER_SIZE);
    if (!(r->flags & RS_READ_NO_CRC) && trace_crc32c(0, hd, 60) != trace_get32(hd + 60))
        return fail(r, "bad header CRC at offset 0 (the file is damaged)");
    r->h.start_ns = trace_get64(hd + 16);
    r->h.start_realtime_ns = trace_get64(hd + 24);
    r->h.page_size = trace_get32(hd + 32);
    r->h.flags = trace_get32(hd + 36);
    uint32_t ps = r->h.page_size;
    if (!ps || (ps & (ps - 1)) || ps > (1u << 30))
        return fail(r, "bad header: page size %" PRIu32, ps);
    r->off = RS_HEADER_SIZE;
    return 0;
}

/* ---- chunks ---- */

static int seen_add(mt_rs_reader *r, unsigned kind, uint32_t count, uint64_t t_min, uint64_t t_max)
{
    if (r->nseen == r->seen_cap) {
        size_t cap = r->seen_cap ? 2 * r->seen_cap : 64;
        rs_seen *s = realloc(r->seen, cap * sizeof *s);
        if (!s)
            return fail(r, "out of memory");
        r->seen = s;
        r->seen_cap = cap;
    }
    r->seen[r->nseen++] = (rs_seen){r->chunk_off, t_min, t_max, count, (uint8_t)kind};
    return 0;
}

/* Loads the chunk at r->off into body/body_len: its kind, 0 at the very
 * end of the file, -1 (message set) when it is cut or damaged. */
static int load_chunk(mt_rs_reader *r, uint32_t *count)
{
    uint64_t off = r->off, n = r->nchunks, left = r->size - off;
    if (!left)
        return 0;
    unsigned char h[TRACE_CHUNK_HEADER_SIZE];
    if (left < TRACE_CHUNK_HEADER_SIZE)
        return fail(r,
                    "truncated chunk %" PRIu64 " at offset %" PRIu64 ": %" PRIu64
                    " of its %u header bytes (the recorder was killed?)",
                    n, off, left, TRACE_CHUNK_HEADER_SIZE);
    if (read_at(r, off, h, sizeof h) < 0)
        return -1;
    if (memcmp(h, TRACE_CHUNK_MAGIC, 4))
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": no chunk magic (the file is damaged)", n,
                    off);
    int crc = !(r->flags & RS_READ_NO_CRC);
    if (crc && trace_crc32c(0, h, 36) != trace_get32(h + 36))
        return fail(r, "bad CRC in chunk %" PRIu64 " header at offset %" PRIu64 " (the file is damaged)", n,
                    off);
    unsigned kind = h[4], codec = h[5];
    uint64_t seq = trace_get64(h + 8);
    uint32_t stored = trace_get32(h + 16), raw = trace_get32(h + 20);
    *count = trace_get32(h + 24);
    if (h[6] != TRACE_CHUNK_HEADER_SIZE || (codec != TRACE_CODEC_NONE && codec != TRACE_CODEC_ZSTD))
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": header size %u, codec %u", n, off, h[6],
                    codec);
    if (seq != n)
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": sequence number %" PRIu64, n, off, seq);
    if (stored > TRACE_MAX_STORED || raw > TRACE_MAX_RAW || (codec == TRACE_CODEC_NONE && stored != raw))
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": stored %" PRIu32 " bytes, raw %" PRIu32,
                    n, off, stored, raw);
    if (stored > left - TRACE_CHUNK_HEADER_SIZE)
        return fail(r,
                    "truncated chunk %" PRIu64 " at offset %" PRIu64 ": %" PRIu64 " of its %" PRIu32
                    " payload bytes (the recorder was killed?)",
                    n, off, left - TRACE_CHUNK_HEADER_SIZE, stored);
    const unsigned char *payload;
    if (r->mem) {
        payload = r->mem + off + TRACE_CHUNK_HEADER_SIZE;
    } else {
        if (grow(&r->stored, &r->stored_cap, stored ? stored : 1) < 0)
            return fail(r, "out of memory");
        if (read_at(r, off + TRACE_CHUNK_HEADER_SIZE, r->stored, stored) < 0)
            return -1;
        payload = r->stored;
    }
    if (crc && trace_crc32c(0, payload, stored) != trace_get32(h + 28))
        return fail(r, "bad CRC in chunk %" PRIu64 " at offset %" PRIu64 " (the file is damaged)", n, off);
    if (codec == TRACE_CODEC_ZSTD) {
        if (ZSTD_getFrameContentSize(payload, stored) != raw ||
            ZSTD_findFrameCompressedSize(payload, stored) != stored)
            return fail(r,
                        "bad chunk %" PRIu64 " at offset %" PRIu64 ": its zstd frame does not hold %" PRIu32
                        " bytes",
                        n, off, raw);
        if (grow(&r->raw, &r->raw_cap, raw ? raw : 1) < 0 || (!r->dctx && !(r->dctx = ZSTD_createDCtx())))
            return fail(r, "out of memory");
        size_t k = ZSTD_decompressDCtx(r->dctx, r->raw, raw, payload, stored);
        if (ZSTD_isError(k) || k != raw)
            return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": zstd: %s", n, off,
                        ZSTD_isError(k) ? ZSTD_getErrorName(k) : "short frame");
        r->body = r->raw;
    } else {
        r->body = payload;
    }
    r->body_len = raw;
    r->pos = 0;
    r->chunk_off = off;
    r->off = off + TRACE_CHUNK_HEADER_SIZE + stored;
    r->nchunks++;
    return (int)kind;
}

static int get_varint(mt_rs_reader *r, uint64_t *v)
{
    const unsigned char *p = r->body + r->pos;
    if (trace_get_varint(&p, r->body + r->body_len, v) < 0)
        return -1;
    r->pos = (size_t)(p - r->body);
    return 0;
}

static int get_u32(mt_rs_reader *r, uint32_t *v)
{
    uint64_t x;
    if (get_varint(r, &x) < 0 || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

static int get_byte(mt_rs_reader *r, uint8_t *v)
{
    if (r->pos >= r->body_len)
        return -1;
    *v = r->body[r->pos++];
    return 0;
}

/* The EVENTS prefix: the chunk's first time and its time range. */
static int start_events(mt_rs_reader *r, uint32_t count)
{
    uint64_t first, back, range;
    if (r->ended)
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": records after the END chunk",
                    r->nchunks - 1, r->chunk_off);
    if (get_varint(r, &first) < 0 || get_varint(r, &back) < 0 || get_varint(r, &range) < 0 || back > first ||
        range > UINT64_MAX - (first - back) || first - back + range < first)
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": bad time range", r->nchunks - 1,
                    r->chunk_off);
    if (count > r->body_len - r->pos)
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": %" PRIu32 " records in %zu bytes",
                    r->nchunks - 1, r->chunk_off, count, r->body_len - r->pos);
    r->t_min = first - back;
    r->t_max = r->t_min + range;
    rs_coder_reset(&r->c, first);
    r->in_events = 1;
    r->left = count;
    r->recno = 0;
    return seen_add(r, RS_CHUNK_EVENTS, count, r->t_min, r->t_max);
}

/* ---- records ---- */

/* A string: NULL, or the bytes copied and NUL-terminated into buf. */
static int get_string(mt_rs_reader *r, char *buf, const char **out, uint32_t *len)
{
    uint64_t n;
    if (get_varint(r, &n) < 0)
        return -1;
    if (!n) {
        *out = NULL;
        if (len)
            *len = 0;
        return 0;
    }
    n--;
    if (n > TRACE_MAX_STRING || n > r->body_len - r->pos) {
        snprintf(r->why, sizeof r->why, "a string of %" PRIu64 " bytes", n);
        return -1;
    }
    memcpy(buf, r->body + r->pos, n);
    buf[n] = 0;
    r->pos += n;
    *out = buf;
    if (len)
        *len = (uint32_t)n;
    return 0;
}

static int get_time(mt_rs_reader *r, mt_rs_event *ev)
{
    uint64_t z;
    if (get_varint(r, &z) < 0)
        return -1;
    uint64_t t = r->c.time + (uint64_t)trace_unzigzag(z);
    if (t < r->t_min || t > r->t_max) {
        snprintf(r->why, sizeof r->why,
                 "time %" PRIu64 " ns outside the chunk's range [%" PRIu64 ", %" PRIu64 "]", t, r->t_min,
                 r->t_max);
        return -1;
    }
    ev->time_ns = r->c.time = t;
    return 0;
}

static int get_npages(mt_rs_reader *r, mt_rs_event *ev, int one)
{
    if (one) {
        ev->npages = 1;
        return 0;
    }
    if (get_varint(r, &ev->npages) < 0)
        return -1;
    if (!ev->npages || ev->npages > RS_MAX_NPAGES) {
        snprintf(r->why, sizeof r->why, "npages %" PRIu64, ev->npages);
        return -1;
    }
    return 0;
}

/* Pages [addr, addr + npages pages) must lie below 2^64. */
static int range_wraps(mt_rs_reader *r, const mt_rs_event *ev)
{
    if (ev->npages > (UINT64_MAX - ev->addr) / r->h.page_size) {
        snprintf(r->why, sizeof r->why, "%" PRIu64 " pages from %#" PRIx64 " run past the address space",
                 ev->npages, ev->addr);
        return -1;
    }
    return 0;
}

static int get_category(mt_rs_reader *r, uint8_t *cat)
{
    if (get_byte(r, cat) < 0)
        return -1;
    if (*cat >= RS_NCATEGORIES) {
        snprintf(r->why, sizeof r->why, "category %u", *cat);
        return -1;
    }
    return 0;
}

static int get_ref(mt_rs_reader *r, mt_rs_event *ev, unsigned type)
{
    rs_coder *c = &r->c;
    uint64_t z;
    uint32_t ztid;
    uint8_t attrs = 0;
    if (get_time(r, ev) < 0)
        return -1;
    ev->pid = c->pid;
    ev->tid = c->tid;
    if (!(type & RS_REF_SAME_THREAD)) {
        if (get_u32(r, &ev->pid) < 0 || get_u32(r, &ztid) < 0)
            return -1;
        ev->tid = ev->pid + (uint32_t)trace_unzigzag32(ztid);
    }
    ev->addr = rs_addr_guess(c, ev->pid, ev->tid);
    if (!(type & RS_REF_NEXT_ADDR)) {
        if (get_varint(r, &z) < 0)
            return -1;
        ev->addr += (uint64_t)trace_unzigzag(z);
    }
    if (get_npages(r, ev, type & RS_REF_ONE_PAGE) < 0)
        return -1;
    ev->category = c->category;
    ev->flags = c->flags;
    ev->stack = c->stack;
    ev->alloc_stack = c->alloc_stack;
    ev->ino = c->ino;
    ev->dev = c->dev;
    if (!(type & RS_REF_SAME_ATTRS)) {
        if (get_byte(r, &attrs) < 0)
            return -1;
        if (attrs & ~RS_ATTR_KNOWN) {
            snprintf(r->why, sizeof r->why, "unknown attribute bits 0x%02x", attrs);
            return -1;
        }
        if (((attrs & RS_ATTR_CATEGORY) && get_category(r, &ev->category) < 0) ||
            ((attrs & RS_ATTR_FLAGS) && get_byte(r, &ev->flags) < 0) ||
            ((attrs & RS_ATTR_STACK) && get_u32(r, &ev->stack) < 0) ||
            ((attrs & RS_ATTR_ALLOC) && get_u32(r, &ev->alloc_stack) < 0) ||
            ((attrs & RS_ATTR_INO) && get_varint(r, &ev->ino) < 0) ||
            ((attrs & RS_ATTR_DEV) && get_u32(r, &ev->dev) < 0))
            return -1;
    }
    if (attrs & RS_ATTR_PGOFF) {
        if (get_varint(r, &ev->pgoff) < 0)
            return -1;
    } else if (ev->ino) {
        if (get_varint(r, &z) < 0)
            return -1;
        ev->pgoff = rs_pgoff_guess(c, ev->addr) + (uint64_t)trace_unzigzag(z);
    }
    if (get_varint(r, &z) < 0)
        return -1;
    ev->pfn = c->pfn_next + (uint64_t)trace_unzigzag(z);
    if (ev->npages > RS_MAX_REF_NPAGES) {
        snprintf(r->why, sizeof r->why, "a REF of %" PRIu64 " pages (at most %llu)", ev->npages,
                 (unsigned long long)RS_MAX_REF_NPAGES);
        return -1;
    }
    if (range_wraps(r, ev) < 0)
        return -1;
    rs_coder_ref(c, ev, r->h.page_size);
    return 0;
}

static int get_release(mt_rs_reader *r, mt_rs_event *ev, unsigned type)
{
    rs_coder *c = &r->c;
    uint64_t z;
    if (get_time(r, ev) < 0)
        return -1;
    ev->pid = c->pid;
    if (!(type & RS_REL_SAME_PID) && get_u32(r, &ev->pid) < 0)
        return -1;
    ev->addr = c->addr_end;
    if (!(type & RS_REL_NEXT_ADDR)) {
        if (get_varint(r, &z) < 0)
            return -1;
        ev->addr += (uint64_t)trace_unzigzag(z);
    }
    if (get_npages(r, ev, type & RS_REL_ONE_PAGE) < 0 || get_byte(r, &ev->reason) < 0 ||
        range_wraps(r, ev) < 0)
        return -1;
    rs_coder_release(c, ev, r->h.page_size);
    return 0;
}

static int get_stack(mt_rs_reader *r, mt_rs_event *ev)
{
    if (get_u32(r, &ev->stack) < 0 || get_u32(r, &ev->nframes) < 0)
        return -1;
    if (ev->nframes > TRACE_MAX_FRAMES) {
        snprintf(r->why, sizeof r->why, "%" PRIu32 " frames (at most %u)", ev->nframes, TRACE_MAX_FRAMES);
        return -1;
    }
    uint64_t prev = 0, z;
    for (uint32_t i = 0; i < ev->nframes; i++) {
        if (get_varint(r, &z) < 0)
            return -1;
        prev = r->frames[i] = prev + (uint64_t)trace_unzigzag(z);
    }
    ev->frames = r->frames;
    return 0;
}

/* Decodes one record of the current chunk: 0, or -1 with r->why saying
 * why (empty: it runs past the chunk's end). */
static int get_record(mt_rs_reader *r, mt_rs_event *ev)
{
    uint8_t b;
    memset(ev, 0, sizeof *ev);
    if (get_byte(r, &b) < 0)
        return -1;
    unsigned type = b & RS_TYPE_MASK, bits = b & ~RS_TYPE_MASK;
    ev->type = (uint8_t)type;
    if (type == RS_EV_REF)
        return get_ref(r, ev, b);
    if (type == RS_EV_RELEASE) {
        if (bits & 0x80)
            goto bad_type;
        return get_release(r, ev, b);
    }
    if (bits || type < RS_EV_PROCESS || type > RS_EV_LOST)
        goto bad_type;
    if (rs_type_timed(type) && get_time(r, ev) < 0)
        return -1;
    switch (type) {
    case RS_EV_PROCESS:
        return get_u32(r, &ev->pid) < 0 || get_u32(r, &ev->ppid) < 0 || get_byte(r, &ev->reason) < 0 ||
                       get_string(r, r->name, &ev->name, &ev->name_len) < 0
                   ? -1
                   : 0;
    case RS_EV_EXIT: return get_u32(r, &ev->pid);
    case RS_EV_MAP:
        return get_u32(r, &ev->pid) < 0 || get_varint(r, &ev->addr) < 0 || get_varint(r, &ev->len) < 0 ||
                       get_varint(r, &ev->pgoff) < 0 || get_u32(r, &ev->dev) < 0 ||
                       get_varint(r, &ev->ino) < 0 || get_u32(r, &ev->prot) < 0 ||
                       get_u32(r, &ev->map_flags) < 0 || get_category(r, &ev->category) < 0 ||
                       get_u32(r, &ev->stack) < 0 || get_string(r, r->name, &ev->name, &ev->name_len) < 0
                   ? -1
                   : 0;
    case RS_EV_STACK: return get_stack(r, ev);
    case RS_EV_MODULE:
        return get_u32(r, &ev->pid) < 0 || get_varint(r, &ev->addr) < 0 || get_varint(r, &ev->len) < 0 ||
                       get_varint(r, &ev->pgoff) < 0 ||
                       get_string(r, r->name, &ev->name, &ev->name_len) < 0 ||
                       get_string(r, r->value, &ev->value, NULL) < 0
                   ? -1
                   : 0;
    case RS_EV_META:
        return get_string(r, r->name, &ev->name, &ev->name_len) < 0 ||
                       get_string(r, r->value, &ev->value, NULL) < 0
                   ? -1
                   : 0;
    case RS_EV_LOST: return get_u32(r, &ev->pid) < 0 || get_varint(r, &ev->count) < 0 ? -1 : 0;
    }
bad_type:
    snprintf(r->why, sizeof r->why, "unknown record type byte 0x%02x", b);
    return -1;
}

/* ---- END, INDEX, trailer ---- */

static int read_end(mt_rs_reader *r, uint32_t count)
{
    uint64_t n, chunk = r->nchunks - 1;
    if (r->ended)
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": a second END chunk", chunk,
                    r->chunk_off);
    if (get_varint(r, &n) < 0 || n > RS_MAX_STATS || n != count || n > r->body_len)
        return fail(r, "bad END chunk %" PRIu64 " at offset %" PRIu64 ": bad statistics count", chunk,
                    r->chunk_off);
    r->stat_names = calloc(n ? n : 1, sizeof *r->stat_names);
    r->stat_values = calloc(n ? n : 1, sizeof *r->stat_values);
    if (!r->stat_names || !r->stat_values)
        return fail(r, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        if (get_varint(r, &len) < 0 || len > TRACE_MAX_STRING || len > r->body_len - r->pos)
            return fail(r, "bad END chunk %" PRIu64 " at offset %" PRIu64 ": statistic %" PRIu64 "'s name",
                        chunk, r->chunk_off, i);
        if (!(r->stat_names[i] = strndup((const char *)r->body + r->pos, len)))
            return fail(r, "out of memory");
        r->nstats = (int)i + 1;
        r->pos += len;
        if (get_varint(r, &r->stat_values[i]) < 0)
            return fail(r, "bad END chunk %" PRIu64 " at offset %" PRIu64 ": statistic %" PRIu64 "'s value",
                        chunk, r->chunk_off, i);
    }
    if (r->pos != r->body_len)
        return fail(r, "bad END chunk %" PRIu64 " at offset %" PRIu64 ": %zu bytes after the statistics",
                    chunk, r->chunk_off, r->body_len - r->pos);
    r->ended = 1;
    return seen_add(r, RS_CHUNK_END, count, 0, 0);
}

/* The index must list every chunk before it as read, and the trailer
 * must follow it and end the file. */
static int read_index(mt_rs_reader *r, uint32_t count)
{
    uint64_t chunk = r->nchunks - 1, at = r->chunk_off;
    if (!r->ended)
        return fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": an index before the END chunk", chunk,
                    at);
    if (count != r->nseen)
        return fail(r,
                    "bad index (chunk %" PRIu64 " at offset %" PRIu64 "): %" PRIu32 " entries for %zu chunks",
                    chunk, at, count, r->nseen);
    for (size_t i = 0; i < r->nseen; i++) {
        const rs_seen *s = &r->seen[i];
        uint64_t off, cnt, t0, span;
        uint8_t kind;
        if (get_varint(r, &off) < 0 || get_byte(r, &kind) < 0 || get_varint(r, &cnt) < 0 ||
            get_varint(r, &t0) < 0 || get_varint(r, &span) < 0 || off != s->offset || kind != s->kind ||
            cnt != s->count || t0 != s->t_min || span != s->t_max - s->t_min)
            return fail(
                r, "bad index (chunk %" PRIu64 " at offset %" PRIu64 "): entry %zu does not match chunk %zu",
                chunk, at, i, i);
    }
    if (r->pos != r->body_len)
        return fail(r, "bad index (chunk %" PRIu64 " at offset %" PRIu64 "): %zu bytes after its entries",
                    chunk, at, r->body_len - r->pos);
    uint64_t left = r->size - r->off;
    if (left < RS_TRAILER_SIZE)
        return fail(r, "truncated trailer at offset %" PRIu64 ": %" PRIu64 " of its %u bytes", r->off, left,
                    RS_TRAILER_SIZE);
    unsigned char t[RS_TRAILER_SIZE];
    if (read_at(r, r->off, t, sizeof t) < 0)
        return -1;
    if (memcmp(t, RS_TRAILER_MAGIC, 8) || trace_get64(t + 8) != at || trace_get32(t + 16) != count ||
        (!(r->flags & RS_READ_NO_CRC) && trace_crc32c(0, t, 20) != trace_get32(t + 20)))
        return fail(r, "bad trailer at offset %" PRIu64 " (the file is damaged)", r->off);
    if (left > RS_TRAILER_SIZE)
        return fail(r, "%" PRIu64 " unexpected bytes after the trailer at offset %" PRIu64,
                    left - RS_TRAILER_SIZE, r->off + RS_TRAILER_SIZE);
    r->off += RS_TRAILER_SIZE;
    r->state = RS_DONE;
    return 0;
}

/* ---- the interface ---- */

int mt_rs_read(mt_rs_reader *r, mt_rs_event *ev)
{
    for (;;) {
        if (r->state == RS_FAILED)
            return -1;
        if (r->state == RS_DONE)
            return 0;
        if (r->in_events && r->left) {
            size_t at = r->pos;
            r->why[0] = 0;
            if (get_record(r, ev) < 0)
                return fail(r,
                            "bad record %" PRIu32 " of chunk %" PRIu64 " (chunk at offset %" PRIu64
                            ", byte %zu of its body): %s",
                            r->recno, r->nchunks - 1, r->chunk_off, at,
                            r->why[0] ? r->why : "it runs past the end of the chunk");
            r->left--;
            r->recno++;
            return 1;
        }
        if (r->in_events) {
            r->in_events = 0;
            if (r->pos != r->body_len)
                return fail(
                    r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": %zu bytes after its %" PRIu32 " records",
                    r->nchunks - 1, r->chunk_off, r->body_len - r->pos, r->recno);
        }
        uint32_t count = 0;
        int kind = load_chunk(r, &count);
        if (kind < 0)
            return -1;
        if (kind == 0)
            return r->ended ? fail(r,
                                   "truncated after the END chunk at offset %" PRIu64
                                   ": no index (the recorder was killed while finishing?)",
                                   r->off)
                            : fail(r,
                                   "truncated after chunk %" PRIu64 " at offset %" PRIu64
                                   ": no END chunk (the recorder was killed?)",
                                   r->nchunks ? r->nchunks - 1 : 0, r->off);
        int rc = 0;
        if (kind == RS_CHUNK_EVENTS)
            rc = start_events(r, count);
        else if (kind == RS_CHUNK_END)
            rc = read_end(r, count);
        else if (kind == RS_CHUNK_INDEX)
            rc = read_index(r, count);
        else if (r->ended)
            rc = fail(r, "bad chunk %" PRIu64 " at offset %" PRIu64 ": kind %d after the END chunk",
                      r->nchunks - 1, r->chunk_off, kind);
        else
            rc = seen_add(r, (unsigned)kind, count, 0, 0); /* a kind of a later version: skipped */
        if (rc < 0)
            return -1;
    }
}

static int reader_new(mt_rs_reader **out, char *err, size_t errlen, mt_rs_reader *r)
{
    if (read_header(r) < 0) {
        if (err && errlen)
            snprintf(err, errlen, "%s", r->err);
        mt_rs_reader_close(r);
        *out = NULL;
        return -EINVAL;
    }
    *out = r;
    return 0;
}

int mt_rs_reader_open_mem(const void *data, size_t size, unsigned flags, mt_rs_reader **out, char *err,
                          size_t errlen)
{
    mt_rs_reader *r = calloc(1, sizeof *r);
    if (!r) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->fd = -1;
    r->mem = size ? data : (const unsigned char *)"";
    r->size = size;
    r->flags = flags;
    return reader_new(out, err, errlen, r);
}

int mt_rs_reader_open(const char *path, mt_rs_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int e = fd < 0 || fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (e) {
        if (err && errlen)
            snprintf(err, errlen, "%s", e == EINVAL ? "not a regular file" : strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    mt_rs_reader *r = calloc(1, sizeof *r);
    if (!r) {
        close(fd);
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->fd = fd;
    r->size = (uint64_t)st.st_size;
    return reader_new(out, err, errlen, r);
}

const mt_rs_header *mt_rs_reader_header(const mt_rs_reader *r)
{
    return &r->h;
}

const char *mt_rs_reader_error(const mt_rs_reader *r)
{
    return r->state == RS_FAILED ? r->err : NULL;
}

int mt_rs_reader_complete(const mt_rs_reader *r)
{
    return r->state == RS_DONE;
}

int mt_rs_reader_stats(const mt_rs_reader *r, const char *const **names, const uint64_t **values)
{
    *names = (const char *const *)r->stat_names;
    *values = r->stat_values;
    return r->nstats;
}

uint64_t mt_rs_reader_chunks(const mt_rs_reader *r)
{
    return r->nchunks;
}

uint64_t mt_rs_reader_offset(const mt_rs_reader *r)
{
    return r->off;
}

void mt_rs_reader_close(mt_rs_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    for (int i = 0; i < r->nstats; i++)
        free(r->stat_names[i]);
    free(r->stat_names);
    free(r->stat_values);
    free(r->stored);
    free(r->raw);
    free(r->seen);
    ZSTD_freeDCtx(r->dctx);
    free(r);
}
