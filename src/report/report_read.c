/* report_read.c — the .mtr reader: turns a report file
 * (docs/report-format.md) into a struct report, strictly: the header, the
 * lines (bounded in length), the summary's lines here, detail mode's in
 * report_read_detail.c. Every problem is one message naming the file and
 * the line; a file cut short keeps every line read before the cut. Unknown
 * keys and fields are ignored, as the format asks, so newer writers stay
 * readable. Memory info and span lines are read in report_read_info.c.
 * Duplicates are found through hash indexes (report_index.c):
 * reading is linear in the file's size. */
#include "report/report_read_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int report_rd_fail(struct reader *rd, int code, const char *fmt, ...)
{
    if (rd->err && rd->errlen) {
        int n = rd->lineno > 0 ? snprintf(rd->err, rd->errlen, "%s: line %ld: ", rd->name, rd->lineno)
                               : snprintf(rd->err, rd->errlen, "%s: ", rd->name);
        if (n >= 0 && (size_t)n < rd->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(rd->err + n, rd->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

const char *report_rd_shown(const char *s, char buf[48])
{
    size_t i = 0;
    for (; i < 40 && s[i]; i++)
        buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (s[i]) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

int report_parse_i64(const char *s, int64_t *out)
{
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    if (*s == '\0')
        return -EINVAL;
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t acc = 0;
    bool overflow = false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (acc > (limit - d) / 10)
            overflow = true; /* keep scanning: "99999999999999999999x" is not an integer at all */
        else
            acc = acc * 10 + d;
    }
    if (overflow)
        return -ERANGE;
    if (neg)
        *out = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    else
        *out = (int64_t)acc;
    return 0;
}

int report_rd_int(struct reader *rd, const char *what, const char *value, int64_t *out)
{
    char buf[48];
    int rc = report_parse_i64(value, out);
    if (rc == -ERANGE)
        return report_rd_fail(rd, -ERANGE, "value '%s' for %s does not fit in a signed 64-bit integer",
                              report_rd_shown(value, buf), what);
    if (rc < 0)
        return report_rd_fail(rd, -EBADMSG, "bad value '%s' for %s (expected an integer)",
                              report_rd_shown(value, buf), what);
    return 0;
}

int report_rd_string(struct reader *rd, char **dst, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    free(*dst);
    *dst = copy;
    return 0;
}

int report_rd_unescape_word(struct reader *rd, char *s, const char *lone_name, const char *bad_name)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        if (p[1] == 's')
            *o++ = ' ';
        else if (p[1] == 'n')
            *o++ = '\n';
        else if (p[1] == '\\')
            *o++ = '\\';
        else {
            char c = p[1];
            *o = '\0';
            if (c == '\0')
                return report_rd_fail(rd, -EBADMSG, "%s ends in a lone backslash", lone_name);
            return report_rd_fail(rd, -EBADMSG, "bad escape '\\%c' in %s (expected \\s, \\n or \\\\)",
                                  c >= 0x20 && c < 0x7f ? c : '?', bad_name);
        }
        p++;
    }
    *o = '\0';
    return 0;
}

/* Split the cmdline value on single spaces and undo \s, \n and \\. */
static int parse_cmdline(struct reader *rd, struct report *r, const char *value)
{
    if (*value == '\0')
        return 0;
    size_t n = 1;
    for (const char *p = value; *p; p++)
        n += *p == ' ';
    r->argv = calloc(n, sizeof *r->argv);
    if (!r->argv)
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    const char *p = value;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(p, " ");
        char *arg = malloc(len + 1);
        if (!arg)
            return report_rd_fail(rd, -ENOMEM, "out of memory");
        r->argv[r->argc++] = arg;
        memcpy(arg, p, len);
        arg[len] = '\0';
        char lone[48];
        snprintf(lone, sizeof lone, "cmdline argument %zu", i + 1);
        int rc =
            report_rd_unescape_word(rd, arg, lone, "cmdline"); /* on error r keeps it as far as it was good */
        if (rc < 0)
            return rc;
        p += len + (p[len] == ' ');
    }
    return 0;
}

/* Fields of the category and total lines (struct report_counts). */
#define COUNT_FIELD(f, req)                                                                                  \
    {                                                                                                        \
#f, offsetof(struct report_counts, f), req                                                           \
    }
static const struct field count_fields[] = {
    COUNT_FIELD(live_bytes, true), COUNT_FIELD(live_count, true), COUNT_FIELD(peak_bytes, true),
    COUNT_FIELD(allocs, true),     COUNT_FIELD(frees, true),      COUNT_FIELD(reallocs, false),
};
/* Fields of a category line: the counters, then the virtual memory fields
 * (optional, for reports written before them, but all four or none). */
#define CAT_COUNT(f)                                                                                         \
    {                                                                                                        \
#f, offsetof(struct report_category, n) + offsetof(struct report_counts, f), true                    \
    }
#define CAT_VM(f)                                                                                            \
    {                                                                                                        \
#f, offsetof(struct report_category, vm) + offsetof(struct report_vm, f), false                      \
    }
static const struct field category_fields[] = {
    CAT_COUNT(live_bytes),
    CAT_COUNT(live_count),
    CAT_COUNT(peak_bytes),
    CAT_COUNT(allocs),
    CAT_COUNT(frees),
    {"reallocs", offsetof(struct report_category, n) + offsetof(struct report_counts, reallocs), false},
    CAT_VM(reserved),
    CAT_VM(committed),
    CAT_VM(resident),
    CAT_VM(mappings),
};
#define CAT_VM_FIRST 6 /* index of reserved in category_fields */
#define CAT_VM_BITS (0xfu << CAT_VM_FIRST)
#define PROC_FIELD(f)                                                                                        \
    {                                                                                                        \
#f, offsetof(struct report_process, f), true                                                         \
    }
static const struct field process_fields[] = {
    PROC_FIELD(rss_bytes), PROC_FIELD(peak_rss_bytes), PROC_FIELD(reserved),
    PROC_FIELD(committed), PROC_FIELD(resident),
};
#define ERR_FIELD(f)                                                                                         \
    {                                                                                                        \
#f, offsetof(struct report_errors, f), true                                                          \
    }
static const struct field error_fields[] = {
    ERR_FIELD(double_free),
    ERR_FIELD(bad_canary),
    ERR_FIELD(foreign_free),
};

int report_rd_fields(struct reader *rd, const char *line_key, char *s, const struct field *tab, size_t ntab,
                     void *base, char **kind, unsigned *seen_out)
{
    char buf[48];
    unsigned seen = 0;
    bool kind_seen = false;
    while (*s) {
        char *tok = s;
        char *sp = strchr(s, ' ');
        if (sp) {
            *sp = '\0';
            s = sp + 1;
        } else {
            s += strlen(s);
        }
        if (*tok == '\0')
            return report_rd_fail(rd, -EBADMSG, "empty field in %s line (two spaces in a row?)", line_key);
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return report_rd_fail(rd, -EBADMSG, "bad field '%s' in %s line (expected name=value)",
                                  report_rd_shown(tok, buf), line_key);
        *eq = '\0';
        const char *value = eq + 1;
        if (kind && strcmp(tok, "kind") == 0) {
            if (kind_seen)
                return report_rd_fail(rd, -EBADMSG, "field kind given twice");
            if (*value == '\0')
                return report_rd_fail(rd, -EBADMSG, "empty value for kind");
            kind_seen = true;
            int rc = report_rd_string(rd, kind, value);
            if (rc < 0)
                return rc;
            continue;
        }
        size_t i = 0;
        while (i < ntab && strcmp(tab[i].name, tok) != 0)
            i++;
        if (i == ntab)
            continue; /* unknown field: a newer writer's; ignored */
        if (seen & (1u << i))
            return report_rd_fail(rd, -EBADMSG, "field %s given twice", tok);
        seen |= 1u << i;
        int rc = report_rd_int(rd, tok, value, (int64_t *)(void *)((char *)base + tab[i].offset));
        if (rc < 0)
            return rc;
    }
    if (kind && !kind_seen)
        return report_rd_fail(rd, -EBADMSG, "%s line lacks field kind", line_key);
    for (size_t i = 0; i < ntab; i++)
        if (tab[i].required && !(seen & (1u << i)))
            return report_rd_fail(rd, -EBADMSG, "%s line lacks field %s", line_key, tab[i].name);
    if (seen_out)
        *seen_out = seen;
    return 0;
}

static int parse_category(struct reader *rd, struct report *r, char *value)
{
    char buf[48];
    char *fields = strchr(value, ' ');
    if (fields)
        *fields++ = '\0';
    else
        fields = value + strlen(value);
    if (*value == '\0')
        return report_rd_fail(rd, -EBADMSG, "category line without a name");
    if (strchr(value, '='))
        return report_rd_fail(rd, -EBADMSG, "category line without a name (found '%s')",
                              report_rd_shown(value, buf));
    uint64_t hash = report_hash_str(value);
    for (size_t pos = 0, i; (i = report_index_next(&rd->categories, hash, &pos)) != SIZE_MAX;)
        if (strcmp(r->categories[i].name, value) == 0)
            return report_rd_fail(rd, -EBADMSG, "duplicate category '%s'", report_rd_shown(value, buf));

    struct report_category c = {0};
    char line_key[80];
    snprintf(line_key, sizeof line_key, "category '%s'", report_rd_shown(value, buf));
    unsigned seen = 0;
    int rc =
        report_rd_fields(rd, line_key, fields, category_fields, NFIELDS(category_fields), &c, &c.kind, &seen);
    if (rc == 0 && (seen & CAT_VM_BITS) && (seen & CAT_VM_BITS) != CAT_VM_BITS) {
        /* A writer that knows the VM fields writes all four. */
        size_t i = CAT_VM_FIRST;
        while (seen & (1u << i))
            i++;
        rc = report_rd_fail(rd, -EBADMSG, "%s line lacks field %s (it has other virtual memory fields)",
                            line_key, category_fields[i].name);
    }
    c.has_vm = (seen & CAT_VM_BITS) != 0;
    if (rc == 0 && !(c.name = strdup(value)))
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    if (rc == 0 && (report_grow(&r->categories, &rd->categories_cap, r->ncategories + 1, sizeof c, 16) < 0 ||
                    report_index_add(&rd->categories, hash, r->ncategories) < 0))
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    if (rc == 0) {
        r->categories[r->ncategories++] = c;
        if (c.has_vm)
            r->has |= REPORT_HAS_VM;
        return 0;
    }
    free(c.name);
    free(c.kind);
    return rc;
}

/* The single-valued lines: key, its REPORT_HAS_ bit, where it goes. */
enum value_type { V_INT, V_STRING };
struct single {
    const char *key;
    unsigned bit;
    enum value_type type;
    size_t offset;
};
static const struct single singles[] = {
    {"pid", REPORT_HAS_PID, V_INT, offsetof(struct report, pid)},
    {"ppid", REPORT_HAS_PPID, V_INT, offsetof(struct report, ppid)},
    {"exe", REPORT_HAS_EXE, V_STRING, offsetof(struct report, exe)},
    {"mode", REPORT_HAS_MODE, V_STRING, offsetof(struct report, mode)},
    {"start_ns", REPORT_HAS_START, V_INT, offsetof(struct report, start_ns)},
    {"end_ns", REPORT_HAS_END_NS, V_INT, offsetof(struct report, end_ns)},
    {"reason", REPORT_HAS_REASON, V_STRING, offsetof(struct report, reason)},
};

/* One line after the header. Returns 1 for the end marker. */
static int parse_line(struct reader *rd, struct report *r, char *line)
{
    if (*line == '\0')
        return report_rd_fail(rd, -EBADMSG, "empty line");
    char *value = strchr(line, ' ');
    if (value)
        *value++ = '\0';
    else
        value = line + strlen(line);
    const char *key = line;

    if (strcmp(key, "end") == 0)
        return 1;
    for (size_t i = 0; i < sizeof singles / sizeof singles[0]; i++) {
        const struct single *s = &singles[i];
        if (strcmp(key, s->key) != 0)
            continue;
        if (r->has & s->bit)
            return report_rd_fail(rd, -EBADMSG, "duplicate %s line", key);
        void *dst = (char *)r + s->offset;
        int rc = s->type == V_INT ? report_rd_int(rd, key, value, dst) : report_rd_string(rd, dst, value);
        if (rc == 0)
            r->has |= s->bit;
        return rc;
    }
    if (strcmp(key, "cmdline") == 0) {
        if (r->has & REPORT_HAS_CMDLINE)
            return report_rd_fail(rd, -EBADMSG, "duplicate cmdline line");
        r->has |= REPORT_HAS_CMDLINE;
        return parse_cmdline(rd, r, value);
    }
    if (strcmp(key, "category") == 0)
        return parse_category(rd, r, value);
    if (strcmp(key, "total") == 0 || strcmp(key, "errors") == 0) {
        bool total = key[0] == 't';
        unsigned bit = total ? REPORT_HAS_TOTAL : REPORT_HAS_ERRORS;
        if (r->has & bit)
            return report_rd_fail(rd, -EBADMSG, "duplicate %s line", key);
        struct report_counts t = {0};
        struct report_errors e = {0};
        int rc = total
                     ? report_rd_fields(rd, key, value, count_fields, NFIELDS(count_fields), &t, NULL, NULL)
                     : report_rd_fields(rd, key, value, error_fields, NFIELDS(error_fields), &e, NULL, NULL);
        if (rc < 0)
            return rc;
        if (total)
            r->total = t;
        else
            r->errors = e;
        r->has |= bit;
        return 0;
    }
    if (strcmp(key, "process") == 0) {
        if (r->has & REPORT_HAS_PROCESS)
            return report_rd_fail(rd, -EBADMSG, "duplicate process line");
        struct report_process p = {0};
        int rc = report_rd_fields(rd, key, value, process_fields, NFIELDS(process_fields), &p, NULL, NULL);
        if (rc < 0)
            return rc;
        r->process = p;
        r->has |= REPORT_HAS_PROCESS;
        return 0;
    }
    bool handled;
    int rc = report_rd_info_line(rd, r, key, value, &handled);
    if (handled)
        return rc;
    rc = report_rd_detail_line(rd, r, key, value, &handled);
    if (handled)
        return rc;
    return 0; /* unknown key: a newer writer's; ignored */
}

static int parse_header(struct reader *rd, const char *line)
{
    static const char magic[] = "memtrail-report ";
    const char *v = line + sizeof magic - 1;
    int64_t version = 0;
    if (strncmp(line, magic, sizeof magic - 1) != 0 || *v == '-')
        return report_rd_fail(rd, -EINVAL, "not a memtrail report (bad header)");
    int rc = report_parse_i64(v, &version);
    if (rc == -EINVAL || (rc == 0 && version < 1))
        return report_rd_fail(rd, -EINVAL, "not a memtrail report (bad header)");
    if (rc == -ERANGE || version > REPORT_FORMAT_VERSION)
        return report_rd_fail(rd, -ENOTSUP,
                              "report format version %s is newer than this memtrail reads (version %d); "
                              "use a newer memtrail",
                              v, REPORT_FORMAT_VERSION);
    return 0;
}

/* The longest line a writer produces is far shorter (a site line of 1024
 * frames is 20 KB): a longer one is not a report, and is not buffered
 * whole (an endless stream without newlines must not take all memory). */
#define LINE_MAX_BYTES (1u << 20)

/* The next line into *buf (without its newline, NUL-terminated): its
 * length, or -1 at the end of the input, -2 for a line too long. *cut is
 * set when the line ended at the end of the input, not at a newline. */
static ssize_t next_line(FILE *f, char **buf, size_t *cap, bool *cut)
{
    size_t n = 0;
    int c;
    *cut = false;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (n + 2 > *cap) {
            if (n >= LINE_MAX_BYTES)
                return -2;
            size_t want = *cap ? 2 * *cap : 256;
            char *grown = realloc(*buf, want);
            if (!grown) {
                errno = ENOMEM;
                return -3;
            }
            *buf = grown;
            *cap = want;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0)
        return -1;
    if (!*buf && !(*buf = malloc(*cap = 256))) {
        errno = ENOMEM;
        return -3;
    }
    (*buf)[n] = '\0';
    *cut = c == EOF;
    return (ssize_t)n;
}

static int read_lines(struct reader *rd, FILE *f, struct report *r)
{
    /* Line 1, read with a bound so that a large file that is not a report
     * (no newline for megabytes) is rejected without reading it all. */
    char head[64];
    size_t hl = 0;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (hl == sizeof head - 1 || c == '\0') {
            hl = sizeof head; /* too long or binary: not our header */
            break;
        }
        head[hl++] = (char)c;
    }
    if (ferror(f)) {
        int e = errno ? errno : EIO;
        return report_rd_fail(rd, -e, "read error: %s", strerror(e));
    }
    if (hl == 0 && c == EOF)
        return report_rd_fail(rd, -EINVAL, "empty file (not a memtrail report)");
    if (hl == sizeof head)
        return report_rd_fail(rd, -EINVAL, "not a memtrail report (bad header)");
    head[hl] = '\0';
    int rc = parse_header(rd, head); /* lineno 0: "bad header" is about the file */
    if (rc < 0)
        return rc;
    rd->lineno = r->lines_read = 1; /* a whole header without its newline is still a header */

    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool cut;
    long cut_line = 0; /* a last line without newline: the writer stopped mid-line */
    while ((n = next_line(f, &line, &cap, &cut)) >= 0 || n == -2) {
        rd->lineno++;
        if (n == -2) {
            rc =
                report_rd_fail(rd, -EBADMSG, "line longer than %u bytes (not a report line)", LINE_MAX_BYTES);
            break;
        }
        if (r->complete) {
            rc = report_rd_fail(rd, -EBADMSG, "data after the end marker");
            break;
        }
        if (cut)
            cut_line = rd->lineno;
        if (memchr(line, '\0', (size_t)n)) {
            rc = report_rd_fail(rd, -EBADMSG, "NUL byte in line");
            break;
        }
        if (cut_line && strcmp(line, "end") != 0)
            break; /* a partial line is not trusted; reported as truncation below */
        cut_line = 0;
        rc = parse_line(rd, r, line);
        if (rc < 0)
            break;
        r->lines_read = rd->lineno;
        if (rc == 1) {
            r->complete = true;
            rc = 0;
        }
    }
    if (n == -3 && rc == 0)
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    int read_errno = ferror(f) ? (errno ? errno : EIO) : 0;
    free(line);
    if (rc < 0)
        return rc;
    rd->lineno = 0;
    if (read_errno)
        return report_rd_fail(rd, -read_errno, "read error: %s", strerror(read_errno));
    if (!r->complete) {
        if (cut_line)
            return report_rd_fail(rd, -ENODATA,
                                  "truncated after line %ld (line %ld cut short, no end marker)",
                                  r->lines_read, cut_line);
        return report_rd_fail(rd, -ENODATA, "truncated after line %ld (no end marker)", r->lines_read);
    }
    if (!(r->has & REPORT_HAS_PID))
        return report_rd_fail(rd, -EBADMSG, "no pid line");
    if (!(r->has & REPORT_HAS_TOTAL))
        return report_rd_fail(rd, -EBADMSG, "no total line");
    if ((r->has & REPORT_HAS_SITES) && !rd->sites_seen)
        return report_rd_fail(rd, -EBADMSG, "no sites line (the stack_depth line says detail mode)");
    /* A sampled report's sites are estimates at its rate: without the rate
     * they cannot be read as what they are. (A summary-only report of a
     * sample-mode process, a live query's, has no sites and needs none.) */
    bool mode_sample = r->mode && strcmp(r->mode, "sample") == 0;
    if (mode_sample && (r->has & REPORT_HAS_SITES) && !(r->has & REPORT_HAS_SAMPLE_RATE))
        return report_rd_fail(rd, -EBADMSG, "no sample_rate line (the mode line says sample)");
    if (!mode_sample && (r->has & REPORT_HAS_SAMPLE_RATE))
        return report_rd_fail(rd, -EBADMSG,
                              "a sample_rate line in a report of mode %s (expected mode sample)",
                              r->mode ? r->mode : "unknown");
    if (r->nspans && !rd->spans_seen)
        return report_rd_fail(rd, -EBADMSG, "no spans line after the span_name lines");
    return 0;
}

