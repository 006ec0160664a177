/* refset_events.c — the messages the agent sends `memtrail refset record`
 * (refset_events.h), and the two hooks only it needs: madvise (discards)
 * and malloc_trim.
 *
 * The socket is refset_fd as the recorder handed it (no dup to a safer
 * number: an exec'd image must find it under the number its options name).
 * A program that closes it makes the next send fail (EBADF, ENOTSOCK), and
 * page events stop; one that closes it and reuses the number for another
 * SOCK_SEQPACKET socket would get our datagrams there. That risk is
 * accepted: fdguard.c's hooks could keep it, but a kept descriptor would
 * have to move to a close-on-exec number on a dup2 (an exec'd image must
 * find it under its number), and a program that closes what it inherits
 * before exec must be able to close this one too.
 *
 * pid: cached, and noted again in a fork child. A vfork child, which
 * shares its parent's address space, sends with its parent's pid: what it
 * maps or unmaps is the parent's memory. tid: gettid per message (there
 * is no cache of it in the agent, and a vfork child must not fill one in
 * its parent's thread-local storage); next to the send it is noise. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/allocator.h"
#include "agent/counters.h"
#include "agent/meminfo.h"
#include "agent/refset_events.h"
#include "agent/site.h"
#include "agent/span.h"
#include "agent/vm.h"
#include "common/out.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

#define PAGE_UP(x) (((uintptr_t)(x) + 4095) & ~(uintptr_t)4095)

_Atomic int mt_rs_on;
int mt_rs_fd_opt = -1;

static int rs_fd = -1;
static int rs_glibc;  /* the allocator is glibc's: its mmapped chunks can be read */
static int rs_frames; /* frames per stack */

typedef int (*malloc_trim_fn)(size_t);
static malloc_trim_fn real_malloc_trim;

void mt_rs_resolve(void)
{
    /* the next definition's, as mt_real_fn's (allocator.c) */
    real_malloc_trim = (malloc_trim_fn)dlsym(RTLD_NEXT, "malloc_trim");
}

/* ---- sending ------------------------------------------------------------ */

/* One datagram; on any failure but an interruption, page events stop. A
 * descriptor the program made non-blocking is waited on: a slow recorder
 * holds the program, as with a blocking one. */
static void send_msg(const mt_rs_agent_msg *m)
{
    size_t n = MT_RS_AGENT_MSG_SIZE(m->nframes);
    for (;;) {
        ssize_t r = send(rs_fd, m, n, MSG_NOSIGNAL);
        if (r == (ssize_t)n)
            return;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = rs_fd, .events = POLLOUT};
            if (poll(&p, 1, -1) >= 0 || errno == EINTR)
                continue;
        }
        atomic_store_explicit(&mt_rs_on, 0, memory_order_relaxed);
        return;
    }
}

void mt_rs_send(mt_rs_agent_msg *m, unsigned kind, unsigned cat, uintptr_t addr, uint64_t len)
{
    mt_rs_send_at(m, kind, cat, addr, len, 0);
}

void mt_rs_send_at(mt_rs_agent_msg *m, unsigned kind, unsigned cat, uintptr_t addr, uint64_t len,
                   uint64_t time)
{
    /* Acquire: the fd and settings mt_rs_start published before it. */
    if (!atomic_load_explicit(&mt_rs_on, memory_order_acquire))
        return;
    int saved = errno;
    m->magic = MT_RS_AGENT_MAGIC;
    m->kind = (uint16_t)kind;
    m->category = (uint8_t)cat;
    /* Asked each time: a fork handler registered before the agent's may
     * map in the child before the agent learns its pid, and a child made
     * by clone() never tells it. */
    m->pid = (uint32_t)getpid();
    m->tid = (uint32_t)syscall(SYS_gettid);
    m->time_ns = time ? time : mt_clock_ns(CLOCK_MONOTONIC);
    m->addr = addr;
    m->len = len;
    send_msg(m);
    errno = saved;
}

void mt_rs_send_range(unsigned kind, uintptr_t addr, uint64_t len)
{
    mt_rs_agent_msg m;
    m.nframes = 0;
    mt_rs_send(&m, kind, 0, addr, len);
}

