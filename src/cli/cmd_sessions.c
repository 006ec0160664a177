/* cmd_sessions.c — `memtrail sessions PID [--json] [--targets] [--timeout
 * SECONDS]`: the event sessions of a running, tracked process (the agent's
 * own, from `memtrail run --session`, and those the program made with
 * mt_session_create), as SQL Server's sys.dm_xe_sessions shows them: one
 * row per session with the seed's columns; --targets adds what each
 * session's targets hold. The process answers the control socket's
 * `sessions` request with JSON (src/agent/control.c), read here with
 * json.c. */
#include "cli/cli.h"
#include "cli/json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The seed's columns, in dm_xe_sessions order. */
static const char *const columns[] = {
    "name", "pending_buffers", "total_regular_buffers", "regular_buffer_size", "total_large_buffers",
    "large_buffer_size", "total_buffer_size", "buffer_policy_desc", "dropped_event_count",
    "dropped_buffer_count", "blocked_event_fire_time", "largest_event_dropped_size", "create_time",
};
#define NCOLUMNS (sizeof columns / sizeof columns[0])

/* A cell as the table prints it: "" for a missing key. Malloc'd. */
static char *cell(const struct json *row, const char *key)
{
    const struct json *v = json_get(row, key);
    char *s = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&s, &len);
    if (!m)
        return NULL;
    if (v)
        json_write_plain(m, v);
    if (fclose(m) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* A table: one row per object of `rows`, one column per key; numbers
 * right-aligned. Returns -1 when out of memory. */
static int print_table(FILE *out, const struct json *const *rows, size_t nrows, const char *const *keys,
                       size_t nkeys, int indent)
{
    size_t *width = calloc(nkeys, sizeof *width);
    char **cells = calloc(nrows * nkeys + 1, sizeof *cells);
    bool *right = calloc(nkeys, sizeof *right);
    int rc = width && cells && right ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < nkeys; k++) {
        width[k] = strlen(keys[k]);
        right[k] = true;
        for (size_t r = 0; r < nrows; r++) {
            const struct json *v = json_get(rows[r], keys[k]);
            if (v && v->kind != JSON_NUMBER && v->kind != JSON_NULL)
                right[k] = false;
            char *c = cell(rows[r], keys[k]);
            if (!c) {
                rc = -1;
                break;
            }
            cells[r * nkeys + k] = c;
            if (strlen(c) > width[k])
                width[k] = strlen(c);
        }
    }
    for (size_t r = 0; rc == 0 && r <= nrows; r++) { /* row 0: the header */
        fprintf(out, "%*s", indent, "");
        for (size_t k = 0; k < nkeys; k++) {
            const char *c = r == 0 ? keys[k] : cells[(r - 1) * nkeys + k];
            int w = (int)width[k];
            bool last = k + 1 == nkeys;
            if (right[k])
                fprintf(out, "%*s%s", w, c, last ? "" : "  ");
            else if (last)
                fputs(c, out);
            else
                fprintf(out, "%-*s  ", w, c);
        }
        fputc('\n', out);
    }
    for (size_t i = 0; cells && i < nrows * nkeys; i++)
        free(cells[i]);
    free(cells);
    free(width);
    free(right);
    return rc;
}

static bool is_container(const struct json *j) { return j->kind == JSON_ARRAY || j->kind == JSON_OBJECT; }

static int render(FILE *out, const struct json *j, int indent, const char *skip);

/* An array of objects as a table whose columns are their scalar members
 * (in the order first seen); anything else one item per line. */
static int render_array(FILE *out, const struct json *a, int indent)
{
    bool objects = a->n > 0;
    for (size_t i = 0; i < a->n; i++)
        objects &= a->items[i]->kind == JSON_OBJECT;
    if (!objects) {
        for (size_t i = 0; i < a->n; i++) {
            fprintf(out, "%*s", indent, "");
            if (is_container(a->items[i])) {
                fputs("-\n", out);
                if (render(out, a->items[i], indent + 2, NULL) < 0)
                    return -1;
            } else {
                json_write_plain(out, a->items[i]);
                fputc('\n', out);
            }
        }
        return 0;
    }
    const char **keys = NULL;
    size_t nkeys = 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct json *o = a->items[i];
        for (size_t m = 0; m < o->n; m++) {
            bool seen = false;
            for (size_t k = 0; k < nkeys && !seen; k++)
                seen = strcmp(keys[k], o->keys[m]) == 0;
            if (seen)
                continue;
            const char **more = realloc(keys, (nkeys + 1) * sizeof *keys);
            if (!more) {
                free(keys);
                return -1;
            }
            keys = more;
            keys[nkeys++] = o->keys[m];
        }
    }
    int rc = print_table(out, (const struct json *const *)a->items, a->n, keys, nkeys, indent);
    free(keys);
    return rc;
}

/* A target's data: "key: value" lines, nested containers indented; the
 * member `skip` (may be NULL) of this level left out. */
