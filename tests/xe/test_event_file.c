/* test_event_file.c — the event_file target: files read back and compared
 * event by event, rollover counts and sizes, max_rollover_files, failures
 * (no directory, a full device, a write cut short by the file size limit)
 * counted with the files left readable, and a pluggable encoder. */
#include "target_fixture.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ---- event_file ---- */

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Reads a raw file: checks its header, appends its events to evs. */
static int read_raw(const char *path, xe_event *evs, int *n, long *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char hdr[16], rec[72];
    if (fread(hdr, 1, 16, f) != 16 || memcmp(hdr, "MTXERAW1", 8) != 0 || get_le(hdr + 8, 4) != 1 ||
        get_le(hdr + 12, 4) != 72) {
        fclose(f);
        return -2;
    }
    size_t k;
    while ((k = fread(rec, 1, 72, f)) == 72) {
        xe_event *e = &evs[(*n)++];
        e->type = (uint16_t)get_le(rec, 2);
        e->category = (uint16_t)get_le(rec + 2, 2);
        e->tid = (uint32_t)get_le(rec + 4, 4);
        e->cpu = (uint32_t)get_le(rec + 8, 4);
        e->data_len = (uint32_t)get_le(rec + 12, 4);
        e->time_ns = get_le(rec + 16, 8);
        e->size = get_le(rec + 24, 8);
        e->address = get_le(rec + 32, 8);
        e->old_address = get_le(rec + 40, 8);
        e->site = get_le(rec + 48, 8);
        e->key = get_le(rec + 56, 8);
        e->value = get_le(rec + 64, 8);
        e->data = NULL;
    }
    *size = ftell(f);
    fclose(f);
    return k == 0 ? 0 : -3; /* a partial record */
}

static void file_name(char *buf, size_t cap, const char *base, int seq)
{
    if (seq)
        snprintf(buf, cap, "%s/%s.%d", dir, base, seq);
    else
        snprintf(buf, cap, "%s/%s", dir, base);
}

static size_t enc_header(void *buf, size_t cap)
{
    if (cap < 4)
        return 0;
    memcpy(buf, "TEST", 4);
    return 4;
}
static size_t enc_encode(const xe_event *evs, size_t n, void *buf, size_t cap, size_t *consumed)
{
    size_t i = 0;
    for (; i < n && (i + 1) * 8 <= cap; i++)
        memcpy((char *)buf + i * 8, &evs[i].value, 8);
    *consumed = i;
    return i * 8;
}
static const xe_file_encoder test_encoder = {
    .name = "test8", .file_header = enc_header, .encode = enc_encode};

/* A stateful encoder: "HDR!" at each file's begin, chunks of up to 10
 * events (u64 count + the events' values) written when full or at a flush
 * with events, "END!" when a file ends; calls are logged in order. */
typedef struct st_enc {
    int (*write)(void *ctx, const void *buf, size_t n);
    void *ctx;
    uint64_t vals[10];
    int n, begins, ends, destroyed, failed_writes;
    char log[256];
} st_enc;
static st_enc st_one;
static void st_log(st_enc *e, char c)
{
    size_t l = strlen(e->log);
    if (l + 1 < sizeof e->log)
        e->log[l] = c;
}
static void *st_create(int (*write)(void *ctx, const void *buf, size_t n), void *ctx)
{
    memset(&st_one, 0, sizeof st_one);
    st_one.write = write;
    st_one.ctx = ctx;
    return &st_one;
}
static int st_put(st_enc *e, const void *buf, size_t n)
{
    int rc = e->write(e->ctx, buf, n);
    if (rc < 0)
        e->failed_writes++;
    return rc;
}
static int st_begin(void *st)
{
    st_enc *e = st;
    e->begins++;
    st_log(e, 'B');
    return st_put(e, "HDR!", 4);
}
static void st_chunk(st_enc *e)
{
    if (!e->n)
        return;
    unsigned char buf[8 + 80];
    uint64_t n = (uint64_t)e->n;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, e->vals, 8 * n);
    st_log(e, 'C');
    (void)st_put(e, buf, 8 + 8 * n);
    e->n = 0;
}
static void st_event(void *st, const xe_event *ev)
{
    st_enc *e = st;
    e->vals[e->n++] = ev->value;
    if (e->n == 10)
        st_chunk(e);
}
static void st_flush(void *st)
{
    st_chunk(st);
}
static void st_end(void *st)
{
    st_enc *e = st;
    st_chunk(e);
    e->ends++;
    st_log(e, 'E');
    (void)st_put(e, "END!", 4);
}
static void st_destroy(void *st)
{
    ((st_enc *)st)->destroyed++;
}
static const xe_file_encoder stateful_encoder = {
    .name = "stateful",
    .create = st_create,
    .begin = st_begin,
    .event = st_event,
    .flush = st_flush,
    .end = st_end,
    .destroy = st_destroy,
};

