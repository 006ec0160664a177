/* sites.c — the helper program of the detail-report tests: it captures
 * real call stacks (glibc's backtrace(), so frame 0 is a return address in
 * the function that captured, like the caller of malloc for the agent) at
 * known places — a static function, an always_inline function inlined into
 * another, a function of a shared library (C++, plugin.cc), the same
 * helper reached from two callers, a deep recursion — and prints its
 * module map the way the agent's report does. tests/cli/test_detail.sh
 * builds .mtr fixtures from this output and checks the symbolized frames
 * against eu-addr2line/addr2line. Output:
 *   module bias=0x.. start=0x.. end=0x.. buildid=HEX|- path=PATH
 *   capture NAME 0xADDR,0xADDR,...
 * Built with -g -O1; VARIANT changes the code (another build-id). */
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef VARIANT
#define VARIANT 0
#endif
#define MAXF 10
#define NOINLINE __attribute__((noinline, noclone))
#define BARRIER() __asm__ volatile("" ::: "memory")

int plugin_capture(void **frames, int max);

static void *stacks[8][MAXF];
static int depths[8];
static const char *names[8];
static int ncaptures;

/* Inlined into the function that captures, so frame 0 lies in it. */
#define CAPTURE(name)                                                                                        \
    do {                                                                                                     \
        names[ncaptures] = name;                                                                             \
        depths[ncaptures] = backtrace(stacks[ncaptures], MAXF);                                              \
        ncaptures++;                                                                                         \
    } while (0)

static NOINLINE void parse_config(void)
{
    CAPTURE("parse_config");
    BARRIER();
}

static inline __attribute__((always_inline)) void fill_cache(void)
{
    CAPTURE("fill_cache");
    BARRIER();
}

static NOINLINE void build_index(void)
{
    fill_cache();
    BARRIER();
}

static NOINLINE void grow_buffer(const char *name)
{
    CAPTURE(name);
    BARRIER();
}

static NOINLINE void read_rows(void)
{
    grow_buffer("grow_buffer_from_read_rows");
    BARRIER();
}

static NOINLINE void write_rows(void)
{
    grow_buffer("grow_buffer_from_write_rows");
    BARRIER();
}

static NOINLINE void load_plugin(void)
{
    names[ncaptures] = "plugin";
    depths[ncaptures] = plugin_capture(stacks[ncaptures], MAXF);
    ncaptures++;
    BARRIER();
}

static NOINLINE int recurse(int n)
{
    if (n == 0) {
        CAPTURE("recurse");
        BARRIER();
        return VARIANT;
    }
    int r = recurse(n - 1);
    BARRIER();
    return r + 1;
}

static int print_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    char path[4096];
    if (info->dlpi_name[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n < 0)
            return 0;
        path[n] = '\0';
    } else if (info->dlpi_name[0] == '/') {
        snprintf(path, sizeof path, "%s", info->dlpi_name);
    } else {
        return 0; /* the vDSO: no file */
    }
    uintptr_t start = UINTPTR_MAX, end = 0;
    char buildid[129] = "-";
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (lo < start)
                start = lo;
            if (lo + ph->p_memsz > end)
                end = lo + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)lo, *stop = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= stop) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *desc = p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                    memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz <= 64) {
                    for (unsigned j = 0; j < nh->n_descsz; j++)
                        sprintf(buildid + 2 * j, "%02x", (unsigned char)desc[j]);
                }
                p = desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    printf("module bias=0x%lx start=0x%lx end=0x%lx buildid=%s path=%s\n", (unsigned long)info->dlpi_addr,
           (unsigned long)start, (unsigned long)end, buildid, path);
    return 0;
}

int main(void)
{
    parse_config();
    build_index();
    read_rows();
    write_rows();
    load_plugin();
    int r = recurse(6);
    dl_iterate_phdr(print_module, NULL);
    for (int i = 0; i < ncaptures; i++) {
        printf("capture %s ", names[i]);
        for (int j = 0; j < depths[i]; j++)
            printf("%s%p", j ? "," : "", stacks[i][j]);
        printf("\n");
    }
    return r == 6 + VARIANT ? 0 : 1;
}
