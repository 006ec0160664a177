/* exec.c — what happens to the agent when the process runs another
 * program: the report written just before the image is replaced (reason
 * `exec`), and the option follow_exec.
 *
 * follow_exec=off (the default, like valgrind's): exec'd programs run
 * untracked. At start-up our library is removed from LD_PRELOAD in the
 * process's own environment, in place; forked children keep tracking
 * anyway, since fork keeps the agent loaded.
 *
 * follow_exec=on: every exec-family entry point is interposed (glibc's
 * execvp, execl, posix_spawn... reach execve inside libc, not through the
 * PLT, so each must be wrapped) and an environment that lacks our library
 * in LD_PRELOAD, or lacks MEMTRAIL_OPTIONS, is passed on as a copy with
 * them added. The copy is built without malloc: an exec may run in a vfork
 * child, which shares the parent's heap, memory and thread-local state. It
 * lives on the stack (reclaimed with the frame, so a vfork child leaves
 * nothing behind in its parent's address space), or, when it is too big
 * for that, in pages from mmap that are unmapped if the exec returns.
 *
 * A vfork child must never write a report (it has its own pid but the
 * parent's counters): the pid is noted at start-up and in fork children,
 * and reports are written only by the process whose pid that is. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/record.h"
#include "agent/site.h"
#include "agent/trace.h"
#include "common/out.h"

int mt_follow_exec;

static pid_t own_pid;

/* ---- the process that owns the counters -------------------------------- */

/* A page the kernel zeroes in a child that gets a copy of our memory
 * (fork, _Fork, a raw clone without CLONE_VM: MADV_WIPEONFORK, Linux
 * 4.14) and leaves as it is for one that shares it (vfork, CLONE_VM): a
 * vfork child is told without a system call (no kcmp, which a seccomp
 * filter may answer by killing the child). NULL: no such page. */
static volatile unsigned char *mem_mark;

void mt_exec_note_pid(void)
{
    own_pid = getpid();
    if (!mem_mark) {
        long p = syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != -1 && syscall(SYS_madvise, p, 4096, MADV_WIPEONFORK) == 0)
            mem_mark = (volatile unsigned char *)p;
        else if (p != -1)
            syscall(SYS_munmap, p, 4096);
    }
    if (mem_mark)
        *mem_mark = 1;
}

/* getpid() is a system call (glibc no longer caches it), so a vfork child
 * sees its own pid here while own_pid is still its parent's. */
int mt_own_process(void)
{
    return getpid() == own_pid;
}

/* Whether this process shares its memory with process `other`: a vfork
 * child with its parent, a CLONE_VM child with its maker. Unknown (no
 * kcmp: an older kernel, a seccomp filter, another user's process, or
 * `other` gone) counts as shared: a child wrongly taken for a vfork child
 * writes no report, one wrongly taken for its own would write into its
 * parent's memory. */
static int shares_memory_with(pid_t other)
{
    return syscall(SYS_kcmp, getpid(), other, KCMP_VM, 0, 0) <= 0;
}
/* The same for the descriptor table (CLONE_FILES): a child that shares
 * it must not close the parent's control socket or files. */
static int shares_files_with(pid_t other)
{
    return syscall(SYS_kcmp, getpid(), other, KCMP_FILES, 0, 0) <= 0;
}

/* Whether a seccomp filter governs this process (/proc/self/status's
 * "Seccomp:\t2"; raw system calls, no agent hooks): it may kill on kcmp
 * rather than refuse it. Unknown counts as filtered. */
static int seccomp_filtered(void)
{
    char buf[4096];
    long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    const char *at = strstr(buf, "\nSeccomp:");
    if (!at)
        return 0; /* a kernel without seccomp */
    at += sizeof "\nSeccomp:" - 1;
    while (*at == ' ' || *at == '\t')
        at++;
    return *at != '0';
}

