/* json.h — a small JSON reader and writer for the CLI: the agent answers
 * `memtrail sessions` with JSON (xe_view_json), which the CLI checks,
 * lays out as a table, or writes back filtered. A document is read whole
 * into a tree of malloc'd nodes; numbers keep their text, so 64-bit
 * counters pass through exactly. */
#ifndef MT_CLI_JSON_H
#define MT_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
    enum json_kind kind;
    bool boolean;
    char *text;            /* JSON_STRING: the string (NUL-terminated, may hold NULs: see len);
                              JSON_NUMBER: the number as written */
    size_t len;            /* bytes of text */
    size_t n;              /* JSON_ARRAY, JSON_OBJECT: members */
    struct json **items;
    char **keys;           /* JSON_OBJECT: the member names, in order */
};

/* Parses text[0..len) (one value, whitespace around it). 0 and *out, or
 * -EINVAL with "at byte N: what" in err, or -ENOMEM. */
int json_parse(const char *text, size_t len, struct json **out, char *err, size_t errlen);
void json_free(struct json *j);

/* The member `key` of an object, or NULL (not an object, or no such key). */
const struct json *json_get(const struct json *obj, const char *key);
/* A number as an unsigned 64-bit integer: 0, or -1 when it is not one. */
int json_u64(const struct json *j, uint64_t *out);

/* Writes j back as JSON: containers holding containers one member per
 * line (indented from `indent` spaces), others on one line. */
void json_write(FILE *out, const struct json *j, int indent);
/* A scalar as plain text (strings unquoted, null as "NULL", as the seed's
 * tables show it); containers as compact JSON. */
void json_write_plain(FILE *out, const struct json *j);

#endif /* MT_CLI_JSON_H */
