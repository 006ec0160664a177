/* test_plan.c — xe_plan against the seed's two tables (transcribed from
 * seed 000 row for row and checked at every KB value they cover), against
 * an independent recomputation for other machine shapes, STRICT_MAX_MEMORY's
 * bound, MAX_EVENT_SIZE's large buffers, and the size/mode parsers. */
#include "unit.h"
#include "xe/xe_plan.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define KB 1024ull

/* Seed table 1: a 2-core machine, PER_CPU (5 buffers), MAX_MEMORY in KB. */
static const struct {
    unsigned kb, buffers;
    uint64_t size, total;
} seed_per_cpu[] = {
    {637, 5, 130867, 654335}, {638, 5, 130867, 654335}, {639, 5, 130867, 654335},
    {640, 5, 196403, 982015}, {641, 5, 196403, 982015}, {642, 5, 196403, 982015},
};

/* Seed table 2: the NONE range table, 1..4096 KB; buffers 0 is the NULL row. */
static const struct {
    unsigned start, end, buffers;
    uint64_t size, total;
} seed_none[] = {
    {1, 191, 0, 0, 0},
    {192, 383, 3, 130867, 392601},
    {384, 575, 3, 196403, 589209},
    {576, 767, 3, 261939, 785817},
    {768, 959, 3, 327475, 982425},
    {960, 1151, 3, 393011, 1179033},
    {1152, 1343, 3, 458547, 1375641},
    {1344, 1535, 3, 524083, 1572249},
    {1536, 1727, 3, 589619, 1768857},
    {1728, 1919, 3, 655155, 1965465},
    {1920, 2111, 3, 720691, 2162073},
    {2112, 2303, 3, 786227, 2358681},
    {2304, 2495, 3, 851763, 2555289},
    {2496, 2687, 3, 917299, 2751897},
    {2688, 2879, 3, 982835, 2948505},
    {2880, 3071, 3, 1048371, 3145113},
    {3072, 3263, 3, 1113907, 3341721},
    {3264, 3455, 3, 1179443, 3538329},
    {3456, 3647, 3, 1244979, 3734937},
    {3648, 3839, 3, 1310515, 3931545},
    {3840, 4031, 3, 1376051, 4128153},
    {4032, 4096, 3, 1441587, 4324761},
};

static xe_plan_in shape(xe_partition_mode mode, unsigned cpus, unsigned nodes, uint64_t max_memory,
                        int strict)
{
    return (xe_plan_in){
        .max_memory = max_memory, .mode = mode, .cpus = cpus, .nodes = nodes, .strict = strict};
}

