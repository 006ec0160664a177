/* bench/xe_fire.c — what one fired event costs in memtrail's event engine
 * (src/xe), against a mutex-protected (and a spinlock-protected) buffer
 * doing the same job, in the same invocation.
 *
 * Each producer thread fires N allocation-like events (type alloc, a size,
 * an address, no data). The engine records them into a session (no target,
 * or a ring_buffer target when the engine has one); its dispatcher thread
 * walks every sealed buffer and recycles it. The baseline is the usual
 * alternative design: a lock around appending the same 80-byte record
 * (same fields: TSC time, CPU from rseq, cached tid) into the current
 * buffer; a full buffer is swapped under the lock for a free one and handed
 * to a consumer thread that walks its records and recycles it (the
 * dispatcher's work). Both get the same memory, both either wait for a
 * free buffer (no_loss, the default: every event is recorded) or drop the
 * event (single_loss).
 *
 * Cost per event per thread = wall time of the parallel phase (first
 * producer's start to last producer's end) / N. Runs are interleaved
 * (engine modes, then the baselines, then the next run) so machine noise
 * hits every column alike; min and median over runs are printed.
 *
 * Output: "RUN ..." per run and "RESULT ..." per configuration, key=value
 * words (bench/xe.sh reads them), then a plain table.
 * Usage: xe_fire [--events N] [--runs R] [--threads 1,2] [--modes none,per_node,per_cpu]
 *                [--retention no_loss|single_loss] [--target none|ring_buffer]
 *                [--baselines mutex,spin|none] [--max-memory MB]
 *                [--pin-producers] [--pin-consumer CPU] [--label L] */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "xe/xe.h"
#include "xe/xe_internal.h"
#include "xe/xe_thread.h"

#define MAX_RUNS 64
#define MAX_THREADS 16

/* ---- options ------------------------------------------------------------- */

static struct {
    uint64_t events;
    int runs;
    int threads[4], nthreads;
    int modes[3], nmodes;
    int no_loss;
    int ring; /* a ring_buffer target (engine) / ring copy (baselines) */
    int mutex, spin;
    uint64_t max_memory;
    int pin_producers;
    int pin_consumer; /* CPU, or -1 */
    const char *label;
} opt = {
    .events = 10000000,
    .runs = 5,
    .threads = {1, 2},
    .nthreads = 2,
    .modes = {XE_PART_NONE, XE_PART_PER_NODE, XE_PART_PER_CPU},
    .nmodes = 3,
    .no_loss = 1,
    .mutex = 1,
    .spin = 1,
    .max_memory = 64ull << 20,
    .pin_consumer = -1,
    .label = "default",
};

static const xe_target_ops *ring_ops;
static unsigned ncpu;

static void die(const char *what)
{
    fprintf(stderr, "xe_fire: %s\n", what);
    exit(1);
}

static void usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "xe_fire: %s '%s' (see the usage at the top of bench/xe_fire.c)\n", what, arg);
    exit(2);
}

/* ---- shared helpers ------------------------------------------------------ */

static double now_sec(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin_to(pid_t tid, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(tid, sizeof set, &set) != 0)
        fprintf(stderr, "xe_fire: could not pin thread %d to CPU %d: %s\n", (int)tid, cpu, strerror(errno));
}

/* The engine's dispatcher is its own thread, named "memtrail-xe": find it
 * in /proc to pin it. */
static void pin_dispatcher(int cpu)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "memtrail-xe", 11) == 0)
            pin_to((pid_t)atoi(e->d_name), cpu);
        fclose(f);
    }
    closedir(d);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The event a producer fires: sizes cycle 16..4096, addresses climb. */
static inline void next_event(xe_event *ev, uint64_t i)
{
    ev->size = 16 + (i & 255) * 16;
    ev->address += ev->size;
}

/* ---- the baseline: a locked buffer and a consumer thread ------------------ */

/* The engine's record, field for field. */
#define BL_NBUF 4
#define RING_EVENTS 1000

typedef struct bl {
    int spin;
    pthread_mutex_t lock;
    pthread_spinlock_t slock;
    /* Under the append lock. */
    int cur;
    size_t used;
    uint64_t dropped;
    /* The buffers. */
    char *mem;
    size_t cap, map_bytes;
    /* Handoff, under qm. */
    pthread_mutex_t qm;
    pthread_cond_t qfull, qfree;
    int queue[BL_NBUF];
    size_t queue_used[BL_NBUF];
    unsigned qhead, qn;
    int freel[BL_NBUF];
    unsigned nfree;
    int stop;
    uint64_t delivered;
    pthread_t consumer;
    /* The ring copy (the ring_buffer target's work). */
    xe_event ring[RING_EVENTS];
    unsigned ring_at;
} bl;

