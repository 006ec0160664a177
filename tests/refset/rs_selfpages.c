/* rs_selfpages.c — whether every page of the agent's own data is in
 * memory when the program's first viewport can begin: the agent's
 * writable segments (found with dl_iterate_phdr by the name
 * libmemtrail.so), each page's present bit read from /proc/self/pagemap.
 * Prints "AGENT_PAGES <total> <present>", or "AGENT_PAGES none" when no
 * agent is loaded. An agent page first referenced later, inside a
 * viewport, would count as the program's. */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int pm = -1, found;
static unsigned long total, present;

static int each(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libmemtrail.so"))
        return 0;
    found = 1;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
            continue;
        uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)4095;
        uintptr_t hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        for (uintptr_t a = lo; a < hi; a += 4096) {
            uint64_t e = 0;
            if (pread(pm, &e, sizeof e, (off_t)(a / 4096 * 8)) != (ssize_t)sizeof e)
                return -1;
            total++;
            present += (e >> 63) & 1;
        }
    }
    return 1;
}

int main(void)
{
    pm = open("/proc/self/pagemap", O_RDONLY);
    if (pm < 0 || dl_iterate_phdr(each, NULL) < 0) {
        perror("/proc/self/pagemap");
        return 2;
    }
    if (found)
        printf("AGENT_PAGES %lu %lu\n", total, present);
    else
        printf("AGENT_PAGES none\n");
    return 0;
}
