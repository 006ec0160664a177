/* vmrace: the agent's VM lock under hostile timing (regressions of a review).
 *   exit     a timer's signal handler calls _exit(7) while the main thread
 *            loops mmap/munmap (the exit report must not wait for the lock
 *            the interrupted thread holds)
 *   fork     _Fork (no fork handlers) while another thread loops
 *            mmap/munmap; each child maps a page: prints "stuck N" for the
 *            children that hung (killed by their alarm)
 *   stacks   threads with guard size 0 come and go, then a 60 MiB malloc;
 *            prints "big LEN" so the report's heap can be checked */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrail.h"

static void on_alarm(int sig)
{
    (void)sig;
    _exit(7);
}

static void *spin(void *arg)
{
    for (;;) {
        void *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, 1 << 16);
    }
    return arg;
}

static void *idle(void *arg)
{
    return arg;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (strcmp(argv[1], "exit") == 0) {
        signal(SIGALRM, on_alarm);
        struct itimerval it = {{0, 0}, {0, 20000}};
        setitimer(ITIMER_REAL, &it, NULL);
        spin(NULL);
    } else if (strcmp(argv[1], "fork") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, spin, NULL);
        int stuck = 0;
        for (int i = 0; i < 100; i++) {
            pid_t c = _Fork();
            if (c == 0) {
                alarm(2);
                mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                _exit(0);
            }
            int st;
            waitpid(c, &st, 0);
            stuck += WIFSIGNALED(st);
        }
        printf("stuck %d\n", stuck);
        return 0;
    } else if (strcmp(argv[1], "stacks") == 0 && argc == 3) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 64 << 20);
        pthread_attr_setguardsize(&a, 0);
        for (int i = 0; i < 20; i++) {
            pthread_t t;
            pthread_create(&t, &a, idle, NULL);
            pthread_join(t, NULL);
        }
        size_t len = 60 << 20;
        char *big = malloc(len);
        memset(big, 1, len);
        printf("big %zu\n", len);
        return mt_report_write(argv[2]) != 0;
    }
    return 2;
}
