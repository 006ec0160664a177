/* vm_hooks.c — the interposed virtual memory calls: mmap, mmap64, munmap,
 * mremap, brk, sbrk, and pthread_create (for thread stacks). Each records
 * what it changed in the range table (vm.h). The system call is made under
 * the table lock, so the table and the kernel agree for these ranges even
 * when threads race to unmap and map the same addresses.
 *
 * With refset_fd set, each also tells `memtrail refset record` what it
 * mapped or unmapped (refset_events.h), under the same lock, so the
 * recorder sees changes to the same addresses in the order they happened.
 *
 * mprotect and madvise need no hook here: protection and residency are
 * read from the kernel when a report is written (vm_scan.c); madvise's
 * discards go to the recorder from refset_events.c. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/allocator.h"
#include "agent/counters.h"
#include "agent/meminfo.h"
#include "agent/refset_events.h"
#include "agent/sessions.h"
#include "agent/span.h"
#include "agent/vm.h"

#define PAGE_UP(x) (((uintptr_t)(x) + 4095) & ~(uintptr_t)4095)

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static pthread_create_fn real_pthread_create;

/* glibc's own names for brk and sbrk: they keep its idea of the break
 * (__curbrk) right, which a raw system call would not. */
extern int __brk(void *addr);
extern void *__sbrk(intptr_t increment);

void mt_vm_init(void)
{
    real_pthread_create = (pthread_create_fn)dlvsym(RTLD_NEXT, "pthread_create", "GLIBC_2.34");
    if (!real_pthread_create)
        real_pthread_create = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
}

/* Tracking VM calls: once the agent runs and tracks (start it if a mapping
 * comes first). */
static int vm_tracking(void)
{
    mt_start();
    return atomic_load_explicit(&mt_hot, memory_order_relaxed);
}

/* The category of a mapping the calling thread makes now. */
static unsigned new_mapping_category(int file, uintptr_t caller)
{
    if (mt_t.in_agent)
        return MT_CAT_OVERHEAD;
    /* Memory another allocator maps for malloc (glibc's own mappings do
     * not come through here: vm_scan.c recognises them). */
    if (!file && caller - mt_alloc_text_lo < mt_alloc_text_hi - mt_alloc_text_lo)
        return MT_CAT_HEAP;
    if (mt_t.cat != MT_CAT_MALLOC)
        return mt_t.cat;
    return file ? MT_CAT_FILES : MT_CAT_MMAP;
}

static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (off & 4095) { /* as glibc's wrapper */
        errno = EINVAL;
        return MAP_FAILED;
    }
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* caller: the exported function's return address (new_mapping_category). */
static void *mmap_call(void *addr, size_t len, int prot, int flags, int fd, off_t off, uintptr_t caller)
{
    /* The agent's own mappings are recorded even while it starts. A handler
     * that interrupted this thread inside the table lock maps unrecorded. */
    if (mt_t.vm_locked || (!mt_t.in_agent && !vm_tracking()))
        return sys_mmap(addr, len, prot, flags, fd, off);
    int file = !(flags & MAP_ANONYMOUS);
    unsigned cat = new_mapping_category(file, caller);
    unsigned vflags = file ? MT_VM_FILE : (flags & MAP_TYPE) == MAP_PRIVATE ? 0 : MT_VM_SHARED;
    mt_rs_agent_msg rs;
    int to_rs = mt_rs_active() && !mt_t.in_agent;
    if (to_rs)
        mt_rs_capture(&rs);
    mt_vm_lock();
    void *p = sys_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) {
        int saved = errno;
        mt_vm_record((uintptr_t)p, PAGE_UP((uintptr_t)p + len), cat, vflags, 0);
        errno = saved;
        if (to_rs && (flags & MAP_FIXED)) /* what was there went, pages and all */
            mt_rs_send_range(MT_RS_AG_UNMAP, (uintptr_t)p, PAGE_UP(len));
        if (to_rs)
            mt_rs_send(&rs, MT_RS_AG_MAP, mt_rs_map_category(cat, vflags), (uintptr_t)p, PAGE_UP(len));
    }
    mt_vm_unlock();
    /* The agent's own mappings (session buffers among them) are no events. */
    if (p != MAP_FAILED && !mt_t.in_agent) {
        mt_vm_event(XE_EV_MMAP, p, len, cat);
        /* Memory taken from the OS: not a file's pages, not a PROT_NONE
         * reservation. Never sampled here: a signal handler's mmap may
         * have interrupted this thread inside the allocator (mallinfo2
         * would wait for a lock this thread holds), and another
         * allocator's lock may be held. */
        if (!file && prot != PROT_NONE)
            mt_info_event(MT_EVENT_GROW, 0);
    }
    return p;
}