static void test_seed_tables(void)
{
    char name[128], why[256];
    for (size_t i = 0; i < sizeof seed_per_cpu / sizeof seed_per_cpu[0]; i++) {
        xe_plan_in in = shape(XE_PART_PER_CPU, 2, 1, seed_per_cpu[i].kb * KB, 0);
        xe_plan_out out;
        int rc = xe_plan(&in, &out, why, sizeof why);
        snprintf(name, sizeof name, "seed per_cpu 2 CPUs %u KB: %u x %llu = %llu", seed_per_cpu[i].kb,
                 seed_per_cpu[i].buffers, (unsigned long long)seed_per_cpu[i].size,
                 (unsigned long long)seed_per_cpu[i].total);
        CHECK(name, rc == 0 && out.total_regular_buffers == seed_per_cpu[i].buffers &&
                        out.regular_buffer_size == seed_per_cpu[i].size &&
                        out.total_buffer_size == seed_per_cpu[i].total);
    }
    /* The seed's "196403 - 130867 = 65536" and its constant fraction. */
    CHECK("seed per_cpu step is one 64 KB chunk", 196403 - 130867 == XE_CHUNK);

    unsigned next = 1;
    for (size_t r = 0; r < sizeof seed_none / sizeof seed_none[0]; r++) {
        unsigned bad = 0, first_bad = 0;
        for (unsigned kb = seed_none[r].start; kb <= seed_none[r].end; kb++) {
            xe_plan_in in = shape(XE_PART_NONE, 64, 8, kb * KB, 0); /* cpus/nodes must not matter */
            xe_plan_out out;
            int rc = xe_plan(&in, &out, why, sizeof why);
            int ok = seed_none[r].buffers == 0
                         ? rc == -EINVAL && why[0] != '\0'
                         : rc == 0 && out.total_regular_buffers == seed_none[r].buffers &&
                               out.regular_buffer_size == seed_none[r].size &&
                               out.total_buffer_size == seed_none[r].total && out.total_large_buffers == 0 &&
                               out.large_buffer_size == 0;
            if (!ok && bad++ == 0)
                first_bad = kb;
        }
        snprintf(name, sizeof name, "seed NONE row %u..%u KB (every KB value; first wrong: %u)",
                 seed_none[r].start, seed_none[r].end, first_bad);
        CHECK(name, bad == 0 && seed_none[r].start == next);
        next = seed_none[r].end + 1;
    }
    CHECK("seed NONE table covers 1..4096 KB in 22 rows",
          next == 4097 && sizeof seed_none / sizeof seed_none[0] == 22);

    /* "a machine with 64 logical CPUs will have 160 buffers using per_cpu
     * partitioning or if you have 8 NUMA nodes ... 24 buffers when using
     * per_node", and a step costs 64K x buffers: 10240 KB and 1536 KB. */
    CHECK("seed: 64 CPUs per_cpu gives 160 buffers", xe_plan_buffers(XE_PART_PER_CPU, 64, 1) == 160);
    CHECK("seed: 8 nodes per_node gives 24 buffers", xe_plan_buffers(XE_PART_PER_NODE, 1, 8) == 24);
    CHECK("seed: none gives 3 buffers whatever the machine", xe_plan_buffers(XE_PART_NONE, 64, 8) == 3);
    struct {
        xe_partition_mode mode;
        unsigned cpus, nodes, buffers;
        uint64_t step_kb;
    } big[] = {{XE_PART_PER_CPU, 64, 1, 160, 10240}, {XE_PART_PER_NODE, 64, 8, 24, 1536}};
    for (int b = 0; b < 2; b++) {
        /* Just below and at a boundary: 160 x 64 KB x 5 = 51200 KB. */
        uint64_t boundary = (uint64_t)big[b].buffers * 5 * XE_CHUNK;
        xe_plan_in lo = shape(big[b].mode, big[b].cpus, big[b].nodes, boundary - 1, 0), hi = lo;
        hi.max_memory = boundary;
        xe_plan_out a, c;
        int ok = xe_plan(&lo, &a, NULL, 0) == 0 && xe_plan(&hi, &c, NULL, 0) == 0;
        snprintf(name, sizeof name, "seed: %u buffers step up by %llu KB at a 64K boundary", big[b].buffers,
                 (unsigned long long)big[b].step_kb);
        CHECK(name, ok && a.total_regular_buffers == big[b].buffers &&
                        c.memory_allocated - a.memory_allocated == big[b].step_kb * KB);
    }
}

/* An independent statement of the rules: count chunks up one by one. */
static unsigned expect_buffers(xe_partition_mode mode, unsigned cpus, unsigned nodes)
{
    if (mode == XE_PART_NONE)
        return 3;
    if (mode == XE_PART_PER_NODE)
        return nodes + nodes + nodes;
    unsigned b = 0;
    while (2 * b < 5 * cpus) /* smallest b with b >= 2.5 x cpus */
        b++;
    return b;
}

/* Returns 0 (and the buffer size) or -1 when rejected. */
static int expect_size(uint64_t max_memory, unsigned n, int strict, uint64_t *size)
{
    uint64_t share = max_memory / n, chunks = 0;
    if (share < 65536)
        return -1;
    if (strict)
        while ((chunks + 1) * 65536 <= share) /* most chunks that fit in the share */
            chunks++;
    else
        while (chunks * 65536 <= share) /* first chunk count above the share */
            chunks++;
    *size = chunks * 65536 - 205;
    return 0;
}

