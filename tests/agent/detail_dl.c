/* detail_dl.c — unwind rules must not outlive the code they describe.
 * libdl_a.so's f is called and unloaded; after N more dlopen/dlclose
 * cycles of libdl_c.so, libdl_b.so is loaded (at the same address, the
 * same code offsets, a larger frame) and its f is called from call(),
 * with stack residue planted where a stale rule would look.
 * Usage: detail_dl DIR N   (DIR holds the libraries) */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*alloc_fn)(size_t);
void plant(uintptr_t v);
void *call(alloc_fn f, size_t n, uintptr_t v);

__attribute__((noinline)) void plant(uintptr_t v)
{
    uintptr_t a[64];
    for (int i = 0; i < 64; i++)
        a[i] = v; /* the stack f's frame will lie on */
    __asm__ volatile("" : : "r"(a) : "memory");
}

__attribute__((noinline)) void *call(alloc_fn f, size_t n, uintptr_t v)
{
    if (v)
        plant(v);
    void *p = f(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *open_lib(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "detail_dl: %s\n", dlerror());
        exit(2);
    }
    return h;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int cycles = atoi(argv[2]);
    void *a = open_lib(argv[1], "libdl_a.so");
    void *pa = call((alloc_fn)dlsym(a, "f"), 1001, 0);
    dlclose(a);
    for (int i = 0; i < cycles; i++)
        dlclose(open_lib(argv[1], "libdl_c.so"));
    void *b = open_lib(argv[1], "libdl_b.so");
    uintptr_t g = (uintptr_t)dlsym(b, "g");
    void *pb = call((alloc_fn)dlsym(b, "f"), 2002, g + 1);
    printf("%p %p\n", pa, pb);
    return 0;
}
