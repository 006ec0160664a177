/* trace_read.h — reading a trace (docs/trace-format.md) event by event,
 * in bounded memory: one chunk decompressed at a time (the next one may be
 * decompressed ahead on a second thread), definitions kept as they come.
 *
 * A bad file never crashes or hangs the reader: every length and varint is
 * checked, each chunk's header and payload carry a CRC, and the first
 * problem stops reading with an error naming the file, the chunk and its
 * offset; everything before it has been returned. A file whose writer was
 * killed (no end record, no index) is read up to its last whole chunk.
 *
 * CLI-side code: allocates with malloc. */
#ifndef MT_TRACE_READ_H
#define MT_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace_event.h" /* mt_trace_event, enum mt_trace_type */

#define MT_TRACE_ERR_MAX 512

typedef struct mt_trace_reader mt_trace_reader;

typedef struct mt_trace_file_info {
    uint32_t version;
    uint32_t pid;
    uint64_t start_ns, start_realtime_ns;
    uint64_t file_bytes;
    uint32_t time_unit_ns; /* the unit times were stored in (1: exact ns) */
} mt_trace_file_info;

/* One entry of a file's chunk index (for seeking and progress). */
typedef struct mt_trace_chunk_info {
    uint64_t offset;            /* of the chunk's header in the file */
    unsigned kind;              /* 1 definitions, 2 events, 3 end */
    uint32_t count;             /* events, or records */
    uint64_t first_ns, last_ns; /* events chunks: their time range (ns since start_ns) */
} mt_trace_chunk_info;

typedef struct mt_trace_stack {
    uint32_t id;
    unsigned category;
    uint32_t nframes;
    const uint64_t *frames; /* innermost first */
} mt_trace_stack;

typedef struct mt_trace_module {
    uint64_t start, end, bias;
    const char *path;
    const unsigned char *build_id;
    unsigned build_id_len;
} mt_trace_module;

/* Is this file a trace (by its first bytes)? 1 yes, 0 no, -errno. */
int mt_trace_sniff(const char *path);
/* Do these first bytes (n of them) start a trace? 1 yes, 0 no. */
int mt_trace_sniff_bytes(const void *head, size_t n);

/* Opens and checks the header. flags: MT_TRACE_PREFETCH decompresses the
 * next chunk on a second thread. 0, or -errno with the reason in err. */
#define MT_TRACE_PREFETCH 1u
#define MT_TRACE_NO_CRC 0x100u /* testing only: skip the CRC checks (fuzzing reaches the bodies) */
int mt_trace_open(const char *path, unsigned flags, mt_trace_reader **out, char *err, size_t errlen);
/* The same for an open descriptor, which the reader takes (closed on
 * failure too). Without MT_TRACE_STREAM, fd is a regular file read from
 * offset 0 with pread (its index used). With it, fd is read once, front
 * to back (a pipe, a FIFO): the first nhead bytes (at most the header's
 * 64), already taken from it by the caller, are given in head; there is no
 * index (mt_trace_seek_chunk fails) and file_bytes is 0. */
#define MT_TRACE_STREAM 2u
int mt_trace_open_fd(int fd, const void *head, size_t nhead, const char *name, unsigned flags,
                     mt_trace_reader **out, char *err, size_t errlen);
/* The same for a trace in memory (data stays the caller's until close);
 * name is used in errors. */
int mt_trace_open_mem(const void *data, size_t len, const char *name, unsigned flags, mt_trace_reader **out,
                      char *err, size_t errlen);
void mt_trace_close(mt_trace_reader *r);
const mt_trace_file_info *mt_trace_info(const mt_trace_reader *r);

/* The next event: 1, 0 at the end, -1 on an error (mt_trace_error says
 * what and where; the events before it were all returned). */
int mt_trace_next(mt_trace_reader *r, mt_trace_event *ev);
const char *mt_trace_error(const mt_trace_reader *r);
/* Was the writer's end record read (the trace is complete)? */
int mt_trace_complete(const mt_trace_reader *r);
/* Bytes of the file consumed so far (progress). */
uint64_t mt_trace_offset(const mt_trace_reader *r);
/* Chunks read so far, and in the file when the index says (else 0). */
uint64_t mt_trace_chunks_read(const mt_trace_reader *r);
uint64_t mt_trace_chunks_total(const mt_trace_reader *r);
/* The file's chunk index, when it has a valid one (else 0 entries): every
 * chunk but the index itself, in file order. */
size_t mt_trace_index_count(const mt_trace_reader *r);
const mt_trace_chunk_info *mt_trace_index_get(const mt_trace_reader *r, size_t i);
/* Goes to index entry i: reads the definitions chunks before it, then
 * mt_trace_next reads on from chunk i. 0; -1 when a definitions chunk is
 * bad (mt_trace_error says what); -EINVAL without an entry i. Readers of
 * one file seeking to different chunks read it in parallel. */
int mt_trace_seek_chunk(mt_trace_reader *r, size_t i);

/* Definitions read so far (a stack is defined before the first event that
 * uses it). NULL when unknown. */
const mt_trace_stack *mt_trace_stack_get(const mt_trace_reader *r, uint32_t id);
size_t mt_trace_module_count(const mt_trace_reader *r);
const mt_trace_module *mt_trace_module_get(const mt_trace_reader *r, size_t i);
const char *mt_trace_category_name(const mt_trace_reader *r, unsigned id); /* NULL if unknown */
const char *mt_trace_meta(const mt_trace_reader *r, const char *key);      /* NULL if absent */
/* The end record's statistics (after the end; 0 with *found = 0 when absent). */
uint64_t mt_trace_stat(const mt_trace_reader *r, const char *name, int *found);

#endif
