/* units.c — blocks of known sizes for the tests of printed sizes and
 * times (tests/cli/test_units.sh).
 *
 *   units hold    one block in each of three categories, of 1000 B
 *                 (small), 900 KiB (medium) and 3 MiB + 5 B (large), held
 *                 until exit (the report then shows exactly these)
 *   units sleep   1000 B, then ~200 ms asleep, then 3 MiB + 5 B: the peak
 *                 is reached after the sleep; everything freed at the end */
#include <memtrail.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *hold(const char *category, size_t size)
{
    mt_tag_push(category);
    char *p = malloc(size);
    mt_tag_pop();
    if (p)
        memset(p, 1, size);
    return p;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "hold";
    if (strcmp(what, "hold") == 0) {
        void *a = hold("small", 1000), *b = hold("medium", 900 * 1024),
             *c = hold("large", 3 * 1024 * 1024 + 5);
        printf("%p %p %p\n", a, b, c);
        return a && b && c ? 0 : 1;
    }
    if (strcmp(what, "sleep") == 0) {
        void *a = hold("small", 1000);
        struct timespec ts = {0, 200 * 1000 * 1000};
        while (nanosleep(&ts, &ts) != 0)
            ;
        void *c = hold("large", 3 * 1024 * 1024 + 5);
        free(c);
        free(a);
        return a && c ? 0 : 1;
    }
    fprintf(stderr, "usage: units hold|sleep\n");
    return 2;
}
