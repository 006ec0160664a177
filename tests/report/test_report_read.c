/* test_report_read.c — unit tests of the .mtr reader (src/report/): every
 * field of a good file, forward compatibility (unknown keys and fields),
 * and each kind of bad input getting its own error code and message.
 * Fixtures are written to a fresh temp dir. Prints PASS/FAIL lines. */
#include "report/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/fixture.h"

#define HEAD "memtrail-report 1\n"
static const char good[] = HEAD
    "pid 4242\n"
    "ppid 4241\n"
    "exe /usr/bin/sqlite3\n"
    "cmdline sqlite3 :memory: .read\\sworkload.sql a\\\\b\\nc\n"
    "mode summary\n"
    "start_ns 1763868000123456789\n"
    "end_ns 1763868001123456789\n"
    "reason exit\n"
    "category malloc kind=malloc live_bytes=1048 live_count=3 peak_bytes=90000 allocs=1900000 frees=1899997\n"
    "category parser kind=malloc live_bytes=0 live_count=0 peak_bytes=4096 allocs=10 frees=10 reallocs=7\n"
    "category memtrail kind=overhead live_bytes=54 live_count=3 peak_bytes=3000 allocs=1900010 "
    "frees=1900007\n"
    "total live_bytes=1048 live_count=3 peak_bytes=90000 allocs=1900010 frees=1900007\n"
    "errors double_free=1 bad_canary=2 foreign_free=3\n"
    "end\n";

static void test_good(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("good.mtr", good, &r, err);
    CHECK("good: reads", rc == 0);
    CHECK("good: complete", r.complete && r.lines_read == 15);
    CHECK("good: pid/ppid", r.pid == 4242 && r.ppid == 4241);
    CHECK("good: exe", r.exe && strcmp(r.exe, "/usr/bin/sqlite3") == 0);
    CHECK("good: mode/reason",
          r.mode && strcmp(r.mode, "summary") == 0 && r.reason && strcmp(r.reason, "exit") == 0);
    CHECK("good: start/end", r.start_ns == 1763868000123456789LL && r.end_ns == 1763868001123456789LL);
    CHECK("good: cmdline argc", r.argc == 4);
    if (r.argc == 4) {
        CHECK("good: cmdline plain", strcmp(r.argv[0], "sqlite3") == 0 && strcmp(r.argv[1], ":memory:") == 0);
        CHECK("good: cmdline \\s", strcmp(r.argv[2], ".read workload.sql") == 0);
        CHECK("good: cmdline \\\\ and \\n", strcmp(r.argv[3], "a\\b\nc") == 0);
    }
    CHECK("good: 3 categories", r.ncategories == 3);
    if (r.ncategories == 3) {
        const struct report_category *m = &r.categories[0], *p = &r.categories[1], *o = &r.categories[2];
        CHECK("good: malloc category", strcmp(m->name, "malloc") == 0 && strcmp(m->kind, "malloc") == 0 &&
                                           m->n.live_bytes == 1048 && m->n.live_count == 3 &&
                                           m->n.peak_bytes == 90000 && m->n.allocs == 1900000 &&
                                           m->n.frees == 1899997 && m->n.reallocs == 0);
        CHECK("good: reallocs field", strcmp(p->name, "parser") == 0 && p->n.reallocs == 7 &&
                                          p->n.peak_bytes == 4096 && p->n.allocs == 10 && p->n.frees == 10);
        CHECK("good: overhead kind", strcmp(o->name, "memtrail") == 0 && strcmp(o->kind, "overhead") == 0 &&
                                         o->n.live_bytes == 54 && o->n.allocs == 1900010);
    }
    CHECK("good: total", (r.has & REPORT_HAS_TOTAL) && r.total.live_bytes == 1048 &&
                             r.total.live_count == 3 && r.total.peak_bytes == 90000 &&
                             r.total.allocs == 1900010 && r.total.frees == 1900007);
    CHECK("good: errors", (r.has & REPORT_HAS_ERRORS) && r.errors.double_free == 1 &&
                              r.errors.bad_canary == 2 && r.errors.foreign_free == 3);
    report_free(&r);
}

