/* meminfo_index.c — memory events and their snapshots, one thread, against
 * the program's own arithmetic and the kernel's files.
 *
 *   meminfo_index events DUMP REPORT   index semantics, per-kind counts, live
 *                                      bytes at PEAK, GROW/TRIM from mmap,
 *                                      madvise, malloc_trim and a big block;
 *                                      then its last reading of each kind to
 *                                      DUMP as the report's info lines, and
 *                                      mt_report_write(REPORT) right after
 *   meminfo_index limit LIMIT          LIMIT once per crossing of option limit
 *   meminfo_index periodic MS          PERIODIC every MS ms (option info_interval)
 *   meminfo_index fork MS              counts and PERIODIC events in a fork child
 *   meminfo_index noagent              the stub's answers
 *   meminfo_index cost                 ns per mt_memory_info call
 *
 * Every check prints one PASS or FAIL line. Nothing here calls printf
 * before the end of a phase: stdio's buffer would be an allocation the
 * arithmetic does not know. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <memtrail.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;
static char results[1 << 16];
static size_t results_len;

/* Checks are collected and printed at the end (printing allocates). */
static void check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(int ok, const char *name, const char *fmt, ...)
{
    char why[512] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    int n = snprintf(results + results_len, sizeof results - results_len, ok ? "PASS %s\n" : "FAIL %s: %s\n",
                     name, why);
    if (n > 0 && results_len + (size_t)n < sizeof results)
        results_len += (size_t)n;
    failures += !ok;
}

static void flush_results(void)
{
    if (write(1, results, results_len) < 0)
        failures++;
    results_len = 0;
}

#define U(x) ((unsigned long long)(x))

static uint64_t counts[MT_EVENT_KINDS];
static void read_counts(uint64_t c[MT_EVENT_KINDS])
{
    for (int k = 0; k < MT_EVENT_KINDS; k++)
        c[k] = mt_event_count(k);
}

static struct mt_memory_info info(int kind)
{
    struct mt_memory_info s;
    int rc = mt_memory_info(kind, &s);
    if (rc != 0)
        memset(&s, 0, sizeof s);
    return s;
}

/* The counts moved by exactly `want` (each kind's expected change). */
static void expect_moves(const char *name, const uint64_t before[MT_EVENT_KINDS],
                         const int want[MT_EVENT_KINDS])
{
    uint64_t now[MT_EVENT_KINDS];
    read_counts(now);
    char got[256];
    int ok = 1, n = 0;
    for (int k = 0; k < MT_EVENT_KINDS; k++) {
        ok &= now[k] - before[k] == (uint64_t)want[k];
        n += snprintf(got + n, sizeof got - (size_t)n, " %llu", U(now[k] - before[k]));
    }
    check(ok, name, "count changes any..periodic:%s", got);
}

