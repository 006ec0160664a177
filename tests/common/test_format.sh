#!/usr/bin/env bash
# The C sources follow the committed .clang-format: every file under src/,
# include/, tests/ and bench/ that git tracks is checked with clang-format
# --dry-run --Werror (what `make format` would change, it names). A check
# per directory, so a failure says where.
. "$(dirname "$0")/../lib.sh"
cd "$MT_ROOT" || exit 1
if ! command -v clang-format >/dev/null; then
    fail format "clang-format is not installed (scripts/deps.sh installs it)"
    exit 0
fi
for dir in src include tests bench; do
    mapfile -t files < <(git ls-files -- "$dir/*.[ch]" "$dir/*.cc")
    [ "${#files[@]}" -gt 0 ] || continue
    if clang-format --dry-run --Werror "${files[@]}" >"$T/fmt" 2>&1; then
        pass "format: $dir (${#files[@]} files)"
    else
        fail "format: $dir" "$(grep -c 'error:' "$T/fmt") lines differ from .clang-format; run 'make format'; first: $(grep -m1 'error:' "$T/fmt")"
    fi
done
