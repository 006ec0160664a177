/* stacklib.c — the shared library of stackprog.c: a call chain that starts
 * in the program and ends in here, so a recorded stack spans two modules. */
#include <stdint.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static uintptr_t lib_here(void)
{
    return (uintptr_t)__builtin_return_address(0);
}

NOINLINE static void lib_alloc(uintptr_t *frames)
{
    frames[0] = lib_here();
    frames[1] = (uintptr_t)__builtin_return_address(0);
}

NOINLINE void lib_make_buffer(uintptr_t *frames);
NOINLINE void lib_make_buffer(uintptr_t *frames)
{
    lib_alloc(frames);
    frames[2] = (uintptr_t)__builtin_return_address(0);
}
