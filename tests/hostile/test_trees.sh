# Real process trees under memtrail run --follow-exec, in summary and trace
# modes: git gc (git forks and execs pack-objects, repack, ...), make -j2
# building a small C program (make, sh, gcc, cc1, as, ld), and part of
# Python's own test suite. Each must do what it does bare (exit status,
# the built program's output, git fsck clean), and what memtrail says about
# the tree must be true: the count of reports or traces it gives is the
# count of files written, and every file it names exists.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }

# named_files_exist NAME ERRFILE: every path memtrail's lines name exists.
named_files_exist() {
    local missing=() p
    while read -r p; do
        [ -e "$p" ] || missing+=("$p")
    done < <(grep '^memtrail: ' "$2" | grep -oE ' (in|to) /[^ ]+' | sed -E 's/^ (in|to) //; s/[:,;]$//')
    if [ "${#missing[@]}" -eq 0 ]; then pass "$1: every file memtrail names exists"
    else fail "$1: every file memtrail names exists" "missing: ${missing[*]}"; fi
}

# tree_count NAME ERRFILE DIR MAIN_PID EXT: "N more reports/traces" is the
# number of files the other processes wrote.
tree_count() {
    local n
    n=$(ls "$3" | grep -E "\.[0-9]+\.$5\$" | grep -vc "\.$4\.$5\$")
    if [ "$n" -eq 0 ]; then
        contains "$1: says no other process wrote one" "no other process of the tree" "$(cat "$2")"
    else
        contains "$1: counts the tree's $n other files" "$n more " "$(cat "$2")"
    fi
}

# --- git gc ------------------------------------------------------------------
if command -v git >/dev/null; then
    export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
    for mode in summary trace; do
        ext=mtr; [ $mode = trace ] && ext=mtt
        repo=$T/repo.$mode out=$T/git.$mode
        mkdir -p "$repo" "$out"
        (cd "$repo" && git init -q && for i in $(seq 30); do
            seq "$i" 400 >"f$i.txt"; git add "f$i.txt"; git commit -qm "c$i"; done) >/dev/null 2>&1
        (cd "$repo" && timeout -s KILL 120 "$MT" run --mode $mode --follow-exec -o "$out/g.%p.$ext" -- \
            git gc --aggressive --prune=now >/dev/null 2>"$T/git.$mode.err")
        rc=$?
        expect_eq "git gc --follow-exec [$mode]: exits 0" 0 "$rc"
        (cd "$repo" && git fsck --full >/dev/null 2>&1)
        expect_eq "git gc --follow-exec [$mode]: the repository is sound afterwards (git fsck)" 0 "$?"
        main=$(grep -oE 'of [0-9]+ written' "$T/git.$mode.err" | grep -oE '[0-9]+' | head -1)
        tree_count "git gc --follow-exec [$mode]" "$T/git.$mode.err" "$out" "${main:-x}" "$ext"
        named_files_exist "git gc --follow-exec [$mode]" "$T/git.$mode.err"
    done
else
    fail git "git is not installed"
fi

# --- make -j2 ------------------------------------------------------------------
src=$T/proj
mkdir -p "$src"
for i in 1 2 3 4 5 6; do printf 'int f%d(int x) { return x * %d; }\n' "$i" "$i" >"$src/f$i.c"; done
{
    for i in 1 2 3 4 5 6; do printf 'int f%d(int);\n' "$i"; done
    printf '#include <stdio.h>\nint main(void) { printf("%%d\\n", f1(1)+f2(1)+f3(1)+f4(1)+f5(1)+f6(1)); return 0; }\n'
} >"$src/main.c"
printf 'OBJS = main.o f1.o f2.o f3.o f4.o f5.o f6.o\nprog: $(OBJS)\n\tcc -o $@ $(OBJS)\n%%.o: %%.c\n\tcc -O1 -c $<\n' >"$src/Makefile"
for mode in summary trace; do
    ext=mtr; [ $mode = trace ] && ext=mtt
    out=$T/make.$mode
    mkdir -p "$out"
    (cd "$src" && rm -f ./*.o prog && timeout -s KILL 120 "$MT" run --mode $mode --follow-exec -o "$out/m.%p.$ext" -- \
        make -j2 >/dev/null 2>"$T/make.$mode.err")
    expect_eq "make -j2 --follow-exec [$mode]: builds, and the program runs" "0 21" "$? $("$src/prog" 2>&1)"
    main=$(grep -oE 'of [0-9]+ written' "$T/make.$mode.err" | grep -oE '[0-9]+' | head -1)
    tree_count "make -j2 --follow-exec [$mode]" "$T/make.$mode.err" "$out" "${main:-x}" "$ext"
    named_files_exist "make -j2 --follow-exec [$mode]" "$T/make.$mode.err"
done

# --- Python's own test suite (Debian's libpython3.11-testsuite) --------------
PY=/usr/bin/python3
if "$PY" -c 'import test.test_json' 2>/dev/null; then
    for mode in summary detail trace; do
        tests="test_list test_dict test_set test_json test_weakref"
        [ $mode = trace ] && tests="test_json"
        (cd "$T" && timeout -s KILL 300 "$MT" run --mode $mode -o "$T/py.$mode.%p" -- "$PY" -m test $tests \
            >"$T/py.$mode.out" 2>"$T/py.$mode.err")
        rc=$?
        expect_eq "python -m test $tests [$mode]: passes" "0" "$rc"
        contains "python -m test [$mode]: the suite says SUCCESS" "Tests result: SUCCESS" "$(cat "$T/py.$mode.out")"
        if [ $mode = trace ]; then
            f=$(ls "$T"/py.trace.* | head -1)
            "$MT" analyze --json "$f" >"$T/py.json" 2>/dev/null
            expect_eq "python -m test [trace]: a complete trace" "True" "$(json_get "$T/py.json" "j['complete']")"
        else
            f=$(ls "$T"/py.$mode.* | head -1)
            "$MT" report --json "$f" >"$T/py.json" 2>/dev/null
            expect_eq "python -m test [$mode]: a report with no heap errors" "0 0 0" \
                "$(json_get "$T/py.json" "'%d %d %d' % (j['errors']['double_free'], j['errors']['bad_canary'], j['errors']['foreign_free'])")"
        fi
    done
else
    fail "python test suite" "$PY cannot import test.test_json (scripts/deps.sh installs libpython3.11-testsuite)"
fi
