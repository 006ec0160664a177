/* html.h — the self-contained HTML report (`memtrail html`, docs/html.md):
 * one page holding the page code and the libraries built into the binary
 * (html_assets.h) and the data, the JSON a memtrail command printed,
 * wrapped in the envelope the page reads. */
#ifndef MT_HTML_H
#define MT_HTML_H

#include <stddef.h>
#include <stdio.h>

struct html_page {
    const char *kind;          /* summary, detail, trace, diff, tree, refset, info */
    const char *title;         /* the page's title */
    const char *const *inputs; /* the input paths, as given */
    int ninputs;
    const char *data; /* the command's JSON document, datalen bytes */
    size_t datalen;
};

/* Writes the page to f: the libraries, common.js and every page_*.js
 * (MT.pages[kind] draws it; without one the page shows the JSON as text), the
 * envelope {"memtrail_html": 1, "kind", "title", "inputs", "data"} in
 * <script type="application/json" id="mt-data"> with every '<' written
 * as \u003c, and the libraries' licenses. 0, -ENOMEM or -EIO. */
int html_write_page(FILE *f, const struct html_page *p);

#endif /* MT_HTML_H */
