/* record_stub.c — stand-ins for the recording file's writer until
 * refset_file.c lands: weak, so the real writer replaces them. They write
 * nothing (MEMTRAIL_REFSET_DUMP=1 shows the records on stderr). */
#include "refset/refset_file.h"

#include <stdlib.h>
#include <unistd.h>

struct mt_rs_writer {
    int fd;
};

__attribute__((weak)) mt_rs_writer *mt_rs_writer_open(int fd, const mt_rs_header *h, int *err)
{
    (void)h;
    mt_rs_writer *w = calloc(1, sizeof *w);
    if (!w) {
        *err = -12;
        return NULL;
    }
    w->fd = fd;
    return w;
}
__attribute__((weak)) int mt_rs_write(mt_rs_writer *w, const mt_rs_event *ev)
{
    (void)w, (void)ev;
    return 0;
}
__attribute__((weak)) int mt_rs_write_flush(mt_rs_writer *w)
{
    (void)w;
    return 0;
}
__attribute__((weak)) int mt_rs_write_finish(mt_rs_writer *w, const char *const *stat_names,
                                             const uint64_t *stat_values, int nstats)
{
    (void)stat_names, (void)stat_values, (void)nstats;
    close(w->fd);
    free(w);
    return 0;
}
__attribute__((weak)) uint64_t mt_rs_write_bytes(const mt_rs_writer *w)
{
    (void)w;
    return 0;
}
