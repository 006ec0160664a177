/* realloc_solo.c — realloc's common path, counted exactly while the
 * program has no category of its own (the agent's inline quick count is
 * then taken), with the contents kept: a fixed mix of reallocs that grow,
 * shrink, move and stay, to sizes on both sides of the tombstone's offset
 * (24 bytes), below 6 bytes (the larger overhead), and across the mmap
 * threshold, between two reports asked for with mt_report_write. Nothing
 * else allocates between them (no stdio), so the malloc category's change
 * from the first report to the second is this ledger's.
 * Usage: realloc_solo LEDGER REPORT_BEFORE REPORT_AFTER */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "memtrail.h"

#define SLOTS 64
#define ROUNDS 40000

static size_t pick(uint64_t r)
{
    switch (r % 8) {
    case 0: return r >> 8 & 7;                 /* 0..7: below and at the small-block bound */
    case 1: return 16 + (r >> 8) % 16;         /* 16..31: around the tombstone's offset */
    case 2: return 200000 + (r >> 8) % 100000; /* above the mmap threshold */
    case 3: return 20000 + (r >> 8) % 90000;   /* large, below it */
    default: return 1 + (r >> 8) % 2000;
    }
}

static unsigned char fillbyte(int slot, uint32_t gen)
{
    return (unsigned char)(slot * 37 + gen * 11 + 1);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        dprintf(2, "usage: realloc_solo LEDGER REPORT_BEFORE REPORT_AFTER\n");
        return 2;
    }
    static unsigned char *p[SLOTS];
    static size_t n[SLOTS];
    static uint32_t gen[SLOTS];
    ledger L = {0};
    EXPECT(mt_report_write(argv[2]) == 0, "mt_report_write(%s) failed", argv[2]);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < ROUNDS; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int k = (int)(s >> 40) % SLOTS;
        size_t to = pick(s);
        if (!p[k]) {
            p[k] = malloc(to);
            EXPECT(p[k] != NULL, "malloc(%zu) failed", to);
            ledger_alloc(&L, (int64_t)to);
        } else if (to == 0) {
            /* glibc's realloc(p, 0) frees */
            EXPECT(realloc(p[k], 0) == NULL, "realloc(p, 0) did not return NULL");
            ledger_free(&L, (int64_t)n[k]);
            p[k] = NULL;
            continue;
        } else {
            unsigned char *q = realloc(p[k], to);
            EXPECT(q != NULL, "realloc(%zu -> %zu) failed", n[k], to);
            size_t keep = n[k] < to ? n[k] : to, bad = 0;
            for (size_t j = 0; j < keep; j++)
                bad += q[j] != fillbyte(k, gen[k]);
            EXPECT(bad == 0, "realloc(%zu -> %zu) changed %zu of the %zu bytes it keeps", n[k], to, bad,
                   keep);
            ledger_resize(&L, (int64_t)n[k], (int64_t)to);
            p[k] = q;
        }
        n[k] = to;
        gen[k]++;
        memset(p[k], fillbyte(k, gen[k]), to);
    }
    EXPECT(mt_report_write(argv[3]) == 0, "mt_report_write(%s) failed", argv[3]);
    ledger_write(argv[1], "delta", &L, 0);
    for (int k = 0; k < SLOTS; k++)
        free(p[k]);
    dprintf(1, "%s realloc_solo: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures != 0;
}
