/* report_write.c — writes the summary report (docs/report-format.md)
 * with open/write/rename and a stack buffer: no malloc, no stdio. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "common/out.h"

/* Expands %p (pid), %e (program name) and %% into out. 0 or -ENAMETOOLONG. */
static int expand_path(const char *tmpl, char *out, size_t cap)
{
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
        else if (*s == '%')
            mt_out_char(&o, '%');
        else {
            mt_out_char(&o, '%');
            mt_out_char(&o, *s);
        }
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
        if (c == ' ')
            mt_out_str(o, "\\s");
        else if (c == '\n')
            mt_out_str(o, "\\n");
        else if (c == '\\')
            mt_out_str(o, "\\\\");
        else
            mt_out_char(o, c);
    }
}

static void write_counts(mt_out *o, const mt_catsum *c)
{
    mt_out_str(o, " live_bytes=");
    mt_out_i64(o, c->live_bytes);
    mt_out_str(o, " live_count=");
    mt_out_i64(o, c->live_count);
    mt_out_str(o, " peak_bytes=");
    mt_out_i64(o, c->peak_bytes);
    mt_out_str(o, " allocs=");
    mt_out_i64(o, c->allocs);
    mt_out_str(o, " frees=");
    mt_out_i64(o, c->frees);
    mt_out_str(o, " reallocs=");
    mt_out_i64(o, c->reallocs);
}

static void write_report(mt_out *o, const char *reason)
{
    mt_catsum sum[MT_NSLOT];
    mt_counters_sum(sum);

    mt_out_str(o, "memtrail-report 1\npid ");
    mt_out_u64(o, (uint64_t)getpid());
    mt_out_str(o, "\nppid ");
    mt_out_u64(o, (uint64_t)getppid());
    char exe[MT_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        mt_out_str(o, "\nexe ");
        for (ssize_t i = 0; i < n; i++)
            mt_out_char(o, exe[i] == '\n' ? '?' : exe[i]);
    }
    mt_out_str(o, "\ncmdline ");
    write_cmdline(o);
    mt_out_str(o, "\nmode summary\nstart_ns ");
    mt_out_i64(o, mt_start_ns);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    mt_out_str(o, "\nend_ns ");
    mt_out_i64(o, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    mt_out_str(o, "\nreason ");
    mt_out_str(o, reason);
    mt_out_char(o, '\n');

    int ncats = atomic_load(&mt_ncats);
    for (int i = 0; i < ncats; i++) {
        mt_out_str(o, "category ");
        mt_out_str(o, mt_cats[i].name);
        mt_out_str(o, mt_cats[i].kind == MT_KIND_OVERHEAD ? " kind=overhead" : " kind=malloc");
        write_counts(o, &sum[i]);
        mt_out_char(o, '\n');
    }
    mt_out_str(o, "total");
    write_counts(o, &sum[MT_SLOT_TOTAL]);
    mt_out_str(o, "\nerrors double_free=");
    mt_out_i64(o, atomic_load(&mt_err_double_free));
    mt_out_str(o, " bad_canary=");
    mt_out_i64(o, atomic_load(&mt_err_bad_canary));
    mt_out_str(o, " foreign_free=");
    mt_out_i64(o, atomic_load(&mt_err_foreign_free));
    mt_out_str(o, "\nend\n");
}

int mt_report_write_to(const char *path_template, const char *reason)
{
    int saved_errno = errno;
    mt_t.in_agent++;
    char path[MT_PATH_MAX], tmp[MT_PATH_MAX + 8];
    int rc = expand_path(path_template ? path_template : mt_opt.output, path, sizeof path);
    int fd = -1;
    if (rc == 0) {
        size_t n = strlen(path);
        memcpy(tmp, path, n);
        memcpy(tmp + n, ".tmp", 5);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            rc = -errno;
    }
    if (fd >= 0) {
        char buf[4096];
        mt_out o;
        mt_out_init(&o, buf, sizeof buf, fd);
        write_report(&o, reason);
        rc = mt_out_flush(&o);
        if (close(fd) < 0 && rc == 0)
            rc = -errno;
        if (rc == 0 && rename(tmp, path) < 0)
            rc = -errno;
        if (rc < 0)
            unlink(tmp);
    }
    if (rc < 0) {
        char msg[MT_PATH_MAX + 128];
        mt_out o;
        mt_out_init(&o, msg, sizeof msg, -1);
        mt_out_str(&o, "cannot write the report to ");
        mt_out_str(&o, rc == -ENAMETOOLONG ? "(path too long)" : path);
        mt_out_str(&o, ": ");
        mt_out_str(&o, strerror(-rc));
        mt_say(mt_out_cstr(&o));
    }
    mt_t.in_agent--;
    errno = saved_errno;
    return rc;
}
