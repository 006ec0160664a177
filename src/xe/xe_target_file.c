/* xe_target_file.c — the event_file target: events encoded into files
 * that roll over at max_file_size, keeping at most max_rollover_files.
 *
 * Files: the first is `filename` itself, each rollover the next of
 * `filename.1`, `filename.2`, ...; opening number n deletes number
 * n - max_rollover_files (0: keep them all). A file is opened at the first
 * event (with the encoder's header) and rolls over before a record that
 * would take it past max_file_size, unless it has no record yet (so each
 * file holds at least one).
 *
 * The dispatcher encodes events into an mmap'd staging buffer and writes
 * it with write(2) when full and at each flush. An open or write that
 * fails (ENOSPC, EACCES, ...) is counted and the events it carried are
 * dropped; the file is cut back to its last whole record so what was
 * written stays readable. The encoder is xe_file_set_encoder's (the trace
 * format, issue 7) or the raw one of docs/events.md. */
#include "xe/xe.h"
#include "xe/xe_internal.h"
#include "xe/xe_util.h"
#include "common/out.h"
#include "common/safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_DEFAULT_MAX_SIZE (1ull << 30) /* 1 GB */
#define FILE_DEFAULT_ROLLOVER 5
#define FILE_MAX_ROLLOVER 1000000
#define FILE_STAGE (256u << 10)

/* ---- the raw encoding ----
 * Header: "MTXERAW1", u32 version (1), u32 record size (72). Records, all
 * little-endian: u16 type, u16 category, u32 tid, u32 cpu, u32 data_len,
 * u64 time_ns, size, address, old_address, site, key, value. */
#define RAW_VERSION 1u
#define RAW_RECORD 72u

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static size_t raw_header(void *buf, size_t cap)
{
    unsigned char *p = buf;
    if (cap < 16)
        return 0;
    memcpy(p, "MTXERAW1", 8);
    put32(p + 8, RAW_VERSION);
    put32(p + 12, RAW_RECORD);
    return 16;
}

static size_t raw_encode(const xe_event *evs, size_t n, void *buf, size_t cap, size_t *consumed)
{
    unsigned char *p = buf;
    size_t i = 0;
    for (; i < n && (i + 1) * RAW_RECORD <= cap; i++, p += RAW_RECORD) {
        const xe_event *ev = &evs[i];
        put16(p, ev->type);
        put16(p + 2, ev->category);
        put32(p + 4, ev->tid);
        put32(p + 8, ev->cpu);
        put32(p + 12, ev->data_len);
        put64(p + 16, ev->time_ns);
        put64(p + 24, ev->size);
        put64(p + 32, ev->address);
        put64(p + 40, ev->old_address);
        put64(p + 48, ev->site);
        put64(p + 56, ev->key);
        put64(p + 64, ev->value);
    }
    *consumed = i;
    return i * RAW_RECORD;
}

static const xe_file_encoder raw_encoder = {.name = "raw", .file_header = raw_header, .encode = raw_encode};
static const xe_file_encoder *file_encoder;

/* The agent's guard over its descriptors (xe.h's xe_file_set_fd_guard). */
static void (*fd_keep)(int *where), (*fd_forget)(int *where);

void xe_file_set_fd_guard(void (*keep)(int *where), void (*forget)(int *where))
{
    fd_keep = keep;
    fd_forget = forget;
}

void xe_file_set_encoder(const xe_file_encoder *enc)
{
    __atomic_store_n(&file_encoder, enc, __ATOMIC_RELEASE);
}

/* A size slice (not NUL-terminated) through xe_parse_size. */
static int file_parse_size(const char *s, size_t n, uint64_t bare_unit, uint64_t *out)
{
    char tmp[64];
    if (n >= sizeof tmp)
        return -EINVAL;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    return xe_parse_size(tmp, bare_unit, out);
}

/* ---- state ---- */

enum { OP_NONE, OP_OPEN, OP_WRITE };

