/* nokcmp.c — a sandbox whose seccomp filter kills the process on kcmp (as
 * systemd's SystemCallFilter= and browser sandboxes may): a vfork child
 * that execs or calls _exit must not make that call (the agent tells a
 * vfork child by a page the kernel wipes in a copied child: exec.c), and
 * lives; so does a raw clone child, which under a filter is not claimed
 * (no report of its own). Prints "vfork+exec STATUS", "vfork+_exit
 * STATUS" and "clone+exit STATUS" (0: lived). */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kcmp, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        return 1;
    }
    char *argv[] = {"/bin/true", NULL};
    int st = -1;
    pid_t pid = vfork();
    if (pid == 0) {
        execv("/bin/true", argv);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    printf("vfork+exec %#x\n", st);
    pid = vfork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, &st, 0);
    printf("vfork+_exit %#x\n", st);
    fflush(stdout);
    pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        char *volatile p = malloc(4242);
        p[0] = 1;
        exit(0);
    }
    waitpid(pid, &st, 0);
    printf("clone+exit %#x\n", st);
    return 0;
}