static __thread uint32_t bl_tid;

static inline uint32_t bl_my_tid(void)
{
    if (__builtin_expect(bl_tid == 0, 0))
        bl_tid = (uint32_t)syscall(SYS_gettid);
    return bl_tid;
}

static inline void bl_lock(bl *b)
{
    if (b->spin)
        pthread_spin_lock(&b->slock);
    else
        pthread_mutex_lock(&b->lock);
}

static inline void bl_unlock(bl *b)
{
    if (b->spin)
        pthread_spin_unlock(&b->slock);
    else
        pthread_mutex_unlock(&b->lock);
}

/* Under the append lock: hand the current buffer (if any) to the consumer
 * and take a free one, waiting for it (no_loss) or not. 0, or -ENOBUFS. */
static int bl_swap(bl *b)
{
    pthread_mutex_lock(&b->qm);
    if (b->cur >= 0) {
        unsigned at = (b->qhead + b->qn) % BL_NBUF;
        b->queue[at] = b->cur;
        b->queue_used[at] = b->used;
        b->qn++;
        b->cur = -1;
        pthread_cond_signal(&b->qfull);
    }
    while (b->nfree == 0 && opt.no_loss)
        pthread_cond_wait(&b->qfree, &b->qm);
    int rc = -ENOBUFS;
    if (b->nfree > 0) {
        b->cur = b->freel[--b->nfree];
        b->used = 0;
        rc = 0;
    }
    pthread_mutex_unlock(&b->qm);
    return rc;
}

static int bl_append(bl *b, const xe_event *ev)
{
    uint32_t cpu = xe_this_cpu();
    uint64_t tsc = xe_ticks();
    bl_lock(b);
    while (b->cur < 0 || b->used + XE_RECORD_FIXED > b->cap) {
        if (bl_swap(b) != 0) {
            b->dropped++;
            bl_unlock(b);
            return -ENOBUFS;
        }
    }
    xe_rec *r = (xe_rec *)(b->mem + (size_t)b->cur * b->cap + b->used);
    b->used += XE_RECORD_FIXED;
    xe_rec_fill(r, ev, bl_my_tid(), cpu, tsc); /* the engine's record, written as it writes it */
    atomic_store_explicit(&r->len, XE_RECORD_FIXED, memory_order_relaxed); /* under the lock */
    bl_unlock(b);
    return 1;
}

static void *bl_consume(void *arg)
{
    bl *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->qm);
        while (b->qn == 0 && !b->stop)
            pthread_cond_wait(&b->qfull, &b->qm);
        if (b->qn == 0) {
            pthread_mutex_unlock(&b->qm);
            return NULL;
        }
        int idx = b->queue[b->qhead];
        size_t used = b->queue_used[b->qhead];
        b->qhead = (b->qhead + 1) % BL_NBUF;
        b->qn--;
        pthread_mutex_unlock(&b->qm);

        char *data = b->mem + (size_t)idx * b->cap;
        uint64_t n = 0;
        for (size_t pos = 0; pos < used;) {
            const xe_rec *r = (const xe_rec *)(data + pos);
            uint32_t len = atomic_load_explicit(&r->len, memory_order_relaxed);
            if (len < XE_RECORD_FIXED)
                break;
            if (opt.ring) {
                xe_event *e = &b->ring[b->ring_at++ % RING_EVENTS];
                e->type = r->type;
                e->category = r->category;
                e->tid = r->tid;
                e->cpu = r->cpu;
                e->data_len = r->data_len;
                e->time_ns = r->tsc;
                e->size = r->size;
                e->address = r->address;
                e->old_address = r->old_address;
                e->site = r->site;
                e->key = r->key;
                e->value = r->value;
                e->data = NULL;
            }
            n++;
            pos += len;
        }
        memset(data, 0, used);

        pthread_mutex_lock(&b->qm);
        b->delivered += n;
        b->freel[b->nfree++] = idx;
        pthread_cond_signal(&b->qfree);
        pthread_mutex_unlock(&b->qm);
    }
}

