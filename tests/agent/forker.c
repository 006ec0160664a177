/* forker.c — fork, with a second thread holding blocks at the moment of
 * the fork: the child must write its own report (%p) that includes what it
 * inherited (the other thread's blocks too) plus its own allocations, and
 * the parent's report must not see the child's. HOW: fork (the default),
 * _Fork (no fork handlers run) or clone (the raw system call, as a
 * sandbox or a language runtime makes its children: neither glibc nor
 * the agent sees it).
 * Usage: forker LEDGER_FILE [fork|_Fork|clone]   (writes "parent" and
 * "child" ledgers) */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger.h"
#include "memtrail.h"

static pthread_barrier_t ready, done;
static ledger worker_l;

static void *worker(void *arg)
{
    (void)arg;
    mt_tag_push("worker");
    for (int i = 0; i < 5; i++) {
        malloc(4096);
        ledger_alloc(&worker_l, 4096);
    }
    mt_tag_pop();
    pthread_barrier_wait(&ready); /* blocks live in this thread's shard */
    pthread_barrier_wait(&done);
    return NULL;
}

extern pid_t _Fork(void);

static pid_t make_child(const char *how)
{
    if (strcmp(how, "_Fork") == 0)
        return _Fork();
    if (strcmp(how, "clone") == 0)
        return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    return fork();
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3)
        return 2;
    pthread_t t;
    pthread_barrier_init(&ready, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    pthread_create(&t, NULL, worker, NULL);
    pthread_barrier_wait(&ready);

    ledger parent = {0};
    mt_tag_push("family");
    for (int i = 0; i < 3; i++) {
        malloc(1111);
        ledger_alloc(&parent, 1111);
    }
    mt_tag_pop();
    ledger_write(argv[1], "worker", &worker_l, 0);
    ledger_write(argv[1], "parent-family", &parent, 1);
    pid_t pid = make_child(argc == 3 ? argv[2] : "fork");
    if (pid == 0) {
        ledger child = parent; /* inherited blocks are the child's memory too */
        mt_tag_push("family");
        void *p = malloc(7777);
        ledger_alloc(&child, 7777);
        free(malloc(100000));
        ledger_alloc(&child, 100000);
        ledger_free(&child, 100000);
        (void)p;
        mt_tag_pop();
        ledger_write(argv[1], "child-family", &child, 1);
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    pthread_barrier_wait(&done);
    pthread_join(t, NULL);
    dprintf(1, "child pid %d\n", (int)pid);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
    dprintf(1, "%s forker: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures;
}
