/* procfs.h — numbers from /proc that the agent and the CLI both read.
 * Agent-safe: no malloc, no stdio. */
#ifndef MT_COMMON_PROCFS_H
#define MT_COMMON_PROCFS_H

#include <stdint.h>

/* Field n (>= 3, as proc(5) counts them) of /proc/PID/stat as a number
 * (pid 0: this process), or 0 when it cannot be read. */
uint64_t mt_proc_stat_field(int pid, int n);

#endif
