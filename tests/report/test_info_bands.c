/* test_info_bands.c — unit tests of memtrail info's figures
 * (src/report/report_info.c): --percentiles parsing, the bands' split of
 * straddling buckets against counts worked out by hand, conservation (the
 * bands add up to the whole, for extreme counts too), and the merge of
 * several span names' histograms. */
#include "report/info.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

static bool near(double a, double b)
{
    double d = a - b;
    if (d < 0)
        d = -d;
    double m = (a < 0 ? -a : a) > (b < 0 ? -b : b) ? (a < 0 ? -a : a) : (b < 0 ? -b : b);
    return d <= 1e-9 * (m > 1 ? m : 1);
}

static void test_parse(void)
{
    struct info_options o;
    info_options_default(&o);
    CHECK("default: 50,90,99,99.9", o.npercentiles == 4 && o.percentiles[0] == 50000000 &&
                                        o.percentiles[3] == 99900000 && o.kind == -1);
    CHECK("parse: 6 decimals", info_parse_percentiles("0.000001,99.999999", &o) == 0 && o.npercentiles == 2 &&
                                   o.percentiles[0] == 1 && o.percentiles[1] == 99999999);
    CHECK("parse: one value",
          info_parse_percentiles("75", &o) == 0 && o.npercentiles == 1 && o.percentiles[0] == 75000000);
    static const char *const bad[] = {"",    "100", "0",   "50,50",      "90,50",
                                      "50,", ",50", "5a",  "99.9999999", "1.",
                                      ".5",  "-1",  "1e2", "50 ,90",     "100000000000000000000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char name[80];
        snprintf(name, sizeof name, "parse: '%s' refused", bad[i]);
        info_options_default(&o);
        CHECK(name, info_parse_percentiles(bad[i], &o) == -EINVAL && o.npercentiles == 4);
    }
    char many[400] = "";
    for (int i = 1; i <= INFO_MAX_PERCENTILES + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d", i > 1 ? "," : "", i);
    CHECK("parse: more than INFO_MAX_PERCENTILES refused", info_parse_percentiles(many, &o) == -EINVAL);
}

static struct report_span_bucket bucket(int64_t lo, int64_t hi, int64_t count, int64_t affected, int64_t dur,
                                        int64_t mem)
{
    return (struct report_span_bucket){
        .lo_ns = lo, .hi_ns = hi, .count = count, .affected = affected, .duration_ns = dur, .memory_ns = mem};
}

static void test_bands(void)
{
    /* 10 requests: 3 in [10, 11), 6 in [20, 21), 1 in [90, 91); percentiles
     * 50 and 95: edges at ranks 5 and 9.5. p0-p50: 3 + 2 of the 6;
     * p50-p95: 4 of the 6 and half of the last; p95-p100: the other half. */
    struct report_span_bucket b[] = {bucket(10, 11, 3, 0, 30, 3), bucket(20, 21, 6, 3, 120, 60),
                                     bucket(90, 91, 1, 1, 90, 45)};
    struct info_options o;
    info_options_default(&o);
    info_parse_percentiles("50,95", &o);
    struct info_figures total;
    struct info_band bands[3];
    info_bands(b, 3, &o, &total, bands);
    CHECK("bands: total",
          near(total.requests, 10) && near(total.affected, 4) && near(total.duration_ns, 240));
    CHECK("bands: p0-p50 = 3 + 2/6 of the second",
          near(bands[0].f.requests, 5) && near(bands[0].f.affected, 1) &&
              near(bands[0].f.duration_ns, 30 + 40) && bands[0].f.latency_min_ns == 10 &&
              bands[0].f.latency_max_ns == 21);
    CHECK("bands: p50-p95 = 4/6 of the second + half the last",
          near(bands[1].f.requests, 4.5) && near(bands[1].f.affected, 2.5) &&
              near(bands[1].f.affected_memory_ns, 40 * 0.5 + 22.5) && bands[1].f.latency_min_ns == 20 &&
              bands[1].f.latency_max_ns == 91);
    CHECK("bands: p95-p100 = half the last", near(bands[2].f.requests, 0.5) &&
                                                 near(bands[2].f.affected, 0.5) &&
                                                 bands[2].f.latency_min_ns == 90);
    CHECK("bands: from/to", bands[0].from == 0 && bands[1].from == 50000000 && bands[2].to == INFO_PCT_100);

    /* No buckets: empty bands, latency unknown. */
    info_bands(NULL, 0, &o, &total, bands);
    CHECK("bands: none", total.requests == 0 && bands[0].f.latency_min_ns == -1 && bands[2].f.requests == 0);

    /* Counts near 2^63 in several buckets: nothing overflows, nothing lost. */
    struct report_span_bucket big[] = {bucket(1, 2, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX),
                                       bucket(2, 3, INT64_MAX, 0, 0, 0), bucket(3, 4, 1, 1, 1, 1)};
    info_options_default(&o);
    struct info_band b5[5];
    info_bands(big, 3, &o, &total, b5);
    double sum = 0;
    for (int i = 0; i < 5; i++)
        sum += b5[i].f.requests;
    CHECK("bands: extreme counts add up", near(sum, total.requests) && total.requests > 1.8e19);
    CHECK("bands: extreme counts: the last request lands in p99.9-p100", b5[4].f.latency_max_ns == 4);
}

static void test_merge(void)
{
    struct report_span_bucket a[] = {bucket(10, 11, 2, 1, 20, 2), bucket(50, 51, 1, 0, 50, 0)};
    struct report_span_bucket c[] = {bucket(10, 11, 3, 0, 30, 3), bucket(30, 31, 1, 1, 30, 9)};
    struct report_span spans[] = {{.id = 1, .name = "a", .buckets = a, .nbuckets = 2},
                                  {.id = 2, .name = "empty"},
                                  {.id = 3, .name = "c", .buckets = c, .nbuckets = 2}};
    struct report r = {.spans = spans, .nspans = 3};
    struct report_span_bucket *all;
    size_t n;
    CHECK("merge: ok", info_merge_spans(&r, &all, &n) == 0);
    CHECK("merge: same bounds added, ascending", n == 3 && all[0].lo_ns == 10 && all[0].count == 5 &&
                                                     all[0].affected == 1 && all[0].duration_ns == 50 &&
                                                     all[1].lo_ns == 30 && all[2].lo_ns == 50);
    free(all);
}

int main(void)
{
    test_parse();
    test_bands();
    test_merge();
    return failures ? 1 : 0;
}
