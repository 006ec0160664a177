/* xe_targets.c — the built-in targets' table (xe_target_find) and what the
 * targets share (xe_util.h): "k=v,k=v" parameters, reasons, JSON strings
 * and events, and the packed words of an event. */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <errno.h>
#include <string.h>

static const xe_target_ops *const targets[] = {
    &xe_target_ring_buffer,   &xe_target_histogram,  &xe_target_event_counter,
    &xe_target_pair_matching, &xe_target_event_file,
};

const xe_target_ops *xe_target_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (xe_name_eq(targets[i]->name, name, len))
            return targets[i];
    return NULL;
}

/* ---- reasons ---- */

static char why_sink[1];

void xe_why_init(mt_out *o, char *why, size_t whylen)
{
    if (!why || whylen == 0)
        mt_out_init(o, why_sink, sizeof why_sink, -1);
    else
        mt_out_init(o, why, whylen, -1);
}

void xe_why_done(mt_out *o)
{
    if (o->buf != why_sink)
        mt_out_cstr(o);
}

void xe_target_unmap_state(xe_target *t)
{
    xe_unmap(t->state, t->state_bytes);
    t->state = NULL;
    t->state_bytes = 0;
}

/* ---- parameters ---- */

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void xe_trim(const char **s, size_t *n)
{
    while (*n && is_space(**s))
        (*s)++, (*n)--;
    while (*n && is_space((*s)[*n - 1]))
        (*n)--;
}

static int param_error(const char *target, const char *what, const char *name, size_t nlen, const char *tail,
                       char *why, size_t whylen)
{
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, target);
    mt_out_str(&o, ": ");
    mt_out_str(&o, what);
    if (name) {
        mt_out_str(&o, " '");
        mt_out_shown(&o, name, nlen);
        mt_out_char(&o, '\'');
    }
    if (tail)
        mt_out_str(&o, tail);
    xe_why_done(&o);
    return -EINVAL;
}

int xe_params_parse(const char *target, const char *text, xe_param *p, int n, char *why, size_t whylen)
{
    for (int i = 0; i < n; i++) {
        p[i].val = NULL;
        p[i].len = 0;
        p[i].set = 0;
    }
    const char *s = text ? text : "";
    while (*s) {
        /* One item: up to the next ',' outside quotes. */
        const char *item = s;
        char quote = 0;
        while (*s && (quote || *s != ',')) {
            if (quote && *s == quote)
                quote = 0;
            else if (!quote && (*s == '\'' || *s == '"'))
                quote = *s;
            s++;
        }
        if (quote)
            return param_error(target, "unterminated quote in parameters", NULL, 0, NULL, why, whylen);
        size_t ilen = (size_t)(s - item);
        if (*s == ',')
            s++;
        xe_trim(&item, &ilen);
        if (ilen == 0)
            continue; /* "a=1,,b=2" or a trailing comma */
        const char *eq = memchr(item, '=', ilen);
        if (!eq)
            return param_error(target, "parameter", item, ilen, " has no '=value'", why, whylen);
        const char *name = item, *val = eq + 1;
        size_t nlen = (size_t)(eq - item), vlen = ilen - nlen - 1;
        xe_trim(&name, &nlen);
        xe_trim(&val, &vlen);
        if (vlen >= 2 && (val[0] == '\'' || val[0] == '"') && val[vlen - 1] == val[0])
            val++, vlen -= 2;
        int k = -1;
        for (int i = 0; i < n; i++)
            if (xe_name_eq(p[i].name, name, nlen))
                k = i;
        if (k < 0) {
            char list[160];
            mt_out o;
            mt_out_init(&o, list, sizeof list, -1);
            mt_out_str(&o, n ? " (accepted: " : " (it takes none)");
            for (int i = 0; i < n; i++) {
                mt_out_str(&o, p[i].name);
                mt_out_str(&o, i + 1 < n ? ", " : ")");
            }
            return param_error(target, "unknown parameter", name, nlen, mt_out_cstr(&o), why, whylen);
        }
        if (p[k].set)
            return param_error(target, "parameter", name, nlen, " given twice", why, whylen);
        p[k].val = val;
        p[k].len = vlen;
        p[k].set = 1;
    }
    return 0;
}

