/* fuzz_replay.h — replays a fuzz target's committed corpus through its
 * LLVMFuzzerTestOneInput (the harness .c is included before this header)
 * under gcc's ASan+UBSan in `make check`: one PASS line per seed and per
 * input a finding was fixed with (crash-*, timeout-*), one for the
 * fuzzer's own finds (fuzz-*) together; a crash fails the test. Used by
 * each target's tests/<module>/.../test_corpus.c. */
#ifndef MT_TESTS_FUZZ_REPLAY_H
#define MT_TESTS_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "unit.h"

static int fuzz_replay_by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of dir through the target; at least min_files of them. */
static int fuzz_replay(const char *dir, size_t min_files)
{
    DIR *d = opendir(dir);
    CHECK("corpus directory", d != NULL);
    if (!d)
        return 1;
    size_t n = 0, cap = 0;
    char **names = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap && !(names = realloc(names, (cap = cap ? 2 * cap : 256) * sizeof *names)))
            abort();
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, fuzz_replay_by_name);
    size_t nfuzz = 0, unread = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096], label[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        unsigned char *buf = NULL;
        size_t len = 0, bcap = 0;
        if (f) {
            for (;;) {
                if (len == bcap && !(buf = realloc(buf, bcap = bcap ? bcap * 2 : 65536)))
                    abort();
                size_t k = fread(buf + len, 1, bcap - len, f);
                if (!k)
                    break;
                len += k;
            }
            fclose(f);
        }
        fuzz_current_input = path;
        LLVMFuzzerTestOneInput(buf ? buf : (const uint8_t *)"", len);
        fuzz_current_input = NULL;
        if (strncmp(names[i], "fuzz-", 5)) {
            snprintf(label, sizeof label, "corpus %s (%zu bytes) without a crash", names[i], len);
            CHECK(label, f != NULL);
        } else {
            nfuzz++;
            unread += f == NULL;
        }
        free(buf);
        free(names[i]);
    }
    free(names);
    char label0[160];
    snprintf(label0, sizeof label0, "corpus %s: %zu inputs the fuzzer kept, without a crash", dir, nfuzz);
    CHECK(label0, unread == 0);
    snprintf(label0, sizeof label0, "corpus %s has at least %zu files", dir, min_files);
    CHECK(label0, n >= min_files);
    return failures != 0;
}

#endif