static const struct {
    xe_partition_mode mode;
    unsigned cpus, nodes;
} shapes[] = {
    {XE_PART_NONE, 1, 1},      {XE_PART_PER_CPU, 1, 1},  {XE_PART_PER_CPU, 2, 1},  {XE_PART_PER_CPU, 3, 1},
    {XE_PART_PER_CPU, 4, 1},   {XE_PART_PER_CPU, 7, 1},  {XE_PART_PER_CPU, 16, 1}, {XE_PART_PER_CPU, 64, 1},
    {XE_PART_PER_CPU, 96, 1},  {XE_PART_PER_NODE, 1, 1}, {XE_PART_PER_NODE, 2, 2}, {XE_PART_PER_NODE, 8, 4},
    {XE_PART_PER_NODE, 64, 8},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void test_other_shapes(void)
{
    char name[160];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t s = 0; s < NSHAPES; s++) {
        for (int strict = 0; strict <= 1; strict++) {
            unsigned n = expect_buffers(shapes[s].mode, shapes[s].cpus, shapes[s].nodes);
            unsigned bad = 0, checked = 0;
            uint64_t first_bad = 0;
            /* Every KB up to 8 MB, then byte-granular values up to 4 GB
             * (the recomputation counts chunks one by one: keep it quick). */
            for (uint64_t i = 1; i <= 8192 + 5000; i++) {
                uint64_t mm;
                if (i <= 8192) {
                    mm = i * KB;
                } else {
                    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                    mm = (seed >> 20) % (4ull << 30);
                }
                xe_plan_in in = shape(shapes[s].mode, shapes[s].cpus, shapes[s].nodes, mm, strict);
                xe_plan_out out;
                char why[200];
                int rc = xe_plan(&in, &out, why, sizeof why);
                uint64_t size = 0;
                int erc = expect_size(mm, n, strict, &size);
                int ok = erc < 0
                             ? rc == -EINVAL
                             : rc == 0 && out.total_regular_buffers == n && out.regular_buffer_size == size &&
                                   out.regular_buffer_alloc == size + 205 &&
                                   out.chunks_per_buffer == (size + 205) / 65536 &&
                                   out.total_buffer_size == n * size &&
                                   out.memory_allocated == n * (size + 205) && out.total_large_buffers == 0;
                checked++;
                if (!ok && bad++ == 0)
                    first_bad = mm;
            }
            snprintf(name, sizeof name,
                     "%s cpus=%u nodes=%u%s: %u buffers, %u sizes match the recomputation "
                     "(first wrong: %llu bytes)",
                     xe_partition_mode_name(shapes[s].mode), shapes[s].cpus, shapes[s].nodes,
                     strict ? " strict" : "", n, checked, (unsigned long long)first_bad);
            CHECK(name, bad == 0 && xe_plan_buffers(shapes[s].mode, shapes[s].cpus, shapes[s].nodes) == n);
        }
    }
    unsigned bad = 0;
    for (unsigned c = 1; c <= 4096; c++)
        if (xe_plan_buffers(XE_PART_PER_CPU, c, 1) != expect_buffers(XE_PART_PER_CPU, c, 1) ||
            xe_plan_buffers(XE_PART_PER_NODE, 1, c) != 3 * c)
            bad++;
    CHECK("buffer counts for 1..4096 CPUs and nodes", bad == 0);
    CHECK("per_cpu 1 CPU: ceil(2.5) = 3", xe_plan_buffers(XE_PART_PER_CPU, 1, 1) == 3);
    CHECK("per_cpu 3 CPUs: ceil(7.5) = 8", xe_plan_buffers(XE_PART_PER_CPU, 3, 1) == 8);
}

static void test_strict(void)
{
    char name[160];
    for (size_t s = 0; s < NSHAPES; s++) {
        unsigned n = expect_buffers(shapes[s].mode, shapes[s].cpus, shapes[s].nodes);
        unsigned over = 0, wrong_reject = 0, not_tight = 0;
        for (uint64_t kb = 1; kb <= 8192; kb++) {
            xe_plan_in in = shape(shapes[s].mode, shapes[s].cpus, shapes[s].nodes, kb * KB, 1);
            xe_plan_out out;
            int rc = xe_plan(&in, &out, NULL, 0);
            int k_zero = (kb * KB / n) / 65536 == 0;
            if ((rc != 0) != k_zero)
                wrong_reject++;
            if (rc != 0)
                continue;
            if (out.memory_allocated > kb * KB || (uint64_t)n * out.chunks_per_buffer * 65536 > kb * KB)
                over++;
            /* One more chunk per buffer would not fit: strict gives all it can. */
            if ((uint64_t)n * (out.chunks_per_buffer + 1) * 65536 <= kb * KB)
                not_tight++;
        }
        snprintf(name, sizeof name,
                 "strict %s cpus=%u nodes=%u, 1..8192 KB: never over max_memory (%u), "
                 "rejected exactly where k = 0 (%u wrong), largest fit (%u not)",
                 xe_partition_mode_name(shapes[s].mode), shapes[s].cpus, shapes[s].nodes, over, wrong_reject,
                 not_tight);
        CHECK(name, over == 0 && wrong_reject == 0 && not_tight == 0);
    }
    /* Strict gives one chunk less than XE, except when that is none. */
    xe_plan_in in = shape(XE_PART_NONE, 1, 1, 576 * KB, 1);
    xe_plan_out out;
    CHECK("strict 576 KB none: 3 x 196403 bytes, exactly 576 KB allocated",
          xe_plan(&in, &out, NULL, 0) == 0 && out.regular_buffer_size == 196403 &&
              out.memory_allocated == 576 * KB);
    char why[256];
    in.max_memory = 191 * KB;
    CHECK("strict 191 KB none is rejected like XE",
          xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, ">= 192 KB") != NULL);
}

