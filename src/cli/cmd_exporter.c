/* cmd_exporter.c — `memtrail exporter [--listen HOST:PORT] [--timeout
 * SECONDS] [--allow-remote]`: serves, over HTTP (http_server.c), the
 * Prometheus metrics of every process of this user that runs the agent
 * (`/metrics`, report/metrics.h) and the live detail profile of one of
 * them as gzip'ed pprof (`/debug/pprof/heap?pid=N`, export/export.h), the
 * pages `go tool pprof`, Pyroscope and Parca pull.
 *
 * Each request asks the processes afresh over their control sockets
 * (query_client.c), so the exporter holds nothing a restart loses. */
#include "cli/cli.h"
#include "cli/http_server.h"
#include "export/export.h"
#include "report/detail.h"
#include "report/metrics.h"
#include "report/report.h"
#include "symbol/symbol.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char exporter_about[] =
    "Serve, over HTTP, the memory of every process of yours that memtrail\n"
    "tracks (found through their control sockets), for Prometheus and the\n"
    "profilers that pull pprof:\n"
    "\n"
    "  /metrics                 every process's summary in Prometheus's text\n"
    "                           format, labelled pid and program (docs/metrics.md)\n"
    "  /debug/pprof/heap?pid=N  process N's live allocation sites as a gzip'ed\n"
    "                           pprof profile (the process must run in detail mode)\n"
    "\n"
    "Each request asks the processes then; nothing is kept between requests.\n"
    "Runs until SIGINT or SIGTERM.\n";

static const struct cli_command exporter_cmd = {
    .name = "exporter",
    .usage = "usage: memtrail exporter [--listen HOST:PORT] [--timeout SECONDS] [--allow-remote]\n",
    .about = exporter_about,
    .more = "Only your own processes are asked, and only clients of your own uid on this\n"
            "machine are served (others get 403); --allow-remote also serves clients\n"
            "whose uid this machine cannot tell (another host). GET only.\n",
    .max_args = 0,
    .extra = "unexpected argument '%s'",
};

struct exporter {
    int timeout_ms;
};

/* Why process t.pid could not be asked, in words; "" for the failures
 * that mean the process is not there to ask (gone, another user's pid
 * now, no agent, a stale socket), which /metrics skips silently. */
static const char *failure_text(const struct query_target *t, const char *reply, int timeout_ms, char *buf,
                                size_t cap)
{
    switch (t->failure) {
    case -ESRCH:
    case -EPERM:
    case -ENOENT:
    case -ECONNREFUSED: return "";
    case -ETIMEDOUT:
        snprintf(buf, cap, "did not answer within %d seconds (is it stopped?)", timeout_ms / 1000);
        return buf;
    case -EPROTO: snprintf(buf, cap, "%s", reply && strlen(reply) > 6 ? reply + 6 : "refused"); return buf;
    default: snprintf(buf, cap, "cannot be asked: %s", strerror(-t->failure)); return buf;
    }
}

/* Asks process pid for its report (request "summary\n" or "detail\n").
 * 0 and *r; otherwise t->failure says why and *reply holds the answer. */
static int ask_report(const struct exporter *x, long pid, const char *request, struct query_target *t,
                      char **reply, struct report *r, char *err, size_t errlen)
{
    size_t len = 0;
    *reply = NULL;
    memset(r, 0, sizeof *r);
    /* the caller set cli_quiet: the reasons are t->failure's, told as each page wants */
    int rc = query_open(pid, "exporter", t);
    if (rc == 0)
        rc = query_ask(t, request, x->timeout_ms, reply, &len);
    if (rc != 0)
        return -1;
    char name[64];
    snprintf(name, sizeof name, "process %ld", pid);
    if (query_read_report(*reply, len, name, r, err, errlen) < 0) {
        t->failure = -EBADMSG;
        return -1;
    }
    return 0;
}

/* One process's answer to /metrics, asked on a thread of its own. */
struct asked {
    const struct exporter *x;
    long pid;
    struct query_target t;
    char *reply;
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc;
};

static void *ask_one(void *arg)
{
    struct asked *a = arg;
    a->rc = ask_report(a->x, a->pid, "summary\n", &a->t, &a->reply, &a->r, a->err, sizeof a->err);
    return NULL;
}

/* Asks every process at once (ASK_AT_ONCE threads at a time), so a page
 * takes about one --timeout however many processes are stopped, within
 * Prometheus's scrape timeout. */
