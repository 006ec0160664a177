/* cmd_query.c — `memtrail query PID [summary|baseline|diff] [--json]
 * [--scale KB|MB|GB] [--timeout SECONDS]`: asks a running, tracked process
 * over its control socket (src/agent/control.c; protocol in docs/cli.md)
 * for its summary, to keep a baseline, or for what changed since.
 *
 * Only processes of our own uid: the socket is found from the target's
 * environment (XDG_RUNTIME_DIR) or /tmp/memtrail-UID, and its directory
 * and file must belong to that uid before we connect. */
#include "cli/cli.h"
#include "report/detail.h"
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char query_usage[] =
    "usage: memtrail query PID [summary|detail|baseline|diff] [--json] [--scale KB|MB|GB]\n"
    "                          [--timeout SECONDS] [--depth N] [--top N] [--sort live|allocated]\n"
    "\n"
    "Ask the running process PID, tracked by memtrail (started with 'memtrail\n"
    "run'), without stopping it:\n"
    "\n"
    "  summary   its summary now, laid out as 'memtrail report' does (default)\n"
    "  detail    its allocation sites now, symbolized, as 'memtrail report detail'\n"
    "            shows them (the process must run in detail mode; --depth, --top\n"
    "            and --sort as there)\n"
    "  baseline  keep its summary now as the baseline (in the process) and print it\n"
    "  diff      what changed, category by category, since the baseline\n"
    "\n"
    "Options:\n"
    "  --json              print JSON instead (keys in docs/cli.md)\n"
    "  --scale KB|MB|GB    unit of the text output (default KB)\n"
    "  --timeout SECONDS   how long to wait for the answer (default 5)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Only your own processes can be queried. The process listens on\n"
    "$XDG_RUNTIME_DIR/memtrail/PID.sock or /tmp/memtrail-UID/PID.sock (mode 0600,\n"
    "in a 0700 directory); MEMTRAIL_OPTIONS=query=off turns that off.\n";

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

struct target {
    long pid;
    unsigned uid;  /* effective uid, from /proc/PID/status */
    char *dirs[2]; /* candidate socket directories, in order */
    int ndirs;
};

/* Reads /proc/PID/status for the process's effective uid. 0, or
 * CLI_FAILED after printing the error. */
static int read_uid(struct target *t)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", t->pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT || errno == ESRCH)
            return cli_error("no process with pid %ld", t->pid);
        return cli_error("cannot read %s: %s", path, strerror(errno));
    }
    bool have_uid = false, zombie = false;
    while (fgets(line, sizeof line, f)) {
        unsigned r, e;
        if (sscanf(line, "Uid: %u %u", &r, &e) == 2) {
            t->uid = e;
            have_uid = true;
        }
        if (strncmp(line, "State:", 6) == 0 && strchr(line, 'Z'))
            zombie = true;
    }
    fclose(f);
    if (!have_uid)
        return cli_error("cannot read the uid of process %ld from %s", t->pid, path);
    if (zombie)
        return cli_error("process %ld has exited (a zombie, not yet reaped by its parent)", t->pid);
    return 0;
}

/* The value of XDG_RUNTIME_DIR in the process's environment, or NULL
 * (unset, or the environment cannot be read). Malloc'd. */
static char *target_xdg(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *entry = NULL, *found = NULL;
    size_t cap = 0;
    ssize_t n;
    static const char key[] = "XDG_RUNTIME_DIR=";
    while (!found && (n = getdelim(&entry, &cap, '\0', f)) > 0) {
        if (strncmp(entry, key, sizeof key - 1) == 0)
            found = strdup(entry + sizeof key - 1);
    }
    free(entry);
    fclose(f);
    return found;
}

/* The directories the agent may have used, as it chooses (control.c):
 * $XDG_RUNTIME_DIR/memtrail when that is an absolute directory of the
 * target's uid, then /tmp/memtrail-UID. */
static int find_dirs(struct target *t)
{
    char *xdg = target_xdg(t->pid);
    struct stat st;
    if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == t->uid) {
        if (asprintf(&t->dirs[t->ndirs], "%s/memtrail", xdg) < 0)
            t->dirs[t->ndirs] = NULL;
        if (t->dirs[t->ndirs])
            t->ndirs++;
    }
    free(xdg);
    if (asprintf(&t->dirs[t->ndirs], "/tmp/memtrail-%u", t->uid) < 0)
        return cli_error("out of memory");
    t->ndirs++;
    return 0;
}

/* Finds the socket: *path is set (malloc'd) to the first candidate that
 * exists. Returns 0, or CLI_FAILED after printing why. */
