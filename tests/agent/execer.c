/* execer.c — runs itself again through each exec-family entry point, with
 * the environment kept, reduced to PATH, or empty, so the test can see
 * whether the agent survives the exec. The program it runs ("check")
 * reports what it sees: its pid and parent, whether libmemtrail.so is
 * mapped (/proc/self/maps, the kernel's word), LD_PRELOAD, and its
 * arguments. Other modes cover vfork children and failed execs, keeping a
 * ledger of what the process allocates afterwards.
 *
 * Usage:
 *   execer check ARGS...            print "check pid=P ppid=Q agent=0|1 preload=... args=a|b"
 *   execer via ENTRY ENV            exec "execer check x 'y z'" through ENTRY; ENV is keep,
 *                                   clear (only PATH), empty (no variables at all) or
 *                                   big (PATH and 1200 others, none the agent's)
 *   execer vfork-exit LEDGER        a vfork child that _exits at once; then allocate
 *   execer vfork-fail LEDGER        a vfork child whose execve fails; then allocate
 *   execer exec-fail ENTRY LEDGER   an exec of a missing program through ENTRY; then allocate
 * ENTRY: execve execv execvp execvpe execl execlp execle fexecve execveat
 *        posix_spawn posix_spawnp vfork */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "ledger.h"
#include "memtrail.h"

static char self[PATH_MAX];
static char path_var[PATH_MAX + 64]; /* "PATH=<our directory>:/usr/bin:/bin" */

static int check(int argc, char **argv)
{
    int agent = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[PATH_MAX + 256];
    while (maps && fgets(line, sizeof line, maps))
        agent |= strstr(line, "/libmemtrail.so") != NULL;
    if (maps)
        fclose(maps);
    const char *pre = getenv("LD_PRELOAD");
    int nenv = 0;
    for (char **e = environ; e && *e; e++)
        nenv++;
    printf("check pid=%d ppid=%d agent=%d preload=%s nenv=%d args=", (int)getpid(), (int)getppid(), agent,
           pre ? pre : "-", nenv);
    for (int i = 2; i < argc; i++)
        printf("%s%s", i > 2 ? "|" : "", argv[i]);
    printf("\n");
    return 0;
}

static void *m(ledger *l, size_t n)
{
    void *p = malloc(n);
    EXPECT(p != NULL, "malloc(%zu)", n);
    ledger_alloc(l, (int64_t)n);
    return p;
}

/* What the process does after the vfork child or the failed exec: known
 * allocations in category "after", which its final report must show. */
