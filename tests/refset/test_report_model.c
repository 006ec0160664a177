/* test_report_model.c — the reference-set report's arithmetic
 * (src/refset/report_model.h) on synthetic records: the seed's example to
 * the byte, sharing, releases by exit/exec/RELEASE, boundaries, and a
 * brute-force comparison: random recordings whose every figure is
 * recomputed per page straight from the definitions (docs/refset-report.md). */
#include "refset/refset_file.h"
#include "refset/report_model.h"
#include "unit.h"

#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define PS 4096u
#define MB (1024u * 1024u)
#define S(x) ((uint64_t)((x)*1000000000.0))

static struct rs_model M;

static void start(uint32_t flags)
{
    rs_model_free(&M);
    rs_model_init(&M, PS, flags, 0);
}

static void proc(uint32_t pid, uint64_t t, unsigned reason, const char *name)
{
    mt_rs_event e = {.type = RS_EV_PROCESS,
                     .pid = pid,
                     .time_ns = t,
                     .reason = reason,
                     .name = name,
                     .name_len = (uint32_t)strlen(name)};
    rs_model_add(&M, &e);
}

static void ref(uint32_t pid, uint64_t t, uint64_t addr, uint64_t n, unsigned cat, unsigned flags)
{
    mt_rs_event e = {.type = RS_EV_REF,
                     .pid = pid,
                     .time_ns = t,
                     .addr = addr,
                     .npages = n,
                     .category = (uint8_t)cat,
                     .flags = (uint8_t)(flags | RS_REF_FAULT)};
    rs_model_add(&M, &e);
}

static void ref_id(uint32_t pid, uint64_t t, uint64_t addr, uint64_t n, unsigned cat, unsigned flags,
                   uint64_t pfn, uint32_t dev, uint64_t ino, uint64_t pgoff)
{
    mt_rs_event e = {.type = RS_EV_REF,
                     .pid = pid,
                     .time_ns = t,
                     .addr = addr,
                     .npages = n,
                     .category = (uint8_t)cat,
                     .flags = (uint8_t)flags,
                     .pfn = pfn,
                     .dev = dev,
                     .ino = ino,
                     .pgoff = pgoff};
    rs_model_add(&M, &e);
}

static void rel(uint32_t pid, uint64_t t, uint64_t addr, uint64_t n)
{
    mt_rs_event e = {.type = RS_EV_RELEASE, .pid = pid, .time_ns = t, .addr = addr, .npages = n};
    rs_model_add(&M, &e);
}

static void ex(uint32_t pid, uint64_t t)
{
    mt_rs_event e = {.type = RS_EV_EXIT, .pid = pid, .time_ns = t};
    rs_model_add(&M, &e);
}

static struct rs_view V;

static void view(uint64_t t0, uint64_t t1)
{
    rs_view_free(&V);
    if (!M.finished)
        rs_model_finish(&M);
    rs_view_compute(&M, (int64_t)t0, (int64_t)t1, &V);
}

static void seed_example(void)
{
    start(0);
    proc(100, 0, RS_PROC_START, "seed");
    uint64_t n = 10 * MB / PS;
    ref(100, S(0.5), 0x10000000, n, RS_CAT_HEAP, 0);         /* persistent */
    ref(100, S(1.5), 0x20000000, n, RS_CAT_VIRTUALALLOC, 0); /* impacting: kept */
    ref(100, S(1.6), 0x30000000, n, RS_CAT_VIRTUALALLOC, 0); /* transient */
    rel(100, S(1.8), 0x30000000, n);
    rel(100, S(3.0), 0x10000000, n);
    view(S(1), S(2));
    CHECK("seed: graph at T0 is 10 MB", V.total.graph_start == 10 * MB);
    CHECK("seed: graph at T1 is 20 MB", V.total.graph_end == 20 * MB);
    CHECK("seed: Size is 30 MB", V.total.size == 30 * MB);
    CHECK("seed: Impact Size is 10 MB", V.total.impact == 10 * MB);
    CHECK("seed: impacting 10 MB", V.total.types[RS_IMPACTING] == 10 * MB);
    CHECK("seed: transient 10 MB", V.total.types[RS_TRANSIENT] == 10 * MB);
    CHECK("seed: persistent 10 MB", V.total.types[RS_PERSISTENT] == 10 * MB);
    CHECK("seed: the process row is the total", V.procs[0].size == 30 * MB && V.procs[0].impact == 10 * MB);
    CHECK("seed: Heap persistent",
          V.cats[RS_CAT_HEAP].types[RS_PERSISTENT] == 10 * MB && V.cats[RS_CAT_HEAP].impact == 0);
    CHECK("seed: VirtualAlloc 20 MB, impact 10 MB",
          V.cats[RS_CAT_VIRTUALALLOC].size == 20 * MB && V.cats[RS_CAT_VIRTUALALLOC].impact == 10 * MB);
    CHECK("seed: class Dynamic holds it all", V.classes[RS_CLASS_DYNAMIC].size == 30 * MB);
    CHECK("seed: peak 30 MB at 1.6 s", M.peak_bytes == 30 * MB && M.peak_ns == (int64_t)S(1.6));
    CHECK("seed: steady state 10 MB", M.steady_bytes == 10 * MB);
    /* a viewport in the middle of the transient stretch */
    view(S(1.55), S(1.7));
    CHECK("middle: graph 20 -> 30 MB", V.total.graph_start == 20 * MB && V.total.graph_end == 30 * MB);
    CHECK("middle: Size 30 MB, Impact 10 MB", V.total.size == 30 * MB && V.total.impact == 10 * MB);
    CHECK("middle: persistent 20, impacting 10",
          V.total.types[RS_PERSISTENT] == 20 * MB && V.total.types[RS_IMPACTING] == 10 * MB);
}