static bl *bl_create(int spin)
{
    bl *b = calloc(1, sizeof *b);
    if (!b)
        die("out of memory");
    b->spin = spin;
    pthread_mutex_init(&b->lock, NULL);
    pthread_spin_init(&b->slock, PTHREAD_PROCESS_PRIVATE);
    pthread_mutex_init(&b->qm, NULL);
    pthread_cond_init(&b->qfull, NULL);
    pthread_cond_init(&b->qfree, NULL);
    b->cap = (size_t)(opt.max_memory / BL_NBUF) & ~(size_t)4095;
    b->map_bytes = b->cap * BL_NBUF;
    /* Populated, as the engine's buffers are. */
    b->mem =
        mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (b->mem == MAP_FAILED)
        die("mmap of the baseline's buffers failed");
    b->cur = -1;
    for (int i = 0; i < BL_NBUF; i++)
        b->freel[b->nfree++] = i;
    if (pthread_create(&b->consumer, NULL, bl_consume, b) != 0)
        die("pthread_create failed");
    pthread_setname_np(b->consumer, "bench-consumer");
    return b;
}

/* After the producers: the current buffer goes to the consumer, which
 * drains the queue and ends. */
static void bl_finish(bl *b)
{
    bl_lock(b);
    if (b->cur >= 0 && b->used > 0) {
        pthread_mutex_lock(&b->qm);
        unsigned at = (b->qhead + b->qn) % BL_NBUF;
        b->queue[at] = b->cur;
        b->queue_used[at] = b->used;
        b->qn++;
        b->cur = -1;
        pthread_mutex_unlock(&b->qm);
    }
    bl_unlock(b);
    pthread_mutex_lock(&b->qm);
    b->stop = 1;
    pthread_cond_signal(&b->qfull);
    pthread_mutex_unlock(&b->qm);
    pthread_join(b->consumer, NULL);
}

static void bl_destroy(bl *b)
{
    munmap(b->mem, b->map_bytes);
    pthread_spin_destroy(&b->slock);
    pthread_mutex_destroy(&b->lock);
    pthread_mutex_destroy(&b->qm);
    pthread_cond_destroy(&b->qfull);
    pthread_cond_destroy(&b->qfree);
    free(b);
}

/* ---- producers ------------------------------------------------------------- */

enum impl { IMPL_ENGINE, IMPL_MUTEX, IMPL_SPIN };
static const char *const impl_name[] = {"memtrail", "mutex", "spin"};

typedef struct prod {
    pthread_t t;
    int idx;
    enum impl impl;
    xe_session *s;
    bl *b;
    pthread_barrier_t *go;
    double t0, t1;
    uint64_t ok, dropped, other;
} prod;

static void *producer(void *arg)
{
    prod *p = arg;
    if (opt.pin_producers)
        pin_to(0, p->idx % (int)ncpu);
    xe_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = XE_EV_ALLOC;
    ev.address = 0x7f0000000000ull + ((uint64_t)p->idx << 36);
    uint64_t ok = 0, dropped = 0, other = 0;
    pthread_barrier_wait(p->go);
    p->t0 = now_sec();
    if (p->impl == IMPL_ENGINE) {
        for (uint64_t i = 0; i < opt.events; i++) {
            next_event(&ev, i);
            int rc = xe_fire(p->s, &ev);
            ok += rc == 1;
            dropped += rc < 0;
            other += rc == 0;
        }
    } else {
        for (uint64_t i = 0; i < opt.events; i++) {
            next_event(&ev, i);
            int rc = bl_append(p->b, &ev);
            ok += rc == 1;
            dropped += rc < 0;
        }
    }
    p->t1 = now_sec();
    p->ok = ok;
    p->dropped = dropped;
    p->other = other;
    return NULL;
}

/* One run's outcome. */
typedef struct outcome {
    double ns; /* per event per thread */
    uint64_t fired, delivered, dropped, blocked_ns;
    int exact; /* fired = delivered + dropped, the producers (and the ring) agree */
    uint64_t ok, rc_dropped, rc_zero, ring_received; /* what the producers were told, the ring saw */
} outcome;