#define ASK_AT_ONCE 32
static void ask_all(const struct exporter *x, const long *pids, size_t npids, struct asked *asked)
{
    cli_quiet = 1;
    for (size_t from = 0; from < npids; from += ASK_AT_ONCE) {
        size_t to = from + ASK_AT_ONCE < npids ? from + ASK_AT_ONCE : npids;
        pthread_t th[ASK_AT_ONCE];
        bool started[ASK_AT_ONCE] = {false};
        for (size_t i = from; i < to; i++) {
            asked[i].x = x;
            asked[i].pid = pids[i];
            asked[i].rc = -1;
            started[i - from] = pthread_create(&th[i - from], NULL, ask_one, &asked[i]) == 0;
            if (!started[i - from])
                ask_one(&asked[i]); /* no thread to spare: ask it here */
        }
        for (size_t i = from; i < to; i++)
            if (started[i - from])
                pthread_join(th[i - from], NULL);
    }
    cli_quiet = 0;
}

/* /metrics: every process that answers; those that do not are named in
 * comment lines. */
static int page_metrics(const struct exporter *x, FILE *body)
{
    long *pids = NULL;
    size_t npids = 0;
    if (query_list(&pids, &npids) < 0) {
        fputs("out of memory\n", body);
        return 500;
    }
    struct report *reports = calloc(npids ? npids : 1, sizeof *reports);
    const struct report **answered = calloc(npids ? npids : 1, sizeof *answered);
    if (!reports || !answered) {
        free(pids), free(reports), free(answered);
        fputs("out of memory\n", body);
        return 500;
    }
    struct asked *asked = calloc(npids ? npids : 1, sizeof *asked);
    if (!asked) {
        free(pids), free(reports), free(answered);
        fputs("out of memory\n", body);
        return 500;
    }
    ask_all(x, pids, npids, asked);
    size_t n = 0, skipped = 0;
    for (size_t i = 0; i < npids; i++) {
        struct asked *a = &asked[i];
        if (a->rc == 0) {
            reports[n] = a->r;
            answered[n] = &reports[n];
            n++;
        } else {
            char why[REPORT_ERR_MAX];
            const char *text = a->t.failure == -EBADMSG
                                   ? a->err
                                   : failure_text(&a->t, a->reply, x->timeout_ms, why, sizeof why);
            report_free(&a->r); /* what a bad answer held before its fault */
            if (*text) {
                fprintf(body, "# memtrail: process %ld skipped: ", pids[i]);
                for (const char *p = text; *p; p++) /* one comment line */
                    fputc(*p == '\n' || *p == '\r' ? ' ' : *p, body);
                fputc('\n', body);
                skipped++;
            }
        }
        free(a->reply);
        query_close(&a->t);
    }
    free(asked);
    int prc = metrics_print(body, answered, n);
    fprintf(body,
            "# HELP memtrail_exporter_processes Processes asked for this page: answered, or skipped (no "
            "answer in time, an error).\n"
            "# TYPE memtrail_exporter_processes gauge\n"
            "memtrail_exporter_processes{result=\"answered\"} %zu\n"
            "memtrail_exporter_processes{result=\"skipped\"} %zu\n",
            n, skipped);
    for (size_t i = 0; i < n; i++)
        report_free(&reports[i]);
    free(reports);
    free(answered);
    free(pids);
    return prc == 0 ? 200 : 500;
}

