/* json.c — the CLI's JSON reader and writer (json.h): recursive descent
 * over RFC 8259, at most 64 levels deep. */
#include "cli/json.h"
#include "report/report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

struct parser {
    const char *s;
    size_t len, at;
    char *err;
    size_t errlen;
    int rc; /* first error: -EINVAL or -ENOMEM */
};

static void fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct parser *p, const char *fmt, ...)
{
    if (p->rc)
        return;
    p->rc = -EINVAL;
    if (!p->err || !p->errlen)
        return;
    int n = snprintf(p->err, p->errlen, "at byte %zu: ", p->at);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
}

static void *oom(struct parser *p)
{
    if (!p->rc) {
        p->rc = -ENOMEM;
        if (p->err && p->errlen)
            snprintf(p->err, p->errlen, "out of memory");
    }
    return NULL;
}

static void skip_ws(struct parser *p)
{
    while (p->at < p->len && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' || p->s[p->at] == '\r'))
        p->at++;
}

static int peek(struct parser *p) { return p->at < p->len ? (unsigned char)p->s[p->at] : -1; }

static struct json *node(struct parser *p, enum json_kind kind)
{
    struct json *j = calloc(1, sizeof *j);
    if (!j)
        return oom(p);
    j->kind = kind;
    return j;
}

/* Appends a member; the key (objects) is owned by the node from here. */
static int add(struct parser *p, struct json *c, struct json *item, char *key)
{
    if ((c->n & (c->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = c->n ? c->n * 2 : 4;
        struct json **items = realloc(c->items, cap * sizeof *items);
        if (items)
            c->items = items;
        char **keys = c->kind == JSON_OBJECT ? realloc(c->keys, cap * sizeof *keys) : NULL;
        if (keys)
            c->keys = keys;
        if (!items || (c->kind == JSON_OBJECT && !keys)) {
            oom(p);
            return -1;
        }
    }
    c->items[c->n] = item;
    if (c->kind == JSON_OBJECT)
        c->keys[c->n] = key;
    c->n++;
    return 0;
}

static int hex4(struct parser *p, unsigned *out)
{
    if (p->at + 4 > p->len) {
        fail(p, "\\u needs four hex digits");
        return -1;
    }
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->at++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            fail(p, "\\u needs four hex digits");
            return -1;
        }
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string, from its opening quote; *len gets its length. */
static char *string(struct parser *p, size_t *len)
{
    p->at++; /* " */
    size_t start = p->at;
    while (p->at < p->len && p->s[p->at] != '"')
        p->at += p->s[p->at] == '\\' ? 2 : 1;
    if (p->at >= p->len) {
        p->at = start;
        fail(p, "unterminated string");
        return NULL;
    }
    size_t end = p->at;
    char *o = malloc(end - start + 1); /* escapes only shrink */
    if (!o)
        return oom(p);
    size_t n = 0;
    for (p->at = start; p->at < end;) {
        unsigned char c = (unsigned char)p->s[p->at++];
        if (c < 0x20) {
            p->at--;
            fail(p, "control character in a string");
            break;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            continue;
        }
        char e = p->s[p->at++];
        unsigned cp, lo;
        switch (e) {
        case '"': case '\\': case '/': o[n++] = e; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u':
            if (hex4(p, &cp) < 0)
                break;
            if (cp >= 0xD800 && cp < 0xDC00 && p->at + 6 <= end && p->s[p->at] == '\\' && p->s[p->at + 1] == 'u') {
                size_t back = p->at;
                p->at += 2;
                if (hex4(p, &lo) < 0)
                    break;
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    p->at = back, cp = 0xFFFD;
            } else if (cp >= 0xD800 && cp < 0xE000) {
                cp = 0xFFFD; /* a lone surrogate */
            }
            n += put_utf8(o + n, cp);
            break;
        default:
            p->at--;
            fail(p, "bad escape '\\%c'", e);
        }
        if (p->rc)
            break;
    }
    if (p->rc) {
        free(o);
        return NULL;
    }
    p->at = end + 1;
    o[n] = '\0';
    *len = n;
    return o;
}

static int digits(struct parser *p)
{
    size_t s = p->at;
    while (p->at < p->len && p->s[p->at] >= '0' && p->s[p->at] <= '9')
        p->at++;
    return p->at > s;
}

static struct json *number(struct parser *p)
{
    size_t start = p->at;
    if (peek(p) == '-')
        p->at++;
    if (peek(p) == '0')
        p->at++;
    else if (!digits(p))
        goto bad;
    if (peek(p) == '.') {
        p->at++;
        if (!digits(p))
            goto bad;
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->at++;
        if (peek(p) == '+' || peek(p) == '-')
            p->at++;
        if (!digits(p))
            goto bad;
    }
    struct json *j = node(p, JSON_NUMBER);
    if (j && !(j->text = strndup(p->s + start, p->at - start))) {
        free(j);
        return oom(p);
    }
    if (j)
        j->len = p->at - start;
    return j;
bad:
    fail(p, "bad number");
    return NULL;
}

static int word(struct parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->at >= n && memcmp(p->s + p->at, w, n) == 0) {
        p->at += n;
        return 1;
    }
    return 0;
}

static struct json *value(struct parser *p, int depth);

/* An array or an object, from its opening bracket. */
static struct json *container(struct parser *p, int depth, int object)
{
    char close = object ? '}' : ']';
    struct json *c = node(p, object ? JSON_OBJECT : JSON_ARRAY);
    if (!c)
        return NULL;
    p->at++;
    skip_ws(p);
    if (peek(p) == close) {
        p->at++;
        return c;
    }
    for (;;) {
        char *key = NULL;
        if (object) {
            skip_ws(p);
            size_t klen;
            if (peek(p) != '"') {
                fail(p, "expected a member name in quotes");
                break;
            }
            if (!(key = string(p, &klen)))
                break;
            skip_ws(p);
            if (peek(p) != ':') {
                free(key);
                fail(p, "expected ':' after a member name");
                break;
            }
            p->at++;
        }
        struct json *v = value(p, depth + 1);
        if (!v || add(p, c, v, key) < 0) {
            json_free(v);
            free(key);
            break;
        }
        skip_ws(p);
        if (peek(p) == ',') {
            p->at++;
            continue;
        }
        if (peek(p) == close) {
            p->at++;
            return c;
        }
        fail(p, "expected ',' or '%c'", close);
        break;
    }
    json_free(c);
    return NULL;
}

static struct json *value(struct parser *p, int depth)
{
    if (depth > MAX_DEPTH) {
        fail(p, "nested deeper than %d levels", MAX_DEPTH);
        return NULL;
    }
    skip_ws(p);
    int c = peek(p);
    struct json *j;
    switch (c) {
    case '{': return container(p, depth, 1);
    case '[': return container(p, depth, 0);
    case '"': {
        size_t len;
        char *s = string(p, &len);
        if (!s)
            return NULL;
        if (!(j = node(p, JSON_STRING))) {
            free(s);
            return NULL;
        }
        j->text = s;
        j->len = len;
        return j;
    }
    case 't': case 'f': case 'n':
        if (word(p, "true") || word(p, "false")) {
            if ((j = node(p, JSON_BOOL)))
                j->boolean = c == 't';
            return j;
        }
        if (word(p, "null"))
            return node(p, JSON_NULL);
        break;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return number(p);
    }
    fail(p, c < 0 ? "unexpected end" : "unexpected '%c'", c);
    return NULL;
}

int json_parse(const char *text, size_t len, struct json **out, char *err, size_t errlen)
{
    struct parser p = {text, len, 0, err, errlen, 0};
    *out = NULL;
    struct json *j = value(&p, 0);
    if (j) {
        skip_ws(&p);
        if (p.at != p.len)
            fail(&p, "more after the value");
    }
    if (p.rc) {
        json_free(j);
        return p.rc;
    }
    *out = j;
    return 0;
}

void json_free(struct json *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        json_free(j->items[i]);
        if (j->keys)
            free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->text);
    free(j);
}

const struct json *json_get(const struct json *obj, const char *key)
{
    if (!obj || obj->kind != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

int json_u64(const struct json *j, uint64_t *out)
{
    if (!j || j->kind != JSON_NUMBER || j->text[0] == '-')
        return -1;
    uint64_t v = 0;
    for (const char *s = j->text; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* Does j hold a container (even an empty one: objects of one kind, say
 * sessions with and without targets, are then laid out alike)? */
static bool has_containers(const struct json *j)
{
    for (size_t i = 0; i < j->n; i++)
        if (j->items[i]->kind == JSON_ARRAY || j->items[i]->kind == JSON_OBJECT)
            return true;
    return false;
}

static void write_scalar(FILE *out, const struct json *j)
{
    switch (j->kind) {
    case JSON_NULL: fputs("null", out); break;
    case JSON_BOOL: fputs(j->boolean ? "true" : "false", out); break;
    case JSON_NUMBER: fputs(j->text, out); break;
    case JSON_STRING: report_json_string(out, j->text); break;
    default: break;
    }
}

void json_write(FILE *out, const struct json *j, int indent)
{
    if (j->kind != JSON_ARRAY && j->kind != JSON_OBJECT) {
        write_scalar(out, j);
        return;
    }
    bool object = j->kind == JSON_OBJECT, lines = has_containers(j);
    fputc(object ? '{' : '[', out);
    bool first = true;
    for (size_t i = 0; i < j->n; i++) {
        fputs(first ? "" : ",", out);
        if (lines)
            fprintf(out, "\n%*s", indent + 2, "");
        else if (!first)
            fputc(' ', out);
        first = false;
        if (object) {
            report_json_string(out, j->keys[i]);
            fputs(": ", out);
        }
        json_write(out, j->items[i], indent + 2);
    }
    if (lines && !first)
        fprintf(out, "\n%*s", indent, "");
    fputc(object ? '}' : ']', out);
}

void json_write_plain(FILE *out, const struct json *j)
{
    if (j->kind == JSON_STRING)
        fputs(j->text, out);
    else if (j->kind == JSON_NULL)
        fputs("NULL", out);
    else if (j->kind == JSON_ARRAY || j->kind == JSON_OBJECT)
        json_write(out, j, 0);
    else
        write_scalar(out, j);
}