void mt_rs_capture(mt_rs_agent_msg *m)
{
    uintptr_t pcs[MT_DEPTH_MAX + 32];
    int saved = errno;
    int n = mt_site_stack(pcs, rs_frames);
    for (int i = 0; i < n; i++)
        m->frames[i] = pcs[i];
    m->nframes = (uint8_t)n;
    errno = saved;
}

/* ---- start-up ----------------------------------------------------------- */

static void say_off(int fd, const char *why)
{
    char buf[128];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, -1);
    mt_out_str(&o, "refset_fd=");
    mt_out_i64(&o, fd);
    mt_out_str(&o, why);
    mt_say(mt_out_cstr(&o));
}

/* The agent's own writable pages, each written once at start-up: every
 * page of its data is then referenced before the program's first
 * viewport, and none is first touched inside one. Without it, a variable
 * first used late (memory info's state, at the first event, which a
 * munmap inside a viewport may raise) can cost a page the program never
 * asked for, or not, as the linker happened to lay .bss out. Costs the
 * agent's .data and .bss in resident memory (about 1 MiB), in recorded
 * processes only. The RELRO part is read-only by now, and was written
 * by the relocations anyway: skipped. The write is an atomic add of 0, so
 * a thread of the program's storing to the same page meanwhile loses
 * nothing. */
static int touch_self(struct dl_phdr_info *info, size_t size, void *self)
{
    (void)size;
    uintptr_t at = (uintptr_t)self, relro_end = 0;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && at - lo < ph->p_memsz)
            mine = 1;
        if (ph->p_type == PT_GNU_RELRO)
            relro_end = (lo + ph->p_memsz) & ~(uintptr_t)4095; /* as ld.so protects it */
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
            continue;
        uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)4095;
        uintptr_t hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        if (lo < relro_end)
            lo = relro_end;
        for (uintptr_t a = lo; a < hi; a += 4096)
            __atomic_fetch_add((unsigned char *)a, 0, __ATOMIC_RELAXED);
    }
    return 1;
}

void mt_rs_start(void)
{
    int fd = mt_rs_fd_opt, type = 0;
    socklen_t tlen = sizeof type;
    struct stat st;
    if (fd < 0)
        return;
    int saved = errno;
    if (fstat(fd, &st) != 0 && errno == EBADF) {
        /* Closed: a program that closes what it inherits before exec
         * (Python's subprocess does by default). Nothing to say in its
         * output; the recorder counts the processes that never said HELLO. */
        errno = saved;
        return;
    }
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        say_off(fd, " is not a socket; page events off");
        errno = saved;
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_SEQPACKET) {
        say_off(fd, " is not a SOCK_SEQPACKET socket; page events off");
        errno = saved;
        return;
    }
    errno = saved;
    rs_fd = fd;
    rs_glibc = mt_alloc_kind == MT_ALLOC_GLIBC;
    rs_frames = mt_site_opt.depth < MT_RS_AGENT_MAX_FRAMES ? mt_site_opt.depth : MT_RS_AGENT_MAX_FRAMES;
    mt_site_walk_init(); /* done already in detail and trace modes */
    dl_iterate_phdr(touch_self, (void *)(uintptr_t)&mt_rs_start);
    mt_extra_on(MT_EXTRA_REFSET, &mt_rs_on, 1); /* stays set after an error turns it off: harmless */
    mt_rs_send_range(MT_RS_AG_HELLO, 0, 0);
}

/* ---- categories --------------------------------------------------------- */

unsigned mt_rs_map_category(unsigned vm_cat, unsigned vm_flags)
{
    if (vm_cat == MT_CAT_HEAP)
        return RS_CAT_HEAP;
    if (vm_flags & MT_VM_FILE)
        return RS_CAT_MAPFILE;
    return vm_flags & MT_VM_SHARED ? RS_CAT_PFMAPPEDSECTION : RS_CAT_VIRTUALALLOC;
}

/* ---- the allocator's mmapped blocks -------------------------------------- */

