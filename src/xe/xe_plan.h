/* xe_plan.h — event-session buffer sizing, exactly as SQL Server Extended
 * Events sizes its buffers (seed 000): how many buffers a partition mode
 * gives, how big each one is (whole 64 KiB chunks, 205 bytes of each
 * buffer kept for its management), the large buffers MAX_EVENT_SIZE adds,
 * and STRICT_MAX_MEMORY, which sizes down so the memory never exceeds
 * MAX_MEMORY. Pure arithmetic, no allocation: used by the agent's sessions
 * and by `memtrail xe plan`. */
#ifndef MT_XE_PLAN_H
#define MT_XE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define XE_CHUNK 65536u         /* buffers are made of 64 KiB chunks */
#define XE_BUFFER_OVERHEAD 205u /* bytes of each buffer not usable for events */
#define XE_DEFAULT_MAX_MEMORY (4u << 20)
/* The most CPUs or NUMA nodes a session (cpus=, nodes=) or `memtrail xe
 * plan` (--cpus, --nodes) sizes for: one limit, so the plan never shows
 * buffers a session would refuse. 8 times Linux's largest NR_CPUS (8192)
 * and 64 times its MAX_NUMNODES (1024); a session maps a partition and a
 * CPU map entry per count inside the traced program. */
#define XE_MAX_COUNT 65536u

typedef enum { XE_PART_NONE = 0, XE_PART_PER_NODE = 1, XE_PART_PER_CPU = 2 } xe_partition_mode;

typedef struct {
    uint64_t max_memory;     /* bytes */
    uint64_t max_event_size; /* bytes; 0 = no large buffers */
    xe_partition_mode mode;
    unsigned cpus;  /* logical CPUs (PER_CPU), >= 1 */
    unsigned nodes; /* NUMA nodes (PER_NODE), >= 1 */
    int strict;     /* STRICT_MAX_MEMORY=ON */
} xe_plan_in;

typedef struct {
    uint32_t total_regular_buffers;
    uint32_t chunks_per_buffer;    /* k */
    uint64_t regular_buffer_size;  /* usable bytes: k * 64 KiB - 205 */
    uint64_t regular_buffer_alloc; /* bytes allocated per buffer: k * 64 KiB */
    uint64_t total_buffer_size;    /* total_regular_buffers * regular_buffer_size */
    uint32_t total_large_buffers;  /* 2 with MAX_EVENT_SIZE, else 0 */
    uint64_t large_buffer_size;    /* usable bytes of one large buffer */
    uint64_t large_buffer_alloc;   /* bytes allocated per large buffer */
    uint64_t memory_allocated;     /* every buffer's allocation, large ones included */
} xe_plan_out;

/* Buffers a partition mode gives: NONE 3, PER_NODE 3 x nodes,
 * PER_CPU ceil(2.5 x cpus). */
unsigned xe_plan_buffers(xe_partition_mode mode, unsigned cpus, unsigned nodes);

/* Size a session. Returns 0 and fills *out, or -EINVAL with a one-line
 * reason in why[0..whylen) (no "memtrail:" prefix, no newline), e.g.
 * "max_memory 191 KB gives 3 buffers of 65194 bytes; a buffer needs at least 64 KB (max_memory >= 192 KB)".
 */
int xe_plan(const xe_plan_in *in, xe_plan_out *out, char *why, size_t whylen);

/* Parse a size: digits with an optional unit B, KB/K, MB/M, GB/G (case
 * insensitive); a bare number is in `bare_unit` bytes (1024 for KB).
 * Returns 0, or -EINVAL (not a size), -ERANGE (too big). */
int xe_parse_size(const char *s, uint64_t bare_unit, uint64_t *out);

/* "none", "per_node", "per_cpu" (case insensitive). Returns 0 or -EINVAL. */
int xe_parse_partition_mode(const char *s, xe_partition_mode *mode);
const char *xe_partition_mode_name(xe_partition_mode mode); /* "NONE", "PER_NODE", "PER_CPU" */

#endif /* MT_XE_PLAN_H */
