/* test_detail_read.c — unit tests of the reader's detail-mode lines
 * (stack_depth, unwinder, module, site, sites; docs/report-format.md
 * "Detail mode"; sample_rate, samples= and live_samples= of a sampled
 * report, docs/sampling.md): every field of a good file, unknown fields ignored, each
 * kind of bad line named with its file and line, and a file cut short
 * keeping the sites before the cut. Built with ASan+UBSan, so report_free
 * releasing everything is checked by LeakSanitizer. Prints PASS/FAIL lines. */
#include "report/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/fixture.h"

#define HEAD                                                                                                 \
    "memtrail-report 1\npid 7\nppid 1\nexe /bin/x\ncmdline x\nmode detail\nstart_ns 1\n"                     \
    "end_ns 2\nreason exit\n"                                                                                \
    "category malloc kind=malloc live_bytes=4096 live_count=1 peak_bytes=8192 allocs=4 frees=3 reallocs=0\n" \
    "category parser kind=malloc live_bytes=0 live_count=0 peak_bytes=64 allocs=1 frees=1 reallocs=0\n"      \
    "total live_bytes=4096 live_count=1 peak_bytes=8192 allocs=5 frees=4 reallocs=0\n"                       \
    "errors double_free=0 bad_canary=0 foreign_free=0\n"
#define DETAIL                                                                                               \
    "stack_depth 4\n"                                                                                        \
    "unwinder libunwind\n"                                                                                   \
    "module 1 bias=0x55d0c0000000 start=0x55d0c0000000 end=0x55d0c0031000 buildid=5F3E0c1d9a7b44e2a1c3 "     \
    "path=/usr/bin/sql ite3\n"                                                                               \
    "module 2 bias=0x7f3a12000000 start=0x7f3a12000000 end=0x7f3a121c5000 future=1 buildid=- "               \
    "path=/lib/a\\nb\\\\c.so path=x\n"                                                                       \
    "site 0 category=malloc live_bytes=0 live_count=0 peak_bytes=16 allocs=1 frees=1 reallocs=0 frames=\n"   \
    "site 1 category=malloc live_bytes=4096 live_count=1 peak_bytes=8192 allocs=3 frees=2 reallocs=0 "       \
    "frames=0x55d0c0001234,0x55D0C0002345,0x7f3a12029d8f\n"                                                  \
    "site 2 frames=0x55d0c0001299 category=parser live_bytes=0 live_count=0 peak_bytes=64 allocs=1 frees=1 " \
    "newfield=9\n"

static void test_good(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("good.mtr", HEAD DETAIL "sites count=3 dropped=5\nend\n", &r, err);
    CHECK("detail: reads", rc == 0);
    if (rc)
        printf("    %s\n", err);
    CHECK("detail: has sites bit", (r.has & REPORT_HAS_SITES) && r.stack_depth == 4);
    CHECK("detail: unwinder", r.unwinder && strcmp(r.unwinder, "libunwind") == 0);
    CHECK("detail: two modules", r.nmodules == 2);
    if (r.nmodules == 2) {
        const struct report_module *m = r.modules;
        CHECK("detail: module 1 numbers", m[0].id == 1 && m[0].bias == 0x55d0c0000000ull &&
                                              m[0].start == 0x55d0c0000000ull &&
                                              m[0].end == 0x55d0c0031000ull);
        CHECK("detail: build-id lowercased",
              m[0].buildid && strcmp(m[0].buildid, "5f3e0c1d9a7b44e2a1c3") == 0);
        CHECK("detail: path takes the rest of the line", strcmp(m[0].path, "/usr/bin/sql ite3") == 0);
        CHECK("detail: module 2 no build-id", m[1].id == 2 && m[1].buildid == NULL);
        CHECK("detail: path escapes undone, later path= is part of it",
              strcmp(m[1].path, "/lib/a\nb\\c.so path=x") == 0);
    }
    CHECK("detail: three sites", r.nsites == 3);
    if (r.nsites == 3) {
        const struct report_site *s = r.sites;
        CHECK("detail: site 0 no frames",
              s[0].id == 0 && s[0].nframes == 0 && s[0].frames == NULL && s[0].n.peak_bytes == 16);
        CHECK("detail: site 1 counters", s[1].id == 1 && s[1].n.live_bytes == 4096 &&
                                             s[1].n.live_count == 1 && s[1].n.peak_bytes == 8192 &&
                                             s[1].n.allocs == 3 && s[1].n.frees == 2);
        CHECK("detail: site 1 frames", s[1].nframes == 3 && s[1].frames[0] == 0x55d0c0001234ull &&
                                           s[1].frames[1] == 0x55d0c0002345ull &&
                                           s[1].frames[2] == 0x7f3a12029d8full);
        CHECK("detail: site 2 fields in any order",
              s[2].id == 2 && strcmp(s[2].category, "parser") == 0 && s[2].nframes == 1 &&
                  s[2].frames[0] == 0x55d0c0001299ull && s[2].n.allocs == 1 && s[2].n.reallocs == 0);
    }
    CHECK("detail: dropped", r.sites_dropped == 5);
    CHECK("detail: no allocated_bytes in an older report",
          r.nsites == 3 && !r.sites[0].has_allocated && !r.sites[1].has_allocated &&
              r.sites[1].allocated_bytes == 0 && !report_sites_have_allocated(&r));
    report_free(&r);
    CHECK("detail: report_free clears", r.nsites == 0 && r.sites == NULL && r.modules == NULL);

    /* A summary report: no detail fields. */
    rc = read_text("summary.mtr", HEAD "end\n", &r, err);
    CHECK("summary: no sites bit", rc == 0 && !(r.has & REPORT_HAS_SITES) && r.stack_depth == 0 &&
                                       r.nsites == 0 && r.unwinder == NULL);
    report_free(&r);
}

