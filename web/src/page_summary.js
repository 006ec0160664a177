/* page_summary.js — a summary report (`memtrail report --json`): the
 * process, the totals, each category's live, peak, committed and resident
 * bytes (bars, and a treemap of what is resident), how much of the RSS the
 * categories explain, and every figure in a table.
 *
 * Test hooks: .mt-card[data-key] for live_bytes, peak_bytes,
 * committed_bytes, resident_bytes, rss_bytes (common.js); #mt-categories
 * (live and peak bars, g.mt-bar[data-series]); #mt-mappings (committed
 * and resident); #mt-category-table (in the CLI's order: live + committed,
 * largest first, memtrail's own last); #mt-rss (div[data-name][data-value]). */
MT.processInfo = function (root, j) {
    var rows = [
        ["program", j.exe || "—"],
        ["command line", (j.cmdline || []).join(" ") || "—"],
        ["pid", j.pid + (j.ppid ? " (parent " + j.ppid + ")" : "")],
        ["recorded", MT.date(j.start_ns) + (j.end_ns && j.start_ns ? ", for " + MT.seconds(j.end_ns - j.start_ns) : "")],
        ["written at", j.reason || "—"],
        ["mode", j.mode || "—"],
    ];
    var dl = MT.el("dl", { class: "mt-meta mt-process" });
    rows.forEach(function (r) { dl.appendChild(MT.el("dt", { text: r[0] })); dl.appendChild(MT.el("dd", { text: String(r[1]) })); });
    root.appendChild(dl);
    if (j.complete === false)
        root.appendChild(MT.el("p", { class: "mt-error", text: "This report was cut short (no end marker): it shows what was written before the cut." }));
    var e = j.errors || {};
    if (e.double_free || e.bad_canary || e.foreign_free)
        root.appendChild(MT.el("p", { class: "mt-error", text: "Heap errors detected: " + e.double_free + " double frees, " +
            e.bad_canary + " overwritten canaries, " + e.foreign_free + " frees of pointers memtrail did not allocate." }));
};

/* The categories' columns, for the summary and detail pages' tables. */
MT.categoryColumns = [
    { key: "name", label: "category", unit: "text" },
    { key: "kind", label: "kind", unit: "text", title: "malloc: the malloc family; vm: mappings by purpose; overhead: memtrail's own" },
    { key: "size", label: "live + committed", unit: "bytes", value: function (c) { return c.live_bytes + c.committed_bytes; },
      title: "the CLI's order: live bytes of allocations plus committed bytes of mappings" },
    { key: "live_bytes", label: "live", unit: "bytes" },
    { key: "live_count", label: "live blocks", unit: "count" },
    { key: "peak_bytes", label: "peak", unit: "bytes" },
    { key: "allocs", label: "allocs", unit: "count" },
    { key: "frees", label: "frees", unit: "count" },
    { key: "reserved_bytes", label: "reserved", unit: "bytes" },
    { key: "committed_bytes", label: "committed", unit: "bytes" },
    { key: "resident_bytes", label: "resident", unit: "bytes" },
    { key: "mappings", label: "mappings", unit: "count" },
];

/* Totals, category bars and treemap, RSS and the table (the detail page
 * draws all but the totals). */
MT.summaryParts = function (root, j) {
    MT.summaryTotals(root, j);
    MT.categoryParts(root, j);
};

MT.summaryTotals = function (root, j) {
    var t = j.total || {}, p = j.process;
    MT.section(root, "Totals", "Live: bytes allocated and not yet freed when the report was written. Peak: the most live at once. " +
        "Committed: mapped memory the process may touch (what counts against overcommit). Resident: what sits in RAM now.");
    var cards = [
        { key: "live_bytes", label: "live", value: t.live_bytes },
        { key: "peak_bytes", label: "peak live", value: t.peak_bytes },
        { key: "committed_bytes", label: "committed", value: t.committed_bytes },
        { key: "resident_bytes", label: "resident", value: t.resident_bytes },
    ];
    if (p) cards.push({ key: "rss_bytes", label: "RSS", value: p.rss_bytes, note: "peak RSS " + MT.bytes(p.peak_rss_bytes) });
    cards.push({ key: "allocs", label: "allocations", value: t.allocs, unit: "count", note: MT.count(t.frees) + " frees, " + MT.count(t.reallocs) + " reallocs" });
    MT.cards(root, cards);
};

