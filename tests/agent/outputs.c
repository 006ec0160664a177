/* outputs.c — programs that make the agent's report hard to write, for
 * tests/agent/test_outputs.sh. Each keeps a known number of bytes live at
 * exit (the truth its report is checked against) and exits normally.
 *
 *   setid P C        forks a child that drops root (setgid, setuid to 65534)
 *                    and keeps C bytes; the parent keeps P bytes
 *   jail DIR P C     the same, the child first chroot()s into DIR and drops
 *                    with setresgid/setresuid
 *   chroot DIR P     chroot()s into DIR and keeps P bytes
 *   closeall P       closes every descriptor above 2, then dup2()s /dev/null
 *                    onto all of them up to the descriptor limit, keeps P bytes
 *   template T...    keeps 4096 bytes, calls mt_report_write(T) for each T
 *                    and prints what each returned, one line
 *
 * Prints "parent PID" and, for the forking ones, "child PID" on stdout.
 * Exit status 0, or 1 with a line on stderr when a step fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrail.h"

#define NOBODY 65534

static void *keep(size_t n)
{
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "outputs: malloc(%zu) failed\n", n);
        exit(1);
    }
    memset(p, 1, n);
    return p;
}

static void step(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "outputs: %s: %s\n", what, strerror(errno));
        exit(1);
    }
}

static void *volatile kept[2];

/* The child drops root (in a chroot for jail) and keeps c bytes; the parent
 * keeps p bytes and waits for it. */
static int drop_in_child(const char *jail, size_t p, size_t c)
{
    printf("parent %d\n", (int)getpid());
    fflush(stdout);
    pid_t pid = fork();
    step(pid >= 0, "fork");
    if (pid == 0) {
        /* Something recorded before the drop, as every real server has
         * (in trace mode the child's file opens at its first event). */
        free(keep(64));
        if (jail) {
            step(chroot(jail) == 0, "chroot");
            step(chdir("/") == 0, "chdir /");
            step(setresgid(NOBODY, NOBODY, NOBODY) == 0, "setresgid");
            step(setresuid(NOBODY, NOBODY, NOBODY) == 0, "setresuid");
        } else {
            step(setgid(NOBODY) == 0, "setgid");
            step(setuid(NOBODY) == 0, "setuid");
        }
        step(geteuid() == NOBODY, "still root after dropping");
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        kept[0] = keep(c);
        exit(0);
    }
    kept[0] = keep(p);
    int st;
    step(waitpid(pid, &st, 0) == pid, "waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "outputs: the child failed (status %#x)\n", st);
        return 1;
    }
    return 0;
}

static int closeall(size_t p)
{
    printf("parent %d\n", (int)getpid());
    fflush(stdout);
    struct rlimit rl;
    step(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
    int top = rl.rlim_cur > 4096 ? 4096 : (int)rl.rlim_cur;
    for (int fd = 3; fd < top; fd++)
        close(fd);
    int null = open("/dev/null", O_WRONLY);
    step(null >= 0, "open /dev/null");
    for (int fd = 3; fd < top; fd++)
        if (fd != null)
            step(dup2(null, fd) == fd, "dup2");
    kept[0] = keep(p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "setid") == 0)
        return drop_in_child(NULL, strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10));
    if (argc == 5 && strcmp(argv[1], "jail") == 0)
        return drop_in_child(argv[2], strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "chroot") == 0) {
        printf("parent %d\n", (int)getpid());
        fflush(stdout);
        step(chroot(argv[2]) == 0, "chroot");
        step(chdir("/") == 0, "chdir /");
        kept[0] = keep(strtoul(argv[3], NULL, 10));
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "closeall") == 0)
        return closeall(strtoul(argv[2], NULL, 10));
    if (argc >= 3 && strcmp(argv[1], "template") == 0) {
        kept[0] = keep(4096);
        for (int i = 2; i < argc; i++)
            printf("%s%d", i > 2 ? " " : "", mt_report_write(argv[i]));
        printf("\n");
        return 0;
    }
    fprintf(stderr, "usage: outputs setid P C | jail DIR P C | chroot DIR P | closeall P | template T...\n");
    return 2;
}
