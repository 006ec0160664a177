/* test_refset_file.c — the reference-set recording's writer and reader
 * (src/refset/refset_write.c, refset_read.c): every record type with
 * random fields comes back field by field across many chunks; a file cut
 * at any byte gives exactly the records of its whole chunks (the truth:
 * the writer's byte count after each flush) and names the truncation; a
 * flipped byte anywhere is caught (CRCs) and never crashes; traces, junk,
 * empty files, other versions and records that make no sense are refused
 * with the right message; the END statistics come back; and the bytes one
 * page reference costs in a realistic stream (printed). */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "refset/refset_file.h"
#include "refset/refset_format.h"
#include "refset/refset_gen.h"
#include "trace/trace_read.h"

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Whether got is want as the reader gives it back (times relative). */
static int same_record(const mt_rs_event *want, const mt_rs_event *got, char *why, size_t cap)
{
#define F(f)                                                                                                 \
    do {                                                                                                     \
        if (want->f != got->f) {                                                                             \
            snprintf(why, cap, "%s: %llu, read %llu", #f, (unsigned long long)want->f,                       \
                     (unsigned long long)got->f);                                                            \
            return 0;                                                                                        \
        }                                                                                                    \
    } while (0)
    uint64_t t = rs_type_timed(want->type) ? want->time_ns - START : 0;
    if (t != got->time_ns) {
        snprintf(why, cap, "time %llu, read %llu", (unsigned long long)t, (unsigned long long)got->time_ns);
        return 0;
    }
    F(type);
    F(category);
    F(reason);
    F(flags);
    F(pid);
    F(tid);
    F(ppid);
    F(addr);
    F(npages);
    F(len);
    F(pfn);
    F(pgoff);
    F(ino);
    F(dev);
    F(prot);
    F(map_flags);
    F(stack);
    F(alloc_stack);
    F(nframes);
    F(name_len);
    F(count);
#undef F
    if (!str_eq(want->name, got->name) || !str_eq(want->value, got->value)) {
        snprintf(why, cap, "name/value differ");
        return 0;
    }
    for (uint32_t i = 0; i < want->nframes; i++)
        if (want->frames[i] != got->frames[i]) {
            snprintf(why, cap, "frame %u differs", i);
            return 0;
        }
    return 1;
}

/* ---- files ---- */

typedef struct blob {
    unsigned char *p;
    size_t n;
} blob;

static char tmpdir[] = "/tmp/mt-refset-test-XXXXXX";

static blob slurp(const char *path)
{
    blob b = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return b;
    struct stat st;
    fstat(fileno(f), &st);
    b.p = malloc((size_t)st.st_size + 1);
    b.n = fread(b.p, 1, (size_t)st.st_size, f);
    fclose(f);
    return b;
}

/* Writes recs[0..n) (a flush every `every` records when nonzero) into
 * path; ends[] gets the file size after each chunk that closed and
 * nends_rec[] how many records the file held then. Returns the writer's
 * result. */
typedef struct cuts {
    uint64_t bytes[4096];
    size_t records[4096];
    size_t n;
} cuts;

static int write_file(const char *path, const rec *recs, size_t n, size_t every, cuts *c, int finish)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    mt_rs_header h = {START, 1700000000000000000ull, PAGE, RS_FILE_PFN};
    int err = 0;
    mt_rs_writer *w = mt_rs_writer_open(fd, &h, &err);
    if (!w)
        return err;
    if (c)
        c->n = 0;
    uint64_t last = mt_rs_write_bytes(w);
    for (size_t i = 0; i < n; i++) {
        int rc = mt_rs_write(w, &recs[i].ev);
        if (rc < 0) {
            mt_rs_write_abort(w);
            return rc;
        }
        if (every && (i + 1) % every == 0 && (rc = mt_rs_write_flush(w)) < 0) {
            mt_rs_write_abort(w);
            return rc;
        }
        if (c && mt_rs_write_bytes(w) != last && c->n < 4096) {
            last = mt_rs_write_bytes(w);
            c->bytes[c->n] = last;
            c->records[c->n++] = i + 1;
        }
    }
    mt_rs_write_flush(w);
    if (c && mt_rs_write_bytes(w) != last && c->n < 4096) {
        c->bytes[c->n] = mt_rs_write_bytes(w);
        c->records[c->n++] = n;
    }
    if (!finish) {
        mt_rs_write_abort(w);
        return 0;
    }
    static const char *const names[] = {"faults", "lost_samples", "scans", ""};
    static const uint64_t values[] = {123456, 0, UINT64_MAX, 7};
    return mt_rs_write_finish(w, names, values, 4);
}