static int render(FILE *out, const struct json *j, int indent, const char *skip)
{
    if (j->kind == JSON_ARRAY)
        return render_array(out, j, indent);
    for (size_t i = 0; i < j->n; i++) {
        const struct json *v = j->items[i];
        if (skip && strcmp(j->keys[i], skip) == 0)
            continue;
        fprintf(out, "%*s%s:", indent, "", j->keys[i]);
        if (is_container(v) && v->n > 0) {
            fputc('\n', out);
            if (render(out, v, indent + 2, NULL) < 0)
                return -1;
        } else {
            fputc(' ', out);
            json_write_plain(out, v);
            fputc('\n', out);
        }
    }
    return 0;
}

/* Without --targets, a target is its name only (as the engine's view
 * without data has it): every other member goes. */
static void targets_by_name(struct json *sessions)
{
    for (size_t i = 0; i < sessions->n; i++) {
        struct json *t = (struct json *)json_get(sessions->items[i], "targets");
        for (size_t k = 0; t && t->kind == JSON_ARRAY && k < t->n; k++) {
            struct json *o = t->items[k];
            size_t keep = 0;
            for (size_t m = 0; o->kind == JSON_OBJECT && m < o->n; m++) {
                if (strcmp(o->keys[m], "target") == 0) {
                    o->keys[keep] = o->keys[m];
                    o->items[keep++] = o->items[m];
                } else {
                    free(o->keys[m]);
                    json_free(o->items[m]);
                }
            }
            if (o->kind == JSON_OBJECT)
                o->n = keep;
        }
    }
}

static int print_text(long pid, const struct json *sessions, bool targets)
{
    if (sessions->n == 0) {
        printf("Process %ld has no event sessions.\n", pid);
        return 0;
    }
    if (print_table(stdout, (const struct json *const *)sessions->items, sessions->n, columns, NCOLUMNS, 0) < 0)
        return -1;
    for (size_t i = 0; targets && i < sessions->n; i++) {
        const struct json *s = sessions->items[i], *name = json_get(s, "name");
        const struct json *t = json_get(s, "targets");
        printf("\nSession '%s': ", name && name->kind == JSON_STRING ? name->text : "?");
        if (!t || t->kind != JSON_ARRAY || t->n == 0) {
            puts("no targets");
            continue;
        }
        printf("%zu target%s\n", t->n, t->n == 1 ? "" : "s");
        for (size_t k = 0; k < t->n; k++) {
            const struct json *kind = json_get(t->items[k], "target");
            printf("  %s\n", kind && kind->kind == JSON_STRING ? kind->text : "target");
            /* its members but "target", which the line above names */
            if (t->items[k]->kind == JSON_OBJECT && render(stdout, t->items[k], 4, "target") < 0)
                return -1;
        }
    }
    return 0;
}

static const struct cli_command sessions_cmd = {
    .name = "sessions",
    .usage = "usage: memtrail sessions PID [--json] [--targets] [--timeout SECONDS]\n",
    .about = "Show the event sessions of the running process PID, tracked by memtrail:\n"
             "the agent's own (memtrail run --session DEF) and those the program created\n"
             "with mt_session_create(). One row per session, with the columns of SQL\n"
             "Server's sys.dm_xe_sessions (buffer sizes in bytes, times in ms).\n",
    .min_args = 1, .max_args = 1, .missing = "missing the PID of the process to ask",
    .extra = "too many arguments ('%s')",
};

int cmd_sessions(int argc, char **argv)
{
    bool json = false, targets = false;
    int timeout_s = 5;
    const struct cli_option options[] = {
        CLI_OPT_JSON(&json, "print the sessions as JSON (keys in docs/cli.md)"),
        {.kind = CLI_OPT_FLAG, .name = "targets", .value = &targets,
         .help = "also print each session's targets and their data (ring buffer events, histogram buckets, "
                 "counters, unmatched pairs, event files)"},
        CLI_OPT_TIMEOUT(&timeout_s),
        {0},
    };
    int npos = cli_parse(&sessions_cmd, options, argc, argv);
    if (npos < 0)
        return cli_parse_exit(npos);
    const char *pid_arg = argv[0];
    long pid;
    if (query_parse_pid(pid_arg, &pid) < 0)
        return cli_usage_error("sessions", "'%s' is not a process id", pid_arg);

    struct query_target t;
    char *buf = NULL;
    size_t len = 0;
    struct json *doc = NULL;
    int rc = query_open(pid, "sessions", &t);
    if (rc == 0)
        rc = query_ask(&t, "sessions\n", timeout_s * 1000, &buf, &len);
    const struct json *sessions = NULL;
    if (rc == 0) {
        char err[128];
        if (json_parse(buf, len, &doc, err, sizeof err) < 0)
            rc = cli_error("process %ld answered with bad JSON (%s); is its agent older than this memtrail?", pid,
                           err);
        else if (!(sessions = json_get(doc, "sessions")) || sessions->kind != JSON_ARRAY)
            rc = cli_error("process %ld answered without a \"sessions\" array", pid);
    }
    if (rc == 0) {
        int prc = 0;
        if (json) {
            if (!targets)
                targets_by_name((struct json *)sessions);
            json_write(stdout, doc, 0);
            fputc('\n', stdout);
        } else {
            prc = print_text(pid, sessions, targets);
        }
        rc = cli_write_status(prc < 0 ? -ENOMEM : 0);
    }
    json_free(doc);
    free(buf);
    query_close(&t);
    return rc;
}
