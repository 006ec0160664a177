/* test_session.c — the session engine against independent truth: the
 * seed's sizes (and the kernel's /proc/self/maps for what is really
 * mapped), exact loss accounting per retention mode under producer floods
 * (a test target records every delivered (thread, sequence) pair and the
 * producers keep their own tally), no event lost or duplicated under
 * NO_EVENT_LOSS, dispatch latency, large events, flush, restart, fork, and
 * fires from signal handlers. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "xe/xe.h"

/* ---- a test target: records (key = thread number, value = sequence) ---- */

#define MAXT 8
#define MAXSEQ 400000
static unsigned char *seen[MAXT]; /* delivery count per (thread, seq) */
static _Atomic uint64_t got, got_bytes, bad_events;
static uint64_t last_time_ns;
static int slow_flush; /* ms to sleep per flushed buffer */

static int rec_init(xe_target *t, const char *params, char *why, size_t whylen)
{
    (void)t, (void)params, (void)why, (void)whylen;
    return 0;
}
static void rec_deliver(xe_target *t, const xe_event *ev)
{
    (void)t;
    atomic_fetch_add(&got, 1);
    atomic_fetch_add(&got_bytes, ev->size);
    if (ev->key < MAXT && ev->value < MAXSEQ && seen[ev->key])
        seen[ev->key][ev->value]++;
    else
        atomic_fetch_add(&bad_events, 1);
    /* A data payload must arrive intact: bytes equal to (value & 0xff). */
    for (uint32_t i = 0; i < ev->data_len; i++)
        if (((const unsigned char *)ev->data)[i] != (unsigned char)ev->value) {
            atomic_fetch_add(&bad_events, 1);
            break;
        }
    if (ev->time_ns < last_time_ns / 2)
        atomic_fetch_add(&bad_events, 1);
    last_time_ns = ev->time_ns;
}
static void rec_flush(xe_target *t)
{
    (void)t;
    if (slow_flush)
        usleep((useconds_t)slow_flush * 1000);
}
static const xe_target_ops recorder = {
    .name = "recorder", .init = rec_init, .deliver = rec_deliver, .flush = rec_flush};

static void reset_seen(void)
{
    for (int i = 0; i < MAXT; i++) {
        if (!seen[i])
            seen[i] = calloc(MAXSEQ, 1);
        memset(seen[i], 0, MAXSEQ);
    }
    atomic_store(&got, 0);
    atomic_store(&got_bytes, 0);
    atomic_store(&bad_events, 0);
    last_time_ns = 0;
}

static void config(xe_config *c, const char *name, uint64_t max_memory, xe_partition_mode mode)
{
    xe_config_defaults(c);
    strcpy(c->name, name);
    c->max_memory = max_memory;
    c->mode = mode;
    c->max_dispatch_latency_ns = XE_LATENCY_INFINITE;
    c->ntargets = 1;
    c->targets[0].ops = &recorder;
}

static xe_session *make(const xe_config *c)
{
    xe_session *s = NULL;
    char why[256] = "";
    int rc = xe_session_create(c, &s, why, sizeof why);
    if (rc < 0)
        printf("# create %s: %d %s\n", c->name, rc, why);
    return s;
}

/* ---- sizing, live -------------------------------------------------------------- */

/* Bytes mapped under a name, from the kernel's own list. */
static uint64_t mapped_named(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uint64_t total = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (strstr(line, name) && sscanf(line, "%lx-%lx", &a, &b) == 2)
            total += b - a;
    }
    if (f)
        fclose(f);
    return total;
}

/* Resident anonymous memory, from the kernel (kB). */
static long rss_anon_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* The buffers are really there: creating the session raises the resident
 * anonymous memory by what it says it allocated (populated mappings), plus
 * at most a little for the session's own pages; dropping gives it back.
 * Where the kernel names anonymous mappings, the named ones add up too. */
