/* report_read.c — the .mtr reader: turns a summary report file
 * (docs/report-format.md) into a struct report, strictly. Every problem is
 * one message naming the file and the line; a file cut short keeps every
 * line read before the cut. Unknown keys and fields are ignored, as the
 * format asks, so newer writers stay readable. */
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct reader {
    const char *name;       /* the file, as the user named it */
    long lineno;
    char *err;
    size_t errlen;
    bool sites_seen;        /* detail mode: the sites line was read */
};

static int fail(struct reader *rd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "NAME: line N: what" (or "NAME: what" when lineno is 0). */
static int fail(struct reader *rd, int code, const char *fmt, ...)
{
    if (rd->err && rd->errlen) {
        int n = rd->lineno > 0
            ? snprintf(rd->err, rd->errlen, "%s: line %ld: ", rd->name, rd->lineno)
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

/* A value as it may appear inside '...' in a message: at most 40 bytes,
 * non-printable bytes shown as '?', so a binary file cannot garble the
 * terminal. */
static const char *shown(const char *s, char buf[48])
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
            overflow = true;    /* keep scanning: "99999999999999999999x" is not an integer at all */
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

static int parse_int(struct reader *rd, const char *what, const char *value, int64_t *out)
{
    char buf[48];
    int rc = report_parse_i64(value, out);
    if (rc == -ERANGE)
        return fail(rd, -ERANGE, "value '%s' for %s does not fit in a signed 64-bit integer",
                    shown(value, buf), what);
    if (rc < 0)
        return fail(rd, -EBADMSG, "bad value '%s' for %s (expected an integer)",
                    shown(value, buf), what);
    return 0;
}

static int set_string(struct reader *rd, char **dst, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return fail(rd, -ENOMEM, "out of memory");
    free(*dst);
    *dst = copy;
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
        return fail(rd, -ENOMEM, "out of memory");
    const char *p = value;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(p, " ");
        char *arg = malloc(len + 1), *o = arg;
        if (!arg)
            return fail(rd, -ENOMEM, "out of memory");
        r->argv[r->argc++] = arg;
        for (size_t j = 0; j < len; j++) {
            if (p[j] != '\\') {
                *o++ = p[j];
                continue;
            }
            char c = j + 1 < len ? p[j + 1] : '\0';
            if (c == 's')
                *o++ = ' ';
            else if (c == 'n')
                *o++ = '\n';
            else if (c == '\\')
                *o++ = '\\';
            else if (c == '\0')
                return fail(rd, -EBADMSG, "cmdline argument %zu ends in a lone backslash", i + 1);
            else
                return fail(rd, -EBADMSG, "bad escape '\\%c' in cmdline (expected \\s, \\n or \\\\)",
                            c >= 0x20 && c < 0x7f ? c : '?');
            j++;
        }
        *o = '\0';
        p += len + (p[len] == ' ');
    }
    return 0;
}

/* One known integer field of a category, total or errors line. */
struct field {
    const char *name;
    size_t offset;
    bool required;
};

/* Fields of the category and total lines (struct report_counts). */
#define COUNT_FIELD(f, req) { #f, offsetof(struct report_counts, f), req }
static const struct field count_fields[] = {
    COUNT_FIELD(live_bytes, true), COUNT_FIELD(live_count, true), COUNT_FIELD(peak_bytes, true),
    COUNT_FIELD(allocs, true),     COUNT_FIELD(frees, true),      COUNT_FIELD(reallocs, false),
};
/* Fields of a site line: the counters, then allocated_bytes (optional:
 * reports written before it lack it). */
#define SITE_COUNT(f, req) { #f, offsetof(struct report_site, n) + offsetof(struct report_counts, f), req }
static const struct field site_fields[] = {
    SITE_COUNT(live_bytes, true), SITE_COUNT(live_count, true), SITE_COUNT(peak_bytes, true),
    SITE_COUNT(allocs, true),     SITE_COUNT(frees, true),      SITE_COUNT(reallocs, false),
    { "allocated_bytes", offsetof(struct report_site, allocated_bytes), false },
};
#define SITE_ALLOCATED_BIT (1u << 6)  /* allocated_bytes' index in site_fields */
/* Fields of a category line: the counters, then the virtual memory fields
 * (optional, for reports written before them, but all four or none). */
#define CAT_COUNT(f) { #f, offsetof(struct report_category, n) + offsetof(struct report_counts, f), true }
#define CAT_VM(f) { #f, offsetof(struct report_category, vm) + offsetof(struct report_vm, f), false }
static const struct field category_fields[] = {
    CAT_COUNT(live_bytes), CAT_COUNT(live_count), CAT_COUNT(peak_bytes),
    CAT_COUNT(allocs),     CAT_COUNT(frees),
    { "reallocs", offsetof(struct report_category, n) + offsetof(struct report_counts, reallocs), false },
    CAT_VM(reserved),      CAT_VM(committed),     CAT_VM(resident),  CAT_VM(mappings),
};
#define CAT_VM_FIRST 6      /* index of reserved in category_fields */
#define CAT_VM_BITS (0xfu << CAT_VM_FIRST)
#define PROC_FIELD(f) { #f, offsetof(struct report_process, f), true }
static const struct field process_fields[] = {
    PROC_FIELD(rss_bytes), PROC_FIELD(peak_rss_bytes), PROC_FIELD(reserved),
    PROC_FIELD(committed), PROC_FIELD(resident),
};
#define ERR_FIELD(f) { #f, offsetof(struct report_errors, f), true }
static const struct field error_fields[] = {
    ERR_FIELD(double_free), ERR_FIELD(bad_canary), ERR_FIELD(foreign_free),
};
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* Parse "a=1 b=2 ..." (modified in place) into `base` through `tab`.
 * `kind`, when not NULL, receives the string field kind=. `seen_out`, when
 * not NULL, receives one bit per entry of `tab` that was present. */
static int parse_fields(struct reader *rd, const char *line_key, char *s,
                        const struct field *tab, size_t ntab, void *base, char **kind,
                        unsigned *seen_out)
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
            return fail(rd, -EBADMSG, "empty field in %s line (two spaces in a row?)", line_key);
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return fail(rd, -EBADMSG, "bad field '%s' in %s line (expected name=value)",
                        shown(tok, buf), line_key);
        *eq = '\0';
        const char *value = eq + 1;
        if (kind && strcmp(tok, "kind") == 0) {
            if (kind_seen)
                return fail(rd, -EBADMSG, "field kind given twice");
            if (*value == '\0')
                return fail(rd, -EBADMSG, "empty value for kind");
            kind_seen = true;
            int rc = set_string(rd, kind, value);
            if (rc < 0)
                return rc;
            continue;
        }
        size_t i = 0;
        while (i < ntab && strcmp(tab[i].name, tok) != 0)
            i++;
        if (i == ntab)
            continue;   /* unknown field: a newer writer's; ignored */
        if (seen & (1u << i))
            return fail(rd, -EBADMSG, "field %s given twice", tok);
        seen |= 1u << i;
        int rc = parse_int(rd, tok, value, (int64_t *)(void *)((char *)base + tab[i].offset));
        if (rc < 0)
            return rc;
    }
    if (kind && !kind_seen)
        return fail(rd, -EBADMSG, "%s line lacks field kind", line_key);
    for (size_t i = 0; i < ntab; i++)
        if (tab[i].required && !(seen & (1u << i)))
            return fail(rd, -EBADMSG, "%s line lacks field %s", line_key, tab[i].name);
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
        return fail(rd, -EBADMSG, "category line without a name");
    if (strchr(value, '='))
        return fail(rd, -EBADMSG, "category line without a name (found '%s')", shown(value, buf));
    for (size_t i = 0; i < r->ncategories; i++)
        if (strcmp(r->categories[i].name, value) == 0)
            return fail(rd, -EBADMSG, "duplicate category '%s'", shown(value, buf));

    struct report_category c = {0};
    char line_key[80];
    snprintf(line_key, sizeof line_key, "category '%s'", shown(value, buf));
    unsigned seen = 0;
    int rc = parse_fields(rd, line_key, fields, category_fields, NFIELDS(category_fields), &c, &c.kind,
                          &seen);
    if (rc == 0 && (seen & CAT_VM_BITS) && (seen & CAT_VM_BITS) != CAT_VM_BITS) {
        /* A writer that knows the VM fields writes all four. */
        size_t i = CAT_VM_FIRST;
        while (seen & (1u << i))
            i++;
        rc = fail(rd, -EBADMSG, "%s line lacks field %s (it has other virtual memory fields)",
                  line_key, category_fields[i].name);
    }
    c.has_vm = (seen & CAT_VM_BITS) != 0;
    if (rc == 0 && !(c.name = strdup(value)))
        rc = fail(rd, -ENOMEM, "out of memory");
    if (rc == 0) {
        struct report_category *grown =
            realloc(r->categories, (r->ncategories + 1) * sizeof *grown);
        if (!grown) {
            rc = fail(rd, -ENOMEM, "out of memory");
        } else {
            r->categories = grown;
            r->categories[r->ncategories++] = c;
            if (c.has_vm)
                r->has |= REPORT_HAS_VM;
            return 0;
        }
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
    { "pid",      REPORT_HAS_PID,    V_INT,    offsetof(struct report, pid) },
    { "ppid",     REPORT_HAS_PPID,   V_INT,    offsetof(struct report, ppid) },
    { "exe",      REPORT_HAS_EXE,    V_STRING, offsetof(struct report, exe) },
    { "mode",     REPORT_HAS_MODE,   V_STRING, offsetof(struct report, mode) },
    { "start_ns", REPORT_HAS_START,  V_INT,    offsetof(struct report, start_ns) },
    { "end_ns",   REPORT_HAS_END_NS, V_INT,    offsetof(struct report, end_ns) },
    { "reason",   REPORT_HAS_REASON, V_STRING, offsetof(struct report, reason) },
};

/* --- detail mode: stack_depth, unwinder, module, site, sites -------------- */

/* "0x" then 1 to 16 hex digits (either case). */
static int parse_hex(struct reader *rd, const char *what, const char *value, uint64_t *out)
{
    char buf[48];
    const char *p = value;
    if (p[0] != '0' || (p[1] != 'x' && p[1] != 'X') || p[2] == '\0')
        return fail(rd, -EBADMSG, "bad value '%s' for %s (expected 0x and hex digits)", shown(value, buf), what);
    p += 2;
    uint64_t acc = 0;
    size_t digits = 0;
    for (; *p; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            return fail(rd, -EBADMSG, "bad value '%s' for %s (expected 0x and hex digits)",
                        shown(value, buf), what);
        if (acc || d)
            digits++;
        acc = acc << 4 | (uint64_t)d;
    }
    if (digits > 16)
        return fail(rd, -ERANGE, "value '%s' for %s does not fit in 64 bits", shown(value, buf), what);
    *out = acc;
    return 0;
}

/* The ID after a module or site key: "ID rest"; *rest points past it. */
static int parse_id(struct reader *rd, const char *key, char *value, int64_t *id, char **rest)
{
    char *sp = strchr(value, ' ');
    if (sp)
        *sp++ = '\0';
    else
        sp = value + strlen(value);
    char what[32];
    snprintf(what, sizeof what, "the %s ID", key);
    int rc = parse_int(rd, what, value, id);
    if (rc == 0 && *id < 0)
        rc = fail(rd, -EBADMSG, "negative %s ID %" PRId64, key, *id);
    *rest = sp;
    return rc;
}

/* Remove the field `name=` from the space-separated list `s` (in place) and
 * point *value at a copy of its value (malloc'd). *value stays NULL when
 * the field is absent. */
static int take_field(struct reader *rd, const char *line_key, char *s, const char *name, char **value)
{
    size_t nl = strlen(name);
    char *tok = s;
    while (*tok) {
        size_t len = strcspn(tok, " ");
        if (len > nl && strncmp(tok, name, nl) == 0 && tok[nl] == '=') {
            if (*value)
                return fail(rd, -EBADMSG, "field %s given twice in %s line", name, line_key);
            *value = strndup(tok + nl + 1, len - nl - 1);
            if (!*value)
                return fail(rd, -ENOMEM, "out of memory");
            /* Drop the token and one separator next to it. */
            char *next = tok + len;
            if (*next == ' ')
                next++;
            else if (tok > s)
                tok--;
            memmove(tok, next, strlen(next) + 1);
            continue;
        }
        tok += len;
        if (*tok == ' ')
            tok++;
    }
    return 0;
}

/* Undo the \n and \\ escapes of a path= value, in place. */
static int unescape_path(struct reader *rd, char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        if (p[1] == 'n')
            *o++ = '\n';
        else if (p[1] == '\\')
            *o++ = '\\';
        else if (p[1] == '\0')
            return fail(rd, -EBADMSG, "module path ends in a lone backslash");
        else
            return fail(rd, -EBADMSG, "bad escape '\\%c' in module path (expected \\n or \\\\)",
                        p[1] >= 0x20 && p[1] < 0x7f ? p[1] : '?');
        p++;
    }
    *o = '\0';
    return 0;
}

