/* live.c — a program to query while it runs (tests/agent/test_query.sh).
 * It allocates known amounts in category "live", keeping its own books,
 * and stops at each step until the script lets it go on:
 *
 *   step 1: 10 x 1000 bytes                  → DIR/phase1 (ledger), DIR/ready1; waits DIR/go1
 *   step 2: 5 x 3000, calloc 4 x 250, frees two of step 1
 *                                            → DIR/phase2, DIR/ready2; waits DIR/go2
 *   fork (with "fork"): a child allocates 7 x 500 in "child" → DIR/child (ledger),
 *     DIR/child.ready (its pid), DIR/child.errno (errno as fork left it in
 *     the child, set to 4242 before); waits DIR/child.go. The parent reaps it,
 *     then runs a vfork child that only calls _exit → DIR/forked; waits DIR/go3.
 *
 * Ready files hold the pid that wrote them.
 * Usage: live DIR [fork] */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "ledger.h"
#include "memtrail.h"
#include "pidfile.h"

static const char *dir;

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Writes our pid to DIR/name, atomically. */
static void signal_ready(const char *name)
{
    char path[PATH_MAX];
    path_of(path, sizeof path, name);
    pidfile_write(path);
}

/* Waits until the script creates DIR/name (at most about a minute). */
static void wait_for(const char *name)
{
    char path[PATH_MAX];
    path_of(path, sizeof path, name);
    for (int i = 0; i < 30000; i++) {
        if (access(path, F_OK) == 0)
            return;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    _exit(97);
}

static void write_ledger(const char *name, const char *cat, const ledger *l)
{
    char path[PATH_MAX];
    path_of(path, sizeof path, name);
    ledger_write(path, cat, l, 0);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    dir = argv[1];
    (void)test_failures;
    int forking = argc > 2 && strcmp(argv[2], "fork") == 0;

    ledger l = {0};
    void *small[10];
    mt_tag_push("live");
    for (int i = 0; i < 10; i++) {
        small[i] = malloc(1000);
        ledger_alloc(&l, 1000);
    }
    mt_tag_pop();
    write_ledger("phase1", "live", &l);
    signal_ready("ready1");
    wait_for("go1");

    mt_tag_push("live");
    for (int i = 0; i < 5; i++) {
        malloc(3000);
        ledger_alloc(&l, 3000);
    }
    calloc(4, 250);
    ledger_alloc(&l, 1000);
    free(small[0]);
    ledger_free(&l, 1000);
    free(small[1]);
    ledger_free(&l, 1000);
    mt_tag_pop();
    write_ledger("phase2", "live", &l);
    signal_ready("ready2");
    wait_for("go2");

    if (forking) {
        errno = 4242;
        pid_t pid = fork();
        if (pid == 0) {
            int e = errno; /* the agent started a socket and thread in fork */
            char path[PATH_MAX];
            path_of(path, sizeof path, "child.errno");
            FILE *f = fopen(path, "w");
            if (f) {
                fprintf(f, "%d\n", e);
                fclose(f);
            }
            ledger c = {0};
            mt_tag_push("child");
            for (int i = 0; i < 7; i++) {
                malloc(500);
                ledger_alloc(&c, 500);
            }
            mt_tag_pop();
            write_ledger("child", "child", &c);
            signal_ready("child.ready");
            wait_for("child.go");
            exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        pid = vfork();
        if (pid == 0)
            _exit(0);
        waitpid(pid, &st, 0);
        signal_ready("forked");
        wait_for("go3");
    }
    return 0;
}
