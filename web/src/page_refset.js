/* page_refset.js — `memtrail html RECORDING`: a reference-set recording as
 * `memtrail refset report --json` gives it (docs/refset-report.md): the
 * system graph of outstanding pages by process and by category (uPlot), a
 * viewport the user drags on either graph or types in, and for it Size,
 * Impact Size, the graph at T0 and T1 and the impact types, in total, by
 * process (and its categories), by category and by class, recomputed here
 * from the report's page_data by report_view.c's rules, as WPA does.
 *
 * Test hooks (tests/html): #mt-rs-t0, #mt-rs-t1 (the viewport in seconds,
 * as --viewport takes them), #mt-rs-apply; #mt-rs-viewport[data-start-ns]
 * [data-end-ns]; #mt-rs-total .mt-card[data-key] (size_bytes,
 * impact_size_bytes, graph_start_bytes, graph_end_bytes, impacting_bytes,
 * transient_bytes, persistent_bytes, zero_page_bytes); tables
 * #mt-rs-processes (tr[data-name="pI"]), #mt-rs-process-categories
 * ("pIcK"), #mt-rs-categories ("cK"), #mt-rs-classes ("kK"), each figure
 * a td[data-value] in the column th[data-key]; MT.charts.byProcess,
 * MT.charts.byCategory (uPlot; a drag selects the viewport);
 * MT.refsetView(t0_ns, t1_ns) sets it. */
