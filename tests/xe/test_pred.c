/* test_pred.c — session predicates (xe_pred.c): errors name the problem and
 * its column; && binds tighter than ||; every operator, field and unit;
 * category names through a host; and compiled programs agree with a
 * direct evaluation of randomly generated expression trees. */
#include "unit.h"
#include "xe/xe.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- a host with three categories ---- */
static const char *const cat_names[16] = {[3] = "parser", [7] = "io", [12] = "net cache"};

static int test_category_id(const char *name, size_t len)
{
    for (int i = 0; i < 16; i++)
        if (cat_names[i] && strlen(cat_names[i]) == len && memcmp(cat_names[i], name, len) == 0)
            return i;
    return -1;
}
static const char *test_category_name(unsigned id)
{
    return id < 16 ? cat_names[id] : NULL;
}
static const xe_host host = {test_category_id, test_category_name};

static int compile_ok(const char *text, xe_pred *p)
{
    char why[256] = "";
    int rc = xe_pred_compile(text, p, why, sizeof why);
    if (rc != 0)
        printf("  compile '%s': %d %s\n", text, rc, why);
    return rc == 0;
}

static int eval_text(const char *text, const xe_event *ev)
{
    xe_pred p;
    if (!compile_ok(text, &p))
        return -1;
    return xe_pred_eval(&p, ev);
}

/* The error for text contains want. */
static void expect_error(const char *text, const char *want)
{
    xe_pred p;
    char why[256] = "";
    int rc = xe_pred_compile(text, &p, why, sizeof why);
    char name[400];
    snprintf(name, sizeof name, "error for '%.200s' contains \"%s\"", text, want);
    CHECK(name, rc == -22 && strstr(why, want) != NULL && p.n == 0);
    if (rc != -22 || !strstr(why, want))
        printf("  got rc=%d why='%s'\n", rc, why);
}

