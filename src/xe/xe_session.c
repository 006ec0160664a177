/* xe_session.c — a session's life: sizing and mapping its buffers,
 * partitions and targets, start/stop/flush/drop, the registry of a
 * process's sessions, fork, and the sessions view (text and JSON,
 * async-signal-safe). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "xe/xe_internal.h"
#include "xe/xe_util.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

static _Atomic(xe_session *) registry[XE_MAX_SESSIONS];
static _Atomic int registry_lock;
static _Atomic int viewers; /* views in progress (drop waits for them) */
static _Atomic int atfork_done;

/* The registry's and each session's life lock: rare, short, not on any
 * event's path. */
static void spin_lock(_Atomic int *l)
{
    int expect = 0;
    while (!atomic_compare_exchange_weak(l, &expect, 1)) {
        expect = 0;
        sched_yield();
    }
}
static void lock_registry(void)
{
    spin_lock(&registry_lock);
}
static void unlock_registry(void)
{
    atomic_store(&registry_lock, 0);
}

static int say(char *why, size_t whylen, const char *a, uint64_t n, const char *b)
{
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, a);
    if (b) {
        mt_out_u64(&o, n);
        mt_out_str(&o, b);
    }
    xe_why_done(&o);
    return 0;
}

/* ---- machine shape -------------------------------------------------------- */

static int read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return 0;
}

static unsigned machine_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? (unsigned)n : 1;
}

/* How many NUMA nodes; fills cpu_node[cpu] from /sys/devices/system/node/nodeN/cpulist. */
static unsigned machine_nodes(uint32_t *cpu_node, unsigned ncpu)
{
    unsigned nodes = 0;
    for (unsigned node = 0; node < 1024; node++) {
        char path[96], buf[4096];
        mt_out o;
        mt_out_init(&o, path, sizeof path, -1);
        mt_out_str(&o, "/sys/devices/system/node/node");
        mt_out_u64(&o, node);
        mt_out_str(&o, "/cpulist");
        if (read_small(mt_out_cstr(&o), buf, sizeof buf) < 0) {
            if (node > 64 || (node > 0 && nodes == 0))
                break;
            continue;
        }
        nodes = node + 1;
        /* "0-3,8-11" */
        for (char *p = buf; *p && *p != '\n';) {
            unsigned a = 0, b;
            while (*p >= '0' && *p <= '9')
                a = a * 10 + (unsigned)(*p++ - '0');
            b = a;
            if (*p == '-') {
                p++;
                b = 0;
                while (*p >= '0' && *p <= '9')
                    b = b * 10 + (unsigned)(*p++ - '0');
            }
            for (unsigned c = a; c <= b && c < ncpu; c++)
                if (cpu_node)
                    cpu_node[c] = node;
            if (*p == ',')
                p++;
            else
                break;
        }
    }
    return nodes ? nodes : 1;
}

/* ---- create / drop ---------------------------------------------------------- */

static void *map_buffers(size_t bytes, int populate)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, bytes, (unsigned long)"memtrail-xe-buffers");
    return p;
}

/* Closes the targets (files finished); a later view or stop finds none. */
static void close_targets(xe_session *s)
{
    for (int i = 0; i < s->cfg.ntargets; i++)
        if (s->targets[i].ops && s->targets[i].ops->close)
            s->targets[i].ops->close(&s->targets[i]);
    s->cfg.ntargets = 0;
}

static void unmap_session(xe_session *s)
{
    close_targets(s);
    if (s->regular_base)
        munmap(s->regular_base, (size_t)s->nbuf * s->regular_stride);
    if (s->large_base)
        munmap(s->large_base, (size_t)s->nlarge * s->large_stride);
    xe_unmap(s, s->map_bytes);
}

static void init_buffers(xe_session *s)
{
    for (uint32_t i = 0; i < s->nbuf + s->nlarge; i++) {
        xe_bufhdr *b = xe_buf(s, i);
        b->index = i;
        b->large = i >= s->nbuf;
        atomic_store(&b->reserved, XE_SEALED); /* pooled buffers take no claims */
    }
    for (uint32_t i = s->nbuf; i-- > 0;)
        xe_stack_push(s, &s->free_pool, i);
    for (uint32_t i = s->nlarge; i-- > 0;)
        xe_stack_push(s, &s->large_pool, s->nbuf + i);
}

