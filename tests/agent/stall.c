/* stall.c — a single-threaded loop that measures how long it is held up
 * (tests/agent/test_query_stall.sh). It allocates 6 x 700 bytes in category
 * "stall" (books in DIR/books), writes DIR/ready (its pid), then loops
 * every millisecond, keeping the longest gap between two iterations, until
 * DIR/stop appears. It then writes DIR/result: "MAX_GAP_MS ITERATIONS".
 * A query signal lands on its only thread, so the gap is how long the
 * agent's handler held the program.
 * Usage: stall DIR */
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "ledger.h"
#include "memtrail.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    (void)test_failures;
    char path[PATH_MAX], stop[PATH_MAX], tmp[PATH_MAX];

    ledger l = {0};
    void *blocks[6];
    mt_tag_push("stall");
    for (int i = 0; i < 6; i++) {
        blocks[i] = malloc(700);
        ledger_alloc(&l, 700);
    }
    mt_tag_pop();
    snprintf(path, sizeof path, "%s/books", argv[1]);
    ledger_write(path, "stall", &l, 0);

    snprintf(path, sizeof path, "%s/ready", argv[1]);
    snprintf(tmp, sizeof tmp, "%s/ready.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 99;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    rename(tmp, path);

    snprintf(stop, sizeof stop, "%s/stop", argv[1]);
    int64_t start = now_us(), prev = start, max_gap = 0;
    long iterations = 0;
    /* At most about two minutes, should the script never say stop. */
    while (access(stop, F_OK) != 0 && prev - start < 120 * 1000000LL) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
        int64_t t = now_us();
        if (t - prev > max_gap)
            max_gap = t - prev;
        prev = t;
        iterations++;
    }

    snprintf(path, sizeof path, "%s/result", argv[1]);
    snprintf(tmp, sizeof tmp, "%s/result.tmp", argv[1]);
    f = fopen(tmp, "w");
    if (!f)
        return 99;
    fprintf(f, "%lld %ld\n", (long long)(max_gap / 1000), iterations);
    fclose(f);
    rename(tmp, path);
    for (int i = 0; i < 6; i++)
        free(blocks[i]);
    return 0;
}
