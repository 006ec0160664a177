/* exit_paths.c — ways out of a process the report must survive.
 *   altstack: a signal handler on an 8 KiB alternate stack (from malloc)
 *             calls _exit(3): the report is written without overflowing it.
 *   compat:   glibc behaviours the agent must keep, tracked or not:
 *             aligned_alloc with small and non-power-of-two alignments,
 *             posix_memalign leaving *out alone on failure, errno at main.
 * Usage: exit_paths altstack|compat */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

static int errno_at_start;
__attribute__((constructor)) static void early(void)
{
    errno_at_start = errno;
}

static void handler(int sig)
{
    (void)sig;
    _exit(3);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    if (strcmp(argv[1], "altstack") == 0) {
        size_t sz = 8192;
        stack_t st = {.ss_sp = malloc(sz), .ss_size = sz};
        sigaltstack(&st, NULL);
        struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_ONSTACK};
        sigaction(SIGUSR1, &sa, NULL);
        raise(SIGUSR1);
        return 0; /* not reached */
    }
    if (strcmp(argv[1], "compat") != 0)
        return 2;
    EXPECT(errno_at_start == 0, "errno at start-up is %d", errno_at_start);
    for (size_t al = 1; al <= 8; al *= 2) {
        void *p = aligned_alloc(al, 16);
        EXPECT(p != NULL, "aligned_alloc(%zu, 16) failed: %s", al, strerror(errno));
        free(p);
    }
    void *odd = aligned_alloc(24, 100); /* glibc 2.36 rounds the alignment up to 32 */
    EXPECT(odd && ((uintptr_t)odd & 31) == 0, "aligned_alloc(24, 100) = %p", odd);
    free(odd);
    void *keep = &keep;
    static volatile size_t huge = SIZE_MAX / 2;
    EXPECT(posix_memalign(&keep, 8, huge) == ENOMEM && keep == &keep,
           "posix_memalign(8) changed *out on failure");
    EXPECT(posix_memalign(&keep, 64, huge) == ENOMEM && keep == &keep,
           "posix_memalign(64) changed *out on failure");
    dprintf(1, "%s compat: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures;
}