/* The category the table gives the range at addr (MT_CAT_MMAP if none):
 * an unmap event's. With the table lock held. */
static unsigned range_category(const void *addr)
{
    size_t i = mt_vm_first_after((uintptr_t)addr);
    return i < mt_vm_count && mt_vm_table[i].start <= (uintptr_t)addr ? mt_vm_table[i].cat : MT_CAT_MMAP;
}

/* The refset category of the range at addr (VirtualAlloc if the table
 * does not know it). With the table lock held. */
static unsigned range_refset_category(const void *addr)
{
    size_t i = mt_vm_first_after((uintptr_t)addr);
    if (i < mt_vm_count && mt_vm_table[i].start <= (uintptr_t)addr)
        return mt_rs_map_category(mt_vm_table[i].cat, mt_vm_table[i].flags);
    return RS_CAT_VIRTUALALLOC;
}

static int munmap_call(void *addr, size_t len)
{
    if (mt_t.vm_locked || (!mt_t.in_agent && !vm_tracking()))
        return (int)syscall(SYS_munmap, addr, len);
    unsigned cat = MT_CAT_MMAP;
    mt_vm_lock();
    int rc = (int)syscall(SYS_munmap, addr, len);
    if (rc == 0) {
        int saved = errno;
        cat = range_category(addr); /* the event's: the range's, as the table had it */
        mt_vm_forget((uintptr_t)addr, PAGE_UP((uintptr_t)addr + len));
        errno = saved;
        if (mt_rs_active() && !mt_t.in_agent)
            mt_rs_send_range(MT_RS_AG_UNMAP, (uintptr_t)addr, PAGE_UP(len));
    }
    mt_vm_unlock();
    if (rc == 0 && !mt_t.in_agent) {
        mt_vm_event(XE_EV_MUNMAP, addr, len, cat);
        if (cat != MT_CAT_FILES) /* sampled never: see mmap_call */
            mt_info_event(MT_EVENT_TRIM, 0);
    }
    return rc;
}

/* An mremap as the recorder sees it: in place, the added or removed
 * tail; moved, the old range goes (its pages only, with DONTUNMAP; with
 * oldlen 0 it stays), what MREMAP_FIXED replaced goes, and the new range
 * comes, with the mremap's stack. */
static void remap_to_refset(mt_rs_agent_msg *rs, unsigned cat, uintptr_t old, size_t oldlen, uintptr_t p,
                            size_t newlen, int flags)
{
    uintptr_t o = PAGE_UP(oldlen), n = PAGE_UP(newlen);
    if (p == old) {
        if (n > o)
            mt_rs_send(rs, MT_RS_AG_MAP, cat, old + o, n - o);
        else if (n < o)
            mt_rs_send_range(MT_RS_AG_UNMAP, old + n, o - n);
        return;
    }
    if (oldlen && (flags & MREMAP_DONTUNMAP))
        mt_rs_send_range(MT_RS_AG_DISCARD, old, o);
    else if (oldlen)
        mt_rs_send_range(MT_RS_AG_UNMAP, old, o);
    if (flags & MREMAP_FIXED)
        mt_rs_send_range(MT_RS_AG_UNMAP, p, n);
    mt_rs_send(rs, MT_RS_AG_MAP, cat, p, n);
}

