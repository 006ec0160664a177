/* xe_ufork.c — a child made by _Fork (which runs no fork handlers) keeps its
 * event sessions working: under NO_EVENT_LOSS it must not wait for ever for a
 * dispatcher it never got. Exits 0 when the child finished. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
#include <dirent.h>
#include <sys/wait.h>
extern pid_t _Fork(void);
static int tasks(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}
int main(void)
{
    for (int i = 0; i < 1000; i++) {
        void *p = malloc(100);
        free(p);
    }
    printf("threads in parent: %d\n", tasks());
    fflush(stdout);
    pid_t pid = _Fork();
    if (pid == 0) {
        for (int i = 0; i < 100000; i++) {
            void *p = malloc(100);
            free(p);
        }
        _exit(0);
    }
    for (int i = 0; i < 30; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            printf("child exited\n");
            return 0;
        }
        usleep(100000);
    }
    printf("child still running after 3 s\n");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "cat /proc/%d/wchan; echo; cat /proc/%d/stat | cut -d' ' -f3", pid, pid);
    system(cmd);
    kill(pid, SIGKILL);
    return 1;
}
