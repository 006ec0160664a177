/* cmd_run.c — `memtrail run [--mode summary|detail|trace] [--depth N] [--unwind U] [-o FILE]
 * [--trace-buffer SIZE] [--no-loss|--allow-loss] [--follow-exec] [--session DEF]... [--] CMD ARGS...`:
 * starts CMD with the agent (libmemtrail.so) preloaded and its options in
 * MEMTRAIL_OPTIONS (event sessions in MEMTRAIL_SESSIONS), waits for it, says where its report or trace went,
 * and exits with CMD's own status (128+N when signal N killed it). */
#include "cli/cli.h"
#include "common/options_table.h"
#include "common/safe_file.h"
#include "report/report.h"
#include "trace/trace_read.h"
#include "trace/trace_util.h"
#include "xe/xe_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char run_about[] = "Run CMD with the memtrail agent preloaded (LD_PRELOAD) and write its\n"
                                "summary report when it exits. CMD is found on PATH as a shell would.\n"
                                "memtrail's exit status is CMD's own (128+N when signal N killed it).\n"
                                "The options end at CMD: what follows it is CMD's own.\n";

/* Where make install puts the agent (the Makefile passes its own). */
#ifndef MT_AGENT_PATH
#define MT_AGENT_PATH "/usr/local/lib/memtrail/libmemtrail.so"
#endif

static const char run_more[] =
    "Environment:\n"
    "  MEMTRAIL_LIB      the agent to preload (default: ../lib/memtrail/libmemtrail.so\n"
    "                    next to this memtrail binary when installed, ../lib/\n"
    "                    libmemtrail.so in the build tree, else\n"
    "                    " MT_AGENT_PATH ")\n"
    "  MEMTRAIL_OPTIONS  agent options ('memtrail options' lists them); memtrail's\n"
    "                    own keys are appended, so they win\n"
    "  MEMTRAIL_SESSIONS event sessions, one definition per line; --session adds lines\n"
    "  LD_PRELOAD        kept; the agent is put first\n"
    "\n"
    "Refused, because nothing could be tracked: setuid/setgid programs and\n"
    "programs with file capabilities (the loader ignores LD_PRELOAD for them)\n"
    "and statically linked programs (no malloc to interpose).\n"
    "\n"
    "Then: memtrail report summary FILE, or memtrail analyze FILE for a trace\n";

/* Check an output template: only %p, %e and %% expand; anything else
 * after % would be read differently by the agent, so it is refused. */
