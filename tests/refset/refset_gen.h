/* refset_gen.h — random reference-set records of every type (a fixed
 * seed), only the fields each type has set, for the recording file's
 * tests (test_refset_file.c) and the fuzz corpus's seeds (mkcorpus.c). */
#ifndef MT_TESTS_REFSET_GEN_H
#define MT_TESTS_REFSET_GEN_H

#include <stdint.h>
#include <stdlib.h>

#include "refset/refset_event.h"
#include "refset/refset_format.h"

#define START 7000000000ull
#define PAGE 4096u

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A record and the storage its pointers point into. */
typedef struct rec {
    mt_rs_event ev;
    char name[64], value[64];
    uint64_t frames[TRACE_MAX_FRAMES];
} rec;

static void random_string(char *s, size_t cap, int allow_null, const char **out, uint32_t *len)
{
    if (allow_null && rnd() % 5 == 0) {
        *out = NULL;
        if (len)
            *len = 0;
        return;
    }
    size_t n = rnd() % (cap - 1);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(' ' + rnd() % 94);
    s[n] = 0;
    *out = s;
    if (len)
        *len = (uint32_t)n;
}

static uint64_t wide(void)
{
    switch (rnd() % 4) {
    case 0: return rnd() % 16;
    case 1: return rnd() % 100000;
    case 2: return rnd();
    default: return UINT64_MAX - rnd() % 3;
    }
}

/* Random records of every type, times non-decreasing from START (some
 * equal, some far apart), only the fields each type has set. */
static rec *random_records(size_t n)
{
    rec *v = calloc(n, sizeof *v);
    uint64_t t = START + 500, addr = 0x7f0000000000ull, pfn = 1000;
    uint32_t pid = 100, tid = 100;
    for (size_t i = 0; i < n; i++) {
        mt_rs_event *e = &v[i].ev;
        unsigned r = (unsigned)(rnd() % 100);
        e->type = r < 55 ? RS_EV_REF : r < 70 ? RS_EV_RELEASE : (uint8_t)(1 + rnd() % 9);
        uint64_t dt = rnd() % 8 == 0 ? rnd() % 2000000000ull : rnd() % 3 ? rnd() % 30000 : 0;
        t += dt;
        if (rnd() % 10 == 0) {
            pid = (uint32_t)(rnd() % 5 ? 100 + rnd() % 10 : rnd());
            tid = rnd() % 2 ? pid : (uint32_t)rnd();
        }
        if (rs_type_timed(e->type))
            e->time_ns = t;
        switch (e->type) {
        case RS_EV_PROCESS:
            e->pid = (uint32_t)rnd();
            e->ppid = (uint32_t)rnd();
            e->reason = (uint8_t)(rnd() % 4);
            random_string(v[i].name, sizeof v[i].name, 1, &e->name, &e->name_len);
            break;
        case RS_EV_EXIT: e->pid = (uint32_t)rnd(); break;
        case RS_EV_MAP:
            e->pid = pid;
            e->addr = wide();
            e->len = wide();
            e->pgoff = wide();
            e->dev = (uint32_t)rnd();
            e->ino = wide();
            e->prot = (uint32_t)(rnd() % 8);
            e->map_flags = (uint32_t)rnd();
            e->category = (uint8_t)(rnd() % RS_NCATEGORIES);
            e->stack = (uint32_t)rnd();
            random_string(v[i].name, sizeof v[i].name, 1, &e->name, &e->name_len);
            break;
        case RS_EV_REF:
        case RS_EV_RELEASE:
            e->pid = pid;
            addr = rnd() % 4 ? addr + PAGE : rnd() % 2 ? wide() : addr - PAGE * (rnd() % 1000);
            e->npages = rnd() % 3    ? 1
                        : rnd() % 10 ? 1 + rnd() % 512
                                     : (e->type == RS_EV_REF ? RS_MAX_REF_NPAGES : RS_MAX_NPAGES) - rnd() % 2;
            if (e->npages > (UINT64_MAX - addr) / PAGE) /* a reader refuses ranges past 2^64 */
                addr &= (1ull << 56) - 1;
            e->addr = addr;
            addr += (e->npages - 1) * PAGE;
            if (e->type == RS_EV_RELEASE) {
                e->reason = (uint8_t)(rnd() % 4);
                break;
            }
            e->tid = tid;
            pfn = rnd() % 3 ? pfn + 1 : rnd() % 2 ? wide() : 0;
            e->pfn = pfn;
            if (rnd() % 4 == 0) {
                e->category = (uint8_t)(rnd() % RS_NCATEGORIES);
                e->flags = (uint8_t)rnd();
                e->stack = rnd() % 2 ? (uint32_t)(rnd() % 50) : (uint32_t)rnd();
                e->alloc_stack = (uint32_t)(rnd() % 50);
                e->ino = rnd() % 2 ? wide() : 0;
                e->dev = e->ino ? (uint32_t)rnd() : 0;
            } else if (i && v[i - 1].ev.type == RS_EV_REF) {
                const mt_rs_event *p = &v[i - 1].ev;
                e->category = p->category;
                e->flags = p->flags;
                e->stack = p->stack;
                e->alloc_stack = p->alloc_stack;
                e->ino = p->ino;
                e->dev = p->dev;
            }
            e->pgoff = e->ino || rnd() % 20 == 0 ? wide() : 0;
            break;
        case RS_EV_STACK:
            e->stack = (uint32_t)rnd();
            e->nframes = (uint32_t)(rnd() % 50 ? rnd() % 40 : TRACE_MAX_FRAMES);
            for (uint32_t k = 0; k < e->nframes; k++)
                v[i].frames[k] = rnd() % 2 ? 0x400000 + rnd() % 100000 : wide();
            e->frames = v[i].frames;
            break;
        case RS_EV_MODULE:
            e->pid = pid;
            e->addr = wide();
            e->len = wide();
            e->pgoff = wide();
            random_string(v[i].name, sizeof v[i].name, 1, &e->name, &e->name_len);
            random_string(v[i].value, sizeof v[i].value, 1, &e->value, NULL);
            break;
        case RS_EV_META:
            random_string(v[i].name, sizeof v[i].name, 0, &e->name, &e->name_len);
            random_string(v[i].value, sizeof v[i].value, 1, &e->value, NULL);
            break;
        case RS_EV_LOST:
            e->pid = pid;
            e->count = wide();
            break;
        }
    }
    return v;
}

#endif
