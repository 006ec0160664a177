/* test_json_out.c — src/common/json_out.c: the exact bytes of small
 * documents (commas, layout, escapes, numbers at their limits), invalid
 * UTF-8 made U+FFFD, misuse reported, and the same document written to a
 * stdio stream and to a memory-only mt_out. */
#include "common/json_out.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char *mem;
static size_t memlen;

static mt_json *start(bool pretty)
{
    static mt_json j;
    static FILE *f;
    if (f)
        fclose(f), free(mem), mem = NULL;
    f = open_memstream(&mem, &memlen);
    mt_json_init_file(&j, f, pretty);
    return &j;
}

static const char *text(mt_json *j)
{
    fflush(j->f);
    return mem;
}

static void sample(mt_json *j)
{
    mt_json_document_begin(j);
    mt_json_ki64(j, "min", INT64_MIN);
    mt_json_ku64(j, "max", UINT64_MAX);
    mt_json_key(j, "list");
    mt_json_array_begin(j);
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_kbool(j, "a", true);
    mt_json_ku64_or_null(j, "b", false, 7);
    mt_json_key(j, "at");
    mt_json_hex(j, 0xdeadbeef);
    mt_json_object_end(j);
    mt_json_array_begin(j);
    mt_json_array_end(j);
    mt_json_array_end(j);
    mt_json_kstr(j, "none", NULL);
}

int main(void)
{
    mt_json *j = start(true);
    sample(j);
    CHECK("pretty document: rc", mt_json_document_end(j) == 0);
    CHECK(
        "pretty document: bytes",
        strcmp(
            text(j),
            "{\n  \"schema\": \"memtrail/1\",\n  \"min\": -9223372036854775808,\n"
            "  \"max\": 18446744073709551615,\n  \"list\": [\n"
            "    {\"a\": true, \"b\": null, \"at\": \"0xdeadbeef\"},\n    []\n  ],\n  \"none\": null\n}\n") ==
            0);

    j = start(false);
    sample(j);
    mt_json_document_end(j);
    const char *compact =
        "{\"schema\":\"memtrail/1\",\"min\":-9223372036854775808,\"max\":18446744073709551615,"
        "\"list\":[{\"a\":true,\"b\":null,\"at\":\"0xdeadbeef\"},[]],\"none\":null}\n";
    CHECK("compact document: bytes", strcmp(text(j), compact) == 0);

    char buf[512];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, -1);
    mt_json jo;
    mt_json_init_out(&jo, &o, false);
    sample(&jo);
    CHECK("mt_out sink: rc", mt_json_document_end(&jo) == 0);
    CHECK("mt_out sink: the same bytes", strcmp(mt_out_cstr(&o), compact) == 0);

    mt_out_init(&o, buf, 8, -1);
    mt_json_init_out(&jo, &o, false);
    sample(&jo);
    CHECK("mt_out sink full: -EIO", mt_json_document_end(&jo) == -EIO);

    j = start(false);
    mt_json_array_begin(j);
    mt_json_str(j, "q\"b\\s/\n\t\r\b\f\x01\x1f\x7f");
    mt_json_str(j, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"); /* é € 😀 */
    mt_json_str(j, "\xff|\xc3|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82");
    mt_json_strn(j, "a\0b", 3);
    mt_json_array_end(j);
    CHECK("strings: rc", mt_json_finish(j) == 0);
    CHECK("strings: escapes",
          strstr(text(j), "\"q\\\"b\\\\s/\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f\"") != NULL);
    CHECK("strings: valid UTF-8 kept", strstr(text(j), "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"") != NULL);
    CHECK("strings: invalid UTF-8 (stray, cut, overlong, surrogate, past U+10FFFF, cut at end) is U+FFFD",
          strstr(text(j),
                 "\"\\ufffd|\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd|"
                 "\\ufffd\\ufffd\"") != NULL);
    CHECK("strings: an embedded NUL", strstr(text(j), "\"a\\u0000b\"") != NULL);

    j = start(true);
    mt_json_object_begin(j);
    mt_json_u64(j, 1);
    CHECK("misuse: a value without a key", mt_json_document_end(j) == -EINVAL);
    j = start(true);
    mt_json_array_begin(j);
    mt_json_key(j, "k");
    mt_json_array_end(j);
    CHECK("misuse: a key in an array", mt_json_finish(j) == -EINVAL);
    j = start(true);
    mt_json_object_begin(j);
    mt_json_array_end(j);
    CHECK("misuse: mismatched end", mt_json_document_end(j) == -EINVAL);
    j = start(true);
    mt_json_document_begin(j);
    mt_json_key(j, "open");
    mt_json_array_begin(j);
    CHECK("misuse: left open", mt_json_document_end(j) == -EINVAL);
    j = start(false);
    for (int i = 0; i <= MT_JSON_MAX_DEPTH; i++)
        mt_json_array_begin(j);
    CHECK("misuse: too deep", mt_json_finish(j) == -EINVAL);
    j = start(false);
    mt_json_u64(j, 1);
    mt_json_u64(j, 2);
    CHECK("misuse: two top-level values", mt_json_finish(j) == -EINVAL);
    j = start(false);
    mt_json_u64(j, 1);
    CHECK("one top-level scalar is a document", mt_json_finish(j) == 0 && strcmp(text(j), "1\n") == 0);
    return failures != 0;
}