static int parse_module(struct reader *rd, struct report *r, char *value)
{
    char buf[48];
    struct report_module m = {0};
    char *rest;
    int rc = parse_id(rd, "module", value, &m.id, &rest);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < r->nmodules; i++)
        if (r->modules[i].id == m.id)
            return fail(rd, -EBADMSG, "duplicate module %" PRId64, m.id);
    /* path= is the last field and takes the rest of the line. */
    char *path = NULL;
    for (char *tok = rest; tok; tok = strchr(tok, ' ') ? strchr(tok, ' ') + 1 : NULL) {
        if (strncmp(tok, "path=", 5) == 0) {
            path = tok + 5;
            if (tok > rest)
                tok[-1] = '\0';
            else
                *tok = '\0';
            break;
        }
    }
    if (!path)
        return fail(rd, -EBADMSG, "module %" PRId64 " line lacks field path", m.id);
    if (*path == '\0')
        return fail(rd, -EBADMSG, "empty value for path in module %" PRId64 " line", m.id);
    if ((rc = unescape_path(rd, path)) < 0)
        return rc;

    static const char *const hex_names[] = { "bias", "start", "end" };
    uint64_t *hex_dst[] = { &m.bias, &m.start, &m.end };
    unsigned seen = 0;  /* bits 0-2: hex fields, bit 3: buildid */
    char *s = rest;
    while (*s && rc == 0) {
        char *tok = s;
        size_t len = strcspn(s, " ");
        s += len;
        if (*s)
            *s++ = '\0';
        char *eq = strchr(tok, '=');
        if (*tok == '\0')
            rc = fail(rd, -EBADMSG, "empty field in module line (two spaces in a row?)");
        else if (!eq || eq == tok)
            rc = fail(rd, -EBADMSG, "bad field '%s' in module line (expected name=value)", shown(tok, buf));
        if (rc < 0)
            break;
        *eq = '\0';
        const char *v = eq + 1;
        unsigned bit = 0;
        for (unsigned i = 0; i < 3; i++)
            if (strcmp(tok, hex_names[i]) == 0)
                bit = 1u << i;
        if (strcmp(tok, "buildid") == 0)
            bit = 1u << 3;
        if (!bit)
            continue;   /* unknown field: ignored */
        if (seen & bit) {
            rc = fail(rd, -EBADMSG, "field %s given twice in module line", tok);
            break;
        }
        seen |= bit;
        if (bit < (1u << 3)) {
            rc = parse_hex(rd, tok, v, hex_dst[__builtin_ctz(bit)]);
            continue;
        }
        if (strcmp(v, "-") == 0)
            continue;
        size_t vl = strlen(v);
        if (vl == 0 || vl % 2 || strspn(v, "0123456789abcdefABCDEF") != vl) {
            rc = fail(rd, -EBADMSG, "bad value '%s' for buildid (expected hex digits or -)", shown(v, buf));
            break;
        }
        if (!(m.buildid = strdup(v))) {
            rc = fail(rd, -ENOMEM, "out of memory");
            break;
        }
        for (char *c = m.buildid; *c; c++)
            if (*c >= 'A' && *c <= 'F')
                *c = (char)(*c - 'A' + 'a');
    }
    for (unsigned i = 0; i < 4 && rc == 0; i++)
        if (!(seen & (1u << i)))
            rc = fail(rd, -EBADMSG, "module %" PRId64 " line lacks field %s", m.id,
                      i < 3 ? hex_names[i] : "buildid");
    if (rc == 0 && m.end < m.start)
        rc = fail(rd, -EBADMSG, "module %" PRId64 " ends before it starts (start=0x%" PRIx64 " end=0x%" PRIx64 ")",
                  m.id, m.start, m.end);
    if (rc == 0 && !(m.path = strdup(path)))
        rc = fail(rd, -ENOMEM, "out of memory");
    if (rc == 0) {
        struct report_module *grown = realloc(r->modules, (r->nmodules + 1) * sizeof *grown);
        if (grown) {
            r->modules = grown;
            r->modules[r->nmodules++] = m;
            return 0;
        }
        rc = fail(rd, -ENOMEM, "out of memory");
    }
    free(m.buildid);
    free(m.path);
    return rc;
}

