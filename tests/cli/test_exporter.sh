# `memtrail exporter` and `memtrail query PID metrics` on running programs
# (tests/agent/served.c, which keeps its own books): a real Prometheus
# scrapes the exporter and its HTTP API must give the program's live bytes
# as the program counted them; promtool checks the page; go tool pprof reads
# the heap profile of a detail-mode program; and the bad input: a port in
# use, a bad --listen, another uid's client, methods other than GET, a pid
# that is gone or not tracked or stopped, a stale socket.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/served" ] || { fail setup "build first: $MT / $AGENT / $TBIN/served missing"; exit 1; }

pids=()
stale=""
cleanup() {
    touch "$T/a/stop" "$T/d/stop" 2>/dev/null
    for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
    sleep 0.2
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    [ -n "$stale" ] && rm -f "$stale"
    rm -rf "$T"
}
trap cleanup EXIT
unset XDG_RUNTIME_DIR # the agent's sockets go to /tmp/memtrail-UID
export PPROF_TMPDIR=$T GOCACHE=$T/gocache HOME=$T

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_file() { local i; for ((i = 0; i < 1500; i++)); do [ -s "$1" ] && return 0; sleep 0.02; done; return 1; }
# wait_http URL: until something answers there.
wait_http() { local i; for ((i = 0; i < 500; i++)); do curl -s -o /dev/null "$1" && return 0; sleep 0.02; done; return 1; }
# http_code URL [curl args]: the status code only.
http_code() { local u=$1; shift; curl -s -o "$T/body" -w '%{http_code}' "$@" "$u"; }
# series PAGE PID: the series of one process in a page (names and labels, no values), sorted.
series() { grep -F "pid=\"$2\"" "$1" | sed 's/} .*$/}/' | sort; }
# value PAGE SERIES: the value of one series.
value() { awk -v s="$2" 'index($0, s " ") == 1 { print $2 }' "$1"; }

mkdir -p "$T/a" "$T/d"
MEMTRAIL_OPTIONS="output=$T/a.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/served" "$T/a" >"$T/a.out" 2>&1 &
pids+=($!)
MEMTRAIL_OPTIONS="mode=detail:output=$T/d.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/served" "$T/d" >"$T/d.out" 2>&1 &
pids+=($!)
wait_file "$T/a/ready" && wait_file "$T/d/ready" || { fail "programs start" "$(cat "$T/a.out" "$T/d.out")"; exit 1; }
pid=$(cat "$T/a/ready") dpid=$(cat "$T/d/ready")
read -r _ live count _ allocs frees _ <"$T/a/ledger"

# --- query PID metrics --------------------------------------------------------
"$MT" query "$pid" metrics >"$T/q.prom" 2>"$T/q.err"
expect_eq "query metrics: exits 0, nothing on stderr" "0:" "$?:$(cat "$T/q.err")"
S="pid=\"$pid\",program=\"served\",category=\"served\""
expect_eq "query metrics: live bytes, allocations and frees of the category = the program's books" \
    "$live $count $allocs $frees" \
    "$(value "$T/q.prom" "memtrail_live_bytes{$S}") $(value "$T/q.prom" "memtrail_live_blocks{$S}") $(value "$T/q.prom" "memtrail_allocations_total{$S}") $(value "$T/q.prom" "memtrail_frees_total{$S}")"
"$MT" query "$pid" summary --json >"$T/q.json"
expect_eq "query metrics: rss is the report's process line (a number > 0)" "1" \
    "$(awk '/^memtrail_rss_bytes\{/ { print ($2 > 0) }' "$T/q.prom")"
expect_eq "query metrics: live bytes = the JSON summary's" "$(json_get "$T/q.json" "[c['live_bytes'] for c in j['categories'] if c['name']=='served'][0]")" \
    "$(value "$T/q.prom" "memtrail_live_bytes{$S}")"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/q.prom" >"$T/pt.out" 2>&1
    expect_eq "query metrics: promtool check metrics accepts it" "0:" "$?:$(cat "$T/pt.out")"
