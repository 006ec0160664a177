/* test_show.c — src/common/show.c: each kind of byte a span name may hold
 * against the text worked out by hand from show.h's rule (printable UTF-8
 * as it is; C0, DEL, C1 and bytes outside valid UTF-8 as \xNN; the
 * backslash as \\), and a sweep of every single byte and every two-byte
 * pair: the text never holds a control byte and is always valid UTF-8. */
#include "common/show.h"
#include "common/utf8.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static char *shown(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        abort();
    mt_show(f, s);
    fclose(f);
    return buf;
}

static int is(const char *s, const char *want)
{
    char *got = shown(s);
    int ok = strcmp(got, want) == 0;
    if (!ok)
        printf("  got '%s', want '%s'\n", got, want);
    free(got);
    return ok;
}

/* No C0 or DEL byte, no C1 character, and valid UTF-8 throughout. */
static int safe(const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t n = strlen(text);
    while (n > 0) {
        size_t k = mt_utf8_len(p, n);
        if (k == 0 || (k == 1 && (*p < 0x20 || *p == 0x7f)) || (k == 2 && p[0] == 0xc2 && p[1] < 0xa0))
            return 0;
        p += k;
        n -= k;
    }
    return 1;
}

int main(void)
{
    CHECK("show: plain ASCII as it is", is("GET /index?q=1 'x'", "GET /index?q=1 'x'"));
    CHECK("show: printable UTF-8 as it is (2, 3 and 4 bytes)",
          is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    CHECK("show: escape sequences: ESC and BEL as \\xNN",
          is("\x1b]0;title\x07\x1b[2J", "\\x1b]0;title\\x07\\x1b[2J"));
    CHECK("show: newline, tab, carriage return, DEL", is("a\nb\tc\rd\x7f", "a\\x0ab\\x09c\\x0dd\\x7f"));
    CHECK("show: C1 controls (CSI U+009B, U+0080) as their bytes", is("\xc2\x9b"
                                                                      "31m\xc2\x80",
                                                                      "\\xc2\\x9b31m\\xc2\\x80"));
    CHECK("show: U+00A0 and above are text", is("\xc2\xa0\xc2\xbf", "\xc2\xa0\xc2\xbf"));
    CHECK("show: bytes that are not UTF-8: lone, overlong, surrogate, past U+10FFFF, cut short",
          is("\xff|\xc0\x80|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82",
             "\\xff|\\xc0\\x80|\\xed\\xa0\\x80|\\xf4\\x90\\x80\\x80|\\xe2\\x82"));
    CHECK("show: a backslash doubled, so an escape reads back", is("a\\x1b", "a\\\\x1b"));
    CHECK("show: empty", is("", ""));
    int all_safe = 1;
    char s[3] = {0};
    for (int a = 1; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            s[0] = (char)a;
            s[1] = (char)b;
            char *t = shown(s);
            all_safe &= safe(t);
            free(t);
        }
    }
    CHECK("show: every one- and two-byte name shows as valid UTF-8 without a control character", all_safe);
    return failures != 0;
}
