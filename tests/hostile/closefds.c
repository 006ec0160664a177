/* closefds.c — a hostile program for the agent: prints its one line, then
 * closes every file descriptor (0..1023, stdin/stdout/stderr included),
 * opens a scratch file (argv[1], which takes the lowest free fd, 0), writes a
 * known pattern, allocates and frees a lot, and reads the file back. Exit 0
 * when the file holds exactly what the program wrote: a tracker that kept
 * writing to a descriptor number it no longer owns would corrupt it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATTERN_LEN 4096

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: closefds SCRATCH-FILE\n");
        return 2;
    }
    printf("closing all fds\n");
    fflush(stdout);
    for (int fd = 0; fd < 1024; fd++)
        close(fd);

    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 3;
    char pattern[PATTERN_LEN];
    for (int i = 0; i < PATTERN_LEN; i++)
        pattern[i] = (char)('a' + i % 26);
    if (write(fd, pattern, PATTERN_LEN) != PATTERN_LEN)
        return 4;

    /* Enough events that a trace writer flushes chunks while the file is open. */
    for (int round = 0; round < 200; round++) {
        void *blocks[500];
        for (int i = 0; i < 500; i++)
            blocks[i] = malloc((size_t)(16 + (i * 37) % 2000));
        for (int i = 0; i < 500; i++)
            free(blocks[i]);
    }

    char back[PATTERN_LEN + 16];
    if (lseek(fd, 0, SEEK_SET) != 0)
        return 5;
    ssize_t n = read(fd, back, sizeof back);
    if (n != PATTERN_LEN || memcmp(back, pattern, PATTERN_LEN) != 0)
        return 6;
    if (lseek(fd, 0, SEEK_END) != PATTERN_LEN)
        return 7;
    close(fd);
    unlink(argv[1]);
    return 0;
}