#define L14 "stack_depth 4\n" /* line 14 */
#define MOD "module 1 bias=0x0 start=0x1000 end=0x2000 buildid=- path=/x\n"
#define SITE(rest) "site 1 category=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 " rest "\n"

static void test_errors(void)
{
    expect_read_error("detail ", "bad hex",
                      HEAD L14 "module 1 bias=0xzz start=0x1 end=0x2 buildid=- path=/x\nend\n", -EBADMSG,
                      "bad.mtr: line 15: bad value '0xzz' for bias (expected 0x and hex digits)");
    expect_read_error("detail ", "hex without 0x",
                      HEAD L14 "module 1 bias=10 start=0x1 end=0x2 buildid=- path=/x\nend\n", -EBADMSG,
                      "line 15: bad value '10' for bias");
    expect_read_error("detail ", "hex overflow",
                      HEAD L14 "module 1 bias=0x10000000000000000 start=0x1 end=0x2 buildid=- path=/x\nend\n",
                      -ERANGE, "line 15: value '0x10000000000000000' for bias does not fit in 64 bits");
    expect_read_error("detail ", "module without path",
                      HEAD L14 "module 1 bias=0x0 start=0x1 end=0x2 buildid=-\nend\n", -EBADMSG,
                      "line 15: module 1 line lacks field path");
    expect_read_error("detail ", "module without end",
                      HEAD L14 "module 1 bias=0x0 start=0x1 buildid=- path=/x\nend\n", -EBADMSG,
                      "line 15: module 1 line lacks field end");
    expect_read_error("detail ", "module bad build-id",
                      HEAD L14 "module 1 bias=0x0 start=0x1 end=0x2 buildid=xyz path=/x\nend\n", -EBADMSG,
                      "bad value 'xyz' for buildid");
    expect_read_error("detail ", "module bad id",
                      HEAD L14 "module one bias=0x0 start=0x1 end=0x2 buildid=- path=/x\nend\n", -EBADMSG,
                      "line 15: bad value 'one' for the module ID");
    expect_read_error("detail ", "duplicate module", HEAD L14 MOD MOD "end\n", -EBADMSG,
                      "line 16: duplicate module 1");
    expect_read_error("detail ", "module end before start",
                      HEAD L14 "module 1 bias=0x0 start=0x3 end=0x2 buildid=- path=/x\nend\n", -EBADMSG,
                      "module 1 ends before it starts");
    expect_read_error("detail ", "module bad path escape",
                      HEAD L14 "module 1 bias=0x0 start=0x1 end=0x2 buildid=- path=/a\\tb\nend\n", -EBADMSG,
                      "bad escape '\\t' in module path");
    expect_read_error("detail ", "bad frame", HEAD L14 MOD SITE("frames=0x1234,0xq1") "end\n", -EBADMSG,
                      "line 16: bad value '0xq1' for frame 2");
    expect_read_error("detail ", "empty frame", HEAD L14 MOD SITE("frames=0x1234,,0x1") "end\n", -EBADMSG,
                      "line 16: empty frame 2 in site 1 line");
    expect_read_error("detail ", "site without frames", HEAD L14 SITE("") "end\n", -EBADMSG,
                      "line 15: site 1 line lacks field frames");
    expect_read_error("detail ", "site without category",
                      HEAD L14
                      "site 1 live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 frames=0x1\nend\n",
                      -EBADMSG, "line 15: site 1 line lacks field category");
    expect_read_error(
        "detail ", "site without allocs",
        HEAD L14 "site 1 category=malloc live_bytes=1 live_count=1 peak_bytes=1 frees=0 frames=0x1\nend\n",
        -EBADMSG, "line 15: site 1 line lacks field allocs");
    expect_read_error("detail ", "site bad counter", HEAD L14 SITE("frames=0x1 live_bytes=2") "end\n",
                      -EBADMSG, "line 15: field live_bytes given twice");
    expect_read_error("detail ", "site frames twice", HEAD L14 SITE("frames=0x1 frames=0x2") "end\n",
                      -EBADMSG, "line 15: field frames given twice in site 1 line");
    expect_read_error("detail ", "duplicate site", HEAD L14 SITE("frames=0x1") SITE("frames=0x2") "end\n",
                      -EBADMSG, "line 16: duplicate site 1");
    expect_read_error("detail ", "too many frames",
                      "memtrail-report 1\npid 1\nstack_depth 2\n" SITE("frames=0x1,0x2,0x3") "end\n",
                      -EBADMSG, "line 4: site 1 has 3 frames, more than stack_depth 2");
    expect_read_error("detail ", "bad depth", HEAD "stack_depth 0\nend\n", -EBADMSG,
                      "line 14: stack_depth 0 out of range");
    expect_read_error("detail ", "duplicate depth", HEAD L14 L14 "end\n", -EBADMSG,
                      "line 15: duplicate stack_depth line");
    expect_read_error("detail ", "sites count wrong",
                      HEAD L14 SITE("frames=0x1") "sites count=2 dropped=0\nend\n", -EBADMSG,
                      "line 16: sites line says count=2 but 1 site lines came before it");
    expect_read_error("detail ", "sites lacks dropped", HEAD L14 "sites count=0\nend\n", -EBADMSG,
                      "line 15: sites line lacks field dropped");
    expect_read_error("detail ", "site after sites",
                      HEAD L14 "sites count=0 dropped=0\n" SITE("frames=0x1") "end\n", -EBADMSG,
                      "line 16: site line after the sites line");
    expect_read_error("detail ", "no sites line", HEAD L14 SITE("frames=0x1") "end\n", -EBADMSG,
                      "no sites line");
}