MT.categoryParts = function (root, j) {
    var p = j.process;
    /* The CLI's order: largest (live + committed) first, memtrail's own last. */
    var cats = (j.categories || []).slice().sort(function (a, b) {
        return ((a.kind === "overhead") - (b.kind === "overhead")) ||
            (b.live_bytes + b.committed_bytes) - (a.live_bytes + a.committed_bytes);
    });
    var allocs = cats.filter(function (c) { return c.live_bytes || c.peak_bytes; });
    var s = MT.section(root, "Allocations by category", "Live and peak bytes of each category's allocations (malloc and " +
        "the program's own pools; memtrail's own last). Categories with none are left out; the table below lists them all.");
    MT.bars(s, allocs, {
        id: "mt-categories", title: "allocations by category", name: function (c) { return c.name; },
        series: [{ key: "live_bytes", label: "live" }, { key: "peak_bytes", label: "peak", cls: "peak" }],
    });
    var maps = cats.filter(function (c) { return c.committed_bytes || c.resident_bytes; });
    s = MT.section(root, "Mappings by category", "Committed and resident bytes of the address space, by what it holds " +
        "(heap arenas, thread stacks, code, files, anonymous mappings, memtrail's own).");
    MT.bars(s, maps, {
        id: "mt-mappings", title: "mappings by category", name: function (c) { return c.name; },
        series: [{ key: "committed_bytes", label: "committed", cls: "committed" }, { key: "resident_bytes", label: "resident", cls: "resident" }],
    });
    if (p) MT.rssParts(root, j);
    var ts = MT.section(root, "All figures by category", "In the CLI's order; click a heading to sort, type to filter.");
    MT.table(ts, { id: "mt-category-table", rows: cats, columns: MT.categoryColumns, sort: null, name: function (c) { return c.name; } });
};

/* What the RSS is made of: each category's resident bytes, as a share of
 * the RSS and as a treemap. */
MT.rssParts = function (root, j) {
    var p = j.process;
    var s = MT.section(root, "RSS explained", null, "mt-rss-section");
    var share = MT.percent(p.explained_bytes, p.rss_bytes);
    s.appendChild(MT.el("p", { class: "mt-note", text: "The process's RSS (resident set: its pages the kernel holds in RAM) was " +
        MT.bytes(p.rss_bytes) + " (" + MT.count(p.rss_bytes) + " bytes). The categories' resident pages explain " +
        MT.bytes(p.explained_bytes) + " of it (" + share + "): every category but \"other\", which holds the mappings " +
        "memtrail cannot place (made before it started or by the kernel, such as vdso and vvar). The bar below is the RSS; " +
        "the treemap shows the same parts by area." }));
    var cats = (j.categories || []).filter(function (c) { return c.resident_bytes > 0; })
        .sort(function (a, b) { return b.resident_bytes - a.resident_bytes; });
    var color = d3.scaleOrdinal(d3.schemeTableau10);
    var bar = MT.el("div", { class: "mt-rss", id: "mt-rss", role: "img", "aria-label": "RSS by category" });
    var rest = p.rss_bytes;
    cats.forEach(function (c) {
        rest -= c.resident_bytes;
        bar.appendChild(MT.el("div", { style: "width:" + (100 * c.resident_bytes / p.rss_bytes) + "%;background:" + color(c.name),
                                       title: c.name + ": " + MT.bytes(c.resident_bytes), data: { name: c.name, value: String(c.resident_bytes) } },
                              [c.name]));
    });
    if (rest > 0) bar.appendChild(MT.el("div", { style: "width:" + (100 * rest / p.rss_bytes) + "%;background:#9aa3ad",
                                                 title: "not in any category: " + MT.bytes(rest) }, ["unexplained"]));
    s.appendChild(bar);
    /* The treemap: the area of each category is its resident bytes. */
    var w = Math.min(900, Math.max(480, s.clientWidth || 900)), h = 180;
    var tree = d3.hierarchy({ children: cats }).sum(function (c) { return c.resident_bytes || 0; });
    d3.treemap().size([w, h]).padding(2)(tree);
    var svg = d3.select(s).append("svg").attr("class", "mt-treemap").attr("width", w).attr("height", h)
        .attr("role", "img").attr("aria-label", "resident bytes by category");
    var g = svg.selectAll("g").data(tree.leaves()).join("g").attr("transform", function (d) { return "translate(" + d.x0 + "," + d.y0 + ")"; });
    g.append("rect").attr("width", function (d) { return d.x1 - d.x0; }).attr("height", function (d) { return d.y1 - d.y0; })
        .attr("fill", function (d) { return color(d.data.name); })
        .append("title").text(function (d) { return d.data.name + ": " + MT.count(d.data.resident_bytes) + " bytes resident"; });
    g.append("text").attr("x", 5).attr("y", 15).text(function (d) { return d.x1 - d.x0 > 60 ? d.data.name : ""; });
    g.append("text").attr("x", 5).attr("y", 29).text(function (d) { return d.x1 - d.x0 > 60 && d.y1 - d.y0 > 34 ? MT.bytes(d.data.resident_bytes) : ""; });
};

MT.pages.summary = function (root, env) {
    var j = env.data;
    MT.processInfo(root, j);
    MT.summaryParts(root, j);
};