/* Reads a whole recording from memory: records read and compared with
 * want (how many matched in order before the first difference), the
 * read's last result, its error. */
typedef struct readout {
    int open_rc, last_rc, complete;
    size_t nread, nmatch;
    char err[400];
} readout;

static readout read_mem(const unsigned char *p, size_t n, unsigned flags, const rec *want, size_t nwant)
{
    readout o = {0};
    mt_rs_reader *r;
    o.open_rc = mt_rs_reader_open_mem(p, n, flags, &r, o.err, sizeof o.err);
    if (o.open_rc < 0)
        return o;
    mt_rs_event ev;
    int matching = 1;
    char why[200];
    while ((o.last_rc = mt_rs_read(r, &ev)) == 1) {
        if (matching && o.nread < nwant && same_record(&want[o.nread].ev, &ev, why, sizeof why))
            o.nmatch++;
        else
            matching = 0;
        o.nread++;
    }
    o.complete = mt_rs_reader_complete(r);
    if (mt_rs_reader_error(r))
        snprintf(o.err, sizeof o.err, "%s", mt_rs_reader_error(r));
    mt_rs_reader_close(r);
    return o;
}

/* ---- the tests ---- */

static void test_roundtrip(void)
{
    size_t n = 60000;
    rec *recs = random_records(n);
    char path[128];
    snprintf(path, sizeof path, "%s/rt.mrs", tmpdir);
    static cuts c;
    CHECK("round trip: the writer takes every record", write_file(path, recs, n, 0, &c, 1) == 0);
    mt_rs_reader *r;
    char err[256];
    int rc = mt_rs_reader_open(path, &r, err, sizeof err);
    CHECK("round trip: the reader opens the file", rc == 0);
    if (rc)
        return;
    const mt_rs_header *h = mt_rs_reader_header(r);
    CHECK("round trip: header", h->start_ns == START && h->start_realtime_ns == 1700000000000000000ull &&
                                    h->page_size == PAGE && h->flags == RS_FILE_PFN);
    mt_rs_event ev;
    size_t i = 0, bad = 0;
    char why[200] = "";
    while ((rc = mt_rs_read(r, &ev)) == 1) {
        if (i < n && !bad && !same_record(&recs[i].ev, &ev, why, sizeof why)) {
            bad = i + 1;
            printf("# record %zu (type %u): %s\n", i, recs[i].ev.type, why);
        }
        i++;
    }
    CHECK("round trip: every record of every type comes back field by field", i == n && !bad);
    CHECK("round trip: the read ends cleanly", rc == 0 && mt_rs_reader_complete(r) && !mt_rs_reader_error(r));
    printf("# %zu records in %llu chunks\n", n, (unsigned long long)mt_rs_reader_chunks(r));
    CHECK("round trip: many chunks", mt_rs_reader_chunks(r) >= 10 && c.n >= 8);
    const char *const *names;
    const uint64_t *values;
    int ns = mt_rs_reader_stats(r, &names, &values);
    CHECK("round trip: statistics come back", ns == 4 && !strcmp(names[0], "faults") && values[0] == 123456 &&
                                                  !strcmp(names[1], "lost_samples") && values[1] == 0 &&
                                                  values[2] == UINT64_MAX && !strcmp(names[3], "") &&
                                                  values[3] == 7);
    mt_rs_reader_close(r);
    unlink(path);
    free(recs);
}

/* Cuts at the given offsets: each read gives exactly the records of the
 * chunks wholly before the cut, then names the truncation. */