static void *mremap_call(void *old, size_t oldlen, size_t newlen, int flags, void *want)
{
    if (mt_t.vm_locked || !vm_tracking())
        return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, want);
    mt_rs_agent_msg rs;
    int to_rs = mt_rs_active() && !mt_t.in_agent;
    if (to_rs)
        mt_rs_capture(&rs);
    mt_vm_lock();
    unsigned cat = range_category(old);
    unsigned rs_cat = to_rs ? range_refset_category(old) : 0;
    void *p = (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, want);
    /* oldlen 0 (a second mapping of shared memory) and MREMAP_DONTUNMAP
     * leave the old range mapped. */
    size_t gone = (oldlen == 0 || (flags & MREMAP_DONTUNMAP)) ? 0 : PAGE_UP(oldlen);
    if (p != MAP_FAILED) {
        int saved = errno;
        mt_vm_moved((uintptr_t)old, gone, (uintptr_t)p, PAGE_UP(newlen));
        errno = saved;
        if (to_rs)
            remap_to_refset(&rs, rs_cat, (uintptr_t)old, oldlen, (uintptr_t)p, newlen, flags);
    }
    mt_vm_unlock();
    /* As events: the old range goes, the new one comes. */
    if (p != MAP_FAILED && !mt_t.in_agent) {
        if (gone)
            mt_vm_event(XE_EV_MUNMAP, old, oldlen, cat);
        mt_vm_event(XE_EV_MMAP, p, newlen, cat);
        if (newlen != (gone ? oldlen : 0)) /* memory info */
            mt_info_event(newlen > (gone ? oldlen : 0) ? MT_EVENT_GROW : MT_EVENT_TRIM, 0);
    }
    return p;
}

/* The program's own use of the break (glibc's malloc moves it without
 * coming here; that part of [heap] is malloc's). */
static unsigned break_moved(uintptr_t before, uintptr_t after, uintptr_t caller)
{
    unsigned cat = new_mapping_category(0, caller);
    if (after > before)
        mt_vm_record(PAGE_UP(before), PAGE_UP(after), cat, 0, 0);
    else if (after < before)
        mt_vm_forget(PAGE_UP(after), PAGE_UP(before));
    return cat;
}

/* The move as an event, once the table lock is let go (a session may make
 * the thread wait for a buffer). */
static void break_event(uintptr_t before, uintptr_t after, unsigned cat)
{
    if (before == after || mt_t.in_agent)
        return;
    if (after > before)
        mt_vm_event(XE_EV_MMAP, (void *)before, after - before, cat);
    else
        mt_vm_event(XE_EV_MUNMAP, (void *)after, before - after, cat);
    mt_info_event(after > before ? MT_EVENT_GROW : MT_EVENT_TRIM, 0);
}

/* The pages the break gained (Heap, with the call's stack) or lost. */
static void break_to_refset(mt_rs_agent_msg *rs, uintptr_t before, uintptr_t after)
{
    uintptr_t b = PAGE_UP(before), a = PAGE_UP(after);
    if (a > b)
        mt_rs_send(rs, MT_RS_AG_MAP, RS_CAT_HEAP, b, a - b);
    else if (a < b)
        mt_rs_send_range(MT_RS_AG_UNMAP, a, b - a);
}

static int brk_call(void *addr, uintptr_t caller)
{
    if (mt_t.vm_locked || !vm_tracking())
        return __brk(addr);
    mt_rs_agent_msg rs;
    int to_rs = mt_rs_active() && !mt_t.in_agent;
    if (to_rs)
        mt_rs_capture(&rs);
    mt_vm_lock();
    uintptr_t before = (uintptr_t)__sbrk(0), after = before;
    unsigned cat = 0;
    int rc = __brk(addr);
    if (rc == 0) {
        int saved = errno;
        after = (uintptr_t)__sbrk(0);
        cat = break_moved(before, after, caller);
        errno = saved;
        if (to_rs)
            break_to_refset(&rs, before, after);
    }
    mt_vm_unlock();
    break_event(before, after, cat);
    return rc;
}

