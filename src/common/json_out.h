/* json_out.h — the one JSON writer: a small streaming writer with no
 * malloc, for every JSON document memtrail prints (docs/json.md).
 *
 * The caller says what comes (begin/end object or array, key, value); the
 * writer puts the commas, the colons, the quotes and, when asked, a
 * readable layout. Strings are escaped as JSON requires: quote, backslash
 * and control characters escaped, bytes that are not UTF-8 written as
 * U+FFFD, since a JSON text must be UTF-8. It writes to a stdio stream
 * (the CLI) or to an mt_out (malloc-free, usable inside the agent). */
#ifndef MT_COMMON_JSON_OUT_H
#define MT_COMMON_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/out.h"

/* The version of the documents' shape: the first key of every top-level
 * object ("schema": "memtrail/1"). A change that removes or renames a key
 * or changes its meaning takes a new number; new keys do not. */
#define MT_JSON_SCHEMA "memtrail/1"

/* Containers nested deeper than this are an error (-EINVAL). */
#define MT_JSON_MAX_DEPTH 32

typedef struct mt_json {
    FILE *f;           /* the sink: a stdio stream, or */
    mt_out *o;         /* an mt_out */
    bool pretty;       /* one element a line, indented by two spaces */
    bool after_key;    /* a key was written; its value comes next */
    unsigned depth;    /* open containers */
    uint32_t nonempty; /* bit d: the container at depth d has an element */
    uint32_t oneline;  /* bit d: the container at depth d is on one line */
    uint32_t array;    /* bit d: the container at depth d is an array */
    bool next_oneline; /* the next container begun goes on one line */
    bool top_done;     /* the top-level value is begun: there is one */
    int err;           /* the first error: -EINVAL on misuse, -EIO from the sink */
} mt_json;

void mt_json_init_file(mt_json *j, FILE *f, bool pretty);
void mt_json_init_out(mt_json *j, mt_out *o, bool pretty);

void mt_json_object_begin(mt_json *j);
void mt_json_object_end(mt_json *j);
void mt_json_array_begin(mt_json *j);
void mt_json_array_end(mt_json *j);
/* In a pretty document: the next object or array (and all inside it) is
 * written on one line, as `{"a": 1, "b": 2}`. */
void mt_json_oneline(mt_json *j);

/* A key of the open object; its value follows. */
void mt_json_key(mt_json *j, const char *key);

/* Values. mt_json_str(NULL) writes null. */
void mt_json_str(mt_json *j, const char *s);
void mt_json_strn(mt_json *j, const char *s, size_t n);
void mt_json_u64(mt_json *j, uint64_t v);
void mt_json_i64(mt_json *j, int64_t v);
void mt_json_bool(mt_json *j, bool v);
/* A number the caller formatted as JSON's grammar says (a decimal such as
 * "1.25" seconds), written as given. */
void mt_json_number(mt_json *j, const char *literal);
void mt_json_null(mt_json *j);
/* An address as the string "0x..." (JSON numbers lose 64-bit precision
 * in many readers). */
void mt_json_hex(mt_json *j, uint64_t v);

/* A key and its value in one call; the _or_null forms write null when
 * `have` is false. */
void mt_json_kstr(mt_json *j, const char *key, const char *s);
void mt_json_ku64(mt_json *j, const char *key, uint64_t v);
void mt_json_ki64(mt_json *j, const char *key, int64_t v);
void mt_json_kbool(mt_json *j, const char *key, bool v);
void mt_json_knull(mt_json *j, const char *key);
void mt_json_ku64_or_null(mt_json *j, const char *key, bool have, uint64_t v);
void mt_json_ki64_or_null(mt_json *j, const char *key, bool have, int64_t v);

/* Begins a top-level document: `{` and "schema": "memtrail/1". */
void mt_json_document_begin(mt_json *j);
/* Closes it, ends the line; 0, or the first error (-EINVAL when the
 * containers were not balanced, -EIO when the stream failed). */
int mt_json_document_end(mt_json *j);
/* Ends the line after a value written without document_begin; the same
 * result. */
int mt_json_finish(mt_json *j);

#endif