static void sharing(void)
{
    /* the same pfns in two processes: Size twice, Impact Size once, for the first */
    start(RS_FILE_PFN);
    proc(1, 0, RS_PROC_START, "a");
    proc(2, 0, RS_PROC_FORK, "b");
    ref_id(1, S(1), 0x1000, 10, RS_CAT_PFMAPPEDSECTION, RS_REF_FILE_PAGE, 5000, 0, 0, 0);
    ref_id(2, S(2), 0x9000, 10, RS_CAT_PFMAPPEDSECTION, RS_REF_FILE_PAGE, 5000, 0, 0, 0);
    view(0, S(3));
    CHECK("share pfn: Size in each", V.procs[0].size == 10 * PS && V.procs[1].size == 10 * PS);
    CHECK("share pfn: Impact in the first", V.procs[0].impact == 10 * PS && V.procs[1].impact == 0);
    CHECK("share pfn: total Impact once", V.total.impact == 10 * PS && V.total.size == 20 * PS);
    /* without pfns: file pages by (dev, ino, offset) */
    start(0);
    proc(1, 0, RS_PROC_START, "a");
    proc(2, 0, RS_PROC_FORK, "b");
    ref_id(2, S(1), 0x1000, 4, RS_CAT_MAPFILE, RS_REF_FILE_PAGE, 0, 8, 77, 2 * PS);
    ref_id(1, S(2), 0x7000, 4, RS_CAT_MAPFILE, RS_REF_FILE_PAGE, 0, 8, 77, 2 * PS);
    ref_id(1, S(2), 0xb000, 2, RS_CAT_MAPFILE, RS_REF_FILE_PAGE, 0, 8, 78, 2 * PS); /* another file */
    view(0, S(3));
    CHECK("share file: Size in each", V.procs[0].size == 6 * PS && V.procs[1].size == 4 * PS);
    CHECK("share file: Impact in the first", V.procs[1].impact == 4 * PS && V.procs[0].impact == 2 * PS);
    /* pfns unknown with RS_FILE_PFN: per process */
    start(RS_FILE_PFN);
    ref_id(1, S(1), 0x1000, 3, RS_CAT_VIRTUALALLOC, 0, 0, 0, 0, 0);
    ref_id(2, S(1), 0x1000, 3, RS_CAT_VIRTUALALLOC, 0, 0, 0, 0, 0);
    view(0, S(2));
    CHECK("anonymous without pfn: each process its own", V.total.impact == 6 * PS);
}

static void exits(void)
{
    start(0);
    proc(1, 0, RS_PROC_START, "a");
    ref(1, S(1), 0x1000, 5, RS_CAT_HEAP, 0);
    ref_id(1, S(1), 0x10000, 3, RS_CAT_MAPFILE, RS_REF_FILE_PAGE, 0, 1, 9, 0);
    ref_id(1, S(1), 0x20000, 2, RS_CAT_IMAGE, RS_REF_FILE_PAGE, 0, 1, 10, 0);
    ref(1, S(1), 0x30000, 1, RS_CAT_COPYONWRITEIMAGE, 0);
    ex(1, S(2));
    view(0, S(3));
    CHECK("exit: anonymous and CoW pages leave", V.total.graph_end == 5 * PS && M.steady_bytes == 5 * PS);
    CHECK("exit: file pages stay outstanding",
          V.cats[RS_CAT_MAPFILE].graph_end == 3 * PS && V.cats[RS_CAT_IMAGE].graph_end == 2 * PS);
    CHECK("exit: heap transient", V.cats[RS_CAT_HEAP].types[RS_TRANSIENT] == 5 * PS);
    CHECK("exit: classes",
          V.classes[RS_CLASS_FILE].graph_end == 5 * PS && V.classes[RS_CLASS_DYNAMIC].graph_end == 0);
    /* exec: the old program's anonymous pages leave, a new row */
    start(0);
    proc(1, 0, RS_PROC_START, "sh");
    ref(1, S(1), 0x1000, 4, RS_CAT_HEAP, 0);
    proc(1, S(2), RS_PROC_EXEC, "prog");
    ref(1, S(2.5), 0x1000, 2, RS_CAT_HEAP, 0);
    view(0, S(3));
    CHECK("exec: a process row each", M.nprocs == 2 && strcmp(M.procs[1].program, "prog") == 0);
    CHECK("exec: the first program's pages left", V.procs[0].graph_end == 0 && V.procs[0].size == 4 * PS);
    CHECK("exec: the same address is a new reference", V.procs[1].size == 2 * PS && M.duplicate_pages == 0);
}

