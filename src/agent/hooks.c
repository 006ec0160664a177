/* hooks.c — the interposed malloc family.
 *
 * Every entry point takes the fast path only when the agent is READY and
 * the calling thread is not inside the agent; otherwise (start-up, calls
 * the agent's own work makes) it goes straight to the real allocator, or to
 * the bootstrap arena before dlsym has found it. The fast path is: ask the
 * real allocator for header + size + canary, count the block in this
 * thread's shard, fill the header; free checks the header and the canary,
 * counts, leaves a tombstone and gives the block back. No locks, no
 * system calls, and in the common cases no call but the real allocator's
 * (so no stack frame to set up): anything else goes out of line. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/allocator.h"
#include "agent/block.h"
#include "agent/classify.h"
#include "agent/counters.h"
#include "agent/edge.h"
#include "agent/meminfo.h"
#include "agent/record.h"
#include "agent/refset_events.h"
#include "agent/sample.h"
#include "agent/sessions.h"
#include "agent/span.h"
#include "agent/site_capture.h"
#include "agent/trace.h"

/* mt_hot: start-up is over and the agent tracks. */
#define HOT (MT_LIKELY(atomic_load_explicit(&mt_hot, memory_order_relaxed)) && MT_LIKELY(mt_t.in_agent == 0))
/* HOT, and the thread not timed: malloc's, free's and realloc's common
 * paths may run. One comparison: the thread's gate holds in_agent, timed,
 * and whether it has seen mt_hot and has its shard (armed: mt_arm, on its
 * first call of those three that goes the long way; mt_hot never goes
 * back to 0; the thread's exit disarms it). */
#define QUICK MT_LIKELY(mt_t.gate == MT_GATE_OPEN)
static __attribute__((noinline)) void arm_slow(void)
{
    if (mt_t.in_agent == 0 && atomic_load_explicit(&mt_hot, memory_order_relaxed) && mt_my_shard() != NULL)
        mt_t.armed = 1;
}
/* Arms the gate once the agent is hot and the thread has its shard (so
 * the common paths need not ask for it: mt_t.shard and mt_t.cslot are
 * set; a thread's exit disarms it first, counters.c). */
static MT_INLINE void mt_arm(void)
{
    if (MT_UNLIKELY(!mt_t.armed))
        arm_slow();
}

/* Called when !HOT: finishes start-up if needed; returns 1 if the caller
 * may track, 0 if it must use the real allocator (or the arena) as is. */
static int cold_gate(void)
{
    if (mt_t.in_agent)
        return 0;
    if (atomic_load(&mt_state) != MT_STATE_READY)
        mt_init_slow();
    return mt_t.in_agent == 0 && atomic_load(&mt_hot);
}

/* The real allocator, except before dlsym found it and while the agent
 * starts up: start-up may run inside another allocator's own
 * initialisation (jemalloc maps memory with its init lock held), and
 * whatever libc allocates for the agent then (stdio buffers, a thread's
 * cpuset) must not call back into that allocator. */
static inline int use_arena(void)
{
    return !mt_real_fn.malloc || atomic_load_explicit(&mt_state, memory_order_relaxed) == MT_STATE_INIT;
}

static void *raw_malloc(size_t n)
{
    return use_arena() ? mt_arena_alloc(n) : mt_real_fn.malloc(n);
}

/* ---- pointers handed to free/realloc (classify.c for the others) ------- */

/* glibc returns mmapped chunks at page offset 16, so ours sit at 32 (or
 * 0 when page-aligned): after a free, such a block is unmapped and reading
 * its header would fault. Pointers at those two offsets are probed first,
 * unless the edge set knows them for live blocks of ours (edge.h). */
static inline int needs_probe(uintptr_t a)
{
    return mt_edge_pointer(a);
}

/* The header of a live block of ours when that can be told without a
 * probe: a 16-byte aligned pointer that needs none (or that the edge set
 * holds), with a valid check. NULL: ask mt_classify(). */
static inline mt_hdr *fast_header(void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (MT_LIKELY((a & 15) == 0) && (MT_LIKELY(!needs_probe(a)) || mt_edge_has(p))) {
        mt_hdr *h = (mt_hdr *)p - 1;
        if (MT_LIKELY(h->check == mt_hash(p, h->word, h->tag) && mt_word_sane(h->word)))
            return h;
    }
    return NULL;
}

/* The header under p, with its word in *wordp, when p needs no probe and
 * the check is valid for a tag of 0 (a block of no recording, whose check
 * is of p and word alone); NULL: ask further. The word is loaded with
 * acquire, before anything its caller reads next (hooks.c's solo_slot;
 * on x86-64 a plain load). */
static MT_INLINE mt_hdr *tag0_header(void *p, uint64_t *wordp)
{
    uintptr_t a = (uintptr_t)p;
    if (MT_UNLIKELY((a & 15) != 0) || MT_UNLIKELY(needs_probe(a)))
        return NULL;
    mt_hdr *h = (mt_hdr *)p - 1;
    uint64_t word = __atomic_load_n(&h->word, __ATOMIC_ACQUIRE);
    *wordp = word;
    return MT_LIKELY(h->check == mt_hash(p, word, 0)) ? h : NULL;
}

/* The header of the common block of ours: plain (shift 4) and of no
 * recording (kind 0), which the header's shape byte says at once (and sane
 * with them), needing no probe, with a valid check. NULL: any other. */
static MT_INLINE mt_hdr *plain_header(void *p)
{
    uint64_t word;
    mt_hdr *h = tag0_header(p, &word);
    return h && MT_LIKELY(mt_hdr_shape(h) == MT_SHAPE_PLAIN) ? h : NULL;
}

/* Whether a block of `size` bytes at p (`shift`: its prefix's log2)
 * carries a tail canary: below MT_TAIL_MAX, unless glibc mapped its chunk
 * for itself and the canary would be on another page than the header's.
 * Such a page may never have been touched (below MT_TAIL_MAX, a mapped
 * chunk realloc shrank in place with mremap, or one under a lowered
 * M_MMAP_THRESHOLD): the canary would commit it, a page fault and
 * resident memory the program never asked for (mbench: +20% CPU time,
 * most of it in the kernel). The header's page is committed (the header
 * is on it), and on the heap glibc writes the next chunk's header right
 * after the canary. The same answer at the block's free: a chunk keeps
 * its IS_MMAPPED bit. */
#define MT_PAGE_MIN 4096u /* the smallest page size: a larger one only makes the test stricter */
static MT_INLINE int tail_on(const char *p, uint64_t size, unsigned shift)
{
    /* On the header's page (so below MT_TAIL_MAX) is the common case. */
    uintptr_t hdr = (uintptr_t)p - MT_HDR_SIZE, last = (uintptr_t)p + size + 1;
    if (MT_LIKELY((hdr ^ last) < MT_PAGE_MIN))
        return 1;
    return size < MT_TAIL_MAX && !mt_glibc_is_mapped(p - (1ull << shift));
}

/* mt_hooks_extra as the common paths read it: a plain load the compiler
 * may fold into its test (as counters.h's mt_room: an aligned 4-byte
 * load, atomic on x86-64). */
static MT_INLINE unsigned quick_extra(void)
{
    return *(const unsigned *)&mt_hooks_extra;
}

/* With canary=fit, a tight size's canary (block.h's mt_tail_fits) takes the room the
 * allocator left after the block, up to 2 bytes: under glibc (no
 * MT_EXTRA_ALLOC) what the chunk's size word says, which is usually none
 * (…8) or one byte (…7), and more when glibc handed out a larger chunk
 * than asked for; under another allocator, its malloc_usable_size. Where
 * a heap chunk of glibc's leaves fewer than 2 bytes, glibc's next size
 * word follows them at once: while this chunk is in use its low byte has
 * bit 0 (PREV_INUSE) set, and bits 1 (IS_MMAPPED) and 3 (chunk sizes are
 * multiples of 16) clear, so an overrun that writes a zero byte there, or
 * any byte with bit 0 clear or bit 1 or 3 set (7 bytes in 8), is caught
 * there (canary_room_ok). `*heap`: whether the block is in such a chunk. */
static __attribute__((noinline)) unsigned tight_room(const char *p, uint64_t size, unsigned shift, int *heap)
{
    const char *real = p - (1ull << shift);
    uint64_t usable, used = (1ull << shift) + size;
    *heap = 0;
    if (MT_LIKELY(!(quick_extra() & MT_EXTRA_ALLOC))) {
        size_t chunk;
        memcpy(&chunk, real - sizeof chunk, sizeof chunk);
        *heap = !(chunk & 2); /* glibc's IS_MMAPPED (glibc_mapped_bit) */
        uint64_t hdr = *heap ? sizeof chunk : 2 * sizeof chunk;
        chunk &= ~(size_t)7;
        usable = chunk > hdr ? chunk - hdr : 0;
    } else {
        usable = mt_real_fn.malloc_usable_size((void *)real);
    }
    if (usable < used)
        return 0; /* a chunk size word overwritten: glibc's free says so */
    return usable - used >= 2 ? 2 : (unsigned)(usable - used);
}

#define MT_GLIBC_NEXT_MASK 0x0Bu /* tight_room's bits of the next size word's low byte */
#define MT_GLIBC_NEXT_INUSE 0x01u

