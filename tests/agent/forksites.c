/* forksites.c — a fork while other threads are inside their allocation
 * hooks, in detail mode. Four threads churn malloc/realloc/free at three
 * call sites; the main thread forks 40 children one after another, each
 * of which exits at once (its report: inherited blocks, no allocation of
 * its own). In every child report the sites must add up to the totals
 * (test_detail.sh checks): a child forked between another thread's count
 * of a block and its site's count had a total its sites did not match.
 *   forksites CHILDREN */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic int stop;

static __attribute__((noinline)) void *site_a(size_t n)
{
    return malloc(n);
}
static __attribute__((noinline)) void *site_b(size_t n)
{
    return calloc(1, n);
}
static __attribute__((noinline)) void *site_c(void *p, size_t n)
{
    return realloc(p, n);
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[64] = {0};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        unsigned i = (unsigned)rand_r(&seed) % 64, r = (unsigned)rand_r(&seed);
        size_t n = 16 + r % 4000;
        if (held[i] && r % 3 == 0) {
            void *q = site_c(held[i], n);
            if (q)
                held[i] = q;
        } else {
            free(held[i]);
            held[i] = r % 2 ? site_a(n) : site_b(n);
        }
    }
    for (int i = 0; i < 64; i++)
        free(held[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    int children = argc > 1 ? atoi(argv[1]) : 40;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    usleep(20000);
    int bad = 0;
    for (int c = 0; c < children; c++) {
        pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0)
            exit(0); /* the child's report at exit: what it inherited */
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return bad ? 1 : 0;
}
