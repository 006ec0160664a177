/* rs_agentmsg.c — speaks the agent's side of refset_agent.h itself, so the
 * recorder's handling of the messages is tested whatever the agent does:
 * finds refset_fd=N in MEMTRAIL_OPTIONS, maps 8 pages and sends MAP (with
 * a made-up allocation stack), touches them, then sends UNMAP with its own
 * time before unmapping them. Writes "mapped START END", "unmap_time NS"
 * to the file named first. Exit 3 when there is no refset_fd. */
#include "refset/refset_agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int send_msg(int fd, uint16_t kind, uint64_t addr, uint64_t len, uint64_t t, int nframes)
{
    mt_rs_agent_msg m;
    memset(&m, 0, sizeof m);
    m.magic = MT_RS_AGENT_MAGIC;
    m.kind = kind;
    m.category = 1; /* VirtualAlloc */
    m.nframes = (uint8_t)nframes;
    m.pid = (uint32_t)getpid();
    m.tid = (uint32_t)getpid();
    m.time_ns = t;
    m.addr = addr;
    m.len = len;
    for (int i = 0; i < nframes; i++)
        m.frames[i] = 0x401000u + 16u * (unsigned)i;
    return send(fd, &m, MT_RS_AGENT_MSG_SIZE(nframes), MSG_NOSIGNAL) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    const char *opts = getenv("MEMTRAIL_OPTIONS"), *at = opts ? strstr(opts, "refset_fd=") : NULL;
    FILE *out = argc > 1 ? fopen(argv[1], "w") : NULL;
    if (!out || !at)
        return 3;
    int fd = atoi(at + strlen("refset_fd="));
    size_t len = 8 * 4096;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    madvise(p, len, MADV_NOHUGEPAGE);
    fprintf(out, "mapped %lu %lu\n", (unsigned long)p, (unsigned long)p + len);
    if (send_msg(fd, 2, (uint64_t)(uintptr_t)p, len, now_ns(), 3) < 0)
        return 1;
    for (size_t i = 0; i < len; i += 4096)
        p[i] = 1;
    struct timespec ts = {0, 120 * 1000000L};
    nanosleep(&ts, NULL);
    uint64_t t = now_ns();
    if (send_msg(fd, 3, (uint64_t)(uintptr_t)p, len, t, 0) < 0)
        return 1;
    munmap(p, len);
    fprintf(out, "unmap_time %llu\n", (unsigned long long)t);
    fclose(out);
    nanosleep(&ts, NULL);
    return 0;
}
