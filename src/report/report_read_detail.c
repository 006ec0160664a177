/* report_read_detail.c — the detail-mode lines of a .mtr report
 * (docs/report-format.md "Detail mode"): stack_depth, unwinder, a sampled
 * report's sample_rate (docs/sampling.md), the modules (ELF objects the
 * frames lie in) and the allocation sites with their frames, checked as strictly as the summary lines
 * (report_read.c). IDs are checked for duplicates through hash indexes, so a report of a million sites reads
 * in linear time. */
#include "report/report_read_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields of a site line: the counters, then allocated_bytes (optional:
 * reports written before it lack it), then a sampled report's samples and
 * live_samples (docs/sampling.md; exact reports lack them). */
#define SITE_COUNT(f, req)                                                                                   \
    {                                                                                                        \
#f, offsetof(struct report_site, n) + offsetof(struct report_counts, f), req                         \
    }
static const struct field site_fields[] = {
    SITE_COUNT(live_bytes, true),
    SITE_COUNT(live_count, true),
    SITE_COUNT(peak_bytes, true),
    SITE_COUNT(allocs, true),
    SITE_COUNT(frees, true),
    SITE_COUNT(reallocs, false),
    {"allocated_bytes", offsetof(struct report_site, allocated_bytes), false},
    {"samples", offsetof(struct report_site, samples), false},
    {"live_samples", offsetof(struct report_site, live_samples), false},
};
#define SITE_ALLOCATED_BIT (1u << 6)    /* allocated_bytes' index in site_fields */
#define SITE_SAMPLES_BIT (1u << 7)      /* samples' */
#define SITE_LIVE_SAMPLES_BIT (1u << 8) /* live_samples' */

/* --- detail mode: stack_depth, unwinder, sample_rate, module, site, sites -- */

/* "0x" then 1 to 16 significant hex digits (either case): 0, -EBADMSG
 * (not that) or -ERANGE (more than 64 bits). No message: frames are parsed
 * by the million. */
static int hex_value(const char *value, uint64_t *out)
{
    const char *p = value;
    if (p[0] != '0' || (p[1] != 'x' && p[1] != 'X') || p[2] == '\0')
        return -EBADMSG;
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
            return -EBADMSG;
        if (acc || d)
            digits++;
        acc = acc << 4 | (uint64_t)d;
    }
    if (digits > 16)
        return -ERANGE;
    *out = acc;
    return 0;
}

