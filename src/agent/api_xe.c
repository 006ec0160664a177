/* api_xe.c — the public event-session functions of memtrail.h (mt_session_*,
 * mt_event_fire) over the engine (src/xe): an mt_session is an xe_session.
 * They work whenever the agent is loaded, tracking or not (mode=off);
 * libmemtrail-stub has the -ENOSYS twins.
 *
 * Calls that may reach libc code which allocates (starting the dispatcher
 * thread, joining it) run inside the agent (mt_t.in_agent), so libc's
 * memory for them comes from the real allocator, uncounted and unseen by
 * the agent's own sessions. */
#include <errno.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/sessions.h"
#include "memtrail_sessions.h"
#include "common/out.h"

#define SAME_TYPE(mt, xe) _Static_assert((int)(mt) == (int)(xe), #mt " is " #xe)
SAME_TYPE(MT_EVENT_USER, XE_EV_USER);
SAME_TYPE(MT_EVENT_ALLOC, XE_EV_ALLOC);
SAME_TYPE(MT_EVENT_FREE, XE_EV_FREE);
SAME_TYPE(MT_EVENT_REALLOC, XE_EV_REALLOC);
SAME_TYPE(MT_EVENT_MMAP, XE_EV_MMAP);
SAME_TYPE(MT_EVENT_MUNMAP, XE_EV_MUNMAP);
SAME_TYPE(MT_EVENT_SPAN_BEGIN, XE_EV_SPAN_BEGIN);
SAME_TYPE(MT_EVENT_SPAN_END, XE_EV_SPAN_END);
SAME_TYPE(MT_EVENT_SNAPSHOT, XE_EV_SNAPSHOT);
SAME_TYPE(MT_EVENT_PAGE_REF, XE_EV_PAGE_REF);
SAME_TYPE(MT_EVENT_PAGE_REF + 1, XE_EV_NTYPES);
_Static_assert(sizeof(((mt_session_info *)0)->name) == XE_NAME_MAX + 1, "session names fit mt_session_info");
_Static_assert(XE_PART_NONE == 0 && XE_PART_PER_NODE == 1 && XE_PART_PER_CPU == 2,
               "mt_session_info.partition_mode numbers the modes as xe_plan.h does");
_Static_assert(XE_CREATED == 0 && XE_STARTED == 1 && XE_STOPPING == 2 && XE_STOPPED == 3,
               "mt_session_info.state numbers the states as xe.h does");

static int loaded(void)
{
    mt_start();
    return atomic_load(&mt_state) == MT_STATE_READY;
}

static xe_session *xs(mt_session *s)
{
    return (xe_session *)s;
}

/* Copies a NUL-terminated string into a fixed array, truncating. */
static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

/* Runs an engine call inside the agent, errno as it was. */
#define IN_AGENT(call)                                                                                       \
    ({                                                                                                       \
        int saved_errno_ = errno;                                                                            \
        mt_agent_enter();                                                                                    \
        int rc_ = (call);                                                                                    \
        mt_agent_leave();                                                                                    \
        errno = saved_errno_;                                                                                \
        rc_;                                                                                                 \
    })

static int create(const char *name, const char *options, xe_session **out, char *why, size_t whylen)
{
    xe_config cfg;
    int rc = xe_config_parse(options ? options : "", &cfg, why, whylen);
    if (rc != 0)
        return rc;
    if (name) {
        size_t n = strlen(name);
        if (n == 0 || n > XE_NAME_MAX) {
            mt_out o;
            mt_out_init(&o, why, whylen, -1);
            mt_out_str(&o, n ? "session name longer than 63 bytes" : "empty session name");
            mt_out_cstr(&o);
            return -EINVAL;
        }
        memcpy(cfg.name, name, n + 1);
    }
    if (!cfg.name[0]) {
        copy_str(why, whylen, "a session needs a name (the name argument, or name= in its options)");
        return -EINVAL;
    }
    rc = xe_session_create(&cfg, out, why, whylen);
    if (rc == 0 && cfg.start && (rc = xe_session_start(*out)) != 0) {
        copy_str(why, whylen, "created, but its dispatcher thread could not start");
        xe_session_drop(*out);
        *out = NULL;
    }
    return rc;
}

MT_EXPORT int mt_session_create(const char *name, const char *options, mt_session **session, char *error,
                                size_t error_len)
{
    char why[256] = "";
    xe_session *s = NULL;
    int rc;
    if (!session) {
        copy_str(why, sizeof why, "no place for the session (session is NULL)");
        rc = -EINVAL;
    } else if (!loaded()) {
        copy_str(why, sizeof why, "the memtrail agent is still starting");
        rc = -ENOSYS;
    } else {
        rc = IN_AGENT(create(name, options, &s, why, sizeof why));
    }
    if (session)
        *session = (mt_session *)s;
    if (error && error_len > 0)
        copy_str(error, error_len, rc == 0 ? "" : why[0] ? why : "rejected");
    return rc;
}

