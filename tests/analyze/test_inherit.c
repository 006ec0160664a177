/* test_inherit.c — process trees of traces: a parent's trace and a forked
 * child's (meta began fork, ppid, parent_trace, fork_ns, fork_last_id),
 * written with the real writer into files. The child's analysis starts
 * with the blocks the parent had live at the fork, so its frees of them
 * are known and its live, leaks and peak are the truth built here; the
 * inherited blocks keep the parent's stacks. A parent's trace missing, of
 * another pid, ending before the fork or begun on demand is a note and
 * the began-late caveat, and the child is analysed as before (with what
 * the parent's trace has). `memtrail report` of both shows the tree (PPID,
 * reason). */
#include "analyze/analyze.h"
#include "report/report.h"
#include "trace_mem.h"
#include "unit.h"

#include <inttypes.h>
#include <stdio.h>

#define S 1000000000ull /* the parent's start_ns */
#define FORK_T 800      /* the fork, from S */

static char dir[64];

static mt_trace_event A(uint64_t t, uint32_t id, uint64_t size, uint32_t stack)
{
    return (mt_trace_event){.type = MT_TRACE_ALLOC,
                            .thread = 1,
                            .time_ns = t,
                            .id = id,
                            .size = size,
                            .stack = stack,
                            .category = (uint8_t)(stack % 3)};
}
static mt_trace_event F(uint64_t t, uint32_t id)
{
    return (mt_trace_event){.type = MT_TRACE_FREE, .thread = 1, .time_ns = t, .id = id};
}

/* The parent: live at the fork {1: 1000, 3: 300, 4: 400, 5: 50, 6: 60}
 * (2 freed before it); after it, in the same time unit, its own id 7
 * (after fork_last_id 6), then it frees 1 (the child keeps its copy). */
static size_t parent_events(mt_trace_event *ev, uint64_t until)
{
    mt_trace_event all[] = {A(100, 1, 1000, 11), A(200, 2, 2000, 12),    A(300, 3, 300, 13),
                            A(400, 4, 400, 11),  A(500, 5, 50, 12),      F(600, 2),
                            A(700, 6, 60, 13),   A(FORK_T, 7, 7777, 11), F(900, 1),
                            A(1000, 8, 8, 12)};
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].time_ns <= until)
            ev[n++] = all[i];
    return n;
}

/* The child (from its start, 50 ns after the fork): frees inherited 3 and
 * 1, allocates 7 and 9, reallocs inherited 4 to 8, frees 7. At the end
 * {5: 50, 6: 60, 8: 4400, 9: 90}; the peak 9600 in 5 blocks after 9. */
static size_t child_events(mt_trace_event *ev)
{
    mt_trace_event all[] = {F(10, 3),
                            A(20, 7, 5000, 20),
                            F(30, 1),
                            {.type = MT_TRACE_REALLOC,
                             .thread = 1,
                             .time_ns = 40,
                             .id = 8,
                             .old_id = 4,
                             .size = 4400,
                             .stack = 20,
                             .category = 2},
                            A(50, 9, 90, 20),
                            F(60, 7)};
    memcpy(ev, all, sizeof all);
    return sizeof all / sizeof all[0];
}

/* end: with the END chunk (else the file of a writer stopped after its
 * last chunk). */
static int write_file_end(const char *path, uint32_t pid, uint64_t start, const mt_trace_event *ev, size_t n,
                          const char *const *meta, bool end)
{
    static const char *names[] = {"events_lost", "events_fired"};
    uint64_t values[] = {0, n};
    struct trace_mem tm;
    struct trace_mem_opts o = {.pid = pid,
                               .start_ns = start,
                               .meta = meta,
                               .stat_names = names,
                               .stat_values = values,
                               .nstats = 2,
                               .no_end = !end};
    int rc = trace_mem_write_opts(&tm, ev, n, &o);
    if (rc == 0)
        rc = trace_mem_save(&tm, path);
    trace_mem_free(&tm);
    return rc;
}