static void test_max_event_size(void)
{
    char why[256];
    xe_plan_out out;
    xe_plan_in in = shape(XE_PART_NONE, 1, 1, 4096 * KB, 0);
    in.max_event_size = 4096 * KB - 1;
    int rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("max_event_size below max_memory is rejected",
          rc == -EINVAL && strstr(why, "max_event_size must be at least max_memory") != NULL);
    in.max_event_size = 4096 * KB;
    rc = xe_plan(&in, &out, why, sizeof why);
    /* 4 MB + 205 bytes needs 65 chunks. */
    CHECK("max_event_size 4 MB: 2 large buffers of 65 chunks",
          rc == 0 && out.total_large_buffers == 2 && out.large_buffer_alloc == 65 * 65536ull &&
              out.large_buffer_size == 65 * 65536ull - 205);
    CHECK("max_event_size: regular buffers unchanged (seed's 4096 KB row)",
          rc == 0 && out.total_regular_buffers == 3 && out.regular_buffer_size == 1441587 &&
              out.total_buffer_size == 4324761);
    CHECK("max_event_size: memory_allocated counts the large buffers",
          rc == 0 && out.memory_allocated == 3 * 22 * 65536ull + 2 * 65 * 65536ull);
    /* An event of exactly the usable size of k chunks fits k chunks. */
    in.max_memory = 192 * KB;
    in.max_event_size = 4 * 65536 - 205;
    rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("max_event_size = 4 chunks - 205: large buffers of exactly 4 chunks",
          rc == 0 && out.large_buffer_alloc == 4 * 65536 && out.large_buffer_size == in.max_event_size);
    in.max_event_size++;
    rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("max_event_size one byte more: 5 chunks", rc == 0 && out.large_buffer_alloc == 5 * 65536);
    /* Every size from max_memory up: one event of max_event_size fits, with less than a chunk to spare. */
    unsigned bad = 0;
    for (uint64_t mes = 192 * KB; mes < 192 * KB + 3 * 65536; mes += 7) {
        in.max_event_size = mes;
        if (xe_plan(&in, &out, NULL, 0) != 0 || out.large_buffer_size < mes ||
            out.large_buffer_size >= mes + 65536 || out.large_buffer_alloc % 65536 != 0 ||
            out.large_buffer_size + 205 != out.large_buffer_alloc)
            bad++;
    }
    CHECK("max_event_size: the large buffer holds one event of that size, rounded to chunks", bad == 0);
    in.max_event_size = 0;
    CHECK("max_event_size 0: no large buffers",
          xe_plan(&in, &out, NULL, 0) == 0 && out.total_large_buffers == 0 && out.large_buffer_alloc == 0 &&
              out.large_buffer_size == 0);
    in.max_event_size = UINT64_MAX;
    CHECK("max_event_size near 2^64 is rejected, not wrapped",
          xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, "too large") != NULL);
    /* Strict bounds the regular buffers by MAX_MEMORY; the large ones are extra, as in XE. */
    in = shape(XE_PART_PER_CPU, 2, 1, 640 * KB, 1);
    in.max_event_size = 1024 * KB;
    CHECK("strict with max_event_size: regular buffers within max_memory",
          xe_plan(&in, &out, NULL, 0) == 0 &&
              out.total_regular_buffers * out.regular_buffer_alloc <= 640 * KB &&
              out.memory_allocated == 5 * out.regular_buffer_alloc + 2 * out.large_buffer_alloc);
}

