/* unwpipe.c — a program that closes every descriptor from 3 up
 * (closefrom, as daemons do), opens two files of its own, which get the
 * lowest numbers, then allocates from a function with no unwind
 * information (no CFI: JIT code, hand-written assembly). A stack walk
 * through it goes to libunwind's frame-chain guess, which checks each
 * address by reading a byte from its validation pipe and writing one into
 * it. Had libunwind's pipe been on the numbers the program closed and got
 * back, that read would take the first byte of the program's input file
 * and the write would put a byte of the stack into its output file.
 * "vfork": first a vfork child closes every descriptor and walks the same
 * code (libunwind makes its pipe again there, in memory it shares with the
 * parent).
 * Usage: unwpipe DIR [vfork]; prints "unwpipe: in=<what it read> out=ok|<error>"
 * (tests/agent/test_fdguard.sh checks the files too). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *nocfi_alloc(size_t n);
/* A frame-pointer frame and a call to malloc, with no .cfi directives:
 * no FDE covers it. */
__asm__(".text\n"
        ".globl nocfi_alloc\n"
        ".type nocfi_alloc,@function\n"
        "nocfi_alloc:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  call malloc@PLT\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size nocfi_alloc, .-nocfi_alloc\n");

/* nocfi_alloc from 5 pages further down the stack: addresses libunwind
 * has not checked yet (it remembers the last 4 pages it checked). */
__attribute__((noinline)) static void *deep_alloc(size_t n)
{
    volatile char pad[5 * 4096];
    pad[0] = 1;
    void *p = nocfi_alloc(n);
    __asm__ volatile("" : : "r"(pad) : "memory");
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: unwpipe DIR [vfork]\n");
        return 2;
    }
    char in_path[4096], out_path[4096];
    snprintf(in_path, sizeof in_path, "%s/in", argv[1]);
    snprintf(out_path, sizeof out_path, "%s/out", argv[1]);
    free(malloc(10)); /* the agent set up (and libunwind with it) */
    closefrom(3);
    int in = open(in_path, O_RDONLY);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) {
        perror("open");
        return 1;
    }
    if (argc > 2 && strcmp(argv[2], "vfork") == 0) {
        /* A vfork child shares libunwind's memory (its pipe's numbers)
         * with this process, but not the descriptor table: it closes
         * everything and walks through the same code, so libunwind finds
         * its pipe closed and makes another. Those numbers must not end
         * up in the array this process reads them from. */
        pid_t child = vfork();
        if (child == 0) {
            closefrom(3);
            for (int i = 0; i < 16; i++)
                free(nocfi_alloc(50));
            _exit(0);
        }
        int st;
        if (child < 0 || waitpid(child, &st, 0) != child)
            return 1;
    }
    void *keep[256];
    for (int i = 0; i < 256; i++)
        keep[i] = deep_alloc(100 + (size_t)i);
    for (int i = 0; i < 256; i++)
        free(keep[i]);
    char buf[64] = {0};
    ssize_t n = read(in, buf, sizeof buf - 1);
    if (n < 0)
        snprintf(buf, sizeof buf, "(read failed)");
    buf[strcspn(buf, "\n")] = '\0';
    const char *mine = "mine\n";
    int wrote = write(out, mine, strlen(mine)) == (ssize_t)strlen(mine);
    printf("unwpipe: fds %d %d in=%s out=%s\n", in, out, buf, wrote ? "ok" : "write failed");
    return 0;
}
