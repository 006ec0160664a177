#!/usr/bin/env bash
# Refreshes web/vendor from the npm registry: installs exactly what
# web/package-lock.json pins (npm ci) in a scratch directory and copies each
# library's built file, stylesheet and license. The build never runs this:
# it reads the vendored files, so building needs no network.
# Usage: bash web/vendor.sh   (needs npm; run after changing package.json
# with `npm install --package-lock-only` in web/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mt-web.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$tmp/"
(cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts >/dev/null)
m=$tmp/node_modules
copy() { # PACKAGE FILE...: into vendor/PACKAGE, with its LICENSE
    local pkg=$1; shift
    rm -rf "$here/vendor/$pkg"
    mkdir -p "$here/vendor/$pkg"
    cp "$m/$pkg/LICENSE" "$here/vendor/$pkg/LICENSE"
    for f in "$@"; do cp "$m/$pkg/$f" "$here/vendor/$pkg/"; done
    node -e 'const p=require(process.argv[1]); console.log(p.name + " " + p.version)' \
        "$m/$pkg/package.json" >"$here/vendor/$pkg/VERSION"
}
copy d3 dist/d3.min.js
copy d3-flame-graph dist/d3-flamegraph.min.js dist/d3-flamegraph.css
copy uplot dist/uPlot.iife.min.js dist/uPlot.min.css
echo "web/vendor: $(cat "$here"/vendor/*/VERSION | tr '\n' ' ')"
