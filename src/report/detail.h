/* detail.h — the allocation sites of a detail-mode report as the CLI shows
 * them (report_detail.c): `memtrail report detail` (sites grouped, sorted,
 * symbolized, as text or JSON) and the sites part of `memtrail diff` on two
 * detail reports (sites matched by symbolized stack). docs/cli.md has the
 * text layout, docs/json.md the JSON documents.
 *
 * CLI-side code: allocates freely. Functions return 0, -ENOMEM or -EIO. */
#ifndef MT_DETAIL_H
#define MT_DETAIL_H

#include <stdbool.h>
#include <stdio.h>

#include "report/report.h"
#include "symbol/symbol.h"

/* A symbolizer over r's modules (which it copies), the modules its sites'
 * frames lie in opened already (sym_prepare: its warnings complete). NULL
 * on out-of-memory. */
struct symbolizer *detail_symbolizer(const struct report *r);

struct detail_options {
    int depth;      /* frames per site shown, and sites merged whose first `depth` frames
                       (and category) are equal; 0: every recorded frame */
    int top;        /* sites shown; 0: all */
    bool by_allocs; /* --sort allocated: by allocated bytes (by allocation count when a site of
                       the report lacks allocated_bytes), not live bytes */
};

/* The summary (report_print_text), then the sites. */
int detail_print_text(FILE *out, const struct report *r, struct symbolizer *s, const struct detail_options *o,
                      const struct report_scale *scale);
/* The summary's JSON document (report_print_json) with "stack_depth",
 * "unwinder", "sites_dropped", "sites_total", "sorted_by",
 * "symbol_warnings" and "sites" added. */
int detail_print_json(FILE *out, const struct report *r, struct symbolizer *s,
                      const struct detail_options *o);

/* The sites that grew, shrank, appeared or went between two detail
 * reports, matched by symbolized stack (function names and module file
 * names; module+offset where no name is known) and category, largest
 * change of live bytes first. The text follows the category diff; the JSON
 * variant takes the category diff's document (report_diff_print_json) and
 * adds "sites". */
int detail_diff_print_text(FILE *out, const struct report *base, const struct report *cur,
                           struct symbolizer *sb, struct symbolizer *sc, const struct detail_options *o,
                           const struct report_scale *scale);
int detail_diff_print_json(FILE *out, const struct report *base, const struct report *cur,
                           struct symbolizer *sb, struct symbolizer *sc, const struct detail_options *o);

/* A stack's "frames" array: each recorded return address symbolized
 * (inlined calls first), as {function, file, line, module, address,
 * offset, inlined}; with no symbolizer (s NULL), the address alone. The
 * one frame writer of detail, diff and analyze output. */
struct mt_json;
void detail_json_frames(struct mt_json *j, struct symbolizer *s, const uint64_t *frames, size_t n);

#endif
