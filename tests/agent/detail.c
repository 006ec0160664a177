/* detail.c — allocations from known functions, for detail mode's tests.
 * Prints its ledger, one line per function: "fn NAME live_bytes N
 * live_count N allocs N [peak_bytes N allocated_bytes N]", which the report's sites must match when
 * attributed by their innermost frame (tests/agent/test_detail.sh).
 *
 * Usage: detail [threads N] [recurse DEPTH] — the functions:
 *   from_static   a static function, 10 blocks of 1000 bytes kept
 *   inline_host   a function with an always-inlined helper that allocates
 *                 (so the frame lies in inline_host's code): 7 x 300 kept
 *   detail_lib_alloc  in libdetail_lib.so: 5 x 4096 kept
 *   churn         100 blocks of 64 bytes, all freed
 *   grower        a block made by malloc here and grown by realloc in
 *                 regrow: it moves to regrow's site (1 block of 5000)
 *   grow_loop     one block grown by realloc at one call site, 100 to
 *                 1000 bytes in 10 steps: 1 alloc, 9 reallocs, 1000 bytes
 *                 allocated there (the first size, then each growth)
 *   thread_work   each of N threads: 50 x 128 kept
 *   recurse       DEPTH nested calls, then one block of 777 kept
 *   on_signal     (with "signal 1") a SIGUSR1 handler, run by raise():
 *                 one block of 333 kept — its stack crosses the kernel's
 *                 signal frame */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *detail_lib_alloc(size_t n);
void inline_host(void);
void churn(void);
void *grower(void);
void *regrow(void *p);
int recurse(int n);
void grow_loop(void);

#define BARRIER() __asm__ volatile("" ::: "memory")
static void *keep[4096];
static int nkeep;
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;

static void hold(void *p)
{
    pthread_mutex_lock(&keep_lock);
    keep[nkeep++] = p;
    pthread_mutex_unlock(&keep_lock);
}

__attribute__((noinline)) static void from_static(void)
{
    for (int i = 0; i < 10; i++)
        hold(malloc(1000));
    BARRIER();
}

static inline __attribute__((always_inline)) void *inlined_alloc(size_t n)
{
    return calloc(1, n);
}

__attribute__((noinline)) void inline_host(void)
{
    for (int i = 0; i < 7; i++)
        hold(inlined_alloc(300));
    BARRIER();
}

__attribute__((noinline)) void churn(void)
{
    for (int i = 0; i < 100; i++) {
        void *p = malloc(64);
        BARRIER();
        free(p);
    }
    BARRIER();
}

__attribute__((noinline)) void *grower(void)
{
    void *p = malloc(100);
    BARRIER();
    return p;
}

__attribute__((noinline)) void *regrow(void *p)
{
    p = realloc(p, 5000);
    BARRIER();
    return p;
}

__attribute__((noinline)) void grow_loop(void)
{
    void *p = NULL;
    for (int i = 1; i <= 10; i++) {
        p = realloc(p, (size_t)i * 100);
        BARRIER();
    }
    hold(p);
}

__attribute__((noinline)) static void thread_work(void)
{
    for (int i = 0; i < 50; i++)
        hold(malloc(128));
    BARRIER();
}

static void *thread_main(void *arg)
{
    (void)arg;
    thread_work();
    return NULL;
}

__attribute__((noinline)) int recurse(int n)
{
    if (n <= 1) {
        hold(malloc(777));
        BARRIER();
        return 1;
    }
    int r = recurse(n - 1) + 1;
    BARRIER();
    return r;
}

static void on_signal(int sig)
{
    (void)sig;
    keep[nkeep++] = malloc(333); /* raise() runs it here, synchronously */
    BARRIER();
}

int main(int argc, char **argv)
{
    int threads = 0, depth = 0, sig = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "threads") == 0)
            threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "recurse") == 0)
            depth = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "signal") == 0)
            sig = atoi(argv[i + 1]);
    }
    setvbuf(stdout, NULL, _IONBF, 0); /* stdio's buffer would be one more site */
    from_static();
    inline_host();
    for (int i = 0; i < 5; i++)
        hold(detail_lib_alloc(4096));
    churn();
    hold(regrow(grower()));
    grow_loop();
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    if (depth > 0)
        recurse(depth);
    if (sig) {
        signal(SIGUSR1, on_signal);
        raise(SIGUSR1);
    }
    printf(
        "fn from_static live_bytes 10000 live_count 10 allocs 10 peak_bytes 10000 allocated_bytes 10000\n");
    printf("fn inline_host live_bytes 2100 live_count 7 allocs 7 peak_bytes 2100 allocated_bytes 2100\n");
    printf("fn detail_lib_alloc live_bytes 20480 live_count 5 allocs 5 peak_bytes 20480 allocated_bytes "
           "20480\n");
    printf("fn churn live_bytes 0 live_count 0 allocs 100 peak_bytes 64 allocated_bytes 6400\n");
    printf("fn grower live_bytes 0 live_count 0 allocs 1 peak_bytes 100 allocated_bytes 100\n");
    printf("fn regrow live_bytes 5000 live_count 1 allocs 1 peak_bytes 5000 allocated_bytes 5000\n");
    printf("fn grow_loop live_bytes 1000 live_count 1 allocs 1 peak_bytes 1000 allocated_bytes 1000\n");
    printf("fn thread_work live_bytes %d live_count %d allocs %d\n", threads * 50 * 128, threads * 50,
           threads * 50);
    if (depth > 0)
        printf("fn recurse live_bytes 777 live_count 1 allocs 1\n");
    if (sig)
        printf("fn on_signal live_bytes 333 live_count 1 allocs 1\n");
    return 0;
}