static void *sbrk_call(intptr_t increment, uintptr_t caller)
{
    if (mt_t.vm_locked || !vm_tracking() || increment == 0)
        return __sbrk(increment);
    mt_rs_agent_msg rs;
    int to_rs = mt_rs_active() && !mt_t.in_agent;
    if (to_rs && increment > 0)
        mt_rs_capture(&rs);
    else
        rs.nframes = 0;
    mt_vm_lock();
    void *old = __sbrk(increment);
    unsigned cat = 0;
    if (old != (void *)-1) {
        int saved = errno;
        cat = break_moved((uintptr_t)old, (uintptr_t)old + (uintptr_t)increment, caller);
        errno = saved;
        if (to_rs)
            break_to_refset(&rs, (uintptr_t)old, (uintptr_t)old + (uintptr_t)increment);
    }
    mt_vm_unlock();
    if (old != (void *)-1)
        break_event((uintptr_t)old, (uintptr_t)old + (uintptr_t)increment, cat);
    return old;
}

/* ---- the exported names --------------------------------------------------
 * Mapping calls are always timed (span.h), but the agent's own. */

MT_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    uintptr_t caller = (uintptr_t)__builtin_return_address(0);
    if (mt_t.in_agent)
        return mmap_call(addr, len, prot, flags, fd, off, caller);
    uint64_t t0 = mt_ticks();
    void *p = mmap_call(addr, len, prot, flags, fd, off, caller);
    mt_map_timed_end(t0);
    return p;
}

MT_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

MT_EXPORT int munmap(void *addr, size_t len)
{
    if (mt_t.in_agent)
        return munmap_call(addr, len);
    uint64_t t0 = mt_ticks();
    int rc = munmap_call(addr, len);
    mt_map_timed_end(t0);
    return rc;
}

MT_EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    if (mt_t.in_agent)
        return mremap_call(old, oldlen, newlen, flags, want);
    uint64_t t0 = mt_ticks();
    void *p = mremap_call(old, oldlen, newlen, flags, want);
    mt_map_timed_end(t0);
    return p;
}

MT_EXPORT int brk(void *addr)
{
    uintptr_t caller = (uintptr_t)__builtin_return_address(0);
    if (mt_t.in_agent)
        return brk_call(addr, caller);
    uint64_t t0 = mt_ticks();
    int rc = brk_call(addr, caller);
    mt_map_timed_end(t0);
    return rc;
}

MT_EXPORT void *sbrk(intptr_t increment)
{
    uintptr_t caller = (uintptr_t)__builtin_return_address(0);
    if (mt_t.in_agent)
        return sbrk_call(increment, caller);
    uint64_t t0 = mt_ticks();
    void *p = sbrk_call(increment, caller);
    mt_map_timed_end(t0);
    return p;
}

/* ---- thread stacks ----------------------------------------------------- */

typedef struct thread_start {
    void *(*fn)(void *);
    void *arg;
    int agent; /* created by the agent itself: its stack is overhead */
    int to_rs; /* refset: rs holds pthread_create's stack, sent with the thread's */
    mt_rs_agent_msg rs;
} thread_start;

/* Records the calling thread's stack block: [bottom - guard, top), which is
 * what glibc mapped for it (descriptor and static TLS included). With rs,
 * tells the recorder [bottom, top) is a thread's stack, made where rs's
 * frames say. */