/* allocated_bytes: read when present, anywhere on the line; same rules as
 * the other counters. */
static void test_allocated(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text(
        "alloc.mtr",
        HEAD L14 SITE(
            "reallocs=2 allocated_bytes=12288 frames=0x1") "site 2 allocated_bytes=9223372036854775807 "
                                                           "category=parser live_bytes=0 live_count=0 "
                                                           "peak_bytes=64 allocs=1 frees=1 frames=\n"
                                                           "sites count=2 dropped=0\nend\n",
        &r, err);
    CHECK("allocated: reads", rc == 0);
    if (rc)
        printf("    %s\n", err);
    CHECK("allocated: two sites", r.nsites == 2);
    if (r.nsites == 2) {
        CHECK("allocated: site 1 value and flag", r.sites[0].has_allocated &&
                                                      r.sites[0].allocated_bytes == 12288 &&
                                                      r.sites[0].n.reallocs == 2 && r.sites[0].n.allocs == 1);
        CHECK("allocated: site 2 before category, INT64_MAX", r.sites[1].has_allocated &&
                                                                  r.sites[1].allocated_bytes == INT64_MAX &&
                                                                  r.sites[1].n.peak_bytes == 64);
        CHECK("allocated: every site has it", report_sites_have_allocated(&r));
    }
    report_free(&r);
    /* one site with it, one without: not every site */
    rc = read_text(
        "mixed.mtr",
        HEAD L14 SITE("allocated_bytes=5 frames=0x1") "site 2 category=malloc live_bytes=1 live_count=1 "
                                                      "peak_bytes=1 allocs=1 frees=0 frames=0x2\n"
                                                      "sites count=2 dropped=0\nend\n",
        &r, err);
    CHECK("allocated mixed: reads", rc == 0 && r.nsites == 2);
    CHECK("allocated mixed: not every site", r.nsites == 2 && r.sites[0].has_allocated &&
                                                 !r.sites[1].has_allocated &&
                                                 !report_sites_have_allocated(&r));
    report_free(&r);
    expect_read_error("detail ", "allocated not a number",
                      HEAD L14 SITE("allocated_bytes=12k frames=0x1") "end\n", -EBADMSG,
                      "line 15: bad value '12k' for allocated_bytes (expected an integer)");
    expect_read_error("detail ", "allocated empty", HEAD L14 SITE("allocated_bytes= frames=0x1") "end\n",
                      -EBADMSG, "line 15: bad value '' for allocated_bytes");
    expect_read_error("detail ", "allocated overflow",
                      HEAD L14 SITE("allocated_bytes=9223372036854775808 frames=0x1") "end\n", -ERANGE,
                      "line 15: value '9223372036854775808' for allocated_bytes does not fit");
    expect_read_error("detail ", "allocated twice",
                      HEAD L14 SITE("allocated_bytes=1 allocated_bytes=2 frames=0x1") "end\n", -EBADMSG,
                      "line 15: field allocated_bytes given twice");
}

