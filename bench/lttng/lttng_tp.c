/* lttng_tp.c — the tracepoint provider of memtrail_bench_tp.h (the probe
 * code LTTng-UST's macros generate), linked into lttng_fire. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "memtrail_bench_tp.h"