static void record_own_stack(int agent, mt_rs_agent_msg *rs)
{
    pthread_attr_t a;
    if (agent) {
        /* The agent's own threads never call malloc: glibc would give the
         * thread an arena of its own (64 MiB of address space reserved, out
         * of a program's RLIMIT_AS), and pthread_getattr_np reallocs. Its
         * block, from the maps: the stack mapping and its guard below. */
        mt_vm_span sp;
        if (mt_vm_mapping_of((uintptr_t)__builtin_frame_address(0), &sp) == 0 && sp.guard_lo < sp.lo) {
            mt_t.stack_lo = sp.lo;
            mt_t.stack_hi = sp.hi;
            mt_vm_lock();
            mt_vm_record(sp.guard_lo, sp.hi, MT_CAT_OVERHEAD, MT_VM_STACK, (uint32_t)(sp.lo - sp.guard_lo));
            mt_vm_unlock();
        }
        return;
    }
    mt_agent_enter();
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        void *bottom = NULL;
        size_t size = 0, guard = 0;
        pthread_attr_getstack(&a, &bottom, &size);
        pthread_attr_getguardsize(&a, &guard);
        pthread_attr_destroy(&a);
        if (rs)
            mt_rs_send(rs, MT_RS_AG_STACK, RS_CAT_USERSTACK, (uintptr_t)bottom, size);
        guard = PAGE_UP(guard);
        uintptr_t lo = (uintptr_t)bottom - guard;
        /* Without a guard a stale record (glibc unmaps cached stacks
         * unseen) could not be told from a live one: leave it to the scan. */
        if (guard == 0) {
            mt_agent_leave();
            return;
        }
        mt_t.stack_lo = (uintptr_t)bottom; /* exact: no need for site.c to read the maps */
        mt_t.stack_hi = (uintptr_t)bottom + size;
        mt_vm_lock();
        mt_vm_record(lo, (uintptr_t)bottom + size, MT_CAT_STACKS, MT_VM_STACK, (uint32_t)guard);
        mt_vm_unlock();
    }
    mt_agent_leave();
}

/* pthread_attr_getstack reports the stored top minus the size; with no
 * stack set the stored top is NULL, so the two add up to zero. */
static int user_stack(const pthread_attr_t *attr)
{
    void *bottom = NULL;
    size_t size = 0;
    return pthread_attr_getstack(attr, &bottom, &size) == 0 && (uintptr_t)bottom + size != 0;
}

static void thread_end(void *unused)
{
    (void)unused;
    mt_span_thread_exit();
    mt_crash_thread_exit();
}

/* The start of a thread the agent creates goes in a page of its own
 * (mmap, not malloc: see record_own_stack). */
static thread_start *agent_start_new(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void *thread_trampoline(void *p)
{
    thread_start s = *(thread_start *)p;
    if (s.agent) {
        mt_agent_enter(); /* the agent's page: no event */
        munmap(p, 4096);
        mt_agent_leave();
    } else {
        mt_agent_enter();
        mt_real_fn.free(p);
        mt_agent_leave();
    }
    record_own_stack(s.agent, s.to_rs ? &s.rs : NULL);
    /* A thread the agent started (an event session's dispatcher) is the
     * agent's for its whole life: what it and libc do for it is neither
     * the program's memory nor the program's events. */
    if (s.agent)
        mt_agent_enter();
    /* Its own alternate signal stack, so a stack overflow still gets the
     * crash report; released however the thread ends. */
    mt_crash_thread_start();
    mt_span_thread_start();
    void *ret;
    pthread_cleanup_push(thread_end, NULL);
    ret = s.fn(s.arg);
    pthread_cleanup_pop(1);
    return ret;
}

MT_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (!real_pthread_create && !mt_t.in_agent) /* before start-up: find it now */
        mt_init_slow();
    if (!real_pthread_create)
        return EAGAIN;
    if (!vm_tracking())
        return real_pthread_create(t, attr, fn, arg);
    /* A stack the program supplies is its own memory, already counted. */
    if (attr && user_stack(attr))
        return real_pthread_create(t, attr, fn, arg);
    int agent = mt_t.in_agent > 0;
    thread_start *s;
    if (agent) {
        s = agent_start_new();
        if (!s)
            return real_pthread_create(t, attr, fn, arg);
    } else {
        mt_agent_enter();
        s = mt_real_fn.malloc(sizeof *s);
        mt_agent_leave();
        if (!s)
            return real_pthread_create(t, attr, fn, arg);
    }
    s->fn = fn;
    s->arg = arg;
    s->agent = agent;
    s->to_rs = !agent && mt_rs_active();
    if (s->to_rs)
        mt_rs_capture(&s->rs);
    int rc = real_pthread_create(t, attr, thread_trampoline, s);
    if (rc != 0) {
        if (agent)
            munmap(s, 4096);
        else {
            mt_agent_enter();
            mt_real_fn.free(s);
            mt_agent_leave();
        }
    }
    return rc;
}
