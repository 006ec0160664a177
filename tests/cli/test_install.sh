# make install into a staging root (DESTDIR, PREFIX=/usr), from a build
# directory of its own: the layout (the preload agent under lib/memtrail/,
# out of the linker's way; the stub with a versioned soname; headers;
# pkg-config metadata for the PREFIX), then a program built with
# pkg-config runs without the agent and, through the installed memtrail
# run, with it.
source "$(dirname "$0")/../lib.sh"
command -v pkg-config >/dev/null || { fail install "pkg-config is not installed (scripts/deps.sh installs it)"; exit 0; }
R=$T/root
if ! make -C "$MT_ROOT" -s install DESTDIR="$R" PREFIX=/usr BUILD="$T/build" >"$T/install.log" 2>&1; then
    fail "make install DESTDIR PREFIX=/usr" "$(tail -5 "$T/install.log")"
    exit 0
fi
pass "make install DESTDIR PREFIX=/usr"
expect_eq "install: the layout (outside share/)" \
    "usr/bin/memtrail usr/include/memtrail.h usr/include/memtrail_alloc.h usr/include/memtrail_sessions.h usr/lib/libmemtrail-stub.so usr/lib/libmemtrail-stub.so.0 usr/lib/memtrail/libmemtrail.so usr/lib/pkgconfig/memtrail.pc" \
    "$(cd "$R" && find . -type f -o -type l | sed 's|^\./||' | grep -v '^usr/share/' | sort | tr '\n' ' ' | sed 's/ $//')"
# share/: memtrail(1), a page per command of memtrail --help, libmemtrail(3), the bash completion.
want=$( (echo usr/share/bash-completion/completions/memtrail usr/share/man/man1/memtrail.1 usr/share/man/man3/libmemtrail.3
    "$MT" --help | awk '/^Commands:$/ { on = 1; next } on && /^$/ { exit } on { print "usr/share/man/man1/memtrail-" $1 ".1" }') |
    tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
expect_eq "install: the man pages and the completion under share/" "$want" \
    "$(cd "$R" && find usr/share -type f -o -type l | sort | tr '\n' ' ' | sed 's/ $//')"
page=$(MANWIDTH=80 man -M "$R/usr/share/man" memtrail-top 2>&1)
contains "install: man -M PREFIX/share/man memtrail-top shows the installed page" "memtrail top - a live view" "$page"
expect_eq "install: the installed completion is the build's" "" \
    "$(cmp "$R/usr/share/bash-completion/completions/memtrail" "$T/build/completion/memtrail" 2>&1)"
expect_eq "install: the completion completes from the installed tree" "query" \
    "$(bash -c 'source "$1"; COMP_WORDS=(memtrail qu); COMP_CWORD=1; _memtrail; echo "${COMPREPLY[*]}"' _ "$R/usr/share/bash-completion/completions/memtrail")"
expect_eq "install: libmemtrail-stub.so is a link to the versioned name" "libmemtrail-stub.so.0" "$(readlink "$R/usr/lib/libmemtrail-stub.so")"
expect_eq "install: the stub's soname is versioned" "libmemtrail-stub.so.0" \
    "$(objdump -p "$R/usr/lib/libmemtrail-stub.so.0" | awk '$1 == "SONAME" {print $2}')"
expect_eq "install: no libmemtrail.so where -lmemtrail would find it" "" "$(ls "$R/usr/lib/libmemtrail.so" 2>/dev/null)"
contains "install: pkg-config metadata names the PREFIX" "prefix=/usr" "$(cat "$R/usr/lib/pkgconfig/memtrail.pc")"
expect_eq "install: the version is the header's" "memtrail $(sed -n 's/^#define MT_VERSION "\(.*\)"/\1/p' "$MT_ROOT/include/memtrail.h")" \
    "$("$R/usr/bin/memtrail" --version 2>&1)"

cat >"$T/app.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <memtrail.h>
int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer in the tag */
    int tagged = mt_tag_push("app") == 0;
    void *p = malloc(12345);
    printf("active=%d tagged=%d\n", mt_is_active(), tagged);
    free(p);
    return 0;
}
C
flags=$(PKG_CONFIG_SYSROOT_DIR="$R" PKG_CONFIG_LIBDIR="$R/usr/lib/pkgconfig" pkg-config --cflags --libs memtrail)
if gcc -o "$T/app" "$T/app.c" $flags 2>"$T/cc.err"; then pass "install: a program builds with pkg-config ($flags)"
else fail "install: a program builds with pkg-config" "$(cat "$T/cc.err")"; fi
expect_eq "install: without the agent the stub answers" "active=0 tagged=0" "$(LD_LIBRARY_PATH=$R/usr/lib "$T/app")"
out=$(cd "$T" && LD_LIBRARY_PATH=$R/usr/lib "$R/usr/bin/memtrail" run -o "$T/app.mtr" -- "$T/app" 2>"$T/run.err")
expect_eq "install: the installed memtrail run finds its agent under lib/memtrail" "active=1 tagged=1" "$out"
"$R/usr/bin/memtrail" report --json "$T/app.mtr" >"$T/app.json" 2>/dev/null
expect_eq "install: the tag's allocation is in the report" "12345" \
    "$(json_get "$T/app.json" "[c['peak_bytes'] for c in j['categories'] if c['name']=='app'][0]")"

# make uninstall takes back everything install put there.
if make -C "$MT_ROOT" -s uninstall DESTDIR="$R" PREFIX=/usr BUILD="$T/build" >"$T/uninstall.log" 2>&1; then
    expect_eq "make uninstall: no file of memtrail's left (man pages and completion too)" "" \
        "$(cd "$R" && find . -type f -o -type l | sed 's|^\./||' | tr '\n' ' ')"
else
    fail "make uninstall DESTDIR PREFIX=/usr" "$(tail -5 "$T/uninstall.log")"
fi
