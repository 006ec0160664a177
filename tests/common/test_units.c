/* test_units.c — src/common/units.c: sizes and durations against values
 * worked out by hand (the rules in units.h), and against the exact value
 * for a sweep of sizes: what is printed, read back, is within 0.5% of the
 * truth and never 0 for a nonzero size. */
#include "common/units.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KB 1024LL
#define MB (1024LL * 1024)
#define GB (1024LL * 1024 * 1024)

static int same(const char *got, const char *want)
{
    if (strcmp(got, want) == 0)
        return 1;
    printf("  got '%s', want '%s'\n", got, want);
    return 0;
}

static const char *in(int64_t bytes, int64_t unit, const char *label)
{
    static char buf[4][MT_UNITS_MAX];
    static int k;
    return mt_size_in(buf[k++ % 4], sizeof buf[0], bytes, (uint64_t)unit, label);
}

static const char *sz(int64_t bytes)
{
    static char buf[4][MT_UNITS_MAX];
    static int k;
    return mt_size(buf[k++ % 4], sizeof buf[0], bytes);
}

static const char *dur(uint64_t ns)
{
    static char buf[4][MT_UNITS_MAX];
    static int k;
    return mt_duration(buf[k++ % 4], sizeof buf[0], ns);
}

static void fixed_units(void)
{
    CHECK("exact whole units as integers", same(in(4792 * KB, KB, "KB"), "4792KB") &&
                                               same(in(0, MB, "MB"), "0MB") &&
                                               same(in(3 * MB, MB, "MB"), "3MB"));
    /* 1000 / 1024 = 0.9765625 */
    CHECK("1000 B in KB: 0.977KB", same(in(1000, KB, "KB"), "0.977KB"));
    /* 900 KiB = 0.87890625 MiB */
    CHECK("900 KiB in MB: 0.879MB", same(in(900 * KB, MB, "MB"), "0.879MB"));
    /* 900 KiB = 0.000858... GiB */
    CHECK("900 KiB in GB: 0.000858GB", same(in(900 * KB, GB, "GB"), "0.000858GB"));
    /* 3 MiB + 5 B = 3072.0048828125 KiB */
    CHECK("3 MiB + 5 B in KB: integer part whole", same(in(3 * MB + 5, KB, "KB"), "3072KB"));
    CHECK("3 MiB + 5 B in MB: three digits", same(in(3 * MB + 5, MB, "MB"), "3.00MB"));
    CHECK("1 B in GB is not 0", same(in(1, GB, "GB"), "0.000000000931GB"));
    CHECK("1.5 MiB in MB", same(in(3 * MB / 2, MB, "MB"), "1.50MB"));
    /* 150.5 KiB rounds to 151 (three significant digits; half up) */
    CHECK("150.5 KiB in KB rounds half up", same(in(150 * KB + 512, KB, "KB"), "151KB"));
    /* 9.9951171875 KiB: 9.995.. rounds to 10.0, not 10.00 */
    CHECK("carry into a new digit keeps three digits", same(in(10235, KB, "KB"), "10.0KB"));
    /* 1023.5 B in KB = 0.99951171875: 1.00, not 1.000 */
    CHECK("carry below 1", same(in(1023, KB, "KB"), "0.999KB") && same(in(1024 - 0, KB, "KB"), "1KB"));
    CHECK("negative", same(in(-1000, KB, "KB"), "-0.977KB") && same(in(-2 * MB, MB, "MB"), "-2MB"));
    CHECK("INT64_MIN and INT64_MAX",
          same(in(INT64_MIN, GB, "GB"), "-8589934592GB") && same(in(INT64_MAX, GB, "GB"), "8589934592GB"));
}

static void auto_units(void)
{
    CHECK("below 1 KiB: exact bytes",
          same(sz(0), "0B") && same(sz(1000), "1000B") && same(sz(1023), "1023B"));
    CHECK("KB, MB, GB, EB", same(sz(1024), "1KB") && same(sz(900 * KB), "900KB") &&
                                same(sz(3 * MB + 5), "3.00MB") && same(sz(5 * GB / 4), "1.25GB") &&
                                same(sz(INT64_MAX), "8.00EB"));
    /* 1023.5 KiB and more rounds to 1024: the next unit, not "1024KB" */
    CHECK("a carry into the next unit", same(sz(1048064), "1.00MB") && same(sz(1048575), "1.00MB") &&
                                            same(sz(1073741823), "1.00GB") && same(sz(1048063), "1023KB"));
    char buf[MT_UNITS_MAX];
    CHECK("u64 max", same(mt_size_u64(buf, sizeof buf, UINT64_MAX), "16.0EB"));
    CHECK("cut to fit a small buffer", same(mt_size(buf, 4, 123456), "121") && same(mt_size(buf, 1, 5), ""));
}

/* Every size from 1 B up (a geometric sweep), in each unit: read back
 * (strtod) within 0.5% of the exact value, and nonzero. */
static void sweep(void)
{
    static const struct {
        int64_t unit;
        const char *label;
    } units[] = {{KB, "KB"}, {MB, "MB"}, {GB, "GB"}};
    int bad = 0, n = 0;
    for (double x = 1; x < 1e15; x *= 1.37) {
        int64_t b = (int64_t)x + n % 7;
        for (size_t u = 0; u < 3; u++, n++) {
            const char *s = in(b, units[u].unit, units[u].label);
            double v = strtod(s, NULL), exact = (double)b / (double)units[u].unit;
            if (v <= 0 || v < exact * 0.995 || v > exact * 1.005 ||
                strcmp(s + strlen(s) - 2, units[u].label)) {
                if (bad++ < 5)
                    printf("  %lld B in %s: '%s'\n", (long long)b, units[u].label, s);
            }
        }
    }
    printf("  %d sizes checked\n", n);
    CHECK("sweep: within 0.5%, never 0", bad == 0);
}

static void durations(void)
{
    CHECK("ns", same(dur(0), "0ns") && same(dur(850), "850ns"));
    CHECK("us", same(dur(1000), "1.000us") && same(dur(12345), "12.345us"));
    CHECK("ms", same(dur(39290000), "39.290ms") && same(dur(57830456), "57.830ms"));
    CHECK("s", same(dur(1250000000), "1.250s") && same(dur(3600000000000ULL), "3600.000s"));
    CHECK("rounding up into the next unit", same(dur(999999600), "1.000s") && same(dur(999999), "999.999us"));
}

int main(void)
{
    fixed_units();
    auto_units();
    sweep();
    durations();
    return failures != 0;
}
