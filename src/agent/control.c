/* control.c — the live control socket (`memtrail query PID ...`).
 *
 * A tracking process listens on $XDG_RUNTIME_DIR/memtrail/PID.sock (or
 * /tmp/memtrail-UID/PID.sock) from start-up, and a forked child on its
 * own. By default no thread serves it: the socket is in O_ASYNC mode, so a
 * connecting client makes the kernel send the process a real-time signal,
 * whose handler accepts and answers on whichever thread it lands. Nothing
 * runs, and nothing costs, until someone asks; a second thread would make
 * glibc's malloc take its arena locks on every call (its single-thread
 * fast path ends), which costs malloc-heavy programs several percent.
 * Everything the handler does is async-signal-safe (the report writer is
 * built for signal handlers). query=thread serves from a thread instead:
 * every signal blocked, a small stack, inside the agent for its whole life
 * (what it allocates is untracked), for programs that block the signal or
 * take it for themselves. Either way serving never waits for a client to
 * speak: a connection is answered once its request line is in, and one
 * that sends nothing is closed after 2 s without holding the program (see
 * "connections waiting for their request"). A client sends one line and
 * gets the reply, then EOF:
 *
 *   summary   the report (docs/report-format.md), reason "query"
 *   detail    the same with detail mode's module and site lines
 *   baseline  keeps the report as the baseline and replies with it
 *   diff      the baseline report, then the current one
 *   sessions  the event sessions' view and their targets' data, as JSON
 *   exit      the report at exit, now: the process is leaving by a raw
 *             exit_group that memtrail run holds (Go programs)
 *   start detail | start trace [PATH] | stop
 *             recording on demand (record.c): "ok ..." or "error ...";
 *             the process's exit waits for one under way (its answer
 *             included)
 *   other     "error unknown command '...'"
 *
 * Peers of another uid get "error permission denied". Serving never calls
 * malloc: reports are rendered into static buffers, so a query answers
 * even when the heap is exhausted. The protocol is in docs/cli.md. */
#include <dirent.h> /* DT_* only: the directory is read with getdents64 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h> /* rename only */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/fdguard.h"
#include "agent/record.h"
#include "agent/site.h"
#include "common/out.h"
#include "common/safe_file.h"
#include "xe/xe.h"

int mt_control_enabled = 1;

#define SUN_PATH_MAX ((int)sizeof(((struct sockaddr_un *)0)->sun_path))
#define REPLY_MAX (64 * 1024)

static struct {
    char dir[SUN_PATH_MAX];
    char path[SUN_PATH_MAX];
    uid_t uid;             /* owner of the socket; peers must match */
    _Atomic int listen_fd; /* -1: none, or no longer ours */
    _Atomic int conn_fd;   /* the connection being served, or -1 */
    dev_t conn_dev;        /* that connection (fstat at accept) */
    ino_t conn_ino;
    _Atomic pid_t owner; /* the process that created the socket file (0: none) */
    dev_t sock_dev;      /* the listening socket (fstat): is the fd still ours? */
    ino_t sock_ino;
    dev_t file_dev; /* the socket file (lstat): remove only that */
    ino_t file_ino;
} ctl = {.listen_fd = -1, .conn_fd = -1};

/* Serving from the signal handler (1) or the thread (0): what a request
 * may do depends on it (record.c). */
static int serving_async;

/* Only the server thread touches these. */
static long baseline_len;
/* The baseline is kept whole: in a static buffer, or, once a report
 * outgrew it (span histograms can run to megabytes), in a mapping of the
 * agent's own, doubled until the report fits. */
#define BASELINE_MAX (64u << 20)
static char baseline_static[REPLY_MAX];
static char *baseline = baseline_static;
static size_t baseline_cap = sizeof baseline_static;
static char reply[REPLY_MAX];

/* One line on stderr; the program goes on without a control socket. */
static void complain(const char *what, const char *path, int err)
{
    char buf[512];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, -1);
    mt_out_str(&o, "no control socket ('memtrail query' cannot reach this process): ");
    mt_out_str(&o, what);
    if (path) {
        mt_out_char(&o, ' ');
        mt_out_str(&o, path);
    }
    if (err) {
        const char *s = strerrordesc_np(err);
        mt_out_str(&o, ": ");
        mt_out_str(&o, s ? s : "error");
    }
    mt_say(mt_out_cstr(&o));
}

/* ---- where the socket lives -------------------------------------------- */

