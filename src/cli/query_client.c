/* query_client.c — the client side of a tracked process's control socket
 * (src/agent/control.c; protocol in docs/cli.md), shared by `memtrail
 * query` and `memtrail sessions`: finding the socket of a process of ours
 * and asking it one request.
 *
 * Only processes of our own uid: the socket is found from the target's
 * environment (XDG_RUNTIME_DIR) or /tmp/memtrail-UID, and its directory
 * and file must belong to that uid before we connect. */
#include "cli/cli.h"
#include "report/report.h"

#include <dirent.h>
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

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

/* Reads /proc/PID/status for the process's effective uid. 0, or
 * CLI_FAILED after printing the error. */
static int read_uid(struct query_target *t)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", t->pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        t->failure = errno == ENOENT ? -ESRCH : -errno;
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
    t->failure = !have_uid ? -EIO : zombie ? -ESRCH : 0;
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
static int find_dirs(struct query_target *t)
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

/* The value of key in the MEMTRAIL_OPTIONS the process started with (the
 * last one given), into val; false when it has none. */
static bool start_option(long pid, const char *key, char *val, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char *entry = NULL;
    size_t ecap = 0, klen = strlen(key);
    bool found = false;
    while (getdelim(&entry, &ecap, '\0', f) > 0) {
        if (strncmp(entry, "MEMTRAIL_OPTIONS=", 17) != 0)
            continue;
        for (const char *o = entry + 17; o && *o; o = strchr(o, ':') ? strchr(o, ':') + 1 : NULL) {
            if (strncmp(o, key, klen) == 0 && o[klen] == '=') {
                size_t n = strcspn(o + klen + 1, ":");
                snprintf(val, cap, "%.*s", (int)n, o + klen + 1);
                found = true;
            }
        }
    }
    free(entry);
    fclose(f);
    return found;
}

/* Is memtrail's agent mapped in the process? (Its maps name the library.)
 * Then a missing socket means the process is leaving (its exit or exec
 * removes the socket first) or runs with query=off, not that it is
 * untracked. */
static bool agent_loaded(long pid)
{
    char path[64], *line = NULL;
    size_t cap = 0;
    bool found = false;
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    while (!found && getline(&line, &cap, f) > 0)
        found = strstr(line, "/libmemtrail.so") != NULL;
    free(line);
    fclose(f);
    return found;
}

/* Finds the socket: *path is set (malloc'd) to the first candidate that
 * exists. Returns 0, or CLI_FAILED after printing why. */
static int find_socket(const struct query_target *t, char **path)
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
        char mode[16] = "", query[16] = "";
        bool loaded = agent_loaded(t->pid);
        bool off = start_option(t->pid, "mode", mode, sizeof mode) && strcmp(mode, "off") == 0;
        if (loaded && !off && start_option(t->pid, "query", query, sizeof query) && strcmp(query, "off") == 0)
            rc = cli_error("process %ld runs memtrail's agent with query=off: it answers no queries", t->pid);
        else if (loaded && !off)
            rc = cli_error(
                "process %ld runs memtrail's agent but has no control socket: it is ending (its exit or exec "
                "removes the socket first), or its agent runs untracked or could not open one (its stderr "
                "says why)",
                t->pid);
        else if (tried[1])
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

bool query_process_gone(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return true;
    bool ended = false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "State:", 6) == 0)
            ended = strchr(line, 'Z') != NULL || strchr(line, 'X') != NULL; /* zombie, dead */
    fclose(f);
    return ended;
}

/* After an exchange that failed (no answer, the connection refused or
 * reset, "busy"): whether the process ended meanwhile. A query's signal
 * ends a sleep the program may not resume, so it can exit before its
 * answer. The agent removes the socket file as the process leaves, before
 * its report at exit: then the end is waited for until the deadline.
 * Otherwise only briefly, for a process killed (the kernel closes its
 * descriptors a moment before the process is gone). */
