/* test_damage.c — the trace reader on bad input: a file cut at every byte
 * of a small multi-chunk trace (and at random bytes of a bigger one), a
 * byte flipped at each offset, a wrong magic, an unknown version, a disk
 * that fills while writing, bytes after the trailer. Never a crash; exactly the events of the whole
 * chunks before the damage come back, and the error names the chunk and
 * its offset. */
#include "unit.h"
#include "trace/trace_gen.h"
#include "trace/trace_test.h"
#include "trace/trace_util.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct sample {
    mt_trace_event *evs;
    size_t n;
    tbuf *m;
    size_t nchunks;        /* chunk k starts at m->ends[k] */
    size_t *events_before; /* events in chunks 0..k-1 */
    size_t end_chunk_end;  /* where the END chunk ends */
} sample;

static void make_sample(sample *s, long ops, uint32_t chunk_events, mt_trace_write_stats *st, long fail_after)
{
    gen_state g;
    gen_init(&g, 2, ops, 64, 0xFFFFFF00u);
    s->evs = calloc((size_t)ops * 4 + 8, sizeof *s->evs);
    s->n = 0;
    while (gen_next(&g, &s->evs[s->n]))
        s->n++;
    gen_free(&g);
    s->m = tbuf_new();
    s->m->fail_after = fail_after;
    mt_trace_host host;
    tbuf_host(s->m, &host);
    mt_trace_write_config cfg = {.chunk_events = chunk_events, .start_ns = 0};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_meta(w, "exe", "/bin/sample");
    mt_trace_write_begin(w);
    for (size_t i = 0; i < s->n; i++)
        mt_trace_write_event(w, &s->evs[i]);
    const char *names[] = {"events_lost"};
    uint64_t vals[] = {0};
    mt_trace_write_finish(w, names, vals, 1);
    mt_trace_write_get_stats(w, st);
    mt_trace_writer_destroy(w);
    /* The chunks, from the writes' boundaries and the headers' own fields. */
    tbuf *m = s->m;
    s->nchunks = m->nends ? m->nends - 1 : 0;
    s->events_before = calloc(s->nchunks + 2, sizeof *s->events_before);
    s->end_chunk_end = (size_t)-1;
    for (size_t k = 0; k < s->nchunks; k++) {
        const unsigned char *h = m->p + m->ends[k];
        uint32_t count;
        memcpy(&count, h + 24, 4);
        s->events_before[k + 1] = s->events_before[k] + (h[4] == 2 ? count : 0);
        if (h[4] == 3)
            s->end_chunk_end = m->ends[k + 1];
    }
}

static void free_sample(sample *s)
{
    free(s->evs);
    free(s->events_before);
    tbuf_delete(s->m);
}

/* The chunk holding byte `off` (k such that ends[k] <= off < ends[k+1]);
 * nchunks for the trailer. */
static size_t chunk_at(const sample *s, size_t off)
{
    size_t k = 0;
    while (k + 1 < s->m->nends && s->m->ends[k + 1] <= off)
        k++;
    return k;
}

/* Reads data[0, len): events back (all must match the sample's), error. */
static size_t read_all(const sample *s, const unsigned char *data, size_t len, unsigned flags, int *mismatch,
                       char *err, int *complete)
{
    mt_trace_reader *r;
    *mismatch = 0;
    *complete = 0;
    err[0] = 0;
    if (mt_trace_open_mem(data, len, "t.mtt", flags, &r, err, MT_TRACE_ERR_MAX) < 0)
        return (size_t)-1;
    mt_trace_event ev;
    size_t got = 0;
    int rc;
    while ((rc = mt_trace_next(r, &ev)) == 1) {
        if (got >= s->n) {
            *mismatch = 1;
        } else {
            mt_trace_event want = texpect(&s->evs[got], 0, 1);
            if (!tsame(&ev, &want))
                *mismatch = 1;
        }
        got++;
    }
    if (rc < 0)
        snprintf(err, MT_TRACE_ERR_MAX, "%s", mt_trace_error(r));
    *complete = mt_trace_complete(r);
    /* the stacks the events name stay consistent whatever happened */
    mt_trace_close(r);
    return got;
}

