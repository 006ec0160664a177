/* record_stacks.c — call chains interned to ids (the impacting stacks of
 * faults, the allocation stacks the agent reports): a hash table of frame
 * arrays; a chain's RS_EV_STACK record is queued before its first use. */
#include "refset/record.h"

#include <stdlib.h>
#include <string.h>

typedef struct stack_entry {
    uint64_t hash;
    uint32_t id, n;
    uint64_t *frames;
} stack_entry;

struct rec_stacks {
    stack_entry *v;
    size_t n, cap; /* cap: power of two */
};

rec_stacks *rec_stacks_new(void)
{
    return calloc(1, sizeof(rec_stacks));
}

void rec_stacks_free(rec_stacks *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->cap; i++)
        free(s->v[i].frames);
    free(s->v);
    free(s);
}

static uint64_t hash_frames(const uint64_t *f, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ f[i]) * 0x100000001b3ull, h ^= h >> 29;
    return h | 1;
}

static int grow(rec_stacks *s)
{
    size_t cap = s->cap ? s->cap * 2 : 1024;
    stack_entry *nv = calloc(cap, sizeof *nv);
    if (!nv)
        return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->v[i].hash)
            continue;
        size_t j = (size_t)s->v[i].hash & (cap - 1);
        while (nv[j].hash)
            j = (j + 1) & (cap - 1);
        nv[j] = s->v[i];
    }
    free(s->v);
    s->v = nv;
    s->cap = cap;
    return 0;
}

uint32_t rec_stacks_intern(rec_stacks *s, rec_out *o, const uint64_t *frames, uint32_t n, uint64_t time)
{
    if (n == 0 || !s)
        return 0;
    if ((s->n + 1) * 2 > s->cap && grow(s) < 0)
        return 0;
    uint64_t h = hash_frames(frames, n);
    size_t i = (size_t)h & (s->cap - 1);
    for (; s->v[i].hash; i = (i + 1) & (s->cap - 1))
        if (s->v[i].hash == h && s->v[i].n == n && memcmp(s->v[i].frames, frames, n * sizeof *frames) == 0)
            return s->v[i].id;
    uint64_t *copy = malloc(n * sizeof *copy);
    if (!copy)
        return 0;
    memcpy(copy, frames, n * sizeof *copy);
    s->v[i] = (stack_entry){h, (uint32_t)++s->n, n, copy};
    mt_rs_event ev = {
        .type = RS_EV_STACK, .time_ns = time, .stack = s->v[i].id, .nframes = n, .frames = copy};
    rec_out_push(o, &ev);
    return s->v[i].id;
}
