/* record_maps.c — a process's mappings (from /proc/PID/maps, and from
 * perf's MMAP2 records between two reads), kept sorted for a binary search
 * per page, and the category each gives its pages (docs/refset.md):
 *   [heap] Heap; [stack] UserStack; shared anonymous memory ("/dev/zero
 *   (deleted)", /SYSV, [anon_shmem:], /memfd:, /dev/shm/) PFMappedSection;
 *   other private anonymous memory VirtualAlloc; files mapped executable
 *   somewhere in the process (or the program itself) Image; other files
 *   MapFile.
 * Also the mappings a read no longer had (gone), for the faults made in
 * them before it and read after it. */
#include "refset/record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void rec_maps_free(rec_maps *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].name);
    free(m->v);
    for (size_t i = 0; i < m->ngone; i++)
        free(m->gone[i].name);
    free(m->gone);
    *m = (rec_maps){0};
}

rec_map *rec_maps_find(const rec_maps *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->v[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->n && m->v[lo].start <= addr ? &m->v[lo] : NULL;
}

rec_map *rec_maps_find_at(const rec_maps *m, uint64_t addr, uint64_t time)
{
    rec_map *live = rec_maps_find(m, addr);
    if (live)
        return live;
    for (size_t i = m->ngone; i-- > 0;) {
        rec_map *g = &m->gone[i];
        if (g->start <= addr && addr < g->end && time < g->gone_ns)
            return g;
    }
    return NULL;
}

static bool same_map(const rec_map *a, const rec_map *b)
{
    return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff && a->ino == b->ino &&
           a->dev == b->dev;
}

/* The old mappings of m that the new list nm does not have move to
 * m->gone, stamped now; what is older there than REC_MAPS_GONE_NS, or
 * beyond REC_MAPS_GONE_MAX with them (the oldest first), leaves. */
static void keep_gone(rec_maps *m, const rec_maps *nm, uint64_t now)
{
    size_t all = 0;
    for (size_t i = 0, j = 0; i < m->n; i++) {
        while (j < nm->n && nm->v[j].start < m->v[i].start)
            j++;
        m->v[i].gone_ns = j < nm->n && same_map(&m->v[i], &nm->v[j]) ? 0 : now;
        all += m->v[i].gone_ns != 0;
    }
    size_t lost = all < REC_MAPS_GONE_MAX ? all : REC_MAPS_GONE_MAX;
    size_t drop = 0;
    while (drop < m->ngone && m->gone[drop].gone_ns + REC_MAPS_GONE_NS < now)
        drop++;
    if (m->ngone - drop + lost > REC_MAPS_GONE_MAX)
        drop = m->ngone + lost - REC_MAPS_GONE_MAX;
    if (drop) {
        for (size_t k = 0; k < drop; k++)
            free(m->gone[k].name);
        memmove(m->gone, m->gone + drop, (m->ngone - drop) * sizeof *m->gone);
        m->ngone -= drop;
    }
    if (m->ngone + lost > m->capgone) {
        size_t nc = m->capgone ? m->capgone : 16;
        while (nc < m->ngone + lost)
            nc *= 2;
        rec_map *nv = realloc(m->gone, nc * sizeof *nv);
        if (!nv)
            return; /* none kept: their late faults are not recorded, as before */
        m->gone = nv;
        m->capgone = nc;
    }
    /* When this read lost more than REC_MAPS_GONE_MAX: the highest. */
    size_t skip = all - lost;
    for (size_t i = 0; i < m->n; i++) {
        if (!m->v[i].gone_ns)
            continue;
        if (skip) {
            skip--;
            continue;
        }
        m->gone[m->ngone++] = m->v[i];
        m->v[i].name = NULL; /* owned by gone now */
    }
}

static int grow(rec_maps *m, size_t need)
{
    if (need <= m->cap)
        return 0;
    size_t nc = m->cap ? m->cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    rec_map *nv = realloc(m->v, nc * sizeof *nv);
    if (!nv)
        return -ENOMEM;
    m->v = nv;
    m->cap = nc;
    return 0;
}

static bool starts(const char *s, const char *prefix)
{
    return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool is_shared_anon(const rec_map *e)
{
    const char *n = e->name;
    return starts(n, "/dev/zero") || starts(n, "/SYSV") || starts(n, "[anon_shmem") || starts(n, "/memfd:") ||
           starts(n, "/dev/shm/") || (e->shared && !n);
}

/* The files mapped executable in the process (by device and inode). */
typedef struct exec_files {
    uint64_t ino[256];
    uint32_t dev[256];
    size_t n;
} exec_files;

static void collect_exec(const rec_maps *m, exec_files *x)
{
    x->n = 0;
    for (size_t i = 0; i < m->n && x->n < 256; i++) {
        const rec_map *e = &m->v[i];
        if (!(e->prot & PROT_EXEC) || !e->ino ||
            (x->n && x->ino[x->n - 1] == e->ino && x->dev[x->n - 1] == e->dev))
            continue;
        x->ino[x->n] = e->ino;
        x->dev[x->n++] = e->dev;
    }
}

/* Is e's file an ELF image of the process: mapped executable anywhere in
 * it, or the program itself. */
static bool is_image(const exec_files *x, const rec_map *e, const char *exe)
{
    if (exe && *exe && strcmp(e->name, exe) == 0)
        return true;
    for (size_t i = 0; i < x->n; i++)
        if (x->ino[i] == e->ino && x->dev[i] == e->dev)
            return true;
    return false;
}

static void categorize(const exec_files *x, rec_map *e, const char *exe)
{
    const char *n = e->name;
    e->skip = 0;
    if (n && strcmp(n, "[heap]") == 0)
        e->category = RS_CAT_HEAP;
    else if (n && strncmp(n, "[stack", 6) == 0)
        e->category = RS_CAT_USERSTACK;
    else if (is_shared_anon(e))
        e->category = RS_CAT_PFMAPPEDSECTION;
    else if (!n || starts(n, "[anon:") || starts(n, "//anon"))
        e->category = e->is_stack ? RS_CAT_USERSTACK : RS_CAT_VIRTUALALLOC;
    else if (n[0] == '[') { /* [vvar], [vdso], [vsyscall], [uprobes]: the kernel's, not the program's */
        e->category = RS_CAT_IMAGE;
        e->skip = 1;
    } else
        e->category = is_image(x, e, exe) ? RS_CAT_IMAGE : RS_CAT_MAPFILE;
}

void rec_maps_categorize(rec_maps *m, const char *exe)
{
    exec_files x;
    collect_exec(m, &x);
    for (size_t i = 0; i < m->n; i++)
        categorize(&x, &m->v[i], exe);
}

/* One line of /proc/PID/maps:
 * "start-end perms offset maj:min inode   path". */
static int parse_line(char *line, rec_map *e)
{
    unsigned long long start, end, off, ino;
    unsigned maj, min;
    char perms[8];
    int name_at = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min, &ino,
               &name_at) < 7)
        return -EINVAL;
    memset(e, 0, sizeof *e);
    e->start = start;
    e->end = end;
    e->pgoff = off;
    e->ino = ino;
    e->dev = maj << 20 | min;
    e->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
              (perms[2] == 'x' ? PROT_EXEC : 0);
    e->shared = perms[3] == 's';
    char *name = line + name_at;
    size_t len = strlen(name);
    while (len > 0 && (name[len - 1] == '\n' || name[len - 1] == ' '))
        name[--len] = '\0';
    if (len > 0 && !(e->name = strdup(name)))
        return -ENOMEM;
    return 0;
}

