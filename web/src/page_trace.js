/* page_trace.js — `memtrail html TRACE`: the analysis of a trace, drawn
 * from exactly what `memtrail analyze --json` prints (docs/trace-analysis.md):
 * the totals, the timeline of live bytes by category with the peak marked
 * (uPlot), the call tree at the peak (peak.tree) as a flame graph (click
 * zooms, search highlights, reset), leaks, temporaries and the hottest
 * stacks as tables, and the size histogram (d3 bars).
 *
 * Test hooks (tests/html), besides common.js's: cards .mt-card[data-key]
 * (events, allocs, frees, reallocs, allocated_bytes, live_bytes,
 * peak_bytes, peak_count, temporary_count); #mt-top-site[data-function];
 * MT.charts.timeline, the uPlot instance (data[0]: the buckets' times);
 * #mt-peak-flame (.mt-flame at the peak); tables #mt-leaks, #mt-temporary,
 * #mt-hot-count, #mt-hot-bytes; #mt-histogram (.mt-bars, one g.mt-bar per
 * bucket). */
(function () {
    "use strict";

    var COLORS = ["#2f6fba", "#e08a1e", "#6a9e3a", "#8d5bb5", "#c0392b", "#17a2b8", "#7f6a3a", "#d63384"];

    function frameText(f) {
        var where = f.file ? " (" + f.file.replace(/^.*\//, "") + (f.line ? ":" + f.line : "") + ")" : "";
        return MT.frameName(f) + (f.inlined ? " [inlined]" : "") + where;
    }

    function seconds(ns) {
        return ns >= 1e9 ? (ns / 1e9).toFixed(3) + " s" : ns >= 1e6 ? (ns / 1e6).toFixed(3) + " ms" :
            ns >= 1e3 ? (ns / 1e3).toFixed(3) + " us" : ns + " ns";
    }

    /* The timeline: live bytes at each bucket's end, the most within it,
     * and each category's at the bucket's end; a dashed line at the peak. */
    function timeline(box, d) {
        var tl = d.timeline, b = tl.buckets;
        var bytes = function (p, v) { return v == null ? "" : MT.bytes(v); };
        /* milliseconds for a short trace, so the axis' ticks read as round numbers */
        var last = b.length ? b[b.length - 1].time_ns + tl.bucket_ns : 0;
        var unit = last < 10e9 ? 1e6 : 1e9, unitName = unit === 1e6 ? "ms" : "s";
        var data = [b.map(function (x) { return x.time_ns / unit; }),
            b.map(function (x) { return x.live_bytes; }), b.map(function (x) { return x.max_live_bytes; })];
        var series = [{label: unitName},
            {label: "live (bucket's end)", stroke: "#1d232a", width: 2, value: bytes},
            {label: "most in the bucket", stroke: "#c0392b", width: 1, dash: [4, 3], value: bytes}];
        (tl.categories || []).forEach(function (name, k) {
            data.push(b.map(function (x) { return x.by_category[k]; }));
            series.push({label: name, stroke: COLORS[k % COLORS.length], width: 1.5,
                fill: COLORS[k % COLORS.length] + "22", value: bytes});
        });
        var peakX = d.peak ? d.peak.time_ns / unit : null;
        var graph = MT.el("div", {id: "mt-timeline"});
        box.appendChild(graph);
        var plot = new uPlot({
            width: Math.max(480, box.clientWidth || 960), height: 300, series: series,
            scales: {x: {time: false}},
            axes: [{label: (unitName === "ms" ? "milliseconds" : "seconds") + " since the trace's start"},
                {size: 80, values: function (p, vals) { return vals.map(MT.bytes); }}],
            hooks: {draw: [function (u) {
                if (peakX == null)
                    return;
                var ctx = u.ctx, x = u.valToPos(peakX, "x", true);
                ctx.save();
                ctx.strokeStyle = "#c0392b";
                ctx.setLineDash([6, 4]);
                ctx.lineWidth = 2;
                ctx.beginPath();
                ctx.moveTo(x, u.bbox.top);
                ctx.lineTo(x, u.bbox.top + u.bbox.height);
                ctx.stroke();
                ctx.fillStyle = "#c0392b";
                ctx.font = "bold " + Math.round(12 * devicePixelRatio) + "px sans-serif";
                ctx.fillText("peak " + MT.bytes(d.peak.live_bytes), x + 6, u.bbox.top + 14 * devicePixelRatio);
                ctx.restore();
            }]}
        }, data, graph);
        box.appendChild(MT.el("p", {"class": "mt-note", id: "mt-timeline-note",
            text: !b.length ? "No events." : b.length + " buckets of " + seconds(tl.bucket_ns) + "." + (peakX == null ? "" :
                " Dashed red line: the peak, " + MT.bytes(d.peak.live_bytes) + ", first reached at " + seconds(d.peak.time_ns) + ".")}));
        return plot;
    }

    /* peak.tree (flat, each value the bytes under the node) as the nested
     * tree MT.flame draws, each value the node's own bytes. */
    function nested(tree) {
        var nodes = tree.map(function (n) { return {name: n.name, value: n.value, children: []}; });
        tree.forEach(function (n, i) {
            if (n.parent !== null) {
                nodes[n.parent].children.push(nodes[i]);
                nodes[n.parent].value -= n.value;
            }
        });
        return nodes[0];
    }

    /* A table of stacks: figures, category, the stack innermost first. */
    function stackTable(parent, id, list, columns) {
        var rows = list.stacks.map(function (s, i) {
            var r = {rank: i + 1, category: s.category, top: s.frames.length ? frameText(s.frames[0]) : "(no stack)",
                stack: s.frames.map(frameText).join(" ← ") || "(no stack)"};
            columns.forEach(function (c) { r[c.key] = s[c.key]; });
            return r;
        });
        MT.table(parent, {id: id, rows: rows, sort: columns[0].key, name: function (r) { return r.top; },
            columns: [{key: "rank", label: "#", unit: "count"}].concat(columns, [
                {key: "category", label: "category", unit: "text"},
                {key: "stack", label: "stack (innermost first)", unit: "text"}])});
        if (list.stacks_total > list.stacks.length)
            parent.appendChild(MT.el("p", {"class": "mt-note", text: "The first " + list.stacks.length + " of " +
                list.stacks_total + " stacks (memtrail analyze --top N shows more)."}));
    }

    function histogram(box, d) {
        var items = d.histogram.map(function (b) {
            return {name: b.min_bytes === b.max_bytes ? b.min_bytes + " bytes" :
                    MT.bytes(b.min_bytes) + " – " + MT.bytes(b.max_bytes),
                count: b.count, allocated_bytes: b.allocated_bytes};
        });
        MT.bars(box, items, {id: "mt-histogram", unit: "count", title: "sizes requested",
            name: function (it) { return it.name; },
            series: [{key: "count", label: "requests"}], empty: "no allocations"});
    }

    MT.pages.trace = function (root, env) {
        var d = env.data;
        MT.charts = MT.charts || {};
        var cards = [
            {key: "events", label: "events", value: d.events, unit: "count"},
            {key: "allocs", label: "allocations", value: d.allocs, unit: "count"},
            {key: "frees", label: "frees", value: d.frees, unit: "count"},
            {key: "reallocs", label: "reallocs", value: d.reallocs, unit: "count"},
            {key: "allocated_bytes", label: "allocated", value: d.allocated_bytes},
            {key: "live_bytes", label: "live at the end", value: d.live_bytes, note: MT.count(d.live_count) + " blocks never freed"}];
        if (d.peak) {
            cards.push({key: "peak_bytes", label: "peak", value: d.peak.live_bytes,
                note: "first reached at " + seconds(d.peak.time_ns)});
            cards.push({key: "peak_count", label: "blocks at the peak", value: d.peak.live_count, unit: "count"});
        }
        if (d.temporary) /* blocks, out of the allocations card's blocks (a realloc resizes a block) */
            cards.push({key: "temporary_count", label: "temporary allocations", value: d.temporary.temporary_count,
                unit: "count", note: (d.allocs ? (100 * d.temporary.temporary_count / d.allocs).toFixed(1) : "0.0") +
                    "% of the " + MT.count(d.allocs) + " allocations, " + MT.bytes(d.temporary.temporary_bytes)});
        MT.cards(root, cards);
        var top = d.peak && d.peak.stacks.length ? d.peak.stacks[0] : null;
        if (top && top.frames.length)
            root.appendChild(MT.el("p", {id: "mt-top-site", data: {"function": MT.frameName(top.frames[0]), value: String(top.live_bytes)}}, [
                "Largest at the peak: ", MT.el("code", {text: frameText(top.frames[0])}),
                ", " + MT.bytes(top.live_bytes) + " in " + MT.count(top.live_count) + " blocks (" + top.category + ")"]));
        if (d.caveats) {
            var cv = d.caveats;
            /* events_lost null: no end record, so how many were lost is unknown (not 0). */
            root.appendChild(MT.el("p", {id: "mt-caveats", "class": "mt-error", text: "CAUTION: " + (cv.incomplete ? "the trace is incomplete; " : "") +
                (cv.began_late ? "the trace began after the program had run (on demand, or in a fork child without all its parent's blocks): blocks allocated before it are in no figure; " : "") +
                (cv.events_lost === null || cv.events_lost === undefined ? "the number of events lost is unknown, " : MT.count(cv.events_lost) + " events lost, ") +
                MT.count(cv.blocks_unknown) + " blocks the trace does not hold: " +
                cv.figures.map(function (f) { return f.figure; }).join(", ") + " may be off (memtrail analyze says by how much)."}));
        }
        if (!d.complete && d.error)
            root.appendChild(MT.el("p", {"class": "mt-error", text: "Incomplete: " + d.error}));

        if (d.timeline)
            MT.charts.timeline = timeline(MT.section(root, "Live bytes over time",
                "Each category's live bytes, their total at each bucket's end and the most within each bucket.", "mt-timeline-box"), d);
        if (d.peak) {
            var fbox = MT.section(root, "Stacks live at the peak",
                "Every stack live at the peak, outermost frame on top; a frame's width is the bytes live under it then. " +
                "Click a frame to zoom to it.", "mt-peak-box");
            if (d.peak.tree && d.peak.tree.length && d.peak.live_bytes)
                MT.charts.flame = MT.flame(fbox, nested(d.peak.tree), {id: "mt-peak-flame"});
            else
                fbox.appendChild(MT.el("p", {"class": "mt-note", text: "No bytes live at the peak."}));
        }
        var figs = function (cols) {
            return cols.map(function (c) { return {key: c[0], label: c[1], unit: c[2]}; });
        };
        if (d.leaks)
            stackTable(MT.section(root, "Leaks: " + MT.bytes(d.leaks.live_bytes) + " in " + MT.count(d.leaks.live_count) +
                " blocks never freed", null, "mt-leaks-box"), "mt-leaks", d.leaks,
                figs([["live_bytes", "bytes", "bytes"], ["live_count", "blocks", "count"]]));
        if (d.temporary)
            stackTable(MT.section(root, "Temporary allocations: " + MT.count(d.temporary.temporary_count) + " (" +
                MT.bytes(d.temporary.temporary_bytes) + ")", "Blocks freed by the very next malloc-family call of the thread that allocated them " +
                "(a realloc of the block in between resizes it: still one block), out of the blocks allocated at each stack.",
                "mt-temporary-box"), "mt-temporary", d.temporary,
                figs([["temporary_count", "temporary", "count"], ["allocs", "of allocations", "count"], ["temporary_bytes", "bytes", "bytes"]]));
        if (d.hot) {
            var hbox = MT.section(root, "Hottest stacks", null, "mt-hot-box");
            var cols = figs([["allocs", "allocations", "count"], ["reallocs", "reallocs", "count"], ["allocated_bytes", "allocated", "bytes"]]);
            hbox.appendChild(MT.el("h3", {text: "by number of allocations"}));
            stackTable(hbox, "mt-hot-count", d.hot.by_count, cols);
            hbox.appendChild(MT.el("h3", {text: "by bytes allocated"}));
            stackTable(hbox, "mt-hot-bytes", d.hot.by_bytes, [cols[2], cols[0], cols[1]]);
        }
        if (d.histogram)
            histogram(MT.section(root, "Sizes requested", "Allocations and reallocs by the size they asked for, in power-of-two buckets.",
                "mt-histogram-box"), d);
    };
})();
