/* pprof.c — the pprof profile (perftools.profiles.Profile, profile.proto
 * of github.com/google/pprof), gzip'ed: what go tool pprof, Pyroscope and
 * Parca read. One Sample per site (its return addresses as Locations,
 * innermost first; its counters as values; its category as a label), one
 * Location per distinct return address with a Line per inlined frame, the
 * modules as Mappings. Encoded with pb.c, compressed with zlib.
 *
 * The profile's message is written field by field in the order convenient
 * here (samples, then what they refer to, then the string table, which
 * only then is complete); protobuf readers accept fields in any order. */
#include "export/export.h"
#include "export/pb.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Field numbers of profile.proto. */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUE_TYPE_TYPE = 1,
    VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1,
    SAMPLE_VALUE = 2,
    SAMPLE_LABEL = 3,
    LABEL_KEY = 1,
    LABEL_STR = 2,
    MAPPING_ID = 1,
    MAPPING_MEMORY_START = 2,
    MAPPING_MEMORY_LIMIT = 3,
    MAPPING_FILE_OFFSET = 4,
    MAPPING_FILENAME = 5,
    MAPPING_BUILD_ID = 6,
    MAPPING_HAS_FUNCTIONS = 7,
    MAPPING_HAS_FILENAMES = 8,
    MAPPING_HAS_LINE_NUMBERS = 9,
    MAPPING_HAS_INLINE_FRAMES = 10,
    LOCATION_ID = 1,
    LOCATION_MAPPING_ID = 2,
    LOCATION_ADDRESS = 3,
    LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1,
    LINE_LINE = 2,
    FUNCTION_ID = 1,
    FUNCTION_NAME = 2,
    FUNCTION_SYSTEM_NAME = 3,
    FUNCTION_FILENAME = 4,
};

/* The sample types, in value order (pprof's heap profiles'), and the
 * counter each shows. alloc_space is left out for a report whose sites
 * lack allocated_bytes (written before the agent counted them). */
static const struct {
    const char *type, *unit;
    enum export_value value;
} sample_types[] = {
    {"inuse_space", "bytes", EXPORT_LIVE_BYTES},
    {"inuse_objects", "count", EXPORT_LIVE_COUNT},
    {"alloc_space", "bytes", EXPORT_ALLOCATED_BYTES},
    {"alloc_objects", "count", EXPORT_ALLOCS},
};
#define NTYPES (sizeof sample_types / sizeof sample_types[0])

/* Whether the builder's profile has sample type t. */
#define HAS_TYPE(b, t) ((b)->alloc_space || sample_types[t].value != EXPORT_ALLOCATED_BYTES)

/* --- the string table ------------------------------------------------------ */

struct strtab {
    char **s; /* s[0] is "" */
    size_t n, cap;
    size_t *slots; /* index + 1, 0 when empty */
    size_t nslots;
};

static int strtab_grow(struct strtab *t)
{
    size_t nslots = t->nslots ? 2 * t->nslots : 256;
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = report_hash_str(t->s[i]) & (nslots - 1);
        while (slots[k])
            k = (k + 1) & (nslots - 1);
        slots[k] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* The index of `s` (NULL is ""), added on first use; -ENOMEM. */
static int64_t intern(struct strtab *t, const char *s)
{
    if (!s)
        s = "";
    if ((t->n + 1) * 2 > t->nslots && strtab_grow(t) < 0)
        return -ENOMEM;
    size_t k = report_hash_str(s) & (t->nslots - 1);
    for (; t->slots[k]; k = (k + 1) & (t->nslots - 1))
        if (strcmp(t->s[t->slots[k] - 1], s) == 0)
            return (int64_t)(t->slots[k] - 1);
    if (report_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s, 64) < 0)
        return -ENOMEM;
    if (!(t->s[t->n] = strdup(s)))
        return -ENOMEM;
    t->slots[k] = ++t->n;
    return (int64_t)(t->n - 1);
}

static void strtab_free(struct strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->s[i]);
    free(t->s);
    free(t->slots);
}

/* --- the mappings' file offsets --------------------------------------------- */