static void boundaries(void)
{
    start(0);
    proc(1, 0, RS_PROC_START, "a");
    ref(1, S(1), 0x1000, 1, RS_CAT_HEAP, 0); /* at T0: outside */
    ref(1, S(2), 0x2000, 1, RS_CAT_HEAP, 0); /* at T1: inside */
    ref(1, S(1), 0x3000, 1, RS_CAT_HEAP, 0); /* released at T0: not alive */
    rel(1, S(1), 0x3000, 1);
    ref(1, S(1.5), 0x4000, 1, RS_CAT_HEAP, 0); /* released at T1: inside */
    rel(1, S(2), 0x4000, 1);
    ref(1, S(1.5), 0x1000, 1, RS_CAT_HEAP, 0); /* duplicate: ignored */
    ex(1, S(3));
    view(S(1), S(2));
    CHECK("ties: a reference at T0 is persistent", V.total.types[RS_PERSISTENT] == PS);
    CHECK("ties: a reference at T1 impacts", V.total.types[RS_IMPACTING] == PS);
    CHECK("ties: a release at T1 is inside (transient)", V.total.types[RS_TRANSIENT] == PS);
    CHECK("ties: released at T0 is not in the viewport", V.total.size == 3 * PS);
    CHECK("ties: graph 1 -> 2 pages", V.total.graph_start == PS && V.total.graph_end == 2 * PS);
    CHECK("duplicate counted, not referenced again", M.duplicate_pages == 1);
    /* pages present before the recording */
    start(RS_FILE_ATTACH);
    ref(1, 0, 0x1000, 2, RS_CAT_HEAP, RS_REF_BEFORE);
    ref(1, 0, 0x5000, 3, RS_CAT_HEAP, RS_REF_BEFORE);
    rel(1, S(1), 0x5000, 3);
    ref(1, S(2), 0x9000, 1, RS_CAT_HEAP, 0);
    view(0, S(2));
    CHECK("before: persistent", V.total.types[RS_PERSISTENT] == 2 * PS);
    CHECK("before: released inside: impacting", V.total.types[RS_IMPACTING] == 4 * PS);
    CHECK("before: graph at 0 holds them",
          V.total.graph_start == 5 * PS && V.total.impact == -2 * (int64_t)PS);
    /* zero page: Size, not Impact Size */
    start(RS_FILE_PFN);
    ref_id(1, S(1), 0x1000, 4, RS_CAT_VIRTUALALLOC, RS_REF_ZERO_PAGE, 7, 0, 0, 0);
    ref_id(2, S(1), 0x1000, 4, RS_CAT_VIRTUALALLOC, RS_REF_ZERO_PAGE, 7, 0, 0, 0);
    view(0, S(2));
    CHECK("zero page: in Size and its own figure", V.total.size == 8 * PS && V.total.zero_page == 8 * PS);
    CHECK("zero page: not in the graph", V.total.graph_end == 0 && M.peak_bytes == 0);
    /* a big release over a reservation of few touched pages */
    start(0);
    ref(1, S(1), 0x100000000, 2, RS_CAT_VIRTUALALLOC, 0);
    rel(1, S(2), 0x100000000 - 0x10000000, 1u << 24);
    view(0, S(3));
    CHECK("large release range", V.total.graph_end == 0 && V.total.types[RS_TRANSIENT] == 2 * PS);
}

/* --- brute force ------------------------------------------------------------ */

/* A page reference as the definitions give it, found by direct search. */
struct bref {
    uint32_t pid, proc;
    uint64_t addr, ident;
    int64_t t_ref, t_rel;
    unsigned cat, flags;
    bool out; /* outstanding in its pid */
};
static struct bref B[20000];
static int NB;
static uint32_t bproc_pid[200];
static bool bproc_alive[200];
static int NP;

static int bproc_of(uint32_t pid)
{
    for (int i = NP - 1; i >= 0; i--)
        if (bproc_pid[i] == pid && bproc_alive[i])
            return i;
    bproc_pid[NP] = pid;
    bproc_alive[NP] = true;
    return NP++;
}

