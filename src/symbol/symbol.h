/* symbol.h — offline symbolization of recorded return addresses (a
 * detail report's sites, a trace's stacks): function, file:line (through
 * inlined calls) and module, read with libdw (elfutils) from the modules'
 * files on disk, or from their separate debug info
 * (/usr/lib/debug/.build-id/...), never in the traced process. The
 * symbolizer knows nothing of reports or traces: its callers give it the
 * modules they recorded.
 *
 * CLI-side code: allocates freely. */
#ifndef MT_SYMBOL_H
#define MT_SYMBOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A module (an ELF object) of the recorded process, as its recorder saw it. */
struct sym_module {
    const char *path;    /* its file (NULL: ""); unreadable: module+offset frames */
    const char *buildid; /* lowercase hex, or NULL: not checked */
    uint64_t bias;       /* runtime address - ELF virtual address */
    uint64_t start, end; /* [start, end): the runtime addresses it holds */
};

/* One frame of a symbolized address. A return address that lies in
 * inlined code gives several: the innermost inlined function first, the
 * function it was inlined into last. Strings belong to the symbolizer and
 * live until sym_close. */
struct sym_frame {
    const char *function; /* demangled name, or NULL when unknown */
    const char *file;     /* source file, or NULL */
    int line;             /* 0 when unknown */
    const char *module;   /* the module's path, or NULL (no module) */
    uint64_t address;     /* the recorded return address */
    uint64_t offset;      /* address - the module's bias (ELF address); 0 without a module */
    bool inlined;         /* this frame was inlined into the next one */
};

struct symbolizer;

/* A symbolizer for n modules (copied: the caller's array need not live
 * on). Where modules overlap (never in one process), an address belongs to
 * the first in the array that holds it. Modules whose file is missing,
 * unreadable or has another build-id than recorded get module+offset
 * frames only; sym_warnings says which. NULL on out-of-memory. */
struct symbolizer *sym_open(const struct sym_module *mods, size_t n);

/* Modules opened ahead of sym_open (their files and debug info read, the
 * slow part), e.g. on another thread while a trace is being read: a
 * symbolizer opened with sym_open_cached takes the modules it needs from
 * the cache instead of opening them again (same path, bias and build-id),
 * with the same warnings. A cache is used by one thread at a time and must
 * outlive the symbolizers that take from it. */
struct sym_cache;
struct sym_cache *sym_cache_new(void); /* NULL on out-of-memory */
/* Opens the modules (of n) that some of the naddr return addresses lie in
 * (nothing is kept of either array). */
void sym_cache_load(struct sym_cache *c, const struct sym_module *mods, size_t n, const uint64_t *addresses,
                    size_t naddr);
void sym_cache_free(struct sym_cache *c);
struct symbolizer *sym_open_cached(const struct sym_module *mods, size_t n, struct sym_cache *c);

/* Opens now the modules these return addresses lie in (those not opened
 * yet), so that sym_warnings is complete before the first lookup and says
 * nothing of modules no frame uses. Lookups open the others as needed. */
void sym_prepare(struct symbolizer *s, const uint64_t *addresses, size_t n);

/* Symbolizes one recorded return address into up to `max` frames
 * (innermost first); returns how many were written (>= 1 when max >= 1). */
int sym_lookup(struct symbolizer *s, uint64_t address, struct sym_frame *out, int max);

/* One line per module that could not be symbolized and why ("no such
 * file", "build-id differs: rebuilt since the run?", "no debug info"),
 * joined with '\n'; "" when none. */
const char *sym_warnings(struct symbolizer *s);

void sym_close(struct symbolizer *s);

/* One symbolized frame as the text reports show it, on one line after
 * `indent`: "[0x...] function [inlined] (file:line) module". */
void sym_print_frame(FILE *out, const char *indent, uint64_t address, const struct sym_frame *f);

#endif