static void check_resident(const xe_config *c, const char *what)
{
    char name[160];
    long before = rss_anon_kb();
    xe_session *s = make(c);
    long after = rss_anon_kb();
    if (!s) {
        snprintf(name, sizeof name, "%s: created", what);
        CHECK(name, 0);
        return;
    }
    xe_session_info in;
    xe_session_info_get(s, &in);
    long want = (long)(in.memory_allocated / 1024);
    uint64_t named = mapped_named("memtrail-xe-buffers");
    long held = rss_anon_kb();
    xe_session_drop(s);
    long dropped = rss_anon_kb();
    snprintf(name, sizeof name, "%s: resident memory grows by memory_allocated (%ld kB; kernel says +%ld kB)",
             what, want, after - before);
    CHECK(name,
          after - before >= want - 16 && after - before <= want + 256); /* RSS counters lag a few pages */
    snprintf(name, sizeof name, "%s: dropping gives it back (kernel says -%ld kB)", what, held - dropped);
    CHECK(name, held - dropped >= want - 16);
    snprintf(name, sizeof name, "%s: named mappings (where the kernel names them) add up", what);
    CHECK(name, named == 0 || named == in.memory_allocated);
}

static void test_sizes(void)
{
    /* The seed's first table: 2 CPUs, per_cpu, 637..642 KB. */
    static const struct {
        unsigned kb;
        uint64_t size, total;
    } seed_cpu[] = {
        {637, 130867, 654335}, {638, 130867, 654335}, {639, 130867, 654335},
        {640, 196403, 982015}, {641, 196403, 982015}, {642, 196403, 982015},
    };
    for (size_t i = 0; i < sizeof seed_cpu / sizeof seed_cpu[0]; i++) {
        xe_config c;
        config(&c, "sz", (uint64_t)seed_cpu[i].kb * 1024, XE_PART_PER_CPU);
        c.cpus = 2;
        xe_session *s = make(&c);
        CHECK("seed per_cpu row: created", s != NULL);
        if (!s)
            continue;
        xe_session_info in;
        xe_session_info_get(s, &in);
        CHECK("seed per_cpu row: 5 buffers", in.total_regular_buffers == 5);
        CHECK("seed per_cpu row: regular_buffer_size", in.regular_buffer_size == seed_cpu[i].size);
        CHECK("seed per_cpu row: total_buffer_size", in.total_buffer_size == seed_cpu[i].total);
        CHECK("seed per_cpu row: 2 partitions", in.partitions == 2);
        /* What is mapped is 5 whole buffers of k x 64 KiB. */
        uint64_t k = (seed_cpu[i].size + 205) / 65536;
        CHECK("seed per_cpu row: memory_allocated", in.memory_allocated == 5 * k * 65536);
        xe_session_drop(s);
        check_resident(&c, "seed per_cpu row");
    }

    /* The seed's second table (NONE): the first and last steps and a middle one. */
    static const struct {
        unsigned kb;
        uint64_t size, total;
    } seed_none[] = {
        {192, 130867, 392601}, {383, 130867, 392601},    {576, 261939, 785817},
        {767, 261939, 785817}, {2880, 1048371, 3145113}, {4096, 1441587, 4324761},
    };
    for (size_t i = 0; i < sizeof seed_none / sizeof seed_none[0]; i++) {
        xe_config c;
        config(&c, "none", (uint64_t)seed_none[i].kb * 1024, XE_PART_NONE);
        xe_session *s = make(&c);
        CHECK("seed none row: created", s != NULL);
        if (!s)
            continue;
        xe_session_info in;
        xe_session_info_get(s, &in);
        CHECK("seed none row: 3 buffers", in.total_regular_buffers == 3 && in.partitions == 1);
        CHECK("seed none row: sizes",
              in.regular_buffer_size == seed_none[i].size && in.total_buffer_size == seed_none[i].total);
        xe_session_drop(s);
    }
    /* Below 192 KB a NONE session cannot be sized: rejected with a reason. */
    xe_config c;
    config(&c, "small", 191 * 1024, XE_PART_NONE);
    xe_session *s = NULL;
    char why[256] = "";
    int rc = xe_session_create(&c, &s, why, sizeof why);
    CHECK("191 KB is rejected", rc == -EINVAL && s == NULL && why[0] != 0);
    /* The seed's big machines: 64 CPUs per_cpu = 160 buffers, 8 nodes per_node = 24. */
    config(&c, "big_cpu", 16u << 20, XE_PART_PER_CPU);
    c.cpus = 64;
    s = make(&c);
    xe_session_info in;
    if (s) {
        xe_session_info_get(s, &in);
        CHECK("64 CPUs per_cpu: 160 buffers, 64 partitions",
              in.total_regular_buffers == 160 && in.partitions == 64);
        xe_session_drop(s);
    } else {
        CHECK("64 CPUs per_cpu: created", 0);
    }
    config(&c, "big_node", 16u << 20, XE_PART_PER_NODE);
    c.nodes = 8;
    s = make(&c);
    if (s) {
        xe_session_info_get(s, &in);
        CHECK("8 nodes per_node: 24 buffers, 8 partitions",
              in.total_regular_buffers == 24 && in.partitions == 8);
        xe_session_drop(s);
    } else {
        CHECK("8 nodes per_node: created", 0);
    }
    /* Strict: what is mapped never exceeds MAX_MEMORY. */
    for (unsigned kb = 192; kb <= 1400; kb += 37) {
        config(&c, "strict", (uint64_t)kb * 1024, XE_PART_NONE);
        c.strict = 1;
        s = make(&c);
        if (!s) {
            CHECK("strict: sizes that fit are created", 0);
            continue;
        }
        xe_session_info_get(s, &in);
        CHECK("strict: memory_allocated <= max_memory", in.memory_allocated <= (uint64_t)kb * 1024);
        xe_session_drop(s);
        if (kb % 5 == 0)
            check_resident(&c, "strict");
    }
    /* Duplicate names are refused. */
    config(&c, "twice", 1u << 20, XE_PART_NONE);
    xe_session *a = make(&c), *b = NULL;
    rc = xe_session_create(&c, &b, why, sizeof why);
    CHECK("a second session with the same name is refused", a && rc == -EEXIST && !b);
    if (a)
        xe_session_drop(a);
}