/* The canary `t` of a block of `size` bytes at p in `room` bytes after it. */
static MT_INLINE void put_canary_room(char *p, uint64_t size, uint16_t t, uint64_t room)
{
    if (room >= 2)
        memcpy(p + size, &t, sizeof t);
    else if (room == 1)
        p[size] = (char)t;
}

/* Whether glibc's next size word at w, right after a block of ours in a
 * heap chunk with fewer than 2 bytes of room, is sane (tight_room). */
static MT_INLINE int glibc_next_sane(const unsigned char *w)
{
    return (*w & MT_GLIBC_NEXT_MASK) == MT_GLIBC_NEXT_INUSE;
}

/* Whether put_canary_room's canary is intact, and (`heap`: in a heap
 * chunk of glibc's, with fewer than 2 bytes of room) glibc's next size
 * word right after it sane (tight_room). */
static MT_INLINE int canary_room_ok(const char *p, uint64_t size, uint16_t t, uint64_t room, int heap)
{
    const unsigned char *c = (const unsigned char *)p + size;
    if (room >= 2) {
        uint16_t v;
        memcpy(&v, c, sizeof v);
        return v == t;
    }
    if (room == 1 && c[0] != (unsigned char)t)
        return 0;
    return !heap || glibc_next_sane(c + room);
}

static __attribute__((noinline)) void put_tight_canary(char *p, uint64_t size, unsigned shift, uint16_t t)
{
    int heap;
    put_canary_room(p, size, t, tight_room(p, size, shift, &heap));
}

static __attribute__((noinline)) int tight_canary_ok(const char *p, uint64_t size, unsigned shift, uint16_t t)
{
    int heap;
    unsigned room = tight_room(p, size, shift, &heap);
    return canary_room_ok(p, size, t, room, heap);
}

/* tight_room on the common paths: a plain block in a heap chunk of
 * glibc's (the quick bit's, or needs_probe's at no edge offset), whose
 * usable bytes are the chunk's size less its size word. A size word
 * overwritten smaller makes the room wrap: the canary is then looked for
 * at size, where glibc's next size word is. */
static MT_INLINE uint64_t quick_room(const char *p, uint64_t size)
{
    size_t chunk;
    memcpy(&chunk, p - MT_HDR_SIZE - sizeof chunk, sizeof chunk);
    return (chunk & ~(size_t)7) - sizeof chunk - MT_HDR_SIZE - size;
}

/* The 2-byte canary of a block of a size that is not tight, at p + size. */
static MT_INLINE void put_canary2(char *p, uint64_t size, uint32_t check)
{
    put_canary_room(p, size, mt_tail_value(check), 2);
}

static MT_INLINE int canary2_ok(const void *p, const mt_hdr *h, uint64_t size)
{
    return canary_room_ok(p, size, mt_tail_value(h->check), 2, 0);
}

/* put_canary for the common paths (quick_room's blocks). */
static MT_INLINE void quick_put_canary(char *p, uint64_t size, uint32_t check)
{
    if (MT_UNLIKELY(mt_tail_fits(size)))
        put_canary_room(p, size, mt_tail_value(check), quick_room(p, size));
    else
        put_canary2(p, size, check);
}

/* tail_value_ok for the common paths (quick_room's blocks). */
static MT_INLINE int quick_tail_ok(const void *p, const mt_hdr *h, uint64_t size)
{
    if (MT_UNLIKELY(mt_tail_fits(size)))
        return canary_room_ok(p, size, mt_tail_value(h->check), quick_room(p, size), 1);
    return canary2_ok(p, h, size);
}

/* Whether the canary of a block whose canary is on is intact (prefix
 * 1 << shift). */
static MT_INLINE int tail_value_ok(const void *p, const mt_hdr *h, uint64_t size, unsigned shift)
{
    if (MT_UNLIKELY(mt_tail_fits(size)))
        return tight_canary_ok(p, size, shift, mt_tail_value(h->check));
    uint16_t t;
    memcpy(&t, (const char *)p + size, sizeof t);
    return t == mt_tail_value(h->check);
}

static MT_INLINE int tail_intact(void *p, const mt_hdr *h, uint64_t size)
{
    unsigned shift = mt_word_shift(h->word);
    return !tail_on(p, size, shift) || tail_value_ok(p, h, size, shift);
}

static __attribute__((noinline, cold)) void report_bad_tail(void *p, const mt_hdr *h, uint64_t size)
{
    atomic_fetch_add(&mt_err_bad_canary, 1);
    mt_heap_error("heap overflow: the canary after the block was overwritten", p, size, mt_word_cat(h->word));
}

/* 1, having reported it, when the block's canary is not intact. */
static MT_INLINE int check_tail(void *p, const mt_hdr *h, uint64_t size)
{
    if (MT_LIKELY(tail_intact(p, h, size)))
        return 0;
    report_bad_tail(p, h, size);
    return 1;
}

/* Whether the overrun of a block whose canary is not intact reached
 * glibc's next size word (a tight size: tight_room). Such a block is
 * kept, not given back: glibc's free would abort on the word. The word
 * stays damaged, as the program left it: glibc may still find it so
 * later, as it would without the agent. */
static __attribute__((noinline, cold)) int tail_hit_glibc(const char *p, uint64_t size, unsigned shift)
{
    int heap;
    if (!mt_tail_fits(size))
        return 0;
    unsigned room = tight_room(p, size, shift, &heap);
    return heap && room < 2 && !glibc_next_sane((const unsigned char *)p + size + room);
}

/* ---- tracked blocks ---------------------------------------------------- */

_Static_assert(MT_QUICK_MAX <= MT_TAIL_MAX, "the common paths' blocks always carry a canary");
static MT_INLINE int quick_size(uint64_t size)
{
    return size - MT_PLAIN_MIN < MT_QUICK_MAX - MT_PLAIN_MIN;
}

/* glibc's IS_MMAPPED bit of the chunk whose pointer is `real`: its size
 * word's bit 0x2, right under it (allocator.h); 0 for a heap chunk. */
static MT_INLINE size_t glibc_mapped_bit(const char *real)
{
    size_t chunk_size;
    memcpy(&chunk_size, real - sizeof chunk_size, sizeof chunk_size);
    return chunk_size & 2;
}

/* glibc_mapped_bit's note: a chunk glibc mapped for itself starts its mapping: its pointer is at
 * page offset 16 (glibc's MALLOC_ALIGNMENT is its chunk header's size on
 * 64-bit targets, so it never shifts one), which puts a plain block of
 * ours at 32, an edge offset (edge.h). So a plain block at no edge offset
 * from glibc's malloc or realloc is in a heap chunk, and the common paths
 * test only needs_probe for both. */
_Static_assert(sizeof(size_t) == 8, "glibc's mapped chunks at page offset 16 (64-bit)");

/* The quick bit for the header word of a new plain block of no recording
 * at p, of `size` bytes (block.h's MT_WORD_QUICK): in the common range,
 * glibc underneath, in a chunk glibc did not map for itself. */
static MT_INLINE uint64_t quick_bit(const char *p, uint64_t size)
{
    if (MT_LIKELY(quick_size(size)) && MT_LIKELY(!(quick_extra() & MT_EXTRA_ALLOC)) &&
        MT_LIKELY(!glibc_mapped_bit(p - MT_HDR_SIZE)))
        return MT_WORD_QUICK;
    return 0;
}

/* The canary of a block of `size` bytes at p (prefix 1 << shift) whose
 * check is `check`. */
static MT_INLINE void put_canary(char *p, uint64_t size, uint32_t check, unsigned shift)
{
    uint16_t t = mt_tail_value(check);
    if (MT_UNLIKELY(mt_tail_fits(size))) {
        put_tight_canary(p, size, shift, t);
        return;
    }
    memcpy(p + size, &t, sizeof t);
}

/* The header of a block of no recording (tag 0) at p whose word is
 * `word`: the word, then its tag and check in one store; the check. */
static MT_INLINE uint32_t put_word_tag0(char *p, uint64_t word)
{
    mt_hdr *h = (mt_hdr *)p - 1;
    uint64_t ct = mt_check_tag0(p, word);
    h->word = word;
    memcpy(&h->check, &ct, sizeof ct);
    return (uint32_t)ct;
}

/* write_header of a plain block of no recording whose header word is
 * `word`. */
static MT_INLINE void write_plain_word(char *p, uint64_t size, uint64_t word)
{
    uint32_t check = put_word_tag0(p, word | quick_bit(p, size));
    if (tail_on(p, size, MT_PLAIN_SHIFT))
        put_canary(p, size, check, MT_PLAIN_SHIFT);
}

static MT_INLINE void write_plain_header(char *p, uint64_t size, unsigned cat)
{
    write_plain_word(p, size, mt_word(size, cat, MT_PLAIN_SHIFT, MT_REC_NONE));
}

