/* trace_meta.c — prints a trace's meta values (tests/agent/test_trace.sh):
 * the file is read to its end (a later value of a key replaces an earlier
 * one), then one line per key asked, "KEY=VALUE", or "KEY absent".
 *
 *   trace_meta TRACE KEY...
 *
 * The header's pid is the key "pid". Exit 0, or 1 when the trace cannot be
 * read whole (the error on stderr; what was read is printed all the same),
 * 2 on bad usage. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "trace/trace_read.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: trace_meta TRACE KEY...\n");
        return 2;
    }
    char err[MT_TRACE_ERR_MAX] = "";
    mt_trace_reader *r = NULL;
    if (mt_trace_open(argv[1], 0, &r, err, sizeof err) < 0) {
        fprintf(stderr, "trace_meta: %s\n", err);
        return 1;
    }
    mt_trace_event ev;
    int rc;
    while ((rc = mt_trace_next(r, &ev)) > 0) {
    }
    if (rc < 0)
        fprintf(stderr, "trace_meta: %s\n", mt_trace_error(r));
    for (int i = 2; i < argc; i++) {
        const char *v = mt_trace_meta(r, argv[i]);
        if (strcmp(argv[i], "pid") == 0)
            printf("pid=%" PRIu32 "\n", mt_trace_info(r)->pid);
        else if (v)
            printf("%s=%s\n", argv[i], v);
        else
            printf("%s absent\n", argv[i]);
    }
    mt_trace_close(r);
    return rc < 0;
}