static void test_errors(void)
{
    expect_error("sz > 1", "predicate: unknown field 'sz' at column 1 (fields: type, category,");
    expect_error("size >> 1", "unexpected '>' at column 7 (expected a value)");
    expect_error("size = 1", "'=' is not a comparison (use '==') at column 6");
    expect_error("size 1", "unexpected '1' at column 6 (expected a comparison: == != < <= > >=)");
    /* At the end: what was expected, then where; every one an end of input reaches. */
    expect_error("size", "predicate: expected a comparison (== != < <= > >=) at column 5");
    expect_error("size  ", "predicate: expected a comparison (== != < <= > >=) at column 7");
    expect_error("size >", "predicate: expected a value at column 7");
    expect_error("(size > 1", "predicate: unclosed '(' at column 1");
    expect_error("size > 4 XB", "unexpected 'XB' at column 10");
    expect_error("size > 4XB", "unknown unit 'XB' at column 9 (units: B, KB, MB, GB)");
    expect_error("(size > 1", "unclosed '(' at column 1");
    expect_error("size > 1)", "unmatched ')' at column 9");
    expect_error("category == \"nope\"", "unknown category 'nope' at column 13");
    expect_error("category == parser", "category names go in quotes: 'parser' at column 13");
    expect_error("type == foo", "unknown event type 'foo' at column 9");
    expect_error("size == \"x\"", "a name compares only with category or type, not 'size' at column 9");
    expect_error("site == alloc", "expected a number, not 'alloc' at column 9");
    expect_error("size > ", "expected a value at column 8");
    expect_error("size > 1 &&", "expected a comparison, '!' or '(' at column 12");
    expect_error("size > 1 && && size < 2",
                 "unexpected '&' at column 13 (expected a field name, '!' or '(')");
    expect_error("size > 99999999999999999999", "number too big at column 8");
    expect_error("size > 17179869184GB", "number too big at column 8");
    expect_error("size > 0x", "hex number without digits at column 8");
    expect_error("size > 1 size > 2", "unexpected 'size' at column 10 (expected '&&', '||' or the end)");
    expect_error("category == \"parser", "unterminated string at column 13");
    expect_error("size > 1 | size < 2", "unexpected '|' at column 10 (expected '&&', '||' or the end)");
    expect_error("!= 3", "unexpected '!' at column 1 (expected a field name, '!' or '(')");

    char deep[200] = "";
    for (int i = 0; i < 40; i++)
        strcat(deep, "(");
    strcat(deep, "size > 1");
    expect_error(deep, "nested too deeply at column 33");

    /* 33 comparisons and 32 ORs: 65 operations. */
    char many[600] = "";
    for (int i = 0; i < 33; i++)
        strcat(many, i ? "||key>1" : "key>1");
    expect_error(many, "predicate too long (more than 64 operations)");
    /* 32 comparisons and 31 ORs: 63 operations fit. */
    char fits[600] = "";
    for (int i = 0; i < 32; i++)
        strcat(fits, i ? "||key>1" : "key>1");
    xe_pred p;
    CHECK("63 operations compile", compile_ok(fits, &p) && p.n == 63);

    char longtext[300];
    memset(longtext, ' ', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    memcpy(longtext, "size > 1", 8);
    expect_error(longtext, "predicate too long (more than 255 characters)");

    /* Without a host, names cannot be resolved. */
    xe_set_host(NULL);
    expect_error("category == \"parser\"", "unknown category 'parser' at column 13");
    xe_set_host(&host);

    /* A short why buffer is cut, not overrun. */
    char small[8];
    memset(small, 'x', sizeof small);
    int rc = xe_pred_compile("sz > 1", &p, small, sizeof small);
    CHECK("short why buffer truncated and terminated", rc == -22 && strlen(small) == 7);
    CHECK("why may be NULL", xe_pred_compile("sz > 1", &p, NULL, 0) == -22);
}

static void test_basics(void)
{
    xe_pred p;
    xe_event ev = {.type = XE_EV_ALLOC, .category = 3, .size = 4096, .address = 0x1000};
    CHECK("empty text: no program", compile_ok("", &p) && p.n == 0 && xe_pred_eval(&p, &ev) == 1);
    CHECK("blank text: no program", compile_ok(" \t\n ", &p) && p.n == 0 && xe_pred_eval(&p, &ev) == 1);
    CHECK("NULL text: no program", compile_ok(NULL, &p) && p.n == 0);
    CHECK("text kept for the view", compile_ok("size >= 4KB && category == \"parser\"", &p) &&
                                        strcmp(p.text, "size >= 4KB && category == \"parser\"") == 0);

    /* Precedence: a || b && c is a || (b && c). With a true and b, c false
     * it holds; (a || b) && c would not. */
    CHECK("&& binds tighter than ||", eval_text("size == 4096 || size == 1 && size == 2", &ev) == 1);
    CHECK("parentheses regroup", eval_text("(size == 4096 || size == 1) && size == 2", &ev) == 0);
    CHECK("&& before || on the left too", eval_text("size == 1 && size == 2 || size == 4096", &ev) == 1);
    CHECK("! negates", eval_text("!(size == 4096)", &ev) == 0 && eval_text("!size == 1", &ev) == 1);
    CHECK("!! cancels", eval_text("!!(size == 4096)", &ev) == 1);
    CHECK("! binds tighter than &&", eval_text("!size == 1 && size == 4096", &ev) == 1);

    /* Every operator at, below and above the value. */
    struct {
        const char *op;
        int lt, eq, gt;
    } ops[] = {
        {"==", 0, 1, 0}, {"!=", 1, 0, 1}, {"<", 1, 0, 0}, {"<=", 1, 1, 0}, {">", 0, 0, 1}, {">=", 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "size %s 100", ops[i].op);
        xe_event a = {.size = 99}, b = {.size = 100}, c = {.size = 101};
        char name[80];
        snprintf(name, sizeof name, "operator %s", ops[i].op);
        CHECK(name, eval_text(text, &a) == ops[i].lt && eval_text(text, &b) == ops[i].eq &&
                        eval_text(text, &c) == ops[i].gt);
    }

    /* Units are 1024-based, any case, with or without a space. */
    struct {
        const char *text;
        uint64_t v;
    } units[] = {
        {"size == 4KB", 4096},
        {"size == 4kb", 4096},
        {"size == 4 K", 4096},
        {"size == 3MB", 3ull << 20},
        {"size == 3m", 3ull << 20},
        {"size == 2GB", 2ull << 30},
        {"size == 2 g", 2ull << 30},
        {"size == 17B", 17},
        {"size == 0x1000", 4096},
        {"size == 0XfF", 255},
        {"size == 18446744073709551615", UINT64_MAX},
        {"size == 16777215GB", 16777215ull << 30},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        CHECK(units[i].text, compile_ok(units[i].text, &p) && p.n == 1 && p.ops[0].value == units[i].v);
        xe_event e = {.size = units[i].v};
        CHECK(units[i].text, xe_pred_eval(&p, &e) == 1);
    }

    /* Every field, each against an event that differs only there. */
    const char *fields[] = {"type", "category", "size", "address", "old_address", "site",
                            "key",  "value",    "tid",  "cpu",     "data_len",    "size_class"};
    for (int f = 0; f < XE_F_NFIELDS; f++) {
        CHECK("field name round trip", xe_field_by_name(fields[f], strlen(fields[f])) == f &&
                                           strcmp(xe_field_name((enum xe_field)f), fields[f]) == 0);
        xe_event e = {.type = 1,
                      .category = 2,
                      .size = 3,
                      .address = 4,
                      .old_address = 5,
                      .site = 6,
                      .key = 7,
                      .value = 8,
                      .tid = 9,
                      .cpu = 10,
                      .data_len = 11};
        uint64_t want = (uint64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 2}[f];
        char text[64];
        snprintf(text, sizeof text, "%s == %" PRIu64, fields[f], want);
        xe_event other = e;
        other.type = 0, other.category = 0, other.size = 0, other.address = 0, other.old_address = 0;
        other.site = 0, other.key = 0, other.value = 0, other.tid = 0, other.cpu = 0, other.data_len = 0;
        char name[80];
        snprintf(name, sizeof name, "field %s", fields[f]);
        CHECK(name, eval_text(text, &e) == 1 && eval_text(text, &other) == 0 &&
                        xe_event_field(&e, (enum xe_field)f) == want);
    }
    CHECK("unknown field name", xe_field_by_name("sizes", 5) == -1 && xe_field_by_name("siz", 3) == -1);
    CHECK("field names are case insensitive", xe_field_by_name("SIZE", 4) == XE_F_SIZE);

    /* size_class: floor(log2(size)) + 1, 0 for 0. */
    uint64_t sizes[] = {0, 1, 2, 3, 4, 4095, 4096, 4097, UINT64_MAX};
    unsigned classes[] = {0, 1, 2, 2, 3, 12, 13, 13, 64};
    int ok = 1;
    for (int i = 0; i < 9; i++) {
        xe_event e = {.size = sizes[i]};
        ok &= xe_event_field(&e, XE_F_SIZE_CLASS) == classes[i];
    }
    CHECK("size_class is floor(log2(size)) + 1", ok);

    /* Types by name, quoted or not, and by number. */
    const char *types[] = {"user",   "alloc",      "free",     "realloc",  "mmap",
                           "munmap", "span_begin", "span_end", "snapshot", "page_ref"};
    ok = 1;
    for (int t = 0; t < XE_EV_NTYPES; t++) {
        char text[64], qtext[64], ntext[64];
        snprintf(text, sizeof text, "type == %s", types[t]);
        snprintf(qtext, sizeof qtext, "type == \"%s\"", types[t]);
        snprintf(ntext, sizeof ntext, "type == %d", t);
        xe_event e = {.type = (uint16_t)t}, o2 = {.type = (uint16_t)((t + 1) % XE_EV_NTYPES)};
        ok &= eval_text(text, &e) == 1 && eval_text(text, &o2) == 0 && eval_text(qtext, &e) == 1 &&
              eval_text(ntext, &e) == 1 && xe_type_by_name(types[t], strlen(types[t])) == t &&
              strcmp(xe_type_name((unsigned)t), types[t]) == 0;
    }
    CHECK("every type by name and number", ok);
    CHECK("unknown type names",
          xe_type_by_name("allocs", 6) == -1 && strcmp(xe_type_name(99), "unknown") == 0);

    /* Categories through the host, or by number. */
    xe_event parser_ev = {.category = 3}, io_ev = {.category = 7}, cache_ev = {.category = 12};
    CHECK("category by name", eval_text("category == \"parser\"", &parser_ev) == 1 &&
                                  eval_text("category == \"parser\"", &io_ev) == 0);
    CHECK("category by name in single quotes",
          eval_text("category != 'io'", &parser_ev) == 1 && eval_text("category != 'io'", &io_ev) == 0);
    CHECK("category name with a space", eval_text("category == \"net cache\"", &cache_ev) == 1);
    CHECK("category by number", eval_text("category == 7", &io_ev) == 1);
    CHECK("xe_category_name via the host",
          strcmp(xe_category_name(7), "io") == 0 && xe_category_name(5) == NULL);
    CHECK("the example of xe.h",
          eval_text("size >= 4096 && (category == \"parser\" || type == free)",
                    &(xe_event){.size = 4096, .category = 3, .type = XE_EV_ALLOC}) == 1 &&
              eval_text("size >= 4096 && (category == \"parser\" || type == free)",
                        &(xe_event){.size = 4096, .category = 7, .type = XE_EV_ALLOC}) == 0 &&
              eval_text("size >= 4096 && (category == \"parser\" || type == free)",
                        &(xe_event){.size = 4096, .category = 7, .type = XE_EV_FREE}) == 1);
}

/* ---- random expression trees against a direct evaluation ---- */

typedef struct node {
    int kind; /* 0 cmp, 1 and, 2 or, 3 not */
    int field, op;
    uint64_t value;
    struct node *a, *b;
} node;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Values drawn from a small pool so comparisons are often equal. */
static uint64_t pool(int field)
{
    if (field == XE_F_TYPE)
        return rnd() % XE_EV_NTYPES;
    if (field == XE_F_CATEGORY)
        return (uint64_t[]){3, 7, 12, 0}[rnd() % 4];
    if (field == XE_F_SIZE_CLASS)
        return rnd() % 14;
    return (uint64_t[]){0, 1, 100, 4096, 65536, 1ull << 20, 3ull << 30, UINT64_MAX}[rnd() % 8];
}

static node *gen(int depth, int *count)
{
    node *n = calloc(1, sizeof *n);
    int k = depth >= 4 ? 0 : (int)(rnd() % 4);
    n->kind = k;
    (*count)++;
    if (k == 0) {
        n->field = (int)(rnd() % XE_F_NFIELDS);
        n->op = (int)(rnd() % 6);
        n->value = pool(n->field);
    } else {
        n->a = gen(depth + 1, count);
        if (k != 3)
            n->b = gen(depth + 1, count);
    }
    return n;
}

static void free_tree(node *n)
{
    if (!n)
        return;
    free_tree(n->a);
    free_tree(n->b);
    free(n);
}

static const char *const opsym[] = {"==", "!=", "<", "<=", ">", ">="};

/* Renders a value the ways a user could write it. */
static void render_value(const node *n, char *buf, size_t cap)
{
    uint64_t v = n->value;
    if (n->field == XE_F_TYPE && rnd() % 2) {
        snprintf(buf, cap, rnd() % 2 ? "%s" : "\"%s\"", xe_type_name((unsigned)v));
    } else if (n->field == XE_F_CATEGORY && v && rnd() % 2) {
        snprintf(buf, cap, "\"%s\"", cat_names[v]);
    } else if (v && v % (1ull << 30) == 0 && rnd() % 2) {
        snprintf(buf, cap, "%" PRIu64 "GB", v >> 30);
    } else if (v && v % (1ull << 20) == 0 && rnd() % 2) {
        snprintf(buf, cap, "%" PRIu64 " mb", v >> 20);
    } else if (v && v % 1024 == 0 && rnd() % 2) {
        snprintf(buf, cap, "%" PRIu64 "K", v >> 10);
    } else if (rnd() % 3 == 0) {
        snprintf(buf, cap, "0x%" PRIx64, v);
    } else {
        snprintf(buf, cap, "%" PRIu64, v);
    }
}

/* Fully parenthesized, or relying on precedence where it is the same. */
static void render(const node *n, char *buf, size_t cap, int parent)
{
    char a[4096], b[4096], v[64];
    switch (n->kind) {
    case 0:
        render_value(n, v, sizeof v);
        snprintf(buf, cap, "%s %s %s", xe_field_name((enum xe_field)n->field), opsym[n->op], v);
        break;
    case 1:
    case 2:
        render(n->a, a, sizeof a, n->kind);
        render(n->b, b, sizeof b, 4); /* right operands always grouped: left-associative */
        /* Parentheses are needed around an || inside an &&; elsewhere
         * add them at random. */
        if ((parent == 1 && n->kind == 2) || parent == 4 || parent == 3 || rnd() % 3 == 0)
            snprintf(buf, cap, "(%s %s %s)", a, n->kind == 1 ? "&&" : "||", b);
        else
            snprintf(buf, cap, "%s %s %s", a, n->kind == 1 ? "&&" : "||", b);
        break;
    default:
        render(n->a, a, sizeof a, 3);
        snprintf(buf, cap, "!%s", a);
        break;
    }
}

static int direct(const node *n, const xe_event *ev)
{
    switch (n->kind) {
    case 0: {
        uint64_t x = xe_event_field(ev, (enum xe_field)n->field), v = n->value;
        switch (n->op) {
        case 0: return x == v;
        case 1: return x != v;
        case 2: return x < v;
        case 3: return x <= v;
        case 4: return x > v;
        default: return x >= v;
        }
    }
    case 1: return direct(n->a, ev) && direct(n->b, ev);
    case 2: return direct(n->a, ev) || direct(n->b, ev);
    default: return !direct(n->a, ev);
    }
}

static void random_event(xe_event *e)
{
    e->type = (uint16_t)pool(XE_F_TYPE);
    e->category = (uint16_t)pool(XE_F_CATEGORY);
    e->size = rnd() % 4 ? pool(XE_F_SIZE) : rnd() >> (rnd() % 64);
    e->address = pool(XE_F_ADDRESS);
    e->old_address = pool(XE_F_OLD_ADDRESS);
    e->site = pool(XE_F_SITE);
    e->key = pool(XE_F_KEY);
    e->value = pool(XE_F_VALUE);
    e->tid = (uint32_t)pool(XE_F_TID);
    e->cpu = (uint32_t)(rnd() % 3 ? pool(XE_F_CPU) : rnd());
    e->data_len = (uint32_t)pool(XE_F_DATA_LEN);
}

static void test_random(void)
{
    int trees = 0, too_long = 0, mismatches = 0, compile_failures = 0, long_ok = 1;
    long evals = 0;
    for (int t = 0; t < 3000; t++) {
        int count = 0;
        node *n = gen(0, &count);
        char text[8192];
        render(n, text, sizeof text, 0);
        xe_pred p;
        char why[256];
        int rc = xe_pred_compile(text, &p, why, sizeof why);
        if (rc != 0) {
            /* Only length may reject a generated expression. */
            if (strlen(text) > 255 || count > XE_PRED_MAX)
                too_long++;
            else {
                compile_failures++;
                printf("  '%s': %s\n", text, why);
            }
            long_ok &= strstr(why, "too long") != NULL;
            free_tree(n);
            continue;
        }
        trees++;
        if (p.n != count)
            mismatches++;
        for (int e = 0; e < 200; e++) {
            xe_event ev;
            random_event(&ev);
            evals++;
            if (xe_pred_eval(&p, &ev) != direct(n, &ev)) {
                if (mismatches++ < 5)
                    printf("  mismatch: '%s'\n", text);
            }
        }
        free_tree(n);
    }
    printf("  %d trees, %ld evaluations, %d too long\n", trees, evals, too_long);
    CHECK("random trees compile unless too long", compile_failures == 0 && long_ok);
    CHECK("enough random trees tried", trees > 1500);
    CHECK("compiled programs agree with direct evaluation", mismatches == 0);
}

int main(void)
{
    xe_set_host(&host);
    test_errors();
    test_basics();
    test_random();
    return failures != 0;
}
