/* site.h — detail mode: the call stack of every allocation and counters
 * per allocation site, as NMT's detail level keeps them.
 *
 * A site is one distinct (stack, category). Sites live in a lock-free hash
 * table: records are claimed with an atomic counter, filled, then
 * published by a CAS into an open-addressing bucket array, so a reader
 * that sees an id sees a complete record. Nothing is ever removed. Each
 * block's header carries its site id, so a free is attributed without a
 * lookup.
 *
 * Counters are kept like the summary's: each thread adds into its own
 * slots (one per site, in pages it maps on first use), and live bytes go
 * to the site's global in batches, against which the peak is checked.
 *
 * Stacks come from a frame-pointer walk bounded by the thread's stack, or
 * from the objects' DWARF unwind tables: memtrail's own walk over rules
 * cached per return address (site_cfi.c), or libunwind's unw_backtrace
 * where that walk cannot go. Option unwind=auto compares the frame-pointer
 * walk with libunwind on the first stacks and keeps it only if it agreed
 * on every one; otherwise the CFI walk. The frames are return
 * addresses outside the agent, innermost first. */
#ifndef MT_AGENT_SITE_H
#define MT_AGENT_SITE_H

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/record.h"
#include "agent/trace.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

#define MT_DEPTH_DEFAULT 4
#define MT_SITES_MAX (1u << 19)
#define MT_SITE_CHUNK 128 /* slots per page of a thread's site slots */

typedef struct mt_site_opts {
    int detail;           /* mode=detail, sample or trace: stacks can be taken (the site table is set up) */
    int trace;            /* mode=trace: the process's output is its trace (what is recorded now: record.h) */
    int sample;           /* mode=sample: every site holds estimates from sampled blocks (sample.h) */
    int depth;            /* frames per stack, 1..MT_DEPTH_MAX */
    int unwind;           /* MT_UNWIND_*: as asked */
    int64_t sample_rate;  /* sample mode: mean bytes between samples (option sample_rate) */
    uint64_t sample_seed; /* sample mode: 0 = random (option sample_seed) */
} mt_site_opts;
extern mt_site_opts mt_site_opt;

/* A block's tag (block.h) of kind `kind` (record.h's MT_REC_*) read as
 * what it is: a call site, or an allocation id of the trace being
 * written; 0 when it is not that (an id of an earlier trace, or of none,
 * is 0: the current trace never saw that block). */
static inline uint32_t mt_tag_site(unsigned kind, uint32_t tag)
{
    return kind == MT_REC_DETAIL ? tag : 0;
}
static inline uint32_t mt_tag_id(unsigned kind, uint32_t tag)
{
    uint32_t first = atomic_load_explicit(&mt_rec_first_id, memory_order_relaxed);
    uint32_t last = atomic_load_explicit(&mt_trace_last_id, memory_order_relaxed);
    return kind == MT_REC_TRACE && tag - first <= last - first ? tag : 0;
}

/* One thread's counts for one site (see counters.h for the batching). */
typedef struct mt_site_slot {
    _Atomic int64_t live_bytes;
    _Atomic int64_t allocs;
    _Atomic int64_t frees;
    _Atomic int64_t reallocs;
    _Atomic int64_t allocated_bytes; /* bytes of blocks that came here, and realloc growth */
    _Atomic int64_t samples;         /* sample mode: sampled blocks counted here */
    _Atomic int64_t sample_frees;    /* sample mode: and freed */
} mt_site_slot;

typedef struct mt_site {
    _Atomic int64_t live_bytes; /* flushed batches and exited threads' counts */
    _Atomic int64_t peak_bytes;
    _Atomic int64_t allocs, frees, reallocs, allocated_bytes; /* exited threads' counts */
    uint64_t hash;
    uint16_t cat;
    uint16_t nframes;
    _Atomic uint32_t used; /* a block was counted here (report writes only these) */
} __attribute__((aligned(64))) mt_site;

extern mt_site *mt_sites; /* [MT_SITES_MAX]; id 0 = "no stack" (table full) */

