/* options.h — MEMTRAIL_OPTIONS ("key=value:key=value") parsed into one
 * struct (options.c), apart from the rest of the agent: init.c applies the
 * result to the agent's state, and the fuzz harness (tests/agent/
 * fuzz_options.c) calls the parser alone. No allocation, no I/O. */
#ifndef MT_AGENT_OPTIONS_H
#define MT_AGENT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "agent/site.h" /* MT_MODE_*, MT_ON_ERROR_*, MT_QUERY_*, MT_UNWIND_*, MT_DEPTH_MAX, MT_PATH_MAX */

typedef struct mt_env_options {
    int mode;                 /* MT_MODE_* */
    int on_error;             /* MT_ON_ERROR_* */
    int canary_fit;           /* canary=fit */
    char output[MT_PATH_MAX]; /* the report's path template */
    int depth;                /* frames per stack, 1..MT_DEPTH_MAX */
    int unwind;               /* MT_UNWIND_* */
    uint64_t sample_rate;     /* sample mode: mean bytes between samples */
    uint64_t sample_seed;     /* sample mode: 0 = random */
    uint64_t trace_buffer;    /* bytes */
    uint32_t trace_time_unit_ns;
    int trace_level;         /* zstd level */
    uint32_t trace_chunk;    /* events per chunk */
    uint32_t trace_threads;  /* encoder threads; 0: min(CPUs, 4) */
    int trace_wait;          /* trace_loss=wait */
    int crash_report;        /* MT_CRASH_REPORT_* (agent.h) */
    int follow_exec;         /* 0 or 1 */
    int query;               /* MT_QUERY_* */
    int start;               /* start=on (1) or off (0): recording from start-up */
    int refset_fd;           /* the socket of `memtrail refset record`, or -1 */
    uint64_t peak_step;      /* memory info: bytes between PEAK events (at least) */
    uint64_t limit;          /* memory info: LIMIT above this many live bytes; 0 = none */
    int info_interval_ms;    /* memory info: PERIODIC events; 0 = none */
    int alloc_timing;        /* MT_ALLOC_TIMING_* */
    int span_faults;         /* 0 or 1 */
    int run_pid;             /* the process `memtrail run` started, or 0 */
    char value[MT_PATH_MAX]; /* the parser's scratch: a value unescaped */
} mt_env_options;

/* Parses `s` into o, whose fields hold the defaults on entry (only the
 * keys given change). In a value, "\:" is ':' and "\\" is '\'; empty
 * fields are skipped. Returns 0, or -EINVAL with one line in err saying
 * what is wrong ("MEMTRAIL_OPTIONS: bad value 'x' for depth (accepted:
 * ...)"); o may then hold some of the values before the bad one. */
int mt_options_parse(const char *s, mt_env_options *o, char *err, size_t errlen);

#endif
