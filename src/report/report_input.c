/* report_input.c — an input file opened once. The commands that read
 * reports and traces look at the first bytes to tell which one a file is;
 * reopening it afterwards reads a pipe (`<(cat s.mtr)`) from where the
 * first look stopped, and blocks on a FIFO whose writer is gone. So an
 * input is opened once, its first bytes are kept, and the reader that
 * takes it is handed those bytes and then the rest of the stream: a
 * regular file is read from its start again, anything else front to back,
 * once. */
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int input_fail(char *err, size_t errlen, const char *name, int code, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "%s: %s", name, what);
    return code;
}

int report_input_open(const char *path, struct report_input *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    bool std_in = strcmp(path, "-") == 0;
    in->name = std_in ? "(stdin)" : path;
    in->fd = std_in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3) : open(path, O_RDONLY | O_CLOEXEC);
    if (in->fd < 0) {
        int e = errno;
        char what[160];
        snprintf(what, sizeof what, "cannot open: %s", strerror(e));
        return input_fail(err, errlen, in->name, -e, what);
    }
    struct stat st;
    if (fstat(in->fd, &st) < 0) {
        int e = errno;
        char what[160];
        snprintf(what, sizeof what, "cannot stat: %s", strerror(e));
        report_input_close(in);
        return input_fail(err, errlen, in->name, -e, what);
    }
    if (S_ISDIR(st.st_mode)) {
        report_input_close(in);
        return input_fail(err, errlen, in->name, -EISDIR, "is a directory, not a report file");
    }
    /* A regular file read from its start can be read again (and seeked:
     * a trace's index); stdin redirected from the middle of a file is
     * read from where it stands, as a stream. */
    in->seekable = S_ISREG(st.st_mode) && lseek(in->fd, 0, SEEK_CUR) == 0;
    in->size = in->seekable ? (uint64_t)st.st_size : 0;
    size_t got = 0;
    while (got < sizeof in->head) {
        ssize_t k = in->seekable ? pread(in->fd, in->head + got, sizeof in->head - got, (off_t)got)
                                 : read(in->fd, in->head + got, sizeof in->head - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            char what[160];
            snprintf(what, sizeof what, "read error: %s", strerror(e));
            report_input_close(in);
            return input_fail(err, errlen, in->name, -e, what);
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    in->nhead = got;
    return 0;
}

bool report_input_starts_with(const struct report_input *in, const void *magic, size_t len)
{
    return len <= in->nhead && memcmp(in->head, magic, len) == 0;
}

/* The stream of a pipe or FIFO: the first bytes from the copy, then the rest. */
struct prefixed {
    int fd;
    unsigned char head[sizeof((struct report_input *)0)->head];
    size_t nhead, pos;
};

static ssize_t prefixed_read(void *cookie, char *buf, size_t size)
{
    struct prefixed *p = cookie;
    if (p->pos < p->nhead) {
        size_t n = p->nhead - p->pos < size ? p->nhead - p->pos : size;
        memcpy(buf, p->head + p->pos, n);
        p->pos += n;
        return (ssize_t)n;
    }
    for (;;) {
        ssize_t k = read(p->fd, buf, size);
        if (k < 0 && errno == EINTR)
            continue;
        return k;
    }
}

static int prefixed_close(void *cookie)
{
    struct prefixed *p = cookie;
    int rc = close(p->fd);
    free(p);
    return rc;
}

FILE *report_input_file(struct report_input *in)
{
    if (in->fd < 0) {
        errno = EBADF;
        return NULL;
    }
    FILE *f;
    if (in->seekable) {
        f = fdopen(in->fd, "r"); /* at offset 0: the first bytes were read with pread */
    } else {
        struct prefixed *p = malloc(sizeof *p);
        if (!p)
            return NULL;
        p->fd = in->fd;
        memcpy(p->head, in->head, in->nhead);
        p->nhead = in->nhead;
        p->pos = 0;
        cookie_io_functions_t io = {.read = prefixed_read, .close = prefixed_close};
        f = fopencookie(p, "r", io);
        if (!f)
            free(p);
    }
    if (f)
        in->fd = -1; /* the stream owns it now */
    return f;
}

int report_read_input(struct report_input *in, struct report *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    FILE *f = report_input_file(in);
    if (!f) {
        int e = errno ? errno : ENOMEM;
        return input_fail(err, errlen, in->name, -e, "cannot read it (out of memory?)");
    }
    int rc = report_read_stream(f, in->name, r, err, errlen);
    fclose(f);
    return rc;
}

void report_input_close(struct report_input *in)
{
    if (in->fd >= 0)
        close(in->fd);
    in->fd = -1;
}
