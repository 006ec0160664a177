/* sigalloc.c — a hostile program for the agent: malloc and free inside a
 * SIGALRM handler fired every 1 ms (setitimer) while the main loop
 * allocates for about 0.3 s. To stay well-defined the handler allocates
 * only when a flag says the main thread is not inside the malloc family;
 * so any deadlock or corruption is the tracker's, in its hooks' re-entry
 * from a signal handler (or a handler run on one of its own threads). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t in_malloc;
static volatile sig_atomic_t handler_allocs;
static volatile sig_atomic_t ticks;
static void *volatile handler_held;

static void on_alarm(int sig)
{
    (void)sig;
    ticks++;
    if (in_malloc)
        return;
    char *p = malloc(48 + (size_t)(ticks % 200));
    if (p) {
        p[0] = 1;
        /* keep one block across ticks: frees of blocks from other ticks */
        void *old = handler_held;
        handler_held = p;
        free(old);
        handler_allocs++;
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return 3;
    struct itimerval it = {{0, 1000}, {0, 1000}};
    if (setitimer(ITIMER_REAL, &it, NULL) != 0)
        return 4;

    void *ring[128] = {0};
    unsigned i = 0;
    size_t loops = 0;
    double end = now() + 0.3;
    while (now() < end) {
        unsigned slot = i++ % 128;
        in_malloc = 1;
        free(ring[slot]);
        ring[slot] = malloc(1 + (i * 2654435761u) % 4000);
        if (i % 5 == 0)
            ring[slot] = realloc(ring[slot], 1 + i % 10000);
        in_malloc = 0;
        loops++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    in_malloc = 1;
    for (int k = 0; k < 128; k++)
        free(ring[k]);
    free(handler_held);
    in_malloc = 0;
    printf("main loop ran: %d\n", loops > 0);
    printf("handler allocated: %d\n", handler_allocs > 0);
    return 0;
}