static int write_file(const char *path, uint32_t pid, uint64_t start, const mt_trace_event *ev, size_t n,
                      const char *const *meta)
{
    return write_file_end(path, pid, start, ev, n, meta, true);
}

/* The child's file, naming parent as its parent's trace and ppid. */
static int write_child(const char *path, const char *parent, const char *ppid)
{
    char fork_ns[32];
    snprintf(fork_ns, sizeof fork_ns, "%llu", S + FORK_T);
    const char *meta[] = {"ppid",  ppid,           "began", "fork",  "parent_trace", parent, "fork_ns",
                          fork_ns, "fork_last_id", "6",     "ended", "exit",         NULL};
    mt_trace_event ev[8];
    size_t n = child_events(ev);
    return write_file(path, 5001, S + FORK_T + 50, ev, n, meta);
}

struct result {
    struct analyzer *a;
    mt_trace_reader *r;
    char *text, *json;
};

static int analyse(const char *path, struct result *x)
{
    memset(x, 0, sizeof *x);
    char err[MT_TRACE_ERR_MAX];
    if (mt_trace_open(path, MT_TRACE_PREFETCH, &x->r, err, sizeof err) < 0) {
        printf("  %s\n", err);
        return -1;
    }
    x->a = analyze_new(0);
    analyze_set_file(x->a, path);
    if (analyze_run(x->a, x->r, NULL, NULL) < 0)
        return -1;
    struct analyze_view v = {.file = path, .reader = x->r, .show = ANALYZE_SHOW_ALL, .top = 10};
    size_t len;
    FILE *f = open_memstream(&x->text, &len);
    analyze_print_text(f, analyze_result(x->a), &v);
    fclose(f);
    f = open_memstream(&x->json, &len);
    analyze_print_json(f, analyze_result(x->a), &v);
    fclose(f);
    return 0;
}

static void result_free(struct result *x)
{
    analyze_free(x->a);
    mt_trace_close(x->r);
    free(x->text);
    free(x->json);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s ? strstr(s, what) : NULL; p; p = strstr(p + 1, what))
        n++;
    return n;
}

static void inherited(const char *parent, const char *child)
{
    struct result x;
    CHECK("fork: child analysed", analyse(child, &x) == 0);
    const struct analyze_result *res = analyze_result(x.a);
    const struct analyze_inherited *in = &res->inherited;
    CHECK("fork: the parent's 5 blocks, 1810 bytes, live at the fork inherited",
          in->state == ANALYZE_INHERIT_DONE && in->count == 5 && in->bytes == 1810 && in->ppid == 5000 &&
              !in->parent_short && !in->note[0] && !strcmp(in->parent, parent));
    CHECK("fork: the child's frees of inherited blocks are known (0 unknown)",
          res->frees_unknown == 0 && res->reallocs_unknown == 0 && res->frees == 3 && res->allocs == 2 &&
              res->reallocs == 1);
    CHECK("fork: live and leaks at the end = the truth (4 blocks, 4600 bytes)",
          res->live_count == 4 && res->live_bytes == 4600);
    CHECK("fork: the peak = the truth (9600 bytes in 5 blocks)",
          res->peak_bytes == 9600 && res->peak_count == 5);
    const mt_trace_stack *st = analyze_stack_frames(res, x.r, 12);
    CHECK("fork: an inherited block's stack (12, only in the parent's file) has the parent's frames",
          !mt_trace_stack_get(x.r, 12) && st && st->nframes == 2 && st->frames[0] == 0x401000 + 16 * 12);
    CHECK("fork: text says what was inherited, and shows the parent's frames",
          x.text && strstr(x.text, "inherited at the fork from pid 5000") &&
              strstr(x.text, ": 5 blocks, 1.77KB live then") && strstr(x.text, "[0x00000000004010c0]") &&
              !strstr(x.text, "CAUTION") && !strstr(x.text, "note:"));
    CHECK("fork: JSON inherited",
          x.json && strstr(x.json, "\"replayed\": true") && strstr(x.json, "\"live_count\": 5") &&
              strstr(x.json, "\"live_bytes\": 1810") && strstr(x.json, "\"ppid\": 5000") &&
              strstr(x.json, "\"parent_reaches_fork\": true") && strstr(x.json, "\"caveats\": null"));
    if (getenv("SHOW"))
        printf("%s\n%s\n", x.text, x.json);
    result_free(&x);
}