/* Writes header and canary for a block of `size` bytes at p. */
static MT_INLINE void write_header(char *p, uint64_t size, unsigned cat, unsigned shift, unsigned kind,
                                   uint32_t tag)
{
    mt_hdr *h = (mt_hdr *)p - 1;
    uint64_t word = mt_word(size, cat, shift, kind);
    if (shift == MT_PLAIN_SHIFT && kind == MT_REC_NONE)
        word |= quick_bit(p, size);
    h->word = word;
    h->tag = tag;
    h->check = mt_hash(p, word, tag);
    if (tail_on(p, size, shift))
        put_canary(p, size, h->check, shift);
}

/* Writes header and canary for a block of `size` bytes in `real`; a block
 * at an edge offset joins the edge set once its header is whole. */
static MT_INLINE char *fill_header(void *real, uint64_t size, unsigned cat, unsigned shift, unsigned kind,
                                   uint32_t tag)
{
    char *p = (char *)real + (1ull << shift);
    write_header(p, size, cat, shift, kind, tag);
    if (MT_UNLIKELY(needs_probe((uintptr_t)p)))
        mt_edge_add(p);
    return p;
}

/* Whether a free has nothing to do beyond header and counters: no
 * refset recording, no recording of sites or a trace, no event session.
 * Sampling alone asks nothing of the free of a block it did not sample.
 * (Blocks of MT_INFO_MAPPED_MIN or more take the full path too, for
 * memory info's GROW and TRIM: plain_quick_size.) The full paths are out
 * of line, so the common one saves few registers and has no stack-walk
 * buffer in its frame. */
static MT_INLINE unsigned extra_work(void)
{
    return atomic_load_explicit(&mt_hooks_extra, memory_order_relaxed) & MT_EXTRA_WORK;
}
static MT_INLINE int hooks_plain_free(void)
{
    return MT_LIKELY((extra_work() & ~(unsigned)MT_EXTRA_SAMPLE) == 0);
}

/* Whether a plain block of `size` bytes is in the hooks' common range:
 * MT_PLAIN_MIN bytes or more (the usual overhead) and below
 * MT_INFO_MAPPED_MIN (memory info's mapped blocks take the full path). */
static MT_INLINE int plain_quick_size(uint64_t size)
{
    return size - MT_PLAIN_MIN < MT_INFO_MAPPED_MIN - MT_PLAIN_MIN;
}

/* For a new block of `size` bytes (`big`: the largest block the call
 * handles): NEW_PLAIN, nothing beyond header and counters (sampling on,
 * this one not sampled: drawn here); NEW_SAMPLED, the full path with the
 * block sampled (drawn here, so not again); NEW_FULL, the full path, which
 * finds its recording itself. */
enum { NEW_PLAIN, NEW_FULL, NEW_SAMPLED };
static MT_INLINE int hooks_new(uint64_t big, uint64_t size)
{
    unsigned x = extra_work();
    if (MT_LIKELY(x == 0) && MT_LIKELY(big < MT_INFO_MAPPED_MIN))
        return NEW_PLAIN;
    if (x == MT_EXTRA_SAMPLE && big < MT_INFO_MAPPED_MIN)
        return mt_sample_take(size) ? NEW_SAMPLED : NEW_PLAIN;
    return NEW_FULL;
}

static __attribute__((noinline)) void *track_new_full(void *real, uint64_t size, unsigned cat, unsigned shift,
                                                      int sampled)
{
    if (mt_rs_active()) /* a block the allocator mapped for itself: to `memtrail refset record` */
        mt_rs_block_new(real);
    uint32_t site = 0, tag = 0;
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy), kind = MT_REC_NONE;
    if (sampled) /* drawn by hooks_new */
        kind = MT_REC_DETAIL;
    else if (MT_UNLIKELY(rec != MT_REC_NONE))
        kind = mt_sample_kind(rec, size); /* sampling: DETAIL if this one is sampled, else NONE */
    if (MT_UNLIKELY(kind != MT_REC_NONE)) {
        site = mt_site_here(cat, 1);
        /* Trace: the header names the allocation, its events the stack. */
        tag = mt_tag_new(kind, site);
    }
    char *p = fill_header(real, size, cat, shift, (unsigned)kind, tag);
    if (MT_UNLIKELY(kind == MT_REC_DETAIL)) { /* the count and the site's, together across a fork */
        _Atomic long *sbusy = mt_site_enter();
        mt_count_block(cat, (int64_t)size, mt_overhead(size, shift), +1);
        mt_site_count_new(site, size);
        mt_site_leave(sbusy);
    } else {
        mt_count_block(cat, (int64_t)size, mt_overhead(size, shift), +1);
    }
    mt_event_alloc(p, size, cat, site, rec == MT_REC_TRACE ? tag : 0, rec);
    mt_rec_leave(rec, busy);
    if (MT_UNLIKELY(size >= MT_INFO_MAPPED_MIN) && mt_glibc_is_mapped(real)) /* memory info: GROW */
        mt_info_block_mapped(size, 1);
    return p;
}

/* mt_count_block_quick for a plain block of MT_PLAIN_MIN bytes or more
 * (its overhead block.h's mt_plain_overhead) once this thread has a
 * shard; 0 for any other, which mt_count_block counts. */
static MT_INLINE int count_quick(unsigned cat, uint64_t size, unsigned shift, int sign)
{
    mt_shard *sh = mt_t.shard;
    if (MT_LIKELY(shift == MT_PLAIN_SHIFT) && MT_LIKELY(size >= MT_PLAIN_MIN) && MT_LIKELY(sh != NULL))
        return mt_count_block_quick(sh, cat, (int64_t)size, (int64_t)mt_plain_overhead(size), sign);
    return 0;
}

/* track_new, or malloc's common path, when its common case does not do:
 * hooks_new to ask (unless `plain`: new_plain_quick or quick_new said
 * NEW_PLAIN, and took the sampling count down already), an edge block,
 * another allocator (count_quick counts it here), a program with
 * categories of its own whose count malloc_moded could not take, or
 * whatever count_quick leaves to mt_count_block (no shard yet, a flush, a
 * peak, a block that is not plain or below MT_PLAIN_MIN bytes). */
static __attribute__((noinline)) void *track_new_slow(void *real, uint64_t size, unsigned cat, unsigned shift,
                                                      int plain)
{
    int how = plain ? NEW_PLAIN : hooks_new(size, size);
    if (MT_UNLIKELY(how != NEW_PLAIN))
        return track_new_full(real, size, cat, shift, how == NEW_SAMPLED);
    char *p = fill_header(real, size, cat, shift, MT_REC_NONE, 0);
    /* a program's own categories, another allocator: the common count */
    if (!count_quick(cat, size, shift, +1))
        mt_count_block(cat, (int64_t)size, mt_overhead(size, shift), +1);
    return p;
}

/* Whether hooks_new would say NEW_PLAIN, told without a call, for the
 * mode word x: nothing extra to do, or sampling whose count this block
 * does not cross (the count is then taken down here, and only then);
 * below_rate: the block is known smaller than the rate. */
static MT_INLINE int plain_new(unsigned x, uint64_t size, int below_rate)
{
    if (MT_LIKELY(x == 0))
        return 1;
    if (x != MT_EXTRA_SAMPLE)
        return 0;
    /* else track_new_slow draws */
    return below_rate ? mt_sample_skip_small(size) : mt_sample_skip(size);
}
/* plain_new for the generic paths. */
static MT_INLINE int new_plain_quick(uint64_t size)
{
    return MT_LIKELY(size < MT_INFO_MAPPED_MIN) && plain_new(extra_work(), size, 0);
}

/* The common case calls nothing (so needs no stack frame): header and
 * counters for a plain block nothing else wants (count_quick takes no
 * other); track_new_slow does the rest. */
static MT_INLINE void *track_new(void *real, uint64_t size, unsigned cat, unsigned shift)
{
    char *p = (char *)real + (1ull << shift);
    int plain = new_plain_quick(size);
    if (MT_UNLIKELY(!plain) || MT_UNLIKELY(needs_probe((uintptr_t)p)) ||
        MT_UNLIKELY(!count_quick(cat, size, shift, +1)))
        return track_new_slow(real, size, cat, shift, plain);
    write_plain_header(p, size, cat);
    return p;
}

/* Marks a block freed: its header, and the tombstone a later free of the
 * same pointer is known by; out of the edge set, before it goes back. */
static MT_INLINE void mark_freed(void *p, mt_hdr *h)
{
    if (MT_UNLIKELY(needs_probe((uintptr_t)p)))
        mt_edge_remove(p);
    h->check ^= MT_FREED_XOR;
    uint64_t word = h->word, tomb = mt_tombstone(p, word);
    memcpy((char *)p + mt_tomb_off(mt_word_size(word)), &tomb, sizeof tomb);
}

/* Where the tombstone of a block of `size` bytes at p goes (mt_tomb_off),
 * as a choice of two addresses: a conditional move. */
static MT_INLINE char *tomb_at(void *p, uint64_t size)
{
    return size >= MT_TOMB_PAST_MIN ? (char *)p + MT_TOMB_PAST : (char *)p;
}
/* mark_freed_quick with the tombstone's address known (tomb_at). */
static MT_INLINE void mark_freed_at(void *p, mt_hdr *h, uint64_t word, char *at)
{
    h->check ^= MT_FREED_XOR;
    uint64_t tomb = mt_tombstone_small(p, word);
    memcpy(at, &tomb, sizeof tomb);
}
/* mark_freed of a block of the common range (quick_size), not at an edge
 * offset: its size needs no saturating in the tombstone. */
