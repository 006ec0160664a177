/* report_write.c — writes the summary report (docs/report-format.md)
 * through safe_file (a private temporary renamed into place, never through
 * a symbolic link or over what is not the user's) and a static buffer: no
 * malloc, no stdio.
 *
 * The output directory is opened at start-up, so a program that chroots
 * or changes directory still writes there. A process about to change its
 * user or group ids (setid.c) creates its report file first, while it
 * still may, and writes it in place at exit: the new ids often cannot
 * create files in that directory (a server's workers dropping root). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/fdguard.h"
#include "agent/meminfo.h"
#include "agent/site.h"
#include "agent/vm.h"
#include "common/options_table.h"
#include "common/out.h"
#include "common/safe_file.h"

/* Expands %p (pid), %e (program name) and %% into out. 0, -EINVAL (any
 * other '%': options_table.h's mt_template_bad) or -ENAMETOOLONG. */
static int expand_path(const char *tmpl, char *out, size_t cap)
{
    if (mt_template_bad(tmpl) >= 0)
        return -EINVAL;
    mt_out o;
    mt_out_init(&o, out, cap, -1);
    for (const char *s = tmpl; *s; s++) {
        if (*s != '%' || !s[1]) {
            mt_out_char(&o, *s);
            continue;
        }
        s++;
        if (*s == 'p')
            mt_out_u64(&o, (uint64_t)getpid());
        else if (*s == 'e')
            mt_out_str(&o, program_invocation_short_name);
        else
            mt_out_char(&o, '%');
    }
    if (o.len + 1 >= cap)
        return -ENAMETOOLONG;
    mt_out_cstr(&o);
    return 0;
}

/* The command line, read at start-up: programs may rewrite their argv in
 * place later (sqlite3 does). */
static char cmdline_buf[16384];
static size_t cmdline_len;

void mt_report_capture_cmdline(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n;
    while (cmdline_len < sizeof cmdline_buf &&
           (n = read(fd, cmdline_buf + cmdline_len, sizeof cmdline_buf - cmdline_len)) > 0)
        cmdline_len += (size_t)n;
    close(fd);
}

/* The arguments separated by spaces (one per argument end, so empty
 * arguments survive), with \s \n \\ escapes. */
static void write_cmdline(mt_out *o)
{
    int pending = 0;
    for (size_t i = 0; i < cmdline_len; i++) {
        char c = cmdline_buf[i];
        if (c == '\0') {
            pending++;
            continue;
        }
        for (; pending > 0; pending--)
            mt_out_char(o, ' ');
        mt_out_word_char(o, c);
    }
}

void mt_report_cmdline(mt_out *o)
{
    write_cmdline(o);
}