/* The file offset that memory_start maps: from the module file's lowest
 * PT_LOAD segment (ELF address start - bias lies at or below it). 0 when
 * the file cannot be read; pprof needs it only to symbolize by itself. */
static uint64_t file_offset(const struct report_module *m)
{
    uint64_t off = 0;
    /* Non-blocking, and regular files only: a report may name a FIFO or a
     * device, which must not stall the export. */
    int fd = m->path ? open(m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 4096) {
        uint64_t vaddr = m->start - m->bias, best = UINT64_MAX;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
                break;
            if (ph.p_type != PT_LOAD || ph.p_vaddr >= best)
                continue;
            best = ph.p_vaddr;
            /* start is the segment's address, perhaps rounded down to a page */
            off = ph.p_vaddr >= vaddr && ph.p_offset >= ph.p_vaddr - vaddr
                      ? ph.p_offset - (ph.p_vaddr - vaddr)
                      : 0;
        }
    }
    close(fd);
    return off;
}

/* --- the profile ------------------------------------------------------------ */

struct builder {
    const struct report *r;
    struct export_stacks st;
    struct strtab strings;
    struct pb_buf out, msg, sub;
    struct export_map functions; /* name index << 32 | file index -> function id */
    int64_t *fn_name, *fn_file;  /* by function id - 1 */
    size_t nfunctions, fn_cap;
    struct {
        bool functions, filenames, lines, inlines;
    } * has;           /* per module: what its Locations carry */
    bool unknown_used; /* a site without frames refers to UNKNOWN_LOCATION */
    bool alloc_space;  /* every site has allocated_bytes: the alloc_space type */
    size_t main;       /* the executable's module (Mapping 1), or nmodules when none is */
};

/* The executable's module: pprof takes the first Mapping for the main
 * binary (its "File:"), and a report's first module may be another (a
 * trace's is often the dynamic loader's). nmodules when none is. */
static size_t main_module(const struct report *r)
{
    for (size_t i = 0; r->exe && i < r->nmodules; i++)
        if (r->modules[i].path && strcmp(r->modules[i].path, r->exe) == 0)
            return i;
    return r->nmodules;
}

/* Module i's Mapping id: the executable's 1, the others in their order. */
static uint64_t mapping_id(const struct builder *b, size_t i)
{
    if (b->main == b->r->nmodules)
        return i + 1;
    return i == b->main ? 1 : i < b->main ? i + 2 : i + 1;
}

/* Location ids: 1 stands for "no stack" (the site table's overflow, site 0),
 * a Line of function "[unknown]" as in the folded stacks; the recorded
 * return addresses follow, stacks->addrs[a] as a + 2. */
#define UNKNOWN_LOCATION 1

static int value_type(struct builder *b, uint32_t field, const char *type, const char *unit)
{
    int64_t t = intern(&b->strings, type), u = intern(&b->strings, unit);
    if (t < 0 || u < 0)
        return -ENOMEM;
    pb_reset(&b->sub);
    pb_int64(&b->sub, VALUE_TYPE_TYPE, t);
    pb_int64(&b->sub, VALUE_TYPE_UNIT, u);
    pb_message(&b->out, field, &b->sub);
    return 0;
}

static int add_sample(struct builder *b, const struct report_site *site)
{
    uint64_t *ids = malloc((site->nframes ? site->nframes : 1) * sizeof *ids);
    if (!ids)
        return -ENOMEM;
    for (size_t k = 0; k < site->nframes; k++) {
        size_t a;
        if (export_stacks_lookup(&b->st, site->frames[k], &a) < 0) {
            free(ids);
            return -ENOMEM;
        }
        ids[k] = a + 2; /* the Location of address a */
    }
    size_t nids = site->nframes;
    if (nids == 0) { /* go tool pprof drops a sample without Locations */
        ids[nids++] = UNKNOWN_LOCATION;
        b->unknown_used = true;
    }
    int64_t values[NTYPES];
    size_t nvalues = 0;
    for (size_t t = 0; t < NTYPES; t++)
        if (HAS_TYPE(b, t))
            values[nvalues++] = export_site_value(site, sample_types[t].value);
    int64_t key = intern(&b->strings, "category"), str = intern(&b->strings, site->category);
    pb_reset(&b->msg);
    pb_packed_uint64(&b->msg, SAMPLE_LOCATION_ID, ids, nids);
    pb_packed_int64(&b->msg, SAMPLE_VALUE, values, nvalues);
    pb_reset(&b->sub);
    pb_int64(&b->sub, LABEL_KEY, key);
    pb_int64(&b->sub, LABEL_STR, str);
    pb_message(&b->msg, SAMPLE_LABEL, &b->sub);
    pb_message(&b->out, PROFILE_SAMPLE, &b->msg);
    free(ids);
    return key < 0 || str < 0 ? -ENOMEM : 0;
}

