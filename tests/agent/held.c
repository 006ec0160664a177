/* held.c — blocks live before an on-demand trace, never freed in it
 * (tests/agent/test_ondemand.sh): allocates HELD blocks of HELD_SIZE
 * bytes, writes DIR/held ("bytes count", its books) and DIR/ready, waits
 * for DIR/go, then allocates and frees CHURN blocks of CHURN_SIZE bytes
 * and exits without freeing the held ones. A trace started between ready
 * and go sees the churn only: no free of a block it does not hold.
 * Usage: held DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pidfile.h"

#define HELD 64
#define HELD_SIZE 81920
#define CHURN 100
#define CHURN_SIZE 777

static void *volatile sink;

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char path[PATH_MAX];
    static void *held[HELD];
    for (int i = 0; i < HELD; i++) {
        held[i] = malloc(HELD_SIZE);
        memset(held[i], 3, HELD_SIZE);
    }
    snprintf(path, sizeof path, "%s/held", argv[1]);
    FILE *f = fopen(path, "w");
    if (!f)
        return 99;
    fprintf(f, "%d %d\n", HELD * HELD_SIZE, HELD);
    fclose(f);
    snprintf(path, sizeof path, "%s/ready", argv[1]);
    pidfile_write(path);
    snprintf(path, sizeof path, "%s/go", argv[1]);
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++)
        nanosleep(&ts, NULL);
    for (int i = 0; i < CHURN; i++) {
        sink = malloc(CHURN_SIZE);
        free(sink);
    }
    return held[0] ? 0 : 1;
}
