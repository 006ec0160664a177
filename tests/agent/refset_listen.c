/* refset_listen — the recorder's end of the agent's refset socket, for
 * tests/agent/test_refset_agent.sh: makes the socketpair(AF_UNIX,
 * SOCK_SEQPACKET) `memtrail refset record` makes, starts PROG with the
 * agent preloaded (RS_AGENT) and MEMTRAIL_OPTIONS=$RS_OPTIONS:refset_fd=N,
 * reads every message until the last process holding the other end is
 * gone, and writes each as one line to OUT:
 *
 *     KIND pid addr len cat tid=T frames=F0,F1,...
 *
 * (addr in hex, len and cat in decimal), then "EXIT status" (or "SIGNAL
 * n"). A message that breaks the contract (magic, size, frame count, a
 * time outside the listener's own clock readings) is a line starting
 * "BAD". With --quit-after N it closes its end after N messages and only
 * waits for PROG: the program must carry on without it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "refset/refset_agent.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *kind_name(unsigned k)
{
    static const char *names[] = {NULL,    "HELLO",      "MAP",  "UNMAP", "DISCARD",
                                  "BLOCK", "BLOCK_FREE", "TRIM", "STACK"};
    return k >= 1 && k <= 8 ? names[k] : NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: refset_listen OUT [--quit-after N] -- PROG ARGS...\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    const char *out_path = argv[1];
    long quit_after = -1;
    int i = 2;
    if (strcmp(argv[i], "--quit-after") == 0 && i + 1 < argc) {
        quit_after = atol(argv[i + 1]);
        i += 2;
    }
    if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc)
        return usage();
    char **prog = argv + i + 1;
    const char *agent = getenv("RS_AGENT"), *opts = getenv("RS_OPTIONS");
    if (!agent)
        return usage();
    FILE *out = fopen(out_path, "w");
    if (!out) {
        perror(out_path);
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("socketpair");
        return 2;
    }
    uint64_t t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        /* The program's end: kept across exec, as the recorder keeps it. */
        int fd = dup(sv[1]);
        char env[8192];
        snprintf(env, sizeof env, "%s%srefset_fd=%d", opts ? opts : "", opts && *opts ? ":" : "", fd);
        setenv("MEMTRAIL_OPTIONS", env, 1);
        setenv("LD_PRELOAD", agent, 1);
        execv(prog[0], prog);
        perror(prog[0]);
        _exit(127);
    }
    close(sv[1]);
    long count = 0;
    for (;;) {
        if (quit_after >= 0 && count >= quit_after) {
            close(sv[0]);
            break;
        }
        mt_rs_agent_msg m;
        ssize_t n = recv(sv[0], &m, sizeof m, MSG_TRUNC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* every holder of the program's end is gone */
        count++;
        uint64_t t = now_ns();
        const char *k = kind_name(m.kind);
        if ((size_t)n < offsetof(mt_rs_agent_msg, frames) || m.magic != MT_RS_AGENT_MAGIC || !k ||
            m.nframes > MT_RS_AGENT_MAX_FRAMES || (size_t)n != MT_RS_AGENT_MSG_SIZE(m.nframes)) {
            fprintf(out, "BAD message of %zd bytes (magic %#x kind %u nframes %u)\n", n, m.magic, m.kind,
                    m.nframes);
            continue;
        }
        if (m.time_ns < t0 || m.time_ns > t)
            fprintf(out, "BAD time %llu outside [%llu, %llu]\n", (unsigned long long)m.time_ns,
                    (unsigned long long)t0, (unsigned long long)t);
        fprintf(out, "%s %u 0x%llx %llu %u tid=%u frames=", k, m.pid, (unsigned long long)m.addr,
                (unsigned long long)m.len, m.category, m.tid);
        for (unsigned f = 0; f < m.nframes; f++)
            fprintf(out, "%s0x%llx", f ? "," : "", (unsigned long long)m.frames[f]);
        fputc('\n', out);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status))
        fprintf(out, "EXIT %d\n", WEXITSTATUS(status));
    else
        fprintf(out, "SIGNAL %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    fclose(out);
    return 0;
}