/* hex_value, with the message naming `what`. */
static int parse_hex(struct reader *rd, const char *what, const char *value, uint64_t *out)
{
    char buf[48];
    int rc = hex_value(value, out);
    if (rc == -ERANGE)
        return report_rd_fail(rd, -ERANGE, "value '%s' for %s does not fit in 64 bits",
                              report_rd_shown(value, buf), what);
    if (rc < 0)
        return report_rd_fail(rd, -EBADMSG, "bad value '%s' for %s (expected 0x and hex digits)",
                              report_rd_shown(value, buf), what);
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
    int rc = report_rd_int(rd, what, value, id);
    if (rc == 0 && *id < 0)
        rc = report_rd_fail(rd, -EBADMSG, "negative %s ID %" PRId64, key, *id);
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
                return report_rd_fail(rd, -EBADMSG, "field %s given twice in %s line", name, line_key);
            *value = strndup(tok + nl + 1, len - nl - 1);
            if (!*value)
                return report_rd_fail(rd, -ENOMEM, "out of memory");
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
            return report_rd_fail(rd, -EBADMSG, "module path ends in a lone backslash");
        else
            return report_rd_fail(rd, -EBADMSG, "bad escape '\\%c' in module path (expected \\n or \\\\)",
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
    uint64_t hash = report_hash_i64(m.id);
    for (size_t pos = 0, i; (i = report_index_next(&rd->modules, hash, &pos)) != SIZE_MAX;)
        if (r->modules[i].id == m.id)
            return report_rd_fail(rd, -EBADMSG, "duplicate module %" PRId64, m.id);
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
        return report_rd_fail(rd, -EBADMSG, "module %" PRId64 " line lacks field path", m.id);
    if (*path == '\0')
        return report_rd_fail(rd, -EBADMSG, "empty value for path in module %" PRId64 " line", m.id);
    if ((rc = unescape_path(rd, path)) < 0)
        return rc;

    static const char *const hex_names[] = {"bias", "start", "end"};
    uint64_t *hex_dst[] = {&m.bias, &m.start, &m.end};
    unsigned seen = 0; /* bits 0-2: hex fields, bit 3: buildid */
    char *s = rest;
    while (*s && rc == 0) {
        char *tok = s;
        size_t len = strcspn(s, " ");
        s += len;
        if (*s)
            *s++ = '\0';
        char *eq = strchr(tok, '=');
        if (*tok == '\0')
            rc = report_rd_fail(rd, -EBADMSG, "empty field in module line (two spaces in a row?)");
        else if (!eq || eq == tok)
            rc = report_rd_fail(rd, -EBADMSG, "bad field '%s' in module line (expected name=value)",
                                report_rd_shown(tok, buf));
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
            continue; /* unknown field: ignored */
        if (seen & bit) {
            rc = report_rd_fail(rd, -EBADMSG, "field %s given twice in module line", tok);
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
            rc = report_rd_fail(rd, -EBADMSG, "bad value '%s' for buildid (expected hex digits or -)",
                                report_rd_shown(v, buf));
            break;
        }
        if (!(m.buildid = strdup(v))) {
            rc = report_rd_fail(rd, -ENOMEM, "out of memory");
            break;
        }
        for (char *c = m.buildid; *c; c++)
            if (*c >= 'A' && *c <= 'F')
                *c = (char)(*c - 'A' + 'a');
    }
    for (unsigned i = 0; i < 4 && rc == 0; i++)
        if (!(seen & (1u << i)))
            rc = report_rd_fail(rd, -EBADMSG, "module %" PRId64 " line lacks field %s", m.id,
                                i < 3 ? hex_names[i] : "buildid");
    if (rc == 0 && m.end < m.start)
        rc = report_rd_fail(
            rd, -EBADMSG, "module %" PRId64 " ends before it starts (start=0x%" PRIx64 " end=0x%" PRIx64 ")",
            m.id, m.start, m.end);
    if (rc == 0 && !(m.path = strdup(path)))
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    if (rc == 0 && (report_grow(&r->modules, &rd->modules_cap, r->nmodules + 1, sizeof m, 16) < 0 ||
                    report_index_add(&rd->modules, hash, r->nmodules) < 0))
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    if (rc == 0) {
        r->modules[r->nmodules++] = m;
        return 0;
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
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    const char *p = value;
    for (size_t i = 0; i < n; i++) {
        char one[40];
        size_t len = strcspn(p, ",");
        if (len == 0)
            return report_rd_fail(rd, -EBADMSG, "empty frame %zu in site %" PRId64 " line", i + 1, site->id);
        if (len >= sizeof one)
            len = sizeof one - 1; /* too long for a 64-bit value anyway: parse_hex says so */
        memcpy(one, p, len);
        one[len] = '\0';
        if (hex_value(one, &site->frames[i]) < 0) {
            char what[48];
            snprintf(what, sizeof what, "frame %zu", i + 1);
            return parse_hex(rd, what, one, &site->frames[i]);
        }
        site->nframes++;
        p += strcspn(p, ",");
        p += *p == ',';
    }
    return 0;
}

/* A sampled report's site counts its samples (both fields, as the writer
 * writes them); an exact report's may not, as older reports do not. */
static int check_samples(struct reader *rd, const struct report *r, const char *line_key,
                         struct report_site *site, unsigned seen)
{
    unsigned both = SITE_SAMPLES_BIT | SITE_LIVE_SAMPLES_BIT;
    if ((seen & both) == both) {
        site->has_samples = true;
    } else if (seen & both) {
        return report_rd_fail(rd, -EBADMSG, "%s line lacks field %s (it has %s)", line_key,
                              seen & SITE_SAMPLES_BIT ? "live_samples" : "samples",
                              seen & SITE_SAMPLES_BIT ? "samples" : "live_samples");
    } else if (r->has & REPORT_HAS_SAMPLE_RATE) {
        return report_rd_fail(rd, -EBADMSG, "%s line lacks field samples (the report is sampled)", line_key);
    }
    if (site->has_samples &&
        (site->samples < 0 || site->live_samples < 0 || site->live_samples > site->samples))
        return report_rd_fail(rd, -EBADMSG,
                              "%s line has live_samples=%" PRId64 " and samples=%" PRId64
                              " (expected 0 <= live_samples <= samples)",
                              line_key, site->live_samples, site->samples);
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
        return report_rd_fail(rd, -EBADMSG, "site line after the sites line");
    uint64_t hash = report_hash_i64(site.id);
    for (size_t pos = 0, i; (i = report_index_next(&rd->sites, hash, &pos)) != SIZE_MAX;)
        if (r->sites[i].id == site.id)
            return report_rd_fail(rd, -EBADMSG, "duplicate site %" PRId64, site.id);
    char line_key[48];
    snprintf(line_key, sizeof line_key, "site %" PRId64, site.id);
    rc = take_field(rd, line_key, rest, "category", &site.category);
    if (rc == 0)
        rc = take_field(rd, line_key, rest, "frames", &frames);
    if (rc == 0 && !site.category)
        rc = report_rd_fail(rd, -EBADMSG, "%s line lacks field category", line_key);
    if (rc == 0 && !*site.category)
        rc = report_rd_fail(rd, -EBADMSG, "empty value for category in %s line", line_key);
    if (rc == 0 && !frames)
        rc = report_rd_fail(rd, -EBADMSG, "%s line lacks field frames", line_key);
    unsigned seen = 0;
    if (rc == 0)
        rc = report_rd_fields(rd, line_key, rest, site_fields, NFIELDS(site_fields), &site, NULL, &seen);
    site.has_allocated = (seen & SITE_ALLOCATED_BIT) != 0;
    if (rc == 0)
        rc = check_samples(rd, r, line_key, &site, seen);
    if (rc == 0)
        rc = parse_frames(rd, frames, &site);
    if (rc == 0 && r->stack_depth > 0 && site.nframes > (size_t)r->stack_depth)
        rc = report_rd_fail(rd, -EBADMSG, "%s has %zu frames, more than stack_depth %" PRId64, line_key,
                            site.nframes, r->stack_depth);
    free(frames);
    if (rc == 0 && (report_grow(&r->sites, &rd->sites_cap, r->nsites + 1, sizeof site, 64) < 0 ||
                    report_index_add(&rd->sites, hash, r->nsites) < 0))
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    if (rc == 0) {
        r->sites[r->nsites++] = site;
        return 0;
    }
    free(site.category);
    free(site.frames);
    return rc;
}

#define SITES_FIELD(f)                                                                                       \
    {                                                                                                        \
#f, offsetof(struct sites_line, f), true                                                             \
    }
struct sites_line {
    int64_t count;
    int64_t dropped;
};
static const struct field sites_fields[] = {SITES_FIELD(count), SITES_FIELD(dropped)};

/* Returns 0 when `key` is not a detail-mode line (*handled false). */
int report_rd_detail_line(struct reader *rd, struct report *r, const char *key, char *value, bool *handled)
{
    *handled = true;
    if (strcmp(key, "stack_depth") == 0) {
        if (r->has & REPORT_HAS_SITES)
            return report_rd_fail(rd, -EBADMSG, "duplicate stack_depth line");
        int64_t depth;
        int rc = report_rd_int(rd, key, value, &depth);
        if (rc < 0)
            return rc;
        if (depth < 1 || depth > 1024)
            return report_rd_fail(rd, -EBADMSG, "stack_depth %" PRId64 " out of range (1 to 1024)", depth);
        r->stack_depth = depth;
        r->has |= REPORT_HAS_SITES;
        return 0;
    }
    if (strcmp(key, "unwinder") == 0) {
        if (r->unwinder)
            return report_rd_fail(rd, -EBADMSG, "duplicate unwinder line");
        if (*value == '\0')
            return report_rd_fail(rd, -EBADMSG, "empty unwinder line");
        return report_rd_string(rd, &r->unwinder, value);
    }
    if (strcmp(key, "sample_rate") == 0) {
        if (r->has & REPORT_HAS_SAMPLE_RATE)
            return report_rd_fail(rd, -EBADMSG, "duplicate sample_rate line");
        if (r->nsites)
            return report_rd_fail(rd, -EBADMSG, "sample_rate line after the first site line");
        int64_t rate;
        int rc = report_rd_int(rd, key, value, &rate);
        if (rc < 0)
            return rc;
        if (rate < 1)
            return report_rd_fail(
                rd, -EBADMSG, "sample_rate %" PRId64 " out of range (expected a positive number of bytes)",
                rate);
        r->sample_rate = rate;
        r->has |= REPORT_HAS_SAMPLE_RATE;
        return 0;
    }
    if (strcmp(key, "module") == 0)
        return parse_module(rd, r, value);
    if (strcmp(key, "site") == 0)
        return parse_site(rd, r, value);
    if (strcmp(key, "sites") == 0) {
        if (rd->sites_seen)
            return report_rd_fail(rd, -EBADMSG, "duplicate sites line");
        struct sites_line sl = {0};
        int rc = report_rd_fields(rd, key, value, sites_fields, NFIELDS(sites_fields), &sl, NULL, NULL);
        if (rc < 0)
            return rc;
        if (sl.count != (int64_t)r->nsites)
            return report_rd_fail(rd, -EBADMSG,
                                  "sites line says count=%" PRId64 " but %zu site lines came before it",
                                  sl.count, r->nsites);
        if (sl.dropped < 0)
            return report_rd_fail(rd, -EBADMSG, "negative dropped=%" PRId64 " in sites line", sl.dropped);
        r->sites_dropped = sl.dropped;
        rd->sites_seen = true;
        return 0;
    }
    *handled = false;
    return 0;
}