/* ---- floods ------------------------------------------------------------------- */

struct producer {
    xe_session *s;
    int thread;
    int count;
    uint32_t data_len;
    long ok, dropped, other;
    unsigned char *ret; /* per seq: 1 collected, 2 dropped */
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    unsigned char data[256];
    for (int i = 0; i < p->count; i++) {
        memset(data, (unsigned char)i, sizeof data);
        xe_event ev = {.type = XE_EV_USER,
                       .size = 8,
                       .key = (uint64_t)p->thread,
                       .value = (uint64_t)i,
                       .data = data,
                       .data_len = p->data_len};
        int rc = xe_fire(p->s, &ev);
        if (rc == 1)
            p->ok++, p->ret[i] = 1;
        else if (rc == -ENOBUFS || rc == -EMSGSIZE)
            p->dropped++, p->ret[i] = 2;
        else
            p->other++;
    }
    return NULL;
}

/* Runs `nthreads` producers; returns totals. */
static void flood(xe_session *s, int nthreads, int count, uint32_t data_len, long *ok, long *dropped,
                  long *other, unsigned char **rets)
{
    pthread_t th[MAXT];
    struct producer p[MAXT];
    *ok = *dropped = *other = 0;
    for (int t = 0; t < nthreads; t++) {
        p[t] = (struct producer){s, t, count, data_len, 0, 0, 0, rets[t]};
        memset(rets[t], 0, MAXSEQ);
        pthread_create(&th[t], NULL, produce, &p[t]);
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        *ok += p[t].ok;
        *dropped += p[t].dropped;
        *other += p[t].other;
    }
}

static int delivered_match(int nthreads, int count, unsigned char **rets, int require_all)
{
    for (int t = 0; t < nthreads; t++)
        for (int i = 0; i < count; i++) {
            if (seen[t][i] > 1)
                return 0; /* duplicated */
            if (seen[t][i] && rets[t][i] != 1)
                return 0; /* delivered although the producer was told it was dropped */
            if (require_all && rets[t][i] == 1 && !seen[t][i])
                return 0;
        }
    return 1;
}

