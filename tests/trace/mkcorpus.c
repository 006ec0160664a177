/* mkcorpus.c — writes the trace reader's seed corpus (make trace-corpus):
 * small valid traces of each shape (random events of every kind, mbench-
 * like, empty, coarse time unit, one event per chunk), each also with its
 * chunks stored uncompressed (so the fuzzer's mutations reach the bodies),
 * and cut and damaged copies. Usage: mkcorpus DIR */
#include "trace/trace_gen.h"
#include "trace/trace_test.h"
#include "trace/trace_util.h"

#include <zstd.h>

static const char *dir;

static void save(const char *name, const unsigned char *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(1);
    }
}

/* The same trace with every chunk stored uncompressed (codec 0). */
static tbuf *uncompressed(const tbuf *in)
{
    tbuf *out = tbuf_new();
    tbuf_write(out, in->p, TRACE_HEADER_SIZE);
    size_t off = TRACE_HEADER_SIZE;
    uint64_t index_at = 0;
    while (off + TRACE_CHUNK_HEADER_SIZE <= in->len && !memcmp(in->p + off, TRACE_CHUNK_MAGIC, 4)) {
        unsigned char h[TRACE_CHUNK_HEADER_SIZE];
        memcpy(h, in->p + off, sizeof h);
        uint32_t stored = trace_get32(h + 16), raw = trace_get32(h + 20);
        unsigned char *body = malloc(raw + 1);
        if (h[5] == TRACE_CODEC_ZSTD)
            ZSTD_decompress(body, raw, in->p + off + sizeof h, stored);
        else
            memcpy(body, in->p + off + sizeof h, raw);
        if (h[4] == TRACE_CHUNK_INDEX)
            index_at = out->len;
        h[5] = TRACE_CODEC_NONE;
        trace_put32(h + 16, raw);
        trace_put32(h + 28, trace_crc32c(0, body, raw));
        trace_put32(h + 36, trace_crc32c(0, h, 36));
        tbuf_write(out, h, sizeof h);
        tbuf_write(out, body, raw);
        free(body);
        off += sizeof h + stored;
    }
    if (off + TRACE_TRAILER_SIZE == in->len) {
        unsigned char t[TRACE_TRAILER_SIZE];
        memcpy(t, in->p + off, sizeof t);
        trace_put64(t + 8, index_at);
        trace_put32(t + 20, trace_crc32c(0, t, 20));
        tbuf_write(out, t, sizeof t);
    }
    return out;
}

static unsigned coding; /* config.chunk_flags of the next trace_of */

static tbuf *trace_of(const mt_trace_event *evs, size_t n, uint32_t chunk, uint32_t unit)
{
    tbuf *m = tbuf_new();
    mt_trace_host host;
    tbuf_host(m, &host);
    mt_trace_write_config cfg = {
        .chunk_events = chunk, .time_unit_ns = unit, .pid = 7, .start_ns = 1000, .chunk_flags = coding};
    mt_trace_writer *w = mt_trace_writer_create(&cfg, &host);
    mt_trace_write_meta(w, "exe", "/bin/x");
    mt_trace_write_begin(w);
    for (size_t i = 0; i < n; i++)
        mt_trace_write_event(w, &evs[i]);
    const char *names[] = {"events_lost"};
    uint64_t vals[] = {3};
    mt_trace_write_finish(w, names, vals, 1);
    mt_trace_writer_destroy(w);
    return m;
}

static void emit(const char *name, tbuf *m)
{
    char nm[256];
    tbuf *u = uncompressed(m);
    snprintf(nm, sizeof nm, "%s.mtt", name);
    save(nm, m->p, m->len);
    snprintf(nm, sizeof nm, "%s.raw.mtt", name);
    save(nm, u->p, u->len);
    /* cut in a chunk header, in a payload, in the trailer */
    size_t cuts[] = {m->len / 3, m->len / 2 + 7, m->len - 5};
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.cut%d.mtt", name, i);
        save(nm, m->p, cuts[i]);
    }
    /* a body byte changed (CRCs made right again: the body's own checks) */
    if (u->len > 200) {
        unsigned char *d = malloc(u->len);
        memcpy(d, u->p, u->len);
        d[u->len / 2] ^= 0x5a;
        snprintf(nm, sizeof nm, "%s.raw.flip.mtt", name);
        save(nm, d, u->len);
        free(d);
    }
    tbuf_delete(u);
    tbuf_delete(m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkcorpus DIR\n");
        return 2;
    }
    dir = argv[1];
    uint64_t rng = 42;
    mt_trace_event evs[200];
    memset(evs, 0, sizeof evs);
    uint32_t id = 0xfffffff0u;
    for (int i = 0; i < 60; i++) {
        mt_trace_event *e = &evs[i];
        e->type = (uint8_t)(1 + gen_xorshift(&rng) % 5);
        e->thread = 10 + (uint32_t)(gen_xorshift(&rng) % 3);
        e->time_ns = 1000 + (uint64_t)i * 250 + gen_xorshift(&rng) % 100;
        e->category = (uint8_t)(gen_xorshift(&rng) % 3);
        e->size = gen_xorshift(&rng) >> (16 + gen_xorshift(&rng) % 48);
        e->id = ++id;
        e->old_id = id - 1 - (uint32_t)(gen_xorshift(&rng) % 8);
        e->stack = (uint32_t)(gen_xorshift(&rng) % 6);
        e->address = 0x7f0000000000ull + (gen_xorshift(&rng) % 64) * 4096;
    }
    emit("random", trace_of(evs, 60, 16, 0));
    emit("random-1chunk", trace_of(evs, 60, 0, 0));
    emit("random-us", trace_of(evs, 60, 25, 1000));
    emit("tiny-chunks", trace_of(evs, 6, 1, 0));
    /* every chunk coding (times inline or as runs, low bits packed or aligned) */
    for (unsigned f = 0; f <= TRACE_F_KNOWN; f++) {
        char nm[64];
        snprintf(nm, sizeof nm, "coding%u", f);
        coding = 0x100 | f;
        emit(nm, trace_of(evs, 60, 20, 500));
    }
    coding = 0;
    emit("empty", trace_of(evs, 0, 0, 0));
    gen_state g;
    gen_init(&g, 2, 80, 16, 1);
    size_t n = 0;
    while (n < 200 && gen_next(&g, &evs[n]))
        n++;
    gen_free(&g);
    emit("mbench", trace_of(evs, n, 64, 0));
    save("header-only.mtt", (const unsigned char *)"MTTRACE\0\1\0\0\0\x40\0\0\0", 16);
    return 0;
}
