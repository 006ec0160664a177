/* test_report_read_info.c — unit tests of the .mtr reader's memory info
 * and request-span lines (src/report/report_read_info.c): every field of
 * docs/report-format.md's example, a file cut in the middle of the spans,
 * and each corrupt value getting an error that names its line. */
#include "report/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/fixture.h"

#define HEAD "memtrail-report 1\n"
#define TOP                                                                                                  \
    HEAD "pid 4242\nmode summary\n"                                                                          \
         "total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\n"                                   \
         "errors double_free=0 bad_canary=0 foreign_free=0\n"
/* line 6 */
#define MEMTIME "memory_time run_time_ns=5012345678 alloc_time_ns=1200345 map_time_ns=845000\n"
#define INFO_REST                                                                                            \
    " time_ns=1763868001100000000 run_time_ns=4900000000 live_before_bytes=9000000 "                         \
    "live_after_bytes=8000000 fragmentation_before_bytes=120000 fragmentation_after_bytes=90000 "            \
    "rss_bytes=15000000 committed_bytes=30000000 memory_load_bytes=2000000000 "                              \
    "total_available_bytes=25000000000 alloc_time_ns=1100000 map_time_ns=800000 minor_faults=5000 "          \
    "major_faults=7 overhead_bytes=70000 event_ns=12000"
#define ZERO_REST                                                                                            \
    " time_ns=0 run_time_ns=0 live_before_bytes=0 live_after_bytes=0 fragmentation_before_bytes=0 "          \
    "fragmentation_after_bytes=0 rss_bytes=0 committed_bytes=0 memory_load_bytes=0 total_available_bytes=0 " \
    "alloc_time_ns=0 map_time_ns=0 minor_faults=0 major_faults=0 overhead_bytes=0 event_ns=0"
/* lines 7-12 (6-11 without MEMTIME) */
#define INFOS                                                                                                \
    "info kind=any count=14 event=trim index=14" INFO_REST                                                   \
    " categories=malloc:7000000,parser:1000000,a:b:-5\n"                                                     \
    "info kind=peak count=5 event=peak index=5" INFO_REST " future=1 categories=malloc:9000000\n"            \
    "info kind=grow count=6 event=grow index=6" INFO_REST " categories=malloc:1\n"                           \
    "info kind=trim count=3 event=trim index=3" INFO_REST " categories=malloc:2\n"                           \
    "info kind=limit count=0 event=none index=0" ZERO_REST " categories=\n"                                  \
    "info kind=periodic count=0 event=none index=0" ZERO_REST " categories=\n"
/* lines 13-19 */
#define SPANS1                                                                                               \
    "span_name id=1 count=832 name=GET\\s/index\\\\x\n"                                                      \
    "span id=1 lo_ns=41000 hi_ns=42000 count=812 affected=0 multiple=0 events=0 duration_ns=33612000 "       \
    "memory_ns=402000 faults=0\n"                                                                            \
    "span id=1 lo_ns=5100000 hi_ns=5200000 count=20 affected=20 multiple=3 events=23 duration_ns=103000000 " \
    "memory_ns=100100000 faults=9 new=1\n"                                                                   \
    "span_memory id=1 lo_ns=9000 hi_ns=10000 count=812\n"                                                    \
    "span_memory id=1 lo_ns=5000000 hi_ns=5100000 count=20\n"                                                \
    "span_name id=7 count=1 name=db query\n"                                                                 \
    "span id=7 lo_ns=3 hi_ns=4 count=1 affected=1 multiple=1 events=2 duration_ns=3 memory_ns=1 faults=0\n"
#define SPANS_END "spans names=2 unmatched_ends=4 dropped=5 faults_counted=1\n"

