/* trace.c — trace mode: the agent's trace session and the event_file
 * encoder that writes the trace format through the trace writer
 * (src/trace/trace_write.h).
 *
 * The session is made at start-up from the options: trace_buffer bytes of
 * per-CPU buffers (memory_partition_mode=per_cpu), time-ordered (every
 * few ms the dispatcher seals them and says up to when every event is in:
 * the encoder then merges the CPUs' events by time, trace_merge.h),
 * no_event_loss unless trace_loss=drop, dispatch latency 0.5 s (and
 * chunks written once 0.5 s old), and an event_file target on the output
 * path with no size limit. The merge runs on the session's dispatcher
 * thread, the encoding and compression on the writer's trace_threads
 * threads; the program's threads only fill their CPU's buffer. At exit
 * the session stops (the file gets its end record, index and trailer) and
 * one line says what was written and what was lost.
 *
 * Nothing here allocates through malloc: state is mmap'd. */
#include "agent/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/sessions.h"
#include "agent/site.h"
#include "agent/trace_merge.h"
#include "common/out.h"
#include "common/procfs.h"
#include "trace/trace_write.h"
#include "xe/xe.h"

mt_trace_opts mt_trace_opt = {.buffer = 1ull << 20, .wait = 1, .time_unit_ns = 10000, .chunk_events = 32768};
/* Each on a cache line of its own: read on every free (last id) and every
 * allocation (generation), written once per block or per fork. */
_Alignas(64) _Atomic uint32_t mt_trace_last_id;
_Alignas(64) _Atomic uint32_t mt_trace_id_gen = 1; /* a new thread's 0 is stale */

uint32_t mt_trace_new_id_block(uint32_t gen)
{
    for (;;) {
        uint32_t base = atomic_fetch_add_explicit(&mt_trace_last_id, MT_ID_BLOCK, memory_order_relaxed) + 1;
        /* In this order: a signal handler's malloc nested here finds the
         * old block with a next past its end (and takes a block of its
         * own), or this block with the generation it was taken for. The
         * other order fails: the old next, already drawn one past the old
         * block's end, is inside this block when it follows the old one. */
        mt_t.id_next = base + 1;
        __asm__ volatile("" ::: "memory");
        mt_t.id_base = base;
        __asm__ volatile("" ::: "memory");
        mt_t.id_gen = gen;
        if (MT_LIKELY(base != 0))
            return base;
        uint32_t id = mt_trace_new_id(); /* the block wrapped to 0: its next id */
        if (id != 0)
            return id;
    }
}

/* Read once per function (a stop on the control thread may clear it while
 * the exit or crash path runs; the session itself is never unmapped). */
static xe_session *_Atomic trace_session;
static char trace_path[MT_PATH_MAX];
static int path_given;      /* trace_path came with `query PID start trace -o FILE` */
static unsigned recordings; /* traces begun in this process (on demand or at start-up) */
static uint64_t trace_start_ns, trace_start_real_ns;
/* What the finished files hold (the last one's, plus every earlier one's):
 * events in whole chunks written, and bytes. */
static uint64_t files_written, files_bytes;
/* Out of memory (mt_trace_out_of_memory): recording stopped for good. */
_Alignas(64) _Atomic int mt_trace_stopped; /* out of memory: 0, 1 stopping, 2 stopped */
_Atomic uint64_t mt_trace_unrecorded;      /* events fired after that */
static struct enc_state *trace_enc;        /* the trace session's encoder state */
static int making_trace;                   /* start_session is creating the trace's session */
/* Why the current trace began and (once known) ended: the trace's meta
 * records `began` and `ended` (docs/trace-format.md). */
static const char *began = "start";
static int forked_child; /* this image runs in a fork child (quiet_child) */
static const char *ended = "exit";
static char ended_buf[64];
/* The fork being made: its time and last id (taken before the fork: the
 * parent's events after that time are not the child's) and the parent's
 * pid (the child's getppid() may be init's by the time its file opens).
 * Each fork sets them again, in the process that forks. */
static uint64_t fork_ns;
static uint32_t fork_last_id;
static pid_t fork_parent;
/* A fork child's own: the parent's trace, and the fork it was made by,
 * copied from the above in the child at once. Its file begins at its
 * first event, and by then the child may have forked a child of its
 * own, which set the above for that one. */
static char parent_trace[MT_PATH_MAX];
static struct {
    uint64_t ns;
    uint32_t last_id;
    pid_t parent;
} forked_by;
/* A fork child's trace names this process's as its parent's: the file is
 * written even with no event, so that the child's chain of inherited
 * blocks reads through it (a daemon()'s middle process). */
static _Atomic int named_by_child;
/* The start-up directory: a relative trace path is under it. */
static char start_dir[MT_PATH_MAX];
/* Held while a trace session is made or dropped on demand, and by the
 * out-of-memory path while it uses the session: neither pulls the
 * session from under the other. */
static atomic_flag trace_switching = ATOMIC_FLAG_INIT;

/* ---- the encoder ---------------------------------------------------------- */