static int setup_targets(xe_session *s, char *why, size_t whylen)
{
    for (int i = 0; i < s->cfg.ntargets; i++) {
        xe_target *t = &s->targets[i];
        t->ops = s->cfg.targets[i].ops;
        memcpy(t->params, s->cfg.targets[i].params, sizeof t->params);
        char sub[200] = "";
        int rc = t->ops->init(t, t->params, sub, sizeof sub);
        if (rc < 0) {
            t->ops = NULL;
            /* A target's message names it ("ring_buffer: ..."); one
             * that does not gets the name put before it, once. */
            const char *name = s->cfg.targets[i].ops->name;
            size_t nl = strlen(name);
            int named = strncmp(sub, name, nl) == 0 && (sub[nl] == ':' || sub[nl] == ' ');
            mt_out o;
            xe_why_init(&o, why, whylen);
            if (!named) {
                mt_out_str(&o, name);
                mt_out_str(&o, ": ");
            }
            mt_out_str(&o, sub);
            xe_why_done(&o);
            return rc;
        }
        if (t->ops->synchronous)
            s->sync[s->nsync++] = t;
        else
            s->async[s->nasync++] = t;
    }
    return 0;
}

static void atfork_child(void)
{
    xe_atfork_child();
}

static int register_session(xe_session *s, char *why, size_t whylen)
{
    lock_registry();
    int slot = -1;
    for (int i = 0; i < XE_MAX_SESSIONS; i++) {
        xe_session *o = atomic_load(&registry[i]);
        if (!o) {
            if (slot < 0)
                slot = i;
        } else if (strcmp(o->cfg.name, s->cfg.name) == 0) {
            unlock_registry();
            say(why, whylen, "a session with this name exists", 0, NULL);
            return -EEXIST;
        }
    }
    if (slot < 0) {
        unlock_registry();
        say(why, whylen, "too many sessions (at most ", XE_MAX_SESSIONS, ")");
        return -ENOSPC;
    }
    atomic_store(&registry[slot], s);
    unlock_registry();
    int expect = 0;
    if (atomic_compare_exchange_strong(&atfork_done, &expect, 1))
        pthread_atfork(NULL, NULL, atfork_child);
    return 0;
}

