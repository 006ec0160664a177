/* report_read_info.c — the .mtr reader's memory info and request-span
 * lines (docs/report-format.md "Memory info and request spans"):
 * memory_time, info (one per kind, with its categories= list), span_name,
 * span and span_memory (a latency and a memory-time histogram per span
 * name) and the spans line that closes the section. Numbers are strict,
 * unknown fields are ignored, and a value the agent cannot have written (a
 * bucket out of order, more affected spans than spans) is an error naming
 * the line, so the CLI's arithmetic can trust what it reads. */
#include "report/report_read_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The first field `name=` of a space-separated list, or NULL. */
static char *find_field(char *s, const char *name)
{
    size_t nl = strlen(name);
    for (char *tok = s; tok; tok = strchr(tok, ' ') ? strchr(tok, ' ') + 1 : NULL)
        if (strncmp(tok, name, nl) == 0 && tok[nl] == '=')
            return tok;
    return NULL;
}

/* Cuts the last field `name=` (it takes the rest of the line) off `s`;
 * *value points at its value. Fails when the line lacks it. */
static int cut_last_field(struct reader *rd, const char *line_key, char *s, const char *name, char **value)
{
    char *tok = find_field(s, name);
    if (!tok)
        return report_rd_fail(rd, -EBADMSG, "%s line lacks field %s", line_key, name);
    *value = tok + strlen(name) + 1;
    if (tok > s)
        tok[-1] = '\0';
    else
        *tok = '\0';
    return 0;
}

/* A string field among the integer ones (event=): removed from `s` so that
 * report_rd_fields does not see it, copied into *dst. */
static int take_string(struct reader *rd, const char *line_key, char *s, const char *name, char **dst)
{
    char *tok = find_field(s, name);
    if (!tok)
        return report_rd_fail(rd, -EBADMSG, "%s line lacks field %s", line_key, name);
    size_t len = strcspn(tok, " ");
    char *next = tok + len;
    if (*next == ' ' && find_field(next + 1, name))
        return report_rd_fail(rd, -EBADMSG, "field %s given twice", name);
    const char *v = tok + strlen(name) + 1;
    if (v == next)
        return report_rd_fail(rd, -EBADMSG, "empty value for %s", name);
    if (!(*dst = strndup(v, (size_t)(next - v))))
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    if (*next == ' ')
        next++;
    else if (tok > s)
        tok--;
    memmove(tok, next, strlen(next) + 1);
    return 0;
}

/* --- memory_time and info ------------------------------------------------ */

#define MT_FIELD(f)                                                                                          \
    {                                                                                                        \
#f, offsetof(struct report_memory_time, f), true                                                     \
    }
static const struct field memory_time_fields[] = {MT_FIELD(run_time_ns), MT_FIELD(alloc_time_ns),
                                                  MT_FIELD(map_time_ns)};

#define INFO_FIELD(f)                                                                                        \
    {                                                                                                        \
#f, offsetof(struct report_info, f), true                                                            \
    }
static const struct field info_fields[] = {
    INFO_FIELD(count),
    INFO_FIELD(index),
    INFO_FIELD(time_ns),
    INFO_FIELD(run_time_ns),
    INFO_FIELD(live_before_bytes),
    INFO_FIELD(live_after_bytes),
    INFO_FIELD(fragmentation_before_bytes),
    INFO_FIELD(fragmentation_after_bytes),
    INFO_FIELD(rss_bytes),
    INFO_FIELD(committed_bytes),
    INFO_FIELD(memory_load_bytes),
    INFO_FIELD(total_available_bytes),
    INFO_FIELD(alloc_time_ns),
    INFO_FIELD(map_time_ns),
    INFO_FIELD(minor_faults),
    INFO_FIELD(major_faults),
    INFO_FIELD(overhead_bytes),
    INFO_FIELD(event_ns),
};

static bool category_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("_.:/+-", c);
}

/* "NAME:LIVE,NAME:LIVE" (or empty) into info->categories. */
static int parse_info_categories(struct reader *rd, struct report_info *info, char *s)
{
    char buf[48];
    if (*s == '\0')
        return 0;
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    info->categories = calloc(n, sizeof *info->categories);
    if (!info->categories)
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    for (char *pair = s; pair;) {
        char *comma = strchr(pair, ',');
        if (comma)
            *comma = '\0';
        char *colon = strrchr(pair, ':');
        if (!colon || colon == pair)
            return report_rd_fail(rd, -EBADMSG, "bad pair '%s' in categories= (expected NAME:LIVE_BYTES)",
                                  report_rd_shown(pair, buf));
        *colon = '\0';
        for (const char *c = pair; *c; c++)
            if (!category_char(*c))
                return report_rd_fail(rd, -EBADMSG,
                                      "bad category name '%s' in categories=", report_rd_shown(pair, buf));
        struct report_info_category *c = &info->categories[info->ncategories];
        char what[96];
        snprintf(what, sizeof what, "category %s in categories=", report_rd_shown(pair, buf));
        int rc = report_rd_int(rd, what, colon + 1, &c->live_bytes);
        if (rc < 0)
            return rc;
        if (!(c->name = strdup(pair)))
            return report_rd_fail(rd, -ENOMEM, "out of memory");
        info->ncategories++;
        pair = comma ? comma + 1 : NULL;
    }
    return 0;
}

