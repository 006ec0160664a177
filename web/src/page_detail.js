/* page_detail.js — a detail report (`memtrail report detail --json`): the
 * live bytes and the bytes allocated over the run as icicle graphs by
 * stack (root on top; click a frame to zoom, search to highlight), the
 * sites in a sortable, filterable table, then the categories as on the
 * summary page.
 *
 * Test hooks: .mt-card[data-key] live_bytes, peak_bytes, allocated_bytes,
 * sites; tabs button[data-tab=mt-tab-live|mt-tab-allocated] showing
 * #mt-flame-live and #mt-flame-allocated (.mt-flame, common.js);
 * #mt-sites, the table (rows tr[data-name] = the innermost frame's name;
 * text columns function, category, stack, source); #mt-sampling, the
 * label of a sampled report (docs/sampling.md). */
MT.siteColumns = function (withAllocated, sampled) {
    var cols = [
        { key: "function", label: "function", unit: "text", value: function (s) { return MT.frameName(s.frames[0] || {}); },
          title: "the innermost frame: where the allocation was made" },
        { key: "category", label: "category", unit: "text" },
        { key: "live_bytes", label: "live", unit: "bytes" },
        { key: "live_count", label: "live blocks", unit: "count" },
        { key: "peak_bytes", label: "peak", unit: "bytes", title: "the most bytes this site held live at once" },
        { key: "allocs", label: "allocs", unit: "count" },
        { key: "frees", label: "frees", unit: "count" },
    ];
    if (withAllocated)
        cols.push({ key: "allocated_bytes", label: "allocated", unit: "bytes", title: "bytes allocated over the run (each block's size when it came to the site, then each growth)" });
    if (sampled)
        cols.push({ key: "samples", label: "samples", unit: "count", title: "sampled allocations behind this site's estimates (few samples: a wide error)" });
    cols.push({ key: "source", label: "source", unit: "text", value: function (s) { return MT.frameSource(s.frames[0] || {}); } });
    cols.push({ key: "stack", label: "stack (outermost first)", unit: "text", value: function (s) { return MT.stackText(s.frames); } });
    return cols;
};

/* file:line of a frame, else its module's name and offset. */
MT.frameSource = function (f) {
    if (f.file) return f.file.split("/").pop() + ":" + f.line + (f.inlined ? " (inlined)" : "");
    return (f.module ? f.module.split("/").pop() : "?") + "+" + (f.offset || "?");
};

/* The frames of a site for the flame graph: its category first when the
 * report has several. */
MT.siteFrames = function (sites) {
    var cats = {};
    sites.forEach(function (s) { cats[s.category] = 1; });
    var several = Object.keys(cats).length > 1;
    return function (s) {
        var names = s.frames.map(MT.frameName);
        if (several) names.push("[" + s.category + "]");
        return names;
    };
};

MT.pages.detail = function (root, env) {
    var j = env.data, sites = j.sites || [], t = j.total || {};
    var hasAllocated = sites.some(function (s) { return "allocated_bytes" in s; });
    var sum = function (k) { return sites.reduce(function (a, s) { return a + (s[k] || 0); }, 0); };
    var liveSum = sum("live_bytes"), allocSum = hasAllocated ? sum("allocated_bytes") : sum("allocs");
    MT.processInfo(root, j);
    if (j.sampling)
        root.appendChild(MT.el("p", { class: "mt-note", id: "mt-sampling", text: "sampled, one sample per " +
            MT.bytes(j.sampling.rate_bytes) + ": site figures are estimates (the category totals are exact)" }));
    MT.section(root, "Totals", "Live: allocated and not yet freed when the report was written. Allocated: every byte the " +
        "sites allocated over the run (a realloc counts its growth at the block's site; one that moves the block to " +
        "another site counts its new size there, so a block may count at two sites).");
    MT.cards(root, [
        { key: "live_bytes", label: "live", value: t.live_bytes },
        { key: "peak_bytes", label: "peak live", value: t.peak_bytes },
        { key: "allocated_bytes", label: hasAllocated ? "allocated by the sites" : "allocations by the sites", value: allocSum,
          unit: hasAllocated ? "bytes" : "count" },
        { key: "sites", label: "sites", value: sites.length, unit: "count",
          note: "stacks of up to " + j.stack_depth + " frames (" + (j.unwinder || "?") + ")" },
    ]);
    if (j.sites_dropped)
        root.appendChild(MT.el("p", { class: "mt-error", text: j.sites_dropped + " sites did not fit the agent's table: their " +
            "bytes are in the totals, not in the graphs or the table." }));
    (j.symbol_warnings || []).forEach(function (w) { root.appendChild(MT.el("p", { class: "mt-note", text: "symbols: " + w })); });

    var s = MT.section(root, "By stack", "Each frame's width is the bytes of the sites below it; the root is all sites (" +
        MT.bytes(liveSum) + " live" + (liveSum === t.live_bytes ? ", the report's total" : "; the report's total is " + MT.bytes(t.live_bytes)) +
        "). Click a frame to zoom into it; search to highlight frames by name.");
    var frames = MT.siteFrames(sites);
    MT.tabs(s, [
        { id: "mt-tab-live", label: "live bytes", draw: function (el) {
            MT.flame(el, MT.stackTree(sites, frames, function (x) { return x.live_bytes; }), { id: "mt-flame-live" });
        } },
        { id: "mt-tab-allocated", label: hasAllocated ? "allocated bytes" : "allocations", draw: function (el) {
            MT.flame(el, MT.stackTree(sites, frames, function (x) { return hasAllocated ? x.allocated_bytes : x.allocs; }),
                     { id: "mt-flame-allocated", unit: hasAllocated ? "bytes" : "count" });
        } },
    ]);

    var ts = MT.section(root, "Sites", "One row per allocation site (call stack and category), largest live bytes first. " +
        "Click a heading to sort; type to keep the rows whose function, category, source or stack holds the text.");
    MT.table(ts, { id: "mt-sites", rows: sites, columns: MT.siteColumns(hasAllocated, !!j.sampling), sort: "live_bytes",
                   name: function (x) { return MT.frameName(x.frames[0] || {}); } });
    MT.categoryParts(root, j);
};
