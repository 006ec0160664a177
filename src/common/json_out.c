/* json_out.c — the streaming JSON writer (see json_out.h). */
#include "common/json_out.h"
#include "common/utf8.h"

#include <errno.h>

static void put(mt_json *j, const char *s, size_t n)
{
    if (j->o) {
        mt_out_mem(j->o, s, n);
        if (j->o->err && !j->err)
            j->err = -EIO;
    } else if (n && fwrite(s, 1, n, j->f) != n && !j->err) {
        j->err = -EIO;
    }
}

static void puts_(mt_json *j, const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    put(j, s, n);
}

static void init(mt_json *j, FILE *f, mt_out *o, bool pretty)
{
    *j = (mt_json){.f = f, .o = o, .pretty = pretty};
}

void mt_json_init_file(mt_json *j, FILE *f, bool pretty)
{
    init(j, f, NULL, pretty);
}
void mt_json_init_out(mt_json *j, mt_out *o, bool pretty)
{
    init(j, NULL, o, pretty);
}

static bool on_one_line(const mt_json *j)
{
    return !j->pretty || (j->depth > 0 && (j->oneline >> (j->depth - 1) & 1));
}

static void newline_indent(mt_json *j, unsigned depth)
{
    put(j, "\n", 1);
    for (unsigned i = 0; i < depth; i++)
        put(j, "  ", 2);
}

static void misuse(mt_json *j)
{
    if (!j->err)
        j->err = -EINVAL;
}

static bool in_array(const mt_json *j)
{
    return j->depth > 0 && (j->array >> (j->depth - 1) & 1);
}

/* What comes before an element (a key, or a value in an array): the comma
 * after the previous one and, in a pretty container, the line break. */
static void separate(mt_json *j)
{
    uint32_t bit = 1u << (j->depth - 1);
    bool later = j->nonempty & bit;
    j->nonempty |= bit;
    if (!on_one_line(j)) {
        if (later)
            put(j, ",", 1);
        newline_indent(j, j->depth);
    } else if (later) {
        /* a pretty document's one-line container keeps a space */
        put(j, ", ", j->pretty ? 2 : 1);
    }
}

/* Before a value: nothing after a key; in an object a value needs one. */
static void before_value(mt_json *j)
{
    if (j->after_key)
        j->after_key = false;
    else if (in_array(j))
        separate(j);
    else if (j->depth > 0)
        misuse(j);
    else if (j->top_done)
        misuse(j); /* a second top-level value: not one JSON text */
    else
        j->top_done = true;
}

static void begin(mt_json *j, char open)
{
    before_value(j);
    if (j->depth == MT_JSON_MAX_DEPTH) {
        misuse(j);
        return;
    }
    bool line = on_one_line(j) || j->next_oneline;
    j->next_oneline = false;
    uint32_t bit = 1u << j->depth;
    j->nonempty &= ~bit;
    j->oneline = line ? j->oneline | bit : j->oneline & ~bit;
    j->array = open == '[' ? j->array | bit : j->array & ~bit;
    j->depth++;
    put(j, &open, 1);
}

static void end(mt_json *j, char close)
{
    if (j->depth == 0 || j->after_key || in_array(j) != (close == ']')) {
        misuse(j);
        return;
    }
    bool had = j->nonempty >> (j->depth - 1) & 1;
    bool line = on_one_line(j);
    j->depth--;
    if (had && !line)
        newline_indent(j, j->depth);
    put(j, &close, 1);
}

void mt_json_object_begin(mt_json *j)
{
    begin(j, '{');
}
void mt_json_object_end(mt_json *j)
{
    end(j, '}');
}
void mt_json_array_begin(mt_json *j)
{
    begin(j, '[');
}
void mt_json_array_end(mt_json *j)
{
    end(j, ']');
}
void mt_json_oneline(mt_json *j)
{
    j->next_oneline = true;
}

static bool plain(unsigned char c)
{
    return c >= 0x20 && c != 0x7f && c != '"' && c != '\\';
}

