/* refset_event.h — one record of a reference-set recording (docs/refset.md,
 * docs/refset-format.md), as the recorder writes it (refset_file.h) and the
 * report reads it back: the one thing the recorder, the file and the
 * report share.
 *
 * A recording is a time-ordered stream of these records. Times are
 * CLOCK_MONOTONIC nanoseconds (the file stores them relative to the
 * header's start_ns; the reader gives them back relative too, so time 0 is
 * the start of the recording). Addresses and sizes are in bytes; pages are
 * the system page size (the header's page_size). */
#ifndef MT_REFSET_EVENT_H
#define MT_REFSET_EVENT_H

#include <stdint.h>

/* Page categories (the seed's names mapped onto Linux; docs/refset.md). */
enum mt_rs_category {
    RS_CAT_HEAP = 0,             /* brk heap, malloc arenas, the allocator's mmapped blocks */
    RS_CAT_VIRTUALALLOC = 1,     /* other private anonymous mappings */
    RS_CAT_USERSTACK = 2,        /* a thread's stack ([stack], pthread stacks) */
    RS_CAT_PFMAPPEDSECTION = 3,  /* shared anonymous memory: MAP_SHARED|MAP_ANONYMOUS, shm, memfd */
    RS_CAT_COPYONWRITEIMAGE = 4, /* private (written) pages of a mapped executable or library */
    RS_CAT_IMAGE = 5,            /* executable and library pages from the page cache */
    RS_CAT_MAPFILE = 6,          /* other file mappings (data files) */
    RS_NCATEGORIES
};
/* The class of a category: Dynamic (memory-backed) or File. */
#define RS_CLASS_DYNAMIC 0
#define RS_CLASS_FILE 1
static inline int mt_rs_category_class(unsigned cat)
{
    return cat >= RS_CAT_COPYONWRITEIMAGE ? RS_CLASS_FILE : RS_CLASS_DYNAMIC;
}
/* Whether a page of this category leaves the reference set when its process
 * unmaps it or exits: page-cache pages (Image, MapFile file pages) stay
 * outstanding, as the seed says of closed files and unloaded images. */
static inline int mt_rs_released_on_unmap(unsigned cat, unsigned ref_flags);

/* Record types. */
enum mt_rs_type {
    RS_EV_PROCESS = 1, /* a process enters the recording: pid, ppid, time, reason, name */
    RS_EV_EXIT = 2,    /* pid exited at time: its pages that leave on unmap leave now */
    RS_EV_MAP =
        3, /* a mapping: pid, time, addr, len, pgoff, dev, ino, prot, map_flags, category, stack, name */
    RS_EV_REF = 4,     /* first reference of npages pages from addr by pid/tid at time */
    RS_EV_RELEASE = 5, /* pages [addr, addr + npages pages) of pid left the reference set at time */
    RS_EV_STACK = 6,   /* stack definition: id, nframes, frames (user return addresses, innermost first) */
    RS_EV_MODULE = 7, /* a module of pid for symbolization: addr (start), len, pgoff, name (path), build id */
    RS_EV_META = 8,   /* key (name) = value (text) */
    RS_EV_LOST = 9,   /* the recorder lost count page-fault samples (kernel ring overflow) at time */
};

/* RS_EV_PROCESS reasons. */
enum { RS_PROC_START = 0, RS_PROC_FORK = 1, RS_PROC_EXEC = 2, RS_PROC_ATTACH = 3 };

/* RS_EV_REF flags: how the reference was seen. */
#define RS_REF_FAULT 0x01u /* a page-fault sample (time, tid and stack are the fault's) */
#define RS_REF_SCAN                                                                                          \
    0x02u                      /* found present by a pagemap scan, no fault seen (fault-around, THP, lost    \
                                  sample): time is the fault's in the same window when one exists, else the scan's */
#define RS_REF_BEFORE 0x04u    /* present when recording began (--pid): referenced before the scenario */
#define RS_REF_INHERITED 0x08u /* present in a forked child at fork time (shared with its parent) */
#define RS_REF_FILE_PAGE 0x10u /* a page-cache page of a file or shared anonymous memory (pagemap bit 61) */
#define RS_REF_THP 0x20u       /* part of a transparent huge page */
#define RS_REF_ZERO_PAGE 0x40u /* the shared zero page (a read of untouched anonymous memory) */

/* RS_EV_RELEASE reasons. */
enum {
    RS_REL_SCAN = 0,    /* a pagemap scan found the pages gone (within one interval of the truth) */
    RS_REL_UNMAP = 1,   /* munmap / mremap (the agent: exact) */
    RS_REL_DISCARD = 2, /* madvise DONTNEED/FREE/REMOVE, malloc_trim (the agent: exact) */
    RS_REL_FREE = 3,    /* free() of an allocator-mmapped block (the agent: exact) */
};

/* One record. Fields a type does not use are 0. `name` and `frames` point
 * into the reader's (or caller's) memory and stay valid until the next
 * record is read. */
typedef struct mt_rs_event {
    uint8_t type;     /* enum mt_rs_type */
    uint8_t category; /* MAP, REF: enum mt_rs_category */
    uint8_t reason;   /* PROCESS, RELEASE */
    uint8_t flags;    /* REF: RS_REF_* */
    uint32_t pid, tid, ppid;
    uint64_t time_ns;
    uint64_t addr;   /* REF, RELEASE, MAP, MODULE: a page-aligned address (MODULE, MAP: the start) */
    uint64_t npages; /* REF, RELEASE: pages from addr */
    uint64_t len;    /* MAP, MODULE: bytes */
    uint64_t pfn;    /* REF: the physical frame of the first page (the rest follow it), 0: unknown */
    uint64_t pgoff;  /* MAP, MODULE: file offset of addr; REF: file offset of the first page for file pages */
    uint64_t ino;    /* MAP, REF: the file's (or shared memory's) inode, 0: private anonymous */
    uint32_t dev;    /* MAP, REF: its device (major << 20 | minor), with ino the file's identity */
    uint32_t prot;   /* MAP: PROT_* */
    uint32_t map_flags; /* MAP: MAP_SHARED / MAP_PRIVATE ... */
    uint32_t
        stack; /* REF: the impacting stack's id; MAP: the allocation stack's id; STACK: the id (0: none) */
    uint32_t alloc_stack; /* REF: the allocation stack of the range holding the page, when known */
    uint32_t nframes;     /* STACK */
    uint32_t name_len;
    uint64_t count;         /* LOST: samples lost */
    const uint64_t *frames; /* STACK */
    const char *name;       /* PROCESS: the program; MAP, MODULE: the path; META: key */
    const char *value;      /* META: value; MODULE: build id as hex (may be NULL) */
} mt_rs_event;

static inline int mt_rs_released_on_unmap(unsigned cat, unsigned ref_flags)
{
    if (cat == RS_CAT_IMAGE || cat == RS_CAT_MAPFILE)
        return !(ref_flags &
                 RS_REF_FILE_PAGE); /* a private copy of a file page goes; the cached page stays */
    return 1;
}

#endif
