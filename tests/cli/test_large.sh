#!/usr/bin/env bash
# Large reports read right: a detail report of 200,000 sites, a summary of
# 200,000 categories, their diffs, and a process tree of 3,000 reports in
# one chain of parents. The files are written by python3 following
# docs/report-format.md, which keeps the truth (every total, every delta,
# every depth) as it writes them; memtrail's JSON is compared with it.
# Every CLI call runs the ASan+UBSan build under `timeout 120`: a reader
# that went back to comparing every line with every other (hours on these
# inputs) is caught as a hang. No timing is asserted.
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail large-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }
LIMIT=120
N=200000

python3 - "$T" "$N" <<'EOF'
import json, os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(14)
head = "memtrail-report 1\npid %d\nppid 1\nmode %s\nstart_ns 1000\nend_ns 2000\nreason exit\n"
truth = {}

# Detail: n sites with IDs in a shuffled order, 3 categories, stacks over 2
# modules; one site in 1000 has the same stack as another (merged by
# grouping); the totals of each category are kept.
ids = list(range(1, n + 1))
rnd.shuffle(ids)
cats = ["malloc", "parser", "io"]
live_by_cat = {c: 0 for c in cats}
allocs_by_cat = {c: 0 for c in cats}
with open(os.path.join(d, "sites.mtr"), "w") as f:
    f.write(head % (7, "detail"))
    f.write("category malloc kind=malloc live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0\n")
    f.write("total live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0\n")
    f.write("stack_depth 8\nunwinder cfi\n")
    f.write("module 1 bias=0x400000 start=0x400000 end=0x500000 buildid=- path=/nonexistent/app\n")
    f.write("module 2 bias=0x7f0000000000 start=0x7f0000000000 end=0x7f0000100000 buildid=- path=/nonexistent/lib\n")
    for k, i in enumerate(ids):
        j = i - 1 if i % 1000 == 0 else i      # the same stack and category as site i - 1
        c = cats[j % 3]
        live, allocs = (i * 7919) % 65536, 1 + i % 97
        live_by_cat[c] += live
        allocs_by_cat[c] += allocs
        frames = ",".join("0x%x" % (0x400000 + ((j >> (4 * b)) & 0xf) * 0x100 + b * 0x1000) for b in range(5))
        frames += ",0x7f0000000%03x" % (j % 4096)
        f.write("site %d category=%s live_bytes=%d live_count=1 peak_bytes=%d allocs=%d frees=%d reallocs=0 "
                "allocated_bytes=%d frames=%s\n" % (i, c, live, live, allocs, allocs - 1, allocs * 64, frames))
    f.write("sites count=%d dropped=0\nend\n" % n)
