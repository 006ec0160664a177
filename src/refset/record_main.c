/* record_main.c — `memtrail refset record [-o FILE] [--interval MS]
 * [--stacks] [--no-agent] -- CMD ARGS` and `memtrail refset record --pid
 * PID[,PID...] [--duration S]`: the options, starting CMD (held until its
 * page-fault events are attached) or attaching to processes, and the loop.
 *
 * The loop's order: each wakeup (a ring past its watermark, an agent
 * message, the scan timer, CMD's exit) drains every ring and the agent's
 * socket into one batch, sorts it by time and processes it; every
 * --interval the processes are scanned and the records of the interval
 * are written, sorted by time (record_out.c). */
#include "cli/cli.h"
#include "common/safe_file.h"
#include "refset/record.h"
#include "refset/refset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (4u << 20) /* per CPU */

/* The ring size per CPU: RING_BYTES, or MEMTRAIL_REFSET_RING_KB (the
 * tests make it small to overflow it). */
static size_t ring_bytes(void)
{
    const char *v = getenv("MEMTRAIL_REFSET_RING_KB");
    long kb = v && *v ? strtol(v, NULL, 10) : 0;
    return kb >= 4 && kb <= (1L << 20) ? (size_t)kb << 10 : RING_BYTES;
}
#define MAX_PIDS 64
#define DRAIN_MS 10

static const struct cli_command record_cmd = {
    .name = "refset record",
    .usage = "usage: memtrail refset record [-o FILE] [--interval MS] [--stacks] [--no-agent]\n"
             "                              [--] CMD [ARGS...]\n"
             "       memtrail refset record --pid PID[,PID...] [--duration S] [-o FILE]\n"
             "                              [--interval MS] [--stacks]\n",
    .about = "Record a scenario's reference set: every page CMD and the processes it forks\n"
             "or execs reference for the first time (page faults, and pagemap scans for\n"
             "the pages no fault showed: fault-around, huge pages), and every page they\n"
             "release (scans, and exactly from the agent when it is loaded). Or attach to\n"
             "running processes with --pid: the pages they hold then are recorded as\n"
             "referenced before the scenario. Needs root, or kernel.perf_event_paranoid <= 1\n"
             "(without root, pages are identified by file and per process, not physically).\n"
             "The exit status is CMD's own (128+N when signal N killed it).\n",
    .more = "Read the recording with: memtrail refset report FILE (docs/refset.md).\n",
    .stop_at_argument = true,
    .unknown_hint = " (put the command after '--')",
    .min_args = 0,
    .max_args = -1,
};

struct record_opts {
    const char *output, *pids;
    int interval_ms, duration_s;
    bool stacks, no_agent;
    char **cmd;
    int ncmd;
};

static volatile sig_atomic_t stop_requested, child_pid;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static int perf_error(int err)
{
    if (err == -EACCES || err == -EPERM) {
        int level = -1;
        FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
        if (f) {
            if (fscanf(f, "%d", &level) != 1)
                level = -1;
            fclose(f);
        }
        return cli_error("refset record: page-fault events are not allowed (kernel.perf_event_paranoid=%d): "
                         "run as root, or lower it: sysctl kernel.perf_event_paranoid=2 (a user's own "
                         "processes, faults in user mode) or 1 (all their faults)",
                         level);
    }
    return cli_error("refset record: perf_event_open: %s", strerror(-err));
}

/* ---- the recording ---- */

struct recorder {
    rec_state st;
    rec_perf *perf;
    rec_batch batch;
    int agent_fd; /* -1: none */
    uint64_t interval_ns;
    char *path;
    mt_rs_header h;
};

/* reread: the fault references read too early are read again at the end
 * (not in the middle of a scan: its drain, which compares with the pages
 * it read before). */
