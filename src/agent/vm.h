/* vm.h — virtual memory tracking: which category each piece of the address
 * space belongs to.
 *
 * Like NMT's virtual memory tracker this keeps bookkeeping records, not
 * headers: a table of the ranges the program (and the agent) mapped through
 * the interposed mmap/mremap/munmap/brk/sbrk, each with its category, plus
 * the stacks of the threads created through pthread_create. The table is
 * changed under a lock (mappings are rare next to mallocs) held across the
 * system call, so the table always agrees with the kernel for the ranges it
 * knows.
 *
 * Sizes are never bookkept: when a report is written, vm_scan.c reads the
 * kernel's /proc/self/smaps and lays the table over it, so reserved,
 * committed and resident bytes are the kernel's own, and protection
 * changes and madvise discards need no tracking of their own. Ranges the
 * table does not know (glibc's arenas and mmapped blocks, the images the
 * loader mapped, kernel pages) are classified by origin there. */
#ifndef MT_AGENT_VM_H
#define MT_AGENT_VM_H

#include <stddef.h>
#include <stdint.h>
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

/* Range flags. */
#define MT_VM_FILE 1u   /* a file mapping (the program's untagged ones are "files") */
#define MT_VM_STACK 2u  /* a thread's stack block: its lowest `guard` bytes must be PROT_NONE */
#define MT_VM_SHARED 4u /* shared anonymous memory (its refset category, refset_events.h) */

typedef struct mt_vm_range {
    uintptr_t start, end;
    uint32_t guard; /* MT_VM_STACK: guard bytes at the bottom */
    uint8_t cat;    /* category index (counters.h) */
    uint8_t flags;
} mt_vm_range;

/* The table, sorted by start, ranges disjoint. Read it only between
 * mt_vm_lock() and mt_vm_unlock(). */
extern mt_vm_range *mt_vm_table;
extern size_t mt_vm_count;

/* Index of the first range whose end is above addr (mt_vm_count if none). */
size_t mt_vm_first_after(uintptr_t addr);

void mt_vm_lock(void);
/* Bounded attempt (for signal handlers): 0 when taken, -1 otherwise. */
int mt_vm_trylock(long spins);
void mt_vm_unlock(void);
/* In a child made without fork handlers (_Fork): the lock of a thread that
 * does not exist there is let go. */
void mt_vm_reset_after_fork(void);

/* Table updates; the caller holds the lock. They fail silently when the
 * table cannot grow (the range then counts as unknown). */
void mt_vm_record(uintptr_t start, uintptr_t end, unsigned cat, unsigned flags, uint32_t guard);
void mt_vm_forget(uintptr_t start, uintptr_t end);
/* Bytes of the table's ranges per category, now and at their peak (the
 * address space mapped through the interposed calls; read under the lock). */
extern int64_t mt_vm_mapped[], mt_vm_mapped_peak[];

/* The range [old, old+oldlen) moved to [new, new+newlen) (mremap). */
void mt_vm_moved(uintptr_t old, size_t oldlen, uintptr_t new_start, size_t newlen);

/* One category's address space, from mt_vm_scan(). */
typedef struct mt_vm_sum {
    int64_t reserved, committed, resident, mappings;
    int64_t peak_mapped; /* mt_vm_mapped_peak */
} mt_vm_sum;

typedef struct mt_vm_process {
    int ok;                /* smaps was read */
    int64_t rss, peak_rss; /* kernel's Rss and VmHWM */
    int64_t reserved, committed, resident;
} mt_vm_process;

/* Reads /proc/self/smaps and attributes every byte of the address space to
 * a category. Uses static buffers and only async-signal-safe calls; the
 * caller serialises (the report writer's buffer lock). `ncat` entries of
 * out are filled. `in_signal` makes it give up on a busy table instead of
 * waiting. */
void mt_vm_scan(mt_vm_sum *out, int ncat, mt_vm_process *proc, int in_signal);

/* The figures of the last report written (report_write.c), for the crash
 * summary, which prints right after writing one. */
typedef struct mt_vm_report {
    const mt_vm_sum *sum; /* MT_NCAT entries */
    mt_vm_process proc;
} mt_vm_report;
const mt_vm_report *mt_report_last_vm(void);

/* One mapping of /proc/self/maps: [lo, hi), the end of the mapping
 * before it (below), and where a PROT_NONE mapping right under it starts
 * (guard_lo; lo when there is none). */
typedef struct mt_vm_span {
    uintptr_t lo, hi, below, guard_lo;
} mt_vm_span;
/* The mapping that holds addr (0), or -1. Allocation-free and
 * async-signal-safe: for the stack bounds of threads and of start-up. */
int mt_vm_mapping_of(uintptr_t addr, mt_vm_span *out);

/* init.c calls this once the real functions are known. */
void mt_vm_init(void);
/* Fork: the table lock is taken before and released after, in both. */
void mt_vm_before_fork(void);
void mt_vm_after_fork(void);

#pragma GCC visibility pop
#endif
