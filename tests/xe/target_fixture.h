/* target_fixture.h — what the target tests share: a host with category
 * names, a scratch directory, making and closing targets, rendering views
 * and checking them with python3's json module, and events whose fields
 * all derive from one number (so a torn read shows). */
#ifndef MT_TESTS_XE_TARGET_FIXTURE_H
#define MT_TESTS_XE_TARGET_FIXTURE_H

#include "unit.h"
#include "xe/xe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNUSED __attribute__((unused))

static char dir[64];

/* ---- helpers ---- */

static const char *const cat_names[8] = {[1] = "parser", [2] = "io \"quoted\""};
UNUSED static int host_id(const char *name, size_t len)
{
    for (int i = 0; i < 8; i++)
        if (cat_names[i] && strlen(cat_names[i]) == len && memcmp(cat_names[i], name, len) == 0)
            return i;
    return -1;
}
UNUSED static const char *host_name(unsigned id)
{
    return id < 8 ? cat_names[id] : NULL;
}
static const xe_host host = {host_id, host_name};

static uint64_t rng = 0x2545f4914f6cdd1dull;
UNUSED static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

UNUSED static xe_target *make(const xe_target_ops *ops, const char *params)
{
    xe_target *t = calloc(1, sizeof *t);
    t->ops = ops;
    char why[256] = "";
    int rc = ops->init(t, params, why, sizeof why);
    if (rc != 0) {
        printf("  init %s(%s): %d %s\n", ops->name, params, rc, why);
        free(t);
        return NULL;
    }
    return t;
}

UNUSED static void destroy(xe_target *t)
{
    if (!t)
        return;
    if (t->ops->close)
        t->ops->close(t);
    free(t);
}

/* init fails with -EINVAL and a reason containing want. */
UNUSED static void expect_init_error(const xe_target_ops *ops, const char *params, const char *want)
{
    xe_target t = {.ops = ops};
    char why[256] = "";
    int rc = ops->init(&t, params, why, sizeof why);
    char name[400];
    snprintf(name, sizeof name, "%s(%s) rejected: %s", ops->name, params, want);
    CHECK(name, rc == -EINVAL && strstr(why, want) != NULL);
    if (rc != -EINVAL || !strstr(why, want))
        printf("  got %d '%s'\n", rc, why);
    if (rc == 0 && ops->close)
        ops->close(&t);
}

#define VIEW_CAP (16u << 20)
UNUSED static char *view(xe_target *t)
{
    char *buf = malloc(VIEW_CAP);
    mt_out o;
    mt_out_init(&o, buf, VIEW_CAP, -1);
    xe_target_json(t, &o, 1);
    mt_out_cstr(&o);
    return buf;
}

/* Runs a python3 script on the JSON (as d) and returns what it prints
 * (malloc'd; "" on failure, with the error shown). */
UNUSED static char *py(const char *json, const char *script)
{
    char jpath[128], spath[128], cmd[400];
    snprintf(jpath, sizeof jpath, "%s/view.json", dir);
    snprintf(spath, sizeof spath, "%s/check.py", dir);
    FILE *f = fopen(jpath, "w");
    fputs(json, f);
    fclose(f);
    f = fopen(spath, "w");
    fprintf(f, "import json, sys\nd = json.load(open(sys.argv[1]))\n%s\n", script);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s %s", spath, jpath);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 20, n = 0;
    char *out = malloc(cap);
    size_t k;
    while ((k = fread(out + n, 1, cap - 1 - n, p)) > 0)
        n += k;
    out[n] = '\0';
    int st = pclose(p);
    if (st != 0) {
        printf("  python failed (%d) on: %.300s\n", st, json);
        out[0] = '\0';
    }
    return out;
}

/* The view parses, and a python expression on it prints want. */
UNUSED static void expect_view(xe_target *t, const char *expr, const char *want)
{
    char *json = view(t);
    char script[1024];
    snprintf(script, sizeof script, "print(%s)", expr);
    char *out = py(json, script);
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    char name[600];
    snprintf(name, sizeof name, "%s view: %s == %s", t->ops->name, expr, want);
    CHECK(name, strcmp(out, want) == 0);
    if (strcmp(out, want) != 0)
        printf("  got '%s'\n", out);
    free(out);
    free(json);
}

/* An event whose every field derives from i. */
UNUSED static xe_event seq_event(uint64_t i)
{
    xe_event ev = {.type = (uint16_t)(i % XE_EV_NTYPES),
                   .category = (uint16_t)i,
                   .tid = (uint32_t)i,
                   .cpu = (uint32_t)i,
                   .data_len = (uint32_t)i,
                   .time_ns = i,
                   .size = i,
                   .address = i,
                   .old_address = i,
                   .site = i,
                   .key = i,
                   .value = i};
    return ev;
}

UNUSED static int seq_consistent(const xe_event *e)
{
    uint64_t i = e->value;
    return e->type == i % XE_EV_NTYPES && e->category == (uint16_t)i && e->tid == (uint32_t)i &&
           e->cpu == (uint32_t)i && e->data_len == (uint32_t)i && e->time_ns == i && e->size == i &&
           e->address == i && e->old_address == i && e->site == i && e->key == i && e->data == NULL;
}

/* Makes the scratch directory and sets the host. */
UNUSED static int fixture_setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/xe_targets.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    xe_set_host(&host);
    return 0;
}

UNUSED static void fixture_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("  could not remove %s\n", dir);
}

#endif