static void test_good(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("good.mtr", TOP MEMTIME INFOS SPANS1 SPANS_END "end\n", &r, err);
    CHECK("info good: reads", rc == 0 && r.complete);
    if (rc)
        printf("    %s\n", err);
    CHECK("info good: has bits",
          (r.has & REPORT_HAS_INFO) && (r.has & REPORT_HAS_SPANS) && (r.has & REPORT_HAS_MEMORY_TIME));
    CHECK("info good: memory_time", r.memory_time.run_time_ns == 5012345678LL &&
                                        r.memory_time.alloc_time_ns == 1200345 &&
                                        r.memory_time.map_time_ns == 845000);
    CHECK("info good: six info lines", r.ninfos == 6);
    if (r.ninfos == 6) {
        const struct report_info *a = &r.infos[0];
        CHECK("info good: any kind/event", strcmp(a->kind, "any") == 0 && strcmp(a->event, "trim") == 0 &&
                                               a->count == 14 && a->index == 14);
        CHECK("info good: any numbers",
              a->time_ns == 1763868001100000000LL && a->run_time_ns == 4900000000LL &&
                  a->live_before_bytes == 9000000 && a->live_after_bytes == 8000000 &&
                  a->fragmentation_before_bytes == 120000 && a->fragmentation_after_bytes == 90000 &&
                  a->rss_bytes == 15000000 && a->committed_bytes == 30000000 &&
                  a->memory_load_bytes == 2000000000LL && a->total_available_bytes == 25000000000LL &&
                  a->alloc_time_ns == 1100000 && a->map_time_ns == 800000 && a->minor_faults == 5000 &&
                  a->major_faults == 7 && a->overhead_bytes == 70000 && a->event_ns == 12000);
        CHECK("info good: categories (last colon splits)",
              a->ncategories == 3 && strcmp(a->categories[0].name, "malloc") == 0 &&
                  a->categories[0].live_bytes == 7000000 && strcmp(a->categories[1].name, "parser") == 0 &&
                  a->categories[1].live_bytes == 1000000 && strcmp(a->categories[2].name, "a:b") == 0 &&
                  a->categories[2].live_bytes == -5);
        CHECK("info good: peak (unknown field ignored)",
              strcmp(r.infos[1].kind, "peak") == 0 && r.infos[1].count == 5 && r.infos[1].ncategories == 1 &&
                  r.infos[1].categories[0].live_bytes == 9000000);
        CHECK("info good: limit none, empty categories",
              strcmp(r.infos[4].kind, "limit") == 0 && strcmp(r.infos[4].event, "none") == 0 &&
                  r.infos[4].count == 0 && r.infos[4].ncategories == 0 && r.infos[4].time_ns == 0);
        CHECK("info good: periodic last", strcmp(r.infos[5].kind, "periodic") == 0);
    }
    CHECK("info good: two spans", r.nspans == 2);
    if (r.nspans == 2) {
        const struct report_span *s = &r.spans[0];
        CHECK("info good: span name unescaped",
              s->id == 1 && strcmp(s->name, "GET /index\\x") == 0 && s->count == 832);
        CHECK("info good: span buckets", s->nbuckets == 2 && s->buckets[0].lo_ns == 41000 &&
                                             s->buckets[0].hi_ns == 42000 && s->buckets[0].count == 812 &&
                                             s->buckets[0].duration_ns == 33612000 &&
                                             s->buckets[0].memory_ns == 402000);
        if (s->nbuckets == 2)
            CHECK("info good: second bucket",
                  s->buckets[1].affected == 20 && s->buckets[1].multiple == 3 && s->buckets[1].events == 23 &&
                      s->buckets[1].memory_ns == 100100000 && s->buckets[1].faults == 9);
        CHECK("info good: memory buckets", s->nmemory == 2 && s->memory[0].lo_ns == 9000 &&
                                               s->memory[0].count == 812 && s->memory[1].hi_ns == 5100000);
        CHECK("info good: second span", r.spans[1].id == 7 && strcmp(r.spans[1].name, "db query") == 0 &&
                                            r.spans[1].nbuckets == 1 && r.spans[1].nmemory == 0);
    }
    CHECK("info good: spans line", r.spans_unmatched_ends == 4 && r.spans_dropped == 5 && r.span_faults);
    report_free(&r);

    /* An older agent's report: none of these lines, nothing set. */
    rc = read_text("old.mtr", TOP "end\n", &r, err);
    CHECK("info old report: reads without info",
          rc == 0 && !(r.has & (REPORT_HAS_INFO | REPORT_HAS_SPANS)) && r.ninfos == 0 && r.nspans == 0);
    report_free(&r);
    /* A program that never opened a span. */
    rc = read_text("nospans.mtr",
                   TOP MEMTIME INFOS "spans names=0 unmatched_ends=0 dropped=0 faults_counted=0\n"
                                     "end\n",
                   &r, err);
    CHECK("info no spans: reads", rc == 0 && (r.has & REPORT_HAS_SPANS) && r.nspans == 0 && !r.span_faults);
    report_free(&r);
}