/* $XDG_RUNTIME_DIR/memtrail when XDG_RUNTIME_DIR is absolute and a
 * directory of ours (and the socket path fits), else /tmp/memtrail-UID. */
static void pick_dir(void)
{
    mt_out o;
    mt_out_init(&o, ctl.dir, sizeof ctl.dir, -1);
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    /* room for "/memtrail/" + 20 digits + ".sock" */
    if (x && x[0] == '/' && strlen(x) + 10 + 20 + 5 < sizeof ctl.dir && stat(x, &st) == 0 &&
        S_ISDIR(st.st_mode) && st.st_uid == ctl.uid) {
        mt_out_str(&o, x);
        mt_out_str(&o, "/memtrail");
    } else {
        mt_out_str(&o, "/tmp/memtrail-");
        mt_out_u64(&o, ctl.uid);
    }
    mt_out_cstr(&o);
}

/* Creates the directory (0700) if needed and checks it is a real directory
 * of ours that nobody else can enter. 0 or -1 after saying why. */
static int check_dir(void)
{
    if (mkdir(ctl.dir, 0700) == 0) {
        chmod(ctl.dir, 0700); /* in case the umask took bits we need */
    } else if (errno != EEXIST) {
        complain("cannot create", ctl.dir, errno);
        return -1;
    }
    struct stat st;
    if (lstat(ctl.dir, &st) != 0) {
        complain("cannot check", ctl.dir, errno);
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != ctl.uid || (st.st_mode & 077) != 0) {
        complain("not a private directory of ours (owned by us, mode 0700):", ctl.dir, 0);
        return -1;
    }
    return 0;
}

static int sun_addr(struct sockaddr_un *addr, const char *path)
{
    *addr = (struct sockaddr_un){.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof addr->sun_path)
        return -1;
    memcpy(addr->sun_path, path, n + 1);
    return 0;
}

/* Does a process listen at path? One with our pid can only be in another
 * pid namespace that shares the directory; a socket nobody listens on is
 * left by a dead process that had our pid. */
static int live_at(const char *path)
{
    struct sockaddr_un addr;
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || sun_addr(&addr, path) < 0)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    close(fd);
    return live;
}

/* ---- sockets left by dead processes --------------------------------------- */

/* The pid in a name of ours, "PID.sock" or "PID.sock.new" (decimal, no
 * leading zero), or 0 for any other name. */
static pid_t socket_pid(const char *name)
{
    int64_t v = 0;
    size_t i = 0;
    if (name[0] < '1' || name[0] > '9')
        return 0;
    for (; name[i] >= '0' && name[i] <= '9'; i++) {
        v = v * 10 + (name[i] - '0');
        if (v > 0x7fffffff)
            return 0;
    }
    if (strcmp(name + i, ".sock") != 0 && strcmp(name + i, ".sock.new") != 0)
        return 0;
    return (pid_t)v;
}

/* Is the entry name of the directory dfd a socket of a process that is gone?
 * Named by our pattern, a socket (not a link) of our uid, its pid not
 * running here, and nobody listening on it (a process in another pid
 * namespace sharing the directory would be). */
static int stale(int dfd, const char *name, pid_t me)
{
    pid_t pid = socket_pid(name);
    if (pid <= 0 || pid == me || kill(pid, 0) == 0 || errno != ESRCH)
        return 0;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != ctl.uid)
        return 0;
    char path[SUN_PATH_MAX];
    mt_out o;
    mt_out_init(&o, path, sizeof path, -1);
    mt_out_str(&o, ctl.dir);
    mt_out_char(&o, '/');
    mt_out_str(&o, name);
    mt_out_cstr(&o);
    return o.err == 0 && !live_at(path);
}

/* Removes the sockets that processes killed by a signal (or exec'd into an
 * untracked program) left in our directory; they would pile up. Reads the
 * directory with getdents64 (opendir allocates) and looks at 4096 entries
 * at most. A pid reused between the check and the unlink could lose a
 * socket made in those microseconds; its process would then not answer
 * queries, nothing worse. */
