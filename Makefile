# memtrail build. `make` builds the CLI, the agent, the stub library and
# pkg-config metadata under build/; `make check` builds and runs every test
# (including an ASan+UBSan build of the CLI side); `make install` honours
# DESTDIR, PREFIX, LIBDIR, CPPFLAGS, CFLAGS and LDFLAGS.
PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib
MANDIR   ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
# The preload agent lives apart from the linkable libraries, so that
# -lmemtrail can never link an interposer into a program.
AGENTDIR := $(LIBDIR)/memtrail
BUILD    ?= build
CC       ?= cc
# The version is defined once, in the public header.
VERSION  := $(shell sed -n 's/^\#define MT_VERSION "\(.*\)"/\1/p' include/memtrail.h)
STUB_SOVERSION := 0

# `make` alone builds everything (scripts/demo.sh runs it so), whatever
# rule comes first below.
.DEFAULT_GOAL := all

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g
BASEFLAGS := -std=gnu11 $(WARN) -Iinclude -Isrc -D_GNU_SOURCE -DMT_VERSION_STR='"$(VERSION)"' $(CPPFLAGS)
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# The option table needs xe_plan.c's size parser: only the agent and the CLI
# (which both have it) take it.
OPTIONS_SRC := src/common/options_table.c
COMMON_SRC := $(filter-out $(OPTIONS_SRC),$(wildcard src/common/*.c))
REPORT_SRC := $(wildcard src/report/*.c)
SYMBOL_SRC := $(wildcard src/symbol/*.c)
CLI_SRC    := $(wildcard src/cli/*.c) $(REPORT_SRC) $(SYMBOL_SRC) $(COMMON_SRC) $(OPTIONS_SRC)
# The CLI's libraries: libdw/libelf (elfutils) for symbolization.
# libstdc++'s demangler is loaded when a C++ name needs it (symbol.c).
CLI_LIBS   := -ldw -lelf -lz -ldl
# json-c (libjson-c-dev) reads what a process answers `memtrail sessions`;
# the CLI only: the agent never links it.
JSONC_CFLAGS := $(shell pkg-config --cflags json-c 2>/dev/null)
JSONC_LIBS   := $(or $(shell pkg-config --libs json-c 2>/dev/null),-ljson-c)
# Event sessions (src/xe): the engine runs in the agent; the CLI uses its
# sizing arithmetic (`memtrail xe plan`).
XE_SRC     := $(wildcard src/xe/*.c)
CLI_SRC    += src/xe/xe_plan.c
# Traces (src/trace): the writer runs in the agent (the event_file target's
# encoder), the reader in the CLI; both use zstd (libzstd-dev).
TRACE_W_SRC := $(wildcard src/trace/trace_write*.c src/trace/trace_util*.c)
TRACE_SRC   := $(wildcard src/trace/*.c)
# The analyzer of traces (memtrail analyze; report/export of a trace).
ANALYZE_SRC := $(wildcard src/analyze/*.c)
CLI_SRC    += $(TRACE_SRC) $(ANALYZE_SRC)
# Reference sets (src/refset): the recorder and the report run in the CLI.
REFSET_SRC := $(wildcard src/refset/*.c)
CLI_SRC    += $(REFSET_SRC)
# `memtrail html` (src/html): the page code and the vendored libraries
# (web/src, web/vendor; docs/html.md) are built into the binary by an
# assembler file of .incbin lines, regenerated when a file or the list of
# files changes.
WEB_FILES  := $(sort $(patsubst web/%,%,$(wildcard web/src/*.js web/src/*.css web/vendor/*/*.js \
                web/vendor/*/*.css web/vendor/*/LICENSE web/vendor/*/VERSION)))
WEB_ASM    := $(BUILD)/gen/web_assets.S
WEB_STAMP  := $(BUILD)/.webfiles
$(shell mkdir -p $(BUILD) && (echo '$(WEB_FILES)' | cmp -s - $(WEB_STAMP) || echo '$(WEB_FILES)' > $(WEB_STAMP)))
$(WEB_ASM): $(addprefix web/,$(WEB_FILES)) $(WEB_STAMP) scripts/web_embed.sh
	@mkdir -p $(dir $@)
	bash scripts/web_embed.sh $@ $(abspath web) $(WEB_FILES)
CLI_SRC    += $(wildcard src/html/*.c) $(WEB_ASM)
CLI_LIBS   += -lzstd -lpthread
AGENT_SRC  := $(wildcard src/agent/*.c) $(COMMON_SRC) $(OPTIONS_SRC) $(XE_SRC) $(TRACE_W_SRC)
HDRS       := $(wildcard include/*.h src/*/*.h)

BIN   := $(BUILD)/bin/memtrail
AGENT := $(BUILD)/lib/libmemtrail.so
STUB  := $(BUILD)/lib/libmemtrail-stub.so
PC    := $(BUILD)/lib/pkgconfig/memtrail.pc
# Exports of detail reports: folded stacks and pprof (zlib, in CLI_LIBS).
CLI_SRC += $(wildcard src/export/*.c)

# Test programs that run under the agent (plain build, no sanitizer: the
# agent interposes malloc, and so would ASan).
AGENT_TESTS := $(patsubst tests/agent/%.c,$(BUILD)/tests/agent/%,$(wildcard tests/agent/*.c)) \
               $(patsubst tests/agent/%.cc,$(BUILD)/tests/agent/%,$(wildcard tests/agent/*.cc))
CXX      ?= c++
# Unit tests of CLI-side code, built with ASan+UBSan.
UNIT_TESTS  := $(patsubst tests/%.c,$(BUILD)/asan/tests/%,$(wildcard tests/common/*.c tests/report/*.c tests/cli/*.c))
# The event engine's own tests, built with ASan+UBSan against src/xe.
XE_TESTS    := $(patsubst tests/%.c,$(BUILD)/asan/tests/%,$(wildcard tests/xe/*.c))
ASAN_BIN    := $(BUILD)/asan/bin/memtrail

.PHONY: all check deps install uninstall clean asan tests demo bench man completion
all: $(BIN) $(AGENT) $(STUB) $(PC) man completion

# Where `memtrail run` finds the agent when it is not beside the binary
# (../lib/memtrail/ or, in the build tree, ../lib/): rebuilt when it changes.
AGENTDIR_STAMP := $(BUILD)/.agentdir
$(shell mkdir -p $(BUILD) && (echo '$(AGENTDIR)' | cmp -s - $(AGENTDIR_STAMP) || echo '$(AGENTDIR)' > $(AGENTDIR_STAMP)))

$(BIN): $(CLI_SRC) $(HDRS) $(AGENTDIR_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(JSONC_CFLAGS) -DMT_AGENT_PATH='"$(AGENTDIR)/libmemtrail.so"' $(CFLAGS) $(LDFLAGS) -o $@ \
	  $(CLI_SRC) $(CLI_LIBS) $(JSONC_LIBS)

# The agent: hidden by default, exports only mt_* and the malloc family
# (marked in the source). -fno-builtin keeps the compiler from turning our
# own helpers into calls of the functions we interpose.
$(AGENT): $(AGENT_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fPIC -shared -fvisibility=hidden -fno-builtin-malloc \
	  -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc -ftls-model=initial-exec \
	  -fno-stack-protector -fno-omit-frame-pointer -Wl,-z,nodelete $(LDFLAGS) -o $@ $(AGENT_SRC) -lunwind -lzstd -ldl -lpthread

# The stub: a versioned soname, and the unversioned name for the linker.
$(STUB).$(STUB_SOVERSION): src/stub/stub.c include/memtrail.h include/memtrail_sessions.h
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fPIC -shared -Wl,-soname,libmemtrail-stub.so.$(STUB_SOVERSION) $(LDFLAGS) -o $@ $<
$(STUB): $(STUB).$(STUB_SOVERSION)
	ln -sf libmemtrail-stub.so.$(STUB_SOVERSION) $@

# The man pages and the bash completion, made from the memtrail just built
# (scripts/helpdoc.py reads every command's --help, so neither can drift
# from what the commands accept): memtrail(1) from docs/man/memtrail.1.scd
# with the command list filled in, memtrail-CMD(1) per command, and the
# hand-written pages of docs/man (libmemtrail(3)); scdoc renders them.
MAN_DIR    := $(BUILD)/man
MAN_STAMP  := $(MAN_DIR)/.stamp
COMPLETION := $(BUILD)/completion/memtrail
MAN_SRC    := $(wildcard docs/man/*.scd)
$(MAN_STAMP): $(BIN) scripts/helpdoc.py $(MAN_SRC)
	@rm -rf $(MAN_DIR) && mkdir -p $(MAN_DIR)/scd
	python3 scripts/helpdoc.py man $(BIN) docs/man $(MAN_DIR)/scd
	cp $(filter-out docs/man/memtrail.1.scd,$(MAN_SRC)) $(MAN_DIR)/scd/
	for f in $(MAN_DIR)/scd/*.scd; do n=$${f##*/}; scdoc <$$f >$(MAN_DIR)/$${n%.scd} || exit 1; done
	@touch $@
man: $(MAN_STAMP)

$(COMPLETION): $(BIN) scripts/helpdoc.py
	@mkdir -p $(dir $@)
	python3 scripts/helpdoc.py completion $(BIN) $@.tmp && mv $@.tmp $@
completion: $(COMPLETION)

# pkg-config metadata for $(PREFIX); `make install` writes it again for the
# PREFIX it installs to.
define write_pc
	printf 'prefix=%s\nlibdir=%s\nincludedir=$${prefix}/include\n\nName: memtrail\nDescription: memtrail native memory tracking API (stub; the agent is preloaded by memtrail run)\nVersion: %s\nLibs: -L$${libdir} -lmemtrail-stub\nCflags: -I$${includedir}\n' '$(1)' '$(3)' '$(VERSION)' > $(2)
endef

$(PC): Makefile
	@mkdir -p $(dir $@)
	$(call write_pc,$(PREFIX),$@,$${prefix}/lib)

$(BUILD)/tests/agent/%: tests/agent/%.c $(STUB) include/memtrail.h $(wildcard tests/agent/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fno-builtin -o $@ $< -L$(BUILD)/lib -lmemtrail-stub \
	  -Wl,-rpath,'$$ORIGIN/../../lib' -lpthread

$(BUILD)/tests/agent/%: tests/agent/%.cc $(STUB) include/memtrail.h $(wildcard tests/agent/*.h)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -Wall -Wextra -Werror -Iinclude $(CFLAGS) -fno-builtin -o $@ $< -L$(BUILD)/lib \
	  -lmemtrail-stub -Wl,-rpath,'$$ORIGIN/../../lib'

# Programs the reference-set recorder's tests run (tests/refset/rs_*.c;
# plain build, like the agent's test programs).
REFSET_PROGS := $(patsubst tests/refset/%.c,$(BUILD)/tests/refset/%,$(wildcard tests/refset/rs_*.c))
$(BUILD)/tests/refset/rs_%: tests/refset/rs_%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< -lpthread

$(ASAN_BIN): $(CLI_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(JSONC_CFLAGS) -O1 -g $(SAN) -o $@ $(CLI_SRC) $(CLI_LIBS) $(JSONC_LIBS)

$(BUILD)/asan/tests/xe/%: tests/xe/%.c $(XE_SRC) $(COMMON_SRC) $(HDRS) tests/unit.h $(wildcard tests/xe/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -o $@ $< $(XE_SRC) $(COMMON_SRC) -lpthread

# The trace writer and reader's own tests (ASan+UBSan).
TRACE_TESTS := $(patsubst tests/%.c,$(BUILD)/asan/tests/%,$(wildcard tests/trace/test_*.c))
$(BUILD)/asan/tests/trace/%: tests/trace/%.c $(TRACE_SRC) $(COMMON_SRC) $(HDRS) tests/unit.h $(wildcard tests/trace/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -o $@ $< $(TRACE_SRC) $(COMMON_SRC) -lzstd -lpthread -lm
# trace mode's merge of per-CPU runs (the agent's), which its test includes.
$(BUILD)/asan/tests/trace/test_merge: src/agent/trace_merge.c
# The order checker of traces of threaded programs (test_trace_threads.sh),
# and its own test, which includes it.
tests: $(BUILD)/asan/tests/trace/trace_order
$(BUILD)/asan/tests/trace/test_trace_order: tests/trace/trace_order.c
# A trace's meta values (test_trace.sh, test_ondemand.sh).
tests: $(BUILD)/asan/tests/trace/trace_meta

# The analyzer's tests (ASan+UBSan): traces written with the real writer,
# read with the real reader, checked against a brute-force model.
ANALYZE_TESTS := $(patsubst tests/%.c,$(BUILD)/asan/tests/%,$(wildcard tests/analyze/test_*.c))
$(BUILD)/asan/tests/analyze/%: tests/analyze/%.c $(TRACE_SRC) $(ANALYZE_SRC) $(REPORT_SRC) $(SYMBOL_SRC) $(COMMON_SRC) \
  $(HDRS) tests/unit.h $(wildcard tests/analyze/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -o $@ $< $(TRACE_SRC) $(ANALYZE_SRC) $(REPORT_SRC) $(SYMBOL_SRC) \
	  $(COMMON_SRC) $(CLI_LIBS)

# Reference-set tests (ASan+UBSan): the recording file, the report's
# arithmetic, against everything the CLI links; main.c comes as an object
# whose main is renamed (its cli_error & co. are what the commands call).
REFSET_TESTS := $(patsubst tests/%.c,$(BUILD)/asan/tests/%,$(wildcard tests/refset/test_*.c))
REFSET_CLI_MAIN := $(BUILD)/asan/tests/refset/cli_main.o
$(REFSET_CLI_MAIN): src/cli/main.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(JSONC_CFLAGS) -O1 -g $(SAN) -Dmain=mt_cli_main -Wno-missing-prototypes -c -o $@ $<
$(BUILD)/asan/tests/refset/%: tests/refset/%.c $(CLI_SRC) $(HDRS) tests/unit.h $(wildcard tests/refset/*.h) \
  $(REFSET_CLI_MAIN)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(JSONC_CFLAGS) -O1 -g $(SAN) -Itests -o $@ $< $(filter-out src/cli/main.c,$(CLI_SRC)) \
	  $(REFSET_CLI_MAIN) $(CLI_LIBS) $(JSONC_LIBS)

# The synthetic trace generator of the analysis benchmark.
TRACEGEN := $(BUILD)/bench/tracegen
$(TRACEGEN): bench/tracegen.c $(TRACE_SRC) $(COMMON_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 -g -o $@ bench/tracegen.c $(TRACE_SRC) $(COMMON_SRC) -lzstd -lpthread
.PHONY: tracegen
tracegen: $(TRACEGEN)
tests: $(TRACEGEN)

# The threaded workload with a known ledger (bench/tthreads.c): timed by
# bench/trace.sh, run by tests/agent/test_trace_threads.sh. Plain C, none of
# memtrail's code; -fno-builtin keeps malloc/free pairs from being elided.
TTHREADS := $(BUILD)/bench/tthreads
$(TTHREADS): bench/tthreads.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 -g -fno-builtin -o $@ $< -lpthread
.PHONY: tthreads
tthreads: $(TTHREADS)
tests: $(TTHREADS)

$(BUILD)/asan/tests/%: tests/%.c $(REPORT_SRC) $(SYMBOL_SRC) $(COMMON_SRC) $(HDRS) $(wildcard tests/*.h tests/report/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -o $@ $< $(REPORT_SRC) $(SYMBOL_SRC) $(COMMON_SRC) $(CLI_LIBS)

# Detail-report test programs (tests/cli/test_detail.sh): real stacks in
# known functions, built -g -O1; stripped copies (same build-id) and a
# rebuilt variant (another build-id).
DETAIL_DIR   := $(BUILD)/tests/detail
DETAIL_TESTS := $(DETAIL_DIR)/sites $(DETAIL_DIR)/sites.stripped $(DETAIL_DIR)/sites.v2 \
                $(DETAIL_DIR)/libmtplugin.stripped.so
DETAIL_FLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -g -O1 -fno-optimize-sibling-calls

$(DETAIL_DIR)/libmtplugin.so: tests/detail/plugin.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -Wall -Wextra -Werror -g -O1 -fPIC -shared -o $@ $<

$(DETAIL_DIR)/sites: tests/detail/sites.c $(DETAIL_DIR)/libmtplugin.so
	$(CC) $(DETAIL_FLAGS) -o $@ $< -L$(DETAIL_DIR) -lmtplugin -Wl,-rpath,'$$ORIGIN'

$(DETAIL_DIR)/sites.v2: tests/detail/sites.c $(DETAIL_DIR)/libmtplugin.so
	$(CC) $(DETAIL_FLAGS) -DVARIANT=1 -o $@ $< -L$(DETAIL_DIR) -lmtplugin -Wl,-rpath,'$$ORIGIN'

$(DETAIL_DIR)/sites.stripped: $(DETAIL_DIR)/sites
	strip -o $@ $<

$(DETAIL_DIR)/libmtplugin.stripped.so: $(DETAIL_DIR)/libmtplugin.so
	strip -o $@ $<

asan: $(ASAN_BIN) $(UNIT_TESTS) $(XE_TESTS) $(TRACE_TESTS) $(ANALYZE_TESTS) $(REFSET_TESTS)
tests: all asan $(AGENT_TESTS) $(DETAIL_TESTS) $(BUILD)/tests/agent/jemalloc/allocx $(REFSET_PROGS)

# The html test's large detail report (tests/html/many_sites.c): 2^N
# sites, each leaf of a recursion reached by its own return addresses.
$(BUILD)/tests/html/many_sites: tests/html/many_sites.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g -fno-optimize-sibling-calls -fno-inline -fno-builtin -o $@ $<
tests: $(BUILD)/tests/html/many_sites

# A program linked with jemalloc (Debian's libjemalloc2, which scripts/deps.sh
# installs), calling its own API: tests/agent/test_allocators.sh.
$(BUILD)/tests/agent/jemalloc/allocx: tests/agent/jemalloc/allocx.c tests/agent/ledger.h $(STUB)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fno-builtin -o $@ $< -L$(BUILD)/lib -lmemtrail-stub \
	  -Wl,-rpath,'$$ORIGIN/../../../lib' -l:libjemalloc.so.2

# The README's test command: installs what is missing, builds, runs everything.
check: deps
	$(MAKE) tests
	BUILD=$(BUILD) bash tests/run.sh

deps:
	bash scripts/deps.sh

# Every target the README names runs deps before it builds anything
# (tests/common/test_readme_targets.sh checks it): a fresh machine has
# neither the headers nor the tools.
demo: deps
	BUILD=$(BUILD) bash scripts/demo.sh

bench:
	bash scripts/deps.sh --bench
	$(MAKE) all
	bash bench/overhead.sh
	BUILD=$(BUILD) bash bench/hotpath.sh
	bash bench/xe.sh
	BUILD=$(BUILD) bash bench/trace.sh
	BUILD=$(BUILD) bash bench/readers.sh

# The readers on large reports (bench/readers.sh): a real 524,288-site
# detail report (report detail, query detail, diff, export) and a million
# categories, each held to 5 s.
.PHONY: bench-readers
bench-readers: deps
	$(MAKE) all
	BUILD=$(BUILD) bash bench/readers.sh

# Trace mode against heaptrack (bench/trace.sh): recording overhead, file
# size per event, analysis speed and RSS, a synthetic trace analysed
# within the memory bound (bench/tracegen, when its source is there), and
# threads (bench/tthreads).
.PHONY: bench-trace
bench-trace:
	bash scripts/deps.sh --bench
	$(MAKE) all $(if $(wildcard bench/tracegen.c),$(TRACEGEN)) $(TTHREADS)
	BUILD=$(BUILD) bash bench/trace.sh

# The event engine's benchmark (bench/xe.sh): the engine built -O2 with its
# benchmark program, and the LTTng-UST peer (needs liblttng-ust-dev).
XE_BENCH    := $(BUILD)/bench/xe_fire
LTTNG_BENCH := $(BUILD)/bench/lttng_fire
$(XE_BENCH): bench/xe_fire.c $(XE_SRC) $(COMMON_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 -g -o $@ bench/xe_fire.c $(XE_SRC) $(COMMON_SRC) -lpthread

$(LTTNG_BENCH): bench/lttng/lttng_fire.c bench/lttng/lttng_tp.c bench/lttng/memtrail_bench_tp.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -O2 -g -Ibench/lttng -o $@ bench/lttng/lttng_fire.c \
	  bench/lttng/lttng_tp.c -llttng-ust -ldl -lpthread

.PHONY: bench-xe bench-lttng
bench-xe: $(XE_BENCH)
bench-lttng: $(LTTNG_BENCH)

install: deps
	$(MAKE) all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/memtrail
	install -m 755 $(AGENT) $(DESTDIR)$(AGENTDIR)/libmemtrail.so
	install -m 755 $(STUB).$(STUB_SOVERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libmemtrail-stub.so.$(STUB_SOVERSION) $(DESTDIR)$(LIBDIR)/libmemtrail-stub.so
	$(call write_pc,$(PREFIX),$(DESTDIR)$(LIBDIR)/pkgconfig/memtrail.pc,$(LIBDIR))
	install -m 644 include/memtrail.h include/memtrail_alloc.h include/memtrail_sessions.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(BASHCOMPDIR)
	install -m 644 $(MAN_DIR)/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(MAN_DIR)/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 $(COMPLETION) $(DESTDIR)$(BASHCOMPDIR)/memtrail

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/memtrail $(DESTDIR)$(AGENTDIR)/libmemtrail.so \
	  $(DESTDIR)$(LIBDIR)/libmemtrail-stub.so $(DESTDIR)$(LIBDIR)/libmemtrail-stub.so.$(STUB_SOVERSION) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/memtrail.pc \
	  $(DESTDIR)$(PREFIX)/include/memtrail.h $(DESTDIR)$(PREFIX)/include/memtrail_alloc.h \
	  $(DESTDIR)$(PREFIX)/include/memtrail_sessions.h \
	  $(DESTDIR)$(MANDIR)/man1/memtrail.1 $(DESTDIR)$(MANDIR)/man1/memtrail-*.1 $(DESTDIR)$(MANDIR)/man3/libmemtrail.3 \
	  $(DESTDIR)$(BASHCOMPDIR)/memtrail
	-rmdir $(DESTDIR)$(AGENTDIR) 2>/dev/null

# The C sources in the layout of .clang-format (tests/common/test_format.sh
# checks it in `make check`).
FORMAT_FILES = $(shell git ls-files -- 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'tests/*.cc' 'bench/*.[ch]' 2>/dev/null)
format: deps
	clang-format -i $(FORMAT_FILES)
.PHONY: format

clean:
	rm -rf $(BUILD)

# Detail mode's test program: allocations from a shared library's function
# too, and a copy built with frame pointers for the frame-pointer walk.
$(BUILD)/tests/agent/libdetail_lib.so: tests/agent/lib/detail_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/tests/agent/detail: tests/agent/detail.c $(BUILD)/tests/agent/libdetail_lib.so $(STUB)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fno-builtin -o $@ $< -L$(BUILD)/tests/agent -ldetail_lib \
	  -Wl,-rpath,'$$ORIGIN' -lpthread

$(BUILD)/tests/agent/detail_fp: tests/agent/detail.c $(BUILD)/tests/agent/libdetail_lib.so $(STUB)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fno-omit-frame-pointer -fno-builtin -o $@ $< -L$(BUILD)/tests/agent \
	  -ldetail_lib -Wl,-rpath,'$$ORIGIN' -lpthread

tests: $(BUILD)/tests/agent/detail_fp

# Libraries detail_dl loads and unloads: dl_a and dl_b have the same code
# at the same offsets and other unwind rules; in dlnb/, without build-ids.
$(BUILD)/tests/agent/dl/libdl_%.so: tests/agent/lib/dl_%.S
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -Wl,--build-id -o $@ $<
$(BUILD)/tests/agent/dl/libdl_c.so: tests/agent/lib/dl_c.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -Wl,--build-id -o $@ $<
$(BUILD)/tests/agent/dlnb/libdl_%.so: tests/agent/lib/dl_%.S
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -Wl,--build-id=none -o $@ $<

tests: $(BUILD)/tests/agent/dl/libdl_a.so $(BUILD)/tests/agent/dl/libdl_b.so $(BUILD)/tests/agent/dl/libdl_c.so \
       $(BUILD)/tests/agent/dlnb/libdl_a.so $(BUILD)/tests/agent/dlnb/libdl_b.so

# An allocator whose blocks sit above PROT_NONE pages (test_allocators.sh).
$(BUILD)/tests/agent/libguardalloc.so: tests/agent/lib/guardalloc.c
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -fno-builtin -o $@ $<
tests: $(BUILD)/tests/agent/libguardalloc.so

# An interposer forwarding to the next malloc, preloaded before the agent
# (test_allocators.sh).
$(BUILD)/tests/agent/libfwdalloc.so: tests/agent/lib/fwdalloc.c
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -fno-builtin -o $@ $< -ldl
tests: $(BUILD)/tests/agent/libfwdalloc.so

# An allocator with its own heap and no memalign, valloc or pvalloc,
# preloaded before the agent (test_allocators.sh).
$(BUILD)/tests/agent/libownheap.so: tests/agent/lib/ownheap.c
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -fno-builtin -o $@ $<
tests: $(BUILD)/tests/agent/libownheap.so

# A malloc that stalls for one size, preloaded after the agent (test_spans.sh).
$(BUILD)/tests/agent/libslowalloc.so: tests/agent/lib/slowalloc.c
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -fno-builtin -o $@ $<
tests: $(BUILD)/tests/agent/libslowalloc.so

# A send() that holds one answer of the control socket, preloaded after
# the agent (test_ondemand.sh: a stop racing the program's exit).
$(BUILD)/tests/agent/libholdsend.so: tests/agent/lib/holdsend.c
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -o $@ $<
tests: $(BUILD)/tests/agent/libholdsend.so

# perf_event_open refused, for `refset record`'s error (test_record.sh).
$(BUILD)/tests/refset/libnoperf.so: tests/refset/lib/noperf.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -fPIC -o $@ $< -ldl
tests: $(BUILD)/tests/refset/libnoperf.so

# Hostile programs (tests/hostile/test_programs.sh): each is run bare and
# under the agent in every mode and must behave the same. Plain C, linked
# with nothing of memtrail's; the Rust and cgo ones only where rustc and go
# are installed (the test prints SKIP otherwise).
HOSTILE_DIR   := $(BUILD)/tests/hostile
HOSTILE_TESTS := $(patsubst tests/hostile/%.c,$(HOSTILE_DIR)/%,$(wildcard tests/hostile/*.c))
$(HOSTILE_DIR)/%: tests/hostile/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -fno-builtin -o $@ $< -lpthread
tests: $(HOSTILE_TESTS)

RUSTC := $(shell command -v rustc 2>/dev/null)
ifneq ($(RUSTC),)
$(HOSTILE_DIR)/rust: tests/hostile/rust.rs
	@mkdir -p $(dir $@)
	MAKEFLAGS= $(RUSTC) -O -o $@ $<
tests: $(HOSTILE_DIR)/rust
endif
GO := $(shell command -v go 2>/dev/null)
ifneq ($(GO),)
$(HOSTILE_DIR)/cgo: tests/hostile/cgo.go
	@mkdir -p $(dir $@)
	cd tests/hostile && CGO_ENABLED=1 GO111MODULE=off $(GO) build -o $(abspath $@) cgo.go
tests: $(HOSTILE_DIR)/cgo
endif

# The trace format's size and speed on mbench-like events (bench/trace_codec.c).
TRACE_CODEC_BENCH := $(BUILD)/bench/trace_codec
$(TRACE_CODEC_BENCH): bench/trace_codec.c tests/trace/trace_gen.h $(TRACE_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 -g -Itests -o $@ bench/trace_codec.c $(TRACE_SRC) -lzstd -lpthread -lm

.PHONY: bench-trace-codec
bench-trace-codec: $(TRACE_CODEC_BENCH)
	$(TRACE_CODEC_BENCH)

# The fuzz targets (libFuzzer, clang) of the readers of untrusted text and
# bytes, and their corpus replays under gcc's ASan+UBSan in `make check`:
# traces (tests/trace/fuzz_read.c), reports with their printers and
# exporters (tests/report/fuzz/), MEMTRAIL_OPTIONS (tests/agent/fuzz/),
# session definitions and predicates (tests/xe/fuzz/). `make fuzz` builds
# them all and runs each for FUZZ_SECONDS (tests/fuzz.sh); a crash stops it
# with the input kept under build/fuzz/.
FUZZ_CC     := clang
FUZZ_FLAGS  := -std=gnu11 $(WARN) -Iinclude -Isrc -Itests -D_GNU_SOURCE -DFUZZING -O1 -g \
               -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60
$(BUILD)/asan/tests/trace/test_corpus: tests/trace/fuzz_read.c
FUZZ_READ := $(BUILD)/fuzz/fuzz_read
$(FUZZ_READ): tests/trace/fuzz_read.c $(TRACE_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/trace/fuzz_read.c $(TRACE_SRC) -lzstd -lpthread

# Reference-set recordings: the reader (src/refset/refset_read.c).
RS_FILE_SRC := src/refset/refset_read.c src/refset/refset_write.c src/trace/trace_util.c
$(BUILD)/fuzz/fuzz_refset: tests/refset/fuzz_read.c tests/fuzz_check.h $(RS_FILE_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(RS_FILE_SRC) -lzstd
$(BUILD)/asan/tests/refset/test_corpus: tests/refset/fuzz_read.c tests/fuzz_replay.h tests/fuzz_check.h
# The recorder's test reads recordings back with the reader.
$(BUILD)/tests/refset/rs_read: tests/refset/rs_read.c $(RS_FILE_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(RS_FILE_SRC) -lzstd

# Reports: the reader and everything that prints or exports what it read.
FUZZ_REPORT_SRC := $(REPORT_SRC) $(SYMBOL_SRC) $(COMMON_SRC) $(wildcard src/export/*.c)
$(BUILD)/fuzz/fuzz_report: tests/report/fuzz/fuzz_report.c $(FUZZ_REPORT_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_REPORT_SRC) $(CLI_LIBS)
$(BUILD)/asan/tests/report/test_fuzz_corpus: tests/report/fuzz/test_corpus.c tests/report/fuzz/fuzz_report.c \
  tests/fuzz_replay.h tests/unit.h $(FUZZ_REPORT_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -Itests/report/fuzz -o $@ $< $(FUZZ_REPORT_SRC) $(CLI_LIBS)

# MEMTRAIL_OPTIONS: the agent's parser alone (src/agent/options.c).
FUZZ_OPTIONS_SRC := src/agent/options.c src/common/options_table.c src/common/out.c src/xe/xe_plan.c
$(BUILD)/fuzz/fuzz_options: tests/agent/fuzz/fuzz_options.c $(FUZZ_OPTIONS_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_OPTIONS_SRC)
$(BUILD)/asan/tests/agent/test_fuzz_corpus: tests/agent/fuzz/test_corpus.c tests/agent/fuzz/fuzz_options.c \
  tests/fuzz_replay.h tests/unit.h $(FUZZ_OPTIONS_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -Itests/agent/fuzz -o $@ $< $(FUZZ_OPTIONS_SRC)

# Session definitions (MEMTRAIL_SESSIONS) and predicates (src/xe).
$(BUILD)/fuzz/fuzz_sessions $(BUILD)/fuzz/fuzz_pred: $(BUILD)/fuzz/fuzz_%: tests/xe/fuzz/fuzz_%.c $(XE_SRC) $(COMMON_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(XE_SRC) $(COMMON_SRC) -lpthread
$(BUILD)/asan/tests/xe/test_fuzz_sessions $(BUILD)/asan/tests/xe/test_fuzz_pred: $(BUILD)/asan/tests/xe/test_fuzz_%: \
  tests/xe/fuzz/test_corpus_%.c tests/xe/fuzz/fuzz_%.c tests/fuzz_replay.h tests/unit.h $(XE_SRC) $(COMMON_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g $(SAN) -Itests -Itests/xe/fuzz -o $@ $< $(XE_SRC) $(COMMON_SRC) -lpthread

FUZZ_TARGETS := $(FUZZ_READ) $(BUILD)/fuzz/fuzz_report $(BUILD)/fuzz/fuzz_options $(BUILD)/fuzz/fuzz_sessions \
                $(BUILD)/fuzz/fuzz_pred $(BUILD)/fuzz/fuzz_refset
FUZZ_REPLAYS := $(BUILD)/asan/tests/report/test_fuzz_corpus $(BUILD)/asan/tests/agent/test_fuzz_corpus \
                $(BUILD)/asan/tests/xe/test_fuzz_sessions $(BUILD)/asan/tests/xe/test_fuzz_pred
asan: $(FUZZ_REPLAYS)

.PHONY: fuzz fuzz-build fuzz-seeds
fuzz-build: $(FUZZ_TARGETS)
# Built by `make check` too, so that clang's warnings (-Werror) see every
# change to what they compile; the corpora are replayed by the ASan builds.
tests: $(FUZZ_TARGETS)
# The hand-made seeds of the text targets (tests/fuzz/mkseeds.py).
fuzz-seeds:
	python3 tests/fuzz/mkseeds.py
fuzz: deps
	$(MAKE) fuzz-build
	BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz.sh

# The fuzz corpus's seeds (tests/trace/mkcorpus.c): `make trace-corpus`
# writes them into tests/trace/corpus/ (committed with the fuzzer's finds).
$(BUILD)/tests/trace/mkcorpus: tests/trace/mkcorpus.c $(TRACE_SRC) $(HDRS) $(wildcard tests/trace/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g -Itests -o $@ $< $(TRACE_SRC) -lzstd -lpthread -lm
.PHONY: trace-corpus
trace-corpus: $(BUILD)/tests/trace/mkcorpus
	@mkdir -p tests/trace/corpus
	$(BUILD)/tests/trace/mkcorpus tests/trace/corpus

# The recording reader's fuzz seeds (tests/refset/mkcorpus.c): `make
# refset-corpus` writes them into tests/refset/corpus/ (committed).
$(BUILD)/tests/refset/mkcorpus: tests/refset/mkcorpus.c $(RS_FILE_SRC) $(HDRS) $(wildcard tests/refset/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O1 -g -Itests -o $@ $< $(RS_FILE_SRC) -lzstd
.PHONY: refset-corpus
refset-corpus: $(BUILD)/tests/refset/mkcorpus
	$(BUILD)/tests/refset/mkcorpus tests/refset/corpus
