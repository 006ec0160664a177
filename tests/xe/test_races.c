/* test_races.c — interleavings that once broke the session engine, made
 * deterministic: more buffers queued than one batch, flush racing stop, drop
 * racing stop, a stop from a signal handler over a NO_EVENT_LOSS wait,
 * forks while other threads seal, and forks while buffers are in the hands
 * of threads the child will not have. Each case runs in a forked child
 * under alarm() so a hang or a crash is a FAIL, not a stuck run. A gate target
 * holds the dispatcher inside deliver() until released. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "xe/xe.h"
#include "xe/xe_internal.h"

static _Atomic int gate_open = 1, in_deliver;
static _Atomic uint64_t delivered_seen;

static int gate_init(xe_target *t, const char *p, char *w, size_t wl)
{
    (void)t, (void)p, (void)w, (void)wl;
    return 0;
}
static void gate_deliver(xe_target *t, const xe_event *ev)
{
    (void)t, (void)ev;
    atomic_store(&in_deliver, 1);
    while (!atomic_load(&gate_open))
        usleep(1000);
    atomic_fetch_add(&delivered_seen, 1);
}
static const xe_target_ops gate = {.name = "gate", .init = gate_init, .deliver = gate_deliver};

/* A session with the gate as its target; max_event (when not 0): its
 * max_event_size, for large buffers. */
static xe_session *make_sized(const char *name, uint64_t mem, xe_partition_mode mode, unsigned cpus,
                              enum xe_retention ret, uint64_t max_event)
{
    xe_config c;
    xe_config_defaults(&c);
    strcpy(c.name, name);
    c.max_memory = mem;
    if (max_event)
        c.max_event_size = max_event;
    c.mode = mode;
    c.cpus = cpus;
    c.retention = ret;
    c.max_dispatch_latency_ns = XE_LATENCY_INFINITE;
    c.ntargets = 1;
    c.targets[0].ops = &gate;
    xe_session *s = NULL;
    char why[256] = "";
    if (xe_session_create(&c, &s, why, sizeof why) < 0) {
        printf("# create: %s\n", why);
        exit(3);
    }
    return s;
}
static xe_session *make(const char *name, uint64_t mem, xe_partition_mode mode, unsigned cpus,
                        enum xe_retention ret)
{
    return make_sized(name, mem, mode, cpus, ret, 0);
}

/* A test process's end, as its forked child ended. */
static void exit_as(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    _exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
}

static _Atomic uint64_t ok1, neg;
static void fire_n(xe_session *s, uint64_t n)
{
    xe_event ev = {.type = XE_EV_USER};
    for (uint64_t i = 0; i < n; i++) {
        int rc = xe_fire(s, &ev);
        if (rc == 1)
            atomic_fetch_add(&ok1, 1);
        else if (rc < 0)
            atomic_fetch_add(&neg, 1);
    }
}

/* Runs fn in a child with a time limit; 0 = the child exited 0. */
static int in_child(void (*fn)(void), unsigned secs, const char *what)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(secs);
        fn();
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        printf("# %s: child killed by signal %d (%s)\n", what, WTERMSIG(st),
               WTERMSIG(st) == SIGALRM ? "hang" : "crash");
    else if (WEXITSTATUS(st))
        printf("# %s: child exit %d\n", what, WEXITSTATUS(st));
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* 1. xe_stack_take_all once kept only the first 256 buffers of the queue
 * of it: with more buffers queued, the rest vanish (events neither
 * delivered nor counted dropped, buffers leaked, pending never 0). */
static void case_batch(void)
{
    /* PER_CPU over 200 CPUs: 500 buffers of one 64 KiB chunk. */
    xe_session *s = make("batch", 500ull * 65536, XE_PART_PER_CPU, 200, XE_ALLOW_SINGLE_EVENT_LOSS);
    xe_session_start(s);
    atomic_store(&gate_open, 0);
    fire_n(s, 700000); /* 300 free buffers x 1635 events, more than fit */
    atomic_store(&gate_open, 1);
    xe_session_stop(s);
    xe_session_info in;
    xe_session_info_get(s, &in);
    printf("# fired ok=%lu dropped-rc=%lu delivered=%lu dropped=%lu pending=%lu\n", (unsigned long)ok1,
           (unsigned long)neg, (unsigned long)in.events_delivered, (unsigned long)in.dropped_event_count,
           (unsigned long)in.pending_buffers);
    if (ok1 + neg != in.events_delivered + in.dropped_event_count || in.pending_buffers != 0)
        exit(1);
}

