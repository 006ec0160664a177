/* trace_util.h — what the trace writer and reader share: the format's
 * constants and fixed layouts (docs/trace-format.md), little-endian
 * loads and stores, varints, zigzag and CRC32C. Agent-safe (no malloc,
 * no stdio). */
#ifndef MT_TRACE_UTIL_H
#define MT_TRACE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- the format ---- */
#define TRACE_MAGIC "MTTRACE\0"
#define TRACE_VERSION 2u
#define TRACE_HEADER_SIZE 64u
#define TRACE_CHUNK_MAGIC "MTCK"
#define TRACE_CHUNK_HEADER_SIZE 40u
#define TRACE_TRAILER_MAGIC "MTTREND\0"
#define TRACE_TRAILER_SIZE 24u

/* Chunk kinds and codecs. */
enum { TRACE_CHUNK_DEFS = 1, TRACE_CHUNK_EVENTS = 2, TRACE_CHUNK_END = 3, TRACE_CHUNK_INDEX = 4 };
enum { TRACE_CODEC_NONE = 0, TRACE_CODEC_ZSTD = 1 };

/* Limits a reader enforces and a writer stays within. */
#define TRACE_MAX_RAW (64u << 20)    /* a chunk's body, uncompressed */
#define TRACE_MAX_STORED (64u << 20) /* a chunk's payload as stored */
#define TRACE_MAX_FRAMES 1024u       /* frames of one stack */
#define TRACE_MAX_STRING 4096u       /* a path, name, key or value */

/* Definition records (DEFS bodies). */
enum {
    TRACE_DEF_THREAD = 1,   /* index, tid */
    TRACE_DEF_STACK = 2,    /* id, category, nframes, frames (zigzag deltas) */
    TRACE_DEF_MODULE = 3,   /* start, end - start, bias, build-id, path */
    TRACE_DEF_CATEGORY = 4, /* id, name */
    TRACE_DEF_META = 5,     /* key, value */
};

/* EVENTS bodies: the streams, in this order. Times, sizes and free
 * references are coded as a symbol (a byte: the value's bit length and
 * the two bits after its leading one, trace_sym) in their own stream, and
 * the value's remaining low bits in the shared bit stream, so zstd's
 * Huffman stage codes each symbol stream near its entropy and the nearly
 * random low bits cost what they carry. */
enum {
    TRACE_S_OPS,     /* one byte per event: the op (XOR its guess) and the time code */
    TRACE_S_XOPS,    /* the whole op (XOR its guess), when the time code is TRACE_TC_ESCAPE */
    TRACE_S_THREADS, /* thread index (when TRACE_OP_THREAD), varint */
    TRACE_S_TIMES,   /* symbol of |time delta| in time units, when not in the op byte */
    TRACE_S_SIZES,   /* symbol of the size */
    TRACE_S_FREES,   /* symbol of (uint32)(last id - freed id) */
    TRACE_S_BITS,    /* the symbols' low bits, LSB first, in event order */
    TRACE_S_STACKS,  /* zigzag stack id delta against the thread's last one, varint */
    TRACE_S_IDS,     /* zigzag of (int32)(id - (last id + 1)), varint */
    TRACE_S_CATS,    /* category (when TRACE_OP_CATEGORY), a byte */
    TRACE_S_ADDRS,   /* zigzag mapping address delta, varint */
    TRACE_S_RUNS, /* TRACE_F_TIME_RUNS: events with a zero time delta before the next nonzero one, varint */
    TRACE_NSTREAMS
};

/* An EVENTS chunk's coding flags (the body prefix's flags varint). Both
 * are chosen per chunk by the writer from what the previous chunk looked
 * like; a reader refuses other bits. */
#define TRACE_F_TIME_RUNS                                                                                    \
    0x1u /* time deltas as runs of zeros (runs) + the nonzero ones - 1 (times);                              \
            the ops bytes' time codes are 0 (or the escape) */
