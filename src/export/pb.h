/* pb.h — a minimal protocol buffers encoder: a growable byte buffer and the
 * wire types profile.proto needs (varints, length-delimited fields, packed
 * repeated integers, nested messages). Encoding only; an allocation failure
 * is remembered in the buffer (pb_buf.oom) and checked once at the end, so
 * callers need not test every call. */
#ifndef MT_EXPORT_PB_H
#define MT_EXPORT_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pb_buf {
    uint8_t *data;
    size_t len, cap;
    bool oom; /* an append failed: the content is incomplete */
};

void pb_free(struct pb_buf *b);
void pb_reset(struct pb_buf *b); /* empty it, keep the memory */
void pb_append(struct pb_buf *b, const void *p, size_t n);
void pb_varint(struct pb_buf *b, uint64_t v);

/* Fields. A scalar equal to 0 is still written: proto3 readers take it as
 * the default either way, and callers skip zeros where they want to. */
void pb_uint64(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_int64(struct pb_buf *b, uint32_t field, int64_t v); /* two's complement, 10 bytes when negative */
void pb_bool(struct pb_buf *b, uint32_t field, bool v);
void pb_bytes(struct pb_buf *b, uint32_t field, const void *p, size_t n);
void pb_string(struct pb_buf *b, uint32_t field, const char *s);
/* A nested message already encoded in `msg`. */
void pb_message(struct pb_buf *b, uint32_t field, const struct pb_buf *msg);
/* Packed repeated int64/uint64 (one length-delimited field); nothing when n is 0. */
void pb_packed_uint64(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n);
void pb_packed_int64(struct pb_buf *b, uint32_t field, const int64_t *v, size_t n);

#endif