/* 2. A flush concurrent with stop never returns: the dispatcher leaves on
 * stop without publishing flush_done. */
static xe_session *g;
static void *flusher(void *a)
{
    (void)a;
    xe_session_flush(g);
    return NULL;
}
static void *stopper(void *a)
{
    (void)a;
    xe_session_stop(g);
    return NULL;
}
static void case_flush_stop(void)
{
    g = make("flushstop", 3 * 65536, XE_PART_NONE, 0, XE_ALLOW_SINGLE_EVENT_LOSS);
    xe_session_start(g);
    atomic_store(&gate_open, 0);
    fire_n(g, 2000); /* a buffer sealed: the dispatcher blocks in deliver */
    while (!atomic_load(&in_deliver))
        usleep(1000);
    pthread_t f, t;
    pthread_create(&f, NULL, flusher, NULL);
    usleep(50000);
    pthread_create(&t, NULL, stopper, NULL);
    usleep(50000);
    atomic_store(&gate_open, 1);
    pthread_join(t, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 3;
    if (pthread_timedjoin_np(f, NULL, &ts) != 0) {
        printf("# flush still waiting 3 s after stop returned\n");
        exit(1);
    }
}

/* 3. drop while another thread's stop is in progress: stop returns -EBUSY,
 * drop unmaps the session under the running dispatcher. */
static void *open_gate_later(void *a)
{
    (void)a;
    usleep(200000);
    atomic_store(&gate_open, 1);
    return NULL;
}

static void case_drop_stop(void)
{
    g = make("dropstop", 3 * 65536, XE_PART_NONE, 0, XE_ALLOW_SINGLE_EVENT_LOSS);
    xe_session_start(g);
    atomic_store(&gate_open, 0);
    fire_n(g, 2000);
    while (!atomic_load(&in_deliver))
        usleep(1000);
    pthread_t t, o;
    pthread_create(&t, NULL, stopper, NULL);
    usleep(50000);
    pthread_create(&o, NULL, open_gate_later, NULL);
    xe_session_drop(g); /* must wait for the stop, not unmap under it */
    pthread_join(o, NULL);
    pthread_join(t, NULL);
}

/* 4. A signal handler that stops the session (as the agent's _exit wrapper
 * does: final_report -> mt_xe_stop_agent_sessions) on a thread waiting
 * under NO_EVENT_LOSS: the dispatcher waits for that producer's inflight
 * count for ever. */
static _Atomic int handler_done;
static void stop_handler(int sig)
{
    (void)sig;
    xe_session_stop(g);
    atomic_store(&handler_done, 1);
}
static void *producer(void *a)
{
    (void)a;
    fire_n(g, 100000);
    return NULL;
}
static void case_stop_in_handler(void)
{
    g = make("nolossexit", 3 * 65536, XE_PART_NONE, 0, XE_NO_EVENT_LOSS);
    signal(SIGUSR1, stop_handler);
    xe_session_start(g);
    atomic_store(&gate_open, 0);
    pthread_t t;
    pthread_create(&t, NULL, producer, NULL);
    usleep(300000); /* 3 buffers full: the producer waits for a free one */
    pthread_kill(t, SIGUSR1);
    usleep(100000);
    atomic_store(&gate_open, 1);
    for (int i = 0; i < 300 && !atomic_load(&handler_done); i++)
        usleep(10000);
    if (!atomic_load(&handler_done)) {
        printf("# stop from the handler still waiting after 3 s\n");
        exit(1);
    }
    pthread_join(t, NULL);
}

/* 5. fork while another thread is between sealing the partition's buffer
 * and replacing it (xe_seal .. the CAS on cur in xe_replace, which includes
 * a futex wake of the dispatcher), or between a straddling claim and its
 * seal: in the child nobody finishes the job, the buffer stays current and
 * sealed (or overflowing) for ever, and every producer of that partition
 * spins in slow_path. Stress: producers flood, the main thread forks. */
static _Atomic int flood_stop, flooding;
static void *flood(void *a)
{
    (void)a;
    xe_event ev = {.type = XE_EV_USER};
    atomic_fetch_add(&flooding, 1);
    while (!atomic_load(&flood_stop))
        xe_fire(g, &ev);
    return NULL;
}
static void on_alarm(int sig)
{
    (void)sig;
    int32_t cur = xe_cur_idx(atomic_load(&g->parts[0].cur));
    uint64_t r = cur >= 0 ? atomic_load(&xe_buf(g, (uint32_t)cur)->reserved) : 0;
    char buf[128];
    int n = snprintf(buf, sizeof buf, "# hung child: cur=%d sealed=%d offset=%lu cap=%lu\n", cur,
                     (int)(r >> 62), (unsigned long)(r & XE_OFF_MASK), (unsigned long)g->cap);
    write(1, buf, (size_t)n);
    _exit(9);
}
static void case_fork_sealer(void)
{
    g = make("forksealer", 3 * 65536, XE_PART_NONE, 0, XE_ALLOW_SINGLE_EVENT_LOSS);
    xe_session_start(g);
    /* Every thread past its start before the first fork (case 7 says why). */
    if (xe_session_flush(g) != 0)
        exit(3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, flood, NULL);
    while (atomic_load(&flooding) < 2)
        sched_yield();
    int hung = 0, forks = 0;
    for (; forks < 400 && hung == 0; forks++) {
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGALRM, on_alarm);
            alarm(2);
            xe_event ev = {.type = XE_EV_USER};
            for (int i = 0; i < 5000; i++)
                xe_fire(g, &ev);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 9)
            hung++;
    }
    atomic_store(&flood_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("# %d of %d forked children hung firing\n", hung, forks);
    if (hung)
        exit(1);
}

