/* meminfo_os.h — what the kernel and the allocator say about the
 * process's memory, for the memory info snapshots (meminfo.c). No malloc,
 * no stdio, no locks: descriptors opened at start-up and read with pread
 * into stack buffers. */
#ifndef MT_AGENT_MEMINFO_OS_H
#define MT_AGENT_MEMINFO_OS_H

#include <stdint.h>

typedef struct mt_os_mem {
    uint64_t rss, committed;  /* /proc/self/statm: resident and data (VmData + VmStk), bytes */
    uint64_t load, total;     /* the cgroup's memory.current and memory.max when it sets a limit,
                                 else MemTotal - MemAvailable and MemTotal */
    uint64_t minflt, majflt;  /* getrusage(RUSAGE_SELF) */
    uint64_t cg_current;      /* cgroup v2 memory.current (0: no such file) */
    uint64_t cg_high, cg_max; /* memory.high, memory.max; 0: "max" (no limit) or no such file */
} mt_os_mem;

/* At start-up and in a fork child (/proc/self/statm opened by the parent
 * is the parent's): opens the files. */
void mt_os_mem_open(void);
/* now_ns: CLOCK_MONOTONIC, which paces the machine-wide figures (load and
 * total without a cgroup limit, the cgroup's limits): read again 1000
 * times the last read's duration later, at least 10 ms and at most a
 * second, and repeated in between. One thread at a time. */
void mt_os_mem_read(mt_os_mem *m, uint64_t now_ns);
/* Free bytes the allocator holds (mallinfo2's fordblks): 0, or -ENOSYS
 * when the allocator is not glibc's. Takes the arena locks: never while
 * the caller may hold one. */
int mt_os_free_bytes(uint64_t *out);

#endif
