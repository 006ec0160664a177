/* safe_file.c — creating the files memtrail writes without following
 * links or clobbering what is not its own (the rules: safe_file.h).
 * Raw system calls on caller-owned memory only: usable from the agent's
 * exit and crash paths as from the CLI. */
#include "common/safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* renameat, renameat2 */
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/out.h"

/* ---- the output directory ------------------------------------------------ */

/* Kept open for the process's life. Several threads may look it up at
 * once (a trace's writer thread, a report at exit): the descriptor is
 * published atomically, and a re-open that loses a race closes its own. */
static struct {
    char path[MT_FILE_PATH_MAX];
    size_t len; /* 0: none */
    int fd;     /* -1: not open */
    dev_t dev;
    ino_t ino;
} outdir = {.fd = -1};

/* The descriptor limit, or 1024 if it is higher (select(2)'s range). */
static long fd_limit(void)
{
    struct rlimit rl;
    long lim = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < lim)
        lim = (long)rl.rlim_cur;
    return lim;
}

int mt_file_fd_out_of_way(int fd)
{
    long lim = fd_limit();
    return lim >= 32 && fd >= 3 && fd >= lim / 2;
}

int mt_file_fd_kept_high(int fd)
{
    fd = mt_file_fd_high(fd);
    if (fd >= 0 && !mt_file_fd_out_of_way(fd)) {
        close(fd);
        errno = EMFILE;
        return -1;
    }
    return fd;
}

