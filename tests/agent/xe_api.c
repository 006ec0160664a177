/* xe_api.c — a program using memtrail's public event-session API
 * (memtrail.h), for tests/agent/test_sessions.sh. Each subcommand runs one
 * scenario and prints its ledger as JSON lines: what it fired, what the
 * calls returned, what the session's view and targets say, so the script
 * can hold them against independent truth (`memtrail xe plan`, the
 * kernel's /proc/self/maps, the event_file's bytes read back in python).
 *
 *   view DEF...               create+start each, its view and the memory it mapped
 *   hold DIR DEF...           create+start each, DIR/ready = pid, wait for DIR/go
 *   flood DIR MODE T N LEN    T threads fire N events of LEN data bytes into a
 *                             session whose event_file is a FIFO nobody reads yet
 *   noloss DIR T N            NO_EVENT_LOSS: T threads x N events (key = thread,
 *                             value = seq), the FIFO read late into DIR/noloss.raw
 *   latency 1s|infinite       when do fired events reach the ring buffer?
 *   predicate                 fire a table of events through a predicate
 *   allocs DIR                known allocations, for the agent's own sessions
 *   fork                      a session used across fork()
 *   forkagent DIR             allocations before and after fork(), for agent sessions
 *   targets DIR N             one session with a target of each kind: N user
 *                             events and N spans (every other one ended), each
 *                             target's mt_session_target_json() on a line
 *   stub                      the calls' returns (linked with the stub alone)
 *
 * Exit status 0, or 1 with a line on stderr when a call fails unexpectedly. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"
#include "memtrail_sessions.h"

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("xe_api: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static mt_session *create(const char *name, const char *def)
{
    char why[256];
    mt_session *s = NULL;
    int rc = mt_session_create(name, def, &s, why, sizeof why);
    if (rc != 0)
        die("mt_session_create '%s': %d (%s)", def, rc, why);
    return s;
}

static void start(mt_session *s)
{
    int rc = mt_session_start(s);
    if (rc != 0)
        die("mt_session_start: %d", rc);
}

/* The view's row as JSON members (no braces). */
static void print_info(mt_session *s)
{
    mt_session_info i;
    int rc = mt_session_info_get(s, &i);
    if (rc != 0)
        die("mt_session_info_get: %d", rc);
    printf("\"name\": \"%s\", \"state\": %d, \"pending_buffers\": %" PRIu64
           ", \"total_regular_buffers\": %" PRIu64 ", \"regular_buffer_size\": %" PRIu64
           ", \"total_large_buffers\": %" PRIu64 ", \"large_buffer_size\": %" PRIu64
           ", \"total_buffer_size\": %" PRIu64
           ", \"buffer_policy_desc\": \"%s\", \"dropped_event_count\": %" PRIu64
           ", \"dropped_buffer_count\": %" PRIu64 ", \"blocked_event_fire_time_ns\": %" PRIu64
           ", \"largest_event_dropped_size\": %" PRIu64 ", \"create_time_ns\": %" PRId64
           ", \"events_delivered\": %" PRIu64 ", \"max_memory\": %" PRIu64 ", \"memory_allocated\": %" PRIu64
           ", \"partition_mode\": %u, \"strict\": %d, \"partitions\": %u, \"ntargets\": %d",
           i.name, i.state, i.pending_buffers, i.total_regular_buffers, i.regular_buffer_size,
           i.total_large_buffers, i.large_buffer_size, i.total_buffer_size, i.buffer_policy_desc,
           i.dropped_event_count, i.dropped_buffer_count, i.blocked_event_fire_time_ns,
           i.largest_event_dropped_size, i.create_time_ns, i.events_delivered, i.max_memory,
           i.memory_allocated, i.partition_mode, i.strict, i.partitions, i.ntargets);
}

/* ---- view: sizes, and the kernel's word on the memory ------------------------ */

/* The address space as /proc/self/maps lists it. */
typedef struct ranges {
    int n;
    unsigned long lo[8192], hi[8192];
    uint64_t named; /* bytes named [anon:memtrail-xe-buffers] (kernels that name mappings) */
} ranges;

