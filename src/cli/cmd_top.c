/* cmd_top.c — `memtrail top PID [--interval S] [--sort live|peak|allocs]
 * [--top N] [--iterations N]`: a live view of a running tracked process,
 * as `memray live` or htop show theirs: its categories and (in detail
 * mode) its top allocation sites, asked afresh every interval over the
 * control socket (query_client.c, the `detail` request of `memtrail query
 * PID detail`) and read with the report reader (report_read.c).
 *
 * On a terminal it takes the screen (the alternate screen, termios without
 * canonical input or echo) and reads keys: q quits, l/p/a sort by live
 * bytes, peak bytes or allocations, s goes to the next sort. The terminal
 * is given back as it was on every way out: q, a key after the process
 * exited, SIGINT/SIGTERM/SIGHUP/SIGQUIT, a failed write, and Ctrl-Z (given
 * back while stopped, taken again on SIGCONT). When the process exits, its
 * last figures stay on screen with a line saying so until a key is pressed.
 * Anywhere else (stdout or stdin not a terminal) it prints --iterations
 * frames (default 1), --interval apart, and exits: scriptable. */
#include "cli/cli.h"
#include "common/units.h"
#include "report/report.h"
#include "symbol/symbol.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

enum sort_key { SORT_LIVE, SORT_PEAK, SORT_ALLOCS, NSORTS };
static const char *const sort_names[NSORTS] = {"live", "peak", "allocs"};
static const char *const sort_words[NSORTS] = {"live bytes", "peak bytes", "allocations"};

#define BATCH_SITES 10        /* sites in a printed frame without --top */
#define QUERY_TIMEOUT_MS 5000 /* as `memtrail query`'s default */
#define MAX_SYM 8             /* symbolized frames per return address (inlined calls) */

struct top {
    long pid;
    int interval_ms;
    enum sort_key sort;
    int top_sites; /* 0: as many as fit (a terminal) or BATCH_SITES */
    int iterations;
    bool interactive;
    int rows, cols;
    struct report r; /* the last answer */
    bool have_report;
    char fetched_at[16]; /* HH:MM:SS of the last answer */
    char status[512];    /* a line above the footer: why the last refresh failed, or the exit */
    bool exited;
    struct sym_cache *cache; /* the modules opened once, for every refresh */
};

/* --- options ----------------------------------------------------------------- */

static int parse_interval(const char *value, void *dest)
{
    char *end;
    errno = 0;
    double s = strtod(value, &end);
    if (end == value || *end || errno || !(s >= 0.1 && s <= 3600))
        return -EINVAL;
    *(int *)dest = (int)(s * 1000 + 0.5);
    return 0;
}

static int parse_sort(const char *value, void *dest)
{
    for (int k = 0; k < NSORTS; k++)
        if (strcmp(value, sort_names[k]) == 0) {
            *(enum sort_key *)dest = (enum sort_key)k;
            return 0;
        }
    return -EINVAL;
}

static const struct cli_command top_cmd = {
    .name = "top",
    .usage = "usage: memtrail top PID [--interval SECONDS] [--sort live|peak|allocs] [--top N]\n"
             "                        [--iterations N]\n",
    .about = "A live view of the running process PID, tracked by memtrail (started with\n"
             "'memtrail run'): its categories and, when it runs in detail mode, its top\n"
             "allocation sites, asked afresh every interval over its control socket (the\n"
             "figures of 'memtrail query PID detail').\n"
             "\n"
             "Keys: q quits; l, p and a sort by live bytes, peak bytes or allocations;\n"
             "s goes to the next sort. When the process exits, its last figures stay on\n"
             "screen with a line saying so; any key then quits.\n"
             "\n"
             "When standard input or output is not a terminal, top prints --iterations\n"
             "frames (default 1), --interval apart, and exits.\n",
    .more = "The program's categories come first (sorted), then address space by\n"
            "resident bytes, then memtrail's own overhead. Only your own processes can be\n"
            "watched. Exit status: 0 ok (q, or the process exited), 1 the process cannot\n"
            "be asked (no such process, not tracked, another user's), 2 bad usage,\n"
            "128+N when signal N ended it (130 for Ctrl-C, 143 for SIGTERM).\n",
    .min_args = 1,
    .max_args = 1,
    .missing = "missing the PID of the process to watch",
    .extra = "too many arguments ('%s')",
};

/* --- asking the process -------------------------------------------------------- */

static void set_clock(struct top *t)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(t->fetched_at, sizeof t->fetched_at, "%H:%M:%S", &tm);
}

