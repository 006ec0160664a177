/* cancelled.c — threads cancelled (deferred, at pthread_testcancel) while
 * they churn malloc/free in their own category, their cleanup handlers
 * freeing what they hold. A pending cancel must never act inside the
 * agent's work in a malloc or free (its /proc reads, libunwind's checks
 * are cancellation points in glibc): then every block is freed once, the
 * category ends at zero, and memory events go on being published.
 * Prints "allocs N frees N" (the program's own count), then PASS/FAIL of
 * the event check.
 * Usage: cancelled ROUNDS */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "memtrail.h"

#define THREADS 8
#define SLOTS 64

static _Atomic long allocs, frees;

static void let_go(void *arg)
{
    void **slot = arg;
    for (int i = 0; i < SLOTS; i++)
        if (slot[i]) {
            free(slot[i]);
            slot[i] = NULL;
            frees++;
        }
}

/* Out of churn's frame: pthread_cleanup_push is a setjmp there. */
static void loop(void **slot, unsigned s)
{
    for (;;) {
        s = s * 1103515245 + 12345;
        int i = (s >> 8) % SLOTS;
        if (slot[i]) {
            free(slot[i]);
            slot[i] = NULL;
            frees++;
        }
        slot[i] = malloc((s >> 12) % 5000 + 1);
        allocs++;
        if (((s >> 4) & 255) == 0)
            pthread_testcancel();
    }
}

static void *churn(void *arg)
{
    void *slot[SLOTS] = {0};
    mt_tag_push("cancelled");
    pthread_cleanup_push(let_go, slot);
    loop(slot, (unsigned)(unsigned long)arg * 77 + 1);
    pthread_cleanup_pop(1);
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    for (int r = 0; r < rounds; r++) {
        pthread_t t[THREADS];
        for (long i = 0; i < THREADS; i++)
            pthread_create(&t[i], NULL, churn, (void *)(i + (long)r * THREADS));
        usleep(3000);
        for (int i = 0; i < THREADS; i++)
            pthread_cancel(t[i]);
        for (int i = 0; i < THREADS; i++)
            pthread_join(t[i], NULL);
    }
    printf("allocs %ld frees %ld\n", (long)allocs, (long)frees);
    /* Each 40 MiB block is mapped and unmapped: a GROW event each, which
     * a snapshot flag left held by a cancelled thread would stop. */
    unsigned long grow0 = mt_event_count(MT_EVENT_GROW);
    for (int i = 0; i < 50; i++) {
        char *volatile p = malloc((40 << 20) + (size_t)i * 4096);
        p[0] = 1;
        free(p);
    }
    unsigned long grew = mt_event_count(MT_EVENT_GROW) - grow0;
    printf("%s cancelled: %lu GROW events for 50 mapped blocks\n", grew >= 50 ? "PASS" : "FAIL", grew);
    return 0;
}