static MT_INLINE void mark_freed_quick(void *p, mt_hdr *h, uint64_t word, uint64_t size)
{
    mark_freed_at(p, h, word, tomb_at(p, size));
}

/* mark_freed_quick, and the block given back. */
static MT_INLINE void give_back_quick(void *p, mt_hdr *h, uint64_t word, uint64_t size)
{
    mark_freed_quick(p, h, word, size);
    mt_real_fn.free(h);
}

/* Marks a block freed and gives it back. */
static MT_INLINE void free_block(void *p, mt_hdr *h, uint64_t size, unsigned shift)
{
    mark_freed(p, h);
    if (mt_rs_active())
        mt_rs_block_free((char *)p - (1ull << shift));
    int mapped = MT_UNLIKELY(size >= MT_INFO_MAPPED_MIN) && mt_glibc_is_mapped((char *)p - (1ull << shift));
    mt_real_fn.free((char *)p - (1ull << shift));
    if (MT_UNLIKELY(mapped)) /* memory info: TRIM */
        mt_info_block_mapped(size, 0);
}

static __attribute__((noinline)) void release_full(void *p, mt_hdr *h)
{
    uint64_t word = h->word, size = mt_word_size(word);
    unsigned cat = mt_word_cat(word), shift = mt_word_shift(word);
    unsigned kind = mt_word_kind(word);
    /* The canary is checked last, just before the block goes: its cache
     * line, often one the block's header is not on, comes in meanwhile
     * (an event's clock read waits for every load before it). First when
     * an overrun aborts: the crash report then still has the block live
     * at its site. */
    int abort_on_error = mt_opt.on_error == MT_ON_ERROR_ABORT, bad = 0;
    if (MT_UNLIKELY(abort_on_error))
        bad = check_tail(p, h, size);
    else if (tail_on(p, size, shift))
        __builtin_prefetch((char *)p + size);
    /* A site keeps counting the blocks detail recording gave it, recording
     * or not, so its live bytes stay exact. */
    if (MT_UNLIKELY(kind == MT_REC_DETAIL)) {
        _Atomic long *sbusy = mt_site_enter();
        mt_count_block(cat, (int64_t)size, mt_overhead(size, shift), -1);
        mt_site_count_gone(h->tag, size);
        mt_site_leave(sbusy);
    } else {
        mt_count_block(cat, (int64_t)size, mt_overhead(size, shift), -1);
    }
    /* Before the block goes: once it is back, another thread may get the
     * same address, and its alloc event must come after this free. */
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy);
    uint32_t id = rec == MT_REC_TRACE ? mt_tag_id(kind, h->tag) : 0;
    mt_event_free(p, size, cat, mt_tag_site(kind, h->tag), id, rec);
    mt_rec_leave(rec, busy);
    if (MT_LIKELY(!abort_on_error))
        bad = check_tail(p, h, size);
    if (MT_UNLIKELY(bad) && tail_hit_glibc(p, size, shift)) {
        mark_freed(p, h); /* kept (tail_hit_glibc) */
        return;
    }
    free_block(p, h, size, shift);
}

/* release_full's common case (hooks_plain_free, an intact canary, no edge
 * block, no flush): counted, marked freed, given back, with no call but
 * the real free's, in tail position; everything else is release_full's. */
static MT_INLINE void release(void *p, mt_hdr *h)
{
    uint64_t word = h->word, size = mt_word_size(word);
    unsigned cat = mt_word_cat(word);
    if (MT_UNLIKELY(mt_word_shape(word) != MT_SHAPE_PLAIN) || MT_UNLIKELY(!plain_quick_size(size)) ||
        MT_UNLIKELY(!hooks_plain_free()) || MT_UNLIKELY(!tail_intact(p, h, size)) ||
        MT_UNLIKELY(needs_probe((uintptr_t)p)) || MT_UNLIKELY(!count_quick(cat, size, MT_PLAIN_SHIFT, -1))) {
        release_full(p, h);
        return;
    }
    give_back_quick(p, h, word, size);
}

/* The real malloc, and once more if it failed and trace mode gave back
 * its memory (mt_trace_out_of_memory). */
static __attribute__((noinline)) void *retry_malloc(size_t n)
{
    return mt_trace_out_of_memory() ? mt_real_fn.malloc(n) : NULL;
}

static MT_INLINE void *real_malloc(size_t n)
{
    void *r = mt_real_fn.malloc(n);
    return MT_LIKELY(r != NULL) ? r : retry_malloc(n);
}

static MT_INLINE void *alloc_plain(size_t n, unsigned cat)
{
    if (MT_UNLIKELY(n > MT_SIZE_LIMIT)) {
        errno = ENOMEM;
        return NULL;
    }
    void *real = real_malloc(mt_request(n, MT_PLAIN_SHIFT));
    return real ? track_new(real, n, cat, MT_PLAIN_SHIFT) : NULL;
}

/* align: a power of two. Returns 0 or an errno value. */
static int alloc_aligned(void **out, size_t align, size_t n, unsigned cat)
{
    if (align <= MT_HDR_SIZE) {
        *out = alloc_plain(n, cat);
        return *out ? 0 : ENOMEM;
    }
    unsigned shift = (unsigned)__builtin_ctzll(align);
    if (n > MT_SIZE_LIMIT || shift > 40)
        return ENOMEM;
    void *real = NULL;
    int rc = mt_real_fn.posix_memalign(&real, align, mt_request(n, shift));
    if (rc == ENOMEM && mt_trace_out_of_memory())
        rc = mt_real_fn.posix_memalign(&real, align, mt_request(n, shift));
    if (rc != 0)
        return rc;
    *out = track_new(real, n, cat, shift);
    return 0;
}

/* ---- the interposed entry points --------------------------------------- */

static MT_INLINE void *malloc_call(size_t n)
{
    if (!HOT && !cold_gate())
        return raw_malloc(n);
    return alloc_plain(n, mt_t.cat);
}

static void free_unknown(void *p);
static MT_INLINE void free_call(void *p)
{
    if (!p)
        return;
    if (MT_UNLIKELY(!atomic_load_explicit(&mt_hot, memory_order_relaxed))) {
        if (!mt_arena_owns(p) && mt_real_fn.free)
            mt_real_fn.free(p);
        return;
    }
    mt_hdr *h = plain_header(p);
    if (MT_LIKELY(h != NULL)) {
        release(p, h);
        return;
    }
    free_unknown(p);
}

/* free_call of any other pointer: out of line, so that free's common path
 * needs no stack frame. */
static __attribute__((noinline)) void free_unknown(void *p)
{
    mt_hdr *h = fast_header(p);
    if (h) {
        release(p, h);
        return;
    }
    uint64_t tomb;
    int kind = mt_classify(p, &h, &tomb);
    switch (kind) {
    case MT_BLK_OURS: release(p, h); return;
    case MT_BLK_FOREIGN:
        /* The agent's own frees (of blocks it took from the real allocator
         * while in_agent) are not the program's foreign frees. */
        if (!mt_t.in_agent)
            atomic_fetch_add_explicit(&mt_err_foreign_free, 1, memory_order_relaxed);
        mt_real_fn.free(p);
        return;
    case MT_BLK_ARENA: return;
    default:
        /* libc freeing for the agent (a thread's cpuset) frees what it
         * got from the real allocator, never twice. */
        if (!mt_t.in_agent)
            mt_report_bad_pointer(kind, p, h, tomb, "free");
        return;
    }
}

static inline void *calloc_call(size_t n, size_t m)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, m, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (!HOT && !cold_gate())
        return use_arena() ? mt_arena_alloc(bytes) : mt_real_fn.calloc(n, m); /* arena memory is zero */
    if (MT_UNLIKELY(bytes > MT_SIZE_LIMIT)) {
        errno = ENOMEM;
        return NULL;
    }
    void *real = mt_real_fn.calloc(1, mt_request(bytes, MT_PLAIN_SHIFT));
    if (!real && mt_trace_out_of_memory())
        real = mt_real_fn.calloc(1, mt_request(bytes, MT_PLAIN_SHIFT));
    return real ? track_new(real, bytes, mt_t.cat, MT_PLAIN_SHIFT) : NULL;
}

/* realloc of a bootstrap-arena block into np (fresh, n bytes, or NULL). */
static void *move_from_arena(void *p, void *np, size_t n)
{
    if (np)
        memcpy(np, p, mt_arena_size(p) < n ? mt_arena_size(p) : n);
    return np;
}

/* The real realloc of a plain block (p, `size` bytes) to `n` bytes. If the
 * block moves, the real realloc frees the old one: its header is marked
 * freed and a tombstone goes there first, so a later free of the old
 * pointer is known for what it is (glibc may leave the header as it was:
 * a chunk merged into the top), and the program's bytes under the
 * tombstone are put back where they are now. Returns the new real block
 * (fill_header rewrites its header), or NULL with the old block as it was. */