static void check_cuts(const char *label, const rec *recs, size_t n, const blob *b, const cuts *c,
                       const size_t *offsets, size_t noff)
{
    size_t wrong_prefix = 0, wrong_error = 0, complete = 0, firstbad = SIZE_MAX;
    char example[480] = "";
    for (size_t k = 0; k < noff; k++) {
        size_t len = offsets[k];
        readout o = read_mem(b->p, len, 0, recs, n);
        size_t want = 0;
        for (size_t j = 0; j < c->n; j++)
            if (c->bytes[j] <= len)
                want = c->records[j];
        if (o.nread != want || o.nmatch != want) {
            wrong_prefix++;
            if (firstbad == SIZE_MAX)
                firstbad = len;
        }
        if (o.complete)
            complete++;
        int named = len < RS_HEADER_SIZE ? o.open_rc < 0 && (len ? strstr(o.err, "truncated header") != NULL
                                                                 : strstr(o.err, "empty file") != NULL)
                                         : o.open_rc == 0 && o.last_rc == -1 && strstr(o.err, "truncated");
        if (!named) {
            wrong_error++;
            if (!example[0])
                snprintf(example, sizeof example, "cut at %zu: %s", len, o.err);
        }
        if (k == noff / 2)
            printf("# %s: cut at %zu: %zu records, \"%s\"\n", label, len, o.nread, o.err);
    }
    char name[200];
    snprintf(name, sizeof name, "%s: %zu cuts each give exactly the records of the whole chunks before them",
             label, noff);
    CHECK(name, wrong_prefix == 0);
    if (wrong_prefix)
        printf("# first wrong cut at %zu\n", firstbad);
    snprintf(name, sizeof name, "%s: every cut is named as a truncation, none complete", label);
    CHECK(name, wrong_error == 0 && complete == 0);
    if (example[0])
        printf("# %s\n", example);
    readout whole = read_mem(b->p, b->n, 0, recs, n);
    snprintf(name, sizeof name, "%s: the whole file reads complete", label);
    CHECK(name, whole.complete && whole.last_rc == 0 && whole.nmatch == n && whole.nread == n);
}

static void test_cuts(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/cut.mrs", tmpdir);
    size_t n = 400;
    rec *recs = random_records(n);
    static cuts c;
    write_file(path, recs, n, 25, &c, 1);
    blob b = slurp(path);
    size_t *off = malloc(b.n * sizeof *off);
    for (size_t i = 0; i < b.n; i++)
        off[i] = i;
    printf("# small recording: %zu records, %zu bytes, %zu chunks\n", n, b.n, c.n);
    check_cuts("cut small recording at every byte", recs, n, &b, &c, off, b.n);
    free(off);
    free(b.p);
    free(recs);

    n = 150000;
    recs = random_records(n);
    write_file(path, recs, n, 0, &c, 1);
    b = slurp(path);
    size_t noff = 300;
    off = malloc(noff * sizeof *off);
    for (size_t i = 0; i < noff; i++)
        off[i] = i < 20 ? b.n - 1 - i : i < 40 ? (size_t)c.bytes[i % c.n] : (size_t)(rnd() % b.n);
    printf("# large recording: %zu records, %zu bytes, %zu chunks\n", n, b.n, c.n);
    check_cuts("cut large recording at sampled bytes", recs, n, &b, &c, off, noff);
    free(off);
    free(b.p);
    free(recs);

    /* A recorder that stops without finishing (abort: the open chunk goes
     * out, no END): every record, then a truncation. */
    n = 1000;
    recs = random_records(n);
    write_file(path, recs, n, 0, NULL, 0);
    b = slurp(path);
    readout o = read_mem(b.p, b.n, 0, recs, n);
    CHECK("an aborted recording gives every record, then says it has no END chunk",
          o.nread == n && o.nmatch == n && o.last_rc == -1 && strstr(o.err, "no END chunk") && !o.complete);
    printf("# aborted: \"%s\"\n", o.err);
    free(b.p);
    free(recs);
    unlink(path);
}