static void test_unknown_ignored(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("unknown.mtr",
                       HEAD "pid 7\nfuture_key whatever it says\n"
                            "category a kind=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 "
                            "colour=blue new_counter=12\n"
                            "total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 extra=x\n"
                            "end\n",
                       &r, err);
    CHECK("unknown keys and fields ignored", rc == 0 && r.complete && r.ncategories == 1 &&
                                                 r.categories[0].n.live_bytes == 1 && r.total.allocs == 1);
    CHECK("absent optional lines stay absent",
          !(r.has & REPORT_HAS_EXE) && !r.exe && !r.argv && !(r.has & REPORT_HAS_ERRORS));
    report_free(&r);
}

static void test_errors(void)
{
    expect_read_error("", "bad header", "memtrail-repor 1\npid 1\nend\n", -EINVAL,
                      "not a memtrail report (bad header)");
    expect_read_error("", "binary file", "\177ELF\2\1\1\0\0\0\n", -EINVAL,
                      "not a memtrail report (bad header)");
    expect_read_error("", "version 0", "memtrail-report 0\nend\n", -EINVAL, "bad header");
    expect_read_error("", "future version", "memtrail-report 2\npid 1\nend\n", -ENOTSUP,
                      "version 2 is newer than this memtrail reads (version 1)");
    expect_read_error("", "empty file", "", -EINVAL, "empty file");
    expect_read_error("", "bad integer",
                      HEAD
                      "pid 1\nppid 1\nexe /x\ncmdline x\nmode summary\n"
                      "category a kind=malloc live_bytes=x live_count=1 peak_bytes=1 allocs=1 frees=0\nend\n",
                      -EBADMSG, "bad.mtr: line 7: bad value 'x' for live_bytes (expected an integer)");
    expect_read_error("", "integer with sign", HEAD "pid +5\nend\n", -EBADMSG,
                      "line 2: bad value '+5' for pid");
    expect_read_error("", "integer with trailing junk", HEAD "pid 5x\nend\n", -EBADMSG,
                      "bad value '5x' for pid");
    expect_read_error("", "empty integer", HEAD "pid\nend\n", -EBADMSG, "bad value '' for pid");
    expect_read_error(
        "", "overflowing integer", HEAD "pid 1\nstart_ns 9223372036854775808\nend\n", -ERANGE,
        "line 3: value '9223372036854775808' for start_ns does not fit in a signed 64-bit integer");
    expect_read_error("", "negative overflow", HEAD "pid -9223372036854775809\nend\n", -ERANGE,
                      "does not fit");
    expect_read_error("", "missing field",
                      HEAD
                      "pid 1\ncategory a kind=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1\nend\n",
                      -EBADMSG, "line 3: category 'a' line lacks field frees");
    expect_read_error("", "field without =", HEAD "pid 1\ntotal live_bytes=1 oops\nend\n", -EBADMSG,
                      "bad field 'oops' in total line (expected name=value)");
    expect_read_error("", "duplicate category",
                      HEAD
                      "pid 1\n"
                      "category a kind=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\n"
                      "category a kind=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nend\n",
                      -EBADMSG, "line 4: duplicate category 'a'");
    expect_read_error("", "bad escape", HEAD "pid 1\ncmdline a\\tb\nend\n", -EBADMSG,
                      "bad escape '\\t' in cmdline");
    expect_read_error("", "no total", HEAD "pid 1\nend\n", -EBADMSG, "no total line");
    expect_read_error("", "data after end",
                      HEAD "pid 1\ntotal live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nend\nx\n",
                      -EBADMSG, "line 5: data after the end marker");
    expect_read_error("", "empty line", HEAD "pid 1\n\nend\n", -EBADMSG, "line 3: empty line");

    /* Not a file: a missing path and a directory. */
    struct report r;
    char err[REPORT_ERR_MAX], *missing;
    if (asprintf(&missing, "%s/missing.mtr", dir) < 0)
        abort();
    int rc = report_read(missing, &r, err, sizeof err);
    CHECK("missing file", rc == -ENOENT && strstr(err, "missing.mtr: cannot open: "));
    report_free(&r);
    free(missing);
    rc = report_read(dir, &r, err, sizeof err);
    CHECK("directory", rc == -EISDIR && strstr(err, "is a directory"));
    report_free(&r);
}

