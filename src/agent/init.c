/* init.c — the agent's life: start-up (finding the real allocator,
 * reading MEMTRAIL_OPTIONS), the bootstrap arena, fork, the report at exit,
 * and the one place that prints heap errors. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/sessions.h"
#include "agent/site.h"
#include "agent/trace.h"
#include "agent/vm.h"
#include "common/out.h"
#include "xe/xe_plan.h"

mt_real mt_real_fn;
mt_options mt_opt;
_Atomic int mt_state;
int mt_tracking;
_Atomic int mt_hot;
uint64_t mt_secret;
int64_t mt_start_ns;
MT_TLS mt_tls mt_t;

/* ---- bootstrap arena ---------------------------------------------------
 * dlsym() may call calloc/malloc before we know where the real ones are.
 * Those few requests are served from static memory that is never reused
 * (so it stays zeroed for calloc) and recognised by address on free. */
_Alignas(16) char mt_arena[MT_ARENA_SIZE];
static _Atomic size_t arena_used;

void *mt_arena_alloc(size_t size)
{
    size_t need = 16 + ((size + 15) & ~(size_t)15);
    if (size > MT_ARENA_SIZE)
        return NULL;
    size_t at = atomic_fetch_add(&arena_used, need);
    if (at + need > MT_ARENA_SIZE)
        return NULL;
    size_t *h = (size_t *)(mt_arena + at);
    *h = size;
    return mt_arena + at + 16;
}

/* ---- messages ---------------------------------------------------------- */

void mt_say(const char *msg)
{
    char buf[512];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, 2);
    mt_out_str(&o, "memtrail: ");
    mt_out_str(&o, msg);
    mt_out_char(&o, '\n');
    mt_out_flush(&o);
}

void mt_heap_error(const char *what, const void *p, uint64_t size, unsigned cat)
{
    char buf[512];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, 2);
    mt_out_str(&o, "memtrail: ");
    mt_out_str(&o, what);
    mt_out_str(&o, ": block at ");
    mt_out_hex(&o, (uintptr_t)p);
    if (size != UINT64_MAX) {
        mt_out_str(&o, ", ");
        if (size >= 0xFFFFFFu)
            mt_out_str(&o, "at least ");
        mt_out_u64(&o, size);
        mt_out_str(&o, " bytes");
    }
    if (cat < MT_NCAT) {
        mt_out_str(&o, ", category ");
        mt_out_str(&o, mt_cats[cat].name);
    }
    mt_out_str(&o, mt_opt.on_error == MT_ON_ERROR_ABORT ? "; aborting (on_error=abort)\n"
                                                         : "; the program continues (on_error=report)\n");
    mt_out_flush(&o);
    if (mt_opt.on_error == MT_ON_ERROR_ABORT) {
        mt_control_shutdown();
        abort();
    }
}

/* ---- options ----------------------------------------------------------- */

