/* test_metrics.c — unit tests of the Prometheus exposition of reports
 * (src/report/report_metrics.c): the histograms' cumulative buckets, sums
 * and counts worked out by hand from docs/report-format.md's span lines,
 * the event counters, the seconds written exactly, label values escaped,
 * two processes in one page (each family once), and, when promtool is
 * installed, its verdict on the page. */
#include "report/metrics.h"
#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

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

static const char report_a[] =
    "memtrail-report 1\n"
    "pid 4242\n"
    "exe /usr/bin/my\\ \"prog\n"
    "mode summary\n"
    "start_ns 1763868000123456789\n"
    "category malloc kind=malloc live_bytes=1048 live_count=3 peak_bytes=90000 allocs=19 frees=16 reallocs=4 "
    "reserved=0 committed=0 resident=0 mappings=0\n"
    "category heap kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 "
    "reserved=69337088 committed=5406720 resident=5271552 mappings=3\n"
    "total live_bytes=1048 live_count=3 peak_bytes=90000 allocs=19 frees=16 reallocs=4\n"
    "process rss_bytes=9035776 peak_rss_bytes=52428800 reserved=85811200 committed=21842944 "
    "resident=9035776\n"
    "errors double_free=1 bad_canary=0 foreign_free=2\n"
    "memory_time run_time_ns=5012345678 alloc_time_ns=1200345 map_time_ns=845000\n"
    "info kind=any count=14 event=trim index=14" INFO_REST " categories=malloc:7000000\n"
    "info kind=peak count=5 event=peak index=5" INFO_REST " categories=malloc:9000000\n"
    "info kind=grow count=6 event=grow index=6" INFO_REST " categories=malloc:1\n"
    "info kind=trim count=3 event=trim index=3" INFO_REST " categories=malloc:2\n"
    "info kind=limit count=0 event=none index=0" ZERO_REST " categories=\n"
    "info kind=periodic count=0 event=none index=0" ZERO_REST " categories=\n"
    "span_name id=1 count=832 name=GET\\s/index\\\\x\n"
    "span id=1 lo_ns=41000 hi_ns=42000 count=812 affected=0 multiple=0 events=0 duration_ns=33612000 "
    "memory_ns=402000 faults=0\n"
    "span id=1 lo_ns=5100000 hi_ns=5200000 count=20 affected=20 multiple=3 events=23 duration_ns=103000000 "
    "memory_ns=100100000 faults=9\n"
    "span_memory id=1 lo_ns=9000 hi_ns=10000 count=812\n"
    "span_memory id=1 lo_ns=5000000 hi_ns=5100000 count=20\n"
    "span_name id=7 count=1 name=db query\n"
    "span id=7 lo_ns=3 hi_ns=4 count=1 affected=1 multiple=1 events=2 duration_ns=3 memory_ns=1 faults=0\n"
    "span_memory id=7 lo_ns=1 hi_ns=2 count=1\n"
    "spans names=2 unmatched_ends=4 dropped=5 faults_counted=1\n"
    "end\n";

/* A report of an older agent: no info, no spans. */
static const char report_b[] = "memtrail-report 1\n"
                               "pid 77\n"
                               "cmdline ./b\\sc x\n"
                               "mode summary\n"
                               "category malloc kind=malloc live_bytes=5 live_count=1 peak_bytes=5 allocs=1 "
                               "frees=0 reallocs=0\n"
                               "total live_bytes=5 live_count=1 peak_bytes=5 allocs=1 frees=0 reallocs=0\n"
                               "errors double_free=0 bad_canary=0 foreign_free=0\n"
                               "end\n";

static int read_report(const char *text, struct report *r)
{
    char err[REPORT_ERR_MAX];
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    int rc = report_read_stream(f, "fixture", r, err, sizeof err);
    fclose(f);
    if (rc)
        printf("    %s\n", err);
    return rc;
}

static char *print_reports(const struct report *const *rs, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int rc = metrics_print(m, rs, n);
    fclose(m);
    CHECK("metrics_print returns 0", rc == 0);
    return buf;
}