static int check_template(const char *t)
{
    long bad = mt_template_bad(t); /* the agent's own check (options_table.h) */
    if (bad < 0)
        return 0;
    if (t[bad + 1] == '\0')
        return cli_usage_error("run", "-o: '%s' ends in a lone '%%' (write %%%% for a percent sign)", t);
    unsigned char c = (unsigned char)t[bad + 1];
    char shown[8]; /* a byte that is no printable ASCII (a UTF-8 lead byte) as \xNN */
    snprintf(shown, sizeof shown, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
    return cli_usage_error("run", "-o: unknown '%%%s' in '%s' (accepted: %%p, %%e, %%%%)", shown, t);
}

/* The template with %p, %e and %% expanded, as the agent expands it. */
static char *expand_output(const char *t, pid_t pid, const char *prog)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return NULL;
    for (const char *p = t; *p; p++) {
        if (*p != '%' || p[1] == '\0') {
            fputc(*p, m);
            continue;
        }
        p++;
        if (*p == 'p')
            fprintf(m, "%d", (int)pid);
        else if (*p == 'e')
            fputs(prog, m);
        else
            fputc(*p, m);
    }
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The agent can only say it failed to write, at the very end: find a
 * missing or unwritable directory before the program runs instead. */
static int check_output_dir(const char *out_abs)
{
    const char *slash = strrchr(out_abs, '/');
    size_t len = slash > out_abs ? (size_t)(slash - out_abs) : 1;
    char *d = strndup(out_abs, len);
    if (!d)
        return cli_error("out of memory");
    int rc = 0;
    if (!strchr(d, '%') && access(d, W_OK | X_OK) != 0)
        rc = cli_error("cannot write the report in %s: %s", d, strerror(errno));
    free(d);
    return rc;
}

/* MEMTRAIL_OPTIONS escaping: inside a value, ':' is "\:" and '\' is "\\". */
static void put_option_value(FILE *m, const char *v)
{
    for (; *v; v++) {
        if (*v == ':' || *v == '\\')
            fputc('\\', m);
        fputc(*v, m);
    }
}

/* The agent: $MEMTRAIL_LIB, or ../lib/memtrail/libmemtrail.so beside this
 * binary (PREFIX/bin -> PREFIX/lib/memtrail), or ../lib/libmemtrail.so
 * (build/bin -> build/lib), else MT_AGENT_PATH. Returns an absolute,
 * resolved path (LD_PRELOAD must not depend on the program's cwd) or NULL
 * after printing why. */
char *run_find_agent(void)
{
    const char *env = getenv("MEMTRAIL_LIB");
    char guess[PATH_MAX + 32];
    const char *path = env && *env ? env : NULL;
    if (!path) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0) {
            cli_error("cannot find the agent: /proc/self/exe: %s (set MEMTRAIL_LIB)", strerror(errno));
            return NULL;
        }
        self[n] = '\0';
        /* Installed: PREFIX/lib/memtrail/ beside PREFIX/bin; the build
         * tree: build/lib/ beside build/bin; else where make install put it. */
        const char *dir = dirname(self);
        static const char *const rel[] = {"/../lib/memtrail/libmemtrail.so", "/../lib/libmemtrail.so"};
        path = MT_AGENT_PATH;
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(guess, sizeof guess, "%s%s", dir, rel[i]);
            if (access(guess, R_OK) == 0) {
                path = guess;
                break;
            }
        }
    }
    char *agent = realpath(path, NULL);
    if (!agent || access(agent, R_OK) != 0) {
        cli_error("agent library %s not found: %s (%s)", path, strerror(errno),
                  env && *env ? "MEMTRAIL_LIB names it" : "build it with 'make', or set MEMTRAIL_LIB");
        free(agent);
        return NULL;
    }
    if (strpbrk(agent, ": \t\n")) {
        cli_error("agent path %s contains ':' or whitespace, which LD_PRELOAD cannot express", agent);
        free(agent);
        return NULL;
    }
    return agent;
}

/* LD_PRELOAD=agent[:old] and MEMTRAIL_OPTIONS=[old:]mode=M[DETAIL_OPTS]:output=OUT. */
static int set_agent_env(const char *agent, const char *mode, const char *detail_opts, const char *output)
{
    const char *old = getenv("LD_PRELOAD");
    char *preload = NULL, *opts = NULL;
    size_t len;
    if (old && *old) {
        if (asprintf(&preload, "%s:%s", agent, old) < 0)
            return cli_error("out of memory");
    } else if (!(preload = strdup(agent))) {
        return cli_error("out of memory");
    }
    FILE *m = open_memstream(&opts, &len);
    if (!m) {
        free(preload);
        return cli_error("out of memory");
    }
    const char *old_opts = getenv("MEMTRAIL_OPTIONS");
    if (old_opts && *old_opts) {
        size_t n = strlen(old_opts), bs = 0;
        while (bs < n && old_opts[n - 1 - bs] == '\\')
            bs++;
        fprintf(m, "%s%s:", old_opts, bs % 2 ? "\\" : ""); /* a dangling '\' must not eat our ':' */
    }
    fprintf(m, "mode=%s%s:output=", mode, detail_opts);
    put_option_value(m, output);
    int bad = fclose(m) != 0;
    if (bad || setenv("LD_PRELOAD", preload, 1) < 0 || setenv("MEMTRAIL_OPTIONS", opts, 1) < 0) {
        free(preload);
        free(opts);
        return cli_error("cannot set up the environment: %s", strerror(errno ? errno : ENOMEM));
    }
    free(preload);
    free(opts);
    return 0;
}

static int add_agent_option(const char *opt);

static volatile sig_atomic_t child_pid;

/* memtrail killed or hung up: pass it on to the program, whose status we
 * then report as usual. */
static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static ssize_t read_full(int fd, void *buf, size_t len)
{
    ssize_t n;
    do
        n = read(fd, buf, len);
    while (n < 0 && errno == EINTR);
    return n;
}

struct launch {
    const char *what; /* "report" or "trace", for messages */
    bool trace;
    const char *path;    /* the resolved program */
    char **argv;         /* its arguments, argv[0] as the user wrote it */
    const char *out_abs; /* the output template, absolute */
    const char *prog;    /* %e */
    bool go_exit;        /* a Go program: hold its exit_group for the report (run_exit.c) */
};

