/* vm_regions.c — the table of known address ranges and their categories
 * (see vm.h). A sorted array in memory of its own, grown by doubling; all
 * changes under one lock. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/vm.h"

mt_vm_range *mt_vm_table;
size_t mt_vm_count;
static size_t capacity;
int64_t mt_vm_mapped[MT_NCAT], mt_vm_mapped_peak[MT_NCAT];

static void count(unsigned cat, int64_t bytes)
{
    if (cat >= MT_NCAT)
        return;
    mt_vm_mapped[cat] += bytes;
    if (mt_vm_mapped[cat] > mt_vm_mapped_peak[cat])
        mt_vm_mapped_peak[cat] = mt_vm_mapped[cat];
}
static atomic_flag vm_busy = ATOMIC_FLAG_INIT;

void mt_vm_lock(void)
{
    mt_t.vm_locked++; /* before taking it: a handler arriving now must not wait */
    /* The holder may be inside a system call: yield rather than spin long. */
    for (int n = 0; atomic_flag_test_and_set_explicit(&vm_busy, memory_order_acquire); n++) {
        if (n > 64)
            sched_yield();
        else
            __builtin_ia32_pause();
    }
}

/* A terminating signal that landed while this thread held (or waited
 * for) the table waits for it, as for the agent's other work (crash.c):
 * the last release sends it again, unless the agent's work goes on. */
static void vm_locked_drop(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (--mt_t.vm_locked == 0)
        mt_crash_resend_if_free();
}

int mt_vm_trylock(long spins)
{
    if (mt_t.vm_locked) /* this very thread holds it: a handler interrupted it */
        return -1;
    mt_t.vm_locked++;
    for (long n = 0; atomic_flag_test_and_set_explicit(&vm_busy, memory_order_acquire); n++) {
        if (n >= spins) {
            vm_locked_drop();
            return -1;
        }
        __builtin_ia32_pause();
    }
    return 0;
}

void mt_vm_unlock(void)
{
    atomic_flag_clear_explicit(&vm_busy, memory_order_release);
    vm_locked_drop();
}

void mt_vm_reset_after_fork(void)
{
    atomic_flag_clear_explicit(&vm_busy, memory_order_release);
    mt_t.vm_locked = 0;
}

void mt_vm_before_fork(void)
{
    mt_vm_lock();
}
void mt_vm_after_fork(void)
{
    mt_vm_unlock();
}

size_t mt_vm_first_after(uintptr_t addr)
{
    size_t lo = 0, hi = mt_vm_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mt_vm_table[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void insert_at(size_t i, mt_vm_range r)
{
    count(r.cat, (int64_t)(r.end - r.start));
    memmove(&mt_vm_table[i + 1], &mt_vm_table[i], (mt_vm_count - i) * sizeof r);
    mt_vm_table[i] = r;
    mt_vm_count++;
}

static void remove_at(size_t i)
{
    count(mt_vm_table[i].cat, -(int64_t)(mt_vm_table[i].end - mt_vm_table[i].start));
    memmove(&mt_vm_table[i], &mt_vm_table[i + 1], (mt_vm_count - i - 1) * sizeof *mt_vm_table);
    mt_vm_count--;
}

/* Removes [s, e) from the table. `room`: a split may insert one range;
 * without room the upper part is dropped (unknown beats stale). A thread
 * stack is only ever unmapped whole, so any cut into one drops it all. */
static void forget_range(uintptr_t s, uintptr_t e, int room)
{
    size_t i = mt_vm_first_after(s);
    while (i < mt_vm_count && mt_vm_table[i].start < e) {
        mt_vm_range *r = &mt_vm_table[i];
        if (r->flags & MT_VM_STACK) {
            remove_at(i);
            continue;
        }
        if (r->start < s && r->end > e && !room) {
            count(r->cat, -(int64_t)(r->end - s));
            r->end = s;
            return;
        }
        if (r->start < s && r->end > e) { /* a hole in the middle: split */
            mt_vm_range upper = *r;
            upper.start = e;
            upper.guard = 0;
            count(r->cat, -(int64_t)(r->end - s));
            r->end = s;
            insert_at(i + 1, upper);
            return;
        }
        if (r->start < s) {
            count(r->cat, -(int64_t)(r->end - s));
            r->end = s;
            i++;
        } else if (r->end > e) {
            uintptr_t cut = e - r->start;
            count(r->cat, -(int64_t)cut);
            r->guard = r->guard > cut ? (uint32_t)(r->guard - cut) : 0;
            r->start = e;
            return;
        } else {
            remove_at(i);
        }
    }
}

/* Room for `more` ranges; the table's own memory is a range of the agent's.
 * Called with the lock held, so it maps with the raw system call (our
 * interposed mmap would take the lock again). */
static int reserve(size_t more)
{
    if (mt_vm_count + more <= capacity)
        return 0;
    size_t ncap = capacity ? capacity * 2 : 4096 / sizeof(mt_vm_range) * 4;
    while (ncap < mt_vm_count + more + 2)
        ncap *= 2;
    size_t bytes = (ncap * sizeof(mt_vm_range) + 4095) & ~(size_t)4095;
    void *p =
        (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    mt_vm_range *old = mt_vm_table;
    size_t old_bytes = (capacity * sizeof(mt_vm_range) + 4095) & ~(size_t)4095;
    if (old)
        memcpy(p, old, mt_vm_count * sizeof *old);
    mt_vm_table = p;
    capacity = bytes / sizeof(mt_vm_range);
    if (old) {
        syscall(SYS_munmap, old, old_bytes);
        forget_range((uintptr_t)old, (uintptr_t)old + old_bytes, 1);
    }
    mt_vm_range self = {(uintptr_t)p, (uintptr_t)p + bytes, 0, MT_CAT_OVERHEAD, 0};
    forget_range(self.start, self.end, 1);
    insert_at(mt_vm_first_after(self.start), self);
    return 0;
}

void mt_vm_record(uintptr_t start, uintptr_t end, unsigned cat, unsigned flags, uint32_t guard)
{
    if (end <= start)
        return;
    int room = reserve(2) == 0; /* the new range, and a split in forget_range */
    forget_range(start, end, room);
    if (room) {
        mt_vm_range r = {start, end, guard, (uint8_t)cat, (uint8_t)flags};
        insert_at(mt_vm_first_after(start), r);
    }
}

void mt_vm_forget(uintptr_t start, uintptr_t end)
{
    if (end > start)
        forget_range(start, end, reserve(1) == 0);
}

void mt_vm_moved(uintptr_t old, size_t oldlen, uintptr_t new_start, size_t newlen)
{
    size_t i = mt_vm_first_after(old);
    int known = i < mt_vm_count && mt_vm_table[i].start <= old;
    mt_vm_range r = known ? mt_vm_table[i] : (mt_vm_range){0};
    if (oldlen)
        mt_vm_forget(old, old + oldlen);
    if (known) /* the moved range keeps its category */
        mt_vm_record(new_start, new_start + newlen, r.cat, r.flags & ~MT_VM_STACK, 0);
    else /* not ours before, not ours now */
        mt_vm_forget(new_start, new_start + newlen);
}
