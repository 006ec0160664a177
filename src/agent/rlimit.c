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
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/fdguard.h"
#include "agent/vm.h"
#include "common/safe_file.h"

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

/* ---- descriptors for a report -------------------------------------------
 * A program at its RLIMIT_NOFILE (a server leaking descriptors: the very
 * moment its report at a crash or at exit matters) would leave a report
 * none: not the file, nor the two /proc files it reads the address space
 * from first (report_write.c). So the agent holds NRESERVE descriptors
 * of its own from start-up (empty memfds: an inode no other file has,
 * placed high and kept from the program by fdguard.h) and lets them go
 * for the report (one at a time: the report buffers' lock), taking them
 * again after; another thread at the limit may take a number first, and
 * later reports have that much less. The program's own change of its
 * limit moves them under a lower one (a number above the soft limit is
 * no room under it). Not lifting the limit instead: another thread would
 * get numbers above it meanwhile (select's FD_SETSIZE) and children
 * spawned then would inherit it. */
#define NRESERVE 2
static int reserve[NRESERVE] = {-1, -1};
static dev_t reserve_dev[NRESERVE];
static ino_t reserve_ino[NRESERVE];
/* The reserve changes under this lock (the report, the program's change
 * of its limit, a query's connection, a fork: a bounded try, skipped when
 * busy). */
static _Atomic long reserve_owner; /* the thread holding it (gettid), or 0 */
/* A report let the reserve go (mt_rlimit_report_begin to _end): the
 * numbers are the report's until then, not to be taken back by anyone
 * else (a query's connection closing meanwhile). Under the lock. */
static int report_holds;

static void reserve_take_locked(void)
{
    for (int i = 0; i < NRESERVE; i++) {
        struct stat st;
        if (__atomic_load_n(&reserve[i], __ATOMIC_ACQUIRE) >= 0)
            continue;
        int fd = memfd_create("memtrail-reserve", MFD_CLOEXEC);
        if (fd < 0 || (fd = mt_file_fd_kept_high(fd)) < 0)
            return;
        if (fstat(fd, &st) != 0) {
            close(fd);
            return;
        }
        reserve_dev[i] = st.st_dev;
        reserve_ino[i] = st.st_ino;
        __atomic_store_n(&reserve[i], fd, __ATOMIC_RELEASE);
        mt_fd_keep(&reserve[i]);
    }
}

/* Lets go of reserve descriptor i: closed only if still the agent's file
 * (a number the program closed with a raw system call and got back is the
 * program's, as fdguard.h says). 1 when a number was freed. */
static int release_one_locked(int i)
{
    int fd = __atomic_load_n(&reserve[i], __ATOMIC_ACQUIRE);
    if (fd < 0)
        return 0;
    __atomic_store_n(&reserve[i], -1, __ATOMIC_RELEASE); /* before the close: fdguard.h */
    if (!mt_file_fd_is(fd, reserve_dev[i], reserve_ino[i]))
        return 0;
    close(fd);
    return 1;
}

/* Lets go of the reserve descriptors numbered at or above `from`. */
static void reserve_release_locked(long from)
{
    for (int i = 0; i < NRESERVE; i++)
        if (__atomic_load_n(&reserve[i], __ATOMIC_ACQUIRE) >= from)
            release_one_locked(i);
}

/* A bounded try; at once 0 on the thread that holds it (a handler that
 * interrupted it, e.g. a query's on a thread in fork or in a report). */
static int reserve_lock(void)
{
    long me = gettid();
    if (atomic_load_explicit(&reserve_owner, memory_order_relaxed) == me)
        return 0;
    for (int tries = 0; tries < 1000; tries++) {
        long none = 0;
        if (atomic_compare_exchange_strong_explicit(&reserve_owner, &none, me, memory_order_acquire,
                                                    memory_order_relaxed))
            return 1;
        sched_yield();
    }
    return 0;
}

static void reserve_unlock(void)
{
    atomic_store_explicit(&reserve_owner, 0, memory_order_release);
}

void mt_rlimit_reserve_take(void)
{
    if (!reserve_lock())
        return;
    reserve_take_locked();
    reserve_unlock();
}

/* The program set its descriptor limit: a reserve descriptor at or above
 * the new soft limit is no room below it; it moves under it. */
static void reserve_replace(const struct rlimit *set)
{
    if (set->rlim_cur == RLIM_INFINITY || !reserve_lock())
        return;
    reserve_release_locked((long)set->rlim_cur);
    reserve_take_locked();
    reserve_unlock();
}

void mt_rlimit_report_begin(void)
{
    if (!reserve_lock())
        return;
    reserve_release_locked(0);
    report_holds = 1;
    reserve_unlock();
}

void mt_rlimit_report_end(void)
{
    if (!reserve_lock())
        return;
    report_holds = 0;
    reserve_take_locked();
    reserve_unlock();
}

void mt_rlimit_give_back(void)
{
    if (!reserve_lock())
        return;
    if (!report_holds)
        reserve_take_locked();
    reserve_unlock();
}

/* The control socket at the limit (control.c): a query's connection, or a
 * fork child's listening socket, gets one reserve number. A report needs
 * one descriptor at a time (report_write.c reads the address space before
 * it opens its file; without a second, vm_scan.c counts split mappings'
 * resident pages with mincore instead of pagemap), so one is enough for
 * it meanwhile. The number comes back with mt_rlimit_give_back once the
 * connection is closed. */
int mt_rlimit_lend(void)
{
    if (!reserve_lock())
        return 0;
    int lent = 0;
    for (int i = NRESERVE - 1; i >= 0 && !lent; i--)
        lent = release_one_locked(i);
    reserve_unlock();
    return lent;
}

/* A fork: no reserve operation half done in the child. In the child the
 * lock is let go even when the try failed: its holder, another thread of
 * the parent's, is not there (its operation is lost, at worst a number). */
static int fork_locked;
static pid_t fork_parent;
void mt_rlimit_before_fork(void)
{
    fork_parent = getpid();
    fork_locked = reserve_lock();
}

void mt_rlimit_after_fork(void)
{
    if (fork_locked || getpid() != fork_parent)
        reserve_unlock();
    fork_locked = 0;
}

/* A child made without fork handlers (_Fork): another thread may have
 * held the lock, half through taking or letting go of the reserve. */
void mt_rlimit_reset_after_fork(void)
{
    fork_locked = 0;
    report_holds = 0; /* a report another thread was writing: not in the child */
    reserve_unlock();
    mt_rlimit_reserve_take();
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
    int rc = real(pid, res, new, old);
    if (rc == 0 && new && (int)res == RLIMIT_NOFILE && self(pid) && tracking() && mt_own_process()) {
        int saved_errno = errno;
        mt_agent_enter();
        reserve_replace(new);
        mt_agent_leave();
        errno = saved_errno;
    }
    return rc;
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
