/* fdfull.c — a program at its descriptor limit, as a server leaking
 * descriptors ends: the agent's report must still be written, complete,
 * and the program's own view of its limit must not change.
 *
 * usage: fdfull SOFT HARD MODE [REPORT]
 * Sets RLIMIT_NOFILE to SOFT/HARD (SOFT = HARD: no room to lift the soft
 * limit), keeps 123456 bytes in category "fdcat", opens /dev/null until
 * EMFILE and prints "full N" (N opened), then by MODE:
 *   exit   exits 0 (the report at exit)
 *   term   raise(SIGTERM) (the report at the signal)
 *   segv   a NULL store (the crash report)
 *   api    mt_report_write(REPORT), then prints "after rc=R soft=S hard=H
 *          open=EMFILE|ok": the limit and a further open as the program
 *          sees them after the report, then exits 0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "memtrail.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fdfull SOFT HARD MODE [REPORT]\n");
        return 2;
    }
    struct rlimit rl = {strtoul(argv[1], NULL, 10), strtoul(argv[2], NULL, 10)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        perror("fdfull: setrlimit");
        return 3;
    }
    mt_tag_push("fdcat");
    char *keep = malloc(123456);
    memset(keep, 1, 123456);
    mt_tag_pop();
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0)
        n++;
    if (errno != EMFILE) {
        perror("fdfull: open");
        return 3;
    }
    printf("full %d\n", n);
    fflush(stdout);
    const char *mode = argv[3];
    if (strcmp(mode, "term") == 0)
        raise(SIGTERM);
    else if (strcmp(mode, "segv") == 0)
        *(volatile char *)NULL = keep[0];
    else if (strcmp(mode, "api") == 0 && argc > 4) {
        int rc = mt_report_write(argv[4]);
        struct rlimit now;
        getrlimit(RLIMIT_NOFILE, &now);
        int fd = open("/dev/null", O_RDONLY);
        printf("after rc=%d soft=%llu hard=%llu open=%s\n", rc, (unsigned long long)now.rlim_cur,
               (unsigned long long)now.rlim_max, fd < 0 && errno == EMFILE ? "EMFILE" : "ok");
    }
    return 0;
}
