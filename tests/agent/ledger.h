/* ledger.h — the tests' independent truth: a program keeps its own books
 * of what it allocated (plain arithmetic, no agent involved) and writes
 * them out so the test script can compare them with memtrail's report. */
#ifndef MT_TEST_LEDGER_H
#define MT_TEST_LEDGER_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct ledger {
    int64_t live, count, peak, allocs, frees, reallocs;
} ledger;

static inline void ledger_alloc(ledger *l, int64_t n)
{
    l->live += n;
    l->count++;
    l->allocs++;
    if (l->live > l->peak)
        l->peak = l->live;
}
static inline void ledger_free(ledger *l, int64_t n)
{
    l->live -= n;
    l->count--;
    l->frees++;
}
static inline void ledger_resize(ledger *l, int64_t from, int64_t to)
{
    l->live += to - from;
    l->reallocs++;
    if (l->live > l->peak)
        l->peak = l->live;
}

/* One line per category: "NAME live count peak allocs frees reallocs". */
static inline void ledger_write(const char *path, const char *name, const ledger *l, int append)
{
    FILE *f = fopen(path, append ? "a" : "w");
    if (!f) {
        perror(path);
        _exit(99);
    }
    fprintf(f, "%s %lld %lld %lld %lld %lld %lld\n", name, (long long)l->live, (long long)l->count,
            (long long)l->peak, (long long)l->allocs, (long long)l->frees, (long long)l->reallocs);
    fclose(f);
}

static int test_failures;
#define EXPECT(cond, ...)                                                                                    \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            char msg_[256];                                                                                  \
            snprintf(msg_, sizeof msg_, __VA_ARGS__);                                                        \
            dprintf(1, "FAIL %s:%d: %s\n", __FILE__, __LINE__, msg_);                                        \
            test_failures++;                                                                                 \
        }                                                                                                    \
    } while (0)

#endif