/* Reads a stateful file: HDR!, chunks, END!; appends the values. 0 when whole. */
static int read_stateful(const char *path, uint64_t *vals, int *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static unsigned char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (len < 8 || memcmp(buf, "HDR!", 4) != 0 || memcmp(buf + len - 4, "END!", 4) != 0)
        return -2;
    size_t at = 4;
    while (at + 4 < len) {
        uint64_t k;
        memcpy(&k, buf + at, 8);
        if (k == 0 || k > 10 || at + 8 + 8 * k > len - 4)
            return -3;
        memcpy(vals + *n, buf + at + 8, 8 * k);
        *n += (int)k;
        at += 8 + 8 * k;
    }
    return at == len - 4 ? 0 : -4;
}

static void test_stateful(void)
{
    char params[192], path[256];
    xe_file_set_encoder(&stateful_encoder);
    /* Files of at most 200 bytes: a file rolls over after the chunk that
     * takes it there (4 + 88 + 88 + 88 > 200 after 30 events). */
    snprintf(params, sizeof params, "filename=%s/st.bin,max_file_size=200B,max_rollover_files=0", dir);
    xe_target *t = make(&xe_target_event_file, params);
    xe_file_set_encoder(NULL);
    if (!t) {
        CHECK("stateful encoder: target made", 0);
        return;
    }
    for (uint64_t i = 0; i < 95; i++) {
        t->ops->deliver(t, &(xe_event){.value = i * 7});
        if (i % 25 == 24)
            t->ops->flush(t);
    }
    t->ops->flush(t);
    t->ops->stop(t); /* the session stops: the last file ends */
    expect_view(t, "d['encoding'], d['events_written'], d['write_errors']", "stateful 95 0");
    CHECK("stateful encoder: every file begun is ended", st_one.begins == st_one.ends && st_one.begins == 4);
    static uint64_t vals[200];
    int n = 0, ok = 1;
    for (int f = 0; f < st_one.begins; f++) {
        file_name(path, sizeof path, "st.bin", f);
        ok &= read_stateful(path, vals, &n) == 0;
    }
    for (int i = 0; ok && i < 95; i++)
        ok = vals[i] == (uint64_t)i * 7;
    CHECK("stateful encoder: the files read back whole, every event in order", ok && n == 95);
    /* A restart after stop: the next file. */
    t->ops->deliver(t, &(xe_event){.value = 1000});
    t->ops->stop(t);
    n = 0;
    file_name(path, sizeof path, "st.bin", 4);
    CHECK("stateful encoder: after a restart, the next file",
          read_stateful(path, vals, &n) == 0 && n == 1 && vals[0] == 1000);
    destroy(t);
    CHECK("stateful encoder: destroyed with the target", st_one.destroyed == 1);

    /* /dev/full: a device node is not a file the target may write (nor
     * replace); nothing crashes, the error is counted. */
    if (access("/dev/full", W_OK) == 0) {
        xe_file_set_encoder(&stateful_encoder);
        t = make(&xe_target_event_file, "filename=/dev/full");
        xe_file_set_encoder(NULL);
        for (uint64_t i = 0; i < 5; i++)
            t->ops->deliver(t, &(xe_event){.value = i});
        t->ops->flush(t);
        expect_view(t, "d['write_errors'] > 0, d['last_error']", "True open: ENODEV");
        destroy(t);
    }
}