#define TRACE_F_ALIGNED                                                                                      \
    0x2u /* each symbol's low bits are whole bytes in the bits stream                                        \
            (ceil(extra / 8) bytes, little-endian): repetitive values stay                                   \
            byte-aligned, so zstd finds their repeats */
#define TRACE_F_KNOWN 0x3u

/* An op: the type and flags. */
#define TRACE_OP_TYPE 0x07u
#define TRACE_OP_THREAD 0x08u    /* the thread changed: its index follows */
#define TRACE_OP_SAME_SIZE 0x10u /* alloc/realloc: the size is the size cache's (no size symbol) */
#define TRACE_OP_CATEGORY 0x20u  /* the category changed: it follows */
#define TRACE_OP_BACK 0x40u      /* the time went back: the delta is negative */
#define TRACE_OP_KNOWN 0x7fu

/* An ops byte: bits 0-4 the op XOR its guess, bits 5-7 the time code:
 * 0-5 the time symbol itself (deltas of 0-5 units, the usual ones with a
 * coarse unit), TRACE_TC_STREAM the symbol is in the times stream,
 * TRACE_TC_ESCAPE the op (XOR its guess) is in the xops stream (it has
 * CATEGORY or BACK) and the time symbol in the times stream. One byte for
 * both keeps zstd's Huffman coder, which spends at least a bit per byte,
 * from spending a bit on each. */
#define TRACE_TC_STREAM 6u
#define TRACE_TC_ESCAPE 7u

/* The op model: ops are stored XORed with a guess, the op that most often
 * followed the previous op so far in the chunk (counts per previous op;
 * ties keep the earlier guess), so the ops stream is mostly zeros when
 * ops follow each other predictably (a free, then its thread's malloc). */
typedef struct trace_opmodel {
    uint16_t count[128][128];
    uint64_t gen[128]; /* the chunk a row's counts belong to */
    uint8_t best[128];
    unsigned prev;
} trace_opmodel;

static inline unsigned trace_op_guess(trace_opmodel *m, uint64_t gen)
{
    unsigned p = m->prev;
    if (m->gen[p] != gen) {
        memset(m->count[p], 0, sizeof m->count[p]);
        m->best[p] = 0;
        m->gen[p] = gen;
    }
    return m->best[p];
}

/* op < 128, after trace_op_guess. */
static inline void trace_op_seen(trace_opmodel *m, unsigned op)
{
    unsigned p = m->prev;
    uint16_t *row = m->count[p];
    if (++row[op] > row[m->best[p]])
        m->best[p] = (uint8_t)op;
    if (row[op] == UINT16_MAX)
        for (int i = 0; i < 128; i++)
            row[i] >>= 1;
    m->prev = op;
}

/* The size cache: per chunk, slot trace_hash32(stack) % TRACE_SIZE_CACHE
 * remembers the last alloc/realloc's stack and size; an event of the same
 * stack and size sets TRACE_OP_SAME_SIZE instead of coding its size. */
#define TRACE_SIZE_CACHE 1024u
static inline uint32_t trace_hash32(uint32_t k)
{
    k ^= k >> 16;
    k *= 0x7feb352du;
    k ^= k >> 15;
    k *= 0x846ca68bu;
    return k ^ (k >> 16);
}

/* The symbol of v: v itself below 16, else 16 + 4 * (bits - 5) + the two
 * bits after the leading one; *extra gets the number of low bits left. */
static inline unsigned trace_sym(uint64_t v, unsigned *extra)
{
    if (v < 16) {
        *extra = 0;
        return (unsigned)v;
    }
    unsigned n = 64 - (unsigned)__builtin_clzll(v);
    *extra = n - 3;
    return 16 + (n - 5) * 4 + (unsigned)((v >> (n - 3)) & 3);
}