(function () {
    "use strict";

    var COLORS = ["#2f6fba", "#e08a1e", "#6a9e3a", "#8d5bb5", "#c0392b", "#17a2b8", "#7f6a3a", "#d63384"];
    var TYPES = ["impacting_bytes", "transient_bytes", "persistent_bytes"];
    var KEYS = ["size_bytes", "impact_size_bytes", "graph_start_bytes", "graph_end_bytes"].concat(TYPES, ["zero_page_bytes"]);

    /* Seconds as --viewport reads them (refset/report_main.c parse_seconds):
     * digits, an optional fraction cut at the nanosecond. null when not such. */
    function parseSeconds(s) {
        var m = /^([0-9]*)(?:\.([0-9]*))?$/.exec(s.trim());
        if (!m || (m[1] + (m[2] || "")).length === 0)
            return null;
        var frac = ((m[2] || "") + "000000000").slice(0, 9);
        return Number(m[1] || "0") * 1e9 + Number(frac);
    }

    function fmtSeconds(ns) {
        var s = String(Math.floor(ns / 1e9)) + "." + String(ns % 1e9 + 1e9).slice(1);
        return s.replace(/0+$/, "").replace(/\.$/, "");
    }

    /* report_view.c rs_impact_type: -1 when not alive in (t0, t1]. */
    function impactType(tRef, tRel, t0, t1) {
        var ref = tRef === null ? -Infinity : tRef, rel = tRel === null ? Infinity : tRel;
        if (ref > t1 || rel <= t0)
            return -1;
        var refIn = ref > t0, relIn = rel <= t1;
        if (refIn && relIn)
            return 1;
        if (!refIn && !relIn)
            return 2;
        return 0;
    }

    function zeroFigs() {
        return {size_bytes: 0, impact_size_bytes: 0, graph_start_bytes: 0, graph_end_bytes: 0,
            impacting_bytes: 0, transient_bytes: 0, persistent_bytes: 0, zero_page_bytes: 0};
    }

    /* Every figure of the viewport (t0, t1] from page_data. */
    function compute(d, t0, t1) {
        var ps = d.page_size_bytes, np = d.processes.length, nc = d.categories.length;
        var v = {total: zeroFigs(), procs: [], procCats: [], cats: [], classes: [zeroFigs(), zeroFigs()]};
        for (var p = 0; p < np; p++) {
            v.procs.push(zeroFigs());
            for (var c = 0; c < nc; c++)
                v.procCats.push(zeroFigs());
        }
        for (c = 0; c < nc; c++)
            v.cats.push(zeroFigs());
        function rows(proc, cat) {
            return [v.total, v.procs[proc], v.procCats[proc * nc + cat], v.cats[cat],
                v.classes[d.categories[cat]["class"] === "Dynamic" ? 0 : 1]];
        }
        d.page_data.references.forEach(function (g) {
            var type = impactType(g[2], g[3], t0, t1);
            if (type < 0)
                return;
            var bytes = g[5] * ps;
            rows(g[0], g[1]).forEach(function (f) {
                f.size_bytes += bytes;
                f[TYPES[type]] += bytes;
                if (g[4])
                    f.zero_page_bytes += bytes;
            });
        });
        d.page_data.spans.forEach(function (g) {
            var start = g[2] === null ? -Infinity : g[2], end = g[3] === null ? Infinity : g[3];
            var atStart = start <= t0 && end > t0, atEnd = start <= t1 && end > t1;
            if (!atStart && !atEnd)
                return;
            var bytes = g[4] * ps;
            rows(g[0], g[1]).forEach(function (f) {
                f.graph_start_bytes += atStart ? bytes : 0;
                f.graph_end_bytes += atEnd ? bytes : 0;
            });
        });
        [v.total].concat(v.procs, v.procCats, v.cats, v.classes).forEach(function (f) {
            f.impact_size_bytes = f.graph_end_bytes - f.graph_start_bytes;
        });
        return v;
    }

    /* The report's own figures for its viewport, in compute()'s shape. */
    function fromReport(d) {
        function figs(r) {
            var f = {};
            ["size_bytes", "impact_size_bytes", "graph_start_bytes", "graph_end_bytes", "zero_page_bytes"].forEach(function (k) { f[k] = r[k]; });
            TYPES.forEach(function (k) { f[k] = r.impact_types[k]; });
            return f;
        }
        var v = {total: figs(d), procs: [], procCats: [], cats: d.categories.map(figs), classes: d.classes.map(figs)};
        d.processes.forEach(function (p) {
            v.procs.push(figs(p));
            p.categories.forEach(function (c) { v.procCats.push(figs(c)); });
        });
        return v;
    }

    var COLS = [["size_bytes", "Size", "bytes"], ["impact_size_bytes", "Impact Size", "signed-bytes"],
        ["graph_start_bytes", "graph at T0", "bytes"], ["graph_end_bytes", "graph at T1", "bytes"],
        ["impacting_bytes", "impacting", "bytes"], ["transient_bytes", "transient", "bytes"],
        ["persistent_bytes", "persistent", "bytes"], ["zero_page_bytes", "zero page", "bytes"]];

    /* A table of rows {name, label..., figures}: the text columns, then the figures. */
    function figTable(parent, id, text, rows) {
        MT.table(parent, {id: id, rows: rows, sort: "size_bytes", name: function (r) { return r.name; },
            columns: text.map(function (t) { return {key: t[0], label: t[1], unit: "text"}; }).concat(
                COLS.map(function (c) { return {key: c[0], label: c[1], unit: c[2]}; }))});
    }

    function row(name, f, extra) {
        var r = {name: name};
        KEYS.forEach(function (k) { r[k] = f[k]; });
        Object.keys(extra || {}).forEach(function (k) { r[k] = extra[k]; });
        return r;
    }

    /* The system graph by process or by category: stepped lines (the value
     * after each change), a drag selects the viewport. */
    function chart(box, id, title, d, labels, values, onSelect, shown) {
        var tl = d.timeline, endS = d.duration_s;
        var xs = tl.map(function (p) { return p.time_ns / 1e9; });
        var data = [xs], series = [{label: "seconds"}];
        var extend = xs.length && xs[xs.length - 1] < endS; /* hold the last value to the end */
        if (extend)
            xs.push(endS);
        var stepped = uPlot.paths.stepped({align: 1});
        labels.forEach(function (name, k) {
            var ys = tl.map(function (p) { return values(p, k); });
            if (extend)
                ys.push(ys[ys.length - 1]);
            data.push(ys);
            series.push({label: name, stroke: COLORS[k % COLORS.length], width: 1.5, paths: stepped,
                value: function (u, v) { return v == null ? "" : MT.bytes(v); }});
        });
        box.appendChild(MT.el("h3", {text: title}));
        var graph = MT.el("div", {id: id});
        box.appendChild(graph);
        return new uPlot({
            width: Math.max(480, box.clientWidth || 960), height: 240, series: series, scales: {x: {time: false}},
            cursor: {drag: {x: true, y: false, setScale: false}},
            axes: [{label: "seconds since the recording's start"},
                {size: 80, values: function (u, vals) { return vals.map(MT.bytes); }}],
            hooks: {draw: [function (u) {
                if (shown.t0 === null)
                    return;
                /* the viewport shown, shaded */
                var a = u.valToPos(shown.t0 / 1e9, "x", true), b = u.valToPos(shown.t1 / 1e9, "x", true);
                u.ctx.save();
                u.ctx.fillStyle = "rgba(224, 138, 30, 0.13)";
                u.ctx.fillRect(a, u.bbox.top, Math.max(1, b - a), u.bbox.height);
                u.ctx.restore();
            }], setSelect: [function (u) {
                if (u.select.width < 2)
                    return;
                var a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
                onSelect(Math.max(0, Math.round(a * 1e9)), Math.max(0, Math.round(b * 1e9)));
            }]}
        }, data, graph);
    }

    MT.pages.refset = function (root, env) {
        var d = env.data;
        MT.charts = MT.charts || {};
        var exact = !!(d.page_data && d.page_data.references && d.page_data.spans);
        var endNs = Math.round(d.duration_s * 1e9);
        MT.cards(root, [
            {key: "peak_bytes", label: "peak of the system graph", value: d.peak.bytes, note: "first at " + fmtSeconds(d.peak.time_ns) + " s"},
            {key: "steady_state_bytes", label: "steady state", value: d.steady_state_bytes, note: "outstanding at the end"},
            {key: "processes", label: "processes", value: d.processes.length, unit: "count"},
            {key: "duration_ns", label: "duration (ns)", value: endNs, unit: "count", note: fmtSeconds(endNs) + " s"}]);
        if (!d.complete)
            root.appendChild(MT.el("p", {"class": "mt-error", text: "The recording stops early: " + d.stopped}));

        var gbox = MT.section(root, "Outstanding pages", exact ?
            "The system graph (each physical page once). Drag across either graph to choose the viewport (T0, T1], " +
            "or type it in seconds as memtrail refset report --viewport T0:T1 takes it; the figures below are recomputed for it." :
            "This recording has too many page groups to recompute in the page: the figures are the report's, for its viewport.", "mt-rs-graphs");
        var t0in = MT.el("input", {id: "mt-rs-t0", size: 14, value: fmtSeconds(d.viewport.start_ns), "aria-label": "T0 in seconds"});
        var t1in = MT.el("input", {id: "mt-rs-t1", size: 14, value: fmtSeconds(d.viewport.end_ns), "aria-label": "T1 in seconds"});
        var apply = MT.el("button", {id: "mt-rs-apply", "class": "mt-reset", text: "apply"});
        var whole = MT.el("button", {id: "mt-rs-whole", "class": "mt-reset", text: "whole recording"});
        var said = MT.el("span", {id: "mt-rs-viewport", "class": "mt-flame-info"});
        var err = MT.el("span", {id: "mt-rs-error", "class": "mt-error"});
        gbox.appendChild(MT.el("div", {"class": "mt-flame-tools"}, ["viewport: T0 ", t0in, " s  T1 ", t1in, " s", apply, whole, said, err]));
        if (!exact)
            [t0in, t1in, apply, whole].forEach(function (e) { e.disabled = true; });

        var fbox = MT.section(root, "Figures for the viewport", "Size: the pages referenced in the viewport, per process " +
            "(a page shared by two processes counts in each). Impact Size: the graph at T1 minus at T0 (each page once). " +
            "Impacting: referenced or released inside; transient: both inside; persistent: both outside.", "mt-rs-figs");
        var live = MT.el("div", {id: "mt-rs-tables"});
        fbox.appendChild(live);

        function draw(v, t0, t1) {
            said.dataset.startNs = String(t0);
            said.dataset.endNs = String(t1);
            said.textContent = "showing (" + fmtSeconds(t0) + " s, " + fmtSeconds(t1) + " s]";
            live.textContent = "";
            MT.cards(live, COLS.map(function (c) {
                return {key: c[0], label: c[1], value: v.total[c[0]]};
            })).id = "mt-rs-total";
            live.appendChild(MT.el("h3", {text: "By process"}));
            figTable(live, "mt-rs-processes", [["process", "process"]], d.processes.map(function (p, i) {
                return row("p" + i, v.procs[i], {process: p.pid + " " + p.program});
            }));
            live.appendChild(MT.el("h3", {text: "By process and category"}));
            var pc = [];
            d.processes.forEach(function (p, i) {
                d.categories.forEach(function (c, k) {
                    var f = v.procCats[i * d.categories.length + k];
                    if (f.size_bytes || f.graph_start_bytes || f.graph_end_bytes)
                        pc.push(row("p" + i + "c" + k, f, {process: p.pid + " " + p.program, category: c.name}));
                });
            });
            figTable(live, "mt-rs-process-categories", [["process", "process"], ["category", "category"]], pc);
            live.appendChild(MT.el("h3", {text: "By category"}));
            figTable(live, "mt-rs-categories", [["category", "category"], ["class", "class"]], d.categories.map(function (c, k) {
                return row("c" + k, v.cats[k], {category: c.name, "class": c["class"]});
            }));
            live.appendChild(MT.el("h3", {text: "By class"}));
            figTable(live, "mt-rs-classes", [["class", "class"]], d.classes.map(function (c, k) {
                return row("k" + k, v.classes[k], {"class": c.name});
            }));
        }

        var shown = {t0: null, t1: null};
        function view(t0, t1) {
            if (t1 <= t0)
                t1 = t0;
            shown.t0 = t0;
            shown.t1 = t1;
            [MT.charts.byProcess, MT.charts.byCategory].forEach(function (u) {
                if (u) {
                    u.setSelect({left: 0, top: 0, width: 0, height: 0}, false);
                    u.redraw(false);
                }
            });
            t0in.value = fmtSeconds(t0);
            t1in.value = fmtSeconds(t1);
            err.textContent = "";
            draw(compute(d, t0, t1), t0, t1);
        }
        MT.refsetView = view;
        apply.addEventListener("click", function () {
            var t0 = t0in.value.trim() === "" ? 0 : parseSeconds(t0in.value);
            var t1 = t1in.value.trim() === "" ? endNs : parseSeconds(t1in.value);
            if (t0 === null || t1 === null) {
                err.textContent = "a time is seconds since the start, e.g. 1.5";
                return;
            }
            view(t0, t1);
        });
        whole.addEventListener("click", function () { view(0, endNs); });

        /* a drag recomputes only when the page has the page groups */
        var select = function (t0, t1) {
            if (exact)
                view(t0, t1);
        };
        var catNames = d.categories.map(function (c) { return c.name; });
        MT.charts.byProcess = chart(gbox, "mt-rs-by-process", "By process", d,
            d.processes.map(function (p) { return p.pid + " " + p.program; }),
            function (p, k) { return p.by_process[k]; }, select, shown);
        MT.charts.byCategory = chart(gbox, "mt-rs-by-category", "By category", d, catNames,
            function (p, k) { return p.by_category[catNames[k]]; }, select, shown);
        if (exact) {
            view(d.viewport.start_ns, d.viewport.end_ns);
        } else {
            shown.t0 = d.viewport.start_ns;
            shown.t1 = d.viewport.end_ns;
            draw(fromReport(d), d.viewport.start_ns, d.viewport.end_ns);
        }
    };
})();
