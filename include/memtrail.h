/* memtrail.h — the public C API of memtrail, a native memory tracker.
 *
 * Link with -lmemtrail-stub (no-op versions of every function here) and run
 * under `memtrail run` (or LD_PRELOAD=libmemtrail.so): the agent's real
 * definitions take precedence over the stub's, so instrumented programs
 * run unchanged with or without the agent.
 *
 * All functions are thread-safe and never allocate through malloc. Event
 * sessions have their own header, <memtrail_sessions.h>; a custom
 * allocator's wrappers that need nothing linked, <memtrail_alloc.h>. */
#ifndef MEMTRAIL_H
#define MEMTRAIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_VERSION "0.1.0"

/* Longest category name, without the terminating NUL. Names use
 * [A-Za-z0-9_.:/+-] only, so they survive every report format. */
#define MT_CATEGORY_NAME_MAX 47
/* How many user categories a process may define. */
#define MT_MAX_USER_CATEGORIES 60
/* How deep the per-thread tag stack goes. */
#define MT_TAG_DEPTH 32

/* Allocations made by the calling thread after this call are counted in
 * category `name` (created on first use) until the matching mt_tag_pop().
 * "malloc" is the default category; the other built-in names (memtrail,
 * heap, stacks, mmap, files, code, other) cannot be tags.
 * Returns 0, or -EINVAL (bad or built-in name), -ENOSPC (too many categories),
 * -EOVERFLOW (tag stack full; the tag is not pushed), -ENOSYS (no agent). */
int mt_tag_push(const char *name);

/* Undo the last successful mt_tag_push() of this thread. Returns 0, or
 * -ENOENT when the stack is empty. */
int mt_tag_pop(void);

/* Write the summary report now: to `path` (%p expands to the pid, %e to the
 * program name, %% to %) or, when path is NULL, to the configured output.
 * Returns 0 or a negative errno code. */
int mt_report_write(const char *path);

/* 1 when the agent is loaded and tracking, 0 otherwise. */
int mt_is_active(void);

/* ---- a program's own allocator ---------------------------------------------
 * A program that serves memory from its own pools or arenas reports each
 * block it hands out and takes back, and memtrail counts them as it counts
 * malloc's: in the category of the calling thread's current tag, or
 * "custom" when there is none, in every mode (detail gives their stacks,
 * trace their events). Pointers are keys only: they are never read. Up to
 * 1048576 reported blocks can be live at once. Without the agent these do
 * nothing. <memtrail_alloc.h> has wrappers that need no library at link time.
 *   mt_alloc_report(ptr, size)         ptr now holds a block of size bytes
 *   mt_free_report(ptr)                the block at ptr is given back
 *   mt_realloc_report(old, ptr, size)  the block at old is now at ptr (maybe
 *                                      the same) with size bytes; old NULL is
 *                                      an alloc, ptr NULL a free */
void mt_alloc_report(const void *ptr, size_t size);
void mt_free_report(const void *ptr);
void mt_realloc_report(const void *old, const void *ptr, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* MEMTRAIL_H */