static void test_rejections(void)
{
    char why[256];
    xe_plan_out out;
    xe_plan_in in = shape(XE_PART_NONE, 1, 1, 191 * KB, 0);
    int rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("191 KB none: rejected with the numbers",
          rc == -EINVAL && strstr(why, "191 KB") && strstr(why, "3 buffers of 65194 bytes") &&
              strstr(why, "max_memory >= 192 KB") && !strchr(why, '\n') && strncmp(why, "memtrail", 8) != 0);
    in = shape(XE_PART_PER_CPU, 2, 1, 300 * KB, 0);
    rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("300 KB per_cpu 2 CPUs: rejected, names the shape and 320 KB",
          rc == -EINVAL && strstr(why, "5 buffers (PER_CPU, 2 CPUs)") && strstr(why, ">= 320 KB"));
    in = shape(XE_PART_PER_NODE, 1, 8, 1000 * KB, 0);
    rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("1000 KB per_node 8 nodes: rejected below 1536 KB",
          rc == -EINVAL && strstr(why, "24 buffers (PER_NODE, 8 nodes)") && strstr(why, ">= 1536 KB"));
    in = shape(XE_PART_NONE, 1, 1, 0, 0);
    CHECK("max_memory 0 is rejected", xe_plan(&in, &out, why, sizeof why) == -EINVAL);
    in = shape(XE_PART_NONE, 1, 1, 196607, 0);
    rc = xe_plan(&in, &out, why, sizeof why);
    CHECK("a byte short of 192 KB is rejected, shown in bytes", rc == -EINVAL && strstr(why, "196607 bytes"));
    in.max_memory = 196608;
    CHECK("exactly 192 KB is accepted",
          xe_plan(&in, &out, NULL, 0) == 0 && out.regular_buffer_size == 130867);

    in = shape(XE_PART_PER_CPU, 0, 1, 4096 * KB, 0);
    CHECK("per_cpu with 0 CPUs is rejected",
          xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, "CPU"));
    in = shape(XE_PART_PER_NODE, 1, 0, 4096 * KB, 0);
    CHECK("per_node with 0 nodes is rejected",
          xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, "node"));
    in = shape(XE_PART_NONE, 0, 0, 4096 * KB, 0);
    CHECK("none ignores cpus and nodes", xe_plan(&in, &out, NULL, 0) == 0 && out.total_regular_buffers == 3);
    in = shape((xe_partition_mode)7, 1, 1, 4096 * KB, 0);
    CHECK("unknown mode is rejected", xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, "7"));
    in = shape(XE_PART_PER_CPU, UINT32_MAX, 1, UINT64_MAX, 0);
    CHECK("more than 2^32 buffers is rejected, not wrapped",
          xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, "too many buffers"));
    CHECK("xe_plan_buffers saturates", xe_plan_buffers(XE_PART_PER_CPU, UINT32_MAX, 1) == UINT32_MAX);
    in = shape(XE_PART_NONE, 1, 1, UINT64_MAX, 0);
    CHECK("max_memory near 2^64 is rejected, not wrapped",
          xe_plan(&in, &out, why, sizeof why) == -EINVAL && strstr(why, "too large"));
    in.max_memory = 1ull << 40; /* 1 TB: big but fine */
    CHECK("1 TB none is fine",
          xe_plan(&in, &out, NULL, 0) == 0 && out.chunks_per_buffer == (1ull << 40) / 3 / 65536 + 1);

    /* The reason is cut to whylen and stays NUL-terminated (ASan watches the bounds). */
    char small[12];
    memset(small, 'x', sizeof small);
    in = shape(XE_PART_NONE, 1, 1, 191 * KB, 0);
    rc = xe_plan(&in, &out, small, sizeof small);
    CHECK("a short why buffer is cut and terminated", rc == -EINVAL && strlen(small) == sizeof small - 1);
    CHECK("no why buffer at all", xe_plan(&in, &out, NULL, 0) == -EINVAL);
    CHECK("no input", xe_plan(NULL, &out, why, sizeof why) == -EINVAL && why[0] != '\0');
    in.max_memory = 4096 * KB;
    strcpy(why, "stale");
    CHECK("success leaves an empty reason", xe_plan(&in, &out, why, sizeof why) == 0 && why[0] == '\0');
}

