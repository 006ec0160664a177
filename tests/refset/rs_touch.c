/* rs_touch.c — a program whose page references the recorder's test knows:
 * it writes what it did ("anon START END", "thp START END", "file START END",
 * "unmap START END", "child PID") to the file named first, then does it.
 *   rs_touch OUT anon N     touch N pages of a fresh mapping (no huge pages),
 *                           wait, munmap them, wait
 *   rs_touch OUT thp        touch one byte of each 2 MiB of a 4 MiB range
 *                           with MADV_HUGEPAGE
 *   rs_touch OUT file PATH  map PATH and read one byte of each 64 KiB
 *   rs_touch OUT fork N     a child touches N pages and exits; then exec of
 *                           /bin/true
 *   rs_touch OUT sleep MS   touch 16 pages, then sleep
 *   rs_touch OUT cow N      touch N pages, fork; the child writes them
 *                           (copies of its own) and exits
 *   rs_touch OUT seed       the seed's example: 10 MB touched before T0 and
 *                           kept, 10 MB touched after T0 and kept, 10 MB
 *                           touched and unmapped between T0 and T1
 *                           ("t0 NS", "t1 NS": CLOCK_MONOTONIC)
 *   rs_touch OUT late N     N pages mapped ("late"), the first touched, then
 *                           (the recorder has the mapping) the others
 *                           touched and all unmapped while the recorder
 *                           (the parent) is stopped
 *   rs_touch OUT cats       small mallocs ("heap"), a shared anonymous
 *                           mapping ("shared"), a thread's local array
 *                           ("tstack") */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static FILE *out;

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void say(const char *what, void *start, size_t len)
{
    fprintf(out, "%s %lu %lu\n", what, (unsigned long)start, (unsigned long)start + len);
    fflush(out);
}

static char *fresh(size_t len)
{
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, len, MADV_NOHUGEPAGE);
    return p;
}

static void touch(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i * 4096] = (char)i;
}

static void *thread_main(void *arg)
{
    (void)arg;
    volatile char local[48 * 1024];
    say("tstack", (void *)local, sizeof local);
    for (size_t i = 0; i < sizeof local; i += 4096)
        local[i] = 1;
    return NULL;
}

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Waits longer than the recorder's scan interval (the test's 20 ms), so
 * what came before is recorded before what follows. */
static void settle(void)
{
    pause_ms(120);
}

static void seed_example(void)
{
    const size_t n = (10u << 20) / 4096;
    char *persistent = fresh(n * 4096);
    touch(persistent, n);
    say("persistent", persistent, n * 4096);
    settle();
    fprintf(out, "t0 %llu\n", now_ns());
    settle();
    char *impacting = fresh(n * 4096);
    touch(impacting, n);
    say("impacting", impacting, n * 4096);
    char *transient = fresh(n * 4096);
    touch(transient, n);
    say("transient", transient, n * 4096);
    munmap(transient, n * 4096);
    settle();
    fprintf(out, "t1 %llu\n", now_ns());
    fflush(out);
    settle();
    (void)persistent[0];
    (void)impacting[0];
}

/* Stops (or continues) the recorder, the parent; returns once it is in
 * that state, by /proc/PPID/stat (at most 2 s). */
static void recorder(int sig)
{
    pid_t pp = getppid();
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pp);
    if (kill(pp, sig) != 0) {
        perror("kill");
        exit(1);
    }
    for (int i = 0; i < 2000; i++) {
        int fd = open(path, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        const char *st = strrchr(buf, ')');
        if (!st || (st[2] == 'T') == (sig == SIGSTOP))
            return;
        pause_ms(1);
    }
}

static void late(size_t n)
{
    char *p = fresh(n * 4096);
    p[0] = 1;
    settle();
    recorder(SIGSTOP);
    touch(p, n);
    munmap(p, n * 4096);
    recorder(SIGCONT);
    say("late", p, n * 4096);
    settle();
    settle();
}