int report_read_stream(FILE *f, const char *name, struct report *r, char *err, size_t errlen)
{
    struct reader rd = {.name = name, .err = err, .errlen = errlen};
    memset(r, 0, sizeof *r);
    if (err && errlen)
        err[0] = '\0';
    int rc = read_lines(&rd, f, r);
    report_index_free(&rd.categories);
    report_index_free(&rd.sites);
    report_index_free(&rd.modules);
    report_index_free(&rd.spans);
    free(rd.span_caps);
    return rc;
}

int report_read(const char *path, struct report *r, char *err, size_t errlen)
{
    struct report_input in;
    memset(r, 0, sizeof *r);
    int rc = report_input_open(path, &in, err, errlen);
    if (rc < 0)
        return rc;
    rc = report_read_input(&in, r, err, errlen);
    report_input_close(&in);
    return rc;
}

void report_free(struct report *r)
{
    free(r->exe);
    free(r->mode);
    free(r->reason);
    for (size_t i = 0; i < r->argc; i++)
        free(r->argv[i]);
    free(r->argv);
    for (size_t i = 0; i < r->ncategories; i++) {
        free(r->categories[i].name);
        free(r->categories[i].kind);
    }
    free(r->categories);
    free(r->unwinder);
    for (size_t i = 0; i < r->nmodules; i++) {
        free(r->modules[i].buildid);
        free(r->modules[i].path);
    }
    free(r->modules);
    for (size_t i = 0; i < r->nsites; i++) {
        free(r->sites[i].category);
        free(r->sites[i].frames);
    }
    free(r->sites);
    for (size_t i = 0; i < r->ncaveats; i++)
        free(r->caveats[i]);
    free(r->caveats);
    report_info_free(r);
    memset(r, 0, sizeof *r);
}

bool report_is_sampled(const struct report *r)
{
    return (r->has & REPORT_HAS_SAMPLE_RATE) && r->sample_rate > 0;
}

bool report_sites_have_allocated(const struct report *r)
{
    for (size_t i = 0; i < r->nsites; i++)
        if (!r->sites[i].has_allocated)
            return false;
    return true;
}