static void test_parse(void)
{
    static const struct {
        const char *s;
        uint64_t bare, want;
    } good[] = {
        {"576", 1024, 576 * KB},
        {"576KB", 1024, 576 * KB},
        {"576kb", 1, 576 * KB},
        {"576k", 1, 576 * KB},
        {"576 KB", 1, 576 * KB},
        {"4 MB", 1024, 4 << 20},
        {"1m", 1, 1 << 20},
        {"1Mb", 1, 1 << 20},
        {"2GB", 1, 2ull << 30},
        {"3g", 1, 3ull << 30},
        {"100B", 1024, 100},
        {"100b", 1024, 100},
        {"0", 1024, 0},
        {"007", 1, 7},
        {"100", 1, 100},
        {"18446744073709551615", 1, UINT64_MAX},
        {"18014398509481983", 1024, 18014398509481983ull * 1024},
        {"17179869183GB", 1024, 17179869183ull << 30},
    };
    char name[96];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 12345;
        int rc = xe_parse_size(good[i].s, good[i].bare, &v);
        snprintf(name, sizeof name, "parse size '%s' (bare x%llu)", good[i].s,
                 (unsigned long long)good[i].bare);
        CHECK(name, rc == 0 && v == good[i].want);
    }
    static const struct {
        const char *s;
        uint64_t bare;
        int rc;
    } bad[] = {
        {"", 1024, -EINVAL},
        {"-1", 1024, -EINVAL},
        {"+1", 1024, -EINVAL},
        {" 1", 1024, -EINVAL},
        {"1.5MB", 1024, -EINVAL},
        {"1TB", 1024, -EINVAL},
        {"MB", 1024, -EINVAL},
        {"1 ", 1024, -EINVAL},
        {"1KBx", 1024, -EINVAL},
        {"1 K B", 1024, -EINVAL},
        {"1KiB", 1024, -EINVAL},
        {"0x10", 1024, -EINVAL},
        {"99999999999999999999999x", 1, -EINVAL},
        {"18446744073709551616", 1, -ERANGE}, /* 2^64 */
        {"18014398509481984", 1024, -ERANGE}, /* 2^54 KB = 2^64 bytes */
        {"17179869184GB", 1024, -ERANGE},     /* 2^34 GB */
        {"99999999999999999999999", 1, -ERANGE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 12345;
        int rc = xe_parse_size(bad[i].s, bad[i].bare, &v);
        snprintf(name, sizeof name, "parse size '%s' is %s", bad[i].s,
                 bad[i].rc == -EINVAL ? "EINVAL" : "ERANGE");
        CHECK(name, rc == bad[i].rc && v == 12345);
    }
    uint64_t v;
    CHECK("parse size: bare unit 0 is invalid", xe_parse_size("1", 0, &v) == -EINVAL);
    CHECK("parse size: NULL", xe_parse_size(NULL, 1, &v) == -EINVAL);

    xe_partition_mode m = XE_PART_PER_CPU;
    CHECK("mode none", xe_parse_partition_mode("none", &m) == 0 && m == XE_PART_NONE);
    CHECK("mode PER_NODE", xe_parse_partition_mode("PER_NODE", &m) == 0 && m == XE_PART_PER_NODE);
    CHECK("mode Per_Cpu", xe_parse_partition_mode("Per_Cpu", &m) == 0 && m == XE_PART_PER_CPU);
    CHECK("mode percpu is not a mode",
          xe_parse_partition_mode("percpu", &m) == -EINVAL && m == XE_PART_PER_CPU);
    CHECK("mode per_cpux is not a mode", xe_parse_partition_mode("per_cpux", &m) == -EINVAL);
    CHECK("mode per_cp is not a mode", xe_parse_partition_mode("per_cp", &m) == -EINVAL);
    CHECK("mode '' is not a mode", xe_parse_partition_mode("", &m) == -EINVAL);
    CHECK("mode names", strcmp(xe_partition_mode_name(XE_PART_NONE), "NONE") == 0 &&
                            strcmp(xe_partition_mode_name(XE_PART_PER_NODE), "PER_NODE") == 0 &&
                            strcmp(xe_partition_mode_name(XE_PART_PER_CPU), "PER_CPU") == 0 &&
                            strcmp(xe_partition_mode_name((xe_partition_mode)9), "UNKNOWN") == 0);
}

int main(void)
{
    test_seed_tables();
    test_other_shapes();
    test_strict();
    test_max_event_size();
    test_rejections();
    test_parse();
    return failures != 0;
}
