/* fuzz_read.c — the libFuzzer target of the trace reader: any bytes, read
 * from memory to the end (every event, every definition the events name,
 * modules, categories, meta, statistics, the index); one input in five as
 * a stream (a pipe's way: once, front to back, no index). It must never
 * crash, hang or leak. `make fuzz` builds it as build/fuzz/fuzz_read (clang,
 * -fsanitize=fuzzer,address,undefined); tests/trace/test_corpus.c replays
 * tests/trace/corpus/ through it under gcc's ASan+UBSan in `make check`.
 *
 * Fuzzing: make fuzz trace-corpus; mkdir -p /tmp/fz; cp tests/trace/corpus/\* /tmp/fz;
 *   build/fuzz/fuzz_read -max_len=65536 -max_total_time=600 /tmp/fz
 * then keep what it found: a crash-* input (fixed) as tests/trace/corpus/crash-WHAT.mtt,
 * and the new coverage: build/fuzz/fuzz_read -merge=1 NEWDIR /tmp/fz, copied in as fuzz-*. */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace/trace_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mt_trace_reader *r;
    char err[MT_TRACE_ERR_MAX];
    /* The prefetch thread for some inputs, and the CRC checks skipped for
     * most (so mutations reach the bodies), decided by the input itself. */
    unsigned flags = (size % 7 == 3 ? MT_TRACE_PREFETCH : 0) | (size % 13 == 5 ? 0 : MT_TRACE_NO_CRC);
    if (size % 5 == 1) {
        /* As a stream (a pipe): read once, front to back, through a memfd,
         * the first bytes handed over as a caller that sniffed them would. */
        int fd = memfd_create("fuzz", MFD_CLOEXEC);
        if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
            if (fd >= 0)
                close(fd);
            return 0;
        }
        size_t nhead = size < 8 ? size : 8;
        unsigned char head[8];
        if (read(fd, head, nhead) != (ssize_t)nhead) {
            close(fd);
            return 0;
        }
        if (mt_trace_open_fd(fd, head, nhead, "fuzz", flags | MT_TRACE_STREAM, &r, err, sizeof err) < 0)
            return 0;
    } else if (mt_trace_open_mem(data, size, "fuzz", flags, &r, err, sizeof err) < 0) {
        return 0;
    }
    mt_trace_event ev;
    uint64_t sink = 0;
    while (mt_trace_next(r, &ev) == 1) {
        sink += ev.time_ns + ev.size + ev.id + ev.thread;
        const mt_trace_stack *s = ev.stack ? mt_trace_stack_get(r, ev.stack) : NULL;
        if (s)
            for (uint32_t i = 0; i < s->nframes; i++)
                sink += s->frames[i];
        const char *c = mt_trace_category_name(r, ev.category);
        if (c)
            sink += (unsigned char)c[0];
    }
    const char *e = mt_trace_error(r);
    if (e)
        sink += (unsigned char)e[0];
    for (size_t i = 0; i < mt_trace_module_count(r); i++) {
        const mt_trace_module *m = mt_trace_module_get(r, i);
        sink += m->start + m->end + (unsigned char)m->path[0];
        for (unsigned k = 0; k < m->build_id_len; k++)
            sink += m->build_id[k];
    }
    size_t ni = mt_trace_index_count(r);
    for (size_t i = 0; i < ni; i++)
        sink += mt_trace_index_get(r, i)->offset;
    /* Seek to an entry the input picks, and read on from there. */
    if (ni && mt_trace_seek_chunk(r, size % ni) == 0)
        while (mt_trace_next(r, &ev) == 1)
            sink += ev.id;
    const char *v = mt_trace_meta(r, "exe");
    if (v)
        sink += (unsigned char)v[0];
    int found;
    sink += mt_trace_stat(r, "events_lost", &found) + (uint64_t)mt_trace_complete(r) + mt_trace_offset(r) +
            mt_trace_chunks_read(r) + mt_trace_chunks_total(r);
    mt_trace_close(r);
    return (int)(sink & 0);
}
