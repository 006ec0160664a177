/* memtrail_alloc.h — report a custom allocator's blocks to memtrail without
 * linking anything: the functions of memtrail.h are declared weak here, so
 * they are the agent's when it is preloaded and absent (the wrappers then do
 * nothing) when it is not.
 *
 *   #include <memtrail_alloc.h>
 *   void *pool_get(struct pool *p, size_t n) {
 *       void *b = ...;
 *       MT_ALLOC(b, n);
 *       return b;
 *   }
 *   void pool_put(struct pool *p, void *b) { MT_FREE(b); ... }
 */
#ifndef MEMTRAIL_ALLOC_H
#define MEMTRAIL_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void mt_alloc_report(const void *ptr, size_t size) __attribute__((weak));
void mt_free_report(const void *ptr) __attribute__((weak));
void mt_realloc_report(const void *old, const void *ptr, size_t size) __attribute__((weak));

static inline void MT_ALLOC(const void *ptr, size_t size)
{
    if (mt_alloc_report)
        mt_alloc_report(ptr, size);
}
static inline void MT_FREE(const void *ptr)
{
    if (mt_free_report)
        mt_free_report(ptr);
}
static inline void MT_REALLOC(const void *old, const void *ptr, size_t size)
{
    if (mt_realloc_report)
        mt_realloc_report(old, ptr, size);
}

#ifdef __cplusplus
}
#endif

#endif
