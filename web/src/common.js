/* common.js — what every `memtrail html` page shares (docs/html.md): the
 * envelope read from #mt-data, the page frame (title, inputs, kind), number
 * formats, and the parts pages are built from: figure cards, sortable and
 * filterable tables, tabs, bar charts (d3) and flame graphs
 * (d3-flame-graph). A page file registers MT.pages.KIND = function (root,
 * env) and draws into root; MT.start() runs it.
 *
 * Test hooks (tests/html/browser.py): body[data-ready="1"] once drawn
 * (data-error="1" too if the page threw); .mt-card[data-key] with
 * .mt-exact[data-value] for each figure; table.mt-table with th[data-key]
 * (click sorts; th[aria-sort]) and input.mt-filter, rows tr[data-name];
 * .mt-flame[data-root-value] holding the d3-flame-graph svg, its
 * input.mt-search, button.mt-reset, frames g.frame[name] (g.mt-match when
 * search matched); .mt-bars svg with g.mt-bar[data-name][data-value];
 * #mt-json (<pre>) when the kind has no page file. */
"use strict";
var MT = (function () {
    var MT = { pages: {} };

    /* --- DOM ------------------------------------------------------------ */

    /* el("div", {class: "x", text: "..."}, [children]) */
    MT.el = function (tag, attrs, children) {
        var e = document.createElement(tag);
        Object.keys(attrs || {}).forEach(function (k) {
            var v = attrs[k];
            if (v === undefined || v === null) return;
            if (k === "text") e.textContent = v;
            else if (k === "data") Object.keys(v).forEach(function (d) { e.dataset[d] = v[d]; });
            else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
            else e.setAttribute(k, v);
        });
        (children || []).forEach(function (c) {
            if (c !== null && c !== undefined)
                e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
        });
        return e;
    };

    /* A section with a heading and, optionally, a paragraph saying what it shows. */
    MT.section = function (parent, title, intro, id) {
        var s = MT.el("section", { class: "mt-section", id: id }, [MT.el("h2", { text: title })]);
        if (intro) s.appendChild(MT.el("p", { class: "mt-note", text: intro }));
        parent.appendChild(s);
        return s;
    };

    /* --- numbers -------------------------------------------------------- */

    /* 1024-based with three significant digits, as the CLI's --scale:
     * "512 bytes", "1.50 KB", "20.0 MB". */
    MT.bytes = function (n) {
        var units = ["KB", "MB", "GB", "TB", "PB"];
        var a = Math.abs(n);
        if (a < 1024) return n + (a === 1 ? " byte" : " bytes");
        var u = -1;
        do { a /= 1024; u++; } while (a >= 1023.5 && u < units.length - 1);
        var s = a >= 99.95 ? a.toFixed(0) : a >= 9.995 ? a.toFixed(1) : a.toFixed(2);
        return (n < 0 ? "-" : "") + s + " " + units[u];
    };
    /* Grouped digits: 1,234,567. */
    MT.count = function (n) { return Number(n).toLocaleString("en-US"); };
    MT.signed = function (n, fmt) { return (n > 0 ? "+" : n < 0 ? "-" : "±") + (fmt || MT.count)(Math.abs(n)); };
    MT.percent = function (part, whole) {
        return whole ? (100 * part / whole).toFixed(1) + "%" : "—";
    };
    MT.seconds = function (ns) {
        return ns >= 1e9 ? (ns / 1e9).toFixed(3) + " s" : ns >= 1e6 ? (ns / 1e6).toFixed(1) + " ms" : (ns / 1e3).toFixed(0) + " µs";
    };
    MT.date = function (ns) { return ns ? new Date(ns / 1e6).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "—"; };

    /* --- figure cards --------------------------------------------------- */

    /* cards(parent, [{key, label, value, unit: "bytes"|"count", signed,
     * note}]): the human figure large, the exact one below it. */
    MT.cards = function (parent, items) {
        var box = MT.el("div", { class: "mt-cards" });
        items.forEach(function (it) {
            var bytes = it.unit !== "count", human = bytes ? MT.bytes : MT.count;
            if (it.value === null || it.value === undefined) { /* not known, or not comparable: never 0 */
                box.appendChild(MT.el("div", { class: "mt-card mt-na", data: { key: it.key } }, [
                    MT.el("div", { class: "mt-card-label", text: it.label }),
                    MT.el("div", { class: "mt-card-value", text: "n/a" }),
                    MT.el("div", { class: "mt-exact", data: { value: "null" }, text: "not available" }),
                    it.note ? MT.el("div", { class: "mt-card-note", text: it.note }) : null,
                ]));
                return;
            }
            var cls = "mt-card" + (it.signed && it.value > 0 ? " mt-up" : it.signed && it.value < 0 ? " mt-down" : "");
            box.appendChild(MT.el("div", { class: cls, data: { key: it.key } }, [
                MT.el("div", { class: "mt-card-label", text: it.label }),
                MT.el("div", { class: "mt-card-value", text: it.signed ? MT.signed(it.value, human) : human(it.value) }),
                MT.el("div", { class: "mt-exact", data: { value: String(it.value) },
                               text: (it.signed ? MT.signed(it.value) : MT.count(it.value)) + (bytes ? " bytes" : "") }),
                it.note ? MT.el("div", { class: "mt-card-note", text: it.note }) : null,
            ]));
        });
        parent.appendChild(box);
        return box;
    };

    /* --- tables --------------------------------------------------------- */

    /* table(parent, {id, columns: [{key, label, unit: "bytes"|"count"|
     * "signed-bytes"|"signed"|"id" (a number, not grouped)|"text", value: row => x, sortValue: row => x, title}],
     * rows, sort: key (null: the rows' own order until a heading is
     * clicked), name: row => tr's data-name, limit}): click a heading to
     * sort, largest first (again: reverse); the filter box
     * keeps the rows whose text cells hold what is typed. Shows `limit`
     * rows (default 500) and says how many more there are. */
    MT.table = function (parent, opt) {
        var cols = opt.columns, limit = opt.limit || 500;
        var sortKey = opt.sort === undefined ? cols[0].key : opt.sort, desc = true, filter = "";
        var get = function (c, r) { return c.value ? c.value(r) : r[c.key]; };
        var order = function (c, r) { return c.sortValue ? c.sortValue(r) : get(c, r); };
        var input = MT.el("input", { type: "search", class: "mt-filter", placeholder: "filter rows (any text column)",
                                     "aria-label": "filter rows" });
        var status = MT.el("span", { class: "mt-table-status" });
        var tbody = MT.el("tbody");
        var heads = cols.map(function (c) {
            var th = MT.el("th", { data: { key: c.key }, title: c.title || "sort by " + c.label, scope: "col",
                                   class: c.unit === "text" ? "mt-text" : "mt-numcol" }, [c.label]);
            th.addEventListener("click", function () {
                if (sortKey === c.key) desc = !desc;
                else { sortKey = c.key; desc = c.unit !== "text"; }
                draw();
            });
            return th;
        });
        var table = MT.el("table", { class: "mt-table", id: opt.id }, [
            MT.el("thead", {}, [MT.el("tr", {}, heads)]), tbody]);
        input.addEventListener("input", function () { filter = input.value.toLowerCase(); draw(); });
        function cell(c, r) {
            var v = get(c, r);
            if (c.unit === "text") return MT.el("td", { class: "mt-text", title: v }, [String(v)]);
            if (v === null || v === undefined) /* not known, or not comparable: never 0 */
                return MT.el("td", { class: "mt-numcol mt-na", data: { value: "null" },
                                     title: (typeof c.naTitle === "function" ? c.naTitle(r) : c.naTitle) || "not available" }, ["n/a"]);
            var signed = c.unit === "signed-bytes" || c.unit === "signed";
            var txt = signed ? MT.signed(v) : c.unit === "id" ? String(v) : MT.count(v);
            return MT.el("td", { class: "mt-numcol" + (signed ? (v > 0 ? " mt-up" : v < 0 ? " mt-down" : "") : ""),
                                 data: { value: String(v) },
                                 title: c.unit === "bytes" || c.unit === "signed-bytes" ? MT.bytes(v) : null }, [txt]);
        }
        function draw() {
            var col = cols.filter(function (c) { return c.key === sortKey; })[0];
            var rows = opt.rows.filter(function (r) {
                if (!filter) return true;
                return cols.some(function (c) {
                    return c.unit === "text" && String(get(c, r)).toLowerCase().indexOf(filter) >= 0;
                });
            });
            if (col) rows.sort(function (a, b) {
                var x = order(col, a), y = order(col, b);
                var d = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
                return desc ? -d : d;
            });
            heads.forEach(function (th, i) {
                th.setAttribute("aria-sort", cols[i].key === sortKey ? (desc ? "descending" : "ascending") : "none");
            });
            tbody.textContent = "";
            rows.slice(0, limit).forEach(function (r) {
                tbody.appendChild(MT.el("tr", { data: { name: opt.name ? opt.name(r) : "" } },
                                        cols.map(function (c) { return cell(c, r); })));
            });
            status.textContent = rows.length > limit
                ? "showing " + limit + " of " + MT.count(rows.length) + " rows (filter to narrow)"
                : MT.count(rows.length) + " of " + MT.count(opt.rows.length) + " rows";
        }
        draw();
        parent.appendChild(MT.el("div", { class: "mt-table-tools" }, [input, status]));
        parent.appendChild(MT.el("div", { class: "mt-table-wrap" }, [table]));
        return table;
    };

    /* --- tabs ----------------------------------------------------------- */

    /* tabs(parent, [{id, label, draw: el => ...}]): each tab is drawn the
     * first time it shows (charts need their width). */
    MT.tabs = function (parent, tabs) {
        var bar = MT.el("div", { class: "mt-tabs", role: "tablist" });
        var panels = [];
        tabs.forEach(function (t, i) {
            var panel = MT.el("div", { class: "mt-panel", id: t.id, role: "tabpanel" });
            var b = MT.el("button", { class: "mt-tab", role: "tab", data: { tab: t.id }, text: t.label });
            b.addEventListener("click", function () { show(i); });
            bar.appendChild(b);
            panels.push({ tab: t, panel: panel, button: b, drawn: false });
        });
        parent.appendChild(bar);
        panels.forEach(function (p) { parent.appendChild(p.panel); });
        function show(i) {
            panels.forEach(function (p, j) {
                p.panel.hidden = j !== i;
                p.button.setAttribute("aria-selected", j === i ? "true" : "false");
            });
            var p = panels[i];
            if (!p.drawn) { p.drawn = true; p.tab.draw(p.panel); }
        }
        show(0);
    };

    /* --- stacks and flame graphs ---------------------------------------- */

    /* A frame's name: the function, else module+offset. */
    MT.frameName = function (f) {
        if (f.function) return f.function;
        var m = f.module ? f.module.split("/").pop() : "?";
        return m + "+" + (f.offset || f.address || "?");
    };
    /* frames (innermost first, as the JSON lists them) as one line, outermost first. */
    MT.stackText = function (frames) {
        return frames.map(MT.frameName).reverse().join(" → ");
    };

    /* The tree d3-flame-graph draws: {name, value (self), delta, children},
     * from items whose stacks are given innermost first; the root is "all". */
    MT.stackTree = function (items, framesOf, valueOf, deltaOf) {
        var root = { name: "all", value: 0, delta: 0, children: [], _kids: {} };
        items.forEach(function (it) {
            var v = valueOf(it), dv = deltaOf ? deltaOf(it) : 0;
            if (!v && !dv) return;
            var node = root, frames = framesOf(it);
            for (var i = frames.length - 1; i >= 0; i--) {
                var name = frames[i];
                var next = node._kids[name];
                if (!next) {
                    next = { name: name, value: 0, delta: 0, children: [], _kids: {} };
                    node._kids[name] = next;
                    node.children.push(next);
                }
                node = next;
            }
            node.value += v;
            node.delta += dv;
        });
        (function strip(n) { delete n._kids; n.children.forEach(strip); })(root);
        return root;
    };

    /* flame(parent, tree, {id, title, unit: "bytes"|"count", color}):
     * an icicle (root on top) that zooms into a clicked frame, with a
     * search box that highlights matching frames and a reset button.
     * Labels are HTML text inside the SVG (find and copy work). */
    MT.flame = function (parent, tree, opt) {
        opt = opt || {};
        var fmt = opt.unit === "count" ? MT.count : MT.bytes;
        var box = MT.el("div", { class: "mt-flame", id: opt.id });
        var search = MT.el("input", { type: "search", class: "mt-search", placeholder: "search frames (highlights matches)",
                                      "aria-label": "search frames" });
        var reset = MT.el("button", { class: "mt-reset", text: "reset zoom" });
        var info = MT.el("span", { class: "mt-flame-info" });
        var graph = MT.el("div", { class: "mt-flame-graph" });
        box.appendChild(MT.el("div", { class: "mt-flame-tools" }, [search, reset, info]));
        box.appendChild(graph);
        parent.appendChild(box);
        var width = Math.max(400, graph.clientWidth || parent.clientWidth || 960);
        var chart = flamegraph()
            .width(width).cellHeight(20).inverted(true).selfValue(true).sort(true).minFrameSize(2)
            .transitionDuration(0).tooltip(false) /* drawn at once: the page is ready with its labels */
            .setSearchMatch(function (d, term) {
                return !!term && String(d.data.name).toLowerCase().indexOf(term.toLowerCase()) >= 0;
            })
            .label(function (d) {
                var s = d.data.name + " — " + fmt(d.value) + " (" + MT.percent(d.value, rootValue) + ")";
                if (opt.differential) s += ", change " + MT.signed(d.delta, fmt);
                return s;
            })
            .setSearchHandler(function (matches, sum, total) {
                info.textContent = search.value ? matches.length + " frames match: " + fmt(sum) + " of " + fmt(total) : "";
            })
            .setDetailsHandler(function (text) { if (text) info.textContent = text; });
        if (opt.color) chart.setColorMapper(opt.color);
        if (opt.differential) chart.computeDelta(true);
        var rootValue = 0;
        d3.select(graph).datum(tree).call(chart);
        var svg = d3.select(graph).select("svg");
        rootValue = svg.selectAll("g.frame").data().reduce(function (m, d) { return d.depth === 0 ? d.value : m; }, 0);
        box.dataset.rootValue = String(rootValue);
        chart.update(); /* labels with the shares of the root */
        chart.transitionDuration(250); /* zooms from here on are animated */
        function marks() {
            svg.selectAll("g.frame").classed("mt-match", function (d) { return !!d.highlight; });
        }
        var timer;
        search.addEventListener("input", function () {
            clearTimeout(timer);
            timer = setTimeout(function () {
                if (search.value) chart.search(search.value); else chart.clear();
                marks();
            }, 120);
        });
        chart.onClick(function () { setTimeout(marks, 0); });
        reset.addEventListener("click", function () { chart.resetZoom(); setTimeout(marks, 0); });
        return chart;
    };

    /* --- bar charts (d3) ------------------------------------------------ */

    /* bars(parent, items, {id, series: [{key, label, cls}], name: it => s,
     * unit}): a horizontal bar per item and series, labels and values as
     * SVG text. Values may be negative (a diff): bars grow from zero. */
    MT.bars = function (parent, items, opt) {
        var series = opt.series, fmt = opt.unit === "count" ? MT.count : MT.bytes;
        var box = MT.el("div", { class: "mt-bars", id: opt.id });
        parent.appendChild(box);
        if (!items.length) {
            box.appendChild(MT.el("p", { class: "mt-note", text: opt.empty || "nothing to show" }));
            return box;
        }
        var width = Math.max(480, box.clientWidth || 900), labelW = Math.min(300, width * 0.3), valueW = 90;
        var band = 16, gap = 10, rowH = series.length * band + gap;
        var vals = [0];
        items.forEach(function (it) { series.forEach(function (s) { vals.push(it[s.key] || 0); }); });
        /* Ticks at round numbers of the unit shown (KB, MB...), not of bytes. */
        var ext = d3.extent(vals), unit = 1, nticks = Math.max(2, Math.floor((width - labelW) / 110));
        if (opt.unit !== "count") while (Math.max(-ext[0], ext[1]) / unit >= 1024) unit *= 1024;
        var inUnits = d3.scaleLinear().domain([ext[0] / unit, ext[1] / unit]).nice(nticks);
        var dom = inUnits.domain().map(function (v) { return v * unit; });
        /* A small change down next to large ones up: no whole tick step of room for it. */
        if (ext[0] < 0 && -ext[0] < 0.05 * ext[1]) dom[0] = ext[0];
        var x = d3.scaleLinear().domain(dom).range([labelW, width - valueW]);
        var ticks = inUnits.ticks(nticks).map(function (v) { return v * unit; }).filter(function (v) { return v >= dom[0]; });
        var svg = d3.select(box).append("svg").attr("width", width).attr("height", items.length * rowH + 40)
            .attr("role", "img").attr("aria-label", opt.title || "bar chart");
        var row = svg.selectAll("g.mt-row").data(items).join("g").attr("class", "mt-row")
            .attr("transform", function (d, i) { return "translate(0," + (i * rowH + 4) + ")"; });
        row.append("text").attr("class", "mt-bar-label").attr("x", labelW - 8).attr("y", rowH / 2 - 2)
            .attr("text-anchor", "end").text(function (d) { return opt.name(d); })
            .append("title").text(function (d) { return opt.name(d); });
        series.forEach(function (s, k) {
            var g = row.append("g")
                .attr("class", function (d) { var v = d[s.key] || 0; return "mt-bar " + (opt.signed ? (v > 0 ? "up" : "down") : s.cls || ""); })
                .attr("data-name", function (d) { return opt.name(d); })
                .attr("data-series", s.key)
                .attr("data-value", function (d) { return String(d[s.key] || 0); });
            g.append("rect").attr("y", k * band).attr("height", band - 2)
                .attr("x", function (d) { return Math.min(x(0), x(d[s.key] || 0)); })
                .attr("width", function (d) { return Math.max(1, Math.abs(x(d[s.key] || 0) - x(0))); })
                .append("title").text(function (d) { return s.label + ": " + MT.count(d[s.key] || 0) + (opt.unit === "count" ? "" : " bytes"); });
            g.append("text").attr("class", "mt-bar-value").attr("y", k * band + band / 2 + 2)
                .attr("x", function (d) { return Math.max(x(0), x(d[s.key] || 0)) + 4; })
                .text(function (d) { var v = d[s.key] || 0; return opt.signed ? MT.signed(v, fmt) : fmt(v); });
        });
        svg.append("g").attr("class", "mt-axis").attr("transform", "translate(0," + (items.length * rowH + 6) + ")")
            .call(d3.axisBottom(x).tickValues(ticks).tickFormat(function (v) { return fmt(v); }));
        if (series.length > 1) {
            box.appendChild(MT.el("div", { class: "mt-legend" }, series.map(function (s) {
                return MT.el("span", { class: "mt-key " + (s.cls || "") }, [MT.el("i"), s.label]);
            })));
        }
        return box;
    };

    /* --- the page ------------------------------------------------------- */

    function header(env) {
        var h = MT.el("header", { class: "mt-header" }, [MT.el("h1", { text: env.title })]);
        var meta = MT.el("dl", { class: "mt-meta" });
        function row(k, v) { meta.appendChild(MT.el("dt", { text: k })); meta.appendChild(MT.el("dd", {}, [v])); }
        row("kind", env.kind);
        (env.inputs || []).forEach(function (p, i) {
            row(env.inputs.length > 1 ? (i ? "new" : "base") : "input", MT.el("code", { text: p }));
        });
        row("sizes", "1 KB = 1,024 bytes; exact byte counts under each figure and in the tables");
        h.appendChild(meta);
        return h;
    }

    /* The data as text, for a kind without a page file. */
    function fallback(root, env) {
        MT.section(root, "Data", "This memtrail has no drawing for '" + env.kind + "' pages; the report's JSON follows.");
        root.appendChild(MT.el("pre", { id: "mt-json", text: JSON.stringify(env.data, null, 2) }));
    }

    MT.start = function () {
        var env = JSON.parse(document.getElementById("mt-data").textContent);
        MT.env = env;
        var root = document.getElementById("mt-root");
        root.appendChild(header(env));
        var main = MT.el("main", { id: "mt-page", class: "mt-kind-" + env.kind });
        root.appendChild(main);
        var about = document.getElementById("mt-about");
        if (about) root.appendChild(MT.el("footer", {}, [about]));
        try {
            (MT.pages[env.kind] || fallback)(main, env);
        } catch (e) {
            document.body.dataset.error = "1";
            main.appendChild(MT.el("pre", { class: "mt-error", text: "This page failed to draw: " + e + "\n" + (e.stack || "") }));
            console.error(e);
        }
        document.body.dataset.ready = "1";
    };
    return MT;
})();
