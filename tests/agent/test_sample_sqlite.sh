#!/usr/bin/env bash
# Sample mode on a real program (issue 20's proof): SQLite running the
# shared bench's workload, once in exact detail mode and once sampled at
# the default 512 KiB with a fixed seed. The truth is the exact run.
# - The top 10 sites by allocated bytes are the same sites (order may
#   differ: their estimates carry sampling error), but for a site of the
#   exact top 10 that swapped places with one outside it whose exact bytes
#   are within the sampling error of its own.
# - Each of those sites' estimated allocated bytes is within 4.5 standard
#   errors of the exact figure. For any size s, a sampled block's variance
#   s^2 (1-p)/p with p = 1 - exp(-s/R) is at most R*s, so a site that
#   allocated A bytes has a standard error of at most sqrt(R*A).
#   Which allocations the fixed seed samples depends on every size SQLite
#   asks for, so on its version and even the length of the workload's path:
#   each machine is another draw. At 3 standard errors, the 11 checks would
#   fail by chance on about one machine in 40; at 4.5, one in 10,000.
# - The sum over all sites is within the same bound of the exact total.
# - The category totals (not sampled) are the exact run's.
# Sites are matched by category and their frames as module file name and
# offset: both runs load the same objects, at other addresses.
. "$(dirname "$0")/../lib.sh"
SQLITE=$(command -v sqlite3 || true)
SQL=${MT_SHARED:-$MT_ROOT/../shared}/bench/workload.sql
if [ -z "$SQLITE" ] || [ ! -f "$SQL" ]; then
    echo "SKIP sample sqlite: sqlite3 or the shared workload ($SQL) is missing (scripts/deps.sh)"
    exit 0
fi
RATE=524288

run() { # NAME OPTIONS
    MEMTRAIL_OPTIONS="output=$T/$1.mtr:$2" LD_PRELOAD=$AGENT "$SQLITE" :memory: ".read $SQL" >"$T/$1.out" 2>"$T/$1.err"
    echo "$?"
}
expect_eq "exact run exits 0" 0 "$(run exact mode=detail)"
expect_eq "sampled run exits 0" 0 "$(run sampled mode=sample:sample_seed=7)"
expect_eq "sampled run: nothing on stderr" "" "$(cat "$T/sampled.err")"
"$MT" report detail "$T/exact.mtr" --json --sort allocated >"$T/exact.json" 2>"$T/exact.jerr" ||
    fail "exact report" "$(cat "$T/exact.jerr")"
"$MT" report detail "$T/sampled.mtr" --json --sort allocated >"$T/sampled.json" 2>"$T/sampled.jerr" ||
    fail "sampled report" "$(cat "$T/sampled.jerr")"

python3 - "$T/exact.json" "$T/sampled.json" "$RATE" <<'EOF'
import json, math, os, sys

exact, sampled = (json.load(open(p)) for p in sys.argv[1:3])
rate = int(sys.argv[3])

def ok(name, cond, why=""):
    print(("PASS " if cond else "FAIL ") + "sample sqlite: " + name + ("" if cond else ": " + why))

def key(site):
    frames = tuple((os.path.basename(f.get("module") or "?"), f.get("offset")) for f in site["frames"])
    return (site.get("category"), frames)

def by_key(doc):
    sites = {}
    for s in doc["sites"]:
        k = key(s)
        if k in sites:  # the same frames twice (a depth cut): add them up
            sites[k] = dict(sites[k], allocated_bytes=sites[k]["allocated_bytes"] + s["allocated_bytes"])
        else:
            sites[k] = s
    return sites

ok("the sampled report says so", sampled.get("sampling") == {"rate_bytes": rate}, str(sampled.get("sampling")))
ok("the exact report says it is exact", exact.get("sampling") is None, str(exact.get("sampling")))
ex, sa = by_key(exact), by_key(sampled)

def top(sites):
    return sorted(sites, key=lambda k: -sites[k]["allocated_bytes"])[:10]

NSE = 4.5
tex, tsa = top(ex), top(sa)
def name(k):
    return "/".join("%s+%s" % f for f in k[1][:3])
def exact_bytes(k):
    return ex[k]["allocated_bytes"] if k in ex else 0
def may_swap(k, j):
    """Whether sampling can rank j above k: j is a site of the exact run
    (sampling cannot make up a site), and their exact bytes differ by no
    more than NSE standard errors of the difference of estimates."""
    a, b = exact_bytes(k), exact_bytes(j)
    return j in ex and a - b <= NSE * math.sqrt(rate * (a + b))
missing = [k for k in tex if k not in tsa]  # in the exact top 10 only
intruders = [j for j in tsa if j not in tex]  # in the sampled top 10 only
ok("the top 10 sites by allocated bytes are the exact run's (but for swaps within %g SE)" % NSE,
   len(missing) == len(intruders) and all(any(may_swap(k, j) for j in intruders) for k in missing)
   and all(any(may_swap(k, j) for k in missing) for j in intruders),
   "only exact: %s; only sampled: %s" % (["%s (%d)" % (name(k), exact_bytes(k)) for k in missing],
                                         ["%s (%d)" % (name(j), exact_bytes(j)) for j in intruders]))
for i, k in enumerate(tex):
    a = ex[k]["allocated_bytes"]
    est = sa[k]["allocated_bytes"] if k in sa else 0
    bound = NSE * math.sqrt(rate * a)
    ok("top site %d (%d bytes exact): estimate %d within %g SE (%d)" % (i + 1, a, est, NSE, bound),
       abs(est - a) <= bound, "off by %d" % (est - a))
for j in intruders:  # a sampled top-10 site outside the exact top 10: its estimate too
    a = exact_bytes(j)
    est = sa[j]["allocated_bytes"]
    bound = NSE * math.sqrt(rate * max(a, 1))
    ok("sampled top-10 site %s (%d bytes exact): estimate %d within %g SE (%d)" % (name(j), a, est, NSE, bound),
       j in ex and abs(est - a) <= bound, "off by %d" % (est - a))
tot_ex = sum(s["allocated_bytes"] for s in exact["sites"])
tot_sa = sum(s["allocated_bytes"] for s in sampled["sites"])
bound = NSE * math.sqrt(rate * tot_ex)
ok("all sites' allocated bytes: estimate %d within %g SE (%d) of the exact %d" % (tot_sa, NSE, bound, tot_ex),
   abs(tot_sa - tot_ex) <= bound, "off by %d" % (tot_sa - tot_ex))
samples = sum(s["samples"] for s in sampled["sites"])
ok("samples (%d) are a small part of the allocations (%d)" % (samples, sum(s["allocs"] for s in exact["sites"])),
   0 < samples < sum(s["allocs"] for s in exact["sites"]) / 100)
cats = lambda d: {c["name"]: (c["allocs"], c["frees"], c["peak_bytes"]) for c in d["categories"] if c["name"] == "malloc"}
ok("the malloc category's counts and peak equal the exact run's", cats(exact) == cats(sampled),
   "%s vs %s" % (cats(exact), cats(sampled)))
EOF