static MT_INLINE char *realloc_tombstoned(void *p, uint64_t size, size_t n)
{
    size_t at = mt_tomb_off(size);
    uint64_t saved;
    memcpy(&saved, (char *)p + at, sizeof saved);
    mt_hdr *h = (mt_hdr *)p - 1;
    mark_freed(p, h); /* and out of the edge set; fill_header adds the new block */
    char *real = mt_real_fn.realloc((char *)p - MT_HDR_SIZE, mt_request(n, MT_PLAIN_SHIFT));
    if (!real && mt_trace_out_of_memory())
        real = mt_real_fn.realloc((char *)p - MT_HDR_SIZE, mt_request(n, MT_PLAIN_SHIFT));
    if (MT_UNLIKELY(!real)) { /* live again, as it was (its bytes below) */
        h->check ^= MT_FREED_XOR;
        if (MT_UNLIKELY(needs_probe((uintptr_t)p)))
            mt_edge_add(p);
    }
    /* Where the program's bytes are now, and how many. A block that stays
     * gets all 8 back: a small one's tombstone covered its canary too
     * (mt_request leaves 8 bytes after p). */
    char *q = real ? real + MT_HDR_SIZE : p;
    uint64_t keep = real ? n : size;
    if (!real || MT_LIKELY(keep >= at + sizeof saved))
        memcpy(q + at, &saved, sizeof saved);
    else if (at < keep)
        memcpy(q + at, &saved, keep - at);
    return real;
}

/* realloc_tracked's work once it knows the recording `rec`. */
static __attribute__((noinline)) void *realloc_recorded(void *p, mt_hdr *h, size_t n, int rec, unsigned cat,
                                                        unsigned shift, uint64_t size, unsigned okind,
                                                        uint32_t old_tag, int sampled)
{
    /* Recording detail: the block goes to the realloc call's site;
     * recording a trace: it is a new allocation (id), taken at the realloc
     * call's stack; sampling: the new block is sampled afresh there, the
     * old one leaves its site (docs/sampling.md). Recording nothing: a
     * block stays at its site (it is the same allocation), except a
     * sampled one, whose weight is its size's; any other tag is dropped. */
    uint32_t site = 0, tag = 0;
    unsigned kind = MT_REC_NONE;
    if (sampled) /* drawn by hooks_new */
        kind = MT_REC_DETAIL;
    else if (MT_UNLIKELY(rec != MT_REC_NONE))
        kind = (unsigned)mt_sample_kind(rec, n); /* sampling: the new block is sampled afresh */
    if (kind != MT_REC_NONE) {
        site = mt_site_here(cat, 3);
        tag = mt_tag_new((int)kind, site);
    } else if (okind == MT_REC_DETAIL && rec == MT_REC_NONE && !mt_site_opt.sample) {
        site = tag = old_tag;
        kind = MT_REC_DETAIL;
    }
    char *np;
    if (shift != MT_PLAIN_SHIFT) {
        /* realloc does not keep alignment: move to a plain block. */
        void *real = real_malloc(mt_request(n, MT_PLAIN_SHIFT));
        if (!real)
            return NULL;
        if (mt_rs_active())
            mt_rs_block_new(real);
        np = fill_header(real, n, cat, MT_PLAIN_SHIFT, kind, tag);
        memcpy(np, p, size < n ? size : n);
        free_block(p, h, size, shift);
    } else {
        uintptr_t rs_start = 0;
        uint64_t rs_len = 0, rs_before = 0; /* the old block's mapping, if the allocator mapped it */
        int to_rs = mt_rs_active();
        if (to_rs && mt_rs_block_of((char *)p - MT_HDR_SIZE, &rs_start, &rs_len))
            rs_before = mt_clock_ns(CLOCK_MONOTONIC);
        int was_mapped = size >= MT_INFO_MAPPED_MIN && mt_glibc_is_mapped((char *)p - MT_HDR_SIZE);
        char *real = realloc_tombstoned(p, size, n);
        if (!real)
            return NULL; /* the old block is as it was */
        if (to_rs)
            mt_rs_block_moved(rs_start, rs_len, real, rs_before);
        int is_mapped = n >= MT_INFO_MAPPED_MIN && mt_glibc_is_mapped(real);
        if (was_mapped | is_mapped) /* memory info: GROW or TRIM */
            mt_info_block_resized(was_mapped, is_mapped, size, n);
        np = fill_header(real, n, cat, shift, kind, tag);
    }
    int64_t dovh = mt_overhead(n, MT_PLAIN_SHIFT) - mt_overhead(size, shift);
    if (MT_UNLIKELY((okind | kind) & MT_REC_DETAIL)) {
        _Atomic long *sbusy = mt_site_enter();
        mt_count_resize(cat, (int64_t)n - (int64_t)size, dovh);
        mt_site_count_resize(okind, old_tag, kind, tag, (int64_t)size, (int64_t)n);
        mt_site_leave(sbusy);
    } else {
        mt_count_resize(cat, (int64_t)n - (int64_t)size, dovh);
    }
    /* A trace gets the old block's id only if it saw that block: else 0
     * (the analyzer's "unknown", docs/trace-analysis.md). */
    if (rec == MT_REC_TRACE)
        mt_event_realloc(np, p, n, cat, site, tag, mt_tag_id(okind, old_tag), rec);
    else
        mt_event_realloc(np, p, n, cat, site, 0, 0, rec);
    return np;
}

/* realloc_recorded's work for a plain block of no recording when
 * hooks_new says NEW_PLAIN: the real realloc, then the new block's header
 * and the counters. (The exported realloc's common case is its own:
 * realloc_quick_done.) */
static MT_INLINE void *realloc_plain(void *p, uint64_t size, unsigned cat, size_t n)
{
    char *real = realloc_tombstoned(p, size, n);
    if (MT_UNLIKELY(!real))
        return NULL; /* the old block is as it was */
    char *np = fill_header(real, n, cat, MT_PLAIN_SHIFT, MT_REC_NONE, 0);
    int64_t dsize = (int64_t)n - (int64_t)size,
            dovh = mt_overhead(n, MT_PLAIN_SHIFT) - mt_overhead(size, MT_PLAIN_SHIFT);
    if (MT_UNLIKELY(dovh != 0) || MT_UNLIKELY(!mt_count_resize_quick(cat, dsize)))
        mt_count_resize(cat, dsize, dovh);
    return np;
}

static void *realloc_tracked(void *p, mt_hdr *h, size_t n)
{
    uint64_t word = h->word, size = mt_word_size(word);
    unsigned cat = mt_word_cat(word), shift = mt_word_shift(word), okind = mt_word_kind(word);
    uint32_t old_tag = h->tag;
    check_tail(p, h, size);
    if (MT_UNLIKELY(n > MT_SIZE_LIMIT)) {
        errno = ENOMEM;
        return NULL;
    }
    int how = NEW_FULL;
    if (MT_LIKELY(okind == MT_REC_NONE && shift == MT_PLAIN_SHIFT)) {
        how = hooks_new(size > n ? size : n, n);
        if (MT_LIKELY(how == NEW_PLAIN))
            return realloc_plain(p, size, cat, n);
    }
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy);
    char *np = realloc_recorded(p, h, n, rec, cat, shift, size, okind, old_tag, how == NEW_SAMPLED);
    mt_rec_leave(rec, busy);
    return np;
}

static inline void *realloc_call(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (n == 0) { /* glibc: free and return NULL */
        free(p);
        return NULL;
    }
    /* Raw path only while nothing is tracked; when tracking, even a call
     * from inside the agent (a signal handler) may hold a tracked block. */
    if (!HOT && !cold_gate() && !atomic_load(&mt_hot)) {
        if (mt_arena_owns(p))
            return move_from_arena(p, raw_malloc(n), n);
        if (!mt_real_fn.realloc || use_arena()) {
            errno = ENOMEM;
            return NULL;
        }
        return mt_real_fn.realloc(p, n);
    }
    mt_hdr *h = fast_header(p);
    if (MT_LIKELY(h != NULL))
        return realloc_tracked(p, h, n);
    uint64_t tomb;
    int kind = mt_classify(p, &h, &tomb);
    switch (kind) {
    case MT_BLK_OURS: return realloc_tracked(p, h, n);
    case MT_BLK_FOREIGN: return mt_real_fn.realloc(p, n);
    case MT_BLK_ARENA: return move_from_arena(p, alloc_plain(n, mt_t.cat), n);
    default:
        mt_report_bad_pointer(kind, p, h, tomb, "realloc");
        errno = EINVAL;
        return NULL;
    }
}

static inline void *reallocarray_call(void *p, size_t n, size_t m)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, m, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, bytes);
}

/* align: a power of two; entry: which entry point (allocator.h's
 * MT_ALIGNED_*). Sets *out only on success, as glibc does. */
static int aligned_entry(void **out, size_t align, size_t n, int entry)
{
    void *p = NULL;
    int rc;
    if (!HOT && !cold_gate()) {
        int (*real)(void **, size_t, size_t) = mt_aligned_real[entry];
        if (!real || use_arena())
            return ENOMEM; /* no aligned requests come from dlsym or start-up */
        rc = real(&p, align < sizeof(void *) ? sizeof(void *) : align, n);
    } else {
        rc = alloc_aligned(&p, align, n, mt_t.cat);
    }
    if (rc == 0)
        *out = p;
    return rc;
}