struct outcome {
    pid_t pid;
    int status;   /* from waitpid */
    char *report; /* expanded output path (absolute) */
    bool stale;   /* the file there predates this run */
};

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_size == b->st_size;
}

/* fork + exec + wait. The child waits for a go byte so that the parent can
 * note what sits at the report path before the program can write there,
 * and reports a failed exec back on the same close-on-exec socket pair
 * (one pair, not two pipes: a program run under a tiny ulimit -n leaves
 * memtrail few descriptors). */
static int launch(const struct launch *l, struct outcome *o)
{
    int sv[2], watch[2] = {-1, -1}; /* sv[0] the parent's end, sv[1] the child's */
    if (l->go_exit && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, watch) < 0)
        return cli_error("socketpair: %s", strerror(errno));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        int e = errno;
        if (watch[0] >= 0)
            close(watch[0]), close(watch[1]);
        return cli_error("socketpair: %s", strerror(e));
    }
    /* As system(): the program gets ^C and ^\, memtrail waits for it. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
    struct sigaction old_int, old_quit, old_chld, old_term, old_hup;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGCHLD, &dfl, &old_chld); /* an inherited SIG_IGN would reap it for us */

    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        sigaction(SIGCHLD, &old_chld, NULL);
        close(sv[0]), close(sv[1]);
        if (watch[0] >= 0)
            close(watch[0]), close(watch[1]);
        return cli_error("fork: %s", strerror(e));
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        sigaction(SIGCHLD, &old_chld, NULL);
        close(sv[0]);
        char c;
        if (read_full(sv[1], &c, 1) != 1)
            _exit(127); /* the parent went away */
        /* The agent tells this process from its children by it (trace
         * mode's line at exit). memtrail is single-threaded: setenv is
         * safe after the fork. */
        char run_pid[32];
        snprintf(run_pid, sizeof run_pid, "run_pid=%d", (int)getpid());
        if (add_agent_option(run_pid) < 0)
            _exit(127);
        if (watch[1] >= 0) {
            close(watch[0]);
            int e = run_exit_watch_install(watch[1]);
            if (e < 0)
                fprintf(stderr,
                        "memtrail: cannot hold %s's exit_group for its report (seccomp: %s): "
                        "it will leave without one\n",
                        l->argv[0], strerror(-e));
        }
        execv(l->path, l->argv);
        if (errno == ENOEXEC) { /* no #! line: a shell script, as execvp does */
            int n = 0;
            while (l->argv[n])
                n++;
            char **sh = calloc((size_t)n + 2, sizeof *sh);
            if (sh) {
                sh[0] = (char *)"sh";
                sh[1] = (char *)l->path;
                memcpy(sh + 2, l->argv + 1, (size_t)n * sizeof *sh);
                execv("/bin/sh", sh);
            }
        }
        int e = errno;
        ssize_t w = write(sv[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(sv[1]);
    o->pid = pid;
    o->report = expand_output(l->out_abs, pid, l->prog);
    struct stat before;
    bool existed = o->report && stat(o->report, &before) == 0;
    /* The agent will refuse a name that is a symbolic link, a device, a
     * FIFO, a directory or another user's file (safe_file.h): say so now,
     * and run nothing (the child, never sent the go byte, exits). */
    int target = o->report ? mt_file_check(AT_FDCWD, o->report) : 0;
    struct stat fifo;
    if (target == -ENODEV && l->trace && lstat(o->report, &fifo) == 0 && S_ISFIFO(fifo.st_mode))
        target = 0; /* a trace streams into a FIFO its reader has open */
    if (target == 0) {
        ssize_t w = write(sv[0], "g", 1);
        (void)w; /* if the child is gone, waitpid tells */
    }
    shutdown(sv[0], SHUT_WR); /* no go byte: the child reads the end, and leaves */
    int listener = -1;
    if (watch[0] >= 0) {
        close(watch[1]);
        listener = target == 0 ? run_exit_watch_receive(watch[0]) : -1;
        close(watch[0]);
    }
    int exec_errno = 0;
    bool exec_failed = read_full(sv[0], &exec_errno, sizeof exec_errno) == (ssize_t)sizeof exec_errno;
    close(sv[0]);

    child_pid = pid;
    struct sigaction fwd = {.sa_handler = forward_signal};
    sigemptyset(&fwd.sa_mask);
    sigaction(SIGTERM, &fwd, &old_term);
    sigaction(SIGHUP, &fwd, &old_hup);
    pid_t got;
    int wait_errno = 0;
    if (listener >= 0) {
        wait_errno = -run_exit_watch_wait(listener, pid, &o->status);
        got = wait_errno ? -1 : pid;
        close(listener);
    } else {
        do
            got = waitpid(pid, &o->status, 0);
        while (got < 0 && errno == EINTR);
        wait_errno = errno;
    }
    child_pid = 0;
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);

    if (got < 0)
        return cli_error("waitpid: %s", strerror(wait_errno));
    if (target < 0)
        return cli_error("cannot write the %s to %s: %s", l->what, o->report, mt_file_strerror(target));
    if (exec_failed) {
        cli_error("cannot run %s: %s", l->argv[0], strerror(exec_errno));
        return exec_errno == ENOENT ? 127 : 126;
    }
    if (!o->report)
        return cli_error("out of memory");
    struct stat after;
    o->stale = existed && stat(o->report, &after) == 0 && same_file(&before, &after);
    return 0;
}

