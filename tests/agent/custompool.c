/* custompool.c — a program with its own pool allocator (a bump arena with
 * size-class free lists, never malloc) that reports its blocks through
 * memtrail_alloc.h: in category "pool" (tagged) and untagged ("custom"),
 * with frees and reallocs that stay in place or move. Keeps its own ledger
 * of both categories, which the report must match to the byte.
 * Usage: custompool LEDGER */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ledger.h"
#include "memtrail.h"
#include "memtrail_alloc.h"

#define ARENA (8u << 20)
#define CLASSES 64 /* size classes of 64 bytes */

static unsigned char arena[ARENA] __attribute__((aligned(64)));
static size_t top;
static void *free_list[CLASSES];

static unsigned class_of(size_t n)
{
    return (unsigned)((n + 63) / 64);
}

static void *pool_get(size_t n)
{
    unsigned c = class_of(n);
    void *b;
    if (c < CLASSES && free_list[c]) {
        b = free_list[c];
        memcpy(&free_list[c], b, sizeof(void *));
    } else {
        if (top + (size_t)c * 64 > ARENA)
            return NULL;
        b = arena + top;
        top += (size_t)c * 64;
    }
    MT_ALLOC(b, n);
    return b;
}

static void pool_put(void *b, size_t n)
{
    MT_FREE(b);
    unsigned c = class_of(n);
    if (c < CLASSES) {
        memcpy(b, &free_list[c], sizeof(void *));
        free_list[c] = b;
    }
}

/* In place when the size class holds it, else a move. */
static void *pool_resize(void *b, size_t from, size_t to)
{
    if (class_of(to) == class_of(from)) {
        MT_REALLOC(b, b, to);
        return b;
    }
    unsigned c = class_of(to);
    void *nb;
    if (c < CLASSES && free_list[c]) {
        nb = free_list[c];
        memcpy(&free_list[c], nb, sizeof(void *));
    } else {
        nb = arena + top;
        top += (size_t)c * 64;
    }
    memcpy(nb, b, from < to ? from : to);
    MT_REALLOC(b, nb, to);
    unsigned oc = class_of(from);
    memcpy(b, &free_list[oc], sizeof(void *));
    free_list[oc] = b;
    return nb;
}

static ledger pool, custom;
static void *blocks[2000];
static size_t sizes[2000];

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    mt_tag_push("pool");
    for (int i = 0; i < 2000; i++) {
        sizes[i] = 16 + (size_t)(i * 37) % 3000;
        blocks[i] = pool_get(sizes[i]);
        ledger_alloc(&pool, (int64_t)sizes[i]);
    }
    for (int i = 0; i < 2000; i += 2) {
        pool_put(blocks[i], sizes[i]);
        ledger_free(&pool, (int64_t)sizes[i]);
        blocks[i] = NULL;
    }
    for (int i = 1; i < 2000; i += 4) {
        size_t to = sizes[i] + (i % 8 == 1 ? 20 : 700);
        blocks[i] = pool_resize(blocks[i], sizes[i], to);
        ledger_resize(&pool, (int64_t)sizes[i], (int64_t)to);
        sizes[i] = to;
    }
    mt_tag_pop();
    void *untagged[50];
    for (int i = 0; i < 50; i++) {
        untagged[i] = pool_get(100);
        ledger_alloc(&custom, 100);
    }
    for (int i = 0; i < 10; i++) {
        pool_put(untagged[i], 100);
        ledger_free(&custom, 100);
    }
    ledger_write(argv[1], "pool", &pool, 0);
    ledger_write(argv[1], "custom", &custom, 1);
    return test_failures;
}