static void info_free(struct report_info *info)
{
    free(info->kind);
    free(info->event);
    for (size_t i = 0; i < info->ncategories; i++)
        free(info->categories[i].name);
    free(info->categories);
}

/* A kind's name: a-z and '_' (JSON shows it as an enum value). */
static bool lower_word(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
            return false;
    return true;
}

static int parse_info(struct reader *rd, struct report *r, char *value)
{
    char buf[48], buf2[48];
    struct report_info info = {0};
    char *cats = NULL;
    int rc = cut_last_field(rd, "info", value, "categories", &cats);
    if (rc == 0)
        rc = take_string(rd, "info", value, "event", &info.event);
    if (rc == 0)
        rc = report_rd_fields(rd, "info", value, info_fields, NFIELDS(info_fields), &info, &info.kind, NULL);
    if (rc == 0 && (!lower_word(info.kind) || !lower_word(info.event)))
        rc = report_rd_fail(rd, -EBADMSG,
                            "bad kind or event in info line (expected lower-case words: '%s', '%s')",
                            report_rd_shown(info.kind, buf), report_rd_shown(info.event, buf2));
    for (size_t i = 0; rc == 0 && i < r->ninfos; i++)
        if (strcmp(r->infos[i].kind, info.kind) == 0)
            rc = report_rd_fail(rd, -EBADMSG, "duplicate info line for kind %s",
                                report_rd_shown(info.kind, buf));
    if (rc == 0 && (info.count < 0 || info.index < 0))
        rc = report_rd_fail(rd, -EBADMSG, "negative count or index in info line for kind %s",
                            report_rd_shown(info.kind, buf));
    if (rc == 0)
        rc = parse_info_categories(rd, &info, cats);
    if (rc == 0 && report_grow(&r->infos, &rd->infos_cap, r->ninfos + 1, sizeof info, 8) < 0)
        rc = report_rd_fail(rd, -ENOMEM, "out of memory");
    if (rc < 0) {
        info_free(&info);
        return rc;
    }
    r->infos[r->ninfos++] = info;
    r->has |= REPORT_HAS_INFO;
    return 0;
}

/* --- spans --------------------------------------------------------------- */

struct span_name_line {
    int64_t id, count;
};
static const struct field span_name_fields[] = {
    {"id", offsetof(struct span_name_line, id), true},
    {"count", offsetof(struct span_name_line, count), true},
};

/* The span (by position in r->spans) with this id, or SIZE_MAX. */
static size_t span_find(struct reader *rd, const struct report *r, int64_t id)
{
    uint64_t hash = report_hash_i64(id);
    for (size_t pos = 0, i; (i = report_index_next(&rd->spans, hash, &pos)) != SIZE_MAX;)
        if (r->spans[i].id == id)
            return i;
    return SIZE_MAX;
}

static int parse_span_name(struct reader *rd, struct report *r, char *value)
{
    char *name = NULL;
    struct span_name_line sl = {0};
    int rc = cut_last_field(rd, "span_name", value, "name", &name);
    if (rc == 0)
        rc = report_rd_fields(rd, "span_name", value, span_name_fields, NFIELDS(span_name_fields), &sl, NULL,
                              NULL);
    if (rc < 0)
        return rc;
    if (sl.id < 0 || sl.count < 0)
        return report_rd_fail(rd, -EBADMSG, "negative id or count in span_name line");
    if (span_find(rd, r, sl.id) != SIZE_MAX)
        return report_rd_fail(rd, -EBADMSG, "duplicate span_name line for id %" PRId64, sl.id);
    if (*name == '\0')
        return report_rd_fail(rd, -EBADMSG, "empty name in span_name line for id %" PRId64, sl.id);
    if ((rc = report_rd_unescape_word(rd, name, "span name", "span name")) < 0)
        return rc;
    struct report_span span = {.id = sl.id, .count = sl.count, .name = strdup(name)};
    if (!span.name || report_grow(&r->spans, &rd->spans_cap, r->nspans + 1, sizeof span, 8) < 0 ||
        report_grow(&rd->span_caps, &rd->span_caps_cap, r->nspans + 1, sizeof *rd->span_caps, 8) < 0 ||
        report_index_add(&rd->spans, report_hash_i64(sl.id), r->nspans) < 0) {
        free(span.name);
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    }
    rd->span_caps[r->nspans][0] = rd->span_caps[r->nspans][1] = 0;
    r->spans[r->nspans++] = span;
    return 0;
}

