/* record_perf.c — the page-fault events of the recorded processes: one
 * software page-fault event per CPU (sample period 1, inherited by every
 * child), each CPU's ring mmapped (an inherited event cannot be mmapped
 * with cpu=-1), further threads' events on that CPU sending their output
 * to the same ring. The rings are read into input items; times are
 * CLOCK_MONOTONIC (use_clockid), so the agent's messages sort with them. */
#include "refset/record.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef PERF_REG_X86_SP
#define PERF_REG_X86_SP 7
#endif

struct rec_ring {
    int fd; /* the event whose ring this is */
    struct perf_event_mmap_page *meta;
    unsigned char *data;
    size_t size; /* data bytes (a power of two) */
};

struct rec_perf {
    struct rec_ring *rings;
    int ncpus;
    int *fds; /* every event (closed at the end) */
    size_t nfds;
    bool stacks;
    bool user_only;         /* kernel-mode faults excluded (perf_event_paranoid allowed no more) */
    uint64_t throttles;     /* PERF_RECORD_THROTTLE: the kernel paused sampling for a tick */
    unsigned char *scratch; /* one record that wraps around a ring's end */
};

uint64_t rec_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void attr_init(struct perf_event_attr *a, bool stacks, bool enable_on_exec)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_PAGE_FAULTS;
    a->sample_period = 1;
    a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_REGS_USER;
    a->sample_regs_user = 1ull << PERF_REG_X86_SP;
    if (stacks) {
        a->sample_type |= PERF_SAMPLE_CALLCHAIN;
        a->exclude_callchain_kernel = 1;
    }
    /* Faults taken in the kernel (copy_to_user into a fresh buffer) are
     * first touches too: kernel faults are not excluded. */
    a->exclude_hv = 1;
    a->inherit = 1;
    a->task = 1;
    a->comm = 1;
    a->comm_exec = 1;
    a->mmap = 1;
    a->mmap2 = 1;
    a->mmap_data = 1;
    a->sample_id_all = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->watermark = 1;
    a->disabled = enable_on_exec;
    a->enable_on_exec = enable_on_exec;
}