static void test_retention(enum xe_retention mode, const char *label, int nthreads, int count)
{
    unsigned char *rets[MAXT];
    for (int t = 0; t < nthreads; t++)
        rets[t] = calloc(MAXSEQ, 1);
    reset_seen();
    xe_config c;
    config(&c, label, 320 * 1024, XE_PART_PER_CPU); /* 2 CPUs: 5 buffers of 128 KiB - 205 */
    c.cpus = 2;
    c.retention = mode;
    slow_flush = mode == XE_NO_EVENT_LOSS ? 2 : 1; /* a dispatcher slower than the producers */
    xe_session *s = make(&c);
    CHECK("flood: session created", s != NULL);
    if (!s) {
        for (int t = 0; t < nthreads; t++)
            free(rets[t]);
        return;
    }
    CHECK("flood: started", xe_session_start(s) == 0);
    long ok, dropped, other;
    flood(s, nthreads, count, 24, &ok, &dropped, &other, rets);
    CHECK("flood: stopped", xe_session_stop(s) == 0);
    xe_session_info in;
    xe_session_info_get(s, &in);
    char name[128];
    printf("# %s: fired %ld collected %ld dropped %ld; delivered %lu, dropped_event_count %lu, "
           "dropped_buffer_count %lu, blocked %lu ms\n",
           label, ok + dropped, ok, dropped, (unsigned long)in.events_delivered,
           (unsigned long)in.dropped_event_count, (unsigned long)in.dropped_buffer_count,
           (unsigned long)(in.blocked_event_fire_time_ns / 1000000));
    snprintf(name, sizeof name, "%s: every fire was collected or dropped", label);
    CHECK(name, other == 0 && ok + dropped == (long)nthreads * count);
    snprintf(name, sizeof name, "%s: fired = delivered + dropped_event_count", label);
    CHECK(name, (uint64_t)(ok + dropped) == in.events_delivered + in.dropped_event_count);
    snprintf(name, sizeof name, "%s: the target got exactly the delivered events", label);
    CHECK(name, got == in.events_delivered && bad_events == 0);
    snprintf(name, sizeof name, "%s: nothing duplicated, nothing dropped was delivered", label);
    CHECK(name, delivered_match(nthreads, count, rets, mode != XE_ALLOW_MULTIPLE_EVENT_LOSS));
    snprintf(name, sizeof name, "%s: no buffer left pending", label);
    CHECK(name, in.pending_buffers == 0);
    if (mode == XE_ALLOW_SINGLE_EVENT_LOSS) {
        CHECK("single loss: drops happened and are counted one by one",
              dropped > 0 && (uint64_t)dropped == in.dropped_event_count && in.dropped_buffer_count == 0);
        CHECK("single loss: nobody waited", in.blocked_event_fire_time_ns == 0);
    } else if (mode == XE_ALLOW_MULTIPLE_EVENT_LOSS) {
        CHECK("multiple loss: whole buffers were dropped", in.dropped_buffer_count > 0);
        CHECK("multiple loss: their events are counted",
              in.dropped_event_count >= (uint64_t)dropped &&
                  in.dropped_event_count > in.dropped_buffer_count);
        CHECK("multiple loss: buffer policy", strcmp(in.buffer_policy_desc, "drop_full_buffer") == 0);
    } else {
        CHECK("no event loss: nothing dropped", dropped == 0 && in.dropped_event_count == 0);
        CHECK("no event loss: every event delivered exactly once",
              got == (uint64_t)nthreads * count && delivered_match(nthreads, count, rets, 1));
        CHECK("no event loss: producers waited (blocked_event_fire_time)", in.blocked_event_fire_time_ns > 0);
        CHECK("no event loss: buffer policy", strcmp(in.buffer_policy_desc, "do_not_drop_event") == 0);
    }
    xe_session_drop(s);
    slow_flush = 0;
    for (int t = 0; t < nthreads; t++)
        free(rets[t]);
}

