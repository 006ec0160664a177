/* cmd_sessions.c — `memtrail sessions PID [--json] [--targets] [--timeout
 * SECONDS]`: the event sessions of a running, tracked process (the agent's
 * own, from `memtrail run --session`, and those the program made with
 * mt_session_create), as SQL Server's sys.dm_xe_sessions shows them: one
 * row per session with the seed's columns; --targets adds what each
 * session's targets hold. The process answers the control socket's
 * `sessions` request with JSON (src/agent/control.c, the engine's
 * xe_view_json; docs/json-sessions.md), read here with json-c, whose
 * integers are 64-bit, so counters pass through exactly. */
#include "cli/cli.h"
#include "common/json_out.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table: sys.dm_xe_sessions' column headers (users know them), each
 * read from its JSON key; blocked_event_fire_time is in ms there, as
 * SQL Server has it, and in ns in the JSON. */
static const struct column {
    const char *header, *key;
    bool ns_to_ms;
} columns[] = {
    {"name", "name", false},
    {"pending_buffers", "pending_buffers", false},
    {"total_regular_buffers", "total_regular_buffers", false},
    {"regular_buffer_size", "regular_buffer_size_bytes", false},
    {"total_large_buffers", "total_large_buffers", false},
    {"large_buffer_size", "large_buffer_size_bytes", false},
    {"total_buffer_size", "total_buffer_size_bytes", false},
    {"buffer_policy_desc", "buffer_policy", false},
    {"dropped_event_count", "events_dropped", false},
    {"dropped_buffer_count", "buffers_dropped", false},
    {"blocked_event_fire_time", "blocked_event_fire_time_ns", true},
    {"largest_event_dropped_size", "largest_event_dropped_size_bytes", false},
    {"create_time", "create_time", false},
};
#define NCOLUMNS (sizeof columns / sizeof columns[0])

static json_object *member(json_object *obj, const char *key)
{
    json_object *v = NULL;
    if (json_object_is_type(obj, json_type_object) && json_object_object_get_ex(obj, key, &v))
        return v;
    return NULL;
}

static bool is_container(json_object *v)
{
    return json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array);
}

static bool is_numeric(json_object *v)
{
    return !v || json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
}

/* A scalar as a table shows it: strings unquoted, null as NULL, numbers
 * as written (json-c keeps 64-bit integers exact); containers as compact
 * JSON. Malloc'd, NULL when out of memory. */
static char *plain(json_object *v)
{
    if (!v)
        return strdup("NULL");
    if (json_object_is_type(v, json_type_string))
        return strdup(json_object_get_string(v));
    return strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* One table cell: "" for a missing key; ns turned into whole ms. */
static char *cell(json_object *row, const char *key, bool ns_to_ms)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(row, key, &v))
        return strdup("");
    if (ns_to_ms && json_object_is_type(v, json_type_int)) {
        char *s = NULL;
        return asprintf(&s, "%" PRIu64, json_object_get_uint64(v) / 1000000) < 0 ? NULL : s;
    }
    return plain(v);
}

/* A table: one row per object of the array `rows`, one column per key
 * (headers[k] over keys[k]); numbers right-aligned. -ENOMEM or 0. */