static void test_i64(void)
{
    int64_t v = 0;
    CHECK("i64 max", report_parse_i64("9223372036854775807", &v) == 0 && v == INT64_MAX);
    CHECK("i64 min", report_parse_i64("-9223372036854775808", &v) == 0 && v == INT64_MIN);
    CHECK("i64 max+1", report_parse_i64("9223372036854775808", &v) == -ERANGE);
    CHECK("i64 huge", report_parse_i64("99999999999999999999999", &v) == -ERANGE);
    CHECK("i64 huge then junk is not an integer", report_parse_i64("99999999999999999999x", &v) == -EINVAL);
    CHECK("i64 lone minus", report_parse_i64("-", &v) == -EINVAL);
    CHECK("i64 space", report_parse_i64(" 1", &v) == -EINVAL);
    CHECK("i64 leading zeros", report_parse_i64("007", &v) == 0 && v == 7);
}

static void test_truncated(void)
{
    static const char cut[] =
        HEAD "pid 9\nppid 8\ncmdline prog\n"
             "category a kind=malloc live_bytes=100 live_count=2 peak_bytes=300 allocs=4 frees=2\n"
             "category b kind=malloc live_bytes=5 live_count=1 peak_bytes=5 allocs=1 frees=0\n";
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("cut.mtr", cut, &r, err);
    CHECK("truncated: -ENODATA", rc == -ENODATA);
    CHECK("truncated: message", strstr(err, "cut.mtr: truncated after line 6 (no end marker)") != NULL);
    CHECK("truncated: keeps what was read", !r.complete && r.pid == 9 && r.ncategories == 2 &&
                                                r.categories[1].n.live_bytes == 5 &&
                                                !(r.has & REPORT_HAS_TOTAL) && r.lines_read == 6);
    report_free(&r);

    /* Cut in the middle of a line: that line is not trusted. */
    rc = read_text("cut2.mtr",
                   HEAD "pid 9\ncategory a kind=malloc live_bytes=100 live_count=2 peak_bytes=300 allocs=4 "
                        "frees=2\ncategory b kind=malloc live_by",
                   &r, err);
    CHECK("cut mid-line: -ENODATA", rc == -ENODATA && r.ncategories == 1);
    CHECK("cut mid-line: message", strstr(err, "truncated after line 3 (line 4 cut short, no end marker)"));
    report_free(&r);

    /* The end marker without its newline still ends the report. */
    rc = read_text("endnonl.mtr",
                   HEAD "pid 1\ntotal live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nend", &r, err);
    CHECK("end without newline", rc == 0 && r.complete);
    report_free(&r);

    rc = read_text("headonly.mtr", HEAD, &r, err);
    CHECK("header only is truncated", rc == -ENODATA && strstr(err, "truncated after line 1"));
    report_free(&r);
}

static void test_cmdline(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("cmd.mtr",
                       HEAD "pid 1\ncmdline \\\\s\\s\\\\ x\\n\\n  y\n"
                            "total live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0\nend\n",
                       &r, err);
    CHECK("cmdline: reads", rc == 0);
    CHECK("cmdline: argc counts empty args", r.argc == 4);
    if (r.argc == 4)
        CHECK("cmdline: unescape", strcmp(r.argv[0], "\\s \\") == 0 && strcmp(r.argv[1], "x\n\n") == 0 &&
                                       strcmp(r.argv[2], "") == 0 && strcmp(r.argv[3], "y") == 0);
    report_free(&r);
    rc = read_text("cmd2.mtr", HEAD "pid 1\ncmdline a\\\nend\n", &r, err);
    CHECK("cmdline: lone backslash", rc == -EBADMSG && strstr(err, "lone backslash"));
    report_free(&r);
}

