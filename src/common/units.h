/* units.h — sizes and durations as text, the same in every command.
 *
 * Sizes use binary units labelled as HotSpot's Native Memory Tracking
 * labels them: B, KB (1024 bytes), MB (1024^2), GB, TB, PB, EB. A value is
 * written without a space before its unit ("4792KB", "0.879MB"):
 *   - exact whole units print as an integer ("4792KB", "3MB", "1000B");
 *   - anything else with three significant digits, more when the integer
 *     part has more ("0.977KB", "1.50MB", "879KB", "4793KB"), so nothing
 *     nonzero prints as 0 and the error stays below 0.5%.
 * Durations in ns, us, ms or s, whichever keeps the integer part below
 * 1000 (s above), with three decimals below the second unit: "850ns",
 * "12.345us", "39.290ms", "1.250s".
 *
 * Malloc-free and stdio-free (usable in the agent): each function writes a
 * NUL-terminated string into buf (cut to fit len) and returns buf. */
#ifndef MT_COMMON_UNITS_H
#define MT_COMMON_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Room for any size or duration these write. */
#define MT_UNITS_MAX 48

/* bytes in a fixed unit of unit_bytes bytes (a power of 1024, e.g. 1024
 * for "KB"), labelled `label`. Negative values get a '-'. */
const char *mt_size_in(char *buf, size_t len, int64_t bytes, uint64_t unit_bytes, const char *label);

/* bytes in the largest unit it reaches: B below 1 KB, then KB .. EB. */
const char *mt_size(char *buf, size_t len, int64_t bytes);
const char *mt_size_u64(char *buf, size_t len, uint64_t bytes);

/* A duration (or a time since an origin) of ns nanoseconds. */
const char *mt_duration(char *buf, size_t len, uint64_t ns);

#endif