static void remove_stale(void)
{
    struct dirent64_raw {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
    };
    _Alignas(8) char buf[4096];
    int dfd = open(ctl.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    pid_t me = getpid();
    int budget = 4096;
    long n;
    while (budget > 0 && (n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n && budget > 0; budget--) {
            struct dirent64_raw *d = (struct dirent64_raw *)(buf + off);
            off += d->d_reclen;
            if ((d->d_type == DT_SOCK || d->d_type == DT_UNKNOWN) && stale(dfd, d->d_name, me))
                unlinkat(dfd, d->d_name, 0);
        }
    }
    close(dfd);
}

/* Binds PID.sock.new, makes it 0600, listens, and only then renames it to
 * PID.sock (replacing a stale one): a client never finds a socket that
 * refuses connections because it is not listening yet. */
static int open_socket(void)
{
    static char tmp[SUN_PATH_MAX + 8];
    ctl.uid = geteuid();
    pick_dir();
    if (check_dir() < 0)
        return -1;
    remove_stale();
    mt_out o;
    mt_out_init(&o, ctl.path, sizeof ctl.path, -1);
    mt_out_str(&o, ctl.dir);
    mt_out_char(&o, '/');
    mt_out_u64(&o, (uint64_t)getpid());
    mt_out_str(&o, ".sock");
    mt_out_cstr(&o);
    mt_out_init(&o, tmp, sizeof tmp, -1);
    mt_out_str(&o, ctl.path);
    mt_out_str(&o, ".new");
    mt_out_cstr(&o);

    struct sockaddr_un addr;
    if (sun_addr(&addr, tmp) < 0) {
        complain("path too long:", tmp, 0);
        return -1;
    }
    if (live_at(ctl.path)) {
        complain("another live process (in another pid namespace?) serves", ctl.path, 0);
        return -1;
    }
    struct stat st, fst;
    if (lstat(tmp, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(tmp); /* a dead process with our pid was setting up */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* At the descriptor limit (a fork child of a program that reached
     * it: the parent's socket number it closed may be above the limit),
     * a reserve descriptor's number, kept for the child's life. */
    if (fd < 0 && errno == EMFILE && mt_rlimit_lend())
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        complain("socket", NULL, errno);
        return -1;
    }
    fd = mt_file_fd_kept_high(fd); /* kept for the process's life: the low numbers stay the program's */
    if (fd < 0) {
        complain("the descriptor limit (ulimit -n) is too low to keep one out of the program's way", NULL, 0);
        return -1;
    }
    /* The file takes the socket inode's mode (less the umask) at bind. */
    fchmod(fd, 0600);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        complain("cannot bind", tmp, errno);
        close(fd);
        return -1;
    }
    if (chmod(tmp, 0600) != 0 || lstat(tmp, &st) != 0 || fstat(fd, &fst) != 0 || listen(fd, 8) != 0 ||
        rename(tmp, ctl.path) != 0) {
        complain("cannot set up", tmp, errno);
        unlink(tmp);
        close(fd);
        return -1;
    }
    ctl.file_dev = st.st_dev;
    ctl.file_ino = st.st_ino;
    ctl.sock_dev = fst.st_dev;
    ctl.sock_ino = fst.st_ino;
    atomic_store(&ctl.owner, getpid());
    atomic_store(&ctl.listen_fd, fd);
    mt_fd_keep((int *)&ctl.listen_fd);
    return 0;
}

/* ---- serving ------------------------------------------------------------ */

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void send_str(int fd, const char *s)
{
    send_all(fd, s, strlen(s));
}

/* The current report, from a static buffer; one that does not fit goes
 * straight to the socket instead. */
static void send_current(int fd)
{
    long n = mt_report_to_mem(reply, sizeof reply, "query");
    if (n >= 0)
        send_all(fd, reply, (size_t)n);
    else if (n == -ENOSPC)
        mt_report_to_fd(fd, "query");
    else
        send_str(fd, "error busy: another report is being written; try again\n");
}

/* A bigger baseline buffer: 0, or -ENOMEM (the old one stays). */
static int grow_baseline(void)
{
    size_t cap = baseline_cap * 2;
    mt_agent_enter(); /* the agent's own mapping */
    char *p = mt_os_alloc(cap);
    if (p && baseline != baseline_static && munmap(baseline, baseline_cap) == 0)
        atomic_fetch_sub(&mt_glob[MT_CAT_OVERHEAD].live_bytes, (int64_t)baseline_cap);
    mt_agent_leave();
    if (!p)
        return -ENOMEM;
    baseline = p;
    baseline_cap = cap;
    return 0;
}

/* The current report as the baseline: its length or a negative errno. */
static long take_baseline(void)
{
    for (;;) {
        long n = mt_report_to_mem(baseline, baseline_cap, "baseline");
        if (n != -ENOSPC || baseline_cap >= BASELINE_MAX || grow_baseline() != 0)
            return n;
    }
}

/* Answers the request cmd (its line, without the newline). */
static void serve_one(int fd, const char *cmd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != ctl.uid) {
        send_str(fd, "error permission denied\n");
        return;
    }
    if (strcmp(cmd, "summary") == 0) {
        send_current(fd);
    } else if (strcmp(cmd, "detail") == 0) {
        /* Sites can be many: straight to the socket, no buffer to fit. */
        if (mt_report_detail_to_fd(fd, "query") < 0)
            send_str(fd, "error busy: another report is being written; try again\n");
    } else if (strcmp(cmd, "baseline") == 0) {
        long n = take_baseline();
        baseline_len = n >= 0 ? n : 0; /* a report that failed left the buffer half written */
        if (n >= 0) {
            send_all(fd, baseline, (size_t)n);
        } else if (n == -ENOSPC) {
            send_str(fd, "error the report is too large for the baseline buffer (64 MiB)\n");
        } else {
            send_str(fd, "error busy: another report is being written; try again\n");
        }
    } else if (strcmp(cmd, "diff") == 0) {
        if (baseline_len <= 0) {
            send_str(fd, "error no baseline; run 'memtrail query PID baseline' first\n");
            return;
        }
        long n = mt_report_to_mem(reply, sizeof reply, "query");
        if (n < 0 && n != -ENOSPC) {
            send_str(fd, "error busy: another report is being written; try again\n");
            return;
        }
        send_all(fd, baseline, (size_t)baseline_len);
        if (n >= 0)
            send_all(fd, reply, (size_t)n);
        else
            mt_report_to_fd(fd, "query");
    } else if (strcmp(cmd, "exit") == 0) {
        /* The process is leaving by a raw exit_group (Go's runtime), held
         * by memtrail run, its parent, until the report at exit is out. */
        send_str(fd,
                 mt_report_at_raw_exit() == 0 ? "ok\n" : "error the report at exit could not be written\n");
    } else if (strncmp(cmd, "start ", 6) == 0 || strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0) {
        /* Recording on demand (record.c), which sends its answer itself:
         * the process's exit waits for that. */
        mt_rec_request(cmd, serving_async, fd);
    } else if (strcmp(cmd, "sessions") == 0) {
        /* Targets' data can be large (a ring buffer's events): streamed to
         * the socket as it is formatted, through the reply buffer. */
        mt_out o;
        mt_out_init_socket(&o, reply, sizeof reply, fd);
        xe_view_json(&o, 1);
        mt_out_flush(&o);
    } else {
        char msg[256];
        mt_out o;
        mt_out_init(&o, msg, sizeof msg, -1);
        mt_out_str(&o, "error unknown command '");
        for (size_t i = 0; cmd[i] && i < 64; i++)
            mt_out_char(&o, cmd[i] >= 0x20 && cmd[i] < 0x7f ? cmd[i] : '?');
        mt_out_str(&o, "' (accepted: summary, detail, baseline, diff, sessions, exit, start, stop)\n");
        send_all(fd, o.buf, o.len);
    }
}

/* Whether fd is still the file noted as dev/ino: the program may have
 * closed it (closefrom, or behind the hooks) and put another file there. */
/* Is the listening descriptor still the socket we made? */
static int still_ours(int fd)
{
    return mt_file_fd_is(fd, ctl.sock_dev, ctl.sock_ino);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- connections waiting for their request ------------------------------- */

/* Serving never waits for a client to speak. A connection is accepted at
 * once and kept here until its request line is in; only then is it
 * answered. A client that connects and sends nothing costs the program an
 * accept and a recv, not a wait: five silent clients used to hold a
 * single-threaded program 2 s each. Under query=on the connection is armed
 * like the listening socket, so its data raises the signal again; under
 * query=thread the thread polls it. One that has not sent its line
 * PENDING_TTL_MS after connecting, or whose slot a newer connection needs,
 * is closed with no reply. The server alone touches the table (the
 * handler that holds `serving`, or the thread). */
#define PENDING_MAX 8
#define PENDING_TTL_MS 2000
#define REQUEST_MAX (MT_PATH_MAX + 32) /* start trace PATH */

struct pending {
    int used;
    int fd;
    dev_t dev; /* the connection (fstat): is the fd still ours? */
    ino_t ino;
    int64_t since_ms;
    size_t len;
    char req[REQUEST_MAX];
};
static struct pending pending[PENDING_MAX];
static int ctl_signal; /* query=on: the real-time signal the sockets raise */

static int conn_ours(const struct pending *p)
{
    return mt_file_fd_is(p->fd, p->dev, p->ino);
}

/* Closes a connection of ours. A connection accepted at the descriptor
 * limit took a reserve descriptor's number: the reserve takes it back,
 * unless a report is under way (its numbers are the report's until it
 * ends, and it takes the reserve back itself). */
static void close_conn(int fd)
{
    close(fd);
    mt_rlimit_give_back();
}

/* Forgets a connection, closing it if the fd is still ours (no reply). */
static void drop(struct pending *p)
{
    if (conn_ours(p))
        close_conn(p->fd);
    p->used = 0;
}

/* Makes fd raise ctl_signal when it can be read (query=on). */
static int arm(int fd)
{
    struct f_owner_ex owner = {.type = F_OWNER_PID, .pid = getpid()};
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, ctl_signal) != 0 ||
        fcntl(fd, F_SETFL, fl | O_ASYNC | O_NONBLOCK) != 0)
        return -1;
    return 0;
}