/* 6. Flushes while producers wait under NO_EVENT_LOSS: a producer asleep
 * in the wait for a free buffer counted as in flight, so the flush waited
 * for it while it waited for the flush's dispatcher. */
static _Atomic int flood_on = 1;
static void *noloss_producer(void *a)
{
    (void)a;
    xe_event ev = {.type = XE_EV_USER};
    while (atomic_load(&flood_on))
        xe_fire(g, &ev);
    return NULL;
}
static void case_flush_noloss(void)
{
    g = make("flushnoloss", 3 * 65536, XE_PART_NONE, 0, XE_NO_EVENT_LOSS);
    xe_session_start(g);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, noloss_producer, NULL);
    for (int i = 0; i < 50; i++)
        xe_session_flush(g);
    atomic_store(&flood_on, 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    xe_session_stop(g);
}

/* Buffers in the free pools (a stopped session has them all there). */
static uint32_t pooled(xe_session *s)
{
    uint32_t n = 0;
    xe_stack *pools[2] = {&s->free_pool, &s->large_pool};
    for (int i = 0; i < 2; i++)
        for (uint32_t at = (uint32_t)atomic_load(&pools[i]->head); at && n <= s->nbuf + s->nlarge;
             at = atomic_load(&xe_buf(s, at - 1)->next))
            n++;
    return n;
}

/* 7. fork while another thread is between claiming room in the current
 * buffer and publishing its record: in the child that record never comes,
 * so the walk of that buffer gives up at it. The child's own events must
 * not go into that buffer behind it (they were lost with it). The claim
 * is made by hand here: a writer preempted at the fork. */
static void case_fork_midrecord(void)
{
    g = make("forkmid", 3 * 65536, XE_PART_NONE, 0, XE_NO_EVENT_LOSS);
    xe_session_start(g);
    /* The dispatcher past its start first: a thread that is starting
     * allocates (under ASan, with the allocator's lock, which a fork then
     * leaves locked in the child, where the child's own dispatcher hangs
     * on it as it starts). A flush returns once it delivered. */
    fire_n(g, 5);
    if (xe_session_flush(g) != 0 || atomic_load(&delivered_seen) != 5)
        exit(3);
    fire_n(g, 5);
    int32_t cur = xe_cur_idx(atomic_load(&g->parts[0].cur));
    if (cur < 0)
        exit(2);
    atomic_fetch_add(&xe_buf(g, (uint32_t)cur)->reserved, XE_RECORD_FIXED); /* never published */
    pid_t pid = fork();
    if (pid == 0) {
        fire_n(g, 100);
        xe_session_stop(g);
        /* The buffer the vanished writer held open came back too (its
         * walk gave up, but no one will ever write there). */
        uint32_t back = pooled(g);
        printf("# forked child: %lu of its 100 events and the 10 before the fork (5 flushed) delivered; "
               "%u of %u buffers back in the pools\n",
               (unsigned long)atomic_load(&delivered_seen), back, g->nbuf + g->nlarge);
        fflush(stdout);
        _exit(atomic_load(&delivered_seen) == 110 && back == g->nbuf + g->nlarge ? 0 : 1);
    }
    exit_as(pid); /* this process's own writer never publishes either: no stop here */
}

