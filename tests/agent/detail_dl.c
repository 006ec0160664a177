/* detail_dl.c — unwind rules, and the sites made through a library, must
 * not outlive the code they describe. libdl_a.so's f is called (1001
 * bytes, kept) and unloaded; after N more dlopen/dlclose cycles of
 * libdl_c.so, libdl_b.so is loaded (at the same address, the same code
 * offsets, a larger frame) and its f is called (2002 bytes) from the same
 * line of main through call(), with stack residue planted where a stale
 * rule would look: both stacks have the same return addresses.
 * "alt": N loads of libdl_a.so and libdl_b.so in turn, each f called and
 * its block kept, each library unloaded after; "swap": the same through
 * one path, DIR/plugin.so, linked to each in turn (DIR must be writable).
 * "threads", "records", "forks": see threads(), records() and forks() below.
 * Usage: detail_dl DIR N [alt|swap|threads|records|forks exec|forks exit]
 * (DIR holds the libraries) */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void *(*alloc_fn)(size_t);
void plant(uintptr_t v);
void *call(alloc_fn f, size_t n, uintptr_t v);

__attribute__((noinline)) void plant(uintptr_t v)
{
    uintptr_t a[64];
    for (int i = 0; i < 64; i++)
        a[i] = v; /* the stack f's frame will lie on */
    __asm__ volatile("" : : "r"(a) : "memory");
}

__attribute__((noinline)) void *call(alloc_fn f, size_t n, uintptr_t v)
{
    plant(v); /* always: one path through call, the same return addresses */
    void *p = f(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *open_lib(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "detail_dl: %s\n", dlerror());
        exit(2);
    }
    return h;
}

static const char *const names[2] = {"libdl_a.so", "libdl_b.so"};
static void *handles[2];

/* Library i loaded (after `cycles` cycles of libdl_c.so for the second):
 * its f, and in *v what call() plants (the second's g + 1). */
__attribute__((noinline)) static alloc_fn prepare(const char *dir, int i, int cycles, uintptr_t *v)
{
    if (i == 1)
        for (int c = 0; c < cycles; c++)
            dlclose(open_lib(dir, "libdl_c.so"));
    handles[i] = open_lib(dir, names[i]);
    *v = i ? (uintptr_t)dlsym(handles[i], "g") + 1 : 0;
    return (alloc_fn)dlsym(handles[i], "f");
}

__attribute__((noinline)) static void finish(int i)
{
    if (i == 0)
        dlclose(handles[0]);
}

/* "threads": two threads load, call and unload libdl_a.so and libdl_b.so
 * N times each while a third loads and unloads libdl_c.so, so that
 * unloads, reloads and new sites race. */
struct churn {
    const char *dir;
    int lib, loads;
    void *(*fn)(void *);
};

static void *churn_f(void *arg)
{
    const struct churn *c = arg;
    for (int i = 0; i < c->loads; i++) {
        void *h = open_lib(c->dir, names[c->lib]);
        call((alloc_fn)dlsym(h, "f"), 1001 * (size_t)(c->lib + 1), 0);
        dlclose(h);
    }
    return NULL;
}

static void *churn_c(void *arg)
{
    const struct churn *c = arg;
    for (int i = 0; i < c->loads; i++)
        dlclose(open_lib(c->dir, "libdl_c.so"));
    return NULL;
}

static int threads(const char *dir, int loads)
{
    struct churn c[3] = {{dir, 0, loads, churn_f}, {dir, 1, loads, churn_f}, {dir, 0, loads, churn_c}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, c[i].fn, &c[i]) != 0)
            return 2;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("%d loads each\n", loads);
    return 0;
}

/* "records": 2^N distinct stacks through libdl_a.so's f (a binary
 * recursion N deep: more than the agent can record the frames of at
 * depth 64 for N = 18), each block freed; unloaded, loaded again, and the
 * first 100 stacks walked again. */
static void rec(alloc_fn f, unsigned bits, int left);
__attribute__((noinline)) static void rec_a(alloc_fn f, unsigned bits, int left)
{
    rec(f, bits, left);
    __asm__ volatile("nop" ::: "memory"); /* no tail call: a frame of its own */
}

__attribute__((noinline)) static void rec_b(alloc_fn f, unsigned bits, int left)
{
    rec(f, bits, left);
    __asm__ volatile("nop; nop" ::: "memory");
}

