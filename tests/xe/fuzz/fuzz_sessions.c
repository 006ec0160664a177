/* fuzz_sessions.c — the libFuzzer target of event session definitions as
 * MEMTRAIL_SESSIONS gives them (one per line; xe_config.c, with the
 * predicates of where= and the targets' parameters): each line parsed;
 * a good one planned (xe_plan, the buffers' sizes), and each of its
 * in-memory targets created from its parameters, fed events the input
 * picks, viewed as JSON, stopped and closed (event_file is left out: it
 * writes files). Nothing may crash, overrun or leak; a refusal is one line
 * without control characters (the agent prints it on the program's
 * stderr); the JSON view is NUL-terminated and balanced.
 *
 * `make fuzz` builds it as build/fuzz/fuzz_sessions and runs it;
 * tests/xe/fuzz/test_corpus_sessions.c replays tests/xe/fuzz/corpus_sessions/
 * under gcc's ASan+UBSan in `make check`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/out.h"
#include "xe/xe.h"
#include "xe/xe_plan.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A host with a few categories, as the agent's would have. */
static const char *const fuzz_categories[] = {"malloc", "memtrail", "parser", "io", "net cache"};
#define NCATS (sizeof fuzz_categories / sizeof fuzz_categories[0])

static int fuzz_category_id(const char *name, size_t len)
{
    for (size_t i = 0; i < NCATS; i++)
        if (strlen(fuzz_categories[i]) == len && memcmp(fuzz_categories[i], name, len) == 0)
            return (int)i;
    return -1;
}

static const char *fuzz_category_name(unsigned id)
{
    return id < NCATS ? fuzz_categories[id] : NULL;
}

static const xe_host fuzz_host = {fuzz_category_id, fuzz_category_name};

static void one_line_or_abort(const char *why, size_t cap)
{
    FUZZ_CHECK(strnlen(why, cap) < cap);
    for (const unsigned char *p = (const unsigned char *)why; *p; p++)
        FUZZ_CHECK(*p >= 0x20 && *p != 0x7f);
}

/* Braces and brackets outside strings balance, strings close. */
static void balanced_or_abort(const char *s)
{
    int depth = 0, in_str = 0;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == '"')
                in_str = 0;
            continue;
        }
        if (*s == '"')
            in_str = 1;
        else if (*s == '{' || *s == '[')
            depth++;
        else if (*s == '}' || *s == ']')
            depth--;
        FUZZ_CHECK(depth >= 0);
    }
    FUZZ_CHECK(depth == 0 && !in_str);
}

static void run_targets(const xe_config *cfg, const uint8_t *data, size_t size)
{
    static char view[1 << 16];
    for (int i = 0; i < cfg->ntargets; i++) {
        const xe_target_ops *ops = cfg->targets[i].ops;
        if (ops == &xe_target_event_file)
            continue;
        xe_target t;
        memset(&t, 0, sizeof t);
        t.ops = ops;
        char why[256] = "";
        if (ops->init(&t, cfg->targets[i].params, why, sizeof why) != 0) {
            one_line_or_abort(why, sizeof why);
            continue;
        }
        /* Events the input picks: 48 bytes each. */
        for (size_t off = 0; off + 48 <= size && off < 48 * 64; off += 48) {
            xe_event ev;
            memset(&ev, 0, sizeof ev);
            const uint8_t *p = data + off;
            ev.type = (uint16_t)(p[0] % XE_EV_NTYPES);
            ev.category = (uint16_t)(p[1] % (NCATS + 1));
            memcpy(&ev.size, p + 8, 8);
            memcpy(&ev.address, p + 16, 8);
            memcpy(&ev.key, p + 24, 8);
            memcpy(&ev.value, p + 32, 8);
            memcpy(&ev.old_address, p + 40, 8);
            ev.site = p[2];
            if (xe_pred_eval(&cfg->pred, &ev))
                ops->deliver(&t, &ev);
        }
        if (ops->flush)
            ops->flush(&t);
        if (ops->view_json) {
            mt_out o;
            mt_out_init(&o, view, sizeof view, -1);
            xe_target_json(&t, &o, 1);
            if (o.len < sizeof view)
                balanced_or_abort(mt_out_cstr(&o));
        }
        if (ops->stop)
            ops->stop(&t);
        if (ops->close)
            ops->close(&t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    xe_set_host(&fuzz_host);
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    static xe_config cfg;
    /* One definition per line, as the agent splits MEMTRAIL_SESSIONS. */
    for (char *line = text; line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char why[256] = "";
        int rc = xe_config_parse(line, &cfg, why, sizeof why);
        if (rc != 0) {
            FUZZ_CHECK(rc == -22 && why[0]);
            one_line_or_abort(why, sizeof why);
        } else {
            FUZZ_CHECK(cfg.ntargets >= 0 && cfg.ntargets <= XE_MAX_TARGETS && cfg.pred.n <= XE_PRED_MAX);
            xe_plan_in in = {.max_memory = cfg.max_memory,
                             .max_event_size = cfg.max_event_size,
                             .mode = cfg.mode,
                             .cpus = cfg.cpus ? cfg.cpus : 4,
                             .nodes = cfg.nodes ? cfg.nodes : 1,
                             .strict = cfg.strict};
            xe_plan_out plan;
            if (xe_plan(&in, &plan, why, sizeof why) == 0) {
                FUZZ_CHECK(plan.total_regular_buffers > 0 && plan.regular_buffer_size > 0);
            } else {
                one_line_or_abort(why, sizeof why);
            }
            run_targets(&cfg, data, size);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return 0;
}
