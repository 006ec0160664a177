/* run_check.c — what `memtrail run` verifies before starting a program:
 * finding it on PATH as execvp would, and refusing the programs the agent
 * cannot get into (setuid/setgid or file capabilities: the loader ignores
 * LD_PRELOAD; statically linked: there is no malloc to interpose; a
 * malloc of the program's own: it comes before the agent's; not a
 * 64-bit ELF: the agent cannot be loaded). ELF headers are read with
 * pread() and checked by hand. */
#include "cli/cli.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_ELFDATA ELFDATA2LSB
#else
#define HOST_ELFDATA ELFDATA2MSB
#endif

/* execvp's search: names with a slash are used as they are; otherwise each
 * PATH entry in turn (an empty entry is the current directory; no PATH
 * means confstr's default), taking the first executable regular file. */
int run_resolve_command(const char *cmd, char **resolved)
{
    *resolved = NULL;
    if (*cmd == '\0')
        return -ENOENT;
    if (strchr(cmd, '/')) {
        *resolved = strdup(cmd);
        return *resolved ? 0 : -ENOMEM;
    }
    const char *path = getenv("PATH");
    char fallback[256];
    if (!path) {
        size_t n = confstr(_CS_PATH, fallback, sizeof fallback);
        path = n > 0 && n <= sizeof fallback ? fallback : "/bin:/usr/bin";
    }
    int result = -ENOENT;
    for (const char *p = path;; p++) {
        size_t len = strcspn(p, ":");
        char *cand;
        if (asprintf(&cand, "%.*s%s%s", (int)len, len ? p : ".", "/", cmd) < 0)
            return -ENOMEM;
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0) {
                *resolved = cand;
                return 0;
            }
            result = -EACCES; /* as execvp: remember, keep looking */
        }
        free(cand);
        p += len;
        if (*p == '\0')
            break;
    }
    return result;
}

static bool read_at(int fd, void *buf, size_t len, off_t off)
{
    ssize_t n = pread(fd, buf, len, off);
    return n == (ssize_t)len;
}

/* 0 when the ELF file at fd has a PT_INTERP program header (dynamically
 * linked), 1 when it has none (static), -1 when its headers are unreadable. */
static int elf_is_static(int fd, const Elf64_Ehdr *eh)
{
    uint64_t phnum = eh->e_phnum;
    if (phnum == PN_XNUM) { /* the real count is in section header 0 */
        Elf64_Shdr sh0;
        if (eh->e_shoff == 0 || !read_at(fd, &sh0, sizeof sh0, (off_t)eh->e_shoff))
            return -1;
        phnum = sh0.sh_info;
    }
    if (eh->e_phentsize < sizeof(Elf64_Phdr) || eh->e_phoff == 0 || phnum == 0)
        return phnum == 0 ? 1 : -1;
    for (uint64_t k = 0; k < phnum; k++) {
        Elf64_Phdr ph;
        if (!read_at(fd, &ph, sizeof ph, (off_t)(eh->e_phoff + k * eh->e_phentsize)))
            return -1;
        if (ph.p_type == PT_INTERP)
            return 0;
    }
    return 1;
}

/* Whether the ELF file at fd defines malloc in its dynamic symbol table
 * (a function in a section of its own): then the program's calls, and its
 * libraries', go to that definition, which comes before any preloaded
 * library's. 1 or 0; 0 too when that cannot be told (no section headers,
 * tables out of the file's bounds or too large to read: the agent tells
 * at run time). */