static void test_print(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    CHECK("print: reads", read_text("p.mtr", good, &r, err) == 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct report_scale kb;
    report_scale_parse("kb", &kb);
    CHECK("print: text ok", report_print_text(m, &r, &kb) == 0);
    fclose(m);
    /* 1048 B = 1.02KB, 90000 B = 87.9KB: three significant digits (common/units.h) */
    CHECK("print: total line",
          strstr(buf, "Total: live=1.02KB (3 blocks), peak=87.9KB, allocs=1900010, frees=1900007"));
    CHECK("print: category line",
          strstr(buf, "-                    malloc (reserved=1.02KB, committed=1.02KB)"));
    CHECK("print: overhead last", strstr(buf, "memtrail (") > strstr(buf, "parser ("));
    free(buf);
    report_free(&r);
    CHECK("scaled: rounds half up", report_scaled(512, 1024) == 1 && report_scaled(511, 1024) == 0);
    CHECK("scaled: negative", report_scaled(-512, 1024) == -1 && report_scaled(-511, 1024) == 0);
    CHECK("scaled: no overflow at max", report_scaled(INT64_MAX, 1024) == INT64_MAX / 1024 + 1);
}

/* --- virtual memory fields (docs/report-format.md) ------------------------ */

static const char vm_report[] = HEAD
    "pid 500\n"
    "ppid 499\n"
    "reason signal SIGSEGV\n"
    "category malloc kind=malloc live_bytes=2048 live_count=2 peak_bytes=4096 allocs=9 frees=7 reallocs=1 "
    "reserved=0 committed=0 resident=0 mappings=0\n"
    "category parser kind=malloc live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 "
    "reserved=1048576 committed=524288 resident=40960 mappings=2\n"
    "category memtrail kind=overhead live_bytes=64 live_count=2 peak_bytes=128 allocs=9 frees=7 reallocs=0 "
    "reserved=262144 committed=131072 resident=65536 mappings=3\n"
    "category heap kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 "
    "reserved=8388608 committed=4194304 resident=2097152 mappings=1 future=3\n"
    "category other kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 "
    "reserved=16384 committed=16384 resident=8192 mappings=2\n"
    "total live_bytes=2048 live_count=2 peak_bytes=4096 allocs=9 frees=7 reallocs=1\n"
    "process rss_bytes=2220032 peak_rss_bytes=3145728 reserved=9715712 committed=4866048 resident=2211840\n"
    "end\n";

static void test_vm_fields(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("vm.mtr", vm_report, &r, err);
    CHECK("vm: reads", rc == 0 && r.complete);
    CHECK("vm: has flags", (r.has & REPORT_HAS_VM) && (r.has & REPORT_HAS_PROCESS));
    CHECK("vm: reason keeps the whole line", r.reason && strcmp(r.reason, "signal SIGSEGV") == 0);
    CHECK("vm: 5 categories", r.ncategories == 5);
    if (r.ncategories == 5) {
        const struct report_category *m = &r.categories[0], *p = &r.categories[1], *h = &r.categories[3];
        CHECK("vm: malloc category has zero VM", m->has_vm && m->vm.reserved == 0 && m->vm.mappings == 0 &&
                                                     m->n.live_bytes == 2048 && m->n.reallocs == 1);
        CHECK("vm: parser VM fields", p->has_vm && p->vm.reserved == 1048576 && p->vm.committed == 524288 &&
                                          p->vm.resident == 40960 && p->vm.mappings == 2);
        CHECK("vm: kind vm, unknown field ignored", strcmp(h->kind, "vm") == 0 && h->vm.reserved == 8388608 &&
                                                        h->vm.committed == 4194304 &&
                                                        h->vm.resident == 2097152 && h->vm.mappings == 1);
    }
    CHECK("vm: process line", r.process.rss_bytes == 2220032 && r.process.peak_rss_bytes == 3145728 &&
                                  r.process.reserved == 9715712 && r.process.committed == 4866048 &&
                                  r.process.resident == 2211840);
    struct report_vm sum;
    report_vm_total(&r, &sum);
    CHECK("vm: sum of categories", sum.reserved == 9715712 && sum.committed == 4866048 &&
                                       sum.resident == 2211840 && sum.mappings == 8);
    /* 0 + 40960 + 65536 + 2097152 (other's 8192 not counted) */
    CHECK("vm: explained excludes other", report_explained(&r) == 2203648);

    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct report_scale kb;
    report_scale_parse("KB", &kb);
    CHECK("vm print: text ok", report_print_text(m, &r, &kb) == 0);
    fclose(m);
    CHECK("vm print: total line",
          strstr(buf, "Total: reserved=9488KB, committed=4752KB, resident=2160KB\n"
                      "       malloc: live=2KB (2 blocks), peak=4KB, allocs=9, frees=7, reallocs=1"));
    CHECK("vm print: vm category",
          strstr(buf, "-                      heap (reserved=8192KB, committed=4096KB, "
                      "resident=2048KB, mappings=1)\n\n"));
    CHECK("vm print: malloc category keeps its heap lines",
          strstr(buf, "-                    malloc (reserved=0KB, committed=0KB, resident=0KB, mappings=0)\n"
                      "                            (malloc=2KB #2) (peak=4KB)"));
    /* 2203648 / 2220032 = 99.26% */
    CHECK("vm print: process and explained share",
          strstr(buf,
                 "Process: rss=2168KB, peak rss=3072KB (reserved=9488KB, committed=4752KB, resident=2160KB)\n"
                 "         the categories explain 2152KB of it (99.3%; 'other' not counted)"));
    CHECK("vm print: fatal signal named", strstr(buf, "written on fatal signal SIGSEGV"));
    CHECK("vm print: sorted by committed + live", strstr(buf, " heap (") < strstr(buf, " parser (") &&
                                                      strstr(buf, " parser (") < strstr(buf, " other (") &&
                                                      strstr(buf, " other (") < strstr(buf, " malloc (") &&
                                                      strstr(buf, " malloc (") < strstr(buf, " memtrail ("));
    free(buf);

    buf = NULL;
    m = open_memstream(&buf, &len);
    CHECK("vm print: json ok", report_print_json(m, &r) == 0);
    fclose(m);
    CHECK("vm json: category fields", strstr(buf, "\"reserved_bytes\": 1048576, \"committed_bytes\": 524288, "
                                                  "\"resident_bytes\": 40960, \"mappings\": 2}"));
    CHECK("vm json: process",
          strstr(buf,
                 "\"process\": {\"rss_bytes\": 2220032, \"peak_rss_bytes\": 3145728, "
                 "\"reserved_bytes\": 9715712, \"committed_bytes\": 4866048, \"resident_bytes\": 2211840, "
                 "\"explained_bytes\": 2203648}"));
    free(buf);
    report_free(&r);
}

static void test_old_report_compat(void)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    CHECK("old: reads", read_text("old.mtr", good, &r, err) == 0);
    CHECK("old: no VM, no process",
          !(r.has & REPORT_HAS_VM) && !(r.has & REPORT_HAS_PROCESS) && r.process.rss_bytes == 0);
    bool none = true;
    for (size_t i = 0; i < r.ncategories; i++)
        none &=
            !r.categories[i].has_vm && r.categories[i].vm.reserved == 0 && r.categories[i].vm.resident == 0;
    CHECK("old: categories without VM", none);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct report_scale kb;
    report_scale_parse("KB", &kb);
    report_print_text(m, &r, &kb);
    fclose(m);
    CHECK("old print: no VM lines", !strstr(buf, "resident") && !strstr(buf, "Process:"));
    free(buf);
    buf = NULL;
    m = open_memstream(&buf, &len);
    report_print_json(m, &r);
    fclose(m);
    CHECK("old json: reserved = live, resident null",
          strstr(buf, "\"reserved_bytes\": 1048, \"committed_bytes\": 1048, \"resident_bytes\": null, "
                      "\"mappings\": null}"));
    CHECK("old json: process null", strstr(buf, "\"process\": null,"));
    free(buf);
    report_free(&r);
}