static void test_damage(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/dmg.mrs", tmpdir);
    size_t n = 300;
    rec *recs = random_records(n);
    static cuts c;
    write_file(path, recs, n, 30, &c, 1);
    blob b = slurp(path);
    unlink(path);
    unsigned char *copy = malloc(b.n);
    size_t undetected = 0, bad_prefix = 0;
    char example[400] = "";
    for (size_t i = 0; i < b.n; i++) {
        memcpy(copy, b.p, b.n);
        copy[i] ^= (unsigned char)(1u << (i % 8));
        readout o = read_mem(copy, b.n, 0, recs, n);
        if (o.complete || (o.open_rc == 0 && o.last_rc != -1)) {
            undetected++;
            if (!example[0])
                snprintf(example, sizeof example, "flip at %zu not caught", i);
        }
        if (o.nread != o.nmatch)
            bad_prefix++;
    }
    CHECK("a bit flipped at any byte is caught (read ends with an error, not complete)", undetected == 0);
    CHECK("a bit flipped at any byte: every record given before the error is right", bad_prefix == 0);
    if (example[0])
        printf("# %s\n", example);

    /* A flip inside chunk 2's payload: named as a bad CRC of chunk 2 at its offset. */
    uint64_t at = c.bytes[1]; /* chunk 2 starts where chunk 1 ended */
    memcpy(copy, b.p, b.n);
    copy[at + TRACE_CHUNK_HEADER_SIZE + 3] ^= 0x40;
    readout o = read_mem(copy, b.n, 0, recs, n);
    char want[100];
    snprintf(want, sizeof want, "bad CRC in chunk 2 at offset %llu", (unsigned long long)at);
    CHECK("a damaged payload: 'bad CRC in chunk 2 at offset N', the records of chunks 0-1 given",
          strstr(o.err, want) && o.nread == c.records[1] && o.nmatch == o.nread);
    printf("# %s\n", o.err);

    /* Without CRC checks, random damage reaches the decoder: it must
     * stop cleanly (ASan/UBSan watch), whatever it gives. */
    size_t stopped = 0;
    for (int k = 0; k < 3000; k++) {
        memcpy(copy, b.p, b.n);
        int flips = 1 + (int)(rnd() % 4);
        for (int f = 0; f < flips; f++)
            copy[rnd() % b.n] = (unsigned char)rnd();
        readout d = read_mem(copy, b.n, RS_READ_NO_CRC, recs, n);
        stopped += d.open_rc < 0 || d.last_rc == -1 || d.last_rc == 0;
    }
    CHECK("3000 random damages without CRC checks: every read stops without a crash", stopped == 3000);
    free(copy);
    free(b.p);
    free(recs);
}

/* A file of the recording header and one EVENTS chunk holding body. */
static blob craft(const unsigned char *body, size_t n, uint32_t count)
{
    blob b = {malloc(RS_HEADER_SIZE + TRACE_CHUNK_HEADER_SIZE + n + 1), 0};
    unsigned char *hd = b.p;
    memset(hd, 0, RS_HEADER_SIZE);
    memcpy(hd, RS_MAGIC, 8);
    trace_put32(hd + 8, RS_VERSION);
    trace_put32(hd + 12, RS_HEADER_SIZE);
    trace_put32(hd + 32, PAGE);
    trace_put32(hd + 60, trace_crc32c(0, hd, 60));
    unsigned char *h = hd + RS_HEADER_SIZE;
    memset(h, 0, TRACE_CHUNK_HEADER_SIZE);
    memcpy(h, TRACE_CHUNK_MAGIC, 4);
    h[4] = RS_CHUNK_EVENTS;
    h[6] = TRACE_CHUNK_HEADER_SIZE;
    trace_put32(h + 16, (uint32_t)n);
    trace_put32(h + 20, (uint32_t)n);
    trace_put32(h + 24, count);
    memcpy(h + TRACE_CHUNK_HEADER_SIZE, body, n);
    trace_put32(h + 28, trace_crc32c(0, body, n));
    trace_put32(h + 36, trace_crc32c(0, h, 36));
    b.n = RS_HEADER_SIZE + TRACE_CHUNK_HEADER_SIZE + n;
    return b;
}

static void check_crafted(const char *label, const unsigned char *body, size_t n, const char *want)
{
    blob b = craft(body, n, 1);
    readout o = read_mem(b.p, b.n, 0, NULL, 0);
    char name[300];
    snprintf(name, sizeof name, "a record with %s stops reading, naming record 0 of chunk 0 and why", label);
    CHECK(name, o.last_rc == -1 && o.nread == 0 &&
                    strstr(o.err, "bad record 0 of chunk 0 (chunk at offset 64") && strstr(o.err, want));
    printf("# %s\n", o.err);
    free(b.p);
}