/* Asks for the process's report (its sites too, in detail mode) and keeps
 * it in t->r. 0, or CLI_FAILED with t->status saying why (and, unless
 * quiet, the usual error line on stderr). */
static volatile sig_atomic_t got_stop_signal, got_resize, got_tstp; /* set by on_signal */

/* 0: the figures are new; -ECANCELED: given up for a key or a signal that
 * came first (the figures stay); CLI_FAILED: t->status says why. */
static int fetch(struct top *t, bool quiet)
{
    struct query_target q;
    char *buf = NULL;
    size_t len = 0;
    cli_quiet = quiet;
    int rc = query_open(t->pid, "top", &q);
    if (rc == 0) {
        /* A process that does not answer (stopped) must not hold the keys
         * and Ctrl-C for the query's 5 s. */
        q.cancel = &got_stop_signal;
        q.watch_input = t->interactive && quiet; /* in the loop, not the first answer */
        rc = query_ask(&q, "detail\n", QUERY_TIMEOUT_MS, &buf, &len);
    }
    cli_quiet = 0;
    int failure = q.failure;
    query_close(&q);
    if (rc != 0) {
        free(buf);
        if (failure == -ECANCELED)
            return -ECANCELED;
        if (failure == -ETIMEDOUT)
            snprintf(t->status, sizeof t->status, "process %ld did not answer within %d seconds (stopped?)",
                     t->pid, QUERY_TIMEOUT_MS / 1000);
        else if (failure == -ENOENT || failure == -ECONNREFUSED) /* the agent closes it at exit */
            snprintf(t->status, sizeof t->status,
                     "process %ld no longer answers (its control socket is gone: "
                     "exiting?)",
                     t->pid);
        else
            snprintf(t->status, sizeof t->status, "process %ld could not be asked (%s)", t->pid,
                     strerror(failure < 0 ? -failure : EIO));
        return CLI_FAILED;
    }
    char name[64], err[REPORT_ERR_MAX];
    snprintf(name, sizeof name, "process %ld", t->pid);
    struct report r;
    if (query_read_report(buf, len, name, &r, err, sizeof err) < 0) {
        free(buf);
        report_free(&r);
        snprintf(t->status, sizeof t->status, "%s", err);
        return quiet ? CLI_FAILED : cli_error("%s", err);
    }
    free(buf);
    if (t->have_report)
        report_free(&t->r);
    t->r = r;
    t->have_report = true;
    t->status[0] = '\0';
    set_clock(t);
    return 0;
}

/* --- the frame ------------------------------------------------------------------ */

static int64_t key_of(const struct report_counts *n, enum sort_key k)
{
    return k == SORT_PEAK ? n->peak_bytes : k == SORT_ALLOCS ? n->allocs : n->live_bytes;
}

/* Program categories first, then address space, then memtrail's overhead. */
static int group_of(const struct report_category *c)
{
    return report_category_is(c, "overhead") ? 2 : report_category_is(c, "vm") ? 1 : 0;
}

static enum sort_key sorting; /* for the qsort comparators */
static const struct report *sorting_report;

static int cmp_i64_desc(int64_t a, int64_t b)
{
    return (a < b) - (a > b);
}

static int cmp_category(const void *pa, const void *pb)
{
    const struct report_category *a = &sorting_report->categories[*(const size_t *)pa],
                                 *b = &sorting_report->categories[*(const size_t *)pb];
    int ga = group_of(a), gb = group_of(b);
    if (ga != gb)
        return ga - gb;
    int c = ga == 1 ? cmp_i64_desc(a->vm.resident, b->vm.resident)
                    : cmp_i64_desc(key_of(&a->n, sorting), key_of(&b->n, sorting));
    if (c == 0)
        c = cmp_i64_desc(a->n.live_bytes, b->n.live_bytes);
    return c ? c : strcmp(a->name, b->name);
}

static int cmp_site(const void *pa, const void *pb)
{
    const struct report_site *a = &sorting_report->sites[*(const size_t *)pa],
                             *b = &sorting_report->sites[*(const size_t *)pb];
    int c = cmp_i64_desc(key_of(&a->n, sorting), key_of(&b->n, sorting));
    if (c == 0)
        c = cmp_i64_desc(a->n.live_bytes, b->n.live_bytes);
    return c ? c : (a->id > b->id) - (a->id < b->id);
}