static void bend(uint32_t pid, int64_t t)
{
    for (int i = 0; i < NB; i++)
        if (B[i].pid == pid && B[i].out) {
            B[i].out = false;
            if (mt_rs_released_on_unmap(B[i].cat, B[i].flags))
                B[i].t_rel = t;
        }
    for (int i = 0; i < NP; i++)
        if (bproc_pid[i] == pid)
            bproc_alive[i] = false;
}

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(uint64_t n)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state % n;
}

/* outstanding at T: some reference of ident with t_ref <= T < t_rel; the
 * reference its union interval started with, or -1 */
static int owner_at(uint64_t ident, int64_t T)
{
    int64_t lo = INT64_MAX;
    for (int i = 0; i < NB; i++)
        if (B[i].ident == ident && B[i].t_ref <= T && B[i].t_rel > T && B[i].t_ref < lo)
            lo = B[i].t_ref;
    if (lo == INT64_MAX)
        return -1;
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < NB; i++)
            if (B[i].ident == ident && B[i].t_ref < lo && B[i].t_rel >= lo) {
                lo = B[i].t_ref;
                moved = true;
            }
    }
    for (int i = 0; i < NB; i++)
        if (B[i].ident == ident && B[i].t_ref == lo)
            return i;
    return -1;
}

static int brute_round(int round)
{
    start(RS_FILE_PFN);
    NB = NP = 0;
    int npids = 1 + (int)rnd(4), events = 20 + (int)rnd(300);
    int64_t t = 0;
    for (int p = 0; p < npids; p++) {
        proc((uint32_t)(10 + p), 0, RS_PROC_START, "p");
        bproc_of((uint32_t)(10 + p));
    }
    /* the pids' "before" pages */
    for (int p = 0; p < npids; p++) {
        if (rnd(2))
            continue;
        uint64_t a = rnd(16), n = 1 + rnd(3);
        ref_id((uint32_t)(10 + p), 0, 0x100000 + a * PS, n, RS_CAT_HEAP, RS_REF_BEFORE,
               1000 + a + 100 * (uint64_t)p, 0, 0, 0);
        for (uint64_t i = 0; i < n; i++)
            B[NB++] = (struct bref){.pid = (uint32_t)(10 + p),
                                    .proc = (uint32_t)bproc_of((uint32_t)(10 + p)),
                                    .addr = 0x100000 + (a + i) * PS,
                                    .ident = 1000 + a + i + 100 * (uint64_t)p,
                                    .t_ref = RS_T_BEFORE,
                                    .t_rel = RS_T_NEVER,
                                    .cat = RS_CAT_HEAP,
                                    .flags = RS_REF_BEFORE,
                                    .out = true};
    }
    for (int e = 0; e < events && NB < 19000; e++) {
        t += (int64_t)rnd(3) * 1000; /* ties often */
        uint32_t pid = (uint32_t)(10 + rnd((uint64_t)npids));
        uint64_t k = rnd(100);
        uint64_t a = rnd(24), n = 1 + rnd(4);
        if (k < 55) {
            /* pages 0..23 of a shared "pfn space": pid-independent pfns make sharing */
            unsigned cat = (unsigned)rnd(RS_NCATEGORIES);
            unsigned flags = rnd(3) == 0 ? RS_REF_FILE_PAGE : 0;
            bool zero = rnd(20) == 0;
            if (zero)
                flags |= RS_REF_ZERO_PAGE;
            uint64_t pfn = rnd(4) ? 500 + a : 0; /* pfn 0: per process */
            ref_id(pid, (uint64_t)t, 0x100000 + a * PS, n, cat, flags, pfn, 0, 0, 0);
            int pi = bproc_of(pid);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t addr = 0x100000 + (a + i) * PS;
                bool dup = false;
                for (int j = 0; j < NB; j++)
                    if (B[j].pid == pid && B[j].addr == addr && B[j].out)
                        dup = true;
                if (dup)
                    continue;
                uint64_t ident = zero ? 0 : pfn ? 500 + a + i : ((uint64_t)pid << 40) | addr;
                B[NB++] = (struct bref){.pid = pid,
                                        .proc = (uint32_t)pi,
                                        .addr = addr,
                                        .ident = ident,
                                        .t_ref = t,
                                        .t_rel = RS_T_NEVER,
                                        .cat = cat,
                                        .flags = flags | RS_REF_FAULT,
                                        .out = true};
            }
        } else if (k < 85) {
            rel(pid, (uint64_t)t, 0x100000 + a * PS, n);
            for (int j = 0; j < NB; j++)
                if (B[j].pid == pid && B[j].out && B[j].addr >= 0x100000 + a * PS &&
                    B[j].addr < 0x100000 + (a + n) * PS) {
                    B[j].out = false;
                    if (mt_rs_released_on_unmap(B[j].cat, B[j].flags)) /* page cache stays */
                        B[j].t_rel = t;
                }
        } else if (k < 93) {
            ex(pid, (uint64_t)t);
            bend(pid, t);
            proc(pid, (uint64_t)t, RS_PROC_FORK, "again"); /* the pid comes back: a new process */
            bproc_of(pid);
        } else {
            proc(pid, (uint64_t)t, RS_PROC_EXEC, "exec");
            bend(pid, t);
            bproc_of(pid);
        }
    }
    rs_model_finish(&M);
    if ((int)M.nprocs != NP || (int)M.nrefs != NB) {
        printf("round %d: %zu processes, %zu references; brute force %d, %d\n", round, M.nprocs, M.nrefs, NP,
               NB);
        return 1;
    }
    int bad = 0;
    for (int v = 0; v < 6 && !bad; v++) {
        int64_t t0 = (int64_t)rnd((uint64_t)t + 1000) / 1000 * 1000,
                t1 = (int64_t)rnd((uint64_t)t + 2000) / 1000 * 1000;
        if (v == 0) {
            t0 = 0;
            t1 = t;
        }
        if (t1 <= t0)
            t1 = t0 + 1000;
        view((uint64_t)t0, (uint64_t)t1);
        struct rs_figs want[200] = {{0}}, wcat[RS_NCATEGORIES] = {{0}}, wt = {0};
        for (int i = 0; i < NB; i++) {
            int ty = rs_impact_type(B[i].t_ref, B[i].t_rel, t0, t1);
            bool alive = B[i].t_ref <= t1 && B[i].t_rel > t0;
            if (!alive)
                continue;
            bool ref_in = B[i].t_ref > t0, rel_in = B[i].t_rel <= t1;
            int expect = ref_in && rel_in ? RS_TRANSIENT : !ref_in && !rel_in ? RS_PERSISTENT : RS_IMPACTING;
            if (ty != expect)
                bad = 1;
            want[B[i].proc].size += PS;
            want[B[i].proc].types[expect] += PS;
            wcat[B[i].cat].size += PS;
            wt.size += PS;
            wt.types[expect] += PS;
        }
        /* the graph at T0 and T1: each identity once, for its owner */
        for (int i = 0; i < NB; i++) {
            if (B[i].ident == 0)
                continue;
            bool firstof = true;
            for (int j = 0; j < i; j++)
                if (B[j].ident == B[i].ident)
                    firstof = false;
            if (!firstof)
                continue;
            int o0 = owner_at(B[i].ident, t0), o1 = owner_at(B[i].ident, t1);
            if (o0 >= 0) {
                want[B[o0].proc].graph_start += PS;
                wcat[B[o0].cat].graph_start += PS;
                wt.graph_start += PS;
            }
            if (o1 >= 0) {
                want[B[o1].proc].graph_end += PS;
                wcat[B[o1].cat].graph_end += PS;
                wt.graph_end += PS;
            }
        }
        for (int p = 0; p < NP; p++) {
            const struct rs_figs *g = &V.procs[p];
            if (g->size != want[p].size || g->graph_start != want[p].graph_start ||
                g->graph_end != want[p].graph_end || memcmp(g->types, want[p].types, sizeof g->types) != 0 ||
                g->impact != (int64_t)want[p].graph_end - (int64_t)want[p].graph_start) {
                printf("round %d view (%" PRId64 ", %" PRId64 "] process %d: size %" PRIu64 "/%" PRIu64
                       " start %" PRIu64 "/%" PRIu64 " end %" PRIu64 "/%" PRIu64 "\n",
                       round, t0, t1, p, g->size, want[p].size, g->graph_start, want[p].graph_start,
                       g->graph_end, want[p].graph_end);
                bad = 1;
            }
        }
        for (int c = 0; c < RS_NCATEGORIES; c++)
            if (V.cats[c].size != wcat[c].size || V.cats[c].graph_start != wcat[c].graph_start ||
                V.cats[c].graph_end != wcat[c].graph_end)
                bad = 1;
        if (V.total.size != wt.size || V.total.graph_start != wt.graph_start ||
            V.total.graph_end != wt.graph_end || memcmp(V.total.types, wt.types, sizeof wt.types) != 0)
            bad = 1;
        /* the timeline's points are the graph at their times */
        for (size_t k = 0; k < V.npoints && !bad; k += 1 + V.npoints / 8) {
            uint64_t g = 0;
            for (int i = 0; i < NB; i++) {
                bool firstof = true;
                for (int j = 0; j < i && firstof; j++)
                    firstof = B[j].ident != B[i].ident;
                if (B[i].ident && firstof && owner_at(B[i].ident, V.timeline[k].time_ns) >= 0)
                    g += PS;
            }
            if (g != V.timeline[k].bytes) {
                printf("round %d timeline at %" PRId64 ": %" PRIu64 " / %" PRIu64 "\n", round,
                       V.timeline[k].time_ns, V.timeline[k].bytes, g);
                bad = 1;
            }
        }
    }
    /* the peak over the whole recording, checked at every time */
    uint64_t peak = 0;
    for (int64_t T = 0; T <= t && !bad; T += 1000) {
        uint64_t g = 0;
        for (int i = 0; i < NB; i++) {
            bool firstof = true;
            for (int j = 0; j < i && firstof; j++)
                firstof = B[j].ident != B[i].ident;
            if (B[i].ident && firstof && owner_at(B[i].ident, T) >= 0)
                g += PS;
        }
        if (g > peak)
            peak = g;
    }
    if (!bad && peak != M.peak_bytes) {
        printf("round %d: peak %" PRIu64 " / %" PRIu64 "\n", round, M.peak_bytes, peak);
        bad = 1;
    }
    return bad;
}

