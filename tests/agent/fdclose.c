/* fdclose.c — a program that closes, or reuses by dup2/dup3, descriptors
 * it did not open, as daemons and children before exec do, then opens
 * files of its own and allocates. argv[1] says how: close (each of 3 to
 * 4095), close_range (3 to ~0), closefrom (3), raw (the close_range
 * system call itself, which the agent does not see; the program then
 * takes every one of the agent's numbers for a file of its own, with
 * F_DUPFD, and its own closes of them must close; a fork child must find
 * them open), dup2 or dup3 (a file
 * of its own onto every descriptor open at start but 0, 1 and 2, which
 * are the agent's). argv[2]: a directory for its 16 files. It then allocates
 * and frees ALLOCS blocks (enough for trace mode to write the trace file
 * again and again), writes "mine <k>\n" into each of its files and
 * through each descriptor it took by dup2/dup3, and prints "fdclose:
 * ALLOCS allocations": tests/agent/test_fdguard.sh checks that the files
 * hold only that and that the agent's trace and report lost nothing.
 * argv[3] "trace": first allocate until the agent's trace file is open.
 * "fdclose count" opens /dev/null until it cannot, and prints how many;
 * "fdclose list" prints its open descriptors below 512 (open in each of
 * five looks). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ALLOCS 300000
#define FILES 16
#define TAKEN_MAX 64

static int write_line(int fd, int k)
{
    char line[32];
    int n = snprintf(line, sizeof line, "mine %d\n", k);
    return write(fd, line, (size_t)n) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "count") == 0) {
        /* How many descriptors the program can open under its limit
         * (ulimit -n): as many as bare, whatever the agent keeps. */
        int n = 0, fd, last = -1;
        for (int i = 0; i < 100000 && (fd = open("/dev/null", O_RDONLY)) >= 0; i++) {
            free(malloc(64));
            n++;
            last = fd;
        }
        printf("fdclose: opened %d\n", n);
        for (fd = 3; fd <= last; fd++) /* its own, then: room for the report at exit */
            close(fd);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        /* Its open descriptors below 512, after an allocation: those open
         * in each of 5 looks 20 ms apart (an agent thread opening a file
         * holds a low number for a moment before it moves it high). */
        free(malloc(64));
        char seen[512];
        memset(seen, 1, sizeof seen);
        for (int look = 0; look < 5; look++) {
            if (look)
                usleep(20000);
            DIR *d = opendir("/proc/self/fd");
            if (!d)
                return 1;
            char now[512] = {0};
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                int fd = atoi(e->d_name);
                if (e->d_name[0] != '.' && fd != dirfd(d) && fd < 512)
                    now[fd] = 1;
            }
            closedir(d);
            for (int fd = 0; fd < 512; fd++)
                seen[fd] &= now[fd];
        }
        for (int fd = 0; fd < 512; fd++)
            if (seen[fd])
                printf("%d ", fd);
        printf("\n");
        return 0;
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: fdclose close|close_range|closefrom|raw|dup2|dup3 DIR [trace]\n");
        return 2;
    }
    const char *how = argv[1];
    /* Every descriptor open now but the standard three: the agent's (the
     * test starts the program with no others). Under trace mode, after
     * allocating until the trace file is open (a name ending in .mtt), so
     * that dup2 and dup3 aim at it too. */
    int taken[TAKEN_MAX], ntaken = 0, want_trace = argc > 3 && strcmp(argv[3], "trace") == 0, trace_open = 0;
    for (int round = 0; round < 2000; round++) {
        trace_open = 0;
        ntaken = 0;
        DIR *d = opendir("/proc/self/fd");
        if (!d)
            return 1;
        int dfd = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL && ntaken < TAKEN_MAX) {
            int fd = atoi(e->d_name);
            if (e->d_name[0] == '.' || fd <= 2 || fd == dfd)
                continue;
            taken[ntaken++] = fd;
            char link[64], target[4096];
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n > 4 && memcmp(target + n - 4, ".mtt", 4) == 0)
                trace_open = 1;
        }
        closedir(d);
        if (trace_open || !want_trace)
            break;
        for (int i = 0; i < 10000; i++)
            free(malloc(100 + (size_t)(i % 1000)));
        usleep(1000);
    }
    for (int i = 0; i < 1000; i++) /* something in the agent's buffers first */
        free(malloc(100 + (size_t)i));
    char path[4096];
    int dup_file = -1;
    if (strcmp(how, "close") == 0) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    } else if (strcmp(how, "close_range") == 0) {
        if (close_range(3, ~0u, 0) != 0) {
            perror("close_range");
            return 1;
        }
    } else if (strcmp(how, "closefrom") == 0) {
        closefrom(3);
    } else if (strcmp(how, "raw") == 0) {
        /* behind the hooks' back: the numbers come back to the program,
         * which takes each of them at once for a file of its own */
        if (syscall(SYS_close_range, 3, ~0u, 0) != 0) {
            perror("close_range");
            return 1;
        }
        snprintf(path, sizeof path, "%s/dup", argv[2]);
        dup_file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (dup_file < 0)
            return 1;
        for (int i = 0; i < ntaken; i++)
            if (taken[i] != dup_file && fcntl(dup_file, F_DUPFD_CLOEXEC, taken[i]) != taken[i]) {
                perror("F_DUPFD");
                return 1;
            }
        /* A fork child has them too: the agent's fork handling must not
         * close a number that was its own (the query socket's) and is the
         * program's now. */
        pid_t child = fork();
        if (child == 0) {
            for (int i = 0; i < 1000; i++)
                free(malloc(64 + (size_t)i));
            for (int i = 0; i < ntaken; i++)
                if (write_line(taken[i], 100 + i) != 0) {
                    fprintf(stderr, "fdclose: in a fork child, descriptor %d (the program's now) is closed\n",
                            taken[i]);
                    _exit(3);
                }
            _exit(0);
        }
        int st;
        if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
    } else if (strcmp(how, "dup2") == 0 || strcmp(how, "dup3") == 0) {
        snprintf(path, sizeof path, "%s/dup", argv[2]);
        dup_file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (dup_file < 0)
            return 1;
        for (int i = 0; i < ntaken; i++) {
            int r = how[3] == '2' ? dup2(dup_file, taken[i]) : dup3(dup_file, taken[i], O_CLOEXEC);
            if (r != taken[i]) {
                perror(how);
                return 1;
            }
        }
    } else {
        fprintf(stderr, "fdclose: unknown way '%s'\n", how);
        return 2;
    }

    int files[FILES];
    for (int k = 0; k < FILES; k++) {
        snprintf(path, sizeof path, "%s/f%d", argv[2], k);
        files[k] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (files[k] < 0)
            return 1;
    }
    void *keep[64] = {0};
    for (int i = 0; i < ALLOCS; i++) {
        free(keep[i % 64]);
        keep[i % 64] = malloc(16 + (size_t)(i % 512));
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    for (int k = 0; k < FILES; k++) {
        struct stat before, after;
        if (write_line(files[k], k) != 0 || fstat(files[k], &before) != 0 || close(files[k]) != 0)
            return 1;
        /* the program's own close must close (the number may be another's
         * at once: the agent opens files of its own too) */
        if (fstat(files[k], &after) == 0 && after.st_dev == before.st_dev && after.st_ino == before.st_ino) {
            fprintf(stderr, "fdclose: close(%d) of its own file left it open\n", files[k]);
            return 1;
        }
    }
    if (dup_file >= 0)
        for (int i = 0; i < ntaken; i++)
            if (write_line(taken[i], 100 + i) != 0)
                return 1;
    printf("fdclose: %d allocations, %d descriptors taken, trace file %s\n", ALLOCS, ntaken,
           trace_open ? "among them" : "not open");
    return 0;
}
