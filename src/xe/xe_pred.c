/* xe_pred.c — session predicates: `size >= 4KB && (category == "parser" ||
 * !(type == free))` compiled by recursive descent into a postfix program
 * of at most XE_PRED_MAX operations, and evaluated on the firing path
 * with a one-word bit stack (no allocation, no recursion at run time).
 *
 * Grammar:  or   := and ('||' and)*
 *           and  := not ('&&' not)*
 *           not  := '!' not | '(' or ')' | field cmp value
 *           cmp  := == != < <= > >=
 *           value:= number [B|K|KB|M|MB|G|GB]  (decimal or 0x hex; units 1024-based)
 *                 | "name" (category) | name or "name" (type) */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <errno.h>
#include <string.h>

enum { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR, OP_NOT };

#define PRED_MAX_DEPTH 32 /* parentheses and '!' nesting */

typedef struct parser {
    const char *s;
    size_t len;
    size_t pos;
    xe_pred *out;
    int depth;
    char *why;
    size_t whylen;
} parser;

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void skip_space(parser *p)
{
    while (p->pos < p->len && is_space(p->s[p->pos]))
        p->pos++;
}

/* "predicate: <a>'<b>' at column N<c>" (1-based; c: a hint, may be NULL). */
static int fail(parser *p, size_t col, const char *a, const char *b, size_t blen, const char *c)
{
    mt_out o;
    xe_why_init(&o, p->why, p->whylen);
    mt_out_str(&o, "predicate: ");
    mt_out_str(&o, a);
    if (b) {
        mt_out_char(&o, '\'');
        mt_out_shown(&o, b, blen);
        mt_out_char(&o, '\'');
    }
    mt_out_str(&o, " at column ");
    mt_out_u64(&o, col + 1);
    if (c)
        mt_out_str(&o, c);
    xe_why_done(&o);
    return -EINVAL;
}

static int emit(parser *p, uint8_t op, uint8_t field, uint64_t value)
{
    if (p->out->n >= XE_PRED_MAX) {
        mt_out o;
        xe_why_init(&o, p->why, p->whylen);
        mt_out_str(&o, "predicate too long (more than ");
        mt_out_u64(&o, XE_PRED_MAX);
        mt_out_str(&o, " operations)");
        xe_why_done(&o);
        return -EINVAL;
    }
    xe_pred_op *o = &p->out->ops[p->out->n++];
    o->op = op;
    o->field = field;
    o->value = value;
    return 0;
}

/* The token at pos, for error messages: an identifier, a number, or one char. */
static size_t token_len(const parser *p)
{
    size_t i = p->pos;
    if (i >= p->len)
        return 0;
    if (is_alpha(p->s[i]) || is_digit(p->s[i])) {
        while (i < p->len && (is_alpha(p->s[i]) || is_digit(p->s[i])))
            i++;
        return i - p->pos;
    }
    return 1;
}

/* "unexpected 'x' at column N (expected WHAT: LIST)", or at the end of the
 * predicate "expected WHAT (LIST) at column N" (list: may be NULL). */
static int unexpected(parser *p, const char *what, const char *list)
{
    mt_out o;
    char buf[160];
    mt_out_init(&o, buf, sizeof buf, -1);
    if (p->pos >= p->len) {
        mt_out_str(&o, "expected ");
        mt_out_str(&o, what);
        if (list) {
            mt_out_str(&o, " (");
            mt_out_str(&o, list);
            mt_out_char(&o, ')');
        }
        return fail(p, p->pos, mt_out_cstr(&o), NULL, 0, NULL);
    }
    mt_out_str(&o, " (expected ");
    mt_out_str(&o, what);
    if (list) {
        mt_out_str(&o, ": ");
        mt_out_str(&o, list);
    }
    mt_out_char(&o, ')');
    return fail(p, p->pos, "unexpected ", p->s + p->pos, token_len(p), mt_out_cstr(&o));
}

static int parse_cmp_op(parser *p, uint8_t *op)
{
    skip_space(p);
    const char *s = p->s + p->pos;
    size_t left = p->len - p->pos;
    char c0 = left > 0 ? s[0] : 0, c1 = left > 1 ? s[1] : 0;
    if (c0 == '=' && c1 == '=')
        *op = OP_EQ, p->pos += 2;
    else if (c0 == '!' && c1 == '=')
        *op = OP_NE, p->pos += 2;
    else if (c0 == '<' && c1 == '=')
        *op = OP_LE, p->pos += 2;
    else if (c0 == '>' && c1 == '=')
        *op = OP_GE, p->pos += 2;
    else if (c0 == '<')
        *op = OP_LT, p->pos += 1;
    else if (c0 == '>')
        *op = OP_GT, p->pos += 1;
    else if (c0 == '=')
        return fail(p, p->pos, "'=' is not a comparison (use '==')", NULL, 0, NULL);
    else
        return unexpected(p, "a comparison", "== != < <= > >=");
    return 0;
}