static void test_nonsense(void)
{
    /* prefix: first time 10, 0 back, range 5 */
    const unsigned char unknown[] = {10, 0, 5, 0x0c};
    check_crafted("an unknown type", unknown, sizeof unknown, "unknown record type byte 0x0c");
    const unsigned char bits[] = {10, 0, 5, RS_EV_EXIT | 0x10, 0, 1};
    check_crafted("bits on a type that has none", bits, sizeof bits, "unknown record type byte 0x12");
    const unsigned char frames[] = {10, 0, 5, RS_EV_STACK, 1, 0x81, 0x08}; /* 1025 frames */
    check_crafted("too many frames", frames, sizeof frames, "1025 frames");
    /* REF: time +0, pid 1 tid 1, addr +0, npages 0 */
    const unsigned char np0[] = {10, 0, 5, RS_EV_REF | RS_REF_SAME_ATTRS, 0, 1, 0, 0, 0, 0};
    check_crafted("npages 0", np0, sizeof np0, "npages 0");
    /* npages 2^40 + 1 */
    const unsigned char npbig[] = {
        10,   0,    5,    RS_EV_REF | RS_REF_SAME_THREAD | RS_REF_NEXT_ADDR | RS_REF_SAME_ATTRS,
        0,    0x81, 0x80, 0x80,
        0x80, 0x80, 0x20, 0};
    check_crafted("npages past 2^40", npbig, sizeof npbig, "npages 1099511627777");
    /* a REF of 2^18 + 1 pages: more than a REF may stand for */
    const unsigned char refbig[] = {
        10,   0,    5, RS_EV_REF | RS_REF_SAME_THREAD | RS_REF_NEXT_ADDR | RS_REF_SAME_ATTRS, 0, 0x81,
        0x80, 0x10, 0};
    check_crafted("a REF past 2^18 pages", refbig, sizeof refbig, "a REF of 262145 pages (at most 262144)");
    const unsigned char cat[] = {10,
                                 0,
                                 5,
                                 RS_EV_REF | RS_REF_SAME_THREAD | RS_REF_NEXT_ADDR | RS_REF_ONE_PAGE,
                                 0,
                                 RS_ATTR_CATEGORY,
                                 RS_NCATEGORIES,
                                 0};
    check_crafted("a category past the last", cat, sizeof cat, "category 7");
    /* EXIT at +6 (zigzag 12) in a chunk of range [10, 15]: past the range; then -11 (zigzag 21) */
    const unsigned char late[] = {10, 0, 5, RS_EV_EXIT, 12, 1};
    check_crafted("a time past the chunk's range", late, sizeof late,
                  "time 16 ns outside the chunk's range [10, 15]");
    const unsigned char back[] = {10, 0, 5, RS_EV_EXIT, 21, 1};
    check_crafted("a time going back before the chunk's range", back, sizeof back,
                  "outside the chunk's range");
    const unsigned char str[] = {10, 0, 5, RS_EV_META, 0x82, 0x20, 'a'}; /* a string of 4097 bytes */
    check_crafted("a string past the limit", str, sizeof str, "a string of 4097 bytes");
    const unsigned char cut[] = {10, 0, 5, RS_EV_MAP, 0, 1, 2};
    check_crafted("fields past the chunk's end", cut, sizeof cut, "runs past the end of the chunk");

    /* A chunk claiming more records than bytes, and bytes after its records. */
    const unsigned char one[] = {10, 0, 5, RS_EV_EXIT, 0, 1, 0xff};
    blob b = craft(one, sizeof one, 1);
    readout o = read_mem(b.p, b.n, 0, NULL, 0);
    CHECK("bytes after a chunk's last record are refused after its records",
          o.nread == 1 && o.last_rc == -1 && strstr(o.err, "1 bytes after its 1 records"));
    free(b.p);
    b = craft(one, sizeof one, 1000);
    o = read_mem(b.p, b.n, 0, NULL, 0);
    CHECK("a record count larger than the chunk's bytes is refused",
          o.nread == 0 && strstr(o.err, "1000 records in 4 bytes"));
    free(b.p);
}

