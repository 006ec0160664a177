/* options_table.h — every agent option (MEMTRAIL_OPTIONS) in one table:
 * its key, type, accepted values or range, default and a line of help.
 * The agent's parser (agent/options.c), `memtrail run`'s checks of the
 * flags that become options, `memtrail options` and the README's table
 * all read it. Static data and malloc-free functions only: the agent
 * parses at start-up, inside the program's first malloc. */
#ifndef MT_COMMON_OPTIONS_TABLE_H
#define MT_COMMON_OPTIONS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/out.h"

/* The values of the choice options, as the agent keeps them. */
enum { MT_MODE_OFF, MT_MODE_SUMMARY, MT_MODE_DETAIL, MT_MODE_TRACE, MT_MODE_SAMPLE };
enum { MT_ON_ERROR_REPORT, MT_ON_ERROR_ABORT };
enum { MT_QUERY_OFF, MT_QUERY_SIGNAL, MT_QUERY_THREAD };
enum { MT_ALLOC_TIMING_SPANS, MT_ALLOC_TIMING_ALL };
enum { MT_UNWIND_AUTO, MT_UNWIND_LIBUNWIND, MT_UNWIND_FP, MT_UNWIND_CFI };
#define MT_DEPTH_MAX 64
#define MT_OUTPUT_MAX 3800 /* bytes of an output template */

/* The options, in the order they are documented. */
enum {
    MT_OPT_MODE,
    MT_OPT_DEPTH,
    MT_OPT_UNWIND,
    MT_OPT_OUTPUT,
    MT_OPT_TRACE_BUFFER,
    MT_OPT_TRACE_LOSS,
    MT_OPT_TRACE_TIME_UNIT,
    MT_OPT_TRACE_LEVEL,
    MT_OPT_TRACE_CHUNK,
    MT_OPT_TRACE_THREADS,
    MT_OPT_ON_ERROR,
    MT_OPT_CANARY,
    MT_OPT_CRASH_REPORT,
    MT_OPT_FOLLOW_EXEC,
    MT_OPT_QUERY,
    MT_OPT_START,
    MT_OPT_SAMPLE_RATE,
    MT_OPT_SAMPLE_SEED,
    MT_OPT_REFSET_FD,
    MT_OPT_PEAK_STEP,
    MT_OPT_LIMIT,
    MT_OPT_INFO_INTERVAL,
    MT_OPT_ALLOC_TIMING,
    MT_OPT_SPAN_FAULTS,
    MT_OPT_RUN_PID,
    MT_NOPT
};

/* MT_OPTT_SIZE: a size, a bare number counting MB; MT_OPTT_BYTES: the same,
 * a bare number counting bytes. */
enum { MT_OPTT_CHOICE, MT_OPTT_INT, MT_OPTT_SIZE, MT_OPTT_BYTES, MT_OPTT_PATH };

typedef struct mt_optchoice {
    const char *name;
    int value;
    const char *doc; /* what it means, for the docs ("" when the name says it) */
} mt_optchoice;

typedef struct mt_optdef {
    const char *key;
    int type;                    /* MT_OPTT_* */
    const mt_optchoice *choices; /* MT_OPTT_CHOICE: NULL-named entry ends them */
    int64_t min, max;            /* MT_OPTT_INT, MT_OPTT_SIZE and MT_OPTT_BYTES (bytes) */
    const char *accepted;        /* MT_OPTT_INT/SIZE/PATH: the accepted values, in words */
    const char *dflt;            /* the default, as written */
    const char *doc;             /* what it does, for the docs */
} mt_optdef;

extern const mt_optdef mt_optdefs[MT_NOPT];

/* The option named key[0..klen), or -1. */
int mt_opt_find(const char *key, size_t klen);
/* Checks val for option k; sets *out to the choice's value, the number or
 * the size in bytes (a path: its length). 0, or -EINVAL. */
int mt_opt_value(int k, const char *val, int64_t *out);
/* An output template's '%' that is not %p, %e or %% (a typo, or a '%'
 * meant literally: %% writes one), as its offset; -1 when there is none.
 * The agent and `memtrail run` expand a template alike only when every
 * '%' is one of those. */
long mt_template_bad(const char *t);
/* " (accepted: ...)" for option k. */
void mt_opt_accepted(mt_out *o, int k);
/* "mode, depth, ...": every key. */
void mt_opt_keys(mt_out *o);

#endif
