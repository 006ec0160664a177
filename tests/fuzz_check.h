/* fuzz_check.h — the fuzz targets' own checks: a property that does not
 * hold stops the run like a crash (abort), after one line on stderr naming
 * it and, in the corpus replay (fuzz_replay.h), the input. */
#ifndef MT_TESTS_FUZZ_CHECK_H
#define MT_TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static const char *fuzz_current_input; /* set by the replay; NULL under libFuzzer */

#define FUZZ_CHECK(cond)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "fuzz check failed: %s (%s:%d)%s%s\n", #cond, __FILE__, __LINE__,                \
                    fuzz_current_input ? " on input " : "", fuzz_current_input ? fuzz_current_input : "");   \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

#endif
