/* test_clock.c — the engine's clock (xe_dispatch.c) against the kernel's
 * CLOCK_MONOTONIC, the independent truth: raw ticks converted to ns name
 * the kernel's time of the moment; a span converted agrees with the
 * kernel's span, after the start-up calibration (250 us) and after a
 * dispatcher's first refinement (20 ms after it starts, when it would
 * otherwise sleep); an interval is converted with one reading of the rate
 * (xe_ticks_delta_ns), 0 when its end is the earlier reading. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "xe/xe.h"
#include "xe/xe_internal.h"
#include "xe/xe_thread.h"

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The kernel's ns and the ticks at about the same moment: of a few
 * tries, the one whose clock reads are closest around the tick read. */
static void pair(uint64_t *ns, uint64_t *ticks)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 16; i++) {
        uint64_t a = mono(), t = xe_ticks(), b = mono();
        if (b - a < best) {
            best = b - a;
            *ns = a + (b - a) / 2;
            *ticks = t;
        }
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* |converted span - kernel span| / kernel span, over ms of sleep. */
static double span_error(long ms, uint64_t *kernel_ns, uint64_t *engine_ns)
{
    uint64_t n0 = 0, t0 = 0, n1 = 0, t1 = 0;
    pair(&n0, &t0);
    sleep_ms(ms);
    pair(&n1, &t1);
    *kernel_ns = n1 - n0;
    *engine_ns = xe_ticks_delta_ns(t0, t1);
    double d = (double)*engine_ns - (double)*kernel_ns;
    return (d < 0 ? -d : d) / (double)*kernel_ns;
}

static int noop_init(xe_target *t, const char *p, char *w, size_t wl)
{
    (void)t, (void)p, (void)w, (void)wl;
    return 0;
}
static void noop_deliver(xe_target *t, const xe_event *ev)
{
    (void)t, (void)ev;
}
static const xe_target_ops noop = {.name = "noop", .init = noop_init, .deliver = noop_deliver};

int main(void)
{
    alarm(60);
    char name[200];
    xe_clock_init();

    /* A tick reading converted is the kernel's time of that moment (the
     * conversion is anchored at a CLOCK_MONOTONIC reading). */
    uint64_t n = 0, t = 0;
    pair(&n, &t);
    uint64_t at = xe_ticks_to_ns(t);
    int64_t off = (int64_t)(at - n);
    snprintf(name, sizeof name, "a tick reading converted is the kernel's time then (off by %lld ns)",
             (long long)off);
    CHECK(name, off > -100000 && off < 100000);

    /* An interval: one conversion, the difference of two conversions
     * with the same rate to a nanosecond (each rounds down), 0 backwards. */
    uint64_t t1 = t + 123456789u;
    uint64_t d = xe_ticks_delta_ns(t, t1), d2 = xe_ticks_to_ns(t1) - xe_ticks_to_ns(t);
    snprintf(name, sizeof name, "an interval converted at once: %llu ns, as two conversions apart: %llu",
             (unsigned long long)d, (unsigned long long)d2);
    CHECK(name, d + 1 >= d2 && d2 + 1 >= d);
    CHECK("an interval whose end is the earlier reading: 0", xe_ticks_delta_ns(t1, t) == 0);
    CHECK("an empty interval: 0", xe_ticks_delta_ns(t, t) == 0);

    /* The start-up rate: measured over 250 us, each end read to tens of
     * ns: better than 1e-3 (the bound leaves room for this test's own
     * readings on a loaded machine: ~10 us at each end of 50 ms). */
    uint64_t kn = 0, en = 0;
    double e = span_error(50, &kn, &en);
    snprintf(name, sizeof name,
             "start-up rate: 50 ms of the kernel's are %llu ns of the engine's (error %.2g)",
             (unsigned long long)en, e);
    CHECK(name, e < 1e-3);

    /* A session's dispatcher refines the rate after 20 ms, even with no
     * event to wake it (it would sleep a second otherwise). */
    xe_clock_conv before, after;
    xe_clock_conv_get(&before);
    xe_config c;
    xe_config_defaults(&c);
    strcpy(c.name, "clock");
    c.ntargets = 1;
    c.targets[0].ops = &noop;
    char why[256] = "";
    xe_session *s = NULL;
    if (xe_session_create(&c, &s, why, sizeof why) < 0) {
        printf("FAIL clock: create: %s\n", why);
        return 1;
    }
    xe_session_start(s);
    for (int i = 0; i < 50; i++) { /* its timer is 20 ms: 0.5 s leaves room for a loaded machine */
        sleep_ms(10);
        xe_clock_conv_get(&after);
        if (after.mult != before.mult)
            break;
    }
    CHECK("the dispatcher refined the rate by itself within 0.5 s (no event to wake it)",
          after.mult != before.mult);
    CHECK("the refinement keeps the anchor", after.ticks0 == before.ticks0 && after.ns0 == before.ns0);
    e = span_error(200, &kn, &en);
    snprintf(name, sizeof name,
             "refined rate: 200 ms of the kernel's are %llu ns of the engine's (error %.2g)",
             (unsigned long long)en, e);
    CHECK(name, e < 2e-4);
    xe_session_stop(s);
    xe_session_drop(s);
    return failures ? 1 : 0;
}