static int find_socket(const struct target *t, char **path)
{
    char *tried[2] = {NULL, NULL};
    int rc = 0;
    *path = NULL;
    for (int i = 0; i < t->ndirs && !*path && rc == 0; i++) {
        if (asprintf(&tried[i], "%s/%ld.sock", t->dirs[i], t->pid) < 0)
            return cli_error("out of memory");
        struct stat st;
        if (lstat(t->dirs[i], &st) != 0)
            continue;
        if (!S_ISDIR(st.st_mode) || st.st_uid != t->uid || (st.st_mode & 077) != 0) {
            rc = cli_error("refusing %s: not a private directory of uid %u (owner %u, mode %04o%s)",
                           t->dirs[i], t->uid, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                           S_ISLNK(st.st_mode) ? ", a symbolic link" : "");
            break;
        }
        if (lstat(tried[i], &st) != 0)
            continue;
        if (!S_ISSOCK(st.st_mode) || st.st_uid != t->uid || (st.st_mode & 077) != 0) {
            rc = cli_error("refusing %s: not a private socket of uid %u", tried[i], t->uid);
            break;
        }
        *path = tried[i];
        tried[i] = NULL;
    }
    if (!*path && rc == 0) {
        if (tried[1])
            rc = cli_error("process %ld is not tracked by memtrail (no control socket at %s or %s)", t->pid,
                           tried[0], tried[1]);
        else
            rc = cli_error("process %ld is not tracked by memtrail (no control socket at %s)", t->pid,
                           tried[0]);
    }
    free(tried[0]);
    free(tried[1]);
    return rc;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends `cmd` and reads the reply until EOF into *buf, *len. */
static int ask(const struct target *t, const char *sock, const char *cmd, int timeout_ms, char **buf,
               size_t *len)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(sock) >= SUN_PATH_MAX)
        return cli_error("control socket path too long: %s", sock);
    strcpy(addr.sun_path, sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cli_error("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(fd);
        if (e == ECONNREFUSED)
            return cli_error(
                "process %ld is not tracked by memtrail (nothing listens on its control socket %s;"
                " left by an earlier process?)",
                t->pid, sock);
        return cli_error("cannot connect to %s: %s", sock, strerror(e));
    }
    size_t n = strlen(cmd);
    /* A server that refuses may close before reading: its answer is read anyway. */
    if (send(fd, cmd, n, MSG_NOSIGNAL) != (ssize_t)n && errno != EPIPE && errno != ECONNRESET) {
        int e = errno;
        close(fd);
        return cli_error("cannot send the request to process %ld: %s", t->pid, strerror(e));
    }
    shutdown(fd, SHUT_WR);

    size_t cap = 65536;
    *len = 0;
    *buf = malloc(cap);
    if (!*buf) {
        close(fd);
        return cli_error("out of memory");
    }
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            close(fd);
            return cli_error("process %ld did not answer within %d seconds (is it stopped?)", t->pid,
                             timeout_ms / 1000);
        }
        if (*len + 4096 > cap) {
            char *more = realloc(*buf, cap * 2);
            if (!more) {
                close(fd);
                return cli_error("out of memory");
            }
            *buf = more;
            cap *= 2;
        }
        ssize_t r = pr < 0 ? -1 : read(fd, *buf + *len, cap - *len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return cli_error("cannot read the answer of process %ld: %s", t->pid, strerror(e));
        }
        if (r == 0)
            break;
        *len += (size_t)r;
    }
    close(fd);
    (*buf)[*len] = '\0';
    if (*len == 0)
        return cli_error("process %ld closed its control socket without answering", t->pid);
    if (strncmp(*buf, "error ", 6) == 0) {
        char *nl = strchr(*buf, '\n');
        if (nl)
            *nl = '\0';
        return cli_error("process %ld: %s", t->pid, *buf + 6);
    }
    return 0;
}

/* Parses one report from buf[0..len). */
static int parse(const char *buf, size_t len, const char *name, struct report *r)
{
    char err[REPORT_ERR_MAX];
    FILE *f = fmemopen((void *)buf, len, "r");
    if (!f) {
        memset(r, 0, sizeof *r);
        return cli_error("fmemopen: %s", strerror(errno));
    }
    int rc = report_read_stream(f, name, r, err, sizeof err);
    fclose(f);
    return rc < 0 ? cli_error("%s", err) : 0;
}

/* The end of the first report in a diff reply: just past its "end" line. */
static size_t first_report_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++) {
        if ((i == 0 || buf[i - 1] == '\n') && memcmp(buf + i, "end\n", 4) == 0)
            return i + 4;
    }
    return len;
}

