/* safe_file.h — the one way memtrail creates the files it writes (reports,
 * traces, crash reports, exports), in the agent and in the CLI.
 *
 * memtrail often runs as root, in directories other users can write
 * (/tmp). A name there may hold a symbolic link planted by someone else,
 * a device node, a FIFO, or another user's file. The rules:
 *  - a symbolic link at the name is never followed (-ELOOP);
 *  - only a regular file is ever replaced: a directory (-EISDIR), a device
 *    node, FIFO or socket (-ENODEV) is refused and left as it is (a file
 *    written as it goes may go into a FIFO being read: see below);
 *  - only a file the (effective) user owns is replaced (-EEXIST otherwise);
 *  - a file is written under a private temporary name, created
 *    exclusively (O_CREAT|O_EXCL|O_NOFOLLOW), and renamed over the name
 *    only once complete; nothing is truncated, and the only file ever
 *    unlinked is that temporary, which memtrail created.
 * A file written as it goes (a trace) is created the same way and renamed
 * into place at once (mt_file_open_stream), never opened with O_TRUNC.
 *
 * Everything here is raw system calls on caller-owned buffers: no malloc,
 * no stdio, no locks, so the agent can use it from exit handlers and from
 * its crash handler (async-signal-safe). Functions return 0 (or an fd) or
 * a negative errno; mt_file_strerror says what the codes above mean.
 *
 * The output directory: the agent opens the directory of its output once
 * at start-up (mt_file_outdir_set) and later resolves paths in it through
 * that descriptor, so a program that changes its user id, its root
 * (chroot) or its working directory still writes its reports there. */
#ifndef MT_COMMON_SAFE_FILE_H
#define MT_COMMON_SAFE_FILE_H

#include <stddef.h>
#include <sys/types.h>

#define MT_FILE_NAME_MAX 256  /* one path component and its NUL (NAME_MAX + 1) */
#define MT_FILE_PATH_MAX 4096 /* a whole path and its NUL (PATH_MAX) */

typedef struct mt_file {
    int dirfd;                   /* the directory of the file (AT_FDCWD for a bare name) */
    int own_dirfd;               /* dirfd was opened for this file: closed by commit/abort */
    int fd;                      /* the file being written; -1 once closed */
    char name[MT_FILE_NAME_MAX]; /* the final name, in dirfd */
    char tmp[MT_FILE_NAME_MAX];  /* the temporary name, in dirfd ("" if none) */
    char dir[MT_FILE_PATH_MAX];  /* scratch: the directory part of a path */
} mt_file;

/* May `name` in dirfd be written (replaced)? 0 when nothing is there or a
 * regular file the effective user owns; -ELOOP, -EISDIR, -ENODEV, -EEXIST
 * (as above), or the -errno of looking (-EACCES, -ENOTDIR, ...). */
int mt_file_check(int dirfd, const char *name);

/* Starts writing `path` (or `name` in dirfd): checks the name, then
 * creates a private temporary beside it; write to f->fd. 0 or -errno;
 * on failure nothing is left behind and f needs no abort. */
int mt_file_begin_path(mt_file *f, const char *path);
int mt_file_begin_at(mt_file *f, int dirfd, const char *name);

/* Finishes: closes f->fd (unless the caller set it to -1 after closing it
 * itself), checks the name again and renames the temporary over it. On
 * any failure the temporary is removed and the name left as it was.
 * 0 or -errno. */
int mt_file_commit(mt_file *f);

/* Gives up: closes f->fd (if still open) and removes the temporary. */
void mt_file_abort(mt_file *f);

/* Opens `path` to be written as it goes (a trace): a new file created
 * exclusively, or, when a file the rules allow replacing is there, a new
 * file renamed over it now. The fd (O_WRONLY|O_CLOEXEC, at offset 0, empty)
 * or -errno. f is scratch space (about 5 KB: not on a small stack).
 * One exception to "regular files only": a FIFO that a process is already
 * reading is written into (a stream's consumer); with no reader it is
 * refused (-ENXIO) rather than waited for. */
int mt_file_open_stream(mt_file *f, const char *path);

/* What an error of these functions means, for a message: the rules' codes
 * get their own words ("is a symbolic link (not followed)", ...), others
 * strerror's. Static text; async-signal-safe. */
const char *mt_file_strerror(int rc);

/* The output directory: `dir` (a path, or the directory part of a path
 * when `is_file`) is opened now and kept open (close-on-exec, duplicated
 * to a high descriptor number so that programs that dup2 onto low numbers
 * leave it alone). Later paths in that directory are resolved through it;
 * if the program closed or reused the descriptor, or the descriptor limit
 * is too small to keep one out of the program's way, the directory is
 * opened again by its path. 0 or -errno (then paths are resolved as given). */
int mt_file_outdir_set(const char *path, int is_file);

/* dup fd to a high number (close-on-exec), closing fd: the top of the
 * descriptor limit, else its middle, else at least 3 (0-2 stay the
 * program's); fd itself when none of those is free. */
int mt_file_fd_high(int fd);
/* Whether a descriptor kept for the process's life at fd stays out of the
 * program's way: in the upper half of a limit of 32 or more. Below that,
 * a program sized for its limit would miss every descriptor taken. */
int mt_file_fd_out_of_way(int fd);
/* A descriptor to keep for the process's life: mt_file_fd_high, then the
 * new number when it is out of the program's way; else -1 with errno
 * EMFILE, fd closed (the limit leaves no room for one). */
int mt_file_fd_kept_high(int fd);
/* Whether fd is open on the file dev/ino (a number the program closed
 * behind the agent's back and got again is not). Async-signal-safe. */
int mt_file_fd_is(int fd, dev_t dev, ino_t ino);

#endif