static void read_maps(ranges *r)
{
    char line[512];
    r->n = 0;
    r->named = 0;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        die("/proc/self/maps: %s", strerror(errno));
    while (fgets(line, sizeof line, f) && r->n < 8192) {
        if (sscanf(line, "%lx-%lx", &r->lo[r->n], &r->hi[r->n]) != 2)
            continue;
        if (strstr(line, "[anon:memtrail-xe-buffers]"))
            r->named += r->hi[r->n] - r->lo[r->n];
        r->n++;
    }
    fclose(f);
}

/* Bytes of [lo, hi) that b maps. */
static uint64_t covered(const ranges *b, unsigned long lo, unsigned long hi)
{
    uint64_t n = 0;
    for (int i = 0; i < b->n; i++) {
        unsigned long a = b->lo[i] > lo ? b->lo[i] : lo, z = b->hi[i] < hi ? b->hi[i] : hi;
        if (a < z)
            n += z - a;
    }
    return n;
}

/* Bytes a maps that b does not (a's new ranges, b being earlier), and of
 * those, how many c still maps. */
static uint64_t added(const ranges *a, const ranges *b, const ranges *c, uint64_t *still)
{
    uint64_t n = 0;
    *still = 0;
    for (int i = 0; i < a->n; i++) {
        uint64_t size = a->hi[i] - a->lo[i], old = covered(b, a->lo[i], a->hi[i]);
        n += size - old;
        if (c && size > old) /* a new range: how much of it c maps */
            *still += covered(c, a->lo[i], a->hi[i]) - (old ? covered(b, a->lo[i], a->hi[i]) : 0);
    }
    return n;
}

/* RssAnon of /proc/self/status, in bytes. */
static uint64_t rss_anon(void)
{
    char line[256];
    uint64_t kb = 0;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        die("/proc/self/status: %s", strerror(errno));
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %" SCNu64, &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* Per definition: the view after create and start, the address space the
 * create added (and RssAnon: the buffers are populated), and how much of
 * it is still mapped after the drop. */
static int cmd_view(int argc, char **argv)
{
    static ranges before, created, dropped;
    for (int k = 0; k < argc; k++) {
        read_maps(&before);
        uint64_t rss0 = rss_anon();
        char why[256];
        mt_session *s = NULL;
        int crc = mt_session_create(NULL, argv[k], &s, why, sizeof why);
        if (crc != 0) { /* a size the plan rejects too: say why, as JSON */
            printf("{\"create\": %d, \"why\": \"", crc);
            for (const char *c = why; *c; c++)
                printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
            printf("\"}\n");
            continue;
        }
        uint64_t rss1 = rss_anon();
        read_maps(&created);
        start(s);
        printf("{");
        print_info(s);
        int rc = mt_session_drop(s);
        read_maps(&dropped);
        uint64_t still, delta = added(&created, &before, &dropped, &still);
        printf(", \"create_maps_delta\": %" PRIu64 ", \"create_rss_delta\": %" PRId64
               ", \"named_buffers\": %" PRIu64 ", \"still_mapped_after_drop\": %" PRIu64 ", \"drop\": %d}\n",
               delta, (int64_t)(rss1 - rss0), created.named - before.named, still, rc);
    }
    return 0;
}

/* ---- hold: sessions a live query can see ------------------------------------ */

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0 ||
        rename(tmp, path) != 0)
        die("cannot write %s", path);
}

/* Waits (bounded: 60 s) for DIR/NAME. */
static void wait_file(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < 6000; i++) {
        if (access(path, F_OK) == 0)
            return;
        sleep_ms(10);
    }
    die("gave up waiting for %s", path);
}

static int cmd_hold(const char *dir, int argc, char **argv)
{
    mt_session *s[32];
    if (argc > 32)
        die("hold: at most 32 sessions");
    for (int k = 0; k < argc; k++) {
        s[k] = create(NULL, argv[k]);
        start(s[k]);
        printf("{");
        print_info(s[k]);
        printf("}\n");
    }
    fflush(stdout);
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    write_file(dir, "ready", pid);
    wait_file(dir, "go");
    for (int k = 0; k < argc; k++)
        if (mt_session_drop(s[k]) != 0)
            die("drop");
    return 0;
}

/* ---- producers --------------------------------------------------------------- */

