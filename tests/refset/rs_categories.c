/* rs_categories.c — touches known amounts of each page category
 * between the marks T0 and T1 (CLOCK_MONOTONIC ns on stdout), after
 * start-up is over, so the viewport [T0, T1] holds these and little else:
 *   Heap              2048 malloc blocks of 4000 bytes (brk heap), written
 *   VirtualAlloc      a 16 MiB private anonymous mapping, written (and the
 *                     few pages pthread_create writes for the new thread
 *                     before it runs, and the agent's own, if loaded)
 *   UserStack         1 MiB of a new thread's stack, written by the thread
 *   PFMappedSection   a 4 MiB MAP_SHARED anonymous region, written
 *   MapFile           a 4 MiB data file (argv[1]) mapped and read
 *   CopyOnWriteImage  a 1 MiB initialised array in .data, written
 * Each region is printed as "RANGE name addr bytes". Nothing is released
 * before T1 but the thread's stack, which glibc gives back with madvise
 * when the thread ends. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static char image_data[MIB] = {1}; /* .data: file-backed until written */
static volatile unsigned sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void range(const char *name, const void *p, size_t bytes)
{
    printf("RANGE %s %#lx %zu\n", name, (unsigned long)(uintptr_t)p, bytes);
}

static void *stack_user(void *arg)
{
    (void)arg;
    volatile char buf[MIB];
    long page = sysconf(_SC_PAGESIZE);
    for (long i = MIB - 1; i >= 0; i -= page) /* downwards, as a stack grows */
        buf[i] = 1;
    range("stack", (const void *)buf, MIB);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rs_categories DATA_FILE\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    long page = sysconf(_SC_PAGESIZE);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    /* Map before T0; touch after. */
    char *anon = mmap(NULL, 16 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shm = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *file = mmap(NULL, 4 * MIB, PROT_READ, MAP_SHARED, fd, 0);
    if (anon == MAP_FAILED || shm == MAP_FAILED || file == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(anon, 16 * MIB, MADV_NOHUGEPAGE);
    char **blocks = calloc(2048, sizeof *blocks); /* touched now, before T0 */
    if (!blocks)
        return 1;
    usleep(200 * 1000);

    printf("T0 %llu\n", (unsigned long long)now_ns());
    usleep(100 * 1000);
    for (int i = 0; i < 2048; i++) {
        blocks[i] = malloc(4000);
        memset(blocks[i], 1, 4000);
    }
    range("heap", blocks[0], 2048 * 4000);
    for (size_t i = 0; i < 16 * MIB; i += (size_t)page)
        anon[i] = 1;
    range("anon", anon, 16 * MIB);
    pthread_t t;
    if (pthread_create(&t, NULL, stack_user, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    for (size_t i = 0; i < 4 * MIB; i += (size_t)page)
        shm[i] = 1;
    range("shared", shm, 4 * MIB);
    for (size_t i = 0; i < 4 * MIB; i += (size_t)page)
        sink += (unsigned char)file[i];
    range("file", file, 4 * MIB);
    for (size_t i = 0; i < MIB; i += (size_t)page)
        image_data[i] = 2;
    range("image_data", image_data, MIB);
    usleep(200 * 1000);
    printf("T1 %llu\n", (unsigned long long)now_ns());
    usleep(200 * 1000);
    return blocks[2047][0] == 1 ? 0 : 1;
}
