/* sample.c — sample mode's draws and weights (sample.h). Runs only for
 * sampled allocations and a thread's first one: no malloc, no locks, no
 * libm (the agent links none): exp and log are the short series below,
 * exact to double precision on the ranges they are given. */
#include "agent/sample.h"

#include <sys/random.h>

static _Atomic uint64_t thread_ordinal; /* the order threads first sample in */

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* This thread's generator: from sample_seed and the thread's ordinal, so
 * a single-threaded run with a fixed seed samples the same allocations
 * every time; from the kernel (or the clock) when the seed is 0. */
static void seed_thread(void)
{
    uint64_t s = mt_site_opt.sample_seed;
    if (s == 0) {
        if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
            s = __builtin_ia32_rdtsc() ^ (uint64_t)(uintptr_t)&mt_t;
    } else {
        uint64_t ord = atomic_fetch_add(&thread_ordinal, 1);
        s ^= splitmix(&ord);
    }
    mt_t.sample_rng = s;
    mt_t.sample_seeded = 1;
}

/* ln(u) for u in (0, 1]: u = m * 2^e with m in [1, 2), ln m by the
 * atanh series in t = (m - 1) / (m + 1) < 1/3. */
static double log_unit(double u)
{
    union {
        double d;
        uint64_t b;
    } v = {u};
    int e = (int)((v.b >> 52) & 0x7ff) - 1023;
    v.b = (v.b & ((1ull << 52) - 1)) | (1023ull << 52);
    double t = (v.d - 1) / (v.d + 1), t2 = t * t, term = t, sum = 0;
    for (int k = 1; k < 60; k += 2) {
        sum += term / k;
        term *= t2;
    }
    return e * 0.69314718055994530942 + 2 * sum;
}

/* p(s) = 1 - exp(-x) for x = s/R in [0, 1), by its alternating series
 * (no cancellation: the first term dominates). */
static double sample_prob(double x)
{
    double term = x, sum = x;
    for (int k = 2; k < 30; k++) {
        term *= -x / k;
        sum += term;
    }
    return sum;
}

/* Bytes until the next sample: ceil of an exponential of mean R, so that
 * the count is past s bytes with probability exactly exp(-s/R). */
static int64_t draw(void)
{
    uint64_t x = splitmix(&mt_t.sample_rng);
    double u = (double)((x >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double e = -log_unit(u) * (double)mt_site_opt.sample_rate;
    int64_t c = (int64_t)e;
    if ((double)c < e)
        c++;
    return c > 0 ? c : 1;
}

int mt_sample_slow(uint64_t size, int64_t left)
{
    /* `left` is this call's count after it, as mt_sample_take stored it: a
     * signal handler's malloc nested here may change mt_t.sample_left,
     * and this call's answer must not depend on that. */
    int64_t s = (int64_t)size;
    if (MT_UNLIKELY(!mt_t.sample_seeded)) {
        /* The thread's first allocation: its count is drawn before it. */
        seed_thread();
        left = draw() - s;
        mt_t.sample_left = left;
    }
    if (s >= mt_site_opt.sample_rate) {
        mt_t.sample_left += s; /* large blocks are counted exactly, apart */
        return 1;
    }
    if (left > 0)
        return 0;
    mt_t.sample_left = draw();
    return 1;
}

void mt_sample_weight(uint64_t size, int64_t *bytes, int64_t *count)
{
    int64_t rate = mt_site_opt.sample_rate;
    if ((int64_t)size >= rate || size == 0) {
        *bytes = (int64_t)size;
        *count = MT_SAMPLE_ONE;
        return;
    }
    double p = sample_prob((double)size / (double)rate);
    *bytes = (int64_t)((double)size / p + 0.5);
    *count = (int64_t)(MT_SAMPLE_ONE / p + 0.5);
}

void mt_sample_after_fork_child(void)
{
    if (mt_site_opt.sample_seed == 0)
        mt_t.sample_seeded = 0;
}
