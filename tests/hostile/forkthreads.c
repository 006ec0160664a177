/* forkthreads.c — a hostile program for the agent: 4 threads allocate in a
 * loop while the main thread forks 20 times. Each child allocates and
 * frees, then leaves with _exit(0) (even children) or exit(0) (odd ones,
 * so exit handlers run in a child forked mid-allocation); the parent
 * waits for all. A fork while another thread holds a tracker's lock must
 * not leave the child deadlocked. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILDREN 20

static atomic_int stop;

static void *allocator(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    void *ring[64] = {0};
    unsigned i = 0;
    while (!atomic_load(&stop)) {
        seed = seed * 1103515245u + 12345u;
        unsigned slot = i++ % 64;
        free(ring[slot]);
        ring[slot] = malloc(1 + (seed >> 16) % 3000);
        if (seed % 7 == 0)
            ring[slot] = realloc(ring[slot], 1 + (seed >> 8) % 9000);
    }
    for (int k = 0; k < 64; k++)
        free(ring[k]);
    return NULL;
}

int main(void)
{
    pthread_t t[4];
    fflush(stdout);
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, allocator, (void *)(long)(i + 1)) != 0)
            return 3;
    pid_t kids[CHILDREN];
    for (int c = 0; c < CHILDREN; c++) {
        usleep(2000);
        kids[c] = fork();
        if (kids[c] < 0)
            return 4;
        if (kids[c] == 0) {
            void *p[100];
            for (int k = 0; k < 100; k++)
                p[k] = malloc((size_t)(10 + k * 10));
            for (int k = 0; k < 100; k++)
                free(p[k]);
            char *s = strdup("child");
            free(s);
            if (c % 2)
                exit(0);
            _exit(0);
        }
    }
    int ok = 0;
    for (int c = 0; c < CHILDREN; c++) {
        int st;
        if (waitpid(kids[c], &st, 0) == kids[c] && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            ok++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("%d of %d children exited 0\n", ok, CHILDREN);
    return ok == CHILDREN ? 0 : 1;
}
