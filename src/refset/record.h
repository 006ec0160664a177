/* record.h — the inside of `memtrail refset record` (refset.h): what its
 * modules share. The data's path: perf rings and the agent's socket
 * (record_perf.c, record_agent.c) give input items; record_main.c sorts
 * each batch by time and hands the items to record_proc.c, which keeps
 * the processes and their outstanding pages (record_pages.c), finds the
 * mapping of each page (record_maps.c) and its pagemap entry
 * (record_pagemap.c), and queues output records (record_out.c), written
 * in time order once per scan interval. */
#ifndef MT_REFSET_RECORD_H
#define MT_REFSET_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "refset/refset_agent.h"
#include "refset/refset_event.h"
#include "refset/refset_file.h"

#define REC_PAGE_SHIFT 12
#define REC_FAULT_AROUND_SHIFT 16 /* 64 KiB: the kernel's default fault_around_bytes */
#define REC_THP_SHIFT 21          /* 2 MiB */

/* ---- input items (one batch is sorted by time, then processed) ---- */
enum rec_item_kind {
    REC_IT_SAMPLE = 1, /* a page fault */
    REC_IT_FORK,
    REC_IT_EXIT,
    REC_IT_EXEC,
    REC_IT_MMAP,
    REC_IT_LOST,
    REC_IT_AGENT,
};

typedef struct rec_item {
    uint64_t time;
    uint64_t seq; /* arrival order: ties keep it */
    uint8_t kind;
    uint32_t pid, tid, ppid;
    uint64_t addr;    /* SAMPLE: fault address; MMAP: start */
    uint64_t sp;      /* SAMPLE: user stack pointer (0: unknown) */
    uint64_t *frames; /* SAMPLE with --stacks: the user call chain (malloc'd) */
    uint32_t nframes;
    /* MMAP */
    uint64_t len, pgoff, ino;
    uint32_t dev, prot, flags;
    char *name;          /* MMAP path, EXEC comm (malloc'd, freed after processing) */
    uint64_t count;      /* LOST */
    mt_rs_agent_msg *ag; /* AGENT (malloc'd) */
} rec_item;

typedef struct rec_batch {
    rec_item *v;
    size_t n, cap;
    uint64_t seq;
} rec_batch;

rec_item *rec_batch_add(rec_batch *b);
void rec_batch_sort(rec_batch *b);
void rec_batch_clear(rec_batch *b);

/* ---- output queue (record_out.c) ---- */
typedef struct rec_out {
    mt_rs_writer *w;
    mt_rs_event *v; /* queued; names in owned copies */
    uint64_t *seq;
    size_t n, cap;
    uint64_t nseq;
    uint64_t last_time; /* the last time written: later records never go before it */
    uint64_t pages_referenced, pages_released, samples_lost, records;
    uint64_t refused; /* records the writer refused (-EINVAL) */
    int err;          /* the first write error (-errno) */
    bool dump;        /* MEMTRAIL_REFSET_DUMP: every record on stderr as text too */
} rec_out;

/* Queues a copy of ev (name/value/frames copied). */
void rec_out_push(rec_out *o, const mt_rs_event *ev);
/* Sorts the queue by time and writes it, then flushes the writer. */
int rec_out_write(rec_out *o);

/* ---- call chains (record_stacks.c) ---- */
typedef struct rec_stacks rec_stacks;
rec_stacks *rec_stacks_new(void);
void rec_stacks_free(rec_stacks *s);
/* The id of this chain (1, 2, ...; 0 for an empty one); a new one is
 * queued as RS_EV_STACK at `time` first. */
uint32_t rec_stacks_intern(rec_stacks *s, rec_out *o, const uint64_t *frames, uint32_t n, uint64_t time);

/* ---- pagemap (record_pagemap.c) ---- */
#define PM_PFN_MASK ((1ull << 55) - 1)
#define PM_SOFT_DIRTY (1ull << 55)
#define PM_EXCLUSIVE (1ull << 56)
#define PM_FILE (1ull << 61)
#define PM_SWAPPED (1ull << 62)
#define PM_PRESENT (1ull << 63)

