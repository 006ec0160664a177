/* cancel.c — a hostile program for the agent: pthread_cancel of threads
 * blocked in cancellation points (read on a pipe, pthread_cond_wait,
 * nanosleep) while they hold malloc'd memory that cleanup handlers free.
 * The cancellation unwinds through whatever the tracker left on the
 * thread's stack; every cleanup handler must run exactly once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PER_KIND 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t ready;
static int pipefd[2];
static int cleanups; /* under lock */

static void release(void *p)
{
    free(p);
    pthread_mutex_lock(&lock);
    cleanups++;
    pthread_mutex_unlock(&lock);
}

static void unlock(void *m)
{
    pthread_mutex_unlock(m);
}

static void *in_read(void *arg)
{
    (void)arg;
    char *held = malloc(1000);
    pthread_cleanup_push(release, held);
    memset(held, 1, 1000);
    pthread_barrier_wait(&ready);
    char c;
    for (;;)
        (void)read(pipefd[0], &c, 1); /* nothing ever arrives */
    pthread_cleanup_pop(1);
    return NULL;
}

static void *in_cond(void *arg)
{
    (void)arg;
    char *held = calloc(10, 100);
    pthread_cleanup_push(release, held);
    pthread_barrier_wait(&ready); /* before the lock: the others need it to get here */
    pthread_mutex_lock(&lock);
    pthread_cleanup_push(unlock, &lock);
    for (;;)
        pthread_cond_wait(&never, &lock);
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
    return NULL;
}

static void *in_sleep(void *arg)
{
    (void)arg;
    char *held = malloc(50);
    held = realloc(held, 5000);
    pthread_cleanup_push(release, held);
    pthread_barrier_wait(&ready);
    for (;;) {
        struct timespec ts = {10, 0};
        nanosleep(&ts, NULL);
    }
    pthread_cleanup_pop(1);
    return NULL;
}

/* Allocates in a loop with pthread_testcancel between calls. */
static void *in_loop(void *arg)
{
    (void)arg;
    char *held = malloc(300);
    pthread_cleanup_push(release, held);
    pthread_barrier_wait(&ready);
    for (;;) {
        void *p = malloc(64);
        free(p);
        pthread_testcancel();
    }
    pthread_cleanup_pop(1);
    return NULL;
}

int main(void)
{
    void *(*kinds[])(void *) = {in_read, in_cond, in_sleep, in_loop};
    const int nkinds = 4, n = nkinds * PER_KIND;
    pthread_t t[4 * PER_KIND];
    if (pipe(pipefd) != 0)
        return 3;
    for (int round = 0; round < 5; round++) {
        pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, kinds[i % nkinds], NULL) != 0)
                return 4;
        pthread_barrier_wait(&ready);
        for (int i = 0; i < n; i++)
            pthread_cancel(t[i]);
        int canceled = 0;
        for (int i = 0; i < n; i++) {
            void *r;
            pthread_join(t[i], &r);
            canceled += r == PTHREAD_CANCELED;
        }
        pthread_barrier_destroy(&ready);
        pthread_mutex_lock(&lock);
        printf("round %d: %d cancelled, %d cleanups\n", round, canceled, cleanups);
        cleanups = 0;
        pthread_mutex_unlock(&lock);
    }
    return 0;
}