/* A span or span_memory line: the bucket fields, after id. */
struct bucket_line {
    int64_t id;
    struct report_span_bucket b;
};
#define BUCKET_FIELD(f)                                                                                      \
    {                                                                                                        \
#f, offsetof(struct bucket_line, b) + offsetof(struct report_span_bucket, f), true                   \
    }
static const struct field bucket_fields[] = {
    {"id", offsetof(struct bucket_line, id), true},
    BUCKET_FIELD(lo_ns),
    BUCKET_FIELD(hi_ns),
    BUCKET_FIELD(count),
    BUCKET_FIELD(affected),
    BUCKET_FIELD(multiple),
    BUCKET_FIELD(events),
    BUCKET_FIELD(duration_ns),
    BUCKET_FIELD(memory_ns),
    BUCKET_FIELD(faults),
    {"affected_duration_ns",
     offsetof(struct bucket_line, b) + offsetof(struct report_span_bucket, affected_duration_ns), false},
    {"affected_memory_ns",
     offsetof(struct bucket_line, b) + offsetof(struct report_span_bucket, affected_memory_ns), false},
};
#define MEMORY_BUCKET_FIELDS 4 /* span_memory: id, lo_ns, hi_ns, count */

/* What a bucket must satisfy, whoever wrote it (the printers divide by its
 * count and interpolate inside its bounds). */
static int check_bucket(struct reader *rd, const char *key, const struct bucket_line *l, bool full)
{
    const struct report_span_bucket *b = &l->b;
    if (b->lo_ns < 0 || b->hi_ns <= b->lo_ns)
        return report_rd_fail(rd, -EBADMSG,
                              "%s line for id %" PRId64 ": bad bounds lo_ns=%" PRId64 " hi_ns=%" PRId64, key,
                              l->id, b->lo_ns, b->hi_ns);
    if (b->count < 1)
        return report_rd_fail(rd, -EBADMSG,
                              "%s line for id %" PRId64 ": count=%" PRId64 " (buckets are not empty)", key,
                              l->id, b->count);
    if (!full)
        return 0;
    if (b->affected < 0 || b->affected > b->count || b->multiple < 0 || b->multiple > b->affected)
        return report_rd_fail(rd, -EBADMSG,
                              "span line for id %" PRId64 ": expected 0 <= multiple <= affected <= count "
                              "(multiple=%" PRId64 " affected=%" PRId64 " count=%" PRId64 ")",
                              l->id, b->multiple, b->affected, b->count);
    if (b->events < report_add(b->affected, b->multiple) || b->duration_ns < 0 || b->memory_ns < 0 ||
        b->faults < 0)
        return report_rd_fail(rd, -EBADMSG,
                              "span line for id %" PRId64 ": bad events, duration_ns, memory_ns or faults "
                              "(events below the affected spans', or a negative sum)",
                              l->id);
    if (b->has_affected_sums && (b->affected_duration_ns < 0 || b->affected_duration_ns > b->duration_ns ||
                                 b->affected_memory_ns < 0 || b->affected_memory_ns > b->memory_ns ||
                                 b->affected_memory_ns > b->affected_duration_ns ||
                                 (b->affected == 0 && b->affected_duration_ns != 0)))
        return report_rd_fail(rd, -EBADMSG,
                              "span line for id %" PRId64
                              ": affected_duration_ns or affected_memory_ns out of "
                              "range (0 <= affected_memory_ns <= affected_duration_ns <= duration_ns)",
                              l->id);
    return 0;
}

