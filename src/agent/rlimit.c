/* rlimit.c — the agent's own address space does not count against a
 * program's RLIMIT_AS.
 *
 * A program that limits its address space (setrlimit, prlimit on itself)
 * sizes the limit for what it maps. The agent's tables, buffers and
 * threads (about 50 MiB in detail mode, more in trace mode) would take
 * their share of it, and the program would get that much less than it
 * gets bare. So when the program sets RLIMIT_AS, the agent raises the
 * values by what it has mapped itself at that moment (the overhead
 * category's ranges, vm.h), within the hard limit the process may not
 * raise; getrlimit and prlimit then show the program the values it set.
 * The agent degrades on its own when it cannot map more (trace.c). */
#include <dlfcn.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/vm.h"

typedef int (*prlimit_fn)(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *);
static prlimit_fn real_prlimit;

/* What the program set and what was set for it: getrlimit shows the
 * first while the limit is still the second. */
static struct {
    int have;
    struct rlimit asked, set;
} as_limit;

static prlimit_fn get_real(void)
{
    if (!real_prlimit)
        real_prlimit = (prlimit_fn)dlsym(RTLD_NEXT, "prlimit");
    return real_prlimit;
}

/* v raised by the address space the agent has mapped itself (vm.h). */
static rlim_t with_agent(rlim_t v)
{
    rlim_t extra = (rlim_t)(mt_vm_mapped[MT_CAT_OVERHEAD] > 0 ? mt_vm_mapped[MT_CAT_OVERHEAD] : 0);
    return v == RLIM_INFINITY || v > RLIM_INFINITY - extra ? v : v + extra;
}

static int self(pid_t pid)
{
    return pid == 0 || pid == getpid();
}

/* Sets RLIMIT_AS for the program (new != NULL), answering old as the
 * program expects. */
static int as_prlimit(const struct rlimit *new, struct rlimit *old)
{
    prlimit_fn real = get_real();
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    struct rlimit cur;
    if (real(0, RLIMIT_AS, NULL, &cur) != 0)
        return -1;
    int shown =
        as_limit.have && cur.rlim_cur == as_limit.set.rlim_cur && cur.rlim_max == as_limit.set.rlim_max;
    if (old)
        *old = shown ? as_limit.asked : cur;
    if (!new)
        return 0;
    if (new->rlim_cur > new->rlim_max) {
        errno = EINVAL; /* as the kernel would say */
        return -1;
    }
    struct rlimit want = {with_agent(new->rlim_cur), with_agent(new->rlim_max)};
    /* Raising the hard limit needs privilege the program may not have:
     * stay within the hard limit it has now when it asks for no more. */
    rlim_t hard = shown ? as_limit.set.rlim_max : cur.rlim_max;
    if (new->rlim_max <= (shown ? as_limit.asked.rlim_max : cur.rlim_max) && want.rlim_max > hard)
        want.rlim_max = hard;
    if (want.rlim_cur > want.rlim_max)
        want.rlim_cur = want.rlim_max;
    if (real(0, RLIMIT_AS, &want, NULL) != 0)
        return -1;
    as_limit.asked = *new;
    as_limit.set = want;
    as_limit.have = 1;
    return 0;
}

/* The agent gave memory back (trace mode out of memory): the program's
 * RLIMIT_AS shrinks by as much, so it still gets what it set, no more. */
void mt_rlimit_agent_shrank(void)
{
    prlimit_fn real = get_real();
    struct rlimit cur;
    if (!as_limit.have || !real || real(0, RLIMIT_AS, NULL, &cur) != 0 ||
        cur.rlim_cur != as_limit.set.rlim_cur || cur.rlim_max != as_limit.set.rlim_max)
        return;
    struct rlimit want = {with_agent(as_limit.asked.rlim_cur), cur.rlim_max};
    if (want.rlim_cur < cur.rlim_cur && real(0, RLIMIT_AS, &want, NULL) == 0)
        as_limit.set = want;
}

static int tracking(void)
{
    return atomic_load_explicit(&mt_hot, memory_order_relaxed) && mt_t.in_agent == 0;
}

MT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *new, struct rlimit *old)
{
    if ((int)res == RLIMIT_AS && self(pid) && tracking())
        return as_prlimit(new, old);
    prlimit_fn real = get_real();
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(pid, res, new, old);
}

/* On 64-bit Linux struct rlimit64 is struct rlimit. */
_Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "rlimit64 is rlimit");

MT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *new, struct rlimit64 *old)
{
    return prlimit(pid, res, (const struct rlimit *)new, (struct rlimit *)old);
}

MT_EXPORT int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
    return prlimit(0, res, rl, NULL);
}
MT_EXPORT int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
    return prlimit(0, res, (const struct rlimit *)rl, NULL);
}
MT_EXPORT int getrlimit(__rlimit_resource_t res, struct rlimit *rl)
{
    return prlimit(0, res, NULL, rl);
}
MT_EXPORT int getrlimit64(__rlimit_resource_t res, struct rlimit64 *rl)
{
    return prlimit(0, res, NULL, (struct rlimit *)rl);
}