static void brute_force(void)
{
    int bad = 0;
    for (int r = 0; r < 300 && bad < 3; r++)
        bad += brute_round(r);
    CHECK("brute force: every figure of random recordings and viewports as the definitions give", bad == 0);
}

static void timeline_decimation(void)
{
    start(0);
    for (int i = 0; i < 3000; i++) {
        ref(1, (uint64_t)i * 1000 + 1000, 0x1000 + (uint64_t)i * PS, 1, RS_CAT_HEAP, 0);
        if (i % 2)
            rel(1, (uint64_t)i * 1000 + 1500, 0x1000 + (uint64_t)(i - 1) * PS, 1);
    }
    ref(1, 1777000, 0x900000000, 2000, RS_CAT_HEAP, 0); /* a spike above the rest */
    rel(1, 1777001, 0x900000000, 2000);
    view(0, 4000000);
    uint64_t best = 0;
    for (size_t i = 0; i < V.npoints; i++)
        if (V.timeline[i].bytes > best)
            best = V.timeline[i].bytes;
    CHECK("timeline: at most 500 points", V.npoints <= RS_TIMELINE_MAX && V.npoints > 400);
    CHECK("timeline: the peak is kept", best == M.peak_bytes && M.peak_ns == 1777000);
}

/* --- a recording for tests/refset/test_report.sh ------------------------------ */