/* A sampled report (docs/sampling.md): mode sample, the sample_rate line,
 * samples= and live_samples= on every site. */
#define STOTAL "total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\n"
#define SHEAD(mode) "memtrail-report 1\npid 7\nmode " mode "\n" STOTAL
#define SSITE(id, rest)                                                                                      \
    "site " #id " category=malloc live_bytes=1048576 live_count=32768 peak_bytes=2097152 allocs=65536 "      \
    "frees=32768 reallocs=0 allocated_bytes=2097152 " rest " frames=0x1\n"
static void test_sampled(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("s.mtr",
                       SHEAD("sample") "stack_depth 4\nunwinder cfi\nsample_rate 524288\n" SSITE(
                           1, "samples=4 live_samples=2")
                           SSITE(2, "live_samples=0 samples=1 future=3") "sites count=2 dropped=0\nend\n",
                       &r, err);
    CHECK("sampled: reads", rc == 0);
    if (rc)
        printf("    %s\n", err);
    CHECK("sampled: rate", report_is_sampled(&r) && r.sample_rate == 524288 &&
                               (r.has & REPORT_HAS_SAMPLE_RATE) && strcmp(r.mode, "sample") == 0);
    CHECK("sampled: site fields", r.nsites == 2 && r.sites[0].has_samples && r.sites[0].samples == 4 &&
                                      r.sites[0].live_samples == 2 && r.sites[0].n.allocs == 65536 &&
                                      r.sites[1].has_samples && r.sites[1].samples == 1 &&
                                      r.sites[1].live_samples == 0);
    report_free(&r);
    /* An exact report: no rate, no samples, not sampled. */
    rc = read_text("e.mtr", SHEAD("detail") "stack_depth 4\n" SSITE(1, "") "sites count=1 dropped=0\nend\n",
                   &r, err);
    CHECK("exact: not sampled", rc == 0 && !report_is_sampled(&r) && r.sample_rate == 0 && r.nsites == 1 &&
                                    !r.sites[0].has_samples);
    report_free(&r);

    expect_read_error("sampled ", "no sample_rate line",
                      SHEAD("sample") "stack_depth 4\n" SSITE(
                          1, "samples=1 live_samples=1") "sites count=1 dropped=0\nend\n",
                      -EBADMSG, "bad.mtr: no sample_rate line (the mode line says sample)");
    expect_read_error("sampled ", "rate zero", SHEAD("sample") "stack_depth 4\nsample_rate 0\nend\n",
                      -EBADMSG,
                      "bad.mtr: line 6: sample_rate 0 out of range (expected a positive number of bytes)");
    expect_read_error("sampled ", "rate negative", SHEAD("sample") "sample_rate -512\nend\n", -EBADMSG,
                      "bad.mtr: line 5: sample_rate -512 out of range");
    expect_read_error("sampled ", "rate with a unit", SHEAD("sample") "sample_rate 512KiB\nend\n", -EBADMSG,
                      "bad.mtr: line 5: bad value '512KiB' for sample_rate (expected an integer)");
    expect_read_error("sampled ", "rate empty", SHEAD("sample") "sample_rate\nend\n", -EBADMSG,
                      "bad.mtr: line 5: bad value '' for sample_rate");
    expect_read_error("sampled ", "rate overflow", SHEAD("sample") "sample_rate 9223372036854775808\nend\n",
                      -ERANGE, "line 5: value '9223372036854775808' for sample_rate does not fit");
    expect_read_error("sampled ", "rate twice", SHEAD("sample") "sample_rate 1\nsample_rate 1\nend\n",
                      -EBADMSG, "line 6: duplicate sample_rate line");
    expect_read_error("sampled ", "rate in an exact report", SHEAD("detail") "sample_rate 4096\nend\n",
                      -EBADMSG,
                      "bad.mtr: a sample_rate line in a report of mode detail (expected mode sample)");
    expect_read_error("sampled ", "site without samples",
                      SHEAD("sample") "stack_depth 4\nsample_rate 4096\n" SSITE(3, "") "end\n", -EBADMSG,
                      "line 7: site 3 line lacks field samples (the report is sampled)");
    expect_read_error("sampled ", "samples without live_samples",
                      SHEAD("sample") "stack_depth 4\nsample_rate 4096\n" SSITE(3, "samples=2") "end\n",
                      -EBADMSG, "line 7: site 3 line lacks field live_samples (it has samples)");
    expect_read_error(
        "sampled ", "more live samples than samples",
        SHEAD("sample") "stack_depth 4\nsample_rate 4096\n" SSITE(3, "samples=2 live_samples=3") "end\n",
        -EBADMSG,
        "line 7: site 3 line has live_samples=3 and samples=2 (expected 0 <= live_samples <= samples)");
    expect_read_error(
        "sampled ", "samples not a number",
        SHEAD("sample") "stack_depth 4\nsample_rate 4096\n" SSITE(3, "samples=x live_samples=0") "end\n",
        -EBADMSG, "line 7: bad value 'x' for samples (expected an integer)");
    expect_read_error(
        "sampled ", "rate after a site",
        SHEAD("sample") "stack_depth 4\n" SSITE(3, "samples=1 live_samples=0") "sample_rate 4096\nend\n",
        -EBADMSG, "line 7: sample_rate line after the first site line");
    /* Cut short: what was read is kept, the rate with it; no complaint about a missing rate. */
    rc = read_text("cut.mtr",
                   SHEAD("sample") "stack_depth 4\nsample_rate 65536\n" SSITE(1, "samples=1 live_samples=1"),
                   &r, err);
    CHECK("sampled truncated: -ENODATA, rate and site kept",
          rc == -ENODATA && r.sample_rate == 65536 && r.nsites == 1 && r.sites[0].samples == 1);
    report_free(&r);
}

static void test_truncated(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    /* Cut in the middle of the third site line: the first two are kept. */
    int rc = read_text("cut.mtr", HEAD DETAIL "sites count=3 dr", &r, err);
    CHECK("detail truncated: -ENODATA", rc == -ENODATA && strstr(err, "truncated after line 20"));
    CHECK("detail truncated: sites before the cut kept", r.nsites == 3 && r.nmodules == 2 && !r.complete);
    report_free(&r);
    rc = read_text("cut2.mtr", HEAD DETAIL, &r, err);
    CHECK("detail truncated before sites line", rc == -ENODATA && r.nsites == 3);
    report_free(&r);
    rc = read_text(
        "cut3.mtr",
        HEAD "stack_depth 4\nsite 1 category=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 "
             "frames=0x1,0x2\nsite 2 category=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 fre",
        &r, err);
    CHECK("detail truncated mid-site: partial line dropped",
          rc == -ENODATA && r.nsites == 1 && r.sites[0].nframes == 2);
    report_free(&r);
}

int main(void)
{
    fixture_dir();
    test_good();
    test_errors();
    test_allocated();
    test_sampled();
    test_truncated();
    rmdir(dir);
    return failures ? 1 : 0;
}
