/* trace_write_defs.c — the writer's definitions: threads, stacks (with
 * the modules their frames lie in, asked of the host), categories, meta,
 * kept pending in the next DEFS chunk; and the mmap'd buffers and maps
 * the writer keeps them in (no malloc: the writer runs in the agent). */
#include "trace/trace_write_int.h"

#include <errno.h>
#include <sys/mman.h>

int trace_wbuf_reserve(wbuf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64u << 10;
    while (cap < b->len + more)
        cap *= 2;
    void *p =
        b->p ? mremap(b->p, b->cap, cap, MREMAP_MAYMOVE)
             : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

void trace_wbuf_free(wbuf *b)
{
    if (b->p)
        munmap(b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int map_grow(u32map *m)
{
    uint32_t n = m->slots ? (m->mask + 1) * 2 : 1024;
    size_t bytes = (size_t)n * 8;
    uint32_t *s = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return -ENOMEM;
    u32map nm = {s, n - 1, m->used};
    if (m->slots) {
        for (uint32_t i = 0; i <= m->mask; i++)
            if (m->slots[2 * i + 1]) {
                uint32_t *e = trace_map_find(&nm, m->slots[2 * i]);
                e[0] = m->slots[2 * i];
                e[1] = m->slots[2 * i + 1];
            }
        munmap(m->slots, (size_t)(m->mask + 1) * 8);
    }
    *m = nm;
    return 0;
}

int trace_map_put(u32map *m, uint32_t key, uint32_t value)
{
    if ((!m->slots || (m->used + 1) * 4 > (m->mask + 1) * 3) && map_grow(m) < 0)
        return -ENOMEM;
    uint32_t *e = trace_map_find(m, key);
    if (!e[1])
        m->used++;
    e[0] = key;
    e[1] = value;
    return 0;
}

void trace_map_clear(u32map *m)
{
    if (m->slots)
        memset(m->slots, 0, (size_t)(m->mask + 1) * 8);
    m->used = 0;
}

void trace_map_free(u32map *m)
{
    if (m->slots)
        munmap(m->slots, (size_t)(m->mask + 1) * 8);
    m->slots = NULL;
    m->mask = m->used = 0;
}

static unsigned char *defs_room(mt_trace_writer *w, size_t n)
{
    if (trace_wbuf_reserve(&w->defs, n) < 0)
        return NULL;
    w->ndefs++;
    return w->defs.p + w->defs.len;
}

unsigned char *trace_w_put_bytes(unsigned char *p, const void *s, size_t n)
{
    p = trace_put_varint(p, n);
    if (n)
        memcpy(p, s, n);
    return p + n;
}

size_t trace_w_strlen(const char *s)
{
    size_t n = s ? strnlen(s, TRACE_MAX_STRING) : 0;
    return n;
}

static int module_find(const mt_trace_writer *w, uint64_t addr)
{
    const module_range *m = (const module_range *)w->modules.p;
    size_t lo = 0, hi = w->modules.len / sizeof *m;
    while (lo < hi) { /* first module starting above addr */
        size_t mid = (lo + hi) / 2;
        if (m[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;) { /* ranges may nest or overlap: look back a little */
        if (addr >= m[i].start && addr < m[i].end)
            return 1;
        if (lo - i > 8)
            break;
    }
    return 0;
}

void mt_trace_write_module(mt_trace_writer *w, uint64_t start, uint64_t end, uint64_t bias, const char *path,
                           const unsigned char *build_id, unsigned build_id_len)
{
    if (!w || end <= start)
        return;
    module_range *m = (module_range *)w->modules.p;
    size_t n = w->modules.len / sizeof *m, at = 0;
    while (at < n && m[at].start < start)
        at++;
    for (size_t i = at; i < n && m[i].start == start; i++)
        if (m[i].end == end)
            return;
    if (build_id_len > 255)
        build_id_len = 255;
    size_t plen = trace_w_strlen(path);
    if (trace_wbuf_reserve(&w->modules, sizeof *m) < 0)
        return;
    unsigned char *p = defs_room(w, 1 + 40 + build_id_len + plen);
    if (!p)
        return;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_MODULE;
    p = trace_put_varint(p, start);
    p = trace_put_varint(p, end - start);
    p = trace_put_varint(p, bias);
    p = trace_w_put_bytes(p, build_id, build_id ? build_id_len : 0);
    p = trace_w_put_bytes(p, path, plen);
    w->defs.len += (size_t)(p - p0);
    m = (module_range *)w->modules.p;
    memmove(m + at + 1, m + at, (n - at) * sizeof *m);
    m[at].start = start;
    m[at].end = end;
    w->modules.len += sizeof *m;
}

/* Asks the host for the modules when a frame lies outside all we have.
 * Frames still outside after asking are remembered (a small cache), and
 * asking in vain backs off (1, 2, 4, ... up to 1024 stacks without asking)
 * so code outside every module (JIT) does not cost a module walk per stack. */
static void frames_modules(mt_trace_writer *w, const uint64_t *f, int n)
{
    int asked = 0;
    for (int i = 0; i < n; i++) {
        if (!f[i] || module_find(w, f[i]))
            continue;
        uint64_t *u = &w->unknown[trace_hash32((uint32_t)(f[i] ^ f[i] >> 32)) % UNKNOWN_CACHE];
        if (*u == f[i])
            continue;
        if (!asked && w->host.modules) {
            if (w->modules_skip) {
                w->modules_skip--;
                return;
            }
            size_t before = w->modules.len;
            w->host.modules(w->host.ctx, w);
            asked = 1;
            if (w->modules.len == before) {
                w->modules_backoff = w->modules_backoff ? w->modules_backoff * 2 : 1;
                if (w->modules_backoff > 1024)
                    w->modules_backoff = 1024;
                w->modules_skip = w->modules_backoff;
            } else
                w->modules_backoff = 0;
            if (module_find(w, f[i]))
                continue;
        }
        *u = f[i];
    }
}

int trace_w_define_category(mt_trace_writer *w, unsigned c)
{
    if (w->cat_defined[c >> 6] >> (c & 63) & 1)
        return 0;
    w->cat_defined[c >> 6] |= 1ull << (c & 63);
    const char *name = w->host.category_name ? w->host.category_name(w->host.ctx, c) : NULL;
    if (!name)
        return 0;
    size_t n = trace_w_strlen(name);
    unsigned char *p = defs_room(w, 16 + n);
    if (!p)
        return -ENOMEM;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_CATEGORY;
    p = trace_put_varint(p, c);
    p = trace_w_put_bytes(p, name, n);
    w->defs.len += (size_t)(p - p0);
    return 0;
}

int trace_w_define_stack(mt_trace_writer *w, uint32_t id)
{
    unsigned cat = 0;
    int n = w->host.stack ? w->host.stack(w->host.ctx, id, w->frames, TRACE_MAX_FRAMES, &cat) : -1;
    if (n < 0)
        n = 0;
    if (n > (int)TRACE_MAX_FRAMES)
        n = TRACE_MAX_FRAMES;
    cat &= 0xff;
    if (trace_map_put(&w->stacks, id + 1, 1) < 0)
        return -ENOMEM;
    frames_modules(w, w->frames, n);
    int rc = trace_w_define_category(w, cat);
    if (rc < 0)
        return rc;
    unsigned char *p = defs_room(w, 32 + (size_t)n * 10);
    if (!p)
        return -ENOMEM;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_STACK;
    p = trace_put_varint(p, id);
    p = trace_put_varint(p, cat);
    p = trace_put_varint(p, (uint64_t)n);
    uint64_t prev = 0;
    for (int i = 0; i < n; i++) {
        p = trace_put_varint(p, trace_zigzag((int64_t)(w->frames[i] - prev)));
        prev = w->frames[i];
    }
    w->defs.len += (size_t)(p - p0);
    return 0;
}

/* A thread new in the file: its index (defined in the pending DEFS). */
int64_t trace_w_thread_new(mt_trace_writer *w, uint32_t tid)
{
    uint32_t idx = w->nthreads;
    if (idx >= TRACE_W_MAX_THREADS || trace_map_put(&w->threads_map, tid + 1, idx + 1) < 0)
        return -ENOMEM;
    w->nthreads++;
    unsigned char *p = defs_room(w, 16);
    if (!p)
        return -ENOMEM;
    unsigned char *p0 = p;
    *p++ = TRACE_DEF_THREAD;
    p = trace_put_varint(p, idx);
    p = trace_put_varint(p, tid);
    w->defs.len += (size_t)(p - p0);
    return idx;
}

int mt_trace_write_meta(mt_trace_writer *w, const char *key, const char *value)
{
    size_t kn = trace_w_strlen(key), vn = trace_w_strlen(value);
    if (trace_wbuf_reserve(&w->meta, 24 + kn + vn) < 0)
        return -ENOMEM;
    unsigned char *p = w->meta.p + w->meta.len;
    *p++ = TRACE_DEF_META;
    p = trace_w_put_bytes(p, key, kn);
    p = trace_w_put_bytes(p, value, vn);
    w->meta.len = (size_t)(p - w->meta.p);
    w->nmeta++;
    return 0;
}
