/* stub.c — libmemtrail-stub: no-op definitions of the public API, so a
 * program instrumented with memtrail.h links and runs without the agent.
 * When libmemtrail.so is preloaded, its definitions win symbol lookup. */
#include <errno.h>
#include <string.h>
#include "memtrail.h"
#include "memtrail_sessions.h"

int mt_tag_push(const char *name)
{
    (void)name;
    return -ENOSYS;
}
int mt_tag_pop(void)
{
    return -ENOSYS;
}
int mt_report_write(const char *path)
{
    (void)path;
    return -ENOSYS;
}
int mt_is_active(void)
{
    return 0;
}
void mt_alloc_report(const void *ptr, size_t size)
{
    (void)ptr, (void)size;
}
void mt_free_report(const void *ptr)
{
    (void)ptr;
}
void mt_realloc_report(const void *old, const void *ptr, size_t size)
{
    (void)old, (void)ptr, (void)size;
}

int mt_memory_info(int kind, struct mt_memory_info *out)
{
    (void)kind, (void)out;
    return -ENOSYS;
}
uint64_t mt_event_count(int kind)
{
    (void)kind;
    return 0;
}
const char *mt_category_name(int id)
{
    (void)id;
    return NULL;
}
int mt_span_begin(const char *name)
{
    (void)name;
    return -ENOSYS;
}
int mt_span_end(void)
{
    return -ENOSYS;
}

/* Event sessions need the agent: creating one says so. */
int mt_session_create(const char *name, const char *options, mt_session **session, char *error,
                      size_t error_len)
{
    static const char why[] =
        "event sessions need the memtrail agent (run under 'memtrail run' or LD_PRELOAD=libmemtrail.so)";
    (void)name, (void)options;
    if (session)
        *session = NULL;
    if (error && error_len > 0) {
        size_t n = sizeof why - 1 < error_len - 1 ? sizeof why - 1 : error_len - 1;
        memcpy(error, why, n);
        error[n] = '\0';
    }
    return -ENOSYS;
}
int mt_session_start(mt_session *session)
{
    (void)session;
    return -ENOSYS;
}
int mt_session_stop(mt_session *session)
{
    (void)session;
    return -ENOSYS;
}
int mt_session_flush(mt_session *session)
{
    (void)session;
    return -ENOSYS;
}
int mt_session_drop(mt_session *session)
{
    (void)session;
    return -ENOSYS;
}
int mt_event_fire(mt_session *session, const mt_event *event)
{
    (void)session, (void)event;
    return -ENOSYS;
}
int mt_session_info_get(mt_session *session, mt_session_info *info)
{
    (void)session, (void)info;
    return -ENOSYS;
}
int mt_session_target_json(mt_session *session, const char *target, char *buf, size_t len)
{
    (void)session, (void)target;
    if (buf && len > 0)
        buf[0] = '\0';
    return -ENOSYS;
}
int mt_session_ring_read(mt_session *session, mt_event_record *out, int max, uint64_t *total)
{
    (void)session, (void)out, (void)max;
    if (total)
        *total = 0;
    return 0;
}
