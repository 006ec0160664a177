/* metrics.h — summary reports as Prometheus's text exposition format
 * (version 0.0.4; report_metrics.c): `memtrail query PID metrics` and the
 * `/metrics` page of `memtrail exporter`. Every metric and its labels are
 * in docs/metrics.md.
 *
 * Metric families come one after the other, each with its HELP and TYPE
 * lines and then the samples of every report given: the format wants all
 * the samples of a family together. Every sample carries the labels pid
 * and program (the report's pid and the file name of its executable), so
 * a series is the same whether one process or many are printed.
 *
 * CLI-side code: allocates freely. Functions return 0, -ENOMEM or -EIO. */
#ifndef MT_METRICS_H
#define MT_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report/report.h"

/* The `le` bounds of the span histograms, in ns: 1, 2 and 5 x 10^k from
 * 1 us to 100 s (always bucket bounds of the report's span histograms,
 * docs/report-format.md), then +Inf. */
#define METRICS_SPAN_BOUNDS 25
extern const int64_t metrics_span_bounds_ns[METRICS_SPAN_BOUNDS];

/* The exposition of reports[0..n), family by family (a family with no
 * sample is left out). n may be 0: nothing is printed. */
int metrics_print(FILE *out, const struct report *const *reports, size_t n);

/* The program label of r: the file name of its executable, else of its
 * argv[0], else "". Points into r. */
const char *metrics_program(const struct report *r);

/* A label value as the format writes it between quotes: '\\', '"' and
 * newline escaped, and bytes that are not UTF-8 replaced by U+FFFD. */
void metrics_put_label_value(FILE *out, const char *s);

/* ns as seconds, exactly: "1.5", "0.000001", "-2". */
void metrics_put_seconds(FILE *out, int64_t ns);

#endif /* MT_METRICS_H */