typedef struct producer {
    pthread_t thread;
    mt_session *s;
    unsigned index;
    uint64_t events, data_len;
    uint64_t collected, dropped_nobufs, dropped_size, not_taken, other;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    static const char payload[1 << 20];
    for (uint64_t seq = 0; seq < p->events; seq++) {
        mt_event e = {.type = MT_EVENT_USER,
                      .key = p->index,
                      .value = seq,
                      .size = 64,
                      .data = p->data_len ? payload : NULL,
                      .data_len = p->data_len};
        int rc = mt_event_fire(p->s, &e);
        if (rc == 1)
            p->collected++;
        else if (rc == -ENOBUFS)
            p->dropped_nobufs++;
        else if (rc == -EMSGSIZE)
            p->dropped_size++;
        else if (rc == 0)
            p->not_taken++;
        else
            p->other++;
    }
    return NULL;
}

/* Runs n producers of `events` each; sums their tallies into *sum. */
static void run_producers(mt_session *s, int n, uint64_t events, uint64_t data_len, producer *sum)
{
    producer p[64];
    if (n < 1 || n > 64)
        die("1 to 64 threads");
    for (int i = 0; i < n; i++) {
        p[i] = (producer){.s = s, .index = (unsigned)i, .events = events, .data_len = data_len};
        if (pthread_create(&p[i].thread, NULL, produce, &p[i]) != 0)
            die("pthread_create");
    }
    *sum = (producer){0};
    for (int i = 0; i < n; i++) {
        pthread_join(p[i].thread, NULL);
        sum->collected += p[i].collected;
        sum->dropped_nobufs += p[i].dropped_nobufs;
        sum->dropped_size += p[i].dropped_size;
        sum->not_taken += p[i].not_taken;
        sum->other += p[i].other;
    }
}

/* ---- a FIFO: an event_file whose reader comes when we say ------------------ */

typedef struct drain {
    pthread_t thread;
    int fd;        /* the FIFO, read end */
    int out;       /* where its bytes go */
    long delay_ms; /* before the first read */
    uint64_t bytes;
} drain;

