/* xe_plan.c — event-session buffer sizing (xe_plan.h): the arithmetic
 * behind SQL Server's dm_xe_sessions buffer columns, reproduced exactly
 * (seed 000), plus STRICT_MAX_MEMORY, which rounds down instead of up.
 *
 * Linked into the agent (sessions size themselves here, possibly from
 * inside the malloc hooks) and into the CLI: no allocation and no stdio,
 * reasons are formatted with mt_out into the caller's buffer. */
#include "xe/xe_plan.h"

#include "common/out.h"

#include <errno.h>

/* The buffer count in 64 bits: ceil(2.5 x cpus) and 3 x nodes can exceed
 * 32 bits for absurd inputs, which xe_plan rejects rather than wraps. */
static uint64_t buffers64(xe_partition_mode mode, unsigned cpus, unsigned nodes)
{
    switch (mode) {
    case XE_PART_NONE: return 3;
    case XE_PART_PER_NODE: return 3 * (uint64_t)(nodes ? nodes : 1);
    case XE_PART_PER_CPU: return (5 * (uint64_t)(cpus ? cpus : 1) + 1) / 2; /* ceil(2.5 x cpus) */
    }
    return 0;
}

unsigned xe_plan_buffers(xe_partition_mode mode, unsigned cpus, unsigned nodes)
{
    uint64_t n = buffers64(mode, cpus, nodes);
    return n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
}

/* "576 KB" when a whole number of KB (as MAX_MEMORY is usually given and
 * the seed's tables count it), else "590000 bytes". */
static void out_size(mt_out *o, uint64_t bytes)
{
    mt_out_u64(o, bytes % 1024 == 0 ? bytes / 1024 : bytes);
    mt_out_str(o, bytes % 1024 == 0 ? " KB" : " bytes");
}

/* "3 buffers", "5 buffers (PER_CPU, 2 CPUs)", "24 buffers (PER_NODE, 8 nodes)". */
static void out_buffers(mt_out *o, const xe_plan_in *in, uint64_t n)
{
    mt_out_u64(o, n);
    mt_out_str(o, n == 1 ? " buffer" : " buffers");
    if (in->mode == XE_PART_NONE)
        return;
    unsigned count = in->mode == XE_PART_PER_CPU ? in->cpus : in->nodes;
    mt_out_str(o, in->mode == XE_PART_PER_CPU ? " (PER_CPU, " : " (PER_NODE, ");
    mt_out_u64(o, count);
    if (in->mode == XE_PART_PER_CPU)
        mt_out_str(o, count == 1 ? " CPU)" : " CPUs)");
    else
        mt_out_str(o, count == 1 ? " node)" : " nodes)");
}

static void why_begin(mt_out *o, char *why, size_t whylen)
{
    mt_out_init(o, why, whylen, -1);
}

static int why_end(mt_out *o, size_t whylen)
{
    if (whylen > 0)
        mt_out_cstr(o); /* NUL-terminated, cut short if it did not fit */
    return -EINVAL;
}

static const char too_wide[] = "the buffers' total would not fit in 64 bits";

/* "max_memory 17592186044416 KB is too large: <which limit>". */
static int too_large(char *why, size_t whylen, const char *what, uint64_t value, const char *detail)
{
    mt_out o;
    why_begin(&o, why, whylen);
    mt_out_str(&o, what);
    mt_out_char(&o, ' ');
    out_size(&o, value);
    mt_out_str(&o, " is too large: ");
    mt_out_str(&o, detail);
    return why_end(&o, whylen);
}

