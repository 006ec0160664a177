/* order_producers.h — the producers of the engine's order tests
 * (test_order.c, test_time_order.c) and the check of what comes out.
 *
 * A token passes between TOKENS threads: its holder fires an event
 * carrying the token's number (key 1), then hands the token on, so each
 * token event happens before the next. NOISE other threads fire their own
 * numbered events freely (key 2, site = the thread). Every 8th sealer
 * stalls 3 ms between sealing and queueing (xe_test_before_enqueue =
 * slow_sealer): producers give up waiting, detach its buffer and fill the
 * next, which then reaches the queue first. order_seen() takes the events
 * in the order the target passes them on and counts what is out of order.
 *
 * The including test defines TOKENS, NOISE, TOKEN_EVENTS, NOISE_EVENTS and
 * sets `sess`. */
#ifndef MT_TESTS_XE_ORDER_PRODUCERS_H
#define MT_TESTS_XE_ORDER_PRODUCERS_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "xe/xe.h"

static xe_session *sess;
static _Atomic unsigned seals;

static void slow_sealer(void)
{
    if (atomic_fetch_add(&seals, 1) % 8 == 7)
        usleep(3000);
}

static _Atomic uint64_t token = 1; /* the next token number; holder = (token - 1) % TOKENS */

static void *token_thread(void *arg)
{
    uint64_t me = (uint64_t)(uintptr_t)arg;
    for (;;) {
        uint64_t t = atomic_load(&token);
        if (t > TOKEN_EVENTS)
            return NULL;
        if ((t - 1) % TOKENS != me) {
            sched_yield();
            continue;
        }
        xe_event ev = {.type = XE_EV_USER, .key = 1, .value = t};
        xe_fire(sess, &ev);
        atomic_store(&token, t + 1);
    }
}

static void *noise_thread(void *arg)
{
    uint64_t me = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 1; i <= NOISE_EVENTS; i++) {
        xe_event ev = {.type = XE_EV_USER, .key = 2, .site = me, .value = i};
        xe_fire(sess, &ev);
    }
    return NULL;
}

/* What came out, in order: counts, and events out of their order. */
static uint64_t last_token_seen, token_out_of_order, token_count;
static uint64_t last_noise_seen[NOISE], noise_out_of_order, noise_count;

static void order_seen(uint64_t key, uint64_t site, uint64_t value)
{
    if (key == 1) {
        if (value != last_token_seen + 1)
            token_out_of_order++;
        last_token_seen = value;
        token_count++;
    } else {
        if (site < NOISE) {
            if (value != last_noise_seen[site] + 1)
                noise_out_of_order++;
            last_noise_seen[site] = value;
        }
        noise_count++;
    }
}

#endif
