/* options.c — the parser of MEMTRAIL_OPTIONS: "key=value:key=value"
 * into an mt_env_options, each value checked against the option table
 * (common/options_table.c), the first problem one line naming the key,
 * the value and what is accepted. Called once at start-up
 * (init.c), before the agent tracks anything: no allocation, no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/options.h"
#include "common/out.h"
#include "common/options_table.h"

/* Where each option goes in mt_env_options: the table (common/
 * options_table.c) says what a value may be; this says where it is kept. */
static void store(mt_env_options *opt, int k, int64_t v, const char *val)
{
    switch (k) {
    case MT_OPT_MODE: opt->mode = (int)v; break;
    case MT_OPT_DEPTH: opt->depth = (int)v; break;
    case MT_OPT_UNWIND: opt->unwind = (int)v; break;
    case MT_OPT_SAMPLE_RATE: opt->sample_rate = (uint64_t)v; break;
    case MT_OPT_SAMPLE_SEED: opt->sample_seed = (uint64_t)v; break;
    case MT_OPT_OUTPUT: memcpy(opt->output, val, (size_t)v + 1); break;
    case MT_OPT_TRACE_BUFFER: opt->trace_buffer = (uint64_t)v; break;
    case MT_OPT_TRACE_LOSS: opt->trace_wait = (int)v; break;
    case MT_OPT_TRACE_TIME_UNIT: opt->trace_time_unit_ns = (uint32_t)v; break;
    case MT_OPT_TRACE_LEVEL: opt->trace_level = (int)v; break;
    case MT_OPT_TRACE_CHUNK: opt->trace_chunk = (uint32_t)v; break;
    case MT_OPT_TRACE_THREADS: opt->trace_threads = (uint32_t)v; break;
    case MT_OPT_ON_ERROR: opt->on_error = (int)v; break;
    case MT_OPT_CANARY: opt->canary_fit = (int)v; break;
    case MT_OPT_CRASH_REPORT: opt->crash_report = (int)v; break;
    case MT_OPT_FOLLOW_EXEC: opt->follow_exec = (int)v; break;
    case MT_OPT_QUERY: opt->query = (int)v; break;
    case MT_OPT_START: opt->start = (int)v; break;
    case MT_OPT_REFSET_FD: opt->refset_fd = (int)v; break;
    case MT_OPT_PEAK_STEP: opt->peak_step = (uint64_t)v; break;
    case MT_OPT_LIMIT: opt->limit = (uint64_t)v; break;
    case MT_OPT_INFO_INTERVAL: opt->info_interval_ms = (int)v; break;
    case MT_OPT_ALLOC_TIMING: opt->alloc_timing = (int)v; break;
    case MT_OPT_SPAN_FAULTS: opt->span_faults = (int)v; break;
    case MT_OPT_RUN_PID: opt->run_pid = (int)v; break;
    }
}

static int set_option(mt_env_options *opt, const char *key, size_t klen, const char *val, char *err,
                      size_t errlen)
{
    mt_out o;
    mt_out_init(&o, err, errlen, -1);
    int k = mt_opt_find(key, klen);
    int64_t v;
    if (k < 0) {
        mt_out_str(&o, "MEMTRAIL_OPTIONS: unknown key '");
        mt_out_shown(&o, key, klen);
        mt_out_str(&o, "' (accepted: ");
        mt_opt_keys(&o);
        mt_out_str(&o, "); running untracked");
        mt_out_cstr(&o);
        return -EINVAL;
    }
    if (mt_opt_value(k, val, &v) < 0) {
        mt_out_str(&o, "MEMTRAIL_OPTIONS: bad value '");
        mt_out_shown(&o, val, strlen(val));
        mt_out_str(&o, "' for ");
        mt_out_shown(&o, key, klen);
        mt_opt_accepted(&o, k);
        mt_out_str(&o, "; running untracked");
        mt_out_cstr(&o);
        return -EINVAL;
    }
    store(opt, k, v, val);
    return 0;
}

int mt_options_parse(const char *s, mt_env_options *opt, char *err, size_t errlen)
{
    char *val = opt->value;
    if (err && errlen)
        err[0] = '\0';
    while (*s) {
        const char *key = s;
        while (*s && *s != '=' && *s != ':')
            s++;
        size_t klen = (size_t)(s - key);
        if (*s != '=') {
            if (klen == 0 && *s == ':') { /* tolerate empty fields */
                s++;
                continue;
            }
            mt_out o;
            mt_out_init(&o, err, errlen, -1);
            mt_out_str(&o, "MEMTRAIL_OPTIONS: '");
            mt_out_shown(&o, key, klen < 64 ? klen : 64);
            mt_out_str(&o, "' is not key=value (accepted keys: ");
            mt_opt_keys(&o);
            mt_out_str(&o, "); running untracked");
            mt_out_cstr(&o);
            return -EINVAL;
        }
        s++;
        size_t n = 0;
        while (*s && *s != ':') {
            if (*s == '\\' && (s[1] == ':' || s[1] == '\\'))
                s++;
            if (n + 1 < sizeof opt->value)
                val[n++] = *s;
            s++;
        }
        val[n] = '\0';
        if (*s == ':')
            s++;
        if (set_option(opt, key, klen, val, err, errlen) < 0)
            return -EINVAL;
    }
    return 0;
}