/* The id of the Function (name, file), added on first use; 0 on -ENOMEM. */
static uint64_t function_id(struct builder *b, const struct sym_frame *f)
{
    char *name = export_frame_name(f); /* ';' is harmless here, but one name for both exports */
    int64_t n = name ? intern(&b->strings, name) : -ENOMEM, file = intern(&b->strings, f->file);
    free(name);
    if (n < 0 || file < 0)
        return 0;
    uint64_t key = (uint64_t)n << 32 | (uint64_t)file, id;
    if (export_map_get(&b->functions, key, &id))
        return id;
    if (b->nfunctions == b->fn_cap) {
        /* two arrays, one capacity: each grows on its own count first */
        size_t names_cap = b->fn_cap, files_cap = b->fn_cap;
        if (report_grow(&b->fn_name, &names_cap, b->nfunctions + 1, sizeof *b->fn_name, 64) < 0 ||
            report_grow(&b->fn_file, &files_cap, b->nfunctions + 1, sizeof *b->fn_file, 64) < 0)
            return 0;
        b->fn_cap = names_cap;
    }
    b->fn_name[b->nfunctions] = n;
    b->fn_file[b->nfunctions] = file;
    id = ++b->nfunctions;
    return export_map_put(&b->functions, key, id) < 0 ? 0 : id;
}

static int add_locations(struct builder *b)
{
    if (b->unknown_used) {
        const struct sym_frame none = {.function = "[unknown]"};
        uint64_t id = function_id(b, &none);
        if (!id)
            return -ENOMEM;
        pb_reset(&b->msg);
        pb_uint64(&b->msg, LOCATION_ID, UNKNOWN_LOCATION);
        pb_reset(&b->sub);
        pb_uint64(&b->sub, LINE_FUNCTION_ID, id);
        pb_message(&b->msg, LOCATION_LINE, &b->sub);
        pb_message(&b->out, PROFILE_LOCATION, &b->msg);
    }
    for (size_t a = 0; a < b->st.naddrs; a++) {
        const struct export_addr *ad = &b->st.addrs[a];
        pb_reset(&b->msg);
        pb_uint64(&b->msg, LOCATION_ID, a + 2);
        if (ad->module >= 0)
            pb_uint64(&b->msg, LOCATION_MAPPING_ID, mapping_id(b, (size_t)ad->module));
        pb_uint64(&b->msg, LOCATION_ADDRESS, ad->address);
        int named = 0;
        for (int j = 0; j < ad->nframes; j++) { /* innermost (inlined) first, as pprof wants */
            const struct sym_frame *f = &b->st.frames[ad->first + (size_t)j];
            if (!f->function || !f->function[0])
                continue; /* unknown: no Line; pprof shows the address */
            uint64_t id = function_id(b, f);
            if (!id)
                return -ENOMEM;
            pb_reset(&b->sub);
            pb_uint64(&b->sub, LINE_FUNCTION_ID, id);
            if (f->line > 0)
                pb_int64(&b->sub, LINE_LINE, f->line);
            pb_message(&b->msg, LOCATION_LINE, &b->sub);
            named++;
            if (ad->module >= 0) {
                b->has[ad->module].functions = true;
                b->has[ad->module].filenames |= f->file != NULL;
                b->has[ad->module].lines |= f->line > 0;
            }
        }
        if (named > 1 && ad->module >= 0)
            b->has[ad->module].inlines = true;
        pb_message(&b->out, PROFILE_LOCATION, &b->msg);
    }
    for (size_t i = 0; i < b->nfunctions; i++) {
        pb_reset(&b->msg);
        pb_uint64(&b->msg, FUNCTION_ID, i + 1);
        pb_int64(&b->msg, FUNCTION_NAME, b->fn_name[i]);
        pb_int64(&b->msg, FUNCTION_SYSTEM_NAME,
                 b->fn_name[i]); /* the symbolizer gives demangled names only */
        if (b->fn_file[i])
            pb_int64(&b->msg, FUNCTION_FILENAME, b->fn_file[i]);
        pb_message(&b->out, PROFILE_FUNCTION, &b->msg);
    }
    return 0;
}

