/* stacks.c — what the exporters share: the counter a --value names, a
 * small hash map, and the cache that symbolizes each distinct return
 * address of a report once (a hot allocation path shows up in many sites). */
#include "export/export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const value_names[] = {
    [EXPORT_LIVE_BYTES] = "live_bytes",
    [EXPORT_LIVE_COUNT] = "live_count",
    [EXPORT_PEAK_BYTES] = "peak_bytes",
    [EXPORT_ALLOCS] = "allocs",
    [EXPORT_FREES] = "frees",
    [EXPORT_REALLOCS] = "reallocs",
    [EXPORT_ALLOCATED_BYTES] = "allocated_bytes",
};

int export_value_parse(const char *name, enum export_value *out)
{
    for (size_t i = 0; i < sizeof value_names / sizeof value_names[0]; i++)
        if (strcmp(name, value_names[i]) == 0) {
            *out = (enum export_value)i;
            return 0;
        }
    return -EINVAL;
}

const char *export_value_name(enum export_value v)
{
    return value_names[v];
}

int64_t export_site_value(const struct report_site *s, enum export_value v)
{
    switch (v) {
    case EXPORT_LIVE_BYTES: return s->n.live_bytes;
    case EXPORT_LIVE_COUNT: return s->n.live_count;
    case EXPORT_PEAK_BYTES: return s->n.peak_bytes;
    case EXPORT_ALLOCS: return s->n.allocs;
    case EXPORT_FREES: return s->n.frees;
    case EXPORT_REALLOCS: return s->n.reallocs;
    case EXPORT_ALLOCATED_BYTES: return s->has_allocated ? s->allocated_bytes : 0;
    }
    return 0;
}

/* --- the map --------------------------------------------------------------- */

/* Keyed (report_hash): return addresses come from an untrusted file, and
 * an unkeyed mix could be inverted to make them all collide. */
static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)report_hash_i64((int64_t)key) & (cap - 1);
}

int export_map_get(const struct export_map *m, uint64_t key, uint64_t *val)
{
    if (m->cap == 0)
        return 0;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->used[i])
            return 0;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
    }
}

static void put_slot(struct export_map *m, uint64_t key, uint64_t val)
{
    size_t i = slot_of(key, m->cap);
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->used[i])
        m->n++;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
}

int export_map_put(struct export_map *m, uint64_t key, uint64_t val)
{
    if ((m->n + 1) * 2 > m->cap) { /* keep it at most half full */
        struct export_map g = {0};
        g.cap = m->cap ? m->cap * 2 : 64;
        g.keys = malloc(g.cap * sizeof *g.keys);
        g.vals = malloc(g.cap * sizeof *g.vals);
        g.used = calloc(g.cap, 1);
        if (!g.keys || !g.vals || !g.used) {
            export_map_free(&g);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->used[i])
                put_slot(&g, m->keys[i], m->vals[i]);
        export_map_free(m);
        *m = g;
    }
    put_slot(m, key, val);
    return 0;
}

void export_map_free(struct export_map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

/* --- the address cache ----------------------------------------------------- */

/* Inlined calls deeper than this at one address are cut (the outer ones kept
 * by the symbolizer's order would be lost, so ask for plenty). */
#define MAX_INLINE 64

void export_stacks_init(struct export_stacks *st, const struct report *r, struct symbolizer *sym)
{
    memset(st, 0, sizeof *st);
    st->r = r;
    st->sym = sym;
}

int export_stacks_lookup(struct export_stacks *st, uint64_t address, size_t *index)
{
    uint64_t found;
    if (export_map_get(&st->index, address, &found)) {
        *index = (size_t)found;
        return 0;
    }
    if (!st->modules_ready) {
        if (report_module_map_init(&st->modules, st->r) < 0)
            return -ENOMEM;
        st->modules_ready = true;
    }
    if (report_grow(&st->addrs, &st->addrs_cap, st->naddrs + 1, sizeof *st->addrs, 64) < 0 ||
        report_grow(&st->frames, &st->frames_cap, st->nframes + MAX_INLINE, sizeof *st->frames, 256) < 0)
        return -ENOMEM;
    struct sym_frame *out = st->frames + st->nframes;
    int n = st->sym ? sym_lookup(st->sym, address, out, MAX_INLINE) : 0;
    if (n < 1) { /* no symbolizer: the bare address */
        memset(out, 0, sizeof *out);
        out->address = address;
        n = 1;
    }
    if (export_map_put(&st->index, address, st->naddrs) < 0)
        return -ENOMEM;
    st->addrs[st->naddrs] = (struct export_addr){
        .address = address,
        .first = st->nframes,
        .nframes = n,
        .module = report_module_map_find(&st->modules, address),
    };
    st->nframes += (size_t)n;
    *index = st->naddrs++;
    return 0;
}

void export_stacks_free(struct export_stacks *st)
{
    free(st->addrs);
    free(st->frames);
    export_map_free(&st->index);
    report_module_map_free(&st->modules);
    memset(st, 0, sizeof *st);
}

char *export_frame_name(const struct sym_frame *f)
{
    char *name = NULL;
    int rc;
    if (f->function && f->function[0]) {
        name = strdup(f->function);
        rc = name ? 0 : -1;
    } else if (f->module) {
        const char *base = strrchr(f->module, '/');
        base = base ? base + 1 : f->module;
        rc = asprintf(&name, "%s+0x%llx", base, (unsigned long long)f->offset);
    } else {
        rc = asprintf(&name, "0x%llx", (unsigned long long)f->address);
    }
    if (rc < 0)
        return NULL;
    for (char *p = name; *p; p++)
        if (*p == ';' || *p == '\n' || *p == '\r')
            *p = '_';
    return name;
}
