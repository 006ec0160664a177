/* sample.h — sample mode's choice of allocations (docs/sampling.md):
 * byte-based Poisson sampling, as jemalloc's prof and tcmalloc do it.
 *
 * Each thread counts down the bytes left until its next sample
 * (mt_t.sample_left), drawn from an exponential distribution of mean
 * R = sample_rate. An allocation of s < R bytes subtracts s and is sampled
 * when the count reaches zero: with probability p(s) = 1 - exp(-s/R),
 * independently of every other (the exponential has no memory). One of
 * s >= R bytes is always sampled and leaves the count alone. An unsampled
 * allocation costs the inlined subtract and compares below; the rest
 * (the thread's generator, the draws) is mt_sample_slow, which neither
 * allocates nor locks: it runs in signal handlers' mallocs too.
 *
 * A sampled allocation stands for w(s) = 1/p(s) allocations and s * w(s)
 * bytes (Horvitz-Thompson); site.c counts those weights, the counts in
 * fixed point (MT_SAMPLE_ONE = one allocation). */
#ifndef MT_AGENT_SAMPLE_H
#define MT_AGENT_SAMPLE_H

#include <stdint.h>

#include "agent/agent.h"
#include "agent/site.h"

#define MT_SAMPLE_RATE_DEFAULT (512 * 1024)
/* One allocation, in the site counters' fixed point: a site's count
 * overflows past 2^51 estimated allocations. */
#define MT_SAMPLE_ONE 4096

/* The slow half of mt_sample_take: the thread's first draw, an
 * allocation that crossed its count, or one of R bytes or more. */
int mt_sample_slow(uint64_t size, int64_t left);

/* mt_sample_take's common answer, told without a call: 1 when this
 * allocation of `size` bytes is not sampled and does not cross the count
 * (taken down); 0, with nothing changed, when the slow half must decide. */
static MT_INLINE int mt_sample_skip(uint64_t size)
{
    int64_t left = mt_t.sample_left - (int64_t)size;
    if (MT_LIKELY(left > 0) && MT_LIKELY((int64_t)size < mt_site_opt.sample_rate)) {
        mt_t.sample_left = left;
        return 1;
    }
    return 0;
}

/* mt_sample_skip of an allocation smaller than the rate. */
static MT_INLINE int mt_sample_skip_small(uint64_t size)
{
    int64_t left = mt_t.sample_left - (int64_t)size;
    if (MT_LIKELY(left > 0)) {
        mt_t.sample_left = left;
        return 1;
    }
    return 0;
}

/* Is this allocation of `size` bytes sampled? */
static MT_INLINE int mt_sample_take(uint64_t size)
{
    if (MT_LIKELY(mt_sample_skip(size)))
        return 0;
    int64_t left = mt_t.sample_left - (int64_t)size;
    mt_t.sample_left = left;
    return mt_sample_slow(size, left);
}

/* What a new block does under recording `rec` (record.h): the block's tag
 * kind, MT_REC_DETAIL for a sampled block when sampling, else rec. */
static MT_INLINE int mt_sample_kind(int rec, uint64_t size)
{
    if (MT_LIKELY(rec != MT_REC_SAMPLE))
        return rec;
    return mt_sample_take(size) ? MT_REC_DETAIL : MT_REC_NONE;
}

/* The weight of a sampled block of `size` bytes at this process's rate:
 * the bytes it stands for and the allocations, in 1/MT_SAMPLE_ONE. The
 * same size always gets the same weight, so a free takes away exactly
 * what the allocation added. */
void mt_sample_weight(uint64_t size, int64_t *bytes, int64_t *count);
/* A fixed-point count rounded to whole allocations. */
static inline int64_t mt_sample_round(int64_t fixed)
{
    return fixed >= 0 ? (fixed + MT_SAMPLE_ONE / 2) / MT_SAMPLE_ONE
                      : -((-fixed + MT_SAMPLE_ONE / 2) / MT_SAMPLE_ONE);
}

/* In a fork child: a random seed is drawn again (the parent goes on with
 * the same generator); a fixed seed goes on as it was. */
void mt_sample_after_fork_child(void);

#endif
