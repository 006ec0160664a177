/* http_server.c — the HTTP/1.1 server of `memtrail exporter` (see
 * http_server.h): parsing --listen, the listening socket, reading one
 * request per connection, the peer's uid, and writing the answer.
 *
 * One connection at a time, each with a deadline, so a client that sends
 * nothing holds the others back a few seconds at most; a scraper sends
 * its request at once. SIGINT and SIGTERM are blocked except inside
 * ppoll, so a signal is never lost between a check and the wait. */
#include "cli/http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define REQUEST_MAX 8192       /* request line and headers */
#define REFUSED_TIMEOUT_MS 200 /* a refused client's request */
#define CLIENT_TIMEOUT_MS 5000 /* to send the request, and to take the answer */

/* ---- --listen ------------------------------------------------------------ */

int http_parse_listen(const char *spec, struct sockaddr_storage *addr, socklen_t *len, char *err,
                      size_t errlen)
{
    const char *colon = strrchr(spec, ':');
    if (!colon) {
        snprintf(err, errlen, "'%s' is not HOST:PORT (e.g. 127.0.0.1:9464, [::1]:9464)", spec);
        return -EINVAL;
    }
    char host[256];
    size_t hlen = (size_t)(colon - spec);
    const char *h = spec;
    if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    } else if (memchr(spec, ':', hlen)) {
        snprintf(err, errlen, "'%s': an IPv6 address goes in brackets, as [::1]:9464", spec);
        return -EINVAL;
    }
    if (hlen >= sizeof host) {
        snprintf(err, errlen, "'%s': the host is too long", spec);
        return -EINVAL;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    const char *port = colon + 1;
    char *end;
    errno = 0;
    long p = strtol(port, &end, 10);
    if (!isdigit((unsigned char)port[0]) || *end || errno || p > 65535) {
        snprintf(err, errlen, "'%s': '%s' is not a port (0 to 65535)", spec, port);
        return -EINVAL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(hlen ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "'%s': cannot resolve '%s': %s", spec, host,
                 rc ? gai_strerror(rc) : "no address");
        return -EINVAL;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* "1.2.3.4:80" or "[::1]:80". */
static void addr_name(const struct sockaddr *sa, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        snprintf(out, cap, "%s:%u", host, port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        snprintf(out, cap, "[%s]:%u", host, port);
    }
}

int http_listen(struct http_server *s, const struct sockaddr_storage *addr, socklen_t len)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* A restart may bind again while old connections linger in TIME_WAIT;
     * a port another socket listens on stays refused. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)addr, len) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0)
        memcpy(&bound, addr, len);
    addr_name((struct sockaddr *)&bound, s->name, sizeof s->name);
    s->fd = fd;
    return 0;
}

/* ---- the peer's uid -------------------------------------------------------- */

/* An address as /proc/net/tcp{,6} prints it: each 32-bit word of the
 * address as the machine holds it, in hex, then ':' and the port. v4:
 * whether the address is IPv4 (a v4-mapped IPv6 address counts). */
static void proc_addr(const struct sockaddr *sa, bool want_v4, char *out, size_t cap)
{
    uint32_t w[4] = {0};
    unsigned port;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        port = ntohs(in->sin_port);
        if (want_v4) {
            snprintf(out, cap, "%08X:%04X", (unsigned)in->sin_addr.s_addr, port);
            return;
        }
        w[2] = htonl(0xffff); /* ::ffff:a.b.c.d */
        w[3] = in->sin_addr.s_addr;
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        port = ntohs(in6->sin6_port);
        memcpy(w, &in6->sin6_addr, sizeof w);
        if (want_v4) {
            snprintf(out, cap, "%08X:%04X", (unsigned)w[3], port);
            return;
        }
    }
    snprintf(out, cap, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2],
             (unsigned)w[3], port);
}

static bool is_v4(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return true;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
}

/* The uid of the socket `local` -> `remote` in table `path`. */
static int find_uid(const char *path, const char *local, const char *remote, unsigned *uid)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[512], l[64], r[64];
    unsigned st, u;
    int rc = -ENOENT;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %u", l, r, &st, &u) != 4)
            continue;
        if (strcasecmp(l, local) == 0 && strcasecmp(r, remote) == 0) {
            *uid = u;
            rc = 0;
            if (st != 6) /* not TIME_WAIT (uid 0 there): the live socket */
                break;
        }
    }
    fclose(f);
    return rc;
}

int http_peer_uid(const struct sockaddr *self, const struct sockaddr *peer, unsigned *uid)
{
    char local[64], remote[64];
    int rc = -ENOENT;
    /* An IPv4 client may have an IPv6 socket (v4-mapped), and the other way round. */
    if (is_v4(peer)) {
        proc_addr(peer, true, local, sizeof local);
        proc_addr(self, true, remote, sizeof remote);
        rc = find_uid("/proc/net/tcp", local, remote, uid);
    }
    if (rc == -ENOENT || rc == -EACCES) {
        proc_addr(peer, false, local, sizeof local);
        proc_addr(self, false, remote, sizeof remote);
        int rc6 = find_uid("/proc/net/tcp6", local, remote, uid);
        if (rc6 == 0 || rc == 0 || rc6 != -ENOENT)
            rc = rc6;
    }
    return rc;
}

/* ---- one connection ---------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for `events` on fd until the deadline. 1 ready, 0 timed out or a
 * signal came (the server then stops), -errno. */
static int wait_fd(int fd, short events, int64_t deadline, const sigset_t *open_mask)
{
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = events};
    struct timespec ts = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000};
    int n = ppoll(&p, 1, &ts, open_mask);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    return n > 0;
}

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig)
{
    stop_signal = sig;
}