int xe_param_u64(const char *target, const xe_param *p, uint64_t min, uint64_t max, uint64_t *out, char *why,
                 size_t whylen)
{
    uint64_t v = 0;
    size_t i = 0;
    int ok = p->len > 0;
    int hex = p->len > 2 && p->val[0] == '0' && (p->val[1] == 'x' || p->val[1] == 'X');
    if (hex)
        i = 2;
    for (; ok && i < p->len; i++) {
        char c = p->val[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (hex && c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (hex && c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else {
            ok = 0;
            break;
        }
        unsigned base = hex ? 16 : 10;
        if (v > (UINT64_MAX - d) / base) {
            ok = 0;
            break;
        }
        v = v * base + d;
    }
    if (ok && v >= min && v <= max) {
        *out = v;
        return 0;
    }
    mt_out o;
    xe_why_init(&o, why, whylen);
    mt_out_str(&o, target);
    mt_out_str(&o, ": ");
    mt_out_str(&o, p->name);
    mt_out_str(&o, "='");
    mt_out_shown(&o, p->val, p->len);
    mt_out_str(&o, "' is not a number from ");
    mt_out_u64(&o, min);
    mt_out_str(&o, " to ");
    mt_out_u64(&o, max);
    xe_why_done(&o);
    return -EINVAL;
}

void xe_params_keep(xe_target *t, const char *params)
{
    if (!params || params == t->params)
        return;
    size_t n = strlen(params);
    if (n >= sizeof t->params)
        n = sizeof t->params - 1;
    memmove(t->params, params, n);
    t->params[n] = '\0';
}

/* ---- JSON ---- */

void xe_target_json_object(xe_target *t, mt_json *j, int document)
{
    if (document)
        mt_json_document_begin(j);
    else
        mt_json_object_begin(j);
    mt_json_kstr(j, "target", t->ops->name);
    if (t->ops->view_json)
        t->ops->view_json(t, j);
    mt_json_object_end(j);
}

void xe_target_json(xe_target *t, mt_out *o, int document)
{
    mt_json j;
    mt_json_init_out(&j, o, false);
    xe_target_json_object(t, &j, document);
}

void xe_event_json(mt_json *j, const xe_event *ev)
{
    mt_json_object_begin(j);
    if (ev->type < XE_EV_NTYPES)
        mt_json_kstr(j, "type", xe_type_name(ev->type));
    else
        mt_json_ku64(j, "type", ev->type);
    mt_json_ku64(j, "category", ev->category);
    mt_json_kstr(j, "category_name", xe_category_name(ev->category));
    mt_json_ku64(j, "tid", ev->tid);
    mt_json_ku64(j, "cpu", ev->cpu);
    mt_json_ku64(j, "time_ns", ev->time_ns);
    mt_json_ku64(j, "size_bytes", ev->size);
    mt_json_ku64(j, "address", ev->address);
    mt_json_ku64(j, "old_address", ev->old_address);
    mt_json_ku64(j, "site", ev->site);
    mt_json_ku64(j, "key", ev->key);
    mt_json_ku64(j, "value", ev->value);
    mt_json_ku64(j, "data_bytes", ev->data_len);
    mt_json_object_end(j);
}

/* ---- packed events ---- */

void xe_pack_event(const xe_event *ev, uint64_t w[XE_EV_WORDS])
{
    w[0] = (uint64_t)ev->type | (uint64_t)ev->category << 16 | (uint64_t)ev->tid << 32;
    w[1] = (uint64_t)ev->cpu | (uint64_t)ev->data_len << 32;
    w[2] = ev->time_ns;
    w[3] = ev->size;
    w[4] = ev->address;
    w[5] = ev->old_address;
    w[6] = ev->site;
    w[7] = ev->key;
    w[8] = ev->value;
}

void xe_unpack_event(const uint64_t w[XE_EV_WORDS], xe_event *ev)
{
    ev->type = (uint16_t)w[0];
    ev->category = (uint16_t)(w[0] >> 16);
    ev->tid = (uint32_t)(w[0] >> 32);
    ev->cpu = (uint32_t)w[1];
    ev->data_len = (uint32_t)(w[1] >> 32);
    ev->time_ns = w[2];
    ev->size = w[3];
    ev->address = w[4];
    ev->old_address = w[5];
    ev->site = w[6];
    ev->key = w[7];
    ev->value = w[8];
    ev->data = NULL;
}