int rec_maps_read(rec_maps *m, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    rec_maps nm = {0};
    char line[4096 + 128];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        if ((rc = grow(&nm, nm.n + 1)) < 0)
            break;
        if (parse_line(line, &nm.v[nm.n]) == 0) {
            /* A stack found by a fault near SP stays one. */
            rec_map *old = rec_maps_find(m, nm.v[nm.n].start);
            if (old && old->start == nm.v[nm.n].start && old->is_stack)
                nm.v[nm.n].is_stack = 1;
            nm.n++;
        }
    }
    fclose(f);
    if (rc < 0) {
        rec_maps_free(&nm);
        return rc;
    }
    keep_gone(m, &nm, rec_now());
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].name);
    free(m->v);
    m->v = nm.v;
    m->n = nm.n;
    m->cap = nm.cap;
    return 0;
}

void rec_maps_remove(rec_maps *m, uint64_t start, uint64_t end)
{
    size_t j = 0;
    for (size_t i = 0; i < m->n; i++) {
        rec_map e = m->v[i];
        if (e.end <= start || e.start >= end) {
            m->v[j++] = e;
            continue;
        }
        /* Keep what lies outside [start, end): at most two pieces. */
        if (e.start < start && e.end > end) {
            if (grow(m, m->n + 1) < 0) {
                m->v[j++] = e;
                continue;
            }
            rec_map tail = e;
            tail.pgoff += end - e.start;
            tail.start = end;
            tail.name = e.name ? strdup(e.name) : NULL;
            e.end = start;
            m->v[j++] = e;
            memmove(&m->v[i + 2], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
            m->v[i + 1] = tail;
            m->n++;
            continue;
        }
        if (e.start < start) {
            e.end = start;
            m->v[j++] = e;
        } else if (e.end > end) {
            e.pgoff += end - e.start;
            e.start = end;
            m->v[j++] = e;
        } else {
            free(e.name);
        }
    }
    m->n = j;
}

int rec_maps_insert(rec_maps *m, const rec_map *nm)
{
    rec_maps_remove(m, nm->start, nm->end);
    if (grow(m, m->n + 1) < 0)
        return -ENOMEM;
    size_t i = 0;
    while (i < m->n && m->v[i].start < nm->start)
        i++;
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i] = *nm;
    m->v[i].name = nm->name ? strdup(nm->name) : NULL;
    m->n++;
    return 0;
}