static void process_batch(struct recorder *r, bool reread)
{
    r->st.in_batch = true;
    /* The socket first, then the rings: the agent sends a message after
     * its call returned, so every fault older than a message read now is
     * in a ring by the time the rings are read, and lands in this batch. */
    if (r->agent_fd >= 0 && rec_agent_drain(r->agent_fd, &r->batch) < 0) {
        close(r->agent_fd);
        r->agent_fd = -1;
    }
    rec_perf_drain(r->perf, &r->batch);
    rec_batch_sort(&r->batch);
    if (r->st.test_maps_first)
        rec_proc_maps_read_all(&r->st);
    for (size_t i = 0; i < r->batch.n; i++)
        rec_proc_item(&r->st, &r->batch.v[i], &r->batch, i);
    rec_batch_clear(&r->batch);
    r->st.in_batch = false;
    /* While the faulting processes are still there (a scan may be seconds
     * away). */
    if (reread)
        rec_proc_reread(&r->st, false);
}

static void drain_sources(void *ctx)
{
    process_batch(ctx, false);
}

static void scan_and_write(struct recorder *r)
{
    process_batch(r, true);
    rec_proc_scan_all(&r->st, rec_now());
    rec_proc_reread(&r->st, true);
    rec_out_write(&r->st.out);
}

static int open_output(struct recorder *r, const char *output, pid_t pid)
{
    if (output)
        r->path = strdup(output);
    else if (asprintf(&r->path, "memtrail.refset.%d.mtrs", (int)pid) < 0)
        r->path = NULL;
    if (!r->path)
        return cli_error("out of memory");
    mt_file *f = malloc(sizeof *f);
    if (!f)
        return cli_error("out of memory");
    int fd = mt_file_open_stream(f, r->path);
    free(f);
    if (fd < 0)
        return cli_error("refset record: cannot write %s: %s", r->path, mt_file_strerror(fd));
    int err = 0;
    r->st.out.w = mt_rs_writer_open(fd, &r->h, &err); /* fd is the writer's, failing or not */
    if (!r->st.out.w) {
        unlink(r->path);
        return cli_error("refset record: cannot write %s: %s", r->path, strerror(-err));
    }
    return 0;
}

static void meta(struct recorder *r, const char *key, const char *value)
{
    mt_rs_event ev = {.type = RS_EV_META, .time_ns = r->h.start_ns, .name = key, .value = value};
    rec_out_push(&r->st.out, &ev);
}

static void write_meta(struct recorder *r, const struct record_opts *o, char **argv_shown)
{
    char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; argv_shown && argv_shown[i] && len + 2 < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? " " : "", argv_shown[i]);
    if (o->pids)
        snprintf(buf, sizeof buf, "--pid %s", o->pids);
    meta(r, "command", buf);
    snprintf(buf, sizeof buf, "%d", o->interval_ms);
    meta(r, "interval_ms", buf);
    meta(r, "stacks", o->stacks ? "on" : "off");
    struct utsname u;
    if (uname(&u) == 0)
        meta(r, "kernel", u.release);
    meta(r, "agent", o->pids || o->no_agent ? "off" : "preloaded");
    if (r->perf && rec_perf_user_only(r->perf)) {
        meta(r, "faults", "user mode only");
        fprintf(stderr, "memtrail: refset record: this user may sample only faults taken in user mode "
                        "(kernel.perf_event_paranoid=2): pages the kernel touches first for the program "
                        "(a read() into a fresh buffer) are found by the scans, at the scan's time\n");
    }
}