static void test_refused(void)
{
    readout o = read_mem((const unsigned char *)"", 0, 0, NULL, 0);
    CHECK("an empty file is refused as empty", o.open_rc == -EINVAL && strstr(o.err, "empty file"));

    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rnd();
    o = read_mem(junk, sizeof junk, 0, NULL, 0);
    CHECK("random bytes are refused: not a recording",
          o.open_rc == -EINVAL && strstr(o.err, "not a memtrail reference-set recording (magic"));
    printf("# junk: %s\n", o.err);

    /* A trace of the corpus. */
    blob trace = {0};
    DIR *d = opendir("tests/trace/corpus");
    for (struct dirent *e; d && !trace.p && (e = readdir(d));) {
        char p[600];
        snprintf(p, sizeof p, "tests/trace/corpus/%s", e->d_name);
        blob t = e->d_name[0] != '.' ? slurp(p) : (blob){0};
        if (t.n > 64 && !memcmp(t.p, "MTTRACE", 8))
            trace = t;
        else
            free(t.p);
    }
    if (d)
        closedir(d);
    CHECK("a trace of tests/trace/corpus found", trace.p != NULL);
    if (trace.p) {
        o = read_mem(trace.p, trace.n, 0, NULL, 0);
        CHECK("a trace is refused as a trace", o.open_rc == -EINVAL &&
                                                   strstr(o.err, "not a memtrail reference-set recording") &&
                                                   strstr(o.err, "a memtrail trace"));
        printf("# trace: %s\n", o.err);
        free(trace.p);
    }

    /* Another version (a valid header otherwise). */
    blob b = craft((const unsigned char *)"", 0, 0);
    trace_put32(b.p + 8, 2);
    trace_put32(b.p + 60, trace_crc32c(0, b.p, 60));
    o = read_mem(b.p, b.n, 0, NULL, 0);
    CHECK("another version is refused: 'unsupported version 2'",
          o.open_rc == -EINVAL && strstr(o.err, "unsupported version 2"));
    trace_put32(b.p + 8, 1);
    b.p[20] ^= 1;
    o = read_mem(b.p, b.n, 0, NULL, 0);
    CHECK("a damaged header is refused (header CRC)",
          o.open_rc == -EINVAL && strstr(o.err, "bad header CRC"));
    free(b.p);

    /* And the other way: the trace reader refuses a recording. */
    char path[128];
    snprintf(path, sizeof path, "%s/notrace.mrs", tmpdir);
    rec *recs = random_records(50);
    write_file(path, recs, 50, 0, NULL, 1);
    free(recs);
    blob rsf = slurp(path);
    unlink(path);
    mt_trace_reader *tr = NULL;
    char terr[256] = "";
    int trc = mt_trace_open_mem(rsf.p, rsf.n, "rec.mrs", 0, &tr, terr, sizeof terr);
    CHECK("the trace reader refuses a recording", trc < 0 && strstr(terr, "not a memtrail trace"));
    printf("# trace reader on a recording: %s\n", terr);
    if (trc >= 0)
        mt_trace_close(tr);
    free(rsf.p);

    mt_rs_reader *r;
    char err[200];
    snprintf(path, sizeof path, "%s/missing.mrs", tmpdir);
    CHECK("a missing file: -ENOENT", mt_rs_reader_open(path, &r, err, sizeof err) == -ENOENT && r == NULL);
}

static void test_writer_refuses(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/w.mrs", tmpdir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    mt_rs_header h = {START, 0, PAGE, 0};
    int err = 0;
    mt_rs_writer *w = mt_rs_writer_open(fd, &h, &err);
    mt_rs_event e = {.type = RS_EV_REF, .time_ns = START, .npages = 0};
    int a = mt_rs_write(w, &e);
    e.npages = RS_MAX_NPAGES + 1;
    int b = mt_rs_write(w, &e);
    e.npages = RS_MAX_REF_NPAGES + 1;
    int b2 = mt_rs_write(w, &e);
    e.npages = 1;
    e.category = RS_NCATEGORIES;
    int c = mt_rs_write(w, &e);
    mt_rs_event s = {.type = RS_EV_STACK, .nframes = TRACE_MAX_FRAMES + 1, .frames = (uint64_t[1]){0}};
    int d = mt_rs_write(w, &s);
    mt_rs_event u = {.type = 12};
    int f = mt_rs_write(w, &u);
    CHECK("the writer refuses what a reader would refuse (npages 0 / > 2^40, a REF > 2^18, category, frames, "
          "type)",
          a == -EINVAL && b == -EINVAL && b2 == -EINVAL && c == -EINVAL && d == -EINVAL && f == -EINVAL);
    e.category = 0;
    CHECK("and still takes a good record after them", mt_rs_write(w, &e) == 0);
    CHECK("and finishes", mt_rs_write_finish(w, NULL, NULL, 0) == 0);
    blob bl = slurp(path);
    readout o = read_mem(bl.p, bl.n, 0, NULL, 0);
    CHECK("a recording with no statistics reads complete", o.complete && o.nread == 1);
    free(bl.p);
    h.page_size = 3000;
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    CHECK("the writer refuses a page size that is not a power of two",
          mt_rs_writer_open(fd, &h, &err) == NULL && err == -EINVAL);
    unlink(path);
}

