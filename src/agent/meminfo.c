/* meminfo.c — memory events (PEAK, GROW, TRIM, LIMIT, PERIODIC) and the
 * consistent snapshot of each kind's last one: mt_memory_info,
 * mt_event_count, mt_category_name (meminfo.h, docs/info.md).
 * SKELETON: the time accounting is done; events are the h-events helper's. */
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#include "agent/counters.h"
#include "agent/meminfo.h"

mt_info_options mt_info_opt = {.peak_step = 1u << 20};

/* The origin of the tick/clock ratio, and the process's totals. */
static uint64_t tick0, ns0;
static _Atomic uint64_t alloc_ticks, map_ticks;

void mt_info_init(void)
{
    ns0 = mt_clock_ns(CLOCK_MONOTONIC);
    tick0 = mt_ticks();
}

void mt_info_after_fork_child(void)
{
}

uint64_t mt_ticks_to_ns(uint64_t ticks)
{
    uint64_t dt = mt_ticks() - tick0, dn = mt_clock_ns(CLOCK_MONOTONIC) - ns0;
    if (dt == 0 || dn == 0)
        return ticks;
    return (uint64_t)((double)ticks * (double)dn / (double)dt);
}

void mt_info_add_alloc_ticks(uint64_t ticks)
{
    atomic_fetch_add_explicit(&alloc_ticks, ticks, memory_order_relaxed);
}

void mt_info_add_map_ticks(uint64_t ticks)
{
    atomic_fetch_add_explicit(&map_ticks, ticks, memory_order_relaxed);
}

void mt_info_event(int kind, int may_sample)
{
    (void)kind, (void)may_sample;
}

void mt_info_live_check(int64_t live)
{
    (void)live;
}

void mt_info_block_mapped(uint64_t size, int grow)
{
    (void)size, (void)grow;
}

void mt_info_write(mt_out *o)
{
    (void)o;
}

MT_EXPORT int mt_memory_info(int kind, struct mt_memory_info *out)
{
    (void)kind, (void)out;
    return -ENOSYS;
}

MT_EXPORT uint64_t mt_event_count(int kind)
{
    (void)kind;
    return 0;
}

MT_EXPORT const char *mt_category_name(int id)
{
    if (id < 0 || id >= atomic_load(&mt_ncats))
        return NULL;
    return mt_cats[id].name;
}