static void report_tree(const char *parent, const char *child, const char *old)
{
    struct report r[3];
    const char *names[3] = {parent, child, old};
    char err[REPORT_ERR_MAX];
    int ok = 1;
    for (int i = 0; i < 3; i++)
        ok &= analyze_read_any(names[i], &r[i], err, sizeof err) == 0;
    CHECK("tree: the three traces read as reports", ok);
    CHECK("tree: the child's report: ppid 5000, reason exit (meta ended), the inherited figures",
          (r[1].has & REPORT_HAS_PPID) && r[1].ppid == 5000 && r[1].reason && !strcmp(r[1].reason, "exit") &&
              r[1].total.live_bytes == 4600 && r[1].total.peak_bytes == 9600);
    CHECK("tree: the child's report has its own module and the parent's",
          r[1].nmodules == 2 && !strcmp(r[1].modules[0].path, "/nonexistent/child-program") &&
              !strcmp(r[1].modules[1].path, "/nonexistent/parent-program"));
    CHECK("tree: a trace without the meta: no ppid, no reason",
          !(r[2].has & REPORT_HAS_PPID) && !r[2].reason);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc = report_tree_print_text(f, r, names, 3, &(struct report_scale){0});
    fclose(f);
    CHECK("tree: the parent's row (ppid 1, exit), the child under it (ppid 5000), the old one with ?",
          rc == 0 && buf && strstr(buf, "   5000       1  exit") && strstr(buf, "   5001    5000  exit") &&
              strstr(buf, "\\_ ") && strstr(buf, "   4242       ?  ?"));
    if (!buf || !strstr(buf, "\\_ ") || getenv("SHOW"))
        printf("%s\n", buf);
    free(buf);
    for (int i = 0; i < 3; i++)
        report_free(&r[i]);
}

/* A child that inherited only some of its parent's blocks began late: the
 * caveat in the text, the JSON and the figures (live, leaks, peak unbounded). */
static void began_late(const struct result *x, const char *says)
{
    const struct analyze_result *res = analyze_result(x->a);
    struct analyze_caveats cv;
    analyze_caveats(res, x->r, false, &cv);
    bool unbounded = cv.nfig >= 3;
    for (size_t i = 0; i < cv.nfig && i < 3; i++)
        unbounded &= !cv.fig[i].bounded;
    char name[200];
    snprintf(name, sizeof name, "%s: the child began late: live, leaks and the peak unbounded", says);
    CHECK(name, analyze_began_late(res, x->r) && cv.any && cv.before && !cv.began_query && unbounded);
    snprintf(name, sizeof name, "%s: text CAUTION before the figures, JSON began_late", says);
    const char *caution = x->text ? strstr(x->text, "  CAUTION: the trace began at a fork without all its "
                                                    "parent's blocks, after the\n    program had run")
                                  : NULL;
    CHECK(name, caution && caution < strstr(x->text, "  allocations ") && x->json &&
                    strstr(x->json, "\"began_late\": true"));
}