static void write_counts(mt_out *o, const mt_catsum *c)
{
    static const struct {
        const char *key;
        size_t offset;
    } fields[] = {
        {" live_bytes=", offsetof(mt_catsum, live_bytes)}, {" live_count=", offsetof(mt_catsum, live_count)},
        {" peak_bytes=", offsetof(mt_catsum, peak_bytes)}, {" allocs=", offsetof(mt_catsum, allocs)},
        {" frees=", offsetof(mt_catsum, frees)},           {" reallocs=", offsetof(mt_catsum, reallocs)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int64_t v;
        memcpy(&v, (const char *)c + fields[i].offset, sizeof v);
        mt_out_str(o, fields[i].key);
        mt_out_i64(o, v);
    }
}

/* One report at a time, in static buffers: a report written from _exit in
 * a signal handler on a small alternate stack must not need kilobytes of
 * stack. Taken with a bounded try-lock (a handler may have interrupted a
 * writer on its own thread). */
static struct {
    char path[MT_PATH_MAX];
    char buf[4096];
    char exe[MT_PATH_MAX];
    char msg[MT_PATH_MAX + 192];
    mt_file file;
    mt_catsum sum[MT_NSLOT];
    mt_vm_sum vm[MT_NCAT];
    mt_vm_process proc;
} w;

/* The report file made before an id change (mt_report_before_setid),
 * this process's only: a fork child closes its copy. */
static struct {
    pid_t pid; /* 0: none */
    int fd;
    dev_t dev;
    ino_t ino;
    char path[MT_PATH_MAX];
} kept = {.fd = -1};

/* Still the file we made? The program may have closed every descriptor,
 * and its number may now be one of the program's own. */
static int kept_valid(void)
{
    struct stat st;
    return kept.fd >= 0 && fstat(kept.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == kept.dev &&
           st.st_ino == kept.ino;
}

/* The report buffers' lock: the thread holding them, or 0. Waits up to
 * wait_ms for a report another thread is writing (a report file, or a
 * signal's report, must not lose it, nor be lost; a live query can be
 * asked again and waits less), never for one this thread was writing
 * when a crash signal interrupted it. An urgent report (the process is
 * ending: exit, exec, a signal) goes before the program's and the
 * queries' (api, query: they hold back while one waits), and those give
 * up at once when a terminating signal waits on their thread. */
static _Atomic long w_owner;
static atomic_int w_urgent; /* urgent reports waiting */
#define QUERY_WAIT_MS 200
static int take_buffers(unsigned wait_ms, int urgent)
{
    long tid = syscall(SYS_gettid);
    if (atomic_load(&w_owner) == tid)
        return -EBUSY;
    if (urgent)
        atomic_fetch_add(&w_urgent, 1);
    uint64_t give_up = mt_clock_ns(CLOCK_MONOTONIC) + (uint64_t)wait_ms * 1000000;
    int rc = 0;
    for (unsigned spins = 0;; spins++) {
        long none = 0;
        if ((urgent || atomic_load(&w_urgent) == 0) && atomic_compare_exchange_strong(&w_owner, &none, tid))
            break;
        if ((!urgent && mt_t.term_pending) || mt_clock_ns(CLOCK_MONOTONIC) > give_up) {
            rc = -EBUSY;
            break;
        }
        if (spins < 100) {
            sched_yield();
        } else {
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (urgent)
        atomic_fetch_sub(&w_urgent, 1);
    if (rc == 0)
        mt_rlimit_report_begin();
    return rc;
}

static void release_buffers(void)
{
    mt_rlimit_report_end();
    atomic_store(&w_owner, 0);
}

/* A fork child has only the forking thread: a report another thread was
 * writing at that moment will never finish there (the descriptor reserve
 * it let go is taken again), and none waits. */
void mt_report_after_fork_child(void)
{
    atomic_store(&w_urgent, 0);
    if (atomic_load(&w_owner) != 0)
        release_buffers();
    if (kept.pid && kept.pid != getpid()) {
        int fd = kept_valid() ? kept.fd : -1;
        __atomic_store_n(&kept.fd, -1, __ATOMIC_RELEASE); /* before the close: fdguard.h */
        if (fd >= 0)
            close(fd);
        kept.pid = 0;
    }
}

static mt_vm_report last_vm;

const mt_vm_report *mt_report_last_vm(void)
{
    last_vm.sum = w.vm;
    last_vm.proc = w.proc;
    return &last_vm;
}

static void write_vm(mt_out *o, const mt_vm_sum *v)
{
    mt_out_field(o, "reserved", v->reserved);
    mt_out_field(o, "committed", v->committed);
    mt_out_field(o, "resident", v->resident);
    mt_out_field(o, "mappings", v->mappings);
    mt_out_field(o, "peak_mapped", v->peak_mapped);
}

static const char *kind_name(int kind)
{
    return kind == MT_KIND_OVERHEAD ? " kind=overhead" : kind == MT_KIND_VM ? " kind=vm" : " kind=malloc";
}

/* path= takes the rest of the line: escape what would end it. */
static void write_escaped_path(mt_out *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '\n')
            mt_out_str(o, "\\n");
        else if (*s == '\\')
            mt_out_str(o, "\\\\");
        else
            mt_out_char(o, *s);
    }
}

/* Detail mode's lines (docs/report-format.md "Detail mode"). */
static void write_sites(mt_out *o, int in_handler)
{
    static const char hex[] = "0123456789abcdef";
    if (!in_handler)
        mt_modules_refresh(); /* dl_iterate_phdr: not in a signal handler */
    mt_out_str(o, "\nstack_depth ");
    mt_out_i64(o, mt_site_opt.depth);
    mt_out_str(o, "\nunwinder ");
    mt_out_str(o, mt_site_unwinder());
    if (mt_site_opt.sample) { /* docs/sampling.md: the counts below are estimates */
        mt_out_str(o, "\nsample_rate ");
        mt_out_i64(o, mt_site_opt.sample_rate);
    }
    int nm = mt_module_count();
    for (int i = 0; i < nm; i++) {
        const mt_module *m = mt_module_get(i);
        mt_out_str(o, "\nmodule ");
        mt_out_i64(o, i + 1);
        mt_out_str(o, " bias=");
        mt_out_hex(o, mt_module_shown(i, m->bias));
        mt_out_str(o, " start=");
        mt_out_hex(o, mt_module_shown(i, m->start));
        mt_out_str(o, " end=");
        mt_out_hex(o, mt_module_shown(i, m->end));
        mt_out_str(o, " buildid=");
        for (unsigned k = 0; k < m->build_id_len; k++) {
            mt_out_char(o, hex[m->build_id[k] >> 4]);
            mt_out_char(o, hex[m->build_id[k] & 15]);
        }
        if (m->build_id_len == 0)
            mt_out_char(o, '-');
        mt_out_str(o, " path=");
        write_escaped_path(o, m->path);
    }
    uint32_t ids = mt_site_count_ids();
    int64_t written = 0;
    for (uint32_t id = 0; id < ids; id++) {
        mt_site_sum s;
        if (!mt_site_sum_of(id, &s))
            continue;
        const mt_site *site = &mt_sites[id];
        mt_out_str(o, "\nsite ");
        mt_out_u64(o, id);
        mt_out_str(o, " category=");
        mt_out_str(o, site->cat < MT_NCAT ? mt_cats[site->cat].name : "malloc");
        mt_out_field(o, "live_bytes", s.live_bytes);
        mt_out_field(o, "live_count", s.live_count);
        mt_out_field(o, "peak_bytes", s.peak_bytes);
        mt_out_field(o, "allocs", s.allocs);
        mt_out_field(o, "frees", s.frees);
        mt_out_field(o, "reallocs", s.reallocs);
        mt_out_field(o, "allocated_bytes", s.allocated_bytes);
        if (mt_site_opt.sample) {
            mt_out_field(o, "samples", s.samples);
            mt_out_field(o, "live_samples", s.live_samples);
        }
        mt_out_str(o, " frames=");
        for (unsigned k = 0; k < site->nframes; k++) {
            if (k)
                mt_out_char(o, ',');
            mt_out_hex(o, mt_site_frame_shown(id, k));
        }
        written++;
    }
    mt_out_str(o, "\nsites");
    mt_out_field(o, "count", written);
    mt_out_field(o, "dropped", mt_site_dropped());
}

static int report_sites = 1; /* under w_owner: the report being written has detail lines */

/* Only the program's own calls (exit, exec, mt_report_write) may wait
 * for the VM table: a crash or a query runs in a signal handler, maybe
 * on the very thread that holds it. */
static int in_handler_for(const char *reason)
{
    return strcmp(reason, "exit") != 0 && strcmp(reason, "api") != 0 && strcmp(reason, "exec") != 0;
}

/* The figures, before the report's file is open: reading the address
 * space takes a descriptor of its own (two when one is free: pagemap,
 * vm_scan.c), and a process at its limit may have few (rlimit.c).
 * Without one the report leaves the address space out, and says why,
 * rather than show it as empty; a query's reply only leaves it out (the
 * program's stderr is not the asker's). */
static void collect(const char *reason)
{
    mt_counters_sum(w.sum);
    mt_vm_scan(w.vm, MT_NCAT, &w.proc, in_handler_for(reason));
    static int said; /* once: a process without /proc would say it at every report */
    int asked = strcmp(reason, "query") == 0 || strcmp(reason, "baseline") == 0;
    if (!w.proc.ok && !said && !asked) {
        said = 1;
        int err = errno;
        mt_out o;
        mt_out_init(&o, w.msg, sizeof w.msg, -1);
        mt_out_str(&o, "the report leaves out the address space: cannot read /proc/self/smaps: ");
        mt_out_str(&o, mt_file_strerror(-err));
        mt_say(mt_out_cstr(&o));
    }
}

static void write_report(mt_out *o, const char *reason)
{
    mt_catsum *sum = w.sum;
    int in_handler = in_handler_for(reason);

    mt_out_str(o, "memtrail-report 1\npid ");
    mt_out_u64(o, (uint64_t)getpid());
    mt_out_str(o, "\nppid ");
    mt_out_u64(o, (uint64_t)getppid());
    ssize_t n = readlink("/proc/self/exe", w.exe, sizeof w.exe - 1);
    if (n > 0) {
        mt_out_str(o, "\nexe ");
        for (ssize_t i = 0; i < n; i++)
            mt_out_char(o, w.exe[i] == '\n' ? '?' : w.exe[i]);
    }
    mt_out_str(o, "\ncmdline ");
    write_cmdline(o);
    mt_out_str(o, mt_site_opt.sample   ? "\nmode sample\nstart_ns "
                  : mt_site_opt.detail ? "\nmode detail\nstart_ns "
                                       : "\nmode summary\nstart_ns ");
    mt_out_i64(o, mt_start_ns);
    mt_out_str(o, "\nend_ns ");
    mt_out_i64(o, (int64_t)mt_clock_ns(CLOCK_REALTIME));
    mt_out_str(o, "\nreason ");
    mt_out_str(o, reason);
    mt_out_char(o, '\n');

    int ncats = atomic_load(&mt_ncats);
    for (int i = 0; i < ncats; i++) {
        mt_out_str(o, "category ");
        mt_out_str(o, mt_cats[i].name);
        mt_out_str(o, kind_name(mt_cats[i].kind));
        write_counts(o, &sum[i]);
        if (w.proc.ok)
            write_vm(o, &w.vm[i]);
        mt_out_char(o, '\n');
    }
    mt_out_str(o, "total");
    write_counts(o, &sum[MT_SLOT_TOTAL]);
    if (w.proc.ok) {
        mt_out_str(o, "\nprocess");
        mt_out_field(o, "rss_bytes", w.proc.rss);
        mt_out_field(o, "peak_rss_bytes", w.proc.peak_rss);
        mt_out_field(o, "reserved", w.proc.reserved);
        mt_out_field(o, "committed", w.proc.committed);
        mt_out_field(o, "resident", w.proc.resident);
    }
    mt_out_str(o, "\nerrors double_free=");
    mt_out_i64(o, atomic_load(&mt_err_double_free));
    mt_out_str(o, " bad_canary=");
    mt_out_i64(o, atomic_load(&mt_err_bad_canary));
    mt_out_str(o, " foreign_free=");
    mt_out_i64(o, atomic_load(&mt_err_foreign_free));
    mt_info_write(o);
    mt_span_write(o);
    if (mt_site_opt.detail && report_sites)
        write_sites(o, in_handler);
    mt_out_str(o, "\nend\n");
}

/* A thread cancelled inside a report (open, read and write are cancellation
 * points) would leave the report buffers and the VM table locked. */

static int report_write_to(const char *path_template, const char *reason);

int mt_report_write_to(const char *path_template, const char *reason)
{
    int old = mt_cancel_off();
    int rc = report_write_to(path_template, reason);
    mt_cancel_restore(old);
    return rc;
}

/* The report into the file made before an id change: from its start,
 * then cut to what was written. */
static int write_in_place(const char *reason)
{
    collect(reason);
    if (lseek(kept.fd, 0, SEEK_SET) != 0)
        return -errno;
    mt_out o;
    mt_out_init(&o, w.buf, sizeof w.buf, kept.fd);
    write_report(&o, reason);
    int rc = mt_out_flush(&o);
    off_t end = lseek(kept.fd, 0, SEEK_CUR);
    if (rc == 0 && (end < 0 || ftruncate(kept.fd, end) != 0))
        rc = -errno;
    return rc;
}

/* Through safe_file: a temporary, renamed over the name when complete. */
static int write_new(const char *reason)
{
    collect(reason);
    int rc = mt_file_begin_path(&w.file, w.path);
    if (rc < 0)
        return rc;
    mt_out o;
    mt_out_init(&o, w.buf, sizeof w.buf, w.file.fd);
    write_report(&o, reason);
    rc = mt_out_flush(&o);
    if (rc < 0) {
        mt_file_abort(&w.file);
        return rc;
    }
    return mt_file_commit(&w.file);
}

static int report_write_to(const char *path_template, const char *reason)
{
    int saved_errno = errno;
    mt_agent_enter();
    int rc = take_buffers(MT_REPORT_WAIT_MS, strcmp(reason, "api") != 0);
    if (rc < 0) {
        mt_say("cannot write the report: another report is being written");
        goto out;
    }
    rc = path_template ? expand_path(path_template, w.path, sizeof w.path)
                       : mt_report_summary_path(w.path, sizeof w.path);
    int changed_ids = kept.pid == getpid();
    if (rc == 0)
        rc = changed_ids && strcmp(kept.path, w.path) == 0 && kept_valid() ? write_in_place(reason)
                                                                           : write_new(reason);
    if (rc == -EINVAL && path_template && mt_template_bad(path_template) >= 0) {
        mt_out o;
        mt_out_init(&o, w.msg, sizeof w.msg, -1);
        mt_out_str(&o, "cannot write the report: the path '");
        mt_out_shown(&o, path_template, strlen(path_template));
        mt_out_str(&o, "' has '");
        const char *bad = path_template + mt_template_bad(path_template);
        mt_out_shown(&o, bad, bad[1] ? 2 : 1);
        mt_out_str(&o, "', which is not %p, %e or %% (a '%' is written %%)");
        mt_say(mt_out_cstr(&o));
    } else if (rc < 0) {
        /* strerrordesc_np (through mt_file_strerror): no locale, no
         * allocation (safe in a handler). */
        mt_out o;
        mt_out_init(&o, w.msg, sizeof w.msg, -1);
        mt_out_str(&o, "cannot write the report to ");
        mt_out_str(&o, rc == -ENAMETOOLONG ? "(path too long)" : w.path);
        mt_out_str(&o, ": ");
        mt_out_str(&o, mt_file_strerror(rc));
        if (changed_ids && (rc == -EACCES || rc == -EPERM))
            mt_out_str(&o, " (the process changed its user or group id)");
        mt_say(mt_out_cstr(&o));
    }
    release_buffers();
out:
    mt_agent_leave();
    errno = saved_errno;
    return rc;
}

void mt_report_before_setid(void)
{
    if (!atomic_load(&mt_hot) || mt_site_opt.trace || !mt_own_process() || kept.pid == getpid())
        return;
    int old = mt_cancel_off();
    int saved_errno = errno;
    mt_agent_enter();
    if (take_buffers(MT_REPORT_WAIT_MS, 0) == 0) {
        int fd = expand_path(mt_opt.output, w.path, sizeof w.path) == 0 ? mt_file_open_stream(&w.file, w.path)
                                                                        : -1;
        struct stat st;
        if (fd >= 0 && fstat((fd = mt_file_fd_high(fd)), &st) == 0) {
            kept.fd = fd;
            mt_fd_keep(&kept.fd);
            kept.dev = st.st_dev;
            kept.ino = st.st_ino;
            memcpy(kept.path, w.path, sizeof kept.path);
            kept.pid = getpid();
        } else if (fd >= 0) {
            close(fd);
        }
        /* On failure the report at exit tries the usual way, and says why. */
        release_buffers();
    }
    mt_agent_leave();
    errno = saved_errno;
    mt_cancel_restore(old);
}

void mt_report_open_dir(void)
{
    /* A directory part with %p or %e differs between processes: those
     * are looked up at each report. */
    const char *slash = strrchr(mt_opt.output, '/');
    if (slash && !memchr(mt_opt.output, '%', (size_t)(slash - mt_opt.output)))
        (void)mt_file_outdir_set(mt_opt.output, 1);
}

static int report_to_fd(int fd, const char *reason, int sites)
{
    int old = mt_cancel_off();
    int saved_errno = errno;
    mt_agent_enter();
    int rc = take_buffers(QUERY_WAIT_MS, 0);
    if (rc == 0) {
        mt_out o;
        mt_out_init_socket(&o, w.buf, sizeof w.buf, fd); /* no SIGPIPE: a client may leave, or be cut off */
        report_sites = sites;
        collect(reason);
        write_report(&o, reason);
        report_sites = 1;
        rc = mt_out_flush(&o);
        release_buffers();
    }
    mt_agent_leave();
    errno = saved_errno;
    mt_cancel_restore(old);
    return rc;
}

int mt_report_to_fd(int fd, const char *reason)
{
    return report_to_fd(fd, reason, 0);
}
int mt_report_detail_to_fd(int fd, const char *reason)
{
    return report_to_fd(fd, reason, 1);
}

long mt_report_to_mem(char *buf, size_t cap, const char *reason)
{
    int old = mt_cancel_off();
    int saved_errno = errno;
    mt_agent_enter();
    long rc = take_buffers(QUERY_WAIT_MS, 0);
    if (rc == 0) {
        mt_out o;
        mt_out_init(&o, buf, cap, -1);
        report_sites = 0;
        collect(reason);
        write_report(&o, reason);
        report_sites = 1;
        rc = o.err < 0 || o.len >= cap ? -ENOSPC : (long)o.len;
        release_buffers();
    }
    mt_agent_leave();
    errno = saved_errno;
    mt_cancel_restore(old);
    return rc;
}

int mt_report_path(const char *path_template, char *out, size_t cap)
{
    return expand_path(path_template ? path_template : mt_opt.output, out, cap);
}

/* In trace mode the configured output is the trace's: a report goes
 * beside it (OUTPUT.mtr), never over it. */
int mt_report_summary_path(char *out, size_t cap)
{
    int rc = expand_path(mt_opt.output, out, cap);
    if (rc < 0 || !mt_site_opt.trace)
        return rc;
    size_t len = strlen(out);
    if (len + sizeof ".mtr" > cap)
        return -ENAMETOOLONG;
    memcpy(out + len, ".mtr", sizeof ".mtr");
    return 0;
}