/* A full disk (here: the file size limit, EFBIG) while recording: the
 * writer reports it, and the file so far reads up to its last whole chunk. */
static void test_full_disk(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/full.mrs", tmpdir);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 30000;
    signal(SIGXFSZ, SIG_IGN);
    size_t n = 3000;
    rec *recs = random_records(n);
    static cuts c;
    setrlimit(RLIMIT_FSIZE, &lim);
    int rc = write_file(path, recs, n, 40, &c, 1);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    CHECK("a full disk: the writer says so (-EFBIG)", rc == -EFBIG);
    blob b = slurp(path);
    size_t want = 0;
    for (size_t j = 0; j < c.n; j++)
        if (c.bytes[j] <= b.n)
            want = c.records[j];
    readout o = read_mem(b.p, b.n, 0, recs, n);
    CHECK("a full disk: the file holds 30000 bytes and reads up to its last whole chunk",
          b.n == 30000 && want > 0 && o.nread == want && o.nmatch == want &&
              strstr(o.err, "truncated chunk"));
    printf("# full disk: %zu of %zu records kept: %s\n", o.nread, n, o.err);
    free(b.p);
    free(recs);
    unlink(path);
}

/* A realistic stream: one thread touching sequential pages 1-20 us apart,
 * pfns mostly random (the kernel's free lists), anonymous heap pages. */
static void test_size(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/size.mrs", tmpdir);
    size_t n = 200000;
    rec *recs = calloc(n, sizeof *recs);
    uint64_t t = START, addr = 0x55550000000ull;
    for (size_t i = 0; i < n; i++) {
        mt_rs_event *e = &recs[i].ev;
        e->type = RS_EV_REF;
        e->pid = 4242;
        e->tid = 4242;
        t += 1000 + rnd() % 19000;
        e->time_ns = t;
        e->addr = addr;
        addr += PAGE;
        e->npages = 1;
        e->pfn = rnd() % 4 ? 0x100000 + rnd() % (1u << 22) : recs[i ? i - 1 : 0].ev.pfn + 1;
        e->category = RS_CAT_HEAP;
        e->flags = RS_REF_FAULT;
        e->stack = 0;
    }
    write_file(path, recs, n, 0, NULL, 1);
    struct stat st;
    stat(path, &st);
    double per = (double)st.st_size / (double)n;
    printf("# bytes per REF record (sequential pages, one thread, 1-20 us apart, random pfns): %.2f "
           "(%zu records, %lld bytes)\n",
           per, n, (long long)st.st_size);
    CHECK("a REF costs under 16 bytes in a realistic stream", per < 16);
    blob b = slurp(path);
    readout o = read_mem(b.p, b.n, 0, recs, n);
    CHECK("the realistic stream reads back", o.complete && o.nmatch == n);
    free(b.p);
    /* without pfns (not root): the common case */
    for (size_t i = 0; i < n; i++)
        recs[i].ev.pfn = 0;
    write_file(path, recs, n, 0, NULL, 1);
    stat(path, &st);
    printf("# bytes per REF record without pfns: %.2f\n", (double)st.st_size / (double)n);
    /* four threads interleaved at random, each walking its own pages */
    uint64_t next[4] = {0x10000000, 0x20000000, 0x30000000, 0x40000000};
    for (size_t i = 0; i < n; i++) {
        unsigned k = (unsigned)(rnd() % 4);
        recs[i].ev.tid = 4242 + k;
        recs[i].ev.addr = next[k];
        next[k] += PAGE;
    }
    write_file(path, recs, n, 0, NULL, 1);
    stat(path, &st);
    per = (double)st.st_size / (double)n;
    printf("# bytes per REF record, four threads interleaved, without pfns: %.2f\n", per);
    b = slurp(path);
    o = read_mem(b.p, b.n, 0, recs, n);
    CHECK("interleaved threads read back, each REF under 16 bytes", o.complete && o.nmatch == n && per < 16);
    free(b.p);
    unlink(path);
    free(recs);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip();
    test_cuts();
    test_damage();
    test_nonsense();
    test_refused();
    test_writer_refuses();
    test_full_disk();
    test_size();
    rmdir(tmpdir);
    return failures != 0;
}
