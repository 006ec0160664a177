/* threads2000.c — a hostile program for the agent: 2000 short-lived
 * threads, started and joined in batches of 50, each allocating and
 * freeing; a tracker's per-thread state must be created and retired 2000
 * times without leaking or running out. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 2000
#define BATCH 50

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    size_t sum = 0;
    void *keep[20];
    for (int i = 0; i < 20; i++) {
        keep[i] = malloc((size_t)(16 + (id * 7 + i * 131) % 4000));
        memset(keep[i], 1, 16);
    }
    for (int i = 0; i < 20; i++) {
        sum += ((unsigned char *)keep[i])[0];
        free(keep[i]);
    }
    char *s = strdup("thread");
    sum += strlen(s);
    free(s);
    return (void *)sum;
}

int main(void)
{
    size_t total = 0;
    for (int b = 0; b < THREADS / BATCH; b++) {
        pthread_t t[BATCH];
        for (int i = 0; i < BATCH; i++)
            if (pthread_create(&t[i], NULL, worker, (void *)(long)(b * BATCH + i)) != 0) {
                printf("pthread_create failed at thread %d\n", b * BATCH + i);
                return 3;
            }
        for (int i = 0; i < BATCH; i++) {
            void *r;
            pthread_join(t[i], &r);
            total += (size_t)r;
        }
    }
    printf("%d threads, sum %zu\n", THREADS, total);
    return 0;
}
