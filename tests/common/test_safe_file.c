/* test_safe_file.c — src/common/safe_file.c against the file system: what
 * each name held before and after (lstat, content, hard links), on every
 * target the rules name (absent, regular, symbolic link, dangling link,
 * directory, FIFO with and without a reader; as root also device nodes
 * and another user's file), a temporary name taken by a planted link, a
 * name swapped for a link between begin and commit, and the kept output
 * directory after its descriptor is clobbered and after a chroot. */
#include "common/safe_file.h"
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[PATH_MAX];

static const char *at(const char *name)
{
    static char buf[4][PATH_MAX + 64];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The file's content ("" when unreadable), at most 255 bytes. */
static const char *get(const char *path)
{
    static char buf[256];
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    return buf;
}

static int is_link_to(const char *path, const char *target)
{
    char buf[PATH_MAX];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n < 0)
        return 0;
    buf[n] = '\0';
    return strcmp(buf, target) == 0;
}

/* Names in dir containing ".tmp.": temporaries left behind. */
static int temporaries(void)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

static int write_file(const char *path, const char *text)
{
    mt_file f;
    int rc = mt_file_begin_path(&f, path);
    if (rc < 0)
        return rc;
    if (write(f.fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        mt_file_abort(&f);
        return -EIO;
    }
    return mt_file_commit(&f);
}

static void test_check(int root)
{
    put(at("victim"), "precious");
    put(at("mine"), "mine");
    symlink(at("victim"), at("link"));
    symlink(at("nowhere"), at("dangling"));
    mkdir(at("dir"), 0755);
    mkfifo(at("fifo"), 0644);
    CHECK("check: nothing there", mt_file_check(AT_FDCWD, at("absent")) == 0);
    CHECK("check: a regular file of ours", mt_file_check(AT_FDCWD, at("mine")) == 0);
    CHECK("check: a symbolic link", mt_file_check(AT_FDCWD, at("link")) == -ELOOP);
    CHECK("check: a dangling symbolic link", mt_file_check(AT_FDCWD, at("dangling")) == -ELOOP);
    CHECK("check: a directory", mt_file_check(AT_FDCWD, at("dir")) == -EISDIR);
    CHECK("check: a FIFO", mt_file_check(AT_FDCWD, at("fifo")) == -ENODEV);
    if (root) {
        mknod(at("full"), S_IFCHR | 0666, makedev(1, 7));
        put(at("theirs"), "theirs");
        if (chown(at("theirs"), 65534, 65534) != 0)
            perror("chown");
        CHECK("check: a device node", mt_file_check(AT_FDCWD, at("full")) == -ENODEV);
        CHECK("check: another user's file", mt_file_check(AT_FDCWD, at("theirs")) == -EEXIST);
    }
    CHECK("strerror: the rules' own words",
          strcmp(mt_file_strerror(-ELOOP), "is a symbolic link (not followed)") == 0 &&
              strcmp(mt_file_strerror(-EEXIST), "is another user's file (not replaced)") == 0 &&
              strncmp(mt_file_strerror(-ENODEV), "is not a regular file", 21) == 0 &&
              strcmp(mt_file_strerror(-ENOSPC), "No space left on device") == 0);
}

static void test_write(int root)
{
    /* Refused names are left exactly as they were. */
    const char *refused[] = {"link", "dangling", "dir", "fifo", "full", "theirs"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (!root && i >= 4)
            break;
        struct stat before, after;
        lstat(at(refused[i]), &before);
        int rc = write_file(at(refused[i]), "report");
        lstat(at(refused[i]), &after);
        char name[64];
        snprintf(name, sizeof name, "write over %s: refused, left as it was", refused[i]);
        CHECK(name, rc < 0 && before.st_ino == after.st_ino && before.st_mode == after.st_mode &&
                        before.st_size == after.st_size);
    }
    CHECK("write over a link: its target untouched", strcmp(get(at("victim")), "precious") == 0);
    CHECK("write over a dangling link: nothing created through it", access(at("nowhere"), F_OK) != 0);
    if (root)
        CHECK("write over another user's file: its content kept", strcmp(get(at("theirs")), "theirs") == 0);

    /* A new file; then a file of ours, replaced whole: a hard link keeps the old. */
    CHECK("write a new file", write_file(at("new"), "first") == 0 && strcmp(get(at("new")), "first") == 0);
    link(at("new"), at("new.hard"));
    CHECK("write over a file of ours: replaced",
          write_file(at("new"), "second") == 0 && strcmp(get(at("new")), "second") == 0);
    CHECK("write over a file of ours: its hard link keeps the old content",
          strcmp(get(at("new.hard")), "first") == 0);

    /* Abort: nothing at the name, nothing left. */
    mt_file f;
    CHECK("abort: begun", mt_file_begin_path(&f, at("aborted")) == 0 && f.fd >= 0);
    mt_file_abort(&f);
    CHECK("abort: no file, no temporary", access(at("aborted"), F_OK) != 0 && temporaries() == 0);

    /* The temporary's name taken by a planted link: another name is used,
     * the link and its target are left alone. */
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s/clash.tmp.%d.%ld", dir, (int)getpid(), (long)syscall(SYS_gettid));
    symlink(at("victim"), tmp);
    CHECK("temporary name taken by a link: written all the same",
          write_file(at("clash"), "ok") == 0 && strcmp(get(at("clash")), "ok") == 0);
    CHECK("temporary name taken by a link: link and target untouched",
          is_link_to(tmp, at("victim")) && strcmp(get(at("victim")), "precious") == 0);
    unlink(tmp);

    /* The name becomes a link between begin and commit: refused at commit. */
    CHECK("swap: begun", mt_file_begin_path(&f, at("swapped")) == 0);
    symlink(at("victim"), at("swapped"));
    CHECK("swap: a link planted before commit is refused", mt_file_commit(&f) == -ELOOP);
    CHECK("swap: the link and its target untouched, no temporary",
          is_link_to(at("swapped"), at("victim")) && strcmp(get(at("victim")), "precious") == 0 &&
              temporaries() == 0);
    CHECK("write: a name ending in '/' is a directory", write_file(at("dir/"), "x") == -EISDIR);
}

static void test_stream(void)
{
    mt_file f;
    int fd = mt_file_open_stream(&f, at("s1"));
    CHECK("stream: a new file", fd >= 0 && write(fd, "abc", 3) == 3);
    close(fd);
    link(at("s1"), at("s1.hard"));
    fd = mt_file_open_stream(&f, at("s1"));
    CHECK("stream over a file of ours: a new, empty file",
          fd >= 0 && lseek(fd, 0, SEEK_END) == 0 && write(fd, "xyz", 3) == 3);
    close(fd);
    CHECK("stream over a file of ours: never truncated (the hard link keeps it)",
          strcmp(get(at("s1.hard")), "abc") == 0 && strcmp(get(at("s1")), "xyz") == 0);
    CHECK("stream to a link: refused",
          mt_file_open_stream(&f, at("link")) == -ELOOP && strcmp(get(at("victim")), "precious") == 0);
    CHECK("stream to a dangling link: refused, nothing created",
          mt_file_open_stream(&f, at("dangling")) == -ELOOP && access(at("nowhere"), F_OK) != 0);
    CHECK("stream to a directory: refused", mt_file_open_stream(&f, at("dir")) == -EISDIR);
    CHECK("stream to a FIFO nobody reads: refused at once", mt_file_open_stream(&f, at("fifo")) == -ENXIO);
    int rd = open(at("fifo"), O_RDONLY | O_NONBLOCK);
    fd = mt_file_open_stream(&f, at("fifo"));
    char buf[8] = {0};
    int ok =
        fd >= 0 && write(fd, "fifo", 4) == 4 && read(rd, buf, sizeof buf) == 4 && strcmp(buf, "fifo") == 0;
    struct stat st;
    CHECK("stream to a FIFO being read: written into, still a FIFO",
          ok && lstat(at("fifo"), &st) == 0 && S_ISFIFO(st.st_mode) &&
              (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    if (fd >= 0)
        close(fd);
    close(rd);
    CHECK("stream: no temporary left", temporaries() == 0);
}

/* The kept directory: found again after the program dup2()s over its
 * descriptor; used after a chroot (as root, in a child). */
static void test_outdir(int root)
{
    char sub[PATH_MAX + 16];
    snprintf(sub, sizeof sub, "%s/out", dir);
    mkdir(sub, 0755);
    CHECK("outdir: set", mt_file_outdir_set(at("out/report"), 1) == 0);
    int kept = -1;
    for (int fd = 3; fd < 4096 && kept < 0; fd++) {
        char proc[64], target[PATH_MAX];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(proc, target, sizeof target - 1);
        if (n > 0 && (target[n] = '\0', strcmp(target, sub) == 0))
            kept = fd;
    }
    CHECK("outdir: kept open, close-on-exec, at a high number",
          kept > 100 && (fcntl(kept, F_GETFD) & FD_CLOEXEC));
    int null = open("/dev/null", O_WRONLY);
    dup2(null, kept);
    close(null);
    CHECK("outdir: its descriptor replaced by the program's: found again by path",
          write_file(at("out/report"), "after dup2") == 0 &&
              strcmp(get(at("out/report")), "after dup2") == 0);
    CHECK("outdir: the program's descriptor left alone", fcntl(kept, F_GETFD) >= 0);
    close(kept);
    if (!root)
        return;
    char jail[PATH_MAX + 16];
    snprintf(jail, sizeof jail, "%s/jail", dir);
    mkdir(jail, 0755);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = chroot(jail) == 0 && chdir("/") == 0 ? write_file(at("out/report"), "from the jail") : -1;
        _exit(rc == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK("outdir: after a chroot, the file goes where the path led at start",
          WIFEXITED(st) && WEXITSTATUS(st) == 0 && strcmp(get(at("out/report")), "from the jail") == 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/mt-safe-file.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int root = geteuid() == 0;
    if (!root)
        printf("SKIP safe_file: device nodes, another user's file, chroot (not root)\n");
    test_check(root);
    test_write(root);
    test_stream();
    test_outdir(root);
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return failures ? 1 : 0;
}
