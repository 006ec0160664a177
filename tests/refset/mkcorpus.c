/* mkcorpus.c — writes the seeds of the recording reader's fuzz corpus
 * into the directory given: small recordings with every record type, many
 * small chunks, no records, one without an END (aborted), one cut inside a
 * chunk, one with a flipped byte. `make refset-corpus` runs it into
 * tests/refset/corpus/ (committed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "refset/refset_file.h"
#include "refset/refset_gen.h"

static int write_seed(const char *dir, const char *name, size_t n, size_t every, int finish)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    mt_rs_header h = {START, 1700000000000000000ull, PAGE, RS_FILE_PFN | RS_FILE_AGENT};
    int err = 0;
    mt_rs_writer *w = mt_rs_writer_open(fd, &h, &err);
    if (!w)
        return err;
    rec *recs = random_records(n);
    for (size_t i = 0; i < n; i++) {
        /* small stacks and strings: seeds stay small */
        if (recs[i].ev.nframes > 8)
            recs[i].ev.nframes = 8;
        if (mt_rs_write(w, &recs[i].ev) < 0)
            return -EINVAL;
        if (every && (i + 1) % every == 0)
            mt_rs_write_flush(w);
    }
    free(recs);
    if (!finish) {
        mt_rs_write_abort(w);
        return 0;
    }
    static const char *const names[] = {"faults", "lost_samples"};
    static const uint64_t values[] = {42, 1};
    return mt_rs_write_finish(w, names, values, 2);
}

/* Rewrites dir/from as dir/to, cut to its first `keep` bytes (0: half; past its size: whole)
 * and with the byte at `flip` (when not SIZE_MAX) inverted. */
static int derive(const char *dir, const char *from, const char *to, size_t keep, size_t flip)
{
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/%s", dir, from);
    snprintf(dst, sizeof dst, "%s/%s", dir, to);
    FILE *f = fopen(src, "rb");
    if (!f)
        return -errno;
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (!keep)
        keep = n / 2;
    if (keep > n)
        keep = n;
    if (flip != SIZE_MAX && flip < keep)
        buf[flip] ^= 0xff;
    f = fopen(dst, "wb");
    if (!f || fwrite(buf, 1, keep, f) != keep)
        return -EIO;
    return fclose(f) ? -errno : 0;
}

/* Rewrites dir/from's EVENTS chunks stored as is (codec 0, CRCs
 * recomputed) as dir/to, up to its first other chunk: the fuzzer's
 * mutations then land on records, not on zstd frames. */
static int rawify(const char *dir, const char *from, const char *to)
{
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/%s", dir, from);
    snprintf(dst, sizeof dst, "%s/%s", dir, to);
    FILE *f = fopen(src, "rb");
    if (!f)
        return -errno;
    static unsigned char in[1 << 16], out[1 << 18];
    size_t n = fread(in, 1, sizeof in, f), o = RS_HEADER_SIZE, at = RS_HEADER_SIZE;
    fclose(f);
    memcpy(out, in, RS_HEADER_SIZE);
    while (at + TRACE_CHUNK_HEADER_SIZE <= n && in[at + 4] == RS_CHUNK_EVENTS) {
        unsigned char *h = out + o, *body = h + TRACE_CHUNK_HEADER_SIZE;
        uint32_t stored = trace_get32(in + at + 16), raw = trace_get32(in + at + 20);
        const unsigned char *payload = in + at + TRACE_CHUNK_HEADER_SIZE;
        if (o + TRACE_CHUNK_HEADER_SIZE + raw > sizeof out)
            break;
        memcpy(h, in + at, TRACE_CHUNK_HEADER_SIZE);
        if (in[at + 5] == TRACE_CODEC_ZSTD) {
            if (ZSTD_decompress(body, raw, payload, stored) != raw)
                return -EINVAL;
        } else {
            memcpy(body, payload, raw);
        }
        h[5] = TRACE_CODEC_NONE;
        trace_put32(h + 16, raw);
        trace_put32(h + 28, trace_crc32c(0, body, raw));
        trace_put32(h + 36, trace_crc32c(0, h, 36));
        o += TRACE_CHUNK_HEADER_SIZE + raw;
        at += TRACE_CHUNK_HEADER_SIZE + stored;
    }
    f = fopen(dst, "wb");
    if (!f || fwrite(out, 1, o, f) != o)
        return -EIO;
    return fclose(f) ? -errno : 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/refset/corpus";
    mkdir(dir, 0755);
    int rc = 0;
    rc |= write_seed(dir, "seed-every-type.mrs", 60, 0, 1);
    rc |= write_seed(dir, "seed-small-chunks.mrs", 40, 3, 1);
    rc |= write_seed(dir, "seed-one-chunk-per-record.mrs", 12, 1, 1);
    rc |= write_seed(dir, "seed-no-records.mrs", 0, 0, 1);
    rc |= write_seed(dir, "seed-aborted.mrs", 30, 10, 0);
    rc |= write_seed(dir, "seed-refs.mrs", 200, 50, 1);
    rc |= derive(dir, "seed-small-chunks.mrs", "seed-cut.mrs", 0, SIZE_MAX);
    rc |= derive(dir, "seed-every-type.mrs", "seed-flipped.mrs", 100000, 200);
    rc |= derive(dir, "seed-every-type.mrs", "seed-header-only.mrs", 64, SIZE_MAX);
    rc |= rawify(dir, "seed-every-type.mrs", "seed-every-type-raw.mrs");
    rc |= rawify(dir, "seed-refs.mrs", "seed-refs-raw.mrs");
    rc |= rawify(dir, "seed-small-chunks.mrs", "seed-small-chunks-raw.mrs");
    if (rc)
        fprintf(stderr, "mkcorpus: failed (%d)\n", rc);
    return rc != 0;
}