/* Start the producers, wait for them; ns per event per thread. */
static double run_producers(int threads, enum impl impl, xe_session *s, bl *b, uint64_t *ok,
                            uint64_t *dropped, uint64_t *other)
{
    prod ps[MAX_THREADS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        ps[i] = (prod){.idx = i, .impl = impl, .s = s, .b = b, .go = &go};
        if (pthread_create(&ps[i].t, NULL, producer, &ps[i]) != 0)
            die("pthread_create failed");
    }
    double t0 = 1e300, t1 = 0;
    *ok = *dropped = *other = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ps[i].t, NULL);
        t0 = ps[i].t0 < t0 ? ps[i].t0 : t0;
        t1 = ps[i].t1 > t1 ? ps[i].t1 : t1;
        *ok += ps[i].ok;
        *dropped += ps[i].dropped;
        *other += ps[i].other;
    }
    pthread_barrier_destroy(&go);
    return (t1 - t0) * 1e9 / (double)opt.events;
}

static outcome run_engine(int mode, int threads)
{
    xe_config cfg;
    xe_config_defaults(&cfg);
    snprintf(cfg.name, sizeof cfg.name, "bench");
    cfg.max_memory = opt.max_memory;
    cfg.mode = (xe_partition_mode)mode;
    cfg.retention = opt.no_loss ? XE_NO_EVENT_LOSS : XE_ALLOW_SINGLE_EVENT_LOSS;
    cfg.max_dispatch_latency_ns = XE_LATENCY_INFINITE;
    if (opt.ring) {
        cfg.ntargets = 1;
        cfg.targets[0].ops = ring_ops;
        snprintf(cfg.targets[0].params, sizeof cfg.targets[0].params, "max_events_limit=%d", RING_EVENTS);
    }
    xe_session *s;
    char why[256] = "";
    int rc = xe_session_create(&cfg, &s, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "xe_fire: xe_session_create: %s (%s)\n", why, strerror(-rc));
        exit(1);
    }
    if ((rc = xe_session_start(s)) != 0) {
        fprintf(stderr, "xe_fire: xe_session_start: %s\n", strerror(-rc));
        exit(1);
    }
    if (opt.pin_consumer >= 0)
        pin_dispatcher(opt.pin_consumer);
    uint64_t ok, dropped, other;
    outcome o = {0};
    o.ns = run_producers(threads, IMPL_ENGINE, s, NULL, &ok, &dropped, &other);
    xe_session_stop(s);
    xe_session_info info;
    xe_session_info_get(s, &info);
    o.fired = opt.events * (uint64_t)threads;
    o.delivered = info.events_delivered;
    o.dropped = info.dropped_event_count;
    o.blocked_ns = info.blocked_event_fire_time_ns;
    o.exact = other == 0 && o.fired == o.delivered + o.dropped && ok == o.delivered && dropped == o.dropped;
    o.ok = ok;
    o.rc_dropped = dropped;
    o.rc_zero = other;
    if (opt.ring) {
        /* The target itself saw every delivered event. */
        xe_target *t = xe_session_target(s, "ring_buffer");
        if (t)
            xe_ring_read(t, NULL, 0, &o.ring_received);
        o.exact &= t != NULL && o.ring_received == o.delivered;
    }
    xe_session_drop(s);
    return o;
}

static outcome run_baseline(int spin, int threads)
{
    bl *b = bl_create(spin);
    if (opt.pin_consumer >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(opt.pin_consumer, &set);
        pthread_setaffinity_np(b->consumer, sizeof set, &set);
    }
    uint64_t ok, dropped, other;
    outcome o = {0};
    o.ns = run_producers(threads, spin ? IMPL_SPIN : IMPL_MUTEX, NULL, b, &ok, &dropped, &other);
    bl_finish(b);
    o.fired = opt.events * (uint64_t)threads;
    o.delivered = b->delivered;
    o.dropped = b->dropped;
    o.exact = o.fired == o.delivered + o.dropped && ok == o.delivered && dropped == o.dropped;
    o.ok = ok;
    o.rc_dropped = dropped;
    bl_destroy(b);
    return o;
}

/* ---- configurations, runs, output -------------------------------------------- */

typedef struct config {
    enum impl impl;
    int mode; /* engine only */
    int threads;
    int nruns;
    double ns[MAX_RUNS];
    uint64_t fired, delivered, dropped, blocked_ns;
    int exact;
} config;

static const char *mode_name(const config *c)
{
    return c->impl == IMPL_ENGINE ? xe_partition_mode_name((xe_partition_mode)c->mode) : "-";
}

