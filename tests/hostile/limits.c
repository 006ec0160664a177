/* limits.c — a hostile program for the agent: runs under tight resource
 * limits it sets itself.
 *   nofile: RLIMIT_NOFILE soft limit 8; allocates, forks a child that
 *           allocates, then opens /dev/null until EMFILE and allocates
 *           with no descriptor free, closes them again and exits.
 *   as:     RLIMIT_AS 256 MiB; mallocs 1 MiB blocks (touching each) until
 *           malloc returns NULL, prints "ok" when it got at least 200,
 *           frees them, and checks that malloc works again. A tracker must
 *           survive its own allocations failing, and leave the program
 *           most of its address space.
 *   as-headroom: the same with RLIMIT_AS = what the process maps now +
 *           256 MiB: the failing mallocs alone, whatever the tracker had
 *           mapped before the limit. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void churn(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = malloc((size_t)(1 + i % 5000));
        free(p);
    }
}

static int nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 3;
    rl.rlim_cur = 8;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 4;
    churn(50000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 5;
    if (pid == 0) {
        churn(20000);
        exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 6;
    printf("child: exited %d, status %d\n", WIFEXITED(st), WEXITSTATUS(st));

    int fds[16], n = 0;
    while (n < 16) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0)
            break;
        fds[n++] = fd;
    }
    int emfile = errno == EMFILE;
    churn(50000);
    while (n > 0)
        close(fds[--n]);
    printf("hit EMFILE %d\n", emfile);
    churn(1000);
    printf("ok\n");
    return 0;
}

/* The process's mapped size now, in bytes (first field of statm). */
static long vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%ld", &pages) != 1)
        pages = -1;
    fclose(f);
    return pages < 0 ? -1 : pages * sysconf(_SC_PAGESIZE);
}

#define MAX_BLOCKS 4096

static int address_space(int headroom)
{
    long now = headroom ? vm_size() : 0;
    if (now < 0)
        return 3;
    struct rlimit rl = {(rlim_t)now + (256ul << 20), (rlim_t)now + (256ul << 20)};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 4;
    static void *blocks[MAX_BLOCKS];
    int n = 0;
    while (n < MAX_BLOCKS) {
        char *p = malloc(1 << 20);
        if (!p)
            break;
        memset(p, n, 4096);
        p[(1 << 20) - 1] = 1;
        blocks[n++] = p;
    }
    if (n >= 200 && n < MAX_BLOCKS)
        printf("ok\n");
    else
        printf("got %d blocks\n", n);
    for (int i = 0; i < n; i++)
        free(blocks[i]);
    void *again = malloc(1 << 20);
    printf("malloc after free %s\n", again ? "works" : "fails");
    free(again);
    churn(10000);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "nofile") == 0)
        return nofile();
    if (argc == 2 && strcmp(argv[1], "as") == 0)
        return address_space(0);
    if (argc == 2 && strcmp(argv[1], "as-headroom") == 0)
        return address_space(1);
    fprintf(stderr, "usage: limits nofile | as | as-headroom\n");
    return 2;
}
