/* test_defs.c — the trace reader against definitions made to take memory.
 * Hostile files are built here byte by byte after an honest prefix (a
 * trace the real writer wrote, flushed but not finished): DEFS chunks whose
 * zstd-compressed bodies (64 MiB raw, a few KB stored) define the same
 * stacks of 1024 frames again and again, or ever new ones; more meta keys
 * than a trace has; an end record of thousands of statistics; an index
 * that claims millions of entries. Each is read in a child process whose
 * peak RSS growth (getrusage) is the measure: bounded, the honest events
 * all returned, and an error naming the chunk and its offset where the
 * file asks for too much. Stacks redefined by hand check that frames given
 * back and reused never change another stack. With the CLI built
 * ($MT_ROOT/$BUILD/bin/memtrail), `memtrail analyze` of the bombs is
 * measured the same way (wait4's rusage). */
#include "unit.h"
#include "trace/trace_gen.h"
#include "trace/trace_test.h"
#include "trace/trace_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#define MiB (1024u * 1024u)
#define BODY_MAX (TRACE_MAX_RAW - 4096u) /* a bomb chunk's raw body */

/* ---- building files ---------------------------------------------------- */

typedef struct fbuf {
    unsigned char *p;
    size_t len, cap;
} fbuf;

static void fb_put(fbuf *f, const void *p, size_t n)
{
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < f->len + n)
            cap *= 2;
        f->p = realloc(f->p, cap);
        f->cap = cap;
    }
    memcpy(f->p + f->len, p, n);
    f->len += n;
}

static void fb_varint(fbuf *f, uint64_t v)
{
    unsigned char b[10];
    fb_put(f, b, (size_t)(trace_put_varint(b, v) - b));
}

static void fb_string(fbuf *f, const char *s)
{
    fb_varint(f, strlen(s));
    fb_put(f, s, strlen(s));
}

/* A file: the honest prefix, then chunks numbered on from it. */
typedef struct file {
    fbuf b;
    uint64_t seq;
    size_t honest_events;
    mt_trace_event *evs;
} file;

#define HONEST_EVENTS 3000

/* An honest trace of HONEST_EVENTS mbench-like events (stacks 1 and 2 of
 * trace_test.h's frames, its modules, meta "exe"), flushed to whole
 * chunks but not finished: the writer's own bytes. */
static void file_honest(file *f)
{
    memset(f, 0, sizeof *f);
    gen_state g;
    gen_init(&g, 2, HONEST_EVENTS / 2, 64, 1);
    f->evs = calloc(HONEST_EVENTS * 2 + 8, sizeof *f->evs);
    while (gen_next(&g, &f->evs[f->honest_events]))
        f->honest_events++;
    gen_free(&g);
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {.chunk_events = 500, .start_ns = 0};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_meta(w, "exe", "/bin/honest");
    mt_trace_write_begin(w);
    for (size_t i = 0; i < f->honest_events; i++)
        mt_trace_write_event(w, &f->evs[i]);
    mt_trace_write_flush(w, 1);
    fb_put(&f->b, m->p, m->len);
    mt_trace_writer_destroy(w);
    tbuf_delete(m);
    /* the chunks written: numbered 0.. */
    for (size_t off = TRACE_HEADER_SIZE; off + TRACE_CHUNK_HEADER_SIZE <= f->b.len;
         off += TRACE_CHUNK_HEADER_SIZE + trace_get32(f->b.p + off + 16))
        f->seq++;
}

static void file_free(file *f)
{
    free(f->b.p);
    free(f->evs);
}

/* Appends a chunk (zstd-compressed body); its offset. */
static size_t file_chunk(file *f, unsigned kind, uint32_t count, const fbuf *body)
{
    size_t bound = ZSTD_compressBound(body->len);
    unsigned char *z = malloc(bound);
    size_t zn = ZSTD_compress(z, bound, body->p, body->len, 3);
    if (ZSTD_isError(zn)) {
        printf("zstd: %s\n", ZSTD_getErrorName(zn));
        exit(1);
    }
    unsigned char h[TRACE_CHUNK_HEADER_SIZE];
    trace_chunk_header(h, kind, TRACE_CODEC_ZSTD, f->seq++, (uint32_t)zn, (uint32_t)body->len, count,
                       trace_crc32c(0, z, zn));
    size_t at = f->b.len;
    fb_put(&f->b, h, sizeof h);
    fb_put(&f->b, z, zn);
    free(z);
    return at;
}

