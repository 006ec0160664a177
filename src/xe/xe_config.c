/* xe_config.c — a session's definition as text: "max_memory=4MB;
 * memory_partition_mode=per_cpu; target=ring_buffer(max_events_limit=100);
 * where=size >= 4096", with the names of CREATE EVENT SESSION. Used by the
 * public API, MEMTRAIL_SESSIONS and `memtrail run --session`. No malloc. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "common/out.h"
#include "xe/xe.h"
#include "xe/xe_util.h"

void xe_config_defaults(xe_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_memory = XE_DEFAULT_MAX_MEMORY;
    cfg->mode = XE_PART_NONE;
    cfg->retention = XE_ALLOW_SINGLE_EVENT_LOSS;
    cfg->max_dispatch_latency_ns = 30ull * 1000000000u;
}

static int say(char *why, size_t whylen, const char *a, const char *b, size_t blen, const char *c)
{
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, a);
    if (b)
        mt_out_shown(&o, b, blen);
    if (c)
        mt_out_str(&o, c);
    xe_why_done(&o);
    return -EINVAL;
}

/* Names and keywords: ASCII, any case. */
static int word_is(const char *s, size_t n, const char *w)
{
    return xe_name_eq(w, s, n);
}

/* Copy a value into a NUL-terminated scratch buffer. */
static int copy_value(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        return -1;
    memcpy(dst, v, n);
    dst[n] = 0;
    return 0;
}