static int add_mapping(struct builder *b, size_t i)
{
    const struct report_module *m = &b->r->modules[i];
    int64_t file = intern(&b->strings, m->path), id = intern(&b->strings, m->buildid);
    if (file < 0 || id < 0)
        return -ENOMEM;
    pb_reset(&b->msg);
    pb_uint64(&b->msg, MAPPING_ID, mapping_id(b, i));
    pb_uint64(&b->msg, MAPPING_MEMORY_START, m->start);
    pb_uint64(&b->msg, MAPPING_MEMORY_LIMIT, m->end);
    pb_uint64(&b->msg, MAPPING_FILE_OFFSET, file_offset(m));
    pb_int64(&b->msg, MAPPING_FILENAME, file);
    if (id)
        pb_int64(&b->msg, MAPPING_BUILD_ID, id);
    pb_bool(&b->msg, MAPPING_HAS_FUNCTIONS, b->has[i].functions);
    pb_bool(&b->msg, MAPPING_HAS_FILENAMES, b->has[i].filenames);
    pb_bool(&b->msg, MAPPING_HAS_LINE_NUMBERS, b->has[i].lines);
    pb_bool(&b->msg, MAPPING_HAS_INLINE_FRAMES, b->has[i].inlines);
    pb_message(&b->out, PROFILE_MAPPING, &b->msg);
    return 0;
}

/* The Mappings in id order: the executable's first. */
static int add_mappings(struct builder *b)
{
    int rc = b->main < b->r->nmodules ? add_mapping(b, b->main) : 0;
    for (size_t i = 0; i < b->r->nmodules && rc == 0; i++)
        if (i != b->main)
            rc = add_mapping(b, i);
    return rc;
}

static int add_comment(struct builder *b, char *text)
{
    int64_t s = text ? intern(&b->strings, text) : -ENOMEM;
    free(text);
    if (s < 0)
        return -ENOMEM;
    pb_int64(&b->out, PROFILE_COMMENT, s);
    return 0;
}

