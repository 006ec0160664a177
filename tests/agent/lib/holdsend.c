/* holdsend.c — holds one answer of the agent's control socket, so that a
 * test can make the program end while the answer is under way
 * (tests/agent/test_ondemand.sh: a `stop` racing the program's exit).
 * Preloaded after the agent (LD_PRELOAD=libmemtrail.so:libholdsend.so),
 * its send() is the one the agent's calls reach. The first send whose
 * data begins with $HOLDSEND_MATCH is held: $HOLDSEND_TOUCH is created
 * (the test's cue), then the send waits until the file $HOLDSEND_UNTIL_GONE
 * is gone (20 s at most: the agent removes its socket file as the process
 * leaves), then $HOLDSEND_MS milliseconds more (the exit path's time to
 * get ahead), and goes on. Every other send goes straight through. Raw
 * system calls only: it runs on the agent's thread, inside the agent. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int held;

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_nanosleep, &ts, NULL);
}

static int exists(const char *path)
{
    struct stat st;
    return syscall(SYS_newfstatat, AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void hold(void)
{
    const char *touch = getenv("HOLDSEND_TOUCH");
    if (touch) {
        long fd = syscall(SYS_openat, AT_FDCWD, touch, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            syscall(SYS_close, fd);
    }
    const char *gone = getenv("HOLDSEND_UNTIL_GONE");
    for (int i = 0; gone && exists(gone) && i < 2000; i++)
        nap_ms(10);
    const char *ms = getenv("HOLDSEND_MS");
    nap_ms(ms ? atol(ms) : 0);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    const char *match = getenv("HOLDSEND_MATCH");
    size_t m = match ? strlen(match) : 0;
    if (m && n >= m && memcmp(buf, match, m) == 0 && !__atomic_exchange_n(&held, 1, __ATOMIC_SEQ_CST))
        hold();
    return syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
}