static int names_chunk(const char *err, size_t k, size_t off)
{
    char want[96];
    snprintf(want, sizeof want, "t.mtt: chunk %zu at offset %zu: ", k, off);
    return strstr(err, want) == err;
}

/* Cut at `len`: the events of the chunks wholly before it, an error iff
 * the cut is not at a chunk boundary, naming the cut chunk. */
static int check_cut(const sample *s, size_t len, unsigned flags, int verbose)
{
    char err[MT_TRACE_ERR_MAX];
    int mismatch, complete;
    size_t got = read_all(s, s->m->p, len, flags, &mismatch, err, &complete);
    if (len < 64)
        return got == (size_t)-1 && strstr(err, "t.mtt: ") == err;
    size_t k = chunk_at(s, len), boundary = s->m->ends[k] == len;
    size_t want = s->events_before[k < s->nchunks ? k : s->nchunks];
    int ok = got == want && !mismatch && complete == (len >= s->end_chunk_end) &&
             (boundary ? err[0] == 0 : names_chunk(err, k, s->m->ends[k]));
    if (!ok && verbose)
        printf("  cut at %zu (chunk %zu at %zu): %zu events (want %zu)%s, complete %d, error: %s\n", len, k,
               s->m->ends[k], got, want, mismatch ? " MISMATCHED" : "", complete, err);
    return ok;
}

/* A byte flipped at `off`: an error naming the chunk holding it (or the
 * header), and exactly the events of the chunks before it. */
static int check_flip(const sample *s, size_t off, unsigned char x, unsigned flags, int verbose)
{
    unsigned char *d = malloc(s->m->len);
    memcpy(d, s->m->p, s->m->len);
    d[off] ^= x;
    char err[MT_TRACE_ERR_MAX];
    int mismatch, complete;
    size_t got = read_all(s, d, s->m->len, flags, &mismatch, err, &complete);
    free(d);
    int ok;
    size_t k = chunk_at(s, off);
    if (off < 64)
        ok = got == (size_t)-1 && strstr(err, "t.mtt: ") == err;
    else
        ok = got == s->events_before[k < s->nchunks ? k : s->nchunks] && !mismatch &&
             names_chunk(err, k, s->m->ends[k]);
    if (!ok && verbose)
        printf("  flip 0x%02x at %zu (chunk %zu at %zu): %zu events%s, error: %s\n", x, off, k, s->m->ends[k],
               got, mismatch ? " MISMATCHED" : "", err);
    return ok;
}

static void cuts_and_flips(void)
{
    mt_trace_write_stats st;
    sample s;
    make_sample(&s, 150, 40, &st, -1);
    int fails = 0, shown = 0;
    for (size_t len = 0; len <= s.m->len; len++)
        if (!check_cut(&s, len, len % 5 == 0 ? MT_TRACE_PREFETCH : 0, shown < 5))
            fails++, shown++;
    char label[128];
    snprintf(label, sizeof label, "cut at every byte of a %zu-byte, %zu-chunk trace", s.m->len, s.nchunks);
    CHECK(label, fails == 0 && s.nchunks > 8);
    CHECK("the whole file: every event, complete", check_cut(&s, s.m->len, 0, 1));
    fails = shown = 0;
    for (size_t off = 0; off < s.m->len; off++) {
        unsigned char x = (unsigned char)(1u << (off % 8));
        if (!check_flip(&s, off, x, off % 3 == 0 ? MT_TRACE_PREFETCH : 0, shown < 5))
            fails++, shown++;
        if (off % 4 == 0 && !check_flip(&s, off, 0xff, 0, shown < 5))
            fails++, shown++;
    }
    snprintf(label, sizeof label, "a byte flipped at every offset of a %zu-byte trace", s.m->len);
    CHECK(label, fails == 0);
    free_sample(&s);

    make_sample(&s, 60000, 4096, &st, -1);
    uint64_t rng = 12345;
    fails = shown = 0;
    for (int i = 0; i < 300; i++) {
        size_t len = (size_t)(gen_xorshift(&rng) % s.m->len);
        if (i < 40)
            len = s.m->ends[gen_xorshift(&rng) % s.m->nends]; /* at chunk boundaries too */
        if (!check_cut(&s, len, i % 2 ? MT_TRACE_PREFETCH : 0, shown < 5))
            fails++, shown++;
        size_t off = (size_t)(gen_xorshift(&rng) % s.m->len);
        if (!check_flip(&s, off, (unsigned char)(1 + gen_xorshift(&rng) % 255), i % 2 ? MT_TRACE_PREFETCH : 0,
                        shown < 5))
            fails++, shown++;
    }
    snprintf(label, sizeof label, "random cuts and flips of a %zu-byte, %zu-chunk trace", s.m->len,
             s.nchunks);
    CHECK(label, fails == 0);
    free_sample(&s);
}