int xe_session_create(const xe_config *cfg, xe_session **out, char *why, size_t whylen)
{
    *out = NULL;
    if (!cfg->name[0]) {
        say(why, whylen, "a session needs a name", 0, NULL);
        return -EINVAL;
    }
    unsigned ncpu = machine_cpus();
    xe_plan_in in = {.max_memory = cfg->max_memory,
                     .max_event_size = cfg->max_event_size,
                     .mode = cfg->mode,
                     .cpus = cfg->cpus ? cfg->cpus : ncpu,
                     .nodes = cfg->nodes ? cfg->nodes : machine_nodes(NULL, 0),
                     .strict = cfg->strict};
    xe_plan_out plan;
    int rc = xe_plan(&in, &plan, why, whylen);
    if (rc < 0)
        return rc;
    uint32_t nparts = cfg->mode == XE_PART_NONE ? 1 : cfg->mode == XE_PART_PER_NODE ? in.nodes : in.cpus;
    uint32_t nmap = ncpu > nparts ? ncpu : nparts;
    size_t head = (sizeof(xe_session) + 63) & ~(size_t)63;
    size_t bytes = head + (size_t)nparts * sizeof(xe_part) + (size_t)nmap * sizeof(uint32_t);
    xe_session *s = xe_map(bytes);
    if (!s) {
        say(why, whylen, "cannot map the session", 0, NULL);
        return -ENOMEM;
    }
    s->map_bytes = bytes;
    s->cfg = *cfg;
    s->plan = plan;
    s->parts = (xe_part *)((char *)s + head);
    s->cpu_part = (uint32_t *)((char *)s->parts + (size_t)nparts * sizeof(xe_part));
    s->nparts = nparts;
    s->ncpu_map = nmap;
    if (cfg->mode == XE_PART_PER_NODE && !cfg->nodes)
        machine_nodes(s->cpu_part, nmap);
    for (uint32_t c = 0; c < nmap; c++) {
        if (cfg->mode == XE_PART_PER_CPU)
            s->cpu_part[c] = c % nparts;
        else if (cfg->mode == XE_PART_PER_NODE)
            s->cpu_part[c] = (cfg->nodes ? c : s->cpu_part[c]) % nparts;
        else
            s->cpu_part[c] = 0;
    }
    for (uint32_t i = 0; i < nparts; i++)
        atomic_store(&s->parts[i].cur, (uint32_t)-1);
    s->nbuf = plan.total_regular_buffers;
    s->nlarge = plan.total_large_buffers;
    s->cap = plan.regular_buffer_size;
    s->large_cap = plan.large_buffer_size;
    s->regular_stride = plan.regular_buffer_alloc;
    s->large_stride = plan.large_buffer_alloc;
    s->time_order = cfg->time_order && cfg->retention != XE_ALLOW_MULTIPLE_EVENT_LOSS &&
                    plan.total_regular_buffers + plan.total_large_buffers < XE_WALKED_WINDOW;
    /* One current buffer: its events reach the targets in firing order
     * (not when a full buffer is dropped and reused). */
    s->ordered = !s->time_order && cfg->mode == XE_PART_NONE &&
                 cfg->retention != XE_ALLOW_MULTIPLE_EVENT_LOSS && s->nbuf + s->nlarge <= XE_HELD_MAX;
    /* Committed up front, as the seed's sessions are, except time-ordered
     * ones (trace mode): their pages come as events fill them and go back
     * when the dispatcher falls idle (xe_trim_free). */
    s->regular_base = map_buffers((size_t)s->nbuf * s->regular_stride, !s->time_order);
    if (s->nlarge)
        s->large_base = map_buffers((size_t)s->nlarge * s->large_stride, 0);
    if (!s->regular_base || (s->nlarge && !s->large_base)) {
        say(why, whylen, "cannot map ", plan.memory_allocated, " bytes of buffers");
        unmap_session(s);
        return -ENOMEM;
    }
    init_buffers(s);
    xe_clock_init();
    s->latency_tsc = cfg->max_dispatch_latency_ns == XE_LATENCY_INFINITE
                         ? 0
                         : xe_ns_to_ticks(cfg->max_dispatch_latency_ns);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->create_time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    atomic_store(&s->state, XE_CREATED);
    if ((rc = setup_targets(s, why, whylen)) < 0 || (rc = register_session(s, why, whylen)) < 0) {
        unmap_session(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Start, stop, flush and drop of one session take turns (a drop must not
 * unmap what a concurrent stop's dispatcher still reads). Not for signal
 * handlers, except a stop that nothing else is stopping. */
static void life_lock(xe_session *s)
{
    spin_lock(&s->life);
}
static void life_unlock(xe_session *s)
{
    atomic_store(&s->life, 0);
}

static int start_locked(xe_session *s)
{
    int st = atomic_load(&s->state);
    if (st == XE_STARTED)
        return -EALREADY;
    if (st != XE_CREATED && st != XE_STOPPED)
        return -EBUSY;
    if (s->released)
        return -ENOMEM;
    /* Every seal before now was walked (a stop drains them all). */
    xe_walked_reset(s);
    int rc = xe_dispatch_start(s);
    if (rc < 0)
        return rc;
    atomic_store(&s->state, XE_STARTED);
    /* Counted as a fire while a popped buffer is in hand: a fork run by a
     * signal handler here leaves it to this frame (xe_atfork_child). */
    xe_fire_depth_add(1);
    for (uint32_t i = 0; i < s->nparts; i++) {
        int32_t idx = xe_stack_pop(s, &s->free_pool);
        if (idx < 0)
            break;
        xe_install(s, &s->parts[i], atomic_load(&s->parts[i].cur), idx);
    }
    xe_fire_depth_add(-1);
    return 0;
}

static int stop_locked(xe_session *s)
{
    int expect = XE_STARTED;
    if (!atomic_compare_exchange_strong(&s->state, &expect, XE_STOPPING))
        return -EALREADY;
    /* Producers waiting for a free buffer see the stop now, not at their
     * next timeout. */
    xe_tell_waiters(s, 1);
    xe_dispatch_stop(s);
    atomic_store(&s->state, XE_STOPPED);
    return 0;
}

int xe_session_on_dispatcher(const xe_session *s)
{
    return s->disp_running && pthread_equal(s->disp, pthread_self());
}

int xe_session_start(xe_session *s)
{
    life_lock(s);
    int rc = start_locked(s);
    life_unlock(s);
    return rc;
}

int xe_session_stop(xe_session *s)
{
    life_lock(s);
    int rc = stop_locked(s);
    life_unlock(s);
    return rc;
}

int xe_session_flush(xe_session *s)
{
    life_lock(s);
    int rc = -EINVAL;
    if (atomic_load(&s->state) == XE_STARTED) {
        xe_dispatch_flush(s);
        rc = 0;
    }
    life_unlock(s);
    return rc;
}

static void release_range(char *base, uint32_t n, size_t stride)
{
    size_t keep = 4096; /* the header's page: a late claim's fetch_add lands there, sees SEALED */
    for (uint32_t i = 0; base && i < n; i++)
        if (stride > keep)
            munmap(base + (size_t)i * stride + keep, stride - keep);
}

static void release_locked(xe_session *s)
{
    s->released = 1;
    release_range(s->regular_base, s->nbuf, s->regular_stride);
    release_range(s->large_base, s->nlarge, s->large_stride);
}

int xe_session_release_buffers(xe_session *s)
{
    life_lock(s);
    int rc = -EBUSY;
    if (atomic_load(&s->state) == XE_STOPPED || atomic_load(&s->state) == XE_CREATED) {
        release_locked(s);
        rc = 0;
    }
    life_unlock(s);
    return rc;
}

/* Stops s and takes it out of the registry, once no view is reading it.
 * With s's life lock held. */
static void withdraw_locked(xe_session *s)
{
    stop_locked(s);
    lock_registry();
    for (int i = 0; i < XE_MAX_SESSIONS; i++)
        if (atomic_load(&registry[i]) == s)
            atomic_store(&registry[i], NULL);
    unlock_registry();
    while (atomic_load(&viewers) != 0)
        sched_yield();
}

int xe_session_drop(xe_session *s)
{
    life_lock(s);
    withdraw_locked(s);
    unmap_session(s); /* the lock goes with it */
    return 0;
}

void xe_session_retire(xe_session *s, int release)
{
    life_lock(s);
    withdraw_locked(s);
    close_targets(s);
    if (release)
        release_locked(s);
    life_unlock(s);
}

xe_session *xe_session_find(const char *name)
{
    for (int i = 0; i < XE_MAX_SESSIONS; i++) {
        xe_session *s = atomic_load(&registry[i]);
        if (s && strcmp(s->cfg.name, name) == 0)
            return s;
    }
    return NULL;
}

int xe_sessions(xe_session **out, int max)
{
    int n = 0;
    for (int i = 0; i < XE_MAX_SESSIONS && n < max; i++) {
        xe_session *s = atomic_load(&registry[i]);
        if (s)
            out[n++] = s;
    }
    return n;
}

const xe_config *xe_session_config(const xe_session *s)
{
    return &s->cfg;
}

xe_target *xe_session_target(xe_session *s, const char *name)
{
    for (int i = 0; i < s->cfg.ntargets; i++)
        if (s->targets[i].ops && strcmp(s->targets[i].ops->name, name) == 0)
            return &s->targets[i];
    return NULL;
}

void xe_atfork_child(void)
{
    /* Once per child: the host may run it from its own fork handler (the
     * agent does, so the dispatchers restart as its threads) before the
     * engine's handler runs. The child's pid differs from every pid that
     * ran this before (its ancestors'). */
    static pid_t done_in;
    pid_t me = getpid();
    if (done_in == me)
        return;
    done_in = me;
    int in_fire = xe_fire_depth_here() > 0;
    xe_fire_forget_tid();
    for (int i = 0; i < XE_MAX_SESSIONS; i++) {
        xe_session *s = atomic_load(&registry[i]);
        if (s) {
            atomic_store(&s->life, 0); /* a thread that held it is gone */
            xe_dispatch_after_fork(s, in_fire);
        }
    }
}

/* ---- the view ---------------------------------------------------------------- */

static const char *policy_desc(enum xe_retention r)
{
    return r == XE_ALLOW_SINGLE_EVENT_LOSS     ? "drop_event"
           : r == XE_ALLOW_MULTIPLE_EVENT_LOSS ? "drop_full_buffer"
                                               : "do_not_drop_event";
}

static const char *state_name(int st)
{
    return st == XE_CREATED    ? "created"
           : st == XE_STARTED  ? "started"
           : st == XE_STOPPING ? "stopping"
                               : "stopped";
}

void xe_session_info_get(xe_session *s, xe_session_info *in)
{
    memset(in, 0, sizeof *in);
    memcpy(in->name, s->cfg.name, sizeof in->name);
    in->state = atomic_load(&s->state);
    in->pending_buffers = atomic_load(&s->pending);
    in->total_regular_buffers = s->plan.total_regular_buffers;
    in->regular_buffer_size = s->plan.regular_buffer_size;
    in->total_large_buffers = s->plan.total_large_buffers;
    in->large_buffer_size = s->plan.large_buffer_size;
    in->total_buffer_size = s->plan.total_buffer_size;
    in->buffer_policy_desc = policy_desc(s->cfg.retention);
    in->dropped_event_count = atomic_load(&s->dropped_events);
    in->dropped_buffer_count = atomic_load(&s->dropped_buffers);
    in->blocked_event_fire_time_ns = atomic_load(&s->blocked_ns);
    in->largest_event_dropped_size = atomic_load(&s->largest_dropped);
    in->create_time_ns = s->create_time_ns;
    in->events_delivered = atomic_load(&s->delivered);
    in->max_memory = s->cfg.max_memory;
    in->memory_allocated = s->plan.memory_allocated;
    in->max_dispatch_latency_ns = s->cfg.max_dispatch_latency_ns;
    in->mode = s->cfg.mode;
    in->strict = s->cfg.strict;
    in->partitions = s->nparts;
    in->ntargets = s->cfg.ntargets;
}

/* "2026-11-23T10:04:05.123Z" without libc's time functions (not
 * async-signal-safe). Days to civil date: Howard Hinnant's algorithm. */
static void put_time(mt_out *o, int64_t ns)
{
    int64_t secs = ns / 1000000000, days = secs / 86400, rem = secs % 86400;
    int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097, yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    int64_t parts[] = {y, m, d, rem / 3600, rem / 60 % 60, rem % 60};
    const char *sep[] = {"-", "-", "T", ":", ":", "."};
    for (int i = 0; i < 6; i++) {
        if (i > 0 && parts[i] < 10)
            mt_out_char(o, '0');
        mt_out_i64(o, parts[i]);
        mt_out_str(o, sep[i]);
    }
    int64_t ms = ns / 1000000 % 1000;
    if (ms < 100)
        mt_out_char(o, '0');
    if (ms < 10)
        mt_out_char(o, '0');
    mt_out_i64(o, ms);
    mt_out_char(o, 'Z');
}

/* Views may run in a signal handler while a session is dropped: the
 * registry entry is read under the viewers count that drop waits for. */
static int view_begin(xe_session **list)
{
    atomic_fetch_add(&viewers, 1);
    return xe_sessions(list, XE_MAX_SESSIONS);
}
static void view_end(void)
{
    atomic_fetch_sub(&viewers, 1);
}

/* The definition's name of a retention mode, as a session definition
 * accepts it (event_retention_mode=...). */
static const char *retention_name(enum xe_retention r)
{
    return r == XE_ALLOW_SINGLE_EVENT_LOSS     ? "allow_single_event_loss"
           : r == XE_ALLOW_MULTIPLE_EVENT_LOSS ? "allow_multiple_event_loss"
                                               : "no_event_loss";
}

/* A partition mode in lower case, as a definition accepts it. */
static const char *mode_name(xe_partition_mode m)
{
    return m == XE_PART_PER_NODE ? "per_node" : m == XE_PART_PER_CPU ? "per_cpu" : "none";
}

/* One session: the keys of docs/json-sessions.md, in sys.dm_xe_sessions
 * order first. */
static void session_json(mt_json *j, xe_session *s, int with_targets)
{
    xe_session_info in;
    xe_session_info_get(s, &in);
    char when[40];
    mt_out w;
    mt_out_init(&w, when, sizeof when, -1);
    put_time(&w, in.create_time_ns);
    mt_json_object_begin(j);
    mt_json_kstr(j, "name", in.name);
    mt_json_ku64(j, "pending_buffers", in.pending_buffers);
    mt_json_ku64(j, "total_regular_buffers", in.total_regular_buffers);
    mt_json_ku64(j, "regular_buffer_size_bytes", in.regular_buffer_size);
    mt_json_ku64(j, "total_large_buffers", in.total_large_buffers);
    mt_json_ku64(j, "large_buffer_size_bytes", in.large_buffer_size);
    mt_json_ku64(j, "total_buffer_size_bytes", in.total_buffer_size);
    mt_json_kstr(j, "buffer_policy", in.buffer_policy_desc);
    mt_json_ku64(j, "events_dropped", in.dropped_event_count);
    mt_json_ku64(j, "buffers_dropped", in.dropped_buffer_count);
    mt_json_ku64(j, "blocked_event_fire_time_ns", in.blocked_event_fire_time_ns);
    mt_json_ku64(j, "largest_event_dropped_size_bytes", in.largest_event_dropped_size);
    mt_json_kstr(j, "create_time", mt_out_cstr(&w));
    mt_json_ku64(j, "create_time_ns", (uint64_t)in.create_time_ns);
    mt_json_kstr(j, "state", state_name(in.state));
    mt_json_kstr(j, "event_retention_mode", retention_name(s->cfg.retention));
    mt_json_ku64(j, "events_delivered", in.events_delivered);
    mt_json_ku64(j, "max_memory_bytes", in.max_memory);
    mt_json_ku64(j, "memory_allocated_bytes", in.memory_allocated);
    mt_json_kstr(j, "memory_partition_mode", mode_name(in.mode));
    mt_json_ku64(j, "partitions", in.partitions);
    mt_json_kbool(j, "strict_max_memory", in.strict);
    /* INFINITE (no deadline): null */
    mt_json_ku64_or_null(j, "max_dispatch_latency_ns", in.max_dispatch_latency_ns != XE_LATENCY_INFINITE,
                         in.max_dispatch_latency_ns);
    mt_json_kstr(j, "predicate", s->cfg.pred.text);
    mt_json_key(j, "targets");
    mt_json_array_begin(j);
    for (int t = 0; t < s->cfg.ntargets; t++) {
        xe_target *tg = &s->targets[t];
        if (with_targets) {
            xe_target_json_object(tg, j, 0);
        } else {
            mt_json_object_begin(j);
            mt_json_kstr(j, "target", tg->ops->name);
            mt_json_object_end(j);
        }
    }
    mt_json_array_end(j);
    mt_json_object_end(j);
}

void xe_view_json(mt_out *o, int with_targets)
{
    xe_session *list[XE_MAX_SESSIONS];
    int n = view_begin(list);
    mt_json j;
    mt_json_init_out(&j, o, false);
    mt_json_document_begin(&j);
    mt_json_key(&j, "sessions");
    mt_json_array_begin(&j);
    for (int i = 0; i < n; i++)
        session_json(&j, list[i], with_targets);
    mt_json_array_end(&j);
    mt_json_document_end(&j);
    view_end();
}
