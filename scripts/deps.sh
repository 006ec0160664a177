#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages memtrail needs to build, test and
# benchmark: gcc and make (with libc headers), the ASan/UBSan runtimes used by
# `make check`, zstd, json-c, clang's libFuzzer, python3, sqlite3, nginx and curl
# (a server whose workers drop root, for the output tests), strace (the
# agent's system calls counted), Prometheus (it
# scrapes `memtrail exporter` in the tests), jemalloc,
# tcmalloc, mimalloc and Redis (the agent over other allocators), rustc and
# go (the hostile-program tests), Chromium with its driver and Selenium (the
# HTML report's browser tests), tmux (`memtrail top`'s test), scdoc and man-db
# (the man pages, built and checked) and heaptrack. Prints nothing and touches
# nothing when all is there; otherwise runs apt-get update + install,
# non-interactively, through sudo when not root.
# Usage: scripts/deps.sh [--bench]   (exit 0 when everything is there afterwards)
#   --bench  also the peers the benchmarks compare against: heaptrack
#            (bench/overhead.sh), valgrind (bench/hotpath.sh's callgrind),
#            LTTng-UST and its tools (bench/xe.sh);
#            the tests do not need them
set -euo pipefail

say() { echo "deps.sh: $*" >&2; }

bench=0
case ${1:-} in
    --bench) bench=1 ;;
    "") ;;
    *) say "unknown option '$1' (accepted: --bench)"; exit 2 ;;
esac

have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

# Does gcc link a program with -fsanitize=address,undefined (the Makefile's
# ASan+UBSan build)?
sanitizers_link() {
    have_cmd gcc || return 1
    local d rc
    d=$(mktemp -d "${TMPDIR:-/tmp}/mt-deps.XXXXXX")
    printf 'int main(void) { return 0; }\n' >"$d/t.c"
    if gcc -fsanitize=address,undefined -o "$d/t" "$d/t.c" >/dev/null 2>&1; then rc=0; else rc=1; fi
    rm -rf "$d"
    return "$rc"
}