typedef struct file_state {
    char filename[sizeof(((xe_target *)0)->params)]; /* the template's, for this process */
    char templ[sizeof(((xe_target *)0)->params)];    /* as given: %p is the process's id */
    pid_t pid;                                       /* the process these files are for */
    uint64_t max_file_size;
    uint64_t max_rollover; /* 0: no limit */
    const xe_file_encoder *enc;
    int current;         /* a file is open, and not ended (in fd, or to be reopened) */
    int fd;              /* -1: none open, or let go (file_fd) */
    uint64_t dev, ino;   /* the current file (file_fd) */
    int open_tried;      /* an open failed since the last flush */
    uint64_t opened;     /* files opened so far */
    uint64_t seq;        /* the current (last opened) file's number */
    uint64_t file_bytes; /* written to the current file */
    size_t header_len;
    size_t staged;
    uint64_t staged_events;
    /* Read by the view. */
    uint64_t reopened; /* times the current file was opened again (file_fd) */
    uint64_t bytes_written, events_written, events_dropped, write_errors;
    uint64_t last_op, last_errno;
    void *est; /* a stateful encoder's state */
    unsigned char stage[FILE_STAGE];
} file_state;

static int file_write(file_state *s, const void *buf, size_t n);

/* A stateful encoder's writes: 0 or -errno (nothing open: -EBADF). */
static int encoder_write(void *ctx, const void *buf, size_t n)
{
    file_state *s = ctx;
    if (!s->current)
        return -EBADF;
    if (file_write(s, buf, n) < 0) {
        int e = (int)xe_stat_get(&s->last_errno);
        return e ? -e : -EIO;
    }
    return 0;
}

/* This process's file name from the template: %p is its id (%% a %).
 * A fork child (child = 1) whose template has no %p writes
 * "<template>.<pid>", as a trace does: never the parent's files. */
static void name_files(file_state *s, int child)
{
    s->pid = getpid();
    mt_out o;
    mt_out_init(&o, s->filename, sizeof s->filename, -1);
    int has_pid = 0;
    for (const char *c = s->templ; *c; c++) {
        if (c[0] == '%' && (c[1] == 'p' || c[1] == '%')) {
            has_pid |= c[1] == 'p';
            if (c[1] == 'p')
                mt_out_u64(&o, (uint64_t)s->pid);
            else
                mt_out_char(&o, '%');
            c++;
        } else {
            mt_out_char(&o, *c);
        }
    }
    if (child && !has_pid) {
        mt_out_char(&o, '.');
        mt_out_u64(&o, (uint64_t)s->pid);
    }
    mt_out_cstr(&o);
}

static int file_init(xe_target *t, const char *params, char *why, size_t whylen)
{
    xe_param p[] = {{.name = "filename"}, {.name = "max_file_size"}, {.name = "max_rollover_files"}};
    uint64_t max_size = FILE_DEFAULT_MAX_SIZE, rollover = FILE_DEFAULT_ROLLOVER;
    int rc = xe_params_parse("event_file", params, p, 3, why, whylen);
    if (rc == 0 && (!p[0].set || p[0].len == 0)) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "event_file needs filename=");
        xe_why_done(&o);
        rc = -EINVAL;
    }
    if (rc == 0 && p[1].set &&
        (file_parse_size(p[1].val, p[1].len, 1u << 20, &max_size) < 0 || max_size == 0)) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "event_file: max_file_size='");
        mt_out_shown(&o, p[1].val, p[1].len);
        mt_out_str(&o, "' is not a size (a number of MB, or with a unit: B, KB, MB, GB)");
        xe_why_done(&o);
        rc = -EINVAL;
    }
    if (rc == 0 && p[2].set)
        rc = xe_param_u64("event_file", &p[2], 0, FILE_MAX_ROLLOVER, &rollover, why, whylen);
    if (rc < 0)
        return rc;
    file_state *s = xe_map(sizeof *s);
    if (!s) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "event_file: cannot map its staging buffer");
        xe_why_done(&o);
        return -ENOMEM;
    }
    size_t n = p[0].len < sizeof s->templ - 1 ? p[0].len : sizeof s->templ - 1;
    memcpy(s->templ, p[0].val, n);
    name_files(s, 0);
    s->max_file_size = max_size;
    s->max_rollover = rollover;
    s->enc = __atomic_load_n(&file_encoder, __ATOMIC_ACQUIRE);
    if (!s->enc)
        s->enc = &raw_encoder;
    s->fd = -1;
    if (s->enc->create && !(s->est = s->enc->create(encoder_write, s))) {
        xe_unmap(s, sizeof *s);
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "event_file: cannot set up its encoder (");
        mt_out_str(&o, s->enc->name);
        mt_out_str(&o, ")");
        xe_why_done(&o);
        return -ENOMEM;
    }
    xe_params_keep(t, params);
    t->state = s;
    t->state_bytes = sizeof *s;
    return 0;
}

