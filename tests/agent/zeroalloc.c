/* zeroalloc.c — blocks whose overhead is all there is (test_agent.sh):
 * 100000 malloc(0), then 200 posix_memalign of 1 byte at 4096, all freed.
 * The agent's overhead peaks at 100000 headers (24 bytes each with the
 * room malloc(0) gets) while the program's bytes never pass 200. */
#include <stdlib.h>

int main(void)
{
    static void *p[100000];
    for (int i = 0; i < 100000; i++)
        if (!(p[i] = malloc(0)))
            return 1;
    for (int i = 0; i < 100000; i++)
        free(p[i]);
    for (int i = 0; i < 200; i++)
        if (posix_memalign(&p[i], 4096, 1))
            return 1;
    for (int i = 0; i < 200; i++)
        free(p[i]);
    return 0;
}
