/* fdguard.c — the agent's long-lived descriptors, kept from the program's
 * close, close_range, closefrom, dup2 and dup3.
 *
 * The agent keeps a few descriptors open for the process's life: its
 * trace and event files, the query socket, the reference-set socket, the
 * report kept open across a change of user id, /proc files it reads
 * often. Programs close descriptors they did not open: a daemon closes
 * everything from 3 up, a child before exec does too. Had the program
 * closed the trace file's number and then opened a file of its own, the
 * kernel would have given it that number, and the agent's next write
 * would have gone into the program's file (a trace under Python's
 * os.closerange(3, 4096) wrote 19 KB of it into the sixth file the
 * program opened).
 *
 * So each such descriptor is registered here by the address of the
 * variable that holds it (mt_fd_keep), and the program's calls that would
 * close it leave it open:
 * - close of a kept descriptor does nothing and returns 0: the number is
 *   still taken, so the kernel never hands it to the program;
 * - close_range and closefrom close the rest of the range;
 * - dup2 and dup3 onto a kept descriptor first move the agent's to
 *   another number (F_DUPFD_CLOEXEC, high), stored into the variable,
 *   then let the program have the number it asked for. An agent thread
 *   that read the old number just before the move and writes just after
 *   the program's dup2 would still write into the program's descriptor:
 *   that window is a few instructions wide, and needs the program to
 *   aim dup2 at the agent's number.
 * Calls made by the agent itself (in_agent) and by a vfork child (which
 * shares the variables with its parent, but not the descriptor table)
 * are passed through as they are. An owner clears its variable before it
 * closes the descriptor, so that close is the real one. A raw close system
 * call is not seen; a number it freed that the program got back is told
 * from the agent's by the file behind it (keeper), and let go. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/fdguard.h"
#include "common/safe_file.h"

#define KEPT_MAX 32
/* A kept variable, and the file its descriptor was open on when its owner
 * last stored it (mt_fd_keep): a number the program got back after a
 * close the hooks did not see (a raw system call) is the program's. */
typedef struct {
    int *_Atomic where;
    _Atomic uint64_t dev, ino;
} kept_slot;
/* On a page of its own, written at start-up (mt_fd_guard_init): a
 * reference set must not see the agent touch a page of its own data for
 * the first time in the middle of the program's run. With the array in
 * the middle of the agent's data, another variable moved onto a page
 * first touched there (tests/refset/test_scenarios.sh: 4 KiB too many). */
static kept_slot kept[KEPT_MAX] __attribute__((aligned(4096)));
static atomic_int nkept; /* slots ever used: 0, and the hooks have nothing to look at */
/* Calls looking at kept variables right now: mt_fd_forget waits for them
 * to be done before its caller lets the variable's memory go. */
static atomic_uint readers;

static void enter(void)
{
    atomic_fetch_add(&readers, 1);
}

static void leave(void)
{
    atomic_fetch_sub(&readers, 1);
}

static __attribute__((noinline)) void note_file(kept_slot *k, int fd)
{
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        atomic_store(&k->dev, (uint64_t)st.st_dev);
        atomic_store(&k->ino, (uint64_t)st.st_ino);
    }
}

void mt_fd_keep(int *where)
{
    int fd = __atomic_load_n(where, __ATOMIC_ACQUIRE);
    for (int i = 0; i < KEPT_MAX; i++) {
        int *none = NULL;
        if (atomic_load(&kept[i].where) == where) {
            note_file(&kept[i], fd);
            return;
        }
        if (atomic_load(&kept[i].where) == NULL) {
            note_file(&kept[i], fd); /* before it is visible */
            if (atomic_compare_exchange_strong(&kept[i].where, &none, where)) {
                if (atomic_load(&nkept) < i + 1)
                    atomic_store(&nkept, i + 1);
                return;
            }
        }
    }
    /* full: that descriptor goes unguarded, as before this file existed */
}

void mt_fd_forget(int *where)
{
    for (int i = 0; i < KEPT_MAX; i++) {
        int *w = where;
        if (atomic_compare_exchange_strong(&kept[i].where, &w, NULL))
            break;
    }
    /* A close on another thread may have read the pointer just before.
     * Bounded: a signal handler that forgets while its own thread is
     * inside close would otherwise wait for ever. */
    for (int spins = 0; atomic_load(&readers) != 0 && spins < 100000; spins++)
        sched_yield();
}

void mt_fd_after_fork_child(void)
{
    /* only the forking thread lives on: no other is inside a hook */
    atomic_store(&readers, 0);
}

/* Whether fd is the file noted in k. Out of line, with its struct stat:
 * close's own frame stays as small as it was, so a program's close near
 * the end of its stack touches no deeper page (a reference set would
 * count it: tests/refset/test_scenarios.sh). */
static __attribute__((noinline)) int same_file(kept_slot *k, int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (uint64_t)st.st_dev == atomic_load(&k->dev) &&
           (uint64_t)st.st_ino == atomic_load(&k->ino);
}