static void no_parent(const char *path, const char *named, const char *ppid, const char *says)
{
    char name[200];
    CHECK("no parent: child written", write_child(path, named, ppid) == 0);
    struct result x;
    snprintf(name, sizeof name, "%s: analysed", says);
    CHECK(name, analyse(path, &x) == 0);
    const struct analyze_result *res = analyze_result(x.a);
    snprintf(name, sizeof name, "%s: a note, nothing inherited", says);
    CHECK(name, res->inherited.state == ANALYZE_INHERIT_FAILED && res->inherited.count == 0 &&
                    strstr(res->inherited.note, says));
    snprintf(name, sizeof name,
             "%s: analysed as without a parent (2 unknown frees, 1 unknown realloc, live 4490)", says);
    CHECK(name, res->frees_unknown == 2 && res->reallocs_unknown == 1 && res->live_bytes == 4490 &&
                    res->live_count == 2);
    snprintf(name, sizeof name, "%s: one note line in the text, replayed false in JSON", says);
    CHECK(name,
          count_of(x.text, "  note: ") == 1 && strstr(x.text, says) && strstr(x.json, "\"replayed\": false"));
    began_late(&x, says);
    result_free(&x);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/mt-inherit-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK("a scratch directory", 0);
        return 1;
    }
    char parent[128], child[128], old[128], moved[128], other[128], shortp[128], ondemand[128];
    snprintf(parent, sizeof parent, "%s/parent.mtt", dir);
    snprintf(child, sizeof child, "%s/child.mtt", dir);
    snprintf(old, sizeof old, "%s/old.mtt", dir);
    snprintf(moved, sizeof moved, "%s/moved.mtt", dir);
    snprintf(other, sizeof other, "%s/other.mtt", dir);
    snprintf(shortp, sizeof shortp, "%s/short.mtt", dir);
    snprintf(ondemand, sizeof ondemand, "%s/ondemand.mtt", dir);
    mt_trace_event ev[16];
    const char *pmeta[] = {"ppid", "1", "began", "start", "ended", "exit", NULL};
    /* the parent's module is another than the child's: the child's report and symbolizer get both */
    trace_mem_module_path = "/nonexistent/parent-program";
    CHECK("parent written", write_file(parent, 5000, S, ev, parent_events(ev, UINT64_MAX), pmeta) == 0);
    trace_mem_module_path = "/nonexistent/child-program";
    trace_mem_module_start = 0x3ff000;
    CHECK("child written", write_child(child, parent, "5000") == 0);
    mt_trace_event oev[2] = {A(10, 1, 10, 1), A(20, 2, 20, 2)};
    CHECK("old trace written", write_file(old, 4242, S, oev, 2, NULL) == 0);

    inherited(parent, child);
    report_tree(parent, child, old);

    /* a chain: the child forks a grandchild 35 ns into its trace (after it
     * freed 3 and 1 and allocated 7): the grandchild inherits {4, 5, 6}
     * from the first parent, through the child, and 7 from the child */
    char grandchild[128], gfork[32];
    snprintf(grandchild, sizeof grandchild, "%s/grandchild.mtt", dir);
    snprintf(gfork, sizeof gfork, "%llu", S + FORK_T + 50 + 35);
    const char *gmeta[] = {"ppid", "5001",         "began", "fork", "parent_trace", child, "fork_ns",
                           gfork,  "fork_last_id", "7",     NULL};
    mt_trace_event gev[] = {F(5, 5), F(6, 7)};
    CHECK("chain: grandchild written", write_file(grandchild, 5002, S + FORK_T + 100, gev, 2, gmeta) == 0);
    struct result g;
    CHECK("chain: grandchild analysed", analyse(grandchild, &g) == 0);
    const struct analyze_result *gres = analyze_result(g.a);
    const mt_trace_stack *gst = analyze_stack_frames(gres, g.r, 12);
    CHECK(
        "chain: 4 blocks inherited through two forks (5510 bytes); its frees known; live {4, 6} = 460 bytes",
        gres->inherited.state == ANALYZE_INHERIT_DONE && gres->inherited.count == 4 &&
            gres->inherited.bytes == 5510 && gres->frees == 2 && gres->frees_unknown == 0 &&
            gres->live_count == 2 && gres->live_bytes == 460);
    CHECK("chain: a stack only the first parent's file defines is resolved",
          gst && gst->nframes == 2 && gst->frames[0] == 0x401000 + 16 * 12);
    result_free(&g);
    unlink(grandchild);

    /* moved: the parent's trace named where it is not, found beside the child */
    CHECK("moved: child written", write_child(moved, "/nonexistent-dir/parent.mtt", "5000") == 0);
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = analyze_read_any(moved, &r, err, sizeof err);
    CHECK("moved: the parent's trace found beside the child's (live 4600, as with it)",
          rc == 0 && r.total.live_bytes == 4600 && r.total.live_count == 4);
    report_free(&r);

    no_parent(moved, "/nonexistent-dir/gone.mtt", "5000", "cannot be read");
    no_parent(other, parent, "4999", "not the parent's");

    /* the parent's file is complete, its last event before the fork (it
     * did nothing more until its end): it reaches the fork */
    CHECK("quiet parent: written", write_file(shortp, 5000, S, ev, parent_events(ev, 700), pmeta) == 0);
    CHECK("quiet parent: child written", write_child(child, shortp, "5000") == 0);
    struct result x;
    CHECK("quiet parent: analysed", analyse(child, &x) == 0);
    const struct analyze_inherited *in = &analyze_result(x.a)->inherited;
    CHECK("quiet parent: complete, so it reaches the fork: its 5 blocks inherited, no note, no caveat",
          in->state == ANALYZE_INHERIT_DONE && !in->parent_short && !in->parent_late && in->count == 5 &&
              in->bytes == 1810 && !in->note[0] && !strstr(x.text, "CAUTION") &&
              strstr(x.json, "\"parent_reaches_fork\": true") && strstr(x.json, "\"caveats\": null"));
    result_free(&x);

    /* the parent's file ends before the fork (its writer stopped, no end
     * record): what it has is inherited, and a note */
    CHECK("short: parent written",
          write_file_end(shortp, 5000, S, ev, parent_events(ev, 500), pmeta, false) == 0);
    CHECK("short: child written", write_child(child, shortp, "5000") == 0);
    CHECK("short: analysed", analyse(child, &x) == 0);
    in = &analyze_result(x.a)->inherited;
    CHECK("short: the blocks up to its end inherited (1..5: 3750 bytes), and a note that it ends before the "
          "fork",
          in->state == ANALYZE_INHERIT_DONE && in->parent_short && in->count == 5 && in->bytes == 3750 &&
              strstr(in->note, "ends before the fork") && count_of(x.text, "  note: ") == 1 &&
              strstr(x.json, "\"parent_reaches_fork\": false"));
    began_late(&x, "short");
    result_free(&x);

    /* the parent's trace began on demand: the blocks it held from before
     * are unknown to the child too */
    const char *qmeta[] = {"ppid", "1", "began", "query", "ended", "exit", NULL};
    CHECK("parent on demand: parent written",
          write_file(ondemand, 5000, S, ev, parent_events(ev, UINT64_MAX), qmeta) == 0);
    CHECK("parent on demand: child written", write_child(child, ondemand, "5000") == 0);
    CHECK("parent on demand: analysed", analyse(child, &x) == 0);
    in = &analyze_result(x.a)->inherited;
    CHECK("parent on demand: its 5 blocks at the fork inherited, and a note that those from before its "
          "trace are unknown",
          in->state == ANALYZE_INHERIT_DONE && !in->parent_short && in->parent_late && in->count == 5 &&
              in->bytes == 1810 && strstr(in->note, "began after the parent had allocated") &&
              count_of(x.text, "  note: ") == 1 && strstr(x.json, "\"parent_reaches_fork\": true"));
    began_late(&x, "parent on demand");
    result_free(&x);

    const char *files[] = {parent, child, old, moved, other, shortp, ondemand};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(files[i]);
    rmdir(dir);
    return failures ? 1 : 0;
}