/* Whether fd is the file opened as the current one (its device and
 * inode, noted at the open). */
static int same_file(const file_state *s, int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == s->dev && (uint64_t)st.st_ino == s->ino;
}

/* Closes the current file's descriptor: the variable first, so that the
 * close is not taken for the program's (xe_file_set_fd_guard). Only
 * while it is still that file: a number the program took back after
 * closing it behind the hooks is the program's (file_fd), let go. */
static void drop_fd(file_state *s)
{
    int fd = s->fd;
    __atomic_store_n(&s->fd, -1, __ATOMIC_RELEASE);
    if (same_file(s, fd))
        close(fd);
}

/* "<filename>" for file 0, "<filename>.<seq>" after. */
static void file_path(const file_state *s, uint64_t seq, char *buf, size_t cap)
{
    mt_out o;
    mt_out_init(&o, buf, cap, -1);
    mt_out_str(&o, s->filename);
    if (seq) {
        mt_out_char(&o, '.');
        mt_out_u64(&o, seq);
    }
    mt_out_cstr(&o);
}

static void file_error(file_state *s, int op, int err)
{
    xe_stat_add(&s->write_errors, 1);
    __atomic_store_n(&s->last_op, (uint64_t)op, __ATOMIC_RELAXED);
    __atomic_store_n(&s->last_errno, (uint64_t)err, __ATOMIC_RELAXED);
}

/* The current file opened again by its name, when the name still leads
 * to it (the same device and inode; not through a symbolic link): the
 * descriptor at the offset written so far, or -1. A FIFO is opened only
 * while a process reads it, as mt_file_open_stream does. */
static int file_reopen(file_state *s)
{
    char path[sizeof s->filename + 24];
    file_path(s, s->seq, path, sizeof path);
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != s->dev || (uint64_t)st.st_ino != s->ino) {
        close(fd);
        return -ESTALE; /* the name leads to another file now */
    }
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        (S_ISREG(st.st_mode) && lseek(fd, (off_t)s->file_bytes, SEEK_SET) != (off_t)s->file_bytes)) {
        int e = errno;
        close(fd);
        return -e;
    }
    return mt_file_fd_high(fd);
}

/* The current file's descriptor, checked, or -errno (the reopen's). A program that closes
 * descriptors behind the agent's guard (the close or close_range system
 * call itself, which no hook sees) gets the number back at its next open:
 * writing there would put events into the program's own file. So before
 * each write the descriptor must still be the file opened (fstat: its
 * device and inode). One that is not, or that the guard let go (-1), is
 * given up without a close (the number is the program's now), and the
 * file is opened again by its name (file_reopen): nothing written so far
 * and nothing still to write is lost. One fstat per write: a write is a
 * staging buffer or an encoder's chunk. */