/* The mapping of a block the allocator mapped for itself (allocator.h). */
int mt_rs_block_of(const void *real, uintptr_t *start, uint64_t *len)
{
    return rs_glibc && mt_glibc_mapped_chunk(real, start, len);
}

void mt_rs_block_new(const void *real)
{
    uintptr_t start;
    uint64_t len;
    if (!mt_rs_block_of(real, &start, &len))
        return;
    mt_rs_agent_msg m;
    mt_rs_capture(&m);
    mt_rs_send(&m, MT_RS_AG_BLOCK, RS_CAT_HEAP, start, len);
}

/* Before the block goes: once it is unmapped another thread may map the
 * same addresses, and its MAP must come after this. */
void mt_rs_block_free(const void *real)
{
    uintptr_t start;
    uint64_t len;
    if (mt_rs_block_of(real, &start, &len))
        mt_rs_send_range(MT_RS_AG_BLOCK_FREE, start, len);
}

/* Resized in place (glibc mremaps its mapping: same start), only the
 * tail that came or went, as for the program's own mremap; moved, the old
 * mapping goes and the new one comes with the realloc's stack. */
void mt_rs_block_moved(uintptr_t ostart, uint64_t olen, const void *real, uint64_t before)
{
    uintptr_t start = 0;
    uint64_t len = 0;
    int mapped = mt_rs_block_of(real, &start, &len);
    mt_rs_agent_msg m;
    if (mapped && olen && start == ostart) {
        if (len > olen) {
            mt_rs_capture(&m);
            mt_rs_send(&m, MT_RS_AG_BLOCK, RS_CAT_HEAP, start + olen, len - olen);
        } else if (len < olen) {
            m.nframes = 0;
            mt_rs_send_at(&m, MT_RS_AG_BLOCK_FREE, 0, start + len, olen - len, before);
        }
        return;
    }
    /* Stamped before the realloc: the old addresses went back to the
     * kernel inside it, and another thread's MAP of them comes later. */
    if (olen) {
        m.nframes = 0;
        mt_rs_send_at(&m, MT_RS_AG_BLOCK_FREE, 0, ostart, olen, before);
    }
    if (mapped) {
        mt_rs_capture(&m);
        mt_rs_send(&m, MT_RS_AG_BLOCK, RS_CAT_HEAP, start, len);
    }
}

/* ---- madvise and malloc_trim -------------------------------------------- */

static int discards(int advice)
{
    /* Not MADV_FREE: its pages stay present until the kernel reclaims them
     * (a write cancels it), so the scans see them go when they do. */
    return advice == MADV_DONTNEED || advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED;
}

/* The system call itself (glibc's madvise is nothing more), then the
 * pages it let go. */
MT_EXPORT int madvise(void *addr, size_t len, int advice)
{
    uint64_t t0 = mt_ticks();
    int rc = (int)syscall(SYS_madvise, addr, len, advice);
    if (!mt_t.in_agent)
        mt_map_timed_end(t0);
    if (rc == 0 && mt_rs_active() && !mt_t.in_agent && discards(advice))
        mt_rs_send_range(MT_RS_AG_DISCARD, (uintptr_t)addr, PAGE_UP(len));
    if (rc == 0 && !mt_t.in_agent && (discards(advice) || advice == MADV_FREE)) /* memory info */
        mt_info_event(MT_EVENT_TRIM, 0); /* not sampled: as the mapping hooks (vm_hooks.c) */
    return rc;
}

/* glibc's trim releases pages inside its arenas with its own madvise,
 * unseen: the recorder rescans the process. */
MT_EXPORT int malloc_trim(size_t pad)
{
    mt_start();
    uint64_t t0 = mt_ticks();
    int rc = mt_info_malloc_trim(real_malloc_trim, pad); /* the call, and a TRIM event */
    if (!mt_t.in_agent)
        mt_map_timed_end(t0);
    if (mt_rs_active() && !mt_t.in_agent)
        mt_rs_send_range(MT_RS_AG_TRIM, 0, 0);
    return rc;
}
