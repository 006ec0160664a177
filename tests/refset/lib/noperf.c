/* noperf.c — a preload for tests: perf_event_open fails with EACCES, as
 * on a kernel whose perf_event_paranoid lets this user sample nothing
 * (Debian's 3, or a container's seccomp policy), so `memtrail refset
 * record`'s refusal can be tested as root. Every other system call goes
 * to libc's syscall. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

long syscall(long nr, ...);

long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_perf_event_open) {
        errno = EACCES;
        return -1;
    }
    long (*real)(long, ...) = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