/* Accepts every waiting connection into the table, evicting the oldest
 * when it is full. 0, or -1 when accept fails for want of a resource (the
 * connection stays queued; the caller must not spin on it). */
static int accept_all(int lfd, int async)
{
    int lent = 0;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            /* At the descriptor limit (a program leaking descriptors is
             * one worth asking): a reserve descriptor's number for this
             * connection, once a pass. */
            if (errno == EMFILE && !lent && (lent = mt_rlimit_lend()))
                continue;
            int rc = errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
            if (lent) /* unused if another thread took the number first */
                mt_rlimit_give_back();
            return rc;
        }
        c = mt_file_fd_high(c); /* away from the program's numbers, as the listener */
        struct stat st;
        if (fstat(c, &st) != 0 || (async && arm(c) < 0)) {
            close_conn(c);
            continue;
        }
        struct pending *slot = NULL;
        for (int i = 0; i < PENDING_MAX && !slot; i++)
            if (!pending[i].used)
                slot = &pending[i];
        if (!slot) {
            slot = &pending[0];
            for (int i = 1; i < PENDING_MAX; i++)
                if (pending[i].since_ms < slot->since_ms)
                    slot = &pending[i];
            drop(slot);
        }
        *slot =
            (struct pending){.used = 1, .fd = c, .dev = st.st_dev, .ino = st.st_ino, .since_ms = now_ms()};
    }
}