/* "0x1,0x2,..." (or empty: no frames). */
static int parse_frames(struct reader *rd, const char *value, struct report_site *site)
{
    if (*value == '\0')
        return 0;
    size_t n = 1;
    for (const char *p = value; *p; p++)
        n += *p == ',';
    if (!(site->frames = calloc(n, sizeof *site->frames)))
        return fail(rd, -ENOMEM, "out of memory");
    const char *p = value;
    for (size_t i = 0; i < n; i++) {
        char one[40];
        size_t len = strcspn(p, ",");
        if (len == 0)
            return fail(rd, -EBADMSG, "empty frame %zu in site %" PRId64 " line", i + 1, site->id);
        if (len >= sizeof one)
            len = sizeof one - 1;   /* too long for a 64-bit value anyway: parse_hex says so */
        memcpy(one, p, len);
        one[len] = '\0';
        char what[48];
        snprintf(what, sizeof what, "frame %zu", i + 1);
        int rc = parse_hex(rd, what, one, &site->frames[i]);
        if (rc < 0)
            return rc;
        site->nframes++;
        p += strcspn(p, ",");
        p += *p == ',';
    }
    return 0;
}

static int parse_site(struct reader *rd, struct report *r, char *value)
{
    struct report_site site = {0};
    char *rest, *frames = NULL;
    int rc = parse_id(rd, "site", value, &site.id, &rest);
    if (rc < 0)
        return rc;
    if (rd->sites_seen)
        return fail(rd, -EBADMSG, "site line after the sites line");
    for (size_t i = 0; i < r->nsites; i++)
        if (r->sites[i].id == site.id)
            return fail(rd, -EBADMSG, "duplicate site %" PRId64, site.id);
    char line_key[48];
    snprintf(line_key, sizeof line_key, "site %" PRId64, site.id);
    rc = take_field(rd, line_key, rest, "category", &site.category);
    if (rc == 0)
        rc = take_field(rd, line_key, rest, "frames", &frames);
    if (rc == 0 && !site.category)
        rc = fail(rd, -EBADMSG, "%s line lacks field category", line_key);
    if (rc == 0 && !*site.category)
        rc = fail(rd, -EBADMSG, "empty value for category in %s line", line_key);
    if (rc == 0 && !frames)
        rc = fail(rd, -EBADMSG, "%s line lacks field frames", line_key);
    unsigned seen = 0;
    if (rc == 0)
        rc = parse_fields(rd, line_key, rest, site_fields, NFIELDS(site_fields), &site, NULL, &seen);
    site.has_allocated = (seen & SITE_ALLOCATED_BIT) != 0;
    if (rc == 0)
        rc = parse_frames(rd, frames, &site);
    if (rc == 0 && r->stack_depth > 0 && site.nframes > (size_t)r->stack_depth)
        rc = fail(rd, -EBADMSG, "%s has %zu frames, more than stack_depth %" PRId64, line_key, site.nframes,
                  r->stack_depth);
    free(frames);
    if (rc == 0) {
        struct report_site *grown = realloc(r->sites, (r->nsites + 1) * sizeof *grown);
        if (grown) {
            r->sites = grown;
            r->sites[r->nsites++] = site;
            return 0;
        }
        rc = fail(rd, -ENOMEM, "out of memory");
    }
    free(site.category);
    free(site.frames);
    return rc;
}