static int pow2(size_t x)
{
    return x && !(x & (x - 1));
}

static inline int posix_memalign_call(void **out, size_t align, size_t n)
{
    if (align % sizeof(void *) != 0 || !pow2(align))
        return EINVAL;
    return aligned_entry(out, align, n, MT_ALIGNED_POSIX);
}

static void *aligned_or_errno(size_t align, size_t n, int entry)
{
    void *p = NULL;
    int rc = aligned_entry(&p, align, n, entry);
    if (rc != 0) {
        errno = rc;
        return NULL;
    }
    return p;
}

static inline void *memalign_call(size_t align, size_t n)
{
    /* glibc rounds an alignment that is not a power of two up to one
     * (aligned_alloc too, up to glibc 2.37). */
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (!pow2(align))
        align = (size_t)1 << (64 - __builtin_clzll(align));
    return aligned_or_errno(align, n, MT_ALIGNED_MEMALIGN);
}

static inline void *aligned_alloc_call(size_t align, size_t n)
{
    return memalign(align, n);
}

static inline void *valloc_call(size_t n)
{
    return aligned_or_errno((size_t)getpagesize(), n, MT_ALIGNED_VALLOC);
}

static inline void *pvalloc_call(size_t n)
{
    size_t page = (size_t)getpagesize(), rounded;
    if (__builtin_add_overflow(n, page - 1, &rounded)) {
        errno = ENOMEM;
        return NULL;
    }
    rounded &= ~(page - 1);
    return aligned_or_errno(page, rounded ? rounded : page, MT_ALIGNED_PVALLOC);
}

static inline size_t malloc_usable_size_call(void *p)
{
    if (!p)
        return 0;
    if (mt_arena_owns(p))
        return mt_arena_size(p);
    if (!atomic_load_explicit(&mt_hot, memory_order_relaxed))
        return mt_real_fn.malloc_usable_size ? mt_real_fn.malloc_usable_size(p) : 0;
    mt_hdr *h = fast_header(p);
    uint64_t tomb;
    switch (h ? MT_BLK_OURS : mt_classify(p, &h, &tomb)) {
    case MT_BLK_OURS:
        /* Exactly the requested size: the canary sits right after it. */
        return mt_word_size(h->word);
    case MT_BLK_FOREIGN: return mt_real_fn.malloc_usable_size(p);
    default: return 0;
    }
}

/* The exported malloc, free and realloc: no frame pointer of their own,
 * as their common paths call nothing but the real allocator, and their
 * other paths leave in tail calls (so a stack walk never meets them). */
#if defined(__GNUC__) && !defined(__clang__)
#define MT_ENTRY MT_EXPORT __attribute__((optimize("omit-frame-pointer")))
#else
#define MT_ENTRY MT_EXPORT
#endif

/* ---- the common paths of malloc, free and realloc -----------------------
 * They run while the thread's gate is open (QUICK: armed, so the thread
 * has its shard, mt_arm) and mt_hooks_extra is 0, or MT_EXTRA_SAMPLE for
 * a block that is not sampled (free: with MT_EXTRA_SMALL_RATE too):
 * nothing to do beyond header and counters, the total counted in malloc's
 * slot (mt_cat_solo), glibc underneath. With MT_EXTRA_CATS as well (a
 * program with categories of its own), the mode test sends them to their
 * out-of-line twins (malloc_moded, free_moded, realloc_moded), which take
 * the same steps and count the total's slot too. Their blocks are plain, of no
 * recording, from MT_PLAIN_MIN bytes to below MT_QUICK_MAX (so below
 * MT_TAIL_MAX and memory info's mapped blocks), in a chunk glibc did not
 * map for itself: their canary is always on (tail_on). Their headers carry
 * the quick bit (block.h's MT_WORD_QUICK), which free and realloc test
 * with the shape in one comparison. Anything else goes the long way,
 * which looks at the block afresh. */

/* A new block of `size` bytes may take a common path: nothing extra to
 * do, or sampling whose count this block does not cross (taken down
 * here, and only then: track_new_slow's `plain`). */
static MT_INLINE int quick_new(uint64_t size)
{
    return plain_new(quick_extra(), size, 1);
}

/* A block of no recording may be freed on the common path. */
static MT_INLINE int quick_free(void)
{
    return (quick_extra() & ~(unsigned)(MT_EXTRA_SAMPLE | MT_EXTRA_SMALL_RATE)) == 0;
}

/* The slot in shard sh of a block's category, for a common path that saw
 * no MT_EXTRA_CATS in the mode word after it read the block's header:
 * malloc's. Until the program makes a category of its own, every block is
 * malloc's (mt_t.cat starts there, and the API tags only into malloc or a
 * category of the program's); counters.c sets the bit before the first
 * such category exists, so a header written in one was written after the
 * bit, and a load of the mode word after the load of that header sees it.
 * quick_header's load of the word is an acquire, so the compiler cannot
 * move the mode's load before it (on x86-64 both are plain loads). The
 * header's store is a plain one, not a release: the order the two loads
 * then see comes from the processor (x86-64's total store order; ARMv8
 * forbids it too), not from the C memory model. Were it broken, a block
 * would be counted in malloc's slot instead of its category's. */
static MT_INLINE mt_cslot *solo_slot(mt_shard *sh)
{
    return &sh->slot[MT_CAT_MALLOC];
}

/* The header of a block with the quick bit (block.h's MT_WORD_QUICK),
 * plain and of no recording (the two in one comparison), needing no
 * probe, with a valid check, for a common path while the gate is open;
 * NULL: the long way. Its size is its word's low 16 bits (quick_word_size). */
static MT_INLINE mt_hdr *quick_header(void *p, uint64_t *wordp)
{
    if (MT_UNLIKELY(!QUICK))
        return NULL;
    mt_hdr *h = tag0_header(p, wordp); /* its word before the mode's (solo_slot) */
    return h && MT_LIKELY(mt_hdr_form(h) == MT_FORM_QUICK) ? h : NULL;
}
static MT_INLINE uint64_t quick_word_size(uint64_t word)
{
    return (uint16_t)word;
}

/* ---- the exported names --------------------------------------------------
 * Each entry point's work is its _call above. Inside a request span (or
 * with alloc_timing=all) the thread is timed: the call goes through its
 * timed_ twin, kept out of line so the untimed path is one branch. */

static __attribute__((noinline)) void *timed_malloc(size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = malloc_call(n);
    mt_alloc_timed_end(t0);
    return r;
}

/* malloc's real malloc failed: once more if trace mode gave memory back. */
static __attribute__((noinline)) void *malloc_retried(size_t n)
{
    void *real = retry_malloc(mt_request(n, MT_PLAIN_SHIFT));
    return real ? track_new(real, n, mt_t.cat, MT_PLAIN_SHIFT) : NULL;
}

/* malloc but for its common case: timed, not hot, too large. */
static __attribute__((noinline)) void *malloc_slow(size_t n)
{
    mt_arm();
    if (MT_UNLIKELY(mt_t.timed))
        return timed_malloc(n);
    return malloc_call(n);
}

/* The header and canary of a common-path block at p (its canary always
 * on), of `n` bytes and header word `word`; tight: a tight size under
 * canary=fit may be (mt_tail_fits), else the canary is 2 bytes. */
static MT_INLINE void write_quick_word(char *p, size_t n, uint64_t word, int tight)
{
    uint32_t check = put_word_tag0(p, word);
    if (tight)
        quick_put_canary(p, n, check);
    else
        put_canary2(p, n, check);
}

/* The mode word's bits a program with categories of its own adds to the
 * common paths' modes: the same work, but every count goes to the total's
 * slot too (mt_count_block_quick, mt_count_resize_quick). */
static MT_INLINE int quick_with_cats(unsigned x)
{
    return (x & MT_EXTRA_CATS) != 0;
}

/* malloc's common path, when the mode word said no (`real` from the real
 * malloc for a block of n bytes, quick_size): a program with categories
 * of its own (quick_with_cats) takes the same steps here, counting the
 * total too, out of line so the common path pays nothing for it; any
 * other mode is track_new_slow's. */
static MT_INLINE void *malloc_moded_as(char *real, size_t n, int tight)
{
    unsigned x = quick_extra();
    /* quick_new said no for this mode (sampling: the count is crossed,
     * and untouched; hooks_new draws) */
    if (!quick_with_cats(x))
        return track_new_slow(real, n, mt_t.cat, MT_PLAIN_SHIFT, 0);
    if (!plain_new(x & ~(unsigned)MT_EXTRA_CATS, n, 1))
        return track_new_slow(real, n, mt_t.cat, MT_PLAIN_SHIFT, 0);
    /* The thread's slot and header word, as malloc's: while they change,
     * the slot is closed and the count goes the long way (mt_cat_slot_set),
     * so a signal handler's malloc meanwhile labels and counts its block
     * alike. */
    char *p = real + MT_HDR_SIZE;
    /* at no edge offset, so not a chunk glibc mapped (glibc_mapped_bit's note) */
    if (MT_UNLIKELY(needs_probe((uintptr_t)p)) ||
        MT_UNLIKELY(!mt_count_slot_quick(mt_t.shard, mt_t.cslot, (int64_t)n,
                                         tight ? (int64_t)mt_plain_overhead(n) : MT_PLAIN_OVERHEAD, +1)))
        return track_new_slow(real, n, mt_t.cat, MT_PLAIN_SHIFT, 1);
    write_quick_word(p, n, n | mt_t.catword, tight);
    return p;
}