/* The indices 0..n-1 sorted by cmp over r; NULL on out-of-memory. */
static size_t *sorted(const struct report *r, size_t n, enum sort_key k,
                      int (*cmp)(const void *, const void *))
{
    size_t *order = malloc((n + 1) * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    sorting = k;
    sorting_report = r;
    qsort(order, n, sizeof *order, cmp);
    return order;
}

static const char *size_of(char *buf, int64_t bytes)
{
    return mt_size(buf, MT_UNITS_MAX, bytes);
}

static void print_header(FILE *f, const struct top *t)
{
    const struct report *r = &t->r;
    fprintf(f, "memtrail top - pid %ld", t->pid);
    if (r->argc > 0) {
        fputs(" - ", f);
        report_print_cmdline(f, r);
    } else if (r->exe) {
        fprintf(f, " - %s", r->exe);
    }
    fputc('\n', f);
    char a[MT_UNITS_MAX], b[MT_UNITS_MAX], c[MT_UNITS_MAX], d[MT_UNITS_MAX];
    fprintf(f, "mode %s, every %gs, at %s; sorted by %s\n", r->mode ? r->mode : "unknown",
            t->interval_ms / 1000.0, t->fetched_at, sort_words[t->sort]);
    fprintf(f, "Total: live=%s (%" PRId64 " blocks), peak=%s, allocs=%" PRId64 ", frees=%" PRId64 "\n",
            size_of(a, r->total.live_bytes), r->total.live_count, size_of(b, r->total.peak_bytes),
            r->total.allocs, r->total.frees);
    if (r->has & REPORT_HAS_PROCESS)
        fprintf(f, "Process: rss=%s, peak rss=%s\n", size_of(c, r->process.rss_bytes),
                size_of(d, r->process.peak_rss_bytes));
    fputc('\n', f);
}

/* One right-aligned column: a size, or "-". */
static void col_size(FILE *f, int width, bool shown, int64_t bytes)
{
    char buf[MT_UNITS_MAX];
    fprintf(f, " %*s", width, shown ? size_of(buf, bytes) : "-");
}

static void col_count(FILE *f, int width, bool shown, int64_t n)
{
    if (shown)
        fprintf(f, " %*" PRId64, width, n);
    else
        fprintf(f, " %*s", width, "-");
}

static void print_categories(FILE *f, const struct top *t, const size_t *order)
{
    const struct report *r = &t->r;
    fprintf(f, "%-18s %9s %8s %9s %10s %10s %9s\n", "CATEGORY", "LIVE", "BLOCKS", "PEAK", "ALLOCS", "FREES",
            "RESIDENT");
    for (size_t i = 0; i < r->ncategories; i++) {
        const struct report_category *c = &r->categories[order[i]];
        bool heap = !report_category_is(c, "vm");
        fprintf(f, "%-18s", c->name);
        col_size(f, 9, heap, c->n.live_bytes);
        col_count(f, 8, heap, c->n.live_count);
        col_size(f, 9, heap, c->n.peak_bytes);
        col_count(f, 10, heap, c->n.allocs);
        col_count(f, 10, heap, c->n.frees);
        col_size(f, 9, c->has_vm && c->vm.reserved > 0, c->vm.resident);
        fputc('\n', f);
    }
}

/* "function (file:line) < caller < caller ..." of a site's stack. */
static void print_stack(FILE *f, struct symbolizer *s, const struct report_site *site)
{
    if (site->nframes == 0) {
        fputs("[no frames: counted here when the site table was full]", f);
        return;
    }
    for (size_t i = 0; i < site->nframes && i < 6; i++) {
        struct sym_frame fr[MAX_SYM];
        int k = s ? sym_lookup(s, site->frames[i], fr, MAX_SYM) : 0;
        if (k <= 0) {
            fprintf(f, "%s0x%" PRIx64, i ? " < " : "", site->frames[i]);
            continue;
        }
        for (int j = 0; j < k; j++) {
            fputs(i || j ? " < " : "", f);
            if (fr[j].function)
                fputs(fr[j].function, f);
            else if (fr[j].module)
                fprintf(f, "%s+0x%" PRIx64,
                        strrchr(fr[j].module, '/') ? strrchr(fr[j].module, '/') + 1 : fr[j].module,
                        fr[j].offset);
            else
                fprintf(f, "0x%" PRIx64, fr[j].address);
            if (i == 0 && j == 0 && fr[j].file) {
                const char *base = strrchr(fr[j].file, '/');
                fprintf(f, " (%s:%d)", base ? base + 1 : fr[j].file, fr[j].line);
            }
        }
    }
}

/* A symbolizer over r's modules, those the shown sites lie in opened
 * through the cache (once for the whole session). NULL: addresses only. */
static struct symbolizer *symbolizer_for(struct top *t, const size_t *order, size_t shown)
{
    const struct report *r = &t->r;
    struct sym_module *mods = calloc(r->nmodules + 1, sizeof *mods);
    size_t naddr = 0;
    for (size_t i = 0; i < shown; i++)
        naddr += r->sites[order[i]].nframes;
    uint64_t *addr = calloc(naddr + 1, sizeof *addr);
    struct symbolizer *s = NULL;
    if (mods && addr) {
        for (size_t i = 0; i < r->nmodules; i++) {
            const struct report_module *m = &r->modules[i];
            mods[i] = (struct sym_module){
                .path = m->path, .buildid = m->buildid, .bias = m->bias, .start = m->start, .end = m->end};
        }
        naddr = 0;
        for (size_t i = 0; i < shown; i++)
            for (size_t k = 0; k < r->sites[order[i]].nframes; k++)
                addr[naddr++] = r->sites[order[i]].frames[k];
        sym_cache_load(t->cache, mods, r->nmodules, addr, naddr);
        s = sym_open_cached(mods, r->nmodules, t->cache);
    }
    free(mods);
    free(addr);
    return s;
}

/* The sites, as many as `room` lines allow (besides the heading). */
static void print_sites(FILE *f, struct top *t, size_t room)
{
    const struct report *r = &t->r;
    if (!(r->has & REPORT_HAS_SITES)) {
        fprintf(f,
                "\nNo allocation sites: the process runs in %s mode (see them with 'memtrail run --mode\n"
                "detail', or switch it on with 'memtrail query %ld start detail').\n",
                r->mode ? r->mode : "unknown", t->pid);
        return;
    }
    size_t *order = sorted(r, r->nsites, t->sort, cmp_site);
    if (!order) {
        fputs("\n(out of memory: sites not shown)\n", f);
        return;
    }
    size_t shown = r->nsites < room ? r->nsites : room;
    struct symbolizer *s = symbolizer_for(t, order, shown);
    fprintf(f, "\nSites: %zu of %zu, by %s", shown, r->nsites, sort_words[t->sort]);
    if (report_is_sampled(r)) { /* mode sample (docs/sampling.md): the sites' figures are estimates */
        char rate[MT_UNITS_MAX];
        fprintf(f, " (sampled, one sample per %s: estimates)", mt_size(rate, sizeof rate, r->sample_rate));
    }
    fputc('\n', f);
    fprintf(f, "%9s %8s %9s %10s  %-12s %s\n", "LIVE", "BLOCKS", "PEAK", "ALLOCS", "CATEGORY", "SITE");
    for (size_t i = 0; i < shown; i++) {
        const struct report_site *site = &r->sites[order[i]];
        char a[MT_UNITS_MAX], b[MT_UNITS_MAX];
        fprintf(f, "%9s %8" PRId64 " %9s %10" PRId64 "  %-12s ", size_of(a, site->n.live_bytes),
                site->n.live_count, size_of(b, site->n.peak_bytes), site->n.allocs, site->category);
        print_stack(f, s, site);
        fputc('\n', f);
    }
    sym_close(s);
    free(order);
}

static size_t count_lines(const char *text, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    return n;
}

/* The whole frame into *text (malloc'd): header, categories, sites; on a
 * terminal, the sites fill the rows left above the footer. 0 or -ENOMEM. */
static int render(struct top *t, char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    if (!f)
        return -ENOMEM;
    print_header(f, t);
    size_t *order = sorted(&t->r, t->r.ncategories, t->sort, cmp_category);
    if (order)
        print_categories(f, t, order);
    free(order);
    fflush(f);
    size_t room = t->top_sites > 0 ? (size_t)t->top_sites : BATCH_SITES;
    if (t->interactive) {
        /* the sites' heading (3 lines) and the footer (2) */
        size_t used = count_lines(*text, *len) + 5;
        size_t fit = (size_t)t->rows > used ? (size_t)t->rows - used : 0;
        room = t->top_sites > 0 && (size_t)t->top_sites < fit ? (size_t)t->top_sites : fit;
    }
    print_sites(f, t, room);
    if (fclose(f) != 0)
        return -ENOMEM;
    return 0;
}

/* --- the terminal --------------------------------------------------------------- */

static struct termios saved_tty;
static volatile sig_atomic_t tty_taken;

static void on_signal(int sig)
{
    if (sig == SIGWINCH)
        got_resize = 1;
    else if (sig == SIGTSTP)
        got_tstp = 1;
    else
        got_stop_signal = sig;
}

static void write_all(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* The alternate screen, cursor hidden; canonical input and echo off (the
 * signal keys still work: Ctrl-C reaches on_signal). */
static int take_tty(void)
{
    if (tcgetattr(STDIN_FILENO, &saved_tty) != 0)
        return -errno;
    struct termios raw = saved_tty;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
        return -errno;
    tty_taken = 1;
    static const char enter[] = "\033[?1049h\033[?25l\033[H\033[2J";
    write_all(enter, sizeof enter - 1);
    return 0;
}

static void give_tty(void)
{
    if (!tty_taken)
        return;
    static const char leave[] = "\033[?25h\033[?1049l";
    write_all(leave, sizeof leave - 1);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
    tty_taken = 0;
}

static void window_size(struct top *t)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        t->rows = ws.ws_row;
        t->cols = ws.ws_col;
    } else {
        t->rows = 24;
        t->cols = 80;
    }
}