static void escaped(mt_json *j, const unsigned char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    put(j, "\"", 1);
    while (n > 0) {
        size_t k = mt_utf8_len(s, n);
        if (k == 0) {
            puts_(j, "\\ufffd");
            s++, n--;
        } else if (!plain(*s)) {
            char e[6] = {'\\', 0, 0, 0, 0, 0};
            size_t len = 2;
            switch (*s) {
            case '"': e[1] = '"'; break;
            case '\\': e[1] = '\\'; break;
            case '\n': e[1] = 'n'; break;
            case '\t': e[1] = 't'; break;
            case '\r': e[1] = 'r'; break;
            case '\b': e[1] = 'b'; break;
            case '\f': e[1] = 'f'; break;
            default: e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[*s >> 4], e[5] = hex[*s & 15]; len = 6;
            }
            put(j, e, len);
            s++, n--;
        } else {
            /* a run of characters that need no escape, written at once */
            const unsigned char *run = s;
            while (n > 0 && plain(*s) && (k = mt_utf8_len(s, n)) > 0)
                s += k, n -= k;
            put(j, (const char *)run, (size_t)(s - run));
        }
    }
    put(j, "\"", 1);
}

void mt_json_key(mt_json *j, const char *key)
{
    if (j->depth == 0 || j->after_key || in_array(j)) {
        misuse(j);
        return;
    }
    separate(j);
    size_t n = 0;
    while (key[n])
        n++;
    escaped(j, (const unsigned char *)key, n);
    put(j, ": ", j->pretty ? 2 : 1);
    j->after_key = true;
}

void mt_json_strn(mt_json *j, const char *s, size_t n)
{
    before_value(j);
    escaped(j, (const unsigned char *)s, n);
}

void mt_json_str(mt_json *j, const char *s)
{
    if (!s) {
        mt_json_null(j);
        return;
    }
    size_t n = 0;
    while (s[n])
        n++;
    mt_json_strn(j, s, n);
}

/* The decimal digits of v, written backwards into the end of buf. */
static size_t digits(char *end, uint64_t v)
{
    size_t n = 0;
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
        n++;
    } while (v);
    return n;
}

void mt_json_u64(mt_json *j, uint64_t v)
{
    char buf[20];
    before_value(j);
    size_t n = digits(buf + sizeof buf, v);
    put(j, buf + sizeof buf - n, n);
}

void mt_json_i64(mt_json *j, int64_t v)
{
    char buf[21];
    before_value(j);
    size_t n = digits(buf + sizeof buf, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    if (v < 0)
        buf[sizeof buf - ++n] = '-';
    put(j, buf + sizeof buf - n, n);
}

void mt_json_number(mt_json *j, const char *literal)
{
    before_value(j);
    puts_(j, literal);
}

void mt_json_bool(mt_json *j, bool v)
{
    before_value(j);
    puts_(j, v ? "true" : "false");
}

void mt_json_null(mt_json *j)
{
    before_value(j);
    puts_(j, "null");
}

void mt_json_hex(mt_json *j, uint64_t v)
{
    char buf[19];
    size_t i = sizeof buf;
    do {
        buf[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    buf[--i] = 'x';
    buf[--i] = '0';
    mt_json_strn(j, buf + i, sizeof buf - i);
}

void mt_json_kstr(mt_json *j, const char *key, const char *s)
{
    mt_json_key(j, key);
    mt_json_str(j, s);
}
void mt_json_ku64(mt_json *j, const char *key, uint64_t v)
{
    mt_json_key(j, key);
    mt_json_u64(j, v);
}
void mt_json_ki64(mt_json *j, const char *key, int64_t v)
{
    mt_json_key(j, key);
    mt_json_i64(j, v);
}
void mt_json_kbool(mt_json *j, const char *key, bool v)
{
    mt_json_key(j, key);
    mt_json_bool(j, v);
}
void mt_json_knull(mt_json *j, const char *key)
{
    mt_json_key(j, key);
    mt_json_null(j);
}

void mt_json_ku64_or_null(mt_json *j, const char *key, bool have, uint64_t v)
{
    mt_json_key(j, key);
    if (have)
        mt_json_u64(j, v);
    else
        mt_json_null(j);
}

void mt_json_ki64_or_null(mt_json *j, const char *key, bool have, int64_t v)
{
    mt_json_key(j, key);
    if (have)
        mt_json_i64(j, v);
    else
        mt_json_null(j);
}

void mt_json_document_begin(mt_json *j)
{
    mt_json_object_begin(j);
    mt_json_kstr(j, "schema", MT_JSON_SCHEMA);
}

int mt_json_document_end(mt_json *j)
{
    mt_json_object_end(j);
    return mt_json_finish(j);
}

int mt_json_finish(mt_json *j)
{
    if (j->depth != 0)
        misuse(j);
    put(j, "\n", 1);
    if (j->f && ferror(j->f) && !j->err)
        j->err = -EIO;
    return j->err;
}