else
    echo "SKIP promtool: not installed"
fi
run_mt "$MT" query "$pid" metrics --json
expect_eq "query metrics --json: usage error" "2 memtrail: --json does not apply to 'metrics'" "$rc $(head -1 "$T/err")"
# a summary-mode report has no span lines yet in every agent: the histogram is checked when it has
if grep -q '^memtrail_span_duration_seconds_count{' "$T/q.prom"; then
    expect_eq "query metrics: the 5 'req' spans" "5" "$(value "$T/q.prom" "memtrail_span_duration_seconds_count{pid=\"$pid\",program=\"served\",span=\"req\"}")"
fi

# --- the exporter -------------------------------------------------------------
# Port 0: the exporter picks a free one and names it (no other program can
# take it between a probe and the exporter's bind).
"$MT" exporter --listen "127.0.0.1:0" --timeout 1 >"$T/exp.out" 2>"$T/exp.err" &
epid=$!; pids+=("$epid")
for ((i = 0; i < 500; i++)); do grep -q 'serving http' "$T/exp.err" 2>/dev/null && break; sleep 0.02; done
P1=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$T/exp.err")
wait_http "http://127.0.0.1:$P1/" || fail "exporter starts" "$(cat "$T/exp.err")"
expect_eq "exporter: says where it serves" "memtrail: exporter serving http://127.0.0.1:$P1/metrics and /debug/pprof/heap?pid=N" "$(head -1 "$T/exp.err")"
code=$(http_code "http://127.0.0.1:$P1/metrics" -D "$T/headers"); cp "$T/body" "$T/page.prom"
expect_eq "exporter /metrics: 200" "200" "$code"
contains "exporter /metrics: Prometheus's content type" "Content-Type: text/plain; version=0.0.4; charset=utf-8" "$(cat "$T/headers")"
expect_eq "exporter /metrics: the live bytes of the category = the program's books" "$live" "$(value "$T/page.prom" "memtrail_live_bytes{$S}")"
expect_eq "exporter /metrics: the detail-mode program is there too" "$live" \
    "$(value "$T/page.prom" "memtrail_live_bytes{pid=\"$dpid\",program=\"served\",category=\"served\"}")"
expect_eq "exporter /metrics and query PID metrics: the same series" "$(series "$T/q.prom" "$pid")" "$(series "$T/page.prom" "$pid")"
expect_eq "exporter /metrics: each family once" "" "$(grep '^# TYPE ' "$T/page.prom" | sort | uniq -d)"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/page.prom" >"$T/pt.out" 2>&1
    expect_eq "exporter /metrics: promtool check metrics accepts it" "0:" "$?:$(cat "$T/pt.out")"
fi

# --- a real Prometheus scrapes it -----------------------------------------------
if command -v prometheus >/dev/null; then
    P2=$(free_port)
    cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: memtrail
    static_configs:
      - targets: ['127.0.0.1:$P1']
EOF
    prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
        --web.listen-address="127.0.0.1:$P2" >"$T/prom.log" 2>&1 &
    pids+=($!)
    q="http://127.0.0.1:$P2/api/v1/query"
    got=""
    for ((i = 0; i < 600; i++)); do # Prometheus starts, then scrapes every second
        curl -s -G "$q" --data-urlencode "query=memtrail_live_bytes{pid=\"$pid\",category=\"served\"}" >"$T/api.json" 2>/dev/null &&
            got=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["data"]["result"]; print(r[0]["value"][1] if r else "")' "$T/api.json" 2>/dev/null)
        [ -n "$got" ] && break
        sleep 0.1
    done
    expect_eq "prometheus: its API has the program's live-bytes series, with the program's live bytes" "$live" "$got"
    curl -s -G "$q" --data-urlencode "query=memtrail_allocations_total{pid=\"$pid\",program=\"served\",category=\"served\"}" >"$T/api2.json"
    expect_eq "prometheus: allocations counter = the program's books" "$allocs" \
        "$(json_get "$T/api2.json" "j['data']['result'][0]['value'][1]")"
    # up is the last scrape's: one slower than its 1 s timeout on a loaded
    # machine is 0 until the next, so the next ones are waited for.
    for ((i = 0; i < 100; i++)); do
        curl -s -G "$q" --data-urlencode "query=up{job=\"memtrail\"}" >"$T/up.json"
        up=$(json_get "$T/up.json" "j['data']['result'][0]['value'][1]" 2>/dev/null)
        [ "$up" = 1 ] && break
        sleep 0.1
    done
    expect_eq "prometheus: the scrape target is up" "1" "$up"