/* Sets up the table and the unwinder; at start-up, before READY, in
 * detail mode. Returns 0, or -1 after saying why (then no detail). */
int mt_site_init(void);

/* The stack walk alone (the agent's own code range, this thread's stack,
 * the walker option unwind chose), for callers that want frames without
 * the site table (refset_events.c in summary mode); mt_site_init does it
 * too. Once, at start-up. */
void mt_site_walk_init(void);
/* The stack of the program's call into the agent: up to `want` return
 * addresses (want <= MT_DEPTH_MAX) outside the agent, innermost first,
 * into pcs, which holds MT_DEPTH_MAX + 32. Returns how many; 0 inside the
 * agent (a nested call). Needs mt_site_walk_init. */
int mt_site_stack(uintptr_t *pcs, int want);

/* The site of an allocation is found by mt_site_here (site_capture.h),
 * inlined into the malloc hooks: it walks the stack, then calls this. */
/* The second half of a capture: pcs holds n frames of a walk that was
 * asked for `ask`; drops the agent's frames (walking again if it has to)
 * and finds or creates the site. */
uint32_t mt_site_from_stack(unsigned cat, uintptr_t *pcs, int n, int ask, int *walked_again);
int mt_site_fp_walk(uintptr_t *out, int max);
/* The walk the inlined capture uses (site_capture.h). */
enum { MT_WALK_LIBUNWIND, MT_WALK_FP, MT_WALK_CFI };
extern int mt_site_walker;
void mt_site_learn_stack(void);
/* Is address a on this thread's own stack (as pthread_getattr_np says)? */
static inline int mt_site_on_stack(uintptr_t a)
{
    if (MT_UNLIKELY(mt_t.stack_hi == 0))
        mt_site_learn_stack();
    return mt_t.stack_hi > 1 && a - mt_t.stack_lo < mt_t.stack_hi - mt_t.stack_lo;
}
/* libunwind's step loop (site.c), and its caches flushed (at dlclose). */
int mt_site_unw_steps(uintptr_t *pcs, int max);
void mt_site_flush_unwind_caches(void);
/* Bumped by every dlclose: unwind rules cached before may be stale. */
extern _Atomic unsigned mt_code_gen;
/* Threads inside dlclose (from before the real one to the end of the
 * unload's scan): while any is, a walk reads no cached rule or memo and a
 * site lookup first checks that its stack's modules are still what is
 * loaded at their places (a library unmapped, and another mapped there,
 * before the unloading thread's scan), and if not runs the scan. */
extern _Atomic int mt_unloading;
/* Set in a fork child, where libunwind is never called, nor dl_iterate_phdr
 * by the agent (mt_modules_refresh). libunwind's locks, and
 * the loader's list lock it takes through dl_iterate_phdr (glibc resets
 * neither in a child), stay held for ever in a child forked while another
 * thread held one, and libunwind waits for them with every signal
 * blocked. Which were held cannot be known (a program's own
 * dl_iterate_phdr, a dlopen linking an object in), so no child calls it:
 * the CFI walk takes the stacks, the frame-pointer chain where it cannot. */
extern int mt_site_forked;
/* The dlclose hook waits here for a fork child's listing of the loaded
 * objects without the loader's lock (it reads what dlclose unmaps). */
void mt_site_wait_linked_walks(void);
/* site_cfi.c: walks from the frame whose return address is pc, stack
 * pointer sp (its caller's CFA) and rbp bp, into out[max] using the
 * objects' .eh_frame rules; returns the frames, or -1 where it cannot go
 * on this thread's stack (then ask libunwind). Off that stack it never
 * returns -1: on a signal stack it walks what it can within it, elsewhere
 * it gives the first frame only. */
int mt_cfi_walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *out, int max);
/* The site of a capture by the CFI walk from the entry point's `frame`
 * (see mt_site_walk), `ask` frames for category cat: a walk that
 * repeats one of this thread's recent walks (same start, same stack
 * words read) gives its site without walking; else as mt_site_walk and
 * mt_site_from_stack would, with pcs[ask] for the frames (scratch: left
 * as it was on a memo's answer). MT_CFI_NO_WALK when the CFI walk cannot
 * go (then ask libunwind). */
