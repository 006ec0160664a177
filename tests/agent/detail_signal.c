/* detail_signal.c — allocations where the stack is not the thread's own:
 *   alt N     a SIGUSR1 handler on an N-byte alternate signal stack
 *             allocates 40 bytes (on_alt), kept
 *   altexit N a SIGTERM handler on an N-byte alternate stack calls _exit(3)
 *   coro      a makecontext coroutine allocates 50 bytes (in_coro), kept
 * Prints its ledger as tests/agent/detail.c does. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

static void *kept[4];
static ucontext_t main_ctx, coro_ctx;

static void on_alt(int sig)
{
    (void)sig;
    kept[0] = malloc(40);
    __asm__ volatile("" ::: "memory");
}

static void on_term(int sig)
{
    (void)sig;
    _exit(3);
}

static void in_coro(void)
{
    kept[1] = malloc(50);
    __asm__ volatile("" ::: "memory");
    swapcontext(&coro_ctx, &main_ctx);
}

static void alt_stack(size_t size)
{
    /* a guard page below it, as a stack overflow would find */
    char *m = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        exit(2);
    mprotect(m, 4096, PROT_NONE);
    stack_t ss = {.ss_sp = m + 4096, .ss_size = size};
    sigaltstack(&ss, NULL);
}

static void handle(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = SA_ONSTACK;
    sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(argv[1], "alt") == 0 || strcmp(argv[1], "altexit") == 0) {
        alt_stack(argc > 2 ? strtoul(argv[2], NULL, 0) : 8192);
        int term = strcmp(argv[1], "altexit") == 0;
        handle(term ? SIGTERM : SIGUSR1, term ? on_term : on_alt);
        free(malloc(10));
        raise(term ? SIGTERM : SIGUSR1);
        printf("fn on_alt live_bytes 40 live_count 1 allocs 1\n");
    } else if (strcmp(argv[1], "coro") == 0) {
        static char stack[65536];
        getcontext(&coro_ctx);
        coro_ctx.uc_stack.ss_sp = stack;
        coro_ctx.uc_stack.ss_size = sizeof stack;
        coro_ctx.uc_link = &main_ctx;
        makecontext(&coro_ctx, in_coro, 0);
        swapcontext(&main_ctx, &coro_ctx);
        printf("fn in_coro live_bytes 50 live_count 1 allocs 1\n");
    }
    return 0;
}
