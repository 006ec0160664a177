/* test_order.c — a NONE-mode session delivers events in the order they
 * were fired, whichever producer sealed or queued its buffer first.
 *
 * A token passes between threads: its holder fires an event carrying the
 * token's number, then hands the token on, so each token event happens
 * before the next. Meanwhile other producers fire freely, filling small
 * buffers so that seals race (and, on two CPUs, sealers get preempted
 * between sealing and queueing; a test hook makes some sealers that slow
 * on purpose). The target checks that token numbers
 * arrive in increasing order and each free producer's own sequence too;
 * every event arrives exactly once under NO_EVENT_LOSS. Runs under alarm(). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "xe/xe.h"
#include "xe/xe_internal.h"

#define TOKENS 2
#define NOISE 2
#define TOKEN_EVENTS 20000u
#define NOISE_EVENTS 150000u

#include "order_producers.h"

static int rec_init(xe_target *t, const char *p, char *w, size_t wl)
{
    (void)t, (void)p, (void)w, (void)wl;
    return 0;
}
static void rec_deliver(xe_target *t, const xe_event *ev)
{
    (void)t;
    order_seen(ev->key, ev->site, ev->value);
}
static const xe_target_ops recorder = {.name = "recorder", .init = rec_init, .deliver = rec_deliver};

int main(void)
{
    alarm(120);
    xe_config c;
    xe_config_defaults(&c);
    strcpy(c.name, "order");
    c.max_memory = 3 * 65536; /* 3 buffers of 64 KB - 205: ~800 events each */
    c.mode = XE_PART_NONE;
    c.retention = XE_NO_EVENT_LOSS;
    c.max_dispatch_latency_ns = 1000000; /* and partly filled ones sealed by the dispatcher */
    c.ntargets = 1;
    c.targets[0].ops = &recorder;
    char why[256] = "";
    if (xe_session_create(&c, &sess, why, sizeof why) < 0) {
        printf("FAIL create: %s\n", why);
        return 1;
    }
    xe_test_before_enqueue = slow_sealer;
    xe_session_start(sess);
    pthread_t th[TOKENS + NOISE];
    for (unsigned i = 0; i < TOKENS; i++)
        pthread_create(&th[i], NULL, token_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < NOISE; i++)
        pthread_create(&th[TOKENS + i], NULL, noise_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < TOKENS + NOISE; i++)
        pthread_join(th[i], NULL);
    xe_session_stop(sess);
    xe_session_info info;
    xe_session_info_get(sess, &info);
    CHECK("order: every token event delivered", token_count == TOKEN_EVENTS);
    CHECK("order: every other event delivered", noise_count == (uint64_t)NOISE * NOISE_EVENTS);
    CHECK("order: token events in firing order", token_out_of_order == 0);
    CHECK("order: each producer's events in its order", noise_out_of_order == 0);
    CHECK("order: buffers went round many times", info.events_delivered > 100 * 800);
    printf("# token out of order %lu, noise out of order %lu\n", (unsigned long)token_out_of_order,
           (unsigned long)noise_out_of_order);
    xe_session_drop(sess);
    return failures != 0;
}
