/* trace_util.c — CRC32C for the trace format: the SSE4.2 instruction when
 * the CPU has it, else a slicing-by-8 table built at first use (no malloc:
 * the table is static; two threads building it at once write the same
 * values). */
#include "trace/trace_util.h"

static uint32_t crc_table[8][256];
static int crc_table_ready;

static void crc_table_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        __atomic_store_n(&crc_table[0][i], c, __ATOMIC_RELAXED);
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = __atomic_load_n(&crc_table[0][i], __ATOMIC_RELAXED);
        for (int t = 1; t < 8; t++) {
            c = __atomic_load_n(&crc_table[0][c & 0xff], __ATOMIC_RELAXED) ^ (c >> 8);
            __atomic_store_n(&crc_table[t][i], c, __ATOMIC_RELAXED);
        }
    }
    __atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_soft(uint32_t c, const unsigned char *p, size_t n)
{
    if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
        crc_table_build();
    while (n >= 8) {
        uint64_t v = trace_get64(p) ^ c;
        c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^ crc_table[5][(v >> 16) & 0xff] ^
            crc_table[4][(v >> 24) & 0xff] ^ crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
            crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        c64 = __builtin_ia32_crc32di(c64, trace_get64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

static int crc_has_hw(void)
{
    static int has = -1;
    int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&has, h, __ATOMIC_RELAXED);
    }
    return h;
}
#endif

uint32_t trace_crc32c(uint32_t crc, const void *data, size_t n)
{
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (crc_has_hw())
        return ~crc_hw(c, data, n);
#endif
    return ~crc_soft(c, data, n);
}