static int print_table(FILE *out, json_object *rows, const char *const *headers, const char *const *keys,
                       const bool *ns_to_ms, size_t nkeys, int indent)
{
    size_t nrows = json_object_array_length(rows);
    size_t *width = calloc(nkeys, sizeof *width);
    char **cells = calloc(nrows * nkeys + 1, sizeof *cells);
    bool *right = calloc(nkeys, sizeof *right);
    int rc = width && cells && right ? 0 : -ENOMEM;
    for (size_t k = 0; rc == 0 && k < nkeys; k++) {
        width[k] = strlen(headers[k]);
        right[k] = true;
        for (size_t r = 0; r < nrows && rc == 0; r++) {
            json_object *row = json_object_array_get_idx(rows, r), *v = member(row, keys[k]);
            if (!is_numeric(v))
                right[k] = false;
            char *c = json_object_is_type(row, json_type_object) ? cell(row, keys[k], ns_to_ms && ns_to_ms[k])
                                                                 : strdup("");
            if (!c)
                rc = -ENOMEM;
            else if (strlen(c) > width[k])
                width[k] = strlen(c);
            cells[r * nkeys + k] = c;
        }
    }
    for (size_t r = 0; rc == 0 && r <= nrows; r++) { /* row 0: the header */
        fprintf(out, "%*s", indent, "");
        for (size_t k = 0; k < nkeys; k++) {
            const char *c = r == 0 ? headers[k] : cells[(r - 1) * nkeys + k];
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

static int render(FILE *out, json_object *j, int indent, const char *skip);

/* What follows a "key:" or an item's "-": a container with members on the
 * lines below, indented; anything else on the same line. */
static int render_value(FILE *out, json_object *v, int indent)
{
    bool below = json_object_is_type(v, json_type_array)    ? json_object_array_length(v) > 0
                 : json_object_is_type(v, json_type_object) ? json_object_object_length(v) > 0
                                                            : false;
    if (below) {
        fputc('\n', out);
        return render(out, v, indent + 2, NULL);
    }
    char *c = plain(v);
    if (!c)
        return -ENOMEM;
    fprintf(out, " %s\n", c);
    free(c);
    return 0;
}

/* An array of objects as a table whose columns are their members (in the
 * order first seen); anything else one "- item" per line. */
static int render_array(FILE *out, json_object *a, int indent)
{
    size_t n = json_object_array_length(a);
    bool objects = n > 0;
    for (size_t i = 0; i < n; i++)
        objects &= json_object_is_type(json_object_array_get_idx(a, i), json_type_object);
    if (!objects) {
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "%*s-", indent, "");
            if (render_value(out, json_object_array_get_idx(a, i), indent) < 0)
                return -ENOMEM;
        }
        return 0;
    }
    const char **keys = NULL;
    size_t nkeys = 0;
    for (size_t i = 0; i < n; i++) {
        json_object_object_foreach(json_object_array_get_idx(a, i), key, val)
        {
            (void)val;
            bool seen = false;
            for (size_t k = 0; k < nkeys && !seen; k++)
                seen = strcmp(keys[k], key) == 0;
            if (seen)
                continue;
            const char **more = realloc(keys, (nkeys + 1) * sizeof *keys);
            if (!more) {
                free(keys);
                return -ENOMEM;
            }
            keys = more;
            keys[nkeys++] = key;
        }
    }
    int rc = print_table(out, a, keys, keys, NULL, nkeys, indent);
    free(keys);
    return rc;
}

/* A target's data: "key: value" lines, nested containers indented; the
 * member `skip` (may be NULL) of this level left out. */
static int render(FILE *out, json_object *j, int indent, const char *skip)
{
    if (json_object_is_type(j, json_type_array))
        return render_array(out, j, indent);
    json_object_object_foreach(j, key, v)
    {
        if (skip && strcmp(key, skip) == 0)
            continue;
        fprintf(out, "%*s%s:", indent, "", key);
        if (render_value(out, v, indent) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Without --targets, a target is its name only (as the engine's view
 * without data has it): every other member goes. -ENOMEM or 0. */
static int targets_by_name(json_object *sessions)
{
    for (size_t i = 0; i < json_object_array_length(sessions); i++) {
        json_object *t = member(json_object_array_get_idx(sessions, i), "targets");
        for (size_t k = 0; json_object_is_type(t, json_type_array) && k < json_object_array_length(t); k++) {
            json_object *name = member(json_object_array_get_idx(t, k), "target");
            json_object *only = json_object_new_object();
            if (!only || json_object_object_add(only, "target", json_object_get(name)) < 0 ||
                json_object_array_put_idx(t, k, only) < 0) {
                json_object_put(only);
                return -ENOMEM;
            }
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
    .min_args = 1,
    .max_args = 1,
    .missing = "missing the PID of the process to ask",
    .extra = "too many arguments ('%s')",
};

/* The answer written back through the CLI's one JSON writer, laid out
 * for reading: a container that holds containers one member per line,
 * any other on one line (a ring buffer's event is one line). Integers
 * pass through exactly: json-c keeps them as 64-bit values. */
static void write_json(mt_json *out, json_object *j)
{
    bool nested = false;
    if (json_object_is_type(j, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(j) && !nested; i++)
            nested = is_container(json_object_array_get_idx(j, i));
    } else if (json_object_is_type(j, json_type_object)) {
        json_object_object_foreach(j, key, v)
        {
            (void)key;
            nested |= v && is_container(v);
        }
    }
    switch (j ? json_object_get_type(j) : json_type_null) {
    case json_type_array:
        if (!nested)
            mt_json_oneline(out);
        mt_json_array_begin(out);
        for (size_t i = 0; i < json_object_array_length(j); i++)
            write_json(out, json_object_array_get_idx(j, i));
        mt_json_array_end(out);
        break;
    case json_type_object:
        if (!nested)
            mt_json_oneline(out);
        mt_json_object_begin(out);
        json_object_object_foreach(j, key, v)
        {
            mt_json_key(out, key);
            write_json(out, v);
        }
        mt_json_object_end(out);
        break;
    case json_type_int:
        if (json_object_get_int64(j) < 0)
            mt_json_i64(out, json_object_get_int64(j));
        else
            mt_json_u64(out, json_object_get_uint64(j));
        break;
    case json_type_boolean: mt_json_bool(out, json_object_get_boolean(j)); break;
    case json_type_string:
        mt_json_strn(out, json_object_get_string(j), (size_t)json_object_get_string_len(j));
        break;
    case json_type_double: /* none in the engine's documents: its numbers are integers */
    case json_type_null:
    default: mt_json_null(out); break;
    }
}

static int print_text(long pid, json_object *sessions, bool targets)
{
    size_t n = json_object_array_length(sessions);
    if (n == 0) {
        printf("Process %ld has no event sessions.\n", pid);
        return 0;
    }
    const char *headers[NCOLUMNS], *keys[NCOLUMNS];
    bool ns_to_ms[NCOLUMNS];
    for (size_t k = 0; k < NCOLUMNS; k++) {
        headers[k] = columns[k].header;
        keys[k] = columns[k].key;
        ns_to_ms[k] = columns[k].ns_to_ms;
    }
    if (print_table(stdout, sessions, headers, keys, ns_to_ms, NCOLUMNS, 0) < 0)
        return -ENOMEM;
    for (size_t i = 0; targets && i < n; i++) {
        json_object *s = json_object_array_get_idx(sessions, i), *name = member(s, "name");
        json_object *t = member(s, "targets");
        size_t nt = json_object_is_type(t, json_type_array) ? json_object_array_length(t) : 0;
        printf("\nSession '%s': ",
               json_object_is_type(name, json_type_string) ? json_object_get_string(name) : "?");
        if (nt == 0) {
            puts("no targets");
            continue;
        }
        printf("%zu target%s\n", nt, nt == 1 ? "" : "s");
        for (size_t k = 0; k < nt; k++) {
            json_object *tg = json_object_array_get_idx(t, k), *kind = member(tg, "target");
            printf("  %s\n",
                   json_object_is_type(kind, json_type_string) ? json_object_get_string(kind) : "target");
            /* its members but "target", which the line above names */
            if (json_object_is_type(tg, json_type_object) && render(stdout, tg, 4, "target") < 0)
                return -ENOMEM;
        }
    }
    return 0;
}

/* The answer, checked: a JSON object of this schema with a "sessions"
 * array (members of the wrong type show as blanks in the table). 0 and
 * *doc, or CLI_FAILED after saying why. */
static int read_answer(long pid, const char *buf, size_t len, json_object **doc)
{
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return cli_error("out of memory");
    json_object *j = json_tokener_parse_ex(tok, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    while (j && used < len && strchr(" \t\r\n", buf[used]))
        used++;
    int rc = 0;
    json_object *schema = member(j, "schema"), *sessions = member(j, "sessions");
    if (!j || jerr != json_tokener_success)
        rc = cli_error(
            "process %ld answered with bad JSON (%s at byte %zu); is its agent older than this memtrail?",
            pid, jerr == json_tokener_continue ? "cut short" : json_tokener_error_desc(jerr), used);
    else if (used < len)
        rc = cli_error("process %ld answered with bad JSON (text after the document at byte %zu)", pid, used);
    else if (!json_object_is_type(schema, json_type_string) ||
             strcmp(json_object_get_string(schema), MT_JSON_SCHEMA) != 0)
        rc = cli_error(
            "process %ld answered with schema %s, this memtrail reads \"" MT_JSON_SCHEMA
            "\"; run the memtrail that started it",
            pid, schema ? json_object_to_json_string_ext(schema, JSON_C_TO_STRING_NOSLASHESCAPE) : "(none)");
    else if (!json_object_is_type(sessions, json_type_array))
        rc = cli_error("process %ld answered without a \"sessions\" array", pid);
    if (rc != 0)
        json_object_put(j);
    else
        *doc = j;
    return rc;
}

int cmd_sessions(int argc, char **argv)
{
    bool json = false, targets = false;
    int timeout_s = 5;
    const struct cli_option options[] = {
        CLI_OPT_JSON(&json, "print the sessions as JSON (schema memtrail/1; keys in docs/json-sessions.md)"),
        {.kind = CLI_OPT_FLAG,
         .name = "targets",
         .value = &targets,
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
    json_object *doc = NULL;
    int rc = query_open(pid, "sessions", &t);
    if (rc == 0)
        rc = query_ask(&t, "sessions\n", timeout_s * 1000, &buf, &len);
    if (rc == 0)
        rc = read_answer(pid, buf, len, &doc);
    if (rc == 0) {
        json_object *sessions = member(doc, "sessions");
        int prc = 0;
        if (json) {
            prc = targets ? 0 : targets_by_name(sessions);
            if (prc == 0) {
                mt_json out;
                mt_json_init_file(&out, stdout, true);
                write_json(&out, doc);
                prc = mt_json_finish(&out);
            }
        } else {
            prc = print_text(pid, sessions, targets);
        }
        rc = cli_write_status(prc);
    }
    json_object_put(doc);
    free(buf);
    query_close(&t);
    return rc;
}
