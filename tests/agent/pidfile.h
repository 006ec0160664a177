/* pidfile.h — how a test program tells its script it is ready: it writes
 * its pid to a file, with open/write (no stdio buffer to flush) into a
 * temporary name renamed into place, so the script never reads a partial
 * one. Exits 98 if it cannot. */
#ifndef MT_TEST_PIDFILE_H
#define MT_TEST_PIDFILE_H

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

static inline void pidfile_write(const char *path)
{
    char tmp[PATH_MAX + 8], pid[32];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        _exit(98);
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (write(fd, pid, (size_t)n) != n)
        _exit(98);
    close(fd);
    rename(tmp, path);
}

#endif