static void *drain_run(void *arg)
{
    drain *d = arg;
    char buf[65536];
    sleep_ms(d->delay_ms);
    int fl = fcntl(d->fd, F_GETFL);
    fcntl(d->fd, F_SETFL, fl & ~O_NONBLOCK);
    for (;;) {
        ssize_t r = read(d->fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* EOF: the session closed its file */
        if (write(d->out, buf, (size_t)r) != r)
            die("drain: write: %s", strerror(errno));
        d->bytes += (uint64_t)r;
    }
    return NULL;
}

/* Makes DIR/NAME.fifo, opens its read end (so the session's open for
 * writing does not wait), and DIR/NAME.raw for what it carries. */
static void fifo_open(const char *dir, const char *name, drain *d, char *fifo, size_t cap)
{
    char raw[4096];
    snprintf(fifo, cap, "%s/%s.fifo", dir, name);
    snprintf(raw, sizeof raw, "%s/%s.raw", dir, name);
    unlink(fifo);
    if (mkfifo(fifo, 0600) != 0)
        die("mkfifo %s: %s", fifo, strerror(errno));
    d->fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    d->out = open(raw, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (d->fd < 0 || d->out < 0)
        die("open %s / %s: %s", fifo, raw, strerror(errno));
}

static void print_tally(const producer *t, uint64_t fired)
{
    printf("\"fired\": %" PRIu64 ", \"collected\": %" PRIu64 ", \"dropped_nobufs\": %" PRIu64
           ", \"dropped_size\": %" PRIu64 ", \"not_taken\": %" PRIu64 ", \"other\": %" PRIu64,
           fired, t->collected, t->dropped_nobufs, t->dropped_size, t->not_taken, t->other);
}

/* Loss under a flood: the dispatcher is stuck writing into the FIFO until
 * the flood is over, so buffers fill and the retention mode decides. */
static int cmd_flood(const char *dir, const char *mode, int threads, uint64_t events, uint64_t data_len)
{
    char fifo[4096], def[8192];
    drain d = {0};
    fifo_open(dir, "flood", &d, fifo, sizeof fifo);
    snprintf(def, sizeof def,
             "name=flood; max_memory=192KB; memory_partition_mode=none; event_retention_mode=%s;"
             " max_dispatch_latency=infinite; target=event_file(filename=%s,max_file_size=1GB);"
             " target=ring_buffer(max_events_limit=10)",
             mode, fifo);
    mt_session *s = create(NULL, def);
    start(s);
    producer sum;
    run_producers(s, threads, events, data_len, &sum);
    if (pthread_create(&d.thread, NULL, drain_run, &d) != 0)
        die("pthread_create");
    if (mt_session_stop(s) != 0)
        die("mt_session_stop");
    uint64_t ring_total = 0;
    mt_event_record last[10];
    int n = mt_session_ring_read(s, last, 10, &ring_total);
    printf("{");
    print_tally(&sum, (uint64_t)threads * events);
    printf(", \"ring_read\": %d, \"ring_total\": %" PRIu64 ", ", n, ring_total);
    print_info(s);
    if (mt_session_drop(s) != 0)
        die("mt_session_drop");
    pthread_join(d.thread, NULL);
    printf(", \"fifo_bytes\": %" PRIu64 "}\n", d.bytes);
    return 0;
}

/* No loss: producers must wait while the FIFO's reader sleeps; every
 * event reaches DIR/noloss.raw, which python reads back. */
static int cmd_noloss(const char *dir, int threads, uint64_t events)
{
    char fifo[4096], def[8192];
    drain d = {.delay_ms = 300};
    fifo_open(dir, "noloss", &d, fifo, sizeof fifo);
    snprintf(
        def, sizeof def,
        "name=noloss; max_memory=320KB; memory_partition_mode=per_cpu; event_retention_mode=no_event_loss;"
        " target=event_file(filename=%s,max_file_size=4GB)",
        fifo);
    mt_session *s = create(NULL, def);
    start(s);
    if (pthread_create(&d.thread, NULL, drain_run, &d) != 0)
        die("pthread_create");
    producer sum;
    run_producers(s, threads, events, 0, &sum);
    if (mt_session_stop(s) != 0)
        die("mt_session_stop");
    printf("{");
    print_tally(&sum, (uint64_t)threads * events);
    printf(", ");
    print_info(s);
    if (mt_session_drop(s) != 0)
        die("mt_session_drop");
    pthread_join(d.thread, NULL);
    printf(", \"fifo_bytes\": %" PRIu64 "}\n", d.bytes);
    return 0;
}

/* ---- dispatch latency --------------------------------------------------------- */

static int ring_count(mt_session *s)
{
    mt_event_record r[16];
    uint64_t total;
    if (mt_session_ring_read(s, r, 16, &total) < 0)
        die("mt_session_ring_read");
    return (int)total;
}

/* Polls the ring buffer until it has `want` events (bounded); seconds waited. */
static double wait_ring(mt_session *s, int want, double limit)
{
    double t0 = now_s();
    while (ring_count(s) < want && now_s() - t0 < limit)
        sleep_ms(10);
    return now_s() - t0;
}

static int fire_n(mt_session *s, int n, uint64_t key)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        mt_event e = {.type = MT_EVENT_USER, .key = key, .value = (uint64_t)i};
        ok += mt_event_fire(s, &e) == 1;
    }
    return ok;
}

static int cmd_latency(const char *mode)
{
    char def[256];
    int infinite = strcmp(mode, "infinite") == 0;
    snprintf(def, sizeof def,
             "name=latency; max_dispatch_latency=%s; target=ring_buffer(max_events_limit=100)",
             infinite ? "infinite" : "1s");
    mt_session *s = create(NULL, def);
    start(s);
    double t0 = now_s();
    int fired = fire_n(s, 5, 1);
    int at_once = ring_count(s);
    printf("{\"mode\": \"%s\", \"fired\": %d, \"at_once\": %d", mode, fired, at_once);
    if (!infinite) {
        wait_ring(s, 5, 10.0);
        printf(", \"seen\": %d, \"seconds\": %.3f", ring_count(s), now_s() - t0);
    } else {
        sleep_ms(1500);
        printf(", \"after_1500ms\": %d", ring_count(s));
        if (mt_session_flush(s) != 0)
            die("mt_session_flush");
        wait_ring(s, 5, 5.0);
        printf(", \"after_flush\": %d", ring_count(s));
        fired += fire_n(s, 3, 2);
        sleep_ms(300);
        printf(", \"before_stop\": %d", ring_count(s));
        if (mt_session_stop(s) != 0)
            die("mt_session_stop");
        printf(", \"after_stop\": %d, \"fired_total\": %d", ring_count(s), fired);
    }
    printf("}\n");
    mt_session_drop(s);
    return 0;
}

