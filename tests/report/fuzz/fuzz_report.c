/* fuzz_report.c — the libFuzzer target of the .mtr report reader
 * (report_read.c, report_read_detail.c) and of everything that shows what
 * it read: the summary as text and JSON, the diff of the report with
 * itself, the process tree, and for a detail report the sites (text and
 * JSON, merged by a depth the input picks), their diff, and the folded and
 * pprof exports; and memtrail info's text and JSON. Any bytes: the reader
 * must never crash, hang or leak, its error must be one line naming the
 * file, and every printer must take
 * whatever the reader returns (complete, cut short, or stopped at a bad
 * line) without undefined behaviour (UBSan: extreme values of every
 * field).
 *
 * Module paths are replaced by a path that does not exist before the
 * symbolizer opens them: the target is memtrail's code, not libdw's, and a
 * mutated path must not make it open files of the machine.
 *
 * `make fuzz` builds it as build/fuzz/fuzz_report and runs it;
 * tests/report/fuzz/test_corpus.c replays tests/report/fuzz/corpus/ under
 * gcc's ASan+UBSan in `make check`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/export.h"
#include "report/detail.h"
#include "report/info.h"
#include "report/report.h"
#include "symbol/symbol.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *sink(void)
{
    static FILE *f;
    if (!f)
        f = fopen("/dev/null", "w");
    FUZZ_CHECK(f != NULL);
    return f;
}

static void show_details(FILE *out, struct report *r, size_t size)
{
    for (size_t i = 0; i < r->nmodules; i++) {
        free(r->modules[i].path);
        r->modules[i].path = strdup("/nonexistent/memtrail-fuzz-module");
        FUZZ_CHECK(r->modules[i].path != NULL);
    }
    struct symbolizer *s = detail_symbolizer(r);
    if (!s)
        return;
    struct report_scale kb;
    report_scale_parse("KB", &kb);
    struct detail_options o = {.depth = (int)(size % 5), .top = (int)(size % 3), .by_allocs = size & 1};
    detail_print_text(out, r, s, &o, &kb);
    detail_print_json(out, r, s, &o);
    detail_diff_print_text(out, r, r, s, s, &o, &kb);
    detail_diff_print_json(out, r, r, s, s, &o);
    export_folded(out, r, s, (enum export_value)(size % 7));
    static const enum export_value types[] = {EXPORT_LIVE_BYTES, EXPORT_LIVE_COUNT, EXPORT_ALLOCS,
                                              EXPORT_ALLOCATED_BYTES};
    export_pprof(out, r, s, types[size % 4], "fuzz");
    sym_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* fmemopen wants a buffer of at least one byte; an empty input is an
     * empty stream all the same. */
    static const uint8_t none[1];
    FILE *in = fmemopen((void *)(size ? data : none), size ? size : 1, "r");
    FUZZ_CHECK(in != NULL);
    if (!size)
        fgetc(in);
    struct report r;
    char err[REPORT_ERR_MAX] = "";
    int rc = report_read_stream(in, "fuzz", &r, err, sizeof err);
    fclose(in);
    /* The error: one line, naming the file. */
    FUZZ_CHECK(rc == 0 || (strncmp(err, "fuzz: ", 6) == 0 && !strchr(err, '\n')));
    FUZZ_CHECK(rc != 0 || r.complete);

    FILE *out = sink();
    struct report_scale kb, gb;
    report_scale_parse("KB", &kb);
    report_scale_parse("GB", &gb);
    report_print_text(out, &r, (size & 2) ? &gb : &kb);
    report_print_json(out, &r);
    /* memtrail info: every kind or one, the default bands or others */
    struct info_options io;
    info_options_default(&io);
    io.kind = (int)(size % 7) - 1;
    if (size & 4)
        info_parse_percentiles("0.000001,10,99.999999", &io);
    info_print_text(out, &r, &io);
    info_print_json(out, &r, &io);
    report_diff_print_text(out, &r, &r, &kb);
    report_diff_print_json(out, &r, &r);
    struct report two[2] = {r, r};
    const char *files[2] = {"fuzz", "fuzz"};
    report_tree_print_text(out, two, files, 2, &gb);
    report_tree_print_json(out, two, files, 2);
    if (r.has & REPORT_HAS_SITES)
        show_details(out, &r, size);
    report_free(&r);
    return 0;
}
