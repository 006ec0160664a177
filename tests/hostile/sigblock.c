/* sigblock.c — a hostile program for the agent: blocks every signal
 * (sigprocmask with a full set) before allocating, so threads it starts
 * inherit the full mask too, and keeps a blocked signal pending to the end.
 * A tracker that needs a signal delivered to make progress must not hang. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *worker(void *arg)
{
    size_t sum = 0;
    for (int i = 0; i < 20000; i++) {
        char *p = malloc((size_t)(1 + i % 700));
        p[0] = (char)i;
        sum += (unsigned char)p[0];
        free(p);
    }
    *(size_t *)arg = sum;
    return NULL;
}

int main(void)
{
    sigset_t all;
    sigfillset(&all);
    if (sigprocmask(SIG_BLOCK, &all, NULL) != 0)
        return 3;
    raise(SIGUSR1); /* stays pending: blocked */
    raise(SIGTERM);

    size_t sums[4] = {0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, worker, &sums[i]) != 0)
            return 4;
    void *held[1000];
    for (int i = 0; i < 1000; i++) {
        held[i] = calloc(1, (size_t)(32 + i));
        if (!held[i])
            return 5;
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 1000; i++)
        held[i] = realloc(held[i], (size_t)(64 + i * 3));
    for (int i = 0; i < 1000; i++)
        free(held[i]);

    sigset_t pending;
    sigpending(&pending);
    printf("sums %zu %zu %zu %zu\n", sums[0], sums[1], sums[2], sums[3]);
    printf("SIGUSR1 pending %d, SIGTERM pending %d\n", sigismember(&pending, SIGUSR1),
           sigismember(&pending, SIGTERM));
    fflush(stdout);
    return 0; /* exits with the signals still blocked and pending */
}