#define DYNSTR_MAX (64u << 20)
static int elf_defines_malloc(int fd, const Elf64_Ehdr *eh, off_t file_size)
{
    if (eh->e_shoff == 0 || eh->e_shentsize < sizeof(Elf64_Shdr))
        return 0;
    uint64_t shnum = eh->e_shnum;
    Elf64_Shdr sh;
    if (shnum == 0) { /* SHN_XINDEX-style: the real count is in section header 0 */
        if (!read_at(fd, &sh, sizeof sh, (off_t)eh->e_shoff))
            return 0;
        shnum = sh.sh_size;
    }
    if (eh->e_shoff > (uint64_t)file_size || shnum > ((uint64_t)file_size - eh->e_shoff) / eh->e_shentsize)
        return 0;
    uint64_t k;
    for (k = 0; k < shnum; k++) {
        if (!read_at(fd, &sh, sizeof sh, (off_t)(eh->e_shoff + k * eh->e_shentsize)))
            return 0;
        if (sh.sh_type == SHT_DYNSYM)
            break;
    }
    Elf64_Shdr str;
    if (k == shnum || sh.sh_link >= shnum || sh.sh_offset > (uint64_t)file_size ||
        sh.sh_size > (uint64_t)file_size - sh.sh_offset ||
        !read_at(fd, &str, sizeof str, (off_t)(eh->e_shoff + (uint64_t)sh.sh_link * eh->e_shentsize)) ||
        str.sh_size > DYNSTR_MAX || str.sh_offset > (uint64_t)file_size ||
        str.sh_size > (uint64_t)file_size - str.sh_offset)
        return 0;
    char *names = malloc(str.sh_size + 1);
    if (!names || !read_at(fd, names, str.sh_size, (off_t)str.sh_offset)) {
        free(names);
        return 0;
    }
    names[str.sh_size] = '\0';
    uint64_t nsyms = sh.sh_size / sizeof(Elf64_Sym);
    Elf64_Sym syms[256];
    int found = 0;
    for (uint64_t i = 0; i < nsyms && !found; i += 256) {
        uint64_t m = nsyms - i < 256 ? nsyms - i : 256;
        if (!read_at(fd, syms, m * sizeof(Elf64_Sym), (off_t)(sh.sh_offset + i * sizeof(Elf64_Sym))))
            break;
        for (uint64_t j = 0; j < m && !found; j++) {
            unsigned type = ELF64_ST_TYPE(syms[j].st_info);
            found = syms[j].st_shndx != SHN_UNDEF && (type == STT_FUNC || type == STT_GNU_IFUNC) &&
                    syms[j].st_name < str.sh_size && strcmp(names + syms[j].st_name, "malloc") == 0;
        }
    }
    free(names);
    return found;
}

static int check_program(const char *path, const char *shown, int depth)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return cli_error("cannot run %s: %s", shown, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return cli_error("cannot run %s: it is a directory", shown);
    if ((st.st_mode & S_ISUID) || ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP)))
        return cli_error("%s is setuid/setgid: the loader ignores LD_PRELOAD, so nothing could be tracked",
                         shown);
    if (getxattr(path, "security.capability", NULL, 0) > 0)
        return cli_error("%s has file capabilities: the loader ignores LD_PRELOAD, so nothing could be "
                         "tracked",
                         shown);

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* execute-only: exec may still work; nothing more to check */
    unsigned char head[256];
    ssize_t n = pread(fd, head, sizeof head - 1, 0);
    int rc = 0;
    if (n >= 2 && head[0] == '#' && head[1] == '!') {
        /* A script: check its interpreter, as the kernel will run that. */
        head[n] = '\0';
        char *interp = (char *)head + 2 + strspn((char *)head + 2, " \t");
        interp[strcspn(interp, " \t\n")] = '\0';
        if (*interp == '/' && depth < 4) {
            char *copy = strdup(interp);
            rc = copy ? check_program(copy, copy, depth + 1) : cli_error("out of memory");
            free(copy);
        }
    } else if (n >= EI_NIDENT && memcmp(head, ELFMAG, SELFMAG) == 0) {
        Elf64_Ehdr eh;
        if (head[EI_CLASS] != ELFCLASS64) {
            rc = cli_error("%s is not a 64-bit program: the 64-bit agent cannot be loaded into it", shown);
        } else if (!read_at(fd, &eh, sizeof eh, 0)) {
            rc = cli_error("%s: truncated ELF header", shown);
        } else if (eh.e_ident[EI_DATA] == HOST_ELFDATA) {
            /* (a foreign byte order cannot run here anyway: exec will say so) */
            int s = elf_is_static(fd, &eh);
            if (s < 0)
                rc = cli_error("%s: cannot read its ELF program headers (truncated file?)", shown);
            else if (s > 0)
                rc = cli_error("%s is statically linked: malloc cannot be interposed in a static binary, "
                               "so nothing could be tracked",
                               shown);
            else if (elf_defines_malloc(fd, &eh, st.st_size))
                rc = cli_error(
                    "%s defines malloc itself (an allocator linked into it): its calls, and its "
                    "libraries', go to that malloc before any preloaded library's, so nothing could "
                    "be tracked",
                    shown);
        }
    }
    close(fd);
    return rc;
}

int run_check_program(const char *path, const char *shown)
{
    return check_program(path, shown, 0);
}
