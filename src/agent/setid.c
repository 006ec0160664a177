/* setid.c — the set*id family (setuid, setgid, setresuid, setgroups, ...),
 * interposed only to act just before a process changes the ids its files
 * are created with.
 *
 * Servers start as root and drop to another user in their workers (nginx:
 * `user nobody;`). The new user usually cannot create files where the
 * report goes, so the report at exit would fail. Before the change, while
 * the process still may, the agent creates its report file
 * (mt_report_before_setid), to be written in place at exit, and in trace
 * mode has its trace file opened (mt_trace_before_setid).
 *
 * Only calls that change an effective (file-system) id, or the group list,
 * count: setuid(getuid()), a common way to drop a setuid bit that is not
 * there, changes nothing. glibc's own set*id calls (inside initgroups, for
 * one) do not come through here, hence initgroups itself. Raw system
 * calls (Go's syscall.Setuid) are not seen. */
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <sys/fsuid.h>
#include <sys/types.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/trace.h"

/* Both files this process will write: the report (made now, written in
 * place at exit) and the trace (opened now by delivering what is buffered). */
static void before_change(void)
{
    mt_report_before_setid();
    mt_trace_before_setid();
}

/* The next definition (libc's), looked up at the first call: the program
 * calls these long after start-up, never from inside malloc. */
static void *next_fn(const char *name, void **slot)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    if (!f)
        errno = ENOSYS;
    return f;
}

typedef int (*id1_fn)(unsigned);
typedef int (*id2_fn)(unsigned, unsigned);
typedef int (*id3_fn)(unsigned, unsigned, unsigned);

/* fn: the next `name`, of type `type`; -1 (ENOSYS) when there is none. */
#define NEXT(type, name)                                                                                     \
    static void *slot_##name;                                                                                \
    type fn = (type)next_fn(#name, &slot_##name);                                                            \
    if (!fn)                                                                                                 \
    return -1

static void before_uid(uid_t e)
{
    if (e != (uid_t)-1 && e != geteuid())
        before_change();
}

static void before_gid(gid_t e)
{
    if (e != (gid_t)-1 && e != getegid())
        before_change();
}

MT_EXPORT int setuid(uid_t uid)
{
    NEXT(id1_fn, setuid);
    before_uid(uid);
    return fn(uid);
}

MT_EXPORT int seteuid(uid_t uid)
{
    NEXT(id1_fn, seteuid);
    before_uid(uid);
    return fn(uid);
}

MT_EXPORT int setreuid(uid_t r, uid_t e)
{
    NEXT(id2_fn, setreuid);
    before_uid(e);
    return fn(r, e);
}

MT_EXPORT int setresuid(uid_t r, uid_t e, uid_t s)
{
    NEXT(id3_fn, setresuid);
    before_uid(e);
    return fn(r, e, s);
}

MT_EXPORT int setgid(gid_t gid)
{
    NEXT(id1_fn, setgid);
    before_gid(gid);
    return fn(gid);
}

MT_EXPORT int setegid(gid_t gid)
{
    NEXT(id1_fn, setegid);
    before_gid(gid);
    return fn(gid);
}

MT_EXPORT int setregid(gid_t r, gid_t e)
{
    NEXT(id2_fn, setregid);
    before_gid(e);
    return fn(r, e);
}

MT_EXPORT int setresgid(gid_t r, gid_t e, gid_t s)
{
    NEXT(id3_fn, setresgid);
    before_gid(e);
    return fn(r, e, s);
}

/* setfsuid/setfsgid return the previous id, never -1. */
MT_EXPORT int setfsuid(uid_t uid)
{
    static void *slot;
    int (*fn)(uid_t) = (int (*)(uid_t))next_fn("setfsuid", &slot);
    before_uid(uid);
    return fn ? fn(uid) : (int)geteuid();
}

MT_EXPORT int setfsgid(gid_t gid)
{
    static void *slot;
    int (*fn)(gid_t) = (int (*)(gid_t))next_fn("setfsgid", &slot);
    before_gid(gid);
    return fn ? fn(gid) : (int)getegid();
}

MT_EXPORT int setgroups(size_t n, const gid_t *list)
{
    typedef int (*groups_fn)(size_t, const gid_t *);
    NEXT(groups_fn, setgroups);
    before_change();
    return fn(n, list);
}

MT_EXPORT int initgroups(const char *user, gid_t group)
{
    typedef int (*init_fn)(const char *, gid_t);
    NEXT(init_fn, initgroups);
    before_change();
    return fn(user, group);
}