static void run_config(config *c, int run)
{
    outcome o = c->impl == IMPL_ENGINE ? run_engine(c->mode, c->threads)
                                       : run_baseline(c->impl == IMPL_SPIN, c->threads);
    c->ns[c->nruns++] = o.ns;
    c->fired += o.fired;
    c->delivered += o.delivered;
    c->dropped += o.dropped;
    c->blocked_ns += o.blocked_ns;
    c->exact &= o.exact;
    printf("RUN impl=%s mode=%s threads=%d run=%d ns=%.2f fired=%llu delivered=%llu dropped=%llu "
           "blocked_ms=%.1f exact=%s\n",
           impl_name[c->impl], mode_name(c), c->threads, run, o.ns, (unsigned long long)o.fired,
           (unsigned long long)o.delivered, (unsigned long long)o.dropped, (double)o.blocked_ns / 1e6,
           o.exact ? "yes" : "NO");
    if (!o.exact)
        printf("MISMATCH impl=%s mode=%s threads=%d run=%d fired=%llu delivered=%llu dropped=%llu "
               "returned_1=%llu returned_negative=%llu returned_0=%llu ring_received=%llu\n",
               impl_name[c->impl], mode_name(c), c->threads, run, (unsigned long long)o.fired,
               (unsigned long long)o.delivered, (unsigned long long)o.dropped, (unsigned long long)o.ok,
               (unsigned long long)o.rc_dropped, (unsigned long long)o.rc_zero,
               (unsigned long long)o.ring_received);
    fflush(stdout);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int parse_list(const char *arg, const char *const *names, const int *values, int nnames, int *out,
                      int max, const char *what)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < nnames; i++)
            if (strcasecmp(w, names[i]) == 0)
                found = values[i];
        if (found < 0 || n >= max)
            usage_error(what, w);
        out[n++] = found;
    }
    if (n == 0)
        usage_error(what, arg);
    return n;
}

static const char *need(int argc, char **argv, int i)
{
    if (i + 1 >= argc)
        usage_error("missing value after", argv[i]);
    return argv[i + 1];
}

static void parse_args(int argc, char **argv)
{
    static const char *const mode_names[] = {"none", "per_node", "per_cpu"};
    static const int mode_values[] = {XE_PART_NONE, XE_PART_PER_NODE, XE_PART_PER_CPU};
    static const char *const thread_names[] = {"1", "2", "3", "4", "8", "16"};
    static const int thread_values[] = {1, 2, 3, 4, 8, 16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--events")) {
            char *end;
            opt.events = strtoull(need(argc, argv, i), &end, 10);
            if (*end || opt.events == 0)
                usage_error("--events wants a positive count, not", argv[i + 1]);
            i++;
        } else if (!strcmp(a, "--runs")) {
            opt.runs = atoi(need(argc, argv, i));
            if (opt.runs < 1 || opt.runs > MAX_RUNS)
                usage_error("--runs wants 1..64, not", argv[i + 1]);
            i++;
        } else if (!strcmp(a, "--threads")) {
            opt.nthreads = parse_list(need(argc, argv, i), thread_names, thread_values, 6, opt.threads, 4,
                                      "--threads wants a list of 1,2,3,4,8,16, not");
            i++;
        } else if (!strcmp(a, "--modes")) {
            opt.nmodes = parse_list(need(argc, argv, i), mode_names, mode_values, 3, opt.modes, 3,
                                    "--modes wants a list of none,per_node,per_cpu, not");
            i++;
        } else if (!strcmp(a, "--retention")) {
            const char *v = need(argc, argv, i++);
            if (!strcmp(v, "no_loss"))
                opt.no_loss = 1;
            else if (!strcmp(v, "single_loss"))
                opt.no_loss = 0;
            else
                usage_error("--retention wants no_loss or single_loss, not", v);
        } else if (!strcmp(a, "--target")) {
            const char *v = need(argc, argv, i++);
            if (!strcmp(v, "none"))
                opt.ring = 0;
            else if (!strcmp(v, "ring_buffer"))
                opt.ring = 1;
            else
                usage_error("--target wants none or ring_buffer, not", v);
        } else if (!strcmp(a, "--baselines")) {
            const char *v = need(argc, argv, i++);
            opt.mutex = strstr(v, "mutex") != NULL;
            opt.spin = strstr(v, "spin") != NULL;
            if (strcmp(v, "none") && !opt.mutex && !opt.spin)
                usage_error("--baselines wants mutex, spin, mutex,spin or none, not", v);
        } else if (!strcmp(a, "--max-memory")) {
            int mb = atoi(need(argc, argv, i));
            if (mb < 1 || mb > 4096)
                usage_error("--max-memory wants 1..4096 (MB), not", argv[i + 1]);
            opt.max_memory = (uint64_t)mb << 20;
            i++;
        } else if (!strcmp(a, "--pin-producers")) {
            opt.pin_producers = 1;
        } else if (!strcmp(a, "--pin-consumer")) {
            opt.pin_consumer = atoi(need(argc, argv, i));
            i++;
        } else if (!strcmp(a, "--label")) {
            opt.label = need(argc, argv, i);
            i++;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: xe_fire [--events N] [--runs R] [--threads 1,2] [--modes none,per_node,per_cpu]\n"
                   "               [--retention no_loss|single_loss] [--target none|ring_buffer]\n"
                   "               [--baselines mutex,spin|none] [--max-memory MB]\n"
                   "               [--pin-producers] [--pin-consumer CPU] [--label L]\n");
            exit(0);
        } else {
            usage_error("unknown option", a);
        }
    }
    if (opt.pin_consumer >= (int)ncpu)
        usage_error("--pin-consumer: no such CPU", argv[argc - 1]);
}