static int finish(struct recorder *r)
{
    rec_proc_reread(&r->st, true);
    rec_out_write(&r->st.out);
    meta(r, "pagemap_scan", !r->st.scans ? "none" : r->st.use_ioctl ? "PAGEMAP_SCAN" : "read");
    rec_out_write(&r->st.out);
    const char *names[] = {"pages_referenced", "pages_released", "lost_samples", "faults", "scans",
                           "records",          "throttles",      "refused"};
    uint64_t values[] = {r->st.out.pages_referenced,
                         r->st.out.pages_released,
                         r->st.out.samples_lost,
                         r->st.faults,
                         r->st.scans,
                         r->st.out.records,
                         rec_perf_throttles(r->perf),
                         r->st.out.refused};
    uint64_t bytes = mt_rs_write_bytes(r->st.out.w);
    int rc = r->st.out.err;
    _Static_assert(sizeof names / sizeof names[0] == sizeof values / sizeof values[0], "a name per value");
    int frc = mt_rs_write_finish(r->st.out.w, names, values, (int)(sizeof values / sizeof values[0]));
    r->st.out.w = NULL;
    if (rc == 0)
        rc = frc;
    struct stat sb;
    if (stat(r->path, &sb) == 0)
        bytes = (uint64_t)sb.st_size;
    if (rc < 0)
        return cli_error("refset record: writing %s: %s (the records before are readable)", r->path,
                         strerror(-rc));
    uint64_t page = r->h.page_size;
    /* Throttled ticks lose samples without a count of them (the kernel
     * stops sampling for the rest of a tick): said, so that a recording
     * missing references says why. */
    uint64_t throttles = rec_perf_throttles(r->perf);
    char thr[64] = "";
    if (throttles)
        snprintf(thr, sizeof thr, ", sampling throttled %llu times", (unsigned long long)throttles);
    fprintf(stderr,
            "memtrail: refset: %llu pages referenced (%.1f MB), %llu released, %llu samples lost%s; %s (%llu "
            "bytes)\n",
            (unsigned long long)r->st.out.pages_referenced,
            (double)(r->st.out.pages_referenced * page) / (1024.0 * 1024.0),
            (unsigned long long)r->st.out.pages_released, (unsigned long long)r->st.out.samples_lost, thr,
            r->path, (unsigned long long)bytes);
    return 0;
}

static void recorder_free(struct recorder *r)
{
    rec_perf_close(r->perf);
    if (r->agent_fd >= 0)
        close(r->agent_fd);
    rec_proc_free_all(&r->st);
    rec_batch_clear(&r->batch);
    free(r->batch.v);
    free(r->st.out.v);
    free(r->st.out.seq);
    rec_stacks_free(r->st.stacks);
    free(r->path);
}

/* A debugging or test switch in the environment: set, not empty, not "0". */
static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static int recorder_init(struct recorder *r, const struct record_opts *o)
{
    memset(r, 0, sizeof *r);
    r->agent_fd = -1;
    r->interval_ns = (uint64_t)o->interval_ms * 1000000ull;
    rec_pagemap_probe(&r->st.zero_pfn, &r->st.pfns);
    r->st.use_ioctl = true;
    r->st.stacks_on = o->stacks;
    r->st.stacks = rec_stacks_new();
    r->st.drain = drain_sources;
    r->st.drain_ctx = r;
    r->st.out.dump = env_on("MEMTRAIL_REFSET_DUMP");
    r->st.test_unread = env_on("MEMTRAIL_REFSET_TEST_UNREAD");
    r->st.test_maps_first = env_on("MEMTRAIL_REFSET_TEST_MAPS_FIRST");
    if (!r->st.stacks)
        return cli_error("out of memory");
    if (!r->st.pfns)
        fprintf(stderr, "memtrail: refset record: physical frame numbers are not readable (not root): Impact "
                        "Size counts shared pages by file identity, and anonymous memory per process\n");
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    r->h.start_ns = rec_now();
    r->h.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    r->h.page_size = (uint32_t)sysconf(_SC_PAGESIZE);
    r->h.flags = r->st.pfns ? RS_FILE_PFN : 0;
    return 0;
}

/* Waits for the next wakeup: a ring, the agent, pidfd (may be -1), or the
 * scan timer. Returns whether pidfd is readable. */
