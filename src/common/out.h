/* out.h — formatted output without malloc or stdio.
 *
 * The agent must format reports and error lines from inside malloc, from
 * exit handlers and (later) from signal handlers, where snprintf and stdio
 * may allocate or take locks. mt_out appends into a caller-owned buffer and,
 * when it has a file descriptor, flushes to it with write(2) as it fills. */
#ifndef MT_COMMON_OUT_H
#define MT_COMMON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct mt_out {
    char *buf;
    size_t cap;
    size_t len;
    int fd;   /* -1: memory only, output past cap is dropped */
    int err;  /* first negative errno from write(2), or -ENOSPC */
    int sock; /* fd is a socket: sent with MSG_NOSIGNAL, so a client gone raises no SIGPIPE */
} mt_out;

void mt_out_init(mt_out *o, char *buf, size_t cap, int fd);
/* The same for a connected socket (a control-socket reply streamed as it
 * is formatted). */
void mt_out_init_socket(mt_out *o, char *buf, size_t cap, int fd);
void mt_out_str(mt_out *o, const char *s);
void mt_out_mem(mt_out *o, const char *s, size_t n);
void mt_out_char(mt_out *o, char c);
/* Bytes someone else gave (an option's value, a session definition) in a
 * one-line message: printable ASCII as it is, any other byte as \xNN, so
 * that a value can neither end the line nor drive the terminal. */
void mt_out_shown(mt_out *o, const char *s, size_t n);
/* c as a report line writes a word of free text (docs/report-format.md's
 * cmdline rule): a space as \s, a newline as \n, a backslash as \\. */
void mt_out_word_char(mt_out *o, char c);
void mt_out_u64(mt_out *o, uint64_t v);
void mt_out_i64(mt_out *o, int64_t v);
void mt_out_hex(mt_out *o, uint64_t v); /* 0x-prefixed */
/* " key=value": one field of a report line. */
void mt_out_field(mt_out *o, const char *key, int64_t v);
/* Writes what is buffered; returns 0 or the first error seen. */
int mt_out_flush(mt_out *o);
/* NUL-terminates a memory-only buffer (truncating if full) and returns it. */
const char *mt_out_cstr(mt_out *o);

/* write(2) all of buf, retrying on EINTR and short writes. 0 or -errno. */
int mt_write_all(int fd, const void *buf, size_t n);
/* send(2) all of buf to a connected socket, without raising SIGPIPE (a
 * client gone is -EPIPE). 0 or -errno. */
int mt_send_all(int fd, const void *buf, size_t n);
/* write(2), but never one the process's RLIMIT_FSIZE answers with
 * SIGXFSZ, whose default action would end the program: a write into a
 * regular file that would start at or past the limit fails with EFBIG
 * instead (one that would cross it, the kernel cuts short at the limit
 * without a signal). The agent's report and trace writes go through it;
 * the limit is the program's, so the file stops there, with an error. */
ssize_t mt_write_in_limit(int fd, const void *buf, size_t n);

#endif
