/* html_assets.h — the files of web/src and web/vendor built into the
 * memtrail binary (scripts/web_embed.sh writes the table at build time):
 * `memtrail html` inlines them into the pages it writes. */
#ifndef MT_HTML_ASSETS_H
#define MT_HTML_ASSETS_H

#include <stddef.h>

struct html_asset {
    const char *name; /* the path under web/: "src/common.js", "vendor/d3/d3.min.js" */
    const char *data; /* its bytes, followed by a NUL */
    size_t len;
};

/* Ended by an entry whose name is NULL. */
extern const struct html_asset mt_web_assets[];

/* The asset named `name`, or NULL. */
const struct html_asset *html_asset_find(const char *name);

#endif /* MT_HTML_ASSETS_H */