#define SITES_FIELD(f) { #f, offsetof(struct sites_line, f), true }
struct sites_line {
    int64_t count;
    int64_t dropped;
};
static const struct field sites_fields[] = { SITES_FIELD(count), SITES_FIELD(dropped) };

/* Returns 0 when `key` is not a detail-mode line (*handled false). */
static int parse_detail_line(struct reader *rd, struct report *r, const char *key, char *value, bool *handled)
{
    *handled = true;
    if (strcmp(key, "stack_depth") == 0) {
        if (r->has & REPORT_HAS_SITES)
            return fail(rd, -EBADMSG, "duplicate stack_depth line");
        int64_t depth;
        int rc = parse_int(rd, key, value, &depth);
        if (rc < 0)
            return rc;
        if (depth < 1 || depth > 1024)
            return fail(rd, -EBADMSG, "stack_depth %" PRId64 " out of range (1 to 1024)", depth);
        r->stack_depth = depth;
        r->has |= REPORT_HAS_SITES;
        return 0;
    }
    if (strcmp(key, "unwinder") == 0) {
        if (r->unwinder)
            return fail(rd, -EBADMSG, "duplicate unwinder line");
        if (*value == '\0')
            return fail(rd, -EBADMSG, "empty unwinder line");
        return set_string(rd, &r->unwinder, value);
    }
    if (strcmp(key, "module") == 0)
        return parse_module(rd, r, value);
    if (strcmp(key, "site") == 0)
        return parse_site(rd, r, value);
    if (strcmp(key, "sites") == 0) {
        if (rd->sites_seen)
            return fail(rd, -EBADMSG, "duplicate sites line");
        struct sites_line sl = {0};
        int rc = parse_fields(rd, key, value, sites_fields, NFIELDS(sites_fields), &sl, NULL, NULL);
        if (rc < 0)
            return rc;
        if (sl.count != (int64_t)r->nsites)
            return fail(rd, -EBADMSG, "sites line says count=%" PRId64 " but %zu site lines came before it",
                        sl.count, r->nsites);
        if (sl.dropped < 0)
            return fail(rd, -EBADMSG, "negative dropped=%" PRId64 " in sites line", sl.dropped);
        r->sites_dropped = sl.dropped;
        rd->sites_seen = true;
        return 0;
    }
    *handled = false;
    return 0;
}