static int set_option(const char *key, size_t klen, const char *val)
{
    char msg[MT_PATH_MAX + 256];
    mt_out o;
    mt_out_init(&o, msg, sizeof msg, -1);
#define KEY_IS(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
    if (KEY_IS("mode")) {
        if (strcmp(val, "summary") == 0)
            mt_opt.mode = MT_MODE_SUMMARY;
        else if (strcmp(val, "detail") == 0)
            mt_opt.mode = MT_MODE_DETAIL;
        else if (strcmp(val, "trace") == 0)
            mt_opt.mode = MT_MODE_TRACE;
        else if (strcmp(val, "off") == 0)
            mt_opt.mode = MT_MODE_OFF;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("depth")) {
        char *end;
        long d = strtol(val, &end, 10);
        if (!*val || *end || d < 1 || d > MT_DEPTH_MAX)
            goto bad_value;
        mt_site_opt.depth = (int)d;
        return 0;
    }
    if (KEY_IS("unwind")) {
        if (strcmp(val, "auto") == 0)
            mt_site_opt.unwind = MT_UNWIND_AUTO;
        else if (strcmp(val, "libunwind") == 0)
            mt_site_opt.unwind = MT_UNWIND_LIBUNWIND;
        else if (strcmp(val, "fp") == 0)
            mt_site_opt.unwind = MT_UNWIND_FP;
        else if (strcmp(val, "cfi") == 0)
            mt_site_opt.unwind = MT_UNWIND_CFI;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("trace_buffer")) {
        uint64_t v;
        if (xe_parse_size(val, 1u << 20, &v) < 0 || v < (192u << 10) || v > (64ull << 30))
            goto bad_value;
        mt_trace_opt.buffer = v;
        return 0;
    }
    if (KEY_IS("trace_time_unit")) {
        char *end;
        long u = strtol(val, &end, 10);
        if (!*val || *end || u < 1 || u > 1000000000)
            goto bad_value;
        mt_trace_opt.time_unit_ns = (uint32_t)u;
        return 0;
    }
    if (KEY_IS("trace_level")) {
        char *end;
        long l = strtol(val, &end, 10);
        if (!*val || *end || l < 1 || l > 19)
            goto bad_value;
        mt_trace_opt.level = (int)l;
        return 0;
    }
    if (KEY_IS("trace_chunk")) {
        char *end;
        long n = strtol(val, &end, 10);
        if (!*val || *end || n < 1024 || n > (1l << 20))
            goto bad_value;
        mt_trace_opt.chunk_events = (uint32_t)n;
        return 0;
    }
    if (KEY_IS("trace_loss")) {
        if (strcmp(val, "drop") == 0)
            mt_trace_opt.wait = 0;
        else if (strcmp(val, "wait") == 0)
            mt_trace_opt.wait = 1;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("on_error")) {
        if (strcmp(val, "report") == 0)
            mt_opt.on_error = MT_ON_ERROR_REPORT;
        else if (strcmp(val, "abort") == 0)
            mt_opt.on_error = MT_ON_ERROR_ABORT;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("output")) {
        size_t n = strlen(val);
        if (n == 0 || n >= sizeof mt_opt.output - 256)
            goto bad_value;
        memcpy(mt_opt.output, val, n + 1);
        return 0;
    }
    if (KEY_IS("crash_report")) {
        if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
            goto bad_value;
        mt_crash_report_opt = strcmp(val, "on") == 0;
        return 0;
    }
    if (KEY_IS("follow_exec")) {
        if (strcmp(val, "on") == 0)
            mt_follow_exec = 1;
        else if (strcmp(val, "off") == 0)
            mt_follow_exec = 0;
        else
            goto bad_value;
        return 0;
    }
    if (KEY_IS("query")) {
        if (strcmp(val, "on") == 0)
            mt_control_enabled = MT_QUERY_SIGNAL;
        else if (strcmp(val, "thread") == 0)
            mt_control_enabled = MT_QUERY_THREAD;
        else if (strcmp(val, "off") == 0)
            mt_control_enabled = MT_QUERY_OFF;
        else
            goto bad_value;
        return 0;
    }
    mt_out_str(&o, "MEMTRAIL_OPTIONS: unknown key '");
    mt_out_mem(&o, key, klen);
    mt_out_str(&o, "' (accepted: mode, depth, unwind, output, trace_buffer, trace_loss, trace_time_unit, trace_level, trace_chunk, on_error, crash_report, follow_exec, query); running untracked");
    mt_say(mt_out_cstr(&o));
    return -1;
bad_value:
    mt_out_str(&o, "MEMTRAIL_OPTIONS: bad value '");
    mt_out_str(&o, val);
    mt_out_str(&o, "' for ");
    mt_out_mem(&o, key, klen);
    if (KEY_IS("mode"))
        mt_out_str(&o, " (accepted: summary, detail, trace, off)");
    else if (KEY_IS("trace_buffer"))
        mt_out_str(&o, " (accepted: a size from 192KB to 64GB, a number of MB or with a unit)");
    else if (KEY_IS("trace_loss"))
        mt_out_str(&o, " (accepted: drop, wait)");
    else if (KEY_IS("trace_level"))
        mt_out_str(&o, " (accepted: a zstd level from 1 to 19)");
    else if (KEY_IS("trace_chunk"))
        mt_out_str(&o, " (accepted: events per chunk, 1024 to 1048576)");
    else if (KEY_IS("trace_time_unit"))
        mt_out_str(&o, " (accepted: nanoseconds from 1 to 1000000000)");
    else if (KEY_IS("depth"))
        mt_out_str(&o, " (accepted: 1 to 64 frames)");
    else if (KEY_IS("unwind"))
        mt_out_str(&o, " (accepted: auto, cfi, libunwind, fp)");
    else if (KEY_IS("on_error"))
        mt_out_str(&o, " (accepted: report, abort)");
    else if (KEY_IS("query"))
        mt_out_str(&o, " (accepted: on, thread, off)");
    else if (KEY_IS("crash_report") || KEY_IS("follow_exec"))
        mt_out_str(&o, " (accepted: on, off)");
    else
        mt_out_str(&o, " (accepted: a file path, at most 3800 bytes; %p = pid, %e = program name)");
    mt_out_str(&o, "; running untracked");
    mt_say(mt_out_cstr(&o));
    return -1;
#undef KEY_IS
}