static int file_fd(file_state *s)
{
    int fd;
    for (;;) {
        fd = __atomic_load_n(&s->fd, __ATOMIC_ACQUIRE);
        if (same_file(s, fd))
            return fd;
        /* not moved by the guard meanwhile (a dup2: then check the new number) */
        if (fd < 0 || __atomic_compare_exchange_n(&s->fd, &fd, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            break;
    }
    fd = file_reopen(s);
    if (fd < 0)
        return fd;
    __atomic_store_n(&s->fd, fd, __ATOMIC_RELEASE);
    if (fd_keep)
        fd_keep(&s->fd);
    xe_stat_add(&s->reopened, 1);
    return fd;
}

/* Writes all of buf to the current file; on failure cuts the file back to
 * its size before, so it ends on a whole record. */
static int file_write(file_state *s, const void *buf, size_t n)
{
    const char *p = buf;
    size_t left = n;
    int fd = file_fd(s);
    if (fd < 0) {
        file_error(s, OP_WRITE, -fd); /* the reopen's error (file_fd) */
        return -1;
    }
    while (left > 0) {
        /* loaded anew: the agent's guard may have moved it (xe_file_set_fd_guard) */
        ssize_t w = mt_write_in_limit(__atomic_load_n(&s->fd, __ATOMIC_ACQUIRE), p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            file_error(s, OP_WRITE, w < 0 ? errno : ENOSPC);
            if (left < n && ftruncate(s->fd, (off_t)s->file_bytes) == 0)
                (void)lseek(s->fd, (off_t)s->file_bytes, SEEK_SET);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    s->file_bytes += n;
    xe_stat_add(&s->bytes_written, n);
    return 0;
}

/* Closes the current file and opens the next (the first when none was
 * opened yet) with its header. A file whose open or header fails does not
 * count: the next attempt (after the next flush) tries the same number. */
static int file_open_next(file_state *s)
{
    char path[sizeof s->filename + 24];
    uint64_t seq = s->opened ? s->seq + 1 : 0;
    s->open_tried = 1;
    if (s->current) {
        if (s->est)
            s->enc->end(s->est);
        drop_fd(s);
        s->current = 0;
    }
    file_path(s, seq, path, sizeof path);
    /* Never through a symbolic link, never truncating: a new file, renamed
     * over an old one the user owns (safe_file.h). */
    mt_file scratch;
    int fd = mt_file_open_stream(&scratch, path);
    if (fd < 0) {
        file_error(s, OP_OPEN, -fd);
        return -1;
    }
    /* high, out of the numbers a program reuses first */
    fd = mt_file_fd_high(fd);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        file_error(s, OP_OPEN, errno);
        close(fd);
        return -1;
    }
    s->dev = (uint64_t)st.st_dev;
    s->ino = (uint64_t)st.st_ino;
    __atomic_store_n(&s->fd, fd, __ATOMIC_RELEASE);
    if (fd_keep)
        fd_keep(&s->fd);
    s->current = 1;
    s->file_bytes = 0;
    unsigned char hdr[256];
    s->header_len = s->enc->file_header ? s->enc->file_header(hdr, sizeof hdr) : 0;
    int bad = s->est ? s->enc->begin(s->est) < 0 : s->header_len && file_write(s, hdr, s->header_len) < 0;
    if (s->est)
        s->header_len = s->file_bytes;
    if (bad) {
        drop_fd(s);
        s->current = 0;
        return -1;
    }
    __atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
    xe_stat_add(&s->opened, 1);
    if (s->max_rollover && seq >= s->max_rollover) {
        file_path(s, seq - s->max_rollover, path, sizeof path);
        if (mt_file_check(AT_FDCWD, path) == 0) /* still a regular file of ours, not a link planted since */
            (void)unlink(path);
    }
    return 0;
}

/* Writes the first `bytes` staged bytes holding `events` events. */
static void stage_write(file_state *s, size_t bytes, uint64_t events)
{
    if (bytes == 0)
        return;
    if (s->current && file_write(s, s->stage, bytes) == 0)
        xe_stat_add(&s->events_written, events);
    else
        xe_stat_add(&s->events_dropped, events);
    memmove(s->stage, s->stage + bytes, s->staged - bytes);
    s->staged -= bytes;
    s->staged_events -= events;
}

/* One event taken by a stateful encoder. It writes whole chunks; the
 * file rolls over after the one that took it to max_file_size (records
 * come in runs: file_deliver_recs). */
static void encoded_one(file_state *s)
{
    xe_stat_add(&s->events_written, 1);
    if (s->file_bytes >= s->max_file_size)
        (void)file_open_next(s);
}

static void file_deliver(xe_target *t, const xe_event *ev)
{
    file_state *s = t->state;
    if (!s->current && (s->open_tried || file_open_next(s) < 0)) {
        xe_stat_add(&s->events_dropped, 1);
        return;
    }
    if (s->est) {
        s->enc->event(s->est, ev);
        encoded_one(s);
        return;
    }
    size_t consumed = 0;
    size_t n = s->enc->encode(ev, 1, s->stage + s->staged, FILE_STAGE - s->staged, &consumed);
    if (n == 0 && s->staged > 0) {
        stage_write(s, s->staged, s->staged_events);
        n = s->enc->encode(ev, 1, s->stage, FILE_STAGE, &consumed);
    }
    if (n == 0 || consumed != 1) {
        xe_stat_add(&s->events_dropped, 1); /* bigger than the staging buffer */
        return;
    }
    s->staged += n;
    s->staged_events++;
    uint64_t before = s->file_bytes + s->staged - n; /* the file without this record */
    if (before + n > s->max_file_size && before > s->header_len) {
        stage_write(s, s->staged - n, s->staged_events - 1);
        /* On failure the record stays staged and is counted dropped at
         * the next write. */
        (void)file_open_next(s);
    }
}

/* A stateful encoder that takes records: as file_deliver hands it events,
 * but the file's size is looked at after the run. */
static uint64_t file_deliver_recs(xe_target *t, const char *recs, uint64_t bytes)
{
    file_state *s = t->state;
    if (!s->est || !s->enc->records || !s->current)
        return 0; /* file_deliver's way */
    xe_stat_add(&s->events_written, s->enc->records(s->est, recs, bytes));
    if (s->file_bytes >= s->max_file_size)
        (void)file_open_next(s);
    return bytes;
}

static void file_flush(xe_target *t)
{
    file_state *s = t->state;
    if (s->est && s->current)
        s->enc->flush(s->est);
    stage_write(s, s->staged, s->staged_events);
    s->open_tried = 0;
}

/* Time-ordered sessions: the encoder writes what is older than tsc. */
static void file_watermark(xe_target *t, uint64_t tsc)
{
    file_state *s = t->state;
    if (s->est && s->current && s->enc->watermark) {
        s->enc->watermark(s->est, tsc);
        if (s->file_bytes >= s->max_file_size)
            (void)file_open_next(s);
    }
}

/* A stopped session's file is finished and closed; a restart opens the next. */
static void file_stop(xe_target *t)
{
    file_state *s = t->state;
    if (!s->est || !s->current)
        return;
    s->enc->end(s->est);
    drop_fd(s);
    s->current = 0;
}

/* The session stops: as file_stop, and a file the encoder wants though
 * no event came is written now (a trace that another names). */
static void file_session_stop(xe_target *t)
{
    file_state *s = t->state;
    if (s->est && !s->current && !s->opened && s->enc->wanted && s->enc->wanted(s->est))
        (void)file_open_next(s);
    file_stop(t);
}

static const char *errno_name(uint64_t e)
{
    switch (e) {
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EROFS: return "EROFS";
    case EIO: return "EIO";
    case EFBIG: return "EFBIG";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ELOOP: return "ELOOP";   /* a symbolic link: not followed */
    case ENODEV: return "ENODEV"; /* not a regular file: left alone */
    case EEXIST: return "EEXIST"; /* another user's file: not replaced */
    case ENXIO: return "ENXIO";   /* a FIFO nobody reads: not waited for */
    case ESTALE: return "ESTALE"; /* reopening: the name leads to another file */
    default: return NULL;
    }
}

static void file_view(xe_target *t, mt_json *j)
{
    const file_state *s = t->state;
    uint64_t opened = xe_stat_get(&s->opened), seq = xe_stat_get(&s->seq);
    uint64_t files = s->max_rollover && opened > s->max_rollover ? s->max_rollover : opened;
    char path[sizeof s->filename + 24];
    mt_json_kstr(j, "filename", s->filename);
    if (opened) {
        file_path(s, seq, path, sizeof path);
        mt_json_kstr(j, "current_file", path);
    } else {
        mt_json_knull(j, "current_file");
    }
    mt_json_kstr(j, "encoding", s->enc->name);
    mt_json_ku64(j, "max_file_size_bytes", s->max_file_size);
    mt_json_ku64(j, "max_rollover_files", s->max_rollover);
    mt_json_ku64(j, "files", files);
    mt_json_ku64(j, "files_opened", opened);
    mt_json_ku64(j, "written_bytes", xe_stat_get(&s->bytes_written));
    mt_json_ku64(j, "events_written", xe_stat_get(&s->events_written));
    mt_json_ku64(j, "events_dropped", xe_stat_get(&s->events_dropped));
    mt_json_ku64(j, "write_errors", xe_stat_get(&s->write_errors));
    mt_json_ku64(j, "reopened", xe_stat_get(&s->reopened));
    uint64_t op = xe_stat_get(&s->last_op), err = xe_stat_get(&s->last_errno);
    if (op == OP_NONE) {
        mt_json_knull(j, "last_error");
    } else {
        char msg[64];
        mt_out m;
        mt_out_init(&m, msg, sizeof msg, -1);
        mt_out_str(&m, op == OP_OPEN ? "open: " : "write: ");
        const char *name = errno_name(err);
        if (name)
            mt_out_str(&m, name);
        else {
            mt_out_str(&m, "errno ");
            mt_out_u64(&m, err);
        }
        mt_json_kstr(j, "last_error", mt_out_cstr(&m));
    }
}

static void file_close(xe_target *t)
{
    file_state *s = t->state;
    if (!s)
        return;
    file_flush(t);
    file_stop(t);
    drop_fd(s);
    if (fd_forget)
        fd_forget(&s->fd);
    if (s->est)
        s->enc->destroy(s->est);
    xe_target_unmap_state(t);
}

/* A fork child's files start afresh: the parent's descriptor is let go
 * (nothing more goes into it from here), and so is whatever the parent
 * had staged or was doing (an open half done: open_tried). The counts
 * start again too: the child's view shows its own files. */
static void start_afresh(file_state *s)
{
    drop_fd(s);
    s->current = 0;
    s->open_tried = 0;
    s->opened = 0;
    s->seq = 0;
    s->file_bytes = 0;
    s->staged = 0;
    s->staged_events = 0;
    s->reopened = s->bytes_written = s->events_written = s->events_dropped = s->write_errors = 0;
    s->last_op = s->last_errno = 0;
    if (s->est && s->enc->forked)
        s->enc->forked(s->est);
}

/* The engine's fork handling (xe_dispatch_after_fork), unless the host
 * retargeted the file in this process already (a trace). */
static int file_forked(xe_target *t)
{
    file_state *s = t->state;
    if (s->pid == getpid())
        return 0;
    start_afresh(s);
    name_files(s, 1);
    return 1;
}

int xe_session_file_retarget(xe_session *sess, const char *filename)
{
    for (int i = 0; i < sess->nasync; i++) {
        xe_target *t = sess->async[i];
        if (t->ops != &xe_target_event_file)
            continue;
        file_state *s = t->state;
        start_afresh(s);
        s->pid = getpid();
        size_t n = strlen(filename);
        if (n >= sizeof s->filename)
            n = sizeof s->filename - 1;
        memcpy(s->filename, filename, n);
        s->filename[n] = '\0';
        /* Before the engine's fork handling, which starts the child's
         * generation: only buffers opened from then on are delivered. */
        sess->deliver_gen = atomic_load(&sess->fork_gen) + 1;
        return 0;
    }
    return -ENOENT;
}

int xe_session_file_status(xe_session *sess, xe_file_status *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < sess->nasync; i++) {
        xe_target *t = sess->async[i];
        if (t->ops != &xe_target_event_file)
            continue;
        const file_state *s = t->state;
        out->files_opened = xe_stat_get(&s->opened);
        out->events_dropped = xe_stat_get(&s->events_dropped);
        out->write_errors = xe_stat_get(&s->write_errors);
        out->reopened = xe_stat_get(&s->reopened);
        out->last_op = (int)xe_stat_get(&s->last_op);
        out->last_errno = (int)xe_stat_get(&s->last_errno);
        /* An open fails on the file after the current one (the first when none is open). */
        uint64_t seq = xe_stat_get(&s->seq) + (out->last_op == OP_OPEN && out->files_opened ? 1 : 0);
        file_path(s, out->files_opened || out->last_op == OP_OPEN ? seq : 0, out->path, sizeof out->path);
        return 0;
    }
    return -ENOENT;
}

const xe_target_ops xe_target_event_file = {
    .name = "event_file",
    .synchronous = 0,
    .init = file_init,
    .deliver = file_deliver,
    .flush = file_flush,
    .close = file_close,
    .view_json = file_view,
    .stop = file_session_stop,
    .watermark = file_watermark,
    .deliver_recs = file_deliver_recs,
    .forked = file_forked,
};