/* One line after the header. Returns 1 for the end marker. */
static int parse_line(struct reader *rd, struct report *r, char *line)
{
    if (*line == '\0')
        return fail(rd, -EBADMSG, "empty line");
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
            return fail(rd, -EBADMSG, "duplicate %s line", key);
        void *dst = (char *)r + s->offset;
        int rc = s->type == V_INT ? parse_int(rd, key, value, dst)
                                  : set_string(rd, dst, value);
        if (rc == 0)
            r->has |= s->bit;
        return rc;
    }
    if (strcmp(key, "cmdline") == 0) {
        if (r->has & REPORT_HAS_CMDLINE)
            return fail(rd, -EBADMSG, "duplicate cmdline line");
        r->has |= REPORT_HAS_CMDLINE;
        return parse_cmdline(rd, r, value);
    }
    if (strcmp(key, "category") == 0)
        return parse_category(rd, r, value);
    if (strcmp(key, "total") == 0 || strcmp(key, "errors") == 0) {
        bool total = key[0] == 't';
        unsigned bit = total ? REPORT_HAS_TOTAL : REPORT_HAS_ERRORS;
        if (r->has & bit)
            return fail(rd, -EBADMSG, "duplicate %s line", key);
        struct report_counts t = {0};
        struct report_errors e = {0};
        int rc = total ? parse_fields(rd, key, value, count_fields, NFIELDS(count_fields), &t, NULL, NULL)
                       : parse_fields(rd, key, value, error_fields, NFIELDS(error_fields), &e, NULL, NULL);
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
            return fail(rd, -EBADMSG, "duplicate process line");
        struct report_process p = {0};
        int rc = parse_fields(rd, key, value, process_fields, NFIELDS(process_fields), &p, NULL, NULL);
        if (rc < 0)
            return rc;
        r->process = p;
        r->has |= REPORT_HAS_PROCESS;
        return 0;
    }
    bool handled;
    int rc = parse_detail_line(rd, r, key, value, &handled);
    if (handled)
        return rc;
    return 0;   /* unknown key: a newer writer's; ignored */
}

