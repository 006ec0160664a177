/* ondemand_churn.c — recording on demand under load (test_ondemand.sh):
 * THREADS threads allocate, reallocate and free without pause, each in
 * its own SLOTS slots (so at most THREADS * SLOTS blocks live at once),
 * while the script switches recording on and off. They stop once DIR/stop
 * exists; then DIR/total gets the category's books for the whole run,
 * "live_bytes live_count allocs frees reallocs", and the program waits for
 * DIR/go before it exits (the script reads its summary meanwhile). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"

#define THREADS 4
#define SLOTS 64

typedef struct worker {
    pthread_t t;
    int64_t live, count, allocs, frees, reallocs;
} worker;

static worker workers[THREADS];
static atomic_int stopping;

static void *run(void *arg)
{
    worker *w = arg;
    void *slot[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    if (mt_tag_push("churn") != 0 && mt_is_active())
        _exit(92);
    for (unsigned i = 0; !atomic_load_explicit(&stopping, memory_order_relaxed); i++) {
        unsigned k = (i * 7) % SLOTS;
        if (!slot[k]) {
            size[k] = 16 + i % 700;
            slot[k] = i % 5 == 0 ? calloc(1, size[k]) : malloc(size[k]);
            if (!slot[k])
                _exit(90);
            w->live += (int64_t)size[k], w->count++, w->allocs++;
        } else if (i % 3 == 0) {
            size_t to = 50 + i % 500;
            void *q = realloc(slot[k], to);
            if (!q)
                _exit(91);
            w->live += (int64_t)to - (int64_t)size[k], w->reallocs++;
            slot[k] = q, size[k] = to;
        } else {
            free(slot[k]);
            w->live -= (int64_t)size[k], w->count--, w->frees++;
            slot[k] = NULL;
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k]) {
            free(slot[k]);
            w->live -= (int64_t)size[k], w->count--, w->frees++;
        }
    return NULL;
}

static int exists(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        dprintf(2, "usage: ondemand_churn DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&workers[t].t, NULL, run, &workers[t]) != 0)
            return 3;
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; !exists(dir, "stop") && i < 6000; i++)
        nanosleep(&ts, NULL);
    atomic_store(&stopping, 1);
    int64_t s[5] = {0};
    for (int t = 0; t < THREADS; t++) {
        pthread_join(workers[t].t, NULL);
        s[0] += workers[t].live, s[1] += workers[t].count, s[2] += workers[t].allocs;
        s[3] += workers[t].frees, s[4] += workers[t].reallocs;
    }
    char text[256], path[4096];
    snprintf(text, sizeof text, "%lld %lld %lld %lld %lld\n", (long long)s[0], (long long)s[1],
             (long long)s[2], (long long)s[3], (long long)s[4]);
    snprintf(path, sizeof path, "%s/total", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return 4;
    close(fd);
    for (int i = 0; !exists(dir, "go") && i < 6000; i++)
        nanosleep(&ts, NULL);
    return 0;
}