__attribute__((noinline)) static void rec(alloc_fn f, unsigned bits, int left)
{
    if (left == 0)
        free(call(f, 16, 0));
    else if (bits & 1)
        rec_a(f, bits >> 1, left - 1);
    else
        rec_b(f, bits >> 1, left - 1);
    __asm__ volatile("" ::: "memory");
}

static int records(const char *dir, int levels)
{
    for (int round = 0; round < 2; round++) {
        void *h = open_lib(dir, names[0]);
        alloc_fn f = (alloc_fn)dlsym(h, "f");
        unsigned n = round == 0 ? 1u << levels : 100;
        for (unsigned i = 0; i < n; i++)
            rec(f, i, levels);
        dlclose(h);
    }
    printf("%u stacks\n", 1u << levels);
    return 0;
}

/* "forks": N children forked one after another while a thread loads,
 * calls and unloads libdl_a.so; each child allocates, then execs
 * /bin/true ("exec") or calls _exit ("exit"), as a server spawning
 * helpers while it unloads a plugin does. A child stuck more than about
 * 10 s is killed. Prints how many children did not exit 0. */
static volatile int forks_done;

static void *churn_forks(void *arg)
{
    const char *dir = arg;
    while (!forks_done) {
        void *h = open_lib(dir, names[0]);
        free(call((alloc_fn)dlsym(h, "f"), 1001, 0));
        dlclose(h);
    }
    return NULL;
}

static int forks(const char *dir, int n, const char *how)
{
    pthread_t t;
    if (pthread_create(&t, NULL, churn_forks, (void *)dir) != 0)
        return 2;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            free(malloc(64));
            if (strcmp(how, "exec") == 0)
                execl("/bin/true", "true", (char *)NULL);
            _exit(0);
        }
        int st = 1, ms = 0;
        pid_t got = 0;
        while (pid > 0 && (got = waitpid(pid, &st, WNOHANG)) == 0 && ms < 10000) {
            usleep(1000);
            ms++;
        }
        if (pid > 0 && got == 0) { /* stuck: killed (it may block every other signal) */
            kill(pid, SIGKILL);
            got = waitpid(pid, &st, 0);
        }
        if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    }
    forks_done = 1;
    pthread_join(t, NULL);
    printf("%d children, %d did not exit 0\n", n, failed);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[3], "forks") == 0)
        return forks(argv[1], atoi(argv[2]), argv[4]);
    if (argc == 4 && strcmp(argv[3], "threads") == 0)
        return threads(argv[1], atoi(argv[2]));
    if (argc == 4 && strcmp(argv[3], "records") == 0)
        return records(argv[1], atoi(argv[2]));
    int swap = argc == 4 && strcmp(argv[3], "swap") == 0;
    if (argc == 4 && (strcmp(argv[3], "alt") == 0 || swap)) {
        /* a plugin host: libdl_a.so and libdl_b.so in turn, N loads in
         * all, each at the same place; each f's block kept. "swap": both
         * loaded by one path, DIR/plugin.so, a link to one then the other
         * (a plugin rebuilt and reloaded) */
        int loads = atoi(argv[2]);
        volatile int again = 1;
        for (int i = 0; i < loads && again; i++) {
            char link[4096];
            snprintf(link, sizeof link, "%s/plugin.so", argv[1]);
            if (swap && ((unlink(link) != 0 && errno != ENOENT) || symlink(names[i % 2], link) != 0)) {
                perror("detail_dl: plugin.so");
                return 2;
            }
            void *h = open_lib(argv[1], swap ? "plugin.so" : names[i % 2]);
            call((alloc_fn)dlsym(h, "f"), 1001 * (size_t)(i % 2 + 1), 0);
            dlclose(h);
        }
        printf("%d loads\n", loads);
        return 0;
    }
    if (argc != 3)
        return 2;
    int cycles = atoi(argv[2]);
    volatile int libs = 2; /* a loop the compiler keeps: one call site in main for both */
    void *p[2];
    for (int i = 0; i < libs; i++) {
        uintptr_t v;
        alloc_fn f = prepare(argv[1], i, cycles, &v);
        p[i] = call(f, 1001 * (size_t)(i + 1), v);
        finish(i);
    }
    printf("%p %p\n", p[0], p[1]);
    return 0;
}
