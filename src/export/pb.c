/* pb.c — the protocol buffers encoder (pb.h): wire format as in
 * https://protobuf.dev/programming-guides/encoding/ — a field is a varint
 * key (field number << 3 | wire type) then, for wire type 0, a varint, or
 * for wire type 2, a varint length and that many bytes. */
#include "export/pb.h"

#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void pb_free(struct pb_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void pb_reset(struct pb_buf *b)
{
    b->len = 0;
}

static bool reserve(struct pb_buf *b, size_t n)
{
    if (b->oom)
        return false;
    if (n <= b->cap - b->len)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *grown = realloc(b->data, cap);
    if (!grown) {
        b->oom = true;
        return false;
    }
    b->data = grown;
    b->cap = cap;
    return true;
}

void pb_append(struct pb_buf *b, const void *p, size_t n)
{
    if (n == 0 || !reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void pb_varint(struct pb_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        tmp[n++] = byte | (v ? 0x80 : 0);
    } while (v);
    pb_append(b, tmp, n);
}

static void key(struct pb_buf *b, uint32_t field, unsigned wire)
{
    pb_varint(b, (uint64_t)field << 3 | wire);
}

void pb_uint64(struct pb_buf *b, uint32_t field, uint64_t v)
{
    key(b, field, WIRE_VARINT);
    pb_varint(b, v);
}

void pb_int64(struct pb_buf *b, uint32_t field, int64_t v)
{
    pb_uint64(b, field, (uint64_t)v);
}

void pb_bool(struct pb_buf *b, uint32_t field, bool v)
{
    pb_uint64(b, field, v ? 1 : 0);
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *p, size_t n)
{
    key(b, field, WIRE_LEN);
    pb_varint(b, n);
    pb_append(b, p, n);
}

void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

void pb_message(struct pb_buf *b, uint32_t field, const struct pb_buf *msg)
{
    if (msg->oom)
        b->oom = true;
    pb_bytes(b, field, msg->data, msg->len);
}

/* The payload's length first: the sum of the varints' sizes. */
static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >>= 7)
        n++;
    return n;
}

void pb_packed_uint64(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += varint_size(v[i]);
    key(b, field, WIRE_LEN);
    pb_varint(b, len);
    for (size_t i = 0; i < n; i++)
        pb_varint(b, v[i]);
}

void pb_packed_int64(struct pb_buf *b, uint32_t field, const int64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += varint_size((uint64_t)v[i]);
    key(b, field, WIRE_LEN);
    pb_varint(b, len);
    for (size_t i = 0; i < n; i++)
        pb_varint(b, (uint64_t)v[i]);
}