int mt_file_fd_is(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

int mt_file_fd_high(int fd)
{
    long lim = fd_limit();
    /* The top of the range a program's own descriptors rarely reach (and
     * select(2) never needs), then the middle. */
    long starts[2] = {lim - 16, lim / 2};
    for (int i = 0; i < 2; i++) {
        if (starts[i] <= fd || starts[i] < 3)
            continue;
        int high = fcntl(fd, F_DUPFD_CLOEXEC, (int)starts[i]);
        if (high >= 0) {
            close(fd);
            return high;
        }
    }
    if (fd >= 0 && fd < 3) { /* a program started with 0-2 closed opens them expecting exactly them */
        int above = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (above >= 0) {
            close(fd);
            return above;
        }
    }
    return fd;
}

static int open_dir(const char *path)
{
    int fd = openat(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* The kept descriptor if it still is our directory. A descriptor the
 * program closed (and perhaps reused for something else) is forgotten,
 * never closed: its number may be the program's now. */
static int outdir_fd(void)
{
    int fd = __atomic_load_n(&outdir.fd, __ATOMIC_ACQUIRE);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == outdir.dev &&
        st.st_ino == outdir.ino)
        return fd;
    int nfd = open_dir(outdir.path);
    if (nfd < 0)
        return nfd;
    nfd = mt_file_fd_kept_high(nfd); /* a tiny ulimit -n: -EMFILE, opened for each file (dir_of) */
    if (nfd < 0)
        return -EMFILE;
    if (fstat(nfd, &st) != 0) {
        int e = -errno;
        close(nfd);
        return e;
    }
    /* Replaced by another directory of that name (or seen from inside a
     * chroot): that is where the path leads now. */
    outdir.dev = st.st_dev;
    outdir.ino = st.st_ino;
    if (!__atomic_compare_exchange_n(&outdir.fd, &fd, nfd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        close(nfd);
        return fd;
    }
    return nfd;
}

/* The length of the directory part of path (no trailing slash, except
 * for "/"), and in *base the offset of the last component. 0: a bare name. */
static size_t split(const char *path, size_t *base)
{
    size_t n = strlen(path), b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    *base = b;
    if (b == 0)
        return 0;
    return b == 1 ? 1 : b - 1;
}

int mt_file_outdir_set(const char *path, int is_file)
{
    size_t base, len = is_file ? split(path, &base) : strlen(path);
    if (len == 0 || len >= sizeof outdir.path)
        return -ENAMETOOLONG;
    memcpy(outdir.path, path, len);
    outdir.path[len] = '\0';
    int fd = open_dir(outdir.path);
    if (fd < 0) {
        outdir.len = 0;
        return fd;
    }
    /* Under a descriptor limit too small to keep it out of the program's
     * way (-1), the directory is opened by its path for each file (dir_of),
     * as when the program closed it. */
    fd = mt_file_fd_kept_high(fd);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) {
        int e = -errno;
        close(fd);
        outdir.len = 0;
        return e;
    }
    if (fd >= 0) {
        outdir.dev = st.st_dev;
        outdir.ino = st.st_ino;
    }
    int old = __atomic_exchange_n(&outdir.fd, fd, __ATOMIC_ACQ_REL);
    (void)old; /* set once at start-up; an earlier one is the program's by now */
    outdir.len = len;
    return 0;
}

/* f->dirfd for `path`'s directory (the kept one when it is that), and the
 * last component copied into f->name. */
static int dir_of(mt_file *f, const char *path)
{
    size_t base, dlen = split(path, &base);
    size_t nlen = strlen(path + base);
    f->dirfd = AT_FDCWD;
    f->own_dirfd = 0;
    f->fd = -1;
    f->tmp[0] = '\0';
    if (nlen == 0)
        return -EISDIR; /* "dir/" or "" */
    if (nlen >= sizeof f->name || dlen >= sizeof f->dir)
        return -ENAMETOOLONG;
    memcpy(f->name, path + base, nlen + 1);
    if (dlen == 0)
        return 0;
    memcpy(f->dir, path, dlen);
    f->dir[dlen] = '\0';
    if (outdir.len == dlen && memcmp(outdir.path, f->dir, dlen) == 0) {
        int fd = outdir_fd();
        if (fd >= 0) {
            f->dirfd = fd;
            return 0;
        }
    }
    int fd = open_dir(f->dir);
    if (fd < 0)
        return fd;
    f->dirfd = fd;
    f->own_dirfd = 1;
    return 0;
}

static void drop_dir(mt_file *f)
{
    if (f->own_dirfd)
        close(f->dirfd);
    f->own_dirfd = 0;
    f->dirfd = AT_FDCWD;
}

/* ---- the rules ----------------------------------------------------------- */

/* 1: nothing at the name; 0: a file the rules allow replacing; or the
 * rules' error. */
static int judge(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 1 : -errno;
    if (S_ISLNK(st.st_mode))
        return -ELOOP;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    if (!S_ISREG(st.st_mode))
        return -ENODEV;
    if (st.st_uid != geteuid())
        return -EEXIST;
    return 0;
}

int mt_file_check(int dirfd, const char *name)
{
    int rc = judge(dirfd, name);
    return rc < 0 ? rc : 0;
}

const char *mt_file_strerror(int rc)
{
    switch (-rc) {
    case ELOOP: return "is a symbolic link (not followed)";
    case EISDIR: return "is a directory";
    case ENODEV: return "is not a regular file (a device, FIFO or socket: left alone)";
    case EEXIST: return "is another user's file (not replaced)";
    case ENXIO: return "is a FIFO no process is reading (not waited for)";
    default: break;
    }
    const char *s = rc < 0 ? strerrordesc_np(-rc) : NULL;
    return s ? s : "unknown error";
}

/* NAME.tmp.PID.TID (.K after a clash), NAME cut short to fit in a path
 * component. Directory listings skip *.tmp.* names (memtrail report DIR). */
static void tmp_name(mt_file *f, unsigned k)
{
    char suffix[64];
    mt_out o;
    mt_out_init(&o, suffix, sizeof suffix, -1);
    mt_out_str(&o, ".tmp.");
    mt_out_u64(&o, (uint64_t)getpid());
    mt_out_char(&o, '.');
    mt_out_u64(&o, (uint64_t)syscall(SYS_gettid));
    if (k) {
        mt_out_char(&o, '.');
        mt_out_u64(&o, k);
    }
    size_t slen = o.len, nlen = strlen(f->name);
    if (nlen + slen >= sizeof f->tmp)
        nlen = sizeof f->tmp - 1 - slen;
    memcpy(f->tmp, f->name, nlen);
    memcpy(f->tmp + nlen, suffix, slen);
    f->tmp[nlen + slen] = '\0';
}

/* The checks, then the temporary, created exclusively: never a file
 * someone else put there, never through a link. */
static int begin(mt_file *f)
{
    int rc = mt_file_check(f->dirfd, f->name);
    if (rc < 0)
        return rc;
    for (unsigned k = 0; k < 100; k++) {
        tmp_name(f, k);
        int fd = openat(f->dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            f->fd = fd;
            return 0;
        }
        if (errno != EEXIST) /* a clash (left by a killed writer): the next name */
            break;
    }
    rc = -errno;
    f->tmp[0] = '\0';
    return rc;
}

int mt_file_begin_at(mt_file *f, int dirfd, const char *name)
{
    size_t n = strlen(name);
    f->dirfd = dirfd;
    f->own_dirfd = 0;
    f->fd = -1;
    f->tmp[0] = '\0';
    if (n == 0 || memchr(name, '/', n))
        return -EINVAL;
    if (n >= sizeof f->name)
        return -ENAMETOOLONG;
    memcpy(f->name, name, n + 1);
    return begin(f);
}

int mt_file_begin_path(mt_file *f, const char *path)
{
    int rc = dir_of(f, path);
    if (rc == 0)
        rc = begin(f);
    if (rc < 0)
        drop_dir(f);
    return rc;
}

/* The temporary renamed over the name, checked once more just before (a
 * name that was free is taken only if still free). */
static int put_in_place(mt_file *f)
{
    int rc = judge(f->dirfd, f->name);
    if (rc == 1) {
        if (renameat2(f->dirfd, f->tmp, f->dirfd, f->name, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno == EEXIST) /* appeared meanwhile: judged like any other */
            rc = judge(f->dirfd, f->name);
        else if (errno != EINVAL && errno != ENOSYS) /* EINVAL: no RENAME_NOREPLACE on this file system */
            return -errno;
    }
    if (rc < 0)
        return rc;
    return renameat(f->dirfd, f->tmp, f->dirfd, f->name) == 0 ? 0 : -errno;
}

int mt_file_commit(mt_file *f)
{
    int rc = 0;
    if (f->fd >= 0) {
        /* EINTR: Linux has closed the descriptor anyway. */
        if (close(f->fd) != 0 && errno != EINTR)
            rc = -errno;
        f->fd = -1;
    }
    if (rc == 0 && f->tmp[0])
        rc = put_in_place(f);
    if (rc < 0 && f->tmp[0])
        unlinkat(f->dirfd, f->tmp, 0);
    f->tmp[0] = '\0';
    drop_dir(f);
    return rc;
}

void mt_file_abort(mt_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp[0])
        unlinkat(f->dirfd, f->tmp, 0);
    f->tmp[0] = '\0';
    drop_dir(f);
}

/* A FIFO some process is reading: written into, never replaced. Opened
 * without waiting (no reader: -ENXIO, where a plain open would block for
 * ever), then made blocking so that a slow reader holds the writer back. */
static int open_fifo(mt_file *f)
{
    int fd = openat(f->dirfd, f->name, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        close(fd);
        return -ENODEV;
    }
    return fd;
}

int mt_file_open_stream(mt_file *f, const char *path)
{
    int rc = dir_of(f, path);
    if (rc == 0) {
        int fd = openat(f->dirfd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            drop_dir(f);
            return fd;
        }
        rc = -errno;
    }
    struct stat st;
    if (rc == -EEXIST && fstatat(f->dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode)) {
        rc = open_fifo(f);
    } else if (rc == -EEXIST && (rc = begin(f)) == 0) {
        rc = put_in_place(f);
        if (rc == 0)
            rc = f->fd;
        else
            mt_file_abort(f);
    }
    drop_dir(f);
    return rc;
}