static int is_unit(const char *u, size_t n)
{
    static const char *const units[] = {"b", "k", "kb", "m", "mb", "g", "gb"};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (xe_name_eq(units[i], u, n))
            return 1;
    return 0;
}

/* A number with an optional 1024-based unit. */
static int parse_number(parser *p, uint64_t *out)
{
    size_t start = p->pos;
    const char *s = p->s;
    uint64_t v = 0;
    int hex = p->pos + 1 < p->len && s[p->pos] == '0' && (s[p->pos + 1] == 'x' || s[p->pos + 1] == 'X');
    if (hex) {
        p->pos += 2;
        size_t digits = 0;
        for (; p->pos < p->len; p->pos++, digits++) {
            char c = s[p->pos];
            unsigned d;
            if (is_digit(c))
                d = (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f')
                d = (unsigned)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                d = (unsigned)(c - 'A' + 10);
            else
                break;
            if (v >> 60)
                return fail(p, start, "number too big", NULL, 0, NULL);
            v = v << 4 | d;
        }
        if (digits == 0)
            return fail(p, start, "hex number without digits", NULL, 0, NULL);
    } else {
        for (; p->pos < p->len && is_digit(s[p->pos]); p->pos++) {
            unsigned d = (unsigned)(s[p->pos] - '0');
            if (v > (UINT64_MAX - d) / 10)
                return fail(p, start, "number too big", NULL, 0, NULL);
            v = v * 10 + d;
        }
    }
    /* "4KB", or "4 KB" when the word is a unit (else it is the next token,
     * left for the caller to reject). */
    size_t after = p->pos;
    skip_space(p);
    if (p->pos > after && !is_unit(s + p->pos, token_len(p)))
        p->pos = after;
    size_t us = p->pos;
    while (p->pos < p->len && (is_alpha(s[p->pos]) || is_digit(s[p->pos])))
        p->pos++;
    size_t ul = p->pos - us;
    uint64_t mult = 1;
    if (ul > 0) {
        const char *u = s + us;
        if (!hex && ul == 1 && (u[0] == 'b' || u[0] == 'B'))
            mult = 1;
        else if (!hex && (ul == 1 || (ul == 2 && (u[1] == 'b' || u[1] == 'B')))) {
            switch (u[0]) {
            case 'k':
            case 'K': mult = 1ull << 10; break;
            case 'm':
            case 'M': mult = 1ull << 20; break;
            case 'g':
            case 'G': mult = 1ull << 30; break;
            default: mult = 0;
            }
        } else
            mult = 0;
        if (mult == 0)
            return fail(p, us, "unknown unit ", u, ul, " (units: B, KB, MB, GB)");
    }
    if (v > UINT64_MAX / mult)
        return fail(p, start, "number too big", NULL, 0, NULL);
    *out = v * mult;
    return 0;
}

static int parse_value(parser *p, unsigned field, uint64_t *out)
{
    skip_space(p);
    if (p->pos >= p->len)
        return fail(p, p->pos, "expected a value", NULL, 0, NULL);
    size_t start = p->pos;
    char c = p->s[p->pos];
    if (is_digit(c))
        return parse_number(p, out);
    if (c == '"' || c == '\'') {
        size_t i = p->pos + 1;
        while (i < p->len && p->s[i] != c)
            i++;
        if (i >= p->len)
            return fail(p, start, "unterminated string", NULL, 0, NULL);
        const char *name = p->s + p->pos + 1;
        size_t nl = i - p->pos - 1;
        p->pos = i + 1;
        if (field == XE_F_CATEGORY) {
            int id = xe_category_id(name, nl);
            if (id < 0)
                return fail(p, start, "unknown category ", name, nl, NULL);
            *out = (uint64_t)id;
            return 0;
        }
        if (field == XE_F_TYPE) {
            int t = xe_type_by_name(name, nl);
            if (t < 0)
                return fail(p, start, "unknown event type ", name, nl,
                            " (types: user, alloc, free, realloc, mmap, munmap, span_begin, span_end, "
                            "snapshot, page_ref)");
            *out = (uint64_t)t;
            return 0;
        }
        return fail(p, start, "a name compares only with category or type, not ",
                    xe_field_name((enum xe_field)field), strlen(xe_field_name((enum xe_field)field)), NULL);
    }
    if (is_alpha(c)) {
        size_t n = token_len(p);
        const char *name = p->s + p->pos;
        if (field == XE_F_TYPE) {
            int t = xe_type_by_name(name, n);
            if (t < 0)
                return fail(p, start, "unknown event type ", name, n,
                            " (types: user, alloc, free, realloc, mmap, munmap, span_begin, span_end, "
                            "snapshot, page_ref)");
            p->pos += n;
            *out = (uint64_t)t;
            return 0;
        }
        if (field == XE_F_CATEGORY)
            return fail(p, start, "category names go in quotes: ", name, n, NULL);
        return fail(p, start, "expected a number, not ", name, n, NULL);
    }
    return unexpected(p, "a value", NULL);
}

static int parse_or(parser *p);

static int parse_not(parser *p)
{
    skip_space(p);
    if (p->pos >= p->len)
        return fail(p, p->pos, "expected a comparison, '!' or '('", NULL, 0, NULL);
    char c = p->s[p->pos];
    int rc;
    if ((c == '!' && !(p->pos + 1 < p->len && p->s[p->pos + 1] == '=')) || c == '(') {
        if (++p->depth > PRED_MAX_DEPTH)
            return fail(p, p->pos, "nested too deeply", NULL, 0, NULL);
        size_t open = p->pos++;
        if (c == '!') {
            if ((rc = parse_not(p)) < 0 || (rc = emit(p, OP_NOT, 0, 0)) < 0)
                return rc;
        } else {
            if ((rc = parse_or(p)) < 0)
                return rc;
            skip_space(p);
            if (p->pos >= p->len)
                return fail(p, open, "unclosed '('", NULL, 0, NULL);
            if (p->s[p->pos] != ')')
                return unexpected(p, "')', '&&' or '||'", NULL);
            p->pos++;
        }
        p->depth--;
        return 0;
    }
    if (!is_alpha(c))
        return unexpected(p, "a field name, '!' or '('", NULL);
    size_t n = token_len(p);
    int f = xe_field_by_name(p->s + p->pos, n);
    if (f < 0)
        return fail(p, p->pos, "unknown field ", p->s + p->pos, n,
                    " (fields: type, category, size, address, old_address, site, key, value, tid, cpu, "
                    "data_len, size_class)");
    p->pos += n;
    uint8_t op = OP_EQ;
    uint64_t v = 0;
    if ((rc = parse_cmp_op(p, &op)) < 0 || (rc = parse_value(p, (unsigned)f, &v)) < 0)
        return rc;
    return emit(p, op, (uint8_t)f, v);
}

static int match2(parser *p, char a)
{
    skip_space(p);
    if (p->pos + 1 < p->len && p->s[p->pos] == a && p->s[p->pos + 1] == a) {
        p->pos += 2;
        return 1;
    }
    return 0;
}

static int parse_and(parser *p)
{
    int rc = parse_not(p);
    while (rc == 0 && match2(p, '&'))
        if ((rc = parse_not(p)) == 0)
            rc = emit(p, OP_AND, 0, 0);
    return rc;
}

static int parse_or(parser *p)
{
    int rc = parse_and(p);
    while (rc == 0 && match2(p, '|'))
        if ((rc = parse_and(p)) == 0)
            rc = emit(p, OP_OR, 0, 0);
    return rc;
}

int xe_pred_compile(const char *text, xe_pred *out, char *why, size_t whylen)
{
    size_t len = text ? strlen(text) : 0;
    out->n = 0;
    out->text[0] = '\0';
    if (len >= sizeof out->text) {
        mt_out o;
        xe_why_init(&o, why, whylen);
        mt_out_str(&o, "predicate too long (more than ");
        mt_out_u64(&o, sizeof out->text - 1);
        mt_out_str(&o, " characters)");
        xe_why_done(&o);
        return -EINVAL;
    }
    parser p = {.s = text, .len = len, .out = out, .why = why, .whylen = whylen};
    skip_space(&p);
    if (p.pos == len)
        return 0; /* no predicate: everything passes */
    int rc = parse_or(&p);
    if (rc == 0) {
        skip_space(&p);
        if (p.pos < len)
            rc = p.s[p.pos] == ')' ? fail(&p, p.pos, "unmatched ')'", NULL, 0, NULL)
                                   : unexpected(&p, "'&&', '||' or the end", NULL);
    }
    if (rc < 0) {
        out->n = 0;
        return rc;
    }
    memcpy(out->text, text, len + 1);
    return 0;
}

int xe_pred_eval(const xe_pred *p, const xe_event *ev)
{
    /* The stack of booleans is the bits of one word, top at bit 0: a
     * program of XE_PRED_MAX operations holds at most XE_PRED_MAX/2 + 1
     * comparisons at once. */
    uint64_t st = 0, b;
    for (unsigned i = 0, n = p->n; i < n; i++) {
        const xe_pred_op *op = &p->ops[i];
        switch (op->op) {
        case OP_EQ: st = st << 1 | (xe_field_get(ev, op->field) == op->value); break;
        case OP_NE: st = st << 1 | (xe_field_get(ev, op->field) != op->value); break;
        case OP_LT: st = st << 1 | (xe_field_get(ev, op->field) < op->value); break;
        case OP_LE: st = st << 1 | (xe_field_get(ev, op->field) <= op->value); break;
        case OP_GT: st = st << 1 | (xe_field_get(ev, op->field) > op->value); break;
        case OP_GE: st = st << 1 | (xe_field_get(ev, op->field) >= op->value); break;
        case OP_AND:
            b = st & 1;
            st >>= 1;
            st &= ~(uint64_t)1 | b;
            break;
        case OP_OR:
            b = st & 1;
            st >>= 1;
            st |= b;
            break;
        case OP_NOT: st ^= 1; break;
        default: return 1;
        }
    }
    return p->n == 0 ? 1 : (int)(st & 1);
}