static int parse_bucket(struct reader *rd, struct report *r, const char *key, char *value, bool full)
{
    if (rd->spans_seen)
        return report_rd_fail(rd, -EBADMSG, "%s line after the spans line", key);
    struct bucket_line l = {0};
    unsigned seen = 0;
    int rc = report_rd_fields(rd, key, value, bucket_fields,
                              full ? NFIELDS(bucket_fields) : MEMORY_BUCKET_FIELDS, &l, NULL, &seen);
    if (rc < 0)
        return rc;
    /* both or neither */
    unsigned sums = 3u << (NFIELDS(bucket_fields) - 2);
    if (full && (seen & sums) != 0 && (seen & sums) != sums)
        return report_rd_fail(
            rd, -EBADMSG,
            "span line for id %" PRId64 ": affected_duration_ns and affected_memory_ns come together", l.id);
    l.b.has_affected_sums = full && (seen & sums) == sums;
    size_t i = span_find(rd, r, l.id);
    if (i == SIZE_MAX)
        return report_rd_fail(rd, -EBADMSG, "%s line for id %" PRId64 " without a span_name line before it",
                              key, l.id);
    if ((rc = check_bucket(rd, key, &l, full)) < 0)
        return rc;
    struct report_span *s = &r->spans[i];
    struct report_span_bucket **arr = full ? &s->buckets : &s->memory;
    size_t *n = full ? &s->nbuckets : &s->nmemory;
    if (*n && l.b.lo_ns < (*arr)[*n - 1].hi_ns)
        return report_rd_fail(rd, -EBADMSG,
                              "%s line for id %" PRId64 ": bucket [%" PRId64 ", %" PRId64
                              ") is not after the one before it (buckets are in ascending order)",
                              key, l.id, l.b.lo_ns, l.b.hi_ns);
    if (report_grow(arr, &rd->span_caps[i][full ? 0 : 1], *n + 1, sizeof l.b, 16) < 0)
        return report_rd_fail(rd, -ENOMEM, "out of memory");
    (*arr)[(*n)++] = l.b;
    return 0;
}

struct spans_line {
    int64_t names, unmatched_ends, dropped, faults_counted;
};
#define SPANS_FIELD(f)                                                                                       \
    {                                                                                                        \
#f, offsetof(struct spans_line, f), true                                                             \
    }
static const struct field spans_fields[] = {SPANS_FIELD(names), SPANS_FIELD(unmatched_ends),
                                            SPANS_FIELD(dropped), SPANS_FIELD(faults_counted)};

static int parse_spans(struct reader *rd, struct report *r, char *value)
{
    if (rd->spans_seen)
        return report_rd_fail(rd, -EBADMSG, "duplicate spans line");
    struct spans_line sl = {0};
    int rc = report_rd_fields(rd, "spans", value, spans_fields, NFIELDS(spans_fields), &sl, NULL, NULL);
    if (rc < 0)
        return rc;
    if (sl.names != (int64_t)r->nspans)
        return report_rd_fail(rd, -EBADMSG,
                              "spans line says names=%" PRId64 " but %zu span_name lines came before it",
                              sl.names, r->nspans);
    if (sl.unmatched_ends < 0 || sl.dropped < 0)
        return report_rd_fail(rd, -EBADMSG, "negative unmatched_ends or dropped in spans line");
    if (sl.faults_counted != 0 && sl.faults_counted != 1)
        return report_rd_fail(rd, -EBADMSG, "bad value %" PRId64 " for faults_counted (expected 0 or 1)",
                              sl.faults_counted);
    r->spans_unmatched_ends = sl.unmatched_ends;
    r->spans_dropped = sl.dropped;
    r->span_faults = sl.faults_counted == 1;
    r->has |= REPORT_HAS_SPANS;
    rd->spans_seen = true;
    return 0;
}

int report_rd_info_line(struct reader *rd, struct report *r, const char *key, char *value, bool *handled)
{
    *handled = true;
    if (strcmp(key, "memory_time") == 0) {
        if (r->has & REPORT_HAS_MEMORY_TIME)
            return report_rd_fail(rd, -EBADMSG, "duplicate memory_time line");
        struct report_memory_time mt = {0};
        int rc = report_rd_fields(rd, key, value, memory_time_fields, NFIELDS(memory_time_fields), &mt, NULL,
                                  NULL);
        if (rc < 0)
            return rc;
        r->memory_time = mt;
        r->has |= REPORT_HAS_MEMORY_TIME | REPORT_HAS_INFO;
        return 0;
    }
    if (strcmp(key, "info") == 0)
        return parse_info(rd, r, value);
    if (strcmp(key, "span_name") == 0) {
        if (rd->spans_seen)
            return report_rd_fail(rd, -EBADMSG, "span_name line after the spans line");
        return parse_span_name(rd, r, value);
    }
    if (strcmp(key, "span") == 0)
        return parse_bucket(rd, r, key, value, true);
    if (strcmp(key, "span_memory") == 0)
        return parse_bucket(rd, r, key, value, false);
    if (strcmp(key, "spans") == 0)
        return parse_spans(rd, r, value);
    *handled = false;
    return 0;
}

void report_info_free(struct report *r)
{
    for (size_t i = 0; i < r->ninfos; i++)
        info_free(&r->infos[i]);
    free(r->infos);
    for (size_t i = 0; i < r->nspans; i++) {
        free(r->spans[i].name);
        free(r->spans[i].buckets);
        free(r->spans[i].memory);
    }
    free(r->spans);
}
