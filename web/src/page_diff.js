/* page_diff.js — two reports compared (`memtrail diff --json BASE NEW`):
 * the totals' changes, the categories that grew or shrank (sorted bars and
 * a table), and, when both are detail reports, the sites: the largest
 * changes as bars, a differential icicle graph (widths: NEW's live bytes;
 * colour: the change, red grew, blue shrank) and a table.
 *
 * Test hooks: .mt-card[data-key] live_bytes_delta, peak_bytes_delta,
 * committed_bytes_delta, rss_bytes_delta (.mt-na, value n/a, when a side has no
 * address-space figures: not comparable); #mt-diff-categories (bars of the
 * non-zero live-byte changes, g.mt-bar[data-name][data-value]);
 * #mt-diff-category-table; #mt-diff-site-bars; #mt-flame-diff (.mt-flame);
 * #mt-diff-sites (rows tr[data-name] = innermost frame, sorted by the size
 * of the live-byte change); #mt-sampling, the note when a side is sampled. */
MT.pages.diff = function (root, env) {
    var j = env.data, t = j.total || {}, p = j.process;
    var side = function (label, r) {
        var dl = MT.el("dl", { class: "mt-meta mt-process" });
        [["", label], ["program", r.exe || "—"], ["command line", (r.cmdline || []).join(" ")], ["pid", r.pid],
         ["recorded", MT.date(r.start_ns)]].forEach(function (x, i) {
            if (i === 0) { dl.appendChild(MT.el("dt", { text: x[1] })); dl.appendChild(MT.el("dd")); return; }
            dl.appendChild(MT.el("dt", { text: x[0] }));
            dl.appendChild(MT.el("dd", { text: String(x[1]) }));
        });
        if (r.complete === false) dl.appendChild(MT.el("dd", { class: "mt-error", text: "cut short: compared as far as it goes" }));
        return dl;
    };
    root.appendChild(MT.el("div", { class: "mt-sides" }, [side("BASE", j.base || {}), side("NEW", j.new || {})]));
    /* Sampled sides (docs/sampling.md): the sites are estimates, comparable
     * only at one rate. */
    var sb = (j.base || {}).sampling, sn = (j.new || {}).sampling, per = function (x) { return MT.bytes(x.rate_bytes); };
    if (sb || sn)
        root.appendChild(MT.el("p", { class: "mt-note", id: "mt-sampling", text:
            sb && sn && sb.rate_bytes === sn.rate_bytes ? "sampled, one sample per " + per(sb) + ": site figures are estimates" :
            sb && sn ? "sampled at different rates (BASE one sample per " + per(sb) + ", NEW per " + per(sn) + "): site figures are not directly comparable" :
            (sb ? "BASE" : "NEW") + " is sampled (one sample per " + per(sb || sn) + "), the other exact: site figures are not directly comparable" }));

    MT.section(root, "What changed", "NEW minus BASE. Live: allocated and not freed when each report was written; " +
        "committed and RSS: the process's mapped and resident memory.");
    /* Address-space figures: null on a side without them (a trace, say):
     * NEW's null when NEW has none, the change null unless both have them. */
    var noVm = t.committed_bytes === null || t.committed_bytes === undefined ? "NEW has no address-space figures" :
        t.committed_bytes_delta === null || t.committed_bytes_delta === undefined ? "BASE has no address-space figures" : null;
    var cards = [
        { key: "live_bytes_delta", label: "live", value: t.live_bytes_delta, signed: true, note: "now " + MT.bytes(t.live_bytes) },
        { key: "peak_bytes_delta", label: "peak live", value: t.peak_bytes_delta, signed: true, note: "now " + MT.bytes(t.peak_bytes) },
        { key: "committed_bytes_delta", label: "committed", value: t.committed_bytes_delta, signed: true, 
          note: noVm ? "not comparable: " + noVm + (t.committed_bytes === null || t.committed_bytes === undefined ? "" : "; now " + MT.bytes(t.committed_bytes))
                     : "now " + MT.bytes(t.committed_bytes) },
    ];
    if (p) cards.push({ key: "rss_bytes_delta", label: "RSS", value: p.rss_bytes_delta, signed: true, note: "now " + MT.bytes(p.rss_bytes) });
    cards.push({ key: "allocs_delta", label: "allocations", value: t.allocs_delta, unit: "count", signed: true, note: "now " + MT.count(t.allocs) });
    MT.cards(root, cards);

    var cats = j.categories || [];
    var grew = cats.filter(function (c) { return c.live_bytes_delta; })
        .sort(function (a, b) { return Math.abs(b.live_bytes_delta) - Math.abs(a.live_bytes_delta); });
    var s = MT.section(root, "Categories: live bytes", "The categories whose live bytes changed, largest change first; red grew, green shrank.");
    MT.bars(s, grew, { id: "mt-diff-categories", signed: true, name: function (c) { return c.name + (c.status !== "both" ? " (" + c.status + ")" : ""); },
                       series: [{ key: "live_bytes_delta", label: "live bytes change" }], empty: "No category's live bytes changed." });
    var mapped = cats.filter(function (c) { return c.committed_bytes_delta; })
        .sort(function (a, b) { return Math.abs(b.committed_bytes_delta) - Math.abs(a.committed_bytes_delta); });
    s = MT.section(root, "Categories: committed bytes", "The mappings' committed bytes that changed, by category.");
    MT.bars(s, mapped, { id: "mt-diff-mappings", signed: true, name: function (c) { return c.name; },
                         series: [{ key: "committed_bytes_delta", label: "committed bytes change" }], 
                         empty: noVm ? "Not comparable: " + noVm + "." : "No category's committed bytes changed." });
    s = MT.section(root, "All categories", "NEW's figures and their changes since BASE; status: both, new (NEW only), gone (BASE only) or not_comparable (address space, or memtrail's overhead, one side has no figures for).");
    /* why a row's figure is n/a: its kind has no figures on one side */
    var why = function (c) {
        return "not comparable: " + (c.status === "not_comparable" && c.kind === "overhead" ? "one side has no figures of memtrail's own overhead (a trace, say)" :
            noVm || "not in both reports");
    };
    var delta = function (k) { return { key: k + "_delta", label: "Δ", unit: "signed-bytes", sortValue: function (c) { return Math.abs(c[k + "_delta"]); },
                                        title: "change of " + k.replace("_bytes", "") + " since BASE (sorts by its size)",
                                        naTitle: why }; };
    MT.table(s, { id: "mt-diff-category-table", rows: cats, sort: "live_bytes_delta", name: function (c) { return c.name; }, columns: [
        { key: "name", label: "category", unit: "text" }, { key: "status", label: "status", unit: "text" },
        { key: "live_bytes", label: "live", unit: "bytes" }, delta("live_bytes"),
        { key: "peak_bytes", label: "peak", unit: "bytes" }, delta("peak_bytes"),
        { key: "committed_bytes", label: "committed", unit: "bytes", naTitle: "not available: NEW has no address-space figures" }, delta("committed_bytes"),
        { key: "resident_bytes", label: "resident", unit: "bytes", naTitle: "not available: NEW has no address-space figures" }, delta("resident_bytes"),
        { key: "allocs", label: "allocs", unit: "count" },
    ] });

    if (j.sites) MT.diffSites(root, j.sites);
};