int main(int argc, char **argv)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ncpu = n > 0 ? (unsigned)n : 1;
    parse_args(argc, argv);
    ring_ops = xe_target_find("ring_buffer", 11);
    if (opt.ring && !ring_ops) {
        printf("SKIP label=%s reason=\"the engine has no ring_buffer target (xe_target_find)\"\n", opt.label);
        return 3;
    }
    const char *target = opt.ring ? "ring_buffer" : "none";
    const char *retention = opt.no_loss ? "NO_EVENT_LOSS" : "ALLOW_SINGLE_EVENT_LOSS";
    char pin[64];
    snprintf(pin, sizeof pin, "%s", opt.pin_producers ? "producers" : "none");
    if (opt.pin_consumer >= 0)
        snprintf(pin + strlen(pin), sizeof pin - strlen(pin), "+consumer%d", opt.pin_consumer);
    printf("INFO label=%s cpus=%u events=%llu runs=%d max_memory_mb=%llu retention=%s target=%s pin=%s\n",
           opt.label, ncpu, (unsigned long long)opt.events, opt.runs,
           (unsigned long long)(opt.max_memory >> 20), retention, target, pin);

    config cs[32];
    int nc = 0;
    for (int t = 0; t < opt.nthreads; t++) {
        for (int m = 0; m < opt.nmodes; m++)
            cs[nc++] =
                (config){.impl = IMPL_ENGINE, .mode = opt.modes[m], .threads = opt.threads[t], .exact = 1};
        if (opt.mutex)
            cs[nc++] = (config){.impl = IMPL_MUTEX, .threads = opt.threads[t], .exact = 1};
        if (opt.spin)
            cs[nc++] = (config){.impl = IMPL_SPIN, .threads = opt.threads[t], .exact = 1};
    }
    for (int r = 1; r <= opt.runs; r++)
        for (int i = 0; i < nc; i++)
            run_config(&cs[i], r);

    int all_exact = 1;
    for (int i = 0; i < nc; i++) {
        config *c = &cs[i];
        double md = median(c->ns, c->nruns); /* sorts */
        printf(
            "RESULT label=%s impl=%s mode=%s threads=%d retention=%s target=%s pin=%s min=%.2f median=%.2f "
            "max=%.2f fired=%llu delivered=%llu dropped=%llu blocked_ms=%.1f exact=%s\n",
            opt.label, impl_name[c->impl], mode_name(c), c->threads, retention, target, pin, c->ns[0], md,
            c->ns[c->nruns - 1], (unsigned long long)c->fired, (unsigned long long)c->delivered,
            (unsigned long long)c->dropped, (double)c->blocked_ns / 1e6, c->exact ? "yes" : "NO");
        all_exact &= c->exact;
    }
    if (!all_exact)
        fprintf(stderr, "xe_fire: some run's counts do not add up (fired != delivered + dropped, or the "
                        "producers' return codes disagree with the session's counters): see exact=NO\n");
    return all_exact ? 0 : 1;
}