else
    echo "SKIP prometheus: not installed (scripts/deps.sh installs it)"
fi

# --- pprof ------------------------------------------------------------------------
code=$(http_code "http://127.0.0.1:$P1/debug/pprof/heap?pid=$dpid"); mv "$T/body" "$T/heap.pb.gz"
expect_eq "pprof heap of a detail-mode program: 200" "200" "$code"
expect_eq "pprof heap: gzip'ed" "1f8b" "$(head -c 2 "$T/heap.pb.gz" | od -An -tx1 | tr -d ' \n')"
if command -v go >/dev/null; then
    go tool pprof -raw "$T/heap.pb.gz" >"$T/pprof.txt" 2>&1
    contains "go tool pprof -raw: the known allocating function" "served_known_alloc" "$(cat "$T/pprof.txt")"
    go tool pprof -top -sample_index=inuse_space "$T/heap.pb.gz" >"$T/top.txt" 2>&1
    # the sites' inuse_space sum to the live bytes of the program's categories; served's is among them
    contains "go tool pprof -top: its live bytes in the known function" "served_known_alloc" "$(cat "$T/top.txt")"
    go tool pprof -raw "http://127.0.0.1:$P1/debug/pprof/heap?pid=$dpid" >"$T/pprof-url.txt" 2>&1
    contains "go tool pprof reads the URL itself" "served_known_alloc" "$(cat "$T/pprof-url.txt")"
else
    echo "SKIP go tool pprof: go not installed"
fi
expect_eq "pprof heap of a summary-mode program: 404, says why" "404 1" \
    "$(http_code "http://127.0.0.1:$P1/debug/pprof/heap?pid=$pid") $(grep -c "process $pid does not run in detail mode (mode summary)" "$T/body")"
expect_eq "pprof heap of a summary-mode program: a hint that works (no 'query start', which it refuses)" "0 1" \
    "$(grep -c "query $pid start" "$T/body") $(grep -c "start it with 'memtrail run --mode detail'" "$T/body")"
true & gone=$!; wait "$gone"
expect_eq "pprof heap of a pid that is gone: 404" "404 no process with pid $gone" \
    "$(http_code "http://127.0.0.1:$P1/debug/pprof/heap?pid=$gone") $(cat "$T/body")"
expect_eq "pprof heap of a process not tracked: 404" "404 process $$ is not tracked by memtrail" \
    "$(http_code "http://127.0.0.1:$P1/debug/pprof/heap?pid=$$") $(cat "$T/body")"
expect_eq "pprof heap without a pid: 400" "400" "$(http_code "http://127.0.0.1:$P1/debug/pprof/heap")"
expect_eq "pprof heap with a bad pid: 400" "400" "$(http_code "http://127.0.0.1:$P1/debug/pprof/heap?pid=x1")"