/* Parses "key=value:key=value"; in a value, "\:" is ':' and "\\" is '\'.
 * Returns 0, or -1 after printing what is wrong. */
static int parse_options(const char *s)
{
    static char val[MT_PATH_MAX];
    while (*s) {
        const char *key = s;
        while (*s && *s != '=' && *s != ':')
            s++;
        size_t klen = (size_t)(s - key);
        if (*s != '=') {
            if (klen == 0 && *s == ':') { /* tolerate empty fields */
                s++;
                continue;
            }
            char msg[256];
            mt_out o;
            mt_out_init(&o, msg, sizeof msg, -1);
            mt_out_str(&o, "MEMTRAIL_OPTIONS: '");
            mt_out_mem(&o, key, klen < 64 ? klen : 64);
            mt_out_str(&o, "' is not key=value (accepted keys: mode, depth, unwind, output, on_error, crash_report, follow_exec, query); running untracked");
            mt_say(mt_out_cstr(&o));
            return -1;
        }
        s++;
        size_t n = 0;
        while (*s && *s != ':') {
            if (*s == '\\' && (s[1] == ':' || s[1] == '\\'))
                s++;
            if (n + 1 < sizeof val)
                val[n++] = *s;
            s++;
        }
        val[n] = '\0';
        if (*s == ':')
            s++;
        if (set_option(key, klen, val) < 0)
            return -1;
    }
    return 0;
}

/* An absolute output template, so a later chdir() does not move it. */
static void absolutize_output(void)
{
    if (mt_opt.output[0] == '/')
        return;
    char cwd[MT_PATH_MAX];
    if (!getcwd(cwd, sizeof cwd - 1))
        return;
    size_t c = strlen(cwd), n = strlen(mt_opt.output);
    if (c + 1 + n + 1 > sizeof mt_opt.output)
        return;
    memmove(mt_opt.output + c + 1, mt_opt.output, n + 1);
    memcpy(mt_opt.output, cwd, c);
    mt_opt.output[c] = '/';
}

/* ---- start-up and shutdown ---------------------------------------------- */

/* _Fork (the async-signal-safe fork) runs no fork handlers: a lock another
 * thread held at that moment would stay taken in the child for ever. */
typedef pid_t (*fork_fn)(void);
static fork_fn real_Fork;

MT_EXPORT pid_t _Fork(void)
{
    if (!real_Fork) {
        errno = ENOSYS;
        return -1;
    }
    pid_t pid = real_Fork();
    if (pid == 0) {
        mt_vm_reset_after_fork();
        mt_category_unlock();
        mt_site_after_fork_child();
        mt_report_after_fork_child();
        mt_trace_after_fork_child();
        mt_xe_after_fork_child();
    }
    return pid;
}

static int resolve_real(void)
{
    mt_real_fn.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    mt_real_fn.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    mt_real_fn.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    mt_real_fn.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    mt_real_fn.posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    mt_real_fn.malloc_usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    mt_vm_init();
    real_Fork = (fork_fn)dlsym(RTLD_NEXT, "_Fork");
    return mt_real_fn.malloc && mt_real_fn.free && mt_real_fn.calloc && mt_real_fn.realloc &&
           mt_real_fn.posix_memalign && mt_real_fn.malloc_usable_size;
}

/* A fork must not leave the category lock held in the child. */
static void before_fork(void)
{
    mt_category_lock();
    mt_vm_before_fork();
}
static void after_fork_parent(void)
{
    mt_vm_after_fork();
    mt_category_unlock();
}
static void after_fork_child(void)
{
    mt_vm_after_fork();
    mt_category_unlock();
    mt_counters_after_fork_child();
    mt_site_after_fork_child();
    mt_exec_note_pid();
    mt_report_after_fork_child();
    mt_control_after_fork_child();
    mt_trace_after_fork_child(); /* before the sessions' dispatchers restart */
    /* Here, not in the engine's own handler (which then does nothing): the
     * dispatchers restart inside the agent, as its threads. */
    mt_xe_after_fork_child();
}

