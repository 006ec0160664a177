/* procfs.c — see procfs.h. */
#include "common/procfs.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/out.h"

uint64_t mt_proc_stat_field(int pid, int n)
{
    char path[64], buf[1024];
    mt_out o;
    mt_out_init(&o, path, sizeof path, -1);
    mt_out_str(&o, "/proc/");
    if (pid)
        mt_out_i64(&o, pid);
    else
        mt_out_str(&o, "self");
    mt_out_str(&o, "/stat");
    int fd = open(mt_out_cstr(&o), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = '\0';
    const char *q = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    for (int field = 2; q && field < n; field++)
        q = strchr(q + 1, ' ');
    return q ? strtoull(q + 1, NULL, 10) : 0;
}
