/* stackprog.c — real return addresses for the export tests' detail-report
 * fixtures. It records, in known call chains, what a detail-mode agent
 * would: the return address inside the function that "allocates" (after a
 * call, as after a call of malloc), then each caller's return address,
 * innermost first; and the load bias, PT_LOAD span and build-id of itself
 * and of libstacklib.so (dl_iterate_phdr). It prints
 *     module NAME bias=0x.. start=0x.. end=0x.. buildid=HEX path=PATH
 *     stack NAME 0xA,0xB,...
 * which tests/export/test_export.sh turns into a .mtr. Built with -O0 -g
 * so that every named function keeps its own frame. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

void lib_make_buffer(uintptr_t *frames);

static uintptr_t stk[8];

NOINLINE static uintptr_t here(void)
{
    return (uintptr_t)__builtin_return_address(0);
}

static void print_stack(const char *name, const uintptr_t *frames, int n)
{
    printf("stack %s ", name);
    for (int i = 0; i < n; i++)
        printf("%s0x%lx", i ? "," : "", (unsigned long)frames[i]);
    printf("\n");
}

/* main -> load_settings -> parse_config (twice, from two call sites) */
NOINLINE static void parse_config(void)
{
    stk[0] = here();
    stk[1] = (uintptr_t)__builtin_return_address(0);
}

NOINLINE static void load_settings(uintptr_t *first, uintptr_t *second)
{
    parse_config();
    memcpy(first, stk, 2 * sizeof *stk);
    parse_config();
    memcpy(second, stk, 2 * sizeof *stk);
    first[2] = second[2] = (uintptr_t)__builtin_return_address(0);
}

/* main -> build_index -> index_insert (inlined) */
static inline __attribute__((always_inline)) void index_insert(void)
{
    stk[0] = here();
}

NOINLINE static void build_index(void)
{
    index_insert();
    stk[1] = (uintptr_t)__builtin_return_address(0);
}

static const char *want_lib;

static int on_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    char path[4096];
    const char *name;
    if (!info->dlpi_name[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n < 0)
            return 0;
        path[n] = '\0';
        name = "prog";
    } else if (strstr(info->dlpi_name, want_lib)) {
        if (!realpath(info->dlpi_name, path))
            return 0;
        name = "lib";
    } else {
        return 0;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    char buildid[129] = "-";
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            if (ph->p_vaddr < lo)
                lo = ph->p_vaddr;
            if (ph->p_vaddr + ph->p_memsz > hi)
                hi = ph->p_vaddr + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *desc = p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                    memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz <= 64) {
                    for (unsigned k = 0; k < nh->n_descsz; k++)
                        sprintf(buildid + 2 * k, "%02x", (unsigned char)desc[k]);
                }
                p = desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    printf("module %s bias=0x%lx start=0x%lx end=0x%lx buildid=%s path=%s\n", name,
           (unsigned long)info->dlpi_addr, (unsigned long)(info->dlpi_addr + lo),
           (unsigned long)(info->dlpi_addr + hi), buildid, path);
    return 0;
}

int main(void)
{
    uintptr_t first[3], second[3], lib[3];
    load_settings(first, second);
    print_stack("config1", first, 3);
    print_stack("config2", second, 3);
    build_index();
    print_stack("index", stk, 2);
    lib_make_buffer(lib);
    print_stack("lib", lib, 3);
    want_lib = "libstacklib.so";
    dl_iterate_phdr(on_object, NULL);
    return 0;
}
