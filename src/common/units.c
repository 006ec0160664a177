/* units.c — sizes and durations as text (units.h): integer arithmetic
 * only (128-bit where a fraction is scaled), so a value is rounded once and
 * exactly, without malloc or stdio. */
#include "common/units.h"

#include <stdbool.h>

typedef unsigned __int128 u128;

struct text {
    char *buf;
    size_t len, at;
};

static void put_char(struct text *t, char c)
{
    if (t->at + 1 < t->len)
        t->buf[t->at++] = c;
}

static void put_str(struct text *t, const char *s)
{
    while (s && *s)
        put_char(t, *s++);
}

/* v in decimal, zero-padded to at least `width` digits. */
static void put_u128(struct text *t, u128 v, int width)
{
    char digits[48];
    int n = 0;
    do {
        digits[n++] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v && n < (int)sizeof digits);
    while (n < width && n < (int)sizeof digits)
        digits[n++] = '0';
    while (n)
        put_char(t, digits[--n]);
}

static const char *finish(struct text *t)
{
    if (t->len)
        t->buf[t->at < t->len ? t->at : t->len - 1] = '\0';
    return t->buf;
}

static u128 ten_to(int k)
{
    u128 p = 1;
    while (k-- > 0)
        p *= 10;
    return p;
}

static int ndigits(u128 v)
{
    int n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

/* mag / unit with `decimals` decimals, rounded to nearest. */
static u128 scaled(uint64_t mag, uint64_t unit, int decimals)
{
    return ((u128)mag * ten_to(decimals) * 2 + unit) / ((u128)unit * 2);
}

static void put_fixed(struct text *t, bool negative, uint64_t mag, uint64_t unit, const char *label)
{
    if (!unit)
        unit = 1;
    if (negative && mag)
        put_char(t, '-');
    uint64_t q = mag / unit, r = mag % unit;
    if (r == 0) {
        put_u128(t, q, 1);
        put_str(t, label);
        return;
    }
    /* Three significant digits: the integer part's, then decimals. */
    int decimals;
    if (q) {
        int whole = ndigits(q);
        decimals = whole >= 3 ? 0 : 3 - whole;
    } else {
        int zeros = 0; /* zeros between the point and the first significant digit */
        while ((u128)r * ten_to(zeros + 1) < unit && zeros < 16)
            zeros++;
        decimals = zeros + 3;
    }
    u128 v = scaled(mag, unit, decimals);
    /* Rounding carried into a fourth digit (9.995 -> 10.00): one decimal less. */
    if (decimals > 0 && ndigits(v) > 3) {
        decimals--;
        v = scaled(mag, unit, decimals);
    }
    put_u128(t, v / ten_to(decimals), 1);
    if (decimals) {
        put_char(t, '.');
        put_u128(t, v % ten_to(decimals), decimals);
    }
    put_str(t, label);
}

const char *mt_size_in(char *buf, size_t len, int64_t bytes, uint64_t unit_bytes, const char *label)
{
    struct text t = {buf, len, 0};
    uint64_t mag = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
    put_fixed(&t, bytes < 0, mag, unit_bytes, label);
    return finish(&t);
}

static const char *const size_labels[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};

static void put_size(struct text *t, bool negative, uint64_t mag)
{
    int k = 0;
    while (k < 6 && mag >> (10 * (k + 1)))
        k++;
    /* 1023.6 KB rounds to 1024KB: say 1.00MB. */
    if (k > 0 && k < 6 && mag >= ((uint64_t)1 << (10 * (k + 1))) - ((uint64_t)1 << (10 * k)) / 2)
        k++;
    put_fixed(t, negative, mag, (uint64_t)1 << (10 * k), size_labels[k]);
}

const char *mt_size(char *buf, size_t len, int64_t bytes)
{
    struct text t = {buf, len, 0};
    put_size(&t, bytes < 0, bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes);
    return finish(&t);
}

const char *mt_size_u64(char *buf, size_t len, uint64_t bytes)
{
    struct text t = {buf, len, 0};
    put_size(&t, false, bytes);
    return finish(&t);
}

const char *mt_duration(char *buf, size_t len, uint64_t ns)
{
    struct text t = {buf, len, 0};
    static const struct {
        uint64_t ns;
        const char *label;
    } units[] = {{1000, "us"}, {1000000, "ms"}, {1000000000, "s"}};
    if (ns < 1000) {
        put_u128(&t, ns, 1);
        put_str(&t, "ns");
        return finish(&t);
    }
    size_t k = 0;
    while (k + 1 < sizeof units / sizeof units[0] && ns >= units[k + 1].ns)
        k++;
    u128 v = scaled(ns, units[k].ns, 3);
    /* 999.9996 us rounds to 1000.000 us: say 1.000 ms instead. */
    if (v >= 1000000 && k + 1 < sizeof units / sizeof units[0])
        v = scaled(ns, units[++k].ns, 3);
    put_u128(&t, v / 1000, 1);
    put_char(&t, '.');
    put_u128(&t, v % 1000, 3);
    put_str(&t, units[k].label);
    return finish(&t);
}