int mt_claim_process(void)
{
    if (mt_own_process())
        return 1;
    /* Our memory is the noted process's (or a claimed one's): a vfork or
     * CLONE_VM child. */
    if (mem_mark && *mem_mark)
        return 0;
    /* Without the page: the process noted, and the parent (its memory, for
     * a vfork child of a raw clone child not yet claimed). Not told apart:
     * a CLONE_VM|CLONE_PARENT child of a raw clone child not yet claimed
     * (it shares memory with a process it cannot name), which is taken for
     * a child of its own. Then, for a raw clone child, its descriptor
     * table: one shared (CLONE_FILES) is the parent's, whose control
     * socket and files it must not close, so such a child writes no
     * report. Under a seccomp filter (one that may kill on kcmp) no raw
     * clone child is claimed. */
    if (own_pid == 0 || seccomp_filtered() ||
        (!mem_mark && (shares_memory_with(own_pid) || shares_memory_with(getppid()))) ||
        shares_files_with(own_pid))
        return 0;
    mt_fork_child_unhandled();
    return 1;
}

/* ---- our library and the options we started with ----------------------- */

#define PRELOAD_KEY "LD_PRELOAD="
#define PRELOAD_KEY_LEN (sizeof PRELOAD_KEY - 1)
#define OPTIONS_KEY "MEMTRAIL_OPTIONS="
#define OPTIONS_KEY_LEN (sizeof OPTIONS_KEY - 1)

static int following;                                  /* follow_exec=on, tracking, and our path known */
static char preload_entry[PRELOAD_KEY_LEN + PATH_MAX]; /* "LD_PRELOAD=<our library>" */
static const char *lib_path;                           /* inside preload_entry */
static size_t lib_len;
static const char *lib_base; /* its file name */
static struct stat lib_st;
static int lib_st_ok;
static char options_entry[16384]; /* "MEMTRAIL_OPTIONS=<as at start-up>", or "" */

/* Is this LD_PRELOAD element (not NUL-terminated) our library? The same
 * path, the same file, or a bare name equal to our file name (the loader
 * searches the library path for those). */
static int element_is_ours(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (n == lib_len && memcmp(s, lib_path, n) == 0)
        return 1;
    if (!memchr(s, '/', n))
        return n == strlen(lib_base) && memcmp(s, lib_base, n) == 0;
    char p[PATH_MAX];
    struct stat st;
    if (!lib_st_ok || n >= sizeof p)
        return 0;
    memcpy(p, s, n);
    p[n] = '\0';
    return stat(p, &st) == 0 && st.st_dev == lib_st.st_dev && st.st_ino == lib_st.st_ino;
}

/* The loader splits LD_PRELOAD on spaces and colons. */
static int is_sep(char c)
{
    return c == ':' || c == ' ';
}

static int preload_has_ours(const char *v)
{
    while (*v) {
        while (is_sep(*v))
            v++;
        const char *e = v;
        while (*e && !is_sep(*e))
            e++;
        if (element_is_ours(v, (size_t)(e - v)))
            return 1;
        v = e;
    }
    return 0;
}

/* Removes our library from the value, in place; the others keep their
 * order, joined by ':'. */
static void preload_remove_ours(char *v)
{
    char *w = v, *r = v;
    while (*r) {
        while (is_sep(*r))
            r++;
        char *e = r;
        while (*e && !is_sep(*e))
            e++;
        size_t n = (size_t)(e - r);
        if (n && !element_is_ours(r, n)) {
            if (w != v)
                *w++ = ':';
            memmove(w, r, n);
            w += n;
        }
        r = e;
    }
    *w = '\0';
}

/* Following off: take the agent out of every LD_PRELOAD in environ, and
 * drop an entry that is left empty. Nothing is allocated: the strings are
 * edited where they are and the array is shifted down. */
