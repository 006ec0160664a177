/* refset_file.h — the reference-set recording file (docs/refset-format.md):
 * the trace format's design (a header, independent chunks each one zstd
 * frame with CRC32C-checked header and payload, an END chunk, an index and
 * a trailer; src/trace/trace_util.h's constants, varints and CRC) with its
 * own magic and record coding. A recorder killed at any moment leaves a file
 * whose whole chunks all read back; a reader stops at the first bad byte,
 * says where and why, and has given every record before it.
 *
 * Both sides run in the CLI (they may malloc). */
#ifndef MT_REFSET_FILE_H
#define MT_REFSET_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "refset/refset_event.h"

/* What the file's header holds. */
typedef struct mt_rs_header {
    uint64_t start_ns;          /* CLOCK_MONOTONIC time 0 of the recording */
    uint64_t start_realtime_ns; /* the wall clock at start_ns */
    uint32_t page_size;
    uint32_t flags; /* RS_FILE_* */
} mt_rs_header;
#define RS_FILE_PFN 0x1u    /* REF pfns are real (the recorder could read PFNs: root) */
#define RS_FILE_AGENT 0x2u  /* the agent reported mapping events (exact releases, allocation stacks) */
#define RS_FILE_ATTACH 0x4u /* --pid: pages present at the start are RS_REF_BEFORE */

typedef struct mt_rs_writer mt_rs_writer;

/* Writes the header to fd (which the writer owns from now on and closes in
 * finish/abort). NULL and *err = -errno on failure (fd closed then too;
 * -EINVAL: a page size that is not a power of two up to 1 GiB). */
mt_rs_writer *mt_rs_writer_open(int fd, const mt_rs_header *h, int *err);
/* Appends one record (ev->time_ns is CLOCK_MONOTONIC; records must come in
 * time order, except STACK/MODULE/META whose time is ignored). Writes a
 * chunk when one is full. 0 or -errno; -EINVAL (nothing written, the
 * writer goes on) for a record a reader would refuse: an unknown type,
 * npages 0 or above 2^40, a category >= RS_NCATEGORIES, more than
 * TRACE_MAX_FRAMES frames, a string over TRACE_MAX_STRING bytes. A write
 * error is returned by this and every later call. */
int mt_rs_write(mt_rs_writer *w, const mt_rs_event *ev);
/* Writes the open chunk (the recorder calls it every scan interval, so a
 * kill loses at most one interval). */
int mt_rs_write_flush(mt_rs_writer *w);
/* Writes the open chunk, the END chunk with these statistics (name/value
 * pairs), the index and the trailer; closes fd and frees w. */
int mt_rs_write_finish(mt_rs_writer *w, const char *const *stat_names, const uint64_t *stat_values,
                       int nstats);
/* Bytes written so far. */
uint64_t mt_rs_write_bytes(const mt_rs_writer *w);
/* Gives up without END, index or trailer: writes the open chunk (best
 * effort, so the file reads like a killed recorder's), closes fd, frees w. */
void mt_rs_write_abort(mt_rs_writer *w);

typedef struct mt_rs_reader mt_rs_reader;

/* Opens and checks the header. 0, or -errno / -EINVAL with a message in
 * err ("not a memtrail reference-set recording", ...). */
int mt_rs_reader_open(const char *path, mt_rs_reader **out, char *err, size_t errlen);
/* The same from memory: data (size bytes) stays the caller's and must
 * outlive the reader. flags: RS_READ_*. */
#define RS_READ_NO_CRC 0x1u /* skip the CRC checks (the fuzzer: mutations reach the records) */
int mt_rs_reader_open_mem(const void *data, size_t size, unsigned flags, mt_rs_reader **out, char *err,
                          size_t errlen);
const mt_rs_header *mt_rs_reader_header(const mt_rs_reader *r);
/* The next record: 1, 0 at the end, -1 when the file stops being readable
 * (truncated or corrupt: mt_rs_reader_error says what and at which offset;
 * every record before it was given). Times come back relative to start_ns. */
int mt_rs_read(mt_rs_reader *r, mt_rs_event *ev);
const char *mt_rs_reader_error(const mt_rs_reader *r);
/* Whether the file ended properly (END, index, trailer). */
int mt_rs_reader_complete(const mt_rs_reader *r);
/* The END chunk's statistics (after the last record): count, names, values. */
int mt_rs_reader_stats(const mt_rs_reader *r, const char *const **names, const uint64_t **values);
/* Chunks read whole so far, and the file offset reading has reached (the
 * end of the last whole chunk). */
uint64_t mt_rs_reader_chunks(const mt_rs_reader *r);
uint64_t mt_rs_reader_offset(const mt_rs_reader *r);
void mt_rs_reader_close(mt_rs_reader *r);

#endif