/* Returned by rec_pagemap_scan: [start, end) with PAGE_IS_* categories. */
typedef struct rec_region {
    uint64_t start, end, cat;
} rec_region;
#define REC_IS_FILE (1u << 2)
#define REC_IS_PRESENT (1u << 3)
#define REC_IS_SWAPPED (1u << 4)
#define REC_IS_PFNZERO (1u << 5)
#define REC_IS_HUGE (1u << 6)

/* Entries of pages [addr, addr + n pages) into out. Pages the file does
 * not cover (mm gone) read as 0. 0 or -errno. */
int rec_pagemap_read(int fd, uint64_t addr, size_t n, uint64_t *out);
/* The present or swapped pages of [start, end): by the PAGEMAP_SCAN ioctl,
 * or (it missing: *used_ioctl false) by reading pagemap over the given
 * ranges. *v grows (malloc); *n regions. 0 or -errno. */
struct rec_maps;
int rec_pagemap_scan(int fd, const struct rec_maps *m, rec_region **v, size_t *n, size_t *cap,
                     uint64_t zero_pfn, bool *used_ioctl);
/* The shared zero page's PFN (0: unknown, or this kernel gives reads of
 * untouched memory frames of their own) and whether PFNs read as nonzero
 * (root). */
void rec_pagemap_probe(uint64_t *zero_pfn, bool *pfns);

/* ---- mappings (record_maps.c) ---- */
typedef struct rec_map {
    uint64_t start, end, pgoff, ino;
    uint32_t dev, prot;
    uint8_t shared;   /* MAP_SHARED */
    uint8_t category; /* the category of its pages (Image: file pages; copies are CopyOnWriteImage) */
    uint8_t skip;     /* [vvar], [vsyscall]...: not the program's pages */
    uint8_t is_stack; /* a fault near a thread's SP was seen in it */
    char *name;       /* path or [heap] ...; NULL for anonymous */
    uint64_t gone_ns; /* in rec_maps.gone: the time of the read that no longer had it; 0 in v */
} rec_map;

typedef struct rec_maps {
    rec_map *v;
    size_t n, cap;
    /* Mappings a read of /proc/PID/maps no longer had, oldest first, kept
     * REC_MAPS_GONE_NS: a fault sampled before that read but drained after
     * it (a mapping made, touched and unmapped between two drains) still
     * finds the mapping it faulted in. */
    rec_map *gone;
    size_t ngone, capgone;
} rec_maps;
#define REC_MAPS_GONE_NS 5000000000ull
#define REC_MAPS_GONE_MAX 1024

/* Rereads /proc/PID/maps into m (sorted). is_stack marks survive by start
 * address; mappings no longer there go to m->gone. 0 or -errno. */
int rec_maps_read(rec_maps *m, pid_t pid);
/* The mapping holding addr, or NULL. */
rec_map *rec_maps_find(const rec_maps *m, uint64_t addr);
/* The mapping that held addr at time (CLOCK_MONOTONIC ns): the current
 * one, else one a read since time no longer had; or NULL. */
rec_map *rec_maps_find_at(const rec_maps *m, uint64_t addr, uint64_t time);
/* Inserts a mapping (from MMAP2), replacing what it overlaps. */
int rec_maps_insert(rec_maps *m, const rec_map *nm);
/* Removes [start, end) (the agent's unmap). */
void rec_maps_remove(rec_maps *m, uint64_t start, uint64_t end);
void rec_maps_free(rec_maps *m);
/* Sets the categories of every mapping (which paths are images). */
void rec_maps_categorize(rec_maps *m, const char *exe);

/* ---- outstanding pages of a process (record_pages.c) ---- */
#define REC_PG_FILE 0x01u      /* a page-cache page when referenced */
#define REC_PG_ZERO 0x02u      /* the zero page */
#define REC_PG_INHERITED 0x04u /* shared with the parent or a child by a fork (copy-on-write) */
#define REC_PG_KEEP 0x08u      /* stays outstanding after unmap (page cache) */

