/* cli.h — the memtrail command-line tool: one cmd_<name>() per subcommand
 * (each in src/cli/cmd_<name>.c, dispatched from the table in main.c) and
 * the helpers they share for options (parse_options.h) and error lines.
 *
 * Exit codes: 0 ok, 1 the tool failed, 2 bad usage; `run` passes the
 * traced program's own status through. */
#ifndef MT_CLI_H
#define MT_CLI_H

#include <stddef.h>
#include <signal.h>
#include <stdio.h>

#include "cli/parse_options.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand's name. */
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sessions(int argc, char **argv);
int cmd_xe(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_options(int argc, char **argv);
int cmd_refset(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_html(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* "memtrail: <message>" on stderr; returns CLI_FAILED. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Set while a failure is expected and handled silently (cli_error prints
 * nothing then). */
extern int cli_quiet;

/* "memtrail: <message>" and "Try 'memtrail CMD --help'." on stderr;
 * returns CLI_USAGE. `cmd` may be NULL for the top level. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Find `cmd` as execvp would (PATH search unless it has a slash). Returns 0
 * and a malloc'd path, or -ENOENT, -EACCES, -ENOMEM. (run_check.c) */
int run_resolve_command(const char *cmd, char **resolved);

/* The agent library: $MEMTRAIL_LIB, or ../lib/libmemtrail.so beside this
 * binary. A malloc'd absolute path, or NULL after printing why. (cmd_run.c) */
char *run_find_agent(void);

/* Refuse a program the agent cannot get into: setuid/setgid, file
 * capabilities, statically linked, not 64-bit ELF (a script's interpreter
 * is checked too). Returns 0, or CLI_FAILED after printing why; `shown` is
 * the name used in the message. (run_check.c) */
int run_check_program(const char *path, const char *shown);

/* The options several commands share, for their option arrays
 * (parse_options.h). --scale KB|MB|GB into a struct report_scale
 * (report.h); --timeout SECONDS of `query` and `sessions`; --depth N, --top N and --sort live|allocated of
 * detail reports into a struct detail_options (detail.h), `given` set when any is. */
int cli_parse_scale(const char *value, void *scale);
int detail_parse_sort(const char *value, void *by_allocs);
#define CLI_OPT_JSON(dest, text)                                                                             \
    {                                                                                                        \
        .kind = CLI_OPT_FLAG, .name = "json", .value = (dest), .help = (text)                                \
    }
#define CLI_OPT_SCALE(dest)                                                                                  \
    {                                                                                                        \
        .kind = CLI_OPT_PARSE, .name = "scale", .arg = "KB|MB|GB", .value = (dest),                          \
        .parse = cli_parse_scale, .noun = "scale", .accepted = "KB, MB, GB",                                 \
        .help = "unit of the text output's sizes, 1024-based, with three significant digits (default KB)"    \
    }
#define CLI_OPT_TIMEOUT(dest)                                                                                \
    {                                                                                                        \
        .kind = CLI_OPT_INT, .name = "timeout", .arg = "SECONDS", .value = (dest), .min = 1, .max = 3600,    \
        .noun = "a number of seconds", .help = "how long to wait for the answer (default 5)"                 \
    }
#define CLI_OPT_DEPTH(opts, given_, text)                                                                    \
    {                                                                                                        \
        .kind = CLI_OPT_INT, .name = "depth", .arg = "N", .value = &(opts)->depth, .min = 1, .max = 1024,    \
        .given = (given_), .help = (text)                                                                    \
    }
#define CLI_OPT_TOP(opts, given_, text)                                                                      \
    {                                                                                                        \
        .kind = CLI_OPT_INT, .name = "top", .arg = "N", .value = &(opts)->top, .min = 1, .max = 1000000000,  \
        .given = (given_), .help = (text)                                                                    \
    }
/* --top N of the commands that list stacks (analyze, refset report). */
#define CLI_OPT_STACKS_TOP(dest)                                                                             \
    {                                                                                                        \
        .kind = CLI_OPT_INT, .name = "top", .arg = "N", .value = (dest), .min = 0, .max = 1000000000,        \
        .help = "stacks per list (default 10; 0: all)"                                                       \
    }
#define CLI_OPT_SORT(opts, given_)                                                                           \
    {                                                                                                        \
        .kind = CLI_OPT_PARSE, .name = "sort", .arg = "live|allocated", .value = &(opts)->by_allocs,         \
        .parse = detail_parse_sort, .accepted = "live, allocated", .given = (given_),                        \
        .help =                                                                                              \
            "detail: order by live bytes (default) or by the bytes allocated over the run (by the number "   \
            "of allocations for reports of older memtrail versions)"                                         \
    }
/* The options of a detail report's sites: `report detail`, `query PID detail`. */
#define CLI_OPT_DETAIL(opts, given_)                                                                         \
    CLI_OPT_DEPTH(opts, given_,                                                                              \
                  "detail: show N frames per site, and merge the sites whose first N frames "                \
                  "and category are equal (counters summed)"),                                               \
        CLI_OPT_TOP(opts, given_, "detail: show the N largest sites only"), CLI_OPT_SORT(opts, given_)

/* `memtrail info` and `memtrail query PID info` (cmd_info.c): --kind and
 * --percentiles into a struct info_options (report/info.h, which the user
 * of the macro includes). */
extern const struct cli_choice info_kind_choices[];
#define CLI_OPT_INFO(opts, given_)                                                                           \
    {.kind = CLI_OPT_CHOICE,                                                                                 \
     .name = "kind",                                                                                         \
     .arg = "K",                                                                                             \
     .value = &(opts)->kind,                                                                                 \
     .choices = info_kind_choices,                                                                           \
     .noun = "kind",                                                                                         \
     .given = (given_),                                                                                      \
     .help = "info: show the last event of kind K only (any, peak, grow, trim, limit, periodic)"},           \
    {                                                                                                        \
        .kind = CLI_OPT_PARSE, .name = "percentiles", .arg = "LIST", .value = (opts),                        \
        .parse = info_parse_percentiles, .given = (given_),                                                  \
        .accepted =                                                                                          \
            "increasing percentiles between 0 and 100 (exclusive), comma-separated, e.g. 50,90,99,99.9",     \
        .help =                                                                                              \
            "info: the latency bands' upper percentiles (default 50,90,99,99.9; a last band goes to 100)"    \
    }
struct info_options;
struct report;
/* Prints the memory info of r (read with result read_rc; err is the
 * reader's message, or the input's name when read_rc is 0); the exit code. */
int info_cli_print(const struct report *r, int read_rc, const char *err, _Bool json,
                   const struct info_options *o);
/* Asks process pid for its report and prints its memory info; the exit code. */
int info_cli_query(long pid, const char *cmd_name, int timeout_s, _Bool json, const struct info_options *o);

/* A trace read as a report: its caveats (events lost, begun late, blocks
 * unknown, no end; report.caveats), one "memtrail: NAME: CAUTION: ..."
 * line each on stderr, whatever is printed from it (output.c). */
void cli_print_caveats(const char *name, const struct report *r);
/* Output (output.c). After printing to stdout (prc: the printer's 0,
 * -ENOMEM or -EIO): flushes, and turns a failure into one error line
 * ("cannot write to standard output: ..."). The exit code. */
int cli_write_status(int prc);
/* Standard output failed with errno err: says so (once) and returns
 * CLI_FAILED. */
int cli_stdout_failed(int err);
/* At exit (main): flushes and closes stdout; a failure not told yet is
 * told, and turns status 0 into 1. Returns the exit status. */
int cli_close_stdout(int status);
/* A file a command writes (-o FILE), or stdout for NULL or "-": through
 * safe_file (common/safe_file.h), to a temporary renamed into place by
 * cli_out_close. Write to o->f. */
struct mt_file;
struct cli_out {
    FILE *f;
    const char *name; /* the path, or "standard output" */
    int is_stdout;
    struct mt_file *file; /* NULL for stdout */
};
/* 0, or CLI_FAILED after one line naming the file and why (a symbolic
 * link, a device, another user's file, a directory that cannot be written). */
int cli_out_open(struct cli_out *o, const char *path);
/* Finishes o. ok 0: the command failed before finishing (and said why):
 * the temporary is removed, CLI_FAILED. Otherwise prc is the writer's
 * result (0, -ENOMEM, -EIO): on any failure of the writer, the flush, the
 * close or the rename, the file is left as it was before, one line says
 * why, and the result is CLI_FAILED; else CLI_OK. */
int cli_out_close(struct cli_out *o, int ok, int prc);

/* Programs that leave with a raw exit_group system call (run_exit.c).
 * Go's runtime does: no exit handler runs, so the agent writes no report.
 * run_is_go: 1 when the ELF file at path carries Go's build-id note. */
int run_is_go(const char *path);
/* In the child, before exec: no_new_privs and a seccomp filter that
 * suspends exit_group for memtrail run, whose listener fd is sent over
 * sock. 0 or -errno. */
int run_exit_watch_install(int sock);
/* In the parent: the listener fd sent over sock, or -errno. */
int run_exit_watch_receive(int sock);
/* Waits for pid as waitpid(pid, status, 0) does, while every exit_group
 * of the tree is held until the process's agent has written its report at
 * exit (the control socket's "exit" request). 0, or -errno. */
int run_exit_watch_wait(int listener, int pid, int *status);

/* --follow-exec (run_tree.c): does the output template hold %p? */
int run_template_has_pid(const char *tmpl);
/* The length of a file name without its numeric suffixes: the agent names
 * a process's output FILE.N (an exec'd image after the first, a recording
 * on demand after the first, a rollover) or FILE.PID (a fork child when
 * the template has no %p), and so on (FILE.PID.N): "t.mtt.4242.1" -> 5. */
size_t run_output_base_len(const char *name);
/* The reports other processes of a run's tree wrote: files in the
 * template's directory whose names fit it (%p any pid, %e any name; with
 * the numeric suffixes above), modified at or after `since`, other than main_report. Returns how many,
 * or -1 when they cannot be counted (the template's directory has a '%',
 * or cannot be read). *dir is set to that directory (malloc'd) or NULL.
 * trace: count traces (trace mode) instead of reports. */
struct timespec;
int run_count_tree_reports(const char *template_abs, const char *main_report, const struct timespec *since,
                           _Bool trace, char **dir);

/* Detail reports (detail_cmd.c): `report detail`, `diff` and `query detail`. */
struct report_scale;
struct detail_options;
struct report;
/* The sites of report r (already read; `name` for messages), symbolized
 * and printed as `report detail` does; the exit code. */
int detail_cli_print(const struct report *r, const char *name, _Bool json, const struct report_scale *scale,
                     const struct detail_options *o);
/* `memtrail report detail FILE`, FILE opened (report_input_open; read and
 * closed here): returns the exit code. */
struct report_input;
int detail_cli_report(struct report_input *in, _Bool json, const struct report_scale *scale,
                      const struct detail_options *o);
/* The diff of two detail reports: the category diff, then the sites. */
int detail_cli_diff(const struct report *base, const struct report *cur, _Bool json,
                    const struct report_scale *scale, const struct detail_options *o);

/* The control socket of a tracked process (query_client.c), for `query`
 * and `sessions`. */
struct query_target {
    long pid;
    unsigned uid;  /* effective uid, from /proc/PID/status */
    char *dirs[2]; /* candidate socket directories, in order */
    int ndirs;
    char *sock;  /* the socket found */
    int failure; /* why the last query_open or query_ask failed (their messages
                    say it in words): -ESRCH no such process (or a zombie, or
                    one that exited before answering), -EPERM another
                    uid's, -ENOENT not tracked (no socket, or one not
                    private), -ECONNREFUSED nothing listens (a stale
                    socket), -ETIMEDOUT no answer in time, -EPROTO the
                    process's "error ..." reply, -ENODATA no answer,
                    -ECANCELED given up for the caller (below, nothing said); 0 */
    /* Set after query_open by a caller that must not wait on an answer
     * (memtrail top): query_ask gives up when *cancel becomes nonzero (a
     * signal) or, with watch_input, when standard input has something to
     * read (a key, left unread). */
    volatile sig_atomic_t *cancel;
    int watch_input;
};
/* A pid (or a count of seconds): digits, 1 to INT_MAX. 0 or -1. */
int query_parse_pid(const char *s, long *pid);
/* Finds the socket of process pid, which must be ours (`cmd_name` names
 * the subcommand in the error). 0, or CLI_FAILED after printing why (no
 * such process, another uid's, not tracked). query_close() either way. */
int query_open(long pid, const char *cmd_name, struct query_target *t);
/* Sends one request line (with its '\n') and reads the reply until EOF
 * into *buf (malloc'd, NUL-terminated; free it either way) and *len. 0, or
 * CLI_FAILED after printing why (no answer in time, an "error ..." reply),
 * with t->failure set. */
int query_ask(struct query_target *t, const char *request, int timeout_ms, char **buf, size_t *len);
void query_close(struct query_target *t);
/* Whether process pid is gone, or a zombie waiting for its parent. */
bool query_process_gone(long pid);
/* The pids of the control sockets in the directories our processes use
 * ($XDG_RUNTIME_DIR/memtrail, /run/user/UID/memtrail, /tmp/memtrail-UID),
 * ascending, each once: candidates only (a socket may be stale; query_open
 * checks). *pids malloc'd. 0 or -ENOMEM. (`memtrail exporter`) */
int query_list(long **pids, size_t *n);
/* The report in an answer, buf[0..len): report_read_stream's result (0 or
 * -errno with one line in err); `name` names it in messages. */
struct report;
int query_read_report(const char *buf, size_t len, const char *name, struct report *r, char *err,
                      size_t errlen);

#endif /* MT_CLI_H */