/* Whether `page` holds the line `line` exactly. */
static int has_line(const char *page, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = page; (p = strstr(p, line)) != NULL; p++)
        if ((p == page || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    printf("    missing line: %s\n", line);
    return 0;
}

static int count_of(const char *page, const char *needle)
{
    int n = 0;
    for (const char *p = page; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

#define L "pid=\"4242\",program=\"my\\\\ \\\"prog\""

static void test_one(const char *page)
{
    CHECK("live bytes of a category", has_line(page, "memtrail_live_bytes{" L ",category=\"malloc\"} 1048"));
    CHECK("no live bytes of a vm category", !strstr(page, "memtrail_live_bytes{" L ",category=\"heap\"}"));
    CHECK("vm gauges of a vm category",
          has_line(page, "memtrail_resident_bytes{" L ",category=\"heap\"} 5271552"));
    CHECK("allocations counter", has_line(page, "memtrail_allocations_total{" L ",category=\"malloc\"} 19"));
    CHECK("frees counter", has_line(page, "memtrail_frees_total{" L ",category=\"malloc\"} 16"));
    CHECK("peak bytes", has_line(page, "memtrail_peak_bytes{" L ",category=\"malloc\"} 90000"));
    CHECK("rss", has_line(page, "memtrail_rss_bytes{" L "} 9035776"));
    CHECK("start time in seconds, exact",
          has_line(page, "memtrail_start_time_seconds{" L "} 1763868000.123456789"));
    CHECK("heap errors", has_line(page, "memtrail_heap_errors_total{" L ",error=\"foreign_free\"} 2"));
    CHECK("event counts by kind",
          has_line(page, "memtrail_memory_events_total{" L ",kind=\"peak\"} 5") &&
              has_line(page, "memtrail_memory_events_total{" L ",kind=\"grow\"} 6") &&
              has_line(page, "memtrail_memory_events_total{" L ",kind=\"trim\"} 3") &&
              has_line(page, "memtrail_memory_events_total{" L ",kind=\"limit\"} 0") &&
              has_line(page, "memtrail_memory_events_total{" L ",kind=\"periodic\"} 0"));
    CHECK("no kind any (it would count events twice)", !strstr(page, "kind=\"any\""));
    CHECK("memory time",
          has_line(page, "memtrail_memory_time_seconds_total{" L ",what=\"alloc\"} 0.001200345") &&
              has_line(page, "memtrail_memory_time_seconds_total{" L ",what=\"map\"} 0.000845"));
    CHECK("run time", has_line(page, "memtrail_run_time_seconds_total{" L "} 5.012345678"));
    CHECK("last event of a kind",
          has_line(page, "memtrail_last_event_timestamp_seconds{" L ",kind=\"peak\"} 1763868001.1"));
    CHECK("no last event of a kind without events",
          !strstr(page, "memtrail_last_event_timestamp_seconds{" L ",kind=\"limit\"}"));
    CHECK("memory load", has_line(page, "memtrail_memory_load_bytes{" L "} 2000000000"));

    /* span 1: 812 spans in [41us, 42us), 20 in [5.1ms, 5.2ms) */
#define S1 L ",span=\"GET /index\\\\x\""
    CHECK("duration: none below 20us",
          has_line(page, "memtrail_span_duration_seconds_bucket{" S1 ",le=\"0.00002\"} 0"));
    CHECK("duration: 812 below 50us",
          has_line(page, "memtrail_span_duration_seconds_bucket{" S1 ",le=\"0.00005\"} 812"));
    CHECK("duration: still 812 below 5ms",
          has_line(page, "memtrail_span_duration_seconds_bucket{" S1 ",le=\"0.005\"} 812"));
    CHECK("duration: 832 below 10ms",
          has_line(page, "memtrail_span_duration_seconds_bucket{" S1 ",le=\"0.01\"} 832"));
    CHECK("duration: 832 below 100s",
          has_line(page, "memtrail_span_duration_seconds_bucket{" S1 ",le=\"100\"} 832"));
    CHECK("duration: +Inf", has_line(page, "memtrail_span_duration_seconds_bucket{" S1 ",le=\"+Inf\"} 832"));
    CHECK("duration: _sum", has_line(page, "memtrail_span_duration_seconds_sum{" S1 "} 0.136612"));
    CHECK("duration: _count", has_line(page, "memtrail_span_duration_seconds_count{" S1 "} 832"));
    CHECK("memory: 812 below 10us",
          has_line(page, "memtrail_span_memory_seconds_bucket{" S1 ",le=\"0.00001\"} 812"));
    CHECK("memory: a bucket [5ms, 5.1ms) is above 5ms",
          has_line(page, "memtrail_span_memory_seconds_bucket{" S1 ",le=\"0.005\"} 812"));
    CHECK("memory: 832 below 10ms",
          has_line(page, "memtrail_span_memory_seconds_bucket{" S1 ",le=\"0.01\"} 832"));
    CHECK("memory: _sum is the memory_ns",
          has_line(page, "memtrail_span_memory_seconds_sum{" S1 "} 0.100502"));
    CHECK("memory: _count", has_line(page, "memtrail_span_memory_seconds_count{" S1 "} 832"));
    CHECK("25 bounds and +Inf per histogram",
          count_of(page, "memtrail_span_duration_seconds_bucket{" S1) == METRICS_SPAN_BOUNDS + 1);
    CHECK("affected spans", has_line(page, "memtrail_span_affected_total{" S1 "} 20"));
    CHECK("events the spans met", has_line(page, "memtrail_span_memory_events_total{" S1 "} 23"));
#define S7 L ",span=\"db query\""
    CHECK("a 3 ns span is below 1us",
          has_line(page, "memtrail_span_duration_seconds_bucket{" S7 ",le=\"0.000001\"} 1") &&
              has_line(page, "memtrail_span_duration_seconds_sum{" S7 "} 0.000000003"));
    CHECK("unmatched ends, dropped spans", has_line(page, "memtrail_span_unmatched_ends_total{" L "} 4") &&
                                               has_line(page, "memtrail_spans_dropped_total{" L "} 5"));
    CHECK("HELP and TYPE before each family",
          has_line(page, "# TYPE memtrail_span_duration_seconds histogram") &&
              has_line(page, "# TYPE memtrail_allocations_total counter") &&
              has_line(page, "# TYPE memtrail_live_bytes gauge"));
}

static void test_labels(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    metrics_put_label_value(m, "a\"b\\c\nd\xff\xe2\x82\xac\xc0\x80");
    fputc('|', m);
    metrics_put_seconds(m, -1500000000);
    fputc('|', m);
    metrics_put_seconds(m, 1000);
    fputc('|', m);
    metrics_put_seconds(m, 0);
    fclose(m);
    CHECK("label values escaped, non-UTF-8 bytes replaced; seconds exact",
          strcmp(buf, "a\\\"b\\\\c\\nd\xef\xbf\xbd\xe2\x82\xac\xef\xbf\xbd\xef\xbf\xbd|-1.5|0.000001|0") ==
              0);
    free(buf);
}

/* promtool's own check of the page, when it is installed. */
static void promtool_check(const char *page)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        printf("SKIP promtool check metrics: promtool not installed\n");
        return;
    }
    char path[] = "/tmp/mt-test-metrics-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        CHECK("promtool: temporary file", 0);
        return;
    }
    fputs(page, f);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics <%s >%s.out 2>&1", path, path);
    int rc = system(cmd);
    CHECK("promtool check metrics accepts the page", rc == 0);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s.out", path);
        if (system(cmd) != 0)
            printf("    (no output)\n");
    }
    snprintf(cmd, sizeof cmd, "%s.out", path);
    unlink(cmd);
    unlink(path);
}

int main(void)
{
    struct report a, b;
    int ra = read_report(report_a, &a), rb = read_report(report_b, &b);
    CHECK("fixtures read", ra == 0 && rb == 0);
    const struct report *one[] = {&a};
    char *page = print_reports(one, 1);
    test_one(page);
    free(page);

    const struct report *two[] = {&a, &b};
    page = print_reports(two, 2);
    CHECK("two processes: each family once", count_of(page, "# TYPE memtrail_live_bytes ") == 1 &&
                                                 count_of(page, "# HELP memtrail_live_bytes ") == 1);
    CHECK("two processes: both in the family",
          has_line(page, "memtrail_live_bytes{pid=\"77\",program=\"b c\",category=\"malloc\"} 5") &&
              has_line(page, "memtrail_live_bytes{" L ",category=\"malloc\"} 1048"));
    CHECK("a report without spans has no span series", !strstr(page, "pid=\"77\",program=\"b c\",span="));
    promtool_check(page);
    free(page);

    page = print_reports(NULL, 0);
    CHECK("no process: an empty page", page && page[0] == '\0');
    free(page);

    test_labels();
    report_free(&a);
    report_free(&b);
    return failures != 0;
}
