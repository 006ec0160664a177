/* forkchain.c — chains of forks for the traces' process trees
 * (test_trace.sh). Every block the program allocates is in category
 * "chain" and in its books, so each process knows the blocks it holds.
 *
 *   forkchain DIR chain ROUNDS   ROUNDS times: the program allocates a
 *       (1000 bytes) and b (2000), forks; the child frees b, allocates
 *       c (3000) and d (4000) and forks at once, before its trace's
 *       first dispatch; the grandchild frees d and a, allocates e (5000).
 *   forkchain DIR middle         the program allocates a and b, forks; the
 *       child allocates nothing, forks and exits (a double fork: its own
 *       trace has no event); the grandchild frees a, allocates e.
 *   forkchain DIR daemon         the same through daemon(1, 1).
 *
 * Each forked process writes DIR/ledger.PID when it ends: "pid ppid
 * live_count live_bytes", its blocks then (inherited ones included). Its
 * ppid is its parent's pid as the parent knew it before the fork (a
 * daemon's getppid() is init's soon after).
 * Ledgers are written with snprintf and write: nothing outside the books
 * is allocated in category "chain". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrail.h"

static const char *dir;
static long live_count, live_bytes;
static pid_t my_ppid;

static void *get(size_t n)
{
    void *p = malloc(n);
    if (!p)
        abort();
    live_count++;
    live_bytes += (long)n;
    return p;
}

static void put(void *p, size_t n)
{
    free(p);
    live_count--;
    live_bytes -= (long)n;
}

static pid_t fork_noted(void)
{
    pid_t me = getpid(), p = fork();
    if (p == 0)
        my_ppid = me;
    return p;
}

static void ledger(void)
{
    char path[4096], line[128];
    snprintf(path, sizeof path, "%s/ledger.%d", dir, (int)getpid());
    int n =
        snprintf(line, sizeof line, "%d %d %ld %ld\n", (int)getpid(), (int)my_ppid, live_count, live_bytes);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        _exit(3);
    close(fd);
}

static void chain(void)
{
    void *a = get(1000), *b = get(2000);
    pid_t p = fork_noted();
    if (p == 0) {
        put(b, 2000);
        void *c = get(3000), *d = get(4000);
        (void)c;
        pid_t q = fork_noted();
        if (q == 0) {
            put(d, 4000);
            put(a, 1000);
            void *e = get(5000);
            (void)e;
            ledger();
            _exit(0);
        }
        waitpid(q, NULL, 0);
        ledger();
        _exit(0);
    }
    waitpid(p, NULL, 0);
    put(a, 1000);
    put(b, 2000);
}

static void grandchild(void *a)
{
    put(a, 1000);
    void *e = get(5000);
    (void)e;
    ledger();
    _exit(0);
}

static void middle(int by_daemon)
{
    void *a = get(1000), *b = get(2000);
    pid_t p = fork_noted();
    if (p == 0) {
        if (by_daemon) {
            pid_t parent = getpid();
            if (daemon(1, 1) != 0)
                _exit(2);
            my_ppid = parent;
            grandchild(a);
        }
        pid_t q = fork_noted();
        if (q == 0)
            grandchild(a);
        _exit(q < 0 ? 2 : 0); /* no ledger: the middle's books are its parent's at the fork */
    }
    waitpid(p, NULL, 0); /* the daemon is no child of ours: the script waits for it */
    put(a, 1000);
    put(b, 2000);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: forkchain DIR chain ROUNDS | DIR middle | DIR daemon\n");
        return 2;
    }
    dir = argv[1];
    mt_tag_push("chain");
    if (strcmp(argv[2], "chain") == 0) {
        int rounds = argc > 3 ? atoi(argv[3]) : 1;
        for (int i = 0; i < rounds; i++)
            chain();
    } else if (strcmp(argv[2], "middle") == 0 || strcmp(argv[2], "daemon") == 0) {
        middle(strcmp(argv[2], "daemon") == 0);
    } else {
        return 2;
    }
    mt_tag_pop();
    return 0;
}