typedef struct enc_state {
    mt_trace_writer *w;
    int (*write)(void *ctx, const void *buf, size_t n);
    void *wctx;
    int open;                           /* a file is begun and not yet finished */
    uint64_t wevents0, wlost0, wbytes0; /* the writer's counts when the current file began */
    trace_merge *merge;                 /* the CPUs' events, until the session's watermark passes them */
    uint64_t last_ns;                   /* the last event's time handed to the writer */
    uint64_t unstaged;                  /* events the merge had no memory for (lost, counted) */
} enc_state;

/* The session's dropped and fired counts now (a fork child inherits the
 * parent's: they are taken as baselines). */
static void session_counts(uint64_t *lost, uint64_t *fired)
{
    xe_session_info info;
    memset(&info, 0, sizeof info);
    xe_session *s = trace_session;
    if (s)
        xe_session_info_get(s, &info);
    *lost = info.dropped_event_count;
    *fired = info.events_delivered + info.dropped_event_count;
}
static uint64_t process_lost0, process_fired0; /* the session's counts when this process's tracing began */
/* The session's counts when the current file began: the end of the one
 * before, or this process's start (a fork child's: the fork). */
static uint64_t file_lost0, file_fired0;

static int host_write(void *ctx, const void *buf, size_t n)
{
    enc_state *e = ctx;
    return e->write(e->wctx, buf, n);
}

static int host_stack(void *ctx, uint32_t id, uint64_t *out, int max, unsigned *category)
{
    (void)ctx;
    if (id == 0 || id >= mt_site_count_ids())
        return -1;
    int n = mt_site_frames_traced(id, out, max);
    *category = mt_sites[id].cat;
    return n;
}

static const char *host_category_name(void *ctx, unsigned id)
{
    (void)ctx;
    return id < (unsigned)atomic_load_explicit(&mt_ncats, memory_order_acquire) ? mt_cats[id].name : NULL;
}

/* The modules noted as sites were made (no dl_iterate_phdr here: a
 * producer waiting for this thread may hold the loader's lock), gone ones
 * too (their stacks may be written yet); each one noted where another lay
 * shifted, as its frames are (mt_module_traced). */
static void host_modules(void *ctx, struct mt_trace_writer *w)
{
    (void)ctx;
    int n = mt_module_count();
    for (int i = 0; i < n; i++) {
        const mt_module *m = mt_module_get(i);
        if (m)
            mt_trace_write_module(w, mt_module_traced(i, m->start), mt_module_traced(i, m->end),
                                  mt_module_traced(i, m->bias), m->path, m->build_id_len ? m->build_id : NULL,
                                  m->build_id_len);
    }
}

/* The writer's encoder threads: the agent's own (this runs on the
 * dispatcher, inside the agent), with every signal blocked. */
static int host_spawn(void *ctx, void *(*fn)(void *), void *arg, pthread_t *out)
{
    (void)ctx;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    mt_agent_enter();
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setstacksize(&attr, 256 * 1024);
        rc = pthread_create(out, &attr, fn, arg);
        pthread_attr_destroy(&attr);
    }
    mt_agent_leave();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_setname_np(*out, "memtrail-enc");
    return -rc;
}

/* trace_threads=0: min(CPUs, 4). */
static unsigned encoder_threads(void)
{
    if (mt_trace_opt.threads)
        return mt_trace_opt.threads;
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > 4 ? 4 : (unsigned)n;
}

static mt_trace_writer *new_writer(enc_state *e)
{
    mt_trace_write_config cfg = {
        .pid = (uint32_t)getpid(),
        .start_ns = trace_start_ns,
        .start_realtime_ns = trace_start_real_ns,
        .time_unit_ns = mt_trace_opt.time_unit_ns,
        .zstd_level = mt_trace_opt.level,
        .chunk_events = mt_trace_opt.chunk_events,
        .chunk_age_ns = 500000000u,
        .threads = encoder_threads(),
    };
    mt_trace_host host = {
        .ctx = e,
        .write = host_write,
        .stack = host_stack,
        .category_name = host_category_name,
        .modules = host_modules,
        .spawn = host_spawn,
    };
    return mt_trace_writer_create(&cfg, &host);
}

