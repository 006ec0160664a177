/* report_print.h — the reference-set report as text and as JSON
 * (report_print.c; docs/refset-report.md, docs/json.md). */
#ifndef MT_REFSET_REPORT_PRINT_H
#define MT_REFSET_REPORT_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "refset/report_model.h"

enum rs_by { RS_BY_PROCESS, RS_BY_CATEGORY, RS_BY_CLASS, RS_BY_STACK };

struct rs_print {
    const char *file;
    enum rs_by by;
    int top;          /* stacks per list (0: all) */
    bool complete;    /* the recording ended properly */
    const char *stop; /* where reading stopped, or NULL */
};

extern const char *const rs_category_names[RS_NCATEGORIES];
extern const char *const rs_class_names[2];

/* 0, -ENOMEM or -EIO. */
int rs_print_text(FILE *out, const struct rs_model *m, const struct rs_view *v, const struct rs_print *p);
int rs_print_json(FILE *out, const struct rs_model *m, const struct rs_view *v, const struct rs_print *p);

/* "page_data": the page references and the system view's spans grouped by
 * process, category and times, with page counts, from which any viewport's
 * figures follow (report_pages.c); null arrays past 200000 groups.
 * 0 or -ENOMEM. */
struct mt_json;
int rs_print_page_data(struct mt_json *j, const struct rs_model *m);

#endif