/* ---- latency, flush, restart, large events --------------------------------------- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void fire_n(xe_session *s, int n, int thread)
{
    for (int i = 0; i < n; i++) {
        xe_event ev = {.type = XE_EV_USER, .key = (uint64_t)thread, .value = (uint64_t)i};
        xe_fire(s, &ev);
    }
}

static void test_latency(void)
{
    reset_seen();
    xe_config c;
    config(&c, "latency", 1u << 20, XE_PART_NONE);
    c.max_dispatch_latency_ns = 700ull * 1000000;
    xe_session *s = make(&c);
    if (!s || xe_session_start(s) != 0) {
        CHECK("latency: started", 0);
        return;
    }
    uint64_t t0 = now_ms();
    fire_n(s, 5, 0);
    uint64_t early = atomic_load(&got);
    uint64_t t_early = now_ms();
    while (atomic_load(&got) < 5 && now_ms() - t0 < 10000)
        usleep(2000);
    uint64_t t1 = now_ms();
    printf("# latency 700 ms: delivered after %lu ms\n", (unsigned long)(t1 - t0));
    CHECK("latency: nothing is delivered before the latency passed", t_early - t0 >= 600 || early == 0);
    CHECK("latency: a partly filled buffer is dispatched once the latency passed", got == 5);
    CHECK("latency: not before it", t1 - t0 >= 650);
    xe_session_drop(s);

    reset_seen();
    config(&c, "infinite", 1u << 20, XE_PART_NONE);
    s = make(&c);
    if (!s || xe_session_start(s) != 0) {
        CHECK("infinite: started", 0);
        return;
    }
    fire_n(s, 7, 0);
    usleep(1200 * 1000);
    CHECK("infinite latency: nothing dispatched while the buffer is not full", got == 0);
    CHECK("flush dispatches what is buffered", xe_session_flush(s) == 0 && got == 7);
    fire_n(s, 3, 1);
    CHECK("stop dispatches the rest", xe_session_stop(s) == 0 && got == 10);
    CHECK("stopped: fires are not collected", (fire_n(s, 1, 2), got == 10));
    xe_event ev = {.type = XE_EV_USER, .key = 2, .value = 0};
    CHECK("stopped: xe_fire returns 0", xe_fire(s, &ev) == 0);
    CHECK("restart", xe_session_start(s) == 0);
    CHECK("start twice is refused", xe_session_start(s) == -EALREADY);
    fire_n(s, 4, 3);
    xe_session_stop(s);
    CHECK("restarted session delivers", got == 14 && bad_events == 0);
    xe_session_drop(s);
}

static void test_large(void)
{
    static unsigned char big[300 * 1024];
    memset(big, 9, sizeof big);
    reset_seen();
    xe_config c;
    config(&c, "large", 256 * 1024, XE_PART_NONE);
    c.max_event_size = 512 * 1024;
    xe_session *s = make(&c);
    if (!s || xe_session_start(s) != 0) {
        CHECK("large: started", 0);
        return;
    }
    xe_session_info in;
    xe_session_info_get(s, &in);
    CHECK("large: two large buffers", in.total_large_buffers == 2 && in.large_buffer_size >= 512 * 1024);
    xe_event ev = {.type = XE_EV_USER, .key = 0, .value = 9, .data = big, .data_len = 200 * 1024};
    CHECK("large: a 200 KB event goes to a large buffer", xe_fire(s, &ev) == 1);
    static unsigned char huge[600 * 1024];
    ev.data = huge;
    ev.data_len = sizeof huge;
    CHECK("large: a 600 KB event is too big", xe_fire(s, &ev) == -EMSGSIZE);
    xe_session_stop(s);
    xe_session_info_get(s, &in);
    CHECK("large: delivered whole", got == 1 && got_bytes == 0 && bad_events == 0);
    CHECK("large: largest_event_dropped_size", in.largest_event_dropped_size == xe_event_bytes(sizeof huge));
    CHECK("large: dropped_event_count", in.dropped_event_count == 1);
    xe_session_drop(s);

    /* Without MAX_EVENT_SIZE an event bigger than a buffer is dropped. */
    config(&c, "nolarge", 192 * 1024, XE_PART_NONE);
    s = make(&c);
    xe_session_start(s);
    ev.data = big;
    ev.data_len = 140 * 1024;
    CHECK("no large buffers: a 140 KB event is dropped", xe_fire(s, &ev) == -EMSGSIZE);
    xe_session_info_get(s, &in);
    CHECK("no large buffers: recorded",
          in.largest_event_dropped_size == xe_event_bytes(140 * 1024) && in.dropped_event_count == 1);
    xe_session_drop(s);
}

/* ---- fork and signals --------------------------------------------------------------- */