static int allocate_after(const char *ledger_path)
{
    ledger l = {0};
    EXPECT(mt_tag_push("after") == 0, "mt_tag_push (agent active: %d)", mt_is_active());
    void *a = m(&l, 1000), *b = m(&l, 30000);
    char *c = m(&l, 7);
    free(a);
    ledger_free(&l, 1000);
    c = realloc(c, 700);
    ledger_resize(&l, 7, 700);
    (void)b;
    (void)c;
    mt_tag_pop();
    ledger_write(ledger_path, "after", &l, 0);
    printf("%s after: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures ? 1 : 0;
}

static int wait_for(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 126;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs `target` (argv[0] "execer") through one entry point. Returns only
 * when the exec failed (-1, errno set) or for the spawn variants, which
 * wait and return the child's status. */
static int run_via(const char *entry, const char *target, char **env)
{
    char *args[] = {(char *)"execer", (char *)"check", (char *)"x", (char *)"y z", NULL};
    /* The p variants search PATH for a bare name; with no PATH at all
     * (env "empty") they are given the full path. */
    int have_path = getenv("PATH") != NULL || (env && env[0]);
    const char *name = have_path && strcmp(target, self) == 0 ? "execer" : target;
    if (strcmp(entry, "execve") == 0)
        return execve(target, args, env);
    if (strcmp(entry, "execv") == 0)
        return execv(target, args);
    if (strcmp(entry, "execvp") == 0)
        return execvp(name, args);
    if (strcmp(entry, "execvpe") == 0)
        return execvpe(name, args, env);
    if (strcmp(entry, "execl") == 0)
        return execl(target, "execer", "check", "x", "y z", (char *)NULL);
    if (strcmp(entry, "execlp") == 0)
        return execlp(name, "execer", "check", "x", "y z", (char *)NULL);
    if (strcmp(entry, "execle") == 0)
        return execle(target, "execer", "check", "x", "y z", (char *)NULL, env);
    if (strcmp(entry, "fexecve") == 0) {
        int fd = open(target, O_RDONLY);
        if (fd < 0)
            return -1;
        return fexecve(fd, args, env);
    }
    if (strcmp(entry, "execveat") == 0) {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
        return execveat(AT_FDCWD, target, args, env, 0);
#else
        printf("SKIP execveat: libc has none\n");
        exit(0);
#endif
    }
    if (strcmp(entry, "posix_spawn") == 0 || strcmp(entry, "posix_spawnp") == 0) {
        pid_t pid;
        int rc = entry[11] == 'p' ? posix_spawnp(&pid, name, NULL, NULL, args, env)
                                  : posix_spawn(&pid, target, NULL, NULL, args, env);
        if (rc != 0) {
            errno = rc;
            return -1;
        }
        printf("spawned pid=%d\n", (int)pid);
        fflush(stdout);
        return wait_for(pid);
    }
    if (strcmp(entry, "vfork") == 0) {
        fflush(stdout);
        pid_t pid = vfork();
        if (pid == 0) {
            execve(target, args, env);
            _exit(127);
        }
        if (pid < 0)
            return -1;
        return wait_for(pid);
    }
    errno = EINVAL;
    return -1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "check") == 0)
        return check(argc, argv);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return 99;
    self[n] = '\0';
    snprintf(path_var, sizeof path_var, "PATH=%.*s:/usr/bin:/bin", (int)(strrchr(self, '/') - self), self);

    if (argc == 4 && strcmp(argv[1], "via") == 0) {
        const char *entry = argv[2], *kind = argv[3];
        char *path_only[] = {path_var, NULL}, *none[] = {NULL};
        char **env;
        /* The environ-using entry points see the same environment. */
        if (strcmp(kind, "keep") == 0) {
            putenv(path_var);
            env = environ;
        } else if (strcmp(kind, "clear") == 0) {
            clearenv();
            putenv(path_var);
            env = path_only;
        } else if (strcmp(kind, "big") == 0) {
            /* Too big for the agent's stack copy: it must use mmap. */
            enum { NVARS = 1200 };
            clearenv();
            env = calloc(NVARS + 2, sizeof *env);
            for (int i = 0; env && i < NVARS; i++) {
                char *v = malloc(32);
                snprintf(v, 32, "MEMTRAIL_TEST_VAR%d=%d", i, i);
                env[i] = v;
                putenv(v);
            }
            if (env) {
                env[NVARS] = path_var;
                putenv(path_var);
            }
        } else {
            clearenv();
            env = none;
        }
        fflush(stdout);
        int rc = run_via(entry, self, env);
        if (rc == -1) {
            printf("FAIL %s: %s\n", entry, strerror(errno));
            return 1;
        }
        return rc;
    }
    if (argc == 3 && (strcmp(argv[1], "vfork-exit") == 0 || strcmp(argv[1], "vfork-fail") == 0)) {
        int fail = argv[1][6] == 'f';
        fflush(stdout);
        pid_t pid = vfork();
        if (pid == 0) {
            if (fail) {
                char *args[] = {(char *)"nothing", NULL}, *env[] = {NULL};
                execve("/nonexistent/memtrail-test", args, env);
            }
            _exit(fail ? 127 : 0);
        }
        EXPECT(pid > 0, "vfork: %s", strerror(errno));
        int st = wait_for(pid);
        EXPECT(st == (fail ? 127 : 0), "vfork child status %d", st);
        printf("vchild pid=%d\n", (int)pid);
        return allocate_after(argv[2]);
    }
    if (argc == 4 && strcmp(argv[1], "exec-fail") == 0) {
        fflush(stdout);
        int rc = run_via(argv[2], "/nonexistent/memtrail-test", environ);
        EXPECT(rc == -1 && errno == ENOENT, "%s of a missing program: rc %d, %s", argv[2], rc,
               strerror(errno));
        return allocate_after(argv[3]);
    }
    fprintf(stderr, "usage: execer check ARGS... | via ENTRY keep|clear|empty|big | vfork-exit LEDGER | "
                    "vfork-fail LEDGER | exec-fail ENTRY LEDGER\n");
    return 2;
}