typedef struct rec_page {
    uint64_t page; /* address >> 12; 0: empty slot */
    uint64_t pfn;
    uint64_t time;
    uint32_t flags;
    uint32_t category;
} rec_page;

typedef struct rec_pages {
    rec_page *v;
    size_t n, cap; /* cap: power of two */
} rec_pages;

rec_page *rec_pages_find(const rec_pages *s, uint64_t page);
/* Adds page (must be absent); NULL when out of memory. */
rec_page *rec_pages_add(rec_pages *s, uint64_t page);
void rec_pages_del(rec_pages *s, uint64_t page);
void rec_pages_free(rec_pages *s);

/* ---- processes (record_proc.c) ---- */
typedef struct rec_fault {
    uint64_t addr, time;
    uint32_t tid, stack, alloc_stack;
} rec_fault;

typedef struct rec_range { /* the agent's word on a range */
    uint64_t start, end;
    uint32_t category, stack;
} rec_range;

typedef struct rec_proc {
    pid_t pid, ppid;
    int pagemap;       /* /proc/PID/pagemap, -1 until opened */
    bool waiting_exec; /* CMD before its exec: not recorded yet */
    bool maps_stale;
    bool trim_pending; /* the agent saw malloc_trim: scan after this batch */
    rec_maps maps;
    rec_pages pages;
    rec_fault *faults; /* since the last scan, for fault-around / THP attribution */
    size_t nfaults, capfaults;
    rec_range *ranges;
    size_t nranges, capranges;
    uint64_t start_brk; /* where the brk heap starts (/proc/PID/stat), 0: unknown */
    char exe[256];
} rec_proc;

typedef struct rec_state {
    rec_out out;
    rec_stacks *stacks;
    rec_proc **procs;
    size_t nprocs, capprocs;
    uint64_t start_ns;
    uint64_t zero_pfn;
    bool pfns, use_ioctl, ioctl_tried;
    bool stacks_on;
    uint64_t faults, scans, scan_pages;
    /* Reads every source into the state (record_main.c): a scan calls it
     * between reading pagemap and comparing, unless in_batch (items are
     * being processed). */
    void (*drain)(void *ctx);
    void *drain_ctx;
    bool in_batch;
    /* Fault references whose page was not present yet when its pagemap
     * entry was read (the fault still in progress on another CPU): read
     * again before they are written (rec_proc_reread). */
    struct rec_unread {
        size_t out; /* its index in out */
        pid_t pid;
        uint64_t addr;
    } * unread;
    size_t nunread, capunread;
    /* MEMTRAIL_REFSET_TEST_UNREAD (tests): a fault's first read of one
     * page in two, by a hash of pid and address, is taken as not present,
     * as a read that raced the fault would be. */
    bool test_unread;
    /* MEMTRAIL_REFSET_TEST_MAPS_FIRST (tests): every batch reads the maps
     * of every process before its items, as a scan does before it drains
     * the rings: a mapping unmapped since its faults is not there. */
    bool test_maps_first;
} rec_state;

rec_proc *rec_proc_find(rec_state *st, pid_t pid);
/* A process enters the recording now (reason RS_PROC_*): its maps read,
 * pagemap opened, its present pages referenced with ref_flags
 * (RS_REF_BEFORE, RS_REF_INHERITED) unless 0 or waiting. NULL if gone. */
rec_proc *rec_proc_add(rec_state *st, pid_t pid, pid_t ppid, int reason, uint64_t time, const char *name,
                       uint32_t ref_flags, bool waiting, const rec_batch *rest, size_t from);
/* One input item. */
void rec_proc_item(rec_state *st, rec_item *it, const rec_batch *b, size_t index);
/* Scans every process at `time`: new present pages referenced, absent
 * ones released. */
