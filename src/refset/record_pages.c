/* record_pages.c — the outstanding pages of one process: an open-addressing
 * hash set keyed by page number (linear probing, deletion by shifting
 * back, so no tombstones pile up under munmap/mmap churn). */
#include "refset/record.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uint64_t page, size_t cap)
{
    uint64_t h = page * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

rec_page *rec_pages_find(const rec_pages *s, uint64_t page)
{
    if (!s->cap)
        return NULL;
    for (size_t i = slot_of(page, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->v[i].page == page)
            return &s->v[i];
        if (s->v[i].page == 0)
            return NULL;
    }
}

static int rehash(rec_pages *s, size_t cap)
{
    rec_page *nv = calloc(cap, sizeof *nv);
    if (!nv)
        return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->v[i].page)
            continue;
        size_t j = slot_of(s->v[i].page, cap);
        while (nv[j].page)
            j = (j + 1) & (cap - 1);
        nv[j] = s->v[i];
    }
    free(s->v);
    s->v = nv;
    s->cap = cap;
    return 0;
}

rec_page *rec_pages_add(rec_pages *s, uint64_t page)
{
    if ((s->n + 1) * 4 > s->cap * 3 && rehash(s, s->cap ? s->cap * 2 : 1024) < 0)
        return NULL;
    size_t i = slot_of(page, s->cap);
    while (s->v[i].page)
        i = (i + 1) & (s->cap - 1);
    memset(&s->v[i], 0, sizeof s->v[i]);
    s->v[i].page = page;
    s->n++;
    return &s->v[i];
}

void rec_pages_del(rec_pages *s, uint64_t page)
{
    rec_page *e = rec_pages_find(s, page);
    if (!e)
        return;
    size_t i = (size_t)(e - s->v), mask = s->cap - 1;
    /* Shift later members of the run back into the hole when their home
     * slot allows it. */
    for (size_t j = (i + 1) & mask; s->v[j].page; j = (j + 1) & mask) {
        size_t home = slot_of(s->v[j].page, s->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s->v[i] = s->v[j];
            i = j;
        }
    }
    s->v[i].page = 0;
    s->n--;
}

void rec_pages_free(rec_pages *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