/* ---- predicates ------------------------------------------------------------------ */

static int cmd_predicate(const char *where)
{
    char def[512];
    snprintf(def, sizeof def, "name=pred; where=%s; target=ring_buffer(max_events_limit=1000)", where);
    mt_session *s = create(NULL, def);
    start(s);
    static const unsigned types[] = {MT_EVENT_USER,    MT_EVENT_ALLOC, MT_EVENT_FREE,
                                     MT_EVENT_REALLOC, MT_EVENT_MMAP,  MT_EVENT_SPAN_BEGIN};
    static const uint64_t sizes[] = {0, 1, 4095, 4096, 4097, 65536, 1u << 20};
    printf("{\"fired\": [");
    uint64_t seq = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++, seq++) {
            mt_event e = {.type = types[t], .size = sizes[z], .key = seq % 10, .value = seq};
            int rc = mt_event_fire(s, &e);
            printf("%s{\"type\": %u, \"size\": %" PRIu64 ", \"key\": %" PRIu64 ", \"value\": %" PRIu64
                   ", \"rc\": %d}",
                   seq ? ", " : "", e.type, e.size, e.key, e.value, rc);
        }
    }
    if (mt_session_stop(s) != 0)
        die("mt_session_stop");
    mt_event_record r[1000];
    uint64_t total;
    int n = mt_session_ring_read(s, r, 1000, &total);
    printf("], \"ring_total\": %" PRIu64 ", \"ring\": [", total);
    for (int i = 0; i < n; i++)
        printf("%s%" PRIu64, i ? ", " : "", r[i].value);
    printf("]}\n");
    mt_session_drop(s);
    return 0;
}

/* ---- allocs: the agent's own sessions see these --------------------------------- */

/* write(2) only until the query: stdio's buffer would be one more block. */
static void say(int fd, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && write(fd, line, (size_t)n) != n)
        die("write");
}

