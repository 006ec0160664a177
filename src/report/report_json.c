/* report_json.c — the summary report as JSON (`memtrail report --json`,
 * `memtrail query PID --json`): the document's keys, which the detail
 * document (report_detail.c) extends. Keys, types and units: docs/json.md,
 * docs/schema/report.schema.json. */
#include "report/report.h"

#include "common/json_out.h"

void report_json_cmdline(mt_json *j, const struct report *r)
{
    if (!(r->has & REPORT_HAS_CMDLINE)) {
        mt_json_null(j);
        return;
    }
    mt_json_oneline(j);
    mt_json_array_begin(j);
    for (size_t i = 0; i < r->argc; i++)
        mt_json_str(j, r->argv[i]);
    mt_json_array_end(j);
}

void report_json_counts(mt_json *j, const struct report_counts *c)
{
    mt_json_ki64(j, "live_bytes", c->live_bytes);
    mt_json_ki64(j, "live_count", c->live_count);
    mt_json_ki64(j, "peak_bytes", c->peak_bytes);
    mt_json_ki64(j, "allocs", c->allocs);
    mt_json_ki64(j, "frees", c->frees);
    mt_json_ki64(j, "reallocs", c->reallocs);
}

static void category(mt_json *j, const struct report_category *c)
{
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_kstr(j, "name", c->name);
    mt_json_kstr(j, "kind", c->kind);
    report_json_counts(j, &c->n);
    if (c->has_vm) {
        mt_json_ki64(j, "reserved_bytes", c->vm.reserved);
        mt_json_ki64(j, "committed_bytes", c->vm.committed);
        mt_json_ki64(j, "resident_bytes", c->vm.resident);
        mt_json_ki64(j, "mappings", c->vm.mappings);
    } else {
        /* a report written before the VM fields existed: a heap category
         * reserves and commits what it holds */
        mt_json_ki64(j, "reserved_bytes", c->n.live_bytes);
        mt_json_ki64(j, "committed_bytes", c->n.live_bytes);
        mt_json_knull(j, "resident_bytes");
        mt_json_knull(j, "mappings");
    }
    mt_json_object_end(j);
}

void report_json_sampling(mt_json *j, const struct report *r)
{
    mt_json_key(j, "sampling");
    if (!report_is_sampled(r)) {
        mt_json_null(j);
        return;
    }
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_ki64(j, "rate_bytes", r->sample_rate);
    mt_json_object_end(j);
}

void report_json_summary(mt_json *j, const struct report *r)
{
    mt_json_ki64_or_null(j, "pid", r->has & REPORT_HAS_PID, r->pid);
    mt_json_ki64_or_null(j, "ppid", r->has & REPORT_HAS_PPID, r->ppid);
    mt_json_kstr(j, "exe", r->exe);
    mt_json_key(j, "cmdline");
    report_json_cmdline(j, r);
    mt_json_kstr(j, "mode", r->mode);
    report_json_sampling(j, r);
    mt_json_kstr(j, "reason", r->reason);
    mt_json_ki64_or_null(j, "start_ns", r->has & REPORT_HAS_START, r->start_ns);
    mt_json_ki64_or_null(j, "end_ns", r->has & REPORT_HAS_END_NS, r->end_ns);
    mt_json_kbool(j, "complete", r->complete);

    mt_json_key(j, "categories");
    mt_json_array_begin(j);
    for (size_t i = 0; i < r->ncategories; i++)
        category(j, &r->categories[i]);
    mt_json_array_end(j);

    mt_json_key(j, "total");
    if (r->has & REPORT_HAS_TOTAL) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        report_json_counts(j, &r->total);
        bool vm = r->has & REPORT_HAS_VM;
        struct report_vm sum;
        report_vm_total(r, &sum);
        mt_json_ki64_or_null(j, "reserved_bytes", vm, sum.reserved);
        mt_json_ki64_or_null(j, "committed_bytes", vm, sum.committed);
        mt_json_ki64_or_null(j, "resident_bytes", vm, sum.resident);
        mt_json_object_end(j);
    } else {
        mt_json_null(j);
    }

    mt_json_key(j, "process");
    if (r->has & REPORT_HAS_PROCESS) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_ki64(j, "rss_bytes", r->process.rss_bytes);
        mt_json_ki64(j, "peak_rss_bytes", r->process.peak_rss_bytes);
        mt_json_ki64(j, "reserved_bytes", r->process.reserved);
        mt_json_ki64(j, "committed_bytes", r->process.committed);
        mt_json_ki64(j, "resident_bytes", r->process.resident);
        mt_json_ki64(j, "explained_bytes", report_explained(r));
        mt_json_object_end(j);
    } else {
        mt_json_null(j);
    }

    mt_json_key(j, "errors");
    if (r->has & REPORT_HAS_ERRORS) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_ki64(j, "double_free", r->errors.double_free);
        mt_json_ki64(j, "bad_canary", r->errors.bad_canary);
        mt_json_ki64(j, "foreign_free", r->errors.foreign_free);
        mt_json_object_end(j);
    } else {
        mt_json_null(j);
    }
}

int report_print_json(FILE *out, const struct report *r)
{
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    report_json_summary(&j, r);
    return mt_json_document_end(&j);
}
