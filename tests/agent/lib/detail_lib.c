/* A shared library for tests/agent/detail.c: allocations made from a
 * function in another module. */
#include <stdlib.h>

void *detail_lib_alloc(size_t n);

__attribute__((noinline)) void *detail_lib_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory"); /* no tail call: this frame stays on the stack */
    return p;
}
