/* daemonize.c — a program that becomes a daemon with daemon(3)
 * (test_exec.sh): glibc's daemon() forks and leaves the parent by an
 * _exit inside libc, which the agent must still see, so that both
 * processes write their reports (and traces).
 *
 *   daemonize DIR [close]   daemon(1, 1), or with "close" daemon(0, 0)
 *                           (cwd /, stdin, stdout and stderr on /dev/null)
 *
 * Every block is in category "daemon" and in the books. Before daemon():
 * 3 blocks of 1111 bytes kept, one of 50000 allocated and freed. The
 * daemon then allocates 7777 bytes, grows one inherited block to 2222 and
 * exits. The books (ledger.h lines, "daemon live count peak allocs frees
 * reallocs") go to DIR/parent.ledger, written before daemon() (the parent
 * leaves inside it), and DIR/daemon.ledger; the pids to DIR/parent.pid and,
 * last, DIR/daemon.pid. DIR must be absolute. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "memtrail.h"

static const char *dir;

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_pid(const char *name)
{
    char path[4096], tmp[4200], text[32];
    path_of(path, sizeof path, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0 ||
        rename(tmp, path) != 0)
        _exit(98);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] != '/' || (argc == 3 && strcmp(argv[2], "close") != 0) || argc > 3) {
        fprintf(stderr, "usage: daemonize /DIR [close]\n");
        return 2;
    }
    (void)test_failures; /* ledger.h's, for programs that check themselves */
    dir = argv[1];
    int close_all = argc == 3;
    char path[4096];
    ledger books = {0};
    void *kept[3];
    mt_tag_push("daemon");
    for (int i = 0; i < 3; i++) {
        kept[i] = malloc(1111);
        ledger_alloc(&books, 1111);
    }
    free(malloc(50000));
    ledger_alloc(&books, 50000);
    ledger_free(&books, 50000);
    mt_tag_pop();
    path_of(path, sizeof path, "parent.ledger");
    ledger_write(path, "daemon", &books, 0);
    write_pid("parent.pid");

    if (daemon(!close_all, !close_all) != 0) {
        perror("daemon");
        return 3;
    }

    /* The daemon: its blocks are the parent's, and its own. */
    mt_tag_push("daemon");
    void *mine = malloc(7777);
    ledger_alloc(&books, 7777);
    kept[0] = realloc(kept[0], 2222);
    ledger_resize(&books, 1111, 2222);
    mt_tag_pop();
    if (!mine || !kept[0])
        return 4;
    path_of(path, sizeof path, "daemon.ledger");
    ledger_write(path, "daemon", &books, 0);
    write_pid("daemon.pid");
    return 0;
}
