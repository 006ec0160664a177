/* block.h — the header the agent puts in front of every block it hands out.
 *
 * As in HotSpot NMT, tracking data is co-located with the user data: a
 * 16-byte header right before the pointer (so 16-byte alignment is kept),
 * and a 2-byte canary right after the requested size. The real block is
 *
 *     [prefix: ... | mt_hdr (16 B)] [user data (size)] [canary (2 B)]
 *      ^ real                         ^ p = real + prefix
 *
 * but with canary=fit (mt_tail_fit) at a tight size (mt_tail_tight: 7 or
 * 8 bytes past a multiple of 16), whose 2 canary bytes would take glibc's
 * chunk 16 bytes past the one a bare header needs: there the agent asks
 * for 1 byte (…7) or none (…8) and the canary takes what room the
 * allocator gave (hooks.c's tight_room).
 *
 * prefix is 16 for plain blocks and the alignment for aligned ones, stored
 * as its log2 so realloc, free and malloc_usable_size find the real block.
 * `check` is a keyed hash of the pointer and the other header fields: a
 * pointer the agent did not hand out (allocated before it loaded, or by
 * another allocator) fails it with probability 2^-32 and is passed through;
 * a header overwritten by an underflow fails it too. */
#ifndef MT_AGENT_BLOCK_H
#define MT_AGENT_BLOCK_H

#include <stdint.h>
#include <string.h>

#include "agent/agent.h"

typedef struct mt_hdr {
    uint64_t word;  /* size:47 | quick:1 | log2(prefix):6 | tag kind:2 | category:8 */
    uint32_t check; /* keyed hash of p, word, tag; ^MT_FREED_XOR once freed */
    uint32_t tag;   /* what names the block, by its kind (record.h's MT_REC_*,
                       the recording when it was allocated): a call site's
                       index (DETAIL), an allocation id (TRACE), or 0 (NONE);
                       mt_tag_site / mt_tag_id read it */
} mt_hdr;

#define MT_HDR_SIZE 16u
#define MT_PLAIN_SHIFT 4u
#define MT_SIZE_LIMIT ((1ull << 47) - 1)
#define MT_FREED_XOR 0xD00DFEEDu
/* Blocks below this size carry a tail canary; above it, the extra cache
 * line (or page fault on a fresh mmap) it would touch costs too much.
 * Below it too, none in a chunk glibc mapped for itself unless on the
 * header's page: elsewhere it could be a page's first touch (hooks.c's
 * tail_on). */
#define MT_TAIL_MAX 65536u

static inline uint64_t mt_word(uint64_t size, unsigned cat, unsigned shift, unsigned kind)
{
    return size | (uint64_t)shift << 48 | (uint64_t)kind << 54 | (uint64_t)cat << 56;
}
#define MT_SIZE_MASK MT_SIZE_LIMIT /* a header word's size */
/* The quick bit: a block the hooks' common paths may free or resize
 * (hooks.c): plain and of no recording, from MT_PLAIN_MIN bytes to below
 * MT_QUICK_MAX (so its size is the word's low 16 bits), its canary on, in
 * a chunk of glibc's heap (not one glibc mapped for itself). Set only
 * where all of that is known, when the header is written. */
#define MT_WORD_QUICK (1ull << 47)
_Static_assert(MT_QUICK_MAX <= 65536u, "a quick block's size is its word's low 16 bits");
static inline uint64_t mt_word_size(uint64_t w)
{
    return w & MT_SIZE_MASK;
}
static inline unsigned mt_word_cat(uint64_t w)
{
    return (unsigned)(w >> 56);
}
static inline unsigned mt_word_shift(uint64_t w)
{
    return (unsigned)(w >> 48) & 63;
}
static inline unsigned mt_word_kind(uint64_t w)
{
    return (unsigned)(w >> 54) & 3;
}
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "mt_hdr_shape and mt_hdr_form read the word's bytes");
/* A word's shape: its shift and tag kind, byte 6. */
static inline unsigned mt_word_shape(uint64_t w)
{
    return (unsigned)(w >> 48) & 0xff;
}
#define MT_SHAPE_PLAIN MT_PLAIN_SHIFT /* a plain block of no recording (kind 0) */
/* A header's shape read from memory on its own: one comparison with no
 * shift of the word. */
static inline unsigned mt_hdr_shape(const mt_hdr *h)
{
    return ((const unsigned char *)&h->word)[6];
}
/* A header's bytes 5 and 6 read from memory on their own: its shape, the
 * quick bit and size bits 40 to 46 (little-endian). MT_FORM_QUICK: a
 * plain block of no recording with the quick bit, in one comparison. */
static inline unsigned mt_hdr_form(const mt_hdr *h)
{
    uint16_t f;
    memcpy(&f, (const unsigned char *)&h->word + 5, sizeof f);
    return f;
}
#define MT_FORM_QUICK (MT_SHAPE_PLAIN << 8 | 0x80u)
/* Shifts the agent writes: 4 (plain) to 40 (1 TiB alignment). A header
 * that passes the check by a 2^-32 chance must not steer us further. */
static inline int mt_word_sane(uint64_t w)
{
    return mt_word_shift(w) - 4u <= 36u && mt_word_kind(w) != 3;
}

/* The check: the high half of the product of p, word and tag with
 * mt_hash_key, a secret odd number (init.c), which every input bit
 * reaches. */
static inline uint32_t mt_hash(const void *p, uint64_t word, uint32_t tag)
{
    uint64_t x = ((uint64_t)(uintptr_t)p ^ word ^ ((uint64_t)tag << 19)) * mt_hash_key;
    return (uint32_t)(x >> 32);
}