static int print_reply(const struct target *t, const char *cmd, const char *buf, size_t len, bool json,
                       const struct report_scale *scale, const struct detail_options *dopt)
{
    char name[64];
    int rc, prc;
    if (strcmp(cmd, "detail") == 0) {
        struct report r;
        snprintf(name, sizeof name, "process %ld", t->pid);
        rc = parse(buf, len, name, &r);
        if (rc == 0)
            rc = detail_cli_print(&r, name, json, scale, dopt);
        report_free(&r);
        return rc;
    }
    if (strcmp(cmd, "diff") == 0) {
        struct report base, cur;
        size_t cut = first_report_end(buf, len);
        snprintf(name, sizeof name, "process %ld (baseline)", t->pid);
        rc = parse(buf, cut, name, &base);
        snprintf(name, sizeof name, "process %ld", t->pid);
        if (rc == 0)
            rc = parse(buf + cut, len - cut, name, &cur);
        else
            memset(&cur, 0, sizeof cur);
        prc = 0;
        if (rc == 0)
            prc = json ? report_diff_print_json(stdout, &base, &cur)
                       : report_diff_print_text(stdout, &base, &cur, scale);
        report_free(&base);
        report_free(&cur);
    } else {
        struct report r;
        snprintf(name, sizeof name, "process %ld", t->pid);
        rc = parse(buf, len, name, &r);
        prc = 0;
        if (rc == 0 && strcmp(cmd, "baseline") == 0) {
            if (json)
                fprintf(stderr, "memtrail: baseline of process %ld set\n", t->pid);
            else
                printf("Baseline of process %ld set; 'memtrail query %ld diff' shows what changed since.\n\n",
                       t->pid, t->pid);
        }
        if (rc == 0)
            prc = json ? report_print_json(stdout, &r) : report_print_text(stdout, &r, scale);
        report_free(&r);
    }
    if (rc != 0)
        return rc;
    return cli_write_status(prc);
}

static int parse_pid(const char *s, long *pid)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end || errno || v <= 0 || v > INT_MAX)
        return -1;
    *pid = v;
    return 0;
}

int cmd_query(int argc, char **argv)
{
    const char *positional[2];
    int npos = 0, timeout_s = 5;
    bool json = false, options_done = false, detail_given = false;
    struct report_scale scale;
    report_scale_parse("KB", &scale);
    struct detail_options dopt = {0};

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        if (options_done || arg[0] != '-' || arg[1] == '\0') {
            if (npos == 2)
                return cli_usage_error("query", "too many arguments ('%s')", arg);
            positional[npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (cli_is_help(arg)) {
            fputs(query_usage, stdout);
            return CLI_OK;
        }
        int m = cli_view_option("query", argc, argv, &i, &json, &scale, &dopt, &detail_given);
        if (m < 0)
            return CLI_USAGE;
        if (m > 0)
            continue;
        m = cli_option_value("query", argc, argv, &i, "--timeout", NULL, &value);
        if (m < 0)
            return CLI_USAGE;
        if (m > 0) {
            long v;
            if (parse_pid(value, &v) < 0 || v > 3600)
                return cli_usage_error("query", "--timeout: '%s' is not a number of seconds (1 to 3600)",
                                       value);
            timeout_s = (int)v;
            continue;
        }
        return cli_usage_error("query", "unknown option '%s'", arg);
    }
    if (npos == 0)
        return cli_usage_error("query", "missing the PID of the process to ask");
    const char *cmd = npos == 2 ? positional[1] : "summary";
    if (strcmp(cmd, "summary") != 0 && strcmp(cmd, "detail") != 0 && strcmp(cmd, "baseline") != 0 &&
        strcmp(cmd, "diff") != 0)
        return cli_usage_error("query", "unknown request '%s' (accepted: summary, detail, baseline, diff)", cmd);
    if (detail_given && strcmp(cmd, "detail") != 0)
        return cli_usage_error("query", "--depth, --top and --sort apply to 'query PID detail' only");

    struct target t = {0};
    if (parse_pid(positional[0], &t.pid) < 0)
        return cli_usage_error("query", "'%s' is not a process id", positional[0]);
    int rc = read_uid(&t);
    if (rc != 0)
        return rc;
    if (t.uid != (unsigned)geteuid())
        return cli_error("process %ld belongs to uid %u; memtrail query only talks to your own processes",
                         t.pid, t.uid);
    char *sock = NULL, *buf = NULL, line[16];
    size_t len = 0;
    rc = find_dirs(&t);
    if (rc == 0)
        rc = find_socket(&t, &sock);
    snprintf(line, sizeof line, "%s\n", cmd);
    if (rc == 0)
        rc = ask(&t, sock, line, timeout_s * 1000, &buf, &len);
    if (rc == 0)
        rc = print_reply(&t, cmd, buf, len, json, &scale, &dopt);
    free(buf);
    free(sock);
    for (int i = 0; i < t.ndirs; i++)
        free(t.dirs[i]);
    return rc;
}