#define MT_CFI_NO_WALK UINT32_MAX
uint32_t mt_cfi_site(unsigned cat, int ask, const uintptr_t *frame, uintptr_t *pcs);

enum { MT_SITE_ALLOC, MT_SITE_FREE, MT_SITE_REALLOC };
/* Counts `bytes` (signed) into site `id` as `n` allocs, frees or resizes
 * (n is 1, or in sample mode a weight in 1/MT_SAMPLE_ONE: sample.h). */
void mt_site_count_slow(mt_shard *sh, uint32_t id, int64_t bytes, int64_t n, int what);
static inline void mt_site_count_n(uint32_t id, int64_t bytes, int64_t n, int what)
{
    mt_shard *sh = mt_t.shard;
    mt_site_slot *chunk = sh && sh->site_chunks ? sh->site_chunks[id / MT_SITE_CHUNK] : NULL;
    if (MT_UNLIKELY(chunk == NULL)) {
        mt_site_count_slow(sh, id, bytes, n, what);
        return;
    }
    mt_site_slot *s = &chunk[id % MT_SITE_CHUNK];
    mt_site *site = &mt_sites[id];
    int64_t local = mt_ld(&s->live_bytes) + bytes;
    if (bytes > 0) {
        int64_t now = mt_ld(&site->live_bytes) + local;
        if (now > mt_ld(&site->peak_bytes))
            mt_raise_peak_i64(&site->peak_bytes, now);
    }
    if (MT_UNLIKELY((uint64_t)(local + MT_FLUSH_BYTES) > 2 * (uint64_t)MT_FLUSH_BYTES)) {
        atomic_fetch_add_explicit(&site->live_bytes, local, memory_order_relaxed);
        local = 0;
    }
    atomic_store_explicit(&s->live_bytes, local, memory_order_relaxed);
    mt_bump(what == MT_SITE_ALLOC ? &s->allocs : what == MT_SITE_FREE ? &s->frees : &s->reallocs, n);
    if (bytes > 0)
        mt_bump(&s->allocated_bytes, bytes);
    if (MT_UNLIKELY(!atomic_load_explicit(&site->used, memory_order_relaxed)))
        atomic_store_explicit(&site->used, 1, memory_order_relaxed);
}
static inline void mt_site_count(uint32_t id, int64_t bytes, int what)
{
    mt_site_count_n(id, bytes, 1, what);
}

/* Sample mode (sample.h): a sampled block of `size` bytes comes to site
 * `id` (what = MT_SITE_ALLOC) or leaves it (MT_SITE_FREE), counted with
 * its weight; the free takes away exactly what the allocation added. */
void mt_site_count_sampled(uint32_t id, uint64_t size, int what);

/* A new block of `size` bytes tagged with site `id` (kind DETAIL), and
 * the free of one: exact in detail mode, weighted in sample mode. */
static inline void mt_site_count_new(uint32_t id, uint64_t size)
{
    if (MT_UNLIKELY(mt_site_opt.sample))
        mt_site_count_sampled(id, size, MT_SITE_ALLOC);
    else
        mt_site_count(id, (int64_t)size, MT_SITE_ALLOC);
}
static inline void mt_site_count_gone(uint32_t id, uint64_t size)
{
    if (MT_UNLIKELY(mt_site_opt.sample))
        mt_site_count_sampled(id, size, MT_SITE_FREE);
    else
        mt_site_count(id, -(int64_t)size, MT_SITE_FREE);
}

/* A block of `was` bytes, tag kind `okind` with tag `old`, is now `now`
 * bytes of kind `kind` with tag `tag` (a realloc, the agent's or a custom
 * allocator's). Sites count what detail recording saw: a block that stays
 * at its site is resized there; one that leaves a site is a free there;
 * one that comes to a site (from another, or from none: allocated before
 * detail recording began) is an allocation of its new size there. */