static void test_truncated(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    /* Cut in the middle of the second span line (line 15): lines 1-14 kept. */
    const char *full = TOP MEMTIME INFOS SPANS1 SPANS_END "end\n";
    const char *cut = strstr(full, "span id=1 lo_ns=5100000") + 30;
    char *path = fixture("cut.mtr", full, (size_t)(cut - full));
    int rc = report_read(path, &r, err, sizeof err);
    CHECK("info truncated: -ENODATA naming the line",
          rc == -ENODATA && strstr(err, "truncated after line 14"));
    CHECK("info truncated: what came before is kept",
          r.ninfos == 6 && r.nspans == 1 && r.spans[0].nbuckets == 1 && !(r.has & REPORT_HAS_SPANS));
    report_free(&r);
    unlink(path);
    free(path);
    /* Cut before the spans line: spans read, section not closed. */
    rc = read_text("cut2.mtr", TOP MEMTIME INFOS SPANS1, &r, err);
    CHECK("info truncated before spans line", rc == -ENODATA && r.nspans == 2 && !(r.has & REPORT_HAS_SPANS));
    report_free(&r);
}

static void test_errors(void)
{
    const char *p = "info error: ";
    expect_read_error(p, "bad memory_time number",
                      TOP "memory_time run_time_ns=5x alloc_time_ns=1 map_time_ns=1\n"
                          "end\n",
                      -EBADMSG, "line 6: bad value '5x' for run_time_ns");
    expect_read_error(p, "memory_time lacks field", TOP "memory_time run_time_ns=5 alloc_time_ns=1\nend\n",
                      -EBADMSG, "line 6: memory_time line lacks field map_time_ns");
    expect_read_error(p, "duplicate memory_time", TOP MEMTIME MEMTIME "end\n", -EBADMSG,
                      "line 7: duplicate memory_time line");
    expect_read_error(p, "info number overflow",
                      TOP "info kind=any count=99999999999999999999 event=none index=0" ZERO_REST
                          " categories=\n"
                          "end\n",
                      -ERANGE, "line 6: value '99999999999999999999' for count does not fit");
    expect_read_error(p, "info lacks categories",
                      TOP "info kind=any count=0 event=none index=0" ZERO_REST "\nend\n", -EBADMSG,
                      "line 6: info line lacks field categories");
    expect_read_error(p, "info lacks event",
                      TOP "info kind=any count=0 index=0" ZERO_REST " categories=\nend\n", -EBADMSG,
                      "line 6: info line lacks field event");
    expect_read_error(p, "info lacks kind",
                      TOP "info count=0 event=none index=0" ZERO_REST " categories=\nend\n", -EBADMSG,
                      "line 6: info line lacks field kind");
    expect_read_error(p, "info lacks a number",
                      TOP "info kind=any count=0 event=none index=0 time_ns=0 categories=\nend\n", -EBADMSG,
                      "line 6: info line lacks field run_time_ns");
    expect_read_error(
        p, "upper-case kind", TOP "info kind=Any count=0 event=none index=0" ZERO_REST " categories=\nend\n",
        -EBADMSG, "line 6: bad kind or event in info line (expected lower-case words: 'Any', 'none')");
    expect_read_error(p, "duplicate info kind",
                      TOP INFOS "info kind=peak count=0 event=none index=0" ZERO_REST " categories=\nend\n",
                      -EBADMSG, "line 12: duplicate info line for kind peak");
    expect_read_error(p, "negative count",
                      TOP "info kind=any count=-1 event=none index=0" ZERO_REST " categories=\nend\n",
                      -EBADMSG, "line 6: negative count or index");
    expect_read_error(p, "category pair without number",
                      TOP "info kind=any count=1 event=peak index=1" ZERO_REST " categories=malloc\nend\n",
                      -EBADMSG, "line 6: bad pair 'malloc' in categories=");
    expect_read_error(p, "category bad number",
                      TOP "info kind=any count=1 event=peak index=1" ZERO_REST " categories=malloc:1x\nend\n",
                      -EBADMSG, "line 6: bad value '1x' for category malloc in categories=");
    expect_read_error(p, "category bad name",
                      TOP "info kind=any count=1 event=peak index=1" ZERO_REST " categories=a b:1\nend\n",
                      -EBADMSG, "line 6: bad category name 'a b'");
    expect_read_error(p, "category trailing comma",
                      TOP "info kind=any count=1 event=peak index=1" ZERO_REST " categories=a:1,\nend\n",
                      -EBADMSG, "line 6: bad pair '' in categories=");
    expect_read_error(p, "span before its name",
                      TOP "span id=1 lo_ns=1 hi_ns=2 count=1 affected=0 multiple=0 events=0 duration_ns=1 "
                          "memory_ns=0 faults=0\nend\n",
                      -EBADMSG, "line 6: span line for id 1 without a span_name line before it");
    expect_read_error(p, "duplicate span_name",
                      TOP "span_name id=1 count=0 name=a\nspan_name id=1 count=0 name=b\n", -EBADMSG,
                      "line 7: duplicate span_name line for id 1");
    expect_read_error(p, "span_name lacks name", TOP "span_name id=1 count=0\n", -EBADMSG,
                      "line 6: span_name line lacks field name");
    expect_read_error(p, "span_name empty name", TOP "span_name id=1 count=0 name=\n", -EBADMSG,
                      "line 6: empty name in span_name line");
    expect_read_error(p, "span_name bad escape", TOP "span_name id=1 count=0 name=a\\q\n", -EBADMSG,
                      "line 6: bad escape '\\q' in span name");
    expect_read_error(p, "span_name negative id", TOP "span_name id=-1 count=0 name=a\n", -EBADMSG,
                      "line 6: negative id or count");
#define NAME1 "span_name id=1 count=3 name=a\n"
#define B(lo, hi, c, a, m, e)                                                                                \
    "span id=1 lo_ns=" #lo " hi_ns=" #hi " count=" #c " affected=" #a " multiple=" #m " events=" #e          \
    " duration_ns=10 memory_ns=1 faults=0\n"
    expect_read_error(p, "bucket bounds reversed", TOP NAME1 B(5, 5, 1, 0, 0, 0), -EBADMSG,
                      "line 7: span line for id 1: bad bounds lo_ns=5 hi_ns=5");
    expect_read_error(p, "bucket empty", TOP NAME1 B(5, 6, 0, 0, 0, 0), -EBADMSG,
                      "line 7: span line for id 1: count=0");
    expect_read_error(p, "bucket affected above count", TOP NAME1 B(5, 6, 1, 2, 0, 2), -EBADMSG,
                      "line 7: span line for id 1: expected 0 <= multiple <= affected <= count");
    expect_read_error(p, "bucket multiple above affected", TOP NAME1 B(5, 6, 2, 1, 2, 5), -EBADMSG,
                      "line 7: span line for id 1: expected 0 <= multiple");
    expect_read_error(p, "bucket too few events", TOP NAME1 B(5, 6, 2, 2, 1, 2), -EBADMSG,
                      "line 7: span line for id 1: bad events");
    expect_read_error(p, "buckets out of order", TOP NAME1 B(5, 7, 1, 0, 0, 0) B(6, 8, 1, 0, 0, 0), -EBADMSG,
                      "line 8: span line for id 1: bucket [6, 8) is not after the one before it");
    expect_read_error(p, "bucket bad number", TOP NAME1 B(5, 6, 1, 0, 0, 0x1), -EBADMSG,
                      "line 7: bad value '0x1' for events");
    expect_read_error(p, "bucket lacks field",
                      TOP NAME1
                      "span id=1 lo_ns=1 hi_ns=2 count=1 affected=0 multiple=0 events=0 duration_ns=1 "
                      "faults=0\n",
                      -EBADMSG, "line 7: span line lacks field memory_ns");
    expect_read_error(p, "memory bucket out of order",
                      TOP NAME1 "span_memory id=1 lo_ns=9 hi_ns=10 count=1\nspan_memory id=1 lo_ns=3 hi_ns=4 "
                                "count=1\n",
                      -EBADMSG, "line 8: span_memory line for id 1: bucket [3, 4) is not after");
    expect_read_error(p, "spans names mismatch",
                      TOP NAME1 "spans names=2 unmatched_ends=0 dropped=0 "
                                "faults_counted=0\nend\n",
                      -EBADMSG, "line 7: spans line says names=2 but 1 span_name lines came before it");
    expect_read_error(p, "spans bad faults_counted",
                      TOP "spans names=0 unmatched_ends=0 dropped=0 "
                          "faults_counted=2\nend\n",
                      -EBADMSG, "line 6: bad value 2 for faults_counted");
    expect_read_error(p, "duplicate spans line",
                      TOP "spans names=0 unmatched_ends=0 dropped=0 faults_counted=0\n"
                          "spans names=0 unmatched_ends=0 dropped=0 faults_counted=0\n",
                      -EBADMSG, "line 7: duplicate spans line");
    expect_read_error(p, "span after spans line",
                      TOP NAME1
                      "spans names=1 unmatched_ends=0 dropped=0 faults_counted=0\n" B(5, 6, 1, 0, 0, 0),
                      -EBADMSG, "line 8: span line after the spans line");
    expect_read_error(p, "span names without spans line", TOP NAME1 "end\n", -EBADMSG,
                      "no spans line after the span_name lines");
}

int main(void)
{
    fixture_dir();
    test_good();
    test_truncated();
    test_errors();
    rmdir(dir);
    return failures ? 1 : 0;
}