static int parse_header(struct reader *rd, const char *line)
{
    static const char magic[] = "memtrail-report ";
    const char *v = line + sizeof magic - 1;
    int64_t version = 0;
    if (strncmp(line, magic, sizeof magic - 1) != 0 || *v == '-')
        return fail(rd, -EINVAL, "not a memtrail report (bad header)");
    int rc = report_parse_i64(v, &version);
    if (rc == -EINVAL || (rc == 0 && version < 1))
        return fail(rd, -EINVAL, "not a memtrail report (bad header)");
    if (rc == -ERANGE || version > REPORT_FORMAT_VERSION)
        return fail(rd, -ENOTSUP,
                    "report format version %s is newer than this memtrail reads (version %d); "
                    "use a newer memtrail", v, REPORT_FORMAT_VERSION);
    return 0;
}

int report_read_stream(FILE *f, const char *name, struct report *r, char *err, size_t errlen)
{
    struct reader rd = { name, 0, err, errlen, false };
    memset(r, 0, sizeof *r);
    if (err && errlen)
        err[0] = '\0';

    /* Line 1, read with a bound so that a large file that is not a report
     * (no newline for megabytes) is rejected without reading it all. */
    char head[64];
    size_t hl = 0;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (hl == sizeof head - 1 || c == '\0') {
            hl = sizeof head;   /* too long or binary: not our header */
            break;
        }
        head[hl++] = (char)c;
    }
    if (ferror(f)) {
        int e = errno ? errno : EIO;
        return fail(&rd, -e, "read error: %s", strerror(e));
    }
    if (hl == 0 && c == EOF)
        return fail(&rd, -EINVAL, "empty file (not a memtrail report)");
    if (hl == sizeof head)
        return fail(&rd, -EINVAL, "not a memtrail report (bad header)");
    head[hl] = '\0';
    int rc = parse_header(&rd, head);   /* lineno 0: "bad header" is about the file */
    if (rc < 0)
        return rc;
    rd.lineno = r->lines_read = 1;      /* a whole header without its newline is still a header */

    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long cut_line = 0;  /* a last line without newline: the writer stopped mid-line */
    while ((n = getline(&line, &cap, f)) != -1) {
        rd.lineno++;
        if (r->complete) {
            rc = fail(&rd, -EBADMSG, "data after the end marker");
            break;
        }
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        else
            cut_line = rd.lineno;
        if (memchr(line, '\0', (size_t)n)) {
            rc = fail(&rd, -EBADMSG, "NUL byte in line");
            break;
        }
        if (cut_line && strcmp(line, "end") != 0)
            break;      /* a partial line is not trusted; reported as truncation below */
        cut_line = 0;
        rc = parse_line(&rd, r, line);
        if (rc < 0)
            break;
        r->lines_read = rd.lineno;
        if (rc == 1) {
            r->complete = true;
            rc = 0;
        }
    }
    int read_errno = ferror(f) ? (errno ? errno : EIO) : 0;
    free(line);
    if (rc < 0)
        return rc;
    rd.lineno = 0;
    if (read_errno)
        return fail(&rd, -read_errno, "read error: %s", strerror(read_errno));
    if (!r->complete) {
        if (cut_line)
            return fail(&rd, -ENODATA, "truncated after line %ld (line %ld cut short, no end marker)",
                        r->lines_read, cut_line);
        return fail(&rd, -ENODATA, "truncated after line %ld (no end marker)", r->lines_read);
    }
    if (!(r->has & REPORT_HAS_PID))
        return fail(&rd, -EBADMSG, "no pid line");
    if (!(r->has & REPORT_HAS_TOTAL))
        return fail(&rd, -EBADMSG, "no total line");
    if ((r->has & REPORT_HAS_SITES) && !rd.sites_seen)
        return fail(&rd, -EBADMSG, "no sites line (the stack_depth line says detail mode)");
    return 0;
}

int report_read(const char *path, struct report *r, char *err, size_t errlen)
{
    struct reader rd = { path, 0, err, errlen, false };
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "re");
    if (!f)
        return fail(&rd, -errno, "cannot open: %s", strerror(errno));
    struct stat st;
    int rc;
    if (fstat(fileno(f), &st) < 0)
        rc = fail(&rd, -errno, "cannot stat: %s", strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = fail(&rd, -EISDIR, "is a directory, not a report file");
    else
        rc = report_read_stream(f, path, r, err, errlen);
    fclose(f);
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
    memset(r, 0, sizeof *r);
}

bool report_sites_have_allocated(const struct report *r)
{
    for (size_t i = 0; i < r->nsites; i++)
        if (!r->sites[i].has_allocated)
            return false;
    return true;
}