void rec_proc_scan_all(rec_state *st, uint64_t time);
/* Scans the processes whose malloc_trim the agent reported. */
void rec_proc_scan_pending(rec_state *st);
void rec_proc_scan(rec_state *st, rec_proc *p, uint64_t time, uint32_t extra_flags);
/* A scan found process p gone: its EXIT at time, and it is forgotten. */
void rec_proc_gone(rec_state *st, rec_proc *p, uint64_t time);
void rec_proc_free_all(rec_state *st);
/* Reads again the pagemap entries of the fault references queued with a
 * page not present yet, and gives them the pfn and kind the fault gave
 * the page: after each batch, and (`last`) before the queue is written;
 * one still not present is kept for the next read unless `last`. */
void rec_proc_reread(rec_state *st, bool last);

/* The inside of record_proc.c that record_scan.c shares. */
struct ref_args {
    uint64_t addr, npages, pfn, entry, time;
    uint32_t tid, stack, flags;
};
/* Queues the reference of pages [addr, addr + npages) of m (all in it, of
 * one kind, consecutive pfns) and makes them outstanding. */
void rec_emit_ref(rec_state *st, rec_proc *p, const rec_map *m, const struct ref_args *a);
/* The category of a page of m (the agent's ranges refine it; a private
 * copy of an image page is CopyOnWriteImage); *alloc_stack its range's. */
unsigned rec_page_category(const rec_proc *p, const rec_map *m, uint64_t addr, uint64_t entry,
                           uint32_t *alloc_stack);
/* Reads p's maps again and categorizes them: 0 or rec_maps_read's -errno. */
int rec_proc_read_maps(rec_proc *p);
/* Reads every process's maps again (MEMTRAIL_REFSET_TEST_MAPS_FIRST). */
void rec_proc_maps_read_all(rec_state *st);
/* rec_maps_find_at, with the maps read again once (until the next scan)
 * when it finds none. */
rec_map *rec_map_of(rec_proc *p, uint64_t addr, uint64_t time);
/* pages (page numbers, any order; sorted here) leave the reference set:
 * RELEASE records for each run, and they are no longer outstanding. */
void rec_release_pages(rec_state *st, rec_proc *p, uint64_t *pages, size_t n, uint64_t time, unsigned reason);
/* The scan of a process entering (fork: RS_REF_INHERITED at the fork's
 * time; attach: RS_REF_BEFORE at 0): its present pages, except those
 * that a fault later in the batch (rest[from..]) of the same process
 * references. A fork's (parent given) takes only the pages the parent held
 * from before the fork, same frame: the child's own are the next scan's. */
void rec_scan_entry(rec_state *st, rec_proc *p, uint64_t time, uint32_t ref_flags, const rec_batch *rest,
                    size_t from, const rec_proc *parent);

/* ---- perf (record_perf.c) ---- */
typedef struct rec_perf rec_perf;
/* One event per CPU (and per thread of tids), all inherited by children,
 * each CPU's mmapped ring. enable_on_exec for a child that has not
 * exec'd yet. Rings over the locked-memory limit are halved down to
 * 64 KiB. 0 or -errno. */
int rec_perf_open(rec_perf **out, const pid_t *tids, size_t ntids, bool stacks, bool enable_on_exec,
                  size_t ring_bytes);
/* Whether only faults taken in user mode are sampled: what
 * kernel.perf_event_paranoid=2 allows a user without CAP_PERFMON. Pages
 * the kernel touches first for the program (read() into a fresh buffer)
 * are then found by the scans. */
bool rec_perf_user_only(const rec_perf *p);
/* fds to poll (readable on a watermark). */
size_t rec_perf_fds(const rec_perf *p, int *fds, size_t max);
/* Reads every ring into the batch. */
void rec_perf_drain(rec_perf *p, rec_batch *b);
/* How often the kernel throttled the events (max sample rate reached):
 * the faults of that tick are not sampled; the scans find their pages. */
uint64_t rec_perf_throttles(const rec_perf *p);
void rec_perf_close(rec_perf *p);

/* ---- agent socket (record_agent.c) ---- */
/* Reads every waiting message from fd into the batch; -1 when the socket
 * is closed by all (no more messages), else 0. */
int rec_agent_drain(int fd, rec_batch *b);

uint64_t rec_now(void);

#endif