/* Appends `line` (len bytes, no newline) cut to `cols` columns (UTF-8
 * continuation bytes take none), then clears the rest of the row. */
static void put_line(FILE *out, const char *line, size_t len, int cols)
{
    int used = 0;
    size_t i = 0;
    for (; i < len; i++) {
        bool continuation = ((unsigned char)line[i] & 0xc0) == 0x80;
        if (!continuation && used == cols)
            break;
        used += !continuation;
    }
    fwrite(line, 1, i, out);
    fputs("\033[K", out);
}

/* Draws the frame, the status line and the footer over the whole screen. */
static int draw(struct top *t)
{
    char *text = NULL, *screen = NULL;
    size_t len = 0, slen = 0;
    if (render(t, &text, &len) < 0)
        return -ENOMEM;
    FILE *out = open_memstream(&screen, &slen);
    if (!out) {
        free(text);
        return -ENOMEM;
    }
    fputs("\033[H", out);
    int row = 0, body = t->rows - 2;
    for (const char *p = text; p < text + len && row < body; row++) {
        const char *nl = memchr(p, '\n', (size_t)(text + len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
        put_line(out, p, n, t->cols);
        fputs("\r\n", out);
        p += n + (nl != NULL);
    }
    for (; row < body; row++)
        fputs("\033[K\r\n", out);
    put_line(out, t->status, strlen(t->status), t->cols);
    fputs("\r\n\033[7m", out);
    char footer[256];
    if (t->exited)
        snprintf(footer, sizeof footer, " any key: quit ");
    else
        snprintf(footer, sizeof footer, " q quit  l live  p peak  a allocs  s next sort   sort: %s ",
                 sort_names[t->sort]);
    put_line(out, footer, strlen(footer), t->cols);
    fputs("\033[0m", out);
    free(text);
    if (fclose(out) != 0)
        return -ENOMEM;
    write_all(screen, slen);
    free(screen);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* After a refresh that failed: the process has exited, or why it did not answer. */
static void refresh_failed(struct top *t)
{
    if (!query_process_gone(t->pid))
        return; /* t->status says why; asked again at the next interval */
    t->exited = true;
    snprintf(t->status, sizeof t->status, "process %ld has exited; its last figures (at %s) are above.",
             t->pid, t->fetched_at);
}

/* A key: false when it quits. */
static bool handle_key(struct top *t, char c)
{
    if (t->exited || c == 'q' || c == 'Q')
        return false;
    switch (c) {
    case 'l': t->sort = SORT_LIVE; break;
    case 'p': t->sort = SORT_PEAK; break;
    case 'a': t->sort = SORT_ALLOCS; break;
    case 's': t->sort = (enum sort_key)((t->sort + 1) % NSORTS); break;
    default: break;
    }
    return true;
}

static void catch_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask); /* no SA_RESTART: poll wakes up */
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* Ctrl-Z: the terminal given back while we are stopped, taken on SIGCONT. */
static void suspend(void)
{
    give_tty();
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);
    /* continued */
    catch_signals();
    take_tty();
}

static int run_interactive(struct top *t)
{
    catch_signals();
    atexit(give_tty);
    if (take_tty() < 0)
        return cli_error("cannot set up the terminal: %s", strerror(errno));
    window_size(t);
    int frames = 1, status = CLI_OK;
    int64_t next = now_ms() + t->interval_ms;
    bool dirty = true, quit = false;
    while (!quit && !got_stop_signal) {
        if (got_tstp) {
            got_tstp = 0;
            suspend();
            dirty = true;
        }
        if (got_resize) {
            got_resize = 0;
            window_size(t);
            dirty = true;
        }
        if (dirty && draw(t) < 0) {
            status = CLI_FAILED;
            break;
        }
        dirty = false;
        int64_t left = next - now_ms();
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int pr = t->exited ? poll(&p, 1, -1) : left > 0 ? poll(&p, 1, (int)left) : 0;
        if (pr < 0)
            continue; /* a signal: looked at above */
        if (pr > 0) {
            char keys[64];
            ssize_t n = read(STDIN_FILENO, keys, sizeof keys);
            if (n == 0 || (p.revents & (POLLHUP | POLLERR)))
                break; /* the terminal went away */
            for (ssize_t i = 0; i < n && !quit; i++)
                quit = !handle_key(t, keys[i]);
            dirty = true;
            continue;
        }
        if (t->iterations > 0 && frames >= t->iterations)
            break;
        int f = fetch(t, true);
        if (f == -ECANCELED) {
            /* A key or a signal came first: the loop takes it (the poll
             * above, now with time left), and asks again after a period. */
            next = now_ms() + t->interval_ms;
            continue;
        }
        if (f != 0)
            refresh_failed(t);
        frames++;
        next = now_ms() + t->interval_ms;
        dirty = true;
    }
    give_tty();
    if (got_stop_signal)
        return 128 + got_stop_signal;
    return status;
}

static int run_batch(struct top *t)
{
    t->rows = 0;
    for (int i = 0; i < t->iterations; i++) {
        if (i > 0) {
            struct timespec ts = {t->interval_ms / 1000, (long)(t->interval_ms % 1000) * 1000000};
            nanosleep(&ts, NULL);
            /* Quietly: a process that exited is said once, on stdout. */
            if (fetch(t, true) != 0) {
                if (!query_process_gone(t->pid))
                    return cli_error("%s", t->status);
                printf("process %ld has exited\n", t->pid);
                return cli_write_status(0);
            }
            putchar('\n');
        }
        char *text = NULL;
        size_t len = 0;
        if (render(t, &text, &len) < 0)
            return cli_error("out of memory");
        fwrite(text, 1, len, stdout);
        free(text);
        if (fflush(stdout) != 0)
            return cli_write_status(-EIO);
    }
    return cli_write_status(0);
}

int cmd_top(int argc, char **argv)
{
    struct top t = {.interval_ms = 1000, .sort = SORT_LIVE};
    bool iterations_given = false;
    const struct cli_option options[] = {
        {.kind = CLI_OPT_PARSE,
         .name = "interval",
         .arg = "SECONDS",
         .value = &t.interval_ms,
         .parse = parse_interval,
         .accepted = "a number of seconds from 0.1 to 3600",
         .help = "time between two refreshes (default 1)"},
        {.kind = CLI_OPT_PARSE,
         .name = "sort",
         .arg = "live|peak|allocs",
         .value = &t.sort,
         .parse = parse_sort,
         .accepted = "live, peak, allocs",
         .help = "order categories and sites by live bytes (default), peak bytes or allocations"},
        {.kind = CLI_OPT_INT,
         .name = "top",
         .arg = "N",
         .value = &t.top_sites,
         .min = 1,
         .max = 1000000,
         .help = "show N sites at most (default: as many as fit the terminal; 10 when printing)"},
        {.kind = CLI_OPT_INT,
         .name = "iterations",
         .arg = "N",
         .value = &t.iterations,
         .min = 1,
         .max = 1000000000,
         .given = &iterations_given,
         .help = "stop after N frames (default: at q on a terminal, 1 otherwise)"},
        {0},
    };
    int npos = cli_parse(&top_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    if (query_parse_pid(argv[0], &t.pid) < 0)
        return cli_usage_error("top", "'%s' is not a process id", argv[0]);
    t.interactive = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (!iterations_given)
        t.iterations = t.interactive ? 0 : 1;
    t.cache = sym_cache_new();
    if (!t.cache)
        return cli_error("out of memory");
    /* The first answer before the screen is taken: its errors are plain lines. */
    int rc = fetch(&t, false);
    if (rc == 0)
        rc = t.interactive ? run_interactive(&t) : run_batch(&t);
    if (t.have_report)
        report_free(&t.r);
    sym_cache_free(t.cache);
    return rc;
}
