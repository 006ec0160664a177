/* api.c — the public mt_* functions of memtrail.h, as the agent defines
 * them (libmemtrail-stub has the no-op twins). */
#include <errno.h>
#include <pthread.h>

#include "agent/agent.h"
#include "agent/counters.h"

MT_EXPORT int mt_tag_push(const char *name)
{
    if (!mt_api_ready())
        return -ENOSYS;
    if (mt_t.depth >= MT_TAG_DEPTH)
        return -EOVERFLOW;
    int id = mt_category_get(name);
    if (id < 0)
        return id;
    mt_t.stack[mt_t.depth++] = mt_t.cat;
    mt_t.cat = (unsigned char)id;
    mt_cat_slot_set();
    return 0;
}

MT_EXPORT int mt_tag_pop(void)
{
    if (!mt_api_ready())
        return -ENOSYS;
    if (mt_t.depth == 0)
        return -ENOENT;
    mt_t.cat = mt_t.stack[--mt_t.depth];
    mt_cat_slot_set();
    return 0;
}

MT_EXPORT int mt_report_write(const char *path)
{
    if (!mt_api_ready())
        return -ENOSYS;
    int rc = mt_report_write_to(path, "api");
    /* Cancellation waits while the report is written (it holds locks) and
     * may act here, where nothing is held. */
    pthread_testcancel();
    return rc;
}

MT_EXPORT int mt_is_active(void)
{
    return mt_api_ready();
}