static void *enc_create(int (*write)(void *ctx, const void *buf, size_t n), void *ctx)
{
    enc_state *e = mmap(NULL, sizeof *e, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (e == MAP_FAILED)
        return NULL;
    e->write = write;
    e->wctx = ctx;
    e->w = new_writer(e);
    e->merge = trace_merge_create(64); /* runs: CPU numbers modulo 64 */
    if (!e->w || !e->merge) {
        if (e->w)
            mt_trace_writer_destroy(e->w);
        trace_merge_destroy(e->merge);
        munmap(e, sizeof *e);
        return NULL;
    }
    if (making_trace) /* not an event_file target of the program's own sessions */
        trace_enc = e;
    return e;
}

static void enc_destroy(void *st)
{
    enc_state *e = st;
    if (e->w)
        mt_trace_writer_destroy(e->w);
    trace_merge_destroy(e->merge);
    munmap(e, sizeof *e);
}

/* The command line, as the summary report's cmdline line has it; a
 * longer one than a meta value holds is cut, never inside an escape. */
static void write_cmdline(mt_trace_writer *w)
{
    char cmd[MT_TRACE_META_MAX + 1];
    mt_out o;
    mt_out_init(&o, cmd, sizeof cmd, -1);
    mt_report_cmdline(&o);
    mt_out_cstr(&o);
    size_t slashes = 0;
    while (o.err && slashes < o.len && cmd[o.len - 1 - slashes] == '\\')
        slashes++;
    cmd[o.len - (slashes & 1)] = '\0'; /* an odd one out begins an escape cut short */
    mt_trace_write_meta(w, "cmdline", cmd);
}

static int enc_begin(void *st)
{
    enc_state *e = st;
    if (!e->w)
        return -ENOMEM;
    int rc = mt_trace_write_begin(e->w);
    if (rc < 0)
        return rc;
    char exe[MT_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        mt_trace_write_meta(e->w, "exe", exe);
    }
    write_cmdline(e->w);
    mt_trace_write_meta(e->w, "unwinder", mt_site_unwinder());
    char num[24];
    mt_out o;
    mt_out_init(&o, num, sizeof num, -1);
    mt_out_u64(&o, (uint64_t)(strcmp(began, "fork") == 0 && forked_by.parent ? forked_by.parent : getppid()));
    mt_trace_write_meta(e->w, "ppid", mt_out_cstr(&o));
    mt_trace_write_meta(e->w, "began", began);
    if (strcmp(began, "fork") == 0) {
        mt_trace_write_meta(e->w, "parent_trace", parent_trace);
        mt_out_init(&o, num, sizeof num, -1);
        mt_out_u64(&o, forked_by.ns);
        mt_trace_write_meta(e->w, "fork_ns", mt_out_cstr(&o));
        mt_out_init(&o, num, sizeof num, -1);
        mt_out_u64(&o, forked_by.last_id);
        mt_trace_write_meta(e->w, "fork_last_id", mt_out_cstr(&o));
    }
    e->last_ns = 0;
    e->open = 1;
    return 0;
}

/* The trace event of an engine event; 0 for a type the trace has none of. */
static unsigned trace_type(unsigned xe_type)
{
    switch (xe_type) {
    case XE_EV_ALLOC: return MT_TRACE_ALLOC;
    case XE_EV_FREE: return MT_TRACE_FREE;
    case XE_EV_REALLOC: return MT_TRACE_REALLOC;
    case XE_EV_MMAP: return MT_TRACE_MMAP;
    case XE_EV_MUNMAP: return MT_TRACE_MUNMAP;
    default: return 0;
    }
}

/* An engine event as a trace event, written field by field into t (a
 * merge run's slot: no event-sized copy on the way, which would read back
 * what was just stored in other widths). t->time_ns is the caller's. */
static MT_INLINE void fill_event(mt_trace_event *t, unsigned type, unsigned category, uint32_t tid,
                                 uint64_t size, uint64_t address, uint64_t site, uint64_t key, uint64_t value)
{
    int alloc = type == MT_TRACE_ALLOC || type == MT_TRACE_REALLOC;
    int map = type == MT_TRACE_MMAP || type == MT_TRACE_MUNMAP;
    t->type = (uint8_t)type;
    t->category = (uint8_t)category;
    t->thread = tid;
    t->size = type == MT_TRACE_FREE ? 0 : size;
    t->id = (uint32_t)key;
    t->old_id = type == MT_TRACE_REALLOC ? (uint32_t)value : 0;
    t->stack = alloc ? (uint32_t)site : 0;
    t->address = map ? address : 0;
}

static void enc_event(void *st, const xe_event *ev)
{
    enc_state *e = st;
    unsigned type = trace_type(ev->type);
    if (!e->w || !type)
        return;
    /* The trace session's events come here only when the file target
     * declined the record (its file not open yet: the first event of a
     * file); else enc_records has them. */
    if (!ev->tsc) {
        /* A session that is not time-ordered (an event_file target of the
         * program's own sessions): no watermark will come; as delivered. */
        mt_trace_event t;
        fill_event(&t, type, ev->category, ev->tid, ev->size, ev->address, ev->site, ev->key, ev->value);
        t.time_ns = ev->time_ns;
        (void)mt_trace_write_event(e->w, &t);
        return;
    }
    /* time_ns holds the engine clock, the merge's key; the writer gets
     * ns (emit_events). */
    mt_trace_event *t = trace_merge_put(e->merge, ev->cpu, ev->tsc);
    if (t)
        fill_event(t, type, ev->category, ev->tid, ev->size, ev->address, ev->site, ev->key, ev->value);
    else
        e->unstaged++;
}

/* The trace session's records (time-ordered), a run of them as they lie
 * in the engine's buffer, staged: enc_event's second case with no event
 * on the way. */
static uint64_t enc_records(void *st, const char *recs, uint64_t bytes)
{
    enc_state *e = st;
    uint64_t n = 0;
    for (const char *at = recs, *end = recs + bytes; at < end; n++) {
        const xe_rec *r = (const xe_rec *)at;
        at += xe_rec_len(r);
        unsigned type = trace_type(r->type);
        if (!e->w || !type)
            continue;
        mt_trace_event *t = trace_merge_put(e->merge, r->cpu, r->tsc);
        if (t)
            fill_event(t, type, r->category, r->tid, r->size, xe_rec_address(r), r->site, r->key, r->value);
        else
            e->unstaged++;
    }
    return n;
}

/* Merged events, n in a row, to the writer, their clock in ns (never
 * earlier than the event before: the clock's rate is refined as the run
 * goes, between watermarks). */
static void emit_events(void *ctx, mt_trace_event *ev, size_t n)
{
    enc_state *e = ctx;
    xe_clock_conv c;
    xe_clock_conv_get(&c);
    uint64_t last = e->last_ns;
    for (size_t i = 0; i < n; i++) {
        uint64_t ns = xe_clock_conv_ns(&c, ev[i].time_ns);
        if (ns < last)
            ns = last;
        last = ns;
        ev[i].time_ns = ns;
    }
    e->last_ns = last;
    (void)mt_trace_write_events(e->w, ev, n);
}

static void enc_watermark(void *st, uint64_t tsc)
{
    enc_state *e = st;
    if (e->w)
        trace_merge_emit(e->merge, tsc, emit_events, e);
}

static void enc_flush(void *st)
{
    enc_state *e = st;
    if (e->w)
        (void)mt_trace_write_flush(e->w, 0);
}

static void enc_end(void *st)
{
    enc_state *e = st;
    if (!e->open || !e->w)
        return;
    trace_merge_emit(e->merge, UINT64_MAX, emit_events, e); /* a stop gave the last watermark already */
    mt_trace_write_meta(e->w, "ended", ended);
    e->open = 0;
    uint64_t lost, fired;
    session_counts(&lost, &fired);
    /* Lost: the session's drops, and what the writer could not take (out
     * of memory) or write (the open chunk's, if its write fails, are not
     * in this count: the file then gets no end record anyway). */
    mt_trace_write_stats ws;
    mt_trace_write_get_stats(e->w, &ws);
    static const char *const names[] = {"events_lost", "events_fired", "recording_stopped_out_of_memory"};
    uint64_t values[] = {lost - file_lost0 + ws.events_lost_to_errors - e->wlost0 + e->unstaged,
                         fired - file_fired0, atomic_load(&mt_trace_stopped) != 0};
    e->unstaged = 0;
    file_lost0 = lost;
    file_fired0 = fired;
    (void)mt_trace_write_finish(e->w, names, values, atomic_load(&mt_trace_stopped) ? 3 : 2);
    mt_trace_write_get_stats(e->w, &ws);
    files_written += (ws.events - e->wevents0) - (ws.events_lost_to_errors - e->wlost0);
    files_bytes += ws.bytes - e->wbytes0;
    e->wevents0 = ws.events;
    e->wlost0 = ws.events_lost_to_errors;
    e->wbytes0 = ws.bytes;
}

/* A fork child starts over: the parent's open chunk is the parent's. */
static void enc_forked(void *st)
{
    enc_state *e = st;
    if (e->w)
        mt_trace_writer_destroy(e->w);
    trace_merge_clear(e->merge); /* the parent's events */
    e->unstaged = 0;
    e->open = 0;
    e->wevents0 = e->wlost0 = e->wbytes0 = 0;
    e->w = atomic_load(&mt_trace_stopped) ? NULL : new_writer(e);
}

static int enc_wanted(void *st)
{
    return st == trace_enc && atomic_load(&named_by_child);
}

static const xe_file_encoder trace_encoder = {
    .name = "trace",
    .create = enc_create,
    .begin = enc_begin,
    .records = enc_records,
    .event = enc_event,
    .flush = enc_flush,
    .end = enc_end,
    .destroy = enc_destroy,
    .forked = enc_forked,
    .watermark = enc_watermark,
    .wanted = enc_wanted,
};

/* ---- the session ----------------------------------------------------------- */

int mt_trace_init(void)
{
    trace_start_ns = mt_clock_ns(CLOCK_MONOTONIC);
    trace_start_real_ns = mt_clock_ns(CLOCK_REALTIME);
    xe_file_set_encoder(&trace_encoder);
    return 0;
}

static void say_no_trace(const char *why)
{
    char msg[MT_PATH_MAX + 256];
    mt_out o;
    mt_out_init(&o, msg, sizeof msg, -1);
    mt_out_str(&o, "trace mode: ");
    mt_out_str(&o, why);
    mt_out_str(&o, "; the program runs without a trace");
    mt_say(mt_out_cstr(&o));
}

/* Address space kept for the last chunks. When the program runs out of
 * memory (RLIMIT_AS, overcommit off), recording stops and the events in
 * flight are encoded, which needs a little memory (the chunk's output
 * buffer, zstd's workspace): whether the heap still had it was luck. This
 * reservation (PROT_NONE: address space, never resident) is given back
 * first, so the stop has room. */
#define STOP_RESERVE (4u << 20)
static void *stop_reserve;

static void reserve_for_stop(void)
{
    if (stop_reserve)
        return;
    mt_agent_enter();
    void *p = mmap(NULL, STOP_RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    mt_agent_leave();
    stop_reserve = p == MAP_FAILED ? NULL : p;
}

static void release_stop_reserve(void)
{
    if (stop_reserve) {
        munmap(stop_reserve, STOP_RESERVE); /* inside the agent: its own mapping */
        stop_reserve = NULL;
    }
}

/* Creates and starts the session writing to `path`. */
static int start_session(const char *path)
{
    static xe_config cfg; /* large for a stack */
    char why[256] = "";
    xe_config_defaults(&cfg);
    mt_out o;
    mt_out_init(&o, cfg.name, sizeof cfg.name, -1);
    mt_out_str(&o, "memtrail-trace");
    mt_out_cstr(&o);
    cfg.mode = XE_PART_PER_CPU;
    cfg.time_order = 1;
    cfg.short_allocs = 1; /* allocation events by id (fill_event) */
    /* Per-CPU buffers of at least 64 KB: ceil(2.5 x CPUs) of them (the
     * engine's sizing rule), whatever trace_buffer says below that. */
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    uint64_t least = (uint64_t)((5 * (cpus > 0 ? cpus : 1) + 1) / 2) << 16;
    cfg.max_memory = mt_trace_opt.buffer > least ? mt_trace_opt.buffer : least;
    cfg.retention = mt_trace_opt.wait ? XE_NO_EVENT_LOSS : XE_ALLOW_SINGLE_EVENT_LOSS;
    cfg.max_dispatch_latency_ns = 500000000u; /* with the writer's chunk age: a kill loses ~1 s */
    cfg.event_mask =
        1u << XE_EV_ALLOC | 1u << XE_EV_FREE | 1u << XE_EV_REALLOC | 1u << XE_EV_MMAP | 1u << XE_EV_MUNMAP;
    cfg.ntargets = 1;
    cfg.targets[0].ops = &xe_target_event_file;
    mt_out_init(&o, cfg.targets[0].params, sizeof cfg.targets[0].params, -1);
    /* No size limit (2^50 bytes), no rollover. */
    mt_out_str(&o, "max_file_size=1073741824,max_rollover_files=0,filename=");
    /* The path as it is: the target reads %p and %% in a filename. */
    for (const char *c = path; *c; c++) {
        if (*c == '%')
            mt_out_char(&o, '%');
        mt_out_char(&o, *c);
    }
    _Static_assert(MT_TRACE_PATH_MAX + 64 < sizeof cfg.targets[0].params,
                   "a trace path fits the target's params");
    if (strlen(path) > MT_TRACE_PATH_MAX) {
        say_no_trace("the output path is too long (at most 440 bytes)");
        return -1;
    }
    mt_out_cstr(&o);
    if (o.err) { /* every '%' doubled: a path of many of them */
        say_no_trace("the output path is too long (its '%' signs count twice)");
        return -1;
    }
    xe_session *s = NULL;
    making_trace = 1;
    int rc = xe_session_create(&cfg, &s, why, sizeof why);
    making_trace = 0;
    if (rc == 0 && (rc = xe_session_start(s)) != 0) {
        mt_out_init(&o, why, sizeof why, -1);
        mt_out_str(&o, "cannot start its session");
        mt_out_cstr(&o);
        xe_session_drop(s);
    }
    if (rc != 0) {
        say_no_trace(why[0] ? why : "cannot create its session");
        return -1;
    }
    trace_session = s;
    mt_xe_set_trace_session(s);
    reserve_for_stop();
    return 0;
}

/* When this process started, on the wall clock (from /proc/self/stat's
 * start time, in clock ticks after boot); 0 if unknown. */
static uint64_t process_start_realtime_ns(void)
{
    uint64_t ticks = mt_proc_stat_field(0, 22);
    if (!ticks)
        return 0;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return 0;
    uint64_t since_boot = ticks * (1000000000u / (uint64_t)hz);
    uint64_t boot = mt_clock_ns(CLOCK_BOOTTIME), real = mt_clock_ns(CLOCK_REALTIME);
    return real > boot ? real - boot + since_boot : 0;
}

/* Does `path` hold a trace this process wrote before an exec replaced its
 * image (same pid, begun after the process started)? */
static int written_by_earlier_image(const char *path, uint64_t started)
{
    unsigned char h[40];
    /* Only a regular file: a FIFO's open would wait for a writer (and a
     * read take its data), a symbolic link is not ours. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, h, sizeof h) : -1;
    close(fd);
    if (n != (ssize_t)sizeof h || memcmp(h, "MTTRACE", 8) != 0)
        return 0;
    uint64_t real = 0;
    uint32_t pid = 0;
    for (int i = 0; i < 8; i++)
        real |= (uint64_t)h[24 + i] << (8 * i);
    for (int i = 0; i < 4; i++)
        pid |= (uint32_t)h[32 + i] << (8 * i);
    /* Ticks are coarse: a second of slack. */
    return pid == (uint32_t)getpid() && started && real + 1000000000u >= started;
}

void mt_trace_start(void)
{
    if (!mt_site_opt.trace || atomic_load(&mt_rec) != MT_REC_TRACE)
        return; /* start=off: `memtrail query PID start trace` starts one */
    if (mt_report_path(NULL, trace_path, sizeof trace_path) != 0) {
        say_no_trace("the output path is too long");
        return;
    }
    /* After an exec (follow_exec=on) the pid, and so the path, is the
     * earlier image's: keep its trace, and write PATH.1 (.2, ...). */
    uint64_t started = process_start_realtime_ns();
    size_t len = strlen(trace_path);
    if (!getcwd(start_dir, sizeof start_dir))
        start_dir[0] = '\0';
    began = "start";
    for (unsigned k = 1; written_by_earlier_image(trace_path, started) && k < 1000; k++) {
        began = "exec";
        mt_out o;
        mt_out_init(&o, trace_path + len, sizeof trace_path - len, -1);
        mt_out_char(&o, '.');
        mt_out_u64(&o, k);
        mt_out_cstr(&o);
    }
    int saved_errno = errno;
    mt_agent_enter(); /* its buffers, its thread and its writer's memory are the agent's */
    (void)start_session(trace_path);
    mt_agent_leave();
    recordings = 1;
    errno = saved_errno;
}

/* errno's text, from glibc's table (no locale, no malloc). */
static const char *errno_text(int e)
{
    const char *t = e ? strerrordesc_np(e) : NULL;
    return t ? t : "unknown error";
}

/* The line mt_trace_report says (without "memtrail: "), into o. Returns
 * 0 when nothing was fired and no file made, 2 when something went wrong
 * (events lost, the file not opened or not written, the descriptor closed
 * behind the agent, recording stopped out of memory), 1 otherwise. */
static int trace_summary(xe_session *s, mt_out *o)
{
    xe_session_info info;
    xe_session_info_get(s, &info);
    xe_file_status fs;
    if (xe_session_file_status(s, &fs) != 0)
        memset(&fs, 0, sizeof fs);
    /* Every event fired in this process is in the file (whole chunks
     * written) or lost: dropped by a full buffer, by a file that could not
     * be opened or written, by a writer out of memory, or fired after
     * recording stopped. */
    uint64_t unrecorded = atomic_load(&mt_trace_unrecorded);
    uint64_t fired = info.events_delivered + info.dropped_event_count - process_fired0 + unrecorded;
    uint64_t lost = fired > files_written ? fired - files_written : 0;
    uint64_t dropped = info.dropped_event_count - process_lost0;
    if (fs.files_opened == 0 && fs.last_op == 1) {
        mt_out_str(o, "trace: cannot open ");
        mt_out_str(o, fs.path);
        mt_out_str(o, ": ");
        mt_out_str(o, errno_text(fs.last_errno));
        mt_out_str(o, "; ");
        mt_out_u64(o, lost);
        mt_out_str(o, " events lost");
        return 2;
    }
    if (fs.files_opened == 0 && fired == 0) {
        /* Nothing happened (a process that execs at once, as make's and
         * git's children do): no file was made, so none is named. */
        mt_out_str(o, "trace: no events, no trace file written");
        return 0;
    }
    mt_out_str(o, "trace: ");
    mt_out_u64(o, files_written);
    mt_out_str(o, " events, ");
    mt_out_u64(o, lost);
    mt_out_str(o, " lost");
    if (dropped)
        mt_out_str(o, " (the buffer was full: a bigger trace_buffer, or trace_loss=wait, keeps them)");
    if (fs.reopened) {
        mt_out_str(o, " (the program closed the trace file's descriptor behind the agent's hooks ");
        mt_out_u64(o, fs.reopened);
        mt_out_str(o, fs.reopened == 1 ? " time: the file was opened again)"
                                       : " times: the file was opened again)");
    }
    if (fs.last_op) {
        mt_out_str(o, fs.last_op == 1 ? " (cannot open " : " (writing ");
        mt_out_str(o, fs.path);
        mt_out_str(o, fs.last_op == 1 ? ": " : " failed: ");
        mt_out_str(o, errno_text(fs.last_errno));
        mt_out_str(o, ")");
    }
    if (atomic_load(&mt_trace_stopped)) {
        mt_out_str(o, " (out of memory: recording stopped, the trace was finished there; ");
        mt_out_u64(o, unrecorded);
        mt_out_str(o, " events after it not recorded)");
    }
    mt_out_str(o, ", ");
    mt_out_u64(o, files_bytes);
    mt_out_str(o, " bytes in ");
    mt_out_str(o, trace_path);
    return lost || fs.reopened || fs.last_op || atomic_load(&mt_trace_stopped) ? 2 : 1;
}

/* Is this process a child of the one the user started: forked, or any process but run_pid under `memtrail
 * run` (an exec'd child)? A child's line goes to a stderr its parent may have redirected into its data
 * (`$(cmd 2>&1)`), and the other modes' children say nothing: it says its line only when something went
 * wrong. */
static int quiet_child(void)
{
    if (forked_child)
        return 1;
    return mt_trace_opt.run_pid > 0 && getpid() != mt_trace_opt.run_pid;
}

void mt_trace_report(void)
{
    xe_session *s = trace_session;
    if (!s || !mt_own_process())
        return;
    char msg[2 * MT_PATH_MAX + 512];
    mt_out o;
    mt_out_init(&o, msg, sizeof msg, -1);
    if (trace_summary(s, &o) < 2 && quiet_child())
        return;
    mt_say(mt_out_cstr(&o));
}

/* The program is out of memory (an allocation of its own failed): the
 * agent gives back what it holds so the program gets the memory instead.
 * Recording stops for good: the file is finished (its end record says so),
 * the writer and the session's buffers are unmapped, and events fired from
 * now on are counted as not recorded. Returns 1 if memory was given back
 * (the caller retries its allocation). */
int mt_trace_out_of_memory(void)
{
    xe_session *s = trace_session;
    if (!s || mt_t.in_agent || !mt_own_process() || xe_session_on_dispatcher(s))
        return 0;
    if (atomic_flag_test_and_set(&trace_switching))
        return 0; /* a stop is retiring the session: its memory comes back then */
    int expect = 0;
    if (trace_session != s || !atomic_compare_exchange_strong(&mt_trace_stopped, &expect, 1)) {
        atomic_flag_clear(&trace_switching);
        return 0;
    }
    int saved_errno = errno;
    int cancel = mt_cancel_off(); /* inside a malloc: joins and writes below (agent.h) */
    ended = "out-of-memory";
    mt_agent_enter();
    release_stop_reserve();
    xe_session_stop(s);
    (void)xe_session_release_buffers(s);
    if (trace_enc && trace_enc->w) {
        mt_trace_writer_destroy(trace_enc->w);
        trace_enc->w = NULL;
    }
    atomic_store(&mt_trace_stopped, 2);
    atomic_flag_clear(&trace_switching);
    mt_rlimit_agent_shrank();
    mt_agent_leave();
    mt_cancel_restore(cancel);
    errno = saved_errno;
    return 1;
}

/* exec replaces the image without exit handlers: finish the file first;
 * if the exec fails, tracing goes on in the next file (PATH.1). */
void mt_trace_before_exec(void)
{
    xe_session *s = trace_session;
    if (!s || !mt_own_process())
        return;
    ended = "exec";
    int saved_errno = errno;
    mt_agent_enter();
    xe_session_stop(s);
    mt_trace_report();
    mt_agent_leave();
    errno = saved_errno;
}

/* A crash: finish the file (the chunks buffered so far), unless the crash
 * is on the thread that writes it. From the crash handler. */
/* Is this one of the trace's own threads (the dispatcher, an encoder)? A
 * crash there cannot wait for the trace to finish: it would wait for
 * itself. */
static int on_trace_thread(xe_session *s)
{
    char name[16] = "";
    if (xe_session_on_dispatcher(s))
        return 1;
    return prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strcmp(name, "memtrail-enc") == 0;
}

void mt_trace_crash(const char *why)
{
    xe_session *s = trace_session;
    if (!s || !mt_own_process() || on_trace_thread(s))
        return;
    mt_out o;
    mt_out_init(&o, ended_buf, sizeof ended_buf, -1);
    mt_out_str(&o, why);
    ended = mt_out_cstr(&o);
    mt_agent_enter();
    xe_session_stop(s);
    mt_trace_report();
    mt_agent_leave();
}

/* Before the process changes its user or group ids (setid.c): deliver
 * what is buffered now, so that this process's trace file is opened (if
 * it is not yet) while the process may still create it. Threads share
 * the change (glibc applies it to all), the writer thread included. */
void mt_trace_before_setid(void)
{
    xe_session *s = trace_session;
    if (!s || !mt_own_process())
        return;
    int saved_errno = errno;
    mt_agent_enter();
    (void)xe_session_flush(s);
    mt_agent_leave();
    errno = saved_errno;
}

void mt_trace_after_failed_exec(void)
{
    xe_session *s = trace_session;
    if (!s || !mt_own_process())
        return;
    int saved_errno = errno;
    ended = "exit";
    began = "start"; /* (not a fork: its blocks are not a parent's to replay) */
    mt_agent_enter();
    (void)xe_session_start(s);
    mt_agent_leave();
    errno = saved_errno;
}

void mt_trace_before_fork(void)
{
    if (!trace_session)
        return;
    fork_ns = mt_clock_ns(CLOCK_MONOTONIC);
    /* Read, then the generation moved: every thread takes a new block,
     * above this id, for its next allocation. */
    fork_last_id = atomic_load(&mt_trace_last_id);
    atomic_fetch_add(&mt_trace_id_gen, 1);
    fork_parent = getpid();
    atomic_store(&named_by_child, 1);
}

void mt_trace_after_fork_child(void)
{
    /* Held by a thread of the parent's (a start, a stop, the out-of-memory
     * path), which the child does not have. */
    atomic_flag_clear(&trace_switching);
    forked_child = 1;
    if (!trace_session)
        return;
    files_written = files_bytes = 0;
    atomic_store(&mt_trace_unrecorded, 0);
    /* The child's trace begins at the fork; the blocks it inherited are in
     * the parent's trace, up to the fork (the analysis reads them there). */
    began = "fork";
    ended = "exit";
    atomic_store(&named_by_child, 0); /* the parent's, until this process forks */
    forked_by.ns = fork_ns;           /* mt_trace_before_fork's, for this child */
    forked_by.last_id = fork_last_id;
    forked_by.parent = fork_parent;
    mt_out po;
    mt_out_init(&po, parent_trace, sizeof parent_trace, -1);
    if (trace_path[0] != '/' && start_dir[0]) {
        mt_out_str(&po, start_dir);
        mt_out_char(&po, '/');
    }
    mt_out_str(&po, trace_path);
    mt_out_cstr(&po);
    session_counts(&process_lost0, &file_fired0);
    file_lost0 = process_lost0;
    process_fired0 = file_fired0;
    char path[MT_PATH_MAX];
    /* A template without %p, or a path given with `query PID start trace
     * -o FILE`, would name the parent's file: add the pid. */
    if (path_given || mt_report_path(NULL, path, sizeof path) != 0 || strcmp(path, trace_path) == 0) {
        mt_out o;
        mt_out_init(&o, path, sizeof path, -1);
        mt_out_str(&o, trace_path);
        mt_out_char(&o, '.');
        mt_out_u64(&o, (uint64_t)getpid());
        mt_out_cstr(&o);
    }
    memcpy(trace_path, path, sizeof path);
    mt_agent_enter();
    xe_session_file_retarget(trace_session, trace_path);
    mt_agent_leave();
}

/* ---- recording on demand (record.c) ------------------------------------- */

/* Waits for the out-of-memory path, if it holds the session (it does not
 * wait for anything itself). */
static void take_switching(void)
{
    while (atomic_flag_test_and_set(&trace_switching)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

int mt_trace_record_start(const char *path, mt_out *reply)
{
    if (trace_session)
        return -EALREADY;
    if (atomic_load(&mt_trace_stopped)) {
        mt_out_str(reply, "error trace recording stopped for good when the program ran out of memory\n");
        return -ENOMEM;
    }
    char tmp[MT_PATH_MAX];
    if (path) {
        mt_out o;
        mt_out_init(&o, tmp, sizeof tmp, -1);
        mt_out_str(&o, path);
        mt_out_cstr(&o);
    } else if (mt_report_path(NULL, tmp, sizeof tmp) == 0) {
        /* The configured output; the second trace of this process is
         * OUTPUT.1, and so on, so none replaces an earlier one. */
        if (recordings > 0) {
            size_t len = strlen(tmp);
            mt_out o;
            mt_out_init(&o, tmp + len, sizeof tmp - len, -1);
            mt_out_char(&o, '.');
            mt_out_u64(&o, recordings);
            mt_out_cstr(&o);
        }
    } else {
        mt_out_str(reply, "error the output path is too long\n");
        return -ENAMETOOLONG;
    }
    /* Fresh counts: what mt_trace_report and the stop's reply say is this
     * trace's. */
    files_written = files_bytes = 0;
    process_lost0 = process_fired0 = file_lost0 = file_fired0 = 0;
    atomic_store(&named_by_child, 0); /* a child of an earlier trace names that one */
    atomic_store(&mt_trace_unrecorded, 0);
    if (!trace_start_ns)
        mt_trace_init(); /* a detail-mode process: the encoder for event_file targets */
    memcpy(trace_path, tmp, sizeof tmp);
    began = "query";
    ended = "exit";
    if (!start_dir[0] && !getcwd(start_dir, sizeof start_dir))
        start_dir[0] = '\0';
    path_given = path != NULL;
    int saved_errno = errno;
    mt_agent_enter();
    take_switching();
    int rc = start_session(trace_path);
    atomic_flag_clear(&trace_switching);
    mt_agent_leave();
    errno = saved_errno;
    if (rc != 0) {
        mt_out_str(reply, "error cannot start the trace session (the program's stderr says why)\n");
        return -EIO;
    }
    recordings++;
    return 0;
}

int mt_trace_session_open(void)
{
    return trace_session != NULL;
}

void mt_trace_record_stop(mt_out *reply, int drained)
{
    xe_session *s = trace_session;
    if (!s)
        return;
    int saved_errno = errno;
    ended = "query";
    mt_agent_enter();
    xe_session_stop(s); /* every event fired is written, the file finished */
    char msg[2 * MT_PATH_MAX + 512];
    mt_out o;
    mt_out_init(&o, msg, sizeof msg, -1);
    int made = trace_summary(s, &o);
    mt_out_cstr(&o);
    mt_out_str(reply, made ? "ok " : "ok trace stopped; ");
    mt_out_str(reply, msg);
    if (!drained)
        mt_out_str(reply,
                   " (some allocations were still inside the agent after 2 s: the trace's buffers stay "
                   "mapped, so that they can finish)");
    mt_out_char(reply, '\n');
    mt_xe_set_trace_session(NULL);
    take_switching();
    trace_session = NULL;
    trace_enc = NULL;
    atomic_flag_clear(&trace_switching);
    /* Retired, not dropped: the exit or crash path, or a hook, may still
     * hold the pointer; the session's own pages stay (a few KB a stop),
     * its buffers go back unless a hook may still be inside one. */
    xe_session_retire(s, drained);
    mt_agent_leave();
    errno = saved_errno;
}