/* sleep_once.c — a program that a query ends (tests/agent/test_query.sh):
 * writes its pid to PIDFILE, then sleeps once, without retrying, as many
 * programs do: the signal a query raises makes nanosleep return EINTR, and
 * the program exits (0; 1 when it slept the whole time). What the query
 * then says is the test.
 * Usage: sleep_once PIDFILE [SECONDS] (default 60) */
#include <stdlib.h>
#include <time.h>

#include "pidfile.h"

static void *volatile sink;

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    sink = malloc(4096); /* something for a report to count */
    pidfile_write(argv[1]);
    struct timespec ts = {argc > 2 ? atoi(argv[2]) : 60, 0};
    return nanosleep(&ts, NULL) == 0;
}
