/* report_read_int.h — what the .mtr reader's two files share: the
 * reader's state (report_read.c reads the file and the summary lines,
 * report_read_detail.c the detail-mode lines), its error line, and the
 * parser of "name=value" fields. Not part of the module's interface. */
#ifndef MT_REPORT_READ_INT_H
#define MT_REPORT_READ_INT_H

#include "report/report.h"

#include <stdbool.h>
#include <stddef.h>

struct reader {
    const char *name; /* the file, as the user named it */
    long lineno;
    char *err;
    size_t errlen;
    bool sites_seen; /* detail mode: the sites line was read */
    /* Duplicate checks in O(1) per line (by name or ID; report_index.c). */
    struct report_index categories, sites, modules;
    size_t categories_cap, sites_cap, modules_cap; /* the arrays' room (report_grow) */
    /* Memory info and spans (report_read_info.c). */
    bool spans_seen; /* the spans line was read */
    struct report_index spans;
    size_t infos_cap, spans_cap, span_caps_cap;
    size_t (*span_caps)[2]; /* per span: the room of its buckets and of its memory buckets */
};

/* "NAME: line N: what" (or "NAME: what" when lineno is 0) into rd's
 * buffer; returns code. */
int report_rd_fail(struct reader *rd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Undoes a free-text word's escapes in place (\s, \n, \\: the cmdline
 * rule of docs/report-format.md), keeping what was good on an error:
 * "LONE_NAME ends in a lone backslash", "bad escape '\x' in BAD_NAME". */
int report_rd_unescape_word(struct reader *rd, char *s, const char *lone_name, const char *bad_name);

/* A value as it may appear inside '...' in a message: at most 40 bytes,
 * non-printable bytes shown as '?', so a binary file cannot garble the
 * terminal. */
const char *report_rd_shown(const char *s, char buf[48]);

/* A strict decimal int64 field; the error names `what`. */
int report_rd_int(struct reader *rd, const char *what, const char *value, int64_t *out);

/* *dst = a copy of value (the old one freed). */
int report_rd_string(struct reader *rd, char **dst, const char *value);

/* One known integer field of a line. */
struct field {
    const char *name;
    size_t offset;
    bool required;
};
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* Parse "a=1 b=2 ..." (modified in place) into `base` through `tab`.
 * `kind`, when not NULL, receives the string field kind=. `seen_out`, when
 * not NULL, receives one bit per entry of `tab` that was present. */
int report_rd_fields(struct reader *rd, const char *line_key, char *s, const struct field *tab, size_t ntab,
                     void *base, char **kind, unsigned *seen_out);

/* A detail-mode line (stack_depth, unwinder, module, site, sites);
 * *handled is false when `key` is none of them. */
int report_rd_detail_line(struct reader *rd, struct report *r, const char *key, char *value, bool *handled);

/* A memory info or span line (memory_time, info, span_name, span,
 * span_memory, spans); *handled is false when `key` is none of them. */
int report_rd_info_line(struct reader *rd, struct report *r, const char *key, char *value, bool *handled);

/* Frees what those lines put into r. */
void report_info_free(struct report *r);

#endif