MT_EXPORT int mt_session_start(mt_session *s)
{
    return s ? IN_AGENT(xe_session_start(xs(s))) : -EINVAL;
}
MT_EXPORT int mt_session_stop(mt_session *s)
{
    return s ? IN_AGENT(xe_session_stop(xs(s))) : -EINVAL;
}
MT_EXPORT int mt_session_flush(mt_session *s)
{
    return s ? IN_AGENT(xe_session_flush(xs(s))) : -EINVAL;
}
MT_EXPORT int mt_session_drop(mt_session *s)
{
    return s ? IN_AGENT(xe_session_drop(xs(s))) : -EINVAL;
}

MT_EXPORT int mt_event_fire(mt_session *s, const mt_event *e)
{
    if (MT_UNLIKELY(!s || !e))
        return -EINVAL;
    if (MT_UNLIKELY(e->data_len > UINT32_MAX))
        return -EMSGSIZE;
    xe_event ev = {
        .type = (uint16_t)e->type,
        .category = (uint16_t)e->category,
        .data_len = (uint32_t)e->data_len,
        .size = e->size,
        .address = e->address,
        .old_address = e->old_address,
        .site = e->site,
        .key = e->key,
        .value = e->value,
        .data = e->data,
    };
    return xe_fire(xs(s), &ev);
}

MT_EXPORT int mt_session_info_get(mt_session *s, mt_session_info *info)
{
    if (!s || !info)
        return -EINVAL;
    xe_session_info x;
    xe_session_info_get(xs(s), &x);
    memset(info, 0, sizeof *info);
    copy_str(info->name, sizeof info->name, x.name);
    info->state = x.state;
    info->pending_buffers = x.pending_buffers;
    info->total_regular_buffers = x.total_regular_buffers;
    info->regular_buffer_size = x.regular_buffer_size;
    info->total_large_buffers = x.total_large_buffers;
    info->large_buffer_size = x.large_buffer_size;
    info->total_buffer_size = x.total_buffer_size;
    copy_str(info->buffer_policy_desc, sizeof info->buffer_policy_desc, x.buffer_policy_desc);
    info->dropped_event_count = x.dropped_event_count;
    info->dropped_buffer_count = x.dropped_buffer_count;
    info->blocked_event_fire_time_ns = x.blocked_event_fire_time_ns;
    info->largest_event_dropped_size = x.largest_event_dropped_size;
    info->create_time_ns = x.create_time_ns;
    info->events_delivered = x.events_delivered;
    info->max_memory = x.max_memory;
    info->memory_allocated = x.memory_allocated;
    info->max_dispatch_latency_ns = x.max_dispatch_latency_ns;
    info->partition_mode = (unsigned)x.mode;
    info->strict = x.strict;
    info->partitions = x.partitions;
    info->ntargets = x.ntargets;
    return 0;
}

MT_EXPORT int mt_session_target_json(mt_session *s, const char *target, char *buf, size_t len)
{
    if (!s || !target || !buf || len == 0)
        return -EINVAL;
    buf[0] = '\0';
    xe_target *t = xe_session_target(xs(s), target);
    if (!t)
        return -ENOENT;
    mt_out o;
    mt_out_init(&o, buf, len - 1, -1); /* room for the NUL */
    xe_target_json(t, &o, 1);
    if (o.err != 0) {
        buf[0] = '\0';
        return -ENOSPC;
    }
    buf[o.len] = '\0';
    return (int)o.len;
}

static void to_record(const xe_event *e, mt_event_record *r)
{
    *r = (mt_event_record){
        .type = e->type,
        .category = e->category,
        .tid = e->tid,
        .cpu = e->cpu,
        .time_ns = e->time_ns,
        .size = e->size,
        .address = e->address,
        .old_address = e->old_address,
        .site = e->site,
        .key = e->key,
        .value = e->value,
        .data_len = e->data_len,
    };
}

/* The engine's records, read into mapped scratch memory (never malloc)
 * unless few enough for the stack. */
static int ring_read(xe_target *t, mt_event_record *out, int max, uint64_t *total)
{
    xe_event small[32], *evs = small;
    size_t bytes = 0;
    if (max > (int)(sizeof small / sizeof small[0])) {
        bytes = (size_t)max * sizeof *evs;
        evs = xe_map(bytes);
        if (!evs)
            return -ENOMEM;
    }
    uint64_t dummy;
    int n = xe_ring_read(t, evs, max, total ? total : &dummy);
    for (int i = 0; i < n; i++)
        to_record(&evs[i], &out[i]);
    if (bytes)
        xe_unmap(evs, bytes);
    return n;
}

MT_EXPORT int mt_session_ring_read(mt_session *s, mt_event_record *out, int max, uint64_t *total)
{
    if (total)
        *total = 0;
    if (!s || max < 0 || (max > 0 && !out))
        return -EINVAL;
    xe_target *t = xe_session_target(xs(s), "ring_buffer");
    if (!t)
        return -ENOENT;
    return IN_AGENT(ring_read(t, out, max, total));
}