/* Frames of the stacks: return addresses inside these functions. */
__attribute__((noinline)) static void touch_heap(void)
{
    __asm__ volatile("");
}
__attribute__((noinline)) static void touch_buffers(void)
{
    __asm__ volatile("");
}

static int wr(mt_rs_writer *w, mt_rs_event e)
{
    return mt_rs_write(w, &e);
}

/* The seed's example in pid 100 (10 MB persistent, 10 MB impacting, 10 MB
 * transient over the viewport 1:2), then file pages shared with pid 101
 * (which references them first, at 2.2 s), a chunk per moment. */
static int write_recording(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), err = 0;
    mt_rs_header h = {.start_ns = 5000000000ULL, .page_size = PS};
    mt_rs_writer *w = fd < 0 ? NULL : mt_rs_writer_open(fd, &h, &err);
    if (!w)
        return 1;
    const uint64_t base = 5000000000ULL, n = 10 * MB / PS;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    int rc = wr(
        w, (mt_rs_event){.type = RS_EV_PROCESS, .pid = 100, .time_ns = base, .name = "seed", .name_len = 4});
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[8192];
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi, off;
        char mpath[4096] = "";
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &off, mpath) == 4 &&
            strcmp(mpath, exe) == 0)
            rc |= wr(w, (mt_rs_event){.type = RS_EV_MODULE,
                                      .pid = 100,
                                      .addr = lo,
                                      .len = hi - lo,
                                      .pgoff = off,
                                      .name = exe,
                                      .name_len = (uint32_t)strlen(exe)});
    }
    if (maps)
        fclose(maps);
    uint64_t f1[2] = {(uint64_t)(uintptr_t)touch_heap + 1, (uint64_t)(uintptr_t)write_recording + 1};
    uint64_t f2[2] = {(uint64_t)(uintptr_t)touch_buffers + 1, (uint64_t)(uintptr_t)write_recording + 1};
    rc |= wr(w, (mt_rs_event){.type = RS_EV_STACK, .stack = 1, .nframes = 2, .frames = f1});
    rc |= wr(w, (mt_rs_event){.type = RS_EV_STACK, .stack = 2, .nframes = 2, .frames = f2});
    struct {
        mt_rs_event e;
    } ev[] = {
        {{.type = RS_EV_REF,
          .pid = 100,
          .time_ns = S(0.5),
          .addr = 0x10000000,
          .npages = n,
          .category = RS_CAT_HEAP,
          .flags = RS_REF_FAULT,
          .stack = 1,
          .alloc_stack = 1}},
        {{.type = RS_EV_REF,
          .pid = 100,
          .time_ns = S(1.5),
          .addr = 0x20000000,
          .npages = n,
          .category = RS_CAT_VIRTUALALLOC,
          .flags = RS_REF_FAULT,
          .stack = 2,
          .alloc_stack = 2}},
        {{.type = RS_EV_REF,
          .pid = 100,
          .time_ns = S(1.6),
          .addr = 0x30000000,
          .npages = n,
          .category = RS_CAT_VIRTUALALLOC,
          .flags = RS_REF_FAULT,
          .stack = 2,
          .alloc_stack = 2}},
        {{.type = RS_EV_RELEASE, .pid = 100, .time_ns = S(1.8), .addr = 0x30000000, .npages = n}},
        {{.type = RS_EV_PROCESS,
          .pid = 101,
          .ppid = 100,
          .time_ns = S(2.1),
          .reason = RS_PROC_FORK,
          .name = "reader",
          .name_len = 6}},
        {{.type = RS_EV_REF,
          .pid = 101,
          .time_ns = S(2.2),
          .addr = 0x50000000,
          .npages = 10,
          .category = RS_CAT_MAPFILE,
          .flags = RS_REF_FAULT | RS_REF_FILE_PAGE,
          .dev = 8,
          .ino = 42}},
        {{.type = RS_EV_REF,
          .pid = 100,
          .time_ns = S(2.5),
          .addr = 0x60000000,
          .npages = 10,
          .category = RS_CAT_MAPFILE,
          .flags = RS_REF_SCAN | RS_REF_FILE_PAGE,
          .dev = 8,
          .ino = 42}},
        {{.type = RS_EV_RELEASE, .pid = 100, .time_ns = S(3.0), .addr = 0x10000000, .npages = n}},
        {{.type = RS_EV_EXIT, .pid = 101, .time_ns = S(3.1)}},
        {{.type = RS_EV_LOST, .pid = 100, .time_ns = S(3.1), .count = 5}},
        {{.type = RS_EV_EXIT, .pid = 100, .time_ns = S(3.2)}},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        if (ev[i].e.type != RS_EV_STACK)
            ev[i].e.time_ns += base;
        rc |= wr(w, ev[i].e);
        rc |= mt_rs_write_flush(w);
    }
    touch_heap();
    touch_buffers();
    return (rc | mt_rs_write_finish(w, NULL, NULL, 0)) != 0;
}