/* A stack record: id, 1024 frames (or n) from `first`, 16 bytes apart. */
static void stack_record(fbuf *b, uint32_t id, uint32_t n, uint64_t first)
{
    unsigned char one = TRACE_DEF_STACK;
    fb_put(b, &one, 1);
    fb_varint(b, id);
    fb_varint(b, 0);
    fb_varint(b, n);
    for (uint32_t i = 0; i < n; i++)
        fb_varint(b, trace_zigzag(i ? 16 : (int64_t)first));
}

/* A DEFS chunk of stack records filling BODY_MAX: ids 1000 + *next_id,
 * *next_id + 1, ... modulo `span` (span 0: never repeating). */
static uint64_t first_of_1000; /* the first frame of stack 1000's last definition */
static unsigned bomb_chunks;

/* The frames of a chunk's stacks start at the same address (its ordinal's
 * multiple of 64): the same records over and over compress best. */
static size_t stack_bomb_chunk(file *f, uint32_t *next_id, uint32_t span)
{
    fbuf body = {0};
    uint32_t count = 0;
    size_t rec = 1 + 5 + 1 + 2 + 1024 + 4;
    uint64_t first = 0x7f0000000000ull + (uint64_t)bomb_chunks++ * 64;
    while (body.len + rec <= BODY_MAX) {
        uint32_t id = span ? 1000 + *next_id % span : 1000 + *next_id;
        if (id == 1000)
            first_of_1000 = first;
        stack_record(&body, id, 1024, first);
        (*next_id)++;
        count++;
    }
    size_t at = file_chunk(f, TRACE_CHUNK_DEFS, count, &body);
    free(body.p);
    return at;
}

/* ---- reading in a child, measured --------------------------------------- */

typedef struct outcome {
    long grew_kb; /* peak RSS growth while reading */
    size_t events, nindex;
    int events_match, rc, complete, stacks_ok;
    char err[MT_TRACE_ERR_MAX];
    char meta[64];
} outcome;