static void magic_version(void)
{
    mt_trace_write_stats st;
    sample s;
    make_sample(&s, 100, 0, &st, -1);
    char err[MT_TRACE_ERR_MAX];
    int mismatch, complete;
    unsigned char *d = malloc(s.m->len);
    memcpy(d, s.m->p, s.m->len);
    d[0] = 'X';
    size_t got = read_all(&s, d, s.m->len, 0, &mismatch, err, &complete);
    CHECK("wrong magic: refused, said so", got == (size_t)-1 && strstr(err, "t.mtt: not a memtrail trace"));
    memcpy(d, s.m->p, s.m->len);
    d[8] = 3; /* version 3, the header's CRC made right again */
    uint32_t crc = trace_crc32c(0, d, 60);
    memcpy(d + 60, &crc, 4);
    got = read_all(&s, d, s.m->len, 0, &mismatch, err, &complete);
    CHECK("unknown version: refused, said so",
          got == (size_t)-1 && strstr(err, "t.mtt: unknown trace version 3"));
    free(d);

    /* Through a file: the error names the path; sniff tells traces apart. */
    char path[] = "/tmp/mt_trace_damageXXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0 && write(fd, s.m->p, s.m->len - 5) == (ssize_t)(s.m->len - 5)) {
        mt_trace_reader *r;
        mt_trace_event ev;
        size_t n = 0;
        int rc = -1;
        if (mt_trace_open(path, MT_TRACE_PREFETCH, &r, err, sizeof err) == 0) {
            while ((rc = mt_trace_next(r, &ev)) == 1)
                n++;
            CHECK("a file cut in its trailer: every event, then an error naming the file",
                  rc == -1 && n == s.n && strstr(mt_trace_error(r), path) == mt_trace_error(r) &&
                      strstr(mt_trace_error(r), "truncated trailer") && mt_trace_complete(r));
            mt_trace_close(r);
        } else
            CHECK("open a trace file", 0);
        CHECK("sniff: a trace", mt_trace_sniff(path) == 1);
    }
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    CHECK("sniff: not a trace, missing",
          mt_trace_sniff("/proc/self/status") == 0 && mt_trace_sniff("/nonexistent/x") == -ENOENT);
    mt_trace_reader *r;
    CHECK("open: a missing file", mt_trace_open("/nonexistent/x", 0, &r, err, sizeof err) == -ENOENT && !r &&
                                      strstr(err, "/nonexistent/x: "));
    free_sample(&s);
}

/* Bytes after the trailer (one, a few, a whole second trace): every event
 * still comes back and the end record was read, then an error names the
 * trailer's chunk and where the extra bytes start; so does a stream. */