static void test_vm_errors(void)
{
    expect_read_error(
        "", "some VM fields but not all",
        HEAD "pid 1\ncategory a kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 "
             "reserved=1 committed=1 mappings=1\nend\n",
        -EBADMSG, "line 3: category 'a' line lacks field resident (it has other virtual memory fields)");
    expect_read_error("", "bad VM value",
                      HEAD
                      "pid 1\ncategory a kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 "
                      "reserved=1 committed=x resident=1 mappings=1\nend\n",
                      -EBADMSG, "bad value 'x' for committed");
    expect_read_error("", "process line lacks a field",
                      HEAD "pid 1\nprocess rss_bytes=1 peak_rss_bytes=2 reserved=3 committed=4\nend\n",
                      -EBADMSG, "line 3: process line lacks field resident");
    expect_read_error("", "duplicate process line",
                      HEAD "pid 1\nprocess rss_bytes=1 peak_rss_bytes=2 reserved=3 committed=4 resident=5\n"
                           "process rss_bytes=1 peak_rss_bytes=2 reserved=3 committed=4 resident=5\nend\n",
                      -EBADMSG, "line 4: duplicate process line");
    expect_read_error("", "process overflow",
                      HEAD "pid 1\nprocess rss_bytes=9223372036854775808 peak_rss_bytes=2 reserved=3 "
                           "committed=4 resident=5\nend\n",
                      -ERANGE, "value '9223372036854775808' for rss_bytes does not fit");
}

