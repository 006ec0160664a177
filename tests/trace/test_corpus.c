/* test_corpus.c — replays the trace reader's fuzz corpus
 * (tests/trace/corpus/: small valid traces, cut and damaged ones, every
 * input the fuzzer found a bug with (crash-*), and the fuzzer's own
 * coverage-minimized corpus (fuzz-*)) through the fuzz target, under
 * ASan+UBSan: a PASS line per seed and crasher, one for the fuzz-* inputs
 * together; a crash fails the test. */
#include "unit.h"

#include "fuzz_read.c"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/trace/corpus";
    DIR *d = opendir(dir);
    CHECK("corpus directory", d != NULL);
    if (!d)
        return 1;
    char *names[4096];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    size_t nfuzz = 0, unread = 0;
    char label0[128];
    for (size_t i = 0; i < n; i++) {
        char path[4096], label[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        unsigned char *buf = NULL;
        size_t len = 0, cap = 0;
        if (f) {
            for (;;) {
                if (len == cap && !(buf = realloc(buf, cap = cap ? cap * 2 : 65536)))
                    break;
                size_t k = fread(buf + len, 1, cap - len, f);
                if (!k)
                    break;
                len += k;
            }
            fclose(f);
        }
        LLVMFuzzerTestOneInput(buf ? buf : (const uint8_t *)"", len);
        /* one line per seed and per crasher; the fuzzer's own finds together */
        if (strncmp(names[i], "fuzz-", 5)) {
            snprintf(label, sizeof label, "corpus %s (%zu bytes) read without a crash", names[i], len);
            CHECK(label, f != NULL);
        } else {
            nfuzz++;
            unread += f == NULL;
        }
        free(buf);
        free(names[i]);
    }
    snprintf(label0, sizeof label0, "corpus: %zu inputs the fuzzer kept read without a crash", nfuzz);
    CHECK(label0, unread == 0);
    CHECK("corpus has files", n >= 10);
    return failures != 0;
}
