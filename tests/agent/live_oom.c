/* live_oom.c — exhausts its heap, then waits to be queried: the summary
 * must still come (the agent answers without malloc). It allocates a known
 * amount in category "oom", limits its address space to what it has plus
 * 32 MiB, and allocates in ever smaller pieces until even malloc(16) fails.
 * Then it writes its books with snprintf + write (stdio would need the
 * heap) to DIR/oom ("oom live count peak allocs frees reallocs" and
 * "exhausted 1" when the last malloc failed), DIR/ready; waits DIR/go.
 * Usage: live_oom DIR */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"

static long long live, count, peak;

static void note(long long n)
{
    live += n;
    count++;
    if (live > peak)
        peak = live;
}

static long vm_size_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return strtol(buf, NULL, 10) * sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char path[PATH_MAX], text[256];
    mt_tag_push("oom");
    for (int i = 0; i < 4; i++) {
        if (malloc(100000))
            note(100000);
    }
    long vm = vm_size_bytes();
    if (vm < 0)
        return 3;
    struct rlimit rl = {.rlim_cur = (rlim_t)vm + (32u << 20), .rlim_max = (rlim_t)vm + (32u << 20)};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 4;
    int exhausted = 0;
    for (size_t size = 1u << 20; size >= 16; size /= 2) {
        while (malloc(size))
            note((long long)size);
    }
    exhausted = malloc(16) == NULL;
    mt_tag_pop();

    snprintf(path, sizeof path, "%s/oom", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 5;
    int n = snprintf(text, sizeof text, "oom %lld %lld %lld %lld 0 0\nexhausted %d\n", live, count, peak,
                     count, exhausted);
    if (write(fd, text, (size_t)n) != n)
        return 6;
    close(fd);
    snprintf(path, sizeof path, "%s/ready", argv[1]);
    close(open(path, O_WRONLY | O_CREAT, 0644));
    snprintf(path, sizeof path, "%s/go", argv[1]);
    for (int i = 0; i < 30000 && access(path, F_OK) != 0; i++) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