/* Write `r` through a printer into a string (the caller frees it). */
static char *diff_text(const struct report *b, const struct report *c, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct report_scale kb;
    report_scale_parse("KB", &kb);
    int rc = json ? report_diff_print_json(m, b, c) : report_diff_print_text(m, b, c, &kb);
    fclose(m);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void test_diff_api(void)
{
    struct report b, c;
    char err[REPORT_ERR_MAX];
    CHECK("diff api: base reads", read_text("b.mtr", good, &b, err) == 0);
    CHECK("diff api: new reads", read_text("c.mtr", vm_report, &c, err) == 0);
    /* good: malloc 1048 live; vm_report: malloc 2048 live -> +1000; parser
     * 7 reallocs -> 0; memtrail 54 -> 64; heap and other only in new. */
    char *t = diff_text(&b, &c, true);
    CHECK("diff api: json ok", t != NULL);
    if (t) {
        CHECK(
            "diff api: matched category delta",
            strstr(t,
                   "{\"name\": \"malloc\", \"kind\": \"malloc\", \"status\": \"both\", \"live_bytes\": 2048, "
                   "\"live_bytes_delta\": 1000, \"live_count\": 2, \"live_count_delta\": -1"));
        /* the base (an older report) has no address-space figures: heap,
         * an address-space category, is not comparable rather than new */
        CHECK("diff api: an address-space category the base has no figures for",
              strstr(t, "{\"name\": \"heap\", \"kind\": \"vm\", \"status\": \"not_comparable\""));
        CHECK("diff api: VM deltas null when base has none",
              strstr(t, "\"reserved_bytes\": 8388608, \"reserved_bytes_delta\": null"));
        CHECK("diff api: process without base",
              strstr(t, "\"process\": {\"present_in_base\": false, "
                        "\"rss_bytes\": 2220032, \"rss_bytes_delta\": null"));
        free(t);
    }
    t = diff_text(&c, &b, false);
    CHECK("diff api: text ok", t != NULL);
    if (t) {
        CHECK("diff api: an address-space category the new report has no figures for: no zeros, not gone",
              strstr(t, "-                      heap (not comparable: the new report has no address-space "
                        "figures)\n"));
        CHECK("diff api: mixed reports noted", strstr(t, "(the new report has no virtual memory fields"));
        CHECK("diff api: process gone", strstr(t, "Process: not in the new report"));
        free(t);
    }
    t = diff_text(&c, &c, false);
    CHECK("diff api: same report, no changes shown",
          t && !strchr(strstr(t, "Total:"), '+') && !strstr(strstr(t, "Total:"), " -"));
    free(t);

    /* A write error is -EIO, as for the summary printers. */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        setvbuf(full, NULL, _IONBF, 0);
        struct report_scale kb;
        report_scale_parse("KB", &kb);
        CHECK("diff api: text write error is -EIO", report_diff_print_text(full, &b, &c, &kb) == -EIO);
        clearerr(full);
        CHECK("diff api: json write error is -EIO", report_diff_print_json(full, &b, &c) == -EIO);
        fclose(full);
    }
    report_free(&b);
    report_free(&c);
}

int main(void)
{
    fixture_dir();
    test_good();
    test_unknown_ignored();
    test_errors();
    test_i64();
    test_truncated();
    test_cmdline();
    test_print();
    test_vm_fields();
    test_old_report_compat();
    test_vm_errors();
    test_diff_api();
    rmdir(dir);
    return failures ? 1 : 0;
}