# The sanitizer runtime packages for the installed gcc: the libasan*/libubsan*
# that its libgcc-N-dev depends on (libasan8 and libubsan1 for gcc 12-14).
sanitizer_pkgs() {
    local major dev pkgs
    major=$(gcc -dumpversion 2>/dev/null | cut -d. -f1)
    dev=libgcc-$major-dev
    pkgs=$(apt-cache depends "$dev" 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^lib(asan|ubsan)[0-9]+$/ { print $2 }' | sort -u)
    [ -n "$pkgs" ] || pkgs="libasan8 libubsan1"
    # shellcheck disable=SC2086 # one word per package
    echo "$dev" $pkgs
}

missing=()
want() { # PACKAGE: add once
    local p
    for p in "${missing[@]+"${missing[@]}"}"; do [ "$p" = "$1" ] && return 0; done
    missing+=("$1")
}

check() {
    missing=()
    have_cmd gcc || want gcc
    have_cmd cc || want gcc # make's default $(CC)
    have_cmd make || want make
    have_cmd python3 || want python3
    have_cmd sqlite3 || want sqlite3
    if [ "$bench" = 1 ]; then
        have_cmd heaptrack || want heaptrack
        have_cmd valgrind || want valgrind # bench/hotpath.sh counts instructions with callgrind
        have_cmd lttng || want lttng-tools
        have_cmd lttng-sessiond || want lttng-tools
        if have_cmd dpkg-query; then have_pkg liblttng-ust-dev || want liblttng-ust-dev; fi
    fi
    if have_cmd dpkg-query; then
        have_pkg libc6-dev || want libc6-dev
    fi
    # Detail reports: libdw/libelf to symbolize, libstdc++ (loaded) to demangle;
    # their tests check against eu-addr2line and use strip/objdump (binutils).
    if have_cmd dpkg-query; then
        have_pkg libunwind-dev || want libunwind-dev # the agent's stack walks (detail mode)
        have_pkg libdw-dev || want libdw-dev
        have_pkg libelf-dev || want libelf-dev
        have_pkg zlib1g-dev || want zlib1g-dev
        have_pkg libzstd-dev || want libzstd-dev # traces are zstd-compressed chunks
        have_pkg libjson-c-dev || want libjson-c-dev # the CLI reads `memtrail sessions` answers with json-c
        have_pkg libclang-rt-dev || want libclang-rt-dev # libFuzzer, for the trace reader's fuzz target
    fi
    have_cmd g++ || want g++
    have_cmd clang || want clang # the trace reader's fuzz target (-fsanitize=fuzzer)
    have_cmd clang-format || want clang-format # tests/common/test_format.sh
    have_cmd eu-addr2line || want elfutils
    have_cmd strip || want binutils
    have_cmd strace || want strace # tests/agent/test_agent.sh counts the agent's system calls on free
    # memtrail export's tests read the pprof output back with protoc and go tool pprof.
    have_cmd protoc || want protobuf-compiler
    # tests/cli/test_install.sh builds a program against the installed tree.
    have_cmd pkg-config || want pkg-config
    have_cmd go || want golang-go
    # tests/hostile/test_programs.sh: a Rust program (rustc) and a cgo one
    # (go, above); other allocators beside the agent (below).
    have_cmd rustc || want rustc
    # tests/hostile/test_trees.sh: part of Python's own test suite.
    if have_cmd dpkg-query; then
        local pyv
        pyv=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3.11)
        have_pkg "libpython$pyv-testsuite" || want "libpython$pyv-testsuite"
    fi
    # tests/agent/test_outputs.sh: a real server whose workers drop root.
    have_cmd nginx || [ -x /usr/sbin/nginx ] || want nginx
    have_cmd curl || want curl
    # tests/agent/test_allocators.sh and tests/hostile: the agent over other
    # allocators (jemalloc, tcmalloc, mimalloc), and Redis (which links
    # jemalloc) under redis-benchmark.
    if have_cmd dpkg-query; then
        have_pkg libjemalloc2 || want libjemalloc2
        have_pkg libtcmalloc-minimal4 || want libtcmalloc-minimal4
        have_pkg libmimalloc2.0 || want libmimalloc2.0
    fi
    have_cmd redis-server || want redis-server
    have_cmd redis-benchmark || want redis-tools
    # tests/cli/test_exporter.sh: a real Prometheus scrapes `memtrail
    # exporter`, and promtool checks the exposition.
    have_cmd prometheus || want prometheus
    have_cmd promtool || want prometheus
    # tests/cli/test_json_schema.sh: every --json output against docs/schema/*.schema.json.
    if have_cmd dpkg-query; then
        have_pkg python3-jsonschema || want python3-jsonschema
    fi
    # tests/html: `memtrail html` pages opened in a real headless Chromium,
    # driven by Selenium.
    have_cmd chromium || want chromium
    have_cmd chromedriver || want chromium-driver
    if have_cmd dpkg-query; then
        have_pkg python3-selenium || want python3-selenium
    fi
    # tests/cli: `memtrail top` under tmux; the man pages are built with scdoc.
    have_cmd tmux || want tmux
    have_cmd scdoc || want scdoc
    # tests/cli/test_man.sh renders the pages with man (groff comes with it).
    have_cmd man || want man-db
}

SUDO=()
apt_install() { # PACKAGES...
    if ! have_cmd apt-get; then
        say "missing: $* — this is not an apt-based system; install them by hand"
        exit 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        have_cmd sudo || { say "missing: $* — not root and no sudo; install them by hand"; exit 1; }
        SUDO=(sudo)
    fi
    say "installing: $*"
    if [ -z "${updated:-}" ]; then
        "${SUDO[@]+"${SUDO[@]}"}" env DEBIAN_FRONTEND=noninteractive apt-get -q update
        updated=1
    fi
    "${SUDO[@]+"${SUDO[@]}"}" env DEBIAN_FRONTEND=noninteractive \
        apt-get -q install -y --no-install-recommends "$@"
}

check
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
    check
    if [ "${#missing[@]}" -gt 0 ]; then
        say "still missing after install: ${missing[*]}"
        exit 1
    fi
fi

# gcc normally brings its sanitizer runtimes (libgcc-N-dev depends on them),
# but a minimal image may lack them: check the link itself.
if ! sanitizers_link; then
    # shellcheck disable=SC2046 # one word per package
    apt_install $(sanitizer_pkgs)
    if ! sanitizers_link; then
        say "gcc -fsanitize=address,undefined still does not link a test program"
        exit 1
    fi
fi
exit 0