/* 8. fork while the dispatcher holds buffers only in its own variables:
 * the chain it has just taken off the queue (before it records it as its
 * batch), or one it delivered and has not recycled; or while a producer
 * holds a buffer it popped and has not installed. In the child no thread
 * has them: they must go back to the pools, else a child that forked with
 * every buffer in such hands waits for a free buffer for ever (trace mode
 * once hung so, 1 fork in a few hundred). Here the dispatcher is held in
 * deliver() with the first full buffer (an ordered session's held[], or
 * the others' batch), and this thread takes the rest of the queue as the
 * dispatcher's next chain, not yet recorded anywhere. */
static void fork_taken(enum xe_retention ret)
{
    g = make("forktaken", 3 * 65536, XE_PART_NONE, 0, ret);
    int lossless = ret == XE_NO_EVENT_LOSS;
    if (g->ordered != lossless) { /* the two paths this case is run for */
        printf("# ordered %d for retention %d\n", g->ordered, (int)ret);
        exit(2);
    }
    xe_session_start(g);
    fire_n(g, 1); /* the dispatcher past its start (case 7 says why) */
    if (xe_session_flush(g) != 0)
        exit(3);
    atomic_store(&gate_open, 0);
    atomic_store(&in_deliver, 0);
    xe_event ev = {.type = XE_EV_USER};
    /* The dispatcher stuck in the first full buffer's delivery (held),
     * then buffers filled until none is free: the others queue. */
    int32_t first = xe_cur_idx(atomic_load(&g->parts[0].cur));
    while (xe_cur_idx(atomic_load(&g->parts[0].cur)) == first)
        xe_fire(g, &ev);
    while (!atomic_load(&in_deliver))
        usleep(1000);
    while ((uint32_t)atomic_load(&g->free_pool.head) != 0)
        xe_fire(g, &ev);
    uint32_t taken = xe_stack_take_all(g, &g->queue); /* "the dispatcher's" chain */
    int32_t cur = xe_cur_idx(atomic_load(&g->parts[0].cur));
    if (taken == 0 || cur < 0) {
        printf("# taken %u, current %d\n", taken, cur);
        exit(2);
    }
    uint64_t before = atomic_load(&delivered_seen);
    pid_t pid = fork();
    if (pid == 0) {
        atomic_store(&gate_open, 1);
        /* Ten buffers' worth: more than the child would have without them. */
        uint64_t n = 10 * (g->cap / XE_RECORD_FIXED);
        atomic_store(&ok1, 0);
        atomic_store(&neg, 0);
        fire_n(g, n);
        xe_session_stop(g);
        uint64_t got = atomic_load(&delivered_seen) - before;
        uint32_t back = pooled(g);
        printf("# forked child: %lu of its %lu events fired, %lu delivered (with the open buffer's); "
               "%u of %u buffers back in the pools\n",
               (unsigned long)atomic_load(&ok1), (unsigned long)n, (unsigned long)got, back,
               g->nbuf + g->nlarge);
        fflush(stdout);
        /* Allowed to lose events, the child may drop whole buffers. */
        int all = !lossless || (atomic_load(&ok1) == n && got >= n);
        _exit(all && back == g->nbuf + g->nlarge ? 0 : 1);
    }
    exit_as(pid); /* the chain taken is never given back here: no stop */
}
static void case_fork_taken_ordered(void)
{
    fork_taken(XE_NO_EVENT_LOSS);
}
static void case_fork_taken_batch(void)
{
    fork_taken(XE_ALLOW_MULTIPLE_EVENT_LOSS);
}

