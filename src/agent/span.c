/* span.c — request spans: mt_span_begin/mt_span_end and the latency
 * histograms per span name (meminfo.h, docs/info.md).
 * SKELETON: the h-spans helper's. */
#include <errno.h>

#include "agent/meminfo.h"

MT_EXPORT int mt_span_begin(const char *name)
{
    (void)name;
    return -ENOSYS;
}

MT_EXPORT int mt_span_end(void)
{
    return -ENOSYS;
}

void mt_span_write(mt_out *o)
{
    (void)o;
}

void mt_span_after_fork_child(void)
{
}
