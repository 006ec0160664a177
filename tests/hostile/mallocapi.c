/* mallocapi.c — a hostile program for the agent: the corners of glibc's
 * malloc API beyond malloc/free (malloc_trim, mallinfo2, malloc_info,
 * mallopt, malloc_usable_size, aligned_alloc, memalign, valloc, pvalloc,
 * posix_memalign, reallocarray, realloc to 0, overflowing sizes, and
 * __libc_malloc's blocks freed with free). Prints only facts that hold
 * whatever the addresses and timing: a tracker must keep every one. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *p);

#define ALIGNED(p, a) (((uintptr_t)(p) % (a)) == 0)

/* Read at run time so the compiler neither warns about nor folds the
 * impossible sizes. */
static volatile size_t size_max = SIZE_MAX;

int main(void)
{
    long page = sysconf(_SC_PAGESIZE);

    char *p = malloc(100);
    printf("malloc_usable_size(100) >= 100: %d\n", malloc_usable_size(p) >= 100);
    printf("malloc_usable_size(NULL): %zu\n", malloc_usable_size(NULL));
    p = realloc(p, 1000);
    printf("after realloc usable >= 1000: %d\n", malloc_usable_size(p) >= 1000);
    memset(p, 7, malloc_usable_size(p)); /* the whole usable size is the program's */
    free(p);

    void *a = aligned_alloc(64, 256);
    printf("aligned_alloc(64, 256): aligned %d, usable >= 256: %d\n", a && ALIGNED(a, 64),
           a && malloc_usable_size(a) >= 256);
    free(a);
    a = aligned_alloc(4096, 4096 * 3);
    printf("aligned_alloc(4096, 12288): aligned %d\n", a && ALIGNED(a, 4096));
    free(a);

    void *m = memalign(4096, 100);
    printf("memalign(4096, 100): aligned %d\n", m && ALIGNED(m, 4096));
    free(m);
    m = memalign(128, 1 << 20);
    printf("memalign(128, 1 MiB): aligned %d\n", m && ALIGNED(m, 128));
    free(m);

    void *v = valloc(100);
    printf("valloc(100): page-aligned %d\n", v && ALIGNED(v, (uintptr_t)page));
    free(v);
    v = pvalloc(100);
    printf("pvalloc(100): page-aligned %d, usable >= page: %d\n", v && ALIGNED(v, (uintptr_t)page),
           v && malloc_usable_size(v) >= (size_t)page);
    free(v);

    void *pm = NULL;
    int rc = posix_memalign(&pm, 256, 1000);
    printf("posix_memalign(256, 1000): rc %d, aligned %d\n", rc, pm && ALIGNED(pm, 256));
    free(pm);
    pm = (void *)1;
    rc = posix_memalign(&pm, 3, 100);
    printf("posix_memalign(3, 100): EINVAL %d, untouched %d\n", rc == EINVAL, pm == (void *)1);

    int *arr = reallocarray(NULL, 10, sizeof(int));
    for (int i = 0; i < 10; i++)
        arr[i] = i;
    arr = reallocarray(arr, 1000, sizeof(int));
    printf("reallocarray keeps contents: %d\n", arr && arr[9] == 9);
    errno = 0;
    int *over = reallocarray(arr, size_max / 2, 3);
    printf("reallocarray overflow: NULL %d, ENOMEM %d\n", over == NULL, errno == ENOMEM);
    free(over ? over : arr);

    errno = 0;
    void *huge = malloc(size_max - 4096);
    printf("malloc(size_max - 4096): NULL %d, ENOMEM %d\n", huge == NULL, errno == ENOMEM);
    errno = 0;
    void *cover = calloc(size_max / 4, 8);
    printf("calloc overflow: NULL %d, ENOMEM %d\n", cover == NULL, errno == ENOMEM);
    char *z = calloc(1000, 1000);
    int zero = 1;
    for (size_t i = 0; i < 1000 * 1000; i++)
        zero &= z[i] == 0;
    printf("calloc zeroed: %d\n", zero);
    free(z);

    void *r0 = malloc(50);
    r0 = realloc(r0, 0);
    printf("realloc(p, 0) returns NULL: %d\n", r0 == NULL);
    free(r0);
    void *rn = realloc(NULL, 30);
    printf("realloc(NULL, 30) allocates: %d\n", rn != NULL);
    free(rn);
    void *m0 = malloc(0);
    printf("malloc(0) non-NULL: %d\n", m0 != NULL);
    free(m0);
    free(NULL);

    printf("mallopt(M_MMAP_THRESHOLD, 1 MiB): %d\n", mallopt(M_MMAP_THRESHOLD, 1 << 20));
    printf("mallopt(M_TRIM_THRESHOLD, 4 MiB): %d\n", mallopt(M_TRIM_THRESHOLD, 4 << 20));
    printf("mallopt(M_ARENA_MAX, 2): %d\n", mallopt(M_ARENA_MAX, 2));

    void *blocks[1000];
    for (int i = 0; i < 1000; i++)
        blocks[i] = malloc(2000);
    struct mallinfo2 mi = mallinfo2();
    printf("mallinfo2 sees the 2 MB in use: %d\n", mi.uordblks + mi.hblkhd >= 2000 * 1000);
    for (int i = 0; i < 1000; i++)
        free(blocks[i]);
    (void)malloc_trim(0); /* 0 or 1 depending on what was free: not printed */
    printf("malloc_trim returned\n");

    FILE *null = fopen("/dev/null", "w");
    printf("malloc_info: %d\n", null ? malloc_info(0, null) : -99);
    if (null)
        fclose(null);

    void *lm = __libc_malloc(123);
    memset(lm, 1, 123);
    free(lm);
    printf("__libc_malloc then free: survived\n");
    void *lm2 = __libc_malloc(77);
    __libc_free(lm2);
    printf("__libc_malloc then __libc_free: survived\n");

    char *s = strdup("strdup"), *sn = strndup("strndup-long", 7);
    printf("%s %s\n", s, sn);
    free(s);
    free(sn);
    return 0;
}