static inline void mt_site_count_resize(unsigned okind, uint32_t old, unsigned kind, uint32_t tag,
                                        int64_t was, int64_t now)
{
    if (mt_site_opt.sample) {
        /* Blocks of the rate or more have weight 1 (always sampled): one
         * that stays at its site is resized there as in detail mode, so
         * such sites stay exact. */
        if (okind == MT_REC_DETAIL && kind == MT_REC_DETAIL && tag == old && was >= mt_site_opt.sample_rate &&
            now >= mt_site_opt.sample_rate) {
            mt_site_count(tag, now - was, MT_SITE_REALLOC);
            return;
        }
        /* Sampled: the free of the old block, the allocation of the new
         * one (sampled afresh), even at the same site: their weights
         * differ (docs/sampling.md). */
        if (okind == MT_REC_DETAIL)
            mt_site_count_sampled(old, (uint64_t)was, MT_SITE_FREE);
        if (kind == MT_REC_DETAIL)
            mt_site_count_sampled(tag, (uint64_t)now, MT_SITE_ALLOC);
        return;
    }
    if (okind == MT_REC_DETAIL && kind == MT_REC_DETAIL && tag == old) {
        mt_site_count(tag, now - was, MT_SITE_REALLOC);
        return;
    }
    if (okind == MT_REC_DETAIL)
        mt_site_count(old, -was, MT_SITE_FREE);
    if (kind == MT_REC_DETAIL)
        mt_site_count(tag, now, MT_SITE_ALLOC);
}

/* A shard's site slots into the sites' globals (thread exit, fork child). */
void mt_site_fold_shard(mt_shard *sh);

/* report_write.c's view: the sum of one site, and the table's extent. */
typedef struct mt_site_sum {
    int64_t live_bytes, live_count, peak_bytes, allocs, frees, reallocs, allocated_bytes;
    int64_t samples, live_samples; /* sample mode; then the counts above are rounded estimates */
} mt_site_sum;
uint32_t mt_site_count_ids(void);                  /* ids in use are below this */
int mt_site_sum_of(uint32_t id, mt_site_sum *out); /* 0 when the site has no blocks */
int64_t mt_site_dropped(void);
const char *mt_site_unwinder(void);

/* Modules (ELF objects) the frames lie in: noted when a site is made, and
 * all loaded ones when `refresh` (not from a signal handler). */
typedef struct mt_module {
    uintptr_t start, end, bias;
    const char *path;
    unsigned char build_id[32];
    unsigned build_id_len;
    uint32_t gone;       /* 1: unloaded (dlclose), 0: loaded (atomic access) */
    uint32_t first_site; /* no site below this id has a frame in it (atomic access) */
    uint32_t reused;     /* 1: noted where an earlier entry (another file) lay */
} mt_module;
void mt_modules_refresh(void);
/* After dlclose: modules no longer loaded are marked gone, and the sites
 * with frames in them retired (a stack walked later, through whatever is
 * loaded at those addresses then, makes a new site). Not from a signal
 * handler. */
void mt_modules_after_dlclose(void);
/* How a report shows address a of module entry i: as it is while the
 * module is loaded; once gone, shifted by (i + 1) << 48, above every user
 * address, so that no module loaded there later is taken for it
 * (docs/report-format.md). */
#define MT_GONE_SHIFT 48
uintptr_t mt_module_shown(int i, uintptr_t a);
/* Frame k of site id as a report shows it: shifted as the entry it lay in
 * when the site was retired, if it was. */
uintptr_t mt_site_frame_shown(uint32_t id, unsigned k);
/* How a trace shows them: a trace's module records and stacks are written
 * as they are first needed and never taken back, so there it is the later
 * module that is told apart: an entry noted where an earlier one lay is
 * shifted by (i + 1) << 48 for the whole run (docs/trace-format.md). */
uintptr_t mt_module_traced(int i, uintptr_t a);
int mt_site_frames_traced(uint32_t id, uintptr_t *out, int max); /* frames written */
/* In a fork child: lets go of the module lock another thread held. */
void mt_site_after_fork_child(void);
int mt_module_count(void);
const mt_module *mt_module_get(int i);

#pragma GCC visibility pop
#endif
