/* fuzz_pred.c — the libFuzzer target of session predicates (xe_pred.c):
 * any text compiled; a refusal is -EINVAL with one line (no control
 * characters) and an empty program; a program compiles again from the text
 * it keeps to the same operations, stays within XE_PRED_MAX, and on events
 * the input picks agrees with an evaluation written independently here
 * (an array stack of booleans, where xe_pred_eval packs them in one word).
 *
 * `make fuzz` builds it as build/fuzz/fuzz_pred and runs it;
 * tests/xe/fuzz/test_corpus_pred.c replays tests/xe/fuzz/corpus_pred/
 * under gcc's ASan+UBSan in `make check`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xe/xe.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const pred_categories[] = {"malloc", "memtrail", "parser", "io", "net cache"};
#define NPCATS (sizeof pred_categories / sizeof pred_categories[0])

static int pred_category_id(const char *name, size_t len)
{
    for (size_t i = 0; i < NPCATS; i++)
        if (strlen(pred_categories[i]) == len && memcmp(pred_categories[i], name, len) == 0)
            return (int)i;
    return -1;
}

static const char *pred_category_name(unsigned id)
{
    return id < NPCATS ? pred_categories[id] : NULL;
}

static const xe_host pred_host = {pred_category_id, pred_category_name};

/* The operations' codes, as xe_pred.c numbers them. */
enum { R_EQ, R_NE, R_LT, R_LE, R_GT, R_GE, R_AND, R_OR, R_NOT };

/* The reference: an explicit stack. -1 when the program is malformed
 * (pops an empty stack, leaves other than one value). */
static int reference_eval(const xe_pred *p, const xe_event *ev)
{
    if (p->n == 0)
        return 1;
    unsigned char st[XE_PRED_MAX + 1];
    int sp = 0;
    for (unsigned i = 0; i < p->n; i++) {
        const xe_pred_op *op = &p->ops[i];
        if (op->op <= R_GE) {
            if (op->field >= XE_F_NFIELDS)
                return -1;
            uint64_t v = xe_event_field(ev, (enum xe_field)op->field), w = op->value;
            int r = op->op == R_EQ   ? v == w
                    : op->op == R_NE ? v != w
                    : op->op == R_LT ? v < w
                    : op->op == R_LE ? v <= w
                    : op->op == R_GT ? v > w
                                     : v >= w;
            st[sp++] = (unsigned char)r;
        } else if (op->op == R_AND || op->op == R_OR) {
            if (sp < 2)
                return -1;
            sp--;
            st[sp - 1] = op->op == R_AND ? (st[sp - 1] && st[sp]) : (st[sp - 1] || st[sp]);
        } else if (op->op == R_NOT) {
            if (sp < 1)
                return -1;
            st[sp - 1] = !st[sp - 1];
        } else {
            return -1;
        }
    }
    return sp == 1 ? st[0] : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    xe_set_host(&pred_host);
    /* The text: up to the first NUL; the bytes after it pick events. */
    size_t tl = strnlen((const char *)data, size);
    char *text = malloc(tl + 1);
    if (!text)
        return 0;
    memcpy(text, data, tl);
    text[tl] = '\0';
    static xe_pred p, q;
    char why[256] = "";
    int rc = xe_pred_compile(text, &p, why, sizeof why);
    if (rc != 0) {
        FUZZ_CHECK(rc == -22 && why[0] && p.n == 0 && strnlen(why, sizeof why) < sizeof why);
        for (const unsigned char *c = (const unsigned char *)why; *c; c++)
            FUZZ_CHECK(*c >= 0x20 && *c != 0x7f);
        free(text);
        return 0;
    }
    FUZZ_CHECK(p.n <= XE_PRED_MAX);
    FUZZ_CHECK(xe_pred_compile(p.text, &q, why, sizeof why) == 0 && q.n == p.n &&
               memcmp(p.ops, q.ops, p.n * sizeof p.ops[0]) == 0);
    /* Events: 40 bytes each after the text (a field each), and one of zeros. */
    const uint8_t *ev_bytes = data + (tl < size ? tl + 1 : size);
    size_t left = size - (size_t)(ev_bytes - data);
    for (size_t off = 0;; off += 40) {
        xe_event ev;
        memset(&ev, 0, sizeof ev);
        if (off + 40 <= left) {
            const uint8_t *b = ev_bytes + off;
            ev.type = (uint16_t)(b[0] % XE_EV_NTYPES);
            ev.category = (uint16_t)(b[1] % (NPCATS + 1));
            ev.tid = b[2];
            ev.cpu = b[3];
            ev.data_len = b[4];
            memcpy(&ev.size, b + 8, 8);
            memcpy(&ev.address, b + 16, 8);
            memcpy(&ev.key, b + 24, 8);
            memcpy(&ev.value, b + 32, 8);
        }
        int want = reference_eval(&p, &ev);
        FUZZ_CHECK(want >= 0 && xe_pred_eval(&p, &ev) == want);
        if (off + 40 > left || off >= 40 * 64)
            break;
    }
    free(text);
    return 0;
}