static void after_trailer(void)
{
    mt_trace_write_stats st;
    sample s;
    make_sample(&s, 400, 60, &st, -1);
    size_t len = s.m->len, trailer = len - TRACE_TRAILER_SIZE; /* the trailer: "chunk" nchunks - 1 */
    size_t extra[] = {1, 7, 4096, len};
    int fails = 0;
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        unsigned char *d = malloc(len + extra[i]);
        memcpy(d, s.m->p, len);
        for (size_t k = 0; k < extra[i]; k++)
            d[len + k] = extra[i] == len ? s.m->p[k] : (unsigned char)k; /* a second trace, or junk */
        char err[MT_TRACE_ERR_MAX], want[160];
        int mismatch, complete;
        size_t got =
            read_all(&s, d, len + extra[i], i % 2 ? MT_TRACE_PREFETCH : 0, &mismatch, err, &complete);
        snprintf(want, sizeof want, "%zu byte%s after the trailer, from offset %zu", extra[i],
                 extra[i] == 1 ? "" : "s", len);
        if (got != s.n || mismatch || !complete || !names_chunk(err, s.nchunks - 1, trailer) ||
            !strstr(err, want)) {
            printf("  %zu bytes after the trailer: %zu events of %zu, complete %d, error: %s\n", extra[i],
                   got, s.n, complete, err);
            fails++;
        }
        if (i == 1) { /* as a stream: a pipe's length is not known */
            int fd = memfd_create("t", MFD_CLOEXEC);
            mt_trace_reader *r;
            size_t n = 0;
            int rc = -2;
            if (fd >= 0 && write(fd, d, len + extra[i]) == (ssize_t)(len + extra[i]) &&
                lseek(fd, 0, SEEK_SET) == 0 &&
                mt_trace_open_fd(fd, NULL, 0, "t.mtt", MT_TRACE_STREAM, &r, err, sizeof err) == 0) {
                mt_trace_event ev;
                while ((rc = mt_trace_next(r, &ev)) == 1)
                    n++;
                snprintf(err, sizeof err, "%s", mt_trace_error(r) ? mt_trace_error(r) : "");
                complete = mt_trace_complete(r);
                mt_trace_close(r);
            }
            snprintf(want, sizeof want, "bytes after the trailer, from offset %zu", len);
            if (!(rc == -1 && n == s.n && complete && names_chunk(err, s.nchunks - 1, trailer) &&
                  strstr(err, want)))
                printf("  stream: rc %d, %zu events of %zu, complete %d, error: %s\n", rc, n, s.n, complete,
                       err);
            CHECK("a stream with bytes after its trailer: every event, then an error naming the offset",
                  rc == -1 && n == s.n && complete && names_chunk(err, s.nchunks - 1, trailer) &&
                      strstr(err, want));
        }
        free(d);
    }
    CHECK(
        "1, 7, 4096 bytes or a second trace after the trailer: every event, then an error naming the offset",
        fails == 0);
    /* the file as written: no error */
    char err[MT_TRACE_ERR_MAX];
    int mismatch, complete;
    size_t got = read_all(&s, s.m->p, len, 0, &mismatch, err, &complete);
    CHECK("nothing after the trailer: no error", got == s.n && !mismatch && complete && !err[0]);
    free_sample(&s);
}

/* The disk fills: writes fail from some byte on (after a partial write). */
static void disk_full(void)
{
    mt_trace_write_stats full;
    sample whole;
    make_sample(&whole, 3000, 500, &full, -1);
    int fails = 0;
    for (int i = 1; i <= 12; i++) {
        long at = (long)(whole.m->len * (size_t)i / 13);
        mt_trace_write_stats st;
        sample s;
        make_sample(&s, 3000, 500, &st, at);
        /* s.m holds the bytes up to `at`; its ends, the whole writes. */
        char err[MT_TRACE_ERR_MAX];
        int mismatch, complete;
        size_t got = read_all(&s, s.m->p, s.m->len, i % 2 ? MT_TRACE_PREFETCH : 0, &mismatch, err, &complete);
        size_t k = chunk_at(&s, s.m->len);
        int ok = s.m->len == (size_t)at && got == s.events_before[k] && !mismatch && !complete &&
                 (s.m->ends[k] == s.m->len ? !err[0] : names_chunk(err, k, s.m->ends[k])) &&
                 st.events_lost_to_errors == s.n - got && st.events == s.n &&
                 st.bytes == s.m->ends[s.m->nends - 1];
        if (!ok) {
            printf("  disk full at %ld: %zu events (want %zu), lost %llu, error: %s\n", at, got,
                   s.events_before[k], (unsigned long long)st.events_lost_to_errors, err);
            fails++;
        }
        free_sample(&s);
    }
    CHECK("disk full at 12 points: the file so far reads, losses counted", fails == 0);
    free_sample(&whole);
}

int main(void)
{
    cuts_and_flips();
    magic_version();
    after_trailer();
    disk_full();
    return failures != 0;
}