static void test_file(void)
{
    expect_init_error(&xe_target_event_file, "", "event_file needs filename=");
    expect_init_error(&xe_target_event_file, "max_file_size=1", "event_file needs filename=");
    expect_init_error(&xe_target_event_file, "filename=x,max_file_size=lots",
                      "max_file_size='lots' is not a size");
    expect_init_error(&xe_target_event_file, "filename=x,max_file_size=3TB",
                      "max_file_size='3TB' is not a size");
    expect_init_error(&xe_target_event_file, "filename=x,max_rollover_files=-1",
                      "max_rollover_files='-1' is not a number");
    expect_init_error(&xe_target_event_file, "filename=x,mode=1",
                      "unknown parameter 'mode' (accepted: filename, max_file_size, max_rollover_files)");

    char params[192], path[256];
    snprintf(params, sizeof params, "filename='%s/d.xel'", dir);
    xe_target *t = make(&xe_target_event_file, params);
    expect_view(t,
                "d['max_file_size_bytes'], d['max_rollover_files'], d['files'], d['current_file'], "
                "d['encoding'], d['last_error']",
                "1073741824 5 0 None raw None");
    destroy(t);
    snprintf(params, sizeof params, "filename=%s/d.xel,max_file_size=2", dir);
    t = make(&xe_target_event_file, params);
    expect_view(t, "d['max_file_size_bytes']", "2097152");
    destroy(t);

    /* 4 KB files hold 56 records of 72 bytes after the 16-byte header;
     * 500 events make 9 files; 5 are kept. */
    static xe_event evs[600];
    const int N = 500, per = (4096 - 16) / 72;
    for (int keep = 0; keep <= 5; keep += 5) {
        char base[32];
        snprintf(base, sizeof base, "ev%d.xel", keep);
        snprintf(params, sizeof params, "filename=%s/%s,max_file_size=4KB,max_rollover_files=%d", dir, base,
                 keep);
        t = make(&xe_target_event_file, params);
        for (int i = 0; i < N; i++) {
            xe_event ev = seq_event((uint64_t)i * 1000003u);
            ev.value = (uint64_t)i;
            t->ops->deliver(t, &ev);
            if (i % 37 == 36)
                t->ops->flush(t);
        }
        t->ops->flush(t);
        int files = (N + per - 1) / per, first = keep ? files - keep : 0;
        char want[200];
        snprintf(want, sizeof want, "%d %d %d %d 0 0", keep ? keep : files, files, N, files * 16 + N * 72);
        expect_view(t,
                    "d['files'], d['files_opened'], d['events_written'], d['written_bytes'], "
                    "d['events_dropped'], d['write_errors']",
                    want);
        int n = 0, ok = 1;
        for (int s = 0; s < files; s++) {
            long size = 0;
            file_name(path, sizeof path, base, s);
            int before = n;
            int rc = read_raw(path, evs, &n, &size);
            if (s < first) {
                ok &= rc == -1; /* deleted */
                continue;
            }
            int recs = s == files - 1 ? N - per * (files - 1) : per;
            ok &= rc == 0 && size == 16 + 72L * recs && n - before == recs;
        }
        file_name(path, sizeof path, base, files);
        ok &= access(path, F_OK) != 0;
        char name[120];
        snprintf(name, sizeof name, "event_file rollover (max_rollover_files=%d): files and sizes", keep);
        CHECK(name, ok);
        int same = n == N - first * per;
        for (int i = 0; same && i < n; i++) {
            xe_event want_ev = seq_event((uint64_t)(first * per + i) * 1000003u);
            want_ev.value = (uint64_t)(first * per + i);
            same = memcmp(&evs[i], &want_ev, sizeof want_ev) == 0;
        }
        snprintf(name, sizeof name, "event_file (max_rollover_files=%d): every kept event reads back", keep);
        CHECK(name, same);
        destroy(t);
    }

    /* An unwritable path: errors counted, events dropped, nothing crashes. */
    t = make(&xe_target_event_file, "filename=/nonexistent-memtrail-dir/x.xel");
    for (int i = 0; i < 10; i++)
        t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC});
    t->ops->flush(t);
    t->ops->deliver(t, &(xe_event){.type = XE_EV_ALLOC});
    t->ops->flush(t);
    expect_view(t, "d['write_errors'], d['events_dropped'], d['events_written'], d['files'], d['last_error']",
                "2 11 0 0 open: ENOENT");
    destroy(t);

    /* A device node (/dev/full): refused at open, left as it is; the
     * events are dropped and counted. */
    if (access("/dev/full", W_OK) == 0) {
        struct stat before, after;
        int had = stat("/dev/full", &before) == 0;
        t = make(&xe_target_event_file, "filename=/dev/full");
        for (int i = 0; i < 5; i++)
            t->ops->deliver(t, &(xe_event){.type = XE_EV_FREE});
        t->ops->flush(t);
        expect_view(t, "d['write_errors'], d['events_dropped'], d['last_error']", "1 5 open: ENODEV");
        destroy(t);
        CHECK("event_file: /dev/full is still the device it was", had && stat("/dev/full", &after) == 0 &&
                                                                      S_ISCHR(after.st_mode) &&
                                                                      after.st_rdev == before.st_rdev);
    }

    /* A write failing part way (the file size limit, 10000 bytes): the
     * file is cut back to its last whole record and stays readable. In a
     * child, for the rlimit. 200 events, flushed every 30: the header and
     * 4 flushes (120 events, 8656 bytes) fit; the 5th, 6th and last
     * flushes each fail part way. */
    snprintf(path, sizeof path, "%s/limited.xel", dir);
    char jpath[256];
    snprintf(jpath, sizeof jpath, "%s/limited.json", dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {10000, 10000};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(2);
        snprintf(params, sizeof params, "filename=%s/limited.xel", dir);
        xe_target *c = make(&xe_target_event_file, params);
        if (!c)
            _exit(3);
        for (int i = 0; i < 200; i++) {
            xe_event ev = seq_event((uint64_t)i);
            c->ops->deliver(c, &ev);
            if (i % 30 == 29)
                c->ops->flush(c);
        }
        c->ops->flush(c);
        char *json = view(c);
        FILE *f = fopen(jpath, "w");
        if (!f || fputs(json, f) < 0 || fclose(f) != 0)
            _exit(4);
        destroy(c);
        _exit(0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK("file size limit child ran", WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FILE *f = fopen(jpath, "r");
    static char json[8192];
    size_t jn = f ? fread(json, 1, sizeof json - 1, f) : 0;
    json[jn] = '\0';
    if (f)
        fclose(f);
    char *out = py(json, "print(d['events_written'], d['events_dropped'], d['write_errors'], "
                         "d['last_error'], d['written_bytes'])");
    CHECK("partial write: counted", strcmp(out, "120 80 3 write: EFBIG 8656\n") == 0);
    if (strcmp(out, "120 80 3 write: EFBIG 8656\n") != 0)
        printf("  got '%s'\n", out);
    free(out);
    int n = 0;
    long size = 0;
    int rc = read_raw(path, evs, &n, &size);
    int ok = rc == 0 && n == 120 && size == 16 + 120 * 72;
    for (int i = 0; ok && i < n; i++)
        ok = evs[i].value == (uint64_t)i && seq_consistent(&evs[i]);
    CHECK("partial write: the file is cut back to whole records and reads back", ok);

    /* A pluggable encoder: header and records are its own. */
    xe_file_set_encoder(&test_encoder);
    snprintf(params, sizeof params, "filename=%s/enc.bin", dir);
    t = make(&xe_target_event_file, params);
    xe_file_set_encoder(NULL);
    for (uint64_t i = 0; i < 1000; i++)
        t->ops->deliver(t, &(xe_event){.value = i * 3});
    t->ops->flush(t);
    expect_view(t, "d['encoding'], d['written_bytes'], d['events_written']", "test8 8004 1000");
    destroy(t);
    snprintf(path, sizeof path, "%s/enc.bin", dir);
    f = fopen(path, "rb");
    static unsigned char bin[8004];
    ok = f && fread(bin, 1, sizeof bin, f) == sizeof bin && fgetc(f) == EOF && memcmp(bin, "TEST", 4) == 0;
    for (uint64_t i = 0; ok && i < 1000; i++)
        ok = get_le(bin + 4 + i * 8, 8) == i * 3;
    if (f)
        fclose(f);
    CHECK("pluggable encoder writes its own bytes", ok);
}

int main(void)
{
    if (fixture_setup() < 0)
        return 1;
    test_file();
    test_stateful();
    fixture_cleanup();
    return failures != 0;
}