/* A large recording (the performance check of test_report.sh): pages
 * page references in runs of 1-16 pages over 8 processes sharing file pages,
 * with releases and exits, 1 us apart. */
static int write_big(const char *path, uint64_t pages)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), err = 0;
    mt_rs_header h = {.start_ns = 1000, .page_size = PS};
    mt_rs_writer *w = fd < 0 ? NULL : mt_rs_writer_open(fd, &h, &err);
    if (!w)
        return 1;
    int rc = 0;
    uint64_t t = 1000, done = 0;
    for (uint32_t p = 0; p < 8; p++)
        rc |= wr(w, (mt_rs_event){
                        .type = RS_EV_PROCESS, .pid = 1000 + p, .time_ns = t, .name = "big", .name_len = 3});
    while (done < pages && !rc) {
        t += 1000;
        uint32_t pid = 1000 + (uint32_t)rnd(8);
        uint64_t n = 1 + rnd(16), k = rnd(10), a = rnd(1u << 20);
        if (k < 7) {
            bool file = k == 0;
            rc |= wr(w, (mt_rs_event){.type = RS_EV_REF,
                                      .pid = pid,
                                      .time_ns = t,
                                      .addr = (0x10000000 + a) * PS,
                                      .npages = n,
                                      .category = file ? RS_CAT_MAPFILE : RS_CAT_HEAP,
                                      .flags = RS_REF_FAULT | (file ? RS_REF_FILE_PAGE : 0),
                                      .dev = 1,
                                      .ino = 5,
                                      .pgoff = a * PS,
                                      .stack = (uint32_t)rnd(1000) + 1});
            done += n;
        } else if (k < 9) {
            rc |= wr(w, (mt_rs_event){.type = RS_EV_RELEASE,
                                      .pid = pid,
                                      .time_ns = t,
                                      .addr = (0x10000000 + a) * PS,
                                      .npages = 4 * n});
        }
    }
    for (uint32_t p = 0; p < 8; p++)
        rc |= wr(w, (mt_rs_event){.type = RS_EV_EXIT, .pid = 1000 + p, .time_ns = t + 1000});
    return (rc | mt_rs_write_finish(w, NULL, NULL, 0)) != 0;
}

/* An attached recording with physical frames: pid 200 had 8 pages before
 * (4 released at 1 s), pid 201 maps the same frames at 0.5 s, a zero-page
 * read of 2 pages, and a duplicate reference of 1 page; ends at 2 s. */