/* A symbol's smallest value and its number of low bits. */
static inline uint64_t trace_sym_base(unsigned sym, unsigned *extra)
{
    if (sym < 16) {
        *extra = 0;
        return sym;
    }
    unsigned n = 5 + ((sym - 16) >> 2);
    *extra = n - 3;
    return (uint64_t)(4 + ((sym - 16) & 3)) << (n - 3);
}

/* ---- fixed-width little-endian (the host's order: x86-64, aarch64) ----
 * One store each: the encoder's bit stream writes 8 bytes per symbol, and
 * a byte loop there cost it a quarter of its instructions. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error                                                                                                       \
    "the trace format's fixed-width fields are read and written in the host's order: little-endian hosts only"
#endif
static inline void trace_put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static inline void trace_put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static inline uint32_t trace_get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v; /* little-endian hosts only (x86-64, aarch64) */
}
static inline uint64_t trace_get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- varints (LEB128, at most 10 bytes) and zigzag ---- */
static inline unsigned char *trace_put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}
static inline uint64_t trace_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t trace_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}
static inline uint32_t trace_zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}
static inline int32_t trace_unzigzag32(uint32_t v)
{
    return (int32_t)(v >> 1) ^ -(int32_t)(v & 1);
}

/* Reads a varint from [*p, end): 0, or -1 when it runs past end or is
 * longer than 10 bytes / overflows 64 bits. */
static inline int trace_get_varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    const unsigned char *q = *p;
    uint64_t v = 0;
    for (unsigned shift = 0; q < end; shift += 7) {
        unsigned char b = *q++;
        if (shift == 63 && b > 1)
            return -1;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return 0;
        }
        if (shift == 63)
            return -1;
    }
    return -1;
}

/* ---- CRC32C (Castagnoli, reflected polynomial 0x82F63B78) ---- */
uint32_t trace_crc32c(uint32_t crc, const void *data, size_t n);

/* A chunk header (docs/trace-format.md "Chunk header", shared by the
 * reference-set recording) into h[TRACE_CHUNK_HEADER_SIZE], its own CRC
 * included. */
static inline void trace_chunk_header(unsigned char *h, unsigned kind, unsigned codec, uint64_t seq,
                                      uint32_t stored, uint32_t raw, uint32_t count, uint32_t payload_crc)
{
    memcpy(h, TRACE_CHUNK_MAGIC, 4);
    h[4] = (unsigned char)kind;
    h[5] = (unsigned char)codec;
    h[6] = TRACE_CHUNK_HEADER_SIZE;
    h[7] = 0;
    trace_put64(h + 8, seq);
    trace_put32(h + 16, stored);
    trace_put32(h + 20, raw);
    trace_put32(h + 24, count);
    trace_put32(h + 28, payload_crc);
    trace_put32(h + 32, 0);
    trace_put32(h + 36, trace_crc32c(0, h, 36));
}

/* Division by an invariant d as a multiply: a 64-bit division is the
 * costliest instruction on the writer's per-event path (~40 cycles), a
 * multiply ~4. With l = ceil(log2 d) and m = ceil(2^(62+l) / d),
 * floor(n * m / 2^(62+l)) = floor(n / d) for every n < 2^62, because m * d
 * exceeds 2^(62+l) by less than d <= 2^l (Granlund and Montgomery's
 * condition); m < 2^63 fits a word. Larger n (146 years of ns) divide. */
#define TRACE_DIV_BITS 62
static inline uint64_t trace_div_magic(uint32_t d, unsigned *shift)
{
    unsigned l = 0;
    while ((1ull << l) < d)
        l++;
    *shift = TRACE_DIV_BITS + l;
    return (uint64_t)((((unsigned __int128)1 << *shift) + d - 1) / d);
}

static inline uint64_t trace_div(uint64_t n, uint32_t d, uint64_t magic, unsigned shift)
{
    if (n >> TRACE_DIV_BITS)
        return n / d;
    return (uint64_t)(((unsigned __int128)n * magic) >> shift);
}

#endif