/* /debug/pprof/heap?pid=N. */
static int page_heap(const struct exporter *x, const char *query, FILE *body, const char **type)
{
    char arg[32];
    long pid;
    if (http_query_param(query, "pid", arg, sizeof arg) != 0 || query_parse_pid(arg, &pid) != 0) {
        fputs("name the process: /debug/pprof/heap?pid=N\n", body);
        return 400;
    }
    struct query_target t;
    struct report r;
    char *reply = NULL, err[REPORT_ERR_MAX], why[REPORT_ERR_MAX];
    int status = 200;
    cli_quiet = 1;
    int asked_rc = ask_report(x, pid, "detail\n", &t, &reply, &r, err, sizeof err);
    cli_quiet = 0;
    if (asked_rc != 0) {
        switch (t.failure) {
        case -ESRCH: fprintf(body, "no process with pid %ld\n", pid), status = 404; break;
        case -EPERM: fprintf(body, "process %ld is not one of yours\n", pid), status = 403; break;
        case -ENOENT:
        case -ECONNREFUSED:
            fprintf(body, "process %ld is not tracked by memtrail\n", pid), status = 404;
            break;
        case -EBADMSG: fprintf(body, "%s\n", err), status = 500; break;
        default:
            fprintf(body, "process %ld %s\n", pid, failure_text(&t, reply, x->timeout_ms, why, sizeof why));
            status = t.failure == -ETIMEDOUT ? 503 : 500;
        }
    } else if (!(r.has & REPORT_HAS_SITES)) {
        /* Only a process started in detail, sample or trace mode can
         * start recording sites on demand (docs/cli.md, Recording on
         * demand): a summary-mode one has no site table to record into. */
        const char *mode = r.mode ? r.mode : "unknown";
        if (strcmp(mode, "detail") == 0 || strcmp(mode, "sample") == 0 || strcmp(mode, "trace") == 0)
            fprintf(body,
                    "process %ld has no allocation sites (mode %s, recording off): switch it on with "
                    "'memtrail query %ld start %s'\n",
                    pid, mode, pid, strcmp(mode, "sample") == 0 ? "sample" : "detail");
        else
            fprintf(body,
                    "process %ld does not run in detail mode (mode %s): it has no allocation sites, and "
                    "cannot record them on demand (that needs it started in detail, sample or trace mode); "
                    "start it with 'memtrail run --mode detail' (or MEMTRAIL_OPTIONS=mode=detail:start=off "
                    "to switch it on later with 'memtrail query PID start detail')\n",
                    pid, mode);
        status = 404;
    } else {
        struct symbolizer *sym = detail_symbolizer(&r);
        char source[64];
        snprintf(source, sizeof source, "process %ld", pid);
        int rc = sym ? export_pprof(body, &r, sym, EXPORT_LIVE_BYTES, source) : -ENOMEM;
        if (sym)
            sym_close(sym);
        if (rc == 0) {
            *type = "application/octet-stream";
        } else {
            status = 500;
            rewind(body);
            fprintf(body, "cannot write the profile: %s\n", strerror(-rc));
        }
    }
    report_free(&r);
    free(reply);
    query_close(&t);
    return status;
}

static int handle(const struct http_request *req, FILE *body, const char **type, void *ctx)
{
    const struct exporter *x = ctx;
    if (strcmp(req->path, "/metrics") == 0) {
        *type = "text/plain; version=0.0.4; charset=utf-8";
        return page_metrics(x, body);
    }
    if (strcmp(req->path, "/debug/pprof/heap") == 0)
        return page_heap(x, req->query, body, type);
    if (strcmp(req->path, "/") == 0) {
        fputs("memtrail exporter\n\n/metrics                 Prometheus metrics of every tracked process of "
              "yours\n/debug/pprof/heap?pid=N  process N's live allocation sites (detail mode), gzip'ed "
              "pprof\n",
              body);
        return 200;
    }
    fprintf(body, "not found: %s (served: /metrics, /debug/pprof/heap?pid=N)\n", req->path);
    return 404;
}

int cmd_exporter(int argc, char **argv)
{
    const char *listen_at = "127.0.0.1:9464";
    int timeout_s = 2;
    bool allow_remote = false;
    const struct cli_option options[] = {
        {.kind = CLI_OPT_STRING,
         .name = "listen",
         .arg = "HOST:PORT",
         .value = &listen_at,
         .help = "where to serve: an IPv4 address, [IPv6 address] or name, and a port (0: any free one); "
                 "default 127.0.0.1:9464"},
        {.kind = CLI_OPT_INT,
         .name = "timeout",
         .arg = "SECONDS",
         .value = &timeout_s,
         .min = 1,
         .max = 60,
         .noun = "a number of seconds",
         .help = "how long to wait for each process's answer (default 2); a process that does not answer "
                 "in time is skipped, with a comment line"},
        {.kind = CLI_OPT_FLAG,
         .name = "allow-remote",
         .value = &allow_remote,
         .help = "also serve clients this machine does not hold the socket of (another host, another "
                 "network namespace), whose uid cannot be checked"},
        {0},
    };
    int npos = cli_parse(&exporter_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    struct sockaddr_storage addr;
    socklen_t len;
    char err[512];
    if (http_parse_listen(listen_at, &addr, &len, err, sizeof err) != 0)
        return cli_usage_error("exporter", "--listen: %s", err);
    struct http_server s = {.fd = -1, .uid = (unsigned)geteuid(), .allow_remote = allow_remote};
    int rc = http_listen(&s, &addr, len);
    if (rc == -EADDRINUSE)
        return cli_error("cannot listen on %s: the port is in use (another exporter?); pick another with "
                         "--listen",
                         listen_at);
    if (rc < 0)
        return cli_error("cannot listen on %s: %s", listen_at, strerror(-rc));
    fprintf(stderr, "memtrail: exporter serving http://%s/metrics and /debug/pprof/heap?pid=N\n", s.name);
    struct exporter x = {.timeout_ms = timeout_s * 1000};
    rc = http_serve(&s, handle, &x);
    if (rc < 0)
        return cli_error("exporter: %s", strerror(-rc));
    return CLI_OK;
}