static void test_fork(void)
{
    reset_seen();
    xe_config c;
    config(&c, "forked", 1u << 20, XE_PART_PER_CPU);
    c.retention = XE_NO_EVENT_LOSS;
    xe_session *s = make(&c);
    if (!s || xe_session_start(s) != 0) {
        CHECK("fork: started", 0);
        return;
    }
    fire_n(s, 100, 0);
    xe_session_flush(s);
    pid_t pid = fork();
    if (pid == 0) {
        fire_n(s, 50000, 1); /* many buffers: needs the child's own dispatcher */
        xe_session_stop(s);
        xe_session_info in;
        xe_session_info_get(s, &in);
        int okc = got == 50100 && in.dropped_event_count == 0 ? 0 : 1;
        if (okc)
            fprintf(stderr, "child: got %lu dropped %lu\n", (unsigned long)got,
                    (unsigned long)in.dropped_event_count);
        _exit(okc);
    }
    int st = 0;
    fire_n(s, 10, 2);
    waitpid(pid, &st, 0);
    xe_session_stop(s);
    CHECK("fork: the child's events are dispatched in the child", WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK("fork: the parent's session goes on", got == 110);
    xe_session_drop(s);
}

/* Records by key in the raw event files of dir whose names start with
 * `prefix` followed by nothing or by ".<rollover number>" (not by another
 * pid's ".<pid>"): keys 0-2 into n[]; anything else counts in n[3]. */
static void count_files(const char *dir, const char *prefix, long also_not, uint64_t n[4])
{
    memset(n, 0, 4 * sizeof n[0]);
    DIR *d = opendir(dir);
    size_t plen = strlen(prefix);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        const char *rest = e->d_name + plen;
        if (*rest && (*rest != '.' || atol(rest + 1) == also_not))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        unsigned char rec[72];
        if (!f || fread(rec, 1, 16, f) != 16 || memcmp(rec, "MTXERAW1", 8) != 0)
            n[3]++;
        while (f && fread(rec, 1, sizeof rec, f) == sizeof rec) {
            uint64_t key;
            memcpy(&key, rec + 56, 8);
            n[key < 3 ? key : 3]++;
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
}

/* A session writing an event file, forked before its first dispatch: the
 * child must write files of its own (FILE.PID, or its pid for %p), holding
 * exactly its own events; the parent's hold what was buffered at the fork
 * and its own, once each. Before: both made FILE, one renamed over the
 * other's, and one process's events were in no file (helper 77's find). */
static void test_fork_file(const char *label, const char *name, const char *extra)
{
    char dir[] = "/tmp/mt_xe_forkfile.XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK("fork, event_file: a scratch directory", 0);
        return;
    }
    xe_config c;
    config(&c, "forkfile", 1u << 20, XE_PART_NONE);
    c.retention = XE_NO_EVENT_LOSS;
    c.targets[0].ops = &xe_target_event_file;
    snprintf(c.targets[0].params, sizeof c.targets[0].params, "filename=%s/%s%s", dir, name, extra);
    xe_session *s = make(&c);
    if (!s || xe_session_start(s) != 0) {
        CHECK("fork, event_file: started", 0);
        return;
    }
    fire_n(s, 1000, 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        fire_n(s, 30000, 2);
        xe_session_stop(s);
        _exit(0);
    }
    fire_n(s, 20000, 1);
    int st = 0;
    waitpid(pid, &st, 0);
    xe_session_stop(s);
    xe_session_drop(s);
    char pp[128], cp[128];
    const char *at = strstr(name, "%p");
    if (at) {
        snprintf(pp, sizeof pp, "%.*s%ld%s", (int)(at - name), name, (long)getpid(), at + 2);
        snprintf(cp, sizeof cp, "%.*s%ld%s", (int)(at - name), name, (long)pid, at + 2);
    } else {
        snprintf(pp, sizeof pp, "%s", name);
        snprintf(cp, sizeof cp, "%s.%ld", name, (long)pid);
    }
    uint64_t par[4], chi[4];
    count_files(dir, pp, pid, par);
    count_files(dir, cp, -1, chi);
    char what[512];
    snprintf(
        what, sizeof what,
        "fork, event_file (%s): the parent's files hold the 1000 buffered at the fork and its 20000, the "
        "child's (%s) its 30000 only (parent %lu %lu %lu %lu, child %lu %lu %lu %lu)",
        label, cp, (unsigned long)par[0], (unsigned long)par[1], (unsigned long)par[2], (unsigned long)par[3],
        (unsigned long)chi[0], (unsigned long)chi[1], (unsigned long)chi[2], (unsigned long)chi[3]);
    CHECK(what, WIFEXITED(st) && WEXITSTATUS(st) == 0 && par[0] == 1000 && par[1] == 20000 && par[2] == 0 &&
                    par[3] == 0 && chi[0] == 0 && chi[1] == 0 && chi[2] == 30000 && chi[3] == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
}

static xe_session *sig_session;
static _Atomic long sig_ok, sig_dropped, sig_fired;
static void on_alarm(int sig)
{
    (void)sig;
    xe_event ev = {.type = XE_EV_USER, .key = 7, .value = (uint64_t)atomic_load(&sig_fired)};
    int rc = xe_fire(sig_session, &ev);
    atomic_fetch_add(&sig_fired, 1);
    if (rc == 1)
        atomic_fetch_add(&sig_ok, 1);
    else if (rc < 0)
        atomic_fetch_add(&sig_dropped, 1);
}

static void test_signals(enum xe_retention mode, const char *label)
{
    unsigned char *rets[MAXT];
    rets[0] = calloc(MAXSEQ, 1);
    reset_seen();
    xe_config c;
    config(&c, label, 192 * 1024, XE_PART_NONE);
    c.retention = mode;
    sig_session = make(&c);
    if (!sig_session || xe_session_start(sig_session) != 0) {
        CHECK("signals: started", 0);
        return;
    }
    atomic_store(&sig_ok, 0);
    atomic_store(&sig_dropped, 0);
    atomic_store(&sig_fired, 0);
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, NULL);
    long ok, dropped, other;
    flood(sig_session, 1, 300000, 0, &ok, &dropped, &other, rets);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_DFL);
    xe_session_stop(sig_session);
    xe_session_info in;
    xe_session_info_get(sig_session, &in);
    long fired = ok + dropped + sig_ok + sig_dropped;
    printf("# %s: %ld fires from signal handlers (%ld dropped), %ld from the thread\n", label,
           (long)sig_fired, (long)sig_dropped, ok + dropped);
    char name[128];
    snprintf(name, sizeof name, "%s: handlers fired events too", label);
    CHECK(name, sig_fired > 0);
    snprintf(name, sizeof name, "%s: fired = delivered + dropped with nested fires", label);
    CHECK(name,
          (uint64_t)fired == in.events_delivered + in.dropped_event_count && got == in.events_delivered);
    xe_session_drop(sig_session);
    free(rets[0]);
}