# --- requests refused ----------------------------------------------------------------
expect_eq "POST: 405" "405" "$(http_code "http://127.0.0.1:$P1/metrics" -X POST -d x=1)"
contains "405 says Allow: GET" "Allow: GET" "$(curl -s -i -X DELETE "http://127.0.0.1:$P1/metrics")"
expect_eq "HEAD: 405" "405" "$(curl -s -o /dev/null -w '%{http_code}' -I "http://127.0.0.1:$P1/metrics")"
expect_eq "an unknown page: 404" "404" "$(http_code "http://127.0.0.1:$P1/nothing")"
exec 3<>"/dev/tcp/127.0.0.1/$P1"
printf 'NONSENSE\r\n\r\n' >&3
expect_match "a malformed request: 400" '^HTTP/1.1 400 ' "$(head -1 <&3)"
exec 3<&-
if command -v setpriv >/dev/null; then
    expect_eq "a client of another uid: 403" "403" \
        "$(setpriv --reuid=65534 --regid=65534 --clear-groups curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P1/metrics")"
else
    echo "SKIP another uid: no setpriv"
fi

# --- processes that cannot answer ------------------------------------------------------
# a socket nobody listens on (its process gone, its pid now another program's): skipped silently
sleep 60 & spid=$!; pids+=("$spid")
stale=/tmp/memtrail-$(id -u)/$spid.sock
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$stale"
chmod 600 "$stale"
kill -STOP "$pid"
code=$(http_code "http://127.0.0.1:$P1/metrics"); cp "$T/body" "$T/stop.prom"
kill -CONT "$pid"
expect_eq "a stopped process: the page is served" "200" "$code"
expect_eq "a stopped process: skipped with a comment line" \
    "# memtrail: process $pid skipped: did not answer within 1 seconds (is it stopped?)" "$(grep "^# memtrail: process $pid " "$T/stop.prom")"
expect_eq "a stopped process: no series of it" "" "$(series "$T/stop.prom" "$pid")"
expect_eq "a stopped process: the others still served" "$live" \
    "$(value "$T/stop.prom" "memtrail_live_bytes{pid=\"$dpid\",program=\"served\",category=\"served\"}")"
expect_eq "a stale socket: skipped silently" "" "$(grep -E "pid=\"$spid\"|process $spid " "$T/stop.prom")"
expect_eq "the exporter's own count: 1 skipped" "1" "$(value "$T/stop.prom" 'memtrail_exporter_processes{result="skipped"}')"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/stop.prom" >"$T/pt.out" 2>&1
    expect_eq "with a skipped process: promtool check metrics accepts it" "0:" "$?:$(cat "$T/pt.out")"
fi
rm -f "$stale"

# --- bad --listen, a port in use ------------------------------------------------------
run_mt "$MT" exporter --listen "127.0.0.1:$P1"
expect_eq "a port in use: exit 1, one line" "1 memtrail: cannot listen on 127.0.0.1:$P1: the port is in use (another exporter?); pick another with --listen" "$rc $err"
run_mt "$MT" exporter --listen nonsense
expect_eq "--listen without a port: exit 2" "2 memtrail: --listen: 'nonsense' is not HOST:PORT (e.g. 127.0.0.1:9464, [::1]:9464)" "$rc $(head -1 "$T/err")"
run_mt "$MT" exporter --listen 127.0.0.1:65536
expect_eq "--listen with a port out of range: exit 2" "2 memtrail: --listen: '127.0.0.1:65536': '65536' is not a port (0 to 65535)" "$rc $(head -1 "$T/err")"
run_mt "$MT" exporter --listen ::1:80
expect_eq "--listen with an IPv6 address without brackets: exit 2" "2" "$rc"
run_mt "$MT" exporter extra
expect_eq "an argument: exit 2" "2" "$rc"

# --- the exporter stops on SIGTERM and SIGINT, exit 0 -------------------------------------
kill -TERM "$epid"; wait "$epid"
expect_eq "SIGTERM: the exporter exits 0" "0" "$?"
P3=$(free_port)
"$MT" exporter --listen "127.0.0.1:$P3" 2>/dev/null &
ipid=$!; pids+=("$ipid")
wait_http "http://127.0.0.1:$P3/"
kill -INT "$ipid"; wait "$ipid"
expect_eq "SIGINT: the exporter exits 0" "0" "$?"