/* 9. fork while a producer holds a buffer it popped: a regular one it
 * has not yet installed as current, and a large one it is filling with
 * one big event (fire_large: popped, claimed, written, then sealed and
 * queued). The child has no such producer: both must come back to the
 * pools, the large one zeroed over what was claimed in it. */
static void case_fork_popped(void)
{
    g = make_sized("forkpopped", 256 * 1024, XE_PART_NONE, 0, XE_NO_EVENT_LOSS, 512 * 1024);
    xe_session_start(g);
    fire_n(g, 1); /* the dispatcher past its start (case 7 says why) */
    if (xe_session_flush(g) != 0 || g->nlarge == 0)
        exit(3);
    int32_t reg = xe_stack_pop(g, &g->free_pool), big = xe_stack_pop(g, &g->large_pool);
    if (reg < 0 || big < 0)
        exit(2);
    xe_bufhdr *b = xe_buf(g, (uint32_t)big);
    atomic_store(&b->reserved, 4096); /* claimed, and half written */
    memset(xe_buf_data(b), 0x5a, 2048);
    uint64_t before = atomic_load(&delivered_seen);
    pid_t pid = fork();
    if (pid == 0) {
        int zeroed = 1; /* what was written in the large one is gone */
        for (int i = 0; i < 2048; i++)
            zeroed &= xe_buf_data(b)[i] == 0;
        static unsigned char payload[200 * 1024];
        xe_event ev = {.type = XE_EV_USER, .data = payload, .data_len = sizeof payload};
        uint64_t n = 10 * (g->cap / XE_RECORD_FIXED), large_ok = 0;
        atomic_store(&ok1, 0);
        fire_n(g, n);
        for (int i = 0; i < 6; i++) /* more than the large buffers: each used again */
            large_ok += xe_fire(g, &ev) == 1;
        xe_session_stop(g);
        uint64_t got = atomic_load(&delivered_seen) - before;
        uint32_t back = pooled(g);
        printf("# forked child: %lu of %lu small and %lu of 6 large events fired, %lu delivered; "
               "%u of %u buffers back in the pools; the half-written large one zeroed: %s\n",
               (unsigned long)atomic_load(&ok1), (unsigned long)n, (unsigned long)large_ok,
               (unsigned long)got, back, g->nbuf + g->nlarge, zeroed ? "yes" : "no");
        fflush(stdout);
        int all = atomic_load(&ok1) == n && large_ok == 6 && got == n + 6;
        _exit(all && back == g->nbuf + g->nlarge && zeroed ? 0 : 1);
    }
    exit_as(pid); /* the buffers popped are never given back here: no stop */
}

int main(void)
{
    CHECK("take_all keeps every queued buffer (more than 256 queued)",
          in_child(case_batch, 60, "batch") == 0);
    CHECK("flush concurrent with stop returns", in_child(case_flush_stop, 20, "flush/stop") == 0);
    CHECK("drop concurrent with stop does not unmap under the dispatcher",
          in_child(case_drop_stop, 20, "drop/stop") == 0);
    CHECK("stop from a signal handler over a NO_EVENT_LOSS wait completes",
          in_child(case_stop_in_handler, 20, "stop in handler") == 0);
    CHECK("fork while another thread seals: the child can fire",
          in_child(case_fork_sealer, 600, "fork sealer") == 0);
    CHECK("flushes while producers wait under NO_EVENT_LOSS return",
          in_child(case_flush_noloss, 60, "flush/no-loss") == 0);
    CHECK("fork while another thread writes its record: the child's events delivered",
          in_child(case_fork_midrecord, 30, "fork mid-record") == 0);
    CHECK("fork while buffers are in vanished threads' hands (ordered: held): the child gets them back",
          in_child(case_fork_taken_ordered, 60, "fork taken, ordered") == 0);
    CHECK("fork while buffers are in vanished threads' hands (batch): the child gets them back",
          in_child(case_fork_taken_batch, 60, "fork taken, batch") == 0);
    CHECK("fork while a producer holds a popped buffer, regular or large: the child gets them back",
          in_child(case_fork_popped, 60, "fork popped") == 0);
    return failures != 0;
}
