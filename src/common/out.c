/* out.c — malloc-free, async-signal-safe formatting (see out.h). */
#include "common/out.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

ssize_t mt_write_in_limit(int fd, const void *buf, size_t n)
{
    struct rlimit r;
    struct stat st;
    if (n > 0 && getrlimit(RLIMIT_FSIZE, &r) == 0 && r.rlim_cur != RLIM_INFINITY && fstat(fd, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        int fl = fcntl(fd, F_GETFL);
        off_t at = fl >= 0 && (fl & O_APPEND) ? st.st_size : lseek(fd, 0, SEEK_CUR);
        if (at >= 0 && (uint64_t)at >= (uint64_t)r.rlim_cur) {
            errno = EFBIG;
            return -1;
        }
    }
    return write(fd, buf, n);
}

int mt_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = mt_write_in_limit(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -ENOSPC;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int mt_send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -ENOSPC;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void mt_out_init(mt_out *o, char *buf, size_t cap, int fd)
{
    o->buf = buf;
    o->cap = cap;
    o->len = 0;
    o->fd = fd;
    o->err = 0;
    o->sock = 0;
}

void mt_out_init_socket(mt_out *o, char *buf, size_t cap, int fd)
{
    mt_out_init(o, buf, cap, fd);
    o->sock = 1;
}

int mt_out_flush(mt_out *o)
{
    /* After a failed write the rest is dropped: a file with a hole would
     * mislead, and a peer that stopped reading would make every later
     * flush wait out the socket's send timeout again. */
    if (o->err != 0)
        o->len = 0;
    if (o->fd >= 0 && o->len > 0) {
        int rc = o->sock ? mt_send_all(o->fd, o->buf, o->len) : mt_write_all(o->fd, o->buf, o->len);
        if (rc < 0 && o->err == 0)
            o->err = rc;
        o->len = 0;
    }
    return o->err;
}

void mt_out_mem(mt_out *o, const char *s, size_t n)
{
    while (n > 0) {
        if (o->len == o->cap) {
            if (o->fd < 0) {
                if (o->err == 0)
                    o->err = -ENOSPC;
                return;
            }
            mt_out_flush(o);
        }
        size_t room = o->cap - o->len;
        size_t k = n < room ? n : room;
        for (size_t i = 0; i < k; i++)
            o->buf[o->len + i] = s[i];
        o->len += k;
        s += k;
        n -= k;
    }
}

void mt_out_str(mt_out *o, const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    mt_out_mem(o, s, n);
}

void mt_out_shown(mt_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) {
            mt_out_char(o, (char)c);
        } else {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            mt_out_mem(o, e, sizeof e);
        }
    }
}

void mt_out_char(mt_out *o, char c)
{
    mt_out_mem(o, &c, 1);
}

void mt_out_u64(mt_out *o, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    mt_out_mem(o, tmp + i, sizeof tmp - i);
}

void mt_out_i64(mt_out *o, int64_t v)
{
    if (v < 0) {
        mt_out_char(o, '-');
        mt_out_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        mt_out_u64(o, (uint64_t)v);
    }
}

void mt_out_hex(mt_out *o, uint64_t v)
{
    char tmp[18];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    mt_out_mem(o, tmp + i, sizeof tmp - i);
}

const char *mt_out_cstr(mt_out *o)
{
    if (o->cap == 0)
        return "";
    if (o->len == o->cap)
        o->len--;
    o->buf[o->len] = '\0';
    return o->buf;
}

void mt_out_field(mt_out *o, const char *key, int64_t v)
{
    mt_out_char(o, ' ');
    mt_out_str(o, key);
    mt_out_char(o, '=');
    mt_out_i64(o, v);
}

void mt_out_word_char(mt_out *o, char c)
{
    if (c == ' ')
        mt_out_str(o, "\\s");
    else if (c == '\n')
        mt_out_str(o, "\\n");
    else if (c == '\\')
        mt_out_str(o, "\\\\");
    else
        mt_out_char(o, c);
}