static long peak_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The events back, compared with the honest ones; the stacks they name
 * checked against trace_test.h's frames; bombs' ids against their last
 * definition (`last_first`: stack 1000's first frame, 0 not checked). */
static void read_file(const file *f, unsigned flags, uint64_t last_first, outcome *o)
{
    mt_trace_reader *r;
    memset(o, 0, sizeof *o);
    o->rc = 2;
    if (mt_trace_open_mem(f->b.p, f->b.len, "bomb.mtt", flags, &r, o->err, sizeof o->err) < 0)
        return;
    o->nindex = mt_trace_index_count(r);
    mt_trace_event ev;
    o->events_match = 1;
    while ((o->rc = mt_trace_next(r, &ev)) == 1) {
        if (o->events < f->honest_events) {
            mt_trace_event want = texpect(&f->evs[o->events], 0, 1);
            if (!tsame(&ev, &want))
                o->events_match = 0;
        } else
            o->events_match = 0;
        o->events++;
    }
    if (o->rc < 0)
        snprintf(o->err, sizeof o->err, "%s", mt_trace_error(r));
    o->complete = mt_trace_complete(r);
    o->stacks_ok = 1;
    for (uint32_t id = 1; id <= 2; id++) {
        uint64_t want[16];
        unsigned cat;
        int n = tstack_frames(id, want, 16, &cat);
        const mt_trace_stack *s = mt_trace_stack_get(r, id);
        if (!s || s->nframes != (uint32_t)n || memcmp(s->frames, want, (size_t)n * 8))
            o->stacks_ok = 0;
    }
    if (last_first) {
        const mt_trace_stack *s = mt_trace_stack_get(r, 1000);
        if (!s || s->nframes != 1024 || s->frames[0] != last_first ||
            s->frames[1023] != last_first + 1023 * 16)
            o->stacks_ok = 0;
    }
    const char *m = mt_trace_meta(r, "exe");
    snprintf(o->meta, sizeof o->meta, "%s", m ? m : "");
    mt_trace_close(r);
}

/* read_file in a child process: its outcome and peak RSS growth. */
static void measured(const file *f, unsigned flags, uint64_t last_first, outcome *o)
{
    int p[2];
    if (pipe(p) < 0) {
        perror("pipe");
        exit(1);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        long before = peak_kb();
        outcome mine;
        read_file(f, flags, last_first, &mine);
        mine.grew_kb = peak_kb() - before;
        ssize_t k = write(p[1], &mine, sizeof mine);
        _exit(k == (ssize_t)sizeof mine ? 0 : 1);
    }
    close(p[1]);
    memset(o, 0, sizeof *o);
    size_t got = 0;
    while (got < sizeof *o) {
        ssize_t k = read(p[0], (char *)o + got, sizeof *o - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got != sizeof *o || !WIFEXITED(status) || WEXITSTATUS(status)) {
        memset(o, 0, sizeof *o);
        o->rc = 3;
        snprintf(o->err, sizeof o->err, "the reading child died (status 0x%x)", status);
    }
}

static void show(const char *what, const file *f, const outcome *o)
{
    printf("  %s: %zu-byte file, %zu events (match %d, stacks %d), rc %d, peak RSS +%ld MB, error: %s\n",
           what, f->b.len, o->events, o->events_match, o->stacks_ok, o->rc, o->grew_kb / 1024, o->err);
}

/* Does err name chunk k at offset off, then say `what`? */
static int names(const char *err, uint64_t k, size_t off, const char *what)
{
    char want[128];
    snprintf(want, sizeof want, "bomb.mtt: chunk %llu at offset %zu: ", (unsigned long long)k, off);
    return strstr(err, want) == err && strstr(err, what);
}

/* ---- the hostile files ---------------------------------------------------- */

#define BOUND_KB (256L * 1024) /* what reading a bomb may grow by: a chunk or two, not the bomb */

static file redefined; /* kept for the CLI's run */
static file distinct;

/* The same 4 stacks of 1024 frames, defined again and again: 3 chunks of
 * 64 MiB, ~195,000 definitions, 1.6 GB of frames if each kept its own. */
static void redefinition_bomb(void)
{
    file *f = &redefined;
    file_honest(f);
    uint32_t next = 0;
    for (int i = 0; i < 3; i++)
        stack_bomb_chunk(f, &next, 4);
    outcome o;
    measured(f, MT_TRACE_PREFETCH, first_of_1000, &o);
    char label[200];
    snprintf(label, sizeof label,
             "%u redefinitions of 4 stacks of 1024 frames (a %zu KB file): read whole, peak RSS +%ld MB "
             "(bound %ld)",
             next, f->b.len / 1024, o.grew_kb / 1024, BOUND_KB / 1024);
    int ok = o.rc == 0 && o.events == f->honest_events && o.events_match && o.stacks_ok && !o.complete &&
             o.grew_kb < BOUND_KB;
    if (!ok)
        show("redefinitions", f, &o);
    CHECK(label, ok);
}

/* Ever new stacks of 1024 frames: past 512 MB in the second chunk. */
static void distinct_bomb(void)
{
    file *f = &distinct;
    file_honest(f);
    uint32_t next = 0;
    size_t at[2];
    uint64_t seq0 = f->seq;
    for (int i = 0; i < 2; i++)
        at[i] = stack_bomb_chunk(f, &next, 0);
    outcome o;
    measured(f, 0, 0, &o);
    char label[200];
    snprintf(
        label, sizeof label,
        "%u distinct stacks of 1024 frames (a %zu KB file): the honest events, then \"definitions exceed "
        "512 MB\" naming chunk %llu; peak RSS +%ld MB",
        next, f->b.len / 1024, (unsigned long long)seq0 + 1, o.grew_kb / 1024);
    int ok = o.rc == -1 && o.events == f->honest_events && o.events_match && o.stacks_ok &&
             names(o.err, seq0 + 1, at[1], "definitions exceed 512 MB") &&
             o.grew_kb < 512L * 1024 + 2 * BOUND_KB;
    if (!ok)
        show("distinct", f, &o);
    CHECK(label, ok);
}

/* 64 meta keys are kept (each value replaced many times, its last kept);
 * a 65th is refused. */
static void meta_keys(void)
{
    file f;
    file_honest(&f);
    fbuf body = {0};
    uint32_t count = 0;
    for (int round = 0; round < 200; round++)
        for (int k = 0; k < 63; k++) {
            char key[32], val[64];
            snprintf(key, sizeof key, "key%d", k);
            snprintf(val, sizeof val, "value %d of %s", round, key);
            unsigned char kind = TRACE_DEF_META;
            fb_put(&body, &kind, 1);
            fb_string(&body, key);
            fb_string(&body, val);
            count++;
        }
    unsigned char kind = TRACE_DEF_META;
    fb_put(&body, &kind, 1);
    fb_string(&body, "exe");
    fb_string(&body, "/bin/last");
    count++;
    file_chunk(&f, TRACE_CHUNK_DEFS, count, &body);
    outcome o;
    read_file(&f, 0, 0, &o);
    CHECK("64 meta keys, each written 200 times: read, the last value kept",
          o.rc == 0 && o.events == f.honest_events && !strcmp(o.meta, "/bin/last"));
    body.len = 0;
    fb_put(&body, &kind, 1);
    fb_string(&body, "one too many");
    fb_string(&body, "x");
    size_t at = file_chunk(&f, TRACE_CHUNK_DEFS, 1, &body);
    read_file(&f, 0, 0, &o);
    int ok =
        o.rc == -1 && o.events == f.honest_events && names(o.err, f.seq - 1, at, "more than 64 meta keys");
    if (!ok)
        show("meta", &f, &o);
    CHECK("a 65th meta key: an error naming its chunk", ok);
    free(body.p);
    file_free(&f);
}

/* An end record of 5000 statistics (the writer writes 6). */
static void many_statistics(void)
{
    file f;
    file_honest(&f);
    fbuf body = {0};
    for (int i = 0; i < 5000; i++) {
        fb_string(&body, "");
        fb_varint(&body, (uint64_t)i);
    }
    size_t at = file_chunk(&f, TRACE_CHUNK_END, 5000, &body);
    outcome o;
    read_file(&f, 0, 0, &o);
    int ok = o.rc == -1 && o.events == f.honest_events && names(o.err, f.seq - 1, at, "5000 statistics");
    if (!ok)
        show("statistics", &f, &o);
    CHECK("an end record of 5000 statistics: an error naming its chunk", ok);
    free(body.p);
    file_free(&f);
}

/* An index (with its trailer) claiming 12 million entries of 5 bytes:
 * more chunks than the file could hold before it. The file reads as one
 * without an index. */
static void index_bomb(void)
{
    file f;
    file_honest(&f);
    uint32_t n = 12u << 20;
    fbuf body = {0};
    body.p = calloc(1, (size_t)n * 5);
    body.len = body.cap = (size_t)n * 5;
    uint64_t seq = f.seq;
    f.seq = n; /* the index's sequence number is its entry count */
    size_t at = file_chunk(&f, TRACE_CHUNK_INDEX, n, &body);
    unsigned char t[TRACE_TRAILER_SIZE];
    memcpy(t, TRACE_TRAILER_MAGIC, 8);
    trace_put64(t + 8, at);
    trace_put32(t + 16, n);
    trace_put32(t + 20, trace_crc32c(0, t, 20));
    fb_put(&f.b, t, sizeof t);
    outcome o;
    measured(&f, 0, 0, &o);
    char label[200];
    snprintf(label, sizeof label,
             "an index claiming %u entries (a %zu KB file): not taken (%zu entries), peak RSS +%ld MB", n,
             f.b.len / 1024, o.nindex, o.grew_kb / 1024);
    /* reading on, the index chunk is out of sequence: the honest events, then that error */
    int ok = o.nindex == 0 && o.events == f.honest_events && o.events_match && o.rc == -1 &&
             names(o.err, seq, at, "sequence number") && o.grew_kb < BOUND_KB;
    if (!ok)
        show("index", &f, &o);
    CHECK(label, ok);
    free(body.p);
    file_free(&f);
}

/* Stacks defined again by hand: the frames a redefinition gives back serve
 * the next stack of as many frames, and no other stack changes. */
static void reuse(void)
{
    file f;
    file_honest(&f);
    fbuf body = {0};
    stack_record(&body, 501, 3, 0x1000);    /* A */
    stack_record(&body, 502, 3, 0x2000);    /* B */
    stack_record(&body, 501, 3, 0x3000);    /* 501 again: A's frames given back */
    stack_record(&body, 503, 3, 0x4000);    /* takes them */
    stack_record(&body, 504, 0, 0);         /* none */
    stack_record(&body, 504, 1024, 0x5000); /* 0 frames to 1024 */
    stack_record(&body, 505, 0, 0);         /* takes 504's old slot */
    file_chunk(&f, TRACE_CHUNK_DEFS, 7, &body);
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    int ok = mt_trace_open_mem(f.b.p, f.b.len, "reuse.mtt", 0, &r, err, sizeof err) == 0;
    mt_trace_event ev;
    size_t n = 0;
    while (ok && mt_trace_next(r, &ev) == 1)
        n++;
    const struct {
        uint32_t id, n;
        uint64_t first;
    } want[] = {{501, 3, 0x3000}, {502, 3, 0x2000}, {503, 3, 0x4000}, {504, 1024, 0x5000}, {505, 0, 0}};
    for (size_t i = 0; ok && i < sizeof want / sizeof want[0]; i++) {
        const mt_trace_stack *s = mt_trace_stack_get(r, want[i].id);
        ok = s && s->nframes == want[i].n;
        for (uint32_t k = 0; ok && k < want[i].n; k++)
            ok = s->frames[k] == want[i].first + 16 * k;
        if (!ok)
            printf("  stack %u: %u frames, first 0x%llx\n", want[i].id, s ? s->nframes : 0,
                   s && s->nframes ? (unsigned long long)s->frames[0] : 0ull);
    }
    CHECK("stacks defined again: each has its last frames, the frames given back serve the next stack",
          ok && n == f.honest_events && !mt_trace_error(r));
    mt_trace_close(r);
    free(body.p);
    file_free(&f);
}

/* An honest, finished trace reads as written: every event, stack, module,
 * meta value and statistic. */
static void honest(void)
{
    gen_state g;
    gen_init(&g, 3, 4000, 64, 0xFFFFF000u);
    g.skew = 1; /* 64 stacks */
    mt_trace_event *evs = calloc(4000 * 6 + 8, sizeof *evs);
    size_t n = 0;
    while (gen_next(&g, &evs[n]))
        n++;
    gen_free(&g);
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {.chunk_events = 700, .start_ns = 0};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_meta(w, "exe", "/bin/honest");
    mt_trace_write_meta(w, "ended", "exit");
    mt_trace_write_begin(w);
    for (size_t i = 0; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    const char *sn[] = {"events_lost"};
    uint64_t sv[] = {5};
    mt_trace_write_finish(w, sn, sv, 1);
    mt_trace_writer_destroy(w);
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    int ok = mt_trace_open_mem(m->p, m->len, "honest.mtt", MT_TRACE_PREFETCH, &r, err, sizeof err) == 0;
    mt_trace_event ev;
    size_t got = 0, stacks_bad = 0;
    while (ok && mt_trace_next(r, &ev) == 1) {
        mt_trace_event want = texpect(&evs[got < n ? got : 0], 0, 1);
        if (got >= n || !tsame(&ev, &want))
            ok = 0;
        if (ev.stack) {
            uint64_t f[16];
            unsigned cat;
            int k = tstack_frames(ev.stack, f, 16, &cat);
            const mt_trace_stack *s = mt_trace_stack_get(r, ev.stack);
            if (!s || s->nframes != (uint32_t)k || memcmp(s->frames, f, (size_t)k * 8) || s->category != cat)
                stacks_bad++;
        }
        got++;
    }
    int found;
    ok = ok && got == n && !stacks_bad && !mt_trace_error(r) && mt_trace_complete(r) &&
         mt_trace_module_count(r) == 3 /* the duplicate written once */ &&
         !strcmp(mt_trace_meta(r, "exe"), "/bin/honest") && !strcmp(mt_trace_meta(r, "ended"), "exit") &&
         mt_trace_stat(r, "events_lost", &found) == 5 && found && mt_trace_index_count(r) > 0;
    if (!ok)
        printf("  got %zu of %zu, stacks bad %zu, error %s, complete %d, modules %zu, index %zu\n", got, n,
               stacks_bad, mt_trace_error(r) ? mt_trace_error(r) : "-", mt_trace_complete(r),
               mt_trace_module_count(r), mt_trace_index_count(r));
    CHECK("an honest trace: every event, stack, module, meta value and statistic as written", ok);
    mt_trace_close(r);
    tbuf_delete(m);
    free(evs);
}

/* ---- the CLI on the bombs ------------------------------------------------ */

/* Runs `memtrail analyze PATH`: exit status, peak RSS (KB), stderr. */
static int analyze_cli(const char *mt, const char *path, long *rss_kb, char *errbuf, size_t errlen)
{
    char errpath[] = "/tmp/mt_defs_errXXXXXX";
    int efd = mkstemp(errpath);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(efd, 2);
        execl(mt, mt, "analyze", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    wait4(pid, &status, 0, &ru);
    *rss_kb = ru.ru_maxrss;
    ssize_t k = pread(efd, errbuf, errlen - 1, 0);
    errbuf[k > 0 ? k : 0] = 0;
    close(efd);
    unlink(errpath);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void cli(void)
{
    const char *root = getenv("MT_ROOT"), *build = getenv("BUILD");
    char mt[1024];
    if (build && build[0] == '/')
        snprintf(mt, sizeof mt, "%s/bin/memtrail", build);
    else
        snprintf(mt, sizeof mt, "%s/%s/bin/memtrail", root ? root : ".", build ? build : "build");
    if (access(mt, X_OK) != 0) {
        printf("SKIP defs-cli: %s not built\n", mt);
        return;
    }
    char dir[] = "/tmp/mt_defsXXXXXX";
    if (!mkdtemp(dir)) {
        CHECK("a scratch directory", 0);
        return;
    }
    char path[1100], err[2048];
    long rss;
    snprintf(path, sizeof path, "%s/redefined.mtt", dir);
    FILE *o = fopen(path, "wb");
    fwrite(redefined.b.p, 1, redefined.b.len, o);
    fclose(o);
    int rc = analyze_cli(mt, path, &rss, err, sizeof err);
    char label[300];
    snprintf(label, sizeof label,
             "memtrail analyze of the redefinitions (%zu KB): peak RSS %ld MB (bound 300), status 1 "
             "(no end record)",
             redefined.b.len / 1024, rss / 1024);
    CHECK(label, rc == 1 && rss < 300L * 1024 && strstr(err, "no end record"));
    if (rc != 1 || rss >= 300L * 1024)
        printf("  status %d, stderr: %s\n", rc, err);
    unlink(path);

    snprintf(path, sizeof path, "%s/distinct.mtt", dir);
    o = fopen(path, "wb");
    fwrite(distinct.b.p, 1, distinct.b.len, o);
    fclose(o);
    rc = analyze_cli(mt, path, &rss, err, sizeof err);
    char want[1300];
    snprintf(want, sizeof want, "memtrail: %s: chunk ", path);
    snprintf(
        label, sizeof label,
        "memtrail analyze of the distinct stacks (%zu KB): \"definitions exceed 512 MB\" naming the file "
        "and chunk, status 1, peak RSS %ld MB (bound 800)",
        distinct.b.len / 1024, rss / 1024);
    int ok = rc == 1 && strstr(err, want) && strstr(err, "definitions exceed 512 MB") && rss < 800L * 1024;
    CHECK(label, ok);
    if (!ok)
        printf("  status %d, stderr: %s\n", rc, err);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    honest();
    reuse();
    meta_keys();
    many_statistics();
    index_bomb();
    redefinition_bomb();
    distinct_bomb();
    cli();
    file_free(&redefined);
    file_free(&distinct);
    return failures != 0;
}
