/* http_server.h — the small HTTP/1.1 server of `memtrail exporter`
 * (http_server.c): one listening TCP socket, one request per connection,
 * answered in turn (no threads), GET only, until SIGINT or SIGTERM.
 *
 * TCP has no SO_PEERCRED: the uid of a client on this machine is read
 * from /proc/net/tcp (or tcp6), the line of the client's own socket (its
 * local address is our peer's, its remote address our own). A client of
 * another uid gets 403; so does one whose socket is not found there (on
 * another host, or in another network namespace) unless remote clients are
 * allowed.
 *
 * CLI-side code: allocates freely. Functions return 0 or -errno. */
#ifndef MT_CLI_HTTP_SERVER_H
#define MT_CLI_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

struct http_server {
    int fd;            /* the listening socket */
    char name[128];    /* the address bound, "127.0.0.1:9464" or "[::1]:9464" */
    unsigned uid;      /* the clients' uid allowed (ours) */
    bool allow_remote; /* serve clients whose uid cannot be known */
};

/* "HOST:PORT" (HOST an IPv4 address, [IPv6 address] or a name; an empty
 * HOST is every address; PORT 0 to 65535, 0 picks a free one) into an
 * address. 0, or -EINVAL with why in err. */
int http_parse_listen(const char *spec, struct sockaddr_storage *addr, socklen_t *len, char *err,
                      size_t errlen);

/* Binds and listens on addr. 0, or -errno (-EADDRINUSE: the port is in
 * use). s->name says where, with the port the kernel picked for 0. */
int http_listen(struct http_server *s, const struct sockaddr_storage *addr, socklen_t len);

struct http_request {
    char method[16];
    char path[1024];  /* the target up to '?' */
    char query[1024]; /* after '?', "" when none */
};

/* Answers one GET request: writes the body to `body` and returns the
 * status (200, 404, ...); *type is the body's Content-Type (default
 * text/plain; charset=utf-8). */
typedef int (*http_handler)(const struct http_request *req, FILE *body, const char **type, void *ctx);

/* Serves requests until SIGINT or SIGTERM (then 0), or -errno when the
 * listening socket fails. Malformed requests get 400, methods other than
 * GET 405, clients of another uid 403, without calling the handler. */
int http_serve(struct http_server *s, http_handler handler, void *ctx);

/* The value of `key` in a query string ("pid=4&x=y"), copied to out
 * (percent-decoding not needed for the values served). 0, or -ENOENT. */
int http_query_param(const char *query, const char *key, char *out, size_t cap);

/* The uid owning the TCP client socket whose local address is `peer` and
 * remote address `self`, from /proc/net/tcp and tcp6. 0 and *uid,
 * -ENOENT when no socket of this network namespace matches, -errno. */
int http_peer_uid(const struct sockaddr *self, const struct sockaddr *peer, unsigned *uid);

#endif /* MT_CLI_HTTP_SERVER_H */
