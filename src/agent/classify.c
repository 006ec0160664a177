/* classify.c — what a pointer handed to free, realloc or
 * malloc_usable_size is when its header does not say at once (hooks.c
 * asks only then): a block of ours, one already freed (its header or its
 * tombstone says so), a block of the bootstrap arena, a foreign block, or
 * one whose memory is gone; and the report of a pointer freed twice. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/block.h"
#include "agent/classify.h"
#include "agent/counters.h"
#include "agent/edge.h"

static int page_mapped(uintptr_t a)
{
    unsigned char v;
    int saved = errno;
    long r = syscall(SYS_mincore, (void *)(a & ~(uintptr_t)4095), (size_t)1, &v);
    int gone = r != 0 && errno == ENOMEM;
    errno = saved;
    return !gone;
}

/* Whether the bytes at a can be read. mincore says a page is mapped, not
 * that it may be read: an allocator's PROT_NONE reservation or a thread's
 * stack guard below a block is mapped, and reading a header there faults.
 * The kernel reads it for us (process_vm_readv on ourselves fails with
 * EFAULT instead of a fault); where that call is refused (a seccomp
 * filter, an old kernel), mincore's answer stands. */
static int readable(uintptr_t a, size_t n)
{
    char buf[MT_HDR_SIZE];
    struct iovec local = {buf, n < sizeof buf ? n : sizeof buf}, remote = {(void *)a, local.iov_len};
    int saved = errno;
    ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    int ok = r == (ssize_t)local.iov_len || (r < 0 && errno != EFAULT && page_mapped(a));
    errno = saved;
    return ok;
}

int mt_classify(void *p, mt_hdr **hp, uint64_t *tomb)
{
    uintptr_t a = (uintptr_t)p;
    *hp = NULL;
    *tomb = 0;
    if (a & 15)
        return MT_BLK_FOREIGN; /* ours are always 16-byte aligned */
    if (MT_UNLIKELY(mt_arena_owns(p)))
        return MT_BLK_ARENA;
    unsigned off = a & 4095;
    /* At the page offsets where glibc's own mappings put blocks (edge.h):
     * the page may be gone already. */
    if (MT_UNLIKELY(mt_edge_pointer(a))) {
        if (!page_mapped(a))
            return MT_BLK_UNMAPPED;
        /* Page-aligned, and the page below (its header's) is not mapped
         * or cannot be read: a foreign block at the start of a mapping
         * (jemalloc's extents, tcmalloc's spans, a block above a PROT_NONE
         * reservation). A block of ours has its header in the same
         * allocation. At offset 32 the header shares p's page, whose
         * protection is p's own. */
        if (off == 0 && !readable(a - MT_HDR_SIZE, MT_HDR_SIZE))
            return MT_BLK_FOREIGN;
    }
    mt_hdr *h = (mt_hdr *)p - 1;
    uint32_t want = mt_hash(p, h->word, h->tag);
    if (mt_word_sane(h->word)) {
        if (MT_LIKELY(h->check == want)) {
            *hp = h;
            return MT_BLK_OURS;
        }
        if (h->check == (want ^ MT_FREED_XOR)) {
            *hp = h;
            return MT_BLK_FREED;
        }
    }
    /* The tombstone, at p or p+16 (mt_tomb_off); p+16 only when it lies in
     * p's page, which is mapped. */
    for (size_t at = 0; at <= 16 && off + at + 8 <= 4096; at += 16) {
        uint64_t t;
        memcpy(&t, (char *)p + at, sizeof t);
        uint64_t w = mt_tomb_open(p, t);
        if (w && mt_word_cat(w) < MT_NCAT && mt_tomb_off(mt_word_size(w)) == at) {
            *tomb = w;
            return MT_BLK_FREED;
        }
    }
    return MT_BLK_FOREIGN;
}

void mt_report_bad_pointer(int kind, void *p, const mt_hdr *h, uint64_t tomb, const char *call)
{
    atomic_fetch_add(&mt_err_double_free, 1);
    if (kind == MT_BLK_UNMAPPED) {
        mt_heap_error(call[0] == 'f' ? "double free (block already unmapped)"
                                     : "realloc of a freed block (already unmapped)",
                      p, UINT64_MAX, MT_NCAT);
    } else if (h) {
        mt_heap_error(call[0] == 'f' ? "double free" : "realloc of a freed block", p, mt_word_size(h->word),
                      mt_word_cat(h->word));
    } else {
        mt_heap_error(call[0] == 'f' ? "double free" : "realloc of a freed block", p, mt_word_size(tomb),
                      mt_word_cat(tomb));
    }
}
