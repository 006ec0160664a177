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
 *          open=EMFILE|ok lost=K": the limit and a further open as the
 *          program sees them after the report, and how many of its own
 *          descriptors are no longer open, then exits 0
 *   rawclose  as api, after closing every descriptor from 3 with the raw
 *          close_range system call (no hook sees it) before it opens its
 *          files: the agent's numbers become the program's
 *   forkloop  forks children that _exit at once, again and again, until a
 *          300 ms timer's SIGALRM ends it (it lands in a fork, most often,
 *          while the agent holds its tables across it)
 *   vfork  as api, after a vfork child set the soft limit to SOFT / 2 and
 *          left (the child shares the agent's memory, not the descriptor
 *          table)
 *   query  maps 4 MiB in category fdmapa (touching 1 MiB) and 4 MiB right
 *          after it in fdmapb (touching 3 MiB): one kernel mapping split
 *          between two categories; prints "merged 1" when the kernel made
 *          them one (as expected), then, at the limit, "ready", and waits
 *          for a line on stdin (a live query meanwhile) before going on
 *          as api
 *   forkquery  as query, in a child forked at the limit (it prints
 *          "child PID" before "ready"); the parent waits for it
 *   apiloop  at the limit, prints "ready", then calls mt_report_write(REPORT)
 *          again and again for 4 s (live queries meanwhile find it busy
 *          and close their connections in the middle of its reports), and
 *          prints "apiloop reports=N failed=K" */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"

#define MIB (1024 * 1024)

/* fdmapa and fdmapb: two adjacent anonymous mappings the kernel merges
 * into one (same protection and flags), 1 MiB and 3 MiB touched, no huge
 * pages (their resident figures are then exact). */
static void split_mapping(void)
{
    mt_tag_push("fdmapa");
    char *a = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mt_tag_pop();
    if (a == MAP_FAILED) {
        perror("fdfull: mmap");
        exit(3);
    }
    munmap(a + 4 * MIB, 4 * MIB); /* room for b right after a */
    mt_tag_push("fdmapb");
    char *b = mmap(a + 4 * MIB, 4 * MIB, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    mt_tag_pop();
    if (b != a + 4 * MIB) {
        perror("fdfull: mmap next to it");
        exit(3);
    }
    madvise(a, 8 * MIB, MADV_NOHUGEPAGE);
    memset(a, 1, 1 * MIB);
    memset(b, 2, 3 * MIB);
    /* One line of /proc/self/maps from a to b's end: merged. */
    char want[64], line[512];
    snprintf(want, sizeof want, "%lx-%lx ", (unsigned long)a, (unsigned long)(a + 8 * MIB));
    FILE *f = fopen("/proc/self/maps", "r");
    int merged = 0;
    while (f && fgets(line, sizeof line, f))
        merged |= strncmp(line, want, strlen(want)) == 0;
    if (f)
        fclose(f);
    printf("merged %d\n", merged);
}

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
    const char *mode = argv[3];
    if (strcmp(mode, "rawclose") == 0)
        syscall(SYS_close_range, 3, ~0u, 0);
    if (strcmp(mode, "vfork") == 0) {
        pid_t c = vfork();
        if (c == 0) {
            struct rlimit half = {rl.rlim_cur / 2, rl.rlim_max};
            setrlimit(RLIMIT_NOFILE, &half);
            _exit(0);
        }
        waitpid(c, NULL, 0);
    }
    int query = strcmp(mode, "query") == 0 || strcmp(mode, "forkquery") == 0;
    if (query)
        split_mapping();
    mt_tag_push("fdcat");
    char *keep = malloc(123456);
    memset(keep, 1, 123456);
    mt_tag_pop();
    static int mine[1 << 16];
    int n = 0, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0)
        if (n < (int)(sizeof mine / sizeof mine[0]))
            mine[n++] = fd;
    if (errno != EMFILE) {
        perror("fdfull: open");
        return 3;
    }
    printf("full %d\n", n);
    fflush(stdout);
    if (strcmp(mode, "forkquery") == 0) {
        pid_t c = fork();
        if (c > 0) {
            int st;
            waitpid(c, &st, 0);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
        }
        printf("child %d\n", (int)getpid());
    }
    if (query) {
        printf("ready\n");
        fflush(stdout);
        char line[64];
        if (!fgets(line, sizeof line, stdin))
            return 5;
    }
    if (strcmp(mode, "forkloop") == 0) {
        struct itimerval at = {{0, 0}, {0, 300000}};
        setitimer(ITIMER_REAL, &at, NULL);
        for (;;) {
            pid_t c = fork();
            if (c == 0)
                _exit(0);
            if (c > 0)
                waitpid(c, NULL, 0);
        }
    }
    if (strcmp(mode, "apiloop") == 0) {
        printf("ready\n");
        fflush(stdout);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int reports = 0, failed = 0;
        do {
            reports++;
            failed += mt_report_write(argv[4]) != 0;
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (t.tv_sec - t0.tv_sec < 4);
        printf("apiloop reports=%d failed=%d\n", reports, failed);
        return 0;
    }
    if (strcmp(mode, "term") == 0)
        raise(SIGTERM);
    else if (strcmp(mode, "segv") == 0)
        *(volatile char *)NULL = keep[0];
    else if (argc > 4) {
        int rc = mt_report_write(argv[4]);
        struct rlimit now;
        getrlimit(RLIMIT_NOFILE, &now);
        int more = open("/dev/null", O_RDONLY);
        int err = errno, lost = 0;
        for (int i = 0; i < n; i++)
            if (fcntl(mine[i], F_GETFD) < 0)
                lost++;
        printf("after rc=%d soft=%llu hard=%llu open=%s lost=%d\n", rc, (unsigned long long)now.rlim_cur,
               (unsigned long long)now.rlim_max, more < 0 && err == EMFILE ? "EMFILE" : "ok", lost);
    }
    return 0;
}