static void strip_environ(void)
{
    char **env = environ;
    if (!env)
        return;
    size_t w = 0;
    for (size_t r = 0; env[r]; r++) {
        char *e = env[r];
        if (strncmp(e, PRELOAD_KEY, PRELOAD_KEY_LEN) == 0 && preload_has_ours(e + PRELOAD_KEY_LEN)) {
            preload_remove_ours(e + PRELOAD_KEY_LEN);
            if (e[PRELOAD_KEY_LEN] == '\0')
                continue;
        }
        env[w++] = e;
    }
    env[w] = NULL;
}

/* Our own file, absolute and resolved, so the path still names it after a
 * chdir or in a process with another cwd. */
static int find_library(void)
{
    Dl_info info;
    if (!dladdr((void *)&mt_exec_note_pid, &info) || !info.dli_fname || !info.dli_fname[0])
        return -1;
    char *dst = preload_entry + PRELOAD_KEY_LEN;
    memcpy(preload_entry, PRELOAD_KEY, PRELOAD_KEY_LEN);
    if (!realpath(info.dli_fname, dst)) {
        size_t n = strlen(info.dli_fname);
        if (info.dli_fname[0] != '/' || n >= PATH_MAX)
            return -1;
        memcpy(dst, info.dli_fname, n + 1);
    }
    lib_path = dst;
    lib_len = strlen(dst);
    const char *slash = strrchr(dst, '/');
    lib_base = slash ? slash + 1 : dst;
    lib_st_ok = stat(dst, &lib_st) == 0;
    return 0;
}

/* ---- the real exec family ---------------------------------------------- */

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);
static struct {
    execve_fn execve, execvpe;
    fexecve_fn fexecve;
    execveat_fn execveat; /* NULL when libc does not export it */
    spawn_fn posix_spawn, posix_spawnp;
} real;

/* Resolved at start-up: dlsym may allocate, which a vfork child must not. */
static void resolve_real(void)
{
    real.execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
    real.execvpe = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
    real.fexecve = (fexecve_fn)dlsym(RTLD_NEXT, "fexecve");
    real.execveat = (execveat_fn)dlsym(RTLD_NEXT, "execveat");
    real.posix_spawn = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
    real.posix_spawnp = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawnp");
}

void mt_exec_init(const char *options)
{
    mt_exec_note_pid();
    resolve_real();
    int lib_ok = find_library() == 0;
    following = mt_tracking && mt_follow_exec && lib_ok;
    if (mt_tracking && mt_follow_exec && !lib_ok)
        mt_say("follow_exec=on: cannot find the agent's own path (dladdr); exec'd programs run untracked");
    if (following && lib_len && strpbrk(lib_path, ": \t\n")) {
        mt_say(
            "follow_exec=on: the agent's path contains ':' or whitespace, which LD_PRELOAD cannot express; "
            "exec'd programs run untracked");
        following = 0;
    }
    if (following && options && *options) {
        size_t n = strlen(options);
        if (OPTIONS_KEY_LEN + n < sizeof options_entry) {
            memcpy(options_entry, OPTIONS_KEY, OPTIONS_KEY_LEN);
            memcpy(options_entry + OPTIONS_KEY_LEN, options, n + 1);
        } else {
            mt_say(
                "follow_exec=on: MEMTRAIL_OPTIONS too long to pass on; exec'd programs get only LD_PRELOAD");
        }
    }
    if (!following && lib_ok)
        strip_environ();
}

/* Before the first report or exec: the constructor may not have run yet
 * (a program's own constructor can exec). */
/* The image is about to be replaced without running destructors: leave
 * its report now. Never from a vfork child. */
static void report_before_exec(void)
{
    if (mt_own_process()) /* a start or stop under way ends first, its answer sent */
        mt_rec_hold_switches();
    mt_trace_before_exec();
    if (atomic_load(&mt_hot) && mt_claim_process() && !mt_site_opt.trace) {
        mt_control_cut_query(); /* the image is going: a query being answered ends here */
        mt_report_write_to(NULL, "exec");
    }
}