static void test_config(void)
{
    xe_config c;
    char why[256];
    CHECK("config: defaults", xe_config_parse("name=a", &c, why, sizeof why) == 0 &&
                                  c.max_memory == 4u << 20 && c.mode == XE_PART_NONE &&
                                  c.retention == XE_ALLOW_SINGLE_EVENT_LOSS &&
                                  c.max_dispatch_latency_ns == 30ull * 1000000000u);
    CHECK("config: options",
          xe_config_parse("name=b; max_memory=640KB; MEMORY_PARTITION_MODE=per_cpu;"
                          "event_retention_mode=no_event_loss; max_dispatch_latency=5s;"
                          "max_event_size=1MB; strict_max_memory=on",
                          &c, why, sizeof why) == 0 &&
              c.max_memory == 640 * 1024 && c.mode == XE_PART_PER_CPU && c.retention == XE_NO_EVENT_LOSS &&
              c.max_dispatch_latency_ns == 5000000000ull && c.max_event_size == 1u << 20 && c.strict == 1);
    CHECK("config: latency 0 is infinite",
          xe_config_parse("max_dispatch_latency=0", &c, why, sizeof why) == 0 &&
              c.max_dispatch_latency_ns == XE_LATENCY_INFINITE);
    CHECK("config: latency infinite",
          xe_config_parse("max_dispatch_latency=INFINITE", &c, why, sizeof why) == 0 &&
              c.max_dispatch_latency_ns == XE_LATENCY_INFINITE);
    CHECK("config: latency in ms", xe_config_parse("latency=250ms", &c, why, sizeof why) == 0 &&
                                       c.max_dispatch_latency_ns == 250000000ull);
    CHECK("config: a bare max_memory is KB",
          xe_config_parse("max_memory=512", &c, why, sizeof why) == 0 && c.max_memory == 512 * 1024);
    CHECK("config: unknown option named",
          xe_config_parse("name=x;colour=red", &c, why, sizeof why) == -EINVAL &&
              strstr(why, "colour") != NULL);
    CHECK("config: bad retention named",
          xe_config_parse("event_retention_mode=sometimes", &c, why, sizeof why) == -EINVAL &&
              strstr(why, "sometimes") != NULL);
    CHECK("config: bad latency",
          xe_config_parse("max_dispatch_latency=soon", &c, why, sizeof why) == -EINVAL);
    CHECK("config: option without value",
          xe_config_parse("name", &c, why, sizeof why) == -EINVAL && strstr(why, "needs a value") != NULL);
    CHECK("config: bad name", xe_config_parse("name=a b", &c, why, sizeof why) == -EINVAL);
    /* cpus= and nodes= take what `memtrail xe plan --cpus/--nodes` takes
     * (tests/cli/test_xe_plan.sh checks the same ends there). */
    CHECK("config: cpus=1 and nodes=1, the least",
          xe_config_parse("cpus=1;nodes=1", &c, why, sizeof why) == 0 && c.cpus == 1 && c.nodes == 1);
    CHECK("config: cpus=65536 and nodes=65536, the most (XE_MAX_COUNT)",
          xe_config_parse("cpus=65536;nodes=65536", &c, why, sizeof why) == 0 && c.cpus == XE_MAX_COUNT &&
              c.nodes == XE_MAX_COUNT);
    CHECK("config: cpus=0 refused, the range named",
          xe_config_parse("cpus=0", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "bad count '0' (1 to 65536)") == 0);
    CHECK("config: cpus=65537 refused, the range named",
          xe_config_parse("cpus=65537", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "bad count '65537' (1 to 65536)") == 0);
    /* An option once (a second value would replace the first unseen), as
     * a target's parameter; target once per kind. */
    CHECK("config: an option given twice is refused, named",
          xe_config_parse("name=x;max_memory=4MB;max_memory=8MB", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "session option 'max_memory' given twice") == 0);
    CHECK("config: an option given twice under its two names is refused, named both ways",
          xe_config_parse("memory_partition_mode=none; MODE=per_cpu", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "session option 'MODE' (memory_partition_mode) given twice") == 0);
    CHECK("config: name, where, cpus given twice are refused",
          xe_config_parse("name=a;name=b", &c, why, sizeof why) == -EINVAL &&
              strstr(why, "'name' given twice") != NULL &&
              xe_config_parse("where=size > 1;predicate=size < 9", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "session option 'predicate' (where) given twice") == 0 &&
              xe_config_parse("cpus=2;cpus=2", &c, why, sizeof why) == -EINVAL);
    CHECK("config: targets of two kinds are fine, one kind twice is not",
          xe_config_parse("target=ring_buffer;target=event_counter", &c, why, sizeof why) == 0 &&
              c.ntargets == 2 &&
              xe_config_parse("target=ring_buffer;target=ring_buffer", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "target 'ring_buffer' given twice") == 0);
    CHECK("config: an unknown option lists every option",
          xe_config_parse("colour=red", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "unknown session option 'colour' (name, max_memory, memory_partition_mode, "
                          "event_retention_mode, max_dispatch_latency, max_event_size, strict_max_memory, "
                          "events, where, target, start, cpus, nodes)") == 0);
    CHECK("config: nodes=0 and nodes=65537 refused",
          xe_config_parse("nodes=0", &c, why, sizeof why) == -EINVAL &&
              xe_config_parse("nodes=65537", &c, why, sizeof why) == -EINVAL &&
              strcmp(why, "bad count '65537' (1 to 65536)") == 0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_config();
    test_sizes();
    test_retention(XE_ALLOW_SINGLE_EVENT_LOSS, "single loss", 2, 200000);
    test_retention(XE_ALLOW_MULTIPLE_EVENT_LOSS, "multiple loss", 2, 200000);
    test_retention(XE_NO_EVENT_LOSS, "no event loss", 4, 100000);
    test_latency();
    test_large();
    test_fork();
    test_fork_file("one file each", "ev.xel", "");
    test_fork_file("rolling over", "ev.xel", ",max_file_size=20000B,max_rollover_files=0");
    test_fork_file("%p in the name", "ev.%p.xel", ",max_file_size=20000B,max_rollover_files=0");
    test_signals(XE_ALLOW_SINGLE_EVENT_LOSS, "signals, single loss");
    test_signals(XE_NO_EVENT_LOSS, "signals, no event loss");
    return failures != 0;
}
