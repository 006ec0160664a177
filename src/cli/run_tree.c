/* run_tree.c — after `memtrail run --follow-exec`: each process of the
 * program's tree wrote its own report under its own pid (the %p of the
 * output template), an exec'd image its trace as FILE.1 (.2, ...). Finds
 * the ones this run wrote besides the main process's, so `run` can say how
 * many there are and where. */
#include "cli/cli.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int run_template_has_pid(const char *t)
{
    for (const char *p = t; *p; p++) {
        if (*p != '%' || !p[1])
            continue;
        p++;
        if (*p == 'p')
            return 1;
    }
    return 0;
}

/* Does the file name s fit the template t? %p stands for a pid (digits),
 * %e for a program name (anything but '/'), %% for '%'. */
static bool name_matches(const char *t, const char *s)
{
    for (; *t; t++) {
        if (*t == '%' && (t[1] == 'p' || t[1] == 'e')) {
            const char *end = s;
            while (*end && (t[1] == 'e' ? *end != '/' : isdigit((unsigned char)*end)))
                end++;
            for (const char *q = end; q > s; q--)
                if (name_matches(t + 2, q))
                    return true;
            return false;
        }
        char c = *t;
        if (c == '%' && t[1] == '%')
            t++;
        if (*s != c)
            return false;
        s++;
    }
    return *s == '\0';
}

size_t run_output_base_len(const char *name)
{
    size_t n = strlen(name);
    for (;;) {
        size_t k = n;
        while (k > 0 && isdigit((unsigned char)name[k - 1]))
            k--;
        if (k == n || k < 2 || name[k - 1] != '.')
            return n; /* not ".DIGITS" (or the whole name): no more suffixes */
        n = k - 1;
    }
}

/* Does the name fit the template, as is or with numeric suffixes? */
static bool output_matches(const char *t, const char *s)
{
    if (name_matches(t, s))
        return true;
    size_t n = run_output_base_len(s);
    char base[NAME_MAX + 1];
    if (n == strlen(s) || n >= sizeof base)
        return false;
    memcpy(base, s, n);
    base[n] = '\0';
    return name_matches(t, base);
}

/* The agent's temporary files: NAME.tmp.PID.TID. */
static bool is_temporary(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t)
        return false;
    t += 5;
    int dots = 0;
    for (; *t; t++) {
        if (*t == '.')
            dots++;
        else if (!isdigit((unsigned char)*t))
            return false;
    }
    return dots == 1;
}

/* A report starts "memtrail-report ", a trace with its magic "MTTRACE\0". */
static bool is_output(int dirfd, const char *name, bool trace)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return false;
    char head[16];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return trace ? n >= 8 && memcmp(head, "MTTRACE", 8) == 0
                 : n >= 16 && memcmp(head, "memtrail-report ", 16) == 0;
}

static bool not_before(const struct timespec *a, const struct timespec *since)
{
    return a->tv_sec > since->tv_sec || (a->tv_sec == since->tv_sec && a->tv_nsec >= since->tv_nsec);
}

int run_count_tree_reports(const char *template_abs, const char *main_report, const struct timespec *since,
                           bool trace, char **dir_out)
{
    *dir_out = NULL;
    const char *slash = strrchr(template_abs, '/');
    if (!slash)
        return -1;
    char *dir = strndup(template_abs, slash > template_abs ? (size_t)(slash - template_abs) : 1);
    if (!dir)
        return -1;
    *dir_out = dir;
    if (strchr(dir, '%'))
        return -1; /* one directory per process: not counted */
    const char *base = slash + 1;
    const char *main_base = main_report ? strrchr(main_report, '/') : NULL;
    main_base = main_base ? main_base + 1 : main_report;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (main_base && strcmp(e->d_name, main_base) == 0)
            continue;
        if (!output_matches(base, e->d_name) || is_temporary(e->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (not_before(&st.st_mtim, since) && is_output(dirfd(d), e->d_name, trace))
            count++;
    }
    closedir(d);
    return count;
}