/* Did MEMTRAIL_OPTIONS (as the program got it) say start=off? The last
 * start= field counts, as in the agent. */
static bool started_off(void)
{
    const char *opts = getenv("MEMTRAIL_OPTIONS");
    bool off = false;
    for (const char *p = opts; p && *p;) {
        if (strncmp(p, "start=", 6) == 0)
            off = strncmp(p + 6, "off", 3) == 0 && (p[9] == ':' || p[9] == '\0');
        p = strchr(p, ':');
        p = p ? p + 1 : NULL;
    }
    return off;
}

/* Does the trace at path end with its writer's end record? A complete
 * file ends END, INDEX, trailer (docs/trace-format.md): its index's last
 * entry is the END chunk. 1 yes, 0 no (or not readable). */
static int trace_has_end(const char *path)
{
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    if (mt_trace_open(path, 0, &r, err, sizeof err) < 0)
        return 0;
    size_t n = mt_trace_index_count(r);
    int ended = n > 0 && mt_trace_index_get(r, n - 1)->kind == TRACE_CHUNK_END;
    mt_trace_close(r);
    return ended;
}

static void announce_report(const struct outcome *o, const char *out_template, const char *prog,
                            const char *mode)
{
    char *shown = expand_output(out_template, o->pid, prog);
    const char *path = shown ? shown : o->report;
    struct stat st;
    if (!o->stale && stat(o->report, &st) == 0 && strcmp(mode, "trace") == 0) {
        fprintf(stderr, "memtrail: trace of %d written to %s\n", (int)o->pid, path);
        if (WIFSIGNALED(o->status)) {
            fprintf(stderr, "memtrail: it was killed by signal %d (%s)", WTERMSIG(o->status),
                    strsignal(WTERMSIG(o->status)));
            if (trace_has_end(o->report))
                fputs("; the trace is complete (it has its end record)\n", stderr);
            else
                fputs(": the trace has no end record ('memtrail analyze' says what it holds)\n", stderr);
        }
        fputs("memtrail: analyse it with: memtrail analyze ", stderr);
        report_shell_quote(stderr, path);
        fputc('\n', stderr);
    } else if (!o->stale && stat(o->report, &st) == 0) {
        fprintf(stderr, "memtrail: %s report of %d written to %s\n", mode, (int)o->pid, path);
        /* 'memtrail report' reads a sample-mode report as detail (its sites are estimates). */
        fprintf(stderr, "memtrail: read it with: memtrail report %s ",
                strcmp(mode, "sample") == 0 ? "detail" : mode);
        report_shell_quote(stderr, path);
        fputc('\n', stderr);
    } else if (o->stale) {
        fprintf(stderr, "memtrail: no new report from %d: %s is from an earlier run\n", (int)o->pid, path);
    } else if (strcmp(mode, "trace") == 0 && started_off() && !WIFSIGNALED(o->status)) {
        fprintf(stderr,
                "memtrail: no trace from %d at %s: it ran with start=off ('memtrail query PID start trace'"
                " records on demand)\n",
                (int)o->pid, path);
    } else {
        fprintf(stderr, "memtrail: no report from %d at %s: ", (int)o->pid, path);
        if (WIFSIGNALED(o->status))
            fprintf(stderr, "it was killed by signal %d (%s) before the agent could write one\n",
                    WTERMSIG(o->status), strsignal(WTERMSIG(o->status)));
        else if (strcmp(mode, "trace") == 0)
            fputs("the program may have made no allocation (then no trace file is written),\n"
                  "memtrail: called _exit(), exec'd another program, been killed,\n"
                  "memtrail: or the agent was not loaded (see any loader message above)\n",
                  stderr);
        else
            fputs("the program may have called _exit(), exec'd another program, been killed,\n"
                  "memtrail: or the agent was not loaded (see any loader message above)\n",
                  stderr);
    }
    free(shown);
}