static bool ended_while_asking(const struct query_target *t, int64_t deadline)
{
    struct stat st;
    bool leaving = lstat(t->sock, &st) != 0 && errno == ENOENT;
    int64_t until = leaving ? deadline : now_ms() + 200 < deadline ? now_ms() + 200 : deadline;
    for (;;) {
        if (query_process_gone(t->pid))
            return true;
        if (now_ms() >= until || (t->cancel && *t->cancel))
            return false;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* "process PID exited before answering", with t->failure -ESRCH, as for
 * a process gone before the query. */
static int ended(struct query_target *t)
{
    t->failure = -ESRCH;
    return cli_error("process %ld exited before answering", t->pid);
}

/* query_ask: the exchange, with t->failure set to why it failed. */
static int ask(struct query_target *t, const char *cmd, int timeout_ms, char **buf, size_t *len);

int query_ask(struct query_target *t, const char *cmd, int timeout_ms, char **buf, size_t *len)
{
    t->failure = 0;
    int rc = ask(t, cmd, timeout_ms, buf, len);
    if (rc != 0 && t->failure == 0)
        t->failure = -EIO;
    return rc;
}

static int ask(struct query_target *t, const char *cmd, int timeout_ms, char **buf, size_t *len)
{
    const char *sock = t->sock;
    *buf = NULL;
    *len = 0;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(sock) >= SUN_PATH_MAX)
        return cli_error("control socket path too long: %s", sock);
    strcpy(addr.sun_path, sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cli_error("socket: %s", strerror(errno));
    int64_t deadline = now_ms() + timeout_ms;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(fd);
        t->failure = -e;
        if ((e == ECONNREFUSED || e == ENOENT) && ended_while_asking(t, deadline))
            return ended(t);
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
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = STDIN_FILENO, .events = POLLIN}};
        int pr = left > 0 ? poll(p, t->watch_input ? 2 : 1, (int)left) : 0;
        if ((t->cancel && *t->cancel) || (pr > 0 && t->watch_input && !(p[0].revents & (POLLIN | POLLHUP)) &&
                                          (p[1].revents & (POLLIN | POLLHUP)))) {
            close(fd);
            t->failure = -ECANCELED;
            return CLI_FAILED;
        }
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            close(fd);
            t->failure = -ETIMEDOUT;
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
            if (*len == 0 && ended_while_asking(t, deadline))
                return ended(t);
            return cli_error("cannot read the answer of process %ld: %s", t->pid, strerror(e));
        }
        if (r == 0)
            break;
        *len += (size_t)r;
    }
    close(fd);
    (*buf)[*len] = '\0';
    if (*len == 0) {
        t->failure = -ENODATA;
        if (ended_while_asking(t, deadline))
            return ended(t);
        return cli_error("process %ld closed its control socket without answering", t->pid);
    }
    if (strncmp(*buf, "error busy", 10) == 0 && ended_while_asking(t, deadline))
        return ended(t); /* busy with its report at exit */
    if (strncmp(*buf, "error ", 6) == 0) {
        t->failure = -EPROTO;
        char *nl = strchr(*buf, '\n');
        if (nl)
            *nl = '\0';
        return cli_error("process %ld: %s", t->pid, *buf + 6);
    }
    return 0;
}

int query_parse_pid(const char *s, long *pid)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end || errno || v <= 0 || v > INT_MAX)
        return -1;
    *pid = v;
    return 0;
}

int query_open(long pid, const char *cmd_name, struct query_target *t)
{
    memset(t, 0, sizeof *t);
    t->pid = pid;
    int rc = read_uid(t);
    if (rc != 0)
        return rc;
    if (t->uid != (unsigned)geteuid()) {
        t->failure = -EPERM;
        return cli_error("process %ld belongs to uid %u; memtrail %s only talks to your own processes",
                         t->pid, t->uid, cmd_name);
    }
    rc = find_dirs(t);
    if (rc == 0)
        rc = find_socket(t, &t->sock);
    if (rc != 0)
        t->failure = -ENOENT;
    return rc;
}

void query_close(struct query_target *t)
{
    free(t->sock);
    for (int i = 0; i < t->ndirs; i++)
        free(t->dirs[i]);
    memset(t, 0, sizeof *t);
}

static int cmp_pid(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Adds the pids of the PID.sock entries of dir to *pids. */
static int list_dir(const char *dir, long **pids, size_t *n, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* no such directory: no process of ours used it */
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        long pid;
        char *dot = strchr(e->d_name, '.');
        if (!dot || strcmp(dot, ".sock") != 0)
            continue;
        *dot = '\0';
        int bad = query_parse_pid(e->d_name, &pid);
        *dot = '.';
        if (bad)
            continue;
        if (*n == *cap) {
            size_t ncap = *cap ? *cap * 2 : 64;
            long *more = realloc(*pids, ncap * sizeof **pids);
            if (!more) {
                rc = -ENOMEM;
                break;
            }
            *pids = more;
            *cap = ncap;
        }
        (*pids)[(*n)++] = pid;
    }
    closedir(d);
    return rc;
}

int query_list(long **pids, size_t *n)
{
    *pids = NULL;
    *n = 0;
    size_t cap = 0;
    unsigned uid = (unsigned)geteuid();
    char dirs[3][4200];
    int ndirs = 0;
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/' && strlen(xdg) < 4000)
        snprintf(dirs[ndirs++], sizeof dirs[0], "%s/memtrail", xdg);
    snprintf(dirs[ndirs++], sizeof dirs[0], "/run/user/%u/memtrail", uid);
    snprintf(dirs[ndirs++], sizeof dirs[0], "/tmp/memtrail-%u", uid);
    int rc = 0;
    for (int i = 0; i < ndirs && rc == 0; i++) {
        if (i == 1 && ndirs == 3 && strcmp(dirs[0], dirs[1]) == 0)
            continue;
        rc = list_dir(dirs[i], pids, n, &cap);
    }
    if (rc != 0) {
        free(*pids);
        *pids = NULL;
        *n = 0;
        return rc;
    }
    qsort(*pids, *n, sizeof **pids, cmp_pid);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (k == 0 || (*pids)[k - 1] != (*pids)[i])
            (*pids)[k++] = (*pids)[i];
    *n = k;
    return 0;
}

int query_read_report(const char *buf, size_t len, const char *name, struct report *r, char *err,
                      size_t errlen)
{
    FILE *f = fmemopen((void *)buf, len, "r");
    if (!f) {
        int e = errno;
        memset(r, 0, sizeof *r);
        snprintf(err, errlen, "fmemopen: %s", strerror(e));
        return -e;
    }
    int rc = report_read_stream(f, name, r, err, errlen);
    fclose(f);
    return rc;
}