int xe_plan(const xe_plan_in *in, xe_plan_out *out, char *why, size_t whylen)
{
    mt_out o;
    if (!why)
        whylen = 0;
    if (!in || !out) {
        why_begin(&o, why, whylen);
        mt_out_str(&o, "xe_plan: no input or output");
        return why_end(&o, whylen);
    }
    *out = (xe_plan_out){0};
    if (in->mode != XE_PART_NONE && in->mode != XE_PART_PER_NODE && in->mode != XE_PART_PER_CPU) {
        why_begin(&o, why, whylen);
        mt_out_str(&o, "unknown memory_partition_mode ");
        mt_out_u64(&o, (uint64_t)in->mode);
        mt_out_str(&o, " (accepted: NONE, PER_NODE, PER_CPU)");
        return why_end(&o, whylen);
    }
    if ((in->mode == XE_PART_PER_CPU && in->cpus == 0) || (in->mode == XE_PART_PER_NODE && in->nodes == 0)) {
        why_begin(&o, why, whylen);
        mt_out_str(&o, in->mode == XE_PART_PER_CPU ? "PER_CPU partitioning needs at least 1 CPU"
                                                   : "PER_NODE partitioning needs at least 1 NUMA node");
        return why_end(&o, whylen);
    }
    uint64_t n = buffers64(in->mode, in->cpus, in->nodes);
    if (n > UINT32_MAX) {
        why_begin(&o, why, whylen);
        mt_out_str(&o, "too many buffers: ");
        out_buffers(&o, in, n);
        mt_out_str(&o, " (at most 4294967295)");
        return why_end(&o, whylen);
    }

    /* Each buffer holds whole 64 KiB chunks. XE rounds the share up to the
     * next chunk boundary, so a share of exactly k chunks still gets k + 1
     * (192 KB / 3 = 64 KiB gives 130867-byte buffers in the seed's table);
     * strict rounds down, so the buffers never add up to more than
     * MAX_MEMORY. Either way a share under one chunk is an error. */
    uint64_t per = in->max_memory / n;
    if (per < XE_CHUNK) {
        why_begin(&o, why, whylen);
        mt_out_str(&o, "max_memory ");
        out_size(&o, in->max_memory);
        mt_out_str(&o, " gives ");
        out_buffers(&o, in, n);
        mt_out_str(&o, " of ");
        mt_out_u64(&o, per);
        mt_out_str(&o, " bytes; a buffer needs at least 64 KB (max_memory >= ");
        out_size(&o, n * XE_CHUNK);
        mt_out_str(&o, ")");
        return why_end(&o, whylen);
    }
    if (in->max_event_size && in->max_event_size < in->max_memory) {
        why_begin(&o, why, whylen);
        mt_out_str(&o, "max_event_size must be at least max_memory (max_event_size ");
        out_size(&o, in->max_event_size);
        mt_out_str(&o, ", max_memory ");
        out_size(&o, in->max_memory);
        mt_out_str(&o, ")");
        return why_end(&o, whylen);
    }
    uint64_t k = per / XE_CHUNK + (in->strict ? 0 : 1);
    if (k > UINT32_MAX)
        return too_large(why, whylen, "max_memory", in->max_memory,
                         "a buffer would have more than 2^32 chunks of 64 KB");
    uint64_t alloc = k * XE_CHUNK; /* < 2^48: no overflow */
    uint64_t size = alloc - XE_BUFFER_OVERHEAD;
    uint64_t total, regular_alloc;
    if (__builtin_mul_overflow(n, size, &total) || __builtin_mul_overflow(n, alloc, &regular_alloc))
        return too_large(why, whylen, "max_memory", in->max_memory, too_wide);

    /* Two large buffers, each big enough for one event of max_event_size
     * bytes after its own management overhead. */
    uint64_t large_alloc = 0, large_total = 0;
    if (in->max_event_size) {
        uint64_t need;
        if (__builtin_add_overflow(in->max_event_size, (uint64_t)XE_BUFFER_OVERHEAD + XE_CHUNK - 1, &need))
            return too_large(why, whylen, "max_event_size", in->max_event_size, too_wide);
        large_alloc = need / XE_CHUNK * XE_CHUNK;
        if (__builtin_mul_overflow(large_alloc, (uint64_t)2, &large_total))
            return too_large(why, whylen, "max_event_size", in->max_event_size, too_wide);
    }
    uint64_t all;
    if (__builtin_add_overflow(regular_alloc, large_total, &all))
        return too_large(why, whylen, "max_event_size", in->max_event_size, too_wide);

    out->total_regular_buffers = (uint32_t)n;
    out->chunks_per_buffer = (uint32_t)k;
    out->regular_buffer_size = size;
    out->regular_buffer_alloc = alloc;
    out->total_buffer_size = total;
    out->total_large_buffers = in->max_event_size ? 2 : 0;
    out->large_buffer_alloc = large_alloc;
    out->large_buffer_size = large_alloc ? large_alloc - XE_BUFFER_OVERHEAD : 0;
    out->memory_allocated = all;
    if (whylen > 0)
        why[0] = '\0';
    return 0;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* Case-insensitive ASCII equality of s[0..n) and the lowercase word w. */
static int word_is(const char *s, size_t n, const char *w)
{
    size_t i = 0;
    for (; i < n && w[i]; i++)
        if (lower((unsigned char)s[i]) != w[i])
            return 0;
    return i == n && w[i] == '\0';
}

int xe_parse_size(const char *s, uint64_t bare_unit, uint64_t *out)
{
    if (!s || !out || bare_unit == 0)
        return -EINVAL;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -EINVAL; /* no sign, no leading space, no empty string */
    uint64_t v = 0;
    int range = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(v, (uint64_t)10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
            range = 1; /* keep scanning: "99999999999999999999x" is not a size at all */
    int spaced = *p == ' ';
    while (*p == ' ')
        p++; /* "4 MB", as T-SQL writes it */
    const char *unit = p;
    size_t ulen = 0;
    while (unit[ulen])
        ulen++;
    uint64_t mult;
    if (ulen == 0 && spaced)
        return -EINVAL; /* "4 ": a unit was meant but is missing */
    if (ulen == 0)
        mult = bare_unit;
    else if (word_is(unit, ulen, "b"))
        mult = 1;
    else if (word_is(unit, ulen, "k") || word_is(unit, ulen, "kb"))
        mult = 1024;
    else if (word_is(unit, ulen, "m") || word_is(unit, ulen, "mb"))
        mult = 1024 * 1024;
    else if (word_is(unit, ulen, "g") || word_is(unit, ulen, "gb"))
        mult = 1024 * 1024 * 1024;
    else
        return -EINVAL; /* unknown unit, trailing space or junk */
    if (range || __builtin_mul_overflow(v, mult, &v))
        return -ERANGE;
    *out = v;
    return 0;
}

int xe_parse_partition_mode(const char *s, xe_partition_mode *mode)
{
    if (!s || !mode)
        return -EINVAL;
    size_t n = 0;
    while (s[n])
        n++;
    if (word_is(s, n, "none"))
        *mode = XE_PART_NONE;
    else if (word_is(s, n, "per_node"))
        *mode = XE_PART_PER_NODE;
    else if (word_is(s, n, "per_cpu"))
        *mode = XE_PART_PER_CPU;
    else
        return -EINVAL;
    return 0;
}

const char *xe_partition_mode_name(xe_partition_mode mode)
{
    switch (mode) {
    case XE_PART_NONE: return "NONE";
    case XE_PART_PER_NODE: return "PER_NODE";
    case XE_PART_PER_CPU: return "PER_CPU";
    }
    return "UNKNOWN";
}
