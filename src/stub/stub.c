/* stub.c — libmemtrail-stub: no-op definitions of the public API, so a
 * program instrumented with memtrail.h links and runs without the agent.
 * When libmemtrail.so is preloaded, its definitions win symbol lookup. */
#include <errno.h>
#include "memtrail.h"

int mt_tag_push(const char *name) { (void)name; return -ENOSYS; }
int mt_tag_pop(void) { return -ENOSYS; }
int mt_report_write(const char *path) { (void)path; return -ENOSYS; }
int mt_is_active(void) { return 0; }