# --- IPv6, and port 0 (the start line names the port picked) ------------------------------
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
    "$MT" exporter --listen '[::1]:0' 2>"$T/v6.err" &
    vpid=$!; pids+=("$vpid")
    wait_file "$T/v6.err"
    P6=$(sed -n 's|.*http://\[::1\]:\([0-9]*\)/metrics.*|\1|p' "$T/v6.err")
    expect_match "[::1]:0: the start line names the port picked" '^[1-9][0-9]*$' "$P6"
    wait_http "http://[::1]:$P6/"
    expect_eq "IPv6: our client served, the program's live bytes" "200 $live" \
        "$(http_code "http://[::1]:$P6/metrics" -g) $(value "$T/body" "memtrail_live_bytes{$S}")"
    if command -v setpriv >/dev/null; then
        expect_eq "IPv6: a client of another uid: 403" "403" \
            "$(setpriv --reuid=65534 --regid=65534 --clear-groups curl -g -s -o /dev/null -w '%{http_code}' "http://[::1]:$P6/metrics")"
    fi
    kill -TERM "$vpid"; wait "$vpid"
else
    echo "SKIP IPv6: no ::1 here"
fi

# --- the ASan+UBSan build serves every page and leaks nothing ---------------------------
if [ -x "$MT_ASAN" ]; then
    P5=$(free_port)
    "$MT_ASAN" exporter --listen "127.0.0.1:$P5" --timeout 1 2>"$T/asan.err" &
    apid=$!; pids+=("$apid")
    wait_http "http://127.0.0.1:$P5/"
    codes="$(http_code "http://127.0.0.1:$P5/metrics") $(http_code "http://127.0.0.1:$P5/debug/pprof/heap?pid=$dpid")"
    codes+=" $(http_code "http://127.0.0.1:$P5/debug/pprof/heap?pid=$pid") $(http_code "http://127.0.0.1:$P5/metrics" -X PUT)"
    "$MT_ASAN" query "$pid" metrics >/dev/null 2>>"$T/asan.err"
    kill -TERM "$apid"; wait "$apid"
    expect_eq "ASan build: pages served, exit 0, nothing but the start line on stderr" "200 200 404 405 0:" \
        "$codes $?:$(grep -v '^memtrail: exporter serving' "$T/asan.err")"
fi

# --- no process of the user: an empty but valid page (run as nobody, who tracks nothing) ---
if command -v setpriv >/dev/null; then
    P4=$(free_port)
    NOB="setpriv --reuid=65534 --regid=65534 --clear-groups"
    $NOB env -u XDG_RUNTIME_DIR "$MT" exporter --listen "127.0.0.1:$P4" 2>/dev/null &
    npid=$!; pids+=("$npid")
    wait_http "http://127.0.0.1:$P4/" # our uid: 403, but it answers
    # nobody cannot write in $T: the files are written by this shell
    $NOB curl -s -D - -o /dev/null "http://127.0.0.1:$P4/metrics" | awk 'NR == 1 { print $2 }' >"$T/empty.code"
    $NOB curl -s "http://127.0.0.1:$P4/metrics" >"$T/empty.prom"
    expect_eq "no process: 200, no memtrail series but the exporter's own" "200 0 0" \
        "$(cat "$T/empty.code") $(grep -c '^memtrail_live_bytes' "$T/empty.prom") $(value "$T/empty.prom" 'memtrail_exporter_processes{result="answered"}')"
    if command -v promtool >/dev/null; then
        promtool check metrics <"$T/empty.prom" >"$T/pt.out" 2>&1
        expect_eq "no process: promtool check metrics accepts it" "0:" "$?:$(cat "$T/pt.out")"
    fi
    kill -TERM "$npid"; wait "$npid"
fi

touch "$T/a/stop" "$T/d/stop"