/* The exec failed: the image goes on, and so do switches of recording. */
static void exec_failed(void)
{
    if (mt_own_process())
        mt_rec_release_switches();
    mt_trace_after_failed_exec();
}

/* ---- environments and argument arrays without malloc ------------------- */

/* Small, so an exec from a signal handler on a small alternate stack
 * still fits (execve is async-signal-safe): 2 KiB holds some 250
 * environment pointers; bigger environments use mmap. */
#define STACK_BYTES 2048
typedef struct scratch {
    _Alignas(16) char stack[STACK_BYTES];
    void *map;
    size_t map_len;
} scratch;

static void *scratch_get(scratch *s, size_t need)
{
    s->map = NULL;
    if (need <= sizeof s->stack)
        return s->stack;
    size_t len = (need + 4095) & ~(size_t)4095;
    /* The raw system call: this memory is no business of the accounting,
     * and a vfork child must not touch the parent's bookkeeping. */
    long p = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == -1)
        return NULL;
    s->map = (void *)p;
    s->map_len = len;
    return s->map;
}

/* After an exec (or spawn) returned: errno is the exec's. */
static void scratch_release(scratch *s)
{
    if (s->map) {
        int e = errno;
        syscall(SYS_munmap, s->map, s->map_len);
        errno = e;
        s->map = NULL;
    }
}

/* The environment an exec should get: envp itself when following is off
 * or nothing is missing, else a copy in `s` with our library put first in
 * LD_PRELOAD (the last LD_PRELOAD entry is the one the loader reads) and
 * the start-up MEMTRAIL_OPTIONS added when there are none. An envp that
 * sets its own MEMTRAIL_OPTIONS keeps them (a nested `memtrail run`). If
 * no memory can be had, the exec goes ahead untracked rather than fail. */
static char *const *env_for_exec(char *const *envp, scratch *s)
{
    s->map = NULL;
    if (!following)
        return envp;
    size_t n = 0;
    long preload = -1;
    int has_options = 0;
    if (envp) {
        for (; envp[n]; n++) {
            if (strncmp(envp[n], PRELOAD_KEY, PRELOAD_KEY_LEN) == 0)
                preload = (long)n;
            else if (strncmp(envp[n], OPTIONS_KEY, OPTIONS_KEY_LEN) == 0)
                has_options = 1;
        }
    }
    int add_options = !has_options && options_entry[0];
    int fix_preload = preload < 0 || !preload_has_ours(envp[preload] + PRELOAD_KEY_LEN);
    if (!add_options && !fix_preload)
        return envp;
    const char *old = preload >= 0 ? envp[preload] + PRELOAD_KEY_LEN : NULL;
    size_t old_len = old ? strlen(old) : 0;
    size_t ptr_bytes = (n + 3) * sizeof(char *);
    size_t str_bytes = fix_preload && old ? PRELOAD_KEY_LEN + lib_len + 1 + old_len + 1 : 0;
    char *mem = scratch_get(s, ptr_bytes + str_bytes);
    if (!mem)
        return envp;
    char **out = (char **)(void *)mem;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        out[k++] = envp[i];
    if (fix_preload && old) {
        char *v = mem + ptr_bytes, *p = v;
        memcpy(p, preload_entry, PRELOAD_KEY_LEN + lib_len);
        p += PRELOAD_KEY_LEN + lib_len;
        if (old_len) {
            *p++ = ':';
            memcpy(p, old, old_len);
            p += old_len;
        }
        *p = '\0';
        out[preload] = v;
    } else if (fix_preload) {
        out[k++] = preload_entry;
    }
    if (add_options)
        out[k++] = options_entry;
    out[k] = NULL;
    return out;
}

/* The argument list of execl, execlp and execle as an array: the first
 * argument, then each va_arg up to the terminating NULL. */
