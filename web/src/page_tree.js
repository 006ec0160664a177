/* page_tree.js — the process tree of a directory of reports (`memtrail
 * report DIR --json`): one row per process, each child under its parent,
 * with its live and peak bytes and RSS, the totals, and the processes as
 * bars.
 *
 * Test hooks: .mt-card[data-key] processes, live_bytes, peak_bytes,
 * rss_bytes; #mt-tree (rows tr[data-name] = pid, in tree order until a
 * heading is clicked); #mt-tree-bars (g.mt-bar[data-name][data-series]). */
MT.pages.tree = function (root, env) {
    var j = env.data, procs = j.processes || [], t = j.total || {};
    var label = function (p) {
        var exe = p.exe ? p.exe.split("/").pop() : "?";
        return exe + " (" + p.pid + ")";
    };
    MT.section(root, "Totals", "The sums over every process of the tree. Live: allocated and not freed when each process's " +
        "report was written; peak: each process's own peak, added up (they need not have happened at once).");
    MT.cards(root, [
        { key: "processes", label: "processes", value: t.processes, unit: "count" },
        { key: "live_bytes", label: "live", value: t.live_bytes },
        { key: "peak_bytes", label: "peaks, added", value: t.peak_bytes },
        { key: "rss_bytes", label: "RSS, added", value: t.rss_bytes, note: "peak RSS added: " + MT.bytes(t.peak_rss_bytes || 0) },
    ]);
    var s = MT.section(root, "Processes", "Each child under its parent (by ppid), as the processes started. Click a heading to sort; type to filter.");
    MT.table(s, { id: "mt-tree", rows: procs, sort: null, name: function (p) { return String(p.pid); }, columns: [
        { key: "process", label: "process", unit: "text", value: function (p) {
            return (p.depth ? "\u00a0\u00a0".repeat(p.depth - 1) + "└─ " : "") + label(p); } },
        { key: "pid", label: "pid", unit: "id" },
        { key: "ppid", label: "ppid", unit: "id" },
        { key: "live_bytes", label: "live", unit: "bytes" },
        { key: "live_count", label: "live blocks", unit: "count" },
        { key: "peak_bytes", label: "peak", unit: "bytes" },
        { key: "allocs", label: "allocs", unit: "count" },
        { key: "rss_bytes", label: "RSS", unit: "bytes" },
        { key: "duration", label: "ran for", unit: "text", value: function (p) { return p.end_ns && p.start_ns ? MT.seconds(p.end_ns - p.start_ns) : "—"; } },
        { key: "reason", label: "written at", unit: "text", value: function (p) { return (p.reason || "") + (p.complete === false ? " (cut short)" : ""); } },
        { key: "cmdline", label: "command line", unit: "text", value: function (p) { return (p.cmdline || []).join(" "); } },
        { key: "file", label: "report", unit: "text" },
    ] });
    s = MT.section(root, "Live and peak bytes by process", "In tree order (RSS, in megabytes where these are kilobytes, is in the table).");
    MT.bars(s, procs, { id: "mt-tree-bars", name: label,
                        series: [{ key: "live_bytes", label: "live" }, { key: "peak_bytes", label: "peak", cls: "peak" }] });
};
