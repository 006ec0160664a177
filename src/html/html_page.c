/* html_page.c — writes one `memtrail html` page: styles, the envelope of
 * data, the libraries and the page code inlined (nothing is fetched when
 * the page opens), and an "about" block with the libraries' licenses,
 * which their terms ask copies to carry. */
#include "html/html.h"
#include "common/json_out.h"
#include "html/html_assets.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The libraries, in the order they load. */
static const char *const vendor_css[] = {"vendor/d3-flame-graph/d3-flamegraph.css",
                                         "vendor/uplot/uPlot.min.css", NULL};
static const char *const vendor_js[] = {"vendor/d3/d3.min.js", "vendor/d3-flame-graph/d3-flamegraph.min.js",
                                        "vendor/uplot/uPlot.iife.min.js", NULL};
static const char *const vendor_dirs[] = {"d3", "d3-flame-graph", "uplot", NULL};

const struct html_asset *html_asset_find(const char *name)
{
    for (const struct html_asset *a = mt_web_assets; a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

/* Text as HTML element content or attribute value. */
static void put_escaped(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(s[i], f);
        }
    }
}

/* A script or style body: "</script" or "</style" would end the element
 * early, so "</" is written "<\/" (the same string in JavaScript; the
 * vendored files hold none today). */
static void put_raw_body(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<' && i + 1 < n && s[i + 1] == '/' &&
            (strncasecmp(s + i + 2, "script", 6) == 0 || strncasecmp(s + i + 2, "style", 5) == 0)) {
            fputs("<\\/", f);
            i++;
        } else {
            fputc(s[i], f);
        }
    }
}

static void put_asset(FILE *f, const char *name, const char *tag)
{
    const struct html_asset *a = html_asset_find(name);
    if (!a)
        return;
    fprintf(f, "<%s data-asset=\"%s\">\n", tag, name);
    put_raw_body(f, a->data, a->len);
    fprintf(f, "\n</%s>\n", tag);
}

/* JSON text inside the page: every '<' as \u003c (the same JSON, and no
 * "</script" or "<!--" can appear in the element). Outside strings JSON
 * has no '<', so this only ever rewrites string contents. */
static void put_json(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<')
            fputs("\\u003c", f);
        else
            fputc(s[i], f);
    }
}

/* The envelope around the data, as one JSON text in memory. */
static int envelope(const struct html_page *p, char **buf, size_t *len)
{
    FILE *m = open_memstream(buf, len);
    if (!m)
        return -ENOMEM;
    mt_json j;
    mt_json_init_file(&j, m, false);
    mt_json_object_begin(&j);
    mt_json_key(&j, "memtrail_html");
    mt_json_u64(&j, 1);
    mt_json_key(&j, "kind");
    mt_json_str(&j, p->kind);
    mt_json_key(&j, "title");
    mt_json_str(&j, p->title);
    mt_json_key(&j, "inputs");
    mt_json_array_begin(&j);
    for (int i = 0; i < p->ninputs; i++)
        mt_json_str(&j, p->inputs[i]);
    mt_json_array_end(&j);
    mt_json_key(&j, "version");
    mt_json_str(&j, MT_VERSION_STR);
    mt_json_object_end(&j);
    int rc = j.err;
    if (fclose(m) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

/* The libraries' names, versions and license texts. */
static void put_about(FILE *f)
{
    fputs("<details id=\"mt-about\"><summary>About this page: memtrail " MT_VERSION_STR
          " and the libraries it carries</summary>\n"
          "<p>Written by <code>memtrail html</code>. It draws with these libraries, built into memtrail "
          "from its source tree's web/vendor and inlined here, each under its own license:</p>\n",
          f);
    for (int i = 0; vendor_dirs[i]; i++) {
        char name[128];
        snprintf(name, sizeof name, "vendor/%s/VERSION", vendor_dirs[i]);
        const struct html_asset *v = html_asset_find(name);
        snprintf(name, sizeof name, "vendor/%s/LICENSE", vendor_dirs[i]);
        const struct html_asset *l = html_asset_find(name);
        fputs("<h4>", f);
        if (v)
            put_escaped(f, v->data, strcspn(v->data, "\n"));
        fputs("</h4>\n<pre class=\"mt-license\">", f);
        if (l)
            put_escaped(f, l->data, l->len);
        fputs("</pre>\n", f);
    }
    fputs("</details>\n", f);
}

int html_write_page(FILE *f, const struct html_page *p)
{
    char *env;
    size_t envlen;
    int rc = envelope(p, &env, &envlen);
    if (rc < 0)
        return rc;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"memtrail " MT_VERSION_STR "\">\n<title>",
          f);
    put_escaped(f, p->title, strlen(p->title));
    fputs("</title>\n<!-- Written by memtrail html. Inlined libraries: d3 (ISC license), d3-flame-graph "
          "(Apache License 2.0), uPlot (MIT license); their license texts are in the page's About block. "
          "-->\n",
          f);
    for (int i = 0; vendor_css[i]; i++)
        put_asset(f, vendor_css[i], "style");
    put_asset(f, "src/style.css", "style");
    fputs("</head>\n<body>\n<noscript>This memtrail report draws with JavaScript; the data is in the "
          "mt-data block of the page's source.</noscript>\n<div id=\"mt-root\"></div>\n",
          f);
    /* The envelope's last '}' is replaced by the data. */
    fputs("<script type=\"application/json\" id=\"mt-data\">", f);
    put_json(f, env, envlen - 1);
    fputs(",\"data\":", f);
    put_json(f, p->data, p->datalen);
    fputs("}</script>\n", f);
    free(env);
    put_about(f);
    for (int i = 0; vendor_js[i]; i++)
        put_asset(f, vendor_js[i], "script");
    put_asset(f, "src/common.js", "script");
    /* Every page file: pages share parts (the detail page draws the
     * summary's categories); the kind picks the one that runs. */
    for (const struct html_asset *a = mt_web_assets; a->name; a++) {
        size_t l = strlen(a->name);
        if (strncmp(a->name, "src/page_", 9) == 0 && l > 3 && strcmp(a->name + l - 3, ".js") == 0)
            put_asset(f, a->name, "script");
    }
    fputs("<script>MT.start();</script>\n</body>\n</html>\n", f);
    return ferror(f) ? -EIO : 0;
}
