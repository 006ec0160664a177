/* sessions.c — the engine's host in the agent, and the agent's own event
 * sessions: defined one per line in MEMTRAIL_SESSIONS (xe_config_parse
 * syntax; `memtrail run --session DEF` sets it), started with the agent,
 * fed by the malloc hooks (alloc, free, realloc) and the VM hooks (mmap,
 * munmap), stopped at exit so their buffers reach their targets.
 *
 * Everything the engine does here runs inside the agent (mt_t.in_agent):
 * the dispatcher thread a start creates, and any memory libc takes for
 * it, are the agent's, never the program's events. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/counters.h"
#include "agent/sessions.h"
#include "agent/trace.h"
#include "common/out.h"

_Atomic int mt_xe_on;

static xe_session *agent_sessions[XE_MAX_SESSIONS];
static _Atomic int agent_count;
/* The session writing the trace (trace.c), apart from the others: only
 * hooks that saw trace recording on fire into it (record.h), and they are
 * counted while they do, so a stop knows when none can reach it any more
 * and may drop it. */
static xe_session *_Atomic trace_session;
xe_session *_Atomic mt_xe_trace_only;

/* trace_session, or NULL while an agent session is started too. */
static void set_trace_only(void)
{
    atomic_store(&mt_xe_trace_only, atomic_load(&agent_count) == 0 ? atomic_load(&trace_session) : NULL);
}

/* ---- the host: the agent's categories ------------------------------------ */

/* A predicate may name any category, built-in ones included; a name not
 * seen yet is created, as mt_tag_push would (the program may tag it later). */
static int host_category_id(const char *name, size_t len)
{
    char buf[MT_CATEGORY_NAME_MAX + 1];
    if (len == 0 || len > MT_CATEGORY_NAME_MAX)
        return -EINVAL;
    memcpy(buf, name, len);
    buf[len] = '\0';
    int n = atomic_load_explicit(&mt_ncats, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (strcmp(mt_cats[i].name, buf) == 0)
            return i;
    return mt_category_get(buf);
}

static const char *host_category_name(unsigned id)
{
    return id < (unsigned)atomic_load_explicit(&mt_ncats, memory_order_acquire) ? mt_cats[id].name : NULL;
}

static const xe_host agent_host = {host_category_id, host_category_name};

void mt_xe_init(void)
{
    xe_set_host(&agent_host);
}

/* ---- firing ---------------------------------------------------------------- */

void mt_xe_set_trace_session(xe_session *s)
{
    atomic_store(&trace_session, s);
    set_trace_only();
    /* With no session left, the hooks go back to not calling here. */
    if (s != NULL || atomic_load(&agent_count) > 0)
        mt_extra_on(MT_EXTRA_SESSIONS, &mt_xe_on, 1);
    else
        mt_extra_off(MT_EXTRA_SESSIONS, &mt_xe_on);
}

/* Only an event the trace's session refused (it stopped): one it took
 * before the stop is in the file, and counted there. */
void mt_xe_trace_untaken(void)
{
    if (atomic_load_explicit(&mt_trace_stopped, memory_order_relaxed))
        atomic_fetch_add_explicit(&mt_trace_unrecorded, 1, memory_order_relaxed); /* counted lost */
}

void mt_xe_fire_agent(unsigned type, uint64_t address, uint64_t old_address, uint64_t size, unsigned cat,
                      uint32_t site, uint32_t key, uint32_t value, int to_trace)
{
    /* The hooks must leave errno as the real call left it. */
    int saved_errno = errno;
    mt_agent_enter();
    if (to_trace) {
        xe_session *t = atomic_load_explicit(&trace_session, memory_order_acquire);
        if (t && xe_fire_fields(t, type, cat, size, address, old_address, site, key, value) == 0)
            mt_xe_trace_untaken();
    }
    int n = atomic_load_explicit(&agent_count, memory_order_acquire);
    for (int i = 0; i < n; i++)
        xe_fire_fields(agent_sessions[i], type, cat, size, address, old_address, site, key, value);
    mt_agent_leave();
    errno = saved_errno;
}

/* ---- MEMTRAIL_SESSIONS ------------------------------------------------------ */

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}
static int blank(int c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* The name= value of a definition the engine refused, for the error line;
 * 0 when it has none. */
static int definition_name(const char *def, size_t len, char *out, size_t cap)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (blank(def[i]) || def[i] == ';'))
            i++;
        size_t key = i;
        while (i < len && def[i] != '=' && def[i] != ';' && !blank(def[i]))
            i++;
        int is_name = i - key == 4 && lower(def[key]) == 'n' && lower(def[key + 1]) == 'a' &&
                      lower(def[key + 2]) == 'm' && lower(def[key + 3]) == 'e';
        while (i < len && blank(def[i]))
            i++;
        if (is_name && i < len && def[i] == '=') {
            i++;
            while (i < len && blank(def[i]))
                i++;
            size_t n = 0;
            while (i < len && def[i] != ';' && n + 1 < cap)
                out[n++] = def[i++];
            while (n > 0 && blank(out[n - 1]))
                n--;
            out[n] = '\0';
            return n > 0;
        }
        while (i < len && def[i] != ';')
            i++;
    }
    return 0;
}

