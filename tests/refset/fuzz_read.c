/* fuzz_read.c — the libFuzzer target of the reference-set recording's
 * reader (src/refset/refset_read.c): any bytes, read to the end (every
 * record, the error, the statistics). Most inputs skip the CRC checks so
 * mutations reach the records; one in five goes through a file (the
 * pread path) instead of memory. It must never crash, hang or leak, and
 * what it gives must keep the reader's promises (FUZZ_CHECK). `make
 * fuzz-build` builds it as build/fuzz/fuzz_refset; tests/refset/test_corpus.c
 * replays tests/refset/corpus/ through it under gcc's ASan+UBSan.
 *
 * Fuzzing: FUZZ_ONLY=fuzz_refset FUZZ_SECONDS=120 bash tests/fuzz.sh (seeds:
 * make refset-corpus). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "refset/refset_file.h"
#include "refset/refset_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int open_input(const uint8_t *data, size_t size, mt_rs_reader **r, char *err, size_t errlen)
{
    unsigned flags = size % 11 == 4 ? 0 : RS_READ_NO_CRC;
    if (size % 5 != 1)
        return mt_rs_reader_open_mem(data, size, flags, r, err, errlen);
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int rc = mt_rs_reader_open(path, r, err, errlen);
    close(fd);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mt_rs_reader *r;
    char err[256];
    if (open_input(data, size, &r, err, sizeof err) < 0)
        return 0;
    mt_rs_event ev;
    uint64_t sink = 0;
    int rc;
    while ((rc = mt_rs_read(r, &ev)) == 1) {
        FUZZ_CHECK(ev.type >= RS_EV_PROCESS && ev.type <= RS_EV_LOST);
        if (ev.type == RS_EV_REF || ev.type == RS_EV_RELEASE)
            FUZZ_CHECK(ev.npages >= 1 && ev.npages <= RS_MAX_NPAGES);
        if (ev.type == RS_EV_REF || ev.type == RS_EV_MAP)
            FUZZ_CHECK(ev.category < RS_NCATEGORIES);
        FUZZ_CHECK(ev.nframes <= TRACE_MAX_FRAMES && ev.name_len <= TRACE_MAX_STRING);
        sink += ev.time_ns + ev.addr + ev.npages + ev.pfn + ev.pid + ev.tid;
        for (uint32_t i = 0; i < ev.nframes; i++)
            sink += ev.frames[i];
        if (ev.name)
            FUZZ_CHECK(strlen(ev.name) <= ev.name_len);
        if (ev.value)
            sink += strlen(ev.value);
    }
    FUZZ_CHECK(rc == 0 || rc == -1);
    FUZZ_CHECK((rc == 0) == (mt_rs_reader_complete(r) != 0));
    FUZZ_CHECK((rc == -1) == (mt_rs_reader_error(r) != NULL));
    FUZZ_CHECK(mt_rs_read(r, &ev) == rc); /* the end stays the end */
    FUZZ_CHECK(mt_rs_reader_offset(r) <= size);
    const char *const *names;
    const uint64_t *values;
    int n = mt_rs_reader_stats(r, &names, &values);
    for (int i = 0; i < n; i++)
        sink += strlen(names[i]) + values[i];
    sink += mt_rs_reader_header(r)->page_size + mt_rs_reader_chunks(r);
    mt_rs_reader_close(r);
    return (int)(sink & 0);
}