static bool wait_events(struct recorder *r, int pidfd, uint64_t next_scan)
{
    struct pollfd pfd[MAX_PIDS + 8];
    int fds[MAX_PIDS];
    size_t n = rec_perf_fds(r->perf, fds, MAX_PIDS), k = 0;
    for (size_t i = 0; i < n; i++)
        pfd[k++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    size_t agent_at = k, pid_at = k;
    if (r->agent_fd >= 0) {
        agent_at = k;
        pfd[k++] = (struct pollfd){.fd = r->agent_fd, .events = POLLIN};
    }
    if (pidfd >= 0) {
        pid_at = k;
        pfd[k++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
    }
    (void)agent_at;
    /* Faults are read at least every DRAIN_MS: a page's frame is read
     * while it is most likely still there. */
    uint64_t now = rec_now();
    int timeout = next_scan > now ? (int)((next_scan - now + 999999) / 1000000) : 0;
    if (timeout > DRAIN_MS)
        timeout = DRAIN_MS;
    int rc = poll(pfd, k, timeout);
    return rc > 0 && pidfd >= 0 && (pfd[pid_at].revents & (POLLIN | POLLHUP));
}

/* Runs the loop until CMD exits (pidfd), the duration ends, a stop is
 * asked, or no process is left. */
static void record_loop(struct recorder *r, int pidfd, uint64_t deadline)
{
    uint64_t next_scan = rec_now() + r->interval_ns;
    /* On a terminal, a line of progress every second (after the first). */
    bool progress = isatty(2), shown = false;
    uint64_t next_progress = progress ? rec_now() + 1000000000ull : 0;
    for (;;) {
        bool exited = wait_events(r, pidfd, next_scan);
        process_batch(r, true);
        rec_proc_scan_pending(&r->st);
        uint64_t now = rec_now();
        if (exited || stop_requested || (deadline && now >= deadline) || (pidfd < 0 && r->st.nprocs == 0))
            break;
        if (now >= next_scan) {
            scan_and_write(r);
            next_scan = now + r->interval_ns;
            if (progress && now >= next_progress) {
                fprintf(stderr, "\rmemtrail: refset: %.1f s, %llu pages referenced, %llu released ",
                        (double)(now - r->h.start_ns) / 1e9, (unsigned long long)r->st.out.pages_referenced,
                        (unsigned long long)r->st.out.pages_released);
                next_progress = now + 1000000000ull;
                shown = true;
            }
        }
    }
    if (shown)
        fputs("\r\033[K", stderr);
    process_batch(r, true);
    /* Descendants still running would block on a full socket while the
     * file is written: from now on their sends fail, and they go on. */
    if (r->agent_fd >= 0)
        shutdown(r->agent_fd, SHUT_RDWR);
    /* Processes still running at the end: what they hold now. */
    rec_proc_scan_all(&r->st, rec_now());
}

/* ---- CMD ---- */

static ssize_t read_full(int fd, void *buf, size_t len)
{
    ssize_t n;
    do
        n = read(fd, buf, len);
    while (n < 0 && errno == EINTR);
    return n;
}

/* LD_PRELOAD=agent[:old] and MEMTRAIL_OPTIONS=[old:]mode=summary:query=off:
 * depth=16:follow_exec=on:output=DIR/%p.mtr:refset_fd=N. The agent talks in
 * every mode but off; summary costs least, and its reports at exit go to a
 * directory of ours that is removed at the end. follow_exec keeps it in
 * the programs the tree execs. depth: the allocation stacks' frames (only
 * mapping calls and mapped blocks walk the stack, so deep ones are cheap). */
static int set_agent_env(const char *agent, int fd, const char *report_dir)
{
    const char *old = getenv("LD_PRELOAD"), *old_opts = getenv("MEMTRAIL_OPTIONS");
    char *preload = NULL, *opts = NULL;
    size_t len;
    int rc = 0;
    if (asprintf(&preload, "%s%s%s", agent, old && *old ? ":" : "", old && *old ? old : "") < 0)
        return cli_error("out of memory");
    FILE *m = open_memstream(&opts, &len);
    if (!m) {
        free(preload);
        return cli_error("out of memory");
    }
    if (old_opts && *old_opts) {
        size_t n = strlen(old_opts), bs = 0;
        while (bs < n && old_opts[n - 1 - bs] == '\\')
            bs++;
        fprintf(m, "%s%s:", old_opts, bs % 2 ? "\\" : ""); /* a dangling '\' must not eat our ':' */
    }
    fputs("mode=summary:query=off:depth=16:follow_exec=on:output=", m);
    for (const char *c = report_dir; *c; c++) { /* ':' and '\' are escaped in a value */
        if (*c == ':' || *c == '\\')
            fputc('\\', m);
        fputc(*c, m);
    }
    fprintf(m, "/%%p.mtr:refset_fd=%d", fd);
    if (fclose(m) != 0)
        rc = cli_error("out of memory");
    else if (setenv("LD_PRELOAD", preload, 1) < 0 || setenv("MEMTRAIL_OPTIONS", opts, 1) < 0)
        rc = cli_error("cannot set up the environment: %s", strerror(errno));
    free(preload);
    free(opts);
    return rc;
}

/* Removes the agent's report directory and the reports in it. */
static void remove_report_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.')
                unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

static void child_exec(const char *path, char **argv, int go, int errp)
{
    char c;
    if (read_full(go, &c, 1) != 1)
        _exit(127); /* the recorder went away */
    execv(path, argv);
    if (errno == ENOEXEC) { /* no #! line: a shell script, as execvp does */
        int n = 0;
        while (argv[n])
            n++;
        char **sh = calloc((size_t)n + 2, sizeof *sh);
        if (sh) {
            sh[0] = (char *)"sh";
            sh[1] = (char *)path;
            memcpy(sh + 2, argv + 1, (size_t)n * sizeof *sh);
            execv("/bin/sh", sh);
        }
    }
    int e = errno;
    ssize_t w = write(errp, &e, sizeof e);
    (void)w;
    _exit(127);
}

static int kill_and_reap(pid_t pid, int rc)
{
    kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return rc;
}

static int record_command(const struct record_opts *o)
{
    char *path = NULL;
    int rc = run_resolve_command(o->cmd[0], &path);
    if (rc == -ENOMEM)
        return cli_error("out of memory");
    if (rc < 0) {
        cli_error("%s: %s", o->cmd[0], rc == -ENOENT ? "command not found" : strerror(-rc));
        return rc == -ENOENT ? 127 : 126;
    }
    struct recorder r;
    if ((rc = recorder_init(&r, o)) != 0) {
        free(path);
        recorder_free(&r);
        return rc;
    }
    int sv[2] = {-1, -1}, go[2], errp[2];
    char *report_dir = NULL;
    if (!o->no_agent) {
        char *agent = run_find_agent();
        if (!agent) {
            free(path);
            recorder_free(&r);
            return CLI_FAILED;
        }
        /* The program's end survives exec (no CLOEXEC), ours does not. */
        const char *tmp = getenv("TMPDIR");
        if (asprintf(&report_dir, "%s/memtrail-refset.XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
            report_dir = NULL;
        if (!report_dir || !mkdtemp(report_dir)) {
            rc = cli_error("cannot make a directory for the agent's reports: %s",
                           strerror(errno ? errno : ENOMEM));
            free(report_dir);
            report_dir = NULL;
        } else if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0 || fcntl(sv[0], F_SETFD, FD_CLOEXEC) < 0)
            rc = cli_error("socketpair: %s", strerror(errno));
        else
            rc = set_agent_env(agent, sv[1], report_dir);
        free(agent);
        r.agent_fd = sv[0];
        r.h.flags |= RS_FILE_AGENT;
        if (rc != 0) {
            if (report_dir)
                remove_report_dir(report_dir);
            free(report_dir);
            free(path);
            recorder_free(&r);
            return rc;
        }
    }
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        if (report_dir)
            remove_report_dir(report_dir);
        free(report_dir);
        free(path);
        recorder_free(&r);
        return cli_error("pipe: %s", strerror(errno));
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL},
                     fwd = {.sa_handler = forward_signal};
    struct sigaction old_int, old_quit, old_chld, old_term, old_hup;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGCHLD, &dfl, &old_chld);
    pid_t pid = fork();
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        sigaction(SIGCHLD, &old_chld, NULL);
        close(go[1]);
        close(errp[0]);
        child_exec(path, o->cmd, go[0], errp[1]);
    }
    close(go[0]);
    close(errp[1]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (pid < 0) {
        rc = cli_error("fork: %s", strerror(errno));
        goto out;
    }
    child_pid = pid;
    sigaction(SIGTERM, &fwd, &old_term);
    sigaction(SIGHUP, &fwd, &old_hup);
    rc = rec_perf_open(&r.perf, &pid, 1, o->stacks, true, ring_bytes());
    if (rc < 0) {
        rc = kill_and_reap(pid, perf_error(rc));
        goto restore;
    }
    if ((rc = open_output(&r, o->output, pid)) != 0) {
        rc = kill_and_reap(pid, rc);
        goto restore;
    }
    write_meta(&r, o, o->cmd);
    rec_proc_add(&r.st, pid, getpid(), RS_PROC_START, r.h.start_ns, NULL, 0, true, NULL, 0);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    ssize_t w = write(go[1], "g", 1);
    (void)w;
    close(go[1]);
    go[1] = -1;
    int exec_errno = 0;
    bool exec_failed = read_full(errp[0], &exec_errno, sizeof exec_errno) == (ssize_t)sizeof exec_errno;
    if (!exec_failed)
        record_loop(&r, pidfd, 0);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pidfd >= 0)
        close(pidfd);
    if (exec_failed) {
        /* Nothing ran: no recording. */
        mt_rs_write_abort(r.st.out.w);
        r.st.out.w = NULL;
        unlink(r.path);
        cli_error("cannot run %s: %s", o->cmd[0], strerror(exec_errno));
        rc = exec_errno == ENOENT ? 127 : 126;
    } else if ((rc = finish(&r)) == 0) {
        rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
restore:
    child_pid = 0;
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
out:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
    if (go[1] >= 0)
        close(go[1]);
    close(errp[0]);
    if (report_dir)
        remove_report_dir(report_dir);
    free(report_dir);
    free(path);
    recorder_free(&r);
    return rc;
}

/* ---- --pid ---- */

static int parse_pids(const char *list, pid_t *pids, size_t *n)
{
    *n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v <= 0 || v > INT_MAX || (*end && *end != ','))
            return cli_usage_error("refset record", "--pid: '%s' is not a list of process ids (PID[,PID...])",
                                   list);
        if (*n == MAX_PIDS)
            return cli_usage_error("refset record", "--pid: at most %d processes", MAX_PIDS);
        pids[(*n)++] = (pid_t)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : cli_usage_error("refset record", "--pid: no process id given");
}