MT.diffSites = function (root, sites) {
    var live = function (x, k) { return x[k] ? x[k].live_bytes : 0; };
    var name = function (x) { return MT.frameName(x.frames[0] || {}); };
    var changed = sites.filter(function (x) { return x.delta.live_bytes; })
        .sort(function (a, b) { return Math.abs(b.delta.live_bytes) - Math.abs(a.delta.live_bytes); });
    var s = MT.section(root, "Sites that grew or shrank", "Allocation sites matched by their symbolized stack and category. " +
        "The 20 largest changes of live bytes; every site is in the table below.");
    MT.bars(s, changed.slice(0, 20).map(function (x) { return { name: name(x) + " [" + x.status + "]", change: x.delta.live_bytes }; }),
            { id: "mt-diff-site-bars", signed: true, name: function (x) { return x.name; },
              series: [{ key: "change", label: "live bytes change" }], empty: "No site's live bytes changed." });

    var frames = MT.siteFrames(sites);
    var maxAbs = d3.max(sites, function (x) { return Math.abs(x.delta.live_bytes); }) || 1;
    s = MT.section(root, "Differential flame graph", "Widths are NEW's live bytes by stack; colour is each frame's change " +
        "since BASE (red grew, blue shrank, grey unchanged). Sites that went have no width in NEW: see the table.");
    MT.flame(s, MT.stackTree(sites, frames, function (x) { return live(x, "new"); }, function (x) { return x.delta.live_bytes; }), {
        id: "mt-flame-diff", differential: true,
        color: function (d) {
            var v = d.delta || 0, a = Math.min(1, Math.abs(v) / maxAbs);
            if (!v) return "#c9ced4";
            return v > 0 ? d3.interpolateRgb("#f4c7c3", "#c0392b")(a) : d3.interpolateRgb("#c6d9f1", "#2f6fba")(a);
        },
    });

    s = MT.section(root, "All sites", "Largest change of live bytes first (the Δ columns sort by the size of the change).");
    MT.table(s, { id: "mt-diff-sites", rows: sites, sort: "delta_live", name: name, columns: [
        { key: "function", label: "function", unit: "text", value: name },
        { key: "category", label: "category", unit: "text" },
        { key: "status", label: "status", unit: "text" },
        { key: "delta_live", label: "Δ live", unit: "signed-bytes", value: function (x) { return x.delta.live_bytes; },
          sortValue: function (x) { return Math.abs(x.delta.live_bytes); } },
        { key: "base_live", label: "BASE live", unit: "bytes", value: function (x) { return live(x, "base"); } },
        { key: "new_live", label: "NEW live", unit: "bytes", value: function (x) { return live(x, "new"); } },
        { key: "delta_allocs", label: "Δ allocs", unit: "signed", value: function (x) { return x.delta.allocs; },
          sortValue: function (x) { return Math.abs(x.delta.allocs); } },
        { key: "stack", label: "stack (outermost first)", unit: "text", value: function (x) { return MT.stackText(x.frames); } },
    ] });
};
