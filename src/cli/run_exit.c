/* run_exit.c — reports from programs that leave with a raw exit_group.
 *
 * Go's runtime ends a process with the exit_group system call itself: no
 * exit handler, no destructor, no _exit runs, so the agent inside never
 * learns that the process is going and writes no report. memtrail run,
 * its parent, holds that call instead: before exec, the child sets
 * no_new_privs and installs a seccomp filter whose only rule sends
 * exit_group to a user-space listener (every other call is allowed at
 * once); the listener's fd comes back to the parent over a socket pair.
 * When a process of the tree calls exit_group, the parent asks that
 * process's agent, over its control socket, for the report at exit
 * ("exit"), then lets the call go on. A process without an agent (an
 * exec'd program without --follow-exec) is let go at once.
 *
 * Only Go programs get the filter (no_new_privs would stop a setuid
 * program the tree execs from gaining its privileges). If memtrail run
 * itself is killed, the kernel fails a held exit_group with ENOSYS; Go's
 * runtime then crashes the process, which ends it all the same. */
#include "cli/cli.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ASK_TIMEOUT_MS 10000

static int read_exact(int fd, void *buf, size_t len, off_t off)
{
    return pread(fd, buf, len, off) == (ssize_t)len;
}

/* Go's linker writes a note named "Go" of type 4 (its build id) in a PT_NOTE. */
static int has_go_note(int fd, const Elf64_Phdr *ph)
{
    uint64_t off = ph->p_offset, end = ph->p_offset + ph->p_filesz;
    while (off + 12 <= end && off < end) {
        uint32_t nh[3];
        if (!read_exact(fd, nh, sizeof nh, (off_t)off))
            return 0;
        char name[4] = {0};
        int go_name = nh[0] == 3 || nh[0] == 4; /* "Go\0", padded to 4 by Go's linker */
        if (go_name && !read_exact(fd, name, 3, (off_t)(off + 12)))
            return 0;
        if (go_name && nh[2] == 4 && memcmp(name, "Go", 3) == 0)
            return 1;
        off += 12 + ((nh[0] + 3ull) & ~3ull) + ((nh[1] + 3ull) & ~3ull);
    }
    return 0;
}

int run_is_go(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    int go = 0;
    if (read_exact(fd, &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize >= sizeof(Elf64_Phdr) && eh.e_phnum < 4096) {
        for (unsigned i = 0; i < eh.e_phnum && !go; i++) {
            Elf64_Phdr ph;
            if (!read_exact(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)))
                break;
            if (ph.p_type == PT_NOTE && ph.p_filesz < (1u << 20))
                go = has_go_note(fd, &ph);
        }
    }
    close(fd);
    return go;
}

int run_exit_watch_install(int sock)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0)
        return -errno;
    char ctl[CMSG_SPACE(sizeof(int))] = {0};
    char byte = 'f';
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    int rc = sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : -errno;
    close(fd);
    return rc;
}

int run_exit_watch_receive(int sock)
{
    char ctl[CMSG_SPACE(sizeof(int))] = {0};
    char byte;
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        return n < 0 ? -errno : -ECONNRESET;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
        return -EPROTO;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* The process (thread group) of thread tid, from /proc. */
static long tgid_of(long tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%ld/status", tid);
    FILE *f = fopen(path, "re");
    long tgid = tid;
    if (!f)
        return tid;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Tgid: %ld", &tgid) == 1)
            break;
    fclose(f);
    return tgid;
}

/* Processes already asked: a held call may come back (a signal restarts
 * it), or come from a second thread at the same time. */
#define ASKED_MAX 4096
static long asked[ASKED_MAX]; /* a ring: the most recent ASKED_MAX */
static int nasked, next_asked;

static void ask_for_report(long tgid)
{
    for (int i = 0; i < nasked; i++)
        if (asked[i] == tgid)
            return;
    asked[next_asked] = tgid;
    next_asked = (next_asked + 1) % ASKED_MAX;
    if (nasked < ASKED_MAX)
        nasked++;
    struct query_target t;
    cli_quiet = 1; /* a process with no agent has no socket: nothing to say */
    if (query_open(tgid, "run", &t) == 0) {
        char *buf = NULL;
        size_t len = 0;
        query_ask(&t, "exit\n", ASK_TIMEOUT_MS, &buf, &len);
        free(buf);
    }
    query_close(&t);
    cli_quiet = 0;
}

static void serve_one(int listener, const struct seccomp_notif_sizes *sz)
{
    struct seccomp_notif *req = calloc(1, sz->seccomp_notif);
    struct seccomp_notif_resp *resp = calloc(1, sz->seccomp_notif_resp);
    if (!req || !resp) {
        free(req);
        free(resp);
        return;
    }
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) == 0) {
        ask_for_report(tgid_of((long)req->pid));
        resp->id = req->id;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp); /* ENOENT: it was interrupted, and comes back */
    }
    free(req);
    free(resp);
}

int run_exit_watch_wait(int listener, int pid, int *status)
{
    struct seccomp_notif_sizes sz;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) != 0) {
        sz.seccomp_notif = sizeof(struct seccomp_notif);
        sz.seccomp_notif_resp = sizeof(struct seccomp_notif_resp);
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int lfd = listener;
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR)
            return -errno;
        /* Poll ignores a negative fd; without a pidfd, poll in steps to
         * notice the exit. */
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
        int n = poll(p, 2, pidfd >= 0 ? -1 : 50);
        if (n < 0 && errno != EINTR)
            return -errno;
        if (n > 0 && (p[0].revents & POLLIN))
            serve_one(lfd, &sz);
        else if (n > 0 && (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)))
            lfd = -1; /* no process holds the filter any more */
    }
    if (pidfd >= 0)
        close(pidfd);
    return 0;
}