/* Resident and data bytes from /proc/self/statm, without malloc. */
static void statm(uint64_t *rss, uint64_t *data)
{
    char buf[256] = "";
    int fd = open("/proc/self/statm", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    unsigned long long v[7] = {0};
    if (n > 0)
        sscanf(buf, "%llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    *rss = v[1] * (uint64_t)getpagesize();
    *data = v[5] * (uint64_t)getpagesize();
}

static int near(uint64_t a, uint64_t b, uint64_t tol)
{
    return a > b ? a - b <= tol : b - a <= tol;
}

/* Every field 0: what a kind with no event yet reads as. */
static int all_zero(const struct mt_memory_info *s)
{
    static const struct mt_memory_info zero;
    return memcmp(s, &zero, sizeof zero) == 0;
}

/* The report's info line for what mt_memory_info gave (docs/report-format.md). */
static const char *const names[] = {"any", "peak", "grow", "trim", "limit", "periodic"};
static void info_line(FILE *f, int kind, const struct mt_memory_info *s)
{
    fprintf(
        f,
        "info kind=%s count=%llu event=%s index=%llu time_ns=%llu run_time_ns=%llu live_before_bytes=%llu "
        "live_after_bytes=%llu fragmentation_before_bytes=%llu fragmentation_after_bytes=%llu "
        "rss_bytes=%llu committed_bytes=%llu memory_load_bytes=%llu total_available_bytes=%llu "
        "alloc_time_ns=%llu map_time_ns=%llu minor_faults=%llu major_faults=%llu overhead_bytes=%llu "
        "event_ns=%llu categories=",
        names[kind], U(s->index), s->index ? names[s->kind] : "none", U(s->index), U(s->time_ns),
        U(s->run_time_ns), U(s->live_before), U(s->live_after), U(s->fragmentation_before),
        U(s->fragmentation_after), U(s->rss_bytes), U(s->committed_bytes), U(s->memory_load_bytes),
        U(s->total_available_bytes), U(s->alloc_time_ns), U(s->map_time_ns), U(s->minor_faults),
        U(s->major_faults), U(s->overhead_bytes), U(s->event_ns));
    for (int i = 0; i < s->category_count; i++)
        fprintf(f, "%s%s:%lld", i ? "," : "", mt_category_name(i), (long long)s->category_live_bytes[i]);
    fprintf(f, "\n");
}

#define BLOCK (16 * 1024)
#define NBLOCKS 150
static void *blocks[NBLOCKS];

static int events(const char *dump, const char *report)
{
    struct mt_memory_info s;
    /* ---- before any event of a kind: index 0, every field 0 ---- */
    read_counts(counts);
    int ok = 1;
    for (int k = 0; k < MT_EVENT_KINDS; k++) {
        s = info(k);
        ok &= s.index == counts[k] && (counts[k] != 0 || all_zero(&s));
    }
    check(ok, "events: index = mt_event_count for every kind; all zero while 0", "mismatch at start");
    check(counts[1] == 0 && counts[4] == 0 && counts[5] == 0, "events: no PEAK, LIMIT, PERIODIC before any",
          "peak %llu limit %llu periodic %llu", U(counts[1]), U(counts[4]), U(counts[5]));

    /* ---- the program's own mapping: one GROW, then TRIMs ---- */
    read_counts(counts);
    char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect_moves("events: mmap is one GROW (any and grow only)", counts, (int[]){1, 0, 1, 0, 0, 0});
    s = info(MT_EVENT_GROW);
    uint64_t rss, data;
    statm(&rss, &data);
    check(s.kind == MT_EVENT_GROW && s.index == counts[2] + 1, "events: the GROW snapshot is the mmap's",
          "kind %d index %llu", s.kind, U(s.index));
    check(near(s.rss_bytes, rss, 64 * 1024), "events: rss_bytes = /proc/self/statm resident", "%llu vs %llu",
          U(s.rss_bytes), U(rss));
    check(near(s.committed_bytes, data, 64 * 1024), "events: committed_bytes = statm data", "%llu vs %llu",
          U(s.committed_bytes), U(data));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    check(s.minor_faults <= (uint64_t)ru.ru_minflt && s.minor_faults + 50 >= (uint64_t)ru.ru_minflt,
          "events: minor_faults = getrusage's", "%llu vs %ld", U(s.minor_faults), ru.ru_minflt);
    uint64_t base = s.live_after; /* the program's live bytes now, as the agent counts them */
    struct mt_memory_info any = info(MT_EVENT_ANY);
    check(any.index == counts[0] + 1 && any.kind == MT_EVENT_GROW && any.time_ns == s.time_ns,
          "events: ANY holds the same snapshot with its own index", "index %llu kind %d", U(any.index),
          any.kind);
    memset(m, 1, 1 << 20);
    read_counts(counts);
    madvise(m, 1 << 20, MADV_DONTNEED);
    expect_moves("events: madvise(DONTNEED) is one TRIM", counts, (int[]){1, 0, 0, 1, 0, 0});
    read_counts(counts);
    munmap(m, 1 << 20);
    expect_moves("events: munmap is one TRIM", counts, (int[]){1, 0, 0, 1, 0, 0});
    s = info(MT_EVENT_TRIM);
    check(s.live_after == base && s.live_before == base, "events: live bytes unchanged by mappings",
          "before %llu after %llu base %llu", U(s.live_before), U(s.live_after), U(base));

    /* ---- PEAK: live passes 1 MiB (peak_step=1MB), then each mark: the
     * live bytes of the last PEAK + max(1 MiB, 1% of them) ---- */
    read_counts(counts);
    uint64_t peaks = counts[1], live = base, mark = 1 << 20;
    int at[4] = {-1, -1, -1, -1}, want[4] = {-1, -1, -1, -1}, expected = 0;
    uint64_t live_at[4] = {0};
    for (int i = 0; i < NBLOCKS; i++) {
        blocks[i] = malloc(BLOCK);
        memset(blocks[i], 0, BLOCK);
        live += BLOCK;
        if (live > mark && expected < 4) {
            want[expected] = i;
            live_at[expected++] = live;
            mark = live + (live / 100 > (1 << 20) ? live / 100 : (1 << 20));
        }
        uint64_t c = mt_event_count(MT_EVENT_PEAK) - peaks;
        if (c >= 1 && c <= 4 && at[c - 1] < 0) {
            at[c - 1] = i;
            s = info(MT_EVENT_PEAK);
            if (c == 1)
                check(s.live_after == live && s.live_before == live && s.index == peaks + 1,
                      "events: the first PEAK's live bytes are the program's",
                      "after %llu before %llu want %llu", U(s.live_after), U(s.live_before), U(live));
        }
    }
    check(expected == 2 && memcmp(at, want, sizeof at) == 0,
          "events: PEAK exactly where live passes each mark", "at blocks %d,%d,%d; expected %d,%d,%d", at[0],
          at[1], at[2], want[0], want[1], want[2]);
    check(mt_event_count(MT_EVENT_PEAK) == peaks + 2, "events: two PEAKs for 2.4 MiB", "%llu",
          U(mt_event_count(MT_EVENT_PEAK) - peaks));
    s = info(MT_EVENT_PEAK);
    check(s.index == peaks + 2 && s.live_after == live_at[1],
          "events: the last PEAK snapshot is the second's", "index %llu live %llu want %llu", U(s.index),
          U(s.live_after), U(live_at[1]));
    for (int i = 0; i < NBLOCKS; i++)
        free(blocks[i]);
    live = base;

    /* ---- malloc_trim: fragmentation before and after the real call ---- */
    read_counts(counts);
    struct mallinfo2 mi = mallinfo2();
    uint64_t frag_before = mi.fordblks;
    int trimmed = malloc_trim(0);
    mi = mallinfo2();
    s = info(MT_EVENT_TRIM);
    uint64_t now[MT_EVENT_KINDS];
    read_counts(now);
    check(trimmed == 1 && now[3] == counts[3] + 1 && now[0] == counts[0] + 1 && now[1] == counts[1],
          "events: malloc_trim that gave memory back is one TRIM", "trim rc %d, trim +%llu any +%llu",
          trimmed, U(now[3] - counts[3]), U(now[0] - counts[0]));
    check(s.fragmentation_before == frag_before && s.fragmentation_after == (uint64_t)mi.fordblks,
          "events: malloc_trim's fragmentation = mallinfo2 before and after", "%llu/%llu vs %llu/%llu",
          U(s.fragmentation_before), U(s.fragmentation_after), U(frag_before), U(mi.fordblks));
    check(s.live_after == base, "events: live bytes back to the base after the frees", "%llu vs %llu",
          U(s.live_after), U(base));

    /* ---- a block glibc maps for itself: GROW, and TRIM when freed ---- */
    read_counts(counts);
    char *big = malloc(4 << 20);
    read_counts(now);
    s = info(MT_EVENT_GROW);
    check(now[2] == counts[2] + 1 && s.live_after == base + (4 << 20), "events: a 4 MiB malloc is a GROW",
          "grow +%llu, live %llu want %llu", U(now[2] - counts[2]), U(s.live_after), U(base + (4 << 20)));
    read_counts(counts);
    free(big);
    expect_moves("events: freeing it is one TRIM", counts, (int[]){1, 0, 0, 1, 0, 0});
    s = info(MT_EVENT_TRIM);
    check(s.live_after == base && s.live_before == base + (4 << 20),
          "events: TRIM's live_before is the peak since the GROW", "before %llu after %llu", U(s.live_before),
          U(s.live_after));

    /* ---- invariants of every snapshot ---- */
    ok = 1;
    for (int k = 0; k < MT_EVENT_KINDS; k++) {
        s = info(k);
        if (!s.index)
            continue;
        int64_t sum = 0;
        for (int i = 0; i < s.category_count; i++)
            if (i == 0 || i >= 8)
                sum += s.category_live_bytes[i];
        ok &= sum == (int64_t)s.live_after && s.category_live_bytes[1] == (int64_t)s.overhead_bytes &&
              s.live_before >= s.live_after && s.event_ns > 0 && s.total_available_bytes > 0 &&
              s.category_count >= 8 && strcmp(mt_category_name(0), "malloc") == 0;
    }
    check(ok, "events: categories add up to live_after; overhead is category 1", "a snapshot disagrees");

    /* ---- bad input ---- */
    check(mt_memory_info(MT_EVENT_KINDS, &s) == -EINVAL && mt_memory_info(-1, &s) == -EINVAL &&
              mt_memory_info(MT_EVENT_ANY, NULL) == -EINVAL,
          "events: unknown kind or NULL out is -EINVAL", "rc %d %d %d", mt_memory_info(MT_EVENT_KINDS, &s),
          mt_memory_info(-1, &s), mt_memory_info(0, NULL));
    check(mt_event_count(MT_EVENT_KINDS) == 0 && mt_event_count(-1) == 0, "events: unknown kind counts 0",
          "-");
    check(mt_category_name(-1) == NULL && mt_category_name(72) == NULL &&
              strcmp(mt_category_name(1), "memtrail") == 0,
          "events: mt_category_name", "-");

    /* ---- the last reading of each kind, then the report at once ---- */
    struct mt_memory_info last[MT_EVENT_KINDS];
    for (int k = 0; k < MT_EVENT_KINDS; k++)
        last[k] = info(k);
    int rc = mt_report_write(report);
    FILE *f = fopen(dump, "w");
    for (int k = 0; f && k < MT_EVENT_KINDS; k++)
        info_line(f, k, &last[k]);
    if (f)
        fclose(f);
    check(rc == 0 && f != NULL, "events: dump and report written", "rc %d", rc);
    flush_results();
    return 0;
}

static int limit(uint64_t lim)
{
    enum { CHUNK = 64 * 1024, MAX = 512 };
    static void *held[MAX];
    uint64_t l0 = mt_event_count(MT_EVENT_LIMIT);
    int n = 0;
    int per_mb = (1 << 20) / CHUNK;
    int want_over = (int)(lim / CHUNK) + 2 * per_mb;
    for (; n < want_over && n < MAX; n++)
        held[n] = calloc(1, CHUNK);
    struct mt_memory_info s = info(MT_EVENT_LIMIT);
    uint64_t l1 = mt_event_count(MT_EVENT_LIMIT);
    check(l1 == l0 + 1 && s.live_after > lim && s.kind == MT_EVENT_LIMIT,
          "limit: one LIMIT when live bytes pass limit", "count +%llu, live %llu limit %llu", U(l1 - l0),
          U(s.live_after), U(lim));
    /* down to 2 MiB below the limit (re-armed), then 2 MiB above again */
    int low = (int)(lim / CHUNK) - 2 * per_mb;
    while (n > low)
        free(held[--n]);
    check(mt_event_count(MT_EVENT_LIMIT) == l1, "limit: none while falling", "%llu",
          U(mt_event_count(MT_EVENT_LIMIT) - l1));
    for (; n < want_over; n++)
        held[n] = calloc(1, CHUNK);
    uint64_t l2 = mt_event_count(MT_EVENT_LIMIT);
    check(l2 == l1 + 1, "limit: one more LIMIT for the second crossing", "count +%llu", U(l2 - l1));
    /* up and down above the limit - 1%: no new crossing */
    for (int r = 0; r < 4; r++) {
        free(held[--n]);
        held[n++] = calloc(1, CHUNK);
    }
    while (n > 0)
        free(held[--n]);
    check(mt_event_count(MT_EVENT_LIMIT) == l2, "limit: none without a new crossing", "%llu",
          U(mt_event_count(MT_EVENT_LIMIT) - l2));
    flush_results();
    return 0;
}

static int periodic(int ms)
{
    uint64_t p0 = mt_event_count(MT_EVENT_PERIODIC);
    struct timespec t = {0, 0}, m0, m1;
    uint64_t t0 = (uint64_t)time(NULL);
    long total_ms = 20L * ms;
    t.tv_sec = total_ms / 1000;
    t.tv_nsec = (total_ms % 1000) * 1000000L;
    clock_gettime(CLOCK_MONOTONIC, &m0);
    nanosleep(&t, NULL);
    /* The count and the snapshot read with no PERIODIC event between them
     * (one may come while they are read: read again). */
    uint64_t p1;
    struct mt_memory_info s;
    for (int tries = 0;; tries++) {
        p1 = mt_event_count(MT_EVENT_PERIODIC);
        s = info(MT_EVENT_PERIODIC);
        if (mt_event_count(MT_EVENT_PERIODIC) == p1 || tries == 20)
            break;
    }
    clock_gettime(CLOCK_MONOTONIC, &m1);
    /* Intervals that passed, as this thread saw them: a loaded machine
     * may have slept it longer than asked. The PERIODIC thread may lag
     * as well: at least half of them; and it sleeps to absolute
     * deadlines, so ticks it was late for before p0 come in the window
     * too: a few more than the intervals. */
    uint64_t waited_ms = (uint64_t)(m1.tv_sec - m0.tv_sec) * 1000u + (uint64_t)(m1.tv_nsec / 1000000) -
                         (uint64_t)(m0.tv_nsec / 1000000);
    uint64_t intervals = waited_ms / (uint64_t)ms;
    check(p1 - p0 >= 10 && p1 - p0 <= intervals + 3, "periodic: about one PERIODIC per interval",
          "%llu in %llu intervals", U(p1 - p0), U(intervals));
    check(s.index == p1 && s.kind == MT_EVENT_PERIODIC && s.time_ns / 1000000000u >= t0 - 1,
          "periodic: its snapshot is the last one's", "index %llu of %llu, kind %d", U(s.index), U(p1),
          s.kind);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    /* Signed: the wall clock may have been stepped back meanwhile. Its age
     * is under an interval, but for a late PERIODIC thread: up to three,
     * and 100 ms. */
    int64_t age = (int64_t)(now_ns - s.time_ns);
    check(age <= (int64_t)ms * 3000000 + 100000000, "periodic: taken within an interval", "%lld ns ago",
          (long long)age);
    flush_results();
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* The child keeps the counts it inherited and its own PERIODIC thread
 * (the parent's is not copied by fork) goes on. */
static int forked(int ms)
{
    sleep_ms(10L * ms);
    uint64_t at_fork = mt_event_count(MT_EVENT_PERIODIC);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t inherited = mt_event_count(MT_EVENT_PERIODIC);
        sleep_ms(20L * ms);
        uint64_t later = mt_event_count(MT_EVENT_PERIODIC);
        check(inherited >= at_fork && inherited >= 3, "fork: the child keeps the parent's counts",
              "%llu at fork, %llu in the child", U(at_fork), U(inherited));
        check(later >= inherited + 5, "fork: PERIODIC events go on in the child", "%llu then %llu",
              U(inherited), U(later));
        flush_results();
        _exit(failures ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork: the child ran its checks", "status %d",
          status);
    flush_results();
    return 0;
}

static int noagent(void)
{
    struct mt_memory_info s;
    check(mt_memory_info(MT_EVENT_ANY, &s) == -ENOSYS && mt_event_count(MT_EVENT_ANY) == 0 &&
              mt_category_name(0) == NULL,
          "stub: mt_memory_info is -ENOSYS, counts 0, no names", "-");
    flush_results();
    return 0;
}

static int cost(void)
{
    struct mt_memory_info s;
    struct timespec a, b;
    int n = 1000000;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++)
        mt_memory_info(i % MT_EVENT_KINDS, &s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += mt_event_count(i % MT_EVENT_KINDS);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double cns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n;
    printf("cost mt_memory_info_ns=%.1f mt_event_count_ns=%.1f (%llu)\n", ns, cns, U(sum % 2));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "events") == 0)
        events(argv[2], argv[3]);
    else if (argc >= 3 && strcmp(argv[1], "limit") == 0)
        limit(strtoull(argv[2], NULL, 10));
    else if (argc >= 3 && strcmp(argv[1], "periodic") == 0)
        periodic(atoi(argv[2]));
    else if (argc >= 3 && strcmp(argv[1], "fork") == 0)
        forked(atoi(argv[2]));
    else if (argc >= 2 && strcmp(argv[1], "noagent") == 0)
        noagent();
    else if (argc >= 2 && strcmp(argv[1], "cost") == 0)
        cost();
    else {
        fprintf(stderr, "usage: meminfo_index events DUMP REPORT | limit BYTES | periodic MS | fork MS | "
                        "noagent | cost\n");
        return 2;
    }
    return failures ? 1 : 0;
}