/* Reads what the client has sent, without waiting. 1: the request line is
 * complete (a newline, the client's end, or the buffer full), in p->req
 * without its newline; 0: not yet; -1: the connection failed, or the client
 * left having sent nothing. */
static int read_request(struct pending *p)
{
    for (;;) {
        if (p->len == REQUEST_MAX - 1)
            break;
        ssize_t r = recv(p->fd, p->req + p->len, REQUEST_MAX - 1 - p->len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        if (r == 0) {
            if (p->len == 0)
                return -1;
            break;
        }
        char *nl = memchr(p->req + p->len, '\n', (size_t)r);
        p->len += (size_t)r;
        if (nl) {
            p->len = (size_t)(nl - p->req);
            break;
        }
    }
    if (p->len > 0 && p->req[p->len - 1] == '\r')
        p->len--;
    p->req[p->len] = '\0';
    return 1;
}

/* Answers a connection whose request is in, and closes it. */
static void serve_conn(struct pending *p)
{
    static char cmd[REQUEST_MAX]; /* one connection at a time; not on a signal handler's stack */
    int c = p->fd;
    memcpy(cmd, p->req, p->len + 1);
    p->used = 0;
    ctl.conn_dev = p->dev;
    ctl.conn_ino = p->ino;
    atomic_store(&ctl.conn_fd, c);
    /* Blocking for the reply (bounded by the send timeout); no more signals. */
    int fl = fcntl(c, F_GETFL);
    if (fl >= 0)
        fcntl(c, F_SETFL, fl & ~(O_ASYNC | O_NONBLOCK));
    struct timeval snd = {.tv_sec = 5};
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
    serve_one(c, cmd);
    shutdown(c, SHUT_WR);
    char drain[256]; /* whatever else the client sent, so close does not reset it */
    while (recv(c, drain, sizeof drain, MSG_DONTWAIT) > 0) {
    }
    atomic_store(&ctl.conn_fd, -1);
    close_conn(c);
}

/* Accepts what is waiting and answers every connection whose request is
 * in; never waits for a client. Returns accept_all's result. */
static int serve_ready(int lfd, int async)
{
    serving_async = async;
    int rc = accept_all(lfd, async);
    int64_t now = now_ms();
    for (int i = 0; i < PENDING_MAX; i++) {
        struct pending *p = &pending[i];
        if (!p->used)
            continue;
        if (!conn_ours(p)) { /* the program closed it: its fd is not ours to touch */
            p->used = 0;
            continue;
        }
        int r = read_request(p);
        if (r > 0)
            serve_conn(p);
        else if (r < 0 || now - p->since_ms >= PENDING_TTL_MS)
            drop(p);
    }
    return rc;
}

/* The descriptors to watch: the listener (unless accept is stuck) and the
 * connections waiting for their request. Returns how many. */
static int watch_list(struct pollfd *fds, int lfd, int stuck)
{
    int n = 0;
    if (!stuck)
        fds[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < PENDING_MAX; i++)
        if (pending[i].used)
            fds[n++] = (struct pollfd){.fd = pending[i].fd, .events = POLLIN};
    return n;
}

/* ---- signal-driven serving (query=on) ------------------------------------ */

static atomic_flag serving = ATOMIC_FLAG_INIT;

static void on_connect(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    int saved_errno = errno;
    mt_agent_enter();
    int lfd = atomic_load(&ctl.listen_fd);
    /* The signal may land on several threads at once: one serves, and
     * looks again after letting go, so no connection is left waiting. */
    while (lfd >= 0 && still_ours(lfd) && !atomic_flag_test_and_set(&serving)) {
        struct pollfd fds[1 + PENDING_MAX];
        int n = watch_list(fds, lfd, serve_ready(lfd, 1) < 0);
        atomic_flag_clear(&serving);
        if (n == 0 || poll(fds, (nfds_t)n, 0) <= 0)
            break;
    }
    mt_agent_leave();
    errno = saved_errno;
}

/* Arms the listening socket to signal us on each connection. Fails (and
 * the caller falls back to a thread) when the program already handles the
 * signal. */
static int start_async(int lfd)
{
    if (!ctl_signal) {
        struct sigaction old, sa;
        int sig = SIGRTMAX - 3;
        if (sigaction(sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            return -1;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_connect;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&sa.sa_mask);
        if (sigaction(sig, &sa, NULL) != 0)
            return -1;
        ctl_signal = sig;
    }
    return arm(lfd);
}

/* ---- thread serving (query=thread) ---------------------------------------- */

static void *serve(void *unused)
{
    (void)unused;
    mt_t.in_agent = 1;
    int lfd = atomic_load(&ctl.listen_fd);
    int fl = fcntl(lfd, F_GETFL);
    if (fl >= 0)
        fcntl(lfd, F_SETFL, fl | O_NONBLOCK);
    /* loaded again each pass: the agent's guard may move it (fdguard.h) */
    while (still_ours((lfd = atomic_load(&ctl.listen_fd)))) {
        int stuck = serve_ready(lfd, 0) < 0;
        /* Sleep until something comes, the oldest waiting connection is
         * due to be closed, or (accept lacking a resource) a while. */
        int timeout = stuck ? 100 : -1;
        int64_t now = now_ms();
        for (int i = 0; i < PENDING_MAX; i++) {
            if (!pending[i].used)
                continue;
            int64_t left = pending[i].since_ms + PENDING_TTL_MS - now;
            left = left < 0 ? 0 : left + 1;
            if (timeout < 0 || left < timeout)
                timeout = (int)left;
        }
        struct pollfd fds[1 + PENDING_MAX];
        int n = watch_list(fds, lfd, stuck);
        poll(fds, (nfds_t)n, timeout);
    }
    /* The descriptor is no longer ours: leave it alone. The thread stays
     * (parked; its memory came from the real allocator and must not be
     * freed through ours). */
    atomic_store(&ctl.listen_fd, -1);
    for (;;)
        pause();
    return NULL;
}

static int start_thread(void)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int rc = EINVAL;
    sigfillset(&all);
    /* The thread inherits this mask: it never receives the program's
     * signals, not even between its creation and its first instruction. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    static const size_t stacks[] = {64 * 1024, 256 * 1024, 1024 * 1024};
    for (size_t i = 0; i < sizeof stacks / sizeof stacks[0] && rc == EINVAL; i++) {
        if (pthread_attr_init(&attr) != 0)
            break;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, stacks[i]); /* large static TLS needs more */
        rc = pthread_create(&t, &attr, serve, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        complain("cannot start its thread", NULL, rc);
    return rc == 0 ? 0 : -1;
}

/* ---- life --------------------------------------------------------------- */

static void remove_file(void)
{
    struct stat st;
    if (lstat(ctl.path, &st) == 0 && st.st_dev == ctl.file_dev && st.st_ino == ctl.file_ino)
        unlink(ctl.path);
}

void mt_control_start(void)
{
    if (!mt_control_enabled || !mt_tracking || atomic_load(&ctl.listen_fd) >= 0)
        return;
    int saved_errno = errno;
    mt_agent_enter();
    /* Trace mode has a thread of its own already (the trace's writer),
     * so a serving thread costs glibc's malloc nothing more, and it can
     * start and stop traces on demand (record.c), which a handler cannot. */
    int by_signal = mt_control_enabled == MT_QUERY_SIGNAL && !mt_site_opt.trace;
    if (open_socket() == 0 && (!by_signal || start_async(atomic_load(&ctl.listen_fd)) < 0) &&
        start_thread() < 0) {
        atomic_store(&ctl.owner, 0);
        remove_file();
        close(atomic_exchange(&ctl.listen_fd, -1));
    }
    if (atomic_load(&ctl.listen_fd) < 0) /* a number lent for it (open_socket) comes back */
        mt_rlimit_give_back();
    mt_agent_leave();
    errno = saved_errno;
}

void mt_control_after_fork_child(int start)
{
    int saved_errno = errno;
    /* The parent's socket and connection are not the child's business.
     * Each is closed only if that number still is it: a program that
     * closed it behind the hooks (close_range by syscall) may have the
     * number for a file of its own. */
    int fd = atomic_exchange(&ctl.listen_fd, -1);
    if (fd >= 0 && still_ours(fd))
        close(fd);
    fd = atomic_exchange(&ctl.conn_fd, -1);
    if (fd >= 0 && mt_file_fd_is(fd, ctl.conn_dev, ctl.conn_ino))
        close(fd);
    for (int i = 0; i < PENDING_MAX; i++)
        if (pending[i].used)
            drop(&pending[i]);
    /* Only the forking thread lives on here: no handler is serving. */
    atomic_flag_clear(&serving);
    atomic_store(&ctl.owner, 0);
    baseline_len = 0;
    errno = saved_errno;
    if (start)
        mt_control_start();
}

/* The process is ending: a query being answered is cut short, so that the
 * report buffers it holds are free at once for the last report (a client
 * that stopped reading would hold them for the send timeout, 5 s a
 * send). shutdown() and fstat() are async-signal-safe; the number is
 * checked to still be that connection. */
void mt_control_cut_query(void)
{
    if (atomic_load(&ctl.owner) != getpid()) /* a vfork child: the parent's */
        return;
    int saved_errno = errno;
    int fd = atomic_load(&ctl.conn_fd);
    if (fd >= 0 && mt_file_fd_is(fd, ctl.conn_dev, ctl.conn_ino))
        shutdown(fd, SHUT_RDWR);
    errno = saved_errno;
}

/* The process is leaving (exit, _exit): no client finds the socket from
 * here on (one that looks is told the process is leaving), a start or
 * stop under way ends and sends its answer (record.c), and then the rest
 * of the shutdown cuts whatever is still being answered. */
void mt_control_leave(void)
{
    if (atomic_load(&ctl.owner) != getpid()) /* a vfork child: the parent's */
        return;
    int saved_errno = errno;
    remove_file();
    errno = saved_errno;
    mt_rec_hold_switches();
    mt_control_shutdown();
}

void mt_control_shutdown(void)
{
    /* getpid() differs in a vfork child, which shares our memory: it must
     * neither remove the parent's socket nor write anything here. */
    pid_t me = getpid();
    if (atomic_load(&ctl.owner) != me)
        return;
    mt_control_cut_query();
    int saved_errno = errno;
    if (atomic_compare_exchange_strong(&ctl.owner, &me, 0))
        remove_file();
    errno = saved_errno;
}