/* --session: MEMTRAIL_SESSIONS, one definition per line, after any the
 * environment already has. */
static int set_sessions(const char *const *defs, int n)
{
    char *v = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&v, &len);
    if (!m)
        return cli_error("out of memory");
    const char *old = getenv("MEMTRAIL_SESSIONS");
    if (old && *old)
        fprintf(m, "%s\n", old);
    for (int i = 0; i < n; i++)
        fprintf(m, "%s%s", defs[i], i + 1 < n ? "\n" : "");
    int rc = 0;
    if (fclose(m) != 0)
        rc = cli_error("out of memory");
    else if (setenv("MEMTRAIL_SESSIONS", v, 1) < 0)
        rc = cli_error("cannot set up the environment: %s", strerror(errno));
    free(v);
    return rc;
}

/* One more agent option, after the others: follow_exec=on for
 * --follow-exec; query=thread for a Go program (its runtime takes every
 * signal, the control socket's among them, for itself). */
static int add_agent_option(const char *opt)
{
    const char *opts = getenv("MEMTRAIL_OPTIONS");
    char *v = NULL;
    if (asprintf(&v, "%s:%s", opts ? opts : "", opt) < 0)
        return cli_error("out of memory");
    int rc = 0;
    if (setenv("MEMTRAIL_OPTIONS", v, 1) < 0)
        rc = cli_error("cannot set up the environment: %s", strerror(errno));
    free(v);
    return rc;
}

/* --follow-exec: the other processes of the tree wrote their own reports
 * (or traces). */
static void announce_tree(const char *out_abs, const char *main_report, const struct timespec *since,
                          bool trace)
{
    char *dir = NULL;
    const char *what = trace ? "trace" : "report";
    int n = run_count_tree_reports(out_abs, main_report, since, trace, &dir);
    if (n < 0)
        fprintf(stderr, "memtrail: the tree's other processes wrote their %ss to %s\n", what, out_abs);
    else if (n == 0)
        fprintf(stderr, "memtrail: no other process of the tree wrote a %s\n", what);
    else
        fprintf(stderr, "memtrail: %d more %s%s, from other processes of the tree, in %s\n", n, what,
                n == 1 ? "" : "s", dir);
    if (n > 0) { /* report DIR reads traces too, FILE.N of an exec'd image among them */
        fputs("memtrail: summarise the tree with: memtrail report ", stderr);
        report_shell_quote(stderr, dir);
        fputc('\n', stderr);
    }
    if (n > 0 && trace)
        fputs("memtrail: analyse each with: memtrail analyze FILE\n", stderr);
    free(dir);
}

static const struct cli_command run_cmd = {
    .name = "run",
    .usage =
        "usage: memtrail run [--mode summary|detail|sample|trace] [--depth N] [--unwind "
        "auto|cfi|libunwind|fp]\n"
        "                    [--sample-rate BYTES] [-o FILE] [--trace-buffer SIZE] [--no-loss|--allow-loss]\n"
        "                    [--follow-exec] [--session DEF]... [--] CMD [ARGS...]\n",
    .about = run_about,
    .more = run_more,
    .stop_at_argument = true,
    .unknown_hint = " (put the command after '--')",
    .min_args = 1,
    .max_args = -1,
    .missing = "missing the command to run",
};