/* malloc_moded for malloc_quick's two instances (tight: malloc_tight's). */
static __attribute__((noinline)) void *malloc_moded(char *real, size_t n)
{
    return malloc_moded_as(real, n, 0);
}

static __attribute__((noinline)) void *malloc_moded_fit(char *real, size_t n)
{
    return malloc_moded_as(real, n, 1);
}

/* malloc's common case for a block of n bytes (quick_size), of a tight
 * size under canary=fit or not (block.h's mt_tail_fits): no call but the real malloc's,
 * and its own tail calls. The block's slot and its header word but for
 * the size are the thread's, kept ready (mt_cat_slot_set: while they
 * change, cslot is a closed slot, whose room sends the count the long
 * way). */
static MT_INLINE void *malloc_quick(size_t n, int tight)
{
    char *real = mt_real_fn.malloc(n + (tight ? mt_plain_overhead(n) : MT_PLAIN_OVERHEAD));
    if (MT_UNLIKELY(real == NULL))
        return malloc_retried(n);
    char *p = real + MT_HDR_SIZE;
    mt_cslot *c = mt_t.cslot;
    int64_t local = mt_ld(&c->live_bytes) + (int64_t)n;
    if (MT_UNLIKELY(!quick_new(n)))
        return tight ? malloc_moded_fit(real, n) : malloc_moded(real, n);
    /* at no edge offset, so not a chunk glibc mapped (glibc_mapped_bit's note) */
    if (MT_UNLIKELY(needs_probe((uintptr_t)p)) || MT_UNLIKELY(local > mt_room(&c->hi)))
        return track_new_slow(real, n, mt_t.cat, MT_PLAIN_SHIFT, 1);
    /* quick_new saw no MT_EXTRA_CATS: c is malloc's slot (solo_slot) */
    mt_count_commit(c, mt_solo_overhead(c), local, tight ? (int64_t)mt_plain_overhead(n) : MT_PLAIN_OVERHEAD,
                    +1);
    write_quick_word(p, n, n | mt_t.catword, tight);
    return p;
}

/* malloc's common case at a tight size under canary=fit (block.h's mt_tail_fits): its
 * own instance, out of line, so the common case asks for the constant
 * MT_PLAIN_OVERHEAD and tests nothing more after the real malloc. */
static __attribute__((noinline)) void *malloc_tight(size_t n)
{
    return malloc_quick(n, 1);
}

/* The common case: malloc_quick. */
MT_ENTRY void *malloc(size_t n)
{
    if (MT_UNLIKELY(!QUICK) || MT_UNLIKELY(!quick_size(n)))
        return malloc_slow(n);
    if (MT_UNLIKELY(mt_tail_fits(n)))
        return malloc_tight(n);
    return malloc_quick(n, 0);
}

static __attribute__((noinline)) void timed_free(void *p)
{
    uint64_t t0 = mt_alloc_timed_begin();
    free_call(p);
    mt_alloc_timed_end(t0);
}

/* free but for its common case: timed, not hot, NULL, not a plain block
 * of ours. */
static __attribute__((noinline)) void free_slow(void *p)
{
    if (p) /* a thread that only frees NULL takes no shard */
        mt_arm();
    if (MT_UNLIKELY(mt_t.timed)) {
        timed_free(p);
        return;
    }
    free_call(p);
}

/* free_moded's way when its steps do not do: release's, out of line, so
 * free_moded's own steps need no frame. */
static __attribute__((noinline)) void free_moded_long(void *p)
{
    release(p, (mt_hdr *)p - 1);
}

/* free's common path, when the mode word said no (p a block with the
 * quick bit, quick_header, the gate open): with categories of the
 * program's own (quick_with_cats), the same steps, counting the total too
 * (mt_count_block_quick); else, or when those do not do, what free_call
 * would do with it, without free_slow's steps again. */
static MT_INLINE void free_moded_as(void *p, int fits)
{
    mt_hdr *h = (mt_hdr *)p - 1;
    uint64_t word = h->word, size = quick_word_size(word);
    unsigned x = quick_extra();
    if (quick_with_cats(x) && (x & ~(unsigned)(MT_EXTRA_CATS | MT_EXTRA_SAMPLE | MT_EXTRA_SMALL_RATE)) == 0 &&
        MT_LIKELY(fits ? quick_tail_ok(p, h, size) : canary2_ok(p, h, size)) &&
        MT_LIKELY(mt_count_block_quick(mt_t.shard, mt_word_cat(word), (int64_t)size,
                                       fits ? (int64_t)mt_plain_overhead(size) : MT_PLAIN_OVERHEAD, -1))) {
        give_back_quick(p, h, word, size);
        return;
    }
    free_moded_long(p);
}

/* free_moded at a tight size under canary=fit (block.h's mt_tail_fits):
 * its own instance, as malloc_tight. */
static __attribute__((noinline)) void free_moded_fit(void *p)
{
    free_moded_as(p, 1);
}

static __attribute__((noinline)) void free_moded(void *p)
{
    if (MT_UNLIKELY(mt_tail_fits(quick_word_size(((mt_hdr *)p - 1)->word)))) {
        free_moded_fit(p);
        return;
    }
    free_moded_as(p, 0);
}

/* free's common case from an intact canary on (p a block with the quick
 * bit, h its header, word its word, ovh its overhead): counted, marked
 * freed, given back, the real free in tail position; 0, with nothing
 * done, when the count does not fit its room. */
static MT_INLINE int free_quick_done(void *p, mt_hdr *h, uint64_t word, int64_t ovh)
{
    uint64_t size = quick_word_size(word);
    mt_cslot *c = solo_slot(mt_t.shard);
    int64_t local = mt_ld(&c->live_bytes) - (int64_t)size;
    if (MT_UNLIKELY(local < mt_room(&c->lo)))
        return 0;
    mt_count_commit(c, mt_solo_overhead(c), local, ovh, -1);
    give_back_quick(p, h, word, size);
    return 1;
}

/* free's common case at a tight size under canary=fit (block.h's mt_tail_fits): out of
 * line, so the common case keeps its registers and frame as they were. */
static __attribute__((noinline)) void free_tight(void *p, mt_hdr *h, uint64_t word)
{
    uint64_t size = quick_word_size(word);
    if (MT_LIKELY(quick_tail_ok(p, h, size)) &&
        MT_LIKELY(free_quick_done(p, h, word, (int64_t)mt_plain_overhead(size))))
        return;
    free_slow(p);
}

/* The common case (quick_header, an intact canary): counted, marked
 * freed, given back, with no call but the real free's, in tail position
 * (NULL sits at an edge offset: free_slow takes it). */
MT_ENTRY void free(void *p)
{
    uint64_t word;
    mt_hdr *h = quick_header(p, &word);
    if (MT_LIKELY(h != NULL)) {
        uint64_t size = quick_word_size(word);
        if (MT_UNLIKELY(!quick_free())) {
            free_moded(p);
            return;
        }
        if (MT_UNLIKELY(mt_tail_fits(size))) {
            free_tight(p, h, word);
            return;
        }
        uint16_t t;
        memcpy(&t, (char *)p + size, sizeof t);
        if (MT_LIKELY(t == mt_tail_value(h->check)) &&
            MT_LIKELY(free_quick_done(p, h, word, MT_PLAIN_OVERHEAD)))
            return;
    }
    free_slow(p);
}

static __attribute__((noinline)) void *timed_calloc(size_t n, size_t m)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = calloc_call(n, m);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT void *calloc(size_t n, size_t m)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_calloc(n, m);
    return calloc_call(n, m);
}

static __attribute__((noinline)) void *timed_realloc(void *p, size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = realloc_call(p, n);
    mt_alloc_timed_end(t0);
    return r;
}

/* realloc but for its common case: timed, not hot, anything
 * its common path does not take. */
static __attribute__((noinline)) void *realloc_slow(void *p, size_t n)
{
    mt_arm();
    if (MT_UNLIKELY(mt_t.timed))
        return timed_realloc(p, n);
    return realloc_call(p, n);
}

/* realloc's second half in its common case, once the real realloc gave
 * `real` for the block whose header word was `word`: the program's bytes
 * under the tombstone (`saved`) put back, the new header, the counts. */