static int perf_open(rec_perf **out, const pid_t *tids, size_t ntids, bool stacks, bool enable_on_exec,
                     size_t ring_bytes, bool user_only)
{
    long ncpus = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpus < 1)
        ncpus = 1;
    rec_perf *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->ncpus = (int)ncpus;
    p->stacks = stacks;
    p->user_only = user_only;
    p->rings = calloc((size_t)ncpus, sizeof *p->rings);
    p->fds = calloc((size_t)ncpus * ntids, sizeof *p->fds);
    p->scratch = malloc(65536);
    if (!p->rings || !p->fds || !p->scratch) {
        rec_perf_close(p);
        return -ENOMEM;
    }
    long page = sysconf(_SC_PAGESIZE);
    size_t data = (size_t)page;
    while (data < ring_bytes)
        data <<= 1;
    struct perf_event_attr a;
    attr_init(&a, stacks, enable_on_exec);
    a.exclude_kernel = user_only;
    a.wakeup_watermark = (uint32_t)(data / 4);
    int rc = 0;
    for (int c = 0; c < ncpus && rc == 0; c++) {
        p->rings[c].fd = -1;
        for (size_t t = 0; t < ntids; t++) {
            int fd = (int)syscall(SYS_perf_event_open, &a, tids[t], c, -1, PERF_FLAG_FD_CLOEXEC);
            if (fd < 0) {
                /* A CPU that is offline has no events to give. */
                if (errno == ENODEV || (errno == EINVAL && c > 0))
                    continue;
                rc = -errno;
                break;
            }
            p->fds[p->nfds++] = fd;
            if (p->rings[c].fd < 0) {
                void *m = mmap(NULL, data + (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (m == MAP_FAILED) {
                    /* Over the locked-memory limit (perf_event_mlock_kb)
                     * without CAP_IPC_LOCK: the caller tries a smaller ring. */
                    rc = errno == EPERM ? -ENOBUFS : -errno;
                    break;
                }
                p->rings[c].fd = fd;
                p->rings[c].meta = m;
                p->rings[c].data = (unsigned char *)m + page;
                p->rings[c].size = data;
            } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, p->rings[c].fd) < 0) {
                rc = -errno;
                break;
            }
        }
    }
    if (rc < 0) {
        rec_perf_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

int rec_perf_open(rec_perf **out, const pid_t *tids, size_t ntids, bool stacks, bool enable_on_exec,
                  size_t ring_bytes)
{
    int rc;
    bool user_only = false;
    for (;;) {
        rc = perf_open(out, tids, ntids, stacks, enable_on_exec, ring_bytes, user_only);
        if (rc == -ENOBUFS && ring_bytes > (64u << 10))
            ring_bytes /= 2;
        else if ((rc == -EACCES || rc == -EPERM) && !user_only)
            user_only = true; /* perf_event_paranoid 2: a user's own processes, user mode only */
        else
            break;
    }
    return rc == -ENOBUFS ? -EPERM : rc;
}

bool rec_perf_user_only(const rec_perf *p)
{
    return p->user_only;
}

size_t rec_perf_fds(const rec_perf *p, int *fds, size_t max)
{
    size_t n = 0;
    for (int c = 0; c < p->ncpus && n < max; c++)
        if (p->rings[c].fd >= 0)
            fds[n++] = p->rings[c].fd;
    return n;
}

void rec_perf_close(rec_perf *p)
{
    if (!p)
        return;
    long page = sysconf(_SC_PAGESIZE);
    for (int c = 0; p->rings && c < p->ncpus; c++)
        if (p->rings[c].meta)
            munmap(p->rings[c].meta, p->rings[c].size + (size_t)page);
    for (size_t i = 0; i < p->nfds; i++)
        close(p->fds[i]);
    free(p->rings);
    free(p->fds);
    free(p->scratch);
    free(p);
}

/* The sample_id trailer of a non-sample record: pid, tid, time. */
static uint64_t trailer_time(const unsigned char *rec, size_t size)
{
    uint64_t t = 0;
    if (size >= sizeof(struct perf_event_header) + 16)
        memcpy(&t, rec + size - 8, 8);
    return t;
}

static void parse_sample(rec_perf *p, const unsigned char *r, size_t size, rec_batch *b)
{
    const unsigned char *q = r + sizeof(struct perf_event_header), *end = r + size;
    if (q + 24 > end)
        return;
    rec_item *it = rec_batch_add(b);
    if (!it)
        return;
    it->kind = REC_IT_SAMPLE;
    memcpy(&it->pid, q, 4);
    memcpy(&it->tid, q + 4, 4);
    memcpy(&it->time, q + 8, 8);
    memcpy(&it->addr, q + 16, 8);
    q += 24;
    if (p->stacks && q + 8 <= end) {
        uint64_t nr;
        memcpy(&nr, q, 8);
        q += 8;
        if (nr > (uint64_t)(end - q) / 8)
            nr = (uint64_t)(end - q) / 8;
        /* The chain's context markers (PERF_CONTEXT_USER ...) are not
         * frames, nor is the 0 where a frame-pointer walk ran out. */
        uint64_t frames[128];
        uint32_t n = 0;
        for (uint64_t i = 0; i < nr; i++) {
            uint64_t ip;
            memcpy(&ip, q + i * 8, 8);
            if (ip >= (uint64_t)PERF_CONTEXT_MAX || ip == 0 || n == 128)
                continue;
            frames[n++] = ip;
        }
        q += nr * 8;
        /* Interned later, in time order (record_proc.c): keep the frames. */
        if (n > 0 && (it->frames = malloc(n * sizeof *it->frames)) != NULL) {
            memcpy(it->frames, frames, n * sizeof *frames);
            it->nframes = n;
        }
    }
    if (q + 8 <= end) {
        uint64_t abi;
        memcpy(&abi, q, 8);
        q += 8;
        if (abi != PERF_SAMPLE_REGS_ABI_NONE && q + 8 <= end)
            memcpy(&it->sp, q, 8);
    }
}

static void parse_record(rec_perf *p, const unsigned char *r, size_t size, rec_batch *b)
{
    struct perf_event_header h;
    memcpy(&h, r, sizeof h);
    const unsigned char *q = r + sizeof h;
    if (h.type == PERF_RECORD_SAMPLE) {
        parse_sample(p, r, size, b);
        return;
    }
    rec_item *it;
    switch (h.type) {
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT: {
        uint32_t v[4];
        if (size < sizeof h + 24 || !(it = rec_batch_add(b)))
            return;
        memcpy(v, q, 16);
        it->kind = h.type == PERF_RECORD_FORK ? REC_IT_FORK : REC_IT_EXIT;
        it->pid = v[0];
        it->ppid = v[1];
        it->tid = v[2];
        memcpy(&it->time, q + 16, 8);
        /* A thread's fork or exit is not a process's. */
        if (it->pid != it->tid)
            b->n--;
        return;
    }
    case PERF_RECORD_COMM:
        if (!(h.misc & PERF_RECORD_MISC_COMM_EXEC) || size < sizeof h + 8 + 16 || !(it = rec_batch_add(b)))
            return;
        it->kind = REC_IT_EXEC;
        memcpy(&it->pid, q, 4);
        memcpy(&it->tid, q + 4, 4);
        it->name = strndup((const char *)q + 8, size - sizeof h - 8 - 16);
        it->time = trailer_time(r, size);
        return;
    case PERF_RECORD_MMAP2: {
        if (size < sizeof h + 64 + 16 || !(it = rec_batch_add(b)))
            return;
        it->kind = REC_IT_MMAP;
        uint32_t maj, min;
        memcpy(&it->pid, q, 4);
        memcpy(&it->tid, q + 4, 4);
        memcpy(&it->addr, q + 8, 8);
        memcpy(&it->len, q + 16, 8);
        memcpy(&it->pgoff, q + 24, 8);
        memcpy(&maj, q + 32, 4);
        memcpy(&min, q + 36, 4);
        memcpy(&it->ino, q + 40, 8);
        memcpy(&it->prot, q + 56, 4);
        memcpy(&it->flags, q + 60, 4);
        it->dev = maj << 20 | min;
        it->name = strndup((const char *)q + 64, size - sizeof h - 64 - 16);
        it->time = trailer_time(r, size);
        return;
    }
    case PERF_RECORD_THROTTLE: p->throttles++; return;
    case PERF_RECORD_LOST:
        if (size < sizeof h + 16 + 16 || !(it = rec_batch_add(b)))
            return;
        it->kind = REC_IT_LOST;
        memcpy(&it->count, q + 8, 8);
        it->time = trailer_time(r, size);
        return;
    default: return;
    }
}

static void drain_ring(rec_perf *p, struct rec_ring *g, rec_batch *b)
{
    uint64_t head = __atomic_load_n(&g->meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = g->meta->data_tail;
    size_t mask = g->size - 1;
    while (tail < head) {
        struct perf_event_header h;
        size_t off = (size_t)(tail & mask);
        const unsigned char *rec;
        if (off + sizeof h <= g->size) {
            memcpy(&h, g->data + off, sizeof h);
        } else {
            size_t first = g->size - off;
            memcpy(&h, g->data + off, first);
            memcpy((unsigned char *)&h + first, g->data, sizeof h - first);
        }
        if (h.size < sizeof h || h.size > head - tail)
            break;
        if (off + h.size <= g->size) {
            rec = g->data + off;
        } else {
            size_t first = g->size - off;
            memcpy(p->scratch, g->data + off, first);
            memcpy(p->scratch + first, g->data, h.size - first);
            rec = p->scratch;
        }
        parse_record(p, rec, h.size, b);
        tail += h.size;
    }
    __atomic_store_n(&g->meta->data_tail, tail, __ATOMIC_RELEASE);
}

uint64_t rec_perf_throttles(const rec_perf *p)
{
    return p ? p->throttles : 0;
}

void rec_perf_drain(rec_perf *p, rec_batch *b)
{
    for (int c = 0; c < p->ncpus; c++)
        if (p->rings[c].meta)
            drain_ring(p, &p->rings[c], b);
}