static int add_header(struct builder *b, enum export_value default_type, const char *source)
{
    const struct report *r = b->r;
    char *text;
    int rc = 0;
    for (size_t t = 0; t < NTYPES && rc == 0; t++)
        if (HAS_TYPE(b, t))
            rc = value_type(b, PROFILE_SAMPLE_TYPE, sample_types[t].type, sample_types[t].unit);
    if (rc == 0)
        rc = value_type(b, PROFILE_PERIOD_TYPE, "space", "bytes");
    /* A sampled report's period is its rate, as in jemalloc's and Go's heap
     * profiles; its values are already the estimates (pprof scales none). */
    pb_int64(&b->out, PROFILE_PERIOD, report_is_sampled(r) ? r->sample_rate : 1);
    if (r->has & REPORT_HAS_START)
        pb_int64(&b->out, PROFILE_TIME_NANOS, r->start_ns);
    if ((r->has & REPORT_HAS_START) && (r->has & REPORT_HAS_END_NS) && r->end_ns >= r->start_ns) {
        /* In uint64: the difference of two int64 can exceed INT64_MAX (a
         * report's times are untrusted); clamped to what the field holds. */
        uint64_t d = (uint64_t)r->end_ns - (uint64_t)r->start_ns;
        pb_int64(&b->out, PROFILE_DURATION_NANOS, d > INT64_MAX ? INT64_MAX : (int64_t)d);
    }
    for (size_t t = 0; t < NTYPES && rc == 0; t++)
        if (sample_types[t].value == default_type) {
            int64_t s = intern(&b->strings, sample_types[t].type);
            if (s < 0)
                rc = -ENOMEM;
            pb_int64(&b->out, PROFILE_DEFAULT_SAMPLE_TYPE, s);
        }
    if (rc == 0)
        rc = add_comment(b, asprintf(&text, "memtrail %s %s",
                                     r->mode && strcmp(r->mode, "trace") == 0 ? "trace" : "detail report",
                                     source) < 0
                                ? NULL
                                : text);
    if (rc == 0 && (r->has & REPORT_HAS_PID))
        rc = add_comment(
            b, asprintf(&text, "pid %lld: %s", (long long)r->pid, r->exe ? r->exe : "?") < 0 ? NULL : text);
    if (rc == 0 && !b->alloc_space)
        rc =
            add_comment(b, strdup("no alloc_space: the report's sites have no allocated_bytes (written by an "
                                  "older memtrail)"));
    if (rc == 0 && report_is_sampled(r))
        rc =
            add_comment(b, asprintf(&text,
                                    "sampled: one sample per %lld bytes allocated on average; the values are "
                                    "estimates",
                                    (long long)r->sample_rate) < 0
                               ? NULL
                               : text);
    if (rc == 0 && !r->complete)
        rc = add_comment(b, strdup("the report was cut short: these are the sites it holds"));
    /* a trace's caveats, so that a viewer shows them beside the values */
    for (size_t i = 0; i < r->ncaveats && rc == 0; i++)
        rc = add_comment(b, strdup(r->caveats[i]));
    return rc;
}

static int gzip_write(FILE *out, const struct pb_buf *data)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16 /* gzip wrapper */, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    unsigned char chunk[65536];
    zs.next_in = data->data;
    int rc = 0, zrc;
    size_t left = data->len;
    do {
        uInt step = left > 1u << 30 ? 1u << 30 : (uInt)left;
        zs.avail_in = step;
        left -= step;
        do {
            zs.next_out = chunk;
            zs.avail_out = sizeof chunk;
            zrc = deflate(&zs, left ? Z_NO_FLUSH : Z_FINISH);
            size_t have = sizeof chunk - zs.avail_out;
            if (have && fwrite(chunk, 1, have, out) != have)
                rc = -EIO;
        } while (zs.avail_out == 0 && rc == 0);
    } while (left && rc == 0);
    if (rc == 0 && zrc != Z_STREAM_END)
        rc = -EIO;
    deflateEnd(&zs);
    return rc;
}

int export_pprof(FILE *out, const struct report *r, struct symbolizer *sym, enum export_value default_type,
                 const char *source)
{
    struct builder b = {.r = r, .alloc_space = report_sites_have_allocated(r), .main = main_module(r)};
    bool known = false;
    for (size_t t = 0; t < NTYPES; t++)
        known |= sample_types[t].value == default_type && HAS_TYPE(&b, t);
    if (!known)
        return -EINVAL;
    export_stacks_init(&b.st, r, sym);
    b.has = calloc(r->nmodules ? r->nmodules : 1, sizeof *b.has);
    int rc = b.has && intern(&b.strings, "") == 0 ? 0 : -ENOMEM;
    if (rc == 0)
        rc = add_header(&b, default_type, source);
    for (size_t i = 0; i < r->nsites && rc == 0; i++)
        rc = add_sample(&b, &r->sites[i]);
    if (rc == 0)
        rc = add_locations(&b);
    if (rc == 0)
        rc = add_mappings(&b);
    for (size_t i = 0; i < b.strings.n && rc == 0; i++)
        pb_string(&b.out, PROFILE_STRING_TABLE, b.strings.s[i]);
    if (rc == 0 && (b.out.oom || b.msg.oom || b.sub.oom))
        rc = -ENOMEM;
    if (rc == 0)
        rc = gzip_write(out, &b.out);
    pb_free(&b.out);
    pb_free(&b.msg);
    pb_free(&b.sub);
    strtab_free(&b.strings);
    export_map_free(&b.functions);
    free(b.fn_name);
    free(b.fn_file);
    free(b.has);
    export_stacks_free(&b.st);
    return rc;
}
