/* forkev: 1000 blocks of 4242 bytes, a fork, then 1000 of 1111 bytes in
 * the parent and 1000 of 2222 in the child (each freed at once); prints
 * "child PID" and exits 0 once the child has. The truth for an agent
 * session's event_file across a fork (tests/agent/test_sessions.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void churn(size_t size)
{
    for (int i = 0; i < 1000; i++) {
        void *volatile p = malloc(size);
        free(p);
    }
}

int main(void)
{
    churn(4242);
    fflush(stdout);
    pid_t c = fork();
    if (c < 0) {
        perror("forkev: fork");
        return 1;
    }
    churn(c == 0 ? 2222 : 1111);
    if (c == 0)
        _exit(0);
    int st = 0;
    waitpid(c, &st, 0);
    printf("child %d\n", (int)c);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