int cmd_run(int argc, char **argv)
{
    const char *mode = "summary", *output = NULL, *depth = NULL, *unwind = NULL, *trace_buffer = NULL;
    const char *sample_rate = NULL;
    bool follow_exec = false, no_loss = false, allow_loss = false;
    const char *session_defs[argc + 1];
    struct cli_list sessions = {session_defs, 0};
    /* The flags that become agent options take their values, help and
     * default from the agent's option table. */
    const struct cli_option options[] = {
        {.kind = CLI_OPT_AGENT,
         .name = "mode",
         .arg = "MODE",
         .value = &mode,
         .agent = MT_OPT_MODE,
         .except = "off",
         .noun = "mode",
         .help =
             "Read a detail or sample report with memtrail report detail, a trace with memtrail analyze."},
        {.kind = CLI_OPT_AGENT, .name = "depth", .arg = "N", .value = &depth, .agent = MT_OPT_DEPTH},
        {.kind = CLI_OPT_AGENT, .name = "unwind", .arg = "U", .value = &unwind, .agent = MT_OPT_UNWIND},
        {.kind = CLI_OPT_AGENT,
         .name = "sample-rate",
         .arg = "BYTES",
         .value = &sample_rate,
         .agent = MT_OPT_SAMPLE_RATE},
        {.kind = CLI_OPT_STRING,
         .name = "output",
         .short_name = 'o',
         .arg = "FILE",
         .value = &output,
         .help = "where the report goes (default memtrail.%p.mtr, or memtrail.%p.mtt for a trace); %p is the "
                 "pid, %e the program name, %% a percent sign. With %p, each forked child writes its own "
                 "report. FILE is written whole (a temporary renamed into place), never through a symbolic "
                 "link or over anything but a regular file of yours; '-' is refused (docs/cli.md)"},
        {.kind = CLI_OPT_AGENT,
         .name = "trace-buffer",
         .arg = "SIZE",
         .value = &trace_buffer,
         .agent = MT_OPT_TRACE_BUFFER},
        {.kind = CLI_OPT_FLAG,
         .name = "no-loss",
         .value = &no_loss,
         .help = "trace mode: a full buffer makes the program wait (the default; trace_loss=wait)"},
        {.kind = CLI_OPT_FLAG,
         .name = "allow-loss",
         .value = &allow_loss,
         .help = "trace mode, for production: a full buffer loses the event (counted) rather than wait "
                 "(trace_loss=drop)"},
        {.kind = CLI_OPT_FLAG,
         .name = "follow-exec",
         .value = &follow_exec,
         .help =
             "keep tracking across exec (agent option follow_exec=on): programs the tree execs (even with "
             "an environment that drops LD_PRELOAD) load the agent and write their own reports, so FILE "
             "must contain %p. Without it, exec'd programs run untracked, and a process that execs leaves "
             "a report with reason exec."},
        {.kind = CLI_OPT_LIST,
         .name = "session",
         .arg = "DEF",
         .value = &sessions,
         .help = "an event session fed with the program's allocations, frees, reallocs, mmaps and munmaps, "
                 "started with it and stopped at exit (repeatable). DEF is its definition (options in "
                 "docs/events.md), e.g. 'name=big;target=histogram(source=size_class)'. See it live with "
                 "memtrail sessions PID; a bad DEF is one line on stderr and the program runs without that "
                 "session."},
        {0},
    };
    int n = cli_parse(&run_cmd, options, argc, argv);
    if (n < 0)
        return cli_parse_exit(n);
    for (int k = 0; k < sessions.n; k++) {
        const char *def = sessions.v[k];
        if (*def == '\0' || strchr(def, '\n'))
            return cli_usage_error("run", "--session: %s",
                                   *def ? "a definition is one line (no newline)"
                                        : "empty session definition");
    }
    if (output && *output == '\0')
        return cli_usage_error("run", "-o: empty file name");
    if (output && strcmp(output, "-") == 0)
        return cli_usage_error("run",
                               "-o: '-' (standard output) is the program's: the report goes to a file");
    bool trace = strcmp(mode, "trace") == 0;
    if (!output)
        output = trace ? "memtrail.%p.mtt" : "memtrail.%p.mtr";
    if ((trace_buffer || no_loss || allow_loss) && !trace)
        return cli_usage_error("run", "%s is for trace mode: add --mode trace",
                               trace_buffer ? "--trace-buffer"
                               : no_loss    ? "--no-loss"
                                            : "--allow-loss");
    if (no_loss && allow_loss)
        return cli_usage_error("run", "--no-loss and --allow-loss: choose one");
    if (check_template(output) != 0)
        return CLI_USAGE;
    if (follow_exec && !run_template_has_pid(output))
        return cli_usage_error("run",
                               "--follow-exec: -o '%s' has no %%p, but every process of the tree writes "
                               "its own report (e.g. -o memtrail.%%p.mtr)",
                               output);
    bool sample = strcmp(mode, "sample") == 0;
    if ((depth || unwind) && strcmp(mode, "detail") != 0 && !trace && !sample)
        return cli_usage_error(
            "run",
            "%s is for detail, sample and trace modes: add --mode detail, --mode sample or "
            "--mode trace",
            depth ? "--depth" : "--unwind");
    if (sample_rate && !sample)
        return cli_usage_error("run", "--sample-rate is for sample mode: add --mode sample");
    char detail_opts[160] = "";
    int dlen = snprintf(detail_opts, sizeof detail_opts, "%s%s%s%s%s%s%s%s%s", depth ? ":depth=" : "",
                        depth ? depth : "", unwind ? ":unwind=" : "", unwind ? unwind : "",
                        sample_rate ? ":sample_rate=" : "", sample_rate ? sample_rate : "",
                        trace_buffer ? ":trace_buffer=" : "", trace_buffer ? trace_buffer : "",
                        no_loss      ? ":trace_loss=wait"
                        : allow_loss ? ":trace_loss=drop"
                                     : "");
    if (dlen < 0 || (size_t)dlen >= sizeof detail_opts) /* a cut value would reach the agent as another */
        return cli_usage_error(
            "run", "--depth, --unwind, --sample-rate and --trace-buffer: values too long (%d bytes in all)",
            dlen);
    char **cmd = argv;

    char *path = NULL;
    int rc = run_resolve_command(cmd[0], &path);
    if (rc == -ENOMEM)
        return cli_error("out of memory");
    if (rc < 0) {
        /* As shells do: 127 for a command not found, 126 for one that cannot run. */
        cli_error("%s: %s", cmd[0], rc == -ENOENT ? "command not found" : strerror(-rc));
        return rc == -ENOENT ? 127 : 126;
    }
    if (run_check_program(path, cmd[0]) != 0) {
        free(path);
        return CLI_FAILED;
    }
    char *agent = run_find_agent();
    if (!agent) {
        free(path);
        return CLI_FAILED;
    }

    /* The agent resolves a relative path against the program's cwd, which
     * the program may change: give it an absolute one. */
    char *out_abs = NULL, *cwd = NULL;
    if (output[0] == '/') {
        out_abs = strdup(output);
    } else if ((cwd = getcwd(NULL, 0)) != NULL) {
        if (asprintf(&out_abs, "%s/%s", cwd, output) < 0)
            out_abs = NULL;
    }
    free(cwd);
    if (out_abs && (rc = check_output_dir(out_abs)) != 0) {
        free(out_abs);
        free(agent);
        free(path);
        return rc;
    }
    const char *prog = strrchr(cmd[0], '/') ? strrchr(cmd[0], '/') + 1 : cmd[0];
    struct outcome o = {0};
    struct timespec started = {0};
    if (!out_abs)
        rc = cli_error("cannot make the output path absolute: %s", strerror(errno));
    else if ((rc = set_agent_env(agent, mode, detail_opts, out_abs)) == 0 && follow_exec)
        rc = add_agent_option("follow_exec=on");
    bool go = out_abs && rc == 0 && run_is_go(path) == 1;
    if (go)
        rc = add_agent_option("query=thread");
    if (out_abs && rc == 0 && sessions.n > 0)
        rc = set_sessions(sessions.v, sessions.n);
    if (out_abs && rc == 0) {
        /* The coarse clock is the one file times are taken from. */
        clock_gettime(CLOCK_REALTIME_COARSE, &started);
        struct launch l = {trace ? "trace" : "report", trace, path, cmd, out_abs, prog, go};
        rc = launch(&l, &o);
    }
    if (rc == 0) {
        announce_report(&o, output, prog, mode);
        if (follow_exec)
            announce_tree(out_abs, o.report, &started, trace);
        rc = WIFSIGNALED(o.status) ? 128 + WTERMSIG(o.status) : WEXITSTATUS(o.status);
    }
    free(o.report);
    free(out_abs);
    free(agent);
    free(path);
    return rc;
}