static char **args_from_list(scratch *s, const char *first, va_list ap, char *const **envp_out)
{
    va_list count;
    va_copy(count, ap);
    size_t n = 0;
    if (first)
        for (n = 1; va_arg(count, char *); n++) {
        }
    va_end(count);
    char **argv = scratch_get(s, (n + 1) * sizeof(char *));
    if (!argv)
        return NULL;
    argv[0] = (char *)first;
    for (size_t i = 1; i < n; i++)
        argv[i] = va_arg(ap, char *);
    argv[n] = NULL;
    if (envp_out) { /* execle: the environment follows the NULL */
        if (first)
            (void)va_arg(ap, char *);
        *envp_out = va_arg(ap, char *const *);
    }
    return argv;
}

/* ---- the entry points ---------------------------------------------------- */

/* execve, or execvpe when `search` (a PATH search, as execvp does). */
static int do_exec(int search, const char *file, char *const argv[], char *const envp[])
{
    mt_start();
    scratch s;
    char *const *env = env_for_exec(envp, &s);
    report_before_exec();
    int rc;
    if (search)
        rc = real.execvpe ? real.execvpe(file, argv, env) : (errno = ENOSYS, -1);
    else
        rc = real.execve ? real.execve(file, argv, env) : (int)syscall(SYS_execve, file, argv, env);
    exec_failed();
    scratch_release(&s);
    return rc;
}

MT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return do_exec(0, path, argv, envp);
}
MT_EXPORT int execv(const char *path, char *const argv[])
{
    return do_exec(0, path, argv, environ);
}
MT_EXPORT int execvp(const char *file, char *const argv[])
{
    return do_exec(1, file, argv, environ);
}
MT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    return do_exec(1, file, argv, envp);
}

/* The execl family: argv (and execle's envp) rebuilt from the list. */
static int exec_list(int search, const char *path, const char *arg, va_list ap, int with_env)
{
    scratch s;
    char *const *envp = environ;
    char **argv = args_from_list(&s, arg, ap, with_env ? &envp : NULL);
    if (!argv)
        return -1; /* errno from mmap */
    int rc = do_exec(search, path, argv, envp);
    mt_trace_after_failed_exec();
    scratch_release(&s);
    return rc;
}

MT_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(0, path, arg, ap, 0);
    va_end(ap);
    return rc;
}

MT_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(1, file, arg, ap, 0);
    va_end(ap);
    return rc;
}

MT_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(0, path, arg, ap, 1);
    va_end(ap);
    return rc;
}

MT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    mt_start();
    scratch s;
    char *const *env = env_for_exec(envp, &s);
    report_before_exec();
    int rc = real.fexecve ? real.fexecve(fd, argv, env) : (errno = ENOSYS, -1);
    exec_failed();
    scratch_release(&s);
    return rc;
}

/* Defined whatever the libc: without a libc execveat nothing calls this
 * one except a program built against a newer libc, and the system call
 * serves it. */
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);
MT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    mt_start();
    scratch s;
    char *const *env = env_for_exec(envp, &s);
    report_before_exec();
    int rc = real.execveat ? real.execveat(dirfd, path, argv, env, flags)
                           : (int)syscall(SYS_execveat, dirfd, path, argv, env, flags);
    exec_failed();
    scratch_release(&s);
    return rc;
}

/* posix_spawn replaces no image here: no report, only the environment. */
static int do_spawn(int search, pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    mt_start();
    spawn_fn fn = search ? real.posix_spawnp : real.posix_spawn;
    if (!fn)
        return ENOSYS;
    scratch s;
    char *const *env = env_for_exec(envp, &s);
    int rc = fn(pid, file, fa, attr, argv, env);
    mt_trace_after_failed_exec();
    scratch_release(&s);
    return rc;
}

MT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return do_spawn(0, pid, path, fa, attr, argv, envp);
}

MT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return do_spawn(1, pid, file, fa, attr, argv, envp);
}
