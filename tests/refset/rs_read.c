/* rs_read.c — prints every record of a reference-set recording, read with
 * the reader (refset_file.h), one line each in the recorder's dump format
 * (MEMTRAIL_REFSET_DUMP), times relative to the start; then the END
 * statistics. Exit 1 when the file is not whole. */
#include "refset/refset_file.h"

#include <inttypes.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    char err[256];
    mt_rs_reader *r;
    if (argc != 2 || mt_rs_reader_open(argv[1], &r, err, sizeof err) < 0) {
        fprintf(stderr, "rs_read: %s\n", argc == 2 ? err : "usage: rs_read FILE");
        return 1;
    }
    const mt_rs_header *h = mt_rs_reader_header(r);
    printf("header start_ns=%" PRIu64 " page_size=%u flags=0x%x\n", h->start_ns, h->page_size, h->flags);
    mt_rs_event e;
    int rc;
    while ((rc = mt_rs_read(r, &e)) == 1) {
        printf("rs type=%u t=%" PRIu64 " pid=%u tid=%u ppid=%u cat=%u reason=%u flags=0x%x addr=0x%" PRIx64
               " npages=%" PRIu64 " len=%" PRIu64 " pfn=%" PRIu64 " pgoff=%" PRIu64 " ino=%" PRIu64
               " stack=%u alloc_stack=%u nframes=%u count=%" PRIu64 " name=%.*s value=%s",
               e.type, e.time_ns, e.pid, e.tid, e.ppid, e.category, e.reason, e.flags, e.addr, e.npages,
               e.len, e.pfn, e.pgoff, e.ino, e.stack, e.alloc_stack, e.nframes, e.count,
               e.name ? (int)e.name_len : 1, e.name ? e.name : "-", e.value ? e.value : "-");
        if (e.type == RS_EV_STACK) {
            fputs(" frames=", stdout);
            for (uint32_t i = 0; i < e.nframes; i++)
                printf("%s%" PRIx64, i ? "," : "", e.frames[i]);
        }
        putchar('\n');
    }
    if (rc < 0) {
        fprintf(stderr, "rs_read: %s\n", mt_rs_reader_error(r));
        mt_rs_reader_close(r);
        return 1;
    }
    const char *const *names;
    const uint64_t *values;
    int n = mt_rs_reader_stats(r, &names, &values);
    for (int i = 0; i < n; i++)
        printf("stat %s=%" PRIu64 "\n", names[i], values[i]);
    int whole = mt_rs_reader_complete(r);
    mt_rs_reader_close(r);
    return whole ? 0 : 1;
}