static int cmd_allocs(const char *dir)
{
    static const size_t sizes[] = {4096, 5000, 8192, 8192, 100000, 3000, 100, 1 << 20, 16384, 70000};
    enum { N = sizeof sizes / sizeof sizes[0] };
    static const int leak[N] = {0, 1, 0, 1, 1, 0, 1, 0, 0, 1}; /* these stay allocated */
    void *p[N];
    char path[4096];
    snprintf(path, sizeof path, "%s/allocs.txt", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die("open %s", path);
    if (mt_tag_push("parser") != 0)
        die("mt_tag_push");
    for (int i = 0; i < N; i++) {
        p[i] = malloc(sizes[i]);
        if (!p[i])
            die("malloc");
        memset(p[i], 1, sizes[i]);
        say(fd, "alloc %zu %#lx parser\n", sizes[i], (unsigned long)(uintptr_t)p[i]);
    }
    mt_tag_pop();
    for (int i = 0; i < N; i++) {
        if (!leak[i]) {
            say(fd, "free %zu %#lx parser\n", sizes[i], (unsigned long)(uintptr_t)p[i]);
            free(p[i]);
        }
    }
    /* Untagged, and a mapping of the program's own. */
    void *q = calloc(1, 20000);
    say(fd, "alloc 20000 %#lx malloc\n", (unsigned long)(uintptr_t)q);
    void *r = realloc(q, 40000);
    say(fd, "realloc 40000 %#lx malloc %#lx\n", (unsigned long)(uintptr_t)r, (unsigned long)(uintptr_t)q);
    free(r);
    say(fd, "free 40000 %#lx malloc\n", (unsigned long)(uintptr_t)r);
    void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die("mmap");
    say(fd, "mmap %d %#lx mmap\n", 1 << 20, (unsigned long)(uintptr_t)m);
    munmap(m, 1 << 20);
    say(fd, "munmap %d %#lx mmap\n", 1 << 20, (unsigned long)(uintptr_t)m);
    close(fd);
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    write_file(dir, "ready", pid);
    wait_file(dir, "go");
    return 0;
}

/* ---- fork ---------------------------------------------------------------------- */

static int cmd_fork(void)
{
    mt_session *s =
        create("forked", "target=ring_buffer(max_events_limit=100); max_dispatch_latency=infinite");
    start(s);
    int parent_before = fire_n(s, 3, 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int fired = fire_n(s, 5, 2);
        int stop = mt_session_stop(s);
        mt_event_record r[100];
        uint64_t total;
        int n = mt_session_ring_read(s, r, 100, &total);
        int mine = 0, parents = 0;
        for (int i = 0; i < n; i++)
            r[i].key == 2 ? mine++ : parents++;
        printf("{\"who\": \"child\", \"fired\": %d, \"stop\": %d, \"ring_total\": %" PRIu64
               ", \"child_events\": %d, \"parent_events\": %d, ",
               fired, stop, total, mine, parents);
        print_info(s);
        printf("}\n");
        fflush(stdout);
        _exit(mt_session_drop(s) == 0 ? 0 : 3);
    }
    int status;
    waitpid(pid, &status, 0);
    int fired_after = fire_n(s, 4, 3);
    mt_session_stop(s);
    mt_event_record r[100];
    uint64_t total;
    int n = mt_session_ring_read(s, r, 100, &total), k[4] = {0};
    for (int i = 0; i < n; i++)
        k[r[i].key & 3]++;
    printf("{\"who\": \"parent\", \"child_status\": %d, \"fired_before\": %d, \"fired_after\": %d, "
           "\"ring_total\": %" PRIu64
           ", \"before_events\": %d, \"child_events\": %d, \"after_events\": %d}\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), parent_before, fired_after,
           total, k[1], k[2], k[3]);
    mt_session_drop(s);
    return 0;
}

/* The agent's own sessions across fork: one block of 12345 bytes before
 * the fork (dispatched there), three in the child; each process says its
 * pid in DIR/parent and DIR/child and waits for DIR/go. */
static int cmd_forkagent(const char *dir)
{
    void *keep[4];
    keep[0] = malloc(12345);
    sleep_ms(400); /* past the session's dispatch latency: delivered in the parent */
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    char me[32];
    snprintf(me, sizeof me, "%d\n", (int)getpid());
    if (pid == 0) {
        for (int i = 1; i < 4; i++)
            keep[i] = malloc(12345);
        write_file(dir, "child", me);
        wait_file(dir, "go");
        for (int i = 0; i < 4; i++)
            free(keep[i]);
        _exit(0);
    }
    write_file(dir, "parent", me);
    int status;
    waitpid(pid, &status, 0);
    free(keep[0]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ---- targets: each kind's JSON document ----------------------------------------- */

static int cmd_targets(const char *dir, int n)
{
    char def[4400];
    snprintf(def, sizeof def,
             "max_dispatch_latency=infinite;where=type == user || type == span_begin || type == span_end;"
             "target=ring_buffer(max_events_limit=10);target=histogram(source=key);target=event_counter;"
             "target=pair_matching(begin_event=span_begin,end_event=span_end,match_on=key);"
             "target=event_file(filename=%s/targets.xel)",
             dir);
    mt_session *s = create("targets", def);
    start(s);
    /* In this order: user (key i % 4, size i + 1), span_begin (key 1000 + i),
     * and span_end of the same key for even i. */
    int collected = 0;
    for (int i = 0; i < n; i++) {
        mt_event u = {
            .type = MT_EVENT_USER, .key = (uint64_t)i % 4, .value = (uint64_t)i, .size = (uint64_t)i + 1};
        mt_event b = {.type = MT_EVENT_SPAN_BEGIN, .key = 1000 + (uint64_t)i, .value = (uint64_t)i};
        mt_event e = {.type = MT_EVENT_SPAN_END, .key = 1000 + (uint64_t)i, .value = (uint64_t)i};
        collected += mt_event_fire(s, &u) == 1;
        collected += mt_event_fire(s, &b) == 1;
        if (i % 2 == 0)
            collected += mt_event_fire(s, &e) == 1;
    }
    if (mt_session_stop(s) != 0) /* everything dispatched, the event file complete */
        die("mt_session_stop");
    static const char *const kinds[] = {"ring_buffer", "histogram", "event_counter", "pair_matching",
                                        "event_file"};
    static char buf[1 << 16];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int rc = mt_session_target_json(s, kinds[k], buf, sizeof buf);
        if (rc < 0 || (size_t)rc != strlen(buf))
            die("mt_session_target_json %s: %d", kinds[k], rc);
        printf("%s\n", buf);
    }
    char small[16];
    int nospace = mt_session_target_json(s, "ring_buffer", small, sizeof small);
    int none = mt_session_target_json(s, "nosuch", buf, sizeof buf);
    printf("{\"collected\": %d, \"small\": %d, \"small_text\": \"%s\", \"nosuch\": %d}\n", collected, nospace,
           small, none);
    if (mt_session_drop(s) != 0)
        die("drop");
    return 0;
}

/* ---- stub ------------------------------------------------------------------------ */

static int cmd_stub(void)
{
    char why[256] = "unset";
    mt_session *s = (mt_session *)&why; /* must come back NULL */
    int create_rc = mt_session_create("x", "", &s, why, sizeof why);
    mt_event e = {.type = MT_EVENT_USER};
    mt_session_info info;
    mt_event_record r[1];
    uint64_t total = 99;
    char buf[64];
    int start_rc = mt_session_start(s), fire_rc = mt_event_fire(s, &e),
        info_rc = mt_session_info_get(s, &info);
    int json_rc = mt_session_target_json(s, "ring_buffer", buf, sizeof buf);
    int ring_rc = mt_session_ring_read(s, r, 1, &total);
    int stop_rc = mt_session_stop(s), flush_rc = mt_session_flush(s), drop_rc = mt_session_drop(s);
    printf(
        "{\"create\": %d, \"session_null\": %d, \"why\": \"%s\", \"start\": %d, \"fire\": %d, \"info\": %d,"
        " \"target_json\": %d, \"ring_read\": %d, \"total\": %" PRIu64
        ", \"stop\": %d, \"flush\": %d, \"drop\": %d}\n",
        create_rc, s == NULL, why, start_rc, fire_rc, info_rc, json_rc, ring_rc, total, stop_rc, flush_rc,
        drop_rc);
    return 0;
}

int main(int argc, char **argv)
{
    alarm(120); /* a hung scenario ends the test instead of the suite */
    if (argc < 2)
        die("usage: xe_api view|hold|flood|noloss|latency|predicate|allocs|fork|targets|stub ...");
    const char *cmd = argv[1];
    if (strcmp(cmd, "view") == 0)
        return cmd_view(argc - 2, argv + 2);
    if (strcmp(cmd, "hold") == 0 && argc >= 3)
        return cmd_hold(argv[2], argc - 3, argv + 3);
    if (strcmp(cmd, "flood") == 0 && argc == 7 && strtoull(argv[6], NULL, 10) <= 1 << 20)
        return cmd_flood(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], NULL, 10),
                         strtoull(argv[6], NULL, 10));
    if (strcmp(cmd, "noloss") == 0 && argc == 5)
        return cmd_noloss(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
    if (strcmp(cmd, "latency") == 0 && argc == 3)
        return cmd_latency(argv[2]);
    if (strcmp(cmd, "predicate") == 0 && argc == 3)
        return cmd_predicate(argv[2]);
    if (strcmp(cmd, "allocs") == 0 && argc == 3)
        return cmd_allocs(argv[2]);
    if (strcmp(cmd, "fork") == 0)
        return cmd_fork();
    if (strcmp(cmd, "forkagent") == 0 && argc == 3)
        return cmd_forkagent(argv[2]);
    if (strcmp(cmd, "targets") == 0 && argc == 4 && atoi(argv[3]) > 0 && atoi(argv[3]) <= 250)
        return cmd_targets(argv[2], atoi(argv[3]));
    if (strcmp(cmd, "stub") == 0)
        return cmd_stub();
    die("unknown or incomplete command '%s'", cmd);
}