static int check_pid(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return cli_error("refset record: no process %d", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ESRCH)
            return cli_error("refset record: no process %d", (int)pid);
        return cli_error(
            "refset record: cannot read the pages of process %d (%s): it is not yours, or run as "
            "root",
            (int)pid, strerror(e));
    }
    close(fd);
    return 0;
}

/* The threads of the processes (each thread's events are opened apart:
 * inherit covers only threads created later). */
static int list_threads(const pid_t *pids, size_t n, pid_t **out, size_t *nout)
{
    size_t cap = 64, k = 0;
    pid_t *v = malloc(cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", (int)pids[i]);
        DIR *d = opendir(path);
        if (!d) {
            v[k++ % cap] = pids[i];
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            long t = strtol(de->d_name, NULL, 10);
            if (t <= 0)
                continue;
            if (k == cap) {
                pid_t *nv = realloc(v, (cap *= 2) * sizeof *nv);
                if (!nv) {
                    closedir(d);
                    free(v);
                    return -ENOMEM;
                }
                v = nv;
            }
            v[k++] = (pid_t)t;
        }
        closedir(d);
    }
    *out = v;
    *nout = k;
    return 0;
}

static int record_pids(const struct record_opts *o)
{
    pid_t pids[MAX_PIDS];
    size_t n;
    int rc = parse_pids(o->pids, pids, &n);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = check_pid(pids[i])) != 0)
            return rc;
    struct recorder r;
    if ((rc = recorder_init(&r, o)) != 0) {
        recorder_free(&r);
        return rc;
    }
    r.h.flags |= RS_FILE_ATTACH;
    pid_t *tids = NULL;
    size_t ntids = 0;
    if (list_threads(pids, n, &tids, &ntids) < 0) {
        recorder_free(&r);
        return cli_error("out of memory");
    }
    rc = rec_perf_open(&r.perf, tids, ntids, o->stacks, false, ring_bytes());
    free(tids);
    if (rc == -ESRCH) {
        recorder_free(&r);
        return cli_error("refset record: a process of --pid %s exited before it could be attached", o->pids);
    }
    if (rc < 0) {
        recorder_free(&r);
        return perf_error(rc);
    }
    if ((rc = open_output(&r, o->output, pids[0])) != 0) {
        recorder_free(&r);
        return rc;
    }
    write_meta(&r, o, NULL);
    for (size_t i = 0; i < n; i++)
        rec_proc_add(&r.st, pids[i], 0, RS_PROC_ATTACH, r.h.start_ns, NULL, RS_REF_BEFORE, false, NULL, 0);
    rec_out_write(&r.st.out);
    struct sigaction stop = {.sa_handler = on_stop}, old_int, old_term;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &old_int);
    sigaction(SIGTERM, &stop, &old_term);
    uint64_t deadline = o->duration_s ? r.h.start_ns + (uint64_t)o->duration_s * 1000000000ull : 0;
    record_loop(&r, -1, deadline);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    rc = finish(&r) == 0 ? CLI_OK : CLI_FAILED;
    recorder_free(&r);
    return rc;
}