static void categories(void)
{
    char *lo = NULL, *hi = NULL;
    for (int i = 0; i < 100; i++) {
        char *b = malloc(1000);
        memset(b, 1, 1000);
        if (!lo || b < lo)
            lo = b;
        if (!hi || b + 1000 > hi)
            hi = b + 1000;
    }
    say("heap", lo, (size_t)(hi - lo));
    char *sh = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        exit(1);
    say("shared", sh, 16 * 4096);
    touch(sh, 16);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) == 0)
        pthread_join(t, NULL);
    pause_ms(150);
}

int main(int argc, char **argv)
{
    if (argc < 3 || !(out = fopen(argv[1], "w"))) {
        fprintf(stderr, "usage: rs_touch OUT anon N|thp|file PATH|fork N|cow N|seed|late N|cats|sleep MS\n");
        return 2;
    }
    const char *mode = argv[2];
    const char *arg = argc > 3 ? argv[3] : "16";
    if (strcmp(mode, "anon") == 0) {
        size_t n = strtoul(arg, NULL, 10);
        char *p = fresh(n * 4096);
        say("anon", p, n * 4096);
        touch(p, n);
        pause_ms(200);
        say("unmap", p, n * 4096);
        munmap(p, n * 4096);
        pause_ms(200);
    } else if (strcmp(mode, "thp") == 0) {
        size_t len = 4u << 20;
        char *raw = mmap(NULL, len * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            return 1;
        char *p = (char *)(((unsigned long)raw + (2u << 20) - 1) & ~((2ul << 20) - 1));
        madvise(p, len, MADV_HUGEPAGE);
        say("thp", p, len);
        p[0] = 1;
        p[2u << 20] = 1;
        pause_ms(200);
    } else if (strcmp(mode, "file") == 0) {
        int fd = open(arg, O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
            return 1;
        size_t len = (size_t)st.st_size & ~4095ul;
        volatile char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            return 1;
        say("file", (void *)p, len);
        unsigned sum = 0;
        for (size_t i = 0; i < len; i += 65536)
            sum += (unsigned char)p[i];
        fprintf(out, "sum %u\n", sum);
        pause_ms(200);
    } else if (strcmp(mode, "fork") == 0) {
        size_t n = strtoul(arg, NULL, 10);
        pid_t pid = fork();
        if (pid == 0) {
            char *p = fresh(n * 4096);
            say("anon", p, n * 4096);
            touch(p, n);
            pause_ms(100);
            _exit(0);
        }
        fprintf(out, "child %d\n", (int)pid);
        fflush(out);
        waitpid(pid, NULL, 0);
        fprintf(out, "exec %d\n", (int)getpid());
        fclose(out);
        execl("/bin/true", "true", (char *)NULL);
        return 1;
    } else if (strcmp(mode, "cow") == 0) {
        size_t n = strtoul(arg, NULL, 10);
        char *p = fresh(n * 4096);
        touch(p, n);
        say("cow", p, n * 4096);
        pause_ms(120); /* the recorder has read the parent's frames */
        pid_t pid = fork();
        if (pid == 0) {
            pause_ms(120); /* the recorder has the child's shared pages */
            for (size_t i = 0; i < n; i++)
                p[i * 4096] = 2;
            pause_ms(120);
            _exit(0);
        }
        fprintf(out, "child %d\n", (int)pid);
        fflush(out);
        waitpid(pid, NULL, 0);
    } else if (strcmp(mode, "seed") == 0) {
        seed_example();
    } else if (strcmp(mode, "late") == 0) {
        late(strtoul(arg, NULL, 10));
    } else if (strcmp(mode, "cats") == 0) {
        categories();
    } else if (strcmp(mode, "sleep") == 0) {
        char *p = fresh(16 * 4096);
        touch(p, 16);
        say("anon", p, 16 * 4096);
        fprintf(out, "ready\n");
        fflush(out);
        pause_ms(atoi(arg));
    } else {
        return 2;
    }
    fclose(out);
    return 0;
}