void mt_init_slow(void)
{
    int expect = MT_STATE_UNINIT;
    if (!atomic_compare_exchange_strong(&mt_state, &expect, MT_STATE_INIT)) {
        while (atomic_load(&mt_state) != MT_STATE_READY)
            __builtin_ia32_pause();
        return;
    }
    int saved_errno = errno; /* the program must find errno as the C runtime left it */
    mt_t.in_agent++;
    int ok = resolve_real();
    if (!ok)
        mt_say("cannot find the real malloc family (dlsym RTLD_NEXT failed); running untracked");
    const unsigned char *rnd = (const unsigned char *)getauxval(AT_RANDOM);
    if (rnd)
        memcpy(&mt_secret, rnd, sizeof mt_secret);
    mt_secret ^= (uint64_t)(uintptr_t)&mt_secret;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    mt_start_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    mt_counters_init();
    mt_xe_init();

    mt_opt.mode = MT_MODE_SUMMARY;
    mt_opt.on_error = MT_ON_ERROR_REPORT;
    strcpy(mt_opt.output, "memtrail.%p.mtr");
    const char *env = getenv("MEMTRAIL_OPTIONS");
    if (ok && env && parse_options(env) < 0)
        ok = 0;
    absolutize_output();
    mt_tracking = ok && mt_opt.mode != MT_MODE_OFF;
    mt_exec_init(env);
    if (mt_tracking && mt_opt.mode == MT_MODE_DETAIL && mt_site_init() == 0)
        mt_site_opt.detail = 1;
    if (mt_tracking && mt_opt.mode == MT_MODE_TRACE && mt_site_init() == 0 && mt_trace_init() == 0) {
        mt_site_opt.detail = 1;
        mt_site_opt.trace = 1;
    }
    if (mt_tracking) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        mt_report_capture_cmdline();
        mt_report_open_dir();
        mt_crash_install();
    }
    atomic_store(&mt_state, MT_STATE_READY);
    atomic_store(&mt_hot, mt_tracking);
    mt_t.in_agent--;
    errno = saved_errno;
}

__attribute__((constructor)) static void mt_constructor(void)
{
    if (atomic_load(&mt_state) == MT_STATE_UNINIT && !mt_t.in_agent)
        mt_init_slow();
    if (atomic_load(&mt_state) == MT_STATE_READY && mt_tracking) {
        mt_control_start();
        /* Here, not in mt_init_slow: a session starts a thread, which the
         * first malloc (perhaps inside libc's own start-up) cannot. */
        mt_trace_start();
        mt_xe_start_agent_sessions();
    }
}

/* The report a process writes as it leaves (exit, _exit, _Exit). */
static void final_report(void *unused)
{
    (void)unused;
    mt_control_shutdown();
    if (!mt_own_process()) /* a vfork child: its parent's sessions and report */
        return;
    mt_xe_stop_agent_sessions();
    mt_trace_report();
    if (atomic_load(&mt_hot) && !mt_site_opt.trace)
        mt_report_write_to(NULL, "exit");
}

/* _exit and _Exit skip destructors (dash leaves this way): write the
 * report first. exit() reaches _exit inside libc without coming here. */
static _Noreturn void exit_now(int status)
{
    final_report(NULL);
    for (;;)
        syscall(SYS_exit_group, status);
}
MT_EXPORT void _exit(int status) { exit_now(status); }
MT_EXPORT void _Exit(int status) { exit_now(status); }

/* The report at exit must come after every library's destructors (they
 * free what their constructors allocated), but ours runs inside _dl_fini
 * before those of the libraries the program itself links. So our destructor
 * only queues the report as one more exit handler: glibc runs handlers
 * registered while it runs the others, after _dl_fini returns. The NULL
 * DSO handle keeps __cxa_finalize of our own library from running it early. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

__attribute__((destructor)) static void mt_destructor(void)
{
    if (!mt_tracking)
        return;
    if (__cxa_atexit(final_report, NULL, NULL) != 0)
        final_report(NULL);
}