int refset_record_main(int argc, char **argv)
{
    struct record_opts o = {.interval_ms = 50};
    const struct cli_option options[] = {
        {.kind = CLI_OPT_STRING,
         .name = "output",
         .short_name = 'o',
         .arg = "FILE",
         .value = &o.output,
         .help = "the recording (default memtrail.refset.PID.mtrs, PID that of CMD or of the first --pid); "
                 "written as it goes, readable even if the recorder is killed"},
        {.kind = CLI_OPT_INT,
         .name = "interval",
         .arg = "MS",
         .value = &o.interval_ms,
         .min = 1,
         .max = 60000,
         .noun = "a number of milliseconds",
         .help = "how often the pages of every process are scanned (default 50): releases without the "
                 "agent are seen within one interval"},
        {.kind = CLI_OPT_FLAG,
         .name = "stacks",
         .value = &o.stacks,
         .help = "record the user call chain of each first reference (the impacting stack)"},
        {.kind = CLI_OPT_FLAG,
         .name = "no-agent",
         .value = &o.no_agent,
         .help = "run CMD without the agent: no allocation stacks, releases from scans only"},
        {.kind = CLI_OPT_STRING,
         .name = "pid",
         .arg = "PID[,PID...]",
         .value = &o.pids,
         .help = "attach to running processes instead of running CMD; stop at --duration, ^C or SIGTERM, or "
                 "when they have all exited"},
        {.kind = CLI_OPT_INT,
         .name = "duration",
         .arg = "S",
         .value = &o.duration_s,
         .min = 1,
         .max = 86400 * 365,
         .noun = "a number of seconds",
         .help = "--pid: stop after S seconds"},
        {0},
    };
    int n = cli_parse(&record_cmd, options, argc, argv);
    if (n < 0)
        return cli_parse_exit(n);
    o.cmd = argv;
    o.ncmd = n;
    if (o.output && (*o.output == '\0' || strcmp(o.output, "-") == 0))
        return cli_usage_error("refset record", "-o: %s",
                               *o.output ? "the recording goes to a file, not '-'" : "empty file name");
    if (o.pids && n > 0)
        return cli_usage_error("refset record", "--pid and a command: record one or the other");
    if (!o.pids && n == 0)
        return cli_usage_error("refset record", "missing the command to run (or --pid PID)");
    if (o.duration_s && !o.pids)
        return cli_usage_error("refset record",
                               "--duration is for --pid (a command's recording ends with it)");
    return o.pids ? record_pids(&o) : record_command(&o);
}
