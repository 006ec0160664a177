/* analyze_tree.c — the stacks live at the peak as one call tree (JSON
 * "peak.tree"): every stack with bytes live at the peak, symbolized (inlined
 * calls as frames of their own), merged from the outermost frame inwards by
 * function name, each node's value the bytes live at the peak under it. It
 * is what `memtrail html` draws as the flame graph at the peak, so the page
 * draws the analysis's numbers rather than computing its own.
 *
 * Bounded: nodes under 1/ANALYZE_TREE_MIN_SHARE of the peak are left out
 * (their bytes stay in their parent's value), so each depth holds at most
 * that many nodes whatever the trace; the JSON is flat (one node a line, its
 * parent's index), since a tree 64 frames deep is deeper than a JSON writer
 * nests. */
#include "analyze/analyze.h"
#include "common/json_out.h"
#include "symbol/symbol.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SYM 16
#define ANALYZE_TREE_MIN_SHARE 5000 /* nodes under peak / this are left out */

struct tnode {
    char *name;
    uint64_t value;
    uint32_t parent;
    uint32_t first, next; /* first child, next sibling (0: none; node 0 is the root) */
    uint32_t out;         /* index in the output, or UINT32_MAX when left out */
};

struct tree {
    struct tnode *n;
    size_t len, cap;
    uint32_t *slots; /* node index + 1, by hash of (parent, name) */
    size_t mask;
};

static uint64_t hash_of(uint32_t parent, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ parent;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int rehash(struct tree *t)
{
    size_t cap = t->slots ? (t->mask + 1) * 2 : 1024;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s)
        return -ENOMEM;
    for (size_t i = 1; i < t->len; i++) {
        size_t h = hash_of(t->n[i].parent, t->n[i].name) & (cap - 1);
        while (s[h])
            h = (h + 1) & (cap - 1);
        s[h] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = s;
    t->mask = cap - 1;
    return 0;
}

/* The child of `parent` named `name`, made when missing: its index, or -ENOMEM. */
static int64_t child(struct tree *t, uint32_t parent, const char *name)
{
    if (!t->slots || (t->len + 1) * 2 > t->mask + 1)
        if (rehash(t) < 0)
            return -ENOMEM;
    size_t h = hash_of(parent, name) & t->mask;
    while (t->slots[h]) {
        struct tnode *c = &t->n[t->slots[h] - 1];
        if (c->parent == parent && strcmp(c->name, name) == 0)
            return t->slots[h] - 1;
        h = (h + 1) & t->mask;
    }
    if (t->len == t->cap) {
        size_t cap = t->cap * 2;
        void *p = realloc(t->n, cap * sizeof *t->n);
        if (!p)
            return -ENOMEM;
        t->n = p;
        t->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    uint32_t i = (uint32_t)t->len++;
    t->n[i] = (struct tnode){.name = copy, .parent = parent, .next = t->n[parent].first};
    t->n[parent].first = i;
    t->slots[h] = i + 1;
    return i;
}

/* A frame's name: its function, else module+offset, else its address. */
static const char *frame_name(const struct sym_frame *f, uint64_t address, char *buf, size_t len)
{
    if (f && f->function)
        return f->function;
    if (f && f->module) {
        const char *base = strrchr(f->module, '/');
        snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : f->module, f->offset);
    } else {
        snprintf(buf, len, "0x%" PRIx64, address);
    }
    return buf;
}

/* One stack's bytes along its path from the outermost frame in. */
static int add_stack(struct tree *t, const mt_trace_stack *st, struct symbolizer *sym, uint64_t bytes)
{
    uint32_t at = 0;
    t->n[0].value += bytes;
    for (uint32_t i = st ? st->nframes : 0; i-- > 0;) {
        struct sym_frame f[MAX_SYM];
        int k = sym ? sym_lookup(sym, st->frames[i], f, MAX_SYM) : 0;
        for (int m = k > 0 ? k - 1 : 0; m >= 0; m--) { /* innermost first: walk them outside in */
            char buf[96];
            int64_t c = child(t, at, frame_name(k > 0 ? &f[m] : NULL, st->frames[i], buf, sizeof buf));
            if (c < 0)
                return (int)c;
            at = (uint32_t)c;
            t->n[at].value += bytes;
        }
    }
    return 0;
}

/* Writes node i and, depth first, its children worth showing. */
static void emit(mt_json *j, struct tree *t, uint32_t i, uint64_t min, uint32_t *next)
{
    struct tnode *n = &t->n[i];
    n->out = (*next)++;
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_kstr(j, "name", n->name);
    mt_json_ku64(j, "value", n->value);
    mt_json_key(j, "parent");
    if (i == 0)
        mt_json_null(j);
    else
        mt_json_u64(j, t->n[n->parent].out);
    mt_json_object_end(j);
    for (uint32_t c = n->first; c; c = t->n[c].next)
        if (t->n[c].value >= min && t->n[c].value > 0)
            emit(j, t, c, min, next);
}

int analyze_tree_json(mt_json *j, const struct analyze_result *res, mt_trace_reader *r,
                      struct symbolizer *sym)
{
    struct tree t = {.cap = 256};
    t.n = calloc(t.cap, sizeof *t.n);
    int rc = -ENOMEM;
    if (!t.n || !(t.n[0].name = strdup("all")))
        goto out;
    t.len = 1;
    for (size_t i = 0; i < res->nstacks; i++) {
        const struct analyze_stack *s = &res->stacks[i];
        if (!s->peak_bytes)
            continue;
        rc = add_stack(&t, analyze_stack_frames(res, r, s->id), sym, s->peak_bytes);
        if (rc < 0)
            goto out;
    }
    uint64_t min = res->peak_bytes / ANALYZE_TREE_MIN_SHARE;
    uint32_t shown = 0;
    mt_json_key(j, "tree");
    mt_json_array_begin(j);
    emit(j, &t, 0, min, &shown);
    mt_json_array_end(j);
    rc = 0;
out:
    for (size_t i = 0; i < t.len; i++)
        free(t.n[i].name);
    free(t.n);
    free(t.slots);
    return rc;
}
