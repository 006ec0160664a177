/* unit.h — the PASS/FAIL lines of the C unit tests (tests/run.sh tallies
 * them), and the count of failures main() returns on. */
#ifndef MT_TESTS_UNIT_H
#define MT_TESTS_UNIT_H

#include <stdio.h>

static int failures;

#define CHECK(name, cond)                                                                                    \
    do {                                                                                                     \
        if (cond)                                                                                            \
            printf("PASS %s\n", name);                                                                       \
        else {                                                                                               \
            printf("FAIL %s: %s (%s:%d)\n", name, #cond, __FILE__, __LINE__);                                \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

#endif
