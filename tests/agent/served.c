/* served.c — a program `memtrail exporter` serves (tests/cli/test_exporter.sh).
 * It allocates known amounts in category "served" from one known function
 * (served_known_alloc), keeping its own books, runs a few request spans
 * named "req", then writes DIR/ledger (ledger.h's line) and DIR/ready (its
 * pid) and waits until DIR/stop exists (at most about two minutes).
 *
 * Usage: served DIR */
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "ledger.h"
#include "memtrail.h"

#define BLOCKS 12
#define BLOCK_SIZE 4096

/* Kept out of line, so the allocation's stack names it. */
__attribute__((noinline)) static void *served_known_alloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, 0x5a, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    (void)test_failures;
    ledger l = {0};
    static void *keep[BLOCKS];
    mt_tag_push("served");
    for (int i = 0; i < BLOCKS; i++) {
        keep[i] = served_known_alloc(BLOCK_SIZE);
        ledger_alloc(&l, BLOCK_SIZE);
    }
    /* two freed again: the counters differ from the live figures */
    free(keep[0]);
    ledger_free(&l, BLOCK_SIZE);
    free(keep[1]);
    ledger_free(&l, BLOCK_SIZE);
    mt_tag_pop();
    for (int i = 0; i < 5; i++) {
        mt_span_begin("req");
        free(malloc(100));
        sleep_ms(1);
        mt_span_end();
    }

    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/ledger", argv[1]);
    ledger_write(path, "served", &l, 0);
    snprintf(path, sizeof path, "%s/ready", argv[1]);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 98;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    rename(tmp, path);

    snprintf(path, sizeof path, "%s/stop", argv[1]);
    for (int i = 0; i < 1200 && access(path, F_OK) != 0; i++)
        sleep_ms(100);
    return 0;
}