/* The header's last 8 bytes (check, then tag) of a block whose tag is 0,
 * as one word: what a plain block's common paths write. */
static inline uint64_t mt_check_tag0(const void *p, uint64_t word)
{
    return mt_hash(p, word, 0);
}

#define MT_PLAIN_MIN 6u /* the smallest size whose canary leaves that room (below) */
/* What the real allocator is asked for: prefix, the size, and the canary,
 * never less than 8 bytes after p, so even a tiny block has room for its
 * tombstone. */
/* A size whose 2 canary bytes would cost a chunk 16 bytes larger under
 * glibc: there a request of prefix + size + 8 fills its chunk exactly
 * (…8), or leaves one byte (…7). glibc rounds size + prefix + 8 up to 16:
 * SQLite's 40-byte cells and 1032-byte pages are such sizes (chunks of 80
 * and 1072 bytes for 2 canary bytes, 64 and 1056 without). */
static inline int mt_tail_tight(uint64_t size)
{
    return ((size + 9) & 15) < 2;
}
/* Whether a block of `size` bytes takes its canary's bytes from the room
 * glibc's chunk has (canary=fit at a tight size): its common paths are
 * out of line. */
static inline int mt_tail_fits(uint64_t size)
{
    return mt_tail_tight(size) && mt_tail_fit;
}
/* The canary bytes asked for after a block of `size` bytes: 2, or with
 * canary=fit at a tight size as many as glibc's chunk has room for
 * without growing: 1 (odd, …7) or 0 (…8). */
static inline uint64_t mt_tail_ask(uint64_t size)
{
    return mt_tail_fits(size) ? (size & 1) : 2;
}
static inline uint64_t mt_request(uint64_t size, unsigned shift)
{
    return (1ull << shift) + (size < MT_PLAIN_MIN ? 8 : size + mt_tail_ask(size));
}
/* mt_overhead(size, MT_PLAIN_SHIFT) from MT_PLAIN_MIN bytes up at a size
 * that is not tight: header and canary. */
#define MT_PLAIN_OVERHEAD (MT_HDR_SIZE + 2u)
/* mt_overhead(size, MT_PLAIN_SHIFT) from MT_PLAIN_MIN bytes up: header
 * and the canary's bytes. */
static inline uint64_t mt_plain_overhead(uint64_t size)
{
    return MT_HDR_SIZE + mt_tail_ask(size);
}
/* The agent's own bytes in a block: what it asked for beyond `size`. */
static inline int64_t mt_overhead(uint64_t size, unsigned shift)
{
    return (int64_t)(mt_request(size, shift) - size);
}

/* The tail canary: the check's low 16 bits, which the header's keyed
 * hash makes differ from block to block (no further mixing: one
 * instruction less on every path that writes or reads it), with the top
 * bit of each byte set: a byte of ASCII text or a string's terminating
 * zero written past the block never equals it (with the bits as they
 * came, 1 run in 256 let the common off-by-one terminator through). */
static inline uint16_t mt_tail_value(uint32_t check)
{
    return (uint16_t)(check | 0x8080u);
}

/* The tombstone left in a freed block: its header word, with the size
 * saturated at 2^24-1, masked by a keyed product of the pointer
 * (mt_tomb_key, a secret odd number: init.c), so a second free can be
 * recognised and reported with what the block was. Unmasked, a tombstone
 * has size bits 24 to 46 clear, a sane shape (mt_tomb_open) and a
 * category that exists (classify.c): other bytes pass for one with a
 * chance under 2^-26. The quick bit stays as it was.
 * glibc writes up to 32 bytes of free-list links from the start of a
 * freed chunk, which is 16 bytes before p (our header) to 16 bytes after
 * it (large bins): the tombstone goes past them, at p+16, in blocks of 24
 * bytes or more; smaller blocks only ever reach bins that stop at p, so
 * theirs goes at p. */
#define MT_TOMB_SIZE_MAX 0xFFFFFFu
#define MT_TOMB_PAST 16     /* past the large bins' links */
#define MT_TOMB_PAST_MIN 24 /* the smallest block whose tombstone goes there */
static inline size_t mt_tomb_off(uint64_t size)
{
    return size >= MT_TOMB_PAST_MIN ? MT_TOMB_PAST : 0;
}
static inline uint64_t mt_tomb_mask(const void *p)
{
    return (uint64_t)(uintptr_t)p * mt_tomb_key;
}
/* The tombstone of a block whose header word is `word` and whose size is
 * below MT_TOMB_SIZE_MAX: no saturating. */
static inline uint64_t mt_tombstone_small(const void *p, uint64_t word)
{
    return word ^ mt_tomb_mask(p);
}
static inline uint64_t mt_tombstone(const void *p, uint64_t word)
{
    if (mt_word_size(word) > MT_TOMB_SIZE_MAX)
        word = (word & ~MT_SIZE_MASK) | MT_TOMB_SIZE_MAX;
    return mt_tombstone_small(p, word);
}
/* The header word (size saturated) a tombstone at p holds, or 0 if `t`
 * is none. */
static inline uint64_t mt_tomb_open(const void *p, uint64_t t)
{
    uint64_t w = t ^ mt_tomb_mask(p);
    if ((w & (MT_SIZE_MASK & ~(uint64_t)MT_TOMB_SIZE_MAX)) != 0 || !mt_word_sane(w))
        return 0;
    return w;
}

#endif
