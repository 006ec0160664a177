/* test_block_word.c — the agent's block header word (src/agent/block.h):
 * its fields round-trip, the quick bit is no part of the size, the one
 * comparison of free's common path (mt_hdr_form) accepts exactly a plain
 * block of no recording with the quick bit, and a tombstone opens to the
 * word it was made from, quick bit and all, while other bytes do not pass
 * for one. */
#include <stdint.h>
#include <string.h>

#include "../unit.h"
#include "agent/block.h"

uint64_t mt_hash_key = 0x9E3779B97F4A7C15ull;
int mt_tail_fit;
uint64_t mt_tomb_key = 0xD1B54A32D192ED03ull;

static mt_hdr header_of(uint64_t word)
{
    mt_hdr h;
    memset(&h, 0, sizeof h);
    h.word = word;
    return h;
}

/* glibc's chunk size for a request of r bytes on 64-bit targets
 * (malloc.c's request2size): r + SIZE_SZ rounded up to MALLOC_ALIGNMENT,
 * no less than MINSIZE. */
static uint64_t glibc_chunk(uint64_t r)
{
    uint64_t c = (r + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

int main(void)
{
    uint64_t w = mt_word(MT_SIZE_LIMIT, 255, 40, 2);
    CHECK("the largest size round-trips", mt_word_size(w) == MT_SIZE_LIMIT);
    CHECK("category 255 round-trips", mt_word_cat(w) == 255);
    CHECK("shift 40 round-trips", mt_word_shift(w) == 40);
    CHECK("kind 2 round-trips", mt_word_kind(w) == 2);
    CHECK("the largest size leaves the quick bit clear", (w & MT_WORD_QUICK) == 0);

    uint64_t q = mt_word(65535, 9, MT_PLAIN_SHIFT, 0) | MT_WORD_QUICK;
    CHECK("the quick bit is no part of the size", mt_word_size(q) == 65535);
    CHECK("the quick bit leaves the category", mt_word_cat(q) == 9);
    CHECK("the quick bit leaves shift and kind", mt_word_shift(q) == MT_PLAIN_SHIFT && mt_word_kind(q) == 0);
    CHECK("a word with the quick bit is sane", mt_word_sane(q));
    CHECK("the shape of a plain block of no recording", mt_word_shape(q) == MT_SHAPE_PLAIN);
    CHECK("the size is the word's low 16 bits", (uint16_t)q == 65535);

    mt_hdr h = header_of(q);
    CHECK("mt_hdr_form: a quick plain block passes", mt_hdr_form(&h) == MT_FORM_QUICK);
    CHECK("mt_hdr_shape reads the shape byte", mt_hdr_shape(&h) == MT_SHAPE_PLAIN);
    h = header_of(q & ~MT_WORD_QUICK);
    CHECK("mt_hdr_form: without the quick bit it fails", mt_hdr_form(&h) != MT_FORM_QUICK);
    h = header_of(mt_word(100, 0, MT_PLAIN_SHIFT, 1) | MT_WORD_QUICK);
    CHECK("mt_hdr_form: a recorded block fails", mt_hdr_form(&h) != MT_FORM_QUICK);
    h = header_of(mt_word(100, 0, 6, 0) | MT_WORD_QUICK);
    CHECK("mt_hdr_form: an aligned block fails", mt_hdr_form(&h) != MT_FORM_QUICK);
    h = header_of(mt_word(1ull << 40, 0, MT_PLAIN_SHIFT, 0));
    CHECK("mt_hdr_form: a size with bit 40 set fails", mt_hdr_form(&h) != MT_FORM_QUICK);

    char block[64];
    void *p = block + 16;
    uint64_t t = mt_tombstone_small(p, q);
    CHECK("a tombstone opens to its word, quick bit and all", mt_tomb_open(p, t) == q);
    CHECK("at another address it does not open", mt_tomb_open(block + 32, t) != q);
    uint64_t big = mt_word(1ull << 30, 3, MT_PLAIN_SHIFT, 0);
    uint64_t bt = mt_tombstone(p, big);
    CHECK("a large block's tombstone saturates its size",
          mt_word_size(mt_tomb_open(p, bt)) == MT_TOMB_SIZE_MAX);
    CHECK("a large block's tombstone keeps its category", mt_word_cat(mt_tomb_open(p, bt)) == 3);
    CHECK("size bits 24 to 46 set: no tombstone", mt_tomb_open(p, mt_tombstone_small(p, big)) == 0);
    CHECK("the tombstone's place: p below 24 bytes, p+16 from 24",
          mt_tomb_off(23) == 0 && mt_tomb_off(MT_TOMB_PAST_MIN) == MT_TOMB_PAST);
    CHECK("the canary is the check's low 16 bits, each byte's top bit set",
          mt_tail_value(0x12345678u) == 0xD6F8);
    int text_safe = 1;
    for (uint32_t c = 0; c < 0x10000u; c++) {
        uint16_t v = mt_tail_value(c * 0x9E3779B1u);
        text_safe &= (v & 0xff) >= 0x80 && (v >> 8) >= 0x80;
    }
    CHECK("no canary byte is zero or ASCII (a terminator or text past the block always differs)", text_safe);

    /* glibc's chunk for a request r (64-bit): r + 8 rounded up to 16, at
     * least 32 bytes; it holds r + 8 - 16 bytes past its pointer. With
     * canary=fit every plain block's request takes the chunk the size plus
     * a bare 16-byte header would, and has room for the canary bytes it
     * asks for, which are 2 wherever that costs no larger chunk; with
     * canary=full (the default) they are 2 everywhere. */
    for (int fit = 0; fit <= 1; fit++) {
        mt_tail_fit = fit;
        int same_chunk = 1, room = 1, two_where_free = 1, tight_exact = 1;
        for (uint64_t n = MT_PLAIN_MIN; n < 70000; n++) {
            uint64_t r = mt_request(n, MT_PLAIN_SHIFT), ask = mt_tail_ask(n);
            uint64_t c = glibc_chunk(r), c_bare = glibc_chunk(n + MT_HDR_SIZE);
            same_chunk &= fit ? c == c_bare : r == n + MT_PLAIN_OVERHEAD;
            room &= c - 8 >= MT_HDR_SIZE + n + ask && r == MT_HDR_SIZE + n + ask;
            two_where_free &= ask == 2 || glibc_chunk(MT_HDR_SIZE + n + 2) > c_bare;
            tight_exact &= mt_tail_tight(n) == ((n % 16) == 7 || (n % 16) == 8);
            tight_exact &= mt_plain_overhead(n) == MT_HDR_SIZE + ask &&
                           (int64_t)(r - n) == mt_overhead(n, MT_PLAIN_SHIFT);
        }
        CHECK(fit ? "canary=fit: a plain block's request takes the chunk of size + 16 bytes (6 B to 70 KB)"
                  : "canary=full: every plain block asks for size + 18 bytes",
              same_chunk);
        CHECK("the chunk has room for the canary bytes asked for", room);
        CHECK("the canary asks for 2 bytes unless they would take the next chunk size", two_where_free);
        CHECK("tight sizes are 7 and 8 past a multiple of 16; overhead = header + canary bytes", tight_exact);
    }
    mt_tail_fit = 1;
    CHECK("canary=fit, tight sizes' canary bytes: 1 at ...7, 0 at ...8",
          mt_tail_ask(39) == 1 && mt_tail_ask(40) == 0 && mt_tail_ask(1032) == 0 && mt_tail_ask(41) == 2);
    mt_tail_fit = 0;
    CHECK("canary=full: 2 bytes at every size", mt_tail_ask(39) == 2 && mt_tail_ask(40) == 2);
    return failures != 0;
}