static int write_attach(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), err = 0;
    mt_rs_header h = {.start_ns = 1000, .page_size = PS, .flags = RS_FILE_ATTACH | RS_FILE_PFN};
    mt_rs_writer *w = fd < 0 ? NULL : mt_rs_writer_open(fd, &h, &err);
    if (!w)
        return 1;
    mt_rs_event ev[] = {
        {.type = RS_EV_PROCESS, .pid = 200, .reason = RS_PROC_ATTACH, .name = "server", .name_len = 6},
        {.type = RS_EV_PROCESS, .pid = 201, .reason = RS_PROC_ATTACH, .name = "worker", .name_len = 6},
        {.type = RS_EV_REF,
         .pid = 200,
         .addr = 0x400000,
         .npages = 8,
         .category = RS_CAT_PFMAPPEDSECTION,
         .flags = RS_REF_BEFORE | RS_REF_FILE_PAGE,
         .pfn = 9000},
        {.type = RS_EV_REF,
         .pid = 201,
         .time_ns = S(0.5),
         .addr = 0x800000,
         .npages = 8,
         .category = RS_CAT_PFMAPPEDSECTION,
         .flags = RS_REF_FAULT | RS_REF_FILE_PAGE,
         .pfn = 9000},
        {.type = RS_EV_REF,
         .pid = 201,
         .time_ns = S(0.6),
         .addr = 0x900000,
         .npages = 2,
         .category = RS_CAT_VIRTUALALLOC,
         .flags = RS_REF_FAULT | RS_REF_ZERO_PAGE,
         .pfn = 77},
        {.type = RS_EV_REF,
         .pid = 201,
         .time_ns = S(0.7),
         .addr = 0x800000,
         .npages = 1,
         .category = RS_CAT_PFMAPPEDSECTION,
         .flags = RS_REF_SCAN | RS_REF_FILE_PAGE,
         .pfn = 9000},
        {.type = RS_EV_RELEASE, .pid = 200, .time_ns = S(1), .addr = 0x400000, .npages = 4},
        {.type = RS_EV_EXIT, .pid = 201, .time_ns = S(2)},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        ev[i].time_ns += 1000;
        rc |= wr(w, ev[i]);
    }
    return (rc | mt_rs_write_finish(w, NULL, NULL, 0)) != 0;
}

/* The same stack id in two programs is two rows (different code at the
 * same addresses); in two processes of one program, one row. */
static void stacks_per_program(void)
{
    start(0);
    proc(1, 0, RS_PROC_START, "alpha");
    proc(2, 0, RS_PROC_START, "beta");
    proc(3, 0, RS_PROC_FORK, "alpha");
    mt_rs_event e = {.type = RS_EV_REF, .time_ns = S(0.1), .npages = 1, .flags = RS_REF_FAULT, .stack = 7};
    uint32_t pids[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        e.pid = pids[i];
        e.addr = 0x400000;
        rs_model_add(&M, &e);
    }
    view(0, S(1));
    size_t alpha = 0, beta = 0;
    for (size_t i = 0; i < V.nimpacting; i++) {
        const struct rs_stack_row *r = &V.impacting[i];
        if (r->id == 7 && strcmp(r->program, "alpha") == 0)
            alpha += r->f.size;
        if (r->id == 7 && strcmp(r->program, "beta") == 0)
            beta += r->f.size;
    }
    CHECK("stack 7: one row of two pages for alpha's two processes, one of one page for beta",
          V.nimpacting == 2 && alpha == 2 * PS && beta == PS);
}

/* A RELEASE of a page-cache page (the process unmapped a file, or its
 * file page was replaced by a private copy) ends the process's reference
 * but the page stays outstanding; a private page released leaves. */
static void release_page_cache(void)
{
    start(0);
    proc(1, 0, RS_PROC_START, "p");
    ref_id(1, S(0.1), 0x1000, 1, RS_CAT_IMAGE, RS_REF_FILE_PAGE | RS_REF_FAULT, 0, 8, 77,
           0); /* a file's page */
    ref(1, S(0.1), 0x2000, 1, RS_CAT_VIRTUALALLOC, 0);
    rel(1, S(0.2), 0x1000, 2);
    ref(1, S(0.3), 0x1000, 1, RS_CAT_COPYONWRITEIMAGE, 0); /* the private copy: a new reference */
    view(0, S(1));
    CHECK("release: the Image page stays outstanding, the anonymous one goes, the copy is new",
          V.cats[RS_CAT_IMAGE].graph_end == PS && V.cats[RS_CAT_VIRTUALALLOC].graph_end == 0 &&
              V.cats[RS_CAT_COPYONWRITEIMAGE].graph_end == PS && M.duplicate_pages == 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-attach") == 0)
        return write_attach(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--write-big") == 0)
        return write_big(argv[2], strtoull(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "--write") == 0)
        return write_recording(argv[2]);
    seed_example();
    sharing();
    exits();
    boundaries();
    timeline_decimation();
    stacks_per_program();
    release_page_cache();
    brute_force();
    rs_view_free(&V);
    rs_model_free(&M);
    return failures != 0;
}