/* Reads until the end of the headers. The length read, 0 when the client
 * closed or was too slow, -E2BIG when the headers are too long. */
static ssize_t read_request(int fd, char *buf, size_t cap, int64_t timeout_ms, const sigset_t *open_mask)
{
    int64_t deadline = now_ms() + timeout_ms;
    size_t len = 0;
    while (!stop_signal) {
        int w = wait_fd(fd, POLLIN, deadline, open_mask);
        if (w <= 0)
            return 0;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return (ssize_t)len;
        if (len == cap - 1)
            return -E2BIG;
    }
    return 0;
}

static void send_all(int fd, const char *p, size_t len, const sigset_t *open_mask)
{
    int64_t deadline = now_ms() + CLIENT_TIMEOUT_MS;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return;
        if (wait_fd(fd, POLLOUT, deadline, open_mask) <= 0)
            return;
    }
}

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

static void respond(int fd, int status, const char *type, const char *body, size_t len,
                    const sigset_t *open_mask)
{
    char head[512];
    int n =
        snprintf(head, sizeof head,
                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                 status, status_text(status), type, len, status == 405 ? "Allow: GET\r\n" : "");
    send_all(fd, head, (size_t)n, open_mask);
    send_all(fd, body, len, open_mask);
}

static void respond_text(int fd, int status, const char *text, const sigset_t *open_mask)
{
    respond(fd, status, "text/plain; charset=utf-8", text, strlen(text), open_mask);
}

/* "METHOD TARGET HTTP/1.x" into req. 0, or -EINVAL. */
static int parse_request_line(const char *buf, struct http_request *req)
{
    size_t n = strcspn(buf, "\r\n");
    char line[2200];
    if (n >= sizeof line)
        return -EINVAL;
    memcpy(line, buf, n);
    line[n] = '\0';
    char target[2100], version[16];
    if (sscanf(line, "%15s %2099s %15s", req->method, target, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0)
        return -EINVAL;
    if (target[0] != '/')
        return -EINVAL;
    char *q = strchr(target, '?');
    if (q)
        *q++ = '\0';
    if (strlen(target) >= sizeof req->path || (q && strlen(q) >= sizeof req->query))
        return -EINVAL;
    strcpy(req->path, target);
    strcpy(req->query, q ? q : "");
    return 0;
}

/* Is the client allowed: a socket of our uid on this machine (or, with
 * allow_remote, one this machine does not hold)? */
static bool client_allowed(const struct http_server *s, int fd)
{
    struct sockaddr_storage self, peer;
    socklen_t sl = sizeof self, pl = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&self, &sl) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
        return false;
    unsigned uid;
    int rc = http_peer_uid((struct sockaddr *)&self, (struct sockaddr *)&peer, &uid);
    if (rc == 0)
        return uid == s->uid;
    return rc == -ENOENT && s->allow_remote;
}

static void serve_connection(struct http_server *s, int fd, http_handler handler, void *ctx,
                             const sigset_t *open_mask)
{
    char *buf = malloc(REQUEST_MAX);
    if (!buf)
        return;
    /* Who it is comes first: a refused client gets a short wait for its
     * request (closing with unread bytes would reset the connection
     * before it reads the 403), not the full client timeout, so another
     * user cannot hold the exporter with slow connections. */
    bool allowed = client_allowed(s, fd);
    ssize_t n =
        read_request(fd, buf, REQUEST_MAX, allowed ? CLIENT_TIMEOUT_MS : REFUSED_TIMEOUT_MS, open_mask);
    struct http_request req;
    if (n != 0 && !allowed) {
        respond_text(fd, 403, "memtrail exporter: only its own user's clients are served\n", open_mask);
    } else if (n == -E2BIG) {
        respond_text(fd, 431, "request headers too large\n", open_mask);
    } else if (n > 0 && parse_request_line(buf, &req) != 0) {
        respond_text(fd, 400, "malformed request\n", open_mask);
    } else if (n > 0 && strcmp(req.method, "GET") != 0) {
        respond_text(fd, 405, "only GET is served\n", open_mask);
    } else if (n > 0) {
        char *body = NULL;
        size_t len = 0;
        const char *type = "text/plain; charset=utf-8";
        FILE *m = open_memstream(&body, &len);
        int status = m ? handler(&req, m, &type, ctx) : 500;
        if (!m || fclose(m) != 0)
            status = 500, len = 0;
        respond(fd, status, type, body ? body : "", len, open_mask);
        free(body);
    }
    free(buf);
}

int http_serve(struct http_server *s, http_handler handler, void *ctx)
{
    sigset_t block, open_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &open_mask);
    sigdelset(&open_mask, SIGINT);
    sigdelset(&open_mask, SIGTERM);
    struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: ppoll returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = 0;
    while (!stop_signal) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        int n = ppoll(&p, 1, NULL, &open_mask);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors or memory for now: the connection waits in the
                 * backlog; retry a little later instead of spinning */
                struct timespec pause = {0, 100 * 1000000};
                nanosleep(&pause, NULL);
                continue;
            }
            rc = -errno;
            break;
        }
        serve_connection(s, fd, handler, ctx, &open_mask);
        close(fd);
    }
    close(s->fd);
    s->fd = -1;
    return rc;
}

int http_query_param(const char *query, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *p = query; *p;) {
        size_t n = strcspn(p, "&");
        if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t vlen = n - klen - 1;
            if (vlen >= cap)
                return -ENOENT;
            memcpy(out, p + klen + 1, vlen);
            out[vlen] = '\0';
            return 0;
        }
        p += n + (p[n] == '&');
    }
    return -ENOENT;
}
