/* show.c — names shown on a terminal, escaped (see show.h). */
#include "common/show.h"
#include "common/utf8.h"

#include <string.h>

/* A code point that moves the terminal rather than showing: C0, DEL, and
 * C1 (U+0080..U+009F, whose 0x9b is CSI on terminals that read 8-bit
 * controls). */
static int control(const unsigned char *p, size_t k)
{
    return (k == 1 && (p[0] < 0x20 || p[0] == 0x7f)) || (k == 2 && p[0] == 0xc2 && p[1] < 0xa0);
}

void mt_show(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n > 0) {
        size_t k = mt_utf8_len(p, n);
        int invalid = k == 0;
        if (invalid)
            k = 1; /* one byte at a time, until UTF-8 starts again */
        if (k == 1 && *p == '\\')
            fputs("\\\\", out);
        else if (invalid || control(p, k))
            for (size_t i = 0; i < k; i++)
                fprintf(out, "\\x%02x", p[i]);
        else
            fwrite(p, 1, k, out);
        p += k;
        n -= k;
    }
}
