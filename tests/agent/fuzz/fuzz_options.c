/* fuzz_options.c — the libFuzzer target of the MEMTRAIL_OPTIONS parser
 * (src/agent/options.c), called alone, as the agent calls it at start-up:
 * any string, parsed into an options struct holding the agent's defaults.
 * It must never crash or overrun; a success leaves every value in its
 * documented range (or the default), and parsing is deterministic; a
 * failure is one line starting "MEMTRAIL_OPTIONS: " with no control
 * character in it (the agent prints it on the program's stderr: a value
 * must not forge lines there).
 *
 * `make fuzz` builds it as build/fuzz/fuzz_options and runs it;
 * tests/agent/fuzz/test_corpus.c replays tests/agent/fuzz/corpus/ under
 * gcc's ASan+UBSan in `make check`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/options.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void defaults(mt_env_options *o)
{
    memset(o, 0, sizeof *o);
    o->mode = MT_MODE_SUMMARY;
    o->on_error = MT_ON_ERROR_REPORT;
    strcpy(o->output, "memtrail.%p.mtr");
    o->depth = MT_DEPTH_DEFAULT;
    o->unwind = MT_UNWIND_AUTO;
    o->trace_buffer = 64ull << 20;
    o->trace_time_unit_ns = 10000;
    o->crash_report = 2; /* MT_CRASH_REPORT_ON */
    o->query = MT_QUERY_SIGNAL;
    o->start = 1;
    o->refset_fd = -1;
}

static void check_values(const mt_env_options *o)
{
    size_t out = strnlen(o->output, sizeof o->output);
    int ok = o->mode >= MT_MODE_OFF && o->mode <= MT_MODE_TRACE &&
             (o->on_error == MT_ON_ERROR_REPORT || o->on_error == MT_ON_ERROR_ABORT) && out > 0 &&
             out < sizeof o->output - 256 && o->depth >= 1 && o->depth <= MT_DEPTH_MAX &&
             o->unwind >= MT_UNWIND_AUTO && o->unwind <= MT_UNWIND_CFI && o->trace_buffer >= (192u << 10) &&
             o->trace_buffer <= (64ull << 30) && o->trace_time_unit_ns >= 1 &&
             o->trace_time_unit_ns <= 1000000000 &&
             (o->trace_level == 0 || (o->trace_level >= 1 && o->trace_level <= 19)) &&
             (o->trace_chunk == 0 || (o->trace_chunk >= 1024 && o->trace_chunk <= (1u << 20))) &&
             (o->trace_wait == 0 || o->trace_wait == 1) && o->crash_report >= 0 && o->crash_report <= 2 &&
             (o->follow_exec == 0 || o->follow_exec == 1) && o->query >= MT_QUERY_OFF &&
             o->query <= MT_QUERY_THREAD && (o->start == 0 || o->start == 1) && o->refset_fd >= -1;
    FUZZ_CHECK(ok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An environment string: no NUL inside (it ends at the first). */
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    static mt_env_options a, b;
    static char err_a[MT_PATH_MAX + 256], err_b[MT_PATH_MAX + 256];
    defaults(&a);
    defaults(&b);
    int rc = mt_options_parse(s, &a, err_a, sizeof err_a);
    int rc2 = mt_options_parse(s, &b, err_b, sizeof err_b);
    FUZZ_CHECK(rc == rc2 && strcmp(err_a, err_b) == 0);
    if (rc == 0) {
        check_values(&a);
        FUZZ_CHECK(memcmp(&a, &b, offsetof(mt_env_options, value)) == 0);
    } else {
        FUZZ_CHECK(rc == -22 && strncmp(err_a, "MEMTRAIL_OPTIONS: ", 18) == 0);
        for (const unsigned char *p = (const unsigned char *)err_a; *p; p++)
            FUZZ_CHECK(*p >= 0x20 && *p != 0x7f);
    }
    free(s);
    return 0;
}