truth["sites"] = {"n": n, "live": live_by_cat, "allocs": allocs_by_cat, "merged": n // 1000}

# The same report with one site ID given twice, far apart: the reader
# names the second line.
lines = open(os.path.join(d, "sites.mtr")).read().split("\n")
first = next(k for k, l in enumerate(lines) if l.startswith("site %d " % ids[10]))
dup = lines[:]
dup.insert(len(lines) - 3, lines[first])
open(os.path.join(d, "dup.mtr"), "w").write("\n".join(dup))
truth["dup"] = {"id": ids[10], "line": len(lines) - 3 + 1}

# Categories: n in a, the same less every 7th (gone) plus n/10 new in b.
def cats_file(name, names, live_of, pid):
    tot = 0
    with open(os.path.join(d, name), "w") as f:
        f.write(head % (pid, "summary"))
        for nm in names:
            v = live_of(nm)
            tot += v
            f.write("category %s kind=malloc live_bytes=%d live_count=1 peak_bytes=%d allocs=1 frees=0 "
                    "reallocs=0 reserved=0 committed=0 resident=0 mappings=0\n" % (nm, v, v))
        f.write("total live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=0 reallocs=0\nend\n"
                % (tot, len(names), tot, len(names)))
    return tot
names_a = ["cat%06d" % i for i in range(n)]
rnd.shuffle(names_a)
names_b = [x for x in names_a if int(x[3:]) % 7 != 0] + ["new%05d" % i for i in range(n // 10)]
ta = cats_file("cats_a.mtr", names_a, lambda nm: int(nm[3:]) % 5000, 100)
tb = cats_file("cats_b.mtr", names_b, lambda nm: (int(nm[3:]) % 5000) * (2 if nm.startswith("cat") else 1), 101)
truth["cats"] = {"n_a": len(names_a), "n_b": len(names_b), "gone": sum(1 for x in names_a if int(x[3:]) % 7 == 0),
                 "new": n // 10, "total_a": ta, "total_b": tb}

# A tree: 3000 reports, each the child of the one before (pids 10000..),
# written in reverse order, and 50 siblings under the root.
os.makedirs(os.path.join(d, "tree"))
for k in range(3000):
    pid, ppid = 10000 + k, (10000 + k - 1 if k else 1)
    with open(os.path.join(d, "tree", "r%04d.mtr" % (2999 - k)), "w") as f:
        f.write("memtrail-report 1\npid %d\nppid %d\nmode summary\nstart_ns %d\nend_ns %d\nreason exit\n"
                "total live_bytes=%d live_count=1 peak_bytes=1 allocs=1 frees=0\nend\n" % (pid, ppid, 1000 + k, 5000 + k, k))
for k in range(50):
    with open(os.path.join(d, "tree", "s%02d.mtr" % k), "w") as f:
        f.write("memtrail-report 1\npid %d\nppid 10000\nmode summary\nstart_ns %d\nend_ns 9000\nreason exit\n"
                "total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nend\n" % (20000 + k, 50000 - k))
json.dump(truth, open(os.path.join(d, "truth.json"), "w"))
EOF
[ -s "$T/truth.json" ] || { fail large-fixtures "python3 did not write the fixtures"; exit 1; }
pass large-fixtures

# run_big NAME OUT CMD...: runs it under the hang guard; sets rc.
run_big() {
    local name=$1 out=$2; shift 2
    timeout "$LIMIT" "$@" >"$out" 2>"$out.err"
    rc=$?
    if [ "$rc" -eq 124 ]; then fail "$name" "still running after ${LIMIT}s"; return 1; fi
    return 0
}
# truth_check NAME JSON EXPR: a python3 expression over memtrail's JSON `j`
# and the truth `t`, printing "ok" or what differs.
truth_check() {
    local got
    got=$(python3 - "$2" "$T/truth.json" "$3" <<'EOF' 2>&1
import json, sys
j, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print(eval(sys.argv[3]))
EOF
)
    expect_eq "$1" ok "$got"
}

# --- 200,000 sites ------------------------------------------------------------------
if run_big large-sites "$T/sites.json" "$MT_ASAN" report detail "$T/sites.mtr" --json --depth 8; then
    expect_eq large-sites-status 0 "$rc"
    truth_check large-sites-counts "$T/sites.json" \
        '"ok" if sum(s["merged_sites"] for s in j["sites"]) == t["sites"]["n"] and len(j["sites"]) == t["sites"]["n"] - t["sites"]["merged"] else (len(j["sites"]), t["sites"])'
    truth_check large-sites-totals "$T/sites.json" \
        '"ok" if all(sum(s["live_bytes"] for s in j["sites"] if s["category"] == c) == t["sites"]["live"][c] and sum(s["allocs"] for s in j["sites"] if s["category"] == c) == t["sites"]["allocs"][c] for c in t["sites"]["live"]) else "totals differ"'
    truth_check large-sites-order "$T/sites.json" \
        '"ok" if all(a["live_bytes"] >= b["live_bytes"] for a, b in zip(j["sites"], j["sites"][1:])) else "not by live bytes"'
fi
if run_big large-sites-diff "$T/sdiff.json" "$MT_ASAN" diff "$T/sites.mtr" "$T/sites.mtr" --json; then
    expect_eq large-sites-diff-status 0 "$rc"
    truth_check large-sites-diff-unchanged "$T/sdiff.json" \
        '"ok" if j["sites"] and all(s["status"] == "unchanged" for s in j["sites"]) else "changes in a report against itself"'
fi
if run_big large-dup "$T/dup.out" "$MT_ASAN" report detail "$T/dup.mtr"; then
    expect_eq large-dup-status 1 "$rc"
    want=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["dup"]; print("line %d: duplicate site %d" % (t["line"], t["id"]))' "$T/truth.json")
    contains large-dup-names-the-line "$want" "$(cat "$T/dup.out.err")"
fi

# --- 200,000 categories -----------------------------------------------------------------
if run_big large-cats "$T/cats.json" "$MT_ASAN" report "$T/cats_a.mtr" --json; then
    expect_eq large-cats-status 0 "$rc"
    truth_check large-cats-read "$T/cats.json" \
        '"ok" if len(j["categories"]) == t["cats"]["n_a"] and sum(c["live_bytes"] for c in j["categories"]) == t["cats"]["total_a"] else (len(j["categories"]), t["cats"])'
fi
if run_big large-cats-diff "$T/cdiff.json" "$MT_ASAN" diff "$T/cats_a.mtr" "$T/cats_b.mtr" --json; then
    expect_eq large-cats-diff-status 0 "$rc"
    truth_check large-cats-diff-matched "$T/cdiff.json" \
        '"ok" if sum(c["status"] == "gone" for c in j["categories"]) == t["cats"]["gone"] and sum(c["status"] == "new" for c in j["categories"]) == t["cats"]["new"] and len(j["categories"]) == t["cats"]["n_b"] + t["cats"]["gone"] else "matching differs"'
    truth_check large-cats-diff-deltas "$T/cdiff.json" \
        '"ok" if sum(c["live_bytes"] for c in j["categories"]) == t["cats"]["total_b"] and sum(c["live_bytes"] - c["live_bytes_delta"] for c in j["categories"]) == t["cats"]["total_a"] and all((c["live_bytes_delta"] * 2 == c["live_bytes"]) if c["status"] == "both" else (c["live_bytes_delta"] == c["live_bytes"]) if c["status"] == "new" else (c["live_bytes"] == 0 and -c["live_bytes_delta"] == int(c["name"][3:]) % 5000) for c in j["categories"]) else "deltas differ"'
fi

# --- a tree of 3,050 reports: a chain 3,000 deep ------------------------------------------
if run_big large-tree "$T/tree.json" "$MT_ASAN" report "$T/tree" --json; then
    expect_eq large-tree-status 0 "$rc"
    truth_check large-tree-chain "$T/tree.json" \
        '"ok" if [p["pid"] for p in j["processes"][:3000]] == list(range(10000, 13000)) and [p["depth"] for p in j["processes"][:3000]] == list(range(3000)) and all(p["parent_index"] == (k - 1 if k else None) for k, p in enumerate(j["processes"][:3000])) else "chain differs"'
    truth_check large-tree-siblings "$T/tree.json" \
        '"ok" if [p["pid"] for p in j["processes"][3000:]] == list(range(20049, 19999, -1)) and all(p["depth"] == 1 and p["parent_index"] == 0 for p in j["processes"][3000:]) else [(p["pid"], p["depth"]) for p in j["processes"][3000:3003]]'
fi