static int parse_on_off(const char *v, size_t n, int *out)
{
    if (word_is(v, n, "on") || word_is(v, n, "true") || word_is(v, n, "1"))
        *out = 1;
    else if (word_is(v, n, "off") || word_is(v, n, "false") || word_is(v, n, "0"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* "30s", "500ms", "30 seconds", "30" (seconds), "infinite" or 0 (infinite,
 * as in Extended Events). */
static int parse_latency(const char *v, size_t n, uint64_t *ns)
{
    if (word_is(v, n, "infinite")) {
        *ns = XE_LATENCY_INFINITE;
        return 0;
    }
    uint64_t x = 0;
    size_t i = 0;
    for (; i < n && isdigit((unsigned char)v[i]); i++) {
        if (x > 1000000000u)
            return -1;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    if (i == 0)
        return -1;
    const char *u = v + i;
    size_t un = n - i;
    xe_trim(&u, &un);
    uint64_t mul;
    if (un == 0 || word_is(u, un, "s") || word_is(u, un, "sec") || word_is(u, un, "seconds"))
        mul = 1000000000u;
    else if (word_is(u, un, "ms"))
        mul = 1000000u;
    else
        return -1;
    *ns = x == 0 ? XE_LATENCY_INFINITE : x * mul;
    return 0;
}

static int parse_retention(const char *v, size_t n, enum xe_retention *r)
{
    if (word_is(v, n, "allow_single_event_loss"))
        *r = XE_ALLOW_SINGLE_EVENT_LOSS;
    else if (word_is(v, n, "allow_multiple_event_loss"))
        *r = XE_ALLOW_MULTIPLE_EVENT_LOSS;
    else if (word_is(v, n, "no_event_loss"))
        *r = XE_NO_EVENT_LOSS;
    else
        return -1;
    return 0;
}

static int parse_events(const char *v, size_t n, uint32_t *mask)
{
    *mask = 0;
    while (n) {
        size_t k = 0;
        while (k < n && v[k] != ',')
            k++;
        const char *w = v;
        size_t wn = k;
        xe_trim(&w, &wn);
        int t = xe_type_by_name(w, wn);
        if (t < 0)
            return -1;
        *mask |= 1u << t;
        v += k < n ? k + 1 : k;
        n -= k < n ? k + 1 : k;
    }
    return *mask ? 0 : -1;
}

static int parse_target(xe_config *cfg, const char *v, size_t n, char *why, size_t whylen)
{
    if (cfg->ntargets >= XE_MAX_TARGETS)
        return say(why, whylen, "too many targets (at most 8)", NULL, 0, NULL);
    size_t name_n = 0;
    while (name_n < n && v[name_n] != '(')
        name_n++;
    const char *name = v;
    size_t nn = name_n;
    xe_trim(&name, &nn);
    const char *params = "";
    size_t pn = 0;
    if (name_n < n) {
        if (v[n - 1] != ')')
            return say(why, whylen, "target '", v, n, "': missing ')'");
        params = v + name_n + 1;
        pn = n - name_n - 2;
        xe_trim(&params, &pn);
    }
    const xe_target_ops *ops = xe_target_find(name, nn);
    if (!ops)
        return say(why, whylen, "unknown target '", name, nn,
                   "' (targets: ring_buffer, event_file, histogram, event_counter, pair_matching)");
    for (int i = 0; i < cfg->ntargets; i++)
        if (cfg->targets[i].ops == ops)
            return say(why, whylen, "target '", name, nn, "' given twice");
    if (copy_value(cfg->targets[cfg->ntargets].params, sizeof cfg->targets[0].params, params, pn) < 0)
        return say(why, whylen, "target '", name, nn, "': parameters too long");
    cfg->targets[cfg->ntargets++].ops = ops;
    return 0;
}

static int parse_count(const char *v, size_t n, unsigned *out)
{
    unsigned x = 0;
    if (n == 0 || n > 6)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return -1;
        x = x * 10 + (unsigned)(v[i] - '0');
    }
    if (x == 0 || x > XE_MAX_COUNT)
        return -1;
    *out = x;
    return 0;
}

/* The session options, by the names of CREATE EVENT SESSION and their
 * short forms; each may be given once, target excepted (once per kind). */
enum option {
    OPT_NAME,
    OPT_MAX_MEMORY,
    OPT_MODE,
    OPT_RETENTION,
    OPT_LATENCY,
    OPT_MAX_EVENT_SIZE,
    OPT_STRICT,
    OPT_EVENTS,
    OPT_WHERE,
    OPT_TARGET,
    OPT_START,
    OPT_CPUS,
    OPT_NODES,
    NOPTIONS
};
static const struct {
    const char *name, *alias;
} options[NOPTIONS] = {
    [OPT_NAME] = {"name", NULL},
    [OPT_MAX_MEMORY] = {"max_memory", NULL},
    [OPT_MODE] = {"memory_partition_mode", "mode"},
    [OPT_RETENTION] = {"event_retention_mode", "retention"},
    [OPT_LATENCY] = {"max_dispatch_latency", "latency"},
    [OPT_MAX_EVENT_SIZE] = {"max_event_size", NULL},
    [OPT_STRICT] = {"strict_max_memory", "strict"},
    [OPT_EVENTS] = {"events", NULL},
    [OPT_WHERE] = {"where", "predicate"},
    [OPT_TARGET] = {"target", NULL},
    [OPT_START] = {"start", NULL},
    [OPT_CPUS] = {"cpus", NULL},
    [OPT_NODES] = {"nodes", NULL},
};

/* The option named k[0..kn), or -1. */
static int option_of(const char *k, size_t kn)
{
    for (int i = 0; i < NOPTIONS; i++)
        if (word_is(k, kn, options[i].name) || (options[i].alias && word_is(k, kn, options[i].alias)))
            return i;
    return -1;
}

static int parse_option(xe_config *cfg, enum option opt, const char *v, size_t vn, char *why, size_t whylen)
{
    char tmp[256];
    uint64_t bytes;
    switch (opt) {
    case OPT_NAME:
        if (vn == 0 || vn > XE_NAME_MAX)
            return say(why, whylen, "name: 1 to 63 characters", NULL, 0, NULL);
        for (size_t i = 0; i < vn; i++)
            if (!isalnum((unsigned char)v[i]) && !strchr("_.-:", v[i]))
                return say(why, whylen, "name '", v, vn, "': use letters, digits and _ . - : only");
        copy_value(cfg->name, sizeof cfg->name, v, vn);
        return 0;
    case OPT_MAX_MEMORY:
    case OPT_MAX_EVENT_SIZE:
        if (copy_value(tmp, sizeof tmp, v, vn) < 0 || xe_parse_size(tmp, 1024, &bytes) < 0)
            return say(why, whylen, "bad size '", v, vn, "' (e.g. 4MB, 640KB; a bare number is KB)");
        *(opt == OPT_MAX_MEMORY ? &cfg->max_memory : &cfg->max_event_size) = bytes;
        return 0;
    case OPT_MODE:
        if (copy_value(tmp, sizeof tmp, v, vn) < 0 || xe_parse_partition_mode(tmp, &cfg->mode) < 0)
            return say(why, whylen, "bad partition mode '", v, vn, "' (none, per_node, per_cpu)");
        return 0;
    case OPT_RETENTION:
        if (parse_retention(v, vn, &cfg->retention) < 0)
            return say(why, whylen, "bad retention mode '", v, vn,
                       "' (allow_single_event_loss, allow_multiple_event_loss, no_event_loss)");
        return 0;
    case OPT_LATENCY:
        if (parse_latency(v, vn, &cfg->max_dispatch_latency_ns) < 0)
            return say(why, whylen, "bad dispatch latency '", v, vn, "' (e.g. 30s, 500ms, infinite)");
        return 0;
    case OPT_STRICT:
        if (parse_on_off(v, vn, &cfg->strict) < 0)
            return say(why, whylen, "strict_max_memory: on or off, not '", v, vn, "'");
        return 0;
    case OPT_START:
        if (parse_on_off(v, vn, &cfg->start) < 0)
            return say(why, whylen, "start: on or off, not '", v, vn, "'");
        return 0;
    case OPT_EVENTS:
        if (parse_events(v, vn, &cfg->event_mask) < 0)
            return say(
                why, whylen, "bad event list '", v, vn,
                "' (user, alloc, free, realloc, mmap, munmap, span_begin, span_end, snapshot, page_ref)");
        return 0;
    case OPT_WHERE:
        if (copy_value(tmp, sizeof tmp, v, vn) < 0)
            return say(why, whylen, "predicate too long", NULL, 0, NULL);
        return xe_pred_compile(tmp, &cfg->pred, why, whylen);
    case OPT_TARGET: return parse_target(cfg, v, vn, why, whylen);
    case OPT_CPUS:
    case OPT_NODES:
        if (parse_count(v, vn, opt == OPT_CPUS ? &cfg->cpus : &cfg->nodes) < 0) {
            mt_out o;
            xe_why_init(&o, why, whylen);
            mt_out_str(&o, "bad count '");
            mt_out_shown(&o, v, vn);
            mt_out_str(&o, "' (1 to ");
            mt_out_u64(&o, XE_MAX_COUNT);
            mt_out_str(&o, ")");
            xe_why_done(&o);
            return -EINVAL;
        }
        return 0;
    case NOPTIONS: break;
    }
    return -EINVAL;
}

/* "unknown session option 'colour' (name, max_memory, ...)": the table's names. */
static int unknown_option(const char *k, size_t kn, char *why, size_t whylen)
{
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, "unknown session option '");
    mt_out_shown(&o, k, kn);
    mt_out_str(&o, "' (");
    for (int i = 0; i < NOPTIONS; i++) {
        mt_out_str(&o, options[i].name);
        mt_out_str(&o, i + 1 < NOPTIONS ? ", " : ")");
    }
    xe_why_done(&o);
    return -EINVAL;
}

/* "session option 'max_memory' given twice", or for a short form
 * "session option 'mode' (memory_partition_mode) given twice": the
 * target's "parameter '...' given twice", for the session. */
static int given_twice(enum option opt, const char *k, size_t kn, char *why, size_t whylen)
{
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, "session option '");
    mt_out_shown(&o, k, kn);
    mt_out_char(&o, '\'');
    if (!word_is(k, kn, options[opt].name)) {
        mt_out_str(&o, " (");
        mt_out_str(&o, options[opt].name);
        mt_out_char(&o, ')');
    }
    mt_out_str(&o, " given twice");
    xe_why_done(&o);
    return -EINVAL;
}

int xe_config_parse(const char *text, xe_config *cfg, char *why, size_t whylen)
{
    xe_config_defaults(cfg);
    const char *p = text ? text : "";
    uint32_t given = 0; /* the options seen, by enum option */
    while (*p) {
        const char *e = p;
        int depth = 0;
        while (*e && ((*e != ';' && *e != '\n') || depth > 0)) {
            depth += *e == '(' ? 1 : *e == ')' ? -1 : 0;
            e++;
        }
        const char *item = p;
        size_t n = (size_t)(e - p);
        p = *e ? e + 1 : e;
        xe_trim(&item, &n);
        if (n == 0)
            continue;
        const char *eq = memchr(item, '=', n);
        if (!eq)
            return say(why, whylen, "session option '", item, n, "' needs a value (name=value)");
        const char *k = item, *v = eq + 1;
        size_t kn = (size_t)(eq - item), vn = n - kn - 1;
        xe_trim(&k, &kn);
        xe_trim(&v, &vn);
        int opt = option_of(k, kn);
        if (opt < 0)
            return unknown_option(k, kn, why, whylen);
        /* A second value would silently replace the first. */
        if (opt != OPT_TARGET && (given >> opt & 1))
            return given_twice((enum option)opt, k, kn, why, whylen);
        given |= 1u << opt;
        int rc = parse_option(cfg, (enum option)opt, v, vn, why, whylen);
        if (rc < 0)
            return rc;
    }
    return 0;
}