static MT_INLINE void *realloc_quick_done(char *real, uint64_t word, size_t n, uint64_t saved, int cats,
                                          int tight)
{
    /* What follows from word is worked out again here rather than kept
     * across the real realloc's call in registers the frame must save. */
    __asm__("" : "+r"(word));
    uint64_t size = quick_word_size(word);
    size_t at = mt_tomb_off(size);
    char *np = real + MT_HDR_SIZE;
    if (MT_LIKELY(n >= at + sizeof saved))
        memcpy(np + at, &saved, sizeof saved);
    else /* byte by byte from the register: saved needs no stack slot */
        for (size_t i = at; i < n; i++, saved >>= 8)
            np[i] = (char)saved;
    /* the old word's quick bit kept, unless glibc mapped the new chunk
     * (only ever at an edge offset: glibc_mapped_bit's note) */
    uint64_t nword = n | (word & ~MT_SIZE_MASK);
    int edge = needs_probe((uintptr_t)np);
    if (MT_UNLIKELY(edge) && glibc_mapped_bit(real)) {
        uint32_t check = put_word_tag0(np, nword & ~MT_WORD_QUICK);
        if (tail_on(np, n, MT_PLAIN_SHIFT))
            put_canary(np, n, check, MT_PLAIN_SHIFT);
    } else if (tight) {
        quick_put_canary(np, n, put_word_tag0(np, nword));
    } else {
        put_canary2(np, n, put_word_tag0(np, nword));
    }
    if (MT_UNLIKELY(edge))
        mt_edge_add(np);
    unsigned cat = mt_word_cat(word);
    int64_t dsize = (int64_t)n - (int64_t)size;
    /* the canary's bytes differ at a tight size (mt_tail_ask) */
    int64_t dovh = tight ? (int64_t)mt_plain_overhead(n) - (int64_t)mt_plain_overhead(size) : 0;
    if (MT_UNLIKELY(cats)) { /* the total's slot too */
        if (dovh != 0 || !mt_count_resize_quick(cat, dsize))
            mt_count_resize(cat, dsize, dovh);
        return np;
    }
    mt_cslot *c = solo_slot(mt_t.shard); /* no MT_EXTRA_CATS: realloc's mode test */
    int64_t local;
    if (MT_LIKELY(mt_quick_delta(c, 0, dsize, &local))) {
        atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
        mt_bump_own(&c->reallocs, 1);
        if (MT_UNLIKELY(dovh != 0))
            mt_bump_own(&mt_solo_overhead(c)->live_bytes, dovh);
    } else {
        mt_count_resize(cat, dsize, dovh);
    }
    return np;
}

/* The real realloc failed in realloc's common case: once more if trace
 * mode gave memory back, else the old block (p) is live again as it was. */
static __attribute__((noinline)) void *realloc_quick_failed(void *p, uint64_t word, size_t n, uint64_t saved,
                                                            int cats)
{
    char *real = mt_trace_out_of_memory()
                     ? mt_real_fn.realloc((char *)p - MT_HDR_SIZE, n + mt_plain_overhead(n))
                     : NULL;
    if (real)
        return realloc_quick_done(real, word, n, saved, cats, 1);
    ((mt_hdr *)p - 1)->check ^= MT_FREED_XOR;
    memcpy((char *)p + mt_tomb_off(mt_word_size(word)), &saved, sizeof saved);
    return NULL;
}

/* realloc's common path from its checks on (the mode's included; cats:
 * the program has categories of its own, so the total is counted too):
 * NULL when they do not do, in `*slow`. */
static MT_INLINE void *realloc_quick(void *p, mt_hdr *h, uint64_t word, size_t n, unsigned x, int cats,
                                     int tight, int *slow)
{
    uint64_t size = quick_word_size(word);
    if (MT_UNLIKELY(!(tight ? quick_tail_ok(p, h, size) : canary2_ok(p, h, size))) ||
        MT_UNLIKELY(x == MT_EXTRA_SAMPLE && !mt_sample_skip_small(n))) {
        *slow = 1;
        return NULL;
    }
    uint64_t saved;
    char *at = tomb_at(p, size);
    memcpy(&saved, at, sizeof saved);
    mark_freed_at(p, h, word, at);
    char *real = mt_real_fn.realloc(h, n + (tight ? mt_plain_overhead(n) : MT_PLAIN_OVERHEAD));
    if (MT_UNLIKELY(real == NULL))
        return realloc_quick_failed(p, word, n, saved, cats);
    return realloc_quick_done(real, word, n, saved, cats, tight);
}

/* A resize from or to a tight size under canary=fit (block.h's
 * mt_tail_fits, for either size), of a common-path block whose word is
 * `word`: the option tested first, so the default pays one test. */
static MT_INLINE int realloc_fits(uint64_t word, size_t n)
{
    return mt_tail_fit && (mt_tail_tight(quick_word_size(word)) | mt_tail_tight(n));
}

/* realloc's common path, when the mode word said no (p a block with the
 * quick bit, h its header, word its word, the gate open, n quick_size;
 * tight: realloc_fits): with categories of the program's own
 * (quick_with_cats), the same steps,
 * counting the total too; else, or when those do not do, what
 * realloc_call would do with it, without realloc_slow's steps again. */
static MT_INLINE void *realloc_moded_as(void *p, mt_hdr *h, uint64_t word, size_t n, int tight)
{
    unsigned x = quick_extra(), xs = x & ~(unsigned)MT_EXTRA_CATS;
    if (quick_with_cats(x) && (xs == 0 || xs == MT_EXTRA_SAMPLE)) {
        int slow = 0;
        void *r = realloc_quick(p, h, word, n, xs, 1, tight, &slow);
        if (!slow)
            return r;
    }
    return realloc_tracked(p, h, n);
}

/* realloc_moded from a tight size or to one under canary=fit (block.h's
 * mt_tail_fits): its own instance, as malloc_moded_fit. */
static __attribute__((noinline)) void *realloc_moded_fit(void *p, mt_hdr *h, uint64_t word, size_t n)
{
    return realloc_moded_as(p, h, word, n, 1);
}

/* realloc_moded's dispatch by canary=fit's sizes. It reads the word
 * again rather than take realloc's: passing it costs realloc a register
 * (callgrind: one instruction more per realloc of a program with
 * categories of its own). */
static __attribute__((noinline)) void *realloc_moded(void *p, mt_hdr *h, size_t n)
{
    uint64_t word = h->word;
    if (MT_UNLIKELY(realloc_fits(word, n)))
        return realloc_moded_fit(p, h, word, n);
    return realloc_moded_as(p, h, word, n, 0);
}

/* realloc's common case from a tight size or to one under canary=fit
 * (block.h's mt_tail_fits): its own instance, out of line, as malloc_tight. */
static __attribute__((noinline)) void *realloc_tight(void *p, mt_hdr *h, uint64_t word, size_t n, unsigned x)
{
    int slow = 0;
    void *r = realloc_quick(p, h, word, n, x, 0, 1, &slow);
    if (MT_UNLIKELY(slow))
        return realloc_slow(p, n);
    return r;
}

/* The common case (quick_header, quick_size for the new size, an intact
 * canary, nothing extra to do but a sample count taken down):
 * realloc_plain's work (realloc_tombstoned's for a block at no edge
 * offset), with no call but the real realloc's (NULL sits at an edge
 * offset: realloc_slow takes it). */
MT_ENTRY void *realloc(void *p, size_t n)
{
    uint64_t word;
    mt_hdr *h = quick_header(p, &word);
    if (MT_UNLIKELY(h == NULL) || MT_UNLIKELY(!quick_size(n)))
        return realloc_slow(p, n);
    unsigned x = quick_extra();
    if (MT_UNLIKELY(x != 0 && x != MT_EXTRA_SAMPLE))
        return realloc_moded(p, h, n);
    if (MT_UNLIKELY(realloc_fits(word, n)))
        return realloc_tight(p, h, word, n, x);
    int slow = 0;
    void *r = realloc_quick(p, h, word, n, x, 0, 0, &slow);
    if (MT_UNLIKELY(slow))
        return realloc_slow(p, n);
    return r;
}

static __attribute__((noinline)) void *timed_reallocarray(void *p, size_t n, size_t m)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = reallocarray_call(p, n, m);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_reallocarray(p, n, m);
    return reallocarray_call(p, n, m);
}

static __attribute__((noinline)) int timed_posix_memalign(void **out, size_t align, size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    int r = posix_memalign_call(out, align, n);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_posix_memalign(out, align, n);
    return posix_memalign_call(out, align, n);
}

static __attribute__((noinline)) void *timed_memalign(size_t align, size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = memalign_call(align, n);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT void *memalign(size_t align, size_t n)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_memalign(align, n);
    return memalign_call(align, n);
}

static __attribute__((noinline)) void *timed_aligned_alloc(size_t align, size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = aligned_alloc_call(align, n);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_aligned_alloc(align, n);
    return aligned_alloc_call(align, n);
}

static __attribute__((noinline)) void *timed_valloc(size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = valloc_call(n);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT void *valloc(size_t n)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_valloc(n);
    return valloc_call(n);
}

static __attribute__((noinline)) void *timed_pvalloc(size_t n)
{
    uint64_t t0 = mt_alloc_timed_begin();
    void *r = pvalloc_call(n);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT void *pvalloc(size_t n)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_pvalloc(n);
    return pvalloc_call(n);
}

static __attribute__((noinline)) size_t timed_malloc_usable_size(void *p)
{
    uint64_t t0 = mt_alloc_timed_begin();
    size_t r = malloc_usable_size_call(p);
    mt_alloc_timed_end(t0);
    return r;
}

MT_EXPORT size_t malloc_usable_size(void *p)
{
    if (MT_UNLIKELY(mt_t.timed))
        return timed_malloc_usable_size(p);
    return malloc_usable_size_call(p);
}
