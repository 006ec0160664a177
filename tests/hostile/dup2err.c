/* dup2err.c — a hostile program for the agent: replaces stderr (fd 2).
 *   restore:    dup2s a pipe's write end over fd 2, allocates, writes one
 *               marker line to stderr, restores the old fd 2 and prints
 *               exactly what came through the pipe (a tracker that wrote to
 *               fd 2 meanwhile would show up in that line).
 *   file:       the same with a regular file over fd 2.
 *   brokenpipe: leaves a pipe whose read end is closed on fd 2 and exits
 *               normally: any write to stderr at exit would raise SIGPIPE,
 *               as for `prog 2>&1 | head -1` once head has gone. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void churn(void)
{
    for (int round = 0; round < 100; round++) {
        void *blocks[200];
        for (int i = 0; i < 200; i++)
            blocks[i] = malloc((size_t)(8 + i * 13));
        for (int i = 0; i < 200; i++)
            free(blocks[i]);
    }
}

static const char marker[] = "marker line on the replaced stderr\n";

static int via_pipe(void)
{
    int p[2];
    if (pipe(p) != 0)
        return 3;
    int saved = dup(2);
    if (saved < 0 || dup2(p[1], 2) != 2)
        return 4;
    close(p[1]);
    churn();
    if (write(2, marker, sizeof marker - 1) != (ssize_t)(sizeof marker - 1))
        return 5;
    churn();
    if (dup2(saved, 2) != 2)
        return 6;
    close(saved);
    /* fd 2 was the pipe's last write end: read to EOF. */
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(p[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = 0;
    close(p[0]);
    printf("pipe held %zu bytes: %s", got, buf);
    return 0;
}

static int via_file(const char *path)
{
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f < 0)
        return 3;
    int saved = dup(2);
    if (saved < 0 || dup2(f, 2) != 2)
        return 4;
    churn();
    if (write(2, marker, sizeof marker - 1) != (ssize_t)(sizeof marker - 1))
        return 5;
    churn();
    if (dup2(saved, 2) != 2)
        return 6;
    close(saved);
    char buf[4096];
    ssize_t n = pread(f, buf, sizeof buf - 1, 0);
    if (n < 0)
        return 7;
    buf[n] = 0;
    close(f);
    unlink(path);
    printf("file held %zd bytes: %s", n, buf);
    return 0;
}

static int broken_pipe(void)
{
    int p[2];
    if (pipe(p) != 0 || dup2(p[1], 2) != 2)
        return 3;
    close(p[1]);
    close(p[0]);
    churn();
    printf("stderr is a broken pipe\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "restore") == 0)
        return via_pipe();
    if (argc >= 3 && strcmp(argv[1], "file") == 0)
        return via_file(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "brokenpipe") == 0)
        return broken_pipe();
    fprintf(stderr, "usage: dup2err restore | file PATH | brokenpipe\n");
    return 2;
}