/* The slot whose variable holds fd, when fd is still the file it was
 * stored with, else NULL. A number that no longer is (the program closed
 * it behind the hooks' back, and got it again) is let go: the variable
 * is set to -1, which its owner takes as closed. Between enter and leave. */
static kept_slot *keeper(int fd)
{
    if (fd < 0)
        return NULL;
    int n = atomic_load(&nkept);
    for (int i = 0; i < n; i++) {
        int *w = atomic_load(&kept[i].where);
        if (!w || __atomic_load_n(w, __ATOMIC_ACQUIRE) != fd)
            continue;
        if (same_file(&kept[i], fd))
            return &kept[i];
        int want = fd;
        __atomic_compare_exchange_n(w, &want, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return NULL;
    }
    return NULL;
}

/* Whether the program's call should be guarded at all. */
static int guarding(void)
{
    return mt_t.in_agent == 0 && mt_own_process();
}

/* ---- the real functions ---------------------------------------------------
 * Found at start-up (mt_fd_guard_init); before that, the system calls. */

typedef int (*close_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef void (*closefrom_fn)(int);
typedef int (*pipe2_fn)(int *, int);
static close_fn real_close;
static pipe2_fn real_pipe2;
static dup2_fn real_dup2;
static dup3_fn real_dup3;
static closefrom_fn real_closefrom;

void mt_fd_guard_init(void)
{
    /* Written now, so their pages are the process's from start-up on:
     * read for the first time by a close later, they would appear then
     * (a reference set counts them: tests/refset/test_scenarios.sh). */
    for (int i = 0; i < KEPT_MAX; i++) {
        atomic_store(&kept[i].where, NULL);
        atomic_store(&kept[i].dev, 0);
        atomic_store(&kept[i].ino, 0);
    }
    atomic_store(&nkept, 0);
    atomic_store(&readers, 0);
    real_close = (close_fn)dlsym(RTLD_NEXT, "close");
    real_dup2 = (dup2_fn)dlsym(RTLD_NEXT, "dup2");
    real_dup3 = (dup3_fn)dlsym(RTLD_NEXT, "dup3");
    real_closefrom = (closefrom_fn)dlsym(RTLD_NEXT, "closefrom");
    real_pipe2 = (pipe2_fn)dlsym(RTLD_NEXT, "pipe2");
}

static int do_close(int fd)
{
    return real_close ? real_close(fd) : (int)syscall(SYS_close, fd);
}

static int do_close_range(unsigned first, unsigned last, int flags)
{
    return (int)syscall(SYS_close_range, first, last, flags);
}

/* ---- the entry points ------------------------------------------------------ */

MT_EXPORT int close(int fd)
{
    if (MT_UNLIKELY(atomic_load_explicit(&nkept, memory_order_relaxed) != 0)) {
        enter();
        int kept_fd = keeper(fd) != NULL;
        leave();
        if (kept_fd && guarding())
            return 0;
    }
    return do_close(fd);
}

/* The kept descriptors in [first, last], ascending, into out; their
 * count. Between enter and leave. */
static int kept_in(unsigned first, unsigned last, unsigned *out)
{
    int n = 0, slots = atomic_load(&nkept);
    for (int i = 0; i < slots; i++) {
        int *w = atomic_load(&kept[i].where);
        int fd = w ? __atomic_load_n(w, __ATOMIC_ACQUIRE) : -1;
        if (fd < 0 || (unsigned)fd < first || (unsigned)fd > last || keeper(fd) == NULL)
            continue;
        int j = n++;
        for (; j > 0 && out[j - 1] > (unsigned)fd; j--)
            out[j] = out[j - 1];
        out[j] = (unsigned)fd;
    }
    return n;
}

/* close_range around the kept descriptors: the gaps between them. */
static int close_gaps(unsigned first, unsigned last, int flags, const unsigned *k, int n)
{
    unsigned lo = first;
    for (int i = 0; i < n; i++) {
        if (k[i] > lo && do_close_range(lo, k[i] - 1, flags) < 0)
            return -1;
        lo = k[i] + 1;
        if (k[i] == UINT_MAX || lo > last)
            return 0;
    }
    return do_close_range(lo, last, flags);
}

MT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    unsigned k[KEPT_MAX];
    /* CLOSE_RANGE_CLOEXEC closes nothing now (the agent's are close-on-exec already) */
    if ((flags & CLOSE_RANGE_CLOEXEC) || first > last || atomic_load(&nkept) == 0)
        return do_close_range(first, last, flags);
    enter();
    int n = kept_in(first, last, k);
    leave();
    if (n == 0 || !guarding())
        return do_close_range(first, last, flags);
    return close_gaps(first, last, flags, k, n);
}

MT_EXPORT void closefrom(int lowfd)
{
    unsigned first = lowfd < 0 ? 0 : (unsigned)lowfd, k[KEPT_MAX];
    enter();
    int n = kept_in(first, UINT_MAX, k);
    leave();
    if (n > 0 && !guarding())
        n = 0;
    if (n == 0) {
        if (real_closefrom)
            real_closefrom(lowfd);
        else
            (void)do_close_range(first, UINT_MAX, 0);
        return;
    }
    if (close_gaps(first, UINT_MAX, 0, k, n) == 0 || errno != ENOSYS)
        return;
    /* A kernel without close_range: one by one up to the last kept, then
     * libc's way above it. */
    for (unsigned fd = first, i = 0; fd < k[n - 1]; fd++) {
        while (i < (unsigned)n && k[i] < fd)
            i++;
        if (k[i] != fd)
            (void)do_close((int)fd);
    }
    if (real_closefrom && k[n - 1] < INT_MAX)
        real_closefrom((int)k[n - 1] + 1);
}

/* Moves the agent's descriptor held in k's variable (== fd) to another
 * number, so that the program may have fd. When it cannot (no number
 * free), the agent lets it go: the variable becomes -1 (its owner takes
 * it as closed) and the program's call goes ahead. */
static void move_kept(kept_slot *k, int fd)
{
    int *w = atomic_load(&k->where), want = fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (moved >= 0)
        moved = mt_file_fd_high(moved);
    if (!w || !__atomic_compare_exchange_n(w, &want, moved, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (moved >= 0)
            (void)do_close(moved); /* its owner changed it meanwhile: fd is no longer the agent's */
    }
}

/* Before dup2 or dup3 makes newfd a copy of oldfd: newfd, if the agent's,
 * moved out of the way. Only when the call can succeed (a valid oldfd),
 * and leaving errno as it was. */
static void free_number(int oldfd, int newfd)
{
    if (oldfd == newfd || atomic_load_explicit(&nkept, memory_order_relaxed) == 0)
        return;
    int saved = errno;
    enter();
    kept_slot *k = keeper(newfd);
    if (k && guarding() && fcntl(oldfd, F_GETFD) >= 0)
        move_kept(k, newfd);
    leave();
    errno = saved;
}

MT_EXPORT int dup2(int oldfd, int newfd)
{
    free_number(oldfd, newfd);
    return real_dup2 ? real_dup2(oldfd, newfd) : (int)syscall(SYS_dup2, oldfd, newfd);
}

MT_EXPORT int dup3(int oldfd, int newfd, int flags)
{
    free_number(oldfd, newfd);
    return real_dup3 ? real_dup3(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

/* A pipe made while the agent works: libunwind's memory-validation pipe,
 * which it makes when it is set up (mt_site_walk_init) and again when it
 * finds it closed, and keeps for the process's life. It reads a byte from
 * one end and writes one (from the address it checks) into the other, so
 * had the program closed those numbers (closefrom) and opened files of its
 * own on them, libunwind would take a byte from one of the program's files
 * and write one into another. So, like the agent's own, both ends go high
 * (out of the program's way, as bare) and are kept, by the address of
 * libunwind's own array, which pipe2 is given. Only a call from libunwind's
 * code inside the agent's work is taken for it (a program's signal handler
 * interrupting the agent makes pipes of its own). */
int unw_backtrace(void **buffer, int size); /* libunwind's, for where its code lies */

static int from_libunwind(uintptr_t ra)
{
    static uintptr_t lo, hi; /* written once; a race writes the same values */
    if (!hi) {
        struct dl_find_object f;
        if (_dl_find_object((void *)(uintptr_t)unw_backtrace, &f) != 0)
            return 0;
        lo = (uintptr_t)f.dlfo_map_start;
        hi = (uintptr_t)f.dlfo_map_end;
    }
    return ra - lo < hi - lo;
}

MT_EXPORT int pipe2(int fds[2], int flags)
{
    if (mt_t.in_agent == 0 || !from_libunwind((uintptr_t)__builtin_return_address(0)))
        return real_pipe2 ? real_pipe2(fds, flags) : (int)syscall(SYS_pipe2, fds, flags);
    if (!mt_own_process()) {
        /* A vfork child, which shares libunwind's array with its parent
         * but not the descriptor table: numbers written there would be the
         * parent's files. No pipe: the child's libunwind takes the
         * addresses it would check as unreadable. */
        errno = EMFILE;
        return -1;
    }
    int got[2];
    int rc = real_pipe2 ? real_pipe2(got, flags) : (int)syscall(SYS_pipe2, got, flags);
    if (rc != 0)
        return rc;
    int saved = errno;
    got[0] = mt_file_fd_kept_high(got[0]);
    got[1] = mt_file_fd_kept_high(got[1]);
    if (got[0] < 0 || got[1] < 0) {
        /* A descriptor limit too small to keep them out of the program's
         * way: no pipe (EMFILE). libunwind then takes the addresses it
         * would check as unreadable, and its frame-chain guesses stop
         * there. */
        for (int i = 0; i < 2; i++)
            if (got[i] >= 0)
                (void)do_close(got[i]);
        errno = EMFILE;
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        __atomic_store_n(&fds[i], got[i], __ATOMIC_RELEASE);
        mt_fd_keep(&fds[i]);
    }
    errno = saved;
    return 0;
}
