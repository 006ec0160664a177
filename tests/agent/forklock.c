/* forklock.c — fork while another thread keeps creating categories: the
 * child must never inherit the category lock held (it would spin forever
 * in its first mt_tag_push of a new name). Usage: forklock */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger.h"
#include "memtrail.h"

static volatile int stop;

static void *creator(void *arg)
{
    (void)arg;
    char name[32];
    for (unsigned i = 0; !stop; i++) {
        snprintf(name, sizeof name, "c%u", i % 50);
        if (mt_tag_push(name) == 0)
            mt_tag_pop();
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, creator, NULL);
    int hung = 0;
    for (int i = 0; i < 200 && !hung; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5); /* a child stuck on the lock dies of SIGALRM */
            int rc = mt_tag_push("child-only");
            _exit(rc == 0 ? 0 : 1);
        }
        int st;
        waitpid(pid, &st, 0);
        hung = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    stop = 1;
    pthread_join(t, NULL);
    EXPECT(!hung, "a forked child could not create a category (lock inherited held?)");
    dprintf(1, "%s forklock: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures;
}
