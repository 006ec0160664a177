/* test_json.c — the CLI's JSON reader and writer (src/cli/json.c), which
 * `memtrail sessions` runs on what a process answers: RFC 8259 documents,
 * exact 64-bit numbers, escapes, and one clear error for each kind of bad
 * input. Built with ASan+UBSan. */
#include "cli/json.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct json *parse(const char *text, char *err, size_t errlen)
{
    struct json *j = NULL;
    if (json_parse(text, strlen(text), &j, err, errlen) != 0)
        return NULL;
    return j;
}

/* j written back (json_write or json_write_plain), malloc'd. */
static char *written(const struct json *j, int plain)
{
    char *s = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&s, &n);
    if (plain)
        json_write_plain(m, j);
    else
        json_write(m, j, 0);
    fclose(m);
    return s;
}

/* Does parsing `text` fail with -EINVAL and an error naming `what`? */
static int rejects(const char *text, const char *what)
{
    char err[128] = "";
    struct json *j = NULL;
    int rc = json_parse(text, strlen(text), &j, err, sizeof err);
    int ok = rc == -EINVAL && j == NULL && strstr(err, "at byte ") == err && strstr(err, what) != NULL;
    if (!ok)
        printf("    input %s: rc %d, error '%s'\n", text, rc, err);
    return ok;
}

int main(void)
{
    char err[128];
    struct json *j = parse(" {\"sessions\": [{\"name\": \"a\", \"total\": 18446744073709551615, \"neg\": -3,"
                           " \"f\": 1.5e3, \"ok\": true, \"no\": false, \"nil\": null, \"t\": []}], \"n\": {}} ",
                           err, sizeof err);
    CHECK("json: a document parses", j != NULL);
    const struct json *s = json_get(j, "sessions"), *row = s && s->n ? s->items[0] : NULL;
    uint64_t v = 0;
    CHECK("json: members by name, in order", s && s->kind == JSON_ARRAY && s->n == 1 && row &&
                                                 row->n == 8 && strcmp(row->keys[0], "name") == 0);
    CHECK("json: a string member", json_get(row, "name") && strcmp(json_get(row, "name")->text, "a") == 0);
    CHECK("json: UINT64_MAX is exact", json_u64(json_get(row, "total"), &v) == 0 && v == UINT64_MAX);
    CHECK("json: negative and fractional numbers are not u64, but keep their text",
          json_u64(json_get(row, "neg"), &v) < 0 && json_u64(json_get(row, "f"), &v) < 0 &&
              strcmp(json_get(row, "f")->text, "1.5e3") == 0);
    CHECK("json: true, false, null",
          json_get(row, "ok")->boolean && !json_get(row, "no")->boolean && json_get(row, "nil")->kind == JSON_NULL);
    CHECK("json: a missing key, or a key of a non-object, is NULL",
          json_get(row, "nope") == NULL && json_get(s, "name") == NULL);
    char *w = written(j, 0);
    struct json *again = parse(w, err, sizeof err);
    char *w2 = again ? written(again, 0) : NULL;
    CHECK("json: written back, it reads back the same", w2 && strcmp(w, w2) == 0);
    CHECK("json: containers of containers one member per line (an empty one counts), leaves on one line",
          strstr(w, "{\n  \"sessions\": [\n    {\n      \"name\": \"a\",\n") == w &&
              strstr(w, "\"t\": []\n    }\n  ],\n  \"n\": {}\n}"));
    json_free(again);
    again = parse("[{\"a\": 1, \"b\": \"x\"}, {\"a\": 2}]", err, sizeof err);
    free(w2);
    w2 = again ? written(again, 0) : NULL;
    CHECK("json: objects of scalars on one line each", w2 && strcmp(w2, "[\n  {\"a\": 1, \"b\": \"x\"},\n  {\"a\": 2}\n]") == 0);
    free(w);
    free(w2);
    json_free(again);
    json_free(j);

    j = parse("[\"q\\\"b\\\\s\\/\\n\\t\", \"\\u00e9\", \"\\ud83d\\ude00\", \"\\ud83d!\", \"\\u0000x\"]", err, sizeof err);
    CHECK("json: escapes", j && strcmp(j->items[0]->text, "q\"b\\s/\n\t") == 0);
    CHECK("json: \\u00e9 is UTF-8", j && strcmp(j->items[1]->text, "\xc3\xa9") == 0);
    CHECK("json: a surrogate pair is one 4-byte character", j && strcmp(j->items[2]->text, "\xf0\x9f\x98\x80") == 0);
    CHECK("json: a lone surrogate becomes U+FFFD", j && strcmp(j->items[3]->text, "\xef\xbf\xbd!") == 0);
    CHECK("json: \\u0000 is kept (len counts it)", j && j->items[4]->len == 2 && j->items[4]->text[1] == 'x');
    w = j ? written(j->items[0], 1) : NULL;
    CHECK("json: a string written plain is unquoted", w && strcmp(w, "q\"b\\s/\n\t") == 0);
    free(w);
    json_free(j);
    j = parse("null", err, sizeof err);
    w = j ? written(j, 1) : NULL;
    CHECK("json: null written plain is NULL (as the seed's tables show it)", w && strcmp(w, "NULL") == 0);
    free(w);
    json_free(j);

    CHECK("json: trailing comma", rejects("[1,]", "unexpected ']'"));
    CHECK("json: missing colon", rejects("{\"a\" 1}", "expected ':'"));
    CHECK("json: unquoted member name", rejects("{a: 1}", "member name"));
    CHECK("json: unterminated string", rejects("[\"abc", "unterminated string"));
    CHECK("json: control character in a string", rejects("[\"a\nb\"]", "control character"));
    CHECK("json: bad escape", rejects("[\"\\x\"]", "bad escape"));
    CHECK("json: short \\u", rejects("[\"\\u12\"]", "four hex digits"));
    CHECK("json: leading zero", rejects("01", "more after the value"));
    CHECK("json: bad number", rejects("-", "bad number"));
    CHECK("json: 1. is not a number", rejects("[1.]", "bad number"));
    CHECK("json: a misspelt literal", rejects("tru", "unexpected 't'"));
    CHECK("json: empty input", rejects("  ", "unexpected end"));
    CHECK("json: two values", rejects("{} {}", "more after the value"));
    CHECK("json: missing close", rejects("{\"a\": [1, 2}", "expected ',' or ']'"));
    char deep[200];
    memset(deep, '[', 70);
    deep[70] = '\0';
    CHECK("json: nesting deeper than 64 levels", rejects(deep, "nested deeper than 64"));
    memset(deep, '[', 60);
    memset(deep + 60, ']', 60);
    deep[120] = '\0';
    j = parse(deep, err, sizeof err);
    CHECK("json: 60 levels are fine", j != NULL);
    json_free(j);
    return failures != 0;
}
