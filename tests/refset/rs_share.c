/* rs_share.c — two processes referencing the same physical pages: a
 * MAP_SHARED anonymous region (PFMappedSection) and a MAP_SHARED mapping of
 * a data file (MapFile), both mapped before fork and touched by neither
 * then. The process named by argv[2] ("parent" or "child") touches every
 * page of both first; the other one reads them all afterwards. So each
 * process references every page (Size: both), and each physical page is
 * first referenced by the first one (Impact Size: it alone).
 *
 * Usage: rs_share DATA_FILE parent|child. DATA_FILE's size is the
 * region size. Prints "PID first N", "PID second N", "RANGE ...", and
 * "T0 ns" before either process touched a page and "T1 ns" once both did
 * (CLOCK_MONOTONIC; both processes are alive until after T1). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned sink;

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000u + (unsigned long long)ts.tv_nsec;
}

static void use(char *shm, const char *file, size_t bytes, int write)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < bytes; i += (size_t)page) {
        if (write)
            shm[i] = 1;
        else
            sink += (unsigned char)shm[i];
        sink += (unsigned char)file[i];
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rs_share DATA_FILE parent|child\n");
        return 2;
    }
    int parent_first = strcmp(argv[2], "parent") == 0;
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(argv[1]);
        return 1;
    }
    size_t bytes = (size_t)st.st_size;
    char *shm = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *file = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (shm == MAP_FAILED || file == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("RANGE shared %#lx %zu\nRANGE file %#lx %zu\n", (unsigned long)(uintptr_t)shm, bytes,
           (unsigned long)(uintptr_t)file, bytes);
    int go[2], done[2];
    if (pipe(go) != 0 || pipe(done) != 0)
        return 1;
    printf("T0 %llu\n", now_ns());
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    char b = 0;
    if (child == 0) {
        if (parent_first) {
            if (read(go[0], &b, 1) != 1)
                _exit(1);
            use(shm, file, bytes, 0);
        } else {
            use(shm, file, bytes, 1);
        }
        if (write(done[1], "x", 1) != 1)
            _exit(1);
        usleep(300 * 1000); /* alive past T1 */
        _exit(0);
    }
    printf("PID %s %d\nPID %s %d\n", parent_first ? "first" : "second", (int)getpid(),
           parent_first ? "second" : "first", (int)child);
    if (parent_first) {
        use(shm, file, bytes, 1);
        if (write(go[1], "x", 1) != 1 || read(done[0], &b, 1) != 1)
            return 1;
    } else {
        if (read(done[0], &b, 1) != 1)
            return 1;
        use(shm, file, bytes, 0);
    }
    printf("T1 %llu\n", now_ns());
    int status;
    waitpid(child, &status, 0);
    usleep(200 * 1000);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