/* "memtrail: session 'NAME': REASON; the program runs without it". */
static void complain(const char *def, size_t len, int index, const char *reason)
{
    char name[XE_NAME_MAX + 1], msg[512];
    mt_out o;
    mt_out_init(&o, msg, sizeof msg, -1);
    mt_out_str(&o, "session '");
    if (definition_name(def, len, name, sizeof name)) {
        mt_out_shown(&o, name, strlen(name));
    } else { /* the name start_one gives it: session1, session2, ... */
        mt_out_str(&o, "session");
        mt_out_u64(&o, (uint64_t)index);
    }
    mt_out_str(&o, "': ");
    mt_out_str(&o, reason);
    mt_out_str(&o, "; the program runs without it");
    mt_say(mt_out_cstr(&o));
}

/* One definition: parsed, created and started, or one line saying why not. */
static void start_one(const char *def, size_t len, int index)
{
    static char text[4096];
    static xe_config cfg; /* large for a stack; start-up is single-threaded here */
    char why[256] = "";
    if (len >= sizeof text) {
        complain(def, len, index, "definition longer than 4095 bytes");
        return;
    }
    memcpy(text, def, len);
    text[len] = '\0';
    int rc = xe_config_parse(text, &cfg, why, sizeof why);
    if (rc == 0 && cfg.name[0] == '\0') {
        /* Unnamed: session1, session2, ... by its line. */
        mt_out o;
        mt_out_init(&o, cfg.name, sizeof cfg.name, -1);
        mt_out_str(&o, "session");
        mt_out_u64(&o, (uint64_t)index);
        mt_out_cstr(&o);
    }
    xe_session *s = NULL;
    if (rc == 0)
        rc = xe_session_create(&cfg, &s, why, sizeof why);
    if (rc == 0 && (rc = xe_session_start(s)) != 0) {
        mt_out o;
        mt_out_init(&o, why, sizeof why, -1);
        mt_out_str(&o, "cannot start: ");
        mt_out_str(&o, strerrordesc_np(-rc) ? strerrordesc_np(-rc) : "error");
        mt_out_cstr(&o);
        xe_session_drop(s);
    }
    if (rc != 0) {
        complain(def, len, index, why[0] ? why : "rejected");
        return;
    }
    int n = atomic_load(&agent_count);
    agent_sessions[n] = s;
    atomic_store_explicit(&agent_count, n + 1, memory_order_release);
    set_trace_only();
}

void mt_xe_start_agent_sessions(void)
{
    const char *env = getenv("MEMTRAIL_SESSIONS");
    if (!env || !*env)
        return;
    int saved_errno = errno;
    mt_agent_enter();
    int index = 0;
    for (const char *p = env; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        size_t a = 0;
        while (a < len && blank(p[a]))
            a++;
        if (a < len) {
            index++;
            if (atomic_load(&agent_count) < XE_MAX_SESSIONS)
                start_one(p, len, index);
            else
                complain(p, len, index, "too many sessions (at most 32)");
        }
        p += len + (nl != NULL);
    }
    if (atomic_load(&agent_count) > 0)
        mt_extra_on(MT_EXTRA_SESSIONS, &mt_xe_on, 1);
    mt_agent_leave();
    errno = saved_errno;
}

void mt_xe_stop_agent_sessions(void)
{
    if (!atomic_exchange(&mt_xe_on, 0))
        return;
    int saved_errno = errno;
    mt_agent_enter();
    xe_session *t = atomic_load(&trace_session);
    if (t)
        xe_session_stop(t);
    int n = atomic_load(&agent_count);
    for (int i = 0; i < n; i++)
        xe_session_stop(agent_sessions[i]);
    mt_agent_leave();
    errno = saved_errno;
}

void mt_xe_after_fork_child(void)
{
    mt_agent_enter();
    xe_atfork_child();
    mt_agent_leave();
}
