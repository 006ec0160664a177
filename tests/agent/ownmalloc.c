/* ownmalloc.c — a program with a malloc of its own (malloc, free, calloc
 * and realloc defined in the executable), as one that links an allocator
 * statically: its calls, and its libraries', go to these before any
 * preloaded library's. They count the program's calls and hand them to
 * glibc's __libc_ functions, or, with OWNMALLOC_FORWARD=1 in the
 * environment, to the next definition (dlsym(RTLD_NEXT)), which is the
 * agent's when it is preloaded: the agent's must not send them back here
 * forever. Prints the count and a checksum of what it read back: the same
 * with or without the agent (tests/agent/test_allocators.sh; `memtrail
 * run` refuses it, tests/cli/test_cli.sh). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static unsigned long calls;
static int forward = -1; /* -1: not known yet */
static __thread int resolving;
static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

/* 1 when the calls go to the next definitions (ready), 0: to glibc's. */
static int forwarding(void)
{
    if (forward < 0 && !resolving) {
        resolving = 1;
        const char *f = getenv("OWNMALLOC_FORWARD"); /* getenv does not allocate */
        if (f && strcmp(f, "1") == 0) {
            next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
            next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
            next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
            next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
        }
        forward = next_malloc && next_free && next_calloc && next_realloc;
        resolving = 0;
    }
    return forward > 0;
}

void *malloc(size_t n)
{
    calls++;
    return forwarding() ? next_malloc(n) : __libc_malloc(n);
}

void free(void *p)
{
    if (forwarding())
        next_free(p);
    else
        __libc_free(p);
}

void *calloc(size_t n, size_t m)
{
    calls++;
    return forwarding() ? next_calloc(n, m) : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    calls++;
    return forwarding() ? next_realloc(p, n) : __libc_realloc(p, n);
}

int main(void)
{
    uint64_t sum = 0;
    char *s = NULL;
    for (int i = 0; i < 2000; i++) {
        s = realloc(s, (size_t)i + 16);
        s[i] = (char)('a' + i % 26);
    }
    for (int i = 0; i < 2000; i++)
        sum = sum * 31 + (unsigned char)s[i];
    free(s);
    void *keep[256];
    for (int i = 0; i < 256; i++) {
        keep[i] = i % 2 ? calloc(1, (size_t)i + 1) : malloc((size_t)i + 1);
        memset(keep[i], i, (size_t)i + 1);
    }
    for (int i = 0; i < 256; i++) {
        sum = sum * 31 + ((unsigned char *)keep[i])[i];
        free(keep[i]);
    }
    char *d = strdup("through libc's strdup"); /* libc's own call of malloc comes here too */
    sum = sum * 31 + strlen(d);
    free(d);
    printf("ownmalloc: %lu calls, sum %llu\n", calls, (unsigned long long)sum);
    return 0;
}
