/* page_info.js — `memtrail html REPORT` for memory-info and request-span
 * data, as `memtrail info --json` gives it (docs/info.md): memory
 * management's share of the run, the last event of each kind on a timeline
 * of the run (d3), each kind's last snapshot as a table, and the request
 * spans' latency percentile bands with memory's share of them (table and
 * d3 bars), overall and by span name.
 *
 * Test hooks (tests/html), besides common.js's: cards .mt-card[data-key]
 * (events, alloc_time_ns, map_time_ns, requests); #mt-info-events (svg;
 * circle.mt-event[data-kind][data-run-time-ns] for each kind with events);
 * table #mt-info-kinds (a row per kind, tr[data-name]); for the spans (and
 * #mt-spans-name-N for each name of by_name): #mt-spans-cards,
 * #mt-spans-share[data-memory][data-all], table #mt-spans-bands (a row per
 * band, slowest first); #mt-spans-bars (svg, rect.mt-bar[data-key]
 * [data-value], three per band). */
(function () {
    "use strict";

    var COLORS = ["#2f6fba", "#e08a1e", "#6a9e3a"];

    function seconds(ns) {
        return ns >= 1e9 ? (ns / 1e9).toFixed(3) + " s" : ns >= 1e6 ? (ns / 1e6).toFixed(3) + " ms" :
            ns >= 1e3 ? (ns / 1e3).toFixed(3) + " µs" : ns + " ns";
    }

    function eventsTimeline(box, d) {
        var kinds = d.kinds.filter(function (k) { return k.kind !== "any"; });
        var end = d.memory_time ? d.memory_time.run_time_ns : 0;
        kinds.forEach(function (k) { end = Math.max(end, k.last.run_time_ns); });
        var w = Math.max(480, box.clientWidth || 960), rowH = 34, m = {top: 10, right: 30, bottom: 40, left: 80};
        var h = m.top + m.bottom + rowH * Math.max(kinds.length, 1);
        var svg = d3.select(box).append("svg").attr("id", "mt-info-events").attr("width", w).attr("height", h);
        var x = d3.scaleLinear().domain([0, end || 1]).range([m.left, w - m.right]);
        var y = d3.scaleBand().domain(kinds.map(function (k) { return k.kind; })).range([m.top, h - m.bottom]).padding(0.3);
        svg.append("g").attr("transform", "translate(0," + (h - m.bottom) + ")")
            .call(d3.axisBottom(x).ticks(8).tickFormat(function (t) { return seconds(t); }));
        svg.append("text").attr("x", (m.left + w - m.right) / 2).attr("y", h - 6).attr("text-anchor", "middle")
            .attr("class", "mt-axis-label").text("time since the program started (the last event of each kind)");
        svg.append("g").attr("transform", "translate(" + m.left + ",0)").call(d3.axisLeft(y));
        var rows = svg.append("g").selectAll("g").data(kinds).join("g");
        rows.append("line").attr("x1", m.left).attr("x2", w - m.right)
            .attr("y1", function (k) { return y(k.kind) + y.bandwidth() / 2; })
            .attr("y2", function (k) { return y(k.kind) + y.bandwidth() / 2; }).attr("class", "mt-lane");
        var ev = rows.filter(function (k) { return k.count > 0; });
        ev.append("circle").attr("class", "mt-event").attr("r", 6)
            .attr("data-kind", function (k) { return k.kind; })
            .attr("data-run-time-ns", function (k) { return k.last.run_time_ns; })
            .attr("cx", function (k) { return x(k.last.run_time_ns); })
            .attr("cy", function (k) { return y(k.kind) + y.bandwidth() / 2; })
            .append("title").text(function (k) {
                return k.kind + " #" + k.last.index + " at " + seconds(k.last.run_time_ns) + ": live " +
                    MT.bytes(k.last.live_before_bytes) + " → " + MT.bytes(k.last.live_after_bytes) + ", RSS " + MT.bytes(k.last.rss_bytes);
            });
        ev.append("text").attr("class", "mt-event-label")
            .attr("x", function (k) { return Math.min(x(k.last.run_time_ns) + 10, w - m.right - 200); })
            .attr("y", function (k) { return y(k.kind) + y.bandwidth() / 2 - 8; })
            .text(function (k) {
                return k.count + " event" + (k.count === 1 ? "" : "s") + "; the last #" + k.last.index + ": live " +
                    MT.bytes(k.last.live_before_bytes) + " → " + MT.bytes(k.last.live_after_bytes);
            });
        rows.filter(function (k) { return k.count === 0; }).append("text").attr("class", "mt-note")
            .attr("x", m.left + 6).attr("y", function (k) { return y(k.kind) + y.bandwidth() / 2 - 6; }).text("none");
    }

    var SNAP = [["count", "events", "n"], ["index", "last #", "n"], ["run_time_ns", "at (ns)", "t"],
        ["live_before_bytes", "live before", "b"], ["live_after_bytes", "live after", "b"],
        ["fragmentation_after_bytes", "free in allocator", "b"], ["rss_bytes", "RSS", "b"],
        ["committed_bytes", "committed", "b"], ["minor_faults", "minor faults", "n"]];

    function fmt(how, v) {
        return v === null || v === undefined ? "–" : how === "b" ? MT.bytes(v) : how === "t" ? seconds(v) :
            how === "p" ? Number(v).toFixed(2) + "%" : String(Math.round(v * 100) / 100);
    }

    function kindsTable(box, d) {
        var rows = d.kinds.map(function (k) {
            var r = {kind: k.kind, count: k.count, categories: k.last.categories.filter(function (c) { return c.live_bytes; })
                .map(function (c) { return c.name + " " + MT.bytes(c.live_bytes); }).join(", ") || "–"};
            SNAP.forEach(function (s) { if (s[0] !== "count") r[s[0]] = k.last[s[0]]; });
            return r;
        });
        MT.table(box, {id: "mt-info-kinds", rows: rows, sort: "count", name: function (r) { return r.kind; },
            columns: [{key: "kind", label: "kind", unit: "text"}].concat(SNAP.map(function (s) {
                return {key: s[0], label: s[1], unit: s[2] === "b" ? "bytes" : "count"};
            }), [{key: "categories", label: "live by category", unit: "text"}])});
    }

    var BAND = [["requests", "requests", "n"], ["affected_percent", "affected", "p"],
        ["memory_share_percent", "memory share of affected", "p"], ["all_memory_share_percent", "memory share of all", "p"],
        ["multiple_events", "more than one event", "n"]];

    function bandLabel(b) {
        return "p" + b.percentile_from + "–p" + b.percentile;
    }

    function bandsTable(box, id, view) {
        var rows = view.by_percentile.map(function (b) {
            var r = {band: bandLabel(b) + (b.latency_min_ns === null ? "" :
                ": " + seconds(b.latency_min_ns) + " to " + seconds(b.latency_max_ns)), from: b.percentile_from};
            BAND.forEach(function (s) { r[s[0]] = Math.round(b[s[0]] * 1000) / 1000; });
            return r;
        });
        MT.table(box, {id: id, rows: rows, sort: "from", name: function (r) { return r.band; },
            columns: [{key: "from", label: "from percentile", unit: "count"}, {key: "band", label: "band: latency", unit: "text"}].concat(
                BAND.map(function (s) { return {key: s[0], label: s[1] + (s[2] === "p" ? " (%)" : s[2] === "t" ? " (ns)" : ""), unit: "count"}; }))});
    }

    /* Per band: the share of requests affected, memory's share of the
     * affected ones' time and of all requests' time (grouped bars). */
    function bandsBars(box, view) {
        var keys = [["affected_percent", "affected requests"], ["memory_share_percent", "memory share of affected"],
            ["all_memory_share_percent", "memory share of all"]];
        var bands = view.by_percentile, w = Math.max(480, box.clientWidth || 960), h = 260, m = {top: 20, right: 10, bottom: 50, left: 50};
        var svg = d3.select(box).append("svg").attr("id", "mt-spans-bars").attr("width", w).attr("height", h);
        var x0 = d3.scaleBand().domain(bands.map(bandLabel)).range([m.left, w - m.right - 230]).padding(0.2);
        var x1 = d3.scaleBand().domain(keys.map(function (k) { return k[0]; })).range([0, x0.bandwidth()]).padding(0.05);
        var y = d3.scaleLinear().domain([0, 100]).range([h - m.bottom, m.top]);
        svg.append("g").attr("transform", "translate(0," + (h - m.bottom) + ")").call(d3.axisBottom(x0));
        svg.append("g").attr("transform", "translate(" + m.left + ",0)").call(d3.axisLeft(y).ticks(5).tickFormat(function (t) { return t + "%"; }));
        svg.append("text").attr("x", (m.left + w - m.right - 230) / 2).attr("y", h - 8).attr("text-anchor", "middle")
            .attr("class", "mt-axis-label").text("latency percentile bands");
        var g = svg.append("g").selectAll("g").data(bands).join("g")
            .attr("transform", function (b) { return "translate(" + x0(bandLabel(b)) + ",0)"; });
        g.selectAll("rect").data(function (b) { return keys.map(function (k) { return {key: k[0], label: k[1], v: b[k[0]] || 0, band: bandLabel(b)}; }); })
            .join("rect").attr("class", "mt-bar")
            .attr("data-key", function (e) { return e.key; }).attr("data-value", function (e) { return e.v; })
            .attr("x", function (e) { return x1(e.key); }).attr("width", x1.bandwidth())
            .attr("y", function (e) { return y(e.v); }).attr("height", function (e) { return y(0) - y(e.v); })
            .attr("fill", function (e, i) { return COLORS[i]; })
            .append("title").text(function (e) { return e.band + ", " + e.label + ": " + e.v.toFixed(3) + "%"; });
        var legend = svg.append("g").attr("transform", "translate(" + (w - m.right - 215) + "," + m.top + ")");
        keys.forEach(function (k, i) {
            legend.append("rect").attr("y", i * 20).attr("width", 12).attr("height", 12).attr("fill", COLORS[i]);
            legend.append("text").attr("x", 18).attr("y", i * 20 + 10).text(k[1]);
        });
    }

    function spansView(box, view, id) {
        var c = MT.cards(box, [
            {key: "requests", label: "requests", value: view.requests, unit: "count"},
            {key: "affected", label: "affected by memory events", value: view.affected, unit: "count",
                note: fmt("p", view.affected_percent) + " of the requests"},
            {key: "multiple_events", label: "by more than one event", value: view.multiple_events, unit: "count"}]);
        c.id = id + "-cards";
        box.appendChild(MT.el("p", {"class": "mt-note", id: id + "-share", data: {memory: String(view.memory_share_percent),
            all: String(view.all_memory_share_percent)},
            text: "Memory management's share: " + fmt("p", view.memory_share_percent) + " of the affected requests' time, " +
                fmt("p", view.all_memory_share_percent) + " of all requests' time."}));
        bandsTable(box, id + "-bands", view);
    }

    MT.pages.info = function (root, env) {
        var d = env.data, mt = d.memory_time;
        root.appendChild(MT.el("p", {id: "mt-info-process", text: "Process " + d.pid + ": " + (d.cmdline || []).join(" ") +
            " (report written at " + (d.reason || "?") + ")" + (mt ? "; memory management took " + fmt("p", mt.memory_time_percent) +
            " of the run's " + seconds(mt.run_time_ns) + " (allocator " + seconds(mt.alloc_time_ns) + ", mapping calls " +
            seconds(mt.map_time_ns) + ")." : ".")}));
        MT.cards(root, [
            {key: "events", label: "memory events", value: d.kinds[0].count, unit: "count"},
            {key: "alloc_time_ns", label: "allocator time (ns)", value: mt ? mt.alloc_time_ns : 0, unit: "count"},
            {key: "map_time_ns", label: "mapping calls' time (ns)", value: mt ? mt.map_time_ns : 0, unit: "count"},
            {key: "requests", label: "requests (spans)", value: d.spans ? d.spans.requests : 0, unit: "count"}]);
        if (!d.complete)
            root.appendChild(MT.el("p", {"class": "mt-error", text: "The report is incomplete: the figures cover what was written."}));
        var ebox = MT.section(root, "Memory events", "The last event of each kind on the run's timeline (the report keeps " +
            "each kind's count and its last snapshot), then each last snapshot.", "mt-info-events-box");
        eventsTimeline(ebox, d);
        kindsTable(ebox, d);
        var sbox = MT.section(root, "Request spans: latency percentiles and memory's share", "If memory's share of the slow " +
            "bands is low, look elsewhere for the tail latency; if it is high, memory is where to work.", "mt-spans-box");
        if (!d.spans || !d.spans.requests) {
            sbox.appendChild(MT.el("p", {"class": "mt-note", text: "No request spans in this report (mt_span_begin/mt_span_end)."}));
        } else {
            spansView(sbox, d.spans, "mt-spans");
            bandsBars(sbox, d.spans);
            (d.spans.by_name || []).forEach(function (n, i) {
                sbox.appendChild(MT.el("h3", {text: "Span \u201c" + n.name + "\u201d"}));
                spansView(sbox, n, "mt-spans-name-" + i);
            });
        }
    };
})();
